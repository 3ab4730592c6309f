/* thinkwire._hot: the steady token delta, answered in C (see thinkwire/hot.py).
 *
 * `Hot(fallback)` is the stream callable mitmproxy calls once per chunk. Armed with a spec
 * (`arm`), it answers a chunk that is exactly the spec's event with another text literal in
 * its slot, every byte and escape of which the spec's table allows, and, where the spec has a
 * second slot, another value there: a number, or a string literal of the bytes the spec names
 * (no escape). It sends the same bytes, or the spec's output template filled in. Anything else
 * goes to `fallback(chunk)`, the Python driver, which first folds in what was taken here
 * (`take`) and then arms again or disarms. What goes out for a text of whitespace alone (the
 * spec's held template) waits for the next output, this one's or the fallback's, and goes in
 * front of it: mitmproxy writes each output on its own, and a write costs it more than a call.
 *
 * What C knows of the splitter's rules is only what the spec says: which bytes and escapes a
 * text may hold (Python leaves out every character a tag or marker starts with, so no text
 * taken here can change a rule's decision), and, in reasoning that trims, which of them are
 * whitespace: that at a text's end is held, as the splitter holds it, and goes out in front of
 * the next text. It keeps no other state of the splitter (line, code, tags): Python derives
 * that from the texts taken, which `take` gives as they came. It keeps those texts up to CAP
 * bytes; a chunk that would pass that goes to Python, which folds and arms again.
 *
 * The take path runs no Python code (from 3.12 the cycle collector runs at the eval loop's
 * breaker, not on an allocation): nothing re-enters between reading the spec and committing.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

#include "_hot_spec.h"

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;      /* hot_vectorcall, set by __init__ */
    PyObject *fallback;
    PyObject *spec;                 /* the armed spec (owns the bytes `s` points into), or NULL */
    Spec s;
    long long offset, last;         /* the numbering (SEQ_*) */
    char held[MAX_HELD];            /* whitespace held, escaped as it came */
    Py_ssize_t held_len;
    PyObject *later;                /* the held template's output, not sent yet (bytes), or NULL */
    /* since the last `take` */
    Py_ssize_t hits, changed;
    char *lit;                      /* the texts' literal bodies, as they came */
    Py_ssize_t lit_len, lit_cap;
} Hot;

static PyObject *hot_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames);

static int
hot_init(Hot *self, PyObject *args, PyObject *kwds)
{
    PyObject *fallback;
    static char *kwlist[] = {"fallback", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O", kwlist, &fallback))
        return -1;
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "fallback must be callable");
        return -1;
    }
    Py_INCREF(fallback);
    Py_XSETREF(self->fallback, fallback);
    Py_CLEAR(self->spec);
    self->vectorcall = hot_vectorcall;
    return 0;
}

static int
hot_traverse(Hot *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->fallback);
    Py_VISIT(self->spec);
    return 0;
}

static int
hot_clear(Hot *self)
{
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->spec);
    Py_CLEAR(self->later);
    return 0;
}

/* `a` + `b`, one bytes object (both references are taken). */
static PyObject *
joined(PyObject *a, PyObject *b)
{
    Py_ssize_t na = PyBytes_GET_SIZE(a), nb = PyBytes_GET_SIZE(b);
    PyObject *r = PyBytes_FromStringAndSize(NULL, na + nb);
    if (r != NULL) {
        memcpy(PyBytes_AS_STRING(r), PyBytes_AS_STRING(a), na);
        memcpy(PyBytes_AS_STRING(r) + na, PyBytes_AS_STRING(b), nb);
    }
    Py_DECREF(a);
    Py_DECREF(b);
    return r;
}

/* The fallback's output for `chunk`, with what was kept for later in front of its first bytes
 * (or alone): the client's bytes in their order, in one write. */
static PyObject *
call_fallback(Hot *self, PyObject *chunk)
{
    PyObject *got = PyObject_CallOneArg(self->fallback, chunk);
    if (got == NULL || self->later == NULL)
        return got;
    if (!PyList_CheckExact(got)) {
        Py_DECREF(got);
        PyErr_SetString(PyExc_TypeError, "Hot: the fallback must return a list");
        return NULL;
    }
    PyObject *later = self->later;
    self->later = NULL;
    if (PyList_GET_SIZE(got) && PyBytes_CheckExact(PyList_GET_ITEM(got, 0))) {
        PyObject *first = joined(later, Py_NewRef(PyList_GET_ITEM(got, 0)));
        if (first == NULL) {
            Py_DECREF(got);
            return NULL;
        }
        PyList_SetItem(got, 0, first);   /* (steals `first`, drops the old item) */
    } else if (PyList_Insert(got, 0, later) < 0) {
        Py_DECREF(later);
        Py_DECREF(got);
        return NULL;
    } else {
        Py_DECREF(later);
    }
    return got;
}

static void
hot_dealloc(Hot *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    hot_clear(self);
    PyMem_Free(self->lit);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

/* arm(spec, offset=0, last=0, held=b""). spec: a thinkwire.hot.Spec (pre, slot_pos, mid, post,
 * table, trim, out, seq_mode, channels, pass_same, chars, held: read by position), as
 * thinkwire.hot.spec makes it; out: None (the chunk goes as it came) or a tuple of bytes and
 * PART_* ints. offset, last: the numbering (0 or
 * more). held: the whitespace the splitter holds (escaped JSON text; reasoning that trims
 * only). Arming with the spec already armed only sets the numbering and what is held.
 * Everything is read and checked first, then committed: a spec refused leaves the armed one as
 * it was. */
static PyObject *
hot_arm(Hot *self, PyObject *args)
{
    PyObject *spec, *held = NULL;
    long long offset = 0, last = 0;
    if (!PyArg_ParseTuple(args, "O!|LLO!:arm", &PyTuple_Type, &spec, &offset, &last, &PyBytes_Type, &held))
        return NULL;
    Py_ssize_t held_len = held ? PyBytes_GET_SIZE(held) : 0;
    if (offset < 0 || last < 0 || held_len > MAX_HELD) {
        PyErr_SetString(PyExc_ValueError, "arm: a negative number, or more than 64 bytes held");
        return NULL;
    }
    Spec s;
    int same = spec == self->spec;
    if (!same && read_spec(spec, &s) < 0)
        return NULL;
    if (held_len && !(same ? self->s.trim : s.trim)) {
        PyErr_SetString(PyExc_ValueError, "arm: whitespace held, for a spec that does not hold it");
        return NULL;
    }
    /* Commit. */
    PyObject *old = NULL;
    if (!same) {
        old = self->spec;
        self->spec = Py_NewRef(spec);   /* keeps the bytes `s` points into */
        self->s = s;
    }
    self->offset = offset;
    self->last = last;
    if (held_len)
        memcpy(self->held, PyBytes_AS_STRING(held), held_len);
    self->held_len = held_len;
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

static PyObject *
hot_disarm(Hot *self, PyObject *Py_UNUSED(ignored))
{
    Py_CLEAR(self->spec);
    Py_RETURN_NONE;
}

/* What `take` gives: a named tuple (thinkwire.hot.Took is its Python spelling). */
typedef struct {
    PyTypeObject *took;
} ModuleState;

static PyStructSequence_Field took_fields[] = {
    {"hits", "chunks taken"},
    {"changed", "of them, chunks whose output is not the chunk"},
    {"literal", "the bodies of the text literals taken, as they came, one after the other (or None)"},
    {"offset", "the numbering's offset now"},
    {"last", "the last number given"},
    {NULL, NULL},
};

static PyStructSequence_Desc took_desc = {
    "thinkwire._hot.Took", "What Hot took since the last take()", took_fields, 5,
};

/* Took(hits, changed, literal or None, offset, last), and the counts start again. */
static PyObject *
hot_take(Hot *self, PyObject *Py_UNUSED(ignored))
{
    ModuleState *st = PyType_GetModuleState(Py_TYPE(self));
    if (st == NULL)
        return NULL;
    PyObject *r = PyStructSequence_New(st->took);
    if (r == NULL)
        return NULL;
    PyObject *vals[5] = {PyLong_FromSsize_t(self->hits), PyLong_FromSsize_t(self->changed),
                         self->lit_len ? PyBytes_FromStringAndSize(self->lit, self->lit_len) : Py_NewRef(Py_None),
                         PyLong_FromLongLong(self->offset), PyLong_FromLongLong(self->last)};
    int failed = 0;
    for (int i = 0; i < 5; i++) {
        if (vals[i] == NULL)
            failed = 1;
        else
            PyStructSequence_SET_ITEM(r, i, vals[i]);
    }
    if (failed) {
        Py_DECREF(r);
        return NULL;
    }
    self->hits = self->changed = self->lit_len = 0;
    if (self->lit_cap > 4096) {   /* an idle stream keeps a small buffer */
        PyMem_Free(self->lit);
        self->lit = NULL;
        self->lit_cap = 0;
    }
    return r;
}

/* Keep a text literal's body for `take` (the caller checked it fits under CAP). */
static int
keep(Hot *self, const char *body, Py_ssize_t n)
{
    if (self->lit_len + n > self->lit_cap) {
        Py_ssize_t c = self->lit_cap ? self->lit_cap : 256;
        while (c < self->lit_len + n)
            c *= 2;
        char *b = PyMem_Realloc(self->lit, c);
        if (b == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->lit = b;
        self->lit_cap = c;
    }
    memcpy(self->lit + self->lit_len, body, n);
    self->lit_len += n;
    return 0;
}

/* A matched chunk taken: the output (a list of one bytes, or none), or NULL with an error set.
 * `body`: the literal's body up to the whitespace held at its end, `ws` that whitespace;
 * `all_len`: the whole body, kept for `take`; `str`: the string slot's body. `alone`: the text
 * is whitespace alone, held whole (nothing was held before): the held template's output (an
 * event that carries no text) is kept, and goes out in front of the next output, whoever makes
 * it: the same bytes, one write (mitmproxy writes each output; a write costs it more than
 * this whole call). */
static PyObject *
take_chunk(Hot *self, PyObject *chunk, const char *body, Py_ssize_t body_len, const char *ws, Py_ssize_t ws_len,
           Py_ssize_t all_len, const char *str, Py_ssize_t str_len, long long n, long long offset, long long last,
           long long seq, int alone)
{
    const Spec *s = &self->s;
    Py_ssize_t held_len = self->held_len;
    PyObject *out = NULL;
    char num[2][24];
    int num_len[2] = {0, 0};
    int same = !alone && (s->passthrough || (s->pass_same && n == seq && !held_len && !ws_len));
    if (alone) {
        if (s->held_nparts) {
            out = fill(s->held_part, s->held_part_len, s->held_nparts, NULL, 0, NULL, 0, str, str_len, num, num_len);
            if (out == NULL)
                return NULL;
        }
    } else if (same) {
        out = Py_NewRef(chunk);
    } else {
        if (s->seq_mode != SEQ_NONE) {
            num_len[0] = fmt_number(num[0], n);
            if (s->channels > 1)
                num_len[1] = fmt_number(num[1], n + 1);
        }
        out = fill(s->part, s->part_len, s->nparts, self->held, held_len, body, body_len, str, str_len, num, num_len);
        if (out == NULL)
            return NULL;
    }
    if (out != NULL && self->later != NULL) {
        PyObject *later = self->later;
        self->later = NULL;
        if ((out = joined(later, out)) == NULL)
            return NULL;
    }
    if (alone && out != NULL) {
        self->later = out;
        out = NULL;
    }
    PyObject *list = PyList_New(out != NULL);
    if (list == NULL || keep(self, body, all_len) < 0) {
        Py_XDECREF(list);
        Py_XDECREF(out);
        return NULL;
    }
    if (out != NULL)
        PyList_SET_ITEM(list, 0, out);
    self->offset = offset;
    self->last = last;
    self->hits++;
    self->changed += !same;
    if (ws_len)
        memcpy(self->held, ws, ws_len);
    self->held_len = ws_len;
    return list;
}

/* Whether the 4 hex digits at `d` are those of one of the spec's backslash-u escapes. */
static int
uescaped(const Spec *s, const unsigned char *d)
{
    for (int k = 0; k < s->nuesc; k++)
        if (memcmp(d, s->uesc[k], 4) == 0)
            return 1;
    return 0;
}

static PyObject *
hot_chunk(Hot *self, PyObject *chunk)
{
    if (self->fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Hot is not initialised");
        return NULL;
    }
    if (self->spec == NULL || !PyBytes_CheckExact(chunk))
        return call_fallback(self, chunk);
    const Spec *s = &self->s;
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(chunk);
    Py_ssize_t len = PyBytes_GET_SIZE(chunk);
    Py_ssize_t end = len - s->post_len;   /* where the last slot must end */
    if (end < s->pre_len + 2 || memcmp(p, s->pre, s->pre_len) != 0 || memcmp(p + end, s->post, s->post_len) != 0)
        return call_fallback(self, chunk);
    Py_ssize_t i = s->pre_len, str = 0, str_len = 0;
    long long seq = -1;
    if (s->slot_pos == 1) {
        if (read_slot(s, p, &i, end, &seq, &str, &str_len) < 0 || end - i < s->mid_len
            || memcmp(p + i, s->mid, s->mid_len) != 0)
            return call_fallback(self, chunk);
        i += s->mid_len;
    }
    if (i >= end || p[i] != '"')
        return call_fallback(self, chunk);
    const unsigned char *table = s->table;
    Py_ssize_t b = i + 1, j = b, ws = -1;   /* ws: where the whitespace at the end starts */
    while (j < end) {
        unsigned char t = table[p[j]];
        if (t & WORD_BYTE) {   /* a run of plain bytes: most of a text */
            do
                j++;
            while (j < end && (table[p[j]] & WORD_BYTE));
            ws = -1;
        } else if (t & ALLOW_BYTE) {   /* a space */
            if (ws < 0)
                ws = j;
            j++;
        } else if (p[j] == '\\' && j + 1 < end && (table[p[j + 1]] & ALLOW_ESCAPE)) {
            if (!(table[p[j + 1]] & ESCAPE_WS))
                ws = -1;
            else if (ws < 0)
                ws = j;
            j += 2;
        } else if (p[j] == '\\' && s->nuesc && j + 5 < end && p[j + 1] == 'u' && uescaped(s, p + j + 2)) {
            ws = -1;   /* (a backslash-u escape the spec names, as Go writes `>`: as it came) */
            j += 6;
        } else {
            break;
        }
    }
    if (j >= end || p[j] != '"' || j == b || self->lit_len + (j - b) > CAP)
        return call_fallback(self, chunk);
    Py_ssize_t body_end = j;
    int alone = 0;
    if (s->trim && ws >= 0) {
        /* Whitespace at the end is held, when it is short. Whitespace alone is held whole, and
         * nothing given, where the spec says what goes out then, nothing was held before (the
         * splitter holds more whitespace otherwise), and it is shorter still. */
        if (ws == b) {
            if (!s->held_mode || self->held_len || j - b > MAX_HELD_ALONE)
                return call_fallback(self, chunk);
            alone = 1;
        } else if (j - ws > MAX_HELD) {
            return call_fallback(self, chunk);
        }
        body_end = ws;
    }
    i = j + 1;
    if (s->slot_pos == 2) {
        if (end - i < s->mid_len || memcmp(p + i, s->mid, s->mid_len) != 0)
            return call_fallback(self, chunk);
        i += s->mid_len;
        if (read_slot(s, p, &i, end, &seq, &str, &str_len) < 0)
            return call_fallback(self, chunk);
    }
    if (i != end)
        return call_fallback(self, chunk);
    /* The numbers, checked: anything that would not fit (or an upstream number that does not
     * move on) is Python's, which counts with ints of any size. */
    long long n = 0, offset = self->offset, last = self->last;
    if (alone) {
        /* Nothing goes out: no number is taken; the offset moves as for any event (SEQ_NEW). */
        if (s->seq_mode == SEQ_NEW && last - seq > offset)
            offset = last - seq;
    } else if (s->seq_mode == SEQ_OWN) {
        if (__builtin_add_overflow(seq, offset, &n) || n <= last)
            return call_fallback(self, chunk);
        last = n;
    } else if (s->seq_mode == SEQ_NEW) {
        if (__builtin_add_overflow(last, (long long)s->channels, &last))
            return call_fallback(self, chunk);
        n = self->last + 1;
        if (last - seq > offset)
            offset = last - seq;
    }
    return take_chunk(self, chunk, (const char *)p + b, body_end - b, (const char *)p + body_end, j - body_end,
                      j - b, (const char *)p + str, str_len, n, offset, last, seq, alone);
}

static PyObject *
hot_call(Hot *self, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) != 1 || (kwds && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "Hot takes one chunk");
        return NULL;
    }
    return hot_chunk(self, PyTuple_GET_ITEM(args, 0));
}

/* The same, called without an argument tuple (mitmproxy calls it once per chunk). */
static PyObject *
hot_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || (kwnames && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "Hot takes one chunk");
        return NULL;
    }
    return hot_chunk((Hot *)self, args[0]);
}

static PyMemberDef hot_members[] = {
    {"fallback", T_OBJECT, offsetof(Hot, fallback), READONLY, "what takes every other chunk"},
    {"hits", T_PYSSIZET, offsetof(Hot, hits), READONLY, "chunks taken since the last take()"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Hot, vectorcall), READONLY, NULL},
    {NULL}
};

static PyObject *
hot_armed(Hot *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->spec ? self->spec : Py_None);
}

static PyGetSetDef hot_getset[] = {
    {"armed", (getter)hot_armed, NULL, "the armed spec, or None", NULL},
    {NULL}
};

static PyMethodDef hot_methods[] = {
    {"arm", (PyCFunction)hot_arm, METH_VARARGS, "arm(spec, offset=0, last=0, held=b'')"},
    {"disarm", (PyCFunction)hot_disarm, METH_NOARGS, "every chunk goes to the fallback"},
    {"take", (PyCFunction)hot_take, METH_NOARGS,
     "Took(hits, changed, literal, offset, last) since the last take (literal: the texts' literal\n"
     "bodies as they came, or None); the counts start again"},
    {NULL}
};

static PyType_Slot hot_slots[] = {
    {Py_tp_doc, "Hot(fallback): the stream callable that answers steady token deltas in C"},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, hot_init},
    {Py_tp_dealloc, hot_dealloc},
    {Py_tp_traverse, hot_traverse},
    {Py_tp_clear, hot_clear},
    {Py_tp_call, hot_call},
    {Py_tp_members, hot_members},
    {Py_tp_getset, hot_getset},
    {Py_tp_methods, hot_methods},
    {0, NULL},
};

static PyType_Spec hot_spec = {
    "thinkwire._hot.Hot", sizeof(Hot), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, hot_slots,
};

static int
hot_exec(PyObject *m)
{
    ModuleState *st = PyModule_GetState(m);
    st->took = PyStructSequence_NewType(&took_desc);
    if (st->took == NULL || PyModule_AddObjectRef(m, "Took", (PyObject *)st->took) < 0)
        return -1;
    PyObject *tp = PyType_FromModuleAndSpec(m, &hot_spec, NULL);
    if (tp == NULL)
        return -1;
    int r = PyModule_AddObjectRef(m, "Hot", tp);
    Py_DECREF(tp);
    if (r < 0)
        return -1;
    static const struct { const char *name; int value; } constants[] = {
        {"PART_N", PART_N}, {"PART_N1", PART_N1}, {"PART_BODY", PART_BODY}, {"PART_STR", PART_STR},
        {"SEQ_NONE", SEQ_NONE}, {"SEQ_OWN", SEQ_OWN}, {"SEQ_NEW", SEQ_NEW}, {"ALLOW_BYTE", ALLOW_BYTE},
        {"ALLOW_ESCAPE", ALLOW_ESCAPE}, {"BYTE_WS", BYTE_WS}, {"ESCAPE_WS", ESCAPE_WS}, {"CAP", CAP},
    };
    for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++)
        if (PyModule_AddIntConstant(m, constants[i].name, constants[i].value) < 0)
            return -1;
    return 0;
}

static PyModuleDef_Slot hot_module_slots[] = {
    {Py_mod_exec, hot_exec},
    {0, NULL},
};

static int
module_traverse(PyObject *m, visitproc visit, void *arg)
{
    ModuleState *st = PyModule_GetState(m);
    Py_VISIT(st->took);
    return 0;
}

static int
module_clear(PyObject *m)
{
    ModuleState *st = PyModule_GetState(m);
    Py_CLEAR(st->took);
    return 0;
}

static void
module_free(void *m)
{
    module_clear((PyObject *)m);
}

static struct PyModuleDef hot_module = {
    PyModuleDef_HEAD_INIT, "thinkwire._hot",
    "The steady token delta of a stream, answered in C (thinkwire.hot).", sizeof(ModuleState),
    NULL, hot_module_slots, module_traverse, module_clear, module_free,
};

PyMODINIT_FUNC
PyInit__hot(void)
{
    return PyModuleDef_Init(&hot_module);
}
