/*
 * pingpong.c - a fixed amount of waiting: two threads passing a byte back and forth
 * through two pipes, each blocking in read(2) until the other writes. Every round trip
 * is two blocking reads, four context switches or so: tens of thousands a second, the
 * load an off-CPU profiler pays for at every switch (bench/off_cpu.py).
 *
 * usage: pingpong [ROUND_TRIPS] [DELAY_MS] [WORK_NS]
 * Prints "ready <pid>", waits DELAY_MS (500) for a profiler to attach, makes
 * ROUND_TRIPS (200000) round trips, each thread working WORK_NS (0) of its own CPU time
 * in work() at each turn, prints "elapsed <seconds>" and exits.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>

#include "busy.h"

static int to_pong[2], to_ping[2];
static long trips = 200000;
static long work_ns = 0;
static volatile long sink;

__attribute__((noinline)) static void work(void)
{
    if (work_ns <= 0)
        return;
    long x = 0;
    BUSY_RUN(CLOCK_THREAD_CPUTIME_ID, work_ns, n, for (uint64_t i = 0; i < n; i++) x += (long)i ^ sink);
    sink = x;
}

__attribute__((noinline)) static void pong_wait(void)
{
    char c;
    for (long i = 0; i < trips; i++) {
        if (read(to_pong[0], &c, 1) != 1)
            exit(1);
        work();
        if (write(to_ping[1], &c, 1) != 1)
            exit(1);
    }
}

static void *pong(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "pong");
    pong_wait();
    return NULL;
}

__attribute__((noinline)) static void ping_wait(void)
{
    char c = 'x';
    for (long i = 0; i < trips; i++) {
        if (write(to_pong[1], &c, 1) != 1 || read(to_ping[0], &c, 1) != 1)
            exit(1);
        work();
    }
}

int main(int argc, char **argv)
{
    long delay_ms = 500;
    if (argc > 1)
        trips = atol(argv[1]);
    if (argc > 2)
        delay_ms = atol(argv[2]);
    if (argc > 3)
        work_ns = atol(argv[3]);
    if (trips <= 0 || delay_ms < 0 || work_ns < 0 || pipe(to_pong) != 0 || pipe(to_ping) != 0) {
        fprintf(stderr, "pingpong: ROUND_TRIPS > 0, DELAY_MS >= 0, WORK_NS >= 0\n");
        return 2;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, pong, NULL) != 0)
        return 1;
    busy_ready();
    struct timespec delay = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
    nanosleep(&delay, NULL);
    int64_t start = busy_now_ns(CLOCK_MONOTONIC);
    ping_wait();
    pthread_join(t, NULL);
    printf("elapsed %.6f\n", (double)(busy_now_ns(CLOCK_MONOTONIC) - start) / 1e9);
    fflush(stdout);
    return 0;
}
