# shellcheck shell=bash
# lib.sh: helpers shared by the image tests.  Source it after `set -euo pipefail`.
#
# Exit codes of a test: 0 pass, 1 fail, 77 skip.  A missing capability (not
# root, no loop device, no reader binary, no /dev/fuse, ...) is a skip, except
# when CI=true: there it is a failure, so CI can never pass by skipping.

export LC_ALL=C
# Debian's interpreter when there is one: a version-manager shim costs ~0.1 s
# a call, and one interpreter keeps the generated data the same everywhere.
PYTHON3=/usr/bin/python3
[[ -x $PYTHON3 ]] || PYTHON3=$(command -v python3 || echo python3)
export PYTHON3
TESTS_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
export TESTS_DIR

SQFS_PACK=
WORK=
MAIN_PID=
MOUNTS=()
FAILURES=0

log() { printf '%s\n' "$*" >&2; }
# section TITLE: a progress line with the seconds since the test started.
section() { printf '== [%3ds] %s\n' "$SECONDS" "$*" >&2; }

# skip_or_fail MESSAGE: a capability is missing.
skip_or_fail() {
	if [[ ${CI-} == true ]]; then
		log "FAIL: $* (missing capability is a failure when CI=true)"
		exit 1
	fi
	log "SKIP: $*"
	exit 77
}

need_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || skip_or_fail "command '$c' not found"
	done
}

need_root() {
	[[ $(id -u) -eq 0 ]] || skip_or_fail "needs root"
}

# The kernel squashfs driver and a free loop device.
need_loop() {
	need_root
	need_cmd losetup mount umount
	if ! grep -qw squashfs /proc/filesystems; then
		modprobe squashfs >/dev/null 2>&1 || true
		grep -qw squashfs /proc/filesystems ||
			skip_or_fail "the kernel has no squashfs driver"
	fi
	losetup -f >/dev/null 2>&1 || skip_or_fail "no free loop device"
}

need_fuse() {
	need_root
	need_cmd squashfuse
	[[ -c /dev/fuse ]] || skip_or_fail "/dev/fuse is missing"
}

# start_test SQFS_PACK: check the binary, make $WORK, arm the cleanup trap.
start_test() {
	if [[ $# -lt 1 || -z $1 ]]; then
		log "usage: $0 PATH/TO/sqfs-pack"
		exit 1
	fi
	SQFS_PACK=$(realpath -- "$1")
	if [[ ! -x $SQFS_PACK ]]; then
		log "FAIL: '$1' is not an executable"
		exit 1
	fi
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/sqfs-image-test.XXXXXX")
	MAIN_PID=$BASHPID
	# An unexpected failure (set -e) is a test failure (1), never a skip (77)
	# or a usage error (2), and says where it happened.
	set -E
	trap 'log "FAIL: unexpected error at ${BASH_SOURCE[0]##*/}:$LINENO: $BASH_COMMAND"; exit 1' ERR
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
}

cleanup() {
	local rc=$? i m
	trap - ERR
	set +eE
	# A subshell that dies (e.g. of set -u) may run this trap too: only the
	# test's own shell cleans up.
	[[ $BASHPID == "${MAIN_PID-}" ]] || return 0
	for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
		umount_quiet "${MOUNTS[i]}"
	done
	if [[ -n $WORK && -d $WORK ]]; then
		# Anything still mounted below $WORK (innermost first).
		while read -r m; do
			umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
		done < <(findmnt -rn -o TARGET 2>/dev/null |
			awk -v w="$WORK" '$0 == w || index($0, w "/") == 1' | sort -r)
		chmod -R u+rwx -- "$WORK" 2>/dev/null
		rm -rf -- "$WORK"
	fi
	exit "$rc"
}

# scratch_fs DIR [SIZE]: a tmpfs at DIR (sparse files, big xattrs, holes).
scratch_fs() {
	mkdir -p -- "$1"
	mount -t tmpfs -o "size=${2:-4G},mode=0755" tmpfs "$1" ||
		skip_or_fail "cannot mount a tmpfs"
	MOUNTS+=("$1")
}

# mount_image IMG DIR: kernel loop mount, read-only.
mount_image() {
	mkdir -p -- "$2"
	if ! mount -t squashfs -o loop,ro -- "$1" "$2"; then
		log "FAIL: the kernel cannot mount $1"
		return 1
	fi
	MOUNTS+=("$2")
	root_dots "$2" || fail "$1: readdir of the root shows no '.' and '..' (the root's parent inode 0?)"
}

# root_dots DIR: readdir of DIR gives "." and "..".  The kernel gives the
# root's parent_inode as the d_ino of "..", and glibc's readdir skips an entry
# whose d_ino is 0.  (Not for squashfuse: it lists neither.)
root_dots() {
	[[ $(LC_ALL=C ls -a -- "$1" | first 2 | tr '\n' ' ') == ". .. " ]]
}

# fuse_image IMG DIR: squashfuse mount.
fuse_image() {
	mkdir -p -- "$2"
	if ! squashfuse "$1" "$2"; then
		log "FAIL: squashfuse cannot mount $1"
		return 1
	fi
	MOUNTS+=("$2")
}

umount_quiet() {
	local d=$1 i keep=()
	if mountpoint -q -- "$d" 2>/dev/null; then
		umount -- "$d" 2>/dev/null || fusermount -u -- "$d" 2>/dev/null ||
			umount -l -- "$d" 2>/dev/null || true
	fi
	for i in "${MOUNTS[@]}"; do
		[[ $i == "$d" ]] || keep+=("$i")
	done
	MOUNTS=("${keep[@]}")
}

# first N: the first N lines of stdin.  Unlike head, it reads everything, so
# the writer never dies of SIGPIPE (which pipefail + set -e would turn fatal).
first() { awk -v n="$1" 'NR <= n'; }

# fail MESSAGE: record a failure, keep going.
fail() {
	log "FAIL: $*"
	FAILURES=$((FAILURES + 1))
}

finish() {
	if ((FAILURES)); then
		log "$FAILURES check(s) failed"
		exit 1
	fi
	log "PASS"
	exit 0
}

# NUL-separated records on stdin -> one line each, newlines in names shown as \n.
_records() {
	sed -z 's/\\/\\\\/g; s/\n/\\n/g' | tr '\0' '\n' | sort
}

# Knobs for compare_tree (environment):
#   CMP_IGNORE   space-separated fields left out: uid gid mtime mode
#   CMP_SKIP_TYPES  find -type letters whose entries are left out (e.g. "s")
#   CMP_NO_XATTRS=1  do not compare xattrs
#   CMP_FULL=1   read sparse files completely instead of data + sampled holes

# tree_listing DIR: sorted metadata of every entry (root included).
tree_listing() {
	local dir=$1 dfmt ffmt t f
	local -a skip=() sedargs=(-e 's/(mtime=[0-9]+)\.[0-9]+/\1/' -e 's/ link=$//')
	dfmt='%P\ttype=%y mode=%m uid=%U gid=%G mtime=%T@\0'
	ffmt='%P\ttype=%y mode=%m uid=%U gid=%G mtime=%T@ size=%s nlink=%n link=%l\0'
	for t in ${CMP_SKIP_TYPES-}; do
		skip+=(! -type "$t")
	done
	for f in ${CMP_IGNORE-}; do
		sedargs+=(-e "s/ $f=[^ ]*//")
	done
	find "$dir" "${skip[@]}" \( \( -type d -printf "$dfmt" \) -o -printf "$ffmt" \) |
		_records | sed -E "${sedargs[@]}"
}

# device_listing DIR: major:minor of every block and character device.
device_listing() {
	(cd -- "$1" && find . \( -type b -o -type c \) -print0 |
		xargs -0 -r stat --printf '%n\t%F rdev=%Hr:%Lr\0') | _records
}

# xattr_listing DIR: "path<TAB>key=hexvalue" for user./trusted./security.
xattr_listing() {
	(cd -- "$1" && getfattr -R -P -h -d -e hex --absolute-names \
		-m '^(user|trusted|security)\.' .) |
		awk '/^# file: /{ f = substr($0, 9); next } /^$/{ next } { print f "\t" $0 }' |
		sort
}

# cmp_sparse SRC DST: data extents of SRC in full, holes sampled.
cmp_sparse() {
	"$PYTHON3" - "$1" "$2" <<'PY'
import os, sys
src, dst = sys.argv[1], sys.argv[2]
a, b = os.open(src, os.O_RDONLY), os.open(dst, os.O_RDONLY)
size = os.fstat(a).st_size
if os.fstat(b).st_size != size:
    print("%s: size %d, expected %d" % (dst, os.fstat(b).st_size, size)); sys.exit(1)
CH = 1 << 20
def check(off, n, zero):
    while n > 0:
        k = min(n, CH)
        x = os.pread(b, k, off)
        y = bytes(k) if zero else os.pread(a, k, off)
        if x != y:
            i = next((j for j in range(min(len(x), len(y))) if x[j] != y[j]), min(len(x), len(y)))
            print("%s differs from %s at byte %d%s" % (dst, src, off + i + 1,
                  " (a hole in the source)" if zero else "")); sys.exit(1)
        off += k; n -= k
pos = 0
while pos < size:
    try:
        d = os.lseek(a, pos, os.SEEK_DATA)
    except OSError:
        d = size
    if d > pos:   # hole [pos, d): first, last and 30 spread 4 KiB windows
        n = d - pos
        samples = {pos, max(pos, d - 4096)} | {pos + (n * i // 31) // 4096 * 4096 for i in range(1, 31)}
        for s in sorted(samples):
            check(s, min(4096, d - s), True)
    if d >= size:
        break
    h = os.lseek(a, d, os.SEEK_HOLE)
    check(d, h - d, False)
    pos = h
PY
}

# _hashes DIR PATH...: sha256sum's lines for the paths below DIR (errors too).
_hashes() {
	local dir=$1
	shift
	(cd -- "$dir" && printf '%s\0' "$@" | xargs -0 sha256sum -- 2>&1) || true
}

# freeze DIR: DIR will not change again, so compare_tree computes its
# listings and hashes once (a test judging a dozen images of one tree spent a
# fifth of its time listing the same source again).
declare -A FROZEN=()
freeze() { FROZEN[$1]=1; }

# _memo DIR FUNC ARGS...: FUNC DIR ARGS..., from a cache file when DIR is
# frozen (keyed by the call and the CMP_* knobs).
_memo() {
	local dir=$1 fn=$2 key f
	shift 2
	if [[ -z ${FROZEN[$dir]-} ]]; then
		"$fn" "$dir" "$@"
		return
	fi
	key=$(printf '%s\0' "$fn" "$dir" "${CMP_IGNORE-}" "${CMP_SKIP_TYPES-}" "$@" | md5sum)
	f=$WORK/.memo/${key%% *}
	if [[ ! -f $f ]]; then
		mkdir -p -- "$WORK/.memo"
		"$fn" "$dir" "$@" >"$f.$BASHPID"
		mv -- "$f.$BASHPID" "$f"
	fi
	cat -- "$f"
}

# compare_tree SRC DST: 0 if DST (a mounted or extracted image) matches SRC.
compare_tree() {
	local src=$1 dst=$2 ok=0 p out s b sb
	local -a lines
	if ! out=$(diff -u --label "source $src" --label "image $dst" \
		<(_memo "$src" tree_listing) <(tree_listing "$dst")); then
		mapfile -t lines <<<"$out"
		log "metadata differs (${#lines[@]} diff lines, first 60):"
		printf '%s\n' "${lines[@]:0:60}" >&2
		ok=1
	fi
	if ! out=$(diff -u --label "source $src" --label "image $dst" \
		<(_memo "$src" device_listing) <(device_listing "$dst")); then
		log "device numbers differ:"
		printf '%s\n' "$out" | first 40 >&2
		ok=1
	fi
	if [[ ${CMP_NO_XATTRS-} != 1 ]]; then
		if ! out=$(diff -u --label "source $src" --label "image $dst" \
			<(_memo "$src" xattr_listing) <(xattr_listing "$dst")); then
			log "xattrs differ (first 40 lines, values in hex):"
			printf '%s\n' "$out" | cut -c1-200 | first 40 >&2
			ok=1
		fi
	fi
	# Contents: every non-empty regular file present as a regular file in both.
	# Small ones are hashed by one sha256sum per tree (a cmp per file was most
	# of the time of the image tests); large ones are compared by cmp, and
	# large sparse ones data extent by extent (cmp_sparse).
	local -a plain=()
	while IFS= read -r -d '' sb && IFS= read -r -d '' p; do
		[[ -f $dst/$p && ! -L $dst/$p ]] || continue
		read -r s b <<<"$sb"
		if ((s <= 64 * 1048576)); then
			plain+=("$p")
			continue
		fi
		if [[ ${CMP_FULL-} != 1 ]] && ((b * 512 < s)); then
			out=$(cmp_sparse "$src/$p" "$dst/$p" 2>&1)
		else
			out=$(cmp -- "$src/$p" "$dst/$p" 2>&1)
		fi || {
			log "content: $out"
			ok=1
		}
	done < <(find "$src" -type f -size +0 -printf '%s %b\0%P\0')
	if ((${#plain[@]})) && ! out=$(diff <(_memo "$src" _hashes "${plain[@]}") <(_hashes "$dst" "${plain[@]}")); then
		ok=1
		printf '%s\n' "$out" | sed -n 's/^> [0-9a-f]*  \(.*\)$/content: \1 differs/p; /^> [^0-9a-f]/p' |
			first 20 >&2
	fi
	return $ok
}

# sha IMG: the sha256 of a file.
# A file that is not there gives a string of its own: two missing images
# must not compare equal.
sha() {
	if [[ -f $1 ]]; then
		sha256sum -- "$1" | cut -d' ' -f1
	else
		echo "no-file:$1"
	fi
}

# pack [ARGS...]: run sqfs-pack quietly; prints its stderr on failure.
pack() {
	local err rc=0
	err=$("$SQFS_PACK" -q "$@" 2>&1 >/dev/null) || rc=$?
	if ((rc)); then
		log "sqfs-pack $* exited $rc: $err"
		return "$rc"
	fi
}

# source_tree DIR [mktree options]: a tmpfs at DIR holding the mktree tree,
# whose path is left in $SRC.
source_tree() {
	scratch_fs "$1"
	SRC=$1/t
	"$TESTS_DIR/mktree.sh" "${@:2}" "$SRC" >&2 || {
		log "FAIL: mktree.sh could not build the tree"
		exit 1
	}
}
