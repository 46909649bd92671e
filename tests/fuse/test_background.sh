#!/bin/bash
# test_background.sh SQFS_STAGE SQFS_SEAL SQFS_PACK
#
# Background compression of closed files must be invisible in the result:
#   - after files close, the pool compresses their full blocks (the status
#     xattr shows stored blocks; the seal reports them as taken);
#   - reads return the written bytes while compression runs;
#   - overwrite, truncate, append, writes past the end, O_TRUNC rewrite and
#     fallocate after compression (short last blocks included) re-stage
#     only what changed, and the image is still
#     byte-identical to sqfs-pack of the final tree and to a mount with
#     -o no_background;
#   - writers racing with the compressor never leak stale blocks;
#   - a file removed or replaced while compressed is let go at once (its
#     spool file's space comes back as rm returns), and SPOOL/blocks starts
#     again when nothing in it is used;
#   - sqfs-seal --keep, then more changes, then a second seal;
#   - fragment blocks compressed by rehearsals before the seal are taken
#     where the tails are unchanged, and changes made after the last
#     rehearsal (edited in place at the same size, new, removed and renamed
#     small files) still give the image of sqfs-pack: fragment blocks are
#     keyed by their tails' digests, and an edit must clear the digest;
#   - a rehearsal that finds a staged file's data gone from the spool keeps
#     no digest of the zeros it read: the seal still fails naming the file.
set -euo pipefail
# shellcheck source=tests/fuse/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "$@"
PART=${SQFS_TEST_PART:-main}
need_loop
need_cmd getfattr sha256sum diff
MT=1700000000
COMP=xz:6
BS=64K

status() { getfattr --only-values -n user.sqfs-stage.status "$1" 2>/dev/null; }
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

# wait_idle MNT: until the background queue is empty and the thread idle.
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

# mkdata DIR: files of mixed sizes with compressible, random and zero blocks.
mkdata() {
	python3 - "$1" <<'EOF'
import os, random, sys
root = sys.argv[1]
r = random.Random(7)
os.makedirs(root, exist_ok=True)
for i in range(24):
    d = os.path.join(root, "d%d" % (i % 4))
    os.makedirs(d, exist_ok=True)
    size = r.choice([0, 10, 4095, 65536, 65536 * 5 + 123, 1 << 20, 3 << 20])
    words = b" ".join(r.choice([b"alpha", b"beta", b"gamma", b"delta"]) for _ in range(4000))
    buf = bytearray()
    while len(buf) < size:
        kind = r.randrange(3)
        if kind == 0:
            buf += words[: 65536]
        elif kind == 1:
            buf += r.randbytes(65536)
        else:
            buf += bytes(65536)
    with open(os.path.join(d, "f%02d" % i), "wb") as f:
        f.write(buf[:size])
EOF
}

# wait_rehearsed SECONDS: until a rehearsal saw the tree in $M as it is and
# the thread is idle, or the time is up; leaves the last status in st.
# Share of the CPU time idle since the previous call, in percent, in $idle_pct.
idle_prev=()
cpu_idle_sample() {
	local -a c
	local v total=0 idle
	read -r -a c </proc/stat	# cpu user nice system idle iowait irq softirq steal
	idle=$((c[4] + c[5]))
	for v in "${c[@]:1:8}"; do total=$((total + v)); done
	idle_pct=100
	if [[ ${#idle_prev[@]} -eq 2 && $total -gt ${idle_prev[1]} ]]; then
		idle_pct=$(((idle - idle_prev[0]) * 100 / (total - idle_prev[1])))
	fi
	idle_prev=("$idle" "$total")
}

# wait_idle_until SECS MAX PCT TEST: until TEST (a function of $st, the
# status) holds, for up to SECS seconds in which the CPUs were at least PCT%
# idle: load from outside the test (another suite, a busy CI host) extends
# the wait, up to MAX seconds, instead of failing it.  $idle_note says what
# was seen.
wait_idle_until() {
	local secs=$1 max=$2 pct=$3 test=$4 start=$SECONDS last=$SECONDS idle_s=0
	cpu_idle_sample
	while ((idle_s < secs && SECONDS - start < max)); do
		st=$(status "$M")
		"$test" && break
		sleep 0.1
		if ((SECONDS > last)); then
			cpu_idle_sample
			((idle_pct >= pct)) && idle_s=$((idle_s + SECONDS - last))
			last=$SECONDS
		fi
	done
	idle_note="after $((SECONDS - start)) s, $idle_s s of them with the CPUs at least $pct% idle"
	return 0
}

# Wait until a rehearsal is current, for up to SECS seconds in which the
# CPUs were at least 30% idle (the default rehearses from 15%), up to three
# times SECS in all.
rehearsal_current() { [[ $(field "$st" rehearsal_current) == True && $(field "$st" busy) == 0 ]]; }
wait_rehearsed() { wait_idle_until "$1" $((3 * $1)) 30 rehearsal_current; }

pack_ref() { # DIR -> sha256 of sqfs-pack's image
	"$PACK" -q --mkfs-time $MT -c $COMP -b $BS "$1" "$WORK/ref.sqfs"
	sha256sum <"$WORK/ref.sqfs" | cut -d' ' -f1
}

same_as() { # LABEL IMAGE SHA
	local sum
	sum=$(sha256sum <"$2" | cut -d' ' -f1)
	if [[ $sum == "$3" ]]; then ok "$1: sha256 equal to sqfs-pack"; else fail "$1: sha256 $sum, sqfs-pack $3"; fi
}

# mksmall: $SMALL, 400 small text files in 16 directories.
SMALL=$WORK/small
mksmall() {
	python3 - "$SMALL" <<-'EOF'
	import os, random, sys
	root = sys.argv[1]
	r = random.Random(11)
	words = [b"lorem", b"ipsum", b"dolor", b"sit", b"amet", b"consectetur"]
	for d in range(8):
	    for sub in ("", "sub"):
	        path = os.path.join(root, "dir%d" % d, sub)
	        os.makedirs(path, exist_ok=True)
	        for i in range(25):
	            n = r.randrange(100, 9000)
	            text = b" ".join(r.choice(words) for _ in range(n // 5))[:n]
	            with open(os.path.join(path, "t%02d.txt" % i), "wb") as f:
	                f.write(text + r.randbytes(r.randrange(0, 300)))
	EOF
	find "$SMALL" -exec touch -h -d @1650000000 {} +
}

# SQFS_TEST_PART=policy (meson's test_background_policy): only when
# rehearsals run by default, against the machine's idle time.  It runs alone
# (a test beside it would take the idle time it judges) and in the normal
# mode only: spinning processes beside an instrumented daemon only make it
# slow, and the rehearsals' code runs in the main part with -o prepack.
if [[ $PART == policy ]]; then
	mksmall
	REF=$(pack_ref "$SMALL")
	M=$WORK/mp
	# By default a rehearsal waits for the CPU to be at least half idle: none
	# while every CPU spins, one once they stop.
	BURN=()
	for ((i = 0; i < $(nproc); i++)); do
		(while :; do :; done) &
		BURN+=($!)
		daemon_add "$!"	# the cleanup stops them if the test dies
	done
	stage_mount "$WORK/g.sqfs" "$M" -o comp=$COMP,block_size=$BS,mkfs_time=$MT
	cp -a "$SMALL/." "$M/"
	find "$M" -exec touch -h -d @1650000000 {} +
	sleep 4	# four rehearsal intervals
	st=$(status "$M")
	kill "${BURN[@]}"
	wait "${BURN[@]}" 2>/dev/null || true	# 143: they were killed
	if [[ $(field "$st" rehearsals) == 0 && $(field "$st" rehearsals_deferred) -gt 0 ]]; then
		ok "default: rehearsals put off while the CPUs are busy ($(field "$st" rehearsals_deferred) times)"
	else
		fail "default: rehearsed with busy CPUs or never looked: $st"
	fi
	wait_rehearsed 60
	if [[ $(field "$st" rehearsal_current) == True && $(field "$st" prepacked_fragments) -gt 0 ]]; then
		ok "default: a rehearsal once the CPUs are idle"
	else
		fail "default: no rehearsal of idle CPUs $idle_note: $st"
	fi
	out=$("$SEAL" --json "$M")
	wait_daemon 0
	same_as "default rehearsals" "$WORK/g.sqfs" "$REF"

	# A producer that keeps the CPUs about 60% busy still gets rehearsals
	# (xz -dc | tar x and cp -a into the mount leave 20-25% idle): the default
	# waits for 15% idle, not for half.
	BURN=()
	for ((i = 0; i < $(nproc); i++)); do
		python3 -c '
import time
while True:
    t = time.monotonic()
    while time.monotonic() - t < 0.006:
        pass
    time.sleep(0.004)
' &
		BURN+=($!)
		daemon_add "$!"
	done
	stage_mount "$WORK/h.sqfs" "$M" -o comp=$COMP,block_size=$BS,mkfs_time=$MT
	cp -a "$SMALL/." "$M/"
	find "$M" -exec touch -h -d @1650000000 {} +
	# 30 s in which the machine was at least 25% idle: a busy CI host may
	# take what the spinners leave for a while (up to 120 s).
	rehearsed() { [[ $(field "$st" rehearsals) -gt 0 ]]; }
	wait_idle_until 30 120 25 rehearsed
	kill "${BURN[@]}"
	wait "${BURN[@]}" 2>/dev/null || true
	if [[ $(field "$st" rehearsals) -gt 0 ]]; then
		ok "default: rehearsed while the CPUs were 60% busy ($(field "$st" rehearsals_deferred) looks put off)"
	else
		fail "default: no rehearsal while the CPUs were 60% busy, $idle_note: $st"
	fi
	out=$("$SEAL" --json "$M")
	wait_daemon 0
	same_as "rehearsed beside a busy producer" "$WORK/h.sqfs" "$REF"
	finish
fi

SRC=$WORK/src
mkdata "$SRC"
find "$SRC" -exec touch -h -d @1650000000 {} +

# --- 1: closed files are compressed ahead of the seal --------------------
M=$WORK/m1
stage_mount "$WORK/a.sqfs" "$M" -o comp=$COMP,block_size=$BS,mkfs_time=$MT
cp -a "$SRC/." "$M/"
# Reads while the compressor runs return what was written.
if diff -r "$SRC" "$M" >/dev/null; then ok "reads during compression"; else fail "reads during compression differ"; fi
wait_idle "$M"
st=$(status "$M")
stored=$(field "$st" stored_blocks)
if [[ $stored -gt 0 ]]; then ok "background stored $stored blocks"; else fail "no block compressed in the background: $st"; fi
if diff -r "$SRC" "$M" >/dev/null; then ok "reads after compression"; else fail "reads after compression differ"; fi
# The status counts what the seal can still take: a removed copy's blocks go.
mkdir "$M/extra"
cp -a "$SRC/." "$M/extra/"
wait_idle "$M"
more=$(field "$(status "$M")" stored_blocks)
rm -r "$M/extra"
st=$(status "$M")
[[ $more -gt $stored && $(field "$st" stored_blocks) == "$stored" ]] &&
	ok "stored_blocks $stored, $more with a copy, $stored again once it is removed" ||
	fail "stored_blocks $stored, $more with a copy, after removing it: $st"
find "$M" -exec touch -h -d @1650000000 {} +
out=$("$SEAL" --json "$M")
wait_daemon 0
taken=$(field "$out" stored_blocks)
if [[ $taken -gt 0 ]]; then ok "seal took $taken stored blocks"; else fail "seal took no stored block: $out"; fi
REF=$(pack_ref "$SRC")
same_as "background" "$WORK/a.sqfs" "$REF"

# --- 2: the same tree with -o no_background -------------------------------
M=$WORK/m2
stage_mount "$WORK/b.sqfs" "$M" -o comp=$COMP,block_size=$BS,mkfs_time=$MT,no_background
cp -a "$SRC/." "$M/"
st=$(status "$M")
[[ $(field "$st" background) == False ]] && ok "no_background reports off" || fail "no_background: $st"
out=$("$SEAL" --json "$M")
wait_daemon 0
[[ $(field "$out" stored_blocks) == 0 ]] && ok "no_background: nothing stored" || fail "no_background stored blocks: $out"
same_as "no_background" "$WORK/b.sqfs" "$REF"

# --- 3: changes after compression, then --keep and a second seal ---------
# Each change is made to the mount and to a copy of the source alike.
M=$WORK/m3
COPY=$WORK/copy
# three files ending in a short data block that is not a hole
python3 - "$SRC/short" <<'EOF'
import os, sys
os.makedirs(sys.argv[1], exist_ok=True)
for i in range(3):
    with open(os.path.join(sys.argv[1], "g%d" % i), "wb") as f:
        f.write((b"line %d of a file with a short last block\n" % i) * 8000)
EOF
touch -h -d @1650000000 "$SRC/short" "$SRC"/short/*
cp -a "$SRC" "$COPY"
stage_mount "$WORK/c.sqfs" "$M" -o comp=$COMP,block_size=$BS,mkfs_time=$MT
cp -a "$SRC/." "$M/"
wait_idle "$M"
change() { # ROOT: the same edits, applied to ROOT
	python3 - "$1" <<'EOF'
import os, sys
root = sys.argv[1]
def p(*a): return os.path.join(root, *a)
# overwrite one block in the middle of a large file
with open(p("d3", "f03"), "r+b") as f:
    f.seek(65536 * 7 + 100); f.write(b"X" * 70000)
# shrink to a non-block boundary, then grow again with a hole
os.truncate(p("d1", "f05"), 65536 * 2 + 5)
os.truncate(p("d1", "f05"), 65536 * 9)
# append across a block boundary
with open(p("d2", "f06"), "ab") as f:
    f.write(os.urandom(1) * 0 + b"appended" * 20000)
# O_TRUNC rewrite with other content
with open(p("d0", "f00"), "wb") as f:
    f.write(b"rewritten\n" * 100000)
# files ending in a short data block, stored by the background: a write
# past the end leaving a gap (the old short block is a full one now), the
# same through a write-only (passthrough) open, and a same-size overwrite
# inside the short block
g = [p("short", "g%d" % i) for i in range(3)]
size = os.path.getsize(g[0])
assert size % 65536 > 100 and size > 65536
with open(g[0], "r+b") as f:
    f.seek(size + 200000); f.write(b"past the end")
fd = os.open(g[1], os.O_WRONLY)
os.pwrite(fd, b"past the end, write-only", size + 70000)
os.close(fd)
with open(g[2], "r+b") as f:
    f.seek(size - 50); f.write(b"short block edit")
# punch a hole (keep size)
fd = os.open(p("d3", "f07"), os.O_RDWR)
try:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    size = os.fstat(fd).st_size
    if size > 65536 * 3 and libc.fallocate(fd, 3, ctypes.c_long(65536), ctypes.c_long(65536 * 2)) != 0:
        raise OSError(ctypes.get_errno(), "fallocate")
finally:
    os.close(fd)
EOF
}
change "$COPY"
change "$M"
if diff -r "$COPY" "$M" >/dev/null; then ok "reads after changes"; else fail "reads after changes differ"; fi
wait_idle "$M"
find "$M" "$COPY" -exec touch -h -d @1650000000 {} +
"$SEAL" --keep --quiet "$M" || fail "seal --keep"
REF=$(pack_ref "$COPY")
same_as "changed after compression" "$WORK/c.sqfs" "$REF"
cp "$WORK/c.sqfs" "$WORK/c1.sqfs"
# after --keep: a new file and another rewrite, then the final seal
head -c 3000000 /dev/urandom >"$COPY/late"
cp "$COPY/late" "$M/late"
printf 'again\n' >"$COPY/d0/f00"
printf 'again\n' >"$M/d0/f00"
find "$M" "$COPY" -exec touch -h -d @1650000000 {} +
"$SEAL" --quiet "$M" || fail "second seal"
wait_daemon 0
REF=$(pack_ref "$COPY")
same_as "second seal" "$WORK/c.sqfs" "$REF"
if loop_mount "$WORK/c.sqfs" "$WORK/k3"; then
	if diff -r "$COPY" "$WORK/k3" >/dev/null; then ok "kernel view of the second image"; else fail "kernel view differs"; fi
	loop_umount "$WORK/k3"
fi

# --- 4: writers racing with the compressor ---------------------------------
# Two processes keep rewriting random blocks of their own files while the
# compressor works on them (each close queues the file again), and apply the
# same operations to a shadow copy on disk; the image must match sqfs-pack
# of the shadow copy.
M=$WORK/m4
mkdir "$WORK/race"
stage_mount "$WORK/d.sqfs" "$M" -o comp=$COMP,block_size=$BS,mkfs_time=$MT,jobs=2
python3 - "$M" "$WORK/race" <<'EOF'
import os, random, sys, multiprocessing
roots = sys.argv[1:3]
BS = 65536
def writer(seed):
    r = random.Random(seed)
    for i in range(300):
        name = "race%d-%d" % (seed, r.randrange(2))
        op = r.randrange(10)
        size = r.randrange(BS * 40)
        off = r.randrange(BS * 30)
        data = r.randbytes(r.randrange(1, BS * 3)) if op < 5 else bytes([r.randrange(256)]) * r.randrange(1, BS * 3)
        for root in roots:
            path = os.path.join(root, name)
            with open(path, "r+b" if os.path.exists(path) else "w+b") as f:
                if op == 0:
                    f.truncate(size)
                else:
                    f.seek(off)
                    f.write(data)
ps = [multiprocessing.Process(target=writer, args=(s,)) for s in (1, 2)]
for p in ps: p.start()
for p in ps: p.join()
sys.exit(max(p.exitcode for p in ps))
EOF
if diff -r "$WORK/race" "$M" >/dev/null; then ok "racing writers: reads"; else fail "racing writers: reads differ"; fi
find "$M" "$WORK/race" -exec touch -h -d @1650000000 {} +
"$SEAL" --quiet "$M" || fail "seal after races"
wait_daemon 0
REF=$(pack_ref "$WORK/race")
same_as "racing writers" "$WORK/d.sqfs" "$REF"

# --- 4b: a file removed or replaced while it is compressed ------------------
# The compressor drops it at once: the spool file's space comes back as rm
# returns (as on a local file system), not after every block was compressed
# for nothing.  xz:6 on 96 MiB of text takes the pool tens of seconds.
M=$WORK/m4b
# no_prepack: a rehearsal's fragment blocks (of the 4-byte file below) may
# stay in SPOOL/blocks until the next rehearsal, which would make the size
# checked below depend on timing.
stage_mount "$WORK/d4b.sqfs" "$M" -o comp=$COMP,block_size=$BS,mkfs_time=$MT,no_prepack
held_deleted() { find "/proc/$DPID/fd" -lname '*(deleted)' 2>/dev/null | wc -l; }
for how in rm rename; do
	python3 - "$M/big" <<'EOF'
import sys
line = b"".join(b"row %d of a text that compresses\n" % k for k in range(4000))
with open(sys.argv[1], "wb") as f:
    for k in range(96 << 20 >> 17):
        f.write((line * 2)[k % 1000:][:1 << 17])
EOF
	for ((i = 0; i < 100; i++)); do
		[[ $(field "$(status "$M")" busy) == 1 ]] && break
		sleep 0.05
	done
	if [[ $how == rm ]]; then
		rm "$M/big"
	else
		printf 'new\n' >"$M/new" && mv "$M/new" "$M/big"
		# the kernel forgets the old inode, so the daemon drops its spool file
		echo 2 >/proc/sys/vm/drop_caches
	fi
	for ((i = 0; i < 200; i++)); do
		[[ $(held_deleted) == 0 && $(field "$(status "$M")" busy) == 0 ]] && break
		sleep 0.05
	done
	if [[ $(held_deleted) == 0 && $(field "$(status "$M")" busy) == 0 ]]; then
		ok "$how while compressed: the compressor let go within $((i * 50)) ms"
	else
		fail "$how while compressed: 10 s later the daemon still holds $(held_deleted) removed spool file(s), status $(status "$M")"
	fi
	rm -f "$M/big"
done
# Files compressed, then removed, one after another: SPOOL/blocks starts
# again once nothing in it is used, rather than growing with every block
# ever stored (up to the file size limit, where storing stopped for good).
STORE=$(echo "$WORK"/.d4b.sqfs.spool.*/blocks)
for round in 1 2 3 4; do
	python3 - "$M/f$round" "$round" <<'EOF'
import sys
r = int(sys.argv[2])
line = b"".join(b"round %d, row %d of a text\n" % (r, k) for k in range(60000))
with open(sys.argv[1], "wb") as f:
    f.write(line[: 4 << 20])
EOF
	wait_idle "$M"
	size=$(stat -c %s "$STORE")
	((round == 1)) && first=$size
	rm "$M/f$round"
done
if ((first > 0 && size <= first + 65536)); then
	ok "SPOOL/blocks: $size bytes after four files stored and removed in turn (one: $first)"
else
	fail "SPOOL/blocks grew to $size bytes over four files stored and removed in turn (one: $first); status $(status "$M")"
fi
"$SEAL" --quiet "$M" || fail "seal after removals"
wait_daemon 0

# --- 5: fragment blocks compressed before the seal --------------------------
M=$WORK/m5
mksmall
# -o prepack: rehearsals whatever the CPU is doing.
stage_mount "$WORK/e.sqfs" "$M" -o comp=$COMP,block_size=$BS,mkfs_time=$MT,prepack
cp -a "$SMALL/." "$M/"
wait_rehearsed 30
pre=$(field "$st" prepacked_fragments)
if [[ $(field "$st" rehearsal_current) == True && $pre -gt 0 ]]; then
	ok "a rehearsal compressed $pre fragment blocks"
else
	fail "no rehearsal $idle_note: $st"
fi
# Changes in two directories, then the seal at once (most likely before
# the next rehearsal): the image must still be sqfs-pack's.
edit() { # ROOT
	python3 - "$1" <<'EOF'
import os, sys
root = sys.argv[1]
def p(*a): return os.path.join(root, *a)
with open(p("dir2", "t03.txt"), "r+b") as f:
    f.seek(50); f.write(b"CHANGED")
# the same size through a write-only open (passthrough: the kernel writes
# the spool file itself): the tail's digest must not survive it
fd = os.open(p("dir3", "t04.txt"), os.O_WRONLY)
os.pwrite(fd, b"WRITE-ONLY EDIT", 3)
os.close(fd)
with open(p("dir2", "new.txt"), "wb") as f:
    f.write(b"a new small file\n" * 40)
os.unlink(p("dir5", "sub", "t07.txt"))
os.rename(p("dir5", "t01.txt"), p("dir5", "sub", "zz.txt"))
EOF
}
edit "$SMALL"
edit "$M"
find "$M" "$SMALL" -exec touch -h -d @1650000000 {} +
out=$("$SEAL" --json "$M")
wait_daemon 0
REF=$(pack_ref "$SMALL")
same_as "fragments compressed before the seal, then changes" "$WORK/e.sqfs" "$REF"
took=$(field "$out" stored_fragments)
all=$(field "$out" fragments)
if [[ $took -gt 0 && $took -le $all ]]; then
	ok "the seal took $took of $all fragment blocks as rehearsed"
else
	fail "the seal took $took of $all fragment blocks: $out"
fi
if loop_mount "$WORK/e.sqfs" "$WORK/k5"; then
	if diff -r "$SMALL" "$WORK/k5" >/dev/null; then ok "kernel view of the rehearsed image"; else fail "kernel view differs"; fi
	loop_umount "$WORK/k5"
fi

# --- 6: a spool file removed by hand ----------------------------------------
# A rehearsal that finds a staged file's data gone reads zeros.  It must not
# keep their digest as the file's tail: the seal would then take the block
# made of zeros without reading the file, and publish an image with zeros.
M=$WORK/m6
stage_mount "$WORK/gone.sqfs" "$M" -o comp=$COMP,block_size=$BS,mkfs_time=$MT,prepack
cp -a "$SMALL/." "$M/"
wait_rehearsed 30
# Right after a rehearsal: the next is at least a second away.
echo "its spool file goes" >"$M/dir4/victim"
spool=$(ls -d "$WORK"/.gone.sqfs.spool.* | sed -n 1p)
vino=$(stat -c %i "$M/dir4/victim")
mv "$spool/data/$vino" "$WORK/victim.data"
runs=$(field "$(status "$M")" rehearsals)
for ((i = 0; i < 300; i++)); do
	st=$(status "$M")
	[[ $(field "$st" rehearsals) -gt $runs && $(field "$st" rehearsal_current) == True ]] && break
	sleep 0.1
done
[[ $(field "$st" rehearsal_current) == True ]] || fail "no rehearsal of the file without data: $st"
if "$SEAL" --keep --quiet "$M" 2>"$WORK/err"; then
	fail "sealed a staged file whose data is gone (a rehearsal kept the digest of zeros)"
elif grep -q "/dir4/victim: opening: No such file" "$WORK/err"; then
	ok "a rehearsal of a file without data keeps no digest: the seal names it ($(head -n 1 "$WORK/err"))"
else
	fail "seal without the data: $(cat "$WORK/err")"
fi
mv "$WORK/victim.data" "$spool/data/$vino"
"$SEAL" --quiet "$M" || fail "seal once the data is back"
wait_daemon 0
if loop_mount "$WORK/gone.sqfs" "$WORK/k6"; then
	[[ $(cat "$WORK/k6/dir4/victim") == "its spool file goes" ]] &&
		ok "the file's data in the image once back" || fail "dir4/victim in the image: $(od -c "$WORK/k6/dir4/victim" | head -n 2)"
	loop_umount "$WORK/k6"
fi

# -o prepack_max=N: no rehearsal while more than N inodes are staged (each
# copies the tree, and the daemon must stay within its memory target); once
# the tree is that small again, rehearsals come back.
stage_mount "$WORK/i.sqfs" "$M" -o comp=$COMP,block_size=$BS,mkfs_time=$MT,prepack,prepack_max=100
cp -a "$SMALL/." "$M/"
wait_idle "$M"	# a rehearsal may have begun while there were few
st0=$(status "$M")
sleep 3	# three rehearsal intervals
st=$(status "$M")
if [[ $(field "$st" rehearsals) == "$(field "$st0" rehearsals)" &&
	$(field "$st" rehearsals_too_big) -gt $(field "$st0" rehearsals_too_big) &&
	$(field "$st" rehearsal_current) == False ]]; then
	ok "prepack_max=100: no rehearsal of $(find "$M" | wc -l) inodes ($(field "$st" rehearsals_too_big) looks)"
else
	fail "prepack_max=100: rehearsed $(find "$M" | wc -l) inodes or never looked: $st0 then $st"
fi
grep -q "inodes staged, more than prepack_max=100: no more rehearsals" "$WORK/daemon.log" &&
	ok "prepack_max: logged" || fail "prepack_max: nothing in the daemon log"
SMALLER=$WORK/smaller
mkdir -p "$SMALLER"
cp -a "$SMALL/dir0" "$SMALLER/"
rm -r "$M"/dir[1-7]
find "$M" "$SMALLER" -exec touch -h -d @1650000000 {} +
wait_rehearsed 30
if [[ $(field "$st" rehearsal_current) == True && $(field "$st" prepacked_fragments) -gt 0 ]]; then
	ok "prepack_max=100: rehearsed once $(find "$M" | wc -l) inodes were left"
else
	fail "prepack_max=100: no rehearsal of a small tree $idle_note: $st"
fi
out=$("$SEAL" --json "$M")
wait_daemon 0
same_as "rehearsals after the tree shrank" "$WORK/i.sqfs" "$(pack_ref "$SMALLER")"
"$STAGE" -o prepack_max=lots "$WORK/j.sqfs" "$WORK/nomount" 2>"$WORK/err" && fail "prepack_max=lots accepted"
grep -q "prepack_max: give a number of inodes" "$WORK/err" && ok "prepack_max=lots refused: $(cat "$WORK/err" | head -n 1)" ||
	fail "prepack_max=lots: $(cat "$WORK/err")"

# -o no_prepack: no rehearsal however long the tree rests, the same image.
stage_mount "$WORK/f.sqfs" "$M" -o comp=$COMP,block_size=$BS,mkfs_time=$MT,no_prepack
cp -a "$SMALL/." "$M/"
find "$M" -exec touch -h -d @1650000000 {} +
wait_idle "$M"
sleep 3	# three rehearsal intervals
st=$(status "$M")
if [[ $(field "$st" rehearsals) == 0 && $(field "$st" prepacked_fragments) == 0 ]]; then
	ok "no rehearsal with -o no_prepack"
else
	fail "-o no_prepack rehearsed: $st"
fi
out=$("$SEAL" --json "$M")
wait_daemon 0
same_as "-o no_prepack" "$WORK/f.sqfs" "$REF"
if [[ $(field "$out" stored_fragments) == 0 ]]; then
	ok "-o no_prepack: every fragment block compressed at the seal"
else
	fail "-o no_prepack: the seal found stored fragment blocks: $out"
fi

finish
