/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdlib.h>
#include <string.h>

#include "util/slab.h"

static size_t slab_class(size_t size)
{
	return size ? (size + 7) / 8 - 1 : 0;
}

void *slab_alloc(struct slab *s, size_t size)
{
	size_t c = slab_class(size);
	void *p;

	if (size > SLAB_MAX)
		return calloc(1, size);
	p = s->free[c];
	if (p)
		memcpy(&s->free[c], p, sizeof(void *));
	else if (!(p = arena_alloc(&s->mem, (c + 1) * 8)))
		return NULL;
	memset(p, 0, (c + 1) * 8);
	return p;
}

void slab_free(struct slab *s, void *p, size_t size)
{
	size_t c = slab_class(size);

	if (!p)
		return;
	if (size > SLAB_MAX) {
		free(p);
		return;
	}
	memcpy(p, &s->free[c], sizeof(void *));
	s->free[c] = p;
}

void slab_destroy(struct slab *s)
{
	arena_free(&s->mem);
	memset(s->free, 0, sizeof(s->free));
}
