/* What the native modules share: the clock, nearest-rank percentiles, a Python sequence of
 * paths as C strings, and the module boilerplate. Included after <Python.h>. */
#ifndef FSBENCH_COMMON_H
#define FSBENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* CLOCK_MONOTONIC in ns: a vDSO call, cheap enough to read once per operation. */
static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

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

/* A sequence of paths (str, bytes or os.PathLike) as C strings, each encoded as os.fsencode
 * does (surrogateescape; an embedded NUL refused). `paths` stay valid until paths_free. */
typedef struct {
    PyObject *seq;
    PyObject **encoded;
    const char **paths;
    Py_ssize_t n;
} paths_t;

static inline void paths_free(paths_t *p) {
    if (p->encoded)
        for (Py_ssize_t i = 0; i < p->n; i++) Py_XDECREF(p->encoded[i]);
    free(p->encoded);
    free(p->paths);
    Py_XDECREF(p->seq);
    *p = (paths_t){0};
}

/* 0, or -1 with the exception set and nothing left to free. `what` names the argument. */
static inline int paths_from(PyObject *obj, const char *what, paths_t *p) {
    *p = (paths_t){0};
    p->seq = PySequence_Fast(obj, what);
    if (p->seq == NULL) return -1;
    p->n = PySequence_Fast_GET_SIZE(p->seq);
    p->encoded = calloc((size_t)p->n + 1, sizeof(*p->encoded));
    p->paths = calloc((size_t)p->n + 1, sizeof(*p->paths));
    if (p->encoded == NULL || p->paths == NULL) {
        PyErr_NoMemory();
        paths_free(p);
        return -1;
    }
    for (Py_ssize_t i = 0; i < p->n; i++) {
        if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(p->seq, i), &p->encoded[i])) {
            paths_free(p);
            return -1;
        }
        p->paths[i] = PyBytes_AS_STRING(p->encoded[i]);
    }
    return 0;
}

/* A method table entry taking keywords, and a module with no state of its own. */
#define KW_METHOD(name, fn, doc) \
    { name, (PyCFunction)(void (*)(void))(fn), METH_VARARGS | METH_KEYWORDS, doc }
#define MODULE_DEF(var, name, doc, methods) \
    static struct PyModuleDef var = {PyModuleDef_HEAD_INIT, name, doc, -1, methods, \
                                     NULL, NULL, NULL, NULL}

#endif
