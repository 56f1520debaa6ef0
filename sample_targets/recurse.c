/*
 * recurse.c - a stack deeper than perf's default copy: main -> descend x DEPTH -> bottom.
 *
 * main calls descend(DEPTH); descend recurses DEPTH frames deep (2,000 unless
 * --depth N says otherwise) and bottom() spins there, then the whole chain returns and
 * main goes down again. Nearly every sample is taken at the bottom, under DEPTH frames
 * of descend: a stack of about 32 KiB built -O2 -fomit-frame-pointer (each frame the
 * return address and one saved register), twice livesym's first 16 KiB copy and under
 * the kernel's 65528-byte limit. Each descend is noinline and noclone and uses its
 * callee's result after the call, so the compiler keeps every frame.
 *
 * With --thread the recursion runs in a second thread ("recurse"), main waiting for it:
 * the copy of a thread's stack may run on into the mapping above it, where the main
 * thread's stops at its top.
 *
 * usage: recurse [SECONDS] [--depth N] [--thread]
 * Prints "ready <pid>" once, then recurses until killed (or SECONDS are up).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "busy.h"

#define MAX_DEPTH 100000

static volatile long sink;

__attribute__((noinline, noclone)) static long bottom(void)
{
    long x = 0;
    /* 2 ms of CPU at the bottom, then up and down again (a few microseconds). */
    BUSY_RUN(CLOCK_THREAD_CPUTIME_ID, 2000000, n, for (uint64_t i = 0; i < n; i++) x += (long)i ^ sink);
    return x;
}

__attribute__((noinline, noclone)) static long descend(int n)
{
    if (n <= 0)
        return bottom();
    long r = descend(n - 1);
    sink = r;
    return r + n;
}

static int depth = 2000;
static double seconds = 0;

static void *run(void *arg)
{
    (void)arg;
    int64_t end = busy_now_ns(CLOCK_MONOTONIC) + (int64_t)(seconds * 1e9);
    while (seconds <= 0 || busy_now_ns(CLOCK_MONOTONIC) < end)
        sink = descend(depth);
    return NULL;
}

int main(int argc, char **argv)
{
    int threaded = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--depth") == 0 && i + 1 < argc)
            depth = atoi(argv[++i]);
        else if (strcmp(argv[i], "--thread") == 0)
            threaded = 1;
        else
            seconds = atof(argv[i]);
    }
    if (depth < 0 || depth > MAX_DEPTH) {
        fprintf(stderr, "recurse: --depth must be 0 to %d\n", MAX_DEPTH);
        return 2;
    }
    if (!threaded) {
        busy_ready();
        run(NULL);
        return 0;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, run, NULL) != 0) {
        fprintf(stderr, "recurse: pthread_create failed\n");
        return 1;
    }
    pthread_setname_np(t, "recurse");
    busy_ready();
    pthread_join(t, NULL);
    return 0;
}
