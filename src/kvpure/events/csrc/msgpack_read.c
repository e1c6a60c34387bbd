/* MessagePack atoms for kvpure.events._decode (see msgpack_read.h). */
#include "msgpack_read.h"

/* An array header: its length, checked against the bytes left (an item takes >= 1). */
int
read_array(Reader *r, Py_ssize_t *len)
{
    if (need(r, 1) < 0) {
        return -1;
    }
    unsigned char b = *r->p;
    Py_ssize_t n;
    if ((b & 0xF0) == 0x90) {
        n = b & 0x0F;
        r->p += 1;
    }
    else if (b == 0xDC) {
        if (need(r, 3) < 0) {
            return -1;
        }
        n = be16(r->p + 1);
        r->p += 3;
    }
    else if (b == 0xDD) {
        if (need(r, 5) < 0) {
            return -1;
        }
        n = (Py_ssize_t)be32(r->p + 1);
        r->p += 5;
    }
    else {
        return -1;
    }
    if (n > r->end - r->p) {
        return -1;
    }
    *len = n;
    return 0;
}

int
read_map(Reader *r, Py_ssize_t *len)
{
    if (need(r, 1) < 0) {
        return -1;
    }
    unsigned char b = *r->p;
    Py_ssize_t n;
    if ((b & 0xF0) == 0x80) {
        n = b & 0x0F;
        r->p += 1;
    }
    else if (b == 0xDE) {
        if (need(r, 3) < 0) {
            return -1;
        }
        n = be16(r->p + 1);
        r->p += 3;
    }
    else if (b == 0xDF) {
        if (need(r, 5) < 0) {
            return -1;
        }
        n = (Py_ssize_t)be32(r->p + 1);
        r->p += 5;
    }
    else {
        return -1;
    }
    if (n > (r->end - r->p) / 2) {
        return -1;
    }
    *len = n;
    return 0;
}

/* A str header: where its bytes start and how many (not read further). */
int
read_str_span(Reader *r, const char **start, Py_ssize_t *len)
{
    if (need(r, 1) < 0) {
        return -1;
    }
    unsigned char b = *r->p;
    Py_ssize_t n, head;
    if ((b & 0xE0) == 0xA0) {
        n = b & 0x1F;
        head = 1;
    }
    else if (b == 0xD9) {
        if (need(r, 2) < 0) {
            return -1;
        }
        n = r->p[1];
        head = 2;
    }
    else if (b == 0xDA) {
        if (need(r, 3) < 0) {
            return -1;
        }
        n = be16(r->p + 1);
        head = 3;
    }
    else if (b == 0xDB) {
        if (need(r, 5) < 0) {
            return -1;
        }
        n = (Py_ssize_t)be32(r->p + 1);
        head = 5;
    }
    else {
        return -1;
    }
    if (need(r, head + n) < 0) {
        return -1;
    }
    *start = (const char *)r->p + head;
    *len = n;
    r->p += head + n;
    return 0;
}

/* An int of any MessagePack width, as msgspec reads it into an `int` field. */
int
read_int(Reader *r, PyObject **out)
{
    if (need(r, 1) < 0) {
        return -1;
    }
    const unsigned char *p = r->p;
    unsigned char b = p[0];
    if (b <= 0x7F) {
        r->p += 1;
        return (*out = PyLong_FromLong(b)) ? 0 : -1;
    }
    if (b >= 0xE0) {
        r->p += 1;
        return (*out = PyLong_FromLong((long)(int8_t)b)) ? 0 : -1;
    }
    switch (b) {
    case 0xCC:
        if (need(r, 2) < 0) return -1;
        r->p += 2;
        *out = PyLong_FromLong(p[1]);
        break;
    case 0xCD:
        if (need(r, 3) < 0) return -1;
        r->p += 3;
        *out = PyLong_FromLong(be16(p + 1));
        break;
    case 0xCE:
        if (need(r, 5) < 0) return -1;
        r->p += 5;
        *out = PyLong_FromLongLong(be32(p + 1));
        break;
    case 0xCF:
        if (need(r, 9) < 0) return -1;
        r->p += 9;
        *out = PyLong_FromUnsignedLongLong(be64(p + 1));
        break;
    case 0xD0:
        if (need(r, 2) < 0) return -1;
        r->p += 2;
        *out = PyLong_FromLong((int8_t)p[1]);
        break;
    case 0xD1:
        if (need(r, 3) < 0) return -1;
        r->p += 3;
        *out = PyLong_FromLong((int16_t)be16(p + 1));
        break;
    case 0xD2:
        if (need(r, 5) < 0) return -1;
        r->p += 5;
        *out = PyLong_FromLong((int32_t)be32(p + 1));
        break;
    case 0xD3:
        if (need(r, 9) < 0) return -1;
        r->p += 9;
        *out = PyLong_FromLongLong((int64_t)be64(p + 1));
        break;
    default:
        return -1;
    }
    return *out ? 0 : -1;
}

int
read_bin(Reader *r, PyObject **out)
{
    if (need(r, 1) < 0) {
        return -1;
    }
    unsigned char b = *r->p;
    Py_ssize_t n, head;
    if (b == 0xC4) {
        if (need(r, 2) < 0) return -1;
        n = r->p[1];
        head = 2;
    }
    else if (b == 0xC5) {
        if (need(r, 3) < 0) return -1;
        n = be16(r->p + 1);
        head = 3;
    }
    else if (b == 0xC6) {
        if (need(r, 5) < 0) return -1;
        n = (Py_ssize_t)be32(r->p + 1);
        head = 5;
    }
    else {
        return -1;
    }
    if (need(r, head + n) < 0) {
        return -1;
    }
    *out = PyBytes_FromStringAndSize((const char *)r->p + head, n);
    r->p += head + n;
    return *out ? 0 : -1;
}

int
read_str(Reader *r, PyObject **out)
{
    const char *start;
    Py_ssize_t len;
    if (read_str_span(r, &start, &len) < 0) {
        return -1;
    }
    *out = PyUnicode_DecodeUTF8(start, len, NULL); /* invalid UTF-8: not handled */
    return *out ? 0 : -1;
}

int
read_hash(Reader *r, PyObject **out)
{
    return is_bin(r) ? read_bin(r, out) : read_int(r, out);
}
