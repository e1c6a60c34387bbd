/* kvpure.hashing._chain: the decoding path.
 *
 * install_decode_append(cls, python_append, default_chain_hasher) puts a C method in place
 * of RequestBlockHashes.append_output_token_ids. It works on the value's own layout (see
 * request_state.py): the `_state` slot holds a chain of tuples (hashed, count, token, rest)
 * ending in (hashed, 0, None, None), and `hashed` is (context, block_size, block_hashes,
 * first_token_ids, chunks, num_hashed_tokens). It handles one exact int, or an exact list or
 * tuple of tokens, with the default chain hasher, where every new full block is past the
 * request's steady start (the decode plan's one-block hasher applies), doing what the
 * Python body does in the same order; every other call is the Python body itself.
 */
#include "chain.h"

#include <structmember.h>

#define STACK_ITEMS 512

/* ---------------------------------------------------------------- the append method */

static PyTypeObject *state_type = NULL; /* RequestBlockHashes */
static Py_ssize_t state_offset = 0;     /* where its `_state` slot lives */
static PyObject *python_append = NULL;  /* the method's Python body */
static PyObject *default_chain_hasher = NULL;
static PyObject *str_plan, *str_steady_start, *str_hash_block, *str_append, *str_chain_hasher,
    *str_lookahead;
static PyObject *append_doc = NULL;
/* the decode plan of the last request context seen (contexts are frozen) */
static PyObject *last_context = NULL, *last_hasher = NULL;
static Py_ssize_t last_steady = 0, last_lookahead = 0;

static PyObject *
delegate(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t total = nargs + (kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[8];
    PyObject **stack = total < 8 ? small : PyMem_Malloc(sizeof(PyObject *) * (size_t)(total + 1));
    if (stack == NULL) {
        return PyErr_NoMemory();
    }
    stack[0] = self;
    memcpy(stack + 1, args, sizeof(PyObject *) * (size_t)total);
    PyObject *result = PyObject_Vectorcall(python_append, stack, nargs + 1, kwnames);
    if (stack != small) {
        PyMem_Free(stack);
    }
    return result;
}

/* A new RequestBlockHashes holding `chain` (stolen). */
static PyObject *
new_state(PyObject *chain)
{
    if (chain == NULL) {
        return NULL;
    }
    PyObject *obj = state_type->tp_alloc(state_type, 0);
    if (obj == NULL) {
        Py_DECREF(chain);
        return NULL;
    }
    *(PyObject **)((char *)obj + state_offset) = chain;
    return obj;
}

static PyObject *
chain_node(PyObject *hashed, Py_ssize_t count, PyObject *token, PyObject *rest /* stolen */)
{
    PyObject *number = PyLong_FromSsize_t(count);
    PyObject *node = number == NULL ? NULL : PyTuple_Pack(4, hashed, number, token, rest);
    Py_XDECREF(number);
    Py_DECREF(rest);
    return node;
}

/* The plan of `context`: 1 with its steady start, lookahead and one-block hasher (borrowed), 0
 * where it has none, FAILED with an exception set. */
static int
plan_of(PyObject *context, Py_ssize_t *steady, Py_ssize_t *lookahead, PyObject **hasher)
{
    if (context != last_context) {
        PyObject *plan = PyObject_GetAttr(context, str_plan);
        if (plan == NULL) {
            return FAILED;
        }
        PyObject *start = plan == Py_None ? NULL : PyObject_GetAttr(plan, str_steady_start);
        PyObject *ahead = start == NULL ? NULL : PyObject_GetAttr(plan, str_lookahead);
        PyObject *function = ahead == NULL ? NULL : PyObject_GetAttr(plan, str_hash_block);
        Py_ssize_t value = start == NULL ? -1 : PyLong_AsSsize_t(start);
        Py_ssize_t tokens = ahead == NULL ? 0 : PyLong_AsSsize_t(ahead);
        Py_DECREF(plan);
        Py_XDECREF(start);
        Py_XDECREF(ahead);
        if (PyErr_Occurred()) {
            Py_XDECREF(function);
            return FAILED;
        }
        Py_XSETREF(last_context, Py_NewRef(context));
        Py_XSETREF(last_hasher, function);
        last_steady = value;
        last_lookahead = tokens < 0 ? 0 : tokens;
    }
    *steady = last_steady;
    *lookahead = last_lookahead;
    *hasher = last_hasher;
    return last_hasher != NULL;
}

static PyObject *
hash_one(PyObject *hasher, PyObject *parent, PyObject *block)
{
    if (Py_IS_TYPE(hasher, &BlockHasherType)) {
        return hasher_digest(hasher, parent, block);
    }
    PyObject *args[2] = {parent, block};
    return PyObject_Vectorcall(hasher, args, 2, NULL);
}

/* Hashes the full blocks among the pending tokens `all` (owned by the caller while this
 * runs) and returns the new state, or NULL with an exception. With lookahead L a block is
 * full once the L tokens after it are there, and the hasher takes the block and those. */
static PyObject *
hash_full_blocks(PyObject *hashed, PyObject *hasher, PyObject **all, Py_ssize_t total,
                 Py_ssize_t block_size, Py_ssize_t num_hashed, Py_ssize_t lookahead)
{
    Py_ssize_t num_blocks = (total - lookahead) / block_size, num_full = num_blocks * block_size;
    PyObject *blocks = PyTuple_New(num_blocks), *rest = PyTuple_New(total - num_full);
    PyObject *windows = lookahead ? PyTuple_New(num_blocks) : NULL;
    PyObject *parent = NULL, *hashes = NULL, *chunks = NULL, *result = NULL;
    if (blocks == NULL || rest == NULL || (lookahead && windows == NULL)) {
        goto done;
    }
    for (Py_ssize_t b = 0; b < num_blocks; b++) {
        PyObject *block = PyTuple_New(block_size);
        if (block == NULL) {
            goto done;
        }
        for (Py_ssize_t i = 0; i < block_size; i++) {
            PyTuple_SET_ITEM(block, i, Py_NewRef(all[b * block_size + i]));
        }
        PyTuple_SET_ITEM(blocks, b, block);
        if (lookahead) { /* the block and the L tokens after it, for the hasher */
            PyObject *window = PyTuple_New(block_size + lookahead);
            if (window == NULL) {
                goto done;
            }
            for (Py_ssize_t i = 0; i < block_size + lookahead; i++) {
                PyTuple_SET_ITEM(window, i, Py_NewRef(all[b * block_size + i]));
            }
            PyTuple_SET_ITEM(windows, b, window);
        }
    }
    for (Py_ssize_t i = num_full; i < total; i++) {
        PyTuple_SET_ITEM(rest, i - num_full, Py_NewRef(all[i]));
    }
    /* from here on Python code may run (a fallback hasher, PVector.append) */
    hashes = Py_NewRef(PyTuple_GET_ITEM(hashed, 2));
    chunks = Py_NewRef(PyTuple_GET_ITEM(hashed, 4));
    Py_ssize_t length = PyObject_Length(hashes);
    parent = length < 1 ? NULL : PySequence_GetItem(hashes, length - 1);
    if (parent == NULL) {
        goto done;
    }
    for (Py_ssize_t b = 0; b < num_blocks; b++) {
        PyObject *block = PyTuple_GET_ITEM(blocks, b);
        PyObject *digest =
            hash_one(hasher, parent, lookahead ? PyTuple_GET_ITEM(windows, b) : block);
        if (digest == NULL) {
            goto done;
        }
        Py_SETREF(parent, digest);
        PyObject *longer = PyObject_CallMethodOneArg(hashes, str_append, digest);
        if (longer == NULL) {
            goto done;
        }
        Py_SETREF(hashes, longer);
        PyObject *joined = PyTuple_Pack(2, chunks, block);
        if (joined == NULL) {
            goto done;
        }
        Py_SETREF(chunks, joined);
    }
    PyObject *count = PyLong_FromSsize_t(num_hashed + num_full);
    PyObject *new_hashed =
        count == NULL ? NULL
                      : PyTuple_Pack(6, PyTuple_GET_ITEM(hashed, 0), PyTuple_GET_ITEM(hashed, 1),
                                     hashes, PyTuple_GET_ITEM(hashed, 3), chunks, count);
    Py_XDECREF(count);
    if (new_hashed == NULL) {
        goto done;
    }
    PyObject *zero = PyLong_FromLong(0);
    PyObject *chain = zero == NULL ? NULL : PyTuple_Pack(4, new_hashed, zero, Py_None, Py_None);
    Py_XDECREF(zero);
    for (Py_ssize_t i = 0; chain != NULL && i < total - num_full; i++) {
        chain = chain_node(new_hashed, i + 1, PyTuple_GET_ITEM(rest, i), chain);
    }
    Py_DECREF(new_hashed);
    result = chain;
done:
    Py_XDECREF(blocks);
    Py_XDECREF(windows);
    Py_XDECREF(rest);
    Py_XDECREF(parent);
    Py_XDECREF(hashes);
    Py_XDECREF(chunks);
    return result;
}

/* Appends `items` (borrowed) after the `count` pending tokens of `node`: the new state, NULL
 * with an exception, or `handled` left 0 where the Python body must run. */
static PyObject *
append_items(PyObject *node, PyObject *hashed, Py_ssize_t count, Py_ssize_t block_size,
             PyObject *const *items, Py_ssize_t n_items, int *handled)
{
    Py_ssize_t total = count + n_items;
    if (total < block_size) { /* no new full block: the chain grows */
        *handled = 1;
        PyObject *chain = Py_NewRef(node);
        for (Py_ssize_t i = 0; chain != NULL && i < n_items; i++) {
            chain = chain_node(hashed, count + i + 1, items[i], chain);
        }
        return new_state(chain);
    }
    Py_ssize_t steady, lookahead;
    PyObject *hasher;
    int has_plan = plan_of(PyTuple_GET_ITEM(hashed, 0), &steady, &lookahead, &hasher);
    Py_ssize_t num_hashed = PyLong_AsSsize_t(PyTuple_GET_ITEM(hashed, 5));
    if (has_plan == FAILED || (num_hashed == -1 && PyErr_Occurred())) {
        *handled = 1;
        return NULL;
    }
    if (!has_plan || num_hashed < steady) {
        return NULL; /* blocks with their own extra keys: the Python body */
    }
    if (total - lookahead < block_size) { /* the next block waits for its lookahead tokens */
        *handled = 1;
        PyObject *chain = Py_NewRef(node);
        for (Py_ssize_t i = 0; chain != NULL && i < n_items; i++) {
            chain = chain_node(hashed, count + i + 1, items[i], chain);
        }
        return new_state(chain);
    }
    PyObject *stack[STACK_ITEMS];
    PyObject **all = total <= STACK_ITEMS ? stack : PyMem_Malloc(sizeof(PyObject *) * total);
    *handled = 1;
    if (all == NULL) {
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = count - 1; i >= 0; i--) { /* the chain holds them newest first */
        all[i] = PyTuple_GET_ITEM(node, 2);
        node = PyTuple_GET_ITEM(node, 3);
    }
    memcpy(all + count, items, sizeof(PyObject *) * (size_t)n_items);
    Py_INCREF(hasher); /* held: the cache may move on while Python code runs */
    PyObject *chain =
        hash_full_blocks(hashed, hasher, all, total, block_size, num_hashed, lookahead);
    Py_DECREF(hasher);
    if (all != stack) {
        PyMem_Free(all);
    }
    return new_state(chain);
}

/* Whether `token` is an exact int in [0, 2**31 - 1]; anything else (a negative id, one past
 * int32, a subclass, an error) goes to the Python body, which refuses it naming the field or,
 * where the profile allows it (an id past int32 under 0.26/0.33), hashes it. */
static int
plain_token(PyObject *token)
{
    if (!PyLong_CheckExact(token)) {
        return 0;
    }
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(token, &overflow);
    if (value == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return overflow == 0 && value >= 0 && value <= INT32_MAX;
}

static int
plain_tokens(PyObject *const *items, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!plain_token(items[i])) {
            return 0;
        }
    }
    return 1;
}

/* RequestBlockHashes.append_output_token_ids(token_ids, *, chain_hasher=...)
 *
 * Every object read is owned while tuples are built (an allocation may run the garbage
 * collector, and a finalizer may run any Python code): the state's chain is held, and a
 * list's or tuple's items are copied, each with a new reference, into an array of this call
 * before anything is allocated, so a finalizer that mutates the caller's list or replaces the
 * state frees nothing this call reads. */
static PyObject *
decode_append(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!accel_enabled || nargs != 1) {
        return delegate(self, args, nargs, kwnames);
    }
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, 0);
        if (PyTuple_GET_SIZE(kwnames) != 1 || args[1] != default_chain_hasher ||
            !PyUnicode_Check(name) || PyUnicode_Compare(name, str_chain_hasher) != 0) {
            return delegate(self, args, nargs, kwnames);
        }
    }
    PyObject *node = *(PyObject **)((char *)self + state_offset);
    if (node == NULL || !PyTuple_CheckExact(node) || PyTuple_GET_SIZE(node) != 4) {
        return delegate(self, args, nargs, kwnames);
    }
    PyObject *hashed = PyTuple_GET_ITEM(node, 0);
    if (!PyTuple_CheckExact(hashed) || PyTuple_GET_SIZE(hashed) != 6 ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(hashed, 1)) ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(node, 1))) {
        return delegate(self, args, nargs, kwnames);
    }
    Py_ssize_t block_size = PyLong_AsSsize_t(PyTuple_GET_ITEM(hashed, 1));
    Py_ssize_t count = PyLong_AsSsize_t(PyTuple_GET_ITEM(node, 1));
    if (block_size < 1 || count < 0) {
        PyErr_Clear();
        return delegate(self, args, nargs, kwnames);
    }
    PyObject *tokens = args[0];
    int handled = 0;
    PyObject *result = NULL;
    Py_INCREF(node); /* held: the state (and `hashed`, its item) outlive any finalizer */
    if (PyLong_CheckExact(tokens)) {
        if (!plain_token(tokens)) {
            Py_DECREF(node);
            return delegate(self, args, nargs, kwnames);
        }
        if (count + 1 < block_size) { /* no new full block: the common step */
            result = new_state(chain_node(hashed, count + 1, tokens, Py_NewRef(node)));
            Py_DECREF(node);
            return result;
        }
        result = append_items(node, hashed, count, block_size, &tokens, 1, &handled);
    }
    else if (PyList_CheckExact(tokens) || PyTuple_CheckExact(tokens)) {
        /* the items, owned: copied with a reference each before any allocation that could
         * run Python code (PyMem_Malloc never runs the garbage collector) */
        Py_ssize_t n = PySequence_Fast_GET_SIZE(tokens);
        PyObject *small[STACK_ITEMS];
        PyObject **items = n <= STACK_ITEMS ? small : PyMem_Malloc(sizeof(PyObject *) * (size_t)n);
        if (items == NULL) {
            Py_DECREF(node);
            return PyErr_NoMemory();
        }
        PyObject **source = PySequence_Fast_ITEMS(tokens);
        for (Py_ssize_t i = 0; i < n; i++) {
            items[i] = Py_NewRef(source[i]);
        }
        if (plain_tokens(items, n)) {
            result = append_items(node, hashed, count, block_size, items, n, &handled);
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_DECREF(items[i]);
        }
        if (items != small) {
            PyMem_Free(items);
        }
    }
    Py_DECREF(node);
    return handled ? result : delegate(self, args, nargs, kwnames);
}

static PyMethodDef append_def = {
    "append_output_token_ids", (PyCFunction)(void (*)(void))decode_append,
    METH_FASTCALL | METH_KEYWORDS, NULL};

/* install_decode_append(cls, python_append, default_chain_hasher): the C method in place. */
PyObject *
install_decode_append(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyType_Check(args[0]) || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "install_decode_append(cls, python_append, default_chain_hasher)");
        return NULL;
    }
    PyObject *slot = PyObject_GetAttrString(args[0], "_state");
    if (slot == NULL) {
        return NULL;
    }
    PyMemberDef *member = Py_IS_TYPE(slot, &PyMemberDescr_Type)
                              ? ((PyMemberDescrObject *)slot)->d_member
                              : NULL;
    if (member == NULL || member->type != T_OBJECT_EX || (member->flags & READONLY)) {
        Py_DECREF(slot);
        PyErr_SetString(PyExc_TypeError, "install_decode_append: `_state` is not a slot");
        return NULL;
    }
    state_offset = member->offset;
    Py_DECREF(slot);
    PyObject *doc = PyObject_GetAttrString(args[1], "__doc__");
    if (doc == NULL) {
        return NULL;
    }
    Py_XSETREF(append_doc, doc);
    append_def.ml_doc = PyUnicode_Check(doc) ? PyUnicode_AsUTF8(doc) : NULL;
    Py_XSETREF(state_type, (PyTypeObject *)Py_NewRef(args[0]));
    Py_XSETREF(python_append, Py_NewRef(args[1]));
    Py_XSETREF(default_chain_hasher, Py_NewRef(args[2]));
    Py_CLEAR(last_context);
    Py_CLEAR(last_hasher);
    PyObject *method = PyDescr_NewMethod(state_type, &append_def);
    if (method == NULL) {
        return NULL;
    }
    int status = PyObject_SetAttrString(args[0], "append_output_token_ids", method);
    Py_DECREF(method);
    if (status != 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

int
decode_add_types(PyObject *module)
{
    if (PyType_Ready(&BlockHasherType) < 0) {
        return FAILED;
    }
    str_plan = PyUnicode_InternFromString("plan");
    str_steady_start = PyUnicode_InternFromString("steady_start");
    str_hash_block = PyUnicode_InternFromString("hash_block");
    str_append = PyUnicode_InternFromString("append");
    str_chain_hasher = PyUnicode_InternFromString("chain_hasher");
    str_lookahead = PyUnicode_InternFromString("lookahead");
    if (!str_plan || !str_steady_start || !str_hash_block || !str_append || !str_chain_hasher ||
        !str_lookahead) {
        return FAILED;
    }
    return PyModule_AddObjectRef(module, "BlockHasher", (PyObject *)&BlockHasherType) < 0
               ? FAILED
               : OK;
}
