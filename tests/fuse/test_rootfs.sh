#!/bin/bash
# test_rootfs.sh SQFS_STAGE SQFS_SEAL SQFS_PACK
#
# A Debian root file system staged three ways:
#   debootstrap  debootstrap --variant=minbase bookworm runs into a mount made
#                with -o suid,dev (its maintainer scripts run chrooted in the
#                mount); sealed, the image must equal sqfs-pack of a cp -a
#                copy of the staged tree, and in the kernel's view of the
#                image `chroot /usr/bin/dpkg -l` lists the packages and
#                `dpkg --verify` finds every packaged file intact.
#   cp -a        the cached tree (below) copied into a fresh mount
#   tar x        the cached tree's tarball extracted into another mount
# The cp and tar images must be byte-identical (sha256) to sqfs-pack of the
# tree with the same options, the kernel's view must equal the tree,
# unsquashfs -l must list its entries, and sqfsdiff -T must find no
# difference from mksquashfs of the tree.
#
# Cache (/var/cache/sqfs-stage-tests/rootfs, made on the first run, shared
# by later ones): the .debs (debootstrap --make-tarball), and a tarball of
# debootstrap's tree made from them on plain disk.  With both present no
# network is used; delete the directory to refresh them.  Without them and
# without a network: skip (fail when CI=true).
set -euo pipefail
# shellcheck source=tests/fuse/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "$@"
need_loop
need_cmd debootstrap chroot tar cmp sha256sum unsquashfs mksquashfs sqfsdiff findmnt flock

MIRROR=http://deb.debian.org/debian
SUITE=bookworm
CACHE=${SQFS_ROOTFS_CACHE:-/var/cache/sqfs-stage-tests/rootfs}
DEBS=$CACHE/$SUITE-minbase-debs.tgz
TREE=$CACHE/$SUITE-minbase.tar
MT=1700000000
COMP=zstd:3
BS=128K
MOPTS=comp=$COMP,block_size=$BS,mkfs_time=$MT
TAROPTS=(--numeric-owner --xattrs --xattrs-include='*')
section() { log "== [$((SECONDS))s] $*"; }

# pack_image DIR OUT: sqfs-pack with the options of $MOPTS.
pack_image() { "$PACK" -q --mkfs-time "$MT" -c "$COMP" -b "$BS" "$1" "$2"; }

# --- the cache -------------------------------------------------------------
section "cache"
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9		# another run may be filling it
if [[ ! -s $DEBS || ! -s $TREE ]]; then
	if ! wget -q -T 20 -t 2 -O /dev/null "$MIRROR/dists/$SUITE/Release" 2>/dev/null; then
		skip_or_fail "no network to $MIRROR and no cached debootstrap in $CACHE"
	fi
fi
if [[ ! -s $DEBS ]]; then
	log "downloading the $SUITE minbase packages into $DEBS"
	rm -rf "$CACHE/mk"
	if ! debootstrap --variant=minbase --make-tarball="$DEBS.tmp" "$SUITE" "$CACHE/mk" "$MIRROR" \
		>"$WORK/mk.log" 2>&1; then
		tail -n 20 "$WORK/mk.log" >&2
		rm -rf "$CACHE/mk" "$DEBS.tmp"
		log "FAIL: debootstrap --make-tarball"
		exit 1
	fi
	rm -rf "$CACHE/mk"
	mv "$DEBS.tmp" "$DEBS"
fi
if [[ ! -s $TREE ]]; then
	log "making the reference tree $TREE (debootstrap on plain disk)"
	rm -rf "$CACHE/root"
	if ! debootstrap --variant=minbase --unpack-tarball="$DEBS" "$SUITE" "$CACHE/root" "$MIRROR" \
		>"$WORK/plain.log" 2>&1; then
		tail -n 20 "$WORK/plain.log" >&2
		rm -rf "$CACHE/root"
		log "FAIL: debootstrap on plain disk"
		exit 1
	fi
	tar "${TAROPTS[@]}" -C "$CACHE/root" -cf "$TREE.tmp" .
	rm -rf "$CACHE/root"
	mv "$TREE.tmp" "$TREE"
fi
flock -u 9
R=$WORK/rootfs
mkdir -p "$R"
tar "${TAROPTS[@]}" -C "$R" -xpf "$TREE"
log "reference tree: $(find "$R" | wc -l) entries, $(du -sh "$R" | cut -f1)"

# --- debootstrap into a mount ----------------------------------------------------
# SQFS_TEST_QUICK (tools/test.sh's sanitizer modes): the cp -a and tar x
# below stage the same tree; debootstrap's own minute is the normal mode's.
debootstrap_case() {
	section "debootstrap into a mount"
	M=$WORK/m-deb
	IMG=$WORK/deb.sqfs
	stage_mount "$IMG" "$M" -o "suid,dev,$MOPTS"
	if debootstrap --variant=minbase --unpack-tarball="$DEBS" "$SUITE" "$M" "$MIRROR" \
		>"$WORK/deb.log" 2>&1; then
		ok "debootstrap into the mount ($(grep -c '^I: Configuring' "$WORK/deb.log") packages configured)"
	else
		fail "debootstrap into the mount:"
		tail -n 20 "$WORK/deb.log" >&2
		[[ -f $M/debootstrap/debootstrap.log ]] && tail -n 20 "$M/debootstrap/debootstrap.log" >&2
	fi
	if findmnt -rn -o TARGET | grep >/dev/null "^$M/"; then
		fail "debootstrap left mounts below the mount: $(findmnt -rn -o TARGET | grep "^$M/" | tr '\n' ' ')"
		findmnt -rn -o TARGET | grep "^$M/" | sort -r | xargs -r -n1 umount -l
	fi
	"$SEAL" --keep --quiet "$M" || fail "sqfs-seal --keep after debootstrap"
	mkdir -p "$WORK/deb-copy"
	cp -a "$M/." "$WORK/deb-copy/"
	fusermount3 -u "$M"
	wait_daemon 0
	pack_image "$WORK/deb-copy" "$WORK/deb-copy.sqfs"
	if cmp -s "$IMG" "$WORK/deb-copy.sqfs"; then
		ok "debootstrap image byte-identical to sqfs-pack of a cp -a copy of the staged tree"
	else
		fail "debootstrap image differs from sqfs-pack of a cp -a copy of the staged tree"
	fi
	rm -f "$WORK/deb-copy.sqfs"
	K=$WORK/k-deb
	if loop_mount "$IMG" "$K"; then
		tree_cmp "$WORK/deb-copy" "$K" "debootstrap: staged tree vs kernel view"
		if chroot "$K" /usr/bin/dpkg -l >"$WORK/dpkg-l" 2>"$WORK/dpkg-l.err"; then
			n=$(grep -c '^ii ' "$WORK/dpkg-l" || true)
			if ((n >= 50)) && grep -q '^ii  dpkg ' "$WORK/dpkg-l"; then
				ok "chroot dpkg -l in the kernel view lists $n installed packages"
			else
				fail "chroot dpkg -l lists $n installed packages:"
				head -n 20 "$WORK/dpkg-l" >&2
			fi
		else
			fail "chroot dpkg -l failed: $(cat "$WORK/dpkg-l.err")"
		fi
		if out=$(chroot "$K" /usr/bin/dpkg --verify 2>&1) && [[ -z $out ]]; then
			ok "chroot dpkg --verify: every packaged file intact"
		else
			fail "chroot dpkg --verify: $(head -n 20 <<<"$out")"
		fi
		if chroot "$K" /bin/sh -c 'test -u /usr/bin/su && test -c /dev/null && echo hi | cat >/dev/null'; then
			ok "set-uid su and a working /dev/null in the image"
		else
			fail "su not set-uid or /dev/null unusable in the image"
		fi
		loop_umount "$K"
	fi
	rm -rf "$WORK/deb-copy" "$IMG"
}
if [[ ${SQFS_TEST_QUICK-} == 1 ]]; then
	log "note: SQFS_TEST_QUICK=1: debootstrap into a mount left to the normal mode"
else
	debootstrap_case
fi

# --- cp -a and tar x of the cached tree -------------------------------------------
section "cp -a"
pack_image "$R" "$WORK/ref.sqfs"
REF=$(sha256sum <"$WORK/ref.sqfs" | cut -d' ' -f1)
M=$WORK/m-cp
IMG=$WORK/cp.sqfs
stage_mount "$IMG" "$M" -o "$MOPTS"
cp -a "$R/." "$M/" || fail "cp -a into the mount"
"$SEAL" --quiet "$M" || fail "sqfs-seal after cp -a"
wait_daemon 0
sum=$(sha256sum <"$IMG" | cut -d' ' -f1)
[[ $sum == "$REF" ]] && ok "cp -a: sha256 equal to sqfs-pack of the tree ($sum)" ||
	fail "cp -a: sha256 $sum, sqfs-pack's $REF"
if loop_mount "$IMG" "$WORK/k-cp"; then
	tree_cmp "$R" "$WORK/k-cp" "cp -a: tree vs kernel view"
	loop_umount "$WORK/k-cp"
fi
if out=$(unsquashfs -l -n "$IMG" 2>&1) &&
	diff <(printf '%s\n' "$out" | sed -n 's|^squashfs-root/||p' | sort) \
		<(find "$R" -mindepth 1 -printf '%P\n' | sort) >"$WORK/ls.diff"; then
	ok "cp -a: unsquashfs -l lists the tree's entries"
else
	fail "cp -a: unsquashfs -l differs from the tree: $(head -n 10 "$WORK/ls.diff" 2>/dev/null)"
fi

section "tar x"
M=$WORK/m-tar
IMG2=$WORK/tar.sqfs
stage_mount "$IMG2" "$M" -o "$MOPTS"
tar "${TAROPTS[@]}" -C "$M" -xpf "$TREE" || fail "tar x into the mount"
fusermount3 -u "$M"
wait_daemon 0
sum=$(sha256sum <"$IMG2" | cut -d' ' -f1)
[[ $sum == "$REF" ]] && ok "tar x: sha256 equal to sqfs-pack of the tree ($sum)" ||
	fail "tar x: sha256 $sum, sqfs-pack's $REF"

section "sqfsdiff"
mksquashfs "$R" "$WORK/mksq.sqfs" -noappend -comp zstd -Xcompression-level 3 -b "$BS" \
	-quiet -no-progress >/dev/null 2>&1 || fail "mksquashfs of the tree"
rc=0
out=$(sqfsdiff -T -a "$IMG" -b "$WORK/mksq.sqfs" 2>&1) || rc=$?
real=$(printf '%s\n' "$out" | grep -Ev ' has an extended type$| has a basic type$' | grep -v '^$' || true)
if [[ $rc -ne 0 && $rc -ne 1 ]] || [[ -n $real ]]; then
	fail "sqfsdiff -T against mksquashfs exited $rc:"
	printf '%s\n' "$out" | head -n 40 >&2
else
	ok "sqfsdiff -T finds no difference from mksquashfs of the tree"
fi

section "done"
finish
