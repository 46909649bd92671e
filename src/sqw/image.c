/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * sqw_image_write: the passes that turn a tree into an image.
 *  1. sort entries, number inodes and list files in canonical order;
 *  2. data: blocks and fragments through the block processor;
 *  3. inodes and listings, children before parents;
 *  4. fragment, export, id and xattr tables, padding, superblock.
 */
#include <unistd.h>

#include "sqw/super.h"
#include "sqw/table.h"
#include "sqw/writer_i.h"

void sqw_image_opts_init(struct sqw_image_opts *o)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	memset(o, 0, sizeof(*o));
	o->jobs = n > 0 ? (unsigned)n : 1;
	o->all_time = -1;
	o->force_uid = -1;
	o->force_gid = -1;
}

static int files_push(struct writer *w, sqw_node_t *n)
{
	int ret = array_reserve((void **)&w->files, &w->files_cap,
				w->nfiles + 1, sizeof(*w->files));

	if (ret)
		return ret;
	w->files[w->nfiles++] = n;
	return 0;
}

static void count_node(struct writer *w, const sqw_node_t *n)
{
	switch (n->a.mode & S_IFMT) {
	case S_IFREG: w->st->files++; break;
	case S_IFDIR: w->st->dirs++; break;
	case S_IFLNK: w->st->symlinks++; break;
	case S_IFBLK: case S_IFCHR: w->st->devices++; break;
	default: w->st->ipcs++; break;
	}
}

/* Pass 1: children numbered before their directory; root last. */
static int number(struct writer *w, sqw_node_t *d, uint32_t gen)
{
	size_t i;
	int ret;

	for (i = 0; i < d->nents; i++) {
		sqw_node_t *c = d->ents[i]->node;

		if (node_is_dir(c)) {
			ret = number(w, c, gen);
			if (ret)
				return ret;
			continue;
		}
		if (c->visited == gen)
			continue;
		c->visited = gen;
		if (w->ninodes == UINT32_MAX - 1)
			return writer_fail(w, -EOVERFLOW, "too many inodes", c);
		c->ino = ++w->ninodes;
		count_node(w, c);
		if (node_is_reg(c) && files_push(w, c))
			return writer_fail(w, -ENOMEM, "allocating", c);
	}
	if (w->ninodes == UINT32_MAX - 1)
		return writer_fail(w, -EOVERFLOW, "too many inodes", d);
	d->ino = ++w->ninodes;
	d->visited = gen;
	count_node(w, d);
	for (i = 0; i < d->nents; i++)
		if (node_is_dir(d->ents[i]->node))
			d->ents[i]->node->parent_ino = d->ino;
	return 0;
}

/* Pass 3: inodes and listings in the same order. */
static int write_tree(struct writer *w, sqw_node_t *d, uint32_t gen)
{
	size_t i;
	int ret;

	for (i = 0; i < d->nents; i++) {
		sqw_node_t *c = d->ents[i]->node;

		if (node_is_dir(c))
			ret = write_tree(w, c, gen);
		else if (c->visited == gen)
			continue;
		else {
			c->visited = gen;
			ret = inode_write(w, c);
			w->by_ino[c->ino - 1] = c;
		}
		if (ret)
			return ret;
	}
	ret = dir_write_listing(w, d);
	if (!ret)
		ret = inode_write(w, d);
	w->by_ino[d->ino - 1] = d;
	return ret;
}

static int export_write(struct writer *w, uint64_t *start)
{
	uint8_t *raw = alloc_array(w->ninodes, 8);
	uint32_t i;
	int ret;

	if (!raw)
		return -ENOMEM;
	for (i = 0; i < w->ninodes; i++)
		put_le64(raw + 8 * i, w->by_ino[i]->ref);
	ret = table_write(&w->out, w->cmp, raw, (size_t)w->ninodes * 8, start);
	free(raw);
	return ret;
}

static int tables_write(struct writer *w, sqw_tree_t *tree,
			struct sqw_super *sb)
{
	sqw_node_t *root = sqw_tree_root(tree);
	int ret;

	ret = write_tree(w, root, tree_next_gen(tree));
	if (!ret)
		ret = meta_writer_flush(w->inodes);
	if (!ret)
		ret = meta_writer_flush(w->dirs);
	if (ret)
		return writer_fail(w, ret, "writing metadata", NULL);
	sb->root_inode = root->ref;
	ret = table_write_stream(&w->out, &w->inodes->out, &sb->inode_table_start);
	if (!ret)
		ret = table_write_stream(&w->out, &w->dirs->out,
					 &sb->directory_table_start);
	if (ret)
		return writer_fail(w, ret, "writing the image", NULL);
	/* Free the streams early: they can be large for big trees. */
	meta_writer_cleanup(w->inodes);
	meta_writer_cleanup(w->dirs);

	sb->fragments = (uint32_t)w->frag_count;
	sb->fragment_table_start = w->out.pos;
	if (w->frag_count)
		ret = table_write(&w->out, w->cmp, w->frag_table,
				  w->frag_count * 16, &sb->fragment_table_start);
	sb->lookup_table_start = UINT64_MAX;
	if (!ret && !(w->flags & SQW_OPT_NO_EXPORTS))
		ret = export_write(w, &sb->lookup_table_start);
	if (!ret)
		ret = id_table_write(w, &sb->id_table_start);
	if (!ret)
		ret = xattr_table_write(w, &sb->xattr_id_table_start);
	if (ret)
		return writer_fail(w, ret, "writing the image", NULL);
	sb->no_ids = (uint16_t)w->nids;
	w->st->ids = (uint32_t)w->nids;
	return 0;
}

static int finish(struct writer *w, struct sqw_super *sb, const uint8_t *opt,
		  size_t opt_len)
{
	static const uint8_t zeros[4096];
	uint8_t head[SQW_SUPER_SIZE + 2 + 64];
	uint64_t end;
	int ret;

	sb->bytes_used = w->out.pos;
	w->st->image_size = sb->bytes_used;
	end = sb->bytes_used;
	if (!(w->flags & SQW_OPT_NO_PAD) && end % 4096) {
		ret = outfile_append(&w->out, zeros, 4096 - end % 4096);
		if (ret)
			return writer_fail(w, ret, "writing the image", NULL);
	}
	ret = outfile_flush(&w->out);
	if (!ret && ftruncate(w->out.fd, (off_t)w->out.pos))
		ret = -errno;
	if (ret)
		return writer_fail(w, ret, "writing the image", NULL);
	super_encode(sb, head);
	if (opt_len) {
		put_le16(head + SQW_SUPER_SIZE, (uint16_t)(0x8000 | opt_len));
		memcpy(head + SQW_SUPER_SIZE + 2, opt, opt_len);
	}
	ret = pwrite_all(w->out.fd, head,
			 SQW_SUPER_SIZE + (opt_len ? 2 + opt_len : 0), 0);
	return ret ? writer_fail(w, ret, "writing the image", NULL) : 0;
}

static void writer_cleanup(struct writer *w)
{
	bp_destroy(w->bp);
	data_cleanup(w);
	xattr_cleanup(w);
	if (w->inodes)
		meta_writer_cleanup(w->inodes);
	if (w->dirs)
		meta_writer_cleanup(w->dirs);
	if (w->xattr_kv)
		meta_writer_cleanup(w->xattr_kv);
	free(w->inodes);
	free(w->dirs);
	free(w->xattr_kv);
	u64map_free(&w->id_map);
	free(w->ids);
	free(w->files);
	free(w->by_ino);
	buf_free(&w->scratch);
	outfile_cleanup(&w->out);
	sqw_compressor_destroy(w->cmp);
}

static unsigned default_queue(const struct sqw_image_opts *o, uint32_t bs)
{
	/*
	 * 4 MiB of input (8 MiB with the output buffers) keeps two workers
	 * as busy as 16 MiB did (same wall time, measured at 128K blocks on
	 * the bench corpus) and is a third of the seal's peak RSS less.
	 */
	unsigned q = (unsigned)((4u << 20) / bs);
	unsigned min = 4 * (o->jobs ? o->jobs : 1);

	return q < min ? min : q;
}

int sqw_image_write(sqw_tree_t *tree, const struct sqw_source_ops *ops,
		    void *src_ctx, int fd, const struct sqw_image_opts *opts,
		    struct sqw_stats *stats, struct sqw_error *err)
{
	struct writer w;
	struct sqw_super sb;
	struct sqw_error dummy_err;
	struct sqw_stats dummy_st;
	uint8_t opt[64];
	size_t opt_len;
	uint32_t bs = opts->comp.block_size;
	int ret;

	memset(&w, 0, sizeof(w));
	memset(&sb, 0, sizeof(sb));
	w.err = err ? err : &dummy_err;
	w.st = stats ? stats : &dummy_st;
	memset(w.err, 0, sizeof(*w.err));
	memset(w.st, 0, sizeof(*w.st));
	if (bs < 4096 || bs > (1u << 20) || (bs & (bs - 1)))
		return writer_fail(&w, -EINVAL, "block size must be a power of two from 4K to 1M", NULL);
	if ((opts->flags & SQW_OPT_NO_FRAGMENTS) &&
	    (opts->flags & SQW_OPT_ALWAYS_FRAGMENTS))
		return writer_fail(&w, -EINVAL, "no-fragments and always-fragments conflict", NULL);
	w.opts = opts;
	w.bs = bs;
	w.flags = opts->flags;
	w.ops = ops;
	w.src_ctx = src_ctx;
	w.cmp = sqw_compressor_create(&opts->comp, &ret);
	if (!w.cmp)
		return writer_fail(&w, ret, "creating the compressor", NULL);
	opt_len = sqw_comp_config_options(&opts->comp, opt);

	{
		sqw_node_t *dup = NULL;

		ret = tree_sort(sqw_tree_root(tree), &dup);
		if (ret) {
			writer_fail(&w, ret, "name listed twice", dup);
			goto out;
		}
	}
	ret = number(&w, sqw_tree_root(tree), tree_next_gen(tree));
	if (ret)
		goto out;
	w.st->inodes = w.ninodes;
	w.by_ino = alloc_array(w.ninodes, sizeof(*w.by_ino));
	w.inodes = malloc(sizeof(*w.inodes));
	w.dirs = malloc(sizeof(*w.dirs));
	w.xattr_kv = malloc(sizeof(*w.xattr_kv));
	ret = -ENOMEM;
	if (!w.by_ino || !w.inodes || !w.dirs || !w.xattr_kv)
		goto fail_alloc;
	meta_writer_init(w.inodes, w.cmp);
	meta_writer_init(w.dirs, w.cmp);
	meta_writer_init(w.xattr_kv, w.cmp);
	if (!(w.flags & SQW_OPT_REHEARSE)) {
		ret = outfile_init(&w.out, fd, SQW_SUPER_SIZE + (opt_len ? 2 + opt_len : 0));
		if (ret)
			goto fail_alloc;
	}
	w.bp = bp_create(opts->jobs, opts->queue ? opts->queue : default_queue(opts, bs),
			 w.cmp, bs, &ret);
	if (!w.bp)
		goto fail_alloc;

	ret = data_write(&w, sqw_tree_root(tree));
	bp_destroy(w.bp);
	w.bp = NULL;
	if (ret || (w.flags & SQW_OPT_REHEARSE))
		goto out;
	ret = tables_write(&w, tree, &sb);
	if (ret)
		goto out;
	sb.inodes = w.ninodes;
	sb.mkfs_time = opts->mkfs_time;
	sb.block_size = bs;
	sb.compression = (uint16_t)opts->comp.id;
	sb.flags = SQW_FLAG_DUPLICATES;
	if (w.flags & SQW_OPT_NO_DEDUP)
		sb.flags = 0;
	if (!(w.flags & SQW_OPT_NO_EXPORTS))
		sb.flags |= SQW_FLAG_EXPORTABLE;
	if (w.flags & SQW_OPT_NO_FRAGMENTS)
		sb.flags |= SQW_FLAG_NO_FRAGMENTS;
	if (w.flags & SQW_OPT_ALWAYS_FRAGMENTS)
		sb.flags |= SQW_FLAG_ALWAYS_FRAGMENTS;
	if (!w.nxattr_ids)
		sb.flags |= SQW_FLAG_NO_XATTRS;
	if (opt_len)
		sb.flags |= SQW_FLAG_COMP_OPTS;
	ret = finish(&w, &sb, opt, opt_len);
	if (opts->progress)
		opts->progress(opts->progress_arg, w.st);
	goto out;
fail_alloc:
	writer_fail(&w, ret, "allocating", NULL);
out:
	writer_cleanup(&w);
	return ret;
}
