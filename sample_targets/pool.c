/*
 * pool.c - a thread pool: many threads, each running a little now and then.
 *
 * THREADS threads (1,000 unless --threads N) each spin for BUSY microseconds of their
 * own CPU time (--busy-us, 30 unless given) in pool_work, then sleep PERIOD
 * milliseconds (--period-ms, 50), again and again: 1,000 x 0.03 ms every 50 ms is 60 %
 * of a core in all, 0.06 % for each thread. An event per thread fires after 10 ms of
 * its own thread's CPU time, which none reaches in seconds; an event per CPU counts the
 * pool's time wherever it runs. With --busy-us 1000 the pool asks for 20 cores: a box
 * on fire (load in the hundreds on two cores).
 *
 * Its threads' timer slack is 1 ns unless --slack-ns says (a thread's default: 50 us). With slack, the
 * kernel runs a sleep's expiry at any interrupt inside its slack, and on a CPU otherwise
 * idle (no tick) the only interrupts are a sampler's timer: the pool's wakeups then
 * follow the sampler's own ticks, and what a timer samples is no longer the pool's CPU
 * time times the rate (perf record -a read 0.84 to 1.15 of it, livesym 0.72 to 1.35 of
 * it, each within the other's range in some runs: two timers, each with the pool's
 * wakeups coupled to its phase). With 1 ns, both read 0.90 to 0.99 of it.
 *
 * usage: pool [SECONDS] [--threads N] [--busy-us US] [--period-ms MS] [--slack-ns NS]
 * Prints "ready <pid>" once every thread has started.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "busy.h"

#define MAX_THREADS 10000

static long busy_ns = 30000;
static long period_ns = 50000000;
static volatile long sink;
static pthread_barrier_t started;

__attribute__((noinline)) static long pool_work(void)
{
    long x = 0;
    BUSY_RUN(CLOCK_THREAD_CPUTIME_ID, busy_ns, n, for (uint64_t i = 0; i < n; i++) x += (long)i ^ sink);
    return x;
}

static void *worker(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&started);
    struct timespec pause = {period_ns / 1000000000L, period_ns % 1000000000L};
    for (;;) {
        sink = pool_work();
        nanosleep(&pause, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = 1000;
    long slack_ns = 1;
    double seconds = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--busy-us") == 0 && i + 1 < argc)
            busy_ns = atol(argv[++i]) * 1000L;
        else if (strcmp(argv[i], "--period-ms") == 0 && i + 1 < argc)
            period_ns = atol(argv[++i]) * 1000000L;
        else if (strcmp(argv[i], "--slack-ns") == 0 && i + 1 < argc)
            slack_ns = atol(argv[++i]);
        else
            seconds = atof(argv[i]);
    }
    if (threads < 1 || threads > MAX_THREADS || busy_ns < 0 || period_ns <= 0 || slack_ns < 1) {
        fprintf(stderr, "pool: --threads 1 to %d, --busy-us >= 0, --period-ms > 0, --slack-ns > 0\n",
                MAX_THREADS);
        return 2;
    }
    /* Threads inherit their creator's slack. */
    if (prctl(PR_SET_TIMERSLACK, (unsigned long)slack_ns, 0, 0, 0) != 0) {
        perror("pool: prctl(PR_SET_TIMERSLACK)");
        return 1;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024); /* 1,000 threads: 64 MiB of stacks, not 8 GiB */
    pthread_barrier_init(&started, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, worker, NULL) != 0) {
            fprintf(stderr, "pool: pthread_create failed at thread %d\n", i);
            return 1;
        }
    }
    pthread_barrier_wait(&started);
    busy_ready();
    if (seconds > 0) {
        struct timespec run = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
        nanosleep(&run, NULL);
        return 0;
    }
    for (;;)
        pause();
}
