/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Process limits the front ends raise before they start. */
#include <dlfcn.h>
#include <sys/resource.h>

#include "cli/cli.h"

/*
 * A deep tree keeps one directory descriptor open per level, and a mount
 * one per open staged file: take the hard limit, which needs no privilege.
 */
void cli_fd_limit_raise(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/*
 * glibc loads libgcc_s the first time a thread is cancelled (libfuse
 * cancels its workers at unmount) and aborts the process when it cannot:
 * a daemon out of descriptors then died at unmount, its tree unsealed.
 * Loaded now, the later dlopen finds it in memory and needs no descriptor.
 */
void cli_unwinder_preload(void)
{
	(void)dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NODELETE);
}
