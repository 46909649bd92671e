/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * sqfs-stage's front end: its command line (args.c) and the checks made
 * before anything is mounted or created (checks.c); main() in sqfs-stage.c.
 */
#ifndef SQFS_STAGE_FRONT_H
#define SQFS_STAGE_FRONT_H

#include <stdio.h>

#include "stage/stage.h"
#include "pack/pack.h"
#include "spoolopts.h"

extern const char prog[];

/* What the command line said, beside what it set in s. */
struct parse {
	struct stage *s;
	char *image, *mnt, *spool, *recover;
	int nonopts, allow_other, help, version, bad;
	struct spoolopts kept;	/* the image's -o options, for SPOOL/options */
	struct pack_pseudo pseudo;	/* -o pseudo_file */
};

/* args.c */
void usage(FILE *f);
/* fuse_opt_parse()'s callback, data a struct parse. */
int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs);
/* A copy of argv with --recover SPOOL as -o recover=SPOOL; NULL: no memory. */
char **recover_args(int *argc, char **argv);
void free_argv(char **av);
int recover_options(int *argc, char ***av, char **err);

/* checks.c: each says what is wrong on stderr and returns -1 (1: usage). */
int check_image(struct stage *s, const char *image);
int check_fuse_args(const struct fuse_args *args, const char *mnt);
int check_mountpoint(const char *mnt);
int check_image_free(struct stage *s);
int claim_image(struct stage *s);
int check_outside(const struct stage *s, const char *mnt, const char *spool);
int mark_spool(struct stage *s, int recover, int *marked);
int add_fuse_opt(struct fuse_args *args, const char *opt);
const char *full_hint(int err, int recover);

#endif
