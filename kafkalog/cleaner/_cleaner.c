/* The log cleaner's per-record loops in C (see kafkalog/cleaner/native.py, which wraps them).
 *
 * The offset map is Kafka's SkimpyOffsetMap: one caller-owned buffer of slots * 24 bytes, each slot a key's MD5
 * (16 bytes) and an offset (int64), open addressing with Kafka's probe sequence, an all-zero slot empty. The
 * functions take the columns kafkalog.records' columnar decoder produces (numpy arrays, through the buffer
 * protocol) so that building the map, deciding which records a chunk keeps and re-encoding the records of rebuilt
 * batches take no Python object per record. Everything a batch decides (transactions, producers, horizons) stays
 * in Python; these loops only do what the pure-Python path does per record, with the same results.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_md5.h"

#define ENTRY 24
#define HASH 16

/* ---- buffers ------------------------------------------------------------------------------------------------ */

#define MAX_BUFS 24
typedef struct {
    Py_buffer b[MAX_BUFS];
    int n;
} Bufs;

static void bufs_release(Bufs *bs) {
    for (int i = 0; i < bs->n; i++) PyBuffer_Release(&bs->b[i]);
    bs->n = 0;
}

/* a C-contiguous buffer of items of `item` bytes; *count gets the number of items */
static void *bufs_get(Bufs *bs, PyObject *o, Py_ssize_t item, int writable, Py_ssize_t *count) {
    Py_buffer *b = &bs->b[bs->n];
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) return NULL;
    bs->n++;
    if (b->len % item) {
        PyErr_Format(PyExc_ValueError, "buffer of %zd bytes is not made of %zd-byte items", b->len, item);
        return NULL;
    }
    *count = b->len / item;
    return b->buf;
}

typedef struct {
    uint8_t *buf;
    Py_ssize_t slots;
} Table;

static int table_of(Bufs *bs, PyObject *o, Table *t) {
    Py_ssize_t n;
    t->buf = bufs_get(bs, o, ENTRY, 1, &n);
    if (!t->buf) return -1;
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "an offset map needs at least one slot");
        return -1;
    }
    t->slots = n;
    return 0;
}

/* ---- the table ---------------------------------------------------------------------------------------------- */

/* Kafka's positionOf: a big-endian int of the hash at min(attempt, 12), plus how far the attempt is past 12 */
static inline Py_ssize_t slot_of(const uint8_t *h, Py_ssize_t slots, uint32_t attempt) {
    uint32_t at = attempt < HASH - 4 ? attempt : HASH - 4;
    uint32_t probe = ((uint32_t)h[at] << 24) | ((uint32_t)h[at + 1] << 16) | ((uint32_t)h[at + 2] << 8) | h[at + 3];
    probe += attempt > HASH - 4 ? attempt - (HASH - 4) : 0;
    int32_t s = (int32_t)probe;
    uint32_t a = s == INT32_MIN ? 0 : (uint32_t)(s < 0 ? -s : s);
    return (Py_ssize_t)(a % (uint64_t)slots);
}

static inline int slot_empty(const uint8_t *p) {
    static const uint8_t zero[ENTRY];
    return memcmp(p, zero, ENTRY) == 0;
}

/* the slot holding hash h, or the empty slot where it goes */
static uint8_t *find(const Table *t, const uint8_t *h) {
    for (uint32_t attempt = 0;; attempt++) {
        uint8_t *p = t->buf + slot_of(h, t->slots, attempt) * ENTRY;
        if (slot_empty(p) || memcmp(p, h, HASH) == 0) return p;
    }
}

/* put: 1 when a new entry was added, 0 when replaced, -1 when the map is full */
static int put(const Table *t, Py_ssize_t size, const uint8_t *h, int64_t offset) {
    if (size >= t->slots) {
        uint8_t *p = NULL;
        for (uint32_t attempt = 0; attempt < (uint32_t)t->slots + HASH; attempt++) {
            uint8_t *q = t->buf + slot_of(h, t->slots, attempt) * ENTRY;
            if (memcmp(q, h, HASH) == 0) {
                p = q;
                break;
            }
        }
        if (!p) return -1;
        memcpy(p + HASH, &offset, 8);
        return 0;
    }
    uint8_t *p = find(t, h);
    int added = slot_empty(p);
    memcpy(p, h, HASH);
    memcpy(p + HASH, &offset, 8);
    return added;
}

static int64_t get(const Table *t, Py_ssize_t size, const uint8_t *h) {
    if (size >= t->slots) { /* no empty slot to end a probe: look at every slot */
        for (Py_ssize_t i = 0; i < t->slots; i++)
            if (memcmp(t->buf + i * ENTRY, h, HASH) == 0) {
                int64_t v;
                memcpy(&v, t->buf + i * ENTRY + HASH, 8);
                return v;
            }
        return -1;
    }
    const uint8_t *p = find(t, h);
    if (slot_empty(p)) return -1;
    int64_t v;
    memcpy(&v, p + HASH, 8);
    return v;
}

/* ---- single keys (the pure batch paths and the tests) ------------------------------------------------------- */

static PyObject *py_md5(PyObject *self, PyObject *arg) {
    Py_buffer v;
    uint8_t out[HASH];
    if (PyObject_GetBuffer(arg, &v, PyBUF_SIMPLE) < 0) return NULL;
    md5_digest(v.buf, (size_t)v.len, out);
    PyBuffer_Release(&v);
    return PyBytes_FromStringAndSize((const char *)out, HASH);
}

/* table_put(table, size, key, offset) -> size */
static PyObject *py_table_put(PyObject *self, PyObject *args) {
    PyObject *table;
    Py_buffer key;
    Py_ssize_t size;
    long long offset;
    Bufs bs = {.n = 0};
    Table t;
    uint8_t h[HASH];
    if (!PyArg_ParseTuple(args, "Ony*L", &table, &size, &key, &offset)) return NULL;
    md5_digest(key.buf, (size_t)key.len, h);
    PyBuffer_Release(&key);
    if (table_of(&bs, table, &t) < 0) goto fail;
    int r = put(&t, size, h, offset);
    bufs_release(&bs);
    if (r < 0) {
        PyErr_Format(PyExc_OverflowError, "offset map is full (%zd slots)", t.slots);
        return NULL;
    }
    return PyLong_FromSsize_t(size + r);
fail:
    bufs_release(&bs);
    return NULL;
}

/* table_get(table, size, key) -> offset or -1 */
static PyObject *py_table_get(PyObject *self, PyObject *args) {
    PyObject *table;
    Py_buffer key;
    Py_ssize_t size;
    Bufs bs = {.n = 0};
    Table t;
    uint8_t h[HASH];
    if (!PyArg_ParseTuple(args, "Ony*", &table, &size, &key)) return NULL;
    md5_digest(key.buf, (size_t)key.len, h);
    PyBuffer_Release(&key);
    if (table_of(&bs, table, &t) < 0) {
        bufs_release(&bs);
        return NULL;
    }
    int64_t v = get(&t, size, h);
    bufs_release(&bs);
    return PyLong_FromLongLong(v);
}

/* ---- keys of a chunk ---------------------------------------------------------------------------------------- */

typedef struct {
    const int64_t *offset, *koff;
    const uint8_t *kvalid, *kdata;
    Py_ssize_t n, kdata_len;
} Keys;

/* offsets, key_offsets (n + 1), key_valid, key_data: checked so that every key lies inside key_data */
static int keys_of(Bufs *bs, PyObject *offsets, PyObject *koff, PyObject *kvalid, PyObject *kdata, Keys *k) {
    Py_ssize_t n1, n2, n3;
    if (!(k->offset = bufs_get(bs, offsets, 8, 0, &k->n)) || !(k->koff = bufs_get(bs, koff, 8, 0, &n1)) ||
        !(k->kvalid = bufs_get(bs, kvalid, 1, 0, &n2)) || !(k->kdata = bufs_get(bs, kdata, 1, 0, &k->kdata_len)))
        return -1;
    n3 = k->n;
    if (n1 != n3 + 1 || n2 != n3) {
        PyErr_SetString(PyExc_ValueError, "key columns do not match the offsets");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n3; i++)
        if (k->koff[i] < 0 || k->koff[i] > k->koff[i + 1] || k->koff[i + 1] > k->kdata_len) {
            PyErr_SetString(PyExc_ValueError, "key offsets outside the key data");
            return -1;
        }
    return 0;
}

static inline void key_hash(const Keys *k, Py_ssize_t i, uint8_t h[HASH]) {
    md5_digest(k->kdata + k->koff[i], (size_t)(k->koff[i + 1] - k->koff[i]), h);
}

/* The MD5 of every keyed record of the chunk at or past `from` (n * 16 bytes; NULL with MemoryError set), each
 * record's first slot prefetched as it is hashed: a big map is a cache miss per record, and issuing them all
 * ahead of the probes overlaps them instead of waiting for each in turn. */
static uint8_t *chunk_hashes(const Keys *k, const Table *t, int64_t from) {
    uint8_t *hs = PyMem_Malloc((size_t)(k->n ? k->n : 1) * HASH);
    if (!hs) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < k->n; i++)
        if (k->kvalid[i] && k->offset[i] >= from) {
            key_hash(k, i, hs + i * HASH);
            __builtin_prefetch(t->buf + slot_of(hs + i * HASH, t->slots, 0) * ENTRY);
        }
    return hs;
}

/* build_map(table, size, desired, start, latest, offsets, key_offsets, key_valid, key_data, batch_start,
 *           batch_kind, batch_last_offset, batch_count) -> (size, latest, messages_read, full)
 * Cleaner.buildOffsetMapForSegment over one chunk: batch_kind 0 = data (its keyed records at or past start go into
 * the map until it holds `desired` entries; OverflowError when all its slots are taken first, which a load factor
 * above 1 allows, as Kafka's put refuses a full map), 1 = control (one message), 2 = aborted (batch_count messages). */
static PyObject *py_build_map(PyObject *self, PyObject *args) {
    PyObject *table, *offsets, *koff, *kvalid, *kdata, *bstart_o, *bkind_o, *blast_o, *bcount_o;
    Py_ssize_t size, desired, nb, nb2, nb3, nb4;
    long long start, latest, read = 0;
    Bufs bs = {.n = 0};
    Table t;
    Keys k;
    int full = 0;
    uint8_t *hs = NULL;
    if (!PyArg_ParseTuple(args, "OnnLLOOOOOOOO", &table, &size, &desired, &start, &latest, &offsets, &koff, &kvalid,
                          &kdata, &bstart_o, &bkind_o, &blast_o, &bcount_o))
        return NULL;
    const int64_t *bstart, *blast;
    const int8_t *bkind;
    const int32_t *bcount;
    if (table_of(&bs, table, &t) < 0 || keys_of(&bs, offsets, koff, kvalid, kdata, &k) < 0 ||
        !(bstart = bufs_get(&bs, bstart_o, 8, 0, &nb)) || !(bkind = bufs_get(&bs, bkind_o, 1, 0, &nb2)) ||
        !(blast = bufs_get(&bs, blast_o, 8, 0, &nb3)) || !(bcount = bufs_get(&bs, bcount_o, 4, 0, &nb4)))
        goto fail;
    if (nb2 != nb || nb3 != nb || nb4 != nb) {
        PyErr_SetString(PyExc_ValueError, "batch columns do not match");
        goto fail;
    }
    for (Py_ssize_t b = 0; b < nb; b++) {
        Py_ssize_t lo = bstart[b], hi = b + 1 < nb ? bstart[b + 1] : k.n;
        if (lo < 0 || lo > hi || hi > k.n) {
            PyErr_SetString(PyExc_ValueError, "batch_start outside the records");
            goto fail;
        }
    }
    if (!(hs = chunk_hashes(&k, &t, start))) goto fail;
    for (Py_ssize_t b = 0; b < nb && !full; b++) {
        Py_ssize_t lo = bstart[b], hi = b + 1 < nb ? bstart[b + 1] : k.n;
        if (bkind[b] == 1) {
            read += 1;
        } else if (bkind[b] == 2) {
            read += bcount[b];
        } else {
            for (Py_ssize_t i = lo; i < hi; i++) {
                if (k.kvalid[i] && k.offset[i] >= start) {
                    if (size >= desired) {
                        full = 1;
                        break;
                    }
                    if (size >= t.slots) { /* a load factor above 1: Kafka's put requires a free slot */
                        PyErr_Format(PyExc_OverflowError, "offset map is full (%zd slots)", t.slots);
                        goto fail;
                    }
                    size += put(&t, size, hs + i * HASH, k.offset[i]);
                    latest = k.offset[i];
                }
                read += 1;
            }
        }
        if (!full && blast[b] >= start) latest = blast[b];
    }
    PyMem_Free(hs);
    bufs_release(&bs);
    return Py_BuildValue("nLLO", size, latest, read, full ? Py_True : Py_False);
fail:
    PyMem_Free(hs);
    bufs_release(&bs);
    return NULL;
}

/* classify(table, size, latest, offsets, key_offsets, key_valid, key_data, out) fills out (uint8 per record):
 * 3 = past the map's latest offset (kept), 2 = keyless (dropped, counted invalid), 1 = the key's latest record
 * (kept unless an expired tombstone), 0 = superseded */
static PyObject *py_classify(PyObject *self, PyObject *args) {
    PyObject *table, *offsets, *koff, *kvalid, *kdata, *out_o;
    Py_ssize_t size, nout;
    long long latest;
    Bufs bs = {.n = 0};
    Table t;
    Keys k;
    uint8_t *out, *hs = NULL;
    if (!PyArg_ParseTuple(args, "OnLOOOOO", &table, &size, &latest, &offsets, &koff, &kvalid, &kdata, &out_o))
        return NULL;
    if (table_of(&bs, table, &t) < 0 || keys_of(&bs, offsets, koff, kvalid, kdata, &k) < 0 ||
        !(out = bufs_get(&bs, out_o, 1, 1, &nout)))
        goto fail;
    if (nout != k.n) {
        PyErr_SetString(PyExc_ValueError, "out does not match the offsets");
        goto fail;
    }
    if (!(hs = chunk_hashes(&k, &t, INT64_MIN))) goto fail;
    for (Py_ssize_t i = 0; i < k.n; i++) {
        if (k.offset[i] > latest)
            out[i] = 3;
        else if (!k.kvalid[i])
            out[i] = 2;
        else
            out[i] = k.offset[i] >= get(&t, size, hs + i * HASH) ? 1 : 0;
    }
    PyMem_Free(hs);
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    PyMem_Free(hs);
    bufs_release(&bs);
    return NULL;
}

#include "_cleaner_encode.h"
#include "_cleaner_write.h"

/* check_crcs(buf, pos, end) -> (stop, bad): walks the whole magic 2 batches of buf[pos:end] checking each CRC32C
 * (over attributes .. end, as Kafka's DefaultRecordBatch.isValid). Stops at the first batch whose CRC does not
 * match (bad = 1, stop = its position), or (bad = 0) at end, at a batch that is not whole in buf[pos:end], at a
 * batch of another magic or one shorter than a v2 header; the caller frames those. */
static PyObject *py_check_crcs(PyObject *self, PyObject *args) {
    Py_buffer v;
    Py_ssize_t pos, end;
    int bad = 0;
    if (!PyArg_ParseTuple(args, "y*nn", &v, &pos, &end)) return NULL;
    if (pos < 0 || end > v.len || pos > end) {
        PyBuffer_Release(&v);
        PyErr_SetString(PyExc_ValueError, "check_crcs: range outside the buffer");
        return NULL;
    }
    const uint8_t *b = v.buf;
    Py_BEGIN_ALLOW_THREADS
    while (end - pos >= BATCH_HEADER) {
        const uint8_t *h = b + pos;
        int64_t size = (int32_t)((uint32_t)h[8] << 24 | (uint32_t)h[9] << 16 | (uint32_t)h[10] << 8 | h[11]);
        if (h[16] != 2 || size < BATCH_HEADER - 12 || size > end - pos - 12) break;
        uint32_t stored = (uint32_t)h[17] << 24 | (uint32_t)h[18] << 16 | (uint32_t)h[19] << 8 | h[20];
        if (crc32c_of(h + 21, (size_t)(size + 12 - 21)) != stored) {
            bad = 1;
            break;
        }
        pos += 12 + size;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&v);
    return Py_BuildValue("nO", pos, bad ? Py_True : Py_False);
}

/* map_offsets(table, size, out) -> n: the offset of every entry of the map (slots in order) into out (int64, room
 * for `size`); the clean pass's live offsets (columnar.Superseded), without a Python object per slot. */
static PyObject *py_map_offsets(PyObject *self, PyObject *args) {
    PyObject *table, *out_o;
    Py_ssize_t size, room, n = 0;
    Bufs bs = {.n = 0};
    Table t;
    int64_t *out;
    if (!PyArg_ParseTuple(args, "OnO", &table, &size, &out_o)) return NULL;
    if (table_of(&bs, table, &t) < 0 || !(out = bufs_get(&bs, out_o, 8, 1, &room))) {
        bufs_release(&bs);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < t.slots && n < room; i++) {
        const uint8_t *p = t.buf + i * ENTRY;
        uint64_t w[3];
        memcpy(w, p, ENTRY);
        if (w[0] | w[1] | w[2]) memcpy(&out[n++], p + HASH, 8);
    }
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    if (n != size && n == room) { /* more entries than the map's size says */
        PyErr_SetString(PyExc_ValueError, "map_offsets: the map holds more entries than its size");
        return NULL;
    }
    return PyLong_FromSsize_t(n);
}

static PyMethodDef module_methods[] = {
    {"map_offsets", py_map_offsets, METH_VARARGS,
     "map_offsets(table, size, out) -> int: the offsets of the map's entries into out (int64, room for size)"},
    {"md5", py_md5, METH_O, "md5(buf) -> bytes: the 16-byte MD5 digest (the offset map's key hash)"},
    {"table_put", py_table_put, METH_VARARGS,
     "table_put(table, size, key, offset) -> size: put key's MD5 -> offset (OverflowError when full)"},
    {"table_get", py_table_get, METH_VARARGS, "table_get(table, size, key) -> int: the offset of key, -1 if absent"},
    {"build_map", py_build_map, METH_VARARGS,
     "build_map(table, size, desired, start, latest, offsets, key_offsets, key_valid, key_data, batch_start, "
     "batch_kind, batch_last_offset, batch_count) -> (size, latest, messages_read, full)"},
    {"classify", py_classify, METH_VARARGS,
     "classify(table, size, latest, offsets, key_offsets, key_valid, key_data, out): per record 3 past the map, "
     "2 keyless, 1 latest of its key, 0 superseded"},
    {"check_crcs", py_check_crcs, METH_VARARGS,
     "check_crcs(buf, pos, end) -> (stop, bad): the CRC32C of each whole magic 2 batch from pos; bad when the "
     "batch at stop fails it"},
    WRITE_METHODS
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef cleaner_module = {
    PyModuleDef_HEAD_INIT, "_cleaner", "The log cleaner's per-record loops (see kafkalog/cleaner/native.py).", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__cleaner(void) {
    if (crc_init_py() < 0) return NULL;
    PyObject *m = PyModule_Create(&cleaner_module);
#ifdef KAFKALOG_HAVE_ZLIB
    int gzip_in_c = 1;
#else
    int gzip_in_c = 0;
#endif
    /* whether write_chunk deflates gzip batches itself (built with zlib's headers) or calls compressors[1] */
    if (m && PyModule_AddIntConstant(m, "gzip_in_c", gzip_in_c) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
