/* thinkwire._hot: the steady token delta, handled in C (see thinkwire/hot.py).
 *
 * `Hot(fallback)` is the stream callable mitmproxy calls once per chunk. While armed with a
 * spec (`arm`), a chunk that is exactly the learned event with another plain text literal
 * (and, for Responses, another sequence number) is answered here: the same bytes, or the
 * spec's output template filled in. Anything else goes to `fallback(chunk)`, the Python
 * driver, which first folds in what was taken here (`take`) and then arms or disarms again.
 *
 * The Python side arms only where taking such a chunk changes nothing in the rewriter but
 * what `take` reports: hits, characters, the texts (joined, and as they came), the sequence
 * numbering, and the whitespace held at the end of a reasoning text.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

/* Output template parts that are ints. */
#define PART_N 0      /* the event's sequence number */
#define PART_N1 1     /* the next one (a second reasoning channel) */
#define PART_BODY 2   /* the text literal's body */

/* Sequence numbering, as thinkwire.surfaces.responses.stream._Sequencer.number does it. */
#define SEQ_NONE 0
#define SEQ_OWN 1     /* the event keeps its number, shifted by the offset (answer text) */
#define SEQ_NEW 2     /* the events take the next free numbers (reasoning, `channels` of them) */

/* The table's bits. An escape taken is one json.dumps writes the same way (\n \t \r \b \f \" \\),
 * so the literal is what the Python path would write for its text. */
#define ALLOW_BYTE 1
#define ALLOW_ESCAPE 2
#define ALLOW_WORD 4     /* (set here) ALLOW_BYTE but the space: no trailing whitespace to track */

#define MAX_PARTS 16
#define MAX_HELD 64    /* bytes held (whitespace, escaped; the start of a tag) */
#define MAX_DIGITS 18  /* a sequence number fits in a long long */
#define MAX_TAGS 64    /* the answer's tags, for holding the start of one (see `tags`) */
#define CODE_SPAN 1    /* the answer's code state at the arm: an odd number of backticks on its line */
#define CODE_FENCE 2   /* in a fenced code block */

/* The answer's line and code state, as the splitter's _observe keeps it: in a fenced block, an
 * odd number of backticks on the line, and the line's first characters after its indent. */
typedef struct {
    int fence, ticks;
    char head[8];
    int head_len;
} CodeState;

static void
observe(CodeState *st, char c)
{
    if (c == '\n') {
        if (st->head_len >= 3 && (memcmp(st->head, "```", 3) == 0 || memcmp(st->head, "~~~", 3) == 0))
            st->fence ^= 1;
        st->head_len = 0;
        st->ticks = 0;
        return;
    }
    st->ticks ^= c == '`';
    if (st->head_len < 8 && (st->head_len || c != ' '))
        st->head[st->head_len++] = c;
}

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;      /* hot_vectorcall, set by __init__ */
    PyObject *fallback;
    PyObject *spec;                 /* the armed spec (owns the buffers below), or NULL */
    const char *pre, *mid, *post;
    Py_ssize_t pre_len, mid_len, post_len;
    int num_pos;                    /* 0: no number slot; 1: before the text; 2: after it */
    unsigned char allowed[256];     /* ALLOW_BYTE: a literal may hold the byte as it is;
                                       ALLOW_ESCAPE: the escape of backslash and this byte */
    int trim;                       /* text ending in whitespace is the splitter's to decide ... */
    int hold;                       /* ... or held here, as the splitter holds it (`Splitter.took`) */
    char held[MAX_HELD];            /* what is held (escaped, as it came): it goes out in front of */
    Py_ssize_t held_len;            /* the next text, or stays held at the block's end */
    int ntags;                      /* the answer: a text ending in the start of one of these tags */
    const char *tag[MAX_TAGS];      /* holds it, as the splitter does (it goes out in front of */
    Py_ssize_t tag_len[MAX_TAGS];   /* the next text, unless a tag goes on there) */
    unsigned char tag_first[256];   /* the tags' first bytes */
    CodeState code;                 /* the answer's line and code state at the arm */
    Py_ssize_t armed_at;            /* buf_len at the arm: the texts taken since start there */
    int collect;                    /* keep the bodies for `take` */
    int passthrough;                /* the output is the chunk (no template) */
    int pass_same;                  /* the template gives the chunk back (nothing held, n == seq) */
    int seq_mode, channels;
    Py_ssize_t nparts;
    const char *part[MAX_PARTS];    /* template: bytes, or NULL for an int code */
    Py_ssize_t part_len[MAX_PARTS]; /* its length, or the int code */
    long long offset, last;
    /* taken since the last `take` */
    Py_ssize_t hits, changed, chars;
    char *buf, *lit;                /* the texts taken, and the same as they came (escaped) */
    Py_ssize_t buf_len, buf_cap, lit_len, lit_cap;
} Hot;

static PyObject *hot_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames);

static void
hot_disarm_(Hot *self)
{
    Py_CLEAR(self->spec);
}

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
    hot_disarm_(self);
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
    PyMem_Free(self->buf);
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

/* arm(spec, offset=0, last=0, held=b"", code=0, head=b""). spec: (pre, num_pos, mid, post,
 * allowed, trim, out, seq_mode, channels, collect, pass_same, hold, tags); out: None (the chunk
 * goes as it came) or a tuple of bytes and PART_* ints; tags: the answer's tags (bytes), whose
 * start at a text's end is held, or () for none. held: what the splitter holds (whitespace in
 * reasoning, the start of a tag in the answer), as escaped JSON text; code and head: the
 * answer's code state there (CODE_SPAN, CODE_FENCE) and its line's head (`Splitter.code`).
 * Arming with the spec already armed only sets the numbering, what is held and the code state. */
static PyObject *
hot_arm(Hot *self, PyObject *args)
{
    PyObject *spec;
    long long offset = 0, last = 0;
    const char *held = "";
    Py_ssize_t held_len = 0;
    int code = 0;
    const char *head = "";
    Py_ssize_t head_len = 0;
    if (!PyArg_ParseTuple(args, "O!|LLy#iy#:arm", &PyTuple_Type, &spec, &offset, &last, &held, &held_len,
                          &code, &head, &head_len))
        return NULL;
    if (held_len > MAX_HELD || head_len > 8) {
        PyErr_SetString(PyExc_ValueError, "arm: too much held, or a line head over 8 bytes");
        return NULL;
    }
    self->offset = offset;
    self->last = last;
    memcpy(self->held, held, held_len);
    self->held_len = held_len;
    self->code.fence = (code & CODE_FENCE) != 0;
    self->code.ticks = code & CODE_SPAN;
    memcpy(self->code.head, head, head_len);
    self->code.head_len = (int)head_len;
    self->armed_at = self->buf_len;
    if (spec == self->spec)
        Py_RETURN_NONE;
    hot_disarm_(self);
    PyObject *pre, *mid, *post, *allowed, *out, *tags;
    int num_pos, trim, seq_mode, channels, collect, pass_same, hold;
    if (!PyArg_ParseTuple(spec, "OiOOOpOiipppO!:spec", &pre, &num_pos, &mid, &post, &allowed, &trim,
                          &out, &seq_mode, &channels, &collect, &pass_same, &hold, &PyTuple_Type, &tags))
        return NULL;
    const char *tbl;
    Py_ssize_t tbl_len;
    if (bytes_arg(pre, &self->pre, &self->pre_len, "pre") < 0
        || bytes_arg(mid, &self->mid, &self->mid_len, "mid") < 0
        || bytes_arg(post, &self->post, &self->post_len, "post") < 0
        || bytes_arg(allowed, &tbl, &tbl_len, "allowed") < 0)
        return NULL;
    if (tbl_len != 256 || num_pos < 0 || num_pos > 2 || seq_mode < SEQ_NONE || seq_mode > SEQ_NEW
        || channels < 1 || channels > 2 || (seq_mode != SEQ_NONE) != (num_pos != 0)) {
        PyErr_SetString(PyExc_ValueError, "spec: bad table, slot or numbering");
        return NULL;
    }
    static const char escapable[] = "ntrbf\"\\";
    for (int i = 0; i < 256; i++) {
        unsigned char t = (unsigned char)tbl[i];
        self->allowed[i] = (t & ALLOW_BYTE) | (strchr(escapable, i) && i ? t & ALLOW_ESCAPE : 0);
    }
    self->allowed['"'] &= ~ALLOW_BYTE;   /* the scan ends at the closing quote */
    self->allowed['\\'] &= ~ALLOW_BYTE;  /* and reads an escape at a backslash */
    for (int i = 0; i < 256; i++)
        if (self->allowed[i] & ALLOW_BYTE && i != ' ')
            self->allowed[i] |= ALLOW_WORD;
    self->passthrough = out == Py_None;
    self->nparts = 0;
    if (!self->passthrough) {
        if (!PyTuple_Check(out) || PyTuple_GET_SIZE(out) > MAX_PARTS) {
            PyErr_SetString(PyExc_ValueError, "spec: out must be None or a tuple of at most 16 parts");
            return NULL;
        }
        self->nparts = PyTuple_GET_SIZE(out);
        for (Py_ssize_t i = 0; i < self->nparts; i++) {
            PyObject *o = PyTuple_GET_ITEM(out, i);
            if (PyLong_Check(o)) {
                long code = PyLong_AsLong(o);
                if (code < PART_N || code > PART_BODY || (code != PART_BODY && seq_mode == SEQ_NONE)
                    || (code == PART_N1 && channels < 2)) {
                    PyErr_SetString(PyExc_ValueError, "spec: bad part code");
                    return NULL;
                }
                self->part[i] = NULL;
                self->part_len[i] = code;
            } else if (bytes_arg(o, &self->part[i], &self->part_len[i], "a part") < 0) {
                return NULL;
            }
        }
    } else if (seq_mode != SEQ_NONE || hold || PyTuple_GET_SIZE(tags)) {
        PyErr_SetString(PyExc_ValueError, "spec: a numbered event, or anything held, needs a template");
        return NULL;
    }
    Py_ssize_t ntags = PyTuple_GET_SIZE(tags);
    if (ntags > MAX_TAGS || (ntags && (trim || !collect))) {
        PyErr_SetString(PyExc_ValueError, "spec: tags are for the answer (no trim, collected), at most 64");
        return NULL;
    }
    memset(self->tag_first, 0, sizeof self->tag_first);
    for (Py_ssize_t i = 0; i < ntags; i++) {
        if (bytes_arg(PyTuple_GET_ITEM(tags, i), &self->tag[i], &self->tag_len[i], "a tag") < 0)
            return NULL;
        if (self->tag_len[i] < 1 || self->tag_len[i] > MAX_HELD) {
            PyErr_SetString(PyExc_ValueError, "spec: a tag is 1 to 64 bytes");
            return NULL;
        }
        self->tag_first[(unsigned char)self->tag[i][0]] = 1;
    }
    self->ntags = (int)ntags;
    self->num_pos = num_pos;
    self->trim = trim;
    self->hold = hold && trim;
    self->collect = collect;
    self->pass_same = pass_same;
    self->seq_mode = seq_mode;
    self->channels = channels;
    Py_INCREF(spec);
    self->spec = spec;   /* keeps the bytes the pointers above point into */
    Py_RETURN_NONE;
}

static PyObject *
hot_disarm(Hot *self, PyObject *Py_UNUSED(ignored))
{
    hot_disarm_(self);
    Py_RETURN_NONE;
}

/* (hits, changed, chars, text or None, offset, last, held, literal or None), and the counts
 * start again. held: what is held, escaped; literal: the texts as they came (escaped). */
static PyObject *
hot_take(Hot *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *text, *lit;
    if (self->buf_len) {
        text = PyBytes_FromStringAndSize(self->buf, self->buf_len);
        lit = PyBytes_FromStringAndSize(self->lit, self->lit_len);
        if (text == NULL || lit == NULL) {
            Py_XDECREF(text);
            Py_XDECREF(lit);
            return NULL;
        }
    } else {
        text = Py_NewRef(Py_None);
        lit = Py_NewRef(Py_None);
    }
    PyObject *r = Py_BuildValue("nnnNLLy#N", self->hits, self->changed, self->chars, text,
                                self->offset, self->last, self->held, self->held_len, lit);
    if (r == NULL)
        return NULL;
    self->hits = self->changed = self->chars = self->buf_len = self->lit_len = 0;
    if (self->buf_cap > (1 << 16)) {   /* do not hold a long stream's text for the next one */
        PyMem_Free(self->buf);
        PyMem_Free(self->lit);
        self->buf = self->lit = NULL;
        self->buf_cap = self->lit_cap = 0;
    }
    return r;
}

/* A JSON number slot `0|[1-9][0-9]*` at p[*i..end): its value, *i moved past it; -1: none. */
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

/* Room for n more bytes in a buffer of `take`. */
static int
reserve(char **buf, Py_ssize_t len, Py_ssize_t *cap, Py_ssize_t n)
{
    if (len + n <= *cap)
        return 0;
    Py_ssize_t c = *cap ? *cap : 256;
    while (c < len + n)
        c *= 2;
    char *b = PyMem_Realloc(*buf, c);
    if (b == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *buf = b;
    *cap = c;
    return 0;
}

/* Keep a body for `take`: its text (the escapes the scan took, decoded), and the body as it
 * came, which is json.dumps's literal of that text (a Responses item's whole text goes out in
 * its done events: the Python side reuses it rather than escape 20 KB again). */
static int
collect(Hot *self, const char *body, Py_ssize_t n)
{
    if (reserve(&self->buf, self->buf_len, &self->buf_cap, n) < 0
            || reserve(&self->lit, self->lit_len, &self->lit_cap, n) < 0)
        return -1;
    memcpy(self->lit + self->lit_len, body, n);
    self->lit_len += n;
    char *w = self->buf + self->buf_len;
    const char *esc = memchr(body, '\\', n);   /* most bodies have no escape: copied whole */
    Py_ssize_t i = esc ? esc - body : n;
    memcpy(w, body, i);
    w += i;
    for (; i < n; i++) {
        char c = body[i];
        if (c == '\\') {
            c = body[++i];
            c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == 'b' ? '\b' : c == 'f' ? '\f' : c;
        }
        *w++ = c;
    }
    self->buf_len = w - self->buf;
    return 0;
}

static int
fmt_number(char *dst, long long v)
{
    char tmp[24];
    int n = 0, neg = v < 0;
    if (neg) {   /* (numbers the Python side gave; never below 0 there) */
        *dst++ = '-';
        v = -v;
    }
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (int k = 0; k < n; k++)
        dst[k] = tmp[n - 1 - k];
    return n + neg;
}

/* The answer: the length of the start of a tag, in ASCII, that p[j..] holds up to the closing
 * quote of the text, or 0 when it holds no such thing there (the splitter decides then). */
static Py_ssize_t
tag_start(Hot *self, const unsigned char *p, Py_ssize_t j, Py_ssize_t end)
{
    for (int t = 0; t < self->ntags; t++) {
        const char *tag = self->tag[t];
        Py_ssize_t n = self->tag_len[t], i = 0;
        while (i < n && j + i < end && p[j + i] == (unsigned char)tag[i] && p[j + i] < 0x80)
            i++;
        if (i > 0 && i < n && j + i < end && p[j + i] == '"')
            return i;
    }
    return 0;
}

/* The answer, the start of a tag held: whether held + text (the next text's literal, all of it)
 * holds a tag, or the start of one, from a byte of what is held on. The splitter decides then;
 * else what is held is text, and goes out in front of this one. */
static int
tag_goes_on(Hot *self, const unsigned char *text, Py_ssize_t text_len)
{
    const unsigned char *held = (const unsigned char *)self->held;
    Py_ssize_t held_len = self->held_len;
    for (Py_ssize_t k = 0; k < held_len; k++) {
        if (!self->tag_first[held[k]])
            continue;
        for (int t = 0; t < self->ntags; t++) {
            const unsigned char *tag = (const unsigned char *)self->tag[t];
            Py_ssize_t n = self->tag_len[t], avail = held_len - k + text_len, i = 0;
            if (n > avail)
                n = avail;   /* cut short by the text's end: the start of a tag */
            while (i < n && tag[i] == (k + i < held_len ? held[k + i] : text[k + i - held_len]))
                i++;
            if (i == n)
                return 1;
        }
    }
    return 0;
}

/* Whether the answer is in code where `text` (a literal's body up to a tag's start, after what
 * is held) ends: the splitter holds no tag's start in code. Its state at the arm, moved over the
 * texts taken since, what is held and `text`. */
static int
in_code(Hot *self, const char *text, Py_ssize_t text_len)
{
    CodeState st = self->code;
    for (Py_ssize_t i = self->armed_at; i < self->buf_len; i++)
        observe(&st, self->buf[i]);
    for (Py_ssize_t i = 0; i < self->held_len; i++)
        observe(&st, self->held[i]);
    for (Py_ssize_t i = 0; i < text_len; i++) {
        char c = text[i];
        if (c == '\\')   /* an escape the scan took: only a line end and a space count here */
            c = text[++i] == 'n' ? '\n' : 'x';
        observe(&st, c);
    }
    return st.fence || st.ticks;
}

/* The output for a matched chunk, or NULL with no error set when it is not ours after all. */
static PyObject *
hot_take_chunk(Hot *self, PyObject *chunk, const char *body, Py_ssize_t body_len, Py_ssize_t chars,
               long long seq, const char *ws, Py_ssize_t ws_len)
{
    /* Holding: the text that goes out is what was held, then the body but what ends it (ws:
     * trailing whitespace in reasoning, the start of a tag in the answer), held in its turn. */
    int holds = self->hold || self->ntags;
    const char *held = self->held;
    Py_ssize_t held_len = holds ? self->held_len : 0;
    Py_ssize_t held_chars = 0;
    for (Py_ssize_t k = 0; k < held_len; k++)
        held_chars += held[k] != '\\';
    long long n = 0, offset = self->offset, last = self->last;
    if (self->seq_mode == SEQ_OWN) {
        n = seq + offset;
        if (n <= last) {
            n = last + 1;
            offset = n - seq;
        }
        last = n;
    } else if (self->seq_mode == SEQ_NEW) {
        n = last + 1;
        last = n + self->channels - 1;
        if (last - seq > offset)
            offset = last - seq;
    }
    PyObject *out;
    int same = self->passthrough
               || (self->pass_same && (self->seq_mode == SEQ_NONE || n == seq) && !held_len && !ws_len);
    if (same) {
        out = Py_NewRef(chunk);
    } else {
        char num[2][24];
        int num_len[2] = {0, 0};
        if (self->seq_mode != SEQ_NONE) {
            num_len[0] = fmt_number(num[0], n);
            if (self->channels > 1)
                num_len[1] = fmt_number(num[1], n + 1);
        }
        Py_ssize_t total = 0;
        for (Py_ssize_t i = 0; i < self->nparts; i++) {
            Py_ssize_t code = self->part_len[i];
            total += self->part[i] ? code : code == PART_BODY ? held_len + body_len : num_len[code];
        }
        out = PyBytes_FromStringAndSize(NULL, total);
        if (out == NULL)
            return NULL;
        char *w = PyBytes_AS_STRING(out);
        for (Py_ssize_t i = 0; i < self->nparts; i++) {
            Py_ssize_t code = self->part_len[i];
            if (self->part[i]) {
                memcpy(w, self->part[i], code);
                w += code;
            } else if (code == PART_BODY) {
                memcpy(w, held, held_len);
                memcpy(w + held_len, body, body_len);
                w += held_len + body_len;
            } else {
                memcpy(w, num[code], num_len[code]);
                w += num_len[code];
            }
        }
    }
    if (self->collect && (collect(self, held, held_len) < 0 || collect(self, body, body_len) < 0)) {
        Py_DECREF(out);
        return NULL;
    }
    PyObject *list = PyList_New(1);
    if (list == NULL) {
        Py_DECREF(out);
        return NULL;
    }
    PyList_SET_ITEM(list, 0, out);
    self->offset = offset;
    self->last = last;
    self->hits++;
    self->changed += !same;
    self->chars += held_chars + chars;
    if (holds) {
        memcpy(self->held, ws, ws_len);
        self->held_len = ws_len;
    }
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
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(chunk);
    Py_ssize_t len = PyBytes_GET_SIZE(chunk);
    Py_ssize_t end = len - self->post_len;   /* where the last slot must end */
    if (end < self->pre_len + 2 || memcmp(p, self->pre, self->pre_len) != 0
        || memcmp(p + end, self->post, self->post_len) != 0)
        return PyObject_CallOneArg(self->fallback, chunk);
    Py_ssize_t i = self->pre_len;
    long long seq = -1;
    if (self->num_pos == 1) {
        seq = read_number(p, &i, end);
        if (seq < 0 || end - i < self->mid_len || memcmp(p + i, self->mid, self->mid_len) != 0)
            return PyObject_CallOneArg(self->fallback, chunk);
        i += self->mid_len;
    }
    if (i >= end || p[i] != '"')
        return PyObject_CallOneArg(self->fallback, chunk);
    Py_ssize_t b = i + 1, j = b, chars = 0;
    Py_ssize_t ws = -1, ws_chars = 0;   /* where the trailing whitespace starts, its characters */
    const unsigned char *allowed = self->allowed;
    while (j < end) {
        if (allowed[p[j]] & ALLOW_WORD) {   /* a run of plain bytes but spaces: most of a text */
            Py_ssize_t run = j;
            do
                j++;
            while (j < end && (allowed[p[j]] & ALLOW_WORD));
            chars += j - run;
            ws = -1;
            continue;
        }
        unsigned char c = p[j];
        Py_ssize_t u = j;   /* where this character starts */
        int space;
        if (allowed[c] & ALLOW_BYTE) {
            space = c == ' ';
            j++;
        } else if (c == '\\' && j + 1 < end && (allowed[p[j + 1]] & ALLOW_ESCAPE)) {
            c = p[j + 1];
            space = c == 'n' || c == 't' || c == 'r' || c == 'f';
            j += 2;
        } else {
            break;
        }
        if (!space) {
            ws = -1;
        } else if (ws < 0) {
            ws = u;
            ws_chars = 0;
        }
        ws_chars += space;
        chars++;
    }
    Py_ssize_t part = 0;   /* the answer: the start of a tag ending the text, held */
    if (self->ntags && j < end && p[j] != '"') {
        part = tag_start(self, p, j, end);
        if (part == 0 || in_code(self, (const char *)p + b, j - b))
            return PyObject_CallOneArg(self->fallback, chunk);
        j += part;
    }
    if (j >= end || p[j] != '"' || j - part == b)
        return PyObject_CallOneArg(self->fallback, chunk);
    if (self->ntags && self->held_len && tag_goes_on(self, p + b, j - b))
        return PyObject_CallOneArg(self->fallback, chunk);
    Py_ssize_t body_end = j - part;
    if (part) {
        ws = body_end;
        ws_chars = 0;
    } else if (self->trim && ws >= 0) {
        /* Trimming, whitespace at the end is held: here when this spec holds it and there is
         * text before it (the splitter holds whitespace alone without a word), else the
         * splitter decides. */
        if (!self->hold || ws == b || j - ws > MAX_HELD)
            return PyObject_CallOneArg(self->fallback, chunk);
        body_end = ws;
    } else {
        ws = j;
        ws_chars = 0;
    }
    i = j + 1;
    if (self->num_pos == 2) {
        if (end - i < self->mid_len || memcmp(p + i, self->mid, self->mid_len) != 0)
            return PyObject_CallOneArg(self->fallback, chunk);
        i += self->mid_len;
        seq = read_number(p, &i, end);
        if (seq < 0)
            return PyObject_CallOneArg(self->fallback, chunk);
    }
    if (i != end)
        return PyObject_CallOneArg(self->fallback, chunk);
    return hot_take_chunk(self, chunk, (const char *)p + b, body_end - b, chars - ws_chars, seq,
                          (const char *)p + ws, j - ws);
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
    {"arm", (PyCFunction)hot_arm, METH_VARARGS, "arm(spec, offset=0, last=0)"},
    {"disarm", (PyCFunction)hot_disarm, METH_NOARGS, "every chunk goes to the fallback"},
    {"take", (PyCFunction)hot_take, METH_NOARGS,
     "(hits, changed, chars, text, offset, last, held, literal) since the last take (held and\n"
     "literal escaped, as they came); the counts start again"},
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
    if (PyModule_AddIntConstant(m, "PART_N", PART_N) < 0
        || PyModule_AddIntConstant(m, "PART_N1", PART_N1) < 0
        || PyModule_AddIntConstant(m, "PART_BODY", PART_BODY) < 0
        || PyModule_AddIntConstant(m, "SEQ_NONE", SEQ_NONE) < 0
        || PyModule_AddIntConstant(m, "SEQ_OWN", SEQ_OWN) < 0
        || PyModule_AddIntConstant(m, "SEQ_NEW", SEQ_NEW) < 0)
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
