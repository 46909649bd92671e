/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Private layout of the tree model, shared by the writer passes. */
#ifndef SQW_TREE_I_H
#define SQW_TREE_I_H

#include <sys/stat.h>

#include "sqw/image.h"
#include "sqw/tree.h"

struct sqw_xattr {
	uint8_t prefix;		/* 0 user, 1 trusted, 2 security */
	uint16_t name_len;	/* without the prefix */
	char *name;
	uint32_t value_len;
	uint8_t *value;
};

struct sqw_dentry {
	sqw_node_t *dir;
	sqw_node_t *node;
	uint32_t index;		/* position in dir->ents */
	uint16_t len;
	char name[];
};

struct sqw_dir_index {
	uint32_t index;		/* header offset in the listing */
	uint32_t start_block;	/* directory md block of that header */
	uint32_t name_len;
	const char *name;
};

/*
 * A million-inode tree is held in full while its image is written, so the
 * node is kept small: what only one file type needs shares a union, chosen
 * by the type in a.mode (which never changes after the node is made).  The
 * writer keeps its own state apart (writer_i.h).
 */
struct sqw_node {
	struct sqw_attr a;
	struct sqw_dentry *first;	/* one name of the node, for messages */
	uint32_t nlink;		/* entries naming it */
	uint32_t nxattrs;
	struct sqw_xattr *xattrs;
	uint32_t visited;	/* == a walk's generation once seen */

	union {
		void *src;	/* regular files: file data handle */
		struct {	/* directories */
			struct sqw_dentry **ents;
			uint32_t nents, ents_cap;
			uint32_t nsubdirs;
		};
		char *target;	/* symlinks */
	};
};

static inline int node_is_dir(const sqw_node_t *n)
{
	return S_ISDIR(n->a.mode);
}

static inline int node_is_reg(const sqw_node_t *n)
{
	return S_ISREG(n->a.mode);
}

/* A fresh marker for the visited field of one tree walk. */
uint32_t tree_next_gen(sqw_tree_t *tree);

/* "user.", "trusted.", "security.": struct sqw_xattr's prefix numbers. */
extern const char *const xattr_prefixes[3];
/*
 * Split an xattr key of a value of size bytes: its prefix number, the
 * prefix's length and the name's.  -ENOTSUP for another namespace, -EINVAL
 * for an empty or over-long name, -E2BIG for a value too large.
 */
int xattr_key_split(const char *key, size_t size, uint8_t *prefix, size_t *plen,
		    size_t *nlen);

/* The tree as the writer walks it (tree.c). */
extern const struct sqw_walk_ops tree_walk_ops;

#endif
