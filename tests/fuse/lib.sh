# shellcheck shell=bash
# lib.sh: helpers shared by the FUSE tests.  Source it after `set -euo pipefail`.
#
# Every test takes the tools as arguments: SQFS_STAGE SQFS_SEAL SQFS_PACK.
# Exit codes: 0 pass, 1 fail, 77 skip.  A missing capability (root,
# /dev/fuse, a loop device, a reader) is a skip, except with CI=true, where
# it is a failure so that CI can never pass by skipping.

export LC_ALL=C
FUSE_TESTS_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
STAGE= SEAL= PACK= WORK=
MOUNTS=()	# FUSE mountpoints to unmount on exit
LOOPS=()	# kernel mounts to unmount on exit
DAEMONS=()	# daemons to stop on exit, as PID:START (daemon_add)
FAILURES=0
DPID=

log() { printf '%s\n' "$*" >&2; }

# proc_start PID: the process's start time (clock ticks since boot), which
# with its pid names it for good; fails if there is no such process.
proc_start() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	# after "PID (COMM) ", whose COMM may hold spaces: field 22 is the 20th
	s=${s##*) }
	# shellcheck disable=SC2086
	set -- $s
	[[ -n ${20-} ]] && echo "${20}"
}

# daemon_add PID: stop PID at exit if it is still that process.  A pid is
# free again once its process is reaped (bash reaps background jobs as they
# end), and with pid_max at 32768 (a 2-CPU machine) the suite goes round
# the pids in minutes: the pid of a daemon that ended early can by the end
# be another test's daemon, and a plain kill of it unmounted that test's
# tree in the middle of its checks (seen in CI: "Transport endpoint is not
# connected", then "not a sqfs-stage mount").
daemon_add() {
	local st
	st=$(proc_start "$1") && DAEMONS+=("$1:$st")
	return 0
}

# daemon_alive PID: PID is running and, if daemon_add took it, is still the
# process it took (a zombie counts as gone).
daemon_alive() {
	local d st state
	st=$(proc_start "$1") || return 1
	state=$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ $state != Z ]] || return 1
	for d in "${DAEMONS[@]}"; do
		[[ ${d%%:*} != "$1" ]] || [[ ${d#*:} == "$st" ]] || return 1
	done
	return 0
}

skip_or_fail() {
	if [[ ${CI-} == true ]]; then
		log "FAIL: $* (missing capability is a failure when CI=true)"
		exit 1
	fi
	log "SKIP: $*"
	exit 77
}

need_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || skip_or_fail "command '$c' not found"
	done
}

need_root() { [[ $(id -u) -eq 0 ]] || skip_or_fail "needs root"; }

need_fuse() {
	[[ -c /dev/fuse ]] || skip_or_fail "/dev/fuse is missing"
	need_cmd fusermount3
}

need_loop() {
	need_root
	need_cmd losetup mount umount
	if ! grep -qw squashfs /proc/filesystems; then
		modprobe squashfs >/dev/null 2>&1 || true
		grep -qw squashfs /proc/filesystems || skip_or_fail "no squashfs in the kernel"
	fi
	losetup -f >/dev/null 2>&1 || skip_or_fail "no free loop device"
}

# fail MESSAGE: record a failure and go on.
fail() {
	log "FAIL: $*"
	FAILURES=$((FAILURES + 1))
}

ok() { log "ok: $*"; }

# expect_exit CODE PATTERN CMD...: exit status and a message on stderr
# (PATTERN a grep regex; empty: any message).
expect_exit() {
	local want=$1 pat=$2 rc=0
	shift 2
	"$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
	if [[ $rc -ne $want ]]; then
		fail "$*: exit $rc, expected $want ($(cat "$WORK/err"))"
	elif [[ -n $pat ]] && ! grep -q -- "$pat" "$WORK/err"; then
		fail "$*: message '$(cat "$WORK/err")' lacks '$pat'"
	else
		ok "$*: exit $want: $(head -n1 "$WORK/err" 2>/dev/null)"
	fi
}

# start_test "$@": the three tools, $WORK, the cleanup trap.
start_test() {
	if [[ $# -lt 3 ]]; then
		log "usage: $0 SQFS_STAGE SQFS_SEAL SQFS_PACK"
		exit 1
	fi
	STAGE=$(realpath -- "$1") SEAL=$(realpath -- "$2") PACK=$(realpath -- "$3")
	local t
	for t in "$STAGE" "$SEAL" "$PACK"; do
		[[ -x $t ]] || { log "FAIL: '$t' is not an executable"; exit 1; }
	done
	need_root
	need_fuse
	need_cmd python3
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/sqfs-fuse-test.XXXXXX")
	# Debian's python3 first in PATH when there is one: a version manager's
	# shim (pyenv) costs 0.15 s a call, and the tests make hundreds of them.
	if [[ -x /usr/bin/python3 ]]; then
		mkdir "$WORK/bin"
		ln -s /usr/bin/python3 "$WORK/bin/python3"
		PATH=$WORK/bin:$PATH
	fi
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

cleanup() {
	local rc=$? i
	set +e
	for ((i = ${#LOOPS[@]} - 1; i >= 0; i--)); do
		umount "${LOOPS[i]}" 2>/dev/null || umount -l "${LOOPS[i]}" 2>/dev/null
	done
	for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
		# Unconditionally: mountpoint(1) fails on a dead FUSE mount
		# (ENOTCONN), which is the one most in need of detaching.
		fusermount3 -u -z "${MOUNTS[i]}" 2>/dev/null
	done
	local live=()
	for i in "${DAEMONS[@]}"; do
		[[ $(proc_start "${i%%:*}") != "${i#*:}" ]] || live+=("${i%%:*}")
	done
	if ((${#live[@]})); then
		kill "${live[@]}" 2>/dev/null
		sleep 0.2
		for i in "${live[@]}"; do
			daemon_alive "$i" && kill -9 "$i" 2>/dev/null
		done
	fi
	if [[ -n $WORK && -d $WORK ]]; then
		if [[ $rc -ne 0 && -s $WORK/daemon.log ]]; then
			log "--- daemon log ---"
			tail -n 50 "$WORK/daemon.log" >&2
		fi
		rm -rf -- "$WORK"
	fi
	exit "$rc"
}

# stage_mount IMAGE MNT [OPTIONS...]: start the daemon in the foreground
# (in the background of this shell); sets DPID.
stage_mount() {
	local img=$1 mnt=$2 i
	shift 2
	mkdir -p "$mnt"
	"$STAGE" -f "$@" "$img" "$mnt" >>"$WORK/daemon.log" 2>&1 &
	DPID=$!
	daemon_add "$DPID"
	MOUNTS+=("$mnt")
	for ((i = 0; i < 200; i++)); do
		if mountpoint -q "$mnt"; then
			return 0
		fi
		if ! daemon_alive "$DPID"; then
			break
		fi
		sleep 0.05
	done
	log "FAIL: sqfs-stage did not mount $mnt; the daemon's log ends:"
	tail -n 5 "$WORK/daemon.log" >&2
	exit 1
}

# wait_daemon [EXPECTED_STATUS]: wait for $DPID to exit; check its status.
# One still running after 30 s is a failure, and is killed: after a failed
# seal the daemon rightly stays (the tree is kept), and a plain wait would
# turn that failure into meson's timeout.
wait_daemon() {
	local want=${1-0} rc=0 i
	for ((i = 0; i < 600; i++)); do
		daemon_alive "$DPID" || break
		sleep 0.05
	done
	if daemon_alive "$DPID"; then
		fail "daemon $DPID still running 30 s after it should have exited; killed"
		# where it waits, for the log
		local t
		for t in /proc/"$DPID"/task/*; do
			log "  thread ${t##*/} $(cat "$t/comm" 2>/dev/null) state $(cut -d' ' -f3 "$t/stat" 2>/dev/null) in $(cat "$t/wchan" 2>/dev/null)"
			sed 's/^/    /' "$t/stack" 2>/dev/null | head -12 >&2 || true
		done
		kill -9 "$DPID" 2>/dev/null
		wait "$DPID" 2>/dev/null || true
		return 0
	fi
	wait "$DPID" || rc=$?
	if [[ $rc -ne $want ]]; then
		fail "daemon exited with $rc, expected $want"
	else
		ok "daemon exited with $rc"
	fi
}

# fuse_abort MNT: end a hung mount's connection (fusectl) and detach it,
# so that the test can go on.
fuse_abort() {
	local dev mounted=0
	dev=$(awk -v m="$1" '$5 == m { split($3, d, ":"); print d[2]; exit }' /proc/self/mountinfo)
	[[ -n $dev ]] || return 0
	if ! mountpoint -q /sys/fs/fuse/connections; then
		mount -t fusectl none /sys/fs/fuse/connections 2>/dev/null && mounted=1
	fi
	echo 1 >"/sys/fs/fuse/connections/$dev/abort" 2>/dev/null || true
	((mounted == 0)) || umount /sys/fs/fuse/connections 2>/dev/null || true
	umount -l "$1" 2>/dev/null || true
}

# seal_waits_for_close MNT IMAGE LABEL [taskset -c N]: a file written and
# closed 1 s after the seal (--keep) began must be waited for, and whole in
# IMAGE.
seal_waits_for_close() {
	local m=$1 img=$2 label=$3 wp i
	shift 3
	rm -f "$WORK/late.ready"
	"$@" python3 -c 'import os, sys, time
fd = os.open(sys.argv[1] + "/late", os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, b"x" * 100000)
open(sys.argv[2], "w").close()
time.sleep(1)
os.close(fd)' "$m" "$WORK/late.ready" &
	wp=$!
	for ((i = 0; i < 200; i++)); do
		[[ -e $WORK/late.ready ]] && break
		sleep 0.05
	done
	if "$@" "$SEAL" -q --keep "$m" 2>"$WORK/late.err"; then
		ok "$label: the seal waited for a close on its way"
	else
		fail "$label: seal with a close on its way: $(cat "$WORK/late.err")"
	fi
	wait "$wp" || fail "$label: the writer closing late"
	[[ $(unsquashfs -cat "$img" late 2>/dev/null | wc -c) == 100000 ]] &&
		ok "$label: the file closed late is whole in the image" ||
		fail "$label: the file closed late is not whole in the image"
}

# seal_during_create MNT LABEL [taskset -c N]: a seal that makes
# MNT/pd/node again (pseudo_file) while a create in MNT/pd waits for an
# answer: the kernel's forgetting of the old name needs pd's lock, which
# the create holds.  The seal must be slow enough for the create to come
# while it runs: mount with -o no_background and a slow compressor (xz),
# and a new file of text is there to compress (random bytes would be
# stored as they are, at once).  It fails if the seal hangs.
seal_during_create() {
	local m=$1 label=$2 spid cpid rc=0
	shift 2
	head -c $((6 << 20)) /dev/urandom | base64 >"$m/slow"
	rm -f "$m/pd/node"
	"$@" timeout -k 5 60 "$SEAL" -q --keep "$m" >"$WORK/sdc.out" 2>&1 &
	spid=$!
	sleep 0.4
	"$@" python3 -c 'import sys; open(sys.argv[1] + "/pd/made", "w").close()' "$m" &
	cpid=$!
	wait "$spid" || rc=$?
	if ((rc == 124 || rc == 137)); then
		fail "$label: the seal hung with a create waiting in the directory of the entry it made again"
		for t in /proc/"$DPID"/task/*; do
			log "  thread ${t##*/} $(cat "$t/comm" 2>/dev/null) state $(cut -d' ' -f3 "$t/stat" 2>/dev/null)"
			sed 's/^/    /' "$t/stack" 2>/dev/null | head -8 >&2 || true
		done
		fuse_abort "$m"
		wait "$cpid" 2>/dev/null || true
		return 1
	fi
	wait "$cpid" || fail "$label: the create during the seal failed"
	if ((rc == 0)) && [[ -c $m/pd/node && -f $m/pd/made ]]; then
		ok "$label: the seal made pd/node again while a create in pd waited"
	else
		fail "$label: seal exit $rc: $(cat "$WORK/sdc.out"); pd holds: $(ls "$m/pd" 2>&1 | tr '\n' ' ')"
	fi
}

# loop_mount IMAGE DIR: the kernel's view of an image.
loop_mount() {
	mkdir -p "$2"
	mount -t squashfs -o loop,ro "$1" "$2" || { fail "kernel mount of $1"; return 1; }
	LOOPS+=("$2")
	# readdir of the root gives "." and "..": the kernel gives the root's
	# parent_inode as the d_ino of "..", and glibc skips a d_ino of 0.
	[[ $(LC_ALL=C ls -a -- "$2" | awk 'NR <= 2' | tr '\n' ' ') == ". .. " ]] ||
		fail "$1: readdir of the root shows no '.' and '..' (the root's parent inode 0?)"
}

loop_umount() {
	umount "$1"
	unset 'LOOPS[${#LOOPS[@]}-1]'
}

# tree_cmp A B [LABEL]: contents and metadata (python treecmp.py).
tree_cmp() {
	if python3 "$FUSE_TESTS_DIR/treecmp.py" "$1" "$2"; then
		ok "${3-trees} equal: $1 vs $2"
	else
		fail "${3-trees} differ: $1 vs $2"
	fi
}

finish() {
	if [[ $FAILURES -gt 0 ]]; then
		log "$FAILURES failure(s)"
		exit 1
	fi
	log "PASS"
	exit 0
}
