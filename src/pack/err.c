/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Where an input failed: the path kept whole, as deep as the tree goes. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "pack/pack.h"

void pack_err_path(struct pack_err *e, const char *fmt, ...)
{
	va_list ap;

	free(e->path);
	va_start(ap, fmt);
	if (vasprintf(&e->path, fmt, ap) < 0)
		e->path = NULL;
	va_end(ap);
}

void pack_err_clear(struct pack_err *e)
{
	free(e->path);
	e->path = NULL;
}
