/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * SPOOL/options: the image options a mount was made with, so that
 * `sqfs-stage --recover SPOOL IMAGE MOUNTPOINT`, the command the daemon
 * prints at start-up, seals the image the lost daemon would have: same
 * compressor, block size, owners, mkfs_time.  How the mount runs (volatile,
 * no_passthrough, FUSE options) is given anew.  One option a line, as given,
 * and last the times in effect (mkfs_time may have come from
 * SOURCE_DATE_EPOCH or the clock, either from "now").  On recovery they
 * come first, so options given with --recover win.
 *
 * SPOOL/pseudo: the -o pseudo_file definitions, one a line as given, so
 * that a recovery makes and re-owns the same entries at its seals without
 * the file, which may have changed or gone since.
 */
#include "spoolopts.h"

#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OPTS_FILE "options"
#define PSEUDO_FILE "pseudo"
#define OPTS_MAX (64 * 1024)

int spoolopts_add(struct spoolopts *o, const char *arg)
{
	char **a;
	size_t i;

	if (!strncmp(arg, "spool=", 6) || !strncmp(arg, "recover=", 8) ||
	    !strncmp(arg, "mkfs_time=", 10) || !strncmp(arg, "all_time=", 9) ||
	    strchr(arg, '\n'))
		return 0;
	/*
	 * A recovery given the options again (as the start-up message says)
	 * would otherwise add a copy of each at every recovery.  Only the
	 * same text goes: the later of two values still wins.
	 */
	for (i = 0; i < o->n; i++) {
		if (!strcmp(o->v[i], arg)) {
			free(o->v[i]);
			memmove(o->v + i, o->v + i + 1, (o->n - i - 1) * sizeof(*o->v));
			o->n--;
			break;
		}
	}
	a = realloc(o->v, (o->n + 1) * sizeof(*a));
	if (!a)
		return -ENOMEM;
	o->v = a;
	o->v[o->n] = strdup(arg);
	if (!o->v[o->n])
		return -ENOMEM;
	o->n++;
	return 0;
}

void spoolopts_free(struct spoolopts *o)
{
	for (size_t i = 0; i < o->n; i++)
		free(o->v[i]);
	free(o->v);
	o->v = NULL;
	o->n = 0;
}

/* Does the file at path hold exactly the len bytes at p? */
static int same_contents(const char *path, const char *p, size_t len)
{
	char buf[4096];
	size_t got = 0, n;
	int same = 1;
	FILE *f = fopen(path, "re");

	if (!f)
		return 0;
	while (same && (n = fread(buf, 1, sizeof(buf), f)) > 0) {
		same = got + n <= len && !memcmp(buf, p + got, n);
		got += n;
	}
	same = same && !ferror(f) && got == len;
	fclose(f);
	return same;
}

/*
 * SPOOL/NAME made to hold the len bytes at want, by a rename.  A recovery
 * with nothing new to say writes nothing: a full spool recovers.
 */
static int write_file(const char *spool, const char *name, const char *want,
		      size_t want_len, int sync)
{
	char *path = NULL, *tmp = NULL;
	FILE *f;
	int ret = -ENOMEM;

	if (asprintf(&path, "%s/%s", spool, name) < 0)
		return -ENOMEM;
	if (asprintf(&tmp, "%s.new", path) < 0) {
		tmp = NULL;
		goto out;
	}
	if (same_contents(path, want, want_len)) {
		ret = 0;
		goto out;
	}
	f = fopen(tmp, "we");
	if (!f) {
		ret = -errno;
		goto out;
	}
	ret = 0;
	if (fwrite(want, 1, want_len, f) != want_len || fflush(f) ||
	    (sync && fdatasync(fileno(f))))
		ret = -errno;
	if (fclose(f) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret)
		unlink(tmp);
out:
	free(tmp);
	free(path);
	return ret;
}

int spoolopts_write(const struct spoolopts *o, const char *spool, uint32_t mkfs_time,
		    int64_t all_time, int sync)
{
	char *want = NULL;
	size_t want_len = 0;
	FILE *text;
	int ret = -ENOMEM;

	/* A recovery rewrites it with the options it was given too. */
	text = open_memstream(&want, &want_len);
	if (!text)
		return -ENOMEM;
	for (size_t i = 0; i < o->n; i++)
		fprintf(text, "%s\n", o->v[i]);
	/* As numbers: "now" was the lost daemon's now. */
	fprintf(text, "mkfs_time=%u\n", mkfs_time);
	if (all_time >= 0)
		fprintf(text, "all_time=%lld\n", (long long)all_time);
	if (!fclose(text))
		ret = write_file(spool, OPTS_FILE, want, want_len, sync);
	free(want);
	return ret;
}

int spoolopts_pseudo_merge(const char *spool, struct pack_pseudo *given, char *msg,
			   size_t msglen)
{
	struct pack_pseudo all = { 0 };
	char *path = NULL;
	size_t i, k;
	int ret;

	if (asprintf(&path, "%s/" PSEUDO_FILE, spool) < 0)
		return -ENOMEM;
	ret = access(path, F_OK) ? 0 : pack_pseudo_add_file(&all, path, msg, msglen);
	free(path);
	if (ret)
		goto fail;
	for (i = 0; i < given->n; i++) {
		for (k = 0; k < all.n && strcmp(all.d[k].def, given->d[i].def); k++)
			;
		if (k < all.n)
			continue;	/* given again, as the start-up message says */
		ret = pack_pseudo_add(&all, given->d[i].def, given->d[i].where, msg, msglen);
		if (ret)
			goto fail;
	}
	pack_pseudo_free(given);
	*given = all;
	return 0;
fail:
	if (ret == -ENOMEM)
		snprintf(msg, msglen, "out of memory");
	pack_pseudo_free(&all);
	return ret;
}

int spoolopts_pseudo_write(const char *spool, const struct pack_pseudo *ps, int sync)
{
	char *want = NULL, *path = NULL;
	size_t want_len = 0;
	FILE *text;
	int ret = -ENOMEM;

	if (!ps->n) {
		/* a spool made without definitions has none to keep */
		if (asprintf(&path, "%s/" PSEUDO_FILE, spool) < 0)
			return -ENOMEM;
		ret = unlink(path) && errno != ENOENT ? -errno : 0;
		free(path);
		return ret;
	}
	text = open_memstream(&want, &want_len);
	if (!text)
		return -ENOMEM;
	for (size_t i = 0; i < ps->n; i++)
		fprintf(text, "%s\n", ps->d[i].def);
	if (!fclose(text))
		ret = write_file(spool, PSEUDO_FILE, want, want_len, sync);
	free(want);
	return ret;
}

/* "-o" ARG with the commas and backslashes of one option escaped. */
/*
 * Is line an image option with a good value (as cli_opt_set() takes it)?
 * It is set in o.  0, or -EBADMSG with what is wrong in msg (non-printing
 * bytes as '?').
 */
static int check_line(struct cli_opts *o, const char *line, char *msg, size_t msglen)
{
	char key[64], why[160], shown[64];
	const char *eq = strchr(line, '=');
	size_t klen = eq ? (size_t)(eq - line) : strlen(line), i;
	int r = 1;

	for (i = 0; line[i] && i < sizeof(shown) - 1; i++)
		shown[i] = line[i] >= 0x20 && line[i] < 0x7f ? line[i] : '?';
	shown[i] = '\0';
	if (klen < sizeof(key)) {
		memcpy(key, line, klen);
		key[klen] = '\0';
		r = cli_opt_set(o, key, eq ? eq + 1 : NULL, why, sizeof(why));
	}
	if (r == 0)
		return 0;
	snprintf(msg, msglen, "'%s%s': %s", shown, line[i] ? "..." : "",
		 r < 0 ? why : "not an image option (the file is damaged)");
	return -EBADMSG;
}

static char *escaped(const char *line)
{
	char *out = malloc(2 * strlen(line) + 3), *p = out;

	if (!out)
		return NULL;
	*p++ = '-';
	*p++ = 'o';
	for (; *line; line++) {
		if (*line == ',' || *line == '\\')
			*p++ = '\\';
		*p++ = *line;
	}
	*p = '\0';
	return out;
}

int spoolopts_read(const char *spool, char ***out, int *n, char **shown)
{
	char *path = NULL, *buf = NULL, *line, *save = NULL, **v = NULL;
	struct cli_opts o;
	size_t len = 0;
	int fd = -1, ret = -ENOMEM, count = 0;
	ssize_t r;

	*out = NULL;
	*n = 0;
	*shown = NULL;
	if (asprintf(&path, "%s/" OPTS_FILE, spool) < 0)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;	/* -ENOENT: the caller warns and goes on */
		goto out;
	}
	buf = malloc(OPTS_MAX + 1);
	if (!buf)
		goto out;
	while (len < OPTS_MAX && (r = read(fd, buf + len, OPTS_MAX - len)) != 0) {
		if (r < 0) {
			ret = -errno;
			goto out;
		}
		len += (size_t)r;
	}
	buf[len] = '\0';
	cli_opts_init(&o);
	v = calloc(len / 2 + 2, sizeof(*v));
	*shown = calloc(1, len + 256);	/* or the message of a bad line */
	if (!v || !*shown)
		goto out;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		/* Only image options were written here: anything else is damage. */
		ret = check_line(&o, line, *shown, len + 256);
		if (ret)
			goto out;
		ret = -ENOMEM;
		v[count] = escaped(line);
		if (!v[count])
			goto out;
		if (count)
			strcat(*shown, ",");
		strcat(*shown, line);
		count++;
	}
	/* Each value good, and together too (a compressor's settings). */
	o.prefix = "";
	o.mkfs_time_set = 1;	/* SOURCE_DATE_EPOCH is not the file's */
	if (cli_opts_finish(&o, *shown, len + 256)) {
		ret = -EBADMSG;
		goto out;
	}
	*out = v;
	*n = count;
	v = NULL;
	ret = 0;
out:
	if (v) {
		for (int i = 0; i < count; i++)
			free(v[i]);
		free(v);
	}
	if (ret && ret != -EBADMSG) {
		free(*shown);
		*shown = NULL;
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	free(path);
	return ret;
}
