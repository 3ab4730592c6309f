/* thinkwire._hot: the steady token delta, answered in C (see thinkwire/hot.py).
 *
 * `Hot(fallback)` is the stream callable mitmproxy calls once per chunk. Armed with a spec
 * (`arm`), it answers a chunk that is exactly the spec's event with another text literal in
 * its slot, every byte and escape of which the spec's table allows, and, where the spec has a
 * second slot, another value there: a number, or a string literal of the bytes the spec names
 * (no escape). It sends the same bytes, or the spec's output template filled in. Anything else
 * goes to `fallback(chunk)`, the Python driver, which first folds in what was taken here
 * (`take`) and then arms again or disarms.
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

/* Output template parts that are ints. */
#define PART_N 0      /* the event's sequence number */
#define PART_N1 1     /* the next one (a second reasoning channel) */
#define PART_BODY 2   /* the text literal's body (what is held, then the text) */
#define PART_STR 3    /* the string slot's body, as it came */

/* Sequence numbering, as thinkwire.surfaces.responses.stream._Sequencer.number does it. */
#define SEQ_NONE 0
#define SEQ_OWN 1     /* the event keeps its number, shifted by the offset (answer text) */
#define SEQ_NEW 2     /* the events take the next free numbers (reasoning, `channels` of them) */

/* The table's bits, as thinkwire.hot.table writes them. */
#define ALLOW_BYTE 1      /* a literal may hold the byte as it is */
#define ALLOW_ESCAPE 2    /* ... and the escape of a backslash and this byte (one json.dumps writes) */
#define BYTE_WS 4         /* the byte as it is is whitespace (held at a trimmed text's end) */
#define ESCAPE_WS 8       /* the character its escape stands for is */
#define WORD_BYTE 16      /* (set here) ALLOW_BYTE, not whitespace: a run of these is read in a tight loop */

#define MAX_PARTS 16
#define MAX_HELD 64          /* bytes of whitespace held (escaped) */
#define MAX_DIGITS 18        /* a number slot read here is below 10**18 */
#define CAP (16 * 1024)      /* bytes of text kept between two takes */

typedef struct {
    const char *pre, *mid, *post;
    Py_ssize_t pre_len, mid_len, post_len;
    int slot_pos;                   /* the second slot: 0 none; 1 before the text; 2 after it */
    int str_slot;                   /* it is a string literal of `chars` (else a number) */
    int seq_mode, channels;
    int trim;                       /* whitespace at a text's end is held (reasoning) */
    int passthrough;                /* the output is the chunk (no template) */
    int pass_same;                  /* the template gives the chunk back when n == seq, nothing held */
    Py_ssize_t nparts;
    const char *part[MAX_PARTS];    /* template: bytes, or NULL for an int code */
    Py_ssize_t part_len[MAX_PARTS]; /* its length, or the int code */
    unsigned char table[256];
    unsigned char chars[256];       /* 1: the string slot's literal may hold the byte */
} Spec;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;      /* hot_vectorcall, set by __init__ */
    PyObject *fallback;
    PyObject *spec;                 /* the armed spec (owns the bytes `s` points into), or NULL */
    Spec s;
    long long offset, last;         /* the numbering (SEQ_*) */
    char held[MAX_HELD];            /* whitespace held, escaped as it came */
    Py_ssize_t held_len;
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
    return 0;
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

static int
bytes_arg(PyObject *o, const char **p, Py_ssize_t *n, const char *what)
{
    if (!PyBytes_Check(o)) {
        PyErr_Format(PyExc_TypeError, "spec: %s must be bytes", what);
        return -1;
    }
    *p = PyBytes_AS_STRING(o);
    *n = PyBytes_GET_SIZE(o);
    return 0;
}

static int
spec_error(const char *msg)
{
    PyErr_SetString(PyExc_ValueError, msg);
    return -1;
}

/* Read and check a spec tuple into `s` (pointers into the tuple's bytes). May run Python code
 * (a flag's truth test, an int's __index__): nothing is committed here. */
static int
read_spec(PyObject *spec, Spec *s)
{
    PyObject *pre, *mid, *post, *table, *out, *chars;
    if (!PyArg_ParseTuple(spec, "OiOOOpOiipO:spec", &pre, &s->slot_pos, &mid, &post, &table, &s->trim, &out,
                          &s->seq_mode, &s->channels, &s->pass_same, &chars))
        return -1;
    const char *tbl, *ch = NULL;
    Py_ssize_t tbl_len, ch_len = 0;
    if (bytes_arg(pre, &s->pre, &s->pre_len, "pre") < 0 || bytes_arg(mid, &s->mid, &s->mid_len, "mid") < 0
        || bytes_arg(post, &s->post, &s->post_len, "post") < 0 || bytes_arg(table, &tbl, &tbl_len, "table") < 0
        || (chars != Py_None && bytes_arg(chars, &ch, &ch_len, "chars") < 0))
        return -1;
    /* The second slot is a number (numbered events) or a string literal (`chars`), not both. */
    s->str_slot = chars != Py_None;
    if (tbl_len != 256 || s->slot_pos < 0 || s->slot_pos > 2 || s->seq_mode < SEQ_NONE || s->seq_mode > SEQ_NEW
        || s->channels < 1 || s->channels > 2 || (s->seq_mode != SEQ_NONE && s->str_slot)
        || (s->seq_mode != SEQ_NONE || s->str_slot) != (s->slot_pos != 0))
        return spec_error("spec: bad table, slot or numbering");
    /* A string slot's literal ends at its first quote, and goes out as it came: printable ASCII
     * but the quote and the backslash (so no escape) is what it may hold. */
    memset(s->chars, 0, sizeof s->chars);
    for (Py_ssize_t i = 0; i < ch_len; i++) {
        unsigned char c = (unsigned char)ch[i];
        if (c < 0x20 || c > 0x7e || c == '"' || c == '\\')
            return spec_error("spec: chars may hold printable ASCII but the quote and the backslash only");
        s->chars[c] = 1;
    }
    for (int i = 0; i < 256; i++) {
        /* What each byte may be marked: the escapes json.dumps writes as two bytes, and of them
         * those that stand for whitespace; a printable ASCII byte, and the space as whitespace. */
        unsigned char t = (unsigned char)tbl[i], may = 0;
        if (i >= 0x20 && i <= 0x7e && i != '"' && i != '\\')
            may |= ALLOW_BYTE | (i == ' ' ? BYTE_WS : 0);
        if (i == '"' || i == '\\' || i == 'b' || i == 'f' || i == 'n' || i == 'r' || i == 't')
            may |= ALLOW_ESCAPE | (i == 'f' || i == 'n' || i == 'r' || i == 't' ? ESCAPE_WS : 0);
        if (t & ~may)
            return spec_error("spec: the table allows a byte or an escape that a literal taken here cannot hold");
        s->table[i] = t | ((t & ALLOW_BYTE) && !(t & BYTE_WS) ? WORD_BYTE : 0);
    }
    s->passthrough = out == Py_None;
    s->nparts = 0;
    if (s->passthrough) {
        if (s->seq_mode != SEQ_NONE || s->trim)
            return spec_error("spec: a numbered event, or a text whose end is held, needs a template");
        return 0;
    }
    if (!PyTuple_Check(out) || PyTuple_GET_SIZE(out) > MAX_PARTS)
        return spec_error("spec: out must be None or a tuple of at most 16 parts");
    s->nparts = PyTuple_GET_SIZE(out);
    for (Py_ssize_t i = 0; i < s->nparts; i++) {
        PyObject *o = PyTuple_GET_ITEM(out, i);
        if (PyLong_CheckExact(o)) {
            long code = PyLong_AsLong(o);
            if (code < PART_N || code > PART_STR || ((code == PART_N || code == PART_N1) && s->seq_mode == SEQ_NONE)
                || (code == PART_N1 && s->channels < 2) || (code == PART_STR && !s->str_slot))
                return spec_error("spec: bad part code");
            s->part[i] = NULL;
            s->part_len[i] = code;
        } else if (bytes_arg(o, &s->part[i], &s->part_len[i], "a part") < 0) {
            return -1;
        }
    }
    return 0;
}

/* arm(spec, offset=0, last=0, held=b""). spec: (pre, slot_pos, mid, post, table, trim, out,
 * seq_mode, channels, pass_same, chars) as thinkwire.hot.spec makes it; out: None (the chunk
 * goes as it came) or a tuple of bytes and PART_* ints. offset, last: the numbering (0 or
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

/* (hits, changed, literal or None, offset, last), and the counts start again. literal: the
 * bodies of the text literals taken, as they came, one after the other. */
static PyObject *
hot_take(Hot *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *lit = self->lit_len ? PyBytes_FromStringAndSize(self->lit, self->lit_len) : Py_NewRef(Py_None);
    if (lit == NULL)
        return NULL;
    PyObject *r = Py_BuildValue("nnNLL", self->hits, self->changed, lit, self->offset, self->last);
    if (r == NULL)
        return NULL;
    self->hits = self->changed = self->lit_len = 0;
    if (self->lit_cap > 4096) {   /* an idle stream keeps a small buffer */
        PyMem_Free(self->lit);
        self->lit = NULL;
        self->lit_cap = 0;
    }
    return r;
}

/* A JSON number slot `0|[1-9][0-9]*` below 10**18 at p[*i..end): its value, *i moved past it;
 * -1: none (a longer number is Python's). */
static long long
read_number(const unsigned char *p, Py_ssize_t *i, Py_ssize_t end)
{
    Py_ssize_t j = *i;
    if (j >= end || p[j] < '0' || p[j] > '9')
        return -1;
    if (p[j] == '0') {
        *i = j + 1;
        return 0;
    }
    long long v = 0;
    Py_ssize_t start = j;
    while (j < end && p[j] >= '0' && p[j] <= '9') {
        if (j - start >= MAX_DIGITS)
            return -1;
        v = v * 10 + (p[j] - '0');
        j++;
    }
    *i = j;
    return v;
}

/* The second slot at p[*i..end): a number (its value in *seq) or a string literal of the spec's
 * chars (its body at p[*str..*str + *str_len)); *i moved past it. -1: not one. */
static int
read_slot(const Spec *s, const unsigned char *p, Py_ssize_t *i, Py_ssize_t end, long long *seq, Py_ssize_t *str,
          Py_ssize_t *str_len)
{
    if (!s->str_slot) {
        *seq = read_number(p, i, end);
        return *seq < 0 ? -1 : 0;
    }
    Py_ssize_t j = *i;
    if (j >= end || p[j] != '"')
        return -1;
    Py_ssize_t b = ++j;
    while (j < end && s->chars[p[j]])
        j++;
    if (j >= end || p[j] != '"')
        return -1;
    *str = b;
    *str_len = j - b;
    *i = j + 1;
    return 0;
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

static int
fmt_number(char *dst, long long v)   /* v >= 0 */
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (int k = 0; k < n; k++)
        dst[k] = tmp[n - 1 - k];
    return n;
}

/* A matched chunk taken: the output (a list of one bytes), or NULL with an error set. `body`:
 * the literal's body up to the whitespace held at its end, `ws` that whitespace; `all_len`:
 * the whole body, kept for `take`; `str`: the string slot's body. */
static PyObject *
take_chunk(Hot *self, PyObject *chunk, const char *body, Py_ssize_t body_len, const char *ws, Py_ssize_t ws_len,
           Py_ssize_t all_len, const char *str, Py_ssize_t str_len, long long n, long long offset, long long last,
           long long seq)
{
    const Spec *s = &self->s;
    Py_ssize_t held_len = self->held_len;
    PyObject *out;
    int same = s->passthrough || (s->pass_same && n == seq && !held_len && !ws_len);
    if (same) {
        out = Py_NewRef(chunk);
    } else {
        char num[2][24];
        int num_len[2] = {0, 0};
        if (s->seq_mode != SEQ_NONE) {
            num_len[0] = fmt_number(num[0], n);
            if (s->channels > 1)
                num_len[1] = fmt_number(num[1], n + 1);
        }
        Py_ssize_t total = 0;
        for (Py_ssize_t i = 0; i < s->nparts; i++) {
            Py_ssize_t code = s->part_len[i];
            total += s->part[i] ? code
                     : code == PART_BODY ? held_len + body_len : code == PART_STR ? str_len : num_len[code];
        }
        out = PyBytes_FromStringAndSize(NULL, total);
        if (out == NULL)
            return NULL;
        char *w = PyBytes_AS_STRING(out);
        for (Py_ssize_t i = 0; i < s->nparts; i++) {
            Py_ssize_t code = s->part_len[i];
            if (s->part[i]) {
                memcpy(w, s->part[i], code);
                w += code;
            } else if (code == PART_BODY) {
                if (held_len)
                    memcpy(w, self->held, held_len);
                memcpy(w + held_len, body, body_len);
                w += held_len + body_len;
            } else if (code == PART_STR) {
                if (str_len)
                    memcpy(w, str, str_len);
                w += str_len;
            } else {
                memcpy(w, num[code], num_len[code]);
                w += num_len[code];
            }
        }
    }
    PyObject *list = PyList_New(1);
    if (list == NULL || keep(self, body, all_len) < 0) {
        Py_XDECREF(list);
        Py_DECREF(out);
        return NULL;
    }
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

static PyObject *
hot_chunk(Hot *self, PyObject *chunk)
{
    if (self->fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Hot is not initialised");
        return NULL;
    }
    if (self->spec == NULL || !PyBytes_CheckExact(chunk))
        return PyObject_CallOneArg(self->fallback, chunk);
    const Spec *s = &self->s;
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(chunk);
    Py_ssize_t len = PyBytes_GET_SIZE(chunk);
    Py_ssize_t end = len - s->post_len;   /* where the last slot must end */
    if (end < s->pre_len + 2 || memcmp(p, s->pre, s->pre_len) != 0 || memcmp(p + end, s->post, s->post_len) != 0)
        return PyObject_CallOneArg(self->fallback, chunk);
    Py_ssize_t i = s->pre_len, str = 0, str_len = 0;
    long long seq = -1;
    if (s->slot_pos == 1) {
        if (read_slot(s, p, &i, end, &seq, &str, &str_len) < 0 || end - i < s->mid_len
            || memcmp(p + i, s->mid, s->mid_len) != 0)
            return PyObject_CallOneArg(self->fallback, chunk);
        i += s->mid_len;
    }
    if (i >= end || p[i] != '"')
        return PyObject_CallOneArg(self->fallback, chunk);
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
        } else {
            break;
        }
    }
    if (j >= end || p[j] != '"' || j == b || self->lit_len + (j - b) > CAP)
        return PyObject_CallOneArg(self->fallback, chunk);
    Py_ssize_t body_end = j;
    if (s->trim && ws >= 0) {
        /* Whitespace at the end is held, when there is text before it (the splitter holds
         * whitespace alone without giving anything) and it is short. */
        if (ws == b || j - ws > MAX_HELD)
            return PyObject_CallOneArg(self->fallback, chunk);
        body_end = ws;
    }
    i = j + 1;
    if (s->slot_pos == 2) {
        if (end - i < s->mid_len || memcmp(p + i, s->mid, s->mid_len) != 0)
            return PyObject_CallOneArg(self->fallback, chunk);
        i += s->mid_len;
        if (read_slot(s, p, &i, end, &seq, &str, &str_len) < 0)
            return PyObject_CallOneArg(self->fallback, chunk);
    }
    if (i != end)
        return PyObject_CallOneArg(self->fallback, chunk);
    /* The numbers, checked: anything that would not fit (or an upstream number that does not
     * move on) is Python's, which counts with ints of any size. */
    long long n = 0, offset = self->offset, last = self->last;
    if (s->seq_mode == SEQ_OWN) {
        if (__builtin_add_overflow(seq, offset, &n) || n <= last)
            return PyObject_CallOneArg(self->fallback, chunk);
        last = n;
    } else if (s->seq_mode == SEQ_NEW) {
        if (__builtin_add_overflow(last, (long long)s->channels, &last))
            return PyObject_CallOneArg(self->fallback, chunk);
        n = self->last + 1;
        if (last - seq > offset)
            offset = last - seq;
    }
    return take_chunk(self, chunk, (const char *)p + b, body_end - b, (const char *)p + body_end, j - body_end,
                      j - b, (const char *)p + str, str_len, n, offset, last, seq);
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
     "(hits, changed, literal, offset, last) since the last take (literal: the texts' literal\n"
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

static struct PyModuleDef hot_module = {
    PyModuleDef_HEAD_INIT, "thinkwire._hot",
    "The steady token delta of a stream, answered in C (thinkwire.hot).", 0,
    NULL, hot_module_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__hot(void)
{
    return PyModuleDef_Init(&hot_module);
}
