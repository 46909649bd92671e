/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef SQW_SPOOL_H
#define SQW_SPOOL_H

#include "pack/pack.h"

struct spool {
	int fd;
	int in_fd;		/* the archive itself, for files read in place; -1 */
	uint64_t size;		/* bytes appended, buffered ones included */
	uint8_t *buf;
	size_t fill;
};

struct spool_extent {
	uint64_t off;		/* in the file */
	uint64_t pos;		/* in the spool */
	uint64_t len;
};

struct spool_file {
	struct spool *sp;
	uint64_t size;
	struct spool_extent *ext;
	size_t n, cap;
	int unsorted;		/* extents out of order or overlapping */
	int in_place;		/* extents are offsets in sp->in_fd, not the spool */
};

int spool_file_append(struct spool *sp, struct spool_file *f, uint64_t off,
		      const void *data, size_t len);
/* f's bytes [off, off+len) are at pos in sp->in_fd (for a file with in_place set). */
int spool_file_in_place(struct spool_file *f, uint64_t off, uint64_t pos, uint64_t len);
int spool_flush(struct spool *sp);
void spool_file_free(void *f);

#endif
