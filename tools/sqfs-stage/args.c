/* SPDX-License-Identifier: GPL-2.0-or-later */
/* sqfs-stage's command line: -o options, --recover and SPOOL/options. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "front.h"

void usage(FILE *f)
{
	fprintf(f,
"Usage: %s [OPTIONS] IMAGE MOUNTPOINT\n"
"Mount an empty writable tree at MOUNTPOINT; sqfs-seal(1) or unmounting\n"
"writes it to the SquashFS image IMAGE.\n\n"
"  -f                     stay in the foreground (log to stderr)\n"
"  -d                     FUSE debug output (implies -f)\n"
"  -s                     single-threaded\n"
"  -o comp=NAME[:LEVEL][:KEY[=VALUE]...]\n"
"                         compressor, as sqfs-pack -c with ':' or '\\,'\n"
"                         between keys (default zstd:15)\n"
"  -o block_size=SIZE     4K..1M, power of two (default 128K)\n"
"  -o jobs=N, -o serial, -o queue=N\n"
"  -o no_fragments, always_fragments, no_dedup, no_exports, no_xattrs,\n"
"     no_sparse, no_pad, all_root\n"
"  -o mkfs_time=T, all_time=T, force_uid=U, force_gid=G\n"
"  -o spool=DIR           where staged data lives (default: beside IMAGE)\n"
"  -o no_background       compress only at seal, not as files close\n"
"  -o no_passthrough      file data through the daemon, not kernel passthrough\n"
"  -o no_uring            requests through /dev/fuse even where the kernel\n"
"                         offers FUSE over io_uring\n"
"  -o prepack, no_prepack compress fragment blocks ahead of the seal whatever\n"
"                         the CPU is doing / never (default: when >= 15%%\n"
"                         of the CPU is idle)\n"
"  -o prepack_max=N       ... only while at most N inodes are staged\n"
"                         (default 200000: each rehearsal copies the tree)\n"
"  -o pseudo_file=FILE    make the entries FILE defines (sqfs-pack --pseudo-file),\n"
"                         device nodes and xattrs too, whoever mounts; again\n"
"                         at every seal\n"
"  -o volatile            fsync flushes nothing (the tree survives a crash of\n"
"                         the daemon, not of the machine)\n"
"  --recover SPOOL, -o recover=SPOOL\n"
"                         remount the tree a crashed sqfs-stage left in SPOOL\n"
"                         (with the image options it was made with; -o wins)\n"
"  -o allow_other         let other users in (with default_permissions)\n"
"  -o suid, -o dev        root only: staged setuid bits and device nodes\n"
"                         work in the mount (default nosuid,nodev)\n"
"  -o OPT                 any other FUSE mount option\n"
"  -h, --help, -V, --version\n"
"Exit status: 0 mounted (with -f: unmounted and sealed), 1 failure,\n"
"2 usage error.  See sqfs-stage(1).\n",
		prog);
}

/* -o KEY=N with min <= N <= max, or a message naming UNIT and -1. */
static int opt_number(struct parse *p, const char *k, const char *val, uint64_t min,
		      uint64_t max, const char *unit, uint64_t *v)
{
	if (!cli_parse_u64(val, max, v) && *v >= min)
		return 0;
	fprintf(stderr, "%s: -o %s: give a number of %s, not '%s'\n", prog, k, unit,
		val ? val : "");
	p->bad = 1;
	return -1;
}

int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct parse *p = data;
	char k[64], msg[256];
	const char *eq, *val = NULL;
	uint64_t v;
	size_t klen;
	int r;

	(void)outargs;
	if (key == FUSE_OPT_KEY_NONOPT) {
		p->nonopts++;
		if (p->nonopts == 1) {
			p->image = strdup(arg);
			return 0;
		}
		if (p->nonopts == 2)
			p->mnt = strdup(arg);
		return 1;
	}
	if (arg[0] == '-') {
		if (!strcmp(arg, "-h") || !strcmp(arg, "--help"))
			p->help = 1;
		else if (!strcmp(arg, "-V") || !strcmp(arg, "--version"))
			p->version = 1;
		return 1;
	}
	eq = strchr(arg, '=');
	klen = eq ? (size_t)(eq - arg) : strlen(arg);
	if (klen >= sizeof(k))
		return 1;
	memcpy(k, arg, klen);
	k[klen] = '\0';
	if (eq)
		val = eq + 1;
	if (!strcmp(k, "spool")) {
		if (!val || !*val) {
			fprintf(stderr, "%s: -o spool: give a directory\n", prog);
			p->bad = 1;
			return -1;
		}
		free(p->spool);
		p->spool = strdup(val);
		return 0;
	}
	if (!strcmp(k, "recover")) {
		if (!val || !*val) {
			fprintf(stderr, "%s: -o recover: give the spool directory of the "
				"crashed mount\n", prog);
			p->bad = 1;
			return -1;
		}
		free(p->recover);
		p->recover = strdup(val);
		return 0;
	}
	if (!strcmp(k, "pseudo_file")) {
		int ret = val && *val ? pack_pseudo_add_file(&p->pseudo, val, msg, sizeof(msg)) :
				      -EINVAL;

		if (ret) {
			fprintf(stderr, "%s: -o pseudo_file%s%s: %s\n", prog, val && *val ? " " : "",
				val ? val : "", ret == -EINVAL && !(val && *val) ?
				"give a file of pseudo definitions" : msg);
			p->bad = 1;
			return -1;
		}
		return 0;
	}
	if (!strcmp(k, "no_passthrough") && !val) {
		p->s->no_passthrough = 1;
		return 0;
	}
	if (!strcmp(k, "no_uring") && !val) {
		p->s->no_uring = 1;
		return 0;
	}
	if (!strcmp(k, "volatile") && !val) {
		p->s->no_sync = 1;
		return 0;
	}
	if ((!strcmp(k, "prepack") || !strcmp(k, "no_prepack")) && !val) {
		p->s->prepack = k[0] == 'n' ? 0 : 2;
		return 0;
	}
	if (!strcmp(k, "prepack_max")) {
		if (opt_number(p, k, val, 0, SIZE_MAX, "inodes", &v))
			return -1;
		p->s->prepack_max = (size_t)v;
		return 0;
	}
	if (!strcmp(k, "no_background") && !val) {
		p->s->no_background = 1;
		return 0;
	}
	if (!strcmp(k, "max_read")) {
		if (opt_number(p, k, val, 1, UINT32_MAX, "bytes", &v))
			return -1;
		p->s->max_read = (unsigned)v;
		return 1;	/* libfuse's too */
	}
	if (!strcmp(k, "allow_other")) {
		p->allow_other = 1;
		return 1;
	}
	if ((!strcmp(k, "suid") || !strcmp(k, "dev")) && !val && geteuid()) {
		/* fusermount3 mounts a user's file systems nosuid,nodev whatever is asked */
		fprintf(stderr, "%s: warning: -o %s is for root only: the mount is nosuid,nodev "
			"(the image keeps set-id bits and device nodes all the same)\n", prog, k);
		return 0;
	}
	r = cli_opt_set(&p->s->opts, k, val, msg, sizeof(msg));
	if (r > 0 && sqw_comp_is_key(k)) {
		/* "-o comp=gzip,window=12": the comma ended comp= */
		fprintf(stderr, "%s: -o %s: a compressor setting: give it inside comp=, "
			"after ':' (comp=gzip:window=12) or an escaped comma "
			"(comp=gzip\\,window=12)\n", prog, arg);
		p->bad = 1;
		return -1;
	}
	if (r < 0) {
		fprintf(stderr, "%s: -o %s\n", prog, msg);
		p->bad = 1;
		return -1;
	}
	/* The image's options outlive a crash; how the mount runs does not. */
	if (r == 0 && spoolopts_add(&p->kept, arg)) {
		fprintf(stderr, "%s: out of memory\n", prog);
		p->bad = 1;
		return -1;
	}
	return r == 0 ? 0 : 1;
}

void free_argv(char **av)
{
	for (char **a = av; a && *a; a++)
		free(*a);
	free(av);
}

/*
 * --recover SPOOL and --recover=SPOOL become -o recover=SPOOL, so that one
 * option parser sees them.  Every string of the copy is owned by it.
 */
char **recover_args(int *argc, char **argv)
{
	char **out = calloc((size_t)*argc + 1, sizeof(*out));
	int i, n = 0;

	if (!out)
		return NULL;
	for (i = 0; i < *argc; i++) {
		const char *v = NULL;
		int r;

		if (!strcmp(argv[i], "--recover") && i + 1 < *argc)
			v = argv[++i];
		else if (!strncmp(argv[i], "--recover=", 10))
			v = argv[i] + 10;
		if (v)
			r = asprintf(&out[n], "-orecover=%s", v);
		else
			r = (out[n] = strdup(argv[i])) ? 0 : -1;
		if (r < 0) {
			out[n] = NULL;
			free_argv(out);
			return NULL;
		}
		n++;
	}
	*argc = n;
	return out;
}

static void quiet_log(enum fuse_log_level level, const char *fmt, va_list ap)
{
	(void)level;
	(void)fmt;
	(void)ap;
}

static int find_recover(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	char **spool = data;

	(void)outargs;
	if (key == FUSE_OPT_KEY_OPT && !strncmp(arg, "recover=", 8)) {
		free(*spool);
		*spool = strdup(arg + 8);
	}
	return 1;
}

/* 0 if SPOOL/data is there: SPOOL looks like a spool. */
static int access_data(const char *spool)
{
	char *d;
	int ret;

	if (asprintf(&d, "%s/data", spool) < 0)
		return -1;
	ret = access(d, F_OK);
	free(d);
	return ret;
}

/*
 * With -o recover=SPOOL, the options SPOOL was made with go first, so that
 * the ones given now win.  Replaces *av (and *argc); 0 or -1 (out of
 * memory).  A spool whose options cannot be taken leaves *av as it is and
 * sets *err to why: said after the parse of the command line, so that a
 * usage error, --help and --version come first whatever the spool holds.
 */
int recover_options(int *argc, char ***av, char **err)
{
	struct fuse_args pre = FUSE_ARGS_INIT(*argc, *av);
	char *spool = NULL, *shown = NULL, **kept = NULL, **out;
	int n = 0, i, ret;

	/* Quietly: the parse that follows reports what is wrong. */
	fuse_set_log_func(quiet_log);
	(void)fuse_opt_parse(&pre, &spool, NULL, find_recover);
	fuse_set_log_func(NULL);
	fuse_opt_free_args(&pre);
	if (!spool || !*spool) {
		/* "-o recover=" is a usage error the parse names: read nothing */
		free(spool);
		return 0;
	}
	ret = spoolopts_read(spool, &kept, &n, &shown);
	if (ret == -ENOENT) {
		/* no spool at all: stage_spool_open() says what is wrong */
		if (!access(spool, W_OK | X_OK) && !access_data(spool))
			fprintf(stderr, "%s: warning: %s/options is missing: the image "
				"options are the defaults and those given now, not "
				"necessarily the ones the tree was staged with\n", prog, spool);
		ret = 0;
	}
	if (ret == -EBADMSG)
		ret = asprintf(err, "%s: -o recover: %s/options: %s; nothing was changed (give "
			       "the image options again with -o after removing the file)",
			       prog, spool, shown);
	else if (ret == -ENOTDIR)	/* as stage_spool_open() says it */
		ret = asprintf(err, "%s: -o recover: %s: not a writable directory", prog, spool);
	else if (ret)
		ret = asprintf(err, "%s: -o recover: %s/options: %s", prog, spool,
			       strerror(-ret));
	free(spool);
	if (ret) {
		free(shown);
		if (ret < 0) {
			*err = NULL;
			fprintf(stderr, "%s: out of memory\n", prog);
			return -1;
		}
		return 0;
	}
	if (!n)
		return 0;
	out = calloc((size_t)(*argc + n + 1), sizeof(*out));
	if (!out) {
		for (i = 0; i < n; i++)
			free(kept[i]);
		free(kept);
		free(shown);
		fprintf(stderr, "%s: out of memory\n", prog);
		return -1;
	}
	out[0] = (*av)[0];
	memcpy(out + 1, kept, (size_t)n * sizeof(*out));
	memcpy(out + 1 + n, *av + 1, (size_t)(*argc - 1) * sizeof(*out));
	free(kept);
	free(*av);
	*av = out;
	*argc += n;
	fprintf(stderr, "%s: options of the spool, before those given now: %s\n", prog, shown);
	free(shown);
	return 0;
}
