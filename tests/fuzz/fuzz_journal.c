/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer harness for the journal's replay (sqfs-stage --recover): the
 * input is SPOOL/journal, recovered as the daemon recovers it
 * (stage_spool_open, stage_init, stage_jnl_open with recover, which
 * replays, settles and writes a fresh journal from the tree) from a spool
 * in a scratch directory whose data/ holds files for inodes 2..63.  No
 * FUSE: a recovered tree is then checked, copied as a rehearsal copies it,
 * and sealed as sqfs-seal seals it (stage_seal, the image going to a file
 * in the scratch directory); the journal the recovery wrote is recovered
 * once more and must give the same tree.  Built only with -Dfuzz=enabled
 * and clang; see tools/test.sh --mode=fuzz.
 *
 *   build-fuzz/tests/fuzz/fuzz_journal -max_len=8192 -dict=tests/fuzz/journal.dict \
 *       CORPUS_DIR tests/fuzz/corpus-journal
 *
 * What a recovery must give, or the harness aborts (a finding): nodes of
 * a file type, with device numbers mknod could give and xattrs setxattr
 * would take; names a directory can hold (no '/', no NUL, not "." or
 * ".."); every node named (the root by nobody), no directory named twice;
 * link, entry and subdirectory counts that match the entries; a seal that
 * succeeds; and a second recovery (from the journal the first wrote) with
 * the same tree.  A recovery may refuse any input with an error.
 *
 * The checksums: libFuzzer rarely makes an xxh64 come out right, so
 * batches are framed again before the replay: each one the replay would
 * read next (magic, and a length that fits) gets its checksum recomputed,
 * unless the input stored 0 there (the checksum of a batch that does not
 * check out).  The input itself stays as real journals are (the seeds:
 * journals of a killed daemon, and damaged-*, the smallest journals that
 * each once got a tree the seal could not write past the replay: a name
 * with '/', NUL or "..", a node of no file type, a device number no
 * kernel gives, an xattr setxattr refuses, a directory named twice or
 * inside itself).
 * FUZZ_JOURNAL_RAW=1 feeds the input as it is.
 *
 * FUZZ_JOURNAL_ALLOW=a,b,... turns checks into warnings, to hunt past a
 * known finding: names, types, rdev, xattrs, dirlinks, counts, seal,
 * again (any check that fails after one allowed in the same input warns
 * only; they are quiet unless FUZZ_JOURNAL_VERBOSE=1).  A directory of
 * several names is not sealed then: walks of it may take 2^depth steps.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <xxhash.h>

#include "stage/journal.h"
#include "stage/stage.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define DATA_FIRST 2
#define DATA_END 64	/* the seeds' inode numbers are below this */

static char *top, *spool, *journal, *image;
static struct cli_opts opts;
static int raw, verbose;
static const char *allow;
static int warned;	/* an allowed finding in this input: what follows may be its doing */
static int dag;		/* an allowed directory of several names: no walk ends soon */

static void cleanup(void)
{
	char cmd[4096];

	/* A scratch directory of our own making: nothing else is in it. */
	if (top && snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top) < (int)sizeof(cmd))
		(void)!system(cmd);
}

static void setup(void)
{
	const char *base = getenv("FUZZ_SPOOL_DIR");
	char msg[256];

	if (!base)
		base = access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm";
	if (asprintf(&top, "%s/fuzz-journal.XXXXXX", base) < 0 || !mkdtemp(top) ||
	    asprintf(&spool, "%s/spool", top) < 0 ||
	    asprintf(&journal, "%s/journal", spool) < 0 ||
	    asprintf(&image, "%s/image.sqfs", top) < 0 || mkdir(spool, 0700)) {
		perror("fuzz_journal: scratch directory");
		abort();
	}
	atexit(cleanup);
	{
		char *d;

		if (asprintf(&d, "%s/data", spool) < 0 || mkdir(d, 0700)) {
			perror("fuzz_journal: data directory");
			abort();
		}
		free(d);
	}
	/* A small block size so that small files still make blocks; a fast codec. */
	cli_opts_init(&opts);
	opts.prefix = "-o ";
	if (cli_opt_set(&opts, "comp", "gzip:1", msg, sizeof(msg)) ||
	    cli_opt_set(&opts, "block_size", "4096", msg, sizeof(msg)) ||
	    cli_opt_set(&opts, "serial", NULL, msg, sizeof(msg)) ||
	    cli_opt_set(&opts, "mkfs_time", "1234567", msg, sizeof(msg)) ||
	    cli_opts_finish(&opts, msg, sizeof(msg))) {
		fprintf(stderr, "fuzz_journal: options: %s\n", msg);
		abort();
	}
	raw = getenv("FUZZ_JOURNAL_RAW") && atoi(getenv("FUZZ_JOURNAL_RAW"));
	verbose = getenv("FUZZ_JOURNAL_VERBOSE") && atoi(getenv("FUZZ_JOURNAL_VERBOSE"));
	allow = getenv("FUZZ_JOURNAL_ALLOW");
}

static int allowed(const char *what)
{
	size_t len = strlen(what);
	const char *p = allow;

	while (p && *p) {
		if (!strncmp(p, what, len) && (p[len] == ',' || !p[len]))
			return 1;
		p = strchr(p, ',');
		p = p ? p + 1 : NULL;
	}
	return 0;
}

__attribute__((format(printf, 2, 3)))
static void finding(const char *what, const char *fmt, ...)
{
	int fatal = !allowed(what) && !warned;
	va_list ap;

	if (fatal || verbose) {
		fprintf(stderr, "fuzz_journal: %s: ", what);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	if (fatal)
		abort();
	warned = 1;
}

/* SPOOL/journal from the input, its batches framed again (see the top). */
static void write_journal(const uint8_t *data, size_t size)
{
	uint8_t *buf = malloc(size ? size : 1);
	size_t off;
	int fd;

	if (!buf)
		abort();
	memcpy(buf, data, size);
	for (off = 0; !raw && off + JNL_HDR <= size;) {
		uint32_t plen = get_le32(buf + off + 4);

		if (get_le32(buf + off) != JNL_MAGIC || plen > size - off - JNL_HDR)
			break;
		if (get_le64(buf + off + 8))
			put_le64(buf + off + 8, XXH64(buf + off + JNL_HDR, plen, 0));
		off += JNL_HDR + plen;
	}
	fd = open(journal, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || (size && write(fd, buf, size) != (ssize_t)size) || close(fd)) {
		perror("fuzz_journal: journal");
		abort();
	}
	free(buf);
}

/*
 * Data files for the inodes the seeds use (a recovery removes those no
 * regular node has): some empty, some of a few blocks with a hole.
 */
static void make_data(int datafd)
{
	char name[STAGE_SPOOL_NAME_SIZE], buf[4096];
	unsigned ino;

	memset(buf, 'd', sizeof(buf));
	for (ino = DATA_FIRST; ino < DATA_END; ino++) {
		size_t len = ino % 3 ? (ino * 131u) % 9000u : 0;
		int fd = openat(datafd, stage_spool_name(name, ino),
				O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

		if (fd < 0) {
			if (errno == EEXIST)
				continue;
			perror("fuzz_journal: data file");
			abort();
		}
		if (len > sizeof(buf) && pwrite(fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
			abort();
		if (len && pwrite(fd, buf, len % sizeof(buf) + 1, (off_t)(len - len % sizeof(buf))) < 0)
			abort();
		close(fd);
	}
}

static int stage_open(struct stage *s)
{
	char msg[512];
	int ret;

	memset(s, 0, sizeof(*s));
	s->datafd = s->spoolfd = s->claimfd = -1;
	s->opts = opts;
	s->foreground = 1;	/* stage_log to stderr */
	s->no_sync = 1;		/* as -o volatile: no fsync per input */
	s->prepack = 0;
	s->file_max = sqw_file_size_max(s->opts.img.comp.block_size);
	if (s->file_max > STAGE_FILE_CAP)
		s->file_max = STAGE_FILE_CAP;
	s->image = strdup(image);
	ret = s->image ? stage_spool_open(s, spool, msg, sizeof(msg)) : -ENOMEM;
	if (ret) {
		fprintf(stderr, "fuzz_journal: %s\n", msg);
		abort();
	}
	if (stage_init(s, 0, 0)) {
		fprintf(stderr, "fuzz_journal: out of memory\n");
		abort();
	}
	return 0;
}

static void stage_close(struct stage *s)
{
	stage_free(s);
	stage_jnl_close(s);
	if (s->datafd >= 0)
		close(s->datafd);
	if (s->spoolfd >= 0)
		close(s->spoolfd);
	free(s->image);
	free(s->spool);
	free(s->datadir);
}

/* name as C would write it: "a\\0b", "a/b" */
static const char *escape(const char *name, size_t len, char *out)
{
	char *o = out;
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c >= 0x20 && c < 0x7f && c != '\\')
			*o++ = (char)c;
		else
			o += sprintf(o, "\\%03o", c);
	}
	*o = '\0';
	return out;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	return XXH64(&v, sizeof(v), h);
}

/*
 * The checks of the top, node by node from the ino table; returns a digest
 * of the tree (attributes, targets, xattrs, entries), independent of the
 * order of tables and chains.
 */
static uint64_t check_tree(struct stage *s)
{
	uint64_t digest = 0, nodes = 0;
	size_t i, k;
	struct snode *n;
	struct sdirent *d;

	/* Entries naming each node are counted in its jmark (reset after). */
	for (i = 0; i < s->islots; i++)
		for (n = s->itab[i]; n; n = n->hnext)
			n->jmark = 0;
	for (i = 0; i < s->islots; i++) {
		for (n = s->itab[i]; n; n = n->hnext) {
			uint32_t nents = 0, nsub = 0;
			uint64_t h;

			nodes++;
			switch (n->mode & S_IFMT) {
			case S_IFDIR: case S_IFREG: case S_IFLNK: case S_IFCHR: case S_IFBLK:
			case S_IFIFO: case S_IFSOCK:
				break;
			default:
				finding("types", "inode %llu: mode 0%o, of no file type",
					(unsigned long long)n->ino, (unsigned)n->mode);
			}
			if (stage_get(s, n->ino) != n)
				finding("counts", "inode %llu: not found by its number",
					(unsigned long long)n->ino);
			h = mix(mix(mix(n->ino, n->mode), ((uint64_t)n->uid << 32) | n->gid),
				node_rdev(n));
			h = mix(mix(h, (uint64_t)n->mtime.tv_sec), (uint64_t)n->mtime.tv_nsec);
			if (S_ISREG(n->mode))
				h = mix(h, n->size);
			/* What mknod can make: the kernel's 12-bit major, 20-bit minor. */
			if (major(node_rdev(n)) > 0xfff || minor(node_rdev(n)) > 0xfffff)
				finding("rdev", "inode %llu: device number 0x%llx",
					(unsigned long long)n->ino,
					(unsigned long long)node_rdev(n));
			if (S_ISLNK(n->mode)) {
				if (!n->target)
					finding("counts", "symlink %llu: no target",
						(unsigned long long)n->ino);
				else
					h = XXH64(n->target, strlen(n->target), h);
			}
			for (k = 0; k < n->nxattrs; k++) {
				const struct sxattr *x = &n->xattrs[k];

				/* What setxattr takes (ops_xattr.c), and never the control names. */
				if (xattr_name_check(x->name) ||
				    (n == s->root && (!strcmp(x->name, STAGE_SEAL_XATTR) ||
						      !strcmp(x->name, STAGE_STATUS_XATTR))))
					finding("xattrs", "inode %llu: an xattr '%s', which setxattr "
						"refuses", (unsigned long long)n->ino, x->name);

				digest += XXH64(x->value, x->size,
						XXH64(x->name, strlen(x->name), n->ino));
			}
			digest += h;
			if (!S_ISDIR(n->mode))
				continue;
			for (k = 0; k < n->nslots; k++) {
				for (d = n->tab[k]; d; d = d->next) {
					struct snode *c = d->node;

					nents++;
					if (stage_get(s, c->ino) != c) {
						finding("counts", "inode %llu: entry '%.*s' names no node",
							(unsigned long long)n->ino, (int)d->len, d->name);
						continue;
					}
					if (S_ISDIR(c->mode))
						nsub++;
					c->jmark++;
					if (memchr(d->name, '/', d->len) || memchr(d->name, 0, d->len) ||
					    !d->len || (d->len == 1 && d->name[0] == '.') ||
					    (d->len == 2 && !memcmp(d->name, "..", 2))) {
						char esc[4 * STAGE_NAME_MAX + 1];

						finding("names", "directory %llu: an entry '%s' (%u bytes), "
							"a name no directory can hold",
							(unsigned long long)n->ino,
							escape(d->name, d->len, esc), d->len);
					}
					digest += XXH64(d->name, d->len, mix(n->ino, c->ino));
				}
			}
			if (nents != n->nents || nsub != n->nsubdirs)
				finding("counts", "directory %llu: %u entries, %u subdirectories; "
					"it counts %u, %u", (unsigned long long)n->ino, nents, nsub,
					n->nents, n->nsubdirs);
		}
	}
	if (nodes != s->inodes)
		finding("counts", "%llu nodes in the table, s->inodes %llu",
			(unsigned long long)nodes, (unsigned long long)s->inodes);
	for (i = 0; i < s->islots; i++) {
		for (n = s->itab[i]; n; n = n->hnext) {
			uint64_t want = n->jmark + (n == s->root);

			if (n->links != want || !want)
				finding("counts", "inode %llu (mode 0%o): links %u, named %llu times%s",
					(unsigned long long)n->ino, (unsigned)n->mode, n->links,
					(unsigned long long)n->jmark,
					n == s->root ? " (the root)" : "");
			if (S_ISDIR(n->mode) && want > 1 && (dag = 1))
				finding("dirlinks", "directory %llu has %llu names%s",
					(unsigned long long)n->ino, (unsigned long long)want,
					n == s->root ? " (the root, which has one of its own)" : "");
			n->jmark = 0;
		}
	}
	return digest;
}

/* One recovery from SPOOL/journal; 0 and the tree's digest, or -errno. */
static int recover(int *inodes, uint64_t *digest, int seal)
{
	struct stage_jnl_stats st;
	struct stage s;
	sqw_tree_t *t;
	char *out = NULL;
	int ret;

	stage_open(&s);
	make_data(s.datafd);
	ret = stage_jnl_open(&s, 1, &st);
	if (verbose)
		fprintf(stderr, "fuzz_journal: recovery: %s, %llu inodes, %llu batches, "
			"%llu torn bytes, %llu later batches, %llu dropped\n",
			ret ? strerror(-ret) : "ok", (unsigned long long)s.inodes,
			(unsigned long long)st.batches, (unsigned long long)st.torn_bytes,
			(unsigned long long)st.later_batches, (unsigned long long)st.dropped);
	if (!ret) {
		*inodes = (int)s.inodes;
		*digest = check_tree(&s);
		/* Walks of such a tree repeat whole subtrees (2^depth of them). */
		if (seal && !dag) {
			/* What the background thread copies for a rehearsal. */
			t = stage_tree_rehearsal(&s);
			if (t)
				sqw_tree_destroy(t);
			pthread_mutex_lock(&s.lock);
			if (stage_seal(&s, &out))
				finding("seal", "the recovered tree does not seal: %s",
					out ? out : "?");
			else if (verbose)
				fprintf(stderr, "fuzz_journal: sealed: %s\n", out);
			pthread_mutex_unlock(&s.lock);
			free(out);
		}
	}
	stage_close(&s);
	return ret;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t d1 = 0, d2 = 0;
	int n1 = 0, n2 = 0, ret;

	if (!top)
		setup();
	warned = dag = 0;
	write_journal(data, size);
	if (recover(&n1, &d1, 1))
		return 0;
	/* The daemon killed again: its journal is the snapshot written above. */
	ret = recover(&n2, &d2, 0);
	if (ret)
		finding("again", "recovering the recovered journal: %s", strerror(-ret));
	else if (n1 != n2 || d1 != d2)
		finding("again", "recovering the recovered journal: %d inodes (digest %016llx), "
			"not %d (%016llx)", n2, (unsigned long long)d2, n1,
			(unsigned long long)d1);
	return 0;
}
