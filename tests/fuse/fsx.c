/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fsx: a random-operation file exerciser for test_fsx.sh (in the spirit of
 * the classic fsx, written from scratch).  One file, an in-memory model of
 * its bytes, and a seeded stream of operations checked against the model:
 *
 *   write    pwrite at a random offset and size (past EOF too, leaving a
 *            hole), of random, repeated-byte or zero data; sometimes
 *            aligned to the -B block size, so whole blocks are replaced
 *   trunc    ftruncate up or down
 *   read     pread and compare (short reads at EOF included)
 *   mapread  mmap(MAP_SHARED, PROT_READ) of a range and compare
 *   seek     SEEK_DATA / SEEK_HOLE: results in range, and every byte in a
 *            reported hole is zero in the model (a hole may be reported as
 *            data, never data as a hole)
 *   punch    fallocate(PUNCH_HOLE|KEEP_SIZE) (turned off on EOPNOTSUPP)
 *   fsync    fsync
 *   reopen   close and open again
 *   append   write through a second descriptor opened with O_APPEND
 *   otrunc   close, open again with O_TRUNC
 *   idle     close, wait until the background compression of the mount is
 *            idle (the root xattr user.sqfs-stage.status of -x DIR: no
 *            queued file, not busy), open again: the next reads and the
 *            seal see blocks stored by the background work
 *
 *   fsx [-N OPS] [-S SEED] [-l MAXLEN] [-w MAXWRITE] [-B BLOCK] [-x MOUNT]
 *       [-W SECONDS] [-m MODEL] [-q] FILE
 *
 * At the end the whole file is compared once more and the model is written
 * to MODEL (for comparing with the sealed image).  On a mismatch the tail of
 * the operation log and the first differing bytes are printed; exit 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define LOG_KEEP 64
#define STATUS_XATTR "user.sqfs-stage.status"

enum { OP_WRITE, OP_TRUNC, OP_READ, OP_MAPREAD, OP_SEEK, OP_PUNCH, OP_FSYNC,
       OP_REOPEN, OP_IDLE, OP_APPEND, OP_OTRUNC, OP_COUNT };
static const char *const op_names[OP_COUNT] = {
	"write", "trunc", "read", "mapread", "seek", "punch", "fsync", "reopen", "idle",
	"append", "otrunc"
};
/* Relative frequencies. */
static const unsigned op_weight[OP_COUNT] = { 400, 60, 230, 120, 100, 30, 20, 25, 15, 20, 3 };

static const char *path;
static const char *mount_dir;
static unsigned char *model, *buf;
static uint64_t size, maxlen = 1 << 20, maxwrite = 256 << 10, bsize = 4096;
static uint64_t opno, nops = 100000, seed = 1, rng;
static unsigned wait_seconds = 60;
static int fd = -1, quiet, punch_ok = 1;
static uint64_t counts[OP_COUNT];
static char logring[LOG_KEEP][128];
static uint64_t logno[LOG_KEEP];
static long pagesz;

static uint64_t rnd(void)
{
	/* splitmix64 */
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, n); n > 0. */
static uint64_t below(uint64_t n)
{
	return rnd() % n;
}

static void oplog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void oplog(const char *fmt, ...)
{
	va_list ap;
	unsigned k = (unsigned)(opno % LOG_KEEP);

	va_start(ap, fmt);
	vsnprintf(logring[k], sizeof(logring[k]), fmt, ap);
	va_end(ap);
	logno[k] = opno;
}

static void dump_log(void)
{
	uint64_t first = opno + 1 > LOG_KEEP ? opno + 1 - LOG_KEEP : 0, i;

	fprintf(stderr, "fsx %s: last operations (seed %" PRIu64 "):\n", path, seed);
	for (i = first; i <= opno; i++) {
		unsigned k = (unsigned)(i % LOG_KEEP);

		if (logno[k] == i && logring[k][0])
			fprintf(stderr, "  %7" PRIu64 " %s\n", i, logring[k]);
	}
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fsx %s: op %" PRIu64 ": ", path, opno);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	dump_log();
	exit(1);
}

/* got must equal model[off, off+len); what names the operation. */
static void check(const unsigned char *got, uint64_t off, uint64_t len, const char *what)
{
	uint64_t i, j;

	if (!memcmp(got, model + off, len))
		return;
	for (i = 0; i < len && got[i] == model[off + i]; i++)
		;
	fprintf(stderr, "fsx %s: %s: data differs at offset %" PRIu64 " (0x%" PRIx64
		"), file size %" PRIu64 "\n  offset    expected got\n", path, what, off + i,
		off + i, size);
	for (j = i; j < len && j < i + 16; j++)
		fprintf(stderr, "  %8" PRIu64 "  %02x       %02x%s\n", off + j, model[off + j],
			got[j], model[off + j] != got[j] ? "  <" : "");
	die("%s: mismatch", what);
}

static void do_open(void)
{
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		die("open: %s", strerror(errno));
}

static void do_close(void)
{
	if (close(fd))
		die("close: %s", strerror(errno));
	fd = -1;
}

/* An offset for a new write or size: mostly near the data, sometimes anywhere. */
static uint64_t pick_offset(void)
{
	uint64_t off;

	if (below(5) == 0 || size == 0)
		off = below(maxlen);
	else
		off = below(size + size / 8 + 1);
	if (below(4) == 0)
		off -= off % bsize;	/* block-aligned */
	return off < maxlen ? off : maxlen - 1;
}

static void op_write(void)
{
	uint64_t off = pick_offset(), len, i;
	unsigned kind = (unsigned)below(10);
	ssize_t w;

	if (below(4) == 0)
		len = bsize * (1 + below(maxwrite / bsize ? maxwrite / bsize : 1));
	else if (below(2))
		len = 1 + below(2 * bsize);
	else
		len = 1 + below(maxwrite);
	if (len > maxlen - off)
		len = maxlen - off;
	if (kind < 6) {
		for (i = 0; i < len; i += 8) {
			uint64_t r = rnd();

			memcpy(buf + i, &r, len - i < 8 ? len - i : 8);
		}
	} else {
		memset(buf, kind < 8 ? (int)(1 + below(255)) : 0, len);
	}
	oplog("write  0x%" PRIx64 " +0x%" PRIx64 " (%s) size 0x%" PRIx64, off, len,
	      kind < 6 ? "random" : kind < 8 ? "byte" : "zeros", size);
	w = pwrite(fd, buf, len, (off_t)off);
	if (w < 0)
		die("pwrite: %s", strerror(errno));
	if ((uint64_t)w != len)
		die("pwrite: short write %zd of %" PRIu64, w, len);
	memcpy(model + off, buf, len);
	if (off + len > size)
		size = off + len;
}

/* The model keeps every byte past the size zero: holes need no work. */
static void set_size(uint64_t ns)
{
	if (ns < size)
		memset(model + ns, 0, size - ns);
	size = ns;
}

static void op_trunc(void)
{
	uint64_t ns;

	switch (below(4)) {
	case 0:
		ns = below(maxlen + 1);
		break;
	case 1:
		ns = size ? below(size + 1) : 0;	/* down */
		break;
	case 2:
		ns = size + below(maxlen - size + 1);	/* up */
		break;
	default:
		ns = below(maxlen / bsize + 1) * bsize;	/* block boundary */
		break;
	}
	oplog("trunc  0x%" PRIx64 " -> 0x%" PRIx64, size, ns);
	if (ftruncate(fd, (off_t)ns))
		die("ftruncate: %s", strerror(errno));
	set_size(ns);
}

/* A range to read: in the file, sometimes across EOF. */
static void read_range(uint64_t *off, uint64_t *len)
{
	uint64_t limit = size + (below(8) == 0 ? bsize : 0);

	*off = limit ? below(limit) : 0;
	if (below(4) == 0)
		*off -= *off % bsize;
	*len = below(3) == 0 ? 1 + below(maxwrite) : 1 + below(2 * bsize);
}

static void op_read(void)
{
	uint64_t off, len, want;
	ssize_t r;

	read_range(&off, &len);
	want = off >= size ? 0 : size - off < len ? size - off : len;
	oplog("read   0x%" PRIx64 " +0x%" PRIx64 " size 0x%" PRIx64, off, len, size);
	r = pread(fd, buf, len, (off_t)off);
	if (r < 0)
		die("pread: %s", strerror(errno));
	if ((uint64_t)r != want)
		die("pread 0x%" PRIx64 " +0x%" PRIx64 ": got %zd bytes, expected %" PRIu64,
		    off, len, r, want);
	check(buf, off, want, "read");
}

static void op_mapread(void)
{
	uint64_t off, len, moff;
	unsigned char *p;

	if (!size) {
		oplog("mapread (empty file, skipped)");
		return;
	}
	read_range(&off, &len);
	if (off >= size)
		off = below(size);
	if (len > size - off)
		len = size - off;
	moff = off - off % (uint64_t)pagesz;
	oplog("mapread 0x%" PRIx64 " +0x%" PRIx64 " size 0x%" PRIx64, off, len, size);
	p = mmap(NULL, off + len - moff, PROT_READ, MAP_SHARED, fd, (off_t)moff);
	if (p == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	check(p + (off - moff), off, len, "mapread");
	if (munmap(p, off + len - moff))
		die("munmap: %s", strerror(errno));
}

static int model_zero(uint64_t from, uint64_t to)
{
	uint64_t i;

	for (i = from; i < to; i++)
		if (model[i])
			return 0;
	return 1;
}

/* SEEK_DATA from off: the next data offset, or size for ENXIO. */
static uint64_t seek_data(uint64_t off)
{
	off_t r = lseek(fd, (off_t)off, SEEK_DATA);

	if (r < 0) {
		if (errno != ENXIO)
			die("lseek(0x%" PRIx64 ", SEEK_DATA): %s", off, strerror(errno));
		return size;
	}
	if ((uint64_t)r < off || (uint64_t)r >= size)
		die("lseek(0x%" PRIx64 ", SEEK_DATA) = 0x%jx, file size 0x%" PRIx64, off,
		    (intmax_t)r, size);
	return (uint64_t)r;
}

static void op_seek(void)
{
	uint64_t off, h, d;
	off_t r;

	if (!size) {
		oplog("seek   (empty file): SEEK_DATA 0 must be ENXIO");
		if (lseek(fd, 0, SEEK_DATA) >= 0 || errno != ENXIO)
			die("lseek(0, SEEK_DATA) on an empty file: not ENXIO");
		return;
	}
	off = below(size);
	oplog("seek   0x%" PRIx64 " size 0x%" PRIx64, off, size);
	/* No data reported in [off, d): those bytes are zero. */
	d = seek_data(off);
	if (!model_zero(off, d))
		die("SEEK_DATA(0x%" PRIx64 ") = 0x%" PRIx64 " skips nonzero data", off, d);
	r = lseek(fd, (off_t)off, SEEK_HOLE);
	if (r < 0)
		die("lseek(0x%" PRIx64 ", SEEK_HOLE): %s", off, strerror(errno));
	h = (uint64_t)r;
	if (h < off || h > size)
		die("lseek(0x%" PRIx64 ", SEEK_HOLE) = 0x%" PRIx64 ", file size 0x%" PRIx64,
		    off, h, size);
	if (h < size) {
		/* A hole at h runs to the next data: all of it zero. */
		d = seek_data(h);
		if (d == h)
			die("SEEK_HOLE(0x%" PRIx64 ") = 0x%" PRIx64 " but SEEK_DATA there "
			    "finds data at once", off, h);
		if (!model_zero(h, d))
			die("hole [0x%" PRIx64 ", 0x%" PRIx64 ") reported, the model has data "
			    "there", h, d);
	}
}

static void op_punch(void)
{
	uint64_t off, len;

	if (!punch_ok || !size) {
		oplog("punch  (skipped)");
		return;
	}
	off = below(size);
	if (below(2))
		off -= off % bsize;
	len = 1 + below(below(2) ? 4 * bsize : size - off);
	oplog("punch  0x%" PRIx64 " +0x%" PRIx64 " size 0x%" PRIx64, off, len, size);
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len)) {
		if (errno == EOPNOTSUPP) {
			punch_ok = 0;
			fprintf(stderr, "fsx %s: hole punching not supported, off\n", path);
			return;
		}
		die("fallocate(PUNCH_HOLE): %s", strerror(errno));
	}
	if (off + len > size)
		len = size - off;
	memset(model + off, 0, len);
}

/* The status xattr says no file is queued and the thread is idle. */
static int bg_idle(void)
{
	char st[1024];
	ssize_t n = getxattr(mount_dir, STATUS_XATTR, st, sizeof(st) - 1);
	const char *q, *b;

	if (n < 0)
		die("getxattr(%s, %s): %s", mount_dir, STATUS_XATTR, strerror(errno));
	st[n] = 0;
	q = strstr(st, "\"queued_files\":");
	b = strstr(st, "\"busy\":");
	if (!q || !b)
		die("unexpected status %s", st);
	return strtoull(q + 15, NULL, 10) == 0 && strtoull(b + 7, NULL, 10) == 0;
}

static void op_idle(void)
{
	struct timespec t0, t, nap = { 0, 2000000 };

	oplog("idle   close, wait for the background work, reopen");
	do_close();
	if (mount_dir) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		while (!bg_idle()) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec > (time_t)wait_seconds)
				die("background compression not idle after %u s", wait_seconds);
			nanosleep(&nap, NULL);
		}
	}
	do_open();
}

static void op_append(void)
{
	uint64_t len = 1 + below(below(2) ? 2 * bsize : maxwrite), i;
	ssize_t w;
	int afd;

	if (size >= maxlen) {
		oplog("append (file full, skipped)");
		return;
	}
	if (len > maxlen - size)
		len = maxlen - size;
	for (i = 0; i < len; i++)
		buf[i] = (unsigned char)(opno + i * 7);
	oplog("append +0x%" PRIx64 " size 0x%" PRIx64, len, size);
	afd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (afd < 0)
		die("open O_APPEND: %s", strerror(errno));
	w = write(afd, buf, len);
	if (w != (ssize_t)len)
		die("append write: %zd of %" PRIu64 ": %s", w, len, w < 0 ? strerror(errno) : "short");
	if (close(afd))
		die("close: %s", strerror(errno));
	memcpy(model + size, buf, len);
	size += len;
}

static void op_otrunc(void)
{
	oplog("otrunc close, open O_TRUNC (size 0x%" PRIx64 ")", size);
	do_close();
	fd = open(path, O_RDWR | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		die("open O_TRUNC: %s", strerror(errno));
	set_size(0);
}

static void final_check(const char *model_out)
{
	ssize_t r;
	int mfd;

	opno++;
	oplog("final  close, reopen, read all 0x%" PRIx64 " bytes", size);
	do_close();
	do_open();
	r = pread(fd, buf, maxlen + 1, 0);
	if (r < 0)
		die("final pread: %s", strerror(errno));
	if ((uint64_t)r != size)
		die("final read: %zd bytes, model size %" PRIu64, r, size);
	check(buf, 0, size, "final read");
	do_close();
	if (!model_out)
		return;
	mfd = open(model_out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (mfd < 0 || write(mfd, model, size) != (ssize_t)size || close(mfd))
		die("writing the model to %s: %s", model_out, strerror(errno));
}

static uint64_t num(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 0);

	if (*end == 'K' || *end == 'k')
		v <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		v <<= 20, end++;
	if (*end || end == s) {
		fprintf(stderr, "fsx: bad number '%s'\n", s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	const char *model_out = NULL;
	uint64_t total = 0, k, bufsize;
	int c;

	while ((c = getopt(argc, argv, "N:S:l:w:B:x:W:m:q")) != -1) {
		switch (c) {
		case 'N': nops = num(optarg); break;
		case 'S': seed = num(optarg); break;
		case 'l': maxlen = num(optarg); break;
		case 'w': maxwrite = num(optarg); break;
		case 'B': bsize = num(optarg); break;
		case 'x': mount_dir = optarg; break;
		case 'W': wait_seconds = (unsigned)num(optarg); break;
		case 'm': model_out = optarg; break;
		case 'q': quiet = 1; break;
		default:
			fprintf(stderr, "usage: fsx [-N OPS] [-S SEED] [-l MAXLEN] [-w MAXWRITE] "
				"[-B BLOCK] [-x MOUNT] [-W SECONDS] [-m MODEL] [-q] FILE\n");
			return 2;
		}
	}
	if (optind != argc - 1 || !maxlen || !bsize || !maxwrite) {
		fprintf(stderr, "fsx: one FILE, nonzero sizes\n");
		return 2;
	}
	path = argv[optind];
	rng = seed;
	pagesz = sysconf(_SC_PAGESIZE);
	if (maxwrite > maxlen)
		maxwrite = maxlen;
	/* Room for a read of maxwrite from past the end (read_range). */
	bufsize = maxlen + bsize + maxwrite + 1;
	model = calloc(1, bufsize);
	buf = malloc(bufsize);
	if (!model || !buf) {
		fprintf(stderr, "fsx: out of memory\n");
		return 1;
	}
	for (k = 0; k < OP_COUNT; k++)
		total += op_weight[k];
	/* Start from an empty file. */
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		die("create: %s", strerror(errno));
	for (opno = 1; opno <= nops; opno++) {
		uint64_t r = below(total);

		for (k = 0; r >= op_weight[k]; k++)
			r -= op_weight[k];
		counts[k]++;
		switch (k) {
		case OP_WRITE: op_write(); break;
		case OP_TRUNC: op_trunc(); break;
		case OP_READ: op_read(); break;
		case OP_MAPREAD: op_mapread(); break;
		case OP_SEEK: op_seek(); break;
		case OP_PUNCH: op_punch(); break;
		case OP_FSYNC:
			oplog("fsync");
			if (fsync(fd))
				die("fsync: %s", strerror(errno));
			break;
		case OP_REOPEN:
			oplog("reopen");
			do_close();
			do_open();
			break;
		case OP_IDLE: op_idle(); break;
		case OP_APPEND: op_append(); break;
		default: op_otrunc(); break;
		}
	}
	opno = nops;
	final_check(model_out);
	if (!quiet) {
		printf("fsx %s: seed %" PRIu64 ", %" PRIu64 " operations:", path, seed, nops);
		for (k = 0; k < OP_COUNT; k++)
			printf(" %s %" PRIu64, op_names[k], counts[k]);
		printf("; final size %" PRIu64 "\n", size);
	}
	free(model);
	free(buf);
	return 0;
}
