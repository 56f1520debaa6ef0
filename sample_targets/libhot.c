/*
 * libhot.c - libhot.so, a shared library whose exported hot_in_lib is where
 * uselib spends its time.
 *
 * Exports: hot_in_lib (busy loop for the given number of nanoseconds) and
 * lib_helper (cheap, called once per slice by uselib).
 */
#include <stdint.h>

#include "busy.h"

static volatile uint64_t sink;

__attribute__((noinline)) uint64_t lib_helper(uint64_t x)
{
    return x * 2654435761u + 1;
}

__attribute__((noinline)) void hot_in_lib(int64_t ns)
{
    volatile uint64_t acc = 0;
    BUSY_RUN(CLOCK_MONOTONIC, ns, n, for (uint64_t i = 0; i < n; i++) acc += i);
    sink += acc;
}
