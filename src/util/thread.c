/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <sched.h>

#include "util/thread.h"

int thread_start_idle(pthread_t *th, void *(*fn)(void *), void *arg)
{
	struct sched_param p = { 0 };
	pthread_attr_t a;
	int ret;

	if (!pthread_attr_init(&a)) {
		ret = -1;
		if (!pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED) &&
		    !pthread_attr_setschedpolicy(&a, SCHED_IDLE) &&
		    !pthread_attr_setschedparam(&a, &p))
			ret = pthread_create(th, &a, fn, arg);
		pthread_attr_destroy(&a);
		if (!ret)
			return 0;
	}
	ret = pthread_create(th, NULL, fn, arg);
	return -ret;
}
