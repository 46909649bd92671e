/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The metadata journal: SPOOL/journal lets `sqfs-stage -o recover=SPOOL`
 * rebuild the staged tree after the daemon died.  File data needs no log:
 * it already lives in SPOOL/data/INO.  What the journal adds is everything
 * else: each node's attributes, the directory entries and the xattrs.
 *
 * Every FUSE operation that changes metadata appends one batch when it
 * drops stage->lock, so a killed daemon loses no operation that was
 * answered, and a batch cut short by a crash or a full disk fails its
 * checksum and is ignored with everything after it.  fsync and fsyncdir
 * also fdatasync the journal: what was fsync'ed survives a power loss.
 *
 * Batches are copied into a shared mapping of the file, a window made
 * with fallocate ahead of the end: they are in the page cache, safe from a
 * killed daemon, the moment they are copied.  A write(2) per batch (an
 * mtime update and delayed-allocation bookkeeping on ext4) was about 1 us
 * in the path of the request that made it, several times per file copied:
 * 3% of the time of `cp -a` into the mount.  The file thus ends in up to a
 * window of zeros, which replay reads as the end; where the spool's file
 * system cannot fallocate or map, batches are written with pwrite(2).
 *
 * A batch holds the entry changes in the order they happened and, for each
 * node marked during the operation, its state when the lock was dropped.
 * Replay applies a batch's node states first (a new node's entry refers to
 * it), then its entries in order, and at the end drops what no entry names.
 *
 * The format is in journal.h; the replay is journal_replay.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "stage/journal.h"
#include "stage/stage.h"
#include "util/util.h"

/*
 * Between seals the journal only grows; once it is this large and four
 * times what a snapshot of the tree took, it is rewritten as a snapshot.
 */
#define JNL_COMPACT_MIN ((uint64_t)16 << 20)
/*
 * The mapped window: small, as its pages count in the daemon's RSS, and at
 * most a sixteenth of the spool's free space, as its blocks are taken from
 * the staged files and the image (a 1 MiB window filled a 1 MiB spool).
 */
#define JNL_WINDOW ((size_t)1 << 20)
#define JNL_WINDOW_FREE_SHIFT 4

struct jbuf {
	uint8_t *p;
	size_t len, cap;
};

struct stage_jnl {
	int fd;
	int err;		/* first failed write: the journal is behind */
	struct jbuf rec;	/* entry and xattr records of the operation */
	struct jbuf out;	/* the batch being written */
	fuse_ino_t *dirty;	/* nodes marked during the operation */
	size_t ndirty, cdirty;
	uint64_t mark;		/* operation number, to mark a node once */
	uint64_t size;		/* bytes of batches in the journal file */
	uint8_t *map;		/* window of fd at map_off; NULL: none */
	uint64_t map_off;
	size_t map_len;
	int no_map;		/* fallocate or mmap failed other than ENOSPC: write */
	uint64_t synced;	/* of them, made durable by a flush */
	uint64_t rewrites;	/* snapshots written (each replaces fd) */
	uint64_t snap_size;	/* of them, the snapshot it started from */
	time_t retry_at;	/* behind: when a snapshot may next be tried */
};

static int jb_reserve(struct jbuf *b, size_t n)
{
	size_t cap;
	uint8_t *p;

	if (b->len + n <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 4096;
	while (cap < b->len + n)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

static void put(struct jbuf *b, const void *v, size_t n)
{
	/* v may be NULL for n == 0 (a node without a target): no memcpy then. */
	if (n)
		memcpy(b->p + b->len, v, n);
	b->len += n;
}

static void put8(struct jbuf *b, uint8_t v) { put(b, &v, 1); }

static void put32(struct jbuf *b, uint32_t v)
{
	uint8_t x[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };

	put(b, x, 4);
}

static void put64(struct jbuf *b, uint64_t v)
{
	put32(b, (uint32_t)v);
	put32(b, (uint32_t)(v >> 32));
}

static void fail(struct stage *s, int err)
{
	if (!s->jnl->err) {
		s->jnl->err = err;
		stage_log(s, LOG_ERR,
			  "writing the journal in %s: %s; a crash from now on could lose staged "
			  "metadata, and fsync reports EIO, until the journal can be rewritten "
			  "(tried once a second as changes come, once the spool has room)",
			  s->spool, strerror(err));
	}
}

void stage_jnl_node(struct stage *s, const struct snode *n)
{
	struct stage_jnl *j = s->jnl;

	if (!j || n->jmark == j->mark)
		return;
	if (j->ndirty == j->cdirty) {
		size_t c = j->cdirty ? j->cdirty * 2 : 16;
		fuse_ino_t *d = realloc(j->dirty, c * sizeof(*d));

		if (!d) {
			fail(s, ENOMEM);
			return;
		}
		j->dirty = d;
		j->cdirty = c;
	}
	j->dirty[j->ndirty++] = n->ino;
	((struct snode *)n)->jmark = j->mark;
}

void stage_jnl_dirent(struct stage *s, const struct snode *dir, const char *name,
		      size_t len, const struct snode *child)
{
	struct stage_jnl *j = s->jnl;

	if (!j)
		return;
	if (jb_reserve(&j->rec, 1 + 8 + 8 + 4 + len)) {
		fail(s, ENOMEM);
		return;
	}
	put8(&j->rec, child ? R_ADD : R_DEL);
	put64(&j->rec, dir->ino);
	if (child)
		put64(&j->rec, child->ino);
	put32(&j->rec, (uint32_t)len);
	put(&j->rec, name, len);
}

void stage_jnl_xattr(struct stage *s, const struct snode *n, const char *name,
		     const void *value, size_t size, int remove)
{
	struct stage_jnl *j = s->jnl;
	size_t len = strlen(name);

	if (!j)
		return;
	if (jb_reserve(&j->rec, 1 + 8 + 4 + 4 + len + size)) {
		fail(s, ENOMEM);
		return;
	}
	put8(&j->rec, remove ? R_XDEL : R_XSET);
	put64(&j->rec, n->ino);
	put32(&j->rec, (uint32_t)len);
	put(&j->rec, name, len);
	if (!remove) {
		put32(&j->rec, (uint32_t)size);
		put(&j->rec, value, size);
	}
}

static void put_time(struct jbuf *b, const struct timespec *t)
{
	put64(b, (uint64_t)t->tv_sec);
	put32(b, (uint32_t)t->tv_nsec);
}

static int put_node(struct jbuf *b, const struct snode *n)
{
	size_t tlen = S_ISLNK(n->mode) && n->target ? strlen(n->target) : 0;

	if (jb_reserve(b, 1 + 8 + 4 * 3 + 8 + 12 * 3 + 4 + tlen))
		return -ENOMEM;
	put8(b, R_NODE);
	put64(b, n->ino);
	put32(b, (uint32_t)n->mode);
	put32(b, (uint32_t)n->uid);
	put32(b, (uint32_t)n->gid);
	put64(b, (uint64_t)node_rdev(n));
	put_time(b, &n->atime);
	put_time(b, &n->mtime);
	put_time(b, &n->ctime);
	put32(b, (uint32_t)tlen);
	put(b, n->target, tlen);
	return 0;
}

static int write_all(int fd, const void *p, size_t len, uint64_t off)
{
	const uint8_t *c = p;

	while (len) {
		ssize_t w = pwrite(fd, c, len, (off_t)off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		c += w;
		off += (uint64_t)w;
		len -= (size_t)w;
	}
	return 0;
}

static void jnl_unmap(struct stage_jnl *j)
{
	if (j->map)
		munmap(j->map, j->map_len);
	j->map = NULL;
}

static size_t jnl_window(int fd, uint64_t page)
{
	struct statvfs v;
	uint64_t w;

	if (fstatvfs(fd, &v))
		return JNL_WINDOW;
	w = ((uint64_t)v.f_bavail * v.f_frsize >> JNL_WINDOW_FREE_SHIFT) & ~(page - 1);
	return w < JNL_WINDOW ? (size_t)w : JNL_WINDOW;
}

/*
 * A window of j->fd from the page holding j->size, with room for len
 * bytes.  Its blocks are allocated first, so that a store into it cannot
 * fault for want of space; on a nearly full spool, try just what len needs.
 */
static int jnl_map(struct stage_jnl *j, size_t len)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t off = j->size & ~(page - 1);
	size_t need = (size_t)((j->size - off + len + page - 1) & ~(page - 1));
	size_t want = jnl_window(j->fd, page);
	void *m;

	if (want < need)
		want = need;

	jnl_unmap(j);
	if (fallocate(j->fd, 0, (off_t)off, (off_t)want)) {
		if (errno != ENOSPC || want == need || fallocate(j->fd, 0, (off_t)off, (off_t)need))
			return -errno;
		want = need;
	}
	m = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_SHARED, j->fd, (off_t)off);
	if (m == MAP_FAILED)
		return -errno;
	j->map = m;
	j->map_off = off;
	j->map_len = want;
	return 0;
}

/* Append len bytes at j->size. */
static int jnl_append(struct stage_jnl *j, const void *p, size_t len)
{
	int ret = 0;

	if (!j->no_map && (!j->map || j->size + len > j->map_off + j->map_len)) {
		ret = jnl_map(j, len);
		if (ret == -ENOSPC)
			return ret;
		if (ret)
			j->no_map = 1;
	}
	if (j->no_map)
		ret = write_all(j->fd, p, len, j->size);
	else
		memcpy(j->map + (j->size - j->map_off), p, len);
	if (!ret)
		j->size += len;
	return ret;
}

/* Seal a batch in j->out (payload after JNL_HDR bytes) and write it. */
static int batch_write(struct stage_jnl *j)
{
	uint8_t *h = j->out.p;
	uint32_t plen = (uint32_t)(j->out.len - JNL_HDR);
	uint64_t sum = XXH64(h + JNL_HDR, plen, 0);
	int ret;

	put_le32(h, JNL_MAGIC);
	put_le32(h + 4, plen);
	put_le64(h + 8, sum);
	ret = jnl_append(j, j->out.p, j->out.len);
	j->out.len = 0;
	return ret;
}

/*
 * Behind since a write failed: once the spool has room again (files were
 * removed, in the mount or beside it), a snapshot of the tree makes the
 * journal whole, this operation's change included.  Until then a crash
 * loses what changed, so the next change does not wait for an fsync or a
 * seal to try; at most once a second, as a snapshot costs a walk of the
 * tree, and only when the spool seems to have room for one.
 */
static void jnl_retry(struct stage *s)
{
	struct stage_jnl *j = s->jnl;
	struct timespec now;
	struct statvfs v;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
	if (now.tv_sec < j->retry_at)
		return;
	j->retry_at = now.tv_sec + 1;
	/* About 100 bytes a node and its entry; the window a megabyte more. */
	if (!fstatvfs(j->fd, &v) &&
	    (uint64_t)v.f_bavail * v.f_frsize < (uint64_t)s->inodes * 128 + ((uint64_t)1 << 20))
		return;
	if (!stage_jnl_rewrite(s))
		stage_log(s, LOG_INFO, "the journal in %s is whole again", s->spool);
}

void stage_jnl_flush(struct stage *s)
{
	struct stage_jnl *j = s->jnl;
	size_t i;
	int ret = 0;

	if (!j)
		return;
	j->mark++;
	if (!j->ndirty && !j->rec.len)
		return;
	j->out.len = 0;
	if (jb_reserve(&j->out, JNL_HDR + j->rec.len)) {
		ret = -ENOMEM;
		goto out;
	}
	j->out.len = JNL_HDR;
	for (i = 0; i < j->ndirty && !ret; i++) {
		const struct snode *n = stage_get(s, j->dirty[i]);

		if (n)
			ret = put_node(&j->out, n);
	}
	if (ret || jb_reserve(&j->out, j->rec.len)) {
		ret = -ENOMEM;
		goto out;
	}
	put(&j->out, j->rec.p, j->rec.len);
	if (!j->err)
		ret = batch_write(j);
out:
	if (ret)
		fail(s, -ret);
	j->ndirty = 0;
	j->rec.len = 0;
	j->out.len = 0;
	if (j->err) {
		jnl_retry(s);
		return;
	}
	if (j->size > JNL_COMPACT_MIN && j->size / 4 > j->snap_size) {
		ret = stage_jnl_rewrite(s);
		if (ret) {
			/* Go on appending; try again when it has doubled. */
			stage_log(s, LOG_WARNING, "compacting the journal: %s", strerror(-ret));
			j->snap_size = j->size / 2;
		}
	}
}

/*
 * Make every answered change survive a power loss (the journal), with the
 * spool file names the caller relies on: that of regular node ino, or with
 * ino 0 (a directory's fsync) those of all nodes.  What an earlier sync
 * already made durable is not flushed again: dpkg fsyncs each file it
 * unpacked, one after the other, and after the first of a package the
 * names are unchanged (debootstrap: 8 000 fsyncs, 3 flushes each before).
 *
 * The flushes run without stage->lock, beside the file's own (syncer.c):
 * plan them with the lock held, run them, and record the result with the
 * lock held again.
 */
int stage_jnl_plan(struct stage *s, fuse_ino_t ino, struct stage_jnl_plan *p)
{
	struct stage_jnl *j = s->jnl;

	memset(p, 0, sizeof(*p));
	p->fd = -1;
	if (!j)
		return 0;
	if (j->err) {
		/*
		 * Behind since a write failed (a full spool, most likely).  If
		 * there is room again, a snapshot of the tree makes it whole, so
		 * that fsync works again without waiting for the next seal.
		 */
		if (stage_jnl_rewrite(s))
			return -EIO;
		stage_log(s, LOG_INFO, "the journal in %s is whole again", s->spool);
	}
	if (j->synced != j->size) {
		/* A rewrite may replace j->fd meanwhile: then it flushed all. */
		p->fd = fcntl(j->fd, F_DUPFD_CLOEXEC, 0);
		if (p->fd < 0)
			return -errno;
		p->size = j->size;
		p->rewrites = j->rewrites;
	}
	/*
	 * Node numbers only grow, and a regular node's spool file is made
	 * before its number is handed out, so every file below next_ino exists.
	 */
	if (ino ? ino >= s->names_synced : s->names_synced < s->next_ino) {
		p->names = 1;
		p->below = s->next_ino;
		p->datafd = s->datafd;
	}
	return 0;
}

int stage_jnl_plan_run(const struct stage_jnl_plan *p)
{
	if (p->fd >= 0 && fdatasync(p->fd))
		return -errno;
	if (p->names && fsync(p->datafd))
		return -errno;
	return 0;
}

void stage_jnl_plan_done(struct stage *s, struct stage_jnl_plan *p, int ret)
{
	struct stage_jnl *j = s->jnl;

	if (!ret && j) {
		if (p->fd >= 0 && p->rewrites == j->rewrites && p->size > j->synced)
			j->synced = p->size;
		if (p->names && p->below > s->names_synced)
			s->names_synced = p->below;
	}
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
}

/* ------------------------------------------------------------------ */
/* A snapshot: the whole tree as batches, to start a journal afresh. */

static int snap_flush(struct stage_jnl *j, int force)
{
	if (j->out.len < (force ? JNL_HDR + 1 : (size_t)1 << 20))
		return 0;
	return batch_write(j);
}

static int snap_begin(struct stage_jnl *j)
{
	if (j->out.len)
		return 0;
	if (jb_reserve(&j->out, JNL_HDR))
		return -ENOMEM;
	j->out.len = JNL_HDR;
	return 0;
}

static int snap_nodes(struct stage *s, struct stage_jnl *j)
{
	size_t i, k;
	struct snode *n;
	int ret;

	for (i = 0; i < s->islots; i++) {
		for (n = s->itab[i]; n; n = n->hnext) {
			/*
			 * Nothing names it: gone at replay.  But an O_TMPFILE
			 * not yet linked may be: its xattrs must be here then.
			 */
			if (!n->links && !n->unnamed && n != s->root)
				continue;
			if ((ret = snap_begin(j)) || (ret = put_node(&j->out, n)))
				return ret;
			for (k = 0; k < n->nxattrs; k++) {
				const struct sxattr *x = &n->xattrs[k];
				size_t len = strlen(x->name);

				if (jb_reserve(&j->out, 1 + 8 + 8 + len + x->size))
					return -ENOMEM;
				put8(&j->out, R_XSET);
				put64(&j->out, n->ino);
				put32(&j->out, (uint32_t)len);
				put(&j->out, x->name, len);
				put32(&j->out, (uint32_t)x->size);
				put(&j->out, x->value, x->size);
			}
			if ((ret = snap_flush(j, 0)))
				return ret;
		}
	}
	return snap_flush(j, 1);
}

static int snap_entries(struct stage *s, struct stage_jnl *j)
{
	size_t i, k;
	struct snode *n;
	struct sdirent *d;
	int ret;

	for (i = 0; i < s->islots; i++) {
		for (n = s->itab[i]; n; n = n->hnext) {
			if (!S_ISDIR(n->mode) || (!n->links && n != s->root))
				continue;
			for (k = 0; k < n->nslots; k++) {
				for (d = n->tab[k]; d; d = d->next) {
					if ((ret = snap_begin(j)))
						return ret;
					if (jb_reserve(&j->out, 1 + 8 + 8 + 4 + d->len))
						return -ENOMEM;
					put8(&j->out, R_ADD);
					put64(&j->out, n->ino);
					put64(&j->out, d->node->ino);
					put32(&j->out, (uint32_t)d->len);
					put(&j->out, d->name, d->len);
					if ((ret = snap_flush(j, 0)))
						return ret;
				}
			}
		}
	}
	return snap_flush(j, 1);
}

/*
 * Write the whole tree to SPOOL/journal.new, make it durable and rename it
 * over SPOOL/journal: the new journal starts from here, and a journal that
 * fell behind after a failed write is whole again.
 */
int stage_jnl_rewrite(struct stage *s)
{
	struct stage_jnl *j = s->jnl;
	char *path = NULL, *tmp = NULL;
	int fd = -1, old, spfd = -1, ret = -ENOMEM;
	uint64_t old_size;

	if (!j)
		return 0;
	old_size = j->size;
	if (asprintf(&path, "%s/journal", s->spool) < 0 ||
	    asprintf(&tmp, "%s/journal.new", s->spool) < 0)
		goto out;
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	jnl_unmap(j);
	old = j->fd;
	j->fd = fd;
	j->out.len = 0;
	j->size = 0;
	ret = snap_nodes(s, j);
	if (!ret)
		ret = snap_entries(s, j);
	j->out.len = 0;
	j->fd = old;
	if (!ret && !s->no_sync && fdatasync(fd))
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret) {
		jnl_unmap(j);
		close(fd);
		unlink(tmp);
		j->size = old_size;
		goto out;
	}
	spfd = s->no_sync ? -1 : open(s->spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (spfd >= 0) {
		fsync(spfd);
		close(spfd);
	}
	close(j->fd);
	j->fd = fd;
	j->snap_size = j->size;
	j->synced = j->size;
	j->rewrites++;
	j->err = 0;
	j->ndirty = 0;
	j->rec.len = 0;
out:
	free(path);
	free(tmp);
	return ret;
}

static struct stage_jnl *jnl_alloc(void)
{
	struct stage_jnl *j = calloc(1, sizeof(*j));

	if (j) {
		j->fd = -1;
		j->mark = 1;
	}
	return j;
}

int stage_jnl_open(struct stage *s, int recover, struct stage_jnl_stats *st)
{
	struct stage_jnl *j = jnl_alloc();
	char *path = NULL;
	int ret = -ENOMEM, fd = -1;

	memset(st, 0, sizeof(*st));
	if (!j || asprintf(&path, "%s/journal", s->spool) < 0) {
		path = NULL;
		goto fail;
	}
	if (recover) {
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			ret = -errno;
			goto fail;
		}
		ret = stage_jnl_replay(s, fd, st);
		/*
		 * The unused rest of the last window (zeros) goes before the
		 * new journal is written beside this one: on a full spool,
		 * that room is what lets the recovery through.
		 */
		if (!ret && ftruncate(fd, (off_t)(st->good_bytes + st->torn_bytes)))
			stage_log(s, LOG_WARNING, "trimming the journal in %s: %s", s->spool,
				  strerror(errno));
		close(fd);
		if (ret)
			goto fail;
		/* Start a clean journal from the recovered tree. */
		j->fd = -1;
		s->jnl = j;
		ret = stage_jnl_rewrite(s);
		if (ret) {
			s->jnl = NULL;
			goto fail;
		}
	} else {
		j->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (j->fd < 0) {
			ret = -errno;
			goto fail;
		}
		s->jnl = j;
		stage_jnl_node(s, s->root);
		stage_jnl_flush(s);
	}
	free(path);
	return 0;
fail:
	free(path);
	free(j);
	return ret;
}

void stage_jnl_trim(struct stage *s)
{
	struct stage_jnl *j = s->jnl;

	if (!j || j->fd < 0)
		return;
	jnl_unmap(j);
	/* The window's zeros past the last batch; the next batch maps anew. */
	if (ftruncate(j->fd, (off_t)j->size))
		stage_log(s, LOG_WARNING, "trimming the journal in %s: %s", s->spool,
			  strerror(errno));
}

void stage_jnl_close(struct stage *s)
{
	struct stage_jnl *j = s->jnl;

	if (!j)
		return;
	stage_jnl_trim(s);
	if (j->fd >= 0)
		close(j->fd);
	free(j->rec.p);
	free(j->out.p);
	free(j->dirty);
	free(j);
	s->jnl = NULL;
}
