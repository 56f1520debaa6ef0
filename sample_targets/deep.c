/*
 * deep.c - threads parked at the bottom of known call chains, for unwinding tests.
 *
 *     main thread:      main   -> chain_a -> chain_b -> chain_c -> park -> pause()
 *     thread "deep":    worker -> chain_a -> chain_b -> chain_c -> park -> pause()
 *     thread "deep-sig": sigworker -> chain_s -> raise(SIGUSR1)
 *                         ... the kernel's signal frame (__restore_rt) ...
 *                         -> on_signal -> park_signal -> pause()
 *     thread "deep-trap": trapworker -> chain_t -> trap_here (ud2: SIGILL)
 *                         ... the kernel's signal frame ...
 *                         -> on_trap -> park_signal -> pause()
 *
 * Built -O2 -fomit-frame-pointer: no function keeps a frame pointer, so only the
 * call-frame information (.eh_frame) says where each caller's frame is. Each chain
 * function is noinline and noclone and uses its callee's result after the call, so
 * the compiler neither inlines it, clones it, nor turns the call into a jump: every
 * link of the chain is a real frame. park() blocks until a signal sets `stop`. The
 * third thread parks inside a signal handler: an unwinder must step through the
 * signal frame, whose registers the kernel saved on the stack. The fourth faults on
 * the very first instruction of trap_here, which follows before_trap in memory: the
 * interrupted pc is not a return address, and looking it up one byte back, as a
 * caller's would be, names before_trap instead.
 *
 * usage: deep [--one]
 * Prints "ready <pid>" once every thread has reached park() or park_signal().
 * With --one only the main thread runs, and parks (for debuggers that follow one
 * thread: qemu's gdb stub).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static volatile int sink;
static pthread_barrier_t parked;

__attribute__((noinline, noclone)) static int park(int depth)
{
    pthread_barrier_wait(&parked);
    while (!stop)
        pause();
    return depth;
}

__attribute__((noinline, noclone)) static int chain_c(int x)
{
    int r = park(x + 1);
    sink = r;
    return r * 3 + x;
}

__attribute__((noinline, noclone)) static int chain_b(int x)
{
    int r = chain_c(x + 1);
    sink = r;
    return r * 5 + x;
}

__attribute__((noinline, noclone)) static int chain_a(int x)
{
    int r = chain_b(x + 1);
    sink = r;
    return r * 7 + x;
}

__attribute__((noinline, noclone)) static void park_signal(void)
{
    pthread_barrier_wait(&parked);
    while (!stop)
        pause();
}

static void on_signal(int signo)
{
    (void)signo;
    park_signal();
    sink = 1;
}

#if defined(__x86_64__)
#define TRAP_THREAD 1
/* Two functions back to back, the second faulting on its first byte. */
void before_trap(void);
void trap_here(void);
__asm__(".text\n"
        ".p2align 4\n"
        ".globl before_trap\n.type before_trap, @function\n"
        "before_trap:\n\t.cfi_startproc\n\tret\n\t.cfi_endproc\n"
        ".size before_trap, .-before_trap\n"
        ".globl trap_here\n.type trap_here, @function\n"
        "trap_here:\n\t.cfi_startproc\n\tud2\n\t.cfi_endproc\n"
        ".size trap_here, .-trap_here\n");

static void on_trap(int signo)
{
    (void)signo;
    park_signal();
    for (;;) /* returning would run the ud2 again */
        pause();
}

__attribute__((noinline, noclone)) static int chain_t(int x)
{
    trap_here();
    sink = x;
    return x + 1;
}

static void *trapworker(void *arg)
{
    pthread_setname_np(pthread_self(), "deep-trap");
    sink = chain_t((int)(long)arg);
    return NULL;
}
#else
#define TRAP_THREAD 0 /* (the trap is x86-64 code; elsewhere, three threads) */
#endif

__attribute__((noinline, noclone)) static int chain_s(int x)
{
    raise(SIGUSR1); /* handled on this thread, on this stack */
    sink = x;
    return x + 1;
}

static void *sigworker(void *arg)
{
    pthread_setname_np(pthread_self(), "deep-sig");
    sink = chain_s((int)(long)arg);
    return NULL;
}

static void *worker(void *arg)
{
    pthread_setname_np(pthread_self(), "deep");
    sink = chain_a((int)(long)arg);
    return NULL;
}

static void *reporter(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&parked);
    usleep(20000); /* the parked threads are in pause() by now */
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--one") == 0) {
        /* The main thread's chain alone, for debuggers that follow one thread. */
        pthread_barrier_init(&parked, NULL, 1);
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        sink = chain_a(0);
        return 0;
    }
    pthread_t t, s, r;
    struct sigaction action = {.sa_handler = on_signal};
    sigaction(SIGUSR1, &action, NULL);
    pthread_barrier_init(&parked, NULL, 4 + TRAP_THREAD);
    pthread_create(&t, NULL, worker, (void *)1L);
    pthread_create(&s, NULL, sigworker, (void *)2L);
#if TRAP_THREAD
    pthread_t u;
    struct sigaction trap = {.sa_handler = on_trap};
    sigaction(SIGILL, &trap, NULL);
    pthread_create(&u, NULL, trapworker, (void *)3L);
#endif
    pthread_create(&r, NULL, reporter, NULL);
    pthread_detach(r);
    sink = chain_a(0);
    pthread_join(t, NULL);
    return 0;
}
