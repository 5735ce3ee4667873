/* The length-chain walk behind scan.py's scan_batches (included once, by _columns.c, after the memory and CRC
 * parts): per batch a start, a CRC32C and the 61 header bytes, with no Python work per batch. */
#ifndef KAFKALOG_COLUMNS_WALK_H
#define KAFKALOG_COLUMNS_WALK_H

/* walk_chain(buf, pos, end, crc_func) -> (starts: bytes of int64, crcs: bytes of uint32, headers, pos): scan.py's
 * fast loop. Follows the length chain while a 17-byte header fits before end, the length is at least 14 (no magic
 * allows less) and the batch ends by end, taking crc_func(buf[start + 21:stop]) of each and copying its first 61
 * bytes (zero-padded past a shorter batch) into `headers`, a writable Block of 61-byte rows (scan.py's
 * HEADER_DTYPE) gathered while the bytes are in cache; scan.py checks the rest. */
#define WALK_HEADER 61
static PyObject *walk_chain(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end;
    PyObject *crc_func, *starts = NULL, *crcs = NULL, *headers = NULL;
    if (!PyArg_ParseTuple(args, "y*nnO", &view, &pos, &end, &crc_func)) return NULL;
    Col s = {0}, c = {0}, h = {0};
    if (end > view.len || pos < 0 || pos > end) {
        PyErr_SetString(PyExc_ValueError, "walk_chain: position or end outside the buffer");
        goto error;
    }
    const uint8_t *p = (const uint8_t *)view.buf;
    while (end - pos >= 17) {
        int32_t size = (int32_t)be32(p + pos + 8);
        if (size < 14 || (Py_ssize_t)size > end - pos - 12) break;
        Py_ssize_t stop = pos + 12 + size;
        uint32_t crc32;
        if (call_crc(crc_func, p + pos + 21, stop - pos - 21, &crc32) < 0) goto error;
        int64_t start = pos;
        if (put_bytes(&s, &start, 8) < 0 || put_bytes(&c, &crc32, 4) < 0) goto error;
        if (col_reserve(&h, WALK_HEADER) < 0) goto error;
        Py_ssize_t have = stop - pos < WALK_HEADER ? stop - pos : WALK_HEADER;
        memcpy(h.p + h.len, p + pos, (size_t)have);
        if (have < WALK_HEADER) memset(h.p + h.len + have, 0, (size_t)(WALK_HEADER - have));
        h.len += WALK_HEADER;
        pos = stop;
    }
    PyBuffer_Release(&view);
    starts = PyBytes_FromStringAndSize(s.p ? s.p : "", s.len);
    crcs = PyBytes_FromStringAndSize(c.p ? c.p : "", c.len);
    headers = h.p ? col_to_block(&h) : PyBytes_FromStringAndSize("", 0);
    col_release(s.p, s.len, s.cap, s.touched);
    col_release(c.p, c.len, c.cap, c.touched);
    if (!starts || !crcs || !headers) {
        Py_XDECREF(starts);
        Py_XDECREF(crcs);
        Py_XDECREF(headers);
        col_release(h.p, h.len, h.cap, h.touched);
        return NULL;
    }
    return Py_BuildValue("(NNNn)", starts, crcs, headers, pos);
error:
    PyBuffer_Release(&view);
    col_release(s.p, s.len, s.cap, s.touched);
    col_release(c.p, c.len, c.cap, c.touched);
    col_release(h.p, h.len, h.cap, h.touched);
    return NULL;
}

#endif
