#!/bin/bash
# test_seal.sh SQFS_STAGE SQFS_SEAL SQFS_PACK
#
# Start-up errors (exit 2 for usage, 1 for the environment, nothing mounted),
# sqfs-seal --keep and a reseal with later changes, sealing by unmount, a
# daemonised mount sealed by sqfs-seal, a daemon its parent does not reap,
# seal failures (a file open for writing, staged data missing from the
# spool, the image path taken by a directory, ENOSPC) with their messages,
# images into a directory without O_TMPFILE, clamped times, and -o
# pseudo_file (device nodes the daemon makes itself; equal to sqfs-pack
# --pseudo-file; a bad or unfit file refused at start-up), the daemon's
# memory after repeated seals (--keep) within 64 MiB + 256 B an inode, and
# with -s (one request thread) a seal that sees a close on its way and
# makes a pseudo entry again while a create waits in its directory; a
# signal to sqfs-seal (INT, TERM, KILL) cancels the seal at once, IMAGE
# and the tree as they were, and a STOP/CONT asks for it again.
set -euo pipefail
# shellcheck source=tests/fuse/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "$@"
need_loop

M=$WORK/m
mkdir -p "$M" "$WORK/full"
touch "$WORK/full/x"
expect_exit 2 "expected IMAGE" "$STAGE" "$WORK/i.sqfs"
expect_exit 2 "comp" "$STAGE" -o comp=bogus "$WORK/i.sqfs" "$M"
expect_exit 2 "a compressor setting: give it inside comp=" "$STAGE" -o comp=gzip,window=12 "$WORK/i.sqfs" "$M"
expect_exit 2 "an empty IMAGE" "$STAGE" "" "$M"
expect_exit 2 "an empty MOUNTPOINT" "$STAGE" "$WORK/i.sqfs" ""
expect_exit 2 "block_size" "$STAGE" -o block_size=3 "$WORK/i.sqfs" "$M"
expect_exit 2 "jobs" "$STAGE" -o jobs=0 "$WORK/i.sqfs" "$M"
expect_exit 2 "spool" "$STAGE" -o spool= "$WORK/i.sqfs" "$M"
expect_exit 2 "" "$STAGE" -o no_such_option "$WORK/i.sqfs" "$M"
expect_exit 1 "mountpoint" "$STAGE" "$WORK/i.sqfs" "$WORK/nonexistent"
expect_exit 1 "not empty" "$STAGE" "$WORK/i.sqfs" "$WORK/full"
expect_exit 1 "nodir/i.sqfs: cannot create the image: No such file" "$STAGE" "$WORK/nodir/i.sqfs" "$M"
ln -s loop-b "$WORK/loop-a" && ln -s loop-a "$WORK/loop-b"
expect_exit 1 "loop-a: cannot create the image: Too many levels of symbolic links" "$STAGE" "$WORK/loop-a" "$M"
rm -f "$WORK/loop-a" "$WORK/loop-b"
expect_exit 1 "not a regular file" "$STAGE" "$WORK/full" "$M"
# inside the mountpoint, the daemon would wait on its own mount for good
expect_exit 1 "IMAGE must not be inside the mountpoint" timeout 20 "$STAGE" "$M/i.sqfs" "$M"
expect_exit 1 "IMAGE must not be inside the mountpoint" timeout 20 "$STAGE" "$M/../m/i.sqfs" "$M"
expect_exit 1 "spool=$M/: must not be inside the mountpoint" timeout 20 "$STAGE" -o spool="$M/" "$WORK/i.sqfs" "$M"
mountpoint -q "$M" && fail "mounted after a start-up error"
[[ -z $(ls -A "$WORK" | grep spool) ]] && ok "no spool left by start-up errors" ||
	fail "spool left by a start-up error"
# FUSE options are checked first: a usage error is exit 2 even before a
# mountpoint that does not exist, and leaves no spool
expect_exit 2 "unknown option(s): \`--bogus'" "$STAGE" --bogus "$WORK/i.sqfs" "$WORK/nodir"
expect_exit 2 "unknown option(s): \`-o bogus_opt'" "$STAGE" -o bogus_opt "$WORK/i.sqfs" "$WORK/nodir"
expect_exit 2 "max_read: give a number of bytes" "$STAGE" -o max_read=0 "$WORK/i.sqfs" "$M"
[[ -z $(ls -A "$WORK" | grep spool) && ! -e $WORK/i.sqfs ]] && ok "no spool, no image after FUSE option errors" ||
	fail "a FUSE option error left a spool or an image"
expect_exit 2 "MOUNTPOINT" "$SEAL"
expect_exit 2 "" "$SEAL" --bogus "$M"
expect_exit 1 "not a sqfs-stage mount" "$SEAL" "$WORK"
expect_exit 0 "" "$STAGE" --help
expect_exit 0 "" "$SEAL" --help
for t in "$STAGE" "$SEAL"; do
	for a in --help --version; do
		rc=0
		"$t" $a >/dev/full 2>"$WORK/err" || rc=$?
		[[ $rc == 1 ]] && grep -q "writing to standard output: No space left" "$WORK/err" &&
			ok "${t##*/} $a >/dev/full: exit 1" || fail "${t##*/} $a >/dev/full: exit $rc: $(cat "$WORK/err")"
		# a reader that has gone away: no error, no death by SIGPIPE
		{
			rc=0
			"$t" $a 2>"$WORK/err" || rc=$?
			echo "$rc" >"$WORK/rc"
		} | (exec 0<&-; sleep 0.3)
		rc=$(cat "$WORK/rc")
		[[ $rc == 0 ]] && ok "${t##*/} $a to a closed pipe: exit 0" ||
			fail "${t##*/} $a to a closed pipe: exit $rc: $(cat "$WORK/err")"
	done
done

# --- only the root of a sqfs-stage mount is one, whatever xattrs say ---
mkdir -p "$WORK/plain"
setfattr -n user.sqfs-stage.seal -v '{"pid": 1, "image": "/x"}' "$WORK/plain"
expect_exit 1 "plain: not a sqfs-stage mount" "$SEAL" "$WORK/plain"
IMG=$WORK/root.sqfs
stage_mount "$IMG" "$M"
mkdir "$M/sub"
setfattr -n user.sqfs-stage.seal -v '{"pid": 1, "image": "/x"}' "$M/sub"
expect_exit 1 "sub: not a sqfs-stage mount (a directory inside one" "$SEAL" "$M/sub"
mountpoint -q "$M" && ok "still mounted after sqfs-seal of a directory inside" ||
	fail "sqfs-seal of a directory inside unmounted the mount"
# a symlink to the mountpoint: sealed, and the mount itself unmounted
ln -sfn "$M" "$WORK/link"
expect_exit 0 "" "$SEAL" --quiet "$WORK/link"
wait_daemon 0
mountpoint -q "$M" && fail "still mounted after sqfs-seal of a symlink to it" ||
	ok "sqfs-seal of a symlink to the mountpoint unmounted it"
rm -f "$WORK/link"
# another FUSE file system whose root carries the attribute (squashfuse of an
# image of a sealed tree): refused by its mount type, not unmounted, no wait
need_cmd squashfuse mksquashfs
mksquashfs "$WORK/plain" "$WORK/fake.sqfs" -quiet -no-progress -xattrs >/dev/null
mkdir -p "$WORK/fakem"
squashfuse "$WORK/fake.sqfs" "$WORK/fakem" || fail "squashfuse $WORK/fake.sqfs"
MOUNTS+=("$WORK/fakem")
[[ $(getfattr --only-values -n user.sqfs-stage.seal "$WORK/fakem" 2>/dev/null) == *pid* ]] ||
	fail "squashfuse does not show the root's user.sqfs-stage.seal"
expect_exit 1 "fakem: not a sqfs-stage mount (a fuse.squashfuse mount)" timeout 20 "$SEAL" "$WORK/fakem"
mountpoint -q "$WORK/fakem" && ok "a squashfuse mount is left mounted by sqfs-seal" ||
	fail "sqfs-seal unmounted a squashfuse mount"
fusermount3 -u "$WORK/fakem"

# --- -o max_read: reads through the daemon in pieces that size, then sealed
# (libfuse 3.14 ended the session at once unless init repeated it) ---
IMG=$WORK/maxread.sqfs
stage_mount "$IMG" "$M" -o max_read=4096,no_passthrough
head -c 300001 /dev/urandom >"$WORK/rnd"
cp "$WORK/rnd" "$M/f"
echo 3 >/proc/sys/vm/drop_caches
cmp -s "$WORK/rnd" "$M/f" && ok "-o max_read=4096: the file reads back" ||
	fail "-o max_read=4096: the file does not read back"
"$SEAL" --quiet "$M" || fail "seal of the max_read mount"
wait_daemon 0
rm -rf "$WORK/mr" && unsquashfs -q -d "$WORK/mr" "$IMG" >/dev/null &&
	cmp -s "$WORK/rnd" "$WORK/mr/f" && ok "-o max_read=4096: sealed, unsquashfs reads it" ||
	fail "-o max_read=4096: image wrong"

# --- a second mount over a live one would hide its tree: refused ---
IMG=$WORK/first.sqfs
stage_mount "$IMG" "$M"
expect_exit 1 "already a sqfs-stage mount" "$STAGE" "$WORK/second.sqfs" "$M"
[[ ! -e $WORK/second.sqfs ]] && (($(grep -c " $M fuse" /proc/mounts) == 1)) &&
	ok "no second mount over a live one" || fail "a second mount was stacked over $M"
"$SEAL" --quiet "$M" || fail "seal of the first mount"
wait_daemon 0

# --- a second mount staging the same IMAGE: refused while the first lives ---
IMG=$WORK/same.sqfs
stage_mount "$IMG" "$M"
FIRST=$DPID
mkdir -p "$WORK/m2"
expect_exit 1 "already the image of the sqfs-stage mount at $M" "$STAGE" "$WORK/./same.sqfs" "$WORK/m2"
mountpoint -q "$WORK/m2" && fail "a second mount staged $IMG" || ok "same IMAGE twice: refused"
# the same file under other names: a hard link, a bind mount of its directory
: >"$IMG"
ln "$IMG" "$WORK/same-hard.sqfs"
expect_exit 1 "already the image of the sqfs-stage mount at $M" "$STAGE" "$WORK/same-hard.sqfs" "$WORK/m2"
mkdir -p "$WORK/bind"
mount --bind "$WORK" "$WORK/bind"
expect_exit 1 "already the image of the sqfs-stage mount at $M" "$STAGE" "$WORK/bind/same.sqfs" "$WORK/m2"
umount "$WORK/bind"
rm -f "$WORK/same-hard.sqfs" "$IMG"
mountpoint -q "$WORK/m2" && fail "a second mount staged $IMG under another name" ||
	ok "same IMAGE by a hard link or a bind mount: refused"
# once its daemon has gone, the dead mount is no conflict
kill -9 "$FIRST"
wait "$FIRST" 2>/dev/null || true
stage_mount "$IMG" "$WORK/m2"
ok "same IMAGE after the first daemon died: mounted"
"$SEAL" --quiet "$WORK/m2" || fail "seal of the second mount of $IMG"
wait_daemon 0
fusermount3 -u "$M" 2>/dev/null || umount -l "$M"
rm -rf "$WORK"/.same.sqfs.spool.*

# --- an existing IMAGE outlives a mount that staged nothing ---
IMG=$WORK/kept.sqfs
printf 'an older image\n' >"$IMG"
stage_mount "$IMG" "$M" -o ro
fusermount3 -u "$M"
wait_daemon 0
[[ $(cat "$IMG") == "an older image" ]] && ok "unmount with nothing staged: IMAGE kept" ||
	fail "unmount with nothing staged replaced IMAGE"
grep -q "nothing was staged since the mount: $IMG is left as it was" "$WORK/daemon.log" ||
	fail "no log line for the kept image"
# ... but sqfs-seal writes the empty tree's image, and a change is sealed
stage_mount "$IMG" "$M"
"$SEAL" --quiet "$M" || fail "sqfs-seal of an empty tree"
wait_daemon 0
unsquashfs -s "$IMG" >/dev/null 2>&1 && ok "sqfs-seal of an empty tree over an old IMAGE" ||
	fail "sqfs-seal left no image"
printf 'an older image\n' >"$IMG"
stage_mount "$IMG" "$M"
chmod 0700 "$M"
fusermount3 -u "$M"
wait_daemon 0
[[ $(unsquashfs -lln "$IMG" 2>/dev/null | head -n 4 | tail -n 1) == drwx------* ]] &&
	ok "a chmod of the root is sealed at unmount" || fail "chmod of the root not sealed: $(unsquashfs -lln "$IMG" 2>&1)"

# --- sealed with --keep, then IMAGE removed: the unmount seals again -------
IMG=$WORK/kept2.sqfs
stage_mount "$IMG" "$M"
echo q >"$M/q"
"$SEAL" --keep --quiet "$M" || fail "seal --keep"
rm -f "$IMG"
fusermount3 -u "$M"
wait_daemon 0
unsquashfs -lln "$IMG" 2>/dev/null | grep >/dev/null ' squashfs-root/q$' &&
	ok "IMAGE removed after a --keep seal: the unmount wrote it again" ||
	fail "IMAGE removed after a --keep seal: gone after the unmount, and the spool with it"

# --- IMAGE a symbolic link: written through; one into the mountpoint refused ---
mkdir -p "$WORK/real"
printf 'old\n' >"$WORK/real/r.sqfs"
chmod 0640 "$WORK/real/r.sqfs"
ln -sfn real/r.sqfs "$WORK/link.sqfs"
stage_mount "$WORK/link.sqfs" "$M"
echo data >"$M/f"
"$SEAL" --quiet "$M" || fail "seal through a symlinked IMAGE"
wait_daemon 0
[[ -L $WORK/link.sqfs && $(stat -c %a "$WORK/real/r.sqfs") == 640 ]] &&
	unsquashfs -lln "$WORK/real/r.sqfs" 2>/dev/null | grep >/dev/null ' squashfs-root/f$' &&
	ok "IMAGE a symlink: sealed through it, link and mode kept" ||
	fail "IMAGE a symlink: $(ls -l "$WORK/link.sqfs" "$WORK/real")"
ln -sfn "$(basename "$M")/inside.sqfs" "$WORK/into.sqfs"
expect_exit 1 "IMAGE must not be inside the mountpoint" "$STAGE" "$WORK/into.sqfs" "$M"
mountpoint -q "$M" && fail "mounted with IMAGE a link into the mountpoint" || true
rm -rf "$WORK/real" "$WORK/link.sqfs" "$WORK/into.sqfs"

# --- IMAGE inside the mountpoint by another name: a shared bind mount of it ---
mkdir -p "$WORK/bm" "$WORK/bx"
mount --bind "$WORK/bm" "$WORK/bm"
mount --make-shared "$WORK/bm"
mount --bind "$WORK/bm" "$WORK/bx"
expect_exit 1 "IMAGE must not be inside the mountpoint" timeout 20 "$STAGE" "$WORK/bx/i.sqfs" "$WORK/bm"
if mountpoint -q "$WORK/bm" && grep -q " $WORK/bm fuse" /proc/mounts; then
	fail "mounted with IMAGE in a bind mount of the mountpoint"
	fusermount3 -u -z "$WORK/bm" 2>/dev/null || true
fi
umount "$WORK/bx"
umount "$WORK/bm"

# --- an image path with a comma and a backslash is shown whole in mounts ---
IMG="$WORK/a,b\\c.sqfs"
stage_mount "$IMG" "$M"
grep -qF "$WORK/a,b\\134c.sqfs $M fuse" /proc/mounts && ok "fsname with a comma and a backslash" ||
	fail "fsname in /proc/mounts: $(grep " $M " /proc/mounts)"
"$SEAL" --quiet "$M" || fail "seal of a,b\\c.sqfs"
wait_daemon 0
[[ -f $IMG ]] || fail "no image at $IMG"
# ... and in sqfs-seal's summary, as its bytes (the daemon's JSON escapes
# them): a name ending in a backslash, a quote, a newline, a byte that is
# not UTF-8, and the text of a JSON key.
for name in 'x\' 'q"u'$'\377''o' $'n\nl' 'k", "image_size": 1, "z'; do
	IMG=$WORK/$name
	stage_mount "$IMG" "$M"
	echo a >"$M/f"
	"$SEAL" "$M" >"$WORK/summary" || fail "seal of $(printf %q "$IMG")"
	wait_daemon 0
	if [[ $(head -c $((${#IMG} + 40)) "$WORK/summary") == "Sealed $IMG: "[1-9]*" bytes, "* ]]; then
		ok "summary names $(printf %q "$name") as it is"
	else
		fail "summary for $(printf %q "$IMG"): $(head -n 2 "$WORK/summary" | od -c | head -n 5)"
	fi
	rm -f -- "$IMG"
done

# --- a file size limit inherited by the daemon: EFBIG, not its death ---
IMG=$WORK/fsize.sqfs
(ulimit -f 4096 && exec "$STAGE" -f -o no_passthrough "$IMG" "$M" >>"$WORK/daemon.log" 2>&1) &
DPID=$!
daemon_add "$DPID"
for ((i = 0; i < 200; i++)); do mountpoint -q "$M" && break; sleep 0.05; done
rc=0
head -c 5M /dev/zero >"$M/big" 2>"$WORK/err" || rc=$?
[[ $rc != 0 ]] && grep -q "File too large" "$WORK/err" && daemon_alive "$DPID" &&
	ok "write past ulimit -f: EFBIG, daemon alive" || fail "write past ulimit -f: rc $rc, $(cat "$WORK/err")"
"$SEAL" --quiet "$M" || fail "seal after EFBIG"
wait_daemon 0

# --- the seal at unmount, once started, is not stopped by a second SIGTERM ---
IMG=$WORK/term.sqfs
stage_mount "$IMG" "$M" -o no_background,comp=xz
python3 -c 'import random, sys; r = random.Random(3); w = [str(r.random()) for _ in range(4000)]
sys.stdout.write(" ".join(r.choice(w) for _ in range(600_000)))' >"$M/text"
kill -TERM "$DPID"
sleep 0.3
kill -TERM "$DPID" 2>/dev/null || log "note: the seal was over before the second SIGTERM"
wait_daemon 0
unsquashfs -cat "$IMG" text 2>/dev/null | cmp -s - <(python3 -c 'import random, sys; r = random.Random(3); w = [str(r.random()) for _ in range(4000)]
sys.stdout.write(" ".join(r.choice(w) for _ in range(600_000)))') &&
	ok "sealed whole despite a second SIGTERM" || fail "no complete image after a second SIGTERM"

# --- a seal with nothing changed stands; two sqfs-seal at once both succeed ---
IMG=$WORK/stand.sqfs
stage_mount "$IMG" "$M" -o no_background,comp=zstd:19
for i in 1 2 3; do seq 1500000 >"$M/t$i"; done
"$SEAL" --keep --quiet "$M" || fail "first seal"
ino=$(stat -c %i "$IMG")
"$SEAL" --keep --json "$M" >"$WORK/again.json" || fail "second seal"
[[ $(stat -c %i "$IMG") == "$ino" ]] && ok "nothing changed: the image stands (not written again)" ||
	fail "nothing changed, yet the image was written again"
# an image changed in place with its mtime put back no longer stands
cp "$IMG" "$WORK/good.sqfs"
python3 - "$IMG" <<'EOF'
import os, sys
st = os.stat(sys.argv[1])
with open(sys.argv[1], "r+b") as f:
    f.seek(100000)
    f.write(b"CORRUPTED")
os.utime(sys.argv[1], ns=(st.st_atime_ns, st.st_mtime_ns))
EOF
"$SEAL" --keep --quiet "$M" || fail "seal after the image was changed"
cmp -s "$IMG" "$WORK/good.sqfs" && ok "an image changed with its mtime put back is written again" ||
	fail "an image changed in place (mtime put back) was taken as standing"
ino=$(stat -c %i "$IMG")
rm -f "$WORK/good.sqfs"
# a writer that appends through passthrough, unseen until it closes: the
# image must not stand while it is open, nor after with its data missing
exec 3>>"$M/t1"
echo appended >&3
expect_exit 1 "t1: still open for writing" "$SEAL" --keep "$M"
exec 3>&-
"$SEAL" --keep --quiet "$M" || fail "seal after the append"
[[ $(stat -c %i "$IMG") != "$ino" ]] && [[ $(unsquashfs -cat "$IMG" t1 | tail -n 1) == appended ]] &&
	ok "the appended file is sealed anew" || fail "the append is not in the image"
echo more >"$M/t4"
{
	rc=0
	"$SEAL" --quiet "$M" 2>"$WORK/first.err" || rc=$?
	echo "$rc" >"$WORK/first.rc"
} &
first=$!
sleep 0.2
rc=0
overlap=1
[[ -e $WORK/first.rc ]] && overlap=0	# the first was done before the second began
"$SEAL" --quiet "$M" 2>"$WORK/err" || rc=$?
wait "$first"
# The second found the mount already gone: the first had unmounted before it
# looked (it cannot tell that from a directory that never was a mount).
if ((rc == 1)) && grep -q "not a sqfs-stage mount" "$WORK/err" && [[ $(cat "$WORK/first.rc") == 0 ]]; then
	overlap=0
fi
if ((overlap)); then
	[[ $rc == 0 && $(cat "$WORK/first.rc") == 0 ]] && ok "two sqfs-seal at once: both exit 0" ||
		fail "two sqfs-seal at once: exit $(cat "$WORK/first.rc") ($(cat "$WORK/first.err")) and $rc ($(cat "$WORK/err"))"
else
	[[ $(cat "$WORK/first.rc") == 0 ]] || fail "first sqfs-seal: $(cat "$WORK/first.err")"
	log "note: the first sqfs-seal was over before the second began; no overlap to check"
fi
wait_daemon 0
mountpoint -q "$M" && fail "still mounted after two sqfs-seal"

# --- --keep, then later changes, then a reseal ---
IMG=$WORK/keep.sqfs
stage_mount "$IMG" "$M" -o mkfs_time=7
echo first >"$M/a"
"$SEAL" --keep --quiet "$M" || fail "first seal --keep"
loop_mount "$IMG" "$WORK/k1" && {
	[[ $(cat "$WORK/k1/a") == first && ! -e $WORK/k1/b ]] && ok "first image" || fail "first image content"
	loop_umount "$WORK/k1"
}
echo second >"$M/b"
echo changed >"$M/a"
"$SEAL" --keep --json "$M" >"$WORK/s2.json" || fail "second seal --keep"
grep -q '"files": 2' "$WORK/s2.json" && ok "second summary counts 2 files" || fail "summary: $(cat "$WORK/s2.json")"
loop_mount "$IMG" "$WORK/k2" && {
	[[ $(cat "$WORK/k2/a") == changed && $(cat "$WORK/k2/b") == second ]] &&
		ok "reseal has the later changes" || fail "reseal content"
	loop_umount "$WORK/k2"
}

# --- a file held open for writing fails the seal, naming it ---
mkdir "$M/dir"
exec 3>"$M/dir/held"
echo data >&3
expect_exit 1 "dir/held" "$SEAL" --keep "$M"
grep -q "open for writing" "$WORK/err" && ok "message says open for writing" || fail "message: $(cat "$WORK/err")"
exec 3>&-
"$SEAL" --keep --quiet "$M" || fail "seal after closing the file"
# a file open read-only does not block the seal
exec 4<"$M/a"
"$SEAL" --keep --quiet "$M" || fail "seal with a file open read-only"
exec 4<&-
# nor do files no entry names that are held open for writing (one unlinked,
# an O_TMPFILE not linked): the image cannot see them, so the seal neither
# fails nor waits the 5 s it gives releases still on their way
exec 5>"$M/dir/unlinked"
echo data >&5
rm "$M/dir/unlinked"
python3 -c '
import os, sys, time
fd = os.open(sys.argv[1], os.O_TMPFILE | os.O_WRONLY, 0o600)
os.write(fd, b"unnamed")
open(sys.argv[2], "w").close()
time.sleep(60)
' "$M/dir" "$WORK/tmpfile-ready" &
HOLDER=$!
for ((i = 0; i < 100; i++)); do [[ -e $WORK/tmpfile-ready ]] && break; sleep 0.05; done
t0=$(date +%s%N)
if "$SEAL" --keep --quiet "$M"; then
	ms=$((($(date +%s%N) - t0) / 1000000))
	((ms < 3000)) && ok "seal beside unnamed files open for writing: ${ms} ms" ||
		fail "seal beside unnamed files open for writing waited ${ms} ms"
else
	fail "seal beside unnamed files open for writing"
fi
kill "$HOLDER" 2>/dev/null
wait "$HOLDER" 2>/dev/null || true
exec 5>&-
loop_mount "$IMG" "$WORK/k3" && {
	[[ $(ls "$WORK/k3/dir") == held ]] && ok "no unnamed file in the image" ||
		fail "image has: $(ls "$WORK/k3/dir")"
	loop_umount "$WORK/k3"
}

# --- staged data gone from the spool: the seal names the file's path ---
# (the writer lists the staged tree itself; a failure is traced back to
# the path by a second walk)
mkdir -p "$M/sub/deeper"
echo victim >"$M/sub/deeper/victim"
spool=$(ls -d "$WORK"/.keep.sqfs.spool.* | sed -n 1p)
vino=$(stat -c %i "$M/sub/deeper/victim")
if [[ -f $spool/data/$vino ]]; then
	mv "$spool/data/$vino" "$WORK/victim.data"
	expect_exit 1 "/sub/deeper/victim: opening: No such file" "$SEAL" --keep "$M"
	mv "$WORK/victim.data" "$spool/data/$vino"
	"$SEAL" --keep --quiet "$M" && ok "seal once the data is back" || fail "seal with the data back"
else
	fail "no spool file $spool/data/$vino for sub/deeper/victim"
fi
rm -r "$M/sub"

# --- unmount seals the later changes ---
echo third >"$M/c"
sum_before=$(sha256sum <"$IMG")
fusermount3 -u "$M"
wait_daemon 0
[[ $(sha256sum <"$IMG") != "$sum_before" ]] && ok "unmount resealed" || fail "unmount did not reseal"
loop_mount "$IMG" "$WORK/k3" && {
	[[ $(cat "$WORK/k3/c") == third && $(cat "$WORK/k3/dir/held") == data ]] &&
		ok "unmount seal content" || fail "unmount seal content"
	loop_umount "$WORK/k3"
}
ls -A "$WORK" | grep >/dev/null 'keep.sqfs.spool' && fail "spool left after unmount seal" || ok "spool removed"

# --- umount -l with a file still open for writing: sealed at its close ---
# The kernel sends RELEASE in the background; when the last file of a
# detached mount closes it ends the connection with that request still
# queued.  A stopped daemon makes the loss certain: it must seal the file
# as it is, not fail with "still open for writing".
for opt in "" no_passthrough; do
	IMG=$WORK/lazy$opt.sqfs
	stage_mount "$IMG" "$M" ${opt:+-o "$opt"}
	exec 8>"$M/open"
	echo first >&8
	umount -l "$M"
	echo second >&8
	kill -STOP "$DPID"
	# The close may wait in the kernel for a request the stopped daemon
	# was answering (fuse_wait_aborted): the daemon goes on from elsewhere.
	(sleep 0.5 && kill -CONT "$DPID") &
	cont=$!
	exec 8>&-
	wait "$cont" || true
	kill -CONT "$DPID" 2>/dev/null || true
	wait_daemon 0
	got=$(unsquashfs -cat "$IMG" open 2>&1 | tr '\n' ' ')
	[[ $got == "first second " ]] && ok "umount -l ${opt:-passthrough}: the file closed later is sealed" ||
		fail "umount -l ${opt:-passthrough}: image holds '$got'"
done

# --- unmount with nothing changed since the last seal: no new image ---
IMG=$WORK/same.sqfs
stage_mount "$IMG" "$M" -o mkfs_time=7
echo x >"$M/x"
"$SEAL" --keep --quiet "$M"
ino=$(stat -c %i "$IMG")
fusermount3 -u "$M"
wait_daemon 0
[[ $(stat -c %i "$IMG") == "$ino" ]] && ok "no reseal without changes" || fail "resealed without changes"

# --- daemonised (no -f): sqfs-seal seals, unmounts and waits for the daemon ---
IMG=$WORK/daemon.sqfs
(umask 027 && exec "$STAGE" -o mkfs_time=7 "$IMG" "$M") || fail "daemonised start"
MOUNTS+=("$M")
mountpoint -q "$M" && ok "daemonised mount" || fail "daemonised mount missing"
dpid=$(pgrep -n -f "sqfs-stage -o mkfs_time=7 $IMG" || true)
[[ -n $dpid ]] && daemon_add "$dpid"
seq 1 100000 >"$M/numbers"
"$SEAL" --quiet "$M" || fail "sqfs-seal of a daemonised mount"
mountpoint -q "$M" && fail "still mounted after sqfs-seal"
[[ -n $dpid ]] && daemon_alive "$dpid" && fail "daemon still running after sqfs-seal"
# a new image: 0666 less the umask the daemon was started with
[[ $(stat -c %a "$IMG") == 640 ]] && ok "new image mode 640 (umask 027)" || fail "new image mode $(stat -c %a "$IMG"), umask 027"
loop_mount "$IMG" "$WORK/k4" && {
	cmp -s "$WORK/k4/numbers" <(seq 1 100000) && ok "daemonised image content" || fail "daemonised image content"
	loop_umount "$WORK/k4"
}

# --- started with descriptors 0-2 closed: its spool's descriptors are not
# among them (daemonising put /dev/null over them: every create failed) ---
IMG=$WORK/closed.sqfs
"$STAGE" -o mkfs_time=8 "$IMG" "$M" <&- >&- 2>&- || fail "start with 0-2 closed"
MOUNTS+=("$M")
dpid=$(pgrep -n -f "sqfs-stage -o mkfs_time=8 $IMG" || true)
[[ -n $dpid ]] && daemon_add "$dpid"
if mkdir "$M/dir" && echo hello >"$M/dir/f" 2>"$WORK/err"; then
	ok "0-2 closed: a file made in the mount"
else
	fail "0-2 closed: $(cat "$WORK/err")"
fi
"$SEAL" --quiet "$M" <&- >&- || fail "sqfs-seal with 0 and 1 closed"
loop_mount "$IMG" "$WORK/k4c" && {
	[[ $(cat "$WORK/k4c/dir/f" 2>/dev/null) == hello ]] && ok "0-2 closed: the file in the image" ||
		fail "0-2 closed: the image holds $(find "$WORK/k4c" | tr '\n' ' ')"
	loop_umount "$WORK/k4c"
}

# --- a reader of the summary gone before it is written (sqfs-seal | head):
# the seal still unmounts, exit 0; a full disk for the summary is an error ---
IMG=$WORK/pipe.sqfs
stage_mount "$IMG" "$M" -o mkfs_time=7
echo p >"$M/p"
rc=$(python3 -c 'import os, subprocess, sys
r, w = os.pipe()
os.close(r)
print(subprocess.run(sys.argv[1:], stdout=w).returncode)' "$SEAL" "$M")
wait_daemon 0
[[ $rc == 0 ]] && ok "sqfs-seal into a closed pipe: exit 0" || fail "sqfs-seal into a closed pipe: exit $rc"
mountpoint -q "$M" && fail "still mounted after sqfs-seal into a closed pipe" ||
	ok "unmounted after sqfs-seal into a closed pipe"
[[ -s $IMG ]] || fail "no image from sqfs-seal into a closed pipe"
stage_mount "$IMG" "$M" -o mkfs_time=7
echo p >"$M/p"
rc=0
"$SEAL" --json "$M" >/dev/full 2>"$WORK/err" || rc=$?
[[ $rc == 1 ]] && grep -q "the image is sealed, but writing the summary failed: No space left" "$WORK/err" &&
	ok "sqfs-seal >/dev/full: exit 1: $(cat "$WORK/err")" || fail "sqfs-seal >/dev/full: exit $rc: $(cat "$WORK/err")"
wait_daemon 0
mountpoint -q "$M" && fail "still mounted after sqfs-seal >/dev/full"

# --- a parent that does not reap (an init that reaps late, a container's
# PID 1 that never does): the daemon's zombie must not hold sqfs-seal ---
IMG=$WORK/zombie.sqfs
mkdir -p "$M"
python3 -c 'import subprocess, sys, time
subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(120)' "$STAGE" -f "$IMG" "$M" &
ppid=$!
for ((i = 0; i < 200; i++)); do
	mountpoint -q "$M" && break
	sleep 0.05
done
MOUNTS+=("$M")
echo z >"$M/z"
t0=$SECONDS
rc=0
timeout 60 "$SEAL" --quiet "$M" || rc=$?
[[ $rc -eq 0 && $((SECONDS - t0)) -lt 30 ]] && ok "sqfs-seal returns while the daemon is an unreaped zombie" ||
	fail "sqfs-seal with an unreaped daemon: exit $rc after $((SECONDS - t0)) s"
[[ -s $IMG ]] && ok "image of the unreaped daemon" || fail "no image from the unreaped daemon"
kill "$ppid" 2>/dev/null || true
wait "$ppid" 2>/dev/null || true

# --- the image path becomes a directory: the unmount seal fails, spool kept ---
IMG=$WORK/taken.sqfs
stage_mount "$IMG" "$M"
echo y >"$M/y"
mkdir "$IMG"
fusermount3 -u "$M"
wait_daemon 1
grep -q "taken.sqfs: cannot create the image: exists and is not a regular file; the staged tree is kept in" "$WORK/daemon.log" &&
	ok "unmount seal failure logged" || fail "no log of the failed unmount seal"
ls -A "$WORK" | grep >/dev/null '^\.taken\.sqfs\.spool\.' && ok "spool kept after a failed seal" ||
	fail "spool removed after a failed seal"

# --- ENOSPC in the image directory ---
mkdir -p "$WORK/small" "$WORK/sp"
if mount -t tmpfs -o size=256k tmpfs "$WORK/small"; then
	LOOPS+=("$WORK/small")
	IMG=$WORK/small/img.sqfs
	stage_mount "$IMG" "$M" -o spool="$WORK/sp",comp=gzip:1
	head -c 2M /dev/urandom >"$M/random"
	expect_exit 1 "No space left on device" "$SEAL" --keep "$M"
	[[ -z $(ls -A "$WORK/small") ]] && ok "no partial image after ENOSPC" || fail "left: $(ls -A "$WORK/small")"
	rm "$M/random"
	"$SEAL" --quiet "$M" || fail "seal after freeing space"
	wait_daemon 0
	[[ -f $IMG ]] && ok "sealed after ENOSPC was fixed" || fail "no image"
fi

# --- sqfs-pack into a sqfs-stage mount: a new image, then one replaced, made
# through the mount's O_TMPFILE (ops.py checks it) and named by linkat; the
# named temporary file of a system without O_TMPFILE or /proc is
# test_errors.sh's "no /proc" case ---
mkdir -p "$WORK/psrc"
seq 1 50000 >"$WORK/psrc/n"
echo a >"$WORK/psrc/a"
stage_mount "$WORK/host.sqfs" "$M"
"$PACK" -q --mkfs-time 1700000000 "$WORK/psrc" "$WORK/p-ref.sqfs"
for round in new replaced; do
	if "$PACK" -q --mkfs-time 1700000000 "$WORK/psrc" "$M/p.sqfs" 2>"$WORK/err"; then
		cmp -s "$M/p.sqfs" "$WORK/p-ref.sqfs" && ok "sqfs-pack into a sqfs-stage mount ($round)" ||
			fail "sqfs-pack into a sqfs-stage mount ($round): image differs"
	else
		fail "sqfs-pack into a sqfs-stage mount ($round): $(cat "$WORK/err")"
	fi
	[[ $(ls -A "$M") == p.sqfs ]] && ok "no temporary file left ($round)" || fail "left ($round): $(ls -A "$M")"
done
"$SEAL" --quiet "$M" || fail "seal of the mount holding p.sqfs"
wait_daemon 0

# --- a time SquashFS cannot hold: clamped, and sqfs-seal warns ---
stage_mount "$WORK/times.sqfs" "$M"
touch -d 1960-01-01 "$M/old"
touch "$M/now"
if out=$("$SEAL" --json "$M" 2>"$WORK/err"); then
	grep -q '"clamped_times": 1' <<<"$out" && grep -q "warning: .*: 1 modification time(s) outside" "$WORK/err" &&
		ok "seal: clamped time counted and warned: $(cat "$WORK/err")" ||
		fail "seal of a 1960 mtime: $out / $(cat "$WORK/err")"
else
	fail "seal of a 1960 mtime: $(cat "$WORK/err")"
fi
wait_daemon 0

# --- repeated seals (--keep): the daemon's memory stays within its bound ---
# Each seal's compressor threads free their buffers (zstd:15 contexts are
# large) into their own malloc arenas; unless given back, five seals of a
# 700-inode tree kept about 100 MB resident.
M=$WORK/mrss
stage_mount "$WORK/rss.sqfs" "$M" -o comp=zstd:15
ROUNDS=5
[[ ${SQFS_TEST_QUICK-} == 1 ]] && ROUNDS=2	# the seals' code paths; the bound needs 5
for ((round = 1; round <= ROUNDS; round++)); do
	python3 - "$M" "$round" <<'EOF'
import os, sys, random
mnt, r = sys.argv[1], int(sys.argv[2])
random.seed(r)
txt = b"".join(b"word%d " % random.randint(0, 5000) for _ in range(60000))
for d in range(5):
    os.makedirs(f"{mnt}/d{d}", exist_ok=True)
files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(mnt) for f in fs)
for i in range(200):
    n = random.choice([0, 10, 3000, 30000, 100000])
    off = random.randint(0, len(txt) - n)
    with open(f"{mnt}/d{i % 5}/f{r}_{i}", "wb") as f:
        f.write(txt[off:off + n])
random.shuffle(files)
for p in files[:150]:
    os.unlink(p) if random.random() < 0.5 else os.truncate(p, random.randint(0, 1000))
EOF
	"$SEAL" --quiet --keep "$M" || fail "seal --keep, round $round"
done
rss=$(awk '/^VmRSS/ {print $2 * 1024}' "/proc/$DPID/status")
inodes=$(find "$M" | wc -l)
limit=$((64 * 1024 * 1024 + 256 * inodes))
if [[ ${SQFS_TEST_QUICK-} == 1 ]]; then
	log "note: SQFS_TEST_QUICK=1 (a sanitizer's own memory): $((rss >> 20)) MiB after $ROUNDS seals is judged in the normal mode"
elif ((rss <= limit)); then
	ok "after 5 seals of $inodes inodes the daemon holds $((rss >> 20)) MiB (bound $((limit >> 20)) MiB)"
else
	fail "after 5 seals of $inodes inodes the daemon holds $((rss >> 20)) MiB, above 64 MiB + 256 B an inode"
fi
"$SEAL" --quiet "$M" || fail "last seal"
wait_daemon 0

# --- -o pseudo_file: entries the daemon makes itself (device nodes too) ---
printf '%s\n' '# the usual few' 'dev d 755 0 0' 'dev/null c 666 0 0 1 3' \
	'dev/console c 600 0 5 5 1' 'run d 755 0 0' 'run/initctl i 600 0 0 f' \
	'lib s 777 0 0 usr/lib' '/ m 750 0 0' >"$WORK/pseudo.txt"
stage_mount "$WORK/pseudo.sqfs" "$M" -o pseudo_file="$WORK/pseudo.txt",mkfs_time=1700000000
if [[ $(stat -c '%F %t:%T %a %u:%g %Y' "$M/dev/null") == "character special file 1:3 666 0:0 1700000000" &&
	$(stat -c '%F %a %g' "$M/dev/console") == "character special file 600 5" &&
	$(stat -c '%F' "$M/run/initctl") == fifo && $(readlink "$M/lib") == usr/lib &&
	$(stat -c '%a' "$M") == 750 ]]; then
	ok "pseudo_file: the entries are in the mount"
else
	fail "pseudo_file: $(ls -lR "$M" 2>&1 | tr '\n' ' ')"
fi
printf 'hello\n' >"$M/hello"
mkdir -p "$WORK/psrc2"
printf 'hello\n' >"$WORK/psrc2/hello"
chmod 750 "$WORK/psrc2"
touch -d @1650000000 "$M/hello" "$M" "$WORK/psrc2/hello" "$WORK/psrc2"
"$SEAL" --quiet "$M" || fail "seal with pseudo entries"
wait_daemon 0
# SPOOL/pseudo goes with the rest: it kept the spool directory after the seal.
if [[ -n $(find "$WORK" -maxdepth 1 -name '.pseudo.sqfs.spool.*') ]]; then
	fail "pseudo_file: spool left after the seal: $(find "$WORK"/.pseudo.sqfs.spool.* | tr '\n' ' ')"
else
	ok "pseudo_file: spool removed after the seal"
fi
"$PACK" -q --mkfs-time 1700000000 --pseudo-file "$WORK/pseudo.txt" "$WORK/psrc2" "$WORK/pseudo-ref.sqfs"
cmp -s "$WORK/pseudo.sqfs" "$WORK/pseudo-ref.sqfs" && ok "pseudo_file: image equals sqfs-pack --pseudo-file" ||
	fail "pseudo_file: image differs from sqfs-pack --pseudo-file"
printf 'dev/x c 644 0 0 1\n' >"$WORK/bad-pseudo.txt"
expect_exit 2 "bad-pseudo.txt: line 1: give PATH b|c" "$STAGE" -o pseudo_file="$WORK/bad-pseudo.txt" "$WORK/i.sqfs" "$M"
printf 'dev/x c 644 0 0 1 3\n' >"$WORK/unfit-pseudo.txt"
expect_exit 1 "pseudo definition 'dev/x c 644 0 0 1 3' (.*unfit-pseudo.txt:1): a parent directory is missing" \
	"$STAGE" -o pseudo_file="$WORK/unfit-pseudo.txt" "$WORK/i.sqfs" "$M"
mountpoint -q "$M" && fail "mounted although the pseudo file did not fit"
# Many definitions: the journal takes the entries they make in one batch,
# whose buffer was reserved 2 bytes short an entry (ASan saw the overflow
# at 1500 devices; a build without it corrupts its heap).
{
	echo 'dev d 755 0 0'
	for ((i = 1; i <= 3000; i++)); do echo "dev/c$i c 600 0 0 1 $((i % 256))"; done
} >"$WORK/many.pseudo"
if stage_mount "$WORK/many.sqfs" "$M" -o pseudo_file="$WORK/many.pseudo",comp=lz4; then
	n=$(find "$M/dev" -type c | wc -l)
	((n == 3000)) && ok "3000 pseudo devices in the mount" || fail "3000 pseudo devices: $n in the mount"
	"$SEAL" --quiet "$M" || fail "seal with 3000 pseudo devices"
	wait_daemon 0
	n=$(unsquashfs -lln "$WORK/many.sqfs" | grep -c '^c.* squashfs-root/dev/c[0-9]*$' || true)
	((n == 3000)) && ok "3000 pseudo devices in the image" || fail "3000 pseudo devices: $n in the image"
else
	fail "mount with 3000 pseudo devices: $(tail -n 5 "$WORK/daemon.log")"
fi

# IMAGE names up to 255 bytes: the spool directory beside it (".NAME.spool.
# XXXXXX") shortens NAME to fit; a longer one is refused as such.
long=$(printf 'l%.0s' $(seq 250)).sqfs
stage_mount "$WORK/$long" "$M" -o comp=lz4
echo long >"$M/f"
"$SEAL" --quiet "$M" && [[ $(unsquashfs -cat "$WORK/$long" f 2>&1) == long ]] &&
	ok "an IMAGE named with 255 bytes" || fail "an IMAGE named with 255 bytes"
wait_daemon 0
rm -f "$WORK/$long"
expect_exit 1 "IMAGE's name is longer than 255 bytes" "$STAGE" "$WORK/x$long" "$M"

# "--" ends the options, so a MOUNTPOINT may begin with "-" (our own -o
# options go before it)
mkdir -p "$WORK/-dash"
MOUNTS+=("$WORK/-dash")
if (cd "$WORK" && "$STAGE" -o comp=lz4 -- dash.sqfs -dash 2>"$WORK/err") &&
	echo dashed >"$WORK/-dash/f" && (cd "$WORK" && "$SEAL" --quiet -- -dash) &&
	[[ $(unsquashfs -cat "$WORK/dash.sqfs" f 2>&1) == dashed ]]; then
	ok "sqfs-stage -- IMAGE -MOUNTPOINT, sqfs-seal -- -MOUNTPOINT"
else
	fail "sqfs-stage -- IMAGE -MOUNTPOINT: $(cat "$WORK/err")"
fi

# --- the spool removed while mounted: said once, EIO for creates, the seal
# and the unmount fail saying so, IMAGE untouched ---
IMG=$WORK/gone.sqfs
echo old >"$IMG"
stage_mount "$IMG" "$M"
echo one >"$M/one"
rm -rf "$WORK"/.gone.sqfs.spool.*
# From the first create on: also the spool files made ahead went with it.
err=
for i in $(seq 1 100); do
	if ! (echo "$i" >"$M/g$i") 2>"$WORK/err"; then err=$(cat "$WORK/err"); break; fi
done
[[ $i == 1 && $err == *"Input/output error"* ]] && ok "the first create after the spool went: EIO" ||
	fail "creates after the spool went: $((i - 1)) succeeded, then '$err'"
expect_exit 1 "the spool .* was removed while mounted" "$SEAL" "$M"
fusermount3 -u "$M"
wait_daemon 1
[[ $(grep -c "was removed while mounted: the staged data is gone; creates fail" "$WORK/daemon.log") == 1 ]] &&
	grep -q "at unmount failed: the spool .* was removed while mounted.*left as it was" "$WORK/daemon.log" &&
	ok "the daemon logs the lost spool once, and at unmount" ||
	fail "lost spool not logged: $(tail -n 3 "$WORK/daemon.log")"
[[ $(cat "$IMG") == old ]] && ok "IMAGE left as it was" || fail "IMAGE changed"

# --- fusermount3 -u returns before the daemon has sealed: until it has, a new
# mount of the same IMAGE is refused (its image would be replaced by the
# older tree's), naming the daemon; once it has exited, the new mount works ---
IMG=$WORK/claim.sqfs
stage_mount "$IMG" "$M"
echo older >"$M/older"
OLD=$DPID
kill -STOP "$OLD"	# as if its seal took long
fusermount3 -u "$M"
expect_exit 1 "claim.sqfs: still being written by the sqfs-stage daemon (pid $OLD) of an unmounted mount" \
	"$STAGE" "$IMG" "$M"
mountpoint -q "$M" && fail "mounted over an image another daemon still writes"
kill -CONT "$OLD"
wait_daemon 0
stage_mount "$IMG" "$M"
echo newer >"$M/newer"
"$SEAL" --quiet "$M" || fail "seal after the older daemon exited"
wait_daemon 0
list=$(unsquashfs -l "$IMG" 2>&1 | grep -o 'squashfs-root/[a-z]*$' | tr '\n' ' ')
[[ $list == "squashfs-root/newer " ]] && ok "the image is the newer mount's" || fail "the image holds: $list"
# Daemonised (no -f), the pid named is the daemon's, not that of the
# process that started it and has exited since.
IMG=$WORK/claimd.sqfs
"$STAGE" -o mkfs_time=9 "$IMG" "$M" || fail "daemonised start (claim)"
MOUNTS+=("$M")
OLD=$(pgrep -n -f "sqfs-stage -o mkfs_time=9 $IMG" || true)
if [[ -z $OLD ]]; then
	fail "no daemonised sqfs-stage found"
else
	daemon_add "$OLD"
	echo older >"$M/older"
	kill -STOP "$OLD"
	fusermount3 -u "$M"
	expect_exit 1 "claimd.sqfs: still being written by the sqfs-stage daemon (pid $OLD) of an unmounted mount" \
		"$STAGE" "$IMG" "$M"
	kill -CONT "$OLD"
	for ((i = 0; i < 600; i++)); do daemon_alive "$OLD" || break; sleep 0.05; done
	daemon_alive "$OLD" && fail "the daemonised daemon did not exit after its unmount"
fi

# --- -s: seals run beside the one thread that serves requests --------------
# Served in that thread, a seal never saw a close still on its way when it
# began (the file counted as open, and the seal failed after 5 s), and a
# create waiting in the directory of an entry the seal made again hung the
# mount for good.
printf 'pd d 755 0 0\npd/node c 600 0 0 1 3\n' >"$WORK/single.pseudo"
M=$WORK/m-single
IMG=$WORK/single.sqfs
stage_mount "$IMG" "$M" -s -o "comp=xz:6,no_background,pseudo_file=$WORK/single.pseudo"
seal_waits_for_close "$M" "$IMG" "-s"
seal_during_create "$M" "-s"
fusermount3 -u "$M"
wait_daemon 0

# --- a signal to sqfs-seal cancels the seal ---------------------------------
# The kernel waits for the answer to an interrupted request without end:
# Ctrl-C, timeout(1) or kill -9 could not end sqfs-seal before the whole
# seal had run (or, with a file open for writing, waited 5 s for its close).
# The daemon now stops the seal at its next file, block or wait, IMAGE
# keeps its contents and the tree stays staged; a stop (SIGSTOP, or Ctrl-Z,
# which sqfs-seal ignores meanwhile) asks for the seal again.
M=$WORK/m-int
IMG=$WORK/int.sqfs
echo old >"$IMG"
stage_mount "$IMG" "$M" -o comp=xz:9:extreme,no_background,no_prepack
echo small >"$M/small"
: >"$WORK/int.err"
# seal_signal SIG DELAY: sqfs-seal --keep (SIGINT not ignored, as it is for
# a background job of a script), SIG after DELAY seconds; prints
# "<exit status> <milliseconds from the signal to the exit>".
seal_signal() {
	local pid t0 t1 rc=0
	env --default-signal=INT "$SEAL" --keep --quiet "$M" 2>>"$WORK/int.err" &
	pid=$!
	sleep "$2"
	t0=$(date +%s%N)
	kill -s "$1" "$pid" 2>/dev/null || true
	wait "$pid" || rc=$?
	t1=$(date +%s%N)
	echo "$rc $(((t1 - t0) / 1000000))"
}
# check_signal LABEL SIG DELAY MAX_MS
check_signal() {
	local rc=x ms=0 want=$((128 + $(kill -l "$2")))
	read -r rc ms < <(seal_signal "$2" "$3") || true
	if [[ $rc == "$want" ]] && ((ms <= $4)); then
		ok "$1: SIG$2 ends sqfs-seal $ms ms later (status $rc)"
	else
		fail "$1: SIG$2: sqfs-seal status $rc (want $want) $ms ms later (want at most $4)"
	fi
	[[ $(cat "$IMG") == old ]] && ok "$1: IMAGE as it was" || fail "$1: IMAGE changed"
	mountpoint -q "$M" && [[ $(cat "$M/small") == small ]] &&
		ok "$1: the tree stays staged" || fail "$1: the mount or its tree is gone"
}
# While the seal waits for a file open for writing (5 s, then it fails).
exec 7>"$M/held"
check_signal "waiting for a close" INT 0.5 1500
exec 7>&-
# While it compresses: 70 MB of text at xz -9e takes seconds of CPU.
seq 1 9000000 >"$M/big"
for sig in INT TERM KILL; do
	check_signal "compressing" $sig 1 5000
done
grep -q "interrupted (Interrupt): the seal was cancelled; the image is as it was" "$WORK/int.err" &&
	ok "sqfs-seal says the seal was cancelled" || fail "no message: $(cat "$WORK/int.err")"
leftover=$(ls -A "$WORK" | grep "int\.sqfs" | grep -v -x -e int.sqfs -e '\.int\.sqfs\.spool\..*' || true)
[[ -z $leftover ]] && ok "no temporary image left" || fail "left beside IMAGE: $leftover"
rm "$M/big" "$M/held"
head -c 3M /dev/urandom | base64 >"$M/mid"
"$SEAL" --keep --quiet "$M" &
pid=$!
sleep 0.3
kill -STOP "$pid" 2>/dev/null || true
sleep 1
kill -CONT "$pid" 2>/dev/null || true
rc=0
wait "$pid" || rc=$?
((rc == 0)) && ok "SIGSTOP and SIGCONT: the seal is asked again and done" || fail "after SIGSTOP: status $rc"
if loop_mount "$IMG" "$WORK/k-int"; then
	cmp -s "$M/mid" "$WORK/k-int/mid" && [[ $(cat "$WORK/k-int/small") == small ]] &&
		ok "the image after the signals holds the tree" || fail "the image after the signals differs"
	loop_umount "$WORK/k-int"
fi
fusermount3 -u "$M"
wait_daemon 0

finish
