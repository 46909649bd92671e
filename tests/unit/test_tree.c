/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The tree model: names, links, removal, walking, xattrs, paths. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <cmocka.h>

#include "sqw/image.h"
#include "sqw/tree.h"
#include "sqw/tree_i.h"

static const struct sqw_attr file_attr = { .mode = S_IFREG | 0644, .uid = 1, .gid = 2,
					   .mtime = 100, .size = 10 };
static const struct sqw_attr dir_attr = { .mode = S_IFDIR | 0750, .uid = 3, .gid = 4,
					  .mtime = 200 };
static const struct sqw_attr link_attr = { .mode = S_IFLNK | 0777 };

static sqw_node_t *add(sqw_tree_t *t, sqw_node_t *dir, const char *name,
		       const struct sqw_attr *a)
{
	sqw_node_t *n = NULL;
	int ret = sqw_tree_add(t, dir, name, strlen(name), a,
			       S_ISLNK(a->mode) ? "target" : NULL, &n);

	if (ret)
		fail_msg("adding %s: %d", name, ret);
	assert_non_null(n);
	return n;
}

static sqw_node_t *lookup(sqw_tree_t *t, sqw_node_t *dir, const char *name)
{
	return sqw_tree_lookup(t, dir, name, strlen(name));
}

static void check_path(const sqw_node_t *n, const char *want)
{
	char buf[1024];

	memset(buf, 'X', sizeof(buf));
	sqw_node_path(n, buf, sizeof(buf));
	if (strcmp(buf, want))
		fail_msg("sqw_node_path = \"%s\", want \"%s\"", buf, want);
}

/* ---- basics ---- */

static void test_root(void **state)
{
	sqw_tree_t *t = sqw_tree_create();
	struct sqw_attr a;

	(void)state;
	assert_non_null(t);
	assert_non_null(sqw_tree_root(t));
	sqw_node_get_attr(sqw_tree_root(t), &a);
	assert_int_equal(a.mode, S_IFDIR | 0755);
	assert_int_equal(a.uid, 0);
	assert_int_equal(a.gid, 0);
	assert_int_equal(a.mtime, 0);
	check_path(sqw_tree_root(t), "/");
	assert_true(sqw_tree_data_size(t) == 0);
	sqw_tree_destroy(t);
	sqw_tree_destroy(NULL);
}

static void test_add_lookup(void **state)
{
	sqw_tree_t *t = sqw_tree_create();
	sqw_node_t *root = sqw_tree_root(t), *a, *d, *da, *s, *n;
	struct sqw_attr at;

	(void)state;
	a = add(t, root, "a", &file_attr);
	d = add(t, root, "d", &dir_attr);
	da = add(t, d, "a", &file_attr);	/* same name, other directory */
	s = add(t, root, "s", &link_attr);
	assert_ptr_not_equal(a, da);
	assert_ptr_equal(lookup(t, root, "a"), a);
	assert_ptr_equal(lookup(t, root, "d"), d);
	assert_ptr_equal(lookup(t, d, "a"), da);
	assert_ptr_equal(lookup(t, root, "s"), s);
	assert_null(lookup(t, root, "b"));
	assert_null(lookup(t, d, "d"));
	assert_null(sqw_tree_lookup(t, root, "ab", 2));
	assert_ptr_equal(sqw_tree_lookup(t, root, "ab", 1), a);	/* len counts */
	assert_null(lookup(t, a, "a"));		/* a file has no entries */
	sqw_node_get_attr(da, &at);
	assert_memory_equal(&at, &file_attr, sizeof(at));
	assert_string_equal(s->target, "target");
	assert_int_equal(d->nsubdirs, 0);
	assert_int_equal(root->nsubdirs, 1);
	assert_int_equal(root->nents, 3);

	/* -EEXIST, and the existing entry survives; out is not touched. */
	n = (sqw_node_t *)&n;
	assert_int_equal(sqw_tree_add(t, root, "a", 1, &dir_attr, NULL, &n), -EEXIST);
	assert_ptr_equal(n, (sqw_node_t *)&n);
	assert_int_equal(sqw_tree_add(t, root, "d", 1, &file_attr, NULL, NULL), -EEXIST);
	assert_ptr_equal(lookup(t, root, "a"), a);
	assert_true(S_ISREG(a->a.mode));
	assert_int_equal(root->nents, 3);

	/* out may be NULL */
	assert_int_equal(sqw_tree_add(t, root, "z", 1, &file_attr, NULL, NULL), 0);
	assert_non_null(lookup(t, root, "z"));

	/* -ENOTDIR: adding below a file or a symlink. */
	assert_int_equal(sqw_tree_add(t, a, "x", 1, &file_attr, NULL, NULL), -ENOTDIR);
	assert_int_equal(sqw_tree_add(t, s, "x", 1, &file_attr, NULL, NULL), -ENOTDIR);
	sqw_tree_destroy(t);
}

static void test_names(void **state)
{
	sqw_tree_t *t = sqw_tree_create();
	sqw_node_t *root = sqw_tree_root(t);
	char name[300];

	(void)state;
	memset(name, 'n', sizeof(name));
	assert_int_equal(sqw_tree_add(t, root, name, 256, &file_attr, NULL, NULL), 0);
	assert_non_null(sqw_tree_lookup(t, root, name, 256));
	assert_int_equal(sqw_tree_add(t, root, name, 257, &file_attr, NULL, NULL),
			 -ENAMETOOLONG);
	assert_int_equal(sqw_tree_add(t, root, name, 300, &file_attr, NULL, NULL),
			 -ENAMETOOLONG);
	assert_null(sqw_tree_lookup(t, root, name, 257));
	assert_int_equal(sqw_tree_add(t, root, ".", 1, &file_attr, NULL, NULL), -EINVAL);
	assert_int_equal(sqw_tree_add(t, root, "..", 2, &dir_attr, NULL, NULL), -EINVAL);
	assert_int_equal(sqw_tree_add(t, root, "a/b", 3, &file_attr, NULL, NULL), -EINVAL);
	assert_int_equal(sqw_tree_add(t, root, "/", 1, &file_attr, NULL, NULL), -EINVAL);
	assert_int_equal(sqw_tree_add(t, root, "a/", 2, &file_attr, NULL, NULL), -EINVAL);
	assert_int_equal(sqw_tree_add(t, root, "", 0, &file_attr, NULL, NULL), -EINVAL);
	assert_int_equal(sqw_tree_add(t, root, "a\0b", 3, &file_attr, NULL, NULL), -EINVAL);
	assert_int_equal(root->nents, 1);
	/* Look-alikes that are fine. */
	assert_int_equal(sqw_tree_add(t, root, "...", 3, &file_attr, NULL, NULL), 0);
	assert_int_equal(sqw_tree_add(t, root, ".a", 2, &file_attr, NULL, NULL), 0);
	assert_int_equal(sqw_tree_add(t, root, "a.", 2, &file_attr, NULL, NULL), 0);
	assert_int_equal(sqw_tree_add(t, root, "\xff\x80", 2, &file_attr, NULL, NULL), 0);
	/* Names need not be NUL-terminated at len. */
	assert_int_equal(sqw_tree_add(t, root, "xyz", 2, &file_attr, NULL, NULL), 0);
	assert_non_null(lookup(t, root, "xy"));
	assert_null(lookup(t, root, "xyz"));
	assert_int_equal(root->nents, 6);
	sqw_tree_destroy(t);
}

static void test_symlink_targets(void **state)
{
	sqw_tree_t *t = sqw_tree_create();
	sqw_node_t *root = sqw_tree_root(t), *n;
	char target[5000];

	(void)state;
	assert_int_equal(sqw_tree_add(t, root, "l", 1, &link_attr, NULL, NULL), -EINVAL);
	assert_int_equal(sqw_tree_add(t, root, "l", 1, &link_attr, "", NULL), -EINVAL);
	memset(target, 't', sizeof(target));
	target[4095] = '\0';
	assert_int_equal(sqw_tree_add(t, root, "l", 1, &link_attr, target, &n), 0);
	assert_int_equal(strlen(n->target), 4095);
	target[4095] = 't';
	target[4096] = '\0';
	assert_int_equal(sqw_tree_add(t, root, "m", 1, &link_attr, target, NULL),
			 -ENAMETOOLONG);
	assert_null(lookup(t, root, "m"));
	sqw_tree_destroy(t);
}

/* ---- hard links ---- */

static void test_link(void **state)
{
	sqw_tree_t *t = sqw_tree_create();
	sqw_node_t *root = sqw_tree_root(t), *f, *d, *s;

	(void)state;
	f = add(t, root, "f", &file_attr);
	d = add(t, root, "d", &dir_attr);
	s = add(t, root, "s", &link_attr);
	assert_int_equal(f->nlink, 1);
	assert_int_equal(sqw_tree_link(t, d, "g", 1, f), 0);
	assert_int_equal(sqw_tree_link(t, root, "h", 1, f), 0);
	assert_int_equal(f->nlink, 3);
	assert_ptr_equal(lookup(t, d, "g"), f);
	assert_ptr_equal(lookup(t, root, "h"), f);
	assert_int_equal(sqw_tree_link(t, root, "s2", 2, s), 0);	/* symlinks too */
	assert_int_equal(s->nlink, 2);

	assert_int_equal(sqw_tree_link(t, root, "d2", 2, d), -EPERM);
	assert_int_equal(sqw_tree_link(t, d, "r", 1, root), -EPERM);
	assert_null(lookup(t, root, "d2"));
	assert_int_equal(sqw_tree_link(t, root, "f", 1, f), -EEXIST);
	assert_int_equal(sqw_tree_link(t, root, "d", 1, f), -EEXIST);
	assert_int_equal(sqw_tree_link(t, f, "x", 1, f), -ENOTDIR);
	assert_int_equal(sqw_tree_link(t, root, "..", 2, f), -EINVAL);
	assert_int_equal(f->nlink, 3);

	/* Data of hard links is counted once. */
	assert_true(sqw_tree_data_size(t) == 10);
	add(t, d, "other", &file_attr);
	assert_true(sqw_tree_data_size(t) == 20);
	assert_true(sqw_tree_data_size(t) == 20);	/* repeatable */
	sqw_tree_destroy(t);
}

/* ---- removal ---- */

static int freed_count;
static void *freed_last;

static void src_free(void *src)
{
	freed_count++;
	freed_last = src;
}

static void test_remove(void **state)
{
	sqw_tree_t *t = sqw_tree_create();
	sqw_node_t *root = sqw_tree_root(t), *f, *d, *sub, *g, *n;
	static int src_f, src_g, src_h;

	(void)state;
	freed_count = 0;
	sqw_tree_set_source_free(t, src_free);
	f = add(t, root, "f", &file_attr);
	sqw_node_set_source(f, &src_f);
	assert_ptr_equal(sqw_node_get_source(f), &src_f);
	assert_int_equal(sqw_tree_link(t, root, "f2", 2, f), 0);
	d = add(t, root, "d", &dir_attr);
	sub = add(t, d, "sub", &dir_attr);
	g = add(t, sub, "g", &file_attr);
	sqw_node_set_source(g, &src_g);
	add(t, sub, "e", &dir_attr);
	assert_int_equal(d->nsubdirs, 1);
	assert_int_equal(root->nsubdirs, 1);

	assert_int_equal(sqw_tree_remove(t, root, "nope", 4), -ENOENT);
	/* One name of a linked file: the node lives on. */
	assert_int_equal(sqw_tree_remove(t, root, "f", 1), 0);
	assert_null(lookup(t, root, "f"));
	assert_ptr_equal(lookup(t, root, "f2"), f);
	assert_int_equal(f->nlink, 1);
	assert_int_equal(freed_count, 0);
	assert_int_equal(sqw_tree_remove(t, root, "f", 1), -ENOENT);
	/* The last name: freed, source released once. */
	assert_int_equal(sqw_tree_remove(t, root, "f2", 2), 0);
	assert_int_equal(freed_count, 1);
	assert_ptr_equal(freed_last, &src_f);
	assert_int_equal(root->nents, 1);

	/* A directory goes recursively, with its subtree's names. */
	assert_int_equal(sqw_tree_remove(t, root, "d", 1), 0);
	assert_int_equal(freed_count, 2);
	assert_ptr_equal(freed_last, &src_g);
	assert_null(lookup(t, root, "d"));
	assert_int_equal(root->nsubdirs, 0);
	assert_int_equal(root->nents, 0);
	/* Re-created names start empty, whatever address malloc hands out. */
	d = add(t, root, "d", &dir_attr);
	assert_null(lookup(t, d, "sub"));
	sub = add(t, d, "sub", &dir_attr);
	assert_null(lookup(t, sub, "g"));
	assert_null(lookup(t, sub, "e"));
	n = add(t, sub, "g", &file_attr);
	sqw_node_set_source(n, &src_h);
	assert_ptr_equal(lookup(t, sub, "g"), n);
	/* Removing a subdirectory updates its parent's count. */
	add(t, d, "sub2", &dir_attr);
	assert_int_equal(d->nsubdirs, 2);
	assert_int_equal(sqw_tree_remove(t, d, "sub2", 4), 0);
	assert_int_equal(d->nsubdirs, 1);
	/* Remaining sources are released by destroy. */
	sqw_tree_destroy(t);
	assert_int_equal(freed_count, 3);
	assert_ptr_equal(freed_last, &src_h);
}

/* Removing entries keeps the others reachable (swap-with-last removal). */
static void test_remove_many(void **state)
{
	sqw_tree_t *t = sqw_tree_create();
	sqw_node_t *root = sqw_tree_root(t), *nodes[2000];
	char name[32];
	size_t i;

	(void)state;
	for (i = 0; i < 2000; i++) {
		snprintf(name, sizeof(name), "e%zu", i);
		nodes[i] = add(t, root, name, &file_attr);
	}
	for (i = 0; i < 2000; i += 3) {
		snprintf(name, sizeof(name), "e%zu", i);
		assert_int_equal(sqw_tree_remove(t, root, name, strlen(name)), 0);
	}
	for (i = 0; i < 2000; i++) {
		snprintf(name, sizeof(name), "e%zu", i);
		if (i % 3 == 0)
			assert_null(lookup(t, root, name));
		else
			assert_ptr_equal(lookup(t, root, name), nodes[i]);
	}
	assert_int_equal(root->nents, 2000 - 667);
	for (i = 0; i < root->nents; i++) {
		assert_int_equal(root->ents[i]->index, i);
		assert_ptr_equal(root->ents[i]->dir, root);
	}
	/* Churn: remove and re-add many times (tombstones must not pile up). */
	for (i = 0; i < 50000; i++) {
		snprintf(name, sizeof(name), "churn%zu", i);
		add(t, root, name, &file_attr);
		assert_int_equal(sqw_tree_remove(t, root, name, strlen(name)), 0);
	}
	for (i = 1; i < 2000; i += 3) {
		snprintf(name, sizeof(name), "e%zu", i);
		assert_ptr_equal(lookup(t, root, name), nodes[i]);
	}
	sqw_tree_destroy(t);
}

/* ---- the writer's view (tree_walk_ops) ---- */

struct listed {
	struct sqw_entry e[16];
	char names[16][8];
	size_t n;
};

static int collect(void *arg, const struct sqw_entry *e)
{
	struct listed *l = arg;

	assert_true(l->n < 16);
	assert_true(e->len < 8);
	memcpy(l->names[l->n], e->name, e->len);
	l->names[l->n][e->len] = '\0';
	l->e[l->n++] = *e;
	return 0;
}

static const struct sqw_entry *listed_find(const struct listed *l, const char *name)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (!strcmp(l->names[i], name))
			return &l->e[i];
	fail_msg("\"%s\" not listed", name);
	return NULL;
}

static int stop_at_second(void *arg, const struct sqw_entry *e)
{
	(void)e;
	return ++*(int *)arg == 2 ? -EINTR : 0;
}

static int count_xattr(void *arg, const char *key, const void *value, size_t size)
{
	(void)value;
	if (!strcmp(key, "user.mime"))
		assert_int_equal(size, 4);
	else if (strcmp(key, "security.selinux"))
		fail_msg("xattr key \"%s\"", key);
	++*(int *)arg;
	return 0;
}

/*
 * Every live entry once, in any order, with what the writer needs: the
 * node as identity, sources of files, targets of symlinks, one link value
 * for the names of a hard-linked file, whether to ask for xattrs.
 */
static void test_walk_ops(void **state)
{
	sqw_tree_t *t = sqw_tree_create();
	sqw_node_t *root = sqw_tree_root(t), *d, *f, *g, *l;
	const struct sqw_entry *e, *h;
	struct sqw_entry re;
	struct listed ls = { .n = 0 };
	static int src_f;
	int calls = 0;

	(void)state;
	f = add(t, root, "f", &file_attr);
	sqw_node_set_source(f, &src_f);
	assert_int_equal(sqw_node_set_xattr(t, f, "user.mime", "text", 4), 0);
	assert_int_equal(sqw_node_set_xattr(t, f, "security.selinux", "x", 1), 0);
	/* As listxattr gives them: "user.mime\0security.selinux\0"; a
	 * replaced value adds no name. */
	assert_int_equal(sqw_node_xattr_list_size(f), 10 + 17);
	assert_int_equal(sqw_node_set_xattr(t, f, "user.mime", "text", 4), 0);
	assert_int_equal(sqw_node_xattr_list_size(f), 10 + 17);
	g = add(t, root, "g", &file_attr);
	assert_int_equal(sqw_node_xattr_list_size(g), 0);
	d = add(t, root, "dir", &dir_attr);
	l = add(t, root, "l", &link_attr);
	assert_int_equal(sqw_tree_link(t, d, "hard", 4, f), 0);
	add(t, root, "gone", &file_attr);
	assert_int_equal(sqw_tree_remove(t, root, "gone", 4), 0);

	assert_int_equal(tree_walk_ops.root(t, &re), 0);
	assert_ptr_equal(re.node, root);
	assert_true(S_ISDIR(re.a.mode));
	assert_int_equal(tree_walk_ops.list(t, root, collect, &ls), 0);
	assert_int_equal(ls.n, 4);
	e = listed_find(&ls, "f");
	assert_ptr_equal(e->node, f);
	assert_ptr_equal(e->src, &src_f);
	assert_int_equal(e->a.size, 10);
	assert_true(e->has_xattrs);
	assert_true(e->link != 0);
	e = listed_find(&ls, "g");
	assert_ptr_equal(e->node, g);
	assert_true(e->link == 0);
	assert_false(e->has_xattrs);
	e = listed_find(&ls, "l");
	assert_ptr_equal(e->node, l);
	assert_string_equal(e->target, "target");
	e = listed_find(&ls, "dir");
	assert_ptr_equal(e->node, d);
	assert_true(e->link == 0);	/* directories never */
	assert_int_equal(e->a.uid, 3);

	ls.n = 0;
	assert_int_equal(tree_walk_ops.list(t, d, collect, &ls), 0);
	assert_int_equal(ls.n, 1);
	h = listed_find(&ls, "hard");
	assert_ptr_equal(h->node, f);
	e = &ls.e[0];
	assert_true(h->link == (uint64_t)(uintptr_t)f);

	/* get(): the same entry without its name. */
	memset(&re, 0, sizeof(re));
	assert_int_equal(tree_walk_ops.get(t, f, &re), 0);
	assert_ptr_equal(re.src, &src_f);
	assert_true(re.link == h->link);
	assert_true(re.has_xattrs);
	assert_null(re.name);
	assert_int_equal(tree_walk_ops.get(t, l, &re), 0);
	assert_string_equal(re.target, "target");

	/* The first non-zero return of emit stops the listing and is returned. */
	assert_int_equal(tree_walk_ops.list(t, root, stop_at_second, &calls), -EINTR);
	assert_int_equal(calls, 2);
	calls = 0;
	assert_int_equal(tree_walk_ops.xattrs(t, f, count_xattr, &calls), 0);
	assert_int_equal(calls, 2);
	sqw_tree_destroy(t);
}

/*
 * An unindexed tree (the seal's) takes its filler's word that names are
 * unique; lookups still find names, removal is refused, and a repeated
 * name is caught when the listing is sorted.
 */
static void test_unindexed(void **state)
{
	sqw_tree_t *t = sqw_tree_create_unindexed();
	sqw_node_t *root = sqw_tree_root(t), *d, *f, *g, *dup = NULL;
	static const struct sqw_source_ops no_data = { 0 };
	struct sqw_image_opts o;
	struct sqw_error err;
	static int src_f;

	(void)state;
	freed_count = 0;
	sqw_tree_set_source_free(t, src_free);
	d = add(t, root, "d", &dir_attr);
	f = add(t, d, "f", &file_attr);
	sqw_node_set_source(f, &src_f);
	assert_int_equal(sqw_tree_link(t, root, "hard", 4, f), 0);
	add(t, root, "l", &link_attr);
	assert_ptr_equal(lookup(t, root, "d"), d);
	assert_ptr_equal(lookup(t, d, "f"), f);
	assert_ptr_equal(lookup(t, root, "hard"), f);
	assert_null(lookup(t, root, "f"));
	assert_null(lookup(t, f, "x"));		/* not a directory */
	assert_int_equal(f->nlink, 2);
	assert_int_equal(root->nsubdirs, 1);
	assert_int_equal(sqw_tree_remove(t, root, "d", 1), -ENOTSUP);
	check_path(f, "/d/f");

	/* Not checked when added: the writer's sorted listing reports it. */
	g = add(t, d, "f", &file_attr);
	sqw_image_opts_init(&o);
	o.jobs = 0;
	assert_int_equal(sqw_comp_config_init(&o.comp, SQW_COMP_GZIP, 131072), 0);
	assert_int_equal(sqw_image_write(t, &no_data, NULL, -1, &o, NULL, &err), -EEXIST);
	assert_string_equal(err.what, "name listed twice");
	dup = (sqw_node_t *)err.node;
	assert_true(dup == f || dup == g);
	assert_string_equal(err.path, "/d/f");
	sqw_tree_destroy(t);
	/* The source of a hard-linked file is freed once, with the tree. */
	assert_int_equal(freed_count, 1);
	assert_ptr_equal(freed_last, &src_f);
}

/* Sources and symlink targets belong to their file types only. */
static void test_source_types(void **state)
{
	sqw_tree_t *t = sqw_tree_create();
	sqw_node_t *root = sqw_tree_root(t), *d, *l;
	static int src;

	(void)state;
	d = add(t, root, "d", &dir_attr);
	l = add(t, root, "l", &link_attr);
	sqw_node_set_source(d, &src);
	sqw_node_set_source(l, &src);
	assert_null(sqw_node_get_source(d));
	assert_null(sqw_node_get_source(l));
	assert_string_equal(l->target, "target");
	assert_int_equal(d->nents, 0);
	sqw_tree_destroy(t);
}

/* ---- walking paths ---- */

static void test_walk(void **state)
{
	sqw_tree_t *t = sqw_tree_create();
	sqw_node_t *root = sqw_tree_root(t), *dir = NULL, *a, *b;
	const char *name = NULL;
	size_t len = 99;
	struct sqw_attr at;
	char longp[600];

	(void)state;
	/* Without create_dirs a missing directory is -ENOENT. */
	assert_int_equal(sqw_tree_walk(t, "a/b/c", 0, &dir_attr, &dir, &name, &len), -ENOENT);
	assert_null(lookup(t, root, "a"));
	/* A single component: parent is the root, nothing created. */
	assert_int_equal(sqw_tree_walk(t, "file", 0, NULL, &dir, &name, &len), 0);
	assert_ptr_equal(dir, root);
	assert_int_equal(len, 4);
	assert_memory_equal(name, "file", 4);
	assert_int_equal(root->nents, 0);

	assert_int_equal(sqw_tree_walk(t, "a/b/c", 1, &dir_attr, &dir, &name, &len), 0);
	a = lookup(t, root, "a");
	assert_non_null(a);
	b = lookup(t, a, "b");
	assert_non_null(b);
	assert_ptr_equal(dir, b);
	assert_int_equal(len, 1);
	assert_memory_equal(name, "c", 1);
	assert_null(lookup(t, b, "c"));		/* the last part is not created */
	sqw_node_get_attr(b, &at);
	assert_int_equal(at.mode, dir_attr.mode);
	assert_int_equal(at.uid, dir_attr.uid);
	assert_int_equal(at.mtime, dir_attr.mtime);
	assert_int_equal(a->nsubdirs, 1);

	/* Existing directories are reused; '.', empty parts, leading and
	 * trailing slashes are ignored. */
	assert_int_equal(sqw_tree_walk(t, "/./a//b/./x/", 1, &dir_attr, &dir, &name, &len), 0);
	assert_ptr_equal(dir, b);
	assert_int_equal(len, 1);
	assert_memory_equal(name, "x", 1);
	assert_int_equal(a->nents, 1);
	assert_int_equal(sqw_tree_walk(t, "a/b", 0, NULL, &dir, &name, &len), 0);
	assert_ptr_equal(dir, a);
	assert_memory_equal(name, "b", 1);

	/* '..' anywhere is rejected. */
	assert_int_equal(sqw_tree_walk(t, "..", 1, &dir_attr, &dir, &name, &len), -EINVAL);
	assert_int_equal(sqw_tree_walk(t, "../x", 1, &dir_attr, &dir, &name, &len), -EINVAL);
	assert_int_equal(sqw_tree_walk(t, "a/../x", 1, &dir_attr, &dir, &name, &len), -EINVAL);
	assert_int_equal(sqw_tree_walk(t, "a/b/..", 1, &dir_attr, &dir, &name, &len), -EINVAL);
	assert_int_equal(sqw_tree_walk(t, "a/b/../", 0, NULL, &dir, &name, &len), -EINVAL);
	/* '...' and '..x' are names. */
	assert_int_equal(sqw_tree_walk(t, "a/.../..x", 1, &dir_attr, &dir, &name, &len), 0);
	assert_ptr_equal(dir, lookup(t, a, "..."));
	assert_memory_equal(name, "..x", 3);

	/* A file in the middle: -ENOTDIR, with or without create_dirs. */
	add(t, a, "f", &file_attr);
	assert_int_equal(sqw_tree_walk(t, "a/f/x", 1, &dir_attr, &dir, &name, &len), -ENOTDIR);
	assert_int_equal(sqw_tree_walk(t, "a/f/x", 0, NULL, &dir, &name, &len), -ENOTDIR);
	assert_int_equal(sqw_tree_walk(t, "a/f", 0, NULL, &dir, &name, &len), 0);
	assert_ptr_equal(dir, a);

	/* An over-long middle component. */
	memset(longp, 'l', sizeof(longp));
	longp[257] = '/';
	longp[258] = 'x';
	longp[259] = '\0';
	assert_int_equal(sqw_tree_walk(t, longp, 1, &dir_attr, &dir, &name, &len), -ENAMETOOLONG);
	longp[256] = '/';
	longp[257] = 'x';
	longp[258] = '\0';
	assert_int_equal(sqw_tree_walk(t, longp, 1, &dir_attr, &dir, &name, &len), 0);
	assert_int_equal(len, 1);
	assert_non_null(sqw_tree_lookup(t, root, longp, 256));

	/* The root itself: "" and "." give an empty last component. */
	assert_int_equal(sqw_tree_walk(t, "", 0, NULL, &dir, &name, &len), 0);
	assert_ptr_equal(dir, root);
	assert_int_equal(len, 0);
	assert_int_equal(sqw_tree_walk(t, ".", 0, NULL, &dir, &name, &len), 0);
	assert_ptr_equal(dir, root);
	assert_int_equal(len, 0);
	sqw_tree_destroy(t);
}

/* ---- xattrs ---- */

static const struct sqw_xattr *find_xattr(const sqw_node_t *n, int prefix,
					  const char *name)
{
	size_t i;

	for (i = 0; i < n->nxattrs; i++)
		if (n->xattrs[i].prefix == prefix &&
		    n->xattrs[i].name_len == strlen(name) &&
		    !memcmp(n->xattrs[i].name, name, strlen(name)))
			return &n->xattrs[i];
	return NULL;
}

static void test_xattrs(void **state)
{
	sqw_tree_t *t = sqw_tree_create();
	sqw_node_t *f = add(t, sqw_tree_root(t), "f", &file_attr);
	const struct sqw_xattr *x;
	char key[70000];
	int i;

	(void)state;
	assert_int_equal(sqw_node_set_xattr(t, f, "user.mime", "text/plain", 10), 0);
	assert_int_equal(sqw_node_set_xattr(t, f, "trusted.overlay", "y", 1), 0);
	assert_int_equal(sqw_node_set_xattr(t, f, "security.selinux", "ctx\0", 4), 0);
	assert_int_equal(sqw_node_set_xattr(t, f, "user.empty", "", 0), 0);
	assert_int_equal(f->nxattrs, 4);
	x = find_xattr(f, 0, "mime");
	assert_non_null(x);
	assert_int_equal(x->value_len, 10);
	assert_memory_equal(x->value, "text/plain", 10);
	x = find_xattr(f, 1, "overlay");
	assert_non_null(x);
	x = find_xattr(f, 2, "selinux");
	assert_non_null(x);
	assert_int_equal(x->value_len, 4);
	assert_memory_equal(x->value, "ctx\0", 4);
	x = find_xattr(f, 0, "empty");
	assert_non_null(x);
	assert_int_equal(x->value_len, 0);

	/* Namespaces SquashFS cannot store. */
	assert_int_equal(sqw_node_set_xattr(t, f, "system.posix_acl_access", "\2\0\0\0", 4), -ENOTSUP);
	assert_int_equal(sqw_node_set_xattr(t, f, "system.posix_acl_default", "\2\0\0\0", 4), -ENOTSUP);
	assert_int_equal(sqw_node_set_xattr(t, f, "system.foo", "x", 1), -ENOTSUP);
	assert_int_equal(sqw_node_set_xattr(t, f, "osx.foo", "x", 1), -ENOTSUP);
	assert_int_equal(sqw_node_set_xattr(t, f, "user", "x", 1), -ENOTSUP);
	assert_int_equal(sqw_node_set_xattr(t, f, "User.x", "x", 1), -ENOTSUP);
	/* A prefix alone has no name. */
	assert_true(sqw_node_set_xattr(t, f, "user.", "x", 1) < 0);
	assert_int_equal(f->nxattrs, 4);

	/* Replacing a value keeps one entry with the new value. */
	assert_int_equal(sqw_node_set_xattr(t, f, "user.mime", "application/json", 16), 0);
	assert_int_equal(f->nxattrs, 4);
	x = find_xattr(f, 0, "mime");
	assert_int_equal(x->value_len, 16);
	assert_memory_equal(x->value, "application/json", 16);
	assert_int_equal(sqw_node_set_xattr(t, f, "user.mime", "", 0), 0);
	assert_int_equal(find_xattr(f, 0, "mime")->value_len, 0);
	/* Same name, other namespace: a different key. */
	assert_int_equal(sqw_node_set_xattr(t, f, "trusted.mime", "t", 1), 0);
	assert_int_equal(f->nxattrs, 5);
	assert_int_equal(find_xattr(f, 0, "mime")->value_len, 0);

	/* Many keys on one node, then replace each. */
	for (i = 0; i < 300; i++) {
		char k[32], v[32];

		snprintf(k, sizeof(k), "user.k%d", i);
		snprintf(v, sizeof(v), "v%d", i);
		assert_int_equal(sqw_node_set_xattr(t, f, k, v, strlen(v)), 0);
	}
	for (i = 0; i < 300; i++) {
		char k[32], v[32];

		snprintf(k, sizeof(k), "user.k%d", i);
		snprintf(v, sizeof(v), "w%d!", i);
		assert_int_equal(sqw_node_set_xattr(t, f, k, v, strlen(v)), 0);
	}
	assert_int_equal(f->nxattrs, 305);
	for (i = 0; i < 300; i++) {
		char k[32], v[32];

		snprintf(k, sizeof(k), "k%d", i);
		snprintf(v, sizeof(v), "w%d!", i);
		x = find_xattr(f, 0, k);
		assert_non_null(x);
		assert_int_equal(x->value_len, strlen(v));
		assert_memory_equal(x->value, v, strlen(v));
	}
	/* A name longer than the u16 name size field. */
	memset(key, 'k', sizeof(key));
	memcpy(key, "user.", 5);
	key[5 + 65535] = '\0';
	assert_int_equal(sqw_node_set_xattr(t, f, key, "v", 1), 0);
	key[5 + 65535] = 'k';
	key[5 + 65536] = '\0';
	assert_true(sqw_node_set_xattr(t, f, key, "v", 1) < 0);
	/* Directories and symlinks carry xattrs too. */
	assert_int_equal(sqw_node_set_xattr(t, sqw_tree_root(t), "user.r", "1", 1), 0);
	sqw_tree_destroy(t);
}

/* ---- large directories ---- */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_large_dir(void **state)
{
	enum { N = 100000 };
	sqw_tree_t *t = sqw_tree_create();
	sqw_node_t *root = sqw_tree_root(t), *d, **nodes = malloc(N * sizeof(*nodes));
	char name[32];
	double t0 = now(), t1;
	size_t i;

	(void)state;
	d = add(t, root, "big", &dir_attr);
	for (i = 0; i < N; i++) {
		int len = snprintf(name, sizeof(name), "file-%07zu", (i * 7919) % N);

		assert_int_equal(sqw_tree_add(t, d, name, (size_t)len, &file_attr,
					      NULL, &nodes[(i * 7919) % N]), 0);
	}
	for (i = 0; i < N; i++) {
		int len = snprintf(name, sizeof(name), "file-%07zu", i);

		if (sqw_tree_lookup(t, d, name, (size_t)len) != nodes[i])
			fail_msg("lookup of %s failed", name);
		/* The same name elsewhere is absent. */
		if (i % 1000 == 0)
			assert_null(sqw_tree_lookup(t, root, name, (size_t)len));
	}
	assert_int_equal(sqw_tree_add(t, d, "file-0000000", 12, &file_attr, NULL, NULL),
			 -EEXIST);
	assert_int_equal(d->nents, N);
	t1 = now() - t0;
	/* O(1) per entry: well under a second normally; generous for
	 * sanitizers and valgrind. */
	if (t1 > 20.0)
		fail_msg("100000 adds+lookups took %.1f s", t1);
	check_path(nodes[42], "/big/file-0000042");
	assert_true(sqw_tree_data_size(t) == (uint64_t)N * 10);
	sqw_tree_destroy(t);
	free(nodes);
}

/* ---- sqw_node_path ---- */

static void test_node_path(void **state)
{
	sqw_tree_t *t = sqw_tree_create();
	sqw_node_t *root = sqw_tree_root(t), *a, *b, *c;
	char small[8];

	(void)state;
	a = add(t, root, "a", &dir_attr);
	b = add(t, a, "bb", &dir_attr);
	c = add(t, b, "ccc", &file_attr);
	check_path(root, "/");
	check_path(a, "/a");
	check_path(b, "/a/bb");
	check_path(c, "/a/bb/ccc");
	/* Too long: "..." and its end, always terminated, never past size. */
	memset(small, 'X', sizeof(small));
	sqw_node_path(c, small, 8);
	assert_string_equal(small, ".../ccc");
	memset(small, 'X', sizeof(small));
	sqw_node_path(c, small, 5);
	assert_string_equal(small, "...c");
	assert_int_equal(small[5], 'X');
	memset(small, 'X', sizeof(small));
	sqw_node_path(c, small, 3);
	assert_string_equal(small, "cc");
	assert_int_equal(small[3], 'X');
	memset(small, 'X', sizeof(small));
	sqw_node_path(c, small, 1);
	assert_int_equal(small[0], '\0');
	assert_int_equal(small[1], 'X');
	small[0] = 'Y';
	sqw_node_path(c, small, 0);
	assert_int_equal(small[0], 'Y');
	sqw_tree_destroy(t);
}

/* Nested deeper than any fixed table of components (it kept 512 and lost
 * the top ones): the whole path, or "..." and its end. */
static void test_node_path_deep(void **state)
{
	sqw_tree_t *t = sqw_tree_create();
	sqw_node_t *n = sqw_tree_root(t);
	char want[600 * 3 + 8], got[sizeof(want)], tail[16];
	size_t i;

	(void)state;
	for (i = 0; i < 600; i++)
		n = add(t, n, "zz", &dir_attr);
	n = add(t, n, "f", &file_attr);
	for (i = 0; i < 600; i++)
		memcpy(want + 3 * i, "/zz", 3);
	strcpy(want + 1800, "/f");
	sqw_node_path(n, got, sizeof(got));
	sqw_node_path(n, tail, sizeof(tail));
	sqw_tree_destroy(t);
	assert_string_equal(got, want);
	assert_string_equal(tail, "...z/zz/zz/zz/f");
}

/* A hard-linked file keeps a path after the name it was created under
 * goes away. */
static void test_node_path_after_unlink(void **state)
{
	sqw_tree_t *t = sqw_tree_create();
	sqw_node_t *root = sqw_tree_root(t), *f;

	(void)state;
	char buf[256];

	f = add(t, root, "first", &file_attr);
	assert_int_equal(sqw_tree_link(t, root, "second", 6, f), 0);
	check_path(f, "/first");
	assert_int_equal(sqw_tree_remove(t, root, "first", 5), 0);
	sqw_node_path(f, buf, sizeof(buf));
	sqw_tree_destroy(t);		/* before asserting: no leak on failure */
	assert_string_equal(buf, "/second");
}

/* The same when the first name disappears with its directory. */
static void test_node_path_after_rmdir(void **state)
{
	sqw_tree_t *t = sqw_tree_create();
	sqw_node_t *root = sqw_tree_root(t), *d, *f;
	char buf[256];
	int nlink, found;

	(void)state;
	d = add(t, root, "d", &dir_attr);
	f = add(t, d, "f", &file_attr);
	assert_int_equal(sqw_tree_link(t, root, "g", 1, f), 0);
	assert_int_equal(sqw_tree_remove(t, root, "d", 1), 0);
	nlink = (int)f->nlink;
	found = lookup(t, root, "g") == f;
	sqw_node_path(f, buf, sizeof(buf));
	sqw_tree_destroy(t);		/* before asserting: no leak on failure */
	assert_int_equal(nlink, 1);
	assert_true(found);
	assert_string_equal(buf, "/g");
}

/* ---- attributes ---- */

static void test_set_attr(void **state)
{
	sqw_tree_t *t = sqw_tree_create();
	sqw_node_t *f = add(t, sqw_tree_root(t), "f", &file_attr);
	struct sqw_attr a = { .mode = S_IFDIR | 04755, .uid = 7, .gid = 8,
			      .mtime = -5, .size = 1234 }, g;

	(void)state;
	sqw_node_set_attr(f, &a);
	sqw_node_get_attr(f, &g);
	/* The type never changes; permissions, ids, times and size do. */
	assert_int_equal(g.mode, S_IFREG | 04755);
	assert_int_equal(g.uid, 7);
	assert_int_equal(g.gid, 8);
	assert_true(g.mtime == -5);
	assert_true(g.size == 1234);
	assert_true(sqw_tree_data_size(t) == 1234);
	sqw_tree_destroy(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_root),
		cmocka_unit_test(test_add_lookup),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_symlink_targets),
		cmocka_unit_test(test_link),
		cmocka_unit_test(test_remove),
		cmocka_unit_test(test_remove_many),
		cmocka_unit_test(test_walk_ops),
		cmocka_unit_test(test_unindexed),
		cmocka_unit_test(test_source_types),
		cmocka_unit_test(test_walk),
		cmocka_unit_test(test_xattrs),
		cmocka_unit_test(test_large_dir),
		cmocka_unit_test(test_node_path),
		cmocka_unit_test(test_node_path_deep),
		cmocka_unit_test(test_node_path_after_unlink),
		cmocka_unit_test(test_set_attr),
		/* Last: under ASan the use-after-free it exposes aborts. */
		cmocka_unit_test(test_node_path_after_rmdir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
