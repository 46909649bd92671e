/* SPDX-License-Identifier: GPL-2.0-or-later */
/* File data from the source directory, opened by path when packed. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "pack/pack.h"
#include "util/util.h"

struct fd_handle {
	int fd;
};

int fd_source_openat(int dirfd, const char *name, void **handle)
{
	struct fd_handle *h = malloc(sizeof(*h));

	if (!h)
		return -ENOMEM;
	h->fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	if (h->fd < 0) {
		int e = errno;

		free(h);
		return -e;
	}
	posix_fadvise(h->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	*handle = h;
	return 0;
}

static int fd_open(void *ctx, void *src, void **handle)
{
	return fd_source_openat(((struct dir_source *)ctx)->rootfd, src, handle);
}

int fd_source_read(void *handle, uint64_t off, void *buf, size_t len)
{
	struct fd_handle *h = handle;

	return pread_all(h->fd, buf, len, off);
}

int64_t fd_source_next_data(void *handle, uint64_t off)
{
	struct fd_handle *h = handle;
	off_t r = lseek(h->fd, (off_t)off, SEEK_DATA);

	if (r >= 0)
		return r;
	if (errno == ENXIO) {
		/* Only a hole from off on: report the end of the file. */
		r = lseek(h->fd, 0, SEEK_END);
		if (r >= 0)
			return (int64_t)off > r ? (int64_t)off : r;
	}
	/* No SEEK_DATA here: treat everything as data. */
	if (errno == EINVAL || errno == EOPNOTSUPP)
		return (int64_t)off;
	return -errno;
}

void fd_source_close(void *handle)
{
	struct fd_handle *h = handle;

	close(h->fd);
	free(h);
}

const struct sqw_source_ops dir_source_ops = {
	.open = fd_open,
	.read = fd_source_read,
	.next_data = fd_source_next_data,
	.close = fd_source_close,
};
