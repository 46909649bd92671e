#!/usr/bin/env bash
# The whole test suite from a clean checkout: install what is missing
# (Debian 12, as root), build, run every meson test suite in each mode.
#
#   tools/test.sh                    # every mode, every suite (what CI runs),
#                                    # and the normal mode runs tools/demo.sh
#   tools/test.sh unit               # one suite (unit, image, fuse) in each mode
#   tools/test.sh --mode=normal      # one mode; --mode=asan,tsan for several
#   TEST_MODES=normal,asan tools/test.sh image
#
# Modes (default: all of them, in this order):
#   normal    -Werror debugoptimized build, every suite          (build-test)
#   asan      ASan+UBSan build, every suite                      (build-test-asan)
#   tsan      TSan build, every suite but "sequential"           (build-test-tsan)
#   valgrind  the normal build's unit suite under valgrind memcheck
#   fuzz      clang libFuzzer build, smoke runs of tests/fuzz/fuzz_tar
#             (FUZZ_SECONDS, default 12), fuzz_pseudo (FUZZ_PSEUDO_SECONDS,
#             default 6) and fuzz_journal (FUZZ_JOURNAL_SECONDS, default 6);
#             runs when no suite or "fuzz" is named
#
# Sanitizer reports fail the run even when the process that made them did not
# fail its test (a daemonised sqfs-stage, a child whose status nobody reads):
# every instrumented process logs to its own file in a fresh directory
# (log_path=...), and that directory must be empty after the suites.
#
# Within a mode, meson runs TEST_JOBS tests at a time (2), the long ones
# first.  (3 gave 13 min 10 s against 13 min 26 s on a clean clone: the
# longest test, test_rootfs, slows down next to two others.)
#
# FUSE over io_uring (Linux 6.14+) is offered only when the fuse module's
# parameter enable_uring is Y.  The normal and tsan modes run the FUSE
# suites with it on (requests through the daemon's rings and their threads),
# asan with it off (through /dev/fuse, as on a kernel without it); the
# parameter gets its old value back at the end.  test_uring covers both
# ways in every mode.  TEST_FUSE_URING=keep leaves the parameter alone.
#
# Environment: BUILD_DIR (normal build, default build-test; the others add
# -asan, -tsan, -fuzz), TEST_MODES, TEST_JOBS, FUZZ_SECONDS, FUZZ_CC,
# FUZZ_PSEUDO_SECONDS, FUZZ_JOURNAL_SECONDS,
# TSAN_FSX_OPS (fsx operations per file in the tsan mode, 6000),
# TEST_FAIL_FAST=1 (stop at the first failing mode), SQFS_TEST_QUICK (1 in
# the asan, tsan and valgrind modes; 0 there runs the normal mode's full
# checks).  Each mode's time is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

ALL_MODES=(normal asan tsan valgrind fuzz)
modes=${TEST_MODES:-}
suites=()
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
while [[ $# -gt 0 ]]; do
	case $1 in
	--mode=*) modes=${1#--mode=} ;;
	--mode) modes=${2:?--mode needs a value}; shift ;;
	-h | --help) usage; exit 0 ;;
	-*) echo "test.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
	*) suites+=("$1") ;;
	esac
	shift
done
[[ -n $modes ]] || modes=$(IFS=,; echo "${ALL_MODES[*]}")
IFS=', ' read -r -a mode_list <<<"$modes"
for m in "${mode_list[@]}"; do
	[[ " ${ALL_MODES[*]} " == *" $m "* ]] || {
		echo "test.sh: unknown mode '$m' (modes: ${ALL_MODES[*]})" >&2
		exit 2
	}
done

# Suites for meson ("fuzz" is not a meson suite; it selects the fuzz mode).
meson_suites=()
want_fuzz=1 want_unit=1
if [[ ${#suites[@]} -gt 0 ]]; then
	want_fuzz=0 want_unit=0
	for s in "${suites[@]}"; do
		case $s in
		fuzz) want_fuzz=1 ;;
		unit) want_unit=1; meson_suites+=("$s") ;;
		*) meson_suites+=("$s") ;;
		esac
	done
fi
suite_args=()
for s in "${meson_suites[@]}"; do suite_args+=(--suite "$s"); done

tools/deps.sh

URING_PARAM=/sys/module/fuse/parameters/enable_uring
uring_old=
if [[ ${TEST_FUSE_URING-} != keep && -w $URING_PARAM ]]; then
	uring_old=$(cat "$URING_PARAM")
	trap 'echo "$uring_old" >"$URING_PARAM"' EXIT
fi
# fuse_uring Y|N: for this mode's mounts.
fuse_uring() {
	if [[ -n $uring_old ]]; then
		echo "$1" >"$URING_PARAM"
		echo "test.sh: fuse enable_uring=$1" >&2
	fi
}

build=${BUILD_DIR:-build-test}
NPROC=${TEST_JOBS:-2}
SANLOGS=

# Every feature the product ships with, required: an 'auto' one left out
# (no libfuse3 found) would drop its tests, and the run would still pass.
FEATURES=(-Dfuse=enabled -Dgzip=enabled -Dlibdeflate=enabled -Dxz=enabled
	-Dlz4=enabled -Dlzo=enabled -Dzstd=enabled)

# setup DIR [meson options]: configure once; meson reconfigures by itself.
setup() {
	local dir=$1
	shift
	if [[ ! -f $dir/build.ninja ]]; then
		meson setup "$dir" -Dwerror=true -Dbuildtype=debugoptimized "${FEATURES[@]}" "$@"
	fi
	meson compile -C "$dir"
}

# A fresh directory for sanitizer logs, writable by the unprivileged users
# some tests switch to.
new_sanlogs() {
	SANLOGS=$(mktemp -d "${TMPDIR:-/tmp}/sqfs-sanitizer-logs.XXXXXX")
	chmod 1777 "$SANLOGS"
}

# check_sanlogs LABEL: fail if any instrumented process wrote a report.
check_sanlogs() {
	local f n=0
	for f in "$SANLOGS"/*; do
		[[ -e $f ]] || continue
		if [[ $n -eq 0 ]]; then
			echo "test.sh: $1: sanitizer reports:" >&2
		fi
		n=$((n + 1))
		echo "======== $f" >&2
		head -c 20000 "$f" >&2
	done
	rm -rf -- "$SANLOGS"
	if [[ $n -gt 0 ]]; then
		echo "test.sh: $1: $n sanitizer report file(s): FAIL" >&2
		return 1
	fi
}

# Only meson runs there are; "no suite" means all of them.
run_meson() {
	local dir=$1
	shift
	if [[ ${#suites[@]} -gt 0 && ${#meson_suites[@]} -eq 0 ]]; then
		echo "test.sh: no meson suite selected" >&2
		return 0
	fi
	meson test -C "$dir" --print-errorlogs --num-processes "$NPROC" "${suite_args[@]}" "$@"
}

mode_normal() {
	local rc=0

	setup "$build"
	fuse_uring Y
	run_meson "$build" || rc=$?
	# The README's quick start, as a user runs it (it builds in build/).
	if [[ ${#suites[@]} -eq 0 ]]; then
		echo "test.sh: tools/demo.sh (the README's quick start)" >&2
		if tools/demo.sh >"$build/demo.log" 2>&1; then
			tail -n 1 "$build/demo.log" >&2
		else
			echo "test.sh: tools/demo.sh failed:" >&2
			tail -n 40 "$build/demo.log" >&2
			rc=1
		fi
	fi
	return "$rc"
}

# Under a sanitizer or valgrind every code path still runs, with shorter
# random phases and less data (the normal mode runs the full counts), and
# SQFS_TEST_QUICK=1 leaves to the normal mode what only judges the output
# (every external reader of an image, a debootstrap next to the cp -a and
# tar x of the same tree): CI stays within its time budget.
# The suite "policy" (the daemon's CPU policy, spinners beside it) is one
# of those.
export_short_load() {
	export FSX_OPS=${FSX_OPS:-20000} LOAD_SECONDS=${LOAD_SECONDS:-10}
	export STRESS_SECONDS=${STRESS_SECONDS:-1} SQFS_TEST_QUICK=${SQFS_TEST_QUICK:-1}
	quick_args=()
	[[ $SQFS_TEST_QUICK != 1 ]] || quick_args=(--no-suite policy)
}

mode_asan() {
	local dir=$build-asan rc=0
	setup "$dir" -Db_sanitize=address,undefined -Db_lundef=false
	fuse_uring N
	new_sanlogs
	( export_short_load
	# abort_on_error=0: exit with a status (not SIGABRT, no core file);
	# leaks are reports too.
	ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0:exitcode=23:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:log_path=$SANLOGS/asan" \
	UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=24:log_path=$SANLOGS/ubsan" \
		run_meson "$dir" "${quick_args[@]}" ) || rc=$?
	check_sanlogs asan || rc=1
	return $rc
}

mode_tsan() {
	local dir=$build-tsan rc=0
	setup "$dir" -Db_sanitize=thread
	fuse_uring Y
	new_sanlogs
	( export_short_load
	# Each of fsx's calls is a FUSE round trip into an instrumented daemon:
	# fewer of them than under ASan.  The suite "sequential" (clients making
	# one call at a time) is left to the other modes.
	export FSX_OPS=${TSAN_FSX_OPS:-6000}
	# halt_on_error: the first race ends the process with exitcode 66, so a
	# test sees it; log_path: and the report is found even if it does not.
	TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1:history_size=4:suppressions=$ROOT/tests/tsan.supp:log_path=$SANLOGS/tsan" \
		run_meson "$dir" --no-suite sequential "${quick_args[@]}" ) || rc=$?
	check_sanlogs tsan || rc=1
	return $rc
}

mode_valgrind() {
	if [[ $want_unit -eq 0 ]]; then
		echo "test.sh: valgrind runs the unit suite, not selected" >&2
		return 0
	fi
	setup "$build"
	# No --track-origins: it finds nothing more and doubles the time; to
	# see where an uninitialised value came from, run this mode with
	# VALGRIND_OPTS=--track-origins=yes.
	SQFS_TEST_QUICK=${SQFS_TEST_QUICK:-1} \
	meson test -C "$build" --print-errorlogs --num-processes "$NPROC" --suite unit \
		--wrap='valgrind --error-exitcode=1 --leak-check=full --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible --quiet'
}

mode_fuzz() {
	local dir=$build-fuzz secs=${FUZZ_SECONDS:-12} cc=${FUZZ_CC:-clang-14} rc=0
	if [[ $want_fuzz -eq 0 ]]; then
		echo "test.sh: fuzz not selected" >&2
		return 0
	fi
	command -v "$cc" >/dev/null || cc=clang
	if [[ ! -f $dir/build.ninja ]]; then
		CC=$cc meson setup "$dir" -Dwerror=true -Dbuildtype=debugoptimized "${FEATURES[@]}" \
			-Db_sanitize=address,undefined -Db_lundef=false -Dfuzz=enabled
	fi
	# Only the fuzz targets: the rest of this build is the asan mode's.
	meson compile -C "$dir" tests/fuzz/fuzz_tar tests/fuzz/fuzz_pseudo tests/fuzz/fuzz_journal
	run_fuzzer "$dir" tar "$secs" 65536 corpus || rc=1
	run_fuzzer "$dir" pseudo "${FUZZ_PSEUDO_SECONDS:-6}" 4096 corpus-pseudo || rc=1
	run_fuzzer "$dir" journal "${FUZZ_JOURNAL_SECONDS:-6}" 8192 corpus-journal || rc=1
	return $rc
}

# run_fuzzer BUILD NAME SECONDS MAX_LEN SEEDS: tests/fuzz/fuzz_NAME for a while.
run_fuzzer() {
	local dir=$1 name=$2 secs=$3 maxlen=$4 seeds=$5 rc=0 corpus art log
	# The seeds stay as they are; what the run finds goes to a scratch corpus.
	corpus=$dir/fuzz-corpus-$name art=$dir/fuzz-artifacts-$name log=$dir/fuzz-$name.log
	mkdir -p "$corpus" "$art"
	rm -f "$art"/*
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		"$dir/tests/fuzz/fuzz_$name" -max_total_time="$secs" -max_len="$maxlen" \
		-rss_limit_mb=2048 -timeout=30 -print_final_stats=1 \
		-dict="$ROOT/tests/fuzz/$name.dict" \
		-artifact_prefix="$art/" "$corpus" "$ROOT/tests/fuzz/$seeds" \
		>"$log" 2>&1 || rc=$?
	echo "test.sh: fuzz_$name:" >&2
	grep -E '^(#[0-9]+.*(DONE|INITED))|^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' \
		"$log" >&2 || true
	if [[ $rc -ne 0 ]]; then
		echo "test.sh: fuzz_$name failed ($rc); artifacts in $art:" >&2
		ls -l "$art" >&2 || true
		grep -A40 -m1 -E 'ERROR: |==ERROR|deadly signal|timeout after|out-of-memory' "$log" >&2 || tail -50 "$log" >&2
		return 1
	fi
}

declare -A took status
failed=0
for m in "${mode_list[@]}"; do
	echo "==== test.sh: mode $m ====" >&2
	t0=$SECONDS
	rc=0
	"mode_$m" || rc=$?
	took[$m]=$((SECONDS - t0))
	status[$m]=$([[ $rc -eq 0 ]] && echo ok || echo FAIL)
	echo "==== test.sh: mode $m: ${status[$m]} in ${took[$m]} s ====" >&2
	if [[ $rc -ne 0 ]]; then
		failed=$((failed + 1))
		[[ ${TEST_FAIL_FAST-} == 1 ]] && break
	fi
done
echo "==== test.sh: summary ====" >&2
total=0
for m in "${mode_list[@]}"; do
	[[ -n ${took[$m]-} ]] || continue
	printf '  %-9s %-4s %5d s\n' "$m" "${status[$m]}" "${took[$m]}" >&2
	total=$((total + took[$m]))
done
printf '  %-9s %-4s %5d s\n' total "" "$total" >&2
exit $((failed > 0))
