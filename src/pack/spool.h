/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef SQW_SPOOL_H
#define SQW_SPOOL_H

#include "pack/pack.h"

struct spool_ahead;
struct spool_rehearse;

struct spool {
	int fd;
	int in_fd;		/* the archive itself, for files read in place; -1 */
	uint64_t size;		/* bytes appended, buffered ones included */
	uint8_t *buf;
	size_t fill;
	struct spool_ahead *ah;	/* compressing while reading (ahead.c), or NULL */
	struct spool_rehearse *rh;	/* fragment blocks while reading (rehearse.c) */
	int reading;		/* the archive is being read (read_tar.c) */
};

struct spool_extent {
	uint64_t off;		/* in the file */
	uint64_t pos;		/* in the spool */
	uint64_t len;
};

struct spool_file {
	struct spool *sp;
	uint64_t size;
	struct spool_extent *ext;
	size_t n, cap;
	int unsorted;		/* extents out of order or overlapping */
	int in_place;		/* extents are offsets in sp->in_fd, not the spool */
	/* ahead.c: the stored forms of its data blocks, nstored of them, or NULL */
	struct spool_stored *stored;
	uint32_t nstored;
	uint64_t fed;		/* bytes given to ahead.c, in order from 0 */
	uint32_t inflight;	/* its blocks still being compressed */
	int no_ahead;		/* data out of order, or the file goes: none stored is used */
	/* rehearse.c: the digest of its tail, as the writer makes it */
	int tdig_ok;
	uint8_t tdig[16];
};

/* A block compressed while the archive was read: its place in the ahead file. */
struct spool_stored {
	uint64_t pos;		/* UINT64_MAX: stored raw, so read from the spool */
	uint32_t word;		/* SquashFS size word; 0 = hole; UINT32_MAX = none */
};

int spool_file_append(struct spool *sp, struct spool_file *f, uint64_t off,
		      const void *data, size_t len);
/* f's bytes [off, off+len) are at pos in sp->in_fd (for a file with in_place set). */
int spool_file_in_place(struct spool_file *f, uint64_t off, uint64_t pos, uint64_t len);
int spool_flush(struct spool *sp);
/* Bytes [off, off+len) of f (holes read as zeros), once the spool is flushed. */
int spool_file_read(void *f, uint64_t off, void *buf, size_t len);
void spool_file_free(void *f);
/* An unnamed temporary file in dir, or -errno. */
int spool_tmpfile(const char *dir);

/* Compress ahead (ahead.c; spool_ahead_start in pack.h). */
/* f's bytes [off, off+len), as the archive gives them. */
int spool_ahead_feed(struct spool_ahead *ah, struct spool_file *f, uint64_t off,
		     const void *data, size_t len);
/*
 * The spool could not grow (code): 1 if the blocks compressed ahead gave
 * their room up for it (see turn_off), so the write may be tried again.
 */
int spool_ahead_give_way(struct spool_ahead *ah, int code);
/* f is going: wait for its blocks in flight (errors are kept for later). */
void spool_ahead_forget(struct spool_ahead *ah, struct spool_file *f);
/* The end of the archive: drain, and free the threads and buffers. */
int spool_ahead_finish(struct spool_ahead *ah);
void spool_ahead_destroy(struct spool_ahead *ah);
/* Fragment blocks while reading (rehearse.c; spool_rehearse_start in pack.h). */
/* Between two members (tree is complete, as read so far): maybe rehearse.  -errno. */
int spool_rehearse_tick(struct spool *sp, sqw_tree_t *tree);
/* f is going: 1 if it must wait for the running rehearsal (freed after it). */
int spool_rehearse_drop(struct spool_file *f);
/*
 * The spool or the image could not grow (code): give the stored blocks'
 * room up, with a warning unless quiet (ahead.c gave one); 1 if there was any.
 */
int spool_rehearse_give_way(struct spool_rehearse *rh, int code, int quiet);
void spool_rehearse_destroy(struct spool_rehearse *rh);
/* For sqw_source_ops.stored_block. */
int spool_ahead_stored(struct spool_file *f, uint32_t index, void *buf, uint32_t *word);

#endif
