/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Bump allocation for many small objects freed together: no per-object
 * header or size-class rounding, which at a million nodes is tens of MB.
 */
#ifndef SQW_ARENA_H
#define SQW_ARENA_H

#include <stddef.h>

struct arena_chunk;

struct arena {
	struct arena_chunk *head;
	size_t used, cap;	/* in the head chunk */
};

/* size bytes aligned for any scalar or pointer (8), or NULL. */
void *arena_alloc(struct arena *a, size_t size);
/* Everything allocated from a goes; a is empty and usable again. */
void arena_free(struct arena *a);

#endif
