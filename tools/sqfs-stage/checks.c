/* SPDX-License-Identifier: GPL-2.0-or-later */
/* What sqfs-stage checks before it mounts: IMAGE, MOUNTPOINT, the spool. */
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "front.h"

/* An absolute IMAGE whose directory exists and is writable. */
int check_image(struct stage *s, const char *image)
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
		fprintf(stderr, "%s: %s: cannot create the image: %s\n", prog, image, strerror(-e));
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
int check_fuse_args(const struct fuse_args *args, const char *mnt)
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

int check_mountpoint(const char *mnt)
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

/*
 * Another live sqfs-stage mount staging the same IMAGE: the later seal
 * would silently replace the earlier one's image.  A mount whose daemon
 * has gone can seal nothing, so it is no conflict (--recover
 * of its spool is the usual next step).
 */
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
int add_fuse_opt(struct fuse_args *args, const char *opt)
{
	int i;

	for (i = 1; i < args->argc; i++)
		if (!strcmp(args->argv[i], "--"))
			return fuse_opt_insert_arg(args, i, opt);
	return fuse_opt_add_arg(args, opt);
}

int check_image_free(struct stage *s)
{
	return cli_mounts_each(same_image, s);
}

/*
 * Also a daemon unmounted but still sealing the same IMAGE (fusermount3 -u
 * returns at once) would replace the image this mount seals.  One that has
 * sealed and is on its way out lets go within moments: it gets 3 s.
 */
int claim_image(struct stage *s)
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
int check_outside(const struct stage *s, const char *mnt, const char *spool)
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
int mark_spool(struct stage *s, int recover, int *marked)
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

/* What to do when the spool's file system is full. */
const char *full_hint(int err, int recover)
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
