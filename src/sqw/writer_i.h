/* SPDX-License-Identifier: GPL-2.0-or-later */
/* State of one image write, shared by the passes in src/sqw/. */
#ifndef SQW_WRITER_I_H
#define SQW_WRITER_I_H

#include "sqw/image.h"
#include "sqw/meta_writer.h"
#include "sqw/outfile.h"
#include "sqw/tree_i.h"
#include "pool/bp.h"
#include "util/idxmap.h"
#include "util/u64map.h"

#define SQW_NO_FRAG 0xFFFFFFFFu
#define SQW_NO_XATTR 0xFFFFFFFFu
#define SQW_XATTR_VALUE_OOL 0x0100u	/* type flag: the value is a ref */

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
	uint32_t file;			/* index in w->files; offset: its frag_offset */
	uint8_t digest[16];		/* with keyed fragment blocks */
	uint8_t have;			/* its bytes are in the pending buf */
};

struct frag_pend {
	uint8_t *buf;			/* block_size bytes, on first use */
	uint32_t len;
	struct frag_tail *t;		/* in order */
	size_t n, cap;
};

/*
 * What the writer keeps of a regular file between the data pass and the
 * inode pass: everything else comes from the listing again.  Files are
 * numbered in canonical order, which every pass walks alike.
 */
struct wfile {
	void *src;
	uint64_t size;
	/*
	 * Its first size word in w->blockw, where the two words before hold
	 * where its data starts (wfile_blocks_start()); 0: no data blocks.
	 * A run of holes is two words, 0 and its length (data words are never
	 * 0), so a sparse file's holes take no room (blockw_next()).
	 */
	uint32_t blk;
	uint32_t frag_index;
	uint32_t frag_offset : 31;	/* below the block size */
	uint32_t dup : 1;		/* same is a whole-file duplicate */
	uint32_t same;			/* 1 + the file whose data (dup) or tail it takes */
};

/* A non-directory with several names. */
struct wlink {
	uint32_t ino, nlink;
	uint64_t ref;
	uint32_t seen;			/* == the pass's mark once met in it */
};

/*
 * An entry of a directory being walked: what sorting needs and no more (a
 * directory of a million entries is listed whole); the rest of it comes
 * from the source's get() when a pass needs it.
 */
struct went {
	const char *name;		/* NUL-terminated */
	void *node;
};

/*
 * One directory's listing, sorted by name (one per depth, reused).  The
 * inode pass adds each entry's inode number, reference and listing type.
 */
struct wlist {
	struct went *e;
	size_t n, cap;
	uint32_t *ino;
	uint64_t *ref;
	uint8_t *type;
	size_t ino_cap, ref_cap, type_cap;
};

/* Where a directory's listing went, for its inode. */
struct wdir {
	uint32_t block, size, parent_ino, nsubdirs;
	uint16_t offset;
	uint32_t nindex;
	struct sqw_dir_index *index;
	size_t index_cap;
};

/* An xattr value in the kv stream that later pairs may point at. */
struct xattr_val {
	uint64_t off;			/* its bytes in writer.xattr_sets */
	uint64_t ref;			/* its {vsize, value} record */
	uint32_t len;
};

struct writer {
	const struct sqw_image_opts *opts;
	uint32_t bs;
	unsigned flags;
	sqw_compressor_t *cmp;		/* data and fragment blocks */
	sqw_compressor_t *mcmp;		/* metadata blocks */
	struct outfile out;
	const struct sqw_walk_ops *walk;
	void *walk_ctx;
	const struct sqw_source_ops *ops;
	void *src_ctx;
	struct sqw_stats *st;
	struct sqw_error *err;
	int err_file;			/* 1 + the file an error concerns, node unknown */
	int finding;			/* walking for the path of an error */

	/* canonical order */
	struct wlist **lists;		/* [depth] */
	size_t nlists;
	struct sqw_entry root;
	struct wfile *files;
	size_t nfiles, files_cap;
	uint32_t ninodes;
	/* Directories in pre-order, as the first pass listed them. */
	struct wdirrec {
		uint32_t ino, nents;
	} *dirs_seen;
	size_t ndirs, dirs_cap;
	size_t dir_next;		/* the pass's next directory */
	int numbering;			/* the first pass: record, do not check */
	struct u64map link_map;		/* sqw_entry.link -> 1 + index in links */
	struct wlink *links;
	size_t nlinks, links_cap;
	uint32_t pass;			/* mark of the current walk */
	/* Inodes are written in inode number order: the export table as it goes. */
	struct meta_writer *exports;
	uint32_t *export_blocks;	/* where each of its md blocks starts */

	/* data pass */
	struct bp *bp;
	struct frag_pend *pend;		/* [FRAG_LEVELS] tails not yet in a block */
	int keyed;			/* fragment blocks get keys (stored_frag, rehearsal) */
	uint8_t *frag_keys;		/* 16 bytes per fragment block (rehearsal) */
	size_t frag_keys_cap;
	uint8_t *frag_table;		/* 16-byte entries */
	size_t frag_count, frag_cap;
	uint32_t *blockw;		/* every file's block size words */
	uint32_t nblockw;
	uint32_t blockw_run;		/* the last file's trailing run of holes, or 0 */
	size_t blockw_cap;
	struct u64map sparse;		/* 1 + file -> bytes of holes, where any */
	struct u64map size_count;	/* file size -> files of that size */
	struct u64map tail_count;	/* tail length -> tails of that length */
	struct u64map file_hash;	/* content hash -> 1 + file */
	struct idxmap tail_hash;	/* tail hash -> file */
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
	struct u64map xattr_vmap;	/* value hash -> index + 1 in xattr_vals */
	struct xattr_val *xattr_vals;	/* values written, for sharing */
	size_t nxattr_vals, xattr_vals_cap;
	struct sqw_xattr *xl;		/* one inode's set, gathered */
	size_t nxl, xl_cap;
	struct buf xl_data;		/* its names and values */
	struct buf scratch;
};

/* Where f's data blocks start in the image (0 without any). */
static inline uint64_t wfile_blocks_start(const struct writer *w, const struct wfile *f)
{
	if (!f->blk)
		return 0;
	return w->blockw[f->blk - 2] | (uint64_t)w->blockw[f->blk - 1] << 32;
}

static inline void wfile_set_blocks_start(struct writer *w, const struct wfile *f,
					  uint64_t start)
{
	w->blockw[f->blk - 2] = (uint32_t)start;
	w->blockw[f->blk - 1] = (uint32_t)(start >> 32);
}

static inline int writer_fail(struct writer *w, int code, const char *what,
			      const void *node)
{
	if (w->err && !w->err->code) {
		w->err->code = code;
		w->err->what = what;
		w->err->node = node;
	}
	return code;
}

/* The same for a file known by its index only: its path is found after. */
static inline int writer_fail_file(struct writer *w, int code, const char *what,
				   size_t file)
{
	if (w->err && !w->err->code)
		w->err_file = (int)file + 1;
	return writer_fail(w, code, what, NULL);
}

/* What a failed open was: ops->open's -ESTALE is another file at the path. */
static inline const char *writer_open_what(int code)
{
	return code == -ESTALE ? "opening: the file was replaced after the scan" : "opening";
}

/*
 * What a failed read of a file's data was: ops->read's -ENODATA is its
 * end.  A source may open a file at its first read (sqfs-stage does, so
 * that files whose blocks it stored are never opened); read(2) itself
 * never fails with ENOENT, so that is the open's.
 */
static inline const char *writer_read_what(int code)
{
	if (code == -ENOENT)
		return "opening";
	return code == -ENODATA ? "reading: the file shrank while it was read" : "reading";
}

/* walk.c: the sorted listing of directory dir at depth (valid until the next at that depth). */
int walk_list(struct writer *w, void *dir, size_t depth, struct wlist **out);
/* The source's entry of node (no name); its errors fail the write. */
int walk_get(struct writer *w, void *node, struct sqw_entry *e);
/*
 * Whether this pass meets e's inode for the first time (1) or met it under
 * another name already (0), or -ENOMEM; *k (if k) gets its link record,
 * NULL for an inode of one name.
 */
int walk_first(struct writer *w, const struct sqw_entry *e, struct wlink **k);
/* After a failure naming a node or a file: fill w->err->path. */
void walk_error_path(struct writer *w);

/* data.c: the data pass */
int data_write(struct writer *w);
/* The file's tail goes into a fragment block (the flags' rule). */
int file_uses_frag(const struct writer *w, uint64_t size);
void data_cleanup(struct writer *w);
/*
 * Reading a file block by block, skipping what the source reports as a
 * hole.  Hole or not must never change the image, only the work done.
 */
struct rd {
	struct writer *w;
	size_t k;
	void *h;
	uint64_t probe;		/* offset of the last next_data() call */
	uint64_t hole_end;	/* its answer: the next data byte */
};
int data_rd_open(struct writer *w, size_t k, struct rd *r);
/* 1: [off, off+len) is a hole and buf is untouched; 0: read; <0: error. */
int data_rd_block(struct rd *r, uint64_t off, size_t len, void *buf);
void data_rd_close(struct rd *r);
/* A free job of the block processor, finishing done ones meanwhile. */
int data_get_job(struct writer *w, struct bp_job **out);

/* frag.c: tails into fragment blocks, in the order the data pass meets them */
/*
 * Put file k's tail into the pending block of its directory level, unless
 * an equal tail is packed already.  r: k's open handle, or NULL.
 */
int frag_tail_add(struct writer *w, size_t k, struct rd *r, unsigned level);
/* A directory's leftover tails join its parent's, in order. */
int frag_pend_move(struct writer *w, struct frag_pend *from, struct frag_pend *to);
/* The pending tails of p become one fragment block. */
int frag_emit(struct writer *w, struct frag_pend *p);
/* Room for every tail whose length is shared, which will be hashed. */
int frag_tail_hash_reserve(struct writer *w);

/* inode.c: what an inode needs beyond its entry; ref filled. */
struct winode {
	const struct sqw_entry *e;
	uint32_t ino, nlink;
	const struct wfile *f;		/* regular files */
	const struct wdir *d;		/* directories */
	uint64_t ref;
};
int inode_write(struct writer *w, struct winode *in);

/* dir_writer.c: the listing of l (its ino, ref and type filled). */
int dir_write_listing(struct writer *w, const struct wlist *l, struct wdir *d,
		      const void *node);
/* The type code of an entry of mode in a listing. */
uint8_t dir_entry_type(uint32_t mode);

/* id_table.c */
int id_lookup(struct writer *w, uint32_t id, uint16_t *index);
int id_table_write(struct writer *w, uint64_t *start);

/* xattr_table.c: the set of the entry's node (none: SQW_NO_XATTR). */
int xattr_lookup(struct writer *w, const struct sqw_entry *e, uint32_t *id);
int xattr_table_write(struct writer *w, uint64_t *start);
void xattr_cleanup(struct writer *w);

#endif
