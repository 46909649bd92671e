/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The claim on IMAGE: an abstract unix socket named after the image's
 * directory and name, bound while this daemon may still write IMAGE.  The
 * mount table shows live mounts only; after fusermount3 -u the daemon goes
 * on sealing, and a second mount of the same IMAGE would then have its
 * image replaced by the older tree's.  The kernel drops the name with the
 * last descriptor, so a daemon that is killed leaves nothing to clean up.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "stage/stage.h"

/* Named by the directory's identity, so that any path to it agrees. */
static int claim_addr(const char *image, struct sockaddr_un *a, socklen_t *len)
{
	const char *slash = strrchr(image, '/'), *c;
	uint64_t h = 14695981039346656037ull;	/* FNV-1a of the name */
	struct stat st;
	char *dir;
	int n;

	if (!slash)
		return -EINVAL;
	dir = strndup(image, slash > image ? (size_t)(slash - image) : 1);
	if (!dir)
		return -ENOMEM;
	n = stat(dir, &st);
	free(dir);
	if (n)
		return -errno;
	for (c = slash + 1; *c; c++) {
		h ^= (unsigned char)*c;
		h *= 1099511628211ull;
	}
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "sqfs-stage/image/%llx:%llx:%016llx",
		     (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
		     (unsigned long long)h);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
	return 0;
}

int stage_claim_image(struct stage *s, pid_t *holder)
{
	struct sockaddr_un a;
	struct ucred cr;
	socklen_t len = 0, crlen = sizeof(cr);
	int fd, err;

	*holder = 0;
	err = claim_addr(s->image, &a, &len);
	if (err)
		return err;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Listening lets the next one ask whose it is (SO_PEERCRED). */
	if (!bind(fd, (struct sockaddr *)&a, len) && !listen(fd, 64)) {
		s->claimfd = fd;
		return 0;
	}
	err = errno;
	close(fd);
	if (err != EADDRINUSE)
		return -err;
	/*
	 * Never accepted, each question stays queued: with the queue full a
	 * blocking connect would wait for the holder's exit.
	 */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd >= 0 && !connect(fd, (struct sockaddr *)&a, len) &&
	    !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen))
		*holder = cr.pid;
	if (fd >= 0)
		close(fd);
	return -EBUSY;
}

/*
 * After fuse_daemonize(): a later mount names the pid the credentials of
 * the listen() give, which was the parent's, gone by then; a second
 * listen() records this process's (Linux's unix_listen()).
 */
void stage_claim_refresh(struct stage *s)
{
	if (s->claimfd >= 0)
		(void)listen(s->claimfd, 64);
}

void stage_claim_release(struct stage *s)
{
	if (s->claimfd >= 0)
		close(s->claimfd);
	s->claimfd = -1;
}
