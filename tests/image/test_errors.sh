#!/bin/bash
# test_errors.sh SQFS_PACK
#
# Usage errors exit 2 with a message naming the option; packing failures exit 1
# with a message naming the cause (also for trees nested past 4096 levels),
# never crash, never leave a partial image or a temporary file, and never
# touch an existing image.  Signals during packing
# leave no partial image (SIGINT/SIGTERM/SIGHUP: no temp file either; SIGKILL:
# the image was an unnamed file, nothing remains, the target is unchanged).
# Modification times SquashFS cannot hold are clamped with a warning.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "${1-}"
need_root
need_cmd setpriv sha256sum tar rdsquashfs setfacl strace setfattr unshare
[[ -x $PYTHON3 ]] || need_cmd python3

scratch_fs "$WORK/fs" 2G
S=$WORK/fs
chmod 0755 "$WORK" "$S"	# uid 65534 must reach the trees below
mkdir -p "$S/src/sub" "$S/out"
printf 'hello\n' >"$S/src/hello"
printf 'sub\n' >"$S/src/sub/file"

# run_pack OUTVAR ERRVAR ARGS...: run sqfs-pack, capture exit status and stderr.
RC=0
ERR=
run() {
	RC=0
	ERR=$("$@" 2>&1 >/dev/null) || RC=$?
}

# expect_rc WANT LABEL: exit status exactly WANT, and not a crash.
expect_rc() {
	if ((RC != $1)); then
		local why=""
		((RC > 128)) && why=" (killed by signal $((RC - 128)): a crash)"
		fail "[$2] exit status $RC, expected $1$why; stderr: $ERR"
		return 1
	fi
}
expect_msg() {	# expect_msg REGEX LABEL
	if ! grep -Eq -- "$1" <<<"$ERR"; then
		fail "[$2] the message does not match /$1/: $ERR"
		return 1
	fi
}
# nothing_left DIR LABEL [ALLOWED...]: DIR holds only the ALLOWED names.
nothing_left() {
	local dir=$1 label=$2 n extra=()
	shift 2
	while IFS= read -r -d '' n; do
		n=${n##*/}
		[[ " $* " == *" $n "* ]] || extra+=("$n")
	done < <(find "$dir" -mindepth 1 -maxdepth 1 -print0)
	if ((${#extra[@]})); then
		fail "[$label] left in $dir: ${extra[*]}"
	fi
}

# --- usage errors: exit 2, the option named ------------------------------------
section "usage errors"
usage() {	# usage REGEX ARGS...
	local re=$1
	shift
	rm -rf -- "$S/out"
	mkdir "$S/out"
	run "$SQFS_PACK" "$@"
	local label="sqfs-pack $*"
	expect_rc 2 "$label" && expect_msg "$re" "$label" && log "ok: [$label] exit 2: ${ERR%%$'\n'*}"
	nothing_left "$S/out" "$label"
}
usage "comp.*bogus|bogus.*comp" -c bogus "$S/src" "$S/out/i.sqfs"
usage "comp.*zstd:23|zstd.*level" -c zstd:23 "$S/src" "$S/out/i.sqfs"
usage "comp.*gzip:0|gzip.*level" -c gzip:0 "$S/src" "$S/out/i.sqfs"
usage "(-b|--block-size)\b.*3000|3000.*(-b|--block-size)\b" -b 3000 "$S/src" "$S/out/i.sqfs"
usage "(-b|--block-size)\b.*2M|2M.*(-b|--block-size)\b" -b 2M "$S/src" "$S/out/i.sqfs"
usage "(-j|--jobs)\b.*0|0.*(-j|--jobs)\b" -j 0 "$S/src" "$S/out/i.sqfs"
usage "--bogus" --bogus "$S/src" "$S/out/i.sqfs"
usage "SRC_DIR|IMAGE|usage|Usage"
usage "SRC_DIR|IMAGE|usage|Usage" "$S/src"
usage "SRC_DIR|IMAGE|usage|Usage" "$S/src" "$S/out/i.sqfs" extra
usage "IMAGE|usage|Usage" --tar
usage "IMAGE|usage|Usage" --tar "$S/out/a.sqfs" "$S/out/b.sqfs"
usage "--no-fragments.*--always-fragments|--always-fragments.*--no-fragments" \
	--no-fragments --always-fragments "$S/src" "$S/out/i.sqfs"
usage "--mkfs-time\b.*yesterday" --mkfs-time yesterday "$S/src" "$S/out/i.sqfs"
# An empty name is refused before any work (it would fail only at the end).
usage "IMAGE must not be empty" "$S/src" ""
usage "SRC_DIR must not be empty" "" "$S/out/i.sqfs"
usage "IMAGE must not be empty" --tar ""

# --- packing failures: exit 1 -------------------------------------------------------
section "packing failures"
rm -rf -- "$S/out"
mkdir "$S/out"

run "$SQFS_PACK" -q "$S/no/such/dir" "$S/out/i.sqfs"
expect_rc 1 "missing source dir" && expect_msg "no/such/dir.*No such file" "missing source dir" &&
	log "ok: [missing source dir] $ERR"
nothing_left "$S/out" "missing source dir"

run "$SQFS_PACK" -q "$S/src/hello" "$S/out/i.sqfs"
expect_rc 1 "source is a file" && expect_msg "hello.*Not a directory" "source is a file" &&
	log "ok: [source is a file] $ERR"
nothing_left "$S/out" "source is a file"

run "$SQFS_PACK" -q "$S/src" "$S/out/nonexistent/i.sqfs"
expect_rc 1 "output dir missing" && expect_msg "nonexistent.*No such file" "output dir missing" &&
	log "ok: [output dir missing] $ERR"
nothing_left "$S/out" "output dir missing"

mkdir "$S/out/a_directory"
run "$SQFS_PACK" -q "$S/src" "$S/out/a_directory"
expect_rc 1 "image is a directory" && expect_msg "a_directory" "image is a directory" &&
	log "ok: [image is a directory] $ERR"
nothing_left "$S/out" "image is a directory" a_directory
nothing_left "$S/out/a_directory" "image is a directory"
# ... found before the archive is read: a stream with nothing in it yet
# (a FIFO held open) does not keep sqfs-pack --tar waiting.
mkfifo "$S/out/stream"
exec 8<>"$S/out/stream"
run timeout 20 "$SQFS_PACK" -q --tar "$S/out/a_directory" <"$S/out/stream"
exec 8>&-
expect_rc 1 "--tar, image a directory" && expect_msg "a_directory: cannot create the image: exists and is not a regular file" \
	"--tar, image a directory" && log "ok: [--tar, image a directory] before reading: $ERR"
rm -f "$S/out/stream"
rmdir "$S/out/a_directory"
# IMAGE ending in '/' names a directory, existing or not (as mksquashfs says)
for t in "$S/out/new/" "$S/out/new/." "$S/out/"; do
	run "$SQFS_PACK" -q "$S/src" "$t"
	expect_rc 1 "image $t" && expect_msg "cannot create the image: Is a directory" "image $t" &&
		log "ok: [image $t] $ERR"
	[[ ! -e $S/out/new ]] || { fail "[image $t] made $S/out/new"; rm -rf "$S/out/new"; }
done
nothing_left "$S/out" "image ending in /"

# The tree changes between the scan and the data pass: a file renamed over
# one, a FIFO in a file's place, a directory swapped for a symlink that
# leads out of the tree.  Each is refused by name: no image with another
# file's bytes under the scanned metadata, no wait for a FIFO's writer.
# sqfs-pack is stopped while its data pass reads the first file (two blocks
# in flight at most, so b is not open yet), the tree changed, and it is let go.
mkdir -p "$S/swap"
paused_pack() {	# paused_pack LABEL CHANGE...: sets RC and ERR
	local label=$1 pid i
	shift
	rm -rf "$S/swap/t" "$S/swap/outside" "$S/swap/err" "$S/out/sw.sqfs"
	mkdir -p "$S/swap/t/d" "$S/swap/outside"
	head -c 6000000 /dev/urandom | base64 -w 76 >"$S/swap/t/a"	# first in the data pass
	seq 1 20000 >"$S/swap/t/b"
	head -c 300000 /dev/urandom >"$S/swap/t/c"	# and c2: the same size, so c is
	head -c 300000 /dev/urandom >"$S/swap/t/c2"	# opened to hash it, then to pack it
	echo public >"$S/swap/t/d/secret"
	echo SECRET >"$S/swap/outside/secret"
	"$SQFS_PACK" -q --queue 2 -c xz:9 -j 1 "$S/swap/t" "$S/out/sw.sqfs" 2>"$S/swap/err" >/dev/null &
	pid=$!
	for ((i = 0; i < 1000; i++)); do
		ls -l "/proc/$pid/fd" 2>/dev/null | grep >/dev/null "/swap/t/a\$" && break
		sleep 0.005
	done
	((i < 1000)) || fail "[$label] never saw sqfs-pack read the first file"
	kill -STOP "$pid" || true
	"$@"
	kill -CONT "$pid" || true
	RC=0
	timeout 60 tail --pid="$pid" -f /dev/null || { fail "[$label] sqfs-pack did not finish"; kill -9 "$pid"; }
	wait "$pid" || RC=$?
	ERR=$(cat "$S/swap/err")
}
swap_case() {	# swap_case LABEL EXPECTED_PATH CHANGE...
	local label=$1 want=$2
	shift 2
	paused_pack "$label" "$@"
	expect_rc 1 "$label" && expect_msg "$want: opening: the file was replaced after the scan" "$label" &&
		log "ok: [$label] $ERR"
	[[ ! -e $S/out/sw.sqfs ]] || fail "[$label] an image was left"
}
swap_case "file renamed over" "swap/t/b" \
	sh -c "printf 'new' >'$S/swap/t/b.new' && mv '$S/swap/t/b.new' '$S/swap/t/b'"
swap_case "FIFO in its place" "swap/t/b" \
	sh -c "rm '$S/swap/t/b' && mkfifo '$S/swap/t/b'"
swap_case "directory swapped for a symlink" "swap/t/d/secret" \
	sh -c "mv '$S/swap/t/d' '$S/swap/t/d.old' && ln -s '$S/swap/outside' '$S/swap/t/d'"
swap_case "file swapped for a symlink" "swap/t/b" \
	sh -c "rm '$S/swap/t/b' && ln -s a '$S/swap/t/b'"
# Nothing outside the tree is even opened: a writer blocked on a FIFO there
# would see the open of a reader (a device could see worse).
swap_case "directory swapped for a symlink to a FIFO's directory" "swap/t/d/secret" \
	sh -c "rm '$S/swap/outside/secret' && mkfifo '$S/swap/outside/secret' &&
		{ sh -c 'exec 3>\"\$1\"; touch \"\$2\"' sh '$S/swap/outside/secret' '$S/swap/opened' & } &&
		mv '$S/swap/t/d' '$S/swap/t/d.old' && ln -s '$S/swap/outside' '$S/swap/t/d'"
sleep 0.2
if [[ -e $S/swap/opened ]]; then
	fail "[FIFO outside the tree] sqfs-pack opened it (its writer went on)"
else
	log "ok: [FIFO outside the tree] not opened"
fi
exec 9<>"$S/swap/outside/secret"	# let the writer go
exec 9<&-
# A file still the one scanned but changed since: the data read now, at the
# scanned size and time, with a warning naming it (tar: "file changed as we
# read it").  b changed in place, the same size; c and d/secret grew.
paused_pack "changed after the scan" \
	sh -c "seq 2 20001 | head -c \$(stat -c %s '$S/swap/t/b') >'$S/swap/t/b.tmp' && cat '$S/swap/t/b.tmp' >'$S/swap/t/b' &&
		echo more >>'$S/swap/t/d/secret' && echo more >>'$S/swap/t/c'"
if expect_rc 0 "changed after the scan" &&
	[[ $(grep -c 'swap/t/c: changed after the scan (300000 bytes then, 300005 now)' <<<"$ERR") == 1 ]] &&
	expect_msg "swap/t/b: changed after the scan \(108894 bytes then, 108894 now\)" "changed after the scan" &&
	expect_msg "swap/t/d/secret: changed after the scan \(7 bytes then, 12 now\)" "changed after the scan" &&
	[[ $(unsquashfs -cat "$S/out/sw.sqfs" b | md5sum) == "$(md5sum <"$S/swap/t/b.tmp")" &&
		$(unsquashfs -cat "$S/out/sw.sqfs" d/secret) == public ]]; then
	log "ok: [changed after the scan] $ERR"
else
	fail "[changed after the scan] the image holds: b $(unsquashfs -cat "$S/out/sw.sqfs" b | head -c 20 | od -c | head -n1), d/secret '$(unsquashfs -cat "$S/out/sw.sqfs" d/secret)'"
fi
rm -f -- "$S/out/sw.sqfs"

# Extended attributes that change while they are read (faults injected
# by strace): one removed between the listing and its read is left out
# (whichever the file system lists first),
# a list that grew between its size and its read is taken again.
mkdir -p "$S/xr"
echo a >"$S/xr/f"
setfattr -n user.a -v 1 "$S/xr/f"
setfattr -n user.b -v 2 "$S/xr/f"
xattr_race() {	# xattr_race LABEL WANT_REGEX STRACE_ARGS...
	local label=$1 want=$2 got
	shift 2
	RC=0
	# LeakSanitizer's ptrace and strace's exclude each other.
	ERR=$(ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 strace -f -qq -o /dev/null "$@" \
		"$SQFS_PACK" -q --mkfs-time 1 "$S/xr" "$S/out/xr.sqfs" 2>&1) || RC=$?
	got=$(rdsquashfs -x /f "$S/out/xr.sqfs" 2>/dev/null | tr '\n' ' ' || true)
	expect_rc 0 "$label" && if [[ $got =~ ^($want)$ ]]; then
		log "ok: [$label] exit 0, xattrs: $got"
	else
		fail "[$label] xattrs of f in the image: '$got', expected '$want'"
	fi
	rm -f -- "$S/out/xr.sqfs"
}
xattr_race "xattr removed after the listing" "user.a=1 |user.b=2 " \
	-e trace=lgetxattr -e inject=lgetxattr:error=ENODATA:when=1
xattr_race "xattr list grown after its size" "user.a=1 user.b=2 " \
	-e trace=llistxattr -e inject=llistxattr:error=ERANGE:when=3
rm -rf -- "$S/xr"

# A chroot without /proc (xattrs are read through /proc/self/fd): by their
# full paths, the same image.  A sanitizer's runtime needs /proc itself.
if ldd "$SQFS_PACK" 2>/dev/null | grep >/dev/null 'lib[at]san'; then
	log "note: [no /proc] a sanitizer build cannot run without /proc: left to the normal mode"
elif unshare -m true 2>/dev/null; then
	"$SQFS_PACK" -q --mkfs-time 1 "$S/src" "$S/out/proc.sqfs" 2>/dev/null || fail "[no /proc] reference pack"
	RC=0
	ERR=$(unshare -m sh -c 'umount -l /proc && exec "$@"' sh "$SQFS_PACK" -q --mkfs-time 1 \
		"$S/src" "$S/out/noproc.sqfs" 2>&1) || RC=$?
	expect_rc 0 "no /proc" && if cmp -s "$S/out/proc.sqfs" "$S/out/noproc.sqfs"; then
		log "ok: [no /proc] the same image"
	else
		fail "[no /proc] the image differs from the one made with /proc"
	fi
	# Without /proc the image is a named temporary file renamed into
	# place: replacing an image (0640, its mode kept), then a new one
	# (the umask's mode), nothing left beside them.
	rm -f -- "$S/out/noproc.sqfs"
	mkdir "$S/out/np"
	printf 'old image\n' >"$S/out/np/r.sqfs"
	chmod 0640 "$S/out/np/r.sqfs"
	for img in r.sqfs new.sqfs; do
		RC=0
		ERR=$(umask 027 && unshare -m sh -c 'umount -l /proc && exec "$@"' sh "$SQFS_PACK" -q \
			--mkfs-time 1 "$S/src" "$S/out/np/$img" 2>&1) || RC=$?
		expect_rc 0 "no /proc, $img" &&
			if cmp -s "$S/out/proc.sqfs" "$S/out/np/$img" && [[ $(stat -c %a "$S/out/np/$img") == 640 ]]; then
				log "ok: [no /proc, $img] renamed into place, mode 640"
			else
				fail "[no /proc, $img] mode $(stat -c %a "$S/out/np/$img"), same bytes: $(cmp -s "$S/out/proc.sqfs" "$S/out/np/$img" && echo yes || echo no)"
			fi
	done
	nothing_left "$S/out/np" "no /proc, temporary files" r.sqfs new.sqfs
	rm -rf -- "$S/out/proc.sqfs" "$S/out/np"
else
	skip_or_fail "unshare -m: cannot make a mount namespace"
fi
rm -rf "$S/swap"

# As an unprivileged user (root reads everything): an unreadable file, a
# directory that cannot be entered, an output directory that is not writable.
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
"${NOBODY[@]}" true || skip_or_fail "setpriv cannot switch to uid 65534"
mkdir -p "$S/ro/a" "$S/ro/b" "$S/nobody_out"
printf 'public\n' >"$S/ro/a/public"
printf 'secret\n' >"$S/ro/a/secret_file"
chmod 0600 "$S/ro/a/secret_file"
mkdir "$S/ro/b/locked_dir"
printf 'x\n' >"$S/ro/b/locked_dir/inside"
chmod 0700 "$S/ro/b/locked_dir"
chown 65534:65534 "$S/nobody_out"
cp -a "$S/ro" "$S/ro2"
rm -rf "$S/ro/b" "$S/ro2/a"

run "${NOBODY[@]}" "$SQFS_PACK" -q "$S/ro" "$S/nobody_out/i.sqfs"
expect_rc 1 "unreadable file" && expect_msg "secret_file.*Permission denied" "unreadable file" &&
	log "ok: [unreadable file] $ERR"
nothing_left "$S/nobody_out" "unreadable file"

run "${NOBODY[@]}" "$SQFS_PACK" -q "$S/ro2" "$S/nobody_out/i.sqfs"
expect_rc 1 "locked directory" && expect_msg "locked_dir.*Permission denied" "locked directory" &&
	log "ok: [locked directory] $ERR"
nothing_left "$S/nobody_out" "locked directory"

# --exclude is applied before the stat: an excluded entry that cannot be
# stat'ed (in a directory that can be listed but not entered) is no error.
mkdir -p "$S/ro3/nox"
echo x >"$S/ro3/nox/f"
echo y >"$S/ro3/ok"
chmod 0644 "$S/ro3/nox"
run "${NOBODY[@]}" "$SQFS_PACK" -q -e 'nox/f' "$S/ro3" "$S/nobody_out/i.sqfs"
expect_rc 0 "excluded entry that cannot be stat'ed" && log "ok: [excluded entry that cannot be stat'ed] exit 0"
rm -f -- "$S/nobody_out/i.sqfs"
chmod 0755 "$S/ro3/nox"

# the old image survives a failed run
printf 'previous image\n' >"$S/nobody_out/i.sqfs"
chown 65534:65534 "$S/nobody_out/i.sqfs"
before=$(sha "$S/nobody_out/i.sqfs")
run "${NOBODY[@]}" "$SQFS_PACK" -q "$S/ro" "$S/nobody_out/i.sqfs"
expect_rc 1 "unreadable file, image exists" || true
[[ $(sha "$S/nobody_out/i.sqfs") == "$before" ]] ||
	fail "[unreadable file, image exists] the existing image was changed"
nothing_left "$S/nobody_out" "unreadable file, image exists" i.sqfs

mkdir "$S/root_out"
run "${NOBODY[@]}" "$SQFS_PACK" -q "$S/src" "$S/root_out/i.sqfs"
expect_rc 1 "output dir not writable" &&
	expect_msg "root_out.*Permission denied" "output dir not writable" &&
	log "ok: [output dir not writable] $ERR"
nothing_left "$S/root_out" "output dir not writable"

# A file that ends before its size (it shrank after the listing): a sysfs
# file says 4096 bytes and holds a few, every time.  Bound over a file of
# the tree, it must fail naming the file and the cause, not "I/O error".
short=
for f in /sys/kernel/uevent_seqnum /sys/kernel/mm/transparent_hugepage/enabled /sys/power/state; do
	if [[ -r $f && $(stat -c %s "$f") -gt $(wc -c <"$f") ]]; then
		short=$f
		break
	fi
done
[[ -n $short ]] || skip_or_fail "no sysfs file shorter than its size"
mkdir -p "$S/shrunk/t" "$S/shrunk_out"
: >"$S/shrunk/t/f"
mount --bind "$short" "$S/shrunk/t/f" || skip_or_fail "cannot bind-mount $short"
MOUNTS+=("$S/shrunk/t/f")
run "$SQFS_PACK" -q "$S/shrunk/t" "$S/shrunk_out/i.sqfs"
umount_quiet "$S/shrunk/t/f"
expect_rc 1 "file shorter than its size" &&
	expect_msg "t/f: reading: the file shrank while it was read" "file shorter than its size" &&
	log "ok: [file shorter than its size] $ERR"
nothing_left "$S/shrunk_out" "file shorter than its size"

# --- ENOSPC -------------------------------------------------------------------------
section "no space left on device"
mkdir -p "$S/big"
"$PYTHON3" -c 'import random,sys; sys.stdout.buffer.write(random.Random(9).randbytes(5 << 20))' \
	>"$S/big/incompressible"
scratch_fs "$S/tiny" 1M
run "$SQFS_PACK" -q "$S/big" "$S/tiny/i.sqfs"
expect_rc 1 "ENOSPC" && expect_msg "No space left on device" "ENOSPC" && log "ok: [ENOSPC] $ERR"
nothing_left "$S/tiny" "ENOSPC"

printf 'previous image\n' >"$S/tiny/i.sqfs"
before=$(sha "$S/tiny/i.sqfs")
run "$SQFS_PACK" -q "$S/big" "$S/tiny/i.sqfs"
expect_rc 1 "ENOSPC, image exists" && expect_msg "No space left on device" "ENOSPC, image exists"
[[ $(sha "$S/tiny/i.sqfs") == "$before" ]] || fail "[ENOSPC, image exists] the existing image was changed"
nothing_left "$S/tiny" "ENOSPC, image exists" i.sqfs
rm -f "$S/tiny/i.sqfs"

# --tar spools the archive beside the image: that can run out of space too
tar -C "$S/big" -cf "$S/big.tar" .
run "$SQFS_PACK" --tar -q "$S/tiny/i.sqfs" <"$S/big.tar"
expect_rc 1 "ENOSPC, --tar" && expect_msg "No space left on device" "ENOSPC, --tar" &&
	log "ok: [ENOSPC, --tar] $ERR"
nothing_left "$S/tiny" "ENOSPC, --tar"
umount_quiet "$S/tiny"

# ACLs SquashFS cannot store: the first is named, and the count of all, from
# a directory and from a tar archive (exit 0: the modes are kept)
mkdir -p "$S/acl/d" "$S/acl_out"
touch "$S/acl/f1" "$S/acl/f2" "$S/acl/f3"
if setfacl -m u:1000:r "$S/acl/f1" "$S/acl/f2" "$S/acl/f3" && setfacl -d -m u:1000:rx "$S/acl/d"; then
	run "$SQFS_PACK" -q "$S/acl" "$S/acl_out/a.sqfs"
	expect_rc 0 "ACLs from a directory" &&
		expect_msg "acl/f[123]: xattr 'system.posix_acl_access' cannot be stored" "ACLs from a directory" &&
		expect_msg "^sqfs-pack: warning: 4 xattrs that SquashFS cannot store were skipped in all" "ACLs from a directory" &&
		log "ok: [ACLs from a directory] $ERR"
	tar -C "$S" --acls --format=posix -cf "$S/acl.tar" acl
	RC=0
	ERR=$("$SQFS_PACK" -q --tar "$S/acl_out/t.sqfs" <"$S/acl.tar" 2>&1 >/dev/null) || RC=$?
	expect_rc 0 "ACLs from a tar archive" &&
		expect_msg "acl/f[123]: its ACL cannot be stored in SquashFS" "ACLs from a tar archive" &&
		expect_msg "^sqfs-pack: warning: the ACLs of 4 members were skipped in all" "ACLs from a tar archive" &&
		log "ok: [ACLs from a tar archive] $ERR"
else
	skip_or_fail "setfacl cannot set ACLs in the scratch file system"
fi

# A file size limit (ulimit -f) below the image: EFBIG named, not SIGXFSZ
mkdir -p "$S/fsize"
RC=0
ERR=$(ulimit -f 64 && "$SQFS_PACK" -q -c lz4 "$S/big" "$S/fsize/i.sqfs" 2>&1 >/dev/null) || RC=$?
expect_rc 1 "ulimit -f" && expect_msg "fsize/i.sqfs: writing the image: File too large" "ulimit -f" &&
	log "ok: [ulimit -f] $ERR"
# A low soft descriptor limit is raised to the hard one: a tree 200 levels
# deep packs under ulimit -Sn 40.  Below 16 levels the scan keeps a
# directory open a level, deeper it opens them again through "..": 200
# levels pack under ulimit -n 40 too (hard and soft; they failed with
# EMFILE), and a limit too low for 16 levels fails naming EMFILE.
mkdir -p "$S/fdlim"
"$PYTHON3" -c 'import os, sys
p = os.path.join(sys.argv[1], *(["d"] * 200)); os.makedirs(p)
open(os.path.join(p, "f"), "w").write("deep\n")' "$S/fdlim/src"
RC=0
ERR=$(ulimit -Sn 40 && "$SQFS_PACK" -q "$S/fdlim/src" "$S/fdlim/ok.sqfs" 2>&1 >/dev/null) || RC=$?
expect_rc 0 "ulimit -Sn 40" && [[ $(rdsquashfs -c "/$(printf 'd/%.0s' {1..200})f" "$S/fdlim/ok.sqfs") == deep ]] &&
	log "ok: [ulimit -Sn 40] soft limit raised, 200 levels packed" || fail "[ulimit -Sn 40] $ERR"
RC=0
ERR=$(ulimit -n 40 && "$SQFS_PACK" -q "$S/fdlim/src" "$S/fdlim/ok40.sqfs" 2>&1 >/dev/null) || RC=$?
expect_rc 0 "ulimit -n 40" && [[ $(rdsquashfs -c "/$(printf 'd/%.0s' {1..200})f" "$S/fdlim/ok40.sqfs") == deep ]] &&
	log "ok: [ulimit -n 40] 200 levels packed within 40 descriptors" || fail "[ulimit -n 40] $ERR"
RC=0
ERR=$(ulimit -n 12 && "$SQFS_PACK" -q "$S/fdlim/src" "$S/fdlim/no.sqfs" 2>&1 >/dev/null) || RC=$?
expect_rc 1 "ulimit -n 12" && expect_msg "opening directory: Too many open files" "ulimit -n 12" &&
	log "ok: [ulimit -n 12] $ERR"
[[ ! -e $S/fdlim/no.sqfs ]] || fail "[ulimit -n 12] left an image"
# No thread to be had (RLIMIT_NPROC, as uid 65534): the threads named, not
# "allocating".  (LeakSanitizer's exit check needs a thread of its own.)
mkdir -p "$S/nproc" && chmod 0777 "$S/nproc"
RC=0
ERR=$(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" setpriv --reuid 65534 --regid 65534 --clear-groups bash -c \
	'ulimit -u 1 && exec "$1" -q -j 2 "$2" "$3"' _ "$SQFS_PACK" "$S/src" "$S/nproc/i.sqfs" 2>&1 >/dev/null) || RC=$?
expect_rc 1 "ulimit -u 1" &&
	expect_msg "nproc/i.sqfs: starting the compression threads: Resource temporarily unavailable" "ulimit -u 1" &&
	log "ok: [ulimit -u 1] $ERR"
nothing_left "$S/nproc" "ulimit -u 1"
# getopt's complaints name the program, not the path it was run by
RC=0
ERR=$("$SQFS_PACK" --bogus 2>&1 >/dev/null) || RC=$?
expect_rc 2 "--bogus" && [[ $ERR == "sqfs-pack: unrecognized option '--bogus'"* ]] &&
	log "ok: [--bogus] $ERR" || fail "[--bogus] '$ERR'"
nothing_left "$S/fsize" "ulimit -f"

# IMAGE a symbolic link: written through, the link kept; the replaced file
# keeps its mode and owner (mksquashfs rewrites it in place)
mkdir -p "$S/lnk/real"
printf 'old\n' >"$S/lnk/real/r.sqfs"
chmod 0600 "$S/lnk/real/r.sqfs"
chown 1:1 "$S/lnk/real/r.sqfs"
ln -s real/r.sqfs "$S/lnk/img.sqfs"
"$SQFS_PACK" -q "$S/src" "$S/lnk/img.sqfs" || fail "[IMAGE a symlink] sqfs-pack failed"
if [[ -L $S/lnk/img.sqfs ]] && unsquashfs -s "$S/lnk/real/r.sqfs" >/dev/null 2>&1 &&
	[[ $(stat -c '%a %u %g' "$S/lnk/real/r.sqfs") == "600 1 1" ]]; then
	log "ok: [IMAGE a symlink] written through it; mode and owner kept"
else
	fail "[IMAGE a symlink] link: $(ls -l "$S/lnk")/$(stat -c '%a %u %g' "$S/lnk/real/r.sqfs")"
fi
ln -s loop-b "$S/lnk/loop-a"
ln -s loop-a "$S/lnk/loop-b"
RC=0
ERR=$("$SQFS_PACK" -q "$S/src" "$S/lnk/loop-a" 2>&1) || RC=$?
expect_rc 1 "IMAGE a symlink loop" && expect_msg "Too many levels of symbolic links" "IMAGE a symlink loop"
rm -rf "$S/lnk"

# A new image gets 0666 less the umask, as a file made by cp would.
for m in 022:644 077:600 002:664; do
	rm -f -- "$S/out/mode.sqfs"
	(umask "${m%:*}" && "$SQFS_PACK" -q "$S/src" "$S/out/mode.sqfs") || fail "[new image, umask ${m%:*}] pack failed"
	got=$(stat -c %a "$S/out/mode.sqfs" 2>/dev/null || echo none)
	[[ $got == "${m#*:}" ]] && log "ok: [new image, umask ${m%:*}] mode $got" ||
		fail "[new image, umask ${m%:*}] mode $got, expected ${m#*:}"
done
rm -f -- "$S/out/mode.sqfs"

# --json with a path that is not UTF-8: valid JSON, the bytes recoverable
J=$("$SQFS_PACK" -q --json "$S/src" "$S/out/bad"$'\xff\xc3'"name.sqfs" 2>/dev/null) || fail "[--json, not UTF-8] sqfs-pack failed"
"$PYTHON3" -c 'import json, os, sys
raw = sys.stdin.buffer.read()
d = json.loads(raw.decode("utf-8"))
assert os.fsencode(d["image"]).endswith(b"/bad\xff\xc3name.sqfs"), d["image"]' <<<"$J" &&
	log "ok: [--json, not UTF-8] valid UTF-8 JSON, path recoverable" || fail "[--json, not UTF-8] $J"
rm -f "$S/out/bad"*

# Started with stderr (or stdin, stdout) closed: a warning written to fd 2
# must not land in a spool file there, in the image's data.  A pax name
# that is not UTF-8 gives a warning while the archive is read.
mkdir -p "$S/fd2/w"
head -c 100 /dev/zero | tr '\0' B >"$S/fd2/w/b"
head -c 2M /dev/zero | tr '\0' A >"$S/fd2/w/a"
echo second >"$S/fd2/w/"$'\377'
tar -C "$S/fd2/w" --format=pax -cf "$S/fd2/w.tar" b a $'\377'
for closed in "2>&-" "<&- 2>&-" ">&- 2>&-"; do
	for mode in "" --serial; do
		rm -f "$S/out/fd2.sqfs"
		RC=0
		# From a pipe: the data goes to a spool file (a file is read in place).
		eval 'cat "$S/fd2/w.tar" | "$SQFS_PACK" -q $mode --tar "$S/out/fd2.sqfs" '"$closed" || RC=$?
		[[ $closed == "<&- 2>&-" ]] && want=1 || want=0	# no archive on stdin
		if ((RC != want)); then
			fail "[$closed $mode] exit $RC, expected $want"
		elif ((want == 0)) && ! { unsquashfs -cat "$S/out/fd2.sqfs" b | cmp -s - "$S/fd2/w/b" &&
			unsquashfs -cat "$S/out/fd2.sqfs" a | cmp -s - "$S/fd2/w/a"; }; then
			fail "[$closed $mode] the files' data differ: b starts '$(unsquashfs -cat "$S/out/fd2.sqfs" b | head -c 40)'"
		else
			log "ok: [$closed $mode] exit $RC$( ((want)) && echo ': nothing on stdin' || echo ', the data intact')"
		fi
	done
done
nothing_left "$S/out" "closed descriptors" fd2.sqfs
rm -rf -- "$S/fd2" "$S/out/fd2.sqfs"

# The progress bar: off with -q, unless --progress asks for it (either order)
for a in "-q --progress" "--progress -q" "-q" "--no-progress"; do
	# shellcheck disable=SC2086
	E=$("$SQFS_PACK" $a "$S/src" "$S/out/pg.sqfs" 2>&1 >/dev/null) || fail "[progress: $a] failed"
	want=no
	[[ $a == *--progress* && $a != *no-progress* ]] && want=yes
	got=no
	[[ $E == *"100%"* ]] && got=yes
	[[ $got == "$want" ]] || fail "[progress: $a] bar shown: $got, expected $want"
done
rm -f "$S/out/pg.sqfs"
log "ok: [progress] -q hides the bar unless --progress is given"

# The summary names a level only where the settings have one
for c in "lz4|lz4" "lz4:hc|lz4 hc level 12" "lzo,algorithm=lzo1x_1|lzo lzo1x_1" "zstd:3|zstd level 3"; do
	OUT=$("$SQFS_PACK" -c "${c%%|*}" "$S/src" "$S/out/desc.sqfs" 2>/dev/null | sed -n 1p)
	[[ $OUT == *": ${c#*|}, block size "* ]] || fail "[summary, -c ${c%%|*}] '$OUT'"
	J=$("$SQFS_PACK" --json -c "${c%%|*}" "$S/src" "$S/out/desc.sqfs" 2>/dev/null)
	[[ $J == *'"settings": "'"${c#*|}"'"'* ]] || fail "[--json, -c ${c%%|*}] $J"
done
rm -f "$S/out/desc.sqfs"
log "ok: [summary] compressor settings named"

# The summary on a full stdout: the image is there, the failure is told
RC=0
ERR=$("$SQFS_PACK" --json "$S/src" "$S/out/summary.sqfs" 2>&1 >/dev/full) || RC=$?
expect_rc 1 "summary to /dev/full" &&
	expect_msg "summary.sqfs: the image is written, but writing the summary failed: No space left" \
		"summary to /dev/full" && log "ok: [summary to /dev/full] $ERR"
[[ -s $S/out/summary.sqfs ]] || fail "[summary to /dev/full] no image"
rm -f "$S/out/summary.sqfs"
for a in --help --version; do
	RC=0
	ERR=$("$SQFS_PACK" $a 2>&1 >/dev/full) || RC=$?
	expect_rc 1 "$a to /dev/full" && expect_msg "writing to standard output: No space left" "$a to /dev/full" &&
		log "ok: [$a to /dev/full] $ERR"
done
# A reader that has gone away is no error (exit 0, no SIGPIPE death), and
# the image is published all the same.  The reader closes its end at once.
for a in --help --version "--json $S/src $S/out/gone.sqfs"; do
	# shellcheck disable=SC2086
	{
		rc=0
		"$SQFS_PACK" $a 2>"$S/pipe.err" || rc=$?
		echo "$rc" >"$S/pipe.rc"
	} | (exec 0<&-; sleep 0.5)
	RC=$(cat "$S/pipe.rc")
	((RC == 0)) || fail "[$a to a closed pipe] exit status $RC, expected 0: $(cat "$S/pipe.err")"
done
[[ -s $S/out/gone.sqfs ]] && log "ok: [closed pipe] exit 0, image written" ||
	fail "[--json to a closed pipe] no image"
rm -f "$S/out/gone.sqfs"

# --- deep trees: a directory per level, a clear error past 4096 levels ---------------
section "deep trees"
# mkdeep DIR LEVELS [FILE [NAME]]: DIR/NAME/NAME/.../NAME (default a), LEVELS
# directories, FILE at the bottom.
mkdeep() {
	"$PYTHON3" - "$@" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
name = sys.argv[4] if len(sys.argv) > 4 else "a"
for _ in range(int(sys.argv[2])):
    os.mkdir(name, dir_fd=fd)
    nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = nfd
if len(sys.argv) > 3:
    f = os.open(sys.argv[3], os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(f, b"at the bottom\n")
    os.close(f)
PY
}
# 2040 levels and a file (a path within PATH_MAX): a scan that kept a
# symlink buffer on the stack of every level crashed here.
mkdir -p "$S/deep2k" "$S/deep4k" "$S/deep4k1"
mkdeep "$S/deep2k" 2040 f
run "$SQFS_PACK" -q -c lz4 "$S/deep2k" "$S/out/deep2k.sqfs"
if expect_rc 0 "2040 levels"; then
	n=$(unsquashfs -l "$S/out/deep2k.sqfs" | grep -c '^squashfs-root') || true
	if ((n == 2042)); then
		log "ok: [2040 levels] packed, unsquashfs lists $n paths"
	else
		fail "[2040 levels] unsquashfs lists $n paths, want 2042"
	fi
	rm -f -- "$S/out/deep2k.sqfs"
fi
# A file whose path is longer than PATH_MAX (1100 levels of 7 bytes): opened
# a component at a time; an external reader gets its bytes back.
mkdir -p "$S/deeplong"
mkdeep "$S/deeplong" 1100 f level_
run "$SQFS_PACK" -q -c lz4 "$S/deeplong" "$S/out/deeplong.sqfs"
if expect_rc 0 "path longer than PATH_MAX"; then
	got=$(rdsquashfs -c "$(printf '/level_%.0s' $(seq 1100))/f" "$S/out/deeplong.sqfs" 2>&1) || true
	[[ $got == "at the bottom" ]] && log "ok: [path longer than PATH_MAX] packed and read back" ||
		fail "[path longer than PATH_MAX] rdsquashfs read: ${got:0:200}"
	rm -f -- "$S/out/deeplong.sqfs"
fi
rm -rf -- "$S/deeplong"
# Below 16 levels a directory opened again through ".." after its
# subdirectory was scanned must be the one scanned: the subdirectory moved
# meanwhile (strace holds the first such open for 2 s) fails, naming it.
mkdir -p "$S/deepmv"
mkdeep "$S/deepmv" 20 f d
bottom=$S/deepmv$(printf '/d%.0s' $(seq 20))
RC=0
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 strace -f -qq -o /dev/null -P .. \
	-e trace=openat -e inject=openat:delay_enter=2000000:when=1 \
	"$SQFS_PACK" -q "$S/deepmv" "$S/out/deepmv.sqfs" 2>"$S/deepmv.err" &
tracer=$!
for ((i = 0; i < 400; i++)); do
	pid=$(pgrep -P "$tracer" -n) && ls -l "/proc/$pid/fd" 2>/dev/null | grep >/dev/null -- "-> $bottom\$" && break
	sleep 0.01
done
mv -- "$bottom" "$S/deepmv/moved"
wait "$tracer" || RC=$?
ERR=$(grep -v '^strace: ' "$S/deepmv.err" || true)
expect_rc 1 "directory moved during the scan" &&
	expect_msg "deepmv$(printf '/d%.0s' $(seq 20)): the directory moved during the scan" "directory moved during the scan" &&
	log "ok: [directory moved during the scan] $ERR"
nothing_left "$S/out" "directory moved during the scan"
rm -rf -- "$S/deepmv" "$S/deepmv.err"
# 4096 components is the deepest path the writer takes; one more fails.
mkdeep "$S/deep4k" 4096
run "$SQFS_PACK" -q -c lz4 "$S/deep4k" "$S/out/deep4k.sqfs"
expect_rc 0 "4096 levels" && log "ok: [4096 levels] packed"
rm -f -- "$S/out/deep4k.sqfs"
mkdeep "$S/deep4k1" 4097
run "$SQFS_PACK" -q -c lz4 "$S/deep4k1" "$S/out/deep4k1.sqfs"
# The message names the first entry too deep, its path whole (8 KiB here).
want="sqfs-pack: $S/deep4k1$(printf '/a%.0s' $(seq 4097)): nested more than 4096 levels deep: File name too long"
expect_rc 1 "4097 levels" && expect_msg "nested more than 4096 levels deep" "4097 levels" &&
	{ [[ $ERR == "$want" ]] || fail "[4097 levels] not the whole path of the entry: ${ERR:0:80}...${ERR: -120}"; } &&
	log "ok: [4097 levels] ${ERR: -120}"
nothing_left "$S/out" "4097 levels"
rm -rf -- "$S/deep2k" "$S/deep4k" "$S/deep4k1"

# --- times outside 1970..2106 ---------------------------------------------------------
section "times SquashFS cannot hold"
mkdir -p "$S/times"
touch -d 1960-01-01 "$S/times/old"
touch -d 2200-01-01 "$S/times/new"
touch -d @4294967295 "$S/times/last"
touch -d @0 "$S/times/first" "$S/times"
run "$SQFS_PACK" -q -c lz4 "$S/times" "$S/out/times.sqfs"
expect_rc 0 "times" && expect_msg "warning: 2 modification time\\(s\\) outside 1970-01-01\\.\\.2106-02-07 clamped" "times" &&
	log "ok: [times] ${ERR: -120}"
for f in old:0 new:4294967295 last:4294967295 first:0; do
	got=$(rdsquashfs -s "/${f%%:*}" "$S/out/times.sqfs" | sed -n 's/^Last modified:.*(\(.*\))$/\1/p')
	[[ $got == "${f#*:}" ]] || fail "[times] ${f%%:*}: stored $got, expected ${f#*:}"
done
run "$SQFS_PACK" -q -c lz4 --all-time 5 "$S/times" "$S/out/times5.sqfs"
expect_rc 0 "all-time" && [[ $ERR != *clamped* ]] && log "ok: [times] --all-time: no warning" ||
	fail "[times] --all-time: $ERR"
rm -rf -- "$S/times" "$S/out/times.sqfs" "$S/out/times5.sqfs"

# --- signals ------------------------------------------------------------------------
section "signals during packing"
# Slow for xz:9 but compressible: random bytes would be stored raw untried.
"$PYTHON3" -c 'import base64,random,sys; sys.stdout.buffer.write(base64.b64encode(random.Random(10).randbytes(36 << 20)))' \
	>"$S/big/more"
mkdir "$S/sig"
printf 'previous image\n' >"$S/sig/keep.sqfs"
KEEP=$(sha "$S/sig/keep.sqfs")

DEFAULT_SIGNALS='import os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])'

# wait_tmp PID DIR: until PID has its unnamed image file (O_TMPFILE) open in
# DIR, which /proc shows as DIR/#INODE (deleted); 1 if it never does.
wait_tmp() {
	local pid=$1 dir=$2 i tmp=()
	for ((i = 0; i < 400; i++)); do
		mapfile -t tmp < <(find "/proc/$pid/fd" -lname "$dir/#*" 2>/dev/null || true)
		((${#tmp[@]} == 0)) || return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.025
	done
	return 1
}

# interrupt SIGNAL TARGET_NAME: start a slow pack, send SIGNAL once the temp
# file exists, and report how it ended in RC.
interrupt() {
	local sig=$1 target=$S/sig/$2 pid
	# A background job of a script starts with SIGINT ignored: reset it to the
	# default before exec, as an interactive user's sqfs-pack would have it.
	"$PYTHON3" -c "$DEFAULT_SIGNALS" "$SQFS_PACK" -q -c xz:9 --serial "$S/big" "$target" \
		2>"$S/sig.err" &
	pid=$!
	wait_tmp "$pid" "$S/sig" || fail "[$sig] sqfs-pack never had an unnamed file open beside the target"
	sleep 0.3
	kill -s "$sig" "$pid" 2>/dev/null || fail "[$sig] sqfs-pack had already finished"
	RC=0
	{ wait "$pid"; } 2>/dev/null || RC=$?	# (no "Killed" job notice)
}
for sig in INT TERM HUP; do
	interrupt "$sig" new.sqfs
	want=$((128 + $(kill -l "$sig")))
	((RC == want)) || fail "[SIG$sig] exit status $RC, expected $want (death by the signal)"
	[[ ! -e $S/sig/new.sqfs ]] || fail "[SIG$sig] a partial image was left at the target"
	interrupt "$sig" keep.sqfs
	[[ $(sha "$S/sig/keep.sqfs") == "$KEEP" ]] || fail "[SIG$sig] the existing image was changed"
	nothing_left "$S/sig" "SIG$sig" keep.sqfs && log "ok: [SIG$sig] no partial image, no temp file"
done
# A background job of a script starts with SIGINT ignored, and a signal
# ignored at the start stays ignored: the pack goes on to its image.
mkdir "$S/ign" "$S/ign_src"
head -c 6M "$S/big/more" >"$S/ign_src/f"
"$SQFS_PACK" -q -c xz:9 --serial "$S/ign_src" "$S/ign/i.sqfs" 2>"$S/ign.err" &
pid=$!
if wait_tmp "$pid" "$S/ign"; then
	kill -s INT "$pid" 2>/dev/null || fail "[ignored SIGINT] sqfs-pack had already finished"
else
	fail "[ignored SIGINT] sqfs-pack never had an unnamed file open beside the target"
fi
RC=0
wait "$pid" || RC=$?
((RC == 0)) || fail "[ignored SIGINT] exit status $RC, expected 0: $(cat "$S/ign.err")"
[[ -f $S/ign/i.sqfs ]] && unsquashfs -n -d "$S/ign_x" "$S/ign/i.sqfs" >/dev/null 2>&1 &&
	cmp -s "$S/ign_src/f" "$S/ign_x/f" && log "ok: [ignored SIGINT] the image was finished" ||
	fail "[ignored SIGINT] no complete image"

interrupt KILL new.sqfs
[[ ! -e $S/sig/new.sqfs ]] || fail "[SIGKILL] a partial image was left at the target"
interrupt KILL keep.sqfs
[[ $(sha "$S/sig/keep.sqfs") == "$KEEP" ]] || fail "[SIGKILL] the existing image was changed"
# The unnamed file dies with the process: nothing is left.
nothing_left "$S/sig" "SIGKILL" keep.sqfs && log "ok: [SIGKILL] target unchanged, no temp file"

finish
