/* kvpure.hashing._chain: a prompt's chain, and the module.
 *
 * hash_blocks(algo, parent, token_ids, block_size, extra_keys) returns the digest of every
 * block, byte-identical to vLLM's hash_fn((parent_i, tuple(tokens_i), extra_keys[i])) with
 * parent_0 = parent and parent_i the digest of block i - 1; or None for any input it does
 * not handle (see chain.h), and the caller then runs kvpure's pure-Python path. token_ids and
 * extra_keys are lists or tuples.
 *
 * The work runs in three phases so that no Python code can run while borrowed pointers are
 * in use: (1) every token is read into a C array, (2) every block's extra keys are encoded
 * into one buffer (no callbacks: only type checks and UTF-8 reads), (3) the chain loop reads
 * C memory only; its one possible callback is the Python xxhash function where the native
 * XXH3 is not available.
 */
#include "chain.h"

int accel_enabled = 1;

#define SMALL_TOKENS 512
#define SMALL_BLOCKS 16
#define SMALL_PAYLOAD 8192

/* ---------------------------------------------------------------- the chain */

typedef struct {
    int algo;
    int cbor;
    size_t digest_size;
    Py_ssize_t block_size;
    Py_ssize_t num_blocks;
    Py_ssize_t lookahead; /* L: each block's extra keys also hold the L tokens after it */
    int64_t *tokens;     /* num_blocks * block_size + lookahead values */
    Buf extras;          /* every block's encoded extra keys, back to back */
    size_t *extra_start; /* per block: offset and length in `extras` */
    size_t *extra_len;
    size_t max_extra;
    /* a few blocks (decoding) use these instead of the heap */
    int64_t small_tokens[SMALL_TOKENS];
    size_t small_start[SMALL_BLOCKS];
    size_t small_len[SMALL_BLOCKS];
} Chain;

static void
chain_free(Chain *c)
{
    if (c->tokens != c->small_tokens) {
        PyMem_Free(c->tokens);
    }
    PyMem_Free(c->extras.data);
    if (c->extra_start != c->small_start) {
        PyMem_Free(c->extra_start);
        PyMem_Free(c->extra_len);
    }
}

/* Phase 1: every token's value. */
static int
read_tokens(Chain *c, PyObject *token_ids)
{
    Py_ssize_t count = c->num_blocks * c->block_size + (c->num_blocks ? c->lookahead : 0);
    PyObject **items = PySequence_Fast_ITEMS(token_ids);
    c->tokens = count <= SMALL_TOKENS ? c->small_tokens
                                      : PyMem_Malloc(sizeof(int64_t) * (size_t)count);
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

/* Phase 2 with lookahead: `items` are each block's E; block i's keys are (E_i, the L tokens
 * after it). Each run of the same E object is encoded once. */
static int
encode_lookahead_extras(Chain *c, PyObject **items, PyObject *parent)
{
    Buf e = {0};
    PyObject *previous = NULL;
    Memo memo;
    int status = OK;
    for (Py_ssize_t i = 0; i < c->num_blocks && status == OK; i++) {
        PyObject *extra = items[i];
        if (i == 0 || extra != previous) {
            e.len = 0;
            if (c->cbor) {
                status = encode_cbor(&e, extra, 0);
            }
            else {
                memo.objects[0] = i == 0 ? parent : NULL;
                memo.objects[1] = NULL; /* the block's token tuple is always a new one */
                memo.count = 2;
                status = encode_pickle(&e, extra, &memo, 0);
            }
            previous = extra;
            if (status != OK) {
                break;
            }
        }
        size_t start = c->extras.len;
        if (buf_reserve(&c->extras, lookahead_extra_bound(e.len, c->lookahead)) != OK) {
            status = FAILED;
            break;
        }
        c->extras.len += lookahead_extra(c->cbor, e.data, e.len,
                                         c->tokens + (i + 1) * c->block_size, c->lookahead,
                                         c->extras.data + start);
        c->extra_start[i] = start;
        c->extra_len[i] = c->extras.len - start;
        if (c->extra_len[i] > c->max_extra) {
            c->max_extra = c->extra_len[i];
        }
    }
    PyMem_Free(e.data);
    return status;
}

/* Phase 2: every block's extra keys, each run of the same object encoded once. */
static int
encode_extras(Chain *c, PyObject **items, PyObject *parent, PyObject *token_ids)
{
    Py_ssize_t n = c->num_blocks;
    if (n <= SMALL_BLOCKS) {
        c->extra_start = c->small_start;
        c->extra_len = c->small_len;
    }
    else {
        c->extra_start = PyMem_Malloc(sizeof(size_t) * (size_t)n);
        c->extra_len = PyMem_Malloc(sizeof(size_t) * (size_t)n);
    }
    if (c->extra_start == NULL || c->extra_len == NULL) {
        PyErr_NoMemory();
        return FAILED;
    }
    /* Block 0's tokens are the caller's tuple itself where it is exactly one block (as
     * tuple(t[0:len(t)]) is t); a later block's parent and tokens are new objects. */
    int whole_tuple = PyTuple_CheckExact(token_ids) && PyTuple_GET_SIZE(token_ids) == c->block_size;
    Memo memo;
    PyObject *previous = NULL;
    if (c->lookahead > 0) {
        return encode_lookahead_extras(c, items, parent);
    }
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
        size_t n = build_payload(c->cbor, previous, previous_len, c->tokens + i * c->block_size,
                                 c->block_size, c->extras.data + c->extra_start[i],
                                 c->extra_len[i], payload);
        if (block_digest(c->algo, payload, n, md) != OK) {
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

/* An algorithm's code from its name (a str, or a str enum member); -1 for anything else. */
static int
algo_code(PyObject *name)
{
    static const char *names[] = {"sha256", "sha256_cbor", "xxhash", "xxhash_cbor"};
    if (!PyUnicode_Check(name)) {
        return -1;
    }
    for (int code = 0; code < 4; code++) {
        if (PyUnicode_CompareWithASCIIString(name, names[code]) == 0) {
            return code;
        }
    }
    return -1;
}

/* The digests of `num_blocks` blocks of `token_ids` (a list or tuple) with the extra keys
 * `extras` (one borrowed object per block): a new list, None (not handled) or NULL. */
static PyObject *
hash_chain(int algo, PyObject *parent, PyObject *token_ids, Py_ssize_t block_size,
           Py_ssize_t num_blocks, PyObject **extras, Py_ssize_t lookahead)
{
    if (!accel_enabled || algo < ALGO_SHA256 || algo > ALGO_XXHASH_CBOR || block_size < 1 ||
        lookahead < 0 || !PyBytes_CheckExact(parent) ||
        !(PyList_CheckExact(token_ids) || PyTuple_CheckExact(token_ids)) || !digest_ready(algo)) {
        Py_RETURN_NONE;
    }
    Chain c; /* not zeroed whole: the small arrays are written before they are read */
    c.tokens = NULL;
    c.extras = (Buf){0};
    c.extra_start = c.extra_len = NULL;
    c.max_extra = 0;
    c.algo = algo;
    c.cbor = algo_uses_cbor(algo);
    c.digest_size = digest_size(algo);
    c.block_size = block_size;
    c.num_blocks = num_blocks;
    c.lookahead = lookahead;
    if (c.num_blocks > 0 &&
        (block_size > (PySequence_Fast_GET_SIZE(token_ids) - lookahead) / c.num_blocks ||
         PySequence_Fast_GET_SIZE(token_ids) < lookahead)) {
        Py_RETURN_NONE; /* too few tokens: the Python path raises kvpure's error */
    }
    PyObject *result = NULL;
    unsigned char small_payload[SMALL_PAYLOAD];
    unsigned char *payload = NULL;
    int status;
    if (lookahead == 0) { /* the extra keys first: the laid-out chain needs no token array */
        status = encode_extras(&c, extras, parent, token_ids);
        if (status == OK) {
            Prelaid laid = {.algo = algo,
                            .cbor = c.cbor,
                            .block_size = block_size,
                            .num_blocks = c.num_blocks,
                            .extras = c.extras.data,
                            .extra_start = c.extra_start,
                            .extra_len = c.extra_len};
            status = prelaid_chain(&laid, parent, token_ids, &result);
            if (status == UNSUPPORTED) { /* a token it does not handle: the general path */
                status = read_tokens(&c, token_ids);
            }
            else {
                chain_free(&c);
                return status == OK ? result : NULL;
            }
        }
    }
    else {
        status = read_tokens(&c, token_ids);
        if (status == OK) {
            status = encode_extras(&c, extras, parent, token_ids);
        }
    }
    if (status == OK) {
        size_t longest = payload_bound((size_t)PyBytes_GET_SIZE(parent), block_size, c.max_extra);
        if (!c.cbor && longest >= MAX_FRAME) {
            status = UNSUPPORTED; /* the pickler might split its frame */
        }
        else if ((payload = longest <= SMALL_PAYLOAD ? small_payload : PyMem_Malloc(longest)) ==
                 NULL) {
            PyErr_NoMemory();
            status = FAILED;
        }
        else {
            result = run_chain(&c, parent, payload);
            status = result == NULL ? FAILED : OK;
        }
    }
    if (payload != small_payload) {
        PyMem_Free(payload);
    }
    chain_free(&c);
    if (status == UNSUPPORTED) {
        Py_RETURN_NONE;
    }
    return result;
}

/* An algorithm code and a size from `algo` (a code or a name) and `size`; 0, or -1 where
 * either is out of range (nothing raised). */
static int
read_algo_and_size(PyObject *algo_arg, PyObject *size_arg, int *algo, Py_ssize_t *size)
{
    *algo = PyLong_CheckExact(algo_arg) ? (int)PyLong_AsLong(algo_arg) : algo_code(algo_arg);
    *size = PyLong_CheckExact(size_arg) ? PyLong_AsSsize_t(size_arg) : -1;
    if (PyErr_Occurred()) {
        PyErr_Clear(); /* an out-of-range number: not handled here */
        return -1;
    }
    return 0;
}

/* hash_blocks(algo, parent, token_ids, block_size, extra_keys[, lookahead]) -> list[bytes] |
 * None, `algo` a code or a name, `extra_keys` a list or tuple (one per block) */
static PyObject *
hash_blocks(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 && nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "hash_blocks takes 5 or 6 arguments");
        return NULL;
    }
    Py_ssize_t lookahead = nargs == 6 && PyLong_CheckExact(args[5]) ? PyLong_AsSsize_t(args[5])
                           : nargs == 6                               ? -1
                                                                      : 0;
    int algo;
    Py_ssize_t block_size;
    if (read_algo_and_size(args[0], args[3], &algo, &block_size) != 0 ||
        !(PyList_CheckExact(args[4]) || PyTuple_CheckExact(args[4]))) {
        Py_RETURN_NONE;
    }
    PyObject *extras = args[4];
    return hash_chain(algo, args[1], args[2], block_size, PySequence_Fast_GET_SIZE(extras),
                      PySequence_Fast_ITEMS(extras), lookahead);
}

/* hash_uniform_blocks(algo, parent, token_ids, block_size, num_blocks, first_keys, rest_keys)
 * -> list[bytes] | None: hash_blocks with block 0's extra keys `first_keys` and every other
 * block's `rest_keys`, without a list of them; token_ids may run past the last block. */
static PyObject *
hash_uniform_blocks(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "hash_uniform_blocks takes 7 arguments");
        return NULL;
    }
    int algo;
    Py_ssize_t block_size;
    Py_ssize_t num_blocks = PyLong_CheckExact(args[4]) ? PyLong_AsSsize_t(args[4]) : -1;
    if (read_algo_and_size(args[0], args[3], &algo, &block_size) != 0 || num_blocks < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *small[SMALL_BLOCKS];
    PyObject **extras = num_blocks <= SMALL_BLOCKS
                            ? small
                            : PyMem_Malloc(sizeof(PyObject *) * (size_t)num_blocks);
    if (extras == NULL) {
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < num_blocks; i++) {
        extras[i] = i == 0 ? args[5] : args[6]; /* borrowed: the arguments outlive the call */
    }
    PyObject *result = hash_chain(algo, args[1], args[2], block_size, num_blocks, extras, 0);
    if (extras != small) {
        PyMem_Free(extras);
    }
    return result;
}

/* set_enabled(enabled) -> bool: the switch every entry point reads. */
static PyObject *
set_enabled(PyObject *self, PyObject *flag)
{
    int enabled = PyObject_IsTrue(flag);
    if (enabled < 0) {
        return NULL;
    }
    accel_enabled = enabled;
    return PyBool_FromLong(accel_enabled);
}

static PyMethodDef chain_methods[] = {
    {"hash_blocks", (PyCFunction)(void (*)(void))hash_blocks, METH_FASTCALL,
     "hash_blocks(algo (code or name), parent, token_ids, block_size, extra_keys[, lookahead]) "
     "-> list[bytes] | None; with lookahead L, extra_keys are each block's E and token_ids "
     "holds L more tokens"},
    {"hash_uniform_blocks", (PyCFunction)(void (*)(void))hash_uniform_blocks, METH_FASTCALL,
     "hash_uniform_blocks(algo, parent, token_ids, block_size, num_blocks, first_keys, "
     "rest_keys) -> list[bytes] | None: block 0 with first_keys, the others with rest_keys"},
    {"one_block_hasher", (PyCFunction)(void (*)(void))one_block_hasher, METH_FASTCALL,
     "one_block_hasher(algo, block_size, extra_keys, fallback) -> BlockHasher | None"},
    {"install_decode_append", (PyCFunction)(void (*)(void))install_decode_append, METH_FASTCALL,
     "install_decode_append(cls, python_append, default_chain_hasher) -> None"},
    {"set_enabled", set_enabled, METH_O, "set_enabled(enabled) -> bool"},
    {"floor_digests", (PyCFunction)(void (*)(void))floor_digests, METH_FASTCALL,
     "floor_digests(algo, payloads) -> the last digest (every payload hashed in C)"},
    {"first_bad_token", (PyCFunction)(void (*)(void))first_bad_token, METH_FASTCALL,
     "first_bad_token(token_ids, low, high) -> index of the first non-int or out-of-range "
     "item, or -1"},
    {"set_token_items", set_token_items, METH_O,
     "set_token_items(name | None) -> the token encoder now in use ('scalar', 'avx2', 'vbmi2')"},
    {"token_items_versions", token_items_versions, METH_NOARGS,
     "token_items_versions() -> the token encoders this CPU runs"},
    {"set_sha_ni", set_sha_ni, METH_O, "set_sha_ni(enabled) -> the SHA-256 route now in use"},
    {"sha_route", sha_route, METH_NOARGS, "sha_route() -> 'sha-ni' | 'openssl'"},
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
    if (digest_init() != OK) {
        return NULL;
    }
    token_items_init();
    PyObject *module = PyModule_Create(&chain_module);
    if (module != NULL && decode_add_types(module) != OK) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
