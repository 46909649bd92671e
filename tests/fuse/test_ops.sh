#!/bin/bash
# test_ops.sh SQFS_STAGE SQFS_SEAL SQFS_PACK
#
# Each operation's behaviour and errno (ops.py), then the tree left behind is
# sealed with --keep and the kernel's view of the image must equal the
# mount's view (modes, owners, mtimes, devices, symlinks, hard links, xattrs);
# the image equals sqfs-pack of a copy of the tree.
set -euo pipefail
# shellcheck source=tests/fuse/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "$@"
need_loop
need_cmd getfattr

MNT=$WORK/mnt
IMG=$WORK/ops.sqfs
stage_mount "$IMG" "$MNT" -o mkfs_time=1,comp=gzip
if python3 "$FUSE_TESTS_DIR/ops.py" "$MNT"; then
	ok "operations and errno (ops.py)"
else
	fail "operations and errno (ops.py)"
fi
# the ops leave open nothing; seal, stay mounted, compare
"$SEAL" --keep --quiet "$MNT" || fail "sqfs-seal --keep"
mountpoint -q "$MNT" && ok "still mounted with --keep" || fail "--keep unmounted"
loop_mount "$IMG" "$WORK/k" && {
	tree_cmp "$MNT" "$WORK/k" "mount view vs image"
	loop_umount "$WORK/k"
}
# sqfs-pack of a copy of the staged tree makes the same bytes
mkdir "$WORK/copy"
cp -a "$MNT/." "$WORK/copy/"
"$PACK" -q --mkfs-time 1 -c gzip "$WORK/copy" "$WORK/ref.sqfs"
if cmp -s "$IMG" "$WORK/ref.sqfs"; then
	ok "image equals sqfs-pack of a copy"
else
	fail "image differs from sqfs-pack of a copy"
fi
# getfattr through the mount sees no seal attribute
if getfattr -d -m - "$MNT" 2>/dev/null | grep >/dev/null sqfs-stage; then
	fail "seal xattr visible to getfattr"
else
	ok "seal xattr hidden"
fi
"$SEAL" --quiet "$MNT" || fail "final sqfs-seal"
wait_daemon 0
finish
