/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Filling a tree from a directory or a tar stream (sqfs-pack's inputs). */
#ifndef SQW_PACK_H
#define SQW_PACK_H

#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include "sqw/image.h"

/* Messages for the user: where and why, printed by the front end. */
struct pack_err {
	char *path;		/* whole, however deep (pack_err_path()), or NULL */
	const char *what;
	int code;		/* negative errno, or -EBADMSG for bad input */
	char detail[256];
};

/* Set e->path from fmt (the old one freed); NULL when out of memory. */
void pack_err_path(struct pack_err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Free e->path. */
void pack_err_clear(struct pack_err *e);

/* "PROG: warning: " and the message on warn (nothing when warn is NULL). */
void pack_warn(FILE *warn, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Call fn(ctx, line, number) for each line of path but blank ones and
 * comments (first non-blank '#'), its line end removed; stops at fn's first
 * nonzero return, which it returns (-errno if path cannot be read).
 */
int pack_read_lines(const char *path, int (*fn)(void *ctx, char *line, size_t no),
		    void *ctx);

/* --- --exclude patterns (filter.c) --- */
struct pack_pattern {
	char *glob;
	int flags;
};
struct pack_filter {
	struct pack_pattern *pat;
	size_t n, cap;
};

/* -EINVAL: an empty pattern. */
int pack_filter_add(struct pack_filter *f, const char *pattern);
/* One pattern a line; blank lines and lines starting with '#' skipped. */
int pack_filter_add_file(struct pack_filter *f, const char *path, size_t *bad_line);
void pack_filter_free(struct pack_filter *f);
/* path: relative to the source root, no leading '/'.  f may be NULL. */
int pack_filter_match(const struct pack_filter *f, const char *path, int is_dir);
/* The same for path or any directory above it (tar members); -ENOMEM. */
int pack_filter_match_below(const struct pack_filter *f, const char *path, int is_dir);

/* --- --pseudo definitions (pseudo.c) --- */
struct pack_pseudo_def {
	char *path, *target;	/* target: of a symlink */
	char *def, *where;	/* as given, and FILE:LINE or NULL, for messages */
	char type;		/* d m b c s x, p (FIFO) S (socket) */
	uint32_t mode, uid, gid;
	uint64_t rdev;
	char *xname;		/* x: the attribute's full name */
	uint8_t *xvalue;	/* x: its value, decoded */
	uint32_t xlen;
};
struct pack_pseudo {
	struct pack_pseudo_def *d;
	size_t n, cap;
};

/* Parse one definition (-EINVAL with msg saying what is wrong). */
int pack_pseudo_add(struct pack_pseudo *ps, const char *def, const char *where,
		    char *msg, size_t msglen);
/* One definition a line; blank lines and lines starting with '#' skipped. */
int pack_pseudo_add_file(struct pack_pseudo *ps, const char *file, char *msg, size_t msglen);
void pack_pseudo_free(struct pack_pseudo *ps);
/* "pseudo definition 'DEF' (FILE:LINE)", for messages; its whole length. */
size_t pack_pseudo_name(const struct pack_pseudo_def *d, char *buf, size_t size);
/* Can an entry of this mode carry x definition d's attribute? */
int pack_pseudo_xattr_fits(const struct pack_pseudo_def *d, uint32_t mode);
/* The S_IFMT type and permission bits of what d makes. */
uint32_t pack_pseudo_mode(const struct pack_pseudo_def *d);
/*
 * Apply them in order to a filled tree; new entries get mtime.  One naming
 * an existing entry (but type m) is ignored with a warning, as mksquashfs does.
 */
int pack_pseudo_apply(const struct pack_pseudo *ps, sqw_tree_t *tree, int64_t mtime,
		      FILE *warn, struct pack_err *err);

/* --- directory input --- */
struct dir_source {
	int rootfd;
	char *root;		/* as given */
	dev_t skip_dev;		/* the output image, if it lies inside */
	ino_t skip_ino;
	int warned_xattr;
	FILE *warn;		/* warnings, or NULL */
	const struct pack_filter *filter;	/* entries left out, or NULL */
	int one_fs;		/* other file systems' directories stay empty */
	int no_proc;		/* no /proc/self/fd: xattrs read by full path */
};

/*
 * A regular file of the source directory, as the scan found it: the data
 * pass opens it again by path and reads it only if it is still that file.
 */
struct dir_file {
	dev_t dev;
	ino_t ino;
	uint64_t size;
	struct timespec mtime;
	int warned;	/* changed since the scan: said once (opened up to 4 times) */
	char path[];	/* relative to the root */
};

extern const struct sqw_source_ops dir_source_ops;

/* The pieces of dir_source_ops, for other fd-backed sources (the stage). */
int fd_source_openat(int dirfd, const char *name, void **handle);
int fd_source_read(void *handle, uint64_t off, void *buf, size_t len);
int64_t fd_source_next_data(void *handle, uint64_t off);
void fd_source_close(void *handle);

int dir_source_open(struct dir_source *ds, const char *root, FILE *warn);
void dir_source_close(struct dir_source *ds);
/* f, still the file scanned, changed since (now its size is now): warn. */
void dir_source_changed(struct dir_source *ds, struct dir_file *f, uint64_t now);
/* Scan ds->root into tree: metadata now, data later through the ops. */
int dir_scan(struct dir_source *ds, sqw_tree_t *tree, int keep_xattrs,
	     struct pack_err *err);

/* --- tar input: data is spooled so the image can take canonical order --- */
struct spool;

extern const struct sqw_source_ops spool_source_ops;

struct spool *spool_create(const char *dir, int *err);
void spool_destroy(struct spool *sp);
/*
 * Compress while reading: the data blocks of members spooled from a
 * stream go through a block processor of their own (img->jobs workers)
 * as they arrive, and their stored forms (what sqw_image_write would make
 * of them with img) go to a second temporary file in dir, for the
 * writer's stored_block.  The image is the same bytes; only the time
 * moves.  Out of room for them, it warns on warn and stops.  -errno.
 */
int spool_ahead_start(struct spool *sp, const char *dir,
		      const struct sqw_image_opts *img, FILE *warn);
/*
 * Fragment blocks too (rehearse.c): now and then, between two members, a
 * copy of the tree read so far goes through the writer's data pass at idle
 * priority, and the fragment blocks it compresses are kept under their
 * keys in a third temporary file in dir, for the writer's stored_frag
 * (spool_rh_stored_frag, with spool_rh_tail_digest).  -errno.
 */
int spool_rehearse_start(struct spool *sp, const char *dir, const struct sqw_image_opts *img,
			 FILE *warn);
/* The end of the archive: the running rehearsal stops; what it made stays. */
void spool_rehearse_finish(struct spool *sp);
/* A rehearsal was started: the image's pass may find stored blocks. */
int spool_rehearsed(const struct spool *sp);
int spool_rh_stored_frag(void *ctx, const uint8_t key[16], uint32_t len, void *buf,
			 uint32_t *word);
int spool_rh_tail_digest(void *ctx, void *src, uint64_t size, uint32_t len,
			 uint8_t digest[16], uint64_t *token);
/*
 * The image could not grow (code): 1 if the blocks compressed ahead gave
 * their room up (with the warning), so the image may be written again
 * from the start, without them; 0 if they had none to give.
 */
int spool_give_way(struct spool *sp, int code);

/*
 * Read a tar archive (any compression libarchive knows) from fd into tree,
 * file data into sp, or, for an uncompressed archive in a regular file,
 * only where it lies in fd (which must then stay open and unchanged until
 * the image is written).  default_mtime is used for directories the
 * archive implies but does not list.  Members filter matches (or one of
 * their directories) are skipped.
 */
int tar_read(int fd, sqw_tree_t *tree, struct spool *sp, int keep_xattrs,
	     int64_t default_mtime, const struct pack_filter *filter, FILE *warn,
	     struct pack_err *err);

#endif
