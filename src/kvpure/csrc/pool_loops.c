/* kvpure._pool_loops: the block pool's per-block loops in C.
 *
 * kvpure.cache.pool_loops holds the reference loops in Python; each function here runs the
 * same loop from a start position over the same slots (KVCacheBlock is a __slots__ class:
 * configure() is given the member descriptors once and the slots are read and written at
 * their offsets). Each function returns how far it got: the position of the first item it
 * does not handle (an item that is not exactly a KVCacheBlock, a slot of an unexpected
 * type, a hash that is not bytes, a block that makes the reference raise), and the caller
 * runs the Python loop from there, which does the rest or raises the typed error. An item
 * is checked before any of its slots is written, so a stop leaves that item untouched.
 *
 * References: every borrowed object used across a call that may allocate a container
 * (and so run the garbage collector, and so finalizers) is held with Py_INCREF for the
 * iteration; lists and sequences are re-measured every iteration.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

static PyTypeObject *block_type = NULL;
static PyTypeObject *queue_type = NULL;
static PyObject *null_tag = NULL;
static Py_ssize_t prev_at = -1, next_at = -1, owner_at = -1, id_at = -1, ref_at = -1,
                  entry_at = -1, count_at = -1;

#define SLOT(obj, at) (*(PyObject **)((char *)(obj) + (at)))

static Py_ssize_t
slot_offset(PyObject *descr, const char *name)
{
    if (!PyObject_TypeCheck(descr, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "configure: %s is not a slot descriptor", name);
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != T_OBJECT_EX || (member->flags & READONLY)) {
        PyErr_Format(PyExc_TypeError, "configure: %s is not a writable object slot", name);
        return -1;
    }
    return member->offset;
}

/* configure(block_type, queue_type, null_tag, prev, next, owner, block_id, ref_cnt,
 *           hash_entry, num_free_blocks) */
static PyObject *
pl_configure(PyObject *self, PyObject *args)
{
    PyObject *btype, *qtype, *tag, *d[7];
    if (!PyArg_ParseTuple(args, "O!O!OOOOOOOO", &PyType_Type, &btype, &PyType_Type, &qtype,
                          &tag, &d[0], &d[1], &d[2], &d[3], &d[4], &d[5], &d[6])) {
        return NULL;
    }
    static const char *names[7] = {"prev_free_block", "next_free_block", "_queue", "block_id",
                                   "ref_cnt", "_hash_entry", "_num_free_blocks"};
    Py_ssize_t at[7];
    for (int i = 0; i < 7; i++) {
        at[i] = slot_offset(d[i], names[i]);
        if (at[i] < 0) {
            return NULL;
        }
    }
    Py_INCREF(btype);
    Py_XSETREF(block_type, (PyTypeObject *)btype);
    Py_INCREF(qtype);
    Py_XSETREF(queue_type, (PyTypeObject *)qtype);
    Py_INCREF(tag);
    Py_XSETREF(null_tag, tag);
    prev_at = at[0];
    next_at = at[1];
    owner_at = at[2];
    id_at = at[3];
    ref_at = at[4];
    entry_at = at[5];
    count_at = at[6];
    Py_RETURN_NONE;
}

static int
is_block(PyObject *obj)
{
    return block_type != NULL && obj != NULL && Py_TYPE(obj) == block_type;
}

/* The block's reference count, when its slot holds an exact int in range. */
static int
read_count(PyObject *obj, Py_ssize_t at, long *out)
{
    PyObject *value = SLOT(obj, at);
    if (value == NULL || !PyLong_CheckExact(value)) {
        return 0;
    }
    long count = PyLong_AsLong(value);
    if (count == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (count <= LONG_MIN + 1 || count >= LONG_MAX - 1) {
        return 0;
    }
    *out = count;
    return 1;
}

/* Store an int in a slot (an int's allocation runs no collector). */
static int
write_count(PyObject *obj, Py_ssize_t at, long count)
{
    PyObject *value = PyLong_FromLong(count);
    if (value == NULL) {
        return -1;
    }
    PyObject *old = SLOT(obj, at);
    SLOT(obj, at) = value;
    Py_XDECREF(old);
    return 0;
}

static void
set_slot(PyObject *obj, Py_ssize_t at, PyObject *value)
{
    Py_INCREF(value);
    PyObject *old = SLOT(obj, at);
    SLOT(obj, at) = value;
    Py_XDECREF(old);
}

static int
configured(void)
{
    return block_type != NULL;
}

static int
parse_start(PyObject *arg, Py_ssize_t *start)
{
    *start = PyLong_AsSsize_t(arg);
    if (*start == -1 && PyErr_Occurred()) {
        return -1;
    }
    return 0;
}

/* A cached block's token count, (index + 1) * block_size, as a shared int: one table of
 * TOKEN_INTS ints per block size (up to TOKEN_TABLES sizes at once; an int is immutable, so
 * handing out the same one changes no value). Past the table, a new int. */
#define TOKEN_INTS 16384
#define TOKEN_TABLES 4
static struct {
    Py_ssize_t block_size;
    PyObject *ints[TOKEN_INTS];
} token_tables[TOKEN_TABLES];

static PyObject *
token_count(Py_ssize_t index, Py_ssize_t block_size)
{
    if (index < 0 || index >= TOKEN_INTS || block_size <= 0) {
        return PyLong_FromSsize_t((index + 1) * block_size);
    }
    for (int t = 0; t < TOKEN_TABLES; t++) {
        if (token_tables[t].block_size == 0) {
            token_tables[t].block_size = block_size;
        }
        if (token_tables[t].block_size != block_size) {
            continue;
        }
        PyObject *value = token_tables[t].ints[index];
        if (value == NULL) {
            value = PyLong_FromSsize_t((index + 1) * block_size);
            if (value == NULL) {
                return NULL;
            }
            token_tables[t].ints[index] = value; /* the table's own reference */
        }
        Py_INCREF(value);
        return value;
    }
    return PyLong_FromSsize_t((index + 1) * block_size);
}

/* hash + suffix as a new bytes object. */
static PyObject *
concat(PyObject *hash, PyObject *suffix)
{
    Py_ssize_t a = PyBytes_GET_SIZE(hash), b = PyBytes_GET_SIZE(suffix);
    PyObject *key = PyBytes_FromStringAndSize(NULL, a + b);
    if (key == NULL) {
        return NULL;
    }
    char *out = PyBytes_AS_STRING(key);
    memcpy(out, PyBytes_AS_STRING(hash), (size_t)a);
    memcpy(out + a, PyBytes_AS_STRING(suffix), (size_t)b);
    return key;
}

/* take(cache, blocks, removed, start, extras) -> int
 *
 * For blocks[start:]: drop the block's hash from the block and from `cache` (a dict of
 * key -> the one block holding it, or {block_id: block} once two blocks did), appending
 * the key to `removed` (a list, or None) when the block was one of its holders, and
 * deleting a key left without holders; then one more reference. `cache` None: references
 * only. A key held by one other block is left to the caller (the reference compares block
 * ids). A block whose id is a key of `extras` (a dict of block id -> its secondary keys,
 * or None) is left to the caller, which drops those keys too. Returns where it stopped. */
static PyObject *
pl_take(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "take(cache, blocks, removed, start, extras)");
        return NULL;
    }
    PyObject *cache = args[0], *blocks = args[1], *removed = args[2], *extras = args[4];
    Py_ssize_t i;
    if (parse_start(args[3], &i) < 0) {
        return NULL;
    }
    if (!configured() || !PyList_CheckExact(blocks) || (cache != Py_None && !PyDict_CheckExact(cache)) ||
        (removed != Py_None && !PyList_CheckExact(removed)) ||
        (extras != Py_None && !PyDict_CheckExact(extras)) || i < 0) {
        return PyLong_FromSsize_t(i < 0 ? 0 : i);
    }
    for (; i < PyList_GET_SIZE(blocks); i++) {
        PyObject *block = PyList_GET_ITEM(blocks, i);
        long count;
        if (!is_block(block) || !read_count(block, ref_at, &count)) {
            break;
        }
        if (cache != Py_None && extras != Py_None && PyDict_GET_SIZE(extras) > 0) {
            PyObject *id = SLOT(block, id_at);
            if (id == NULL) {
                break;
            }
            int has = PyDict_Contains(extras, id);
            if (has < 0) {
                return NULL;
            }
            if (has) {
                break;
            }
        }
        Py_INCREF(block);
        PyObject *entry = SLOT(block, entry_at);
        if (cache != Py_None && entry != NULL && PyTuple_CheckExact(entry)) {
            PyObject *id = SLOT(block, id_at);
            if (PyTuple_GET_SIZE(entry) != 2 || !PyBytes_CheckExact(PyTuple_GET_ITEM(entry, 0)) ||
                id == NULL || !PyLong_CheckExact(id)) {
                Py_DECREF(block);
                break;
            }
            PyObject *key = PyTuple_GET_ITEM(entry, 0);
            PyObject *holders = PyDict_GetItemWithError(cache, key);
            if (holders == NULL && PyErr_Occurred()) {
                Py_DECREF(block);
                return NULL;
            }
            if (holders != NULL && holders != block && !PyDict_CheckExact(holders)) {
                Py_DECREF(block);
                break;
            }
            Py_INCREF(key);
            Py_INCREF(id);
            Py_XINCREF(holders);
            set_slot(block, entry_at, Py_None);
            int failed = 0;
            if (holders == block) {
                /* the one holder: the key leaves with it */
                failed = PyDict_DelItem(cache, key) < 0 ||
                         (removed != Py_None && PyList_Append(removed, key) < 0);
            }
            else if (holders != NULL) {
                PyObject *held = PyDict_GetItemWithError(holders, id);
                if (held == NULL && PyErr_Occurred()) {
                    failed = 1;
                }
                else if (held != NULL && held != Py_None) {
                    /* the reference pops the id and counts a holder that is not None */
                    if (PyDict_DelItem(holders, id) < 0 ||
                        (removed != Py_None && PyList_Append(removed, key) < 0)) {
                        failed = 1;
                    }
                }
                else if (held == Py_None && PyDict_DelItem(holders, id) < 0) {
                    failed = 1;
                }
                if (!failed && PyDict_GET_SIZE(holders) == 0 &&
                    PyDict_DelItem(cache, key) < 0) {
                    failed = 1;
                }
            }
            Py_XDECREF(holders);
            Py_DECREF(id);
            Py_DECREF(key);
            if (failed) {
                Py_DECREF(block);
                return NULL;
            }
        }
        int failed = write_count(block, ref_at, count + 1) < 0;
        Py_DECREF(block);
        if (failed) {
            return NULL;
        }
    }
    return PyLong_FromSsize_t(i);
}

/* store(cache, blocks, hashes, start, stop, first_index, suffix, block_size, null, mask,
 *       stored) -> int
 *
 * For blocks[start:stop] (the k-th at hash index first_index + k): skip `null` and blocks
 * whose mask entry is False; give the block (hashes[index] + suffix, (index+1)*block_size)
 * and add it to cache[key]: the block itself when the key is new, a {block_id: block} dict
 * of both when one block held it, the dict's next entry after that. `stored` (a list
 * or None) collects the hash index of each block cached. Returns where it stopped; a
 * block that already holds a hash is left to the caller (which skips a null block of
 * another pool and raises for any other). */
static PyObject *
pl_store(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError,
                        "store(cache, blocks, hashes, start, stop, first_index, suffix, "
                        "block_size, null, mask, stored)");
        return NULL;
    }
    PyObject *cache = args[0], *blocks = args[1], *hashes = args[2], *suffix = args[6],
             *null = args[8], *mask = args[9], *stored = args[10];
    Py_ssize_t i, stop, first, block_size;
    if (parse_start(args[3], &i) < 0 || parse_start(args[4], &stop) < 0 ||
        parse_start(args[5], &first) < 0 || parse_start(args[7], &block_size) < 0) {
        return NULL;
    }
    if (!configured() || !PyDict_CheckExact(cache) || !PyList_CheckExact(blocks) ||
        !(PyList_CheckExact(hashes) || PyTuple_CheckExact(hashes)) ||
        !PyBytes_CheckExact(suffix) || (mask != Py_None && !PyList_CheckExact(mask)) ||
        (stored != Py_None && !PyList_CheckExact(stored)) || i < 0 || first < 0 ||
        block_size < 0) {
        return PyLong_FromSsize_t(i < 0 ? 0 : i);
    }
    Py_ssize_t origin = i;
    for (; i < stop && i < PyList_GET_SIZE(blocks); i++) {
        PyObject *block = PyList_GET_ITEM(blocks, i);
        if (!is_block(block)) {
            break;
        }
        if (block == null) {
            continue;
        }
        if (mask != Py_None) {
            if (i - origin >= PyList_GET_SIZE(mask)) {
                break;
            }
            PyObject *keep = PyList_GET_ITEM(mask, i - origin);
            if (keep == Py_False) {
                continue;
            }
            if (keep != Py_True) {
                break;
            }
        }
        Py_ssize_t index = first + (i - origin);
        Py_ssize_t size = PySequence_Fast_GET_SIZE(hashes);
        if (index >= size || SLOT(block, entry_at) != Py_None) {
            break; /* the reference raises, or skips another pool's null block */
        }
        PyObject *hash = PySequence_Fast_GET_ITEM(hashes, index);
        PyObject *id = SLOT(block, id_at);
        if (!PyBytes_CheckExact(hash) || id == NULL || !PyLong_CheckExact(id)) {
            break;
        }
        Py_INCREF(block);
        Py_INCREF(hash);
        Py_INCREF(id);
        PyObject *key = concat(hash, suffix);
        PyObject *tokens = key == NULL ? NULL : token_count(index, block_size);
        PyObject *entry = tokens == NULL ? NULL : PyTuple_New(2); /* may collect */
        PyObject *fresh = NULL, *holders = NULL;
        int failed = entry == NULL, handled = 0;
        if (!failed) {
            Py_INCREF(key);
            PyTuple_SET_ITEM(entry, 0, key);
            PyTuple_SET_ITEM(entry, 1, tokens);
            tokens = NULL;
            holders = PyDict_GetItemWithError(cache, key);
            if (holders == NULL && PyErr_Occurred()) {
                failed = 1;
            }
            else if (holders != NULL && is_block(holders)) {
                /* a second holder: the key's block moves into a {block_id: block} dict */
                fresh = PyDict_New(); /* may collect */
                failed = fresh == NULL;
                if (!failed) {
                    holders = PyDict_GetItemWithError(cache, key);
                    failed = holders == NULL && PyErr_Occurred();
                }
            }
            Py_XINCREF(holders);
        }
        PyObject *first_id = NULL;
        if (!failed && holders != NULL && is_block(holders)) {
            first_id = SLOT(holders, id_at);
            if (fresh == NULL || first_id == NULL || !PyLong_CheckExact(first_id)) {
                first_id = NULL; /* left to the reference */
            }
        }
        if (!failed && SLOT(block, entry_at) == Py_None &&
            (holders == NULL || PyDict_CheckExact(holders) || first_id != NULL)) {
            handled = 1;
            Py_INCREF(entry);
            PyObject *old = SLOT(block, entry_at);
            SLOT(block, entry_at) = entry;
            Py_XDECREF(old);
            if (holders == NULL) {
                failed = PyDict_SetItem(cache, key, block) < 0;
            }
            else if (first_id == NULL) {
                failed = PyDict_SetItem(holders, id, block) < 0;
            }
            else {
                Py_INCREF(first_id);
                failed = PyDict_SetItem(fresh, first_id, holders) < 0 ||
                         PyDict_SetItem(fresh, id, block) < 0 ||
                         PyDict_SetItem(cache, key, fresh) < 0;
                Py_DECREF(first_id);
            }
            if (!failed && stored != Py_None) {
                PyObject *at = PyLong_FromSsize_t(index);
                failed = at == NULL || PyList_Append(stored, at) < 0;
                Py_XDECREF(at);
            }
        }
        Py_XDECREF(holders);
        Py_XDECREF(fresh);
        Py_XDECREF(entry);
        Py_XDECREF(tokens);
        Py_XDECREF(key);
        Py_DECREF(id);
        Py_DECREF(hash);
        Py_DECREF(block);
        if (failed) {
            return NULL;
        }
        if (!handled) {
            break;
        }
    }
    return PyLong_FromSsize_t(i);
}

/* release(blocks, plain, hashed, start) -> int
 *
 * For blocks[start:]: one reference less; a block now unreferenced, not the null block, is
 * appended to `hashed` when it holds a hash, else to `plain`. Returns where it stopped. */
static PyObject *
pl_release(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "release(blocks, plain, hashed, start)");
        return NULL;
    }
    PyObject *blocks = args[0], *plain = args[1], *hashed = args[2];
    Py_ssize_t i;
    if (parse_start(args[3], &i) < 0) {
        return NULL;
    }
    if (!configured() || !PyList_CheckExact(blocks) || !PyList_CheckExact(plain) ||
        !PyList_CheckExact(hashed) || i < 0) {
        return PyLong_FromSsize_t(i < 0 ? 0 : i);
    }
    for (; i < PyList_GET_SIZE(blocks); i++) {
        PyObject *block = PyList_GET_ITEM(blocks, i);
        long count;
        if (!is_block(block) || !read_count(block, ref_at, &count)) {
            break;
        }
        PyObject *entry = SLOT(block, entry_at);
        int joins = count - 1 == 0 && entry != null_tag;
        int has_hash = 0;
        if (joins && entry != NULL && PyTuple_CheckExact(entry)) {
            if (PyTuple_GET_SIZE(entry) < 1) {
                break; /* the reference raises reading its hash */
            }
            has_hash = PyTuple_GET_ITEM(entry, 0) != Py_None;
        }
        Py_INCREF(block);
        int failed = write_count(block, ref_at, count - 1) < 0;
        if (!failed && joins) {
            failed = PyList_Append(has_hash ? hashed : plain, block) < 0;
        }
        Py_DECREF(block);
        if (failed) {
            return NULL;
        }
    }
    return PyLong_FromSsize_t(i);
}

/* touch(queue, blocks, start) -> int
 *
 * For blocks[start:]: a block with no reference, not the null block, leaves `queue` (its
 * links and owner set to None, the queue's count one less); then one more reference. A
 * block that should leave but is not in `queue` is left to the caller (which raises).
 * Returns where it stopped. */
static PyObject *
pl_touch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "touch(queue, blocks, start)");
        return NULL;
    }
    PyObject *queue = args[0], *blocks = args[1];
    Py_ssize_t i;
    if (parse_start(args[2], &i) < 0) {
        return NULL;
    }
    if (!configured() || queue_type == NULL || Py_TYPE(queue) != queue_type ||
        !PyList_CheckExact(blocks) || i < 0) {
        return PyLong_FromSsize_t(i < 0 ? 0 : i);
    }
    for (; i < PyList_GET_SIZE(blocks); i++) {
        PyObject *block = PyList_GET_ITEM(blocks, i);
        long count, num_free = 0;
        if (!is_block(block) || !read_count(block, ref_at, &count)) {
            break;
        }
        int leaves = count == 0 && SLOT(block, entry_at) != null_tag;
        PyObject *before = NULL, *after = NULL;
        if (leaves) {
            before = SLOT(block, prev_at);
            after = SLOT(block, next_at);
            if (SLOT(block, owner_at) != queue || !is_block(before) || !is_block(after) ||
                !read_count(queue, count_at, &num_free) || num_free < 1) {
                break;
            }
        }
        Py_INCREF(block);
        if (leaves) {
            Py_INCREF(before);
            Py_INCREF(after);
            set_slot(before, next_at, after);
            set_slot(after, prev_at, before);
            set_slot(block, prev_at, Py_None);
            set_slot(block, next_at, Py_None);
            set_slot(block, owner_at, Py_None);
            Py_DECREF(before);
            Py_DECREF(after);
        }
        int failed = (leaves && write_count(queue, count_at, num_free - 1) < 0) ||
                     write_count(block, ref_at, count + 1) < 0;
        Py_DECREF(block);
        if (failed) {
            return NULL;
        }
    }
    return PyLong_FromSsize_t(i);
}

/* prefix(cache, hashes, suffix, start, limit, found) -> int
 *
 * For hashes[start:limit]: the first holder of cache[hash + suffix] (the block itself, or
 * the first of a {block_id: block} dict) appended to `found`,
 * up to the first key without holders. Returns -1 when the walk is over (a miss, or the
 * limit or the end of hashes reached), else where it stopped. */
static PyObject *
pl_prefix(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "prefix(cache, hashes, suffix, start, limit, found)");
        return NULL;
    }
    PyObject *cache = args[0], *hashes = args[1], *suffix = args[2], *found = args[5];
    Py_ssize_t i, limit;
    if (parse_start(args[3], &i) < 0 || parse_start(args[4], &limit) < 0) {
        return NULL;
    }
    if (!PyDict_CheckExact(cache) || !(PyList_CheckExact(hashes) || PyTuple_CheckExact(hashes)) ||
        !PyBytes_CheckExact(suffix) || !PyList_CheckExact(found) || i < 0 || limit < 0) {
        return PyLong_FromSsize_t(i < 0 ? 0 : i);
    }
    for (; i < limit; i++) {
        if (i >= PySequence_Fast_GET_SIZE(hashes)) {
            return PyLong_FromLong(-1);
        }
        PyObject *hash = PySequence_Fast_GET_ITEM(hashes, i);
        if (!PyBytes_CheckExact(hash)) {
            break;
        }
        PyObject *key = concat(hash, suffix);
        if (key == NULL) {
            return NULL;
        }
        PyObject *holders = PyDict_GetItemWithError(cache, key);
        Py_DECREF(key);
        if (holders == NULL) {
            if (PyErr_Occurred()) {
                return NULL;
            }
            return PyLong_FromLong(-1);
        }
        PyObject *block = holders;
        if (!is_block(holders)) {
            if (!PyDict_CheckExact(holders)) {
                break;
            }
            Py_ssize_t pos = 0;
            PyObject *id;
            if (!PyDict_Next(holders, &pos, &id, &block)) {
                return PyLong_FromLong(-1); /* no holders: a miss */
            }
        }
        if (PyList_Append(found, block) < 0) {
            return NULL;
        }
    }
    if (i >= limit) {
        return PyLong_FromLong(-1);
    }
    return PyLong_FromSsize_t(i);
}

/* evictable(blocks) -> int: how many of `blocks` (a list) have no reference and are not
 * the null block; -1 when an item is not exactly a block with an int count (the caller
 * counts in Python). Reads only. */
static PyObject *
pl_evictable(PyObject *self, PyObject *blocks)
{
    if (!configured() || !PyList_CheckExact(blocks)) {
        return PyLong_FromLong(-1);
    }
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(blocks); i++) {
        PyObject *block = PyList_GET_ITEM(blocks, i);
        long refs;
        if (!is_block(block) || !read_count(block, ref_at, &refs)) {
            return PyLong_FromLong(-1);
        }
        count += refs == 0 && SLOT(block, entry_at) != null_tag;
    }
    return PyLong_FromSsize_t(count);
}

static PyMethodDef methods[] = {
    {"evictable", pl_evictable, METH_O, "Count unreferenced blocks."},
    {"configure", pl_configure, METH_VARARGS, "Give the block and queue classes' slots."},
    {"take", (PyCFunction)(void (*)(void))pl_take, METH_FASTCALL, "Evict and reference."},
    {"store", (PyCFunction)(void (*)(void))pl_store, METH_FASTCALL, "Cache full blocks."},
    {"release", (PyCFunction)(void (*)(void))pl_release, METH_FASTCALL, "Dereference."},
    {"touch", (PyCFunction)(void (*)(void))pl_touch, METH_FASTCALL, "Reference hit blocks."},
    {"prefix", (PyCFunction)(void (*)(void))pl_prefix, METH_FASTCALL, "Longest cached prefix."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "kvpure._pool_loops",
    .m_doc = "The block pool's per-block loops in C (see kvpure.cache.pool_loops).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__pool_loops(void)
{
    return PyModule_Create(&module);
}
