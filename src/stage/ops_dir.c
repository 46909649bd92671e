/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Directory handles: listings and fsyncdir. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stage/ops.h"

/*
 * A directory handle's listing is taken at the first readdir, and again on
 * each rewind (offset 0), not at opendir: programs often open a directory
 * only for the *at() calls below it (stress-ng's link stressors once per
 * link), and a copy per open made each of those O(entries).  An entry's
 * offset is its cookie (stage.h), the same in every handle's listing.
 */
struct dsnap {
	char *name;
	fuse_ino_t ino;
	uint64_t cookie;
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
		   fuse_ino_t ino, mode_t mode, uint64_t cookie)
{
	struct dsnap *e = &h->ents[h->n++];

	e->name = memcpy(h->names + *pos, name, len + 1);
	e->ino = ino;
	e->mode = mode;
	e->cookie = cookie;
	*pos += len + 1;
}

static int dsnap_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct dsnap *)a)->cookie, y = ((const struct dsnap *)b)->cookie;

	return (x > y) - (x < y);
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
	dh_add(h, &pos, ".", 1, n->ino, n->mode, 1);
	dh_add(h, &pos, "..", 2, n->parent ? n->parent->ino : n->ino, S_IFDIR, 2);
	for (i = 0; i < n->nslots; i++)
		for (d = n->tab[i]; d; d = d->next)
			dh_add(h, &pos, d->name, d->len, d->node->ino, d->node->mode,
			       d->cookie);
	/* A cookie per entry costs less than a list in their order. */
	qsort(h->ents + 2, h->n - 2, sizeof(*h->ents), dsnap_cmp);
	return 0;
}

/* The first entry of h's listing after offset off: cookies increase. */
static size_t dh_seek(const struct dhandle *h, off_t off)
{
	size_t lo = 0, hi = h->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (h->ents[mid].cookie <= (uint64_t)off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void stage_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
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
		reply_err(req, err);
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

void stage_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
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
			reply_err(req, -err);
			return;
		}
	}
	buf = malloc(size ? size : 1);
	if (!buf) {
		reply_err(req, ENOMEM);
		return;
	}
	for (i = off <= 0 ? 0 : dh_seek(h, off); i < h->n; i++) {
		struct stat st = { .st_ino = h->ents[i].ino, .st_mode = h->ents[i].mode };
		size_t need = fuse_add_direntry(req, buf + pos, size - pos, h->ents[i].name,
						&st, (off_t)h->ents[i].cookie);

		if (need > size - pos)
			break;
		pos += need;
	}
	fuse_reply_buf(req, buf, pos);
	free(buf);
}

void stage_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dhandle *h = (struct dhandle *)(uintptr_t)fi->fh;

	(void)ino;
	dh_clear(h);
	free(h);
	reply_err(req, 0);
}

/* The journal holds the directory's entries: making it durable is enough. */
void stage_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		       struct fuse_file_info *fi)
{
	struct stage *s = S(req);
	struct stage_jnl_plan p;
	int err;

	(void)ino;
	(void)datasync;
	(void)fi;
	if (s->no_sync) {
		reply_err(req, ENOSYS);
		return;
	}
	lock(s);
	err = -stage_jnl_plan(s, 0, &p);
	unlock(s);
	if (!err)
		err = stage_op_flush_both(s, -1, 0, &p);
	reply_err(req, err);
}
