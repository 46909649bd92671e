/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Lookup tables: md blocks of fixed-size entries followed by a u64 index. */
#ifndef SQW_TABLE_H
#define SQW_TABLE_H

#include "sqw/compressor.h"
#include "sqw/outfile.h"

/*
 * Append the md blocks of data[0..len) and then their index to o.
 * *start receives the index position (what the superblock records).
 */
int table_write(struct outfile *o, sqw_compressor_t *cmp, const void *data,
		size_t len, uint64_t *start);

/* The same with hdr placed between the md blocks and the index (xattrs). */
int table_write_hdr(struct outfile *o, sqw_compressor_t *cmp, const void *data,
		    size_t len, const void *hdr, size_t hdr_len, uint64_t *start);

/* Append a finished metadata stream, returning where it starts. */
int table_write_stream(struct outfile *o, const struct buf *stream,
		       uint64_t *start);

#endif
