#!/bin/bash
# test_exclude.sh SQFS_PACK
#
# sqfs-pack --exclude, --exclude-from and --one-file-system:
#   - patterns (a name at any depth, an anchored path, '*' not crossing '/',
#     a trailing '/' for directories only, "./" and "/" in front) leave out
#     what they match and everything below an excluded directory: the image
#     is byte-identical to sqfs-pack of a copy with those entries removed,
#     from the directory and from a tar of it (--tar takes the same patterns);
#   - --exclude-from reads one pattern a line, skipping comments and blanks;
#   - a tar hard link to an excluded member fails, naming both;
#   - bad uses are usage errors (exit 2) naming the option;
#   - --one-file-system keeps a mount point below SRC_DIR as an empty
#     directory; without it the mounted tree is packed.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "$1"
need_root
need_cmd tar unsquashfs mount umount
T=1600000000
PACK_OPTS=(-q -c gzip:1 --mkfs-time $T --all-time $T)

listing() { unsquashfs -l "$1" | sed -n 's|^squashfs-root||p' | sort; }

S=$WORK/src
mkdir -p "$S/a/cache" "$S/b/.git/objects" "$S/proc/1" "$S/var/cache/apt" "$S/var/lib/x.o" \
	"$S/deep/a/b/c"
printf 'object\n' >"$S/a/x.o"
printf 'source\n' >"$S/a/x.c"
printf 'cached\n' >"$S/a/cache/f"
printf 'git\n' >"$S/b/.git/objects/o"
printf 'stat\n' >"$S/proc/1/stat"
printf 'bin\n' >"$S/var/cache/apt/pkgcache.bin"
printf 'keep\n' >"$S/var/cache/apt/keep"
printf 'in a dir named x.o\n' >"$S/var/lib/x.o/f"
printf 'deep\n' >"$S/deep/a/b/c/f.o"
printf 'top\n' >"$S/x.o"
ln -s a/x.o "$S/link-to-obj"
ln "$S/a/x.c" "$S/var/hl"

# expect DESCRIPTION PATHS_TO_REMOVE... -- SQFS_PACK_ARGS...: sqfs-pack with
# the arguments equals sqfs-pack of a copy without the paths, and so does
# --tar with the same arguments fed a tar of the source.
expect() {
	local what=$1 ref=$WORK/ref
	shift
	rm -rf "$ref"
	cp -a "$S" "$ref"
	while [[ $1 != -- ]]; do
		rm -rf "${ref:?}/$1"
		shift
	done
	shift
	"$SQFS_PACK" "${PACK_OPTS[@]}" "$ref" "$WORK/want.sqfs"
	if ! "$SQFS_PACK" "${PACK_OPTS[@]}" "$@" "$S" "$WORK/got.sqfs" 2>"$WORK/err"; then
		fail "$what: sqfs-pack failed: $(cat "$WORK/err")"
		return
	fi
	if [[ $(sha "$WORK/got.sqfs") == "$(sha "$WORK/want.sqfs")" ]]; then
		log "ok: $what"
	else
		fail "$what: image differs from the copy without the entries: $(diff <(listing "$WORK/want.sqfs") <(listing "$WORK/got.sqfs") | tr '\n' ' ' || true)"
	fi
	if ! "$SQFS_PACK" "${PACK_OPTS[@]}" --tar "$@" "$WORK/gotar.sqfs" <"$WORK/src.tar" 2>"$WORK/err"; then
		fail "$what (--tar): sqfs-pack failed: $(cat "$WORK/err")"
		return
	fi
	if [[ $(listing "$WORK/gotar.sqfs") == "$(listing "$WORK/want.sqfs")" ]]; then
		log "ok: $what (--tar: the same entries)"
	else
		fail "$what (--tar): $(diff <(listing "$WORK/want.sqfs") <(listing "$WORK/gotar.sqfs") | tr '\n' ' ' || true)"
	fi
	# The same members named with "//" and "/./" in them (tar keeps names
	# as given): the patterns see them as the tree does.
	if ! "$SQFS_PACK" "${PACK_OPTS[@]}" --tar "$@" "$WORK/gotodd.sqfs" <"$WORK/odd.tar" 2>"$WORK/err"; then
		fail "$what (--tar, odd names): sqfs-pack failed: $(cat "$WORK/err")"
	elif [[ $(listing "$WORK/gotodd.sqfs") == "$(listing "$WORK/want.sqfs")" ]]; then
		log "ok: $what (--tar, names with // and /./: the same entries)"
	else
		fail "$what (--tar, odd names): $(diff <(listing "$WORK/want.sqfs") <(listing "$WORK/gotodd.sqfs") | tr '\n' ' ' || true)"
	fi
}

# Members in an order where the hard link's target comes first: var/hl, then
# a/x.c linking to it.
tar -C "$S" --sort=name --numeric-owner -cf "$WORK/src.tar" ./var ./a ./b ./proc ./deep ./x.o ./link-to-obj
# odd.tar: its members renamed ./a/b/c -> ./a/.//b/c (hard link targets too)
"$PYTHON3" - "$WORK/src.tar" "$WORK/odd.tar" <<'EOF'
import sys, tarfile
def odd(n):
    parts = n.split("/")
    if len(parts) > 2:
        parts.insert(2, ".")
        return "/".join(parts[:3]) + "//" + "/".join(parts[3:])
    return n
with tarfile.open(sys.argv[1]) as i, tarfile.open(sys.argv[2], "w", format=tarfile.PAX_FORMAT) as o:
    for m in i.getmembers():
        data = i.extractfile(m) if m.isreg() else None
        m.name = odd(m.name)
        if m.islnk():
            m.linkname = odd(m.linkname)
        o.addfile(m, data)
EOF

section "patterns"
expect "a name at any depth" a/x.o var/lib/x.o deep/a/b/c/f.o x.o -- -e '*.o'
expect "a name without wildcards" b/.git -- --exclude .git
expect "an anchored path, its subtree along" proc -- -e /proc
expect "./ in front means anchored" proc -- -e ./proc
expect "'*' does not cross '/'" var/cache/apt/pkgcache.bin -- -e 'var/cache/apt/*.bin'
expect "'*' in an anchored path stays in its level" a/x.o -- -e '*/x.o'
expect "a trailing '/' matches directories only" var/lib/x.o -- -e 'x.o/'
expect "several patterns" a/cache var/cache b/.git -- -e 'cache/' --exclude=.git
expect "a symlink is an entry like any" link-to-obj -- -e 'link-*'
expect "nothing matches" -- -e 'no-such-name' -e '/a/x.c/deeper'
printf '# build products\n\n*.o\n/proc\n' >"$WORK/excludes"
expect "--exclude-from" a/x.o var/lib/x.o deep/a/b/c/f.o x.o proc -- --exclude-from "$WORK/excludes"

section "tar hard links"
if "$SQFS_PACK" -q --tar -e hl "$WORK/hl.sqfs" <"$WORK/src.tar" 2>"$WORK/err"; then
	fail "a hard link to an excluded member was packed"
elif grep -q "a/x.c: hard link to an excluded member" "$WORK/err"; then
	log "ok: a hard link to an excluded member: $(cat "$WORK/err")"
else
	fail "hard link to an excluded member: $(cat "$WORK/err")"
fi
[[ ! -e $WORK/hl.sqfs ]] || fail "an image was left after the hard link error"
# Excluding the link instead is fine, and the directory input never minds.
expect "excluding the link, not its target" a/x.c -- -e a/x.c

section "usage errors"
usage_error() { # LABEL PATTERN ARGS...
	local label=$1 pat=$2 rc=0
	shift 2
	"$SQFS_PACK" "$@" 2>"$WORK/err" || rc=$?
	if [[ $rc -eq 2 ]] && grep -q -- "$pat" "$WORK/err"; then
		log "ok: $label: $(head -n1 "$WORK/err")"
	else
		fail "$label: exit $rc, $(cat "$WORK/err")"
	fi
}
usage_error "empty pattern" "--exclude ''" -e '' "$S" "$WORK/u.sqfs"
usage_error "pattern of only '/'" "--exclude '/'" -e / "$S" "$WORK/u.sqfs"
usage_error "missing --exclude-from file" "no-such-file" --exclude-from "$WORK/no-such-file" "$S" "$WORK/u.sqfs"
usage_error "--exclude-from a directory" "--exclude-from $S: Is a directory" --exclude-from "$S" "$S" "$WORK/u.sqfs"
usage_error "--pseudo-file a directory" "--pseudo-file $S: Is a directory" --pseudo-file "$S" "$S" "$WORK/u.sqfs"
printf 'ok\n//\n' >"$WORK/bad-excludes"
usage_error "--exclude-from with a bad line" "line 2" --exclude-from "$WORK/bad-excludes" "$S" "$WORK/u.sqfs"
usage_error "--one-file-system with --tar" "one-file-system" --tar -x "$WORK/u.sqfs"
[[ ! -e $WORK/u.sqfs ]] || fail "an image was written after a usage error"

section "--one-file-system"
mkdir -p "$S/mnt"
mount -t tmpfs -o mode=0750 tmpfs "$S/mnt" || skip_or_fail "cannot mount a tmpfs"
MOUNTS+=("$S/mnt")
printf 'on another file system\n' >"$S/mnt/inner"
mkdir "$S/mnt/sub"
"$SQFS_PACK" "${PACK_OPTS[@]}" -x "$S" "$WORK/x.sqfs"
"$SQFS_PACK" "${PACK_OPTS[@]}" "$S" "$WORK/nox.sqfs"
mnt_entries=$(listing "$WORK/x.sqfs" | grep -c '^/mnt' || true)
if [[ $mnt_entries -eq 1 ]] && unsquashfs -ll "$WORK/x.sqfs" /mnt | grep >/dev/null '^drwxr-x---'; then
	log "ok: -x keeps the mount point, empty, with the mounted root's mode"
else
	fail "-x: $(listing "$WORK/x.sqfs" | grep '^/mnt' | tr '\n' ' ')"
fi
if listing "$WORK/nox.sqfs" | grep >/dev/null -x /mnt/inner && listing "$WORK/nox.sqfs" | grep >/dev/null -x /mnt/sub; then
	log "ok: without -x the mounted tree is packed"
else
	fail "without -x: $(listing "$WORK/nox.sqfs" | grep '^/mnt' | tr '\n' ' ')"
fi
umount "$S/mnt"
unset 'MOUNTS[${#MOUNTS[@]}-1]'

finish
