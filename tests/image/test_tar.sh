#!/bin/bash
# test_tar.sh SQFS_PACK
#
# `sqfs-pack --tar` against `sqfs-pack SRC_DIR`: archives of the mktree.sh tree
# (GNU tar: gnu, posix with xattrs, posix sparse 1.0, ustar for a subset without
# long names; plain, and gzip/xz/zstd compressed; from a file and from a pipe)
# must give byte-identical images to packing the directory with the same
# options, and the image must match the tree through the kernel.  An
# uncompressed archive read from a file is read in place: it packs where a
# copy of it would not fit, from any starting offset of standard input.  Hostile
# archives must fail with exit status 1 and a message, leave no image and no
# temporary file, and not crash.
# SQFS_TEST_QUICK=1 (tools/test.sh's sanitizer modes) leaves to the normal
# mode the variants that only change which bytes the image holds.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "${1-}"
need_root
need_loop
need_cmd tar gzip xz getfattr setfattr mknod sha256sum
[[ -x $PYTHON3 ]] || need_cmd python3

scratch_fs "$WORK/fs"
S=$WORK/fs
SRC=$S/t
"$TESTS_DIR/mktree.sh" --tar "$SRC" || { log "FAIL: mktree.sh --tar"; exit 1; }
T=1111111111
OUT=$S/out	# images go here, and nothing else may appear here
mkdir "$OUT" "$S/ar"

TAR_C=(tar -C "$SRC" --numeric-owner)

# from_tar LABEL EXPECTED_SHA ARCHIVE_OR_- [sqfs-pack options]: pack the archive
# (stdin from the file, or from the pipe already on stdin for "-").
from_tar() {
	local label=$1 want=$2 ar=$3 rc=0 err got
	shift 3
	rm -f -- "$OUT/tar.sqfs"
	if [[ $ar == - ]]; then
		err=$("$SQFS_PACK" --tar -q --mkfs-time "$T" "$@" "$OUT/tar.sqfs" 2>&1 >/dev/null) || rc=$?
	else
		err=$("$SQFS_PACK" --tar -q --mkfs-time "$T" "$@" "$OUT/tar.sqfs" <"$ar" 2>&1 >/dev/null) || rc=$?
	fi
	if ((rc)); then
		fail "[$label] sqfs-pack --tar exited $rc: $err"
		return 1
	fi
	got=$(sha "$OUT/tar.sqfs")
	if [[ $got == "$want" ]]; then
		log "ok: [$label] same bytes as the directory image"
	else
		fail "[$label] sha256 $got differs from the directory image's $want"
		if command -v sqfsdiff >/dev/null; then
			sqfsdiff -T -a "$OUT/dir.sqfs" -b "$OUT/tar.sqfs" 2>&1 | first 20 >&2 || true
		fi
	fi
}

# check_mount LABEL TREE [no-xattrs]: kernel mount of $OUT/tar.sqfs vs TREE.
check_mount() {
	local label=$1 tree=$2 nox=0
	[[ ${3-} == no-xattrs ]] && nox=1
	mount_image "$OUT/tar.sqfs" "$S/mnt" || { fail "[$label] kernel mount"; return; }
	if ! CMP_NO_XATTRS=$nox compare_tree "$tree" "$S/mnt"; then
		fail "[$label] the image from the archive differs from the tree"
	fi
	umount_quiet "$S/mnt"
}

dir_image() {	# dir_image TREE [options]: the reference image, prints its sha
	local tree=$1 img=$OUT/dir${BG_ID-}.sqfs
	shift
	pack --mkfs-time "$T" "$@" "$tree" "$img" || { fail "directory image ($*)"; exit 1; }
	sha "$img"
}

# The checks of a slow stream wait most of their time: they run side by
# side.  bg ID FUNCTION [ARGS]: FUNCTION in the background, with BG_ID=ID
# for its file names and its messages kept for bg_wait, which prints them
# in order and counts a job with a failure (or killed) as one.
BG_PIDS=()
bg() {
	local id=$1
	shift
	( FAILURES=0 BG_ID=-$id; "$@"; exit $((FAILURES > 0)) ) 2>"$S/bg-$id.log" &
	BG_PIDS+=("$id:$!")
}
bg_wait() {
	local j
	for j in "${BG_PIDS[@]}"; do
		wait "${j#*:}" || FAILURES=$((FAILURES + 1))
		cat "$S/bg-${j%%:*}.log" >&2
		rm -f -- "$S/bg-${j%%:*}.log"
	done
	BG_PIDS=()
}

section "posix with xattrs and sparse files"
FULL=$(dir_image "$SRC")
# Under a UTF-8 locale GNU tar stores UTF-8 names as they are in pax headers
# (others get hdrcharset=BINARY).
LC_ALL=C.UTF-8 "${TAR_C[@]}" --format=posix --xattrs --xattrs-include='*' --sparse -cf "$S/ar/posix.tar" .
from_tar posix "$FULL" "$S/ar/posix.tar" && check_mount posix "$SRC"
# Those names are kept without a word, in any locale; names that are not
# UTF-8 (GNU tar writes them raw) are kept too, with a warning that says so.
grep -aq 'path=.*ünïcödé' "$S/ar/posix.tar" || fail "[posix] no UTF-8 name in a pax header: the check below is void"
err=$(LC_ALL=C "$SQFS_PACK" --tar -q --mkfs-time "$T" "$OUT/tar.sqfs" <"$S/ar/posix.tar" 2>&1 >/dev/null) ||
	fail "[posix, LC_ALL=C] sqfs-pack --tar failed: $err"
# The first is named, then how many in all (thousands of lines said nothing more).
bad=$(grep -v -e ': not UTF-8 in a pax header; kept as its bytes$' \
	-e ': warning: [0-9]* members had pax headers that were not UTF-8 in all; kept as their bytes$' <<<"$err" || true)
named=$(grep -c ': not UTF-8 in a pax header' <<<"$err" || true)
total=$(sed -n 's/.*: warning: \([0-9]*\) members had pax headers that were not UTF-8.*/\1/p' <<<"$err")
if [[ -z $bad && $named == 1 && ${total:-0} -gt 1 && $err == *"/dir"*"not UTF-8"* ]] &&
	! grep -q 'ünïcödé\|日本語\|emoji_' <<<"$err"; then
	log "ok: [posix, LC_ALL=C] UTF-8 names without warnings; the first of $total not UTF-8 named as such"
else
	fail "[posix, LC_ALL=C] warnings: $(first 3 <<<"$err")"
fi
[[ $(sha "$OUT/tar.sqfs") == "$FULL" ]] && log "ok: [posix, LC_ALL=C] same bytes" ||
	fail "[posix, LC_ALL=C] the image differs from the directory image"
"${TAR_C[@]}" --format=posix --xattrs --xattrs-include='*' --sparse --sparse-version=1.0 \
	-cf "$S/ar/posix-s1.tar" .
from_tar "posix, sparse 1.0" "$FULL" "$S/ar/posix-s1.tar"
from_tar "posix from a pipe" "$FULL" - < <(cat "$S/ar/posix.tar")

section "blocks compressed while a stream is read"
# From a pipe the data blocks are compressed as they arrive, and the writer
# takes them as stored (--json stored_blocks).  The image must still be the
# same bytes as the directory's, with every option that changes which blocks
# there are or how they are stored; the serial reference path stores none.
# ahead LABEL MIN_STORED ARCHIVE [options]
ahead() {
	local label=$1 min=$2 ar=$3 want json stored rc=0
	shift 3
	want=$(dir_image "$SRC" "$@")
	rm -f -- "$OUT/tar.sqfs"
	json=$(cat "$ar" | "$SQFS_PACK" --tar --json --mkfs-time "$T" "$@" "$OUT/tar.sqfs" 2>"$S/err") || rc=$?
	if ((rc)); then
		fail "[ahead: $label] exit $rc: $(cat "$S/err")"
		return
	fi
	stored=$("$PYTHON3" -c 'import json,sys; print(json.load(sys.stdin)["stored_blocks"])' <<<"$json")
	if [[ $(sha "$OUT/tar.sqfs") != "$want" ]]; then
		fail "[ahead: $label] the image differs from the directory image ($stored blocks stored)"
	elif ((min > 0 && stored < min)); then
		fail "[ahead: $label] same bytes, but only $stored blocks were compressed while reading (want >= $min)"
	elif ((min == 0 && stored != 0)); then
		fail "[ahead: $label] $stored blocks stored on the serial path"
	else
		log "ok: [ahead: $label] same bytes, $stored blocks compressed while reading"
	fi
}
AR=$S/ar/posix.tar
ahead defaults 8 "$AR"
ahead "--queue 2" 8 "$AR" --queue 2
ahead "-b 4K" 100 "$AR" -b 4K
ahead "--serial" 0 "$AR" --serial
# SQFS_TEST_QUICK (the sanitizer modes): the options above give the
# threads all they do; these only change the bytes.
if [[ ${SQFS_TEST_QUICK-} != 1 ]]; then
	ahead "-j 1" 8 "$AR" -j 1
	ahead "--no-fragments" 8 "$AR" --no-fragments
	ahead "--always-fragments -c gzip" 8 "$AR" --always-fragments -c gzip
	ahead "-c lz4 -b 1M --no-dedup" 1 "$AR" -c lz4 -b 1M --no-dedup
fi
# The holes of sparse members as blocks of zeros, in a tree without the
# 5 GiB of holes of the two big sparse files (as zeros they took 25 s).
NS=$S/ns
mkdir "$NS"
cp -a "$SRC/sparse" "$NS/"
rm -- "$NS/sparse/big_over_4g" "$NS/sparse/hole_1g"
touch -r "$SRC/sparse" "$NS/sparse"
touch -r "$SRC" "$NS"
tar -C "$NS" --numeric-owner --format=posix --sparse -cf "$S/ar/ns.tar" .
SRC_SAVED=$SRC
SRC=$NS
ahead "--no-sparse" 1 "$S/ar/ns.tar" --no-sparse
SRC=$SRC_SAVED
rm -rf -- "$NS" "$S/ar/ns.tar"
# The summary for people says it too.
sum=$(cat "$AR" | "$SQFS_PACK" --tar --no-progress --mkfs-time "$T" "$OUT/tar.sqfs" 2>/dev/null |
	grep '^Data blocks compressed while reading' || true)
if [[ $sum =~ ^Data\ blocks\ compressed\ while\ reading\ [1-9][0-9]*\ of\ [1-9][0-9]*$ ]]; then
	log "ok: [ahead: summary] $sum"
else
	fail "[ahead: summary] no line 'Data blocks compressed while reading N of M' (got '$sum')"
fi

# Members that come again (the last one wins, its blocks compressed after
# the first one's), blocks of zeros written as data, a file of whole
# blocks, and a member cut short of a block by a sparse map's end.
RE=$S/re
mkdir "$RE" "$RE.x"
"$PYTHON3" - "$S/ar/again.tar" <<'PY'
import io, random, sys, tarfile
r = random.Random(11)
def reg(n, d):
    ti = tarfile.TarInfo(n); ti.size = len(d); ti.mtime = 7; ti.mode = 0o644; return (ti, d)
members = [(tarfile.TarInfo("./"), None)]
members[0][0].type = tarfile.DIRTYPE; members[0][0].mode = 0o755; members[0][0].mtime = 7
members += [reg("a", r.randbytes(600000)), reg("whole", r.randbytes(262144)),
            reg("zeros", bytes(131072) + r.randbytes(200000) + bytes(300000)),
            reg("a", r.randbytes(100000) + b"x" * 333333), reg("b", r.randbytes(131073)),
            reg("whole", bytes(262144))]
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    for ti, d in members:
        t.addfile(ti, io.BytesIO(d) if d is not None else None)
PY
tar -C "$RE.x" --numeric-owner -xf "$S/ar/again.tar" || fail "tar -x again.tar"
SRC_SAVED=$SRC
SRC=$RE.x
ahead "members again, zero blocks" 3 "$S/ar/again.tar"
ahead "members again, -b 4K --no-sparse" 100 "$S/ar/again.tar" -b 4K --no-sparse
SRC=$SRC_SAVED
rm -rf -- "$RE" "$RE.x" "$S/ar/again.tar"

section "fragment blocks compressed while a slow stream is read"
# Between members, now and then, a copy of the tree read so far goes through
# the data pass and its fragment blocks are kept under their keys; the image
# takes them (--json stored_fragments).  A stream paced over about 3 s gives
# it time, and SQFS_PACK_REHEARSE=always rehearses whatever the load (by
# default a rehearsal waits for a reader that waits and for idle CPUs, which
# a test running beside this one may not leave); the image must be the same
# bytes as the directory's, with members given again after a rehearsal saw
# them, hard links, equal tails and files of whole blocks, and with options
# that change the fragment blocks.  SQFS_PACK_REHEARSE=never stores none.
FR=$S/fr
mkdir "$FR"
"$PYTHON3" - "$S/ar/fr.tar" <<'PY'
import io, random, sys, tarfile
r = random.Random(5)
words = [bytes(r.choice(b"abcdefghij ") for _ in range(r.randrange(3, 9))) for _ in range(400)]
def text(n):
    out, have = [], 0
    while have < n:
        w = r.choice(words) + b" "
        out.append(w)
        have += len(w)
    return b"".join(out)[:n]
def info(name, kind, size=0):
    ti = tarfile.TarInfo(name); ti.type = kind; ti.size = size; ti.mtime = 7
    ti.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    return ti
members = [(info("./", tarfile.DIRTYPE), None)]
same = text(3000)
for d in range(6):
    members.append((info("d%d/" % d, tarfile.DIRTYPE), None))
    for f in range(120):
        data = same if f % 17 == 0 else text(r.randrange(1, 20000))
        members.append((info("d%d/f%03d" % (d, f), tarfile.REGTYPE, len(data)), data))
    members.append((info("d%d/whole" % d, tarfile.REGTYPE, 262144), text(262144)))
    link = info("d%d/link" % d, tarfile.LNKTYPE); link.linkname = "d%d/f001" % d
    members.append((link, None))
for d in (0, 2):	# given again at the end: the last one wins
    data = text(5000 + d)
    members.append((info("d%d/f003" % d, tarfile.REGTYPE, len(data)), data))
with tarfile.open(sys.argv[1], "w", format=tarfile.GNU_FORMAT) as t:
    for ti, d in members:
        t.addfile(ti, io.BytesIO(d) if d is not None else None)
PY
tar -C "$FR" --numeric-owner -xf "$S/ar/fr.tar" || fail "tar -x fr.tar"
# tar set d0's and d2's times before it met their members again
find "$FR" -type d -exec touch -d @7 {} +
# slow_cat FILE: FILE on standard output in 60 pieces, 50 ms apart (3 s).
# sqfs-pack stops reading at the end marker, so the padding after it may
# find no reader.
slow_cat() {
	"$PYTHON3" -c '
import sys, time
data = open(sys.argv[1], "rb").read()
step = max(1, len(data) // 60)
try:
    for i in range(0, len(data), step):
        sys.stdout.buffer.write(data[i:i + step]); sys.stdout.flush(); time.sleep(0.05)
except BrokenPipeError:
    sys.stdout = None
' "$1"
}
# slow_frags LABEL [options]
slow_frags() {
	local label=$1 want json frags rc=0 img=$OUT/tar${BG_ID-}.sqfs err=$S/err${BG_ID-}
	shift
	want=$(dir_image "$FR" --no-xattrs "$@")
	rm -f -- "$img"
	json=$(slow_cat "$S/ar/fr.tar" | SQFS_PACK_REHEARSE=${FR_MODE:-always} "$SQFS_PACK" --tar --json -j 2 \
		--mkfs-time "$T" "$@" "$img" 2>"$err") || rc=$?
	if ((rc)); then
		fail "[fragments ahead: $label] exit $rc: $(cat "$err")"
		return
	fi
	frags=$("$PYTHON3" -c 'import json,sys; j = json.load(sys.stdin); print(j["stored_fragments"], "of", j["fragments"])' <<<"$json")
	if [[ $(sha "$img") != "$want" ]]; then
		fail "[fragments ahead: $label] the image differs from the directory image ($frags stored)"
	elif [[ ${FR_MODE-} == never && $frags != 0\ * ]]; then
		fail "[fragments ahead: $label] $frags fragment blocks stored with SQFS_PACK_REHEARSE=never"
	elif [[ ${FR_MODE-} != never && $frags == 0\ * ]]; then
		fail "[fragments ahead: $label] same bytes, but no fragment block was compressed while reading"
	else
		log "ok: [fragments ahead: $label] same bytes, $frags fragment blocks compressed while reading"
	fi
	rm -f -- "$img" "$OUT/dir${BG_ID-}.sqfs" "$err"
}
# The summary for people says it too.
frags_summary() {
	local sum img=$OUT/tar${BG_ID-}.sqfs
	sum=$(slow_cat "$S/ar/fr.tar" | SQFS_PACK_REHEARSE=always "$SQFS_PACK" --tar --no-progress --mkfs-time "$T" "$img" 2>/dev/null |
		grep '^Fragment blocks compressed while reading' || true)
	if [[ $sum =~ ^Fragment\ blocks\ compressed\ while\ reading\ [1-9][0-9]*\ of\ [1-9][0-9]*$ ]]; then
		log "ok: [fragments ahead: summary] $sum"
	else
		fail "[fragments ahead: summary] no line 'Fragment blocks compressed while reading N of M' (got '$sum')"
	fi
	rm -f -- "$img"
}
# Two at a time: more, on a loaded machine, left some without a rehearsal
# before their stream ended.
bg 1 slow_frags defaults
FR_MODE=never bg 2 slow_frags never
bg_wait
bg 3 frags_summary
if [[ ${SQFS_TEST_QUICK-} != 1 ]]; then	# what they change is the bytes
	bg 4 slow_frags "-b 4K -c gzip" -b 4K -c gzip
	bg_wait
	bg 5 slow_frags "--always-fragments --no-dedup" --always-fragments --no-dedup
fi
bg_wait
# Another value is named, not silently taken for the default.
if err=$(SQFS_PACK_REHEARSE=bogus "$SQFS_PACK" -q --tar "$OUT/bogus.sqfs" <"$S/ar/fr.tar" 2>&1) &&
	grep -q "warning: SQFS_PACK_REHEARSE='bogus' is neither 'never' nor 'always': ignored" <<<"$err"; then
	log "ok: SQFS_PACK_REHEARSE=bogus: packed, with a warning naming it"
else
	fail "SQFS_PACK_REHEARSE=bogus: $err"
fi
rm -f -- "$OUT/bogus.sqfs"
rm -rf -- "$FR" "$S/ar/fr.tar"
# Out of room with rehearsed fragment blocks: 600 files of 32 KiB of base64
# text (tails only: no data blocks to compress ahead) from a slow stream.
# The spool (20 MB) and the image (15 MB) fit in 35 MB, but not beside the
# blocks rehearsals kept: they give way with a warning, and the image is the
# directory's bytes all the same; with room, they are kept and taken.
FO=$S/fo
mkdir -p "$FO/a" "$FO/b" "$FO/c"
for d in a b c; do
	for ((i = 0; i < 200; i++)); do head -c 24576 /dev/urandom | base64 -w0 >"$FO/$d/s$i"; done
done
find "$FO" -exec touch -h -d @1234567 {} +
want=$(dir_image "$FO" --no-xattrs -c zstd:3)
tar -C "$FO" --numeric-owner --format=gnu -cf "$S/ar/fo.tar" .
# frags_room LABEL FS_SIZE WARN(yes/no): in $S/fo-FS_SIZE, made beforehand
frags_room() {
	local label=$1 size=$2 warn=$3 fs=$S/fo-$2 rc=0 json got stored err=$S/err${BG_ID-}
	json=$(slow_cat "$S/ar/fo.tar" | SQFS_PACK_REHEARSE=always "$SQFS_PACK" --tar --json -j 2 -c zstd:3 --mkfs-time "$T" "$fs/a.sqfs" 2>"$err") || rc=$?
	got=no
	grep -q "compressing while reading stopped: No space left on device" "$err" && got=yes
	stored=$("$PYTHON3" -c 'import json,sys; print(json.load(sys.stdin)["stored_fragments"])' <<<"${json:-{\}}" 2>/dev/null || echo "?")
	if ((rc == 0)) && [[ $got == "$warn" && $(sha "$fs/a.sqfs") == "$want" && $(ls -A "$fs") == a.sqfs ]] &&
		{ [[ $warn == yes ]] || ((stored > 0)); }; then
		log "ok: [fragments ahead, $label] same bytes, warning: $got, $stored fragment blocks taken as stored"
	else
		fail "[fragments ahead, $label] expected exit 0, warning: $warn and the directory image's bytes, got $rc, warning: $got, $stored stored: $(cat "$err"); $(ls -A "$fs")"
	fi
	rm -f -- "$fs/a.sqfs" "$err"
}
scratch_fs "$S/fo-35m" 35m
bg 1 frags_room "out of room" 35m yes
if [[ ${SQFS_TEST_QUICK-} != 1 ]]; then
	scratch_fs "$S/fo-64m" 64m
	bg 2 frags_room "room enough" 64m no
fi
bg_wait
rm -rf -- "$FO" "$S/ar/fo.tar"

section "compressed archives"
gzip -c "$S/ar/posix.tar" >"$S/ar/posix.tar.gz"
from_tar "posix .tar.gz" "$FULL" "$S/ar/posix.tar.gz"
# -0: the reader is what is judged, not how small the archive is (-6 took 5 s)
xz -0 -T1 -c "$S/ar/posix.tar" >"$S/ar/posix.tar.xz"
from_tar "posix .tar.xz (pipe)" "$FULL" - < <(cat "$S/ar/posix.tar.xz")
if command -v zstd >/dev/null 2>&1; then
	zstd -q -c "$S/ar/posix.tar" >"$S/ar/posix.tar.zst"
	from_tar "posix .tar.zst" "$FULL" "$S/ar/posix.tar.zst"
elif [[ ${CI-} == true ]]; then
	fail "zstd is not installed (needed for the .tar.zst case; CI=true)"
else
	log "note: zstd not installed: .tar.zst case skipped"
fi
# a real archive cut in half, for the hostile cases below
head -c "$(($(stat -c %s "$S/ar/posix.tar") / 2))" "$S/ar/posix.tar" >"$S/ar/truncated-posix.tar"
rm -f "$S"/ar/posix*

section "gnu format (long names, base-256 ids; no xattrs)"
NOX=$(dir_image "$SRC" --no-xattrs)
"${TAR_C[@]}" --format=gnu --sparse -cf "$S/ar/gnu.tar" .
from_tar gnu "$NOX" "$S/ar/gnu.tar" && check_mount gnu "$SRC" no-xattrs
from_tar "gnu, --no-xattrs" "$NOX" "$S/ar/gnu.tar" --no-xattrs

section "ustar subset (short names, small ids, no sparse files)"
SUB=$S/sub
mkdir "$SUB"
for d in files dup tails links dev modes times empty_dir; do
	cp -a "$SRC/$d" "$SUB/"
done
touch -d @1234567 "$SUB"
SUBSHA=$(dir_image "$SUB" --no-xattrs)
tar -C "$SUB" --numeric-owner --format=ustar -cf "$S/ar/ustar.tar" . || fail "tar --format=ustar"
from_tar ustar "$SUBSHA" "$S/ar/ustar.tar" && check_mount ustar "$SUB" no-xattrs
rm -rf "$S/ar/ustar.tar" "$SUB"

section "an uncompressed archive from a file is read in place"
# Standard input already 1000 bytes into the file: offsets count from there.
{ head -c 1000 /dev/urandom; cat "$S/ar/gnu.tar"; } >"$S/ar/prefixed.tar"
rm -f -- "$OUT/tar.sqfs"
if { dd of=/dev/null bs=1000 count=1 status=none &&
	"$SQFS_PACK" --tar -q --mkfs-time "$T" "$OUT/tar.sqfs"; } <"$S/ar/prefixed.tar"; then
	[[ $(sha "$OUT/tar.sqfs") == "$NOX" ]] && log "ok: [offset 1000] same bytes as the directory image" ||
		fail "[offset 1000] the image differs from the directory image"
else
	fail "[offset 1000] sqfs-pack --tar failed"
fi
# 8 MiB of text packs to a few KiB: on a 3 MiB file system the image fits
# and a copy of the archive does not.
INP=$S/inplace
mkdir "$INP"
"$PYTHON3" -c 'import sys; sys.stdout.write("".join("line %d of a long text file\n" % i for i in range(300000)))' \
	>"$INP/text"
touch -d @1234567 "$INP/text" "$INP"
INPSHA=$(dir_image "$INP" --no-xattrs)
tar -C "$INP" --numeric-owner --format=gnu -cf "$S/ar/inplace.tar" .
SMALL=$S/small
scratch_fs "$SMALL" 3m
if "$SQFS_PACK" --tar -q --mkfs-time "$T" "$SMALL/a.sqfs" <"$S/ar/inplace.tar" 2>"$S/err"; then
	[[ $(sha "$SMALL/a.sqfs") == "$INPSHA" ]] &&
		log "ok: [in place] $(stat -c %s "$S/ar/inplace.tar")-byte archive packed on a 3 MiB file system" ||
		fail "[in place] the image differs from the directory image"
else
	fail "[in place] sqfs-pack --tar from the file needed room for a copy: $(cat "$S/err")"
fi
rm -f -- "$SMALL/a.sqfs"
rc=0
cat "$S/ar/inplace.tar" | "$SQFS_PACK" --tar -q "$SMALL/b.sqfs" 2>"$S/err" || rc=$?
if [[ $rc -eq 1 ]] && grep -q "No space left on device" "$S/err" && [[ ! -e $SMALL/b.sqfs ]] &&
	[[ -z $(ls -A "$SMALL") ]]; then
	log "ok: [pipe] the same archive from a pipe is spooled, and the spool does not fit: $(head -n1 "$S/err")"
else
	fail "[pipe] expected exit 1 and ENOSPC with nothing left, got $rc: $(cat "$S/err"); $(ls -A "$SMALL")"
fi
rm -rf -- "$INP" "$S/ar/inplace.tar" "$S/ar/prefixed.tar" "$S/ar/gnu.tar"
# Base64 text of random bytes (it compresses to about 0.76) from a pipe, on
# a file system with room for the spool and the image, but not always for
# the blocks compressed while reading too (--queue 64 has a job for each
# block, so none is left out).  Whether the spool or the image runs out of
# room first, the stored blocks must give way, with a warning, not the pack;
# and each stored block's room comes back once the writer has taken it.
# out_of_room LABEL FS_SIZE WARN RANDOM_BYTES COPIES SMALL_FILES
#   a file of base64(RANDOM_BYTES random bytes) COPIES times (the copies'
#   stored blocks are never taken), and SMALL_FILES files of 32 KiB (tails).
out_of_room() {
	local label=$1 size=$2 warn=$3 bytes=$4 copies=$5 small=$6 want rc=0 c fs=$S/oor-$1.fs got
	fs=${fs// /-}
	rm -rf -- "$S/oor"
	mkdir -p "$S/oor/small"
	head -c "$bytes" /dev/urandom | base64 -w0 >"$S/oor/c1"
	for ((c = 2; c <= copies; c++)); do cp -p "$S/oor/c1" "$S/oor/c$c"; done
	for ((c = 1; c <= small; c++)); do head -c 24576 /dev/urandom | base64 -w0 >"$S/oor/small/s$c"; done
	find "$S/oor" -exec touch -h -d @1234567 {} +
	want=$(dir_image "$S/oor" --no-xattrs)
	tar -C "$S/oor" --numeric-owner --format=gnu -cf "$S/ar/oor.tar" .
	scratch_fs "$fs" "$size"
	cat "$S/ar/oor.tar" | "$SQFS_PACK" --tar -q -j 2 --queue 64 --mkfs-time "$T" \
		"$fs/a.sqfs" 2>"$S/err" || rc=$?
	got=no
	grep -q "compressing while reading stopped: No space left on device" "$S/err" && got=yes
	if ((rc == 0)) && [[ $got == "$warn" && $(sha "$fs/a.sqfs") == "$want" && $(ls -A "$fs") == a.sqfs ]]; then
		log "ok: [ahead out of room: $label] packed, same bytes, warning: $got $(cat "$S/err")"
	else
		fail "[ahead out of room: $label] expected exit 0, warning: $warn and the directory image's bytes, got $rc, warning: $got: $(cat "$S/err"); $(ls -A "$fs")"
	fi
	rm -rf -- "$S/oor" "$S/ar/oor.tar" "$fs/a.sqfs"
}
# The spool (8 MiB) and the stored blocks (6 MiB) do not fit in 12 MiB.
out_of_room "while reading" 12m yes 786432 8 0
# The spool (6 MiB) and the stored blocks (2.3 MiB) fit in 10100 KiB; the
# image (3 MiB) does not fit beside the two copies' stored blocks, which it
# never takes; without them it does.
out_of_room "writing the image" 10100k yes 786432 3 96
# No copies: the spool (7 MiB), the stored blocks (3 MiB) and the image
# (5.3 MiB) together need 15 MiB, but the stored blocks go as the image
# takes them, so 13.5 MiB is room enough, with no warning.
out_of_room "taken blocks give their room back" 13824k no 3145728 1 96

section "a member given again many times (tar -r, tar -u)"
# Each copy but the last is freed as the next comes: its room in the spool
# comes back, so a 48 MiB archive of one 6 MiB file, given 8 times, packs
# from a pipe on a 24 MiB file system (all the copies would need 48).
scratch_fs "$S/rep" 24m
mkdir "$S/rep-src"
for i in 1 2 3 4 5 6 7 8; do
	head -c 6M /dev/urandom >"$S/rep-src/same"
	tar -C "$S/rep-src" --numeric-owner -rf "$S/rep.tar" same
done
RC=0
ERR=$(cat "$S/rep.tar" | "$SQFS_PACK" -q --tar --mkfs-time "$T" "$S/rep/r.sqfs" 2>&1) || RC=$?
if ((RC)); then
	fail "[member given 8 times] exit $RC: $ERR"
elif unsquashfs -cat "$S/rep/r.sqfs" same | cmp -s - "$S/rep-src/same"; then
	log "ok: [member given 8 times] packed on 24 MiB, the last copy in the image"
else
	fail "[member given 8 times] the image does not hold the last copy"
fi
umount_quiet "$S/rep"
rm -rf -- "$S/rep" "$S/rep-src" "$S/rep.tar"

# --- hostile input ---------------------------------------------------------------
section "modes, links and xattr names as tar x reads them"
# A file whose ACL mask is narrower than its group entry: the mode's group
# bits are the mask (stat, the header and tar x say 0640, not the group
# entry's rwx).  A symlink is rwxrwxrwx whatever its header says.  GNU tar
# writes '=' and '%' in xattr names as %3D and %25; tar x undoes that.
rm -rf -- "$S/tx"
mkdir -p "$S/tx/t"
printf 'secret\n' >"$S/tx/t/f"
chmod 0640 "$S/tx/t/f"
touch -d @1000 "$S/tx/t/f"
if setfacl -m u:1000:r,g::rwx,m::r-- "$S/tx/t/f" 2>/dev/null &&
	setfattr -n user.a=b -v 1 "$S/tx/t/f" && setfattr -n 'user.p%q' -v 2 "$S/tx/t/f"; then
	tar -C "$S/tx/t" --numeric-owner --acls --xattrs --xattrs-include='user.*' --format=posix \
		-cf "$S/tx/acl.tar" f
	rc=0
	"$SQFS_PACK" --tar -q "$S/tx/acl.sqfs" <"$S/tx/acl.tar" 2>"$S/tx/err" || rc=$?
	((rc == 0)) || fail "[acl mask] exit $rc: $(cat "$S/tx/err")"
	mode=$(unsquashfs -lln "$S/tx/acl.sqfs" | awk '$NF ~ /\/f$/ {print $1}')
	[[ $mode == -rw-r----- ]] && log "ok: [acl mask] mode from the mask: $mode" ||
		fail "[acl mask] mode $mode, expected -rw-r----- (the mask, as the header says)"
	mount_image "$S/tx/acl.sqfs" "$S/mnt" || fail "[xattr names] kernel mount"
	got=$("$PYTHON3" -c 'import os, sys; f = sys.argv[1]
print(" ".join(sorted("%s:%s" % (n, os.getxattr(f, n).decode()) for n in os.listxattr(f) if n.startswith("user."))))' "$S/mnt/f")
	umount_quiet "$S/mnt"
	[[ $got == 'user.a=b:1 user.p%q:2' ]] && log "ok: [xattr names] '=' and '%' restored: $got" ||
		fail "[xattr names] got: $got"
else
	skip_or_fail "setfacl/setfattr cannot set what the ACL and xattr-name checks need"
fi
"$PYTHON3" - "$S/tx/sym.tar" <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    ti = tarfile.TarInfo("s"); ti.type = tarfile.SYMTYPE; ti.linkname = "target"; ti.mode = 0o644
    t.addfile(ti)
PY
"$SQFS_PACK" --tar -q "$S/tx/sym.sqfs" <"$S/tx/sym.tar" || fail "[symlink mode] sqfs-pack failed"
mode=$(unsquashfs -lln "$S/tx/sym.sqfs" | awk '$(NF-2) ~ /\/s$/ {print $1}')
[[ $mode == lrwxrwxrwx ]] && log "ok: [symlink mode] $mode" || fail "[symlink mode] $mode from a 0644 header"
rm -rf -- "$S/tx"

section "hostile archives"
"$PYTHON3" - "$S/ar" <<'PY'
import io, os, random, sys, tarfile
out = sys.argv[1]
def mk(name, members, fmt=tarfile.GNU_FORMAT):
    with tarfile.open(os.path.join(out, name), "w", format=fmt) as t:
        for ti, data in members:
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
def reg(n, d=b"data\n"):
    ti = tarfile.TarInfo(n); ti.size = len(d); ti.mtime = 1; return (ti, d)
def d(n):
    ti = tarfile.TarInfo(n); ti.type = tarfile.DIRTYPE; ti.mode = 0o755; return (ti, None)
def sym(n, t):
    ti = tarfile.TarInfo(n); ti.type = tarfile.SYMTYPE; ti.linkname = t; return (ti, None)
def hl(n, t):
    ti = tarfile.TarInfo(n); ti.type = tarfile.LNKTYPE; ti.linkname = t; return (ti, None)
mk("dotdot.tar", [d("./"), reg("ok"), reg("../evil")])
mk("dotdot-inner.tar", [d("./"), d("sub"), reg("sub/../../evil2")])
mk("empty-symlink.tar", [d("./"), reg("ok"), sym("emptylink", "")])
mk("hardlink-missing.tar", [d("./"), hl("dangling-hardlink", "missing")])
mk("parent-is-file.tar", [d("./"), reg("plainfile"), reg("plainfile/child")])
# tar x refuses a file over a directory that has entries: no silent loss
mk("file-over-dir.tar", [d("./"), d("full"), reg("full/important"), reg("full")])
big = random.Random(7).randbytes(300000)
mk("big.tar", [d("./"), reg("bigmember", big)])
with open(os.path.join(out, "big.tar"), "rb") as f:
    data = f.read()
with open(os.path.join(out, "truncated-data.tar"), "wb") as f:
    f.write(data[:512 * 2 + 100000])        # inside bigmember's data
with open(os.path.join(out, "truncated-header.tar"), "wb") as f:
    f.write(data[:512 + 200])               # inside bigmember's header
with open(os.path.join(out, "garbage.bin"), "wb") as f:
    f.write(random.Random(8).randbytes(65536))
import gzip
with open(os.path.join(out, "corrupt.tar.gz"), "wb") as f:
    g = gzip.compress(data)
    f.write(g[:20] + bytes(b ^ 0x5A for b in g[20:2000]) + g[2000:])
PY

# hostile ARCHIVE REGEX: exit status exactly 1, a message matching REGEX, no
# image, no temp or core files, nothing written outside.
DUP_NAME=()
hostile() {
	local ar=$1 re=$2 rc=0 err msg left
	rm -rf -- "$OUT"
	mkdir "$OUT"
	err=$(cd "$OUT" && "$SQFS_PACK" --tar -q "$OUT/evil.sqfs" <"$S/ar/$ar" 2>&1 >/dev/null) || rc=$?
	msg=$(grep -v '^sqfs-pack: warning: ' <<<"$err" || true)	# libarchive's locale warnings
	if ((rc != 1)); then
		fail "[$ar] exit status $rc, expected 1$( ((rc > 128)) && echo " (killed by signal $((rc - 128)))"): $msg"
	elif ! grep -Eqi -- "$re" <<<"$msg"; then
		fail "[$ar] the message does not name the problem (/$re/): $msg"
	else
		log "ok: [$ar] exit 1: $msg"
	fi
	if grep -Eq 'sqfs-pack:.*sqfs-pack:' <<<"$msg"; then
		DUP_NAME+=("$msg")
	fi
	left=$(ls -A "$OUT")
	[[ -z $left ]] || fail "[$ar] left files in the output directory: $left"
	[[ ! -e $S/evil && ! -e $WORK/evil && ! -e $S/evil2 ]] || fail "[$ar] wrote outside the image"
}
hostile dotdot.tar '\.\./evil'
hostile dotdot-inner.tar 'sub/\.\./\.\./evil2'
hostile empty-symlink.tar 'emptylink.*(empty|target|symlink)'
hostile hardlink-missing.tar 'dangling-hardlink.*(missing|hard link)|(missing|hard link).*dangling-hardlink'
hostile parent-is-file.tar 'plainfile/child'
hostile file-over-dir.tar 'full: a non-directory cannot replace a non-empty directory'
hostile truncated-data.tar 'truncat|unexpected end|premature|malformed'
hostile truncated-header.tar 'truncat|unexpected end|premature|malformed'
hostile truncated-posix.tar 'truncat|unexpected end|premature|malformed'
hostile garbage.bin 'not a tar|unrecognized|format'
hostile corrupt.tar.gz 'gzip|crc|corrupt|malformed|invalid'
# From a pipe, cut inside a member whose blocks are being compressed.
rm -rf -- "$OUT"
mkdir "$OUT"
rc=0
err=$(head -c $((512 + 250000)) "$S/ar/big.tar" | "$SQFS_PACK" --tar -q -b 4K "$OUT/evil.sqfs" 2>&1 >/dev/null) || rc=$?
if ((rc == 1)) && grep -Eqi 'bigmember.*(truncat|unexpected end|premature|malformed)' <<<"$err" &&
	[[ -z $(ls -A "$OUT") ]]; then
	log "ok: [truncated stream] exit 1: $err"
else
	fail "[truncated stream] expected exit 1 naming bigmember and nothing left, got $rc: $err; $(ls -A "$OUT")"
fi
# One "prog: " per message, not "sqfs-pack: reading the archive: sqfs-pack: ...".
if ((${#DUP_NAME[@]})); then
	fail "${#DUP_NAME[@]} of the messages above repeat the program name, e.g.: ${DUP_NAME[0]}"
fi

# An archive that fails must not replace an existing image either.
printf 'old image\n' >"$OUT/keep.sqfs"
before=$(sha "$OUT/keep.sqfs")
rc=0
"$SQFS_PACK" --tar -q "$OUT/keep.sqfs" <"$S/ar/dotdot.tar" 2>/dev/null || rc=$?
((rc == 1)) || fail "[existing image] exit status $rc, expected 1"
[[ $(sha "$OUT/keep.sqfs") == "$before" ]] || fail "[existing image] a failed --tar run changed it"
[[ $(ls -A "$OUT") == keep.sqfs ]] || fail "[existing image] left: $(ls -A "$OUT")"

finish
