#!/bin/bash
# test_pseudo.sh SQFS_PACK
#
# sqfs-pack --pseudo and --pseudo-file (mksquashfs's pseudo definitions):
#   - d, m, b, c, i (f and s), s definitions, quoted and escaped paths, names
#     for owners: the image is byte-identical to sqfs-pack of a real tree
#     made with mkdir, mknod, mkfifo, ln -s, chmod and chown as root (new
#     entries dated at the mkfs time), from a directory and from a tar;
#   - the same definitions given to mksquashfs: sqfsdiff finds no difference;
#     as there, a definition naming an entry of the input is ignored with a
#     warning (except type m) and can replace it once excluded with -e;
#   - x definitions (extended attributes, values as text, 0x hex, 0s
#     base64, 0t text): byte-identical to a real tree made with setfattr;
#   - --pseudo-file skips comments and blank lines;
#   - bad definitions are usage errors (exit 2) saying what is wrong, with
#     the file and line for --pseudo-file; definitions that do not fit the
#     tree (missing parent, existing entry, nothing to modify) fail (exit 1)
#     naming the definition, and no image is written.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "$1"
need_root
need_cmd tar mknod mkfifo mksquashfs sqfsdiff sha256sum
T=1700000000
PACK_OPTS=(-q -c gzip:1 --mkfs-time $T)

S=$WORK/src
mkdir -p "$S/bin" "$S/etc"
printf 'su\n' >"$S/bin/su"
printf 'passwd\n' >"$S/etc/passwd"
find "$S" -exec touch -h -d @1600000000 {} +

DEFS=(
	'dev d 755 0 0'
	'dev/null c 666 0 0 1 3'
	'/dev/sda b 660 root 6 8 0'
	'dev/pts d 755 0 0'
	'run d 1777 0 0'
	'run/initctl i 600 0 0 f'
	'run/log i 666 0 0 s'
	'lib s 777 0 0 usr/lib'
	'bin/su m 4755 0 0'
	'etc d 750 0 42'
	'"my docs" d 700 1000 1000'
	'my\ docs/sub\ dir d 700 1000 1000'
	'"my "docs/x"y z" d 700 0 0'
	'spaced s 777 0 0 a target with spaces'
)
PFLAGS=()
for d in "${DEFS[@]}"; do PFLAGS+=(-p "$d"); done

# The same tree made for real.
E=$WORK/expect
cp -a "$S" "$E"
mkdir -m 755 "$E/dev" "$E/dev/pts" "$E/run"
chmod 1777 "$E/run"
mknod -m 666 "$E/dev/null" c 1 3
mknod -m 660 "$E/dev/sda" b 8 0
chgrp 6 "$E/dev/sda"
mkfifo -m 600 "$E/run/initctl"
"$PYTHON3" -c 'import os, socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o666)' "$E/run/log"
ln -s usr/lib "$E/lib"
chmod 4755 "$E/bin/su"
mkdir -m 700 "$E/my docs" "$E/my docs/sub dir" "$E/my docs/xy z"
chown 1000:1000 "$E/my docs" "$E/my docs/sub dir"
ln -s "a target with spaces" "$E/spaced"
# Pseudo entries take the mkfs time; what existed keeps its own.
touch -h -d @$T "$E/dev" "$E/dev/null" "$E/dev/sda" "$E/dev/pts" "$E/run" "$E/run/initctl" \
	"$E/run/log" "$E/lib" "$E/my docs/sub dir" "$E/my docs/xy z" "$E/my docs" "$E/spaced"
touch -h -d @1600000000 "$E" "$E/bin" "$E/etc" "$E/bin/su"
"$SQFS_PACK" "${PACK_OPTS[@]}" "$E" "$WORK/want.sqfs"

section "definitions"
if "$SQFS_PACK" "${PACK_OPTS[@]}" "${PFLAGS[@]}" "$S" "$WORK/got.sqfs" 2>"$WORK/err"; then
	if [[ $(sha "$WORK/got.sqfs") == "$(sha "$WORK/want.sqfs")" ]]; then
		log "ok: pseudo definitions equal a real tree made as root"
		grep -q "^sqfs-pack: warning: pseudo definition 'etc d 750 0 42': the entry exists in the input; ignored" "$WORK/err" &&
			log "ok: a definition of an existing entry is ignored with a warning, as mksquashfs does" ||
			fail "no warning for a definition of an existing entry: $(cat "$WORK/err")"
		# one that an earlier definition made is told apart
		"$SQFS_PACK" "${PACK_OPTS[@]}" -p 'nx d 755 0 0' -p '/nx c 600 0 0 1 3' "$S" \
			"$WORK/dup.sqfs" 2>"$WORK/err2" || fail "two definitions of one path failed"
		grep -q "pseudo definition '/nx c 600 0 0 1 3': an earlier definition made the entry; ignored" \
			"$WORK/err2" && log "ok: a second definition of one path is named as such" ||
			fail "second definition of one path: $(cat "$WORK/err2")"
		# the same path spelt with "//" and "/./" (as the tree walks it)
		"$SQFS_PACK" "${PACK_OPTS[@]}" -p 'nx d 755 0 0' -p 'nx/y d 755 0 0' \
			-p './/nx/.//y/ c 600 0 0 1 3' "$S" "$WORK/dup2.sqfs" 2>"$WORK/err2" ||
			fail "two spellings of one path failed"
		grep -q "pseudo definition './/nx/.//y/ c 600 0 0 1 3': an earlier definition made the entry; ignored" \
			"$WORK/err2" && log "ok: a second definition of one path spelt with // and /./ is named as such" ||
			fail "second definition of one path spelt with // and /./: $(cat "$WORK/err2")"
	else
		fail "pseudo definitions: image differs from the real tree's: $(sqfsdiff -a "$WORK/want.sqfs" -b "$WORK/got.sqfs" 2>&1 | head -n 10 | tr '\n' ' ' || true)"
	fi
else
	fail "sqfs-pack with pseudo definitions: $(cat "$WORK/err")"
fi
tar -C "$S" --numeric-owner -cf "$WORK/src.tar" .
if "$SQFS_PACK" "${PACK_OPTS[@]}" --tar "${PFLAGS[@]}" "$WORK/gotar.sqfs" <"$WORK/src.tar" 2>"$WORK/err" &&
	[[ $(sha "$WORK/gotar.sqfs") == "$(sha "$WORK/want.sqfs")" ]]; then
	log "ok: --tar with pseudo definitions equals the real tree"
else
	fail "--tar with pseudo definitions: $(cat "$WORK/err")"
fi
{
	printf '# a pseudo file\n\n'
	for d in "${DEFS[@]}"; do printf '  %s\n' "$d"; done
} >"$WORK/pseudo.txt"
if "$SQFS_PACK" "${PACK_OPTS[@]}" --pseudo-file "$WORK/pseudo.txt" "$S" "$WORK/gotf.sqfs" 2>"$WORK/err" &&
	[[ $(sha "$WORK/gotf.sqfs") == "$(sha "$WORK/want.sqfs")" ]]; then
	log "ok: --pseudo-file equals the real tree"
else
	fail "--pseudo-file: $(cat "$WORK/err")"
fi
mksquashfs "$S" "$WORK/mksq.sqfs" -noappend -quiet -no-progress "${PFLAGS[@]}" >/dev/null 2>&1 ||
	fail "mksquashfs with the same definitions failed"
if out=$(sqfsdiff -a "$WORK/got.sqfs" -b "$WORK/mksq.sqfs" 2>&1); then
	log "ok: sqfsdiff finds no difference from mksquashfs with the same definitions"
else
	fail "sqfsdiff against mksquashfs: $(head -n 10 <<<"$out" | tr '\n' ' ')"
fi

# Excluded first, an entry of the input can be replaced.
if "$SQFS_PACK" -q -e /bin/su -p 'bin/su c 600 0 0 5 1' "$S" "$WORK/repl.sqfs" 2>"$WORK/err" &&
	unsquashfs -lln "$WORK/repl.sqfs" /bin/su | grep >/dev/null '^crw------- 0/0 *5, *1 '; then
	log "ok: -e then -p replaces an entry of the input"
else
	fail "-e then -p: $(cat "$WORK/err") $(unsquashfs -lln "$WORK/repl.sqfs" /bin/su 2>&1 | tail -n 1)"
fi

section "x: extended attributes"
# The attributes the kernel refuses a user who has no privileges
# (security.capability, trusted.*), in every VALUE encoding, on entries of
# the input and of definitions; the image equals the real tree's.
setfattr -n user.k -v old "$S/etc"
XDEFS=(
	'bin/su x security.capability=0x0100000200200000000000000000000000000000'
	'bin/su x user.hex=0x00ff10'
	'etc x user.k=a new value, with spaces'
	'etc/passwd x trusted.b64=0sAAEC/w=='
	'etc/passwd x user.t=0t0x not hex'
	'dev d 755 0 0'
	'dev/null c 666 0 0 1 3'
	'dev/null x trusted.dev=0tnull'
	'/ x user.root=on the root'
)
XFLAGS=()
for d in "${XDEFS[@]}"; do XFLAGS+=(-p "$d"); done
X=$WORK/xexpect
cp -a "$S" "$X"
mkdir -m 755 "$X/dev"
mknod -m 666 "$X/dev/null" c 1 3
setfattr -n security.capability -v 0x0100000200200000000000000000000000000000 "$X/bin/su"
setfattr -n user.hex -v 0x00ff10 "$X/bin/su"
setfattr -n user.k -v 'a new value, with spaces' "$X/etc"
setfattr -n trusted.b64 -v 0x000102ff "$X/etc/passwd"
"$PYTHON3" -c 'import os, sys; os.setxattr(sys.argv[1], "user.t", b"0x not hex")' "$X/etc/passwd"
setfattr -h -n trusted.dev -v null "$X/dev/null"
setfattr -n user.root -v 'on the root' "$X"
touch -h -d @$T "$X/dev" "$X/dev/null"
touch -h -d @1600000000 "$X" "$X/bin" "$X/etc" "$X/bin/su" "$X/etc/passwd"
"$SQFS_PACK" "${PACK_OPTS[@]}" "$X" "$WORK/xwant.sqfs"
if "$SQFS_PACK" "${PACK_OPTS[@]}" "${XFLAGS[@]}" "$S" "$WORK/xgot.sqfs" 2>"$WORK/err" &&
	[[ $(sha "$WORK/xgot.sqfs") == "$(sha "$WORK/xwant.sqfs")" ]]; then
	log "ok: x definitions equal a real tree made with setfattr"
else
	fail "x definitions: $(cat "$WORK/err") $(sqfsdiff -a "$WORK/xwant.sqfs" -b "$WORK/xgot.sqfs" 2>&1 | head -n 10 | tr '\n' ' ' || true)"
fi
# the kernel reads the capability back
mkdir -p "$WORK/xm"
if mount -o loop,ro "$WORK/xgot.sqfs" "$WORK/xm" 2>/dev/null; then
	v=$(getfattr -n security.capability --only-values "$WORK/xm/bin/su" 2>/dev/null | od -An -tx1 | tr -d ' \n')
	umount "$WORK/xm"
	[[ $v == 0100000200200000000000000000000000000000 ]] &&
		log "ok: the kernel reads the capability an x definition set" ||
		fail "the kernel reads security.capability of bin/su as '$v'"
else
	fail "cannot loop-mount the x image"
fi
setfattr -x user.k "$S/etc"

section "bad definitions: usage errors"
usage_error() { # PATTERN ARGS...
	local pat=$1 rc=0
	shift
	"$SQFS_PACK" -q "$@" "$S" "$WORK/u.sqfs" 2>"$WORK/err" || rc=$?
	if [[ $rc -eq 2 ]] && grep -q -- "$pat" "$WORK/err"; then
		log "ok: $(head -n1 "$WORK/err")"
	else
		fail "expected exit 2 and /$pat/: exit $rc, $(cat "$WORK/err")"
	fi
}
usage_error "type must be one of" -p 'x q 644 0 0'
usage_error "type 'f' (a file made by a command) is not supported" -p 'x f 644 0 0 date'
usage_error "MODE must be octal" -p 'x d 0789 0 0'
usage_error "MODE must be octal" -p 'x d 17777 0 0'
usage_error "UID is not a uid or user name" -p 'x d 755 no_such_user_x 0'
usage_error "GID is not a gid or group name" -p 'x d 755 0 no_such_group_x'
usage_error "MAJOR must be 0 to 4095" -p 'x c 644 0 0 4096 1'
usage_error "give PATH b|c MODE UID GID MAJOR MINOR" -p 'x c 644 0 0 1'
usage_error "type i takes f" -p 'x i 644 0 0 q'
usage_error "give PATH d|m MODE UID GID" -p 'x d 755 0'
usage_error "give PATH TYPE" -p 'x'
usage_error "give PATH TYPE" -p '"unterminated d 755 0 0'
usage_error "give PATH x NAME=VALUE" -p 'etc x user.k'
usage_error "give PATH x NAME=VALUE" -p 'etc x =v'
usage_error "only user., trusted. and security. attributes" -p 'etc x system.posix_acl_access=0x02'
usage_error "NAME is empty after its namespace" -p 'etc x trusted.=v'
usage_error "bad VALUE: 0x needs pairs of hex digits" -p 'etc x user.k=0xabc'
usage_error "bad VALUE: 0x needs pairs of hex digits" -p 'etc x user.k=0xzz'
usage_error "bad VALUE: .* 0s base64" -p 'etc x user.k=0sAA*='
usage_error "bad VALUE: .* 0s base64" -p 'etc x user.k=0sAAE'
printf 'etc x user.k=0x%s\n' "$(head -c 65537 /dev/zero | od -An -v -tx1 | tr -d ' \n')" >"$WORK/long.txt"
usage_error "line 1: the value is longer than 65536 bytes" --pseudo-file "$WORK/long.txt"
printf 'dev d 755 0 0\n# fine so far\ndev/x c 644 0 0 1\n' >"$WORK/bad.txt"
usage_error "bad.txt: line 3: give PATH b|c" --pseudo-file "$WORK/bad.txt"
usage_error "No such file" --pseudo-file "$WORK/no-such-file"

section "definitions that do not fit the tree"
apply_error() { # PATTERN ARGS...
	local pat=$1 rc=0
	shift
	"$SQFS_PACK" -q "$@" "$S" "$WORK/a.sqfs" 2>"$WORK/err" || rc=$?
	if [[ $rc -eq 1 ]] && grep -q -- "$pat" "$WORK/err" && [[ ! -e $WORK/a.sqfs ]]; then
		log "ok: $(head -n1 "$WORK/err")"
	else
		fail "expected exit 1, /$pat/ and no image: exit $rc, $(cat "$WORK/err")"
	fi
}
apply_error "pseudo definition 'dev/null c 666 0 0 1 3': a parent directory is missing" -p 'dev/null c 666 0 0 1 3'
apply_error "pseudo definition 'nothing m 644 0 0': no such entry to modify" -p 'nothing m 644 0 0'
apply_error "pseudo definition 'bin/su/x d 755 0 0': a parent is not a directory" -p 'bin/su/x d 755 0 0'
apply_error "pseudo definition 'nothing x user.k=v': no such entry for the attribute" -p 'nothing x user.k=v'
apply_error "user. attributes are for regular files and directories only" \
	-p 'dev d 755 0 0' -p 'dev/null c 666 0 0 1 3' -p 'dev/null x user.k=v'
# Linux lists at most 64 KiB of names: 256 of 255 bytes fill it, one more
# is refused
for i in $(seq -w 0 255); do
	printf 'etc x user.%s%s=v\n' "$i" "$(printf 'n%.0s' $(seq 247))"
done >"$WORK/list64k.txt"
"$SQFS_PACK" -q --pseudo-file "$WORK/list64k.txt" "$S" "$WORK/l.sqfs" 2>"$WORK/err" &&
	[[ $(rdsquashfs -x /etc "$WORK/l.sqfs" 2>/dev/null | grep -c '^user\.[0-9]*n*=') == 256 ]] &&
	log "ok: 256 attribute names of 255 bytes (64 KiB listed)" ||
	fail "256 attribute names of 255 bytes: $(cat "$WORK/err")"
rm -f -- "$WORK/l.sqfs"
echo 'etc x user.x=v' >>"$WORK/list64k.txt"
apply_error "list64k.txt:257.*the entry's attribute names would take more than 64 KiB, more than Linux can list" \
	--pseudo-file "$WORK/list64k.txt"
printf 'a d 755 0 0\n\nb/c d 755 0 0\n' >"$WORK/late.txt"
apply_error "(.*late.txt:3)" --pseudo-file "$WORK/late.txt"

finish
