################################################################################
#
# marmoset
#
################################################################################

MARMOSET_VERSION = 0.1.0
# Release tarball from the project's public repository; to build the checkout
# this tree lives in, see board/README.md (MARMOSET_OVERRIDE_SRCDIR).
MARMOSET_SITE = $(call github,marmoset-httpd,marmoset,v$(MARMOSET_VERSION))
MARMOSET_LICENSE = MIT
MARMOSET_LICENSE_FILES = LICENSE

# Buildroot sets its own release profile (optimisation level from
# BR2_OPTIMIZE_*, LTO from BR2_ENABLE_LTO): nothing here relies on
# marmoset's [profile.release].

# crypt(3) for Basic auth: in libc on musl, in libxcrypt on glibc.
ifeq ($(BR2_PACKAGE_LIBXCRYPT),y)
MARMOSET_DEPENDENCIES += libxcrypt
endif

# A checkout built with MARMOSET_OVERRIDE_SRCDIR is built like the release
# tarball, whose .cargo/config.toml Buildroot replaces when it vendors the
# crates: the checkout's own one (rustflags for the project's linkers,
# +crt-static, its rustc wrapper) is left out, and so are build outputs.
MARMOSET_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS += \
	--exclude /.cargo/config.toml --exclude /target --exclude /dist \
	--exclude /tests/out --exclude /bench/out --exclude /fuzz/target

# HTTPS: ring's C and assembly are built by the cross compiler, which
# pkg-cargo.mk hands to cargo (CC). Its install step runs `cargo install`,
# which builds again with the install options only: without the feature
# there, the plain binary would be installed.
ifeq ($(BR2_PACKAGE_MARMOSET_TLS),y)
MARMOSET_CARGO_BUILD_OPTS += --features tls
MARMOSET_CARGO_INSTALL_OPTS += --features tls
endif

define MARMOSET_USERS
	marmoset -1 marmoset -1 * - - - Marmoset HTTP server
endef

define MARMOSET_INSTALL_INIT_SYSV
	$(INSTALL) -D -m 0755 $(@D)/init/S50marmoset \
		$(TARGET_DIR)/etc/init.d/S50marmoset
endef

define MARMOSET_INSTALL_INIT_SYSTEMD
	$(INSTALL) -D -m 0644 $(@D)/init/marmoset.service \
		$(TARGET_DIR)/usr/lib/systemd/system/marmoset.service
endef

$(eval $(cargo-package))
