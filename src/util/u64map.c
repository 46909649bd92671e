/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdlib.h>

#include "util/u64map.h"
#include "util/util.h"

static size_t slot_of(uint64_t key, size_t cap)
{
	/* Fibonacci hashing spreads sequential keys (sizes, ids). */
	return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

void u64map_free(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
	m->keys = m->vals = NULL;
	m->n = m->cap = 0;
}

static int resize(struct u64map *m, size_t ncap)
{
	size_t i;
	uint64_t *k = alloc_array(ncap, 8), *v = alloc_array(ncap, 8);

	if (!k || !v) {
		free(k);
		free(v);
		return -ENOMEM;
	}
	for (i = 0; i < m->cap; i++) {
		size_t s;

		if (!m->keys[i])
			continue;
		for (s = slot_of(m->keys[i], ncap); k[s]; s = (s + 1) & (ncap - 1))
			;
		k[s] = m->keys[i];
		v[s] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = k;
	m->vals = v;
	m->cap = ncap;
	return 0;
}

static int grow(struct u64map *m)
{
	return resize(m, m->cap ? m->cap * 2 : 64);
}

int u64map_reserve(struct u64map *m, size_t n)
{
	size_t cap = m->cap ? m->cap : 64;

	while ((n + 1) * 4 > cap * 3) {
		if (cap > SIZE_MAX / 8)
			return -ENOMEM;
		cap *= 2;
	}
	return cap > m->cap ? resize(m, cap) : 0;
}

uint64_t *u64map_find(const struct u64map *m, uint64_t key)
{
	size_t s;

	if (!m->cap)
		return NULL;
	for (s = slot_of(key, m->cap); m->keys[s]; s = (s + 1) & (m->cap - 1))
		if (m->keys[s] == key)
			return &m->vals[s];
	return NULL;
}

uint64_t *u64map_get(struct u64map *m, uint64_t key, int *isnew)
{
	uint64_t *v = u64map_find(m, key);
	size_t s;

	*isnew = 0;
	if (v)
		return v;
	if ((m->n + 1) * 4 > m->cap * 3 && grow(m))
		return NULL;
	for (s = slot_of(key, m->cap); m->keys[s]; s = (s + 1) & (m->cap - 1))
		;
	m->keys[s] = key;
	m->vals[s] = 0;
	m->n++;
	*isnew = 1;
	return &m->vals[s];
}
