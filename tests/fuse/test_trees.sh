#!/bin/bash
# test_trees.sh SQFS_STAGE SQFS_SEAL SQFS_PACK
#
# A source tree with every entry type is copied into a sqfs-stage mount with
# `cp -a` and again with `tar x`, sealed with sqfs-seal, and judged:
#   - sha256 equal to sqfs-pack of the same source with the same options
#   - the kernel's view (loop mount) equals the source (treecmp.py: contents,
#     mode, uid, gid, mtime, rdev, symlinks, hard links, xattrs) and diff -r
#   - unsquashfs extracts a tree equal to the source
set -euo pipefail
# shellcheck source=tests/fuse/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "$@"
need_loop
need_cmd getfattr setfattr unsquashfs tar mknod mkfifo sha256sum diff

SRC=$WORK/src
"$FUSE_TESTS_DIR/mksrc.sh" "$SRC"
MT=1700000000
OPTS=(comp=zstd:3 block_size=64K)

"$PACK" -q --mkfs-time $MT -c zstd:3 -b 64K "$SRC" "$WORK/ref.sqfs"
REF=$(sha256sum <"$WORK/ref.sqfs" | cut -d' ' -f1)
# tar cannot carry sockets: its reference tree has none.
TSRC=$WORK/tsrc
cp -a "$SRC" "$TSRC"
rm "$TSRC/tmp/sock"
touch -d @1600000000 "$TSRC/tmp"
"$PACK" -q --mkfs-time $MT -c zstd:3 -b 64K "$TSRC" "$WORK/tref.sqfs"
TREF=$(sha256sum <"$WORK/tref.sqfs" | cut -d' ' -f1)

# judge LABEL IMAGE [SRC REF_SHA256]
judge() {
	local label=$1 img=$2
	local SRC=${3-$SRC} REF=${4-$REF}
	local sum
	sum=$(sha256sum <"$img" | cut -d' ' -f1)
	if [[ $sum == "$REF" ]]; then
		ok "$label: sha256 equal to sqfs-pack"
	else
		fail "$label: sha256 $sum differs from sqfs-pack's $REF"
	fi
	loop_mount "$img" "$WORK/k-$label" || return 0
	tree_cmp "$SRC" "$WORK/k-$label" "$label kernel view"
	if diff -r --no-dereference -x fifo -x sock -x 'dev-*' "$SRC" "$WORK/k-$label"; then
		ok "$label: diff -r"
	else
		fail "$label: diff -r finds differences"
	fi
	loop_umount "$WORK/k-$label"
	rm -rf "$WORK/u-$label"
	if unsquashfs -q -n -d "$WORK/u-$label" "$img" >/dev/null 2>&1; then
		tree_cmp "$SRC" "$WORK/u-$label" "$label unsquashfs"
	else
		fail "$label: unsquashfs failed"
	fi
}

# --- cp -a, sealed by sqfs-seal (which unmounts) ---
IMG=$WORK/out/cp.sqfs
mkdir -p "$WORK/out"
stage_mount "$IMG" "$WORK/mnt-cp" -o "$(IFS=,; echo "${OPTS[*]}"),mkfs_time=$MT"
cp -a "$SRC/." "$WORK/mnt-cp/"
tree_cmp "$SRC" "$WORK/mnt-cp" "cp -a staged view"
"$SEAL" --quiet "$WORK/mnt-cp" || fail "sqfs-seal after cp -a"
mountpoint -q "$WORK/mnt-cp" && fail "still mounted after sqfs-seal"
wait_daemon 0
judge cp "$IMG"
if ls -A "$WORK/out" | grep >/dev/null spool; then
	fail "spool directory left behind after the final seal"
else
	ok "spool removed"
fi

# --- tar x, sealed by unmounting, with jobs=1 (same bytes whatever the threads) ---
IMG=$WORK/out/tar.sqfs
tar --xattrs --xattrs-include='*' -C "$TSRC" -cf "$WORK/src.tar" .
stage_mount "$IMG" "$WORK/mnt-tar" -o "$(IFS=,; echo "${OPTS[*]}"),mkfs_time=$MT,jobs=1"
tar --xattrs --xattrs-include='*' --numeric-owner -C "$WORK/mnt-tar" -xpf "$WORK/src.tar"
fusermount3 -u "$WORK/mnt-tar"
wait_daemon 0
judge tar "$IMG" "$TSRC" "$TREF"

# --- single-threaded loop, spool elsewhere, JSON summary ---
IMG=$WORK/out/st.sqfs
mkdir -p "$WORK/spool"
stage_mount "$IMG" "$WORK/mnt-s" -s -o "$(IFS=,; echo "${OPTS[*]}"),mkfs_time=$MT,spool=$WORK/spool"
cp -a "$SRC/." "$WORK/mnt-s/"
if ls -A "$WORK/spool" | grep >/dev/null '^\.st\.sqfs\.spool\.'; then ok "spool=DIR used"; else fail "spool=DIR not used"; fi
"$SEAL" --json "$WORK/mnt-s" >"$WORK/seal.json" || fail "sqfs-seal -s"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["image_size"] > 0 and d["compressor"] == "zstd" and d["level"] == 3 and d["settings"] == "zstd level 3" and d["block_size"] == 65536, d' \
	"$WORK/seal.json" && ok "--json summary parses" || fail "--json summary: $(cat "$WORK/seal.json")"
wait_daemon 0
judge single "$IMG"
[[ -z $(ls -A "$WORK/spool") ]] && ok "spool=DIR emptied" || fail "spool=DIR not emptied"

finish
