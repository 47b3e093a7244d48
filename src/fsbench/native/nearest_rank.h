/* Nearest-rank percentiles of latencies, shared by the native loops (metaops.c, iocell.c). */
#ifndef FSBENCH_NEAREST_RANK_H
#define FSBENCH_NEAREST_RANK_H

#include <stddef.h>
#include <stdint.h>

/* qsort comparator for uint64_t. */
static inline int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile (per_mille: 500 = p50, 999 = p99.9) of a sorted array: the smallest
 * value with at least that share of samples at or below it. No interpolation, so every reported
 * latency is one that really happened. */
static inline uint64_t percentile(const uint64_t *sorted, size_t n, unsigned per_mille) {
    if (n == 0) return 0;
    size_t rank = (size_t)(((unsigned __int128)n * per_mille + 999) / 1000);
    if (rank < 1) rank = 1;
    return sorted[rank - 1];
}

#endif
