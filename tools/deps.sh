#!/usr/bin/env bash
# Install the Debian 12 packages the build and the tests need (as root).
# Without root, only report what is missing.
set -euo pipefail

pkgs=(build-essential meson ninja-build pkg-config
      libzstd-dev liblzma-dev zlib1g-dev liblz4-dev liblzo2-dev
      libarchive-dev libxxhash-dev libfuse3-dev fuse3 libcmocka-dev
      squashfs-tools squashfs-tools-ng squashfuse attr
      python3 xz-utils zstd gzip tar util-linux valgrind
      clang-14 libclang-rt-14-dev)	# libFuzzer (tools/test.sh --mode=fuzz)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing packages (run as root to install): ${missing[*]}" >&2
	exit 1
fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
