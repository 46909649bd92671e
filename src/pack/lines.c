/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Line files of sqfs-pack's options (--exclude-from, --pseudo-file). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "pack/pack.h"

int pack_read_lines(const char *path, int (*fn)(void *ctx, char *line, size_t no),
		    void *ctx)
{
	FILE *in = fopen(path, "re");
	char *line = NULL, *p;
	size_t cap = 0, no = 0;
	ssize_t len;
	int ret = 0;

	if (!in)
		return -errno;
	errno = 0;
	while (!ret && (len = getline(&line, &cap, in)) >= 0) {
		no++;
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		for (p = line; *p == ' ' || *p == '\t'; p++)
			;
		if (*p && *p != '#')
			ret = fn(ctx, line, no);
	}
	/* getline's own errno (a directory's EISDIR), not a vague EIO. */
	if (!ret && ferror(in))
		ret = errno ? -errno : -EIO;
	free(line);
	fclose(in);
	return ret;
}
