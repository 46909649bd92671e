/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The seal requests' own thread.  A seal takes seconds and waits for closes
 * still on their way from the kernel; served where the request arrived, it
 * would hold up every request that thread alone serves: all of them with
 * -s, and with FUSE over io_uring those made on its CPU.  A close among
 * them was never seen (the seal failed on a file "still open for
 * writing"), and the kernel's forgetting of a name the seal made again
 * (-o pseudo_file) waits for the directory's lock, which a create held
 * while its request waited there: the mount hung for good.  Seals queue
 * here and run in the order they came.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "stage/ops.h"

struct seal_job {
	fuse_req_t req;
	size_t size;
	struct seal_job *next;
};

struct stage_sealer {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct seal_job *head, **tail;
	int stop;
};

static void *sealer_main(void *arg)
{
	struct stage *s = arg;
	struct stage_sealer *z = s->sealer;

	pthread_setname_np(pthread_self(), "sqfs-sealer");
	pthread_mutex_lock(&z->lock);
	for (;;) {
		struct seal_job *j;

		/* Seals given before the stop still run: sqfs-seal waits for each. */
		while (!z->head && !z->stop)
			pthread_cond_wait(&z->cond, &z->lock);
		j = z->head;
		if (!j)
			break;
		z->head = j->next;
		if (!z->head)
			z->tail = &z->head;
		pthread_mutex_unlock(&z->lock);
		stage_seal_serve(s, j->req, j->size);
		free(j);
		pthread_mutex_lock(&z->lock);
	}
	pthread_mutex_unlock(&z->lock);
	return NULL;
}

int stage_sealer_start(struct stage *s)
{
	struct stage_sealer *z;
	int err;

	if (s->sealer)
		return 0;
	z = calloc(1, sizeof(*z));
	if (!z)
		return -ENOMEM;
	pthread_mutex_init(&z->lock, NULL);
	pthread_cond_init(&z->cond, NULL);
	z->tail = &z->head;
	s->sealer = z;
	err = stage_thread_start(&z->thread, sealer_main, s);
	if (err) {
		s->sealer = NULL;
		pthread_cond_destroy(&z->cond);
		pthread_mutex_destroy(&z->lock);
		free(z);
	}
	return err;
}

int stage_sealer_give(struct stage *s, fuse_req_t req, size_t size)
{
	struct stage_sealer *z = s->sealer;
	struct seal_job *j;
	int took = 0;

	if (!z || !(j = malloc(sizeof(*j))))
		return 0;
	j->req = req;
	j->size = size;
	j->next = NULL;
	pthread_mutex_lock(&z->lock);
	if (!z->stop) {
		*z->tail = j;
		z->tail = &j->next;
		pthread_cond_signal(&z->cond);
		took = 1;
	}
	pthread_mutex_unlock(&z->lock);
	if (!took)
		free(j);
	return took;
}

void stage_sealer_stop(struct stage *s)
{
	struct stage_sealer *z = s->sealer;
	int stopped;

	if (!z)
		return;
	pthread_mutex_lock(&z->lock);
	stopped = z->stop;
	z->stop = 1;
	pthread_cond_signal(&z->cond);
	pthread_mutex_unlock(&z->lock);
	if (!stopped)
		pthread_join(z->thread, NULL);
}

void stage_sealer_free(struct stage *s)
{
	struct stage_sealer *z = s->sealer;

	if (!z)
		return;
	stage_sealer_stop(s);
	pthread_cond_destroy(&z->cond);
	pthread_mutex_destroy(&z->lock);
	s->sealer = NULL;
	free(z);
}
