/*
 * libworker.c - libworker.so, a library with a thread of its own, as numeric and
 * compression libraries have (OpenBLAS's workers): loaded into a Python program
 * with ctypes, start_worker() starts a pthread that spins in worker_spin and never
 * runs Python code. Used to check that mixed stacks leave such a thread as it is.
 *
 * Exports: start_worker (returns 0 once the thread runs).
 */
#include <pthread.h>
#include <stdint.h>

static volatile uint64_t sink;

__attribute__((noinline)) static void worker_spin(void)
{
    for (;;) {
        for (uint64_t i = 0; i < 100000; i++)
            sink += i;
    }
}

static void *worker_main(void *arg)
{
    (void)arg;
    worker_spin();
    return NULL;
}

int start_worker(void)
{
    pthread_t thread;
    if (pthread_create(&thread, NULL, worker_main, NULL) != 0)
        return -1;
    return pthread_detach(thread);
}
