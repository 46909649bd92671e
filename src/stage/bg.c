/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Background compression: when the last writer of a file closes it, its data
 * blocks (full ones, and a short last one where the image has one rather
 * than a fragment) go through the same block processor as the seal, and their stored
 * form (exactly what the seal would write: same compressor, options and
 * hole rule) is appended to SPOOL/blocks.  The seal then copies those bytes
 * instead of compressing again; it still walks files in canonical order, so
 * close order never reaches the image.
 *
 * Validity: every data change bumps the node's wgen and forgets the stored
 * blocks it overlaps, both under stage->lock and after the data reached the
 * spool file.  A block is recorded only if wgen is unchanged since before it
 * was read, so a block read while a write raced with it is either forgotten
 * by that write or refused here.  A block the codec could not shrink is
 * stored as its own bytes: it is not copied to SPOOL/blocks, its entry
 * says so (BG_IN_FILE), and the seal reads it from the file's spool file,
 * which is valid for as long as the entry is.
 *
 * Threads: one thread of ours feeds a pool of its own; it takes stage->lock
 * only briefly (pick a file, record a block), never while doing I/O, and
 * never calls into the mount.  Nodes are looked up by inode number each
 * time, since they may be freed while the lock is not held.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "pool/bp.h"
#include "stage/stage.h"
#include "util/util.h"

#define BG_NONE UINT32_MAX	/* centry.word: no stored form */
#define BG_IN_FILE UINT64_MAX	/* centry.off: stored raw, in the file itself */
/*
 * Files with more full blocks are left to the seal: the store's index costs
 * 16 bytes a block (plus 4 in the work list), dense even for a sparse file,
 * and files up to 16 TiB may be staged.  2^23 blocks: 1 TiB at 128 KiB.
 */
#define BG_MAX_BLOCKS (1u << 23)
/* Backlog (bytes of queued files) at which a rehearsal gives way. */
#define BG_YIELD_BYTES (16u << 20)
/*
 * Stored blocks start on this boundary (the usual file system block), so
 * that punching a dead one frees whole blocks of SPOOL/blocks.
 */
#define BG_ALIGN 4096u

static uint64_t aligned(uint64_t x)
{
	return align_up(x, BG_ALIGN);
}

/* A queued file and the bytes it added to queued_bytes. */
struct qent {
	fuse_ino_t ino;
	uint64_t bytes;
};

struct stage_bg {
	struct stage *s;
	pthread_t thread;
	pthread_cond_t cond;	/* work queued, pause lifted, stop */
	pthread_cond_t idle;	/* the thread finished its file */
	int stop, pause, busy;	/* under stage->lock */
	int rehearsing;		/* under stage->lock */
	int interrupt;		/* atomic: stop or pause asked */
	int abandon;		/* atomic: the current file changed or went */
	struct qent *q;		/* files to compress, a ring */
	size_t qhead, qlen, qcap;
	/* owned by the thread */
	int cfd;
	uint64_t cend;
	uint64_t live;		/* atomic: stored forms in SPOOL/blocks */
	int warned;
	sqw_compressor_t *cmp;
	struct bp *bp;
	uint32_t bs;
	int allow_sparse;
	/* current file */
	fuse_ino_t ino;
	uint64_t wgen;
	uint64_t size;
	/* counters, under stage->lock */
	uint64_t queued_bytes, stored_blocks, stored_bytes;
};

static int queue_push(struct stage_bg *bg, fuse_ino_t ino, uint64_t bytes)
{
	if (bg->qlen == bg->qcap) {
		size_t n = bg->qcap ? bg->qcap * 2 : 256, i;
		struct qent *q = alloc_array(n, sizeof(*q));

		if (!q)
			return -ENOMEM;
		for (i = 0; i < bg->qlen; i++)
			q[i] = bg->q[(bg->qhead + i) % bg->qcap];
		free(bg->q);
		bg->q = q;
		bg->qcap = n;
		bg->qhead = 0;
	}
	bg->q[(bg->qhead + bg->qlen) % bg->qcap].ino = ino;
	bg->q[(bg->qhead + bg->qlen++) % bg->qcap].bytes = bytes;
	bg->queued_bytes += bytes;
	return 0;
}

/*
 * The next file; its bytes leave queued_bytes as they were counted (the
 * file may have changed size or gone meanwhile).
 */
static fuse_ino_t queue_pop(struct stage_bg *bg)
{
	struct qent e = bg->q[bg->qhead];

	bg->qhead = (bg->qhead + 1) % bg->qcap;
	bg->qlen--;
	bg->queued_bytes -= e.bytes;
	return e.ino;
}

/* The blocks the image stores for n, the store's index range. */
static uint64_t data_blocks(const struct stage *s, const struct snode *n)
{
	return sqw_file_data_blocks(s->opts.img.flags, s->opts.img.comp.block_size, n->size);
}

static int block_missing(const struct snode *n, uint64_t i)
{
	return i >= n->ncblk || n->cblk[i].word == BG_NONE;
}

/*
 * Give the disk space of dead stored blocks back (SPOOL/blocks only ever
 * grows at its end, so a file rewritten again and again would otherwise
 * leave its old blocks there until the daemon exits).  An entry owns the
 * bytes from its start to the next BG_ALIGN boundary after its end; best
 * effort.
 */
static void punch(struct stage_bg *bg, uint64_t off, uint64_t len)
{
	if (bg && len)
		(void)fallocate(bg->cfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				(off_t)off, (off_t)len);
}

/* The same for one stored block by its entry (off, size word). */
static void punch_entry(struct stage_bg *bg, uint64_t off, uint32_t word)
{
	uint32_t len = word & ~(1u << 24);

	if (bg && word != BG_NONE && len && off != BG_IN_FILE) {
		punch(bg, off, aligned(len));
		__atomic_sub_fetch(&bg->live, 1, __ATOMIC_RELAXED);
	}
}

/* A stored block goes: the status counts what the seal can still take. */
static void uncount(struct stage_bg *bg, const struct centry *c)
{
	if (!bg || c->word == BG_NONE)
		return;
	bg->stored_blocks--;
	if (c->off != BG_IN_FILE)
		bg->stored_bytes -= c->word & ~(1u << 24);
}

void stage_bg_changed(struct stage *s, struct snode *n, uint64_t off, uint64_t len)
{
	uint64_t bs = s->opts.img.comp.block_size, first, last, i, ps = 0, pe = 0, gone = 0;

	if (!S_ISREG(n->mode))
		return;
	n->wgen++;
	n->tdig_ok = 0;
	/*
	 * The file being compressed: no block still to come could be recorded
	 * (its wgen moved), and a removed file's spool file stays allocated
	 * for as long as the thread holds it open.
	 */
	if (s->bg && s->bg->busy && s->bg->ino == n->ino)
		__atomic_store_n(&s->bg->abandon, 1, __ATOMIC_RELAXED);
	if (!n->ncblk || !len)
		return;
	first = off / bs;
	last = len == UINT64_MAX || off + len < off ? n->ncblk : (off + len - 1) / bs + 1;
	if (last > n->ncblk)
		last = n->ncblk;
	for (i = first; i < last; i++) {
		struct centry *c = &n->cblk[i];
		uint64_t l = c->word & ~(1u << 24);

		uncount(s->bg, c);
		if (c->word != BG_NONE && l && c->off != BG_IN_FILE) {
			/* Runs of neighbours go in one call. */
			if (c->off != pe) {
				punch(s->bg, ps, pe - ps);
				ps = c->off;
				pe = c->off;
			}
			pe += aligned(l);
			gone++;
		}
		c->word = BG_NONE;
	}
	punch(s->bg, ps, pe - ps);
	if (s->bg && gone)
		__atomic_sub_fetch(&s->bg->live, gone, __ATOMIC_RELAXED);
	if (first == 0 && last == n->ncblk) {
		free(n->cblk);
		n->cblk = NULL;
		n->ncblk = 0;
	}
}

void stage_bg_released(struct stage *s, struct snode *n)
{
	struct stage_bg *bg = s->bg;
	uint64_t i, nb;

	if (!bg || n->bg_queued || n->bg_never || n->writers || !n->links ||
	    !S_ISREG(n->mode))
		return;
	nb = data_blocks(s, n);
	if (nb > BG_MAX_BLOCKS)
		return;
	for (i = 0; i < nb && !block_missing(n, i); i++)
		;
	if (i == nb || queue_push(bg, n->ino, n->size))
		return;
	n->bg_queued = 1;
	/*
	 * A rehearsal blocks the queue: past this backlog compression is not
	 * keeping pace, and the full blocks come first.
	 */
	if (bg->rehearsing && bg->queued_bytes > BG_YIELD_BYTES)
		__atomic_store_n(&bg->interrupt, 1, __ATOMIC_RELAXED);
	pthread_cond_signal(&bg->cond);
}

void stage_bg_queue_all(struct stage *s)
{
	size_t i;
	struct snode *n;

	for (i = 0; s->bg && i < s->islots; i++)
		for (n = s->itab[i]; n; n = n->hnext)
			stage_bg_released(s, n);
}

void stage_bg_forget(struct stage *s, struct snode *n)
{
	uint32_t i;

	if (!S_ISREG(n->mode))
		return;
	for (i = 0; i < n->ncblk; i++) {
		uncount(s->bg, &n->cblk[i]);
		punch_entry(s->bg, n->cblk[i].off, n->cblk[i].word);
	}
	free(n->cblk);
	n->cblk = NULL;
	n->ncblk = 0;
}

/* Append a stored form to SPOOL/blocks; the background thread only. */
static int append(struct stage_bg *bg, const void *data, uint32_t len, uint64_t *off)
{
	struct stage *s = bg->s;
	size_t done = 0;
	ssize_t w = 0;

	/*
	 * Nothing stored is left (every form was punched): start the file
	 * again, or its apparent size grows with every block ever stored, up
	 * to the file size limit, where storing stops for good.
	 */
	if (bg->cend && !__atomic_load_n(&bg->live, __ATOMIC_RELAXED) && !ftruncate(bg->cfd, 0))
		bg->cend = 0;
	bg->cend = aligned(bg->cend);
	/* A short write is retried: the second one says why (ENOSPC). */
	while (done < len) {
		w = pwrite(bg->cfd, (const char *)data + done, len - done,
			   (off_t)(bg->cend + done));
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	if (done < len) {
		int e = w < 0 ? errno : ENOSPC;

		/*
		 * Spool full: the seal will compress this block itself.  The
		 * part written goes, so the store takes no room for nothing.
		 */
		if (ftruncate(bg->cfd, (off_t)bg->cend) && !bg->warned)
			stage_log(s, LOG_WARNING, "truncating %s/blocks: %s", s->spool,
				  strerror(errno));
		if (!bg->warned++)
			stage_log(s, LOG_WARNING, "background compression paused a block: %s; "
				  "the seal will compress it", strerror(e));
		return -e;
	}
	if (bg->warned) {
		stage_log(s, LOG_INFO, "background compression stores blocks again");
		bg->warned = 0;
	}
	*off = bg->cend;
	bg->cend += len;
	__atomic_add_fetch(&bg->live, 1, __ATOMIC_RELAXED);
	return 0;
}

int stage_bg_append(struct stage *s, const void *data, uint32_t len, uint64_t *off)
{
	return s->bg ? append(s->bg, data, len, off) : -ENOSYS;
}

int stage_bg_read(struct stage *s, uint64_t off, void *buf, uint32_t len)
{
	if (!s->bg)
		return -ENOSYS;
	return pread(s->bg->cfd, buf, len, (off_t)off) == (ssize_t)len ? 0 : -EIO;
}

void stage_bg_punch(struct stage *s, uint64_t off, uint32_t word)
{
	punch_entry(s->bg, off, word);
}

int stage_bg_interrupted(const struct stage *s)
{
	return s->bg && __atomic_load_n(&s->bg->interrupt, __ATOMIC_RELAXED);
}

/* Record a finished block, unless its file changed since it was read. */
static void block_done(struct stage_bg *bg, struct bp_job *j)
{
	struct stage *s = bg->s;
	struct snode *n;
	uint64_t off = 0;

	if (j->err)
		return;
	if (j->size_word & (1u << 24))
		off = BG_IN_FILE;
	else if (j->size_word && append(bg, j->result, j->result_len, &off))
		return;
	pthread_mutex_lock(&s->lock);
	n = stage_get(s, bg->ino);
	if (n && S_ISREG(n->mode) && n->wgen == bg->wgen && n->links &&
	    j->index < data_blocks(s, n)) {
		if (j->index >= n->ncblk) {
			uint32_t cap = (uint32_t)data_blocks(s, n), i;
			struct centry *c = realloc(n->cblk, (size_t)cap * sizeof(*c));

			if (!c) {
				punch_entry(bg, off, j->size_word);
				goto out;
			}
			for (i = n->ncblk; i < cap; i++)
				c[i].word = BG_NONE;
			n->cblk = c;
			n->ncblk = cap;
		}
		/* A block stored twice (queued again meanwhile): keep the last. */
		uncount(bg, &n->cblk[j->index]);
		punch_entry(bg, n->cblk[j->index].off, n->cblk[j->index].word);
		n->cblk[j->index].off = off;
		n->cblk[j->index].word = j->size_word;
		bg->stored_blocks++;
		if (off != BG_IN_FILE)
			bg->stored_bytes += j->size_word & ~(1u << 24);
	} else {
		/* The file changed or went while the block was compressed. */
		punch_entry(bg, off, j->size_word);
	}
out:
	pthread_mutex_unlock(&s->lock);
}

static void drain(struct stage_bg *bg)
{
	struct bp_job *d;

	while ((d = bp_dequeue(bg->bp))) {
		block_done(bg, d);
		bp_release(bg->bp, d);
	}
}

/* Compress the listed blocks of the current file; stops early when asked. */
static void compress_blocks(struct stage_bg *bg, const uint32_t *todo, size_t ntodo)
{
	struct stage *s = bg->s;
	uint64_t hole_end = 0, probe = UINT64_MAX;
	char name[STAGE_SPOOL_NAME_SIZE];
	size_t k;
	int fd;

	fd = openat(s->datafd, stage_spool_name(name, bg->ino), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	for (k = 0; k < ntodo; k++) {
		uint64_t off = (uint64_t)todo[k] * bg->bs;
		uint32_t len = bg->size - off < bg->bs ? (uint32_t)(bg->size - off) : bg->bs;
		struct bp_job *j;

		if (__atomic_load_n(&bg->interrupt, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&bg->abandon, __ATOMIC_RELAXED))
			break;
		/*
		 * Holes are neither read nor stored: the seal's data pass finds
		 * them as cheaply (no read, no compression), while storing them
		 * cost a job and an index entry each, minutes of this thread and
		 * much memory for a sparse file of a TiB.
		 */
		if (bg->allow_sparse) {
			if (off < probe || hole_end <= off) {
				off_t d = lseek(fd, (off_t)off, SEEK_DATA);

				probe = off;
				hole_end = d < 0 ? UINT64_MAX : (uint64_t)d;
			}
			if (hole_end >= off + len && probe <= off)
				continue;
		}
		while (!(j = bp_get_job(bg->bp))) {
			struct bp_job *d = bp_dequeue(bg->bp);

			block_done(bg, d);
			bp_release(bg->bp, d);
		}
		j->index = todo[k];
		j->in_len = len;
		j->allow_sparse = bg->allow_sparse;
		if (pread(fd, j->in, len, (off_t)off) != (ssize_t)len) {
			/* Truncated meanwhile: wgen has moved on anyway. */
			bp_release(bg->bp, j);
			break;
		}
		bp_submit(bg->bp, j);
	}
	drain(bg);
	close(fd);
}

static void *bg_main(void *arg)
{
	struct stage_bg *bg = arg;
	struct stage *s = bg->s;
	uint32_t *todo = NULL;
	size_t cap = 0;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct snode *n;
		uint64_t nb, i;
		size_t ntodo = 0;
		struct timespec dl;

		while (!bg->stop && (bg->pause || !bg->qlen)) {
			/* Idle: time for a rehearsal of the seal's fragment blocks? */
			int due = bg->pause ? -1 : stage_pp_due(s, &dl);

			if (due > 0) {
				bg->busy = 1;
				bg->rehearsing = 1;
				pthread_mutex_unlock(&s->lock);
				stage_pp_rehearse(s);
				pthread_mutex_lock(&s->lock);
				bg->busy = 0;
				bg->rehearsing = 0;
				__atomic_store_n(&bg->interrupt, bg->stop || bg->pause,
						 __ATOMIC_RELAXED);
				pthread_cond_broadcast(&bg->idle);
			} else if (due == 0) {
				pthread_cond_timedwait(&bg->cond, &s->lock, &dl);
			} else {
				pthread_cond_wait(&bg->cond, &s->lock);
			}
		}
		if (bg->stop)
			break;
		n = stage_get(s, queue_pop(bg));
		if (!n || !n->bg_queued || !S_ISREG(n->mode))
			continue;
		n->bg_queued = 0;
		/* Writers: queued again at its last release; bg_never (set since): seal only. */
		if (n->writers || !n->links || n->bg_never)
			continue;
		nb = data_blocks(s, n);
		for (i = 0; i < nb; i++) {
			if (!block_missing(n, i))
				continue;
			if (ntodo == cap) {
				size_t c = cap ? cap * 2 : 1024;
				uint32_t *t = realloc(todo, c * sizeof(*t));

				if (!t)
					break;
				todo = t;
				cap = c;
			}
			todo[ntodo++] = (uint32_t)i;
		}
		bg->ino = n->ino;
		bg->wgen = n->wgen;
		bg->size = n->size;
		bg->busy = 1;
		__atomic_store_n(&bg->abandon, 0, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&s->lock);

		compress_blocks(bg, todo, ntodo);

		pthread_mutex_lock(&s->lock);
		bg->busy = 0;
		/* Interrupted by a seal: finish the file after it. */
		n = stage_get(s, bg->ino);
		if (n && bg->pause && !bg->stop)
			stage_bg_released(s, n);
		pthread_cond_broadcast(&bg->idle);
	}
	pthread_mutex_unlock(&s->lock);
	free(todo);
	return NULL;
}

int stage_bg_start(struct stage *s)
{
	struct stage_bg *bg = calloc(1, sizeof(*bg));
	const struct sqw_image_opts *o = &s->opts.img;
	unsigned queue;
	char *path = NULL;
	int ret = -ENOMEM;

	if (!bg)
		return -ENOMEM;
	bg->s = s;
	bg->cfd = -1;
	bg->bs = o->comp.block_size;
	bg->allow_sparse = !(o->flags & SQW_OPT_NO_SPARSE);
	if (asprintf(&path, "%s/blocks", s->spool) < 0)
		goto fail;
	bg->cfd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	free(path);
	if (bg->cfd < 0) {
		ret = -errno;
		goto fail;
	}
	bg->cmp = sqw_compressor_create(&o->comp, &ret);
	if (!bg->cmp)
		goto fail;
	queue = 4 * (o->jobs ? o->jobs : 1);
	bg->bp = bp_create(o->jobs, queue, bg->cmp, bg->bs, &ret);
	if (!bg->bp)
		goto fail;
	if (s->prepack && !(s->pp = stage_pp_create(s->prepack > 1))) {
		ret = -ENOMEM;
		goto fail;
	}
	pthread_cond_init(&bg->cond, NULL);
	pthread_cond_init(&bg->idle, NULL);
	/* Before the thread starts: it reaches its store through s->bg. */
	pthread_mutex_lock(&s->lock);
	s->bg = bg;
	pthread_mutex_unlock(&s->lock);
	ret = -pthread_create(&bg->thread, NULL, bg_main, bg);
	if (ret) {
		pthread_mutex_lock(&s->lock);
		s->bg = NULL;
		pthread_mutex_unlock(&s->lock);
		pthread_cond_destroy(&bg->cond);
		pthread_cond_destroy(&bg->idle);
		goto fail;
	}
	return 0;
fail:
	stage_pp_free(s, s->pp);
	s->pp = NULL;
	bp_destroy(bg->bp);
	sqw_compressor_destroy(bg->cmp);
	if (bg->cfd >= 0)
		close(bg->cfd);
	free(bg);
	return ret;
}

void stage_bg_stop(struct stage *s)
{
	struct stage_bg *bg;
	char *path = NULL;

	pthread_mutex_lock(&s->lock);
	bg = s->bg;
	if (bg) {
		bg->stop = 1;
		__atomic_store_n(&bg->interrupt, 1, __ATOMIC_RELAXED);
		pthread_cond_broadcast(&bg->cond);
	}
	pthread_mutex_unlock(&s->lock);
	if (!bg)
		return;
	pthread_join(bg->thread, NULL);
	pthread_mutex_lock(&s->lock);
	stage_pp_free(NULL, s->pp);	/* its blocks go with SPOOL/blocks */
	s->pp = NULL;
	s->bg = NULL;
	pthread_mutex_unlock(&s->lock);
	bp_destroy(bg->bp);
	sqw_compressor_destroy(bg->cmp);
	pthread_cond_destroy(&bg->cond);
	pthread_cond_destroy(&bg->idle);
	close(bg->cfd);
	if (asprintf(&path, "%s/blocks", s->spool) >= 0)
		unlink(path);
	free(path);
	free(bg->q);
	free(bg);
}

void stage_bg_pause(struct stage *s)
{
	struct stage_bg *bg = s->bg;

	if (!bg)
		return;
	bg->pause = 1;
	__atomic_store_n(&bg->interrupt, 1, __ATOMIC_RELAXED);
	while (bg->busy)
		pthread_cond_wait(&bg->idle, &s->lock);
}

void stage_bg_resume(struct stage *s)
{
	struct stage_bg *bg = s->bg;

	if (!bg)
		return;
	bg->pause = 0;
	__atomic_store_n(&bg->interrupt, bg->stop, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&bg->cond);
}

int stage_bg_stored(struct stage *s, const struct snode *n, uint32_t index,
		    void *buf, uint32_t *word)
{
	const struct centry *c;
	uint32_t len;

	if (!s->bg || !S_ISREG(n->mode) || block_missing(n, index))
		return 0;
	c = &n->cblk[index];
	*word = c->word;
	if (c->off == BG_IN_FILE)
		return 2;
	len = c->word & ~(1u << 24);
	if (len && pread(s->bg->cfd, buf, len, (off_t)c->off) != (ssize_t)len)
		return 0;	/* the seal compresses it again */
	return 1;
}

int stage_bg_stored_at(struct stage *s, const struct snode *n, uint32_t index,
		       int *fd, uint64_t *off, uint32_t *word)
{
	const struct centry *c;

	if (!s->bg || !S_ISREG(n->mode) || block_missing(n, index))
		return 0;
	c = &n->cblk[index];
	if (c->off == BG_IN_FILE)
		return 0;
	*word = c->word;
	*fd = s->bg->cfd;
	*off = c->off;
	return 1;
}

int stage_bg_store_fd(const struct stage *s)
{
	return s->bg ? s->bg->cfd : -1;
}

void stage_bg_status(const struct stage *s, struct stage_bg_status *st)
{
	memset(st, 0, sizeof(*st));
	if (!s->bg)
		return;
	st->queued_files = s->bg->qlen;
	st->queued_bytes = s->bg->queued_bytes;
	st->stored_blocks = s->bg->stored_blocks;
	st->stored_bytes = s->bg->stored_bytes;
	st->busy = s->bg->busy;
	stage_pp_counts(s, &st->rehearsals, &st->stored_frags, &st->rehearsals_too_big,
			&st->rehearsals_deferred,
			&st->rehearsal_current);
}
