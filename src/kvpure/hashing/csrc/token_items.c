/* kvpure.hashing._chain: token ids below 2**30 as CBOR items or pickle ints, in bulk; and
 * first_bad_token, the scan that checks a prompt's ids.
 *
 * A token id's CBOR item is 1, 2, 3 or 5 bytes (its head, then the value big-endian); its
 * pickle item 2, 3 or 5 (BININT1 / BININT2 / BININT, then the value little-endian). Each
 * item is first made a little-endian 64-bit word whose low bytes are the item, with its
 * length; the items are then packed back to back. Three versions give the same bytes:
 *
 *   scalar   one item at a time (any CPU; also every tail shorter than 8 ids);
 *   avx2     8 words and lengths at a time in vector registers, packed by 8 scalar stores;
 *   vbmi2    as avx2, packed by one byte compression (AVX-512 VBMI2) per 8 items.
 *
 * encode_token_items picks the fastest the CPU has, once (token_items_init), unless
 * KVPURE_TOKEN_ITEMS names one ("scalar", "avx2", "vbmi2"; tests run every one the CPU
 * has through set_token_items).
 */
#include "chain.h"

/* ---------------------------------------------------------------- scalar */

static inline uint64_t
cbor_item_word(uint32_t v, size_t *len)
{
    unsigned k = (unsigned)(v >= 24) + (v >= 0x100) + (v >= 0x10000); /* 0..3 */
    unsigned w = (0x4210u >> (4 * k)) & 0xf;                           /* 0, 1, 2, 4 bytes */
    uint64_t head = k == 0 ? v : 23 + k;                               /* major type 0 */
    uint64_t big_endian = (uint64_t)__builtin_bswap32(v) >> (32 - 8 * w);
    *len = 1 + w;
    return head | big_endian << 8;
}

static inline uint64_t
pickle_item_word(uint32_t v, size_t *len)
{
    unsigned k = (unsigned)(v > 0xff) + (v > 0xffff); /* 0..2 */
    *len = 1 + ((0x421u >> (4 * k)) & 0xf);           /* 2, 3, 5 bytes */
    return ((0x4a4d4bu >> (8 * k)) & 0xff) | (uint64_t)v << 8; /* 'K', 'M', 'J' */
}

static unsigned char *
items_scalar(int cbor, const uint32_t *values, Py_ssize_t n, unsigned char *out)
{
    for (Py_ssize_t j = 0; j < n; j++) {
        size_t len;
        uint64_t word = cbor ? cbor_item_word(values[j], &len) : pickle_item_word(values[j], &len);
        memcpy(out, &word, 8);
        out += len;
    }
    return out;
}

/* ---------------------------------------------------------------- x86-64 vector versions */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_VECTOR_ITEMS 1

/* Eight items' words (two registers of four) and lengths (32-bit lanes). */
__attribute__((target("avx2"))) static inline void
items_8(int cbor, const uint32_t *values, __m256i *low, __m256i *high, __m256i *lengths)
{
    const __m256i one = _mm256_set1_epi32(1);
    __m256i v = _mm256_loadu_si256((const __m256i *)values);
    __m256i head, body, width;
    if (cbor) {
        __m256i c1 = _mm256_cmpgt_epi32(v, _mm256_set1_epi32(23));
        __m256i c2 = _mm256_cmpgt_epi32(v, _mm256_set1_epi32(0xff));
        __m256i c3 = _mm256_cmpgt_epi32(v, _mm256_set1_epi32(0xffff));
        __m256i k = _mm256_sub_epi32(_mm256_setzero_si256(),
                                     _mm256_add_epi32(_mm256_add_epi32(c1, c2), c3));
        width = _mm256_sub_epi32(k, c3); /* 0, 1, 2, 4 */
        head = _mm256_blendv_epi8(v, _mm256_add_epi32(k, _mm256_set1_epi32(23)), c1);
        const __m256i swap = _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13,
                                              12, 3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14,
                                              13, 12);
        __m256i shift = _mm256_sub_epi32(_mm256_set1_epi32(32), _mm256_slli_epi32(width, 3));
        body = _mm256_srlv_epi32(_mm256_shuffle_epi8(v, swap), shift); /* big-endian bytes */
    }
    else {
        __m256i c1 = _mm256_cmpgt_epi32(v, _mm256_set1_epi32(0xff));
        __m256i c2 = _mm256_cmpgt_epi32(v, _mm256_set1_epi32(0xffff));
        __m256i k = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_add_epi32(c1, c2));
        width = _mm256_sub_epi32(_mm256_add_epi32(k, one), c2); /* 1, 2, 4 */
        head = _mm256_permutevar8x32_epi32(_mm256_setr_epi32('K', 'M', 'J', 0, 0, 0, 0, 0), k);
        body = v; /* little-endian as it lies */
    }
    *lengths = _mm256_add_epi32(width, one);
    __m256i head_low = _mm256_cvtepu32_epi64(_mm256_castsi256_si128(head));
    __m256i head_high = _mm256_cvtepu32_epi64(_mm256_extracti128_si256(head, 1));
    __m256i body_low = _mm256_cvtepu32_epi64(_mm256_castsi256_si128(body));
    __m256i body_high = _mm256_cvtepu32_epi64(_mm256_extracti128_si256(body, 1));
    *low = _mm256_or_si256(head_low, _mm256_slli_epi64(body_low, 8));
    *high = _mm256_or_si256(head_high, _mm256_slli_epi64(body_high, 8));
}

__attribute__((target("avx2"))) static unsigned char *
items_avx2(int cbor, const uint32_t *values, Py_ssize_t n, unsigned char *out)
{
    Py_ssize_t j = 0;
    uint64_t words[8];
    uint32_t lengths[8];
    for (; j + 8 <= n; j += 8) {
        __m256i low, high, len;
        items_8(cbor, values + j, &low, &high, &len);
        _mm256_storeu_si256((__m256i *)words, low);
        _mm256_storeu_si256((__m256i *)(words + 4), high);
        _mm256_storeu_si256((__m256i *)lengths, len);
        for (int i = 0; i < 8; i++) {
            memcpy(out, &words[i], 8);
            out += lengths[i];
        }
    }
    _mm256_zeroupper(); /* GCC leaves it out here: the SSE code after would pay for it */
    return items_scalar(cbor, values + j, n - j, out);
}

/* As items_avx2, each 8 items packed by one compression of their words' bytes, under the
 * mask of each word's first `length` bytes. */
__attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512vbmi2"))) static unsigned char *
items_vbmi2(int cbor, const uint32_t *values, Py_ssize_t n, unsigned char *out)
{
    Py_ssize_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256i low, high, len;
        items_8(cbor, values + j, &low, &high, &len);
        /* the byte mask (1 << length) - 1 of each item, one byte per item, in item order */
        __m256i bits = _mm256_sub_epi32(_mm256_sllv_epi32(_mm256_set1_epi32(1), len),
                                        _mm256_set1_epi32(1));
        uint64_t mask = (uint64_t)_mm_cvtsi128_si64(_mm256_cvtepi32_epi8(bits));
        __m512i words = _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
        _mm512_storeu_si512((void *)out, _mm512_maskz_compress_epi8(mask, words));
        out += __builtin_popcountll(mask);
    }
    _mm256_zeroupper();
    return items_scalar(cbor, values + j, n - j, out);
}
#endif

/* ---------------------------------------------------------------- dispatch */

typedef unsigned char *(*ItemsFn)(int, const uint32_t *, Py_ssize_t, unsigned char *);

static ItemsFn items_fn = items_scalar;

unsigned char *
encode_token_items(int cbor, const uint32_t *values, Py_ssize_t n, unsigned char *out)
{
    return items_fn(cbor, values, n, out);
}

/* The versions this CPU runs, fastest last. */
static int
supported(const char *name)
{
    if (strcmp(name, "scalar") == 0) {
        return 1;
    }
#ifdef HAVE_VECTOR_ITEMS
    __builtin_cpu_init();
    if (strcmp(name, "avx2") == 0) {
        return __builtin_cpu_supports("avx2");
    }
    if (strcmp(name, "vbmi2") == 0) {
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512vbmi2");
    }
#endif
    return 0;
}

static const char *const names[] = {"scalar", "avx2", "vbmi2"};

static ItemsFn
function_of(const char *name)
{
#ifdef HAVE_VECTOR_ITEMS
    if (strcmp(name, "avx2") == 0) {
        return items_avx2;
    }
    if (strcmp(name, "vbmi2") == 0) {
        return items_vbmi2;
    }
#endif
    return items_scalar;
}

static const char *current = "scalar";

void
token_items_init(void)
{
    const char *wanted = getenv("KVPURE_TOKEN_ITEMS");
    current = "scalar";
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (supported(names[i]) && (wanted == NULL || strcmp(wanted, names[i]) == 0)) {
            current = names[i];
            if (wanted != NULL) {
                break;
            }
        }
    }
    items_fn = function_of(current);
}

/* set_token_items(name | None) -> the version now in use: None picks the fastest; a name
 * the CPU lacks leaves the version as it is. token_items_versions() -> the names it has. */
PyObject *
set_token_items(PyObject *self, PyObject *name)
{
    if (name == Py_None) {
        current = "scalar";
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            if (supported(names[i])) {
                current = names[i];
            }
        }
    }
    else {
        const char *wanted = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
        if (wanted == NULL) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "set_token_items(name: str | None)");
            return NULL;
        }
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            if (strcmp(wanted, names[i]) == 0 && supported(names[i])) {
                current = names[i];
            }
        }
    }
    items_fn = function_of(current);
    return PyUnicode_FromString(current);
}

PyObject *
token_items_versions(PyObject *self, PyObject *unused)
{
    PyObject *result = PyList_New(0);
    for (size_t i = 0; result != NULL && i < sizeof(names) / sizeof(names[0]); i++) {
        if (supported(names[i])) {
            PyObject *item = PyUnicode_FromString(names[i]);
            if (item == NULL || PyList_Append(result, item) != 0) {
                Py_XDECREF(item);
                Py_CLEAR(result);
                break;
            }
            Py_DECREF(item);
        }
    }
    return result;
}

/* ---------------------------------------------------------------- checks */

/* first_bad_token(token_ids, low, high) -> int: the index of the first item of a list or tuple
 * that is not an int (a bool is not one) or lies outside [low, high] (`high` None: no upper
 * bound), else -1. It runs whether or not the accelerator is switched on: it is a check, and
 * kvpure's Python fallback (accelerator.first_bad_token) gives the same answer. Reading an
 * int calls no Python code, so the items stay borrowed safely; the sequence is held. */
PyObject *
first_bad_token(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !(PyList_CheckExact(args[0]) || PyTuple_CheckExact(args[0])) ||
        !PyLong_CheckExact(args[1]) || !(args[2] == Py_None || PyLong_CheckExact(args[2]))) {
        PyErr_SetString(PyExc_TypeError, "first_bad_token(list | tuple, int, int | None)");
        return NULL;
    }
    long long low = PyLong_AsLongLong(args[1]);
    int bounded = args[2] != Py_None;
    long long high = bounded ? PyLong_AsLongLong(args[2]) : 0;
    if (PyErr_Occurred()) {
        return NULL;
    }
    PyObject *seq = Py_NewRef(args[0]);
    Py_ssize_t bad = -1;
#if PY_VERSION_HEX < 0x030C0000
    /* CPython 3.11: an exact int of ob_size 0 or 1 is in [0, 2**30) */
    int small_ok = low <= 0 && (!bounded || high >= (1LL << 30) - 1);
#endif
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *item = PySequence_Fast_ITEMS(seq)[i];
#if PY_VERSION_HEX < 0x030C0000
        if (small_ok && PyLong_CheckExact(item) && (size_t)Py_SIZE(item) <= 1) {
            continue;
        }
#endif
        if (!PyLong_CheckExact(item) && (!PyLong_Check(item) || PyBool_Check(item))) {
            bad = i;
            break;
        }
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
        if (overflow < 0 || (overflow == 0 && v < low) ||
            (bounded && (overflow > 0 || (overflow == 0 && v > high)))) {
            bad = i;
            break;
        }
    }
    Py_DECREF(seq);
    return PyLong_FromSsize_t(bad);
}
