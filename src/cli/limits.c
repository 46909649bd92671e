/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Process limits the front ends raise before they start. */
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
