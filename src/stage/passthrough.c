/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * FUSE passthrough (Linux 6.9+): the kernel reads and writes an open file's
 * spool file itself, so a write costs no round trip to us, and neither does
 * the security.capability lookup the kernel makes before every write it
 * sends.  A copied file then needs 4 requests instead of 6.
 *
 * libfuse 3.14 knows nothing of it, so we speak the three protocol details
 * it needs through the session's custom I/O: the INIT reply gets the
 * FUSE_PASSTHROUGH flag and a stack depth, and an OPEN or CREATE reply the
 * FOPEN_PASSTHROUGH flag and the id of a backing file registered with
 * FUSE_DEV_IOC_BACKING_OPEN (which needs CAP_SYS_ADMIN; without it, or on
 * an older kernel, everything goes through us as before).  A reply is
 * patched in the worker thread that read its request, which is the thread
 * that answers it (our operations reply before they return).
 *
 * What we no longer see, we learn from the spool file: its size and mtime
 * are folded into the node when anyone asks (getattr, setattr, release).
 * The node's explicit times are copied to the spool file, so any later
 * write shows as a changed mtime even with coarse timestamps.  A writable
 * handle forgets the file's stored blocks when it closes.
 *
 * The kernel wants one backing file per inode while any file of it is open,
 * so the id lives in a per-inode entry counted by open handles.
 *
 * The same hooks carry FUSE over io_uring (uring.c): the INIT reply asks for
 * it when the kernel offers it, and every answer leaves through out(), which
 * gives an answer to a ring request back to its ring.
 *
 * The INIT answer also takes FUSE_HANDLE_KILLPRIV_V2 (Linux 5.11): the
 * kernel then stops asking for security.capability before every write (a
 * file found without it, and not setuid, is marked S_NOSEC until its
 * attributes are next refreshed), and no longer fetches the attributes
 * before every chown.  In exchange we clear setuid and setgid ourselves
 * when a setattr says to (stage_op_setattr, ops_attr.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <syslog.h>
#include <unistd.h>

#include "stage/stage.h"

/* Protocol 7.40 (Linux 6.9), absent from older headers. */
#define PT_INIT_EXT (1u << 30)			/* flags: flags2 is valid */
#define PT_WRITEBACK_CACHE (1u << 16)
#define PT_FLAG2_PASSTHROUGH (1u << (37 - 32))	/* FUSE_PASSTHROUGH */
#define PT_FLAG2_OVER_IO_URING (1u << (41 - 32))	/* 7.42: see uring.c */
#define PT_HANDLE_KILLPRIV_V2 (1u << 28)
#define PT_FOPEN_PASSTHROUGH (1u << 7)
/* The only other open flags the kernel accepts with it (no KEEP_CACHE). */
#define PT_FOPEN_ALLOWED ((1u << 0) | (1u << 5) | (1u << 6))	/* DIRECT_IO, NOFLUSH, PARALLEL_DW */
#define PT_STACK_DEPTH 2	/* a spool on overlayfs still qualifies */

struct pt_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};

#define PT_IOC_MAGIC 229
#define PT_IOC_BACKING_OPEN _IOW(PT_IOC_MAGIC, 1, struct pt_backing_map)
#define PT_IOC_BACKING_CLOSE _IOW(PT_IOC_MAGIC, 2, uint32_t)

enum { OP_OPEN = 14, OP_INIT = 26, OP_CREATE = 35, OP_TMPFILE = 51 };

/* The wire headers, as the kernel lays them out. */
struct pt_in_header {
	uint32_t len, opcode;
	uint64_t unique, nodeid;
	uint32_t uid, gid, pid;
	uint16_t total_extlen, padding;
};

struct pt_out_header {
	uint32_t len;
	int32_t error;
	uint64_t unique;
};

#define INIT_IN_FLAGS 12	/* fuse_init_in: major, minor, readahead, flags, flags2 */
#define INIT_IN_FLAGS2 16
#define INIT_OUT_FLAGS 12
#define INIT_OUT_MAX_WRITE 20
#define INIT_OUT_MAX_PAGES 28
#define INIT_OUT_FLAGS2 32
#define INIT_OUT_STACK 36
#define OPEN_OUT_SIZE 16	/* fh, open_flags, backing_id */

struct ptn {
	struct ptn *next;
	fuse_ino_t ino;
	int fd;			/* the spool file: every handle of the inode uses it */
	int id;			/* backing id; 0: this inode's files go through us */
	uint32_t refs;		/* open handles */
	struct timespec seen;	/* the spool file's mtime when last looked at */
};

#define PT_SLOTS 1024

struct stage_pt {
	struct stage *s;
	int fd;			/* /dev/fuse */
	int offered;		/* the kernel offered FUSE_PASSTHROUGH */
	int on;			/* we asked for it; cleared when the kernel refuses */
	int ring_offered;	/* ... and FUSE_OVER_IO_URING */
	int killpriv_offered;	/* ... and FUSE_HANDLE_KILLPRIV_V2 */
	int killpriv;		/* we took it (atomic: read by the status) */
	uint64_t init_unique;
	uint64_t opens;		/* answered in passthrough */
	struct ptn *tab[PT_SLOTS];
};

/* The request this worker thread is answering, and the id for its open. */
static __thread uint64_t cur_unique;
static __thread uint32_t cur_opcode;
static __thread int cur_backing;

void stage_pt_note_request(struct stage *s, void *buf, size_t len)
{
	struct stage_pt *pt = s->pt;
	struct pt_in_header *h = buf;

	cur_backing = 0;
	if (!pt || len < sizeof(*h))
		return;
	/*
	 * O_TMPFILE (Linux 6.1) is unknown to libfuse 3.14, which would refuse
	 * it.  Its request is laid out as a CREATE's, with the name "/" that
	 * no entry can have, and wants the same answer: pass it as one, and
	 * stage_op_create makes a file that only a link will name.
	 */
	if (h->opcode == OP_TMPFILE)
		h->opcode = OP_CREATE;
	cur_unique = h->unique;
	cur_opcode = h->opcode;
	if (h->opcode == OP_INIT && len >= sizeof(*h) + INIT_IN_FLAGS2 + 4) {
		uint32_t flags, flags2;

		memcpy(&flags, (const char *)buf + sizeof(*h) + INIT_IN_FLAGS, 4);
		memcpy(&flags2, (const char *)buf + sizeof(*h) + INIT_IN_FLAGS2, 4);
		pt->init_unique = h->unique;
		pt->offered = (flags & PT_INIT_EXT) && (flags2 & PT_FLAG2_PASSTHROUGH);
		pt->ring_offered = (flags & PT_INIT_EXT) && (flags2 & PT_FLAG2_OVER_IO_URING);
		pt->killpriv_offered = !!(flags & PT_HANDLE_KILLPRIV_V2);
	}
}

int stage_pt_killpriv(const struct stage *s)
{
	return s->pt && __atomic_load_n(&s->pt->killpriv, __ATOMIC_RELAXED);
}

static ssize_t pt_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t r = read(fd, buf, len);

	if (r >= 0) {
		stage_pt_note_request(userdata, buf, (size_t)r);
	} else {
		cur_backing = 0;
		if (errno == ENODEV)
			__atomic_store_n(&((struct stage *)userdata)->conn_gone, 1,
					 __ATOMIC_RELAXED);
	}
	return r;
}

/* Every answer leaves here: through the ring it came by, or /dev/fuse. */
static ssize_t out(struct stage *s, int fd, struct iovec *iov, int count)
{
	ssize_t r;

	if (stage_uring_reply(s, iov, count, &r))
		return r;
	return writev(fd, iov, count);
}

int stage_pt_ring_wanted(const struct stage *s)
{
	return s->pt && s->pt->ring_offered && !s->no_uring;
}

/* Set the passthrough and io_uring fields in a copy of the reply's argument. */
static ssize_t send_patched(struct stage *s, int fd, struct iovec *iov, int count, int init,
			    int32_t id)
{
	struct stage_pt *pt = s->pt;
	struct iovec v[8];
	char arg[256];
	uint32_t x, max_write, ring = 0;
	struct stage_uring *ur = NULL;
	uint16_t max_pages;
	ssize_t r;

	if (count != 2 || iov[1].iov_len > sizeof(arg))
		return out(s, fd, iov, count);
	memcpy(arg, iov[1].iov_base, iov[1].iov_len);
	if (init) {
		if (iov[1].iov_len < INIT_OUT_STACK + 4)
			return out(s, fd, iov, count);
		memcpy(&x, arg + INIT_OUT_FLAGS, 4);
		if (x & PT_WRITEBACK_CACHE)
			return out(s, fd, iov, count);
		x |= PT_INIT_EXT;
		if (pt->killpriv_offered) {
			x |= PT_HANDLE_KILLPRIV_V2;
			__atomic_store_n(&pt->killpriv, 1, __ATOMIC_RELAXED);
		}
		memcpy(arg + INIT_OUT_FLAGS, &x, 4);
		memcpy(&x, arg + INIT_OUT_FLAGS2, 4);
		if (pt->on && pt->offered) {
			x |= PT_FLAG2_PASSTHROUGH;
			memcpy(arg + INIT_OUT_STACK, &(uint32_t){ PT_STACK_DEPTH }, 4);
		}
		if (stage_pt_ring_wanted(s)) {
			/*
			 * Offered, the rings must work: the kernel then holds
			 * every request until each CPU's ring has an entry.
			 */
			int err;

			memcpy(&max_write, arg + INIT_OUT_MAX_WRITE, 4);
			memcpy(&max_pages, arg + INIT_OUT_MAX_PAGES, 2);
			err = stage_uring_prepare(s, s->se, fd, max_write, max_pages, &ur);
			if (err) {
				stage_log(s, LOG_WARNING, "FUSE over io_uring is off (%s); "
					  "requests go through /dev/fuse", strerror(-err));
			} else {
				x |= PT_FLAG2_OVER_IO_URING;
				ring = 1;
			}
		}
		memcpy(arg + INIT_OUT_FLAGS2, &x, 4);
	} else {
		char *o = arg + iov[1].iov_len - OPEN_OUT_SIZE;

		if (iov[1].iov_len < OPEN_OUT_SIZE)
			return out(s, fd, iov, count);
		memcpy(&x, o + 8, 4);
		x = (x & PT_FOPEN_ALLOWED) | PT_FOPEN_PASSTHROUGH;
		memcpy(o + 8, &x, 4);
		memcpy(o + 12, &id, 4);
	}
	v[0] = iov[0];
	v[1].iov_base = arg;
	v[1].iov_len = iov[1].iov_len;
	r = out(s, fd, v, 2);
	/* The rings can only be registered once the kernel has taken the INIT answer. */
	if (ring && r <= 0) {
		stage_uring_discard(s, ur);
	} else if (ring) {
		int err = stage_uring_start(s, ur);

		/* Nothing is left but to say so: the kernel waits for the rings. */
		if (err)
			stage_log(s, LOG_ERR, "FUSE over io_uring could not start (%s) after "
				  "the kernel was told of it: requests to the mount wait; "
				  "unmount it (fusermount3 -u) and mount again with "
				  "-o no_uring", strerror(-err));
	}
	return r;
}

static ssize_t pt_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct stage *s = userdata;
	struct stage_pt *pt = s->pt;
	const struct pt_out_header *o = iov[0].iov_base;
	int backing = cur_backing;

	if (o->unique != cur_unique || o->error || !o->unique)
		return out(s, fd, iov, count);
	cur_backing = 0;
	if (cur_opcode == OP_INIT && o->unique == pt->init_unique &&
	    ((pt->on && pt->offered) || stage_pt_ring_wanted(s) || pt->killpriv_offered))
		return send_patched(s, fd, iov, count, 1, 0);
	if (backing > 0 && (cur_opcode == OP_OPEN || cur_opcode == OP_CREATE))
		return send_patched(s, fd, iov, count, 0, backing);
	return out(s, fd, iov, count);
}

int stage_pt_attach(struct stage *s, struct fuse_session *se)
{
	static const struct fuse_custom_io io = {
		.read = pt_read,
		.writev = pt_writev,
	};
	struct stage_pt *pt = calloc(1, sizeof(*pt));
	int ret;

	if (!pt)
		return -ENOMEM;
	pt->s = s;
	pt->fd = fuse_session_fd(se);
	pt->on = !s->no_passthrough;
	s->pt = pt;
	ret = fuse_session_custom_io(se, &io, pt->fd);
	if (ret) {
		s->pt = NULL;
		free(pt);
	}
	return ret;
}

int stage_pt_wanted(const struct stage *s)
{
	return s->pt && s->pt->on && s->pt->offered;
}

uint64_t stage_pt_opens(const struct stage *s)
{
	return s->pt ? s->pt->opens : 0;
}

void stage_pt_free(struct stage *s)
{
	struct stage_pt *pt = s->pt;
	size_t i;

	if (!pt)
		return;
	for (i = 0; i < PT_SLOTS; i++) {
		while (pt->tab[i]) {
			struct ptn *e = pt->tab[i];

			pt->tab[i] = e->next;
			close(e->fd);
			free(e);
		}
	}
	free(pt);
	s->pt = NULL;
}

static struct ptn **slot(struct stage_pt *pt, fuse_ino_t ino)
{
	struct ptn **p = &pt->tab[(ino * 0x9e3779b97f4a7c15ull) >> 54];

	while (*p && (*p)->ino != ino)
		p = &(*p)->next;
	return p;
}

int stage_pt_open(struct stage *s, struct snode *n, int *fdp, int flags, int *shared)
{
	struct stage_pt *pt = s->pt;
	struct pt_backing_map map;
	struct ptn *e, **p;
	struct stat st;

	cur_backing = 0;
	*shared = 0;
	if (!pt || !S_ISREG(n->mode))
		return 0;
	p = slot(pt, n->ino);
	e = *p;
	/*
	 * An inode already open joins its entry even when passthrough has
	 * turned itself off since: the kernel's inode keeps the mode its
	 * first open gave it until the last close.
	 */
	if (!e) {
		if (!pt->on || !pt->offered)
			return 0;
		e = calloc(1, sizeof(*e));
		if (!e)
			return -ENOMEM;
		e->ino = n->ino;
		e->fd = *fdp;
		if (fstat(e->fd, &st)) {
			int err = -errno;

			free(e);
			return err;
		}
		e->seen = st.st_mtim;
		/*
		 * The mode the inode keeps until its last close.  O_DIRECT
		 * would reach the spool file as it is, with its alignment
		 * rules.  The kernel's backing file takes the open's flags
		 * once: an fcntl(F_SETFL) that clears O_APPEND would not reach
		 * it, and the writes would still append.  Read-write opens
		 * are what shared writable mappings start from, and those
		 * could write after the close unseen: they stay with us, and
		 * their files keep background work.
		 */
		if (!(flags & (O_DIRECT | O_APPEND)) && (flags & O_ACCMODE) != O_RDWR) {
			memset(&map, 0, sizeof(map));
			map.fd = e->fd;
			e->id = ioctl(pt->fd, PT_IOC_BACKING_OPEN, &map);
			if (e->id < 0) {
				e->id = 0;
				/* Short of memory or fds: only this inode goes without. */
				if (errno != ENOMEM && errno != EMFILE && errno != ENFILE) {
					pt->on = 0;
					stage_log(s, LOG_INFO, "FUSE passthrough is off (%s); "
						  "file data goes through the daemon",
						  strerror(errno));
				}
			}
		}
		*p = e;
	}
	/*
	 * Every handle of the inode uses its one descriptor (I/O through it
	 * is positional): an open costs the daemon no more descriptors than
	 * without passthrough, where the kernel's backing file counts none.
	 */
	if (*fdp != e->fd) {
		close(*fdp);
		*fdp = e->fd;
	}
	*shared = 1;
	e->refs++;
	/* Joining a passthrough inode read-write: see above. */
	if ((flags & O_ACCMODE) == O_RDWR && e->id > 0)
		n->bg_never = 1;
	if (e->id > 0)
		pt->opens++;
	cur_backing = e->id;
	return e->id;
}

/* Fold writes the kernel made to the spool file into n; lock held. */
static void fold(struct stage *s, struct snode *n, struct ptn *e)
{
	struct stat st;
	int changed = 0;

	if (fstat(e->fd, &st))
		return;
	node_set_blocks(n, st.st_blocks);
	if ((uint64_t)st.st_size != n->size) {
		n->size = (uint64_t)st.st_size;
		changed = 1;
	}
	if (st.st_mtim.tv_sec != e->seen.tv_sec || st.st_mtim.tv_nsec != e->seen.tv_nsec) {
		n->mtime = st.st_mtim;
		n->ctime = st.st_mtim;
		e->seen = st.st_mtim;
		changed = 1;
	}
	if (changed) {
		stage_bg_changed(s, n, 0, UINT64_MAX);
		stage_jnl_node(s, n);
		s->gen++;
	}
}

void stage_pt_sync(struct stage *s, struct snode *n)
{
	struct ptn *e;

	if (!s->pt || !S_ISREG(n->mode))
		return;
	e = *slot(s->pt, n->ino);
	if (e && e->id > 0)
		fold(s, n, e);
}

void stage_pt_settled(struct stage *s, struct snode *n)
{
	struct timespec t[2];
	struct stat st;
	struct ptn *e;

	if (!s->pt || !S_ISREG(n->mode))
		return;
	e = *slot(s->pt, n->ino);
	if (!e || e->id <= 0)
		return;
	t[0].tv_nsec = UTIME_OMIT;
	t[1] = n->mtime;
	if (futimens(e->fd, t) == 0 && fstat(e->fd, &st) == 0)
		e->seen = st.st_mtim;
}

int stage_pt_release(struct stage *s, struct snode *n, int writer)
{
	struct ptn **p, *e;
	int was = 0;

	if (!s->pt || !S_ISREG(n->mode))
		return 0;
	p = slot(s->pt, n->ino);
	e = *p;
	if (!e)
		return 0;
	if (e->id > 0) {
		was = 1;
		fold(s, n, e);
		/*
		 * A write in the same clock tick as our last look leaves no
		 * mark: count it a change (the seal must not stand on it).
		 */
		if (writer) {
			stage_bg_changed(s, n, 0, UINT64_MAX);
			s->gen++;
		}
	}
	if (--e->refs)
		return was;
	if (e->id > 0) {
		uint32_t id = (uint32_t)e->id;

		ioctl(s->pt->fd, PT_IOC_BACKING_CLOSE, &id);
	}
	close(e->fd);
	*p = e->next;
	free(e);
	return was;
}
