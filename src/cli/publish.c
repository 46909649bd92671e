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
#include <limits.h>
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

int cli_publish_target(const char *path, char **out)
{
	char *cur = strdup(path), *next = NULL, *dir = NULL, *base;
	char link[PATH_MAX], real[PATH_MAX];
	int hops, ret = 0;

	*out = NULL;
	for (hops = 0; cur; hops++) {
		ssize_t n = readlink(cur, link, sizeof(link) - 1);

		if (n < 0) {
			if (errno != EINVAL && errno != ENOENT)
				ret = -errno;
			break;
		}
		if (hops == 40) {
			ret = -ELOOP;
			break;
		}
		link[n] = '\0';
		dir = link[0] == '/' ? NULL : dir_of(cur);
		if (link[0] != '/' && !dir) {
			ret = -ENOMEM;
			break;
		}
		if (asprintf(&next, "%s%s%s", dir ? dir : "", dir ? "/" : "", link) < 0)
			next = NULL;
		free(dir);
		free(cur);
		cur = next;
	}
	if (!cur)
		return -ENOMEM;
	/* "img/", "dir/." name a directory, not a file to make (mksquashfs: EISDIR). */
	base = strrchr(cur, '/');
	base = base ? base + 1 : cur;
	if (!ret && (!*base || !strcmp(base, ".") || !strcmp(base, "..")))
		ret = -EISDIR;
	dir = dir_of(cur);
	if (!ret && !dir)
		ret = -ENOMEM;
	if (!ret && !realpath(dir, real))
		ret = -errno;
	if (!ret) {
		base = basename(cur);
		if (asprintf(out, "%s/%s", strcmp(real, "/") ? real : "", base) < 0) {
			*out = NULL;
			ret = -ENOMEM;
		}
	}
	free(dir);
	free(cur);
	return ret;
}

int cli_publish_open(struct cli_publish *p, const char *target, int follow)
{
	char *dir = NULL, *copy = NULL;
	mode_t mask;
	struct stat st;
	int e, have = 0;

	memset(p, 0, sizeof(*p));
	p->fd = -1;
	if (follow) {
		e = cli_publish_target(target, &p->target);
		if (e)
			return e;
	} else {
		p->target = strdup(target);
	}
	if (p->target) {
		dir = dir_of(p->target);
		copy = strdup(p->target);
	}
	if (!p->target || !dir || !copy) {
		e = -ENOMEM;
		goto fail;
	}
	/* never replace a directory or a device; nor, unfollowed, a link's target */
	if (!lstat(p->target, &st)) {
		if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
			e = -EEXIST;
			goto fail;
		}
		have = S_ISREG(st.st_mode);
	}
	/* Within NAME_MAX whatever the target's name: only the suffix must be unique. */
	if (asprintf(&p->tmp, "%s/.%.*s.tmpXXXXXX", dir, NAME_MAX - 11, basename(copy)) < 0) {
		p->tmp = NULL;
		e = -ENOMEM;
		goto fail;
	}
	if (!access("/proc/self/fd", X_OK))
		p->fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
	if (p->fd >= 0) {
		p->anon = 1;	/* the mode came with the umask */
	} else {
		p->fd = mkostemp(p->tmp, O_CLOEXEC);
		if (p->fd < 0) {
			e = -errno;
			free(p->tmp);
			p->tmp = NULL;
			goto fail;
		}
		mask = umask(0);
		umask(mask);
		fchmod(p->fd, 0666 & ~mask);
	}
	/*
	 * A replaced image keeps its mode and, where we may, its owner, as one
	 * rewritten in place would: an image kept 0600 may hold secrets.
	 */
	if (have) {
		if (st.st_uid != geteuid() || st.st_gid != getegid())
			(void)!fchown(p->fd, st.st_uid, st.st_gid);
		fchmod(p->fd, st.st_mode & 07777);
	}
	free(dir);
	free(copy);
	return 0;
fail:
	free(dir);
	free(copy);
	free(p->target);
	p->target = NULL;
	return e;
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
	/*
	 * No call links a file over an existing name, so a kill -9 between
	 * linkat and rename leaves p->tmp: the two calls come back to back.
	 */
	if (!renamed && rename(p->tmp, p->target)) {
		ret = -errno;
		goto out;
	}
	free(p->tmp);
	p->tmp = NULL;
	if (close(p->fd)) {
		ret = -errno;
		p->fd = -1;
		goto out;
	}
	p->fd = -1;
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

int cli_publish_check(const char *target)
{
	struct cli_publish p;
	int e = cli_publish_open(&p, target, 1);

	if (!e)
		cli_publish_abort(&p);
	return e;
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
