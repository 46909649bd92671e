/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The mount table (/proc/self/mountinfo), one mount at a time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* mountinfo's octal escapes (\040 for a space, ...) undone in place. */
static void unescape(char *p)
{
	char *q = p;

	for (; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' &&
		    p[2] <= '7' && p[3] >= '0' && p[3] <= '7') {
			*q++ = (char)((p[1] - '0') << 6 | (p[2] - '0') << 3 | (p[3] - '0'));
			p += 3;
		} else {
			*q++ = *p;
		}
	}
	*q = '\0';
}

int cli_mounts_each(int (*fn)(const char *mnt, const char *type, const char *src,
			      void *arg), void *arg)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int ret = 0;

	if (!f)
		return 0;
	while (!ret && getline(&line, &cap, f) > 0) {
		char *mnt, *sep, *type, *src, *save = NULL;

		line[strcspn(line, "\n")] = '\0';
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS...] - TYPE SOURCE ... */
		sep = strstr(line, " - ");
		if (!sep)
			continue;
		*sep = '\0';
		type = strtok_r(sep + 3, " ", &save);
		src = strtok_r(NULL, " ", &save);
		save = NULL;
		mnt = strtok_r(line, " ", &save);
		for (int i = 0; mnt && i < 4; i++)
			mnt = strtok_r(NULL, " ", &save);
		if (!type || !src || !mnt)
			continue;
		unescape(src);
		unescape(mnt);
		ret = fn(mnt, type, src, arg);
	}
	free(line);
	fclose(f);
	return ret;
}
