#!/bin/bash
# test_workloads.sh SQFS_STAGE SQFS_SEAL SQFS_PACK
#
# Real-world write patterns into sqfs-stage mounts (workloads.py makes them
# from a seed, so each has a reference tree made the same way on disk).  Each
# image is judged (judge below) against its reference tree:
#   - sha256 equal to sqfs-pack of the reference with the same options
#   - the kernel's view (loop mount) equals the reference (treecmp.py:
#     contents, modes, owners, mtimes, devices, symlinks, hard links, xattrs)
#   - unsquashfs -l lists exactly the reference's entries; unsquashfs
#     extracts a tree equal to it
#   - sqfsdiff -T against mksquashfs's image of the reference: no difference
#     in entries, types, permissions, owners, timestamps, device numbers,
#     symlink targets or contents (-T: timestamps too; sqfsdiff ignores
#     xattrs, the kernel and unsquashfs views check them)
# Workloads:
#   rsync    rsync -aHAX of a tree with hard links, xattrs, symlinks, devices,
#            fifos, a socket and sparse files (sealed with --keep), then an
#            rsync --delete update of it (sealed by unmounting)
#   writers  8 processes writing disjoint subtrees at once
#   randwrite  random-offset random-size writes, appends, truncates, mmap
#            writes, checked against an in-memory model
#   churn    overwrite-after-close, rename/unlink/link/exchange churn, open
#            unlinked files; the operation log must equal the reference's
#   order    one tree built in two orders, write sizes and thread counts
#            (-o jobs=1 and jobs=2): identical images, equal to sqfs-pack of
#            a cp -a copy of the tree
set -euo pipefail
# shellcheck source=tests/fuse/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "$@"
need_loop
need_cmd rsync getfattr setfattr unsquashfs mksquashfs sqfsdiff sha256sum cmp

MT=1700000000
T0=1600000000
WL=("python3" "$FUSE_TESTS_DIR/workloads.py")
section() { log "== [$((SECONDS))s] $*"; }

# mount_opts COMP BS [MORE]: the -o of sqfs-stage matching pack_image's flags.
mount_opts() { echo "comp=$1,block_size=$2,mkfs_time=$MT${3:+,$3}"; }
# pack_image DIR OUT COMP BS: sqfs-pack with the same options.
pack_image() { "$PACK" -q --mkfs-time "$MT" -c "$3" -b "$4" "$1" "$2"; }

# check_sqfsdiff LABEL OURS REF (as in tests/image/test_formats.sh): lines
# saying only that one image uses an extended inode where the other uses a
# basic one are a representation choice, not a difference.
check_sqfsdiff() {
	local out rc=0 real
	out=$(sqfsdiff -T -a "$2" -b "$3" 2>&1) || rc=$?
	real=$(printf '%s\n' "$out" | grep -Ev ' has an extended type$| has a basic type$' | grep -v '^$' || true)
	if [[ $rc -ne 0 && $rc -ne 1 ]] || [[ -n $real ]]; then
		fail "$1: sqfsdiff -T against mksquashfs exited $rc:"
		printf '%s\n' "$out" | head -n 40 >&2
	else
		ok "$1: sqfsdiff -T finds no difference from mksquashfs"
	fi
}

# judge LABEL IMG REF COMP BS
judge() {
	local label=$1 img=$2 ref=$3 comp=$4 bs=$5 out rc=0
	pack_image "$ref" "$WORK/$label.pack.sqfs" "$comp" "$bs"
	if cmp -s "$img" "$WORK/$label.pack.sqfs"; then
		ok "$label: image byte-identical to sqfs-pack of the reference"
	else
		fail "$label: image differs from sqfs-pack of the reference" \
			"($(stat -c %s "$img") vs $(stat -c %s "$WORK/$label.pack.sqfs") bytes)"
	fi
	loop_mount "$img" "$WORK/k-$label" && {
		tree_cmp "$ref" "$WORK/k-$label" "$label kernel view"
		loop_umount "$WORK/k-$label"
	}
	if out=$(unsquashfs -l -n "$img" 2>&1); then
		if diff <(printf '%s\n' "$out" | sed -n 's|^squashfs-root/||p' | sort) \
			<(find "$ref" -mindepth 1 -printf '%P\n' | sort) >"$WORK/ls.diff"; then
			ok "$label: unsquashfs -l lists the reference's $(wc -l <<<"$out") entries"
		else
			fail "$label: unsquashfs -l differs from the reference:"
			head -n 20 "$WORK/ls.diff" >&2
		fi
	else
		fail "$label: unsquashfs -l failed: $(tail -n 3 <<<"$out")"
	fi
	rm -rf "$WORK/u-$label"
	if unsquashfs -q -n -d "$WORK/u-$label" "$img" >/dev/null 2>&1; then
		tree_cmp "$ref" "$WORK/u-$label" "$label unsquashfs extraction"
	else
		fail "$label: unsquashfs extraction failed"
	fi
	rm -rf "$WORK/u-$label"
	mksquashfs "$ref" "$WORK/$label.mksq.sqfs" -noappend -comp "${comp%%:*}" -b "$bs" \
		-quiet -no-progress >/dev/null 2>&1 || rc=$?
	if ((rc)); then
		fail "$label: mksquashfs of the reference failed ($rc)"
	else
		check_sqfsdiff "$label" "$img" "$WORK/$label.mksq.sqfs"
	fi
	rm -f "$WORK/$label.pack.sqfs" "$WORK/$label.mksq.sqfs"
}

# seal_unmount MNT: the final seal by unmounting; the daemon must exit 0.
seal_unmount() {
	fusermount3 -u "$1"
	wait_daemon 0
}

mkdir -p "$WORK/img"

# --- rsync -aHAX, then an rsync --delete update -----------------------------
section "rsync"
SRC=$WORK/src
"$FUSE_TESTS_DIR/mksrc.sh" "$SRC"
M=$WORK/m-rsync
IMG=$WORK/img/rsync.sqfs
stage_mount "$IMG" "$M" -o "$(mount_opts zstd:3 64K)"
if rsync -aHAX "$SRC/" "$M/"; then ok "rsync -aHAX into the mount"; else fail "rsync -aHAX"; fi
# A second run must find nothing to do: the staged sizes, times, modes,
# owners, links and xattrs are what rsync set.
if out=$(rsync -aHAX --dry-run --itemize-changes "$SRC/" "$M/" 2>&1) && [[ -z $out ]]; then
	ok "rsync -aHAX --dry-run finds nothing to do"
else
	fail "rsync --dry-run after rsync wants changes: $(head -n 10 <<<"$out")"
fi
"$SEAL" --keep --quiet "$M" || fail "sqfs-seal --keep after rsync"
judge rsync "$IMG" "$SRC" zstd:3 64K
# the update: changed, removed, added, relinked entries; some in place
SRC2=$WORK/src2
cp -a "$SRC" "$SRC2"
(
	cd "$SRC2"
	printf 'changed\n' >etc/hostname.2		# rewrites both hard links' inode
	rm usr/bin/big-hardlink dangling
	head -c 200000 /dev/urandom >usr/new.bin
	ln usr/new.bin usr/new-link
	mkdir -p opt/a/b && printf x >opt/a/b/c
	chmod 0640 usr/lib/deep/er/still/numbers.txt
	setfattr -n user.comment -v 'another comment' etc/hostname
	setfattr -x trusted.overlay.opaque usr/lib
	dd if=/dev/urandom of=usr/bin/big.bin bs=4096 count=3 seek=10 conv=notrunc status=none
	find . -newer "$SRC/etc/hostname" -exec touch -h -d @1650000000 {} +
	touch -d @1500000000 .
)
# first one directory in place with the delta algorithm, then all of it
if rsync -aHAX --delete --inplace --no-whole-file "$SRC2/usr/bin/" "$M/usr/bin/" &&
	rsync -aHAX --delete "$SRC2/" "$M/"; then
	ok "rsync --delete update"
else
	fail "rsync --delete update"
fi
seal_unmount "$M"
judge rsync-update "$IMG" "$SRC2" zstd:3 64K

# --- 8 concurrent writers ----------------------------------------------------
section "writers"
M=$WORK/m-writers
IMG=$WORK/img/writers.sqfs
REF=$WORK/ref-writers
mkdir -p "$REF"
stage_mount "$IMG" "$M" -o "$(mount_opts gzip 128K)"
if "${WL[@]}" writers "$M" 8; then ok "8 concurrent writers"; else fail "8 concurrent writers"; fi
"${WL[@]}" writers "$REF" 8 --serial
"${WL[@]}" settle "$M" $T0
"${WL[@]}" settle "$REF" $T0
tree_cmp "$REF" "$M" "writers staged view"
seal_unmount "$M"
judge writers "$IMG" "$REF" gzip 128K

# --- random writes against a model ---------------------------------------------
section "randwrite"
M=$WORK/m-rw
IMG=$WORK/img/rw.sqfs
REF=$WORK/ref-rw
mkdir -p "$REF"
stage_mount "$IMG" "$M" -o "$(mount_opts xz 1M)"
if "${WL[@]}" randwrite "$M" "$REF" 42; then
	ok "random writes: contents equal the model"
else
	fail "random writes: contents differ from the model"
fi
"${WL[@]}" settle "$M" $T0
"${WL[@]}" settle "$REF" $T0
seal_unmount "$M"
judge randwrite "$IMG" "$REF" xz 1M

# --- overwrite-after-close, rename/unlink churn -----------------------------------
section "churn"
M=$WORK/m-churn
IMG=$WORK/img/churn.sqfs
REF=$WORK/ref-churn
mkdir -p "$REF"
stage_mount "$IMG" "$M" -o "$(mount_opts lz4 4K)"
"${WL[@]}" churn "$M" "$WORK/churn-stage.log" 7 || fail "churn in the mount"
"${WL[@]}" churn "$REF" "$WORK/churn-ref.log" 7 || fail "churn in the reference"
if diff "$WORK/churn-ref.log" "$WORK/churn-stage.log" >"$WORK/churn.diff"; then
	ok "churn: $(wc -l <"$WORK/churn-ref.log") operations, same outcomes as on disk"
else
	fail "churn: outcomes differ from the reference (first lines: < disk, > stage):"
	head -n 20 "$WORK/churn.diff" >&2
fi
"${WL[@]}" settle "$M" $T0
"${WL[@]}" settle "$REF" $T0
tree_cmp "$REF" "$M" "churn staged view"
seal_unmount "$M"
judge churn "$IMG" "$REF" lz4 4K

# --- order independence --------------------------------------------------------
section "order"
REF=$WORK/ref-order
mkdir -p "$REF"
"${WL[@]}" build "$REF" 5 sorted
"${WL[@]}" settle "$REF" $T0
stage_mount "$WORK/img/order-a.sqfs" "$WORK/m-a" -o "$(mount_opts zstd:3 128K jobs=1)"
"${WL[@]}" build "$WORK/m-a" 5 sorted
"${WL[@]}" settle "$WORK/m-a" $T0
seal_unmount "$WORK/m-a"
stage_mount "$WORK/img/order-b.sqfs" "$WORK/m-b" -o "$(mount_opts zstd:3 128K jobs=2)"
"${WL[@]}" build "$WORK/m-b" 5 shuffled
"${WL[@]}" settle "$WORK/m-b" $T0
seal_unmount "$WORK/m-b"
a=$(sha256sum <"$WORK/img/order-a.sqfs" | cut -d' ' -f1)
b=$(sha256sum <"$WORK/img/order-b.sqfs" | cut -d' ' -f1)
if [[ $a == "$b" ]]; then
	ok "order: sorted/jobs=1 and shuffled/jobs=2 give the same image ($a)"
else
	fail "order: sorted/jobs=1 gives $a, shuffled/jobs=2 gives $b"
fi
cp -a "$REF" "$WORK/copy-order"
pack_image "$WORK/copy-order" "$WORK/order-copy.sqfs" zstd:3 128K
c=$(sha256sum <"$WORK/order-copy.sqfs" | cut -d' ' -f1)
if [[ $c == "$a" ]]; then
	ok "order: equal to sqfs-pack of a cp -a copy"
else
	fail "order: sqfs-pack of a cp -a copy gives $c, the mounts $a"
fi
judge order "$WORK/img/order-b.sqfs" "$REF" zstd:3 128K

section "done"
finish
