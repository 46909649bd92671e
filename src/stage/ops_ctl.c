/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The control requests sqfs-seal and the status probe send: a getxattr of
 * STAGE_SEAL_XATTR or STAGE_STATUS_XATTR on the root.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "stage/ops.h"

/*
 * An error longer than the caller's buffer (a path nested 4096 levels deep
 * in names of 24 bytes is 100 KB) would come back as ERANGE, or E2BIG from
 * the kernel at 64 KiB, and name nothing: keep its start and its end (the
 * leaf and what went wrong), which fit.
 */
static void error_fit(char *val, size_t size)
{
	static const char cut[] = " [...] ";
	size_t len = strlen(val), head = 512, tail;

	if (len <= size || size < 2 * head)
		return;
	tail = size - head - (sizeof(cut) - 1);
	memcpy(val + head, cut, sizeof(cut) - 1);
	memmove(val + head + sizeof(cut) - 1, val + len - tail, tail + 1);
}

void stage_op_seal(fuse_req_t req, size_t size)
{
	struct stage *s = S(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	/*
	 * With allow_other, others may read the tree, not freeze it and
	 * rewrite IMAGE: the seal is the mounting user's (and root's).
	 */
	if (ctx->uid != 0 && ctx->uid != getuid()) {
		reply_err(req, EACCES);
		return;
	}
	if (!size) {
		/* Sizing probe: do not seal twice; promise enough room. */
		fuse_reply_xattr(req, 4096);
		return;
	}
	if (!stage_sealer_give(s, req, size))
		stage_seal_serve(s, req, size);
}

void stage_seal_serve(struct stage *s, fuse_req_t req, size_t size)
{
	char *msg = NULL, *val = NULL;
	struct stage_inval *inval;
	size_t ninval;
	int ret, cancelled;

	/* A seal still queued when sqfs-seal was interrupted: not begun. */
	if (fuse_req_interrupted(req)) {
		reply_err(req, EINTR);
		return;
	}
	/* Only where there is no sealer: a ring thread is pinned to its CPU. */
	stage_uring_unpin(s);
	lock(s);
	s->seal_req = req;
	ret = stage_seal(s, &msg);
	cancelled = ret && stage_seal_cancelled(s);
	s->seal_req = NULL;
	inval = s->inval;
	ninval = s->ninval;
	s->inval = NULL;
	s->ninval = s->inval_cap = 0;
	unlock(s);
	stage_pseudo_inval_send(s, inval, ninval);
	/*
	 * What the seal's pool freed stays in its threads' arenas otherwise:
	 * 50 seals (--keep) of a tree of 9 000 files left 146 MB resident
	 * for 16 MB in use.
	 */
	malloc_trim(0);
	stage_uring_repin(s);
	if (cancelled) {
		/* The caller is on its way out: a message would reach no one. */
		stage_log(s, LOG_NOTICE, "seal of %s cancelled: sqfs-seal was interrupted; "
			  "the staged tree and IMAGE are as they were", s->image);
		reply_err(req, EINTR);
		free(msg);
		return;
	}
	if (ret) {
		stage_log(s, LOG_ERR, "seal of %s failed: %s", s->image, msg ? msg : "out of memory");
		if (asprintf(&val, "error: %s", msg ? msg : "out of memory") < 0)
			val = NULL;
		else
			error_fit(val, size);
	} else {
		stage_log(s, LOG_INFO, "sealed %s", s->image);
		val = msg;
		msg = NULL;
	}
	if (!val)
		reply_err(req, ENOMEM);
	else
		reply_value(req, val, strlen(val), size);
	free(val);
	free(msg);
	/*
	 * A good moment to start the journal afresh (it only grows otherwise),
	 * but after the reply, which must then really go (a ring sends it
	 * once the handler returns): the image is complete, and the unmount
	 * that usually follows removes the journal anyway.  62 399 inodes
	 * take 27 ms to write again.
	 */
	stage_uring_answer_now(s);
	if (!ret) {
		lock(s);
		if (s->datafd >= 0) {
			ret = stage_jnl_rewrite(s);
			if (ret)
				stage_log(s, LOG_WARNING, "rewriting the journal in %s: %s",
					  s->spool, strerror(-ret));
		}
		unlock(s);
	}
}

void stage_op_status(fuse_req_t req, size_t size)
{
	struct stage *s = S(req);
	struct stage_bg_status st;
	char buf[1024];
	int len;

	if (!size) {
		/*
		 * Sizing probe: the numbers may grow a digit before the read
		 * that follows, which would then fail with ERANGE; promise
		 * room for any value instead (the read returns its length).
		 */
		fuse_reply_xattr(req, sizeof(buf));
		return;
	}
	lock(s);
	stage_bg_status(s, &st);
	len = snprintf(buf, sizeof(buf),
		       "{\"background\": %s, \"queued_files\": %llu, \"queued_bytes\": %llu, "
		       "\"busy\": %d, \"stored_blocks\": %llu, \"stored_bytes\": %llu, "
		       "\"open_writers\": %llu, \"passthrough\": %s, \"passthrough_opens\": %llu, "
		       "\"rehearsals\": %llu, \"rehearsal_current\": %s, "
		       "\"prepacked_fragments\": %llu, \"rehearsals_deferred\": %llu, "
		       "\"rehearsals_too_big\": %llu, "
		       "\"uring_requests\": %llu, \"killpriv\": %s, \"volatile\": %s}",
		       s->bg ? "true" : "false", (unsigned long long)st.queued_files,
		       (unsigned long long)st.queued_bytes, st.busy,
		       (unsigned long long)st.stored_blocks,
		       (unsigned long long)st.stored_bytes,
		       (unsigned long long)s->total_writers,
		       stage_pt_wanted(s) ? "true" : "false",
		       (unsigned long long)stage_pt_opens(s),
		       (unsigned long long)st.rehearsals,
		       st.rehearsal_current ? "true" : "false",
		       (unsigned long long)st.stored_frags,
		       (unsigned long long)st.rehearsals_deferred,
		       (unsigned long long)st.rehearsals_too_big,
		       (unsigned long long)stage_uring_served(s),
		       stage_pt_killpriv(s) ? "true" : "false",
		       s->no_sync ? "true" : "false");
	unlock(s);
	reply_value(req, buf, (size_t)len, size);
}
