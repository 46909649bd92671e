/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdio.h>
#include <xxhash.h>

#include "sqw/tree_i.h"
#include "util/arena.h"
#include "util/u64map.h"
#include "util/util.h"

/*
 * Names are found through one open-addressing table keyed by (directory,
 * name), so adding an entry is O(1) even in huge directories.
 */
struct sqw_tree {
	sqw_node_t *root;
	struct sqw_dentry **slots;	/* NULL or TOMBSTONE or entry */
	size_t nslots, used, live;
	int indexed;		/* else no slots: see sqw_tree_create_unindexed() */
	uint32_t gen;
	void (*src_free)(void *src);
	/*
	 * Nodes and entries live in the arena; freed nodes are reused from
	 * a list (one size), a removed entry's bytes only when the tree goes.
	 */
	struct arena mem;
	sqw_node_t *free_nodes;	/* chained through ->first */
};

void sqw_tree_set_source_free(sqw_tree_t *t, void (*fn)(void *src))
{
	t->src_free = fn;
}

uint32_t tree_next_gen(sqw_tree_t *t)
{
	return ++t->gen;
}

#define TOMBSTONE ((struct sqw_dentry *)1)

static uint64_t name_hash(const sqw_node_t *dir, const char *name, size_t len)
{
	return XXH3_64bits_withSeed(name, len, (uint64_t)(uintptr_t)dir);
}

static size_t slot_find(const sqw_tree_t *t, const sqw_node_t *dir,
			const char *name, size_t len, int *found)
{
	size_t mask = t->nslots - 1;
	size_t i = name_hash(dir, name, len) & mask;
	size_t first_free = SIZE_MAX;

	for (;;) {
		struct sqw_dentry *d = t->slots[i];

		if (!d) {
			*found = 0;
			return first_free != SIZE_MAX ? first_free : i;
		}
		if (d == TOMBSTONE) {
			if (first_free == SIZE_MAX)
				first_free = i;
		} else if (d->dir == dir && d->len == len &&
			   memcmp(d->name, name, len) == 0) {
			*found = 1;
			return i;
		}
		i = (i + 1) & mask;
	}
}

static int slots_grow(sqw_tree_t *t)
{
	size_t n = t->nslots ? t->nslots * 2 : 1024, i;
	struct sqw_dentry **old = t->slots;
	size_t oldn = t->nslots;

	if (t->live * 4 < t->nslots)	/* mostly tombstones: rehash in place */
		n = t->nslots;
	t->slots = alloc_array(n, sizeof(*t->slots));
	if (!t->slots) {
		t->slots = old;
		return -ENOMEM;
	}
	t->nslots = n;
	t->used = 0;
	for (i = 0; i < oldn; i++) {
		struct sqw_dentry *d = old[i];
		int found;

		if (d && d != TOMBSTONE) {
			t->slots[slot_find(t, d->dir, d->name, d->len, &found)] = d;
			t->used++;
		}
	}
	free(old);
	return 0;
}

static sqw_node_t *node_new(sqw_tree_t *t, const struct sqw_attr *attr)
{
	sqw_node_t *n = t->free_nodes;

	if (n)
		t->free_nodes = (sqw_node_t *)n->first;
	else if (!(n = arena_alloc(&t->mem, sizeof(*n))))
		return NULL;
	memset(n, 0, sizeof(*n));
	n->a = *attr;
	return n;
}

/* What n owns; its own bytes go back to the tree (or with the arena). */
static void node_release(sqw_tree_t *t, sqw_node_t *n)
{
	size_t i;

	for (i = 0; i < n->nxattrs; i++) {
		free(n->xattrs[i].name);
		free(n->xattrs[i].value);
	}
	free(n->xattrs);
	if (node_is_reg(n)) {
		if (n->src && t->src_free)
			t->src_free(n->src);
	} else if (node_is_dir(n)) {
		free(n->ents);
	} else if (S_ISLNK(n->a.mode)) {
		free(n->target);
	}
}

static void node_free(sqw_tree_t *t, sqw_node_t *n)
{
	node_release(t, n);
	n->first = (struct sqw_dentry *)t->free_nodes;
	t->free_nodes = n;
}

static sqw_tree_t *tree_create(int indexed)
{
	struct sqw_attr ra = { .mode = S_IFDIR | 0755 };
	sqw_tree_t *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->indexed = indexed;
	t->root = node_new(t, &ra);
	if (!t->root || (indexed && slots_grow(t))) {
		arena_free(&t->mem);
		free(t);
		return NULL;
	}
	t->root->nlink = 1;
	return t;
}

sqw_tree_t *sqw_tree_create(void)
{
	return tree_create(1);
}

sqw_tree_t *sqw_tree_create_unindexed(void)
{
	return tree_create(0);
}

/* Find another live name of n after its first one went away. */
static void first_refind(sqw_tree_t *t, sqw_node_t *n)
{
	size_t i;

	n->first = NULL;
	for (i = 0; t && i < t->nslots; i++) {
		struct sqw_dentry *d = t->slots[i];

		if (d && d != TOMBSTONE && d->node == n) {
			n->first = d;
			return;
		}
	}
}

/*
 * Free the subtree of n, n included.  destroying: the whole tree goes, so
 * only what the nodes own is freed (their bytes go with the arena) and no
 * surviving name needs finding.
 */
static void subtree_free(sqw_tree_t *t, sqw_node_t *n, int destroying)
{
	void (*drop)(sqw_tree_t *, sqw_node_t *) = destroying ? node_release : node_free;
	size_t i;

	for (i = 0; i < n->nents; i++) {
		sqw_node_t *c = n->ents[i]->node;

		if (node_is_dir(c))
			subtree_free(t, c, destroying);
		else if (--c->nlink == 0)
			drop(t, c);
		else if (!destroying && c->first == n->ents[i])
			first_refind(t, c);
	}
	drop(t, n);
}

void sqw_tree_destroy(sqw_tree_t *t)
{
	if (!t)
		return;
	/* Everything goes: nodes and names with the arena, after what they own. */
	free(t->slots);
	t->slots = NULL;
	t->nslots = 0;
	subtree_free(t, t->root, 1);
	arena_free(&t->mem);
	free(t);
}

sqw_node_t *sqw_tree_root(sqw_tree_t *t)
{
	return t->root;
}

static int name_check(const char *name, size_t len)
{
	if (len == 0 || (len == 1 && name[0] == '.') ||
	    (len == 2 && name[0] == '.' && name[1] == '.'))
		return -EINVAL;
	if (len > SQW_NAME_MAX)
		return -ENAMETOOLONG;
	if (memchr(name, '/', len) || memchr(name, '\0', len))
		return -EINVAL;
	return 0;
}

static int entry_add(sqw_tree_t *t, sqw_node_t *dir, const char *name,
		     size_t len, sqw_node_t *node)
{
	struct sqw_dentry *d;
	size_t slot = 0, cap;
	int found, ret;

	if (!node_is_dir(dir))
		return -ENOTDIR;
	ret = name_check(name, len);
	if (ret)
		return ret;
	if (dir->nents == UINT32_MAX - 1)
		return -EFBIG;
	if (t->indexed) {
		if ((t->used + 1) * 4 > t->nslots * 3) {
			ret = slots_grow(t);
			if (ret)
				return ret;
		}
		slot = slot_find(t, dir, name, len, &found);
		if (found)
			return -EEXIST;
	}
	cap = dir->ents_cap;
	ret = array_reserve((void **)&dir->ents, &cap, dir->nents + 1,
			    sizeof(*dir->ents));
	if (ret)
		return ret;
	dir->ents_cap = cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
	d = arena_alloc(&t->mem, sizeof(*d) + len + 1);
	if (!d)
		return -ENOMEM;
	d->dir = dir;
	d->node = node;
	d->len = (uint16_t)len;
	memcpy(d->name, name, len);
	d->name[len] = '\0';
	d->index = dir->nents;
	dir->ents[dir->nents++] = d;
	if (t->indexed) {
		if (t->slots[slot] != TOMBSTONE)
			t->used++;
		t->slots[slot] = d;
		t->live++;
	}
	node->nlink++;
	if (!node->first)
		node->first = d;
	if (node_is_dir(node))
		dir->nsubdirs++;
	return 0;
}

int sqw_tree_add(sqw_tree_t *t, sqw_node_t *dir, const char *name, size_t len,
		 const struct sqw_attr *attr, const char *target,
		 sqw_node_t **out)
{
	sqw_node_t *n;
	int ret;

	if (S_ISLNK(attr->mode)) {
		size_t tl = target ? strlen(target) : 0;

		if (tl == 0)
			return -EINVAL;
		if (tl > SQW_SYMLINK_MAX)
			return -ENAMETOOLONG;
	}
	n = node_new(t, attr);
	if (!n)
		return -ENOMEM;
	if (S_ISLNK(attr->mode)) {
		n->target = strdup(target);
		if (!n->target) {
			node_free(t, n);
			return -ENOMEM;
		}
	}
	ret = entry_add(t, dir, name, len, n);
	if (ret) {
		node_free(t, n);
		return ret;
	}
	if (out)
		*out = n;
	return 0;
}

int sqw_tree_link(sqw_tree_t *t, sqw_node_t *dir, const char *name,
		  size_t len, sqw_node_t *node)
{
	if (node_is_dir(node))
		return -EPERM;
	return entry_add(t, dir, name, len, node);
}

sqw_node_t *sqw_tree_lookup(sqw_tree_t *t, sqw_node_t *dir, const char *name,
			    size_t len)
{
	int found;
	size_t slot, i;

	if (!t->indexed) {
		for (i = 0; node_is_dir(dir) && i < dir->nents; i++)
			if (dir->ents[i]->len == len &&
			    memcmp(dir->ents[i]->name, name, len) == 0)
				return dir->ents[i]->node;
		return NULL;
	}
	slot = slot_find(t, dir, name, len, &found);
	return found ? t->slots[slot]->node : NULL;
}

static void entry_unhash(sqw_tree_t *t, struct sqw_dentry *d)
{
	int found;
	size_t slot = slot_find(t, d->dir, d->name, d->len, &found);

	if (found) {
		t->slots[slot] = TOMBSTONE;
		t->live--;
	}
}

static void subtree_unhash(sqw_tree_t *t, sqw_node_t *n)
{
	size_t i;

	for (i = 0; i < n->nents; i++) {
		entry_unhash(t, n->ents[i]);
		if (node_is_dir(n->ents[i]->node))
			subtree_unhash(t, n->ents[i]->node);
	}
}

int sqw_tree_remove(sqw_tree_t *t, sqw_node_t *dir, const char *name,
		    size_t len)
{
	struct sqw_dentry *d, *last;
	sqw_node_t *n;
	size_t slot;
	int found;

	if (!t->indexed)
		return -ENOTSUP;
	slot = slot_find(t, dir, name, len, &found);
	if (!found)
		return -ENOENT;
	d = t->slots[slot];
	n = d->node;
	t->slots[slot] = TOMBSTONE;
	t->live--;
	last = dir->ents[--dir->nents];
	dir->ents[d->index] = last;
	last->index = d->index;
	if (node_is_dir(n)) {
		dir->nsubdirs--;
		subtree_unhash(t, n);
		subtree_free(t, n, 0);
	} else if (--n->nlink == 0) {
		node_free(t, n);
	} else if (n->first == d) {
		first_refind(t, n);
	}
	return 0;
}

int sqw_tree_walk(sqw_tree_t *t, const char *path, int create_dirs,
		  const struct sqw_attr *dir_attr, sqw_node_t **dir,
		  const char **name, size_t *len)
{
	sqw_node_t *cur = t->root;
	const char *p = path;

	for (;;) {
		const char *s;
		size_t l;

		while (*p == '/')
			p++;
		s = p;
		while (*p && *p != '/')
			p++;
		l = (size_t)(p - s);
		while (*p == '/')
			p++;
		if (l == 1 && s[0] == '.') {
			if (*p)
				continue;
			l = 0;
		}
		if (l == 2 && s[0] == '.' && s[1] == '.')
			return -EINVAL;
		if (!*p) {
			*dir = cur;
			*name = s;
			*len = l;
			return 0;
		}
		if (l > SQW_NAME_MAX)
			return -ENAMETOOLONG;
		{
			sqw_node_t *next = sqw_tree_lookup(t, cur, s, l);
			int ret;

			if (!next) {
				if (!create_dirs)
					return -ENOENT;
				ret = sqw_tree_add(t, cur, s, l, dir_attr, NULL,
						   &next);
				if (ret)
					return ret;
			} else if (!node_is_dir(next)) {
				return -ENOTDIR;
			}
			cur = next;
		}
	}
}

void sqw_node_set_attr(sqw_node_t *n, const struct sqw_attr *attr)
{
	uint32_t type = n->a.mode & S_IFMT;

	n->a = *attr;
	n->a.mode = type | (attr->mode & 07777);
}

void sqw_node_get_attr(const sqw_node_t *n, struct sqw_attr *attr)
{
	*attr = n->a;
}

size_t sqw_node_dir_entries(const sqw_node_t *n)
{
	return node_is_dir(n) ? n->nents : 0;
}

void sqw_node_set_source(sqw_node_t *n, void *src)
{
	if (node_is_reg(n))
		n->src = src;
}

void *sqw_node_get_source(const sqw_node_t *n)
{
	return node_is_reg(n) ? n->src : NULL;
}

const char *const xattr_prefixes[3] = { "user.", "trusted.", "security." };

int xattr_key_split(const char *key, size_t size, uint8_t *prefix, size_t *plen,
		    size_t *nlen)
{
	uint8_t i;

	for (i = 0; i < 3; i++) {
		*plen = strlen(xattr_prefixes[i]);
		if (strncmp(key, xattr_prefixes[i], *plen) == 0)
			break;
	}
	if (i == 3)
		return -ENOTSUP;
	*prefix = i;
	*nlen = strlen(key) - *plen;
	if (*nlen == 0 || *nlen > 0xffff)
		return -EINVAL;
	return size > UINT32_MAX - 16 ? -E2BIG : 0;
}

int sqw_node_set_xattr(sqw_tree_t *t, sqw_node_t *n, const char *key,
		       const void *value, size_t size)
{
	struct sqw_xattr *x = NULL;
	size_t i, plen, nlen;
	uint8_t prefix;
	int ret;
	void *v;

	(void)t;
	ret = xattr_key_split(key, size, &prefix, &plen, &nlen);
	if (ret)
		return ret;
	for (i = 0; i < n->nxattrs; i++) {
		if (n->xattrs[i].prefix == prefix &&
		    n->xattrs[i].name_len == nlen &&
		    memcmp(n->xattrs[i].name, key + plen, nlen) == 0) {
			x = &n->xattrs[i];
			break;
		}
	}
	v = malloc(size ? size : 1);
	if (!v)
		return -ENOMEM;
	memcpy(v, value, size);
	if (!x) {
		size_t cap = n->nxattrs;

		if (n->nxattrs == UINT32_MAX)
			return -E2BIG;
		char *name = strndup(key + plen, nlen);

		if (!name) {
			free(v);
			return -ENOMEM;
		}
		ret = array_reserve((void **)&n->xattrs, &cap, n->nxattrs + 1,
				    sizeof(*n->xattrs));
		if (ret) {
			free(v);
			free(name);
			return ret;
		}
		x = &n->xattrs[n->nxattrs++];
		x->prefix = prefix;
		x->name = name;
		x->name_len = (uint16_t)nlen;
	} else {
		free(x->value);
	}
	x->value = v;
	x->value_len = (uint32_t)size;
	return 0;
}

size_t sqw_node_xattr_list_size(const sqw_node_t *n)
{
	size_t i, sum = 0;

	for (i = 0; i < n->nxattrs; i++)
		sum += strlen(xattr_prefixes[n->xattrs[i].prefix]) +
		       n->xattrs[i].name_len + 1;
	return sum;
}

/* The writer's view of the tree: each node is its own identity. */
static void entry_of(sqw_node_t *n, const struct sqw_dentry *d, struct sqw_entry *e)
{
	memset(e, 0, sizeof(*e));
	if (d) {
		e->name = d->name;
		e->len = d->len;
	}
	e->a = n->a;
	e->node = n;
	if (node_is_reg(n))
		e->src = n->src;
	else if (S_ISLNK(n->a.mode))
		e->target = n->target;
	if (!node_is_dir(n) && n->nlink > 1)
		e->link = (uint64_t)(uintptr_t)n;
	e->has_xattrs = n->nxattrs > 0;
}

static int walk_root(void *ctx, struct sqw_entry *e)
{
	entry_of(((sqw_tree_t *)ctx)->root, NULL, e);
	return 0;
}

static int walk_list(void *ctx, void *dir, sqw_entry_fn emit, void *arg)
{
	sqw_node_t *d = dir;
	struct sqw_entry e;
	uint32_t i;
	int ret;

	(void)ctx;
	for (i = 0; i < d->nents; i++) {
		entry_of(d->ents[i]->node, d->ents[i], &e);
		ret = emit(arg, &e);
		if (ret)
			return ret;
	}
	return 0;
}

static int walk_xattrs(void *ctx, void *node, sqw_xattr_fn put, void *arg)
{
	sqw_node_t *n = node;
	char small[128], *key;
	uint32_t i;
	int ret = 0;

	(void)ctx;
	for (i = 0; i < n->nxattrs && !ret; i++) {
		const struct sqw_xattr *x = &n->xattrs[i];
		size_t plen = strlen(xattr_prefixes[x->prefix]);

		key = plen + x->name_len + 1 <= sizeof(small) ? small :
		      malloc(plen + x->name_len + 1);
		if (!key)
			return -ENOMEM;
		memcpy(key, xattr_prefixes[x->prefix], plen);
		memcpy(key + plen, x->name, x->name_len);
		key[plen + x->name_len] = '\0';
		ret = put(arg, key, x->value, x->value_len);
		if (key != small)
			free(key);
	}
	return ret;
}

static int walk_get(void *ctx, void *node, struct sqw_entry *e)
{
	(void)ctx;
	entry_of(node, NULL, e);
	return 0;
}

const struct sqw_walk_ops tree_walk_ops = {
	.root = walk_root,
	.list = walk_list,
	.xattrs = walk_xattrs,
	.get = walk_get,
};

void sqw_node_path(const sqw_node_t *n, char *buf, size_t size)
{
	const sqw_node_t *p;
	size_t len = 0, skip = 0, lead = 0, pos, l;

	if (size == 0)
		return;
	for (p = n; p && p->first; p = p->first->dir)
		len += 1 + strlen(p->first->name);
	if (len == 0) {
		snprintf(buf, size, "/");
		return;
	}
	/* Too long: "..." and the end of it, as in sqw_error's path. */
	if (len >= size) {
		lead = size > 4 ? 3 : 0;
		skip = len - (size - 1 - lead);
		memcpy(buf, "...", lead);
	}
	buf[len - skip + lead] = '\0';
	/* From the node up: each "/name" ends where the one below it starts. */
	for (pos = len, p = n; p && p->first && pos > skip; p = p->first->dir) {
		const char *name = p->first->name;
		size_t from;

		l = strlen(name);
		pos -= l + 1;
		for (from = pos; from < pos + l + 1; from++)
			if (from >= skip)
				buf[from - skip + lead] = from == pos ? '/' : name[from - pos - 1];
	}
}

static uint64_t data_size(sqw_node_t *n, uint32_t gen)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < n->nents; i++) {
		sqw_node_t *c = n->ents[i]->node;

		if (node_is_dir(c))
			sum += data_size(c, gen);
		else if (node_is_reg(c) && c->visited != gen) {
			c->visited = gen;
			sum += c->a.size;
		}
	}
	return sum;
}

uint64_t sqw_tree_data_size(sqw_tree_t *t)
{
	return data_size(t->root, tree_next_gen(t));
}

struct copy_dir {
	sqw_node_t *from, *to;
};

sqw_tree_t *sqw_tree_copy_files(sqw_tree_t *t, size_t max_nodes, int *err)
{
	sqw_tree_t *c = tree_create(0);
	struct copy_dir *todo = NULL;
	struct u64map links = { 0 };	/* a hard-linked original -> its copy */
	size_t n = 0, cap = 0, nodes = 1;
	int ret = -ENOMEM;

	if (!c || array_reserve((void **)&todo, &cap, 1, sizeof(*todo)))
		goto fail;
	c->root->a = t->root->a;
	todo[n++] = (struct copy_dir){ t->root, c->root };
	while (n) {
		struct copy_dir d = todo[--n];
		uint32_t i;

		for (i = 0; i < d.from->nents; i++) {
			const struct sqw_dentry *e = d.from->ents[i];
			sqw_node_t *f = e->node, *to = NULL;
			uint64_t *v = NULL;
			int isnew;

			if (!node_is_dir(f) && !node_is_reg(f))
				continue;
			if (node_is_reg(f) && f->nlink > 1) {
				v = u64map_get(&links, (uint64_t)(uintptr_t)f, &isnew);
				if (!v)
					goto nomem;
				to = (sqw_node_t *)(uintptr_t)*v;
			}
			if (!to) {
				if (++nodes > max_nodes) {
					ret = -E2BIG;
					goto fail;
				}
				to = node_new(c, &f->a);
				if (!to)
					goto nomem;
				if (node_is_reg(f))
					to->src = f->src;
				if (v)
					*v = (uint64_t)(uintptr_t)to;
				if (node_is_dir(f)) {
					if (array_reserve((void **)&todo, &cap, n + 1, sizeof(*todo)))
						goto nomem;
					todo[n++] = (struct copy_dir){ f, to };
				}
			}
			ret = entry_add(c, d.to, e->name, e->len, to);
			if (ret)
				goto fail;
		}
	}
	free(todo);
	u64map_free(&links);
	return c;
nomem:
	ret = -ENOMEM;
fail:
	/* No source free is set: the sources stay the original's. */
	sqw_tree_destroy(c);
	free(todo);
	u64map_free(&links);
	*err = ret;
	return NULL;
}
