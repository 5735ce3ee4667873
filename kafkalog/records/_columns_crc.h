/* CRC32C of batch bodies for the compiled decoder and the cleaner: the C paths of _columns_crc_core.h, chosen per
 * CPU at import, and the Python functions the tests and benchmarks use to see and switch them.
 *
 * Calling the crc32c package costs a Python call per batch, and on one 16 KiB batch its function runs far below
 * its bulk speed; every CPU gets a C path (portable slicing-by-8 at worst). `set_hw_crc(False)` still makes the
 * decoder call the package's function (crc_func), so the tests run that fallback too.
 */
#ifndef KAFKALOG_COLUMNS_CRC_H
#define KAFKALOG_COLUMNS_CRC_H

#include "_columns_crc_core.h"

static int crc_hw_enabled = 1; /* 0: the decoder calls crc_func (tests switch it off to run that fallback) */

/* crc_init, with its warning (a bad KAFKALOG_CRC32C_PATH) raised as a RuntimeWarning; -1 if that raised */
static int crc_init_py(void) {
    const char *warning = crc_init();
    return warning ? PyErr_WarnEx(PyExc_RuntimeWarning, warning, 1) : 0;
}

/* CRC32C of p[0:n] in C (1), or 0 when switched off and the caller asks the crc32c package */
static inline int crc_compute(const uint8_t *p, size_t n, uint32_t *out) {
    if (!crc_hw_enabled) return 0;
    *out = crc32c_fast(p, n);
    return 1;
}

/* CRC32C of p[0:n]: in C, else crc_func(memoryview of p[0:n]) (the crc32c package's, one call a batch) */
static inline int call_crc(PyObject *crc_func, const uint8_t *p, Py_ssize_t n, uint32_t *out) {
    if (crc_compute(p, (size_t)n, out)) return 0;
    PyObject *mv = PyMemoryView_FromMemory((char *)p, n, PyBUF_READ);
    if (!mv) return -1;
    PyObject *res = PyObject_CallOneArg(crc_func, mv);
    Py_DECREF(mv);
    if (!res) return -1;
    unsigned long crc = PyLong_AsUnsignedLong(res);
    Py_DECREF(res);
    if (crc == (unsigned long)-1 && PyErr_Occurred()) return -1;
    *out = (uint32_t)crc;
    return 0;
}

/* ---- for the tests and benchmarks: the paths, each against the crc32c package -------------------------------- */

/* the path named `name` (NULL: the active one), or -1 with ValueError set */
static int crc_path_arg(const char *name) {
    if (!name) return crc_active;
    int path = crc_lookup(name);
    if (path == -1) PyErr_Format(PyExc_ValueError, "no CRC32C path '%s'", name);
    if (path == -2) PyErr_Format(PyExc_ValueError, "this CPU (or build) cannot run the CRC32C path '%s'", name);
    return path < 0 ? -1 : path;
}

static PyObject *py_hw_crc32c(PyObject *self, PyObject *args) {
    Py_buffer view;
    const char *name = NULL;
    if (!PyArg_ParseTuple(args, "y*|z", &view, &name)) return NULL;
    int path = crc_path_arg(name);
    if (path < 0 || (!name && !crc_hw_enabled)) {
        PyBuffer_Release(&view);
        if (path >= 0) PyErr_SetString(PyExc_RuntimeError, "the C CRC32C is switched off (set_hw_crc(False))");
        return NULL;
    }
    uint32_t crc;
    crc = crc32c_by(path, (const uint8_t *)view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

static PyObject *py_set_hw_crc(PyObject *self, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    crc_hw_enabled = on;
    return PyBool_FromLong(crc_hw_enabled);
}

static PyObject *py_crc_paths(PyObject *self, PyObject *unused) {
    PyObject *out = PyList_New(0);
    for (int i = CRC_NPATHS - 1; out && i >= 0; i--)
        if ((crc_available >> i) & 1) {
            PyObject *s = PyUnicode_FromString(crc_names[i]);
            if (!s || PyList_Append(out, s) < 0) Py_CLEAR(out);
            Py_XDECREF(s);
        }
    return out;
}

static PyObject *py_crc_path(PyObject *self, PyObject *unused) { return PyUnicode_FromString(crc_names[crc_active]); }

static PyObject *py_set_crc_path(PyObject *self, PyObject *arg) {
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    int path = strcmp(name, "auto") == 0 ? crc_best : crc_path_arg(name);
    if (path < 0) return NULL;
    crc_active = path;
    return PyUnicode_FromString(crc_names[crc_active]);
}

#define CRC_METHODS                                                                                                \
    {"hw_crc32c", py_hw_crc32c, METH_VARARGS,                                                                      \
     "hw_crc32c(buf, path=None) -> int: CRC32C in C by the active path or the named one (RuntimeError when "     \
     "set_hw_crc(False) switched the C CRC off, ValueError for a path this CPU lacks)"},                           \
    {"set_hw_crc", py_set_hw_crc, METH_O,                                                                          \
     "set_hw_crc(enabled) -> bool: CRC32C in C (False: the decoder calls the crc32c package's function)"},         \
    {"crc_paths", py_crc_paths, METH_NOARGS,                                                                       \
     "crc_paths() -> list: the CRC32C paths this CPU and build run, best first"},                                  \
    {"crc_path", py_crc_path, METH_NOARGS, "crc_path() -> str: the CRC32C path in use"},                          \
    {"set_crc_path", py_set_crc_path, METH_O,                                                                      \
     "set_crc_path(name) -> str: use that CRC32C path ('auto': the best; ValueError if this CPU lacks it)"},

#endif
