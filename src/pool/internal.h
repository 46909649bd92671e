/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef SQW_BP_INTERNAL_H
#define SQW_BP_INTERNAL_H

#include "pool/bp.h"

struct bp_impl {
	void (*submit)(struct bp *bp, struct bp_job *job);
	struct bp_job *(*dequeue)(struct bp *bp);
	/* Optional: 1 if the oldest job in flight is finished (else it always is). */
	int (*ready)(struct bp *bp);
	void (*destroy)(struct bp *bp);
};

struct bp {
	const struct bp_impl *impl;
	uint32_t block_size;
	struct bp_job *jobs;	/* all jobs, one allocation */
	unsigned njobs;
	unsigned nbuffered;	/* jobs[0..nbuffered) have their buffers */
	struct bp_job *free;	/* touched by the caller's thread only */
	uint64_t next_seq;	/* next sequence number to hand out */
	uint64_t next_out;	/* next sequence number to dequeue */
};

/* 1: bp_process() needs no compressor for job (its result is known). */
static inline int bp_job_trivial(const struct bp_job *job)
{
	return job->stored || job->allow_sparse == BP_KNOWN_HOLE;
}

int bp_common_init(struct bp *bp, unsigned queue, uint32_t block_size);
void bp_common_cleanup(struct bp *bp);

struct bp *bp_serial_create(unsigned queue, const sqw_compressor_t *cmp,
			    uint32_t block_size, int *err);
struct bp *bp_threaded_create(unsigned jobs, unsigned queue,
			      const sqw_compressor_t *cmp, uint32_t block_size,
			      int *err);

#endif
