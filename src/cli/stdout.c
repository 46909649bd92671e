/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The standard descriptors: output to stdout that failed (a full disk
 * behind a redirection) is an error, not a silent success, and one that
 * was closed is /dev/null.  Its own file: sqfs-seal builds it alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

int cli_stdio_open(void)
{
	int fd;

	/*
	 * Started with 0, 1 or 2 closed: the first files opened would take
	 * them, and a message to stderr would be written into one (a spool
	 * file, so into an image's data), or libfuse's daemonising would put
	 * /dev/null over a spool directory.
	 */
	for (;;) {
		fd = open("/dev/null", O_RDWR);
		if (fd < 0)
			return -errno;
		if (fd > STDERR_FILENO) {
			close(fd);
			return 0;
		}
	}
}
