/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef SQW_TREE_H
#define SQW_TREE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * The tree model both front ends fill: a directory tree of inodes (nodes)
 * joined by named entries.  Hard links are several entries naming one node.
 * The image written from a tree depends only on its contents, never on the
 * order in which it was filled.
 */
typedef struct sqw_tree sqw_tree_t;
typedef struct sqw_node sqw_node_t;

#define SQW_NAME_MAX 256	/* longest entry name SquashFS can store */
#define SQW_SYMLINK_MAX 4095	/* longest target the kernel reads */

struct sqw_attr {
	uint32_t mode;		/* S_IFxxx | permission bits */
	uint32_t uid;
	uint32_t gid;
	int64_t mtime;		/* seconds; clamped to 0..2^32-1 in the image */
	uint64_t size;		/* regular files */
	uint64_t rdev;		/* device nodes: a dev_t */
};

sqw_tree_t *sqw_tree_create(void);
/*
 * For a filler whose names are unique in each directory already (a staged
 * tree): no name table is kept, which saves about 24 bytes an entry.
 * sqw_tree_add() does not check for an existing name, sqw_tree_lookup()
 * scans the directory, sqw_tree_remove() returns -ENOTSUP; a name added
 * twice makes sqw_image_write() fail with -EEXIST.
 */
sqw_tree_t *sqw_tree_create_unindexed(void);
void sqw_tree_destroy(sqw_tree_t *tree);

/* The root directory exists from the start (mode 0755, root, mtime 0). */
sqw_node_t *sqw_tree_root(sqw_tree_t *tree);

/*
 * Create a node named name (len bytes) in directory dir.  target is the
 * symlink target for S_IFLNK, else NULL.  Returns 0 and the node in *out;
 * -EEXIST if the name exists, -ENAMETOOLONG, -EINVAL for names with '/',
 * NUL, "." or "..", -ENOTDIR, -ENOMEM.
 */
int sqw_tree_add(sqw_tree_t *tree, sqw_node_t *dir, const char *name,
		 size_t len, const struct sqw_attr *attr, const char *target,
		 sqw_node_t **out);

/* Add another name for node (a hard link).  -EPERM for a directory. */
int sqw_tree_link(sqw_tree_t *tree, sqw_node_t *dir, const char *name,
		  size_t len, sqw_node_t *node);

/* Remove the entry name from dir (recursively for directories). */
int sqw_tree_remove(sqw_tree_t *tree, sqw_node_t *dir, const char *name,
		    size_t len);

/* The node named name in dir, or NULL. */
sqw_node_t *sqw_tree_lookup(sqw_tree_t *tree, sqw_node_t *dir,
			    const char *name, size_t len);

/*
 * Resolve a relative path ("a/b/c", where "." and empty components are ignored and
 * ".." rejected with -EINVAL).  With create_dirs, missing intermediate
 * directories are created with dir_attr.  On success *dir is the parent and
 * *name and *len the last component (not looked up).
 */
int sqw_tree_walk(sqw_tree_t *tree, const char *path, int create_dirs,
		  const struct sqw_attr *dir_attr, sqw_node_t **dir,
		  const char **name, size_t *len);

/*
 * A copy of the directories and regular files of tree, which is all a data
 * pass looks at, for a rehearsal of it while tree still changes: names,
 * attributes, hard links and source handles (shared: the copy frees none
 * of them).  Unindexed (sqw_tree_create_unindexed).  NULL with *err set:
 * -E2BIG beyond max_nodes nodes, -ENOMEM.
 */
sqw_tree_t *sqw_tree_copy_files(sqw_tree_t *tree, size_t max_nodes, int *err);

/* Bytes of file data in the tree (hard links counted once). */
uint64_t sqw_tree_data_size(sqw_tree_t *tree);

void sqw_node_set_attr(sqw_node_t *node, const struct sqw_attr *attr);
void sqw_node_get_attr(const sqw_node_t *node, struct sqw_attr *attr);
/* Entries of a directory (0 for any other node). */
size_t sqw_node_dir_entries(const sqw_node_t *node);

/*
 * Set an extended attribute ("user.", "trusted." or "security." keys;
 * -ENOTSUP for any other namespace).  Replaces an existing value.
 */
int sqw_node_set_xattr(sqw_tree_t *tree, sqw_node_t *node, const char *key,
		       const void *value, size_t size);
/*
 * Bytes the node's xattr names take as listxattr(2) gives them (each name
 * with its namespace and a NUL).  Linux lists at most XATTR_LIST_MAX
 * (64 KiB): front ends refuse more, the format itself has no such bound.
 */
size_t sqw_node_xattr_list_size(const sqw_node_t *node);

/* Opaque per-file data handle given back to the source ops (see image.h). */
void sqw_node_set_source(sqw_node_t *node, void *src);
/* Called for every non-NULL source handle when its node is freed. */
void sqw_tree_set_source_free(sqw_tree_t *tree, void (*fn)(void *src));
void *sqw_node_get_source(const sqw_node_t *node);

/*
 * Write a path of node (the first name found) into buf; used for messages.
 * One too long for size is "..." and its end.
 */
void sqw_node_path(const sqw_node_t *node, char *buf, size_t size);

#endif
