#!/bin/bash
# mkcorpus.sh DIR: (re)make the seed corpus of fuzz_tar: small valid archives
# covering what the tar reader handles.  Needs GNU tar, python3, setfattr,
# gzip, xz, zstd; run as root (devices).  The output is committed in
# tests/fuzz/corpus; rerun only to change it.
set -euo pipefail
export LC_ALL=C TZ=UTC
out=$(realpath -- "${1:?usage: $0 DIR}")
mkdir -p "$out"
w=$(mktemp -d /dev/shm/mkcorpus.XXXXXX)
trap 'rm -rf -- "$w"' EXIT
T=(tar --blocking-factor=1 --numeric-owner --owner=0 --group=0 --mtime=@1234567890 --sort=name)

# plain files, a directory, a tail, an empty file
mkdir -p "$w/files/sub"
printf 'hello\n' >"$w/files/hello"
: >"$w/files/empty"
head -c 5000 /dev/zero | tr '\0' 'a' >"$w/files/sub/tail5000"
(cd "$w/files" && "${T[@]}" --format=gnu -cf "$out/files-gnu.tar" .)
(cd "$w/files" && "${T[@]}" --format=ustar -cf "$out/files-ustar.tar" .)
(cd "$w/files" && "${T[@]}" --format=v7 -cf "$out/files-v7.tar" .)

# hard links and symlinks
mkdir -p "$w/links/d"
printf 'shared\n' >"$w/links/a"
ln "$w/links/a" "$w/links/b"
ln "$w/links/a" "$w/links/d/c"
ln -s a "$w/links/sym"
ln -s ../a "$w/links/d/up"
ln -s /nonexistent/abs "$w/links/abs"
(cd "$w/links" && "${T[@]}" --format=gnu -cf "$out/links-gnu.tar" .)
(cd "$w/links" && "${T[@]}" --format=posix -cf "$out/links-pax.tar" .)

# long names: GNU ././@LongLink and pax path/linkpath
long=$(printf 'n%.0s' {1..150})
mkdir -p "$w/long/$long"
printf 'x\n' >"$w/long/$long/$long"
ln -s "$long/$long" "$w/long/ln-$long"
(cd "$w/long" && "${T[@]}" --format=gnu -cf "$out/long-gnu.tar" .)
(cd "$w/long" && "${T[@]}" --format=posix -cf "$out/long-pax.tar" .)

# sparse files: GNU old sparse, pax 0.1 and 1.0
mkdir -p "$w/sparse"
truncate -s 1M "$w/sparse/holes"
printf 'data' | dd of="$w/sparse/holes" bs=1 seek=300000 conv=notrunc status=none
printf 'end' | dd of="$w/sparse/holes" bs=1 seek=1048000 conv=notrunc status=none
truncate -s 70000 "$w/sparse/allhole"
(cd "$w/sparse" && "${T[@]}" --format=gnu --sparse -cf "$out/sparse-gnu.tar" .)
(cd "$w/sparse" && "${T[@]}" --format=posix --sparse --sparse-version=0.1 -cf "$out/sparse-pax01.tar" .)
(cd "$w/sparse" && "${T[@]}" --format=posix --sparse --sparse-version=1.0 -cf "$out/sparse-pax10.tar" .)

# xattrs in pax headers (SCHILY.xattr)
mkdir -p "$w/xattr"
printf 'x\n' >"$w/xattr/f"
setfattr -n user.comment -v hello "$w/xattr/f"
setfattr -n trusted.t -v 0x00ff00 "$w/xattr/f"
setfattr -n user.dir -v d "$w/xattr"
(cd "$w/xattr" && "${T[@]}" --format=posix --xattrs --xattrs-include='*' -cf "$out/xattr-pax.tar" .)

# devices, fifo
mkdir -p "$w/dev"
mknod "$w/dev/null" c 1 3
mknod "$w/dev/loop" b 7 0
mknod "$w/dev/big" c 4095 1048575
mkfifo "$w/dev/fifo"
(cd "$w/dev" && "${T[@]}" --format=gnu -cf "$out/dev-gnu.tar" .)
(cd "$w/dev" && "${T[@]}" --format=posix -cf "$out/dev-pax.tar" .)

# compressed
gzip -n -9 -c "$out/links-gnu.tar" >"$out/links-gnu.tar.gz"
xz -T1 -c "$out/files-ustar.tar" >"$out/files-ustar.tar.xz"
zstd -q -c "$out/xattr-pax.tar" >"$out/xattr-pax.tar.zst"
ls -l "$out" >&2
