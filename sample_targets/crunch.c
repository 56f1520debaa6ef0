/*
 * crunch - a fixed amount of CPU work, for measuring profiler overhead.
 *
 * Usage: crunch [THREADS] [MILLION_ITERATIONS_PER_THREAD] [DELAY_MS] [DEPTH] [EVERY_MS]
 * Prints "ready <pid>", waits DELAY_MS (so a profiler can attach), runs the
 * work on THREADS threads, prints "elapsed <seconds>" (wall clock of the work
 * alone) and exits. A profiler that slows the target shows as a longer elapsed.
 * With DEPTH each thread works DEPTH frames down a recursion (16 bytes a frame at
 * -O2: 2000 is a 32 KiB stack, deeper than a 16 KiB copy): what deep stacks cost.
 * With EVERY_MS it also prints "progress <seconds> <iterations>" that often while the
 * work runs (CLOCK_MONOTONIC seconds, iterations done by all threads, counted every
 * 2^20): the rate in a window with a profiler attached against the rate of the
 * same threads in the windows before and after it (bench/overhead.py --steady).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long iterations;
static long done[256]; /* iterations each thread has done, in steps of 2^20 */
static __thread long *my_done;

__attribute__((noinline)) static uint64_t crunch_work(uint64_t seed)
{
    volatile uint64_t x = seed;
    for (long i = 0; i < iterations; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        if ((i & 0xFFFFF) == 0xFFFFF)
            __atomic_store_n(my_done, i + 1, __ATOMIC_RELAXED);
    }
    return x;
}

static volatile uint64_t sink;

__attribute__((noinline, noclone)) static uint64_t crunch_down(int depth, uint64_t seed)
{
    if (depth <= 0)
        return crunch_work(seed);
    uint64_t r = crunch_down(depth - 1, seed);
    sink = r;
    return r + (uint64_t)depth;
}

static int depth;
static int every_ms;

static double now(void);

static void *worker(void *arg)
{
    uint64_t *out = arg;
    my_done = &done[*out - 1]; /* seeds are 1..THREADS */
    *out = crunch_down(depth, *out);
    __atomic_store_n(my_done, iterations, __ATOMIC_RELAXED);
    return NULL;
}

static volatile int finished;

static void *reporter(void *arg)
{
    int threads = *(int *)arg;
    while (!finished) {
        long total = 0;
        for (int i = 0; i < threads; i++)
            total += __atomic_load_n(&done[i], __ATOMIC_RELAXED);
        printf("progress %.6f %ld\n", now(), total);
        fflush(stdout);
        usleep((useconds_t)every_ms * 1000);
    }
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    iterations = (argc > 2 ? atol(argv[2]) : 200) * 1000000L;
    int delay_ms = argc > 3 ? atoi(argv[3]) : 500;
    depth = argc > 4 ? atoi(argv[4]) : 0;
    every_ms = argc > 5 ? atoi(argv[5]) : 0;
    if (every_ms < 0 || every_ms > 60000)
        every_ms = 0;
    if (depth < 0 || depth > 100000)
        depth = 0;
    if (threads < 1 || threads > 256)
        threads = 2;
    pthread_t tids[256];
    uint64_t seeds[256];
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    usleep((useconds_t)delay_ms * 1000);
    double start = now();
    for (int i = 0; i < threads; i++) {
        seeds[i] = (uint64_t)i + 1;
        pthread_create(&tids[i], NULL, worker, &seeds[i]);
    }
    pthread_t watch;
    if (every_ms > 0)
        pthread_create(&watch, NULL, reporter, &threads);
    for (int i = 0; i < threads; i++)
        pthread_join(tids[i], NULL);
    if (every_ms > 0) {
        finished = 1;
        pthread_join(watch, NULL);
    }
    printf("elapsed %.6f\n", now() - start);
    fflush(stdout);
    return 0;
}
