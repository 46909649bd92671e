/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Private to the FUSE operations (ops*.c): the helpers they share and the
 * handlers that stage_ops (ops.c) lists.  Every handler takes stage->lock
 * for its changes to the tree; dropping it sends the operation's journal
 * batch.
 */
#ifndef STAGE_OPS_H
#define STAGE_OPS_H

#include <errno.h>
#include <string.h>

#include "stage/stage.h"

struct fhandle {
	int fd;
	int shared;	/* fd is the passthrough inode's, closed with it */
	int writer;
	struct snode *n;
	struct fhandle *prev, *next;	/* stage->handles: every open one */
};

static inline struct stage *S(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static inline void lock(struct stage *s)
{
	pthread_mutex_lock(&s->lock);
}

/* Dropping the lock ends an operation: its journal batch goes out. */
static inline void unlock(struct stage *s)
{
	stage_jnl_flush(s);
	pthread_mutex_unlock(&s->lock);
}

/* Changes to the tree, as the journal must hear of them. */
static inline void touch(struct stage *s, struct snode *n, int mtime, int ctime)
{
	node_touch(n, mtime, ctime);
	stage_jnl_node(s, n);
}

static inline int sdir_add(struct stage *s, struct snode *dir, const char *name,
			   size_t len, struct snode *n)
{
	int ret = dir_add(s, dir, name, len, n);

	if (!ret)
		stage_jnl_dirent(s, dir, name, len, n);
	return ret;
}

static inline void sdir_del(struct stage *s, struct snode *dir, const char *name,
			    size_t len)
{
	dir_del(s, dir, name, len);
	stage_jnl_dirent(s, dir, name, len, NULL);
}

#define XATTR_CAPS "security.capability"

static inline struct fhandle *FH(struct fuse_file_info *fi)
{
	return (struct fhandle *)(uintptr_t)fi->fh;
}

/* ops.c: logs, once a mount, that descriptors ran out (a caller sees only EMFILE). */
void stage_fd_shortage(struct stage *s, int err);

/* Every error reply goes here: a shortage of descriptors is the daemon's to report. */
static inline void reply_err(fuse_req_t req, int err)
{
	if (err == EMFILE || err == ENFILE)
		stage_fd_shortage(S(req), err);
	fuse_reply_err(req, err);
}

static inline void reply_value(fuse_req_t req, const void *v, size_t len, size_t size)
{
	if (!size)
		fuse_reply_xattr(req, len);
	else if (len > size)
		reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, v, len);
}

/* ops_name.c: names */
void stage_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void stage_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void stage_op_forget_multi(fuse_req_t req, size_t count,
			   struct fuse_forget_data *forgets);
void stage_op_readlink(fuse_req_t req, fuse_ino_t ino);
int stage_op_make_node(fuse_req_t req, fuse_ino_t parent, const char *name,
		       mode_t mode, dev_t rdev, const char *target,
		       struct fuse_entry_param *e, int *fdp);
void stage_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		    mode_t mode, dev_t rdev);
void stage_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		    mode_t mode);
void stage_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		      const char *name);
void stage_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void stage_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void stage_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		     fuse_ino_t newparent, const char *newname, unsigned int flags);
void stage_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		   const char *newname);

/* ops_attr.c: attributes */
void stage_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void stage_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		      int to_set, struct fuse_file_info *fi);

/* ops_file.c: open files */
void stage_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void stage_op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, struct fuse_file_info *fi);
void stage_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi);
void stage_op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in,
			off_t off, struct fuse_file_info *fi);
void stage_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void stage_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* The connection is gone: every handle still counted open is closed (lock held). */
void stage_handles_lost(struct stage *s);
int stage_op_flush_both(struct stage *s, int fd, int datasync, struct stage_jnl_plan *p);
void stage_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		    struct fuse_file_info *fi);
void stage_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
			off_t len, struct fuse_file_info *fi);
void stage_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		    struct fuse_file_info *fi);

/* ops_dir.c: directory handles */
void stage_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void stage_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi);
void stage_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void stage_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		       struct fuse_file_info *fi);

/* ops_xattr.c: extended attributes, and access ACLs as modes */
void stage_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		       const char *value, size_t size, int flags);
void stage_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		       size_t size);
void stage_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void stage_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

/* ops_ctl.c: the control requests */
void stage_op_seal(fuse_req_t req, size_t size);
/* The seal request itself, answered; in the sealer's thread (sealer.c). */
void stage_seal_serve(struct stage *s, fuse_req_t req, size_t size);
void stage_op_status(fuse_req_t req, size_t size);

#endif
