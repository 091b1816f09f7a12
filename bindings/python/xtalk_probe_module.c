/*
 * xtalk._probe: include/xtalk/probe.h for Python (xtalk.probe). The records are the C ones,
 * byte for byte: the same counter, the same chunked slot claim with one atomic add (shared
 * with the preload library and any C code in the process), the same publish.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <xtalk/probe.h>

static int probe_id(PyObject *arg, uint32_t *id) {
    unsigned long v = PyLong_AsUnsignedLong(arg);
    if (v == (unsigned long)-1 && PyErr_Occurred()) return 0;
    if (v > UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "probe id: at most 4294967295");
        return 0;
    }
    *id = (uint32_t)v;
    return 1;
}

static PyObject *begin(PyObject *self, PyObject *arg) {
    (void)self;
    uint32_t id;
    if (!probe_id(arg, &id)) return NULL;
    xtalk_probe_begin(id);
    Py_RETURN_NONE;
}

static PyObject *end(PyObject *self, PyObject *arg) {
    (void)self;
    uint32_t id;
    if (!probe_id(arg, &id)) return NULL;
    xtalk_probe_end(id);
    Py_RETURN_NONE;
}

static PyObject *attached(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyBool_FromLong(xtalk_probe_attach());
}

static PyObject *dropped(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyLong_FromUnsignedLongLong(xtalk_probe_dropped());
}

static PyMethodDef methods[] = {
    {"begin", begin, METH_O, "Mark the beginning of section `id`."},
    {"end", end, METH_O, "Mark the end of section `id`."},
    {"attached", attached, METH_NOARGS, "Whether this process writes probes (run by xtalk with XTALK_PROBE_FD)."},
    {"dropped", dropped, METH_NOARGS, "Probes dropped so far because the buffer was full."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "xtalk._probe", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__probe(void) { return PyModule_Create(&module); }
