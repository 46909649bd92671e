/* SPDX-License-Identifier: GPL-2.0-or-later */
/* File data from the source directory, opened by path when packed. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pack/pack.h"
#include "util/util.h"

struct fd_handle {
	int fd;
	int advised;
};

/* O_NONBLOCK: a FIFO swapped in for a file must not wait for a writer. */
#define OPEN_FLAGS (O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)

/* A handle of fd (an open's result: -1 with errno); 0 or -errno. */
static int handle_of(int fd, void **handle)
{
	struct fd_handle *h;

	if (fd < 0)
		return -errno;
	h = malloc(sizeof(*h));
	if (!h) {
		close(fd);
		return -ENOMEM;
	}
	h->fd = fd;
	h->advised = 0;
	*handle = h;
	return 0;
}

int fd_source_openat(int dirfd, const char *name, void **handle)
{
	return handle_of(openat(dirfd, name, OPEN_FLAGS), handle);
}

/*
 * A path longer than the kernel takes in one call (a tree deeper than
 * PATH_MAX, which the scan walks by directory fds): open it a component at
 * a time, never following a symbolic link.
 */
static int open_long(int rootfd, const char *path, void **handle)
{
	int fd = rootfd, ret;
	const char *p = path, *slash;
	char name[SQW_NAME_MAX + 1];

	while ((slash = strchr(p, '/'))) {
		size_t len = (size_t)(slash - p);
		int next;

		if (len > SQW_NAME_MAX) {
			ret = -ENAMETOOLONG;
			goto out;
		}
		memcpy(name, p, len);
		name[len] = '\0';
		next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0) {
			ret = -errno;
			goto out;
		}
		if (fd != rootfd)
			close(fd);
		fd = next;
		p = slash + 1;
	}
	ret = fd_source_openat(fd, p, handle);
out:
	if (fd != rootfd)
		close(fd);
	return ret;
}

/*
 * path below rootfd through no symbolic link, in one call where the kernel
 * has openat2 (5.6): a directory on the way swapped for a link must not
 * make root open something elsewhere (a FIFO's writer or a device sees an
 * open, even one refused after it).  ELOOP: a link on the way.
 */
static int open_beneath(int rootfd, const char *path, void **handle)
{
	static int no_openat2;
	struct open_how how = {
		.flags = OPEN_FLAGS,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	long fd;

	if (__atomic_load_n(&no_openat2, __ATOMIC_RELAXED) || strlen(path) >= PATH_MAX)
		return open_long(rootfd, path, handle);
	fd = syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
	if (fd < 0 && (errno == ENOSYS || errno == EPERM)) {
		/* No openat2 (or a seccomp filter refusing it): a step at a time. */
		__atomic_store_n(&no_openat2, 1, __ATOMIC_RELAXED);
		return open_long(rootfd, path, handle);
	}
	return handle_of((int)fd, handle);
}

/*
 * The scanned file, or -ESTALE when its path now leads elsewhere: a file
 * renamed over it, a FIFO or device in its place, or a directory on the
 * way swapped for a symbolic link (which could lead out of the tree).  A
 * file that is still the one scanned but changed since is read as it is
 * now, at the size the scan found, with a warning.
 */
static int fd_open(void *ctx, void *src, void **handle)
{
	struct dir_source *ds = ctx;
	struct dir_file *f = src;
	struct fd_handle *h;
	struct stat st;
	int ret;

	ret = open_beneath(ds->rootfd, f->path, handle);
	if (ret == -ELOOP || ret == -EXDEV || ret == -ENOTDIR)
		return -ESTALE;	/* a link where a directory or the file was */
	if (ret)
		return ret;
	h = *handle;
	if (fstat(h->fd, &st)) {
		ret = -errno;
	} else if (!S_ISREG(st.st_mode) || st.st_dev != f->dev || st.st_ino != f->ino) {
		ret = -ESTALE;
	} else if ((uint64_t)st.st_size != f->size || st.st_mtim.tv_sec != f->mtime.tv_sec ||
		   st.st_mtim.tv_nsec != f->mtime.tv_nsec) {
		dir_source_changed(ds, f, (uint64_t)st.st_size);
	}
	if (ret) {
		fd_source_close(h);
		*handle = NULL;
	}
	return ret;
}

int fd_source_read(void *handle, uint64_t off, void *buf, size_t len)
{
	struct fd_handle *h = handle;

	/*
	 * From the second block on: most files are read in one call, which
	 * the default readahead serves, and a tree's worth of fadvise calls
	 * cost the one thread that reads more than they save.
	 */
	if (off && !h->advised) {
		posix_fadvise(h->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		h->advised = 1;
	}
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
