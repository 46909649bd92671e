/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The FUSE low-level operations over the staged tree: start, end, the table. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <syslog.h>

#include "stage/ops.h"

void stage_log(const struct stage *s, int prio, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (s->foreground) {
		fprintf(stderr, "sqfs-stage: ");
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	} else {
		vsyslog(prio, fmt, ap);
	}
	va_end(ap);
}

int stage_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = -pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

void stage_fd_shortage(struct stage *s, int err)
{
	struct rlimit rl = { 0, 0 };

	if (__atomic_exchange_n(&s->fd_short_logged, 1, __ATOMIC_RELAXED))
		return;
	if (err == ENFILE) {
		stage_log(s, LOG_WARNING, "the system's table of open files is full (ENFILE): "
			  "requests fail until files are closed (see fs.file-max)");
		return;
	}
	getrlimit(RLIMIT_NOFILE, &rl);
	stage_log(s, LOG_WARNING, "out of file descriptors (EMFILE, limit %llu): requests "
		  "fail until files are closed; every file open in the mount holds one "
		  "here, so mount with a higher limit (ulimit -n; the daemon takes the "
		  "hard limit)", (unsigned long long)rl.rlim_cur);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct stage *s = userdata;
	int ret;

	conn->max_write = STAGE_IO_SIZE;
	/* libfuse 3.14 ends the session unless init repeats the mount option. */
	if (s->max_read)
		conn->max_read = s->max_read;
	conn->time_gran = 1;
	/*
	 * With passthrough, writes rarely come here, and a spliced request
	 * would pass our hook by; with rings, requests come through them.
	 */
	if ((conn->capable & FUSE_CAP_SPLICE_READ) && !stage_pt_wanted(s) &&
	    !stage_pt_ring_wanted(s))
		conn->want |= FUSE_CAP_SPLICE_READ;
	conn->want &= ~FUSE_CAP_POSIX_ACL;
	/*
	 * A symlink's target never changes, so the kernel may keep it: a
	 * merged-/usr root resolves /lib and /bin on most path lookups, and
	 * debootstrap made 19 000 READLINK round trips without it.
	 */
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	/*
	 * Without atomic O_TRUNC the kernel truncates with setattr(size=0)
	 * before the open, which updates mtime and ctime as POSIX wants even
	 * for an empty file, and the background work hears of the truncation.
	 */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	stage_log(s, LOG_INFO, "staging %s in %s; if this daemon dies, remount the tree "
		  "with: sqfs-stage --recover %s %s %s", s->image, s->spool, s->spool, s->image,
		  s->mnt ? s->mnt : "MOUNTPOINT");
	/* Here, after daemonising: the thread must live in the daemon. */
	if (!s->no_background && (ret = stage_bg_start(s)))
		stage_log(s, LOG_WARNING,
			  "background compression is off (%s); the seal will do all of it",
			  strerror(-ret));
	/* A recovered tree: its files are closed already. */
	lock(s);
	stage_bg_queue_all(s);
	unlock(s);
	ret = stage_spare_start(s);
	if (ret)
		stage_log(s, LOG_WARNING, "no spool files made ahead (%s)", strerror(-ret));
	/* Without it, fsync flushes one thing after the other. */
	(void)stage_syncer_start(s);
	ret = stage_sealer_start(s);
	if (ret)
		stage_log(s, LOG_WARNING, "seals run where their requests arrive (%s)",
			  strerror(-ret));
}

static void op_destroy(void *userdata)
{
	struct stage *s = userdata;
	char *msg = NULL;
	int ret = 0;

	/* Before anything removes the spool, and the seal needs no spares. */
	stage_sealer_free(s);
	stage_spare_stop(s);
	stage_syncer_stop(s);
	lock(s);
	if (__atomic_load_n(&s->conn_gone, __ATOMIC_RELAXED) && s->total_writers) {
		stage_log(s, LOG_INFO, "the kernel closed the last files without telling us "
			  "(%llu open for writing): sealing them as they are",
			  (unsigned long long)s->total_writers);
		stage_handles_lost(s);
	}
	/*
	 * Also when nothing changed since a seal (--keep) but IMAGE is no
	 * longer what it wrote (removed, replaced): the spool goes next, and
	 * with it the only copy of the tree.
	 */
	if (s->gen != s->sealed_gen || (s->last_summary && !stage_image_is_sealed(s))) {
		ret = stage_seal(s, &msg);
		if (ret && stage_spool_gone(s)) {
			stage_log(s, LOG_ERR, "sealing %s at unmount failed: %s; %s is left as "
				  "it was: stage the tree again", s->image,
				  msg ? msg : "out of memory", s->image);
		} else if (ret) {
			stage_log(s, LOG_ERR,
				  "sealing %s at unmount failed: %s; the staged tree is kept in %s: "
				  "fix the cause, then 'sqfs-stage --recover %s %s %s' and "
				  "'sqfs-seal %s'",
				  s->image, msg ? msg : "out of memory", s->spool, s->spool, s->image,
				  s->mnt ? s->mnt : "MOUNTPOINT", s->mnt ? s->mnt : "MOUNTPOINT");
		} else {
			stage_log(s, LOG_INFO, "sealed %s at unmount: %s", s->image, msg);
		}
	} else if (s->image_kept) {
		stage_log(s, LOG_INFO, "nothing was staged since the mount: %s is left as "
			  "it was (sqfs-seal writes the empty tree's image)", s->image);
	}
	unlock(s);
	/* IMAGE is written for good: a new mount of it may begin. */
	stage_claim_release(s);
	/* After the seal, which takes the blocks stored so far. */
	stage_bg_stop(s);
	lock(s);
	if (!ret) {
		stage_remove_spool(s);
		s->final_status = 0;
	} else {
		s->final_status = 1;
	}
	free(msg);
	unlock(s);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct stage *s = S(req);
	struct statvfs sv;

	(void)ino;
	if (fstatvfs(s->datafd, &sv)) {
		reply_err(req, errno);
		return;
	}
	lock(s);
	sv.f_files = sv.f_files > s->inodes ? sv.f_files : s->inodes + sv.f_ffree;
	unlock(s);
	sv.f_namemax = STAGE_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

static void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct stage *s = S(req);
	struct snode *n;
	int err = ENOENT;

	/*
	 * Only the mounting user gets here, and acts as root of the tree: as
	 * root, everything but executing a file that no one may execute.
	 */
	lock(s);
	n = stage_get(s, ino);
	if (n)
		err = (mask & X_OK) && !S_ISDIR(n->mode) && !(n->mode & 0111) ? EACCES : 0;
	unlock(s);
	reply_err(req, err);
}

const struct fuse_lowlevel_ops stage_ops = {
	.init = op_init,
	.destroy = op_destroy,
	.lookup = stage_op_lookup,
	.forget = stage_op_forget,
	.forget_multi = stage_op_forget_multi,
	.getattr = stage_op_getattr,
	.setattr = stage_op_setattr,
	.readlink = stage_op_readlink,
	.mknod = stage_op_mknod,
	.mkdir = stage_op_mkdir,
	.unlink = stage_op_unlink,
	.rmdir = stage_op_rmdir,
	.symlink = stage_op_symlink,
	.rename = stage_op_rename,
	.link = stage_op_link,
	.open = stage_op_open,
	.create = stage_op_create,
	.read = stage_op_read,
	.write_buf = stage_op_write_buf,
	.flush = stage_op_flush,
	.release = stage_op_release,
	.fsync = stage_op_fsync,
	.opendir = stage_op_opendir,
	.readdir = stage_op_readdir,
	.releasedir = stage_op_releasedir,
	.fsyncdir = stage_op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = stage_op_setxattr,
	.getxattr = stage_op_getxattr,
	.listxattr = stage_op_listxattr,
	.removexattr = stage_op_removexattr,
	.access = op_access,
	.fallocate = stage_op_fallocate,
	.lseek = stage_op_lseek,
};
