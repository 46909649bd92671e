/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdint.h>
#include <stdlib.h>

#include "util/arena.h"

#define CHUNK_BYTES (256u << 10)

struct arena_chunk {
	struct arena_chunk *next;
	size_t pad;			/* keeps data 16-aligned */
	unsigned char data[];
};

void *arena_alloc(struct arena *a, size_t size)
{
	size_t need = (size + 7) & ~(size_t)7, cap;
	struct arena_chunk *c;
	void *p;

	if (need < size)
		return NULL;
	if (!a->head || a->cap - a->used < need) {
		/* An object larger than a chunk gets a chunk of its own. */
		cap = need > CHUNK_BYTES - sizeof(*c) ? need : CHUNK_BYTES - sizeof(*c);
		if (cap > SIZE_MAX - sizeof(*c))
			return NULL;
		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->next = a->head;
		a->head = c;
		a->used = 0;
		a->cap = cap;
	}
	p = a->head->data + a->used;
	a->used += need;
	return p;
}

void arena_free(struct arena *a)
{
	struct arena_chunk *c = a->head, *next;

	for (; c; c = next) {
		next = c->next;
		free(c);
	}
	a->head = NULL;
	a->used = a->cap = 0;
}
