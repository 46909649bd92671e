/*
 * SQFS_TEST_QUICK=1: tools/test.sh sets it for the valgrind and sanitizer
 * runs, where the codecs and the instrumentation cost most of the time.
 * The tests then make the same calls on less data or fewer combinations;
 * the normal mode runs them all.
 */
#ifndef SQFS_TEST_QUICK_H
#define SQFS_TEST_QUICK_H

#include <stdlib.h>
#include <string.h>

static inline int test_quick(void)
{
	const char *q = getenv("SQFS_TEST_QUICK");

	return q && !strcmp(q, "1");
}

#endif
