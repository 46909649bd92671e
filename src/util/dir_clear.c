/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Emptying a large flat directory (the spool's data files) with several
 * threads.  Unlinking a file frees its blocks after the directory lock is
 * dropped, and on a file system mounted with `discard` that free waits for
 * a discard request to complete (ext4: blkdev_issue_discard in
 * ext4_free_blocks, seen with perf as 70% of rm's time); the device serves
 * many of them at once, so the waits overlap.  Measured on the development
 * VM: 20 000 files of 100 bytes in 2.0 s from one process, 0.55 s from 4.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

#define CLEAR_THREADS 8

struct clear {
	pthread_mutex_t lock;	/* the stream is shared */
	DIR *d;
	int dfd;
	int err;		/* first unlinkat failure, as -errno */
};

/* 1: name holds the next entry; 0: the stream is done. */
static int next_name(struct clear *c, char name[256])
{
	struct dirent *de;
	int ret = 0;

	pthread_mutex_lock(&c->lock);
	while ((de = readdir(c->d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		memcpy(name, de->d_name, strlen(de->d_name) + 1);
		ret = 1;
		break;
	}
	pthread_mutex_unlock(&c->lock);
	return ret;
}

static void *clear_main(void *arg)
{
	struct clear *c = arg;
	char name[256];

	while (next_name(c, name)) {
		if (unlinkat(c->dfd, name, 0) && errno != ENOENT) {
			int e = -errno;

			pthread_mutex_lock(&c->lock);
			if (!c->err)
				c->err = e;
			pthread_mutex_unlock(&c->lock);
		}
	}
	return NULL;
}

int dir_clear(int dfd)
{
	struct clear c = { .dfd = dfd };
	pthread_t th[CLEAR_THREADS];
	int fd, i, n = 0;

	fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	c.d = fdopendir(fd);
	if (!c.d) {
		int e = -errno;

		close(fd);
		return e;
	}
	pthread_mutex_init(&c.lock, NULL);
	for (i = 0; i < CLEAR_THREADS; i++)
		if (!pthread_create(&th[n], NULL, clear_main, &c))
			n++;
	if (!n)
		clear_main(&c);	/* no threads to be had: alone, then */
	for (i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&c.lock);
	closedir(c.d);
	return c.err;
}
