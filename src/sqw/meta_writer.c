/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "sqw/meta_writer.h"
#include "sqw/outfile.h"

void meta_writer_init(struct meta_writer *mw, sqw_compressor_t *cmp)
{
	memset(mw, 0, sizeof(*mw));
	mw->cmp = cmp;
}

void meta_writer_cleanup(struct meta_writer *mw)
{
	buf_free(&mw->out);
}

int meta_writer_flush(struct meta_writer *mw)
{
	uint8_t hdr[2];
	const uint8_t *payload = mw->block;
	size_t len = mw->fill;
	int ret;

	if (mw->fill == 0)
		return 0;
	ret = mw->cmp ? mw->cmp->compress(mw->cmp, mw->block, mw->fill,
					  mw->scratch, sizeof(mw->scratch)) : 0;
	if (ret < 0)
		return ret;
	if (ret > 0) {
		payload = mw->scratch;
		len = (size_t)ret;
		put_le16(hdr, (uint16_t)len);
	} else {
		put_le16(hdr, (uint16_t)(0x8000 | len));
	}
	ret = buf_reserve(&mw->out, len + 2);
	if (ret)
		return ret;
	buf_append(&mw->out, hdr, 2);
	buf_append(&mw->out, payload, len);
	mw->fill = 0;
	return 0;
}

int meta_writer_drain(struct meta_writer *mw, struct outfile *o)
{
	int ret = outfile_append(o, mw->out.data, mw->out.len);

	if (ret)
		return ret;
	mw->drained += mw->out.len;
	mw->out.len = 0;
	return 0;
}

int meta_writer_append(struct meta_writer *mw, const void *data, size_t len)
{
	const uint8_t *p = data;

	while (len) {
		size_t n = SQW_META_SIZE - mw->fill;
		int ret;

		if (n > len)
			n = len;
		memcpy(mw->block + mw->fill, p, n);
		mw->fill += n;
		p += n;
		len -= n;
		/* Flush at exactly 8 KiB so a ref never names (k-1, 8192). */
		if (mw->fill == SQW_META_SIZE) {
			ret = meta_writer_flush(mw);
			if (ret)
				return ret;
		}
	}
	return 0;
}
