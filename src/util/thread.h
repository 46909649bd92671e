/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef SQW_THREAD_H
#define SQW_THREAD_H

#include <pthread.h>

/*
 * Start fn(arg) in a thread of its own under SCHED_IDLE (the threads it
 * makes inherit the policy), so that it takes only CPU time nobody else
 * wants; where the policy is refused, under the default one.  0 or -errno.
 */
int thread_start_idle(pthread_t *th, void *(*fn)(void *), void *arg);

#endif
