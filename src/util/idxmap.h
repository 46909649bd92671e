/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Map from non-zero u64 keys (hashes) to u32 values, sized once for a
 * known number of keys: 12 bytes a slot at most 3/4 full, where a growing
 * u64map takes 16 bytes a slot at 3/8 to 3/4 full (a million tails: 16 MB
 * instead of 32).
 */
#ifndef SQW_IDXMAP_H
#define SQW_IDXMAP_H

#include <stddef.h>
#include <stdint.h>

struct idxmap {
	uint64_t *keys;		/* 0 = empty */
	uint32_t *vals;
	size_t cap, n, max;
};

/* Room for max keys; -ENOMEM. */
int idxmap_init(struct idxmap *m, size_t max);
void idxmap_free(struct idxmap *m);
/*
 * Pointer to the value of key, inserted as 0 with *isnew = 1 if new; NULL
 * when max keys are in already.
 */
uint32_t *idxmap_get(struct idxmap *m, uint64_t key, int *isnew);

#endif
