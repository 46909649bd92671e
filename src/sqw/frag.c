/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fragments: the tails of files packed into fragment blocks, directory by
 * directory, in the order the data pass meets the files (data.c).  Equal
 * tails are stored once (only lengths shared by several tails are hashed,
 * and a hash match is confirmed byte for byte).  With keys, a block is
 * named by its tails' digests, so a source that compressed it ahead (the
 * mount's rehearsals) hands its stored form back without a read.
 */
#include <xxhash.h>

#include "sqw/writer_i.h"

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

/* The last len bytes of n (holes as zeros) into buf, from a handle of its own. */
static int tail_read(struct writer *w, size_t k, uint32_t len, uint8_t *buf)
{
	struct rd r;
	int ret;

	ret = data_rd_open(w, k, &r);
	if (!ret)
		ret = data_rd_block(&r, w->files[k].size - len, len, buf);
	data_rd_close(&r);
	if (ret == 1)
		memset(buf, 0, len);
	return ret < 0 ? ret : 0;
}

/* 1: j now holds the source's stored form of its fragment block. */
static int frag_stored(struct writer *w, struct bp_job *j, const uint8_t key[16])
{
	uint32_t word;
	uint64_t off = 0;
	int fd = -1, ret;

	ret = w->ops->stored_frag_at ?
	      w->ops->stored_frag_at(w->src_ctx, key, j->in_len, &fd, &off, &word) : 0;
	if (ret <= 0) {
		fd = -1;
		if (!w->ops->stored_frag)
			return 0;
		ret = w->ops->stored_frag(w->src_ctx, key, j->in_len, j->in, &word);
	}
	if (ret <= 0 || !word || (word & ~(1u << 24)) > w->bs)
		return 0;	/* a failed lookup only costs the compression */
	j->from_fd = fd;
	j->from_off = off;
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
int frag_emit(struct writer *w, struct frag_pend *p)
{
	struct bp_job *j;
	uint8_t key[16];
	size_t i;
	int ret;

	if (!p->len)
		return 0;
	ret = data_get_job(w, &j);
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
int frag_pend_move(struct writer *w, struct frag_pend *from, struct frag_pend *to)
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
int frag_tail_add(struct writer *w, size_t k, struct rd *r, unsigned level)
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
		return writer_fail_file(w, ret, writer_read_what(ret), k);
	if (!ret) {
		/* The source does not know it: read it now. */
		ret = r ? data_rd_block(r, n->size - len, len, w->rbuf2) :
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

/* Room for every tail whose length is shared, which will be hashed. */
int frag_tail_hash_reserve(struct writer *w)
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
