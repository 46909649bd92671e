/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer harness for pseudo definitions (sqfs-pack --pseudo-file,
 * sqfs-stage -o pseudo_file): the input is a pseudo file, parsed as
 * sqfs-pack parses it, applied to a small tree holding no file data and
 * written as an image to a memory file.  Built only with -Dfuzz=enabled and
 * clang; see tools/test.sh --mode=fuzz.
 *
 *   build-fuzz/tests/fuzz/fuzz_pseudo -max_len=4096 -dict=tests/fuzz/pseudo.dict \
 *       CORPUS_DIR tests/fuzz/corpus-pseudo
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pack/pack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int in_fd = -1, out_fd = -1;
static char in_path[64];
static sqw_comp_config_t comp;

static void setup(void)
{
	const char *err = NULL;

	in_fd = memfd_create("fuzz-pseudo-in", MFD_CLOEXEC);
	out_fd = memfd_create("fuzz-pseudo-image", MFD_CLOEXEC);
	if (in_fd < 0 || out_fd < 0) {
		perror("memfd_create");
		abort();
	}
	snprintf(in_path, sizeof(in_path), "/proc/self/fd/%d", in_fd);
	if (sqw_comp_config_parse(&comp, "gzip:1", 4096, &err)) {
		fprintf(stderr, "fuzz_pseudo: compressor: %s\n", err ? err : "?");
		abort();
	}
	comp.block_size = 4096;
}

/* A tree like an input's: directories, a symlink, a device, no file data. */
static sqw_tree_t *base_tree(void)
{
	sqw_tree_t *t = sqw_tree_create();
	struct sqw_attr dir = { .mode = S_IFDIR | 0755, .mtime = 1 };
	struct sqw_attr lnk = { .mode = S_IFLNK | 0777, .mtime = 2 };
	struct sqw_attr dev = { .mode = S_IFCHR | 0600, .mtime = 3, .rdev = 0x0501 };
	sqw_node_t *etc, *n;

	if (!t)
		return NULL;
	sqw_node_set_attr(sqw_tree_root(t), &dir);
	if (sqw_tree_add(t, sqw_tree_root(t), "etc", 3, &dir, NULL, &etc) ||
	    sqw_tree_add(t, etc, "link", 4, &lnk, "../bin", &n) ||
	    sqw_tree_add(t, sqw_tree_root(t), "console", 7, &dev, NULL, &n)) {
		sqw_tree_destroy(t);
		return NULL;
	}
	return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pack_pseudo ps = { 0 };
	struct sqw_image_opts opts;
	struct pack_err perr;
	struct sqw_stats st;
	struct sqw_error err;
	sqw_tree_t *tree;
	char msg[512];

	if (in_fd < 0)
		setup();
	if (ftruncate(in_fd, 0) || ftruncate(out_fd, 0) ||
	    pwrite(in_fd, data, size, 0) != (ssize_t)size) {
		perror("fuzz_pseudo: memfd");
		abort();
	}
	tree = base_tree();
	if (!tree) {
		fprintf(stderr, "fuzz_pseudo: setup failed\n");
		abort();
	}
	memset(&perr, 0, sizeof(perr));
	if (!pack_pseudo_add_file(&ps, in_path, msg, sizeof(msg)) &&
	    !pack_pseudo_apply(&ps, tree, 1234567, NULL, &perr)) {
		sqw_image_opts_init(&opts);
		opts.comp = comp;
		opts.jobs = 0;
		opts.mkfs_time = 1234567;
		(void)sqw_image_write(tree, &spool_source_ops, NULL, out_fd, &opts, &st, &err);
	}
	pack_pseudo_free(&ps);
	pack_err_clear(&perr);
	sqw_tree_destroy(tree);
	return 0;
}
