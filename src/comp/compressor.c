/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Compressor factory and name <-> id mapping. */
#include "comp/internal.h"

#if HAVE_XZ
#include <lzma.h>
#endif
#if HAVE_ZSTD
#include <zstd.h>
#define SQW_ZSTD_MAX_LEVEL ZSTD_maxCLevel()
#else
#define SQW_ZSTD_MAX_LEVEL 22
#endif

/* Names as used by mksquashfs and on the command line, indexed by id. */
static const char *const comp_names[SQW_COMP_ZSTD + 1] = {
	[SQW_COMP_GZIP] = "gzip",
	[SQW_COMP_LZMA] = "lzma",
	[SQW_COMP_LZO] = "lzo",
	[SQW_COMP_XZ] = "xz",
	[SQW_COMP_LZ4] = "lz4",
	[SQW_COMP_ZSTD] = "zstd",
};

/* Only the back ends that were built in have a constructor. */
static const sqw_comp_create_fn comp_factories[SQW_COMP_ZSTD + 1] = {
#if HAVE_GZIP
	[SQW_COMP_GZIP] = sqw_gzip_create,
#endif
#if HAVE_XZ
	[SQW_COMP_LZMA] = sqw_lzma_create,
#endif
#if HAVE_LZO
	[SQW_COMP_LZO] = sqw_lzo_create,
#endif
#if HAVE_XZ
	[SQW_COMP_XZ] = sqw_xz_create,
#endif
#if HAVE_LZ4
	[SQW_COMP_LZ4] = sqw_lz4_create,
#endif
#if HAVE_ZSTD
	[SQW_COMP_ZSTD] = sqw_zstd_create,
#endif
};

static int comp_id_valid(enum sqw_comp_id id)
{
	return (int)id >= SQW_COMP_GZIP && (int)id <= SQW_COMP_ZSTD;
}

const char *sqw_comp_name(enum sqw_comp_id id)
{
	return comp_id_valid(id) ? comp_names[id] : NULL;
}

int sqw_comp_id_from_name(const char *name)
{
	int id;

	if (!name)
		return -EINVAL;
	for (id = SQW_COMP_GZIP; id <= SQW_COMP_ZSTD; id++) {
		if (strcmp(name, comp_names[id]) == 0)
			return id;
	}
	return -EINVAL;
}

int sqw_comp_available(enum sqw_comp_id id)
{
	return comp_id_valid(id) && comp_factories[id] != NULL;
}

/* The kernel only accepts xz dictionaries of 2^n or 3*2^n bytes. */
static int xz_dict_ok(uint32_t d)
{
	uint32_t low = d & (~d + 1);	/* lowest set bit */

	return d == low || d == 3 * low;
}

#define FAIL(msg_) do { *msg = (msg_); return -EINVAL; } while (0)

int sqw_comp_config_check(const sqw_comp_config_t *cfg, const char **msg)
{
	uint32_t bs = cfg->block_size, xz_bits = 0x3f;
	uint32_t dict = cfg->opt.xz.dict_size;

	if (bs < SQW_COMP_MIN_BLOCK || bs > SQW_COMP_MAX_BLOCK || (bs & (bs - 1)))
		FAIL("block size must be a power of 2 in 4K..1M");
	switch (cfg->id) {
	case SQW_COMP_GZIP:
		if (cfg->level < 1 || cfg->level > 9)
			FAIL("gzip level must be 1..9");
		if (cfg->opt.gzip.window < 8 || cfg->opt.gzip.window > 15)
			FAIL("gzip window must be 8..15");
		if (cfg->opt.gzip.strategies & ~0x1fu)
			FAIL("unknown gzip strategy bits");
		return 0;
	case SQW_COMP_XZ:
		if (cfg->level < 0 || cfg->level > 9)
			FAIL("xz level must be 0..9");
		if (dict && bs < 8192)
			FAIL("xz dict cannot be set with blocks under 8K");
		if (dict && (dict < 8192 || dict > bs))
			FAIL("xz dict must be 8K..block size");
		if (dict && !xz_dict_ok(dict))
			FAIL("xz dict must be 2^n or 3*2^n bytes");
		if (cfg->opt.xz.filters & ~0xffu)
			FAIL("unknown xz filter bits");
#ifdef LZMA_FILTER_ARM64
		xz_bits |= SQW_XZ_ARM64;
#endif
#ifdef LZMA_FILTER_RISCV
		xz_bits |= SQW_XZ_RISCV;
#endif
		if (cfg->opt.xz.filters & ~xz_bits) {
			*msg = "xz bcj filter not supported by this liblzma";
			return -ENOTSUP;
		}
		return 0;
	case SQW_COMP_LZMA:
		if (cfg->level < 0 || cfg->level > 9)
			FAIL("lzma level must be 0..9");
		return 0;
	case SQW_COMP_LZ4:
		if (cfg->opt.lz4.hc && (cfg->level < 1 || cfg->level > 12))
			FAIL("lz4 hc level must be 1..12");
		return 0;
	case SQW_COMP_LZO:
		if (cfg->opt.lzo.algorithm < SQW_LZO1X_1 ||
		    cfg->opt.lzo.algorithm > SQW_LZO1X_999)
			FAIL("unknown lzo algorithm");
		if (cfg->opt.lzo.algorithm == SQW_LZO1X_999 &&
		    (cfg->level < 1 || cfg->level > 9))
			FAIL("lzo level must be 1..9");
		return 0;
	case SQW_COMP_ZSTD:
		if (cfg->level < 1 || cfg->level > SQW_ZSTD_MAX_LEVEL)
			FAIL("zstd level must be 1..22");
		return 0;
	}
	FAIL("unknown compressor id");
}

sqw_compressor_t *sqw_compressor_create(const sqw_comp_config_t *cfg, int *err)
{
	const char *msg;
	int dummy, ret;

	if (!err)
		err = &dummy;
	if (!cfg || !comp_id_valid(cfg->id)) {
		*err = -EINVAL;
		return NULL;
	}
	if (!comp_factories[cfg->id]) {
		*err = -ENOTSUP;
		return NULL;
	}
	ret = sqw_comp_config_check(cfg, &msg);
	if (ret) {
		*err = ret;
		return NULL;
	}
	*err = 0;
	return comp_factories[cfg->id](cfg, err);
}

sqw_compressor_t *sqw_compressor_create_meta(const sqw_comp_config_t *cfg, int *err)
{
	sqw_comp_config_t m;

	if (!cfg)
		return sqw_compressor_create(cfg, err);
	m = *cfg;
	m.block_size = SQW_COMP_META_BLOCK;
	switch (m.id) {
	case SQW_COMP_GZIP:
		m.opt.gzip.strategies = SQW_GZIP_DEFAULT;
		break;
	case SQW_COMP_XZ:
		m.opt.xz.filters = 0;
		m.opt.xz.dict_size = 0;	/* the block size */
		break;
	default:
		break;
	}
	return sqw_compressor_create(&m, err);
}

int sqw_comp_best_of(sqw_compressor_t *c, sqw_comp_try_fn try_fn,
		     uint32_t mask, const uint8_t *in, size_t in_len,
		     uint8_t *out, size_t limit,
		     uint8_t **scratch, size_t *scratch_cap)
{
	int i, ret, best = 0;

	for (i = 0; i < 32 && (mask >> i); i++) {
		if (!(mask & (1u << i)))
			continue;
		if (best == 0) {
			ret = try_fn(c, i, in, in_len, out, limit);
		} else {
			if (sqw_comp_scratch(scratch, scratch_cap, limit))
				return -ENOMEM;
			ret = try_fn(c, i, in, in_len, *scratch, (size_t)best - 1);
			if (ret > 0)
				memcpy(out, *scratch, (size_t)ret);
		}
		if (ret < 0)
			return ret;
		if (ret > 0)
			best = ret;
	}
	return best;
}
