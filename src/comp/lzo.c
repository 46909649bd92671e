/* SPDX-License-Identifier: GPL-2.0-or-later */
/* lzo: a raw LZO1X stream per block, no lzop header. */
#include <pthread.h>

#include <lzo/lzo1x.h>

#include "comp/internal.h"

struct lzo_comp {
	sqw_compressor_t base;
	void *wrkmem;		/* the chosen algorithm's dictionary */
	uint8_t *scratch;	/* LZO has no output limit: worst case here */
	size_t scratch_cap;
};

/* Work memory needed by each SQW_LZO1X_* algorithm. */
static const size_t lzo_wrkmem_size[] = {
	[SQW_LZO1X_1] = LZO1X_1_MEM_COMPRESS,
	[SQW_LZO1X_1_11] = LZO1X_1_11_MEM_COMPRESS,
	[SQW_LZO1X_1_12] = LZO1X_1_12_MEM_COMPRESS,
	[SQW_LZO1X_1_15] = LZO1X_1_15_MEM_COMPRESS,
	[SQW_LZO1X_999] = LZO1X_999_MEM_COMPRESS,
};

static pthread_once_t lzo_once = PTHREAD_ONCE_INIT;
static int lzo_init_ret;

static void lzo_init_once(void)
{
	lzo_init_ret = lzo_init();
}

static int lzo_compress(sqw_compressor_t *base, const uint8_t *in,
			size_t in_len, uint8_t *out, size_t out_max)
{
	struct lzo_comp *c = (struct lzo_comp *)base;
	size_t limit = sqw_comp_out_limit(in_len, out_max);
	lzo_uint len = 0;
	int ret;

	if (limit == 0)
		return 0;
	/* Documented worst-case expansion of LZO1X. */
	if (sqw_comp_scratch(&c->scratch, &c->scratch_cap,
			     in_len + in_len / 16 + 64 + 3))
		return -ENOMEM;
	switch (base->cfg.opt.lzo.algorithm) {
	case SQW_LZO1X_1:
		ret = lzo1x_1_compress(in, in_len, c->scratch, &len, c->wrkmem);
		break;
	case SQW_LZO1X_1_11:
		ret = lzo1x_1_11_compress(in, in_len, c->scratch, &len, c->wrkmem);
		break;
	case SQW_LZO1X_1_12:
		ret = lzo1x_1_12_compress(in, in_len, c->scratch, &len, c->wrkmem);
		break;
	case SQW_LZO1X_1_15:
		ret = lzo1x_1_15_compress(in, in_len, c->scratch, &len, c->wrkmem);
		break;
	default:
		ret = lzo1x_999_compress_level(in, in_len, c->scratch, &len,
					       c->wrkmem, NULL, 0, NULL,
					       base->cfg.level);
		break;
	}
	if (ret != LZO_E_OK)
		return ret == LZO_E_OUT_OF_MEMORY ? -ENOMEM : -EIO;
	if (len > limit)
		return 0;
	memcpy(out, c->scratch, len);
	return (int)len;
}

static int lzo_decompress(sqw_compressor_t *base, const uint8_t *in,
			  size_t in_len, uint8_t *out, size_t out_max)
{
	lzo_uint len = sqw_comp_clamp_out(out_max);
	int ret;

	(void)base;
	ret = lzo1x_decompress_safe(in, in_len, out, &len, NULL);
	if (ret == LZO_E_OK)
		return (int)len;
	/* Includes LZO_E_INPUT_NOT_CONSUMED: trailing bytes after the stream. */
	return ret == LZO_E_OUTPUT_OVERRUN ? -EOVERFLOW : -EBADMSG;
}

static void lzo_destroy(sqw_compressor_t *base)
{
	struct lzo_comp *c = (struct lzo_comp *)base;

	free(c->wrkmem);
	free(c->scratch);
	free(c);
}

static sqw_compressor_t *lzo_copy(const sqw_compressor_t *base)
{
	int err;

	return sqw_lzo_create(&base->cfg, &err);
}

sqw_compressor_t *sqw_lzo_create(const sqw_comp_config_t *cfg, int *err)
{
	struct lzo_comp *c;

	if (pthread_once(&lzo_once, lzo_init_once) || lzo_init_ret != LZO_E_OK) {
		*err = -EIO;	/* the library was built for another ABI */
		return NULL;
	}
	c = sqw_comp_alloc(sizeof(*c), cfg, err);
	if (!c)
		return NULL;
	c->base.compress = lzo_compress;
	c->base.decompress = lzo_decompress;
	c->base.copy = lzo_copy;
	c->base.destroy = lzo_destroy;
	/* Zeroed, so no compressor ever reads uninitialised dictionary data. */
	c->wrkmem = calloc(1, lzo_wrkmem_size[cfg->opt.lzo.algorithm]);
	if (!c->wrkmem) {
		*err = -ENOMEM;
		goto fail;
	}
	*err = 0;
	return &c->base;
fail:
	lzo_destroy(&c->base);
	return NULL;
}
