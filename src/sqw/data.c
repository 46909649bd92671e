/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The data pass: file contents in canonical order go through the block
 * processor and land in the image in submission order.  Whole files and
 * tails are deduplicated; only sizes shared by several files are hashed,
 * and a hash match is confirmed byte for byte before sharing.
 */
#include <xxhash.h>

#include "sqw/writer_i.h"

static int src_open(struct writer *w, size_t k, void **h)
{
	int ret = w->ops->open(w->src_ctx, w->files[k].src, h);

	return ret ? writer_fail_file(w, ret, "opening", k) : 0;
}

static int src_read(struct writer *w, size_t k, void *h, uint64_t off,
		    void *buf, size_t len)
{
	int ret = w->ops->read(h, off, buf, len);

	return ret ? writer_fail_file(w, ret, "reading", k) : 0;
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

		w->blockw[f->blk + j->index] = j->size_word;
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
	ret = outfile_append(&w->out, j->result, j->result_len);
	return ret ? writer_fail(w, ret, "writing the image", NULL) : 0;
}

static int get_job(struct writer *w, struct bp_job **out)
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

static void be128(XXH128_hash_t h, uint8_t out[16])
{
	int i;

	for (i = 0; i < 8; i++) {
		out[i] = (uint8_t)(h.high64 >> (56 - 8 * i));
		out[8 + i] = (uint8_t)(h.low64 >> (56 - 8 * i));
	}
}

static void tail_digest_of(const uint8_t *tail, uint32_t len, uint8_t digest[16])
{
	be128(XXH3_128bits_withSeed(tail, len, len), digest);
}

static uint64_t be64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static uint32_t tail_len(const struct writer *w, size_t k)
{
	return (uint32_t)(w->files[k].size % w->bs);
}

/*
 * A block's key comes from its tails' digests, not from its bytes, so a
 * block whose tails the source knows costs no reads (image.h).
 */
static int frag_key(struct writer *w, const struct frag_pend *p, uint8_t key[16])
{
	XXH3_state_t *st = XXH3_createState();
	size_t i;

	if (!st)
		return writer_fail(w, -ENOMEM, "allocating", NULL);
	XXH3_128bits_reset_withSeed(st, p->len);
	for (i = 0; i < p->n; i++) {
		uint8_t len[4];

		put_le32(len, tail_len(w, p->t[i].file));
		XXH3_128bits_update(st, p->t[i].digest, 16);
		XXH3_128bits_update(st, len, 4);
	}
	be128(XXH3_128bits_digest(st), key);
	XXH3_freeState(st);
	return 0;
}

/*
 * Reading a file block by block, skipping what the source reports as a
 * hole.  Hole or not must never change the image, only the work done.
 */
struct rd {
	struct writer *w;
	size_t k;
	void *h;
	uint64_t probe;		/* offset of the last next_data() call */
	uint64_t hole_end;	/* its answer: the next data byte */
};

/* 1: [off, off+len) is a hole and buf is untouched; 0: read; <0: error. */
static int rd_block(struct rd *r, uint64_t off, size_t len, void *buf)
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

static int rd_open(struct writer *w, size_t k, struct rd *r)
{
	memset(r, 0, sizeof(*r));
	r->w = w;
	r->k = k;
	return src_open(w, k, &r->h);
}

static void rd_close(struct rd *r)
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
	ret = rd_open(w, a, &ra);
	if (ret)
		return ret;
	ret = rd_open(w, b, &rb);
	if (ret)
		goto out;
	*equal = 1;
	for (off = 0; off < size; off += w->bs) {
		size_t n = size - off < w->bs ? (size_t)(size - off) : w->bs;

		ret = ha = rd_block(&ra, off, n, w->rbuf);
		if (ret >= 0)
			ret = hb = rd_block(&rb, off, n, w->rbuf2);
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
	rd_close(&rb);
	rd_close(&ra);
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

		ret = rd_block(r, off, len, w->rbuf);
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

/* The last len bytes of n (holes as zeros) into buf, from a handle of its own. */
static int tail_read(struct writer *w, size_t k, uint32_t len, uint8_t *buf)
{
	struct rd r;
	int ret;

	ret = rd_open(w, k, &r);
	if (!ret)
		ret = rd_block(&r, w->files[k].size - len, len, buf);
	rd_close(&r);
	if (ret == 1)
		memset(buf, 0, len);
	return ret < 0 ? ret : 0;
}

/* 1: j now holds the source's stored form of its fragment block. */
static int frag_stored(struct writer *w, struct bp_job *j, const uint8_t key[16])
{
	uint32_t word;
	int ret;

	if (!w->ops->stored_frag)
		return 0;
	ret = w->ops->stored_frag(w->src_ctx, key, j->in_len, j->in, &word);
	if (ret <= 0 || !word || (word & ~(1u << 24)) > w->bs)
		return 0;	/* a failed lookup only costs the compression */
	j->stored = 1;
	j->size_word = word;
	w->st->stored_frags++;
	return 1;
}

/*
 * The bytes of p's tails into j: those not read yet are read now.  With
 * keys, a tail read now must still have its digest (a file may change
 * under a rehearsal): a block that does not match its key is stale.
 */
static int frag_fill(struct writer *w, const struct frag_pend *p, struct bp_job *j)
{
	uint8_t digest[16];
	size_t i;
	int ret;

	for (i = 0; i < p->n; i++) {
		size_t k = p->t[i].file;
		uint32_t len = tail_len(w, k), at = w->files[k].frag_offset;
		uint8_t *dst = j->in + at;

		if (p->t[i].have) {
			memcpy(dst, p->buf + at, len);
			continue;
		}
		ret = tail_read(w, k, len, dst);
		if (ret)
			return ret;
		if (w->keyed) {
			tail_digest_of(dst, len, digest);
			if (memcmp(digest, p->t[i].digest, 16))
				j->stale = 1;
		}
	}
	return 0;
}

/* The pending tails of p become one fragment block. */
static int frag_emit(struct writer *w, struct frag_pend *p)
{
	struct bp_job *j;
	uint8_t key[16];
	size_t i;
	int ret;

	if (!p->len)
		return 0;
	ret = get_job(w, &j);
	if (ret)
		return ret;
	ret = array_reserve((void **)&w->frag_table, &w->frag_cap,
			    (w->frag_count + 1) * 16, 1);
	if (!ret && (w->flags & SQW_OPT_REHEARSE))
		ret = array_reserve((void **)&w->frag_keys, &w->frag_keys_cap,
				    (w->frag_count + 1) * 16, 1);
	if (ret) {
		bp_release(w->bp, j);
		return writer_fail(w, ret, "allocating", NULL);
	}
	j->kind = JOB_FRAG;
	j->node = NULL;
	j->file = 0;
	j->index = (uint32_t)w->frag_count++;
	j->in_len = p->len;
	j->allow_sparse = 0;
	j->stale = 0;
	for (i = 0; i < p->n; i++)
		w->files[p->t[i].file].frag_index = j->index;
	ret = 0;
	if (w->keyed) {
		ret = frag_key(w, p, key);
		if (!ret && (w->flags & SQW_OPT_REHEARSE))
			memcpy(w->frag_keys + 16 * j->index, key, 16);
	}
	if (!ret && !(w->keyed && frag_stored(w, j, key)))
		ret = frag_fill(w, p, j);
	if (ret) {
		bp_release(w->bp, j);
		return ret;
	}
	bp_submit(w->bp, j);
	p->len = 0;
	p->n = 0;
	return 0;
}

/*
 * Append the tail of n to p (its bytes, or NULL to read them only if the
 * block needs them); a block that cannot take it goes out first.
 */
static int pend_add(struct writer *w, struct frag_pend *p, size_t k,
		    const uint8_t *tail, const uint8_t digest[16])
{
	uint32_t len = tail_len(w, k);
	struct frag_tail *t;
	int ret;

	if (p->len + len > w->bs) {
		ret = frag_emit(w, p);
		if (ret)
			return ret;
	}
	if (tail && !p->buf && !(p->buf = malloc(w->bs)))
		return writer_fail_file(w, -ENOMEM, "allocating", k);
	ret = array_reserve((void **)&p->t, &p->cap, p->n + 1, sizeof(*p->t));
	if (ret)
		return writer_fail_file(w, ret, "allocating", k);
	if (tail)
		memcpy(p->buf + p->len, tail, len);
	w->files[k].frag_offset = p->len;
	t = &p->t[p->n++];
	t->file = (uint32_t)k;
	t->have = tail != NULL;
	if (w->keyed)
		memcpy(t->digest, digest, 16);
	p->len += len;
	return 0;
}

/* A directory's leftover tails join its parent's, in order. */
static int pend_move(struct writer *w, struct frag_pend *from, struct frag_pend *to)
{
	size_t i;
	int ret;

	for (i = 0; i < from->n; i++) {
		const struct frag_tail *t = &from->t[i];

		ret = pend_add(w, to, t->file,
			       t->have ? from->buf + w->files[t->file].frag_offset : NULL,
			       t->digest);
		if (ret)
			return ret;
	}
	from->len = 0;
	from->n = 0;
	return 0;
}

/*
 * 1 if an earlier file's tail equals that of n: n then points at its
 * bytes.  *tail: n's tail, or NULL while unread (set if it is read here);
 * digest: with keyed blocks, made that of the bytes if they are read here
 * (a pending tail's digest must be that of the bytes it holds).
 * Only lengths shared by several tails are hashed, and a hash match is
 * confirmed byte for byte.
 */
static int tail_dedup(struct writer *w, size_t k, const uint8_t **tail,
		      uint8_t digest[16])
{
	uint32_t len = tail_len(w, k);
	uint64_t key, *slot = u64map_find(&w->tail_count, len + 1);
	struct wfile *n = &w->files[k];
	uint32_t *v;
	size_t m;
	int isnew, ret;

	if ((w->flags & SQW_OPT_NO_DEDUP) || !slot || *slot < 2)
		return 0;
	key = (w->keyed ? be64(digest) : XXH3_64bits_withSeed(*tail, len, len)) | 1;
	v = idxmap_get(&w->tail_hash, key, &isnew);
	if (!v)
		return writer_fail_file(w, -ENOMEM, "allocating", k);
	if (isnew) {
		*v = (uint32_t)k;
		return 0;
	}
	m = *v;
	if (tail_len(w, m) != len)
		return 0;
	ret = tail_read(w, m, len, w->rbuf);
	if (!ret && !*tail) {
		ret = tail_read(w, k, len, w->rbuf2);
		*tail = w->rbuf2;
		if (!ret && w->keyed)
			tail_digest_of(*tail, len, digest);
	}
	if (ret)
		return ret;
	if (memcmp(w->rbuf, *tail, len))
		return 0;
	/* m's block may still be pending: resolved after the data pass. */
	n->same = (uint32_t)m + 1;
	n->dup = 0;
	if (n->size < w->bs && w->files[m].size == n->size) {
		/* all tail: what the whole-file dedup would have found */
		w->st->dedup_files++;
		w->st->dedup_bytes += n->size;
	} else {
		w->st->dedup_tails++;
	}
	return 1;
}

/*
 * Put the tail of n into a fragment block, unless an equal one exists.
 * r: n's open handle, or NULL (it is opened only if the tail must be read).
 */
static int tail_add(struct writer *w, size_t k, struct rd *r, unsigned level)
{
	const struct wfile *n = &w->files[k];
	uint32_t len = tail_len(w, k);
	const uint8_t *tail = NULL;
	uint8_t digest[16];
	uint64_t token = 0;
	int ret = 0;

	w->st->progress_bytes += len;
	if (w->keyed && w->ops->tail_digest)
		ret = w->ops->tail_digest(w->src_ctx, n->src, n->size, len, digest, &token);
	if (ret < 0)
		return writer_fail_file(w, ret, "reading", k);
	if (!ret) {
		/* The source does not know it: read it now. */
		ret = r ? rd_block(r, n->size - len, len, w->rbuf2) :
			  tail_read(w, k, len, w->rbuf2);
		if (ret < 0)
			return ret;
		if (ret == 1)
			memset(w->rbuf2, 0, len);
		tail = w->rbuf2;
		if (w->keyed) {
			tail_digest_of(tail, len, digest);
			if (w->ops->tail_seen)
				w->ops->tail_seen(w->src_ctx, n->src, n->size, len, digest,
						  token);
		}
	}
	ret = tail_dedup(w, k, &tail, digest);
	if (ret)
		return ret < 0 ? ret : 0;
	return pend_add(w, &w->pend[level], k, tail, digest);
}

/* 1: j holds block b as the source stored it earlier; 0: it has none. */
static int stored_block(struct rd *r, uint32_t b, struct bp_job *j)
{
	struct writer *w = r->w;
	uint32_t word;
	int ret;

	if (!w->ops->stored_block)
		return 0;
	ret = w->ops->stored_block(r->h, b, j->in, &word);
	if (ret <= 0)
		return ret ? writer_fail_file(w, ret, "reading", r->k) : 0;
	/* A stored hole is only valid where the image may have holes. */
	if ((!word && !j->allow_sparse) || (word & ~(1u << 24)) > w->bs)
		return 0;
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

		ret = get_job(w, &j);
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
			ret = rd_block(r, off, len, j->in);
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
	/* Block numbers size / block_size must stay below UINT32_MAX. */
	return (uint64_t)UINT32_MAX * block_size - 1;
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
		return tail_add(w, k, NULL, level);
	ret = rd_open(w, k, &r);
	if (ret)
		return ret;
	ret = file_dedup(w, k, &r, &dup);
	if (ret || dup) {
		w->st->progress_bytes += size;
		goto out;
	}
	if (w->flags & SQW_OPT_REHEARSE) {
		w->st->progress_bytes += size - size % w->bs;
	} else {
		/*
		 * A duplicate takes the words of the file it matches: room for
		 * new ones only, after two for where its data starts.
		 */
		if (nblocks > UINT32_MAX - 2 - w->nblockw) {
			ret = writer_fail_file(w, -EFBIG, "too many data blocks", k);
			goto out;
		}
		ret = array_reserve((void **)&w->blockw, &w->blockw_cap,
				    (size_t)w->nblockw + 2 + nblocks, sizeof(*w->blockw));
		if (ret) {
			ret = writer_fail_file(w, ret, "allocating", k);
			goto out;
		}
		n->blk = w->nblockw + 2;
		w->nblockw += 2 + nblocks;
		wfile_set_blocks_start(w, n, UINT64_MAX);
		ret = file_blocks(w, k, nblocks, &r);
	}
	if (!ret && frag)
		ret = tail_add(w, k, &r, level);
out:
	rd_close(&r);
	return ret;
}

/* Room for every tail whose length is shared, which will be hashed. */
static int tail_hash_reserve(struct writer *w)
{
	size_t i, shared = 0;

	if (w->flags & SQW_OPT_NO_DEDUP)
		return 0;
	for (i = 0; i < w->nfiles; i++) {
		uint64_t size = w->files[i].size, *v;

		if (size && file_uses_frag(w, size) &&
		    (v = u64map_find(&w->tail_count, size % w->bs + 1)) && *v >= 2)
			shared++;
	}
	return idxmap_init(&w->tail_hash, shared);
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
				ret = pend_move(w, &w->pend[sub], &w->pend[level]);
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
	if (!w->rbuf || !w->rbuf2 || !w->pend || tail_hash_reserve(w))
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
