/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The writer's walk of the source's tree: each directory listed into a
 * buffer of its depth (names and nodes only) and sorted by name, the
 * records of hard-linked inodes, and after a failure the path of the inode
 * it names (found by one more walk, so that no pass has to keep paths).
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

	if (!e->name || e->len == 0 || e->len > SQW_NAME_MAX)
		return writer_fail(c->w, e->len ? -ENAMETOOLONG : -EINVAL, "listing", e->node);
	if (e->name[e->len] != '\0' || memchr(e->name, '\0', e->len))
		return writer_fail(c->w, -EINVAL, "listing", e->node);
	if (l->n >= UINT32_MAX - 1)
		return writer_fail(c->w, -EFBIG, "too many entries", e->node);
	if (array_reserve((void **)&l->e, &l->cap, l->n + 1, sizeof(*l->e)))
		return writer_fail(c->w, -ENOMEM, "allocating", e->node);
	l->e[l->n].name = e->name;
	l->e[l->n].node = e->node;
	l->n++;
	return 0;
}

/* Names in unsigned byte order (strcmp compares bytes as unsigned char). */
static int went_cmp(const void *a, const void *b)
{
	return strcmp(((const struct went *)a)->name, ((const struct went *)b)->name);
}

int walk_list(struct writer *w, void *dir, size_t depth, struct wlist **out)
{
	struct list_ctx c = { .w = w };
	size_t i, seq = w->dir_next++;
	struct wlist *l;
	int ret;

	if (depth >= w->nlists) {
		size_t cap = w->nlists;

		if (array_reserve((void **)&w->lists, &cap, depth + 1, sizeof(*w->lists)))
			return writer_fail(w, -ENOMEM, "allocating", dir);
		for (; w->nlists <= depth; w->nlists++) {
			w->lists[w->nlists] = calloc(1, sizeof(**w->lists));
			if (!w->lists[w->nlists])
				return writer_fail(w, -ENOMEM, "allocating", dir);
		}
	}
	l = w->lists[depth];
	l->n = 0;
	c.l = l;
	ret = w->walk->list(w->walk_ctx, dir, list_emit, &c);
	if (ret)
		return writer_fail(w, ret, "listing", dir);
	if (l->n > 1)
		qsort(l->e, l->n, sizeof(*l->e), went_cmp);
	for (i = 1; i < l->n && !w->finding; i++)
		if (went_cmp(&l->e[i - 1], &l->e[i]) == 0)
			return writer_fail(w, -EEXIST, "name listed twice", l->e[i].node);
	/* Its entries would have depth + 1 components. */
	if (l->n && depth >= SQW_DEPTH_MAX && !w->finding)
		return writer_fail(w, -ENAMETOOLONG, "nested more than 4096 levels deep",
				   l->e[0].node);
	/* Every pass must see the tree the first one numbered. */
	if (w->numbering) {
		if (array_reserve((void **)&w->dirs_seen, &w->dirs_cap, seq + 1,
				  sizeof(*w->dirs_seen)))
			return writer_fail(w, -ENOMEM, "allocating", dir);
		w->dirs_seen[seq].nents = (uint32_t)l->n;
		w->ndirs = seq + 1;
	} else if (!w->finding && (seq >= w->ndirs || w->dirs_seen[seq].nents != l->n)) {
		return writer_fail(w, -ESTALE, "the tree changed during the write", dir);
	}
	*out = l;
	return 0;
}

int walk_get(struct writer *w, void *node, struct sqw_entry *e)
{
	int ret = w->walk->get(w->walk_ctx, node, e);

	if (ret)
		return writer_fail(w, ret, "listing", node);
	e->node = node;
	if (S_ISLNK(e->a.mode) && !e->target)
		return writer_fail(w, -EINVAL, "listing", node);
	return 0;
}

static struct wlink *walk_link(struct writer *w, const struct sqw_entry *e)
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

int walk_first(struct writer *w, const struct sqw_entry *e, struct wlink **out)
{
	struct wlink *k = NULL;

	if (e->link) {
		k = walk_link(w, e);
		if (!k)
			return writer_fail(w, -ENOMEM, "allocating", e->node);
	}
	if (out)
		*out = k;
	if (!k || k->seen != w->pass) {
		if (k)
			k->seen = w->pass;
		return 1;
	}
	return 0;
}

/* After a failure: the path of the inode it names, for the message. */
static int find_path(struct writer *w, void *dir, size_t depth, struct buf *path,
		     size_t *file)
{
	size_t base = path->len, i;
	struct sqw_entry e;
	struct wlist *l;
	int ret;

	if (walk_list(w, dir, depth, &l))
		return -1;
	for (i = 0; i < l->n; i++) {
		const struct went *c = &l->e[i];
		int hit;

		path->len = base;
		if (buf_append(path, "/", 1) || buf_append(path, c->name, strlen(c->name)))
			return -1;
		if (walk_get(w, c->node, &e))
			return -1;
		hit = w->err->node && c->node == w->err->node;
		if (!hit && S_ISREG(e.a.mode) && w->err_file) {
			ret = walk_first(w, &e, NULL);
			if (ret < 0)
				return -1;
			if (!ret)
				continue;
			hit = *file == (size_t)w->err_file - 1;
			++*file;
		}
		if (hit) {
			w->err->node = c->node;
			return 1;
		}
		if (S_ISDIR(e.a.mode)) {
			ret = find_path(w, c->node, depth + 1, path, file);
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
	if (w->err->node && w->err->node == w->root.node) {
		strcpy(out, "/");
		return;
	}
	if ((!w->err->node && !w->err_file) || !w->root.node ||
	    find_path(w, w->root.node, 0, &path, &file) != 1) {
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
