/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "sqw/super.h"
#include "util/util.h"

void super_encode(const struct sqw_super *s, uint8_t out[SQW_SUPER_SIZE])
{
	put_le32(out + 0, SQW_MAGIC);
	put_le32(out + 4, s->inodes);
	put_le32(out + 8, s->mkfs_time);
	put_le32(out + 12, s->block_size);
	put_le32(out + 16, s->fragments);
	put_le16(out + 20, s->compression);
	put_le16(out + 22, (uint16_t)__builtin_ctz(s->block_size));
	put_le16(out + 24, s->flags);
	put_le16(out + 26, s->no_ids);
	put_le16(out + 28, 4);
	put_le16(out + 30, 0);
	put_le64(out + 32, s->root_inode);
	put_le64(out + 40, s->bytes_used);
	put_le64(out + 48, s->id_table_start);
	put_le64(out + 56, s->xattr_id_table_start);
	put_le64(out + 64, s->inode_table_start);
	put_le64(out + 72, s->directory_table_start);
	put_le64(out + 80, s->fragment_table_start);
	put_le64(out + 88, s->lookup_table_start);
}
