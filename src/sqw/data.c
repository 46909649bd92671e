/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The data pass: file contents in canonical order go through the block
 * processor and land in the image in submission order.  Whole files and
 * tails are deduplicated; only sizes shared by several files are hashed,
 * and a hash match is confirmed byte for byte before sharing.
 */
#include <xxhash.h>

#include "sqw/writer_i.h"

static int src_open(struct writer *w, sqw_node_t *n, void **h)
{
	int ret = w->ops->open(w->src_ctx, n->src, h);

	return ret ? writer_fail(w, ret, "opening", n) : 0;
}

static int src_read(struct writer *w, sqw_node_t *n, void *h, uint64_t off,
		    void *buf, size_t len)
{
	int ret = w->ops->read(h, off, buf, len);

	return ret ? writer_fail(w, ret, "reading", n) : 0;
}

static int uses_frag(unsigned flags, uint32_t bs, uint64_t size)
{
	if (flags & SQW_OPT_NO_FRAGMENTS || size % bs == 0)
		return 0;
	return size < bs || (flags & SQW_OPT_ALWAYS_FRAGMENTS);
}

static int file_uses_frag(const struct writer *w, uint64_t size)
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
	sqw_node_t *n = j->node;
	int ret;

	if (j->err)
		return writer_fail(w, j->err, "compressing", n);
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
		n->blocks[j->index] = j->size_word;
		if (j->size_word == 0) {
			n->sparse += j->in_len;
			w->st->sparse_bytes += j->in_len;
			return 0;
		}
		/* The first stored block fixes blocks_start; holes add 0. */
		if (n->blocks_start == UINT64_MAX)
			n->blocks_start = w->out.pos;
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

static uint32_t tail_len(const struct writer *w, const sqw_node_t *n)
{
	return (uint32_t)(n->a.size % w->bs);
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

		put_le32(len, tail_len(w, p->t[i].node));
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
	sqw_node_t *n;
	void *h;
	uint64_t probe;		/* offset of the last next_data() call */
	uint64_t hole_end;	/* its answer: the next data byte */
};

/* 1: [off, off+len) is a hole and buf is untouched; 0: read; <0: error. */
static int rd_block(struct rd *r, uint64_t off, size_t len, void *buf)
{
	struct writer *w = r->w;

	if (w->ops->next_data) {
		/* [probe, hole_end) is known to be a hole */
		if (off < r->probe || r->hole_end <= off) {
			int64_t d = w->ops->next_data(r->h, off);

			if (d < 0)
				return writer_fail(w, (int)d, "reading", r->n);
			r->probe = off;
			r->hole_end = (uint64_t)d;
		}
		if (r->hole_end >= off + len)
			return 1;
	}
	return src_read(w, r->n, r->h, off, buf, len);
}

static int rd_open(struct writer *w, sqw_node_t *n, struct rd *r)
{
	memset(r, 0, sizeof(*r));
	r->w = w;
	r->n = n;
	return src_open(w, n, &r->h);
}

static void rd_close(struct rd *r)
{
	if (r->h)
		r->w->ops->close(r->h);
	r->h = NULL;
}

/* Compare the whole contents of two files of equal size. */
static int files_equal(struct writer *w, sqw_node_t *a, sqw_node_t *b,
		       int *equal)
{
	struct rd ra, rb;
	uint64_t off;
	int ret, ha, hb;

	*equal = 0;
	ret = rd_open(w, a, &ra);
	if (ret)
		return ret;
	ret = rd_open(w, b, &rb);
	if (ret)
		goto out;
	*equal = 1;
	for (off = 0; off < a->a.size; off += w->bs) {
		size_t n = a->a.size - off < w->bs ? (size_t)(a->a.size - off) : w->bs;

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
static int file_dedup(struct writer *w, sqw_node_t *n, struct rd *r, int *dup)
{
	XXH3_state_t *st;
	uint64_t off, key, *slot;
	int isnew, ret = 0, equal;

	*dup = 0;
	if (w->flags & SQW_OPT_NO_DEDUP)
		return 0;
	slot = u64map_find(&w->size_count, n->a.size + 1);
	if (!slot || *slot < 2)
		return 0;
	st = XXH3_createState();
	if (!st)
		return writer_fail(w, -ENOMEM, "allocating", n);
	XXH3_64bits_reset_withSeed(st, n->a.size);
	for (off = 0; off < n->a.size; off += w->bs) {
		size_t len = n->a.size - off < w->bs ? (size_t)(n->a.size - off) : w->bs;

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
		return writer_fail(w, -ENOMEM, "allocating", n);
	if (isnew) {
		*slot = (uint64_t)(uintptr_t)n;
		return 0;
	}
	{
		sqw_node_t *m = (sqw_node_t *)(uintptr_t)*slot;

		if (m->a.size != n->a.size)
			return 0;
		ret = files_equal(w, m, n, &equal);
		if (ret || !equal)
			return ret;
		n->dup_of = m;
		*dup = 1;
		w->st->dedup_files++;
		w->st->dedup_bytes += n->a.size;
	}
	return 0;
}

/* The last len bytes of n (holes as zeros) into buf, from a handle of its own. */
static int tail_read(struct writer *w, sqw_node_t *n, uint32_t len, uint8_t *buf)
{
	struct rd r;
	int ret;

	ret = rd_open(w, n, &r);
	if (!ret)
		ret = rd_block(&r, n->a.size - len, len, buf);
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
		sqw_node_t *n = p->t[i].node;
		uint32_t len = tail_len(w, n);
		uint8_t *dst = j->in + n->frag_offset;

		if (p->t[i].have) {
			memcpy(dst, p->buf + n->frag_offset, len);
			continue;
		}
		ret = tail_read(w, n, len, dst);
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
	j->index = (uint32_t)w->frag_count++;
	j->in_len = p->len;
	j->allow_sparse = 0;
	j->stale = 0;
	for (i = 0; i < p->n; i++)
		p->t[i].node->frag_index = j->index;
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
static int pend_add(struct writer *w, struct frag_pend *p, sqw_node_t *n,
		    const uint8_t *tail, const uint8_t digest[16])
{
	uint32_t len = tail_len(w, n);
	struct frag_tail *t;
	int ret;

	if (p->len + len > w->bs) {
		ret = frag_emit(w, p);
		if (ret)
			return ret;
	}
	if (tail && !p->buf && !(p->buf = malloc(w->bs)))
		return writer_fail(w, -ENOMEM, "allocating", n);
	ret = array_reserve((void **)&p->t, &p->cap, p->n + 1, sizeof(*p->t));
	if (ret)
		return writer_fail(w, ret, "allocating", n);
	if (tail)
		memcpy(p->buf + p->len, tail, len);
	n->frag_offset = p->len;
	t = &p->t[p->n++];
	t->node = n;
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

		ret = pend_add(w, to, t->node, t->have ? from->buf + t->node->frag_offset : NULL,
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
static int tail_dedup(struct writer *w, sqw_node_t *n, const uint8_t **tail,
		      uint8_t digest[16])
{
	uint32_t len = tail_len(w, n);
	uint64_t key, *slot = u64map_find(&w->tail_count, len + 1);
	sqw_node_t *m;
	int isnew, ret;

	if ((w->flags & SQW_OPT_NO_DEDUP) || !slot || *slot < 2)
		return 0;
	key = (w->keyed ? be64(digest) : XXH3_64bits_withSeed(*tail, len, len)) | 1;
	slot = u64map_get(&w->tail_hash, key, &isnew);
	if (!slot)
		return writer_fail(w, -ENOMEM, "allocating", n);
	if (isnew) {
		*slot = (uint64_t)(uintptr_t)n;
		return 0;
	}
	m = (sqw_node_t *)(uintptr_t)*slot;
	if (tail_len(w, m) != len)
		return 0;
	ret = tail_read(w, m, len, w->rbuf);
	if (!ret && !*tail) {
		ret = tail_read(w, n, len, w->rbuf2);
		*tail = w->rbuf2;
		if (!ret && w->keyed)
			tail_digest_of(*tail, len, digest);
	}
	if (ret)
		return ret;
	if (memcmp(w->rbuf, *tail, len))
		return 0;
	/* m's block may still be pending: resolved after the data pass. */
	n->tail_of = m;
	if (n->nblocks == 0 && m->a.size == n->a.size) {
		/* all tail: what the whole-file dedup would have found */
		w->st->dedup_files++;
		w->st->dedup_bytes += n->a.size;
	} else {
		w->st->dedup_tails++;
	}
	return 1;
}

/*
 * Put the tail of n into a fragment block, unless an equal one exists.
 * r: n's open handle, or NULL (it is opened only if the tail must be read).
 */
static int tail_add(struct writer *w, sqw_node_t *n, struct rd *r, unsigned level)
{
	uint32_t len = tail_len(w, n);
	const uint8_t *tail = NULL;
	uint8_t digest[16];
	uint64_t token = 0;
	int ret = 0;

	w->st->progress_bytes += len;
	if (w->keyed && w->ops->tail_digest)
		ret = w->ops->tail_digest(w->src_ctx, n->src, n->a.size, len, digest, &token);
	if (ret < 0)
		return writer_fail(w, ret, "reading", n);
	if (!ret) {
		/* The source does not know it: read it now. */
		ret = r ? rd_block(r, n->a.size - len, len, w->rbuf2) :
			  tail_read(w, n, len, w->rbuf2);
		if (ret < 0)
			return ret;
		if (ret == 1)
			memset(w->rbuf2, 0, len);
		tail = w->rbuf2;
		if (w->keyed) {
			tail_digest_of(tail, len, digest);
			if (w->ops->tail_seen)
				w->ops->tail_seen(w->src_ctx, n->src, n->a.size, len, digest,
						  token);
		}
	}
	ret = tail_dedup(w, n, &tail, digest);
	if (ret)
		return ret < 0 ? ret : 0;
	return pend_add(w, &w->pend[level], n, tail, digest);
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
		return ret ? writer_fail(w, ret, "reading", r->n) : 0;
	/* A stored hole is only valid where the image may have holes. */
	if ((!word && !j->allow_sparse) || (word & ~(1u << 24)) > w->bs)
		return 0;
	j->stored = 1;
	j->size_word = word;
	if (word)
		w->st->stored_blocks++;
	return 1;
}

static int file_blocks(struct writer *w, sqw_node_t *n, struct rd *r)
{
	uint64_t size = n->a.size, off = 0;
	uint32_t b;
	int ret;

	for (b = 0; b < n->nblocks; b++, off += w->bs) {
		size_t len = size - off < w->bs ? (size_t)(size - off) : w->bs;
		struct bp_job *j;

		ret = get_job(w, &j);
		if (ret)
			return ret;
		j->kind = JOB_DATA;
		j->node = n;
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

static int file_write(struct writer *w, sqw_node_t *n, unsigned level)
{
	uint64_t size = n->a.size;
	int frag = file_uses_frag(w, size), dup, ret;
	struct rd r;

	n->nblocks = (uint32_t)sqw_file_data_blocks(w->flags, w->bs, size);
	n->frag_index = SQW_NO_FRAG;
	n->frag_offset = 0;
	n->blocks_start = UINT64_MAX;
	n->sparse = 0;
	n->dup_of = NULL;
	n->tail_of = NULL;
	free(n->blocks);
	n->blocks = NULL;
	w->st->bytes_in += size;
	if (size == 0)
		return 0;
	if (size > sqw_file_size_max(w->bs))
		return writer_fail(w, -EFBIG, "file too large", n);
	/*
	 * All tail: the tail dedup finds what the whole-file dedup would, and
	 * the file is opened only if its tail must be read.
	 */
	if (n->nblocks == 0)
		return tail_add(w, n, NULL, level);
	n->blocks = alloc_array(n->nblocks, sizeof(uint32_t));
	if (!n->blocks)
		return writer_fail(w, -ENOMEM, "allocating", n);
	ret = rd_open(w, n, &r);
	if (ret)
		return ret;
	ret = file_dedup(w, n, &r, &dup);
	if (ret || dup) {
		w->st->progress_bytes += size;
		goto out;
	}
	if (w->flags & SQW_OPT_REHEARSE)
		w->st->progress_bytes += size - size % w->bs;
	else
		ret = file_blocks(w, n, &r);
	if (!ret && frag)
		ret = tail_add(w, n, &r, level);
out:
	rd_close(&r);
	return ret;
}

static int count_sizes(struct writer *w)
{
	size_t i, shared = 0;

	for (i = 0; i < w->nfiles; i++) {
		uint64_t size = w->files[i]->a.size, *v;
		int isnew;

		if (size == 0)
			continue;
		v = u64map_get(&w->size_count, size + 1, &isnew);
		if (!v)
			return -ENOMEM;
		(*v)++;
		if (file_uses_frag(w, size)) {
			v = u64map_get(&w->tail_count, size % w->bs + 1, &isnew);
			if (!v)
				return -ENOMEM;
			(*v)++;
		}
	}
	if (w->flags & SQW_OPT_NO_DEDUP)
		return 0;
	/* Every tail whose length is shared is hashed: size that map once. */
	for (i = 0; i < w->nfiles; i++) {
		uint64_t size = w->files[i]->a.size, *v;

		if (size && file_uses_frag(w, size) &&
		    (v = u64map_find(&w->tail_count, size % w->bs + 1)) && *v >= 2)
			shared++;
	}
	return u64map_reserve(&w->tail_hash, shared);
}

/*
 * Files in canonical order (as number() listed them: a hard-linked file at
 * its first name), directory by directory for the fragment levels.
 */
static int data_dir(struct writer *w, sqw_node_t *d, unsigned level, size_t *next)
{
	unsigned sub = level + 1 < FRAG_LEVELS ? level + 1 : level;
	size_t i;
	int ret;

	for (i = 0; i < d->nents; i++) {
		sqw_node_t *c = d->ents[i]->node;

		if (node_is_dir(c)) {
			ret = data_dir(w, c, sub, next);
			if (!ret && sub != level)
				ret = pend_move(w, &w->pend[sub], &w->pend[level]);
			if (ret)
				return ret;
			continue;
		}
		if (*next >= w->nfiles || w->files[*next] != c)
			continue;
		ret = file_write(w, c, level);
		if (ret)
			return ret;
		if (w->opts->progress && (*next & 63) == 63)
			w->opts->progress(w->opts->progress_arg, w->st);
		(*next)++;
	}
	return 0;
}

int data_write(struct writer *w, sqw_node_t *root)
{
	size_t i = 0;
	int ret;

	w->rbuf = malloc(w->bs);
	w->rbuf2 = malloc(w->bs);
	w->pend = calloc(FRAG_LEVELS, sizeof(*w->pend));
	w->keyed = w->ops->stored_frag || (w->flags & SQW_OPT_REHEARSE);
	if (!w->rbuf || !w->rbuf2 || !w->pend || count_sizes(w))
		return writer_fail(w, -ENOMEM, "allocating", NULL);
	ret = data_dir(w, root, 0, &i);
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
		sqw_node_t *n = w->files[i], *m = n->tail_of;

		if (n->blocks_start == UINT64_MAX)
			n->blocks_start = 0;
		if (m) {
			n->frag_index = m->frag_index;
			n->frag_offset = m->frag_offset;
		}
	}
	for (i = 0; i < w->nfiles; i++) {
		sqw_node_t *n = w->files[i], *m = n->dup_of;

		if (!m)
			continue;
		if (n->nblocks)
			memcpy(n->blocks, m->blocks, (size_t)n->nblocks * 4);
		n->blocks_start = m->blocks_start;
		n->frag_index = m->frag_index;
		n->frag_offset = m->frag_offset;
		n->sparse = m->sparse;
	}
	w->st->fragments = w->frag_count;
	return 0;
}

void data_cleanup(struct writer *w)
{
	u64map_free(&w->size_count);
	u64map_free(&w->tail_count);
	u64map_free(&w->file_hash);
	u64map_free(&w->tail_hash);
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
