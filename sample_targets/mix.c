/*
 * mix.c - two functions sharing the CPU in a set proportion: the ground truth of diffs.
 *
 * Repeats a slice of its own CPU time (CLOCK_THREAD_CPUTIME_ID): PERCENT % of it in
 * first_part, the rest in second_part; for SECONDS of its own CPU time, then exits 0
 * (0: until killed). Two runs with one PERCENT are one workload; 70 against 30 moves
 * each function by 40 points of its CPU samples. CPU time, not wall time, however
 * often other work preempts it: a split of wall time gave a preempted part the time it
 * waited (32.5 points moved, not 40, beside two busy programs), and a run of wall
 * seconds held half its samples (375 of 750). Each slice is drawn from 5 to 15 ms, so
 * that no sampler's period locks onto the slices.
 *
 * usage: mix PERCENT [SECONDS]   (default 70, 0)
 *
 * Prints "ready <pid>" first.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "busy.h"

#define SLICE_MIN_NS 5000000LL
#define SLICE_SPREAD_NS 10000000LL

static volatile uint64_t sink; /* keeps the loops from being optimised out */

__attribute__((noinline)) static void first_part(int64_t ns)
{
    BUSY_RUN(CLOCK_THREAD_CPUTIME_ID, ns, n, for (uint64_t i = 0; i < n; i++) sink += i * 3);
}

__attribute__((noinline)) static void second_part(int64_t ns)
{
    BUSY_RUN(CLOCK_THREAD_CPUTIME_ID, ns, n, for (uint64_t i = 0; i < n; i++) sink ^= i * 7);
}

int main(int argc, char **argv)
{
    double percent = argc > 1 ? atof(argv[1]) : 70.0;
    double seconds = argc > 2 ? atof(argv[2]) : 0.0;
    if (!(percent >= 0 && percent <= 100))
        percent = 70.0;
    /* Its own CPU time too: a run holds as many samples however busy the box is. */
    int64_t end = seconds > 0 ? busy_now_ns(CLOCK_THREAD_CPUTIME_ID) + (int64_t)(seconds * 1e9) : 0;
    srand48(busy_now_ns(CLOCK_MONOTONIC) ^ getpid());
    busy_ready();
    while (end == 0 || busy_now_ns(CLOCK_THREAD_CPUTIME_ID) < end) {
        int64_t slice = SLICE_MIN_NS + (int64_t)(drand48() * SLICE_SPREAD_NS);
        int64_t first = (int64_t)(slice * percent / 100.0);
        if (first > 0)
            first_part(first);
        if (first < slice)
            second_part(slice - first);
    }
    return 0;
}
