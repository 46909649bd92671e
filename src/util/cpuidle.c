/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdio.h>

#include "util/cpuidle.h"

/* Idle and total CPU time of the machine so far, in ticks; -1: unknown. */
static int cpu_ticks(uint64_t *idle, uint64_t *total)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "re");
	int n, i;

	if (!f)
		return -1;
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
		   &v[3], &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	if (n < 5)
		return -1;
	*idle = v[3] + v[4];	/* idle, iowait */
	for (*total = 0, i = 0; i < 8; i++)
		*total += v[i];
	return 0;
}

void cpu_window_mark(struct cpu_window *w)
{
	if (cpu_ticks(&w->idle0, &w->total0))
		w->total0 = 0;
}

int cpu_window_spare(struct cpu_window *w, unsigned min_pct, uint64_t min_ticks)
{
	uint64_t idle, total, i0 = w->idle0, t0 = w->total0;

	if (cpu_ticks(&idle, &total))
		return 1;	/* no /proc: never in the way of the work */
	if (t0 && total >= t0 && total - t0 < min_ticks)
		return 0;
	w->idle0 = idle;
	w->total0 = total;
	if (!t0 || total <= t0)
		return 0;	/* no window yet */
	if (idle < i0)
		return 0;	/* iowait may go backwards (proc(5)) */
	return (idle - i0) * 100 >= (total - t0) * min_pct;
}
