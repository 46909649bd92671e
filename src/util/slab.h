/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Small objects freed one by one, without malloc's per-object header and
 * 16-byte rounding: sizes in 8-byte classes, each with a free list, carved
 * from an arena.  For a million staged inodes and names that is 24 bytes
 * an inode.  Freed room is reused within its class, never given back
 * before slab_destroy().  Not thread-safe.
 */
#ifndef SQW_SLAB_H
#define SQW_SLAB_H

#include <stddef.h>

#include "util/arena.h"

#define SLAB_MAX 512		/* larger objects go to malloc */

struct slab {
	struct arena mem;
	void *free[SLAB_MAX / 8];	/* by class: (size + 7) / 8 - 1 */
};

/* size zeroed bytes, 8-aligned, or NULL. */
void *slab_alloc(struct slab *s, size_t size);
/* p from slab_alloc(s, size), with the same size. */
void slab_free(struct slab *s, void *p, size_t size);
void slab_destroy(struct slab *s);

#endif
