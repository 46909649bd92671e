#!/bin/bash
# test_fio.sh SQFS_STAGE SQFS_SEAL SQFS_PACK
#
# fio's data verification in a mount, through each way data reaches the
# spool: read/write, unaligned sizes, shared mmap, O_DIRECT through libaio,
# io_uring, and fallocate's punches (the "falloc" engine).  Then several
# writers at once on one file closed and compressed in the background, and
# rewritten by others, by mmap and by io_uring.  Once with kernel
# passthrough (the default) and once with every write through the daemon
# (-o no_passthrough).  Each round:
#   - every fio job verifies what it wrote (crc32c) and exits 0;
#   - st_blocks of the trimmed file is below its size (holes are seen);
#   - the sealed image seen by the kernel equals the mount file by file;
#   - the image equals sqfs-pack of a copy of the mount (cp -a finds the
#     holes by st_blocks).
# Environment: FIO_SIZE (each file, default 48m; 8m when SQFS_TEST_QUICK=1).
set -euo pipefail
# shellcheck source=tests/fuse/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "$@"
need_loop
need_cmd fio cmp timeout
SIZE=${FIO_SIZE:-48m}
[[ ${SQFS_TEST_QUICK-} == 1 && -z ${FIO_SIZE-} ]] && SIZE=8m
MT=1700000000

jobfile() { # jobfile DIR: the job file, on stdout
	cat <<EOF
[global]
directory=$1
size=$SIZE
bsrange=4k-192k
randrepeat=0
verify=crc32c
do_verify=1
verify_fatal=1

[seq-psync]
filename=seq-psync
ioengine=psync
rw=write

[rand-unaligned]
filename=rand-unaligned
ioengine=psync
rw=randwrite
bsrange=1k-100k
bs_unaligned=1

[rand-mmap]
filename=rand-mmap
ioengine=mmap
rw=randwrite

[rand-direct]
filename=rand-direct
ioengine=libaio
direct=1
iodepth=8
bs=4k
rw=randwrite

[rand-uring]
filename=rand-uring
ioengine=io_uring
iodepth=16
rw=randrw

[trimmed]
filename=trimmed
ioengine=falloc
rw=randtrim
verify=0
do_verify=0

[shared-base]
stonewall
filename=shared
ioengine=psync
rw=write

[shared-writers]
stonewall
filename=shared
ioengine=psync
rw=randwrite
numjobs=3
io_size=$SIZE
verify=0
do_verify=0

[shared-mmap]
stonewall
filename=shared
ioengine=mmap
rw=randwrite
io_size=$SIZE
verify=0
do_verify=0

[shared-uring]
stonewall
filename=shared
ioengine=io_uring
iodepth=8
rw=randrw
verify=0
do_verify=0
EOF
}

round() { # round NAME [MOUNT OPTIONS...]
	local name=$1 M=$WORK/m-$1 IMG=$WORK/$1.sqfs rc=0 f bad=0 sz blk
	shift
	stage_mount "$IMG" "$M" -o comp=zstd:3,block_size=64K,mkfs_time=$MT "$@"
	jobfile "$M" >"$WORK/$name.fio"
	timeout 300 fio --output="$WORK/$name.out" "$WORK/$name.fio" || rc=$?
	if ((rc == 0)) && ! grep -q "err=[ ]*[1-9]" "$WORK/$name.out"; then
		ok "$name: fio jobs verified what they wrote"
	else
		fail "$name: fio exited $rc"
		grep -E "err=|verify|fio:" "$WORK/$name.out" >&2 || true
	fi
	sz=$(stat -c %s "$M/trimmed")
	blk=$(stat -c %b "$M/trimmed")
	((sz > 0 && blk * 512 < sz)) && ok "$name: trimmed file $sz bytes, st_blocks $blk" ||
		fail "$name: trimmed file $sz bytes, st_blocks $blk"
	"$SEAL" --keep --quiet "$M" || fail "$name: sqfs-seal --keep"
	if loop_mount "$IMG" "$WORK/k-$name"; then
		for f in "$M"/*; do
			cmp -s "$f" "$WORK/k-$name/${f##*/}" || { fail "$name: ${f##*/} differs in the image"; bad=1; }
		done
		((bad)) || ok "$name: every file of the image equals the mount's ($(ls "$M" | wc -l) files)"
		loop_umount "$WORK/k-$name"
	fi
	mkdir "$WORK/copy-$name"
	cp -a "$M/." "$WORK/copy-$name/"
	"$PACK" -q --mkfs-time $MT -c zstd:3 -b 64K "$WORK/copy-$name" "$WORK/ref-$name.sqfs"
	cmp -s "$IMG" "$WORK/ref-$name.sqfs" && ok "$name: image equals sqfs-pack of a copy" ||
		fail "$name: image differs from sqfs-pack of a copy"
	"$SEAL" --quiet "$M" || fail "$name: final sqfs-seal"
	wait_daemon 0
}

round passthrough
round daemon -o no_passthrough
finish
