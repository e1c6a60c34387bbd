/*
 * kvpure.hashing._chain: vLLM's block-hash chain in C (kvpure's optional accelerator).
 *
 * The extension is built from eight compilation units sharing this header:
 *
 *   encode.c  canonical CBOR and pickle protocol 5 of the payload (parent, tokens, extra keys)
 *   digest.c  SHA-256 (SHA-NI or OpenSSL) and XXH3-128 (libxxhash.so.0 or the xxhash
 *             package); floor_digests, the benchmarks' hashing floor
 *   chain.c   hash_blocks(): every block of a prompt; the module itself and its switch
 *   prelaid.c the common prompt's chain, payloads laid out a few blocks ahead of the hash
 *   token_items.c  token ids as CBOR / pickle items in bulk (scalar, AVX2, AVX-512); the
 *             token-id scan first_bad_token
 *   sha_ni.c  SHA-256 with the x86 SHA extensions, no copies
 *   block_hasher.c  BlockHasher: one block, its extra keys encoded once (decoding)
 *   decode.c  the C body of RequestBlockHashes.append_output_token_ids
 *
 * Every entry point returns the digests vLLM computes, byte for byte, or hands the input
 * to kvpure's pure-Python path (None, or a call of the Python function it was given) for
 * anything it does not handle; the Python path stays the reference.
 *
 *   algo 0 sha256       SHA-256 over pickle protocol 5
 *   algo 1 sha256_cbor  SHA-256 over canonical CBOR (as cbor2.dumps(x, canonical=True))
 *   algo 2 xxhash       XXH3-128 (canonical big-endian digest) over pickle protocol 5
 *   algo 3 xxhash_cbor  XXH3-128 over canonical CBOR
 *
 * Handled: a parent that is an exact bytes; token ids that are exact ints in the signed
 * 64-bit range; extra keys built of None, bool, exact int (64-bit), exact float, exact str
 * (valid UTF-8), exact bytes and exact tuples (nested up to MAX_DEPTH). Pickle's memo is
 * reproduced exactly: an object met twice in one payload (by identity, such as a tag string
 * shared by two multimodal keys) is written as a back-reference to its first index.
 *
 * Functions shared between the units are hidden (-fvisibility=hidden); only PyInit__chain
 * is exported.
 */
#ifndef KVPURE_CHAIN_H
#define KVPURE_CHAIN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_DEPTH 16
#define MAX_MEMO 256
#define MAX_FRAME 60000 /* pickle splits frames at 64 KiB; stay well below */

enum { ALGO_SHA256 = 0, ALGO_SHA256_CBOR = 1, ALGO_XXHASH = 2, ALGO_XXHASH_CBOR = 3 };
enum { OK = 0, FAILED = -1, UNSUPPORTED = 1 };

/* Whether the accelerator is switched on (chain.c; set_enabled()). Off, every entry point
 * hands its input to the Python path. */
extern int accel_enabled;

/* ---------------------------------------------------------------- buffers (encode.c) */

typedef struct {
    unsigned char *data;
    size_t len;
    size_t cap;
} Buf;

int buf_reserve(Buf *b, size_t more);
int buf_put(Buf *b, const void *src, size_t n);
int buf_byte(Buf *b, unsigned char c);

typedef struct {
    PyObject *objects[MAX_MEMO]; /* pickle memo by identity; [0] parent, [1] tokens */
    int count;
} Memo;

/* One extra-keys value, as cbor2 (canonical) or the C pickler (inside a payload whose memo
 * is `memo`) writes it: OK, FAILED (exception set) or UNSUPPORTED. */
int encode_cbor(Buf *b, PyObject *obj, int depth);
int encode_pickle(Buf *b, PyObject *obj, Memo *memo, int depth);

/* The payload of one block into `out` (at least payload_bound() bytes); returns its length. */
size_t build_payload(int cbor, const unsigned char *parent, size_t parent_len,
                     const int64_t *tokens, Py_ssize_t size, const unsigned char *extra,
                     size_t extra_len, unsigned char *out);

/* The extra keys of a block hashed with L lookahead tokens, (E, t_0, ..., t_{L-1}), from E's
 * encoding `e` (as encode_cbor / encode_pickle wrote it) and the tokens' values, into `out`
 * (at least lookahead_extra_bound() bytes); returns its length. */
size_t lookahead_extra(int cbor, const unsigned char *e, size_t e_len, const int64_t *tokens,
                       Py_ssize_t lookahead, unsigned char *out);

static inline size_t
lookahead_extra_bound(size_t e_len, Py_ssize_t lookahead)
{
    return e_len + 10 * (size_t)lookahead + 16;
}

static inline size_t
payload_bound(size_t parent_len, Py_ssize_t block_size, size_t extra_len)
{
    return (parent_len > 32 ? parent_len : 32) + 10 * (size_t)block_size + extra_len + 32;
}

/* ---------------------------------------------------------------- laid-out chain (prelaid.c) */

typedef struct {
    int algo;
    int cbor;
    Py_ssize_t block_size;
    Py_ssize_t num_blocks;
    const unsigned char *extras; /* every block's encoded extra keys (chain.c's phase 2) */
    const size_t *extra_start;
    const size_t *extra_len;
    size_t first_slot; /* filled in by prelaid_chain */
    size_t slot;
} Prelaid;

/* Every block's digest into *result (a new list) where all token ids are exact ints in
 * [0, 2**30): OK; UNSUPPORTED for any other token (nothing set); FAILED with an exception. */
int prelaid_chain(const Prelaid *p, PyObject *parent, PyObject *token_ids, PyObject **result);

/* The payloads of a laid-out chain, written a few blocks ahead of the one hashed (software
 * pipelining: the lay-out's loads and stores run under the latency of the hash chain, whose
 * every block waits for the previous digest). Block i lies in ring slot i & mask, `stride`
 * bytes each (a multiple of 64): its slot (head and parent) first, its body at
 * buf[starts[i & mask], ends[i & mask]); every slot has room for the longest payload, 64
 * bytes of slack for the token items' last store and 16 readable past its end (SHA-NI).
 * The token objects are borrowed: no Python code may run between the first lay-out and the
 * last (the chain loops call none; the Python xxhash route lays out every block first). */
typedef struct {
    const Prelaid *p;
    PyObject *const *items; /* the prompt's token objects */
    unsigned char *buf;
    size_t stride;
    size_t mask;
    size_t *starts;
    size_t *ends;
    Py_ssize_t laid;  /* blocks laid out so far */
    Py_ssize_t ahead; /* how far ahead of the hashed block the lay-out runs */
} Layout;

/* Lays out blocks l->laid .. min(last, num_blocks - 1): OK, or UNSUPPORTED for a token that
 * is not an exact int in [0, 2**30). */
int layout_through(Layout *l, Py_ssize_t last);

/* Lays out block l->laid from its token ids' values (block_size <= SPLIT_MAX of them, read
 * with small_token): the second half of a lay-out split in two, so that each half runs under
 * a different SHA-256 compression (sha256_ni_chain). */
#define SPLIT_MAX 64
void layout_values(Layout *l, const uint32_t *values);

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

/* Before hashing block i: the blocks up to i + ahead laid out. */
static inline int
layout_ahead(Layout *l, Py_ssize_t i)
{
    if (l->laid <= i + l->ahead && l->laid < l->p->num_blocks) {
        return layout_through(l, i + l->ahead);
    }
    return OK;
}

/* ---------------------------------------------------------------- token items (token_items.c) */

/* `n` token ids (each below 2**30) as CBOR items (`cbor`) or pickle ints, back to back at
 * `out`, which has 5 * n + 64 bytes writable; returns the end of the items. */
unsigned char *encode_token_items(int cbor, const uint32_t *values, Py_ssize_t n,
                                  unsigned char *out);
void token_items_init(void);
PyObject *set_token_items(PyObject *self, PyObject *name);
PyObject *first_bad_token(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *token_items_versions(PyObject *self, PyObject *unused);

/* ---------------------------------------------------------------- digests (digest.c) */

/* The digest of `data` into `md` (32 or 16 bytes): OK, or FAILED with an exception set. */
int block_digest(int algo, const unsigned char *data, size_t len, unsigned char *md);
/* The same, `data` readable 16 bytes past `len` (no copy for SHA-NI). */
int block_digest_padded(int algo, const unsigned char *data, size_t len, unsigned char *md);
PyObject *set_sha_ni(PyObject *self, PyObject *flag);
PyObject *floor_digests(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *sha_route(PyObject *self, PyObject *unused);
/* sha_ni.c: SHA-256 with the SHA extensions (`data` readable 16 bytes past `len`) */
void sha256_ni(const unsigned char *data, size_t len, unsigned char *md);
int sha_ni_supported(void);
/* Blocks first.. of a laid-out chain with 32-byte parents through SHA-NI, each laid out
 * `ahead` blocks before it is hashed (prelaid.c): OK, UNSUPPORTED or FAILED. */
int sha256_ni_chain(Layout *l, Py_ssize_t first, const unsigned char *parent, PyObject *result);
/* Whether SHA-256 runs through sha_ni.c now. */
int sha_ni_in_use(void);
typedef struct {
    uint64_t low64;
    uint64_t high64;
} Xxh128; /* the layout of libxxhash's XXH128_hash_t (its public ABI) */

typedef Xxh128 (*Xxh3_128_fn)(const void *data, size_t len);

/* libxxhash's XXH3_128bits where loaded, checked and switched on; else NULL. */
Xxh3_128_fn native_xxh3_fn(void);
/* Whether `algo` can run (XXH3 needs init_xxhash first). */
int digest_ready(int algo);
int digest_init(void);
PyObject *init_xxhash(PyObject *self, PyObject *fn);
PyObject *set_native_xxhash(PyObject *self, PyObject *flag);
PyObject *xxhash_route(PyObject *self, PyObject *unused);

static inline size_t
digest_size(int algo)
{
    return algo == ALGO_SHA256 || algo == ALGO_SHA256_CBOR ? 32 : 16;
}

static inline int
algo_uses_cbor(int algo)
{
    return algo == ALGO_SHA256_CBOR || algo == ALGO_XXHASH_CBOR;
}

/* ---------------------------------------------------------------- decoding (block_hasher.c, decode.c) */

extern PyTypeObject BlockHasherType;
/* One block's digest through a BlockHasher (a new reference), or NULL with an exception. */
PyObject *hasher_digest(PyObject *hasher, PyObject *parent, PyObject *tokens);
PyObject *one_block_hasher(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
int decode_add_types(PyObject *module);
PyObject *install_decode_append(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

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

/* An int's CBOR (at most 9 bytes; `out` must have 9 writable). A token id's width (1, 2,
 * 3, 5 or 9 bytes) is computed without branches: random ids straddle 2**16, so a branch
 * per width was mispredicted about every other token. */
static inline size_t
cbor_int(unsigned char *out, int64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (v >= 0) {
        static const unsigned char widths[5] = {0, 1, 2, 4, 8};
        uint64_t u = (uint64_t)v;
        unsigned k = (unsigned)(u >= 24) + (u >= 0x100) + (u >= 0x10000) + (u >= 0x100000000ULL);
        unsigned w = widths[k];
        out[0] = k == 0 ? (unsigned char)u : (unsigned char)(23 + k); /* major type 0 */
        /* the w low bytes of u, big-endian, in out[1..w] (two shifts: w = 0 shifts by 64) */
        uint64_t top = (u << (32 - 4 * w)) << (32 - 4 * w);
        uint64_t big_endian = __builtin_bswap64(top);
        memcpy(out + 1, &big_endian, 8);
        return 1 + w;
    }
#endif
    return v >= 0 ? cbor_head(out, 0, (uint64_t)v) : cbor_head(out, 1, ~(uint64_t)v);
}

static inline void
put_le(unsigned char *out, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) {
        out[i] = (unsigned char)(v >> (8 * i));
    }
}

/* Pickle's encoding of an int (at most 10 bytes; `out` must have 10 writable): BININT1 / BININT2 / BININT for what fits
 * in 32 signed bits, else LONG1 with the fewest little-endian two's-complement bytes, as
 * the C pickler chooses them. */
static inline size_t
pickle_int(unsigned char *out, int64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (v >= 0 && v <= INT32_MAX) { /* without branches, as cbor_int; writes 5 bytes */
        static const unsigned char ops[3] = {'K', 'M', 'J'}, widths[3] = {1, 2, 4};
        unsigned k = (unsigned)(v > 0xff) + (v > 0xffff);
        uint32_t little_endian = (uint32_t)v;
        out[0] = ops[k];
        memcpy(out + 1, &little_endian, 4);
        return 1 + (size_t)widths[k];
    }
#endif
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
#if PY_VERSION_HEX < 0x030C0000
    /* CPython 3.11: an int of ob_size -1, 0 or 1 is one digit (below 2**30), read inline */
    Py_ssize_t size = Py_SIZE(obj);
    if (size >= -1 && size <= 1) {
        *out = (int64_t)size * (int64_t)((PyLongObject *)obj)->ob_digit[0];
        return OK;
    }
#else
    if (PyUnstable_Long_IsCompact((PyLongObject *)obj)) {
        *out = (int64_t)PyUnstable_Long_CompactValue((PyLongObject *)obj);
        return OK;
    }
#endif
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
#endif /* KVPURE_CHAIN_H */
