/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The second flusher of an fsync.  An fsync in the mount needs the file's
 * flush and the journal's (journal.c), each a write and a cache flush of
 * the spool's device.  One after the other they took 270-294 us on the
 * bench VM, issued from two threads at once 208-213 us: the device
 * overlaps them.  dpkg fsyncs every file it unpacks (7 000 in a
 * debootstrap), so the journal's go to this thread while the request's
 * thread flushes the file.  One plan at a time: a second fsync meanwhile
 * runs its own plan itself.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "stage/stage.h"

struct stage_syncer {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	const struct stage_jnl_plan *job;	/* NULL: free */
	int done, ret, stop;
};

static void *syncer_main(void *arg)
{
	struct stage_syncer *y = arg;

	pthread_setname_np(pthread_self(), "sqfs-sync");
	pthread_mutex_lock(&y->lock);
	for (;;) {
		const struct stage_jnl_plan *job;
		int ret;

		/* A plan given before the stop is still run: its giver waits. */
		while (!(y->job && !y->done) && !y->stop)
			pthread_cond_wait(&y->cond, &y->lock);
		if (!(y->job && !y->done))
			break;
		job = y->job;
		pthread_mutex_unlock(&y->lock);
		ret = stage_jnl_plan_run(job);
		pthread_mutex_lock(&y->lock);
		y->ret = ret;
		y->done = 1;
		pthread_cond_broadcast(&y->cond);
	}
	pthread_mutex_unlock(&y->lock);
	return NULL;
}

int stage_syncer_start(struct stage *s)
{
	struct stage_syncer *y;
	int err;

	if (s->syncer)
		return 0;
	y = calloc(1, sizeof(*y));
	if (!y)
		return -ENOMEM;
	pthread_mutex_init(&y->lock, NULL);
	pthread_cond_init(&y->cond, NULL);
	err = stage_thread_start(&y->thread, syncer_main, y);
	if (err) {
		pthread_cond_destroy(&y->cond);
		pthread_mutex_destroy(&y->lock);
		free(y);
		return err;
	}
	s->syncer = y;
	return 0;
}

int stage_syncer_give(struct stage *s, const struct stage_jnl_plan *p)
{
	struct stage_syncer *y = s->syncer;
	int took = 0;

	if (!y || (p->fd < 0 && !p->names))
		return 0;
	pthread_mutex_lock(&y->lock);
	if (!y->job && !y->stop) {
		y->job = p;
		y->done = 0;
		pthread_cond_broadcast(&y->cond);
		took = 1;
	}
	pthread_mutex_unlock(&y->lock);
	return took;
}

int stage_syncer_wait(struct stage *s)
{
	struct stage_syncer *y = s->syncer;
	int ret;

	pthread_mutex_lock(&y->lock);
	while (!y->done)
		pthread_cond_wait(&y->cond, &y->lock);
	ret = y->ret;
	y->job = NULL;
	pthread_mutex_unlock(&y->lock);
	return ret;
}

void stage_syncer_stop(struct stage *s)
{
	struct stage_syncer *y = s->syncer;

	if (!y)
		return;
	pthread_mutex_lock(&y->lock);
	y->stop = 1;
	pthread_cond_broadcast(&y->cond);
	pthread_mutex_unlock(&y->lock);
	pthread_join(y->thread, NULL);
	pthread_cond_destroy(&y->cond);
	pthread_mutex_destroy(&y->lock);
	s->syncer = NULL;
	free(y);
}
