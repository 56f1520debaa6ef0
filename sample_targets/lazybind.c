/*
 * lazybind.c - time in the dynamic loader: every call through the PLT resolved again.
 *
 *     main -> resolve_loop -> labs@plt -> _dl_runtime_resolve_xsavec (ld.so)
 *          -> _dl_fixup -> _dl_lookup_symbol_x -> do_lookup_x -> ...
 *
 * Run with LD_BIND_NOT=1: glibc's lazy binding then never writes the address it
 * found into the GOT, so every call of labs goes through the resolver again, and
 * most of the time is in ld.so. The resolver's trampoline realigns the stack and
 * keeps its CFA in rbx, and ld.so's functions are a library of their own: the hard
 * parts of unwinding through the dynamic loader. Built -O2 -fomit-frame-pointer
 * with lazy binding (-z lazy); -fno-builtin keeps labs a call.
 *
 * usage: lazybind
 * Prints "ready <pid>" once the loop runs, then loops until killed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile long sink;
static volatile long rounds = 100000; /* read each time: the call is never hoisted */

__attribute__((noinline, noclone)) static long resolve_loop(long n)
{
    long sum = 0;
    for (long i = 0; i < n; i++)
        sum += labs(i - n / 2);
    return sum;
}

int main(void)
{
    sink = resolve_loop(1000);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (;;)
        sink += resolve_loop(rounds);
}
