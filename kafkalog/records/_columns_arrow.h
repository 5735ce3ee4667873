/* Buffers that RecordColumns.to_arrow() makes per record (included once, by _columns.c, after _columns_mem.h):
 * the batch fields repeated over each batch's records, the timestamp type names, and int32 offsets. numpy makes
 * them in fresh memory (np.repeat, astype, bytes * n: page faults and the kernel's zeroing of every page, which
 * was most of to_arrow()); here they are written once into Blocks, whose memory comes from the block pool and
 * goes back to it when the table is freed. columns.py falls back to numpy without the extension (same values). */
#ifndef KAFKALOG_COLUMNS_ARROW_H
#define KAFKALOG_COLUMNS_ARROW_H

/* a Block of exactly n bytes, uninitialised; NULL with an exception set */
static PyObject *new_block(Py_ssize_t n) {
    Col c = {0};
    if (col_grow(&c, n < 64 ? 64 : n) < 0) return NULL;
    c.len = n;
    PyObject *blk = col_to_block(&c);
    if (!blk) col_release(c.p, c.len, c.cap, c.touched);
    return blk;
}

/* batch_start (int64, one per batch) checked against n records: starts at 0, non-decreasing, within n */
static int check_starts(const Py_buffer *s, Py_ssize_t n) {
    Py_ssize_t nb = s->len / 8;
    const int64_t *st = (const int64_t *)s->buf;
    if (s->len % 8 || n < 0 || (nb == 0 && n > 0) || (nb > 0 && st[0] != 0)) goto bad;
    for (Py_ssize_t i = 1; i < nb; i++)
        if (st[i] < st[i - 1]) goto bad;
    if (nb > 0 && st[nb - 1] > n) goto bad;
    return 0;
bad:
    PyErr_SetString(PyExc_ValueError, "batch_start must start at 0 and rise to at most the record count");
    return -1;
}

#define REPEAT_LOOP(T)                                                           \
    do {                                                                         \
        T *o = (T *)out;                                                         \
        for (Py_ssize_t b = 0; b < nb; b++) {                                    \
            T v;                                                                 \
            memcpy(&v, (const char *)vals->buf + b * (Py_ssize_t)sizeof(T), sizeof(T)); \
            Py_ssize_t e = b + 1 < nb ? (Py_ssize_t)st[b + 1] : n;               \
            for (Py_ssize_t i = (Py_ssize_t)st[b]; i < e; i++) o[i] = v;         \
        }                                                                        \
    } while (0)

/* repeat_batches(batch_start, n, values, width) -> Block: each batch's value (width 1, 2, 4 or 8 bytes) once per
 * record of the batch, n records; width 0: a little-endian bitmap of (value != 0) for Arrow's bool layout */
static PyObject *py_repeat_batches(PyObject *self, PyObject *args) {
    Py_buffer s, v;
    Py_ssize_t n;
    int width;
    if (!PyArg_ParseTuple(args, "y*ny*i", &s, &n, &v, &width)) return NULL;
    const Py_buffer *vals = &v;
    PyObject *blk = NULL;
    Py_ssize_t nb = s.len / 8;
    const int64_t *st = (const int64_t *)s.buf;
    if (check_starts(&s, n) < 0) goto done;
    if ((width != 0 && width != 1 && width != 2 && width != 4 && width != 8) || v.len != nb * (width ? width : 1)) {
        PyErr_SetString(PyExc_ValueError, "repeat_batches: one value of 0, 1, 2, 4 or 8 bytes per batch");
        goto done;
    }
    if (!(blk = new_block(width ? n * width : (n + 7) / 8))) goto done;
    char *out = ((Block *)blk)->p;
    switch (width) {
    case 1: REPEAT_LOOP(uint8_t); break;
    case 2: REPEAT_LOOP(uint16_t); break;
    case 4: REPEAT_LOOP(uint32_t); break;
    case 8: REPEAT_LOOP(uint64_t); break;
    default: {
        uint8_t *o = (uint8_t *)out;
        memset(o, 0, (size_t)((n + 7) / 8));
        for (Py_ssize_t b = 0; b < nb; b++) {
            if (!((const uint8_t *)v.buf)[b]) continue;
            Py_ssize_t e = b + 1 < nb ? (Py_ssize_t)st[b + 1] : n;
            for (Py_ssize_t i = (Py_ssize_t)st[b]; i < e; i++) o[i >> 3] |= (uint8_t)(1u << (i & 7));
        }
    }
    }
done:
    PyBuffer_Release(&s);
    PyBuffer_Release(&v);
    return blk;
}

/* repeat_names(batch_start, n, types, names) -> (offsets, data): a string column (int32 offsets) holding
 * names[types[b] + 1] (types int8, names a tuple of bytes) for every record of batch b */
static PyObject *py_repeat_names(PyObject *self, PyObject *args) {
    Py_buffer s, t;
    Py_ssize_t n;
    PyObject *names, *offs = NULL, *data = NULL;
    if (!PyArg_ParseTuple(args, "y*ny*O!", &s, &n, &t, &PyTuple_Type, &names)) return NULL;
    Py_ssize_t nb = s.len / 8, nn = PyTuple_GET_SIZE(names), total = 0;
    const int64_t *st = (const int64_t *)s.buf;
    const int8_t *ty = (const int8_t *)t.buf;
    if (check_starts(&s, n) < 0) goto error;
    if (t.len != nb) {
        PyErr_SetString(PyExc_ValueError, "repeat_names: one type per batch");
        goto error;
    }
    for (Py_ssize_t i = 0; i < nn; i++)
        if (!PyBytes_Check(PyTuple_GET_ITEM(names, i))) {
            PyErr_SetString(PyExc_TypeError, "repeat_names: names must be bytes");
            goto error;
        }
    for (Py_ssize_t b = 0; b < nb; b++) {
        if (ty[b] + 1 < 0 || ty[b] + 1 >= nn) {
            PyErr_SetString(PyExc_ValueError, "repeat_names: a type without a name");
            goto error;
        }
        Py_ssize_t e = b + 1 < nb ? (Py_ssize_t)st[b + 1] : n;
        total += (e - (Py_ssize_t)st[b]) * PyBytes_GET_SIZE(PyTuple_GET_ITEM(names, ty[b] + 1));
        if (total > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "repeat_names: over 2 GiB of names");
            goto error;
        }
    }
    if (!(offs = new_block((n + 1) * 4)) || !(data = new_block(total))) goto error;
    int32_t *o = (int32_t *)((Block *)offs)->p, at = 0; /* total fits in int32: checked above */
    char *d = ((Block *)data)->p;
    o[0] = 0;
    for (Py_ssize_t b = 0; b < nb; b++) {
        PyObject *name = PyTuple_GET_ITEM(names, ty[b] + 1);
        const char *np_ = PyBytes_AS_STRING(name);
        int32_t len = (int32_t)PyBytes_GET_SIZE(name);
        Py_ssize_t i0 = (Py_ssize_t)st[b], e = b + 1 < nb ? (Py_ssize_t)st[b + 1] : n;
        for (Py_ssize_t i = i0; i < e; i++) o[i + 1] = at + (int32_t)(i + 1 - i0) * len;
        /* the batch's copies of the name: one, then doubling what is written (few memcpy calls per batch) */
        Py_ssize_t want = (e - i0) * len, have = want ? len : 0;
        if (have) memcpy(d + at, np_, (size_t)len);
        while (have < want) {
            Py_ssize_t k = have < want - have ? have : want - have;
            memcpy(d + at + have, d + at, (size_t)k);
            have += k;
        }
        at += (int32_t)want;
    }
    PyBuffer_Release(&s);
    PyBuffer_Release(&t);
    return Py_BuildValue("(NN)", offs, data);
error:
    Py_XDECREF(offs);
    Py_XDECREF(data);
    PyBuffer_Release(&s);
    PyBuffer_Release(&t);
    return NULL;
}

/* narrow_offsets(offsets) -> Block: int64 offsets as int32 (the caller has checked that the last, the largest,
 * fits) */
static PyObject *py_narrow_offsets(PyObject *self, PyObject *args) {
    Py_buffer s;
    if (!PyArg_ParseTuple(args, "y*", &s)) return NULL;
    PyObject *blk = NULL;
    Py_ssize_t n = s.len / 8;
    if (s.len % 8) {
        PyErr_SetString(PyExc_ValueError, "narrow_offsets: int64 offsets");
        goto done;
    }
    if (!(blk = new_block(n * 4))) goto done;
    const int64_t *in = (const int64_t *)s.buf;
    int32_t *o = (int32_t *)((Block *)blk)->p;
    for (Py_ssize_t i = 0; i < n; i++) o[i] = (int32_t)in[i];
done:
    PyBuffer_Release(&s);
    return blk;
}

#define ARROW_METHODS                                                                                                \
    {"repeat_batches", py_repeat_batches, METH_VARARGS,                                                              \
     "repeat_batches(batch_start, n, values, width) -> Block: each batch's value (width bytes; 0: a bitmap of "     \
     "value != 0) repeated over its records"},                                                                       \
    {"repeat_names", py_repeat_names, METH_VARARGS,                                                                  \
     "repeat_names(batch_start, n, types, names) -> (int32 offsets, data): names[type + 1] for every record"},      \
    {"narrow_offsets", py_narrow_offsets, METH_VARARGS, "narrow_offsets(int64 offsets) -> Block of int32 offsets"},

#endif
