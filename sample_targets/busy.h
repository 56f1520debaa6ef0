/*
 * busy.h - shared helpers for the livesym sample targets.
 *
 * Everything here is static and small: the hot loops themselves live in each
 * program so that they carry the function names the tests look for.
 */
#ifndef LIVESYM_BUSY_H
#define LIVESYM_BUSY_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* Smallest batch of loop iterations between two clock reads (about a
 * microsecond of work). */
#define BUSY_PROBE 2000

/* always_inline: the targets are built with -fno-inline, and the clock read
 * should not show up as a function of its own in the samples. */
__attribute__((always_inline)) static inline int64_t busy_now_ns(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + (int64_t)ts.tv_nsec;
}

/*
 * BUSY_RUN(clk, ns, n, WORK): run the statement WORK (which does n
 * iterations of something) repeatedly until clock clk has advanced by ns
 * nanoseconds.  A macro, so the loop is part of the calling function and the
 * samples land there.
 *
 * The clock is read rarely: after each batch, n is resized to 3/4 of the time
 * still left at the measured speed, so a 5 ms budget takes about 7 clock
 * reads (a syscall for CLOCK_THREAD_CPUTIME_ID) and overshoots by about one
 * BUSY_PROBE batch.
 */
#define BUSY_RUN(clk, ns, n, WORK)                                             \
    do {                                                                       \
        int64_t busy_t_ = busy_now_ns(clk);                                    \
        const int64_t busy_end_ = busy_t_ + (ns);                              \
        uint64_t n = BUSY_PROBE;                                               \
        while (busy_t_ < busy_end_) {                                          \
            WORK;                                                              \
            int64_t busy_t2_ = busy_now_ns(clk);                               \
            int64_t busy_dt_ = busy_t2_ > busy_t_ ? busy_t2_ - busy_t_ : 1;    \
            double busy_next_ = (double)n / (double)busy_dt_ *                 \
                                (double)(busy_end_ - busy_t2_) * 0.75;         \
            n = busy_next_ > BUSY_PROBE ? (uint64_t)busy_next_ : BUSY_PROBE;   \
            busy_t_ = busy_t2_;                                                \
        }                                                                      \
    } while (0)

/* The one line every target prints once it is fully set up. */
static inline void busy_ready(void)
{
    printf("ready %ld\n", (long)getpid());
    fflush(stdout);
}

#endif /* LIVESYM_BUSY_H */
