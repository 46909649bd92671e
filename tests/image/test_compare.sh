#!/bin/bash
# test_compare.sh [SQFS_PACK]
#
# Self-test of lib.sh's compare_tree: a faithful copy must compare equal, and
# each single change (content, mode, owner, group, mtime, size, nlink, type,
# symlink target, device number, xattr value, a lost xattr, an extra or a
# missing entry, a byte in a hole or in the data of a huge sparse file, the
# root's mode) must be reported.  Without this, a broken compare_tree would
# make every other test pass.  SQFS_PACK is accepted for a uniform interface
# and not used.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "${1:-/bin/true}"
need_root
need_cmd getfattr setfattr mknod cp
[[ -x $PYTHON3 ]] || need_cmd python3

scratch_fs "$WORK/fs"
A=$WORK/fs/a
mkdir -p "$A/d"
printf 'content one\n' >"$A/d/file"
printf 'linked\n' >"$A/link1"
ln "$A/link1" "$A/d/link2"
ln -s target-x "$A/sym"
mknod "$A/dev" c 259 70000
mkfifo "$A/fifo"
setfattr -n user.k -v value "$A/d/file"
setfattr -n trusted.t -v tval "$A/fifo"
truncate -s $((4 * 1024 * 1024 * 1024 + 100)) "$A/huge"
printf 'data in the middle' | dd of="$A/huge" bs=1 seek=$((3 * 1024 * 1024 * 1024)) conv=notrunc status=none
chown 1000:1000 "$A/d/file"
find "$A" -exec touch -h -d @1600000000 {} +

fresh() {
	rm -rf "$WORK/fs/b"
	cp -a "$A" "$WORK/fs/b"
}
# expect_diff LABEL REGEX: compare_tree must fail and mention REGEX.
expect_diff() {
	local out
	if out=$(compare_tree "$A" "$WORK/fs/b" 2>&1); then
		fail "[$1] compare_tree found no difference"
	elif ! grep -Eq -- "$2" <<<"$out"; then
		fail "[$1] compare_tree failed without mentioning /$2/: $out"
	else
		log "ok: [$1] reported"
	fi
}
B=$WORK/fs/b

fresh
if out=$(compare_tree "$A" "$B" 2>&1); then
	log "ok: an exact copy compares equal"
else
	fail "an exact copy differs: $out"
fi

fresh; printf 'content 0ne\n' >"$B/d/file"; touch -d @1600000000 "$B/d/file"
expect_diff content 'd/file'
fresh; chmod 0600 "$B/d/file"; expect_diff mode 'd/file.*mode=600'
fresh; chown 1001 "$B/d/file"; expect_diff uid 'd/file.*uid=1001'
fresh; chgrp 1001 "$B/d/file"; expect_diff gid 'd/file.*gid=1001'
fresh; touch -d @1600000001 "$B/d/file"; expect_diff mtime 'd/file.*mtime=1600000001'
fresh; printf 'x' >>"$B/d/file"; touch -d @1600000000 "$B/d/file"; expect_diff size 'd/file.*size=13'
fresh; rm "$B/d/link2"; cp -a "$B/link1" "$B/d/link2"; touch -d @1600000000 "$B/d"
expect_diff nlink 'link2.*nlink=1'
fresh; rm "$B/fifo"; : >"$B/fifo"; touch -d @1600000000 "$B/fifo" "$B"
expect_diff type 'fifo.*type=f'
fresh; rm "$B/sym"; ln -s target-y "$B/sym"; touch -h -d @1600000000 "$B/sym" "$B"
expect_diff 'symlink target' 'sym.*target-y'
fresh; rm "$B/dev"; mknod "$B/dev" c 259 70001; touch -d @1600000000 "$B/dev" "$B"
expect_diff rdev 'dev.*259:70001'
fresh; setfattr -n user.k -v other "$B/d/file"; expect_diff 'xattr value' 'user.k'
fresh; setfattr -x trusted.t "$B/fifo"; expect_diff 'lost xattr' 'trusted.t'
fresh; : >"$B/d/extra"; touch -d @1600000000 "$B/d"; expect_diff 'extra entry' 'd/extra'
fresh; rm "$B/d/file"; touch -d @1600000000 "$B/d"; expect_diff 'missing entry' 'd/file'
fresh; printf 'D' | dd of="$B/huge" bs=1 seek=$((3 * 1024 * 1024 * 1024 + 5)) conv=notrunc status=none
touch -d @1600000000 "$B/huge"; expect_diff 'sparse data' 'huge'
# Holes of huge sparse files are sampled (both edges and 30 points between),
# or read in full with CMP_FULL=1.
fresh; printf 'H' | dd of="$B/huge" bs=1 seek=$((3 * 1024 * 1024 * 1024 + 4096 + 100)) conv=notrunc status=none
touch -d @1600000000 "$B/huge"; expect_diff 'byte at the edge of a hole' 'huge.*hole'
fresh; printf 'H' | dd of="$B/huge" bs=1 seek=$((3 * 1024 * 1024 * 1024 + 4096 * 3)) conv=notrunc status=none
touch -d @1600000000 "$B/huge"; CMP_FULL=1 expect_diff 'byte inside a hole, CMP_FULL=1' 'huge'
fresh; chmod 0700 "$B"; expect_diff 'root mode' '^[-+]	type=d mode=700'

finish
