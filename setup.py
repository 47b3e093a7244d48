"""Native parts of fsbench: the hot loops that must not be limited by Python.

_xxhtree: read + XXH128 over many files on several threads (the GIL released), for tree-hash.
_metaops: create/stat/chmod/rename/readdir/unlink loops timed in C, for the metadata workload.
_wakeup: a pipe ping-pong between pinned threads, the environment's wake-up cost probe.
_iocell: one Iozone matrix cell's reads/writes in record order, timed in C (no fio per cell).
Everything else is declared in pyproject.toml.
"""

from setuptools import Extension, setup

CFLAGS = ["-O2", "-Wall", "-Wextra", "-std=gnu11"]
# What every module includes: the clock, percentiles, paths from Python, module boilerplate.
COMMON = ["src/fsbench/native/common.h"]

setup(
    ext_modules=[
        Extension(
            "fsbench._xxhtree",
            sources=["src/fsbench/native/xxhtree.c"],
            depends=COMMON,
            libraries=["xxhash", "pthread"],
            extra_compile_args=CFLAGS,
        ),
        Extension(
            "fsbench._metaops",
            sources=["src/fsbench/native/metaops.c"],
            depends=COMMON,
            extra_compile_args=CFLAGS,
        ),
        Extension(
            "fsbench._wakeup",
            sources=["src/fsbench/native/wakeup.c"],
            depends=COMMON,
            libraries=["pthread"],
            extra_compile_args=CFLAGS,
        ),
        Extension(
            "fsbench._iocell",
            sources=["src/fsbench/native/iocell.c"],
            depends=COMMON,
            libraries=["pthread"],
            extra_compile_args=CFLAGS,
        ),
    ]
)
