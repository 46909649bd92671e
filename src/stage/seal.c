/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Sealing: the writer lists the staged tree itself (no copy: a million
 * staged inodes would need as much again), then the image is published
 * atomically.  A rehearsal (prepack.c) runs without the lock, so it gets a
 * copy of the tree instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "stage/stage.h"
#include "sqw/image.h"
#include "pack/pack.h"
#include "util/u64map.h"
#include "util/util.h"

#define WRITER_WAIT_SECONDS 5

struct seal_ctx {
	struct stage *s;
	sqw_tree_t *tree;
	char *msg;		/* first error */
	/* For messages; grows: a staged tree may be deeper than PATH_MAX. */
	char *path;
	size_t plen, pcap;
	struct u64map linked;	/* ino -> sqw node, for nodes of several names */
};

/*
 * Staged data files are named by inode number in SPOOL/data; blocks the
 * background work compressed already come from its store (bg.c).  The
 * spool file is opened at the first read: a file whose blocks are all
 * stored (most of them, after the background work) is never opened.
 */
struct src {
	void *fd;
	struct stage *s;
	const struct snode *n;
	uintptr_t ino;
};

/*
 * The kernel waits for the answer to a request it interrupted, without
 * end: a signal cannot end a waiting sqfs-seal unless the seal stops.
 */
static const char cancelled_msg[] = "cancelled: sqfs-seal was interrupted";

int stage_seal_cancelled(const struct stage *s)
{
	return s->seal_req && fuse_req_interrupted(s->seal_req);
}

static int src_open(void *ctx, void *id, void **handle)
{
	struct stage *s = ctx;
	struct src *h;

	if (stage_seal_cancelled(s))
		return -ECANCELED;
	h = malloc(sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->fd = NULL;
	h->s = s;
	h->ino = (uintptr_t)id;
	h->n = stage_get(s, (fuse_ino_t)h->ino);
	*handle = h;
	return 0;
}

/* The writer reads a file from one thread: no lock needed. */
static int src_fd(struct src *h)
{
	char name[STAGE_SPOOL_NAME_SIZE];

	if (h->fd)
		return 0;
	return fd_source_openat(h->s->datafd, stage_spool_name(name, h->ino), &h->fd);
}

static int src_read(void *handle, uint64_t off, void *buf, size_t len)
{
	struct src *h = handle;
	int ret = stage_seal_cancelled(h->s) ? -ECANCELED : src_fd(h);

	return ret ? ret : fd_source_read(h->fd, off, buf, len);
}

static int64_t src_next_data(void *handle, uint64_t off)
{
	struct src *h = handle;
	int ret = src_fd(h);

	return ret ? ret : fd_source_next_data(h->fd, off);
}

static int src_stored_block(void *handle, uint32_t index, void *buf, uint32_t *word)
{
	struct src *h = handle;
	uint64_t bs = h->s->opts.img.comp.block_size;
	int ret = h->n ? stage_bg_stored(h->s, h->n, index, buf, word) : 0;

	/* Stored raw: the bytes are the file's own (else the seal reads them). */
	if (ret == 2)
		ret = src_read(h, index * bs, buf, *word & ~(1u << 24)) ? 0 : 1;
	return ret;
}

static int src_stored_block_at(void *handle, uint32_t index, int *fd, uint64_t *off,
			       uint32_t *word)
{
	struct src *h = handle;

	if (stage_seal_cancelled(h->s))
		return -ECANCELED;
	return h->n ? stage_bg_stored_at(h->s, h->n, index, fd, off, word) : 0;
}

static void src_close(void *handle)
{
	struct src *h = handle;

	if (h->fd)
		fd_source_close(h->fd);
	free(h);
}

static const struct sqw_source_ops stage_source_ops = {
	.open = src_open,
	.read = src_read,
	.next_data = src_next_data,
	.stored_block_at = src_stored_block_at,
	.stored_block = src_stored_block,
	.close = src_close,
};

static int fail(struct seal_ctx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int fail(struct seal_ctx *c, const char *fmt, ...)
{
	va_list ap;

	if (!c->msg) {
		va_start(ap, fmt);
		if (vasprintf(&c->msg, fmt, ap) < 0)
			c->msg = NULL;
		va_end(ap);
	}
	return -1;
}

static void attr_of(const struct snode *n, struct sqw_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->mode = n->mode;
	a->uid = n->uid;
	a->gid = n->gid;
	a->mtime = n->mtime.tv_sec;
	a->rdev = node_rdev(n);
	if (S_ISREG(n->mode))
		a->size = n->size;
	else if (S_ISLNK(n->mode))
		a->size = strlen(n->target);
}

/* c->path becomes the path of d below what it holds. */
static int path_push(struct seal_ctx *c, const struct sdirent *d)
{
	size_t base = c->plen;

	if (base + 1 + d->len + 1 > c->pcap) {
		size_t cap = (base + 1 + d->len + 1) * 2;
		char *p = realloc(c->path, cap);

		if (!p)
			return fail(c, "%s/%s: out of memory", c->plen ? c->path : "", d->name);
		c->path = p;
		c->pcap = cap;
	}
	c->path[base] = '/';
	memcpy(c->path + base + 1, d->name, d->len + 1);
	c->plen = base + 1 + d->len;
	return 0;
}

static int build_dir(struct seal_ctx *c, const struct snode *dir, sqw_node_t *qdir,
		     unsigned depth)
{
	size_t i, base = c->plen;
	struct sdirent *d;
	struct sqw_attr a;
	sqw_node_t *q;
	int ret;

	/* The seal would refuse it (check_tree): no rehearsal either. */
	if (dir->nents && depth >= SQW_DEPTH_MAX)
		return fail(c, "nested too deeply");
	for (i = 0; i < dir->nslots; i++) {
		for (d = dir->tab[i]; d; d = d->next) {
			struct snode *n = d->node;
			uint64_t *slot = NULL;

			c->plen = base;
			if (path_push(c, d))
				return -1;
			if (!S_ISDIR(n->mode) && n->links > 1) {
				int isnew;

				slot = u64map_get(&c->linked, n->ino, &isnew);
				if (!slot)
					return fail(c, "%s: out of memory", c->path);
				if (!isnew) {
					ret = sqw_tree_link(c->tree, qdir, d->name, d->len,
							    (sqw_node_t *)(uintptr_t)*slot);
					if (ret)
						return fail(c, "%s: adding a hard link: %s",
							    c->path, strerror(-ret));
					continue;
				}
			}
			attr_of(n, &a);
			ret = sqw_tree_add(c->tree, qdir, d->name, d->len, &a,
					   S_ISLNK(n->mode) ? n->target : NULL, &q);
			if (ret)
				return fail(c, "%s: %s", c->path, strerror(-ret));
			if (slot)
				*slot = (uint64_t)(uintptr_t)q;
			if (S_ISREG(n->mode))
				sqw_node_set_source(q, (void *)(uintptr_t)n->ino);
			if (S_ISDIR(n->mode) && build_dir(c, n, q, depth + 1))
				return -1;
		}
	}
	c->plen = base;
	if (c->path)
		c->path[base] = '\0';
	return 0;
}

/* --- the staged tree as the writer lists it (under stage->lock) --- */

static void entry_of(const struct snode *n, const struct sdirent *d, struct sqw_entry *e)
{
	memset(e, 0, sizeof(*e));
	if (d) {
		e->name = d->name;
		e->len = d->len;
	}
	attr_of(n, &e->a);
	e->node = (void *)n;
	if (S_ISREG(n->mode))
		e->src = (void *)(uintptr_t)n->ino;
	else if (S_ISLNK(n->mode))
		e->target = n->target;
	if (!S_ISDIR(n->mode) && n->links > 1)
		e->link = n->ino;
	e->has_xattrs = n->nxattrs > 0;
}

static int walk_root(void *ctx, struct sqw_entry *e)
{
	entry_of(((struct stage *)ctx)->root, NULL, e);
	return 0;
}

static int walk_list(void *ctx, void *dir, sqw_entry_fn emit, void *arg)
{
	const struct snode *d = dir;
	const struct sdirent *de;
	struct sqw_entry e;
	size_t i;
	int ret;

	if (stage_seal_cancelled(ctx))
		return -ECANCELED;
	for (i = 0; i < d->nslots; i++) {
		for (de = d->tab[i]; de; de = de->next) {
			entry_of(de->node, de, &e);
			ret = emit(arg, &e);
			if (ret)
				return ret;
		}
	}
	return 0;
}

static int walk_xattrs(void *ctx, void *node, sqw_xattr_fn put, void *arg)
{
	const struct snode *n = node;
	uint32_t i;
	int ret;

	(void)ctx;
	for (i = 0; i < n->nxattrs; i++) {
		ret = put(arg, n->xattrs[i].name, n->xattrs[i].value, n->xattrs[i].size);
		if (ret)
			return ret;
	}
	return 0;
}

static int walk_get(void *ctx, void *node, struct sqw_entry *e)
{
	(void)ctx;
	entry_of(node, NULL, e);
	return 0;
}

static const struct sqw_walk_ops stage_walk_ops = {
	.root = walk_root,
	.list = walk_list,
	.xattrs = walk_xattrs,
	.get = walk_get,
};

/*
 * A file still open for writing would change under the seal, and an entry
 * nested deeper than the writer walks cannot be written: name the first.
 */
static int check_tree(struct seal_ctx *c, const struct snode *dir, unsigned depth)
{
	size_t i, base = c->plen;
	struct sdirent *d;

	if (dir->nents && depth >= SQW_DEPTH_MAX) {
		d = NULL;
		for (i = 0; !d && i < dir->nslots; i++)
			d = dir->tab[i];
		if (path_push(c, d))
			return -1;
		return fail(c, "%s: nested more than %d levels deep (SquashFS tools and "
			    "the kernel could not use its path); move it up and seal again",
			    c->path, SQW_DEPTH_MAX);
	}

	for (i = 0; i < dir->nslots; i++) {
		for (d = dir->tab[i]; d; d = d->next) {
			const struct snode *n = d->node;

			if (!S_ISDIR(n->mode) && !(S_ISREG(n->mode) && n->writers))
				continue;
			if (path_push(c, d))
				return -1;
			if (S_ISREG(n->mode))
				return fail(c, "%s: still open for writing; close it and seal again",
					    c->path);
			if (check_tree(c, n, depth + 1))
				return -1;
			c->plen = base;
		}
	}
	c->plen = base;
	if (c->path)
		c->path[base] = '\0';
	return 0;
}

/*
 * Wait a little for releases still on their way from the kernel; not for
 * writers of files no entry names, which the image cannot see.
 */
static void wait_writers(struct stage *s)
{
	struct timespec end, now;

	clock_gettime(CLOCK_REALTIME, &end);
	end.tv_sec += WRITER_WAIT_SECONDS;
	/* In steps of 0.1 s: an interrupt of sqfs-seal signals no condition. */
	while (s->total_writers > s->unnamed_writers && !stage_seal_cancelled(s)) {
		struct timespec dl;

		clock_gettime(CLOCK_REALTIME, &now);
		if (now.tv_sec > end.tv_sec ||
		    (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
			break;
		dl = now;
		dl.tv_nsec += 100 * 1000 * 1000;
		if (dl.tv_nsec >= 1000 * 1000 * 1000) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000 * 1000 * 1000;
		}
		pthread_cond_timedwait(&s->released, &s->lock, &dl);
	}
}

static char *summary(struct stage *s, const struct sqw_stats *st, double start)
{
	struct cli_opts o = s->opts;
	struct cli_report rep;
	char *buf = NULL, *out = NULL;
	size_t len = 0;
	FILE *f;

	o.json = 1;
	o.quiet = 1;
	o.progress = 0;
	f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	cli_report_start(&rep, &o, s->image, 0);
	rep.start = start;
	cli_report_summary(&rep, st, f);
	fclose(f);
	if (!buf)
		return NULL;
	/* {"image": ...}\n -> {"pid": N, "image": ...} */
	if (len && buf[len - 1] == '\n')
		buf[--len] = '\0';
	if (asprintf(&out, "{\"pid\": %ld, %s", (long)getpid(), buf[0] == '{' ? buf + 1 : buf) < 0)
		out = NULL;
	free(buf);
	return out;
}

/*
 * A copy of the staged tree for a rehearsal, which runs without the lock:
 * open files as they are, no xattrs (a rehearsal writes no inode).
 */
sqw_tree_t *stage_tree_rehearsal(struct stage *s)
{
	struct seal_ctx c = { .s = s };
	struct sqw_attr a;

	/* The stage keeps names unique: no second name table (about 24 B an entry). */
	c.tree = sqw_tree_create_unindexed();
	if (c.tree) {
		attr_of(s->root, &a);
		sqw_node_set_attr(sqw_tree_root(c.tree), &a);
		if (build_dir(&c, s->root, sqw_tree_root(c.tree), 0)) {
			sqw_tree_destroy(c.tree);
			c.tree = NULL;
		}
	}
	u64map_free(&c.linked);
	free(c.msg);
	free(c.path);
	return c.tree;
}

/*
 * Nothing changed since the last good seal, no file is open for writing,
 * and IMAGE is still the file it wrote: that image stands.  A second
 * sqfs-seal racing the first, or --keep twice, then costs nothing.
 */
static int seal_stands(struct stage *s)
{
	return s->gen == s->sealed_gen && s->total_writers == s->unnamed_writers &&
	       stage_image_is_sealed(s);
}

int stage_image_is_sealed(struct stage *s)
{
	struct stat st;

	return s->last_summary && !stat(s->image, &st) &&
	       st.st_dev == s->last_image.st_dev && st.st_ino == s->last_image.st_ino &&
	       st.st_size == s->last_image.st_size &&
	       st.st_mtim.tv_sec == s->last_image.st_mtim.tv_sec &&
	       st.st_mtim.tv_nsec == s->last_image.st_mtim.tv_nsec &&
	       /* a write with the mtime put back still moves the ctime */
	       st.st_ctim.tv_sec == s->last_image.st_ctim.tv_sec &&
	       st.st_ctim.tv_nsec == s->last_image.st_ctim.tv_nsec;
}

int stage_seal(struct stage *s, char **out)
{
	struct seal_ctx c = { .s = s };
	struct cli_publish pub = { .fd = -1 };
	struct sqw_source_ops ops = stage_source_ops;
	struct sqw_stats st;
	struct sqw_error err;
	double start = cli_now();
	int ret;

	*out = NULL;
	/* Without rehearsals there is nothing to find: no block is hashed. */
	if (s->pp) {
		ops.stored_frag_at = stage_pp_stored_at;
		ops.stored_frag = stage_pp_stored;
		ops.tail_digest = stage_pp_tail_digest;
		ops.tail_seen = stage_pp_tail_seen;
	}
	stage_bg_pause(s);
	wait_writers(s);
	if (stage_seal_cancelled(s)) {
		fail(&c, "%s", cancelled_msg);
		goto fail;
	}
	{
		char m[4608];

		if (stage_pseudo_reapply(s, m, sizeof(m))) {
			fail(&c, "-o pseudo_file: %s; fix the tree (or mount again without "
			     "that definition) and seal again", m);
			goto fail;
		}
	}
	if (seal_stands(s)) {
		stage_bg_resume(s);
		*out = strdup(s->last_summary);
		return *out ? 0 : -1;
	}
	if (stage_spool_gone(s)) {
		fail(&c, "the spool %s was removed while mounted (by a cleaner of old "
		     "files?): the staged data is gone, and no image can be made from it",
		     s->spool);
		goto fail;
	}
	if (check_tree(&c, s->root, 0))
		goto fail;
	/* By default the image shares the spool's file system. */
	stage_jnl_trim(s);
	/* resolved at the mount: no lookup now may go through our own mount */
	ret = cli_publish_open(&pub, s->image, 0);
	if (ret) {
		fail(&c, "%s: cannot create the image: %s", s->image,
		     ret == -EEXIST ? "exists and is not a regular file" : strerror(-ret));
		goto fail;
	}
	s->opts.img.progress = NULL;
	ret = sqw_image_write_walk(&stage_walk_ops, s, &ops, s, pub.fd, &s->opts.img,
				   &st, &err);
	if (ret == -ECANCELED && stage_seal_cancelled(s)) {
		fail(&c, "%s", cancelled_msg);
		goto fail;
	}
	if (ret) {
		fail(&c, "%s: %s%s%s: %s", s->image, err.path, err.path[0] ? ": " : "",
		     err.what ? err.what : "writing", strerror(-ret));
		goto fail;
	}
	/* The last moment: the sync and rename below make IMAGE this one. */
	if (stage_seal_cancelled(s)) {
		fail(&c, "%s", cancelled_msg);
		goto fail;
	}
	ret = cli_publish_commit(&pub);
	if (ret) {
		fail(&c, "%s: publishing the image: %s", s->image, strerror(-ret));
		goto fail;
	}
	cli_publish_abort(&pub);
	free(c.path);
	stage_bg_resume(s);
	s->sealed_gen = s->gen;
	s->image_kept = 0;
	*out = summary(s, &st, start);
	if (!*out)
		*out = strdup("{}");
	free(s->last_summary);
	s->last_summary = NULL;
	if (*out && !stat(s->image, &s->last_image))
		s->last_summary = strdup(*out);
	return 0;
fail:
	cli_publish_abort(&pub);
	free(c.path);
	stage_bg_resume(s);
	*out = c.msg ? c.msg : strdup("out of memory");
	return -1;
}
