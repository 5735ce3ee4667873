/* The records section of rebuilt batches, encoded from decoded columns (included once, by _cleaner.c).
 *
 * A batch that loses records is rewritten with the records it keeps, as Kafka's MemoryRecordsBuilder writes them
 * (DefaultRecord.writeTo): attributes 0, the timestamp as a delta from the new base timestamp, the offset as a
 * delta from the batch's base offset, key, value and headers; the caller adds the batch header (and compresses).
 * This is kafkalog.records.batch._encode_record for many records at once.
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

/* encode_records(columns, idx, bounds, base_offsets, base_timestamps) -> list[bytes]: for each rebuilt batch j,
 * the records idx[bounds[j]:bounds[j + 1]] encoded relative to base_offsets[j] and base_timestamps[j] */
static PyObject *py_encode_records(PyObject *self, PyObject *args) {
    PyObject *cols, *idx_o, *bounds_o, *bo_o, *bts_o, *result = NULL;
    Bufs bs = {.n = 0};
    const void *c[E_NCOLS];
    Py_ssize_t cn[E_NCOLS], nidx, nb, nbo, nbts;
    Out o = {NULL, 0, 0};
    if (!PyArg_ParseTuple(args, "O!OOOO", &PyTuple_Type, &cols, &idx_o, &bounds_o, &bo_o, &bts_o)) return NULL;
    if (PyTuple_GET_SIZE(cols) != E_NCOLS) {
        PyErr_SetString(PyExc_ValueError, "columns: 14 arrays expected");
        return NULL;
    }
    for (int i = 0; i < E_NCOLS; i++)
        if (!(c[i] = bufs_get(&bs, PyTuple_GET_ITEM(cols, i), e_item[i], 0, &cn[i]))) goto done;
    const int64_t *idx, *bounds, *bo, *bts;
    if (!(idx = bufs_get(&bs, idx_o, 8, 0, &nidx)) || !(bounds = bufs_get(&bs, bounds_o, 8, 0, &nb)) ||
        !(bo = bufs_get(&bs, bo_o, 8, 0, &nbo)) || !(bts = bufs_get(&bs, bts_o, 8, 0, &nbts)))
        goto done;
    if (nb < 1 || nbo != nb - 1 || nbts != nb - 1) {
        PyErr_SetString(PyExc_ValueError, "bounds, base offsets and base timestamps do not match");
        goto done;
    }
    const int64_t *off = c[E_OFFSET], *ts = c[E_TS], *koff = c[E_KOFF], *voff = c[E_VOFF], *hoff = c[E_HOFF];
    const int64_t *hkoff = c[E_HKOFF], *hvoff = c[E_HVOFF];
    const uint8_t *kvalid = c[E_KVALID], *vvalid = c[E_VVALID], *hvvalid = c[E_HVVALID];
    const uint8_t *kdata = c[E_KDATA], *vdata = c[E_VDATA], *hkdata = c[E_HKDATA], *hvdata = c[E_HVDATA];
    Py_ssize_t n = cn[E_OFFSET], nh = cn[E_HVVALID];
    if (cn[E_TS] != n || cn[E_KVALID] != n || cn[E_VVALID] != n || cn[E_HOFF] != n + 1 || cn[E_HKOFF] != nh + 1) {
        PyErr_SetString(PyExc_ValueError, "columns of different lengths");
        goto done;
    }
    if (!(result = PyList_New(nb - 1))) goto done;
    for (Py_ssize_t j = 0; j + 1 < nb; j++) {
        o.len = 0;
        if (bounds[j] < 0 || bounds[j] > bounds[j + 1] || bounds[j + 1] > nidx) goto bad;
        for (Py_ssize_t r = bounds[j]; r < bounds[j + 1]; r++) {
            Py_ssize_t i = idx[r];
            if (i < 0 || i >= n || !span_ok(koff, i, cn[E_KOFF], cn[E_KDATA]) ||
                !span_ok(voff, i, cn[E_VOFF], cn[E_VDATA]) || hoff[i] < 0 || hoff[i] > hoff[i + 1] || hoff[i + 1] > nh)
                goto bad;
            int64_t od = off[i] - bo[j], td;
            if (od < 0 || od > INT32_MAX || __builtin_sub_overflow(ts[i], bts[j], &td)) {
                PyErr_SetString(PyExc_OverflowError, "record offset or timestamp out of the batch's delta range");
                goto fail;
            }
            Py_ssize_t kl = koff[i + 1] - koff[i], vl = voff[i + 1] - voff[i];
            Py_ssize_t body = 1 + uvar_size(zz64(td)) + uvar_size(zz32((int32_t)od)) + field_size(kvalid[i], kl) +
                              field_size(vvalid[i], vl) + uvar_size(zz32((int32_t)(hoff[i + 1] - hoff[i])));
            for (Py_ssize_t h = hoff[i]; h < hoff[i + 1]; h++) {
                if (!span_ok(hkoff, h, cn[E_HKOFF], cn[E_HKDATA]) || !span_ok(hvoff, h, cn[E_HVOFF], cn[E_HVDATA]))
                    goto bad;
                body += field_size(1, hkoff[h + 1] - hkoff[h]) + field_size(hvvalid[h], hvoff[h + 1] - hvoff[h]);
            }
            if (body > INT32_MAX || out_reserve(&o, body + 5) < 0) goto fail;
            put_uvar(&o, zz32((int32_t)body));
            o.p[o.len++] = 0;
            put_uvar(&o, zz64(td));
            put_uvar(&o, zz32((int32_t)od));
            put_field(&o, kvalid[i], kdata + koff[i], kl);
            put_field(&o, vvalid[i], vdata + voff[i], vl);
            put_uvar(&o, zz32((int32_t)(hoff[i + 1] - hoff[i])));
            for (Py_ssize_t h = hoff[i]; h < hoff[i + 1]; h++) {
                put_field(&o, 1, hkdata + hkoff[h], hkoff[h + 1] - hkoff[h]);
                put_field(&o, hvvalid[h], hvdata + hvoff[h], hvoff[h + 1] - hvoff[h]);
            }
        }
        PyObject *b = PyBytes_FromStringAndSize((const char *)o.p, o.len);
        if (!b) goto fail;
        PyList_SET_ITEM(result, j, b);
    }
    goto done;
bad:
    PyErr_SetString(PyExc_ValueError, "record columns inconsistent");
fail:
    Py_CLEAR(result);
done:
    PyMem_Free(o.p);
    bufs_release(&bs);
    return result;
}

#define ENCODE_METHODS                                                                                             \
    {"encode_records", py_encode_records, METH_VARARGS,                                                          \
     "encode_records(columns, idx, bounds, base_offsets, base_timestamps) -> list[bytes]: records sections of "  \
     "rebuilt batches"},

#endif
