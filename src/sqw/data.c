/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The data pass: file contents in canonical order go through the block
 * processor and land in the image in submission order.  Whole files are
 * deduplicated (only sizes shared by several files are hashed, and a hash
 * match is confirmed byte for byte before sharing); tails go to frag.c.
 */
#include <xxhash.h>

#include "sqw/writer_i.h"

static int src_open(struct writer *w, size_t k, void **h)
{
	int ret = w->ops->open(w->src_ctx, w->files[k].src, h);

	return ret ? writer_fail_file(w, ret, writer_open_what(ret), k) : 0;
}

static int src_read(struct writer *w, size_t k, void *h, uint64_t off,
		    void *buf, size_t len)
{
	int ret = w->ops->read(h, off, buf, len);

	return ret ? writer_fail_file(w, ret, writer_read_what(ret), k) : 0;
}

static int uses_frag(unsigned flags, uint32_t bs, uint64_t size)
{
	if (flags & SQW_OPT_NO_FRAGMENTS || size % bs == 0)
		return 0;
	return size < bs || (flags & SQW_OPT_ALWAYS_FRAGMENTS);
}

int file_uses_frag(const struct writer *w, uint64_t size)
{
	return uses_frag(w->flags, w->bs, size);
}

uint64_t sqw_file_data_blocks(unsigned flags, uint32_t block_size, uint64_t size)
{
	return size / block_size +
	       (size % block_size && !uses_frag(flags, block_size, size) ? 1 : 0);
}

/*
 * A data block's size word joins its file's list.  Jobs finish in order, so
 * a file's words arrive together, its first block first: the list is made
 * then, and a hole after a hole lengthens the run.
 */
static int block_word_add(struct writer *w, const struct bp_job *j)
{
	struct wfile *f = &w->files[j->file];
	int ret;

	if (w->nblockw > UINT32_MAX - 4)
		return -EFBIG;
	ret = array_reserve((void **)&w->blockw, &w->blockw_cap,
			    (size_t)w->nblockw + 4, sizeof(*w->blockw));
	if (ret)
		return ret;
	if (j->index == 0) {
		f->blk = w->nblockw + 2;
		w->nblockw += 2;
		wfile_set_blocks_start(w, f, UINT64_MAX);
		w->blockw_run = 0;
	}
	if (j->size_word) {
		w->blockw[w->nblockw++] = j->size_word;
		w->blockw_run = 0;
	} else if (w->blockw_run) {
		w->blockw[w->blockw_run + 1]++;
	} else {
		w->blockw_run = w->nblockw;
		w->blockw[w->nblockw++] = 0;
		w->blockw[w->nblockw++] = 1;
	}
	return 0;
}

/* Hand one finished job to the image, in sequence order. */
static int job_done(struct writer *w, struct bp_job *j)
{
	int ret, isnew;

	if (j->err)
		return j->kind == JOB_DATA ?
		       writer_fail_file(w, j->err, "compressing", j->file) :
		       writer_fail(w, j->err, "compressing", NULL);
	if (j->kind == JOB_FRAG && (w->flags & SQW_OPT_REHEARSE)) {
		if (!j->stored && !j->stale && w->ops->frag_done)
			w->ops->frag_done(w->src_ctx, w->frag_keys + 16 * j->index,
					  j->result, j->size_word);
		return 0;
	}
	if (j->kind == JOB_FRAG) {
		uint8_t *e = w->frag_table + 16 * j->index;

		put_le64(e, w->out.pos);
		put_le32(e + 8, j->size_word);
		put_le32(e + 12, 0);
	} else {
		struct wfile *f = &w->files[j->file];

		ret = block_word_add(w, j);
		if (ret)
			return writer_fail_file(w, ret, ret == -EFBIG ? "too many data blocks" :
						"allocating", j->file);
		if (j->size_word == 0) {
			uint64_t *v = u64map_get(&w->sparse, (uint64_t)j->file + 1, &isnew);

			if (!v)
				return writer_fail_file(w, -ENOMEM, "allocating", j->file);
			*v += j->in_len;
			w->st->sparse_bytes += j->in_len;
			return 0;
		}
		/* The first stored block fixes blocks_start; holes add 0. */
		if (wfile_blocks_start(w, f) == UINT64_MAX)
			wfile_set_blocks_start(w, f, w->out.pos);
	}
	w->st->blocks++;
	if (j->size_word & (1u << 24))
		w->st->raw_blocks++;
	w->st->bytes_data += j->result_len;
	if (j->from_fd >= 0 && j->result_len) {
		int rd;

		ret = outfile_append_from(&w->out, j->from_fd, j->from_off, j->result_len, &rd);
		if (ret && rd)
			return j->kind == JOB_DATA ?
			       writer_fail_file(w, ret, "reading its stored blocks", j->file) :
			       writer_fail(w, ret, "reading a stored fragment block", NULL);
	} else {
		ret = outfile_append(&w->out, j->result, j->result_len);
	}
	return ret ? writer_fail(w, ret, "writing the image", NULL) : 0;
}

int data_get_job(struct writer *w, struct bp_job **out)
{
	struct bp_job *j;
	int ret;

	while (!(j = bp_get_job(w->bp))) {
		struct bp_job *d = bp_dequeue(w->bp);

		ret = job_done(w, d);
		bp_release(w->bp, d);
		if (ret)
			return ret;
	}
	j->from_fd = -1;
	*out = j;
	return 0;
}

static int drain(struct writer *w)
{
	struct bp_job *d;
	int ret = 0;

	while ((d = bp_dequeue(w->bp))) {
		if (!ret)
			ret = job_done(w, d);
		bp_release(w->bp, d);
	}
	return ret;
}

/* 1: [off, off+len) is a hole and buf is untouched; 0: read; <0: error. */
int data_rd_block(struct rd *r, uint64_t off, size_t len, void *buf)
{
	struct writer *w = r->w;

	/*
	 * A file of one block or less is read without asking: a hole there
	 * saves little, and asking costs a call per file to the one thread
	 * that reads (60 000 of them for a root file system).
	 */
	if (w->ops->next_data && w->files[r->k].size > w->bs) {
		/* [probe, hole_end) is known to be a hole */
		if (off < r->probe || r->hole_end <= off) {
			int64_t d = w->ops->next_data(r->h, off);

			if (d < 0)
				return writer_fail_file(w, (int)d, "reading", r->k);
			r->probe = off;
			r->hole_end = (uint64_t)d;
		}
		if (r->hole_end >= off + len)
			return 1;
	}
	return src_read(w, r->k, r->h, off, buf, len);
}

int data_rd_open(struct writer *w, size_t k, struct rd *r)
{
	memset(r, 0, sizeof(*r));
	r->w = w;
	r->k = k;
	return src_open(w, k, &r->h);
}

void data_rd_close(struct rd *r)
{
	if (r->h)
		r->w->ops->close(r->h);
	r->h = NULL;
}

/* Compare the whole contents of two files of equal size. */
static int files_equal(struct writer *w, size_t a, size_t b, int *equal)
{
	uint64_t size = w->files[a].size, off;
	struct rd ra, rb;
	int ret, ha, hb;

	*equal = 0;
	ret = data_rd_open(w, a, &ra);
	if (ret)
		return ret;
	ret = data_rd_open(w, b, &rb);
	if (ret)
		goto out;
	*equal = 1;
	for (off = 0; off < size; off += w->bs) {
		size_t n = size - off < w->bs ? (size_t)(size - off) : w->bs;

		ret = ha = data_rd_block(&ra, off, n, w->rbuf);
		if (ret >= 0)
			ret = hb = data_rd_block(&rb, off, n, w->rbuf2);
		if (ret < 0)
			break;
		ret = 0;
		if (ha && hb)
			continue;
		if (ha)
			memset(w->rbuf, 0, n);
		if (hb)
			memset(w->rbuf2, 0, n);
		if (memcmp(w->rbuf, w->rbuf2, n)) {
			*equal = 0;
			break;
		}
	}
out:
	data_rd_close(&rb);
	data_rd_close(&ra);
	return ret;
}

/* Whole-file dedup: 1 if n now shares an earlier identical file's data. */
static int file_dedup(struct writer *w, size_t k, struct rd *r, int *dup)
{
	struct wfile *n = &w->files[k];
	XXH3_state_t *st;
	uint64_t off, key, *slot;
	int isnew, ret = 0, equal;

	*dup = 0;
	if (w->flags & SQW_OPT_NO_DEDUP)
		return 0;
	slot = u64map_find(&w->size_count, n->size + 1);
	if (!slot || *slot < 2)
		return 0;
	st = XXH3_createState();
	if (!st)
		return writer_fail_file(w, -ENOMEM, "allocating", k);
	XXH3_64bits_reset_withSeed(st, n->size);
	for (off = 0; off < n->size; off += w->bs) {
		size_t len = n->size - off < w->bs ? (size_t)(n->size - off) : w->bs;

		static const uint8_t zero_mark[8] = { 'z', 'e', 'r', 'o' };

		ret = data_rd_block(r, off, len, w->rbuf);
		if (ret < 0)
			break;
		/* A zero block hashes alike whether read or a hole. */
		if (ret == 1 || is_zero(w->rbuf, len))
			XXH3_64bits_update(st, zero_mark, sizeof(zero_mark));
		else
			XXH3_64bits_update(st, w->rbuf, len);
		ret = 0;
	}
	key = XXH3_64bits_digest(st) | 1;
	XXH3_freeState(st);
	if (ret)
		return ret;
	slot = u64map_get(&w->file_hash, key, &isnew);
	if (!slot)
		return writer_fail_file(w, -ENOMEM, "allocating", k);
	if (isnew) {
		*slot = (uint64_t)k + 1;
		return 0;
	}
	{
		size_t m = (size_t)(*slot - 1);

		if (w->files[m].size != n->size)
			return 0;
		ret = files_equal(w, m, k, &equal);
		if (ret || !equal)
			return ret;
		n->same = (uint32_t)m + 1;
		n->dup = 1;
		*dup = 1;
		w->st->dedup_files++;
		w->st->dedup_bytes += n->size;
	}
	return 0;
}

/* 1: j holds block b as the source stored it earlier; 0: it has none. */
static int stored_block(struct rd *r, uint32_t b, struct bp_job *j)
{
	struct writer *w = r->w;
	uint32_t word;
	int ret;

	int fd = -1;
	uint64_t off = 0;

	ret = w->ops->stored_block_at ? w->ops->stored_block_at(r->h, b, &fd, &off, &word) : 0;
	if (!ret) {
		fd = -1;
		if (!w->ops->stored_block)
			return 0;
		ret = w->ops->stored_block(r->h, b, j->in, &word);
	}
	if (ret <= 0)
		return ret ? writer_fail_file(w, ret, writer_read_what(ret), r->k) : 0;
	/* A stored hole is only valid where the image may have holes. */
	if ((!word && !j->allow_sparse) || (word & ~(1u << 24)) > w->bs)
		return 0;
	j->from_fd = word ? fd : -1;
	j->from_off = off;
	j->stored = 1;
	j->size_word = word;
	if (word)
		w->st->stored_blocks++;
	return 1;
}

static int file_blocks(struct writer *w, size_t k, uint32_t nblocks, struct rd *r)
{
	uint64_t size = w->files[k].size, off = 0;
	uint32_t b;
	int ret;

	for (b = 0; b < nblocks; b++, off += w->bs) {
		size_t len = size - off < w->bs ? (size_t)(size - off) : w->bs;
		struct bp_job *j;

		ret = data_get_job(w, &j);
		if (ret)
			return ret;
		j->kind = JOB_DATA;
		j->node = NULL;
		j->file = (uint32_t)k;
		j->index = b;
		j->in_len = (uint32_t)len;
		j->allow_sparse = !(w->flags & SQW_OPT_NO_SPARSE);
		ret = stored_block(r, b, j);
		if (ret > 0) {
			bp_submit(w->bp, j);
			w->st->progress_bytes += len;
			continue;
		}
		if (!ret)
			ret = data_rd_block(r, off, len, j->in);
		if (ret < 0) {
			bp_release(w->bp, j);
			return ret;
		}
		if (ret == 1) {
			/* Hole: no read; still queued to keep block order. */
			if (j->allow_sparse)
				j->allow_sparse = BP_KNOWN_HOLE;
			else
				memset(j->in, 0, len);
		}
		bp_submit(w->bp, j);
		w->st->progress_bytes += len;
		if (w->opts->progress && (b & 63) == 63)
			w->opts->progress(w->opts->progress_arg, w->st);
	}
	return 0;
}

uint64_t sqw_file_size_max(uint32_t block_size)
{
	/*
	 * The block words of all files share one array with 32-bit indexes,
	 * two words before each file's (where its data starts): one file
	 * alone may have UINT32_MAX - 2 blocks.
	 */
	return (uint64_t)(UINT32_MAX - 2) * block_size;
}

static int file_write(struct writer *w, size_t k, unsigned level)
{
	struct wfile *n = &w->files[k];
	uint64_t size = n->size;
	uint32_t nblocks;
	int frag = file_uses_frag(w, size), dup, ret;
	struct rd r;

	n->frag_index = SQW_NO_FRAG;
	n->frag_offset = 0;
	n->blk = 0;
	n->same = 0;
	n->dup = 0;
	w->st->bytes_in += size;
	if (size == 0)
		return 0;
	if (size > sqw_file_size_max(w->bs))
		return writer_fail_file(w, -EFBIG, "file too large", k);
	nblocks = (uint32_t)sqw_file_data_blocks(w->flags, w->bs, size);
	/*
	 * All tail: the tail dedup finds what the whole-file dedup would, and
	 * the file is opened only if its tail must be read.
	 */
	if (nblocks == 0)
		return frag_tail_add(w, k, NULL, level);
	ret = data_rd_open(w, k, &r);
	if (ret)
		return ret;
	ret = file_dedup(w, k, &r, &dup);
	if (ret || dup) {
		w->st->progress_bytes += size;
		goto out;
	}
	/* A duplicate takes the words of the file it matches (after the data pass). */
	if (w->flags & SQW_OPT_REHEARSE)
		w->st->progress_bytes += size - size % w->bs;
	else
		ret = file_blocks(w, k, nblocks, &r);
	if (!ret && frag)
		ret = frag_tail_add(w, k, &r, level);
out:
	data_rd_close(&r);
	return ret;
}

/*
 * Files in canonical order (as number() listed them: a hard-linked file at
 * its first name), directory by directory for the fragment levels.
 */
static int data_dir(struct writer *w, void *dir, size_t depth, unsigned level,
		    size_t *next)
{
	unsigned sub = level + 1 < FRAG_LEVELS ? level + 1 : level;
	struct sqw_entry e;
	struct wlist *l;
	size_t i;
	int ret;

	ret = walk_list(w, dir, depth, &l);
	if (ret)
		return ret;
	for (i = 0; i < l->n; i++) {
		void *node = l->e[i].node;

		ret = walk_get(w, node, &e);
		if (ret)
			return ret;
		if (S_ISDIR(e.a.mode)) {
			ret = data_dir(w, node, depth + 1, sub, next);
			if (!ret && sub != level)
				ret = frag_pend_move(w, &w->pend[sub], &w->pend[level]);
			if (ret)
				return ret;
			continue;
		}
		if (!S_ISREG(e.a.mode))
			continue;
		ret = walk_first(w, &e, NULL);
		if (ret <= 0) {
			if (ret < 0)
				return ret;
			continue;
		}
		if (*next >= w->nfiles || w->files[*next].size != e.a.size)
			return writer_fail(w, -ESTALE, "the tree changed during the write", node);
		ret = file_write(w, *next, level);
		if (ret)
			return ret;
		if (w->opts->progress && (*next & 63) == 63)
			w->opts->progress(w->opts->progress_arg, w->st);
		(*next)++;
	}
	return 0;
}

static int sparse_copy(struct writer *w, size_t from, size_t to)
{
	uint64_t *v = u64map_find(&w->sparse, (uint64_t)from + 1), bytes;
	int isnew;

	if (!v)
		return 0;
	bytes = *v;	/* the insert below may move the map */
	v = u64map_get(&w->sparse, (uint64_t)to + 1, &isnew);
	if (!v)
		return -ENOMEM;
	*v = bytes;
	return 0;
}

int data_write(struct writer *w)
{
	size_t i = 0;
	int ret;

	w->rbuf = malloc(w->bs);
	w->rbuf2 = malloc(w->bs);
	w->pend = calloc(FRAG_LEVELS, sizeof(*w->pend));
	w->keyed = w->ops->stored_frag || (w->flags & SQW_OPT_REHEARSE);
	if (!w->rbuf || !w->rbuf2 || !w->pend || frag_tail_hash_reserve(w))
		return writer_fail(w, -ENOMEM, "allocating", NULL);
	w->pass++;
	w->dir_next = 0;
	ret = data_dir(w, w->root.node, 0, 0, &i);
	if (!ret && i != w->nfiles)
		ret = writer_fail(w, -ESTALE, "the tree changed during the write", NULL);
	if (!ret)
		ret = frag_emit(w, &w->pend[0]);
	if (ret) {
		drain(w);
		return ret;
	}
	ret = drain(w);
	if (ret)
		return ret;
	/* Shared tails, then duplicates, take the data they match. */
	for (i = 0; i < w->nfiles; i++) {
		struct wfile *n = &w->files[i];

		/* Only holes: the inode says 0 (the duplicates share the words). */
		if (n->blk && !n->dup && wfile_blocks_start(w, n) == UINT64_MAX)
			wfile_set_blocks_start(w, n, 0);
		if (n->same && !n->dup) {
			const struct wfile *m = &w->files[n->same - 1];

			n->frag_index = m->frag_index;
			n->frag_offset = m->frag_offset;
		}
	}
	for (i = 0; i < w->nfiles; i++) {
		struct wfile *n = &w->files[i];
		const struct wfile *m;

		if (!n->same || !n->dup)
			continue;
		m = &w->files[n->same - 1];
		n->blk = m->blk;
		n->frag_index = m->frag_index;
		n->frag_offset = m->frag_offset;
		if (sparse_copy(w, n->same - 1, i))
			return writer_fail(w, -ENOMEM, "allocating", NULL);
	}
	w->st->fragments = w->frag_count;
	/* What only this pass needs goes before the inode pass lists again. */
	idxmap_free(&w->tail_hash);
	u64map_free(&w->file_hash);
	u64map_free(&w->size_count);
	u64map_free(&w->tail_count);
	return 0;
}

void data_cleanup(struct writer *w)
{
	free(w->blockw);
	u64map_free(&w->sparse);
	u64map_free(&w->size_count);
	u64map_free(&w->tail_count);
	u64map_free(&w->file_hash);
	idxmap_free(&w->tail_hash);
	free(w->frag_table);
	free(w->frag_keys);
	if (w->pend) {
		unsigned i;

		for (i = 0; i < FRAG_LEVELS; i++) {
			free(w->pend[i].buf);
			free(w->pend[i].t);
		}
		free(w->pend);
	}
	free(w->rbuf);
	free(w->rbuf2);
}
