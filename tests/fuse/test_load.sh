#!/bin/bash
# test_load.sh SQFS_STAGE SQFS_SEAL SQFS_PACK
#
# Sixteen writers at once for LOAD_SECONDS (default 20) on one mount:
#   6 tar extractions and 5 cp -a of a generated source tree (load.py
#     mktree), each writer over and over: its first copy stays, later
#     rounds alternate between two slots, removing the old slot first;
#   5 "make -j" style writers (load.py make): sources renamed over, object
#     files written in pieces, an archive growing by appends, deletions,
#     scratch directories, a binary renamed over with a hard link to the
#     old one;
# while 2 readers check the sha256 of every finished first copy, again and
# again, the whole time, and halfway a sqfs-seal --keep runs (sealed, or
# refused because files are open for writing: never stuck).  Every writer and the seal run under timeouts (a
# deadlock is a failure, not a hang).  Then:
#   - no writer or reader failed; the readers checked files;
#   - the daemon's peak RSS (VmHWM, before the seal) is at most 64 MiB plus
#     256 bytes per staged inode (the figure is printed; not judged when
#     the daemon is built with a sanitizer);
#   - the metadata journal stays bounded (compacted), and after kill -9 of
#     the daemon, sqfs-stage --recover brings the whole tree back;
#   - the seal (of the recovered tree) succeeds and the daemon exits 0;
#   - the kernel's view of the image equals a reference tree made on disk
#     from the same rounds (tree_cmp), and the image is byte-identical to
#     sqfs-pack of the reference.
# Environment: LOAD_SECONDS (20), LOAD_TIMEOUT (extra seconds a writer may
# take past LOAD_SECONDS, 240), LOAD_STAGED_CMP (set: compare the staged
# view with the reference too, before the seal).
set -euo pipefail
# shellcheck source=tests/fuse/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "$@"
need_loop
need_cmd tar cp sha256sum timeout getfattr
DUR=${LOAD_SECONDS:-20}
EXTRA=${LOAD_TIMEOUT:-240}
MT=1700000000
T0=1650000000
COMP=zstd:3
BS=64K
LOAD=("python3" "$FUSE_TESTS_DIR/load.py")
section() { log "== [$((SECONDS))s] $*"; }

section "source tree"
SRC=$WORK/src
"${LOAD[@]}" mktree "$SRC" 11
tar -C "$SRC" -cf "$WORK/src.tar" .
(cd "$SRC" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$WORK/src.sha256"
log "source: $(find "$SRC" | wc -l) entries, $(du -sh --apparent-size "$SRC" | cut -f1)"

M=$WORK/m
stage_mount "$WORK/load.sqfs" "$M" -o comp=$COMP,block_size=$BS,mkfs_time=$MT,jobs=2
mkdir "$M/tar" "$M/cp" "$M/make" "$WORK/rounds" "$WORK/err"
# The reference tree: the make-style writers make it as they go.
REF=$WORK/ref
mkdir -p "$REF/tar" "$REF/cp" "$REF/make"

# copy_writer KIND I: rounds of tar x / cp -a until the deadline; the first
# into KIND/I/first (then marked done for the readers), later ones into
# KIND/I/r0 and r1 by turns.  (Run through bash -c, as are the readers.)
# shellcheck disable=SC2317
copy_writer() {
	local kind=$1 i=$2 k=0 slot dir
	mkdir "$M/$kind/$i"
	while ((k == 0 || $(date +%s) < DEADLINE)); do
		if ((k == 0)); then slot=first; else slot=r$((k % 2)); fi
		dir=$M/$kind/$i/$slot
		rm -rf "$dir"
		if [[ $kind == tar ]]; then
			mkdir "$dir"
			tar -C "$dir" -xf "$WORK/src.tar" || { echo "tar x round $k" >>"$WORK/err/$kind$i"; return 1; }
		else
			cp -a "$SRC" "$dir" || { echo "cp -a round $k" >>"$WORK/err/$kind$i"; return 1; }
		fi
		((k == 0)) && touch "$M/$kind/$i/first.done"
		k=$((k + 1))
	done
	echo "$k" >"$WORK/rounds/$kind$i"
}

# reader N: sha256 of every finished first copy, until the stop file.
# shellcheck disable=SC2317
reader() {
	local n=0 d
	while [[ ! -e $WORK/stop ]]; do
		for d in "$M"/tar/*/first "$M"/cp/*/first; do
			[[ -e $d.done ]] || continue
			if ! (cd "$d" && sha256sum --quiet -c "$WORK/src.sha256") >>"$WORK/err/reader$1" 2>&1; then
				echo "reader $1: $d" >>"$WORK/err/reader$1"
				return 1
			fi
			n=$((n + 1))
		done
		sleep 0.2
	done
	echo "$n" >"$WORK/rounds/reader$1"
}

section "load: 16 writers, 2 readers, $DUR s"
DEADLINE=$(($(date +%s) + DUR))
export DEADLINE
pids=() names=()
for i in 0 1 2 3 4 5; do
	timeout $((DUR + EXTRA)) bash -c "$(declare -f copy_writer); M=$M WORK=$WORK SRC=$SRC DEADLINE=$DEADLINE copy_writer tar $i" &
	pids+=($!) names+=("tar$i")
done
for i in 0 1 2 3 4; do
	timeout $((DUR + EXTRA)) bash -c "$(declare -f copy_writer); M=$M WORK=$WORK SRC=$SRC DEADLINE=$DEADLINE copy_writer cp $i" &
	pids+=($!) names+=("cp$i")
done
for i in 0 1 2 3 4; do
	timeout $((DUR + EXTRA)) "${LOAD[@]}" make "$M/make/$i" $((100 + i)) --until "$DEADLINE" \
		--out "$WORK/rounds/make$i" --ref "$REF/make/$i" 2>>"$WORK/err/make$i" &
	pids+=($!) names+=("make$i")
done
for i in 0 1; do
	timeout $((DUR + EXTRA)) bash -c "$(declare -f reader); M=$M WORK=$WORK reader $i" &
	pids+=($!) names+=("reader$i")
done
# Halfway through, a seal --keep in the middle of it all: it may fail for
# files open for writing (that is the rule), but must answer, and the load
# goes on.
(
	sleep $((DUR / 2))
	rc=0
	timeout 300 "$SEAL" --keep --quiet "$M" >"$WORK/midseal.out" 2>&1 || rc=$?
	echo "$rc" >"$WORK/midseal.rc"
) &
midseal=$!
# The readers stop when the writers are done.
for ((j = 0; j < ${#pids[@]}; j++)); do
	[[ ${names[j]} == reader0 ]] && touch "$WORK/stop"
	rc=0
	wait "${pids[j]}" || rc=$?
	if ((rc == 124)); then
		fail "${names[j]} still running $EXTRA s after the end of the load (deadlock?)"
	elif ((rc != 0)); then
		fail "${names[j]} exited $rc: $(head -c 2000 "$WORK/err/${names[j]}" 2>/dev/null)"
	fi
done
wait "$midseal" || true
case $(cat "$WORK/midseal.rc") in
0) ok "seal --keep during the load: sealed" ;;
1) if grep -q 'still open for writing' "$WORK/midseal.out"; then
	ok "seal --keep during the load: refused, files open for writing"
   else
	fail "seal --keep during the load: $(cat "$WORK/midseal.out")"
   fi ;;
124) fail "seal --keep during the load did not answer in 300 s (deadlock?)" ;;
*) fail "seal --keep during the load exited $(cat "$WORK/midseal.rc"): $(cat "$WORK/midseal.out")" ;;
esac
section "load done"
summary=
for f in "$WORK"/rounds/*; do summary+=" $(basename "$f")=$(cat "$f")"; done
log "rounds:$summary"
checked=$(cat "$WORK"/rounds/reader* 2>/dev/null | awk '{s += $1} END {print s + 0}')
if ((checked > 0)); then
	ok "readers checked $checked finished trees during the load"
else
	fail "the readers checked nothing"
fi

# Peak memory of the daemon before the seal, against its inode count.
hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$DPID/status")
inodes=$(find "$M" | wc -l)
limit=$(((64 << 20) + 256 * inodes))
log "daemon peak RSS: $((hwm >> 10)) MiB ($((hwm * 1024)) bytes) for $inodes staged inodes; limit $((limit >> 20)) MiB"
# Sanitizers' shadow memory makes the figure meaningless: shown, not judged.
# (ldd's output first: with pipefail, grep -q closing the pipe early would
# fail the test of the pipeline.)
libs=$(ldd "$STAGE" 2>/dev/null || true)
if grep -Eq 'lib(a|t|ub)san' <<<"$libs"; then
	log "daemon built with a sanitizer: peak RSS not judged"
elif ((hwm * 1024 <= limit)); then
	ok "peak RSS $((hwm >> 10)) MiB within 64 MiB + 256 B x $inodes inodes"
else
	fail "peak RSS $((hwm * 1024)) bytes exceeds 64 MiB + 256 B x $inodes inodes = $limit"
fi
st=$(getfattr --only-values -n user.sqfs-stage.status "$M" 2>/dev/null) || true
log "status before the seal: $st"
log "spool on disk: $(du -sh "$WORK"/.load.sqfs.spool.* | cut -f1) ($(cd "$WORK"/.load.sqfs.spool.* &&
	du -sh -- * | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $1}')), for $(du -sh "$M" | cut -f1) staged"

# The reference: the same rounds on disk.
section "reference"
for kind in tar cp; do
	for f in "$WORK"/rounds/"$kind"*; do
		i=${f##*/"$kind"}
		k=$(cat "$f")
		mkdir "$REF/$kind/$i"
		touch "$REF/$kind/$i/first.done"
		for slot in first r0 r1; do
			case $slot in
			first) ;;
			r0) ((k > 2)) || continue ;;
			r1) ((k > 1)) || continue ;;
			esac
			cp -a "$SRC" "$REF/$kind/$i/$slot"
		done
	done
done
# Times of what the writers made and of the directories above the copies.
for root in "$M" "$REF"; do
	"${LOAD[@]}" settle "$root/make" $T0
	touch -h -d @$T0 "$root" "$root"/tar "$root"/cp "$root"/tar/* "$root"/cp/* "$root"/*/*/first.done
	for d in "$root"/tar/*/* "$root"/cp/*/*; do
		[[ -d $d ]] && touch -h -d @1600000000 "$d"
	done
done
# Reads every file through the mount again: off by default (time).
[[ -n ${LOAD_STAGED_CMP-} ]] && tree_cmp "$REF" "$M" "staged view"

# The metadata journal is compacted as it grows: bounded, whatever the
# churn.  Then kill -9 and --recover: the recovered tree is what is sealed
# and judged below.
section "kill -9, recover"
SP=$(echo "$WORK"/.load.sqfs.spool.*)
jkb=$(du -sk "$SP/journal" | cut -f1)
if ((jkb <= 32 * 1024)); then
	ok "journal $((jkb >> 10)) MiB after the load (compacted)"
else
	fail "journal $((jkb >> 10)) MiB after the load (not compacted?)"
fi
kill -9 "$DPID"
wait "$DPID" 2>/dev/null || true
fusermount3 -u -z "$M"
stage_mount "$WORK/load.sqfs" "$M" --recover "$SP" -o comp=$COMP,block_size=$BS,mkfs_time=$MT,jobs=2

section "seal"
out=$(timeout 600 "$SEAL" --json "$M") || fail "sqfs-seal ($?)"
wait_daemon 0
log "seal: $out"
if loop_mount "$WORK/load.sqfs" "$WORK/k"; then
	tree_cmp "$REF" "$WORK/k" "kernel view of the image"
	loop_umount "$WORK/k"
fi
section "sqfs-pack of the reference"
"$PACK" -q --mkfs-time $MT -c $COMP -b $BS "$REF" "$WORK/ref.sqfs"
a=$(sha256sum <"$WORK/load.sqfs" | cut -d' ' -f1)
b=$(sha256sum <"$WORK/ref.sqfs" | cut -d' ' -f1)
if [[ $a == "$b" ]]; then
	ok "image sha256 equal to sqfs-pack of the reference ($(stat -c %s "$WORK/load.sqfs") bytes)"
else
	fail "image sha256 $a, sqfs-pack of the reference $b"
fi
section "done"
finish
