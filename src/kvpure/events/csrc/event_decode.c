/* kvpure.events._decode: a KV event batch payload read straight into kvpure's structs.
 *
 * vLLM publishes msgspec.msgpack.Encoder().encode(KVEventBatch): an array [ts, events,
 * data_parallel_rank?] whose events are maps, the "type" tag first. kvpure.events.accel
 * configures this module once with kvpure's struct classes (msgspec Structs: their fields
 * are slots at fixed offsets, read here from their member descriptors), each field's kind
 * and the ExtraKey class; decode() then reads the bytes in one pass and fills the slots,
 * with no intermediate lists or dicts.
 *
 * It handles what vLLM's encoder writes and nothing else. For any other input (a key out
 * of the struct's fields, a repeated key, an int ts, a type msgspec would refuse, a cut
 * payload, invalid UTF-8, extra keys that are maps or nest deeper than MAX_NEST) it
 * returns None having built nothing that escapes, and the caller decodes with msgspec,
 * which stays the reference and raises the typed errors. Nothing here runs Python code:
 * the only calls into the runtime are allocations (which may run the collector, whose
 * finalizers can not reach the objects being built) and reference counting.
 *
 * Every tuple built holds only ints, bytes, str, floats, None, bools and other such
 * tuples, so none can be part of a reference cycle: each is untracked by the collector
 * once filled, as CPython does itself for such tuples at its next collection.
 */
#include "msgpack_read.h"

#include <structmember.h>

#define MAX_FIELDS 32
#define MAX_EVENT_TYPES 4
#define MAX_NEST 4

/* The kinds of field values (kvpure.events.accel names them by the same numbers). */
enum {
    K_HASHES = 0,       /* tuple[int | bytes, ...] */
    K_HASH_OPT = 1,     /* int | bytes | None */
    K_INTS = 2,         /* tuple[int, ...] */
    K_INT = 3,          /* int */
    K_INT_OPT = 4,      /* int | None */
    K_STR_OPT = 5,      /* str | None */
    K_EXTRA_KEYS = 6,   /* tuple[ExtraKey | None, ...] | None */
    K_INTS_LISTS = 7,   /* tuple[tuple[int, ...], ...] | None */
    K_LAST = 7,
};

typedef struct {
    PyTypeObject *type;
    char *tag;
    Py_ssize_t tag_len;
    Py_ssize_t num_fields;
    Py_ssize_t num_required; /* the first num_required fields have no default */
    char *names[MAX_FIELDS];
    Py_ssize_t name_lens[MAX_FIELDS];
    Py_ssize_t offsets[MAX_FIELDS];
    int kinds[MAX_FIELDS];
    PyObject *last_str[MAX_FIELDS]; /* K_STR_OPT: the last short value read (owned) */
} EventType;

static EventType event_types[MAX_EVENT_TYPES];
static Py_ssize_t num_event_types = 0;
static PyTypeObject *batch_type = NULL;
static Py_ssize_t batch_offsets[3];
static PyTypeObject *extra_key_type = NULL;

#define SLOT(obj, at) (*(PyObject **)((char *)(obj) + (at)))


static void
untrack(PyObject *obj)
{
    if (PyObject_GC_IsTracked(obj)) {
        PyObject_GC_UnTrack(obj);
    }
}

/* An array of n items read by `item` into a new tuple. */
static int
read_tuple(Reader *r, int (*item)(Reader *, PyObject **), PyObject **out)
{
    Py_ssize_t n;
    if (read_array(r, &n) < 0) {
        return -1;
    }
    PyObject *tuple = PyTuple_New(n);
    if (tuple == NULL) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *value;
        if (item(r, &value) < 0) {
            Py_DECREF(tuple);
            return -1;
        }
        PyTuple_SET_ITEM(tuple, i, value);
    }
    untrack(tuple);
    *out = tuple;
    return 0;
}

static int
read_ints(Reader *r, PyObject **out)
{
    return read_tuple(r, read_int, out);
}

/* One key of an ExtraKey, as msgspec decodes `Any` and kvpure's hook freezes it: a
 * scalar as is, an array as a tuple (nested no deeper than MAX_NEST here). */
static int read_key_value(Reader *r, int depth, PyObject **out);

static int
read_key_items(Reader *r, int depth, PyTypeObject *type, PyObject **out)
{
    Py_ssize_t n;
    if (depth > MAX_NEST || read_array(r, &n) < 0) {
        return -1;
    }
    PyObject *tuple = type == &PyTuple_Type ? PyTuple_New(n) : type->tp_alloc(type, n);
    if (tuple == NULL) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *value;
        if (read_key_value(r, depth + 1, &value) < 0) {
            Py_DECREF(tuple);
            return -1;
        }
        PyTuple_SET_ITEM(tuple, i, value);
    }
    untrack(tuple);
    *out = tuple;
    return 0;
}

static int
read_key_value(Reader *r, int depth, PyObject **out)
{
    if (need(r, 1) < 0) {
        return -1;
    }
    unsigned char b = *r->p;
    if (b == 0xC0) {
        r->p += 1;
        *out = Py_NewRef(Py_None);
        return 0;
    }
    if (b == 0xC2 || b == 0xC3) {
        r->p += 1;
        *out = Py_NewRef(b == 0xC3 ? Py_True : Py_False);
        return 0;
    }
    if (b == 0xCB) {
        if (need(r, 9) < 0) return -1;
        uint64_t bits = be64(r->p + 1);
        double value;
        memcpy(&value, &bits, sizeof value);
        r->p += 9;
        return (*out = PyFloat_FromDouble(value)) ? 0 : -1;
    }
    if (b == 0xCA) {
        if (need(r, 5) < 0) return -1;
        uint32_t bits = be32(r->p + 1);
        float value;
        memcpy(&value, &bits, sizeof value);
        r->p += 5;
        return (*out = PyFloat_FromDouble((double)value)) ? 0 : -1;
    }
    if ((b & 0xE0) == 0xA0 || b == 0xD9 || b == 0xDA || b == 0xDB) {
        return read_str(r, out);
    }
    if (b == 0xC4 || b == 0xC5 || b == 0xC6) {
        return read_bin(r, out);
    }
    if ((b & 0xF0) == 0x90 || b == 0xDC || b == 0xDD) {
        return read_key_items(r, depth, &PyTuple_Type, out);
    }
    return read_int(r, out); /* anything else (maps, ext) is refused there */
}

static int
read_extra_key(Reader *r, PyObject **out)
{
    if (is_nil(r)) {
        *out = Py_NewRef(Py_None);
        return 0;
    }
    return read_key_items(r, 1, extra_key_type, out);
}

static int
read_field(Reader *r, int kind, PyObject **out)
{
    switch (kind) {
    case K_HASHES:
        return read_tuple(r, read_hash, out);
    case K_INTS:
        return read_ints(r, out);
    case K_INT:
        return read_int(r, out);
    default:
        break;
    }
    if (is_nil(r)) {
        *out = Py_NewRef(Py_None);
        return 0;
    }
    switch (kind) {
    case K_HASH_OPT:
        return read_hash(r, out);
    case K_INT_OPT:
        return read_int(r, out);
    case K_STR_OPT:
        return read_str(r, out);
    case K_EXTRA_KEYS:
        return read_tuple(r, read_extra_key, out);
    case K_INTS_LISTS:
        return read_tuple(r, read_ints, out);
    default:
        return -1;
    }
}

/* A str field (or None) where the same short text repeats event after event ("GPU",
 * "full_attention", a LoRA name): when the bytes equal the last value read for this field,
 * that (immutable) str is shared instead of decoding a new one. */
#define MAX_CACHED_STR 64

static int
read_cached_str(Reader *r, PyObject **cache, PyObject **out)
{
    if (is_nil(r)) {
        *out = Py_NewRef(Py_None);
        return 0;
    }
    const char *start;
    Py_ssize_t len;
    if (read_str_span(r, &start, &len) < 0) {
        return -1;
    }
    PyObject *last = *cache;
    if (last != NULL && len <= MAX_CACHED_STR) {
        Py_ssize_t last_len;
        const char *last_text = PyUnicode_AsUTF8AndSize(last, &last_len);
        if (last_text == NULL) {
            return -1;
        }
        if (last_len == len && memcmp(last_text, start, (size_t)len) == 0) {
            *out = Py_NewRef(last);
            return 0;
        }
    }
    PyObject *text = PyUnicode_DecodeUTF8(start, len, NULL); /* invalid UTF-8: not handled */
    if (text == NULL) {
        return -1;
    }
    if (len <= MAX_CACHED_STR) {
        Py_XSETREF(*cache, Py_NewRef(text));
    }
    *out = text;
    return 0;
}

static Py_ssize_t
find_field(const EventType *et, const char *name, Py_ssize_t len, Py_ssize_t hint)
{
    if (hint < et->num_fields && et->name_lens[hint] == len &&
        memcmp(et->names[hint], name, (size_t)len) == 0) {
        return hint;
    }
    for (Py_ssize_t i = 0; i < et->num_fields; i++) {
        if (et->name_lens[i] == len && memcmp(et->names[i], name, (size_t)len) == 0) {
            return i;
        }
    }
    return -1;
}

static int
read_event(Reader *r, PyObject **out)
{
    Py_ssize_t num_keys;
    const char *name;
    Py_ssize_t len;
    if (read_map(r, &num_keys) < 0 || num_keys < 1 || read_str_span(r, &name, &len) < 0 ||
        len != 4 || memcmp(name, "type", 4) != 0 || read_str_span(r, &name, &len) < 0) {
        return -1;
    }
    EventType *et = NULL;
    for (Py_ssize_t i = 0; i < num_event_types; i++) {
        if (event_types[i].tag_len == len && memcmp(event_types[i].tag, name, (size_t)len) == 0) {
            et = &event_types[i];
            break;
        }
    }
    if (et == NULL) {
        return -1;
    }
    PyObject *values[MAX_FIELDS] = {NULL};
    Py_ssize_t next = 0;
    int ok = 0;
    for (Py_ssize_t k = 1; k < num_keys; k++) {
        if (read_str_span(r, &name, &len) < 0) {
            goto done;
        }
        Py_ssize_t at = find_field(et, name, len, next);
        if (at < 0 || values[at] != NULL) {
            goto done;
        }
        int read = et->kinds[at] == K_STR_OPT
                       ? read_cached_str(r, &et->last_str[at], &values[at])
                       : read_field(r, et->kinds[at], &values[at]);
        if (read < 0) {
            goto done;
        }
        next = at + 1;
    }
    for (Py_ssize_t i = 0; i < et->num_required; i++) {
        if (values[i] == NULL) {
            goto done;
        }
    }
    PyObject *event = et->type->tp_alloc(et->type, 0);
    if (event == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < et->num_fields; i++) {
        SLOT(event, et->offsets[i]) = values[i] != NULL ? values[i] : Py_NewRef(Py_None);
        values[i] = NULL;
    }
    *out = event;
    ok = 1;
done:
    for (Py_ssize_t i = 0; i < et->num_fields; i++) {
        Py_XDECREF(values[i]);
    }
    return ok ? 0 : -1;
}

static PyObject *
read_batch(Reader *r)
{
    Py_ssize_t n;
    if (read_array(r, &n) < 0 || n < 2 || n > 3 || need(r, 1) < 0) {
        return NULL;
    }
    double ts;
    unsigned char b = *r->p;
    if (b == 0xCB && need(r, 9) == 0) {
        uint64_t bits = be64(r->p + 1);
        memcpy(&ts, &bits, sizeof ts);
        r->p += 9;
    }
    else if (b == 0xCA && need(r, 5) == 0) {
        uint32_t bits = be32(r->p + 1);
        float value;
        memcpy(&value, &bits, sizeof value);
        ts = value;
        r->p += 5;
    }
    else {
        return NULL; /* an int ts (msgspec reads it as a float) and the rest: msgspec */
    }
    PyObject *events = NULL, *rank = NULL, *ts_value = NULL;
    if (read_tuple(r, read_event, &events) < 0) {
        return NULL;
    }
    if (n == 3) {
        if (is_nil(r)) {
            rank = Py_NewRef(Py_None);
        }
        else if (read_int(r, &rank) < 0) {
            goto fail;
        }
    }
    else {
        rank = Py_NewRef(Py_None);
    }
    if (r->p != r->end || (ts_value = PyFloat_FromDouble(ts)) == NULL) {
        goto fail;
    }
    PyObject *batch = batch_type->tp_alloc(batch_type, 0);
    if (batch == NULL) {
        goto fail;
    }
    SLOT(batch, batch_offsets[0]) = ts_value;
    SLOT(batch, batch_offsets[1]) = events;
    SLOT(batch, batch_offsets[2]) = rank;
    return batch;
fail:
    Py_XDECREF(events);
    Py_XDECREF(rank);
    Py_XDECREF(ts_value);
    return NULL;
}

/* decode(payload: bytes) -> KVEventBatch | None */
static PyObject *
ev_decode(PyObject *self, PyObject *payload)
{
    if (batch_type == NULL || !PyBytes_CheckExact(payload)) {
        Py_RETURN_NONE;
    }
    Reader r;
    r.p = (const unsigned char *)PyBytes_AS_STRING(payload);
    r.end = r.p + PyBytes_GET_SIZE(payload);
    Py_INCREF(payload); /* the bytes read stay alive whatever a finalizer does */
    PyObject *batch = read_batch(&r);
    Py_DECREF(payload);
    if (batch == NULL) {
        PyErr_Clear(); /* not handled (or out of memory): msgspec decodes it */
        Py_RETURN_NONE;
    }
    return batch;
}

static Py_ssize_t
slot_offset(PyObject *descr)
{
    if (!PyObject_TypeCheck(descr, &PyMemberDescr_Type)) {
        PyErr_SetString(PyExc_TypeError, "configure: a field is not a slot descriptor");
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != T_OBJECT_EX) {
        PyErr_SetString(PyExc_TypeError, "configure: a field is not an object slot");
        return -1;
    }
    return member->offset;
}

static char *
copy_utf8(PyObject *text, Py_ssize_t *len)
{
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, len);
    if (utf8 == NULL) {
        return NULL;
    }
    char *copy = PyMem_Malloc((size_t)*len + 1);
    if (copy == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(copy, utf8, (size_t)*len + 1);
    return copy;
}

/* configure(batch_type, batch_descrs, extra_key_type, events): events is a tuple of
 * (type, tag, num_required, ((name, descr, kind), ...)). Called once, by
 * kvpure.events.accel; any inconsistency raises and leaves the module unconfigured. */
static PyObject *
ev_configure(PyObject *self, PyObject *args)
{
    PyObject *btype, *bdescrs, *ktype, *events;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyType_Type, &btype, &PyTuple_Type, &bdescrs,
                          &PyType_Type, &ktype, &PyTuple_Type, &events)) {
        return NULL;
    }
    if (batch_type != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure: already configured");
        return NULL;
    }
    if (PyTuple_GET_SIZE(bdescrs) != 3 || PyTuple_GET_SIZE(events) > MAX_EVENT_TYPES ||
        !PyType_IsSubtype((PyTypeObject *)ktype, &PyTuple_Type) ||
        ((PyTypeObject *)ktype)->tp_basicsize != PyTuple_Type.tp_basicsize) {
        PyErr_SetString(PyExc_ValueError, "configure: unexpected layout");
        return NULL;
    }
    Py_ssize_t offsets[3];
    for (Py_ssize_t i = 0; i < 3; i++) {
        if ((offsets[i] = slot_offset(PyTuple_GET_ITEM(bdescrs, i))) < 0) {
            return NULL;
        }
    }
    EventType parsed[MAX_EVENT_TYPES];
    memset(parsed, 0, sizeof parsed);
    Py_ssize_t count = 0;
    for (; count < PyTuple_GET_SIZE(events); count++) {
        EventType *et = &parsed[count];
        PyObject *type, *tag, *fields;
        Py_ssize_t required;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(events, count), "O!UnO!", &PyType_Type, &type,
                              &tag, &required, &PyTuple_Type, &fields)) {
            goto fail;
        }
        Py_ssize_t nf = PyTuple_GET_SIZE(fields);
        if (nf > MAX_FIELDS || required < 0 || required > nf) {
            PyErr_SetString(PyExc_ValueError, "configure: unexpected fields");
            goto fail;
        }
        et->type = (PyTypeObject *)type;
        if ((et->tag = copy_utf8(tag, &et->tag_len)) == NULL) {
            goto fail;
        }
        et->num_required = required;
        for (Py_ssize_t i = 0; i < nf; i++) {
            PyObject *name, *descr;
            int kind;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fields, i), "UOi", &name, &descr, &kind)) {
                goto fail;
            }
            if (kind < 0 || kind > K_LAST) {
                PyErr_SetString(PyExc_ValueError, "configure: unknown field kind");
                goto fail;
            }
            et->kinds[i] = kind;
            if ((et->offsets[i] = slot_offset(descr)) < 0 ||
                (et->names[i] = copy_utf8(name, &et->name_lens[i])) == NULL) {
                goto fail;
            }
            et->num_fields = i + 1;
        }
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_INCREF(parsed[i].type);
        event_types[i] = parsed[i];
    }
    num_event_types = count;
    Py_INCREF(ktype);
    extra_key_type = (PyTypeObject *)ktype;
    memcpy(batch_offsets, offsets, sizeof offsets);
    Py_INCREF(btype);
    batch_type = (PyTypeObject *)btype;
    Py_RETURN_NONE;
fail:
    for (Py_ssize_t i = 0; i <= count && i < MAX_EVENT_TYPES; i++) {
        PyMem_Free(parsed[i].tag);
        for (Py_ssize_t j = 0; j < parsed[i].num_fields; j++) {
            PyMem_Free(parsed[i].names[j]);
        }
    }
    return NULL;
}

static PyMethodDef methods[] = {
    {"configure", ev_configure, METH_VARARGS,
     "configure(batch_type, batch_descrs, extra_key_type, events): kvpure's structs."},
    {"decode", ev_decode, METH_O,
     "decode(payload) -> KVEventBatch | None: the batch, or None (not handled here)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "kvpure.events._decode",
    .m_doc = "KV event payloads read straight into kvpure's structs (see kvpure.events.accel).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__decode(void)
{
    return PyModule_Create(&module);
}
