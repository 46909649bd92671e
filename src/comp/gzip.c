/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * gzip: one zlib (RFC 1950) stream per block; the kernel rejects raw deflate.
 * Built with libdeflate, the default settings (window 15, default strategy)
 * deflate with it: whole-buffer, about twice as fast as zlib at level 9 and a
 * few percent smaller.  Other settings, and the "zlib" option, use zlib, whose
 * output matches mksquashfs's.  zlib inflates in every case.
 */
#define ZLIB_CONST
#include <zlib.h>

#include "comp/internal.h"
#if HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#define GZIP_NSTRAT 5

/* zlib strategy for each SQW_GZIP_* bit, lowest bit first. */
static const int gzip_zstrategy[GZIP_NSTRAT] = {
	Z_DEFAULT_STRATEGY, Z_FILTERED, Z_HUFFMAN_ONLY, Z_RLE, Z_FIXED,
};

struct gzip_comp {
	sqw_compressor_t base;
	/*
	 * One deflate state per selected strategy: switching a single state
	 * with deflateParams() has differed between zlib versions.
	 */
	z_stream def[GZIP_NSTRAT];
	unsigned def_ok;	/* bit i: def[i] initialised */
	z_stream inf;
	int inf_ok;
#if HAVE_LIBDEFLATE
	struct libdeflate_compressor *ld;	/* NULL: zlib deflates */
#endif
	uint8_t *scratch;	/* candidates after the first go here */
	size_t scratch_cap;
};

/* One attempt with strategy bit i: see sqw_comp_try_fn. */
static int gzip_try(sqw_compressor_t *base, int i, const uint8_t *in,
		    size_t in_len, uint8_t *out, size_t cap)
{
	z_stream *zs = &((struct gzip_comp *)base)->def[i];
	int ret;

	if (deflateReset(zs) != Z_OK)
		return -EIO;
	zs->next_in = in;
	zs->avail_in = (uInt)in_len;
	zs->next_out = out;
	zs->avail_out = (uInt)cap;
	ret = deflate(zs, Z_FINISH);
	if (ret == Z_STREAM_END)
		return (int)zs->total_out;
	return ret == Z_OK || ret == Z_BUF_ERROR ? 0 : -EIO;
}

#if HAVE_LIBDEFLATE
/*
 * libdeflate gives up a few bytes short of the end of its output buffer, so
 * it writes to scratch with room to spare; a result that fits in limit is
 * copied out.
 */
#define LD_SLACK 64

static int gzip_ld_compress(struct gzip_comp *c, const uint8_t *in,
			    size_t in_len, uint8_t *out, size_t limit)
{
	size_t n;

	if (sqw_comp_scratch(&c->scratch, &c->scratch_cap, limit + LD_SLACK))
		return -ENOMEM;
	n = libdeflate_zlib_compress(c->ld, in, in_len, c->scratch,
				     limit + LD_SLACK);
	if (n == 0 || n > limit)
		return 0;
	memcpy(out, c->scratch, n);
	return (int)n;
}
#endif

static int gzip_compress(sqw_compressor_t *base, const uint8_t *in,
			 size_t in_len, uint8_t *out, size_t out_max)
{
	struct gzip_comp *c = (struct gzip_comp *)base;
	size_t limit = sqw_comp_out_limit(in_len, out_max);

	if (limit == 0)
		return 0;
#if HAVE_LIBDEFLATE
	if (c->ld)
		return gzip_ld_compress(c, in, in_len, out, limit);
#endif
	return sqw_comp_best_of(base, gzip_try, c->def_ok, in, in_len, out,
				limit, &c->scratch, &c->scratch_cap);
}

static int gzip_decompress(sqw_compressor_t *base, const uint8_t *in,
			   size_t in_len, uint8_t *out, size_t out_max)
{
	struct gzip_comp *c = (struct gzip_comp *)base;
	z_stream *zs = &c->inf;
	uint8_t probe;
	int ret;

	if (in_len > UINT_MAX)
		return -EBADMSG;
	if (!c->inf_ok) {
		if (inflateInit(zs) != Z_OK)
			return -ENOMEM;
		c->inf_ok = 1;
	} else if (inflateReset(zs) != Z_OK) {
		return -EIO;
	}
	zs->next_in = in;
	zs->avail_in = (uInt)in_len;
	zs->next_out = out;
	zs->avail_out = (uInt)sqw_comp_clamp_out(out_max);
	ret = inflate(zs, Z_FINISH);
	if (ret == Z_BUF_ERROR && zs->avail_out == 0) {
		/* Output full: is more due (overflow) or is the input cut short? */
		zs->next_out = &probe;
		zs->avail_out = 1;
		ret = inflate(zs, Z_FINISH);
		if (zs->avail_out == 0)
			return -EOVERFLOW;
	}
	if (ret == Z_MEM_ERROR)
		return -ENOMEM;
	/* Trailing bytes after the stream mean the block size is wrong. */
	if (ret != Z_STREAM_END || zs->avail_in != 0)
		return -EBADMSG;
	return (int)zs->total_out;
}

static void gzip_destroy(sqw_compressor_t *base)
{
	struct gzip_comp *c = (struct gzip_comp *)base;
	int i;

	for (i = 0; i < GZIP_NSTRAT; i++) {
		if (c->def_ok & (1u << i))
			deflateEnd(&c->def[i]);
	}
	if (c->inf_ok)
		inflateEnd(&c->inf);
#if HAVE_LIBDEFLATE
	libdeflate_free_compressor(c->ld);
#endif
	free(c->scratch);
	free(c);
}

static sqw_compressor_t *gzip_copy(const sqw_compressor_t *base)
{
	int err;

	return sqw_gzip_create(&base->cfg, &err);
}

sqw_compressor_t *sqw_gzip_create(const sqw_comp_config_t *cfg, int *err)
{
	struct gzip_comp *c = sqw_comp_alloc(sizeof(*c), cfg, err);
	unsigned bits = cfg->opt.gzip.strategies;
	int i, ret;

	if (!c)
		return NULL;
	c->base.compress = gzip_compress;
	c->base.decompress = gzip_decompress;
	c->base.copy = gzip_copy;
	c->base.destroy = gzip_destroy;
	if (bits == 0)
		bits = SQW_GZIP_DEFAULT;
#if HAVE_LIBDEFLATE
	if (!cfg->opt.gzip.zlib && cfg->opt.gzip.window == 15 &&
	    bits == SQW_GZIP_DEFAULT) {
		c->ld = libdeflate_alloc_compressor(cfg->level);
		if (!c->ld) {
			*err = -ENOMEM;
			goto fail;
		}
		*err = 0;
		return &c->base;
	}
#endif
	for (i = 0; i < GZIP_NSTRAT; i++) {
		if (!(bits & (1u << i)))
			continue;
		ret = deflateInit2(&c->def[i], cfg->level, Z_DEFLATED,
				   cfg->opt.gzip.window, 8, gzip_zstrategy[i]);
		if (ret != Z_OK) {
			*err = ret == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
			goto fail;
		}
		c->def_ok |= 1u << i;
	}
	*err = 0;
	return &c->base;
fail:
	gzip_destroy(&c->base);
	return NULL;
}
