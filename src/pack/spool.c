/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The spool: tar file data appended to one unnamed temporary file, so the
 * image can lay files out in canonical order whatever the archive order.
 * Each file is a list of extents; what no extent covers is a hole.  An
 * uncompressed archive in a regular file needs no copy: its files'
 * extents point into the archive itself (read_tar.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pack/spool.h"
#include "util/util.h"

#define SPOOL_BUF (1u << 20)

int spool_tmpfile(const char *dir)
{
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd < 0) {
		char tmpl[4200];

		/* Filesystems without O_TMPFILE: create and unlink at once. */
		snprintf(tmpl, sizeof(tmpl), "%s/.sqfs-spool-XXXXXX", dir);
		fd = mkostemp(tmpl, O_CLOEXEC);
		if (fd >= 0)
			unlink(tmpl);
	}
	return fd < 0 ? -errno : fd;
}

struct spool *spool_create(const char *dir, int *err)
{
	struct spool *sp = calloc(1, sizeof(*sp));

	if (!sp) {
		*err = -ENOMEM;
		return NULL;
	}
	sp->in_fd = -1;
	sp->fd = spool_tmpfile(dir);
	sp->buf = malloc(SPOOL_BUF);
	if (sp->fd < 0 || !sp->buf) {
		*err = sp->fd < 0 ? sp->fd : -ENOMEM;
		spool_destroy(sp);
		return NULL;
	}
	return sp;
}

void spool_destroy(struct spool *sp)
{
	if (!sp)
		return;
	/* First: it may still free spool files, which talk to ahead.c. */
	spool_rehearse_destroy(sp->rh);
	sp->rh = NULL;
	spool_ahead_destroy(sp->ah);
	if (sp->fd >= 0)
		close(sp->fd);
	free(sp->buf);
	free(sp);
}

int spool_give_way(struct spool *sp, int code)
{
	int gave = sp && sp->ah && spool_ahead_give_way(sp->ah, code);

	if (sp && (code == -ENOSPC || code == -EDQUOT) &&
	    spool_rehearse_give_way(sp->rh, code, gave))
		gave = 1;
	return gave;
}

int spool_flush(struct spool *sp)
{
	int ret;

	if (!sp->fill)
		return 0;
	ret = pwrite_all(sp->fd, sp->buf, sp->fill, sp->size - sp->fill);
	/* Out of room: the blocks compressed ahead give theirs up first. */
	if (ret && spool_give_way(sp, ret))
		ret = pwrite_all(sp->fd, sp->buf, sp->fill, sp->size - sp->fill);
	sp->fill = 0;
	return ret;
}

/* Bytes [off, off+len) of f are at pos: extend the last extent or add one. */
static int ext_add(struct spool_file *f, uint64_t off, uint64_t pos, uint64_t len)
{
	struct spool_extent *last = f->n ? &f->ext[f->n - 1] : NULL;
	int ret;

	if (last && last->off + last->len == off && last->pos + last->len == pos) {
		last->len += len;
		return 0;
	}
	if (last && off < last->off + last->len)
		f->unsorted = 1;
	ret = array_reserve((void **)&f->ext, &f->cap, f->n + 1, sizeof(*f->ext));
	if (ret)
		return ret;
	f->ext[f->n].off = off;
	f->ext[f->n].pos = pos;
	f->ext[f->n].len = len;
	f->n++;
	return 0;
}

int spool_file_in_place(struct spool_file *f, uint64_t off, uint64_t pos, uint64_t len)
{
	return len ? ext_add(f, off, pos, len) : 0;
}

int spool_file_append(struct spool *sp, struct spool_file *f, uint64_t off,
		      const void *data, size_t len)
{
	int ret;

	if (len == 0)
		return 0;
	ret = ext_add(f, off, sp->size, len);
	if (ret)
		return ret;
	while (len) {
		size_t n = SPOOL_BUF - sp->fill < len ? SPOOL_BUF - sp->fill : len;

		memcpy(sp->buf + sp->fill, data, n);
		sp->fill += n;
		sp->size += n;
		data = (const uint8_t *)data + n;
		len -= n;
		if (sp->fill == SPOOL_BUF) {
			ret = spool_flush(sp);
			if (ret)
				return ret;
		}
	}
	return 0;
}

/*
 * A member given again while the archive is read (tar -r, tar -u) frees
 * the earlier copy: its bytes in the spool are no one's, and an archive
 * of many updates must not need room for all of them.  Best effort, whole
 * pages already written; at the end (everything freed at once) nothing.
 */
static void spool_file_punch(const struct spool_file *f)
{
	const struct spool *sp = f->sp;
	uint64_t written, a, b;
	size_t i;

	if (!sp || !sp->reading || f->in_place)
		return;
	written = sp->size - sp->fill;
	for (i = 0; i < f->n; i++) {
		a = align_up(f->ext[i].pos, 4096);
		b = f->ext[i].pos + f->ext[i].len;
		b = (b < written ? b : written) & ~(uint64_t)4095;
		if (b > a)
			(void)fallocate(sp->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					(off_t)a, (off_t)(b - a));
	}
}

void spool_file_free(void *p)
{
	struct spool_file *f = p;

	/* A rehearsal may still read it: it goes once that one is done. */
	if (spool_rehearse_drop(f))
		return;
	/* Its blocks still in flight are recorded into it: wait for them. */
	if (f->sp && f->sp->ah)
		spool_ahead_forget(f->sp->ah, f);
	spool_file_punch(f);
	free(f->stored);
	free(f->ext);
	free(f);
}

static int sp_open(void *ctx, void *src, void **handle)
{
	(void)ctx;
	*handle = src;
	return 0;
}

/*
 * The first extent that ends after off, when the extents are sorted and
 * disjoint (always, unless a hostile sparse map says otherwise): a file
 * with a huge sparse map must not cost extents x blocks.
 */
static size_t ext_first(const struct spool_file *f, uint64_t off)
{
	size_t lo = 0, hi = f->n;

	if (f->unsorted)
		return 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->ext[mid].off + f->ext[mid].len <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int spool_file_read(void *handle, uint64_t off, void *buf, size_t len)
{
	struct spool_file *f = handle;
	uint8_t *p = buf;
	size_t i;

	memset(buf, 0, len);
	for (i = ext_first(f, off); i < f->n; i++) {
		const struct spool_extent *e = &f->ext[i];
		uint64_t a = off > e->off ? off : e->off;
		uint64_t b = off + len < e->off + e->len ? off + len : e->off + e->len;
		int ret;

		if (!f->unsorted && e->off >= off + len)
			break;
		if (a >= b)
			continue;
		ret = pread_all(f->in_place ? f->sp->in_fd : f->sp->fd, p + (a - off),
				(size_t)(b - a), e->pos + (a - e->off));
		if (ret)
			return ret;
	}
	return 0;
}

static int64_t sp_next_data(void *handle, uint64_t off)
{
	struct spool_file *f = handle;
	uint64_t best = f->size > off ? f->size : off;
	size_t i;

	for (i = ext_first(f, off); i < f->n; i++) {
		const struct spool_extent *e = &f->ext[i];

		if (e->off + e->len > off) {
			uint64_t d = e->off > off ? e->off : off;

			if (d < best)
				best = d;
			if (!f->unsorted)
				break;
		}
	}
	return (int64_t)best;
}

static int sp_stored_block(void *handle, uint32_t index, void *buf, uint32_t *word)
{
	return spool_ahead_stored(handle, index, buf, word);
}

static void sp_close(void *handle)
{
	(void)handle;
}

const struct sqw_source_ops spool_source_ops = {
	.open = sp_open,
	.read = spool_file_read,
	.next_data = sp_next_data,
	.stored_block = sp_stored_block,
	.close = sp_close,
};
