/* SPDX-License-Identifier: GPL-2.0-or-later */
/* lz4: a raw LZ4 block per block (the kernel rejects the LZ4 frame format). */
#include <lz4.h>
#include <lz4hc.h>

#include "comp/internal.h"

struct lz4_comp {
	sqw_compressor_t base;
	/*
	 * State for the _extState variants, which give the same bytes as
	 * LZ4_compress_default()/LZ4_compress_HC() without a malloc per call.
	 */
	void *state;
};

static int lz4_compress(sqw_compressor_t *base, const uint8_t *in,
			size_t in_len, uint8_t *out, size_t out_max)
{
	struct lz4_comp *c = (struct lz4_comp *)base;
	size_t limit = sqw_comp_out_limit(in_len, out_max);
	int ret;

	if (limit == 0 || in_len > LZ4_MAX_INPUT_SIZE)
		return 0;
	/* Both return 0 when the block does not fit in limit bytes. */
	if (base->cfg.opt.lz4.hc)
		ret = LZ4_compress_HC_extStateHC(c->state, (const char *)in,
						 (char *)out, (int)in_len,
						 (int)limit, base->cfg.level);
	else
		ret = LZ4_compress_fast_extState(c->state, (const char *)in,
						 (char *)out, (int)in_len,
						 (int)limit, 1);
	return ret > 0 ? ret : 0;
}

static int lz4_decompress(sqw_compressor_t *base, const uint8_t *in,
			  size_t in_len, uint8_t *out, size_t out_max)
{
	char *big;
	int ret;

	(void)base;
	if (in_len > INT_MAX)
		return -EBADMSG;
	out_max = sqw_comp_clamp_out(out_max);
	ret = LZ4_decompress_safe((const char *)in, (char *)out, (int)in_len,
				  (int)out_max);
	if (ret >= 0)
		return ret;
	/*
	 * LZ4 reports "output too small" and "corrupt" alike: retry into a
	 * buffer of the largest block size to tell them apart.
	 */
	if (out_max >= SQW_COMP_MAX_BLOCK)
		return -EBADMSG;
	big = malloc(SQW_COMP_MAX_BLOCK);
	if (!big)
		return -ENOMEM;
	ret = LZ4_decompress_safe((const char *)in, big, (int)in_len,
				  SQW_COMP_MAX_BLOCK);
	free(big);
	return ret >= 0 ? -EOVERFLOW : -EBADMSG;
}

static void lz4_destroy(sqw_compressor_t *base)
{
	struct lz4_comp *c = (struct lz4_comp *)base;

	free(c->state);
	free(c);
}

static sqw_compressor_t *lz4_copy(const sqw_compressor_t *base)
{
	int err;

	return sqw_lz4_create(&base->cfg, &err);
}

sqw_compressor_t *sqw_lz4_create(const sqw_comp_config_t *cfg, int *err)
{
	struct lz4_comp *c = sqw_comp_alloc(sizeof(*c), cfg, err);

	if (!c)
		return NULL;
	c->base.compress = lz4_compress;
	c->base.decompress = lz4_decompress;
	c->base.copy = lz4_copy;
	c->base.destroy = lz4_destroy;
	/* malloc's alignment satisfies both state types. */
	c->state = malloc((size_t)(cfg->opt.lz4.hc ? LZ4_sizeofStateHC()
						    : LZ4_sizeofState()));
	if (!c->state) {
		*err = -ENOMEM;
		goto fail;
	}
	*err = 0;
	return &c->base;
fail:
	lz4_destroy(&c->base);
	return NULL;
}
