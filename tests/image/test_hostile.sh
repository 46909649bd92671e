#!/bin/bash
# test_hostile.sh SQFS_PACK
#
# `sqfs-pack --tar` on hostile archives: malformed headers, truncation,
# absurd sizes, huge sparse maps, path traversal, symlink tricks, duplicate
# entries, bad hard links, deep nesting, decompression bombs.  Each either
# fails with exit status 1 and a message naming the problem, or is handled
# in the documented way (sqfs-pack(1), --tar) and checked through the image.
# Never a crash, never a hang (every run has a time limit), never a write
# outside the image's directory, never a partial image or temp file at the
# target, and an existing image survives a failed run.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "${1-}"
need_root
need_cmd timeout unsquashfs sha256sum tar /usr/bin/time
[[ -x $PYTHON3 ]] || need_cmd python3

# Per-run limit: generous for the sanitizer builds; nothing here needs more
# than a few seconds in a normal build.
LIMIT=${HOSTILE_TIMEOUT:-120}

scratch_fs "$WORK/fs" 1G
S=$WORK/fs
AR=$S/ar	# the archives
OUT=$S/out	# images go here, and nothing else may appear here
CWD=$S/cwd	# sqfs-pack runs here: must stay empty
OUTSIDE=$S/outside	# symlinks in archives point here: must stay empty
mkdir -p "$AR" "$OUT" "$CWD" "$OUTSIDE" "$S/x"
# A full disk for the decompression bomb.
scratch_fs "$S/small" 32M

section "making the archives"
"$PYTHON3" - "$AR" "$OUTSIDE" <<'PY'
import gzip, io, lzma, os, struct, sys, tarfile
out, outside = sys.argv[1], sys.argv[2]

def path(n):
    return os.path.join(out, n)

def members(ms, fmt=tarfile.PAX_FORMAT):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=fmt) as t:
        for ti, data in ms:
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return b.getvalue()

def mk(name, ms, fmt=tarfile.PAX_FORMAT):
    with open(path(name), "wb") as f:
        f.write(members(ms, fmt))

def raw(name, data):
    with open(path(name), "wb") as f:
        f.write(data)

def reg(n, d=b"data\n", mode=0o644):
    ti = tarfile.TarInfo(n); ti.size = len(d); ti.mtime = 1; ti.mode = mode
    return (ti, d)

def dr(n, mode=0o755):
    ti = tarfile.TarInfo(n); ti.type = tarfile.DIRTYPE; ti.mode = mode; ti.mtime = 1
    return (ti, None)

def sym(n, t):
    ti = tarfile.TarInfo(n); ti.type = tarfile.SYMTYPE; ti.linkname = t; ti.mtime = 1
    return (ti, None)

def hl(n, t):
    ti = tarfile.TarInfo(n); ti.type = tarfile.LNKTYPE; ti.linkname = t; ti.mtime = 1
    return (ti, None)

def checksum(h):
    h = bytearray(h)
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)

def patch(data, hdr_off, field_off, value):
    """Overwrite a header field and fix the header's checksum."""
    h = bytearray(data[hdr_off:hdr_off + 512])
    h[field_off:field_off + len(value)] = value
    return data[:hdr_off] + checksum(h) + data[hdr_off + 512:]

def b256(v, n=12):
    return bytes([0x80]) + v.to_bytes(n - 1, "big")

def pax_sparse(name, realsize, chunks):
    """A pax 1.0 sparse member: the map leads the data."""
    m = "%d\n" % len(chunks) + "".join("%d\n%d\n" % (o, len(d)) for o, d in chunks)
    mb = m.encode(); mb += b"\0" * (-len(mb) % 512)
    data = mb + b"".join(d for o, d in chunks)
    ti = tarfile.TarInfo("./GNUSparseFile.0/" + name)
    ti.size = len(data); ti.mtime = 1
    ti.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                      "GNU.sparse.name": name, "GNU.sparse.realsize": str(realsize)}
    return (ti, data)

ok = members([dr("./"), reg("first", b"first\n"), reg("second", b"x" * 3000)],
             tarfile.USTAR_FORMAT)
# ustar: headers at 0 ("./"), 512 ("first"), 1536 ("second")

# --- malformed headers -------------------------------------------------------
h = bytearray(ok); h[512 + 148] ^= 0x11
raw("bad-checksum.tar", bytes(h))                  # second header's checksum
raw("bad-size-digits.tar", patch(ok, 512, 124, b"zz9zz9zz9zz\0"))
raw("bad-magic-mid.tar", ok[:512] + b"\x01" * 512 + ok[1024:])
# a pax header whose record length runs past its data
p = bytearray(members([reg("PaxHeaders/x", b"")], tarfile.USTAR_FORMAT)[:512])
p[156] = ord("x")
p[124:136] = b"%011o\0" % 32
rec = b"99999 path=far-too-long-record\n"
raw("pax-bad-record.tar", checksum(p) + rec.ljust(512, b"\0") + ok[512:])
# a GNU long name whose data claims 4 GiB
ln = bytearray(members([reg("././@LongLink", b"")], tarfile.USTAR_FORMAT)[:512])
ln[156] = ord("L")
ln[124:136] = b"%011o\0" % (4 << 30)
raw("gnu-longname-4g.tar", checksum(ln) + b"n" * 512 + ok[512:])

# --- truncation --------------------------------------------------------------
raw("trunc-header.tar", ok[:512 + 300])
raw("trunc-data.tar", ok[:1536 + 512 + 1000])
longpax = members([reg("d/" + "n" * 300, b"long\n")])
raw("trunc-pax.tar", longpax[:512 + 200])          # inside the pax data
longgnu = members([reg("d/" + "n" * 300, b"long\n")], tarfile.GNU_FORMAT)
raw("trunc-longname.tar", longgnu[:512 + 100])     # inside the ././@LongLink data
raw("trunc-gzip.tar.gz", gzip.compress(ok, mtime=0)[:-40])
raw("trunc-xz.tar.xz", lzma.compress(ok)[:-30])

# --- absurd sizes ---------------------------------------------------------------
one = members([reg("huge", b"tiny\n")], tarfile.GNU_FORMAT)
raw("size-8eib.tar", patch(one, 0, 124, b256((1 << 63) - 1)))
raw("size-negative.tar", patch(one, 0, 124, bytes([0xff]) * 12))
t = tarfile.TarInfo("paxhuge"); t.size = 5; t.mtime = 1
t.pax_headers = {"size": "9223372036854775807"}
mk("pax-size-8eib.tar", [(t, b"tiny\n")])
mk("sparse-realsize-4eib.tar", [pax_sparse("sparse-huge", 1 << 62, [(0, b"x")])])
mk("sparse-realsize-5tib.tar", [pax_sparse("sparse-5tib", 5 << 40, [(0, b"x")])])
mk("sparse-beyond-size.tar", [pax_sparse("sparse-beyond", 4096, [(1 << 20, b"x")])])
# old GNU sparse ('S') member with its real size field (offset 483) absurd
gs = bytearray(one[:512]); gs[156] = ord("S")
gs[386:386 + 24] = b"%011o\0" % 0 + b"%011o\0" % 5            # one map entry
gs[483:495] = b256(1 << 62)
raw("gnu-sparse-4eib.tar", checksum(gs) + one[512:])
# owners beyond 32 bits must not wrap (2**32 would be root)
def owned(name, fmt=tarfile.PAX_FORMAT, pax=None, uid=1000, gid=1000):
    t = tarfile.TarInfo("owned"); t.size = 2; t.mtime = 1; t.mode = 0o4755
    t.uid, t.gid = uid, gid
    if pax:
        t.pax_headers = pax
    mk(name, [(t, b"x\n")], fmt)
owned("uid-2p32-pax.tar", pax={"uid": "4294967296"})
owned("gid-2p32-pax.tar", pax={"gid": "4294967296"})
owned("uid-negative-pax.tar", pax={"uid": "-1"})
owned("gid-20-digits-pax.tar", pax={"gid": "99999999999999999999"})
owned("uid-2p32-gnu.tar", tarfile.GNU_FORMAT, uid=1 << 32, gid=(1 << 32) + 5)
owned("uid-max-pax.tar", pax={"uid": "4294967294", "gid": "4294967294"})

# --- path traversal -----------------------------------------------------------------
mk("dotdot.tar", [reg("../escaped")])
mk("dotdot-deep.tar", [dr("a"), reg("a/../../escaped")])
mk("dotdot-inside.tar", [dr("a"), reg("a/../b")])
mk("hardlink-dotdot.tar", [reg("f"), hl("h", "../f")])

# --- symlink tricks -----------------------------------------------------------------
mk("symlink-dir-escape.tar", [sym("l", outside), reg("l/escaped")])
mk("symlink-dot.tar", [sym("l", "."), reg("l/escaped")])
mk("symlink-dotdot-escape.tar", [dr("d"), sym("d/up", "../.."), reg("d/up/escaped")])
mk("hardlink-through-symlink.tar", [dr("d"), reg("d/f"), sym("l", "d"), hl("h", "l/f")])

# --- hard links -----------------------------------------------------------------
mk("hardlink-missing.tar", [reg("f"), hl("dangling", "nothere")])
mk("hardlink-self.tar", [hl("me", "me")])
mk("hardlink-dir.tar", [dr("d"), hl("h", "d")])
mk("hardlink-root.tar", [hl("h", ".")])
# a target with a trailing '/' must be a directory (tar x: ENOTDIR)
mk("hardlink-slash.tar", [reg("a"), hl("h", "a/")])
# no target at all: libarchive hands it on without a type
mk("hardlink-empty.tar", [reg("a"), hl("h", "")], tarfile.GNU_FORMAT)

# --- names ----------------------------------------------------------------------------
mk("deep-4097.tar", [reg("a/" * 4096 + "f")])
mk("name-too-long.tar", [reg("d/" + "n" * 300 + "/f")])
mk("symlink-empty.tar", [sym("empty", "")])
mk("dot-is-file.tar", [dr("sub"), reg("sub/.")])
mk("root-is-file.tar", [reg(".")])

# --- xattrs (pax SCHILY.xattr) ------------------------------------------------------------
def xf(name, pax):
    ti = tarfile.TarInfo("f"); ti.size = 2; ti.mtime = 1; ti.pax_headers = pax
    mk(name, [(ti, b"x\n")])
xf("xattr-value-900k.tar", {"SCHILY.xattr.user.big": "v" * 900000})
xf("xattr-name-300.tar", {"SCHILY.xattr.user." + "n" * 300: "v"})
xf("xattr-name-empty.tar", {"SCHILY.xattr.user.": "v"})
# Linux lists at most 64 KiB of names (XATTR_LIST_MAX): 256 names of 255
# bytes and their NULs fill it exactly, one more byte is refused
xf("xattr-list-64k.tar", {"SCHILY.xattr.user.%03d" % i + "n" * 247: "v" for i in range(256)})
xf("xattr-list-over.tar", dict({"SCHILY.xattr.user.%03d" % i + "n" * 247: "v" for i in range(256)},
                               **{"SCHILY.xattr.user.x": "v"}))
xf("xattr-unknown-ns.tar", {"SCHILY.xattr.bogus.x": "v", "SCHILY.xattr.user.ok": "yes"})
# user.* exists only on files and directories in Linux: on a symlink it is
# skipped (with a warning), trusted.* is kept
lx, _ = sym("ln", "target")
lx.pax_headers = {"SCHILY.xattr.user.l": "u", "SCHILY.xattr.trusted.t": "kept"}
mk("xattr-user-symlink.tar", [(lx, None)])

# --- documented handling: exit 0, checked through the image -----------------------------
# a later member replaces an earlier one of the same name (tar x)
# (a file over a directory that has entries is refused: test_tar.sh)
mk("dup.tar", [reg("f", b"one\n"), reg("f", b"two\n"),
               dr("x"), reg("x", b"file over dir\n"),
               reg("y", b"dir over file\n"), dr("y"), reg("y/in", b"in y\n"),
               reg("t", b"target\n"), hl("h", "t"), reg("t", b"new t\n")])
# leading / is removed (with a warning)
mk("absolute.tar", [reg("/abs/escaped", b"abs\n")])
# symlink targets are stored, never followed
mk("symlink-targets.tar", [sym("up", "../../../../etc/passwd"), sym("abs", outside)])
# 4096 levels is the deepest allowed
mk("deep-4096.tar", [reg("a/" * 4095 + "f", b"deep\n")])
# a huge sparse map: 100000 one-byte extents; linear time
mk("sparse-map-100k.tar", [pax_sparse("map", 100000 * 1024,
                                      [(i * 1024, b"%c" % (65 + i % 26)) for i in range(100000)])])
# the map out of order: still read right
# 64 GiB of holes and one byte at the end: 16 Mi block words at 4 KiB blocks
mk("sparse-64g.tar", [pax_sparse("holes", 64 << 30, [((64 << 30) - 1, b"z")])])
mk("sparse-map-unsorted.tar", [pax_sparse("unsorted", 3 * 65536,
                                          [(131072, b"C"), (0, b"A"), (65536, b"B")])])

# --- decompression bombs ---------------------------------------------------------------
# gzip members of zeros: 1 GiB of data declared and sent, 1 MB on disk
N, CH = 1 << 30, 64 << 20
ti = tarfile.TarInfo("zeros"); ti.size = N; ti.mtime = 1
z = bytes(CH)
with open(path("bomb.tar.gz"), "wb") as f:
    f.write(gzip.compress(ti.tobuf(format=tarfile.GNU_FORMAT) + z, 6, mtime=0))
    mz = gzip.compress(z, 6, mtime=0)
    for i in range(N // CH - 1):
        f.write(mz)
    f.write(gzip.compress(bytes(1024), 6, mtime=0))
# gzip of nothing but zeros: an end-of-archive marker, then 1 GiB more
with open(path("zeros.gz"), "wb") as f:
    for i in range(N // CH):
        f.write(mz)
PY

# Everything under $S but the archives, the image directories and the
# extraction directory: must never change.
snapshot() {
	find "$S" \( -path "$OUT" -o -path "$AR" -o -path "$S/x" -o -path "$S/small" \) -prune \
		-o -print | sort
}
before_outside=$(snapshot)

# run ARCHIVE [OUTDIR]: sqfs-pack --tar from $CWD with a time limit; RC, ERR, MSG.
RC=0 ERR= MSG=
run() {
	local ar=$1 dir=${2:-$OUT}
	RC=0
	ERR=$(cd "$CWD" && timeout -k 5 "$LIMIT" "$SQFS_PACK" --tar -q --mkfs-time 1 \
		"$dir/img.sqfs" <"$AR/$ar" 2>&1 >/dev/null) || RC=$?
	MSG=$(grep -v '^sqfs-pack: warning: ' <<<"$ERR" || true)
}

# clean LABEL DIR: the image directory is empty, nothing escaped.
clean() {
	local left now
	left=$(ls -A "$2")
	[[ -z $left ]] || fail "[$1] left in the image directory: $left"
	now=$(snapshot)
	if [[ $now != "$before_outside" ]]; then
		fail "[$1] wrote outside the image: $(comm -13 <(echo "$before_outside") <(echo "$now") | tr '\n' ' ')"
	fi
	[[ ! -e /escaped && ! -e /abs && ! -e $WORK/escaped && ! -e $S/escaped ]] ||
		fail "[$1] wrote outside the image (/escaped, /abs or \$WORK/escaped)"
}

# bad ARCHIVE REGEX: exit 1, a message matching REGEX, nothing left behind.
bad() {
	local ar=$1 re=$2
	rm -rf -- "${OUT:?}"/*
	run "$ar"
	if ((RC == 124 || RC == 137)); then
		fail "[$ar] no answer within $LIMIT s (a hang)"
	elif ((RC != 1)); then
		fail "[$ar] exit status $RC, expected 1$( ((RC > 128)) && echo " (killed by signal $((RC - 128)): a crash)"): ${MSG:0:300}"
	elif [[ -z $MSG ]]; then
		fail "[$ar] exit 1 without a message"
	elif ! grep -Eqi -- "$re" <<<"$MSG"; then
		fail "[$ar] the message does not name the problem (/$re/): ${MSG:0:300}"
	else
		log "ok: [$ar] exit 1: ${MSG:0:300}"
	fi
	clean "$ar" "$OUT"
}

# good ARCHIVE [list]: exit 0 and an image that unsquashfs extracts (with
# "list": only lists, for paths longer than PATH_MAX); the paths in $LIST.
LIST=
good() {
	local ar=$1
	rm -rf -- "${OUT:?}"/* "$S/x"
	run "$ar"
	if ((RC != 0)); then
		fail "[$ar] exit status $RC, expected 0: ${MSG:0:300}"
		return 1
	fi
	if [[ ${2-} == list ]]; then
		LIST=$(unsquashfs -l "$OUT/img.sqfs" 2>&1) || {
			fail "[$ar] unsquashfs cannot list the image"
			return 1
		}
		log "ok: [$ar] exit 0, image lists"
		clean_good "$ar"
		return 0
	fi
	if ! unsquashfs -q -n -d "$S/x" "$OUT/img.sqfs" >/dev/null 2>&1; then
		fail "[$ar] unsquashfs cannot extract the image"
		return 1
	fi
	LIST=$(cd "$S/x" && find . | sort)
	log "ok: [$ar] exit 0, image extracts"
	clean_good "$ar"
}
clean_good() {
	local left
	left=$(ls -A "$OUT")
	[[ $left == img.sqfs ]] || fail "[$1] the image directory holds: $left"
	rm -f "$OUT/img.sqfs"
	clean "$1" "$OUT"
}
# content FILE EXPECTED LABEL
content() {
	local got
	got=$(cat -- "$S/x/$1" 2>&1) || true
	[[ $got == "$2" ]] || fail "[$3] $1 holds '${got:0:80}', expected '$2'"
}

section "malformed headers"
bad bad-checksum.tar "malformed archive.*damaged.*after member '\./'"
bad bad-size-digits.tar "malformed archive.*damaged.*after member 'first'"
bad bad-magic-mid.tar "malformed archive.*damaged.*after member '\./'"
bad gnu-longname-4g.tar 'malformed|truncat|too large|invalid|long'

section "truncated archives"
bad trunc-header.tar 'truncat|unexpected end|premature|malformed'
bad trunc-data.tar 'second.*(truncat|unexpected end|premature)|truncat.*second|reading archive data'
bad trunc-pax.tar 'truncat|unexpected end|premature|malformed'
bad trunc-longname.tar 'truncat|unexpected end|premature|malformed'
bad trunc-gzip.tar.gz 'truncat|unexpected end|premature|malformed|gzip'
bad trunc-xz.tar.xz 'truncat|unexpected end|premature|malformed|xz|lzma'

section "absurd sizes"
bad size-8eib.tar 'size overflow.*first header'
bad size-negative.tar 'negative|malformed|invalid'
bad pax-size-8eib.tar 'too large|truncat|malformed|invalid'
bad sparse-realsize-4eib.tar 'sparse-huge.*too large|too large.*sparse-huge'
bad sparse-realsize-5tib.tar 'sparse-5tib.*too large.*4 TiB'
bad sparse-beyond-size.tar 'sparse-beyond.*(beyond|malformed|invalid)|(beyond|malformed|invalid).*sparse-beyond'
bad gnu-sparse-4eib.tar 'too large|malformed|invalid'

section "owners beyond 32 bits"
for ar in uid-2p32-pax.tar gid-2p32-pax.tar uid-negative-pax.tar gid-20-digits-pax.tar uid-2p32-gnu.tar; do
	bad "$ar" 'owned: owner outside 0\.\.4294967294'
done
if good uid-max-pax.tar; then
	got=$(stat -c %u/%g "$S/x/owned" 2>&1)
	[[ $got == 4294967294/4294967294 ]] ||
		fail "[uid-max-pax.tar] owner in the image: '$got', expected 4294967294/4294967294"
fi

section "path traversal"
bad dotdot.tar "\.\./escaped.*unsafe|unsafe.*\.\./escaped"
bad dotdot-deep.tar "a/\.\./\.\./escaped.*unsafe|unsafe.*a/\.\./\.\./escaped"
bad dotdot-inside.tar "a/\.\./b.*unsafe|unsafe.*a/\.\./b"
bad hardlink-dotdot.tar "h: .*unsafe hard link target"

section "symlink tricks"
bad symlink-dir-escape.tar 'l/escaped.*not a directory'
bad symlink-dot.tar 'l/escaped.*not a directory'
bad symlink-dotdot-escape.tar 'd/up/escaped.*not a directory'
bad hardlink-through-symlink.tar 'h: .*hard link to a missing member'

section "hard links"
bad hardlink-missing.tar 'dangling: .*hard link to a missing member'
bad hardlink-self.tar 'me: .*hard link to a missing member'
bad hardlink-dir.tar 'h: .*hard link to a directory'
bad hardlink-slash.tar "h: .*hard link target ends in '/' but is not a directory"
bad hardlink-empty.tar 'h: .*without a type .*hard link with an empty target'
bad hardlink-root.tar 'h: .*hard link to a directory'

section "names"
bad deep-4097.tar 'nested too deeply.*4097 levels'
bad name-too-long.tar 'too long|bad member name'
bad symlink-empty.tar 'empty: .*symlink with an empty target'
bad dot-is-file.tar "sub/\.: .*named '\.' is not a directory"
bad root-is-file.tar 'root is not a directory'

section "xattrs"
bad xattr-value-900k.tar "f: xattr value larger than 64 KiB.*user\.big"
bad xattr-name-300.tar "f: xattr name longer than 255 bytes.*user\.nnn"
bad xattr-name-empty.tar "f: storing xattrs.*xattr 'user\.'"
bad xattr-list-over.tar "f: xattr names longer than 64 KiB in all, which Linux cannot list"
# The most Linux lists: every name, through the kernel.
rm -rf -- "${OUT:?}"/*
run xattr-list-64k.tar
if ((RC != 0)); then
	fail "[xattr-list-64k.tar] exit status $RC, expected 0: ${MSG:0:300}"
elif ! mount_image "$OUT/img.sqfs" "$S/kx"; then
	fail "[xattr-list-64k.tar] kernel mount"
else
	n=$(getfattr -d -m- --absolute-names "$S/kx/f" 2>&1 | grep -c '^user\.[0-9]\{3\}n\{247\}="v"$' || true)
	if [[ $n == 256 ]]; then
		log "ok: [xattr-list-64k.tar] the kernel lists all 256 names (64 KiB)"
	else
		fail "[xattr-list-64k.tar] the kernel lists $n of 256 names: $(getfattr -d -m- "$S/kx/f" 2>&1 | first 2)"
	fi
	umount_quiet "$S/kx"
fi
rmdir -- "$S/kx" 2>/dev/null || true
rm -f -- "$OUT/img.sqfs"

section "decompression bombs"
# 1 GiB of zeros spooled beside a 32 MiB image directory: a full disk, said so.
rm -rf -- "${S:?}/small"/*
run bomb.tar.gz "$S/small"
if ((RC == 1)) && grep -q 'zeros.*No space left on device' <<<"$MSG"; then
	log "ok: [bomb.tar.gz] exit 1 on a full disk: $MSG"
else
	fail "[bomb.tar.gz into 32 MiB] exit $RC, expected 1 with 'No space left on device': $MSG"
fi
clean bomb.tar.gz "$S/small"
# Only zeros: the end-of-archive marker comes first and reading stops there.
good zeros.gz && [[ $LIST == . ]] || fail "[zeros.gz] the image is not empty: $LIST"

section "documented handling"
if good dup.tar; then
	content f "two" dup.tar
	content x "file over dir" dup.tar
	content y/in "in y" dup.tar
	content t "new t" dup.tar
	content h "target" dup.tar
	[[ -d $S/x/y && -f $S/x/x ]] || fail "[dup.tar] directory replacement went wrong: $LIST"
fi
if good absolute.tar; then
	content abs/escaped "abs" absolute.tar
	grep -q "removing leading '/'" <<<"$ERR" || fail "[absolute.tar] no warning about the leading '/'"
fi
# an xattr namespace SquashFS cannot store is skipped with a warning
if good xattr-unknown-ns.tar; then
	grep -q "warning: f: xattr 'bogus.x' cannot be stored" <<<"$ERR" ||
		fail "[xattr-unknown-ns.tar] no warning about 'bogus.x': $ERR"
fi
if good xattr-user-symlink.tar; then
	grep -q "warning: ln: xattr 'user.l' on a file that is neither regular nor a directory" <<<"$ERR" ||
		fail "[xattr-user-symlink.tar] no warning about user.l: $ERR"
	x=$(getfattr -h -d -m- --absolute-names "$S/x/ln" 2>&1)
	[[ $x == *'trusted.t="kept"'* && $x != *user.l* ]] ||
		fail "[xattr-user-symlink.tar] the symlink's xattrs: $x"
fi
if good symlink-targets.tar; then
	[[ $(readlink "$S/x/up") == ../../../../etc/passwd && $(readlink "$S/x/abs") == "$OUTSIDE" ]] ||
		fail "[symlink-targets.tar] symlink targets not stored as given"
fi
if good deep-4096.tar list; then
	[[ $(grep -c . <<<"$LIST") -eq 4097 && $(tail -n1 <<<"$LIST") == */a/a/f ]] ||
		fail "[deep-4096.tar] the listing is not 4095 directories and a file"
fi
# libarchive ignores a malformed pax record, with a warning
if good pax-bad-record.tar; then
	grep -q 'warning: .*malformed pax' <<<"$ERR" ||
		fail "[pax-bad-record.tar] no warning about the malformed pax record: $ERR"
	content second "$(head -c 3000 /dev/zero | tr '\0' x)" pax-bad-record.tar
fi
t0=$SECONDS
if good sparse-map-100k.tar; then
	log "   (100000-extent sparse map: $((SECONDS - t0)) s)"
	"$PYTHON3" - "$S/x/map" <<'PY' || fail "[sparse-map-100k.tar] wrong contents"
import sys
d = open(sys.argv[1], "rb").read()
exp = bytearray(100000 * 1024)
for i in range(100000):
    exp[i * 1024] = 65 + i % 26
sys.exit(0 if d == bytes(exp) else 1)
PY
fi
if good sparse-map-unsorted.tar; then
	"$PYTHON3" - "$S/x/unsorted" <<'PY' || fail "[sparse-map-unsorted.tar] wrong contents"
import sys
d = open(sys.argv[1], "rb").read()
exp = bytearray(3 * 65536); exp[0] = 65; exp[65536] = 66; exp[131072] = 67
sys.exit(0 if d == bytes(exp) else 1)
PY
fi

section "memory of a huge sparse file"
# A tar of a few KiB may declare 64 GiB of holes: at 4 KiB blocks its inode
# has 16 Mi block words (64 MiB).  sqfs-pack keeps a run of holes as two
# words and streams the inode's words into the table, so its memory does
# not grow with the holes (mksquashfs takes 8 bytes a block, 535 MB; we
# took 268 MB before).
# SQFS_TEST_QUICK=1 (the sanitizer modes, where the peak is not judged):
# 64 KiB blocks, 1 Mi block words through the same code (16 Mi took 40 s
# under TSan).
rm -rf -- "${OUT:?}"/*
RC=0
BS=4K
[[ ${SQFS_TEST_QUICK:-0} == 1 ]] && BS=64K
ERR=$(cd "$CWD" && timeout -k 5 "$LIMIT" /usr/bin/time -f 'peak_kib=%M' "$SQFS_PACK" --tar -q -b $BS \
	--mkfs-time 1 "$OUT/img.sqfs" <"$AR/sparse-64g.tar" 2>&1 >/dev/null) || RC=$?
peak=$(sed -n 's/^peak_kib=//p' <<<"$ERR")
if ((RC != 0)); then
	fail "[sparse-64g.tar -b $BS] exit status $RC: ${ERR:0:300}"
elif ! last=$(unsquashfs -lls "$OUT/img.sqfs" 2>&1 | grep ' squashfs-root/holes$'); then
	fail "[sparse-64g.tar -b $BS] no file 'holes' in the image"
elif [[ $(awk '{print $3}' <<<"$last") != $((64 << 30)) ]]; then
	fail "[sparse-64g.tar -b $BS] 'holes' is not 64 GiB: $last"
elif [[ ${SQFS_TEST_QUICK:-0} == 1 ]]; then
	log "ok: [sparse-64g.tar -b $BS] packed; note: SQFS_TEST_QUICK=1 (a sanitizer's own memory), the peak RSS bound is left to the normal mode"
elif [[ -z $peak ]] || ((peak > 48 * 1024)); then
	fail "[sparse-64g.tar -b $BS] peak RSS ${peak:-?} KiB, above 48 MiB for 64 GiB of holes"
else
	log "ok: [sparse-64g.tar -b $BS] peak RSS $((peak / 1024)) MiB for 64 GiB of holes (16 Mi block words)"
fi
rm -f -- "$OUT/img.sqfs"
clean sparse-64g.tar "$OUT"

section "an existing image survives"
printf 'old image\n' >"$OUT/keep.sqfs"
before=$(sha "$OUT/keep.sqfs")
for ar in trunc-data.tar symlink-dir-escape.tar sparse-realsize-5tib.tar; do
	RC=0
	(cd "$CWD" && timeout -k 5 "$LIMIT" "$SQFS_PACK" --tar -q "$OUT/keep.sqfs" <"$AR/$ar") 2>/dev/null || RC=$?
	((RC == 1)) || fail "[$ar over an image] exit status $RC, expected 1"
	[[ $(sha "$OUT/keep.sqfs") == "$before" ]] || fail "[$ar over an image] the image was changed"
	[[ $(ls -A "$OUT") == keep.sqfs ]] || fail "[$ar over an image] left: $(ls -A "$OUT")"
done
log "ok: the existing image is unchanged after failed runs"

finish
