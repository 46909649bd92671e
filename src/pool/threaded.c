/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The threaded pool (after squashfs-tools-ng's parallelism notes): a FIFO
 * work queue, workers that mark jobs done, and in-order dequeue by
 * sequence number.  With sqw/out_queue.c (the image's writes), the only
 * pthread code of the writer.
 *
 * Lock: pool->lock protects work_head/work_tail, shutdown and every job's
 * done flag.  Job payloads belong to the worker between dequeue from the
 * work queue and done = 1, and to the caller otherwise.
 */
#include <pthread.h>
#include <stdlib.h>
#include <errno.h>

#include "pool/internal.h"

struct worker {
	struct bp_threaded *pool;
	sqw_compressor_t *cmp;
	pthread_t thread;
	int started;
};

struct bp_threaded {
	struct bp base;
	pthread_mutex_t lock;
	pthread_cond_t work_cond;	/* work queued or shutdown */
	pthread_cond_t done_cond;	/* a job finished */
	struct bp_job *work_head, *work_tail;
	struct bp_job **ring;		/* in-flight jobs by seq % njobs */
	int shutdown;
	unsigned nworkers;
	struct worker *workers;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct bp_threaded *p = w->pool;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct bp_job *j;

		while (!p->work_head && !p->shutdown)
			pthread_cond_wait(&p->work_cond, &p->lock);
		if (p->shutdown)
			break;
		j = p->work_head;
		p->work_head = j->next;
		if (!p->work_head)
			p->work_tail = NULL;
		pthread_mutex_unlock(&p->lock);

		bp_process(w->cmp, p->base.block_size, j);

		pthread_mutex_lock(&p->lock);
		j->done = 1;
		pthread_cond_broadcast(&p->done_cond);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

static void threaded_submit(struct bp *bp, struct bp_job *job)
{
	struct bp_threaded *p = (struct bp_threaded *)bp;

	p->ring[job->seq % bp->njobs] = job;
	if (bp_job_trivial(job)) {
		/*
		 * Nothing for the codec (a block compressed earlier, a known
		 * hole): a worker would only bounce it back, at two wakeups
		 * (about 20 us each on a VM, 7 700 of them in a seal).
		 */
		bp_process(NULL, bp->block_size, job);
		pthread_mutex_lock(&p->lock);
		job->done = 1;
		pthread_mutex_unlock(&p->lock);
		return;
	}
	pthread_mutex_lock(&p->lock);
	job->done = 0;
	job->next = NULL;
	if (p->work_tail)
		p->work_tail->next = job;
	else
		p->work_head = job;
	p->work_tail = job;
	pthread_cond_signal(&p->work_cond);
	pthread_mutex_unlock(&p->lock);
}

static struct bp_job *threaded_dequeue(struct bp *bp)
{
	struct bp_threaded *p = (struct bp_threaded *)bp;
	struct bp_job *j = p->ring[bp->next_out % bp->njobs];

	pthread_mutex_lock(&p->lock);
	while (!j->done)
		pthread_cond_wait(&p->done_cond, &p->lock);
	pthread_mutex_unlock(&p->lock);
	bp->next_out++;
	return j;
}

static int threaded_ready(struct bp *bp)
{
	struct bp_threaded *p = (struct bp_threaded *)bp;
	struct bp_job *j = p->ring[bp->next_out % bp->njobs];
	int done;

	pthread_mutex_lock(&p->lock);
	done = j->done;
	pthread_mutex_unlock(&p->lock);
	return done;
}

static void threaded_destroy(struct bp *bp)
{
	struct bp_threaded *p = (struct bp_threaded *)bp;
	unsigned i;

	pthread_mutex_lock(&p->lock);
	p->shutdown = 1;
	pthread_cond_broadcast(&p->work_cond);
	pthread_mutex_unlock(&p->lock);
	for (i = 0; i < p->nworkers; i++) {
		if (p->workers[i].started)
			pthread_join(p->workers[i].thread, NULL);
		sqw_compressor_destroy(p->workers[i].cmp);
	}
	free(p->workers);
	free(p->ring);
	pthread_cond_destroy(&p->work_cond);
	pthread_cond_destroy(&p->done_cond);
	pthread_mutex_destroy(&p->lock);
	bp_common_cleanup(bp);
	free(p);
}

static const struct bp_impl threaded_impl = {
	.submit = threaded_submit,
	.dequeue = threaded_dequeue,
	.ready = threaded_ready,
	.destroy = threaded_destroy,
};

struct bp *bp_threaded_create(unsigned jobs, unsigned queue,
			      const sqw_compressor_t *cmp, uint32_t block_size,
			      int *err)
{
	struct bp_threaded *p = calloc(1, sizeof(*p));
	unsigned i;

	if (!p) {
		*err = -ENOMEM;
		return NULL;
	}
	p->base.impl = &threaded_impl;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work_cond, NULL);
	pthread_cond_init(&p->done_cond, NULL);
	p->workers = calloc(jobs, sizeof(*p->workers));
	p->nworkers = p->workers ? jobs : 0;
	p->ring = calloc(queue, sizeof(*p->ring));
	*err = -ENOMEM;
	if (!p->workers || !p->ring)
		goto fail;
	*err = bp_common_init(&p->base, queue, block_size);
	if (*err)
		goto fail;
	for (i = 0; i < jobs; i++) {
		struct worker *w = &p->workers[i];

		w->pool = p;
		w->cmp = cmp->copy(cmp);
		if (!w->cmp) {
			*err = -ENOMEM;
			goto fail;
		}
		*err = -pthread_create(&w->thread, NULL, worker_main, w);
		if (*err)
			goto fail;
		w->started = 1;
	}
	return &p->base;
fail:
	threaded_destroy(&p->base);
	return NULL;
}
