#!/bin/bash
# test_stressng.sh SQFS_STAGE SQFS_SEAL SQFS_PACK
#
# stress-ng's file system stressors against a mount (--temp-path inside it,
# --verify where the stressor checks data), a few different stressors at a
# time with two instances each (every stressor must make progress), then all
# of them at once: each run must exit 0 with no failure reported and no
# stressor skipped, and the daemon must stay up.
# A file gets xattrs until the mount refuses: ENOSPC, while listxattr(2)
# still works.  Then the seal: the daemon exits 0 and the kernel mounts the
# image, whose tree equals a copy of the staged tree taken just before the
# seal (xattrs included).
#
# Not run, and why:
#   fiemap   FS_IOC_FIEMAP does not exist on FUSE (stress-ng skips it)
#   io       its sync(2) flushes every file system of the machine: noise
#            for the other tests, nothing for ours (iomix covers the I/O)
#   aio/aiol no point: FUSE turns them into plain reads and writes
# Sizes are cut down from stress-ng's defaults (1 GB per hdd/fallocate
# worker, a 256 MB file for mmap, whose setup alone writes it page by page
# and takes minutes through FUSE).
# Environment: STRESS_SECONDS (seconds per run, default 1),
# STRESS_SLOW_SECONDS (the limit for the @slow ones below, 60),
# STRESS_INSTANCES (2), STRESS_GROUP (stressors per run, 4; 1 runs them one
# at a time, which names the culprit of a failure at once).
set -euo pipefail
# shellcheck source=tests/fuse/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "$@"
need_loop
need_cmd stress-ng timeout
SECS=${STRESS_SECONDS:-1}
N=${STRESS_INSTANCES:-2}
SLOW=${STRESS_SLOW_SECONDS:-60}
G=${STRESS_GROUP:-4}
MT=1700000000

M=$WORK/m
stage_mount "$WORK/s.sqfs" "$M" -o comp=zstd:3,block_size=4K,mkfs_time=$MT,jobs=2
mkdir "$M/sng"

# NAME OPTIONS... [@slow]: one entry per stressor.  @slow: its bogo
# operation is thousands of FUSE requests (8192 links, xattrs until the
# file is full, a file mapped and written page by page), or its setup can
# fill a short window next to other stressors (filename probes which names
# work, readahead writes its file), so it runs for a number of operations,
# with SLOW_SECONDS as the limit, instead of for SECS.  (fpunch cannot: its
# children ignore --fpunch-ops and run to the time limit.)
STRESSORS=(
	"dir"
	"dentry"
	"dirdeep --dirdeep-inodes 2000"
	"dirmany"
	"link --link-ops 2 @slow"
	"symlink --symlink-ops 2 @slow"
	"rename"
	"filename --filename-ops 20 @slow"
	"mknod"
	"chmod"
	"chown"
	"utime"
	"fpunch"
	"xattr --xattr-ops 2 @slow"
	"open"
	"fstat"
	"fcntl"
	"lockf"
	"flock"
	"hdd --hdd-bytes 32M --hdd-opts wr-rnd,rd-rnd,fsync"
	"hdd --hdd-bytes 32M --hdd-opts wr-seq,rd-seq,utimes,fdatasync"
	"seek --seek-size 64M"
	"fallocate --fallocate-bytes 16M"
	"copy-file --copy-file-bytes 128M"
	"readahead --readahead-bytes 16M --readahead-ops 2000 @slow"
	"sync-file --sync-file-bytes 16M"
	"iomix --iomix-bytes 16M"
	"mmap --mmap-file --mmap-bytes 4M --mmap-ops 2 @slow"
)

# stalled LABEL OPS: true if a stressor of LABEL ("a+b+c") has no bogo
# operation in OPS ("a=12 b=3 ..."); never for "all at once".
stalled() {
	local n
	[[ $1 != "all at once" ]] || return 1
	for n in ${1//+/ }; do
		[[ " $2 " =~ \ $n=[1-9] ]] || return 0
	done
	return 1
}

# run LABEL SECONDS ARGS...: stress-ng ARGS in the mount for SECONDS; judge its
# exit status and its report (and, except all at once, that each stressor of
# LABEL did something).  A stressor's setup can fill a short window by itself
# under a sanitizer: a run in which one did nothing gets one more, four
# times as long, before that is a failure.
run() {
	local label=$1 secs=$2 rc=0 out ops= t1=$SECONDS try
	shift 2
	for try in 1 2; do
		rc=0
		out=$(timeout $((SLOW * 2 + 60 + secs * 4)) stress-ng "$@" --timeout "$secs" \
			--temp-path "$M/sng" --verify --metrics-brief 2>&1) || rc=$?
		((rc == 0)) || break
		ops=$(awk '$3 ~ /^\[[0-9]+\]$/ && $5 ~ /^[0-9]+$/ {print $4 "=" $5}' <<<"$out" | sort -u | xargs)
		stalled "$label" "$ops" && ((try == 1)) || break
		log "note: stress-ng $label did nothing in $secs s (bogo ops: ${ops:-none}); again for $((secs * 4)) s"
		secs=$((secs * 4))
	done
	if ((rc == 124)); then
		fail "stress-ng $label: still running long after its time (deadlock?)"
	elif ((rc != 0)); then
		fail "stress-ng $label exited $rc:"
		tail -n 15 <<<"$out" >&2
	elif grep -Eiq 'fail|skipping stressor|not supported' <<<"$out"; then
		fail "stress-ng $label reports a failure or a skip:"
		grep -Ei 'fail|skipping|not supported' <<<"$out" | head -n 10 >&2
	elif stalled "$label" "$ops"; then
		fail "stress-ng $label: no progress (bogo ops: ${ops:-none})"
	else
		ok "stress-ng $label: bogo ops $ops ($((SECONDS - t1)) s)"
	fi
	if ! daemon_alive "$DPID" || ! mountpoint -q "$M"; then
		fail "the daemon died during stress-ng $label"
		finish
	fi
}

# Runs of up to G different stressors (the options of a run are global, so a
# name appears once per run), the @slow ones in runs of their own: a run
# lasts as long as its slowest member.  Each stressor busy-loops for the
# whole run, so one at a time cost a core-minute per mode for nothing the
# mixed runs do not also do (with more interleaving).
t0=$SECONDS
all=()
declare -A groups=()	# "slow|K" or "timed|K" -> the run's arguments
declare -A gnames=()
for s in "${STRESSORS[@]}"; do
	kind=timed
	[[ $s == *" @slow" ]] && kind=slow s=${s% @slow}
	read -r -a a <<<"$s"
	k=0
	while [[ -n ${gnames[$kind|$k]-} ]] &&
		{ (($(wc -w <<<"${gnames[$kind|$k]}") >= G)) || [[ " ${gnames[$kind|$k]} " == *" ${a[0]} "* ]]; }; do
		k=$((k + 1))
	done
	gnames[$kind|$k]+=" ${a[0]}"
	groups[$kind|$k]+=" --${a[0]} $N ${a[*]:1}"
	# all at once: one instance each (the second hdd line is left out:
	# options are global to the run)
	[[ ${a[0]} == hdd && " ${all[*]} " == *" --hdd "* ]] && continue
	all+=(--"${a[0]}" 1 "${a[@]:1}")
done
for key in $(printf '%s\n' "${!groups[@]}" | sort -t'|' -k1,1 -k2,2n); do
	t=$SECS
	[[ $key == slow\|* ]] && t=$SLOW
	read -r -a a <<<"${groups[$key]}"
	names=${gnames[$key]# }
	run "${names// /+}" "$t" "${a[@]}"
done
log "in groups of $G: $((SECONDS - t0)) s"
run "all at once" $((SECS * 3)) "${all[@]}"
log "stress-ng: $((SECONDS - t0)) s"

# What stress-ng --xattr does until the file system refuses: the refusal
# must come (ENOSPC) while listxattr(2) still lists them all, and the image
# must hold them (the kernel view below).
# (In a directory of its own: a copy on ext4 cannot hold them all.)
mkdir "$M/xa"
XA_CHECK='
import os, sys
p, n = sys.argv[1], int(sys.argv[2])
names = sorted(os.listxattr(p))
want = sorted("user.stress-ng-like-name-%06d" % i for i in range(n))
if names != want:
    sys.exit("%d names, %d expected" % (len(names), n))
for i in range(n):
    v = os.getxattr(p, "user.stress-ng-like-name-%06d" % i)
    if v != b"v%d" % i:
        sys.exit("value %d: %r" % (i, v))
'
if nxa=$(python3 - "$M/xa/xattrs" <<'EOF2'
import errno, os, sys
p = sys.argv[1]
open(p, "w").close()
n = 0
try:
    while n < 100000:
        os.setxattr(p, "user.stress-ng-like-name-%06d" % n, b"v%d" % n)
        n += 1
except OSError as e:
    if e.errno != errno.ENOSPC:
        sys.exit("setxattr #%d: %s" % (n, e))
if n == 100000:
    sys.exit("100000 xattrs and no refusal")
print(n)
EOF2
) && python3 -c "$XA_CHECK" "$M/xa/xattrs" "$nxa"; then
	ok "xattrs: $nxa set, then ENOSPC, all listed"
else
	fail "xattrs until refused: $nxa"
fi

# stress-ng cleans up after itself: the mount holds sng/ only.
left=$(find "$M/sng" -mindepth 1 | sed -n 1,5p)
[[ -z $left ]] || fail "stress-ng left entries behind: $left"
# Something to find in the image, then a copy of the staged tree.
cp -a "$FUSE_TESTS_DIR/lib.sh" "$M/sng/lib.sh"
head -c 300000 /dev/urandom >"$M/sng/random.bin"
cp -a "$M/sng" "$WORK/ref"
out=$(timeout 300 "$SEAL" --json "$M") || fail "sqfs-seal"
wait_daemon 0
if loop_mount "$WORK/s.sqfs" "$WORK/k"; then
	tree_cmp "$WORK/ref" "$WORK/k/sng" "kernel view of the image"
	if [[ $nxa =~ ^[0-9]+$ ]] && err=$(python3 -c "$XA_CHECK" "$WORK/k/xa/xattrs" "$nxa" 2>&1); then
		ok "kernel view: the $nxa xattrs of xa/xattrs"
	else
		fail "kernel view of xa/xattrs: $err"
	fi
	loop_umount "$WORK/k"
fi
finish
