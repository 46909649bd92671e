#!/bin/bash
# test_recover.sh SQFS_STAGE SQFS_SEAL SQFS_PACK
#
# Crash safety: kill -9 of the daemon, at rest and at random points while a
# writer runs, and in the middle of a seal.
#   - `sqfs-stage --recover SPOOL` brings back the whole tree (contents,
#     modes, owners, times, links, xattrs, devices) of every answered
#     operation; the sealed image equals sqfs-pack of the source
#   - every file a writer closed and fsync'ed before the kill is recovered
#     with its data and metadata
#   - spool files made ahead (spares) at the crash are swept
#   - a seal killed mid-write leaves IMAGE as it was (or absent)
#   - a journal cut short mid-batch recovers up to the last whole batch
#   - recovering a spool in use, or a directory that is no spool, fails
#   - an fsync flushes the journal and spool names only when they changed
#   - -o volatile: fsync flushes nothing (O_SYNC writes flush their file's
#     data); the tree survives kill -9 of the daemon; a recovery in another
#     boot is refused until the mark is removed
#   - the spool keeps the mount's options (SPOOL/options) and the mkfs_time
#     in effect: a bare --recover seals what the lost daemon would have, and
#     options given with --recover win
#   - -o pseudo_file given again with --recover: its entries are already
#     there, and each definition is ignored with a warning
set -euo pipefail
# shellcheck source=tests/fuse/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "$@"
need_loop
need_cmd getfattr setfattr sha256sum mknod rdsquashfs
MT=1700000000
OPTS=comp=zstd:3,block_size=64K,mkfs_time=$MT

SRC=$WORK/src
"$FUSE_TESTS_DIR/mksrc.sh" "$SRC"
"$PACK" -q --mkfs-time $MT -c zstd:3 -b 64K "$SRC" "$WORK/ref.sqfs"
REF=$(sha256sum <"$WORK/ref.sqfs" | cut -d' ' -f1)

spool_of() { # IMAGE: the one spool directory beside it
	local d
	d=$(find "$(dirname "$1")" -maxdepth 1 -name ".$(basename "$1").spool.*" | sed -n 1p)
	[[ -n $d ]] || { log "FAIL: no spool beside $1"; exit 1; }
	echo "$d"
}

crash() { # crash MOUNTPOINT [WRITER_PID]: kill -9 the daemon, drop the dead mount
	local wst=
	# the writer as it is now: once the daemon dies it may end, and its
	# pid go to another process
	[[ -z ${2-} ]] || wst=$(proc_start "$2") || true
	kill -9 "$DPID" 2>/dev/null || true
	wait "$DPID" 2>/dev/null || true
	# The writer must be gone before the mount is detached, or it would go
	# on writing into the bare mountpoint directory underneath.
	if [[ -n ${2-} ]]; then
		[[ -z $wst || $(proc_start "$2") != "$wst" ]] || kill -9 "$2" 2>/dev/null || true
		wait "$2" 2>/dev/null || true
	fi
	fusermount3 -u -z "$1" 2>/dev/null || true
}

# --- 1: at rest, no fsync: every answered operation survives --------------
mkdir -p "$WORK/o1"
IMG=$WORK/o1/a.sqfs
stage_mount "$IMG" "$WORK/m1" -o $OPTS
cp -a "$SRC/." "$WORK/m1/"
# churn that ends in the source tree again
mkdir "$WORK/m1/tmpdir"
echo gone >"$WORK/m1/tmpdir/x"
mv "$WORK/m1/tmpdir" "$WORK/m1/tmpdir2"
rm -r "$WORK/m1/tmpdir2"
cp "$WORK/m1/$(cd "$SRC" && find . -type f -size +1k | sort | head -n 1)" "$WORK/m1/copy"
rm "$WORK/m1/copy"
# O_TMPFILE: a file of the source made again through a tmpfile that linkat
# names (recovered like any other), and one never named (gone at its close,
# spool file and all)
f=$(cd "$SRC" && find . -type f -size +1k | sort | tail -n 1)
rm "$WORK/m1/$f"
tmpino=$(python3 - "$SRC/$f" "$WORK/m1/$f" <<'EOF'
import ctypes, os, shutil, sys
src, dst = sys.argv[1:]
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(os.path.dirname(dst), os.O_TMPFILE | os.O_WRONLY, 0o600)
with open(src, "rb") as f, os.fdopen(os.dup(fd), "wb") as out:
    shutil.copyfileobj(f, out)
if libc.linkat(-100, f"/proc/self/fd/{fd}".encode(), -100, dst.encode(), 0x400):
    raise OSError(ctypes.get_errno(), "linkat")
os.close(fd)
fd = os.open(os.path.dirname(dst), os.O_TMPFILE | os.O_WRONLY, 0o600)
os.write(fd, b"never named")
print(os.fstat(fd).st_ino)
os.close(fd)
EOF
)
cp -a --attributes-only "$SRC/$f" "$WORK/m1/$f"
touch -r "$SRC/$(dirname "$f")" "$WORK/m1/$(dirname "$f")"
touch -r "$SRC" "$WORK/m1"
tree_cmp "$SRC" "$WORK/m1" "staged view before the crash"
SP=$(spool_of "$IMG")
if [[ -n $tmpino && ! -e $SP/data/$tmpino ]]; then
	ok "an O_TMPFILE closed unnamed leaves no spool file"
else
	fail "O_TMPFILE closed unnamed: spool file '$tmpino' left"
fi
# Spool files are made ahead for the next inode numbers (spare.c): some
# must be there at the crash, and the recovery must sweep them (spool files
# are named by inode number, which the mount shows).
find "$WORK/m1" -type f -printf '%i\n' | sort -u >"$WORK/regs"
ls "$SP/data" | sort >"$WORK/datafiles"
comm -13 "$WORK/regs" "$WORK/datafiles" >"$WORK/spares"
if [[ -s $WORK/spares ]]; then
	ok "$(wc -l <"$WORK/spares") spare spool files at the crash"
else
	fail "no spare spool file at the crash"
fi
crash "$WORK/m1"
[[ -e $IMG ]] && fail "an image appeared without a seal"
# The journal is appended through a mapped window made ahead (journal.c):
# after a kill -9 the file ends in the window's zeros, which are no torn batch.
jsize=$(stat -c %s "$SP/journal")
stage_mount "$IMG" "$WORK/m1" --recover "$SP" -o $OPTS
tree_cmp "$SRC" "$WORK/m1" "recovered tree"
# st_blocks is the spool file's (du, cp --sparse=auto), after a recovery too
diffb=$(cd "$WORK/m1" && find . -type f -printf '%i %b %p\n' | while read -r i b p; do
	[[ $(stat -c %b "$SP/data/$i") == "$b" ]] || echo "$p"
done)
[[ -z $diffb ]] && ok "recovered st_blocks are the spool files'" || fail "st_blocks differ from the spool files': $diffb"
rec=$(grep "recovered .* inodes from $SP" "$WORK/daemon.log" | tail -n 1)
if [[ $rec == *"; 0 bytes of a last batch cut short"* ]]; then
	ok "a journal of $jsize bytes at rest: nothing counted as cut short"
else
	fail "recovery at rest: $rec"
fi
left=0
while read -r f; do
	[[ -e $SP/data/$f ]] && left=$((left + 1))
done <"$WORK/spares"
((left == 0)) && ok "recovery swept the spares" || fail "recovery left $left spares"
"$SEAL" --quiet "$WORK/m1" || fail "seal after recovery"
wait_daemon 0
sum=$(sha256sum <"$IMG" | cut -d' ' -f1)
[[ $sum == "$REF" ]] && ok "recovered image equals sqfs-pack" || fail "recovered image $sum, sqfs-pack $REF"
[[ -d $SP ]] && fail "spool left after the seal of a recovered tree" || ok "spool removed after the seal"

# --- 1b: an O_TMPFILE across a journal rewrite ------------------------------
# A seal (--keep) writes the journal anew from the live tree: an O_TMPFILE
# open and not yet named must be in it, xattrs and all, for a linkat after
# it names the file (the rewrite left it out: its xattrs were lost).
mkdir -p "$WORK/o1b"
IMG=$WORK/o1b/t.sqfs
stage_mount "$IMG" "$WORK/m1b" -o $OPTS
python3 - "$WORK/m1b" "$SEAL" <<'EOF' || fail "O_TMPFILE across a seal: the script failed"
import ctypes, os, subprocess, sys
mnt, seal = sys.argv[1:]
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(mnt, os.O_TMPFILE | os.O_RDWR, 0o640)
os.write(fd, b"made before the seal, named after it\n")
os.setxattr("/proc/self/fd/%d" % fd, "user.kept", b"across the rewrite")
subprocess.run([seal, "--keep", "--quiet", mnt], check=True)
if libc.linkat(fd, b"", -100, os.path.join(mnt, "named").encode(), 0x1000):
    raise OSError(ctypes.get_errno(), "linkat")
os.close(fd)
assert os.getxattr(os.path.join(mnt, "named"), "user.kept") == b"across the rewrite"
EOF
SP=$(spool_of "$IMG")
crash "$WORK/m1b"
stage_mount "$IMG" "$WORK/m1b" --recover "$SP" -o $OPTS
got=$(getfattr --absolute-names --only-values -n user.kept "$WORK/m1b/named" 2>&1) || true
[[ $got == "across the rewrite" ]] && ok "O_TMPFILE named after a journal rewrite: its xattr recovered" ||
	fail "O_TMPFILE named after a journal rewrite: user.kept after the recovery: $got"
"$SEAL" --quiet "$WORK/m1b" || fail "seal of the recovered O_TMPFILE"
wait_daemon 0
[[ $(unsquashfs -cat "$IMG" named 2>/dev/null) == "made before the seal, named after it" ]] &&
	ok "O_TMPFILE named after a journal rewrite: in the image" || fail "O_TMPFILE after the recovery: not in the image"

# --- 2: kill -9 at random points under an fsync'ing writer -----------------
# The writer creates files with random sizes, modes and times, fsyncs each
# and only then logs it as done (in a file outside the mount).
for round in 1 2 3; do
	mkdir -p "$WORK/o2"
	IMG=$WORK/o2/r$round.sqfs
	M=$WORK/m2-$round
	stage_mount "$IMG" "$M" -o $OPTS
	SP=$(spool_of "$IMG")
	python3 - "$M" "$WORK/done$round" $round >/dev/null 2>&1 <<'EOF' &
import os, random, sys
root, log, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = random.Random(seed)
with open(log, "w") as done:
    for i in range(100000):
        d = os.path.join(root, "d%d" % (i % 7))
        os.makedirs(d, exist_ok=True)
        name = os.path.join(d, "f%05d" % i)
        data = r.randbytes(r.choice([0, 1, 100, 70000, 300000]))
        with open(name, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), 0o600 + r.randrange(0o100))
            f.flush()
            os.fsync(f.fileno())
        os.utime(name, ns=(1600000000 * 10**9 + i, 1600000000 * 10**9 + i))
        fd = os.open(name, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        st = os.stat(name)
        done.write("%s %o %d %d\n" % (os.path.relpath(name, root), st.st_mode, st.st_mtime_ns, len(data)))
        done.flush()
        os.fsync(done.fileno())
        # keep the content to compare: its seed is (seed, i), replayed below
EOF
	WPID=$!
	# The kill lands at a random point after the writer got going (python
	# starts slowly under the sanitizers): at least one file fsync'ed.
	for ((i = 0; i < 600; i++)); do
		[[ -s $WORK/done$round ]] && break
		kill -0 "$WPID" 2>/dev/null || break
		sleep 0.05
	done
	sleep "0.$((RANDOM % 9 + 1))"
	sleep $((round - 1))
	crash "$M" "$WPID"
	stage_mount "$IMG" "$M" --recover "$SP" -o $OPTS
	python3 - "$M" "$WORK/done$round" $round <<'EOF' && ok "round $round: every fsync'ed file recovered" || fail "round $round: fsync'ed files lost or wrong"
import os, random, sys
root, log, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = random.Random(seed)
lines = open(log).read().splitlines()
bad = 0
for i, line in enumerate(lines):
    rel, mode, mtime, size = line.split()
    data = r.randbytes(r.choice([0, 1, 100, 70000, 300000]))
    r.randrange(0o100)
    p = os.path.join(root, rel)
    try:
        st = os.stat(p)
        with open(p, "rb") as f:
            got = f.read()
    except OSError as e:
        print("missing", rel, e); bad += 1; continue
    if got != data or "%o" % st.st_mode != mode or st.st_mtime_ns != int(mtime):
        print("differs", rel, len(got), len(data), "%o" % st.st_mode, mode, st.st_mtime_ns, mtime)
        bad += 1
print(len(lines), "fsync'ed files checked,", bad, "bad")
sys.exit(1 if bad or not lines else 0)
EOF
	"$SEAL" --quiet "$M" || fail "round $round: seal after recovery"
	wait_daemon 0
	if loop_mount "$IMG" "$WORK/k2"; then
		n=$(find "$WORK/k2" -type f | wc -l)
		[[ $n -ge $(wc -l <"$WORK/done$round") ]] && ok "round $round: image holds $n files" ||
			fail "round $round: image holds $n files, fewer than fsync'ed"
		loop_umount "$WORK/k2"
	fi
done

# --- 3: kill -9 in the middle of a seal -------------------------------------
mkdir -p "$WORK/o3"
IMG=$WORK/o3/s.sqfs
M=$WORK/m3
stage_mount "$IMG" "$M" -o comp=xz:9,block_size=64K,mkfs_time=$MT,no_background
cp -a "$SRC/." "$M/"
"$SEAL" --keep --quiet "$M" || fail "first seal"
FIRST=$(sha256sum <"$IMG" | cut -d' ' -f1)
# Slow for xz:9 yet compressible (random bytes are stored raw untried, and
# the seal would be over before the kill).
head -c 30000000 /dev/urandom | base64 -w 0 >"$WORK/big"
cp "$WORK/big" "$M/big"
SP=$(spool_of "$IMG")
"$SEAL" --quiet "$M" >/dev/null 2>&1 &
SPID=$!
sleep 1
crash "$M"
wait "$SPID" 2>/dev/null && fail "sqfs-seal succeeded although its daemon was killed" || ok "sqfs-seal reports the failure"
sum=$(sha256sum <"$IMG" | cut -d' ' -f1)
[[ $sum == "$FIRST" ]] && ok "IMAGE is still the previous image" || fail "IMAGE changed by a killed seal"
# The image was being written to an unnamed file (O_TMPFILE): gone with it.
left=$(find "$WORK/o3" -mindepth 1 -maxdepth 1 ! -name s.sqfs ! -path "$SP" -printf '%f ')
[[ -z $left ]] && ok "nothing left beside IMAGE but the spool" || fail "left beside IMAGE: $left"
# No options: the spool's own (xz:9, 64K, the mkfs_time) apply again.
stage_mount "$IMG" "$M" --recover "$SP"
cmp -s "$M/big" "$WORK/big" && ok "big file recovered" || fail "big file not recovered"
rm "$M/big"
touch -r "$SRC" "$M"
"$SEAL" --quiet "$M" || fail "seal after the killed seal"
wait_daemon 0
"$PACK" -q --mkfs-time $MT -c xz:9 -b 64K "$SRC" "$WORK/ref3.sqfs"
cmp -s "$IMG" "$WORK/ref3.sqfs" && ok "image after a bare --recover equals sqfs-pack with the mount's options" ||
	fail "image after a bare --recover differs from sqfs-pack with the mount's options"

# --- 4: a journal cut short in its last batch --------------------------------
mkdir -p "$WORK/o4"
IMG=$WORK/o4/t.sqfs
M=$WORK/m4
stage_mount "$IMG" "$M" -o $OPTS
mkdir "$M/a"
echo one >"$M/a/one"
sync
echo two >"$M/a/two"
SP=$(spool_of "$IMG")
crash "$M"
# Cut 3 bytes off the last batch, which ends before the window's zeros.
size=$(python3 -c 'import sys; print(len(open(sys.argv[1], "rb").read().rstrip(b"\0")))' "$SP/journal")
truncate -s $((size - 3)) "$SP/journal"
stage_mount "$IMG" "$M" --recover "$SP" -o $OPTS
[[ $(cat "$M/a/one" 2>/dev/null) == one ]] && ok "whole batches replayed" || fail "lost a whole batch"
grep -q "bytes of a last batch cut short ignored" "$WORK/daemon.log" && ok "torn batch reported" || fail "torn batch not reported"
grep -q "later batches in it check out" "$WORK/daemon.log" &&
	fail "a crash's torn last batch reported as damage" || ok "no damage warning for a torn last batch"

# --- 4b: a journal damaged in the middle: recovered up to there, and told ---
IMG=$WORK/o4/d.sqfs
M=$WORK/m4b
stage_mount "$IMG" "$M" -o $OPTS
for i in $(seq 1 30); do echo "$i" >"$M/f$i"; done
SP=$(spool_of "$IMG")
# sqfs-seal on the dead mount says what happened and what to do
kill -9 "$DPID"
wait "$DPID" 2>/dev/null || true
expect_exit 1 "the daemon has gone (it died or was killed); $IMG keeps its previous contents and the tree is in $SP; to get it back: fusermount3 -u -z $M && sqfs-stage --recover $SP $IMG $M (see" \
	"$SEAL" "$M"
# Paths that need quoting are quoted: the command runs as it is printed.
MQ="$WORK/m q'x"
stage_mount "$WORK/q r.sqfs" "$MQ" -o $OPTS
echo kept >"$MQ/f"
kill -9 "$DPID"
wait "$DPID" 2>/dev/null || true
"$SEAL" "$MQ" 2>"$WORK/err" && fail "sqfs-seal of a dead mount succeeded"
cmd=$(sed -n 's/.*; to get it back: \(.*\) (see sqfs-stage(1), CRASHES)$/\1/p' "$WORK/err")
if [[ -n $cmd ]] && PATH=$(dirname "$STAGE"):$PATH bash -c "$cmd" 2>>"$WORK/err"; then
	dpid=$(pgrep -n -f "sqfs-stage --recover .*q r.sqfs" || true)
	[[ -n $dpid ]] && daemon_add "$dpid"
	"$SEAL" --quiet "$MQ" || fail "seal after the printed recovery"
	[[ $(unsquashfs -cat "$WORK/q r.sqfs" f 2>/dev/null) == kept ]] &&
		ok "the printed recovery command, run as printed: $cmd" ||
		fail "the printed recovery: the image lacks f"
else
	fail "the printed recovery command failed: $(cat "$WORK/err")"
fi
crash "$M"
python3 - "$SP/journal" <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(bytes(b).rstrip(b"\0")) // 2] ^= 0xFF
open(p, "wb").write(b)
EOF
stage_mount "$IMG" "$M" --recover "$SP" -o $OPTS
grep -q "later batches in it check out: it was damaged there" "$WORK/daemon.log" &&
	ok "damage in the middle of the journal reported" || fail "damage in the middle of the journal not reported"
n=$(find "$M" -maxdepth 1 -name 'f*' | wc -l)
((n > 0 && n < 30)) && ok "recovered up to the damage: $n of 30 files" || fail "recovered $n of 30 files"

# --- 4c: a batch that checks out but could not have been written ------------
# (a name with '/', then a directory given a second name inside itself): the
# replay stops at the first such batch, says the journal was damaged there,
# and the tree recovered up to it seals.
D4B=$DPID SP4B=$SP IMG4B=$IMG
IMG=$WORK/o4/c.sqfs
M=$WORK/m4c
stage_mount "$IMG" "$M" -o $OPTS
echo one >"$M/one"
mkdir "$M/d"
SP=$(spool_of "$IMG")
dino=$(stat -c %i "$M/d")
crash "$M"
python3 - "$SP/journal" "$dino" <<'EOF'
import ctypes, ctypes.util, struct, sys
x = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
x.XXH64.restype = ctypes.c_uint64
x.XXH64.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]
def batch(p):
    return struct.pack("<IIQ", 0x424A5153, len(p), x.XXH64(p, len(p), 0)) + p
def add(d, c, name):
    return struct.pack("<BQQI", 2, d, c, len(name)) + name
path, d = sys.argv[1], int(sys.argv[2])
b = open(path, "rb").read().rstrip(b"\0")
b += batch(add(1, d, b"x/y")) + batch(add(d, d, b"self"))
open(path, "wb").write(b)
EOF
: >"$WORK/daemon.log"
stage_mount "$IMG" "$M" --recover "$SP" -o $OPTS
if grep -q "yet 2 later batches in it check out: it was damaged there" "$WORK/daemon.log" &&
	[[ $(ls "$M" | tr '\n' ' ') == "d one " && -z $(ls "$M/d") ]]; then
	ok "a batch naming an entry 'x/y' stops the replay, told as damage"
else
	fail "a batch naming 'x/y': $(ls -R "$M" | tr '\n' ' '), $(grep -E 'recovered|damaged' "$WORK/daemon.log" | tail -n 2)"
fi
"$SEAL" --quiet "$M" || fail "seal of test 4c"
wait_daemon 0
[[ $(unsquashfs -cat "$IMG" one 2>/dev/null) == one ]] && ok "4c: the recovered tree sealed" ||
	fail "4c: the image lacks one"
M=$WORK/m4b DPID=$D4B SP=$SP4B IMG=$IMG4B

# --- 5: wrong uses of --recover ------------------------------------------------
mkdir -p "$WORK/m5" "$WORK/nospool"
: >"$WORK/afile"
expect_exit 1 "spool $SP: in use by a running sqfs-stage" \
	"$STAGE" --recover "$SP" "$WORK/o4/u.sqfs" "$WORK/m5"
expect_exit 1 "not a sqfs-stage spool" \
	"$STAGE" --recover "$WORK/nospool" "$WORK/o4/u.sqfs" "$WORK/m5"
expect_exit 1 "sqfs-stage: -o recover: $WORK/absent: No such file or directory" \
	"$STAGE" --recover "$WORK/absent" "$WORK/o4/u.sqfs" "$WORK/m5"
expect_exit 1 "sqfs-stage: -o recover: $WORK/afile: not a writable directory" \
	"$STAGE" --recover "$WORK/afile" "$WORK/o4/u.sqfs" "$WORK/m5"
expect_exit 1 "sqfs-stage: spool directory $WORK/absent: No such file or directory" \
	"$STAGE" -o spool="$WORK/absent" "$WORK/o4/u.sqfs" "$WORK/m5"
# An empty SPOOL is a usage error, and nothing is read for it (it once
# read "/options", and showed what a file there held as the spool's options).
for arg in -orecover= --recover=; do
	rc=0
	# (LeakSanitizer cannot run under ptrace: off for this one run)
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
		strace -f -e trace=open,openat -o "$WORK/st5" "$STAGE" "$arg" "$WORK/o4/u.sqfs" \
		"$WORK/m5" 2>"$WORK/err5" || rc=$?
	if ((rc == 2)) && grep -q "recover: give the spool directory" "$WORK/err5" &&
		! grep -q '"/options"' "$WORK/st5"; then
		ok "$arg with no directory: exit 2, nothing read"
	else
		fail "$arg with no directory: exit $rc, $(cat "$WORK/err5"), $(grep -c '"/options"' "$WORK/st5") opens of /options"
	fi
done
mountpoint -q "$WORK/m5" && fail "mounted on a bad --recover"
[[ -e $WORK/o4/u.sqfs ]] && fail "a refused mount left an image"
ls -d "$WORK"/o4/.u.sqfs.spool.* 2>/dev/null && fail "a refused mount left a spool"
"$SEAL" --quiet "$M" || fail "seal of test 4"
wait_daemon 0

# --- 6: what an fsync flushes ------------------------------------------------
# An fsync makes the journal and the spool file names the caller relies on
# durable, and flushes again only what changed since the last one (dpkg
# fsyncs each file it unpacked, one after another).  strace -y shows each
# flush with its file: SPOOL/journal, SPOOL/data (the names), the file.
need_cmd strace
mkdir -p "$WORK/o6"
IMG=$WORK/o6/f.sqfs
M=$WORK/m6
stage_mount "$IMG" "$M" -o $OPTS
SP=$(spool_of "$IMG")
mkdir "$M/d"
for i in $(seq 1 20); do echo "old $i" >"$M/d/old$i"; done
echo fresh >"$M/d/first"
# flushes TRACE: "J D" counts of journal and spool-directory flushes
flushes() {
	printf '%s %s\n' "$(grep -c "fdatasync([0-9]*<$SP/journal>" "$1" || true)" \
		"$(grep -c "fsync([0-9]*<$SP/data>" "$1" || true)"
}
traced() { # TRACE PYTHON-CODE: run it under an strace of the daemon's flushes
	local tr=$1 sp i
	shift
	strace -f -y -e trace=fsync,fdatasync -p "$DPID" -o "$tr" 2>/dev/null &
	sp=$!
	# Until every thread of the daemon is traced.
	for ((i = 0; i < 200; i++)); do
		! grep -qs '^TracerPid:[[:space:]]*0$' /proc/"$DPID"/task/*/status && break
		sleep 0.05
	done
	python3 -c "$1" "$M"
	sleep 0.2
	kill -INT $sp
	wait $sp 2>/dev/null || true
}
# First fsync of a file made since the last: journal and names.
traced "$WORK/tr1" 'import os, sys
fd = os.open(sys.argv[1] + "/d/first", os.O_RDONLY); os.fsync(fd); os.close(fd)'
read -r j d < <(flushes "$WORK/tr1")
((j == 1 && d == 1)) && ok "fsync of a new file: journal and names flushed" ||
	fail "fsync of a new file: $j journal, $d name flushes (want 1 and 1)"
# Files made before that flush, fsync'ed with nothing changed in between:
# only their own data.
traced "$WORK/tr2" 'import os, sys
for i in range(1, 21):
    fd = os.open(sys.argv[1] + "/d/old%d" % i, os.O_RDONLY); os.fsync(fd); os.close(fd)'
read -r j d < <(flushes "$WORK/tr2")
((j == 0 && d == 0)) && ok "20 fsyncs with nothing new: no journal or name flush" ||
	fail "20 fsyncs with nothing new: $j journal, $d name flushes (want 0 and 0)"
n=$(grep -c "fsync([0-9]*<$SP/data/[0-9]*>" "$WORK/tr2" || true)
((n == 20)) && ok "each fsync flushed its own file" || fail "$n file flushes for 20 fsyncs"
# A rename between fsyncs (dpkg's pattern): the journal each time, the
# names never (no spool file was made).
traced "$WORK/tr3" 'import os, sys
d = sys.argv[1] + "/d/"
for i in range(1, 11):
    fd = os.open(d + "old%d" % i, os.O_RDONLY); os.fsync(fd); os.close(fd)
    os.rename(d + "old%d" % i, d + "new%d" % i)'
read -r j d < <(flushes "$WORK/tr3")
((j == 9 && d == 0)) && ok "fsync after each rename: journal flushed each time, names not" ||
	fail "fsync after renames: $j journal, $d name flushes (want 9 and 0)"
# A new file, then fsync of an old one: the old file's name is durable, so
# no name flush; the directory's fsync then needs the new name.
traced "$WORK/tr4" 'import os, sys
d = sys.argv[1] + "/d/"
open(d + "second", "w").write("x")
fd = os.open(d + "old20", os.O_RDONLY); os.fsync(fd); os.close(fd)
fd = os.open(d, os.O_RDONLY); os.fsync(fd); os.fsync(fd); os.close(fd)'
read -r j d < <(flushes "$WORK/tr4")
((j == 1 && d == 1)) && ok "new file: one name flush, at the directory's fsync" ||
	fail "new file then fsyncs: $j journal, $d name flushes (want 1 and 1)"
crash "$M"
stage_mount "$IMG" "$M" --recover "$SP" -o $OPTS
[[ $(cat "$M/d/new3") == "old 3" && $(cat "$M/d/second") == x && ! -e $M/d/old3 ]] &&
	ok "tree after the fsyncs recovered" || fail "tree after the fsyncs not recovered"
"$SEAL" --quiet "$M" || fail "seal of test 6"
wait_daemon 0

# --- 7: -o volatile ------------------------------------------------------------
# fsync flushes nothing, not even once; kill -9 of the daemon loses nothing
# (the page cache keeps it); after a restart of the machine (faked by
# rewriting the boot id in SPOOL/volatile) the spool is refused.
mkdir -p "$WORK/o7"
IMG=$WORK/o7/v.sqfs
M=$WORK/m7
stage_mount "$IMG" "$M" -o $OPTS,volatile
SP=$(spool_of "$IMG")
BOOT=$(cat /proc/sys/kernel/random/boot_id)
[[ $(getfattr --only-values -n user.sqfs-stage.status "$M" 2>/dev/null) == *'"volatile": true'* ]] &&
	ok "status says volatile" || fail "status does not say volatile"
grep -qx "boot_id $BOOT" "$SP/volatile" && ok "spool marked with this boot" ||
	fail "SPOOL/volatile: $(cat "$SP/volatile" 2>&1)"
cp -a "$SRC/." "$M/"
mkdir "$M/v"
traced "$WORK/tr7" 'import os, sys
d = sys.argv[1] + "/v/"
for i in range(20):
    fd = os.open(d + "f%d" % i, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"v%d" % i); os.fsync(fd); os.fdatasync(fd); os.close(fd)
fd = os.open(d, os.O_RDONLY); os.fsync(fd); os.close(fd)'
n=$(grep -cE '^[0-9]+ +(fsync|fdatasync|syncfs)\(' "$WORK/tr7" || true)
((n == 0)) && ok "volatile: 40 fsyncs and an fsyncdir flushed nothing" ||
	fail "volatile: $n flushes: $(grep -E 'sync\(' "$WORK/tr7" | head -n 3)"
# O_SYNC and O_DSYNC writes still flush their file's data (the man page
# says so): read-write handles are never in passthrough, so their writes
# come through the daemon, and the kernel's FSYNC after each was off.
traced "$WORK/tr7s" 'import os, sys
d = sys.argv[1] + "/v/"
for fl in (os.O_SYNC, os.O_DSYNC):
    fd = os.open(d + "s%d" % fl, os.O_RDWR | os.O_CREAT | fl, 0o644)
    for i in range(5):
        os.pwrite(fd, b"s" * 4096, i * 4096)
    os.close(fd)
fd = os.open(d + "f0", os.O_RDWR); os.pwrite(fd, b"v0", 0); os.close(fd)'
n=$(grep -cE '^[0-9]+ +fsync\([0-9]+<'"$SP"'/data/[0-9]+>' "$WORK/tr7s" || true)
m=$(grep -cE '^[0-9]+ +fdatasync\([0-9]+<'"$SP"'/data/[0-9]+>' "$WORK/tr7s" || true)
a=$(grep -cE '^[0-9]+ +(fsync|fdatasync|syncfs)\(' "$WORK/tr7s" || true)
((n == 5 && m == 5 && a == 10)) && ok "volatile: O_SYNC and O_DSYNC writes flushed their file" ||
	fail "volatile: O_SYNC/O_DSYNC writes: $n fsyncs, $m fdatasyncs of the file, $a flushes (want 5, 5, 10)"
crash "$M"
stage_mount "$IMG" "$M" --recover "$SP" -o $OPTS,volatile
[[ $(cat "$M/v/f7") == v7 && -f $SP/volatile ]] &&
	ok "volatile: kill -9 recovered in the same boot, still marked" ||
	fail "volatile: same-boot recovery: $(cat "$M/v/f7" 2>&1)"
crash "$M"
sed -i "s/^boot_id .*/boot_id 00000000-0000-0000-0000-000000000000/" "$SP/volatile"
rc=0
"$STAGE" --recover "$SP" "$IMG" "$M" 2>"$WORK/err7" || rc=$?
[[ $rc -eq 1 ]] && grep -q "restarted since" "$WORK/err7" && ! mountpoint -q "$M" &&
	[[ -s $SP/journal && -f $SP/volatile ]] &&
	ok "volatile spool from another boot refused: $(cat "$WORK/err7")" ||
	fail "volatile spool from another boot: rc=$rc $(cat "$WORK/err7")"
rm "$SP/volatile"
stage_mount "$IMG" "$M" --recover "$SP" -o $OPTS,volatile
[[ $(cat "$M/v/f7") == v7 ]] && grep -qx "boot_id $BOOT" "$SP/volatile" &&
	ok "mark removed by hand: recovered, marked again" ||
	fail "recovery after removing the mark: $(ls "$SP")"
echo after >"$M/v/after"
crash "$M"
# A recovery without volatile flushes the spool, then drops the mark.
stage_mount "$IMG" "$M" --recover "$SP" -o $OPTS
[[ $(cat "$M/v/after") == after && ! -e $SP/volatile ]] &&
	ok "recovered without volatile: spool flushed and unmarked" ||
	fail "recovery without volatile: $(ls "$SP")"
# Four mounts of this spool, each given the options again: one copy kept.
dups=$(sort "$SP/options" | uniq -d)
[[ -z $dups ]] && ok "spool options after 4 recoveries: $(paste -sd, "$SP/options")" ||
	fail "spool options repeated after 4 recoveries: $dups"
rm -r "$M/v"
touch -r "$SRC" "$M"
"$SEAL" --quiet "$M" || fail "seal of test 7"
wait_daemon 0
[[ $(sha256sum <"$IMG" | cut -d' ' -f1) == "$REF" && ! -d $SP ]] &&
	ok "volatile: image equals sqfs-pack's, spool removed" ||
	fail "volatile: image differs from sqfs-pack's or spool left"

# --- 8: the options kept in the spool -------------------------------------------
# The mkfs_time came from SOURCE_DATE_EPOCH; the recovery runs without it
# and changes the block size: the rest is the first mount's.
mkdir -p "$WORK/o8"
IMG=$WORK/o8/o.sqfs
M=$WORK/m8
SOURCE_DATE_EPOCH=1600000000 stage_mount "$IMG" "$M" -o comp=gzip:1,all_root,block_size=4K,all_time=now
SP=$(spool_of "$IMG")
cp -a "$SRC/." "$M/"
crash "$M"
sleep 1	# a "now" of the recovery would differ
stage_mount "$IMG" "$M" --recover "$SP" -o block_size=8K
AT=$(sed -n 's/^all_time=//p' "$SP/options")
[[ -n $AT ]] && grep -q "options of the spool, before those given now: comp=gzip:1,all_root,block_size=4K,mkfs_time=1600000000,all_time=$AT" \
	"$WORK/daemon.log" && ok "recovery names the spool's options" || fail "no message naming the spool's options"
crash "$M"
# A second recovery keeps the block size given to the first.
# A damaged options file is refused, naming the line; nothing changes.
cp "$SP/options" "$WORK/o8/options.good"
printf 'suid\n' >>"$SP/options"
expect_exit 1 "options: 'suid': not an image option (the file is damaged)" \
	"$STAGE" -f --recover "$SP" "$IMG" "$M"
printf 'comp=gzip:1\nhello world\n' >"$SP/options"
expect_exit 1 "options: 'hello world': not an image option" "$STAGE" -f --recover "$SP" "$IMG" "$M"
# A value that is no good, alone or with the others, is damage as well.
printf 'comp=bogus\n' >"$SP/options"
expect_exit 1 "options: comp 'bogus': unknown compressor 'bogus'; nothing was changed" \
	"$STAGE" -f --recover "$SP" "$IMG" "$M"
printf 'comp=xz:dict=1M\nblock_size=512K\n' >"$SP/options"
expect_exit 1 "options: comp 'xz:dict=1M': xz dict must be 8K..block size" \
	"$STAGE" -f --recover "$SP" "$IMG" "$M"
# Whatever the spool holds, a bad option is a usage error, --help is help.
expect_exit 2 "unknown option" "$STAGE" -f --recover "$SP" -o bogus "$IMG" "$M"
expect_exit 0 "" "$STAGE" --recover "$SP" --help
expect_exit 2 "unknown option" "$STAGE" -f --recover "$WORK/o8/options.good" -o bogus "$IMG" "$M"
expect_exit 1 "options.good: not a writable directory" "$STAGE" -f --recover "$WORK/o8/options.good" "$IMG" "$M"
cp "$WORK/o8/options.good" "$SP/options"
stage_mount "$IMG" "$M" --recover "$SP"
touch -r "$SRC" "$M"
"$SEAL" --quiet "$M" || fail "seal of test 8"
wait_daemon 0
"$PACK" -q --mkfs-time 1600000000 --all-time "$AT" -c gzip:1 -b 8K --all-root "$SRC" "$WORK/ref8.sqfs"
cmp -s "$IMG" "$WORK/ref8.sqfs" && ok "recovered twice: the first mount's options, the block size given later" ||
	fail "options after recovery: $(unsquashfs -s "$IMG" 2>&1 | grep -E 'Compression|Block size|Creation' | tr '\n' ' ')"

# A missing options file: recovered with a warning that says what it means.
mkdir -p "$WORK/o8b"
IMG=$WORK/o8b/o.sqfs
M=$WORK/m8b
stage_mount "$IMG" "$M" -o comp=gzip:1
echo x >"$M/x"
SP=$(spool_of "$IMG")
crash "$M"
rm "$SP/options"
stage_mount "$IMG" "$M" --recover "$SP"
grep -q "options is missing: the image options are the defaults and those given now" "$WORK/daemon.log" &&
	ok "a missing options file is warned of" || fail "no warning for a missing options file"
"$SEAL" --quiet "$M" || fail "seal of test 8b"
wait_daemon 0

# --- 9: -o pseudo_file across a crash -------------------------------------------
# The definitions are kept in the spool: a recovery without the file (gone
# meanwhile) seals what the lost daemon would have, the entries the tree
# lost made again and the m definition applied; given again, a definition
# is not doubled, and the entries the recovered tree has draw no warning.
mkdir -p "$WORK/o9"
IMG=$WORK/o9/p.sqfs
M=$WORK/m9
printf 'dev d 755 0 0\ndev/null c 666 0 0 1 3\nx m 4755 3 4\n' >"$WORK/pseudo9.txt"
stage_mount "$IMG" "$M" -o "$OPTS,pseudo_file=$WORK/pseudo9.txt"
SP=$(spool_of "$IMG")
echo y >"$M/x"
chmod 644 "$M/x"
rm -r "$M/dev"
echo after >"$M/after"
crash "$M"
mv "$WORK/pseudo9.txt" "$WORK/pseudo9.away"
: >"$WORK/daemon.log"
stage_mount "$IMG" "$M" --recover "$SP"
[[ $(cat "$M/after") == after ]] || fail "pseudo_file across a crash: the tree was not recovered"
"$SEAL" --keep --quiet "$M" || fail "seal of test 9"
unsquashfs -lln "$IMG" >"$WORK/o9/list" 2>&1 || fail "unsquashfs -lln: $(cat "$WORK/o9/list")"
if grep -q "^crw-rw-rw- 0/0 .* 1, *3 .* squashfs-root/dev/null$" "$WORK/o9/list" &&
	grep -q "^-rwsr-xr-x 3/4 .* squashfs-root/x$" "$WORK/o9/list"; then
	ok "pseudo_file across a crash: the recovered seal made dev/null again and applied x's m"
else
	fail "pseudo_file across a crash: $(grep -E 'dev|/x$' "$WORK/o9/list" | tr '\n' ' ')"
fi
crash "$M"
mv "$WORK/pseudo9.away" "$WORK/pseudo9.txt"
: >"$WORK/daemon.log"
stage_mount "$IMG" "$M" --recover "$SP" -o "pseudo_file=$WORK/pseudo9.txt"
if [[ $(grep -c . "$SP/pseudo") == 3 ]] && ! grep -q "pseudo definition" "$WORK/daemon.log"; then
	ok "pseudo_file given again with --recover: kept once, no warnings"
else
	fail "pseudo_file given again with --recover: $(cat "$SP/pseudo" "$WORK/daemon.log" | tr '\n' ' ')"
fi
rm -r "$M/after" "$M/dev"
touch -r "$SRC" "$M"
"$SEAL" --quiet "$M" || fail "seal of test 9"
wait_daemon 0

# --- 10: a program still writing through the dead mount (passthrough) ------
# The kernel keeps a passthrough file's backing file open after the daemon
# dies, so an old descriptor still writes to the spool file.  Recovery takes
# what it holds then and gives the file a new inode: later writes go
# nowhere, and the image always equals what the recovered mount reads.
mkdir -p "$WORK/o10"
IMG=$WORK/o10/w.sqfs
M=$WORK/m10
T10=$WORK/t10
mkdir -p "$T10"
stage_mount "$IMG" "$M" -o $OPTS
head -c 400000 /dev/zero | tr '\0' a >"$M/z"
# writer: opens write-only (passthrough), then writes when told to
python3 - "$M/z" "$T10" <<'EOF' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY)
t = sys.argv[2]
def step(name, data, off):
    open(os.path.join(t, "ready-" + name), "w").close()
    while not os.path.exists(os.path.join(t, "go-" + name)):
        time.sleep(0.02)
    try:
        os.pwrite(fd, data, off)
    except OSError:
        pass
    open(os.path.join(t, "done-" + name), "w").close()
step("1", b"C" * 10, 100)           # before the recovery
step("2", b"D" * 65536, 65536)       # after it: a whole block of the file
EOF
WPID=$!
waitfor() { local i; for ((i = 0; i < 500; i++)); do [[ -e $1 ]] && return 0; sleep 0.02; done; return 1; }
waitfor "$T10/ready-1" || fail "the writer did not start"
SP=$(spool_of "$IMG")
kill -9 "$DPID"
wait "$DPID" 2>/dev/null || true
touch "$T10/go-1"
waitfor "$T10/done-1" || fail "the writer's first write hangs"
fusermount3 -u -z "$M" 2>/dev/null || true
stage_mount "$IMG" "$M" --recover "$SP" -o $OPTS
pt=$(getfattr --only-values -n user.sqfs-stage.status "$M" 2>/dev/null |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["passthrough"])')
if [[ $pt == True ]]; then
	grep -q "files were still open for writing through the dead mount" "$WORK/daemon.log" &&
		ok "a writer still open through the dead mount is told of" ||
		fail "no warning for a writer still open through the dead mount"
else
	log "note: passthrough is off here: the old descriptor fails instead"
fi
# the background compression takes the recovered file's blocks
for ((i = 0; i < 100; i++)); do
	getfattr --only-values -n user.sqfs-stage.status "$M" 2>/dev/null |
		python3 -c 'import json, sys; sys.exit(json.load(sys.stdin)["queued_files"] != 0)' && break
	sleep 0.1
done
touch "$T10/go-2"
waitfor "$T10/done-2" || fail "the writer's second write hangs"
wait "$WPID" 2>/dev/null || true
sha_mount=$(sha256sum <"$M/z" | cut -d' ' -f1)
"$SEAL" --quiet "$M" || fail "seal of test 10"
wait_daemon 0
sha_image=$(rdsquashfs -c z "$IMG" 2>/dev/null | sha256sum | cut -d' ' -f1)
[[ $sha_mount == "$sha_image" ]] && ok "the image holds what the recovered mount read" ||
	fail "the image differs from what the recovered mount read"

# --- 11: a journal emptied or overwritten: refused, nothing lost -------------
mkdir -p "$WORK/o11"
IMG=$WORK/o11/e.sqfs
M=$WORK/m11
stage_mount "$IMG" "$M" -o $OPTS
for i in $(seq 1 5); do echo "$i" >"$M/f$i"; done
"$SEAL" --keep --quiet "$M" || fail "seal of test 11"
echo 6 >"$M/f6"
SP=$(spool_of "$IMG")
crash "$M"
before=$(sha256sum <"$IMG")
ndata=$(ls "$SP/data" | wc -l)
for how in empty random; do
	if [[ $how == empty ]]; then : >"$SP/journal"; else head -c 4096 /dev/urandom >"$SP/journal"; fi
	expect_exit 1 "no batch of SPOOL/journal checks out" "$STAGE" -f --recover "$SP" "$IMG" "$M"
	mountpoint -q "$M" && fail "[$how journal] mounted an empty tree"
	[[ $(sha256sum <"$IMG") == "$before" && -d $SP && $(ls "$SP/data" | wc -l) == "$ndata" ]] &&
		ok "[$how journal] refused; IMAGE and the spool's data as they were" ||
		fail "[$how journal] IMAGE or the spool changed"
done
rm -rf "$SP"

finish
