/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * sqfs-pack --pseudo: entries that are not in the input, in mksquashfs's
 * pseudo definition syntax, so that device nodes and owners need no root:
 *
 *   PATH d MODE UID GID                  a directory
 *   PATH m MODE UID GID                  an existing entry's attributes
 *   PATH b|c MODE UID GID MAJOR MINOR    a block or character device
 *   PATH i MODE UID GID f|s              a FIFO or a socket
 *   PATH s MODE UID GID TARGET           a symbolic link
 *   PATH x NAME=VALUE                    an extended attribute of an entry
 *
 * PATH is relative to the image root ("/" in front is fine); a space in it
 * is escaped with '\' or put in double quotes.  MODE is
 * octal permission bits, UID and GID numbers or names.  An xattr VALUE is
 * the rest of the line: text, or 0x hex, 0s base64, 0t text (getfattr's
 * and mksquashfs 4.6's encodings).  New entries take
 * the image's mkfs time.  mksquashfs's 'f' (a file from a command's output)
 * is refused: the image would depend on more than the tree and options.
 * Definitions apply in order, after the input is read: a parent must exist
 * or be defined earlier.  As in mksquashfs, one that names an entry of the
 * input is ignored with a warning (exclude the entry to replace it).
 */
#include <errno.h>
#include <linux/limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "cli/cli.h"
#include "pack/pack.h"
#include "util/util.h"

#define PSEUDO_FIELDS 8

/*
 * Split line into at most max fields.  PATH reads as the shell would read
 * a word: '\' escapes a character and double quotes may enclose any part
 * ("a b"c is "a bc"), as in mksquashfs.  A symbolic link's TARGET is the
 * rest of the line, spaces and all, as mksquashfs takes it.
 */
static int split(char *line, char **f, int max)
{
	char *p = line, *out;
	int n = 0;

	while (*p) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		if (n == max)
			return -1;
		f[n] = out = p;
		if (n == 0) {
			int quoted = 0;

			for (; *p && (quoted || (*p != ' ' && *p != '\t')); p++) {
				if (*p == '"')
					quoted = !quoted;
				else
					*out++ = *p == '\\' && p[1] ? *++p : *p;
			}
			if (quoted)
				return -1;
		} else if ((n == 5 && !strcmp(f[1], "s")) || (n == 2 && !strcmp(f[1], "x"))) {
			out = p + strlen(p);
			p = out;
		} else {
			for (; *p && *p != ' ' && *p != '\t'; p++)
				*out++ = *p;
		}
		if (*p)
			p++;
		*out = '\0';
		n++;
	}
	return n;
}

static int bad(char *msg, size_t len, const char *what)
{
	snprintf(msg, len, "%s", what);
	return -EINVAL;
}

static int hexval(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int b64val(int c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26 :
	       c >= '0' && c <= '9' ? c - '0' + 52 : c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* VALUE of "x NAME=VALUE" into out (as long as v at most); its length or -1. */
static long decode_value(const char *v, uint8_t *out)
{
	size_t len = strlen(v), o = 0, i;
	unsigned int acc = 0;
	int bits = 0, c;

	if (len >= 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
		if (len % 2)
			return -1;
		for (i = 2; i < len; i += 2) {
			int hi = hexval((unsigned char)v[i]), lo = hexval((unsigned char)v[i + 1]);

			if (hi < 0 || lo < 0)
				return -1;
			out[o++] = (uint8_t)(hi << 4 | lo);
		}
		return (long)o;
	}
	if (len >= 2 && v[0] == '0' && (v[1] == 's' || v[1] == 'S')) {
		for (i = 2; i < len && v[i] != '='; i++) {
			if ((c = b64val((unsigned char)v[i])) < 0)
				return -1;
			acc = (acc << 6 | (unsigned int)c) & 0xffffff;
			bits += 6;
			if (bits >= 8) {
				bits -= 8;
				out[o++] = (uint8_t)(acc >> bits);
			}
		}
		/* only '=' padding may follow, to a whole number of quads */
		if (strspn(v + i, "=") != len - i || (len - 2) % 4 || len - i > 2 ||
		    (acc & ((1u << bits) - 1)))
			return -1;
		return (long)o;
	}
	if (len >= 2 && v[0] == '0' && (v[1] == 't' || v[1] == 'T'))
		v += 2;
	len = strlen(v);
	memcpy(out, v, len);
	return (long)len;
}

/* "x NAME=VALUE" into d. */
static int parse_xattr(struct pack_pseudo_def *d, const char *arg, char *msg, size_t msglen)
{
	static const char *const ns[] = { "user.", "trusted.", "security." };
	const char *eq = strchr(arg, '=');
	size_t nlen = eq ? (size_t)(eq - arg) : 0, i;
	long vlen;

	if (!eq || !nlen)
		return bad(msg, msglen, "give PATH x NAME=VALUE");
	for (i = 0; i < 3; i++)
		if (nlen >= strlen(ns[i]) && !strncmp(arg, ns[i], strlen(ns[i])))
			break;
	if (i == 3)
		return bad(msg, msglen, "only user., trusted. and security. attributes "
			   "can be stored in SquashFS");
	if (nlen == strlen(ns[i]))
		return bad(msg, msglen, "the attribute's NAME is empty after its namespace");
	if (nlen > 255)
		return bad(msg, msglen, "the attribute's name is longer than 255 bytes");
	d->xname = strndup(arg, nlen);
	d->xvalue = malloc(strlen(eq + 1) + 1);
	if (!d->xname || !d->xvalue)
		return -ENOMEM;
	vlen = decode_value(eq + 1, d->xvalue);
	if (vlen < 0)
		return bad(msg, msglen, "bad VALUE: 0x needs pairs of hex digits, 0s base64");
	if (vlen > 65536)
		return bad(msg, msglen, "the value is longer than 65536 bytes");
	d->xlen = (uint32_t)vlen;
	return 0;
}

int pack_pseudo_add(struct pack_pseudo *ps, const char *def, const char *where,
		    char *msg, size_t msglen)
{
	char *line = strdup(def), *f[PSEUDO_FIELDS], *end;
	struct pack_pseudo_def d = { 0 };
	int n, ret = -EINVAL;
	unsigned long v;
	int64_t id;

	if (!line)
		return -ENOMEM;
	n = split(line, f, PSEUDO_FIELDS);
	if (n < 2) {
		ret = bad(msg, msglen, "give PATH TYPE MODE UID GID ...");
		goto out;
	}
	d.type = f[1][0];
	if (strlen(f[1]) != 1 || !strchr("dmbcisx", d.type)) {
		ret = bad(msg, msglen, d.type == 'f' && !f[1][1] ?
			  "type 'f' (a file made by a command) is not supported" :
			  "type must be one of d, m, b, c, i, s, x");
		goto out;
	}
	if (d.type == 'x') {
		ret = n == 3 ? parse_xattr(&d, f[2], msg, msglen) :
			       bad(msg, msglen, "give PATH x NAME=VALUE");
		if (ret)
			goto out;
		goto add;
	}
	if (n != (d.type == 'b' || d.type == 'c' ? 7 : d.type == 'i' || d.type == 's' ? 6 : 5)) {
		ret = bad(msg, msglen, d.type == 'b' || d.type == 'c' ?
			  "give PATH b|c MODE UID GID MAJOR MINOR" :
			  d.type == 'i' ? "give PATH i MODE UID GID f|s" :
			  d.type == 's' ? "give PATH s MODE UID GID TARGET" :
			  "give PATH d|m MODE UID GID");
		goto out;
	}
	errno = 0;
	v = strtoul(f[2], &end, 8);
	if (errno || *end || !*f[2] || v > 07777 || f[2][0] == '-') {
		ret = bad(msg, msglen, "MODE must be octal permission bits, 0 to 7777");
		goto out;
	}
	d.mode = (uint32_t)v;
	if (cli_parse_id(f[3], 0, &id)) {
		ret = bad(msg, msglen, "UID is not a uid or user name");
		goto out;
	}
	d.uid = (uint32_t)id;
	if (cli_parse_id(f[4], 1, &id)) {
		ret = bad(msg, msglen, "GID is not a gid or group name");
		goto out;
	}
	d.gid = (uint32_t)id;
	if (d.type == 'b' || d.type == 'c') {
		uint64_t maj, min;

		/* What the kernel can decode: 12-bit major, 20-bit minor. */
		if (cli_parse_u64(f[5], 4095, &maj) || cli_parse_u64(f[6], 1048575, &min)) {
			ret = bad(msg, msglen, "MAJOR must be 0 to 4095 and MINOR 0 to 1048575");
			goto out;
		}
		d.rdev = makedev((unsigned)maj, (unsigned)min);
	}
	if (d.type == 'i' && strcmp(f[5], "f") && strcmp(f[5], "s")) {
		ret = bad(msg, msglen, "type i takes f (a FIFO) or s (a socket)");
		goto out;
	}
	if (d.type == 'i')
		d.type = f[5][0] == 'f' ? 'p' : 'S';
	if (d.type == 's' && strlen(f[5]) > SQW_SYMLINK_MAX) {
		ret = bad(msg, msglen, "the symlink target is longer than 4095 bytes");
		goto out;
	}
	d.target = d.type == 's' ? strdup(f[5]) : NULL;
	if (d.type == 's' && !d.target) {
		ret = -ENOMEM;
		goto out;
	}
add:
	d.path = strdup(f[0]);
	d.def = strdup(def);
	d.where = where ? strdup(where) : NULL;
	ret = -ENOMEM;
	if (!d.path || !d.def || (where && !d.where) ||
	    array_reserve((void **)&ps->d, &ps->cap, ps->n + 1, sizeof(*ps->d)))
		goto out;
	ps->d[ps->n++] = d;
	memset(&d, 0, sizeof(d));
	ret = 0;
out:
	free(d.path);
	free(d.target);
	free(d.def);
	free(d.where);
	free(d.xname);
	free(d.xvalue);
	free(line);
	return ret;
}

struct add_file {
	struct pack_pseudo *ps;
	const char *file;
	char *msg;
	size_t msglen;
};

static int add_line(void *ctx, char *line, size_t no)
{
	struct add_file *a = ctx;
	char where[64 + 4096], m[256];
	int ret;

	while (*line == ' ' || *line == '\t')
		line++;
	snprintf(where, sizeof(where), "%s:%zu", a->file, no);
	ret = pack_pseudo_add(a->ps, line, where, a->msg, a->msglen);
	if (ret == -EINVAL) {
		snprintf(m, sizeof(m), "line %zu: %s", no, a->msg);
		snprintf(a->msg, a->msglen, "%s", m);
	}
	return ret;
}

int pack_pseudo_add_file(struct pack_pseudo *ps, const char *file, char *msg, size_t msglen)
{
	struct add_file a = { ps, file, msg, msglen };
	int ret = pack_read_lines(file, add_line, &a);

	if (ret && ret != -EINVAL && ret != -ENOMEM)
		snprintf(msg, msglen, "%s", strerror(-ret));
	return ret;
}

void pack_pseudo_free(struct pack_pseudo *ps)
{
	for (size_t i = 0; i < ps->n; i++) {
		free(ps->d[i].path);
		free(ps->d[i].target);
		free(ps->d[i].def);
		free(ps->d[i].where);
		free(ps->d[i].xname);
		free(ps->d[i].xvalue);
	}
	free(ps->d);
	memset(ps, 0, sizeof(*ps));
}

size_t pack_pseudo_name(const struct pack_pseudo_def *d, char *buf, size_t size)
{
	int n = snprintf(buf, size, "pseudo definition '%s'%s%s%s", d->def, d->where ? " (" : "",
		 d->where ? d->where : "", d->where ? ")" : "");

	return n < 0 ? 0 : (size_t)n;
}

int pack_pseudo_xattr_fits(const struct pack_pseudo_def *d, uint32_t mode)
{
	return strncmp(d->xname, "user.", 5) || S_ISREG(mode) || S_ISDIR(mode);
}

uint32_t pack_pseudo_mode(const struct pack_pseudo_def *d)
{
	static const struct { char type; uint32_t fmt; } fmts[] = {
		{ 'd', S_IFDIR }, { 'b', S_IFBLK }, { 'c', S_IFCHR }, { 'p', S_IFIFO },
		{ 'S', S_IFSOCK }, { 's', S_IFLNK },
	};

	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++)
		if (fmts[i].type == d->type)
			return fmts[i].fmt | d->mode;
	return d->mode;		/* 'm': the permission bits only */
}

static int pfail(struct pack_err *err, const struct pack_pseudo_def *d, int code,
		 const char *what)
{
	/* Whole, however long the definition's line */
	size_t n = pack_pseudo_name(d, NULL, 0) + 1;

	err->code = code;
	err->what = what;
	free(err->path);
	err->path = malloc(n);
	if (err->path)
		pack_pseudo_name(d, err->path, n);
	return code;
}

/* The next component of *p, as the tree walks it: "" and "." skipped. */
static size_t component(const char **p)
{
	size_t len;

	for (;;) {
		while (**p == '/')
			(*p)++;
		len = strcspn(*p, "/");
		if (!(len == 1 && **p == '.'))
			return len;
		*p += len;
	}
}

/* Do a and b name one entry ("a//b/./c" and "/a/b/c" do)? */
static int same_path(const char *a, const char *b)
{
	size_t la, lb;

	for (;;) {
		la = component(&a);
		lb = component(&b);
		if (la != lb || memcmp(a, b, la))
			return 0;
		if (!la)
			return 1;
		a += la;
		b += lb;
	}
}

/* Did a definition before the i-th make the entry it names? */
static int made_by_def(const struct pack_pseudo *ps, size_t i)
{
	for (size_t k = 0; k < i; k++)
		if (!strchr("mx", ps->d[k].type) && same_path(ps->d[k].path, ps->d[i].path))
			return 1;
	return 0;
}

static int apply_one(sqw_tree_t *tree, const struct pack_pseudo *ps, size_t i,
		     int64_t mtime, FILE *warn, struct pack_err *err)
{
	const struct pack_pseudo_def *d = &ps->d[i];
	struct sqw_attr a = { .uid = d->uid, .gid = d->gid, .mtime = mtime, .rdev = d->rdev };
	sqw_node_t *dir, *node;
	const char *name;
	char what[4400];
	size_t len;
	int ret;

	ret = sqw_tree_walk(tree, d->path, 0, NULL, &dir, &name, &len);
	if (ret)
		return pfail(err, d, ret, ret == -EINVAL ? "'..' in the path" :
			     ret == -ENOENT ? "a parent directory is missing (define it first)" :
			     "a parent is not a directory");
	node = len ? sqw_tree_lookup(tree, dir, name, len) : dir;
	if (d->type == 'm') {
		if (!node)
			return pfail(err, d, -ENOENT, "no such entry to modify");
		sqw_node_get_attr(node, &a);
		a.mode = (a.mode & S_IFMT) | d->mode;
		a.uid = d->uid;
		a.gid = d->gid;
		sqw_node_set_attr(node, &a);
		return 0;
	}
	if (d->type == 'x') {
		if (!node)
			return pfail(err, d, -ENOENT, "no such entry for the attribute");
		sqw_node_get_attr(node, &a);
		if (!pack_pseudo_xattr_fits(d, a.mode))
			return pfail(err, d, -EPERM, "user. attributes are for regular files "
				     "and directories only (Linux refuses them elsewhere)");
		ret = sqw_node_set_xattr(tree, node, d->xname, d->xvalue, d->xlen);
		if (ret)
			return pfail(err, d, ret, "setting the attribute");
		if (sqw_node_xattr_list_size(node) > XATTR_LIST_MAX)
			return pfail(err, d, -E2BIG, "the entry's attribute names would take "
				     "more than 64 KiB, more than Linux can list");
		return 0;
	}
	if (node) {
		pack_pseudo_name(d, what, sizeof(what));
		if (warn && made_by_def(ps, i))
			pack_warn(warn, "%s: an earlier definition made the entry; "
				"ignored\n", what);
		else if (warn)
			pack_warn(warn, "%s: the entry exists in the input; ignored "
				"(exclude it with -e to replace it, or change it with type m)\n",
				what);
		return 0;
	}
	a.mode = pack_pseudo_mode(d);
	ret = sqw_tree_add(tree, dir, name, len, &a, d->target, &node);
	return ret ? pfail(err, d, ret, "adding") : 0;
}

int pack_pseudo_apply(const struct pack_pseudo *ps, sqw_tree_t *tree, int64_t mtime,
		      FILE *warn, struct pack_err *err)
{
	for (size_t i = 0; i < ps->n; i++) {
		int ret = apply_one(tree, ps, i, mtime, warn, err);

		if (ret)
			return ret;
	}
	return 0;
}
