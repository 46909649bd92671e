#!/bin/bash
# test_uring.sh SQFS_STAGE SQFS_SEAL SQFS_PACK NORING
#
# FUSE over io_uring (Linux 6.14 and later, fuse parameter enable_uring):
# the daemon takes requests through one ring per CPU.  The test turns the
# parameter on for its own mounts and puts the old value back.
#   - the status xattr counts requests answered through the rings, and none
#     with -o no_uring or with the parameter off;
#   - the same operations (every request type the stage serves, 1 MiB
#     writes and reads through the daemon, a 3000-entry directory, xattrs,
#     devices, hard links, renames, truncation), made from both CPUs at
#     once, seal to the same bytes through the rings and without them, and
#     the kernel reads the image back equal to a copy made on ext4/tmpfs;
#   - SIGTERM ends a daemon whose rings are live, and its image is sealed;
#   - a seal asked for through a ring starts no thread pinned to its CPU;
#   - the kernel keeps symlink targets: reading one 300 times makes one
#     READLINK, not 300 (counted by the rings' request counter);
#   - the seal's answer reaches sqfs-seal before the daemon writes the
#     journal again (a ring answers once the handler returns);
#   - a seal does not hold up its ring: it waits for a close made on its
#     CPU, and makes a pseudo entry again while a create from that CPU
#     waits in its directory;
#   - io_uring refused (NORING: seccomp) leaves the mount on /dev/fuse, not
#     hung; under taskset -c 0 no ring thread runs elsewhere.
set -euo pipefail
# shellcheck source=tests/fuse/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "$@"
NORING=${4:-}
[[ -x $NORING ]] || { log "FAIL: give the noring helper (build/tests/fuse/noring) as the fourth argument"; exit 1; }
need_loop
need_cmd getfattr cmp taskset strace
PARAM=/sys/module/fuse/parameters/enable_uring
MT=1700000000
OPTS=comp=zstd:3,block_size=64K,mkfs_time=$MT,all_time=$MT,suid,dev

[[ -w $PARAM ]] || skip_or_fail "FUSE over io_uring needs Linux 6.14 with CONFIG_FUSE_IO_URING ($PARAM is missing)"
OLD=$(cat "$PARAM")
restore() {
	local rc=$?
	# (exit "$rc") below must not end this shell before the cleanup
	set +e
	echo "$OLD" >"$PARAM" 2>/dev/null || true
	(exit "$rc")
	cleanup
}
trap restore EXIT

status() { getfattr --only-values -n user.sqfs-stage.status "$1" 2>/dev/null; }
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

# The workload: one process a CPU, each on its own subtree, then a shared
# big directory from both at once.
workload() {
	local root=$1 direct=$2 cpu pids=()
	for cpu in 0 1; do
		if ! taskset -c "$cpu" true 2>/dev/null; then
			cpu=0
		fi
		taskset -c "$cpu" python3 - "$root" "$cpu" "$direct" <<'EOF' &
import os, stat, sys
root, cpu, direct = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
d = os.path.join(root, "cpu" + cpu)
os.makedirs(os.path.join(d, "sub", "deep"))
big = bytes((i * 7 + int(cpu)) % 251 for i in range(1 << 20))
# read-write opens stay with the daemon: 1 MiB writes and reads as payload
with open(os.path.join(d, "rw.bin"), "w+b") as f:
    for i in range(5):
        f.write(big)
    f.seek(1 << 20)
    assert f.read(1 << 20) == big
    f.truncate(3 * (1 << 20) + 4097)
# O_DIRECT goes through the daemon too (the reference may not take it)
fd = os.open(os.path.join(d, "direct.bin"),
             os.O_CREAT | os.O_WRONLY | (os.O_DIRECT if direct else 0), 0o644)
import mmap
m = mmap.mmap(-1, 1 << 20)
m.write(big)
os.write(fd, m)
os.close(fd)
for i in range(200):
    with open(os.path.join(d, "sub", "f%03d" % i), "wb") as f:
        f.write(big[: i * 97])
os.symlink("sub/f001", os.path.join(d, "link"))
os.link(os.path.join(d, "sub", "f002"), os.path.join(d, "hard"))
os.mkfifo(os.path.join(d, "fifo"))
os.mknod(os.path.join(d, "null"), stat.S_IFCHR | 0o666, os.makedev(1, 3))
os.chmod(os.path.join(d, "sub", "f003"), 0o4755)
os.chown(os.path.join(d, "sub", "f004"), 1234, 5678)
os.setxattr(os.path.join(d, "sub", "f005"), "user.k", b"v" * 300)
os.setxattr(os.path.join(d, "sub", "f005"), "user.gone", b"x")
os.removexattr(os.path.join(d, "sub", "f005"), "user.gone")
assert os.getxattr(os.path.join(d, "sub", "f005"), "user.k") == b"v" * 300
assert "user.k" in os.listxattr(os.path.join(d, "sub", "f005"))
os.rename(os.path.join(d, "sub", "f006"), os.path.join(d, "sub", "deep", "moved"))
os.unlink(os.path.join(d, "sub", "f007"))
os.truncate(os.path.join(d, "sub", "f008"), 10)
os.utime(os.path.join(d, "sub", "f009"), (1, 2))
assert os.readlink(os.path.join(d, "link")) == "sub/f001"
assert len(os.listdir(os.path.join(d, "sub"))) == 199
st = os.statvfs(root)
assert st.f_bsize > 0
for i in range(1500):
    open(os.path.join(root, "shared", "c%s-%04d" % (cpu, i)), "w").close()
EOF
		pids+=($!)
	done
	local p rc=0
	for p in "${pids[@]}"; do
		wait "$p" || rc=1
	done
	[[ $(find "$root/shared" -type f | wc -l) -eq 3000 ]] || rc=1
	return $rc
}

# run_into ROOT [DIRECT]: the shared directory exists before the writers start.
run_into() {
	mkdir "$1/shared"
	workload "$1" "${2-1}"
}

echo Y >"$PARAM"

# --- 1: through the rings, and with -o no_uring -------------------------
for mode in uring no_uring; do
	M=$WORK/m-$mode
	opts=$OPTS
	[[ $mode == no_uring ]] && opts+=,no_uring
	stage_mount "$WORK/$mode.sqfs" "$M" -o "$opts"
	if run_into "$M"; then ok "$mode: workload"; else fail "$mode: workload"; fi
	served=$(field "$(status "$M")" uring_requests)
	if [[ $mode == uring ]]; then
		if ((served > 1000)); then ok "uring: $served requests through the rings"
		else fail "uring: only $served requests through the rings"; fi
	else
		if ((served == 0)); then ok "no_uring: no request through a ring"
		else fail "no_uring: $served requests through the rings"; fi
	fi
	"$SEAL" -q "$M" || fail "$mode: seal"
	wait_daemon 0
done
if cmp -s "$WORK/uring.sqfs" "$WORK/no_uring.sqfs"; then
	ok "the rings and /dev/fuse seal the same bytes"
else
	fail "images differ between the rings and /dev/fuse"
fi

# The kernel's view against the same operations on a local file system.
REF=$WORK/ref
mkdir -p "$REF"
run_into "$REF" 0 || fail "reference workload"
find "$REF" -exec touch -h -d @$MT {} +
loop_mount "$WORK/uring.sqfs" "$WORK/k"
tree_cmp "$REF" "$WORK/k" "local copy vs kernel view of the ring-staged image"
loop_umount "$WORK/k"

# --- 2: the parameter off: no rings, same answers -----------------------
echo N >"$PARAM"
M=$WORK/m-off
stage_mount "$WORK/off.sqfs" "$M" -o "$OPTS"
run_into "$M" || fail "parameter off: workload"
served=$(field "$(status "$M")" uring_requests)
((served == 0)) && ok "parameter off: no ring" || fail "parameter off: $served requests through rings"
"$SEAL" -q "$M" || fail "parameter off: seal"
wait_daemon 0
cmp -s "$WORK/uring.sqfs" "$WORK/off.sqfs" && ok "parameter off: same bytes" ||
	fail "parameter off: image differs"
echo Y >"$PARAM"

# --- 3: SIGTERM with live rings ------------------------------------------
M=$WORK/m-term
stage_mount "$WORK/term.sqfs" "$M" -o "$OPTS"
echo data >"$M/file"
served=$(field "$(status "$M")" uring_requests)
((served > 0)) || fail "SIGTERM case: the rings are not in use"
kill -TERM "$DPID"
wait_daemon 0
if [[ -s $WORK/term.sqfs ]] && unsquashfs -cat "$WORK/term.sqfs" file 2>/dev/null | grep >/dev/null -x data; then
	ok "SIGTERM: daemon ended, image sealed"
else
	fail "SIGTERM: no sealed image"
fi
mountpoint -q "$M" && fail "SIGTERM: still mounted"

# --- 4: the seal's threads are free to use every CPU ----------------------
# A ring's thread is pinned to its CPU, and a seal requested through it
# starts the writer's threads: they must not inherit the pin.
M=$WORK/m-pin
stage_mount "$WORK/pin.sqfs" "$M" -o comp=xz:9,block_size=64K,jobs=2,no_background
# compressible, so that xz works on it for a few seconds
head -c $((9 << 20)) /dev/urandom | base64 >"$M/text"
((($(field "$(status "$M")" uring_requests)) > 0)) || fail "pin case: the rings are not in use"
all=$(awk '/^Cpus_allowed_list/ {print $2}' "/proc/$DPID/status")
before=" $(cd /proc/"$DPID"/task && echo *) "
taskset -c 0 "$SEAL" -q --keep "$M" &
spid=$!
seen=0 pinned=0
while kill -0 "$spid" 2>/dev/null; do
	for t in /proc/"$DPID"/task/*; do
		# the threads the seal started
		[[ $before == *" ${t##*/} "* ]] && continue
		mask=$(awk '/^Cpus_allowed_list/ {print $2}' "$t/status" 2>/dev/null) || continue
		seen=$((seen + 1))
		[[ $mask == "$all" ]] || pinned=$((pinned + 1))
	done
	sleep 0.05
done
wait "$spid" || fail "pin case: seal"
if ((seen > 0 && pinned == 0)); then
	ok "the seal's threads may use CPUs $all ($seen looks)"
else
	fail "$pinned of $seen looks at the seal's threads found one pinned (allowed: $all)"
fi
fusermount3 -u "$M"
wait_daemon 0

# --- 5: symlink targets stay in the kernel --------------------------------
M=$WORK/m-link
stage_mount "$WORK/link.sqfs" "$M" -o "$OPTS"
mkdir "$M/usr"
ln -s usr/lib "$M/lib"
before=$(field "$(status "$M")" uring_requests)
python3 -c 'import os, sys
for _ in range(300):
    assert os.readlink(sys.argv[1] + "/lib") == "usr/lib"' "$M"
after=$(field "$(status "$M")" uring_requests)
n=$((after - before))
((before > 0 && n < 30)) && ok "300 readlinks: $n requests to the daemon" ||
	fail "300 readlinks: $n requests to the daemon (the kernel does not keep the target)"
"$SEAL" -q "$M" || fail "symlink case: seal"
wait_daemon 0
[[ $(unsquashfs -llc "$WORK/link.sqfs" 2>/dev/null | grep -c ' squashfs-root/lib -> usr/lib$') == 1 ]] &&
	ok "symlink sealed" || fail "symlink not in the image"

# --- 6: the seal's answer does not wait for the journal's rewrite ----------
# After answering, the seal writes the journal again from the tree (made
# durable, then renamed over SPOOL/journal).  A ring sends its answers when
# the handler returns, so the answer has to be sent before that work, or
# sqfs-seal waits for it too (27 ms at 62 399 inodes).
M=$WORK/m-jnl
stage_mount "$WORK/jnl.sqfs" "$M" -o "$OPTS"
python3 -c 'import os, sys
for d in range(40):
    p = os.path.join(sys.argv[1], "d%02d" % d)
    os.mkdir(p)
    for i in range(500):
        open(os.path.join(p, "f%03d" % i), "w").close()' "$M"
((($(field "$(status "$M")" uring_requests)) > 0)) || fail "journal case: the rings are not in use"
# The ring's thread that serves the seal: with the answer sent first, its
# last io_uring_enter before the rename is a bare submit (flags 0), not
# the wait that brought it the seal request.
strace -f -e trace=rename,io_uring_enter -p "$DPID" -o "$WORK/jnl.strace" 2>/dev/null &
sp=$!
for ((i = 0; i < 200; i++)); do
	! grep -qs '^TracerPid:[[:space:]]*0$' /proc/"$DPID"/task/*/status && break
	sleep 0.05
done
"$SEAL" -q --keep "$M" || fail "journal case: seal"
sleep 0.5
kill -INT $sp
wait $sp 2>/dev/null || true
before=$(awk '/rename\(.*journal\.new/ { print last[$1]; exit }
	/io_uring_enter\(/ { last[$1] = $0 }' "$WORK/jnl.strace")
if [[ -z $before ]]; then
	fail "journal case: no rewrite of the journal traced after a ring's call: $(head -c 300 "$WORK/jnl.strace")"
elif [[ $before =~ io_uring_enter\([0-9]+,\ [1-9][0-9]*,\ 0,\ 0, ]]; then
	ok "the seal's answer went to the kernel before the journal of 20 041 inodes was written again"
else
	fail "the journal was written again before the seal's answer went: the ring's last call was $before"
fi
fusermount3 -u "$M"
wait_daemon 0

# --- 7: a seal beside a ring's requests ------------------------------------
# Requests queue on the ring of their caller's CPU, and a seal served by
# that ring's thread held it up: a close from that CPU while the seal
# waited for it never came (the seal failed after 5 s), and a create
# waiting in the directory of a pseudo entry the seal made again hung the
# mount for good.  Everything here runs on CPU 0.
printf 'pd d 755 0 0\npd/node c 600 0 0 1 3\n' >"$WORK/ring.pseudo"
M=$WORK/m-beside
stage_mount "$WORK/beside.sqfs" "$M" -o "comp=xz:6,no_background,pseudo_file=$WORK/ring.pseudo"
seal_waits_for_close "$M" "$WORK/beside.sqfs" "rings" taskset -c 0
((($(field "$(status "$M")" uring_requests)) > 0)) || fail "beside case: the rings are not in use"
seal_during_create "$M" "rings" taskset -c 0
fusermount3 -u "$M"
wait_daemon 0

# --- 8: rings refused (io_uring_disabled, a container's seccomp profile) ---
# The rings are made before the INIT answer offers them: refused, the
# answer does not offer them and the mount works through /dev/fuse (once
# offered, the kernel holds every request until each CPU's ring has an
# entry: every call into the mount hung).
M=$WORK/m-noring
mkdir -p "$M"
: >"$WORK/daemon.log"
"$NORING" "$STAGE" -f -o "$OPTS" "$WORK/noring.sqfs" "$M" >>"$WORK/daemon.log" 2>&1 &
DPID=$!
daemon_add "$DPID"
MOUNTS+=("$M")
# Not mountpoint(1): a stat of a hung mount waits uninterruptibly.
for ((i = 0; i < 200; i++)); do
	grep -q " $M fuse" /proc/mounts && break
	daemon_alive "$DPID" || break
	sleep 0.05
done
sh -c 'echo data >"$1/file" && ls "$1" >/dev/null' sh "$M" &
probe=$!
for ((i = 0; i < 200; i++)); do daemon_alive "$probe" || break; sleep 0.05; done
if daemon_alive "$probe"; then
	fuse_abort "$M"	# the only way to free a caller held for rings
fi
rc=0
wait "$probe" || rc=$?
if ((rc == 0)) && grep -q "FUSE over io_uring is off (Operation not permitted); requests go through /dev/fuse" \
		"$WORK/daemon.log"; then
	ok "io_uring refused: the mount answers through /dev/fuse, and says so"
	served=$(field "$(status "$M")" uring_requests)
	((served == 0)) || fail "io_uring refused: $served requests through rings"
	"$SEAL" -q "$M" || fail "io_uring refused: seal"
	wait_daemon 0
	[[ $(unsquashfs -cat "$WORK/noring.sqfs" file 2>/dev/null) == data ]] ||
		fail "io_uring refused: the image lacks the file"
else
	fail "io_uring refused: the mount did not answer within 10 s (exit $rc): $(tail -n 3 "$WORK/daemon.log")"
fi

# --- 9: the rings' threads keep to the CPUs the daemon was given ----------
if taskset -c 1 true 2>/dev/null; then
	M=$WORK/m-taskset
	mkdir -p "$M"
	taskset -c 0 "$STAGE" -f -o "$OPTS" "$WORK/taskset.sqfs" "$M" >>"$WORK/daemon.log" 2>&1 &
	DPID=$!
	daemon_add "$DPID"
	MOUNTS+=("$M")
	for ((i = 0; i < 200; i++)); do mountpoint -q "$M" && break; daemon_alive "$DPID" || break; sleep 0.05; done
	taskset -c 1 sh -c 'echo one >"$1/one"' sh "$M"
	taskset -c 0 sh -c 'echo zero >"$1/zero"' sh "$M"
	wide=$(grep -l "^Cpus_allowed_list:[[:space:]]*[^0[:space:]]\|^Cpus_allowed_list:.*[,-]" \
		/proc/"$DPID"/task/*/status 2>/dev/null | wc -l || true)
	served=$(field "$(status "$M")" uring_requests)
	if ((wide == 0 && served > 0)); then
		ok "taskset -c 0: every thread of the daemon, ring threads too, stays on CPU 0 ($served requests through rings)"
	else
		fail "taskset -c 0: $wide threads allowed elsewhere: $(grep -H Cpus_allowed_list /proc/"$DPID"/task/*/status | tr '\n' ' '); $served requests through rings"
	fi
	"$SEAL" -q "$M" || fail "taskset -c 0: seal"
	wait_daemon 0
	[[ $(unsquashfs -cat "$WORK/taskset.sqfs" one 2>/dev/null) == one ]] ||
		fail "taskset -c 0: the image lacks the file written from CPU 1"
fi

finish
