/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The 96-byte superblock (squashfs-format.md §2). */
#ifndef SQW_SUPER_H
#define SQW_SUPER_H

#include <stdint.h>

#define SQW_MAGIC 0x73717368u
#define SQW_SUPER_SIZE 96

enum {
	SQW_FLAG_NO_FRAGMENTS = 0x0010,
	SQW_FLAG_ALWAYS_FRAGMENTS = 0x0020,
	SQW_FLAG_DUPLICATES = 0x0040,
	SQW_FLAG_EXPORTABLE = 0x0080,
	SQW_FLAG_NO_XATTRS = 0x0200,
	SQW_FLAG_COMP_OPTS = 0x0400,
};

struct sqw_super {
	uint32_t inodes;
	uint32_t mkfs_time;
	uint32_t block_size;
	uint32_t fragments;
	uint16_t compression;
	uint16_t flags;
	uint16_t no_ids;
	uint64_t root_inode;
	uint64_t bytes_used;
	uint64_t id_table_start;
	uint64_t xattr_id_table_start;
	uint64_t inode_table_start;
	uint64_t directory_table_start;
	uint64_t fragment_table_start;
	uint64_t lookup_table_start;
};

void super_encode(const struct sqw_super *s, uint8_t out[SQW_SUPER_SIZE]);

#endif
