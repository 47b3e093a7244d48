/* fsbench._metaops: placeholder module, being written (see setup.py for its purpose). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_metaops", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__metaops(void) { return PyModule_Create(&mod); }
