/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef SQW_IMAGE_H
#define SQW_IMAGE_H

#include <stdint.h>

#include "sqw/compressor.h"
#include "sqw/tree.h"

/*
 * Where file contents come from.  All calls are made from the one thread
 * that runs sqw_image_write(); the worker threads never do I/O.
 */
struct sqw_source_ops {
	/*
	 * Open the data of a file whose node source handle is src.  A source
	 * may defer the real open to the first read or next_data, which then
	 * return its error (-ENOENT is reported as an open's).
	 */
	int (*open)(void *ctx, void *src, void **handle);
	/*
	 * Read exactly len bytes at off (holes read as zeros); -errno, and
	 * -ENODATA if the file ends before (it shrank since it was listed).
	 */
	int (*read)(void *handle, uint64_t off, void *buf, size_t len);
	/*
	 * Optional: offset of the first data byte at or after off, or the
	 * file size when only a hole follows (lseek SEEK_DATA semantics).
	 */
	int64_t (*next_data)(void *handle, uint64_t off);
	/*
	 * Optional: data block index of the file (the last one short when
	 * the file ends in one: sqw_file_data_blocks) in the form the writer
	 * would store it, if the source kept one from an earlier compression
	 * with the same options (sqfs-stage compresses closed files ahead of
	 * the seal).  Returns 1 with buf (block_size bytes at most) and *size_word
	 * (the SquashFS block size word; 0 = hole) filled, 0 when it has none,
	 * or -errno.
	 */
	int (*stored_block)(void *handle, uint32_t index, void *buf,
			    uint32_t *size_word);
	/*
	 * Optional, asked before stored_block: where that stored form is, in
	 * a file the source keeps open and unchanged for the whole write.
	 * The writer then reads it straight into the image's buffer when the
	 * block's turn comes, with no copy in between.  Returns 1 with *fd,
	 * *off and *size_word set (*fd and *off unused for a hole), 0 when it
	 * has none there (stored_block is asked next), or -errno.
	 */
	int (*stored_block_at)(void *handle, uint32_t index, int *fd, uint64_t *off,
			       uint32_t *size_word);
	void (*close)(void *handle);
	/*
	 * Optional: the stored form of a fragment block of len bytes whose
	 * key is key, if the source kept one.  The key is XXH3-128 seeded with
	 * len over the block's tails in order, each as its digest (below)
	 * followed by its length (4 bytes, little-endian); 128-bit values are
	 * stored high half first, big-endian.  Returns like stored_block; buf
	 * has room for block_size bytes.
	 */
	int (*stored_frag)(void *ctx, const uint8_t key[16], uint32_t len,
			   void *buf, uint32_t *size_word);
	/* Optional, asked before stored_frag: as stored_block_at is to stored_block. */
	int (*stored_frag_at)(void *ctx, const uint8_t key[16], uint32_t len, int *fd,
			      uint64_t *off, uint32_t *size_word);
	/*
	 * Optional, SQW_OPT_REHEARSE only: a fragment block the writer
	 * compressed, for stored_frag to return in later writes.
	 */
	void (*frag_done)(void *ctx, const uint8_t key[16], const void *data,
			  uint32_t size_word);
	/*
	 * Optional, with stored_frag or SQW_OPT_REHEARSE: the digest of the
	 * last len bytes of file src (XXH3-128 seeded with len) when the file
	 * is size bytes long, if the source knows it without reading them, so
	 * that a fragment block it has a stored form of costs no reads at
	 * all.  Returns 1 with digest filled; 0 when it does not know it (or
	 * the file is no longer size bytes long), with *token set for
	 * tail_seen; or -errno, which fails the write.  A digest that does not
	 * match the bytes would make the write take a wrong stored block.
	 */
	int (*tail_digest)(void *ctx, void *src, uint64_t size, uint32_t len,
			   uint8_t digest[16], uint64_t *token);
	/*
	 * Optional: after a 0 from tail_digest, the writer read that tail and
	 * computed its digest; token is tail_digest's, so the source can tell
	 * whether the file changed since.
	 */
	void (*tail_seen)(void *ctx, void *src, uint64_t size, uint32_t len,
			  const uint8_t digest[16], uint64_t token);
};

enum {
	SQW_OPT_NO_FRAGMENTS = 1 << 0,
	SQW_OPT_ALWAYS_FRAGMENTS = 1 << 1,
	SQW_OPT_NO_DEDUP = 1 << 2,
	SQW_OPT_NO_EXPORTS = 1 << 3,
	SQW_OPT_NO_XATTRS = 1 << 4,
	SQW_OPT_NO_PAD = 1 << 5,
	SQW_OPT_NO_SPARSE = 1 << 6,
	SQW_OPT_ALL_ROOT = 1 << 7,
	/*
	 * The data pass only, to fill the source's fragment store: full
	 * blocks are neither read nor compressed, fragment blocks the source
	 * has no stored form of are compressed and given to frag_done, and
	 * nothing is written (fd is not used).
	 */
	SQW_OPT_REHEARSE = 1 << 8,
};

struct sqw_stats {
	uint64_t inodes, files, dirs, symlinks, devices, ipcs, xattr_sets;
	uint64_t bytes_in;		/* file data (apparent size) */
	uint64_t bytes_data;		/* data + fragment blocks written */
	uint64_t image_size;		/* bytes_used before padding */
	uint64_t dedup_files, dedup_bytes;
	uint64_t dedup_tails;
	uint64_t sparse_bytes;
	uint64_t fragments, raw_blocks, blocks;
	uint64_t stored_blocks;		/* taken as the source stored them */
	uint64_t stored_frags;		/* fragment blocks, the same way */
	uint64_t clamped_times;		/* mtimes outside 1970..2106, clamped */
	uint32_t ids;
	/* progress: bytes of file data consumed so far */
	uint64_t progress_bytes;
};

struct sqw_image_opts {
	sqw_comp_config_t comp;	/* comp.block_size is the image block size */
	unsigned jobs;		/* worker threads; 0 = serial twin */
	unsigned queue;		/* max blocks in flight; 0 = default */
	unsigned flags;		/* SQW_OPT_* */
	uint32_t mkfs_time;
	int64_t all_time;	/* < 0: keep each node's mtime */
	int64_t force_uid;	/* < 0: keep */
	int64_t force_gid;
	/* Optional progress callback, called from the writing thread. */
	void (*progress)(void *arg, const struct sqw_stats *st);
	void *progress_arg;
};

void sqw_image_opts_init(struct sqw_image_opts *opts);

/*
 * Limits of the format as this writer meets them, for front ends that must
 * refuse early what sqw_image_write would refuse: uids and gids share one
 * table whose count is a u16 (and the kernel rejects a count of 0), and a
 * file's block list is counted in 32 bits.
 */
#define SQW_IDS_MAX 65535
/*
 * The most path components an entry may have (the tar reader's limit too):
 * every walk of a tree is recursive, and such a path is twice PATH_MAX at
 * least.  Deeper entries fail the write with -ENAMETOOLONG.
 */
#define SQW_DEPTH_MAX 4096
/* The largest file size sqw_image_write accepts with this block size. */
uint64_t sqw_file_size_max(uint32_t block_size);
/*
 * The data blocks the writer stores for a file of size bytes under flags
 * (SQW_OPT_*): its full blocks, and a short last one when the file does
 * not end on a block boundary and its tail goes into no fragment block.
 */
uint64_t sqw_file_data_blocks(unsigned flags, uint32_t block_size, uint64_t size);

/* What went wrong, for the front end's message. */
#define SQW_ERROR_PATH 1024
struct sqw_error {
	int code;		/* negative errno */
	const char *what;	/* static text: "reading", "too many ids", ... */
	/*
	 * The inode concerned, or NULL: a sqw_node_t from sqw_image_write(),
	 * the source's sqw_entry.node from sqw_image_write_walk().
	 */
	const void *node;
	/* Its path from the root ("/a/b"; "/" the root; "" none), cut at the front if too long. */
	char path[SQW_ERROR_PATH];
};

/*
 * A tree the writer reads directory by directory instead of holding a model
 * of it (sqfs-stage seals its staged tree this way, without a copy).  Each
 * directory is listed once per pass (three times) and keeps only names and
 * nodes while it is walked; the rest of an entry is asked for with get()
 * when a pass needs it.  The tree must not change during the write, and
 * every pointer handed out (names, targets) must stay valid until
 * sqw_image_write_walk() returns.
 */
struct sqw_entry {
	const char *name;	/* len bytes and a NUL, no '/' or NUL in them;
				 * not "." or ".." (list() only) */
	size_t len;
	struct sqw_attr a;
	const char *target;	/* symlinks: NUL-terminated */
	void *node;		/* the source's inode: listed (directories),
				 * given to xattrs(), named in errors */
	void *src;		/* regular files: for sqw_source_ops.open */
	/* Non-directories with several names: one non-zero value for all of them. */
	uint64_t link;
	int has_xattrs;		/* call xattrs() for it */
};

typedef int (*sqw_entry_fn)(void *arg, const struct sqw_entry *e);
typedef int (*sqw_xattr_fn)(void *arg, const char *key, const void *value,
			    size_t size);

struct sqw_walk_ops {
	/* The root directory (name and link unused). */
	int (*root)(void *ctx, struct sqw_entry *root);
	/* Each entry of directory dir, in any order, through emit; stop at
	 * its first non-zero return and return that. */
	int (*list)(void *ctx, void *dir, sqw_entry_fn emit, void *arg);
	/* Each xattr of node ("user.", "trusted." or "security." keys). */
	int (*xattrs)(void *ctx, void *node, sqw_xattr_fn put, void *arg);
	/* The entry of node as list() gives it, but for name and len. */
	int (*get)(void *ctx, void *node, struct sqw_entry *e);
};

int sqw_image_write_walk(const struct sqw_walk_ops *walk, void *walk_ctx,
			 const struct sqw_source_ops *ops, void *src_ctx, int fd,
			 const struct sqw_image_opts *opts, struct sqw_stats *stats,
			 struct sqw_error *err);

/*
 * Write the image of tree to fd (from offset 0; the file is truncated to the
 * image size).  Returns 0 or a negative errno with *err filled.  The tree is
 * not changed and can be written again afterwards.
 */
int sqw_image_write(sqw_tree_t *tree, const struct sqw_source_ops *ops,
		    void *src_ctx, int fd, const struct sqw_image_opts *opts,
		    struct sqw_stats *stats, struct sqw_error *err);

#endif
