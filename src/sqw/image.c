/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * sqw_image_write: the passes that turn a tree into an image.  Each walks
 * the source's tree in canonical order (entries sorted by name), listing
 * each directory again: the writer keeps only what it computed per inode.
 *  1. number inodes and list files;
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

static void count_node(struct writer *w, uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: w->st->files++; break;
	case S_IFDIR: w->st->dirs++; break;
	case S_IFLNK: w->st->symlinks++; break;
	case S_IFBLK: case S_IFCHR: w->st->devices++; break;
	default: w->st->ipcs++; break;
	}
}

static int file_add(struct writer *w, const struct sqw_entry *e)
{
	uint64_t size = e->a.size, *v;
	struct wfile *f;
	int isnew;

	if (array_reserve((void **)&w->files, &w->files_cap, w->nfiles + 1,
			  sizeof(*w->files)))
		return -ENOMEM;
	f = &w->files[w->nfiles++];
	memset(f, 0, sizeof(*f));
	f->src = e->src;
	f->size = size;
	if (size == 0)
		return 0;
	v = u64map_get(&w->size_count, size + 1, &isnew);
	if (!v)
		return -ENOMEM;
	(*v)++;
	if (file_uses_frag(w, size)) {
		v = u64map_get(&w->tail_count, size % w->bs + 1, &isnew);
		if (!v)
			return -ENOMEM;
		(*v)++;
	}
	return 0;
}

/*
 * Pass 1: children numbered before their directory, root last; regular
 * files listed in that order; directories' numbers kept in pre-order.
 */
static int number(struct writer *w, void *dir, size_t depth)
{
	size_t seq = w->dir_next, i;
	struct sqw_entry e;
	struct wlist *l;
	int ret;

	ret = walk_list(w, dir, depth, &l);
	if (ret)
		return ret;
	for (i = 0; i < l->n; i++) {
		void *node = l->e[i].node;
		struct wlink *k = NULL;

		ret = walk_get(w, node, &e);
		if (ret)
			return ret;
		if (S_ISDIR(e.a.mode)) {
			ret = number(w, node, depth + 1);
			if (ret)
				return ret;
			continue;
		}
		ret = walk_first(w, &e, &k);
		if (ret < 0)
			return ret;
		if (k)
			k->nlink++;	/* every name counts */
		if (!ret)
			continue;
		if (w->ninodes == UINT32_MAX - 1)
			return writer_fail(w, -EOVERFLOW, "too many inodes", node);
		++w->ninodes;
		if (k)
			k->ino = w->ninodes;
		count_node(w, e.a.mode);
		if (S_ISREG(e.a.mode) && file_add(w, &e))
			return writer_fail(w, -ENOMEM, "allocating", node);
	}
	if (w->ninodes == UINT32_MAX - 1)
		return writer_fail(w, -EOVERFLOW, "too many inodes", dir);
	w->dirs_seen[seq].ino = ++w->ninodes;
	count_node(w, S_IFDIR);
	return 0;
}

struct wpos {
	size_t file;
	uint32_t ino;
};

/* Inode ino's entry of the export table: inodes come in number order. */
static int export_add(struct writer *w, uint32_t ino, uint64_t ref, const void *node)
{
	uint8_t e[8];
	int ret;

	if (!w->exports)
		return 0;
	if ((ino - 1) % (SQW_META_SIZE / 8) == 0)
		w->export_blocks[(ino - 1) / (SQW_META_SIZE / 8)] = meta_writer_block(w->exports);
	put_le64(e, ref);
	ret = meta_writer_append(w->exports, e, 8);
	return ret ? writer_fail(w, ret, "allocating", node) : 0;
}

/* Room in l for what the inode pass adds to each entry. */
static int list_extend(struct wlist *l)
{
	if (array_reserve((void **)&l->ino, &l->ino_cap, l->n, sizeof(*l->ino)) ||
	    array_reserve((void **)&l->ref, &l->ref_cap, l->n, sizeof(*l->ref)) ||
	    array_reserve((void **)&l->type, &l->type_cap, l->n, sizeof(*l->type)))
		return -ENOMEM;
	return 0;
}

/* Pass 3: inodes and listings in the same order; dir's number and ref out. */
static int write_dir(struct writer *w, void *dir, size_t depth, uint32_t parent_ino,
		     struct wpos *pos, uint32_t *ino_out, uint64_t *ref_out)
{
	size_t seq = w->dir_next, i;
	struct sqw_entry e;
	uint32_t ino;
	struct wdir wd;
	struct winode in;
	struct wlist *l;
	int ret;

	memset(&wd, 0, sizeof(wd));
	ret = walk_list(w, dir, depth, &l);
	if (ret)
		return ret;
	if (list_extend(l))
		return writer_fail(w, -ENOMEM, "allocating", dir);
	ino = w->dirs_seen[seq].ino;
	for (i = 0; i < l->n; i++) {
		void *node = l->e[i].node;
		struct wlink *k = NULL;

		ret = walk_get(w, node, &e);
		if (ret)
			goto out;
		l->type[i] = dir_entry_type(e.a.mode);
		if (S_ISDIR(e.a.mode)) {
			wd.nsubdirs++;
			ret = write_dir(w, node, depth + 1, ino, pos, &l->ino[i], &l->ref[i]);
			if (ret)
				goto out;
			continue;
		}
		ret = walk_first(w, &e, &k);
		if (ret < 0)
			goto out;
		if (!ret) {	/* a later name: the inode is written */
			l->ino[i] = k->ino;
			l->ref[i] = k->ref;
			continue;
		}
		memset(&in, 0, sizeof(in));
		in.e = &e;
		in.ino = ++pos->ino;
		in.nlink = k ? k->nlink : 1;
		if (S_ISREG(e.a.mode)) {
			if (pos->file >= w->nfiles || w->files[pos->file].size != e.a.size) {
				ret = writer_fail(w, -ESTALE, "the tree changed during the write",
						  node);
				goto out;
			}
			in.f = &w->files[pos->file++];
		}
		ret = inode_write(w, &in);
		if (ret)
			goto out;
		l->ino[i] = in.ino;
		l->ref[i] = in.ref;
		if (k)
			k->ref = in.ref;
		ret = export_add(w, in.ino, in.ref, node);
		if (ret)
			goto out;
	}
	ret = dir_write_listing(w, l, &wd, dir);
	if (!ret)
		ret = walk_get(w, dir, &e);
	if (ret)
		goto out;
	wd.parent_ino = parent_ino;
	memset(&in, 0, sizeof(in));
	in.e = &e;
	in.ino = ++pos->ino;
	if (in.ino != ino) {
		ret = writer_fail(w, -ESTALE, "the tree changed during the write", dir);
		goto out;
	}
	in.d = &wd;
	ret = inode_write(w, &in);
	*ino_out = in.ino;
	*ref_out = in.ref;
	if (!ret)
		ret = export_add(w, in.ino, in.ref, dir);
out:
	free(wd.index);
	return ret;
}

static int export_write(struct writer *w, uint64_t *start)
{
	size_t n = ((size_t)w->ninodes + SQW_META_SIZE / 8 - 1) / (SQW_META_SIZE / 8), i;
	uint64_t base = w->out.pos;
	uint8_t *idx;
	int ret;

	ret = meta_writer_flush(w->exports);
	if (ret)
		return ret;
	ret = outfile_append(&w->out, w->exports->out.data, w->exports->out.len);
	if (ret)
		return ret;
	idx = alloc_array(n, 8);
	if (!idx)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		put_le64(idx + 8 * i, base + w->export_blocks[i]);
	*start = w->out.pos;
	ret = outfile_append(&w->out, idx, n * 8);
	free(idx);
	return ret;
}

static int tables_write(struct writer *w, struct sqw_super *sb)
{
	struct wpos pos = { 0 };
	uint64_t root_ref = 0;
	uint32_t root_ino;
	int ret;

	/* The inode table starts here and is drained into the image as it grows. */
	sb->inode_table_start = w->out.pos;
	w->pass++;
	w->dir_next = 0;
	/*
	 * The root's parent: one past the last inode, as mksquashfs has it.  The
	 * kernel gives it as the d_ino of "..", and glibc's readdir skips an
	 * entry whose d_ino is 0: with 0, `ls -a /` would show no "..".
	 */
	ret = write_dir(w, w->root.node, 0, w->ninodes + 1, &pos, &root_ino, &root_ref);
	if (ret)
		return ret;
	ret = meta_writer_flush(w->inodes);
	if (!ret)
		ret = meta_writer_flush(w->dirs);
	if (ret)
		return writer_fail(w, ret, "writing metadata", NULL);
	sb->root_inode = root_ref;
	ret = meta_writer_drain(w->inodes, &w->out);
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
		ret = table_write(&w->out, w->mcmp, w->frag_table,
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
	size_t i;

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
	for (i = 0; i < w->nlists; i++) {
		free(w->lists[i]->e);
		free(w->lists[i]->ino);
		free(w->lists[i]->ref);
		free(w->lists[i]->type);
		free(w->lists[i]);
	}
	free(w->lists);
	free(w->files);
	free(w->dirs_seen);
	u64map_free(&w->link_map);
	free(w->links);
	if (w->exports)
		meta_writer_cleanup(w->exports);
	free(w->exports);
	free(w->export_blocks);
	buf_free(&w->scratch);
	outfile_cleanup(&w->out);
	sqw_compressor_destroy(w->cmp);
	sqw_compressor_destroy(w->mcmp);
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

int sqw_image_write_walk(const struct sqw_walk_ops *walk, void *walk_ctx,
			 const struct sqw_source_ops *ops, void *src_ctx, int fd,
			 const struct sqw_image_opts *opts, struct sqw_stats *stats,
			 struct sqw_error *err)
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
	w.walk = walk;
	w.walk_ctx = walk_ctx;
	w.ops = ops;
	w.src_ctx = src_ctx;
	w.cmp = sqw_compressor_create(&opts->comp, &ret);
	if (!w.cmp)
		return writer_fail(&w, ret, "creating the compressor", NULL);
	w.mcmp = sqw_compressor_create_meta(&opts->comp, &ret);
	if (!w.mcmp) {
		writer_fail(&w, ret, "creating the compressor", NULL);
		goto out;
	}
	opt_len = sqw_comp_config_options(&opts->comp, opt);

	ret = walk->root(walk_ctx, &w.root);
	if (ret) {
		writer_fail(&w, ret, "listing", NULL);
		goto out;
	}
	if (!S_ISDIR(w.root.a.mode)) {
		ret = writer_fail(&w, -ENOTDIR, "the root is not a directory", NULL);
		goto out;
	}
	w.pass++;
	w.numbering = 1;
	ret = number(&w, w.root.node, 0);
	w.numbering = 0;
	if (ret)
		goto out;
	w.st->inodes = w.ninodes;
	w.inodes = malloc(sizeof(*w.inodes));
	w.dirs = malloc(sizeof(*w.dirs));
	w.xattr_kv = malloc(sizeof(*w.xattr_kv));
	ret = -ENOMEM;
	if (!w.inodes || !w.dirs || !w.xattr_kv)
		goto fail_alloc;
	if (!(w.flags & (SQW_OPT_NO_EXPORTS | SQW_OPT_REHEARSE))) {
		w.exports = calloc(1, sizeof(*w.exports));
		w.export_blocks = alloc_array((size_t)w.ninodes / (SQW_META_SIZE / 8) + 1,
					      sizeof(*w.export_blocks));
		if (!w.exports || !w.export_blocks)
			goto fail_alloc;
		meta_writer_init(w.exports, w.mcmp);
	}
	meta_writer_init(w.inodes, w.mcmp);
	meta_writer_init(w.dirs, w.mcmp);
	meta_writer_init(w.xattr_kv, w.mcmp);
	if (!(w.flags & SQW_OPT_REHEARSE)) {
		ret = outfile_init(&w.out, fd, SQW_SUPER_SIZE + (opt_len ? 2 + opt_len : 0));
		if (ret)
			goto fail_alloc;
	}
	w.bp = bp_create(opts->jobs, opts->queue ? opts->queue : default_queue(opts, bs),
			 w.cmp, bs, &ret);
	if (!w.bp) {
		/* EAGAIN here is a thread limit, not memory: say which */
		writer_fail(&w, ret, ret == -ENOMEM ? "allocating" :
			    "starting the compression threads", NULL);
		goto out;
	}

	ret = data_write(&w);
	bp_destroy(w.bp);
	w.bp = NULL;
	if (ret || (w.flags & SQW_OPT_REHEARSE))
		goto out;
	ret = tables_write(&w, &sb);
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
	if (ret && w.walk)
		walk_error_path(&w);
	writer_cleanup(&w);
	return ret;
}

int sqw_image_write(sqw_tree_t *tree, const struct sqw_source_ops *ops,
		    void *src_ctx, int fd, const struct sqw_image_opts *opts,
		    struct sqw_stats *stats, struct sqw_error *err)
{
	return sqw_image_write_walk(&tree_walk_ops, tree, ops, src_ctx, fd, opts,
				    stats, err);
}
