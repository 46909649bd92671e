#!/usr/bin/env bash
# corpus.sh debian|generated|PATH: build (once) and print the directory of a
# benchmark corpus.  Cached under $BENCH_CACHE (default
# /var/cache/sqfs-stage-bench); delete a corpus directory to rebuild it.
#
# Every corpus directory holds:
#   tree/           the file tree (owned by the caller, or as unpacked)
#   corpus.tar      tar of tree/ (--sort=name --numeric-owner --xattrs):
#                   the input of sqfs-pack --tar and tar2sqfs
#   rootfs.tar.xz   corpus.tar compressed with xz -6 (the pipeline producer
#                   `xz -dc rootfs.tar.xz | tar x`)
#   info.txt        what it is: files, bytes, how it was made, a listing hash
#
# debian     BENCH_SIZE=full (default): debootstrap --variant=minbase bookworm
#            (taken from tests/fuse/test_rootfs.sh's cache
#            /var/cache/sqfs-stage-tests/rootfs/bookworm-minbase.tar when it
#            exists, else debootstrap from the network) plus, under host/,
#            a copy of this machine's /usr/share and as much of /usr/lib (in
#            sorted path order) as fills the tree to BENCH_DEBIAN_MB (1024)
#            MiB.  BENCH_SIZE=small: the minbase tree alone.  The result
#            depends on the machine: info.txt records it.
# generated  gencorpus.py DIR $BENCH_SIZE $BENCH_SEED (small|full, seed 4):
#            deterministic, no network.  See tools/README.
# PATH       your own corpus: a directory (copied with cp -a, so owners,
#            modes, times, hard links and xattrs come along) or a tar archive
#            (plain or compressed, unpacked with tar -xp --xattrs).  Cached as
#            path-NAME-HASH (HASH of the real path) and built again when the
#            source changed: for a directory its listing (names, sizes,
#            modes, owners, mtimes, link targets), for an archive its size and
#            mtime.  BENCH_SIZE does not apply.
set -Eeuo pipefail
export LC_ALL=C
trap 'echo "corpus: ERROR: line $LINENO: \"$BASH_COMMAND\" failed" >&2' ERR
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
CACHE=${BENCH_CACHE:-/var/cache/sqfs-stage-bench}
SIZE=${BENCH_SIZE:-full}
SEED=${BENCH_SEED:-4}
TEST_ROOTFS=${SQFS_ROOTFS_CACHE:-/var/cache/sqfs-stage-tests/rootfs}/bookworm-minbase.tar
MIRROR=${BENCH_MIRROR:-http://deb.debian.org/debian}
TAROPTS=(--numeric-owner --xattrs --xattrs-include='*')
log() { printf 'corpus: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ $# -eq 1 ]] || { echo "usage: $0 debian|generated|PATH  (env: BENCH_CACHE BENCH_SIZE=small|full BENCH_SEED BENCH_DEBIAN_MB)" >&2; exit 2; }
KIND=$1
case $SIZE in small|full) ;; *) die "BENCH_SIZE must be small or full, not '$SIZE'";; esac
SRC= SOURCE_ID=
case $KIND in
	debian) NAME=debian-$SIZE ;;
	generated) NAME=generated-$SIZE-s$SEED ;;
	*)
		[[ -d $KIND || -f $KIND ]] ||
			die "unknown corpus '$KIND': debian, generated, or the path of a directory or a tar archive"
		SRC=$(realpath -- "$KIND")
		base=$(basename -- "$SRC" | tr -c 'A-Za-z0-9._\n-' '_')
		NAME=path-$base-$(printf '%s' "$SRC" | sha256sum | cut -c1-12)
		# What the cached copy was made from: rebuilt when this changes.
		if [[ -d $SRC ]]; then
			SOURCE_ID="directory $SRC, listing $(cd "$SRC" && find . -printf '%p %s %m %U %G %T@ %l\n' | sort | sha256sum | cut -c1-16)"
		else
			SOURCE_ID="archive $SRC, $(stat -c '%s bytes, mtime %Y' "$SRC")"
		fi
		KIND=path
		;;
esac
DIR=$CACHE/$NAME
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock-$NAME"
flock 9
if [[ -s $DIR/info.txt && -d $DIR/tree && -s $DIR/corpus.tar && -s $DIR/rootfs.tar.xz ]]; then
	if [[ -z $SOURCE_ID || $(cat "$DIR/source.txt" 2>/dev/null) == "$SOURCE_ID" ]]; then
		log "reusing $DIR"
		echo "$DIR"
		exit 0
	fi
	log "$SRC changed since $DIR was made: building it again"
fi
rm -rf "$DIR"
mkdir -p "$DIR"
how=
case $KIND in
path)
	mkdir "$DIR/tree"
	if [[ -d $SRC ]]; then
		log "copying $SRC"
		cp -a "$SRC/." "$DIR/tree/"
		how="copy (cp -a) of the directory $SRC of $(hostname) $(date -u +%F)"
	else
		log "unpacking $SRC"
		tar "${TAROPTS[@]}" -C "$DIR/tree" -xpf "$SRC"
		how="tar -xp of the archive $SRC of $(hostname) $(date -u +%F)"
	fi
	printf '%s\n' "$SOURCE_ID" >"$DIR/source.txt"
	;;
generated)
	log "generating $SIZE corpus (seed $SEED) into $DIR/tree"
	python3 "$HERE/gencorpus.py" "$DIR/tree" "$SIZE" "$SEED" >&2
	mv "$DIR/$SIZE.manifest" "$DIR/manifest.txt"
	how="tools/bench/gencorpus.py tree $SIZE $SEED: $(cat "$DIR/manifest.txt")"
	;;
debian)
	mkdir -p "$DIR/tree"
	if [[ -s $TEST_ROOTFS ]]; then
		log "minbase tree from $TEST_ROOTFS"
		tar "${TAROPTS[@]}" -C "$DIR/tree" -xpf "$TEST_ROOTFS"
		how="debootstrap --variant=minbase bookworm (tar from $TEST_ROOTFS, $(date -u -r "$TEST_ROOTFS" +%F))"
	else
		command -v debootstrap >/dev/null || die "debootstrap not installed (tools/deps.sh)"
		log "debootstrap --variant=minbase bookworm (network: $MIRROR)"
		debootstrap --variant=minbase bookworm "$DIR/tree" "$MIRROR" >"$DIR/debootstrap.log" 2>&1 \
			|| { tail -n 20 "$DIR/debootstrap.log" >&2; die "debootstrap failed"; }
		how="debootstrap --variant=minbase bookworm $MIRROR ($(date -u +%F))"
	fi
	if [[ $SIZE == full ]]; then
		budget=$(( ${BENCH_DEBIAN_MB:-1024} * 1024 * 1024 ))
		mkdir -p "$DIR/tree/host/usr"
		log "copying /usr/share"
		cp -a /usr/share "$DIR/tree/host/usr/"
		used=$(du -sb "$DIR/tree" | cut -f1)
		log "adding /usr/lib in sorted order up to $(( budget >> 20 )) MiB (now $(( used >> 20 )) MiB)"
		# Whole entries (files, links) in path order, skipping any that no
		# longer fits, until the budget is spent.
		find /usr/lib -xdev \( -type f -o -type l \) -printf '%s %p\n' | sort -k2 |
			awk -v left=$((budget - used)) '$1 <= left { left -= $1; sub(/^[0-9]+ \//, ""); print }' \
			>"$DIR/usrlib.list"
		tar -C / --no-recursion -T "$DIR/usrlib.list" -cf - 2>/dev/null | tar -C "$DIR/tree/host" -xpf -
		how="$how + host /usr/share + $(wc -l <"$DIR/usrlib.list") entries of /usr/lib (sorted, budget ${BENCH_DEBIAN_MB:-1024} MiB) of $(hostname) $(date -u +%F)"
	fi
	;;
esac
log "tar and xz"
tar "${TAROPTS[@]}" --sort=name -C "$DIR/tree" -cf "$DIR/corpus.tar.tmp" .
mv "$DIR/corpus.tar.tmp" "$DIR/corpus.tar"
xz -6 -T0 -c "$DIR/corpus.tar" >"$DIR/rootfs.tar.xz.tmp"
mv "$DIR/rootfs.tar.xz.tmp" "$DIR/rootfs.tar.xz"
{
	echo "corpus: $NAME"
	echo "made: $how"
	echo "entries: $(find "$DIR/tree" -mindepth 1 | wc -l) (regular files $(find "$DIR/tree" -type f | wc -l), symlinks $(find "$DIR/tree" -type l | wc -l), directories $(find "$DIR/tree" -mindepth 1 -type d | wc -l))"
	echo "bytes: $(du -sb --apparent-size "$DIR/tree" | cut -f1) apparent, $(du -s --block-size=1 "$DIR/tree" | cut -f1) on disk"
	echo "corpus.tar: $(stat -c %s "$DIR/corpus.tar") bytes, rootfs.tar.xz: $(stat -c %s "$DIR/rootfs.tar.xz") bytes"
	echo "listing sha256: $(cd "$DIR/tree" && find . -printf '%p %s %m %l\n' | sort | sha256sum | cut -c1-16)"
} >"$DIR/info.txt.tmp"
mv "$DIR/info.txt.tmp" "$DIR/info.txt"
sed 's/^/corpus: /' "$DIR/info.txt" >&2
echo "$DIR"
