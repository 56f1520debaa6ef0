/*
 * crunch - a fixed amount of CPU work, for measuring profiler overhead.
 *
 * Usage: crunch [THREADS] [MILLION_ITERATIONS_PER_THREAD] [DELAY_MS]
 * Prints "ready <pid>", waits DELAY_MS (so a profiler can attach), runs the
 * work on THREADS threads, prints "elapsed <seconds>" (wall clock of the work
 * alone) and exits. A profiler that slows the target shows as a longer elapsed.
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

static void *worker(void *arg)
{
    uint64_t *out = arg;
    *out = crunch_work(*out);
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
