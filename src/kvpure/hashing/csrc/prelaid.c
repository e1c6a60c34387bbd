/* kvpure.hashing._chain: a prompt's chain with every payload laid out before hashing.
 *
 * The common prompt (token ids exact ints in [0, 2**30), no lookahead) is hashed in two
 * passes over one buffer:
 *
 *   1. every block's payload but its head and parent is written: [slot][body], the slot
 *      left for the head and parent, the body the token array, the extra keys and
 *      (pickle) the tail. A block's ids are read into a small array, then encoded in bulk
 *      (token_items.c: 8 at a time with AVX2 / AVX-512 where the CPU has them);
 *   2. the chain: block 0's slot is written and its payload hashed where it lies; every
 *      later block's slot is made from the previous digest without a store/load round
 *      trip: in SHA-NI registers (sha_ni.c) or with 8-byte stores at the offsets XXH3
 *      loads (xxh3_chain), else written as block 0's. Each digest becomes a bytes object.
 *
 * Anything else (an id at or above 2**30 or negative, not an exact int) is UNSUPPORTED
 * here, and chain.c runs its general path (phase by phase, 64-bit ids).
 */
#include "chain.h"

#define VALUES_CHUNK 256

/* A token's value where it is an exact int in [0, 2**30): 1 and the value, else 0. */
static inline int
small_token(PyObject *obj, uint32_t *value)
{
    if (!PyLong_CheckExact(obj)) {
        return 0;
    }
#if PY_VERSION_HEX < 0x030C0000
    Py_ssize_t size = Py_SIZE(obj); /* 0 or 1: one 30-bit digit, non-negative */
    *value = (uint32_t)((PyLongObject *)obj)->ob_digit[0] & (uint32_t)-(size != 0);
    return (size_t)size <= 1;
#else
    if (!PyUnstable_Long_IsCompact((PyLongObject *)obj)) {
        return 0;
    }
    Py_ssize_t v = PyUnstable_Long_CompactValue((PyLongObject *)obj);
    *value = (uint32_t)v;
    return v >= 0 && v < (1 << 30);
#endif
}

/* The length of a block's head and parent: [0x83, bytes head, parent] or [PROTO 5, FRAME n,
 * SHORT_BINBYTES / BINBYTES, parent, MEMOIZE]. */
static size_t
slot_length(int cbor, size_t parent_len)
{
    if (cbor) {
        unsigned char head[9];
        return 1 + cbor_head(head, 2, parent_len) + parent_len;
    }
    return 11 + (parent_len <= 0xff ? 2 : 5) + parent_len + 1;
}

/* Writes a block's slot (its head and parent) at `start`; the payload is `payload_len` long. */
static void
write_slot(int cbor, unsigned char *start, const unsigned char *parent, size_t parent_len,
           size_t payload_len)
{
    size_t n = 0;
    if (cbor) {
        start[n++] = 0x83; /* [parent, tokens, extra_keys] */
        n += cbor_head(start + n, 2, parent_len);
    }
    else {
        start[n++] = 0x80; /* PROTO 5 */
        start[n++] = 5;
        start[n++] = 0x95; /* FRAME, 8-byte length of what follows */
        put_le(start + n, payload_len - 11, 8);
        n += 8;
        if (parent_len <= 0xff) {
            start[n++] = 'C';
            start[n++] = (unsigned char)parent_len;
        }
        else {
            start[n++] = 'B';
            put_le(start + n, parent_len, 4);
            n += 4;
        }
    }
    memcpy(start + n, parent, parent_len);
    if (!cbor) {
        start[n + parent_len] = 0x94; /* MEMOIZE (index 0) */
    }
}

/* One block's body at `out` (after its slot): its end, or NULL for a token it does not
 * handle. */
static unsigned char *
lay_out_block(const Prelaid *p, PyObject **block, Py_ssize_t index, unsigned char *out)
{
    int cbor = p->cbor;
    if (cbor) {
        out += cbor_head(out, 4, (uint64_t)p->block_size);
    }
    else if (p->block_size > 3) {
        *out++ = '('; /* MARK */
    }
    uint32_t values[VALUES_CHUNK];
    for (Py_ssize_t done = 0; done < p->block_size; done += VALUES_CHUNK) {
        Py_ssize_t n = p->block_size - done < VALUES_CHUNK ? p->block_size - done : VALUES_CHUNK;
        for (Py_ssize_t j = 0; j < n; j++) {
            if (!small_token(block[done + j], &values[j])) {
                return NULL;
            }
        }
        out = encode_token_items(cbor, values, n, out);
    }
    if (!cbor) {
        *out++ = p->block_size > 3 ? 't' : (unsigned char)(0x84 + p->block_size);
        *out++ = 0x94; /* MEMOIZE (index 1) */
    }
    memcpy(out, p->extras + p->extra_start[index], p->extra_len[index]);
    out += p->extra_len[index];
    if (!cbor) {
        *out++ = 0x87; /* TUPLE3 */
        *out++ = 0x94; /* MEMOIZE */
        *out++ = '.';  /* STOP */
    }
    return out;
}

/* Block i's body, laid out after its slot; its bounds in starts[i], ends[i]. */
static int
lay_out(const Prelaid *p, PyObject **items, Py_ssize_t i, unsigned char *buf, size_t *starts,
        size_t *ends)
{
    starts[i] = (i == 0 ? 0 : ends[i - 1]) + (i == 0 ? p->first_slot : p->slot);
    unsigned char *end = lay_out_block(p, items + i * p->block_size, i, buf + starts[i]);
    if (end == NULL) {
        return UNSUPPORTED;
    }
    ends[i] = (size_t)(end - buf);
    return OK;
}

static inline uint64_t
load_word(const unsigned char *p)
{
    uint64_t word;
    memcpy(&word, p, 8);
    return word;
}

static inline void
store_word(unsigned char *p, uint64_t word)
{
    memcpy(p, &word, 8);
}

/* Blocks first..count-1 through libxxhash's XXH3-128 (`fn`), their parents 16-byte digests.
 * Each slot is written with 8-byte stores at the payload's offsets 0, 8, 16 (24), built in
 * registers from the previous digest, so that XXH3's 8-byte loads there are forwarded from
 * them whole (a load spanning two smaller stores waits for both to reach the cache).
 * `previous` is block first-1's digest. OK, or FAILED with an exception set. */
static int
xxh3_chain(const Prelaid *p, unsigned char *buf, const size_t *starts, const size_t *ends,
           Py_ssize_t first, Xxh3_128_fn fn, const unsigned char *previous, PyObject *result)
{
    uint64_t high = load_word(previous), low = load_word(previous + 8); /* big-endian halves */
    size_t slot = p->slot;                                                /* 18 or 30 bytes */
    for (Py_ssize_t i = first; i < p->num_blocks; i++) {
        unsigned char *start = buf + starts[i] - slot;
        size_t len = ends[i] - starts[i] + slot;
        if (p->cbor) { /* 0x83 0x50 D[16] */
            store_word(start, 0x5083 | high << 16);
            store_word(start + 8, high >> 48 | low << 16);
            store_word(start + 16, low >> 48 | (load_word(start + 16) & ~(uint64_t)0xffff));
        }
        else { /* PROTO 5, FRAME n, SHORT_BINBYTES 16, D[16], MEMOIZE */
            uint64_t frame = len - 11;
            store_word(start, 0x950580 | frame << 24);
            store_word(start + 8, frame >> 40 | 0x1043ULL << 24 | high << 40);
            store_word(start + 16, high >> 24 | low << 40);
            store_word(start + 24, low >> 24 | 0x94ULL << 40 |
                                       (load_word(start + 24) & 0xffff000000000000ULL));
        }
        Xxh128 h = fn(start, len);
        high = __builtin_bswap64(h.high64);
        low = __builtin_bswap64(h.low64);
        unsigned char md[16];
        store_word(md, high);
        store_word(md + 8, low);
        PyObject *digest = PyBytes_FromStringAndSize((const char *)md, 16);
        if (digest == NULL) {
            return FAILED;
        }
        PyList_SET_ITEM(result, i, digest);
    }
    return OK;
}

/* The chain: every block laid out, then hashed in turn; a new list in *result. OK,
 * UNSUPPORTED (a token) or FAILED. Block 0 (its parent the caller's) is hashed as laid out
 * with its slot written; the rest run through sha256_ni_chain / xxh3_chain where they apply
 * (no Python code runs in either, nor while the token objects are read). */
static int
chain_laid_out(const Prelaid *p, PyObject *parent, PyObject **items, unsigned char *buf,
               size_t *starts, size_t *ends, PyObject **out)
{
    for (Py_ssize_t i = 0; i < p->num_blocks; i++) {
        if (lay_out(p, items, i, buf, starts, ends) != OK) {
            return UNSUPPORTED;
        }
    }
    PyObject *result = PyList_New(p->num_blocks);
    if (result == NULL) {
        return FAILED;
    }
    unsigned char md[32];
    const unsigned char *previous = (const unsigned char *)PyBytes_AS_STRING(parent);
    size_t previous_len = (size_t)PyBytes_GET_SIZE(parent);
    size_t size = digest_size(p->algo);
    for (Py_ssize_t i = 0; i < p->num_blocks; i++) {
        unsigned char *start = buf + starts[i] - (i == 0 ? p->first_slot : p->slot);
        size_t len = (size_t)(buf + ends[i] - start);
        write_slot(p->cbor, start, previous, previous_len, len);
        if (block_digest_padded(p->algo, start, len, md) != OK) {
            Py_DECREF(result);
            return FAILED;
        }
        PyObject *digest = PyBytes_FromStringAndSize((const char *)md, (Py_ssize_t)size);
        if (digest == NULL) {
            Py_DECREF(result);
            return FAILED;
        }
        PyList_SET_ITEM(result, i, digest);
        previous = (const unsigned char *)PyBytes_AS_STRING(digest);
        previous_len = size;
        if (i == 0 && size == 32 && sha_ni_in_use() &&
            (p->algo == ALGO_SHA256 || p->algo == ALGO_SHA256_CBOR)) {
            /* the rest with the previous digest kept in registers */
            if (sha256_ni_chain(p->cbor, buf, starts, ends, 1, p->num_blocks, previous,
                                result) != OK) {
                Py_DECREF(result);
                return FAILED;
            }
            break;
        }
        Xxh3_128_fn xxh3 = native_xxh3_fn();
        if (i == 0 && size == 16 && xxh3 != NULL && p->slot == (p->cbor ? 18 : 30)) {
            if (xxh3_chain(p, buf, starts, ends, 1, xxh3, previous, result) != OK) {
                Py_DECREF(result);
                return FAILED;
            }
            break;
        }
    }
    *out = result;
    return OK;
}

int
prelaid_chain(const Prelaid *p, PyObject *parent, PyObject *token_ids, PyObject **result)
{
    Prelaid laid = *p;
    size_t parent_len = (size_t)PyBytes_GET_SIZE(parent);
    laid.first_slot = slot_length(p->cbor, parent_len);
    laid.slot = slot_length(p->cbor, digest_size(p->algo));
    /* each body: array head or MARK, 5 bytes per id, 64 for the last store, the tuple's
     * close, extra keys, pickle's tail */
    size_t body = 9 + 5 * (size_t)p->block_size + 64 + 2 + 3;
    size_t capacity = laid.first_slot + (size_t)p->num_blocks * (laid.slot + body) + 64;
    for (Py_ssize_t i = 0; i < p->num_blocks; i++) {
        capacity += p->extra_len[i];
        if (!p->cbor && laid.first_slot + body + p->extra_len[i] >= MAX_FRAME) {
            return UNSUPPORTED; /* the pickler might split its frame */
        }
    }
    unsigned char *buf = PyMem_Malloc(capacity);
    size_t *starts = PyMem_Malloc(2 * sizeof(size_t) * (size_t)(p->num_blocks + 1));
    int status = OK;
    if (buf == NULL || starts == NULL) {
        PyErr_NoMemory();
        status = FAILED;
    }
    else {
        size_t *ends = starts + p->num_blocks + 1;
        status = chain_laid_out(&laid, parent, PySequence_Fast_ITEMS(token_ids), buf, starts,
                                ends, result);
    }
    PyMem_Free(buf);
    PyMem_Free(starts);
    return status;
}
