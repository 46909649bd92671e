#!/bin/bash
# test_fsx.sh SQFS_STAGE SQFS_SEAL SQFS_PACK FSX
#
# fsx (tests/fuse/fsx.c) on a mount with small blocks (-o block_size=4K), so
# that every close queues work for the background compression: several
# files at once, each with its own seed, FSX_OPS random operations (writes
# past EOF, truncates, reads, mmap reads, SEEK_DATA/SEEK_HOLE, hole
# punching, fsync, reopening, waiting for the compressor to go idle), every
# read checked against fsx's in-memory model.  Then:
#   - the background work really stored blocks and goes idle, and the
#     disk space of stored blocks that were rewritten is given back;
#   - the seal takes stored blocks, and the daemon exits 0;
#   - the kernel's view of the image: each file equals its final model;
#   - the image is byte-identical to sqfs-pack of the models.
# Environment: FSX_OPS (default 40000 per file), FSX_FILES (2), FSX_SEED
# (first seed, default 1; "random" picks one and prints it), FSX_MAXLEN
# (largest file, default 2M; the second file gets half of it, and so on),
# FSX_TIMEOUT (seconds for the whole run, default 600), FSX_BS (the mount's
# block size, default 4K).
set -euo pipefail
# shellcheck source=tests/fuse/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "$@"
FSX=$(realpath -- "${4:?usage: $0 SQFS_STAGE SQFS_SEAL SQFS_PACK FSX}")
need_loop
need_cmd getfattr sha256sum cmp timeout
OPS=${FSX_OPS:-40000}
FILES=${FSX_FILES:-2}
SEED=${FSX_SEED:-1}
[[ $SEED == random ]] && SEED=$((RANDOM * 32768 + RANDOM))
MAXLEN=${FSX_MAXLEN:-2M}
TMO=${FSX_TIMEOUT:-600}
MT=1700000000
COMP=zstd:3
BS=${FSX_BS:-4K}

status() { getfattr --only-values -n user.sqfs-stage.status "$1" 2>/dev/null; }
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

M=$WORK/m
MODELS=$WORK/models
mkdir -p "$MODELS"
stage_mount "$WORK/fsx.sqfs" "$M" -o comp=$COMP,block_size="$BS",mkfs_time=$MT,jobs=2
log "fsx: $FILES files, $OPS operations each, seeds $SEED.., largest $MAXLEN"

t0=$SECONDS
pids=()
maxlen=$(numfmt --from=iec "$MAXLEN")
for ((i = 0; i < FILES; i++)); do
	timeout "$TMO" "$FSX" -N "$OPS" -S $((SEED + i)) -l $((maxlen >> i)) -B "$BS" \
		-x "$M" -m "$MODELS/file$i" "$M/file$i" &
	pids+=($!)
done
for ((i = 0; i < FILES; i++)); do
	rc=0
	wait "${pids[i]}" || rc=$?
	if ((rc == 0)); then
		ok "fsx file$i (seed $((SEED + i))): every read equals the model"
	elif ((rc == 124)); then
		fail "fsx file$i (seed $((SEED + i))) did not finish in $TMO s (deadlock?)"
	else
		fail "fsx file$i (seed $((SEED + i))) exited $rc"
	fi
done
log "fsx: $((SECONDS - t0)) s"

# The background work finishes and stored blocks of these files.
st=
for ((i = 0; i < 600; i++)); do
	st=$(status "$M")
	[[ $(field "$st" queued_files) == 0 && $(field "$st" busy) == 0 ]] && break
	sleep 0.1
done
if [[ $(field "$st" queued_files) == 0 && $(field "$st" busy) == 0 ]]; then
	ok "background work idle: $st"
else
	fail "background work not idle after 60 s: $st"
fi
[[ $(field "$st" stored_blocks) -gt 0 ]] || fail "the background work stored no block: $st"
[[ $(field "$st" queued_bytes) == 0 ]] || fail "nothing queued, yet queued_bytes: $st"
# Stored blocks of data rewritten since take no disk space: what the
# store holds is at most about the files' own size (4K blocks).
blocks_kb=$(du -sk "$WORK"/.fsx.sqfs.spool.*/blocks | cut -f1)
files_kb=$(du -sk --apparent-size "$MODELS" | cut -f1)
log "spool: $(du -sh "$WORK"/.fsx.sqfs.spool.* | cut -f1), of which stored blocks ${blocks_kb} KiB" \
	"(apparent $(du -sk --apparent-size "$WORK"/.fsx.sqfs.spool.*/blocks | cut -f1) KiB)," \
	"for $files_kb KiB of files"
if ((blocks_kb <= files_kb + 1024)); then
	ok "stored blocks take $blocks_kb KiB on disk for $files_kb KiB of files"
else
	fail "stored blocks take $blocks_kb KiB on disk for $files_kb KiB of files (dead blocks kept?)"
fi

find "$M" "$MODELS" -exec touch -h -d @1650000000 {} +
out=$("$SEAL" --json "$M") || fail "sqfs-seal"
wait_daemon 0
taken=$(field "$out" stored_blocks)
if [[ $taken -gt 0 ]]; then ok "seal took $taken stored blocks"; else fail "seal took no stored block: $out"; fi

if loop_mount "$WORK/fsx.sqfs" "$WORK/k"; then
	for ((i = 0; i < FILES; i++)); do
		if cmp "$MODELS/file$i" "$WORK/k/file$i"; then
			ok "image file$i equals its model ($(stat -c %s "$MODELS/file$i") bytes)"
		else
			fail "image file$i differs from its model (seed $((SEED + i)))"
		fi
	done
	loop_umount "$WORK/k"
fi
"$PACK" -q --mkfs-time $MT -c $COMP -b "$BS" "$MODELS" "$WORK/ref.sqfs"
a=$(sha256sum <"$WORK/fsx.sqfs" | cut -d' ' -f1)
b=$(sha256sum <"$WORK/ref.sqfs" | cut -d' ' -f1)
if [[ $a == "$b" ]]; then
	ok "image sha256 equal to sqfs-pack of the models"
else
	fail "image sha256 $a, sqfs-pack of the models $b"
fi
finish
