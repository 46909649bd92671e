/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * passthrough: the baseline of test_posix.sh.  A plain FUSE file system that
 * mirrors a directory, so that pjdfstest can tell what any FUSE file system
 * fails whatever it does (the kernel's part) from what sqfs-stage gets wrong.
 *
 *   passthrough [-f] [-s] [-o FUSE_OPTIONS] SOURCE MOUNTPOINT
 *
 * It uses the low-level API, like sqfs-stage: every inode the kernel knows
 * holds an O_PATH descriptor of the backing inode, found again by (st_dev,
 * st_ino), so open files stay usable after an unlink and hard links share a
 * node.  Every operation runs with the caller's file system credentials
 * (fsuid, fsgid, supplementary groups, set for the serving thread only), so
 * the backing file system decides ownership, permissions and the set-id bits
 * as if the caller worked on it directly (except that the kernel's clearing
 * of set-id bits after another user's write, truncate or chown is done with
 * our own credentials: the kernel decided it already).  Mount it with
 * -o allow_other,default_permissions like sqfs-stage -o allow_other.  Nothing
 * is cached (timeouts 0).  No ACLs, no locks, no copy_file_range.
 */
#define FUSE_USE_VERSION 314

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

struct pnode {
	struct pnode *next;	/* hash chain */
	int fd;			/* O_PATH | O_NOFOLLOW */
	dev_t dev;
	ino_t ino;
	uint64_t nlookup;
};

#define NBUCKETS 4096
static struct pnode *buckets[NBUCKETS];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pnode root;

static struct pnode *P(fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? &root : (struct pnode *)(uintptr_t)ino;
}

static size_t bucket(dev_t dev, ino_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ull) ^ dev) % NBUCKETS;
}

/* --- credentials --------------------------------------------------------- */

struct cred {
	uid_t uid;
	gid_t gid;
};

#define MAX_GROUPS 64

/*
 * The caller's supplementary groups from /proc.  Not fuse_req_getgroups():
 * libfuse 3.14 runs strstr() over its unterminated read buffer (ASan).
 */
static int caller_groups(pid_t pid, gid_t *groups, int max)
{
	char path[64], line[4096];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *p = line + 7, *end;

		if (strncmp(line, "Groups:", 7))
			continue;
		while (n < max) {
			unsigned long g = strtoul(p, &end, 10);

			if (end == p)
				break;
			groups[n++] = (gid_t)g;
			p = end;
		}
		break;
	}
	fclose(f);
	return n;
}

static void become_caller(fuse_req_t req, struct cred *old)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	gid_t groups[MAX_GROUPS];
	int n = caller_groups(c->pid, groups, MAX_GROUPS);

	/* Raw system calls: glibc's wrappers would change every thread. */
	syscall(SYS_setgroups, (size_t)n, groups);
	old->gid = (gid_t)setfsgid(c->gid);
	old->uid = (uid_t)setfsuid(c->uid);
}

static void become_self(const struct cred *old)
{
	setfsuid(old->uid);
	setfsgid(old->gid);
	syscall(SYS_setgroups, (size_t)0, NULL);
}

/* Evaluate EXPR (a call that returns -1 and sets errno) as the caller of
 * req; the result, or -errno. */
#define AS(req, expr) ({						\
	struct cred cred_;						\
	long r_;							\
	become_caller((req), &cred_);					\
	r_ = (long)(expr);						\
	r_ = r_ < 0 ? -errno : r_;					\
	become_self(&cred_);						\
	r_;								\
})

/* "/proc/self/fd/N": the backing inode of n by a path (follows it). */
#define PROCFD(buf, n) (snprintf((buf), sizeof(buf), "/proc/self/fd/%d", (n)->fd), (buf))

/* --- nodes ---------------------------------------------------------------- */

static int stat_node(const struct pnode *n, struct stat *st)
{
	return fstatat(n->fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
}

/*
 * Look name up in parent as the caller; fill e and count a lookup.
 * Returns 0 or an errno.
 */
static int do_lookup(fuse_req_t req, fuse_ino_t parent, const char *name,
		     struct fuse_entry_param *e)
{
	struct pnode *n;
	struct stat st;
	long fd;
	size_t b;

	memset(e, 0, sizeof(*e));
	fd = AS(req, openat(P(parent)->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC));
	if (fd < 0)
		return (int)-fd;
	if (fstatat((int)fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)) {
		int err = errno;

		close((int)fd);
		return err;
	}
	pthread_mutex_lock(&table_lock);
	b = bucket(st.st_dev, st.st_ino);
	for (n = buckets[b]; n; n = n->next)
		if (n->dev == st.st_dev && n->ino == st.st_ino)
			break;
	if (n) {
		close((int)fd);
	} else {
		n = calloc(1, sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&table_lock);
			close((int)fd);
			return ENOMEM;
		}
		n->fd = (int)fd;
		n->dev = st.st_dev;
		n->ino = st.st_ino;
		n->next = buckets[b];
		buckets[b] = n;
	}
	n->nlookup++;
	pthread_mutex_unlock(&table_lock);
	e->ino = (fuse_ino_t)(uintptr_t)n;
	e->attr = st;
	return 0;
}

static void forget_one(fuse_ino_t ino, uint64_t nlookup)
{
	struct pnode *n = P(ino), **pp;

	if (n == &root)
		return;
	pthread_mutex_lock(&table_lock);
	n->nlookup -= nlookup < n->nlookup ? nlookup : n->nlookup;
	if (!n->nlookup) {
		for (pp = &buckets[bucket(n->dev, n->ino)]; *pp; pp = &(*pp)->next) {
			if (*pp == n) {
				*pp = n->next;
				break;
			}
		}
		close(n->fd);
		free(n);
	}
	pthread_mutex_unlock(&table_lock);
}

static void reply_entry_or_err(fuse_req_t req, int err, struct fuse_entry_param *e)
{
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_entry(req, e);
}

/* --- operations ----------------------------------------------------------- */

static void pt_init(void *data, struct fuse_conn_info *conn)
{
	(void)data;
	conn->want &= ~FUSE_CAP_POSIX_ACL;
}

/*
 * Does the mode change only clear set-id bits?  The kernel sends that after
 * a write, truncate or chown by a user who may not chmod the file: it
 * decided already, so it is done with our own credentials.
 */
static int kills_setid(const struct pnode *n, mode_t mode)
{
	const mode_t id = S_ISUID | S_ISGID;
	mode_t was, now = mode & 07777;
	struct stat st;

	if (stat_node(n, &st))
		return 0;
	was = st.st_mode & 07777;
	return now != was && (now & ~id) == (was & ~id) && !(now & ~was);
}

static void pt_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;

	reply_entry_or_err(req, do_lookup(req, parent, name, &e), &e);
}

static void pt_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	forget_one(ino, nlookup);
	fuse_reply_none(req);
}

static void pt_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	size_t i;

	for (i = 0; i < count; i++)
		forget_one(f[i].ino, f[i].nlookup);
	fuse_reply_none(req);
}

static void pt_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int r = fi ? fstat((int)fi->fh, &st) : stat_node(P(ino), &st);

	if (r)
		fuse_reply_err(req, errno);
	else
		fuse_reply_attr(req, &st, 0);
}

static void pt_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *a, int set,
		       struct fuse_file_info *fi)
{
	struct pnode *n = P(ino);
	char path[64];
	long r = 0;

	if ((set & FUSE_SET_ATTR_MODE) && kills_setid(n, a->st_mode))
		r = chmod(PROCFD(path, n), a->st_mode) ? -errno : 0;
	else if (set & FUSE_SET_ATTR_MODE)
		r = fi ? AS(req, fchmod((int)fi->fh, a->st_mode))
		       : AS(req, chmod(PROCFD(path, n), a->st_mode));
	if (!r && (set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))) {
		uid_t uid = set & FUSE_SET_ATTR_UID ? a->st_uid : (uid_t)-1;
		gid_t gid = set & FUSE_SET_ATTR_GID ? a->st_gid : (gid_t)-1;

		r = AS(req, fchownat(n->fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW));
	}
	if (!r && (set & FUSE_SET_ATTR_SIZE))
		r = fi ? AS(req, ftruncate((int)fi->fh, a->st_size))
		       : AS(req, truncate(PROCFD(path, n), a->st_size));
	if (!r && (set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))) {
		struct timespec tv[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT } };

		if (set & FUSE_SET_ATTR_ATIME_NOW)
			tv[0].tv_nsec = UTIME_NOW;
		else if (set & FUSE_SET_ATTR_ATIME)
			tv[0] = a->st_atim;
		if (set & FUSE_SET_ATTR_MTIME_NOW)
			tv[1].tv_nsec = UTIME_NOW;
		else if (set & FUSE_SET_ATTR_MTIME)
			tv[1] = a->st_mtim;
		r = fi ? AS(req, futimens((int)fi->fh, tv))
		       : AS(req, utimensat(n->fd, "", tv, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW));
	}
	if (r)
		fuse_reply_err(req, (int)-r);
	else
		pt_getattr(req, ino, fi);
}

static void pt_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[4097];
	long len = AS(req, readlinkat(P(ino)->fd, "", buf, sizeof(buf) - 1));

	if (len < 0) {
		fuse_reply_err(req, (int)-len);
		return;
	}
	buf[len] = '\0';
	fuse_reply_readlink(req, buf);
}

/* After creating name in parent: its entry, or the error r. */
static void reply_made(fuse_req_t req, long r, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;

	if (r < 0) {
		fuse_reply_err(req, (int)-r);
		return;
	}
	reply_entry_or_err(req, do_lookup(req, parent, name, &e), &e);
}

static void pt_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	reply_made(req, AS(req, mknodat(P(parent)->fd, name, mode, rdev)), parent, name);
}

static void pt_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	reply_made(req, AS(req, mkdirat(P(parent)->fd, name, mode)), parent, name);
}

static void pt_symlink(fuse_req_t req, const char *target, fuse_ino_t parent,
		       const char *name)
{
	reply_made(req, AS(req, symlinkat(target, P(parent)->fd, name)), parent, name);
}

static void pt_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char *name)
{
	char path[64];

	/* AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH; the magic link does not. */
	reply_made(req, AS(req, linkat(AT_FDCWD, PROCFD(path, P(ino)), P(parent)->fd, name,
				       AT_SYMLINK_FOLLOW)), parent, name);
}

static void pt_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, (int)-AS(req, unlinkat(P(parent)->fd, name, 0)));
}

static void pt_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, (int)-AS(req, unlinkat(P(parent)->fd, name, AT_REMOVEDIR)));
}

static void pt_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	fuse_reply_err(req, (int)-AS(req, syscall(SYS_renameat2, P(parent)->fd, name,
						  P(newparent)->fd, newname, flags)));
}

static void pt_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char path[64];
	long fd = AS(req, open(PROCFD(path, P(ino)),
			       (fi->flags & ~(O_CREAT | O_EXCL | O_NOFOLLOW)) | O_CLOEXEC));

	if (fd < 0) {
		fuse_reply_err(req, (int)-fd);
		return;
	}
	fi->fh = (uint64_t)fd;
	fuse_reply_open(req, fi);
}

static void pt_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	long fd = AS(req, openat(P(parent)->fd, name,
				 (fi->flags & ~O_NOFOLLOW) | O_CREAT | O_CLOEXEC, mode));
	int err;

	if (fd < 0) {
		fuse_reply_err(req, (int)-fd);
		return;
	}
	err = do_lookup(req, parent, name, &e);
	if (err) {
		close((int)fd);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uint64_t)fd;
	fuse_reply_create(req, &e, fi);
}

static void pt_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);

	(void)ino;
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = (int)fi->fh;
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, 0);
}

static void pt_write(fuse_req_t req, fuse_ino_t ino, const char *data, size_t size,
		     off_t off, struct fuse_file_info *fi)
{
	long r = AS(req, pwrite((int)fi->fh, data, size, off));

	(void)ino;
	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else
		fuse_reply_write(req, (size_t)r);
}

static void pt_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void pt_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	close((int)fi->fh);
	fuse_reply_err(req, 0);
}

static void pt_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	int r = datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh);

	(void)ino;
	fuse_reply_err(req, r ? errno : 0);
}

static void pt_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
			 off_t len, struct fuse_file_info *fi)
{
	(void)ino;
	fuse_reply_err(req, (int)-AS(req, fallocate((int)fi->fh, mode, off, len)));
}

struct pdir {
	DIR *d;
	off_t pos;	/* the offset readdir will return next */
};

static void pt_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	long fd = AS(req, openat(P(ino)->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	struct pdir *h;

	if (fd < 0) {
		fuse_reply_err(req, (int)-fd);
		return;
	}
	h = calloc(1, sizeof(*h));
	if (!h || !(h->d = fdopendir((int)fd))) {
		free(h);
		close((int)fd);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	fuse_reply_open(req, fi);
}

static void pt_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct pdir *h = (struct pdir *)(uintptr_t)fi->fh;
	char *buf = malloc(size ? size : 1);
	size_t pos = 0;

	(void)ino;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (off != h->pos) {
		if (off)
			seekdir(h->d, off);
		else
			rewinddir(h->d);
		h->pos = off;
	}
	for (;;) {
		struct dirent *d;
		struct stat st;
		long next;
		size_t need;

		errno = 0;
		d = readdir(h->d);
		if (!d) {
			if (errno && !pos) {
				free(buf);
				fuse_reply_err(req, errno);
				return;
			}
			break;
		}
		next = telldir(h->d);
		memset(&st, 0, sizeof(st));
		st.st_ino = d->d_ino;
		st.st_mode = (mode_t)DTTOIF(d->d_type);
		need = fuse_add_direntry(req, buf + pos, size - pos, d->d_name, &st, next);
		if (need > size - pos) {
			seekdir(h->d, h->pos);	/* this entry comes first next time */
			break;
		}
		pos += need;
		h->pos = next;
	}
	fuse_reply_buf(req, buf, pos);
	free(buf);
}

static void pt_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pdir *h = (struct pdir *)(uintptr_t)fi->fh;

	(void)ino;
	closedir(h->d);
	free(h);
	fuse_reply_err(req, 0);
}

static void pt_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void pt_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;

	if (fstatvfs(P(ino)->fd, &sv))
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

/*
 * xattrs through the magic link, which lands on the inode itself (a
 * symlink too, not its target).
 */
static void pt_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	char path[64];

	fuse_reply_err(req, (int)-AS(req, setxattr(PROCFD(path, P(ino)), name, value,
						   size, flags)));
}

static void reply_xattr(fuse_req_t req, long r, const char *buf, size_t size)
{
	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else if (!size)
		fuse_reply_xattr(req, (size_t)r);
	else
		fuse_reply_buf(req, buf, (size_t)r);
}

static void pt_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char path[64], *buf = malloc(size ? size : 1);

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	reply_xattr(req, AS(req, getxattr(PROCFD(path, P(ino)), name, size ? buf : NULL, size)),
		    buf, size);
	free(buf);
}

static void pt_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char path[64], *buf = malloc(size ? size : 1);

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	reply_xattr(req, AS(req, listxattr(PROCFD(path, P(ino)), size ? buf : NULL, size)),
		    buf, size);
	free(buf);
}

static void pt_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	char path[64];

	fuse_reply_err(req, (int)-AS(req, removexattr(PROCFD(path, P(ino)), name)));
}

static const struct fuse_lowlevel_ops pt_ops = {
	.init = pt_init,
	.lookup = pt_lookup,
	.forget = pt_forget,
	.forget_multi = pt_forget_multi,
	.getattr = pt_getattr,
	.setattr = pt_setattr,
	.readlink = pt_readlink,
	.mknod = pt_mknod,
	.mkdir = pt_mkdir,
	.unlink = pt_unlink,
	.rmdir = pt_rmdir,
	.symlink = pt_symlink,
	.rename = pt_rename,
	.link = pt_link,
	.open = pt_open,
	.create = pt_create,
	.read = pt_read,
	.write = pt_write,
	.flush = pt_flush,
	.release = pt_release,
	.fsync = pt_fsync,
	.opendir = pt_opendir,
	.readdir = pt_readdir,
	.releasedir = pt_releasedir,
	.fsyncdir = pt_fsyncdir,
	.statfs = pt_statfs,
	.setxattr = pt_setxattr,
	.getxattr = pt_getxattr,
	.listxattr = pt_listxattr,
	.removexattr = pt_removexattr,
	.fallocate = pt_fallocate,
};

static char *source;

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *out)
{
	(void)data;
	(void)out;
	if (key == FUSE_OPT_KEY_NONOPT && !source) {
		source = strdup(arg);
		return 0;
	}
	return 1;
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts o;
	struct fuse_session *se;
	int ret = 1;

	if (fuse_opt_parse(&args, NULL, NULL, opt_proc) || fuse_parse_cmdline(&args, &o))
		return 2;
	if (!source || !o.mountpoint) {
		fprintf(stderr, "usage: %s [-f] [-s] [-o OPTIONS] SOURCE MOUNTPOINT\n", argv[0]);
		return 2;
	}
	root.fd = open(source, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root.fd < 0) {
		perror(source);
		return 1;
	}
	umask(0);	/* the kernel applied the caller's umask already */
	se = fuse_session_new(&args, &pt_ops, sizeof(pt_ops), NULL);
	if (!se)
		return 1;
	if (fuse_set_signal_handlers(se) || fuse_session_mount(se, o.mountpoint))
		goto out;
	fuse_daemonize(o.foreground);
	if (o.singlethread) {
		ret = fuse_session_loop(se);
	} else {
		struct fuse_loop_config *cfg = fuse_loop_cfg_create();

		fuse_loop_cfg_set_max_threads(cfg, o.max_threads);
		ret = fuse_session_loop_mt(se, cfg);
		fuse_loop_cfg_destroy(cfg);
	}
	fuse_session_unmount(se);
out:
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	free(o.mountpoint);
	free(source);
	fuse_opt_free_args(&args);
	return ret ? 1 : 0;
}
