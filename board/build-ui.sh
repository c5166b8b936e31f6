#!/bin/sh
# build-ui.sh: generate rootfs-overlay/www/ (the demo UI as shipped) from board/ui/.
#
#   board/build-ui.sh           build, updating only files whose content changed (idempotent)
#   board/build-ui.sh --check   exit 1 if the committed rootfs-overlay/www/ differs from a fresh build
#
# What it does, in order:
#   1. Every file in board/ui/ except the HTML pages and favicon.* is renamed with an
#      8-hex-digit content hash taken from sha256sum: app.js -> app.3f2a9c1b.js. Such names
#      match the server's `@hashed` cache pattern, so they can be cached for a year.
#      Stylesheets are hashed after the other assets, so url(...) references inside them
#      are rewritten first; the HTML pages are rewritten last.
#   2. Every text asset (html, css, js, svg, json) gets a `.gz` (gzip -9 -n) and a `.br`
#      (brotli -q 11) variant beside it, with an mtime no older than the original.
#   3. The result replaces rootfs-overlay/www/, except cgi-bin/, which is kept as it is.
#      Files this script did not generate (stale hashed names included) are removed.
#
# board/ui/ is flat (no subdirectories) and its file names use only [A-Za-z0-9._-].
# POSIX sh; needs sha256sum, gzip, brotli, sed, cmp (brotli is installed with apt-get if missing).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
src="$repo/board/ui"
out="$repo/rootfs-overlay/www"
export LC_ALL=C

die() { echo "build-ui: $*" >&2; exit 1; }

check=0
case "${1-}" in
  '') ;;
  --check) check=1 ;;
  -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown argument: $1 (try --help)" ;;
esac

# brotli is not in every base image; install it when we can.
if ! command -v brotli >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "build-ui: installing brotli" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq brotli >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq brotli >/dev/null; } ||
      die "could not install brotli"
  else
    die "brotli not found (Debian: apt-get install brotli)"
  fi
fi
for tool in sha256sum gzip sed cmp; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found"
done

[ -d "$src" ] || die "no $src"
[ -f "$src/index.html" ] || die "no $src/index.html"

stage=$(mktemp -d "${TMPDIR:-/tmp}/build-ui.XXXXXX")
trap 'rm -rf "$stage"' EXIT INT TERM
map="$stage/.map"    # lines: NAME HASHED_NAME
mkdir "$stage/www"
: > "$map"

is_text() { case "$1" in *.html|*.css|*.js|*.svg|*.json) return 0 ;; esac; return 1; }
unhashed() { case "$1" in *.html|favicon.*) return 0 ;; esac; return 1; }

# Rewrite references to every name in $map inside file $1 (in place).
# A reference is the bare name between quote/paren/slash/= and quote/paren/?/#.
rewrite_refs() {
  [ -s "$map" ] || return 0
  script="$stage/.sed"
  : > "$script"
  before="[\"'(/=]" after="[\"')?#]"
  while read -r name hashed; do
    re=$(printf '%s' "$name" | sed 's/[.]/\\./g')
    printf 's|\\(%s\\)%s\\(%s\\)|\\1%s\\2|g\n' "$before" "$re" "$after" "$hashed" >> "$script"
  done < "$map"
  sed -f "$script" "$1" > "$1.tmp" && mv "$1.tmp" "$1"
}

# Copy board/ui/NAME into the stage under its hashed name and record it in $map.
add_hashed() {
  name=$1
  cp "$src/$name" "$stage/www/$name.tmp"
  case "$name" in *.css) rewrite_refs "$stage/www/$name.tmp" ;; esac
  hash=$(sha256sum < "$stage/www/$name.tmp" | cut -c1-8)
  case "$name" in
    *.*) hashed="${name%.*}.$hash.${name##*.}" ;;
    *) hashed="$name.$hash" ;;
  esac
  mv "$stage/www/$name.tmp" "$stage/www/$hashed"
  echo "$name $hashed" >> "$map"
}

# 1. Hash: plain assets, then stylesheets (which may point at them), then scripts.
names=$(cd "$src" && ls -A)
for name in $names; do
  [ -f "$src/$name" ] || die "board/ui/$name: only plain files are supported"
  case "$name" in *[!A-Za-z0-9._-]*) die "board/ui/$name: unsupported character in name" ;; esac
  case "$name" in .*|*~|*.swp) die "board/ui/$name: stray file, remove it" ;; esac
done
for pass in other css js; do
  for name in $names; do
    unhashed "$name" && continue
    case "$pass:$name" in
      css:*.css|js:*.js) add_hashed "$name" ;;
      other:*.css|other:*.js) ;;
      other:*) add_hashed "$name" ;;
    esac
  done
done
for name in $names; do
  unhashed "$name" || continue
  cp "$src/$name" "$stage/www/$name"
  case "$name" in *.html) rewrite_refs "$stage/www/$name" ;; esac
done

# 2. Precompressed variants of the text assets.
for f in "$stage"/www/*; do
  is_text "$f" || continue
  gzip -9 -n -c "$f" > "$f.gz"
  brotli -q 11 -c "$f" > "$f.br"
done
rm -f "$map" "$stage/.sed"

# Relative paths of the generated files, or of the files in rootfs-overlay/www/ that this
# script owns (everything but cgi-bin/).
list_gen() { (cd "$stage/www" && find . -type f | sed 's#^\./##' | sort); }
list_out() {
  [ -d "$out" ] || return 0
  (cd "$out" && find . -path ./cgi-bin -prune -o -type f -print | sed 's#^\./##' | sort)
}

# Do two variants hold the same data? Compressor versions differ between machines, so a
# .gz/.br counts as current when it decompresses to the current original.
same_variant() {
  case "$1" in
    *.gz) gzip -dc "$2" 2>/dev/null | cmp -s - "$stage/www/${1%.gz}" ;;
    *.br) brotli -dc "$2" 2>/dev/null | cmp -s - "$stage/www/${1%.br}" ;;
    *) return 1 ;;
  esac
}

if [ "$check" = 1 ]; then
  bad=0
  for rel in $(list_gen); do
    if [ ! -f "$out/$rel" ]; then
      echo "missing: rootfs-overlay/www/$rel"; bad=1
    elif ! cmp -s "$stage/www/$rel" "$out/$rel" && ! same_variant "$rel" "$out/$rel"; then
      echo "differs: rootfs-overlay/www/$rel"; bad=1
    fi
  done
  for rel in $(list_out); do
    [ -f "$stage/www/$rel" ] || { echo "stale: rootfs-overlay/www/$rel"; bad=1; }
  done
  if [ "$bad" = 1 ]; then
    echo "build-ui: rootfs-overlay/www/ is out of date; run board/build-ui.sh and commit it" >&2
    exit 1
  fi
  echo "build-ui: rootfs-overlay/www/ is up to date"
  exit 0
fi

# 3. Install: remove what we no longer generate, copy only what changed.
mkdir -p "$out"
for rel in $(list_out); do
  [ -f "$stage/www/$rel" ] || { rm -f "$out/$rel"; echo "removed $rel"; }
done
for rel in $(list_gen); do
  if [ -f "$out/$rel" ] && { cmp -s "$stage/www/$rel" "$out/$rel" || same_variant "$rel" "$out/$rel"; }; then
    continue
  fi
  cp "$stage/www/$rel" "$out/$rel"
  chmod 644 "$out/$rel"
  echo "wrote $rel"
done
# A variant must never look older than its original (servers compare mtimes).
for v in "$out"/*.gz "$out"/*.br; do
  [ -f "$v" ] || continue
  orig=${v%.*}
  if [ -f "$orig" ] && [ -z "$(find "$v" -newer "$orig")" ]; then touch -r "$orig" "$v"; fi
done
echo "build-ui: rootfs-overlay/www/ is up to date"
