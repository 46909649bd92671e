/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdlib.h>
#include <string.h>

#include "util/kstore.h"
#include "util/util.h"

static uint64_t key64(const uint8_t key[16])
{
	uint64_t k = 0;
	int i;

	for (i = 0; i < 8; i++)
		k = k << 8 | key[i];
	return k | 1;
}

void kstore_free(struct kstore *ks)
{
	u64map_free(&ks->map);
	free(ks->e);
	ks->e = NULL;
	ks->n = ks->cap = 0;
}

struct kent *kstore_find(struct kstore *ks, const uint8_t key[16])
{
	uint64_t *v = u64map_find(&ks->map, key64(key));
	struct kent *e;

	if (!v || !*v)
		return NULL;
	e = &ks->e[*v - 1];
	return memcmp(e->key, key, 16) ? NULL : e;
}

int kstore_add(struct kstore *ks, const uint8_t key[16], uint64_t off, uint32_t word)
{
	struct kent *e;
	uint64_t *v;
	int isnew;

	if (array_reserve((void **)&ks->e, &ks->cap, ks->n + 1, sizeof(*ks->e)))
		return 0;
	v = u64map_get(&ks->map, key64(key), &isnew);
	if (!v || !isnew)
		return 0;	/* a 64-bit prefix twin: it stays uncached */
	e = &ks->e[ks->n];
	memcpy(e->key, key, 16);
	e->off = off;
	e->word = word;
	e->used = ks->serial;
	*v = ++ks->n;
	return 1;
}

void kstore_evict(struct kstore *ks, void (*drop)(void *ctx, uint64_t off, uint32_t word),
		  void *ctx)
{
	size_t i, k = 0;

	u64map_free(&ks->map);
	for (i = 0; i < ks->n; i++) {
		struct kent *e = &ks->e[i];
		uint64_t *v;
		int isnew;

		if (e->used != ks->serial) {
			if (drop)
				drop(ctx, e->off, e->word);
			continue;
		}
		ks->e[k] = *e;
		v = u64map_get(&ks->map, key64(e->key), &isnew);
		if (v)
			*v = k + 1;
		k++;
	}
	ks->n = k;
}
