/* fsbench._xxhtree: placeholder module, being written (see setup.py for its purpose). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_xxhtree", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__xxhtree(void) { return PyModule_Create(&mod); }
