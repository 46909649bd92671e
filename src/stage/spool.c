/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The spool: a directory beside the image (or in -o spool=DIR) with all a
 * mount has staged: data/INO for each regular file, the journal, the
 * blocks compressed ahead, the image's options.  One daemon at a time owns
 * it, by an flock on the directory held while it runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stage/stage.h"
#include "util/util.h"

/* Fills msg; returns err (negative) for the caller to pass on. */
__attribute__((format(printf, 4, 5)))
static int say(char *msg, size_t len, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, len, fmt, ap);
	va_end(ap);
	return err;
}

/* Ours alone while we run: a second daemon on the spool would corrupt it. */
static int spool_lock(struct stage *s, char *msg, size_t len)
{
	int fd = open(s->spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC), err;

	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB)) {
		err = errno;
		if (fd >= 0)
			close(fd);
		return say(msg, len, -err, "spool %s: %s", s->spool,
			   err == EWOULDBLOCK ? "in use by a running sqfs-stage" : strerror(err));
	}
	s->spoolfd = fd;
	return 0;
}

/*
 * SPOOL/data, where a file per staged inode is created.  On ext4, creating
 * inodes in a block group that just freed thousands (the last spool's, a
 * moment ago) costs ~0.5 ms each instead of ~30 us: the allocator skips
 * recently deleted inodes one by one.  A directory under a "top directory"
 * (FS_TOPDIR_FL) gets a block group of its own, chosen by a hash of its
 * name, so it is made under a random name and then renamed.  Best effort:
 * other file systems have no such flag.
 */
static int make_datadir(struct stage *s)
{
	char *tmp = NULL;
	int fd, flags, ret = -1;

	fd = open(s->spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		if (!ioctl(fd, FS_IOC_GETFLAGS, &flags)) {
			flags |= FS_TOPDIR_FL;
			(void)ioctl(fd, FS_IOC_SETFLAGS, &flags);
		}
		close(fd);
	}
	if (asprintf(&tmp, "%s/.data.XXXXXX", s->spool) < 0)
		return mkdir(s->datadir, 0700);
	if (mkdtemp(tmp)) {
		ret = rename(tmp, s->datadir);
		if (ret)
			rmdir(tmp);
	}
	free(tmp);
	return ret ? mkdir(s->datadir, 0700) : 0;
}

int stage_spool_make(struct stage *s, const char *where, char *msg, size_t len)
{
	char *c = strdup(s->image), *c2 = strdup(s->image), dir[PATH_MAX];
	int ret, err;

	if (!c || !c2)
		goto nomem;
	if (!realpath(where ? where : dirname(c), dir)) {
		err = errno;
		ret = say(msg, len, -err, "spool directory %s: %s", where ? where : c,
			  strerror(err));
		goto out;
	}
	/* Within NAME_MAX whatever IMAGE's name: only the suffix must be unique. */
	if (asprintf(&s->spool, "%s/.%.*s.spool.XXXXXX", strcmp(dir, "/") ? dir : "",
		     NAME_MAX - 14, basename(c2)) < 0) {
		s->spool = NULL;
		goto nomem;
	}
	if (!mkdtemp(s->spool)) {
		err = errno;
		ret = say(msg, len, -err, "creating a spool directory in %s: %s", dir,
			  strerror(err));
		free(s->spool);
		s->spool = NULL;
		goto out;
	}
	if (asprintf(&s->datadir, "%s/data", s->spool) < 0) {
		s->datadir = NULL;
		rmdir(s->spool);
		goto nomem;
	}
	if (make_datadir(s) ||
	    (s->datafd = open(s->datadir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		err = errno;
		ret = say(msg, len, -err, "creating %s: %s", s->datadir, strerror(err));
		rmdir(s->datadir);
		rmdir(s->spool);
		goto out;
	}
	ret = spool_lock(s, msg, len);
	if (ret)
		stage_remove_spool(s);
out:
	free(c);
	free(c2);
	return ret;
nomem:
	ret = say(msg, len, -ENOMEM, "out of memory");
	goto out;
}

int stage_spool_open(struct stage *s, const char *where, char *msg, size_t len)
{
	char dir[PATH_MAX];
	struct stat st;
	int ret, err;

	if (!realpath(where, dir)) {
		err = errno;
		return say(msg, len, -err, "-o recover: %s: %s", where, strerror(err));
	}
	if (asprintf(&s->spool, "%s", dir) < 0 || asprintf(&s->datadir, "%s/data", dir) < 0) {
		s->datadir = NULL;
		return say(msg, len, -ENOMEM, "out of memory");
	}
	if (fstatat(AT_FDCWD, s->spool, &st, 0) || !S_ISDIR(st.st_mode) ||
	    access(s->spool, W_OK | X_OK))
		return say(msg, len, -ENOTDIR, "-o recover: %s: not a writable directory",
			   s->spool);
	ret = spool_lock(s, msg, len);
	if (ret)
		return ret;
	s->datafd = open(s->datadir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->datafd < 0) {
		err = errno;
		return say(msg, len, -err, "-o recover: %s: %s (not a sqfs-stage spool?)",
			   s->datadir, strerror(err));
	}
	return 0;
}

void stage_remove_spool(struct stage *s)
{
	static const char *const spool_files[] = {
		"journal", "journal.new", "blocks", "volatile", "options", "options.new",
		"pseudo", "pseudo.new"	/* -o pseudo_file (spoolopts.c) */
	};
	size_t i;

	if (s->datafd < 0)
		return;
	/* One file per staged file: a million of them take a while (dir_clear.c). */
	(void)dir_clear(s->datafd);
	close(s->datafd);
	s->datafd = -1;
	rmdir(s->datadir);
	for (i = 0; i < sizeof(spool_files) / sizeof(spool_files[0]); i++) {
		char *p;

		if (asprintf(&p, "%s/%s", s->spool, spool_files[i]) >= 0) {
			unlink(p);
			free(p);
		}
	}
	rmdir(s->spool);
}

int stage_spool_gone(const struct stage *s)
{
	struct stat st;

	if (s->datafd >= 0 && !fstat(s->datafd, &st) && !st.st_nlink)
		return 1;
	return s->spoolfd >= 0 && !fstat(s->spoolfd, &st) && !st.st_nlink;
}
