/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Metadata stream cut into 8 KiB md blocks, kept in memory until placed (or
 * handed to the image as it grows, meta_writer_drain()).
 */
#ifndef SQW_META_WRITER_H
#define SQW_META_WRITER_H

#include "sqw/compressor.h"
#include "util/util.h"

#define SQW_META_SIZE 8192

struct meta_writer {
	sqw_compressor_t *cmp;
	uint8_t block[SQW_META_SIZE];
	size_t fill;
	struct buf out;		/* finished md blocks: u16 header + payload */
	uint64_t drained;	/* bytes of the stream already handed on */
	uint8_t scratch[SQW_META_SIZE];
};

void meta_writer_init(struct meta_writer *mw, sqw_compressor_t *cmp);
void meta_writer_cleanup(struct meta_writer *mw);
int meta_writer_append(struct meta_writer *mw, const void *data, size_t len);
/* Close the partial block, if any. */
int meta_writer_flush(struct meta_writer *mw);
struct outfile;
/* Append the finished md blocks to o, which must receive the whole stream. */
int meta_writer_drain(struct meta_writer *mw, struct outfile *o);

/* Where the next byte lands: md block position within the stream. */
static inline uint32_t meta_writer_block(const struct meta_writer *mw)
{
	return (uint32_t)(mw->drained + mw->out.len);
}

static inline uint16_t meta_writer_offset(const struct meta_writer *mw)
{
	return (uint16_t)mw->fill;
}

/* The 64-bit reference of the next byte. */
static inline uint64_t meta_writer_ref(const struct meta_writer *mw)
{
	return ((mw->drained + mw->out.len) << 16) | mw->fill;
}

#endif
