/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * zstd: one frame per block.  One-shot compression records the content size
 * and shrinks the window to fit the input (single segment when the window
 * covers it), so it stays within the kernel's max(block_size, 8192) limit.
 */
#include <zstd.h>
#include <zstd_errors.h>

#include "comp/internal.h"

struct zstd_comp {
	sqw_compressor_t base;
	ZSTD_CCtx *cctx;
	ZSTD_DCtx *dctx;
	/*
	 * zstd may give up when dst is smaller than ZSTD_compressBound() even
	 * though the frame would fit; compressing here makes the result
	 * independent of out_max.
	 */
	uint8_t *scratch;
	size_t scratch_cap;
};

static int zstd_compress(sqw_compressor_t *base, const uint8_t *in,
			 size_t in_len, uint8_t *out, size_t out_max)
{
	struct zstd_comp *c = (struct zstd_comp *)base;
	size_t limit = sqw_comp_out_limit(in_len, out_max);
	size_t ret;

	if (limit == 0)
		return 0;
	if (sqw_comp_scratch(&c->scratch, &c->scratch_cap,
			     ZSTD_compressBound(in_len)))
		return -ENOMEM;
	/* Ignores any advanced parameters: output depends on level only. */
	ret = ZSTD_compressCCtx(c->cctx, c->scratch, c->scratch_cap, in, in_len,
				base->cfg.level);
	if (!ZSTD_isError(ret)) {
		if (ret > limit)
			return 0;
		memcpy(out, c->scratch, ret);
		return (int)ret;
	}
	switch (ZSTD_getErrorCode(ret)) {
	case ZSTD_error_dstSize_tooSmall:
		return 0;
	case ZSTD_error_memory_allocation:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

static int zstd_decompress(sqw_compressor_t *base, const uint8_t *in,
			   size_t in_len, uint8_t *out, size_t out_max)
{
	struct zstd_comp *c = (struct zstd_comp *)base;
	size_t ret;

	ret = ZSTD_decompressDCtx(c->dctx, out, sqw_comp_clamp_out(out_max),
				  in, in_len);
	if (!ZSTD_isError(ret))
		return (int)ret;
	switch (ZSTD_getErrorCode(ret)) {
	case ZSTD_error_dstSize_tooSmall:
		return -EOVERFLOW;
	case ZSTD_error_memory_allocation:
		return -ENOMEM;
	default:
		return -EBADMSG;
	}
}

static void zstd_destroy(sqw_compressor_t *base)
{
	struct zstd_comp *c = (struct zstd_comp *)base;

	ZSTD_freeCCtx(c->cctx);
	ZSTD_freeDCtx(c->dctx);
	free(c->scratch);
	free(c);
}

static sqw_compressor_t *zstd_copy(const sqw_compressor_t *base)
{
	int err;

	return sqw_zstd_create(&base->cfg, &err);
}

sqw_compressor_t *sqw_zstd_create(const sqw_comp_config_t *cfg, int *err)
{
	struct zstd_comp *c = sqw_comp_alloc(sizeof(*c), cfg, err);

	if (!c)
		return NULL;
	c->base.compress = zstd_compress;
	c->base.decompress = zstd_decompress;
	c->base.copy = zstd_copy;
	c->base.destroy = zstd_destroy;
	c->cctx = ZSTD_createCCtx();
	c->dctx = ZSTD_createDCtx();
	if (!c->cctx || !c->dctx) {
		*err = -ENOMEM;
		goto fail;
	}
	*err = 0;
	return &c->base;
fail:
	zstd_destroy(&c->base);
	return NULL;
}
