/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * -o volatile: fsync in the mount flushes nothing, as in a tmpfs or an
 * overlayfs mounted volatile.  A rootfs build that is simply run again
 * after a power loss has no use for the flushes, and dpkg makes one per
 * file it unpacks.
 *
 * The staged tree still reaches the spool's page cache before each answer,
 * so a crash of the daemon alone is recovered as ever.  After a crash of
 * the machine the spool may be torn in ways no checksum sees (a journal
 * batch whose file data never reached the disk), so it must not be
 * recovered silently: SPOOL/volatile names the boot it was written in,
 * and a recovery in another boot is refused.  The mark is made durable
 * before anything volatile is written, and removed only once everything
 * it covered has been flushed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stage/stage.h"

#define MARK_NAME "volatile"
#define MARK_HEAD "sqfs-stage volatile spool\nboot_id "
#define BOOT_ID_LEN 36

static int boot_id(char id[BOOT_ID_LEN + 1])
{
	ssize_t n;
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, id, BOOT_ID_LEN);
	close(fd);
	if (n != BOOT_ID_LEN)
		return -EIO;
	id[BOOT_ID_LEN] = '\0';
	return 0;
}

int stage_volatile_mark(struct stage *s)
{
	char id[BOOT_ID_LEN + 1], buf[sizeof(MARK_HEAD) + BOOT_ID_LEN + 1];
	int fd, len, ret;

	ret = boot_id(id);
	if (ret)
		return ret;
	len = snprintf(buf, sizeof(buf), MARK_HEAD "%s\n", id);
	fd = openat(s->spoolfd, MARK_NAME, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	errno = 0;	/* a short write sets none */
	if (write(fd, buf, (size_t)len) != len || fsync(fd)) {
		ret = errno ? -errno : -EIO;
		close(fd);
		return ret;
	}
	close(fd);
	return fsync(s->spoolfd) ? -errno : 0;
}

int stage_volatile_check(struct stage *s, int *marked)
{
	char id[BOOT_ID_LEN + 1], buf[sizeof(MARK_HEAD) + BOOT_ID_LEN + 2];
	size_t head = sizeof(MARK_HEAD) - 1;
	ssize_t n;
	int fd, ret;

	*marked = 0;
	fd = openat(s->spoolfd, MARK_NAME, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	*marked = 1;
	n = read(fd, buf, sizeof(buf) - 1);
	ret = n < 0 ? -errno : 0;
	close(fd);
	if (!ret)
		ret = boot_id(id);
	if (ret)
		return ret;
	/* Anything but this boot's mark, a torn one included, is refused. */
	if (n < (ssize_t)(head + BOOT_ID_LEN) || memcmp(buf, MARK_HEAD, head) ||
	    memcmp(buf + head, id, BOOT_ID_LEN))
		return -ESTALE;
	return 0;
}

int stage_volatile_clear(struct stage *s)
{
	/* Every spool file first: the mark covered them all. */
	if (syncfs(s->spoolfd))
		return -errno;
	if (unlinkat(s->spoolfd, MARK_NAME, 0) && errno != ENOENT)
		return -errno;
	return fsync(s->spoolfd) ? -errno : 0;
}
