/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Output to stdout that failed (a full disk behind a redirection) is an
 * error, not a silent success.  Its own file: sqfs-seal builds it alone.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int cli_stdout_flush(void)
{
	errno = 0;
	if (fflush(stdout) != EOF && !ferror(stdout))
		return 0;
	return errno ? errno : EIO;
}

int cli_stdout_status(const char *prog)
{
	int err = cli_stdout_flush();

	/* A reader that left early (PROG --help | head) wanted no more. */
	if (!err || err == EPIPE)
		return CLI_EXIT_OK;
	fprintf(stderr, "%s: writing to standard output: %s\n", prog, strerror(err));
	return CLI_EXIT_FAIL;
}
