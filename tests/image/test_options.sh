#!/bin/bash
# test_options.sh SQFS_PACK [SQFS_STAGE]
#
# Bad option values are usage errors: exit status 2, a message naming the
# option (and the value), nothing written.  For sqfs-pack: the flags; for
# sqfs-stage: the same keys as -o options, refused before anything is
# mounted or created.  The limits themselves are accepted (so the bounds are
# exactly where sqfs-pack(1) says).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "${1-}"
STAGE=
if [[ -n ${2-} ]]; then
	STAGE=$(realpath -- "$2")
	[[ -x $STAGE ]] || { log "FAIL: '$2' is not an executable"; exit 1; }
fi
need_cmd timeout

S=$WORK
mkdir -p "$S/src/sub" "$S/out" "$S/mnt"
printf 'hello\n' >"$S/src/hello"
printf 'sub\n' >"$S/src/sub/file"

RC=0 ERR=
run() {
	RC=0
	ERR=$(timeout -k 5 60 "$@" 2>&1 >/dev/null) || RC=$?
}

# nothing_in DIR LABEL: DIR is empty.
nothing_in() {
	local left
	left=$(ls -A "$1")
	[[ -z $left ]] || fail "[$2] left in $1: $left"
}

# usage_error LABEL REGEX: exit 2, one message line matching REGEX.
usage_error() {
	local label=$1 re=$2
	if ((RC != 2)); then
		fail "[$label] exit status $RC, expected 2$( ((RC > 128)) && echo " (killed by signal $((RC - 128)))"): $ERR"
	elif ! grep -Eq -- "$re" <<<"$ERR"; then
		fail "[$label] the message does not name the option (/$re/): $ERR"
	else
		log "ok: [$label] exit 2: ${ERR%%$'\n'*}"
	fi
}

# pack_bad REGEX ARGS...: sqfs-pack ARGS SRC IMAGE is a usage error.
pack_bad() {
	local re=$1
	shift
	run "$SQFS_PACK" -q "$@" "$S/src" "$S/out/i.sqfs"
	usage_error "sqfs-pack $*" "$re"
	nothing_in "$S/out" "sqfs-pack $*"
	rm -rf -- "${S:?}/out"/*
}

# pack_ok ARGS...: the bound itself is accepted.
pack_ok() {
	run "$SQFS_PACK" -q "$@" "$S/src" "$S/out/i.sqfs"
	if ((RC != 0)); then
		fail "[sqfs-pack $*] exit status $RC, expected 0: $ERR"
	else
		log "ok: [sqfs-pack $*] accepted"
	fi
	rm -rf -- "${S:?}/out"/*
}

# comp_bad VALUE REGEX: -c VALUE is refused, the message names --comp, the
# value and REGEX.
comp_bad() {
	pack_bad "--comp '$(sed 's/[][\.*^$+?(){}|]/\\&/g' <<<"$1")': .*($2)" -c "$1"
}

section "sqfs-pack: compressors and levels"
comp_bad bogus "unknown compressor 'bogus'"
comp_bad ZSTD "unknown compressor"
pack_bad "--comp: give a compressor as NAME\\[:LEVEL\\]\\[:KEY\\[=VALUE\\]\\.\\.\\.\\]" -c ''
pack_bad "--comp: 200 characters, more than any compressor and its settings take \\(127\\)" -c "zstd$(printf '0%.0s' {1..196})"
comp_bad ,zstd "unknown compressor ''"
for c in gzip:0 gzip:10 lzo:0 lzo:10 zstd:0 zstd:23 lz4:0 lz4:13 xz:10 lzma:10; do
	comp_bad "$c" "${c%%:*} (hc )?level must be"
done
for c in zstd:-1 zstd: zstd:abc zstd:1x zstd:99999999999 gzip:9.5 xz:' 5'; do
	comp_bad "$c" "bad ${c%%:*} level"
done
for c in gzip:1 gzip:9 zstd:1 zstd:22 xz:0 xz:9 lzma:0 lzma:9 lz4 lz4:1 lz4:12 lz4:hc lzo:1 lzo:9; do
	pack_ok -c "$c"
done

section "sqfs-pack --version: the codec libraries (image bytes depend on them)"
v=$("$SQFS_PACK" --version) || fail "--version failed"
grep -q '^sqfs-pack [0-9]' <<<"$v" || fail "--version: no program version: $v"
grep -Eq '^gzip: (libdeflate [0-9.]+ \(zlib [0-9.]+ for gzip,zlib\)|zlib [0-9.]+)' <<<"$v" ||
	fail "--version: no gzip backend: $v"
grep -Eq 'zstd: libzstd [0-9]' <<<"$v" && log "ok: --version: ${v//$'\n'/ | }" ||
	fail "--version: no zstd library: $v"

section "sqfs-pack: compressor keys"
# ':' also separates keys (comp=xz:9:bcj=x86 passes -o without escaping)
comp_bad zstd:1:2 "zstd level given twice"
comp_bad zstd,3 "the zstd level goes right after the name \\(zstd:3\\)"
comp_bad xz,bcj=x86,bcj=arm "xz option 'bcj' given twice"
pack_ok -c gzip:zlib
pack_ok -c gzip:zlib:window=12
comp_bad xz:9:bcj=foo "bcj"
pack_ok -c xz:9:bcj=x86
comp_bad zstd,foo "unknown zstd option 'foo'"
comp_bad zstd,, "unknown zstd option ''"
comp_bad gzip,bogus=1 "unknown gzip option 'bogus'"
comp_bad gzip,dict=8K "unknown gzip option 'dict'"
comp_bad lzma,dict=8K "unknown lzma option 'dict'"
comp_bad lzma,bcj=x86 "unknown lzma option 'bcj'"
comp_bad lz4,window=8 "unknown lz4 option 'window'"
comp_bad lzo,hc "unknown lzo option 'hc'"
comp_bad gzip,zlib=1 "gzip option 'zlib' takes no value"
comp_bad zstd,zlib "unknown zstd option 'zlib'"
pack_ok -c gzip:9,zlib
pack_ok -c gzip:1:zlib
comp_bad gzip,window "gzip option 'window' needs a value"
comp_bad gzip,window=7 "gzip window must be 8..15"
comp_bad gzip,window=16 "gzip window must be 8..15"
comp_bad gzip,window=x "bad gzip window 'x'"
comp_bad gzip,strategy=bogus "unknown gzip strategy 'bogus'"
comp_bad gzip,strategy=rle+ "unknown gzip strategy ''"
comp_bad xz,dict=0 "bad xz dict size '0'"
comp_bad xz,dict=4K "xz dict must be 8K"
comp_bad xz,dict=5000 "xz dict must be"
comp_bad xz,dict=2M "xz dict must be 8K..block size"
pack_bad "--comp 'xz,dict=8K': xz dict cannot be set with blocks under 8K" -b 4K -c xz,dict=8K
comp_bad xz,bcj=bogus "unknown xz bcj filter 'bogus'"
comp_bad xz,extreme=1 "xz option 'extreme' takes no value"
comp_bad lz4,hc=1 "lz4 option 'hc' takes no value"
comp_bad lzo,algorithm=bogus "unknown lzo algorithm 'bogus'"
comp_bad lzo:5,algorithm=lzo1x_1 "an lzo level needs algorithm lzo1x_999"
pack_ok -c gzip,window=8,strategy=filtered+rle
pack_ok -c xz:6,dict=50%,bcj=x86+arm,extreme
pack_ok -c lzo,algorithm=lzo1x_1_15

section "sqfs-pack: block size"
for b in 0 1 2048 3000 4095 5000 12K 100000 2M 1G -1 -4096 abc '' 4096x 4K4 0x1000 1e5 ' 4K' \
	18014398509481988K 17592186044417M 99999999999999999999 4096iB 4096i 8Ki 4KBB 4Kib; do
	pack_bad "--block-size '$(sed 's/[][\.*^$+?(){}|]/\\&/g' <<<"$b")': must be a power of two from 4K to 1M" -b "$b"
done
for b in 4K 4096 4096B 8k 8KB 64KiB 1M 1048576 1MiB; do
	pack_ok -b "$b"
done

section "sqfs-pack: numbers"
for j in 0 -1 1025 abc '' ' 1' +1 0x10 1.5 99999999999999999999; do
	pack_bad "--jobs '${j/+/\\+}': must be a number from 1 to 1024" -j "$j"
done
pack_ok -j 1
pack_ok -j 1024
for q in 0 1 -3 x '' 65537 1048577; do
	pack_bad "--queue '$q': must be a number of blocks from 2 to 65536" --queue "$q"
done
pack_ok --queue 2
pack_ok --queue 65536
for t in yesterday -1 4294967296 '' 1e9 @-5 12x; do
	pack_bad "--mkfs-time '$t': give seconds" --mkfs-time "$t"
	pack_bad "--all-time '$t': give seconds" --all-time "$t"
done
pack_ok --mkfs-time 0
pack_ok --mkfs-time 4294967295
pack_ok --all-time @1
for u in nosuchuser_xyz -1 4294967295 ''; do
	pack_bad "--force-uid '$u': not a uid or user name" --force-uid "$u"
	pack_bad "--force-gid '$u': not a gid or group name" --force-gid "$u"
done
pack_ok --force-uid 4294967294 --force-gid root

section "sqfs-pack: the command line"
pack_bad "--bogus" --bogus
pack_bad "'--no-fragments' doesn't allow an argument" --no-fragments=1
pack_bad "'--serial' doesn't allow an argument" --serial=2
pack_bad "--no-fragments.*--always-fragments" --no-fragments --always-fragments
run "$SQFS_PACK" -q "$S/src" "$S/out/i.sqfs" -c
usage_error "sqfs-pack SRC IMAGE -c" "option requires an argument -- 'c'"
nothing_in "$S/out" "-c without a value"
RC=0
ERR=$(SOURCE_DATE_EPOCH=yesterday timeout 60 "$SQFS_PACK" -q "$S/src" "$S/out/i.sqfs" 2>&1) || RC=$?
usage_error "SOURCE_DATE_EPOCH=yesterday" "SOURCE_DATE_EPOCH='yesterday': give seconds since 1970"
nothing_in "$S/out" "SOURCE_DATE_EPOCH=yesterday"
for v in 4294967296 @123 now; do
	RC=0
	ERR=$(SOURCE_DATE_EPOCH=$v timeout 60 "$SQFS_PACK" -q "$S/src" "$S/out/i.sqfs" 2>&1) || RC=$?
	usage_error "SOURCE_DATE_EPOCH=$v" "SOURCE_DATE_EPOCH='$v': give seconds since 1970 \(0..4294967295\)"
	nothing_in "$S/out" "SOURCE_DATE_EPOCH=$v"
done
# Read only when it would be used: a --mkfs-time given, --help and
# --version do not look at it.
if SOURCE_DATE_EPOCH=yesterday timeout 60 "$SQFS_PACK" -q --mkfs-time 7 "$S/src" "$S/out/i.sqfs" 2>"$S/err" &&
	[[ $(unsquashfs -mkfs-time "$S/out/i.sqfs" 2>/dev/null) == 7 ]]; then
	log "ok: --mkfs-time 7 wins over a bad SOURCE_DATE_EPOCH"
else
	fail "--mkfs-time 7 with SOURCE_DATE_EPOCH=yesterday: $(cat "$S/err")"
fi
rm -f -- "$S/out/i.sqfs"
for t in "$SQFS_PACK" ${STAGE:+"$STAGE"}; do
	for o in --help --version; do
		SOURCE_DATE_EPOCH=yesterday "$t" $o >/dev/null 2>"$S/err" &&
			log "ok: ${t##*/} $o with a bad SOURCE_DATE_EPOCH" ||
			fail "${t##*/} $o with SOURCE_DATE_EPOCH=yesterday: $(cat "$S/err")"
	done
done

if [[ -z $STAGE ]]; then
	[[ ${CI-} != true ]] || fail "sqfs-stage not built (no libfuse3?): its -o options are not checked (CI=true)"
	log "note: sqfs-stage not built: its -o options are not checked"
	finish
fi

# --- sqfs-stage -o ------------------------------------------------------------------
# A bad -o value exits 2 at once: nothing mounted (no daemon left behind), no
# spool directory beside the image, no image.
section "sqfs-stage -o"
need_fuse
stage_bad() {	# stage_bad REGEX OPTION
	local re=$1 opt=$2 label="sqfs-stage -o $2"
	run "$STAGE" -o "$opt" "$S/out/i.sqfs" "$S/mnt"
	if mountpoint -q "$S/mnt"; then
		fail "[$label] mounted $S/mnt"
		fusermount3 -u -z "$S/mnt" 2>/dev/null || umount -l "$S/mnt" 2>/dev/null || true
		sleep 0.5
	fi
	usage_error "$label" "$re"
	nothing_in "$S/out" "$label"
	rm -rf -- "${S:?}/out"/*
}
stage_bad "sqfs-stage: -o comp 'bogus': unknown compressor 'bogus'" comp=bogus
stage_bad "zstd level must be 1\.\.22" comp=zstd:23
stage_bad "gzip level must be 1\.\.9" comp=gzip:0
stage_bad "lz4 hc level must be 1\.\.12" comp=lz4:13
stage_bad "bad zstd level 'x'" comp=zstd:x
# A comma separates -o options (sqfs-stage(1)): FUSE refuses the stray key...
stage_bad "unknown option.*-o foo" comp=zstd,foo
# ...and with the comma escaped the compressor gets it.
stage_bad "-o comp 'zstd,foo': unknown zstd option 'foo'" 'comp=zstd\,foo'
stage_bad "comp 'gzip,hc': unknown gzip option 'hc'" 'comp=gzip\,hc'
stage_bad "comp 'gzip:1,window=7': gzip window must be 8\.\.15" 'comp=gzip:1\,window=7'
stage_bad "comp 'xz,bcj=bogus': unknown xz bcj filter 'bogus'" 'comp=xz\,bcj=bogus'
stage_bad "give a compressor" comp=
stage_bad "block_size '3000': must be a power of two" block_size=3000
stage_bad "block_size '2K': must be a power of two" block_size=2K
stage_bad "block_size '2M': must be a power of two" block_size=2M
stage_bad "block_size 'abc': must be a power of two" block_size=abc
stage_bad "block_size '18014398509481988K': must be a power of two" block_size=18014398509481988K
stage_bad "jobs '0': must be a number from 1 to 1024" jobs=0
stage_bad "jobs '-2': must be a number from 1 to 1024" jobs=-2
stage_bad "jobs 'many': must be a number from 1 to 1024" jobs=many
stage_bad "queue '1': must be a number of blocks" queue=1
stage_bad "mkfs_time 'yesterday': give seconds" mkfs_time=yesterday
stage_bad "all_time '-1': give seconds" all_time=-1
stage_bad "force_uid 'nosuchuser_xyz': not a uid" force_uid=nosuchuser_xyz
stage_bad "force_gid '-1': not a gid" force_gid=-1
stage_bad "option 'no_fragments' takes no value" no_fragments=1
# serial=0 must not turn serial on unnoticed
stage_bad "option 'serial' takes no value" serial=0
stage_bad "-o comp: give a compressor as NAME\\[:LEVEL\\]\\[:KEY\\[=VALUE\\]\\.\\.\\.\\]" comp=
stage_bad "no_fragments.*always_fragments" no_fragments,always_fragments
stage_bad "-o spool: give a directory" spool=
stage_bad "unknown option.*bogus_key" bogus_key=1

finish
