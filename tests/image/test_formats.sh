#!/bin/bash
# test_formats.sh SQFS_PACK [codecs|layout|all]
#
# Pack the mktree.sh tree with every compressor (and non-default compressor
# options), then judge each image with independent readers:
#   (a) the kernel driver (loop mount) + compare_tree   (not for lzma: the
#       kernel has no lzma support)
#   (b) unsquashfs -d extraction + compare_tree
#   (c) sqfsdiff -T against mksquashfs's image of the same tree: no
#       difference in entries, types, permissions, owners, timestamps, device
#       numbers, symlink targets, file contents (sqfsdiff does not look at
#       xattrs; (a), (b) and (d) do)
#   (d) squashfuse + compare_tree (xattrs judged against squashfuse's view of
#       the mksquashfs image, since squashfuse 0.1.105 mangles some xattrs)
#   (e) rdsquashfs -l / succeeds
# and the lz4 image is no larger than 1.005 times mksquashfs's (the tree
# repeats a 12 KiB xattr value in several sets: stored once, then
# referenced out of line, as mksquashfs does).
# Then block sizes 4K and 1M (PART codecs), and the zstd layout/ownership
# variants (PART layout).  SQFS_TEST_QUICK=1 (the sanitizer modes of
# tools/test.sh) packs with each codec's defaults only: what the options
# change is the codec's work and the superblock's options block, which
# test_compressor and test_image cover in those modes.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "${1-}"
# PART (the second argument): codecs, layout, or both (default); meson runs
# the two as separate tests, so that they run at the same time.
PART=${2:-all}
case $PART in
codecs | layout | all) ;;
*) log "usage: $0 SQFS_PACK [codecs|layout|all]"; exit 1 ;;
esac
need_root
need_loop
need_fuse
need_cmd getfattr setfattr mksquashfs unsquashfs sqfsdiff rdsquashfs mknod
[[ -x $PYTHON3 ]] || need_cmd python3

source_tree "$WORK/fs"
freeze "$SRC"
S=$WORK/fs
MT=1700000000

# Codec variants: "LABEL|SPEC|MKSQUASHFS_CODEC"
VARIANTS=(
	"gzip|gzip|gzip"
	"xz|xz|xz"
	"lzma|lzma|lzma"
	"lz4|lz4|lz4"
	"lzo|lzo|lzo"
	"zstd|zstd|zstd"
	"gzip-opts|gzip:1,window=10,strategy=filtered+rle|gzip"
	"xz-opts|xz:6,dict=64K,bcj=x86+arm|xz"
	"lz4-hc|lz4:hc|lz4"
	"lzo-3|lzo:3|lzo"
	"lzo1x_1|lzo,algorithm=lzo1x_1|lzo"
	"zstd-19|zstd:19|zstd"
)

# sb_has IMG LINE: unsquashfs -s reports exactly this line about the superblock.
sb_has() { grep -qxF -- "$2" < <(unsquashfs -s "$1"); }
# stat_of IMG PATH: rdsquashfs's view of one inode
stat_of() { rdsquashfs -s "$2" "$1"; }
frag_of() { stat_of "$1" "$2" | awk '/^Fragment index:/{i=$3} /^Fragment offset:/{o=$3} END{print i ":" o}'; }
start_of() { stat_of "$1" "$2" | awk '/^Blocks start:/{print $3}'; }
sparse_blocks() { stat_of "$1" "$2" | grep -c 'size: 0 ' || true; }
# bytes_used IMG: the superblock's bytes_used
bytes_used() { od -An -t u8 -j 40 -N 8 "$1" | tr -d ' '; }

# ref_image [BLOCK_SIZE]: REF, mksquashfs's image of the tree (made once per
# block size), and squashfuse's xattr listing of it in $REF.xattrs.  It is
# lz4 whatever the codec of the image it judges: sqfsdiff and squashfuse
# compare what the images hold, not how it is compressed, and mksquashfs at
# the codecs' default levels took a third of this test's time.
ref_image() {
	local bs=${1:-128K}
	REF=$S/ref-$bs.sqfs
	if [[ ! -f $REF ]]; then
		mksquashfs "$SRC" "$REF" -noappend -comp lz4 -b "$bs" -quiet -no-progress >/dev/null ||
			{ log "FAIL: mksquashfs -comp lz4 -b $bs failed"; exit 1; }
		fuse_image "$REF" "$S/fref" || { log "FAIL: squashfuse mount of $REF"; exit 1; }
		xattr_listing "$S/fref" >"$REF.xattrs" 2>&1
		umount_quiet "$S/fref"
	fi
}

# check_sqfsdiff LABEL OURS REF: sqfsdiff must find nothing.  Lines saying only
# that one image uses an extended inode where the other uses a basic one are
# a representation choice (e.g. the extended file inode that records sparse
# bytes), not a difference, and are allowed.
check_sqfsdiff() {
	local out rc=0 real
	out=$(sqfsdiff -T -a "$2" -b "$3" 2>&1) || rc=$?
	real=$(printf '%s\n' "$out" | grep -Ev ' has an extended type$| has a basic type$' | grep -v '^$' || true)
	if [[ $rc -ne 0 && $rc -ne 1 ]] || [[ -n $real ]]; then
		fail "[$1] sqfsdiff -T -a $2 -b $3 exited $rc:"
		printf '%s\n' "$out" | first 40 >&2
	elif ((rc)); then
		log "note: [$1] sqfsdiff: only basic/extended inode choices differ from mksquashfs:" \
			"$(printf '%s\n' "$out" | sed 's/ has an* \(extended\|basic\) type$/ (\1 in mksquashfs)/' | tr '\n' ' ')"
	fi
}

# judge LABEL IMG MKSQ_CODEC [BLOCK_SIZE]: all readers against $SRC.
judge() {
	local label=$1 img=$2 codec=$3 bs=${4-} ref x out rc
	if ! out=$(rdsquashfs -l / "$img" 2>&1 >/dev/null); then
		fail "[$label] rdsquashfs -l / failed: $out"
	fi
	if [[ $codec != lzma ]]; then
		mount_image "$img" "$S/mnt" || { fail "[$label] kernel mount"; return; }
		compare_tree "$SRC" "$S/mnt" || fail "[$label] kernel mount differs from the source"
		umount_quiet "$S/mnt"
	fi
	x=$S/extract
	rm -rf -- "$x"
	rc=0
	out=$(unsquashfs -n -d "$x" "$img" 2>&1) || rc=$?
	if ((rc)); then
		fail "[$label] unsquashfs exited $rc: $(printf '%s\n' "$out" | tail -5)"
	else
		compare_tree "$SRC" "$x" || fail "[$label] unsquashfs extraction differs from the source"
	fi
	chmod -R u+rwx -- "$x" 2>/dev/null || true
	rm -rf -- "$x"
	# SQFS_TEST_QUICK (tools/test.sh's sanitizer modes): what is checked
	# there is our code running clean while it packs; every reader judges
	# the images in the normal mode.
	[[ ${SQFS_TEST_QUICK-} != 1 ]] || return 0
	ref_image "$bs"
	ref=$REF
	check_sqfsdiff "$label" "$img" "$ref"
	# squashfuse: no lzma support at all (it says so for mksquashfs's image too)
	if [[ $codec == lzma ]]; then
		mkdir -p "$S/tiny" && echo x >"$S/tiny/f"
		mksquashfs "$S/tiny" "$S/tiny-lzma.sqfs" -noappend -comp lzma -quiet -no-progress >/dev/null ||
			fail "[$label] mksquashfs -comp lzma"
		if squashfuse "$S/tiny-lzma.sqfs" "$S/fref" 2>/dev/null; then
			umount_quiet "$S/fref"
			fail "[$label] squashfuse reads mksquashfs's lzma image but was skipped"
		fi
		log "note: [$label] squashfuse cannot read lzma images; skipped"
		return
	fi
	fuse_image "$img" "$S/fuse" || { fail "[$label] squashfuse mount"; return; }
	CMP_NO_XATTRS=1 compare_tree "$SRC" "$S/fuse" ||
		fail "[$label] squashfuse view differs from the source"
	if ! out=$(diff -u --label "squashfuse mksquashfs-image" --label "squashfuse ours" \
		"$ref.xattrs" <(xattr_listing "$S/fuse" 2>&1)); then
		fail "[$label] squashfuse xattrs differ from squashfuse's view of the mksquashfs image:"
		printf '%s\n' "$out" | cut -c1-200 | first 30 >&2
	fi
	umount_quiet "$S/fuse"
}

# codecs: every compressor and its options, then two block sizes, each image
# judged by every reader.
codecs() {
	mkdir "$S/empty"
	for v in "${VARIANTS[@]}"; do
		IFS='|' read -r label spec codec <<<"$v"
		if [[ ${SQFS_TEST_QUICK-} == 1 && $spec != "$codec" ]]; then
			log "note: SQFS_TEST_QUICK=1: [$label] left to the normal mode"
			continue
		fi
		img=$S/img-$label.sqfs
		section "$label ($spec)"
		# A codec left out of the build (meson option) is a missing capability.
		rc=0
		err=$("$SQFS_PACK" -q -c "$spec" "$S/empty" "$S/probe.sqfs" 2>&1) || rc=$?
		rm -f "$S/probe.sqfs"
		if ((rc == 2)) && [[ $err == *"not built in"* ]]; then
			if [[ ${CI-} == true ]]; then
				fail "[$label] $err (a codec missing from the build is a failure when CI=true)"
			else
				log "SKIP: [$label] $err"
			fi
			continue
		fi
		pack -c "$spec" --mkfs-time "$MT" "$SRC" "$img" || { fail "[$label] packing"; continue; }
		judge "$label" "$img" "$codec"
		# No larger than mksquashfs's image of the tree (REF, lz4 too): the
		# tree repeats a 12 KiB value under several keys and sets, stored
		# once and then referenced, as mksquashfs does (or 4 copies more).
		if [[ $label == lz4 && ${SQFS_TEST_QUICK-} != 1 ]]; then
			ours=$(bytes_used "$img") theirs=$(bytes_used "$REF")
			if ((ours * 1000 <= theirs * 1005)); then
				log "ok: [lz4] $ours bytes used, mksquashfs $theirs"
			else
				fail "[lz4] $ours bytes used against mksquashfs's $theirs: more than 1.005 times"
			fi
		fi
		rm -f -- "$img"
	done

	# Block sizes with one codec.
	for bs in 4K:4096 1M:1048576; do
		bytes=${bs#*:}
		bs=${bs%:*}
		section "zstd -b $bs"
		img=$S/img-bs$bs.sqfs
		pack -c zstd -b "$bs" --mkfs-time "$MT" "$SRC" "$img" || { fail "[-b $bs] packing"; continue; }
		if ! sb_has "$img" "Block size $bytes"; then
			fail "[-b $bs] superblock block size: $(unsquashfs -s "$img" | grep 'Block size')"
		fi
		judge "zstd -b $bs" "$img" zstd "$bs"
		rm -f -- "$img"
	done
}

# --- zstd variants: kernel mount + the property the option promises -------------
variant() {	# variant NAME [sqfs-pack options...]: pack, kernel-mount at $S/mnt
	local name=$1
	shift
	section "zstd $name"
	VIMG=$S/var.sqfs
	pack -c zstd --mkfs-time "$MT" "$@" "$SRC" "$VIMG" || { fail "[$name] packing"; return 1; }
	rdsquashfs -l / "$VIMG" >/dev/null || fail "[$name] rdsquashfs -l / failed"
	mount_image "$VIMG" "$S/mnt" || { fail "[$name] kernel mount"; return 1; }
}
end_variant() {
	umount_quiet "$S/mnt"
	rm -f -- "$VIMG"
}

# layout: the default image's layout facts, then the zstd variants, each
# kernel-mounted and checked for what its option promises.
layout() {
	# Default layout facts the variants are measured against.
	pack -c zstd --mkfs-time "$MT" "$SRC" "$S/default.sqfs" || fail "packing the default image"
	D0=$S/default.sqfs
	[[ $(frag_of "$D0" /files/multi) == 0xFFFFFFFF:* ]] ||
		fail "[default] the tail of a multi-block file is in a fragment without --always-fragments"
	[[ $(frag_of "$D0" /files/one) != 0xFFFFFFFF:* ]] || fail "[default] a 1-byte file is not in a fragment"
	[[ $(start_of "$D0" /dup/a/big) == "$(start_of "$D0" /dup/b/big)" ]] ||
		fail "[default] identical files are not shared"
	[[ $(frag_of "$D0" /dup/a/small) == "$(frag_of "$D0" /dup/b/small)" ]] ||
		fail "[default] identical small files do not share a fragment"
	(($(sparse_blocks "$D0" /sparse/hole_aligned) == 3)) ||
		fail "[default] sparse/hole_aligned: expected 3 sparse blocks, rdsquashfs shows $(sparse_blocks "$D0" /sparse/hole_aligned)"
	(($(sparse_blocks "$D0" /files/zero_blocks) == 3)) ||
		fail "[default] files/zero_blocks: expected 3 zero blocks stored sparse"
	sb_has "$D0" 'Filesystem is exportable via NFS' || fail "[default] no export table"
	# the edge cases the tree is made for really are in the image
	big=$(stat_of "$D0" /sparse/big_over_4g)
	if ! grep -qx 'Inode type: extended file' <<<"$big" || ! grep -qx 'File size: 4305465401' <<<"$big"; then
		fail "[default] sparse/big_over_4g is not an extended file inode of 4305465401 bytes: $(head -14 <<<"$big")"
	fi
	bigdir=$(stat_of "$D0" /bigdir)
	n=$(sed -n 's/^Directory index entries: //p' <<<"$bigdir")
	if ! grep -qx 'Inode type: extended directory' <<<"$bigdir" || ((${n:-0} < 2)); then
		fail "[default] bigdir (3000 entries) has no directory index: $(head -14 <<<"$bigdir")"
	fi
	grep -qx 'Hard link count: 3' < <(stat_of "$D0" /xattr/third_name) ||
		fail "[default] xattr/third_name: hard link count is not 3"

	# The whole content once, holes included, through the kernel (compare_tree
	# otherwise samples the holes of the two huge sparse files).
	section "zstd default, full read of every file through the kernel"
	if [[ ${SQFS_TEST_QUICK-} != 1 ]] && mount_image "$D0" "$S/mnt"; then
		CMP_FULL=1 compare_tree "$SRC" "$S/mnt" || fail "[default, full read] kernel mount differs"
		umount_quiet "$S/mnt"
	fi

	if variant --no-fragments --no-fragments; then
		compare_tree "$SRC" "$S/mnt" || fail "[--no-fragments] differs from the source"
		sb_has "$VIMG" 'Number of fragments 0' ||
			fail "[--no-fragments] the image has fragments: $(unsquashfs -s "$VIMG" | grep -i fragment)"
		[[ $(frag_of "$VIMG" /files/one) == 0xFFFFFFFF:* ]] || fail "[--no-fragments] files/one is in a fragment"
		end_variant
	fi
	if variant --always-fragments --always-fragments; then
		compare_tree "$SRC" "$S/mnt" || fail "[--always-fragments] differs from the source"
		f1=$(frag_of "$VIMG" /files/multi)
		[[ $f1 != 0xFFFFFFFF:* ]] || fail "[--always-fragments] the tail of files/multi is not in a fragment"
		t1=$(frag_of "$VIMG" /tails/t1)
		for t in t2 t3 t4_tail_only; do
			[[ $(frag_of "$VIMG" "/tails/$t") == "$t1" ]] ||
				fail "[--always-fragments] identical tails not shared: t1 $t1, $t $(frag_of "$VIMG" "/tails/$t")"
		done
		sb_has "$VIMG" 'Always-use-fragments option is specified' ||
			fail "[--always-fragments] superblock flag ALWAYS_FRAGMENTS not set"
		end_variant
	fi
	if variant --no-exports --no-exports; then
		compare_tree "$SRC" "$S/mnt" || fail "[--no-exports] differs from the source"
		sb_has "$VIMG" 'Filesystem is not exportable via NFS' ||
			fail "[--no-exports] the image still has an export table"
		end_variant
	fi
	if variant --no-xattrs --no-xattrs; then
		CMP_NO_XATTRS=1 compare_tree "$SRC" "$S/mnt" || fail "[--no-xattrs] differs from the source"
		# (the kernel answers EOPNOTSUPP without an xattr table: that is "none")
		out=$(xattr_listing "$S/mnt" 2>/dev/null || true)
		[[ -z $out ]] || { fail "[--no-xattrs] xattrs appear in the image:"; printf '%s\n' "$out" | first 5 | cut -c1-120 >&2; }
		sb_has "$VIMG" 'Xattrs are not stored' || fail "[--no-xattrs] the image has an xattr table"
		end_variant
	fi
	if variant --no-dedup --no-dedup; then
		compare_tree "$SRC" "$S/mnt" || fail "[--no-dedup] differs from the source"
		[[ $(start_of "$VIMG" /dup/a/big) != "$(start_of "$VIMG" /dup/b/big)" ]] ||
			fail "[--no-dedup] identical files still share blocks"
		[[ $(frag_of "$VIMG" /dup/a/small) != "$(frag_of "$VIMG" /dup/b/small)" ]] ||
			fail "[--no-dedup] identical small files still share a fragment entry"
		# hard links are one inode, never "duplicates": still one inode
		[[ $(stat -c %i "$S/mnt/links/a/orig") == "$(stat -c %i "$S/mnt/links/b/second")" ]] ||
			fail "[--no-dedup] hard links were split"
		sb_has "$VIMG" 'Duplicates are not removed' ||
			fail "[--no-dedup] the superblock still says duplicates are removed"
		end_variant
	fi
	# (5 GiB of zeros through the instrumented writer under TSan: 25 s, so the
	# sanitizer modes leave this one to the normal mode)
	if [[ ${SQFS_TEST_QUICK-} == 1 ]]; then
		log "note: SQFS_TEST_QUICK=1: --no-sparse left to the normal mode"
	elif variant --no-sparse --no-sparse; then
		compare_tree "$SRC" "$S/mnt" || fail "[--no-sparse] differs from the source"
		for f in /sparse/hole_aligned /files/zero_blocks /sparse/hole_unaligned; do
			n=$(sparse_blocks "$VIMG" "$f")
			((n == 0)) || fail "[--no-sparse] $f still has $n sparse blocks"
		done
		end_variant
	fi
	if variant --all-root --all-root; then
		CMP_IGNORE="uid gid" compare_tree "$SRC" "$S/mnt" || fail "[--all-root] differs from the source"
		out=$(find "$S/mnt" \( ! -uid 0 -o ! -gid 0 \) -printf '%P %U:%G\n' | first 5)
		[[ -z $out ]] || fail "[--all-root] entries not owned by 0:0: $out"
		end_variant
	fi
	if variant "--force-uid 7" --force-uid 7; then
		CMP_IGNORE="uid" compare_tree "$SRC" "$S/mnt" || fail "[--force-uid 7] differs from the source (gids must be kept)"
		out=$(find "$S/mnt" ! -uid 7 -printf '%P %U\n' | first 5)
		[[ -z $out ]] || fail "[--force-uid 7] entries not owned by uid 7: $out"
		end_variant
	fi
	if variant "--force-gid 9" --force-gid 9; then
		CMP_IGNORE="gid" compare_tree "$SRC" "$S/mnt" || fail "[--force-gid 9] differs from the source (uids must be kept)"
		out=$(find "$S/mnt" ! -gid 9 -printf '%P %G\n' | first 5)
		[[ -z $out ]] || fail "[--force-gid 9] entries not in group 9: $out"
		end_variant
	fi
	if variant "--all-time 12345" --all-time 12345; then
		CMP_IGNORE="mtime" compare_tree "$SRC" "$S/mnt" || fail "[--all-time 12345] differs from the source"
		out=$(find "$S/mnt" -printf '%T@ %P\0' | grep -zv '^12345\.0* ' | tr '\0' '\n' | first 5 || true)
		[[ -z $out ]] || fail "[--all-time 12345] entries with another mtime: $out"
		end_variant
	fi
}

case $PART in
codecs) codecs ;;
layout) layout ;;
*) codecs; layout ;;
esac

finish
