/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdlib.h>
#include <string.h>
#include <errno.h>

#include "pool/internal.h"
#include "pool/probe.h"
#include "util/util.h"

void bp_process(sqw_compressor_t *cmp, uint32_t block_size, struct bp_job *j)
{
	int ret;

	j->err = 0;
	if (j->stored) {
		j->result = j->size_word ? j->in : NULL;
		j->result_len = j->size_word & ~(1u << 24);
		return;
	}
	if (j->allow_sparse == BP_KNOWN_HOLE ||
	    (j->allow_sparse && is_zero(j->in, j->in_len))) {
		j->result = NULL;
		j->result_len = 0;
		j->size_word = 0;
		return;
	}
	if (bp_probe_incompressible(j->in, j->in_len, j->out))
		ret = 0;
	else
		ret = cmp->compress(cmp, j->in, j->in_len, j->out, block_size);
	if (ret < 0) {
		j->err = ret;
		return;
	}
	if (ret == 0) {
		/* Did not shrink: stored raw, flagged by bit 24. */
		j->result = j->in;
		j->result_len = j->in_len;
		j->size_word = j->in_len | (1u << 24);
	} else {
		j->result = j->out;
		j->result_len = (uint32_t)ret;
		j->size_word = (uint32_t)ret;
	}
}

/*
 * Give the next job its buffers and free it.  Buffers come as the queue
 * first fills, not all at bp_create(): a tree of three files under
 * --queue 65536 needs three blocks, not 16 GiB of address space.
 */
static int job_buffer(struct bp *bp)
{
	struct bp_job *j = &bp->jobs[bp->nbuffered];

	j->in = malloc(bp->block_size);
	j->out = malloc(bp->block_size);
	if (!j->in || !j->out) {
		free(j->in);
		free(j->out);
		j->in = j->out = NULL;
		return -ENOMEM;
	}
	bp->nbuffered++;
	j->next = bp->free;
	bp->free = j;
	return 0;
}

int bp_common_init(struct bp *bp, unsigned queue, uint32_t block_size)
{
	bp->block_size = block_size;
	bp->njobs = queue;
	bp->nbuffered = 0;
	bp->jobs = alloc_array(queue, sizeof(*bp->jobs));
	if (!bp->jobs)
		return -ENOMEM;
	/*
	 * Two up front, so that one can be in flight while the caller fills
	 * the other even when later ones cannot be had: short of memory, the
	 * queue is only shorter.
	 */
	for (unsigned i = 0; i < 2 && i < queue; i++)
		if (job_buffer(bp))
			return -ENOMEM;
	return 0;
}

void bp_common_cleanup(struct bp *bp)
{
	unsigned i;

	if (!bp->jobs)
		return;
	for (i = 0; i < bp->nbuffered; i++) {
		free(bp->jobs[i].in);
		free(bp->jobs[i].out);
	}
	free(bp->jobs);
	bp->jobs = NULL;
}

struct bp *bp_create(unsigned jobs, unsigned queue, const sqw_compressor_t *cmp,
		     uint32_t block_size, int *err)
{
	if (queue < 2)
		queue = 2;
	if (jobs == 0)
		return bp_serial_create(queue, cmp, block_size, err);
	return bp_threaded_create(jobs, queue, cmp, block_size, err);
}

void bp_destroy(struct bp *bp)
{
	if (bp)
		bp->impl->destroy(bp);
}

struct bp_job *bp_get_job(struct bp *bp)
{
	struct bp_job *j = bp->free;

	if (!j && bp->nbuffered < bp->njobs && !job_buffer(bp))
		j = bp->free;
	if (j) {
		bp->free = j->next;
		j->next = NULL;
		j->allow_sparse = 0;
		j->stored = 0;
		j->in_len = 0;
		j->kind = 0;
		j->node = NULL;
		j->index = 0;
	}
	return j;
}

void bp_submit(struct bp *bp, struct bp_job *job)
{
	job->seq = bp->next_seq++;
	bp->impl->submit(bp, job);
}

struct bp_job *bp_dequeue(struct bp *bp)
{
	if (bp->next_out == bp->next_seq)
		return NULL;
	return bp->impl->dequeue(bp);
}

struct bp_job *bp_try_dequeue(struct bp *bp)
{
	if (bp->next_out == bp->next_seq)
		return NULL;
	if (bp->impl->ready && !bp->impl->ready(bp))
		return NULL;
	return bp->impl->dequeue(bp);
}

void bp_release(struct bp *bp, struct bp_job *job)
{
	job->next = bp->free;
	bp->free = job;
}
