/* SPDX-License-Identifier: GPL-2.0-or-later */
/* sqfs-seal: seal a sqfs-stage mount into its image, then unmount it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "config.h"

#define SEAL_XATTR "user.sqfs-stage.seal"
#define SEAL_BUF 65536
#define FUSE_SUPER_MAGIC 0x65735546

static const char *prog = "sqfs-seal";

static void usage(FILE *f)
{
	fprintf(f,
"Usage: %s [--keep] [--json] [--quiet] MOUNTPOINT\n"
"Seal the sqfs-stage mount at MOUNTPOINT into its image, then unmount it.\n\n"
"  -k, --keep     stay mounted and writable; a later seal writes a new image\n"
"      --json     the summary as one JSON object on stdout\n"
"  -q, --quiet    no summary\n"
"  -h, --help, -V, --version\n"
"Exit status: 0 sealed, 1 seal or unmount failed, 2 usage error.\n"
"See sqfs-seal(1).\n", prog);
}

/*
 * A JSON string's body, p just past its opening quote, decoded into a
 * malloc'd string (*end past its closing quote), or NULL.  The daemon
 * writes paths with \" \\ \u00XX for control bytes and \udcXX for bytes
 * that are not UTF-8 (report.c): each becomes its byte again.
 */
static char *json_unquote(const char *p, const char **end)
{
	char *out = malloc(strlen(p) + 1), *o = out;
	unsigned v;

	if (!out)
		return NULL;
	for (; *p && *p != '"'; p++) {
		if (*p != '\\') {
			*o++ = *p;
			continue;
		}
		p++;
		if (*p == 'u' && sscanf(p + 1, "%4x", &v) == 1 && strspn(p + 1,
		    "0123456789abcdefABCDEF") >= 4) {
			p += 4;
			if (v >= 0xdc80 && v <= 0xdcff)
				*o++ = (char)(v & 0xff);
			else if (v < 0x80)
				*o++ = (char)v;
			else if (v < 0x800)
				*o++ = (char)(0xc0 | v >> 6), *o++ = (char)(0x80 | (v & 0x3f));
			else
				*o++ = (char)(0xe0 | v >> 12), *o++ = (char)(0x80 | (v >> 6 & 0x3f)),
				*o++ = (char)(0x80 | (v & 0x3f));
			continue;
		}
		switch (*p) {
		case 'n': *o++ = '\n'; break;
		case 't': *o++ = '\t'; break;
		case 'r': *o++ = '\r'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case '"': case '\\': case '/': *o++ = *p; break;
		default: free(out); return NULL;
		}
	}
	if (*p != '"') {
		free(out);
		return NULL;
	}
	*o = '\0';
	*end = p + 1;
	return out;
}

/*
 * The value of "key" in the daemon's JSON summary (one flat object of
 * strings and numbers), or NULL.  Walked pair by pair: a path may hold
 * anything, "key": too.
 */
static char *field(const char *json, const char *key)
{
	const char *p = strchr(json, '{'), *e;
	char *k, *v;

	if (!p)
		return NULL;
	for (p++;;) {
		p += strspn(p, " \t\n\r,");
		if (*p != '"' || !(k = json_unquote(p + 1, &p)))
			return NULL;
		p += strspn(p, " \t\n\r");
		if (*p++ != ':') {
			free(k);
			return NULL;
		}
		p += strspn(p, " \t\n\r");
		if (*p == '"') {
			v = json_unquote(p + 1, &p);
		} else {
			e = p + strcspn(p, ",}");
			while (e > p && strchr(" \t\n\r", e[-1]))
				e--;
			v = strndup(p, (size_t)(e - p));
			p += strcspn(p, ",}");
		}
		if (!strcmp(k, key) || !v) {
			free(k);
			return v;
		}
		free(k);
		free(v);
	}
}

static void print_human(const char *json)
{
	const char *keys[] = { "image", "image_size", "inodes", "files", "directories",
			       "symlinks", "devices", "fifos_sockets", "settings",
			       "block_size", "seconds", "blocks", "stored_blocks",
			       "fragments", "stored_fragments" };
	char *v[15];
	size_t i;

	for (i = 0; i < 15; i++) {
		v[i] = field(json, keys[i]);
		if (!v[i])
			v[i] = strdup("?");
	}
	printf("Sealed %s: %s bytes, %s, block size %s\n"
	       "%s inodes: %s files, %s directories, %s symlinks, %s devices, "
	       "%s fifos/sockets; %s s\n",
	       v[0], v[1], v[8], v[9], v[2], v[3], v[4], v[5], v[6], v[7], v[10]);
	printf("%s of %s blocks were compressed in the background as files closed, "
	       "and %s of %s fragment blocks before the seal\n",
	       v[12], v[11], v[14], v[13]);
	for (i = 0; i < 15; i++)
		free(v[i]);
}

static int run_umount(const char *mnt, int quiet)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (!pid) {
		int fd = quiet ? open("/dev/null", O_WRONLY) : -1;

		if (fd >= 0)
			dup2(fd, 2);
		execlp("fusermount3", "fusermount3", "-u", "--", mnt, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/*
 * The root of a FUSE mount, as every sqfs-stage mount's is: the directory
 * of inode 1 of a FUSE file system.  1 yes, 0 no (st and sf filled), or
 * -errno.
 */
static int fuse_root(const char *mnt, struct stat *st, struct statfs *sf)
{
	if (stat(mnt, st) || statfs(mnt, sf))
		return -errno;
	return sf->f_type == FUSE_SUPER_MAGIC && S_ISDIR(st->st_mode) && st->st_ino == 1;
}

/*
 * Unmount, waiting out a mount kept busy for a moment (another sqfs-seal's
 * request: a seal that stands is answered at once); one that someone else
 * unmounted meanwhile is done.
 */
static int unmount(const char *mnt)
{
	struct timespec ts = { 0, 100 * 1000 * 1000 };
	struct statfs sf;
	struct stat st;
	int i;

	for (i = 0; i < 30; i++) {
		if (!run_umount(mnt, i < 29))
			return 0;
		if (fuse_root(mnt, &st, &sf) != 1)
			return 0;
		nanosleep(&ts, NULL);
	}
	return -1;
}

/*
 * Has the daemon exited?  A zombie has: the daemon is a child of init, and
 * an init that reaps late (or, in a container, never) must not hold us.
 */
static int exited(long pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	if (kill((pid_t)pid, 0) && errno != EPERM)
		return 1;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* "pid (comm) S ...": comm may hold anything, so from the last ')'. */
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

static void wait_exit(long pid)
{
	struct timespec ts = { 0, 5 * 1000 * 1000 };

	if (pid <= 0)
		return;
	while (!exited(pid))
		nanosleep(&ts, NULL);
}

struct dead {
	char where[PATH_MAX];	/* the mountpoint, resolved */
	char *image;		/* its mount's source: IMAGE */
};

static int find_image(const char *mnt, const char *type, const char *src, void *arg)
{
	struct dead *d = arg;

	if (strcmp(type, "fuse.sqfs-stage") || strcmp(mnt, d->where))
		return 0;
	free(d->image);
	d->image = strdup(src);	/* the last one mounted there is on top */
	return 0;
}

/*
 * The spool of a dead mount of IMAGE: the one .NAME.spool.XXXXXX directory
 * beside it (NULL when there is none or more than one: -o spool=, or
 * crashes of several mounts).
 */
static char *find_spool(const char *image)
{
	char *dir = strdup(image), *base, *found = NULL;
	struct dirent *de;
	DIR *dp;
	size_t n;
	int count = 0;

	if (!dir || !(base = strrchr(dir, '/'))) {
		free(dir);
		return NULL;
	}
	*base++ = '\0';
	dp = opendir(*dir ? dir : "/");
	n = strlen(base);
	while (dp && (de = readdir(dp))) {
		if (de->d_name[0] != '.' || strncmp(de->d_name + 1, base, n) ||
		    strncmp(de->d_name + 1 + n, ".spool.", 7))
			continue;
		if (++count == 1 && asprintf(&found, "%s/%s", dir, de->d_name) < 0)
			found = NULL;
	}
	if (dp)
		closedir(dp);
	free(dir);
	if (count != 1) {
		free(found);
		found = NULL;
	}
	return found;
}

/*
 * The seal request and signals.  The kernel tells the daemon of a signal
 * to a process waiting for it, and the daemon then cancels the seal: IMAGE
 * and the staged tree stay as they were.  A stop (Ctrl-Z, SIGSTOP) would
 * do the same, so the terminal's stops are ignored meanwhile, and a seal
 * cancelled with nothing caught (a SIGSTOP) is asked for again.
 */
static const int seal_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU };
static struct sigaction seal_old[sizeof(seal_signals) / sizeof(seal_signals[0])];
static volatile sig_atomic_t seal_caught;

static void seal_catch(int sig)
{
	seal_caught = sig;
}

static void seal_signals_set(int on)
{
	struct sigaction sa;
	size_t i;

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(seal_signals) / sizeof(seal_signals[0]); i++) {
		int stop = seal_signals[i] == SIGTSTP || seal_signals[i] == SIGTTIN ||
			   seal_signals[i] == SIGTTOU;

		if (!on) {
			sigaction(seal_signals[i], &seal_old[i], NULL);
			continue;
		}
		sigaction(seal_signals[i], NULL, &seal_old[i]);
		/* One ignored by whoever started us stays ignored (nohup). */
		if (seal_old[i].sa_handler == SIG_IGN)
			continue;
		sa.sa_handler = stop ? SIG_IGN : seal_catch;
		sigaction(seal_signals[i], &sa, NULL);
	}
}

static ssize_t seal_request(const char *mnt, char *buf)
{
	ssize_t len;

	seal_signals_set(1);
	do
		len = getxattr(mnt, SEAL_XATTR, buf, SEAL_BUF);
	while (len < 0 && errno == EINTR && !seal_caught);
	{
		int e = errno;

		seal_signals_set(0);
		errno = e;
	}
	return len;
}

/* A signal caught while the seal ran: say what became of it, then die of it. */
static void seal_signal_raise(const char *mnt, int sealed)
{
	int sig = seal_caught;

	if (!sig)
		return;
	if (sealed)
		fprintf(stderr, "%s: %s: interrupted (%s) after the seal: the image is sealed, "
			"and the mount stays\n", prog, mnt, strsignal(sig));
	else
		fprintf(stderr, "%s: %s: interrupted (%s): the seal was cancelled; the image "
			"is as it was, and the staged tree stays mounted\n", prog, mnt,
			strsignal(sig));
	fflush(stderr);
	raise(sig);
}

/* s as one shell word, for a command to paste: quoted only if it must be. */
static char *shell_word(const char *s)
{
	size_t n = 2;
	const char *p;
	char *out, *o;

	if (*s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "0123456789/._+,:@%=-") == strlen(s))
		return strdup(s);
	for (p = s; *p; p++)
		n += *p == '\'' ? 4 : 1;
	out = malloc(n + 1);
	if (!out)
		return NULL;
	o = out;
	*o++ = '\'';
	for (p = s; *p; p++) {
		if (*p == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else {
			*o++ = *p;
		}
	}
	*o++ = '\'';
	*o = '\0';
	return out;
}

/* A failure to reach MNT; a daemon that died (or is dying) gets told apart. */
static void report_errno(const char *mnt, int e)
{
	struct dead d = { .image = NULL };
	char *c = strdup(mnt), *spool = NULL, *qm, *qs, *qi, parent[PATH_MAX];

	if (e != ENOTCONN && e != ECONNABORTED && e != ECANCELED) {
		fprintf(stderr, "%s: %s: %s\n", prog, mnt, strerror(e));
		free(c);
		return;
	}
	/* The mountpoint itself answers nothing now: resolve its parent. */
	if (c) {
		char *slash = strrchr(c, '/'), *base = slash ? slash + 1 : c;

		if (slash)
			*slash = '\0';
		if (*base && realpath(slash ? (*c ? c : "/") : ".", parent) &&
		    snprintf(d.where, sizeof(d.where), "%s/%s", strcmp(parent, "/") ? parent : "",
			     base) < (int)sizeof(d.where))
			cli_mounts_each(find_image, &d);
	}
	if (d.image)
		spool = find_spool(d.image);
	qm = shell_word(mnt);
	qs = spool ? shell_word(spool) : NULL;
	qi = d.image ? shell_word(d.image) : NULL;
	fprintf(stderr, "%s: %s: %s: the daemon has gone (it died or was killed); "
		"%s keeps its previous contents and the tree is in %s; to get it "
		"back: fusermount3 -u -z %s && sqfs-stage --recover %s %s %s "
		"(see sqfs-stage(1), CRASHES)\n", prog, mnt, strerror(e),
		d.image ? d.image : "IMAGE", spool ? spool : "the spool", qm ? qm : mnt,
		qs ? qs : "SPOOL", qi ? qi : "IMAGE", qm ? qm : mnt);
	free(qm);
	free(qs);
	free(qi);
	free(spool);
	free(d.image);
	free(c);
}

struct top {
	const char *where;	/* the mountpoint, resolved */
	char type[64];		/* the type of the last mount there: the one on top */
};

static int top_type(const char *mnt, const char *type, const char *src, void *arg)
{
	struct top *t = arg;

	(void)src;
	if (!strcmp(mnt, t->where))
		snprintf(t->type, sizeof(t->type), "%s", type);
	return 0;
}

/*
 * The root of a FUSE mount (inode 1) of type fuse.sqfs-stage, before its
 * xattr is asked: elsewhere user.sqfs-stage.seal is an attribute like any
 * other (a plain directory, one inside the mount that a copied tree gave
 * it, or the root of another FUSE file system showing an image of one,
 * whose "pid" we would wait on for good).
 */
static int is_stage_root(const char *mnt)
{
	struct statfs sf;
	struct stat st;
	struct top t = { .where = NULL };
	int ret = fuse_root(mnt, &st, &sf);

	if (ret < 0) {
		report_errno(mnt, -ret);
		return 0;
	}
	if (!ret) {
		fprintf(stderr, "%s: %s: not a sqfs-stage mount%s\n", prog, mnt,
			sf.f_type == FUSE_SUPER_MAGIC && S_ISDIR(st.st_mode) ?
			" (a directory inside one? give its mountpoint)" : "");
		return 0;
	}
	/* Without a mount table (no /proc) the xattr is all there is to go on. */
	t.where = realpath(mnt, NULL);
	if (t.where)
		cli_mounts_each(top_type, &t);
	free((char *)t.where);
	if (t.type[0] && strcmp(t.type, "fuse.sqfs-stage")) {
		fprintf(stderr, "%s: %s: not a sqfs-stage mount (a %s mount)\n", prog, mnt, t.type);
		return 0;
	}
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "keep", no_argument, NULL, 'k' },
		{ "json", no_argument, NULL, 'J' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c, keep = 0, json = 0, quiet = 0, out_err = 0;
	const char *mnt;
	char *buf, *pid, *clamped;
	ssize_t len;

	/* Nothing of ours may be opened as 0, 1 or 2 (cli_stdio_open). */
	if (cli_stdio_open())
		return CLI_EXIT_FAIL;
	/*
	 * A reader gone from our stdout (sqfs-seal MNT | head -n 1) is no
	 * error, and must not stop us between the summary and the unmount.
	 */
	signal(SIGPIPE, SIG_IGN);
	argv[0] = (char *)prog;	/* getopt's messages name the program, not its path */
	while ((c = getopt_long(argc, argv, "kqhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'k': keep = 1; break;
		case 'J': json = 1; break;
		case 'q': quiet = 1; break;
		case 'h': usage(stdout); return cli_stdout_status(prog);
		case 'V': printf("sqfs-seal %s\n", SQW_VERSION); return cli_stdout_status(prog);
		default:
			fprintf(stderr, "Try '%s --help'.\n", prog);
			return 2;
		}
	}
	if (argc - optind != 1) {
		fprintf(stderr, "%s: expected MOUNTPOINT\nTry '%s --help'.\n", prog, prog);
		return 2;
	}
	mnt = argv[optind];
	if (!is_stage_root(mnt))
		return 1;
	buf = calloc(1, SEAL_BUF + 1);
	if (!buf) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return 1;
	}
	len = seal_request(mnt, buf);
	if (len < 0 || strncmp(buf, "error: ", 7))
		seal_signal_raise(mnt, len >= 0);
	if (len < 0) {
		int e = errno;

		if (e == ENODATA || e == ENOTSUP || e == EPERM)
			fprintf(stderr, "%s: %s: not a sqfs-stage mount\n", prog, mnt);
		else
			report_errno(mnt, e);
		free(buf);
		return 1;
	}
	buf[len] = '\0';
	if (!strncmp(buf, "error: ", 7)) {
		fprintf(stderr, "%s: %s: seal failed: %s\n", prog, mnt, buf + 7);
		free(buf);
		return 1;
	}
	if (json)
		printf("%s\n", buf);
	else if (!quiet)
		print_human(buf);
	out_err = cli_stdout_flush();
	clamped = field(buf, "clamped_times");
	if (clamped && strcmp(clamped, "0"))
		fprintf(stderr, "%s: warning: %s: %s " CLI_CLAMPED_TIMES_WARNING "\n", prog, mnt,
			clamped);
	free(clamped);
	pid = field(buf, "pid");
	free(buf);
	if (!keep) {
		/* fusermount3 wants the mountpoint itself, not a symlink to it. */
		char *real = realpath(mnt, NULL);
		int uret = unmount(real ? real : mnt);

		free(real);
		if (uret) {
			fprintf(stderr, "%s: %s: the image is sealed, but unmounting failed "
				"(files still in use?); run 'fusermount3 -u %s'\n", prog, mnt, mnt);
			free(pid);
			return 1;
		}
		wait_exit(pid ? strtol(pid, NULL, 10) : 0);
	}
	free(pid);
	/* A reader that left early wanted no more; anything else is an error. */
	if (out_err && out_err != EPIPE) {
		fprintf(stderr, "%s: %s: the image is sealed, but writing the summary failed: %s\n",
			prog, mnt, strerror(out_err));
		return 1;
	}
	return 0;
}
