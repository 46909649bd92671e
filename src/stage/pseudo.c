/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * -o pseudo_file=FILE: sqfs-pack's pseudo definitions (src/pack/pseudo.c)
 * applied to the staged tree as the mount starts, and again as every seal
 * begins, as sqfs-pack applies them after its input.  The daemon makes the
 * nodes itself, so a mounting user without CAP_MKNOD gets the device nodes
 * the kernel will not let them create through the mount, and x definitions
 * give them the security. and trusted. attributes (file capabilities) the
 * kernel refuses them too.  At the start a definition naming an existing
 * entry (but types m and x) is ignored with a warning, and m and x
 * definitions whose entry is not there yet wait for the seal.  At a seal,
 * entries made by definitions that are gone again (tar x of a tree with
 * /dev unlinks the node, then fails to mknod it) are made again, and m and
 * x definitions apply once more; an entry they name must exist then.  New
 * entries take the image's mkfs time and their directories' times stay as
 * they were.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pack/pack.h"
#include "stage/stage.h"
#include "util/util.h"

/* The directory holding path's last component, which is *name, *len. */
static int walk(struct stage *s, const char *path, struct snode **dir,
		const char **name, size_t *len)
{
	struct snode *cur = s->root;
	const char *p = path;

	*name = "";
	*len = 0;
	for (;;) {
		size_t n;

		while (*p == '/')
			p++;
		n = strcspn(p, "/");
		if (n == 1 && p[0] == '.') {
			p += n;
			continue;
		}
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return -EINVAL;
		if (!n)
			break;
		if (p[n] == '\0' || !p[n + strspn(p + n, "/")]) {
			*name = p;
			*len = n;
			break;
		}
		{
			struct sdirent *d = dir_find(cur, p, n);

			if (!d)
				return -ENOENT;
			if (!S_ISDIR(d->node->mode))
				return -ENOTDIR;
			cur = d->node;
		}
		p += n;
	}
	*dir = cur;
	return 0;
}

static int say(char *msg, size_t msglen, const struct pack_pseudo_def *d, int code,
	       const char *what)
{
	char name[4400];

	pack_pseudo_name(d, name, sizeof(name));
	snprintf(msg, msglen, "%s: %s", name, what);
	return code;
}

/*
 * Remember what a seal changed that the kernel caches: a name made again
 * (it may hold it as absent), or with name NULL an inode's attributes.
 */
static int inval_add(struct stage *s, fuse_ino_t ino, const char *name, size_t len)
{
	struct stage_inval *m;
	char *copy = name ? strndup(name, len) : NULL;

	if ((name && !copy) || array_reserve((void **)&s->inval, &s->inval_cap, s->ninval + 1,
					     sizeof(*s->inval))) {
		free(copy);
		return -ENOMEM;
	}
	m = &s->inval[s->ninval++];
	m->ino = ino;
	m->name = copy;
	return 0;
}

static int apply_one(struct stage *s, const struct pack_pseudo_def *d, int64_t mtime,
		     int at_seal, FILE *warn, char *msg, size_t msglen)
{
	struct timespec t = { .tv_sec = (time_t)mtime };
	const struct sxattr *x;
	struct snode *dir, *n;
	struct sdirent *de;
	const char *name;
	char what[4400];
	size_t len;
	int ret, defer;

	/* m and x name entries the producer may make later: the seal applies them */
	defer = !at_seal && strchr("mx", d->type);
	ret = walk(s, d->path, &dir, &name, &len);
	if (ret == -ENOENT && defer)
		return 0;
	if (ret)
		return say(msg, msglen, d, ret, ret == -EINVAL ? "'..' in the path" :
			   ret == -ENOENT ? "a parent directory is missing (define it first)" :
			   "a parent is not a directory");
	de = len ? dir_find(dir, name, len) : NULL;
	n = len ? (de ? de->node : NULL) : s->root;
	if (!n && defer)
		return 0;
	if (d->type == 'm') {
		if (!n)
			return say(msg, msglen, d, -ENOENT, "no such entry to modify");
		if (n->uid == d->uid && n->gid == d->gid && (n->mode & 07777) == d->mode)
			return 0;
		if (stage_ids_check(s, n, d->uid, d->gid) ||
		    stage_node_set_owner(s, n, d->uid, d->gid))
			return say(msg, msglen, d, -EOVERFLOW, "more than 65535 distinct ids");
		n->mode = (n->mode & S_IFMT) | d->mode;
		stage_jnl_node(s, n);
		s->gen++;
		/* the kernel caches the old owner and mode */
		if (at_seal && inval_add(s, n->ino, NULL, 0))
			return say(msg, msglen, d, -ENOMEM, "out of memory");
		return 0;
	}
	if (d->type == 'x') {
		if (!n)
			return say(msg, msglen, d, -ENOENT, "no such entry for the attribute");
		if (!pack_pseudo_xattr_fits(d, n->mode))
			return say(msg, msglen, d, -EPERM, "user. attributes are for regular "
				   "files and directories only (Linux refuses them elsewhere)");
		x = xattr_get(n, d->xname);
		if (x && x->size == d->xlen && !memcmp(x->value, d->xvalue, d->xlen))
			return 0;
		ret = xattr_set(n, d->xname, d->xvalue, d->xlen, 0);
		if (ret)
			return say(msg, msglen, d, ret, "setting the attribute");
		stage_jnl_xattr(s, n, d->xname, d->xvalue, d->xlen, 0);
		s->gen++;
		return 0;
	}
	if (n) {
		pack_pseudo_name(d, what, sizeof(what));
		if (warn)
			fprintf(warn, "sqfs-stage: warning: %s: the entry exists; ignored\n", what);
		return 0;
	}
	if (len > STAGE_NAME_MAX)
		return say(msg, msglen, d, -ENAMETOOLONG, "name longer than 256 bytes");
	if (stage_ids_check(s, NULL, d->uid, d->gid))
		return say(msg, msglen, d, -EOVERFLOW, "more than 65535 distinct ids");
	if (at_seal && inval_add(s, dir->ino, name, len))
		return say(msg, msglen, d, -ENOMEM, "out of memory");
	n = stage_new_node(s, pack_pseudo_mode(d), d->uid, d->gid, (dev_t)d->rdev);
	if (!n)
		return say(msg, msglen, d, -ENOMEM, "out of memory");
	if (d->target && !(n->target = strdup(d->target))) {
		stage_maybe_free(s, n);
		return say(msg, msglen, d, -ENOMEM, "out of memory");
	}
	n->atime = n->mtime = n->ctime = t;
	if (dir_add(s, dir, name, len, n)) {
		stage_maybe_free(s, n);
		return say(msg, msglen, d, -ENOMEM, "out of memory");
	}
	stage_jnl_node(s, n);
	stage_jnl_dirent(s, dir, name, len, n);
	s->gen++;
	return 0;
}

static int apply_all(struct stage *s, int at_seal, FILE *warn, char *msg, size_t msglen)
{
	const struct pack_pseudo *ps = s->pseudo;
	uint64_t gen = s->gen;
	int ret = 0;

	for (size_t i = 0; ps && i < ps->n && !ret; i++)
		ret = apply_one(s, &ps->d[i], s->opts.img.mkfs_time, at_seal, warn, msg, msglen);
	if (s->gen != gen)
		stage_jnl_flush(s);
	return ret;
}

int stage_pseudo_apply(struct stage *s, const struct pack_pseudo *ps, FILE *warn,
		       char *msg, size_t msglen)
{
	int ret;

	pthread_mutex_lock(&s->lock);
	s->pseudo = ps;
	ret = apply_all(s, 0, warn, msg, msglen);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int stage_pseudo_reapply(struct stage *s, char *msg, size_t msglen)
{
	return s->pseudo ? apply_all(s, 1, NULL, msg, msglen) : 0;
}

void stage_pseudo_inval_send(struct stage *s, struct stage_inval *m, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s->se && m[i].name)
			fuse_lowlevel_notify_inval_entry(s->se, m[i].ino, m[i].name,
							 strlen(m[i].name));
		else if (s->se)
			fuse_lowlevel_notify_inval_inode(s->se, m[i].ino, -1, 0);
		free(m[i].name);
	}
	free(m);
}
