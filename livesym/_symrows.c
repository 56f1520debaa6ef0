/*
 * livesym._symrows: the common rows of ``livesym symbolize -e FILE --json`` in C.
 *
 * Why C: a batch of 100,000 addresses spent ~2.4 us a row in the Python loop of
 * livesym/symbolize/batch_fast.py (FastLoops.bind) and ~8 us on each new name,
 * most of it the interpreter's own work around a parse, one or two binary searches,
 * a demangler call and one 400-byte format: twice llvm-symbolizer's time for the
 * batch. No library formats these rows; this file is that loop, line for line, with
 * a symbol's fields and an unnamed function's row made here too. The Python loop
 * stays as the fallback where the extension was not built (it is optional: an
 * install without a compiler still works). docs/performance.md has the figures.
 *
 * Contract (tests/integration/test_symbolize_batch.py holds it): rows(...) makes
 * the rows the Python loop makes, from lines[k] on, and appends them to ``out``
 * as one str, joined by newlines (one str a row cost a join and an encode more
 * of 40 MB); it returns the index of the first line it does not take, so the
 * rows made are that index less k. It takes less than the Python loop, never
 * more: anything unusual (a line that is not "0x" and hex digits, a value outside
 * the segment, a nested symbol, non-ASCII text) is left to the caller's general
 * way, which is always right; a name it does not know how to treat as
 * livesym.elf.demangle does (a symbol version, Rust, a suspect name) is left to
 * the caller's fragment().
 *
 * Every input is bounded: a line's length, the arrays' lengths (from their
 * buffers), a name's length (MAX_NAME_BYTES, as symtab.string_at), the pieces'
 * lengths (from their str objects).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIGITS 16 /* a 64-bit value in hex */
#define PUT_LIT(b, s) buf_put((b), (s), (Py_ssize_t)sizeof(s) - 1)

typedef struct {
    char *data;
    Py_ssize_t len;
    Py_ssize_t cap;
} Buf;

static int buf_put(Buf *b, const char *s, Py_ssize_t n)
{
    if (b->len + n > b->cap) {
        Py_ssize_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n) {
            if (cap > PY_SSIZE_T_MAX / 2) {
                PyErr_NoMemory();
                return -1;
            }
            cap *= 2;
        }
        char *grown = PyMem_Realloc(b->data, (size_t)cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, (size_t)n);
    b->len += n;
    return 0;
}

/* An ASCII str's bytes, or NULL (no exception set) when it is not ASCII. */
static const char *ascii_of(PyObject *s, Py_ssize_t *n)
{
    if (!PyUnicode_Check(s))
        return NULL;
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(s) < 0) {
        PyErr_Clear();
        return NULL;
    }
#endif
    if (!PyUnicode_IS_ASCII(s))
        return NULL;
    *n = PyUnicode_GET_LENGTH(s);
    return (const char *)PyUnicode_1BYTE_DATA(s);
}

/* ascii_of, and only where JSON needs no escape inside a string. */
static const char *plain_of(PyObject *s, Py_ssize_t *n)
{
    const char *p = ascii_of(s, n);
    for (Py_ssize_t i = 0; p != NULL && i < *n; i++)
        if (p[i] < 0x20 || p[i] == 0x7F || p[i] == '"' || p[i] == '\\')
            p = NULL;
    return p;
}

static int put_str(Buf *b, PyObject *s)
{
    Py_ssize_t n;
    const char *p = ascii_of(s, &n);
    if (p == NULL)
        return 1; /* not ASCII: the caller's way */
    return buf_put(b, p, n);
}

/* Python's hex(): "0x" and lowercase digits, "0x0" for zero. */
static Py_ssize_t hex_of(uint64_t v, char *out)
{
    char tmp[MAX_DIGITS];
    int n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v & 0xF];
        v >>= 4;
    } while (v);
    out[0] = '0';
    out[1] = 'x';
    for (int i = 0; i < n; i++)
        out[2 + i] = tmp[n - 1 - i];
    return 2 + n;
}

static Py_ssize_t dec_of(uint64_t v, char *out)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (int i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* "0x", 1-16 hex digits, white space after them (as int(text, 16) takes it). */
static int parse_hex(const char *s, Py_ssize_t n, uint64_t *value)
{
    if (n < 3 || s[0] != '0' || s[1] != 'x')
        return 0;
    Py_ssize_t i = 2;
    uint64_t v = 0;
    int digits = 0;
    for (; i < n; i++) {
        char c = s[i];
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            break;
        if (++digits > MAX_DIGITS)
            return 0;
        v = (v << 4) | (uint64_t)d;
    }
    if (digits == 0)
        return 0;
    for (; i < n; i++)
        if (!is_space(s[i]))
            return 0;
    *value = v;
    return 1;
}

/* bisect_right(a, x) over unsigned 64-bit values. */
static Py_ssize_t bisect_u64(const uint64_t *a, Py_ssize_t n, uint64_t x)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (x < a[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* bisect_right(a, x) over signed 32- or 64-bit values (``size`` bytes each), x wider. */
static Py_ssize_t bisect_signed(const void *a, int size, Py_ssize_t n, __int128 x)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        __int128 at = size == 4 ? (__int128)((const int32_t *)a)[mid]
                                : (__int128)((const int64_t *)a)[mid];
        if (x < at)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* cache.get(key) or make(key_or_arg): a new reference, or NULL with an exception. */
static PyObject *cached(PyObject *cache, PyObject *key, PyObject *make, PyObject *arg)
{
    PyObject *found = PyDict_GetItemWithError(cache, key);
    if (found != NULL) {
        Py_INCREF(found);
        return found;
    }
    if (PyErr_Occurred())
        return NULL;
    return PyObject_CallOneArg(make, arg);
}

static int u64_of(PyObject *o, uint64_t *v)
{
    unsigned long long x = PyLong_AsUnsignedLongLong(o);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *v = (uint64_t)x;
    return 1;
}

/*
 * A symbol's fields, as FileRows.fragment writes them, for the common name: ASCII,
 * settled (no alias left to choose), a C++ name libstdc++ demangles or a plain one.
 * Anything else (a symbol version, Rust, a name with many back-references that the
 * Python side demangles in a sandbox, non-ASCII) is left to fragment(); so is every
 * name when other symbol sources were merged in (the rows then say which).
 */
typedef struct {
    PyObject *refs;      /* list: each symbol's name reference (table id, offset) */
    PyObject *strtabs;   /* list of bytes, by table id */
    PyObject *unsettled; /* dict: symbols whose alias is not chosen yet */
    int table_bits;
    Py_ssize_t max_name, max_demangled, suspect_refs;
} Names;

typedef char *(*CxaDemangle)(const char *, char *, size_t *, int *);

static CxaDemangle cxa_demangle(void)
{
    static int tried;
    static CxaDemangle found;
    if (!tried) {
        tried = 1;
        void *lib = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
        if (lib != NULL)
            found = (CxaDemangle)dlsym(lib, "__cxa_demangle");
    }
    return found;
}

/* json.encoder.encode_basestring_ascii of ASCII bytes; 1: not ASCII (the caller's way). */
static int put_json(Buf *b, const char *s, Py_ssize_t n)
{
    if (PUT_LIT(b, "\"") < 0)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[7];
        const char *out = esc;
        Py_ssize_t len = 2;
        esc[0] = '\\';
        if (c > 0x7F)
            return 1;
        if (c == '"' || c == '\\')
            esc[1] = (char)c;
        else if (c == '\n')
            esc[1] = 'n';
        else if (c == '\r')
            esc[1] = 'r';
        else if (c == '\t')
            esc[1] = 't';
        else if (c == '\b')
            esc[1] = 'b';
        else if (c == '\f')
            esc[1] = 'f';
        else if (c < 0x20 || c == 0x7F) {
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = "0123456789abcdef"[c >> 4];
            esc[5] = "0123456789abcdef"[c & 0xF];
            len = 6;
        } else {
            out = (const char *)&s[i];
            len = 1;
        }
        if (buf_put(b, out, len) < 0)
            return -1;
    }
    return PUT_LIT(b, "\"");
}

static Py_ssize_t count_char(const char *s, Py_ssize_t n, char c)
{
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        k += s[i] == c;
    return k;
}

/* Symbol i's fields into f. 1: made; 0: fragment()'s way; -1: an exception. */
static int make_fragment(Buf *f, const Names *names, Py_ssize_t i, uint64_t start, uint64_t end)
{
    if (!PyList_Check(names->refs) || i >= PyList_GET_SIZE(names->refs))
        return 0;
    PyObject *key = PyLong_FromSsize_t(i);
    if (key == NULL)
        return -1;
    int unsettled = PyDict_Contains(names->unsettled, key);
    Py_DECREF(key);
    if (unsettled != 0)
        return unsettled < 0 ? -1 : 0;
    uint64_t ref;
    if (!u64_of(PyList_GET_ITEM(names->refs, i), &ref))
        return 0;
    uint64_t table = ref & ((1u << names->table_bits) - 1), offset = ref >> names->table_bits;
    if (!PyList_Check(names->strtabs) || table >= (uint64_t)PyList_GET_SIZE(names->strtabs))
        return 0;
    PyObject *strtab = PyList_GET_ITEM(names->strtabs, (Py_ssize_t)table);
    if (!PyBytes_Check(strtab))
        return 0;
    const char *tab = PyBytes_AS_STRING(strtab);
    Py_ssize_t tab_n = PyBytes_GET_SIZE(strtab), n = 0;
    const char *raw = tab;
    if (offset < (uint64_t)tab_n) { /* symtab.string_at: to the NUL, at most max_name */
        raw = tab + offset;
        Py_ssize_t room = tab_n - (Py_ssize_t)offset;
        if (room > names->max_name)
            room = names->max_name;
        const char *nul = memchr(raw, 0, (size_t)room);
        n = nul ? nul - raw : room;
    }
    const char *dem = raw;
    Py_ssize_t dem_n = n;
    char *demangled = NULL;
    if (n >= 2 && raw[0] == '_' && (raw[1] == 'Z' || raw[1] == 'R')) {
        if (raw[1] == 'R' || memchr(raw, '@', (size_t)n) != NULL ||
            (n > 2 && raw[2] == 'N' && memmem(raw, (size_t)n, "17h", 3) != NULL) ||
            count_char(raw, n, '_') > names->suspect_refs)
            return 0; /* Rust, a symbol version, or a suspect name: demangle.py decides */
        CxaDemangle cxa = cxa_demangle();
        if (cxa == NULL)
            return 0;
        char *copy = PyMem_Malloc((size_t)n + 1);
        if (copy == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(copy, raw, (size_t)n);
        copy[n] = '\0';
        demangled = cxa(copy, NULL, NULL, NULL);
        PyMem_Free(copy);
        if (demangled != NULL) {
            Py_ssize_t len = (Py_ssize_t)strlen(demangled);
            if (len <= names->max_demangled) {
                dem = demangled;
                dem_n = len;
            }
        }
    }
    char num[24], hx[2 + MAX_DIGITS];
    int r = PUT_LIT(f, "\"symbol\": ");
    if (r == 0)
        r = put_json(f, raw, n);
    if (r == 0)
        r = PUT_LIT(f, ", \"demangled\": ");
    if (r == 0)
        r = put_json(f, dem, dem_n);
    if (r == 0)
        r = PUT_LIT(f, ", \"symbol_vaddr\": \"");
    if (r == 0)
        r = buf_put(f, hx, hex_of(start, hx));
    if (r == 0)
        r = PUT_LIT(f, "\", \"symbol_size\": ");
    if (r == 0)
        r = buf_put(f, num, dec_of(end - start, num));
    if (r == 0)
        r = PUT_LIT(f, ", \"symbol_offset\": ");
    free(demangled);
    return r < 0 ? -1 : (r == 0);
}

/* fragments.get(i), or the fields made here (and kept there), or fragment(i). */
static PyObject *fragment_of(PyObject *fragments, PyObject *fragment, const Names *names,
                             Py_ssize_t i, uint64_t start, uint64_t end)
{
    PyObject *key = PyLong_FromSsize_t(i);
    if (key == NULL)
        return NULL;
    PyObject *found = PyDict_GetItemWithError(fragments, key);
    if (found != NULL || PyErr_Occurred()) {
        Py_XINCREF(found);
        Py_DECREF(key);
        return found;
    }
    if (names != NULL) {
        Buf f = {NULL, 0, 0};
        int made = make_fragment(&f, names, i, start, end);
        if (made > 0) {
            found = PyUnicode_New(f.len, 127);
            if (found != NULL) {
                memcpy(PyUnicode_1BYTE_DATA(found), f.data, (size_t)f.len);
                if (PyDict_SetItem(fragments, key, found) < 0)
                    Py_CLEAR(found);
            }
        }
        PyMem_Free(f.data);
        if (made != 0) {
            Py_DECREF(key);
            return found;
        }
    }
    found = PyObject_CallOneArg(fragment, key);
    Py_DECREF(key);
    return found;
}

typedef struct {
    Py_buffer starts, ends, reach, fde_starts;
    int have_fde;
} Tables;

static void release(Tables *t)
{
    if (t->starts.obj)
        PyBuffer_Release(&t->starts);
    if (t->ends.obj)
        PyBuffer_Release(&t->ends);
    if (t->reach.obj)
        PyBuffer_Release(&t->reach);
    if (t->have_fde && t->fde_starts.obj)
        PyBuffer_Release(&t->fde_starts);
}

/* A one-dimensional buffer of ``size``-byte integers (array.array's typecodes). */
static int get_ints(PyObject *o, Py_buffer *view, int is_signed, int *size)
{
    if (PyObject_GetBuffer(o, view, PyBUF_FORMAT) < 0)
        return -1;
    const char *f = view->format ? view->format : "B";
    if (f[0] == '@' || f[0] == '=')
        f++;
    int ok = f[1] == '\0' && (view->itemsize == 4 || view->itemsize == 8) &&
             (is_signed ? strchr("ilq", f[0]) != NULL : strchr("ILQ", f[0]) != NULL);
    if (!ok || (size == NULL && view->itemsize != 8)) {
        PyBuffer_Release(view); /* (and view->obj is NULL again: released once) */
        PyErr_SetString(PyExc_TypeError, "rows(): an array of 64-bit integers was expected");
        return -1;
    }
    if (size != NULL)
        *size = (int)view->itemsize;
    return 0;
}

/*
 * rows(lines, k, out, lo, hi, delta, starts, ends, reach, fragments, fragment,
 *      fde_starts, fde_base, spans, span_of, source, reason,
 *      head, mid, nothing, names) -> int
 */
static PyObject *rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 21) {
        PyErr_SetString(PyExc_TypeError, "rows() takes 21 arguments");
        return NULL;
    }
    Names names;
    int have_names = args[20] != Py_None;
    if (have_names && !PyArg_ParseTuple(args[20], "O!O!O!innn;rows(): names", &PyList_Type,
                                        &names.refs, &PyList_Type, &names.strtabs, &PyDict_Type,
                                        &names.unsettled, &names.table_bits, &names.max_name,
                                        &names.max_demangled, &names.suspect_refs))
        return NULL;
    if (have_names && (names.table_bits < 0 || names.table_bits > 16)) {
        PyErr_SetString(PyExc_ValueError, "rows(): table bits out of range");
        return NULL;
    }
    PyObject *lines = args[0], *out = args[2];
    PyObject *fragments = args[9], *fragment = args[10];
    PyObject *fde_obj = args[11], *spans = args[13], *span_of = args[14];
    PyObject *source = args[15], *reason = args[16];
    PyObject *head = args[17], *mid = args[18], *nothing = args[19];
    if (!PyList_Check(lines) || !PyList_Check(out) || !PyDict_Check(fragments) ||
        !PyDict_Check(spans)) {
        PyErr_SetString(PyExc_TypeError, "rows(): lists and dicts were expected");
        return NULL;
    }
    Py_ssize_t k = PyLong_AsSsize_t(args[1]);
    if (k == -1 && PyErr_Occurred())
        return NULL;
    if (k < 0) {
        PyErr_SetString(PyExc_ValueError, "rows(): a negative index");
        return NULL;
    }
    uint64_t lo, hi, fde_base;
    if (!u64_of(args[3], &lo) || !u64_of(args[4], &hi) || !u64_of(args[12], &fde_base)) {
        PyErr_SetString(PyExc_ValueError, "rows(): bounds out of range");
        return NULL;
    }
    long long delta = PyLong_AsLongLong(args[5]);
    if (delta == -1 && PyErr_Occurred())
        return NULL;

    Tables t;
    memset(&t, 0, sizeof t);
    t.have_fde = fde_obj != Py_None;
    int fde_size = 8;
    if (get_ints(args[6], &t.starts, 0, NULL) < 0 || get_ints(args[7], &t.ends, 0, NULL) < 0 ||
        get_ints(args[8], &t.reach, 0, NULL) < 0 ||
        (t.have_fde && get_ints(fde_obj, &t.fde_starts, 1, &fde_size) < 0)) {
        release(&t);
        return NULL;
    }
    const uint64_t *starts = t.starts.buf, *ends = t.ends.buf, *reach = t.reach.buf;
    Py_ssize_t count = t.starts.len / 8;
    if (t.ends.len / 8 != count || t.reach.len / 8 != count) {
        release(&t);
        PyErr_SetString(PyExc_ValueError, "rows(): tables of different lengths");
        return NULL;
    }
    const void *fde_starts = t.have_fde ? t.fde_starts.buf : NULL;
    Py_ssize_t fde_count = t.have_fde ? t.fde_starts.len / fde_size : 0;

    Py_ssize_t head_n, mid_n, nothing_n;
    const char *head_s = ascii_of(head, &head_n), *mid_s = ascii_of(mid, &mid_n);
    const char *nothing_s = ascii_of(nothing, &nothing_n);
    /* An unnamed function's source ("FDE at .eh_frame offset ", then the offset) and its
     * reason code go into JSON strings as they are: only where nothing needs escaping. */
    Py_ssize_t source_n, reason_n;
    const char *source_s = plain_of(source, &source_n), *reason_s = plain_of(reason, &reason_n);
    if (reason_s == NULL)
        source_s = NULL;
    Buf b = {NULL, 0, 0};
    Py_ssize_t n = PyList_GET_SIZE(lines);
    if (head_s == NULL || mid_s == NULL || nothing_s == NULL)
        goto done; /* the caller's way for every line */

    Py_ssize_t row_start = 0;
    for (; k < n && k < PyList_GET_SIZE(lines); k++) {
        row_start = b.len;
        Py_ssize_t len;
        const char *text = ascii_of(PyList_GET_ITEM(lines, k), &len);
        uint64_t value;
        if (text == NULL || !parse_hex(text, len, &value) || value < lo || value >= hi)
            break;
        char h[2 + MAX_DIGITS], off[2 + MAX_DIGITS], num[24];
        Py_ssize_t h_n = hex_of(value, h);
        Py_ssize_t off_n = delta == 0 ? 0 : hex_of(value + (uint64_t)delta, off);
        if ((row_start && PUT_LIT(&b, "\n") < 0) || buf_put(&b, head_s, head_n) < 0 ||
            buf_put(&b, h, h_n) < 0 || buf_put(&b, mid_s, mid_n) < 0 || buf_put(&b, h, h_n) < 0 ||
            PUT_LIT(&b, "\", \"elf_offset\": \"") < 0 ||
            buf_put(&b, delta == 0 ? h : off, delta == 0 ? h_n : off_n) < 0 ||
            PUT_LIT(&b, "\", ") < 0)
            goto fail;
        Py_ssize_t i = bisect_u64(starts, count, value) - 1;
        if (i >= 0 && value < ends[i]) {
            PyObject *frag =
                fragment_of(fragments, fragment, have_names ? &names : NULL, i, starts[i], ends[i]);
            if (frag == NULL)
                goto fail;
            int r = put_str(&b, frag);
            Py_DECREF(frag);
            if (r < 0)
                goto fail;
            if (r > 0)
                break;
            if (buf_put(&b, num, dec_of(value - starts[i], num)) < 0 || PUT_LIT(&b, "}") < 0)
                goto fail;
        } else if (i >= 0 && reach[i] > value) {
            break; /* nested in an earlier symbol: SymbolTable.enclosing, the caller's way */
        } else if (fde_starts == NULL) {
            break; /* the other symbol sources, or FDEs found another way */
        } else {
            __int128 rel = (__int128)value - (__int128)fde_base;
            Py_ssize_t f = bisect_signed(fde_starts, fde_size, fde_count, rel) - 1;
            uint64_t start = 0, end = 0;
            PyObject *found = NULL;
            if (f >= 0) {
                PyObject *key = PyLong_FromSsize_t(f);
                if (key == NULL)
                    goto fail;
                found = cached(spans, key, span_of, key);
                Py_DECREF(key);
                if (found == NULL)
                    goto fail;
                if (!PyTuple_Check(found) || PyTuple_GET_SIZE(found) != 3 ||
                    !u64_of(PyTuple_GET_ITEM(found, 0), &start) ||
                    !u64_of(PyTuple_GET_ITEM(found, 1), &end)) {
                    Py_DECREF(found);
                    break;
                }
            }
            if (found == NULL || !(start <= value && value < end)) {
                Py_XDECREF(found);
                if (buf_put(&b, nothing_s, nothing_n) < 0 || buf_put(&b, h, h_n) < 0 ||
                    PUT_LIT(&b, "\"}") < 0)
                    goto fail;
            } else {
                uint64_t fde;
                int fde_ok = u64_of(PyTuple_GET_ITEM(found, 2), &fde);
                Py_DECREF(found);
                if (!fde_ok || source_s == NULL)
                    break;
                /* as FastLoops.unnamed_parts and fast_rows write an unnamed function */
                char sv[2 + MAX_DIGITS], ev[2 + MAX_DIGITS], fv[2 + MAX_DIGITS];
                Py_ssize_t sv_n = hex_of(start, sv), ev_n = hex_of(end, ev);
                Py_ssize_t fv_n = hex_of(fde, fv);
                int r = PUT_LIT(&b, "\"symbol\": null, \"demangled\": null, \"symbol_vaddr\": \"");
                if (r == 0)
                    r = buf_put(&b, sv, sv_n);
                if (r == 0)
                    r = PUT_LIT(&b, "\", \"symbol_size\": ");
                if (r == 0)
                    r = buf_put(&b, num, dec_of(end - start, num));
                if (r == 0)
                    r = PUT_LIT(&b, ", \"symbol_offset\": ");
                if (r == 0)
                    r = buf_put(&b, num, dec_of(value - start, num));
                if (r == 0)
                    r = PUT_LIT(&b, ", \"function_source\": \"");
                if (r == 0)
                    r = buf_put(&b, source_s, source_n);
                if (r == 0)
                    r = buf_put(&b, fv, fv_n);
                if (r == 0)
                    r = PUT_LIT(&b, "\", \"reason\": \"");
                if (r == 0)
                    r = buf_put(&b, reason_s, reason_n);
                if (r == 0)
                    r = PUT_LIT(&b, "\", \"detail\": \"no function symbol covers ELF vaddr ");
                if (r == 0)
                    r = buf_put(&b, h, h_n);
                if (r == 0)
                    r = PUT_LIT(&b, "; the ");
                if (r == 0)
                    r = buf_put(&b, source_s, source_n);
                if (r == 0)
                    r = buf_put(&b, fv, fv_n);
                if (r == 0)
                    r = PUT_LIT(&b, " bounds its function: [");
                if (r == 0)
                    r = buf_put(&b, sv, sv_n);
                if (r == 0)
                    r = PUT_LIT(&b, ", ");
                if (r == 0)
                    r = buf_put(&b, ev, ev_n);
                if (r == 0)
                    r = PUT_LIT(&b, ")\"}");
                if (r < 0)
                    goto fail;
            }
        }
    }
    if (k < n)
        b.len = row_start; /* the row of the line not taken, begun or not */
    if (b.len > 0) {
        PyObject *block = PyUnicode_New(b.len, 127);
        if (block == NULL)
            goto fail;
        memcpy(PyUnicode_1BYTE_DATA(block), b.data, (size_t)b.len);
        int r = PyList_Append(out, block);
        Py_DECREF(block);
        if (r < 0)
            goto fail;
    }
done:
    PyMem_Free(b.data);
    release(&t);
    return PyLong_FromSsize_t(k);
fail:
    PyMem_Free(b.data);
    release(&t);
    return NULL;
}

static PyMethodDef methods[] = {
    {"rows", (PyCFunction)(void (*)(void))rows, METH_FASTCALL,
     "The common JSON rows of symbolize -e from lines[k] on; returns where the "
     "general way is needed."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "livesym._symrows", "symbolize -e's common rows in C", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__symrows(void)
{
    return PyModule_Create(&module);
}
