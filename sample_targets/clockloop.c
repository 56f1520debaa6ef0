/*
 * clockloop.c - a thread that lives in the vdso: clock_gettime in a tight loop.
 *
 *     main -> tick -> clock_gettime@plt -> clock_gettime (libc) -> __vdso_clock_gettime
 *
 * Almost every sample lands in the vdso, whose code and call-frame information exist
 * only in the target's memory, and some in the PLT stub, whose CFA is a DWARF
 * expression. Built -O2 -fomit-frame-pointer: only CFI gets from there to _start.
 *
 * usage: clockloop
 * Prints "ready <pid>", then loops until killed.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline, noclone)) static long tick(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_nsec;
}

int main(void)
{
    volatile long sum = tick(); /* set up: the PLT slot bound before "ready" */
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (;;)
        sum += tick();
}
