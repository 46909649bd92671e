#!/bin/bash
# test_user.sh SQFS_STAGE SQFS_SEAL SQFS_PACK
#
# A mount made by a user without privileges, the root file system build
# without fakeroot: libfuse mounts through fusermount3, and passthrough is
# off (registering a backing file needs CAP_SYS_ADMIN), so every write goes
# through the daemon.
#   - a file opened first keeps its descriptor when passthrough turns itself
#     off and another handle of it closes (its writes went to another file)
#   - the user stages root's and other owners, set-id bits, a FIFO, a
#     symlink, hard links, a user xattr, a multi-block file and an
#     O_TMPFILE named by linkat, and seals with sqfs-seal; the kernel's
#     view of the image has them as staged, and the image equals what
#     sqfs-pack makes of a copy of that view
#   - devices need CAP_MKNOD in the kernel before the daemon hears of them:
#     mknod of a character device fails with EPERM (pseudo_file= is the way)
#   - pseudo_file: tar x of a tree with /dev unlinks the node it made and
#     cannot make it again; the seal does, and applies the m and x
#     definitions (a file capability, a trusted. attribute) to a file tar
#     made; one whose entry is missing fails the seal, naming it; the mount
#     then shows what the seal applied; -o suid from a user is a warning
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

# user_mount IMG MNT LOG OPTS: the user's daemon in the foreground (DPID),
# its messages in LOG; exits the test if it does not mount.
user_mount() {
	mkdir "$2"
	chown "$NOBODY:$NOGROUP" "$2"
	as_user "$WORK/tools/sqfs-stage" -f -o "$4" "$1" "$2" >>"$3" 2>&1 &
	DPID=$!
	daemon_add "$DPID"
	MOUNTS+=("$2")
	# findmnt, not mountpoint(1): root may not stat a mount of another
	# user's that lacks allow_other.
	for ((i = 0; i < 200; i++)); do
		findmnt -n "$2" >/dev/null && break
		daemon_alive "$DPID" || break
		sleep 0.05
	done
	findmnt -n "$2" >/dev/null || { log "FAIL: the user's sqfs-stage did not mount: $(cat "$3")"; exit 1; }
}

# --- a user's mount --------------------------------------------------------
chmod 666 /dev/fuse
M=$U/mnt
IMG=$U/rootfs.sqfs
user_mount "$IMG" "$M" "$WORK/daemon.log" comp=gzip,mkfs_time=1
if findmnt -n -o OPTIONS "$M" | grep >/dev/null "user_id=$NOBODY"; then
	ok "mounted by uid $NOBODY"
else
	fail "mount options: $(findmnt -n -o OPTIONS "$M")"
fi

if as_user python3 - "$M" <<'EOF'
import ctypes, errno, os, stat, sys, time
m = sys.argv[1]
os.chdir(m)
bad = 0
def check(cond, what):
    global bad
    if not cond:
        bad += 1
        print(f"FAIL: {what}")
# The first file opened keeps its descriptor while passthrough turns itself
# off (no CAP_SYS_ADMIN): a second handle's close must not take it away.
fa = os.open("first", os.O_CREAT | os.O_WRONLY, 0o644)
os.close(os.open("first", os.O_RDONLY))
time.sleep(0.3)                    # the kernel sends RELEASE in the background
try:
    os.fsync(fa)
except OSError as e:
    check(False, f"fsync of the first file after another handle's close: {e}")
with open("second", "wb") as f:
    f.write(b"B" * 8)
fb = os.open("second", os.O_RDWR)  # would take a descriptor number freed too soon
os.pwrite(fa, b"AAAA", 0)
os.close(fa)
os.close(fb)
for p, want in (("first", b"AAAA"), ("second", b"B" * 8)):
    with open(p, "rb") as f:
        got = f.read()
    check(got == want, f"{p} holds {got!r}, not {want!r}")
os.unlink("first")
os.unlink("second")
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
	ok "the user staged owners, set-id bits, a FIFO, links, an xattr, an O_TMPFILE; the first file kept its descriptor"
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

# --- pseudo definitions: what the kernel refuses a user --------------------
# tar x of a tree with /dev unlinks the node the definitions made, then
# fails to mknod it; the seal makes it again.  The m and x definitions name
# a file tar makes later: they wait for the seal (x: a file capability and
# a trusted. attribute, which a user cannot set through the mount).
P=$U/pseudo
cat >"$P" <<'EOF'
dev d 755 0 0
dev/null c 666 0 0 1 3
usr/bin/ping m 4755 0 0
usr/bin/ping x security.capability=0x0100000200200000000000000000000000000000
usr/bin/ping x trusted.note=0tset at the seal
EOF
PT=$WORK/ptree
mkdir -p "$PT/dev" "$PT/usr/bin"
printf 'ping\n' >"$PT/usr/bin/ping"
mknod "$PT/dev/null" c 1 3
tar -C "$PT" --numeric-owner -cf "$U/tree.tar" .
chmod 644 "$U/tree.tar" "$P"
M2=$U/mnt2
IMG2=$U/pseudo.sqfs
user_mount "$IMG2" "$M2" "$WORK/daemon2.log" "comp=gzip,mkfs_time=1,pseudo_file=$P,suid"
if grep -q -- "-o suid is for root only: the mount is nosuid,nodev" "$WORK/daemon2.log"; then
	ok "-o suid from a user: a warning says the mount is nosuid"
else
	fail "-o suid from a user: no warning ($(cat "$WORK/daemon2.log"))"
fi
rc=0
as_user tar -C "$M2" -xpf "$U/tree.tar" 2>"$WORK/tar.err" || rc=$?
if ((rc == 2)) && grep -q "dev/null: Cannot mknod" "$WORK/tar.err" && ! as_user test -e "$M2/dev/null"; then
	ok "tar x removed the node the definitions made, and could not make it"
else
	fail "tar x over dev/null: exit $rc, $(cat "$WORK/tar.err")"
fi
# At the seal an m definition's entry is missing: the seal fails naming it.
as_user mv "$M2/usr/bin/ping" "$M2/usr/bin/ping.away"
expect_exit 1 "usr/bin/ping m 4755 0 0'.*: no such entry to modify" \
	as_user "$WORK/tools/sqfs-seal" --keep "$M2"
as_user mv "$M2/usr/bin/ping.away" "$M2/usr/bin/ping"
if as_user "$WORK/tools/sqfs-seal" --keep "$M2" >"$WORK/seal.out" 2>&1; then
	ok "sealed (--keep) once the entry is back"
else
	fail "sqfs-seal --keep: $(cat "$WORK/seal.out")"
fi
# The mount shows what the seal applied (the kernel was told).
if as_user python3 - "$M2" <<'EOF'
import os, stat, sys
m = sys.argv[1]
st = os.lstat(os.path.join(m, "dev/null"))
p = os.lstat(os.path.join(m, "usr/bin/ping"))
cap = os.getxattr(os.path.join(m, "usr/bin/ping"), "security.capability")
ok = (stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3) and
      stat.S_IMODE(p.st_mode) == 0o4755 and p.st_uid == 0 and
      cap == bytes.fromhex("0100000200200000000000000000000000000000"))
if not ok:
    print(st, p, cap.hex())
sys.exit(0 if ok else 1)
EOF
then
	ok "after the seal the mount shows dev/null again, ping 4755 root with its capability"
else
	fail "the mount after the seal does not show what the definitions made"
fi
as_user "$WORK/tools/sqfs-seal" "$M2" >"$WORK/seal.out" 2>&1 || fail "sqfs-seal: $(cat "$WORK/seal.out")"
wait_daemon 0
if loop_mount "$IMG2" "$WORK/k2"; then
	if python3 - "$WORK/k2" <<'EOF'
import os, stat, sys
k = sys.argv[1]
st = os.lstat(os.path.join(k, "dev/null"))
p = os.lstat(os.path.join(k, "usr/bin/ping"))
f = os.path.join(k, "usr/bin/ping")
ok = (stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3) and
      stat.S_IMODE(st.st_mode) == 0o666 and st.st_uid == 0 and
      stat.S_IMODE(p.st_mode) == 0o4755 and (p.st_uid, p.st_gid) == (0, 0) and
      os.getxattr(f, "security.capability") ==
      bytes.fromhex("0100000200200000000000000000000000000000") and
      os.getxattr(f, "trusted.note") == b"set at the seal")
sys.exit(0 if ok else 1)
EOF
	then
		ok "the image has dev/null, ping 4755 root, its capability and trusted.note"
	else
		fail "the image lacks what the pseudo definitions made: $(ls -ln "$WORK/k2/dev" "$WORK/k2/usr/bin"; getfattr -d -m - "$WORK/k2/usr/bin/ping" 2>&1)"
	fi
	loop_umount "$WORK/k2"
fi
finish

