/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The serial twin: the reference the threaded pool must match byte for
 * byte.  Work is done at submission, in the caller's thread.
 */
#include <stdlib.h>
#include <errno.h>

#include "pool/internal.h"

struct bp_serial {
	struct bp base;
	sqw_compressor_t *cmp;
	struct bp_job *head, *tail;
};

static void serial_submit(struct bp *bp, struct bp_job *job)
{
	struct bp_serial *s = (struct bp_serial *)bp;

	bp_process(s->cmp, bp->block_size, job);
	job->done = 1;
	job->next = NULL;
	if (s->tail)
		s->tail->next = job;
	else
		s->head = job;
	s->tail = job;
}

static struct bp_job *serial_dequeue(struct bp *bp)
{
	struct bp_serial *s = (struct bp_serial *)bp;
	struct bp_job *j = s->head;

	s->head = j->next;
	if (!s->head)
		s->tail = NULL;
	j->next = NULL;
	bp->next_out++;
	return j;
}

static void serial_destroy(struct bp *bp)
{
	struct bp_serial *s = (struct bp_serial *)bp;

	sqw_compressor_destroy(s->cmp);
	bp_common_cleanup(bp);
	free(s);
}

static const struct bp_impl serial_impl = {
	.submit = serial_submit,
	.dequeue = serial_dequeue,
	.destroy = serial_destroy,
};

struct bp *bp_serial_create(unsigned queue, const sqw_compressor_t *cmp,
			    uint32_t block_size, int *err)
{
	struct bp_serial *s = calloc(1, sizeof(*s));

	if (!s) {
		*err = -ENOMEM;
		return NULL;
	}
	s->base.impl = &serial_impl;
	s->cmp = cmp->copy(cmp);
	*err = s->cmp ? bp_common_init(&s->base, queue, block_size) : -ENOMEM;
	if (*err) {
		serial_destroy(&s->base);
		return NULL;
	}
	return &s->base;
}
