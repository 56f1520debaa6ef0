/*
 * jitmap.c - "JIT" code named only by a perf map, as node --perf-basic-prof
 * or python -X perf name theirs.
 *
 * The machine code of jit_template (a leaf loop without calls or
 * PC-relative references, alone in the section "jitcode") is copied into an
 * anonymous mapping that is then made executable, and a line
 *
 *     <start hex> <size hex> jit_alpha
 *
 * is appended to /tmp/perf-<pid>.map (after a malformed line, which readers
 * must skip). The main thread then calls the copy over and over: nearly all
 * of its samples are in jit_alpha, in a mapping no ELF file describes.
 *
 * On SIGUSR1 a second copy is made and "jit_beta" appended to the same map
 * (the file grows while it is read); from then on the two alternate. With
 * --late-line MS, jit_beta runs MS milliseconds before its line is appended, as
 * code runs before a JIT that buffers its perf map writes its line.
 * SIGTERM/SIGINT remove the perf map and exit.
 *
 * usage: jitmap [SECONDS] [--late-line MS]
 *
 * Prints "ready <pid>" once jit_alpha runs and is in the map.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef uint64_t (*jit_fn)(uint64_t);

/* Bounds of the section "jitcode", provided by the linker. */
extern const unsigned char __start_jitcode[];
extern const unsigned char __stop_jitcode[];

__attribute__((noinline, section("jitcode"))) uint64_t jit_template(uint64_t n)
{
    uint64_t acc = 0;
    for (uint64_t i = 0; i < n; i++)
        acc += (i * i) ^ (acc >> 3);
    return acc;
}

static char map_path[64];
static volatile sig_atomic_t want_beta;
static volatile uint64_t sink;

static void on_exit_signal(int sig)
{
    (void)sig;
    unlink(map_path);
    _exit(0);
}

static void on_usr1(int sig)
{
    (void)sig;
    want_beta = 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void name_jit(jit_fn code, const char *name)
{
    FILE *map = fopen(map_path, "a");
    if (map == NULL) {
        perror("jitmap: perf map");
        exit(1);
    }
    fprintf(map, "%lx %zx %s\n", (unsigned long)(uintptr_t)code,
            (size_t)(__stop_jitcode - __start_jitcode), name);
    fclose(map);
}

/* A copy of jit_template in fresh anonymous executable memory, not named yet. */
static jit_fn make_jit(void)
{
    size_t size = (size_t)(__stop_jitcode - __start_jitcode);
    long page = sysconf(_SC_PAGESIZE);
    size_t len = (size + (size_t)page - 1) & ~((size_t)page - 1);
    unsigned char *code = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                               -1, 0);
    if (code == MAP_FAILED) {
        perror("jitmap: mmap");
        exit(1);
    }
    memcpy(code, __start_jitcode, size);
    __builtin___clear_cache((char *)code, (char *)code + size);
    if (mprotect(code, len, PROT_READ | PROT_EXEC) != 0) {
        perror("jitmap: mprotect");
        exit(1);
    }
    return (jit_fn)(uintptr_t)code;
}

int main(int argc, char **argv)
{
    double seconds = 0, late_s = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--late-line") == 0 && i + 1 < argc)
            late_s = atof(argv[++i]) / 1000.0;
        else
            seconds = atof(argv[i]);
    }
    snprintf(map_path, sizeof map_path, "/tmp/perf-%d.map", (int)getpid());
    signal(SIGTERM, on_exit_signal);
    signal(SIGINT, on_exit_signal);
    signal(SIGUSR1, on_usr1);

    FILE *map = fopen(map_path, "w");
    if (map == NULL) {
        perror("jitmap: perf map");
        return 1;
    }
    fputs("this line is not a perf map entry\n", map);
    fclose(map);
    jit_fn alpha = make_jit();
    name_jit(alpha, "jit_alpha");
    jit_fn beta = NULL;
    int beta_named = 0;
    double beta_made = 0;
    sink += alpha(1000);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);

    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (uint64_t round = 0;; round++) {
        if (want_beta && beta == NULL) {
            beta = make_jit();
            beta_made = now_s();
        }
        if (beta != NULL && !beta_named && now_s() - beta_made >= late_s) {
            name_jit(beta, "jit_beta");
            beta_named = 1;
        }
        sink += (beta != NULL && (round & 1)) ? beta(200000) : alpha(200000);
        if (seconds > 0) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if ((double)(now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 > seconds)
                break;
        }
    }
    unlink(map_path);
    return 0;
}
