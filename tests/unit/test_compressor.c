/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Compressor layer: round trips, determinism, stream format, options, parsing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "config.h"
#include "quick.h"
#include "sqw/compressor.h"
#if HAVE_XZ
#include <lzma.h>
#endif
#if HAVE_ZSTD
#include <zstd.h>
#endif
#if HAVE_GZIP
#include <zlib.h>
#endif
#if HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#define KiB 1024u
#define MiB (1024u * 1024u)

static const char *cur = "";	/* spec under test, for failure messages */

#define CHECK(c) do { if (!(c)) fail_msg("[%s] %s", cur, #c); } while (0)
#define CHECK_EQ(a, b) do { long long a_ = (long long)(a), b_ = (long long)(b); \
	if (a_ != b_) fail_msg("[%s] %s = %lld, want %lld", cur, #a, a_, b_); } while (0)

/* Every option combination the round trips cover. */
static const char *const specs[] = {
	"gzip", "gzip,zlib", "gzip:1,zlib", "gzip:1,window=10,strategy=filtered+rle",
	"gzip:6,strategy=default+filtered+huffman+rle+fixed",
	"xz", "xz:3,dict=64K,bcj=x86+arm", "xz:9,extreme", "xz:0,bcj=arm64",
	"lzma", "lzma:2", "lz4", "lz4:hc", "lz4:4",
	"lzo", "lzo,algorithm=lzo1x_1", "lzo,algorithm=lzo1x_1_11",
	"lzo,algorithm=lzo1x_1_12", "lzo,algorithm=lzo1x_1_15", "lzo:3",
	"zstd", "zstd:1", "zstd:19",
};
#define NSPECS (sizeof(specs) / sizeof(specs[0]))

static uint64_t rng = 88172645463325252ull;

static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

static uint8_t *random_bytes(size_t n)
{
	uint8_t *b = malloc(n);

	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)rnd();
	return b;
}

/* Words, numbers, blanks: compresses like ordinary text. */
static uint8_t *text_like(size_t n)
{
	static const char *const words[] = {
		"the", "inode", "block", "of", "fragment", "squashfs", "and",
		"directory", "table", "to", "kernel", "compressor", "a", "is",
		"metadata", "xattr", "in", "export", "id", "superblock",
	};
	uint8_t *b = malloc(n);
	size_t i = 0;
	char w[16];
	int k;

	while (i < n) {
		if (rnd() % 8)
			k = snprintf(w, sizeof(w), "%s", words[rnd() % 20]);
		else
			k = snprintf(w, sizeof(w), "%u", rnd() % 100000);
		for (int j = 0; j < k && i < n; j++)
			b[i++] = (uint8_t)w[j];
		if (i < n)
			b[i++] = rnd() % 12 ? ' ' : '\n';
	}
	return b;
}

static uint64_t le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | p[n];
	return v;
}

/* Parse spec; 0 when its codec is not built in (the case is skipped). */
static int get_cfg(const char *spec, uint32_t bs, sqw_comp_config_t *cfg)
{
	const char *err = NULL;
	int ret;

	cur = spec;
	memset(cfg, 0, sizeof(*cfg));
	ret = sqw_comp_config_parse(cfg, spec, bs, &err);
	if (ret == -ENOTSUP)
		return 0;
	if (ret)
		fail_msg("[%s] parse: %d %s", spec, ret, err);
	CHECK_EQ(cfg->block_size, bs);
	return 1;
}

static sqw_compressor_t *make(const sqw_comp_config_t *cfg)
{
	int err = 1;
	sqw_compressor_t *c = sqw_compressor_create(cfg, &err);

	if (!c)
		fail_msg("[%s] create: %d", cur, err);
	CHECK_EQ(err, 0);
	return c;
}

/* Compress into an exactly sized heap buffer so ASan/valgrind see overruns. */
static int comp(sqw_compressor_t *c, const uint8_t *in, size_t len,
		size_t out_max, uint8_t **outp)
{
	uint8_t *out = malloc(out_max ? out_max : 1);
	int r = c->compress(c, in, len, out, out_max);

	if (outp)
		*outp = out;
	else
		free(out);
	return r;
}

#if HAVE_XZ
/* What the kernel checks: CRC32 check, one BCJ at most, dict <= limit. */
static void check_xz(const sqw_comp_config_t *cfg, const uint8_t *s, size_t n)
{
	uint32_t dict = cfg->opt.xz.dict_size ? cfg->opt.xz.dict_size : cfg->block_size;
	lzma_filter f[LZMA_FILTERS_MAX + 1];
	lzma_stream_flags sf;
	lzma_block b;
	size_t i;

	CHECK(n > 24);
	CHECK_EQ(lzma_stream_header_decode(&sf, s), LZMA_OK);
	CHECK_EQ(sf.check, LZMA_CHECK_CRC32);
	memset(&b, 0, sizeof(b));
	b.check = sf.check;
	b.filters = f;
	b.header_size = lzma_block_header_size_decode(s[12]);
	CHECK_EQ(lzma_block_header_decode(&b, NULL, s + 12), LZMA_OK);
	for (i = 0; f[i].id != LZMA_VLI_UNKNOWN; i++) {
		if (f[i].id == LZMA_FILTER_LZMA2) {
			CHECK(((lzma_options_lzma *)f[i].options)->dict_size <= dict);
			CHECK(f[i + 1].id == LZMA_VLI_UNKNOWN);
		}
		free(f[i].options);
	}
	CHECK(i == 1 || i == 2);
}
#endif

static void check_format(const sqw_comp_config_t *cfg, const uint8_t *s,
			 size_t n, size_t len)
{
	uint64_t win;

	(void)n;
	switch (cfg->id) {
	case SQW_COMP_GZIP:	/* zlib header: deflate, our window, FCHECK */
		CHECK_EQ(s[0] & 0x0f, 8);
		CHECK_EQ((s[0] >> 4) + 8, cfg->opt.gzip.window);
		CHECK_EQ((s[0] << 8 | s[1]) % 31, 0);
		break;
	case SQW_COMP_LZMA:	/* props 0x5d, dict, real size (as mksquashfs) */
		CHECK_EQ(s[0], 0x5d);
		CHECK_EQ(le(s + 1, 4), cfg->block_size);
		CHECK_EQ(le(s + 5, 8), len);
		break;
	case SQW_COMP_XZ:
#if HAVE_XZ
		check_xz(cfg, s, n);
#endif
		break;
	case SQW_COMP_LZ4:	/* raw block, not a frame */
		CHECK(le(s, 4) != 0x184d2204);
		break;
	case SQW_COMP_ZSTD:	/* kernel: window <= max(block size, 8K) */
		CHECK_EQ(le(s, 4), 0xfd2fb528);
		CHECK(s[4] & 0xc0);	/* content size recorded */
		if (s[4] & 0x20)	/* single segment: window = content */
			win = len;
		else
			win = (1ull << (10 + (s[5] >> 3))) * (8 + (s[5] & 7)) / 8;
		CHECK(win <= (cfg->block_size > 8192 ? cfg->block_size : 8192));
#if HAVE_ZSTD
		CHECK_EQ(ZSTD_getFrameContentSize(s, n), len);
#endif
		break;
	case SQW_COMP_LZO:
		break;
	}
}

/* Round trip plus error paths; full also checks determinism. */
static void round_trip(const sqw_comp_config_t *cfg, const uint8_t *in,
		       size_t len, int full)
{
	sqw_compressor_t *c = make(cfg), *o[2];
	uint8_t *out, *out2, *dec = malloc(len + 64);
	int r;

	r = comp(c, in, len, len, &out);
	CHECK(r > 0 && (size_t)r < len);
	check_format(cfg, out, (size_t)r, len);
	CHECK_EQ(c->decompress(c, out, (size_t)r, dec, len + 64), len);
	CHECK(memcmp(dec, in, len) == 0);
	CHECK_EQ(c->decompress(c, out, (size_t)r, dec, len - 1), -EOVERFLOW);
	CHECK_EQ(c->decompress(c, out, (size_t)r / 2, dec, len), -EBADMSG);
	if (full) {
		/* Exactly enough room works, one byte less does not. */
		CHECK_EQ(comp(c, in, len, (size_t)r, &out2), r);
		CHECK(memcmp(out, out2, (size_t)r) == 0);
		free(out2);
		CHECK_EQ(comp(c, in, len, (size_t)r - 1, NULL), 0);
		comp(c, in + 1, len - 1, len, NULL);	/* other data in between */
		/* Same bytes from the reused object, a copy and a fresh one. */
		o[0] = c->copy(c);
		o[1] = make(cfg);
		CHECK(o[0] != NULL);
		CHECK(memcmp(&o[0]->cfg, cfg, sizeof(*cfg)) == 0);
		for (int i = 0; i < 3; i++) {
			sqw_compressor_t *x = i < 2 ? o[i] : c;

			CHECK_EQ(comp(x, in, len, len, &out2), r);
			CHECK(memcmp(out, out2, (size_t)r) == 0);
			CHECK_EQ(x->decompress(x, out2, (size_t)r, dec, len), len);
			free(out2);
		}
		sqw_compressor_destroy(o[0]);
		sqw_compressor_destroy(o[1]);
	}
	sqw_compressor_destroy(c);
	free(out);
	free(dec);
}

/* Whether specs[i] is the first of its codec: quick runs make a 1 MiB block
 * and check reuse and copies only with those. */
static int first_of_codec(size_t i)
{
	size_t len = strcspn(specs[i], ":,");

	for (size_t j = 0; j < i; j++)
		if (strcspn(specs[j], ":,") == len && !strncmp(specs[j], specs[i], len))
			return 0;
	return 1;
}

static void test_round_trips(void **state)
{
	const uint32_t bs = test_quick() ? 64 * KiB : 128 * KiB;	/* specs ask dict=64K */
	uint8_t *t8 = text_like(8 * KiB), *tbs = text_like(bs);
	uint8_t *zero = calloc(1, bs), *noise = random_bytes(bs);
	uint8_t *dec = malloc(bs);
	sqw_comp_config_t cfg;
	sqw_compressor_t *c;
	int full;

	(void)state;
	for (size_t i = 0; i < NSPECS; i++) {
		if (!get_cfg(specs[i], bs, &cfg))
			continue;
		/* Quick runs check reuse and copies once per codec. */
		full = !test_quick() || first_of_codec(i);
		round_trip(&cfg, t8, 8 * KiB, full);	/* a metadata block */
		round_trip(&cfg, tbs, bs, full);
		round_trip(&cfg, zero, bs, full);
		c = make(&cfg);
		/* Incompressible, tiny and empty inputs are stored raw. */
		CHECK_EQ(comp(c, noise, bs, bs, NULL), 0);
		CHECK_EQ(comp(c, noise, bs, 2 * bs, NULL), 0);
		CHECK_EQ(comp(c, t8, 1, 64, NULL), 0);
		CHECK_EQ(comp(c, t8, 0, 64, NULL), 0);
		CHECK(c->decompress(c, noise, 4096, dec, bs) < 0);
		sqw_compressor_destroy(c);
	}
	free(t8);
	free(tbs);
	free(zero);
	free(noise);
	free(dec);
}

static void test_full_block(void **state)
{
	uint8_t *t = text_like(MiB);
	sqw_comp_config_t cfg;

	(void)state;
	for (size_t i = 0; i < NSPECS; i++) {
		if ((!test_quick() || first_of_codec(i)) && get_cfg(specs[i], MiB, &cfg))
			round_trip(&cfg, t, MiB, 0);
	}
	free(t);
}

/* Several strategies / BCJ filters: the smallest wins, ties the lowest bit. */
static void check_best_of(const char *all, const char *const *one, int n)
{
	uint8_t *in = text_like(64 * KiB), *best = NULL, *out;
	sqw_comp_config_t cfg;
	sqw_compressor_t *c;
	int r, best_len = 0;

	for (int i = 0; i < n; i++) {
		if (!get_cfg(one[i], 64 * KiB, &cfg))
			goto out;
		c = make(&cfg);
		r = comp(c, in, 64 * KiB, 64 * KiB, &out);
		if (r > 0 && (best_len == 0 || r < best_len)) {
			free(best);
			best = out;
			best_len = r;
		} else {
			free(out);
		}
		sqw_compressor_destroy(c);
	}
	get_cfg(all, 64 * KiB, &cfg);
	c = make(&cfg);
	CHECK_EQ(comp(c, in, 64 * KiB, 64 * KiB, &out), best_len);
	CHECK(memcmp(out, best, (size_t)best_len) == 0);
	sqw_compressor_destroy(c);
	free(out);
out:
	free(best);
	free(in);
}

static void test_best_of(void **state)
{
	static const char *const gz[] = {
		"gzip:6,strategy=default", "gzip:6,strategy=filtered",
		"gzip:6,strategy=huffman", "gzip:6,strategy=rle",
		"gzip:6,strategy=fixed",
	};
	static const char *const xz[] = { "xz:1", "xz:1,bcj=x86", "xz:1,bcj=sparc" };

	(void)state;
	check_best_of("gzip:6,strategy=default+filtered+huffman+rle+fixed", gz, 5);
	check_best_of("gzip:6,strategy=huffman+fixed", gz + 2, 3);
	check_best_of("xz:1,bcj=x86+sparc", xz, 3);
}

#if HAVE_GZIP
/*
 * Which deflate wrote the block: "zlib" (and any non-default window or
 * strategy) gives zlib's bytes, as mksquashfs writes them; the default is
 * libdeflate's when built with it.  Both inflate with zlib.
 */
static void check_deflater(const char *spec, int level, int want_ld,
			   const uint8_t *in, size_t len)
{
	sqw_comp_config_t cfg;
	sqw_compressor_t *c;
	uint8_t *out, *ref = malloc(len + 1024), *dec = malloc(len);
	size_t ref_len = len + 1024;
	int r;

	CHECK(get_cfg(spec, 128 * KiB, &cfg));
	c = make(&cfg);
	r = comp(c, in, len, len, &out);
	CHECK(r > 0);
	if (want_ld) {
#if HAVE_LIBDEFLATE
		struct libdeflate_compressor *ld = libdeflate_alloc_compressor(level);

		ref_len = libdeflate_zlib_compress(ld, in, len, ref, ref_len);
		libdeflate_free_compressor(ld);
#endif
	} else {
		uLongf n = ref_len;

		CHECK_EQ(compress2(ref, &n, in, len, level), Z_OK);
		ref_len = n;
	}
	CHECK_EQ(r, ref_len);
	CHECK(memcmp(out, ref, ref_len) == 0);
	CHECK_EQ(c->decompress(c, out, (size_t)r, dec, len), len);
	CHECK(memcmp(dec, in, len) == 0);
	free(out);
	free(ref);
	free(dec);
	c->destroy(c);
}

static void test_gzip_deflaters(void **state)
{
	size_t len = 100 * KiB;
	uint8_t *in = text_like(len);

	(void)state;
	check_deflater("gzip", 9, HAVE_LIBDEFLATE, in, len);
	check_deflater("gzip:4", 4, HAVE_LIBDEFLATE, in, len);
	check_deflater("gzip,zlib", 9, 0, in, len);
	check_deflater("gzip:4,zlib", 4, 0, in, len);
	check_deflater("gzip:4,strategy=default", 4, HAVE_LIBDEFLATE, in, len);
	free(in);
}
#endif

static void test_options(void **state)
{
	static const struct {
		const char *spec;
		size_t len;
		const char *hex;
	} t[] = {
		{ "gzip", 0, "" }, { "gzip:9,strategy=default", 0, "" },
		{ "gzip:1,window=10,strategy=filtered+rle", 8, "010000000a000a00" },
		{ "gzip:9,window=12,strategy=filtered+huffman", 8, "090000000c000600" },
		/* a level alone: strategies 0, as the peers write the default */
		{ "gzip:1", 8, "010000000f000000" },
		{ "gzip:9,window=8,strategy=default", 8, "0900000008000000" },
		{ "xz", 0, "" }, { "xz:9,extreme,dict=128K", 0, "" },
		{ "xz,dict=64K,bcj=x86+arm", 8, "0000010009000000" },
		{ "xz,bcj=x86", 8, "0000020001000000" },
		{ "lzma:9", 0, "" },
		{ "lz4", 8, "0100000000000000" }, { "lz4:hc", 8, "0100000001000000" },
		{ "lzo", 0, "" }, { "lzo,algorithm=lzo1x_999", 0, "" },
		{ "lzo,algorithm=lzo1x_1", 8, "0000000000000000" },
		{ "lzo,algorithm=lzo1x_1_15", 8, "0300000000000000" },
		{ "lzo:3", 8, "0400000003000000" },
		{ "zstd", 0, "" }, { "zstd:19", 4, "13000000" }, { "zstd:3", 4, "03000000" },
	};
	sqw_comp_config_t cfg;
	uint8_t buf[64];
	char hex[129];

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (!get_cfg(t[i].spec, 128 * KiB, &cfg))
			continue;
		memset(buf, 0xee, sizeof(buf));
		CHECK_EQ(sqw_comp_config_options(&cfg, buf), t[i].len);
		for (size_t j = 0; j < t[i].len; j++)
			sprintf(hex + 2 * j, "%02x", buf[j]);
		hex[2 * t[i].len] = '\0';
		if (strcmp(hex, t[i].hex))
			fail_msg("[%s] options %s, want %s", cur, hex, t[i].hex);
	}
}

static void test_parse(void **state)
{
	sqw_comp_config_t c;

	(void)state;
	if (get_cfg("gzip:9,window=12,strategy=filtered+rle", 128 * KiB, &c)) {
		CHECK(c.id == SQW_COMP_GZIP && c.level == 9);
		CHECK(c.opt.gzip.window == 12 && c.opt.gzip.strategies == 0x0a);
	}
	if (get_cfg("xz:9,extreme,dict=50%,bcj=x86+arm", 128 * KiB, &c)) {
		CHECK(c.level == 9 && c.opt.xz.extreme && c.opt.xz.dict_size == 64 * KiB);
		CHECK_EQ(c.opt.xz.filters, SQW_XZ_X86 | SQW_XZ_ARM);
	}
	if (get_cfg("xz,dict=768K", MiB, &c))	/* 3*2^n is allowed */
		CHECK_EQ(c.opt.xz.dict_size, 768 * KiB);
	/* mksquashfs's own examples: decimal percentages; KiB like -b takes */
	if (get_cfg("xz,dict=37.5%", 128 * KiB, &c))
		CHECK_EQ(c.opt.xz.dict_size, 48 * KiB);
	if (get_cfg("xz,dict=12.5%", 128 * KiB, &c))
		CHECK_EQ(c.opt.xz.dict_size, 16 * KiB);
	if (get_cfg("xz,dict=96KiB", 128 * KiB, &c))
		CHECK_EQ(c.opt.xz.dict_size, 96 * KiB);
	if (get_cfg("xz,dict=1MiB", MiB, &c))
		CHECK_EQ(c.opt.xz.dict_size, MiB);
	if (get_cfg("lzma:0,extreme", MiB, &c))
		CHECK(c.level == 0 && c.opt.xz.extreme);
	if (get_cfg("lz4:hc", 4 * KiB, &c))
		CHECK(c.opt.lz4.hc && c.level == 12);
	if (get_cfg("lz4:12", 4 * KiB, &c))
		CHECK(c.opt.lz4.hc && c.level == 12);
	if (get_cfg("lz4", 4 * KiB, &c))
		CHECK(!c.opt.lz4.hc && c.level == 0);
	if (get_cfg("lzo,algorithm=lzo1x_1_15", 4 * KiB, &c))
		CHECK(c.opt.lzo.algorithm == SQW_LZO1X_1_15 && c.level == 0);
	if (get_cfg("lzo:7", 4 * KiB, &c))
		CHECK(c.opt.lzo.algorithm == SQW_LZO1X_999 && c.level == 7);
	if (get_cfg("zstd:22", 4 * KiB, &c))
		CHECK_EQ(c.level, 22);
	/* A flag where the level goes keeps the default level. */
	if (get_cfg("gzip:zlib", 128 * KiB, &c))
		CHECK(c.opt.gzip.zlib && c.level == 9 && c.opt.gzip.window == 15);
	if (get_cfg("gzip:zlib:window=12", 128 * KiB, &c))
		CHECK(c.opt.gzip.zlib && c.level == 9 && c.opt.gzip.window == 12);
	if (get_cfg("xz:extreme", 128 * KiB, &c))
		CHECK(c.opt.xz.extreme && c.level == 6);
}

static void test_parse_errors(void **state)
{
	static const char *const bad[] = {
		"foo", "", ":9", "gzipx", "GZIP", "gzip:", "gzip:0", "gzip:10",
		"gzip:x", "gzip:-1", "gzip: 9", "gzip:+9", "gzip:9x", "gzip:9,",
		"gzip,,window=9", "gzip,window=7", "gzip,window=16", "gzip,window=",
		"gzip,window", "gzip,foo=1", "gzip,strategy=bogus",
		"gzip,strategy=rle+", "gzip,strategy=", "xz:10", "xz,dict=20K",
		"xz,dict=20480", "xz,dict=4K", "xz,dict=256K", "xz,dict=0",
		"xz,dict=0%", "xz,dict=64KB", "xz,dict=K", "xz,bcj=x86+foo",
		"xz,dict=64iB", "xz,dict=3.1234%", "xz,dict=.5%", "xz,dict=50.%",
		"xz,dict=50%iB", "xz,dict=37.55%",
		"xz,extreme=1", "gzip,zlib=1", "xz,zlib", "zstd,zlib", "xz:6:7", "lzma:10", "lzma,bcj=x86", "lzma,dict=64K",
		"lz4:0", "lz4:13", "lz4,extreme", "lz4:hc,hc=1", "lzo:0", "lzo:10",
		"lzo:3,algorithm=lzo1x_1", "lzo,algorithm=lzo2", "zstd:0",
		"zstd:23", "zstd:19x", "zstd:3,foo", "zstd,level=3", "zstd:1:2",
		"zstd,3", "gzip:zlib,zlib", "xz,bcj=x86,bcj=arm", "gzip,strategy=rle,strategy=fixed",
		"xz:extreme,extreme", "xz,dict=8K,dict=16K",
	};
	static const struct { const char *spec, *msg; } msgs[] = {
		{ "foo", "unknown compressor 'foo'" },
		{ "zstd:23", "zstd level must be 1..22" },
		{ "gzip,foo=1", "unknown gzip option 'foo'" },
		{ "xz,dict=0x5000", "bad xz dict size '0x5000'" },
		{ "xz,dict=20K", "xz dict must be 2^n or 3*2^n bytes" },
		{ "zstd:3:3", "zstd level given twice" },
		{ "zstd,3", "the zstd level goes right after the name (zstd:3)" },
		{ "xz,bcj=x86,bcj=arm", "xz option 'bcj' given twice" },
		{ "gzip:zlib,zlib", "gzip option 'zlib' given twice" },
		{ "lz4:hc:hc", "lz4 option 'hc' given twice" },
		{ "lz4:hc,hc", "lz4 option 'hc' given twice" },
	};
	sqw_comp_config_t cfg, snap;
	const char *err;
	char name[8];
	int ret, want;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cur = bad[i];
		memset(&cfg, 0xa5, sizeof(cfg));
		cfg.block_size = 128 * KiB;
		snap = cfg;
		err = NULL;
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(cur, ":,"), cur);
		want = sqw_comp_id_from_name(name);
		want = want > 0 && !sqw_comp_available(want) ? -ENOTSUP : -EINVAL;
		ret = sqw_comp_config_parse(&cfg, cur, 128 * KiB, &err);
		CHECK_EQ(ret, want);
		CHECK(err && *err);
		CHECK(memcmp(&cfg, &snap, sizeof(cfg)) == 0);
	}
	for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
		cur = msgs[i].spec;
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(cur, ":,"), cur);
		ret = sqw_comp_id_from_name(name);
		if (ret > 0 && !sqw_comp_available(ret))
			continue;
		CHECK(sqw_comp_config_parse(&cfg, cur, 128 * KiB, &err) < 0);
		if (strcmp(err, msgs[i].msg))
			fail_msg("[%s] message '%s'", cur, err);
	}
#if HAVE_XZ
	cur = "xz,bcj=riscv";
	ret = sqw_comp_config_parse(&cfg, cur, 128 * KiB, &err);
#ifdef LZMA_FILTER_RISCV
	CHECK_EQ(ret, 0);
#else
	CHECK_EQ(ret, -ENOTSUP);
#endif
#endif
}

static void test_defaults_and_names(void **state)
{
	static const char *const names[] = { "gzip", "lzma", "lzo", "xz", "lz4", "zstd" };
	sqw_comp_config_t c;
	uint8_t buf[64];
	int err;

	(void)state;
	cur = "names";
	for (int id = SQW_COMP_GZIP; id <= SQW_COMP_ZSTD; id++) {
		CHECK(strcmp(sqw_comp_name(id), names[id - 1]) == 0);
		CHECK_EQ(sqw_comp_id_from_name(names[id - 1]), id);
		CHECK_EQ(sqw_comp_config_init(&c, id, 128 * KiB),
			 sqw_comp_available(id) ? 0 : -ENOTSUP);
		CHECK(c.id == (enum sqw_comp_id)id && c.block_size == 128 * KiB);
		/* Defaults need no options block, except lz4's mandatory one. */
		CHECK_EQ(sqw_comp_config_options(&c, buf), id == SQW_COMP_LZ4 ? 8 : 0);
		if (!sqw_comp_available(id)) {
			CHECK(sqw_compressor_create(&c, &err) == NULL);
			CHECK_EQ(err, -ENOTSUP);
		}
	}
	CHECK(sqw_comp_name(0) == NULL && sqw_comp_name(7) == NULL);
	CHECK_EQ(sqw_comp_id_from_name("bogus"), -EINVAL);
	CHECK(!sqw_comp_available(0) && !sqw_comp_available(7));
	CHECK_EQ(sqw_comp_config_init(&c, 0, 4096), -EINVAL);
	CHECK_EQ(sqw_comp_config_init(&c, 7, 4096), -EINVAL);
	if (sqw_comp_config_init(&c, SQW_COMP_GZIP, 128 * KiB) == 0) {
		CHECK(c.level == 9 && c.opt.gzip.window == 15);
		CHECK_EQ(c.opt.gzip.strategies, SQW_GZIP_DEFAULT);
		c.level = 10;	/* invalid configs are refused */
		CHECK(sqw_compressor_create(&c, &err) == NULL);
		CHECK_EQ(err, -EINVAL);
		c.level = 9;
		c.block_size = 3000;
		CHECK(sqw_compressor_create(&c, &err) == NULL);
		CHECK_EQ(err, -EINVAL);
	}
	if (sqw_comp_config_init(&c, SQW_COMP_XZ, 128 * KiB) == 0)
		CHECK(c.level == 6 && !c.opt.xz.dict_size && !c.opt.xz.filters && !c.opt.xz.extreme);
	if (sqw_comp_config_init(&c, SQW_COMP_LZO, 128 * KiB) == 0)
		CHECK(c.opt.lzo.algorithm == SQW_LZO1X_999 && c.level == 8);
	if (sqw_comp_config_init(&c, SQW_COMP_ZSTD, 128 * KiB) == 0)
		CHECK_EQ(c.level, 15);
}

/* The summary names a level only where the algorithm has one. */
/* Every key the parser takes for some codec is a key, nothing else is. */
static void test_is_key(void **state)
{
	static const char *const keys[] = {
		"window", "strategy", "zlib", "dict", "bcj", "extreme", "hc",
		"algorithm",
	};
	static const char *const not_keys[] = {
		"", "level", "comp", "gzip", "Window", "windows", "allow_other",
		"block_size", "hc=1",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		assert_int_equal(sqw_comp_is_key(keys[i]), 1);
	for (size_t i = 0; i < sizeof(not_keys) / sizeof(not_keys[0]); i++)
		assert_int_equal(sqw_comp_is_key(not_keys[i]), 0);
}

static void test_describe(void **state)
{
	static const char *const cases[][2] = {
		{ "lz4", "lz4" },
		{ "lz4:hc", "lz4 hc level 12" },
		{ "lz4:9", "lz4 hc level 9" },
		{ "lzo", "lzo level 8" },
		{ "lzo,algorithm=lzo1x_1_15", "lzo lzo1x_1_15" },
		{ "lzo:3", "lzo level 3" },
		{ "zstd:3", "zstd level 3" },
		{ "gzip", "gzip level 9" },
		{ "xz", "xz level 6" },
		/* every setting that changes the bytes, when not the default */
		{ "xz:9,extreme,dict=50%,bcj=arm+x86", "xz level 9 extreme, dict 64 KiB, bcj x86+arm" },
		{ "xz,dict=100%", "xz level 6" },
		{ "xz,dict=24K,bcj=riscv", "xz level 6, dict 24 KiB, bcj riscv" },
		{ "lzma:9,extreme", "lzma level 9 extreme" },
		{ "gzip,window=12", "gzip level 9, window 12" },
		{ "gzip:5,strategy=rle+default,zlib", "gzip level 5, strategy default+rle, zlib" },
		{ "gzip,strategy=default", "gzip level 9" },
		{ "xz:9,extreme,dict=8K,bcj=x86+powerpc+ia64+arm+armthumb+sparc+arm64+riscv",
		  "xz level 9 extreme, dict 8 KiB, bcj x86+powerpc+ia64+arm+armthumb+sparc+arm64+riscv" },
	};
	sqw_comp_config_t c;
	char buf[SQW_COMP_DESCRIBE_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (!get_cfg(cases[i][0], 128 * KiB, &c))
			continue;
		sqw_comp_config_describe(&c, buf, sizeof(buf));
		if (strcmp(buf, cases[i][1]))
			fail_msg("[%s] described as '%s', want '%s'",
				 cases[i][0], buf, cases[i][1]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_describe),
		cmocka_unit_test(test_is_key),
		cmocka_unit_test(test_defaults_and_names),
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_round_trips),
		cmocka_unit_test(test_best_of),
#if HAVE_GZIP
		cmocka_unit_test(test_gzip_deflaters),
#endif
		cmocka_unit_test(test_full_block),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
