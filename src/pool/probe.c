/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Cheap test for blocks no codec can shrink (random bytes, data that is
 * already compressed).  The slow codecs spend as long failing on such a
 * block as compressing a text one (zstd:15 23 MB/s, xz 3.6 MB/s, lzo-999
 * 16 MB/s per core on random bytes), only for the block to be stored raw.
 *
 * A block is called incompressible when all of
 *  - its byte distribution is flat: the collision entropy (Renyi order 2,
 *    a lower bound of Shannon's) of a sample is at least 7.95 bits per
 *    byte, so no entropy coder gains even 1% on it,
 *  - so is the distribution of the differences of neighbouring bytes in
 *    the sample: samples of a signal (8-bit audio, an image row) spread
 *    over every byte value, yet each is near the one before it, which
 *    xz's literal coder (its context is the previous byte) and even LZ
 *    matches of short runs of steps exploit, and
 *  - it has no repeats a match finder could use: 4-byte windows (the
 *    shortest match most codecs take) taken at every 16th offset are
 *    looked up from every 17th offset, which meets a repeat at any
 *    distance once every 16 * 17 bytes of it, and a record that recurs
 *    (ids, palette entries, hash keys drawn from a small set) at every
 *    few of its occurrences; more hits than one per 16 KiB of block mean
 *    LZ matches worth having.  Random bytes give about one chance hit in
 *    60 blocks of 128 KiB.
 * The decision depends on the bytes alone, so images stay reproducible
 * whatever the codec library, build or thread count.
 */
#include <string.h>

#include "pool/probe.h"
#include "util/util.h"

#define SAMPLE_CHUNKS	64
#define SAMPLE_CHUNK	256
#define INSERT_STEP	16
#define PROBE_STEP	17

/* Bytes into h, differences of neighbours (n - 1 of them) into d. */
static void count(uint32_t *h, uint32_t *d, const uint8_t *p, size_t n)
{
	size_t i;

	h[p[0]]++;
	for (i = 1; i < n; i++) {
		h[p[i]]++;
		d[(uint8_t)(p[i] - p[i - 1])]++;
	}
}

/* Collision entropy of the m counts in h >= 7.95 bits per byte. */
static int flat_counts(const uint32_t *h, uint64_t m)
{
	uint64_t sum = 0;
	unsigned i;

	for (i = 0; i < 256; i++)
		sum += (uint64_t)h[i] * h[i];
	/*
	 * sum - m estimates m^2 * sum(p_i^2) without the sampling bias, and
	 * H2 = -log2(sum(p_i^2)) >= 7.95  <=>  256 * sum(p_i^2) <= 2^0.05,
	 * in integers: 256 * 10000 * (sum - m) <= 10353 * m^2.
	 */
	return 256u * 10000u * (sum - m) <= 10353u * m * m;
}

/* The sample's bytes, and the steps between neighbours, are both flat. */
static int flat(const uint8_t *p, uint32_t n)
{
	uint32_t h[256] = { 0 }, d[256] = { 0 };
	uint64_t m, md;
	unsigned i;

	if (n >= SAMPLE_CHUNKS * SAMPLE_CHUNK * 4) {
		uint32_t stride = n / SAMPLE_CHUNKS;

		for (i = 0; i < SAMPLE_CHUNKS; i++)
			count(h, d, p + (size_t)i * stride, SAMPLE_CHUNK);
		m = SAMPLE_CHUNKS * SAMPLE_CHUNK;
		md = SAMPLE_CHUNKS * (SAMPLE_CHUNK - 1);
	} else {
		count(h, d, p, n);
		m = n;
		md = n - 1;
	}
	return flat_counts(h, m) && flat_counts(d, md);
}

/* Little-endian on every host: the hash picks the table slots, so a
 * native load would make a big-endian machine decide otherwise. */
static uint32_t load32(const uint8_t *p)
{
	return get_le32(p);
}

static uint32_t hash32(uint32_t v, unsigned bits)
{
	return (uint32_t)(((uint64_t)v * 0x9E3779B97F4A7C15ull) >> (64 - bits));
}

/* More repeat hits than one per 16 KiB; tab has room for n / 4 slots. */
static int repeats(const uint8_t *p, uint32_t n, uint32_t *tab)
{
	uint32_t i, ins = 0, hits = 0, max_hits = n >> 14;
	unsigned bits = 0;

	/* at most half full: n / 16 windows in 2^bits >= n / 8 slots */
	while ((2u << bits) <= n / 4)
		bits++;
	memset(tab, 0xff, sizeof(*tab) << bits);
	/* Look up before inserting, as a match finder does: only earlier
	 * windows are in the table, so a later copy cannot hide its source. */
	for (i = 0; i + 4 <= n; i += PROBE_STEP) {
		uint32_t v, j;

		for (; ins < i; ins += INSERT_STEP)
			tab[hash32(load32(p + ins), bits)] = ins;
		v = load32(p + i);
		j = tab[hash32(v, bits)];
		if (j != UINT32_MAX && load32(p + j) == v && ++hits > max_hits)
			return 1;
	}
	return 0;
}

int bp_probe_incompressible(const uint8_t *p, uint32_t n, void *scratch)
{
	if (n < BP_PROBE_MIN)
		return 0;
	return flat(p, n) && !repeats(p, n, scratch);
}
