/* The width of the compiled builder's offset columns (included once, by _columns.c, after the Builder): key,
 * value and header offsets are written as int32 while every one fits, which is what Arrow's binary and list
 * layouts take (to_arrow() wraps them as they are; RecordColumns widens its public int64 arrays on first access),
 * and widened in place to int64 before the first batch or record whose bytes could pass 2 GiB. */
#ifndef KAFKALOG_COLUMNS_OFFSETS_H
#define KAFKALOG_COLUMNS_OFFSETS_H

/* the columns of offsets into the data columns (or into the header columns: C_HOFF) */
static const int offset_cols[] = {C_KOFF, C_VOFF, C_HOFF, C_HKOFF, C_HVOFF};
#define N_OFFSET_COLS 5
static Py_ssize_t offset_limit = INT32_MAX; /* the largest int32 offset (lowered by the tests: set_offset_limit) */

/* The offset columns as int64 from now on, their int32 entries widened in place. */
static int builder_widen(Builder *b) {
    if (b->wide) return 0;
    for (int k = 0; k < N_OFFSET_COLS; k++)
        if (col_reserve(&b->c[offset_cols[k]], b->c[offset_cols[k]].len) < 0) return -1;
    for (int k = 0; k < N_OFFSET_COLS; k++) {
        Col *c = &b->c[offset_cols[k]];
        Py_ssize_t n = c->len / 4;
        for (Py_ssize_t i = n - 1; i >= 0; i--) { /* from the end: entry i's 8 bytes cover only entries >= i */
            int32_t v;
            memcpy(&v, c->p + 4 * i, 4);
            int64_t w = v;
            memcpy(c->p + 8 * i, &w, 8);
        }
        c->len = n * 8;
    }
    b->wide = 1;
    return 0;
}

/* widen unless every offset stays below 2 GiB after `extra` more bytes in each data column and headers */
static int builder_fit(Builder *b, Py_ssize_t extra) {
    const Py_ssize_t lim = offset_limit - extra;
    if (b->wide || (b->c[C_KDATA].len <= lim && b->c[C_VDATA].len <= lim && b->c[C_HKDATA].len <= lim &&
                    b->c[C_HVDATA].len <= lim && b->n_headers <= lim))
        return 0;
    return builder_widen(b);
}

/* append one offset entry (the builder's width) to column k, widening first when it does not fit int32 */
static int put_offset(Builder *b, int k, int64_t v) {
    if (!b->wide && v > offset_limit && builder_widen(b) < 0) return -1;
    if (col_reserve(&b->c[k], 8) < 0) return -1;
    append_offset(&b->c[k], v, b->wide);
    return 0;
}

/* bytes a record takes in per_record[k] below: int64 offsets and timestamps, offsets of the builder's width, flags */
#define REC_WIDTH(k, wide) ((k) < 2 ? 8 : (k) < 5 ? ((wide) ? 8 : 4) : 1)

/* for the tests: set_offset_limit(n) -> previous limit; builders widen their offsets past n (default 2**31 - 1) */
static PyObject *py_set_offset_limit(PyObject *self, PyObject *arg) {
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0 || n > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "set_offset_limit: 0 to 2**31 - 1");
        return NULL;
    }
    Py_ssize_t old = offset_limit;
    offset_limit = n;
    return PyLong_FromSsize_t(old);
}

#define OFFSET_METHODS                                                                                             \
    {"set_offset_limit", py_set_offset_limit, METH_O,                                                             \
     "set_offset_limit(n) -> int: the largest offset kept as int32 (tests widen early with it); returns the old one"},

#endif
