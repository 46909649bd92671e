#!/usr/bin/env bash
# tools/bench/run.sh: benchmark sqfs-pack / sqfs-stage against mksquashfs,
# gensquashfs and tar2sqfs.  `run.sh --help` documents everything; so does
# tools/README.
set -Eeuo pipefail
export LC_ALL=C
trap 'echo "bench: ERROR: line $LINENO: \"$BASH_COMMAND\" failed" >&2' ERR
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd -- "$HERE/../.." && pwd)
NPROC=$(nproc)

usage() {
	cat <<EOF
Usage: tools/bench/run.sh [OPTIONS]
Benchmark sqfs-pack and sqfs-stage against mksquashfs (squashfs-tools),
gensquashfs and tar2sqfs (squashfs-tools-ng).  Needs root (FUSE mounts with
dev/suid, a private tmpfs), /usr/bin/time (Debian package 'time'), fusermount3,
python3, and the peers (tools/deps.sh installs them).

Options:
  --corpus debian|generated|PATH   input corpus (default generated); built
                        and cached by tools/bench/corpus.sh (BENCH_SIZE=small|full,
                        default full; BENCH_CACHE, default /var/cache/sqfs-stage-bench).
                        PATH: your own tree, a directory or a tar archive (plain
                        or compressed), copied into the cache once (again when it
                        changes); corpus.tar and rootfs.tar.xz are made from it
  --reps N              repetitions of every case (default 3).  Interleaved:
                        repetition 1 of every case and tool, then repetition 2...
  --jobs LIST           compression threads, comma separated (default 1,$NPROC)
                        (the scaling mode uses 1..nproc unless --scaling-jobs)
  --scaling-jobs LIST   jobs of the scaling mode (default 1..$NPROC)
  --comps LIST          compressors, comma separated, from gzip,xz,lzo,lz4,zstd,
                        zstd:19 (default: all six for pack, pipeline and scaling;
                        zstd for fuse and scale).  Each runs at the peers'
                        default level, passed to every tool explicitly:
                        gzip:9 xz:6 lzo:8 (lzo1x_999) lz4 (fast, not HC)
                        zstd:15; zstd:N (1..22, e.g. zstd:19, or zstd:3 for the
                        pipeline target) is zstd at level N for everyone.
  --modes LIST          pack,pipeline,fuse,scale,scaling (default: all)
  --debootstrap         pipeline: add the producer debootstrap --variant=minbase
                        bookworm (from the .debs cached by tests/fuse/test_rootfs.sh
                        if present, else the network)
  --tag TEXT            added to the result file names (e.g. validation)
  --note TEXT           a note printed at the top of every result file
  --out DIR             result directory (default tools/bench/results)
  --build DIR           the meson build directory with the tools (default
                        build-b, then build, in the repository)
  --fuse-uring on|off|keep
                        set the fuse module's enable_uring for the run (FUSE
                        over io_uring, Linux 6.14+; the mounts then take
                        requests through one ring per CPU), put back after;
                        default keep: as the machine has it (the header says)
  -h, --help

Modes (every case of every mode is measured the same way: each process runs
under GNU time (wall, user, sys, max RSS); a sample's CPU is the sum over all
its processes, its RSS the largest; wall is the whole case, measured by this
script):
  pack      sqfs-pack DIR, mksquashfs DIR, gensquashfs --pack-dir DIR,
            sqfs-pack --tar < corpus.tar, tar2sqfs < corpus.tar.
            Ratios: sqfs-pack/mksquashfs, sqfs-pack/gensquashfs,
            sqfs-pack --tar / tar2sqfs.  Options made equal: block size 128K,
            the level above, NFS export table on (mksquashfs' and ours'
            default, -e for the -ng tools), xattrs kept (default of all but
            gensquashfs: --keep-xattr), mtimes kept (gensquashfs --keep-time),
            tails of large files not packed (ours' and mksquashfs' default,
            -T for the -ng tools), ownership as on disk (no -all-root anywhere).
  pipeline  a producer fills a tree that becomes an image:
              stage             sqfs-stage IMG MNT; producer into MNT; sqfs-seal MNT
              tmpfs+mksquashfs  producer into a tmpfs directory; mksquashfs it
              stream+tar2sqfs   producer's tar stream | tar2sqfs
              stream+sqfs-pack  producer's tar stream | sqfs-pack --tar
            producers: cp (cp -a CORPUS/tree/. DST, stream: tar -c of the tree),
            tarxz (xz -dc rootfs.tar.xz | tar -x -C DST, stream: xz -dc),
            debootstrap (with --debootstrap; no stream variant).
            Reported: total wall, seal latency (producer exit -> image
            complete: sqfs-seal --keep returns), teardown (fusermount3 -u,
            spool removal, daemon exit), CPU of every process (daemon
            included), RSS, size; and
            for the mount the compression backlog: the root xattr
            user.sqfs-stage.status sampled every 0.5 s (into the samples CSV),
            its maximum and its value when the producer exits.
  fuse      the write path, mount vs tmpfs: cp (cp -a of the corpus), files
            (BENCH_FUSE_FILES=100000 files of 1 KiB), seqwrite (BENCH_FUSE_SEQ=2G
            of tools/bench/pattern.py through dd bs=1M).  The write phase is
            timed; the mount is then sealed (seal time reported apart).
  scale     files: BENCH_SCALE_FILES (1000000) small files (tools/bench/mkfiles.py,
            100 bytes each) into a mount; big: one BENCH_SCALE_BIG (20G) file
            (pattern.py | dd bs=1M).  Daemon VmRSS sampled every 0.5 s during the
            write (first/max/last sample), VmHWM, seal time, image size.
  scaling   sqfs-pack DIR and mksquashfs DIR with jobs 1..nproc per compressor:
            wall, speed-up over the smallest jobs value, efficiency, CPU.

Method: warm page cache (the corpus, its tree, corpus.tar and
rootfs.tar.xz, is read before every sample, untimed: proactive reclaim such
as DAMON's pages out file pages left idle for a minute, and would bill the
refaults to the first tool of a case); images, spools and the mount's backing files go
to BENCH_WORK (default /var/tmp/sqfs-stage-bench, the disk), tmpfs trees to a
private tmpfs mounted under it; \`sync\` (untimed) after every sample so that
one tool's write-back is not billed to the next.  sqfs-pack fsyncs its image
(atomic publish) inside its time, the peers do not.  On ext4 without a
journal the inode allocator passes over inodes freed in the last 60 s, or
360 s while their inode table block is dirty (fs/ext4/ialloc.c,
recently_deleted), so creating N files soon after removing N others costs
O(N^2) CPU (60 000 creates: 1.3 s, or 33 s three seconds after removing
60 000).  A mount's spool has one file per staged file and is removed at
its teardown, and the next mount's first creates dirty those blocks again,
so no wait of a minute is enough (a sample 62 s after the last teardown
still spent 30 s of CPU there, 1 run in 2).  The check only looks at inode
table blocks in the buffer cache, so there, before each mount sample, the
script syncs and drops the clean caches (drop_caches 3; BENCH_DROP_CACHES=0
turns it off), then reads the corpus again, untimed; the header says
whether it applied.

Output (DATE = UTC start time, HOST = hostname -s):
  OUT/DATE-HOST[-TAG]-MODE.md          header (machine, tools, corpus,
                                       method, exact commands) + median tables
  OUT/DATE-HOST[-TAG].csv              every raw sample, all modes
  OUT/DATE-HOST[-TAG]-samples.csv      daemon time series (pipeline, fuse, scale)

Environment: BENCH_CACHE BENCH_SIZE BENCH_SEED (corpus), BENCH_WORK,
BENCH_TMPFS_SIZE (default 50% of RAM), BENCH_FUSE_FILES, BENCH_FUSE_SEQ,
BENCH_SCALE_FILES, BENCH_SCALE_BIG, BENCH_STAGE_OPTS (more sqfs-stage -o
options for every mount, e.g. no_prepack or no_background; shown in the
commands), BENCH_FUSE_CASES (the fuse mode's cases, default
cp,files,seqwrite), BENCH_IDLE_SPIN (N busy loops at SCHED_IDLE for the
whole run, to measure what CPU work beside a producer costs it even at the
lowest priority; in the header), BENCH_DROP_CACHES (see Method).
Exit status: 0 done, 1 a command failed (the script stops at once), 2 usage.
EOF
}

# --- options -------------------------------------------------------------------
CORPUS=generated REPS=3 JOBS=$( [[ $NPROC -gt 1 ]] && echo "1,$NPROC" || echo 1) SCALING_JOBS=$(seq -s, 1 "$NPROC") COMPS=
MODES=pack,pipeline,fuse,scale,scaling DEBOOTSTRAP=0 TAG= NOTE= OUT=$HERE/results BUILD=
FUSE_URING=keep
while [[ $# -gt 0 ]]; do
	case $1 in
	--corpus) CORPUS=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--jobs) JOBS=$2; shift ;;
	--scaling-jobs) SCALING_JOBS=$2; shift ;;
	--comps) COMPS=$2; shift ;;
	--modes) MODES=$2; shift ;;
	--debootstrap) DEBOOTSTRAP=1 ;;
	--tag) TAG=$2; shift ;;
	--note) NOTE=$2; shift ;;
	--out) OUT=$2; shift ;;
	--build) BUILD=$2; shift ;;
	--fuse-uring) FUSE_URING=$2; shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
die() { printf 'bench: ERROR: %s\n' "$*" >&2; exit 1; }
log() { printf 'bench [%(%H:%M:%S)T]: %s\n' -1 "$*" >&2; }
[[ $REPS =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --reps wants a positive number" >&2; exit 2; }
case $CORPUS in
debian|generated) ;;
*) [[ -d $CORPUS || -f $CORPUS ]] ||
	{ echo "run.sh: --corpus debian|generated|PATH (a directory or a tar archive), not '$CORPUS'" >&2; exit 2; } ;;
esac
URING_PARAM=/sys/module/fuse/parameters/enable_uring
case $FUSE_URING in
keep) ;;
on|off)
	[[ -w $URING_PARAM ]] || { echo "run.sh: --fuse-uring: $URING_PARAM is missing (Linux 6.14+ with CONFIG_FUSE_IO_URING) or not writable" >&2; exit 2; }
	URING_OLD=$(cat "$URING_PARAM")
	[[ $FUSE_URING == on ]] && echo Y >"$URING_PARAM" || echo N >"$URING_PARAM"
	;;
*) echo "run.sh: --fuse-uring on|off|keep" >&2; exit 2 ;;
esac
for m in ${MODES//,/ }; do
	case $m in pack|pipeline|fuse|scale|scaling) ;; *) echo "run.sh: unknown mode '$m'" >&2; exit 2 ;; esac
done
for c in ${COMPS//,/ }; do
	case $c in gzip|xz|lzo|lz4|zstd|zstd:[1-9]|zstd:1[0-9]|zstd:2[0-2]) ;; *) echo "run.sh: unknown compressor '$c'" >&2; exit 2 ;; esac
done
for j in ${JOBS//,/ } ${SCALING_JOBS//,/ }; do
	[[ $j =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: bad jobs value '$j'" >&2; exit 2; }
done

[[ $(id -u) -eq 0 ]] || die "needs root (FUSE mounts with dev,suid for cp -a/debootstrap; a private tmpfs)"
if [[ -z $BUILD ]]; then
	for b in "$REPO/build-b" "$REPO/build"; do
		[[ -x $b/tools/sqfs-pack ]] && { BUILD=$b; break; }
	done
fi
XOPTS=${BENCH_STAGE_OPTS:+,$BENCH_STAGE_OPTS}
IDLE_SPIN=${BENCH_IDLE_SPIN:-0}
[[ $IDLE_SPIN =~ ^[0-9]+$ ]] || die "BENCH_IDLE_SPIN wants a number"
FUSE_CASES=${BENCH_FUSE_CASES:-cp,files,seqwrite}
for c in ${FUSE_CASES//,/ }; do
	case $c in cp|files|seqwrite) ;; *) die "BENCH_FUSE_CASES: unknown case '$c' (cp, files, seqwrite)" ;; esac
done
PACK=$BUILD/tools/sqfs-pack STAGE=$BUILD/tools/sqfs-stage/sqfs-stage SEAL=$BUILD/tools/sqfs-stage/sqfs-seal
for t in "$PACK" "$STAGE" "$SEAL"; do
	[[ -x $t ]] || die "'$t' not built (meson setup build-b -Dbuildtype=release && ninja -C build-b)"
done
[[ -x /usr/bin/time ]] || die "/usr/bin/time missing: apt-get install time (tools/deps.sh)"
for c in mksquashfs gensquashfs tar2sqfs fusermount3 python3 xz tar mountpoint pgrep; do
	command -v "$c" >/dev/null || die "'$c' missing (tools/deps.sh)"
done
[[ -c /dev/fuse ]] || die "/dev/fuse missing"

TM=$HERE/tm.sh STATS=$HERE/stats.py SAMPLER=$HERE/sampler.py
WORKBASE=${BENCH_WORK:-/var/tmp/sqfs-stage-bench}
mkdir -p "$WORKBASE" "$OUT"
WORK=$(mktemp -d "$WORKBASE/run.XXXXXX")
# The sources as the run starts (a later commit or edit is not what ran).
SRC_HEAD=$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo '?')
SRC_STATE=$(git -C "$REPO" diff --quiet HEAD -- src include tools/sqfs-pack tools/sqfs-stage meson.build 2>/dev/null ||
	echo ' (sources modified)')
# ext4 without a journal: see Method (BENCH_DROP_CACHES).
WORK_FS=$(findmnt -n -o FSTYPE,SOURCE --target "$WORKBASE" | head -n1)
WORK_NOJOURNAL=0
if [[ ${WORK_FS%% *} == ext4 ]]; then
	dev=$(basename -- "$(readlink -f -- "${WORK_FS##* }")")
	compgen -G "/proc/fs/jbd2/$dev-*" >/dev/null || WORK_NOJOURNAL=1
fi
DROP_CACHES=${BENCH_DROP_CACHES:-$WORK_NOJOURNAL}
TMPFS=$WORK/tmpfs
MOUNTS=() PIDS=() SPINS=() TMPFS_MOUNTED=0

cleanup() {
	local rc=$? i
	set +e
	for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
		fusermount3 -u -z "${MOUNTS[i]}" 2>/dev/null
	done
	for i in "${PIDS[@]}" "${SPINS[@]}"; do kill "$i" 2>/dev/null; done
	sleep 0.3
	for i in "${PIDS[@]}"; do kill -9 "$i" 2>/dev/null; done
	[[ $TMPFS_MOUNTED -eq 1 ]] && umount -l "$TMPFS" 2>/dev/null
	if [[ $rc -ne 0 && -s $WORK/daemon.log ]]; then
		log "--- daemon log (tail) ---"
		tail -n 30 "$WORK/daemon.log" >&2
	fi
	rm -rf -- "$WORK"
	[[ -n ${URING_OLD-} ]] && echo "$URING_OLD" >"$URING_PARAM"
	[[ $rc -ne 0 ]] && log "FAILED (exit $rc)"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$TMPFS"
mount -t tmpfs -o "size=${BENCH_TMPFS_SIZE:-50%},mode=0755" bench-tmpfs "$TMPFS"
TMPFS_MOUNTED=1

CDIR=$("$HERE/corpus.sh" "$CORPUS")
TREE=$CDIR/tree
STAMP=$(date -u +%Y%m%dT%H%MZ)
HOST=$(hostname -s)
BASE=$OUT/$STAMP-$HOST${TAG:+-$TAG}
CSV=$BASE.csv
SCSV=$BASE-samples.csv
CLK_TCK=$(getconf CLK_TCK)
BS=128K

# --- compressor arguments ------------------------------------------------------
# comp_args NAME: sets OURS (sqfs-pack -c / sqfs-stage -o comp=), MKSQ (mksquashfs
# arguments), NG (gensquashfs/tar2sqfs arguments).  Levels: the peers' defaults,
# given to everyone explicitly.
comp_args() {
	case $1 in
	gzip) OURS=gzip:9 MKSQ=(-comp gzip -Xcompression-level 9) NG=(-c gzip -X level=9) ;;
	xz) OURS=xz:6 MKSQ=(-comp xz) NG=(-c xz -X level=6) ;;	# mksquashfs xz: preset 6, no level option
	lzo) OURS=lzo:8 MKSQ=(-comp lzo -Xcompression-level 8) NG=(-c lzo -X level=8) ;;
	lz4) OURS=lz4 MKSQ=(-comp lz4) NG=(-c lz4) ;;
	zstd) OURS=zstd:15 MKSQ=(-comp zstd -Xcompression-level 15) NG=(-c zstd -X level=15) ;;
	zstd:*) OURS=$1 MKSQ=(-comp zstd -Xcompression-level "${1#zstd:}") NG=(-c zstd -X "level=${1#zstd:}") ;;
	*) die "unknown compressor $1" ;;
	esac
}

# --- sample bookkeeping ----------------------------------------------------------
S=$WORK/sample	# the current sample's .time/.end files
# Every sample starts with the corpus just read (untimed): a kernel's
# proactive reclaim (DAMON here: page cache untouched for 60 s) otherwise
# bills the refaults to whichever tool reads the tree first after samples
# that read only corpus.tar, always ours in a fixed order.
new_sample() { rm -rf "$S"; mkdir -p "$S"; rm -rf "$WORK/img"; mkdir -p "$WORK/img"; warm quiet; }
# record MODE CASE COMP JOBS TOOL REP WALL IMAGE CMD [k=v...]
record() {
	local mode=$1 case=$2 comp=$3 jobs=$4 tool=$5 rep=$6 wall=$7 img=$8 cmd=$9
	shift 9
	local size= used=
	if [[ -n $img && -f $img ]]; then
		size=$(stat -c %s "$img")
		used=$(od -An -t u8 -j 40 -N 8 "$img" | tr -d ' ')	# superblock bytes_used (unpadded)
	fi
	python3 "$STATS" record "$CSV" "$S" date="$STAMP" host="$HOST" mode="$mode" corpus="$(basename "$CDIR")" \
		case="$case" comp="$comp" jobs="$jobs" tool="$tool" rep="$rep" wall_s="$wall" image_bytes="$size" \
		cmd="$cmd" ${used:+fs_bytes=$used} "$@"
	log "$mode $case $comp j$jobs $tool rep $rep: wall $wall s${size:+, image $size bytes}"
	rm -rf "$WORK/img"
	sync
}
# Times are epoch seconds with a fraction ($EPOCHREALTIME, or elapsed's
# output); integer microseconds keep these helpers free of forks, since
# some run inside the seal latency's window (python3 costs ~80 ms here).
to_us() {	# SECONDS[.FRACTION] -> US (sets US)
	local s=$1 neg=0 i f
	[[ $s == -* ]] && neg=1 s=${s#-}
	i=${s%%.*} f=
	[[ $s == *.* ]] && f=${s#*.}
	f=${f}000000
	US=$((10#${i:-0} * 1000000 + 10#${f:0:6}))
	((neg)) && US=$((-US))
	return 0
}
fmt_us() {	# US DIGITS (3 or 6): print seconds
	local u=$1 sign=
	((u < 0)) && sign=- u=$((-u))
	if [[ $2 == 3 ]]; then
		u=$(((u + 500) / 1000))
		printf '%s%d.%03d\n' "$sign" $((u / 1000)) $((u % 1000))
	else
		printf '%s%d.%06d\n' "$sign" $((u / 1000000)) $((u % 1000000))
	fi
}
elapsed() { local a; to_us "$1"; a=$US; to_us "$2"; fmt_us $((US - a)) 3; }
minus() { local a; to_us "$1"; a=$US; to_us "$2"; fmt_us $((a - US)) 6; }
endof() { cat "$S/$1.end"; }
# Commands for the header, one per (mode, tool); CMDS_SEEN keys.
declare -A CMDS_SEEN=()
note_cmd() {	# MODE TOOL TEXT
	[[ -n ${CMDS_SEEN[$1/$2]-} ]] && return 0
	CMDS_SEEN[$1/$2]=1
	printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$WORK/commands.tsv"
}

# --- the mount ---------------------------------------------------------------------
# spool_inodes_reset: before a mount's sample (outside its time), make the
# inodes of the last spool reusable at once (see Method).
spool_inodes_reset() {
	[[ $DROP_CACHES -eq 1 ]] || return 0
	sync
	echo 3 >/proc/sys/vm/drop_caches
	log "spool inodes: caches dropped"
	# The corpus went with them: the mount's sample must find it as warm
	# as the peers' that follow it.
	warm quiet
}
# stage_start IMG MNT OPTS: daemon in the foreground under GNU time (its
# rusage: $S/daemon.time); sets TPID (time) and DPID (the daemon).
stage_start() {
	local img=$1 mnt=$2 opts=$3 i
	mkdir -p "$mnt"
	/usr/bin/time -f '%e %U %S %M' -o "$S/daemon.time" "$STAGE" -f -o "$opts" "$img" "$mnt" \
		>>"$WORK/daemon.log" 2>&1 &
	TPID=$!
	PIDS+=("$TPID")
	MOUNTS+=("$mnt")
	DPID=
	for ((i = 0; i < 400; i++)); do
		[[ -z $DPID ]] && DPID=$(pgrep -P "$TPID" -x sqfs-stage || true)
		mountpoint -q "$mnt" && [[ -n $DPID ]] && break
		kill -0 "$TPID" 2>/dev/null || die "sqfs-stage exited before mounting $mnt"
		sleep 0.05
	done
	mountpoint -q "$mnt" || die "sqfs-stage did not mount $mnt"
	PIDS+=("$DPID")
}
# daemon_now: DAEMON_CPU (s), DAEMON_HWM, DAEMON_RSS (kB) of $DPID now.
daemon_now() {
	# No fork but getfattr's: this runs inside the seal latency's window.
	local line st k v _ t
	read -r line <"/proc/$DPID/stat"
	read -r -a st <<<"${line##*) }"
	t=$((st[11] + st[12]))
	printf -v DAEMON_CPU '%d.%02d' $((t / CLK_TCK)) $((t % CLK_TCK * 100 / CLK_TCK))
	while read -r k v _; do
		case $k in VmHWM:) DAEMON_HWM=$v ;; VmRSS:) DAEMON_RSS=$v ;; esac
	done <"/proc/$DPID/status"
}
# backlog_now MNT: BACKLOG_BYTES, BACKLOG_FILES from the status xattr.
backlog_now() {
	local j
	j=$(getfattr -n user.sqfs-stage.status --only-values "$1" 2>/dev/null || true)
	BACKLOG_BYTES= BACKLOG_FILES=
	[[ $j =~ \"queued_bytes\":\ *([0-9]+) ]] && BACKLOG_BYTES=${BASH_REMATCH[1]}
	[[ $j =~ \"queued_files\":\ *([0-9]+) ]] && BACKLOG_FILES=${BASH_REMATCH[1]}
	return 0
}
sampler_start() {	# MNT
	SSTART=$EPOCHREALTIME
	python3 "$SAMPLER" "$DPID" "$1" "$S/samples.csv" 0.5 &
	SPID=$!
	PIDS+=("$SPID")
}
# stage_seal MNT: sqfs-seal (timed as process "seal"), wait for the daemon.
# First the sampler stops reading the xattr (see sampler.py); the time that
# takes is PAUSE (seconds, ~0.01), which callers subtract from their walls.
stage_seal() {
	local h0=$EPOCHREALTIME i
	if [[ -n ${SPID-} ]]; then
		: >"$S/samples.csv.noxattr"
		for ((i = 0; i < 500; i++)); do
			[[ -e $S/samples.csv.ack ]] && break
			kill -0 "$SPID" 2>/dev/null || break
			sleep 0.01
		done
		[[ -e $S/samples.csv.ack ]] || ! kill -0 "$SPID" 2>/dev/null || die "the sampler did not stop reading the xattr"
	fi
	PAUSE=$(elapsed "$h0" "$EPOCHREALTIME")
	# The image is complete when the seal returns; the unmount, the removal
	# of the spool and the daemon's exit follow (teardown, timed apart).
	"$TM" "$S/seal" "$SEAL" --json --keep "$1" >"$S/seal.json"
	IMAGE_T=$(minus "$EPOCHREALTIME" "$PAUSE")
	# Fragment blocks no rehearsal had compressed: the seal's own work.
	SEAL_FRAGS=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["fragments"] - d["stored_fragments"], d["fragments"])' "$S/seal.json") ||
		die "sqfs-seal --json printed no summary"
	fusermount3 -u "$1"
	local rc=0
	wait "$TPID" || rc=$?
	[[ $rc -eq 0 ]] || die "sqfs-stage exited with status $rc"
	unset 'MOUNTS[${#MOUNTS[@]}-1]'
	if [[ -n ${SPID-} ]]; then
		wait "$SPID" 2>/dev/null || true
		SPID=
	fi
	PIDS=()	# all of them have exited: never signal a recycled pid
}
# keep_samples MODE CASE COMP JOBS TOOL REP: the sampler's rows into $SCSV.
keep_samples() {
	[[ -s $S/samples.csv ]] || return 0
	[[ -s $SCSV ]] || echo "mode,case,comp,jobs,tool,rep,$(head -n1 "$S/samples.csv")" >"$SCSV"
	tail -n +2 "$S/samples.csv" | sed "s|^|$1,$2,$3,$4,$5,$6,|" >>"$SCSV"
}
# samples_summary FIELD ...: python over $S/samples.csv
backlog_max() {
	python3 -c "
import csv,sys
v=[int(r['queued_bytes']) for r in csv.DictReader(open(sys.argv[1])) if r['queued_bytes']]
print(max(v) if v else '')" "$S/samples.csv"
}

warm() {
	[[ ${1-} == quiet ]] || log "warming the page cache with the corpus ($CDIR)"
	tar -C "$TREE" -cf - . | cat >/dev/null
	cat "$CDIR/corpus.tar" "$CDIR/rootfs.tar.xz" >/dev/null
}

# --- mode: pack ------------------------------------------------------------------
mode_pack() {
	local comps=${COMPS:-gzip,xz,lzo,lz4,zstd,zstd:19} rep comp j t0 t1 img cmd
	for ((rep = 1; rep <= REPS; rep++)); do
		for comp in ${comps//,/ }; do
			comp_args "$comp"
			for j in ${JOBS//,/ }; do
				img=$WORK/img/out.sqfs
				new_sample
				cmd="sqfs-pack -q -c $OURS -b $BS -j $j TREE IMG"
				note_cmd pack sqfs-pack "$cmd"
				t0=$EPOCHREALTIME
				"$TM" "$S/sqfs-pack" "$PACK" -q -c "$OURS" -b "$BS" -j "$j" "$TREE" "$img"
				t1=$EPOCHREALTIME
				record pack pack "$comp" "$j" sqfs-pack "$rep" "$(elapsed "$t0" "$t1")" "$img" "$cmd"

				new_sample
				cmd="mksquashfs TREE IMG -noappend -quiet -no-progress ${MKSQ[*]} -b $BS -processors $j"
				note_cmd pack mksquashfs "$cmd"
				t0=$EPOCHREALTIME
				"$TM" "$S/mksquashfs" mksquashfs "$TREE" "$img" -noappend -quiet -no-progress "${MKSQ[@]}" \
					-b "$BS" -processors "$j" >/dev/null
				t1=$EPOCHREALTIME
				record pack pack "$comp" "$j" mksquashfs "$rep" "$(elapsed "$t0" "$t1")" "$img" "$cmd"

				new_sample
				cmd="gensquashfs -q -f ${NG[*]} -b 131072 -j $j -e -T --keep-time --keep-xattr --pack-dir TREE IMG"
				note_cmd pack gensquashfs "$cmd"
				t0=$EPOCHREALTIME
				"$TM" "$S/gensquashfs" gensquashfs -q -f "${NG[@]}" -b 131072 -j "$j" -e -T --keep-time \
					--keep-xattr --pack-dir "$TREE" "$img" >/dev/null
				t1=$EPOCHREALTIME
				record pack pack "$comp" "$j" gensquashfs "$rep" "$(elapsed "$t0" "$t1")" "$img" "$cmd"

				new_sample
				cmd="sqfs-pack --tar -q -c $OURS -b $BS -j $j IMG < corpus.tar"
				note_cmd pack sqfs-pack-tar "$cmd"
				t0=$EPOCHREALTIME
				"$TM" "$S/sqfs-pack-tar" "$PACK" --tar -q -c "$OURS" -b "$BS" -j "$j" "$img" <"$CDIR/corpus.tar"
				t1=$EPOCHREALTIME
				record pack pack "$comp" "$j" sqfs-pack-tar "$rep" "$(elapsed "$t0" "$t1")" "$img" "$cmd"

				new_sample
				cmd="tar2sqfs -q -f ${NG[*]} -b 131072 -j $j -e -T IMG < corpus.tar"
				note_cmd pack tar2sqfs "$cmd"
				t0=$EPOCHREALTIME
				"$TM" "$S/tar2sqfs" tar2sqfs -q -f "${NG[@]}" -b 131072 -j "$j" -e -T "$img" \
					<"$CDIR/corpus.tar" >/dev/null
				t1=$EPOCHREALTIME
				record pack pack "$comp" "$j" tar2sqfs "$rep" "$(elapsed "$t0" "$t1")" "$img" "$cmd"
			done
		done
	done
}

# --- producers ---------------------------------------------------------------------
DEBS=${SQFS_ROOTFS_CACHE:-/var/cache/sqfs-stage-tests/rootfs}/bookworm-minbase-debs.tgz
MIRROR=${BENCH_MIRROR:-http://deb.debian.org/debian}
# produce CASE DST: the producer writing a tree into DST (processes timed).
produce() {
	case $1 in
	cp) "$TM" "$S/cp" cp -a "$TREE/." "$2/" ;;
	tarxz) "$TM" "$S/xz" xz -dc "$CDIR/rootfs.tar.xz" |
		"$TM" "$S/tar" tar --numeric-owner --xattrs --xattrs-include='*' -xpf - -C "$2" ;;
	debootstrap)
		if [[ -s $DEBS ]]; then
			"$TM" "$S/debootstrap" debootstrap --variant=minbase --unpack-tarball="$DEBS" bookworm "$2" "$MIRROR" \
				>>"$WORK/debootstrap.log" 2>&1
		else
			"$TM" "$S/debootstrap" debootstrap --variant=minbase bookworm "$2" "$MIRROR" >>"$WORK/debootstrap.log" 2>&1
		fi ;;
	*) die "unknown producer $1" ;;
	esac
}
produce_cmd() {
	case $1 in
	cp) echo "cp -a TREE/. DST/" ;;
	tarxz) echo "xz -dc rootfs.tar.xz | tar --numeric-owner --xattrs --xattrs-include='*' -xpf - -C DST" ;;
	debootstrap) if [[ -s $DEBS ]]; then echo "debootstrap --variant=minbase --unpack-tarball=$DEBS bookworm DST"
		else echo "debootstrap --variant=minbase bookworm DST $MIRROR"; fi ;;
	esac
}
# stream CASE: the producer as a tar stream on stdout (processes timed; the
# last one's end is the producer's exit).
stream() {
	case $1 in
	cp) "$TM" "$S/tar-c" tar --numeric-owner --xattrs --xattrs-include='*' -C "$TREE" -cf - . ;;
	tarxz) "$TM" "$S/xz" xz -dc "$CDIR/rootfs.tar.xz" ;;
	esac
}
stream_cmd() {
	case $1 in
	cp) echo "tar --numeric-owner --xattrs --xattrs-include='*' -C TREE -cf - ." ;;
	tarxz) echo "xz -dc rootfs.tar.xz" ;;
	esac
}
producer_end() {	# CASE: epoch of the producer's exit
	case $1 in cp) endof cp ;; tarxz) endof tar ;; debootstrap) endof debootstrap ;; esac
}
stream_end() { case $1 in cp) endof tar-c ;; tarxz) endof xz ;; esac; }

# --- mode: pipeline ------------------------------------------------------------------
mode_pipeline() {
	local comps=${COMPS:-gzip,xz,lzo,lz4,zstd,zstd:19} cases="cp tarxz" rep comp j c t0 t1 tp img mnt cmd dst
	[[ $DEBOOTSTRAP -eq 1 ]] && cases+=" debootstrap"
	for ((rep = 1; rep <= REPS; rep++)); do
		for c in $cases; do
			for comp in ${comps//,/ }; do
				comp_args "$comp"
				for j in ${JOBS//,/ }; do
					img=$WORK/img/out.sqfs mnt=$WORK/mnt
					# sqfs-stage
					new_sample
					cmd="sqfs-stage -f -o comp=$OURS,block_size=$BS,jobs=$j,suid,dev$XOPTS IMG MNT & $(produce_cmd "$c" | sed 's/DST/MNT/g'); sqfs-seal --json --keep MNT; fusermount3 -u MNT"
					note_cmd pipeline "stage/$c" "$cmd"
					spool_inodes_reset
					t0=$EPOCHREALTIME
					stage_start "$img" "$mnt" "comp=$OURS,block_size=$BS,jobs=$j,suid,dev$XOPTS"
					sampler_start "$mnt"
					produce "$c" "$mnt"
					tp=$(producer_end "$c")
					daemon_now
					backlog_now "$mnt"
					local hwm=$DAEMON_HWM bb=$BACKLOG_BYTES bf=$BACKLOG_FILES
					stage_seal "$mnt"
					t1=$(minus "$EPOCHREALTIME" "$PAUSE")
					keep_samples pipeline "$c" "$comp" "$j" stage "$rep"
					local dcpu
					dcpu=$(awk '{print $2 + $3}' "$S/daemon.time" | tail -n1)
					record pipeline "$c" "$comp" "$j" stage "$rep" "$(elapsed "$t0" "$t1")" "$img" "$cmd" \
						producer_s="$(elapsed "$t0" "$tp")" seal_s="$(elapsed "$tp" "$IMAGE_T")" \
						teardown_s="$(elapsed "$IMAGE_T" "$t1")" daemon_hwm_kb="$(awk '{print $4}' "$S/daemon.time" | tail -n1)" daemon_hwm_exit_kb="$hwm" \
						daemon_cpu_s="$dcpu" backlog_exit_bytes="$bb" backlog_exit_files="$bf" \
						backlog_max_bytes="$(backlog_max)" seal_frags="${SEAL_FRAGS% *}" \
						frags="${SEAL_FRAGS#* }"

					# tmpfs + mksquashfs
					new_sample
					dst=$TMPFS/tree
					mkdir -p "$dst"
					cmd="$(produce_cmd "$c" | sed 's|DST|TMPFS/tree|g'); mksquashfs TMPFS/tree IMG -noappend -quiet -no-progress ${MKSQ[*]} -b $BS -processors $j"
					note_cmd pipeline "tmpfs+mksquashfs/$c" "$cmd"
					t0=$EPOCHREALTIME
					produce "$c" "$dst"
					tp=$(producer_end "$c")
					"$TM" "$S/mksquashfs" mksquashfs "$dst" "$img" -noappend -quiet -no-progress "${MKSQ[@]}" \
						-b "$BS" -processors "$j" >/dev/null
					t1=$EPOCHREALTIME
					rm -rf "$dst"
					record pipeline "$c" "$comp" "$j" tmpfs+mksquashfs "$rep" "$(elapsed "$t0" "$t1")" "$img" "$cmd" \
						producer_s="$(elapsed "$t0" "$tp")" seal_s="$(elapsed "$tp" "$t1")"

					[[ $c == debootstrap ]] && continue
					# stream | tar2sqfs
					new_sample
					cmd="$(stream_cmd "$c") | tar2sqfs -q -f ${NG[*]} -b 131072 -j $j -e -T IMG"
					note_cmd pipeline "stream+tar2sqfs/$c" "$cmd"
					t0=$EPOCHREALTIME
					stream "$c" | "$TM" "$S/tar2sqfs" tar2sqfs -q -f "${NG[@]}" -b 131072 -j "$j" -e -T "$img" >/dev/null
					t1=$EPOCHREALTIME
					tp=$(stream_end "$c")
					record pipeline "$c" "$comp" "$j" stream+tar2sqfs "$rep" "$(elapsed "$t0" "$t1")" "$img" "$cmd" \
						producer_s="$(elapsed "$t0" "$tp")" seal_s="$(elapsed "$tp" "$t1")"

					# stream | sqfs-pack --tar
					new_sample
					cmd="$(stream_cmd "$c") | sqfs-pack --tar -q -c $OURS -b $BS -j $j IMG"
					note_cmd pipeline "stream+sqfs-pack/$c" "$cmd"
					t0=$EPOCHREALTIME
					stream "$c" | "$TM" "$S/sqfs-pack" "$PACK" --tar -q -c "$OURS" -b "$BS" -j "$j" "$img"
					t1=$EPOCHREALTIME
					tp=$(stream_end "$c")
					record pipeline "$c" "$comp" "$j" stream+sqfs-pack "$rep" "$(elapsed "$t0" "$t1")" "$img" "$cmd" \
						producer_s="$(elapsed "$t0" "$tp")" seal_s="$(elapsed "$tp" "$t1")"
				done
			done
		done
	done
}

# --- mode: fuse --------------------------------------------------------------------
FUSE_FILES=${BENCH_FUSE_FILES:-100000}
FUSE_SEQ=${BENCH_FUSE_SEQ:-2G}
fuse_write() {	# CASE DST
	case $1 in
	cp) "$TM" "$S/cp" cp -a "$TREE/." "$2/" ;;
	files) "$TM" "$S/mkfiles" python3 "$HERE/mkfiles.py" "$2" "$FUSE_FILES" 1024 ;;
	seqwrite) "$TM" "$S/pattern" python3 "$HERE/pattern.py" "$FUSE_SEQ" |
		"$TM" "$S/dd" dd of="$2/big" bs=1M iflag=fullblock status=none ;;
	esac
}
fuse_cmd() {
	case $1 in
	cp) echo "cp -a TREE/. DST/" ;;
	files) echo "python3 tools/bench/mkfiles.py DST $FUSE_FILES 1024" ;;
	seqwrite) echo "python3 tools/bench/pattern.py $FUSE_SEQ | dd of=DST/big bs=1M iflag=fullblock" ;;
	esac
}
mode_fuse() {
	local comps=${COMPS:-zstd} rep c comp j t0 t1 img mnt cmd dst
	for ((rep = 1; rep <= REPS; rep++)); do
		for c in ${FUSE_CASES//,/ }; do
			for comp in ${comps//,/ }; do
				comp_args "$comp"
				for j in ${JOBS//,/ }; do
					img=$WORK/img/out.sqfs mnt=$WORK/mnt
					new_sample
					cmd="sqfs-stage -f -o comp=$OURS,block_size=$BS,jobs=$j,suid,dev$XOPTS IMG MNT & $(fuse_cmd "$c" | sed 's/DST/MNT/g'); sqfs-seal --json --keep MNT; fusermount3 -u MNT"
					note_cmd fuse "mount/$c" "$cmd"
					spool_inodes_reset
					stage_start "$img" "$mnt" "comp=$OURS,block_size=$BS,jobs=$j,suid,dev$XOPTS"
					sampler_start "$mnt"
					t0=$EPOCHREALTIME
					fuse_write "$c" "$mnt"
					t1=$EPOCHREALTIME
					daemon_now
					# The write phase: producers + the daemon so far (pseudo process "daemon-write").
					echo "$(elapsed "$t0" "$t1") $DAEMON_CPU 0 $DAEMON_HWM" >"$S/daemon-write.time"
					stage_seal "$mnt"
					local ts
					ts=$(elapsed "$t1" "$IMAGE_T")
					local td
					td=$(elapsed "$IMAGE_T" "$(minus "$EPOCHREALTIME" "$PAUSE")")
					mv "$S/daemon.time" "$S/daemon.rusage"
					mv "$S/seal.time" "$S/seal.rusage"
					keep_samples fuse "$c" "$comp" "$j" mount "$rep"
					record fuse "$c" "$comp" "$j" mount "$rep" "$(elapsed "$t0" "$t1")" "$img" "$cmd" seal_s="$ts" teardown_s="$td" \
						daemon_cpu_s="$(awk '{print $2 + $3}' "$S/daemon.rusage" | tail -n1)" \
						daemon_hwm_kb="$(awk '{print $4}' "$S/daemon.rusage" | tail -n1)"

					new_sample
					dst=$TMPFS/tree
					mkdir -p "$dst"
					note_cmd fuse "tmpfs/$c" "$(fuse_cmd "$c" | sed 's|DST|TMPFS/tree|g')"
					t0=$EPOCHREALTIME
					fuse_write "$c" "$dst"
					t1=$EPOCHREALTIME
					rm -rf "$dst"
					record fuse "$c" "$comp" "$j" tmpfs "$rep" "$(elapsed "$t0" "$t1")" "" "$(fuse_cmd "$c")"
				done
			done
		done
	done
}

# --- mode: scale -------------------------------------------------------------------
SCALE_FILES=${BENCH_SCALE_FILES:-1000000}
SCALE_BIG=${BENCH_SCALE_BIG:-20G}
rss_summary() {	# the sampler's VmRSS during the write (rows with t <= T): first max last
	python3 -c "
import csv,sys
rows=[r for r in csv.DictReader(open(sys.argv[1])) if float(r['t']) <= float(sys.argv[2])]
v=[int(r['vmrss_kb']) for r in rows]
print(v[0], max(v), v[-1]) if v else print('  ')" "$S/samples.csv" "$1"
}
mode_scale() {
	local comps=${COMPS:-zstd} rep c comp j t0 t1 img mnt cmd size
	for ((rep = 1; rep <= REPS; rep++)); do
		for c in files big; do
			for comp in ${comps//,/ }; do
				comp_args "$comp"
				for j in ${JOBS//,/ }; do
					img=$WORK/img/out.sqfs mnt=$WORK/mnt
					new_sample
					if [[ $c == files ]]; then
						size="$SCALE_FILES files"
						cmd="python3 tools/bench/mkfiles.py MNT $SCALE_FILES 100"
					else
						size=$SCALE_BIG
						cmd="python3 tools/bench/pattern.py $SCALE_BIG | dd of=MNT/big bs=1M iflag=fullblock"
					fi
					cmd="sqfs-stage -f -o comp=$OURS,block_size=$BS,jobs=$j$XOPTS IMG MNT & $cmd; sqfs-seal --json --keep MNT; fusermount3 -u MNT"
					note_cmd scale "stage/$c" "$cmd"
					spool_inodes_reset
					t0=$EPOCHREALTIME
					stage_start "$img" "$mnt" "comp=$OURS,block_size=$BS,jobs=$j$XOPTS"
					sampler_start "$mnt"
					t0=$EPOCHREALTIME
					if [[ $c == files ]]; then
						"$TM" "$S/mkfiles" python3 "$HERE/mkfiles.py" "$mnt" "$SCALE_FILES" 100
					else
						"$TM" "$S/pattern" python3 "$HERE/pattern.py" "$SCALE_BIG" |
							"$TM" "$S/dd" dd of="$mnt/big" bs=1M iflag=fullblock status=none
					fi
					t1=$EPOCHREALTIME
					daemon_now
					local hwm=$DAEMON_HWM rs
					stage_seal "$mnt"
					local tend
					tend=$(minus "$EPOCHREALTIME" "$PAUSE")
					# the sampler's t counts from its start ($SSTART, just after the mount)
					rs=($(rss_summary "$(elapsed "$SSTART" "$t1")"))
					keep_samples scale "$c" "$comp" "$j" stage "$rep"
					record scale "$c" "$comp" "$j" stage "$rep" "$(elapsed "$t0" "$tend")" "$img" "$cmd" \
						size="$size" producer_s="$(elapsed "$t0" "$t1")" seal_s="$(elapsed "$t1" "$IMAGE_T")" \
						teardown_s="$(elapsed "$IMAGE_T" "$tend")" \
						hwm_exit_kb="$hwm" rss_first_kb="${rs[0]-}" rss_maxw_kb="${rs[1]-}" rss_last_kb="${rs[2]-}" \
						daemon_hwm_kb="$(awk '{print $4}' "$S/daemon.time" | tail -n1)" \
						daemon_cpu_s="$(awk '{print $2 + $3}' "$S/daemon.time" | tail -n1)"
				done
			done
		done
	done
}

# --- mode: scaling -----------------------------------------------------------------
mode_scaling() {
	local comps=${COMPS:-gzip,xz,lzo,lz4,zstd,zstd:19} rep comp j t0 t1 img cmd
	for ((rep = 1; rep <= REPS; rep++)); do
		for comp in ${comps//,/ }; do
			comp_args "$comp"
			for j in ${SCALING_JOBS//,/ }; do
				img=$WORK/img/out.sqfs
				new_sample
				cmd="sqfs-pack -q -c $OURS -b $BS -j J TREE IMG"
				note_cmd scaling sqfs-pack "$cmd"
				t0=$EPOCHREALTIME
				"$TM" "$S/sqfs-pack" "$PACK" -q -c "$OURS" -b "$BS" -j "$j" "$TREE" "$img"
				t1=$EPOCHREALTIME
				record scaling scaling "$comp" "$j" sqfs-pack "$rep" "$(elapsed "$t0" "$t1")" "$img" "$cmd"
				new_sample
				cmd="mksquashfs TREE IMG -noappend -quiet -no-progress ${MKSQ[*]} -b $BS -processors J"
				note_cmd scaling mksquashfs "$cmd"
				t0=$EPOCHREALTIME
				"$TM" "$S/mksquashfs" mksquashfs "$TREE" "$img" -noappend -quiet -no-progress "${MKSQ[@]}" \
					-b "$BS" -processors "$j" >/dev/null
				t1=$EPOCHREALTIME
				record scaling scaling "$comp" "$j" mksquashfs "$rep" "$(elapsed "$t0" "$t1")" "$img" "$cmd"
			done
		done
	done
}

# --- the report ------------------------------------------------------------------------
header() {	# MODE
	local mode=$1
	echo "# sqfs-stage benchmark: $mode"
	echo
	[[ -n $NOTE ]] && { echo "**$NOTE**"; echo; }
	echo "- started: $STAMP (UTC), host \`$HOST\`; finished $(date -u +%Y%m%dT%H%MZ)"
	echo "- \`uname -a\`: \`$(uname -a)\`"
	echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -n1); nproc $NPROC; $(lscpu | grep -E '^(Thread|Core|Socket)' | sed 's/  */ /g' | paste -sd ';' -)"
	# FUSE round trips cost what waking an idle CPU costs: in a VM, whether
	# an idle vCPU polls before it halts changes the mount's figures 2-3x.
	echo "- CPU idle: driver $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none), governor $(cat /sys/devices/system/cpu/cpuidle/current_governor 2>/dev/null || cat /sys/devices/system/cpu/cpuidle/current_governor_ro 2>/dev/null || echo none)$([[ -r /sys/module/haltpoll/parameters/guest_halt_poll_ns ]] && echo ", guest_halt_poll_ns $(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns)")"
	echo "- FUSE over io_uring (fuse module's enable_uring): $(cat "$URING_PARAM" 2>/dev/null || echo 'not in this kernel')$([[ $FUSE_URING != keep ]] && echo " (set by --fuse-uring $FUSE_URING)")"
	echo "- work dir file system: ${WORK_FS:-?}$([[ $WORK_NOJOURNAL -eq 1 ]] && echo ', ext4 without a journal')$([[ $DROP_CACHES -eq 1 ]] && echo "; before each mount the script synced, dropped the clean caches (freed inodes, see run.sh --help) and read the corpus again")"
	echo "- proactive reclaim (DAMON kdamonds on): $(cat /sys/kernel/mm/damon/admin/kdamonds/*/state 2>/dev/null | grep -c '^on$' || true)$(grep -qx on /sys/kernel/mm/damon/admin/kdamonds/*/state 2>/dev/null && echo ' (the corpus is read again before every sample)')"
	[[ $IDLE_SPIN -gt 0 ]] && echo "- **load beside every sample: $IDLE_SPIN busy loop(s) at SCHED_IDLE** (\`BENCH_IDLE_SPIN=$IDLE_SPIN\`: \`chrt -i 0 sh -c 'while :; do :; done'\`)"
	[[ -n ${BENCH_STAGE_OPTS-} ]] && echo "- extra options of every mount: \`BENCH_STAGE_OPTS=$BENCH_STAGE_OPTS\`"
	echo "- RAM: $(free -h | awk '/^Mem:/ {print $2}') ($(awk '/MemTotal/ {print $2, $3}' /proc/meminfo)); load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "- work dir (images, spools): \`$WORKBASE\` on $(df -T "$WORKBASE" | awk 'NR==2 {print $2, $1}'); tmpfs trees: private tmpfs"
	echo "- sqfs-stage: \`$SRC_HEAD\`$SRC_STATE, branch $(git -C "$REPO" rev-parse --abbrev-ref HEAD), build \`$BUILD\` ($(meson introspect --buildoptions "$BUILD" 2>/dev/null | python3 -c 'import json,sys; print(" ".join("%s=%s" % (o["name"], o["value"]) for o in json.load(sys.stdin) if o["name"] in ("buildtype","optimization","b_ndebug")))' 2>/dev/null || echo '?')); $("$PACK" --version 2>&1 | head -n1)"
	echo "- peers: $(mksquashfs -version 2>&1 | head -n1); $(gensquashfs --version 2>&1 | head -n1); $(tar2sqfs --version 2>&1 | head -n1)"
	echo "- others: $(cp --version | head -n1); $(tar --version | head -n1); $(xz --version | head -n1); $(dd --version | head -n1); Python $(python3 -c 'import platform; print(platform.python_version())'); fuse $(fusermount3 -V 2>&1 | awk '{print $NF}')"
	echo "- corpus \`$CDIR\`:"
	sed 's/^/    /' "$CDIR/info.txt"
	echo "- run: \`tools/bench/run.sh $ARGS\`; $REPS repetition(s) per case, interleaved (repetition 1 of every case and tool, then repetition 2, ...); warm page cache (corpus read before every sample, untimed, and again after each cache drop); \`sync\` between samples (untimed)"
	echo "- timing: every process under GNU time (\`/usr/bin/time -f '%e %U %S %M'\`, the sqfs-stage daemon too: run with -f under it); wall of a sample measured around the whole case; CPU = user+sys summed over every process of the sample; RSS = the largest process's peak (VmHWM); raw samples with each process's numbers in \`$(basename "$CSV")\`"
	echo
	echo "### Commands"
	echo
	echo "TREE = corpus tree, IMG = image on the work dir, MNT = a sqfs-stage mount, TMPFS = the private tmpfs; -j/-processors/jobs= and the compressor as in the table rows."
	echo
	if [[ -s $WORK/commands.tsv ]]; then
		awk -F'\t' -v m="$mode" '$1 == m {printf "- %s: `%s`\n", $2, $3}' "$WORK/commands.tsv"
	fi
	echo
	echo "### Results"
	echo
}
report() {	# MODE
	local f=$BASE-$1.md
	{ header "$1"; python3 "$STATS" report "$CSV" "$1"; } >"$f"
	log "wrote $f"
}

ARGS="--corpus $CORPUS --reps $REPS --jobs $JOBS --modes $MODES${COMPS:+ --comps $COMPS}"
[[ $MODES == *scaling* ]] && ARGS+=" --scaling-jobs $SCALING_JOBS"
[[ $DEBOOTSTRAP -eq 1 ]] && ARGS+=" --debootstrap"
[[ -n $TAG ]] && ARGS+=" --tag $TAG"
log "corpus $CDIR; results $BASE-*; work $WORK"
warm
for ((i = 0; i < IDLE_SPIN; i++)); do
	chrt -i 0 sh -c 'while :; do :; done' &
	SPINS+=($!)
done
for m in ${MODES//,/ }; do
	log "=== mode $m"
	"mode_$m"
	report "$m"
done
log "done"
