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

/*
 * A capability the test needs is missing: cmocka's skip(), or under
 * CI=true (tools/test.sh in CI) a failure, as the suites' skip_or_fail.
 */
#define skip_or_fail(why)                                                    \
	do {                                                                 \
		const char *ci_ = getenv("CI");                              \
		if (ci_ && !strcmp(ci_, "true"))                             \
			fail_msg("%s (a missing capability fails when CI=true)", \
				 (why));                                     \
		print_message("skipped: %s\n", (why));                       \
		skip();                                                      \
	} while (0)

#endif
