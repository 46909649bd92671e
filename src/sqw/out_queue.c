/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Lock: q->lock protects everything but the bytes of a buffer, which belong
 * to the caller between get and put and to one writer while it writes them.
 */
#include <pthread.h>
#include <stdlib.h>

#include "sqw/out_queue.h"
#include "util/util.h"

#define OUT_QUEUE_ALIGN 4096u

struct out_write {
	uint8_t *buf;
	size_t len;
	uint64_t off;
};

struct out_queue {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* a write queued, finished, or stop */
	int fd;
	unsigned nbuf, started;
	uint8_t **bufs;			/* all of them, for the free */
	uint8_t **idle;			/* free buffers */
	unsigned nidle;
	struct out_write *pend;		/* FIFO ring of nbuf */
	unsigned head, npend;
	unsigned writing;		/* taken by a writer, not finished */
	int err, stop;
	pthread_t *threads;
};

static void *writer_main(void *arg)
{
	struct out_queue *q = arg;
	struct out_write w;
	int ret, skip;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		while (!q->npend && !q->stop)
			pthread_cond_wait(&q->cond, &q->lock);
		if (!q->npend)
			break;
		w = q->pend[q->head];
		q->head = (q->head + 1) % q->nbuf;
		q->npend--;
		q->writing++;
		skip = q->err;	/* after an error the image is lost anyway */
		pthread_mutex_unlock(&q->lock);

		ret = skip ? 0 : pwrite_all(q->fd, w.buf, w.len, w.off);

		pthread_mutex_lock(&q->lock);
		if (ret && !q->err)
			q->err = ret;
		q->writing--;
		q->idle[q->nidle++] = w.buf;
		pthread_cond_broadcast(&q->cond);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

struct out_queue *out_queue_create(int fd, size_t size, unsigned nbuf,
				   unsigned nthreads, int *err)
{
	struct out_queue *q = calloc(1, sizeof(*q));
	unsigned i;

	*err = -ENOMEM;
	if (!q)
		return NULL;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	q->fd = fd;
	q->nbuf = nbuf;
	q->bufs = calloc(nbuf, sizeof(*q->bufs));
	q->idle = calloc(nbuf, sizeof(*q->idle));
	q->pend = calloc(nbuf, sizeof(*q->pend));
	q->threads = calloc(nthreads, sizeof(*q->threads));
	if (!q->bufs || !q->idle || !q->pend || !q->threads)
		goto fail;
	for (i = 0; i < nbuf; i++) {
		q->bufs[i] = aligned_alloc(OUT_QUEUE_ALIGN, size);
		if (!q->bufs[i])
			goto fail;
		q->idle[q->nidle++] = q->bufs[i];
	}
	for (i = 0; i < nthreads; i++) {
		int ret = pthread_create(&q->threads[i], NULL, writer_main, q);

		if (ret) {
			*err = -ret;
			goto fail;
		}
		q->started++;
	}
	*err = 0;
	return q;
fail:
	out_queue_destroy(q);
	return NULL;
}

uint8_t *out_queue_get(struct out_queue *q)
{
	uint8_t *b = NULL;

	pthread_mutex_lock(&q->lock);
	while (!q->nidle && !q->err)
		pthread_cond_wait(&q->cond, &q->lock);
	if (!q->err)
		b = q->idle[--q->nidle];
	pthread_mutex_unlock(&q->lock);
	return b;
}

void out_queue_put(struct out_queue *q, uint8_t *buf, size_t len, uint64_t off)
{
	pthread_mutex_lock(&q->lock);
	q->pend[(q->head + q->npend) % q->nbuf] = (struct out_write){ buf, len, off };
	q->npend++;
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

int out_queue_drain(struct out_queue *q)
{
	int err;

	pthread_mutex_lock(&q->lock);
	while (q->npend || q->writing)
		pthread_cond_wait(&q->cond, &q->lock);
	err = q->err;
	pthread_mutex_unlock(&q->lock);
	return err;
}

void out_queue_destroy(struct out_queue *q)
{
	unsigned i;

	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->stop = 1;
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
	for (i = 0; i < q->started; i++)
		pthread_join(q->threads[i], NULL);
	for (i = 0; q->bufs && i < q->nbuf; i++)
		free(q->bufs[i]);
	free(q->bufs);
	free(q->idle);
	free(q->pend);
	free(q->threads);
	pthread_cond_destroy(&q->cond);
	pthread_mutex_destroy(&q->lock);
	free(q);
}
