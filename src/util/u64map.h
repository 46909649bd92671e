/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Open-addressing map from non-zero u64 keys to u64 values. */
#ifndef SQW_U64MAP_H
#define SQW_U64MAP_H

#include <stddef.h>
#include <stdint.h>

struct u64map {
	uint64_t *keys;		/* 0 = empty */
	uint64_t *vals;
	size_t n, cap;
};

void u64map_free(struct u64map *m);
/* Pointer to the value of key (inserted as 0 if new with *isnew = 1). */
uint64_t *u64map_get(struct u64map *m, uint64_t key, int *isnew);
/*
 * Room for n keys in all without growing again: a map whose size is known
 * ahead then peaks at its final size, not at 1.5 times it while it grows.
 */
int u64map_reserve(struct u64map *m, size_t n);
/* Pointer to the value of key or NULL. */
uint64_t *u64map_find(const struct u64map *m, uint64_t key);

#endif
