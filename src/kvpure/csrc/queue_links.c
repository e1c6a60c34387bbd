/* kvpure._queue_links: the free block queue's batch operations in C.
 *
 * kvpure.free_queue threads KVCacheBlock objects (a __slots__ class) into a ring through
 * their prev_free_block / next_free_block slots and marks each queued block with its queue
 * in the _queue slot. configure() is given the block class and those three slots' member
 * descriptors once; the functions below then read and write the slots at their offsets,
 * exactly as the Python statements in kvpure.free_queue do, without the interpreter.
 *
 * Each function either does the whole operation or nothing: for any input it does not
 * handle (an item that is not exactly a KVCacheBlock, a block already queued, a block
 * twice in a batch, a ring that ends early) it changes nothing and returns None/False, and
 * the caller runs the pure-Python method, which stays the reference and raises the typed
 * error. No Python code can run while a borrowed pointer is in use: the only calls into
 * the runtime are allocations and reference count changes of objects that stay owned
 * elsewhere until the end (every decrement is deferred to the end of the operation).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

static PyTypeObject *block_type = NULL;
static Py_ssize_t prev_at = -1, next_at = -1, queue_at = -1;

#define SMALL_BATCH 256
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

static PyObject *
ql_configure(PyObject *self, PyObject *args)
{
    PyObject *type, *prev, *next, *queue;
    if (!PyArg_ParseTuple(args, "O!OOO", &PyType_Type, &type, &prev, &next, &queue)) {
        return NULL;
    }
    Py_ssize_t p = slot_offset(prev, "prev_free_block");
    Py_ssize_t n = slot_offset(next, "next_free_block");
    Py_ssize_t q = slot_offset(queue, "_queue");
    if (p < 0 || n < 0 || q < 0) {
        return NULL;
    }
    Py_INCREF(type);
    Py_XSETREF(block_type, (PyTypeObject *)type);
    prev_at = p;
    next_at = n;
    queue_at = q;
    Py_RETURN_NONE;
}

static int
is_block(PyObject *obj)
{
    return block_type != NULL && Py_TYPE(obj) == block_type;
}

/* popleft_n(root, n): the n blocks after the sentinel `root`, unlinked (links and owner
 * set to None), front first; None when the ring does not hold n blocks after root. The
 * caller has checked 0 <= n <= its count. */
static PyObject *
ql_popleft_n(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "popleft_n(root, n) takes two arguments");
        return NULL;
    }
    PyObject *root = args[0];
    Py_ssize_t n = PyLong_AsSsize_t(args[1]);
    if (n == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (block_type == NULL || n < 0 || !PyObject_TypeCheck(root, block_type)) {
        Py_RETURN_NONE;
    }
    /* Allocate first: the allocation may run the garbage collector, and so finalizers that
     * could change the ring; nothing after the walk below calls back into Python code. */
    PyObject *taken = PyList_New(n);
    if (taken == NULL) {
        return NULL;
    }
    /* Walk: n real blocks, each exactly a block with every slot set. */
    PyObject *node = SLOT(root, next_at);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (node == NULL || node == root || !is_block(node) || SLOT(node, next_at) == NULL ||
            SLOT(node, prev_at) == NULL || SLOT(node, queue_at) == NULL) {
            Py_DECREF(taken);
            Py_RETURN_NONE;
        }
        node = SLOT(node, next_at);
    }
    if (node == NULL || (node != root && !is_block(node))) {
        Py_DECREF(taken);
        Py_RETURN_NONE;
    }
    /* Old slot values are released at the end, each block being owned by `taken` by then. */
    PyObject *small[3 * SMALL_BATCH + 2];
    PyObject **released = small;
    if (n > SMALL_BATCH) {
        released = PyMem_New(PyObject *, 3 * n + 2);
        if (released == NULL) {
            Py_DECREF(taken);
            return PyErr_NoMemory();
        }
    }
    Py_ssize_t r = 0;
    node = SLOT(root, next_at);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *block = node;
        node = SLOT(block, next_at);
        Py_INCREF(block);
        PyList_SET_ITEM(taken, i, block);
        released[r++] = SLOT(block, prev_at);
        released[r++] = SLOT(block, next_at);
        released[r++] = SLOT(block, queue_at);
        Py_INCREF(Py_None);
        SLOT(block, prev_at) = Py_None;
        Py_INCREF(Py_None);
        SLOT(block, next_at) = Py_None;
        Py_INCREF(Py_None);
        SLOT(block, queue_at) = Py_None;
    }
    /* Close the ring: root <-> node (the new front, or root itself). */
    Py_INCREF(node);
    released[r++] = SLOT(root, next_at);
    SLOT(root, next_at) = node;
    Py_INCREF(root);
    released[r++] = SLOT(node, prev_at);
    SLOT(node, prev_at) = root;
    for (Py_ssize_t i = 0; i < r; i++) {
        Py_XDECREF(released[i]);
    }
    if (released != small) {
        PyMem_Free(released);
    }
    return taken;
}

/* link(queue, before, after, blocks): link `blocks` (a list or tuple) in order between the
 * adjacent `before` and `after`, each marked as `queue`'s: True. False, nothing changed,
 * when an item is not exactly a block, is queued, or comes twice. */
static PyObject *
ql_link(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "link(queue, before, after, blocks) takes four arguments");
        return NULL;
    }
    PyObject *queue = args[0], *before = args[1], *after = args[2], *blocks = args[3];
    if (block_type == NULL || !(PyList_CheckExact(blocks) || PyTuple_CheckExact(blocks)) ||
        !PyObject_TypeCheck(before, block_type) || !PyObject_TypeCheck(after, block_type) ||
        SLOT(before, next_at) != after || SLOT(after, prev_at) != before) {
        Py_RETURN_FALSE;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(blocks);
    PyObject **items = PySequence_Fast_ITEMS(blocks);
    /* Check every item, marking each as it passes (a repeat then shows as marked). */
    Py_ssize_t marked = 0;
    for (; marked < n; marked++) {
        PyObject *block = items[marked];
        if (!is_block(block) || SLOT(block, queue_at) != Py_None ||
            SLOT(block, prev_at) == NULL || SLOT(block, next_at) == NULL) {
            break;
        }
        SLOT(block, queue_at) = queue; /* borrowed while marking; owned below */
    }
    if (marked < n) {
        for (Py_ssize_t i = 0; i < marked; i++) {
            SLOT(items[i], queue_at) = Py_None;
        }
        Py_RETURN_FALSE;
    }
    if (n == 0) {
        Py_RETURN_TRUE;
    }
    /* Link: each block's prev is the one before it, each next the one after. Every
     * replaced value is None (an unqueued block's links), or before's next / after's prev,
     * which the caller still holds. */
    PyObject *last = before;
    PyObject *old_before_next = SLOT(before, next_at);
    PyObject *old_after_prev = SLOT(after, prev_at);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *block = items[i];
        Py_INCREF(queue);
        Py_DECREF(Py_None); /* the None the owner slot held before marking */
        Py_INCREF(last);
        Py_SETREF(SLOT(block, prev_at), last);
        Py_INCREF(block);
        if (last == before) {
            SLOT(before, next_at) = block; /* old value released below */
        }
        else {
            Py_SETREF(SLOT(last, next_at), block);
        }
        last = block;
    }
    Py_INCREF(after);
    Py_SETREF(SLOT(last, next_at), after);
    Py_INCREF(last);
    SLOT(after, prev_at) = last;
    Py_DECREF(old_before_next);
    Py_DECREF(old_after_prev);
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"configure", ql_configure, METH_VARARGS,
     "configure(block_type, prev_descr, next_descr, queue_descr): the block class and its "
     "link and owner slots."},
    {"popleft_n", (PyCFunction)(void (*)(void))ql_popleft_n, METH_FASTCALL,
     "popleft_n(root, n) -> list | None: the n front blocks unlinked, or None (unhandled)."},
    {"link", (PyCFunction)(void (*)(void))ql_link, METH_FASTCALL,
     "link(queue, before, after, blocks) -> bool: blocks linked between before and after, "
     "or False with nothing changed (unhandled)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "kvpure._queue_links",
    .m_doc = "The free block queue's batch operations in C (see kvpure.free_queue).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__queue_links(void)
{
    return PyModule_Create(&module);
}
