/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * FUSE over io_uring (Linux 6.14+, when the administrator has set
 * /sys/module/fuse/parameters/enable_uring): requests reach us through one
 * ring per CPU instead of read(2) on /dev/fuse.  The kernel queues a request
 * on the ring of the CPU its caller runs on, and our thread for that ring is
 * pinned there, so the caller, our answer and the caller's wakeup stay on
 * one CPU.  Through /dev/fuse every round trip wakes a thread on the other
 * CPU twice, and on a VM each of those wakeups is an interprocessor
 * interrupt and a halted vCPU's exit: most of the cost of a round trip.
 *
 * libfuse 3.14 knows nothing of it, so this file speaks it.  A ring entry's
 * request is laid out as read(2) would return it and handed to
 * fuse_session_process_buf(); the answer comes back through the session's
 * custom writev (passthrough.c), which gives it to stage_uring_reply().
 * FORGET, INTERRUPT and notifications still go through /dev/fuse and
 * libfuse's own loop.  Once the INIT answer offers the rings, the kernel
 * holds every other request until each CPU's ring holds an entry: the
 * rings are made before that answer (stage_uring_prepare), which offers
 * them only if that worked, and registered after it (stage_uring_start).
 */
#include <errno.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <syslog.h>
#include <unistd.h>

#include "stage/stage.h"

/* Protocol 7.42 (Linux 6.14), absent from older headers. */
#define UR_HDR_IN_OUT 128
#define UR_HDR_OP 128
#define UR_IN_HEADER 40		/* struct fuse_in_header */
#define UR_OUT_HEADER 16	/* struct fuse_out_header */
#define UR_ROOM (UR_IN_HEADER + UR_HDR_OP)	/* before the payload: see serve() */
enum { UR_CMD_REGISTER = 1, UR_CMD_COMMIT_AND_FETCH = 2 };

struct ur_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;	/* the kernel's, handed back with the answer */
	uint32_t payload_sz;
	uint32_t padding;
	uint64_t reserved;
};

struct ur_header {
	char in_out[UR_HDR_IN_OUT];	/* fuse_in_header, then fuse_out_header */
	char op_in[UR_HDR_OP];		/* the operation's fixed argument */
	struct ur_ent_in_out ent;
};

/* In the 80-byte command area of a 128-byte SQE. */
struct ur_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

#define UR_ENTRIES 2		/* per CPU: one served, one waiting */
#define UR_QUEUES_MAX 256
#define UR_REREGISTER_MAX 64
#define UR_WAKE_SIGNAL SIGUSR2

struct ur_queue;

struct ur_ent {
	struct ur_queue *q;
	struct ur_header hdr;
	struct iovec iov[2];
	char *room;		/* UR_ROOM bytes, then the payload */
	/* under q->sq_lock: */
	uint64_t unique;	/* the request being served; 0: none */
	int serving;		/* in fuse_session_process_buf() */
	int answered;		/* the answer is in hdr and room */
};

struct ur_queue {
	struct stage_uring *u;
	int qid;
	int rfd;
	pthread_t thread;
	int running;
	pthread_mutex_t sq_lock;	/* a deferred answer may commit from another thread */
	void *sq_map, *cq_map, *sqe_map;
	size_t sq_len, cq_len, sqe_len;
	_Atomic unsigned *sq_tail, *cq_head, *cq_tail;
	unsigned *sq_head, sq_mask, *sq_array, cq_mask;
	struct io_uring_cqe *cqes;
	char *sqes;		/* 128-byte entries */
	unsigned to_submit;
	struct ur_ent ent[UR_ENTRIES];
};

struct stage_uring {
	struct stage *s;
	struct fuse_session *se;
	int fd;			/* /dev/fuse */
	size_t payload;
	int nq;
	atomic_int stop;
	atomic_ullong served;	/* requests answered through a ring */
	cpu_set_t cpus;		/* the process's, for what must not be pinned */
	struct ur_queue *q;
};

static __thread struct ur_ent *cur_ent;

static int ring_setup(struct ur_queue *q, unsigned entries)
{
	struct io_uring_params p;
	size_t sq_len, cq_len;

	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SQE128;
	q->rfd = (int)syscall(__NR_io_uring_setup, entries, &p);
	if (q->rfd < 0)
		return -errno;
	sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if (p.features & IORING_FEAT_SINGLE_MMAP) {
		if (cq_len > sq_len)
			sq_len = cq_len;
		cq_len = sq_len;
	}
	q->sq_len = sq_len;
	q->sq_map = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
			 q->rfd, IORING_OFF_SQ_RING);
	if (q->sq_map == MAP_FAILED)
		goto fail;
	if (p.features & IORING_FEAT_SINGLE_MMAP) {
		q->cq_map = q->sq_map;
	} else {
		q->cq_len = cq_len;
		q->cq_map = mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
				 q->rfd, IORING_OFF_CQ_RING);
		if (q->cq_map == MAP_FAILED)
			goto fail;
	}
	q->sqe_len = p.sq_entries * 128;
	q->sqe_map = mmap(NULL, q->sqe_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
			  q->rfd, IORING_OFF_SQES);
	if (q->sqe_map == MAP_FAILED)
		goto fail;
	q->sq_head = (unsigned *)((char *)q->sq_map + p.sq_off.head);
	q->sq_tail = (_Atomic unsigned *)((char *)q->sq_map + p.sq_off.tail);
	q->sq_mask = *(unsigned *)((char *)q->sq_map + p.sq_off.ring_mask);
	q->sq_array = (unsigned *)((char *)q->sq_map + p.sq_off.array);
	q->cq_head = (_Atomic unsigned *)((char *)q->cq_map + p.cq_off.head);
	q->cq_tail = (_Atomic unsigned *)((char *)q->cq_map + p.cq_off.tail);
	q->cq_mask = *(unsigned *)((char *)q->cq_map + p.cq_off.ring_mask);
	q->cqes = (struct io_uring_cqe *)((char *)q->cq_map + p.cq_off.cqes);
	q->sqes = q->sqe_map;
	return 0;
fail:
	return -errno;
}

static void ring_free(struct ur_queue *q)
{
	if (q->sqe_map && q->sqe_map != MAP_FAILED)
		munmap(q->sqe_map, q->sqe_len);
	if (q->cq_map && q->cq_map != MAP_FAILED && q->cq_map != q->sq_map)
		munmap(q->cq_map, q->cq_len);
	if (q->sq_map && q->sq_map != MAP_FAILED)
		munmap(q->sq_map, q->sq_len);
	if (q->rfd >= 0)
		close(q->rfd);
	q->rfd = -1;
}

/* Queue a command for e; q->sq_lock held.  The ring has room for all. */
static void sqe_put(struct ur_queue *q, struct ur_ent *e, unsigned cmd)
{
	unsigned tail = atomic_load_explicit(q->sq_tail, memory_order_relaxed);
	unsigned idx = tail & q->sq_mask;
	struct io_uring_sqe *sqe = (struct io_uring_sqe *)(q->sqes + (size_t)idx * 128);
	struct ur_cmd_req *req = (struct ur_cmd_req *)sqe->cmd;

	memset(sqe, 0, 128);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = q->u->fd;
	sqe->cmd_op = cmd;
	sqe->user_data = (uint64_t)(uintptr_t)e;
	if (cmd == UR_CMD_REGISTER) {
		sqe->addr = (uint64_t)(uintptr_t)e->iov;
		sqe->len = 2;
	} else {
		req->commit_id = e->hdr.ent.commit_id;
	}
	req->qid = (uint16_t)q->qid;
	q->sq_array[idx] = idx;
	atomic_store_explicit(q->sq_tail, tail + 1, memory_order_release);
	q->to_submit++;
}

/* Wake the ring's thread (its CQE has no entry); q->sq_lock held. */
static void nop_put(struct ur_queue *q)
{
	unsigned tail = atomic_load_explicit(q->sq_tail, memory_order_relaxed);
	unsigned idx = tail & q->sq_mask;
	struct io_uring_sqe *sqe = (struct io_uring_sqe *)(q->sqes + (size_t)idx * 128);

	memset(sqe, 0, 128);
	sqe->opcode = IORING_OP_NOP;
	q->sq_array[idx] = idx;
	atomic_store_explicit(q->sq_tail, tail + 1, memory_order_release);
	q->to_submit++;
}

static int ring_enter(struct ur_queue *q, unsigned submit, unsigned wait)
{
	int r = (int)syscall(__NR_io_uring_enter, q->rfd, submit, wait,
			     wait ? IORING_ENTER_GETEVENTS : 0, NULL, 0);

	return r < 0 ? -errno : r;
}

/* Submit what is queued; q->sq_lock held. */
static int sq_flush(struct ur_queue *q)
{
	while (q->to_submit) {
		int r = ring_enter(q, q->to_submit, 0);

		if (r == -EINTR)
			continue;
		if (r < 0)
			return r;
		q->to_submit -= (unsigned)r;
		if (!r)
			return -EBUSY;
	}
	return 0;
}

/* Answer e's request with an error of our own (bad layout). */
static void ent_fail(struct ur_ent *e, int err)
{
	char *o = e->hdr.in_out;
	uint32_t len = UR_OUT_HEADER;
	int32_t error = -err;

	memset(o, 0, UR_OUT_HEADER);
	memcpy(o, &len, 4);
	memcpy(o + 4, &error, 4);
	memcpy(o + 8, &e->unique, 8);
	e->hdr.ent.payload_sz = 0;
}

/*
 * Hand e's answer to the kernel and ask for its next request; q->sq_lock
 * held.  The ring's thread submits it with its next wait.
 */
static void ent_commit(struct ur_queue *q, struct ur_ent *e)
{
	e->unique = 0;
	sqe_put(q, e, UR_CMD_COMMIT_AND_FETCH);
	atomic_fetch_add(&q->u->served, 1);
}

static void serve(struct ur_queue *q, struct ur_ent *e)
{
	struct stage_uring *u = q->u;
	uint32_t len, opsz = 0;
	uint32_t payload = e->hdr.ent.payload_sz;
	uint64_t unique;
	struct fuse_buf buf;
	char *start;
	int bad;

	memcpy(&len, e->hdr.in_out, 4);
	memcpy(&unique, e->hdr.in_out + 8, 8);
	bad = len < UR_IN_HEADER + payload || payload > u->payload ||
	      (opsz = len - UR_IN_HEADER - payload) > UR_HDR_OP;
	pthread_mutex_lock(&q->sq_lock);
	e->unique = unique;
	e->answered = 0;
	e->serving = !bad;
	if (bad) {
		ent_fail(e, EIO);
		ent_commit(q, e);
	}
	pthread_mutex_unlock(&q->sq_lock);
	if (bad) {
		stage_log(u->s, LOG_ERR, "io_uring request %llu: length %u, payload %u: "
			  "not a layout we know", (unsigned long long)unique, len, payload);
		return;
	}
	/* As read(2) would lay it out, the payload where the kernel put it. */
	start = e->room + UR_ROOM - opsz - UR_IN_HEADER;
	memcpy(start, e->hdr.in_out, UR_IN_HEADER);
	memcpy(start + UR_IN_HEADER, e->hdr.op_in, opsz);
	memset(&buf, 0, sizeof(buf));
	buf.mem = start;
	buf.size = len;
	stage_pt_note_request(u->s, start, len);
	cur_ent = e;
	fuse_session_process_buf(u->se, &buf);
	cur_ent = NULL;
	pthread_mutex_lock(&q->sq_lock);
	e->serving = 0;
	/* Unanswered: another thread answers it later and commits it then. */
	if (e->answered)
		ent_commit(q, e);
	pthread_mutex_unlock(&q->sq_lock);
}

static int cqe_next(struct ur_queue *q, struct io_uring_cqe *out)
{
	unsigned head = atomic_load_explicit(q->cq_head, memory_order_relaxed);

	if (head == atomic_load_explicit(q->cq_tail, memory_order_acquire))
		return 0;
	*out = q->cqes[head & q->cq_mask];
	atomic_store_explicit(q->cq_head, head + 1, memory_order_release);
	return 1;
}

/* The CPUs a thread serving queue qid runs on: qid, if the daemon may. */
static void pin_set(const struct stage_uring *u, int qid, cpu_set_t *set)
{
	if (qid < CPU_SETSIZE && CPU_ISSET(qid, &u->cpus)) {
		CPU_ZERO(set);
		CPU_SET(qid, set);
	} else {
		*set = u->cpus;
	}
}

static void *queue_main(void *arg)
{
	struct ur_queue *q = arg;
	struct stage_uring *u = q->u;
	int live = UR_ENTRIES, err = 0, reregs = 0, i;
	struct io_uring_cqe cqe;
	cpu_set_t set;
	char name[16];

	snprintf(name, sizeof(name), "sqfs-ring%d", q->qid);
	pthread_setname_np(pthread_self(), name);
	/*
	 * On its CPU where the daemon may run there (taskset, CPUAffinity=),
	 * else on those it may: callers on a CPU denied to us still queue on
	 * its ring, and a thread may widen its own mask.  Off-line CPUs send
	 * nothing; the entries must exist all the same.
	 */
	pin_set(u, q->qid, &set);
	(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	pthread_mutex_lock(&q->sq_lock);
	for (i = 0; i < UR_ENTRIES; i++)
		sqe_put(q, &q->ent[i], UR_CMD_REGISTER);
	err = sq_flush(q);
	pthread_mutex_unlock(&q->sq_lock);
	while (!err && live && !atomic_load(&u->stop)) {
		unsigned n;
		int r;

		/* The answers of the last round go out with the wait for the next. */
		pthread_mutex_lock(&q->sq_lock);
		n = q->to_submit;
		pthread_mutex_unlock(&q->sq_lock);
		r = ring_enter(q, n, 1);
		if (r < 0 && r != -EINTR) {
			err = r;
			break;
		}
		if (r > 0) {
			pthread_mutex_lock(&q->sq_lock);
			q->to_submit -= (unsigned)r < q->to_submit ? (unsigned)r : q->to_submit;
			pthread_mutex_unlock(&q->sq_lock);
		}
		while (cqe_next(q, &cqe)) {
			struct ur_ent *e = (struct ur_ent *)(uintptr_t)cqe.user_data;

			if (!e) {
				/* Answers another thread gave: commit them here. */
				pthread_mutex_lock(&q->sq_lock);
				for (i = 0; i < UR_ENTRIES; i++) {
					struct ur_ent *x = &q->ent[i];

					if (x->unique && x->answered && !x->serving)
						ent_commit(q, x);
				}
				pthread_mutex_unlock(&q->sq_lock);
				continue;
			}
			if (cqe.res < 0) {
				/*
				 * Teardown answers every entry with ENOTCONN or
				 * ECANCELED.  A commit whose request the kernel no
				 * longer has leaves the entry with no request to
				 * fetch: register it anew, a bounded number of times.
				 */
				if (cqe.res == -ENOENT && reregs < UR_REREGISTER_MAX) {
					reregs++;
					pthread_mutex_lock(&q->sq_lock);
					e->unique = 0;
					sqe_put(q, e, UR_CMD_REGISTER);
					pthread_mutex_unlock(&q->sq_lock);
					continue;
				}
				if (cqe.res != -ENOTCONN && cqe.res != -ECANCELED)
					err = cqe.res;
				live--;
				continue;
			}
			serve(q, e);
		}
	}
	if (err && !atomic_load(&u->stop))
		stage_log(u->s, LOG_WARNING, "io_uring queue %d stopped: %s; "
			  "requests from that CPU wait for the unmount", q->qid, strerror(-err));
	return NULL;
}

/*
 * An answer on its way out (custom writev): if it belongs to a ring
 * entry, put it there and return 1 with *res set; 0 otherwise.
 */
/* Put an answer in x if x waits for one; q->sq_lock held.  1: taken. */
static int ent_answer(struct ur_queue *q, struct ur_ent *x, uint64_t unique,
		      const struct iovec *iov, int count, size_t total)
{
	size_t off = 0;
	int i;

	if (x->unique != unique || x->answered)
		return 0;
	memcpy(x->hdr.in_out, iov[0].iov_base, UR_OUT_HEADER);
	for (i = 1; i < count; i++) {
		memcpy(x->room + UR_ROOM + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	x->hdr.ent.payload_sz = (uint32_t)total;
	x->answered = 1;
	/*
	 * Only the ring's thread commits: the kernel delivers the entry's
	 * next request through the task_work of the thread that committed
	 * it, and another thread may block meanwhile (the sealer, in the
	 * kernel's invalidation of a name, waiting for a directory lock held
	 * by a create whose request would then never come).  A NOP, whose
	 * completion needs no task_work, wakes the ring's thread.
	 */
	if (!x->serving) {
		nop_put(q);
		(void)sq_flush(q);
	}
	return 1;
}

void stage_uring_answer_now(struct stage *s)
{
	struct ur_ent *e = cur_ent;

	(void)s;
	if (!e)
		return;
	pthread_mutex_lock(&e->q->sq_lock);
	if (e->serving && e->answered) {
		/* serve() then finds nothing left to commit. */
		e->serving = 0;
		e->answered = 0;
		ent_commit(e->q, e);
		(void)sq_flush(e->q);
	}
	pthread_mutex_unlock(&e->q->sq_lock);
	/* The entry is the kernel's again: nothing here may take it for ours. */
	cur_ent = NULL;
}

int stage_uring_reply(struct stage *s, const struct iovec *iov, int count, ssize_t *res)
{
	struct stage_uring *u = __atomic_load_n(&s->uring, __ATOMIC_ACQUIRE);
	uint64_t unique;
	size_t total = 0;
	int i, k, taken = 0;

	if (!u || count < 1 || iov[0].iov_len < UR_OUT_HEADER)
		return 0;
	memcpy(&unique, (const char *)iov[0].iov_base + 8, 8);
	if (!unique)
		return 0;	/* a notification */
	for (i = 1; i < count; i++)
		total += iov[i].iov_len;
	if (total > u->payload) {
		errno = EINVAL;
		*res = -1;
		return 1;
	}
	/* Most answers come from the thread serving the entry; look wider only if not. */
	if (cur_ent) {
		pthread_mutex_lock(&cur_ent->q->sq_lock);
		taken = ent_answer(cur_ent->q, cur_ent, unique, iov, count, total);
		pthread_mutex_unlock(&cur_ent->q->sq_lock);
	}
	for (i = 0; i < u->nq && !taken; i++) {
		struct ur_queue *q = &u->q[i];

		pthread_mutex_lock(&q->sq_lock);
		for (k = 0; k < UR_ENTRIES && !taken; k++)
			taken = ent_answer(q, &q->ent[k], unique, iov, count, total);
		pthread_mutex_unlock(&q->sq_lock);
	}
	if (taken)
		*res = (ssize_t)(iov[0].iov_len + total);
	return taken;
}

static int possible_cpus(void)
{
	FILE *f = fopen("/sys/devices/system/cpu/possible", "re");
	int a, b, n = 0;
	char sep;

	if (!f)
		return -errno;
	/* "0-1", "0", or a list: the highest number plus one. */
	while (fscanf(f, "%d", &a) == 1) {
		b = a;
		sep = 0;
		if (fscanf(f, "%c", &sep) == 1 && sep == '-' && fscanf(f, "%d", &b) != 1)
			break;
		if (b + 1 > n)
			n = b + 1;
		if (sep != '-' && sep != ',')
			break;
		if (sep == '-' && (fscanf(f, "%c", &sep) != 1 || sep != ','))
			break;
	}
	fclose(f);
	return n > 0 ? n : -EINVAL;
}

static void wake_handler(int sig)
{
	(void)sig;
}

int stage_uring_prepare(struct stage *s, struct fuse_session *se, int fd,
			uint32_t max_write, uint32_t max_pages, struct stage_uring **out)
{
	struct stage_uring *u;
	long page = sysconf(_SC_PAGESIZE);
	struct sigaction sa;
	int nq, i, k, err = 0;

	*out = NULL;
	if (s->uring)
		return -EALREADY;
	nq = possible_cpus();
	if (nq < 0)
		return nq;
	if (nq > UR_QUEUES_MAX)
		return -E2BIG;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->s = s;
	u->se = se;
	u->fd = fd;
	u->nq = nq;
	u->payload = 8192;
	if (max_write > u->payload)
		u->payload = max_write;
	if ((size_t)max_pages * (size_t)page > u->payload)
		u->payload = (size_t)max_pages * (size_t)page;
	if (pthread_getaffinity_np(pthread_self(), sizeof(u->cpus), &u->cpus)) {
		CPU_ZERO(&u->cpus);
		for (i = 0; i < nq && i < CPU_SETSIZE; i++)
			CPU_SET(i, &u->cpus);
	}
	u->q = calloc((size_t)nq, sizeof(*u->q));
	if (!u->q) {
		free(u);
		return -ENOMEM;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = wake_handler;	/* no SA_RESTART: interrupts the wait */
	sigaction(UR_WAKE_SIGNAL, &sa, NULL);
	for (i = 0; i < nq; i++) {
		struct ur_queue *q = &u->q[i];

		q->u = u;
		q->qid = i;
		q->rfd = -1;
		pthread_mutex_init(&q->sq_lock, NULL);
		err = ring_setup(q, 2 * UR_ENTRIES);
		for (k = 0; !err && k < UR_ENTRIES; k++) {
			struct ur_ent *e = &q->ent[k];

			e->q = q;
			/* Untouched pages stay unallocated: a big payload costs little. */
			e->room = mmap(NULL, UR_ROOM + u->payload, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (e->room == MAP_FAILED) {
				e->room = NULL;
				err = -errno;
				break;
			}
			e->iov[0].iov_base = &e->hdr;
			e->iov[0].iov_len = sizeof(e->hdr);
			e->iov[1].iov_base = e->room + UR_ROOM;
			e->iov[1].iov_len = u->payload;
		}
		if (err)
			break;
	}
	if (err) {
		u->nq = i + 1;
		s->uring = u;
		stage_uring_stop(s);
		return err;
	}
	*out = u;
	return 0;
}

void stage_uring_discard(struct stage *s, struct stage_uring *u)
{
	if (!u)
		return;
	/* no thread, nothing registered: stop only frees */
	__atomic_store_n(&s->uring, u, __ATOMIC_RELEASE);
	stage_uring_stop(s);
}

int stage_uring_start(struct stage *s, struct stage_uring *u)
{
	sigset_t all, old;
	int i, err = 0;

	__atomic_store_n(&s->uring, u, __ATOMIC_RELEASE);
	/* The threads take no signal but ours: libfuse's handlers belong to its loop. */
	sigfillset(&all);
	sigdelset(&all, UR_WAKE_SIGNAL);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (i = 0; i < u->nq; i++) {
		err = -pthread_create(&u->q[i].thread, NULL, queue_main, &u->q[i]);
		if (err)
			break;
		u->q[i].running = 1;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

void stage_uring_stop(struct stage *s)
{
	struct stage_uring *u = s->uring;
	int i, k;

	if (!u)
		return;
	atomic_store(&u->stop, 1);
	for (i = 0; i < u->nq; i++) {
		struct ur_queue *q = &u->q[i];

		while (q->running) {
			struct timespec ts;

			pthread_kill(q->thread, UR_WAKE_SIGNAL);
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 50 * 1000 * 1000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			if (!pthread_timedjoin_np(q->thread, NULL, &ts))
				q->running = 0;
		}
	}
	for (i = 0; i < u->nq; i++) {
		struct ur_queue *q = &u->q[i];

		/* Closing the ring cancels what the kernel still holds. */
		ring_free(q);
		for (k = 0; k < UR_ENTRIES; k++)
			if (q->ent[k].room)
				munmap(q->ent[k].room, UR_ROOM + u->payload);
		pthread_mutex_destroy(&q->sq_lock);
	}
	__atomic_store_n(&s->uring, NULL, __ATOMIC_RELEASE);
	free(u->q);
	free(u);
}

void stage_uring_unpin(struct stage *s)
{
	struct stage_uring *u = __atomic_load_n(&s->uring, __ATOMIC_ACQUIRE);

	if (u && cur_ent)
		(void)pthread_setaffinity_np(pthread_self(), sizeof(u->cpus), &u->cpus);
}

void stage_uring_repin(struct stage *s)
{
	struct stage_uring *u = __atomic_load_n(&s->uring, __ATOMIC_ACQUIRE);
	cpu_set_t set;

	if (!u || !cur_ent)
		return;
	pin_set(u, cur_ent->q->qid, &set);
	(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

uint64_t stage_uring_served(const struct stage *s)
{
	struct stage_uring *u = __atomic_load_n(&s->uring, __ATOMIC_ACQUIRE);

	return u ? atomic_load(&u->served) : 0;
}
