/* kvpure.hashing._chain: SHA-256 with the x86 SHA extensions, one short message at a time.
 *
 * OpenSSL's SHA256_Init / Update / Final costs about a third more than the compression itself
 * on a 100-byte payload: the state is stored with 32-bit writes and read back with 16-byte
 * loads (no store forwarding), the last partial block is copied into the context and padded
 * there, and the context is wiped. Here the state stays in two registers and the message is
 * loaded straight from the caller's buffer, the padding and the length applied in registers,
 * so nothing is copied. The caller's buffer must be readable 16 bytes past the message (the
 * partial word at its end is loaded whole and masked).
 *
 * Used where the CPU has SHA, SSSE3 and SSE4.1 (cpuid) and the result agrees with OpenSSL on
 * every length from 0 to 300 bytes at import (digest.c); else OpenSSL runs.
 */
#include "chain.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

static const uint32_t round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

/* 16 bytes of 0xff then 16 of 0: loaded at 16 - r, the mask of a word's first r bytes. */
static const unsigned char keep_mask[32] = {
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
/* 0x80 at [16]: loaded at 16 - r, the padding's first byte at byte r of a word. */
static const unsigned char end_marker[32] = {[16] = 0x80};

#define SHA_TARGET __attribute__((target("sha,ssse3,sse4.1")))

/* One 64-byte block, its four message words already in SHA-256's (big-endian) order.
 * `abef` / `cdgh` hold the state as the SHA instructions take it. */
SHA_TARGET static inline void
compress(__m128i *abef, __m128i *cdgh, __m128i w0, __m128i w1, __m128i w2, __m128i w3)
{
    __m128i s0 = *abef, s1 = *cdgh, w[4] = {w0, w1, w2, w3};
#pragma GCC unroll 16
    for (int r = 0; r < 16; r++) {
        if (r >= 4) { /* w[r] from w[r-4] .. w[r-1], in place in the ring of four */
            __m128i t = _mm_sha256msg1_epu32(w[r & 3], w[(r + 1) & 3]);
            t = _mm_add_epi32(t, _mm_alignr_epi8(w[(r + 3) & 3], w[(r + 2) & 3], 4));
            w[r & 3] = _mm_sha256msg2_epu32(t, w[(r + 3) & 3]);
        }
        __m128i m = _mm_add_epi32(w[r & 3],
                                  _mm_loadu_si128((const __m128i *)(round_constants + 4 * r)));
        s1 = _mm_sha256rnds2_epu32(s1, s0, m);
        s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(m, 0x0e));
    }
    *abef = _mm_add_epi32(*abef, s0);
    *cdgh = _mm_add_epi32(*cdgh, s1);
}

/* Message word k (16 bytes at 16 * k) of a `len`-byte message, padded: its bytes, then 0x80,
 * then zeros; the caller adds the length. */
SHA_TARGET static inline __m128i
message_word(const unsigned char *data, size_t len, size_t offset)
{
    const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i word;
    if (offset + 16 <= len) {
        word = _mm_loadu_si128((const __m128i *)(data + offset));
    }
    else if (offset <= len) { /* the message ends in this word */
        size_t r = len - offset; /* 0..15 bytes of it */
        word = _mm_and_si128(_mm_loadu_si128((const __m128i *)(data + offset)),
                             _mm_loadu_si128((const __m128i *)(keep_mask + 16 - r)));
        word = _mm_or_si128(word, _mm_loadu_si128((const __m128i *)(end_marker + 16 - r)));
    }
    else {
        word = _mm_setzero_si128();
    }
    return _mm_shuffle_epi8(word, swap);
}

SHA_TARGET void
sha256_ni(const unsigned char *data, size_t len, unsigned char *md)
{
    __m128i abef = _mm_set_epi32(0x6a09e667, (int)0xbb67ae85, 0x510e527f, (int)0x9b05688c);
    __m128i cdgh = _mm_set_epi32(0x3c6ef372, (int)0xa54ff53a, 0x1f83d9ab, 0x5be0cd19);
    size_t blocks = (len + 9 + 63) / 64; /* with the 0x80 and the 8-byte length */
    for (size_t b = 0; b < blocks; b++) {
        size_t at = 64 * b;
        __m128i w0 = message_word(data, len, at), w1 = message_word(data, len, at + 16);
        __m128i w2 = message_word(data, len, at + 32), w3 = message_word(data, len, at + 48);
        if (b + 1 == blocks) { /* the length in bits, big-endian, in the last 8 bytes */
            uint64_t bits = (uint64_t)len * 8;
            w3 = _mm_or_si128(w3, _mm_set_epi32((int)(uint32_t)bits, (int)(uint32_t)(bits >> 32),
                                                0, 0));
        }
        compress(&abef, &cdgh, w0, w1, w2, w3);
    }
    /* abef = [A B E F], cdgh = [C D G H] from the top lane down; out: A..H big-endian */
    uint32_t x[4], y[4], state[8];
    _mm_storeu_si128((__m128i *)x, abef);
    _mm_storeu_si128((__m128i *)y, cdgh);
    state[0] = x[3];
    state[1] = x[2];
    state[2] = y[3];
    state[3] = y[2];
    state[4] = x[1];
    state[5] = x[0];
    state[6] = y[1];
    state[7] = y[0];
    for (int i = 0; i < 8; i++) {
        uint32_t big_endian = __builtin_bswap32(state[i]);
        memcpy(md + 4 * i, &big_endian, 4);
    }
}

/* The digest's 32 bytes in order, as two registers. */
SHA_TARGET static inline void
digest_bytes(__m128i abef, __m128i cdgh, __m128i *low, __m128i *high)
{
    const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i feba = _mm_shuffle_epi32(abef, 0x1b); /* lanes A, B, E, F */
    __m128i ghcd = _mm_shuffle_epi32(cdgh, 0xb1); /* lanes G, H, C, D */
    *low = _mm_shuffle_epi8(_mm_blend_epi16(feba, ghcd, 0xf0), swap); /* A B C D */
    *high = _mm_shuffle_epi8(_mm_alignr_epi8(ghcd, feba, 8), swap);   /* E F G H */
}

/* Blocks first.. of a laid-out chain (prelaid.c) whose parents are 32-byte digests: block i
 * is laid out `ahead` blocks before it is hashed (layout_ahead), its payload its slot (head
 * and parent, `slot` bytes, never written: built here in registers from the previous digest,
 * which stays in registers) then its body. Each digest is written straight into a new bytes
 * object in `result`. `parent` is block first-1's digest. OK, UNSUPPORTED (a token the
 * lay-out does not take) or FAILED with an exception set. */
SHA_TARGET int
sha256_ni_chain(Layout *l, Py_ssize_t first, const unsigned char *parent, PyObject *result)
{
    const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    int cbor = l->p->cbor;
    Py_ssize_t count = l->p->num_blocks, block_size = l->p->block_size;
    /* block i + ahead laid out in two halves while block i is hashed: its ids read after
     * the first compression, the payload written after the last (each half small enough to
     * run beside a compression's rounds in the out-of-order window); else in one piece */
    int split = block_size <= SPLIT_MAX;
    if (split && layout_through(l, first + l->ahead - 1) != OK) {
        return UNSUPPORTED;
    }
    size_t slot = cbor ? 35 : 46; /* [0x83, 0x58, 0x20, D] / [PROTO, FRAME n, C 0x20, D, 0x94] */
    __m128i from_slot = _mm_loadu_si128((const __m128i *)(keep_mask + 16 - (slot - 32)));
    __m128i d0 = _mm_loadu_si128((const __m128i *)parent);
    __m128i d1 = _mm_loadu_si128((const __m128i *)(parent + 16));
    uint32_t values[SPLIT_MAX];
    for (Py_ssize_t i = first; i < count; i++) {
        int read_next = split && l->laid < count; /* then l->laid == i + ahead */
        if (!split && layout_ahead(l, i) != OK) {
            return UNSUPPORTED;
        }
        size_t k = (size_t)i & l->mask;
        const unsigned char *p = l->buf + l->starts[k] - slot;
        size_t len = l->ends[k] - l->starts[k] + slot;
        __m128i p0, p1, p2;
        if (cbor) {
            p0 = _mm_or_si128(_mm_cvtsi32_si128(0x205883), _mm_slli_si128(d0, 3));
            p1 = _mm_alignr_epi8(d1, d0, 13);
            p2 = _mm_srli_si128(d1, 13);
        }
        else {
            uint64_t frame = len - 11;
            __m128i head = _mm_set_epi64x((long long)((frame >> 40) | 0x43ULL << 24 | 0x20ULL << 32),
                                          (long long)(0x950580ULL | frame << 24));
            p0 = _mm_or_si128(head, _mm_slli_si128(d0, 13));
            p1 = _mm_alignr_epi8(d1, d0, 3);
            p2 = _mm_or_si128(_mm_srli_si128(d1, 3), _mm_set_epi64x(0x94LL << 40, 0));
        }
        __m128i abef = _mm_set_epi32(0x6a09e667, (int)0xbb67ae85, 0x510e527f, (int)0x9b05688c);
        __m128i cdgh = _mm_set_epi32(0x3c6ef372, (int)0xa54ff53a, 0x1f83d9ab, 0x5be0cd19);
        size_t blocks = (len + 9 + 63) / 64;
        int fits = 1;
        for (size_t b = 0; b < blocks; b++) {
            size_t at = 64 * b;
            __m128i w0, w1, w2, w3;
            if (b == 0) { /* len > slot >= 35: the first two words are the slot's */
                w0 = _mm_shuffle_epi8(p0, swap);
                w1 = _mm_shuffle_epi8(p1, swap);
                if (len >= 48) {
                    w2 = _mm_loadu_si128((const __m128i *)(p + 32));
                }
                else { /* the payload ends in word 2 */
                    size_t r = len - 32;
                    w2 = _mm_and_si128(_mm_loadu_si128((const __m128i *)(p + 32)),
                                       _mm_loadu_si128((const __m128i *)(keep_mask + 16 - r)));
                    w2 = _mm_or_si128(w2,
                                      _mm_loadu_si128((const __m128i *)(end_marker + 16 - r)));
                }
                w2 = _mm_shuffle_epi8(_mm_blendv_epi8(w2, p2, from_slot), swap);
            }
            else {
                w0 = message_word(p, len, at);
                w1 = message_word(p, len, at + 16);
                w2 = message_word(p, len, at + 32);
            }
            w3 = message_word(p, len, at + 48);
            if (b + 1 == blocks) {
                uint64_t bits = (uint64_t)len * 8;
                w3 = _mm_or_si128(w3, _mm_set_epi32((int)(uint32_t)bits,
                                                    (int)(uint32_t)(bits >> 32), 0, 0));
            }
            compress(&abef, &cdgh, w0, w1, w2, w3);
            if (b == 0 && read_next) { /* the next block's ids, beside this compression */
                PyObject *const *tokens = l->items + l->laid * block_size;
                for (Py_ssize_t j = 0; j < block_size; j++) {
                    fits &= small_token(tokens[j], &values[j]);
                }
            }
        }
        digest_bytes(abef, cdgh, &d0, &d1);
        PyObject *digest = PyBytes_FromStringAndSize(NULL, 32);
        if (digest == NULL) {
            return FAILED;
        }
        unsigned char *md = (unsigned char *)PyBytes_AS_STRING(digest);
        _mm_storeu_si128((__m128i *)md, d0);
        _mm_storeu_si128((__m128i *)(md + 16), d1);
        PyList_SET_ITEM(result, i, digest);
        if (read_next) {
            if (!fits) {
                return UNSUPPORTED;
            }
            layout_values(l, values); /* its payload, beside the next block's compressions */
        }
    }
    return OK;
}

int
sha_ni_supported(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSSE3) || !(c & bit_SSE4_1)) {
        return 0;
    }
    if (__get_cpuid_max(0, NULL) < 7) {
        return 0;
    }
    __cpuid_count(7, 0, a, b, c, d);
    return (b & bit_SHA) != 0;
}

#else /* not x86-64 with GCC or Clang: OpenSSL only */

void
sha256_ni(const unsigned char *data, size_t len, unsigned char *md)
{
    (void)data;
    (void)len;
    (void)md;
}

int
sha256_ni_chain(Layout *l, Py_ssize_t first, const unsigned char *parent, PyObject *result)
{
    (void)l;
    (void)first;
    (void)parent;
    (void)result;
    PyErr_SetString(PyExc_RuntimeError, "SHA-NI is not built in");
    return FAILED;
}

int
sha_ni_supported(void)
{
    return 0;
}
#endif
