/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef SQFS_STAGE_SPOOLOPTS_H
#define SQFS_STAGE_SPOOLOPTS_H

#include <stddef.h>
#include <stdint.h>

#include "pack/pack.h"

/* The image's -o options, to be kept in SPOOL/options (spoolopts.c). */
struct spoolopts {
	char **v;
	size_t n;
};

/* Keep one -o option (not spool=, recover=, nor the times: see write). */
int spoolopts_add(struct spoolopts *o, const char *arg);
void spoolopts_free(struct spoolopts *o);
/* Write SPOOL/options: the options kept, then the times (all_time < 0: none). */
int spoolopts_write(const struct spoolopts *o, const char *spool, uint32_t mkfs_time,
		    int64_t all_time, int sync);
/*
 * Read SPOOL/options as *n arguments "-oOPT" (each malloc'ed, as is the
 * array), and *shown, the options comma-separated for a message.  No file:
 * -ENOENT.  A line that is not an image option with a good value: -EBADMSG
 * with *shown (malloc'ed) saying which and why.
 */
int spoolopts_read(const char *spool, char ***out, int *n, char **shown);
/*
 * Recovery: *given becomes the definitions kept in SPOOL/pseudo, then
 * those of *given not among them (the same text).  -errno with msg.
 */
int spoolopts_pseudo_merge(const char *spool, struct pack_pseudo *given, char *msg,
			   size_t msglen);
/* Write SPOOL/pseudo: ps's definitions, as given; none: no file. */
int spoolopts_pseudo_write(const char *spool, const struct pack_pseudo *ps, int sync);

#endif
