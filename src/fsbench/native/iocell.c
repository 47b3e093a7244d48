/* fsbench._iocell: one Iozone matrix cell's I/O, timed in C with the GIL released.
 *
 * What Iozone does for a cell, without a process per cell: for each pass, each file of the
 * job is opened, its records are read or written with pread/pwrite of record_size in the
 * cell's order (sequential, random, strided), fsynced when asked (Iozone -e), and closed.
 * The record order is computed before the clock starts; the clock (CLOCK_MONOTONIC, a vDSO
 * call) is read once when a job starts, once after every record (its latency) and once at the
 * end, so everything between, opens, creates, fsyncs and closes included, is in the time.
 *
 * Several jobs (--numjobs) run on their own threads, released together by a barrier; the
 * cell's time is from the first start to the last end, as fio's group reporting does.
 * Threads inherit the caller's CPU mask, so a placement pins them too.
 *
 * syscall="read" moves the records with read()/write() at the file position instead of
 * pread()/pwrite() at their offset: what dd, cp and cat do, one sequential stream per open.
 *
 * run(jobs, write, order, file_size, record_size, passes=1, fsync=0, create=0, stride=8,
 *     seed=..., timeout_s=0, syscall="pread") -> dict: ns, bytes, ops, opens, fsyncs,
 *     records (per file), latency percentiles (p50_ns, p99_ns, p999_ns, max_ns, mean_ns), and on the first failure errno,
 *     func (the call that failed) and path.
 * order(kind, records, stride=8, seed=...) -> list: the record order run uses, for tests.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

typedef enum { ORDER_SEQ, ORDER_RANDOM, ORDER_STRIDE } order_t;

/* splitmix64: a fixed seed gives every subject and sample the same random order. */
static inline uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The record indices in visiting order: every record exactly once. */
static void fill_order(uint64_t *out, uint64_t n, order_t kind, uint64_t stride, uint64_t seed) {
    if (kind == ORDER_STRIDE && stride > 0) {
        /* 0, S, 2S, ..., then 1, S+1, ...: Iozone's strided read, S records apart. */
        uint64_t k = 0;
        for (uint64_t start = 0; start < stride && start < n; start++)
            for (uint64_t r = start; r < n; r += stride) out[k++] = r;
        return;
    }
    for (uint64_t i = 0; i < n; i++) out[i] = i;
    if (kind == ORDER_RANDOM) {
        uint64_t s = seed;
        for (uint64_t i = n; i > 1; i--) { /* Fisher-Yates */
            uint64_t j = splitmix64(&s) % i;
            uint64_t t = out[i - 1];
            out[i - 1] = out[j];
            out[j] = t;
        }
    }
}

typedef struct {
    /* inputs */
    char **paths;
    size_t nfiles;
    int write, fsync_close, create, positional;
    uint64_t file_size, record_size, passes, records, timeout_ns;
    const uint64_t *order;
    pthread_barrier_t *barrier;
    volatile int *stop;
    /* outputs */
    uint64_t start_ns, end_ns, bytes, ops, opens, fsyncs;
    uint64_t *lat;
    int err;
    const char *func;
    const char *err_path;
} job_t;

static int fail(job_t *j, const char *func, const char *path, int err) {
    j->err = err ? err : EIO;
    j->func = func;
    j->err_path = path;
    *j->stop = 1;
    return -1;
}

/* One record at `off`, the whole of it: a short read is the file ending early (an error:
 * the cell's files are laid out full), a short write is retried for the rest. */
static int one_record(job_t *j, int fd, char *buf, uint64_t off, const char *path) {
    uint64_t done = 0;
    while (done < j->record_size) {
        ssize_t n;
        if (j->positional)
            n = j->write ? pwrite(fd, buf + done, j->record_size - done, (off_t)(off + done))
                         : pread(fd, buf + done, j->record_size - done, (off_t)(off + done));
        else /* sequential order only: the file position is `off + done` */
            n = j->write ? write(fd, buf + done, j->record_size - done)
                         : read(fd, buf + done, j->record_size - done);
        const char *func = j->positional ? (j->write ? "pwrite" : "pread")
                                         : (j->write ? "write" : "read");
        if (n < 0) {
            if (errno == EINTR) continue;
            return fail(j, func, path, errno);
        }
        if (n == 0) return fail(j, j->write ? func : "read (file ends early)", path, EIO);
        done += (uint64_t)n;
    }
    return 0;
}

static void *run_job(void *arg) {
    job_t *j = arg;
    char *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, j->record_size) != 0) {
        fail(j, "malloc", "", ENOMEM);
        if (j->barrier) pthread_barrier_wait(j->barrier);
        return NULL;
    }
    if (j->write) { /* not zeros: no driver may take a shortcut on them */
        uint64_t s = 0x5EED;
        for (uint64_t i = 0; i + 8 <= j->record_size; i += 8) {
            uint64_t v = splitmix64(&s);
            memcpy(buf + i, &v, 8);
        }
    } else {
        memset(buf, 0, j->record_size); /* faulted in before the clock starts */
    }
    int flags = j->write ? (O_WRONLY | (j->create ? O_CREAT : 0)) : O_RDONLY;
    if (j->barrier) pthread_barrier_wait(j->barrier);
    uint64_t k = 0;
    uint64_t t = now_ns();
    j->start_ns = t;
    for (uint64_t pass = 0; pass < j->passes && !*j->stop; pass++) {
        for (size_t f = 0; f < j->nfiles && !*j->stop; f++) {
            const char *path = j->paths[f];
            int fd = open(path, flags | O_CLOEXEC, 0644);
            if (fd < 0) {
                fail(j, "open", path, errno);
                break;
            }
            j->opens++;
            t = now_ns();
            for (uint64_t r = 0; r < j->records; r++) {
                if (one_record(j, fd, buf, j->order[r] * j->record_size, path) != 0) break;
                uint64_t t1 = now_ns();
                j->lat[k++] = t1 - t;
                t = t1;
                j->ops++;
                j->bytes += j->record_size;
                if (j->timeout_ns && t1 - j->start_ns > j->timeout_ns) {
                    fail(j, "the time limit", path, ETIMEDOUT); /* a driver too slow to wait for */
                    break;
                }
            }
            if (!j->err && j->fsync_close) {
                if (fsync(fd) != 0)
                    fail(j, "fsync", path, errno);
                else
                    j->fsyncs++;
            }
            if (close(fd) != 0 && !j->err) fail(j, "close", path, errno);
        }
    }
    j->end_ns = now_ns();
    free(buf);
    return NULL;
}

static int parse_order(const char *s, order_t *out) {
    if (strcmp(s, "seq") == 0)
        *out = ORDER_SEQ;
    else if (strcmp(s, "random") == 0)
        *out = ORDER_RANDOM;
    else if (strcmp(s, "stride") == 0)
        *out = ORDER_STRIDE;
    else {
        PyErr_Format(PyExc_ValueError, "unknown order %s (seq, random, stride)", s);
        return -1;
    }
    return 0;
}

#define DEFAULT_SEED 0x10204ull

static PyObject *py_order(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"kind", "records", "stride", "seed", NULL};
    const char *kind;
    unsigned long long records, stride = 8, seed = DEFAULT_SEED;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sK|KK", kwlist, &kind, &records, &stride, &seed))
        return NULL;
    order_t o;
    if (parse_order(kind, &o) != 0) return NULL;
    uint64_t *v = malloc(sizeof(uint64_t) * (records ? records : 1));
    if (!v) return PyErr_NoMemory();
    fill_order(v, records, o, stride, seed);
    PyObject *list = PyList_New((Py_ssize_t)records);
    for (uint64_t i = 0; list && i < records; i++)
        PyList_SET_ITEM(list, (Py_ssize_t)i, PyLong_FromUnsignedLongLong(v[i]));
    free(v);
    return list;
}

static void free_jobs(job_t *jobs, size_t njobs) {
    for (size_t i = 0; i < njobs; i++) {
        if (jobs[i].paths) {
            for (size_t f = 0; f < jobs[i].nfiles; f++) free(jobs[i].paths[f]);
            free(jobs[i].paths);
        }
        free(jobs[i].lat);
    }
    free(jobs);
}

static PyObject *py_run(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"jobs",   "write",  "order",  "file_size", "record_size", "passes",
                             "fsync",  "create", "stride", "seed",      "timeout_s", "syscall",
                             NULL};
    PyObject *jobs_obj;
    int write, fsync_close = 0, create = 0;
    const char *order_s, *syscall_s = "pread";
    unsigned long long file_size, record_size, passes = 1, stride = 8, seed = DEFAULT_SEED;
    double timeout_s = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OpsKK|KppKKds", kwlist, &jobs_obj, &write,
                                     &order_s, &file_size, &record_size, &passes, &fsync_close,
                                     &create, &stride, &seed, &timeout_s, &syscall_s))
        return NULL;
    order_t o;
    if (parse_order(order_s, &o) != 0) return NULL;
    /* pread/pwrite at each record's offset, or read/write at the file position (dd's way);
     * the name says which, the direction is `write`'s. */
    int positional = strcmp(syscall_s, "pread") == 0 || strcmp(syscall_s, "pwrite") == 0;
    if (!positional && strcmp(syscall_s, "read") != 0 && strcmp(syscall_s, "write") != 0) {
        PyErr_Format(PyExc_ValueError, "unknown syscall %s (pread, pwrite, read, write)",
                     syscall_s);
        return NULL;
    }
    if (!positional && o != ORDER_SEQ) {
        PyErr_Format(PyExc_ValueError, "syscall %s moves records in sequential order only",
                     syscall_s);
        return NULL;
    }
    if (record_size == 0 || file_size < record_size || file_size % record_size != 0) {
        PyErr_SetString(PyExc_ValueError, "file_size must be a whole number of records");
        return NULL;
    }
    if (!PyList_Check(jobs_obj) || PyList_GET_SIZE(jobs_obj) == 0) {
        PyErr_SetString(PyExc_ValueError, "jobs: a non-empty list of lists of paths");
        return NULL;
    }
    size_t njobs = (size_t)PyList_GET_SIZE(jobs_obj);
    uint64_t records = file_size / record_size;
    job_t *jobs = calloc(njobs, sizeof(job_t));
    uint64_t *order = malloc(sizeof(uint64_t) * records);
    volatile int stop = 0;
    if (!jobs || !order) {
        free(jobs);
        free(order);
        return PyErr_NoMemory();
    }
    fill_order(order, records, o, stride, seed);
    for (size_t i = 0; i < njobs; i++) {
        PyObject *files = PyList_GET_ITEM(jobs_obj, (Py_ssize_t)i);
        if (!PyList_Check(files) || PyList_GET_SIZE(files) == 0) {
            PyErr_SetString(PyExc_ValueError, "jobs: each job a non-empty list of paths");
            goto error;
        }
        job_t *j = &jobs[i];
        j->nfiles = (size_t)PyList_GET_SIZE(files);
        j->paths = calloc(j->nfiles, sizeof(char *));
        uint64_t nlat = (uint64_t)j->nfiles * records * passes;
        j->lat = malloc(sizeof(uint64_t) * (nlat ? nlat : 1));
        if (!j->paths || !j->lat) {
            PyErr_NoMemory();
            goto error;
        }
        for (size_t f = 0; f < j->nfiles; f++) {
            PyObject *b = NULL;
            if (!PyUnicode_FSConverter(PyList_GET_ITEM(files, (Py_ssize_t)f), &b)) goto error;
            j->paths[f] = strdup(PyBytes_AS_STRING(b));
            Py_DECREF(b);
            if (!j->paths[f]) {
                PyErr_NoMemory();
                goto error;
            }
        }
        j->write = write;
        j->fsync_close = fsync_close;
        j->create = create;
        j->positional = positional;
        j->file_size = file_size;
        j->record_size = record_size;
        j->passes = passes;
        j->records = records;
        j->timeout_ns = timeout_s > 0 ? (uint64_t)(timeout_s * 1e9) : 0;
        j->order = order;
        j->stop = &stop;
        j->func = "";
        j->err_path = "";
    }

    pthread_barrier_t barrier;
    pthread_t *threads = NULL;
    int thread_err = 0;
    Py_BEGIN_ALLOW_THREADS;
    if (njobs == 1) {
        run_job(&jobs[0]); /* the calling thread: no thread start in the way */
    } else {
        threads = calloc(njobs, sizeof(pthread_t));
        if (!threads || pthread_barrier_init(&barrier, NULL, (unsigned)njobs) != 0) {
            thread_err = ENOMEM;
        } else {
            size_t started = 0;
            for (size_t i = 0; i < njobs; i++) jobs[i].barrier = &barrier;
            for (; started < njobs; started++)
                if (pthread_create(&threads[started], NULL, run_job, &jobs[started]) != 0) break;
            if (started < njobs) {
                /* The barrier would wait for threads that never came: fail them, release it. */
                thread_err = EAGAIN;
                stop = 1;
                for (size_t i = started; i < njobs; i++) pthread_barrier_wait(&barrier);
            }
            for (size_t i = 0; i < started; i++) pthread_join(threads[i], NULL);
            pthread_barrier_destroy(&barrier);
        }
        free(threads);
    }
    Py_END_ALLOW_THREADS;
    if (thread_err) {
        errno = thread_err;
        PyErr_SetFromErrno(PyExc_OSError);
        goto error;
    }

    uint64_t start = UINT64_MAX, end = 0, bytes = 0, ops = 0, opens = 0, fsyncs = 0, sum = 0;
    int err = 0;
    const char *func = "", *err_path = "";
    for (size_t i = 0; i < njobs; i++) {
        job_t *j = &jobs[i];
        if (j->start_ns && j->start_ns < start) start = j->start_ns;
        if (j->end_ns > end) end = j->end_ns;
        bytes += j->bytes;
        ops += j->ops;
        opens += j->opens;
        fsyncs += j->fsyncs;
        if (j->err && !err) {
            err = j->err;
            func = j->func;
            err_path = j->err_path;
        }
    }
    uint64_t *all = malloc(sizeof(uint64_t) * (ops ? ops : 1));
    if (!all) {
        PyErr_NoMemory();
        goto error;
    }
    size_t k = 0;
    for (size_t i = 0; i < njobs; i++)
        for (uint64_t x = 0; x < jobs[i].ops; x++) {
            all[k++] = jobs[i].lat[x];
            sum += jobs[i].lat[x];
        }
    qsort(all, k, sizeof(uint64_t), cmp_u64);
    PyObject *res = Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:d,s:i,s:s,s:s}", "ns",
        (unsigned long long)(end > start ? end - start : 0), "bytes", (unsigned long long)bytes,
        "ops", (unsigned long long)ops, "opens", (unsigned long long)opens, "fsyncs",
        (unsigned long long)fsyncs, "records", (unsigned long long)records, "p50_ns",
        (unsigned long long)percentile(all, k, 500), "p99_ns",
        (unsigned long long)percentile(all, k, 990), "p999_ns",
        (unsigned long long)percentile(all, k, 999), "max_ns",
        (unsigned long long)(k ? all[k - 1] : 0), "mean_ns", k ? (double)sum / (double)k : 0.0,
        "errno", err, "func", func, "path", err_path);
    free(all);
    free(order);
    free_jobs(jobs, njobs);
    return res;

error:
    free(order);
    free_jobs(jobs, njobs);
    return NULL;
}

static PyMethodDef methods[] = {
    KW_METHOD("run", py_run,
              "run(jobs, write, order, file_size, record_size, passes=1, fsync=False, "
              "create=False, stride=8, seed=..., timeout_s=0, syscall='pread') -> dict: one "
              "matrix cell's I/O, timed in C"),
    KW_METHOD("order", py_order,
              "order(kind, records, stride=8, seed=...) -> list: the record order run uses"),
    {NULL, NULL, 0, NULL},
};

MODULE_DEF(module, "_iocell", "One Iozone matrix cell's I/O, timed in C.", methods);

PyMODINIT_FUNC PyInit__iocell(void) { return PyModule_Create(&module); }
