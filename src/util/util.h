/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Small private helpers: little-endian stores, checked allocation, buffers. */
#ifndef SQW_UTIL_H
#define SQW_UTIL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = v & 0xff;
	p[1] = v >> 8;
}

static inline void put_le32(uint8_t *p, uint32_t v)
{
	put_le16(p, v & 0xffff);
	put_le16(p + 2, v >> 16);
}

static inline void put_le64(uint8_t *p, uint64_t v)
{
	put_le32(p, (uint32_t)v);
	put_le32(p + 4, (uint32_t)(v >> 32));
}

static inline uint16_t get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t get_le32(const uint8_t *p)
{
	return get_le16(p) | ((uint32_t)get_le16(p + 2) << 16);
}

static inline uint64_t get_le64(const uint8_t *p)
{
	return get_le32(p) | ((uint64_t)get_le32(p + 4) << 32);
}

/* x rounded up to a multiple of a, a power of two. */
static inline uint64_t align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) & ~(a - 1);
}

/* Milliseconds from a to b. */
static inline int64_t ms_between(const struct timespec *a, const struct timespec *b)
{
	return (int64_t)(b->tv_sec - a->tv_sec) * 1000 + (b->tv_nsec - a->tv_nsec) / 1000000;
}

/* Milliseconds since t (CLOCK_MONOTONIC). */
static inline int64_t ms_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return ms_between(t, &now);
}

/* calloc of n*size with overflow check. */
static inline void *alloc_array(size_t n, size_t size)
{
	size_t total;

	if (__builtin_mul_overflow(n, size, &total))
		return NULL;
	return calloc(total ? total : 1, 1);
}

/* Grow *arr (of *cap elements of size bytes) to hold at least need. */
int array_reserve(void **arr, size_t *cap, size_t need, size_t size);

/* A growable byte buffer. */
struct buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};

int buf_append(struct buf *b, const void *data, size_t len);
int buf_reserve(struct buf *b, size_t extra);
static inline void buf_free(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

/* Write all of buf at off; retries short writes and EINTR; keeps errno. */
int pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
/* Read exactly len bytes at off; -ENODATA if the file ends first (it shrank). */
int pread_all(int fd, void *buf, size_t len, uint64_t off);

/*
 * Unlink every entry of the directory dfd (files only; dir_clear.c), with
 * several threads.  0, or the first failure as -errno (the rest is still
 * tried).
 */
int dir_clear(int dfd);

int is_zero(const void *p, size_t len);

#endif
