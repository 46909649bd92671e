/* SPDX-License-Identifier: GPL-2.0-or-later */
/* table_write / table_write_hdr / table_write_stream over an outfile. */
#include <errno.h>
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

#include "config.h"
#include "sqw/compressor.h"
#include "sqw/meta_writer.h"
#include "sqw/outfile.h"
#include "sqw/table.h"
#include "util/util.h"

static uint64_t rng_state = 0xD1B54A32D192ED03ull;

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}

static int make_fd(void)
{
	int fd = memfd_create("test_table", 0);

	if (fd < 0) {
		FILE *f = tmpfile();

		assert_non_null(f);
		fd = dup(fileno(f));
		fclose(f);
	}
	assert_true(fd >= 0);
	return fd;
}

static uint8_t *read_all(int fd, size_t *len)
{
	off_t end = lseek(fd, 0, SEEK_END);
	uint8_t *p;

	assert_true(end >= 0);
	p = malloc((size_t)end + 1);
	assert_non_null(p);
	assert_int_equal(pread_all(fd, p, (size_t)end, 0), 0);
	*len = (size_t)end;
	return p;
}

static sqw_compressor_t *make_comp(void)
{
	sqw_comp_config_t cfg;
	sqw_compressor_t *c;
	enum sqw_comp_id id = sqw_comp_available(SQW_COMP_ZSTD) ? SQW_COMP_ZSTD :
			      SQW_COMP_GZIP;
	int err;

	assert_int_equal(sqw_comp_config_init(&cfg, id, 131072), 0);
	c = sqw_compressor_create(&cfg, &err);
	assert_non_null(c);
	return c;
}

/*
 * Decode the md blocks of file[from..to): back to back, each header valid,
 * every block but the last exactly 8192 bytes.  Returns the payload and
 * the header positions (absolute) in pos[].
 */
static uint8_t *decode_blocks(const uint8_t *file, uint64_t from, uint64_t to,
			      sqw_compressor_t *dec, uint64_t *pos, size_t maxb,
			      size_t *nblocks, size_t *len)
{
	uint8_t *out = malloc(maxb * SQW_META_SIZE + 1);
	uint64_t p = from;
	size_t n = 0, l = 0;

	assert_non_null(out);
	while (p < to) {
		uint16_t hdr;
		size_t clen, ul;

		assert_true(n < maxb);
		assert_true(p + 2 <= to);
		hdr = get_le16(file + p);
		clen = hdr & 0x7fff;
		if (clen == 0 || clen > SQW_META_SIZE || p + 2 + clen > to)
			fail_msg("bad md header %#x at %llu", hdr, (unsigned long long)p);
		if (hdr & 0x8000) {
			memcpy(out + l, file + p + 2, clen);
			ul = clen;
		} else {
			int r = dec->decompress(dec, file + p + 2, clen, out + l,
						SQW_META_SIZE);

			if (r <= 0)
				fail_msg("decompress at %llu: %d", (unsigned long long)p, r);
			ul = (size_t)r;
		}
		if (n > 0 && l % SQW_META_SIZE)
			fail_msg("md block %zu follows a short block", n);
		pos[n++] = p;
		l += ul;
		p += 2 + clen;
	}
	assert_true(p == to);
	*nblocks = n;
	*len = l;
	return out;
}

/*
 * One table of len bytes (with an optional header), written after `base`
 * bytes of other content: check layout, index and contents.
 */
static void check_table(size_t len, size_t hdr_len, uint64_t base, int random)
{
	sqw_compressor_t *c = make_comp(), *d = make_comp();
	uint8_t *data = malloc(len + 1), *file, *payload;
	uint8_t hdr[64];
	size_t flen, nb, plen, want_nb = (len + SQW_META_SIZE - 1) / SQW_META_SIZE, i;
	uint64_t start = 12345, *pos = calloc(want_nb + 8, sizeof(*pos));
	struct outfile o;
	int fd = make_fd();

	assert_non_null(data);
	for (i = 0; i < len; i++)
		data[i] = random ? (uint8_t)rnd() : (uint8_t)(i / 4 % 7);
	for (i = 0; i < sizeof(hdr); i++)
		hdr[i] = (uint8_t)(0xC0 + i);
	assert_int_equal(outfile_init(&o, fd, 0), 0);
	/* Something before the table, as in an image. */
	{
		uint8_t *pre = malloc(base + 1);

		memset(pre, 0x5A, base);
		assert_int_equal(outfile_append(&o, pre, base), 0);
		free(pre);
	}
	if (hdr_len)
		assert_int_equal(table_write_hdr(&o, c, data, len, hdr, hdr_len,
						 &start), 0);
	else
		assert_int_equal(table_write(&o, c, data, len, &start), 0);
	/* The index follows blocks (and header): pos ends after it. */
	assert_true(o.pos == start + hdr_len + 8 * want_nb);
	assert_int_equal(outfile_flush(&o), 0);
	outfile_cleanup(&o);
	file = read_all(fd, &flen);
	assert_int_equal(flen, start + hdr_len + 8 * want_nb);
	for (i = 0; i < base; i++)
		if (file[i] != 0x5A)
			fail_msg("byte %zu before the table was overwritten", i);
	/* md blocks fill [base, start) with no gap. */
	payload = decode_blocks(file, base, start, d, pos, want_nb + 8, &nb, &plen);
	assert_int_equal(nb, want_nb);
	assert_int_equal(plen, len);
	if (len)
		assert_memory_equal(payload, data, len);
	/* Header between blocks and index. */
	if (hdr_len)
		assert_memory_equal(file + start, hdr, hdr_len);
	/* Index: one absolute u64 per md block, pointing at its header. */
	for (i = 0; i < nb; i++) {
		uint64_t e = get_le64(file + start + hdr_len + 8 * i);

		if (e != pos[i])
			fail_msg("index[%zu] = %llu, block header at %llu", i,
				 (unsigned long long)e, (unsigned long long)pos[i]);
	}
	if (random && len) {
		/* Random payload is stored raw. */
		assert_int_equal(get_le16(file + pos[0]) & 0x8000, 0x8000);
	} else if (len > 64) {
		assert_int_equal(get_le16(file + pos[0]) & 0x8000, 0);
	}
	free(payload);
	free(file);
	free(pos);
	free(data);
	close(fd);
	sqw_compressor_destroy(c);
	sqw_compressor_destroy(d);
}

static void test_table_sizes(void **state)
{
	static const size_t sizes[] = {
		4, 16, 100, 8191, 8192, 8193, 16383, 16384, 16385,
		3 * 8192 + 17, 65536, 100000,
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		check_table(sizes[i], 0, 96, 0);
		check_table(sizes[i], 0, 7, 1);
	}
}

static void test_table_large(void **state)
{
	(void)state;
	/* Over 1 MiB of raw md blocks: bypasses the outfile buffer. */
	check_table(1536 * 1024 + 40, 0, 1000, 1);
	check_table(1536 * 1024 + 40, 16, 1 << 20, 0);
}

static void test_table_hdr(void **state)
{
	(void)state;
	check_table(16, 16, 96, 0);
	check_table(8192 * 2, 16, 4096, 0);
	check_table(8192 * 5 + 1, 16, 333, 1);
	check_table(40000, 3, 0, 0);
}

/* Two tables back to back: the second's blocks start right after the
 * first's index, as the superblock chain requires. */
static void test_tables_chain(void **state)
{
	sqw_compressor_t *c = make_comp();
	uint32_t ids[5000];
	uint64_t refs[2000], s1, s2, e;
	struct outfile o;
	uint8_t *file;
	size_t flen, i;
	int fd = make_fd();

	(void)state;
	for (i = 0; i < 5000; i++)
		put_le32((uint8_t *)&ids[i], (uint32_t)(i * 13));
	for (i = 0; i < 2000; i++)
		put_le64((uint8_t *)&refs[i], (uint64_t)i << 16);
	assert_int_equal(outfile_init(&o, fd, 96), 0);
	assert_int_equal(table_write(&o, c, refs, sizeof(refs), &s1), 0);
	assert_int_equal(table_write(&o, c, ids, sizeof(ids), &s2), 0);
	assert_int_equal(outfile_flush(&o), 0);
	file = read_all(fd, &flen);
	/* refs: 16000 bytes = 2 blocks; ids: 20000 bytes = 3 blocks. */
	assert_true(s2 + 3 * 8 == flen);
	e = get_le64(file + s2);
	assert_true(e == s1 + 2 * 8);
	assert_true(get_le64(file + s1) == 96);
	outfile_cleanup(&o);
	free(file);
	close(fd);
	sqw_compressor_destroy(c);
}

static void test_table_stream(void **state)
{
	struct buf b = { 0 };
	struct outfile o;
	uint64_t start = 0;
	uint8_t *file;
	size_t flen;
	int fd = make_fd();

	(void)state;
	assert_int_equal(buf_append(&b, "hello, stream", 13), 0);
	assert_int_equal(outfile_init(&o, fd, 200), 0);
	assert_int_equal(table_write_stream(&o, &b, &start), 0);
	assert_true(start == 200);
	assert_true(o.pos == 213);
	assert_int_equal(table_write_stream(&o, &b, &start), 0);
	assert_true(start == 213);
	assert_int_equal(outfile_flush(&o), 0);
	file = read_all(fd, &flen);
	assert_int_equal(flen, 226);
	assert_memory_equal(file + 200, "hello, streamhello, stream", 26);
	free(file);
	outfile_cleanup(&o);
	buf_free(&b);
	close(fd);
}

/* outfile_read sees bytes still in the buffer and bytes already flushed. */
static void test_outfile_read(void **state)
{
	struct outfile o;
	uint8_t *big = malloc(3u << 20), back[100];
	size_t i;
	int fd = make_fd();

	(void)state;
	for (i = 0; i < (3u << 20); i++)
		big[i] = (uint8_t)(i * 31 + 7);
	assert_int_equal(outfile_init(&o, fd, 0), 0);
	assert_int_equal(outfile_append(&o, big, 100), 0);
	assert_int_equal(outfile_read(&o, 10, back, 50), 0);
	assert_memory_equal(back, big + 10, 50);
	assert_int_equal(outfile_append(&o, big + 100, (3u << 20) - 200), 0);
	assert_int_equal(outfile_append(&o, big + (3u << 20) - 100, 100), 0);
	assert_true(o.pos == (3u << 20));
	assert_int_equal(outfile_read(&o, (3u << 20) - 100, back, 100), 0);
	assert_memory_equal(back, big + (3u << 20) - 100, 100);
	assert_int_equal(outfile_read(&o, 1u << 20, back, 100), 0);
	assert_memory_equal(back, big + (1u << 20), 100);
	/* Past the end: a short read is an error. */
	assert_int_equal(outfile_read(&o, 3u << 20, back, 1), -ENODATA);
	outfile_cleanup(&o);
	free(big);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_sizes),
		cmocka_unit_test(test_table_large),
		cmocka_unit_test(test_table_hdr),
		cmocka_unit_test(test_tables_chain),
		cmocka_unit_test(test_table_stream),
		cmocka_unit_test(test_outfile_read),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
