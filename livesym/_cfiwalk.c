/*
 * livesym._cfiwalk: the common stack walk of an x86-64 sample, in C.
 *
 * Why C: a recording at 99 Hz on busy threads spent 33 us a sample in the Python walk
 * (livesym/unwind/walk.py) of a stack five or six frames deep: a dict of registers made
 * and copied at each step, a Row's rules looked at one by one, a closure per read. That
 * was a third of what the recorder cost (issue 31's bar: 1 % of a core). No library
 * walks from CFI rows against a copy of another process's stack (libunwind and
 * blazesym read the process's own or a live one's memory; pyelftools decodes rows and
 * walks nothing); this file is the Python walk's step for the rows most code has, line
 * for line, and nothing more.
 *
 * Contract (tests/unit/test_cfiwalk.py and tests/integration/test_quick_walk.py hold
 * it): Steps holds rules by the address a walk looks them up at (the executing pc for
 * the leaf, a return address less one above it), as the Python side found them
 * (livesym.unwind.quick says which are simple: CFA = rsp or rbp + an offset; the return
 * address saved at CFA + an offset, or undefined at the root; rbp kept or saved at CFA
 * + an offset; no expression; the others are kept as OTHER). Steps.walk(...) gives the
 * walk's call sites, leaf first, only where every step it takes has a simple rule and
 * it ends at the root as the Python walk would; where it meets an address it has no
 * rule for, that address (to be looked up and put, and the walk taken again); anything
 * else (an OTHER rule, a read outside the copy, a frame that does not move up the
 * stack, a saved register below the stack pointer other than rbp, more frames than the
 * caller's limit) None, and the caller walks in Python, which is always right and says why a
 * walk ended short.
 *
 * Every input is bounded: reads are checked against the copy's length, frames against
 * MAX_FRAMES, the table's size against MAX_SLOTS (it is emptied when full).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_FRAMES 8192 /* livesym.unwind.walk.MAX_FRAMES */
#define FIRST_SLOTS 1024
#define MAX_SLOTS (1 << 16) /* 56 bytes each: 3.5 MiB of rules at most */

enum { EMPTY = 0, STEP = 1, ROOT = 2, OTHER = 3 /* a rule the Python walk takes */ };

typedef struct {
    uint64_t address;
    int64_t cfa_offset;
    int64_t ra_offset;
    int64_t bp_offset;
    /* the lowest and highest offset from the CFA of another register's saved slot */
    int64_t low_other;
    int64_t high_other;
    uint8_t kind;
    uint8_t cfa_is_bp;
    uint8_t bp_saved;
    uint8_t others;
} Rule;

typedef struct {
    PyObject_HEAD
    Rule *slots;
    size_t mask; /* slots - 1, a power of two */
    size_t used;
} Steps;

static size_t slot_of(uint64_t address, size_t mask)
{
    uint64_t h = address * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & mask;
}

static const Rule *find(const Steps *self, uint64_t address)
{
    size_t i = slot_of(address, self->mask);
    for (;;) {
        const Rule *r = &self->slots[i];
        if (r->kind == EMPTY)
            return NULL;
        if (r->address == address)
            return r;
        i = (i + 1) & self->mask;
    }
}

static int grow(Steps *self)
{
    size_t size = (self->mask + 1) * 2;
    Rule *old = self->slots;
    size_t old_size = self->mask + 1;
    Rule *slots = PyMem_Calloc(size, sizeof(Rule));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->slots = slots;
    self->mask = size - 1;
    for (size_t k = 0; k < old_size; k++) {
        if (old[k].kind == EMPTY)
            continue;
        size_t i = slot_of(old[k].address, self->mask);
        while (slots[i].kind != EMPTY)
            i = (i + 1) & self->mask;
        slots[i] = old[k];
    }
    PyMem_Free(old);
    return 0;
}

static void empty(Steps *self)
{
    memset(self->slots, 0, (self->mask + 1) * sizeof(Rule));
    self->used = 0;
}

static int store(Steps *self, const Rule *rule)
{
    /* Kept at most three quarters full, so a probe always meets an empty slot. */
    if (4 * (self->used + 1) > 3 * (self->mask + 1)) {
        if (self->mask + 1 >= MAX_SLOTS)
            empty(self);
        else if (grow(self) < 0)
            return -1;
    }
    size_t i = slot_of(rule->address, self->mask);
    while (self->slots[i].kind != EMPTY && self->slots[i].address != rule->address)
        i = (i + 1) & self->mask;
    if (self->slots[i].kind == EMPTY)
        self->used++;
    self->slots[i] = *rule;
    return 0;
}

static PyObject *Steps_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    Steps *self = (Steps *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->slots = PyMem_Calloc(FIRST_SLOTS, sizeof(Rule));
    if (self->slots == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    self->mask = FIRST_SLOTS - 1;
    self->used = 0;
    return (PyObject *)self;
}

static void Steps_dealloc(Steps *self)
{
    PyMem_Free(self->slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int fits(long long v)
{
    /* Offsets are DWARF's signed LEB128s; a hostile one may be anything. */
    return v > -(1LL << 32) && v < (1LL << 32);
}

PyDoc_STRVAR(put_doc,
"put(address, cfa_is_bp, cfa_offset, ra_offset, bp_offset, low_other, high_other)\n"
"The rule a walk takes at ``address``: CFA = (rbp if cfa_is_bp else rsp) + cfa_offset;\n"
"the return address at CFA + ra_offset; rbp saved at CFA + bp_offset (None: kept);\n"
"other registers saved from CFA + low_other to CFA + high_other (None: none).");

static PyObject *Steps_put(Steps *self, PyObject *args)
{
    unsigned long long address;
    int cfa_is_bp;
    long long cfa_offset, ra_offset;
    PyObject *bp, *low, *high;
    if (!PyArg_ParseTuple(args, "KpLLOOO", &address, &cfa_is_bp, &cfa_offset, &ra_offset,
                          &bp, &low, &high))
        return NULL;
    Rule rule = {0};
    rule.address = address;
    rule.kind = STEP;
    rule.cfa_is_bp = (uint8_t)cfa_is_bp;
    rule.cfa_offset = cfa_offset;
    rule.ra_offset = ra_offset;
    if (bp != Py_None) {
        rule.bp_saved = 1;
        rule.bp_offset = PyLong_AsLongLong(bp);
        if (rule.bp_offset == -1 && PyErr_Occurred())
            return NULL;
    }
    if (low != Py_None && high != Py_None) {
        rule.others = 1;
        rule.low_other = PyLong_AsLongLong(low);
        rule.high_other = PyLong_AsLongLong(high);
        if (PyErr_Occurred())
            return NULL;
    }
    if (!fits(rule.cfa_offset) || !fits(rule.ra_offset) || !fits(rule.bp_offset) ||
        !fits(rule.low_other) || !fits(rule.high_other))
        rule.kind = OTHER; /* the Python walk takes it */
    if (store(self, &rule) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* A rule of ``kind`` alone (no offsets) at the address ``arg``. */
static PyObject *put_kind(Steps *self, PyObject *arg, uint8_t kind)
{
    unsigned long long address = PyLong_AsUnsignedLongLong(arg);
    if (address == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    Rule rule = {0};
    rule.address = address;
    rule.kind = kind;
    if (store(self, &rule) < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(put_root_doc,
"put_root(address)\nAt ``address`` the return address is undefined: the thread's root.");

static PyObject *Steps_put_root(Steps *self, PyObject *arg)
{
    return put_kind(self, arg, ROOT);
}

PyDoc_STRVAR(put_other_doc,
"put_other(address)\nThe rule at ``address`` is not simple: walks through it are Python's.");

static PyObject *Steps_put_other(Steps *self, PyObject *arg)
{
    return put_kind(self, arg, OTHER);
}

static PyObject *Steps_clear(Steps *self, PyObject *unused)
{
    empty(self);
    Py_RETURN_NONE;
}

/* The word at ``address`` in the copy [start, start + len); 0 where outside. */
static int read_word(const uint8_t *data, Py_ssize_t len, uint64_t start, uint64_t address,
                     uint64_t *out)
{
    if (address < start || address - start > (uint64_t)len || address - start + 8 > (uint64_t)len)
        return 0;
    memcpy(out, data + (address - start), 8); /* x86-64: little-endian, as the copy */
    return 1;
}

/*
 * One walk. Returns the number of frames (call sites in ``sites``); 0 where it cannot:
 * the caller walks in Python; -1 where no rule is known at ``*missing``.
 */
static Py_ssize_t walk(const Steps *self, uint64_t pc, uint64_t sp, uint64_t bp,
                       const uint8_t *data, Py_ssize_t len, uint64_t *sites, Py_ssize_t most,
                       uint64_t *missing)
{
    const uint64_t start = sp;
    int exact = 1;
    Py_ssize_t n = 0;
    for (int depth = 0; depth < MAX_FRAMES; depth++) {
        if (n == most)
            return 0; /* frames an odd byte apart: left to the Python walk */
        uint64_t lookup = exact ? pc : pc - 1;
        sites[n++] = lookup;
        const Rule *rule = find(self, lookup);
        if (rule == NULL) {
            *missing = lookup;
            return -1;
        }
        if (rule->kind == OTHER)
            return 0;
        if (rule->kind == ROOT)
            return n;
        uint64_t cfa = (rule->cfa_is_bp ? bp : sp) + (uint64_t)rule->cfa_offset;
        if (rule->others) {
            /* The Python walk reads every saved register; it stops where one is
               outside the copy. Below sp it would keep some and read others: left
               to it. */
            uint64_t low = cfa + (uint64_t)rule->low_other;
            uint64_t high = cfa + (uint64_t)rule->high_other;
            uint64_t unused;
            if (low < sp || high < low || !read_word(data, len, start, low, &unused) ||
                !read_word(data, len, start, high, &unused))
                return 0;
        }
        uint64_t ra;
        if (!read_word(data, len, start, cfa + (uint64_t)rule->ra_offset, &ra))
            return 0;
        if (rule->bp_saved) {
            uint64_t slot = cfa + (uint64_t)rule->bp_offset;
            /* Below the stack pointer: an epilogue popped it already (walk.py's
               _cfi_step); rbp holds the saved value. */
            if (slot >= sp && !read_word(data, len, start, slot, &bp))
                return 0;
        }
        if (ra == 0)
            return n; /* the root, as the Python walk ends there */
        if (!(cfa > sp || (cfa == sp && exact)))
            return 0; /* the Python walk says it loops */
        sp = cfa;
        pc = ra;
        exact = 0;
    }
    return 0; /* deeper than MAX_FRAMES: the Python walk says so */
}

PyDoc_STRVAR(walk_doc,
"walk(pc, sp, bp, copy, limit=MAX_FRAMES) -> tuple[int, ...] | int | None\n"
"The call sites of the walk from these registers through ``copy`` (the stack's bytes\n"
"from sp up), leaf first: the leaf's pc, then each return address less one; an int: the\n"
"first lookup address it knows no rule for; None where a step's rule is not simple, the\n"
"walk would not end at the root, or it would be longer than ``limit`` frames.");

static PyObject *Steps_walk(Steps *self, PyObject *args)
{
    unsigned long long pc, sp, bp;
    Py_ssize_t limit = MAX_FRAMES;
    Py_buffer copy;
    if (!PyArg_ParseTuple(args, "KKKy*|n", &pc, &sp, &bp, &copy, &limit))
        return NULL;
    uint64_t sites[64];
    uint64_t *buf = sites;
    Py_ssize_t cap = (Py_ssize_t)(sizeof(sites) / sizeof(sites[0]));
    /* Frames move up by a word or more (not a rule, but what code does): a copy holds
       len/8 + 2 of them, or the walk is left to Python. */
    Py_ssize_t most = copy.len / 8 + 2;
    if (most > limit)
        most = limit > 0 ? limit : 1;
    if (most > cap) {
        buf = PyMem_Malloc((size_t)most * sizeof(uint64_t));
        if (buf == NULL) {
            PyBuffer_Release(&copy);
            return PyErr_NoMemory();
        }
    }
    uint64_t missing = 0;
    Py_ssize_t n = walk(self, pc, sp, bp, copy.buf, copy.len, buf, most, &missing);
    PyBuffer_Release(&copy);
    PyObject *out = NULL;
    if (n < 0) {
        out = PyLong_FromUnsignedLongLong(missing);
    } else if (n == 0) {
        out = Py_NewRef(Py_None);
    } else if ((out = PyTuple_New(n)) != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *v = PyLong_FromUnsignedLongLong(buf[i]);
            if (v == NULL) {
                Py_CLEAR(out);
                break;
            }
            PyTuple_SET_ITEM(out, i, v);
        }
    }
    if (buf != sites)
        PyMem_Free(buf);
    return out;
}

static PyObject *Steps_len(Steps *self, void *unused)
{
    return PyLong_FromSize_t(self->used);
}

static PyMethodDef Steps_methods[] = {
    {"put", (PyCFunction)Steps_put, METH_VARARGS, put_doc},
    {"put_root", (PyCFunction)Steps_put_root, METH_O, put_root_doc},
    {"put_other", (PyCFunction)Steps_put_other, METH_O, put_other_doc},
    {"clear", (PyCFunction)Steps_clear, METH_NOARGS, "Forget every rule."},
    {"walk", (PyCFunction)Steps_walk, METH_VARARGS, walk_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Steps_getset[] = {
    {"size", (getter)Steps_len, NULL, "Rules held.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject StepsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "livesym._cfiwalk.Steps",
    .tp_basicsize = sizeof(Steps),
    .tp_dealloc = (destructor)Steps_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Simple CFI rules by lookup address, and the walk through them.",
    .tp_methods = Steps_methods,
    .tp_getset = Steps_getset,
    .tp_new = Steps_new,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "livesym._cfiwalk",
    "The common stack walk of an x86-64 sample, in C (see the source's comment).", -1, NULL,
};

PyMODINIT_FUNC PyInit__cfiwalk(void)
{
    if (PyType_Ready(&StepsType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Steps", (PyObject *)&StepsType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "MAX_FRAMES", MAX_FRAMES) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
