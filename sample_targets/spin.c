/*
 * spin.c - multi-threaded CPU burner with known shares of CPU time.
 *
 * Three worker threads, named "alpha", "beta" and "gamma", each run one
 * distinct non-inlined function (hot_alpha, hot_beta, hot_gamma).  Every
 * 10 ms period a worker burns a fixed amount of its own CPU time (measured
 * with CLOCK_THREAD_CPUTIME_ID) and then sleeps until the next period:
 *
 *     alpha 50 %   beta 30 %   gamma 15 %      (0.95 of one core in total)
 *
 * so the shares of on-CPU samples are 50:30:15 = 52.6 % : 31.6 % : 15.8 %.
 *
 * The three burn their budgets in rounds: after its budget a worker waits at a
 * barrier for the other two before it sleeps, so every round each burns its whole
 * budget and the split holds exactly whatever else the machine runs (on a busy
 * machine the rounds just take longer than 10 ms). Without the barrier a worker the
 * scheduler kept waiting fell behind, dropped periods, and the split was the
 * scheduler's (alpha 47 % of spin's CPU time beside a busy core).
 * hot_alpha spends half of its CPU time in its own loop and half in the
 * noinline leaf leaf_work, which gives a two-deep stack (leaf_work <-
 * hot_alpha): 26.3 % of samples each.
 *
 * usage: spin [SECONDS] [--threads N]
 *     SECONDS      run for that long, then exit 0 (default: until killed)
 *     --threads N  also start N idle threads (named "idle") that only sleep
 *
 * Prints "ready <pid>" once every thread is running and named.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "busy.h"

#define PERIOD_NS 10000000LL /* 10 ms */

static volatile uint64_t sink; /* keeps the loops from being optimised out */

/* Runs for ns nanoseconds of the thread's CPU time; hot_alpha hands it half
 * of its budget, so leaf_work <- hot_alpha is exactly half of alpha's samples
 * whatever the CPU's speed on either loop. */
__attribute__((noinline)) uint64_t leaf_work(int64_t ns)
{
    volatile uint64_t acc = 0;
    BUSY_RUN(CLOCK_THREAD_CPUTIME_ID, ns, n, for (uint64_t i = 0; i < n; i++) acc += i);
    return acc;
}

/* Each hot_* function runs its busy loop itself until the calling thread
 * has used budget_ns more CPU time (see BUSY_RUN in busy.h).
 *
 * hot_alpha's two halves come in an order drawn each period (a fixed pseudo-random
 * sequence): in a fixed order the thread's CPU time would repeat every 5 ms, and a
 * sampler whose period is near a multiple of that (perf's per-thread cpu-clock at
 * 99 Hz: 10.1 ms of the thread's CPU time) would land in the same half for seconds
 * on end, showing hot_alpha or leaf_work alone. With the order drawn, a sample at
 * any point of the period is in either half with probability 1/2. */
__attribute__((noinline)) void hot_alpha(int64_t budget_ns)
{
    static uint32_t draw = 0x2545F491u; /* only the alpha thread calls hot_alpha */
    volatile uint64_t acc = 0;
    draw = draw * 1664525u + 1013904223u;
    int leaf_first = (draw >> 31) & 1;
    if (leaf_first)
        acc += leaf_work(budget_ns - budget_ns / 2);
    BUSY_RUN(CLOCK_THREAD_CPUTIME_ID, budget_ns / 2, n,
             for (uint64_t i = 0; i < n; i++) acc += i);
    if (!leaf_first)
        acc += leaf_work(budget_ns - budget_ns / 2);
    sink += acc;
}

__attribute__((noinline)) void hot_beta(int64_t budget_ns)
{
    volatile uint64_t acc = 0;
    BUSY_RUN(CLOCK_THREAD_CPUTIME_ID, budget_ns, n, for (uint64_t i = 0; i < n; i++) acc += i);
    sink += acc;
}

__attribute__((noinline)) void hot_gamma(int64_t budget_ns)
{
    volatile uint64_t acc = 0;
    BUSY_RUN(CLOCK_THREAD_CPUTIME_ID, budget_ns, n, for (uint64_t i = 0; i < n; i++) acc += i);
    sink += acc;
}

struct worker {
    const char *name;
    void (*fn)(int64_t);
    int percent; /* busy share of every period */
};

static const struct worker workers[] = {
    {"alpha", hot_alpha, 50},
    {"beta", hot_beta, 30},
    {"gamma", hot_gamma, 15},
};

#define NWORKERS (sizeof workers / sizeof workers[0])

static void add_ns(struct timespec *ts, int64_t ns)
{
    int64_t t = ts->tv_nsec + ns;
    ts->tv_sec += t / 1000000000LL;
    ts->tv_nsec = t % 1000000000LL;
}

static pthread_barrier_t round_done; /* every worker burnt its budget this round */

static void *worker_main(void *arg)
{
    const struct worker *w = arg;
    int64_t budget = PERIOD_NS * w->percent / 100;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (;;) {
        w->fn(budget);
        pthread_barrier_wait(&round_done);
        add_ns(&next, PERIOD_NS);
        /* Fell more than a period behind (machine busy): start afresh
         * instead of bursting to catch up. */
        int64_t now = busy_now_ns(CLOCK_MONOTONIC);
        int64_t due = (int64_t)next.tv_sec * 1000000000LL + next.tv_nsec;
        if (now - due > PERIOD_NS) {
            clock_gettime(CLOCK_MONOTONIC, &next);
            continue;
        }
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
            ;
    }
    return NULL;
}

static void *idle_main(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

static void die(const char *what, int err)
{
    fprintf(stderr, "spin: %s: %s\n", what, strerror(err));
    exit(1);
}

static void usage(void)
{
    fprintf(stderr, "usage: spin [SECONDS] [--threads N]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    double seconds = -1.0; /* forever */
    long extra = 0;
    for (int i = 1; i < argc; i++) {
        char *end;
        if (strcmp(argv[i], "--threads") == 0) {
            if (++i >= argc)
                usage();
            extra = strtol(argv[i], &end, 10);
            if (*end != '\0' || extra < 0)
                usage();
        } else {
            seconds = strtod(argv[i], &end);
            if (*end != '\0' || seconds < 0)
                usage();
        }
    }

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024); /* hundreds of idle threads stay cheap */
    pthread_t tid;
    int err;
    if ((err = pthread_barrier_init(&round_done, NULL, NWORKERS)) != 0)
        die("pthread_barrier_init", err);
    for (size_t i = 0; i < NWORKERS; i++) {
        if ((err = pthread_create(&tid, &attr, worker_main, (void *)&workers[i])) != 0)
            die("pthread_create", err);
        if ((err = pthread_setname_np(tid, workers[i].name)) != 0)
            die("pthread_setname_np", err);
    }
    for (long i = 0; i < extra; i++) {
        if ((err = pthread_create(&tid, &attr, idle_main, NULL)) != 0)
            die("pthread_create", err);
        if ((err = pthread_setname_np(tid, "idle")) != 0)
            die("pthread_setname_np", err);
    }
    pthread_attr_destroy(&attr);

    busy_ready();

    if (seconds < 0) {
        for (;;)
            pause();
    }
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
    return 0;
}
