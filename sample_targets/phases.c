/*
 * phases.c - one function, then another: the ground truth of time ranges.
 *
 * Burns the CPU in first_phase for SECONDS of wall time (CLOCK_MONOTONIC), then in
 * second_phase for as long, then exits 0: a capture of it from its start holds the
 * first for its first SECONDS and the second for the next.
 *
 * usage: phases [SECONDS]   (default 3)
 *
 * Prints "ready <pid>" first.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "busy.h"

static volatile uint64_t sink; /* keeps the loops from being optimised out */

__attribute__((noinline)) static void first_phase(int64_t ns)
{
    BUSY_RUN(CLOCK_MONOTONIC, ns, n, for (uint64_t i = 0; i < n; i++) sink += i * 3);
}

__attribute__((noinline)) static void second_phase(int64_t ns)
{
    BUSY_RUN(CLOCK_MONOTONIC, ns, n, for (uint64_t i = 0; i < n; i++) sink ^= i * 7);
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 3.0;
    if (!(seconds > 0))
        seconds = 3.0;
    int64_t ns = (int64_t)(seconds * 1e9);
    busy_ready();
    first_phase(ns);
    second_phase(ns);
    return 0;
}
