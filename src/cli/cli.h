/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Helpers shared by the command-line front ends. */
#ifndef SQW_CLI_H
#define SQW_CLI_H

#include <stdio.h>

#include "sqw/image.h"

/* Exit codes, documented in the man pages. */
enum {
	CLI_EXIT_OK = 0,
	CLI_EXIT_FAIL = 1,	/* packing failed: input, I/O, limits */
	CLI_EXIT_USAGE = 2,	/* bad command line or option value */
};

struct cli_opts {
	struct sqw_image_opts img;
	char comp_spec[128];
	const char *prefix;	/* "--" (sqfs-pack) or "-o " (sqfs-stage): for messages */
	uint32_t block_size;
	int quiet, json, progress;	/* progress: -1 auto (stderr is a TTY) */
	int mkfs_time_set;
};

/* Defaults: zstd, 128 KiB, all CPUs, mkfs time now. */
void cli_opts_init(struct cli_opts *o);

/*
 * Set one writer option by its key ("comp", "block_size", "jobs", ...; the
 * same keys the FUSE -o options use).  val is NULL for flags.  Returns 0,
 * 1 if key is not a writer option, or -EINVAL with msg naming the problem.
 */
int cli_opt_set(struct cli_opts *o, const char *key, const char *val,
		char *msg, size_t msglen);

/*
 * Resolve what depends on several options (the codec and block size), and
 * the mkfs time from SOURCE_DATE_EPOCH when none was given.
 */
int cli_opts_finish(struct cli_opts *o, char *msg, size_t msglen);

/* Progress bar on stderr and the closing summary. */
struct cli_report {
	const struct cli_opts *o;
	const char *image;
	uint64_t total_bytes;
	double start, last;
	int shown;
};

void cli_report_start(struct cli_report *r, const struct cli_opts *o,
		      const char *image, uint64_t total_bytes);
void cli_report_progress(void *arg, const struct sqw_stats *st);
/* Warnings about the image written (to stderr, whatever --quiet says). */
#define CLI_CLAMPED_TIMES_WARNING \
	"modification time(s) outside 1970-01-01..2106-02-07 clamped to that " \
	"range (SquashFS keeps 32-bit seconds)"
void cli_report_summary(struct cli_report *r, const struct sqw_stats *st,
			FILE *out);
/*
 * Flush stdout: 0, or the errno of the write that failed (EIO when none
 * is known), so that a full disk behind a redirection is no silent success.
 */
int cli_stdout_flush(void);
/* After --help or --version: the exit status, with a message on failure. */
int cli_stdout_status(const char *prog);
/* /dev/null for any of descriptors 0-2 that is closed; 0 or -errno. */
int cli_stdio_open(void);

/* An image written beside its target and renamed over it when complete. */
struct cli_publish {
	char *target;
	char *tmp;	/* a name for the file until it is renamed */
	int fd;
	int anon;	/* fd has no name yet (O_TMPFILE) */
};

/*
 * The file an image path names, to be replaced: symbolic links followed (an
 * image is written through them, as mksquashfs writes), the directory made
 * absolute.  0 and a malloc'd *out, or -errno.
 */
int cli_publish_target(const char *path, char **out);
/* follow: resolve target with cli_publish_target() first. */
int cli_publish_open(struct cli_publish *p, const char *target, int follow);
/*
 * What cli_publish_open(p, target, 1) would say, without keeping anything:
 * to fail before the work, not after it.
 */
int cli_publish_check(const char *target);
/* fsync, rename over the target, fsync the directory. */
int cli_publish_commit(struct cli_publish *p);
/* Remove the temporary file; safe to call twice. */
void cli_publish_abort(struct cli_publish *p);

/*
 * Call fn for each mount of this namespace (its escapes undone) until it
 * returns nonzero; returns that, or 0.
 */
int cli_mounts_each(int (*fn)(const char *mnt, const char *type, const char *src,
			      void *arg), void *arg);

/* RLIMIT_NOFILE's soft limit up to its hard limit. */
void cli_fd_limit_raise(void);
/* Load libgcc_s, which pthread_cancel needs, while descriptors are free. */
void cli_unwinder_preload(void);

double cli_now(void);
int cli_parse_size(const char *s, uint64_t *out);
/* A decimal number up to max, digits only. */
int cli_parse_u64(const char *s, uint64_t max, uint64_t *out);
/* A uid or gid: a number below 2^32 - 1, or a user or group name. */
int cli_parse_id(const char *s, int is_group, int64_t *out);

#endif
