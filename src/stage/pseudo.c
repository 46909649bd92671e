/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * -o pseudo_file=FILE: sqfs-pack's pseudo definitions (src/pack/pseudo.c)
 * applied to the staged tree as the mount starts.  The daemon makes the
 * nodes itself, so a mounting user without CAP_MKNOD gets the device nodes
 * the kernel will not let them create through the mount.  Afterwards they
 * are staged entries like any other.  As in sqfs-pack, new entries take the
 * image's mkfs time and their directories' times stay as they were, and a
 * definition naming an existing entry (but type m) is ignored with a
 * warning.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pack/pack.h"
#include "stage/stage.h"

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

static int apply_one(struct stage *s, const struct pack_pseudo_def *d, int64_t mtime,
		     FILE *warn, char *msg, size_t msglen)
{
	struct timespec t = { .tv_sec = (time_t)mtime };
	struct snode *dir, *n;
	struct sdirent *de;
	const char *name;
	char what[4400];
	size_t len;
	int ret;

	ret = walk(s, d->path, &dir, &name, &len);
	if (ret)
		return say(msg, msglen, d, ret, ret == -EINVAL ? "'..' in the path" :
			   ret == -ENOENT ? "a parent directory is missing (define it first)" :
			   "a parent is not a directory");
	de = len ? dir_find(dir, name, len) : NULL;
	n = len ? (de ? de->node : NULL) : s->root;
	if (d->type == 'm') {
		if (!n)
			return say(msg, msglen, d, -ENOENT, "no such entry to modify");
		if (stage_ids_check(s, n, d->uid, d->gid) ||
		    stage_node_set_owner(s, n, d->uid, d->gid))
			return say(msg, msglen, d, -EOVERFLOW, "more than 65535 distinct ids");
		n->mode = (n->mode & S_IFMT) | d->mode;
		stage_jnl_node(s, n);
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

int stage_pseudo_apply(struct stage *s, const struct pack_pseudo *ps, FILE *warn,
		       char *msg, size_t msglen)
{
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < ps->n && !ret; i++)
		ret = apply_one(s, &ps->d[i], s->opts.img.mkfs_time, warn, msg, msglen);
	stage_jnl_flush(s);
	pthread_mutex_unlock(&s->lock);
	return ret;
}
