#!/bin/bash
# test_bounds.sh SQFS_STAGE SQFS_SEAL SQFS_PACK
#
# SquashFS limits, enforced at the time of the call and never only at the
# seal; everything that is accepted must seal and read back in the kernel:
#   - names: 255 and 256 bytes work for create, mkdir, symlink, mknod, link
#     and rename; 257 fail with ENAMETOOLONG;
#   - ids: uid and gid share one table of at most 65535 distinct values (the
#     superblock count is a u16 and the kernel refuses 0); the 65536th fails
#     chown (or a create by a process of a new uid) with EOVERFLOW and changes
#     nothing; a chown away from an id frees it; a 65535-id image seals and
#     the kernel sees the owners;
#   - sizes: sparse files of 4 GiB - 1, 4 GiB and 4 GiB + 1 with real bytes
#     at the end; beyond 16 TiB, truncate, write and fallocate fail with EFBIG;
#     with block_size=4K beyond 2^32 - 3 blocks, at the call too;
#   - a directory of 100 000 entries, 1 000 nested directories (a path longer
#     than PATH_MAX), a 64 KiB xattr value (larger: E2BIG from the kernel);
#   - entries nested past 4096 levels fail the seal with their path, and the
#     daemon and the staged tree stay.
set -euo pipefail
# shellcheck source=tests/fuse/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "$@"
need_loop
need_cmd unsquashfs setpriv

M=$WORK/m
IMG=$WORK/b.sqfs
# allow_other: a process of another uid creates files below (ids).
chmod 755 "$WORK"
stage_mount "$IMG" "$M" -o mkfs_time=1700000000,comp=lz4,allow_other

# py LABEL SCRIPT ARGS...: a python check; its own "ok:"/"FAIL:" lines
# on stderr, exit status 1 if any failed.
py() {
	local label=$1
	shift
	if python3 - "$@"; then
		ok "$label"
	else
		fail "$label"
	fi
}

# --- names ---------------------------------------------------------------
py "names: 255/256 work, 257 is ENAMETOOLONG at the call" "$M" <<'EOF'
import errno, os, sys
m = sys.argv[1]
bad = 0
def p(*a): return os.path.join(m, "names", *a)
os.mkdir(p())
os.mkdir(p("src"))
for n in (255, 256):
    c = chr(ord("a") + n - 255)
    base = c * n
    with open(p(base), "w") as f:
        f.write("file%d\n" % n)
    os.mkdir(p("d" * (n - 1) + c))
    os.symlink("target%d" % n, p("s" * (n - 1) + c))
    os.mknod(p("f" * (n - 1) + c), 0o644 | 0o010000)   # fifo
    os.link(p(base), p("l" * (n - 1) + c))
    open(p("src", "r%d" % n), "w").close()
    os.rename(p("src", "r%d" % n), p("r" * (n - 1) + c))
long = "z" * 257
open(p("src", "victim"), "w").close()
calls = {
    "create": lambda: open(p(long), "w"),
    "mkdir": lambda: os.mkdir(p(long)),
    "symlink": lambda: os.symlink("t", p(long)),
    "mknod": lambda: os.mknod(p(long), 0o644 | 0o010000),
    "link": lambda: os.link(p("src", "victim"), p(long)),
    "rename": lambda: os.rename(p("src", "victim"), p(long)),
}
for what, fn in calls.items():
    try:
        fn()
        print("FAIL: %s of a 257-byte name worked" % what, file=sys.stderr); bad = 1
    except OSError as e:
        if e.errno != errno.ENAMETOOLONG:
            print("FAIL: %s of a 257-byte name: %s" % (what, e), file=sys.stderr); bad = 1
        else:
            print("ok: %s of a 257-byte name: ENAMETOOLONG" % what, file=sys.stderr)
if os.path.exists(p("src", "victim")) and len(os.listdir(p())) == 1 + 2 * 6:
    print("ok: nothing left behind by the refused calls", file=sys.stderr)
else:
    print("FAIL: entries after refused calls: %s" % sorted(len(x) for x in os.listdir(p())), file=sys.stderr); bad = 1
st = os.statvfs(m)
if st.f_namemax != 256:
    print("FAIL: statfs f_namemax %d" % st.f_namemax, file=sys.stderr); bad = 1
sys.exit(bad)
EOF

# --- ids -----------------------------------------------------------------
# Root's 0:0 is one id.  File i gets uid 2i+1 and gid 2i+2: 32767 files make
# 65534 more, 65535 in all, the most an image can store.
py "ids: 65535 distinct, the 65536th is EOVERFLOW, chown away frees" "$M" <<'EOF'
import errno, os, sys
m = sys.argv[1]
d = os.path.join(m, "ids")
os.mkdir(d)
bad = 0
for i in range(32767):
    f = os.path.join(d, "%05d" % i)
    os.mknod(f, 0o644)
    os.chown(f, 2 * i + 1, 2 * i + 2)
extra = [os.path.join(d, "extra%d" % k) for k in range(3)]
for f in extra:
    os.mknod(f, 0o644)           # 0:0, no new id
def chown_fails(f, uid, gid, label):
    global bad
    try:
        os.chown(f, uid, gid)
        print("FAIL: %s: chown to %d:%d worked" % (label, uid, gid), file=sys.stderr); bad = 1
    except OSError as e:
        if e.errno != errno.EOVERFLOW:
            print("FAIL: %s: %s" % (label, e), file=sys.stderr); bad = 1
        else:
            print("ok: %s: EOVERFLOW" % label, file=sys.stderr)
    st = os.stat(f)
    if (st.st_uid, st.st_gid) != (0, 0):
        print("FAIL: %s: refused chown changed the owner to %d:%d" % (label, st.st_uid, st.st_gid), file=sys.stderr); bad = 1
chown_fails(extra[0], 100000, 0, "65536th id (uid)")
chown_fails(extra[0], 0, 100000, "65536th id (gid)")
chown_fails(extra[0], 65535, 65535, "65536th id (uid=gid)")
# Swapping ids among used ones adds none.
os.chown(os.path.join(d, "00005"), 1, 65534)
os.chown(os.path.join(d, "00005"), 11, 12)
# File 0 gives up 1 and 2: two ids free again.
os.chown(os.path.join(d, "00000"), 0, 0)
os.chown(extra[0], 100000, 0)
os.chown(extra[1], 0, 100001)
chown_fails(extra[2], 100002, 0, "65536th id after two were freed and taken")
# A file giving up an id it alone holds for a new one: still 65535.
os.chown(os.path.join(d, "00001"), 3, 100003)
print("ok: chown from a sole id to a new id at the limit", file=sys.stderr)
# Creating is using ids too: a process with a new uid cannot create.
import subprocess
o = os.path.join(d, "open")
os.mkdir(o)
os.chmod(o, 0o777)
def create_as(uid, name):
    return subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=0", "--clear-groups",
                           "touch", os.path.join(o, name)], capture_output=True, text=True)
r = create_as(100005, "new-uid")
if r.returncode == 0 or "Value too large" not in r.stderr:
    print("FAIL: create by a new uid at the limit: %d %s" % (r.returncode, r.stderr), file=sys.stderr); bad = 1
else:
    print("ok: create by a new uid at the limit: %s" % r.stderr.strip(), file=sys.stderr)
if os.path.exists(os.path.join(o, "new-uid")):
    print("FAIL: refused create left an entry", file=sys.stderr); bad = 1
r = create_as(3, "old-uid")
if r.returncode != 0 or os.stat(os.path.join(o, "old-uid")).st_uid != 3:
    print("FAIL: create by a uid in use: %s" % r.stderr, file=sys.stderr); bad = 1
sys.exit(bad)
EOF

# --- sizes ---------------------------------------------------------------
G4=$((1 << 32))
TIB16=$((1 << 44))
py "sizes: 4 GiB -1/0/+1 sparse files with tails; EFBIG beyond 16 TiB" "$M" "$G4" "$TIB16" <<'EOF'
import errno, os, sys
m, g4, t16 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
d = os.path.join(m, "sizes")
os.mkdir(d)
bad = 0
for name, size in (("4g-1", g4 - 1), ("4g", g4), ("4g+1", g4 + 1)):
    tail = ("<%s>" % name).encode()
    with open(os.path.join(d, name), "wb") as f:
        f.truncate(size - len(tail))
        f.seek(size - len(tail))
        f.write(tail)
    with open(os.path.join(d, name), "rb") as f:
        f.seek(size - 64)
        got = f.read()
    if os.path.getsize(os.path.join(d, name)) != size or got != bytes(64 - len(tail)) + tail:
        print("FAIL: %s reads back %r" % (name, got), file=sys.stderr); bad = 1
f = os.path.join(d, "huge")
with open(f, "wb") as h:
    h.write(b"start")
def efbig(label, fn):
    global bad
    try:
        fn()
        print("FAIL: %s worked" % label, file=sys.stderr); bad = 1
    except OSError as e:
        if e.errno != errno.EFBIG:
            print("FAIL: %s: %s" % (label, e), file=sys.stderr); bad = 1
        else:
            print("ok: %s: EFBIG" % label, file=sys.stderr)
efbig("truncate to 16 TiB + 1", lambda: os.truncate(f, t16 + 1))
efbig("truncate to 1 PiB", lambda: os.truncate(f, 1 << 50))
def pwrite_at(off):
    fd = os.open(f, os.O_WRONLY)
    try:
        os.pwrite(fd, b"x", off)
    finally:
        os.close(fd)
efbig("write at 16 TiB", lambda: pwrite_at(t16))
def falloc():
    fd = os.open(f, os.O_WRONLY)
    try:
        os.posix_fallocate(fd, t16, 4096)
    finally:
        os.close(fd)
efbig("fallocate past 16 TiB", falloc)
# The spool file system may stop earlier (ext4: 16 TiB - 4 KiB); below the
# cap its own EFBIG is as good.  Either way the file is as it was.
if os.path.getsize(f) != 5:
    print("FAIL: huge has size %d after the refused calls" % os.path.getsize(f), file=sys.stderr); bad = 1
sys.exit(bad)
EOF

# --- a large directory, a deep one, a large xattr -------------------------
py "100 000 entries, depth 1 000, 64 KiB xattr" "$M" <<'EOF'
import errno, os, sys
m = sys.argv[1]
bad = 0
big = os.path.join(m, "big")
os.mkdir(big)
fd = os.open(big, os.O_RDONLY | os.O_DIRECTORY)
for i in range(100000):
    os.mknod("e%06d" % i, 0o644, dir_fd=fd)
os.close(fd)
# 1000 levels of 6-byte names: 7000 bytes of path, more than PATH_MAX.
fd = os.open(m, os.O_RDONLY | os.O_DIRECTORY)
os.mkdir("deep", dir_fd=fd)
for i in range(1000):
    nfd = os.open("deep" if i == 0 else "level_", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = nfd
    os.mkdir("level_", dir_fd=fd)
nfd = os.open("level_", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
os.close(fd)
wfd = os.open("bottom", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=nfd)
os.write(wfd, b"at the bottom\n")
os.close(wfd)
os.close(nfd)
x = os.path.join(m, "xattr")
open(x, "w").close()
val = bytes((i * 7) & 0xff for i in range(65536))
os.setxattr(x, "user.x", val)
os.setxattr(x, "user.small", b"s")
try:
    os.setxattr(x, "user.y", val + b"!")
    print("FAIL: a 65537-byte xattr value was set", file=sys.stderr); bad = 1
except OSError as e:
    if e.errno != errno.E2BIG:
        print("FAIL: 65537-byte xattr: %s" % e, file=sys.stderr); bad = 1
    else:
        print("ok: 65537-byte xattr value: E2BIG", file=sys.stderr)
if os.getxattr(x, "user.x") != val:
    print("FAIL: 64 KiB xattr reads back wrong", file=sys.stderr); bad = 1
sys.exit(bad)
EOF

# --- nested past what the writer walks: the seal names it, nothing is lost -------
# Names of 24 bytes make the path 100 KB, more than the 64 KiB of the reply
# (an xattr value): the message keeps the path's start and its end.
py "4097 levels" "$M" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
os.mkdir("toodeep", dir_fd=fd)
for i in range(4097):
    nfd = os.open("toodeep" if i == 0 else "a" * 24, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = nfd
    os.mkdir("a" * 24, dir_fd=fd)
os.close(fd)
EOF
rc=0
out=$("$SEAL" --keep "$M" 2>&1) || rc=$?
if ((rc == 1)) && grep -q "seal failed: /toodeep/aaaa.* \[\.\.\.\] .*/a\{24\}: nested more than 4096 levels deep" <<<"$out"; then
	ok "seal of a tree nested 4098 levels (a 100 KB path): exit 1, ${#out} bytes, ${out: -140}"
else
	fail "seal of a tree nested 4098 levels: exit $rc: ${out:0:300}"
fi
mountpoint -q "$M" && ok "still mounted after the refused seal" || fail "the refused seal lost the mount"
# The daemon goes on; the tree is removed (rm walks it by fds) and the seal works.
rm -rf -- "$M/toodeep" && ok "the deep tree removed" || fail "removing the deep tree"

if ! out=$("$SEAL" --json "$M" 2>&1); then
	# Still mounted: the cleanup stops the daemon.
	fail "seal: ${out:0:300}"
	finish
fi
wait_daemon 0
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if d["ids"] == 65535 else 1)' "$out" &&
	ok "seal summary: 65535 ids" || fail "seal summary: $out"
unsquashfs -s "$IMG" >"$WORK/super" 2>&1 || fail "unsquashfs -s: $(cat "$WORK/super")"
grep -q "Number of ids 65535" "$WORK/super" && ok "superblock: 65535 ids" ||
	fail "superblock ids: $(grep -i ids "$WORK/super")"

# --- the kernel's view -------------------------------------------------------
K=$WORK/k
loop_mount "$IMG" "$K" || finish
py "kernel: names" "$K" <<'EOF'
import os, stat, sys
k = os.path.join(sys.argv[1], "names")
bad = 0
for n in (255, 256):
    c = chr(ord("a") + n - 255)
    def p(x): return os.path.join(k, x * (n - 1) + c)
    checks = [
        open(os.path.join(k, c * n)).read() == "file%d\n" % n,
        stat.S_ISDIR(os.lstat(p("d")).st_mode),
        os.readlink(p("s")) == "target%d" % n,
        stat.S_ISFIFO(os.lstat(p("f")).st_mode),
        os.lstat(p("l")).st_ino == os.lstat(os.path.join(k, c * n)).st_ino,
        os.lstat(p("l")).st_nlink == 2,
        stat.S_ISREG(os.lstat(p("r")).st_mode),
    ]
    if not all(checks):
        print("FAIL: %d-byte names in the image: %s" % (n, checks), file=sys.stderr); bad = 1
names = sorted(len(x) for x in os.listdir(k))
if names != [3] + [255] * 6 + [256] * 6:
    print("FAIL: name lengths in the image: %s" % names, file=sys.stderr); bad = 1
sys.exit(bad)
EOF
py "kernel: ids" "$K" <<'EOF'
import os, sys
d = os.path.join(sys.argv[1], "ids")
want = {i: (2 * i + 1, 2 * i + 2) for i in range(32767)}
want[0] = (0, 0)
want[1] = (3, 100003)
want[5] = (11, 12)
bad = 0
for i, ids in want.items():
    st = os.lstat(os.path.join(d, "%05d" % i))
    if (st.st_uid, st.st_gid) != ids:
        print("FAIL: ids/%05d is %d:%d, want %d:%d" % (i, st.st_uid, st.st_gid, *ids), file=sys.stderr); bad = 1
        break
for name, ids in (("extra0", (100000, 0)), ("extra1", (0, 100001)), ("extra2", (0, 0))):
    st = os.lstat(os.path.join(d, name))
    if (st.st_uid, st.st_gid) != ids:
        print("FAIL: ids/%s is %d:%d" % (name, st.st_uid, st.st_gid), file=sys.stderr); bad = 1
ids = set()
for e in os.scandir(d):
    st = e.stat(follow_symlinks=False)
    ids.update((st.st_uid, st.st_gid))
root = os.lstat(sys.argv[1])
ids.update((root.st_uid, root.st_gid))
if len(ids) != 65535:
    print("FAIL: %d distinct ids in the image" % len(ids), file=sys.stderr); bad = 1
sys.exit(bad)
EOF
py "kernel: sizes and tails" "$K" "$G4" <<'EOF'
import os, sys
d = os.path.join(sys.argv[1], "sizes")
g4 = int(sys.argv[2])
bad = 0
for name, size in (("4g-1", g4 - 1), ("4g", g4), ("4g+1", g4 + 1)):
    p = os.path.join(d, name)
    tail = ("<%s>" % name).encode()
    with open(p, "rb") as f:
        f.seek(size - 1 - (1 << 20))
        got = f.read()
    if os.path.getsize(p) != size or got != bytes(len(got) - len(tail)) + tail or len(got) != (1 << 20) + 1:
        print("FAIL: %s: size %d, tail %r" % (name, os.path.getsize(p), got[-16:]), file=sys.stderr); bad = 1
if open(os.path.join(d, "huge"), "rb").read() != b"start":
    print("FAIL: huge", file=sys.stderr); bad = 1
sys.exit(bad)
EOF
py "kernel: 100 000 entries, depth 1 000, 64 KiB xattr" "$K" <<'EOF'
import os, sys
k = sys.argv[1]
bad = 0
names = os.listdir(os.path.join(k, "big"))
if len(names) != 100000 or sorted(names) != ["e%06d" % i for i in range(100000)]:
    print("FAIL: big has %d entries" % len(names), file=sys.stderr); bad = 1
for i in (0, 1, 49999, 99999):
    os.lstat(os.path.join(k, "big", "e%06d" % i))    # lookups through the index
fd = os.open(os.path.join(k, "deep"), os.O_RDONLY | os.O_DIRECTORY)
depth = 0
while True:
    ents = os.listdir(fd)
    if ents != ["level_"]:
        break
    nfd = os.open("level_", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = nfd
    depth += 1
b = os.open("bottom", os.O_RDONLY, dir_fd=fd) if ents == ["bottom"] else -1
if depth != 1000 or b < 0 or os.read(b, 100) != b"at the bottom\n":
    print("FAIL: deep: depth %d, last entries %s" % (depth, ents), file=sys.stderr); bad = 1
os.close(fd)
x = os.path.join(k, "xattr")
val = bytes((i * 7) & 0xff for i in range(65536))
if os.getxattr(x, "user.x") != val or os.getxattr(x, "user.small") != b"s":
    print("FAIL: xattrs in the image", file=sys.stderr); bad = 1
sys.exit(bad)
EOF
loop_umount "$K"

# unsquashfs as a second reader: the whole listing, the deepest path included.
if unsquashfs -lln "$IMG" >"$WORK/list" 2>"$WORK/list.err"; then
	n=$(wc -l <"$WORK/list")
	grep -q "/big/e099999$" "$WORK/list" && grep -Eq "(/level_){1000}/bottom$" "$WORK/list" &&
		grep -q "/ids/extra0$" "$WORK/list" && grep -q "^-rw-r--r-- 100000/0 " <(grep "/ids/extra0$" "$WORK/list") &&
		ok "unsquashfs -lln lists $n entries incl. the deepest and the re-owned" ||
		fail "unsquashfs listing lacks entries ($n lines)"
else
	fail "unsquashfs -lln: $(tail -n3 "$WORK/list.err")"
fi

# --- block_size=4K: the per-file block count is the writer's -------------
# With 4 KiB blocks SquashFS's 32-bit block lists bind before 16 TiB: the
# largest size the seal takes, (2^32 - 3) blocks, is accepted at the call,
# one byte more fails with EFBIG there, not at the seal.
M4=$WORK/m4
stage_mount "$WORK/b4.sqfs" "$M4" -o block_size=4K,comp=lz4
py "block_size=4K: (2^32 - 3) blocks accepted, one byte more EFBIG" "$M4" <<'EOF'
import errno, os, sys
f = os.path.join(sys.argv[1], "big")
top = (2**32 - 3) * 4096
bad = 0
with open(f, "wb") as o:
    o.write(b"tail")
try:
    os.truncate(f, top + 1)
    print("FAIL: truncate to %d accepted" % (top + 1), file=sys.stderr); bad = 1
except OSError as e:
    if e.errno != errno.EFBIG:
        print("FAIL: truncate past the limit: %s" % e, file=sys.stderr); bad = 1
try:
    os.truncate(f, top)
except OSError as e:
    print("FAIL: truncate to %d: %s" % (top, e), file=sys.stderr); bad = 1
os.truncate(f, 4)
sys.exit(bad)
EOF
# 64 GiB of holes at 4 KiB blocks: 16 Mi block words in the inode, which
# the seal neither holds (a run of holes is two words) nor buffers whole
# for the inode: the daemon's memory does not grow with the holes (it grew
# 16 bytes a block before, 1 GiB for 256 GiB).
truncate -s 64G "$M4/holes" && printf 'end' | dd of="$M4/holes" bs=1 seek=$(((64 << 30) - 3)) conv=notrunc status=none ||
	fail "block_size=4K: making a 64 GiB sparse file"
hwm0=$(awk '/^VmHWM:/ {print $2}' "/proc/$DPID/status")
"$SEAL" --keep --quiet "$M4" || fail "block_size=4K: seal of 64 GiB of holes"
hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$DPID/status")
if [[ ${SQFS_TEST_QUICK-} == 1 ]]; then
	log "note: SQFS_TEST_QUICK=1 (a sanitizer's own memory): the daemon's peak ${hwm0} -> ${hwm} KiB is judged in the normal mode"
elif ((hwm - hwm0 > 32 * 1024)); then
	fail "block_size=4K: the seal of 64 GiB of holes took the daemon from $hwm0 to $hwm KiB"
else
	ok "block_size=4K: the seal of 64 GiB of holes: daemon peak $hwm0 -> $hwm KiB"
fi
"$SEAL" --quiet "$M4" || fail "block_size=4K: seal"
wait_daemon 0
if unsquashfs -lls "$WORK/b4.sqfs" 2>&1 | grep >/dev/null " $((64 << 30)) .* squashfs-root/holes$" &&
	loop_mount "$WORK/b4.sqfs" "$WORK/k4"; then
	[[ $(tail -c 3 "$WORK/k4/holes") == end ]] && ok "block_size=4K: 64 GiB of holes and 'end' in the image" ||
		fail "block_size=4K: the end of 'holes' in the image: $(tail -c 3 "$WORK/k4/holes" | od -c | head -n 1)"
	loop_umount "$WORK/k4"
else
	fail "block_size=4K: no 64 GiB 'holes' in the image: $(unsquashfs -lls "$WORK/b4.sqfs" 2>&1 | tail -n 3)"
fi

finish
