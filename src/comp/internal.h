/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Private glue between the compressor factory, the config code and back ends. */
#ifndef SQW_COMP_INTERNAL_H
#define SQW_COMP_INTERNAL_H

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "sqw/compressor.h"

/* Largest block a SquashFS image may hold, and the smallest. */
#define SQW_COMP_MAX_BLOCK (1024u * 1024u)
#define SQW_COMP_MIN_BLOCK 4096u
/* A metadata block, uncompressed. */
#define SQW_COMP_META_BLOCK 8192u

/* Per-codec constructors; cfg has already passed sqw_comp_config_check(). */
typedef sqw_compressor_t *(*sqw_comp_create_fn)(const sqw_comp_config_t *cfg,
						int *err);

sqw_compressor_t *sqw_gzip_create(const sqw_comp_config_t *cfg, int *err);
sqw_compressor_t *sqw_xz_create(const sqw_comp_config_t *cfg, int *err);
sqw_compressor_t *sqw_lzma_create(const sqw_comp_config_t *cfg, int *err);
sqw_compressor_t *sqw_lz4_create(const sqw_comp_config_t *cfg, int *err);
sqw_compressor_t *sqw_lzo_create(const sqw_comp_config_t *cfg, int *err);
sqw_compressor_t *sqw_zstd_create(const sqw_comp_config_t *cfg, int *err);

/*
 * Semantic validation of a complete config (ranges, xz dictionary shape,
 * supported BCJ filters).  0, -EINVAL or -ENOTSUP with *msg set.
 */
int sqw_comp_config_check(const sqw_comp_config_t *cfg, const char **msg);

/*
 * How many output bytes a compressor may produce: the result must be
 * strictly smaller than the input and fit in out_max.  0 = give up now.
 */
static inline size_t sqw_comp_out_limit(size_t in_len, size_t out_max)
{
	if (in_len <= 1 || in_len > INT_MAX)
		return 0;
	return in_len - 1 < out_max ? in_len - 1 : out_max;
}

/* The int return value must be able to carry the decompressed size. */
static inline size_t sqw_comp_clamp_out(size_t out_max)
{
	return out_max > INT_MAX ? INT_MAX : out_max;
}

/* Make sure *buf holds at least need bytes (contents not kept). */
static inline int sqw_comp_scratch(uint8_t **buf, size_t *cap, size_t need)
{
	uint8_t *p;

	if (need <= *cap)
		return 0;
	p = malloc(need);
	if (!p)
		return -ENOMEM;
	free(*buf);
	*buf = p;
	*cap = need;
	return 0;
}

/*
 * One way of compressing a block (a gzip strategy, an xz BCJ choice):
 * returns the size written to out[0..cap), 0 if it did not fit, or -errno.
 */
typedef int (*sqw_comp_try_fn)(sqw_compressor_t *c, int variant,
			       const uint8_t *in, size_t in_len,
			       uint8_t *out, size_t cap);

/*
 * Try every variant whose bit is set in mask, lowest first, and leave the
 * smallest result in out.  A later variant must be strictly smaller to win,
 * so ties go to the lower bit.  Candidates after the first use *scratch.
 */
int sqw_comp_best_of(sqw_compressor_t *c, sqw_comp_try_fn try_fn,
		     uint32_t mask, const uint8_t *in, size_t in_len,
		     uint8_t *out, size_t limit,
		     uint8_t **scratch, size_t *scratch_cap);

/* Allocate a zeroed back-end object whose first member is the ops table. */
static inline void *sqw_comp_alloc(size_t size, const sqw_comp_config_t *cfg,
				   int *err)
{
	sqw_compressor_t *c = calloc(1, size);

	if (!c) {
		*err = -ENOMEM;
		return NULL;
	}
	c->cfg = *cfg;
	return c;
}

#endif
