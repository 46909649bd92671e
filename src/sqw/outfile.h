/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The image file: appended sequentially through a buffer by one thread. */
#ifndef SQW_OUTFILE_H
#define SQW_OUTFILE_H

#include "util/util.h"

struct outfile {
	int fd;
	uint64_t pos;		/* logical end (buffered bytes included) */
	uint64_t flushed;	/* bytes on disk */
	uint64_t started;	/* write-back started up to here */
	uint8_t *buf;
	size_t fill, cap;
};

int outfile_init(struct outfile *o, int fd, uint64_t start);
void outfile_cleanup(struct outfile *o);
int outfile_append(struct outfile *o, const void *data, size_t len);
int outfile_flush(struct outfile *o);
/* Read back bytes already appended (dedup verification). */
int outfile_read(struct outfile *o, uint64_t off, void *dst, size_t len);

#endif
