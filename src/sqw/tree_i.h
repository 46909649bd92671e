/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Private layout of the tree model, shared by the writer passes. */
#ifndef SQW_TREE_I_H
#define SQW_TREE_I_H

#include <sys/stat.h>

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
 * by the type in a.mode (which never changes after the node is made).
 */
struct sqw_node {
	struct sqw_attr a;
	struct sqw_dentry *first;	/* one name of the node, for messages */
	uint32_t nlink;		/* entries naming it */
	uint32_t nxattrs;
	struct sqw_xattr *xattrs;

	/* --- state of the current image write, reset by the writer --- */
	uint32_t ino;
	uint32_t visited;	/* == the walk's generation once seen */
	uint64_t ref;		/* inode ref */
	uint32_t xattr_id;
	uint32_t frag_offset;	/* files (here, it fills a hole) */

	union {
		struct {	/* regular files */
			void *src;	/* file data handle */
			uint32_t nblocks;
			uint32_t frag_index;
			uint64_t blocks_start;
			uint32_t *blocks;	/* size words */
			uint64_t sparse;
			sqw_node_t *dup_of;	/* identical earlier file */
			sqw_node_t *tail_of;	/* earlier file with an identical tail */
		};
		struct {	/* directories */
			struct sqw_dentry **ents;
			uint32_t nents, ents_cap;
			uint32_t nsubdirs;
			uint32_t dir_block;	/* listing start in the directory table */
			uint32_t dir_size;	/* listing bytes + 3 */
			uint16_t dir_offset;
			uint32_t ndindex;
			struct sqw_dir_index *dindex;
			uint32_t parent_ino;
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

/*
 * Sort every directory's entries by name (unsigned bytes).  -EEXIST with
 * *dup the node of a name listed twice in one directory.
 */
int tree_sort(sqw_node_t *root, sqw_node_t **dup);

#endif
