/* The compiled column builder behind kafkalog.records.read_record_columns (see columns.py and column_builder.py).
 *
 * ColumnBuilder collects records into growable columns (the arrays column_builder.py documents; key, value and
 * header offsets int32 while they fit, _columns_offsets.h) and hands them to Python in finish() as Blocks
 * (buffer-protocol owners, _columns_mem.h) without a copy; records handed in as objects go through
 * _columns_objects.h. Its hot loop, run(), walks consecutive
 * magic 2 batches of a buffer: header, CRC32C (_columns_crc.h), decompression (lz4 frames and zstd bounds walked in
 * _columns_codec.h, xerial snappy blocks in _columns_snappy.h, the codec library called per block into a reused
 * buffer; gzip inflated with zlib or through kafkalog's own decompress), varints, record framing and headers. It only *accepts*: the
 * first batch that is not plainly well formed (other magic, unknown codec, bad CRC, payload that does not inflate,
 * truncated, a record that does not decode exactly as RecordBatch.records() would decode it) ends the run with
 * nothing of that batch kept, and the Python loop hands that batch to read_batches + records(), which decode it
 * or raise/stop with their own errors. So errors and valid_bytes never depend on this file. When a codec call
 * declined the batch, its exception is handed over (take_error) and turned into the error records() raises, so a
 * payload that fails is decompressed once.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#include "_columns_crc.h"
#include "_columns_mem.h"
#include "_columns_arrow.h"
#include "_columns_wire.h"
#include "_columns_codec.h"
#include "_columns_snappy.h"

enum {
    C_OFFSET, C_TS, C_KOFF, C_KVALID, C_KDATA, C_VOFF, C_VVALID, C_VDATA, C_HOFF, C_HKOFF, C_HKDATA, C_HVOFF,
    C_HVVALID, C_HVDATA, C_KVIEW, C_VVIEW,
    N_RECORD_COLS, /* columns above: per record or per header (rolled back when a batch is declined) */
    C_BSTART = N_RECORD_COLS, C_BBASE, C_BPOS, C_BMAGIC, C_BEPOCH, C_BPID, C_BPEPOCH, C_BSEQ, C_BTST, C_BTXN, C_BCTRL,
    NCOL
};

static const char *col_names[NCOL] = {
    "offset", "timestamp", "key_offsets", "key_valid", "key_data", "value_offsets", "value_valid", "value_data",
    "header_offsets", "header_key_offsets", "header_key_data", "header_value_offsets", "header_value_valid",
    "header_value_data", "key_views", "value_views", "batch_start", "batch_base_offset", "batch_position", "batch_magic",
    "partition_leader_epoch", "producer_id", "producer_epoch", "base_sequence", "timestamp_type",
    "is_transactional", "is_control",
};

typedef struct {
    PyObject_HEAD
    Col c[NCOL];
    Col scratch; /* decompressed records sections, one batch at a time */
    Py_ssize_t n_records;
    Py_ssize_t n_headers;
    long long n_bytes;
    int finished;
    int busy;        /* inside run() or add_records(): they call Python, which must not re-enter or free under them */
    PyObject *error; /* the exception that declined run()'s last batch (see take_error), or NULL */
    int error_source; /* 0: the decompress callback raised it; 3 / 4: cramjam's lz4 / zstd call */
    int views; /* keys and values as Arrow binary_view entries (take_view) instead of copies (take_field) */
    const uint8_t *ahead_end; /* run(): fetch the source ahead up to here while decoding the batch (NULL: none) */
    int wide; /* the offset columns (offset_cols) hold int64 (1) or int32 (0: until some offset would not fit) */
#ifdef KAFKALOG_HAVE_ZLIB
    z_stream zs; /* gzip members, reset per member (gzip_into) */
    int zs_ready;
#endif
} Builder;

#include "_columns_offsets.h"

#include "_columns_records.h"

static int put_batch(Builder *b, Py_ssize_t start, long long base_offset, long long position, int magic, int epoch,
                     long long pid, int pepoch, int seq, int ts_type, int txn, int ctrl) {
    PUT(&b->c[C_BSTART], int64_t, start);
    PUT(&b->c[C_BBASE], int64_t, base_offset);
    PUT(&b->c[C_BPOS], int64_t, position);
    PUT(&b->c[C_BMAGIC], int8_t, magic);
    PUT(&b->c[C_BEPOCH], int32_t, epoch);
    PUT(&b->c[C_BPID], int64_t, pid);
    PUT(&b->c[C_BPEPOCH], int16_t, pepoch);
    PUT(&b->c[C_BSEQ], int32_t, seq);
    PUT(&b->c[C_BTST], int8_t, ts_type);
    PUT(&b->c[C_BTXN], uint8_t, txn ? 1 : 0);
    PUT(&b->c[C_BCTRL], uint8_t, ctrl ? 1 : 0);
    return 0;
}

static int check_open(Builder *b) {
    if (b->busy) {
        /* A codec or crc callback (or another thread, while one releases the GIL) reached this builder while
         * run()/add_records() is using its columns and scratch buffer: refuse rather than free them under it. */
        PyErr_SetString(PyExc_RuntimeError, "ColumnBuilder is busy: run() or add_records() is in progress");
        return -1;
    }
    if (b->finished) {
        PyErr_SetString(PyExc_RuntimeError, "ColumnBuilder already finished");
        return -1;
    }
    return 0;
}

/* ---- Python methods ------------------------------------------------------------------------------------------- */

static PyObject *Builder_begin_batch(Builder *b, PyObject *args) {
    long long base_offset, position, pid;
    int magic, epoch, pepoch, seq, ts_type, txn, ctrl;
    if (!PyArg_ParseTuple(args, "LLiiLiiipp", &base_offset, &position, &magic, &epoch, &pid, &pepoch, &seq,
                          &ts_type, &txn, &ctrl))
        return NULL;
    if (check_open(b) < 0) return NULL;
    if (put_batch(b, b->n_records, base_offset, position, magic, epoch, pid, pepoch, seq, ts_type, txn, ctrl) < 0)
        return NULL;
    Py_RETURN_NONE;
}

#include "_columns_objects.h"

/* decode_records(payload, count, base_offset, base_timestamp, log_append_time | None) -> bool */
static PyObject *Builder_decode_records(Builder *b, PyObject *args) {
    Py_buffer view;
    long long count, base_offset, base_ts;
    PyObject *lat_obj;
    if (!PyArg_ParseTuple(args, "y*LLLO", &view, &count, &base_offset, &base_ts, &lat_obj)) return NULL;
    int has_lat = lat_obj != Py_None;
    long long lat = has_lat ? PyLong_AsLongLong(lat_obj) : 0;
    if (check_open(b) < 0 || (has_lat && lat == -1 && PyErr_Occurred())) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int r = decode_records(b, (const uint8_t *)view.buf, view.len, count, (uint64_t)base_offset, (uint64_t)base_ts,
                           has_lat, lat, -1);
    PyBuffer_Release(&view);
    if (r < 0) return NULL;
    return PyBool_FromLong(r == 0);
}

/* The records section of a compressed batch, decompressed into the builder's scratch buffer (reused batch after
 * batch: no output object and no fresh pages per batch), then decoded. lz4, zstd and snappy are walked here and
 * their codec called per block / payload (codecs), gzip members are inflated here with zlib when built with it; the others,
 * and a payload that may not fit the scratch, go through
 * decompress(codec_id, memoryview, out) -> int | bytes: an int is the length written into out, bytes a payload it
 * made instead. Any exception from a codec or decompress declines the batch, kept for take_error() so the Python
 * path raises it with the batch's position instead of decompressing the batch a second time. */
static int decode_compressed(Builder *b, PyObject *decompress, const Codecs *cd, int codec, const uint8_t *h,
                             Py_ssize_t body_len, int32_t count, uint16_t attrs) {
    Col *sc = &b->scratch;
    Py_ssize_t room = body_len < ((Py_ssize_t)2 << 20) ? ((Py_ssize_t)1 << 20) + 32 * body_len : (Py_ssize_t)64 << 20;
    if (col_reserve(sc, room) < 0) return -1;
    uint64_t base = be64(h), base_ts = be64(h + 27);
    int has_lat = (attrs & 0x08) != 0;
    int64_t lat = (int64_t)be64(h + 35);
    if (cd && (codec == 3 || codec == 4)) {
        Py_ssize_t n;
        int r = codec == 3 ? lz4_into(sc, cd, h + 61, body_len, &n, &b->error)
                           : zstd_into(sc, cd, h + 61, body_len, &n, &b->error);
        if (r == 0) return decode_records(b, (const uint8_t *)sc->p, n, count, base, base_ts, has_lat, lat, -1);
        if (r == 1 && b->error) b->error_source = codec;
        if (r != 2) return r;
    }
    if (cd && cd->snappy && codec == 2) {
        Py_ssize_t n;
        int r = snappy_into(sc, cd, h + 61, body_len, &n);
        if (r == 0) return decode_records(b, (const uint8_t *)sc->p, n, count, base, base_ts, has_lat, lat, -1);
        if (r != 2) return r;
    }
#ifdef KAFKALOG_HAVE_ZLIB
    if (cd && codec == 1) {
        Py_ssize_t n;
        int r = gzip_into(sc, &b->zs, &b->zs_ready, cd->max_size, h + 61, body_len, &n);
        if (r == 0) return decode_records(b, (const uint8_t *)sc->p, n, count, base, base_ts, has_lat, lat, -1);
        if (r != 2) return r;
    }
#endif
    if (decompress == Py_None) return 1;
    PyObject *mv = PyMemoryView_FromMemory((char *)(h + 61), body_len, PyBUF_READ);
    PyObject *out = mv ? PyMemoryView_FromMemory(sc->p, sc->cap, PyBUF_WRITE) : NULL;
    PyObject *payload = out ? PyObject_CallFunction(decompress, "iOO", codec, mv, out) : NULL;
    Py_XDECREF(mv);
    if (out) { /* nothing may keep a view of the scratch memory past this call */
        PyObject *et, *ev, *etb;
        PyErr_Fetch(&et, &ev, &etb);
        PyObject *r = PyObject_CallMethod(out, "release", NULL);
        Py_DECREF(out);
        if (!r) {
            Py_XDECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(etb);
            Py_XDECREF(payload);
            return -1;
        }
        Py_DECREF(r);
        PyErr_Restore(et, ev, etb);
    }
    if (!payload) {
        if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_MemoryError) ||
            PyErr_ExceptionMatches(PyExc_KeyboardInterrupt))
            return -1;
        keep_error(&b->error);
        b->error_source = 0;
        return 1;
    }
    if (PyLong_Check(payload)) {
        Py_ssize_t n = PyLong_AsSsize_t(payload);
        Py_DECREF(payload);
        if (n < 0 || n > sc->cap) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "decompress: length outside the buffer");
            return -1;
        }
        return decode_records(b, (const uint8_t *)sc->p, n, count, base, base_ts, has_lat, lat, -1);
    }
    Py_buffer pv;
    if (PyObject_GetBuffer(payload, &pv, PyBUF_SIMPLE) < 0) {
        Py_DECREF(payload);
        return -1;
    }
    int r = decode_records(b, (const uint8_t *)pv.buf, pv.len, count, base, base_ts, has_lat, lat, -1);
    PyBuffer_Release(&pv);
    Py_DECREF(payload);
    return r;
}

/* The cleaner's batches it knows to drop whole (run()'s `superseded`): a compressed batch that is neither control
 * nor transactional, lies within [lo, hi] (the offsets its offset map covers) and holds none of `live` (sorted
 * offsets: each mapped key's latest record, and every record without a key) keeps no record, so it is framed with
 * no records instead of being decompressed. */
typedef struct {
    const int64_t *live;
    Py_ssize_t n;
    long long lo, hi;
} Superseded;

static int superseded(const Superseded *sk, const uint8_t *h, uint16_t attrs, int codec) {
    if (!sk || !codec || (attrs & 0x30)) return 0;
    long long base = (long long)be64(h), last = base + (int32_t)be32(h + 23);
    if (base < sk->lo || last > sk->hi || last < base) return 0;
    Py_ssize_t a = 0, z = sk->n; /* the first live offset >= base */
    while (a < z) {
        Py_ssize_t m = a + (z - a) / 2;
        if (sk->live[m] < base) a = m + 1;
        else z = m;
    }
    return a == sk->n || sk->live[a] > last;
}

/* run(buf, pos, end, verify_crc, crc_func, max_records, max_bytes, decompress, codecs, hint) -> position of the
 * first batch not taken. decompress(codec_id, memoryview, out) -> int | bytes (see decode_compressed) handles
 * codecs 1-4; codecs = (lz4 decompress_block_into, zstd decompress_into, max_size[, zstandard's decompress of this
 * thread's context, for payloads of one plain frame[, snappy decompress_raw_into]]) lets lz4, zstd and snappy skip
 * it; with
 * both None compressed batches are left to Python.
 * hint: the key/value bytes to reserve (default: end - pos), capped by max_bytes.
 * superseded: None, or (live, lo, hi) for the cleaner's pass (see Superseded): the batches it names get no records
 * (their header count stays what it is), and nothing else changes. */
static PyObject *Builder_run(Builder *b, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end;
    int verify;
    PyObject *crc_func, *decompress = Py_None, *codecs_obj = Py_None, *skip_obj = Py_None, *live_obj;
    long long max_records, max_bytes;
    Py_ssize_t hint = -1;
    Codecs codecs, *cd = NULL;
    Superseded skip, *sk = NULL;
    Py_buffer live = {0};
    if (!PyArg_ParseTuple(args, "y*nnpOLL|OOnO", &view, &pos, &end, &verify, &crc_func, &max_records, &max_bytes,
                          &decompress, &codecs_obj, &hint, &skip_obj))
        return NULL;
    if (check_open(b) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (skip_obj != Py_None) {
        if (!PyArg_ParseTuple(skip_obj, "OLL;superseded must be (live offsets, lo, hi)", &live_obj, &skip.lo,
                              &skip.hi) ||
            PyObject_GetBuffer(live_obj, &live, PyBUF_C_CONTIGUOUS) < 0) {
            PyBuffer_Release(&view);
            return NULL;
        }
        if (live.len % 8) {
            PyErr_SetString(PyExc_ValueError, "run: live offsets must be int64");
            PyBuffer_Release(&live);
            PyBuffer_Release(&view);
            return NULL;
        }
        skip.live = (const int64_t *)live.buf;
        skip.n = live.len / 8;
        sk = &skip;
    }
    b->busy = 1;
    Py_CLEAR(b->error);
    if (codecs_obj != Py_None) {
        codecs.zfast = codecs.snappy = NULL;
        codecs.zdctx = NULL;
        if (!PyArg_ParseTuple(codecs_obj,
                              "OOL|OO;codecs must be (lz4_into, zstd_into, max_size[, zstd_decompress[, snappy_into]])",
                              &codecs.lz4, &codecs.zstd, &codecs.max_size, &codecs.zfast, &codecs.snappy))
            goto error;
        if (codecs.zfast == Py_None) codecs.zfast = NULL;
        if (codecs.zfast && PyCapsule_CheckExact(codecs.zfast)) { /* this thread's libzstd context */
            if (!(codecs.zdctx = PyCapsule_GetPointer(codecs.zfast, ZSTD_CONTEXT_NAME))) goto error;
            codecs.zfast = NULL;
        }
        if (codecs.snappy == Py_None) codecs.snappy = NULL;
        if (codecs.max_size < 0) {
            PyErr_SetString(PyExc_ValueError, "run: max_size must not be negative");
            goto error;
        }
        cd = &codecs;
    }
    if (end > view.len || pos < 0 || pos > end) {
        PyErr_SetString(PyExc_ValueError, "run: position or end outside the buffer");
        goto error;
    }
    const uint8_t *p = (const uint8_t *)view.buf;
    /* Keys and values of the run cannot exceed its bytes (nor, much, the chunk's byte budget): reserving that
     * once costs only address space until written, and spares the copies and faults of repeated doubling. */
    if (hint < 0) hint = end - pos;
    if (max_bytes < hint) hint = (Py_ssize_t)max_bytes + (1 << 20);
    if (!b->views && (col_reserve(&b->c[C_VDATA], hint) < 0 || col_reserve(&b->c[C_KDATA], hint / 4) < 0)) goto error;
    /* The per-record columns at their final size up front: a bounded chunk's record budget (at most 1M records),
     * or the records the batch headers of a whole source announce. Grown batch by batch they were copied at each
     * doubling. */
    Py_ssize_t want, batches = 0;
    if (max_records < ((long long)1 << 40)) {
        want = (Py_ssize_t)(max_records - b->n_records);
        if (want > (1 << 20)) want = 1 << 20;
        want += want / 8; /* the run stops after the batch that reaches the budget: room for that batch's excess */
    } else if (b->n_records == 0) { /* the first run only: later ones (after a batch Python took) grow as needed */
        want = chain_counts(p, pos, end, &batches);
    } else {
        want = 0;
    }
    for (int k = C_BSTART; k < NCOL; k++) /* 8 bytes or fewer a batch */
        if (batches > 64 && col_reserve(&b->c[k], batches * 8) < 0) goto error;
    {
        static const int per_record[] = {C_OFFSET, C_TS, C_KOFF, C_VOFF, C_HOFF, C_KVALID, C_VVALID};
        for (int k = 0; want > 0 && k < 7; k++)
            if ((!b->views || (per_record[k] != C_KOFF && per_record[k] != C_VOFF)) &&
                col_reserve(&b->c[per_record[k]], want * REC_WIDTH(k, b->wide)) < 0)
                goto error;
        if (b->views && want > 0 &&
            (col_reserve(&b->c[C_KVIEW], want * 16) < 0 || col_reserve(&b->c[C_VVIEW], want * 16) < 0))
            goto error;
    }
    while (pos < end) {
        if (b->n_records >= max_records || b->n_bytes >= max_bytes) break;
        if (end - pos < 17) break;
        const uint8_t *h = p + pos;
        int32_t size = (int32_t)be32(h + 8);
        if (h[16] != 2 || size < 49 || (Py_ssize_t)size > end - pos - 12) break;
        Py_ssize_t stop = pos + 12 + size;
        uint16_t attrs = be16(h + 21);
        int32_t count = (int32_t)be32(h + 57);
        int codec = attrs & 0x07;
        if (count < 0 || (codec != 0 && (codec > 4 || (decompress == Py_None && !cd)))) break;
        if (verify) {
            uint32_t computed;
            if (call_crc(crc_func, h + 21, stop - pos - 21, &computed) < 0) goto error;
            if (computed != be32(h + 17)) break;
        }
        /* the next batch's first bytes (assumed about this one's size, at most 64 KiB) fetched while this one
         * decodes: its CRC pass then reads from cache instead of waiting on memory */
        Py_ssize_t ahead = (stop - pos) < (64 << 10) ? (stop - pos) : (64 << 10);
        if (stop + ahead > end) ahead = end - stop;
        if (codec) {
            for (Py_ssize_t a = stop; a < stop + ahead; a += 64) __builtin_prefetch(p + a);
            b->ahead_end = NULL;
        } else {
            b->ahead_end = p + stop + ahead;
        }
        Py_ssize_t start = b->n_records;
        int r = superseded(sk, h, attrs, codec) ? 0
                : codec ? decode_compressed(b, decompress, cd, codec, h, stop - pos - 61, count, attrs)
                      : decode_records(b, h + 61, stop - pos - 61, count, be64(h), be64(h + 27), (attrs & 0x08) != 0,
                                       (int64_t)be64(h + 35), (int64_t)(pos + 61));
        b->ahead_end = NULL;
        if (r < 0) goto error;
        if (r == 1) break;
        if (put_batch(b, start, (long long)be64(h), (long long)pos, 2, (int32_t)be32(h + 12), (long long)be64(h + 43),
                      (int16_t)be16(h + 51), (int32_t)be32(h + 53), (attrs & 0x08) ? 1 : 0, attrs & 0x10,
                      attrs & 0x20) < 0)
            goto error;
        pos = stop;
    }
    b->busy = 0;
    if (sk) PyBuffer_Release(&live);
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(pos);
error:
    b->busy = 0;
    if (sk) PyBuffer_Release(&live);
    PyBuffer_Release(&view);
    return NULL;
}

/* take_error() -> (source, exception) | None: why run()'s last batch was declined, when a codec call or the
 * decompress callback raised (source 0: decompress; 3 / 4: cramjam's lz4 / zstd call), then forgotten. */
static PyObject *Builder_take_error(Builder *b, PyObject *Py_UNUSED(ignored)) {
    if (!b->error) Py_RETURN_NONE;
    PyObject *out = Py_BuildValue("(iO)", b->error_source, b->error);
    Py_CLEAR(b->error);
    return out;
}

static PyObject *Builder_finish(Builder *b, PyObject *Py_UNUSED(ignored)) {
    if (check_open(b) < 0) return NULL;
    PyObject *out = PyDict_New();
    if (!out) return NULL;
    b->finished = 1;
    mem_release(b->scratch.p, b->scratch.cap); /* to the pool, for the next chunk's builder */
    b->scratch = (Col){0};
    for (int i = 0; i < NCOL; i++) {
        PyObject *blk = col_to_block(&b->c[i]);
        if (!blk || PyDict_SetItemString(out, col_names[i], blk) < 0) {
            Py_XDECREF(blk);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(blk);
    }
    return out;
}

#include "_columns_walk.h"

static PyObject *Builder_get_n_records(Builder *b, void *closure) { return PyLong_FromSsize_t(b->n_records); }
static PyObject *Builder_get_n_bytes(Builder *b, void *closure) { return PyLong_FromLongLong(b->n_bytes); }
static PyObject *Builder_get_offset_width(Builder *b, void *closure) { return PyLong_FromLong(b->wide ? 8 : 4); }

static int Builder_init(Builder *b, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"views", "wide_offsets", NULL};
    int views = 0, wide = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|pp:ColumnBuilder", kwlist, &views, &wide)) return -1;
    if (b->busy) {
        PyErr_SetString(PyExc_RuntimeError, "ColumnBuilder is busy: run() or add_records() is in progress");
        return -1;
    }
    Py_CLEAR(b->error);
    b->views = views;
    for (int i = 0; i < NCOL; i++) {
        col_release(b->c[i].p, b->c[i].len, b->c[i].cap, b->c[i].touched);
        b->c[i].p = NULL;
        b->c[i].len = b->c[i].cap = b->c[i].touched = 0;
        if (col_grow(&b->c[i], 64) < 0) return -1; /* never NULL: an empty column still has a buffer */
    }
    mem_release(b->scratch.p, b->scratch.cap);
    b->scratch = (Col){0};
    b->n_records = b->n_headers = 0;
    b->n_bytes = 0;
    b->finished = 0;
    b->wide = wide;
    b->ahead_end = NULL;
    for (int k = 0; k < N_OFFSET_COLS; k++)
        if (put_offset(b, offset_cols[k], 0) < 0) return -1;
    return 0;
}

static void Builder_dealloc(Builder *b) {
    Py_CLEAR(b->error);
#ifdef KAFKALOG_HAVE_ZLIB
    if (b->zs_ready) inflateEnd(&b->zs);
#endif
    for (int i = 0; i < NCOL; i++) col_release(b->c[i].p, b->c[i].len, b->c[i].cap, b->c[i].touched);
    mem_release(b->scratch.p, b->scratch.cap);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static PyMethodDef Builder_methods[] = {
    {"begin_batch", (PyCFunction)Builder_begin_batch, METH_VARARGS,
     "begin_batch(base_offset, position, magic, leader_epoch, producer_id, producer_epoch, base_sequence, "
     "timestamp_type, transactional, control): the batch the next records belong to"},
    {"add_records", (PyCFunction)Builder_add_records, METH_O, "add_records(records): append decoded Record objects"},
    {"decode_records", (PyCFunction)Builder_decode_records, METH_VARARGS,
     "decode_records(payload, count, base_offset, base_timestamp, log_append_time | None) -> bool: decode a v2 "
     "records section; False (nothing kept) when it does not decode cleanly"},
    {"run", (PyCFunction)Builder_run, METH_VARARGS,
     "run(buf, pos, end, verify_crc, crc_func, max_records, max_bytes, decompress=None, codecs=None) -> int: decode "
     "consecutive magic 2 batches; returns the position of the first batch not taken"},
    {"take_error", (PyCFunction)Builder_take_error, METH_NOARGS,
     "take_error() -> (source, exception) | None: the exception that declined run()'s last batch (source 0: the "
     "decompress callback, 3/4: cramjam's lz4/zstd call), cleared once taken"},
    {"finish", (PyCFunction)Builder_finish, METH_NOARGS, "finish() -> dict of Blocks, buffer-protocol objects (see column_builder.py)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Builder_getset[] = {
    {"n_records", (getter)Builder_get_n_records, NULL, "records collected", NULL},
    {"n_bytes", (getter)Builder_get_n_bytes, NULL, "key and value bytes collected", NULL},
    {"offset_width", (getter)Builder_get_offset_width, NULL,
     "bytes of an entry of the offset columns (key/value/header offsets): 4 (int32) while they fit, else 8", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kafkalog.records._columns.ColumnBuilder",
    .tp_basicsize = sizeof(Builder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Collects records into column bytearrays; the compiled twin of column_builder.PyColumnBuilder.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Builder_init,
    .tp_dealloc = (destructor)Builder_dealloc,
    .tp_methods = Builder_methods,
    .tp_getset = Builder_getset,
};

static PyMethodDef module_methods[] = {
    OFFSET_METHODS
    WALK_METHODS
    {"walk_chain", walk_chain, METH_VARARGS,
     "walk_chain(buf, pos, end, crc_func) -> (starts, crcs, headers, pos): the length-chain walk of scan.py in C"},
    CRC_METHODS
    CODEC_METHODS
    MEM_METHODS
    ARROW_METHODS
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef columns_module = {
    PyModuleDef_HEAD_INIT, "_columns", "Compiled record-to-column decoding (see kafkalog/records/columns.py).", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__columns(void) {
    if (PyType_Ready(&BuilderType) < 0 || PyType_Ready(&BlockType) < 0) return NULL;
    if (crc_init_py() < 0 || walk_init_py() < 0) return NULL;
    if (PyDict_SetItemString(BuilderType.tp_dict, "compiled", Py_True) < 0) return NULL;
    PyType_Modified(&BuilderType);
    PyObject *m = PyModule_Create(&columns_module);
    if (!m) return NULL;
    Py_INCREF(&BuilderType);
    if (PyModule_AddObject(m, "ColumnBuilder", (PyObject *)&BuilderType) < 0) {
        Py_DECREF(&BuilderType);
        Py_DECREF(m);
        return NULL;
    }
#ifdef KAFKALOG_HAVE_ZLIB
    int gzip_in_c = 1;
#else
    int gzip_in_c = 0;
#endif
    /* whether run() inflates gzip members itself (built with zlib's headers) or asks its decompress callback */
    if (PyModule_AddIntConstant(m, "gzip_in_c", gzip_in_c) < 0) {
        Py_DECREF(m);
        return NULL;
    }
#ifdef KAFKALOG_HAVE_ZSTD
    /* libzstd's version at run time (ZSTD_versionNumber, e.g. 10504), 0 when built without its headers */
    long zstd_in_c = (long)ZSTD_versionNumber();
#else
    long zstd_in_c = 0;
#endif
    if (PyModule_AddIntConstant(m, "zstd_in_c", zstd_in_c) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
