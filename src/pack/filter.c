/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * sqfs-pack --exclude: shell wildcards (fnmatch(3)) against paths relative
 * to the source, as tar and rsync take them:
 *  - a pattern without '/' is tried on every name, at any depth;
 *  - one with '/' is anchored at the source's root ("/" and "./" in front
 *    mean the same), and '*' does not cross a '/';
 *  - a trailing '/' matches directories only.
 * An excluded directory takes everything below it along.
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pack/pack.h"
#include "util/util.h"

enum { PAT_ANCHORED = 1, PAT_DIR = 2 };

int pack_filter_add(struct pack_filter *f, const char *pattern)
{
	const char *p = pattern;
	size_t len;
	char *copy;
	int flags = 0;

	while (*p == '/' || (p[0] == '.' && p[1] == '/')) {
		p += *p == '/' ? 1 : 2;
		flags |= PAT_ANCHORED;
	}
	len = strlen(p);
	while (len && p[len - 1] == '/') {
		len--;
		flags |= PAT_DIR;
	}
	if (!len)
		return -EINVAL;
	if (memchr(p, '/', len))
		flags |= PAT_ANCHORED;
	if (array_reserve((void **)&f->pat, &f->cap, f->n + 1, sizeof(*f->pat)))
		return -ENOMEM;
	copy = strndup(p, len);
	if (!copy)
		return -ENOMEM;
	f->pat[f->n].glob = copy;
	f->pat[f->n].flags = flags;
	f->n++;
	return 0;
}

struct add_file {
	struct pack_filter *f;
	size_t *bad_line;
};

static int add_line(void *ctx, char *line, size_t no)
{
	struct add_file *a = ctx;
	int ret = pack_filter_add(a->f, line);

	if (ret == -EINVAL)
		*a->bad_line = no;
	return ret;
}

int pack_filter_add_file(struct pack_filter *f, const char *path, size_t *bad_line)
{
	struct add_file a = { f, bad_line };

	*bad_line = 0;
	return pack_read_lines(path, add_line, &a);
}

void pack_filter_free(struct pack_filter *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->pat[i].glob);
	free(f->pat);
	memset(f, 0, sizeof(*f));
}

int pack_filter_match(const struct pack_filter *f, const char *path, int is_dir)
{
	const char *name = strrchr(path, '/');

	name = name ? name + 1 : path;
	for (size_t i = 0; f && i < f->n; i++) {
		const struct pack_pattern *p = &f->pat[i];

		if ((p->flags & PAT_DIR) && !is_dir)
			continue;
		if (!fnmatch(p->glob, p->flags & PAT_ANCHORED ? path : name, FNM_PATHNAME))
			return 1;
	}
	return 0;
}

/*
 * path as the tree reads it: "a//b", "a/./b" and "a/b/." are a/b (tar
 * keeps member names as given to it).  Ending in "/" or "/.": a directory.
 */
static void path_normalize(char *path, int *is_dir)
{
	char *in = path, *out = path, *end;
	size_t len = strlen(path);

	if (len && (path[len - 1] == '/' ||
		    (path[len - 1] == '.' && (len == 1 || path[len - 2] == '/'))))
		*is_dir = 1;
	while (*in) {
		if (*in == '/') {
			in++;
			continue;
		}
		end = strchrnul(in, '/');
		len = (size_t)(end - in);
		if (!(len == 1 && *in == '.')) {
			if (out != path)
				*out++ = '/';
			memmove(out, in, len);
			out += len;
		}
		in = end;
	}
	*out = '\0';
}

int pack_filter_match_below(const struct pack_filter *f, const char *path, int is_dir)
{
	char *copy, *slash;
	int hit = 0;

	if (!f || !f->n)
		return 0;
	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	path_normalize(copy, &is_dir);
	for (slash = strchr(copy, '/'); slash && !hit; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		hit = *copy && pack_filter_match(f, copy, 1);
		*slash = '/';
	}
	if (!hit)
		hit = *copy && pack_filter_match(f, copy, is_dir);
	free(copy);
	return hit;
}
