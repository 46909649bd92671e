/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * sqfs-stage: the staged tree behind the FUSE mount and its seal to an image.
 *
 * Locking (v1): one mutex, stage->lock, guards the whole namespace and every
 * node's metadata (the ino table, directory entries, attributes, xattrs,
 * open counts, the dirty generation).  It is taken by every FUSE operation
 * except the data path: read, write and lseek run on the handle's own spool
 * fd without it and take it only afterwards, briefly, to update size and
 * times.  A seal holds it from start to end, so no metadata changes and no
 * file can be opened for writing while the image is written.  There is no
 * other lock, so there is no lock order to get wrong; code running under
 * stage->lock must never call back into the kernel mount (it would deadlock).
 */
#ifndef SQW_STAGE_H
#define SQW_STAGE_H

#define FUSE_USE_VERSION 314

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "cli/cli.h"
#include "sqw/tree.h"
#include "util/slab.h"

/* SquashFS stores names of up to 256 bytes (the kernel's FUSE lets 1024 through). */
#define STAGE_NAME_MAX 256
/*
 * Files larger than this fail with EFBIG at truncate, write and fallocate,
 * never only at the seal: the writer's own limit for the block size, and at
 * most 16 TiB (ext4's limit for a spool file, and a bound on the block list
 * the seal must hold and walk for a sparse file: 4 bytes a block).
 */
#define STAGE_FILE_CAP (1ull << 44)
#define STAGE_IO_SIZE (1u << 20)	/* max_write, st_blksize */
#define STAGE_TIMEOUT 86400.0	/* we are the only writer of our metadata */
#define STAGE_SEAL_XATTR "user.sqfs-stage.seal"
#define STAGE_SEAL_BUF 65536	/* sqfs-seal's buffer for the reply */
/* Read-only on the root: the background compression backlog, as JSON. */
#define STAGE_STATUS_XATTR "user.sqfs-stage.status"
/* The most a node's xattr names take listed (XATTR_LIST_MAX). */
#define STAGE_XATTR_LIST_MAX 65536

struct snode;

struct sdirent {
	struct sdirent *next;	/* hash chain */
	struct snode *node;
	/*
	 * Its place in listings (the d_off after it; they list in this
	 * order).  The kernel's listing cache is the directory's, not a
	 * handle's: a handle that read it resumes with its own request at a
	 * place another handle's listing gave, so a place must mean the same
	 * in every listing, however the directory changed in between.  Taken
	 * from the directory's counter: increasing in the order its entries
	 * were made, never reused (but see dir_renumber()).  32 bits fit
	 * where a name's slab class rounds up anyway, mostly.
	 */
	uint32_t cookie;
	uint16_t len;
	char name[];
};

/* Bytes of an entry named len bytes (from the stage's slab). */
#define SDIRENT_SIZE(len) (offsetof(struct sdirent, name) + (len) + 1)

struct sxattr {
	char *name;
	void *value;
	uint32_t size;		/* at most XATTR_SIZE_MAX */
	uint32_t hash;		/* of the name: a lookup compares few names */
};

/*
 * One per staged inode, a million of them in a big tree: what only one
 * file type uses shares a union, chosen by the type in mode (never changed
 * after the node is made; inode numbers are never reused).
 */
struct snode {
	fuse_ino_t ino;
	struct snode *hnext;	/* ino table chain */
	uint64_t nlookup;	/* kernel references (lookup counts) */
	uint32_t links;		/* directory entries naming this node */
	uint32_t opens, writers;	/* open handles, of which writable */
	mode_t mode;
	uid_t uid;
	gid_t gid;
	uint64_t size;		/* regular files: the spool file's size */
	struct timespec atime, mtime, ctime;
	struct sxattr *xattrs;
	uint32_t nxattrs;
	/* regular files: bg.c and prepack.c, under stage->lock */
	uint8_t bg_queued;
	uint8_t bg_never;	/* passthrough.c: may change unseen; seal only */
	uint8_t tdig_ok;	/* tdig is valid */
	/*
	 * An O_TMPFILE not linked yet: no entry names it, but its spool file
	 * still has its name, for a link to keep and a free to remove.
	 */
	uint8_t unnamed : 1;
	/*
	 * ops_file.c: the mtime was set explicitly, while the file was open
	 * for writing, after the last write we saw.  The kernel writes back
	 * pages dirtied through a shared mapping only later; such a write
	 * must not move a time set in between.
	 */
	uint8_t mtime_set : 1;
	/* node.c: its last name went while nothing had it open: no spool file */
	uint8_t data_gone : 1;
	uint64_t sqw_pass;	/* journal.c: reached in this walk */
	uint64_t jmark;		/* journal.c: marked in this operation */
	union {
		struct {	/* directories */
			struct snode *parent;
			struct sdirent **tab;
			uint32_t nslots, nents, nsubdirs;
			uint32_t ncookies;	/* entries made in it */
		};
		struct {	/* regular files */
			struct centry *cblk;	/* stored full blocks, by index */
			uint64_t wgen;		/* bumped by every data change */
			uint32_t ncblk;
			/*
			 * prepack.c: the digest of the tail (the last
			 * size % block_size bytes) as the writer computes
			 * it, valid while tdig_ok; any data change clears it
			 * (stage_bg_changed).
			 */
			uint8_t tdig[16];
			/*
			 * The spool file's st_blocks as last seen (saturated),
			 * for du and for tools that look for holes by it.
			 */
			uint32_t nblk;
		};
		char *target;	/* symlinks */
		dev_t rdev;	/* devices: read it with node_rdev() */
	};
};

static inline dev_t node_rdev(const struct snode *n)
{
	return S_ISCHR(n->mode) || S_ISBLK(n->mode) ? n->rdev : 0;
}

/*
 * A regular file's data is SPOOL/data/INO, its inode number in decimal:
 * the name the journal's replay looks for, so every caller makes it here.
 */
#define STAGE_SPOOL_NAME_SIZE 21	/* UINT64_MAX's 20 digits and a NUL */

static inline void node_set_blocks(struct snode *n, blkcnt_t blocks)
{
	n->nblk = blocks < 0 ? 0 : blocks > (blkcnt_t)UINT32_MAX ? UINT32_MAX : (uint32_t)blocks;
}

static inline const char *stage_spool_name(char buf[STAGE_SPOOL_NAME_SIZE], uint64_t ino)
{
	snprintf(buf, STAGE_SPOOL_NAME_SIZE, "%llu", (unsigned long long)ino);
	return buf;
}

/* A full block stored ahead of the seal: word as in the block list. */
struct centry {
	uint64_t off;		/* in SPOOL/blocks; UINT64_MAX: the file's own bytes */
	uint32_t word;		/* UINT32_MAX: none */
};

struct stage_bg;
struct fhandle;

/*
 * The ids the image will store (uid and gid after all_root and force_*;
 * SquashFS keeps one table of at most SQW_IDS_MAX for both), each with the
 * number of node fields using it, so that a chown away from an id frees it.
 * Every live node counts, also one unlinked but still open: a superset of
 * what a seal writes, so a seal never meets more ids than were allowed.
 */
struct stage_idslot {
	uint32_t id;
	uint32_t refs;		/* 0: empty slot */
};

struct stage_ids {
	struct stage_idslot *tab;	/* open addressing, linear probing */
	size_t cap, n;			/* slots (a power of two), distinct ids */
};

struct stage_bg_status {
	uint64_t queued_files, queued_bytes;
	uint64_t stored_blocks, stored_bytes;
	int busy;
	uint64_t rehearsals, stored_frags, rehearsals_deferred;	/* prepack.c */
	uint64_t rehearsals_too_big;
	int rehearsal_current;		/* the last one saw the tree as it is */
};

/*
 * What a seal's pseudo definitions changed that the kernel caches
 * (pseudo.c): the name in directory ino, or with name NULL inode ino.
 */
struct stage_inval {
	fuse_ino_t ino;
	char *name;
};

struct stage {
	const struct pack_pseudo *pseudo;	/* -o pseudo_file, or NULL */
	struct stage_inval *inval;	/* what the last seal changed */
	size_t ninval, inval_cap;
	pthread_mutex_t lock;
	pthread_cond_t released;	/* signalled when a writer closes */
	struct cli_opts opts;
	char *image;		/* absolute */
	const char *mnt;	/* the mountpoint, absolute (for messages) */
	char *spool;		/* absolute spool directory */
	char *datadir;		/* spool/data */
	int datafd;
	int spoolfd;		/* holds the flock that makes the spool ours */
	int claimfd;		/* the claim on IMAGE (claim.c), or -1 */
	int foreground;
	unsigned max_read;	/* -o max_read (0: none), which init must repeat */
	/* nodes and entries are carved from here (node.c) */
	struct slab slab;
	/* ino table */
	struct snode **itab;
	size_t islots, inodes;
	fuse_ino_t next_ino;
	/* The spool files of regular nodes below this number have durable names. */
	fuse_ino_t names_synced;
	struct snode *root;
	uint64_t total_writers;
	/*
	 * Of them, writers of files no entry names (unlinked, or O_TMPFILE
	 * not linked yet): the image cannot see them, so a seal does not wait.
	 */
	uint64_t unnamed_writers;
	struct stage_ids ids;
	uint64_t file_max;	/* EFBIG beyond: see STAGE_FILE_CAP */
	struct stage_bg *bg;	/* NULL: no background compression */
	struct stage_pp *pp;	/* with bg: fragment blocks compressed ahead */
	int no_background;	/* -o no_background */
	struct stage_jnl *jnl;	/* NULL: no journal (replay in progress) */
	struct stage_pt *pt;	/* protocol hooks: passthrough, io_uring */
	int no_passthrough;
	struct stage_uring *uring;	/* NULL: requests through /dev/fuse only */
	struct stage_spare *spare;	/* spool files made ahead (spare.c) */
	struct stage_syncer *syncer;	/* fsync's second flusher (syncer.c) */
	struct stage_sealer *sealer;	/* seal requests' thread (sealer.c) */
	fuse_req_t seal_req;	/* the seal request being served, or NULL */
	int no_uring;
	int no_sync;		/* -o volatile (volatile.c) */
	int prepack;		/* rehearsals (prepack.c): 0 never (-o no_prepack),
				 * 1 when the CPU is idle enough (default),
				 * 2 always (-o prepack) */
	size_t prepack_max;	/* ... only while at most this many inodes are
				 * staged (-o prepack_max=N; prepack.c) */
	struct fuse_session *se;	/* for notifications; NULL before the mount */
	/* sealing */
	uint64_t gen, sealed_gen;	/* changes so far / at the last good seal */
	int image_kept;		/* an existing IMAGE outlives an unmount with
				 * nothing staged (sealed_gen = gen at the start) */
	/* ops_file.c: every open file handle (for a connection that ends). */
	struct fhandle *handles;
	/* The last good seal's summary, and its image as it left it (seal.c). */
	char *last_summary;
	struct stat last_image;
	uint64_t pass;
	int final_status;	/* exit status of the daemon */
	/*
	 * /dev/fuse said ENODEV: the kernel ended the connection because the
	 * superblock went, so no file of the mount is open any more (atomic).
	 */
	int conn_gone;
	int fd_short_logged;	/* EMFILE or ENFILE reported once (atomic) */
	unsigned spool_gone_logged;	/* under lock */
	/* The last removal of security.capability: whose, by whom (ops_xattr.c). */
	fuse_ino_t capdrop_ino;
	pid_t capdrop_pid;
};

/* node.c */
/*
 * claim.c: IMAGE is this process's to write until stage_claim_release()
 * or its exit.  -EBUSY: another process's, *holder its pid (0 if unknown).
 */
int stage_claim_image(struct stage *s, pid_t *holder);
void stage_claim_refresh(struct stage *s);
void stage_claim_release(struct stage *s);

int stage_init(struct stage *s, uid_t uid, gid_t gid);
void stage_free(struct stage *s);
struct snode *stage_get(struct stage *s, fuse_ino_t ino);
struct snode *stage_new_node(struct stage *s, mode_t mode, uid_t uid, gid_t gid,
			     dev_t rdev);
struct snode *stage_new_node_ino(struct stage *s, fuse_ino_t ino, mode_t mode,
				 uid_t uid, gid_t gid, dev_t rdev);
/* Owner change, id counts included; -ENOMEM. */
int stage_node_set_owner(struct stage *s, struct snode *n, uid_t uid, gid_t gid);
/*
 * Would n (NULL: a new node) owned by uid:gid keep the image within
 * SQW_IDS_MAX distinct ids?  0 or -EOVERFLOW.
 */
int stage_ids_check(const struct stage *s, const struct snode *n, uid_t uid, gid_t gid);
/* Free n and its entries (not the nodes they name), whatever its counts. */
void stage_node_drop(struct stage *s, struct snode *n);
void stage_maybe_free(struct stage *s, struct snode *n);
struct sdirent *dir_find(const struct snode *dir, const char *name, size_t len);
int dir_add(struct stage *s, struct snode *dir, const char *name, size_t len,
	    struct snode *n);
/* Remove the entry (must exist); does not free the node. */
void dir_del(struct stage *s, struct snode *dir, const char *name, size_t len);
void node_stat(const struct snode *n, struct stat *st);
void node_touch(struct snode *n, int mtime, int ctime);
/* A name lost its link; unlinks the spool file with the last one. */
/* A name of n went; replaced: by a rename over it. */
void node_unlinked(struct stage *s, struct snode *n, int replaced);
int xattr_set(struct snode *n, const char *name, const void *v, size_t size, int flags);
const struct sxattr *xattr_get(const struct snode *n, const char *name);
int xattr_remove(struct snode *n, const char *name);
/* 0, or the errno a name outside what SquashFS stores gets. */
int xattr_name_check(const char *name);
/* ops_file.c: at exit, the handles of files still open (no request comes). */
void stage_handles_free(struct stage *s);

/*
 * bg.c: background compression of closed files.  Everything but start and
 * stop is called with stage->lock held.
 */
int stage_bg_start(struct stage *s);
void stage_bg_stop(struct stage *s);
/* Data of n in [off, off+len) changed (len UINT64_MAX: to the end). */
void stage_bg_changed(struct stage *s, struct snode *n, uint64_t off, uint64_t len);
/* A writer of n closed: queue its missing full blocks if it was the last. */
void stage_bg_released(struct stage *s, struct snode *n);
/* n goes away: its stored blocks too (their space back to the spool). */
void stage_bg_forget(struct stage *s, struct snode *n);
/* Queue every closed file (after a recovery). */
void stage_bg_queue_all(struct stage *s);
/* Seal: stop the thread between files / let it go on. */
void stage_bg_pause(struct stage *s);
void stage_bg_resume(struct stage *s);
/*
 * 1 and the stored block index of n in buf/word, 0 if none; 2 and word
 * alone when the stored form is the block's own bytes in n's spool file.
 */
int stage_bg_stored(struct stage *s, const struct snode *n, uint32_t index,
		    void *buf, uint32_t *word);
/*
 * The same without a read: 1 with where the stored form is (*fd, *off:
 * SPOOL/blocks, unchanged while the background is paused) or a hole; 0
 * for none, and for one stored as the file's own bytes.
 */
int stage_bg_stored_at(struct stage *s, const struct snode *n, uint32_t index,
		       int *fd, uint64_t *off, uint32_t *word);
/* SPOOL/blocks' descriptor, for reads at offsets stage_bg_append gave; -1: none. */
int stage_bg_store_fd(const struct stage *s);
void stage_bg_status(const struct stage *s, struct stage_bg_status *st);
/*
 * For prepack.c, from the background thread: append a stored form to
 * SPOOL/blocks (its offset in *off; -errno when the spool is full), read
 * one back (any thread, while the background is paused or is the caller),
 * give one's room back; and whether a seal or a stop wants the thread.
 */
int stage_bg_append(struct stage *s, const void *data, uint32_t len, uint64_t *off);
int stage_bg_read(struct stage *s, uint64_t off, void *buf, uint32_t len);
void stage_bg_punch(struct stage *s, uint64_t off, uint32_t word);
int stage_bg_interrupted(const struct stage *s);

/*
 * prepack.c: fragment blocks compressed before the seal.  Between seals
 * the background thread runs the writer's data pass over the staged tree
 * (a rehearsal), and keeps the fragment blocks it compressed under a hash
 * of their contents; the seal builds its fragment blocks as always and
 * takes the stored form of each one whose contents it finds.  The image
 * does not depend on any of this: a block found is byte for byte what
 * compressing it would give, and one not found is compressed.
 */
struct stage_pp;
/* -o prepack_max's default: see prepack.c */
#define STAGE_PREPACK_MAX 200000
/* always: -o prepack, rehearse whatever the CPU is doing (else: when idle). */
struct stage_pp *stage_pp_create(int always);
void stage_pp_free(struct stage *s, struct stage_pp *pp);
/* Background thread, stage->lock held: run a rehearsal now? *wait: when. */
int stage_pp_due(struct stage *s, struct timespec *wait);
/* Background thread, stage->lock not held (taken to copy the tree). */
void stage_pp_rehearse(struct stage *s);
/* sqw_source_ops.stored_frag, tail_digest, tail_seen for the seal (ctx: the stage). */
int stage_pp_stored(void *ctx, const uint8_t key[16], uint32_t len, void *buf,
		    uint32_t *word);
int stage_pp_stored_at(void *ctx, const uint8_t key[16], uint32_t len, int *fd,
		       uint64_t *off, uint32_t *word);
int stage_pp_tail_digest(void *ctx, void *src, uint64_t size, uint32_t len,
			 uint8_t digest[16], uint64_t *token);
void stage_pp_tail_seen(void *ctx, void *src, uint64_t size, uint32_t len,
			const uint8_t digest[16], uint64_t token);
/*
 * stage->lock held: rehearsals run, fragment blocks kept, looks refused for
 * the tree's size (prepack_max), rehearsals put off while the CPU was busy,
 * up to date.
 */
void stage_pp_counts(const struct stage *s, uint64_t *rehearsals, uint64_t *frags, uint64_t *too_big,
		     uint64_t *deferred, int *current);
/* seal.c: the staged tree for a rehearsal (open files as they are). */
sqw_tree_t *stage_tree_rehearsal(struct stage *s);

/*
 * journal.c: the metadata journal in SPOOL/journal (see there).  Called with
 * stage->lock held; stage_jnl_flush when an operation drops it.
 */
struct stage_jnl;
struct stage_jnl_stats {
	uint64_t batches, good_bytes, torn_bytes, dropped;
	uint64_t later_batches;	/* ones that check out after the break */
	uint64_t detached;	/* data files still open through the dead mount */
};
/* Start a journal, or (recover) replay SPOOL/journal into s first. */
int stage_jnl_open(struct stage *s, int recover, struct stage_jnl_stats *st);
void stage_jnl_close(struct stage *s);
/* Give back the space taken ahead of the journal's end (before a seal). */
void stage_jnl_trim(struct stage *s);
/* n's attributes changed (written at flush, as they are then). */
void stage_jnl_node(struct stage *s, const struct snode *n);
/* An entry was added (child) or removed (child NULL). */
void stage_jnl_dirent(struct stage *s, const struct snode *dir, const char *name,
		      size_t len, const struct snode *child);
void stage_jnl_xattr(struct stage *s, const struct snode *n, const char *name,
		     const void *value, size_t size, int remove);
void stage_jnl_flush(struct stage *s);
/*
 * fsync: make everything so far durable, flushing only what changed since
 * the last one.  plan (lock held; -EIO if the journal fell behind), run (no
 * lock, or in the syncer), done (lock held).  See journal.c.
 */
struct stage_jnl_plan {
	int fd;			/* a dup of the journal to fdatasync; -1: none */
	uint64_t size;		/* the journal bytes that makes durable */
	uint64_t rewrites;	/* the journal's snapshots when planned */
	int names;		/* flush the spool directory, datafd ... */
	int datafd;
	fuse_ino_t below;	/* ... which makes the names below this durable */
};
int stage_jnl_plan(struct stage *s, fuse_ino_t ino, struct stage_jnl_plan *p);
int stage_jnl_plan_run(const struct stage_jnl_plan *p);
void stage_jnl_plan_done(struct stage *s, struct stage_jnl_plan *p, int ret);
/* Start over from a snapshot of the tree (after a seal or a recovery). */
int stage_jnl_rewrite(struct stage *s);

/*
 * passthrough.c: the kernel reads and writes open files' spool files itself.
 * All but attach and free are called with stage->lock held.
 */
struct stage_pt;
/* Install the protocol hooks on se (after it is mounted); -errno. */
int stage_pt_attach(struct stage *s, struct fuse_session *se);
void stage_pt_free(struct stage *s);
/* The kernel offered passthrough and we still try it. */
int stage_pt_wanted(const struct stage *s);
/* Opens answered in passthrough so far. */
uint64_t stage_pt_opens(const struct stage *s);
/*
 * A handle on n with spool fd and open flags is about to be answered:
 * returns the backing id its reply carries (0: none) or -errno.
 */
int stage_pt_open(struct stage *s, struct snode *n, int *fd, int flags, int *shared);
/* Fold the kernel's writes to n's spool file into n. */
void stage_pt_sync(struct stage *s, struct snode *n);
/* We changed n's data or times ourselves: copy its mtime to the spool file. */
void stage_pt_settled(struct stage *s, struct snode *n);
/* A handle on n closes (writer: it could write); 1 if it was passthrough. */
int stage_pt_release(struct stage *s, struct snode *n, int writer);
/* A request read from the kernel, before it is processed (any thread). */
void stage_pt_note_request(struct stage *s, void *buf, size_t len);
/* The kernel offered FUSE over io_uring and we take it. */
int stage_pt_ring_wanted(const struct stage *s);
/* We took FUSE_HANDLE_KILLPRIV_V2. */
int stage_pt_killpriv(const struct stage *s);

/*
 * spare.c: spool files for the next inode numbers, made ahead by a helper.
 * take: the open spare for ino (stage lock held), or -1: make it yourself.
 */
struct stage_spare;
int stage_spare_start(struct stage *s);
int stage_spare_take(struct stage *s, fuse_ino_t ino);
void stage_spare_stop(struct stage *s);

/*
 * syncer.c: a thread that runs an fsync's journal flushes while the
 * request's thread flushes the file.  give: 1 if it took plan p (then wait
 * for its result), 0 if busy or absent (run p yourself).
 */
struct stage_syncer;
int stage_syncer_start(struct stage *s);
int stage_syncer_give(struct stage *s, const struct stage_jnl_plan *p);
int stage_syncer_wait(struct stage *s);
void stage_syncer_stop(struct stage *s);

/*
 * sealer.c: the thread seal requests run in, so that the request threads
 * go on serving meanwhile.  give: 1 if it took the request (and answers
 * it), 0 if absent or stopped (serve it yourself).  stop runs what was
 * given, then ends the thread; requests may still come (a ring's), so
 * free waits until none can.
 */
struct stage_sealer;
int stage_sealer_start(struct stage *s);
int stage_sealer_give(struct stage *s, fuse_req_t req, size_t size);
void stage_sealer_stop(struct stage *s);
void stage_sealer_free(struct stage *s);

/*
 * uring.c: requests through one io_uring per CPU (Linux 6.14+, fuse module
 * parameter enable_uring).  Prepare before the INIT answer, which offers
 * the rings only if that worked; start once the kernel has that answer
 * (or discard them); stop after the session loop has ended.
 */
struct stage_uring;
int stage_uring_prepare(struct stage *s, struct fuse_session *se, int fd,
			uint32_t max_write, uint32_t max_pages, struct stage_uring **out);
void stage_uring_discard(struct stage *s, struct stage_uring *u);
int stage_uring_start(struct stage *s, struct stage_uring *u);
void stage_uring_stop(struct stage *s);
/* An answer for a ring entry goes there: 1 and *res, else 0. */
int stage_uring_reply(struct stage *s, const struct iovec *iov, int count, ssize_t *res);
/* Requests answered through the rings so far. */
uint64_t stage_uring_served(const struct stage *s);
/*
 * A ring's thread is pinned to its CPU, and threads it starts would be too:
 * around work that starts threads (the seal's pool), unpin it; no-ops on
 * any other thread.
 */
void stage_uring_unpin(struct stage *s);
void stage_uring_repin(struct stage *s);
/*
 * A ring's answers go to the kernel with the thread's next wait, once the
 * handler returns.  A handler with more to do after its answer sends it
 * now with this, and must not touch its request afterwards (the entry is
 * the kernel's again).  A no-op on any other thread: /dev/fuse answers at
 * once.
 */
void stage_uring_answer_now(struct stage *s);

/* ops.c */
extern const struct fuse_lowlevel_ops stage_ops;
void stage_log(const struct stage *s, int prio, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A helper thread that takes no signal (libfuse's handlers belong to its loop). */
int stage_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

/*
 * seal.c: write the image from the staged tree; called with stage->lock
 * held.  Returns 0 and a malloc'ed JSON summary in *out, or -1 and a
 * malloc'ed message.
 */
int stage_seal(struct stage *s, char **out);
/*
 * sqfs-seal was interrupted (a signal: Ctrl-C, timeout, kill): the seal
 * stops at its next file, block or directory with -ECANCELED.
 */
int stage_seal_cancelled(const struct stage *s);
/* A seal was made, and IMAGE is still the file it wrote (lock held). */
int stage_image_is_sealed(struct stage *s);

/*
 * pseudo.c: -o pseudo_file definitions into the tree, before the mount
 * (ps is kept for the seals: it must outlive s); warnings to warn, and
 * msg says why one did not fit.
 */
struct pack_pseudo;
int stage_pseudo_apply(struct stage *s, const struct pack_pseudo *ps, FILE *warn,
		       char *msg, size_t msglen);
/* At a seal (lock held): the definitions again; what changed goes to s->inval. */
int stage_pseudo_reapply(struct stage *s, char *msg, size_t msglen);
/* Without the lock: the kernel forgets what it cached of v (freed). */
void stage_pseudo_inval_send(struct stage *s, struct stage_inval *v, size_t n);
/*
 * spool.c.  Make a fresh spool for s->image, in the directory where (NULL:
 * beside the image), or take over the spool where of a daemon that died
 * (-o recover); either sets s->spool, s->datadir, s->datafd and locks the
 * spool (s->spoolfd).  0, or -errno with msg saying what failed.
 */
int stage_spool_make(struct stage *s, const char *where, char *msg, size_t len);
int stage_spool_open(struct stage *s, const char *where, char *msg, size_t len);
/* Remove the spool directory and everything in it. */
void stage_remove_spool(struct stage *s);
/*
 * 1 when the spool directory or its data directory was removed behind our
 * back (a cleaner of old files in /tmp): the staged data is gone.
 */
int stage_spool_gone(const struct stage *s);

/* volatile.c: SPOOL/volatile, the mark of a spool whose fsyncs flush nothing. */
int stage_volatile_mark(struct stage *s);	/* durable before returning */
/* 0: no mark (*marked 0) or this boot's; -ESTALE: another boot's. */
int stage_volatile_check(struct stage *s, int *marked);
int stage_volatile_clear(struct stage *s);	/* flush the spool, drop the mark */

#endif
