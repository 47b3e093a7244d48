/* fsbench._wakeup: what one wake-up costs on this machine, on one CPU and across two.
 *
 * Two threads play ping-pong over a pair of pipes, each pinned to a CPU: the initiator writes a
 * byte and blocks reading the answer, the echo thread wakes, reads and answers. Half a round
 * trip is one wake-up of a thread blocked in read(): the cost FUSE pays twice per request
 * (application -> daemon, daemon -> application). On one CPU it is a wake-up plus a context
 * switch; across CPUs the sleeper's CPU must be woken too (an inter-processor interrupt, on a
 * virtual machine an exit to the hypervisor), which can cost many times more.
 *
 * Timed here in C: a Python loop would measure the interpreter. The clock is read once per
 * batch of round trips; the caller gets every batch's mean and takes a robust summary.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define MAX_BATCHES 4096
#define WARMUP_TRIPS 50  /* untimed: first wake-ups touch cold caches and idle CPUs */

static int pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* Blocking one-byte I/O that survives signals (EINTR) delivered to the process. */
static int put(int fd, char c) {
    for (;;) {
        ssize_t n = write(fd, &c, 1);
        if (n == 1) return 0;
        if (n < 0 && errno == EINTR) continue;
        return n < 0 ? errno : EIO;
    }
}

static int get(int fd, char *c) {
    for (;;) {
        ssize_t n = read(fd, c, 1);
        if (n == 1) return 0;
        if (n < 0 && errno == EINTR) continue;
        return n < 0 ? errno : EIO;
    }
}

struct game {
    int cpu_a, cpu_b;
    int ping[2], pong[2]; /* a -> b, b -> a */
    Py_ssize_t trips;     /* round trips per batch */
    Py_ssize_t max_batches;
    uint64_t budget_ns;
    double *batch_us; /* one-way wake-up, µs, per batch */
    Py_ssize_t batches;
    int err_a, err_b;
};

static void *echo(void *arg) {
    struct game *g = arg;
    char c;
    g->err_b = pin(g->cpu_b);
    /* Even when pinning failed, answer until told to stop, so the initiator never hangs. */
    for (;;) {
        int e = get(g->ping[0], &c);
        if (e) {
            if (!g->err_b) g->err_b = e;
            return NULL;
        }
        if (c == 'q') return NULL;
        e = put(g->pong[1], c);
        if (e) {
            if (!g->err_b) g->err_b = e;
            return NULL;
        }
    }
}

static void *initiate(void *arg) {
    struct game *g = arg;
    char c;
    int e = pin(g->cpu_a);
    if (e) goto done;
    for (int i = 0; i < WARMUP_TRIPS && !e; i++) {
        e = put(g->ping[1], 'p');
        if (!e) e = get(g->pong[0], &c);
    }
    uint64_t start = now_ns();
    while (!e && g->batches < g->max_batches) {
        uint64_t t0 = now_ns();
        for (Py_ssize_t i = 0; i < g->trips && !e; i++) {
            e = put(g->ping[1], 'p');
            if (!e) e = get(g->pong[0], &c);
        }
        uint64_t t1 = now_ns();
        if (e) break;
        g->batch_us[g->batches++] = (double)(t1 - t0) / 1e3 / (double)g->trips / 2.0;
        if (t1 - start >= g->budget_ns) break;
    }
done:
    g->err_a = e;
    put(g->ping[1], 'q'); /* best effort: a failed pipe ends the echo thread anyway */
    return NULL;
}

static const char pingpong_doc[] =
    "pingpong(cpu_a, cpu_b, trips=100, max_batches=200, budget_s=0.1) -> list[float]\n\n"
    "One-way wake-up cost in microseconds (half a pipe round trip) between a thread pinned to\n"
    "cpu_a and one pinned to cpu_b (the same CPU or two), one value per batch of `trips` round\n"
    "trips; stops after max_batches batches or once budget_s seconds have passed.";

static PyObject *wakeup_pingpong(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"cpu_a", "cpu_b", "trips", "max_batches", "budget_s", NULL};
    int cpu_a, cpu_b;
    Py_ssize_t trips = 100, max_batches = 200;
    double budget_s = 0.1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ii|nnd", kwlist, &cpu_a, &cpu_b, &trips,
                                     &max_batches, &budget_s))
        return NULL;
    if (cpu_a < 0 || cpu_b < 0 || cpu_a >= CPU_SETSIZE || cpu_b >= CPU_SETSIZE) {
        PyErr_SetString(PyExc_ValueError, "CPU numbers out of range");
        return NULL;
    }
    if (trips < 1 || max_batches < 1 || max_batches > MAX_BATCHES || !(budget_s > 0) ||
        budget_s > 10) {
        PyErr_SetString(PyExc_ValueError,
                        "need trips >= 1, 1 <= max_batches <= 4096, 0 < budget_s <= 10");
        return NULL;
    }
    struct game g;
    memset(&g, 0, sizeof(g));
    g.cpu_a = cpu_a;
    g.cpu_b = cpu_b;
    g.trips = trips;
    g.max_batches = max_batches;
    g.budget_ns = (uint64_t)(budget_s * 1e9);
    g.ping[0] = g.ping[1] = g.pong[0] = g.pong[1] = -1;
    g.batch_us = calloc((size_t)max_batches, sizeof(double));
    if (g.batch_us == NULL) return PyErr_NoMemory();
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    if (pipe2(g.ping, O_CLOEXEC) != 0 || pipe2(g.pong, O_CLOEXEC) != 0) {
        err = errno;
    } else {
        pthread_t ta, tb;
        err = pthread_create(&tb, NULL, echo, &g);
        if (!err) {
            err = pthread_create(&ta, NULL, initiate, &g);
            if (err) {
                put(g.ping[1], 'q');
            } else {
                pthread_join(ta, NULL);
            }
            pthread_join(tb, NULL);
        }
    }
    for (int i = 0; i < 2; i++) {
        if (g.ping[i] >= 0) close(g.ping[i]);
        if (g.pong[i] >= 0) close(g.pong[i]);
    }
    Py_END_ALLOW_THREADS
    if (!err) err = g.err_a ? g.err_a : g.err_b;
    if (err) {
        free(g.batch_us);
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *out = PyList_New(g.batches);
    if (out == NULL) {
        free(g.batch_us);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < g.batches; i++) {
        PyObject *v = PyFloat_FromDouble(g.batch_us[i]);
        if (v == NULL) {
            Py_DECREF(out);
            free(g.batch_us);
            return NULL;
        }
        PyList_SET_ITEM(out, i, v);
    }
    free(g.batch_us);
    return out;
}

static PyMethodDef methods[] = {
    KW_METHOD("pingpong", wakeup_pingpong, pingpong_doc),
    {NULL, NULL, 0, NULL},
};

MODULE_DEF(mod, "_wakeup",
           "The cost of a wake-up on one CPU and across CPUs: a pipe ping-pong between pinned "
           "threads.",
           methods);

PyMODINIT_FUNC PyInit__wakeup(void) { return PyModule_Create(&mod); }
