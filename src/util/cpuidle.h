/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Was the machine's CPU idle enough lately?  For work that only pays when
 * it fills time nobody else wants (rehearsals: sqfs-stage's prepack.c,
 * sqfs-pack's rehearse.c), judged from /proc/stat since a mark.
 */
#ifndef SQW_CPUIDLE_H
#define SQW_CPUIDLE_H

#include <stdint.h>

struct cpu_window {
	uint64_t idle0, total0;	/* /proc/stat at the mark; total0 0: none */
};

/* Start a window now. */
void cpu_window_mark(struct cpu_window *w);
/*
 * 1 if at least min_pct of the CPU time since the mark was idle (or
 * /proc/stat cannot be read), and marks again; 0 if not, or if the window
 * is shorter than min_ticks (10 ms of one CPU each), in which case the
 * mark stays.
 */
int cpu_window_spare(struct cpu_window *w, unsigned min_pct, uint64_t min_ticks);

#endif
