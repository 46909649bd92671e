/* SPDX-License-Identifier: GPL-2.0-or-later */
/* outfile: appends, read-backs and flushes, direct and buffered, against a model. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "quick.h"
#include "sqw/outfile.h"
#include "util/util.h"

#define MODEL_MAX (64u << 20)

static uint64_t rng_state;

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}

/*
 * A directory whose file system takes O_DIRECT, as an image's usually
 * does: the one the tests run in, else /var/tmp or /tmp (tmpfs takes it
 * since Linux 6.6); NULL if none does.
 */
static const char *direct_dir(void)
{
	static const char *const dirs[] = { ".", "/var/tmp", "/tmp" };
	static const char *found;
	static int looked;
	char path[64];
	size_t i;
	int fd, fl;

	for (i = 0; !looked && i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/test_outfile.XXXXXX", dirs[i]);
		fd = mkstemp(path);
		if (fd < 0)
			continue;
		unlink(path);
		fl = fcntl(fd, F_GETFL);
		if (fl >= 0 && !fcntl(fd, F_SETFL, fl | O_DIRECT))
			found = dirs[i];
		close(fd);
		if (found)
			break;
	}
	looked = 1;
	return found;
}

/*
 * A file where O_DIRECT works (the image's usual home; where no file system
 * here takes it, the cwd's), or a memfd.  *direct_ok: O_DIRECT works there.
 */
static int open_file(int on_disk, int *direct_ok)
{
	const char *dir = direct_dir();
	int fd;

	*direct_ok = 0;
	if (on_disk) {
		char path[64];

		snprintf(path, sizeof(path), "%s/test_outfile.XXXXXX", dir ? dir : ".");
		fd = mkstemp(path);
		assert_true(fd >= 0);
		unlink(path);
		*direct_ok = dir != NULL;
	} else {
		fd = memfd_create("test_outfile", 0);
		assert_true(fd >= 0);
	}
	return fd;
}

static void check_file(int fd, const uint8_t *model, uint64_t len)
{
	uint8_t *got = malloc(len ? len : 1);

	assert_non_null(got);
	assert_int_equal(lseek(fd, 0, SEEK_END), (off_t)len);
	assert_int_equal(pread_all(fd, got, len, 0), 0);
	assert_memory_equal(got, model, len);
	free(got);
}

/* Operations per run: quick runs do fewer, still enough to pass 16 MiB and
 * overlap direct writes; each flush compares the whole file, the cost under
 * valgrind. */
static int run_ops(void)
{
	return test_quick() ? 150 : 400;
}

static void run(int on_disk, int direct, uint64_t seed)
{
	uint8_t *model = calloc(1, MODEL_MAX), *chunk = malloc(5u << 20), *back = malloc(5u << 20);
	struct outfile o;
	uint64_t start = 96 + rnd() % 70, len;
	int fd, i, j, direct_ok;

	rng_state = seed;
	assert_non_null(model);
	assert_non_null(chunk);
	assert_non_null(back);
	fd = open_file(on_disk, &direct_ok);
	assert_int_equal(outfile_init_mode(&o, fd, start, direct), 0);
	if (direct && direct_ok)
		assert_true(o.direct);	/* the fast path must not silently go away */
	if (!direct)
		assert_false(o.direct);
	len = start;
	for (i = 0; i < run_ops(); i++) {
		uint32_t r = rnd() % 100;
		size_t n;

		if (r < 70) {
			/* Mostly small records, sometimes blocks of and beyond the buffer. */
			n = rnd() % 8 == 0 ? rnd() % (5u << 20) : rnd() % 9000;
			if (len + n > MODEL_MAX)
				break;
			for (j = 0; j < (int)n; j += 4) {	/* n <= 5 MiB - 1 */
				uint32_t v = rnd();

				memcpy(chunk + j, &v, 4);
			}
			assert_int_equal(outfile_append(&o, chunk, n), 0);
			memcpy(model + len, chunk, n);
			len += n;
			assert_int_equal(o.pos, len);
		} else if (r < 95 && len > start) {
			uint64_t off = start + rnd() % (len - start);

			n = rnd() % (len - off + 1);
			if (n > (5u << 20))
				n = 5u << 20;
			assert_int_equal(outfile_read(&o, off, back, n), 0);
			assert_memory_equal(back, model + off, n);
		} else {
			assert_int_equal(outfile_flush(&o), 0);
			/* After a flush the caller may write with plain pwrite. */
			assert_false(fcntl(fd, F_GETFL) & O_DIRECT);
			check_file(fd, model, len);
			memset(model, 0, start);	/* flushed zeros or a hole */
		}
	}
	if (o.direct && len > (16u << 20))
		assert_non_null(o.q);	/* writes overlap once direct writes work */
	assert_int_equal(outfile_flush(&o), 0);
	assert_false(fcntl(fd, F_GETFL) & O_DIRECT);
	assert_int_equal(pwrite_all(fd, "SUPER", 5, 0), 0);	/* as finish() does */
	memcpy(model, "SUPER", 5);
	check_file(fd, model, len);
	outfile_cleanup(&o);
	close(fd);
	free(model);
	free(chunk);
	free(back);
}

static void test_direct_disk(void **state)
{
	(void)state;
	run(1, 1, 0x9E3779B97F4A7C15ull);
	run(1, 1, 0xD1B54A32D192ED03ull);
}

static void test_buffered_disk(void **state)
{
	(void)state;
	run(1, 0, 0x9E3779B97F4A7C15ull);
}

static void test_memfd(void **state)
{
	(void)state;
	run(0, 1, 0x2545F4914F6CDD1Dull);
	run(0, 0, 0x2545F4914F6CDD1Dull);
}

/*
 * A write that fails in a writer thread fails the appends after it and the
 * flush: the image is never reported complete.
 */
static void test_queued_write_error(void **state)
{
	struct outfile o;
	uint8_t *chunk = calloc(1, 1u << 16);
	char self[64];
	int direct_ok, fd = open_file(1, &direct_ok), ro, ret = 0, i;

	(void)state;
	assert_non_null(chunk);
	if (!direct_ok) {
		close(fd);
		free(chunk);
		/* no O_DIRECT here: the queue is never used */
		skip_or_fail("no file system here takes O_DIRECT (., /var/tmp, /tmp)");
	}
	/* Whole buffers only: the flush has no tail of its own to write. */
	assert_int_equal(outfile_init(&o, fd, 0), 0);
	for (i = 0; i < 128; i++)		/* 8 MiB */
		assert_int_equal(outfile_append(&o, chunk, 1u << 16), 0);
	assert_non_null(o.q);
	/* The same file, read-only, behind the same descriptor number. */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	ro = open(self, O_RDONLY);
	assert_true(ro >= 0);
	assert_true(dup2(ro, fd) == fd);
	close(ro);
	for (i = 0; i < 256 && !ret; i++)	/* up to 16 MiB more */
		ret = outfile_append(&o, chunk, 1u << 16);
	if (!ret)
		ret = outfile_flush(&o);
	assert_int_equal(ret, -EBADF);
	assert_int_equal(outfile_flush(&o), -EBADF);
	outfile_cleanup(&o);
	close(fd);
	free(chunk);
}

/* A read-back past what was appended fails like a short read. */
static void test_read_past_end(void **state)
{
	struct outfile o;
	uint8_t b[16];
	int direct_ok, fd = open_file(1, &direct_ok);

	(void)state;
	assert_int_equal(outfile_init(&o, fd, 96), 0);
	assert_int_equal(outfile_append(&o, "0123456789", 10), 0);
	assert_int_equal(outfile_read(&o, 100, b, 6), 0);
	assert_memory_equal(b, "456789", 6);
	assert_int_equal(outfile_read(&o, 100, b, 7), -ENODATA);
	outfile_cleanup(&o);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_direct_disk),
		cmocka_unit_test(test_buffered_disk),
		cmocka_unit_test(test_queued_write_error),
		cmocka_unit_test(test_memfd),
		cmocka_unit_test(test_read_past_end),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
