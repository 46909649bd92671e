#!/bin/bash
# mktree.sh [--tar] DIR
#
# Build a deterministic edge-case source tree in DIR (created; must not exist
# or be empty).  Everything -- names, contents, modes, owners, mtimes, xattrs,
# sparseness -- is a pure function of this script, so two runs give trees that
# compare equal and images that are byte-identical.
#
# Needs root (mknod, chown), python3, setfattr, and a filesystem that takes
# 60 KiB xattr values and trusted./security. xattrs (tmpfs does; ext4 without
# ea_inode does not).  The sparse files need a filesystem with holes; the
# apparent size is about 5.1 GiB, the real size a few MiB.
#
# --tar: only what GNU tar can archive: no unix socket, and no hard-linked
#        FIFO (GNU tar stores each FIFO name as a FIFO of its own).
#
# Exit status: 0 done, 1 failure (e.g. the filesystem refused an xattr).
set -euo pipefail

tar_safe=0
if [[ ${1-} == --tar ]]; then
	tar_safe=1
	shift
fi
if [[ $# -ne 1 ]]; then
	echo "usage: $0 [--tar] DIR" >&2
	exit 1
fi
D=$1
mkdir -p -- "$D"
if [[ -n $(ls -A -- "$D") ]]; then
	echo "mktree: $D is not empty" >&2
	exit 1
fi
D=$(cd -- "$D" && pwd)
umask 022
export LC_ALL=C
PY3=/usr/bin/python3
[[ -x $PY3 ]] || PY3=python3

BS=131072

# --- contents, names, the big directory: one python3 pass --------------------
"$PY3" - "$D" "$BS" <<'PY'
import os, random, sys

D, BS = sys.argv[1].encode(), int(sys.argv[2])

def data(seed, n):
    """n deterministic incompressible bytes (Mersenne Twister, fixed seed)."""
    return random.Random(seed).randbytes(n)

def text(n, seed=0):
    words = [b"squashfs", b"inode", b"fragment", b"block", b"xattr", b"tail",
             b"directory", b"index", b"table", b"lorem", b"ipsum", b"zstd"]
    r = random.Random(seed)
    out = bytearray()
    i = 0
    while len(out) < n:
        out += b"line %06d: " % i + b" ".join(r.choice(words) for _ in range(9)) + b"\n"
        i += 1
    return bytes(out[:n])

def p(*parts):
    return os.path.join(D, *[x.encode() if isinstance(x, str) else x for x in parts])

def write(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(content)

def pwrite_at(path, chunks, size):
    """Sparse file: truncate to size, then write (offset, bytes) chunks."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size)
        for off, b in chunks:
            os.pwrite(fd, b, off)
    finally:
        os.close(fd)

# plain files around the block size
os.makedirs(p("empty_dir"))
write(p("files", "empty"), b"")
write(p("files", "one"), b"x")
write(p("files", "block"), data(1, BS))
write(p("files", "block_minus1"), data(2, BS - 1))
write(p("files", "block_plus1"), data(3, BS + 1))
write(p("files", "two_blocks"), data(4, 2 * BS))
write(p("files", "multi"), data(5, 3 * BS) + text(3 * BS, 5) + data(6, 4321))
write(p("files", "text"), text(300000, 7))
write(p("files", "random"), data(8, 1048576 + 777))
write(p("files", "small_text"), text(3000, 9))
write(p("files", "frag_max"), data(10, BS - 17))

# duplicates (fragment-sized and block-sized) in different directories
small, big = data(100, 1500), data(101, 3 * BS + 10000)
for d in ("a", "b", "c"):
    write(p("dup", d, "small"), small)
write(p("dup", "a", "big"), big)
write(p("dup", "b", "big"), big)
write(p("dup", "c", "big_copy"), big)
write(p("dup", "c", "block_copy"), data(1, BS))       # same as files/block
write(p("dup", "c", "empty_copy"), b"")

# identical tails, different blocks
tail = data(200, 7000)
for i in range(1, 4):
    write(p("tails", "t%d" % i), data(200 + i, 2 * BS) + tail)
write(p("tails", "t4_tail_only"), tail)                # a file equal to the tail
write(p("tails", "t5_prefix"), data(201, 2 * BS) + tail[:3500])

# sparse files
G = 1 << 30
pwrite_at(p("sparse", "big_over_4g"), [
    (0, data(300, 1000)),
    (3 * BS + 17, data(301, 200000)),          # crosses block boundaries
    (2 * G + 7, data(302, 5000)),
    (4 * G - 3000, data(303, 8000)),           # crosses the 4 GiB boundary
    (4 * G + 65537, data(304, 70000)),
    (4 * G + 10 * 1048576 + 12345 - 10, data(305, 10)),   # last 10 bytes
], 4 * G + 10 * 1048576 + 12345)
pwrite_at(p("sparse", "hole_1g"), [], G)
pwrite_at(p("sparse", "hole_aligned"), [
    (0, data(310, BS)), (4 * BS, data(311, BS + 1000))], 5 * BS + 1000)
pwrite_at(p("sparse", "hole_unaligned"), [
    (0, data(312, 200000)), (700000, data(313, 100123))], 800123)
pwrite_at(p("sparse", "ends_in_hole"), [(0, data(314, 300000))], 1048576)
pwrite_at(p("sparse", "starts_with_hole"), [(3 * BS + 5, data(315, 9000))],
          3 * BS + 5 + 9000)

# names
names = [
    b"x", b"n" * 255, b"with space", b" leading space", b"trailing space ",
    "ünïcödé".encode(), "日本語ファイル".encode(), "emoji_\U0001F600".encode(),
    b"\x80", b"\xff\xfe\xfd", b"ctl\x01\x1f\x7f", b"a\xe9", b"ab", b"aa", b"b",
    b"B", b"-leading-dash", b"--double-dash", b"-", b"tab\there",
    b"back\\slash", b"quote\"'", b"star*?[", b"colon:equals=", b"new\nline",
    b"...", b".hidden", b"..hidden", b"%s%n", b"$(echo no)",
]
for i, nm in enumerate(names):
    write(p("names", nm), b"name %d\n" % i)
os.makedirs(p("names", b"D" * 255))
write(p("names", b"D" * 255, b"F" * 255), b"long path\n")
os.makedirs(p("names", b"dir\xe9"))
write(p("names", b"dir\xe9", b"inside"), b"inside\n")

# a directory with 3000 entries: several dir headers and an index
bd = p("bigdir")
os.makedirs(bd)
for i in range(3000):
    nm = b"e%05d" % i + (b"_" + b"x" * (i % 200) if i % 7 == 0 else b"")
    path = os.path.join(bd, nm)
    if i % 10 == 0:
        os.mkdir(path)
    elif i % 13 == 0:
        os.symlink(b"e00001", path)
    elif i % 50 == 1:
        write(path, data(1000 + i, i))
    else:
        write(path, b"")
    if i % 17 == 0:
        os.lchown(path, 1000 + i % 3, 100)
    if i % 3 == 1 and not os.path.islink(path):
        os.chmod(path, 0o600 if i % 10 else 0o700)

# nested depth 60
deep = p("deep")
for i in range(1, 61):
    deep = os.path.join(deep, b"d%02d" % i)
os.makedirs(deep)
write(os.path.join(deep, b"leaf"), b"deepest\n")
PY

# --- non-sparse zero blocks, written as data with dd --------------------------
"$PY3" -c 'import random,sys; sys.stdout.buffer.write(random.Random(400).randbytes(131072))' \
	>"$D/files/zero_blocks"
dd if=/dev/zero bs=$BS count=3 status=none >>"$D/files/zero_blocks"
"$PY3" -c 'import random,sys; sys.stdout.buffer.write(random.Random(401).randbytes(131072+5000))' \
	>>"$D/files/zero_blocks"
dd if=/dev/zero of="$D/files/all_zero" bs=1024 count=300 status=none
dd if=/dev/zero of="$D/files/zero_block_exact" bs=$BS count=1 status=none

# --- hard links (3 names for one inode, in different directories) ------------
mkdir -p "$D/links/a" "$D/links/b" "$D/xattr"
printf 'hard linked content\n' >"$D/links/a/orig"
ln "$D/links/a/orig" "$D/links/b/second"
ln "$D/links/a/orig" "$D/xattr/third_name"
setfattr -n user.hardlink -v "shared by three names" "$D/links/a/orig"
: >"$D/links/empty1"
ln "$D/links/empty1" "$D/links/b/empty2"
"$PY3" -c 'import random,sys; sys.stdout.buffer.write(random.Random(500).randbytes(300000))' \
	>"$D/links/big1"
ln "$D/links/big1" "$D/links/a/big2"
ln -s "target-of-linked-symlink" "$D/links/sym1"
ln -P "$D/links/sym1" "$D/links/b/sym2"
mkfifo -m 0640 "$D/links/fifo1"
if ((!tar_safe)); then
	ln "$D/links/fifo1" "$D/links/a/fifo2"
fi

# --- symlinks -----------------------------------------------------------------
mkdir -p "$D/sym"
long255=$(printf 'L%.0s' {1..255})
long4095=$(printf 'p/%.0s' {1..2047})x
ln -s a "$D/sym/short"
ln -s "$long255" "$D/sym/target_255"
ln -s "$long4095" "$D/sym/target_4095"
ln -s does/not/exist "$D/sym/dangling"
ln -s /etc/passwd "$D/sym/absolute"
ln -s ../files "$D/sym/to_dir"
ln -s . "$D/sym/self_dot"
ln -s "$(printf 'utf8-\xc3\xa9-bin-\xe9')" "$D/sym/odd_bytes"
setfattr -h -n trusted.symlink -v "on a symlink" "$D/sym/short"

# --- devices, fifo, socket ---------------------------------------------------
mkdir -p "$D/dev"
mknod -m 0640 "$D/dev/chr_259_70000" c 259 70000
mknod -m 0600 "$D/dev/chr_0_0" c 0 0
mknod -m 0660 "$D/dev/blk_8_1" b 8 1
mknod -m 0644 "$D/dev/blk_259_70000" b 259 70000
mknod -m 0644 "$D/dev/chr_4095_1048575" c 4095 1048575
mkfifo -m 0622 "$D/dev/fifo"
setfattr -n trusted.dev -v "on a device" "$D/dev/chr_259_70000"
setfattr -n trusted.fifo -v "on a fifo" "$D/dev/fifo"
if ((!tar_safe)); then
	"$PY3" -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$D/dev/socket"
	chmod 0755 "$D/dev/socket"
fi

# --- modes --------------------------------------------------------------------
mkdir -p "$D/modes/sticky_dir" "$D/modes/d000" "$D/modes/d2775" "$D/modes/d0500"
printf 'inside 000 dir\n' >"$D/modes/d000/file"
printf 'inside 0500 dir\n' >"$D/modes/d0500/file"
for m in 4755 2755 6755 7777 1644 0000 0644 0600 0111 0751; do
	printf 'mode %s\n' "$m" >"$D/modes/f$m"
	chmod "$m" "$D/modes/f$m"
done
chmod 1777 "$D/modes/sticky_dir"
chmod 0000 "$D/modes/d000"
chmod 2775 "$D/modes/d2775"
chmod 0500 "$D/modes/d0500"

# --- owners (chown before chmod of set-id files: chown clears those bits) -----
mkdir -p "$D/owners/dir_1000"
for o in 0:0 1000:1000 65534:65534 4294967294:4294967294 1000:65534 0:4294967294; do
	f="$D/owners/u${o%%:*}_g${o##*:}"
	printf 'owner %s\n' "$o" >"$f"
	chown "$o" "$f"
done
chown 1000:1000 "$D/owners/dir_1000"
ln -s somewhere "$D/owners/symlink_65534"
chown -h 65534:65534 "$D/owners/symlink_65534"
mknod "$D/owners/dev_big" c 1 3
chown 4294967294:65534 "$D/owners/dev_big"
printf 'setuid owned by 1000\n' >"$D/owners/suid_1000"
chown 1000:1000 "$D/owners/suid_1000"
chmod 6750 "$D/owners/suid_1000"

# --- xattrs ---------------------------------------------------------------------
"$PY3" - "$D" <<'PY'
import os, random, sys
D = sys.argv[1]
def f(name, content=b""):
    path = os.path.join(D, "xattr", name)
    if not os.path.exists(path):
        with open(path, "wb") as fh:
            fh.write(content)
    return path
x = os.setxattr
m = f("many", b"many keys\n")
for i in range(200):
    x(m, "user.key%03d" % i, b"v" * (i % 37) + b"%d" % i)
b = f("big", b"big value\n")
x(b, "user.big", random.Random(600).randbytes(60 * 1024))
x(b, "trusted.also_big", b"t" * 5000)
x(f("empty_value"), "user.empty", b"")
mx = f("mixed", b"mixed\n")
x(mx, "user.a", b"alpha")
x(mx, "trusted.b", b"\x00binary\xff\x00")
x(mx, "security.c", b"gamma")
# a valid VFS_CAP_REVISION_2 security.capability (cap_net_bind_service, permitted)
x(f("capability", b"cap\n"), "security.capability",
  bytes.fromhex("0100000200040000000000000000000000000000"))
x(f("long_name"), "user." + "k" * 200, b"long key name")
shared = {"user.shared": b"one identical set", "trusted.shared": b"\x01\x02\x03",
          "security.shared": b"s"}
for name in ("shared1", "shared2", "shared3", "shared4"):
    p = f(name, b"content of %s\n" % name.encode())
    for k, v in shared.items():
        x(p, k, v)
os.mkdir(os.path.join(D, "xattr", "shared_dir"))
for k, v in shared.items():
    x(os.path.join(D, "xattr", "shared_dir"), k, v)
# the same set on a file in another directory
for k, v in shared.items():
    x(os.path.join(D, "files", "small_text"), k, v)
x(D, "user.root", b"xattr on the root directory")
# one value in several sets, twice in one set: written once, then referenced
# out of line (a 9-byte value too; 8 bytes stay inline)
sv = random.Random(601).randbytes(12 * 1024)
for i, k in enumerate(("user.share_a", "trusted.share_b", "security.share_c")):
    x(f("shared_value%d" % i, b"%d\n" % i), k, sv)
p = f("shared_value_twice", b"twice\n")
for k, v in (("user.one", sv), ("user.two", sv), ("user.nine", b"123456789"),
             ("user.eight", b"12345678")):
    x(p, k, v)
p = f("shared_small", b"small\n")
x(p, "user.nine", b"123456789")
x(p, "user.eight", b"12345678")
x(p, "user.near", sv[:-1] + bytes([sv[-1] ^ 1]))
PY

# --- mtimes: deterministic per path, then the special ones ---------------------
"$PY3" - "$D" <<'PY'
import os, sys, zlib
D = sys.argv[1].encode()
for root, dirs, files in os.walk(D):
    dirs.sort()
    for n in sorted(dirs + files):
        p = os.path.join(root, n)
        t = 1500000000 + zlib.crc32(os.path.relpath(p, D)) % 100000000
        os.utime(p, (t, t), follow_symlinks=False)
PY
mkdir -p "$D/times/dir_t0"
for t in 0 1 2147483652 4294967295; do
	printf 'time %s\n' "$t" >"$D/times/t$t"
	touch -h -d "@$t" "$D/times/t$t"
done
ln -s t1 "$D/times/symlink_t1"
touch -h -d @1 "$D/times/symlink_t1"
touch -d @0 "$D/times/dir_t0"
touch -d @1234567890 "$D/times"
touch -d @1700000000 "$D"
