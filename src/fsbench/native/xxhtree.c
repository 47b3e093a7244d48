/* fsbench._xxhtree: XXH128 of many files on a pool of threads, the GIL released.
 *
 * hash_files(paths, threads=0, bufsize=256 KiB, overlap=False)
 *     -> [(hexdigest | None, size, errno), ...]
 *
 * Each worker takes the next file from a shared counter, reads it sequentially with large
 * read(2)s (as xxhsum does) and hashes it, so reading one file and hashing another overlap
 * across cores. overlap=True also double-buffers each file larger than one buffer: a helper
 * thread reads the next chunk while the worker hashes the current one. Measured on 2 cores it
 * does not pay: with the dispatched (AVX2) hash, copying from the page cache is ~85 % of the
 * CPU per byte, the hand-off costs ~5-10 % more CPU, and cold reads through ntfs-3g were no
 * faster; so it is off by default and kept for measuring.
 *
 * The digest is the canonical (big-endian) hex that `xxhsum -H2` prints. A file that cannot be
 * opened or read gets digest None and its errno; the call itself only fails on bad arguments,
 * out of memory, or a signal whose Python handler raises (Ctrl-C, the pipeline's SIGTERM).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "common.h"

/* libxxhash on x86-64 also exports runtime-dispatched variants (AVX2/AVX-512 when the CPU has
 * them); xxhsum 0.8.1 as packaged uses the baseline SSE2 code only. Same digests either way. */
#if defined(__x86_64__) && defined(__has_include)
#if __has_include(<xxh_x86dispatch.h>)
#include <xxh_x86dispatch.h>
#define H128_ONESHOT XXH3_128bits_dispatch
#define H128_UPDATE XXH3_128bits_update_dispatch
#endif
#endif
#ifndef H128_ONESHOT
#define H128_ONESHOT XXH3_128bits
#define H128_UPDATE XXH3_128bits_update
#endif

/* 256 KiB: as fast as 1 MiB from the page cache at less CPU (the buffer stays in L2), and
 * faster cold through FUSE in our measurements. */
#define DEFAULT_BUFSIZE (1 << 18)
#define MAX_THREADS 256

typedef struct {
    const char *path; /* borrowed from a bytes object the caller keeps alive */
    XXH128_hash_t hash;
    long long size;
    int err;
} item_t;

typedef struct {
    item_t *items;
    size_t n;
    size_t bufsize;
    int overlap; /* double-buffer files larger than one buffer with a reader thread */
    atomic_size_t next;
    atomic_int stop; /* set when a signal handler raised: workers stop between chunks */
    pthread_mutex_t mu;
    pthread_cond_t done_cv;
    int running;
} job_t;

/* The read-ahead half of a worker: reads chunks of the current file into the buffer the
 * worker is not hashing. One request at a time; the worker waits for its result. */
typedef struct {
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fd;
    char *buf;
    size_t want;
    ssize_t got; /* bytes read, or -errno */
    int pending; /* a request waits to be served */
    int ready;   /* its result is in got */
    int quit;
    int started;
} reader_t;

typedef struct {
    job_t *job;
    char *buf[2];
    reader_t rd;
    pthread_t tid;
} worker_t;

/* Fill buf with up to len bytes: loops over short reads until full or end of file. */
static ssize_t read_full(int fd, char *buf, size_t len)
{
    size_t have = 0;
    while (have < len) {
        ssize_t r = read(fd, buf + have, len - have);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            break;
        have += (size_t)r;
    }
    return (ssize_t)have;
}

static void *reader_main(void *arg)
{
    reader_t *rd = arg;
    pthread_mutex_lock(&rd->mu);
    for (;;) {
        while (!rd->pending && !rd->quit)
            pthread_cond_wait(&rd->cv, &rd->mu);
        if (rd->quit)
            break;
        int fd = rd->fd;
        char *buf = rd->buf;
        size_t want = rd->want;
        pthread_mutex_unlock(&rd->mu);
        ssize_t got = read_full(fd, buf, want);
        pthread_mutex_lock(&rd->mu);
        rd->got = got;
        rd->pending = 0;
        rd->ready = 1;
        pthread_cond_broadcast(&rd->cv);
    }
    pthread_mutex_unlock(&rd->mu);
    return NULL;
}

static void reader_request(reader_t *rd, int fd, char *buf, size_t want)
{
    pthread_mutex_lock(&rd->mu);
    rd->fd = fd;
    rd->buf = buf;
    rd->want = want;
    rd->ready = 0;
    rd->pending = 1;
    pthread_cond_broadcast(&rd->cv);
    pthread_mutex_unlock(&rd->mu);
}

static ssize_t reader_wait(reader_t *rd)
{
    pthread_mutex_lock(&rd->mu);
    while (!rd->ready)
        pthread_cond_wait(&rd->cv, &rd->mu);
    ssize_t got = rd->got;
    rd->ready = 0;
    pthread_mutex_unlock(&rd->mu);
    return got;
}

static void hash_one(worker_t *w, item_t *it)
{
    job_t *job = w->job;
    size_t bs = job->bufsize;
    /* O_NONBLOCK: opening a FIFO named in a manifest must not hang; no effect on files. */
    int fd;
    do
        fd = open(it->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        it->err = errno;
        return;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        it->err = errno;
        close(fd);
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        it->err = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        close(fd);
        return;
    }
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);

    ssize_t got = read_full(fd, w->buf[0], bs);
    if (got < 0) {
        it->err = (int)-got;
        close(fd);
        return;
    }
    if ((size_t)got < bs) {
        /* The whole file in one buffer (most files of a tree): one-shot hash, no state. */
        it->hash = H128_ONESHOT(w->buf[0], (size_t)got);
        it->size = got;
        close(fd);
        return;
    }

    XXH3_state_t *state = XXH3_createState();
    if (state == NULL) {
        it->err = ENOMEM;
        close(fd);
        return;
    }
    XXH3_128bits_reset(state);
    long long total = 0;
    int cur = 0;
    int use_reader = w->rd.started;
    for (;;) {
        /* got > 0 bytes sit in buf[cur]; start reading the next chunk, then hash this one. */
        if (use_reader)
            reader_request(&w->rd, fd, w->buf[cur ^ 1], bs);
        H128_UPDATE(state, w->buf[cur], (size_t)got);
        total += got;
        ssize_t next = use_reader ? reader_wait(&w->rd) : read_full(fd, w->buf[cur ^ 1], bs);
        if (next < 0) {
            it->err = (int)-next;
            break;
        }
        if (next == 0 || atomic_load_explicit(&job->stop, memory_order_relaxed)) {
            if (next == 0)
                it->hash = XXH3_128bits_digest(state);
            else
                it->err = EINTR;
            break;
        }
        got = next;
        cur ^= 1;
    }
    it->size = total;
    XXH3_freeState(state);
    close(fd);
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    job_t *job = w->job;
    for (;;) {
        if (atomic_load_explicit(&job->stop, memory_order_relaxed))
            break;
        size_t i = atomic_fetch_add(&job->next, 1);
        if (i >= job->n)
            break;
        hash_one(w, &job->items[i]);
    }
    pthread_mutex_lock(&job->mu);
    job->running--;
    pthread_cond_signal(&job->done_cv);
    pthread_mutex_unlock(&job->mu);
    return NULL;
}

static int worker_init(worker_t *w, job_t *job)
{
    memset(w, 0, sizeof(*w));
    w->job = job;
    pthread_mutex_init(&w->rd.mu, NULL);
    pthread_cond_init(&w->rd.cv, NULL);
    for (int k = 0; k < 2; k++) {
        /* Page-aligned: the kernel's copy to user space is fastest on aligned buffers. */
        if (posix_memalign((void **)&w->buf[k], 4096, job->bufsize) != 0) {
            w->buf[k] = NULL;
            return -1;
        }
    }
    /* Without a helper the worker reads and hashes in turn: slower, still correct. */
    if (job->overlap)
        w->rd.started = pthread_create(&w->rd.tid, NULL, reader_main, &w->rd) == 0;
    return 0;
}

static void worker_fini(worker_t *w)
{
    if (w->rd.started) {
        pthread_mutex_lock(&w->rd.mu);
        w->rd.quit = 1;
        pthread_cond_broadcast(&w->rd.cv);
        pthread_mutex_unlock(&w->rd.mu);
        pthread_join(w->rd.tid, NULL);
    }
    pthread_mutex_destroy(&w->rd.mu);
    pthread_cond_destroy(&w->rd.cv);
    free(w->buf[0]);
    free(w->buf[1]);
}

static long online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

/* Runs the pool; called with the GIL released. The calling thread only supervises, waking
 * every 100 ms to let Python run signal handlers. Returns -1 when a handler raised. */
static int run_pool(job_t *job, int nthreads, PyThreadState **ts)
{
    worker_t *workers = calloc((size_t)nthreads, sizeof(worker_t));
    if (workers == NULL)
        return -2;
    int started = 0;
    int rc = 0;
    pthread_mutex_lock(&job->mu);
    job->running = 0;
    pthread_mutex_unlock(&job->mu);
    /* Workers inherit a mask blocking every signal, so signals reach the calling thread
     * (where Python's handlers run) and never interrupt a worker's open or read. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (int t = 0; t < nthreads; t++) {
        if (worker_init(&workers[t], job) != 0) {
            worker_fini(&workers[t]);
            break;
        }
        pthread_mutex_lock(&job->mu);
        job->running++;
        pthread_mutex_unlock(&job->mu);
        if (pthread_create(&workers[t].tid, NULL, worker_main, &workers[t]) != 0) {
            pthread_mutex_lock(&job->mu);
            job->running--;
            pthread_mutex_unlock(&job->mu);
            worker_fini(&workers[t]);
            break;
        }
        started++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (started == 0) {
        free(workers);
        return -2;
    }

    pthread_mutex_lock(&job->mu);
    while (job->running > 0) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec += 1;
            until.tv_nsec -= 1000000000L;
        }
        int w = pthread_cond_timedwait(&job->done_cv, &job->mu, &until);
        if (w == ETIMEDOUT && rc == 0) {
            pthread_mutex_unlock(&job->mu);
            PyEval_RestoreThread(*ts);
            int sig = PyErr_CheckSignals();
            *ts = PyEval_SaveThread();
            if (sig != 0) {
                atomic_store(&job->stop, 1);
                rc = -1;
            }
            pthread_mutex_lock(&job->mu);
        }
    }
    pthread_mutex_unlock(&job->mu);

    for (int t = 0; t < started; t++) {
        pthread_join(workers[t].tid, NULL);
        worker_fini(&workers[t]);
    }
    free(workers);
    return rc;
}

static PyObject *digest_hex(XXH128_hash_t h)
{
    static const char hexdig[] = "0123456789abcdef";
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    char out[32];
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hexdig[c.digest[i] >> 4];
        out[2 * i + 1] = hexdig[c.digest[i] & 15];
    }
    return PyUnicode_FromStringAndSize(out, 32);
}

PyDoc_STRVAR(hash_files_doc,
             "hash_files($module, /, paths, threads=0, bufsize=262144, overlap=False)\n--\n\n"
             "XXH128 of each file, in order, as `xxhsum -H2` prints it (canonical hex):\n"
             "a list of (hexdigest, size, errno), one per path.\n"
             "paths: str, bytes or os.PathLike. threads <= 0: one per online CPU.\n"
             "A file that cannot be read: (None, bytes read before the error, errno).\n"
             "Reads and hashes on native threads with the GIL released; overlap=True also\n"
             "double-buffers each large file (a reader thread per worker).");

static PyObject *hash_files(PyObject *self, PyObject *args, PyObject *kwds)
{
    (void)self;
    static char *kwlist[] = {"paths", "threads", "bufsize", "overlap", NULL};
    PyObject *paths_in;
    int threads = 0;
    Py_ssize_t bufsize = DEFAULT_BUFSIZE;
    int overlap = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|inp:hash_files", kwlist, &paths_in, &threads,
                                     &bufsize, &overlap))
        return NULL;
    if (bufsize < 4096 || bufsize > (1 << 30)) {
        PyErr_SetString(PyExc_ValueError, "bufsize must be between 4096 and 1 GiB");
        return NULL;
    }
    paths_t paths;
    if (paths_from(paths_in, "paths must be a sequence of paths", &paths) != 0)
        return NULL;
    Py_ssize_t n = paths.n;
    item_t *items = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(item_t));
    PyObject *result = NULL;
    if (items == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        items[i].path = paths.paths[i];

    long nthreads = threads > 0 ? threads : online_cpus();
    if (nthreads > MAX_THREADS)
        nthreads = MAX_THREADS;
    if (nthreads > n)
        nthreads = n > 0 ? n : 1;

    if (n > 0) {
        job_t job;
        memset(&job, 0, sizeof(job));
        job.items = items;
        job.n = (size_t)n;
        job.bufsize = (size_t)bufsize;
        job.overlap = overlap;
        atomic_init(&job.next, 0);
        atomic_init(&job.stop, 0);
        pthread_mutex_init(&job.mu, NULL);
        pthread_cond_init(&job.done_cv, NULL);
        PyThreadState *ts = PyEval_SaveThread();
        int rc = run_pool(&job, (int)nthreads, &ts);
        PyEval_RestoreThread(ts);
        pthread_mutex_destroy(&job.mu);
        pthread_cond_destroy(&job.done_cv);
        if (rc == -1)
            goto done; /* the signal handler's exception is set */
        if (rc == -2) {
            PyErr_SetString(PyExc_OSError, "could not start hashing threads or buffers");
            goto done;
        }
    }

    result = PyList_New(n);
    if (result == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *digest;
        if (items[i].err == 0) {
            digest = digest_hex(items[i].hash);
            if (digest == NULL) {
                Py_CLEAR(result);
                goto done;
            }
        } else {
            digest = Py_NewRef(Py_None);
        }
        PyObject *t = Py_BuildValue("(NLi)", digest, items[i].size, items[i].err);
        if (t == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, t);
    }

done:
    PyMem_Free(items);
    paths_free(&paths);
    return result;
}

static PyMethodDef methods[] = {
    KW_METHOD("hash_files", hash_files, hash_files_doc),
    {NULL, NULL, 0, NULL},
};

MODULE_DEF(mod, "_xxhtree",
           "XXH128 of many files on native threads (the GIL released), for fsbench's tree-hash.",
           methods);

PyMODINIT_FUNC PyInit__xxhtree(void)
{
    PyObject *m = PyModule_Create(&mod);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "DEFAULT_BUFSIZE", DEFAULT_BUFSIZE) < 0 ||
        PyModule_AddIntConstant(m, "XXHASH_VERSION", (long)XXH_versionNumber()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
