#!/bin/bash
# test_access.sh SQFS_STAGE SQFS_SEAL SQFS_PACK
#
# Who may use a mount, and what staged metadata may do:
#   - by default only the mounting user gets in: another user's ls fails
#     with EACCES (the kernel refuses before the daemon hears of it);
#   - with -o allow_other, other users are checked against the staged
#     owners and modes (default_permissions): read 0644, not 0600, no create
#     in a 0755 root directory, create in a 0777 one, no chown;
#   - a mount is nosuid,nodev by default: a staged setuid binary runs with
#     the caller's euid, a staged /dev/null replica does not open (EACCES);
#   - with -o suid,dev both take effect.
set -euo pipefail
# shellcheck source=tests/fuse/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "$@"
need_cmd setpriv findmnt
id nobody >/dev/null 2>&1 || skip_or_fail "no user 'nobody'"
NOBODY=$(id -u nobody)
NOGROUP=$(id -g nobody)
# The other user must be able to walk down to the mountpoints.
chmod 755 "$WORK"

# as_nobody CMD...: run CMD as nobody with no supplementary groups.
as_nobody() {
	setpriv --reuid="$NOBODY" --regid="$NOGROUP" --clear-groups -- "$@"
}

# expect_denied LABEL CMD...: CMD (as nobody) fails with EACCES or EPERM.
expect_denied() {
	local label=$1 rc=0
	shift
	as_nobody "$@" >/dev/null 2>"$WORK/err" || rc=$?
	if [[ $rc -eq 0 ]]; then
		fail "$label: allowed"
	elif grep -Eq "Permission denied|Operation not permitted" "$WORK/err"; then
		ok "$label: $(head -n1 "$WORK/err")"
	else
		fail "$label: failed otherwise: $(cat "$WORK/err")"
	fi
}

expect_allowed() {
	local label=$1
	shift
	if as_nobody "$@" >"$WORK/out" 2>"$WORK/err"; then
		ok "$label"
	else
		fail "$label: $(cat "$WORK/err")"
	fi
}

# stage_tree MNT: the objects every part below looks at.
stage_tree() {
	local m=$1
	echo public >"$m/public"
	chmod 0644 "$m/public"
	echo secret >"$m/secret"
	chmod 0600 "$m/secret"
	mkdir -m 0755 "$m/closed"
	mkdir -m 0777 "$m/open"
	# A setuid copy of id(1) owned by a uid that is neither ours nor nobody's.
	cp /usr/bin/id "$m/suid-id"
	chown 4321:4321 "$m/suid-id"
	chmod 4755 "$m/suid-id"
	mknod "$m/null" c 1 3
	chmod 0666 "$m/null"
}

# --- 1: default: only the mounting user ------------------------------------
M=$WORK/m1
stage_mount "$WORK/a.sqfs" "$M"
stage_tree "$M"
opts=$(findmnt -no OPTIONS "$M")
for o in nosuid nodev; do
	if [[ ,$opts, == *,$o,* ]]; then ok "default mount is $o ($opts)"; else fail "default mount lacks $o: $opts"; fi
done
expect_denied "nobody: ls of a default mount" ls "$M"
expect_denied "nobody: stat of a default mount's file" stat "$M/public"
# root (the mounting user) reads everything, the device stays inert.
[[ $(cat "$M/secret") == secret ]] && ok "owner reads 0600 file" || fail "owner cannot read"
if err=$(cat "$M/null" 2>&1); then
	fail "device node opened on a nodev mount"
elif [[ $err == *"Permission denied"* ]]; then
	ok "device node inert (nodev): $err"
else
	fail "device node: unexpected error: $err"
fi
"$SEAL" --quiet "$M" || fail "seal of the default mount"
wait_daemon 0

# --- 2: allow_other: the staged metadata decides ------------------------------
M=$WORK/m2
stage_mount "$WORK/b.sqfs" "$M" -o allow_other
stage_tree "$M"
opts=$(findmnt -no OPTIONS "$M")
[[ ,$opts, == *,nosuid,* && ,$opts, == *,nodev,* ]] && ok "allow_other mount is nosuid,nodev" ||
	fail "allow_other mount options: $opts"
expect_allowed "nobody: ls" ls "$M"
expect_allowed "nobody: read 0644 file" cat "$M/public"
[[ $(cat "$WORK/out") == public ]] || fail "nobody read the wrong bytes: $(cat "$WORK/out")"
expect_denied "nobody: read 0600 root file" cat "$M/secret"
expect_denied "nobody: write 0644 root file" sh -c "echo x >>'$M/public'"
expect_denied "nobody: create in 0755 root dir" touch "$M/closed/f"
expect_denied "nobody: mkdir in 0755 root dir" mkdir "$M/closed/d"
expect_denied "nobody: unlink in 0755 root dir" rm -f "$M/public"
expect_allowed "nobody: create in 0777 dir" sh -c "echo mine >'$M/open/f'"
if [[ $(stat -c %u:%g "$M/open/f") == "$NOBODY:$NOGROUP" ]]; then
	ok "nobody's file is owned by nobody"
else
	fail "nobody's file owned by $(stat -c %u:%g "$M/open/f")"
fi
expect_denied "nobody: chown of own file to root" chown 0 "$M/open/f"
expect_denied "nobody: chown of root's file" chown "$NOBODY" "$M/public"
expect_denied "nobody: chmod of root's file" chmod 0666 "$M/public"
# nosuid: the setuid bit is staged (and sealed) but does not act here.
expect_allowed "nobody: run staged setuid id" "$M/suid-id" -u
[[ $(cat "$WORK/out") == "$NOBODY" ]] && ok "nosuid: euid stays $NOBODY" ||
	fail "nosuid mount ran setuid: euid $(cat "$WORK/out")"
[[ $(stat -c %a "$M/suid-id") == 4755 ]] && ok "setuid bit still staged" ||
	fail "setuid bit lost: $(stat -c %a "$M/suid-id")"
if err=$(cat "$M/null" 2>&1); then
	fail "device node opened on a nodev allow_other mount"
else
	[[ $err == *"Permission denied"* ]] && ok "device inert with allow_other" || fail "device: $err"
fi
"$SEAL" --quiet "$M" || fail "seal of the allow_other mount"
wait_daemon 0
if need_loop && loop_mount "$WORK/b.sqfs" "$WORK/kb"; then
	[[ $(stat -c %a:%u "$WORK/kb/suid-id") == 4755:4321 ]] && ok "image keeps setuid and owner" ||
		fail "image suid-id: $(stat -c %a:%u "$WORK/kb/suid-id")"
	[[ $(stat -c %u "$WORK/kb/open/f") == "$NOBODY" ]] && ok "image keeps nobody's file" ||
		fail "image open/f owner: $(stat -c %u "$WORK/kb/open/f")"
	[[ $(stat -c %t:%T "$WORK/kb/null") == 1:3 ]] && ok "image keeps the device" ||
		fail "image null: $(stat -c %t:%T "$WORK/kb/null")"
	loop_umount "$WORK/kb"
fi

# --- 3: -o suid,dev (root only) ---------------------------------------------
M=$WORK/m3
stage_mount "$WORK/c.sqfs" "$M" -o allow_other,suid,dev
stage_tree "$M"
opts=$(findmnt -no OPTIONS "$M")
[[ ,$opts, != *,nosuid,* && ,$opts, != *,nodev,* ]] && ok "suid,dev mount: $opts" ||
	fail "suid,dev mount options: $opts"
expect_allowed "nobody: run staged setuid id (suid mount)" "$M/suid-id" -u
[[ $(cat "$WORK/out") == 4321 ]] && ok "suid: euid becomes 4321" ||
	fail "suid mount: euid $(cat "$WORK/out")"
if out=$(head -c 4 "$M/null" | wc -c) && [[ $out == 0 ]] && echo x >"$M/null"; then
	ok "device node works on a dev mount"
else
	fail "device node on a dev mount: $out"
fi
"$SEAL" --quiet "$M" || fail "seal of the suid,dev mount"
wait_daemon 0

finish
