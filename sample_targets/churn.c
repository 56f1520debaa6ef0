/*
 * churn.c - map churn: in a loop, dlopen() libchurn_a.so or libchurn_b.so
 * (alternately; both are looked up next to the executable), call its busy
 * function (churn_a_work / churn_b_work) for ~20 ms, then dlclose() it, so
 * the library is unmapped again.  The libraries usually come back at the
 * same addresses, which is what makes stale map caches give wrong names.
 *
 * usage: churn [SECONDS]     (default: until killed)
 *
 * Prints "ready <pid>" once the first library has been loaded.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "busy.h"

#define WORK_NS 20000000LL /* 20 ms */

static const char *const libs[2] = {"libchurn_a.so", "libchurn_b.so"};
static const char *const funcs[2] = {"churn_a_work", "churn_b_work"};

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? strtod(argv[1], NULL) : -1.0;
    int64_t stop = busy_now_ns(CLOCK_MONOTONIC) + (int64_t)(seconds * 1e9);

    /* Directory of this executable. */
    char dir[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n < 0) {
        perror("churn: readlink /proc/self/exe");
        return 1;
    }
    dir[n] = '\0';
    char *slash = strrchr(dir, '/');
    if (slash != NULL)
        *slash = '\0';

    int ready = 0;
    for (unsigned long i = 0; seconds < 0 || busy_now_ns(CLOCK_MONOTONIC) < stop; i++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/%s", dir, libs[i % 2]);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) {
            fprintf(stderr, "churn: %s\n", dlerror());
            return 1;
        }
        void (*work)(int64_t);
        *(void **)&work = dlsym(h, funcs[i % 2]);
        if (work == NULL) {
            fprintf(stderr, "churn: %s\n", dlerror());
            return 1;
        }
        if (!ready) {
            busy_ready();
            ready = 1;
        }
        work(WORK_NS);
        dlclose(h);
    }
    return 0;
}
