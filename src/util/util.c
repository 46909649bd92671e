/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdint.h>
#include <unistd.h>

#include "util/util.h"

int array_reserve(void **arr, size_t *cap, size_t need, size_t size)
{
	size_t ncap = *cap < 8 ? 8 : *cap + *cap / 2;
	size_t bytes;
	void *p;

	if (need <= *cap)
		return 0;
	/*
	 * By half again, or to exactly what is asked when that is more: one
	 * file's block list of a billion words must not be rounded up to the
	 * next power of two (and zeroed).
	 */
	if (ncap < *cap || ncap < need)
		ncap = need;
	/* No allocator hands out more than PTRDIFF_MAX bytes (ASan reports the ask). */
	if (__builtin_mul_overflow(ncap, size, &bytes) || bytes > PTRDIFF_MAX)
		return -ENOMEM;
	p = realloc(*arr, bytes);
	if (!p)
		return -ENOMEM;
	memset((uint8_t *)p + *cap * size, 0, (ncap - *cap) * size);
	*arr = p;
	*cap = ncap;
	return 0;
}

int buf_reserve(struct buf *b, size_t extra)
{
	size_t need;

	if (__builtin_add_overflow(b->len, extra, &need))
		return -ENOMEM;
	return array_reserve((void **)&b->data, &b->cap, need, 1);
}

int buf_append(struct buf *b, const void *data, size_t len)
{
	int ret;

	if (len == 0)
		return 0;
	ret = buf_reserve(b, len);
	if (ret)
		return ret;
	memcpy(b->data + b->len, data, len);
	b->len += len;
	return 0;
}

int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ENODATA;	/* the end of the file came first */
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int is_zero(const void *p, size_t len)
{
	const uint8_t *b = p;

	/* Compare against itself shifted: memcmp is vectorised, a loop is not. */
	if (len == 0)
		return 1;
	if (b[0] != 0)
		return 0;
	if (len < 64) {
		size_t i;

		for (i = 0; i < len; i++)
			if (b[i])
				return 0;
		return 1;
	}
	return memcmp(b, b + 1, len - 1) == 0;
}
