/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Attributes: getattr, and setattr with what Linux clears from a file
 * written, truncated or chowned.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "stage/ops.h"

#define CAP_FOWNER_BIT 3	/* linux/capability.h */
#define CAP_FSETID_BIT 4

void stage_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stage *s = S(req);
	struct snode *n;
	struct stat st;

	(void)fi;
	lock(s);
	n = stage_get(s, ino);
	if (n) {
		stage_pt_sync(s, n);
		node_stat(n, &st);
	}
	unlock(s);
	if (!n)
		reply_err(req, ENOENT);
	else
		fuse_reply_attr(req, &st, STAGE_TIMEOUT);
}

static int truncate_node(struct stage *s, struct snode *n, off_t size,
			 struct fuse_file_info *fi)
{
	char name[STAGE_SPOOL_NAME_SIZE];
	struct stat st;
	int fd, own = 0, ret = 0;

	if (S_ISDIR(n->mode))
		return EISDIR;
	if (!S_ISREG(n->mode))
		return EINVAL;
	if (size < 0)
		return EINVAL;
	if ((uint64_t)size > s->file_max)
		return EFBIG;
	if (fi && fi->fh) {
		fd = ((struct fhandle *)(uintptr_t)fi->fh)->fd;
	} else {
		if (n->data_gone)
			return ENOENT;
		fd = openat(s->datafd, stage_spool_name(name, n->ino), O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return errno;
		own = 1;
	}
	if (ftruncate(fd, size))
		ret = errno;
	else if (!fstat(fd, &st))
		node_set_blocks(n, st.st_blocks);
	if (own)
		close(fd);
	if (ret)
		return ret;
	stage_bg_changed(s, n, n->size < (uint64_t)size ? n->size : (uint64_t)size,
			 UINT64_MAX);
	n->size = (uint64_t)size;
	touch(s, n, 1, 1);
	stage_bg_released(s, n);	/* truncate(2) has no release to follow */
	return 0;
}

/*
 * From /proc/PID/status of the caller of req: whether it is in group gid
 * (its own or a supplementary one) and whether CAP_FSETID and CAP_FOWNER
 * are in its effective set.  What cannot be read counts as neither.  Not
 * fuse_req_getgroups(): libfuse 3.14 searches its read buffer without
 * terminating it (ASan finds the overrun).
 */
static void caller_status(fuse_req_t req, gid_t gid, int *in_group, int *fsetid, int *fowner)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	char path[64], *line = NULL, *g;
	size_t cap = 0;
	FILE *f;

	*in_group = ctx->gid == gid;
	*fsetid = 0;
	*fowner = 0;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)ctx->pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (getline(&line, &cap, f) > 0) {
		if (!strncmp(line, "CapEff:", 7)) {
			unsigned long long eff = strtoull(line + 7, NULL, 16);

			*fsetid = !!(eff & (1ull << CAP_FSETID_BIT));
			*fowner = !!(eff & (1ull << CAP_FOWNER_BIT));
		}
		if (strncmp(line, "Groups:", 7))
			continue;
		for (g = line + 7; !*in_group;) {
			while (*g == ' ' || *g == '\t')
				g++;
			if (*g < '0' || *g > '9')
				break;	/* the line's end */
			*in_group = strtoul(g, &g, 10) == gid;
		}
	}
	free(line);
	fclose(f);
}

/*
 * 1 if the caller of req is in a chown system call (/proc/PID/syscall
 * names the call a thread is blocked in); 0 if not, or if that cannot be
 * read (another user's process, a kernel without the file).
 */
static int caller_in_chown(fuse_req_t req)
{
	static const long calls[] = {
#ifdef SYS_chown
		SYS_chown,
#endif
#ifdef SYS_lchown
		SYS_lchown,
#endif
#ifdef SYS_chown32
		SYS_chown32, SYS_lchown32, SYS_fchown32,
#endif
		SYS_fchown, SYS_fchownat,
	};
	char path[64], buf[32];
	ssize_t len;
	long nr;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)fuse_req_ctx(req)->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return 0;
	buf[len] = '\0';
	if (buf[0] < '0' || buf[0] > '9')	/* "running", "-1 ..." */
		return 0;
	nr = strtol(buf, NULL, 10);
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		if (nr == calls[i])
			return 1;
	return 0;
}

/*
 * What Linux does to a file written, truncated or chowned, which the kernel
 * leaves to us with HANDLE_KILLPRIV_V2 (passthrough.c).  A chown clears
 * setuid, and setgid if group-executable.  So does a write or truncate by a
 * caller without CAP_FSETID, which also clears setgid without group execute
 * if the caller is outside the file's group.  The kernel says which through
 * the setattr: FATTR_KILL_SUIDGID (libfuse's KILL_SUID bit) on a chown, or
 * on a truncate by a caller without CAP_FSETID; and a setattr that sets
 * nothing after a write, truncate or fallocate that has something to drop
 * (v2 strips the mode change it would send; without v2 it is sent when the
 * kernel's own reckoning, which knows no group rule, changed nothing).  From
 * a caller with CAP_FSETID that empty setattr is either a chown(-1, -1),
 * which clears as a chown does, or the end of a write that only dropped
 * security.capability: the kernel removed it just before, from the same
 * process, and the mode stays.  A chown(-1, -1) of a file with that xattr
 * looks the same, so the caller's system call decides.  A chown by a
 * caller without CAP_FSETID also clears setgid without group execute if
 * the caller is outside the file's group (the group before the chown).
 */
enum kill_why { KILL_CHOWN, KILL_UNPRIVILEGED, KILL_UNKNOWN };

/*
 * 0, or EPERM for a chown(-1, -1) that would drop a set-id bit of a file
 * the caller neither owns nor has CAP_FOWNER for: Linux makes that drop a
 * mode change, which only the owner may make (the kernel, which leaves
 * the drop to us, checks nothing for it).
 */
static int kill_privs(struct stage *s, struct snode *n, fuse_req_t req, enum kill_why why)
{
	int in_group = 1, fsetid = 0, fowner = 1, in_chown = -1, unknown = why == KILL_UNKNOWN;
	mode_t mode;

	if (S_ISDIR(n->mode))
		return 0;
	if (why == KILL_UNKNOWN || ((n->mode & S_ISGID) && !(n->mode & S_IXGRP)))
		caller_status(req, n->gid, &in_group, &fsetid, &fowner);
	if (why == KILL_UNPRIVILEGED)
		fsetid = 0;	/* the kernel's word for it */
	if (why == KILL_UNKNOWN && fsetid) {
		if (s->capdrop_ino == n->ino && s->capdrop_pid == fuse_req_ctx(req)->pid) {
			s->capdrop_ino = 0;
			if (!(in_chown = caller_in_chown(req)))
				return 0;
		}
		why = KILL_CHOWN;
	}
	mode = n->mode & ~(mode_t)S_ISUID;
	if ((n->mode & S_IXGRP) || (!in_group && !fsetid))
		mode &= ~(mode_t)S_ISGID;
	if (unknown && mode != n->mode && !fowner &&
	    fuse_req_ctx(req)->uid != n->uid &&
	    (in_chown < 0 ? caller_in_chown(req) : in_chown))
		return EPERM;
	n->mode = mode;
	if (!xattr_remove(n, XATTR_CAPS))
		stage_jnl_xattr(s, n, XATTR_CAPS, NULL, 0, 1);
	return 0;
}

void stage_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		      int to_set, struct fuse_file_info *fi)
{
	struct stage *s = S(req);
	struct timespec now;
	struct snode *n;
	struct stat st;
	uid_t uid;
	gid_t gid;
	int err = 0;

	clock_gettime(CLOCK_REALTIME, &now);
	lock(s);
	n = stage_get(s, ino);
	if (!n) {
		err = ENOENT;
		goto out;
	}
	stage_pt_sync(s, n);
	uid = to_set & FUSE_SET_ATTR_UID ? attr->st_uid : n->uid;
	gid = to_set & FUSE_SET_ATTR_GID ? attr->st_gid : n->gid;
	/* Before anything changes: a refused chown must change nothing. */
	if ((uid != n->uid || gid != n->gid) && (err = -stage_ids_check(s, n, uid, gid)))
		goto out;
	if (to_set & FUSE_SET_ATTR_SIZE) {
		err = truncate_node(s, n, attr->st_size, fi);
		if (err)
			goto out;
	}
	if (to_set & FUSE_SET_ATTR_KILL_SUID)
		(void)kill_privs(s, n, req, to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID) ?
				 KILL_CHOWN : KILL_UNPRIVILEGED);
	else if (!(to_set & ~FUSE_SET_ATTR_KILL_SGID) && (err = kill_privs(s, n, req, KILL_UNKNOWN)))
		goto out;
	if (to_set & FUSE_SET_ATTR_MODE)
		n->mode = (n->mode & S_IFMT) | (attr->st_mode & 07777);
	if ((uid != n->uid || gid != n->gid) && (err = -stage_node_set_owner(s, n, uid, gid))) {
		/* The size may have changed already: that much was done. */
		stage_jnl_node(s, n);
		s->gen++;
		goto out;
	}
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		n->atime = now;
	else if (to_set & FUSE_SET_ATTR_ATIME)
		n->atime = attr->st_atim;
	if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
		n->mtime = now;
		n->mtime_set = 0;
	} else if (to_set & FUSE_SET_ATTR_MTIME) {
		n->mtime = attr->st_mtim;
		/* A mapping may hold pages dirtied before: see data_changed(). */
		n->mtime_set = n->writers > 0;
	}
	if (to_set & FUSE_SET_ATTR_CTIME)
		n->ctime = attr->st_ctim;
	else
		n->ctime = now;
	stage_pt_settled(s, n);
	stage_jnl_node(s, n);
	s->gen++;
out:
	if (!err)
		node_stat(n, &st);
	unlock(s);
	if (err)
		reply_err(req, err);
	else
		fuse_reply_attr(req, &st, STAGE_TIMEOUT);
}
