/*
 * uselib.c - an executable linked against libhot.so (found through
 * DT_RUNPATH $ORIGIN, i.e. next to the executable) that spends its time in
 * the library's hot_in_lib.
 *
 * usage: uselib [SECONDS]     (default: until killed)
 */
#include <stdint.h>
#include <stdlib.h>

#include "busy.h"

void hot_in_lib(int64_t ns);
uint64_t lib_helper(uint64_t x);

static volatile uint64_t sink;

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? strtod(argv[1], NULL) : -1.0;
    int64_t stop = busy_now_ns(CLOCK_MONOTONIC) + (int64_t)(seconds * 1e9);
    busy_ready(); /* libhot.so is mapped by the loader before main */
    for (uint64_t n = 0; seconds < 0 || busy_now_ns(CLOCK_MONOTONIC) < stop; n++) {
        hot_in_lib(10000000LL); /* 10 ms */
        sink += lib_helper(n);
    }
    return 0;
}
