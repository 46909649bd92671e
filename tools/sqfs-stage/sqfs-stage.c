/* SPDX-License-Identifier: GPL-2.0-or-later */
/* sqfs-stage: mount a writable staging tree that seals to a SquashFS image. */
#include <errno.h>
#include <signal.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "config.h"
#include "front.h"

const char prog[] = "sqfs-stage";

int main(int argc, char **argv)
{
	char **av = recover_args(&argc, argv);
	struct fuse_args args = FUSE_ARGS_INIT(argc, av);
	struct fuse_cmdline_opts fo;
	struct fuse_session *se = NULL;
	struct stage s;
	struct parse p = { .s = &s };
	struct stage_jnl_stats jst;
	char msg[2 * PATH_MAX];	/* may name the spool and the image */
	char *recover_err = NULL;
	int ret, marked = 0, status = CLI_EXIT_FAIL;

	/* Nothing of ours may be opened as 0, 1 or 2 (cli_stdio_open). */
	if (cli_stdio_open())
		return CLI_EXIT_FAIL;
	memset(&fo, 0, sizeof(fo));
	/* As libfuse would: a reader gone (sqfs-stage --help | head) is no error. */
	signal(SIGPIPE, SIG_IGN);
	/* A file size limit (ulimit -f) fails the write with EFBIG, not the daemon. */
	signal(SIGXFSZ, SIG_IGN);
	if (!av) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return CLI_EXIT_FAIL;
	}
	if (recover_options(&argc, &av, &recover_err)) {
		free_argv(av);
		return CLI_EXIT_FAIL;
	}
	args = (struct fuse_args)FUSE_ARGS_INIT(argc, av);
	memset(&s, 0, sizeof(s));
	s.prepack = 1;
	s.prepack_max = STAGE_PREPACK_MAX;
	s.datafd = -1;
	s.spoolfd = -1;
	s.claimfd = -1;
	s.final_status = CLI_EXIT_FAIL;
	/* Every exit goes through out_free: no leaks, also on usage errors. */
	cli_opts_init(&s.opts);
	s.opts.prefix = "-o ";
	if (fuse_opt_parse(&args, &p, NULL, opt_proc)) {
		if (!p.bad)
			fprintf(stderr, "%s: invalid arguments\n", prog);
		fprintf(stderr, "Try '%s --help'.\n", prog);
		status = CLI_EXIT_USAGE;
		goto out_free;
	}
	if (p.help) {
		usage(stdout);
		printf("\nFUSE options:\n");
		fuse_cmdline_help();
		fuse_lowlevel_help();
		status = cli_stdout_status(prog);
		goto out_free;
	}
	if (p.version) {
		printf("sqfs-stage %s (libfuse %s)\n%s\n", SQW_VERSION,
		       fuse_pkgversion(), sqw_comp_versions());
		status = cli_stdout_status(prog);
		goto out_free;
	}
	if (p.nonopts != 2) {
		fprintf(stderr, "%s: expected IMAGE and MOUNTPOINT\nTry '%s --help'.\n",
			prog, prog);
		status = CLI_EXIT_USAGE;
		goto out_free;
	}
	if (!*p.image || !*p.mnt) {
		fprintf(stderr, "%s: an empty %s\nTry '%s --help'.\n", prog,
			*p.image ? "MOUNTPOINT" : "IMAGE", prog);
		status = CLI_EXIT_USAGE;
		goto out_free;
	}
	if (cli_opts_finish(&s.opts, msg, sizeof(msg))) {
		fprintf(stderr, "%s: %s\n", prog, msg);
		status = CLI_EXIT_USAGE;
		goto out_free;
	}
	ret = check_fuse_args(&args, p.mnt);
	if (ret) {
		if (ret > 0)
			fprintf(stderr, "%s: invalid FUSE options\nTry '%s --help'.\n", prog, prog);
		status = ret > 0 ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
		goto out_free;
	}
	if (recover_err) {
		fprintf(stderr, "%s\n", recover_err);
		goto out_free;
	}
	s.file_max = sqw_file_size_max(s.opts.img.comp.block_size);
	if (s.file_max > STAGE_FILE_CAP)
		s.file_max = STAGE_FILE_CAP;
	if (p.allow_other && add_fuse_opt(&args, "-odefault_permissions"))
		goto out_free;
	if (check_image(&s, p.image) || check_image_free(&s) || check_mountpoint(p.mnt) ||
	    check_outside(&s, p.mnt, p.recover ? NULL : p.spool) || claim_image(&s))
		goto out_free;
	{
		/* libfuse's option syntax: ',' separates, '\\' escapes. */
		char *fsname = malloc(sizeof("-ofsname=") + 2 * strlen(s.image));
		char *q;
		const char *c;

		if (!fsname)
			goto out_free;
		q = stpcpy(fsname, "-ofsname=");
		for (c = s.image; *c; c++) {
			if (*c == ',' || *c == '\\')
				*q++ = '\\';
			*q++ = *c;
		}
		*q = '\0';
		ret = add_fuse_opt(&args, fsname);
		free(fsname);
		if (ret)
			goto out_free;
	}
	if (add_fuse_opt(&args, "-osubtype=sqfs-stage"))
		goto out_free;
	if (fuse_parse_cmdline(&args, &fo)) {
		fprintf(stderr, "Try '%s --help'.\n", prog);
		status = CLI_EXIT_USAGE;
		goto out_free;
	}
	if (p.recover && p.spool)
		fprintf(stderr, "%s: -o spool is ignored with -o recover\n", prog);
	ret = p.recover ? stage_spool_open(&s, p.recover, msg, sizeof(msg)) :
		stage_spool_make(&s, p.spool, msg, sizeof(msg));
	if (ret) {
		fprintf(stderr, "%s: %s\n", prog, msg);
		goto out_free;
	}
	if (mark_spool(&s, !!p.recover, &marked))
		goto out_spool;
	ret = spoolopts_write(&p.kept, s.spool, s.opts.img.mkfs_time, s.opts.img.all_time,
			      !s.no_sync);
	if (ret) {
		fprintf(stderr, "%s: %s/options: %s%s\n", prog, s.spool, strerror(-ret),
			full_hint(ret, !!p.recover));
		goto out_spool;
	}
	/* The definitions outlive a crash as the image options do. */
	if (p.recover && (ret = spoolopts_pseudo_merge(s.spool, &p.pseudo, msg, sizeof(msg)))) {
		fprintf(stderr, "%s: -o recover: %s\n", prog, msg);
		goto out_spool;
	}
	ret = spoolopts_pseudo_write(s.spool, &p.pseudo, !s.no_sync);
	if (ret) {
		fprintf(stderr, "%s: %s/pseudo: %s%s\n", prog, s.spool, strerror(-ret),
			full_hint(ret, !!p.recover));
		goto out_spool;
	}
	cli_fd_limit_raise();
	cli_unwinder_preload();
	if (stage_init(&s, getuid(), getgid())) {
		fprintf(stderr, "%s: out of memory\n", prog);
		goto out_spool;
	}
	ret = stage_jnl_open(&s, !!p.recover, &jst);
	if (ret) {
		if (p.recover)
			fprintf(stderr, "%s: recovering %s: %s%s\n", prog, s.spool,
				strerror(-ret), full_hint(ret, 1));
		else
			fprintf(stderr, "%s: creating the journal in %s: %s\n", prog, s.spool,
				strerror(-ret));
		goto out_spool;
	}
	if (marked && !s.no_sync && (ret = stage_volatile_clear(&s))) {
		fprintf(stderr, "%s: flushing the recovered spool %s: %s\n", prog, s.spool,
			strerror(-ret));
		goto out_spool;
	}
	if (p.recover)
		fprintf(stderr, "%s: recovered %llu inodes from %s (%llu journal batches; "
			"%llu bytes of a last batch cut short ignored; %llu entries dropped: "
			"files without data, directories' second names)\n", prog, (unsigned long long)s.inodes, s.spool,
			(unsigned long long)jst.batches, (unsigned long long)jst.torn_bytes,
			(unsigned long long)jst.dropped);
	if (p.recover && jst.detached)
		fprintf(stderr, "%s: warning: %llu files were still open for writing through the "
			"dead mount; the recovered tree holds what they held now, and what those "
			"programs write from here on is lost (stop them)\n", prog,
			(unsigned long long)jst.detached);
	if (p.recover && jst.later_batches)
		fprintf(stderr, "%s: warning: the journal breaks off after %llu bytes, yet %llu "
			"later batches in it check out: it was damaged there (or the machine "
			"lost power before an fsync), and the changes after that point are "
			"lost; check the tree before sealing\n", prog,
			(unsigned long long)jst.good_bytes, (unsigned long long)jst.later_batches);
	/* A recovered tree holds what the definitions made: no warning for those. */
	if (p.pseudo.n && (ret = stage_pseudo_apply(&s, &p.pseudo, p.recover ? NULL : stderr,
						    msg, sizeof(msg)))) {
		fprintf(stderr, "%s: -o pseudo_file: %s: %s\n", prog, msg, strerror(-ret));
		goto out_spool;
	}
	/*
	 * A mount made by mistake over an existing image, and unmounted at
	 * once, must not replace it with an empty one; sqfs-seal still can.
	 */
	{
		struct stat st;

		if (!p.recover && !p.pseudo.n && !stat(s.image, &st) && S_ISREG(st.st_mode)) {
			s.sealed_gen = s.gen;
			s.image_kept = 1;
		}
	}
	s.foreground = fo.foreground;
	se = fuse_session_new(&args, &stage_ops, sizeof(stage_ops), &s);
	s.se = se;
	if (!se) {
		fprintf(stderr, "%s: invalid FUSE options\n", prog);
		status = CLI_EXIT_USAGE;
		goto out_spool;
	}
	if (fuse_set_signal_handlers(se)) {
		fprintf(stderr, "%s: cannot set signal handlers\n", prog);
		goto out_session;
	}
	s.mnt = fo.mountpoint;
	if (fuse_session_mount(se, fo.mountpoint)) {
		fprintf(stderr, "%s: cannot mount %s\n", prog, fo.mountpoint);
		/*
		 * libfuse 3.14 only falls back to fusermount3 when /dev/fuse is
		 * missing, not when it may not be opened (mode 0600 where no
		 * udev rule made it 0666, as distributions do).
		 */
		if (geteuid() && access("/dev/fuse", R_OK | W_OK) && errno == EACCES)
			fprintf(stderr, "%s: /dev/fuse is not open to this user, so libfuse "
				"cannot mount; its mode is normally 0666 (crw-rw-rw-)\n", prog);
		goto out_signals;
	}
	/* Always: the hooks also pass O_TMPFILE, which libfuse 3.14 refuses. */
	if (stage_pt_attach(&s, se))
		fprintf(stderr, "%s: FUSE passthrough, io_uring and O_TMPFILE are off: "
			"cannot hook the session\n", prog);
	if (!fo.foreground)
		openlog("sqfs-stage", LOG_PID, LOG_USER);
	if (fuse_daemonize(fo.foreground)) {
		fuse_session_unmount(se);
		goto out_signals;
	}
	stage_claim_refresh(&s);
	if (fo.singlethread) {
		ret = fuse_session_loop(se);
	} else {
		struct fuse_loop_config *cfg = fuse_loop_cfg_create();

		fuse_loop_cfg_set_clone_fd(cfg, fo.clone_fd);
		fuse_loop_cfg_set_max_threads(cfg, fo.max_threads);
		ret = fuse_session_loop_mt(se, cfg);
		fuse_loop_cfg_destroy(cfg);
	}
	(void)ret;
	/*
	 * Before the unmount, whose final seal must have the tree to itself;
	 * a seal still running answers while the session (and a ring) can
	 * take its answer.
	 */
	stage_sealer_stop(&s);
	stage_uring_stop(&s);
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	/*
	 * The seal at unmount, once started, finishes: a second SIGTERM must
	 * not kill it half way without a word (kill -9 still does, and the
	 * spool stays for --recover).
	 */
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	fuse_session_destroy(se);	/* runs the final seal (destroy) */
	stage_handles_free(&s);
	stage_pt_free(&s);
	status = s.final_status;
	if (s.datafd >= 0)
		close(s.datafd);
	goto out_free;

out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
	stage_pt_free(&s);
out_spool:
	/* A spool we were asked to recover is never ours to remove. */
	if (!p.recover)
		stage_remove_spool(&s);
out_free:
	free(recover_err);
	stage_free(&s);
	free(fo.mountpoint);
	fuse_opt_free_args(&args);
	free_argv(av);
	free(p.image);
	free(p.mnt);
	free(p.spool);
	free(p.recover);
	spoolopts_free(&p.kept);
	pack_pseudo_free(&p.pseudo);
	stage_jnl_close(&s);
	if (s.spoolfd >= 0)
		close(s.spoolfd);
	free(s.image);
	free(s.spool);
	free(s.datadir);
	return status;
}
