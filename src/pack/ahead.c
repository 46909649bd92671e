/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Compress ahead: a tar stream's files arrive in archive order, while the
 * image lays them out in canonical order, so their data is spooled and the
 * image is written after the stream ends.  The data blocks (full ones, and
 * a short last one where the image has one rather than a fragment tail)
 * need not wait for that: they go through a block processor of their own
 * as they arrive, with the writer's compressor, options and hole rule, and
 * their stored forms go to a temporary file of their own.  The writer then
 * takes them through stored_block instead of compressing again, so the
 * codec works while the producer of the stream still does, and the image
 * is the same bytes whichever way a block was made.
 *
 * Only data that arrives in order from offset 0 is compressed: each byte
 * of a member comes once, so a block is final once the stream passes it.
 * A member whose data jumps (a sparse one) is left to the writer whole.
 *
 * Threads: the block processor's workers only compute; the reading thread
 * submits, takes the results back in order and does all the I/O.  It never
 * waits for them while reading: a block that finds every job in flight is
 * left to the writer, so a fast stream is not slowed to the codec's pace
 * (the codec is busy either way, and what it did not do ahead it does at
 * the end).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pack/spool.h"
#include "pool/bp.h"
#include "util/util.h"

/*
 * Members with more data blocks are left to the writer: the index costs
 * 16 bytes a block.  2^23 blocks: 1 TiB at 128 KiB.
 */
#define AHEAD_MAX_BLOCKS (1u << 23)
#define AHEAD_NONE UINT32_MAX	/* spool_stored.word: not stored */
#define AHEAD_IN_SPOOL UINT64_MAX	/* spool_stored.pos: the raw bytes */
/*
 * Stored forms start on this boundary (the gaps are holes, which take no
 * room), so that punching one out once the writer took it frees all of its
 * pages: the file shrinks as the image grows.
 */
#define AHEAD_ALIGN 4096u

static uint64_t aligned(uint64_t x)
{
	return align_up(x, AHEAD_ALIGN);
}

struct spool_ahead {
	struct bp *bp;
	sqw_compressor_t *cmp;
	int fd;			/* the stored forms, appended */
	uint64_t end;
	uint32_t bs;
	unsigned flags;		/* SQW_OPT_*, for the data blocks' count */
	int allow_sparse;
	int off;		/* the file could not grow: nothing in it is used */
	int err;		/* sticky: a failure seen where it could not be returned */
	FILE *warn;
	struct bp_job *cur;	/* the block being filled, of cur_f */
	struct spool_file *cur_f;
};

int spool_ahead_start(struct spool *sp, const char *dir,
		      const struct sqw_image_opts *img, FILE *warn)
{
	struct spool_ahead *ah = calloc(1, sizeof(*ah));
	unsigned jobs = img->jobs, queue;
	int ret = -ENOMEM;

	if (!ah)
		return -ENOMEM;
	ah->fd = -1;
	ah->bs = img->comp.block_size;
	ah->flags = img->flags;
	ah->allow_sparse = !(img->flags & SQW_OPT_NO_SPARSE);
	ah->warn = warn;
	ah->fd = spool_tmpfile(dir);
	if (ah->fd < 0) {
		ret = ah->fd;
		goto fail;
	}
	ah->cmp = sqw_compressor_create(&img->comp, &ret);
	if (!ah->cmp)
		goto fail;
	/* As the writer's default: 4 MiB of input keeps the workers busy. */
	queue = img->queue ? img->queue : (4u << 20) / ah->bs;
	if (queue < 4 * (jobs ? jobs : 1))
		queue = 4 * (jobs ? jobs : 1);
	ah->bp = bp_create(jobs, queue, ah->cmp, ah->bs, &ret);
	if (!ah->bp)
		goto fail;
	sp->ah = ah;
	return 0;
fail:
	spool_ahead_destroy(ah);
	return ret;
}

void spool_ahead_destroy(struct spool_ahead *ah)
{
	if (!ah)
		return;
	if (ah->cur)
		bp_release(ah->bp, ah->cur);
	bp_destroy(ah->bp);
	sqw_compressor_destroy(ah->cmp);
	if (ah->fd >= 0)
		close(ah->fd);
	free(ah);
}

/*
 * Out of room for stored forms: drop them all, so that the spool and the
 * image get the space back, and leave every block to the writer.
 */
static void turn_off(struct spool_ahead *ah, int code)
{
	if (ah->off)
		return;
	ah->off = 1;
	if (ftruncate(ah->fd, 0) == 0)
		ah->end = 0;
	if (ah->warn)
		pack_warn(ah->warn, "compressing while reading stopped: %s; "
			"the blocks are compressed after the archive ends\n",
			strerror(-code));
}

int spool_ahead_give_way(struct spool_ahead *ah, int code)
{
	if (ah->off || !ah->end || (code != -ENOSPC && code != -EDQUOT))
		return 0;
	turn_off(ah, code);
	return 1;
}

/* A finished block: appended and indexed if its file still wants it. */
static int record(struct spool_ahead *ah, struct bp_job *j)
{
	struct spool_file *f = (struct spool_file *)(uintptr_t)j->node;
	struct spool_stored *s;
	int ret;

	f->inflight--;
	if (j->err || ah->off || f->no_ahead)
		return 0;
	if (!f->stored) {
		uint32_t nb = (uint32_t)sqw_file_data_blocks(ah->flags, ah->bs, f->size), i;

		f->stored = alloc_array(nb, sizeof(*f->stored));
		if (!f->stored)
			return -ENOMEM;
		for (i = 0; i < nb; i++)
			f->stored[i].word = AHEAD_NONE;
		f->nstored = nb;
	}
	s = &f->stored[j->index];
	s->word = j->size_word;
	/* A block stored raw is its own bytes, which the spool has already. */
	if (!j->size_word || (j->size_word & (1u << 24))) {
		s->pos = AHEAD_IN_SPOOL;
		return 0;
	}
	ah->end = aligned(ah->end);
	ret = pwrite_all(ah->fd, j->result, j->result_len, ah->end);
	if (ret) {
		s->word = AHEAD_NONE;
		turn_off(ah, ret);
		return 0;
	}
	s->pos = ah->end;
	ah->end += j->result_len;
	return 0;
}

/* Record the blocks finished so far, without waiting for the others. */
static int reap(struct spool_ahead *ah)
{
	struct bp_job *d;
	int ret = 0;

	while (!ret && (d = bp_try_dequeue(ah->bp))) {
		ret = record(ah, d);
		bp_release(ah->bp, d);
	}
	return ret;
}

/* The block being filled will not be completed (its file's data ended). */
static void drop_cur(struct spool_ahead *ah)
{
	if (ah->cur)
		bp_release(ah->bp, ah->cur);
	ah->cur = NULL;
	ah->cur_f = NULL;
}

int spool_ahead_feed(struct spool_ahead *ah, struct spool_file *f, uint64_t off,
		     const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t nb;
	int ret;

	if (ah->err)
		return ah->err;
	if (ah->cur_f != f)
		drop_cur(ah);
	if (ah->off || f->no_ahead)
		return 0;
	nb = sqw_file_data_blocks(ah->flags, ah->bs, f->size);
	if (off != f->fed || nb > AHEAD_MAX_BLOCKS) {
		f->no_ahead = 1;
		drop_cur(ah);
		return 0;
	}
	while (len) {
		uint64_t b = f->fed / ah->bs, left = f->size - b * ah->bs;
		uint32_t blen = left < ah->bs ? (uint32_t)left : ah->bs;
		uint32_t at = (uint32_t)(f->fed - b * ah->bs), n;

		if (b >= nb) {
			/* A tail for a fragment block: the writer's. */
			f->fed += len;
			break;
		}
		/* A block starts: a free job, or the writer does it. */
		if (at == 0 && !ah->cur) {
			ret = reap(ah);
			if (ret)
				return ret;
			ah->cur = bp_get_job(ah->bp);
			ah->cur_f = ah->cur ? f : NULL;
		}
		n = blen - at < len ? blen - at : (uint32_t)len;
		if (ah->cur)
			memcpy(ah->cur->in + at, p, n);
		f->fed += n;
		p += n;
		len -= n;
		if (ah->cur && at + n == blen) {
			struct bp_job *j = ah->cur;

			j->in_len = blen;
			j->allow_sparse = ah->allow_sparse;
			j->node = f;
			j->index = (uint32_t)b;
			f->inflight++;
			ah->cur = NULL;
			ah->cur_f = NULL;
			bp_submit(ah->bp, j);
		}
	}
	return 0;
}

/* Every block in flight back and recorded; the one being filled stays. */
static int wait_all(struct spool_ahead *ah)
{
	int ret;

	while (ah->bp) {
		struct bp_job *d = bp_dequeue(ah->bp);

		if (!d)
			break;
		ret = record(ah, d);
		bp_release(ah->bp, d);
		if (ret && !ah->err)
			ah->err = ret;
	}
	return ah->err;
}

/* Every block in flight recorded, and the one being filled dropped. */
static int drain(struct spool_ahead *ah)
{
	drop_cur(ah);
	return wait_all(ah);
}

void spool_ahead_forget(struct spool_ahead *ah, struct spool_file *f)
{
	if (ah->cur_f == f)
		drop_cur(ah);
	if (f->inflight)
		(void)wait_all(ah);
	f->no_ahead = 1;
}

int spool_ahead_finish(struct spool_ahead *ah)
{
	int ret = drain(ah);

	bp_destroy(ah->bp);
	ah->bp = NULL;
	sqw_compressor_destroy(ah->cmp);
	ah->cmp = NULL;
	return ret;
}

int spool_ahead_stored(struct spool_file *f, uint32_t index, void *buf, uint32_t *word)
{
	struct spool_ahead *ah = f->sp ? f->sp->ah : NULL;
	uint32_t len;
	int ret;

	if (!ah || ah->off || f->no_ahead || index >= f->nstored ||
	    f->stored[index].word == AHEAD_NONE)
		return 0;
	*word = f->stored[index].word;
	len = *word & ~(1u << 24);
	if (!len)
		return 1;
	if (f->stored[index].pos == AHEAD_IN_SPOOL) {
		ret = spool_file_read(f, (uint64_t)index * ah->bs, buf, len);
		return ret ? ret : 1;
	}
	ret = pread_all(ah->fd, buf, len, f->stored[index].pos);
	if (ret)
		return ret;
	/*
	 * The writer takes each block once (a duplicate file's are never
	 * asked for): give its room back now, best effort, and forget it.
	 */
	(void)fallocate(ah->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			(off_t)f->stored[index].pos, (off_t)aligned(len));
	f->stored[index].word = AHEAD_NONE;
	return 1;
}
