/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The image file: appended sequentially through a buffer by one thread. */
#ifndef SQW_OUTFILE_H
#define SQW_OUTFILE_H

#include "util/util.h"

struct outfile {
	int fd;
	int direct;		/* buffer written with O_DIRECT (see outfile.c) */
	int direct_on;		/* O_DIRECT currently set on fd */
	int fl;			/* fd's status flags without O_DIRECT */
	uint64_t pos;		/* logical end (buffered bytes included) */
	uint64_t flushed;	/* file offset of buf[0] */
	uint64_t started;	/* write-back started up to here */
	uint8_t *buf;
	size_t fill, cap;
	struct out_queue *q;	/* direct mode, once a direct write worked */
};

int outfile_init(struct outfile *o, int fd, uint64_t start);
/* direct = 0: through the page cache only (tests; init tries O_DIRECT). */
int outfile_init_mode(struct outfile *o, int fd, uint64_t start, int direct);
void outfile_cleanup(struct outfile *o);
int outfile_append(struct outfile *o, const void *data, size_t len);
/*
 * len bytes of fd at off, read straight into the buffer; *rd is set when
 * the error returned is the read's (a short read: -EIO).
 */
int outfile_append_from(struct outfile *o, int fd, uint64_t off, size_t len, int *rd);
/* Everything appended is in the file and fd is in its original mode. */
int outfile_flush(struct outfile *o);
/* Read back bytes already appended (dedup verification). */
int outfile_read(struct outfile *o, uint64_t off, void *dst, size_t len);

#endif
