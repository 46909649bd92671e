/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef SQW_BP_PROBE_H
#define SQW_BP_PROBE_H

#include <stdint.h>

/* Smaller blocks are always handed to the codec. */
#define BP_PROBE_MIN 4096

/*
 * 1 when no codec is expected to shrink the n bytes at p by even about 2%,
 * so the block is stored raw without trying; 0 otherwise.  scratch: n
 * bytes of working memory, 4-byte aligned (a job's output buffer).
 */
int bp_probe_incompressible(const uint8_t *p, uint32_t n, void *scratch);

#endif
