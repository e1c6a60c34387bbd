/* kvpure.hashing._chain: the bytes vLLM hashes (see chain.h). Extra keys are encoded
 * with type checks and UTF-8 reads only, so no Python code runs while a caller holds
 * borrowed pointers. */
#include "chain.h"

/* ---------------------------------------------------------------- growable buffer */

int
buf_reserve(Buf *b, size_t more)
{
    if (b->len + more <= b->cap) {
        return OK;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more) {
        cap *= 2;
    }
    unsigned char *data = PyMem_Realloc(b->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return FAILED;
    }
    b->data = data;
    b->cap = cap;
    return OK;
}

int
buf_put(Buf *b, const void *src, size_t n)
{
    if (buf_reserve(b, n) != OK) {
        return FAILED;
    }
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return OK;
}

int
buf_byte(Buf *b, unsigned char c)
{
    return buf_put(b, &c, 1);
}

/* ---------------------------------------------------------------- extra keys */


static int
memo_find(const Memo *memo, PyObject *obj)
{
    for (int i = 0; i < memo->count; i++) {
        if (memo->objects[i] == obj) {
            return i;
        }
    }
    return -1;
}

static int
cbor_float(Buf *b, double x)
{
    unsigned char out[9];
    if (Py_IS_NAN(x)) {
        return buf_put(b, "\xf9\x7e\x00", 3);
    }
    if (PyFloat_Pack2(x, (char *)out + 1, 0) == 0) {
        if (PyFloat_Unpack2((const char *)out + 1, 0) == x) {
            out[0] = 0xf9;
            return buf_put(b, out, 3);
        }
    }
    else {
        PyErr_Clear(); /* too large for half precision: try single */
    }
    if (PyFloat_Pack4(x, (char *)out + 1, 0) == 0) {
        if (PyFloat_Unpack4((const char *)out + 1, 0) == x) {
            out[0] = 0xfa;
            return buf_put(b, out, 5);
        }
    }
    else {
        PyErr_Clear();
    }
    out[0] = 0xfb;
    if (PyFloat_Pack8(x, (char *)out + 1, 0) != 0) {
        return FAILED;
    }
    return buf_put(b, out, 9);
}

/* Canonical CBOR of one extra-keys value (no sharing, no string references: cbor2's
 * defaults). */
int
encode_cbor(Buf *b, PyObject *obj, int depth)
{
    unsigned char head[10];
    if (obj == Py_None) {
        return buf_byte(b, 0xf6);
    }
    if (obj == Py_True || obj == Py_False) {
        return buf_byte(b, obj == Py_True ? 0xf5 : 0xf4);
    }
    if (PyLong_CheckExact(obj)) {
        int64_t v;
        int status = read_int(obj, &v);
        return status != OK ? status : buf_put(b, head, cbor_int(head, v));
    }
    if (PyFloat_CheckExact(obj)) {
        return cbor_float(b, PyFloat_AS_DOUBLE(obj));
    }
    if (PyUnicode_CheckExact(obj)) {
        Py_ssize_t size;
        const char *utf8 = PyUnicode_AsUTF8AndSize(obj, &size);
        if (utf8 == NULL) { /* a lone surrogate: left to the Python path */
            PyErr_Clear();
            return UNSUPPORTED;
        }
        if (buf_put(b, head, cbor_head(head, 3, (uint64_t)size)) != OK) {
            return FAILED;
        }
        return buf_put(b, utf8, (size_t)size);
    }
    if (PyBytes_CheckExact(obj)) {
        Py_ssize_t size = PyBytes_GET_SIZE(obj);
        if (buf_put(b, head, cbor_head(head, 2, (uint64_t)size)) != OK) {
            return FAILED;
        }
        return buf_put(b, PyBytes_AS_STRING(obj), (size_t)size);
    }
    if (PyTuple_CheckExact(obj) && depth < MAX_DEPTH) {
        Py_ssize_t size = PyTuple_GET_SIZE(obj);
        if (buf_put(b, head, cbor_head(head, 4, (uint64_t)size)) != OK) {
            return FAILED;
        }
        for (Py_ssize_t i = 0; i < size; i++) {
            int status = encode_cbor(b, PyTuple_GET_ITEM(obj, i), depth + 1);
            if (status != OK) {
                return status;
            }
        }
        return OK;
    }
    return UNSUPPORTED;
}

/* Writes a memo back-reference (BINGET / LONG_BINGET) if `obj` was memoized, returning 1;
 * 0 if it was not; UNSUPPORTED if it is the parent or the token tuple (the caller's objects,
 * left to the Python path). */
static int
pickle_memo_get(Buf *b, const Memo *memo, PyObject *obj)
{
    int index = memo_find(memo, obj);
    if (index < 0) {
        return 0;
    }
    if (index < 2) {
        return -UNSUPPORTED;
    }
    unsigned char op[2] = {'h', (unsigned char)index}; /* MAX_MEMO keeps it below 256 */
    return buf_put(b, op, 2) == OK ? 1 : FAILED;
}

static int
pickle_memo_put(Buf *b, Memo *memo, PyObject *obj)
{
    if (memo->count >= MAX_MEMO) {
        return UNSUPPORTED;
    }
    memo->objects[memo->count++] = obj;
    return buf_byte(b, 0x94); /* MEMOIZE */
}

/* Pickle protocol 5 of one extra-keys value, as the C pickler writes it inside a payload. */
int
encode_pickle(Buf *b, PyObject *obj, Memo *memo, int depth)
{
    unsigned char head[10];
    if (obj == Py_None) {
        return buf_byte(b, 'N');
    }
    if (obj == Py_True || obj == Py_False) {
        return buf_byte(b, obj == Py_True ? 0x88 : 0x89);
    }
    if (PyLong_CheckExact(obj)) { /* ints and floats are never memoized */
        int64_t v;
        int status = read_int(obj, &v);
        return status != OK ? status : buf_put(b, head, pickle_int(head, v));
    }
    if (PyFloat_CheckExact(obj)) {
        head[0] = 'G'; /* BINFLOAT, big-endian */
        if (PyFloat_Pack8(PyFloat_AS_DOUBLE(obj), (char *)head + 1, 0) != 0) {
            return FAILED;
        }
        return buf_put(b, head, 9);
    }
    int is_str = PyUnicode_CheckExact(obj), is_bytes = PyBytes_CheckExact(obj);
    int is_tuple = PyTuple_CheckExact(obj) && depth < MAX_DEPTH;
    if (!is_str && !is_bytes && !is_tuple) {
        return UNSUPPORTED;
    }
    if (is_tuple && PyTuple_GET_SIZE(obj) == 0) {
        return buf_byte(b, ')'); /* EMPTY_TUPLE, never memoized */
    }
    int seen = pickle_memo_get(b, memo, obj);
    if (seen != 0) {
        return seen == 1 ? OK : (seen == -UNSUPPORTED ? UNSUPPORTED : FAILED);
    }
    if (is_tuple) {
        Py_ssize_t size = PyTuple_GET_SIZE(obj);
        if (size > 3 && buf_byte(b, '(') != OK) { /* MARK */
            return FAILED;
        }
        for (Py_ssize_t i = 0; i < size; i++) {
            int status = encode_pickle(b, PyTuple_GET_ITEM(obj, i), memo, depth + 1);
            if (status != OK) {
                return status;
            }
        }
        static const unsigned char closing[4] = {0, 0x85, 0x86, 0x87}; /* TUPLE1..3 */
        if (buf_byte(b, size > 3 ? 't' : closing[size]) != OK) {
            return FAILED;
        }
        return pickle_memo_put(b, memo, obj);
    }
    const char *data;
    Py_ssize_t size;
    if (is_str) {
        data = PyUnicode_AsUTF8AndSize(obj, &size);
        if (data == NULL) { /* a lone surrogate: pickle writes it, left to Python */
            PyErr_Clear();
            return UNSUPPORTED;
        }
    }
    else {
        data = PyBytes_AS_STRING(obj);
        size = PyBytes_GET_SIZE(obj);
    }
    if (size >= MAX_FRAME) {
        return UNSUPPORTED;
    }
    if (size <= 0xff) { /* SHORT_BINUNICODE / SHORT_BINBYTES */
        head[0] = is_str ? 0x8c : 'C';
        head[1] = (unsigned char)size;
        if (buf_put(b, head, 2) != OK) {
            return FAILED;
        }
    }
    else { /* BINUNICODE / BINBYTES */
        head[0] = is_str ? 'X' : 'B';
        put_le(head + 1, (uint64_t)size, 4);
        if (buf_put(b, head, 5) != OK) {
            return FAILED;
        }
    }
    if (buf_put(b, data, (size_t)size) != OK) {
        return FAILED;
    }
    return pickle_memo_put(b, memo, obj);
}

/* ---------------------------------------------------------------- lookahead extra keys */

/* vLLM's (extra_keys, *all_token_ids[e:e + L]) (get_request_block_hasher with
 * num_hash_lookahead_tokens L): a tuple of 1 + L items. CBOR: an array head, E, the ints.
 * Pickle (inside the payload, after the parent and the token tuple): MARK where the tuple has
 * more than 3 items, E, the ints (never memoized), TUPLE / TUPLE1..3, MEMOIZE. */
size_t
lookahead_extra(int cbor, const unsigned char *e, size_t e_len, const int64_t *tokens,
                Py_ssize_t lookahead, unsigned char *out)
{
    Py_ssize_t size = 1 + lookahead;
    size_t n = 0;
    if (cbor) {
        n += cbor_head(out, 4, (uint64_t)size);
    }
    else if (size > 3) {
        out[n++] = '(';
    }
    memcpy(out + n, e, e_len);
    n += e_len;
    for (Py_ssize_t j = 0; j < lookahead; j++) {
        n += cbor ? cbor_int(out + n, tokens[j]) : pickle_int(out + n, tokens[j]);
    }
    if (!cbor) {
        out[n++] = size > 3 ? 't' : (unsigned char)(0x84 + size);
        out[n++] = 0x94; /* MEMOIZE */
    }
    return n;
}

/* ---------------------------------------------------------------- one block's payload */

size_t
build_payload(int cbor, const unsigned char *parent, size_t parent_len, const int64_t *tokens,
              Py_ssize_t size, const unsigned char *extra, size_t extra_len, unsigned char *out)
{
    size_t n = 0;
    if (cbor) {
        out[n++] = 0x83; /* [parent, tokens, extra_keys] */
        n += cbor_head(out + n, 2, parent_len);
        memcpy(out + n, parent, parent_len);
        n += parent_len;
        n += cbor_head(out + n, 4, (uint64_t)size);
        for (Py_ssize_t i = 0; i < size; i++) {
            n += cbor_int(out + n, tokens[i]);
        }
        memcpy(out + n, extra, extra_len);
        return n + extra_len;
    }
    out[0] = 0x80; /* PROTO 5, then FRAME and its 8-byte length, filled in at the end */
    out[1] = 5;
    out[2] = 0x95;
    n = 11;
    if (parent_len <= 0xff) {
        out[n++] = 'C';
        out[n++] = (unsigned char)parent_len;
    }
    else {
        out[n++] = 'B';
        put_le(out + n, parent_len, 4);
        n += 4;
    }
    memcpy(out + n, parent, parent_len);
    n += parent_len;
    out[n++] = 0x94; /* MEMOIZE (index 0) */
    if (size > 3) {
        out[n++] = '(';
    }
    for (Py_ssize_t i = 0; i < size; i++) {
        n += pickle_int(out + n, tokens[i]);
    }
    out[n++] = size > 3 ? 't' : (unsigned char)(0x84 + size); /* TUPLE or TUPLE1..3 */
    out[n++] = 0x94;                                        /* MEMOIZE (index 1) */
    memcpy(out + n, extra, extra_len);
    n += extra_len;
    out[n++] = 0x87; /* TUPLE3 */
    out[n++] = 0x94;
    out[n++] = '.'; /* STOP */
    put_le(out + 3, n - 11, 8);
    return n;
}
