/* SPDX-License-Identifier: GPL-2.0-or-later */
/* util/: u64map, is_zero, little-endian helpers, array_reserve, buf. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "util/arena.h"
#include "util/u64map.h"
#include "util/util.h"

static uint64_t rng_state = 0x243F6A8885A308D3ull;

static uint64_t rnd64(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* ---- little-endian helpers ---- */

static void test_le_encoding(void **state)
{
	uint8_t b[8];

	(void)state;
	put_le16(b, 0x1234);
	assert_int_equal(b[0], 0x34);
	assert_int_equal(b[1], 0x12);
	assert_int_equal(get_le16(b), 0x1234);

	put_le32(b, 0xA1B2C3D4u);
	assert_int_equal(b[0], 0xD4);
	assert_int_equal(b[1], 0xC3);
	assert_int_equal(b[2], 0xB2);
	assert_int_equal(b[3], 0xA1);
	assert_int_equal(get_le32(b), 0xA1B2C3D4u);

	put_le64(b, 0x0102030405060708ull);
	{
		static const uint8_t want[8] = { 8, 7, 6, 5, 4, 3, 2, 1 };

		assert_memory_equal(b, want, 8);
	}
	assert_true(get_le64(b) == 0x0102030405060708ull);

	/* High bits survive (no sign extension through int promotion). */
	put_le16(b, 0xFFFF);
	assert_int_equal(get_le16(b), 0xFFFF);
	put_le32(b, 0xFFFFFFFFu);
	assert_true(get_le32(b) == 0xFFFFFFFFu);
	put_le64(b, UINT64_MAX);
	assert_true(get_le64(b) == UINT64_MAX);
	put_le64(b, 0x8000000080008080ull);
	assert_true(get_le64(b) == 0x8000000080008080ull);
}

static void test_le_roundtrip_random(void **state)
{
	uint8_t b[8];
	int i;

	(void)state;
	for (i = 0; i < 10000; i++) {
		uint64_t v = rnd64();

		put_le64(b, v);
		assert_true(get_le64(b) == v);
		assert_true(get_le32(b) == (uint32_t)v);
		assert_true(get_le16(b) == (uint16_t)v);
		put_le32(b, (uint32_t)v);
		assert_true(get_le32(b) == (uint32_t)v);
		assert_int_equal(b[0], (uint8_t)v);
		assert_int_equal(b[3], (uint8_t)(v >> 24));
	}
}

/* ---- is_zero ---- */

static void test_is_zero(void **state)
{
	uint8_t *buf = calloc(1, 70000);
	size_t len, pos;

	(void)state;
	assert_non_null(buf);
	assert_true(is_zero(buf, 0));
	/* Each length crosses the < 64 loop / memcmp boundary. */
	for (len = 1; len <= 300; len++) {
		assert_true(is_zero(buf, len));
		for (pos = 0; pos < len; pos++) {
			buf[pos] = (uint8_t)(1 + pos % 255);
			if (is_zero(buf, len))
				fail_msg("is_zero(len=%zu) missed a byte at %zu", len, pos);
			buf[pos] = 0;
		}
		/* A non-zero byte just past the end does not count. */
		buf[len] = 0x80;
		assert_true(is_zero(buf, len));
		buf[len] = 0;
	}
	/* Large buffers: first, middle and last byte; 0x01 and 0x80. */
	len = 65536 + 7;
	assert_true(is_zero(buf, len));
	buf[len - 1] = 1;
	assert_false(is_zero(buf, len));
	buf[len - 1] = 0;
	buf[len / 2] = 0x80;
	assert_false(is_zero(buf, len));
	buf[len / 2] = 0;
	buf[0] = 0x01;
	assert_false(is_zero(buf, len));
	buf[0] = 0;
	/* Uniform non-zero buffers (the self-shifted compare must not pass). */
	memset(buf, 0xAA, len);
	assert_false(is_zero(buf, len));
	assert_false(is_zero(buf, 63));
	assert_false(is_zero(buf, 64));
	free(buf);
}

/* ---- alloc_array / array_reserve / buf ---- */

static void test_align_up(void **state)
{
	(void)state;
	assert_int_equal(align_up(0, 4096), 0);
	assert_int_equal(align_up(1, 4096), 4096);
	assert_int_equal(align_up(4096, 4096), 4096);
	assert_int_equal(align_up(4097, 4096), 8192);
	assert_true(align_up(UINT64_C(1) << 40 | 5, 512) == (UINT64_C(1) << 40 | 512));
	assert_int_equal(align_up(7, 1), 7);
}

static void test_alloc_array(void **state)
{
	uint8_t *p;

	(void)state;
	assert_null(alloc_array(SIZE_MAX / 2 + 1, 2));
	assert_null(alloc_array(SIZE_MAX, SIZE_MAX));
	p = alloc_array(0, 16);		/* still a valid pointer */
	assert_non_null(p);
	free(p);
	p = alloc_array(100, 3);
	assert_non_null(p);
	assert_true(is_zero(p, 300));
	free(p);
}

static void test_array_reserve(void **state)
{
	uint32_t *arr = NULL;
	size_t cap = 0, i;

	(void)state;
	assert_int_equal(array_reserve((void **)&arr, &cap, 0, 4), 0);
	assert_int_equal(array_reserve((void **)&arr, &cap, 1, 4), 0);
	assert_non_null(arr);
	assert_true(cap >= 1);
	for (i = 0; i < cap; i++)
		assert_int_equal(arr[i], 0);
	/* Growth keeps contents and zeroes the new part. */
	for (i = 0; i < 1000; i++) {
		assert_int_equal(array_reserve((void **)&arr, &cap, i + 1, 4), 0);
		assert_true(cap >= i + 1);
		assert_int_equal(arr[i], 0);
		arr[i] = (uint32_t)(i * 7 + 1);
	}
	for (i = 0; i < 1000; i++)
		assert_int_equal(arr[i], i * 7 + 1);
	/* Enough capacity: no change. */
	{
		size_t old = cap;
		uint32_t *oldp = arr;

		assert_int_equal(array_reserve((void **)&arr, &cap, 10, 4), 0);
		assert_int_equal(cap, old);
		assert_ptr_equal(arr, oldp);
	}
	/* Overflow of the element count or of the byte count: -ENOMEM, and
	 * the array and its capacity are untouched. */
	{
		size_t old = cap;
		uint32_t *oldp = arr;

		assert_int_equal(array_reserve((void **)&arr, &cap, SIZE_MAX, 4), -ENOMEM);
		assert_int_equal(array_reserve((void **)&arr, &cap, SIZE_MAX / 2 + 2, 1), -ENOMEM);
		assert_int_equal(array_reserve((void **)&arr, &cap, SIZE_MAX / 4 + 1, 4), -ENOMEM);
		assert_int_equal(array_reserve((void **)&arr, &cap, SIZE_MAX / 16, 32), -ENOMEM);
		assert_int_equal(cap, old);
		assert_ptr_equal(arr, oldp);
		for (i = 0; i < 1000; i++)
			assert_int_equal(arr[i], i * 7 + 1);
	}
	free(arr);
	/* From an empty array too. */
	arr = NULL;
	cap = 0;
	assert_int_equal(array_reserve((void **)&arr, &cap, SIZE_MAX, 8), -ENOMEM);
	assert_null(arr);
	assert_int_equal(cap, 0);
}

static void test_buf(void **state)
{
	struct buf b = { 0 };
	uint8_t chunk[300];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(chunk); i++)
		chunk[i] = (uint8_t)i;
	for (i = 0; i < 100; i++)
		assert_int_equal(buf_append(&b, chunk, i), 0);
	assert_int_equal(b.len, 99 * 100 / 2);
	{
		size_t off = 0, n;

		for (n = 1; n < 100; n++) {
			assert_memory_equal(b.data + off, chunk, n);
			off += n;
		}
	}
	/* len + extra overflowing size_t */
	assert_int_equal(buf_reserve(&b, SIZE_MAX), -ENOMEM);
	assert_int_equal(b.len, 99 * 100 / 2);
	buf_free(&b);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.cap, 0);
}

/* ---- u64map ---- */

static void test_u64map_basic(void **state)
{
	struct u64map m = { 0 };
	uint64_t *v;
	int isnew = -1;

	(void)state;
	assert_null(u64map_find(&m, 1));	/* empty map, no table */
	v = u64map_get(&m, 42, &isnew);
	assert_non_null(v);
	assert_int_equal(isnew, 1);
	assert_true(*v == 0);
	*v = 1234;
	v = u64map_get(&m, 42, &isnew);
	assert_non_null(v);
	assert_int_equal(isnew, 0);
	assert_true(*v == 1234);
	v = u64map_find(&m, 42);
	assert_non_null(v);
	assert_true(*v == 1234);
	assert_null(u64map_find(&m, 43));
	assert_int_equal(m.n, 1);

	/* Extreme keys. */
	v = u64map_get(&m, UINT64_MAX, &isnew);
	assert_non_null(v);
	assert_int_equal(isnew, 1);
	*v = 7;
	v = u64map_get(&m, 1, &isnew);
	assert_int_equal(isnew, 1);
	*v = 8;
	assert_true(*u64map_find(&m, UINT64_MAX) == 7);
	assert_true(*u64map_find(&m, 1) == 8);
	assert_true(*u64map_find(&m, 42) == 1234);
	assert_int_equal(m.n, 3);
	u64map_free(&m);
	assert_int_equal(m.n, 0);
	assert_null(u64map_find(&m, 42));
}

/*
 * Arena: 8-aligned, non-overlapping objects across many chunks, one larger
 * than a chunk among them; after arena_free it starts again empty.
 */
static void test_arena(void **state)
{
	enum { N = 20000 };
	struct arena a = { 0 };
	uint8_t **p = calloc(N, sizeof(*p)), *big = NULL;
	size_t i, j;
	int round;

	(void)state;
	assert_non_null(p);
	for (round = 0; round < 2; round++) {
		for (i = 0; i < N; i++) {
			size_t len = 1 + i % 300;

			p[i] = arena_alloc(&a, len);
			assert_non_null(p[i]);
			assert_int_equal((uintptr_t)p[i] % 8, 0);
			memset(p[i], (int)(i & 0xff), len);
			if (i == N / 2) {
				big = arena_alloc(&a, 1u << 20);	/* 4 chunks' worth */
				assert_non_null(big);
				memset(big, 0xee, 1u << 20);
			}
		}
		/* Nothing written later overwrote an earlier object. */
		for (i = 0; i < N; i++)
			for (j = 0; j < 1 + i % 300; j++)
				if (p[i][j] != (uint8_t)(i & 0xff))
					fail_msg("object %zu byte %zu overwritten", i, j);
		assert_non_null(big);
		for (j = 0; j < (1u << 20); j += 4093)
			assert_int_equal(big[j], 0xee);
		assert_null(arena_alloc(&a, SIZE_MAX - 3));	/* overflow */
		arena_free(&a);
		assert_null(a.head);
	}
	free(p);
}

/* A reserved map takes that many keys without growing; its keys survive. */
static void test_u64map_reserve(void **state)
{
	struct u64map m = { 0 };
	size_t i, cap;
	int isnew;

	(void)state;
	assert_int_equal(u64map_reserve(&m, 1000), 0);
	cap = m.cap;
	assert_true(cap >= 1000 * 4 / 3 + 1);
	assert_true(cap <= 4 * 1000);		/* not wildly over */
	for (i = 0; i < 1000; i++) {
		uint64_t *v = u64map_get(&m, i * 7919 + 1, &isnew);

		assert_non_null(v);
		assert_int_equal(isnew, 1);
		*v = i;
	}
	assert_int_equal(m.cap, cap);
	/* Growing a filled map by reserve keeps every value. */
	assert_int_equal(u64map_reserve(&m, 5000), 0);
	assert_true(m.cap > cap);
	assert_int_equal(u64map_reserve(&m, 10), 0);	/* never shrinks */
	for (i = 0; i < 1000; i++) {
		uint64_t *v = u64map_find(&m, i * 7919 + 1);

		assert_non_null(v);
		assert_true(*v == i);
	}
	assert_int_equal(m.n, 1000);
	u64map_free(&m);
}

/* Many keys across several growths, sequential and random and with
 * patterns that collide in the low bits. */
static void test_u64map_many(void **state)
{
	enum { N = 200000 };
	struct u64map m = { 0 };
	uint64_t *keys = malloc(N * sizeof(*keys));
	size_t i;
	int isnew;

	(void)state;
	assert_non_null(keys);
	for (i = 0; i < N; i++) {
		switch (i % 4) {
		case 0: keys[i] = i + 1; break;			/* sequential */
		case 1: keys[i] = (uint64_t)i << 32; break;	/* high bits only */
		case 2: keys[i] = ((uint64_t)i << 20) | 1; break;
		default: keys[i] = rnd64() | 1; break;
		}
	}
	for (i = 0; i < N; i++) {
		uint64_t *v = u64map_get(&m, keys[i], &isnew);

		assert_non_null(v);
		if (!isnew)
			fail_msg("key %#llx (i=%zu) reported as present",
				 (unsigned long long)keys[i], i);
		*v = i;
	}
	assert_int_equal(m.n, N);
	/* Load factor stays below 3/4 and capacity is a power of two. */
	assert_true(m.cap * 3 >= m.n * 4);
	assert_int_equal(m.cap & (m.cap - 1), 0);
	for (i = 0; i < N; i++) {
		uint64_t *v = u64map_find(&m, keys[i]);

		if (!v || *v != i)
			fail_msg("key %#llx (i=%zu) lost after growth",
				 (unsigned long long)keys[i], i);
		v = u64map_get(&m, keys[i], &isnew);
		assert_int_equal(isnew, 0);
		assert_true(*v == i);
	}
	assert_int_equal(m.n, N);
	/* Absent keys (even, bit 63 set: none of the patterns above). */
	for (i = 0; i < 10000; i++)
		assert_null(u64map_find(&m, (rnd64() | (1ull << 63)) & ~1ull));
	u64map_free(&m);
	free(keys);
}

static size_t count_entries(int dfd)
{
	DIR *d = fdopendir(openat(dfd, ".", O_RDONLY | O_DIRECTORY));
	struct dirent *de;
	size_t n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* dir_clear empties a directory from several threads; a failure is reported, not fatal. */
static void test_dir_clear(void **state)
{
	char dir[] = "test_util_dir.XXXXXX", name[32];
	int dfd, fd, i;

	(void)state;
	assert_non_null(mkdtemp(dir));
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(dfd >= 0);
	for (i = 0; i < 3000; i++) {
		snprintf(name, sizeof(name), "%d", i);
		fd = openat(dfd, name, O_CREAT | O_WRONLY, 0600);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, name, strlen(name)), (ssize_t)strlen(name));
		close(fd);
	}
	assert_int_equal(count_entries(dfd), 3000);
	assert_int_equal(dir_clear(dfd), 0);
	assert_int_equal(count_entries(dfd), 0);
	assert_int_equal(dir_clear(dfd), 0);	/* empty: nothing to do */

	/* A subdirectory cannot be unlinked: the error comes back, the files still go. */
	assert_int_equal(mkdirat(dfd, "sub", 0700), 0);
	for (i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		fd = openat(dfd, name, O_CREAT | O_WRONLY, 0600);
		assert_true(fd >= 0);
		close(fd);
	}
	assert_int_equal(dir_clear(dfd), -EISDIR);
	assert_int_equal(count_entries(dfd), 1);
	assert_int_equal(unlinkat(dfd, "sub", AT_REMOVEDIR), 0);
	close(dfd);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_le_encoding),
		cmocka_unit_test(test_le_roundtrip_random),
		cmocka_unit_test(test_is_zero),
		cmocka_unit_test(test_align_up),
		cmocka_unit_test(test_alloc_array),
		cmocka_unit_test(test_array_reserve),
		cmocka_unit_test(test_buf),
		cmocka_unit_test(test_u64map_basic),
		cmocka_unit_test(test_u64map_many),
		cmocka_unit_test(test_u64map_reserve),
		cmocka_unit_test(test_arena),
		cmocka_unit_test(test_dir_clear),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
