/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer harness for the tar reader: the input is a tar stream (plain or
 * compressed, anything libarchive reads) fed through the same calls as
 * `sqfs-pack --tar` (tar_read into a tree and a spool, then
 * sqw_image_write), the image going to a memory file.  Built only with
 * -Dfuzz=enabled and clang; see tools/test.sh --mode=fuzz.
 *
 *   build-fuzz/tests/fuzz/fuzz_tar -max_len=65536 -rss_limit_mb=2048 \
 *       -dict=tests/fuzz/tar.dict \
 *       CORPUS_DIR tests/fuzz/corpus
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pack/pack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int in_fd = -1, out_fd = -1;
static const char *spool_dir;
static sqw_comp_config_t comp;

static void setup(void)
{
	const char *err = NULL;

	in_fd = memfd_create("fuzz-tar-in", MFD_CLOEXEC);
	out_fd = memfd_create("fuzz-tar-image", MFD_CLOEXEC);
	if (in_fd < 0 || out_fd < 0) {
		perror("memfd_create");
		abort();
	}
	spool_dir = getenv("FUZZ_SPOOL_DIR");
	if (!spool_dir)
		spool_dir = access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm";
	/*
	 * A small block size so that small inputs still make several blocks,
	 * fragments and sparse blocks; a fast codec.
	 */
	if (sqw_comp_config_parse(&comp, "gzip:1", 4096, &err)) {
		fprintf(stderr, "fuzz_tar: compressor: %s\n", err ? err : "?");
		abort();
	}
	comp.block_size = 4096;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sqw_image_opts opts;
	struct pack_err perr;
	struct sqw_stats st;
	struct sqw_error err;
	struct spool *sp;
	sqw_tree_t *tree;
	int ret;

	if (in_fd < 0)
		setup();
	if (ftruncate(in_fd, 0) || ftruncate(out_fd, 0) ||
	    pwrite(in_fd, data, size, 0) != (ssize_t)size ||
	    lseek(in_fd, 0, SEEK_SET) != 0) {
		perror("fuzz_tar: memfd");
		abort();
	}
	tree = sqw_tree_create();
	sp = spool_create(spool_dir, &ret);
	if (!tree || !sp) {
		fprintf(stderr, "fuzz_tar: setup failed\n");
		abort();
	}
	sqw_image_opts_init(&opts);
	opts.comp = comp;
	opts.jobs = 0;		/* serial: deterministic and cheap */
	opts.mkfs_time = 1234567;
	/* Compressed archives are spooled: their blocks go through ahead.c. */
	if (spool_ahead_start(sp, spool_dir, &opts, NULL)) {
		fprintf(stderr, "fuzz_tar: setup failed\n");
		abort();
	}
	memset(&perr, 0, sizeof(perr));
	ret = tar_read(in_fd, tree, sp, 1, 1234567, NULL, NULL, &perr);
	/*
	 * A resource cap of the harness, not of sqfs-pack: sparse members of
	 * up to 4 TiB are valid and take their time in blocks (4 KiB here);
	 * past 256 MiB of apparent data, reading the archive was the test.
	 */
	if (!ret && sqw_tree_data_size(tree) <= (256u << 20)) {
		ret = sqw_image_write(tree, &spool_source_ops, sp, out_fd, &opts,
				      &st, &err);
	}
	pack_err_clear(&perr);
	sqw_tree_destroy(tree);
	spool_destroy(sp);
	return 0;
}
