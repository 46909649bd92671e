/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fragment blocks compressed while a tar stream is read.
 *
 * The files smaller than a block (most files, and often most of the bytes)
 * only form fragment blocks in the final tree's canonical order, so their
 * compression waits for the end of the stream, when nothing else is left
 * to overlap with it.  The writer packs fragments directory by directory
 * (src/sqw/data.c), so the blocks of a subtree the stream is done with do
 * not change any more.  Now and then, between two members, a rehearsal
 * takes a copy of the tree read so far and runs the writer's data pass
 * over it (full blocks skipped, nothing written: SQW_OPT_REHEARSE), in a
 * thread of its own at idle priority, so it takes only CPU time that the
 * producer of the stream and the data blocks' compression (ahead.c) leave.
 * Each fragment block it compresses is kept in a temporary file under its
 * key (a hash of its tails' digests), and each file keeps its tail's
 * digest; a later rehearsal, and the image's own data pass, take the
 * stored form of any block whose key they meet, without reading its tails.
 * The image is the same bytes whichever way a block was made.
 *
 * Threads: the reader starts a rehearsal and is the only one to join it;
 * until then the rehearsal thread alone touches the store, and the tree
 * copy shares the spool files of the reader's tree, so a spool file the
 * reader drops meanwhile (a member given again) is freed after the join.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pack/spool.h"
#include "util/cpuidle.h"
#include "util/kstore.h"
#include "util/thread.h"
#include "util/util.h"

/*
 * At most one rehearsal per interval, counted from the end of the last,
 * and at least RH_IDLE_FACTOR times as long as the last one took: the copy
 * of the tree is made in the reader's thread, and the reads of the tails
 * take memory bandwidth from the producer.
 */
#define RH_INTERVAL_MS 1000
#define RH_IDLE_FACTOR 4
/*
 * A rehearsal also waits for CPU time to spare: at least this share of
 * the machine's idle since the last rehearsal or look (over at least
 * RH_MIN_WINDOW_TICKS).  Behind a producer slower than the codec (xz -dc
 * of the bench corpus: 35% idle on 2 vCPUs) rehearsals fill the idle time;
 * behind a fast one (tar -c of a tree in the page cache: 12% idle over the
 * whole pack) rehearsing made the pack 10-20% slower: the blocks of
 * unfinished directories are compressed for nothing, and every rehearsal
 * reads again the files it hashes to find duplicates.
 */
#define RH_MIN_IDLE_PCT 15
#define RH_MIN_WINDOW_TICKS 50
/*
 * ... and for a reader that waits for its producer: busy at most this share
 * of the time since the last look.  Behind tar -c the reader itself set
 * the pace (the CPUs were 25-30% idle during the stream all the same).
 */
#define RH_MAX_READER_BUSY_PCT 50
/*
 * A copy and its rehearsal's writer took sqfs-pack from 57 to 69 MiB at
 * 62 000 entries (the bench corpus): beyond this many directories and
 * files, rehearsals stop and the image's data pass compresses the rest.
 */
#define RH_MAX_NODES 250000
#define RH_ALIGN 4096u	/* stored forms start on pages, so a punch frees them */

struct spool_rehearse {
	struct spool *sp;
	FILE *warn;
	struct sqw_image_opts opts;	/* the image's, rehearsing */
	struct sqw_source_ops ops;
	int fd;			/* the stored forms */
	uint64_t end;
	int full;		/* the file could not grow */
	int off;		/* no more rehearsals (tree too large, or out of room) */
	int always;		/* SQFS_PACK_REHEARSE=always: whatever the CPUs do */
	struct kstore ks;
	/* the running rehearsal */
	pthread_t th;
	int running;
	atomic_int stop, done;
	int ret;
	sqw_tree_t *copy;
	struct spool_file **grave;	/* dropped by the reader meanwhile */
	size_t ngrave, cgrave;
	/* when to rehearse again */
	uint64_t members, members_copied;
	struct timespec last_end, started;
	int64_t interval_ms;
	struct cpu_window cpu;
	struct timespec look, look_cpu;	/* wall and reader CPU time at the last look */
};

/* Start a look at the reader's (this thread's) share of busy time. */
static void reader_mark(struct spool_rehearse *rh)
{
	clock_gettime(CLOCK_MONOTONIC, &rh->look);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &rh->look_cpu);
}

/* Did the reader wait for its producer enough since the last look?  Marks again. */
static int reader_waits(struct spool_rehearse *rh)
{
	struct timespec wall = rh->look, cpu = rh->look_cpu;
	int64_t w, c;

	reader_mark(rh);
	w = ms_between(&wall, &rh->look);
	c = ms_between(&cpu, &rh->look_cpu);
	return w > 0 && c * 100 <= w * RH_MAX_READER_BUSY_PCT;
}

/* --- the rehearsal's view (its own thread) --- */

static int rh_open(void *ctx, void *src, void **handle)
{
	struct spool_rehearse *rh = ctx;

	if (atomic_load_explicit(&rh->stop, memory_order_relaxed))
		return -EINTR;
	*handle = src;
	return 0;
}

static int rh_stored(void *ctx, const uint8_t key[16], uint32_t len, void *buf,
		     uint32_t *word)
{
	struct spool_rehearse *rh = ctx;
	struct kent *e = kstore_find(&rh->ks, key);

	(void)len;	/* part of the key */
	if (!e || pread_all(rh->fd, buf, e->word & ~(1u << 24), e->off))
		return 0;	/* compressed again */
	e->used = rh->ks.serial;
	*word = e->word;
	return 1;
}

static void rh_frag_done(void *ctx, const uint8_t key[16], const void *data, uint32_t word)
{
	struct spool_rehearse *rh = ctx;
	uint32_t len = word & ~(1u << 24);
	uint64_t at = align_up(rh->end, RH_ALIGN);

	if (!len || rh->full || kstore_find(&rh->ks, key))
		return;
	if (pwrite_all(rh->fd, data, len, at)) {
		rh->full = 1;	/* no room: the image's pass compresses the rest */
		return;
	}
	if (kstore_add(&rh->ks, key, at, word))
		rh->end = at + len;
}

static int rh_tail_digest(void *ctx, void *src, uint64_t size, uint32_t len,
			  uint8_t digest[16], uint64_t *token)
{
	struct spool_rehearse *rh = ctx;
	struct spool_file *f = src;

	(void)len;
	*token = 0;
	if (atomic_load_explicit(&rh->stop, memory_order_relaxed))
		return -EINTR;
	if (!f->tdig_ok || f->size != size)
		return 0;
	memcpy(digest, f->tdig, 16);
	return 1;
}

/* A spool file's data never changes once its member is read: keep it. */
static void rh_tail_seen(void *ctx, void *src, uint64_t size, uint32_t len,
			 const uint8_t digest[16], uint64_t token)
{
	struct spool_file *f = src;

	(void)ctx;
	(void)len;
	(void)token;
	if (f->size != size)
		return;
	memcpy(f->tdig, digest, 16);
	f->tdig_ok = 1;
}

static void *rh_main(void *arg)
{
	struct spool_rehearse *rh = arg;

	rh->ret = sqw_image_write(rh->copy, &rh->ops, rh, -1, &rh->opts, NULL, NULL);
	atomic_store_explicit(&rh->done, 1, memory_order_release);
	return NULL;
}

/* --- the reader's side --- */

int spool_rehearse_start(struct spool *sp, const char *dir, const struct sqw_image_opts *img,
			 FILE *warn)
{
	const char *mode = getenv("SQFS_PACK_REHEARSE");
	struct spool_rehearse *rh;

	if (mode && !strcmp(mode, "never"))
		return 0;
	if (mode && *mode && strcmp(mode, "always"))
		pack_warn(warn, "SQFS_PACK_REHEARSE='%s' is neither 'never' nor 'always': "
			  "ignored\n", mode);
	rh = calloc(1, sizeof(*rh));
	if (!rh)
		return -ENOMEM;
	/*
	 * For tests and measurements: rehearse at every interval, at the
	 * default priority, so that a loaded machine cannot starve them.
	 */
	rh->always = mode && !strcmp(mode, "always");
	rh->fd = spool_tmpfile(dir);
	if (rh->fd < 0) {
		int ret = rh->fd;

		free(rh);
		return ret;
	}
	rh->sp = sp;
	rh->warn = warn;
	rh->opts = *img;
	rh->opts.flags |= SQW_OPT_REHEARSE;
	rh->opts.progress = NULL;
	rh->ops = spool_source_ops;
	rh->ops.open = rh_open;
	rh->ops.stored_block = NULL;	/* a rehearsal reads no full block */
	rh->ops.stored_frag = rh_stored;
	rh->ops.frag_done = rh_frag_done;
	rh->ops.tail_digest = rh_tail_digest;
	rh->ops.tail_seen = rh_tail_seen;
	rh->ks.serial = 1;
	rh->interval_ms = RH_INTERVAL_MS;
	clock_gettime(CLOCK_MONOTONIC, &rh->last_end);
	cpu_window_mark(&rh->cpu);
	reader_mark(rh);
	sp->rh = rh;
	return 0;
}

static void punch(void *ctx, uint64_t off, uint32_t word)
{
	struct spool_rehearse *rh = ctx;
	uint64_t len = align_up(word & ~(1u << 24), RH_ALIGN);

	/* Where holes cannot be punched, the room stays taken until the end. */
	(void)fallocate(rh->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
			(off_t)len);
}

/* Wait for the running rehearsal; keep what it made. */
static void settle(struct spool_rehearse *rh)
{
	size_t i;
	int64_t took;

	if (!rh->running)
		return;
	pthread_join(rh->th, NULL);
	rh->running = 0;
	sqw_tree_destroy(rh->copy);
	rh->copy = NULL;
	for (i = 0; i < rh->ngrave; i++)
		spool_file_free(rh->grave[i]);
	rh->ngrave = 0;
	/* Blocks this whole rehearsal did not meet belong to an older tree. */
	if (!rh->ret)
		kstore_evict(&rh->ks, punch, rh);
	took = ms_since(&rh->started);
	rh->interval_ms = took * RH_IDLE_FACTOR > RH_INTERVAL_MS ? took * RH_IDLE_FACTOR :
			  RH_INTERVAL_MS;
	clock_gettime(CLOCK_MONOTONIC, &rh->last_end);
	cpu_window_mark(&rh->cpu);	/* its own CPU time was not idle */
}

int spool_rehearse_tick(struct spool *sp, sqw_tree_t *tree)
{
	struct spool_rehearse *rh = sp->rh;
	int err;

	if (!rh || rh->off)
		return 0;
	rh->members++;
	if (rh->running) {
		if (!atomic_load_explicit(&rh->done, memory_order_acquire))
			return 0;
		settle(rh);
	}
	if (rh->members == rh->members_copied || rh->full ||
	    ms_since(&rh->last_end) < rh->interval_ms)
		return 0;
	if (!rh->always && (!reader_waits(rh) ||
			    !cpu_window_spare(&rh->cpu, RH_MIN_IDLE_PCT, RH_MIN_WINDOW_TICKS))) {
		/* Look again an interval from now. */
		clock_gettime(CLOCK_MONOTONIC, &rh->last_end);
		return 0;
	}
	/* The rehearsal reads the spool file: what is buffered goes first. */
	err = spool_flush(sp);
	if (err)
		return err;
	if (rh->off)	/* the flush ran out of room, and this gave way */
		return 0;
	rh->copy = sqw_tree_copy_files(tree, RH_MAX_NODES, &err);
	if (!rh->copy) {
		if (err == -E2BIG)
			rh->off = 1;
		return 0;
	}
	rh->members_copied = rh->members;
	rh->ks.serial++;
	atomic_store_explicit(&rh->stop, 0, memory_order_relaxed);
	atomic_store_explicit(&rh->done, 0, memory_order_relaxed);
	clock_gettime(CLOCK_MONOTONIC, &rh->started);
	err = rh->always ? -pthread_create(&rh->th, NULL, rh_main, rh) :
			   thread_start_idle(&rh->th, rh_main, rh);
	if (err) {
		sqw_tree_destroy(rh->copy);
		rh->copy = NULL;
		rh->off = 1;
		return 0;
	}
	rh->running = 1;
	return 0;
}

int spool_rehearse_drop(struct spool_file *f)
{
	struct spool_rehearse *rh = f->sp ? f->sp->rh : NULL;

	if (!rh || !rh->running)
		return 0;
	if (array_reserve((void **)&rh->grave, &rh->cgrave, rh->ngrave + 1,
			  sizeof(*rh->grave))) {
		/* No room to wait: stop the rehearsal now, then free it. */
		atomic_store_explicit(&rh->stop, 1, memory_order_relaxed);
		settle(rh);
		return 0;
	}
	rh->grave[rh->ngrave++] = f;
	return 1;
}

void spool_rehearse_finish(struct spool *sp)
{
	struct spool_rehearse *rh = sp->rh;

	if (!rh)
		return;
	/* What it has not done yet, the image's pass does at full speed. */
	atomic_store_explicit(&rh->stop, 1, memory_order_relaxed);
	settle(rh);
	rh->off = 1;
}

int spool_rehearse_give_way(struct spool_rehearse *rh, int code, int quiet)
{
	if (!rh || !rh->ks.n)
		return 0;
	spool_rehearse_finish(rh->sp);
	kstore_free(&rh->ks);
	if (ftruncate(rh->fd, 0) == 0)
		rh->end = 0;
	rh->full = 1;
	if (!quiet && rh->warn)
		pack_warn(rh->warn, "compressing while reading stopped: %s; "
			"the blocks are compressed after the archive ends\n", strerror(-code));
	return 1;
}

void spool_rehearse_destroy(struct spool_rehearse *rh)
{
	if (!rh)
		return;
	if (rh->running) {
		atomic_store_explicit(&rh->stop, 1, memory_order_relaxed);
		settle(rh);
	}
	kstore_free(&rh->ks);
	free(rh->grave);
	close(rh->fd);
	free(rh);
}

/* --- the image's data pass --- */

int spool_rh_stored_frag(void *ctx, const uint8_t key[16], uint32_t len, void *buf,
			 uint32_t *word)
{
	struct spool *sp = ctx;

	return sp->rh ? rh_stored(sp->rh, key, len, buf, word) : 0;
}

int spool_rh_tail_digest(void *ctx, void *src, uint64_t size, uint32_t len,
			 uint8_t digest[16], uint64_t *token)
{
	struct spool_file *f = src;

	(void)ctx;
	(void)len;
	*token = 0;
	if (!f->tdig_ok || f->size != size)
		return 0;
	memcpy(digest, f->tdig, 16);
	return 1;
}

int spool_rehearsed(const struct spool *sp)
{
	return sp->rh && sp->rh->ks.serial > 1;
}
