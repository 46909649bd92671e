#!/bin/bash
# test_passthrough.sh SQFS_STAGE SQFS_SEAL SQFS_PACK
#
# FUSE passthrough (Linux 6.9 and later, as root): the kernel writes open
# files' spool files without asking the daemon, so the daemon must learn
# sizes and times from the spool files and drop stale background work.
#   - the status xattr reports passthrough on and opens answered in it,
#     and off with -o no_passthrough;
#   - size and mtime while a file is open for writing, after utimens then a
#     write, after ftruncate; O_APPEND; a second reader sees a writer's
#     data; read-write, O_DIRECT and mmap opens beside a passthrough writer;
#     unaligned O_DIRECT I/O of a first open (through the daemon);
#     a lookup while a passthrough writer grows the file (failed mkdir,
#     link, O_EXCL create; linkat of an O_TMPFILE) answers the grown size;
#   - files compressed in the background and then rewritten through
#     passthrough (overwrite, append, O_TRUNC) seal to the same bytes as
#     sqfs-pack of a copy edited alike, and as the same edits with
#     -o no_passthrough; the kernel reads the image back equal.
set -euo pipefail
# shellcheck source=tests/fuse/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "$@"
need_loop
need_cmd getfattr sha256sum diff
MT=1700000000
COMP=zstd:3
BS=64K

kver=$(uname -r)
kmaj=${kver%%.*} kmin=${kver#*.}
kmin=${kmin%%[!0-9]*}
if ((kmaj < 6 || (kmaj == 6 && kmin < 9))); then
	skip_or_fail "FUSE passthrough needs Linux 6.9 (running $kver)"
fi

status() { getfattr --only-values -n user.sqfs-stage.status "$1" 2>/dev/null; }
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

wait_idle() {
	local i st
	for ((i = 0; i < 1200; i++)); do
		st=$(status "$1")
		if [[ $(field "$st" queued_files) == 0 && $(field "$st" busy) == 0 ]]; then
			return 0
		fi
		sleep 0.1
	done
	fail "background compression did not finish in 120 s: $st"
}

# --- 1: what a program sees while the kernel writes for us ---------------
M=$WORK/m1
stage_mount "$WORK/a.sqfs" "$M" -o comp=$COMP,block_size=$BS,mkfs_time=$MT
if python3 - "$M" <<'EOF'; then ok "open-file semantics under passthrough"; else fail "open-file semantics under passthrough"; fi
import mmap, os, sys, time
root = sys.argv[1]
bad = 0
def check(cond, what):
    global bad
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        bad += 1

p = os.path.join(root, "f")
fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
t0 = time.time()
os.write(fd, b"a" * 300000)
check(os.fstat(fd).st_size == 300000, "fstat size after a write")
check(os.stat(p).st_size == 300000, "stat size after a write")
os.utime(p, (1e9, 1e9))
check(os.stat(p).st_mtime == 1e9, "utime while open")
os.write(fd, b"b" * 1000)
st = os.stat(p)
check(st.st_size == 301000, "size after utime and a write: %d" % st.st_size)
check(st.st_mtime >= t0 - 1, "a write after utime moves mtime (%f)" % st.st_mtime)
os.ftruncate(fd, 5000)
check(os.stat(p).st_size == 5000, "ftruncate while open")
os.utime(p, (2e9, 2e9))
os.close(fd)
st = os.stat(p)
check(st.st_mtime == 2e9 and st.st_size == 5000, "utime before close survives the close")

# a reader sees what a writer wrote, before and after the writer closes
w = os.open(p, os.O_WRONLY)
r = os.open(p, os.O_RDONLY)
os.pwrite(w, b"XYZ", 100)
check(os.pread(r, 5, 99) == b"aXYZa", "reader sees a concurrent writer")
# read-write and O_DIRECT opens beside a passthrough writer
rw = os.open(p, os.O_RDWR)
m = mmap.mmap(rw, 4096)
m[0:4] = b"MMAP"
m.flush()
m.close()
os.close(rw)
check(os.pread(r, 4, 0) == b"MMAP", "shared mapping beside a passthrough writer")
try:
    d = os.open(p, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, 4096)
    n = os.preadv(d, [buf], 0)
    check(n == 4096 and buf[0:4] == b"MMAP", "O_DIRECT read beside a writer")
    os.close(d)
except OSError as e:
    check(False, "O_DIRECT open: %s" % e)
os.close(w)
os.close(r)

# O_APPEND from two handles
a1 = os.open(p, os.O_WRONLY | os.O_APPEND)
a2 = os.open(p, os.O_WRONLY | os.O_APPEND)
os.write(a1, b"1" * 10)
os.write(a2, b"2" * 10)
os.close(a1)
os.close(a2)
with open(p, "rb") as f:
    data = f.read()
check(len(data) == 5020 and data.endswith(b"1" * 10 + b"2" * 10), "O_APPEND from two handles")

# An O_APPEND open goes through the daemon: the kernel's backing file would
# keep appending after an fcntl(F_SETFL) cleared the flag.
import fcntl
q = os.path.join(root, "unappend")
with open(q, "wb") as f:
    f.write(b"0123456789")
fd = os.open(q, os.O_WRONLY | os.O_APPEND)
fcntl.fcntl(fd, fcntl.F_SETFL, 0)
os.pwrite(fd, b"W", 0)
os.lseek(fd, 5, os.SEEK_SET)
os.write(fd, b"X")
os.close(fd)
got = open(q, "rb").read()
check(got == b"W1234X6789", "O_APPEND cleared by F_SETFL, then pwrite at 0 and write at 5: %r" % got)
os.unlink(q)

# O_TRUNC through an open of a passthrough file
with open(p, "wb") as f:
    f.write(b"short")
check(os.stat(p).st_size == 5 and open(p, "rb").read() == b"short", "O_TRUNC rewrite")

# A lookup of the name while a passthrough writer grows the file (a failed
# mkdir, link or O_EXCL create onto it, linkat of an O_TMPFILE) answers the
# grown size: the kernel keeps it, and an append must land after the data.
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
def poke(q):
    for how in ("mkdir", "excl", "link", "symlink"):
        try:
            if how == "mkdir":
                os.mkdir(q)
            elif how == "excl":
                os.close(os.open(q, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
            elif how == "link":
                os.link(p, q)
            else:
                os.symlink("x", q)
            check(False, "%s onto an existing name succeeded" % how)
        except FileExistsError:
            pass
for n, how in enumerate(("mkdir", "tmpfile")):
    q = os.path.join(root, "grow%d" % n)
    if how == "tmpfile":
        fd = os.open(root, os.O_TMPFILE | os.O_WRONLY, 0o644)
        os.write(fd, b"line1\nline2\n")
        check(libc.linkat(fd, b"", -100, q.encode(), 0x1000) == 0, "linkat of an O_TMPFILE")
    else:
        fd = os.open(q, os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"line1\nline2\n")
        poke(q)
    os.close(fd)
    check(os.stat(q).st_size == 12, "%s: size after a lookup during the write: %d" % (how, os.stat(q).st_size))
    with open(q, "a+") as f:
        f.write("line3\n")
    got = open(q, "rb").read()
    check(got == b"line1\nline2\nline3\n", "%s: append after a lookup during the write: %r" % (how, got))

# O_DIRECT as a file's first open goes through the daemon, which asks no
# alignment (the man page); one joining a passthrough open reaches the
# spool file, so only aligned I/O is sure to work there: it must land.
q = os.path.join(root, "direct")
d = os.open(q, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
try:
    check(os.pwrite(d, b"abc", 1) == 3 and os.pread(d, 10, 0) == b"\0abc",
          "unaligned O_DIRECT I/O of a first open")
except OSError as e:
    check(False, "unaligned O_DIRECT I/O of a first open: %s" % e)
os.close(d)
r = os.open(q, os.O_RDONLY)
d = os.open(q, os.O_RDWR | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)
buf.write(b"D" * 4096)
check(os.pwritev(d, [buf], 4096) == 4096, "aligned O_DIRECT write joining a reader")
os.close(d)
check(os.pread(r, 4, 4096) == b"DDDD" and os.fstat(r).st_size == 8192,
      "the joining O_DIRECT write is seen")
os.close(r)
os.unlink(q)
sys.exit(1 if bad else 0)
EOF
st=$(status "$M")
if [[ $(field "$st" passthrough) == True && $(field "$st" passthrough_opens) -gt 0 ]]; then
	ok "passthrough on: $(field "$st" passthrough_opens) opens"
else
	fail "passthrough is not in use: $st"
fi
# An open file costs the daemon one descriptor, as without passthrough: a
# program may hold as many files open as the daemon's limit allows, not half.
mkdir "$M/many"
for ((i = 0; i < 300; i++)); do printf '%d' "$i" >"$M/many/$i"; done
rc=0
python3 - "$M/many" "$DPID" <<'PY' || rc=$?
import os, sys
d, pid = sys.argv[1], sys.argv[2]
count = lambda: len(os.listdir("/proc/%s/fd" % pid))
before = count()
fds = [os.open(os.path.join(d, str(i)), os.O_RDONLY if i % 2 else os.O_WRONLY) for i in range(300)]
fds += [os.open(os.path.join(d, str(i)), os.O_RDONLY) for i in range(100)]  # a second handle each
during = count() - before
for fd in fds:
    os.close(fd)
print("daemon descriptors for 400 handles of 300 files: %d" % during)
sys.exit(0 if during <= 310 else 1)
PY
((rc == 0)) && ok "300 files open (100 twice): at most one daemon descriptor each" ||
	fail "the daemon held more than one descriptor per open file"
rm -r "$M/many"
"$SEAL" --quiet "$M" || fail "seal 1"
wait_daemon 0
if loop_mount "$WORK/a.sqfs" "$WORK/k1"; then
	[[ $(cat "$WORK/k1/f") == short ]] && ok "kernel reads the last content" || fail "kernel reads $(head -c 20 "$WORK/k1/f")"
	loop_umount "$WORK/k1"
fi

# --- 2: rewrites after background compression -----------------------------
SRC=$WORK/src
python3 - "$SRC" <<'EOF'
import os, random, sys
root = sys.argv[1]
r = random.Random(11)
os.makedirs(root)
words = b" ".join(r.choice([b"red", b"green", b"blue", b"cyan"]) for _ in range(30000))
for i in range(12):
    size = r.choice([65536 * 6 + 7, 65536 * 3, 1 << 20, 70000])
    buf = bytearray()
    while len(buf) < size:
        buf += words[r.randrange(1000):][:65536] if r.randrange(2) else r.randbytes(65536)
    with open(os.path.join(root, "f%02d" % i), "wb") as f:
        f.write(buf[:size])
EOF
edit() { # ROOT: write-only edits, the kind that go through passthrough
	python3 - "$1" <<'EOF'
import os, sys
root = sys.argv[1]
def p(n): return os.path.join(root, n)
fd = os.open(p("f00"), os.O_WRONLY)
os.pwrite(fd, b"O" * 70000, 65536 + 11)
os.close(fd)
fd = os.open(p("f01"), os.O_WRONLY | os.O_APPEND)
os.write(fd, b"appended " * 30000)
os.close(fd)
fd = os.open(p("f02"), os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"new content\n" * 9000)
os.close(fd)
fd = os.open(p("f03"), os.O_WRONLY)
os.ftruncate(fd, 65536 + 3)
os.pwrite(fd, b"tail", 65536 * 4)
os.close(fd)
EOF
}
COPY=$WORK/copy
cp -a "$SRC" "$COPY"
edit "$COPY"
find "$COPY" -exec touch -h -d @1650000000 {} +
"$PACK" -q --mkfs-time $MT -c $COMP -b $BS "$COPY" "$WORK/ref.sqfs"
REF=$(sha256sum <"$WORK/ref.sqfs" | cut -d' ' -f1)
for mode in passthrough no_passthrough; do
	M=$WORK/m-$mode
	opts=comp=$COMP,block_size=$BS,mkfs_time=$MT
	[[ $mode == no_passthrough ]] && opts+=,no_passthrough
	stage_mount "$WORK/$mode.sqfs" "$M" -o "$opts"
	cp -a "$SRC/." "$M/"
	wait_idle "$M"
	st=$(status "$M")
	[[ $(field "$st" stored_blocks) -gt 0 ]] && ok "$mode: background stored blocks" || fail "$mode: nothing stored: $st"
	want=True
	[[ $mode == no_passthrough ]] && want=False
	[[ $(field "$st" passthrough) == "$want" ]] && ok "$mode: status says passthrough $want" || fail "$mode: $st"
	edit "$M"
	if diff -r "$COPY" "$M" >/dev/null; then ok "$mode: reads after the edits"; else fail "$mode: reads after the edits differ"; fi
	wait_idle "$M"
	find "$M" -exec touch -h -d @1650000000 {} +
	out=$("$SEAL" --json "$M")
	wait_daemon 0
	sum=$(sha256sum <"$WORK/$mode.sqfs" | cut -d' ' -f1)
	[[ $sum == "$REF" ]] && ok "$mode: image equals sqfs-pack of the edited copy" || fail "$mode: image $sum, sqfs-pack $REF ($out)"
done
if loop_mount "$WORK/passthrough.sqfs" "$WORK/k2"; then
	if diff -r "$COPY" "$WORK/k2" >/dev/null; then ok "kernel view equals the edited copy"; else fail "kernel view differs"; fi
	loop_umount "$WORK/k2"
fi

finish
