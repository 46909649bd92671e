/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The id table: uids and gids share one list of at most 65535 values. */
#include "sqw/table.h"
#include "sqw/writer_i.h"

int id_lookup(struct writer *w, uint32_t id, uint16_t *index)
{
	uint64_t *v;
	int isnew, ret;

	v = u64map_get(&w->id_map, (uint64_t)id + 1, &isnew);
	if (!v)
		return -ENOMEM;
	if (isnew) {
		if (w->nids >= SQW_IDS_MAX) {
			/* Undo, so the map keeps matching the table. */
			*v = UINT64_MAX;
			return -EOVERFLOW;
		}
		ret = array_reserve((void **)&w->ids, &w->ids_cap, w->nids + 1,
				    sizeof(*w->ids));
		if (ret)
			return ret;
		*v = w->nids;
		w->ids[w->nids++] = id;
	}
	if (*v == UINT64_MAX)
		return -EOVERFLOW;
	*index = (uint16_t)*v;
	return 0;
}

int id_table_write(struct writer *w, uint64_t *start)
{
	uint8_t *raw;
	size_t i;
	int ret;

	if (w->nids == 0) {
		/* An image always has at least one id. */
		uint16_t idx;

		ret = id_lookup(w, 0, &idx);
		if (ret)
			return ret;
	}
	raw = alloc_array(w->nids, 4);
	if (!raw)
		return -ENOMEM;
	for (i = 0; i < w->nids; i++)
		put_le32(raw + 4 * i, w->ids[i]);
	ret = table_write(&w->out, w->mcmp, raw, w->nids * 4, start);
	free(raw);
	return ret;
}
