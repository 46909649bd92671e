/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Spare spool files.  A regular file's data lives in SPOOL/data/INO, made
 * when the file is created; on ext4 that takes 20 to 70 us, most of what a
 * CREATE request costs us, and the program creating files waits for it.
 * Inode numbers are handed out in order, so a helper thread creates the
 * files of the next numbers ahead of need, while the CPU that is not busy
 * with the producer has time; CREATE then finds its file already open.
 *
 * A number taken by a directory, symlink or device leaves its spare
 * unused: the next take passes it by and the helper removes it.  Spares
 * have their final names, so a daemon killed with spares in the spool
 * leaves nothing the recovery does not already sweep (files of no node).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "stage/stage.h"

#define SPARE_MAX 32		/* kept ready */
#define SPARE_DROP 64		/* passed by, waiting for removal */
/*
 * A take wakes the helper only once this few are left (or removals pile
 * up), so that it makes files in runs: a wakeup per CREATE is a futex call
 * in the request's path and, on a VM, an interrupt to the other vCPU.
 */
#define SPARE_LOW(sp) ((sp)->max / 2)
/*
 * Spares hold descriptors that requests may need more: under a low
 * RLIMIT_NOFILE they take no more than this share of it (none below 32).
 */
#define SPARE_FD_SHARE 32

struct spare {
	fuse_ino_t ino;
	int fd;
};

struct stage_spare {
	int datafd;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;	/* to the helper: room, something to remove, stop */
	pthread_cond_t made;	/* to a take waiting for the number being made */
	int stop;
	int failing;		/* the last create failed: wait for the next take */
	size_t max;		/* kept ready: SPARE_MAX, or fewer under a low fd limit */
	fuse_ino_t floor;	/* numbers below are taken or passed by */
	fuse_ino_t next;	/* the next number the helper makes */
	fuse_ino_t making;	/* being made now; 0: none */
	struct spare ready[SPARE_MAX];	/* in number order, from head */
	size_t head, count;
	fuse_ino_t drop[SPARE_DROP];
	size_t ndrop;
};

static void spare_unlink(struct stage_spare *sp, fuse_ino_t ino)
{
	char name[STAGE_SPOOL_NAME_SIZE];

	unlinkat(sp->datafd, stage_spool_name(name, ino), 0);
}

/* A spare whose number is passed by: the helper removes it, or we do now. */
static void spare_drop(struct stage_spare *sp, fuse_ino_t ino)
{
	if (sp->ndrop < SPARE_DROP)
		sp->drop[sp->ndrop++] = ino;
	else
		spare_unlink(sp, ino);
}

static void *spare_main(void *arg)
{
	struct stage_spare *sp = arg;
	char name[STAGE_SPOOL_NAME_SIZE];

	pthread_setname_np(pthread_self(), "sqfs-spare");
	pthread_mutex_lock(&sp->lock);
	while (!sp->stop) {
		if (sp->ndrop) {
			fuse_ino_t ino = sp->drop[--sp->ndrop];

			pthread_mutex_unlock(&sp->lock);
			spare_unlink(sp, ino);
			pthread_mutex_lock(&sp->lock);
			continue;
		}
		if (sp->count < sp->max && !sp->failing) {
			fuse_ino_t ino = sp->next > sp->floor ? sp->next : sp->floor;
			int fd;

			sp->making = ino;
			pthread_mutex_unlock(&sp->lock);
			fd = openat(sp->datafd, stage_spool_name(name, ino),
				    O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
			pthread_mutex_lock(&sp->lock);
			sp->making = 0;
			sp->next = ino + 1;
			if (fd < 0) {
				/* EEXIST: made by a take that did not wait for us; else a full spool. */
				if (errno != EEXIST)
					sp->failing = 1;
			} else if (ino < sp->floor) {
				close(fd);
				spare_drop(sp, ino);
			} else {
				sp->ready[(sp->head + sp->count) % SPARE_MAX] = (struct spare){ ino, fd };
				sp->count++;
			}
			pthread_cond_broadcast(&sp->made);
			continue;
		}
		pthread_cond_wait(&sp->wake, &sp->lock);
	}
	pthread_mutex_unlock(&sp->lock);
	return NULL;
}

int stage_spare_take(struct stage *s, fuse_ino_t ino)
{
	struct stage_spare *sp = s->spare;
	int fd = -1;

	if (!sp)
		return -1;
	pthread_mutex_lock(&sp->lock);
	while (sp->making == ino)
		pthread_cond_wait(&sp->made, &sp->lock);
	while (sp->count && sp->ready[sp->head].ino <= ino) {
		struct spare x = sp->ready[sp->head];

		sp->head = (sp->head + 1) % SPARE_MAX;
		sp->count--;
		if (x.ino == ino) {
			fd = x.fd;
			continue;
		}
		/* Its number went to a node with no data. */
		close(x.fd);
		spare_drop(sp, x.ino);
	}
	if (ino + 1 > sp->floor)
		sp->floor = ino + 1;
	sp->failing = 0;
	if (sp->count <= SPARE_LOW(sp) || sp->ndrop >= SPARE_DROP / 2)
		pthread_cond_signal(&sp->wake);
	pthread_mutex_unlock(&sp->lock);
	return fd;
}

int stage_spare_start(struct stage *s)
{
	struct stage_spare *sp;
	struct rlimit rl;
	size_t max = SPARE_MAX;
	int err;

	if (s->spare || s->datafd < 0)
		return 0;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur / SPARE_FD_SHARE < max)
		max = rl.rlim_cur / SPARE_FD_SHARE;
	if (!max)
		return 0;
	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	sp->max = max;
	sp->datafd = s->datafd;
	sp->floor = s->next_ino;
	pthread_mutex_init(&sp->lock, NULL);
	pthread_cond_init(&sp->wake, NULL);
	pthread_cond_init(&sp->made, NULL);
	err = stage_thread_start(&sp->thread, spare_main, sp);
	if (err) {
		pthread_cond_destroy(&sp->made);
		pthread_cond_destroy(&sp->wake);
		pthread_mutex_destroy(&sp->lock);
		free(sp);
		return err;
	}
	s->spare = sp;
	return 0;
}

/* Stop the helper and remove every spare; the stage lock is not held. */
void stage_spare_stop(struct stage *s)
{
	struct stage_spare *sp = s->spare;

	if (!sp)
		return;
	pthread_mutex_lock(&sp->lock);
	sp->stop = 1;
	pthread_cond_signal(&sp->wake);
	pthread_mutex_unlock(&sp->lock);
	pthread_join(sp->thread, NULL);
	while (sp->count) {
		struct spare x = sp->ready[sp->head];

		sp->head = (sp->head + 1) % SPARE_MAX;
		sp->count--;
		close(x.fd);
		spare_unlink(sp, x.ino);
	}
	while (sp->ndrop)
		spare_unlink(sp, sp->drop[--sp->ndrop]);
	pthread_cond_destroy(&sp->made);
	pthread_cond_destroy(&sp->wake);
	pthread_mutex_destroy(&sp->lock);
	s->spare = NULL;
	free(sp);
}
