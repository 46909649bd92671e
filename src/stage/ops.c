/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The FUSE low-level operations over the staged tree. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <syslog.h>
#include <unistd.h>

#include "stage/stage.h"
#include "sqw/tree.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

struct fhandle {
	int fd;
	int writer;
	struct snode *n;
};

void stage_log(const struct stage *s, int prio, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (s->foreground) {
		fprintf(stderr, "sqfs-stage: ");
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	} else {
		vsyslog(prio, fmt, ap);
	}
	va_end(ap);
}

int stage_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = -pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

static struct stage *S(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void lock(struct stage *s)
{
	pthread_mutex_lock(&s->lock);
}

/* Dropping the lock ends an operation: its journal batch goes out. */
static void unlock(struct stage *s)
{
	stage_jnl_flush(s);
	pthread_mutex_unlock(&s->lock);
}

/* Changes to the tree, as the journal must hear of them. */
static void touch(struct stage *s, struct snode *n, int mtime, int ctime)
{
	node_touch(n, mtime, ctime);
	stage_jnl_node(s, n);
}

static int sdir_add(struct stage *s, struct snode *dir, const char *name, size_t len,
		    struct snode *n)
{
	int ret = dir_add(s, dir, name, len, n);

	if (!ret)
		stage_jnl_dirent(s, dir, name, len, n);
	return ret;
}

static void sdir_del(struct stage *s, struct snode *dir, const char *name, size_t len)
{
	dir_del(s, dir, name, len);
	stage_jnl_dirent(s, dir, name, len, NULL);
}

static void fill_entry(struct fuse_entry_param *e, struct snode *n)
{
	memset(e, 0, sizeof(*e));
	e->ino = n->ino;
	e->generation = 1;
	e->attr_timeout = STAGE_TIMEOUT;
	e->entry_timeout = STAGE_TIMEOUT;
	node_stat(n, &e->attr);
}

#define XATTR_CAPS "security.capability"
#define CAP_FSETID_BIT 4	/* linux/capability.h */

/* The directory ino, or an errno. */
static int get_dir(struct stage *s, fuse_ino_t ino, const char *name,
		   struct snode **dir)
{
	*dir = stage_get(s, ino);
	if (!*dir)
		return ENOENT;
	if (!S_ISDIR((*dir)->mode))
		return ENOTDIR;
	if (name && strlen(name) > STAGE_NAME_MAX)
		return ENAMETOOLONG;
	if (name && !(*dir)->links)
		return ENOENT;	/* removed directory */
	return 0;
}

/* The entry NAME of directory PARENT, for the calls that remove it. */
static int get_child(struct stage *s, fuse_ino_t parent, const char *name,
		     struct snode **dir, struct snode **child)
{
	struct sdirent *d;
	int err = get_dir(s, parent, name, dir);

	if (err)
		return err;
	d = dir_find(*dir, name, strlen(name));
	if (!d)
		return ENOENT;
	*child = d->node;
	return 0;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct stage *s = userdata;
	int ret;

	conn->max_write = STAGE_IO_SIZE;
	conn->time_gran = 1;
	/*
	 * With passthrough, writes rarely come here, and a spliced request
	 * would pass our hook by; with rings, requests come through them.
	 */
	if ((conn->capable & FUSE_CAP_SPLICE_READ) && !stage_pt_wanted(s) &&
	    !stage_pt_ring_wanted(s))
		conn->want |= FUSE_CAP_SPLICE_READ;
	conn->want &= ~FUSE_CAP_POSIX_ACL;
	/*
	 * A symlink's target never changes, so the kernel may keep it: a
	 * merged-/usr root resolves /lib and /bin on most path lookups, and
	 * debootstrap made 19 000 READLINK round trips without it.
	 */
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	/*
	 * Without atomic O_TRUNC the kernel truncates with setattr(size=0)
	 * before the open, which updates mtime and ctime as POSIX wants even
	 * for an empty file, and the background work hears of the truncation.
	 */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	stage_log(s, LOG_INFO, "staging %s in %s; if this daemon dies, remount the tree "
		  "with: sqfs-stage --recover %s IMAGE MOUNTPOINT", s->image, s->spool, s->spool);
	/* Here, after daemonising: the thread must live in the daemon. */
	if (!s->no_background && (ret = stage_bg_start(s)))
		stage_log(s, LOG_WARNING,
			  "background compression is off (%s); the seal will do all of it",
			  strerror(-ret));
	/* A recovered tree: its files are closed already. */
	lock(s);
	stage_bg_queue_all(s);
	unlock(s);
	ret = stage_spare_start(s);
	if (ret)
		stage_log(s, LOG_WARNING, "no spool files made ahead (%s)", strerror(-ret));
	/* Without it, fsync flushes one thing after the other. */
	(void)stage_syncer_start(s);
}

static void op_destroy(void *userdata)
{
	struct stage *s = userdata;
	char *msg = NULL;
	int ret = 0;

	/* Before anything removes the spool, and the seal needs no spares. */
	stage_spare_stop(s);
	stage_syncer_stop(s);
	lock(s);
	if (s->gen != s->sealed_gen) {
		ret = stage_seal(s, &msg);
		if (ret) {
			stage_log(s, LOG_ERR,
				  "sealing %s at unmount failed: %s; the staged tree is kept in %s: "
				  "fix the cause, then 'sqfs-stage --recover %s %s MOUNTPOINT' and "
				  "'sqfs-seal MOUNTPOINT'",
				  s->image, msg ? msg : "out of memory", s->spool, s->spool, s->image);
		} else {
			stage_log(s, LOG_INFO, "sealed %s at unmount: %s", s->image, msg);
		}
	}
	unlock(s);
	/* After the seal, which takes the blocks stored so far. */
	stage_bg_stop(s);
	lock(s);
	if (!ret) {
		stage_remove_spool(s);
		s->final_status = 0;
	} else {
		s->final_status = 1;
	}
	free(msg);
	unlock(s);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct stage *s = S(req);
	struct fuse_entry_param e;
	struct snode *dir;
	struct sdirent *d;
	int err;

	lock(s);
	err = get_dir(s, parent, name, &dir);
	if (err) {
		unlock(s);
		fuse_reply_err(req, err);
		return;
	}
	d = dir_find(dir, name, strlen(name));
	if (!d) {
		memset(&e, 0, sizeof(e));
		e.entry_timeout = STAGE_TIMEOUT;	/* negative entry */
	} else {
		d->node->nlookup++;
		fill_entry(&e, d->node);
	}
	unlock(s);
	fuse_reply_entry(req, &e);
}

static void do_forget(struct stage *s, fuse_ino_t ino, uint64_t nlookup)
{
	struct snode *n = stage_get(s, ino);

	if (!n)
		return;
	n->nlookup = n->nlookup > nlookup ? n->nlookup - nlookup : 0;
	stage_maybe_free(s, n);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct stage *s = S(req);

	lock(s);
	do_forget(s, ino, nlookup);
	unlock(s);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct stage *s = S(req);
	size_t i;

	lock(s);
	for (i = 0; i < count; i++)
		do_forget(s, forgets[i].ino, forgets[i].nlookup);
	unlock(s);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
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
		fuse_reply_err(req, ENOENT);
	else
		fuse_reply_attr(req, &st, STAGE_TIMEOUT);
}

static int truncate_node(struct stage *s, struct snode *n, off_t size,
			 struct fuse_file_info *fi)
{
	char name[32];
	int fd, ret = 0;

	if (S_ISDIR(n->mode))
		return EISDIR;
	if (!S_ISREG(n->mode))
		return EINVAL;
	if (size < 0)
		return EINVAL;
	if ((uint64_t)size > s->file_max)
		return EFBIG;
	if (fi && fi->fh) {
		if (ftruncate(((struct fhandle *)(uintptr_t)fi->fh)->fd, size))
			return errno;
	} else {
		if (!n->links)
			return ENOENT;
		snprintf(name, sizeof(name), "%llu", (unsigned long long)n->ino);
		fd = openat(s->datafd, name, O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return errno;
		if (ftruncate(fd, size))
			ret = errno;
		close(fd);
		if (ret)
			return ret;
	}
	stage_bg_changed(s, n, n->size < (uint64_t)size ? n->size : (uint64_t)size,
			 UINT64_MAX);
	n->size = (uint64_t)size;
	touch(s, n, 1, 1);
	stage_bg_released(s, n);	/* truncate(2) has no release to follow */
	return 0;
}

/*
 * From /proc/PID/status of the caller of req: whether it is in group gid
 * (its own or a supplementary one) and whether CAP_FSETID is in its
 * effective set.  What cannot be read counts as neither.  Not
 * fuse_req_getgroups(): libfuse 3.14 searches its read buffer without
 * terminating it (ASan finds the overrun).
 */
static void caller_status(fuse_req_t req, gid_t gid, int *in_group, int *fsetid)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	char path[64], *line = NULL, *g;
	size_t cap = 0;
	FILE *f;

	*in_group = ctx->gid == gid;
	*fsetid = 0;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)ctx->pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (getline(&line, &cap, f) > 0) {
		if (!strncmp(line, "CapEff:", 7))
			*fsetid = !!(strtoull(line + 7, NULL, 16) & (1ull << CAP_FSETID_BIT));
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
 * process, and the mode stays.
 */
enum kill_why { KILL_CHOWN, KILL_UNPRIVILEGED, KILL_UNKNOWN };

static void kill_privs(struct stage *s, struct snode *n, fuse_req_t req, enum kill_why why)
{
	int in_group = 1, fsetid = 0;

	if (S_ISDIR(n->mode))
		return;
	if (why == KILL_UNKNOWN || (why == KILL_UNPRIVILEGED && (n->mode & S_ISGID) &&
				     !(n->mode & S_IXGRP)))
		caller_status(req, n->gid, &in_group, &fsetid);
	if (why == KILL_UNKNOWN && fsetid) {
		if (s->capdrop_ino == n->ino && s->capdrop_pid == fuse_req_ctx(req)->pid) {
			s->capdrop_ino = 0;
			return;
		}
		why = KILL_CHOWN;
	}
	n->mode &= ~(mode_t)S_ISUID;
	if ((n->mode & S_IXGRP) || (why != KILL_CHOWN && !in_group))
		n->mode &= ~(mode_t)S_ISGID;
	if (!xattr_remove(n, XATTR_CAPS))
		stage_jnl_xattr(s, n, XATTR_CAPS, NULL, 0, 1);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
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
		kill_privs(s, n, req, to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID) ?
			   KILL_CHOWN : KILL_UNPRIVILEGED);
	else if (!(to_set & ~FUSE_SET_ATTR_KILL_SGID))
		kill_privs(s, n, req, KILL_UNKNOWN);
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
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		n->mtime = now;
	else if (to_set & FUSE_SET_ATTR_MTIME)
		n->mtime = attr->st_mtim;
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
		fuse_reply_err(req, err);
	else
		fuse_reply_attr(req, &st, STAGE_TIMEOUT);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct stage *s = S(req);
	struct snode *n;
	char *t = NULL;

	lock(s);
	n = stage_get(s, ino);
	if (n && S_ISLNK(n->mode))
		t = strdup(n->target);
	unlock(s);
	if (!n || !t)
		fuse_reply_err(req, !n ? ENOENT : S_ISLNK(n->mode) ? ENOMEM : EINVAL);
	else
		fuse_reply_readlink(req, t);
	free(t);
}

/*
 * Create a node named name in parent; with fdp, a regular file's spool file
 * stays open in *fdp.  Called with the lock held; returns 0 or an errno.
 */
static int make_node(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev, const char *target,
		     struct fuse_entry_param *e, int *fdp)
{
	struct stage *s = S(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct snode *dir, *n;
	gid_t gid = ctx->gid;
	char sname[32];
	int err, fd = -1;

	err = get_dir(s, parent, name, &dir);
	if (err)
		return err;
	if (dir_find(dir, name, strlen(name)))
		return EEXIST;
	if (target && strlen(target) > SQW_SYMLINK_MAX)
		return ENAMETOOLONG;
	if (dir->mode & S_ISGID) {
		gid = dir->gid;
		if (S_ISDIR(mode))
			mode |= S_ISGID;
	}
	err = -stage_ids_check(s, NULL, ctx->uid, gid);
	if (err)
		return err;
	n = stage_new_node(s, mode, ctx->uid, gid, rdev);
	if (!n)
		return ENOMEM;
	if (target) {
		n->target = strdup(target);
		if (!n->target)
			goto nomem;
	}
	if (S_ISREG(mode)) {
		snprintf(sname, sizeof(sname), "%llu", (unsigned long long)n->ino);
		fd = stage_spare_take(s, n->ino);
		if (fd < 0)
			fd = openat(s->datafd, sname, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
		if (fd < 0) {
			err = errno;
			stage_maybe_free(s, n);
			return err;
		}
	}
	if (sdir_add(s, dir, name, strlen(name), n)) {
		if (fd >= 0) {
			close(fd);
			unlinkat(s->datafd, sname, 0);
		}
		goto nomem;
	}
	if (fdp)
		*fdp = fd;
	else if (fd >= 0)
		close(fd);
	touch(s, dir, 1, 1);
	stage_jnl_node(s, n);
	n->nlookup++;
	s->gen++;
	fill_entry(e, n);
	return 0;
nomem:
	stage_maybe_free(s, n);
	return ENOMEM;
}

static void reply_made(fuse_req_t req, int err, struct fuse_entry_param *e)
{
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_entry(req, e);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	struct stage *s = S(req);
	struct fuse_entry_param e;
	int err;

	switch (mode & S_IFMT) {
	case S_IFREG: case S_IFCHR: case S_IFBLK: case S_IFIFO: case S_IFSOCK:
		break;
	default:
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (!S_ISCHR(mode) && !S_ISBLK(mode))
		rdev = 0;
	lock(s);
	err = make_node(req, parent, name, mode, rdev, NULL, &e, NULL);
	unlock(s);
	reply_made(req, err, &e);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	struct stage *s = S(req);
	struct fuse_entry_param e;
	int err;

	lock(s);
	err = make_node(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL, &e, NULL);
	unlock(s);
	reply_made(req, err, &e);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	struct stage *s = S(req);
	struct fuse_entry_param e;
	int err;

	lock(s);
	err = make_node(req, parent, name, S_IFLNK | 0777, 0, link, &e, NULL);
	unlock(s);
	reply_made(req, err, &e);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct stage *s = S(req);
	struct snode *dir, *n;
	int err;

	lock(s);
	err = get_child(s, parent, name, &dir, &n);
	if (err)
		goto out;
	if (S_ISDIR(n->mode)) {
		err = EISDIR;
		goto out;
	}
	sdir_del(s, dir, name, strlen(name));
	node_unlinked(s, n);
	stage_jnl_node(s, n);
	touch(s, dir, 1, 1);
	stage_maybe_free(s, n);
	s->gen++;
out:
	unlock(s);
	fuse_reply_err(req, err);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct stage *s = S(req);
	struct snode *dir, *n;
	int err;

	lock(s);
	err = get_child(s, parent, name, &dir, &n);
	if (err)
		goto out;
	if (!S_ISDIR(n->mode)) {
		err = ENOTDIR;
		goto out;
	}
	if (n->nents) {
		err = ENOTEMPTY;
		goto out;
	}
	sdir_del(s, dir, name, strlen(name));
	n->links = 0;
	touch(s, n, 0, 1);
	touch(s, dir, 1, 1);
	stage_maybe_free(s, n);
	s->gen++;
out:
	unlock(s);
	fuse_reply_err(req, err);
}

/* Is a the directory d or one of its ancestors? */
static int is_ancestor(const struct snode *a, const struct snode *d)
{
	for (;;) {
		if (d == a)
			return 1;
		if (!d->parent || d->parent == d)
			return 0;
		d = d->parent;
	}
}

static int do_rename(struct stage *s, fuse_ino_t parent, const char *name,
		     fuse_ino_t newparent, const char *newname, unsigned flags)
{
	struct snode *sd, *dd, *n, *victim;
	struct sdirent *src, *dst;
	size_t len = strlen(name), newlen = strlen(newname);
	int err;

	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return EINVAL;
	if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE))
		return EINVAL;
	err = get_dir(s, parent, name, &sd);
	if (!err)
		err = get_dir(s, newparent, newname, &dd);
	if (err)
		return err;
	src = dir_find(sd, name, len);
	if (!src)
		return ENOENT;
	n = src->node;
	dst = dir_find(dd, newname, newlen);
	if (flags & RENAME_EXCHANGE) {
		struct snode *m;
		int ndir, mdir;

		if (!dst)
			return ENOENT;
		m = dst->node;
		if (m == n)
			return 0;
		ndir = S_ISDIR(n->mode);
		mdir = S_ISDIR(m->mode);
		if ((ndir && is_ancestor(n, dd)) || (mdir && is_ancestor(m, sd)))
			return EINVAL;
		src->node = m;
		dst->node = n;
		stage_jnl_dirent(s, sd, name, len, m);
		stage_jnl_dirent(s, dd, newname, newlen, n);
		if (mdir)
			m->parent = sd;
		if (ndir)
			n->parent = dd;
		sd->nsubdirs = sd->nsubdirs + (size_t)mdir - (size_t)ndir;
		dd->nsubdirs = dd->nsubdirs + (size_t)ndir - (size_t)mdir;
		touch(s, n, 0, 1);
		touch(s, m, 0, 1);
		touch(s, sd, 1, 1);
		touch(s, dd, 1, 1);
		return 0;
	}
	victim = dst ? dst->node : NULL;
	if (victim == n)
		return 0;	/* two names of one file: POSIX says do nothing */
	if (victim && (flags & RENAME_NOREPLACE))
		return EEXIST;
	if (S_ISDIR(n->mode)) {
		if (is_ancestor(n, dd))
			return EINVAL;
		if (victim && !S_ISDIR(victim->mode))
			return ENOTDIR;
		if (victim && victim->nents)
			return ENOTEMPTY;
	} else if (victim && S_ISDIR(victim->mode)) {
		return EISDIR;
	}
	if (victim) {
		sdir_del(s, dd, newname, newlen);
		if (S_ISDIR(victim->mode)) {
			victim->links = 0;
			touch(s, victim, 0, 1);
		} else {
			node_unlinked(s, victim);
			stage_jnl_node(s, victim);
		}
	}
	if (sdir_add(s, dd, newname, newlen, n)) {
		if (victim)
			stage_maybe_free(s, victim);
		return ENOMEM;
	}
	/* dir_add counted a link; the old name goes now. */
	sdir_del(s, sd, name, len);
	n->links--;
	touch(s, n, 0, 1);
	touch(s, sd, 1, 1);
	touch(s, dd, 1, 1);
	if (victim)
		stage_maybe_free(s, victim);
	return 0;
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct stage *s = S(req);
	int err;

	lock(s);
	err = do_rename(s, parent, name, newparent, newname, flags);
	if (!err)
		s->gen++;
	unlock(s);
	fuse_reply_err(req, err);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct stage *s = S(req);
	struct fuse_entry_param e;
	struct snode *dir, *n;
	int err;

	lock(s);
	err = get_dir(s, newparent, newname, &dir);
	if (err)
		goto out;
	n = stage_get(s, ino);
	if (!n) {
		err = ENOENT;
		goto out;
	}
	if (S_ISDIR(n->mode)) {
		err = EPERM;
		goto out;
	}
	if (!n->links) {
		err = ENOENT;
		goto out;
	}
	if (dir_find(dir, newname, strlen(newname))) {
		err = EEXIST;
		goto out;
	}
	if (sdir_add(s, dir, newname, strlen(newname), n)) {
		err = ENOMEM;
		goto out;
	}
	touch(s, n, 0, 1);
	touch(s, dir, 1, 1);
	n->nlookup++;
	s->gen++;
	fill_entry(&e, n);
out:
	unlock(s);
	reply_made(req, err, &e);
}

/* Open the spool file of n for a new handle.  Lock held; errno or 0. */
static int open_handle(struct stage *s, struct snode *n, int fd,
		       struct fuse_file_info *fi)
{
	struct fhandle *h;
	char name[32];

	if (fd < 0) {
		if (!n->links)
			return ENOENT;
		snprintf(name, sizeof(name), "%llu", (unsigned long long)n->ino);
		fd = openat(s->datafd, name, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return errno;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		close(fd);
		return ENOMEM;
	}
	if ((fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY && n->size) {
		stage_pt_sync(s, n);
		if (ftruncate(fd, 0)) {
			int e = errno;

			close(fd);
			free(h);
			return e;
		}
		stage_bg_changed(s, n, 0, UINT64_MAX);
		n->size = 0;
		touch(s, n, 1, 1);
		stage_pt_settled(s, n);
		s->gen++;
	}
	h->fd = fd;
	h->n = n;
	h->writer = (fi->flags & O_ACCMODE) != O_RDONLY;
	n->opens++;
	if (h->writer) {
		n->writers++;
		s->total_writers++;
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->keep_cache = 1;
	/*
	 * Writes reach the spool before they are answered, so a close has
	 * nothing left to report: spare every close a round trip.
	 */
	fi->noflush = 1;
	/* Last: from here on the open cannot fail. */
	stage_pt_open(s, n, fd, fi->flags);
	return 0;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stage *s = S(req);
	struct snode *n;
	int err;

	lock(s);
	n = stage_get(s, ino);
	if (!n)
		err = ENOENT;
	else if (S_ISDIR(n->mode))
		err = EISDIR;
	else if (!S_ISREG(n->mode))
		err = ENXIO;
	else
		err = open_handle(s, n, -1, fi);
	unlock(s);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_open(req, fi);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct stage *s = S(req);
	struct fuse_entry_param e;
	int err, fd = -1;

	lock(s);
	err = make_node(req, parent, name, S_IFREG | (mode & 07777), 0, NULL, &e, &fd);
	if (!err) {
		err = open_handle(s, stage_get(s, e.ino), fd, fi);
		if (err) {
			/* Undo: the kernel never saw the entry. */
			struct snode *dir = stage_get(s, parent), *n = stage_get(s, e.ino);

			sdir_del(s, dir, name, strlen(name));
			n->nlookup = 0;
			node_unlinked(s, n);
			stage_maybe_free(s, n);
		}
	}
	unlock(s);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_create(req, &e, fi);
}

static struct fhandle *FH(struct fuse_file_info *fi)
{
	return (struct fhandle *)(uintptr_t)fi->fh;
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);

	(void)ino;
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = FH(fi)->fd;
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

/* After a write or an allocation: the size from the spool file. */
static void data_changed(struct stage *s, struct fhandle *h, uint64_t off, uint64_t len)
{
	struct stat st;

	lock(s);
	stage_pt_sync(s, h->n);
	stage_bg_changed(s, h->n, off, len);
	if (!fstat(h->fd, &st) && (uint64_t)st.st_size != h->n->size) {
		/*
		 * The old last block changed length (a write past the end
		 * may leave a gap): its stored form goes, wherever off was.
		 */
		stage_bg_changed(s, h->n, h->n->size < (uint64_t)st.st_size ?
				 h->n->size : (uint64_t)st.st_size, UINT64_MAX);
		h->n->size = (uint64_t)st.st_size;
	}
	touch(s, h->n, 1, 1);
	stage_pt_settled(s, h->n);
	s->gen++;
	unlock(s);
}

static void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in,
			 off_t off, struct fuse_file_info *fi)
{
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
	struct fhandle *h = FH(fi);
	struct stage *s = S(req);
	ssize_t res;

	(void)ino;
	/* As a file system's maximum file size: a short write, then EFBIG. */
	if (off < 0 || (uint64_t)off >= s->file_max) {
		fuse_reply_err(req, EFBIG);
		return;
	}
	if (out.buf[0].size > s->file_max - (uint64_t)off)
		out.buf[0].size = s->file_max - (uint64_t)off;
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = h->fd;
	out.buf[0].pos = off;
	res = fuse_buf_copy(&out, in, 0);
	if (res < 0) {
		fuse_reply_err(req, (int)-res);
		return;
	}
	data_changed(s, h, (uint64_t)off, (uint64_t)res);
	fuse_reply_write(req, (size_t)res);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stage *s = S(req);
	struct fhandle *h = FH(fi);

	(void)ino;
	close(h->fd);
	lock(s);
	stage_pt_release(s, h->n, h->writer);
	h->n->opens--;
	if (h->writer) {
		h->n->writers--;
		s->total_writers--;
		pthread_cond_broadcast(&s->released);
		stage_bg_released(s, h->n);
	}
	stage_maybe_free(s, h->n);
	unlock(s);
	free(h);
	fuse_reply_err(req, 0);
}

/* Flush fd (if >= 0) and the changes p plans, the latter in the syncer. */
static int flush_both(struct stage *s, int fd, int datasync, struct stage_jnl_plan *p)
{
	int err = 0, ret, helped;

	helped = fd >= 0 && stage_syncer_give(s, p);
	if (fd >= 0 && (datasync ? fdatasync(fd) : fsync(fd)))
		err = errno;
	ret = helped ? stage_syncer_wait(s) : stage_jnl_plan_run(p);
	lock(s);
	stage_jnl_plan_done(s, p, ret);
	unlock(s);
	return err ? err : -ret;
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	struct stage *s = S(req);
	struct stage_jnl_plan p;
	int err;

	(void)ino;
	/* The kernel then answers every later fsync itself (volatile.c). */
	if (s->no_sync) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	/* Its name and attributes: the journal, which holds all changes so far. */
	lock(s);
	stage_pt_sync(s, FH(fi)->n);
	err = -stage_jnl_plan(s, FH(fi)->n->ino, &p);
	unlock(s);
	if (!err)
		err = flush_both(s, FH(fi)->fd, datasync, &p);
	fuse_reply_err(req, err);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
			 off_t len, struct fuse_file_info *fi)
{
	(void)ino;
	if (!(mode & FALLOC_FL_KEEP_SIZE) &&
	    (off < 0 || len < 0 || (uint64_t)off + (uint64_t)len > S(req)->file_max)) {
		fuse_reply_err(req, EFBIG);
		return;
	}
	if (fallocate(FH(fi)->fd, mode, off, len)) {
		fuse_reply_err(req, errno);
		return;
	}
	/* Punching or zeroing can change the size's block too. */
	data_changed(S(req), FH(fi), (uint64_t)off, (uint64_t)len);
	fuse_reply_err(req, 0);
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	off_t r;

	(void)ino;
	r = lseek(FH(fi)->fd, off, whence);
	if (r < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_lseek(req, r);
}

/*
 * A directory handle's listing is taken at the first readdir, and again on
 * each rewind (offset 0), not at opendir: programs often open a directory
 * only for the *at() calls below it (stress-ng's link stressors once per
 * link), and a copy per open made each of those O(entries).
 */
struct dsnap {
	char *name;
	fuse_ino_t ino;
	mode_t mode;
};

struct dhandle {
	fuse_ino_t ino;
	struct dsnap *ents;
	char *names;
	size_t n;
};

static void dh_clear(struct dhandle *h)
{
	free(h->ents);
	free(h->names);
	h->ents = NULL;
	h->names = NULL;
	h->n = 0;
}

static void dh_add(struct dhandle *h, size_t *pos, const char *name, size_t len,
		   fuse_ino_t ino, mode_t mode)
{
	struct dsnap *e = &h->ents[h->n++];

	e->name = memcpy(h->names + *pos, name, len + 1);
	e->ino = ino;
	e->mode = mode;
	*pos += len + 1;
}

/* Takes the listing of h's directory; the caller holds the lock. */
static int dh_fill(struct stage *s, struct dhandle *h)
{
	struct snode *n = stage_get(s, h->ino);
	size_t i, bytes = sizeof(".") + sizeof(".."), pos = 0;
	struct sdirent *d;

	dh_clear(h);
	if (!n)
		return -ENOENT;
	if (!S_ISDIR(n->mode))
		return -ENOTDIR;
	for (i = 0; i < n->nslots; i++)
		for (d = n->tab[i]; d; d = d->next)
			bytes += d->len + 1;
	h->ents = malloc((n->nents + 2) * sizeof(*h->ents));
	h->names = malloc(bytes);
	if (!h->ents || !h->names) {
		dh_clear(h);
		return -ENOMEM;
	}
	dh_add(h, &pos, ".", 1, n->ino, n->mode);
	dh_add(h, &pos, "..", 2, n->parent ? n->parent->ino : n->ino, S_IFDIR);
	for (i = 0; i < n->nslots; i++)
		for (d = n->tab[i]; d; d = d->next)
			dh_add(h, &pos, d->name, d->len, d->node->ino, d->node->mode);
	return 0;
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stage *s = S(req);
	struct dhandle *h;
	struct snode *n;
	int err = 0;

	lock(s);
	n = stage_get(s, ino);
	if (!n)
		err = ENOENT;
	else if (!S_ISDIR(n->mode))
		err = ENOTDIR;
	unlock(s);
	h = err ? NULL : calloc(1, sizeof(*h));
	if (!err && !h)
		err = ENOMEM;
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	h->ino = ino;
	fi->fh = (uint64_t)(uintptr_t)h;
	/*
	 * Listings stay in the kernel's page cache between opens: every change
	 * to a directory's entries comes through the kernel, which drops the
	 * cached listing itself (walks of a tree list it over and over).
	 */
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct dhandle *h = (struct dhandle *)(uintptr_t)fi->fh;
	struct stage *s = S(req);
	size_t pos = 0, i;
	char *buf;
	int err = 0;

	(void)ino;
	if (off <= 0 || !h->ents) {
		lock(s);
		err = dh_fill(s, h);
		unlock(s);
		if (err) {
			fuse_reply_err(req, -err);
			return;
		}
	}
	buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (i = off < 0 ? 0 : (size_t)off; i < h->n; i++) {
		struct stat st = { .st_ino = h->ents[i].ino, .st_mode = h->ents[i].mode };
		size_t need = fuse_add_direntry(req, buf + pos, size - pos,
						h->ents[i].name, &st, (off_t)(i + 1));

		if (need > size - pos)
			break;
		pos += need;
	}
	fuse_reply_buf(req, buf, pos);
	free(buf);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dhandle *h = (struct dhandle *)(uintptr_t)fi->fh;

	(void)ino;
	dh_clear(h);
	free(h);
	fuse_reply_err(req, 0);
}

/* The journal holds the directory's entries: making it durable is enough. */
static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	struct stage *s = S(req);
	struct stage_jnl_plan p;
	int err;

	(void)ino;
	(void)datasync;
	(void)fi;
	if (s->no_sync) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	lock(s);
	err = -stage_jnl_plan(s, 0, &p);
	unlock(s);
	if (!err)
		err = flush_both(s, -1, 0, &p);
	fuse_reply_err(req, err);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct stage *s = S(req);
	struct statvfs sv;

	(void)ino;
	if (fstatvfs(s->datafd, &sv)) {
		fuse_reply_err(req, errno);
		return;
	}
	lock(s);
	sv.f_files = sv.f_files > s->inodes ? sv.f_files : s->inodes + sv.f_ffree;
	unlock(s);
	sv.f_namemax = STAGE_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

#define ACL_ACCESS "system.posix_acl_access"
#define ACL_DEFAULT "system.posix_acl_default"

/*
 * The permission bits an access ACL (the kernel's xattr form: a version
 * word, then tag, perm, id entries) stands for, if it has only the three
 * base entries, which say no more than the mode does (ext4 keeps no ACL
 * for them either).  Named users and groups cannot be stored: ENOTSUP.
 */
static int acl_to_perm(const char *value, size_t size, mode_t *perm)
{
	const unsigned char *p = (const unsigned char *)value;
	unsigned int seen = 0, tag, bits, shift;
	size_t i;

	if (size < 4 || (size - 4) % 8 || p[0] != 2 || p[1] || p[2] || p[3])
		return EINVAL;
	*perm = 0;
	for (i = 4; i < size; i += 8) {
		tag = p[i] | (unsigned int)p[i + 1] << 8;
		bits = p[i + 2] | (unsigned int)p[i + 3] << 8;
		switch (tag) {
		case 0x01: shift = 6; break;	/* ACL_USER_OBJ */
		case 0x04: shift = 3; break;	/* ACL_GROUP_OBJ */
		case 0x20: shift = 0; break;	/* ACL_OTHER */
		case 0x02: case 0x08: case 0x10:	/* USER, GROUP, MASK */
			return ENOTSUP;
		default:
			return EINVAL;
		}
		if ((seen & tag) || bits > 7)
			return EINVAL;
		seen |= tag;
		*perm |= (mode_t)bits << shift;
	}
	return seen == 0x25 ? 0 : EINVAL;
}

/*
 * setxattr of a base access ACL is a chmod: what cp -a, tar --acls and
 * rsync -A set on every file, so it spares them the fallback chmod (a
 * round trip each).
 */
static void acl_chmod(fuse_req_t req, fuse_ino_t ino, const char *value, size_t size)
{
	struct stage *s = S(req);
	struct snode *n;
	mode_t perm;
	int err;

	err = acl_to_perm(value, size, &perm);
	if (!err) {
		lock(s);
		n = stage_get(s, ino);
		if (!n) {
			err = ENOENT;
		} else {
			n->mode = (n->mode & ~(mode_t)0777) | perm;
			touch(s, n, 0, 1);	/* journals the node, mode included */
			s->gen++;
		}
		unlock(s);
	}
	/* The kernel does not expect a setxattr to change the mode it caches. */
	if (!err && s->se)
		fuse_lowlevel_notify_inval_inode(s->se, ino, -1, 0);
	fuse_reply_err(req, err);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct stage *s = S(req);
	struct snode *n;
	int err;

	if (!strcmp(name, STAGE_SEAL_XATTR) || !strcmp(name, STAGE_STATUS_XATTR)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (!strcmp(name, ACL_ACCESS)) {
		acl_chmod(req, ino, value, size);
		return;
	}
	if (!xattr_name_ok(name)) {
		fuse_reply_err(req, ENOTSUP);
		return;
	}
	lock(s);
	n = stage_get(s, ino);
	if (!n) {
		err = ENOENT;
	} else {
		err = -xattr_set(n, name, value, size, flags);
		if (!err) {
			stage_jnl_xattr(s, n, name, value, size, 0);
			touch(s, n, 0, 1);
			s->gen++;
		}
	}
	unlock(s);
	fuse_reply_err(req, err);
}

static void reply_value(fuse_req_t req, const void *v, size_t len, size_t size)
{
	if (!size)
		fuse_reply_xattr(req, len);
	else if (len > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, v, len);
}

static void seal_request(fuse_req_t req, size_t size)
{
	struct stage *s = S(req);
	char *msg = NULL, *val = NULL;
	int ret;

	if (!size) {
		/* Sizing probe: do not seal twice; promise enough room. */
		fuse_reply_xattr(req, 4096);
		return;
	}
	stage_uring_unpin(s);
	lock(s);
	ret = stage_seal(s, &msg);
	unlock(s);
	stage_uring_repin(s);
	if (ret) {
		stage_log(s, LOG_ERR, "seal of %s failed: %s", s->image, msg ? msg : "out of memory");
		if (asprintf(&val, "error: %s", msg ? msg : "out of memory") < 0)
			val = NULL;
	} else {
		stage_log(s, LOG_INFO, "sealed %s", s->image);
		val = msg;
		msg = NULL;
	}
	if (!val)
		fuse_reply_err(req, ENOMEM);
	else
		reply_value(req, val, strlen(val), size);
	free(val);
	free(msg);
	/*
	 * A good moment to start the journal afresh (it only grows otherwise),
	 * but after the reply, which must then really go (a ring sends it
	 * once the handler returns): the image is complete, and the unmount
	 * that usually follows removes the journal anyway.  62 399 inodes
	 * take 27 ms to write again.
	 */
	stage_uring_answer_now(s);
	if (!ret) {
		lock(s);
		if (s->datafd >= 0) {
			ret = stage_jnl_rewrite(s);
			if (ret)
				stage_log(s, LOG_WARNING, "rewriting the journal in %s: %s",
					  s->spool, strerror(-ret));
		}
		unlock(s);
	}
}

static void status_request(fuse_req_t req, size_t size)
{
	struct stage *s = S(req);
	struct stage_bg_status st;
	char buf[1024];
	int len;

	if (!size) {
		/*
		 * Sizing probe: the numbers may grow a digit before the read
		 * that follows, which would then fail with ERANGE; promise
		 * room for any value instead (the read returns its length).
		 */
		fuse_reply_xattr(req, sizeof(buf));
		return;
	}
	lock(s);
	stage_bg_status(s, &st);
	len = snprintf(buf, sizeof(buf),
		       "{\"background\": %s, \"queued_files\": %llu, \"queued_bytes\": %llu, "
		       "\"busy\": %d, \"stored_blocks\": %llu, \"stored_bytes\": %llu, "
		       "\"open_writers\": %llu, \"passthrough\": %s, \"passthrough_opens\": %llu, "
		       "\"rehearsals\": %llu, \"rehearsal_current\": %s, "
		       "\"prepacked_fragments\": %llu, \"rehearsals_deferred\": %llu, "
		       "\"rehearsals_too_big\": %llu, "
		       "\"uring_requests\": %llu, \"killpriv\": %s, \"volatile\": %s}",
		       s->bg ? "true" : "false", (unsigned long long)st.queued_files,
		       (unsigned long long)st.queued_bytes, st.busy,
		       (unsigned long long)st.stored_blocks,
		       (unsigned long long)st.stored_bytes,
		       (unsigned long long)s->total_writers,
		       stage_pt_wanted(s) ? "true" : "false",
		       (unsigned long long)stage_pt_opens(s),
		       (unsigned long long)st.rehearsals,
		       st.rehearsal_current ? "true" : "false",
		       (unsigned long long)st.stored_frags,
		       (unsigned long long)st.rehearsals_deferred,
		       (unsigned long long)st.rehearsals_too_big,
		       (unsigned long long)stage_uring_served(s),
		       stage_pt_killpriv(s) ? "true" : "false",
		       s->no_sync ? "true" : "false");
	unlock(s);
	reply_value(req, buf, (size_t)len, size);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct stage *s = S(req);
	const struct sxattr *x;
	struct snode *n;
	void *copy = NULL;
	size_t len = 0;
	int err = 0;

	if (ino == FUSE_ROOT_ID && !strcmp(name, STAGE_SEAL_XATTR)) {
		seal_request(req, size);
		return;
	}
	if (ino == FUSE_ROOT_ID && !strcmp(name, STAGE_STATUS_XATTR)) {
		status_request(req, size);
		return;
	}
	/* No ACL beyond the mode is ever kept (see acl_chmod). */
	if (!strcmp(name, ACL_ACCESS) || !strcmp(name, ACL_DEFAULT)) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	if (!xattr_name_ok(name)) {
		fuse_reply_err(req, ENOTSUP);
		return;
	}
	lock(s);
	n = stage_get(s, ino);
	x = n ? xattr_get(n, name) : NULL;
	if (!n) {
		err = ENOENT;
	} else if (!x) {
		err = ENODATA;
	} else {
		len = x->size;
		copy = malloc(len ? len : 1);
		if (!copy)
			err = ENOMEM;
		else
			memcpy(copy, x->value, len);
	}
	unlock(s);
	if (err)
		fuse_reply_err(req, err);
	else
		reply_value(req, copy, len, size);
	free(copy);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct stage *s = S(req);
	struct snode *n;
	char *buf = NULL;
	size_t len = 0, i;
	int err = 0;

	lock(s);
	n = stage_get(s, ino);
	if (!n) {
		err = ENOENT;
	} else {
		for (i = 0; i < n->nxattrs; i++)
			len += strlen(n->xattrs[i].name) + 1;
		buf = malloc(len ? len : 1);
		if (!buf) {
			err = ENOMEM;
		} else {
			char *p = buf;

			for (i = 0; i < n->nxattrs; i++) {
				size_t l = strlen(n->xattrs[i].name) + 1;

				memcpy(p, n->xattrs[i].name, l);
				p += l;
			}
		}
	}
	unlock(s);
	if (err)
		fuse_reply_err(req, err);
	else
		reply_value(req, buf, len, size);
	free(buf);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct stage *s = S(req);
	struct snode *n;
	int err;

	/*
	 * Dropping an ACL leaves the mode, and none beyond it is kept: done
	 * (as ext4 answers; tar and cp -a clear default ACLs of directories).
	 */
	if (!strcmp(name, ACL_ACCESS) || !strcmp(name, ACL_DEFAULT)) {
		fuse_reply_err(req, 0);
		return;
	}
	if (!xattr_name_ok(name)) {
		fuse_reply_err(req, ENOTSUP);
		return;
	}
	lock(s);
	n = stage_get(s, ino);
	if (!n) {
		err = ENOENT;
	} else {
		err = -xattr_remove(n, name);
		if (!err && !strcmp(name, XATTR_CAPS)) {
			s->capdrop_ino = ino;
			s->capdrop_pid = fuse_req_ctx(req)->pid;
		}
		if (!err) {
			stage_jnl_xattr(s, n, name, NULL, 0, 1);
			touch(s, n, 0, 1);
			s->gen++;
		}
	}
	unlock(s);
	fuse_reply_err(req, err);
}

static void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct stage *s = S(req);
	struct snode *n;

	(void)mask;
	/* Only the mounting user gets here, and acts as root of the tree. */
	lock(s);
	n = stage_get(s, ino);
	unlock(s);
	fuse_reply_err(req, n ? 0 : ENOENT);
}

const struct fuse_lowlevel_ops stage_ops = {
	.init = op_init,
	.destroy = op_destroy,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.create = op_create,
	.read = op_read,
	.write_buf = op_write_buf,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.access = op_access,
	.fallocate = op_fallocate,
	.lseek = op_lseek,
};
