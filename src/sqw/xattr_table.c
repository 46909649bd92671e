/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Extended attributes (squashfs-format.md §10).  Each distinct key/value
 * set is stored once; inodes with the same set share its id.  A value
 * that an earlier pair already wrote is stored once too: later pairs point
 * at it out of line (metadata blocks are compressed one at a time, so a
 * repeated large value would otherwise cost its full size every time).
 */
#include <xxhash.h>

#include "sqw/table.h"
#include "sqw/writer_i.h"

static int xattr_cmp(const void *a, const void *b)
{
	const struct sqw_xattr *x = a, *y = b;
	size_t l = x->name_len < y->name_len ? x->name_len : y->name_len;
	int r;

	if (x->prefix != y->prefix)
		return (int)x->prefix - (int)y->prefix;
	r = memcmp(x->name, y->name, l);
	return r ? r : (int)x->name_len - (int)y->name_len;
}

/* The source's keys split by prefix; names and values kept in w->xl_data. */
static int xattr_put(void *arg, const char *key, const void *value, size_t size)
{
	struct writer *w = arg;
	struct sqw_xattr *x;
	size_t plen, nlen;
	uint8_t prefix;
	int ret;

	ret = xattr_key_split(key, size, &prefix, &plen, &nlen);
	if (ret)
		return ret;
	ret = array_reserve((void **)&w->xl, &w->xl_cap, w->nxl + 1, sizeof(*w->xl));
	if (ret)
		return ret;
	x = &w->xl[w->nxl];
	x->prefix = prefix;
	x->name_len = (uint16_t)nlen;
	x->value_len = (uint32_t)size;
	/* Offsets for now: the buffer may still move. */
	x->name = (char *)(uintptr_t)w->xl_data.len;
	ret = buf_append(&w->xl_data, key + plen, nlen);
	x->value = (uint8_t *)(uintptr_t)w->xl_data.len;
	if (!ret)
		ret = buf_append(&w->xl_data, value, size);
	if (ret)
		return ret;
	w->nxl++;
	return 0;
}

/* The set in canonical form: sorted keys, each type/name/value. */
static int serialise(struct writer *w, struct buf *b)
{
	size_t i;
	int ret = 0;

	qsort(w->xl, w->nxl, sizeof(*w->xl), xattr_cmp);
	b->len = 0;
	for (i = 0; i < w->nxl && !ret; i++) {
		const struct sqw_xattr *x = &w->xl[i];
		uint8_t h[4];

		if (i > 0 && xattr_cmp(x - 1, x) == 0)
			return -EEXIST;
		put_le16(h, x->prefix);
		put_le16(h + 2, x->name_len);
		ret = buf_append(b, h, 4);
		if (!ret)
			ret = buf_append(b, x->name, x->name_len);
		put_le32(h, x->value_len);
		if (!ret)
			ret = buf_append(b, h, 4);
		if (!ret)
			ret = buf_append(b, x->value, x->value_len);
	}
	return ret;
}

/* Values up to this long stay inline: a reference is {vsize = 8, ref}. */
#define SHARE_MIN 9

/*
 * The value at off in xattr_sets: an earlier copy's entry, or NULL and in
 * *slot the map's place for it.
 */
static const struct xattr_val *value_find(struct writer *w, uint64_t off, uint32_t len,
					  uint64_t **slot)
{
	const uint8_t *v = w->xattr_sets.data + off;
	uint64_t key = (XXH3_64bits(v, len) ^ len) | 1;
	const struct xattr_val *x;
	int isnew;

	for (;;) {
		*slot = u64map_get(&w->xattr_vmap, key, &isnew);
		if (!*slot || isnew)
			return NULL;
		x = &w->xattr_vals[**slot - 1];
		if (x->len == len && !memcmp(w->xattr_sets.data + x->off, v, len))
			return x;
		key = (key * 0x100000001B3ull) | 1;	/* collision: probe on */
	}
}

/* The pairs of the new set at base in xattr_sets into the kv stream. */
static int kv_write(struct writer *w, uint64_t base)
{
	const struct xattr_val *dup;
	struct meta_writer *kv = w->xattr_kv;
	uint64_t pos = base, *slot;
	struct xattr_val *nv;
	uint8_t h[12];
	size_t i;
	int ret;

	for (i = 0; i < w->nxl; i++) {
		const struct sqw_xattr *x = &w->xl[i];

		pos += 4 + x->name_len + 4;	/* at the value's bytes */
		dup = NULL;
		slot = NULL;
		if (x->value_len >= SHARE_MIN) {
			dup = value_find(w, pos, x->value_len, &slot);
			if (!dup && !slot)
				return -ENOMEM;
		}
		put_le16(h, (uint16_t)(x->prefix | (dup ? SQW_XATTR_VALUE_OOL : 0)));
		put_le16(h + 2, x->name_len);
		ret = meta_writer_append(kv, h, 4);
		if (!ret)
			ret = meta_writer_append(kv, x->name, x->name_len);
		if (ret)
			return ret;
		if (dup) {
			put_le32(h, 8);
			put_le64(h + 4, dup->ref);
			ret = meta_writer_append(kv, h, 12);
		} else {
			if (slot) {
				ret = array_reserve((void **)&w->xattr_vals, &w->xattr_vals_cap,
						    w->nxattr_vals + 1, sizeof(*nv));
				if (ret)
					return ret;
				nv = &w->xattr_vals[w->nxattr_vals++];
				nv->off = pos;
				nv->len = x->value_len;
				nv->ref = meta_writer_ref(kv);
				*slot = w->nxattr_vals;
			}
			put_le32(h, x->value_len);
			ret = meta_writer_append(kv, h, 4);
			if (!ret)
				ret = meta_writer_append(kv, x->value, x->value_len);
		}
		if (ret)
			return ret;
		pos += x->value_len;
	}
	return 0;
}

int xattr_lookup(struct writer *w, const struct sqw_entry *ent, uint32_t *id)
{
	struct buf *b = &w->scratch;
	uint64_t key, base, *v;
	uint32_t size = 0;
	uint8_t *e;
	size_t i;
	int isnew, ret;

	*id = SQW_NO_XATTR;
	w->nxl = 0;
	w->xl_data.len = 0;
	ret = w->walk->xattrs(w->walk_ctx, ent->node, xattr_put, w);
	if (ret || w->nxl == 0)
		return ret;
	for (i = 0; i < w->nxl; i++) {
		w->xl[i].name = (char *)w->xl_data.data + (uintptr_t)w->xl[i].name;
		w->xl[i].value = w->xl_data.data + (uintptr_t)w->xl[i].value;
	}
	ret = serialise(w, b);
	if (ret)
		return ret;
	key = XXH3_64bits(b->data, b->len) | 1;
	for (;;) {
		v = u64map_get(&w->xattr_map, key, &isnew);
		if (!v)
			return -ENOMEM;
		if (isnew)
			break;
		{
			uint64_t off = w->xattr_set_off[2 * (*v - 1)];
			uint64_t len = w->xattr_set_off[2 * (*v - 1) + 1];

			if (len == b->len && !memcmp(w->xattr_sets.data + off,
						     b->data, len)) {
				*id = (uint32_t)(*v - 1);
				return 0;
			}
		}
		key = (key * 0x100000001B3ull) | 1;	/* collision: probe on */
	}
	*v = w->nxattr_ids + 1;
	ret = array_reserve((void **)&w->xattr_set_off, &w->xattr_set_cap,
			    2 * (w->nxattr_ids + 1), 8);
	if (!ret)
		ret = array_reserve((void **)&w->xattr_ids, &w->xattr_ids_cap,
				    16 * (w->nxattr_ids + 1), 1);
	if (ret)
		return ret;
	base = w->xattr_sets.len;
	w->xattr_set_off[2 * w->nxattr_ids] = base;
	w->xattr_set_off[2 * w->nxattr_ids + 1] = b->len;
	ret = buf_append(&w->xattr_sets, b->data, b->len);
	if (ret)
		return ret;

	e = w->xattr_ids + 16 * w->nxattr_ids;
	put_le64(e, meta_writer_ref(w->xattr_kv));
	ret = kv_write(w, base);
	if (ret)
		return ret;
	for (i = 0; i < w->nxl; i++)
		size += (uint32_t)(strlen(xattr_prefixes[w->xl[i].prefix]) +
				   w->xl[i].name_len + 1 + w->xl[i].value_len);
	put_le32(e + 8, (uint32_t)w->nxl);
	put_le32(e + 12, size);
	*id = (uint32_t)w->nxattr_ids++;
	w->st->xattr_sets = w->nxattr_ids;
	return 0;
}

int xattr_table_write(struct writer *w, uint64_t *start)
{
	uint64_t kv_start;
	uint8_t hdr[16];
	int ret;

	*start = UINT64_MAX;
	if (w->nxattr_ids == 0)
		return 0;
	ret = meta_writer_flush(w->xattr_kv);
	if (ret)
		return ret;
	ret = table_write_stream(&w->out, &w->xattr_kv->out, &kv_start);
	if (ret)
		return ret;
	put_le64(hdr, kv_start);
	put_le32(hdr + 8, (uint32_t)w->nxattr_ids);
	put_le32(hdr + 12, 0);
	return table_write_hdr(&w->out, w->mcmp, w->xattr_ids,
			       w->nxattr_ids * 16, hdr, sizeof(hdr), start);
}

void xattr_cleanup(struct writer *w)
{
	u64map_free(&w->xattr_map);
	u64map_free(&w->xattr_vmap);
	free(w->xattr_vals);
	free(w->xattr_ids);
	free(w->xattr_set_off);
	buf_free(&w->xattr_sets);
	free(w->xl);
	buf_free(&w->xl_data);
}
