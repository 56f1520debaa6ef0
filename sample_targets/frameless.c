/*
 * frameless.c - where frame pointers are not enough: the leaf keeps no frame.
 *
 * One thread, forever:  main -> dispatch -> parse  -> spin_for          (10 %)
 *                                                  -> blend -> spin_for (20 %)
 *                                        -> render -> spin_for          (30 %)
 *                                                  -> blend -> spin_for (40 %)
 *
 * All the time is spent in the leaf spin_for, in fixed numbers of iterations, so by
 * construction the share of samples with each function on the stack (TOTAL) is:
 * dispatch 100 %, parse 30 %, render 70 %, blend 60 %, spin_for 100 % (all SELF).
 *
 * Built -O1 -fno-omit-frame-pointer -momit-leaf-frame-pointer: every function but the
 * leaf keeps a frame pointer, the leaf keeps none. A frame-pointer walk from inside
 * spin_for reads its caller's frame pointer and so skips its caller (blend, parse or
 * render); only call-frame information finds every frame.
 *
 * A sample must not know where in the cycle the last one fell. With a fixed cycle the
 * samples could lock to its phases (blend read 65.7 % once at 999 Hz). So every cycle
 * draws its unit of work anew (UNIT to 1.5 UNIT iterations), the same for each of its
 * calls: the shares stay as built. And a cycle is short beside the sampling period:
 * about 0.18 ms here (250,000 increments of 0.7 ns), some ten of them between two
 * samples at 599 Hz, their drawn lengths spreading the next sample's phase over the
 * cycle. At ten times the units a cycle took 1.75 ms, one per sample at 599 Hz, and
 * each sample fell near the last one's phase: the shares spread 1.6 times as far as
 * independent samples' would (perf's parse read 33.2 % once, 27.4 % another time).
 * The draw is inline arithmetic in main: no function of its own on the stacks.
 *
 * usage: frameless
 * Prints "ready <pid>", then works until killed.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <unistd.h>

#define UNIT 20000L /* iterations in one unit of work */

static volatile long counter;
static volatile long unit = UNIT; /* iterations in one unit this cycle */

__attribute__((noinline, noclone)) static void spin_for(long units)
{
    long n = units * unit;
    for (long i = 0; i < n; i++)
        counter++;
}

__attribute__((noinline, noclone)) static void blend(long units)
{
    spin_for(units);
    counter++; /* keeps the call a call, not a jump */
}

__attribute__((noinline, noclone)) static void parse(void)
{
    spin_for(1);
    blend(2);
    counter++;
}

__attribute__((noinline, noclone)) static void render(void)
{
    spin_for(3);
    blend(4);
    counter++;
}

__attribute__((noinline, noclone)) static void dispatch(void)
{
    parse();
    render();
    counter++;
}

int main(void)
{
    unsigned long seed = (unsigned long)getpid();
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (;;) {
        seed = seed * 6364136223846793005UL + 1442695040888963407UL;
        unit = UNIT + (long)((seed >> 33) % (UNIT / 2));
        dispatch();
    }
}
