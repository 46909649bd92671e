/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Publishing an image atomically: write a temporary file beside the target,
 * fsync it, rename it over the target and fsync the directory.  Until then
 * the target keeps its old contents (or stays absent).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
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
	free(dir);
	free(copy);
	if (!p->target || !p->tmp)
		return -ENOMEM;
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

int cli_publish_commit(struct cli_publish *p)
{
	char *dir = dir_of(p->target);
	int dfd, ret = 0;

	if (!dir)
		return -ENOMEM;
	if (fsync(p->fd) || close(p->fd)) {
		ret = -errno;
		p->fd = -1;
		goto out;
	}
	p->fd = -1;
	if (rename(p->tmp, p->target)) {
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
	if (p->tmp)
		unlink(p->tmp);
	free(p->tmp);
	p->tmp = NULL;
	free(p->target);
	p->target = NULL;
}
