/* SPDX-License-Identifier: GPL-2.0-or-later */
/* pool/probe.c: which blocks are stored raw without asking the codec. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pool/probe.h"

#define BS (128u * 1024u)

static uint64_t rng_state;
static uint32_t scratch[BS / 4];

static int probe(const uint8_t *p, uint32_t n)
{
	return bp_probe_incompressible(p, n, scratch);
}

static uint64_t rnd64(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static uint8_t *random_block(size_t n, uint64_t seed)
{
	uint8_t *p = malloc(n);
	size_t i;

	assert_non_null(p);
	rng_state = seed;
	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(rnd64() >> 32);
	return p;
}

static void test_random_is_raw(void **state)
{
	uint64_t seed;

	(void)state;
	for (seed = 1; seed <= 64; seed++) {
		uint8_t *p = random_block(BS, seed * 0x9E3779B97F4A7C15ull);

		assert_int_equal(probe(p, BS), 1);
		/* the whole-block path (no sampling) of smaller blocks too */
		assert_int_equal(probe(p, BP_PROBE_MIN), 1);
		assert_int_equal(probe(p, 60000), 1);
		free(p);
	}
}

static void test_small_blocks_go_to_codec(void **state)
{
	uint8_t *p = random_block(BP_PROBE_MIN, 7);

	(void)state;
	assert_int_equal(probe(p, BP_PROBE_MIN - 1), 0);
	assert_int_equal(probe(p, 0), 0);
	free(p);
}

static void test_zeros_and_text(void **state)
{
	static const char *const words[] = { "alpha ", "beta ", "gamma\n", "delta\t" };
	uint8_t *p = calloc(1, BS);
	size_t k = 0;

	(void)state;
	assert_non_null(p);
	assert_int_equal(probe(p, BS), 0);
	rng_state = 99;
	while (k + 8 <= BS) {
		const char *w = words[rnd64() % 4];

		memcpy(p + k, w, strlen(w));
		k += strlen(w);
	}
	assert_int_equal(probe(p, BS), 0);
	free(p);
}

/* Flat enough to look random to a weak test, yet an entropy coder gains. */
static void test_skewed_bytes(void **state)
{
	uint8_t *p = random_block(BS, 5);
	size_t i;

	(void)state;
	/* 240 of 256 values: 7.91 bits per byte, 1.2% to gain */
	for (i = 0; i < BS; i++)
		p[i] = (uint8_t)(p[i] % 240);
	assert_int_equal(probe(p, BS), 0);
	/* 128 values: 7 bits */
	for (i = 0; i < BS; i++)
		p[i] &= 0x7f;
	assert_int_equal(probe(p, BS), 0);
	free(p);
}

/*
 * Every byte value equally often and no repeats, but each byte near the one
 * before (8-bit audio, an image row): xz shrinks such a block by 31%, zstd
 * by 20%.
 */
static void test_correlated_steps(void **state)
{
	static const unsigned spans[] = { 16, 32, 64 };
	uint8_t *p = random_block(BS, 41);
	size_t i, k;

	(void)state;
	for (k = 0; k < sizeof(spans) / sizeof(spans[0]); k++) {
		uint8_t b = 0;

		/* steps uniform in [0, span), then centred: a random walk */
		for (i = 0; i < BS; i++) {
			b = (uint8_t)(b + (uint8_t)(rnd64() % spans[k]) - spans[k] / 2 * (k & 1));
			p[i] = b;
		}
		assert_int_equal(probe(p, BS), 0);
		assert_int_equal(probe(p, 60000), 0);
	}
	free(p);
}

/*
 * Short records drawn from a small set (ids, palette entries, hash keys):
 * flat bytes, flat steps, no long repeats, yet zstd:15 halves such a block.
 */
static void test_records_from_a_set(void **state)
{
	static const unsigned lens[] = { 3, 4, 5, 6, 7, 8 };
	static const unsigned sets[] = { 2048, 4096, 32768 };
	uint8_t *dict = random_block(8 * 32768, 77), *p = malloc(BS);
	size_t a, b, k;

	(void)state;
	assert_non_null(p);
	for (a = 0; a < sizeof(lens) / sizeof(lens[0]); a++) {
		for (b = 0; b < sizeof(sets) / sizeof(sets[0]); b++) {
			/* 3-byte records from 32768 are nearly random: 24 bits of 15 */
			if (lens[a] == 3 && sets[b] > 4096)
				continue;
			for (k = 0; k + lens[a] <= BS; k += lens[a])
				memcpy(p + k, dict + (rnd64() % sets[b]) * 8, lens[a]);
			memset(p + k, 0, BS - k);
			if (probe(p, BS))
				fail_msg("%u-byte records from %u values judged incompressible",
					 lens[a], sets[b]);
		}
	}
	free(p);
	free(dict);
}

/* Random bytes with a repeat an LZ codec would use, at any distance. */
static void test_repeats(void **state)
{
	static const uint32_t lens[] = { 4096, 8192, 65536 };
	static const uint32_t dists[] = {
		1, 7, 16, 17, 272, 544, 1000, 4352, 30001, 65536
	};
	size_t a, b;

	(void)state;
	for (a = 0; a < sizeof(lens) / sizeof(lens[0]); a++) {
		for (b = 0; b < sizeof(dists) / sizeof(dists[0]); b++) {
			uint8_t *p = random_block(BS, 11 + a * 100 + b);
			uint32_t src = 3000 + (uint32_t)b * 5, len = lens[a], i;

			if (src + dists[b] + len > BS)
				len = BS - src - dists[b];
			/* forward, as an LZ decoder copies: period dists[b] */
			for (i = 0; i < len; i++)
				p[src + dists[b] + i] = p[src + i];
			assert_int_equal(probe(p, BS), 0);
			free(p);
		}
	}
}

/* 1 MiB blocks: the table grows with the block, far repeats are seen. */
static void test_big_block(void **state)
{
	uint32_t n = 1u << 20;
	uint32_t *big = malloc(n);
	uint8_t *p = random_block(n, 31);

	(void)state;
	assert_non_null(big);
	assert_int_equal(bp_probe_incompressible(p, n, big), 1);
	memcpy(p + 900000, p + 1000, 32768);
	assert_int_equal(bp_probe_incompressible(p, n, big), 0);
	free(p);
	free(big);
}

/* A repeat too short to matter (and one coincidence) leaves it raw. */
static void test_short_repeat_is_raw(void **state)
{
	uint8_t *p = random_block(BS, 21);

	(void)state;
	memcpy(p + 90000, p + 100, 300);
	assert_int_equal(probe(p, BS), 1);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_is_raw),
		cmocka_unit_test(test_small_blocks_go_to_codec),
		cmocka_unit_test(test_zeros_and_text),
		cmocka_unit_test(test_skewed_bytes),
		cmocka_unit_test(test_correlated_steps),
		cmocka_unit_test(test_records_from_a_set),
		cmocka_unit_test(test_repeats),
		cmocka_unit_test(test_big_block),
		cmocka_unit_test(test_short_repeat_is_raw),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
