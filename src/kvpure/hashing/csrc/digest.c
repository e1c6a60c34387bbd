/* kvpure.hashing._chain: the two digests.
 *
 * SHA-256 is sha_ni.c's where the CPU has the SHA extensions (checked against OpenSSL at
 * import), else OpenSSL's SHA256_Init/Update/Final (measured on OpenSSL 3.0: 127 ns for a 90-byte
 * payload, against 800 ns for its one-shot SHA256(), which fetches the algorithm per call, and
 * 214 ns through EVP with a fetched digest); where a build of OpenSSL lacks the deprecated
 * low-level calls, EVP with the digest fetched once. XXH3-128 is taken from the shared library
 * libxxhash.so.0 (Debian's libxxhash0) through dlopen where it is installed and passes a
 * self-check against the xxhash package at init; else the package's xxh3_128_digest is
 * called through the CPython API (the one callback the chain loop can make).
 */
#define OPENSSL_SUPPRESS_DEPRECATED /* SHA256_Init & co.: 6x faster than SHA256() in 3.0 */
#include "chain.h"

#include <dlfcn.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

/* ---------------------------------------------------------------- SHA-256 */

#ifdef OPENSSL_NO_DEPRECATED_3_0
static EVP_MD *sha256_md = NULL; /* fetched at import */
#endif

static int use_sha_ni = 0;    /* sha_ni.c's, where the CPU has it and it agrees with OpenSSL */
static int sha_ni_checked = 0; /* the same, kept while switched off */

#define SHA_NI_STACK 512 /* a message up to this long is copied to a buffer with slack */

static int sha256_openssl(const unsigned char *data, size_t len, unsigned char *md);

static int
sha256_digest(const unsigned char *data, size_t len, unsigned char *md)
{
    if (use_sha_ni && len <= SHA_NI_STACK) {
        unsigned char padded[SHA_NI_STACK + 16];
        memcpy(padded, data, len);
        sha256_ni(padded, len, md);
        return OK;
    }
    return sha256_openssl(data, len, md);
}

static int
sha256_openssl(const unsigned char *data, size_t len, unsigned char *md)
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

static Xxh3_128_fn native_xxh3 = NULL; /* libxxhash.so.0's XXH3_128bits, once checked */
static Xxh3_128_fn loaded_xxh3 = NULL; /* the same, kept while native use is switched off */
static PyObject *python_xxh3 = NULL;   /* xxhash.xxh3_128_digest */

static void
xxh3_native_digest(Xxh3_128_fn fn, const unsigned char *data, size_t len, unsigned char *md)
{
    Xxh128 h = fn(data, len);
    uint64_t high = __builtin_bswap64(h.high64), low = __builtin_bswap64(h.low64);
    memcpy(md, &high, 8); /* canonical form: high half, then low, big-endian */
    memcpy(md + 8, &low, 8);
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
PyObject *
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
PyObject *
set_native_xxhash(PyObject *self, PyObject *flag)
{
    int enabled = PyObject_IsTrue(flag);
    if (enabled < 0) {
        return NULL;
    }
    native_xxh3 = enabled ? loaded_xxh3 : NULL;
    return route_name();
}

PyObject *
xxhash_route(PyObject *self, PyObject *unused)
{
    return route_name();
}

/* ---------------------------------------------------------------- either */

int
digest_ready(int algo)
{
    return algo == ALGO_SHA256 || algo == ALGO_SHA256_CBOR || python_xxh3 != NULL;
}

Xxh3_128_fn
native_xxh3_fn(void)
{
    return native_xxh3;
}

int
block_digest_padded(int algo, const unsigned char *data, size_t len, unsigned char *md)
{
    if (use_sha_ni && (algo == ALGO_SHA256 || algo == ALGO_SHA256_CBOR)) {
        sha256_ni(data, len, md);
        return OK;
    }
    return block_digest(algo, data, len, md);
}

/* Whether sha256_ni agrees with OpenSSL on every length from 0 to 300: 1, 0, or FAILED. */
static int
sha_ni_agrees(void)
{
    unsigned char data[300 + 16], expected[32], got[32];
    for (size_t i = 0; i < sizeof(data); i++) {
        data[i] = (unsigned char)(i * 167 + 13);
    }
    for (size_t len = 0; len <= 300; len++) {
        if (sha256_openssl(data, len, expected) != OK) {
            return FAILED;
        }
        sha256_ni(data, len, got);
        if (memcmp(expected, got, 32) != 0) {
            return 0;
        }
    }
    return 1;
}

int
sha_ni_in_use(void)
{
    return use_sha_ni;
}

static PyObject *
sha_route_name(void)
{
    return PyUnicode_FromString(use_sha_ni ? "sha-ni" : "openssl");
}

/* set_sha_ni(enabled) -> the SHA-256 route now in use ("sha-ni" only where checked). */
PyObject *
set_sha_ni(PyObject *self, PyObject *flag)
{
    int enabled = PyObject_IsTrue(flag);
    if (enabled < 0) {
        return NULL;
    }
    use_sha_ni = enabled && sha_ni_checked;
    return sha_route_name();
}

PyObject *
sha_route(PyObject *self, PyObject *unused)
{
    return sha_route_name();
}

int
block_digest(int algo, const unsigned char *data, size_t len, unsigned char *md)
{
    if (algo == ALGO_SHA256 || algo == ALGO_SHA256_CBOR) {
        return sha256_digest(data, len, md);
    }
    if (native_xxh3 != NULL) {
        xxh3_native_digest(native_xxh3, data, len, md);
        return OK;
    }
    return xxh3_python_digest(data, len, md);
}

/* Fetches what the digests need once, at import: OK, or FAILED with an exception set. */
int
digest_init(void)
{
    if (sha_ni_supported()) {
        int agrees = sha_ni_agrees();
        if (agrees == FAILED) {
            return FAILED;
        }
        use_sha_ni = sha_ni_checked = agrees;
    }
#ifdef OPENSSL_NO_DEPRECATED_3_0
    if (sha256_md == NULL && (sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL)) == NULL) {
        PyErr_SetString(PyExc_ImportError, "OpenSSL has no SHA-256");
        return FAILED;
    }
#endif
    return OK;
}

/* floor_digests(algo, payloads) -> bytes: the digest of every payload (a list of bytes) in a
 * C loop, returning the last one: the hashing floor that bench/bench_hash_vllm034.py sets
 * kvpure's time against (the same SHA-256 / XXH3-128 calls as the chain, nothing else). */
PyObject *
floor_digests(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyLong_CheckExact(args[0]) || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "floor_digests(algo, payloads: list[bytes])");
        return NULL;
    }
    int algo = (int)PyLong_AsLong(args[0]);
    if (algo < ALGO_SHA256 || algo > ALGO_XXHASH_CBOR || !digest_ready(algo)) {
        PyErr_SetString(PyExc_ValueError, "floor_digests: unknown or unready algorithm");
        return NULL;
    }
    PyObject *payloads = Py_NewRef(args[1]);
    Py_ssize_t n = PyList_GET_SIZE(payloads);
    unsigned char md[32] = {0};
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(payloads, i);
        if (!PyBytes_CheckExact(item)) {
            Py_DECREF(payloads);
            PyErr_SetString(PyExc_TypeError, "floor_digests: payloads are bytes");
            return NULL;
        }
        if (block_digest(algo, (const unsigned char *)PyBytes_AS_STRING(item),
                         (size_t)PyBytes_GET_SIZE(item), md) != OK) {
            Py_DECREF(payloads);
            return NULL;
        }
    }
    Py_DECREF(payloads);
    return PyBytes_FromStringAndSize((const char *)md, (Py_ssize_t)digest_size(algo));
}
