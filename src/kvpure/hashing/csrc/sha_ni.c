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
sha_ni_supported(void)
{
    return 0;
}
#endif
