/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Publishing an image atomically: write a temporary file beside the target,
 * fsync it, rename it over the target and fsync the directory.  Until then
 * the target keeps its old contents (or stays absent).
 *
 * The temporary file is unnamed (O_TMPFILE) where the file system allows:
 * a writer killed with SIGKILL, or a machine that crashes, then leaves
 * nothing behind.  It gets a name only once complete and synced: the
 * target's, when there is none yet, else a temporary one renamed over it.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

static char *dir_of(const char *path)
{
	char *copy = strdup(path), *d;

	if (!copy)
		return NULL;
	d = strdup(dirname(copy));
	free(copy);
	return d;
}

int cli_publish_open(struct cli_publish *p, const char *target)
{
	char *dir = dir_of(target), *copy = strdup(target);
	mode_t mask;
	struct stat st;
	int e;

	memset(p, 0, sizeof(*p));
	p->fd = -1;
	if (!dir || !copy) {
		free(dir);
		free(copy);
		return -ENOMEM;
	}
	if (!stat(target, &st) && !S_ISREG(st.st_mode)) {
		free(dir);
		free(copy);
		return -EEXIST;	/* never replace a directory or a device */
	}
	p->target = strdup(target);
	if (asprintf(&p->tmp, "%s/.%s.tmpXXXXXX", dir, basename(copy)) < 0)
		p->tmp = NULL;
	if (p->target && p->tmp && !access("/proc/self/fd", X_OK))
		p->fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
	free(dir);
	free(copy);
	if (!p->target || !p->tmp) {
		if (p->fd >= 0)
			close(p->fd);
		p->fd = -1;
		return -ENOMEM;
	}
	if (p->fd >= 0) {
		p->anon = 1;	/* the mode came with the umask */
		return 0;
	}
	p->fd = mkostemp(p->tmp, O_CLOEXEC);
	if (p->fd < 0) {
		e = -errno;
		free(p->tmp);
		p->tmp = NULL;
		return e;
	}
	mask = umask(0);
	umask(mask);
	fchmod(p->fd, 0666 & ~mask);
	return 0;
}

/*
 * Name the complete unnamed file: the target itself when it does not exist,
 * else p->tmp (a fresh name each try), to be renamed over it.
 */
static int name_anon(struct cli_publish *p, int *renamed)
{
	char proc[64], *x;
	size_t len = strlen(p->tmp);
	unsigned tries, i;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", p->fd);
	if (!linkat(AT_FDCWD, proc, AT_FDCWD, p->target, AT_SYMLINK_FOLLOW)) {
		*renamed = 1;
		return 0;
	}
	if (errno != EEXIST)
		return -errno;
	x = p->tmp + len - 6;
	for (tries = 0; tries < 100; tries++) {
		unsigned long v = (unsigned long)random() ^ ((unsigned long)getpid() << 8) ^ tries;

		for (i = 0; i < 6; i++, v /= 36)
			x[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[v % 36];
		if (!linkat(AT_FDCWD, proc, AT_FDCWD, p->tmp, AT_SYMLINK_FOLLOW))
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

int cli_publish_commit(struct cli_publish *p)
{
	char *dir = dir_of(p->target);
	int dfd, ret = 0, renamed = 0;

	if (!dir)
		return -ENOMEM;
	if (fsync(p->fd)) {
		ret = -errno;
		goto out;
	}
	if (p->anon) {
		ret = name_anon(p, &renamed);
		if (ret)
			goto out;
		p->anon = 0;	/* named now: abort removes p->tmp */
	}
	if (close(p->fd)) {
		ret = -errno;
		p->fd = -1;
		goto out;
	}
	p->fd = -1;
	if (!renamed && rename(p->tmp, p->target)) {
		ret = -errno;
		goto out;
	}
	free(p->tmp);
	p->tmp = NULL;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		if (fsync(dfd) && errno != EINVAL)
			ret = -errno;
		close(dfd);
	}
out:
	free(dir);
	return ret;
}

void cli_publish_abort(struct cli_publish *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	if (p->tmp && !p->anon)
		unlink(p->tmp);
	free(p->tmp);
	p->tmp = NULL;
	free(p->target);
	p->target = NULL;
}
