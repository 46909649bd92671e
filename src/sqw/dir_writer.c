/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Directory listings (squashfs-format.md §6): runs of one header and up to
 * 256 entries, plus index points for large directories.  Every child's
 * inode is written before its parent's listing.
 */
#include "sqw/writer_i.h"

#define DIR_RUN_MAX 256
#define DIR_DELTA_MAX 32767

uint8_t dir_entry_type(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFDIR: return 1;
	case S_IFREG: return 2;
	case S_IFLNK: return 3;
	case S_IFBLK: return 4;
	case S_IFCHR: return 5;
	case S_IFIFO: return 6;
	default: return 7;
	}
}

static int index_add(struct writer *w, struct wdir *dir, uint32_t at,
		     const char *name, size_t len, const void *node)
{
	struct sqw_dir_index *d;
	int ret = array_reserve((void **)&dir->index, &dir->index_cap, dir->nindex + 1,
				sizeof(*dir->index));

	if (ret)
		return writer_fail(w, ret, "allocating", node);
	d = &dir->index[dir->nindex++];
	d->index = at;
	d->start_block = meta_writer_block(w->dirs);
	d->name_len = (uint32_t)len;
	d->name = name;
	return 0;
}

int dir_write_listing(struct writer *w, const struct wlist *l, struct wdir *dir,
		      const void *node)
{
	uint32_t listed = 0, last_index = 0;
	size_t i = 0;
	int ret;

	dir->nindex = 0;
	dir->block = meta_writer_block(w->dirs);
	dir->offset = meta_writer_offset(w->dirs);

	while (i < l->n) {
		uint32_t base = l->ino[i], block = (uint32_t)(l->ref[i] >> 16);
		size_t first_len = strlen(l->e[i].name);
		uint32_t run_bytes = 12;
		size_t j = i, k;
		uint8_t hdr[12];

		/* How many entries share this header. */
		while (j < l->n && j - i < DIR_RUN_MAX) {
			int64_t delta = (int64_t)l->ino[j] - base;
			size_t len = j == i ? first_len : strlen(l->e[j].name);

			if ((uint32_t)(l->ref[j] >> 16) != block ||
			    delta > DIR_DELTA_MAX || delta < -DIR_DELTA_MAX)
				break;
			/* Large listings: an index point at least every 8 KiB. */
			if (j > i && listed + run_bytes + 8 + len - last_index > SQW_META_SIZE)
				break;
			run_bytes += 8 + (uint32_t)len;
			j++;
		}
		if (i > 0 && listed + 12 + 8 + first_len - last_index > SQW_META_SIZE) {
			/* This header is past 8 KiB since the last point. */
			ret = index_add(w, dir, listed, l->e[i].name, first_len, node);
			if (ret)
				return ret;
			last_index = listed;
		}
		put_le32(hdr, (uint32_t)(j - i - 1));
		put_le32(hdr + 4, block);
		put_le32(hdr + 8, base);
		ret = meta_writer_append(w->dirs, hdr, 12);
		for (k = i; k < j && !ret; k++) {
			size_t len = strlen(l->e[k].name);
			uint8_t e[8];

			put_le16(e, (uint16_t)(l->ref[k] & 0xffff));
			put_le16(e + 2, (uint16_t)(int16_t)((int64_t)l->ino[k] - base));
			put_le16(e + 4, l->type[k]);
			put_le16(e + 6, (uint16_t)(len - 1));
			ret = meta_writer_append(w->dirs, e, 8);
			if (!ret)
				ret = meta_writer_append(w->dirs, l->e[k].name, len);
		}
		if (ret)
			return writer_fail(w, ret, "allocating", node);
		listed += run_bytes;
		i = j;
	}
	dir->size = listed + 3;
	return 0;
}
