/* SPDX-License-Identifier: GPL-2.0-or-later */
/* sqfs-pack: a directory or a tar stream into a SquashFS image. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <locale.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "config.h"
#include "pack/pack.h"

static const char *prog = "sqfs-pack";
static char *volatile tmp_path;

static void on_signal(int sig)
{
	int e = errno;

	/*
	 * Never leave a partial image behind: only the temp file exists, if it
	 * has a name at all (an O_TMPFILE image goes with the process).  The
	 * signal comes again once this returns, as it was blocked meanwhile.
	 */
	if (tmp_path)
		unlink(tmp_path);
	signal(sig, SIG_DFL);
	raise(sig);
	errno = e;
}

/*
 * A signal ignored when we started stays ignored (the shell's choice for a
 * background job, nohup's for SIGHUP).
 */
static void catch_signal(int sig)
{
	struct sigaction sa;

	if (!sigaction(sig, NULL, &sa) && sa.sa_handler == SIG_IGN)
		return;
	signal(sig, on_signal);
}

static void publish_failed(const char *image, int err)
{
	fprintf(stderr, "%s: %s: cannot create the image: %s\n", prog, image,
		err == -EEXIST ? "exists and is not a regular file" : strerror(-err));
}

static void usage(FILE *f)
{
	fprintf(f,
"Usage: %s [OPTIONS] SRC_DIR IMAGE\n"
"       %s --tar [OPTIONS] IMAGE < ARCHIVE\n"
"Pack a directory, or a tar archive read from standard input (plain or\n"
"compressed), into a SquashFS 4.0 image.\n\n"
"  -c, --comp NAME[:LEVEL][,KEY[=VALUE]...]\n"
"                           gzip, xz, lzma, lz4, lzo, zstd (default zstd:15)\n"
"  -b, --block-size SIZE    data block size, 4K..1M, power of two (default 128K)\n"
"  -j, --jobs N             compression threads (default: online CPUs)\n"
"      --serial             compress in the main thread (reference path)\n"
"      --queue N            blocks in flight at most (bounds memory)\n"
"      --tar                read a tar archive from standard input\n"
"      --no-fragments       no tail packing\n"
"      --always-fragments   pack the tails of large files too\n"
"      --no-dedup, --no-duplicates\n"
"                           do not share identical files or tails\n"
"      --no-exports         no NFS export table\n"
"      --no-xattrs          leave extended attributes out\n"
"      --no-sparse          store zero blocks instead of holes\n"
"      --no-pad             do not pad the image to 4 KiB\n"
"      --mkfs-time T        image time: seconds, @seconds or now\n"
"                           (default SOURCE_DATE_EPOCH, else now)\n"
"      --all-time T         set every inode's mtime to T\n"
"      --all-root           make root own everything\n"
"      --force-uid U, --force-gid G   one owner/group for everything\n"
"  -e, --exclude PATTERN    leave out what matches (a name at any depth, or\n"
"                           a path from the top if it has a '/'; wildcards)\n"
"      --exclude-from FILE  the same, one pattern a line\n"
"  -x, --one-file-system    keep mount points below SRC_DIR, empty\n"
"  -p, --pseudo DEF         add or change an entry, as mksquashfs -p:\n"
"                           'PATH d|m MODE UID GID', 'PATH b|c MODE UID GID\n"
"                           MAJOR MINOR', 'PATH i MODE UID GID f|s',\n"
"                           'PATH s MODE UID GID TARGET', 'PATH x NAME=VALUE'\n"
"      --pseudo-file FILE   the same, one definition a line\n"
"  -q, --quiet              no summary\n"
"      --progress, --no-progress     progress bar (default: if stderr is a TTY)\n"
"      --json               summary as one JSON object on stdout\n"
"  -h, --help, -V, --version\n"
"Exit status: 0 success, 1 packing failed, 2 usage error.  See sqfs-pack(1).\n",
		prog, prog);
}

enum {
	OPT_KEY = 256, OPT_TAR, OPT_PROGRESS, OPT_NO_PROGRESS, OPT_JSON, OPT_EXCLUDE_FROM,
	OPT_PSEUDO_FILE
};

/* What parse_args fills besides the image options. */
struct pack_args {
	int tar, one_fs;
	struct pack_filter filter;
	struct pack_pseudo pseudo;
};

static const struct option longopts[] = {
	{ "comp", required_argument, NULL, 'c' },
	{ "block-size", required_argument, NULL, 'b' },
	{ "jobs", required_argument, NULL, 'j' },
	{ "serial", no_argument, NULL, OPT_KEY },
	{ "queue", required_argument, NULL, OPT_KEY },
	{ "no-fragments", no_argument, NULL, OPT_KEY },
	{ "always-fragments", no_argument, NULL, OPT_KEY },
	{ "no-dedup", no_argument, NULL, OPT_KEY },
	{ "no-duplicates", no_argument, NULL, OPT_KEY },
	{ "no-exports", no_argument, NULL, OPT_KEY },
	{ "no-xattrs", no_argument, NULL, OPT_KEY },
	{ "no-sparse", no_argument, NULL, OPT_KEY },
	{ "no-pad", no_argument, NULL, OPT_KEY },
	{ "mkfs-time", required_argument, NULL, OPT_KEY },
	{ "all-time", required_argument, NULL, OPT_KEY },
	{ "all-root", no_argument, NULL, OPT_KEY },
	{ "force-uid", required_argument, NULL, OPT_KEY },
	{ "force-gid", required_argument, NULL, OPT_KEY },
	{ "tar", no_argument, NULL, OPT_TAR },
	{ "exclude", required_argument, NULL, 'e' },
	{ "exclude-from", required_argument, NULL, OPT_EXCLUDE_FROM },
	{ "one-file-system", no_argument, NULL, 'x' },
	{ "pseudo", required_argument, NULL, 'p' },
	{ "pseudo-file", required_argument, NULL, OPT_PSEUDO_FILE },
	{ "quiet", no_argument, NULL, 'q' },
	{ "progress", no_argument, NULL, OPT_PROGRESS },
	{ "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

static int set_key(struct cli_opts *o, const char *name, const char *val)
{
	char msg[256];

	if (cli_opt_set(o, name, val, msg, sizeof(msg)) != 0) {
		fprintf(stderr, "%s: --%s\n", prog, msg);
		return -1;
	}
	return 0;
}

static int add_exclude(struct pack_filter *f, const char *pattern, const char *file)
{
	size_t line = 0;
	int ret = file ? pack_filter_add_file(f, file, &line) : pack_filter_add(f, pattern);

	if (!ret)
		return 0;
	if (file && line)
		fprintf(stderr, "%s: --exclude-from %s: line %zu: a pattern of only '/'\n",
			prog, file, line);
	else if (file)
		fprintf(stderr, "%s: --exclude-from %s: %s\n", prog, file, strerror(-ret));
	else if (ret == -EINVAL)
		fprintf(stderr, "%s: --exclude '%s': give a name or path pattern\n", prog,
			pattern);
	else
		fprintf(stderr, "%s: out of memory\n", prog);
	return -1;
}

static int add_pseudo(struct pack_pseudo *ps, const char *def, const char *file)
{
	char msg[512];
	int ret = file ? pack_pseudo_add_file(ps, file, msg, sizeof(msg)) :
			 pack_pseudo_add(ps, def, NULL, msg, sizeof(msg));

	if (ret == -ENOMEM)
		fprintf(stderr, "%s: out of memory\n", prog);
	else if (ret && file)
		fprintf(stderr, "%s: --pseudo-file %s: %s\n", prog, file, msg);
	else if (ret)
		fprintf(stderr, "%s: --pseudo '%s': %s\n", prog, def, msg);
	return ret ? -1 : 0;
}

static int parse_args(int argc, char **argv, struct cli_opts *o, struct pack_args *pa)
{
	char msg[256];
	int c, idx, *tar = &pa->tar;

	cli_opts_init(o);
	argv[0] = (char *)prog;	/* getopt's messages: "sqfs-pack: ...", not the path */
	while ((c = getopt_long(argc, argv, "c:b:j:e:xp:qhV", longopts, &idx)) != -1) {
		switch (c) {
		case 'c': if (set_key(o, "comp", optarg)) return -1; break;
		case 'b': if (set_key(o, "block-size", optarg)) return -1; break;
		case 'j': if (set_key(o, "jobs", optarg)) return -1; break;
		case OPT_KEY:
			if (set_key(o, longopts[idx].name, optarg))
				return -1;
			break;
		case OPT_TAR: *tar = 1; break;
		case 'e':
			if (add_exclude(&pa->filter, optarg, NULL))
				return -1;
			break;
		case OPT_EXCLUDE_FROM:
			if (add_exclude(&pa->filter, NULL, optarg))
				return -1;
			break;
		case 'x': pa->one_fs = 1; break;
		case 'p':
			if (add_pseudo(&pa->pseudo, optarg, NULL))
				return -1;
			break;
		case OPT_PSEUDO_FILE:
			if (add_pseudo(&pa->pseudo, NULL, optarg))
				return -1;
			break;
		case 'q': o->quiet = 1; break;
		case OPT_PROGRESS: o->progress = 1; break;
		case OPT_NO_PROGRESS: o->progress = 0; break;
		case OPT_JSON: o->json = 1; break;
		case 'h': usage(stdout); exit(cli_stdout_status(prog));
		case 'V':
			printf("sqfs-pack %s\n%s\n", SQW_VERSION, sqw_comp_versions());
			exit(cli_stdout_status(prog));
		default:
			fprintf(stderr, "Try '%s --help'.\n", prog);
			return -1;
		}
	}
	if (*tar && pa->one_fs) {
		fprintf(stderr, "%s: --one-file-system is for a directory, not --tar\n"
			"Try '%s --help'.\n", prog, prog);
		return -1;
	}
	if (argc - optind != (*tar ? 1 : 2)) {
		fprintf(stderr, "%s: expected %s\nTry '%s --help'.\n", prog,
			*tar ? "IMAGE (the archive comes on standard input)" :
			"SRC_DIR and IMAGE", prog);
		return -1;
	}
	if (!argv[argc - 1][0] || (!*tar && !argv[optind][0])) {
		fprintf(stderr, "%s: %s must not be empty\nTry '%s --help'.\n", prog,
			argv[argc - 1][0] ? "SRC_DIR" : "IMAGE", prog);
		return -1;
	}
	if (cli_opts_finish(o, msg, sizeof(msg))) {
		fprintf(stderr, "%s: %s\n", prog, msg);
		return -1;
	}
	return 0;
}

static void report_pack_err(const struct pack_err *e)
{
	const char *path = e->path ? e->path : "";

	fprintf(stderr, "%s: %s%s%s: %s%s%s\n", prog, path, *path ? ": " : "",
		e->what, e->code == -EBADMSG ? "invalid input" : strerror(-e->code),
		*e->detail ? ": " : "", e->detail);
}

int main(int argc, char **argv)
{
	struct cli_opts o;
	struct cli_report rep;
	struct cli_publish pub = { .fd = -1 };
	struct pack_err perr = { 0 };
	struct dir_source ds = { .rootfd = -1 };
	struct spool *sp = NULL;
	struct sqw_stats st;
	struct sqw_error err;
	const struct sqw_source_ops *ops;
	struct sqw_source_ops tar_ops;
	sqw_tree_t *tree = NULL;
	const char *image;
	void *ctx;
	struct pack_args pa = { 0 };
	sigset_t caught, unblocked;
	int ret, status = CLI_EXIT_FAIL;

	/* Nothing of ours may be opened as 0, 1 or 2 (cli_stdio_open). */
	if (cli_stdio_open())
		return CLI_EXIT_FAIL;
	/*
	 * A reader of standard output or error that has gone away is no
	 * error: what it missed is only the summary (EPIPE, below).
	 */
	signal(SIGPIPE, SIG_IGN);
	/* A file size limit (ulimit -f) is an error that names itself: EFBIG. */
	signal(SIGXFSZ, SIG_IGN);
	if (parse_args(argc, argv, &o, &pa)) {
		pack_filter_free(&pa.filter);
		pack_pseudo_free(&pa.pseudo);
		return CLI_EXIT_USAGE;
	}
	image = argv[argc - 1];
	/* An IMAGE that cannot be made fails now, not after the archive or the scan. */
	ret = cli_publish_check(image);
	if (ret) {
		publish_failed(image, ret);
		goto out;
	}
	cli_fd_limit_raise();
	tree = sqw_tree_create();
	if (!tree) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return CLI_EXIT_FAIL;
	}
	if (pa.tar) {
		char *copy = strdup(image);

		/*
		 * Names are bytes to SquashFS.  libarchive turns the UTF-8 names
		 * of pax headers into the locale's charset, and in the C locale
		 * every program starts in that is ASCII: each other name drew a
		 * warning, its bytes kept all the same.  Under C.UTF-8 they pass
		 * as they are (hdrcharset=BINARY names are never converted).
		 */
		setlocale(LC_CTYPE, "C.UTF-8");

		const char *dir = copy ? dirname(copy) : NULL;

		ret = -ENOMEM;
		sp = dir ? spool_create(dir, &ret) : NULL;
		if (sp)
			ret = 0;
		/* The serial reference path compresses in one thread, at the end. */
		if (sp && o.img.jobs)
			ret = spool_ahead_start(sp, dir, &o.img, stderr);
		if (sp && o.img.jobs && !ret && !(o.img.flags & SQW_OPT_NO_FRAGMENTS))
			ret = spool_rehearse_start(sp, dir, &o.img, stderr);
		free(copy);
		if (!sp || ret) {
			fprintf(stderr, "%s: %s: creating a spool file beside the image: %s\n",
				prog, image, strerror(-ret));
			goto out;
		}
		if (tar_read(STDIN_FILENO, tree, sp, !(o.img.flags & SQW_OPT_NO_XATTRS),
			     o.img.mkfs_time, &pa.filter, stderr, &perr)) {
			report_pack_err(&perr);
			goto out;
		}
		tar_ops = spool_source_ops;
		tar_ops.stored_frag = spool_rh_stored_frag;
		tar_ops.tail_digest = spool_rh_tail_digest;
		ops = spool_rehearsed(sp) ? &tar_ops : &spool_source_ops;
		ctx = sp;
	} else {
		struct stat ist;

		ret = dir_source_open(&ds, argv[optind], stderr);
		if (ret) {
			fprintf(stderr, "%s: %s: %s\n", prog, argv[optind], strerror(-ret));
			goto out;
		}
		ds.filter = &pa.filter;
		ds.one_fs = pa.one_fs;
		if (!stat(image, &ist)) {
			ds.skip_dev = ist.st_dev;
			ds.skip_ino = ist.st_ino;
		}
		sqw_tree_set_source_free(tree, free);
		if (dir_scan(&ds, tree, !(o.img.flags & SQW_OPT_NO_XATTRS), &perr)) {
			report_pack_err(&perr);
			goto out;
		}
		ops = &dir_source_ops;
		ctx = &ds;
	}

	if (pack_pseudo_apply(&pa.pseudo, tree, o.img.mkfs_time, stderr, &perr)) {
		report_pack_err(&perr);
		goto out;
	}

	ret = cli_publish_open(&pub, image, 1);
	if (ret) {
		publish_failed(image, ret);
		goto out;
	}
	tmp_path = pub.tmp;
	sigemptyset(&caught);
	sigaddset(&caught, SIGINT);
	sigaddset(&caught, SIGTERM);
	sigaddset(&caught, SIGHUP);
	catch_signal(SIGINT);
	catch_signal(SIGTERM);
	catch_signal(SIGHUP);

	cli_report_start(&rep, &o, image, sqw_tree_data_size(tree));
	o.img.progress = cli_report_progress;
	o.img.progress_arg = &rep;
	ret = sqw_image_write(tree, ops, ctx, pub.fd, &o.img, &st, &err);
	/*
	 * The blocks compressed while reading took room the image needs:
	 * they give it up, and the image is made again without them.
	 */
	if (ret && spool_give_way(sp, ret)) {
		if (rep.shown)
			fputc('\n', stderr);
		rep.shown = 0;
		ret = sqw_image_write(tree, ops, ctx, pub.fd, &o.img, &st, &err);
	}
	if (ret) {
		char path[4200];

		if (rep.shown)
			fputc('\n', stderr);
		path[0] = '\0';
		if (err.node)
			sqw_node_path(err.node, path, sizeof(path));
		/* a node's error names its source path; any other, the image */
		fprintf(stderr, "%s: %s%s: %s: %s\n", prog,
			!err.node ? image : !pa.tar ? argv[optind] : "", path,
			err.what ? err.what : "writing", strerror(-ret));
		goto out;
	}
	/* on_signal() reads tmp_path, which the commit frees: it waits. */
	sigprocmask(SIG_BLOCK, &caught, &unblocked);
	ret = cli_publish_commit(&pub);
	tmp_path = NULL;
	sigprocmask(SIG_SETMASK, &unblocked, NULL);
	if (ret) {
		fprintf(stderr, "%s: %s: publishing the image: %s\n", prog, image,
			strerror(-ret));
		goto out;
	}
	cli_report_summary(&rep, &st, stdout);
	if ((ret = cli_stdout_flush()) && ret != EPIPE) {
		fprintf(stderr, "%s: %s: the image is written, but writing the summary failed: %s\n",
			prog, image, strerror(ret));
		goto out;
	}
	if (st.clamped_times)
		fprintf(stderr, "%s: warning: %llu " CLI_CLAMPED_TIMES_WARNING "\n", prog,
			(unsigned long long)st.clamped_times);
	status = CLI_EXIT_OK;
out:
	tmp_path = NULL;
	cli_publish_abort(&pub);
	sqw_tree_destroy(tree);
	spool_destroy(sp);
	if (ds.root)
		dir_source_close(&ds);
	pack_filter_free(&pa.filter);
	pack_pseudo_free(&pa.pseudo);
	pack_err_clear(&perr);
	return status;
}
