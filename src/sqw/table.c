/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "sqw/meta_writer.h"
#include "sqw/table.h"

int table_write_stream(struct outfile *o, const struct buf *stream,
		       uint64_t *start)
{
	*start = o->pos;
	return outfile_append(o, stream->data, stream->len);
}

int table_write(struct outfile *o, sqw_compressor_t *cmp, const void *data,
		size_t len, uint64_t *start)
{
	return table_write_hdr(o, cmp, data, len, NULL, 0, start);
}

int table_write_hdr(struct outfile *o, sqw_compressor_t *cmp, const void *data,
		    size_t len, const void *hdr, size_t hdr_len, uint64_t *start)
{
	struct meta_writer *mw = malloc(sizeof(*mw));
	size_t nblocks = (len + SQW_META_SIZE - 1) / SQW_META_SIZE, i;
	uint64_t base = o->pos, *pos = NULL;
	uint8_t *idx = NULL;
	int ret = -ENOMEM;

	if (!mw)
		return -ENOMEM;
	meta_writer_init(mw, cmp);
	pos = alloc_array(nblocks, sizeof(*pos));
	idx = alloc_array(nblocks, 8);
	if (!pos || !idx)
		goto out;
	for (i = 0; i < nblocks; i++) {
		size_t off = i * SQW_META_SIZE;
		size_t n = len - off < SQW_META_SIZE ? len - off : SQW_META_SIZE;

		pos[i] = base + meta_writer_block(mw);
		ret = meta_writer_append(mw, (const uint8_t *)data + off, n);
		if (ret)
			goto out;
	}
	ret = meta_writer_flush(mw);
	if (ret)
		goto out;
	ret = outfile_append(o, mw->out.data, mw->out.len);
	if (ret)
		goto out;
	for (i = 0; i < nblocks; i++)
		put_le64(idx + 8 * i, pos[i]);
	*start = o->pos;
	ret = outfile_append(o, hdr, hdr_len);
	if (!ret)
		ret = outfile_append(o, idx, nblocks * 8);
out:
	free(idx);
	free(pos);
	meta_writer_cleanup(mw);
	free(mw);
	return ret;
}
