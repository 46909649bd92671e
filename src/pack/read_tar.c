/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Tar input through libarchive: ustar, GNU and pax (long names, xattrs,
 * hard links, sparse files), compressed with anything libarchive reads.
 * The archive is untrusted: names are checked, nothing is written outside
 * the tree, and every failure names the entry.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <linux/limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pack/spool.h"
#include "util/util.h"

/*
 * The largest apparent size of a member.  A few header bytes can declare a
 * sparse member of many TiB, whose block list alone takes 4 bytes per block
 * in memory and time per block to write; past this, refuse the archive.
 */
#define TAR_MAX_MEMBER_SIZE (UINT64_C(1) << 42)	/* 4 TiB */

/*
 * The deepest member name, in components: the tree passes recurse once per
 * level, and a 1 MB pax name could otherwise nest half a million deep.
 */
#define TAR_MAX_DEPTH SQW_DEPTH_MAX

/*
 * The first members with data read in place are checked: their first
 * bytes are read from the archive where we reckon they are and compared
 * with what libarchive returns.
 */
#define IN_PLACE_CHECKS 16
#define IN_PLACE_CHECK_BYTES 4096

struct tar_ctx {
	sqw_tree_t *tree;
	struct spool *sp;
	int in_place;		/* extents point into the archive (fd) */
	int fd;
	int64_t base;		/* the archive's offset in fd where reading began */
	unsigned checked;
	struct pack_err *err;
	FILE *warn;
	int keep_xattrs, warned_xattr, warned_abs, warned_acl, warned_utf8, warned_user_xattr;
	struct sqw_attr dir_attr;
	const struct pack_filter *filter;
};

static int fail(struct tar_ctx *c, int code, const char *what, const char *path)
{
	c->err->code = code;
	c->err->what = what;
	pack_err_path(c->err, "%s", path ? path : "");
	return code;
}

/* Names are relative to the image root: strip "/" and "./", refuse "..". */
static const char *clean_path(struct tar_ctx *c, const char *p)
{
	const char *s = p;

	while (*s == '/' || (s[0] == '.' && s[1] == '/')) {
		if (*s == '/' && c->warn && !c->warned_abs++)
			pack_warn(c->warn, "removing leading '/' from member names\n");
		s += *s == '/' ? 1 : 2;
	}
	return s;
}

/*
 * GNU tar writes '=' and '%' in a SCHILY.xattr keyword's name as %3D and
 * %25 (the keyword ends at the first '='), and libarchive hands the name on
 * as written.  Undone here as GNU tar x does; a name written raw by another
 * tool that holds those very sequences would be misread, as by tar x.
 */
static const char *xattr_unescape(const char *name, char *buf)
{
	char *q = buf;

	if (!strchr(name, '%'))
		return name;
	while (*name) {
		if (name[0] == '%' && name[1] == '3' && (name[2] == 'D' || name[2] == 'd')) {
			*q++ = '=';
			name += 3;
		} else if (name[0] == '%' && name[1] == '2' && name[2] == '5') {
			*q++ = '%';
			name += 3;
		} else {
			*q++ = *name++;
		}
	}
	*q = '\0';
	return buf;
}

static int add_xattrs(struct tar_ctx *c, struct archive_entry *e,
		      sqw_node_t *n, const char *path)
{
	char key[4 * XATTR_NAME_MAX];
	const char *name;
	const void *val;
	struct sqw_attr a;
	size_t size;
	int ret;

	if (!c->keep_xattrs)
		return 0;
	sqw_node_get_attr(n, &a);
	/* libarchive keeps the mode's own entries out of the count. */
	if (archive_entry_acl_count(e, ARCHIVE_ENTRY_ACL_TYPE_ACCESS |
				    ARCHIVE_ENTRY_ACL_TYPE_DEFAULT) > 0 &&
	    c->warn && !c->warned_acl++)
		pack_warn(c->warn, "%s: its ACL cannot be stored in SquashFS (the mode "
			"is); skipped\n", path);
	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &name, &val, &size) == ARCHIVE_OK) {
		/* What Linux could never read back is refused, not stored. */
		snprintf(c->err->detail, sizeof(c->err->detail), "xattr '%.64s%s'",
			 name, strlen(name) > 64 ? "..." : "");
		if (strlen(name) >= sizeof(key))
			return fail(c, -EBADMSG, "xattr name longer than 255 bytes", path);
		name = xattr_unescape(name, key);
		if (strlen(name) > XATTR_NAME_MAX)
			return fail(c, -EBADMSG, "xattr name longer than 255 bytes", path);
		if (size > XATTR_SIZE_MAX)
			return fail(c, -EBADMSG, "xattr value larger than 64 KiB", path);
		/* Linux keeps user.* to files and directories (EPERM elsewhere). */
		if (!strncmp(name, "user.", 5) && !S_ISREG(a.mode) && !S_ISDIR(a.mode)) {
			if (c->warn && !c->warned_user_xattr++)
				pack_warn(c->warn, "%s: xattr '%s' on a file that is neither regular "
					  "nor a directory, which Linux does not allow; skipped\n",
					  path, name);
			continue;
		}
		ret = sqw_node_set_xattr(c->tree, n, name, val, size);
		if (ret == -ENOTSUP) {
			if (c->warn && !c->warned_xattr++)
				pack_warn(c->warn, "%s: xattr '%s' cannot be stored in SquashFS; skipped\n",
					path, name);
			continue;
		}
		if (ret)
			return fail(c, ret, "storing xattrs", path);
	}
	c->err->detail[0] = '\0';
	/* Once a member: the sum walks every name. */
	if (sqw_node_xattr_list_size(n) > XATTR_LIST_MAX)
		return fail(c, -EBADMSG, "xattr names longer than 64 KiB in all, "
			    "which Linux cannot list", path);
	return 0;
}

/*
 * Where the data block libarchive just returned lies in fd: at the position
 * its filter has consumed to (the tar reader consumes a block on the next
 * call).  The first bytes of the first members' blocks are checked there.
 */
static int in_place_pos(struct tar_ctx *c, struct archive *a, const void *buf,
			size_t size, int check, int64_t *pos)
{
	uint8_t chk[IN_PLACE_CHECK_BYTES];
	size_t n = size < sizeof(chk) ? size : sizeof(chk);

	*pos = c->base + archive_filter_bytes(a, 0);
	if (!check || c->checked >= IN_PLACE_CHECKS)
		return 1;
	c->checked++;
	if (*pos >= c->base && !pread_all(c->fd, chk, n, (uint64_t)*pos) && !memcmp(chk, buf, n))
		return 1;
	c->in_place = 0;
	if (c->warn)
		pack_warn(c->warn, "the archive's data is not where expected; "
			"copying it to a spool file instead\n");
	return 0;
}

static int read_data(struct tar_ctx *c, struct archive *a,
		     struct spool_file *f, const char *path)
{
	const void *buf;
	size_t size;
	la_int64_t off;
	int64_t pos;
	int r, ret, first = 1;

	for (;;) {
		r = archive_read_data_block(a, &buf, &size, &off);
		if (r == ARCHIVE_EOF)
			return 0;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			snprintf(c->err->detail, sizeof(c->err->detail), "%s",
				 archive_error_string(a) ? archive_error_string(a) : "");
			return fail(c, -EBADMSG, "reading archive data", path);
		}
		if (off < 0 || (uint64_t)off + size > f->size)
			return fail(c, -EBADMSG, "data beyond the member's size", path);
		/* A file is read in place whole or not at all. */
		if (first)
			f->in_place = c->in_place && in_place_pos(c, a, buf, size, 1, &pos);
		else if (f->in_place)
			in_place_pos(c, a, buf, size, 0, &pos);
		first = 0;
		if (f->in_place)
			ret = spool_file_in_place(f, (uint64_t)off, (uint64_t)pos, size);
		else
			ret = spool_file_append(c->sp, f, (uint64_t)off, buf, size);
		if (ret)
			return fail(c, ret, f->in_place ? "allocating" : "writing the spool", path);
		if (!f->in_place && c->sp->ah) {
			ret = spool_ahead_feed(c->sp->ah, f, (uint64_t)off, buf, size);
			if (ret)
				return fail(c, ret, "compressing", path);
		}
	}
}

static size_t path_depth(const char *p)
{
	size_t n = 0;

	for (; *p; p++)
		if (*p != '/' && (p[1] == '/' || p[1] == '\0'))
			n++;
	return n;
}

/* Make room for the entry at dir/name; a directory over a directory stays. */
static int replace(struct tar_ctx *c, sqw_node_t *dir, const char *name,
		   size_t len, mode_t mode, sqw_node_t **keep)
{
	sqw_node_t *old = sqw_tree_lookup(c->tree, dir, name, len);
	struct sqw_attr oa;

	*keep = NULL;
	if (!old)
		return 0;
	sqw_node_get_attr(old, &oa);
	if (S_ISDIR(oa.mode) && S_ISDIR(mode)) {
		*keep = old;
		return 0;
	}
	/* tar x refuses this too: the subtree would vanish without a word. */
	if (sqw_node_dir_entries(old))
		return -ENOTEMPTY;
	return sqw_tree_remove(c->tree, dir, name, len);
}

#define NOT_OVER_DIR "a non-directory cannot replace a non-empty directory"

/*
 * The member's mode.  libarchive copies an access ACL's group entry into
 * the group bits; where the ACL has a mask, the group bits are the mask, as
 * stat(2) and the header say.  A symbolic link's are always rwxrwxrwx.
 */
static mode_t entry_mode(struct archive_entry *e)
{
	mode_t mode = archive_entry_mode(e);
	int type, perm, tag, id;
	const char *name;

	if (S_ISLNK(mode))
		return S_IFLNK | 0777;
	if (archive_entry_acl_reset(e, ARCHIVE_ENTRY_ACL_TYPE_ACCESS) <= 0)
		return mode;
	while (archive_entry_acl_next(e, ARCHIVE_ENTRY_ACL_TYPE_ACCESS, &type, &perm,
				      &tag, &id, &name) == ARCHIVE_OK) {
		if (tag == ARCHIVE_ENTRY_ACL_MASK)
			return (mode & ~(mode_t)070) | (mode_t)((perm & 7) << 3);
	}
	return mode;
}

static int add_entry(struct tar_ctx *c, struct archive *a,
		     struct archive_entry *e)
{
	const char *raw = archive_entry_pathname(e), *path, *name, *link;
	struct sqw_attr at = {
		.mode = entry_mode(e),
		.uid = (uint32_t)archive_entry_uid(e),
		.gid = (uint32_t)archive_entry_gid(e),
		.mtime = archive_entry_mtime(e),
		.rdev = archive_entry_rdev(e),
	};
	sqw_node_t *dir, *n = NULL;
	size_t len;
	int ret;

	if (!raw)
		return fail(c, -EBADMSG, "member without a name", "");
	path = clean_path(c, raw);
	ret = pack_filter_match_below(c->filter, path, S_ISDIR(at.mode));
	if (ret)
		return ret < 0 ? fail(c, ret, "allocating", raw) : 0;
	/* (uid_t)-1 is no owner: chown's "leave it". */
	if (archive_entry_uid(e) < 0 || archive_entry_uid(e) >= UINT32_MAX ||
	    archive_entry_gid(e) < 0 || archive_entry_gid(e) >= UINT32_MAX) {
		snprintf(c->err->detail, sizeof(c->err->detail), "uid %lld, gid %lld",
			 (long long)archive_entry_uid(e), (long long)archive_entry_gid(e));
		return fail(c, -EBADMSG, "owner outside 0..4294967294", raw);
	}
	if (path_depth(path) > TAR_MAX_DEPTH) {
		snprintf(c->err->detail, sizeof(c->err->detail),
			 "%zu levels, at most %d", path_depth(path), TAR_MAX_DEPTH);
		return fail(c, -EBADMSG, "member name nested too deeply", raw);
	}
	ret = sqw_tree_walk(c->tree, path, 1, &c->dir_attr, &dir, &name, &len);
	if (ret)
		return fail(c, ret, ret == -EINVAL ? "unsafe member name ('..')" :
			    ret == -ENOTDIR ? "a parent is not a directory" :
			    "bad member name", raw);
	link = archive_entry_hardlink(e);
	if (link) {
		sqw_node_t *ldir, *target;
		struct sqw_attr ta;
		const char *lname;
		size_t llen;

		ret = sqw_tree_walk(c->tree, clean_path(c, link), 0, NULL, &ldir,
				    &lname, &llen);
		if (ret == -EINVAL)
			return fail(c, -EBADMSG, "unsafe hard link target ('..')", raw);
		target = ret ? NULL : llen ? sqw_tree_lookup(c->tree, ldir, lname, llen) : ldir;
		if (!target && pack_filter_match_below(c->filter, clean_path(c, link), 0) > 0)
			return fail(c, -EBADMSG, "hard link to an excluded member (its data went "
				    "with it: exclude the link too, or keep the member)", raw);
		if (!target)
			return fail(c, -EBADMSG, "hard link to a missing member", raw);
		sqw_node_get_attr(target, &ta);
		if (S_ISDIR(ta.mode))
			return fail(c, -EBADMSG, "hard link to a directory", raw);
		if (link[strlen(link) - 1] == '/')
			return fail(c, -EBADMSG, "hard link target ends in '/' but is not a "
				    "directory", raw);
		if (len == 0)
			return fail(c, -EBADMSG, "hard link named like the root", raw);
		if (target == sqw_tree_lookup(c->tree, dir, name, len))
			return 0;
		ret = replace(c, dir, name, len, S_IFREG, &n);
		if (!ret)
			ret = sqw_tree_link(c->tree, dir, name, len, target);
		return ret ? fail(c, ret == -ENOTEMPTY ? -EBADMSG : ret, ret == -ENOTEMPTY ?
				  NOT_OVER_DIR : "adding a hard link", raw) : 0;
	}
	if (len == 0) {
		/* "./" itself, or "sub/.": that directory's attributes. */
		if (!S_ISDIR(at.mode))
			return fail(c, -EBADMSG, dir == sqw_tree_root(c->tree) ?
				    "the root is not a directory" :
				    "a member named '.' is not a directory", raw);
		sqw_node_set_attr(dir, &at);
		return add_xattrs(c, e, dir, raw);
	}
	switch (at.mode & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFCHR: case S_IFBLK:
	case S_IFIFO: case S_IFSOCK:
		break;
	default:
		return fail(c, -EBADMSG, at.mode & S_IFMT ? "unknown member type" :
			    "member without a type (as a hard link with an empty target "
			    "reads)", raw);
	}
	ret = replace(c, dir, name, len, at.mode, &n);
	if (ret)
		return fail(c, ret == -ENOTEMPTY ? -EBADMSG : ret, ret == -ENOTEMPTY ?
			    NOT_OVER_DIR : "replacing an earlier member", raw);
	if (n) {
		sqw_node_set_attr(n, &at);	/* directory listed again */
	} else {
		if (S_ISREG(at.mode)) {
			if (archive_entry_size(e) < 0)
				return fail(c, -EBADMSG, "negative size", raw);
			at.size = (uint64_t)archive_entry_size(e);
			if (at.size > TAR_MAX_MEMBER_SIZE) {
				snprintf(c->err->detail, sizeof(c->err->detail),
					 "%llu bytes, at most 4 TiB from a tar archive",
					 (unsigned long long)at.size);
				return fail(c, -EFBIG, "member too large", raw);
			}
		}
		if (S_ISLNK(at.mode) && (!archive_entry_symlink(e) ||
					 !*archive_entry_symlink(e)))
			return fail(c, -EBADMSG, "symlink with an empty target", raw);
		ret = sqw_tree_add(c->tree, dir, name, len, &at,
				   S_ISLNK(at.mode) ? archive_entry_symlink(e) : NULL,
				   &n);
		if (ret)
			return fail(c, ret, ret == -ENAMETOOLONG ?
				    "name or symlink target too long" : "adding",
				    raw);
	}
	if (S_ISREG(at.mode)) {
		struct spool_file *f = calloc(1, sizeof(*f));

		if (!f)
			return fail(c, -ENOMEM, "allocating", raw);
		f->sp = c->sp;
		f->size = at.size;
		sqw_node_set_source(n, f);
		ret = read_data(c, a, f, raw);
		if (ret)
			return ret;
	}
	return add_xattrs(c, e, n, raw);
}

int tar_read(int fd, sqw_tree_t *tree, struct spool *sp, int keep_xattrs,
	     int64_t default_mtime, const struct pack_filter *filter, FILE *warn,
	     struct pack_err *err)
{
	struct tar_ctx c = {
		.tree = tree, .sp = sp, .err = err, .warn = warn,
		.keep_xattrs = keep_xattrs, .filter = filter,
		.dir_attr = { .mode = S_IFDIR | 0755, .mtime = default_mtime },
	};
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	char prev[128] = "";	/* the last member read, for messages */
	struct stat st;
	int r, ret = 0;

	if (!a)
		return fail(&c, -ENOMEM, "allocating", "");
	sqw_tree_set_source_free(tree, spool_file_free);
	sqw_node_set_attr(sqw_tree_root(tree), &c.dir_attr);
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	archive_read_support_format_gnutar(a);
	c.fd = fd;
	c.base = fstat(fd, &st) || !S_ISREG(st.st_mode) ? -1 : lseek(fd, 0, SEEK_CUR);
	if (archive_read_open_fd(a, fd, 1 << 16) != ARCHIVE_OK) {
		snprintf(err->detail, sizeof(err->detail), "%s",
			 archive_error_string(a) ? archive_error_string(a) : "");
		ret = fail(&c, -EBADMSG, "not a tar archive", "");
		goto out;
	}
	/* An uncompressed archive in a file: no copy of its data. */
	c.in_place = c.base >= 0 && archive_filter_count(a) == 1 &&
		     archive_filter_code(a, 0) == ARCHIVE_FILTER_NONE;
	if (c.in_place)
		sp->in_fd = fd;
	/* Nothing to overlap with: the archive is read as fast as the disk goes. */
	if (c.in_place)
		spool_rehearse_finish(sp);
	sp->reading = 1;
	for (;;) {
		r = archive_read_next_header(a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r == ARCHIVE_WARN && warn) {
			const char *m = archive_error_string(a), *name = archive_entry_pathname(e);

			/* GNU tar writes such names raw into pax headers. */
			if (m && strstr(m, "can't be converted from UTF-8")) {
				if (!c.warned_utf8++)
					pack_warn(warn, "%s: not UTF-8 in a pax header; kept as "
						"its bytes\n", name ? name : "?");
			} else
				pack_warn(warn, "%s: %s\n", name ? name : "?", m ? m : "");
		}
		/* ARCHIVE_RETRY (a damaged header) is an error too: e is empty. */
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			const char *m = archive_error_string(a);

			if (*prev)
				snprintf(err->detail, sizeof(err->detail),
					 "%s (in the header after member '%s')",
					 m ? m : "bad header", prev);
			else
				snprintf(err->detail, sizeof(err->detail),
					 "%s (in the first header)", m ? m : "bad header");
			ret = fail(&c, -EBADMSG, "malformed archive", "");
			goto out;
		}
		ret = add_entry(&c, a, e);
		if (!ret && sp->rh) {
			ret = spool_rehearse_tick(sp, tree);
			if (ret)
				fail(&c, ret, "writing the spool", "");
		}
		if (ret)
			goto out;
		snprintf(prev, sizeof(prev), "%s", archive_entry_pathname(e));
	}
	spool_rehearse_finish(sp);
	if (sp->ah) {
		ret = spool_ahead_finish(sp->ah);
		if (ret) {
			fail(&c, ret, "compressing", "");
			goto out;
		}
	}
	ret = spool_flush(sp);
	if (ret)
		fail(&c, ret, "writing the spool", "");
	/* The first of each was named; how many went, so none goes unsaid. */
	if (!ret && warn && c.warned_xattr > 1)
		pack_warn(warn, "%d xattrs that SquashFS cannot store were skipped in all\n",
			c.warned_xattr);
	if (!ret && warn && c.warned_user_xattr > 1)
		pack_warn(warn, "%d user.* xattrs of symlinks and special files were skipped "
			  "in all\n", c.warned_user_xattr);
	if (!ret && warn && c.warned_utf8 > 1)
		pack_warn(warn, "%d members had pax headers that were not UTF-8 in all; "
			"kept as their bytes\n", c.warned_utf8);
	if (!ret && warn && c.warned_acl > 1)
		pack_warn(warn, "the ACLs of %d members were skipped in all\n",
			c.warned_acl);
out:
	sp->reading = 0;
	archive_read_free(a);
	return ret;
}
