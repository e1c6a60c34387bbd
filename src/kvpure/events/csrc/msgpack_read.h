/* MessagePack atoms for kvpure.events._decode (event_decode.c): a reader over a payload
 * that checks the bytes left before every read. */
#ifndef KVPURE_MSGPACK_READ_H
#define KVPURE_MSGPACK_READ_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
} Reader;

static inline int
need(Reader *r, Py_ssize_t n)
{
    return (r->end - r->p) >= n ? 0 : -1;
}

static inline uint16_t
be16(const unsigned char *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static inline uint32_t
be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t
be64(const unsigned char *p)
{
    return ((uint64_t)be32(p) << 32) | be32(p + 4);
}

static inline int
is_nil(Reader *r)
{
    if (r->p < r->end && *r->p == 0xC0) {
        r->p += 1;
        return 1;
    }
    return 0;
}

static inline int
is_bin(Reader *r)
{
    return r->p < r->end && (*r->p == 0xC4 || *r->p == 0xC5 || *r->p == 0xC6);
}

/* Every reader returns 0 on success, -1 when the input is not handled (or on an
 * allocation failure, the Python error set): the caller gives up either way. */
int read_array(Reader *r, Py_ssize_t *len);
int read_map(Reader *r, Py_ssize_t *len);
int read_str_span(Reader *r, const char **start, Py_ssize_t *len);
int read_int(Reader *r, PyObject **out);
int read_bin(Reader *r, PyObject **out);
int read_str(Reader *r, PyObject **out);
int read_hash(Reader *r, PyObject **out);

#endif /* KVPURE_MSGPACK_READ_H */
