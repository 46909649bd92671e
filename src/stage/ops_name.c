/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Names: lookup, the calls that make or remove an entry, rename, link. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "stage/ops.h"
#include "sqw/tree.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/*
 * Lock held.  The kernel takes the size in an entry reply as it takes a
 * GETATTR's: a passthrough writer's growth is folded in first, or a lookup
 * during the write would shrink the file to what we last saw.
 */
static void fill_entry(struct stage *s, struct fuse_entry_param *e, struct snode *n)
{
	stage_pt_sync(s, n);
	memset(e, 0, sizeof(*e));
	e->ino = n->ino;
	e->generation = 1;
	e->attr_timeout = STAGE_TIMEOUT;
	e->entry_timeout = STAGE_TIMEOUT;
	node_stat(n, &e->attr);
}

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

void stage_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
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
		reply_err(req, err);
		return;
	}
	d = dir_find(dir, name, strlen(name));
	if (!d) {
		memset(&e, 0, sizeof(e));
		e.entry_timeout = STAGE_TIMEOUT;	/* negative entry */
	} else {
		d->node->nlookup++;
		fill_entry(s, &e, d->node);
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

void stage_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct stage *s = S(req);

	lock(s);
	do_forget(s, ino, nlookup);
	unlock(s);
	fuse_reply_none(req);
}

void stage_op_forget_multi(fuse_req_t req, size_t count,
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

void stage_op_readlink(fuse_req_t req, fuse_ino_t ino)
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
		reply_err(req, !n ? ENOENT : S_ISLNK(n->mode) ? ENOMEM : EINVAL);
	else
		fuse_reply_readlink(req, t);
	free(t);
}

/*
 * Create a node named name in parent; with fdp, a regular file's spool file
 * stays open in *fdp.  Without a name, an O_TMPFILE: a regular file in no
 * directory until a link names it.  Called with the lock held; returns 0
 * or an errno.
 */
int stage_op_make_node(fuse_req_t req, fuse_ino_t parent, const char *name,
		       mode_t mode, dev_t rdev, const char *target,
		       struct fuse_entry_param *e, int *fdp)
{
	struct stage *s = S(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct snode *dir, *n;
	gid_t gid = ctx->gid;
	char sname[STAGE_SPOOL_NAME_SIZE];
	struct stat sst;
	int err, fd = -1;

	err = get_dir(s, parent, name, &dir);
	if (err)
		return err;
	if (!name && !dir->links)
		return ENOENT;
	if (name && dir_find(dir, name, strlen(name)))
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
		stage_spool_name(sname, n->ino);
		fd = stage_spare_take(s, n->ino);
		/*
		 * A spool removed behind our back took the spool files made
		 * ahead with it: the create must fail as those made now do.
		 */
		if (fd >= 0 && (fstat(fd, &sst) || !sst.st_nlink)) {
			close(fd);
			fd = -1;
		}
		if (fd < 0)
			fd = openat(s->datafd, sname, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
		if (fd < 0) {
			err = errno;
			stage_maybe_free(s, n);
			/* Not "no such file": the file being made is not what is missing. */
			if (err == ENOENT && stage_spool_gone(s)) {
				if (!s->spool_gone_logged++)
					stage_log(s, LOG_ERR, "the spool %s was removed while "
						  "mounted: the staged data is gone; creates fail "
						  "with EIO, and no image can be sealed", s->spool);
				err = EIO;
			}
			return err;
		}
	}
	if (name && sdir_add(s, dir, name, strlen(name), n)) {
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
	if (name)
		touch(s, dir, 1, 1);
	else
		n->unnamed = 1;
	stage_jnl_node(s, n);
	n->nlookup++;
	s->gen++;
	fill_entry(s, e, n);
	return 0;
nomem:
	stage_maybe_free(s, n);
	return ENOMEM;
}

static void reply_made(fuse_req_t req, int err, struct fuse_entry_param *e)
{
	if (err)
		reply_err(req, err);
	else
		fuse_reply_entry(req, e);
}

void stage_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		    mode_t mode, dev_t rdev)
{
	struct stage *s = S(req);
	struct fuse_entry_param e;
	int err;

	switch (mode & S_IFMT) {
	case S_IFREG: case S_IFCHR: case S_IFBLK: case S_IFIFO: case S_IFSOCK:
		break;
	default:
		reply_err(req, EINVAL);
		return;
	}
	if (!S_ISCHR(mode) && !S_ISBLK(mode))
		rdev = 0;
	lock(s);
	err = stage_op_make_node(req, parent, name, mode, rdev, NULL, &e, NULL);
	unlock(s);
	reply_made(req, err, &e);
}

void stage_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		    mode_t mode)
{
	struct stage *s = S(req);
	struct fuse_entry_param e;
	int err;

	lock(s);
	err = stage_op_make_node(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL, &e, NULL);
	unlock(s);
	reply_made(req, err, &e);
}

void stage_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		      const char *name)
{
	struct stage *s = S(req);
	struct fuse_entry_param e;
	int err;

	lock(s);
	err = stage_op_make_node(req, parent, name, S_IFLNK | 0777, 0, link, &e, NULL);
	unlock(s);
	reply_made(req, err, &e);
}

void stage_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
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
	node_unlinked(s, n, 0);
	stage_jnl_node(s, n);
	touch(s, dir, 1, 1);
	stage_maybe_free(s, n);
	s->gen++;
out:
	unlock(s);
	reply_err(req, err);
}

void stage_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
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
	reply_err(req, err);
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
			node_unlinked(s, victim, 1);
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

void stage_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		     fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct stage *s = S(req);
	int err;

	lock(s);
	err = do_rename(s, parent, name, newparent, newname, flags);
	if (!err)
		s->gen++;
	unlock(s);
	reply_err(req, err);
}

void stage_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
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
	if (!n->links && !n->unnamed) {
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
	n->unnamed = 0;
	touch(s, n, 0, 1);
	touch(s, dir, 1, 1);
	n->nlookup++;
	s->gen++;
	fill_entry(s, &e, n);
out:
	unlock(s);
	reply_made(req, err, &e);
}
