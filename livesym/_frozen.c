/*
 * livesym._frozen: an instance of a frozen, slotted dataclass made from its fields'
 * values in one call.
 *
 * Why C: a frozen dataclass's __init__ sets each field through object.__setattr__, a
 * Python call a field: a perf sample's Sample (19 fields) took 4.5 us more to make than
 * the same class unfrozen, its SampleRecord (11 fields) 2.5 us more: together ~0.2 % of
 * a core in a recording's event loop at 99 Hz on busy threads (issue 31's bar is 1 % for
 * all of it). The classes stay frozen (nothing may set a field after); only the perf
 * sampler's hot path makes its records here. No library does this: attrs' and
 * dataclasses' frozen classes both set their fields a call at a time.
 *
 * Contract (tests/unit/test_frozen.py holds it): Maker(cls, names, defaults)(*values)
 * is cls(**dict(zip(names, values)), **defaults) for a class whose slots are exactly
 * ``names`` and ``defaults``' keys, and that has no __post_init__ (livesym.frozen checks
 * that and takes the defaults from the dataclass). A Maker is refused (TypeError) for a
 * class with slots that are not those fields, or a field named twice; a call with
 * another count of values is refused, never a half-made object.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall; /* a call without a tuple of the values */
    PyTypeObject *cls;
    Py_ssize_t count;    /* values a call gives */
    Py_ssize_t slots;    /* fields in all: the rest take their defaults */
    Py_ssize_t *offsets; /* of each field's slot: those given, in order, then the rest */
    PyObject *defaults;  /* a tuple: the values of the rest */
} Maker;

static void Maker_dealloc(Maker *self)
{
    Py_XDECREF(self->cls);
    Py_XDECREF(self->defaults);
    PyMem_Free(self->offsets);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Maker_call(Maker *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (n != self->count || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_Format(PyExc_TypeError, "make: %zd values for %zd fields, by position", n,
                     self->count);
        return NULL;
    }
    PyTypeObject *cls = self->cls;
    PyObject *made = cls->tp_alloc(cls, 0);
    if (made == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject **slot = (PyObject **)((char *)made + self->offsets[i]);
        Py_XSETREF(*slot, Py_NewRef(args[i]));
    }
    for (Py_ssize_t i = n; i < self->slots; i++) {
        PyObject **slot = (PyObject **)((char *)made + self->offsets[i]);
        Py_XSETREF(*slot, Py_NewRef(PyTuple_GET_ITEM(self->defaults, i - n)));
    }
    return made;
}

static PyObject *Maker_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames)
{
    return Maker_call((Maker *)self, args, nargsf, kwnames);
}

/* The offset of field ``name``'s slot in ``t``; -1 (an error set) where it is not one. */
static Py_ssize_t field_offset(PyTypeObject *t, PyObject *name)
{
    PyObject *descr = PyUnicode_Check(name) ? PyDict_GetItemWithError(t->tp_dict, name) : NULL;
    if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "Maker: %R is not a slot of the class", name);
        return -1;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
    if (m->type != T_OBJECT_EX || m->flags != 0 || m->offset <= 0 ||
        m->offset + (Py_ssize_t)sizeof(PyObject *) > t->tp_basicsize) {
        PyErr_Format(PyExc_TypeError, "Maker: %R is not an object field", name);
        return -1;
    }
    return m->offset;
}

static PyObject *Maker_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *cls, *names, *defaults;
    static char *keywords[] = {"cls", "names", "defaults", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!O!", keywords, &PyType_Type, &cls,
                                     &PyTuple_Type, &names, &PyDict_Type, &defaults))
        return NULL;
    PyTypeObject *t = (PyTypeObject *)cls;
    if (t->tp_base != &PyBaseObject_Type || t->tp_dictoffset != 0 || t->tp_members == NULL) {
        PyErr_SetString(PyExc_TypeError, "Maker: not a class of slots of its own");
        return NULL;
    }
    Py_ssize_t slots = 0;
    for (PyMemberDef *m = t->tp_members; m->name != NULL; m++)
        slots++;
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    if (n + PyDict_GET_SIZE(defaults) != slots) {
        PyErr_Format(PyExc_TypeError, "Maker: %zd names and %zd defaults for %zd slots", n,
                     PyDict_GET_SIZE(defaults), slots);
        return NULL;
    }
    Maker *self = (Maker *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->cls = (PyTypeObject *)Py_NewRef(cls);
    self->count = n;
    self->slots = slots;
    self->vectorcall = Maker_vectorcall;
    self->offsets = PyMem_Calloc((size_t)(slots ? slots : 1), sizeof(Py_ssize_t));
    self->defaults = PyTuple_New(slots - n);
    if (self->offsets == NULL || self->defaults == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((self->offsets[i] = field_offset(t, PyTuple_GET_ITEM(names, i))) < 0) {
            Py_DECREF(self);
            return NULL;
        }
    }
    Py_ssize_t pos = 0, i = n;
    PyObject *name, *value;
    while (PyDict_Next(defaults, &pos, &name, &value)) {
        if ((self->offsets[i] = field_offset(t, name)) < 0) {
            Py_DECREF(self);
            return NULL;
        }
        PyTuple_SET_ITEM(self->defaults, i - n, Py_NewRef(value));
        i++;
    }
    /* Every slot once: a field named twice would leave another unset. */
    for (Py_ssize_t a = 0; a < slots; a++) {
        for (Py_ssize_t b = 0; b < a; b++) {
            if (self->offsets[a] == self->offsets[b]) {
                PyErr_SetString(PyExc_TypeError, "Maker: a field is named twice");
                Py_DECREF(self);
                return NULL;
            }
        }
    }
    return (PyObject *)self;
}

static PyObject *Maker_tp_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "make: values by position only");
        return NULL;
    }
    return Maker_call((Maker *)self, &PyTuple_GET_ITEM(args, 0),
                      (size_t)PyTuple_GET_SIZE(args), NULL);
}

static PyTypeObject MakerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "livesym._frozen.Maker",
    .tp_basicsize = sizeof(Maker),
    .tp_dealloc = (destructor)Maker_dealloc,
    .tp_vectorcall_offset = offsetof(Maker, vectorcall),
    .tp_call = Maker_tp_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Maker(cls, names, defaults): cls(*values) without its __init__ (see the source).",
    .tp_new = Maker_new,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "livesym._frozen",
    "Frozen slotted dataclasses made in one call (see the source's comment).", -1, NULL,
};

PyMODINIT_FUNC PyInit__frozen(void)
{
    if (PyType_Ready(&MakerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Maker", (PyObject *)&MakerType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
