/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The writer's walk of the source's tree: each directory listed into a
 * buffer of its depth and sorted by name, the records of hard-linked
 * inodes, and after a failure the path of the inode it names (found by one
 * more walk, so that no pass has to keep paths).
 */
#include "sqw/writer_i.h"

struct list_ctx {
	struct writer *w;
	struct wlist *l;
};

static int list_emit(void *arg, const struct sqw_entry *e)
{
	struct list_ctx *c = arg;
	struct wlist *l = c->l;
	struct went *x;

	if (!e->name || e->len == 0 || e->len > SQW_NAME_MAX)
		return writer_fail(c->w, e->len ? -ENAMETOOLONG : -EINVAL, "listing", e->node);
	if (S_ISLNK(e->a.mode) && !e->target)
		return writer_fail(c->w, -EINVAL, "listing", e->node);
	if (l->n >= UINT32_MAX - 1)
		return writer_fail(c->w, -EFBIG, "too many entries", e->node);
	if (array_reserve((void **)&l->e, &l->cap, l->n + 1, sizeof(*l->e)))
		return writer_fail(c->w, -ENOMEM, "allocating", e->node);
	x = &l->e[l->n++];
	x->e = *e;
	x->ino = 0;
	x->ref = 0;
	return 0;
}

/* Names in unsigned byte order. */
static int went_cmp(const void *a, const void *b)
{
	const struct went *x = *(struct went *const *)a;
	const struct went *y = *(struct went *const *)b;
	size_t n = x->e.len < y->e.len ? x->e.len : y->e.len;
	int r = memcmp(x->e.name, y->e.name, n);

	if (r)
		return r;
	return x->e.len < y->e.len ? -1 : x->e.len > y->e.len;
}

int walk_list(struct writer *w, const struct went *d, size_t depth, struct wlist **out)
{
	struct list_ctx c = { .w = w };
	size_t i, seq = w->dir_next++;
	struct wlist *l;
	int ret;

	if (depth >= w->nlists) {
		size_t cap = w->nlists;

		if (array_reserve((void **)&w->lists, &cap, depth + 1, sizeof(*w->lists)))
			return writer_fail(w, -ENOMEM, "allocating", d->e.node);
		for (; w->nlists <= depth; w->nlists++) {
			w->lists[w->nlists] = calloc(1, sizeof(**w->lists));
			if (!w->lists[w->nlists])
				return writer_fail(w, -ENOMEM, "allocating", d->e.node);
		}
	}
	l = w->lists[depth];
	l->n = 0;
	c.l = l;
	ret = w->walk->list(w->walk_ctx, d->e.node, list_emit, &c);
	if (ret)
		return writer_fail(w, ret, "listing", d->e.node);
	if (array_reserve((void **)&l->p, &l->pcap, l->n, sizeof(*l->p)))
		return writer_fail(w, -ENOMEM, "allocating", d->e.node);
	for (i = 0; i < l->n; i++)
		l->p[i] = &l->e[i];
	if (l->n > 1)
		qsort(l->p, l->n, sizeof(*l->p), went_cmp);
	for (i = 1; i < l->n && !w->finding; i++)
		if (went_cmp(&l->p[i - 1], &l->p[i]) == 0)
			return writer_fail(w, -EEXIST, "name listed twice", l->p[i]->e.node);
	/* Its entries would have depth + 1 components. */
	if (l->n && depth >= SQW_DEPTH_MAX && !w->finding)
		return writer_fail(w, -ENAMETOOLONG, "nested more than 4096 levels deep",
				   l->p[0]->e.node);
	/* Every pass must see the tree the first one numbered. */
	if (w->numbering) {
		if (array_reserve((void **)&w->dirs_seen, &w->dirs_cap, seq + 1,
				  sizeof(*w->dirs_seen)))
			return writer_fail(w, -ENOMEM, "allocating", d->e.node);
		w->dirs_seen[seq].nents = (uint32_t)l->n;
		w->ndirs = seq + 1;
	} else if (!w->finding && (seq >= w->ndirs || w->dirs_seen[seq].nents != l->n)) {
		return writer_fail(w, -ESTALE, "the tree changed during the write", d->e.node);
	}
	*out = l;
	return 0;
}

struct wlink *walk_link(struct writer *w, const struct sqw_entry *e)
{
	uint64_t *v;
	int isnew;

	v = u64map_get(&w->link_map, e->link, &isnew);
	if (!v)
		return NULL;
	if (isnew) {
		if (array_reserve((void **)&w->links, &w->links_cap, w->nlinks + 1,
				  sizeof(*w->links)))
			return NULL;
		memset(&w->links[w->nlinks], 0, sizeof(*w->links));
		*v = ++w->nlinks;
	}
	return &w->links[*v - 1];
}

/* After a failure: the path of the inode it names, for the message. */
static int find_path(struct writer *w, const struct went *d, size_t depth,
		     struct buf *path, size_t *file)
{
	size_t base = path->len, i;
	struct wlist *l;
	int ret;

	if (walk_list(w, d, depth, &l))
		return -1;
	for (i = 0; i < l->n; i++) {
		const struct went *c = l->p[i];
		struct wlink *k;
		int hit;

		path->len = base;
		if (buf_append(path, "/", 1) || buf_append(path, c->e.name, c->e.len))
			return -1;
		hit = w->err->node && c->e.node == w->err->node;
		if (!hit && S_ISREG(c->e.a.mode) && w->err_file) {
			k = c->e.link ? walk_link(w, &c->e) : NULL;
			if (k && k->seen == w->pass)
				continue;
			if (k)
				k->seen = w->pass;
			hit = *file == (size_t)w->err_file - 1;
			++*file;
		}
		if (hit) {
			w->err->node = c->e.node;
			return 1;
		}
		if (S_ISDIR(c->e.a.mode)) {
			ret = find_path(w, c, depth + 1, path, file);
			if (ret)
				return ret;
		}
	}
	path->len = base;
	return 0;
}

void walk_error_path(struct writer *w)
{
	struct buf path = { 0 };
	size_t file = 0, n, cut;
	char *out = w->err->path;

	w->pass++;
	w->dir_next = 0;
	w->finding = 1;
	if (w->err->node && w->err->node == w->root.e.node) {
		strcpy(out, "/");
		return;
	}
	if ((!w->err->node && !w->err_file) ||
	    find_path(w, &w->root, 0, &path, &file) != 1) {
		buf_free(&path);
		return;
	}
	n = path.len;
	if (n < SQW_ERROR_PATH) {
		memcpy(out, path.data, n);
		out[n] = '\0';
	} else {
		cut = n - (SQW_ERROR_PATH - 4);
		memcpy(out, "...", 3);
		memcpy(out + 3, (char *)path.data + cut, n - cut);
		out[SQW_ERROR_PATH - 1] = '\0';
	}
	buf_free(&path);
}

/* The export table's md blocks, then their index (as table_write() lays a table out). */
