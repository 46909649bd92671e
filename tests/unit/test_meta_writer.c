/* SPDX-License-Identifier: GPL-2.0-or-later */
/* meta_writer: md block cutting, headers, refs, round trip through a codec. */
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

#include "quick.h"

#include "config.h"
#include "sqw/compressor.h"
#include "sqw/meta_writer.h"
#include "sqw/outfile.h"
#include "util/util.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}

static void fill_random(uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)rnd();
}

/* Compressible but not trivial: words from a small vocabulary. */
static void fill_text(uint8_t *p, size_t n)
{
	static const char *const words[] = {
		"squash ", "inode ", "block ", "fragment ", "table ", "ref ",
		"directory ", "xattr ", "id ", "export ",
	};
	size_t i = 0;

	while (i < n) {
		const char *w = words[rnd() % 10];
		size_t l = strlen(w);

		if (l > n - i)
			l = n - i;
		memcpy(p + i, w, l);
		i += l;
	}
}

/* A decoded md stream. */
struct md_stream {
	size_t nblocks;
	size_t hdr_pos[4096];	/* header position of each block in the stream */
	size_t uoff[4096];	/* uncompressed offset of each block */
	size_t ulen[4096];	/* uncompressed length */
	int raw[4096];
	uint8_t *data;		/* concatenated payloads */
	size_t len;
};

/*
 * Walk a finished md stream: check every header, decompress every block
 * with dec (NULL: all blocks must be raw) and require every block except
 * the last to hold exactly 8192 bytes.
 */
static void md_decode(const uint8_t *s, size_t slen, sqw_compressor_t *dec,
		      struct md_stream *md)
{
	size_t pos = 0;

	memset(md, 0, sizeof(*md));
	/* Room for 8 KiB per header found. */
	while (pos + 2 <= slen) {
		md->nblocks++;
		pos += 2 + (get_le16(s + pos) & 0x7fff);
	}
	md->data = malloc((md->nblocks + 1) * SQW_META_SIZE);
	assert_non_null(md->data);
	md->nblocks = 0;
	pos = 0;
	while (pos < slen) {
		uint16_t hdr;
		size_t clen;
		size_t b = md->nblocks;

		assert_true(b < 4096);
		assert_true(pos + 2 <= slen);
		hdr = get_le16(s + pos);
		clen = hdr & 0x7fff;
		if (clen == 0 || clen > SQW_META_SIZE)
			fail_msg("md block %zu at %zu: bad stored length %zu", b, pos, clen);
		assert_true(pos + 2 + clen <= slen);
		md->hdr_pos[b] = pos;
		md->uoff[b] = md->len;
		md->raw[b] = !!(hdr & 0x8000);
		if (hdr & 0x8000) {
			memcpy(md->data + md->len, s + pos + 2, clen);
			md->ulen[b] = clen;
		} else {
			int r;

			if (!dec)
				fail_msg("md block %zu is compressed without a compressor", b);
			/* A compressed block must be smaller than its contents. */
			r = dec->decompress(dec, s + pos + 2, clen, md->data + md->len,
					    SQW_META_SIZE);
			if (r <= 0)
				fail_msg("md block %zu: decompress returned %d", b, r);
			if ((size_t)r <= clen)
				fail_msg("md block %zu stored compressed at %zu bytes for %d bytes of payload",
					 b, clen, r);
			md->ulen[b] = (size_t)r;
		}
		md->len += md->ulen[b];
		md->nblocks++;
		pos += 2 + clen;
	}
	assert_int_equal(pos, slen);
	for (size_t b = 0; b + 1 < md->nblocks; b++)
		if (md->ulen[b] != SQW_META_SIZE)
			fail_msg("md block %zu of %zu holds %zu bytes, want 8192",
				 b, md->nblocks, md->ulen[b]);
}

/* Resolve a ref into an offset of md->data, checking the rules of §3.2. */
static size_t md_resolve(const struct md_stream *md, uint64_t ref)
{
	size_t blk = (size_t)(ref >> 16), off = ref & 0xffff, b;

	for (b = 0; b < md->nblocks; b++) {
		if (md->hdr_pos[b] != blk)
			continue;
		if (off >= md->ulen[b])
			fail_msg("ref (%zu, %zu): offset not below block length %zu",
				 blk, off, md->ulen[b]);
		return md->uoff[b] + off;
	}
	fail_msg("ref (%zu, %zu) does not name a block header", blk, off);
	return 0;
}

/* The codec's default level, or LEVEL if it is not 0. */
static sqw_compressor_t *make_comp_level(enum sqw_comp_id id, int level)
{
	sqw_comp_config_t cfg;
	sqw_compressor_t *c;
	int err;

	assert_int_equal(sqw_comp_config_init(&cfg, id, 131072), 0);
	if (level)
		cfg.level = level;
	c = sqw_compressor_create(&cfg, &err);
	if (!c)
		fail_msg("cannot create compressor %d: %d", (int)id, err);
	return c;
}

static sqw_compressor_t *make_comp(enum sqw_comp_id id)
{
	return make_comp_level(id, 0);
}

static void md_free(struct md_stream *md)
{
	free(md->data);
}

/* ---- tests ---- */

static void test_empty(void **state)
{
	struct meta_writer *mw = malloc(sizeof(*mw));

	(void)state;
	meta_writer_init(mw, NULL);
	assert_int_equal(meta_writer_ref(mw), 0);
	assert_int_equal(meta_writer_flush(mw), 0);	/* nothing to close */
	assert_int_equal(mw->out.len, 0);
	assert_int_equal(meta_writer_append(mw, "", 0), 0);
	assert_int_equal(meta_writer_flush(mw), 0);
	assert_int_equal(mw->out.len, 0);
	meta_writer_cleanup(mw);
	free(mw);
}

/* Without a compressor every block is stored raw: 0x8000 | len. */
static void test_raw_null_compressor(void **state)
{
	struct meta_writer *mw = malloc(sizeof(*mw));
	struct md_stream *md = malloc(sizeof(*md));
	size_t total = 3 * SQW_META_SIZE + 100;
	uint8_t *in = malloc(total);

	(void)state;
	fill_text(in, total);
	meta_writer_init(mw, NULL);
	assert_int_equal(meta_writer_append(mw, in, total), 0);
	/* Three full blocks are closed at once; 100 bytes wait. */
	assert_int_equal(mw->out.len, 3 * (SQW_META_SIZE + 2));
	assert_int_equal(meta_writer_ref(mw), ((uint64_t)3 * 8194 << 16) | 100);
	assert_int_equal(meta_writer_flush(mw), 0);
	assert_int_equal(mw->out.len, 3 * 8194 + 102);
	assert_int_equal(get_le16(mw->out.data), 0xA000);
	assert_int_equal(get_le16(mw->out.data + 8194), 0xA000);
	assert_int_equal(get_le16(mw->out.data + 3 * 8194), 0x8000 | 100);
	md_decode(mw->out.data, mw->out.len, NULL, md);
	assert_int_equal(md->nblocks, 4);
	assert_int_equal(md->len, total);
	assert_memory_equal(md->data, in, total);
	md_free(md);
	meta_writer_cleanup(mw);
	free(mw);
	free(md);
	free(in);
}

/*
 * Items of many sizes appended one by one: every ref names the block
 * header and offset of the item's first byte, and the stream decodes to
 * the input.  Exercised with random (stored raw) and text (compressed)
 * payloads, and with items that straddle blocks.
 */
static void run_refs(enum sqw_comp_id id, int random_data)
{
	enum { NITEMS = 800 };
	struct meta_writer *mw = malloc(sizeof(*mw));
	struct md_stream *md = malloc(sizeof(*md));
	/* Level 1: what is checked is the block framing, not the codec (the
	 * default zstd:15 made this the longest unit test under valgrind). */
	sqw_compressor_t *c = make_comp_level(id, 1), *d = make_comp(id);
	uint64_t *refs = malloc(NITEMS * sizeof(*refs));
	size_t *offs = malloc(NITEMS * sizeof(*offs)), *lens = malloc(NITEMS * sizeof(*lens));
	size_t cap = 12u << 20, total = 0, i;
	uint8_t *in = malloc(cap);
	int saw_raw = 0, saw_comp = 0;

	assert_non_null(in);
	if (random_data)
		fill_random(in, cap);
	else
		fill_text(in, cap);
	meta_writer_init(mw, c);
	for (i = 0; i < NITEMS; i++) {
		size_t len;

		switch (rnd() % 8) {
		case 0: len = 1 + rnd() % 4; break;
		case 1: len = 8192; break;		/* exactly one block */
		case 2: len = 8192 - mw->fill; break;	/* fill up exactly */
		case 3: len = 8193 + rnd() % 20000; break;
		default: len = 16 + rnd() % 300; break;
		}
		if (len == 0)
			len = 1;
		assert_true(total + len <= cap);
		refs[i] = meta_writer_ref(mw);
		assert_true(refs[i] == (((uint64_t)meta_writer_block(mw) << 16) |
					meta_writer_offset(mw)));
		/* Never (k-1, 8192): the offset is always below 8192. */
		assert_true((refs[i] & 0xffff) < SQW_META_SIZE);
		offs[i] = total;
		lens[i] = len;
		assert_int_equal(meta_writer_append(mw, in + total, len), 0);
		total += len;
		/* Closed blocks are exactly those of full 8 KiB. */
		assert_int_equal(mw->fill, total % SQW_META_SIZE);
	}
	assert_int_equal(meta_writer_flush(mw), 0);
	md_decode(mw->out.data, mw->out.len, d, md);
	assert_int_equal(md->len, total);
	assert_memory_equal(md->data, in, total);
	assert_int_equal(md->nblocks, (total + SQW_META_SIZE - 1) / SQW_META_SIZE);
	for (i = 0; i < NITEMS; i++) {
		size_t at = md_resolve(md, refs[i]);

		if (at != offs[i])
			fail_msg("item %zu: ref (%llu, %llu) resolves to %zu, want %zu",
				 i, (unsigned long long)(refs[i] >> 16),
				 (unsigned long long)(refs[i] & 0xffff), at, offs[i]);
		assert_memory_equal(md->data + at, in + offs[i],
				    lens[i] < 64 ? lens[i] : 64);
		/* An item starting at 8192*k is (block k, 0). */
		if (offs[i] % SQW_META_SIZE == 0) {
			size_t k = offs[i] / SQW_META_SIZE;

			assert_int_equal(refs[i] & 0xffff, 0);
			assert_int_equal(refs[i] >> 16, md->hdr_pos[k]);
		}
	}
	for (i = 0; i < md->nblocks; i++) {
		if (md->raw[i])
			saw_raw = 1;
		else
			saw_comp = 1;
	}
	if (random_data) {
		/* Random data never shrinks: all raw, 0xA000 for full blocks. */
		assert_true(saw_raw);
		assert_false(saw_comp);
		for (i = 0; i + 1 < md->nblocks; i++)
			assert_int_equal(get_le16(mw->out.data + md->hdr_pos[i]), 0xA000);
	} else {
		assert_true(saw_comp);
		assert_true(mw->out.len < total / 2);
	}
	md_free(md);
	meta_writer_cleanup(mw);
	sqw_compressor_destroy(c);
	sqw_compressor_destroy(d);
	free(mw);
	free(md);
	free(in);
	free(refs);
	free(offs);
	free(lens);
}

/*
 * A stream handed to a file as it grows (the inode table): the file ends
 * up with the bytes an undrained writer holds, and every ref, block and
 * offset after a drain is the undrained writer's.
 */
static void test_drain(void **state)
{
	enum { NITEMS = 3000 };
	struct meta_writer *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	sqw_compressor_t *c = make_comp_level(SQW_COMP_ZSTD, 1);
	uint8_t *in = malloc(1u << 20), *got;
	struct outfile of;
	size_t i, at = 0, drains = 0;
	int fd;

	(void)state;
	if (!sqw_comp_available(SQW_COMP_ZSTD))
		skip_or_fail("compressor not built in");
	assert_non_null(in);
	fill_text(in, 1u << 20);
	fd = memfd_create("drain", 0);
	assert_true(fd >= 0);
	assert_int_equal(outfile_init_mode(&of, fd, 0, 0), 0);
	meta_writer_init(a, c);
	meta_writer_init(b, c);
	for (i = 0; i < NITEMS; i++) {
		size_t len = 20 + rnd() % 200;

		if (at + len > (1u << 20))
			at = 0;
		assert_true(meta_writer_ref(a) == meta_writer_ref(b));
		assert_int_equal(meta_writer_block(a), meta_writer_block(b));
		assert_int_equal(meta_writer_offset(a), meta_writer_offset(b));
		assert_int_equal(meta_writer_append(a, in + at, len), 0);
		assert_int_equal(meta_writer_append(b, in + at, len), 0);
		at += len;
		if (b->out.len >= 4096) {
			assert_int_equal(meta_writer_drain(b, &of), 0);
			assert_int_equal(b->out.len, 0);
			drains++;
		}
	}
	assert_int_equal(meta_writer_flush(a), 0);
	assert_int_equal(meta_writer_flush(b), 0);
	assert_int_equal(meta_writer_drain(b, &of), 0);
	assert_int_equal(outfile_flush(&of), 0);
	assert_true(drains >= 10);
	assert_int_equal(b->drained, a->out.len);
	got = malloc(a->out.len + 1);
	assert_non_null(got);
	assert_int_equal(pread_all(fd, got, a->out.len, 0), 0);
	assert_memory_equal(got, a->out.data, a->out.len);
	free(got);
	outfile_cleanup(&of);
	close(fd);
	meta_writer_cleanup(a);
	meta_writer_cleanup(b);
	sqw_compressor_destroy(c);
	free(a);
	free(b);
	free(in);
}

static void test_refs_zstd_text(void **state)
{
	(void)state;
	if (!sqw_comp_available(SQW_COMP_ZSTD))
		skip_or_fail("compressor not built in");
	run_refs(SQW_COMP_ZSTD, 0);
}

static void test_refs_zstd_random(void **state)
{
	(void)state;
	if (!sqw_comp_available(SQW_COMP_ZSTD))
		skip_or_fail("compressor not built in");
	run_refs(SQW_COMP_ZSTD, 1);
}

static void test_refs_gzip_text(void **state)
{
	(void)state;
	if (!sqw_comp_available(SQW_COMP_GZIP))
		skip_or_fail("compressor not built in");
	run_refs(SQW_COMP_GZIP, 0);
}

static void test_refs_gzip_random(void **state)
{
	(void)state;
	if (!sqw_comp_available(SQW_COMP_GZIP))
		skip_or_fail("compressor not built in");
	run_refs(SQW_COMP_GZIP, 1);
}

/* Byte by byte up to and across 8192: the ref after exactly 8192 bytes
 * names block 1 at offset 0, and block 1 starts at 2 + stored size of 0. */
static void test_boundary_exact(void **state)
{
	struct meta_writer *mw = malloc(sizeof(*mw));
	sqw_compressor_t *c = make_comp(sqw_comp_available(SQW_COMP_ZSTD) ?
					SQW_COMP_ZSTD : SQW_COMP_GZIP);
	uint8_t b = 'x';
	size_t i;
	uint16_t hdr;

	(void)state;
	meta_writer_init(mw, c);
	for (i = 0; i < SQW_META_SIZE - 1; i++) {
		assert_int_equal(meta_writer_ref(mw), i);
		assert_int_equal(meta_writer_append(mw, &b, 1), 0);
	}
	assert_int_equal(mw->out.len, 0);
	assert_int_equal(meta_writer_ref(mw), SQW_META_SIZE - 1);
	assert_int_equal(meta_writer_append(mw, &b, 1), 0);
	/* The 8192nd byte closed block 0 at once. */
	assert_true(mw->out.len > 2);
	hdr = get_le16(mw->out.data);
	assert_int_equal(hdr & 0x8000, 0);		/* 8 KiB of 'x' compresses */
	assert_int_equal(mw->out.len, 2 + (hdr & 0x7fff));
	assert_int_equal(meta_writer_block(mw), mw->out.len);
	assert_int_equal(meta_writer_offset(mw), 0);
	assert_int_equal(meta_writer_ref(mw), (uint64_t)mw->out.len << 16);
	/* A flush now adds nothing (the block is not closed twice). */
	assert_int_equal(meta_writer_flush(mw), 0);
	assert_int_equal(meta_writer_ref(mw), (uint64_t)(2 + (hdr & 0x7fff)) << 16);
	meta_writer_cleanup(mw);
	sqw_compressor_destroy(c);
	free(mw);
}

/* Blocks that alternate between compressible and random in one stream. */
static void test_mixed_blocks(void **state)
{
	struct meta_writer *mw = malloc(sizeof(*mw));
	struct md_stream *md = malloc(sizeof(*md));
	enum sqw_comp_id id = sqw_comp_available(SQW_COMP_ZSTD) ? SQW_COMP_ZSTD : SQW_COMP_GZIP;
	sqw_compressor_t *c = make_comp(id), *d = make_comp(id);
	size_t n = 8 * SQW_META_SIZE + 5000, i;
	uint8_t *in = malloc(n);

	(void)state;
	for (i = 0; i < 9; i++) {
		size_t len = i < 8 ? SQW_META_SIZE : 5000;

		if (i % 2)
			fill_random(in + i * SQW_META_SIZE, len);
		else
			memset(in + i * SQW_META_SIZE, (int)i, len);
	}
	meta_writer_init(mw, c);
	assert_int_equal(meta_writer_append(mw, in, n), 0);
	assert_int_equal(meta_writer_flush(mw), 0);
	md_decode(mw->out.data, mw->out.len, d, md);
	assert_int_equal(md->nblocks, 9);
	for (i = 0; i < 9; i++) {
		uint16_t hdr = get_le16(mw->out.data + md->hdr_pos[i]);

		if (i % 2) {
			assert_int_equal(hdr, 0x8000 | SQW_META_SIZE);
		} else {
			assert_int_equal(hdr & 0x8000, 0);
			assert_true((hdr & 0x7fff) < 200);
		}
	}
	assert_int_equal(md->len, n);
	assert_memory_equal(md->data, in, n);
	md_free(md);
	meta_writer_cleanup(mw);
	sqw_compressor_destroy(c);
	sqw_compressor_destroy(d);
	free(mw);
	free(md);
	free(in);
}

/* A compressor failure is passed up, not stored as a block. */
static int failing_compress(sqw_compressor_t *c, const uint8_t *in,
			    size_t in_len, uint8_t *out, size_t out_max)
{
	(void)c; (void)in; (void)in_len; (void)out; (void)out_max;
	return -EIO;
}

static void test_compressor_error(void **state)
{
	struct meta_writer *mw = malloc(sizeof(*mw));
	sqw_compressor_t bad;
	uint8_t buf[SQW_META_SIZE + 10];

	(void)state;
	memset(&bad, 0, sizeof(bad));
	bad.compress = failing_compress;
	memset(buf, 1, sizeof(buf));
	meta_writer_init(mw, &bad);
	assert_int_equal(meta_writer_append(mw, buf, 10), 0);
	assert_int_equal(meta_writer_flush(mw), -EIO);
	meta_writer_cleanup(mw);
	meta_writer_init(mw, &bad);
	assert_int_equal(meta_writer_append(mw, buf, sizeof(buf)), -EIO);
	assert_int_equal(mw->out.len, 0);
	meta_writer_cleanup(mw);
	free(mw);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_raw_null_compressor),
		cmocka_unit_test(test_refs_zstd_text),
		cmocka_unit_test(test_refs_zstd_random),
		cmocka_unit_test(test_refs_gzip_text),
		cmocka_unit_test(test_refs_gzip_random),
		cmocka_unit_test(test_boundary_exact),
		cmocka_unit_test(test_mixed_blocks),
		cmocka_unit_test(test_drain),
		cmocka_unit_test(test_compressor_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
