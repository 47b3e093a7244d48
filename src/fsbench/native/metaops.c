/* fsbench._metaops: metadata operations over many files, timed in C with the GIL released.
 *
 * The metadata workload needs per-file rates that Python cannot reach (a Python loop costs more
 * than a tmpfs stat), so the whole loop runs here: names are built and directories opened
 * before the clock starts, the loop does only the system calls and one clock read per op, and
 * the per-op latencies are sorted here too.
 *
 * list_dirs() is `ls -l` of directories the caller names (an aged tree's), timed the same way.
 *
 * Layout: `dirs` == 0 puts the n files directly in `root` ("flat"); `dirs` == D puts them in
 * root/d0000 .. root/d{D-1}, file i in directory i*D/n, so every directory is walked in one
 * stretch as a tree walker would ("tree"). Names: f0000000, f0000001, ...; renamed: NAME.r.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define NAME_STRIDE 32  /* "f" + up to 20 digits + ".r" + NUL fits */
#define DIR_NAME_LEN 24  /* "d" + up to 20 digits + NUL */
#define MAX_DIRS 65536
#define MAX_FILL (1 << 20)  /* create: at most 1 MiB written into each new file */

typedef enum { OP_CREATE, OP_STAT, OP_CHMOD, OP_RENAME, OP_UNRENAME, OP_READDIR, OP_UNLINK } op_t;

static const char *const OP_NAMES[] = {"create",   "stat",    "chmod", "rename",
                                       "unrename", "readdir", "unlink"};
#define N_OPS (sizeof(OP_NAMES) / sizeof(OP_NAMES[0]))

static void file_name(char *out, size_t i, int renamed) {
    snprintf(out, NAME_STRIDE, renamed ? "f%07zu.r" : "f%07zu", i);
}

static void dir_name(char *out, size_t j) { snprintf(out, DIR_NAME_LEN, "d%04zu", j); }

/* The directory that file i of n lives in (0 when flat): contiguous runs, balanced sizes. */
static inline size_t dir_of(size_t i, size_t n, size_t dirs) {
    return dirs ? (size_t)(((unsigned __int128)i * dirs) / n) : 0;
}

typedef struct {
    /* inputs */
    op_t op;
    const char *root;
    size_t n, dirs;
    mode_t mode;
    size_t fill;
    int ignore_errno;
    /* outputs */
    uint64_t elapsed_ns;
    size_t ops, failed, skipped;
    int first_errno;
    uint64_t *lat;
    size_t nlat, cap;
    /* setup failure (reported as OSError): errno and what failed */
    int setup_errno;
    const char *setup_what;
    char setup_path[PATH_MAX];
} job_t;

static void note_failure(job_t *j, int err) {
    if (j->ignore_errno && err == j->ignore_errno) {
        j->skipped++;
        return;
    }
    if (j->failed++ == 0) j->first_errno = err;
}

static void setup_error(job_t *j, int err, const char *what, const char *path) {
    j->setup_errno = err;
    j->setup_what = what;
    snprintf(j->setup_path, sizeof(j->setup_path), "%s", path);
}

/* readdir: one pass over each directory; every entry but . and .. is one op. */
static void run_readdir(job_t *j, int rootfd) {
    size_t ndirs = j->dirs ? j->dirs : 1;
    char dname[DIR_NAME_LEN];
    uint64_t t0 = now_ns(), prev = t0;
    for (size_t d = 0; d < ndirs; d++) {
        if (j->dirs)
            dir_name(dname, d);
        else
            strcpy(dname, ".");
        int fd = openat(rootfd, dname, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
        if (dir == NULL) {
            note_failure(j, errno);
            if (fd >= 0) close(fd);
            prev = now_ns();
            continue;
        }
        for (;;) {
            errno = 0;
            struct dirent *e = readdir(dir);
            if (e == NULL) {
                if (errno) note_failure(j, errno);
                break;
            }
            if (e->d_name[0] == '.' &&
                (e->d_name[1] == 0 || (e->d_name[1] == '.' && e->d_name[2] == 0)))
                continue;
            uint64_t t = now_ns();
            if (j->nlat == j->cap) {
                /* More entries than files (someone else's): grow, rarely. */
                size_t cap = j->cap ? j->cap * 2 : 1024;
                uint64_t *lat = realloc(j->lat, cap * sizeof(*lat));
                if (lat == NULL) {
                    note_failure(j, ENOMEM);
                    break;
                }
                j->lat = lat;
                j->cap = cap;
            }
            j->lat[j->nlat++] = t - prev;
            j->ops++;
            prev = t;
        }
        closedir(dir);
    }
    j->elapsed_ns = now_ns() - t0;
}

/* Everything of one call outside the GIL: set-up, the timed loop, tear-down, sorting. */
static void run_job(job_t *j) {
    char *names = NULL, *rnames = NULL, *fill = NULL;
    int *fdv = NULL, *dirfds = NULL;
    size_t ndirfds = 0;
    int rootfd = open(j->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) {
        setup_error(j, errno, "cannot open directory", j->root);
        return;
    }
    j->cap = j->n ? j->n : 1;
    j->lat = malloc(j->cap * sizeof(*j->lat));
    if (j->lat == NULL) goto nomem;
    /* Touch every page now, so no page fault lands inside the timed loop. */
    memset(j->lat, 0, j->cap * sizeof(*j->lat));
    if (j->op == OP_READDIR) {
        run_readdir(j, rootfd);
        goto sort;
    }

    /* Names and per-file directory fds, all before the clock starts. */
    names = malloc(j->n * NAME_STRIDE);
    fdv = malloc(j->n * sizeof(*fdv));
    if (names == NULL || fdv == NULL) goto nomem;
    int renaming = j->op == OP_RENAME || j->op == OP_UNRENAME;
    if (renaming && (rnames = malloc(j->n * NAME_STRIDE)) == NULL) goto nomem;
    if (j->op == OP_CREATE && j->fill && (fill = calloc(1, j->fill)) == NULL) goto nomem;
    ndirfds = j->dirs ? j->dirs : 1;
    if ((dirfds = malloc(ndirfds * sizeof(*dirfds))) == NULL) goto nomem;
    for (size_t d = 0; d < ndirfds; d++) dirfds[d] = -1;
    if (j->dirs) {
        char dname[DIR_NAME_LEN];
        for (size_t d = 0; d < ndirfds; d++) {
            dir_name(dname, d);
            dirfds[d] = openat(rootfd, dname, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (dirfds[d] < 0) {
                char path[PATH_MAX];
                snprintf(path, sizeof(path), "%s/%s", j->root, dname);
                setup_error(j, errno, "cannot open directory", path);
                goto out;
            }
        }
    } else {
        dirfds[0] = rootfd;
    }
    for (size_t i = 0; i < j->n; i++) {
        file_name(names + i * NAME_STRIDE, i, 0);
        if (rnames) file_name(rnames + i * NAME_STRIDE, i, 1);
        fdv[i] = dirfds[dir_of(i, j->n, j->dirs)];
    }

    struct stat st;
    const op_t op = j->op;
    const mode_t mode = j->mode;
    uint64_t t0 = now_ns(), prev = t0;
    for (size_t i = 0; i < j->n; i++) {
        const char *name = names + i * NAME_STRIDE;
        const int dfd = fdv[i];
        int r;
        switch (op) {
        case OP_CREATE: {
            int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
            r = fd < 0 ? -1 : 0;
            if (fd >= 0) {
                errno = 0;
                if (fill && write(fd, fill, j->fill) != (ssize_t)j->fill) {
                    int err = errno ? errno : EIO; /* a short write: call it EIO */
                    close(fd);
                    errno = err;
                    r = -1;
                } else {
                    r = close(fd);
                }
            }
            break;
        }
        case OP_STAT:
            r = fstatat(dfd, name, &st, 0);
            break;
        case OP_CHMOD:
            r = fchmodat(dfd, name, mode, 0);
            break;
        case OP_RENAME:
            r = renameat(dfd, name, dfd, rnames + i * NAME_STRIDE);
            break;
        case OP_UNRENAME:
            r = renameat(dfd, rnames + i * NAME_STRIDE, dfd, name);
            break;
        case OP_UNLINK:
            r = unlinkat(dfd, name, 0);
            break;
        default:
            r = -1;
            errno = EINVAL;
        }
        int err = errno;
        uint64_t t = now_ns();
        if (r < 0) {
            note_failure(j, err);
        } else {
            j->lat[j->nlat++] = t - prev;
            j->ops++;
        }
        prev = t;
    }
    j->elapsed_ns = prev - t0;

sort:
    qsort(j->lat, j->nlat, sizeof(*j->lat), cmp_u64);
    goto out;
nomem:
    setup_error(j, ENOMEM, "out of memory", j->root);
out:
    if (dirfds && j->dirs)
        for (size_t d = 0; d < ndirfds; d++)
            if (dirfds[d] >= 0) close(dirfds[d]);
    close(rootfd);
    free(dirfds);
    free(fdv);
    free(names);
    free(rnames);
    free(fill);
}

PyDoc_STRVAR(run_doc,
             "run(op, root, n, dirs=0, mode=0o644, fill=0, ignore_errno=0) -> dict\n\n"
             "Do one metadata operation on each of n files under root and time it in C.\n"
             "op: create | stat | chmod | rename | unrename | readdir | unlink.\n"
             "dirs: 0 = the files are in root; D = in root/d0000 .. d{D-1} (which must exist).\n"
             "mode: create's and chmod's mode. fill: bytes written into each created file.\n"
             "ignore_errno: failures with this errno are counted as skipped, not failed.\n"
             "Returns ns (the loop only), ops (succeeded), failed, errno (of the first failure,\n"
             "0 if none), skipped, and p50_ns/p99_ns/p999_ns/max_ns over the succeeded ops.\n"
             "Raises OSError when root (or a tree directory) cannot be opened.");

static PyObject *metaops_run(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"op", "root", "n", "dirs", "mode", "fill", "ignore_errno", NULL};
    const char *opname;
    PyObject *root_obj = NULL;
    Py_ssize_t n, dirs = 0, fill = 0;
    unsigned int mode = 0644;
    int ignore_errno = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO&n|nIni", kwlist, &opname, PyUnicode_FSConverter,
                                     &root_obj, &n, &dirs, &mode, &fill, &ignore_errno))
        return NULL;
    job_t *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        Py_DECREF(root_obj);
        return PyErr_NoMemory();
    }
    PyObject *result = NULL;
    size_t k = 0;
    while (k < N_OPS && strcmp(opname, OP_NAMES[k]) != 0) k++;
    if (k == N_OPS) {
        PyErr_Format(PyExc_ValueError, "unknown operation %R", PyTuple_GET_ITEM(args, 0));
        goto done;
    }
    if (n < 1 || (size_t)n > SIZE_MAX / NAME_STRIDE) {
        PyErr_SetString(PyExc_ValueError, "n must be at least 1");
        goto done;
    }
    if (dirs < 0 || dirs > MAX_DIRS || dirs > n) {
        PyErr_Format(PyExc_ValueError, "dirs must be between 0 and min(n, %d)", MAX_DIRS);
        goto done;
    }
    if (fill < 0 || fill > MAX_FILL) {
        PyErr_Format(PyExc_ValueError, "fill must be between 0 and %d bytes", MAX_FILL);
        goto done;
    }
    j->op = (op_t)k;
    j->root = PyBytes_AS_STRING(root_obj); /* kept alive by root_obj while the GIL is out */
    j->n = (size_t)n;
    j->dirs = (size_t)dirs;
    j->mode = (mode_t)(mode & 07777);
    j->fill = (size_t)fill;
    j->ignore_errno = ignore_errno;

    Py_BEGIN_ALLOW_THREADS
    run_job(j);
    Py_END_ALLOW_THREADS

    if (j->setup_errno) {
        errno = j->setup_errno;
        if (j->setup_errno == ENOMEM)
            PyErr_NoMemory();
        else
            PyErr_SetFromErrnoWithFilename(PyExc_OSError, j->setup_path);
        goto done;
    }
    result = Py_BuildValue(
        "{s:s,s:K,s:n,s:n,s:i,s:n,s:K,s:K,s:K,s:K}", "op", OP_NAMES[k], "ns",
        (unsigned long long)j->elapsed_ns, "ops", (Py_ssize_t)j->ops, "failed",
        (Py_ssize_t)j->failed, "errno", j->first_errno, "skipped", (Py_ssize_t)j->skipped,
        "p50_ns", (unsigned long long)percentile(j->lat, j->nlat, 500), "p99_ns",
        (unsigned long long)percentile(j->lat, j->nlat, 990), "p999_ns",
        (unsigned long long)percentile(j->lat, j->nlat, 999), "max_ns",
        (unsigned long long)(j->nlat ? j->lat[j->nlat - 1] : 0));
done:
    free(j->lat);
    free(j);
    Py_DECREF(root_obj);
    return result;
}

#define PATH_LEN (NAME_STRIDE + DIR_NAME_LEN)  /* "dNNNN/" + a file name */

/* A Python list of n names (decoded as os.fsdecode does), the i-th written by name_at. */
static PyObject *name_list(Py_ssize_t n, void (*name_at)(char *, size_t, const void *),
                           const void *ctx) {
    PyObject *list = PyList_New(n);
    if (list == NULL) return NULL;
    char buf[PATH_LEN];
    for (Py_ssize_t i = 0; i < n; i++) {
        name_at(buf, (size_t)i, ctx);
        PyObject *s = PyUnicode_DecodeFSDefault(buf);
        if (s == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, s);
    }
    return list;
}

typedef struct {
    size_t n, dirs;
    int renamed;
} layout_t;

/* File i's path relative to root in run()'s layout. */
static void layout_path(char *out, size_t i, const void *ctx) {
    const layout_t *l = ctx;
    char name[NAME_STRIDE], dname[DIR_NAME_LEN];
    file_name(name, i, l->renamed);
    if (l->dirs) {
        dir_name(dname, dir_of(i, l->n, l->dirs));
        snprintf(out, PATH_LEN, "%s/%s", dname, name);
    } else {
        snprintf(out, PATH_LEN, "%s", name);
    }
}

static void layout_dir(char *out, size_t d, const void *ctx) {
    (void)ctx;
    dir_name(out, d);
}

PyDoc_STRVAR(names_doc,
             "names(n, dirs=0, renamed=False) -> list[str]\n\n"
             "The paths, relative to root, that run() uses for n files in this layout.");

static PyObject *metaops_names(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"n", "dirs", "renamed", NULL};
    Py_ssize_t n, dirs = 0;
    int renamed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "n|np", kwlist, &n, &dirs, &renamed)) return NULL;
    if (n < 0 || dirs < 0 || dirs > MAX_DIRS || (n > 0 && dirs > n)) {
        PyErr_SetString(PyExc_ValueError, "need n >= 0 and 0 <= dirs <= n");
        return NULL;
    }
    layout_t layout = {(size_t)n, (size_t)dirs, renamed};
    return name_list(n, layout_path, &layout);
}

PyDoc_STRVAR(dir_names_doc, "dir_names(dirs) -> list[str]\n\nThe tree layout's directories.");

static PyObject *metaops_dir_names(PyObject *self, PyObject *arg) {
    (void)self;
    Py_ssize_t dirs = PyLong_AsSsize_t(arg);
    if (dirs == -1 && PyErr_Occurred()) return NULL;
    if (dirs < 0 || dirs > MAX_DIRS) {
        PyErr_Format(PyExc_ValueError, "dirs must be between 0 and %d", MAX_DIRS);
        return NULL;
    }
    return name_list(dirs, layout_dir, NULL);
}

/* list_dirs: `ls -l` of given directories (an aged tree's), timed in C: open each directory,
 * read every entry and lstat it. The directories are named by the caller (any names), unlike
 * run()'s generated layout. */
typedef struct {
    const char *root;
    const char *const *dirs;
    size_t ndirs;
    uint64_t elapsed_ns;
    size_t listed, entries, failed;
    int first_errno, setup_errno;
} listing_t;

static void list_failure(listing_t *l, int err) {
    if (l->failed++ == 0) l->first_errno = err;
}

static void run_listing(listing_t *l) {
    int rootfd = open(l->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) {
        l->setup_errno = errno;
        return;
    }
    struct stat st;
    uint64_t t0 = now_ns();
    for (size_t d = 0; d < l->ndirs; d++) {
        const char *rel = l->dirs[d][0] ? l->dirs[d] : ".";
        int fd = openat(rootfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            list_failure(l, errno);
            continue;
        }
        DIR *dp = fdopendir(fd);
        if (dp == NULL) {
            list_failure(l, errno);
            close(fd);
            continue;
        }
        struct dirent *e;
        errno = 0;
        while ((e = readdir(dp)) != NULL) {
            if (e->d_name[0] == '.' &&
                (e->d_name[1] == 0 || (e->d_name[1] == '.' && e->d_name[2] == 0)))
                continue;
            if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                list_failure(l, errno);
            else
                l->entries++;
            errno = 0;
        }
        if (errno) list_failure(l, errno);
        closedir(dp);
        l->listed++;
    }
    l->elapsed_ns = now_ns() - t0;
    close(rootfd);
}

PyDoc_STRVAR(list_dirs_doc,
             "list_dirs(root, dirs) -> dict\n\n"
             "`ls -l` of each directory in dirs (paths relative to root; \"\" is root itself),\n"
             "timed in C: open it, read every entry, lstat each (fstatat, no symlinks).\n"
             "Returns ns (the loop only), dirs (listed), entries (stated), failed, errno (of\n"
             "the first failure, 0 if none). Raises OSError when root cannot be opened.");

static PyObject *metaops_list_dirs(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"root", "dirs", NULL};
    PyObject *root_obj = NULL, *dirs_in = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O", kwlist, PyUnicode_FSConverter, &root_obj,
                                     &dirs_in))
        return NULL;
    paths_t dirs;
    if (paths_from(dirs_in, "dirs must be a sequence of paths", &dirs) != 0) {
        Py_DECREF(root_obj);
        return NULL;
    }
    PyObject *result = NULL;
    listing_t l = {.root = PyBytes_AS_STRING(root_obj), .dirs = dirs.paths, .ndirs = (size_t)dirs.n};
    Py_BEGIN_ALLOW_THREADS
    run_listing(&l);
    Py_END_ALLOW_THREADS
    if (l.setup_errno) {
        errno = l.setup_errno;
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, root_obj);
        goto done;
    }
    result = Py_BuildValue("{s:K,s:n,s:n,s:n,s:i}", "ns", (unsigned long long)l.elapsed_ns,
                           "dirs", (Py_ssize_t)l.listed, "entries", (Py_ssize_t)l.entries,
                           "failed", (Py_ssize_t)l.failed, "errno", l.first_errno);
done:
    paths_free(&dirs);
    Py_DECREF(root_obj);
    return result;
}

static PyMethodDef methods[] = {
    KW_METHOD("run", metaops_run, run_doc),
    KW_METHOD("names", metaops_names, names_doc),
    {"dir_names", metaops_dir_names, METH_O, dir_names_doc},
    KW_METHOD("list_dirs", metaops_list_dirs, list_dirs_doc),
    {NULL, NULL, 0, NULL},
};

MODULE_DEF(mod, "_metaops", "Metadata operations over many files, timed in C with the GIL released.",
           methods);

PyMODINIT_FUNC PyInit__metaops(void) {
    PyObject *m = PyModule_Create(&mod);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "MAX_DIRS", MAX_DIRS) < 0 ||
        PyModule_AddIntConstant(m, "MAX_FILL", MAX_FILL) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
