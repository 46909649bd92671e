/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Block processor: in-order results whatever the number of workers and the
 * queue size, identical output to the serial twin, holes, raw blocks,
 * error reporting.  A wrapping compressor sleeps 0-2 ms before each block
 * so that workers finish out of order.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "config.h"
#include "pool/bp.h"
#include "quick.h"
#include "sqw/compressor.h"
#include "util/util.h"

#define BS 16384u
#define NBLOCKS 500

/* ---- the test compressor: sleeps, can fail, wraps a real one ---- */

struct tcomp {
	sqw_compressor_t base;
	sqw_compressor_t *real;
	int sleep;		/* sleep 0..2 ms per block */
	int fail_magic;		/* -EIO for blocks starting with "FAILBLCK" */
	int copy_fails;		/* copy() returns NULL */
	int gated;		/* wait until tcomp_gate is opened */
	uint64_t rng;		/* per instance: no shared state */
};

static int tcomp_live;		/* instances alive; main thread only */
static int tcomp_gate;		/* atomic: gated instances may go on */
static unsigned tcomp_seed;	/* bumped per copy, main thread only */

static int tcomp_compress(sqw_compressor_t *base, const uint8_t *in,
			  size_t in_len, uint8_t *out, size_t out_max)
{
	struct tcomp *t = (struct tcomp *)base;

	while (t->gated && !__atomic_load_n(&tcomp_gate, __ATOMIC_ACQUIRE)) {
		struct timespec ts = { 0, 200000 };

		nanosleep(&ts, NULL);
	}
	if (t->sleep) {
		struct timespec ts;

		t->rng ^= t->rng << 13;
		t->rng ^= t->rng >> 7;
		t->rng ^= t->rng << 17;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)(t->rng % 2001) * 1000;
		nanosleep(&ts, NULL);
	}
	if (t->fail_magic && in_len >= 8 && memcmp(in, "FAILBLCK", 8) == 0)
		return -EIO;
	return t->real->compress(t->real, in, in_len, out, out_max);
}

static int tcomp_decompress(sqw_compressor_t *base, const uint8_t *in,
			    size_t in_len, uint8_t *out, size_t out_max)
{
	struct tcomp *t = (struct tcomp *)base;

	return t->real->decompress(t->real, in, in_len, out, out_max);
}

static void tcomp_destroy(sqw_compressor_t *base)
{
	struct tcomp *t = (struct tcomp *)base;

	sqw_compressor_destroy(t->real);
	free(t);
	__atomic_fetch_sub(&tcomp_live, 1, __ATOMIC_RELAXED);
}

static sqw_compressor_t *tcomp_wrap(sqw_compressor_t *real, const struct tcomp *proto);

static sqw_compressor_t *tcomp_copy(const sqw_compressor_t *base)
{
	const struct tcomp *t = (const struct tcomp *)base;
	sqw_compressor_t *r;

	if (t->copy_fails)
		return NULL;
	r = t->real->copy(t->real);
	if (!r)
		return NULL;
	return tcomp_wrap(r, t);
}

static sqw_compressor_t *tcomp_wrap(sqw_compressor_t *real, const struct tcomp *proto)
{
	struct tcomp *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	if (proto)
		*t = *proto;
	t->base.compress = tcomp_compress;
	t->base.decompress = tcomp_decompress;
	t->base.copy = tcomp_copy;
	t->base.destroy = tcomp_destroy;
	t->base.cfg = real->cfg;
	t->real = real;
	t->rng = 0x9E3779B97F4A7C15ull * (++tcomp_seed) | 1;
	__atomic_fetch_add(&tcomp_live, 1, __ATOMIC_RELAXED);
	return &t->base;
}

static struct tcomp *tcomp_new(void)
{
	sqw_comp_config_t cfg;
	sqw_compressor_t *real;
	enum sqw_comp_id id = sqw_comp_available(SQW_COMP_ZSTD) ? SQW_COMP_ZSTD :
			      SQW_COMP_GZIP;
	int err;

	assert_int_equal(sqw_comp_config_init(&cfg, id, BS), 0);
	cfg.level = 1;		/* speed: the codec is not under test */
	real = sqw_compressor_create(&cfg, &err);
	assert_non_null(real);
	return (struct tcomp *)tcomp_wrap(real, NULL);
}

/* ---- block contents, a pure function of the block number ---- */

static uint64_t mix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

enum btype { B_ZERO_SPARSE, B_ZERO_DENSE, B_RANDOM, B_TEXT, B_KNOWN_HOLE,
	     B_SHORT, B_ALMOST_ZERO, B_STORED, B_STORED_RAW, B_NTYPES };

static enum btype block_type(unsigned i)
{
	return (enum btype)(mix(i) % B_NTYPES);
}

static void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
	size_t k;

	for (k = 0; k < n; k++) {
		if (k % 8 == 0)
			seed = mix(seed);
		p[k] = (uint8_t)(seed >> (8 * (k % 8)));
	}
}

static void fill_text(uint8_t *p, size_t n, uint64_t seed)
{
	static const char *const words[] = {
		"alpha ", "beta ", "gamma ", "delta ", "block ", "queue ",
		"worker ", "order ",
	};
	size_t k = 0;

	while (k < n) {
		const char *w;
		size_t l;

		seed = mix(seed);
		w = words[seed % 8];
		l = strlen(w);
		if (l > n - k)
			l = n - k;
		memcpy(p + k, w, l);
		k += l;
	}
}

/* The expected input of block i (what a reader gets back). */
static uint32_t gen_block(unsigned i, uint8_t *buf, int *allow_sparse)
{
	uint64_t h = mix(i + 1000);
	uint32_t len = BS;

	*allow_sparse = 0;
	switch (block_type(i)) {
	case B_ZERO_SPARSE:
		memset(buf, 0, len);
		*allow_sparse = 1;
		break;
	case B_ZERO_DENSE:
		len = 1 + (uint32_t)(h % BS);
		memset(buf, 0, len);
		break;
	case B_RANDOM:
		fill_random(buf, len, h);
		*allow_sparse = 1;
		break;
	case B_TEXT:
		fill_text(buf, len, h);
		*allow_sparse = (int)(h & 1);
		break;
	case B_KNOWN_HOLE:
		len = 1 + (uint32_t)(h % BS);
		memset(buf, 0, len);
		*allow_sparse = BP_KNOWN_HOLE;
		break;
	case B_SHORT:
		len = 1 + (uint32_t)(h % 300);
		if (h & 2)
			fill_text(buf, len, h);
		else
			fill_random(buf, len, h);
		*allow_sparse = 1;
		break;
	case B_STORED:		/* compressed before submission (run()) */
		fill_text(buf, len, h);
		break;
	case B_STORED_RAW:	/* stored raw before submission */
		len = 1 + (uint32_t)(h % BS);
		fill_random(buf, len, h);
		break;
	default:	/* B_ALMOST_ZERO */
		memset(buf, 0, len);
		buf[(h >> 8) % len] = (uint8_t)(1 + h % 255);
		*allow_sparse = 1;
		break;
	}
	return len;
}

/* ---- one run through the processor ---- */

struct result {
	uint32_t size_word[NBLOCKS];
	uint32_t result_len[NBLOCKS];
	size_t off[NBLOCKS];
	int err[NBLOCKS];
	uint8_t *bytes;		/* results concatenated */
	size_t len;
	unsigned holes, raw;
};

static sqw_compressor_t *decoder;
static uint8_t *expect_buf, *dec_buf;

static void check_job(struct bp_job *j, unsigned expect_seq, struct result *r,
		      const char *cfg)
{
	unsigned i = j->index;
	int sparse;
	uint32_t len;

	if (i != expect_seq)
		fail_msg("%s: dequeued block %u, expected %u", cfg, i, expect_seq);
	if (j->kind != 7 || j->node != (void *)r)
		fail_msg("%s: block %u lost its caller tags", cfg, i);
	len = gen_block(i, expect_buf, &sparse);
	if (j->in_len != len)
		fail_msg("%s: block %u in_len %u, want %u", cfg, i, j->in_len, len);
	r->size_word[i] = j->size_word;
	r->result_len[i] = j->result_len;
	r->err[i] = j->err;
	r->off[i] = r->len;
	/* run() injects no failure (run_errors() does): any error is a bug. */
	if (j->err)
		fail_msg("%s: block %u failed: %d", cfg, i, j->err);
	if (j->size_word & 0xFE000000u)
		fail_msg("%s: block %u size word %#x has bits 25-31", cfg, i, j->size_word);
	if (j->size_word == 0) {
		r->holes++;
		if (j->result_len != 0)
			fail_msg("%s: hole %u has result_len %u", cfg, i, j->result_len);
		if (!sparse || !is_zero(expect_buf, len))
			fail_msg("%s: block %u became a hole", cfg, i);
		return;
	}
	if (sparse && is_zero(expect_buf, len))
		fail_msg("%s: zero block %u with allow_sparse not a hole", cfg, i);
	if (j->size_word & (1u << 24)) {
		r->raw++;
		if ((j->size_word & 0xFFFFFF) != len || j->result_len != len)
			fail_msg("%s: raw block %u size word %#x len %u", cfg, i,
				 j->size_word, j->result_len);
		if (memcmp(j->result, expect_buf, len))
			fail_msg("%s: raw block %u bytes differ from its input", cfg, i);
	} else {
		int d;

		if (j->size_word != j->result_len || j->result_len >= len ||
		    j->result_len == 0)
			fail_msg("%s: block %u size word %#x, result %u, in %u", cfg,
				 i, j->size_word, j->result_len, len);
		d = decoder->decompress(decoder, j->result, j->result_len, dec_buf, BS);
		if (d != (int)len || memcmp(dec_buf, expect_buf, len))
			fail_msg("%s: block %u does not decompress to its input (%d)",
				 cfg, i, d);
	}
	memcpy(r->bytes + r->len, j->result, j->result_len);
	r->len += j->result_len;
}

/*
 * Block i's stored form, as a seal finds it beside the staged file: the
 * pool must hand it back untouched, in its place in the order.  Its input
 * buffer then holds that form (compressed, or the raw bytes).
 */
static void store_block(struct bp_job *j, unsigned i)
{
	int ret = 0;

	if (block_type(i) == B_STORED) {
		ret = decoder->compress(decoder, j->in, j->in_len, dec_buf, BS);
		if (ret <= 0)
			fail_msg("block %u: no compressed form to store (%d)", i, ret);
		memcpy(j->in, dec_buf, (size_t)ret);
		j->size_word = (uint32_t)ret;
	} else {
		j->size_word = j->in_len | (1u << 24);
	}
	j->stored = 1;
}

static void run(unsigned jobs, unsigned queue, struct tcomp *proto,
		struct result *r, unsigned nblocks)
{
	struct bp *bp;
	struct bp_job *j;
	char cfg[64];
	unsigned i, next = 0;
	int err = 1;

	snprintf(cfg, sizeof(cfg), "jobs=%u queue=%u", jobs, queue);
	memset(r->size_word, 0, sizeof(r->size_word));
	r->len = 0;
	r->holes = r->raw = 0;
	bp = bp_create(jobs, queue, &proto->base, BS, &err);
	if (!bp)
		fail_msg("%s: bp_create failed: %d", cfg, err);
	assert_int_equal(err, 0);
	assert_null(bp_dequeue(bp));	/* nothing in flight */
	for (i = 0; i < nblocks; i++) {
		int sparse;

		while (!(j = bp_get_job(bp))) {
			struct bp_job *d = bp_dequeue(bp);

			if (!d)
				fail_msg("%s: no free job and nothing in flight", cfg);
			check_job(d, next++, r, cfg);
			bp_release(bp, d);
		}
		/* Never more than `queue` (at least 2) jobs in flight. */
		if (i - next >= (queue < 2 ? 2 : queue))
			fail_msg("%s: %u jobs in flight", cfg, i - next + 1);
		j->in_len = gen_block(i, j->in, &sparse);
		if (sparse == BP_KNOWN_HOLE)
			memset(j->in, 0xEE, j->in_len);	/* must not be read */
		j->allow_sparse = sparse;
		if (block_type(i) == B_STORED || block_type(i) == B_STORED_RAW)
			store_block(j, i);
		j->kind = 7;
		j->node = r;
		j->index = i;
		bp_submit(bp, j);
	}
	while ((j = bp_dequeue(bp))) {
		check_job(j, next++, r, cfg);
		bp_release(bp, j);
	}
	assert_int_equal(next, nblocks);
	assert_null(bp_dequeue(bp));
	bp_destroy(bp);
}

static struct result *result_new(void)
{
	struct result *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	r->bytes = malloc((size_t)NBLOCKS * BS);
	assert_non_null(r->bytes);
	return r;
}

static void result_free(struct result *r)
{
	free(r->bytes);
	free(r);
}

static int setup(void **state)
{
	struct tcomp *t = tcomp_new();

	(void)state;
	decoder = t->real->copy(t->real);
	tcomp_destroy(&t->base);
	expect_buf = malloc(BS);
	dec_buf = malloc(BS);
	return decoder && expect_buf && dec_buf ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	sqw_compressor_destroy(decoder);
	free(expect_buf);
	free(dec_buf);
	return 0;
}

static void compare(const struct result *a, const struct result *b,
		    unsigned jobs, unsigned queue)
{
	unsigned i;

	for (i = 0; i < NBLOCKS; i++)
		if (a->size_word[i] != b->size_word[i])
			fail_msg("jobs=%u queue=%u: block %u size word %#x, serial %#x",
				 jobs, queue, i, b->size_word[i], a->size_word[i]);
	assert_int_equal(a->len, b->len);
	if (memcmp(a->bytes, b->bytes, a->len))
		fail_msg("jobs=%u queue=%u: output bytes differ from the serial twin",
			 jobs, queue);
}

/* Every worker count and a spread of queue sizes against the serial twin. */
static void test_ordering(void **state)
{
	static const unsigned queues[] = { 2, 3, 5, 16, 64 };
	struct tcomp *proto = tcomp_new();
	struct result *ref = result_new(), *r = result_new();
	unsigned jobs, q, counts[B_NTYPES] = { 0 }, i;

	(void)state;
	for (i = 0; i < NBLOCKS; i++)
		counts[block_type(i)]++;
	for (i = 0; i < B_NTYPES; i++)
		assert_true(counts[i] > 20);

	/* Reference: serial twin, no sleeping. */
	run(0, 2, proto, ref, NBLOCKS);
	assert_int_equal(ref->holes, counts[B_ZERO_SPARSE] + counts[B_KNOWN_HOLE]);
	assert_true(ref->raw >= counts[B_RANDOM]);
	assert_true(ref->raw < NBLOCKS / 2);

	for (q = 0; q < sizeof(queues) / sizeof(queues[0]); q++) {
		run(0, queues[q], proto, r, NBLOCKS);
		compare(ref, r, 0, queues[q]);
	}
	proto->sleep = 1;
	for (jobs = 1; jobs <= 8; jobs++) {
		for (q = 0; q < sizeof(queues) / sizeof(queues[0]); q++) {
			/* Large queues with few workers add time, not coverage. */
			if (jobs > 2 && jobs < 8 && (queues[q] == 3 || queues[q] == 16))
				continue;
			/* Quick runs: 1, 2, 3 and 8 workers. */
			if (test_quick() && jobs > 3 && jobs < 8)
				continue;
			run(jobs, queues[q], proto, r, NBLOCKS);
			compare(ref, r, jobs, queues[q]);
		}
	}
	/* queue 0 and 1 are raised to 2. */
	proto->sleep = 0;
	run(3, 0, proto, r, 100);
	run(0, 1, proto, r, 100);
	result_free(ref);
	result_free(r);
	tcomp_destroy(&proto->base);
	assert_int_equal(tcomp_live, 0);
}

/* Exactly `queue` free jobs; the fields the caller sets start cleared. */
/* This process's address space in KiB (VmSize). */
static long vm_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %ld kB", &kib) == 1)
			break;
	fclose(f);
	assert_true(kib > 0);
	return kib;
}

/*
 * Buffers come as the queue fills: a queue of 65536 blocks of 1 MiB (what
 * --queue allows) costs two blocks' buffers until more are asked for, and
 * the jobs asked for all have theirs.
 */
static void test_queue_buffers_lazy(void **state)
{
	struct tcomp *proto = tcomp_new();
	struct bp_job *got[6];
	long before = vm_kib();
	int err;
	struct bp *bp = bp_create(2, 65536, &proto->base, 1u << 20, &err);

	(void)state;
	assert_non_null(bp);
	/* 2 x (in + out) MiB, 65536 job records, two threads' stacks */
	assert_true(vm_kib() - before < 512 * 1024);
	for (int n = 0; n < 6; n++) {
		got[n] = bp_get_job(bp);
		assert_non_null(got[n]);
		assert_non_null(got[n]->in);
		assert_non_null(got[n]->out);
		memset(got[n]->in, n, 1u << 20);
		for (int k = 0; k < n; k++)
			assert_ptr_not_equal(got[n]->in, got[k]->in);
	}
	assert_true(vm_kib() - before < 512 * 1024);
	for (int n = 0; n < 6; n++)
		bp_release(bp, got[n]);
	bp_destroy(bp);
	tcomp_destroy(&proto->base);
}

static void test_job_budget(void **state)
{
	static const unsigned cfgs[][2] = { { 0, 1 }, { 0, 4 }, { 2, 1 }, { 3, 5 }, { 8, 2 } };
	struct tcomp *proto = tcomp_new();
	size_t c;

	(void)state;
	for (c = 0; c < sizeof(cfgs) / sizeof(cfgs[0]); c++) {
		unsigned want = cfgs[c][1] < 2 ? 2 : cfgs[c][1], n;
		struct bp_job *got[8];
		int err;
		struct bp *bp = bp_create(cfgs[c][0], cfgs[c][1], &proto->base, BS, &err);

		assert_non_null(bp);
		for (n = 0; n < want; n++) {
			got[n] = bp_get_job(bp);
			assert_non_null(got[n]);
			assert_non_null(got[n]->in);
			/* Reset by bp_get_job even after a previous use. */
			assert_int_equal(got[n]->allow_sparse, 0);
			assert_int_equal(got[n]->in_len, 0);
			assert_int_equal(got[n]->kind, 0);
			assert_null(got[n]->node);
			assert_int_equal(got[n]->index, 0);
			got[n]->kind = 5;
			got[n]->allow_sparse = 1;
			got[n]->node = got;
			got[n]->index = 9;
			got[n]->in_len = 3;
		}
		assert_null(bp_get_job(bp));
		/* Unsubmitted jobs go back with bp_release. */
		for (n = 0; n < want; n++)
			bp_release(bp, got[n]);
		for (n = 0; n < want; n++) {
			struct bp_job *j = bp_get_job(bp);

			assert_non_null(j);
			assert_int_equal(j->kind, 0);
			assert_int_equal(j->in_len, 0);
			assert_int_equal(j->allow_sparse, 0);
			assert_null(j->node);
		}
		assert_null(bp_get_job(bp));
		assert_null(bp_dequeue(bp));
		bp_destroy(bp);
	}
	tcomp_destroy(&proto->base);
	assert_int_equal(tcomp_live, 0);
}

/*
 * A compressor error is reported on that job only, in order, and the
 * slot's next job starts with err = 0.
 */
static void run_errors(unsigned jobs, unsigned queue)
{
	struct tcomp *proto = tcomp_new();
	struct bp *bp;
	struct bp_job *j;
	unsigned i, next = 0, nerr = 0;
	int err;

	proto->fail_magic = 1;
	proto->sleep = jobs > 0;
	bp = bp_create(jobs, queue, &proto->base, BS, &err);
	assert_non_null(bp);
	for (i = 0; i < 200 + queue; i++) {
		while (!(j = bp_get_job(bp))) {
			struct bp_job *d = bp_dequeue(bp);

			assert_non_null(d);
			assert_int_equal(d->index, next);
			if (d->index % 7 == 3) {
				if (d->err != -EIO)
					fail_msg("jobs=%u queue=%u: block %u err %d, want -EIO",
						 jobs, queue, d->index, d->err);
				nerr++;
			} else if (d->err != 0) {
				fail_msg("jobs=%u queue=%u: block %u err %d, want 0",
					 jobs, queue, d->index, d->err);
			} else if (d->index % 14 == 5) {
				assert_int_equal(d->size_word, 0);
			} else {
				assert_true(d->size_word != 0);
			}
			next++;
			bp_release(bp, d);
		}
		j->in_len = BS;
		fill_text(j->in, BS, i);
		if (i % 7 == 3)
			memcpy(j->in, "FAILBLCK", 8);
		/* A hole never reaches the compressor, so it cannot fail. */
		if (i % 14 == 5) {
			memcpy(j->in, "FAILBLCK", 8);
			j->allow_sparse = BP_KNOWN_HOLE;
		}
		j->index = i;
		bp_submit(bp, j);
	}
	while ((j = bp_dequeue(bp))) {
		assert_int_equal(j->index, next);
		if (j->index % 7 == 3) {
			assert_int_equal(j->err, -EIO);
			nerr++;
		} else {
			assert_int_equal(j->err, 0);
		}
		next++;
		bp_release(bp, j);
	}
	assert_int_equal(next, 200 + queue);
	assert_int_equal(nerr, (200 + queue + 3) / 7);
	bp_destroy(bp);
	tcomp_destroy(&proto->base);
	assert_int_equal(tcomp_live, 0);
}

static void test_errors(void **state)
{
	(void)state;
	run_errors(0, 2);
	run_errors(0, 8);
	run_errors(1, 2);
	run_errors(4, 3);
	run_errors(8, 16);
}

/* copy() failing: bp_create reports -ENOMEM and leaks nothing. */
static void test_create_copy_fails(void **state)
{
	struct tcomp *proto = tcomp_new();
	unsigned jobs;

	(void)state;
	proto->copy_fails = 1;
	for (jobs = 0; jobs <= 4; jobs++) {
		int err = 0;
		struct bp *bp = bp_create(jobs, 8, &proto->base, BS, &err);

		assert_null(bp);
		assert_int_equal(err, -ENOMEM);
	}
	tcomp_destroy(&proto->base);
	assert_int_equal(tcomp_live, 0);
}

/* Destroying a pool with blocks still in flight must not hang or leak. */
static void test_destroy_in_flight(void **state)
{
	struct tcomp *proto = tcomp_new();
	unsigned jobs;

	(void)state;
	proto->sleep = 1;
	for (jobs = 0; jobs <= 3; jobs++) {
		int err;
		struct bp *bp = bp_create(jobs, 6, &proto->base, BS, &err);
		struct bp_job *j;
		unsigned n = 0;

		assert_non_null(bp);
		while ((j = bp_get_job(bp))) {
			j->in_len = BS;
			fill_text(j->in, BS, n);
			j->index = n++;
			bp_submit(bp, j);
		}
		assert_int_equal(n, 6);
		j = bp_dequeue(bp);
		assert_non_null(j);
		assert_int_equal(j->index, 0);
		bp_release(bp, j);
		bp_destroy(bp);
	}
	tcomp_destroy(&proto->base);
	assert_int_equal(tcomp_live, 0);
}

/*
 * Dequeued jobs may be held before release: after the pool drains, a new
 * submission is what the next dequeue returns, not a held job.
 */
static void test_hold_after_drain(void **state)
{
	struct tcomp *proto = tcomp_new();
	unsigned jobs;

	(void)state;
	for (jobs = 0; jobs <= 3; jobs++) {
		struct bp_job *a, *b, *c, *d;
		int err;
		struct bp *bp = bp_create(jobs, 3, &proto->base, BS, &err);

		assert_non_null(bp);
		a = bp_get_job(bp);
		a->in_len = 100;
		memset(a->in, 'a', 100);
		a->index = 1;
		bp_submit(bp, a);
		b = bp_get_job(bp);
		b->in_len = 100;
		memset(b->in, 'b', 100);
		b->index = 2;
		bp_submit(bp, b);
		assert_ptr_equal(bp_dequeue(bp), a);
		assert_ptr_equal(bp_dequeue(bp), b);
		assert_null(bp_dequeue(bp));
		/* a and b are still held by the caller. */
		c = bp_get_job(bp);
		assert_non_null(c);
		assert_true(c != a && c != b);
		c->in_len = 100;
		memset(c->in, 'c', 100);
		c->index = 3;
		bp_submit(bp, c);
		d = bp_dequeue(bp);
		assert_ptr_equal(d, c);
		assert_int_equal(d->index, 3);
		assert_null(bp_dequeue(bp));
		bp_release(bp, a);
		bp_release(bp, b);
		bp_release(bp, c);
		bp_destroy(bp);
	}
	tcomp_destroy(&proto->base);
}

/*
 * bp_try_dequeue never waits: NULL while the oldest job is unfinished
 * (the workers held at a gate), then every job in order once they finish.
 */
static void test_try_dequeue(void **state)
{
	static const unsigned jobs_list[] = { 0, 1, 2, 4 };
	struct tcomp *proto = tcomp_new();
	unsigned k;

	(void)state;
	for (k = 0; k < sizeof(jobs_list) / sizeof(jobs_list[0]); k++) {
		unsigned jobs = jobs_list[k], i, next = 0, idle = 0;
		struct bp_job *j;
		struct bp *bp;
		int err;

		proto->gated = jobs > 0;
		proto->sleep = jobs > 0;
		__atomic_store_n(&tcomp_gate, 0, __ATOMIC_RELEASE);
		bp = bp_create(jobs, 8, &proto->base, BS, &err);
		assert_non_null(bp);
		assert_null(bp_try_dequeue(bp));	/* nothing in flight */
		for (i = 0; i < 8; i++) {
			j = bp_get_job(bp);
			assert_non_null(j);
			memset(j->in, 'a' + (int)i, BS);
			j->in_len = BS;
			j->index = i;
			bp_submit(bp, j);
		}
		assert_null(bp_get_job(bp));
		if (jobs) {
			/* Held at the gate: nothing is finished, and no call waits. */
			for (i = 0; i < 50; i++)
				assert_null(bp_try_dequeue(bp));
			__atomic_store_n(&tcomp_gate, 1, __ATOMIC_RELEASE);
		}
		while (next < 8) {
			struct timespec ts = { 0, 100000 };

			j = bp_try_dequeue(bp);
			if (!j) {
				if (++idle > 100000)
					fail_msg("jobs=%u: block %u never finished", jobs, next);
				nanosleep(&ts, NULL);
				continue;
			}
			assert_int_equal(j->index, next);
			assert_int_equal(j->err, 0);
			assert_true(j->size_word != 0 && (j->size_word & ((1u << 24) - 1)) < BS);
			next++;
			bp_release(bp, j);
		}
		assert_null(bp_try_dequeue(bp));
		assert_null(bp_dequeue(bp));
		bp_destroy(bp);
	}
	tcomp_destroy(&proto->base);
	assert_int_equal(tcomp_live, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_job_budget),
		cmocka_unit_test(test_queue_buffers_lazy),
		cmocka_unit_test(test_ordering),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_create_copy_fails),
		cmocka_unit_test(test_destroy_in_flight),
		cmocka_unit_test(test_hold_after_drain),
		cmocka_unit_test(test_try_dequeue),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
