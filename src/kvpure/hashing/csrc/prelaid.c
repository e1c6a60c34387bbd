/* kvpure.hashing._chain: a prompt's chain with its payloads laid out ahead of the hash.
 *
 * The common prompt (token ids exact ints in [0, 2**30), no lookahead) is hashed in one pass
 * that does two things a few blocks apart (software pipelining):
 *
 *   - block i + AHEAD's payload but its head and parent is written into a ring of block
 *     slots: [slot][body], the slot left for the head and parent, the body the token array,
 *     the extra keys and (pickle) the tail. A block's ids are read into a small array, then
 *     encoded in bulk (token_items.c: 8 at a time with AVX2 / AVX-512 where the CPU has them);
 *   - block i is hashed where it lies: block 0 with its slot written; every later block's
 *     slot made from the previous digest without a store/load round trip, in SHA-NI
 *     registers (sha_ni.c) or with 8-byte stores at the offsets XXH3 loads (xxh3_chain), else
 *     written as block 0's. Each digest is written straight into its bytes object.
 *
 * SHA-256's rounds are a chain of dependent instructions (each block waits for the previous
 * digest), so the lay-out's independent loads and stores run in their shadow; the distance
 * keeps a block's 64-byte stores out of the store buffer by the time the hash loads them.
 * Where the digest may call Python code (the xxhash package's route) every block is laid out
 * first, as the token objects are borrowed.
 *
 * Anything else (an id at or above 2**30 or negative, not an exact int) is UNSUPPORTED
 * here, and chain.c runs its general path (phase by phase, 64-bit ids).
 */
#include "chain.h"

#define VALUES_CHUNK 256
#ifndef LAY_AHEAD
#define LAY_AHEAD 4 /* blocks laid out ahead of the hashed one */
#endif

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

/* A block's body up to its token items: CBOR's array head, or pickle's MARK. */
static inline unsigned char *
block_head(int cbor, Py_ssize_t block_size, unsigned char *out)
{
    if (cbor) {
        out += cbor_head(out, 4, (uint64_t)block_size);
    }
    else if (block_size > 3) {
        *out++ = '('; /* MARK */
    }
    return out;
}

/* A block's body after its token items: the tuple's close (pickle), the extra keys and
 * pickle's tail. */
static inline unsigned char *
block_tail(const Prelaid *p, Py_ssize_t index, unsigned char *out)
{
    int cbor = p->cbor;
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

/* One block's body at `out` (after its slot): its end, or NULL for a token it does not
 * handle. */
static unsigned char *
lay_out_block(const Prelaid *p, PyObject *const *block, Py_ssize_t index, unsigned char *out)
{
    int cbor = p->cbor;
    out = block_head(cbor, p->block_size, out);
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
    return block_tail(p, index, out);
}

void
layout_values(Layout *l, const uint32_t *values)
{
    const Prelaid *p = l->p;
    Py_ssize_t i = l->laid;
    size_t k = (size_t)i & l->mask;
    size_t start = k * l->stride + (i == 0 ? p->first_slot : p->slot);
    unsigned char *out = block_head(p->cbor, p->block_size, l->buf + start);
    out = encode_token_items(p->cbor, values, p->block_size, out);
    out = block_tail(p, i, out);
    l->starts[k] = start;
    l->ends[k] = (size_t)(out - l->buf);
    l->laid = i + 1;
}

int
layout_through(Layout *l, Py_ssize_t last)
{
    const Prelaid *p = l->p;
    if (last >= p->num_blocks) {
        last = p->num_blocks - 1;
    }
    for (Py_ssize_t i = l->laid; i <= last; i++) {
        size_t k = (size_t)i & l->mask;
        size_t start = k * l->stride + (i == 0 ? p->first_slot : p->slot);
        unsigned char *end =
            lay_out_block(p, l->items + i * p->block_size, i, l->buf + start);
        if (end == NULL) {
            return UNSUPPORTED;
        }
        l->starts[k] = start;
        l->ends[k] = (size_t)(end - l->buf);
        l->laid = i + 1;
    }
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

/* Blocks first.. through libxxhash's XXH3-128 (`fn`), their parents 16-byte digests, each
 * laid out `ahead` blocks before. Each slot is written with 8-byte stores at the payload's
 * offsets 0, 8, 16 (24), built in registers from the previous digest, so that XXH3's 8-byte
 * loads there are forwarded from them whole (a load spanning two smaller stores waits for
 * both to reach the cache). `previous` is block first-1's digest. OK, UNSUPPORTED (a token)
 * or FAILED with an exception set. */
static int
xxh3_chain(Layout *l, Py_ssize_t first, Xxh3_128_fn fn, const unsigned char *previous,
           PyObject *result)
{
    const Prelaid *p = l->p;
    uint64_t high = load_word(previous), low = load_word(previous + 8); /* big-endian halves */
    size_t slot = p->slot;                                                /* 18 or 30 bytes */
    for (Py_ssize_t i = first; i < p->num_blocks; i++) {
        if (layout_ahead(l, i) != OK) {
            return UNSUPPORTED;
        }
        size_t k = (size_t)i & l->mask;
        unsigned char *start = l->buf + l->starts[k] - slot;
        size_t len = l->ends[k] - l->starts[k] + slot;
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
        PyObject *digest = PyBytes_FromStringAndSize(NULL, 16);
        if (digest == NULL) {
            return FAILED;
        }
        Xxh128 h = fn(start, len);
        high = __builtin_bswap64(h.high64);
        low = __builtin_bswap64(h.low64);
        unsigned char *md = (unsigned char *)PyBytes_AS_STRING(digest);
        store_word(md, high);
        store_word(md + 8, low);
        PyList_SET_ITEM(result, i, digest);
    }
    return OK;
}

/* The chain into `result` (a new list of num_blocks items, filled here). OK, UNSUPPORTED
 * (a token) or FAILED. Block 0 (its parent the caller's) is hashed as laid out with its
 * slot written; the rest run through sha256_ni_chain / xxh3_chain where they apply (no
 * Python code runs in either, nor while the token objects are read). */
static int
chain_laid_out(Layout *l, PyObject *parent, PyObject *result)
{
    const Prelaid *p = l->p;
    const unsigned char *previous = (const unsigned char *)PyBytes_AS_STRING(parent);
    size_t previous_len = (size_t)PyBytes_GET_SIZE(parent);
    size_t size = digest_size(p->algo);
    for (Py_ssize_t i = 0; i < p->num_blocks; i++) {
        if (layout_ahead(l, i) != OK) {
            return UNSUPPORTED;
        }
        size_t k = (size_t)i & l->mask;
        unsigned char *start = l->buf + l->starts[k] - (i == 0 ? p->first_slot : p->slot);
        size_t len = (size_t)(l->buf + l->ends[k] - start);
        write_slot(p->cbor, start, previous, previous_len, len);
        PyObject *digest = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
        if (digest == NULL) {
            return FAILED;
        }
        unsigned char *md = (unsigned char *)PyBytes_AS_STRING(digest);
        if (block_digest_padded(p->algo, start, len, md) != OK) {
            Py_DECREF(digest);
            return FAILED;
        }
        PyList_SET_ITEM(result, i, digest);
        previous = md;
        previous_len = size;
        if (i == 0 && size == 32 && sha_ni_in_use() &&
            (p->algo == ALGO_SHA256 || p->algo == ALGO_SHA256_CBOR)) {
            /* the rest with the previous digest kept in registers */
            return sha256_ni_chain(l, 1, previous, result);
        }
        Xxh3_128_fn xxh3 = native_xxh3_fn();
        if (i == 0 && size == 16 && xxh3 != NULL && p->slot == (p->cbor ? 18 : 30)) {
            return xxh3_chain(l, 1, xxh3, previous, result);
        }
    }
    return OK;
}

static size_t
round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

int
prelaid_chain(const Prelaid *p, PyObject *parent, PyObject *token_ids, PyObject **result)
{
    Prelaid laid = *p;
    size_t parent_len = (size_t)PyBytes_GET_SIZE(parent);
    laid.first_slot = slot_length(p->cbor, parent_len);
    laid.slot = slot_length(p->cbor, digest_size(p->algo));
    /* each body: array head or MARK, 5 bytes per id, 64 for the last store (which covers
     * the 16 bytes SHA-NI reads past the end), the tuple's close, extra keys, pickle's tail */
    size_t body = 9 + 5 * (size_t)p->block_size + 64 + 2 + 3;
    size_t longest_extra = 0;
    for (Py_ssize_t i = 0; i < p->num_blocks; i++) {
        if (p->extra_len[i] > longest_extra) {
            longest_extra = p->extra_len[i];
        }
        if (!p->cbor && laid.first_slot + body + p->extra_len[i] >= MAX_FRAME) {
            return UNSUPPORTED; /* the pickler might split its frame */
        }
    }
    size_t first_slot = laid.first_slot > laid.slot ? laid.first_slot : laid.slot;
    /* a digest through Python code (the xxhash package): every block laid out first */
    int python_digest = (p->algo == ALGO_XXHASH || p->algo == ALGO_XXHASH_CBOR) &&
                        native_xxh3_fn() == NULL;
    Py_ssize_t ahead = python_digest ? p->num_blocks : LAY_AHEAD;
    size_t ring = 1;
    while (ring <= (size_t)ahead) {
        ring *= 2;
    }
    Layout l = {.p = &laid,
                .items = PySequence_Fast_ITEMS(token_ids),
                .stride = round_up(first_slot + body + longest_extra, 64),
                .mask = ring - 1,
                .laid = 0,
                .ahead = ahead};
    if (l.stride > PY_SSIZE_T_MAX / ring) {
        PyErr_NoMemory();
        return FAILED;
    }
    PyObject *list = PyList_New(p->num_blocks);
    l.buf = PyMem_Malloc(ring * l.stride);
    l.starts = PyMem_Malloc(2 * sizeof(size_t) * ring);
    int status = OK;
    if (list == NULL || l.buf == NULL || l.starts == NULL) {
        if (list != NULL) {
            PyErr_NoMemory();
        }
        status = FAILED;
    }
    else {
        l.ends = l.starts + ring;
        status = chain_laid_out(&l, parent, list);
    }
    PyMem_Free(l.buf);
    PyMem_Free(l.starts);
    if (status == OK) {
        *result = list;
    }
    else {
        Py_XDECREF(list);
    }
    return status;
}
