/* The records section of rebuilt batches, encoded from decoded columns (included once, by _cleaner.c).
 *
 * A batch that loses records is rewritten with the records it keeps, as Kafka's MemoryRecordsBuilder writes them
 * (DefaultRecord.writeTo): attributes 0, the timestamp as a delta from the new base timestamp, the offset as a
 * delta from the batch's base offset, key, value and headers; write_chunk adds the batch header (and compresses).
 * This is kafkalog.records.record_codec.encode_record for many records at once.
 */
#ifndef KAFKALOG_CLEANER_ENCODE_H
#define KAFKALOG_CLEANER_ENCODE_H

enum {
    E_OFFSET, E_TS, E_KOFF, E_KVALID, E_KDATA, E_VOFF, E_VVALID, E_VDATA, E_HOFF, E_HKOFF, E_HKDATA, E_HVOFF,
    E_HVVALID, E_HVDATA, E_NCOLS
};
static const Py_ssize_t e_item[E_NCOLS] = {8, 8, 8, 1, 1, 8, 1, 1, 8, 8, 1, 8, 1, 1};

typedef struct {
    uint8_t *p;
    Py_ssize_t len, cap;
} Out;

static int out_reserve(Out *o, Py_ssize_t more) {
    if (o->len + more <= o->cap) return 0;
    Py_ssize_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + more) cap *= 2;
    uint8_t *p = PyMem_Realloc(o->p, (size_t)cap);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    o->p = p;
    o->cap = cap;
    return 0;
}

static inline int uvar_size(uint64_t u) {
    int n = 1;
    while (u >= 0x80) {
        u >>= 7;
        n++;
    }
    return n;
}

static inline void put_uvar(Out *o, uint64_t u) {
    while (u >= 0x80) {
        o->p[o->len++] = (uint8_t)(u | 0x80);
        u >>= 7;
    }
    o->p[o->len++] = (uint8_t)u;
}

static inline uint64_t zz32(int32_t v) { return (uint32_t)(((uint32_t)v << 1) ^ (uint32_t)(v >> 31)); }
static inline uint64_t zz64(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

/* a nullable byte field: its zig-zag length (-1 when null) and bytes */
static inline Py_ssize_t field_size(int valid, Py_ssize_t n) { return valid ? uvar_size(zz32((int32_t)n)) + n : 1; }

static inline void put_field(Out *o, int valid, const uint8_t *p, Py_ssize_t n) {
    if (!valid) {
        o->p[o->len++] = 1;
        return;
    }
    put_uvar(o, zz32((int32_t)n));
    memcpy(o->p + o->len, p, (size_t)n);
    o->len += n;
}

static int span_ok(const int64_t *off, Py_ssize_t i, Py_ssize_t n_off, Py_ssize_t data_len) {
    return i + 1 < n_off && off[i] >= 0 && off[i] <= off[i + 1] && off[i + 1] <= data_len && off[i + 1] - off[i] <= INT32_MAX;
}

typedef struct {
    const int64_t *off, *ts, *koff, *voff, *hoff, *hkoff, *hvoff;
    const uint8_t *kvalid, *vvalid, *hvvalid, *kdata, *vdata, *hkdata, *hvdata;
    Py_ssize_t cn[E_NCOLS], n, nh;
} Cols;

/* the 14 record columns write_chunk encodes from, checked for matching lengths */
static int cols_of(Bufs *bs, PyObject *cols, Cols *c) {
    const void *p[E_NCOLS];
    if (!PyTuple_Check(cols) || PyTuple_GET_SIZE(cols) != E_NCOLS) {
        PyErr_SetString(PyExc_ValueError, "columns: a tuple of 14 arrays expected");
        return -1;
    }
    for (int i = 0; i < E_NCOLS; i++)
        if (!(p[i] = bufs_get(bs, PyTuple_GET_ITEM(cols, i), e_item[i], 0, &c->cn[i]))) return -1;
    c->off = p[E_OFFSET], c->ts = p[E_TS], c->koff = p[E_KOFF], c->voff = p[E_VOFF], c->hoff = p[E_HOFF];
    c->hkoff = p[E_HKOFF], c->hvoff = p[E_HVOFF];
    c->kvalid = p[E_KVALID], c->vvalid = p[E_VVALID], c->hvvalid = p[E_HVVALID];
    c->kdata = p[E_KDATA], c->vdata = p[E_VDATA], c->hkdata = p[E_HKDATA], c->hvdata = p[E_HVDATA];
    c->n = c->cn[E_OFFSET], c->nh = c->cn[E_HVVALID];
    Py_ssize_t n = c->n;
    if (c->cn[E_TS] != n || c->cn[E_KVALID] != n || c->cn[E_VVALID] != n || c->cn[E_HOFF] != n + 1 ||
        c->cn[E_HKOFF] != c->nh + 1) {
        PyErr_SetString(PyExc_ValueError, "columns of different lengths");
        return -1;
    }
    return 0;
}

/* append record i, its offset and timestamp relative to bo and bts; -1 with an exception set on bad columns */
static int encode_record(Out *o, const Cols *c, Py_ssize_t i, int64_t bo, int64_t bts) {
    if (i < 0 || i >= c->n || !span_ok(c->koff, i, c->cn[E_KOFF], c->cn[E_KDATA]) ||
        !span_ok(c->voff, i, c->cn[E_VOFF], c->cn[E_VDATA]) || c->hoff[i] < 0 || c->hoff[i] > c->hoff[i + 1] ||
        c->hoff[i + 1] > c->nh) {
        PyErr_SetString(PyExc_ValueError, "record columns inconsistent");
        return -1;
    }
    int64_t od = c->off[i] - bo, td;
    if (od < 0 || od > INT32_MAX || __builtin_sub_overflow(c->ts[i], bts, &td)) {
        PyErr_SetString(PyExc_OverflowError, "record offset or timestamp out of the batch's delta range");
        return -1;
    }
    Py_ssize_t kl = c->koff[i + 1] - c->koff[i], vl = c->voff[i + 1] - c->voff[i];
    Py_ssize_t h0 = c->hoff[i], h1 = c->hoff[i + 1];
    Py_ssize_t body = 1 + uvar_size(zz64(td)) + uvar_size(zz32((int32_t)od)) + field_size(c->kvalid[i], kl) +
                      field_size(c->vvalid[i], vl) + uvar_size(zz32((int32_t)(h1 - h0)));
    for (Py_ssize_t h = h0; h < h1; h++) {
        if (!span_ok(c->hkoff, h, c->cn[E_HKOFF], c->cn[E_HKDATA]) ||
            !span_ok(c->hvoff, h, c->cn[E_HVOFF], c->cn[E_HVDATA])) {
            PyErr_SetString(PyExc_ValueError, "header columns inconsistent");
            return -1;
        }
        body += field_size(1, c->hkoff[h + 1] - c->hkoff[h]) + field_size(c->hvvalid[h], c->hvoff[h + 1] - c->hvoff[h]);
    }
    if (body > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "record too large");
        return -1;
    }
    if (out_reserve(o, body + 5) < 0) return -1;
    put_uvar(o, zz32((int32_t)body));
    o->p[o->len++] = 0;
    put_uvar(o, zz64(td));
    put_uvar(o, zz32((int32_t)od));
    put_field(o, c->kvalid[i], c->kdata + c->koff[i], kl);
    put_field(o, c->vvalid[i], c->vdata + c->voff[i], vl);
    put_uvar(o, zz32((int32_t)(h1 - h0)));
    for (Py_ssize_t h = h0; h < h1; h++) {
        put_field(o, 1, c->hkdata + c->hkoff[h], c->hkoff[h + 1] - c->hkoff[h]);
        put_field(o, c->hvvalid[h], c->hvdata + c->hvoff[h], c->hvoff[h + 1] - c->hvoff[h]);
    }
    return 0;
}

/* the records idx[lo:hi] of one batch */
static int encode_span(Out *o, const Cols *c, const int64_t *idx, Py_ssize_t nidx, int64_t lo, int64_t hi, int64_t bo,
                       int64_t bts) {
    if (lo < 0 || lo > hi || hi > nidx) {
        PyErr_SetString(PyExc_ValueError, "bounds outside idx");
        return -1;
    }
    for (int64_t r = lo; r < hi; r++)
        if (encode_record(o, c, idx[r], bo, bts) < 0) return -1;
    return 0;
}

#endif
