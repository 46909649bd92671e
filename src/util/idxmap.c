/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <stdlib.h>

#include "util/idxmap.h"

int idxmap_init(struct idxmap *m, size_t max)
{
	size_t cap = max + max / 3 + 1;

	m->n = 0;
	m->max = max;
	m->cap = cap;
	m->keys = calloc(cap, sizeof(*m->keys));
	m->vals = calloc(cap, sizeof(*m->vals));
	if (!m->keys || !m->vals) {
		idxmap_free(m);
		return -ENOMEM;
	}
	return 0;
}

void idxmap_free(struct idxmap *m)
{
	free(m->keys);
	free(m->vals);
	m->keys = NULL;
	m->vals = NULL;
	m->cap = m->n = m->max = 0;
}

uint32_t *idxmap_get(struct idxmap *m, uint64_t key, int *isnew)
{
	size_t i;

	*isnew = 0;
	if (!m->cap)
		return NULL;
	/* Keys are hashes already: their high bits pick the slot. */
	i = (size_t)(((unsigned __int128)key * m->cap) >> 64);
	while (m->keys[i]) {
		if (m->keys[i] == key)
			return &m->vals[i];
		if (++i == m->cap)
			i = 0;
	}
	if (m->n == m->max)
		return NULL;
	m->keys[i] = key;
	m->vals[i] = 0;
	m->n++;
	*isnew = 1;
	return &m->vals[i];
}
