/*
 * crunch - a fixed amount of CPU work, for measuring profiler overhead.
 *
 * Usage: crunch [THREADS] [MILLION_ITERATIONS_PER_THREAD] [DELAY_MS] [DEPTH]
 * Prints "ready <pid>", waits DELAY_MS (so a profiler can attach), runs the
 * work on THREADS threads, prints "elapsed <seconds>" (wall clock of the work
 * alone) and exits. A profiler that slows the target shows as a longer elapsed.
 * With DEPTH each thread works DEPTH frames down a recursion (16 bytes a frame at
 * -O2: 2000 is a 32 KiB stack, deeper than a 16 KiB copy): what deep stacks cost.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long iterations;

__attribute__((noinline)) static uint64_t crunch_work(uint64_t seed)
{
    volatile uint64_t x = seed;
    for (long i = 0; i < iterations; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
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

static void *worker(void *arg)
{
    uint64_t *out = arg;
    *out = crunch_down(depth, *out);
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
    for (int i = 0; i < threads; i++)
        pthread_join(tids[i], NULL);
    printf("elapsed %.6f\n", now() - start);
    fflush(stdout);
    return 0;
}
