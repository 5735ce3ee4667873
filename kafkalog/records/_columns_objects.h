/* Records that arrive as Python objects (ColumnBuilder.add_records: the batches the compiled walker leaves to
 * RecordBatch.records(), legacy messages among them), appended to the same columns as the decoded ones (included
 * once, by _columns.c, after the Builder and its offset helpers). */
#ifndef KAFKALOG_COLUMNS_OBJECTS_H
#define KAFKALOG_COLUMNS_OBJECTS_H

/* append the bytes of obj (bytes-like or None) as one field: column off's entry (put_offset), valid, data */
static int put_object(Builder *b, int off, Col *valid, Col *data, PyObject *obj, long long *nbytes) {
    if (obj == Py_None) {
        PUT(valid, uint8_t, 0);
    } else {
        Py_buffer view;
        if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0) return -1;
        int r = put_bytes(data, view.buf, view.len);
        *nbytes += view.len;
        PyBuffer_Release(&view);
        if (r < 0) return -1;
        PUT(valid, uint8_t, 1);
    }
    return put_offset(b, off, data->len);
}

/* the binary_view entry of obj (bytes-like or None), its bytes copied to data (view buffer 1) */
static int put_object_view(Col *viewcol, Col *valid, Col *data, PyObject *obj, long long *nbytes) {
    char view[16] = {0};
    if (obj == Py_None) {
        PUT(valid, uint8_t, 0);
    } else {
        Py_buffer v;
        if (PyObject_GetBuffer(obj, &v, PyBUF_SIMPLE) < 0) return -1;
        if (v.len > INT32_MAX - data->len) {
            PyBuffer_Release(&v);
            PyErr_SetString(PyExc_OverflowError, "binary_view columns: over 2 GiB of copied key or value bytes in one "
                                                 "chunk (read it in chunks with iter_record_columns)");
            return -1;
        }
        int32_t n = (int32_t)v.len, idx = 1, off = (int32_t)data->len;
        memcpy(view, &n, 4);
        if (n <= 12) {
            memcpy(view + 4, v.buf, (size_t)n);
        } else {
            memcpy(view + 4, v.buf, 4);
            memcpy(view + 8, &idx, 4);
            memcpy(view + 12, &off, 4);
        }
        int r = n <= 12 ? 0 : put_bytes(data, v.buf, v.len);
        *nbytes += v.len;
        PyBuffer_Release(&v);
        if (r < 0) return -1;
        PUT(valid, uint8_t, 1);
    }
    return put_bytes(viewcol, view, 16);
}

static int add_record(Builder *b, PyObject *rec) {
    PyObject *o = NULL, *ts = NULL, *key = NULL, *value = NULL, *headers = NULL, *seq = NULL;
    int rc = -1;
    if (!(o = PyObject_GetAttrString(rec, "offset")) || !(ts = PyObject_GetAttrString(rec, "timestamp")) ||
        !(key = PyObject_GetAttrString(rec, "key")) || !(value = PyObject_GetAttrString(rec, "value")) ||
        !(headers = PyObject_GetAttrString(rec, "headers")))
        goto done;
    /* Java long arithmetic: wrap modulo 2**64 like the pure builder */
    unsigned long long uo = PyLong_AsUnsignedLongLongMask(o), ut = PyLong_AsUnsignedLongLongMask(ts);
    if (PyErr_Occurred()) goto done;
    if (b->views) {
        if (put_object_view(&b->c[C_KVIEW], &b->c[C_KVALID], &b->c[C_KDATA], key, &b->n_bytes) < 0 ||
            put_object_view(&b->c[C_VVIEW], &b->c[C_VVALID], &b->c[C_VDATA], value, &b->n_bytes) < 0)
            goto done;
    } else if (put_object(b, C_KOFF, &b->c[C_KVALID], &b->c[C_KDATA], key, &b->n_bytes) < 0 ||
               put_object(b, C_VOFF, &b->c[C_VVALID], &b->c[C_VDATA], value, &b->n_bytes) < 0) {
        goto done;
    }
    if (!(seq = PySequence_Fast(headers, "record headers must be a sequence"))) goto done;
    Py_ssize_t nh = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < nh; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "a header must be a (str, bytes | None) tuple");
            goto done;
        }
        Py_ssize_t kn;
        const char *k = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pair, 0), &kn);
        if (!k || put_bytes(&b->c[C_HKDATA], k, kn) < 0) goto done;
        if (put_offset(b, C_HKOFF, b->c[C_HKDATA].len) < 0) goto done;
        long long ignored = 0;
        if (put_object(b, C_HVOFF, &b->c[C_HVVALID], &b->c[C_HVDATA], PyTuple_GET_ITEM(pair, 1), &ignored) < 0)
            goto done;
    }
    b->n_headers += nh;
    if (put_offset(b, C_HOFF, (int64_t)b->n_headers) < 0 || put_bytes(&b->c[C_OFFSET], &uo, 8) < 0 ||
        put_bytes(&b->c[C_TS], &ut, 8) < 0)
        goto done;
    b->n_records++;
    rc = 0;
done:
    Py_XDECREF(o);
    Py_XDECREF(ts);
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(headers);
    Py_XDECREF(seq);
    return rc;
}

static PyObject *Builder_add_records(Builder *b, PyObject *recs) {
    if (check_open(b) < 0) return NULL;
    PyObject *seq = PySequence_Fast(recs, "records must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    b->busy = 1; /* reading a record's attributes may run Python code */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (add_record(b, PySequence_Fast_GET_ITEM(seq, i)) < 0) {
            b->busy = 0;
            Py_DECREF(seq);
            return NULL;
        }
    }
    b->busy = 0;
    Py_DECREF(seq);
    Py_RETURN_NONE;
}

#endif
