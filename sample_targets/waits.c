/*
 * waits.c - where a thread's time goes off the CPU: the ground truth of --mode wall and
 * --mode off-cpu.
 *
 * Its main thread repeats a 40 ms cycle (--cycle-ms scales it): 10 ms of its own
 * CPU time in cpu_part, 20 ms asleep in nanosleep under sleep_part, 10 ms in a timed
 * condition-variable wait (a futex) under wait_part that nobody signals. Of wall time,
 * 25 / 50 / 25 %; of off-CPU time, 67 / 33 %; of CPU time, cpu_part all of it.
 *
 * --busy N adds N threads ("busy") spinning in busy_part for ever: with more of them than
 * the machine has cores, each is runnable but waiting for a CPU part of the time (the
 * main thread too, in its cpu_part): time a profiler must not call sleep.
 *
 * Its threads sleep with 1 ns of timer slack (pool.c says why a sampler's own timers
 * would pace their wakeups otherwise).
 *
 * --times FILE: at the end of each cycle, a line "when cpu sleep wait" is added to FILE:
 * the moment (CLOCK_MONOTONIC, the clock of livesym's sample times) and the wall time each
 * part has taken so far, in seconds. On a busy box the parts stretch (a preempted
 * cpu_part, a late wakeup), and a test holds a profile to what the program measured over
 * the profile's own seconds (a window a few tenths of a second wider took in the
 * profiler's start, when it preempts the program most).
 *
 * usage: waits [SECONDS] [--cycle-ms MS] [--busy N] [--times FILE]
 * Prints "ready <pid>" once every thread has started.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "busy.h"

#define MAX_BUSY 256

static long cycle_ns = 40000000L;
static volatile long sink;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static pthread_barrier_t started;

__attribute__((noinline)) static void cpu_part(void)
{
    long x = 0;
    BUSY_RUN(CLOCK_THREAD_CPUTIME_ID, cycle_ns / 4, n, for (uint64_t i = 0; i < n; i++) x += (long)i ^ sink);
    sink = x;
}

__attribute__((noinline)) static void sleep_part(void)
{
    long ns = cycle_ns / 2;
    struct timespec pause = {ns / 1000000000L, ns % 1000000000L};
    while (nanosleep(&pause, &pause) != 0)
        ;
}

__attribute__((noinline)) static void wait_part(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long ns = until.tv_nsec + cycle_ns / 4;
    until.tv_sec += ns / 1000000000L;
    until.tv_nsec = ns % 1000000000L;
    pthread_mutex_lock(&lock);
    while (pthread_cond_timedwait(&never, &lock, &until) == 0)
        ;  /* nobody signals: a wakeup before the time is spurious */
    pthread_mutex_unlock(&lock);
}

static void log_times(FILE *log, int64_t now, const int64_t spent[3])
{
    fprintf(log, "%.6f %.6f %.6f %.6f\n", now / 1e9, spent[0] / 1e9, spent[1] / 1e9,
            spent[2] / 1e9);
}

static void waiter(double seconds, const char *times)
{
    int64_t spent[3] = {0, 0, 0};
    int64_t now = busy_now_ns(CLOCK_MONOTONIC);
    FILE *log = times != NULL ? fopen(times, "a") : NULL;
    if (log != NULL)
        setvbuf(log, NULL, _IOLBF, 0);  /* whole lines, for a reader at any moment */
    int64_t end = now + (int64_t)(seconds * 1e9);
    while (seconds <= 0 || now < end) {
        int64_t t0 = busy_now_ns(CLOCK_MONOTONIC);
        cpu_part();
        int64_t t1 = busy_now_ns(CLOCK_MONOTONIC);
        sleep_part();
        int64_t t2 = busy_now_ns(CLOCK_MONOTONIC);
        wait_part();
        now = busy_now_ns(CLOCK_MONOTONIC);
        spent[0] += t1 - t0;
        spent[1] += t2 - t1;
        spent[2] += now - t2;
        if (log != NULL)
            log_times(log, now, spent);
    }
}

__attribute__((noinline)) static void busy_part(void)
{
    long x = 0;
    for (;;)
        for (long i = 0; i < 100000; i++)
            x += i ^ sink;
}

static void *busy(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "busy");
    pthread_barrier_wait(&started);
    busy_part();
    return NULL;
}

int main(int argc, char **argv)
{
    int busy_threads = 0;
    double seconds = 0;
    const char *times = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--times") == 0 && i + 1 < argc)
            times = argv[++i];
        else if (strcmp(argv[i], "--cycle-ms") == 0 && i + 1 < argc)
            cycle_ns = atol(argv[++i]) * 1000000L;
        else if (strcmp(argv[i], "--busy") == 0 && i + 1 < argc)
            busy_threads = atoi(argv[++i]);
        else
            seconds = atof(argv[i]);
    }
    if (cycle_ns <= 0 || busy_threads < 0 || busy_threads > MAX_BUSY) {
        fprintf(stderr, "waits: --cycle-ms > 0, --busy 0 to %d\n", MAX_BUSY);
        return 2;
    }
    prctl(PR_SET_TIMERSLACK, 1UL);  /* threads inherit their creator's slack */
    pthread_barrier_init(&started, NULL, (unsigned)busy_threads + 1);
    pthread_t t;
    for (int i = 0; i < busy_threads; i++)
        if (pthread_create(&t, NULL, busy, NULL) != 0)
            return 1;
    pthread_barrier_wait(&started);
    busy_ready();
    waiter(seconds, times);  /* the main thread: no thread of the program only waits */
    return 0;
}
