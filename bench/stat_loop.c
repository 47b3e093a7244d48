/* The reference for bench/metadata_vs_c.py: a plain C loop stat-ing N files, nothing else.
 *
 *   stat_loop DIR N [at|path]
 *
 * Files are DIR/f0000000 .. f{N-1}, the names fsbench's metadata workload uses (flat layout).
 * "at" (default): fstatat(dirfd, name), the call fsbench makes; "path": stat("DIR/name"), the
 * call a naive program makes (a longer path walk per file). Names are built before the clock
 * starts, as fsbench does. Prints: ops elapsed_ns failed.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s DIR N [at|path]\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    size_t n = strtoull(argv[2], NULL, 10);
    int by_path = argc > 3 && strcmp(argv[3], "path") == 0;
    size_t stride = strlen(dir) + 32; /* "DIR/" + "f" + up to 20 digits + NUL */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    char *names = malloc(n * stride);
    if (dfd < 0 || names == NULL || n == 0) {
        perror(dir);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (by_path)
            snprintf(names + i * stride, stride, "%s/f%07zu", dir, i);
        else
            snprintf(names + i * stride, stride, "f%07zu", i);
    }
    struct stat st;
    size_t ops = 0, failed = 0;
    unsigned long long t0 = now_ns();
    for (size_t i = 0; i < n; i++) {
        int r = by_path ? stat(names + i * stride, &st) : fstatat(dfd, names + i * stride, &st, 0);
        if (r == 0)
            ops++;
        else
            failed++;
    }
    unsigned long long t1 = now_ns();
    printf("%zu %llu %zu\n", ops, t1 - t0, failed);
    return failed ? 1 : 0;
}
