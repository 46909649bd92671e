/* SPDX-License-Identifier: GPL-2.0-or-later */
/* sqfs-stage: mount a writable staging tree that seals to a SquashFS image. */
#include "stage/stage.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <syslog.h>
#include <unistd.h>

#include "config.h"
#include "pack/pack.h"
#include "spoolopts.h"

static const char *prog = "sqfs-stage";

struct parse {
	struct stage *s;
	char *image, *mnt, *spool, *recover;
	int nonopts, allow_other, help, version, bad;
	struct spoolopts kept;	/* the image's -o options, for SPOOL/options */
	struct pack_pseudo pseudo;	/* -o pseudo_file */
};

static void usage(FILE *f)
{
	fprintf(f,
"Usage: %s [OPTIONS] IMAGE MOUNTPOINT\n"
"Mount an empty writable tree at MOUNTPOINT; sqfs-seal(1) or unmounting\n"
"writes it to the SquashFS image IMAGE.\n\n"
"  -f                     stay in the foreground (log to stderr)\n"
"  -d                     FUSE debug output (implies -f)\n"
"  -s                     single-threaded\n"
"  -o comp=NAME[:LEVEL][:KEY=VAL...]  compressor, as sqfs-pack -c with ':'\n"
"                         or '\\,' between keys (default zstd:15)\n"
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

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
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

/* An absolute IMAGE whose directory exists and is writable. */
static int check_image(struct stage *s, const char *image)
{
	char *c = strdup(image), dir[PATH_MAX];
	const char *base;
	struct stat st;
	int ret = -1, e;

	if (!c)
		goto out;
	base = basename(c);
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..") || image[strlen(image) - 1] == '/') {
		fprintf(stderr, "%s: %s: IMAGE must name a file\n", prog, image);
		goto out;
	}
	if (strlen(base) > NAME_MAX) {
		fprintf(stderr, "%s: %s: IMAGE's name is longer than %d bytes\n", prog, image,
			NAME_MAX);
		goto out;
	}
	/* The seal writes through a symbolic link, to the file it names. */
	e = cli_publish_target(image, &s->image);
	if (e) {
		fprintf(stderr, "%s: %s: the image's directory: %s\n", prog, image, strerror(-e));
		goto out;
	}
	snprintf(dir, sizeof(dir), "%s", s->image);
	*strrchr(dir, '/') = '\0';
	if (access(*dir ? dir : "/", W_OK | X_OK)) {
		fprintf(stderr, "%s: %s: cannot write in %s: %s\n", prog, image,
			*dir ? dir : "/", strerror(errno));
		goto out;
	}
	if (!stat(s->image, &st) && !S_ISREG(st.st_mode)) {
		fprintf(stderr, "%s: %s: exists and is not a regular file\n", prog, image);
		goto out;
	}
	ret = 0;
out:
	free(c);
	return ret;
}

/*
 * The FUSE options parsed as the mount will parse them, before anything is
 * checked or made: a usage error is exit 2 whatever else is wrong (a
 * mountpoint that does not exist), and no spool is made for it.
 */
static int check_fuse_args(const struct fuse_args *args, const char *mnt)
{
	struct fuse_args copy = FUSE_ARGS_INIT(0, NULL);
	struct fuse_cmdline_opts fo;
	struct fuse_session *se = NULL;
	int i, ret = -1;

	memset(&fo, 0, sizeof(fo));
	/* libfuse resolves the mountpoint here: "/" stands in for it. */
	for (i = 0; i < args->argc; i++) {
		const char *a = args->argv[i];

		if (i && !strcmp(a, mnt) && strcmp(args->argv[i - 1], "-o"))
			a = "/";
		if (fuse_opt_add_arg(&copy, a))
			goto out;
	}
	if (fuse_parse_cmdline(&copy, &fo))
		goto out;
	se = fuse_session_new(&copy, &stage_ops, sizeof(stage_ops), NULL);
	ret = se ? 0 : 1;
	if (se)
		fuse_session_destroy(se);
out:
	if (ret < 0)
		fprintf(stderr, "%s: out of memory\n", prog);
	free(fo.mountpoint);
	fuse_opt_free_args(&copy);
	return ret;
}

static int check_mountpoint(const char *mnt)
{
	struct stat st;
	struct dirent *de;
	DIR *d;
	int empty = 1;

	if (stat(mnt, &st)) {
		fprintf(stderr, "%s: mountpoint %s: %s\n", prog, mnt, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "%s: mountpoint %s: not a directory\n", prog, mnt);
		return -1;
	}
	d = opendir(mnt);
	if (!d) {
		fprintf(stderr, "%s: mountpoint %s: %s\n", prog, mnt, strerror(errno));
		return -1;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			empty = 0;
	closedir(d);
	if (!empty) {
		fprintf(stderr, "%s: mountpoint %s: not empty\n", prog, mnt);
		return -1;
	}
	/* An empty tree still staged: a second mount would hide it. */
	if (getxattr(mnt, "user.sqfs-stage.status", NULL, 0) >= 0) {
		fprintf(stderr, "%s: mountpoint %s: already a sqfs-stage mount; seal or "
			"unmount it first\n", prog, mnt);
		return -1;
	}
	return 0;
}

/*
 * Another live sqfs-stage mount staging the same IMAGE: the later seal
 * would silently replace the earlier one's image.  A mount whose daemon
 * has gone can seal nothing, so it is no conflict (--recover
 * of its spool is the usual next step).
 */
/*
 * Do paths a and b name one file: the same string, the same existing file
 * (a hard link, a bind mount), or the same name in the same directory?
 */
static int same_file(const char *a, const char *b)
{
	const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
	struct stat x, y;
	char *da, *db;
	int same = 0;

	if (!strcmp(a, b))
		return 1;
	if (!stat(a, &x) && !stat(b, &y))
		return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
	if (!sa || !sb || strcmp(sa, sb))
		return 0;
	da = strndup(a, (size_t)(sa - a));
	db = strndup(b, (size_t)(sb - b));
	if (da && db && !stat(*da ? da : "/", &x) && !stat(*db ? db : "/", &y))
		same = x.st_dev == y.st_dev && x.st_ino == y.st_ino;
	free(da);
	free(db);
	return same;
}

static int same_image(const char *mnt, const char *type, const char *src, void *arg)
{
	const struct stage *s = arg;
	struct statfs sf;

	if (strcmp(type, "fuse.sqfs-stage") || !same_file(src, s->image))
		return 0;
	/*
	 * statfs always asks the daemon (stat may answer from the cache).  A
	 * connection still being torn down (FUSE over io_uring) answers
	 * ECONNABORTED or ECANCELED, as sqfs-seal knows too.
	 */
	if (statfs(mnt, &sf) &&
	    (errno == ENOTCONN || errno == ECONNABORTED || errno == ECANCELED))
		return 0;
	fprintf(stderr, "%s: %s: already the image of the sqfs-stage mount at %s; "
		"seal or unmount that first, or choose another IMAGE\n", prog, s->image, mnt);
	return -1;
}

/* An option of ours goes before a "--" of the user's, after which all are names. */
static int add_fuse_opt(struct fuse_args *args, const char *opt)
{
	int i;

	for (i = 1; i < args->argc; i++)
		if (!strcmp(args->argv[i], "--"))
			return fuse_opt_insert_arg(args, i, opt);
	return fuse_opt_add_arg(args, opt);
}

static int check_image_free(struct stage *s)
{
	return cli_mounts_each(same_image, s);
}

/*
 * Also a daemon unmounted but still sealing the same IMAGE (fusermount3 -u
 * returns at once) would replace the image this mount seals.  One that has
 * sealed and is on its way out lets go within moments: it gets 3 s.
 */
static int claim_image(struct stage *s)
{
	pid_t holder;
	int ret, i;

	for (i = 0; i < 30; i++) {
		ret = stage_claim_image(s, &holder);
		if (ret != -EBUSY)
			break;
		usleep(100000);
	}
	if (ret == -EBUSY) {
		char who[32] = "";

		if (holder)
			snprintf(who, sizeof(who), " (pid %ld)", (long)holder);
		fprintf(stderr, "%s: %s: still being written by the sqfs-stage daemon%s of an "
			"unmounted mount; wait for it to exit, or choose another IMAGE\n", prog,
			s->image, who);
		return -1;
	}
	if (ret) {
		fprintf(stderr, "%s: %s: claiming the image: %s\n", prog, s->image, strerror(-ret));
		return -1;
	}
	return 0;
}

/*
 * PATH and ROOT resolved: is PATH ROOT or below it?  By name, and by
 * identity: a bind mount of ROOT elsewhere (with shared propagation the
 * FUSE mount appears there too) is the same directory under another name.
 */
static int path_within(const char *path, const char *root)
{
	size_t n = strlen(root);
	struct stat r, st;
	char *p, *slash;
	int within = 0;

	if (!strcmp(root, "/"))
		return 1;
	if (!strncmp(path, root, n) && (path[n] == '\0' || path[n] == '/'))
		return 1;
	p = strdup(path);
	if (!p || stat(root, &r)) {
		free(p);
		return 0;
	}
	while (!within && *p && !stat(p, &st)) {
		within = st.st_dev == r.st_dev && st.st_ino == r.st_ino;
		slash = strrchr(p, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
	free(p);
	return within;
}

/*
 * The daemon reaches the image and the spool by path: under the mountpoint
 * they would be looked up through the mount, whose requests only it
 * serves, and it would wait on itself for good.
 */
static int check_outside(const struct stage *s, const char *mnt, const char *spool)
{
	char m[PATH_MAX], d[PATH_MAX], *c;
	int ret = 0;

	if (!realpath(mnt, m))
		return 0;	/* check_mountpoint() has looked at it */
	c = strdup(s->image);
	if (!c)
		return -1;
	if (path_within(dirname(c), m)) {
		fprintf(stderr, "%s: %s: IMAGE must not be inside the mountpoint %s\n", prog,
			s->image, m);
		ret = -1;
	} else if (spool && realpath(spool, d) && path_within(d, m)) {
		fprintf(stderr, "%s: -o spool=%s: must not be inside the mountpoint %s\n", prog,
			spool, m);
		ret = -1;
	}
	free(c);
	return ret;
}

/*
 * -o volatile marks the spool before anything unflushed is written to it;
 * a recovery refuses a spool marked in another boot (volatile.c).
 */
static int mark_spool(struct stage *s, int recover, int *marked)
{
	int ret = 0;

	if (recover) {
		ret = stage_volatile_check(s, marked);
		if (ret == -ESTALE) {
			fprintf(stderr, "%s: -o recover: %s was staged with -o volatile and the "
				"machine has restarted since: the tree may be torn (files with "
				"holes or old contents); remove %s/volatile to recover it "
				"anyway\n", prog, s->spool, s->spool);
			return -1;
		}
		if (ret) {
			fprintf(stderr, "%s: -o recover: %s/volatile: %s\n", prog, s->spool,
				strerror(-ret));
			return -1;
		}
	}
	if (s->no_sync && (ret = stage_volatile_mark(s))) {
		fprintf(stderr, "%s: -o volatile: marking %s: %s\n", prog, s->spool,
			strerror(-ret));
		return -1;
	}
	return 0;
}

static void free_argv(char **av)
{
	for (char **a = av; a && *a; a++)
		free(*a);
	free(av);
}

/*
 * --recover SPOOL and --recover=SPOOL become -o recover=SPOOL, so that one
 * option parser sees them.  Every string of the copy is owned by it.
 */
static char **recover_args(int *argc, char **argv)
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
static int recover_options(int *argc, char ***av, char **err)
{
	struct fuse_args pre = FUSE_ARGS_INIT(*argc, *av);
	char *spool = NULL, *shown = NULL, **kept = NULL, **out;
	int n = 0, i, ret;

	/* Quietly: the parse that follows reports what is wrong. */
	fuse_set_log_func(quiet_log);
	(void)fuse_opt_parse(&pre, &spool, NULL, find_recover);
	fuse_set_log_func(NULL);
	fuse_opt_free_args(&pre);
	if (!spool)
		return 0;
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

/* What to do when the spool's file system is full. */
static const char *full_hint(int err, int recover)
{
	if (err == -EUCLEAN && recover)
		return " (no batch of SPOOL/journal checks out, not even its first: it was "
		       "emptied or overwritten; nothing was changed, and the staged files "
		       "are in SPOOL/data, named by inode number)";
	if (err != -ENOSPC && err != -EDQUOT)
		return "";
	return recover ? " (the recovery rewrites the journal beside the old one: free "
			 "some space or inodes on the spool's file system, or grow it, then "
			 "run the same command again; the spool is as it was)" :
			 " (the spool's file system is full)";
}

int main(int argc, char **argv)
{
	char **av = recover_args(&argc, argv);
	struct fuse_args args = FUSE_ARGS_INIT(argc, av);
	struct fuse_cmdline_opts fo;
	struct fuse_session *se = NULL;
	struct stage s;
	struct parse p = { .s = &s };
	struct stage_jnl_stats jst;
	char msg[2 * PATH_MAX];	/* may name the spool and the image */
	char *recover_err = NULL;
	int ret, marked = 0, status = CLI_EXIT_FAIL;

	memset(&fo, 0, sizeof(fo));
	/* As libfuse would: a reader gone (sqfs-stage --help | head) is no error. */
	signal(SIGPIPE, SIG_IGN);
	/* A file size limit (ulimit -f) fails the write with EFBIG, not the daemon. */
	signal(SIGXFSZ, SIG_IGN);
	if (!av) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return CLI_EXIT_FAIL;
	}
	if (recover_options(&argc, &av, &recover_err)) {
		free_argv(av);
		return CLI_EXIT_FAIL;
	}
	args = (struct fuse_args)FUSE_ARGS_INIT(argc, av);
	memset(&s, 0, sizeof(s));
	s.prepack = 1;
	s.prepack_max = STAGE_PREPACK_MAX;
	s.datafd = -1;
	s.spoolfd = -1;
	s.claimfd = -1;
	s.final_status = CLI_EXIT_FAIL;
	/* Every exit goes through out_free: no leaks, also on usage errors. */
	cli_opts_init(&s.opts);
	s.opts.prefix = "-o ";
	if (fuse_opt_parse(&args, &p, NULL, opt_proc)) {
		if (!p.bad)
			fprintf(stderr, "%s: invalid arguments\n", prog);
		fprintf(stderr, "Try '%s --help'.\n", prog);
		status = CLI_EXIT_USAGE;
		goto out_free;
	}
	if (p.help) {
		usage(stdout);
		printf("\nFUSE options:\n");
		fuse_cmdline_help();
		fuse_lowlevel_help();
		status = cli_stdout_status(prog);
		goto out_free;
	}
	if (p.version) {
		printf("sqfs-stage %s (libfuse %s)\n%s\n", SQW_VERSION,
		       fuse_pkgversion(), sqw_comp_versions());
		status = cli_stdout_status(prog);
		goto out_free;
	}
	if (p.nonopts != 2) {
		fprintf(stderr, "%s: expected IMAGE and MOUNTPOINT\nTry '%s --help'.\n",
			prog, prog);
		status = CLI_EXIT_USAGE;
		goto out_free;
	}
	if (!*p.image || !*p.mnt) {
		fprintf(stderr, "%s: an empty %s\nTry '%s --help'.\n", prog,
			*p.image ? "MOUNTPOINT" : "IMAGE", prog);
		status = CLI_EXIT_USAGE;
		goto out_free;
	}
	if (cli_opts_finish(&s.opts, msg, sizeof(msg))) {
		fprintf(stderr, "%s: %s\n", prog, msg);
		status = CLI_EXIT_USAGE;
		goto out_free;
	}
	ret = check_fuse_args(&args, p.mnt);
	if (ret) {
		if (ret > 0)
			fprintf(stderr, "%s: invalid FUSE options\nTry '%s --help'.\n", prog, prog);
		status = ret > 0 ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
		goto out_free;
	}
	if (recover_err) {
		fprintf(stderr, "%s\n", recover_err);
		goto out_free;
	}
	s.file_max = sqw_file_size_max(s.opts.img.comp.block_size);
	if (s.file_max > STAGE_FILE_CAP)
		s.file_max = STAGE_FILE_CAP;
	if (p.allow_other && add_fuse_opt(&args, "-odefault_permissions"))
		goto out_free;
	if (check_image(&s, p.image) || check_image_free(&s) || check_mountpoint(p.mnt) ||
	    check_outside(&s, p.mnt, p.recover ? NULL : p.spool) || claim_image(&s))
		goto out_free;
	{
		/* libfuse's option syntax: ',' separates, '\\' escapes. */
		char *fsname = malloc(sizeof("-ofsname=") + 2 * strlen(s.image));
		char *q;
		const char *c;

		if (!fsname)
			goto out_free;
		q = stpcpy(fsname, "-ofsname=");
		for (c = s.image; *c; c++) {
			if (*c == ',' || *c == '\\')
				*q++ = '\\';
			*q++ = *c;
		}
		*q = '\0';
		ret = add_fuse_opt(&args, fsname);
		free(fsname);
		if (ret)
			goto out_free;
	}
	if (add_fuse_opt(&args, "-osubtype=sqfs-stage"))
		goto out_free;
	if (fuse_parse_cmdline(&args, &fo)) {
		fprintf(stderr, "Try '%s --help'.\n", prog);
		status = CLI_EXIT_USAGE;
		goto out_free;
	}
	if (p.recover && p.spool)
		fprintf(stderr, "%s: -o spool is ignored with -o recover\n", prog);
	ret = p.recover ? stage_spool_open(&s, p.recover, msg, sizeof(msg)) :
		stage_spool_make(&s, p.spool, msg, sizeof(msg));
	if (ret) {
		fprintf(stderr, "%s: %s\n", prog, msg);
		goto out_free;
	}
	if (mark_spool(&s, !!p.recover, &marked))
		goto out_spool;
	ret = spoolopts_write(&p.kept, s.spool, s.opts.img.mkfs_time, s.opts.img.all_time,
			      !s.no_sync);
	if (ret) {
		fprintf(stderr, "%s: %s/options: %s%s\n", prog, s.spool, strerror(-ret),
			full_hint(ret, !!p.recover));
		goto out_spool;
	}
	cli_fd_limit_raise();
	cli_unwinder_preload();
	if (stage_init(&s, getuid(), getgid())) {
		fprintf(stderr, "%s: out of memory\n", prog);
		goto out_spool;
	}
	ret = stage_jnl_open(&s, !!p.recover, &jst);
	if (ret) {
		if (p.recover)
			fprintf(stderr, "%s: recovering %s: %s%s\n", prog, s.spool,
				strerror(-ret), full_hint(ret, 1));
		else
			fprintf(stderr, "%s: creating the journal in %s: %s\n", prog, s.spool,
				strerror(-ret));
		goto out_spool;
	}
	if (marked && !s.no_sync && (ret = stage_volatile_clear(&s))) {
		fprintf(stderr, "%s: flushing the recovered spool %s: %s\n", prog, s.spool,
			strerror(-ret));
		goto out_spool;
	}
	if (p.recover)
		fprintf(stderr, "%s: recovered %llu inodes from %s (%llu journal batches; "
			"%llu bytes of a last batch cut short ignored; %llu entries without "
			"data dropped)\n", prog, (unsigned long long)s.inodes, s.spool,
			(unsigned long long)jst.batches, (unsigned long long)jst.torn_bytes,
			(unsigned long long)jst.dropped);
	if (p.recover && jst.detached)
		fprintf(stderr, "%s: warning: %llu files were still open for writing through the "
			"dead mount; the recovered tree holds what they held now, and what those "
			"programs write from here on is lost (stop them)\n", prog,
			(unsigned long long)jst.detached);
	if (p.recover && jst.later_batches)
		fprintf(stderr, "%s: warning: the journal breaks off after %llu bytes, yet %llu "
			"later batches in it check out: it was damaged there (or the machine "
			"lost power before an fsync), and the changes after that point are "
			"lost; check the tree before sealing\n", prog,
			(unsigned long long)jst.good_bytes, (unsigned long long)jst.later_batches);
	if (p.pseudo.n && (ret = stage_pseudo_apply(&s, &p.pseudo, stderr, msg, sizeof(msg)))) {
		fprintf(stderr, "%s: -o pseudo_file: %s: %s\n", prog, msg, strerror(-ret));
		goto out_spool;
	}
	/*
	 * A mount made by mistake over an existing image, and unmounted at
	 * once, must not replace it with an empty one; sqfs-seal still can.
	 */
	{
		struct stat st;

		if (!p.recover && !p.pseudo.n && !stat(s.image, &st) && S_ISREG(st.st_mode)) {
			s.sealed_gen = s.gen;
			s.image_kept = 1;
		}
	}
	s.foreground = fo.foreground;
	se = fuse_session_new(&args, &stage_ops, sizeof(stage_ops), &s);
	s.se = se;
	if (!se) {
		fprintf(stderr, "%s: invalid FUSE options\n", prog);
		status = CLI_EXIT_USAGE;
		goto out_spool;
	}
	if (fuse_set_signal_handlers(se)) {
		fprintf(stderr, "%s: cannot set signal handlers\n", prog);
		goto out_session;
	}
	s.mnt = fo.mountpoint;
	if (fuse_session_mount(se, fo.mountpoint)) {
		fprintf(stderr, "%s: cannot mount %s\n", prog, fo.mountpoint);
		/*
		 * libfuse 3.14 only falls back to fusermount3 when /dev/fuse is
		 * missing, not when it may not be opened (mode 0600 where no
		 * udev rule made it 0666, as distributions do).
		 */
		if (geteuid() && access("/dev/fuse", R_OK | W_OK) && errno == EACCES)
			fprintf(stderr, "%s: /dev/fuse is not open to this user, so libfuse "
				"cannot mount; its mode is normally 0666 (crw-rw-rw-)\n", prog);
		goto out_signals;
	}
	/* Always: the hooks also pass O_TMPFILE, which libfuse 3.14 refuses. */
	if (stage_pt_attach(&s, se))
		fprintf(stderr, "%s: FUSE passthrough, io_uring and O_TMPFILE are off: "
			"cannot hook the session\n", prog);
	if (!fo.foreground)
		openlog("sqfs-stage", LOG_PID, LOG_USER);
	if (fuse_daemonize(fo.foreground)) {
		fuse_session_unmount(se);
		goto out_signals;
	}
	if (fo.singlethread) {
		ret = fuse_session_loop(se);
	} else {
		struct fuse_loop_config *cfg = fuse_loop_cfg_create();

		fuse_loop_cfg_set_clone_fd(cfg, fo.clone_fd);
		fuse_loop_cfg_set_max_threads(cfg, fo.max_threads);
		ret = fuse_session_loop_mt(se, cfg);
		fuse_loop_cfg_destroy(cfg);
	}
	(void)ret;
	/*
	 * Before the unmount, whose final seal must have the tree to itself;
	 * a seal still running answers while the session (and a ring) can
	 * take its answer.
	 */
	stage_sealer_stop(&s);
	stage_uring_stop(&s);
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	/*
	 * The seal at unmount, once started, finishes: a second SIGTERM must
	 * not kill it half way without a word (kill -9 still does, and the
	 * spool stays for --recover).
	 */
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	fuse_session_destroy(se);	/* runs the final seal (destroy) */
	stage_handles_free(&s);
	stage_pt_free(&s);
	status = s.final_status;
	if (s.datafd >= 0)
		close(s.datafd);
	goto out_free;

out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
	stage_pt_free(&s);
out_spool:
	/* A spool we were asked to recover is never ours to remove. */
	if (!p.recover)
		stage_remove_spool(&s);
out_free:
	free(recover_err);
	stage_free(&s);
	free(fo.mountpoint);
	fuse_opt_free_args(&args);
	free_argv(av);
	free(p.image);
	free(p.mnt);
	free(p.spool);
	free(p.recover);
	spoolopts_free(&p.kept);
	pack_pseudo_free(&p.pseudo);
	stage_jnl_close(&s);
	if (s.spoolfd >= 0)
		close(s.spoolfd);
	free(s.image);
	free(s.spool);
	free(s.datadir);
	return status;
}
