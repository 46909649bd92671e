/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The journal's replay, for sqfs-stage --recover (the format: journal.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "stage/journal.h"
#include "util/util.h"

struct rd {
	const uint8_t *p, *end;
	int bad;
};

static const uint8_t *take(struct rd *r, size_t n)
{
	const uint8_t *p = r->p;

	if (r->bad || (size_t)(r->end - r->p) < n) {
		r->bad = 1;
		return NULL;
	}
	r->p += n;
	return p;
}

static uint32_t get32(struct rd *r)
{
	const uint8_t *p = take(r, 4);

	return p ? get_le32(p) : 0;
}

static uint64_t get64(struct rd *r)
{
	const uint8_t *p = take(r, 8);

	return p ? get_le64(p) : 0;
}

static void get_time(struct rd *r, struct timespec *t)
{
	t->tv_sec = (time_t)get64(r);
	t->tv_nsec = (long)get32(r);
}

/*
 * What a batch that checks out may still hold only if it was damaged (or
 * made by hand) is damage too: the replay stops there, as at a bad
 * checksum, rather than build a tree the mount could not have made and
 * the seal could not write (or would write as a corrupt image).
 */
static int node_ok(mode_t mode, uint64_t rdev, const uint8_t *t, uint32_t tlen)
{
	if (mode & ~(mode_t)(S_IFMT | 07777))
		return 0;
	switch (mode & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFIFO: case S_IFSOCK:
		return 1;
	case S_IFCHR: case S_IFBLK:
		return rdev <= UINT32_MAX;	/* the kernel's dev_t in a FUSE mknod */
	case S_IFLNK:
		/* the kernel's bounds for a target: 1..PATH_MAX-1 bytes, no NUL */
		return tlen && tlen < PATH_MAX && !memchr(t, 0, tlen);
	default:
		return 0;
	}
}

/* A name a directory can hold. */
static int name_ok(const char *name, size_t len)
{
	return len && len <= STAGE_NAME_MAX && !memchr(name, '/', len) &&
	       !memchr(name, 0, len) && !(len == 1 && name[0] == '.') &&
	       !(len == 2 && name[0] == '.' && name[1] == '.');
}

static int apply_node(struct stage *s, struct rd *r, int doit)
{
	fuse_ino_t ino = get64(r);
	mode_t mode = get32(r);
	uid_t uid = get32(r);
	gid_t gid = get32(r);
	uint64_t rdev = get64(r);
	struct timespec at, mt, ct;
	struct snode *n;
	uint32_t tlen;
	const uint8_t *t;

	get_time(r, &at);
	get_time(r, &mt);
	get_time(r, &ct);
	tlen = get32(r);
	t = take(r, tlen);
	if (r->bad || ino < FUSE_ROOT_ID || !node_ok(mode, rdev, t, tlen))
		return -EINVAL;
	if (!doit)
		return 0;
	n = stage_get(s, ino);
	if (n && (n->mode & S_IFMT) != (mode & S_IFMT))
		return -EINVAL;
	if (!n) {
		n = stage_new_node_ino(s, ino, mode, uid, gid, (dev_t)rdev);
		if (!n)
			return -ENOMEM;
	}
	n->mode = mode;
	if (stage_node_set_owner(s, n, uid, gid))
		return -ENOMEM;
	if (S_ISCHR(n->mode) || S_ISBLK(n->mode))
		n->rdev = (dev_t)rdev;
	n->atime = at;
	n->mtime = mt;
	n->ctime = ct;
	if (S_ISLNK(mode)) {
		char *c = malloc(tlen + 1);

		if (!c)
			return -ENOMEM;
		memcpy(c, t, tlen);
		c[tlen] = '\0';
		free(n->target);
		n->target = c;
	}
	return 0;
}

static int apply_entry(struct stage *s, struct rd *r, int type, int doit)
{
	fuse_ino_t dino = get64(r);
	fuse_ino_t child = type == R_ADD ? get64(r) : 0;
	uint32_t len = get32(r);
	const char *name = (const char *)take(r, len);
	struct snode *dir, *n;

	if (r->bad || !name_ok(name, len))
		return -EINVAL;
	if (!doit)
		return 0;
	dir = stage_get(s, dino);
	if (!dir || !S_ISDIR(dir->mode))
		return -EINVAL;
	if (dir_find(dir, name, len))
		dir_del(s, dir, name, len);
	if (type == R_DEL)
		return 0;
	n = stage_get(s, child);
	if (!n)
		return -EINVAL;
	return dir_add(s, dir, name, len, n);
}

static int apply_xattr(struct stage *s, struct rd *r, int type, int doit)
{
	fuse_ino_t ino = get64(r);
	uint32_t len = get32(r), size = 0;
	const uint8_t *name = take(r, len), *v = NULL;
	struct snode *n;
	char buf[256];
	int ret;

	if (type == R_XSET) {
		size = get32(r);
		v = take(r, size);
	}
	if (r->bad || !len || len >= sizeof(buf) || memchr(name, 0, len))
		return -EINVAL;
	memcpy(buf, name, len);
	buf[len] = '\0';
	/* as setxattr through the mount would take it (ops_xattr.c) */
	if (xattr_name_check(buf) ||
	    (ino == FUSE_ROOT_ID &&
	     (!strcmp(buf, STAGE_SEAL_XATTR) || !strcmp(buf, STAGE_STATUS_XATTR))))
		return -EINVAL;
	if (!doit)
		return 0;
	n = stage_get(s, ino);
	if (!n)
		return -EINVAL;
	if (type == R_XDEL) {
		xattr_remove(n, buf);
		return 0;
	}
	/* the kernel gives user. attributes to files and directories only */
	if (!strncmp(buf, "user.", 5) && !S_ISREG(n->mode) && !S_ISDIR(n->mode))
		return -EINVAL;
	ret = xattr_set(n, buf, v, size, 0);
	return ret == -ENOMEM ? ret : ret ? -EINVAL : 0;
}

/*
 * One batch: each record checked first (a damaged batch changes nothing),
 * then node states, then entries and xattrs in order.
 */
static int apply_batch(struct stage *s, const uint8_t *p, size_t len)
{
	struct rd r;
	int pass, ret;

	for (pass = -1; pass < 2; pass++) {
		r.p = p;
		r.end = p + len;
		r.bad = 0;
		while (r.p < r.end) {
			const uint8_t *t = take(&r, 1);
			int type = t ? *t : 0;

			switch (type) {
			case R_NODE:
				ret = apply_node(s, &r, pass == 0);
				break;
			case R_ADD: case R_DEL:
				ret = apply_entry(s, &r, type, pass == 1);
				break;
			case R_XSET: case R_XDEL:
				ret = apply_xattr(s, &r, type, pass == 1);
				break;
			default:
				ret = -EINVAL;
			}
			if (ret)
				return ret;
		}
	}
	return 0;
}

struct extra {
	struct snode *dir;
	struct sdirent *d;
};

/*
 * Count the links of everything reachable from root, directory by
 * directory from a list rather than by recursion: a staged tree may be
 * nested deeper than any thread's stack.  A directory has one name, which
 * the mount keeps so; a second one (the root's, or one inside the
 * directory itself: a cycle) is damage, and goes.  -ENOMEM.
 */
static int reach(struct stage *s, uint64_t pass, uint64_t *dropped)
{
	struct snode **todo = NULL;
	struct extra *extra = NULL;
	size_t n = 0, cap = 0, nx = 0, xcap = 0, k;
	struct sdirent *d;
	int ret = 0;

	if (array_reserve((void **)&todo, &cap, 1, sizeof(*todo)))
		return -ENOMEM;
	todo[n++] = s->root;
	while (n && !ret) {
		struct snode *dir = todo[--n];

		for (k = 0; k < dir->nslots && !ret; k++) {
			for (d = dir->tab[k]; d; d = d->next) {
				struct snode *c = d->node;

				if (S_ISDIR(c->mode) && c->sqw_pass == pass) {
					ret = array_reserve((void **)&extra, &xcap, nx + 1,
							    sizeof(*extra));
					if (ret)
						break;
					extra[nx++] = (struct extra){ dir, d };
					continue;
				}
				c->links++;
				if (c->sqw_pass == pass)
					continue;
				c->sqw_pass = pass;
				if (!S_ISDIR(c->mode))
					continue;
				c->parent = dir;
				ret = array_reserve((void **)&todo, &cap, n + 1, sizeof(*todo));
				if (ret)
					break;
				todo[n++] = c;
			}
		}
	}
	/* Each entry apart from the others of its directory: all still there. */
	for (k = 0; !ret && k < nx; k++)
		dir_del(s, extra[k].dir, extra[k].d->name, extra[k].d->len);
	*dropped += ret ? 0 : nx;
	free(extra);
	free(todo);
	return ret;
}

#define DETACH_SUFFIX ".detach"

/* Copy what in holds (its data, not its holes) to out; both size bytes. */
static int copy_data(int in, int out, uint64_t size)
{
	off_t pos = 0, end;

	while ((uint64_t)pos < size) {
		pos = lseek(in, pos, SEEK_DATA);
		if (pos < 0)
			return errno == ENXIO ? 0 : -errno;
		end = lseek(in, pos, SEEK_HOLE);
		if (end < 0)
			return -errno;
		while (pos < end) {
			off_t oi = pos, oo = pos;
			ssize_t n = copy_file_range(in, &oi, out, &oo, (size_t)(end - pos), 0);

			if (n < 0)
				return -errno;
			if (n == 0)
				return 0;	/* it shrank meanwhile: the rest reads as zeros */
			pos += n;
		}
	}
	return 0;
}

/*
 * A program that held a file open through passthrough when the daemon died
 * may still write to its spool file: the kernel keeps the backing file
 * open.  Such writes would show in reads of the recovered tree but never
 * reach its background blocks, so the image would miss them.  A data file
 * someone else has open for writing (the kernel refuses us a write lease)
 * gets a new inode, a copy: those writes then go to a file nothing uses,
 * as they fail with ENOTCONN without passthrough.  1 detached, 0 not, or
 * -errno.
 */
static int detach_if_open(struct stage *s, struct snode *n)
{
	char name[STAGE_SPOOL_NAME_SIZE], tmp[STAGE_SPOOL_NAME_SIZE + sizeof(DETACH_SUFFIX)];
	struct stat st;
	int in, out, ret;

	stage_spool_name(name, n->ino);
	in = openat(s->datafd, name, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -errno;
	if (!fcntl(in, F_SETLEASE, F_WRLCK)) {
		fcntl(in, F_SETLEASE, F_UNLCK);
		close(in);
		return 0;
	}
	if (errno != EAGAIN) {	/* leases off (fs.leases-enable): no way to tell */
		close(in);
		return 0;
	}
	snprintf(tmp, sizeof(tmp), "%s%s", name, DETACH_SUFFIX);
	out = openat(s->datafd, tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0) {
		ret = -errno;
		goto out_in;
	}
	ret = fstat(in, &st) ? -errno : 0;
	if (!ret && ftruncate(out, st.st_size))
		ret = -errno;
	if (!ret)
		ret = copy_data(in, out, (uint64_t)st.st_size);
	if (!ret && !s->no_sync && fsync(out))
		ret = -errno;
	if (!ret && renameat(s->datafd, tmp, s->datafd, name))
		ret = -errno;
	close(out);
	if (ret)
		unlinkat(s->datafd, tmp, 0);
out_in:
	close(in);
	return ret ? ret : 1;
}

/*
 * After replay: entries of regular files whose data file is gone (unlinked
 * just before a crash) go; link counts come from a walk from the root; what
 * the walk does not reach is dropped with its data.
 */
static int settle(struct stage *s, uint64_t *dropped, uint64_t *detached)
{
	size_t i, k;
	struct snode *n, *next;
	struct sdirent *d, *dn;
	char name[STAGE_SPOOL_NAME_SIZE];
	struct stat st;

	for (i = 0; i < s->islots; i++) {
		for (n = s->itab[i]; n; n = n->hnext) {
			n->links = 0;
			if (!S_ISDIR(n->mode))
				continue;
			for (k = 0; k < n->nslots; k++) {
				for (d = n->tab[k]; d; d = dn) {
					struct snode *c = d->node;

					dn = d->next;
					if (!S_ISREG(c->mode))
						continue;
					if (!fstatat(s->datafd, stage_spool_name(name, c->ino), &st, 0)) {
						/* a hard link's second look finds the copy free */
						int r = detach_if_open(s, c);

						if (r < 0)
							return r;
						*detached += (uint64_t)r;
						if (r > 0 && fstatat(s->datafd, name, &st, 0))
							return -errno;
						c->size = (uint64_t)st.st_size;
						node_set_blocks(c, st.st_blocks);
						continue;
					}
					dir_del(s, n, d->name, d->len);
					(*dropped)++;
				}
			}
		}
	}
	s->pass++;
	s->root->links = 1;
	s->root->parent = s->root;
	s->root->sqw_pass = s->pass;
	/* A partial count would drop what the walk did not get to. */
	if (reach(s, s->pass, dropped))
		return -ENOMEM;
	for (i = 0; i < s->islots; i++) {
		for (n = s->itab[i]; n; n = next) {
			next = n->hnext;
			if (n->links)
				continue;
			if (S_ISREG(n->mode))
				unlinkat(s->datafd, stage_spool_name(name, n->ino), 0);
			stage_node_drop(s, n);
		}
	}
	return 0;
}

/* Data files nothing names any more: left by a crash before their entry. */
static void sweep_data(struct stage *s)
{
	DIR *dp;
	struct dirent *de;
	int fd = dup(s->datafd);

	dp = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dp) {
		if (fd >= 0)
			close(fd);
		return;
	}
	rewinddir(dp);	/* the offset is shared with datafd's other dups */
	while ((de = readdir(dp))) {
		char *end;
		unsigned long long ino = strtoull(de->d_name, &end, 10);
		struct snode *n;

		if (!strcmp(end, DETACH_SUFFIX) && end != de->d_name) {
			unlinkat(s->datafd, de->d_name, 0);	/* a copy cut short */
			continue;
		}
		if (de->d_name[0] == '.' || *end)
			continue;
		n = stage_get(s, ino);
		if (!n || !S_ISREG(n->mode))
			unlinkat(s->datafd, de->d_name, 0);
		if (ino >= s->next_ino)
			s->next_ino = ino + 1;
	}
	closedir(dp);
}

/*
 * Batches in [from, len) that check out.  A crash leaves none after the
 * batch it cut short; damage to the journal (or a power loss that wrote
 * later pages before earlier ones) does.
 */
static uint64_t count_later(const uint8_t *buf, size_t from, size_t len)
{
	uint64_t n = 0;
	size_t off;

	for (off = from; off + JNL_HDR <= len; off++) {
		uint32_t plen;

		if (get_le32(buf + off) != JNL_MAGIC)
			continue;
		plen = get_le32(buf + off + 4);
		if (plen <= len - off - JNL_HDR &&
		    XXH64(buf + off + JNL_HDR, plen, 0) == get_le64(buf + off + 8)) {
			n++;
			off += JNL_HDR + plen - 1;
		}
	}
	return n;
}

static int replay(struct stage *s, int fd, struct stage_jnl_stats *st)
{
	struct stat sb;
	uint8_t *buf;
	size_t off = 0, len;
	ssize_t got;
	int ret = 0;

	if (fstat(fd, &sb))
		return -errno;
	len = (size_t)sb.st_size;
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	while (off < len) {
		got = pread(fd, buf + off, len - off, (off_t)off);
		if (got <= 0) {
			ret = got < 0 ? -errno : -EIO;
			goto out;
		}
		off += (size_t)got;
	}
	for (off = 0; off + JNL_HDR <= len;) {
		uint32_t plen = get_le32(buf + off + 4);

		if (get_le32(buf + off) != JNL_MAGIC || plen > len - off - JNL_HDR ||
		    XXH64(buf + off + JNL_HDR, plen, 0) != get_le64(buf + off + 8))
			break;
		ret = apply_batch(s, buf + off + JNL_HDR, plen);
		if (ret)
			break;
		st->batches++;
		off += JNL_HDR + plen;
	}
	st->good_bytes = off;
	/* Zeros after the last batch are the unused rest of a window. */
	while (len > off && !buf[len - 1])
		len--;
	st->torn_bytes = len - off;
	/*
	 * A batch that checks out but does not apply (or could not have been
	 * written: node_ok(), name_ok()) is damage: stop there too, and count
	 * it with the batches after it, so that the recovery says so.
	 */
	st->later_batches = count_later(buf, ret == -EINVAL ? off : off + 1, len);
	if (ret == -EINVAL)
		ret = 0;
out:
	free(buf);
	return ret;
}

int stage_jnl_replay(struct stage *s, int fd, struct stage_jnl_stats *st)
{
	int ret = replay(s, fd, st);

	/*
	 * Every journal starts with a batch (the root, written at the mount):
	 * none that checks out is a journal emptied or overwritten, not a
	 * crash.  Recovering it would give an empty tree, whose seal would
	 * replace IMAGE and remove the staged data with the spool.
	 */
	if (!ret && !st->batches)
		return -EUCLEAN;
	if (!ret)
		ret = settle(s, &st->dropped, &st->detached);
	if (!ret)
		sweep_data(s);
	return ret;
}
