/* churn_b.c - libchurn_b.so, dlopen()ed and dlclose()d over and over by churn. */
#include <stdint.h>

#include "busy.h"

static volatile uint64_t sink;

__attribute__((noinline)) void churn_b_work(int64_t ns)
{
    volatile uint64_t acc = 0;
    BUSY_RUN(CLOCK_MONOTONIC, ns, n, for (uint64_t i = 0; i < n; i++) acc += i);
    sink += acc;
}
