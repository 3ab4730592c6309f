/* thinkwire._hot's spec (see _hot.c and thinkwire/hot.py): its constants and struct, reading and
 * checking one (`read_spec`, from a thinkwire.hot.Spec), reading its second slot, and filling in
 * its templates (`fill`). Included by _hot.c only: one translation unit. */
#ifndef THINKWIRE_HOT_SPEC_H
#define THINKWIRE_HOT_SPEC_H

/* Output template parts that are ints. */
#define PART_N 0      /* the event's sequence number */
#define PART_N1 1     /* the next one (a second reasoning channel) */
#define PART_BODY 2   /* the text literal's body (what is held, then the text) */
#define PART_STR 3    /* the string slot's body, as it came */

/* Sequence numbering: thinkwire.surfaces.responses.stream._Sequencer.number is the rule (hot_chunk
 * follows it, with overflow checks). */
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
#define MAX_HELD_ALONE 32    /* ... when a text of whitespace alone is held (the splitter's own limit) */
#define MAX_DIGITS 18        /* a number slot read here is below 10**18 */
#define CAP (16 * 1024)      /* bytes of text kept between two takes */
#define MAX_UESC 4           /* backslash-u escapes a spec may name */

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
    int held_mode;                  /* a text all whitespace, nothing held before: 0 Python's; 1 held here */
    Py_ssize_t held_nparts;         /* ... and what goes out for it: this template (0 parts: nothing) */
    const char *held_part[MAX_PARTS];
    Py_ssize_t held_part_len[MAX_PARTS];
    unsigned char table[256];
    unsigned char chars[256];       /* 1: the string slot's literal may hold the byte */
    char uesc[MAX_UESC][4];         /* backslash-u escapes a literal may hold as they came: 4 hex digits */
    int nuesc;
} Spec;

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

/* Read a template (a tuple of bytes and PART_* ints, at most MAX_PARTS) into parts; `allowed`:
 * the int codes it may hold, as bits (1 << code). */
static int
read_template(PyObject *out, const char **part, Py_ssize_t *part_len, Py_ssize_t *nparts, unsigned allowed)
{
    if (!PyTuple_Check(out) || PyTuple_GET_SIZE(out) > MAX_PARTS)
        return spec_error("spec: a template must be a tuple of at most 16 parts");
    *nparts = PyTuple_GET_SIZE(out);
    for (Py_ssize_t i = 0; i < *nparts; i++) {
        PyObject *o = PyTuple_GET_ITEM(out, i);
        if (PyLong_CheckExact(o)) {
            long code = PyLong_AsLong(o);
            if (code < PART_N || code > PART_STR || !(allowed & (1u << code)))
                return spec_error("spec: bad part code");
            part[i] = NULL;
            part_len[i] = code;
        } else if (bytes_arg(o, &part[i], &part_len[i], "a part") < 0) {
            return -1;
        }
    }
    return 0;
}

/* Read and check a spec tuple into `s` (pointers into the tuple's bytes). May run Python code
 * (a flag's truth test, an int's __index__): nothing is committed here. */
static int
read_spec(PyObject *spec, Spec *s)
{
    PyObject *pre, *mid, *post, *table, *out, *chars, *held = Py_None, *uesc = NULL;
    if (!PyArg_ParseTuple(spec, "OiOOOpOiipO|OO:spec", &pre, &s->slot_pos, &mid, &post, &table, &s->trim, &out,
                          &s->seq_mode, &s->channels, &s->pass_same, &chars, &held, &uesc))
        return -1;
    const char *tbl, *ch = NULL, *ue = NULL;
    Py_ssize_t tbl_len, ch_len = 0, ue_len = 0;
    if (bytes_arg(pre, &s->pre, &s->pre_len, "pre") < 0 || bytes_arg(mid, &s->mid, &s->mid_len, "mid") < 0
        || bytes_arg(post, &s->post, &s->post_len, "post") < 0 || bytes_arg(table, &tbl, &tbl_len, "table") < 0
        || (chars != Py_None && bytes_arg(chars, &ch, &ch_len, "chars") < 0)
        || (uesc != NULL && bytes_arg(uesc, &ue, &ue_len, "escapes") < 0))
        return -1;
    /* The backslash-u escapes a literal may hold as they came: 4 lowercase hex digits each, of
     * printable ASCII but the space, the quote and the backslash (never whitespace: not held). */
    if (ue_len % 4 || ue_len > 4 * MAX_UESC)
        return spec_error("spec: escapes must be at most 4 codes of 4 hex digits");
    s->nuesc = (int)(ue_len / 4);
    for (int k = 0; k < s->nuesc; k++) {
        unsigned v = 0;
        for (int d = 0; d < 4; d++) {
            char c = ue[4 * k + d];
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
                return spec_error("spec: escapes must be lowercase hex digits");
            v = v * 16 + (unsigned)(c <= '9' ? c - '0' : c - 'a' + 10);
        }
        if (v <= 0x20 || v > 0x7e || v == '"' || v == '\\')
            return spec_error("spec: an escape must stand for printable ASCII but the space, quote and backslash");
        memcpy(s->uesc[k], ue + 4 * k, 4);
    }
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
    s->held_mode = held != Py_None;
    s->held_nparts = 0;
    if (s->held_mode) {
        /* What goes out for a text held whole: bytes and the string slot; no text, no number. */
        if (!s->trim)
            return spec_error("spec: a text held whole needs a spec that holds whitespace");
        if (read_template(held, s->held_part, s->held_part_len, &s->held_nparts,
                          s->str_slot ? 1u << PART_STR : 0) < 0)
            return -1;
    }
    s->passthrough = out == Py_None;
    s->nparts = 0;
    if (s->passthrough) {
        if (s->seq_mode != SEQ_NONE || s->trim)
            return spec_error("spec: a numbered event, or a text whose end is held, needs a template");
        return 0;
    }
    unsigned allowed = 1u << PART_BODY;
    if (s->seq_mode != SEQ_NONE)
        allowed |= 1u << PART_N | (s->channels > 1 ? 1u << PART_N1 : 0);
    if (s->str_slot)
        allowed |= 1u << PART_STR;
    return read_template(out, s->part, s->part_len, &s->nparts, allowed);
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

/* A template filled in: its bytes, the held whitespace and the text's body for PART_BODY, the
 * string slot's body for PART_STR, the numbers for PART_N / PART_N1. NULL with an error set. */
static PyObject *
fill(const char *const *part, const Py_ssize_t *part_len, Py_ssize_t nparts, const char *held, Py_ssize_t held_len,
     const char *body, Py_ssize_t body_len, const char *str, Py_ssize_t str_len, const char num[2][24],
     const int num_len[2])
{
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < nparts; i++) {
        Py_ssize_t code = part_len[i];
        total += part[i] ? code : code == PART_BODY ? held_len + body_len : code == PART_STR ? str_len : num_len[code];
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        return NULL;
    char *w = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < nparts; i++) {
        Py_ssize_t code = part_len[i];
        if (part[i]) {
            memcpy(w, part[i], code);
            w += code;
        } else if (code == PART_BODY) {
            if (held_len)
                memcpy(w, held, held_len);
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
    return out;
}

#endif
