/* SPDX-License-Identifier: GPL-2.0-or-later */
/* State of one image write, shared by the passes in src/sqw/. */
#ifndef SQW_WRITER_I_H
#define SQW_WRITER_I_H

#include "sqw/image.h"
#include "sqw/meta_writer.h"
#include "sqw/outfile.h"
#include "sqw/tree_i.h"
#include "pool/bp.h"
#include "util/u64map.h"

#define SQW_NO_FRAG 0xFFFFFFFFu
#define SQW_NO_XATTR 0xFFFFFFFFu

enum { JOB_DATA = 1, JOB_FRAG = 2 };

/*
 * Fragment packing: each directory down to this depth gathers the tails
 * of its files and what its subdirectories left over; full fragment
 * blocks go out as they fill, the rest moves up at the directory's end.
 * A fragment block then depends on one subtree only, which is what lets
 * sqfs-stage compress it before the seal (deeper directories share the
 * deepest level, so memory stays at FRAG_LEVELS blocks).
 */
#define FRAG_LEVELS 32

/* A tail waiting in a fragment block; its bytes may not be read yet. */
struct frag_tail {
	sqw_node_t *node;		/* the tail's offset: node->frag_offset */
	uint8_t digest[16];		/* with keyed fragment blocks */
	uint8_t have;			/* its bytes are in the pending buf */
};

struct frag_pend {
	uint8_t *buf;			/* block_size bytes, on first use */
	uint32_t len;
	struct frag_tail *t;		/* in order */
	size_t n, cap;
};

struct writer {
	const struct sqw_image_opts *opts;
	uint32_t bs;
	unsigned flags;
	sqw_compressor_t *cmp;
	struct outfile out;
	const struct sqw_source_ops *ops;
	void *src_ctx;
	struct sqw_stats *st;
	struct sqw_error *err;

	/* canonical order */
	sqw_node_t **files;
	size_t nfiles, files_cap;
	uint32_t ninodes;
	sqw_node_t **by_ino;	/* [ino - 1] */

	/* data pass */
	struct bp *bp;
	struct frag_pend *pend;		/* [FRAG_LEVELS] tails not yet in a block */
	int keyed;			/* fragment blocks get keys (stored_frag, rehearsal) */
	uint8_t *frag_keys;		/* 16 bytes per fragment block (rehearsal) */
	size_t frag_keys_cap;
	uint8_t *frag_table;		/* 16-byte entries */
	size_t frag_count, frag_cap;
	struct u64map size_count;	/* file size -> files of that size */
	struct u64map tail_count;	/* tail length -> tails of that length */
	struct u64map file_hash;	/* content hash -> node */
	struct u64map tail_hash;	/* tail hash -> node */
	uint8_t *rbuf, *rbuf2;		/* bs bytes each */

	/* metadata */
	struct meta_writer *inodes;
	struct meta_writer *dirs;
	struct u64map id_map;		/* id + 1 -> index */
	uint32_t *ids;
	size_t nids, ids_cap;
	struct meta_writer *xattr_kv;
	struct u64map xattr_map;	/* set hash -> id + 1 */
	uint8_t *xattr_ids;		/* 16-byte entries */
	size_t nxattr_ids, xattr_ids_cap;
	struct buf xattr_sets;		/* serialised sets, for exact compare */
	uint64_t *xattr_set_off;	/* per id: offset, length in xattr_sets */
	size_t xattr_set_cap;
	struct buf scratch;
};

static inline int writer_fail(struct writer *w, int code, const char *what,
			      const sqw_node_t *node)
{
	if (w->err && !w->err->code) {
		w->err->code = code;
		w->err->what = what;
		w->err->node = node;
	}
	return code;
}

/* data.c */
int data_write(struct writer *w, sqw_node_t *root);
void data_cleanup(struct writer *w);

/* inode.c */
int inode_write(struct writer *w, sqw_node_t *n);

/* dir_writer.c */
int dir_write_listing(struct writer *w, sqw_node_t *dir);

/* id_table.c */
int id_lookup(struct writer *w, uint32_t id, uint16_t *index);
int id_table_write(struct writer *w, uint64_t *start);

/* xattr_table.c */
int xattr_lookup(struct writer *w, sqw_node_t *n, uint32_t *id);
int xattr_table_write(struct writer *w, uint64_t *start);
void xattr_cleanup(struct writer *w);

#endif
