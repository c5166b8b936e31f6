SUMMARY = "Minimal-footprint HTTP/1.1 server for embedded device web UIs"
HOMEPAGE = "https://github.com/marmoset-httpd/marmoset"
LICENSE = "MIT"
LIC_FILES_CHKSUM = "file://LICENSE;md5=1f162984ada2f734f1ea722904214838"

SRC_URI = "git://github.com/marmoset-httpd/marmoset.git;protocol=https;branch=main"
# v0.1.0
SRCREV = "0000000000000000000000000000000000000000"
# S is oe-core's default, ${UNPACKDIR}/${BP}, where the git fetcher unpacks.

# Basic auth calls crypt(3): with glibc the binary links -lcrypt, provided
# by libxcrypt; with musl, virtual/crypt is musl itself.
DEPENDS += "virtual/crypt"

inherit cargo cargo-update-recipe-crates update-rc.d systemd useradd

# crates.io dependencies, generated from Cargo.lock by board/crates-inc.sh
# (same output as `bitbake -c update_crates marmoset`).
require ${BPN}-crates.inc

# HTTPS (rustls with ring, about 500 KB more): off by default; turn it on
# with PACKAGECONFIG:append:pn-marmoset = " tls" in local.conf. cargo.bbclass
# passes PACKAGECONFIG_CONFARGS to cargo build.
PACKAGECONFIG ??= ""
PACKAGECONFIG[tls] = "--features tls"

# 32-bit MIPS with musl: rustix calls the C library there and would pass
# 64-bit time_t structs to the 32-bit time_t functions the libc crate links,
# so the event loop's timers would never fire; this is rustix's own switch
# for a 32-bit time_t C library (glibc builds get it from rustix itself).
RUSTFLAGS:append:libc-musl:mipsarcho32 = " --cfg fix_y2038"

# Cargo.toml's release profile strips the binary; leave that to oe's
# do_package (debug split, QA "already-stripped").
export CARGO_PROFILE_RELEASE_STRIP = "false"

# INIT_MANAGER picks one init system (sysvinit or systemd, not both):
# install the file of the one in DISTRO_FEATURES. update-rc.d and systemd
# act only when their feature is present.
do_install:append() {
    install -d ${D}${sysconfdir}/marmoset
    install -m 0644 ${S}/rootfs-overlay/etc/marmoset/marmoset.conf ${D}${sysconfdir}/marmoset/
    if ${@bb.utils.contains('DISTRO_FEATURES', 'sysvinit', 'true', 'false', d)}; then
        install -d ${D}${sysconfdir}/init.d
        install -m 0755 ${S}/init/S50marmoset ${D}${sysconfdir}/init.d/marmoset
    fi
    if ${@bb.utils.contains('DISTRO_FEATURES', 'systemd', 'true', 'false', d)}; then
        install -d ${D}${systemd_system_unitdir}
        install -m 0644 ${S}/init/marmoset.service ${D}${systemd_system_unitdir}/
    fi
}

INITSCRIPT_NAME = "marmoset"
INITSCRIPT_PARAMS = "defaults 50"

SYSTEMD_SERVICE:${PN} = "marmoset.service"

USERADD_PACKAGES = "${PN}"
USERADD_PARAM:${PN} = "--system --no-create-home --home-dir /nonexistent \
                       --shell /sbin/nologin --user-group marmoset"

CONFFILES:${PN} = "${sysconfdir}/marmoset/marmoset.conf"
