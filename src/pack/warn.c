/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Warnings from the inputs, in the front ends' "PROG: warning: " form. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "pack/pack.h"

void pack_warn(FILE *warn, const char *fmt, ...)
{
	va_list ap;

	if (!warn)
		return;
	/* A log read later, or a pipeline's stderr, names who complained. */
	fprintf(warn, "%s: warning: ", program_invocation_short_name);
	va_start(ap, fmt);
	vfprintf(warn, fmt, ap);
	va_end(ap);
}
