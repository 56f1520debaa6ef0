/*
 * nocfi.c - hand-written assembly with neither call-frame information nor a frame
 * pointer, beside C code that has both.
 *
 *     main -> outer -> count_down   (assembly: no FDE; rbp is its loop counter)
 *     main -> outer -> c_work       (C: .eh_frame)
 *
 * About half the time in each. count_down has no FDE, and while it runs rbp holds
 * a count, not a frame pointer, as in hand-written code that uses rbp as a general
 * register: no unwinder can find its caller, and a profile must say so rather than
 * invent one. Built -O2 -fomit-frame-pointer.
 *
 * usage: nocfi
 * Prints "ready <pid>", then loops until killed.
 */
#include <stdio.h>
#include <unistd.h>

void count_down(long n);
__asm__(".text\n"
        ".globl count_down\n.type count_down, @function\n"
        "count_down:\n"
        "\tpush %rbp\n"
        "\tmov %rdi, %rbp\n"
        "1:\tsub $1, %rbp\n"
        "\tjnz 1b\n"
        "\tpop %rbp\n"
        "\tret\n"
        ".size count_down, .-count_down\n");

static volatile long sink;

__attribute__((noinline, noclone)) static void c_work(long n)
{
    for (long i = 0; i < n; i++)
        sink = i;
}

__attribute__((noinline, noclone)) static void outer(long n)
{
    count_down(n);
    c_work(n);
    sink++;
}

int main(void)
{
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (;;)
        outer(1000000);
}
