/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fragment blocks compressed before the seal.
 *
 * Most of a typical tree's bytes can sit in files' tails (535 of 924 MB
 * in the bench corpus), and tails only form fragment blocks in the final
 * tree's order, so without this the seal compresses all of them.  The
 * writer packs fragments directory by directory (src/sqw/data.c), so a
 * fragment block depends on one subtree only; a rehearsal (the writer's
 * data pass run over the staged tree, full blocks skipped, nothing
 * written) then compresses every fragment block of the tree as it stands,
 * and those of subtrees that are done stay valid whatever happens
 * elsewhere.  Blocks are kept under their key, a hash of their tails'
 * digests (image.h), and the nodes keep those digests, so a rehearsal or
 * a seal reads and compresses only the blocks whose tails changed since;
 * the seal takes the stored form of any block it builds with a known key.
 *
 * Threads: rehearsals run in the background thread with bg->busy set, so
 * a seal (which pauses the thread and waits for busy to clear) never sees
 * the table change under it; the table is only touched by that thread or
 * by a seal.  A seal interrupts a rehearsal at its next file, and so does
 * a backlog of closed files to compress (bg.c): their full blocks come first.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "pack/pack.h"
#include "sqw/image.h"
#include "stage/stage.h"
#include "util/cpuidle.h"
#include "util/kstore.h"
#include "util/thread.h"
#include "util/util.h"

/*
 * At most one rehearsal per interval, counted from the end of the last,
 * and at least PP_IDLE_FACTOR times as long as the last one took: its tree
 * copy holds stage->lock and its reads take CPU from the producer, so this
 * bounds both to a fifth of the time on a large tree.
 */
#define PP_INTERVAL_MS 1000
#define PP_IDLE_FACTOR 4
/*
 * By default (not -o prepack) a rehearsal also waits for a CPU with time
 * to spare: at least this share of the machine's CPU time idle since the
 * last rehearsal or look.  Rehearsals run at idle priority, yet each
 * request to the mount then preempts them, so a producer that keeps every
 * CPU busy (make -j, or the pool itself with a slow codec) gets none.
 * xz -dc | tar x, cp -a and debootstrap into the mount leave 20-25% idle
 * on 2 vCPUs; there, rehearsing cost the producer about as much time as it
 * took off the seal (total unchanged, seal 1.5 s -> 0.5 s after tar x),
 * which is the trade this default makes.
 */
#define PP_MIN_IDLE_PCT 15
/*
 * A look judges at least this many ticks (10 ms of one CPU each) since the
 * mark.  The first look can come a tick after the mount, and a one-tick
 * window is all noise: under TSan it once let a rehearsal start beside
 * two busy loops.  A shorter window defers and keeps its mark.
 */
#define PP_MIN_WINDOW_TICKS 50
/*
 * A rehearsal works on a copy of the staged tree (the seal walks the tree
 * itself), about 260 B a node: 13, 37 and 71 MiB at 50 000, 150 000 and
 * 300 000 files, against 235 B a node for the tree.  The daemon is to stay
 * within 64 MiB + 256 B a staged inode, which leaves room for the copy up
 * to about 250 000 inodes with short names; beyond the cap (-o prepack_max,
 * this by default) rehearsals stop and the seal compresses the fragment
 * blocks.  At 1 000 000 files the copy took the daemon to 393 MiB.  The
 * default cap is STAGE_PREPACK_MAX (stage.h).
 */


struct stage_pp {
	struct kstore ks;	/* in the background store (bg.c) */
	int always;		/* -o prepack: whatever the CPU is doing */
	struct cpu_window cpu;	/* since the last rehearsal or look */
	uint64_t rehearsed_gen;	/* s->gen the last complete rehearsal saw */
	struct timespec last_end;	/* CLOCK_MONOTONIC */
	int64_t interval_ms;
	/* for the status, under stage->lock (n changes without it) */
	uint64_t runs, kept, deferred, too_big;
};

struct stage_pp *stage_pp_create(int always)
{
	struct stage_pp *pp = calloc(1, sizeof(*pp));

	if (pp) {
		pp->ks.serial = 1;
		pp->always = always;
		pp->interval_ms = PP_INTERVAL_MS;
		cpu_window_mark(&pp->cpu);
	}
	return pp;
}

void stage_pp_free(struct stage *s, struct stage_pp *pp)
{
	size_t i;

	if (!pp)
		return;
	for (i = 0; s && i < pp->ks.n; i++)
		stage_bg_punch(s, pp->ks.e[i].off, pp->ks.e[i].word);
	kstore_free(&pp->ks);
	free(pp);
}

void stage_pp_counts(const struct stage *s, uint64_t *rehearsals, uint64_t *frags, uint64_t *too_big,
		     uint64_t *deferred, int *current)
{
	*rehearsals = s->pp ? s->pp->runs : 0;
	*too_big = s->pp ? s->pp->too_big : 0;
	*frags = s->pp ? s->pp->kept : 0;
	*deferred = s->pp ? s->pp->deferred : 0;
	*current = s->pp && s->pp->runs && s->pp->rehearsed_gen == s->gen;
}

int stage_pp_due(struct stage *s, struct timespec *wait)
{
	struct stage_pp *pp = s->pp;
	int64_t left = PP_INTERVAL_MS;

	if (!pp)
		return -1;
	if (s->gen != pp->rehearsed_gen && s->gen != s->sealed_gen) {
		left = pp->interval_ms - ms_since(&pp->last_end);
		if (left <= 0) {
			if (s->inodes > s->prepack_max) {
				if (!pp->too_big++)
					stage_log(s, LOG_INFO, "%zu inodes staged, more than prepack_max=%zu: "
						  "no more rehearsals (each copies the tree) while so many "
						  "are; the seal compresses the fragment blocks",
						  s->inodes, s->prepack_max);
			} else if (pp->always ||
				   cpu_window_spare(&pp->cpu, PP_MIN_IDLE_PCT, PP_MIN_WINDOW_TICKS)) {
				return 1;
			} else {
				pp->deferred++;
			}
			/* Look again an interval from now. */
			clock_gettime(CLOCK_MONOTONIC, &pp->last_end);
			left = pp->interval_ms;
		}
	}
	/*
	 * Changes do not wake the thread (only closed files with full blocks
	 * do), so it looks again after a while.  The condition variable waits
	 * on CLOCK_REALTIME.
	 */
	clock_gettime(CLOCK_REALTIME, wait);
	wait->tv_sec += left / 1000;
	wait->tv_nsec += (left % 1000) * 1000000;
	if (wait->tv_nsec >= 1000000000) {
		wait->tv_sec++;
		wait->tv_nsec -= 1000000000;
	}
	return 0;
}

/*
 * The rehearsal's view of the files: the spool files, nothing stored.  A
 * file that went or shrank meanwhile reads as zeros: the blocks made of it
 * are wrong, and only cost the room they take until the next rehearsal.
 */
static char gone;	/* the handle of such a file */
/*
 * The last read of this thread (a rehearsal's writer reads in its own
 * thread) was such zeros: the tail read for a digest is the last read
 * before tail_seen(), which must then not keep a digest of zeros for a
 * file nobody changed through the mount (its spool file removed by hand):
 * the seal would take the block made of zeros without reading the file.
 */
static __thread int gone_read;

static int rh_open(void *ctx, void *id, void **handle)
{
	struct stage *s = ctx;
	char name[STAGE_SPOOL_NAME_SIZE];

	if (stage_bg_interrupted(s))
		return -EINTR;
	if (fd_source_openat(s->datafd, stage_spool_name(name, (uintptr_t)id), handle))
		*handle = &gone;
	return 0;
}

static int rh_read(void *handle, uint64_t off, void *buf, size_t len)
{
	gone_read = handle == &gone || fd_source_read(handle, off, buf, len);
	if (gone_read)
		memset(buf, 0, len);
	return 0;
}

static int64_t rh_next_data(void *handle, uint64_t off)
{
	int64_t r = handle == &gone ? -1 : fd_source_next_data(handle, off);

	return r < 0 ? (int64_t)off : r;
}

static void rh_close(void *handle)
{
	if (handle != &gone)
		fd_source_close(handle);
}

int stage_pp_stored(void *ctx, const uint8_t key[16], uint32_t len, void *buf,
		    uint32_t *word)
{
	struct stage *s = ctx;
	struct kent *e = s->pp ? kstore_find(&s->pp->ks, key) : NULL;
	uint32_t n;

	(void)len;	/* part of the key */
	if (!e)
		return 0;
	n = e->word & ~(1u << 24);
	if (stage_bg_read(s, e->off, buf, n))
		return 0;	/* compressed again */
	e->used = s->pp->ks.serial;
	*word = e->word;
	return 1;
}

int stage_pp_stored_at(void *ctx, const uint8_t key[16], uint32_t len, int *fd,
		       uint64_t *off, uint32_t *word)
{
	struct stage *s = ctx;
	struct kent *e = s->pp ? kstore_find(&s->pp->ks, key) : NULL;

	(void)len;	/* part of the key */
	if (!e || (*fd = stage_bg_store_fd(s)) < 0)
		return 0;
	e->used = s->pp->ks.serial;
	*off = e->off;
	*word = e->word;
	return 1;
}

/*
 * Tail digests (snode.tdig), so that a fragment block whose tails did not
 * change since a rehearsal compressed it costs no reads at all.  A digest
 * is kept only if the file is still as the writer saw it before it read
 * the tail (same size, no data change since: wgen; nobody who could
 * change it unseen: writers, bg_never), and any later change clears it.
 */
#define TOKEN_NEVER UINT64_MAX

int stage_pp_tail_digest(void *ctx, void *src, uint64_t size, uint32_t len,
			 uint8_t digest[16], uint64_t *token)
{
	struct stage *s = ctx;
	struct snode *n = stage_get(s, (fuse_ino_t)(uintptr_t)src);

	(void)len;	/* size % block_size */
	*token = TOKEN_NEVER;
	if (!n || !S_ISREG(n->mode) || n->size != size)
		return 0;
	if (n->tdig_ok) {
		memcpy(digest, n->tdig, 16);
		return 1;
	}
	*token = n->wgen;
	return 0;
}

void stage_pp_tail_seen(void *ctx, void *src, uint64_t size, uint32_t len,
			const uint8_t digest[16], uint64_t token)
{
	struct stage *s = ctx;
	struct snode *n = stage_get(s, (fuse_ino_t)(uintptr_t)src);

	(void)len;
	if (!n || token == TOKEN_NEVER || n->wgen != token || n->size != size ||
	    n->writers || n->bg_never || !S_ISREG(n->mode))
		return;
	memcpy(n->tdig, digest, 16);
	n->tdig_ok = 1;
}

/* The same for a rehearsal, which runs without stage->lock. */
static int rh_tail_digest(void *ctx, void *src, uint64_t size, uint32_t len,
			  uint8_t digest[16], uint64_t *token)
{
	struct stage *s = ctx;
	int ret;

	if (stage_bg_interrupted(s))
		return -EINTR;
	pthread_mutex_lock(&s->lock);
	ret = stage_pp_tail_digest(s, src, size, len, digest, token);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

static void rh_tail_seen(void *ctx, void *src, uint64_t size, uint32_t len,
			 const uint8_t digest[16], uint64_t token)
{
	struct stage *s = ctx;

	if (gone_read)
		return;
	pthread_mutex_lock(&s->lock);
	stage_pp_tail_seen(s, src, size, len, digest, token);
	pthread_mutex_unlock(&s->lock);
}

static void rh_frag_done(void *ctx, const uint8_t key[16], const void *data, uint32_t word)
{
	struct stage *s = ctx;
	struct stage_pp *pp = s->pp;
	uint32_t len = word & ~(1u << 24);
	uint64_t off;

	if (!len || kstore_find(&pp->ks, key) || stage_bg_append(s, data, len, &off))
		return;
	if (!kstore_add(&pp->ks, key, off, word))
		stage_bg_punch(s, off, word);
}

static const struct sqw_source_ops rehearsal_ops = {
	.open = rh_open,
	.read = rh_read,
	.next_data = rh_next_data,
	.close = rh_close,
	.stored_frag = stage_pp_stored,
	.frag_done = rh_frag_done,
	.tail_digest = rh_tail_digest,
	.tail_seen = rh_tail_seen,
};

static void punch(void *ctx, uint64_t off, uint32_t word)
{
	stage_bg_punch(ctx, off, word);
}

/* Blocks neither this rehearsal nor the last seal used give their room back. */
static void evict(struct stage *s, struct stage_pp *pp)
{
	kstore_evict(&pp->ks, punch, s);
}

struct rh_run {
	struct stage *s;
	sqw_tree_t *t;
	const struct sqw_image_opts *o;
	int ret;
};

static void *rh_main(void *arg)
{
	struct rh_run *r = arg;

	r->ret = sqw_image_write(r->t, &rehearsal_ops, r->s, -1, r->o, NULL, NULL);
	return NULL;
}

/*
 * The data pass runs in a thread of its own under SCHED_IDLE (its workers
 * inherit the policy), so it only takes CPU nobody else wants and never
 * slows the producer; it holds no lock.  A seal, which finds the CPU free,
 * interrupts it.  Where no thread can be made, it runs here.
 */
static int rh_run_idle(struct stage *s, sqw_tree_t *t, const struct sqw_image_opts *o)
{
	struct rh_run r = { .s = s, .t = t, .o = o };
	pthread_t th;

	if (thread_start_idle(&th, rh_main, &r))
		rh_main(&r);
	else
		pthread_join(th, NULL);
	return r.ret;
}

void stage_pp_rehearse(struct stage *s)
{
	struct stage_pp *pp = s->pp;
	struct sqw_image_opts o;
	struct timespec start;
	sqw_tree_t *t;
	uint64_t gen;
	int64_t took;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &start);
	pthread_mutex_lock(&s->lock);
	gen = s->gen;
	o = s->opts.img;
	t = stage_tree_rehearsal(s);
	pthread_mutex_unlock(&s->lock);
	if (!t) {
		clock_gettime(CLOCK_MONOTONIC, &pp->last_end);
		return;
	}
	o.flags |= SQW_OPT_REHEARSE;
	o.progress = NULL;
	pp->ks.serial++;
	ret = rh_run_idle(s, t, &o);
	sqw_tree_destroy(t);
	/* What it freed stays in its threads' arenas otherwise. */
	malloc_trim(0);
	pthread_mutex_lock(&s->lock);
	if (!ret) {
		evict(s, pp);
		pp->rehearsed_gen = gen;
		pp->runs++;
	}
	pp->kept = pp->ks.n;
	cpu_window_mark(&pp->cpu);	/* its own CPU time is not the producer's */
	clock_gettime(CLOCK_MONOTONIC, &pp->last_end);
	took = ms_since(&start);
	pp->interval_ms = took * PP_IDLE_FACTOR > PP_INTERVAL_MS ? took * PP_IDLE_FACTOR :
			  PP_INTERVAL_MS;
	pthread_mutex_unlock(&s->lock);
}
