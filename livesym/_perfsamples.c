/*
 * livesym._perfsamples: a perf ring's samples made into livesym Samples in one call.
 *
 * Why C: a recording's event loop read each PERF_RECORD_SAMPLE in Python twice over,
 * first into a SampleRecord (perf_abi.parse_records: a generator, a header and six
 * fields unpacked, the registers and the stack copy sliced; 12.5 us a sample) and then
 * into a Sample (perf_records.Records._made: the registers put in DWARF order, the
 * kernel's frames picked out of the callchain; 10.8 us). At 99 Hz on four busy threads
 * that was ~0.6 % of a core of the recorder's 1.7 % (issue 31's bar: 1 % for all of it).
 * Here a sample takes ~1 us. No library parses perf's ring records into one's own
 * objects: perf's own parser is C inside perf, and Python bindings to it
 * (python-perf) are not on PyPI.
 *
 * Only the common record takes this path: a sample of the session's process (pid, or
 * any with pid < 0) with 64-bit user registers of the count asked for, a stack copy
 * and the time, whose copy is not full where the caller may raise the copy's size
 * (``raisable``: perf_records decides those). Every other record, and any sample whose
 * body is shorter than its fields, comes back as its offset for the Python parser,
 * which is always right and says what is wrong; so does the rest of the buffer from a
 * header that is bad (its size below 8 or past the end), at ``end``.
 *
 * Contract (tests/unit/test_perfsamples.py holds it against the Python parser):
 *   samples(buf, fixed, tid_at, time_at, callchain, regs_count, order, pc, pid,
 *           kernel, raisable, make_regs, machine, make_sample, running)
 *     -> (items, end)
 * items: in the buffer's order, a Sample made by
 *   make_sample(time / 1e9, pid, tid, (regs[pc],), running,
 *               make_regs(machine, tuple(regs[i] for i in order)),
 *               stack, len(stack) < asked, kernel_frames if kernel else ())
 * or the int offset of a record the caller parses; records of another pid (pid >= 0)
 * are skipped as parse_records skips them. Every offset, count and size is bounded by
 * the buffer: a hostile record can only send itself to the Python parser.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define HEADER 8
#define RECORD_MMAP 1
#define RECORD_SAMPLE 9
#define RECORD_MMAP2 10
#define REGS_ABI_64 2
#define CONTEXT_MAX ((uint64_t)-4095)
#define CONTEXT_KERNEL ((uint64_t)-128)
#define MAX_ORDER 64 /* registers a sample may carry (the mask's bits) */

static uint64_t u64_at(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t u32_at(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint16_t u16_at(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

typedef struct {
    Py_ssize_t fixed, tid_at, time_at, regs_count, pc;
    int callchain, kernel, raisable;
    Py_ssize_t order[MAX_ORDER];
    Py_ssize_t order_count;
    PyObject *make_regs, *machine, *make_sample, *running;
} Config;

/* The kernel's frames of a callchain: those after a PERF_CONTEXT_KERNEL marker, until
 * the next marker (perf_abi.kernel_frames). */
static PyObject *kernel_frames(const unsigned char *chain, uint64_t nr)
{
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    int inside = 0;
    for (uint64_t i = 0; i < nr; i++) {
        uint64_t entry = u64_at(chain + 8 * i);
        if (entry >= CONTEXT_MAX) {
            inside = entry == CONTEXT_KERNEL;
        } else if (inside) {
            PyObject *v = PyLong_FromUnsignedLongLong(entry);
            if (v == NULL || PyList_Append(out, v) < 0) {
                Py_XDECREF(v);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(v);
        }
    }
    PyObject *frames = PyList_AsTuple(out);
    Py_DECREF(out);
    return frames;
}

/* The Sample of the sample record ``body`` (``size`` bytes after the header); Py_None
 * (a new reference) where the Python parser must take it; NULL on an error set. */
static PyObject *made(const Config *c, const unsigned char *body, Py_ssize_t size)
{
    Py_ssize_t pos = c->fixed;
    if (pos > size || c->tid_at + 8 > size || c->time_at + 8 > size)
        Py_RETURN_NONE;
    uint32_t pid = u32_at(body + c->tid_at), tid = u32_at(body + c->tid_at + 4);
    uint64_t time = u64_at(body + c->time_at);
    const unsigned char *chain = NULL;
    uint64_t nr = 0;
    if (c->callchain) {
        if (size - pos < 8)
            Py_RETURN_NONE;
        nr = u64_at(body + pos);
        pos += 8;
        if (nr > (uint64_t)((size - pos) / 8))
            Py_RETURN_NONE;
        chain = body + pos;
        pos += (Py_ssize_t)(8 * nr);
    }
    if (size - pos < 8 || u64_at(body + pos) != REGS_ABI_64)
        Py_RETURN_NONE; /* no registers to unwind from: perf_records says why */
    pos += 8;
    if (c->regs_count > (size - pos) / 8)
        Py_RETURN_NONE;
    const unsigned char *regs = body + pos;
    pos += 8 * c->regs_count;
    if (size - pos < 8)
        Py_RETURN_NONE;
    uint64_t asked = u64_at(body + pos);
    pos += 8;
    Py_ssize_t copied = 0;
    if (asked) {
        if (size - pos < 8 || asked > (uint64_t)(size - pos - 8))
            Py_RETURN_NONE;
        uint64_t dyn = u64_at(body + pos + asked);
        copied = (Py_ssize_t)(dyn < asked ? dyn : asked);
        if (c->raisable && (uint64_t)copied >= asked)
            Py_RETURN_NONE; /* a full copy: perf_records asks whether to raise it */
    }
    PyObject *values = PyTuple_New(c->order_count);
    if (values == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < c->order_count; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(u64_at(regs + 8 * c->order[i]));
        if (v == NULL) {
            Py_DECREF(values);
            return NULL;
        }
        PyTuple_SET_ITEM(values, i, v);
    }
    PyObject *args[9] = {NULL};
    PyObject *regs_args[2] = {c->machine, values};
    PyObject *sample = NULL;
    args[0] = PyFloat_FromDouble((double)time / 1e9);
    args[1] = PyLong_FromUnsignedLong(pid);
    args[2] = PyLong_FromUnsignedLong(tid);
    PyObject *pc = PyLong_FromUnsignedLongLong(u64_at(regs + 8 * c->pc));
    args[3] = pc == NULL ? NULL : PyTuple_Pack(1, pc);
    Py_XDECREF(pc);
    args[4] = Py_NewRef(c->running);
    args[5] = PyObject_Vectorcall(c->make_regs, regs_args, 2, NULL);
    args[6] = PyBytes_FromStringAndSize((const char *)body + pos, copied);
    args[7] = PyBool_FromLong((uint64_t)copied < asked);
    args[8] = c->kernel ? kernel_frames(chain, nr) : PyTuple_New(0);
    int whole = 1;
    for (int i = 0; i < 9; i++)
        whole = whole && args[i] != NULL;
    if (whole)
        sample = PyObject_Vectorcall(c->make_sample, args, 9, NULL);
    for (int i = 0; i < 9; i++)
        Py_XDECREF(args[i]);
    Py_DECREF(values);
    return sample;
}

/* Appends ``item`` to ``items``, taking its reference; -1 on an error set. */
static int put(PyObject *items, PyObject *item)
{
    if (item == NULL)
        return -1;
    int failed = PyList_Append(items, item);
    Py_DECREF(item);
    return failed;
}

static int read_config(PyObject *const *args, Config *c)
{
    c->fixed = PyLong_AsSsize_t(args[1]);
    c->tid_at = PyLong_AsSsize_t(args[2]);
    c->time_at = PyLong_AsSsize_t(args[3]);
    c->callchain = PyObject_IsTrue(args[4]);
    c->regs_count = PyLong_AsSsize_t(args[5]);
    c->pc = PyLong_AsSsize_t(args[7]);
    c->kernel = PyObject_IsTrue(args[9]);
    c->raisable = PyObject_IsTrue(args[10]);
    if (PyErr_Occurred())
        return -1;
    if (!PyTuple_Check(args[6]) || PyTuple_GET_SIZE(args[6]) > MAX_ORDER) {
        PyErr_SetString(PyExc_TypeError, "samples: order is a tuple of at most 64 indices");
        return -1;
    }
    if (c->fixed < 0 || c->tid_at < 0 || c->time_at < 0 || c->regs_count < 0 ||
        c->regs_count > MAX_ORDER || c->pc < 0 || c->pc >= c->regs_count) {
        PyErr_SetString(PyExc_ValueError, "samples: a layout offset or index out of range");
        return -1;
    }
    c->order_count = PyTuple_GET_SIZE(args[6]);
    for (Py_ssize_t i = 0; i < c->order_count; i++) {
        c->order[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(args[6], i));
        if (c->order[i] == -1 && PyErr_Occurred())
            return -1;
        if (c->order[i] < 0 || c->order[i] >= c->regs_count) {
            PyErr_SetString(PyExc_ValueError, "samples: a register index out of range");
            return -1;
        }
    }
    c->make_regs = args[11];
    c->machine = args[12];
    c->make_sample = args[13];
    c->running = args[14];
    return 0;
}

static PyObject *samples(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 15) {
        PyErr_SetString(PyExc_TypeError, "samples: 15 arguments");
        return NULL;
    }
    Config c;
    if (read_config(args, &c) < 0)
        return NULL;
    long long pid = PyLong_AsLongLong(args[8]);
    if (pid == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *items = PyList_New(0);
    const unsigned char *buf = view.buf;
    Py_ssize_t end = view.len, offset = 0;
    while (items != NULL && end - offset >= HEADER) {
        uint32_t type = u32_at(buf + offset);
        Py_ssize_t size = u16_at(buf + offset + 6);
        if (size < HEADER || size > end - offset)
            break; /* the Python parser says what is wrong, from here */
        const unsigned char *body = buf + offset + HEADER;
        Py_ssize_t length = size - HEADER;
        int other = pid >= 0 && ((type == RECORD_SAMPLE && c.tid_at + 4 <= length) ||
                                 ((type == RECORD_MMAP || type == RECORD_MMAP2) && 4 <= length));
        if (other && u32_at(body + (type == RECORD_SAMPLE ? c.tid_at : 0)) != (uint32_t)pid) {
            offset += size; /* another process's, as parse_records skips it */
            continue;
        }
        PyObject *item = type == RECORD_SAMPLE ? made(&c, body, length) : Py_NewRef(Py_None);
        if (item == Py_None) {
            Py_DECREF(item);
            item = PyLong_FromSsize_t(offset);
        }
        if (put(items, item) < 0)
            Py_CLEAR(items);
        offset += size;
    }
    PyBuffer_Release(&view);
    if (items == NULL)
        return NULL;
    return Py_BuildValue("(Nn)", items, offset); /* from offset on: the Python parser's */
}

static PyMethodDef methods[] = {
    {"samples", (PyCFunction)(void (*)(void))samples, METH_FASTCALL,
     "A perf ring's samples made into Samples; the other records' offsets (module doc)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "livesym._perfsamples",
    "A perf ring's common samples made into Samples in C (see the source's comment).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__perfsamples(void)
{
    return PyModule_Create(&module);
}
