/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Encoding inodes into the inode table (format: squashfs-format.md §5). */
#include "sqw/writer_i.h"

#define INODE_DRAIN (256u << 10)

enum {
	INO_DIR = 1, INO_FILE, INO_SYMLINK, INO_BLKDEV, INO_CHRDEV, INO_FIFO,
	INO_SOCKET,
	INO_EXT = 7,		/* basic type + 7 = extended type */
};

/* SquashFS keeps unsigned 32-bit seconds: clamped, as Linux clamps to a
 * file system's range, and counted for the summary's warning. */
static uint32_t node_mtime(const struct writer *w, const struct sqw_attr *a)
{
	int64_t t = w->opts->all_time >= 0 ? w->opts->all_time : a->mtime;

	if (t >= 0 && t <= UINT32_MAX)
		return (uint32_t)t;
	w->st->clamped_times++;
	return t < 0 ? 0 : UINT32_MAX;
}

static int basic_type(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFDIR: return INO_DIR;
	case S_IFREG: return INO_FILE;
	case S_IFLNK: return INO_SYMLINK;
	case S_IFBLK: return INO_BLKDEV;
	case S_IFCHR: return INO_CHRDEV;
	case S_IFIFO: return INO_FIFO;
	case S_IFSOCK: return INO_SOCKET;
	}
	return -EINVAL;
}

/* Linux new_encode_dev: what the kernel decodes. */
static int encode_rdev(uint64_t rdev, uint32_t *out)
{
	uint32_t major = (uint32_t)(((rdev >> 8) & 0xfff) | ((rdev >> 32) & ~0xfffu));
	uint32_t minor = (uint32_t)((rdev & 0xff) | ((rdev >> 12) & ~0xffu));

	if (major > 0xfff || minor > 0xfffff)
		return -EOVERFLOW;
	*out = (minor & 0xff) | (major << 8) | ((minor & ~0xffu) << 12);
	return 0;
}

/*
 * The inode table comes first after the data, and nothing else is written
 * while it grows: it goes to the image as it fills instead of being held
 * (3.4 MB for a million files).
 */
static int inode_append(struct writer *w, const void *node, const void *data, size_t len)
{
	int ret = meta_writer_append(w->inodes, data, len);

	if (ret)
		return writer_fail(w, ret, "allocating", node);
	if (w->inodes->out.len >= INODE_DRAIN) {
		ret = meta_writer_drain(w->inodes, &w->out);
		if (ret)
			return writer_fail(w, ret, "writing the image", NULL);
	}
	return 0;
}

/*
 * A file's n block words, its runs of holes spelled out, go in slices
 * drained as they go: a sparse file of 2^32 blocks (16 TiB at 4 KiB blocks)
 * needs no 16 GiB buffer.
 */
static int block_words(struct writer *w, const void *node, const uint32_t *blocks, uint32_t n)
{
	uint8_t le[4096];
	size_t k = 0;
	uint32_t run = 0;
	int ret;

	while (n) {
		uint32_t word = 0;

		if (run) {
			run--;
		} else if (*blocks) {
			word = *blocks++;
		} else {
			run = blocks[1] - 1;
			blocks += 2;
		}
		put_le32(le + k, word);
		k += 4;
		n--;
		if (k == sizeof(le) || !n) {
			ret = inode_append(w, node, le, k);
			if (ret)
				return ret;
			k = 0;
		}
	}
	return 0;
}

int inode_write(struct writer *w, struct winode *in)
{
	const struct sqw_entry *e = in->e;
	const struct sqw_attr *a = &e->a;
	const struct wfile *f = in->f;
	const struct wdir *d = in->d;
	uint32_t xattr = SQW_NO_XATTR, uid = a->uid, gid = a->gid, rdev, nblocks = 0;
	const uint32_t *blocks = NULL;
	uint64_t sparse = 0, *sp, blocks_start = 0;
	uint16_t uidx, gidx;
	int type = basic_type(a->mode), ext, ret;
	struct buf *b = &w->scratch;
	uint8_t *p;
	size_t i, len;

	if (type < 0)
		return writer_fail(w, type, "unsupported file type", e->node);
	if ((type == INO_DIR && !d) || (type == INO_FILE && !f))
		return writer_fail(w, -EINVAL, "inode without its state", e->node);
	if (w->flags & SQW_OPT_ALL_ROOT)
		uid = gid = 0;
	if (w->opts->force_uid >= 0)
		uid = (uint32_t)w->opts->force_uid;
	if (w->opts->force_gid >= 0)
		gid = (uint32_t)w->opts->force_gid;
	ret = id_lookup(w, uid, &uidx);
	if (!ret)
		ret = id_lookup(w, gid, &gidx);
	if (ret)
		return writer_fail(w, ret, "too many distinct uid/gid values (SquashFS stores at most 65535)", e->node);
	if (e->has_xattrs && !(w->flags & SQW_OPT_NO_XATTRS)) {
		ret = xattr_lookup(w, e, &xattr);
		if (ret)
			return writer_fail(w, ret, "storing xattrs", e->node);
	}
	if (type == INO_FILE) {
		nblocks = (uint32_t)sqw_file_data_blocks(w->flags, w->bs, f->size);
		blocks = f->blk ? w->blockw + f->blk : NULL;
		blocks_start = wfile_blocks_start(w, f);
		sp = u64map_find(&w->sparse, (uint64_t)(f - w->files) + 1);
		sparse = sp ? *sp : 0;
	}

	switch (type) {
	case INO_DIR:
		ext = xattr != SQW_NO_XATTR || d->size > 0xffff || d->nindex;
		len = ext ? 40 : 32;
		for (i = 0; ext && i < d->nindex; i++)
			len += 12 + d->index[i].name_len;
		break;
	case INO_FILE:
		ext = xattr != SQW_NO_XATTR || f->size > UINT32_MAX ||
		      blocks_start > UINT32_MAX || in->nlink > 1 || sparse;
		len = ext ? 56 : 32;	/* the block words follow: block_words() */
		break;
	case INO_SYMLINK:
		ext = xattr != SQW_NO_XATTR;
		len = 24 + strlen(e->target) + (ext ? 4 : 0);
		break;
	case INO_BLKDEV:
	case INO_CHRDEV:
		ext = xattr != SQW_NO_XATTR;
		len = ext ? 28 : 24;
		break;
	default:
		ext = xattr != SQW_NO_XATTR;
		len = ext ? 24 : 20;
		break;
	}
	b->len = 0;
	ret = buf_reserve(b, len);
	if (ret)
		return writer_fail(w, ret, "allocating", e->node);
	p = b->data;
	memset(p, 0, len);
	put_le16(p, (uint16_t)(type + (ext ? INO_EXT : 0)));
	put_le16(p + 2, (uint16_t)(a->mode & 07777));
	put_le16(p + 4, uidx);
	put_le16(p + 6, gidx);
	put_le32(p + 8, node_mtime(w, a));
	put_le32(p + 12, in->ino);

	switch (type) {
	case INO_DIR:
		if (!ext) {
			put_le32(p + 16, d->block);
			put_le32(p + 20, 2 + d->nsubdirs);
			put_le16(p + 24, (uint16_t)d->size);
			put_le16(p + 26, d->offset);
			put_le32(p + 28, d->parent_ino);
			break;
		}
		put_le32(p + 16, 2 + d->nsubdirs);
		put_le32(p + 20, d->size);
		put_le32(p + 24, d->block);
		put_le32(p + 28, d->parent_ino);
		put_le16(p + 32, (uint16_t)d->nindex);
		put_le16(p + 34, d->offset);
		put_le32(p + 36, xattr);
		p += 40;
		for (i = 0; i < d->nindex; i++) {
			const struct sqw_dir_index *x = &d->index[i];

			put_le32(p, x->index);
			put_le32(p + 4, x->start_block);
			put_le32(p + 8, x->name_len - 1);
			memcpy(p + 12, x->name, x->name_len);
			p += 12 + x->name_len;
		}
		break;
	case INO_FILE:
		if (!ext) {
			put_le32(p + 16, (uint32_t)blocks_start);
			put_le32(p + 20, f->frag_index);
			put_le32(p + 24, f->frag_offset);
			put_le32(p + 28, (uint32_t)f->size);
		} else {
			put_le64(p + 16, blocks_start);
			put_le64(p + 24, f->size);
			put_le64(p + 32, sparse);
			put_le32(p + 40, in->nlink);
			put_le32(p + 44, f->frag_index);
			put_le32(p + 48, f->frag_offset);
			put_le32(p + 52, xattr);
		}
		break;
	case INO_SYMLINK: {
		size_t tl = strlen(e->target);

		put_le32(p + 16, in->nlink);
		put_le32(p + 20, (uint32_t)tl);
		memcpy(p + 24, e->target, tl);
		if (ext)
			put_le32(p + 24 + tl, xattr);
		break;
	}
	case INO_BLKDEV:
	case INO_CHRDEV:
		ret = encode_rdev(a->rdev, &rdev);
		if (ret)
			return writer_fail(w, ret, "device number too large", e->node);
		put_le32(p + 16, in->nlink);
		put_le32(p + 20, rdev);
		if (ext)
			put_le32(p + 24, xattr);
		break;
	default:
		put_le32(p + 16, in->nlink);
		if (ext)
			put_le32(p + 20, xattr);
		break;
	}
	in->ref = meta_writer_ref(w->inodes);
	ret = inode_append(w, e->node, b->data, len);
	if (!ret && nblocks)
		ret = block_words(w, e->node, blocks, nblocks);
	return ret;
}
