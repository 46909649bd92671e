/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The image is written with O_DIRECT where the file system allows it, in
 * aligned chunks of OUT_BUF: an image is written once and read by someone
 * else later, so keeping it in the page cache only costs a copy into pages
 * that must first be allocated (and, on VMs with free page reporting, first
 * faulted in by the host: 1.2 s/GiB measured, against 0.6 s/GiB for direct
 * writes of 4 MiB).  The publisher fsyncs the image anyway, so the disk time
 * is spent either way.  Once a direct write has worked, full buffers go to
 * writer threads (out_queue.c): the appending thread copies the next
 * buffer's worth while the disk takes the last two.
 *
 * Both modes keep one invariant: buf holds the file's bytes from `flushed`
 * (aligned to OUT_ALIGN in direct mode) to `pos`.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "sqw/outfile.h"
#include "sqw/out_queue.h"

#define OUT_BUF (2u << 20)
#define OUT_ALIGN 4096u
#define OUT_WRITEBACK (8u << 20)
/* Direct mode: buffers filled while others are written, writes at once. */
#define OUT_NBUF 3
#define OUT_WRITERS 2

int outfile_init_mode(struct outfile *o, int fd, uint64_t start, int direct)
{
	struct stat st;
	int fl;

	memset(o, 0, sizeof(*o));
	o->fd = fd;
	o->pos = o->flushed = o->started = start;
	o->cap = OUT_BUF;
	fl = fcntl(fd, F_GETFL);
	if (direct && fl >= 0 && !fstat(fd, &st) && S_ISREG(st.st_mode) &&
	    !fcntl(fd, F_SETFL, fl | O_DIRECT)) {
		o->direct = o->direct_on = 1;
		o->fl = fl & ~O_DIRECT;
	}
	o->buf = aligned_alloc(OUT_ALIGN, o->cap);
	if (!o->buf) {
		outfile_cleanup(o);
		return -ENOMEM;
	}
	if (o->direct) {
		/* Zeros up to the start; the superblock overwrites them at the end. */
		o->flushed = start & ~(uint64_t)(OUT_ALIGN - 1);
		o->fill = start - o->flushed;
		memset(o->buf, 0, o->fill);
	}
	return 0;
}

int outfile_init(struct outfile *o, int fd, uint64_t start)
{
	return outfile_init_mode(o, fd, start, 1);
}

static int set_direct(struct outfile *o, int on)
{
	if (o->direct_on == on)
		return 0;
	if (fcntl(o->fd, F_SETFL, on ? o->fl | O_DIRECT : o->fl))
		return -errno;
	o->direct_on = on;
	return 0;
}

void outfile_cleanup(struct outfile *o)
{
	if (o->q) {
		out_queue_destroy(o->q);	/* o->buf is one of its buffers */
		o->q = NULL;
	} else {
		free(o->buf);
	}
	if (o->direct)
		(void)set_direct(o, 0);
	o->buf = NULL;
}

/*
 * Buffered mode: the image is fsync'ed before it is published, so starting
 * write-back every 8 MiB lets the disk work while blocks compress and
 * leaves that fsync little to wait for.  Only a hint: errors show up at the
 * fsync.
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

/* The first len bytes of buf (a multiple of OUT_ALIGN) go to the file. */
static int write_head(struct outfile *o, size_t len)
{
	int ret;

	ret = set_direct(o, 1);
	if (!ret)
		ret = pwrite_all(o->fd, o->buf, len, o->flushed);
	if (ret == -EINVAL) {
		/* The file system takes O_DIRECT but not these writes. */
		ret = set_direct(o, 0);
		o->direct = 0;
		if (!ret)
			ret = pwrite_all(o->fd, o->buf, len, o->flushed);
	}
	if (ret)
		return ret;
	o->flushed += len;
	o->fill -= len;
	memmove(o->buf, o->buf + len, o->fill);
	/*
	 * Direct writes work here: from now on full buffers go to writer
	 * threads.  Without threads the synchronous writes go on.
	 */
	if (o->direct && !o->q && len == o->cap && !o->fill) {
		o->q = out_queue_create(o->fd, o->cap, OUT_NBUF, OUT_WRITERS, &ret);
		if (o->q) {
			free(o->buf);
			o->buf = out_queue_get(o->q);
		}
	}
	return 0;
}

/* A full buffer to the writers (direct mode with a queue). */
static int submit_full(struct outfile *o)
{
	int ret = set_direct(o, 1);	/* off only when nothing is in flight */

	if (ret)
		return ret;
	out_queue_put(o->q, o->buf, o->fill, o->flushed);
	o->flushed += o->fill;
	o->fill = 0;
	o->buf = out_queue_get(o->q);
	return o->buf ? 0 : out_queue_drain(o->q);
}

/* Every queued write done; its error, if any. */
static int drain(struct outfile *o)
{
	return o->q ? out_queue_drain(o->q) : 0;
}

int outfile_flush(struct outfile *o)
{
	int ret;

	if (o->direct) {
		size_t head = o->fill & ~(size_t)(OUT_ALIGN - 1);

		ret = drain(o);
		if (ret)
			return ret;
		ret = head ? write_head(o, head) : 0;
		if (!ret)
			ret = set_direct(o, 0);
		/* The partial tail stays buffered too: later appends extend it. */
		if (!ret && o->fill)
			ret = pwrite_all(o->fd, o->buf, o->fill, o->flushed);
		return ret;
	}
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

static int append_direct(struct outfile *o, const uint8_t *data, size_t len)
{
	size_t n;
	int ret;

	if (!o->buf)		/* a queued write failed: no buffer came back */
		return drain(o);
	while (len) {
		n = o->cap - o->fill < len ? o->cap - o->fill : len;
		memcpy(o->buf + o->fill, data, n);
		o->fill += n;
		o->pos += n;
		data += n;
		len -= n;
		if (o->fill == o->cap) {
			ret = o->q ? submit_full(o) : write_head(o, o->cap);
			if (ret)
				return ret;
		}
	}
	return 0;
}

int outfile_append(struct outfile *o, const void *data, size_t len)
{
	int ret;

	if (len == 0)
		return 0;
	if (o->direct)
		return append_direct(o, data, len);
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

int outfile_append_from(struct outfile *o, int fd, uint64_t off, size_t len, int *rd)
{
	size_t n;
	int ret;

	*rd = 0;
	if (o->direct && !o->buf)
		return drain(o);	/* a queued write failed: no buffer came back */
	if (!o->direct && o->fill + len > o->cap && (ret = outfile_flush(o)))
		return ret;
	while (len) {
		n = o->cap - o->fill < len ? o->cap - o->fill : len;
		ret = pread_all(fd, o->buf + o->fill, n, off);
		if (ret) {
			*rd = 1;
			return ret == -ENODATA ? -EIO : ret;
		}
		o->fill += n;
		o->pos += n;
		off += n;
		len -= n;
		if (o->fill == o->cap) {
			ret = !o->direct ? outfile_flush(o) :
			      o->q ? submit_full(o) : write_head(o, o->cap);
			if (ret)
				return ret;
		}
	}
	return 0;
}

int outfile_read(struct outfile *o, uint64_t off, void *dst, size_t len)
{
	uint8_t *d = dst;
	size_t n;
	int ret;

	if (off + len > o->pos)
		return -ENODATA;	/* as a short read of the file would be */
	if (!o->buf)
		return drain(o);	/* a queued write failed */
	if (off < o->flushed) {
		n = o->flushed - off < len ? o->flushed - off : len;
		ret = drain(o);
		if (!ret)
			ret = set_direct(o, 0);
		if (!ret)
			ret = pread_all(o->fd, d, n, off);
		if (ret)
			return ret;
		d += n;
		off += n;
		len -= n;
	}
	memcpy(d, o->buf + (off - o->flushed), len);
	return 0;
}
