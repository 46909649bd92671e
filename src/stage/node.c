/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The staged tree: nodes by inode number, directory entries, xattrs. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/limits.h>	/* XATTR_SIZE_MAX */
#include <sys/xattr.h>
#include <unistd.h>

#include "stage/stage.h"
#include "sqw/image.h"

static size_t hash_ino(fuse_ino_t ino, size_t mask)
{
	uint64_t h = ino * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 17) & mask;
}

static size_t hash_name(const char *name, size_t len, size_t mask)
{
	uint64_t h = 1469598103934665603ull;	/* FNV-1a */
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= 1099511628211ull;
	}
	return (size_t)(h ^ (h >> 29)) & mask;
}

static int itab_grow(struct stage *s)
{
	size_t n = s->islots ? s->islots * 2 : 4096, i;
	struct snode **t = calloc(n, sizeof(*t)), *p, *next;

	if (!t)
		return -ENOMEM;
	for (i = 0; i < s->islots; i++) {
		for (p = s->itab[i]; p; p = next) {
			size_t h = hash_ino(p->ino, n - 1);

			next = p->hnext;
			p->hnext = t[h];
			t[h] = p;
		}
	}
	free(s->itab);
	s->itab = t;
	s->islots = n;
	return 0;
}

struct snode *stage_get(struct stage *s, fuse_ino_t ino)
{
	struct snode *p;

	if (!s->islots)
		return NULL;
	for (p = s->itab[hash_ino(ino, s->islots - 1)]; p; p = p->hnext)
		if (p->ino == ino)
			return p;
	return NULL;
}

void node_touch(struct snode *n, int mtime, int ctime)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	if (mtime)
		n->mtime = now;
	if (ctime)
		n->ctime = now;
}

/* ------------------------------------------------------------------ */
/* Id use counts (see struct stage_ids). */

static size_t hash_id(uint32_t id, size_t mask)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 23) & mask;
}

static struct stage_idslot *ids_find(const struct stage_ids *t, uint32_t id)
{
	size_t i;

	if (!t->cap)
		return NULL;
	for (i = hash_id(id, t->cap - 1); t->tab[i].refs; i = (i + 1) & (t->cap - 1))
		if (t->tab[i].id == id)
			return &t->tab[i];
	return NULL;
}

/* Room for two more ids, so that ids_ref cannot fail after it. */
static int ids_reserve(struct stage_ids *t)
{
	size_t cap = t->cap ? t->cap * 2 : 64, i, k;
	struct stage_idslot *tab;

	if ((t->n + 2) * 2 <= t->cap)
		return 0;
	tab = calloc(cap, sizeof(*tab));
	if (!tab)
		return -ENOMEM;
	for (i = 0; i < t->cap; i++) {
		if (!t->tab[i].refs)
			continue;
		for (k = hash_id(t->tab[i].id, cap - 1); tab[k].refs; k = (k + 1) & (cap - 1))
			;
		tab[k] = t->tab[i];
	}
	free(t->tab);
	t->tab = tab;
	t->cap = cap;
	return 0;
}

static void ids_ref(struct stage_ids *t, uint32_t id)
{
	struct stage_idslot *e = ids_find(t, id);
	size_t i;

	if (e) {
		e->refs++;
		return;
	}
	for (i = hash_id(id, t->cap - 1); t->tab[i].refs; i = (i + 1) & (t->cap - 1))
		;
	t->tab[i].id = id;
	t->tab[i].refs = 1;
	t->n++;
}

static void ids_unref(struct stage_ids *t, uint32_t id)
{
	struct stage_idslot *e = ids_find(t, id);
	size_t i, j, h, mask = t->cap - 1;

	if (!e || --e->refs)
		return;
	t->n--;
	/* Backward shift: later slots of the probe run move up, no tombstones. */
	i = (size_t)(e - t->tab);
	for (j = (i + 1) & mask; t->tab[j].refs; j = (j + 1) & mask) {
		h = hash_id(t->tab[j].id, mask);
		/* Slot j may move to i only if its home is not in (i, j]. */
		if (((j - h) & mask) >= ((j - i) & mask)) {
			t->tab[i] = t->tab[j];
			i = j;
		}
	}
	t->tab[i].refs = 0;
}

/* The ids the image will store for uid:gid. */
static void image_ids(const struct stage *s, uid_t uid, gid_t gid, uint32_t out[2])
{
	const struct sqw_image_opts *o = &s->opts.img;

	out[0] = (o->flags & SQW_OPT_ALL_ROOT) ? 0 : (uint32_t)uid;
	out[1] = (o->flags & SQW_OPT_ALL_ROOT) ? 0 : (uint32_t)gid;
	if (o->force_uid >= 0)
		out[0] = (uint32_t)o->force_uid;
	if (o->force_gid >= 0)
		out[1] = (uint32_t)o->force_gid;
}

int stage_ids_check(const struct stage *s, const struct snode *n, uid_t uid, gid_t gid)
{
	const struct stage_ids *t = &s->ids;
	uint32_t nw[2], old[2];
	size_t after = t->n, i, k;

	image_ids(s, uid, gid, nw);
	if (n)
		image_ids(s, n->uid, n->gid, old);
	/* New ids not in use yet. */
	for (i = 0; i < 2; i++)
		if ((i == 0 || nw[1] != nw[0]) && !ids_find(t, nw[i]))
			after++;
	/* Old ids that only n uses and that it gives up. */
	for (i = 0; n && i < 2; i++) {
		const struct stage_idslot *e;
		uint32_t uses = 0;

		if (i == 1 && old[1] == old[0])
			break;
		if (old[i] == nw[0] || old[i] == nw[1])
			continue;
		for (k = 0; k < 2; k++)
			uses += old[k] == old[i];
		e = ids_find(t, old[i]);
		if (e && e->refs == uses)
			after--;
	}
	return after > SQW_IDS_MAX ? -EOVERFLOW : 0;
}

static int node_ids_ref(struct stage *s, uid_t uid, gid_t gid)
{
	uint32_t v[2];

	if (ids_reserve(&s->ids))
		return -ENOMEM;
	image_ids(s, uid, gid, v);
	ids_ref(&s->ids, v[0]);
	ids_ref(&s->ids, v[1]);
	return 0;
}

static void node_ids_unref(struct stage *s, const struct snode *n)
{
	uint32_t v[2];

	image_ids(s, n->uid, n->gid, v);
	ids_unref(&s->ids, v[0]);
	ids_unref(&s->ids, v[1]);
}

/* ------------------------------------------------------------------ */

struct snode *stage_new_node_ino(struct stage *s, fuse_ino_t ino, mode_t mode,
				 uid_t uid, gid_t gid, dev_t rdev)
{
	struct snode *n;
	size_t h;

	/* Chains of one on average: 8 to 16 bytes an inode. */
	if (s->inodes + 1 > s->islots && itab_grow(s))
		return NULL;
	n = slab_alloc(&s->slab, sizeof(*n));
	if (!n)
		return NULL;
	if (node_ids_ref(s, uid, gid)) {
		slab_free(&s->slab, n, sizeof(*n));
		return NULL;
	}
	n->ino = ino;
	if (ino >= s->next_ino)
		s->next_ino = ino + 1;
	n->mode = mode;
	n->uid = uid;
	n->gid = gid;
	if (S_ISCHR(mode) || S_ISBLK(mode))
		n->rdev = rdev;
	clock_gettime(CLOCK_REALTIME, &n->mtime);
	n->atime = n->ctime = n->mtime;
	h = hash_ino(n->ino, s->islots - 1);
	n->hnext = s->itab[h];
	s->itab[h] = n;
	s->inodes++;
	return n;
}

struct snode *stage_new_node(struct stage *s, mode_t mode, uid_t uid, gid_t gid,
			     dev_t rdev)
{
	return stage_new_node_ino(s, s->next_ino, mode, uid, gid, rdev);
}

int stage_node_set_owner(struct stage *s, struct snode *n, uid_t uid, gid_t gid)
{
	/* The new ids first: a shared id never drops to 0 in between. */
	if (node_ids_ref(s, uid, gid))
		return -ENOMEM;
	node_ids_unref(s, n);
	n->uid = uid;
	n->gid = gid;
	return 0;
}

static void node_destroy(struct stage *s, struct snode *n)
{
	size_t i;

	for (i = 0; i < n->nxattrs; i++) {
		free(n->xattrs[i].name);
		free(n->xattrs[i].value);
	}
	free(n->xattrs);
	if (S_ISLNK(n->mode))
		free(n->target);
	else if (S_ISDIR(n->mode))
		free(n->tab);
	else if (S_ISREG(n->mode))
		stage_bg_forget(s, n);
	slab_free(&s->slab, n, sizeof(*n));
}

/* Free n if nothing refers to it any more. */
static void itab_remove(struct stage *s, struct snode *n)
{
	struct snode **pp;

	for (pp = &s->itab[hash_ino(n->ino, s->islots - 1)]; *pp; pp = &(*pp)->hnext) {
		if (*pp == n) {
			*pp = n->hnext;
			break;
		}
	}
	s->inodes--;
	node_ids_unref(s, n);
}

void stage_maybe_free(struct stage *s, struct snode *n)
{
	char name[STAGE_SPOOL_NAME_SIZE];

	if (n->links || n->nlookup || n->opens || n == s->root)
		return;
	/* unnamed, or its last name went while open or by a rename: data outlived it */
	if (S_ISREG(n->mode) && !n->data_gone)
		unlinkat(s->datafd, stage_spool_name(name, n->ino), 0);
	itab_remove(s, n);
	node_destroy(s, n);
}

void stage_node_drop(struct stage *s, struct snode *n)
{
	size_t j;
	struct sdirent *d, *dn;

	for (j = 0; S_ISDIR(n->mode) && j < n->nslots; j++) {
		for (d = n->tab[j]; d; d = dn) {
			dn = d->next;
			slab_free(&s->slab, d, SDIRENT_SIZE(d->len));
		}
	}
	itab_remove(s, n);
	node_destroy(s, n);
}

void node_unlinked(struct stage *s, struct snode *n, int replaced)
{
	char name[STAGE_SPOOL_NAME_SIZE];

	n->links--;
	node_touch(n, 0, 1);
	if (!n->links && n->writers) {
		/* A seal waiting for writers need not wait for this one now. */
		s->unnamed_writers += n->writers;
		pthread_cond_broadcast(&s->released);
	}
	if (!n->links && S_ISREG(n->mode)) {
		/* No seal takes its stored blocks any more: free their space. */
		stage_bg_changed(s, n, 0, UINT64_MAX);
		/*
		 * Open, or replaced by a rename, its data file stays until the
		 * kernel forgets the inode (stage_maybe_free): open() of
		 * /proc/self/fd/N works as on a local file system, and a reader
		 * that looked the name up just before a rename replaced the
		 * file opens the old one (rename promises the name never
		 * vanishes).  Else it goes now, and rm frees the space as it
		 * returns; an open racing the rm gets ESTALE (ops_file.c).
		 * Its stored blocks go either way: no seal takes them.
		 */
		if (!n->opens && !replaced) {
			unlinkat(s->datafd, stage_spool_name(name, n->ino), 0);
			n->data_gone = 1;
		}
		stage_bg_forget(s, n);
	}
}

int stage_init(struct stage *s, uid_t uid, gid_t gid)
{
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->released, NULL);
	s->next_ino = FUSE_ROOT_ID;
	s->root = stage_new_node(s, S_IFDIR | 0755, uid, gid, 0);
	if (!s->root)
		return -ENOMEM;
	s->root->links = 1;
	s->root->parent = s->root;
	s->gen = 1;
	return 0;
}

void stage_free(struct stage *s)
{
	size_t i;
	struct snode *p, *next;

	for (i = 0; i < s->ninval; i++)
		free(s->inval[i].name);	/* from the unmount's seal */
	free(s->inval);

	for (i = 0; i < s->islots; i++) {
		for (p = s->itab[i]; p; p = next) {
			size_t j;

			next = p->hnext;
			for (j = 0; S_ISDIR(p->mode) && j < p->nslots; j++) {
				struct sdirent *d, *dn;

				for (d = p->tab[j]; d; d = dn) {
					dn = d->next;
					slab_free(&s->slab, d, SDIRENT_SIZE(d->len));
				}
			}
			node_destroy(s, p);
		}
	}
	free(s->itab);
	s->itab = NULL;
	s->islots = 0;
	free(s->ids.tab);
	memset(&s->ids, 0, sizeof(s->ids));
	slab_destroy(&s->slab);
	free(s->last_summary);
	s->last_summary = NULL;
}

struct sdirent *dir_find(const struct snode *dir, const char *name, size_t len)
{
	struct sdirent *d;

	if (!dir->nslots)
		return NULL;
	for (d = dir->tab[hash_name(name, len, dir->nslots - 1)]; d; d = d->next)
		if (d->len == len && !memcmp(d->name, name, len))
			return d;
	return NULL;
}

static int dir_grow(struct snode *dir)
{
	size_t n = dir->nslots ? dir->nslots * 2 : 8, i;
	struct sdirent **t = calloc(n, sizeof(*t)), *d, *next;

	if (!t)
		return -ENOMEM;
	for (i = 0; i < dir->nslots; i++) {
		for (d = dir->tab[i]; d; d = next) {
			size_t h = hash_name(d->name, d->len, n - 1);

			next = d->next;
			d->next = t[h];
			t[h] = d;
		}
	}
	free(dir->tab);
	dir->tab = t;
	dir->nslots = n;
	return 0;
}

#ifndef STAGE_DIR_COOKIES	/* a test build may lower it */
#define STAGE_DIR_COOKIES (UINT32_MAX - 3)
#endif

static int cookie_cmp(const void *a, const void *b)
{
	uint32_t x = (*(struct sdirent *const *)a)->cookie;
	uint32_t y = (*(struct sdirent *const *)b)->cookie;

	return (x > y) - (x < y);
}

/*
 * After 2^32 - 3 entries made in one directory in one mount: its entries
 * numbered again from the start, in the same order.  A listing under way
 * meanwhile may then show a name twice or miss one.
 */
static void dir_renumber(struct snode *dir)
{
	struct sdirent **v = malloc((dir->nents ? dir->nents : 1) * sizeof(*v)), *d;
	uint32_t i, k = 0;

	if (!v) {
		dir->ncookies = 0;	/* wrap: the same, less orderly */
		return;
	}
	for (i = 0; i < dir->nslots; i++)
		for (d = dir->tab[i]; d; d = d->next)
			v[k++] = d;
	qsort(v, k, sizeof(*v), cookie_cmp);
	for (i = 0; i < k; i++)
		v[i]->cookie = 3 + i;
	dir->ncookies = k;
	free(v);
}

int dir_add(struct stage *s, struct snode *dir, const char *name, size_t len,
	    struct snode *n)
{
	struct sdirent *d;
	size_t h;

	if (dir->nents + 1 > dir->nslots && dir_grow(dir))
		return -ENOMEM;
	if (len > STAGE_NAME_MAX)
		return -ENAMETOOLONG;
	d = slab_alloc(&s->slab, SDIRENT_SIZE(len));
	if (!d)
		return -ENOMEM;
	d->node = n;
	d->len = (uint16_t)len;
	memcpy(d->name, name, len);
	d->name[len] = '\0';
	/* Before d is in the table: a renumbering counts nents entries. */
	if (dir->ncookies >= STAGE_DIR_COOKIES)
		dir_renumber(dir);
	/* 1 and 2 are the places of "." and "..". */
	d->cookie = 3 + dir->ncookies++;
	h = hash_name(name, len, dir->nslots - 1);
	d->next = dir->tab[h];
	dir->tab[h] = d;
	dir->nents++;
	if (!n->links)
		s->unnamed_writers -= n->writers;	/* an O_TMPFILE named */
	n->links++;
	if (S_ISDIR(n->mode)) {
		n->parent = dir;
		dir->nsubdirs++;
	}
	return 0;
}

void dir_del(struct stage *s, struct snode *dir, const char *name, size_t len)
{
	struct sdirent **pp, *d;

	for (pp = &dir->tab[hash_name(name, len, dir->nslots - 1)]; *pp; pp = &(*pp)->next) {
		d = *pp;
		if (d->len == len && !memcmp(d->name, name, len)) {
			*pp = d->next;
			dir->nents--;
			if (S_ISDIR(d->node->mode))
				dir->nsubdirs--;
			slab_free(&s->slab, d, SDIRENT_SIZE(d->len));
			return;
		}
	}
}

void node_stat(const struct snode *n, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = n->ino;
	st->st_mode = n->mode;
	st->st_uid = n->uid;
	st->st_gid = n->gid;
	st->st_rdev = node_rdev(n);
	st->st_nlink = S_ISDIR(n->mode) ? (n->links ? 2 + n->nsubdirs : 0) : n->links;
	if (S_ISREG(n->mode))
		st->st_size = (off_t)n->size;
	else if (S_ISLNK(n->mode))
		st->st_size = (off_t)strlen(n->target);
	else if (S_ISDIR(n->mode))
		st->st_size = (off_t)(n->nents + 2) * 32;
	/*
	 * What cp and tar size their writes by: one request of the largest
	 * size the kernel sends us (max_write) instead of 8 of cp's 128 KiB.
	 */
	st->st_blksize = STAGE_IO_SIZE;
	if (S_ISREG(n->mode))
		st->st_blocks = (blkcnt_t)n->nblk;
	else
		st->st_blocks = (blkcnt_t)((st->st_size + 511) / 512);
	st->st_atim = n->atime;
	st->st_mtim = n->mtime;
	st->st_ctim = n->ctime;
}

int xattr_name_check(const char *name)
{
	static const char *const ns[] = { "user.", "trusted.", "security." };
	size_t i, len;

	for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		len = strlen(ns[i]);
		/* A bare prefix names no attribute: the VFS says EINVAL there. */
		if (!strncmp(name, ns[i], len))
			return name[len] ? 0 : EINVAL;
	}
	return ENOTSUP;
}

static uint32_t xhash(const char *name)
{
	return (uint32_t)hash_name(name, strlen(name), UINT32_MAX);
}

/* Files can hold thousands of xattrs (stress-ng fills them): compare hashes. */
static struct sxattr *xfind_h(const struct snode *n, const char *name, uint32_t h)
{
	size_t i;

	for (i = 0; i < n->nxattrs; i++)
		if (n->xattrs[i].hash == h && !strcmp(n->xattrs[i].name, name))
			return &n->xattrs[i];
	return NULL;
}

static struct sxattr *xfind(const struct snode *n, const char *name)
{
	return xfind_h(n, name, xhash(name));
}

const struct sxattr *xattr_get(const struct snode *n, const char *name)
{
	return xfind(n, name);
}

static size_t xattr_list_size(const struct snode *n)
{
	size_t i, len = 0;

	for (i = 0; i < n->nxattrs; i++)
		len += strlen(n->xattrs[i].name) + 1;
	return len;
}

int xattr_set(struct snode *n, const char *name, const void *v, size_t size, int flags)
{
	uint32_t h = xhash(name);
	struct sxattr *x = xfind_h(n, name, h), *arr;
	void *copy;

	if (x && (flags & XATTR_CREATE))
		return -EEXIST;
	if (!x && (flags & XATTR_REPLACE))
		return -ENODATA;
	if (size > XATTR_SIZE_MAX)
		return -E2BIG;
	copy = malloc(size ? size : 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, v, size);
	if (x) {
		free(x->value);
		x->value = copy;
		x->size = (uint32_t)size;
		return 0;
	}
	/*
	 * A new name must leave the name list within what listxattr(2) can
	 * return (XATTR_LIST_MAX), or the file's xattrs could never be listed
	 * (copied, backed up) again; it also bounds the memory per inode.
	 */
	if (xattr_list_size(n) + strlen(name) + 1 > STAGE_XATTR_LIST_MAX) {
		free(copy);
		return -ENOSPC;
	}
	arr = realloc(n->xattrs, (n->nxattrs + 1) * sizeof(*arr));
	if (!arr) {
		free(copy);
		return -ENOMEM;
	}
	n->xattrs = arr;
	x = &arr[n->nxattrs];
	x->name = strdup(name);
	if (!x->name) {
		free(copy);
		return -ENOMEM;
	}
	x->value = copy;
	x->size = (uint32_t)size;
	x->hash = h;
	n->nxattrs++;
	return 0;
}

int xattr_remove(struct snode *n, const char *name)
{
	struct sxattr *x = xfind(n, name);

	if (!x)
		return -ENODATA;
	free(x->name);
	free(x->value);
	*x = n->xattrs[--n->nxattrs];
	return 0;
}
