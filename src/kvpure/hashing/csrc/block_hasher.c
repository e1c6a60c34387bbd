/* kvpure.hashing._chain: one block at a time (decoding).
 *
 * BlockHasher: what one_block_hasher(algo, block_size, extra_keys, fallback) returns, a
 * callable f(parent, tokens) -> digest for blocks whose extra keys are fixed (a request's
 * blocks past its multimodal items). The extra keys are encoded once; a call reads the
 * tokens, builds the payload and hashes it in C. Anything it does not handle (see chain.h;
 * also a token sequence that is not a list or tuple of block_size, the parent or the token
 * tuple being an object the extra keys' pickle memo holds, a payload near pickle's frame
 * size, the accelerator switched off) is handed to `fallback`, kvpure's Python hasher with
 * the same contract.
 */
#include "chain.h"

#include <stddef.h>

#define STACK_TOKENS 512
#define STACK_PAYLOAD 8192

/* ---------------------------------------------------------------- BlockHasher */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    int algo;
    Py_ssize_t block_size;
    Py_ssize_t lookahead; /* L: calls pass block_size + L tokens, the extra keys (E, t...) */
    PyObject *extra_keys; /* held, so that the identities in `memo` stay valid */
    PyObject *fallback;   /* the Python one-block hasher */
    Buf extra;            /* the extra keys, encoded once */
    Memo *memo;           /* pickle: what the extra keys memoized ([0], [1] left empty) */
} BlockHasher;

static PyObject *
hasher_fallback(BlockHasher *h, PyObject *parent, PyObject *tokens)
{
    PyObject *args[2] = {parent, tokens};
    return PyObject_Vectorcall(h->fallback, args, 2, NULL);
}

static int
memo_holds(const Memo *memo, PyObject *obj)
{
    for (int i = 0; i < memo->count; i++) {
        if (memo->objects[i] == obj) {
            return 1;
        }
    }
    return 0;
}

/* Reads the block's tokens: OK, UNSUPPORTED (not exact ints in 64 bits) or FAILED. */
static int
read_block(PyObject *tokens, Py_ssize_t size, int64_t *out)
{
    PyObject **items = PySequence_Fast_ITEMS(tokens);
    for (Py_ssize_t i = 0; i < size; i++) {
        if (!PyLong_CheckExact(items[i])) {
            return UNSUPPORTED;
        }
        int status = read_int(items[i], &out[i]);
        if (status != OK) {
            return status;
        }
    }
    return OK;
}

/* One block's digest (a new reference), or NULL with an exception set. */
PyObject *
hasher_digest(PyObject *self, PyObject *parent, PyObject *tokens)
{
    BlockHasher *h = (BlockHasher *)self;
    Py_ssize_t size = h->block_size, lookahead = h->lookahead;
    if (!accel_enabled || !PyBytes_CheckExact(parent) ||
        !(PyTuple_CheckExact(tokens) || PyList_CheckExact(tokens)) ||
        PySequence_Fast_GET_SIZE(tokens) != size + lookahead || !digest_ready(h->algo) ||
        (h->memo != NULL && (memo_holds(h->memo, parent) || memo_holds(h->memo, tokens)))) {
        return hasher_fallback(h, parent, tokens);
    }
    int cbor = algo_uses_cbor(h->algo);
    size_t parent_len = (size_t)PyBytes_GET_SIZE(parent);
    size_t extra_bound = lookahead ? lookahead_extra_bound(h->extra.len, lookahead) : 0;
    size_t bound = payload_bound(parent_len, size, h->extra.len + extra_bound);
    if (!cbor && bound >= MAX_FRAME) {
        return hasher_fallback(h, parent, tokens); /* the pickler might split its frame */
    }
    Py_ssize_t count = size + lookahead;
    int64_t stack_tokens[STACK_TOKENS];
    unsigned char stack_payload[STACK_PAYLOAD];
    int64_t *values =
        count <= STACK_TOKENS ? stack_tokens : PyMem_Malloc(sizeof(int64_t) * (size_t)count);
    /* the payload, then (with lookahead) this block's extra keys after it */
    unsigned char *payload =
        bound + extra_bound <= STACK_PAYLOAD ? stack_payload : PyMem_Malloc(bound + extra_bound);
    PyObject *result = NULL;
    int status = FAILED;
    if (values == NULL || payload == NULL) {
        PyErr_NoMemory();
    }
    else if ((status = read_block(tokens, count, values)) == OK) {
        unsigned char md[32];
        const unsigned char *extra = h->extra.data;
        size_t extra_len = h->extra.len;
        if (lookahead) {
            unsigned char *keys = payload + bound;
            extra_len = lookahead_extra(cbor, h->extra.data, h->extra.len, values + size,
                                        lookahead, keys);
            extra = keys;
        }
        size_t n = build_payload(cbor, (const unsigned char *)PyBytes_AS_STRING(parent),
                                 parent_len, values, size, extra, extra_len, payload);
        if (block_digest(h->algo, payload, n, md) == OK) {
            result = PyBytes_FromStringAndSize((const char *)md, (Py_ssize_t)digest_size(h->algo));
        }
    }
    if (values != stack_tokens) {
        PyMem_Free(values);
    }
    if (payload != stack_payload) {
        PyMem_Free(payload);
    }
    return status == UNSUPPORTED ? hasher_fallback(h, parent, tokens) : result;
}

static PyObject *
hasher_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    BlockHasher *h = (BlockHasher *)self;
    if (PyVectorcall_NARGS(nargsf) != 2 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        return PyObject_Vectorcall(h->fallback, args, nargsf, kwnames); /* its own error */
    }
    return hasher_digest(self, args[0], args[1]);
}

static int
hasher_traverse(BlockHasher *h, visitproc visit, void *arg)
{
    Py_VISIT(h->extra_keys);
    Py_VISIT(h->fallback);
    return 0;
}

static int
hasher_clear(BlockHasher *h)
{
    Py_CLEAR(h->extra_keys);
    Py_CLEAR(h->fallback);
    return 0;
}

static void
hasher_dealloc(BlockHasher *h)
{
    PyObject_GC_UnTrack(h);
    hasher_clear(h);
    PyMem_Free(h->extra.data);
    PyMem_Free(h->memo);
    PyObject_GC_Del(h);
}

PyTypeObject BlockHasherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kvpure.hashing._chain.BlockHasher",
    .tp_basicsize = sizeof(BlockHasher),
    .tp_dealloc = (destructor)hasher_dealloc,
    .tp_vectorcall_offset = offsetof(BlockHasher, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "f(parent, tokens) -> one block's digest, its extra keys encoded once.",
    .tp_traverse = (traverseproc)hasher_traverse,
    .tp_clear = (inquiry)hasher_clear,
};

/* one_block_hasher(algo, block_size, extra_keys, fallback[, lookahead]) -> BlockHasher | None
 *
 * With lookahead L > 0 the hasher takes block_size + L tokens: it hashes the first block_size
 * with the extra keys (extra_keys, the L others), as vLLM 0.33+ hashes a block with
 * num_hash_lookahead_tokens L; extra_keys (E) is encoded once. */
PyObject *
one_block_hasher(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if ((nargs != 4 && nargs != 5) || !PyCallable_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "one_block_hasher(algo, block_size, extra_keys, fallback[, lookahead])");
        return NULL;
    }
    Py_ssize_t lookahead = nargs == 5 && PyLong_CheckExact(args[4]) ? PyLong_AsSsize_t(args[4])
                           : nargs == 5                               ? -1
                                                                      : 0;
    int algo = PyLong_CheckExact(args[0]) ? (int)PyLong_AsLong(args[0]) : -1;
    Py_ssize_t block_size = PyLong_CheckExact(args[1]) ? PyLong_AsSsize_t(args[1]) : -1;
    if (PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (algo < ALGO_SHA256 || algo > ALGO_XXHASH_CBOR || block_size < 1 || lookahead < 0 ||
        lookahead > 65536) {
        Py_RETURN_NONE;
    }
    BlockHasher *h = PyObject_GC_New(BlockHasher, &BlockHasherType);
    if (h == NULL) {
        return NULL;
    }
    h->vectorcall = hasher_vectorcall;
    h->algo = algo;
    h->block_size = block_size;
    h->lookahead = lookahead;
    h->extra_keys = Py_NewRef(args[2]);
    h->fallback = Py_NewRef(args[3]);
    h->extra = (Buf){0};
    h->memo = NULL;
    int status;
    if (algo_uses_cbor(algo)) {
        status = encode_cbor(&h->extra, h->extra_keys, 0);
    }
    else if ((h->memo = PyMem_Calloc(1, sizeof(Memo))) == NULL) {
        PyErr_NoMemory();
        status = FAILED;
    }
    else {
        h->memo->count = 2; /* the parent's and the token tuple's places, never matched */
        status = encode_pickle(&h->extra, h->extra_keys, h->memo, 0);
    }
    PyObject_GC_Track(h);
    if (status != OK) {
        Py_DECREF(h);
        if (status == FAILED) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    return (PyObject *)h;
}
