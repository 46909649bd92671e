/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Extended attributes, and access ACLs as modes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stage/ops.h"

#define ACL_ACCESS "system.posix_acl_access"
#define ACL_DEFAULT "system.posix_acl_default"

/*
 * The permission bits an access ACL (the kernel's xattr form: a version
 * word, then tag, perm, id entries) stands for, if it has only the three
 * base entries, which say no more than the mode does (ext4 keeps no ACL
 * for them either).  A mask beside them is the group bits, as stat(2)
 * shows, when it grants the owning group no more than its own entry did
 * (group & mask is then the mask).  Named users and groups, or a mask
 * wider than the group entry, cannot be stored: ENOTSUP.
 */
static int acl_to_perm(const char *value, size_t size, mode_t *perm)
{
	const unsigned char *p = (const unsigned char *)value;
	unsigned int seen = 0, tag, bits, shift, group = 0, mask = 0;
	size_t i;

	if (size < 4 || (size - 4) % 8 || p[0] != 2 || p[1] || p[2] || p[3])
		return EINVAL;
	*perm = 0;
	for (i = 4; i < size; i += 8) {
		tag = p[i] | (unsigned int)p[i + 1] << 8;
		bits = p[i + 2] | (unsigned int)p[i + 3] << 8;
		switch (tag) {
		case 0x01: shift = 6; break;	/* ACL_USER_OBJ */
		case 0x04: shift = 3; group = bits; break;	/* ACL_GROUP_OBJ */
		case 0x20: shift = 0; break;	/* ACL_OTHER */
		case 0x10: shift = 32; mask = bits; break;	/* ACL_MASK */
		case 0x02: case 0x08:		/* ACL_USER, ACL_GROUP */
			return ENOTSUP;
		default:
			return EINVAL;
		}
		if ((seen & tag) || bits > 7)
			return EINVAL;
		seen |= tag;
		if (shift < 32)
			*perm |= (mode_t)bits << shift;
	}
	if ((seen & 0x25) != 0x25)
		return EINVAL;
	if (seen & 0x10) {
		if (mask & ~group)
			return ENOTSUP;
		*perm = (*perm & ~(mode_t)070) | (mode_t)mask << 3;
	}
	return 0;
}

/*
 * setxattr of a base access ACL is a chmod: what cp -a, tar --acls and
 * rsync -A set on every file, so it spares them the fallback chmod (a
 * round trip each).
 */
static void acl_chmod(fuse_req_t req, fuse_ino_t ino, const char *value, size_t size)
{
	struct stage *s = S(req);
	struct snode *n;
	mode_t perm;
	int err;

	err = acl_to_perm(value, size, &perm);
	if (!err) {
		lock(s);
		n = stage_get(s, ino);
		if (!n) {
			err = ENOENT;
		} else {
			n->mode = (n->mode & ~(mode_t)0777) | perm;
			touch(s, n, 0, 1);	/* journals the node, mode included */
			s->gen++;
		}
		unlock(s);
	}
	/* The kernel does not expect a setxattr to change the mode it caches. */
	if (!err && s->se)
		fuse_lowlevel_notify_inval_inode(s->se, ino, -1, 0);
	reply_err(req, err);
}

/* After a set or a removal: journal it; the inode's ctime moves. */
static void xattr_changed(struct stage *s, struct snode *n, const char *name,
			  const void *value, size_t size, int removed)
{
	stage_jnl_xattr(s, n, name, value, size, removed);
	touch(s, n, 0, 1);
	s->gen++;
}

void stage_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		       const char *value, size_t size, int flags)
{
	struct stage *s = S(req);
	struct snode *n;
	int err;

	/* Only the root's are the control channel (ops_ctl.c). */
	if (ino == FUSE_ROOT_ID &&
	    (!strcmp(name, STAGE_SEAL_XATTR) || !strcmp(name, STAGE_STATUS_XATTR))) {
		reply_err(req, EPERM);
		return;
	}
	if (!strcmp(name, ACL_ACCESS)) {
		acl_chmod(req, ino, value, size);
		return;
	}
	err = xattr_name_check(name);
	if (err) {
		reply_err(req, err);
		return;
	}
	lock(s);
	n = stage_get(s, ino);
	if (!n) {
		err = ENOENT;
	} else {
		err = -xattr_set(n, name, value, size, flags);
		if (!err)
			xattr_changed(s, n, name, value, size, 0);
	}
	unlock(s);
	reply_err(req, err);
}

void stage_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		       size_t size)
{
	struct stage *s = S(req);
	const struct sxattr *x;
	struct snode *n;
	void *copy = NULL;
	size_t len = 0;
	int err = 0;

	if (ino == FUSE_ROOT_ID && !strcmp(name, STAGE_SEAL_XATTR)) {
		stage_op_seal(req, size);
		return;
	}
	if (ino == FUSE_ROOT_ID && !strcmp(name, STAGE_STATUS_XATTR)) {
		stage_op_status(req, size);
		return;
	}
	/* No ACL beyond the mode is ever kept (see acl_chmod). */
	if (!strcmp(name, ACL_ACCESS) || !strcmp(name, ACL_DEFAULT)) {
		reply_err(req, ENODATA);
		return;
	}
	err = xattr_name_check(name);
	if (err) {
		reply_err(req, err);
		return;
	}
	lock(s);
	n = stage_get(s, ino);
	x = n ? xattr_get(n, name) : NULL;
	if (!n) {
		err = ENOENT;
	} else if (!x) {
		err = ENODATA;
	} else {
		len = x->size;
		copy = malloc(len ? len : 1);
		if (!copy)
			err = ENOMEM;
		else
			memcpy(copy, x->value, len);
	}
	unlock(s);
	if (err)
		reply_err(req, err);
	else
		reply_value(req, copy, len, size);
	free(copy);
}

void stage_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct stage *s = S(req);
	struct snode *n;
	char *buf = NULL;
	size_t len = 0, i;
	int err = 0;

	lock(s);
	n = stage_get(s, ino);
	if (!n) {
		err = ENOENT;
	} else {
		for (i = 0; i < n->nxattrs; i++)
			len += strlen(n->xattrs[i].name) + 1;
		buf = malloc(len ? len : 1);
		if (!buf) {
			err = ENOMEM;
		} else {
			char *p = buf;

			for (i = 0; i < n->nxattrs; i++) {
				size_t l = strlen(n->xattrs[i].name) + 1;

				memcpy(p, n->xattrs[i].name, l);
				p += l;
			}
		}
	}
	unlock(s);
	if (err)
		reply_err(req, err);
	else
		reply_value(req, buf, len, size);
	free(buf);
}

void stage_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct stage *s = S(req);
	struct snode *n;
	int err;

	/*
	 * Dropping an ACL leaves the mode, and none beyond it is kept: done
	 * (as ext4 answers; tar and cp -a clear default ACLs of directories).
	 */
	if (!strcmp(name, ACL_ACCESS) || !strcmp(name, ACL_DEFAULT)) {
		reply_err(req, 0);
		return;
	}
	err = xattr_name_check(name);
	if (err) {
		reply_err(req, err);
		return;
	}
	lock(s);
	n = stage_get(s, ino);
	if (!n) {
		err = ENOENT;
	} else {
		err = -xattr_remove(n, name);
		if (!err && !strcmp(name, XATTR_CAPS)) {
			s->capdrop_ino = ino;
			s->capdrop_pid = fuse_req_ctx(req)->pid;
		}
		if (!err)
			xattr_changed(s, n, name, NULL, 0, 1);
	}
	unlock(s);
	reply_err(req, err);
}
