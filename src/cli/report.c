/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Progress on a terminal and the closing summary (text or JSON). */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

double cli_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void cli_report_start(struct cli_report *r, const struct cli_opts *o,
		      const char *image, uint64_t total_bytes)
{
	memset(r, 0, sizeof(*r));
	r->o = o;
	r->image = image;
	r->total_bytes = total_bytes;
	r->start = cli_now();
}

void cli_report_progress(void *arg, const struct sqw_stats *st)
{
	struct cli_report *r = arg;
	double now = cli_now(), frac;
	int width = 40, fill;

	/* an explicit --progress wins over -q, which silences the summary */
	if (r->o->progress == 0 ||
	    (r->o->progress < 0 && (r->o->quiet || !isatty(STDERR_FILENO))))
		return;
	if (now - r->last < 0.1 && st->progress_bytes < r->total_bytes)
		return;
	r->last = now;
	frac = r->total_bytes ? (double)st->progress_bytes / (double)r->total_bytes : 1.0;
	if (frac > 1)
		frac = 1;
	fill = (int)(frac * width);
	fprintf(stderr, "\r[%.*s%*s] %3d%%  %.1f / %.1f MiB", fill,
		"========================================", width - fill, "",
		(int)(frac * 100), st->progress_bytes / 1048576.0,
		r->total_bytes / 1048576.0);
	r->shown = 1;
}

static const char *human(double v, char *buf, size_t len)
{
	const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int i = 0;

	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	snprintf(buf, len, i ? "%.2f %s" : "%.0f %s", v, u[i]);
	return buf;
}

/* Length of the valid UTF-8 sequence at p (1 to 4), or 0. */
static int utf8_len(const unsigned char *p)
{
	int n = p[0] < 0xc2 ? 0 : p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 : p[0] < 0xf5 ? 4 : 0;

	for (int i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	/* overlong forms, surrogates, beyond U+10FFFF */
	if ((n == 3 && p[0] == 0xe0 && p[1] < 0xa0) || (n == 3 && p[0] == 0xed && p[1] >= 0xa0) ||
	    (n == 4 && p[0] == 0xf0 && p[1] < 0x90) || (n == 4 && p[0] == 0xf4 && p[1] >= 0x90))
		return 0;
	return n;
}

/*
 * A path as a JSON string body.  JSON has no bytes: one that is not part of
 * valid UTF-8 becomes U+DC80..U+DCFF, as Python's surrogateescape reads
 * and writes file names, so the exact path can be had back.
 */
static void json_put(const char *s, FILE *out)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		int n = *p < 0x80 ? 1 : utf8_len(p);

		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(out, "\\u%04x", *p);
		else if (n == 0)
			fprintf(out, "\\udc%02x", *p), n = 1;
		else
			fwrite(p, 1, (size_t)n, out);
		p += n ? n : 1;
	}
}

static void summary_json(struct cli_report *r, const struct sqw_stats *st,
			 double secs, FILE *out)
{
	const struct sqw_image_opts *img = &r->o->img;
	char comp[SQW_COMP_DESCRIBE_MAX];

	fprintf(out, "{\"image\": \"");
	json_put(r->image, out);
	fprintf(out, "\", \"compressor\": \"%s\", \"level\": %d, \"settings\": \"%s\", "
		"\"block_size\": %u, "
		"\"inodes\": %llu, \"files\": %llu, \"directories\": %llu, "
		"\"symlinks\": %llu, \"devices\": %llu, \"fifos_sockets\": %llu, "
		"\"bytes_in\": %llu, \"image_size\": %llu, \"ratio\": %.4f, "
		"\"fragments\": %llu, \"duplicate_files\": %llu, "
		"\"duplicate_bytes\": %llu, \"duplicate_tails\": %llu, "
		"\"sparse_bytes\": %llu, \"ids\": %u, \"xattr_sets\": %llu, "
		"\"blocks\": %llu, \"stored_blocks\": %llu, \"stored_fragments\": %llu, "
		"\"clamped_times\": %llu, \"seconds\": %.3f}\n",
		sqw_comp_name(img->comp.id), img->comp.level,
		sqw_comp_config_describe(&img->comp, comp, sizeof(comp)),
		img->comp.block_size, (unsigned long long)st->inodes, (unsigned long long)st->files,
		(unsigned long long)st->dirs, (unsigned long long)st->symlinks,
		(unsigned long long)st->devices, (unsigned long long)st->ipcs,
		(unsigned long long)st->bytes_in, (unsigned long long)st->image_size,
		st->bytes_in ? (double)st->image_size / (double)st->bytes_in : 0.0,
		(unsigned long long)st->fragments, (unsigned long long)st->dedup_files,
		(unsigned long long)st->dedup_bytes, (unsigned long long)st->dedup_tails,
		(unsigned long long)st->sparse_bytes, st->ids,
		(unsigned long long)st->xattr_sets, (unsigned long long)st->blocks,
		(unsigned long long)st->stored_blocks,
		(unsigned long long)st->stored_frags,
		(unsigned long long)st->clamped_times, secs);
}

void cli_report_summary(struct cli_report *r, const struct sqw_stats *st,
			FILE *out)
{
	const struct sqw_image_opts *img = &r->o->img;
	double secs = cli_now() - r->start;
	char a[32], b[32], comp[SQW_COMP_DESCRIBE_MAX];

	if (r->shown) {
		fputc('\n', stderr);
		r->shown = 0;
	}
	if (r->o->json) {
		summary_json(r, st, secs, out);
		return;
	}
	if (r->o->quiet)
		return;
	fprintf(out, "SquashFS 4.0 image %s: %s, block size %u, %u job(s)\n",
		r->image, sqw_comp_config_describe(&img->comp, comp, sizeof(comp)),
		img->comp.block_size, img->jobs);
	fprintf(out, "Filesystem size %s (%llu bytes)\n",
		human((double)st->image_size, a, sizeof(a)),
		(unsigned long long)st->image_size);
	fprintf(out, "\t%.2f%% of uncompressed file data (%s)\n",
		st->bytes_in ? 100.0 * (double)st->image_size / (double)st->bytes_in : 0.0,
		human((double)st->bytes_in, b, sizeof(b)));
	fprintf(out, "Number of inodes %llu\n", (unsigned long long)st->inodes);
	fprintf(out, "Number of files %llu\n", (unsigned long long)st->files);
	fprintf(out, "Number of fragments %llu\n", (unsigned long long)st->fragments);
	fprintf(out, "Number of symbolic links %llu\n", (unsigned long long)st->symlinks);
	fprintf(out, "Number of device nodes %llu\n", (unsigned long long)st->devices);
	fprintf(out, "Number of fifo and socket nodes %llu\n", (unsigned long long)st->ipcs);
	fprintf(out, "Number of directories %llu\n", (unsigned long long)st->dirs);
	fprintf(out, "Number of ids (unique uids + gids) %u\n", st->ids);
	fprintf(out, "Number of xattr sets %llu\n", (unsigned long long)st->xattr_sets);
	fprintf(out, "Duplicate files %llu (%s), duplicate tails %llu\n",
		(unsigned long long)st->dedup_files,
		human((double)st->dedup_bytes, a, sizeof(a)),
		(unsigned long long)st->dedup_tails);
	fprintf(out, "Sparse bytes %s\n", human((double)st->sparse_bytes, a, sizeof(a)));
	/* sqfs-pack --tar from a stream (blocks counts fragment blocks too). */
	if (st->stored_blocks)
		fprintf(out, "Data blocks compressed while reading %llu of %llu\n",
			(unsigned long long)st->stored_blocks,
			(unsigned long long)(st->blocks - st->fragments));
	if (st->stored_frags)
		fprintf(out, "Fragment blocks compressed while reading %llu of %llu\n",
			(unsigned long long)st->stored_frags,
			(unsigned long long)st->fragments);
	fprintf(out, "Time %.2f s\n", secs);
}
