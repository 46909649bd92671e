#!/bin/bash
# test_lib.sh SQFS_STAGE SQFS_SEAL SQFS_PACK
#
# The FUSE tests' own cleanup: at exit it stops the daemons the test started
# and nothing else.  A daemon that ended early leaves a pid that the kernel
# gives out again (pid_max is 32768 on a 2-CPU machine, and the suite goes
# round it in minutes); the cleanup once killed whatever had that pid by
# then, which was another test's daemon, whose mount vanished mid-check.
# Here the pid is handed out again on purpose (ns_last_pid), to a process
# standing in for another test's daemon, which must outlive the cleanup.
set -euo pipefail
# shellcheck source=tests/fuse/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "$@"
[[ -w /proc/sys/kernel/ns_last_pid ]] || skip_or_fail "/proc/sys/kernel/ns_last_pid is not writable"

# reuse_pid PID: start `sleep 300` with PID (the kernel takes the next free
# pid after ns_last_pid; another process may get there first: try again).
reuse_pid() {
	local try p
	for ((try = 0; try < 50; try++)); do
		echo $(($1 - 1)) >/proc/sys/kernel/ns_last_pid
		sleep 300 </dev/null >/dev/null 2>&1 &
		p=$!
		[[ $p == "$1" ]] && return 0
		kill "$p"
		wait "$p" 2>/dev/null || true
	done
	return 1
}

# A stand-in daemon, gone before the end of the test, its pid taken again
# by a process the test did not start ("another test's daemon", made by a
# child shell so that it is not this shell's job).
sleep 300 </dev/null >/dev/null 2>&1 &
GONE=$!
daemon_add "$GONE"
daemon_alive "$GONE" && ok "a running daemon is alive" || fail "a running daemon is not alive"
kill "$GONE"
wait "$GONE" 2>/dev/null || true
daemon_alive "$GONE" && fail "an ended daemon is still alive" || ok "an ended daemon is not alive"

rm -f "$WORK/other.pid"
( reuse_pid "$GONE" && echo "$!" >"$WORK/other.pid" ) &
wait $! || true
OTHER=$(cat "$WORK/other.pid" 2>/dev/null || true)
if [[ $OTHER != "$GONE" ]]; then
	fail "could not hand pid $GONE out again (ns_last_pid)"
	finish
fi
daemon_alive "$OTHER" && fail "pid $GONE, now another process, counts as the ended daemon" ||
	ok "pid $GONE, now another process, is not the ended daemon"

# The cleanup, as at the exit of a test (in a child shell, which exits).
( trap - EXIT; cleanup ) 2>/dev/null || true
# (killed, it stays a zombie: its parent, init, has not reaped it yet)
st=$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$OTHER/stat" 2>/dev/null || true)
if [[ -n $st && $st != Z ]]; then
	ok "the cleanup left the process that now has the ended daemon's pid alone"
	kill "$OTHER"
else
	fail "the cleanup killed pid $OTHER, which had become another process"
fi
# The child-shell cleanup above removed WORK: the real one at exit finds none.
finish
