/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Scanning a source directory into the tree (metadata only). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "pack/pack.h"
#include "util/u64map.h"
#include "util/util.h"

struct scan {
	struct dir_source *ds;
	sqw_tree_t *tree;
	int keep_xattrs;
	struct pack_err *err;
	struct u64map links;	/* (dev, ino) hash -> index in link_ids */
	struct link_id {
		dev_t dev;
		ino_t ino;
		sqw_node_t *node;
	} *link_ids;
	size_t nlink_ids, link_cap;
	struct buf path;	/* relative path of the current entry */
	dev_t root_dev;
	unsigned depth;		/* its components */
	char *target;		/* SQW_SYMLINK_MAX + 2 bytes: not on the stack of every level */
	char *xbuf;
	size_t xcap;
};

static int fail(struct scan *s, int code, const char *what)
{
	struct pack_err *e = s->err;

	e->code = code;
	e->what = what;
	pack_err_path(e, "%s/%.*s", s->ds->root, (int)s->path.len,
		      (const char *)s->path.data);
	return code;
}

int dir_source_open(struct dir_source *ds, const char *root, FILE *warn)
{
	memset(ds, 0, sizeof(*ds));
	ds->warn = warn;
	ds->root = strdup(root);
	if (!ds->root)
		return -ENOMEM;
	ds->rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ds->rootfd < 0) {
		int e = -errno;

		free(ds->root);
		ds->root = NULL;
		return e;
	}
	/* A chroot without /proc: xattrs are then read by their full paths. */
	ds->no_proc = access("/proc/self/fd", X_OK) != 0;
	return 0;
}

void dir_source_changed(struct dir_source *ds, struct dir_file *f, uint64_t now)
{
	/* A file that shrank fails its read, which names it. */
	if (ds->warn && now >= f->size && !__atomic_exchange_n(&f->warned, 1, __ATOMIC_RELAXED))
		pack_warn(ds->warn, "%s/%s: changed after the scan (%llu bytes then, %llu now): "
			  "the image holds the data read now, at the size and time the scan found\n",
			  ds->root, f->path, (unsigned long long)f->size,
			  (unsigned long long)now);
}

void dir_source_close(struct dir_source *ds)
{
	if (ds->rootfd >= 0)
		close(ds->rootfd);
	free(ds->root);
	ds->root = NULL;
}

static struct sqw_attr attr_of(const struct stat *st)
{
	struct sqw_attr a = {
		.mode = st->st_mode, .uid = st->st_uid, .gid = st->st_gid,
		.mtime = st->st_mtime, .size = (uint64_t)st->st_size,
		.rdev = st->st_rdev,
	};
	return a;
}

/*
 * Extended attributes through /proc/self/fd paths: short names, and no
 * directory on the way can be swapped.  Without /proc, by the full path
 * (as mksquashfs reads them), which must then fit in PATH_MAX.
 */
static int read_xattrs(struct scan *s, int dirfd, const char *name,
		       sqw_node_t *n)
{
	char proc[64 + 256 + 2], *p = proc;
	ssize_t len, vlen;
	int tries = 0;
	char *k;

	if (s->ds->no_proc) {
		if (strlen(s->ds->root) + s->path.len + 2 > PATH_MAX)
			return fail(s, -ENAMETOOLONG, "listing xattrs: a path longer than "
				    "PATH_MAX and no /proc (mount it, or give --no-xattrs)");
		if (asprintf(&p, "%s/%.*s", s->ds->root, (int)s->path.len,
			     (const char *)s->path.data) < 0)
			return fail(s, -ENOMEM, "allocating");
	} else {
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d/%s", dirfd, name);
	}
again:
	len = llistxattr(p, NULL, 0);
	if (len <= 0) {
		len = (len < 0 && errno != ENOTSUP) ? fail(s, -errno, "listing xattrs") : 0;
		goto out;
	}
	if (array_reserve((void **)&s->xbuf, &s->xcap, (size_t)len + 65536 + 1, 1)) {
		len = fail(s, -ENOMEM, "allocating");
		goto out;
	}
	len = llistxattr(p, s->xbuf, (size_t)len);
	/* Another attribute set since the first call: list again. */
	if (len < 0 && errno == ERANGE && ++tries < 10)
		goto again;
	if (len < 0) {
		len = fail(s, -errno, "listing xattrs");
		goto out;
	}
	for (k = s->xbuf; k < s->xbuf + len; k += strlen(k) + 1) {
		char *val = s->xbuf + len;
		int ret;

		vlen = lgetxattr(p, k, val, 65536);
		/* Removed since it was listed: as if listed a moment later. */
		if (vlen < 0 && errno == ENODATA)
			continue;
		if (vlen < 0) {
			len = fail(s, -errno, "reading xattrs");
			goto out;
		}
		ret = sqw_node_set_xattr(s->tree, n, k, val, (size_t)vlen);
		if (ret == -ENOTSUP) {
			if (s->ds->warn && !s->ds->warned_xattr++)
				pack_warn(s->ds->warn,
					"%s/%.*s: xattr '%s' cannot be stored in SquashFS (only user., trusted., security.); skipped\n",
					s->ds->root, (int)s->path.len,
					(char *)s->path.data, k);
			continue;
		}
		if (ret) {
			len = fail(s, ret, "storing xattrs");
			goto out;
		}
	}
	len = 0;
out:
	if (p != proc)
		free(p);
	return (int)len;
}

static int scan_dir(struct scan *s, int *dirfdp, sqw_node_t *dir);

static uint64_t link_key(const struct stat *st, unsigned probe)
{
	return ((uint64_t)st->st_dev * 0x9E3779B97F4A7C15ull ^
		(uint64_t)st->st_ino ^ (uint64_t)probe * 0xC2B2AE3D27D4EB4Full) | 1;
}

/* The node already made for this (dev, ino), if any. */
static sqw_node_t *link_find(struct scan *s, const struct stat *st)
{
	unsigned probe;

	for (probe = 0;; probe++) {
		uint64_t *v = u64map_find(&s->links, link_key(st, probe));
		const struct link_id *l;

		if (!v)
			return NULL;
		l = &s->link_ids[*v];
		if (l->dev == st->st_dev && l->ino == st->st_ino)
			return l->node;
	}
}

static int link_add(struct scan *s, const struct stat *st, sqw_node_t *n)
{
	unsigned probe;
	int isnew;

	if (array_reserve((void **)&s->link_ids, &s->link_cap, s->nlink_ids + 1,
			  sizeof(*s->link_ids)))
		return -ENOMEM;
	for (probe = 0;; probe++) {
		uint64_t *v = u64map_get(&s->links, link_key(st, probe), &isnew);

		if (!v)
			return -ENOMEM;
		if (isnew) {
			*v = s->nlink_ids;
			break;
		}
	}
	s->link_ids[s->nlink_ids].dev = st->st_dev;
	s->link_ids[s->nlink_ids].ino = st->st_ino;
	s->link_ids[s->nlink_ids++].node = n;
	return 0;
}

/*
 * Below this depth each level keeps its directory open while its
 * subdirectories are scanned; deeper, a level lets go of it and opens it
 * again through ".." afterwards, so that a tree 4096 levels deep needs no
 * more than this many descriptors (a hard limit of 1024 is common).
 */
#define SCAN_FDS_KEPT 16

/*
 * Scan the directory fd (closed here), a child of the one *dirfdp holds
 * (which may be another descriptor of it after).
 */
static int scan_subdir(struct scan *s, int *dirfdp, int fd, sqw_node_t *n)
{
	struct stat was, now;
	int ret, up, keep = s->depth < SCAN_FDS_KEPT;

	if (!keep) {
		if (fstat(*dirfdp, &was)) {
			close(fd);
			return fail(s, -errno, "stat");
		}
		close(*dirfdp);
		*dirfdp = -1;
	}
	s->depth++;
	ret = scan_dir(s, &fd, n);
	s->depth--;
	if (!keep) {
		up = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (up < 0) {
			if (!ret)
				ret = fail(s, -errno, "opening the directory above it again");
		} else {
			*dirfdp = up;
			/* Moved meanwhile: ".." is another directory now. */
			if (!ret && (fstat(up, &now) || now.st_dev != was.st_dev ||
				     now.st_ino != was.st_ino))
				ret = fail(s, -ESTALE, "the directory moved during the scan");
		}
	}
	close(fd);
	return ret;
}

/* type: readdir's d_type, DT_UNKNOWN when the file system gives none. */
static int scan_entry(struct scan *s, int *dirfdp, const char *name,
		      unsigned char type, sqw_node_t *dir)
{
	int dirfd = *dirfdp;
	size_t nlen = strlen(name), base = s->path.len;
	struct sqw_attr a;
	struct stat st;
	sqw_node_t *n = NULL;
	char *target = s->target;
	int ret = 0;

	if (base && buf_append(&s->path, "/", 1))
		return fail(s, -ENOMEM, "allocating");
	if (buf_append(&s->path, name, nlen + 1))
		return fail(s, -ENOMEM, "allocating");
	s->path.len--;	/* keep the NUL out of the length */
	/* --exclude before the stat: an excluded entry may vanish, or be unreadable. */
	if (type != DT_UNKNOWN &&
	    pack_filter_match(s->ds->filter, (char *)s->path.data, type == DT_DIR))
		goto out;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW)) {
		ret = fail(s, -errno, "stat");
		goto out;
	}
	if (st.st_dev == s->ds->skip_dev && st.st_ino == s->ds->skip_ino)
		goto out;	/* the image being written */
	if (pack_filter_match(s->ds->filter, (char *)s->path.data, S_ISDIR(st.st_mode)))
		goto out;	/* --exclude */
	a = attr_of(&st);
	if (nlen > SQW_NAME_MAX) {
		ret = fail(s, -ENAMETOOLONG, "name longer than 256 bytes");
		goto out;
	}
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
		sqw_node_t *m = link_find(s, &st);

		if (m) {
			ret = sqw_tree_link(s->tree, dir, name, nlen, m);
			if (ret)
				fail(s, ret, "adding a hard link");
			goto out;
		}
	}
	if (S_ISLNK(st.st_mode)) {
		ssize_t l = readlinkat(dirfd, name, target, SQW_SYMLINK_MAX + 2);

		if (l < 0) {
			ret = fail(s, -errno, "readlink");
			goto out;
		}
		if (l > SQW_SYMLINK_MAX) {
			ret = fail(s, -ENAMETOOLONG, "symlink target longer than 4095 bytes");
			goto out;
		}
		target[l] = '\0';
	}
	ret = sqw_tree_add(s->tree, dir, name, nlen, &a,
			   S_ISLNK(st.st_mode) ? target : NULL, &n);
	if (ret) {
		ret = fail(s, ret, "adding");
		goto out;
	}
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1 && link_add(s, &st, n)) {
		ret = fail(s, -ENOMEM, "allocating");
		goto out;
	}
	if (S_ISREG(st.st_mode)) {
		struct dir_file *f = malloc(sizeof(*f) + s->path.len + 1);

		if (!f) {
			ret = fail(s, -ENOMEM, "allocating");
			goto out;
		}
		f->dev = st.st_dev;
		f->ino = st.st_ino;
		f->size = (uint64_t)st.st_size;
		f->mtime = st.st_mtim;
		f->warned = 0;
		memcpy(f->path, s->path.data, s->path.len);
		f->path[s->path.len] = '\0';
		sqw_node_set_source(n, f);
	}
	if (s->keep_xattrs) {
		ret = read_xattrs(s, dirfd, name, n);
		if (ret)
			goto out;
	}
	/* --one-file-system: a mount point stays, empty (as mksquashfs does). */
	if (S_ISDIR(st.st_mode) && !(s->ds->one_fs && st.st_dev != s->root_dev)) {
		int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (fd < 0) {
			ret = fail(s, -errno, "opening directory");
			goto out;
		}
		ret = scan_subdir(s, dirfdp, fd, n);
	}
out:
	s->path.len = base;
	return ret;
}

static int scan_dir(struct scan *s, int *dirfdp, sqw_node_t *dir)
{
	int dirfd = *dirfdp;
	struct buf names = { 0 };
	struct dirent *de;
	size_t off;
	DIR *d;
	int fd, ret = 0;

	/*
	 * Read all names first so only one fd per level stays open; each
	 * with its type in the byte before it.
	 */
	fd = dup(dirfd);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return fail(s, -errno, "opening directory");
	}
	errno = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (buf_append(&names, &de->d_type, 1) ||
		    buf_append(&names, de->d_name, strlen(de->d_name) + 1)) {
			ret = fail(s, -ENOMEM, "allocating");
			break;
		}
	}
	if (!ret && errno)
		ret = fail(s, -errno, "reading directory");
	closedir(d);
	/* Its entries would have one component more than it: name one. */
	if (!ret && names.len && s->depth >= SQW_DEPTH_MAX) {
		ret = fail(s, -ENAMETOOLONG, "nested more than 4096 levels deep");
		pack_err_path(s->err, "%s/%.*s/%s", s->ds->root, (int)s->path.len,
			      (const char *)s->path.data, (const char *)names.data + 1);
	}
	for (off = 0; !ret && off < names.len; off += strlen((char *)names.data + off + 1) + 2)
		ret = scan_entry(s, dirfdp, (char *)names.data + off + 1,
				 ((unsigned char *)names.data)[off], dir);
	buf_free(&names);
	return ret;
}

int dir_scan(struct dir_source *ds, sqw_tree_t *tree, int keep_xattrs,
	     struct pack_err *err)
{
	struct scan s = { .ds = ds, .tree = tree, .keep_xattrs = keep_xattrs,
			  .err = err };
	struct stat st;
	struct sqw_attr a;
	int ret;

	if (fstat(ds->rootfd, &st))
		return fail(&s, -errno, "stat");
	s.target = malloc(SQW_SYMLINK_MAX + 2);
	if (!s.target)
		return fail(&s, -ENOMEM, "allocating");
	s.root_dev = st.st_dev;
	a = attr_of(&st);
	sqw_node_set_attr(sqw_tree_root(tree), &a);
	ret = keep_xattrs ? read_xattrs(&s, ds->rootfd, ".", sqw_tree_root(tree)) : 0;
	if (!ret)
		ret = scan_dir(&s, &ds->rootfd, sqw_tree_root(tree));
	/* The first was named; how many went, so none goes unsaid. */
	if (!ret && ds->warn && ds->warned_xattr > 1)
		pack_warn(ds->warn, "%d xattrs that SquashFS cannot store were "
			"skipped in all\n", ds->warned_xattr);
	u64map_free(&s.links);
	free(s.link_ids);
	buf_free(&s.path);
	free(s.target);
	free(s.xbuf);
	return ret;
}
