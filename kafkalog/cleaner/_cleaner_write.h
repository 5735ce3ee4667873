/* One filtered chunk written in one call (included once, by _cleaner.c, after _cleaner_encode.h).
 *
 * Per batch, in file order: dropped, copied as its bytes, rebuilt here (a batch that loses records: its original
 * header with the fields a rebuild changes — length, attributes (the codec, timestamp type, transactional and
 * control bits kept, the delete-horizon bit as told), base and max timestamp, record count, CRC32C — and the
 * records it keeps, encoded as Kafka's MemoryRecordsBuilder writes them and, for a compressed batch, compressed by
 * the caller's codec function), or bytes the caller built (an empty batch).
 */
#ifndef KAFKALOG_CLEANER_WRITE_H
#define KAFKALOG_CLEANER_WRITE_H

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "../records/_columns_crc.h"
#pragma GCC diagnostic pop

#define BATCH_HEADER 61
#define KEPT_BITS 0x3F /* codec, timestamp type, transactional, control: a rebuilt batch keeps them */
#define HORIZON_BIT 0x40

/* CRC32C by the path _columns_crc.h chose for this CPU (KAFKALOG_CRC32C_PATH applies here too) */
static inline uint32_t crc32c_of(const uint8_t *p, size_t n) { return crc32c_fast(p, n); }

static inline void put_be(uint8_t *p, uint64_t v, int width) {
    for (int i = width - 1; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

static inline int64_t get_be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return (int64_t)v;
}

/* The records section at o->p[at:o->len] replaced by fn(memoryview of it) (a bytes-like object): 0, or -1 with a
 * Python error. No view of the output buffer outlives the call. */
static int compress_tail(Out *o, Py_ssize_t at, PyObject *fn) {
    PyObject *mv = PyMemoryView_FromMemory((char *)o->p + at, o->len - at, PyBUF_READ);
    if (!mv) return -1;
    PyObject *z = PyObject_CallOneArg(fn, mv);
    if (Py_REFCNT(mv) > 1) { /* the codec kept a reference: cut it from the memory */
        PyObject *et, *ev, *etb;
        PyErr_Fetch(&et, &ev, &etb);
        PyObject *r = PyObject_CallMethod(mv, "release", NULL);
        if (!r) {
            Py_XDECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(etb);
            Py_XDECREF(z);
            Py_DECREF(mv);
            return -1;
        }
        Py_DECREF(r);
        PyErr_Restore(et, ev, etb);
    }
    Py_DECREF(mv);
    if (!z) return -1;
    Py_buffer zb;
    if (PyObject_GetBuffer(z, &zb, PyBUF_SIMPLE) < 0) {
        Py_DECREF(z);
        return -1;
    }
    int r = 0;
    o->len = at;
    if (out_reserve(o, zb.len) < 0) {
        r = -1;
    } else {
        memcpy(o->p + o->len, zb.buf, (size_t)zb.len);
        o->len += zb.len;
    }
    PyBuffer_Release(&zb);
    Py_DECREF(z);
    return r;
}

#ifdef KAFKALOG_HAVE_ZLIB
#include <zlib.h>

/* The records section at o->p[at:o->len] replaced by its gzip member as compression._gzip_compress writes it (Java's
 * GZIPOutputStream header, zlib's raw deflate at level 6 with memLevel 8, then CRC32 and size): the same zlib
 * calls on the same library as Python's zlib.compressobj (one deflate(Z_NO_FLUSH) of all input, then Z_FINISH),
 * but with one z_stream per write_chunk call, reset per batch, instead of a fresh ~256 KiB deflate state per batch.
 * *ready tells whether zs holds an initialised state (the caller ends it). 0, or -1 with a Python error. */
static int gzip_tail(Out *o, Py_ssize_t at, z_stream *zs, int *ready) {
    static const uint8_t header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
    Py_ssize_t n = o->len - at;
    if ((uint64_t)n > UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "write_chunk: records section too large for one deflate call");
        return -1;
    }
    if (!*ready) {
        memset(zs, 0, sizeof *zs);
        if (deflateInit2(zs, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
            PyErr_NoMemory();
            return -1;
        }
        *ready = 1;
    } else if (deflateReset(zs) != Z_OK) {
        PyErr_SetString(PyExc_RuntimeError, "write_chunk: deflateReset failed");
        return -1;
    }
    uLong bound = deflateBound(zs, (uLong)n);
    /* the section moves past the room its gzip member may take; the member is written where the section was */
    if (out_reserve(o, 18 + (Py_ssize_t)bound + n) < 0) return -1;
    uint8_t *dst = o->p + at, *src = dst + 18 + bound;
    memcpy(src, dst, (size_t)n);
    uint32_t crc = (uint32_t)crc32(0L, src, (uInt)n);
    memcpy(dst, header, 10);
    zs->next_in = src;
    zs->avail_in = (uInt)n;
    zs->next_out = dst + 10;
    zs->avail_out = (uInt)bound;
    int r = deflate(zs, Z_NO_FLUSH);
    if (r == Z_OK || r == Z_BUF_ERROR) r = deflate(zs, Z_FINISH);
    if (r != Z_STREAM_END || zs->avail_in != 0) {
        PyErr_SetString(PyExc_RuntimeError, "write_chunk: deflate did not finish");
        return -1;
    }
    uint8_t *t = dst + 10 + zs->total_out;
    for (int i = 0; i < 4; i++) t[i] = (uint8_t)(crc >> (8 * i));
    for (int i = 0; i < 4; i++) t[4 + i] = (uint8_t)((uint32_t)n >> (8 * i));
    o->len = at + 10 + (Py_ssize_t)zs->total_out + 8;
    return 0;
}
#endif

/* write_chunk(chunk, positions, sizes, actions, columns, idx, bounds, base_timestamps, with_horizon, max_timestamps,
 *             extras, compressors) -> bytes. actions per batch: 0 drop, 1 copy, 2 rebuild (the next of bounds/
 *             base_timestamps/with_horizon/max_timestamps; a compressed batch's records section goes through
 *             compressors[its codec id](section) -> bytes), 3 the next item of extras. */
static PyObject *py_write_chunk(PyObject *self, PyObject *args) {
    PyObject *chunk_o, *pos_o, *size_o, *act_o, *cols, *idx_o, *bounds_o, *bts_o, *hz_o, *mts_o, *extras, *codecs,
        *result = NULL;
    Bufs bs = {.n = 0};
    Cols c;
    Out o = {NULL, 0, 0};
#ifdef KAFKALOG_HAVE_ZLIB
    z_stream zs;
    int zs_ready = 0;
#endif
    Py_ssize_t clen, nb, n2, n3, nidx, nbounds, n4, n5, n6, j = 0, k = 0;
    const uint8_t *chunk, *hz;
    const int8_t *act;
    const int64_t *pos, *size, *idx, *bounds, *bts, *mts;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOO!O!", &chunk_o, &pos_o, &size_o, &act_o, &cols, &idx_o, &bounds_o,
                          &bts_o, &hz_o, &mts_o, &PyList_Type, &extras, &PyTuple_Type, &codecs))
        return NULL;
    if (!(chunk = bufs_get(&bs, chunk_o, 1, 0, &clen)) || !(pos = bufs_get(&bs, pos_o, 8, 0, &nb)) ||
        !(size = bufs_get(&bs, size_o, 8, 0, &n2)) || !(act = bufs_get(&bs, act_o, 1, 0, &n3)) ||
        cols_of(&bs, cols, &c) < 0 || !(idx = bufs_get(&bs, idx_o, 8, 0, &nidx)) ||
        !(bounds = bufs_get(&bs, bounds_o, 8, 0, &nbounds)) || !(bts = bufs_get(&bs, bts_o, 8, 0, &n4)) ||
        !(hz = bufs_get(&bs, hz_o, 1, 0, &n5)) || !(mts = bufs_get(&bs, mts_o, 8, 0, &n6)))
        goto done;
    if (n2 != nb || n3 != nb || nbounds < 1 || n4 != nbounds - 1 || n5 != n4 || n6 != n4) {
        PyErr_SetString(PyExc_ValueError, "write_chunk: array lengths do not match");
        goto done;
    }
    for (Py_ssize_t b = 0; b < nb; b++) {
        if (act[b] == 0) continue;
        if (act[b] == 3) {
            if (k >= PyList_GET_SIZE(extras) || !PyBytes_Check(PyList_GET_ITEM(extras, k))) goto bad;
            PyObject *x = PyList_GET_ITEM(extras, k++);
            if (out_reserve(&o, PyBytes_GET_SIZE(x)) < 0) goto done;
            memcpy(o.p + o.len, PyBytes_AS_STRING(x), (size_t)PyBytes_GET_SIZE(x));
            o.len += PyBytes_GET_SIZE(x);
            continue;
        }
        if (pos[b] < 0 || size[b] < BATCH_HEADER || pos[b] > clen - size[b]) goto bad;
        const uint8_t *src = chunk + pos[b];
        if (act[b] == 1) {
            if (out_reserve(&o, size[b]) < 0) goto done;
            memcpy(o.p + o.len, src, (size_t)size[b]);
            o.len += size[b];
            continue;
        }
        if (act[b] != 2 || j >= n4) goto bad;
        Py_ssize_t at = o.len;
        if (out_reserve(&o, BATCH_HEADER) < 0) goto done;
        memcpy(o.p + at, src, BATCH_HEADER);
        o.len += BATCH_HEADER;
        if (encode_span(&o, &c, idx, nidx, bounds[j], bounds[j + 1], get_be64(src), bts[j]) < 0) goto done;
        int codec = src[22] & 0x07;
#ifdef KAFKALOG_HAVE_ZLIB
        if (codec == 1) {
            if (gzip_tail(&o, at + BATCH_HEADER, &zs, &zs_ready) < 0) goto done;
        } else
#endif
        if (codec) {
            PyObject *fn = codec < PyTuple_GET_SIZE(codecs) ? PyTuple_GET_ITEM(codecs, codec) : Py_None;
            if (fn == Py_None) goto bad;
            if (compress_tail(&o, at + BATCH_HEADER, fn) < 0) goto done;
        }
        uint8_t *h = o.p + at;
        int attrs = (src[22] & KEPT_BITS) | (hz[j] ? HORIZON_BIT : 0);
        put_be(h + 8, (uint64_t)(o.len - at - 12), 4);
        put_be(h + 21, (uint64_t)attrs, 2);
        put_be(h + 27, (uint64_t)bts[j], 8);
        put_be(h + 35, (uint64_t)mts[j], 8);
        put_be(h + 57, (uint64_t)(bounds[j + 1] - bounds[j]), 4);
        put_be(h + 17, crc32c_of(h + 21, (size_t)(o.len - at - 21)), 4);
        j++;
    }
    result = PyBytes_FromStringAndSize((const char *)o.p, o.len);
    goto done;
bad:
    PyErr_SetString(PyExc_ValueError, "write_chunk: actions do not match the batches");
done:
#ifdef KAFKALOG_HAVE_ZLIB
    if (zs_ready) deflateEnd(&zs);
#endif
    PyMem_Free(o.p);
    bufs_release(&bs);
    return result;
}

#define WRITE_METHODS                                                                                              \
    {"write_chunk", py_write_chunk, METH_VARARGS,                                                                \
     "write_chunk(chunk, positions, sizes, actions, columns, idx, bounds, base_timestamps, with_horizon, "      \
     "max_timestamps, extras, compressors) -> bytes: a filtered chunk's output"},

#endif
