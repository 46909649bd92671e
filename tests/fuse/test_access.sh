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
#   - with -o suid,dev both take effect;
#   - setuid, setgid and security.capability are dropped on write, truncate
#     and chown exactly as the kernel drops them on a local directory (the
#     oracle), with passthrough and without; the daemon does this itself
#     (status "killpriv": true) when the kernel offers HANDLE_KILLPRIV_V2.
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
# Others may read the status, not seal: that freezes the tree and writes IMAGE.
expect_allowed "nobody: read the status" getfattr --only-values -n user.sqfs-stage.status "$M"
expect_denied "nobody: seal" "$SEAL" --keep "$M"
[[ ! -e $WORK/b.sqfs ]] && ok "nobody's seal wrote no image" || fail "nobody's seal wrote the image"
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

# --- 4: privileges dropped as the kernel drops them ---------------------------
# A v2 capability blob for cap_net_raw (bit 13): magic 0x02000001, then
# permitted and inheritable for both halves.
CAP=0x0100000200200000000000000000000000000000
# privs DIR: each case's mode (and capability presence) after the change.
privs() {
	local d=$1
	# mk NAME MODE: a file of nobody's with MODE.
	mk() { rm -f "$d/$1"; printf data >"$d/$1"; chown "$NOBODY:$NOGROUP" "$d/$1"; chmod "$2" "$d/$1"; }
	res() { printf '%s %s\n' "$1" "$(stat -c %a "$d/$1")"; }
	cap() { if getfattr -n security.capability "$d/$1" >/dev/null 2>&1; then echo "$1 cap"; else echo "$1 nocap"; fi; }
	mk w_suid 4777; as_nobody sh -c "echo x >>'$d/w_suid'"; res w_suid
	mk w_sgid 2777; as_nobody sh -c "echo x >>'$d/w_sgid'"; res w_sgid
	mk w_sgid_nx 2767; as_nobody sh -c "echo x >>'$d/w_sgid_nx'"; res w_sgid_nx
	# nobody outside the file's group: Linux drops setgid without group execute
	mk w_sgid_nx_other 2766; chgrp 0 "$d/w_sgid_nx_other"; chmod 2766 "$d/w_sgid_nx_other"
	as_nobody sh -c "echo x >>'$d/w_sgid_nx_other'"; res w_sgid_nx_other
	mk t_sgid_nx_other 2766; chgrp 0 "$d/t_sgid_nx_other"; chmod 2766 "$d/t_sgid_nx_other"
	as_nobody truncate -s 1 "$d/t_sgid_nx_other"; res t_sgid_nx_other
	mk c_sgid_nx 2745; chown 1:1 "$d/c_sgid_nx"; res c_sgid_nx
	mk root_w 6777; echo x >>"$d/root_w"; res root_w
	mk trunc 6777; as_nobody truncate -s 1 "$d/trunc"; res trunc
	mk root_trunc 6777; truncate -s 1 "$d/root_trunc"; res root_trunc
	mk chown 6755; chown 1:1 "$d/chown"; res chown
	mk chown_same 6755; python3 -c 'import os,sys; os.chown(sys.argv[1], -1, -1)' "$d/chown_same"; res chown_same
	mk chmod_w 0777
	as_nobody python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
os.write(fd, b"a"); os.fchmod(fd, 0o4777); os.write(fd, b"b"); os.close(fd)' "$d/chmod_w"
	res chmod_w
	mkdir -p "$d/dir"; chmod 2775 "$d/dir"; chown 1:1 "$d/dir"; res dir
	mk cap_w 0777; setfattr -n security.capability -v "$CAP" "$d/cap_w"; cap cap_w
	as_nobody sh -c "echo x >>'$d/cap_w'"; cap cap_w
	mk cap_root 0755; setfattr -n security.capability -v "$CAP" "$d/cap_root"
	echo x >>"$d/cap_root"; cap cap_root
	mk cap_chown 0755; setfattr -n security.capability -v "$CAP" "$d/cap_chown"
	chown 2:2 "$d/cap_chown"; cap cap_chown
	mk cap_suid_root 4755; setfattr -n security.capability -v "$CAP" "$d/cap_suid_root"
	echo x >>"$d/cap_suid_root"; cap cap_suid_root; res cap_suid_root
	mk cap_kept 0755; setfattr -n security.capability -v "$CAP" "$d/cap_kept"
	chmod 0750 "$d/cap_kept"; cap cap_kept
	# root's chown(-1, -1) of a setuid file with a capability: both go (the
	# same requests as a write that drops only the capability)
	mk cap_chown_same 4755; setfattr -n security.capability -v "$CAP" "$d/cap_chown_same"
	chown : "$d/cap_chown_same"; cap cap_chown_same; res cap_chown_same
	mk cap_suid_dd 4755; setfattr -n security.capability -v "$CAP" "$d/cap_suid_dd"
	echo x | dd of="$d/cap_suid_dd" conv=notrunc status=none; cap cap_suid_dd; res cap_suid_dd
	# a chown by an owner outside the file's group drops setgid without
	# group execute too
	mk c_sgid_nx_other 2745; chgrp 0 "$d/c_sgid_nx_other"; chmod 2745 "$d/c_sgid_nx_other"
	as_nobody chown "$NOBODY" "$d/c_sgid_nx_other"; res c_sgid_nx_other
	# a chown(-1, -1) of root's file by nobody: dropping a set-id bit is a
	# mode change, which only the owner may make (EPERM, the bits stay);
	# with no bit to drop it changes nothing and succeeds
	chown_same() {
		as_nobody python3 -c '
import os, sys
try:
    os.chown(sys.argv[1], -1, -1); print(sys.argv[2], "ok")
except OSError as e:
    print(sys.argv[2], os.strerror(e.errno))' "$d/$1" "$1"
	}
	mk cs_suid 0755; chown 0:0 "$d/cs_suid"; chmod 4755 "$d/cs_suid"; chown_same cs_suid; res cs_suid
	mk cs_sgid_nx 0745; chown 0:0 "$d/cs_sgid_nx"; chmod 2745 "$d/cs_sgid_nx"
	chown_same cs_sgid_nx; res cs_sgid_nx
	mk cs_plain 0755; chown 0:0 "$d/cs_plain"; chown_same cs_plain; res cs_plain
}
need_cmd setfattr getfattr truncate python3
REF=$WORK/ref
mkdir -m 0777 "$REF"
privs "$REF" >"$WORK/privs.ref"
# The oracle itself must show the rules, or the comparison proves nothing.
for want in "w_suid 777" "w_sgid 777" "w_sgid_nx 2767" "w_sgid_nx_other 766" "root_w 6777" "trunc 777" \
	"chown 755" "chmod_w 777" "dir 2775" "cap_w cap" "cap_w nocap" "cap_kept cap" \
	"cap_suid_root nocap" "cap_suid_root 4755" "cap_chown_same nocap" "cap_chown_same 755" \
	"cap_suid_dd 4755" "c_sgid_nx_other 745" "cs_suid Operation not permitted" "cs_suid 4755" \
	"cs_sgid_nx Operation not permitted" "cs_sgid_nx 2745" "cs_plain ok" "cs_plain 755"; do
	grep -qx "$want" "$WORK/privs.ref" || fail "the kernel's own rule: no '$want' in $(tr '\n' ' ' <"$WORK/privs.ref")"
done
for mopt in allow_other allow_other,no_passthrough; do
	M=$WORK/m4-${mopt//,/-}
	stage_mount "$WORK/d.sqfs" "$M" -o "$mopt"
	chmod 0777 "$M"
	privs "$M" >"$WORK/privs.out"
	if diff -u "$WORK/privs.ref" "$WORK/privs.out" >"$WORK/privs.diff"; then
		ok "$mopt: privileges dropped as on a local directory ($(wc -l <"$WORK/privs.ref") cases)"
	else
		fail "$mopt: privileges differ from the kernel's: $(cat "$WORK/privs.diff")"
	fi
	st=$(getfattr --absolute-names --only-values -n user.sqfs-stage.status "$M")
	if [[ $st == *'"killpriv": true'* ]]; then
		ok "$mopt: the daemon handles the privilege drops (killpriv)"
	elif [[ ${CI:-} == true ]]; then
		fail "$mopt: status says killpriv is off: $st"
	else
		log "note: killpriv is off here (kernel older than 5.11?): $st"
	fi
	"$SEAL" --quiet "$M" || fail "seal of the $mopt mount"
	wait_daemon 0
done
if need_loop && loop_mount "$WORK/d.sqfs" "$WORK/kd"; then
	[[ $(stat -c %a "$WORK/kd/w_suid"):$(stat -c %a "$WORK/kd/chmod_w") == 777:777 ]] &&
		ok "image has the dropped bits" ||
		fail "image modes: w_suid $(stat -c %a "$WORK/kd/w_suid"), chmod_w $(stat -c %a "$WORK/kd/chmod_w")"
	[[ $(stat -c %a "$WORK/kd/root_w") == 6777 ]] && ok "image keeps root's setuid write" ||
		fail "image root_w: $(stat -c %a "$WORK/kd/root_w")"
	loop_umount "$WORK/kd"
fi

finish
