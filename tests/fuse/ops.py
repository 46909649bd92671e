#!/usr/bin/env python3
"""ops.py MOUNTPOINT: each operation's behaviour and errno inside a sqfs-stage
mount.  Prints one line per failed check; exit status 1 if any failed.
Leaves a tree behind that the caller seals and compares."""
import ctypes
import errno
import mmap
import os
import stat
import sys

M = sys.argv[1]
os.chdir(M)
bad = 0
libc = ctypes.CDLL(None, use_errno=True)


def check(cond, what):
    global bad
    if not cond:
        bad += 1
        print(f"FAIL: {what}")


def expect_errno(code, fn, *args, what=None):
    try:
        fn(*args)
    except OSError as e:
        check(e.errno == code, f"{what or fn.__name__}{args}: errno {errno.errorcode.get(e.errno)}, "
              f"expected {errno.errorcode[code]}")
        return
    check(False, f"{what or fn.__name__}{args}: succeeded, expected {errno.errorcode[code]}")


def write(path, data, mode=0o644):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


def read(path):
    with open(path, "rb") as f:
        return f.read()


# --- create, write, read, pwrite, append, truncate ---
write("f", b"hello world")
check(read("f") == b"hello world", "read back")
fd = os.open("f", os.O_RDWR)
os.pwrite(fd, b"WORLD", 6)
os.pwrite(fd, b"!", 20)            # beyond the end: a hole
check(os.fstat(fd).st_size == 21, "size after pwrite beyond EOF")
check(os.pread(fd, 100, 0) == b"hello WORLD" + b"\0" * 9 + b"!", "pread with hole")
os.ftruncate(fd, 5)
check(os.fstat(fd).st_size == 5 and os.pread(fd, 100, 0) == b"hello", "ftruncate shrink")
os.ftruncate(fd, 10)
check(os.pread(fd, 100, 0) == b"hello" + b"\0" * 5, "ftruncate grow")
os.fsync(fd)
os.fdatasync(fd)
os.close(fd)
os.truncate("f", 3)
check(read("f") == b"hel", "truncate by path")
with open("f", "ab") as f:
    f.write(b"p!")
check(read("f") == b"help!", "append")
fd = os.open("f", os.O_WRONLY | os.O_TRUNC)
os.close(fd)
check(os.stat("f").st_size == 0, "O_TRUNC")
big = os.urandom(3 * 1024 * 1024 + 17)
write("big", big)
check(read("big") == big, "3 MiB write/read")
check(os.stat("big").st_blocks * 512 >= len(big), f"st_blocks of a full file: {os.stat('big').st_blocks}")
expect_errno(errno.EEXIST, os.open, "big", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
expect_errno(errno.ENOENT, os.open, "missing", os.O_RDONLY)
expect_errno(errno.ENOENT, os.stat, "missing/x")
expect_errno(errno.ENOTDIR, os.stat, "f/x")
expect_errno(errno.EISDIR, os.open, ".", os.O_WRONLY)

# --- sparse files, SEEK_DATA/SEEK_HOLE, fallocate ---
fd = os.open("sparse", os.O_CREAT | os.O_RDWR, 0o644)
os.pwrite(fd, b"x" * 4096, 1 << 20)
os.ftruncate(fd, 4 << 20)
# st_blocks is the spool file's: du and the hole detection of cp and tar use it.
st = os.fstat(fd)
check(0 < st.st_blocks * 512 < 1 << 20, f"st_blocks of a 4 MiB file with 4 KiB of data: {st.st_blocks}")
check(os.lseek(fd, 0, os.SEEK_DATA) == 1 << 20, "SEEK_DATA")
check(os.lseek(fd, 1 << 20, os.SEEK_HOLE) == (1 << 20) + 4096, "SEEK_HOLE")
expect_errno(errno.ENXIO, os.lseek, fd, 2 << 20, os.SEEK_DATA, what="SEEK_DATA in the tail hole")
os.posix_fallocate(fd, 0, 8 << 20)
check(os.fstat(fd).st_size == 8 << 20, "fallocate extends")
allocated = os.fstat(fd).st_blocks
check(allocated * 512 >= 8 << 20, f"st_blocks after fallocate of 8 MiB: {allocated}")
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 1, 2
r = libc.fallocate(fd, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE, ctypes.c_long(1 << 20), ctypes.c_long(4096))
check(r == 0, f"punch hole: {os.strerror(ctypes.get_errno())}")
check(os.pread(fd, 4096, 1 << 20) == b"\0" * 4096, "punched range reads zeros")
check(os.fstat(fd).st_size == 8 << 20, "punch keeps the size")
check(os.fstat(fd).st_blocks < allocated, f"st_blocks after a punch: {os.fstat(fd).st_blocks}, was {allocated}")
os.close(fd)
check(os.stat("sparse").st_blocks < allocated, "st_blocks after the close")
os.truncate("sparse", 4 << 20)
check(os.stat("sparse").st_blocks * 512 <= 4 << 20, "st_blocks after truncate by path")
os.truncate("sparse", 8 << 20)

# --- a shared mapping's write-back after an explicit mtime ---
# Linux moves the mtime when a page is first dirtied; the daemon sees the
# write only when the kernel writes the page back, which must not undo a
# utimensat made in between (the image would carry the write-back's time).
write("mapped", b"\0" * 8192)
fd = os.open("mapped", os.O_RDWR)
mm = mmap.mmap(fd, 8192)
os.close(fd)
mm[0:4] = b"DATA"
os.utime("mapped", ns=(0, 1_000_000_000_123))
mm.flush()
check(os.stat("mapped").st_mtime_ns == 1_000_000_000_123,
      f"mtime after a mapping's write-back: {os.stat('mapped').st_mtime_ns}")
mm.close()
check(os.stat("mapped").st_mtime_ns == 1_000_000_000_123 and read("mapped")[:4] == b"DATA",
      "mtime and data after munmap")
# A write() after the utime moves it again, and so does the next write-back.
with open("mapped", "r+b") as f:
    f.write(b"W")
check(os.stat("mapped").st_mtime > 1_700_000_000, "mtime after a write()")
# A time set while nothing has the file open for writing is no shield: a
# mapping made later writes through a new fault, which moves the mtime.
os.utime("mapped", ns=(0, 5_000_000_000))
fd = os.open("mapped", os.O_RDWR)
mm = mmap.mmap(fd, 8192)
os.close(fd)
mm[100:104] = b"LATE"
mm.close()
check(os.stat("mapped").st_mtime > 1_700_000_000 and read("mapped")[100:104] == b"LATE",
      f"a mapping's write after a time set with no writer: {os.stat('mapped').st_mtime}")
os.utime("mapped", ns=(0, 1_000_000_000_123))

# --- directories ---
os.mkdir("d", 0o755)
expect_errno(errno.EEXIST, os.mkdir, "d")
expect_errno(errno.EEXIST, os.mkdir, "f")
os.mkdir("d/sub")
write("d/sub/file", b"x")
expect_errno(errno.ENOTEMPTY, os.rmdir, "d")
expect_errno(errno.ENOTDIR, os.rmdir, "f")
expect_errno(errno.ENOENT, os.rmdir, "nodir")
expect_errno(errno.EISDIR, os.unlink, "d")
expect_errno(errno.ENOENT, os.unlink, "nofile")
expect_errno(errno.ENOTDIR, os.mkdir, "f/x")
os.mkdir("gone")
os.rmdir("gone")
check(not os.path.exists("gone"), "rmdir")
check(os.stat("d").st_nlink == 3, f"dir nlink {os.stat('d').st_nlink}")
check(sorted(os.listdir("d")) == ["sub"], "listdir")
for i in range(300):
    write(f"d/many{i:03d}", b"")
check(len(os.listdir("d")) == 301, "listdir of 301 entries")
for i in range(300):
    os.unlink(f"d/many{i:03d}")
# rewinddir(3) shows the directory as it is now (POSIX), here through one open
# handle: os.listdir(fd) rewinds the shared offset when it is done.
dfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY)
check(sorted(os.listdir(dfd)) == ["sub"], "listdir through a directory fd")
write("d/late", b"")
check(sorted(os.listdir(dfd)) == ["late", "sub"], "an entry made after the first listing, after a rewind")
os.unlink("d/late")
check(sorted(os.listdir(dfd)) == ["sub"], "an entry removed, after a rewind")
os.close(dfd)
# Listings of a changing directory by several handles at once.  The kernel's
# listing cache is the directory's: a handle that read part of it resumes
# with its own request at an offset another handle's listing gave, so an
# offset must name the same place in every listing (as positions in each
# handle's own copy, names came twice).  POSIX: names neither made nor
# removed meanwhile come exactly once.
os.mkdir("cl")
for i in range(4000):
    write(f"cl/s{i:05d}", b"")


def lister(wfd, rounds):
    wrong = 0
    for _ in range(rounds):
        names = [n for n in os.listdir("cl") if n.startswith("s")]
        wrong += len(names) != 4000 or len(set(names)) != 4000
    os.write(wfd, b"%d\n" % wrong)
    os._exit(0)


churn = os.fork()
if not churn:
    try:
        while True:
            write("cl/tmp", b"")
            os.unlink("cl/tmp")
    finally:
        os._exit(0)
pipes, kids = [], []
for _ in range(3):
    r, w = os.pipe()
    pid = os.fork()
    if not pid:
        os.close(r)
        lister(w, 150)
    os.close(w)
    pipes.append(r)
    kids.append(pid)
wrong = 0
for r, pid in zip(pipes, kids):
    wrong += int(os.read(r, 64) or b"450")
    os.close(r)
    os.waitpid(pid, 0)
os.kill(churn, 9)
os.waitpid(churn, 0)
check(wrong == 0, f"concurrent listings of a changing directory: {wrong} of 450 "
      "had a name twice or missed one")
for n in os.listdir("cl"):
    os.unlink(f"cl/{n}")
os.rmdir("cl")
long = "n" * 255
write(long, b"long")
check(read(long) == b"long", "255-byte name")
# SquashFS stores 256-byte names; 257 is too long (test_bounds.sh has more).
expect_errno(errno.ENAMETOOLONG, os.open, "n" * 257, os.O_CREAT | os.O_WRONLY)
expect_errno(errno.ENAMETOOLONG, os.mkdir, "n" * 257)

# --- unlink of an open file ---
write("open-unlinked", b"still here")
fd = os.open("open-unlinked", os.O_RDWR)
os.unlink("open-unlinked")
check(not os.path.exists("open-unlinked"), "unlinked name gone")
check(os.pread(fd, 100, 0) == b"still here", "read after unlink")
os.pwrite(fd, b"STILL", 0)
check(os.pread(fd, 5, 0) == b"STILL", "write after unlink")
check(os.fstat(fd).st_nlink == 0, "nlink 0 after unlink")
# Opening it again through /proc works, as on a local file system: the
# kernel still knows the inode, and so must the daemon.
fd2 = os.open("/proc/self/fd/%d" % fd, os.O_RDONLY)
check(os.read(fd2, 100) == b"STILL here", "open of an unlinked open file by /proc/self/fd")
os.close(fd2)
os.close(fd)
# A name looked up, then replaced by a rename before the open: the open
# gets the old file (rename is atomic for readers), not ENOENT.  Two
# processes race 300 times; no open may fail.
write("rn-target", b"v0")
pid = os.fork()
if pid == 0:
    for i in range(300):
        write("rn-target.tmp", b"v%d" % (i + 1))
        os.rename("rn-target.tmp", "rn-target")
    os._exit(0)
failed = 0
while True:
    try:
        with open("rn-target", "rb") as f:
            f.read()
    except OSError:
        failed += 1
    done, _ = os.waitpid(pid, os.WNOHANG)
    if done:
        break
check(failed == 0, "opens racing rename-over: %d failed" % failed)
os.unlink("rn-target")

# --- rename ---
write("r1", b"one")
write("r2", b"two")
os.rename("r1", "r2")
check(read("r2") == b"one" and not os.path.exists("r1"), "rename over a file")
os.mkdir("rd1")
os.mkdir("rd2")
os.rename("rd1", "rd2")
check(os.path.isdir("rd2") and not os.path.exists("rd1"), "rename dir over an empty dir")
expect_errno(errno.ENOTEMPTY, os.rename, "rd2", "d")
expect_errno(errno.EISDIR, os.rename, "r2", "rd2")
expect_errno(errno.ENOTDIR, os.rename, "rd2", "r2")
expect_errno(errno.EINVAL, os.rename, "d", "d/sub/inside")
expect_errno(errno.ENOENT, os.rename, "nothing", "x")
os.rename("d/sub/file", "moved")
check(read("moved") == b"x", "rename across directories")
os.rename("moved", "d/sub/file")
AT_FDCWD = -100
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2


def renameat2(a, b, flags):
    if libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), flags):
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


write("x1", b"first")
write("x2", b"second")
expect_errno(errno.EEXIST, renameat2, "x1", "x2", RENAME_NOREPLACE)
renameat2("x1", "x2", RENAME_EXCHANGE)
check(read("x1") == b"second" and read("x2") == b"first", "RENAME_EXCHANGE files")
renameat2("x1", "d", RENAME_EXCHANGE)
check(os.path.isdir("x1") and read("d") == b"second", "RENAME_EXCHANGE file and dir")
renameat2("x1", "d", RENAME_EXCHANGE)
expect_errno(errno.ENOENT, renameat2, "x1", "nope", RENAME_EXCHANGE)
renameat2("x1", "x3", RENAME_NOREPLACE)
check(read("x3") == b"second", "RENAME_NOREPLACE to a free name")

# --- hard links, symlinks ---
write("h1", b"linked")
os.link("h1", "d/h2")
check(os.stat("h1").st_nlink == 2 and os.stat("h1").st_ino == os.stat("d/h2").st_ino, "link")
expect_errno(errno.EEXIST, os.link, "h1", "d/h2")
expect_errno(errno.EPERM, os.link, "d", "dlink")
expect_errno(errno.ENOENT, os.link, "nothing", "x")
write("h3", b"three")
os.link("h3", "h4")
os.unlink("h3")
check(read("h4") == b"three" and os.stat("h4").st_nlink == 1, "unlink one of two links")
os.symlink("d/sub/file", "sl")
check(os.readlink("sl") == "d/sub/file" and read("sl") == b"x", "symlink/readlink")
os.symlink("/dangling/" + "t" * 2000, "sl-long")
check(len(os.readlink("sl-long")) == 2010, "long symlink target")
expect_errno(errno.EEXIST, os.symlink, "x", "sl")
expect_errno(errno.EINVAL, os.readlink, "f")

# --- O_TMPFILE: a file without a name until linkat(2) gives it one ---
AT_SYMLINK_FOLLOW = 0x400


def link_fd(fd, name):
    if libc.linkat(AT_FDCWD, f"/proc/self/fd/{fd}".encode(), AT_FDCWD, name.encode(),
                   AT_SYMLINK_FOLLOW):
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


os.chmod("d", 0o2755)              # set-gid: a new file takes the directory's group
os.chown("d", -1, 4321)
fd = os.open("d", os.O_TMPFILE | os.O_RDWR, 0o640)
os.write(fd, b"t" * 200000)        # a full block and a tail
check(os.fstat(fd).st_nlink == 0, "O_TMPFILE: nlink 0")
check(os.listdir("d").count("tmp-linked") == 0, "O_TMPFILE: no entry before the link")
link_fd(fd, "d/tmp-linked")
os.pwrite(fd, b"END", 200000)       # written after the link: the image has it too
st = os.fstat(fd)
check(st.st_nlink == 1 and st.st_ino == os.stat("d/tmp-linked").st_ino, "O_TMPFILE: linked")
check(st.st_gid == 4321 and stat.S_IMODE(st.st_mode) == 0o640, "O_TMPFILE: group and mode")
os.close(fd)
check(read("d/tmp-linked") == b"t" * 200000 + b"END", "O_TMPFILE: data under the new name")
fd = os.open("d", os.O_TMPFILE | os.O_WRONLY | os.O_EXCL, 0o600)
os.write(fd, b"never named")
expect_errno(errno.ENOENT, link_fd, fd, "tmp-excl", what="linkat of an O_EXCL tmpfile")
os.close(fd)
fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o600)
os.write(fd, b"dropped")
os.close(fd)                       # never linked: nothing is left of it
check(not os.path.exists("tmp-excl"), "O_TMPFILE: no entry for unlinked files")
os.chmod("d", 0o755)
os.chown("d", -1, 0)

# --- mknod ---
os.mknod("chr", 0o620 | stat.S_IFCHR, os.makedev(4, 64))
os.mknod("blk", 0o660 | stat.S_IFBLK, os.makedev(8, 1))
os.mknod("fifo", 0o644 | stat.S_IFIFO)
os.mknod("sock", 0o755 | stat.S_IFSOCK)
os.mknod("reg", 0o600 | stat.S_IFREG)
st = os.stat("chr")
check(stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(4, 64), "mknod chr")
st = os.stat("blk")
check(stat.S_ISBLK(st.st_mode) and st.st_rdev == os.makedev(8, 1), "mknod blk")
check(stat.S_ISFIFO(os.stat("fifo").st_mode), "mknod fifo")
check(stat.S_ISSOCK(os.stat("sock").st_mode), "mknod sock")
check(stat.S_ISREG(os.stat("reg").st_mode) and read("reg") == b"", "mknod reg")
expect_errno(errno.EEXIST, os.mknod, "fifo", 0o644 | stat.S_IFIFO)

# --- chmod, chown, utimens ---
write("own", b"owned")
os.chmod("own", 0o4751)
check(stat.S_IMODE(os.stat("own").st_mode) == 0o4751, "chmod setuid")
os.chown("own", 123456, 654321)
st = os.stat("own")
check((st.st_uid, st.st_gid) == (123456, 654321), "chown to arbitrary ids")
os.chown("sl", 77, 88, follow_symlinks=False)
st = os.lstat("sl")
check((st.st_uid, st.st_gid) == (77, 88), "lchown of a symlink")
os.chmod("d/sub", 0o2775)
os.mkdir("d/sub/inherit")
check(os.stat("d/sub/inherit").st_mode & stat.S_ISGID, "setgid dir inherited")
os.utime("own", ns=(1_000_000_001, 1_234_567_890_123_456_789))
st = os.stat("own")
check(st.st_mtime_ns == 1_234_567_890_123_456_789 and st.st_atime_ns == 1_000_000_001,
      f"utimens with nanoseconds: {st.st_mtime_ns} {st.st_atime_ns}")
os.utime("sl", ns=(5, 1_500_000_000_000_000_000), follow_symlinks=False)
check(os.lstat("sl").st_mtime_ns == 1_500_000_000_000_000_000, "utimens on a symlink")
before = os.stat("own").st_mtime_ns
os.utime("own")
check(os.stat("own").st_mtime_ns != before, "utimens now")

# --- xattrs ---
os.setxattr("own", "user.a", b"1")
os.setxattr("own", "trusted.b", b"")
os.setxattr("own", "security.c", b"\0\1\2")
os.setxattr("d", "user.dir", b"dirvalue")
check(os.getxattr("own", "user.a") == b"1", "getxattr")
check(os.getxattr("own", "trusted.b") == b"", "empty value")
check(sorted(os.listxattr("own")) == ["security.c", "trusted.b", "user.a"], "listxattr")
expect_errno(errno.EEXIST, os.setxattr, "own", "user.a", b"2", os.XATTR_CREATE)
expect_errno(errno.ENODATA, os.setxattr, "own", "user.none", b"2", os.XATTR_REPLACE)
os.setxattr("own", "user.a", b"22", os.XATTR_REPLACE)
check(os.getxattr("own", "user.a") == b"22", "XATTR_REPLACE")
expect_errno(errno.ENODATA, os.getxattr, "own", "user.none")
expect_errno(errno.ENODATA, os.removexattr, "own", "user.none")
os.setxattr("own", "user.gone", b"x")
os.removexattr("own", "user.gone")
check("user.gone" not in os.listxattr("own"), "removexattr")
# An access ACL of the three base entries is a chmod (cp -a sets one on
# every file); one naming users or groups cannot be stored in SquashFS.
ACL_BASE = b"\2\0\0\0\1\0\6\0\377\377\377\377\4\0\4\0\377\377\377\377\40\0\0\0\377\377\377\377"
ACL_NAMED = (b"\2\0\0\0\1\0\6\0\377\377\377\377\2\0\4\0\350\3\0\0\4\0\4\0\377\377\377\377"
             b"\20\0\4\0\377\377\377\377\40\0\0\0\377\377\377\377")
os.chmod("own", 0o4755)
os.setxattr("own", "system.posix_acl_access", ACL_BASE)
check(os.stat("own").st_mode & 0o7777 == 0o4640, "base ACL as chmod: %o" % (os.stat("own").st_mode & 0o7777))
check(os.access("own", os.R_OK), "base ACL: access")
expect_errno(errno.EOPNOTSUPP, os.setxattr, "own", "system.posix_acl_access", ACL_NAMED)
check(os.stat("own").st_mode & 0o7777 == 0o4640, "refused ACL changes nothing")
# A mask without named entries (setfacl -m m::r) is the group bits, as stat
# shows, when it grants no more than the group entry (u::rw,g::rwx,m::r,o::x);
# a wider one (g::r,m::rwx) cannot be told by a mode.
def acl(*ents):
    return b"\2\0\0\0" + b"".join(bytes([t, 0, p, 0]) + b"\377" * 4 for t, p in ents)
os.setxattr("own", "system.posix_acl_access", acl((1, 6), (4, 7), (0x10, 4), (0x20, 1)))
check(os.stat("own").st_mode & 0o7777 == 0o4641, "mask ACL as chmod: %o" % (os.stat("own").st_mode & 0o7777))
expect_errno(errno.EOPNOTSUPP, os.setxattr, "own", "system.posix_acl_access",
             acl((1, 6), (4, 4), (0x10, 7), (0x20, 0)))
check(os.stat("own").st_mode & 0o7777 == 0o4641, "refused mask ACL changes nothing")
os.setxattr("own", "system.posix_acl_access", ACL_BASE)
expect_errno(errno.ENODATA, os.getxattr, "own", "system.posix_acl_access")
expect_errno(errno.ENODATA, os.getxattr, ".", "system.posix_acl_default")
expect_errno(errno.EOPNOTSUPP, os.setxattr, ".", "system.posix_acl_default", ACL_BASE)
os.removexattr(".", "system.posix_acl_default")
check("system.posix_acl_access" not in os.listxattr("own"), "no ACL listed")
os.chmod("own", 0o644)
expect_errno(errno.EOPNOTSUPP, os.setxattr, "own", "system.foo", b"1")
# A bare namespace prefix names no attribute (the VFS's EINVAL); storing one
# used to make every later seal fail.
for ns in ("user.", "trusted.", "security."):
    expect_errno(errno.EINVAL, os.setxattr, "own", ns, b"1")
    expect_errno(errno.EINVAL, os.getxattr, "own", ns)
    expect_errno(errno.EINVAL, os.removexattr, "own", ns)
expect_errno(errno.EOPNOTSUPP, os.setxattr, "own", "other.x", b"1")
buf = ctypes.create_string_buffer(1)
r = libc.getxattr(b"own", b"user.a", buf, ctypes.c_size_t(1))
check(r == -1 and ctypes.get_errno() == errno.ERANGE, "getxattr ERANGE")
r = libc.listxattr(b"own", buf, ctypes.c_size_t(1))
check(r == -1 and ctypes.get_errno() == errno.ERANGE, "listxattr ERANGE")
check("user.sqfs-stage.seal" not in os.listxattr("."), "seal xattr not listed")
expect_errno(errno.EPERM, os.setxattr, ".", "user.sqfs-stage.seal", b"1")
# Elsewhere they are attributes like any other (a copied tree may carry them).
os.setxattr("own", "user.sqfs-stage.seal", b"kept")
check(os.getxattr("own", "user.sqfs-stage.seal") == b"kept", "user.sqfs-stage.seal on a file")
os.removexattr("own", "user.sqfs-stage.seal")

# --- statfs, access ---
sv = os.statvfs(".")
check(sv.f_bsize > 0 and sv.f_namemax == 256, "statfs")
check(os.access("own", os.R_OK | os.W_OK), "access")
# The mounting user acts as root: all but executing what no one may execute.
os.mkdir("acc_d", 0)
for mode, want in ((0o644, False), (0o000, False), (0o100, True), (0o010, True), (0o001, True)):
    write("acc_f", b"#!/bin/sh\n", mode)
    check(os.access("acc_f", os.X_OK) == want, f"access X_OK on a {mode:04o} file: {not want}")
    check(os.access("acc_f", os.R_OK | os.W_OK), f"access R_OK|W_OK on a {mode:04o} file")
    os.unlink("acc_f")
check(os.access("acc_d", os.R_OK | os.W_OK | os.X_OK), "access rwx on a 0000 directory")
os.rmdir("acc_d")

sys.exit(1 if bad else 0)
