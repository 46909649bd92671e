/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Direct writes of the image handed to writer threads, so that the thread
 * appending (reading sources, copying stored blocks) never waits for the
 * disk while a buffer is free, and the disk sees more than one write at a
 * time.  Buffers are the caller's size, aligned for O_DIRECT.
 */
#ifndef SQW_OUT_QUEUE_H
#define SQW_OUT_QUEUE_H

#include <stddef.h>
#include <stdint.h>

struct out_queue;

/* nbuf buffers of size bytes, nthreads writers on fd; NULL: -ENOMEM/-errno in *err. */
struct out_queue *out_queue_create(int fd, size_t size, unsigned nbuf,
				   unsigned nthreads, int *err);
/* A free buffer, waiting for a write to finish if none is; NULL after an error. */
uint8_t *out_queue_get(struct out_queue *q);
/* Write len bytes of buf (from out_queue_get) at off; buf is the queue's again. */
void out_queue_put(struct out_queue *q, uint8_t *buf, size_t len, uint64_t off);
/* Wait for every write; the first error (negative errno) or 0. */
int out_queue_drain(struct out_queue *q);
/* Drain, stop the threads, free the buffers. */
void out_queue_destroy(struct out_queue *q);

#endif
