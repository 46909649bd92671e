/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <fcntl.h>

#include "sqw/outfile.h"

#define OUT_BUF (1u << 20)
#define OUT_WRITEBACK (8u << 20)

int outfile_init(struct outfile *o, int fd, uint64_t start)
{
	memset(o, 0, sizeof(*o));
	o->fd = fd;
	o->pos = o->flushed = o->started = start;
	o->cap = OUT_BUF;
	o->buf = malloc(o->cap);
	return o->buf ? 0 : -ENOMEM;
}

void outfile_cleanup(struct outfile *o)
{
	free(o->buf);
	o->buf = NULL;
}

/*
 * The image is fsync'ed before it is published: starting write-back every
 * 8 MiB lets the disk work while blocks compress, and leaves that fsync
 * little to wait for.  Only a hint: errors show up at the fsync.
 */
static void start_writeback(struct outfile *o)
{
	if (o->flushed - o->started < OUT_WRITEBACK)
		return;
	(void)sync_file_range(o->fd, (off_t)o->started,
			      (off_t)(o->flushed - o->started),
			      SYNC_FILE_RANGE_WRITE);
	o->started = o->flushed;
}

int outfile_flush(struct outfile *o)
{
	int ret;

	if (!o->fill)
		return 0;
	ret = pwrite_all(o->fd, o->buf, o->fill, o->flushed);
	if (ret)
		return ret;
	o->flushed += o->fill;
	o->fill = 0;
	start_writeback(o);
	return 0;
}

int outfile_append(struct outfile *o, const void *data, size_t len)
{
	int ret;

	if (len == 0)
		return 0;
	if (len >= o->cap) {
		/* Large blocks bypass the buffer: one copy fewer. */
		ret = outfile_flush(o);
		if (ret)
			return ret;
		ret = pwrite_all(o->fd, data, len, o->flushed);
		if (ret)
			return ret;
		o->flushed += len;
		o->pos += len;
		start_writeback(o);
		return 0;
	}
	if (o->fill + len > o->cap) {
		ret = outfile_flush(o);
		if (ret)
			return ret;
	}
	memcpy(o->buf + o->fill, data, len);
	o->fill += len;
	o->pos += len;
	return 0;
}

int outfile_read(struct outfile *o, uint64_t off, void *dst, size_t len)
{
	int ret = outfile_flush(o);

	if (ret)
		return ret;
	return pread_all(o->fd, dst, len, off);
}
