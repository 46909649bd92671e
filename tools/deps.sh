#!/usr/bin/env bash
# Install the Debian 12 packages the build and the tests need (as root).
# Without root, only report what is missing.
set -euo pipefail

pkgs=(build-essential meson ninja-build pkg-config
      libzstd-dev liblzma-dev zlib1g-dev libdeflate-dev liblz4-dev liblzo2-dev
      libarchive-dev libxxhash-dev libfuse3-dev fuse3 libcmocka-dev
      squashfs-tools squashfs-tools-ng squashfuse attr
      acl				# setfacl: tests/image/test_errors.sh
      python3 xz-utils zstd gzip tar util-linux valgrind
      rsync debootstrap strace		# strace: tests/fuse/test_recover.sh
      stress-ng				# tests/fuse/test_stressng.sh
      fio				# tests/fuse/test_fio.sh
      time procps				# tools/bench
      clang-14 libclang-rt-14-dev)	# libFuzzer (tools/test.sh --mode=fuzz)

# pjdfstest (tests/fuse/test_posix.sh): the Rust rewrite, built by cargo.  It
# needs Rust >= 1.85: Debian 12's `cargo` (1.65) is too old, its `cargo-web`
# (Rust 1.85 or later, security-updated) is new enough.  A cargo already on
# PATH that is new enough is used as it is.
PJD_VERSION=0.2.2
PJD_ROOT=/var/cache/sqfs-stage-tests/pjdfstest

have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep >/dev/null 'install ok installed'; }

# cargo_ok: a cargo on PATH that builds Rust 1.85 code.
cargo_ok() {
	local v
	v=$(cargo --version 2>/dev/null | awk '{print $2}') || return 1
	[ -n "$v" ] && [ "$(printf '%s\n' 1.85.0 "$v" | sort -V | head -n1)" = 1.85.0 ]
}

missing=()
for p in "${pkgs[@]}"; do
	have_pkg "$p" || missing+=("$p")
done
need_pjd=0
if [ ! -x "$PJD_ROOT/bin/pjdfstest" ]; then
	need_pjd=1
	cargo_ok || have_pkg cargo-web || missing+=(cargo-web)
fi
[ ${#missing[@]} -eq 0 ] && [ $need_pjd -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	[ ${#missing[@]} -eq 0 ] || echo "deps: missing packages (run as root to install): ${missing[*]}" >&2
	[ $need_pjd -eq 0 ] || echo "deps: missing $PJD_ROOT/bin/pjdfstest (run as root to install)" >&2
	exit 1
fi
if [ ${#missing[@]} -gt 0 ]; then
	echo "deps: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ $need_pjd -eq 1 ]; then
	echo "deps: building pjdfstest $PJD_VERSION into $PJD_ROOT" >&2
	mkdir -p "$PJD_ROOT"
	cargo=cargo
	cargo_ok || cargo=/usr/bin/cargo	# cargo-web's
	# Not fatal: without it test_posix.sh skips (fails when CI=true).
	if ! "$cargo" install --quiet --locked --version "$PJD_VERSION" --root "$PJD_ROOT" pjdfstest; then
		echo "deps: WARNING: could not build pjdfstest; test_posix will skip (fail with CI=true)" >&2
	fi
fi
