/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The journal's format, shared by its writer (journal.c) and its replay
 * (journal_replay.c).
 *
 * Batch: u32 magic, u32 payload length, u64 xxh64 of the payload, then the
 * payload: records, each a u8 type and then its fields, little-endian, as
 * journal.c's put_node() and stage_jnl_dirent()/stage_jnl_xattr() lay them
 * out and journal_replay.c's apply_*() read them.
 */
#ifndef STAGE_JOURNAL_H
#define STAGE_JOURNAL_H

#include "stage/stage.h"

#define JNL_MAGIC 0x424a5153u	/* "SQJB" */
#define JNL_HDR 16

enum { R_NODE = 1, R_ADD, R_DEL, R_XSET, R_XDEL };

/*
 * Rebuild the tree from the journal fd (what a crash cut short is ignored,
 * with all after it), then settle it: link counts from a walk, entries of
 * files whose data is gone and whatever nothing reaches dropped, data files
 * nothing names removed.  0 or -errno.
 */
int stage_jnl_replay(struct stage *s, int fd, struct stage_jnl_stats *st);

#endif
