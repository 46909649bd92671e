/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef SQW_COMPRESSOR_H
#define SQW_COMPRESSOR_H

#include <stddef.h>
#include <stdint.h>

/*
 * SquashFS compressor ids as stored in the superblock.
 */
enum sqw_comp_id {
	SQW_COMP_GZIP = 1,
	SQW_COMP_LZMA = 2,
	SQW_COMP_LZO = 3,
	SQW_COMP_XZ = 4,
	SQW_COMP_LZ4 = 5,
	SQW_COMP_ZSTD = 6,
};

/* gzip strategy bits, as stored in the options block. */
enum {
	SQW_GZIP_DEFAULT = 0x01,
	SQW_GZIP_FILTERED = 0x02,
	SQW_GZIP_HUFFMAN = 0x04,
	SQW_GZIP_RLE = 0x08,
	SQW_GZIP_FIXED = 0x10,
};

/* xz BCJ filter bits, as stored in the options block. */
enum {
	SQW_XZ_X86 = 0x01,
	SQW_XZ_POWERPC = 0x02,
	SQW_XZ_IA64 = 0x04,
	SQW_XZ_ARM = 0x08,
	SQW_XZ_ARMTHUMB = 0x10,
	SQW_XZ_SPARC = 0x20,
	SQW_XZ_ARM64 = 0x40,
	SQW_XZ_RISCV = 0x80,
};

/* lzo algorithms, as stored in the options block. */
enum {
	SQW_LZO1X_1 = 0,
	SQW_LZO1X_1_11 = 1,
	SQW_LZO1X_1_12 = 2,
	SQW_LZO1X_1_15 = 3,
	SQW_LZO1X_999 = 4,
};

/*
 * Everything that selects a compressor's output.  Filled with defaults by
 * sqw_comp_config_init(); changed by the caller or by sqw_comp_config_parse().
 */
typedef struct sqw_comp_config {
	enum sqw_comp_id id;
	uint32_t block_size;	/* data block size of the image */
	int level;		/* codec level; meaning depends on id */
	union {
		struct {
			uint16_t window;	/* 8..15 */
			uint16_t strategies;	/* SQW_GZIP_* bits; several = try each, keep smallest */
			uint16_t zlib;		/* deflate with zlib even if libdeflate is built in */
		} gzip;
		struct {
			uint32_t dict_size;	/* 0 = block_size */
			uint32_t filters;	/* SQW_XZ_* bits; each tried, smallest kept */
			int extreme;		/* LZMA_PRESET_EXTREME */
		} xz;				/* also used by lzma (filters ignored) */
		struct {
			int hc;			/* high compression (level = HC level) */
		} lz4;
		struct {
			int algorithm;		/* SQW_LZO1X_* */
		} lzo;
	} opt;
} sqw_comp_config_t;

typedef struct sqw_compressor sqw_compressor_t;

/*
 * The ops table every back end implements.  A compressor object is used by
 * one thread at a time; a worker pool gives each worker its own copy().
 */
struct sqw_compressor {
	/*
	 * Compress in[0..in_len) into out[0..out_max).  Returns the compressed
	 * size, 0 when the result would not be smaller than in_len or does not
	 * fit in out_max (caller stores the block raw), or a negative errno.
	 */
	int (*compress)(sqw_compressor_t *c, const uint8_t *in, size_t in_len,
			uint8_t *out, size_t out_max);
	/*
	 * Decompress one block.  Returns the decompressed size or a negative
	 * errno (-EBADMSG for corrupt input, -EOVERFLOW if out_max is too small).
	 */
	int (*decompress)(sqw_compressor_t *c, const uint8_t *in, size_t in_len,
			  uint8_t *out, size_t out_max);
	sqw_compressor_t *(*copy)(const sqw_compressor_t *c);
	void (*destroy)(sqw_compressor_t *c);
	sqw_comp_config_t cfg;
};

/* Default settings for a codec (the peers' defaults). */
int sqw_comp_config_init(sqw_comp_config_t *cfg, enum sqw_comp_id id,
			 uint32_t block_size);

/*
 * Parse "NAME[:LEVEL][,KEY[=VALUE]]..." (see sqfs-pack(1)) into cfg.
 * cfg->block_size must already be set.  Returns 0, -ENOTSUP for a codec not
 * built in, or -EINVAL; on error *err points at a static message naming the
 * offending part.
 */
int sqw_comp_config_parse(sqw_comp_config_t *cfg, const char *spec,
			  uint32_t block_size, const char **err);

/*
 * Serialise the image's compressor-options payload into buf (at least 64
 * bytes).  Returns its length, or 0 when no options block is to be written.
 */
size_t sqw_comp_config_options(const sqw_comp_config_t *cfg, uint8_t *buf);

/*
 * "zstd level 15", "lz4", "lz4 hc level 12", "lzo lzo1x_1", "xz level 9
 * extreme, dict 64 KiB, bcj x86+arm", "gzip level 9, window 12, strategy
 * rle, zlib": the settings in words, without a level where the algorithm
 * has none, and every other setting that is not the default.  Returns buf
 * (cut short if len is below SQW_COMP_DESCRIBE_MAX).
 */
#define SQW_COMP_DESCRIBE_MAX 160
const char *sqw_comp_config_describe(const sqw_comp_config_t *cfg, char *buf,
				     size_t len);

/* 1 if some codec takes KEY as a setting ("window", "dict", "hc"...). */
int sqw_comp_is_key(const char *key);

/* Name <-> id.  sqw_comp_name() returns NULL for an unknown id. */
const char *sqw_comp_name(enum sqw_comp_id id);
int sqw_comp_id_from_name(const char *name);	/* -EINVAL when unknown */
int sqw_comp_available(enum sqw_comp_id id);	/* 1 if built in */
/* "gzip: libdeflate 1.14 (...); xz, lzma: liblzma 5.4.1; ...": what is built in. */
const char *sqw_comp_versions(void);

/* Create a compressor; NULL with *err set (-ENOMEM, -ENOTSUP, -EINVAL). */
sqw_compressor_t *sqw_compressor_create(const sqw_comp_config_t *cfg, int *err);

/*
 * The compressor for metadata blocks (inodes, directories, the tables), as
 * mksquashfs makes it: without the tuning meant for data (gzip strategies,
 * xz BCJ filters: a filter only a newer kernel decodes would cost whole
 * inodes, not one file's data), and for xz and lzma an 8 KiB dictionary,
 * the size of a metadata block.
 */
sqw_compressor_t *sqw_compressor_create_meta(const sqw_comp_config_t *cfg, int *err);

static inline void sqw_compressor_destroy(sqw_compressor_t *c)
{
	if (c)
		c->destroy(c);
}

#endif
