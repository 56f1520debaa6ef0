/*
 * twoseg.c - an executable with TWO executable PT_LOADs (the BOLT-like case).
 *
 * hot_section_work is placed in its own section ".hot", which the link puts
 * at 0x801234 (-Wl,--section-start=.hot=0x801234).  The linker gives that
 * section a PT_LOAD of its own, R+X, whose p_offset is not page aligned
 * (p_offset % 0x1000 == 0x234, like its p_vaddr), next to the ordinary R+X
 * PT_LOAD holding .text.  Built as a PIE, so 0x801234 is relative to the
 * load base.
 *
 * main alternates 10 ms in hot_section_work (.hot) and 10 ms in text_work
 * (.text), forever: each is half of the on-CPU samples.
 *
 * usage: twoseg [SECONDS]     (default: until killed)
 */
#include <stdint.h>
#include <stdlib.h>

#include "busy.h"

#define SLICE_NS 10000000LL /* 10 ms */

static volatile uint64_t sink;

__attribute__((section(".hot"), noinline)) void hot_section_work(int64_t ns)
{
    volatile uint64_t acc = 0;
    BUSY_RUN(CLOCK_MONOTONIC, ns, n, for (uint64_t i = 0; i < n; i++) acc += i);
    sink += acc;
}

__attribute__((noinline)) void text_work(int64_t ns)
{
    volatile uint64_t acc = 0;
    BUSY_RUN(CLOCK_MONOTONIC, ns, n, for (uint64_t i = 0; i < n; i++) acc += i);
    sink += acc;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? strtod(argv[1], NULL) : -1.0;
    int64_t stop = busy_now_ns(CLOCK_MONOTONIC) + (int64_t)(seconds * 1e9);
    busy_ready();
    while (seconds < 0 || busy_now_ns(CLOCK_MONOTONIC) < stop) {
        hot_section_work(SLICE_NS);
        text_work(SLICE_NS);
    }
    return 0;
}
