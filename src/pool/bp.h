/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Block processor: compresses blocks on a worker pool and hands them back
 * strictly in submission order.  Workers only compute; all I/O stays with
 * the one thread that submits and dequeues.  The number of jobs is fixed at
 * creation, which bounds memory however large the input.
 */
#ifndef SQW_BP_H
#define SQW_BP_H

#include <stdint.h>

#include "sqw/compressor.h"

struct bp_job {
	uint8_t *in;		/* block_size bytes, owned by the job */
	uint32_t in_len;
	int allow_sparse;	/* an all-zero block becomes a hole */
#define BP_KNOWN_HOLE 2		/* allow_sparse value: in[] is not filled */
	int stored;		/* in[] already holds the stored form and
				 * size_word its word: nothing to compute */
	int from_fd;		/* stored, but not in in[]: it is read from here, */
	uint64_t from_off;	/* at this offset, as it is appended (-1: in[]) */

	/* results */
	const uint8_t *result;	/* in or out */
	uint32_t result_len;
	uint32_t size_word;	/* SquashFS block size word; 0 = hole */
	int err;

	/* tags for the caller */
	int kind;
	const void *node;	/* for messages */
	uint32_t file;
	uint32_t index;
	int stale;		/* its bytes do not match the key it was built under */

	/* private */
	uint8_t *out;
	uint64_t seq;
	int done;		/* protected by the pool lock */
	struct bp_job *next;
};

struct bp;

/* jobs == 0 selects the serial twin: same interface, no threads. */
struct bp *bp_create(unsigned jobs, unsigned queue, const sqw_compressor_t *cmp,
		     uint32_t block_size, int *err);
void bp_destroy(struct bp *bp);

/* A free job, or NULL when all are in flight (dequeue one first). */
struct bp_job *bp_get_job(struct bp *bp);
void bp_submit(struct bp *bp, struct bp_job *job);
/* The oldest job in flight, once finished; NULL when none is in flight. */
struct bp_job *bp_dequeue(struct bp *bp);
/* The same, but NULL at once when the oldest is not finished yet. */
struct bp_job *bp_try_dequeue(struct bp *bp);
void bp_release(struct bp *bp, struct bp_job *job);

/* Shared by both implementations: compress one job in place. */
void bp_process(sqw_compressor_t *cmp, uint32_t block_size, struct bp_job *job);

#endif
