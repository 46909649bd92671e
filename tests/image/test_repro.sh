#!/bin/bash
# test_repro.sh SQFS_PACK
#
# The image is a pure function of the tree and the options: its sha256 must not
# depend on the number of threads, the queue depth, the serial path, repeated
# runs, the output path, the order in which the source entries were created
# (a copy made in reverse order, and a copy made by tar extraction), or on
# whether the image time comes from SOURCE_DATE_EPOCH or --mkfs-time.  And it
# must change when content, metadata or the image time change (so the test
# can fail).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "${1-}"
need_root
need_cmd getfattr setfattr mknod tar sha256sum
[[ -x $PYTHON3 ]] || need_cmd python3

source_tree "$WORK/fs"
S=$WORK/fs
T=1234567890

# img NAME ARGS... (SRC last): pack, print the sha256, or "failed-NAME"
# (it runs in $(...): the failure is counted by same and differs).
img() {
	local name=$1
	shift
	pack "$@" "$S/$name.sqfs" || { log "packing $name ($*) failed"; echo "failed-$name"; return; }
	sha "$S/$name.sqfs"
}

# packed LABEL SHA...: none of them a failed pack.
packed() {
	local label=$1 h
	shift
	for h in "$@"; do
		[[ -n $h && $h != failed-* ]] || { fail "$label: the pack failed (${h:-no output})"; return 1; }
	done
}

# same LABEL SHA: must equal the reference.
same() {
	packed "$1" "$2" "$REF" || return 0
	if [[ $2 == "$REF" ]]; then
		log "ok: $1"
	else
		fail "$1: sha256 $2, expected $REF"
	fi
}
differs() {
	packed "$1" "$2" "$REF" || return 0
	if [[ $2 != "$REF" ]]; then
		log "ok: $1 (changes the image)"
	else
		fail "$1: the image did not change (sha256 $2)"
	fi
}

section "threads, queue, serial, repeated runs"
REF=$(img ref -j 2 --mkfs-time "$T" "$SRC")
same "-j 1" "$(img j1 -j 1 --mkfs-time "$T" "$SRC")"
same "-j 8" "$(img j8 -j 8 --mkfs-time "$T" "$SRC")"
same "--serial" "$(img serial --serial --mkfs-time "$T" "$SRC")"
same "-j 8 --queue 2" "$(img q2 -j 8 --queue 2 --mkfs-time "$T" "$SRC")"
same "default -j" "$(img jdef --mkfs-time "$T" "$SRC")"
same "repeated -j 2" "$(img again -j 2 --mkfs-time "$T" "$SRC")"
same "--mkfs-time @$T" "$(img at --mkfs-time "@$T" "$SRC")"
mkdir -p "$S/other/place"
pack --mkfs-time "$T" "$SRC" "$S/other/place/different-name.img" || fail "packing to another path"
same "another output path" "$(sha "$S/other/place/different-name.img")"
same "SOURCE_DATE_EPOCH=$T" "$(SOURCE_DATE_EPOCH=$T img sde "$SRC")"
# --mkfs-time wins over SOURCE_DATE_EPOCH
same "SOURCE_DATE_EPOCH=5 --mkfs-time $T" "$(SOURCE_DATE_EPOCH=5 img sde2 --mkfs-time "$T" "$SRC")"
rm -f "$S"/*.sqfs "$S/other/place/different-name.img"

section "mktree.sh is deterministic: a second run gives the same image"
scratch_fs "$WORK/fs3"
"$TESTS_DIR/mktree.sh" "$WORK/fs3/t" || { fail "mktree.sh (second run)"; finish; }
same "a second mktree.sh tree" "$(img second --mkfs-time "$T" "$WORK/fs3/t")"
umount_quiet "$WORK/fs3"
rm -f "$S/second.sqfs"

section "a copy made in reverse creation order"
# Every directory's entries are created in reverse name order, hard links get
# their first name from the other end, files are written as data extents.
"$PYTHON3" - "$SRC" "$S/rev" <<'PY'
import os, socket, stat, sys

src, dst = sys.argv[1].encode(), sys.argv[2].encode()
links = {}

def attrs(s, d, st, is_link=False):
    os.lchown(d, st.st_uid, st.st_gid)
    if not is_link:
        os.chmod(d, stat.S_IMODE(st.st_mode))
    for k in reversed(os.listxattr(s, follow_symlinks=False)):
        os.setxattr(d, k, os.getxattr(s, k, follow_symlinks=False), follow_symlinks=False)

def copy(s, d):
    st = os.lstat(s)
    m = st.st_mode
    if not stat.S_ISDIR(m) and st.st_nlink > 1:
        key = (st.st_dev, st.st_ino)
        if key in links:
            os.link(links[key], d, follow_symlinks=False)
            return
        links[key] = d
    if stat.S_ISDIR(m):
        os.mkdir(d, 0o700)
        for n in sorted(os.listdir(s), reverse=True):
            copy(os.path.join(s, n), os.path.join(d, n))
    elif stat.S_ISREG(m):
        a = os.open(s, os.O_RDONLY)
        b = os.open(d, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        size, pos = st.st_size, 0
        extents = []
        while pos < size:
            try:
                x = os.lseek(a, pos, os.SEEK_DATA)
            except OSError:
                break
            h = os.lseek(a, x, os.SEEK_HOLE)
            extents.append((x, h))
            pos = h
        for x, h in reversed(extents):     # data written back to front
            off = x
            while off < h:
                chunk = os.pread(a, min(h - off, 1 << 20), off)
                os.pwrite(b, chunk, off)
                off += len(chunk)
        os.ftruncate(b, size)
        os.close(a)
        os.close(b)
    elif stat.S_ISLNK(m):
        os.symlink(os.readlink(s), d)
    elif stat.S_ISSOCK(m):
        socket.socket(socket.AF_UNIX).bind(d)
    else:
        os.mknod(d, m, st.st_rdev)
    attrs(s, d, st, stat.S_ISLNK(m))
    os.utime(d, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)

os.umask(0)
copy(src, dst)
PY
if ! out=$(compare_tree "$SRC" "$S/rev" 2>&1); then
	fail "test bug: the reverse copy differs from the source:"
	printf '%s\n' "$out" | first 20 >&2
fi
same "reverse-order copy" "$(img rev --mkfs-time "$T" "$S/rev")"
rm -f "$S/rev.sqfs"

section "a copy made by tar extraction (of the tree GNU tar can store)"
scratch_fs "$WORK/fs2"
"$TESTS_DIR/mktree.sh" --tar "$WORK/fs2/t" || { fail "mktree.sh --tar"; finish; }
REF=$(img nosock --mkfs-time "$T" "$WORK/fs2/t")
mkdir "$S/tarcopy"
tar -C "$WORK/fs2/t" --format=posix --xattrs --xattrs-include='*' --sparse --numeric-owner -cf - . |
	tar -C "$S/tarcopy" --xattrs --xattrs-include='*' --numeric-owner \
		--warning=no-timestamp -xpf - ||
	fail "tar copy"
if ! out=$(compare_tree "$WORK/fs2/t" "$S/tarcopy" 2>&1); then
	fail "test bug: the tar-extracted copy differs from its source:"
	printf '%s\n' "$out" | first 20 >&2
fi
same "tar-extracted copy" "$(img tarcopy --mkfs-time "$T" "$S/tarcopy")"

section "changes must change the image"
REF=$(img base --mkfs-time "$T" "$S/tarcopy")
differs "--mkfs-time $((T + 1))" "$(img t1 --mkfs-time $((T + 1)) "$S/tarcopy")"
f=$S/tarcopy/files/multi
mt=$(stat -c %Y "$f")
printf 'Z' | dd of="$f" bs=1 seek=200000 conv=notrunc status=none
touch -d "@$mt" "$f"
differs "one byte of files/multi (same size and mtime)" "$(img c1 --mkfs-time "$T" "$S/tarcopy")"
printf 'Z' | dd of="$S/tarcopy/bigdir/e00001" bs=1 count=1 conv=notrunc status=none
touch -d "@$(stat -c %Y "$S/tarcopy/bigdir/e00001")" "$S/tarcopy/bigdir/e00001"
REF=$(img c2base --mkfs-time "$T" "$S/tarcopy")
chmod 0640 "$S/tarcopy/files/one"
differs "a mode bit" "$(img c3 --mkfs-time "$T" "$S/tarcopy")"
REF=$(sha "$S/c3.sqfs")
setfattr -n user.key000 -v changed "$S/tarcopy/xattr/many"
differs "one xattr value" "$(img c4 --mkfs-time "$T" "$S/tarcopy")"

finish
