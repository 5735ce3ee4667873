/* Compressed records sections for the compiled decoder (included once, by _columns.c): the lz4 frame walk and the
 * zstd output bound of compression.py, in C, so a compressed batch costs one codec call per block and no Python.
 *
 * Like the rest of the walker these only *accept*: every check compression.py makes is made here too, and what
 * fails one (or anything unusual) makes the caller decline the batch, so the Python path raises its own error.
 * They mirror compression.py's _lz4_blocks / _lz4_decompress_into and _zstd_bound / _zstd_decompress_into
 * (tests/records/test_decompress_into.py and tests/records/test_record_columns_codec.py compare the two on fuzzed frames).
 */
#ifndef KAFKALOG_COLUMNS_CODEC_H
#define KAFKALOG_COLUMNS_CODEC_H

#include <limits.h>
#include <stdint.h>
#include <string.h>

/* ---- xxHash32, for the lz4 frame descriptor checksum (HC byte) ------------------------------------------------ */

#define XXH_P1 2654435761u
#define XXH_P2 2246822519u
#define XXH_P3 3266489917u
#define XXH_P4 668265263u
#define XXH_P5 374761393u

static inline uint32_t xxh_rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }
static inline uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint32_t xxh32(const uint8_t *p, size_t n, uint32_t seed) {
    size_t i = 0;
    uint32_t h;
    if (n >= 16) {
        uint32_t v1 = seed + XXH_P1 + XXH_P2, v2 = seed + XXH_P2, v3 = seed, v4 = seed - XXH_P1;
        for (; i + 16 <= n; i += 16) {
            v1 = xxh_rotl(v1 + le32(p + i) * XXH_P2, 13) * XXH_P1;
            v2 = xxh_rotl(v2 + le32(p + i + 4) * XXH_P2, 13) * XXH_P1;
            v3 = xxh_rotl(v3 + le32(p + i + 8) * XXH_P2, 13) * XXH_P1;
            v4 = xxh_rotl(v4 + le32(p + i + 12) * XXH_P2, 13) * XXH_P1;
        }
        h = xxh_rotl(v1, 1) + xxh_rotl(v2, 7) + xxh_rotl(v3, 12) + xxh_rotl(v4, 18);
    } else {
        h = seed + XXH_P5;
    }
    h += (uint32_t)n;
    for (; i + 4 <= n; i += 4) h = xxh_rotl(h + le32(p + i) * XXH_P3, 17) * XXH_P4;
    for (; i < n; i++) h = xxh_rotl(h + p[i] * XXH_P5, 11) * XXH_P1;
    h ^= h >> 15;
    h *= XXH_P2;
    h ^= h >> 13;
    h *= XXH_P3;
    h ^= h >> 16;
    return h;
}

/* ---- lz4 frame (compression.py's _lz4_blocks, header checksum checked as for v2 batches) ---------------------- */

typedef struct {
    const uint8_t *buf;
    Py_ssize_t pos, end, block_max;
    int block_checksum, content_checksum;
} Lz4Frame;

/* 0 = the frame's header is what _lz4_blocks accepts, 1 = it is not (decline) */
static int lz4_open(Lz4Frame *f, const uint8_t *buf, Py_ssize_t end) {
    static const Py_ssize_t sizes[8] = {0, 0, 0, 0, 64 << 10, 256 << 10, 1 << 20, 4 << 20};
    if (end < 7 || le32(buf) != 0x184D2204u) return 1;
    uint8_t flg = buf[4], bd = buf[5];
    if (flg >> 6 != 1) return 1;
    f->block_max = sizes[(bd >> 4) & 7];
    if (!f->block_max) return 1;
    f->block_checksum = (flg & 0x10) != 0;
    f->content_checksum = (flg & 0x04) != 0;
    Py_ssize_t pos = 6 + ((flg & 0x08) ? 8 : 0) + ((flg & 0x01) ? 4 : 0);
    if (pos >= end) return 1;
    if (buf[pos] != ((xxh32(buf + 4, (size_t)(pos - 4), 0) >> 8) & 0xFF)) return 1;
    f->buf = buf;
    f->pos = pos + 1;
    f->end = end;
    return 0;
}

/* The next block: 0 = one (*p, *n, *stored), 2 = the end mark, 1 = what _lz4_blocks raises for (decline). */
static int lz4_next(Lz4Frame *f, const uint8_t **p, Py_ssize_t *n, int *stored) {
    if (f->end - f->pos < 4) return 1;
    uint32_t word = le32(f->buf + f->pos);
    f->pos += 4;
    if (word == 0) return (f->content_checksum && f->end - f->pos < 4) ? 1 : 2;
    Py_ssize_t len = (Py_ssize_t)(word & 0x7FFFFFFFu);
    if (len > f->block_max || len > f->end - f->pos) return 1;
    *p = f->buf + f->pos;
    *n = len;
    *stored = (word & 0x80000000u) != 0;
    f->pos += len;
    if (f->block_checksum) {
        if (f->end - f->pos < 4) return 1;
        f->pos += 4;
    }
    return 0;
}

/* ---- zstd output bound (compression.py's _zstd_bound): -1 where it raises ------------------------------------- */

/* What _zstd_fast reads of a payload's frames: how many (and skippable ones), and the first frame's content size
 * (-1 when absent), window and dictionary flag. */
typedef struct {
    int frames, skippable, dict;
    long long fcs;
    uint64_t window;
} ZstdInfo;

static long long zstd_bound_info(const uint8_t *b, Py_ssize_t end, ZstdInfo *zi) {
    Py_ssize_t pos = 0;
    long long bound = 0;
    zi->frames = zi->skippable = zi->dict = 0;
    zi->fcs = -1;
    zi->window = 0;
    while (pos < end) {
        if (end - pos < 4) return -1;
        uint32_t magic = le32(b + pos);
        if (magic >= 0x184D2A50u && magic <= 0x184D2A5Fu) { /* skippable frame */
            if (end - pos < 8) return -1;
            pos += 8 + (Py_ssize_t)le32(b + pos + 4);
            zi->skippable++;
            continue;
        }
        if (magic != 0xFD2FB528u) return -1;
        pos += 4;
        if (pos >= end) return -1;
        uint8_t fhd = b[pos++];
        int single = (fhd & 0x20) != 0;
        uint64_t window = 0;
        if (!single) {
            if (pos >= end) return -1;
            uint8_t wd = b[pos++];
            uint64_t base = (uint64_t)1 << ((wd >> 3) + 10);
            window = base + (base >> 3) * (wd & 7);
        }
        static const int did_size[4] = {0, 1, 2, 4};
        pos += did_size[fhd & 3];
        int fcs_flag = fhd >> 6;
        int fcs_size = fcs_flag == 0 ? (single ? 1 : 0) : (fcs_flag == 1 ? 2 : (fcs_flag == 2 ? 4 : 8));
        if (pos + fcs_size > end) return -1;
        long long fcs = -1;
        if (fcs_size) {
            uint64_t v = 0;
            for (int i = fcs_size - 1; i >= 0; i--) v = (v << 8) | b[pos + i];
            v += fcs_size == 2 ? 256 : 0;
            fcs = v > (uint64_t)LLONG_MAX ? LLONG_MAX : (long long)v;
            if (single) window = v;
        }
        if (zi->frames++ == 0) {
            zi->fcs = fcs;
            zi->window = window;
            zi->dict = (fhd & 3) != 0;
        }
        pos += fcs_size;
        long long block_max = (window && window < (128 << 10)) ? (long long)window : (128 << 10);
        for (;;) {
            if (end - pos < 3) return -1;
            uint32_t hdr = (uint32_t)b[pos] | ((uint32_t)b[pos + 1] << 8) | ((uint32_t)b[pos + 2] << 16);
            pos += 3;
            int btype = (hdr >> 1) & 3;
            Py_ssize_t bsize = (Py_ssize_t)(hdr >> 3);
            if (btype == 0) {
                bound += bsize;
                pos += bsize;
            } else if (btype == 1) {
                bound += bsize;
                pos += 1;
            } else if (btype == 2) {
                bound += block_max;
                pos += bsize;
            } else {
                return -1;
            }
            if (pos > end) return -1;
            if (hdr & 1) break;
        }
        if (fhd & 0x04) pos += 4;
    }
    return bound;
}

static long long zstd_bound(const uint8_t *b, Py_ssize_t end) {
    ZstdInfo zi;
    return zstd_bound_info(b, end, &zi);
}

/* _zstd_fast's test: one frame, nothing skippable, no dictionary, a window within the streaming limit, a content
 * size that is absent or from 1 to room. */
static int zstd_simple(const ZstdInfo *zi, long long room) {
    return zi->frames == 1 && !zi->skippable && !zi->dict && zi->window <= ((uint64_t)1 << 27) && zi->fcs != 0 &&
           zi->fcs <= room;
}

/* ---- the codec call: fn(memoryview of src, memoryview of dst[0:room]) -> bytes written -------------------------- */

/* The raised exception, taken out of the error indicator into *kept (replacing what it held) for the caller to
 * report; stripped of its traceback and chained exceptions, whose frames may hold large buffers. */
static void keep_error(PyObject **kept) {
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb);
    PyErr_NormalizeException(&et, &ev, &etb);
    Py_XDECREF(et);
    Py_XDECREF(etb);
    if (ev) {
        PyException_SetTraceback(ev, Py_None);
        PyException_SetContext(ev, NULL);
        PyException_SetCause(ev, NULL);
    }
    Py_XSETREF(*kept, ev);
}

/* 0 = *written set, 1 = the codec raised (its exception in *kept: the caller declines), -1 = a Python error to
 * propagate. Nothing may keep a view of dst past the call: a view still referenced afterwards is released (or the
 * call fails). */
static int codec_into(PyObject *fn, const uint8_t *src, Py_ssize_t n, char *dst, Py_ssize_t room,
                      Py_ssize_t *written, PyObject **kept) {
    PyObject *args[2];
    args[0] = PyMemoryView_FromMemory((char *)src, n, PyBUF_READ);
    if (!args[0]) return -1;
    args[1] = PyMemoryView_FromMemory(dst, room, PyBUF_WRITE);
    if (!args[1]) {
        Py_DECREF(args[0]);
        return -1;
    }
    PyObject *res = PyObject_Vectorcall(fn, args, 2, NULL);
    Py_DECREF(args[0]);
    if (Py_REFCNT(args[1]) > 1) {
        PyObject *et, *ev, *etb;
        PyErr_Fetch(&et, &ev, &etb);
        PyObject *r = PyObject_CallMethod(args[1], "release", NULL);
        if (!r) {
            Py_XDECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(etb);
            Py_XDECREF(res);
            Py_DECREF(args[1]);
            return -1;
        }
        Py_DECREF(r);
        PyErr_Restore(et, ev, etb);
    }
    Py_DECREF(args[1]);
    if (!res) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError) || PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) return -1;
        keep_error(kept);
        return 1;
    }
    Py_ssize_t w = PyLong_AsSsize_t(res);
    Py_DECREF(res);
    if (w == -1 && PyErr_Occurred()) return -1;
    if (w < 0 || w > room) {
        PyErr_SetString(PyExc_ValueError, "codec: length outside the buffer");
        return -1;
    }
    *written = w;
    return 0;
}

/* ---- a records section into the scratch buffer (Col, from _columns_mem.h) ------------------------------------ */

/* The codec functions run() calls itself: cramjam's lz4 decompress_block_into, compression._zstd_into, the max_size
 * limit of compression.decompress, (or NULL) this thread's zstandard ZstdDecompressor.decompress, called here
 * directly on the payloads _zstd_fast takes (no Python frame per batch), and (or NULL) cramjam's snappy
 * decompress_raw_into (_columns_snappy.h). zdctx: instead of zfast, this thread's libzstd context (zstd_context(),
 * when built with libzstd's headers), which decodes those payloads straight into the scratch buffer. */
typedef struct {
    PyObject *lz4, *zstd, *zfast, *snappy;
    void *zdctx;
    long long max_size;
} Codecs;

/* ---- zstd with libzstd, when built with it (KAFKALOG_HAVE_ZSTD) ------------------------------------------------ */

#define ZSTD_CONTEXT_NAME "kafkalog.records._columns.zstd_context"

#ifdef KAFKALOG_HAVE_ZSTD
#include <zstd.h>

static void zstd_context_free(PyObject *capsule) {
    ZSTD_DCtx *d = (ZSTD_DCtx *)PyCapsule_GetPointer(capsule, ZSTD_CONTEXT_NAME);
    if (d) ZSTD_freeDCtx(d);
}

/* zstd_context() -> capsule: a libzstd decompression context, for one thread (codec_contexts keeps one per thread
 * and hands it to run() in place of zstandard's decompress). */
static PyObject *py_zstd_context(PyObject *self, PyObject *noargs) {
    ZSTD_DCtx *d = ZSTD_createDCtx();
    if (!d) return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(d, ZSTD_CONTEXT_NAME, zstd_context_free);
    if (!capsule) ZSTD_freeDCtx(d);
    return capsule;
}

/* A payload of one plain frame (zstd_simple) decoded into dst[0:room] with ZSTD_decompressDCtx, which checks what
 * zstandard's decompress(max_output_size=room, allow_extra_data=False) checks: a corrupt frame, a content size or
 * checksum that does not match, output beyond room, bytes after the frame. 0 = *written set, 1 = declined (the
 * caller asks _zstd_into, whose answer, or error, stands). */
static int zstd_dctx_into(void *dctx, const uint8_t *src, Py_ssize_t n, char *dst, Py_ssize_t room,
                          Py_ssize_t *written) {
    size_t r = ZSTD_decompressDCtx((ZSTD_DCtx *)dctx, dst, (size_t)room, src, (size_t)n);
    if (ZSTD_isError(r) || r > (size_t)room) return 1;
    *written = (Py_ssize_t)r;
    return 0;
}

#define ZSTD_CONTEXT_METHODS                                                                                          \
    {"zstd_context", py_zstd_context, METH_NOARGS,                                                                    \
     "zstd_context() -> capsule: a libzstd decompression context for one thread, passed to run() in codecs"},
#else
#define ZSTD_CONTEXT_METHODS
#endif

/* zfast(src, max_output_size=room, allow_extra_data=False) copied into dst: 0 = *written set, 1 = declined (the
 * caller asks _zstd_into, whose answer stands), -1 = a Python error to propagate. */
static int zstd_fast_into(PyObject *zfast, const uint8_t *src, Py_ssize_t n, char *dst, Py_ssize_t room,
                          Py_ssize_t *written) {
    static PyObject *kwnames = NULL;
    if (!kwnames && !(kwnames = Py_BuildValue("(ss)", "max_output_size", "allow_extra_data"))) return -1;
    PyObject *args[3];
    if (!(args[0] = PyMemoryView_FromMemory((char *)src, n, PyBUF_READ))) return -1;
    if (!(args[1] = PyLong_FromSsize_t(room))) {
        Py_DECREF(args[0]);
        return -1;
    }
    args[2] = Py_False;
    PyObject *res = PyObject_Vectorcall(zfast, args, 1, kwnames);
    Py_DECREF(args[0]);
    Py_DECREF(args[1]);
    if (!res) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError) || PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) return -1;
        PyErr_Clear();
        return 1;
    }
    int r = 1;
    if (PyBytes_Check(res) && PyBytes_GET_SIZE(res) <= room) {
        memcpy(dst, PyBytes_AS_STRING(res), (size_t)PyBytes_GET_SIZE(res));
        *written = PyBytes_GET_SIZE(res);
        r = 0;
    }
    Py_DECREF(res);
    return r;
}

/* An lz4 frame into the scratch buffer, block by block, each given the room _lz4_decompress_into gives it.
 * 0 = *out bytes written, 1 = decline, 2 = the scratch may be too small (ask decompress), -1 = error. */
static int lz4_into(Col *sc, const Codecs *cd, const uint8_t *body, Py_ssize_t len, Py_ssize_t *out,
                    PyObject **kept) {
    Lz4Frame f;
    if (lz4_open(&f, body, len)) return 1;
    Py_ssize_t total = 0, block_room = f.block_max <= cd->max_size ? f.block_max : (Py_ssize_t)cd->max_size + 1;
    for (;;) {
        const uint8_t *p;
        Py_ssize_t n, w;
        int stored, r = lz4_next(&f, &p, &n, &stored);
        if (r == 2) break;
        if (r) return r;
        Py_ssize_t room = stored ? n : block_room;
        if (room > sc->cap - total) return 2;
        if (stored) {
            memcpy(sc->p + total, p, (size_t)n);
            w = n;
        } else if ((r = codec_into(cd->lz4, p, n, sc->p + total, room, &w, kept)) != 0) {
            return r;
        }
        total += w;
        if (total > cd->max_size) return 1;
    }
    *out = total;
    return 0;
}

/* A zstd payload into exactly the room _zstd_decompress_into gives it (its header bound, capped by max_size). */
static int zstd_into(Col *sc, const Codecs *cd, const uint8_t *body, Py_ssize_t len, Py_ssize_t *out,
                     PyObject **kept) {
    ZstdInfo zi;
    long long bound = zstd_bound_info(body, len, &zi);
    if (bound < 0) return 1;
    if (bound > cd->max_size) bound = cd->max_size;
    if (bound > sc->cap) return 2;
#ifdef KAFKALOG_HAVE_ZSTD
    if (cd->zdctx && zstd_simple(&zi, bound) && zstd_dctx_into(cd->zdctx, body, len, sc->p, (Py_ssize_t)bound, out) == 0)
        return 0;
#endif
    if (cd->zfast && zstd_simple(&zi, bound)) {
        int r = zstd_fast_into(cd->zfast, body, len, sc->p, (Py_ssize_t)bound, out);
        if (r <= 0) return r;
    }
    return codec_into(cd->zstd, body, len, sc->p, (Py_ssize_t)bound, out, kept);
}

/* ---- gzip, with zlib when built with it (KAFKALOG_HAVE_ZLIB; compression.py's _gzip_decompress) ------------- */

#ifdef KAFKALOG_HAVE_ZLIB
#include <zlib.h>

/* The gzip members of a payload inflated into the scratch buffer (no more than max_size bytes), with the z_stream
 * *zs (set up on first use, reset per member; the caller ends it): the members one after another, stopping at the
 * end or at bytes that do not start another member (ignored, as GZIPInputStream ignores them). 0 = *out bytes
 * written, 1 = decline (the Python path raises its error), 2 = the scratch may be too small (ask decompress),
 * -1 = error. */
static int gzip_into(Col *sc, z_stream *zs, int *zs_ready, long long max_size, const uint8_t *body, Py_ssize_t len,
                     Py_ssize_t *out) {
    Py_ssize_t room = sc->cap < max_size ? sc->cap : (Py_ssize_t)max_size, pos = 0, total = 0;
    if (room > (Py_ssize_t)UINT_MAX || len > (Py_ssize_t)UINT_MAX) return 2;
    do {
        if (!*zs_ready) {
            memset(zs, 0, sizeof *zs);
            if (inflateInit2(zs, 31) != Z_OK) return 1;
            *zs_ready = 1;
        } else if (inflateReset2(zs, 31) != Z_OK) {
            return 1;
        }
        zs->next_in = (Bytef *)(body + pos);
        zs->avail_in = (uInt)(len - pos);
        zs->next_out = (Bytef *)(sc->p + total);
        zs->avail_out = (uInt)(room - total);
        int r = inflate(zs, Z_FINISH);
        total = room - (Py_ssize_t)zs->avail_out;
        if (r != Z_STREAM_END) /* output full: beyond max_size (decline) or beyond the scratch (ask decompress) */
            return (r == Z_BUF_ERROR && zs->avail_out == 0) ? (room < max_size ? 2 : 1) : 1;
        pos = len - (Py_ssize_t)zs->avail_in;
    } while (len - pos >= 2 && body[pos] == 0x1f && body[pos + 1] == 0x8b);
    *out = total;
    return 0;
}
#endif

/* ---- for the tests: the C bound against compression._zstd_bound ------------------------------------------- */

static PyObject *py_zstd_bound(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    long long bound = zstd_bound((const uint8_t *)view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromLongLong(bound);
}

#define CODEC_METHODS \
    {"zstd_bound", py_zstd_bound, METH_O, "zstd_bound(payload) -> int: _zstd_bound in C (-1 where it raises)"}, \
    ZSTD_CONTEXT_METHODS

#endif
