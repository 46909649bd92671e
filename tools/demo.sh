#!/usr/bin/env bash
# The main job on a built-in sample: build, make a small varied tree, stage
# it through a sqfs-stage mount and seal it, pack it with sqfs-pack too, and
# verify the images with readers we did not write.
#   tools/demo.sh [COMPRESSOR]     (default zstd:19)
set -euo pipefail
cd "$(dirname "$0")/.."
comp=${1:-zstd:19}

tools/deps.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
meson compile -C build >/dev/null

work=$(mktemp -d)
# Each step may find nothing to do (sqfs-seal unmounts the stage itself):
# none may end the trap early under set -e, before the rm.
cleanup() {
	if mountpoint -q "$work/mnt" 2>/dev/null; then umount "$work/mnt" || true; fi
	if mountpoint -q "$work/stage" 2>/dev/null; then fusermount3 -u -z "$work/stage" || true; fi
	rm -rf "$work"
}
trap cleanup EXIT
tree=$work/sample
mkdir -p "$tree/etc" "$tree/usr/share/doc/sqfs-stage" "$tree/usr/bin" "$tree/dev" "$tree/empty"
cp -r src include man "$tree/usr/share/doc/sqfs-stage/"
cp README.md "$tree/usr/share/doc/sqfs-stage/"
cp build/tools/sqfs-pack "$tree/usr/bin/"
cp README.md "$tree/etc/motd"                       # a duplicate file
ln "$tree/usr/bin/sqfs-pack" "$tree/usr/bin/pack"   # a hard link
ln -s ../usr/share/doc "$tree/etc/doc"              # a symlink
truncate -s 64M "$tree/usr/sparse.img"              # a sparse file
printf 'data' | dd of="$tree/usr/sparse.img" bs=1 seek=40000000 conv=notrunc status=none
mkfifo "$tree/dev/initctl"
if [ "$(id -u)" -eq 0 ]; then
	mknod "$tree/dev/null" c 1 3
	chown 1000:1000 "$tree/usr/share/doc/sqfs-stage/README.md"
fi
setfattr -n user.demo -v "sqfs-stage" "$tree/etc/motd" 2>/dev/null || true

img=$work/sample.sqfs
echo "== sqfs-pack -c $comp $tree $img"
build/tools/sqfs-pack -c "$comp" --mkfs-time 0 "$tree" "$img"

echo "== unsquashfs lists it"
unsquashfs -lls "$img" | sed -n '4,15p'	# sed reads it all: no SIGPIPE under pipefail
echo "   ..."
codec=${comp%%[:,]*}
echo "== sqfsdiff against mksquashfs of the same tree"
mksquashfs "$tree" "$work/ref.sqfs" -noappend -quiet -no-progress -comp "$codec" >/dev/null
sqfsdiff -a "$img" -b "$work/ref.sqfs" && echo "   no difference"
if [ "$(id -u)" -eq 0 ] && [ "$codec" != lzma ]; then
	echo "== the kernel mounts it; contents compared with diff -r"
	mkdir "$work/mnt"
	mount -t squashfs -o loop,ro "$img" "$work/mnt"
	out=$(diff -r --no-dereference "$tree" "$work/mnt" 2>&1 | grep -v 'is a fifo while' || true)
	if [ -n "$out" ]; then echo "$out"; exit 1; fi
	echo "   identical"
fi

if [ -c /dev/fuse ] && command -v fusermount3 >/dev/null; then
	echo "== sqfs-stage: mount, cp -a the sample in, sqfs-seal"
	staged=$work/staged.sqfs
	mkdir "$work/stage"
	build/tools/sqfs-stage/sqfs-stage -o "comp=$comp,mkfs_time=0" "$staged" "$work/stage"
	cp -a "$tree/." "$work/stage/"
	build/tools/sqfs-stage/sqfs-seal "$work/stage"
	a=$(sha256sum <"$img") b=$(sha256sum <"$staged")
	[ "$a" = "$b" ] || { echo "FAIL: the sealed image differs from sqfs-pack's"; exit 1; }
	echo "   sealed image is byte-identical to sqfs-pack's (sha256 ${a%% *})"
else
	echo "== no /dev/fuse here: the sqfs-stage part is left out"
	[ "${CI:-}" != true ] || exit 1
fi
echo "OK: $(stat -c %s "$img") bytes"
