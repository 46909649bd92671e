/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Open files: their handles, data through the daemon, fsync. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stage/ops.h"

/* Open the spool file of n for a new handle.  Lock held; errno or 0. */
static int open_handle(struct stage *s, struct snode *n, int fd,
		       struct fuse_file_info *fi)
{
	struct fhandle *h;
	char name[STAGE_SPOOL_NAME_SIZE];

	if (fd < 0) {
		/*
		 * No name left and no data file: the caller looked the name up
		 * before an rm.  ESTALE makes the kernel walk the path again
		 * (LOOKUP_REVAL) and find what is there now, if anything.
		 */
		if (n->data_gone)
			return ESTALE;
		fd = openat(s->datafd, stage_spool_name(name, n->ino), O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return errno;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		close(fd);
		return ENOMEM;
	}
	if ((fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY && n->size) {
		stage_pt_sync(s, n);
		if (ftruncate(fd, 0)) {
			int e = errno;

			close(fd);
			free(h);
			return e;
		}
		stage_bg_changed(s, n, 0, UINT64_MAX);
		n->size = 0;
		n->nblk = 0;
		touch(s, n, 1, 1);
		stage_pt_settled(s, n);
		s->gen++;
	}
	h->fd = fd;
	h->n = n;
	h->writer = (fi->flags & O_ACCMODE) != O_RDONLY;
	h->next = s->handles;
	if (h->next)
		h->next->prev = h;
	s->handles = h;
	n->opens++;
	if (h->writer) {
		n->writers++;
		s->total_writers++;
		if (!n->links)
			s->unnamed_writers++;
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->keep_cache = 1;
	/*
	 * Writes reach the spool before they are answered, so a close has
	 * nothing left to report: spare every close a round trip.
	 */
	fi->noflush = 1;
	/* Last: from here on the open cannot fail. */
	stage_pt_open(s, n, &h->fd, fi->flags, &h->shared);
	return 0;
}

void stage_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stage *s = S(req);
	struct snode *n;
	int err;

	lock(s);
	n = stage_get(s, ino);
	if (!n)
		err = ENOENT;
	else if (S_ISDIR(n->mode))
		err = EISDIR;
	else if (!S_ISREG(n->mode))
		err = ENXIO;
	else
		err = open_handle(s, n, -1, fi);
	unlock(s);
	if (err)
		reply_err(req, err);
	else
		fuse_reply_open(req, fi);
}

void stage_op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, struct fuse_file_info *fi)
{
	struct stage *s = S(req);
	struct fuse_entry_param e;
	/* O_TMPFILE: no entry can be named "/" (stage_pt_note_request) */
	int unnamed = !strcmp(name, "/");
	int err, fd = -1;

	lock(s);
	err = stage_op_make_node(req, parent, unnamed ? NULL : name,
				 S_IFREG | (mode & 07777), 0, NULL, &e, &fd);
	if (!err) {
		err = open_handle(s, stage_get(s, e.ino), fd, fi);
		if (err) {
			/* Undo: the kernel never saw the entry. */
			struct snode *dir = stage_get(s, parent), *n = stage_get(s, e.ino);

			n->nlookup = 0;
			if (!unnamed) {
				sdir_del(s, dir, name, strlen(name));
				node_unlinked(s, n, 0);
			}
			stage_maybe_free(s, n);
		}
	}
	unlock(s);
	if (err)
		reply_err(req, err);
	else
		fuse_reply_create(req, &e, fi);
}

void stage_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);

	(void)ino;
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = FH(fi)->fd;
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

/* After a write or an allocation: the size from the spool file. */
/*
 * cached: the kernel writing back pages dirtied through a mapping.  Linux
 * moves the mtime when such a page is first dirtied, which may be before a
 * utimensat that the write-back follows.  We cannot tell when, so a time
 * set while the file was open for writing, and after the last write we
 * saw, stays (a page first dirtied after that time would have moved it on
 * Linux: the one case we get wrong, and the rarer one).
 */
static void data_changed(struct stage *s, struct fhandle *h, uint64_t off, uint64_t len,
			 int cached)
{
	struct stat st;

	lock(s);
	stage_pt_sync(s, h->n);
	stage_bg_changed(s, h->n, off, len);
	if (!fstat(h->fd, &st))
		node_set_blocks(h->n, st.st_blocks);
	else
		st.st_size = (off_t)h->n->size;
	if ((uint64_t)st.st_size != h->n->size) {
		/*
		 * The old last block changed length (a write past the end
		 * may leave a gap): its stored form goes, wherever off was.
		 */
		stage_bg_changed(s, h->n, h->n->size < (uint64_t)st.st_size ?
				 h->n->size : (uint64_t)st.st_size, UINT64_MAX);
		h->n->size = (uint64_t)st.st_size;
	}
	touch(s, h->n, !(cached && h->n->mtime_set), 1);
	if (!cached)
		h->n->mtime_set = 0;
	stage_pt_settled(s, h->n);
	s->gen++;
	unlock(s);
}

void stage_op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in,
			off_t off, struct fuse_file_info *fi)
{
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
	size_t want = fuse_buf_size(in);
	struct fhandle *h = FH(fi);
	struct stage *s = S(req);
	ssize_t res;

	(void)ino;
	/* As a file system's maximum file size: a short write, then EFBIG. */
	if (off < 0 || (uint64_t)off >= s->file_max) {
		reply_err(req, EFBIG);
		return;
	}
	if (out.buf[0].size > s->file_max - (uint64_t)off)
		out.buf[0].size = s->file_max - (uint64_t)off;
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = h->fd;
	out.buf[0].pos = off;
	res = fuse_buf_copy(&out, in, 0);
	/*
	 * O_DIRECT writes come here (passthrough takes none), as requests
	 * sent side by side (async direct I/O, which random reads at depth
	 * need), and the kernel makes a short answer to one of them EIO.  So
	 * a request that does not fit whole fails with the error its rest
	 * meets (ENOSPC, or EFBIG at the size limit); the kernel then cuts
	 * the file back to the size it had.  The flag is the request's (the
	 * file's flags now): fcntl(F_SETFL) may set it after the open.
	 */
	while ((fi->flags & O_DIRECT) && res >= 0 && (size_t)res < want) {
		ssize_t more = (size_t)res >= out.buf[0].size ? -EFBIG : fuse_buf_copy(&out, in, 0);

		if (more <= 0) {
			if (res)
				data_changed(s, h, (uint64_t)off, (uint64_t)res, fi->writepage);
			reply_err(req, more ? (int)-more : ENOSPC);
			return;
		}
		res += more;
	}
	if (res < 0) {
		reply_err(req, (int)-res);
		return;
	}
	data_changed(s, h, (uint64_t)off, (uint64_t)res, fi->writepage);
	/*
	 * O_SYNC and O_DSYNC (the request's flags say which): the kernel
	 * follows the write with an FSYNC, which -o volatile turns off for
	 * good (stage_op_fsync).  Such writes still flush their file's data,
	 * as the kernel does itself for those that passthrough sends to the
	 * spool file; the journal is left to the mark (volatile.c).
	 */
	if (s->no_sync && (fi->flags & O_DSYNC) &&
	    ((fi->flags & O_SYNC) == O_SYNC ? fsync(h->fd) : fdatasync(h->fd))) {
		reply_err(req, errno);
		return;
	}
	fuse_reply_write(req, (size_t)res);
}

void stage_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	reply_err(req, 0);
}

/* h is closed: count it so, fold what passthrough wrote.  Lock held. */
static void release_locked(struct stage *s, struct fhandle *h)
{
	if (h->prev)
		h->prev->next = h->next;
	else
		s->handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	/*
	 * Only a handle that took the inode's shared descriptor gives it
	 * back: once passthrough turned itself off, later opens of the same
	 * file hold their own, and the shared one is still in use.
	 */
	if (h->shared)
		stage_pt_release(s, h->n, h->writer);
	h->n->opens--;
	if (h->writer) {
		h->n->writers--;
		if (!h->n->writers)
			h->n->mtime_set = 0;	/* no mapping can write any more */
		s->total_writers--;
		if (!h->n->links)
			s->unnamed_writers--;
		pthread_cond_broadcast(&s->released);
		stage_bg_released(s, h->n);
	}
	stage_maybe_free(s, h->n);
}

void stage_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stage *s = S(req);
	struct fhandle *h = FH(fi);

	(void)ino;
	if (!h->shared)
		close(h->fd);
	lock(s);
	release_locked(s, h);
	unlock(s);
	free(h);
	reply_err(req, 0);
}

/*
 * The kernel sends RELEASE in the background, and when the last file of a
 * detached mount (umount -l) closes, or one closes just before the
 * unmount, it ends the connection with that request still queued: we
 * never hear of it.  With the connection gone no file can be open, so the
 * final seal takes every file as its spool file holds it.
 */
void stage_handles_lost(struct stage *s)
{
	struct fhandle *h;

	while ((h = s->handles)) {
		if (!h->shared)
			close(h->fd);
		release_locked(s, h);
		free(h);
	}
}

void stage_handles_free(struct stage *s)
{
	struct fhandle *h;

	while ((h = s->handles)) {
		s->handles = h->next;
		if (!h->shared)
			close(h->fd);	/* shared ones: stage_pt_free() */
		free(h);
	}
}

/* Flush fd (if >= 0) and the changes p plans, the latter in the syncer. */
int stage_op_flush_both(struct stage *s, int fd, int datasync, struct stage_jnl_plan *p)
{
	int err = 0, ret, helped;

	helped = fd >= 0 && stage_syncer_give(s, p);
	if (fd >= 0 && (datasync ? fdatasync(fd) : fsync(fd)))
		err = errno;
	ret = helped ? stage_syncer_wait(s) : stage_jnl_plan_run(p);
	lock(s);
	stage_jnl_plan_done(s, p, ret);
	unlock(s);
	return err ? err : -ret;
}

void stage_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		    struct fuse_file_info *fi)
{
	struct stage *s = S(req);
	struct stage_jnl_plan p;
	int err;

	(void)ino;
	/* The kernel then answers every later fsync itself (volatile.c). */
	if (s->no_sync) {
		reply_err(req, ENOSYS);
		return;
	}
	/* Its name and attributes: the journal, which holds all changes so far. */
	lock(s);
	stage_pt_sync(s, FH(fi)->n);
	err = -stage_jnl_plan(s, FH(fi)->n->ino, &p);
	unlock(s);
	if (!err)
		err = stage_op_flush_both(s, FH(fi)->fd, datasync, &p);
	reply_err(req, err);
}

/* 1 if h's spool file is not the size its node says. */
static int size_moved(struct stage *s, struct fhandle *h)
{
	struct stat st;
	int moved;

	lock(s);
	stage_pt_sync(s, h->n);
	moved = !fstat(h->fd, &st) && (uint64_t)st.st_size != h->n->size;
	unlock(s);
	return moved;
}

void stage_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
			off_t len, struct fuse_file_info *fi)
{
	if (!(mode & FALLOC_FL_KEEP_SIZE) &&
	    (off < 0 || len < 0 || (uint64_t)off + (uint64_t)len > S(req)->file_max)) {
		reply_err(req, EFBIG);
		return;
	}
	if (fallocate(FH(fi)->fd, mode, off, len)) {
		struct stage *s = S(req);
		int err = errno;

		/*
		 * ext4 keeps what a failed allocation got, size included: the
		 * file is what the spool's file system made it, here as after
		 * a crash, and the kernel must ask for the size again.
		 */
		if (!(mode & FALLOC_FL_KEEP_SIZE) && size_moved(s, FH(fi))) {
			data_changed(s, FH(fi), (uint64_t)off, (uint64_t)len, 0);
			if (s->se)
				fuse_lowlevel_notify_inval_inode(s->se, ino, -1, 0);
		} else if ((mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) &&
			   err != EOPNOTSUPP && err != EINVAL) {
			/*
			 * It may also have zeroed part of the range before it
			 * failed (ext4 does, then ENOSPC): the stored blocks of
			 * the range go, and the kernel's cache of it.  The times
			 * stay.  (A mode the file system lacks changed nothing.)
			 */
			struct stat st;

			lock(s);
			stage_pt_sync(s, FH(fi)->n);
			stage_bg_changed(s, FH(fi)->n, (uint64_t)off, (uint64_t)len);
			if (!fstat(FH(fi)->fd, &st))
				node_set_blocks(FH(fi)->n, st.st_blocks);
			stage_pt_settled(s, FH(fi)->n);
			s->gen++;
			unlock(s);
			if (s->se)
				fuse_lowlevel_notify_inval_inode(s->se, ino, off, len);
		}
		reply_err(req, err);
		return;
	}
	/* Punching or zeroing can change the size's block too. */
	data_changed(S(req), FH(fi), (uint64_t)off, (uint64_t)len, 0);
	reply_err(req, 0);
}

void stage_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		    struct fuse_file_info *fi)
{
	off_t r;

	(void)ino;
	r = lseek(FH(fi)->fd, off, whence);
	if (r < 0)
		reply_err(req, errno);
	else
		fuse_reply_lseek(req, r);
}
