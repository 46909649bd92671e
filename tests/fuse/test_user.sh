#!/bin/bash
# test_user.sh SQFS_STAGE SQFS_SEAL SQFS_PACK
#
# A mount made by a user without privileges, the root file system build
# without fakeroot: libfuse mounts through fusermount3, and passthrough is
# off (registering a backing file needs CAP_SYS_ADMIN), so every write goes
# through the daemon.
#   - the user stages root's and other owners, set-id bits, a FIFO, a
#     symlink, hard links, a user xattr, a multi-block file and an
#     O_TMPFILE named by linkat, and seals with sqfs-seal; the kernel's
#     view of the image has them as staged, and the image equals what
#     sqfs-pack makes of a copy of that view
#   - devices need CAP_MKNOD in the kernel before the daemon hears of them:
#     mknod of a character device fails with EPERM (pseudo_file= is the way)
#   - where /dev/fuse is not open to the user (mode 0600), the mount fails
#     with exit 1 and a message that says so, and leaves no spool behind
# /dev/fuse's mode is changed for the test and put back at its end.
set -euo pipefail
# shellcheck source=tests/fuse/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "$@"
need_loop
need_cmd setpriv fusermount3 unsquashfs
id nobody >/dev/null 2>&1 || skip_or_fail "no user 'nobody'"
FUSE_MODE=$(stat -c %a /dev/fuse)
trap 'rc=$?; chmod "$FUSE_MODE" /dev/fuse; (exit $rc); cleanup' EXIT
NOBODY=$(id -u nobody)
NOGROUP=$(id -g nobody)

# The tools where the user can run them (the build tree may be under a
# home directory closed to others).
chmod 755 "$WORK"
mkdir -m 755 "$WORK/tools"
cp "$STAGE" "$SEAL" "$WORK/tools/"
U=$WORK/u
mkdir -p "$U"
chown "$NOBODY:$NOGROUP" "$U"

as_user() {
	env HOME="$U" setpriv --reuid="$NOBODY" --regid="$NOGROUP" --clear-groups "$@"
}

# --- /dev/fuse closed to the user: a clear failure -------------------------
chmod 600 /dev/fuse
mkdir "$U/m0"
chown "$NOBODY:$NOGROUP" "$U/m0"
expect_exit 1 "/dev/fuse is not open to this user" \
	as_user "$WORK/tools/sqfs-stage" -f "$U/a0.sqfs" "$U/m0"
if compgen -G "$U/.a0.sqfs.spool.*" >/dev/null; then
	fail "a failed mount left its spool"
else
	ok "a failed mount left no spool"
fi

# --- a user's mount --------------------------------------------------------
chmod 666 /dev/fuse
M=$U/mnt
IMG=$U/rootfs.sqfs
mkdir "$M"
chown "$NOBODY:$NOGROUP" "$M"
as_user "$WORK/tools/sqfs-stage" -f -o comp=gzip,mkfs_time=1 "$IMG" "$M" \
	>>"$WORK/daemon.log" 2>&1 &
DPID=$!
DAEMONS+=("$DPID")
MOUNTS+=("$M")
# findmnt, not mountpoint(1): root may not stat a mount of another user's
# that lacks allow_other.
for ((i = 0; i < 200; i++)); do
	findmnt -n "$M" >/dev/null && break
	kill -0 "$DPID" 2>/dev/null || break
	sleep 0.05
done
findmnt -n "$M" >/dev/null || { log "FAIL: the user's sqfs-stage did not mount"; exit 1; }
if findmnt -n -o OPTIONS "$M" | grep -q "user_id=$NOBODY"; then
	ok "mounted by uid $NOBODY"
else
	fail "mount options: $(findmnt -n -o OPTIONS "$M")"
fi

if as_user python3 - "$M" <<'EOF'
import ctypes, errno, os, stat, sys
m = sys.argv[1]
os.chdir(m)
bad = 0
def check(cond, what):
    global bad
    if not cond:
        bad += 1
        print(f"FAIL: {what}")
os.makedirs("usr/bin")
os.mkdir("etc")
with open("etc/passwd", "w") as f:
    f.write("root:x:0:0:root:/root:/bin/sh\n")
with open("usr/bin/su", "wb") as f:
    f.write(b"\x7fELF" + bytes(range(256)) * 1200)   # 300 KiB: blocks and a tail
for p in ("usr", "usr/bin", "etc", "etc/passwd", "usr/bin/su", "."):
    os.chown(p, 0, 0)
os.chmod("usr/bin/su", 0o4755)
os.link("etc/passwd", "etc/passwd-")
with open("etc/shadow", "w") as f:
    f.write("root:*:1::::::\n")
os.chown("etc/shadow", 0, 42)
os.chmod("etc/shadow", 0o640)
with open("owned", "w") as f:
    f.write("x")
os.chown("owned", 1234, 5678)
os.mkfifo("usr/fifo", 0o600)
os.chown("usr/fifo", 0, 0)
os.symlink("usr/bin/su", "su")
os.lchown("su", 0, 0)
os.setxattr("owned", "user.note", b"staged by a user")
fd = os.open("etc", os.O_TMPFILE | os.O_WRONLY, 0o644)
os.write(fd, b"made unnamed\n")
libc = ctypes.CDLL(None, use_errno=True)
if libc.linkat(-100, f"/proc/self/fd/{fd}".encode(), -100, b"etc/hostname", 0x400):
    check(False, f"linkat: {os.strerror(ctypes.get_errno())}")
os.close(fd)
os.chown("etc/hostname", 0, 0)
try:
    os.mknod("null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    check(False, "mknod of a device succeeded without CAP_MKNOD")
except PermissionError:
    pass
st = os.stat("usr/bin/su")
check(st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o4755, "the mount shows su as staged")
for p in ("usr", "usr/bin", "etc", "."):
    os.utime(p, (1000000000, 1000000000))
sys.exit(1 if bad else 0)
EOF
then
	ok "the user staged owners, set-id bits, a FIFO, links, an xattr, an O_TMPFILE"
else
	fail "staging as the user"
fi
if as_user "$WORK/tools/sqfs-seal" "$M" >"$WORK/seal.out" 2>&1; then
	ok "the user sealed: $(head -n 1 "$WORK/seal.out")"
else
	fail "sqfs-seal as the user: $(cat "$WORK/seal.out")"
fi
wait_daemon 0

# --- the image, through the kernel -----------------------------------------
if loop_mount "$IMG" "$WORK/k"; then
	python3 - "$WORK/k" <<'EOF' && ok "the kernel's view is what the user staged" || fail "the kernel's view differs from what was staged"
import os, stat, sys
k = sys.argv[1]
want = {  # path: (type, mode, uid, gid)
    ".": (stat.S_IFDIR, 0o755, 0, 0),
    "usr": (stat.S_IFDIR, 0o755, 0, 0),
    "usr/bin/su": (stat.S_IFREG, 0o4755, 0, 0),
    "usr/fifo": (stat.S_IFIFO, 0o600, 0, 0),
    "etc/passwd": (stat.S_IFREG, 0o644, 0, 0),
    "etc/shadow": (stat.S_IFREG, 0o640, 0, 42),
    "etc/hostname": (stat.S_IFREG, 0o644, 0, 0),
    "owned": (stat.S_IFREG, 0o644, 1234, 5678),
    "su": (stat.S_IFLNK, 0o777, 0, 0),
}
bad = 0
for p, (t, mode, uid, gid) in want.items():
    st = os.lstat(os.path.join(k, p))
    got = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
    if got != (t, mode, uid, gid):
        bad += 1
        print(f"FAIL: {p}: {got}, want {(t, mode, uid, gid)}")
def read(p):
    with open(os.path.join(k, p), "rb") as f:
        return f.read()
checks = [
    (read("usr/bin/su") == b"\x7fELF" + bytes(range(256)) * 1200, "su's data"),
    (read("etc/hostname") == b"made unnamed\n", "the O_TMPFILE's data"),
    (os.stat(os.path.join(k, "etc/passwd")).st_ino == os.stat(os.path.join(k, "etc/passwd-")).st_ino,
     "hard link"),
    (os.stat(os.path.join(k, "etc/passwd")).st_nlink == 2, "link count"),
    (os.readlink(os.path.join(k, "su")) == "usr/bin/su", "symlink target"),
    (os.getxattr(os.path.join(k, "owned"), "user.note") == b"staged by a user", "user xattr"),
    (not os.path.exists(os.path.join(k, "null")), "no device"),
    (os.stat(os.path.join(k, "usr")).st_mtime == 1000000000, "directory mtime"),
]
for c, what in checks:
    if not c:
        bad += 1
        print(f"FAIL: {what}")
sys.exit(1 if bad else 0)
EOF
	mkdir "$WORK/copy"
	cp -a "$WORK/k/." "$WORK/copy/"
	loop_umount "$WORK/k"
	"$PACK" -q --mkfs-time 1 -c gzip "$WORK/copy" "$WORK/ref.sqfs"
	if cmp -s "$IMG" "$WORK/ref.sqfs"; then
		ok "the user's image equals sqfs-pack of its tree"
	else
		fail "the user's image differs from sqfs-pack of its tree"
	fi
fi
finish
