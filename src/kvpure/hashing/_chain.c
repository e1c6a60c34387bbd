/*
 * kvpure.hashing._chain: the block-hash chain of a prompt in C (optional accelerator).
 *
 * hash_blocks(algo, parent, token_ids, block_size, extra_keys) returns the digest of every
 * block, byte-identical to vLLM's hash_fn((parent_i, tuple(tokens_i), extra_keys[i])) with
 * parent_0 = parent and parent_i the digest of block i - 1; or None for any input it does not
 * handle, and the caller then runs kvpure's pure-Python path.
 *
 *   algo 0 sha256       SHA-256 over pickle protocol 5
 *   algo 1 sha256_cbor  SHA-256 over canonical CBOR (as cbor2.dumps(x, canonical=True))
 *   algo 2 xxhash       XXH3-128 (canonical big-endian digest) over pickle protocol 5
 *   algo 3 xxhash_cbor  XXH3-128 over canonical CBOR
 *
 * Handled: parent an exact bytes; token_ids a list or tuple of exact ints in the signed
 * 64-bit range; extra_keys a list or tuple with, per block, None or a value built of None,
 * bool, exact int (64-bit), exact float, exact str (valid UTF-8), exact bytes and exact
 * tuples (nested up to MAX_DEPTH). Pickle's memo is reproduced exactly: an object met twice
 * in one payload (by identity, such as a tag string shared by two multimodal keys) is
 * written as a back-reference to its first index. Anything else gives None.
 *
 * The work runs in three phases so that no Python code can run while borrowed pointers are
 * in use: (1) every token is read into a C array, (2) every block's extra keys are encoded
 * into one buffer (no callbacks: only type checks and UTF-8 reads), (3) the chain loop reads
 * C memory only; its one possible callback is the Python xxhash function where the native
 * XXH3 is not available.
 *
 * SHA-256 is OpenSSL's SHA256_Init/Update/Final (measured on OpenSSL 3.0: 127 ns for a 90-byte
 * payload, against 800 ns for its one-shot SHA256(), which fetches the algorithm per call, and
 * 214 ns through EVP with a fetched digest); where a build of OpenSSL lacks the deprecated
 * low-level calls, EVP with the digest fetched once. XXH3-128 is taken from the shared library
 * libxxhash.so.0 (Debian's libxxhash0) through dlopen where it is installed and passes a
 * self-check against the xxhash package at init; else the package's xxh3_128_digest is
 * called through the CPython API.
 */
#define PY_SSIZE_T_CLEAN
#define OPENSSL_SUPPRESS_DEPRECATED /* SHA256_Init & co.: 6x faster than SHA256() in 3.0 */
#include <Python.h>
#include <dlfcn.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <string.h>

#define MAX_DEPTH 16
#define MAX_MEMO 256
#define MAX_FRAME 60000 /* pickle splits frames at 64 KiB; stay well below */

enum { ALGO_SHA256 = 0, ALGO_SHA256_CBOR = 1, ALGO_XXHASH = 2, ALGO_XXHASH_CBOR = 3 };
enum { OK = 0, FAILED = -1, UNSUPPORTED = 1 };

/* ---------------------------------------------------------------- growable buffer */

typedef struct {
    unsigned char *data;
    size_t len;
    size_t cap;
} Buf;

static int
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

static int
buf_put(Buf *b, const void *src, size_t n)
{
    if (buf_reserve(b, n) != OK) {
        return FAILED;
    }
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return OK;
}

static int
buf_byte(Buf *b, unsigned char c)
{
    return buf_put(b, &c, 1);
}

/* ---------------------------------------------------------------- CBOR and pickle atoms */

/* The shortest CBOR head of `major` carrying `value`; returns its length (at most 9). */
static inline size_t
cbor_head(unsigned char *out, unsigned major, uint64_t value)
{
    unsigned char tag = (unsigned char)(major << 5);
    if (value < 24) {
        out[0] = tag | (unsigned char)value;
        return 1;
    }
    if (value < 0x100) {
        out[0] = tag | 24;
        out[1] = (unsigned char)value;
        return 2;
    }
    if (value < 0x10000) {
        out[0] = tag | 25;
        out[1] = (unsigned char)(value >> 8);
        out[2] = (unsigned char)value;
        return 3;
    }
    if (value < 0x100000000ULL) {
        out[0] = tag | 26;
        for (int i = 0; i < 4; i++) {
            out[1 + i] = (unsigned char)(value >> (24 - 8 * i));
        }
        return 5;
    }
    out[0] = tag | 27;
    for (int i = 0; i < 8; i++) {
        out[1 + i] = (unsigned char)(value >> (56 - 8 * i));
    }
    return 9;
}

static inline size_t
cbor_int(unsigned char *out, int64_t v)
{
    return v >= 0 ? cbor_head(out, 0, (uint64_t)v) : cbor_head(out, 1, ~(uint64_t)v);
}

static inline void
put_le(unsigned char *out, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) {
        out[i] = (unsigned char)(v >> (8 * i));
    }
}

/* Pickle's encoding of an int (at most 10 bytes): BININT1 / BININT2 / BININT for what fits
 * in 32 signed bits, else LONG1 with the fewest little-endian two's-complement bytes, as
 * the C pickler chooses them. */
static inline size_t
pickle_int(unsigned char *out, int64_t v)
{
    if (v >= 0 && v <= 0xff) {
        out[0] = 'K';
        out[1] = (unsigned char)v;
        return 2;
    }
    if (v >= 0 && v <= 0xffff) {
        out[0] = 'M';
        put_le(out + 1, (uint64_t)v, 2);
        return 3;
    }
    if (v >= INT32_MIN && v <= INT32_MAX) {
        out[0] = 'J';
        put_le(out + 1, (uint64_t)v, 4);
        return 5;
    }
    /* nbytes = bit_length(|v|) // 8 + 1, then one byte less for a negative value whose
     * top byte is only sign bits (0xff above a byte with its high bit set). */
    uint64_t magnitude = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    int nbits = 64 - __builtin_clzll(magnitude);
    int nbytes = nbits / 8 + 1;
    unsigned char bytes[9];
    for (int i = 0; i < 9; i++) {
        bytes[i] = i < 8 ? (unsigned char)((uint64_t)v >> (8 * i)) : (v < 0 ? 0xff : 0);
    }
    if (v < 0 && nbytes > 1 && bytes[nbytes - 1] == 0xff && (bytes[nbytes - 2] & 0x80)) {
        nbytes--;
    }
    out[0] = 0x8a; /* LONG1 */
    out[1] = (unsigned char)nbytes;
    memcpy(out + 2, bytes, (size_t)nbytes);
    return (size_t)nbytes + 2;
}

/* An exact int's value if it fits in 64 signed bits. */
static inline int
read_int(PyObject *obj, int64_t *out)
{
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow) {
        return UNSUPPORTED;
    }
    if (v == -1 && PyErr_Occurred()) {
        return FAILED;
    }
    *out = (int64_t)v;
    return OK;
}

/* ---------------------------------------------------------------- extra keys */

typedef struct {
    PyObject *objects[MAX_MEMO]; /* pickle memo by identity; [0] parent, [1] tokens */
    int count;
} Memo;

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
static int
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
static int
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

/* ---------------------------------------------------------------- SHA-256 */

#ifdef OPENSSL_NO_DEPRECATED_3_0
static EVP_MD *sha256_md = NULL; /* fetched at import */
#endif

static int
sha256_digest(const unsigned char *data, size_t len, unsigned char *md)
{
#ifndef OPENSSL_NO_DEPRECATED_3_0
    SHA256_CTX ctx;
    if (SHA256_Init(&ctx) && SHA256_Update(&ctx, data, len) && SHA256_Final(md, &ctx)) {
        return OK;
    }
#else
    unsigned int size;
    if (EVP_Digest(data, len, md, &size, sha256_md, NULL)) {
        return OK;
    }
#endif
    PyErr_SetString(PyExc_RuntimeError, "OpenSSL's SHA-256 failed");
    return FAILED;
}

/* ---------------------------------------------------------------- XXH3-128 */

typedef struct {
    uint64_t low64;
    uint64_t high64;
} Xxh128; /* the layout of libxxhash's XXH128_hash_t (its public ABI) */

typedef Xxh128 (*Xxh3_128_fn)(const void *data, size_t len);

static Xxh3_128_fn native_xxh3 = NULL; /* libxxhash.so.0's XXH3_128bits, once checked */
static Xxh3_128_fn loaded_xxh3 = NULL; /* the same, kept while native use is switched off */
static PyObject *python_xxh3 = NULL;   /* xxhash.xxh3_128_digest */

static void
xxh3_native_digest(Xxh3_128_fn fn, const unsigned char *data, size_t len, unsigned char *md)
{
    Xxh128 h = fn(data, len);
    for (int i = 0; i < 8; i++) { /* canonical form: high half, then low, big-endian */
        md[i] = (unsigned char)(h.high64 >> (56 - 8 * i));
        md[8 + i] = (unsigned char)(h.low64 >> (56 - 8 * i));
    }
}

/* The 16-byte digest through the Python function; FAILED with an exception set. */
static int
xxh3_python_digest(const unsigned char *data, size_t len, unsigned char *md)
{
    PyObject *arg = PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)len);
    if (arg == NULL) {
        return FAILED;
    }
    PyObject *result = PyObject_Vectorcall(python_xxh3, &arg, 1, NULL);
    Py_DECREF(arg);
    if (result == NULL) {
        return FAILED;
    }
    if (!PyBytes_Check(result) || PyBytes_GET_SIZE(result) != 16) {
        Py_DECREF(result);
        PyErr_SetString(PyExc_RuntimeError, "xxh3_128_digest did not return 16 bytes");
        return FAILED;
    }
    memcpy(md, PyBytes_AS_STRING(result), 16);
    Py_DECREF(result);
    return OK;
}

/* Whether `fn` agrees with the Python function on inputs of every size class XXH3 has
 * (0, 1-3, 4-8, 9-16, 17-128, 129-240, longer, several stripes). FAILED on an error. */
static int
xxh3_native_agrees(Xxh3_128_fn fn)
{
    static const size_t sizes[] = {0, 1, 3, 4, 8, 9, 16, 17, 90, 128, 129, 240, 241, 1000, 5000};
    unsigned char data[5000], expected[16], got[16];
    for (size_t i = 0; i < sizeof(data); i++) {
        data[i] = (unsigned char)(i * 131 + 7);
    }
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        if (xxh3_python_digest(data, sizes[k], expected) != OK) {
            return FAILED;
        }
        xxh3_native_digest(fn, data, sizes[k], got);
        if (memcmp(expected, got, 16) != 0) {
            return 0;
        }
    }
    return 1;
}

static PyObject *
route_name(void)
{
    return PyUnicode_FromString(native_xxh3 != NULL ? "native" : "python");
}

/* init_xxhash(xxh3_128_digest) -> "native" | "python": keeps the Python function and loads
 * libxxhash.so.0 if it is installed and agrees with it. */
static PyObject *
init_xxhash(PyObject *self, PyObject *fn)
{
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "init_xxhash expects xxhash.xxh3_128_digest");
        return NULL;
    }
    Py_INCREF(fn);
    Py_XSETREF(python_xxh3, fn);
    native_xxh3 = loaded_xxh3 = NULL;
    void *library = dlopen("libxxhash.so.0", RTLD_NOW | RTLD_LOCAL);
    if (library != NULL) {
        Xxh3_128_fn candidate = (Xxh3_128_fn)dlsym(library, "XXH3_128bits");
        int agrees = candidate != NULL ? xxh3_native_agrees(candidate) : 0;
        if (agrees == FAILED) {
            return NULL;
        }
        if (agrees) {
            native_xxh3 = loaded_xxh3 = candidate; /* the library stays loaded */
        }
        else {
            dlclose(library);
        }
    }
    return route_name();
}

/* set_native_xxhash(enabled) -> the route now in use (tests and benchmarks use both). */
static PyObject *
set_native_xxhash(PyObject *self, PyObject *flag)
{
    int enabled = PyObject_IsTrue(flag);
    if (enabled < 0) {
        return NULL;
    }
    native_xxh3 = enabled ? loaded_xxh3 : NULL;
    return route_name();
}

static PyObject *
xxhash_route(PyObject *self, PyObject *unused)
{
    return route_name();
}

/* ---------------------------------------------------------------- the chain */

typedef struct {
    int algo;
    int cbor;
    size_t digest_size;
    Py_ssize_t block_size;
    Py_ssize_t num_blocks;
    int64_t *tokens;     /* num_blocks * block_size values */
    Buf extras;          /* every block's encoded extra keys, back to back */
    size_t *extra_start; /* per block: offset and length in `extras` */
    size_t *extra_len;
    size_t max_extra;
} Chain;

static void
chain_free(Chain *c)
{
    PyMem_Free(c->tokens);
    PyMem_Free(c->extras.data);
    PyMem_Free(c->extra_start);
    PyMem_Free(c->extra_len);
}

/* Phase 1: every token's value. */
static int
read_tokens(Chain *c, PyObject *token_ids)
{
    Py_ssize_t count = c->num_blocks * c->block_size;
    PyObject **items = PySequence_Fast_ITEMS(token_ids);
    c->tokens = PyMem_Malloc(sizeof(int64_t) * (size_t)(count ? count : 1));
    if (c->tokens == NULL) {
        PyErr_NoMemory();
        return FAILED;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = items[i];
        if (!PyLong_CheckExact(item)) {
            return UNSUPPORTED;
        }
        int status = read_int(item, &c->tokens[i]);
        if (status != OK) {
            return status;
        }
    }
    return OK;
}

/* Phase 2: every block's extra keys, each run of the same object encoded once. */
static int
encode_extras(Chain *c, PyObject *extras, PyObject *parent, PyObject *token_ids)
{
    Py_ssize_t n = c->num_blocks;
    PyObject **items = PySequence_Fast_ITEMS(extras);
    c->extra_start = PyMem_Malloc(sizeof(size_t) * (size_t)n);
    c->extra_len = PyMem_Malloc(sizeof(size_t) * (size_t)n);
    if (c->extra_start == NULL || c->extra_len == NULL) {
        PyErr_NoMemory();
        return FAILED;
    }
    /* Block 0's tokens are the caller's tuple itself where it is exactly one block (as
     * tuple(t[0:len(t)]) is t); a later block's parent and tokens are new objects. */
    int whole_tuple = PyTuple_CheckExact(token_ids) && PyTuple_GET_SIZE(token_ids) == c->block_size;
    Memo memo;
    PyObject *previous = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *extra = items[i];
        if (i > 0 && extra == previous) {
            c->extra_start[i] = c->extra_start[i - 1];
            c->extra_len[i] = c->extra_len[i - 1];
            continue;
        }
        size_t start = c->extras.len;
        int status;
        if (c->cbor) {
            status = encode_cbor(&c->extras, extra, 0);
        }
        else {
            memo.objects[0] = i == 0 ? parent : NULL;
            memo.objects[1] = i == 0 && whole_tuple ? token_ids : NULL;
            memo.count = 2;
            status = encode_pickle(&c->extras, extra, &memo, 0);
        }
        if (status != OK) {
            return status;
        }
        c->extra_start[i] = start;
        c->extra_len[i] = c->extras.len - start;
        if (c->extra_len[i] > c->max_extra) {
            c->max_extra = c->extra_len[i];
        }
        previous = extra;
    }
    return OK;
}

/* One payload into `out` (big enough); returns its length. */
static size_t
build_payload(const Chain *c, Py_ssize_t block, const unsigned char *parent, size_t parent_len,
              unsigned char *out)
{
    const int64_t *tokens = c->tokens + block * c->block_size;
    Py_ssize_t size = c->block_size;
    const unsigned char *extra = c->extras.data + c->extra_start[block];
    size_t extra_len = c->extra_len[block];
    size_t n = 0;
    if (c->cbor) {
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

/* Phase 3: the chain. Returns a new list, or NULL with an exception set. */
static PyObject *
run_chain(const Chain *c, PyObject *parent, unsigned char *payload)
{
    PyObject *result = PyList_New(c->num_blocks);
    if (result == NULL) {
        return NULL;
    }
    unsigned char md[32];
    const unsigned char *previous = (const unsigned char *)PyBytes_AS_STRING(parent);
    size_t previous_len = (size_t)PyBytes_GET_SIZE(parent);
    for (Py_ssize_t i = 0; i < c->num_blocks; i++) {
        size_t n = build_payload(c, i, previous, previous_len, payload);
        if (c->algo == ALGO_SHA256 || c->algo == ALGO_SHA256_CBOR) {
            if (sha256_digest(payload, n, md) != OK) {
                Py_DECREF(result);
                return NULL;
            }
        }
        else if (native_xxh3 != NULL) {
            xxh3_native_digest(native_xxh3, payload, n, md);
        }
        else if (xxh3_python_digest(payload, n, md) != OK) {
            Py_DECREF(result);
            return NULL;
        }
        PyObject *digest = PyBytes_FromStringAndSize((const char *)md, (Py_ssize_t)c->digest_size);
        if (digest == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        PyList_SET_ITEM(result, i, digest);
        previous = (const unsigned char *)PyBytes_AS_STRING(digest);
        previous_len = c->digest_size;
    }
    return result;
}

/* hash_blocks(algo, parent, token_ids, block_size, extra_keys) -> list[bytes] | None */
static PyObject *
hash_blocks(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "hash_blocks takes 5 arguments");
        return NULL;
    }
    PyObject *parent = args[1], *token_ids = args[2], *extras = args[4];
    int algo = PyLong_CheckExact(args[0]) ? (int)PyLong_AsLong(args[0]) : -1;
    Py_ssize_t block_size = PyLong_CheckExact(args[3]) ? PyLong_AsSsize_t(args[3]) : -1;
    if (PyErr_Occurred()) {
        PyErr_Clear(); /* an out-of-range number: not handled here */
        Py_RETURN_NONE;
    }
    if (algo < ALGO_SHA256 || algo > ALGO_XXHASH_CBOR || block_size < 1 ||
        !PyBytes_CheckExact(parent) || !(PyList_CheckExact(token_ids) || PyTuple_CheckExact(token_ids)) ||
        !(PyList_CheckExact(extras) || PyTuple_CheckExact(extras)) ||
        ((algo == ALGO_XXHASH || algo == ALGO_XXHASH_CBOR) && python_xxh3 == NULL)) {
        Py_RETURN_NONE;
    }
    Chain c = {0};
    c.algo = algo;
    c.cbor = algo == ALGO_SHA256_CBOR || algo == ALGO_XXHASH_CBOR;
    c.digest_size = algo == ALGO_SHA256 || algo == ALGO_SHA256_CBOR ? 32 : 16;
    c.block_size = block_size;
    c.num_blocks = PySequence_Fast_GET_SIZE(extras);
    if (c.num_blocks > 0 && block_size > PySequence_Fast_GET_SIZE(token_ids) / c.num_blocks) {
        Py_RETURN_NONE; /* too few tokens: the Python path raises kvpure's error */
    }
    PyObject *result = NULL;
    unsigned char *payload = NULL;
    int status = read_tokens(&c, token_ids);
    if (status == OK) {
        status = encode_extras(&c, extras, parent, token_ids);
    }
    if (status == OK) {
        size_t parent_len = (size_t)PyBytes_GET_SIZE(parent);
        size_t longest = (parent_len > 32 ? parent_len : 32) + 10 * (size_t)block_size +
                         c.max_extra + 32;
        if (!c.cbor && longest >= MAX_FRAME) {
            status = UNSUPPORTED; /* the pickler might split its frame */
        }
        else if ((payload = PyMem_Malloc(longest)) == NULL) {
            PyErr_NoMemory();
            status = FAILED;
        }
        else {
            result = run_chain(&c, parent, payload);
            status = result == NULL ? FAILED : OK;
        }
    }
    PyMem_Free(payload);
    chain_free(&c);
    if (status == UNSUPPORTED) {
        Py_RETURN_NONE;
    }
    return result;
}

static PyMethodDef chain_methods[] = {
    {"hash_blocks", (PyCFunction)(void (*)(void))hash_blocks, METH_FASTCALL,
     "hash_blocks(algo, parent, token_ids, block_size, extra_keys) -> list[bytes] | None"},
    {"init_xxhash", init_xxhash, METH_O, "init_xxhash(xxh3_128_digest) -> 'native' | 'python'"},
    {"set_native_xxhash", set_native_xxhash, METH_O,
     "set_native_xxhash(enabled) -> the XXH3 route now in use"},
    {"xxhash_route", xxhash_route, METH_NOARGS, "xxhash_route() -> 'native' | 'python'"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef chain_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_chain",
    .m_doc = "kvpure's optional C block-hash chain.",
    .m_size = -1,
    .m_methods = chain_methods,
};

PyMODINIT_FUNC
PyInit__chain(void)
{
#ifdef OPENSSL_NO_DEPRECATED_3_0
    if (sha256_md == NULL && (sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL)) == NULL) {
        PyErr_SetString(PyExc_ImportError, "OpenSSL has no SHA-256");
        return NULL;
    }
#endif
    return PyModule_Create(&chain_module);
}
