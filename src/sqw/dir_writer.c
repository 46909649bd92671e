/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Directory listings (squashfs-format.md §6): runs of one header and up to
 * 256 entries, plus index points for large directories.  Every child's
 * inode is written before its parent's listing.
 */
#include "sqw/writer_i.h"

#define DIR_RUN_MAX 256
#define DIR_DELTA_MAX 32767

static int dir_type(const sqw_node_t *n)
{
	switch (n->a.mode & S_IFMT) {
	case S_IFDIR: return 1;
	case S_IFREG: return 2;
	case S_IFLNK: return 3;
	case S_IFBLK: return 4;
	case S_IFCHR: return 5;
	case S_IFIFO: return 6;
	default: return 7;
	}
}

static int index_add(struct writer *w, sqw_node_t *dir, uint32_t at,
		     const struct sqw_dentry *first)
{
	struct sqw_dir_index *d;
	size_t cap = dir->ndindex;
	int ret = array_reserve((void **)&dir->dindex, &cap, dir->ndindex + 1,
				sizeof(*dir->dindex));

	if (ret)
		return writer_fail(w, ret, "allocating", dir);
	d = &dir->dindex[dir->ndindex++];
	d->index = at;
	d->start_block = meta_writer_block(w->dirs);
	d->name_len = first->len;
	d->name = first->name;
	return 0;
}

int dir_write_listing(struct writer *w, sqw_node_t *dir)
{
	uint32_t listed = 0, last_index = 0;
	size_t i = 0;
	int ret;

	free(dir->dindex);
	dir->dindex = NULL;
	dir->ndindex = 0;
	dir->dir_block = meta_writer_block(w->dirs);
	dir->dir_offset = meta_writer_offset(w->dirs);

	while (i < dir->nents) {
		const sqw_node_t *first = dir->ents[i]->node;
		uint32_t base = first->ino, block = (uint32_t)(first->ref >> 16);
		uint32_t run_bytes = 12;
		size_t j = i, k;
		uint8_t hdr[12];
		int split_index = 0;

		/* How many entries share this header. */
		while (j < dir->nents && j - i < DIR_RUN_MAX) {
			const struct sqw_dentry *d = dir->ents[j];
			int64_t delta = (int64_t)d->node->ino - base;

			if ((uint32_t)(d->node->ref >> 16) != block ||
			    delta > DIR_DELTA_MAX || delta < -DIR_DELTA_MAX)
				break;
			/* Large listings: an index point at least every 8 KiB. */
			if (j > i && listed + run_bytes + 8 + d->len - last_index >
				     SQW_META_SIZE) {
				split_index = 1;
				break;
			}
			run_bytes += 8 + d->len;
			j++;
		}
		(void)split_index;
		if (i > 0 && listed + 12 + 8 + dir->ents[i]->len - last_index >
				     SQW_META_SIZE) {
			/* This header is past 8 KiB since the last point. */
			ret = index_add(w, dir, listed, dir->ents[i]);
			if (ret)
				return ret;
			last_index = listed;
		}
		put_le32(hdr, (uint32_t)(j - i - 1));
		put_le32(hdr + 4, block);
		put_le32(hdr + 8, base);
		ret = meta_writer_append(w->dirs, hdr, 12);
		for (k = i; k < j && !ret; k++) {
			const struct sqw_dentry *d = dir->ents[k];
			uint8_t e[8];

			put_le16(e, (uint16_t)(d->node->ref & 0xffff));
			put_le16(e + 2, (uint16_t)(int16_t)((int64_t)d->node->ino - base));
			put_le16(e + 4, (uint16_t)dir_type(d->node));
			put_le16(e + 6, (uint16_t)(d->len - 1));
			ret = meta_writer_append(w->dirs, e, 8);
			if (!ret)
				ret = meta_writer_append(w->dirs, d->name, d->len);
		}
		if (ret)
			return writer_fail(w, ret, "allocating", dir);
		listed += run_bytes;
		i = j;
	}
	dir->dir_size = listed + 3;
	return 0;
}
