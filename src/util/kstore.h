/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Index of stored fragment blocks by key (the writer's 16-byte keys,
 * image.h): where each one lies in its owner's file, and the serial of the
 * last write that used it, so that a rehearsal can give back the room of
 * the blocks nobody took.  The bytes live wherever the owner puts them
 * (sqfs-stage's background store, sqfs-pack's ahead file).
 */
#ifndef SQW_KSTORE_H
#define SQW_KSTORE_H

#include <stddef.h>
#include <stdint.h>

#include "util/u64map.h"

struct kent {
	uint8_t key[16];
	uint64_t off;		/* in the owner's file */
	uint32_t word;		/* SquashFS size word */
	uint32_t used;		/* serial of the last write that used it */
};

struct kstore {
	struct kent *e;
	size_t n, cap;
	struct u64map map;	/* first 8 key bytes | 1 -> index + 1 */
	uint32_t serial;	/* of the write running now */
};

void kstore_free(struct kstore *ks);
/* The entry of key, or NULL. */
struct kent *kstore_find(struct kstore *ks, const uint8_t key[16]);
/*
 * Index key at off, used now.  1: added; 0: not kept (already there, a key
 * of the same 64-bit prefix is, or no memory), so the caller's copy is
 * not needed.  Callers check kstore_find first to spare the bytes.
 */
int kstore_add(struct kstore *ks, const uint8_t key[16], uint64_t off, uint32_t word);
/*
 * Forget the entries the current serial did not use, calling drop (if not
 * NULL) on each, so the owner can free its room.
 */
void kstore_evict(struct kstore *ks, void (*drop)(void *ctx, uint64_t off, uint32_t word),
		  void *ctx);

#endif
