/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * xz: one .xz stream per block with a CRC32 check (the kernel rejects CRC64
 * and SHA-256) and [one BCJ +] LZMA2.  lzma: the legacy "LZMA-alone" format,
 * which the kernel cannot mount but unsquashfs reads.
 */
#include <lzma.h>

#include "comp/internal.h"
#include "util/util.h"

#define LZMA_ALONE_HEADER 13	/* props(1) dict(4) uncompressed size(8) */

/* liblzma filter for each SQW_XZ_* bit; UNKNOWN = not in this liblzma. */
static const lzma_vli xz_bcj_ids[8] = {
	LZMA_FILTER_X86, LZMA_FILTER_POWERPC, LZMA_FILTER_IA64,
	LZMA_FILTER_ARM, LZMA_FILTER_ARMTHUMB, LZMA_FILTER_SPARC,
#ifdef LZMA_FILTER_ARM64
	LZMA_FILTER_ARM64,
#else
	LZMA_VLI_UNKNOWN,
#endif
#ifdef LZMA_FILTER_RISCV
	LZMA_FILTER_RISCV,
#else
	LZMA_VLI_UNKNOWN,
#endif
};

struct xz_comp {
	sqw_compressor_t base;
	lzma_options_lzma opt;	/* preset with our dictionary size */
	lzma_stream enc, dec;	/* lzma only; kept to reuse their memory */
	uint8_t *scratch;
	size_t scratch_cap;
};

static int xz_err(lzma_ret ret)
{
	return ret == LZMA_MEM_ERROR ? -ENOMEM : -EIO;
}

/* Variant 0 is LZMA2 alone, variant i > 0 puts BCJ bit i-1 in front. */
static int xz_try(sqw_compressor_t *base, int variant, const uint8_t *in,
		  size_t in_len, uint8_t *out, size_t cap)
{
	struct xz_comp *c = (struct xz_comp *)base;
	lzma_filter f[3];
	size_t pos = 0, n = 0;
	lzma_ret ret;

	if (variant > 0) {
		f[n].id = xz_bcj_ids[variant - 1];
		f[n++].options = NULL;
		if (f[0].id == LZMA_VLI_UNKNOWN)
			return -ENOTSUP;
	}
	f[n].id = LZMA_FILTER_LZMA2;
	f[n++].options = &c->opt;
	f[n].id = LZMA_VLI_UNKNOWN;
	f[n].options = NULL;
	ret = lzma_stream_buffer_encode(f, LZMA_CHECK_CRC32, NULL, in, in_len,
					out, &pos, cap);
	if (ret == LZMA_OK)
		return (int)pos;
	return ret == LZMA_BUF_ERROR ? 0 : xz_err(ret);
}

static int xz_compress(sqw_compressor_t *base, const uint8_t *in,
		       size_t in_len, uint8_t *out, size_t out_max)
{
	struct xz_comp *c = (struct xz_comp *)base;
	size_t limit = sqw_comp_out_limit(in_len, out_max);
	uint32_t mask = 1u | ((base->cfg.opt.xz.filters & 0xffu) << 1);

	if (limit == 0)
		return 0;
	return sqw_comp_best_of(base, xz_try, mask, in, in_len, out, limit,
				&c->scratch, &c->scratch_cap);
}

static lzma_ret xz_decode(const uint8_t *in, size_t in_len, uint8_t *out,
			  size_t *out_len)
{
	uint64_t memlimit = UINT64_MAX;
	size_t in_pos = 0, out_pos = 0;
	lzma_ret ret;

	ret = lzma_stream_buffer_decode(&memlimit, 0, NULL, in, &in_pos, in_len,
					out, &out_pos, *out_len);
	*out_len = out_pos;
	/* Trailing bytes after the stream mean the block size is wrong. */
	return ret == LZMA_OK && in_pos != in_len ? LZMA_DATA_ERROR : ret;
}

static int xz_decompress(sqw_compressor_t *base, const uint8_t *in,
			 size_t in_len, uint8_t *out, size_t out_max)
{
	size_t len = sqw_comp_clamp_out(out_max);
	uint8_t *big;
	lzma_ret ret;

	(void)base;
	ret = xz_decode(in, in_len, out, &len);
	if (ret == LZMA_OK)
		return (int)len;
	if (ret != LZMA_BUF_ERROR || out_max >= SQW_COMP_MAX_BLOCK)
		return ret == LZMA_MEM_ERROR ? -ENOMEM : -EBADMSG;
	/*
	 * BUF_ERROR means "output full" but liblzma also reports truncated
	 * input that way: retry with room for the largest block.
	 */
	big = malloc(SQW_COMP_MAX_BLOCK);
	if (!big)
		return -ENOMEM;
	len = SQW_COMP_MAX_BLOCK;
	ret = xz_decode(in, in_len, big, &len);
	free(big);
	return ret == LZMA_OK ? -EOVERFLOW : -EBADMSG;
}

static int lzma_compress(sqw_compressor_t *base, const uint8_t *in,
			 size_t in_len, uint8_t *out, size_t out_max)
{
	struct xz_comp *c = (struct xz_comp *)base;
	size_t limit = sqw_comp_out_limit(in_len, out_max);
	lzma_ret ret;

	if (limit <= LZMA_ALONE_HEADER)
		return 0;
	ret = lzma_alone_encoder(&c->enc, &c->opt);
	if (ret != LZMA_OK)
		return xz_err(ret);
	c->enc.next_in = in;
	c->enc.avail_in = in_len;
	c->enc.next_out = out;
	c->enc.avail_out = limit;
	do
		ret = lzma_code(&c->enc, LZMA_FINISH);
	while (ret == LZMA_OK);
	if (ret == LZMA_BUF_ERROR)	/* output full */
		return 0;
	if (ret != LZMA_STREAM_END)
		return xz_err(ret);
	/* The encoder writes "size unknown"; mksquashfs stores the real one. */
	put_le64(out + 5, in_len);
	return (int)(limit - c->enc.avail_out);
}

static int lzma_decompress(sqw_compressor_t *base, const uint8_t *in,
			   size_t in_len, uint8_t *out, size_t out_max)
{
	struct xz_comp *c = (struct xz_comp *)base;
	lzma_ret ret;

	out_max = sqw_comp_clamp_out(out_max);
	if (in_len < LZMA_ALONE_HEADER)
		return -EBADMSG;
	if (get_le64(in + 5) != UINT64_MAX && get_le64(in + 5) > out_max)
		return -EOVERFLOW;
	ret = lzma_alone_decoder(&c->dec, UINT64_MAX);
	if (ret != LZMA_OK)
		return xz_err(ret);
	c->dec.next_in = in;
	c->dec.avail_in = in_len;
	c->dec.next_out = out;
	c->dec.avail_out = out_max;
	do
		ret = lzma_code(&c->dec, LZMA_FINISH);
	while (ret == LZMA_OK);	/* ends in BUF_ERROR when stuck */
	if (ret == LZMA_STREAM_END)
		return (int)(out_max - c->dec.avail_out);
	if (ret == LZMA_BUF_ERROR && c->dec.avail_out == 0)
		return -EOVERFLOW;
	return ret == LZMA_MEM_ERROR ? -ENOMEM : -EBADMSG;
}

static void xz_destroy(sqw_compressor_t *base)
{
	struct xz_comp *c = (struct xz_comp *)base;

	lzma_end(&c->enc);
	lzma_end(&c->dec);
	free(c->scratch);
	free(c);
}

static sqw_compressor_t *xz_copy(const sqw_compressor_t *base)
{
	int err;

	if (base->cfg.id == SQW_COMP_LZMA)
		return sqw_lzma_create(&base->cfg, &err);
	return sqw_xz_create(&base->cfg, &err);
}

static sqw_compressor_t *xz_new(const sqw_comp_config_t *cfg, uint32_t dict,
				int *err)
{
	struct xz_comp *c = sqw_comp_alloc(sizeof(*c), cfg, err);
	uint32_t preset = (uint32_t)cfg->level;

	if (!c)
		return NULL;
	c->base.copy = xz_copy;
	c->base.destroy = xz_destroy;
	if (cfg->opt.xz.extreme)
		preset |= LZMA_PRESET_EXTREME;
	if (lzma_lzma_preset(&c->opt, preset)) {
		xz_destroy(&c->base);
		*err = -EINVAL;
		return NULL;
	}
	/* lc=3 lp=0 pb=2 come with every preset; the kernel needs lc+lp <= 4. */
	c->opt.dict_size = dict;
	*err = 0;
	return &c->base;
}

sqw_compressor_t *sqw_xz_create(const sqw_comp_config_t *cfg, int *err)
{
	uint32_t dict = cfg->opt.xz.dict_size;
	sqw_compressor_t *c;

	/* The stream's dictionary must not exceed what the options announce. */
	c = xz_new(cfg, dict ? dict : cfg->block_size, err);
	if (c) {
		c->compress = xz_compress;
		c->decompress = xz_decompress;
	}
	return c;
}

sqw_compressor_t *sqw_lzma_create(const sqw_comp_config_t *cfg, int *err)
{
	uint32_t dict = cfg->block_size;
	sqw_compressor_t *c;

	if (dict < LZMA_DICT_SIZE_MIN)
		dict = LZMA_DICT_SIZE_MIN;
	c = xz_new(cfg, dict, err);
	if (c) {
		c->compress = lzma_compress;
		c->decompress = lzma_decompress;
	}
	return c;
}
