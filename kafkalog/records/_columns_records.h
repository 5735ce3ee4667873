/* The record walk of the compiled builder (included once, by _columns.c, after the Builder and its offset
 * columns): the DefaultRecords of one records section into the columns, compiled once per CPU target and chosen
 * at run time, as the CRC32C paths are.
 *
 * Paths (walk_init_py picks the best the CPU allows; KAFKALOG_WALK_PATH=name forces one, set_walk_path switches):
 *   avx2      x86-64 with AVX2, BMI1 and BMI2 (and the OS saving the 256-bit registers): the same C compiled
 *             with those instruction sets (a `target` attribute: the build needs no flags): 32-byte moves for the
 *             fixed-size field copies, BMI1/2 where the compiler picks them
 *   portable  any CPU: the baseline of the compiler's target (x86-64: SSE2)
 * Both run the same source, so they give the same columns and the same declines (tests/records/test_record_columns_walk.py
 * forces each on golden segments and random batches).
 */
#ifndef KAFKALOG_COLUMNS_RECORDS_H
#define KAFKALOG_COLUMNS_RECORDS_H

/* Decode `count` DefaultRecords filling the whole of buf[0:end]. 0 = done, 1 = declined (nothing kept), -1 = error.
 * The per-record columns and the key/value bytes are reserved once per batch and written through locals (stores
 * through the columns' own fields made the compiler reload them after every byte written); the header columns,
 * rarer, grow per header. `views` (a constant in each caller, so each loop is compiled for one layout): keys and
 * values become 16-byte view entries, pointing at buf itself when it lies in the source at src_base (>= 0), else
 * at copies in the data columns. */
static inline __attribute__((always_inline)) int
decode_records_impl(Builder *b, const uint8_t *buf, Py_ssize_t end, int64_t count, uint64_t base_offset,
                    uint64_t base_ts, int has_lat, int64_t lat, const int views, const int wide, int64_t src_base,
                    const int v32) {
    const int W = wide ? 8 : 4; /* bytes an offset entry takes */
    Py_ssize_t saved[N_RECORD_COLS];
    for (int i = 0; i < N_RECORD_COLS; i++) saved[i] = b->c[i].len;
    Py_ssize_t n_headers = b->n_headers;
    long long nbytes = b->n_bytes;
    Py_ssize_t pos = 0;
    int rc = 1;
    if (count < 0 || count > end / 7) goto decline; /* a record takes at least 7 bytes */
    static const int per_record[] = {C_OFFSET, C_TS, C_KOFF, C_VOFF, C_HOFF, C_KVALID, C_VVALID};
    for (int k = 0; k < 7; k++)
        if ((!views || (per_record[k] != C_KOFF && per_record[k] != C_VOFF)) && /* views write no offsets */
            col_reserve(&b->c[per_record[k]], count * REC_WIDTH(k, wide)) < 0)
            goto fail;
    if (views && (col_reserve(&b->c[C_KVIEW], count * 16) < 0 || col_reserve(&b->c[C_VVIEW], count * 16) < 0))
        goto fail;
    /* views copy only what does not lie in the source below 2 GiB (view offsets are 32-bit) */
    if (!views || src_base < 0 || src_base + end > INT32_MAX)
        if (col_reserve(&b->c[C_KDATA], end + 128) < 0 || col_reserve(&b->c[C_VDATA], end + 128) < 0) goto fail;
    Col *c = b->c;
    /* record i's entries: loop-invariant bases + i (per-column cursors did not fit in registers) */
    char *w_off = c[C_OFFSET].p + c[C_OFFSET].len, *w_ts = c[C_TS].p + c[C_TS].len;
    char *w_ko = c[C_KOFF].p + c[C_KOFF].len, *w_vo = c[C_VOFF].p + c[C_VOFF].len, *w_ho = c[C_HOFF].p + c[C_HOFF].len;
    uint8_t *w_kv = (uint8_t *)c[C_KVALID].p + c[C_KVALID].len, *w_vv = (uint8_t *)c[C_VVALID].p + c[C_VVALID].len;
    char *w_kview = c[C_KVIEW].p + c[C_KVIEW].len, *w_vview = c[C_VVIEW].p + c[C_VVIEW].len;
    char *kd = c[C_KDATA].p, *vd = c[C_VDATA].p;
    Py_ssize_t kl = c[C_KDATA].len, vl = c[C_VDATA].len;
    /* the next batch's bytes, fetched one batch (assumed this one's size) ahead of the record being decoded, so its
     * CRC pass reads from cache; spread over the records, the fetches overlap their decoding */
    const uint8_t *ahead_end = b->ahead_end, *ahead = (const uint8_t *)((uintptr_t)(buf + end) & ~(uintptr_t)63);
    for (int64_t i = 0; i < count; i++) {
        int64_t size, ts_delta, off_delta, nh;
        if (rd_varint(buf, &pos, end, &size) < 0 || size < 0 || size > end - pos) goto decline;
        Py_ssize_t rec_end = pos + (Py_ssize_t)size;
        if (ahead_end) {
            const uint8_t *want = buf + rec_end + end + 61;
            for (want = want < ahead_end ? want : ahead_end; ahead < want; ahead += 64) __builtin_prefetch(ahead);
        }
        pos += 1; /* attributes */
        if (pos > rec_end) goto decline;
        if (rd_varlong(buf, &pos, rec_end, &ts_delta) < 0 || rd_varint(buf, &pos, rec_end, &off_delta) < 0) goto decline;
        if (views) {
            int rk = take_view(buf, &pos, rec_end, end, src_base, kd, &kl, w_kv + i, w_kview + 16 * i, &nbytes,
                               v32);
            int rv = rk < 0 ? rk : take_view(buf, &pos, rec_end, end, src_base, vd, &vl, w_vv + i, w_vview + 16 * i,
                                             &nbytes, v32);
            if (rk == -2 || rv == -2) goto decline;
            if (rk < 0 || rv < 0) {
                PyErr_SetString(PyExc_OverflowError, "binary_view columns: over 2 GiB of copied key or value bytes in "
                                                     "one chunk (read it in chunks with iter_record_columns)");
                goto fail;
            }
        } else if (take_field(buf, &pos, rec_end, end, kd, &kl, w_kv + i, w_ko + W * i, wide, &nbytes, v32) < 0 ||
                   take_field(buf, &pos, rec_end, end, vd, &vl, w_vv + i, w_vo + W * i, wide, &nbytes, v32) < 0) {
            goto decline;
        }
        if (rd_varint(buf, &pos, rec_end, &nh) < 0 || nh < 0 || nh > rec_end - pos) goto decline;
        for (int64_t h = 0; h < nh; h++) {
            int64_t kn;
            if (rd_varint(buf, &pos, rec_end, &kn) < 0 || kn < 0 || kn > rec_end - pos) goto decline;
            if (!utf8_valid(buf + pos, (Py_ssize_t)kn)) goto decline;
            if (put_bytes(&c[C_HKDATA], buf + pos, (Py_ssize_t)kn) < 0) goto fail;
            pos += (Py_ssize_t)kn;
            if (col_reserve(&c[C_HKOFF], 8) < 0) goto fail;
            append_offset(&c[C_HKOFF], c[C_HKDATA].len, wide);
            long long ignored = 0;
            if (col_reserve(&c[C_HVOFF], 8) < 0 || col_reserve(&c[C_HVVALID], 1) < 0) goto fail;
            int r = put_field(&c[C_HVOFF], &c[C_HVVALID], &c[C_HVDATA], buf, &pos, rec_end, end, wide, &ignored);
            if (r == -1) goto fail;
            if (r == -2) goto decline;
        }
        if (pos != rec_end) goto decline;
        /* the next record starts where this one's size said it ends: known as soon as the size was read, so its
         * parse need not wait on the loads and decodes of this one's key and value lengths */
        pos = rec_end;
        n_headers += (Py_ssize_t)nh;
        int64_t hoff = (int64_t)n_headers;
        int64_t off = (int64_t)(base_offset + (uint64_t)off_delta);
        int64_t ts = has_lat ? lat : (int64_t)(base_ts + (uint64_t)ts_delta);
        put_offset_at(w_ho + W * i, hoff, wide);
        memcpy(w_off + 8 * i, &off, 8);
        memcpy(w_ts + 8 * i, &ts, 8);
    }
    if (pos != end) goto decline;
    for (int k = 0; k < 7; k++)
        if (!views || (per_record[k] != C_KOFF && per_record[k] != C_VOFF)) /* views leave the offsets at [0] */
            c[per_record[k]].len += (Py_ssize_t)count * REC_WIDTH(k, wide);
    if (views) {
        c[C_KVIEW].len += (Py_ssize_t)count * 16;
        c[C_VVIEW].len += (Py_ssize_t)count * 16;
    }
    c[C_KDATA].len = kl;
    c[C_VDATA].len = vl;
    b->n_records += (Py_ssize_t)count;
    b->n_headers = n_headers;
    b->n_bytes = nbytes;
    return 0;
fail:
    rc = -1;
decline:
    for (int i = 0; i < N_RECORD_COLS; i++) {
        b->c[i].len = saved[i];
        b->c[i].touched = b->c[i].cap; /* what the batch wrote past len stays resident: count all of it */
    }
    return rc;
}

/* the four layouts of decode_records_impl (views, wide), compiled for one target (`attrs`; v32: it has AVX2) */
#define WALK_VARIANTS(name, attrs, v32)                                                                            \
    attrs static int name(Builder *b, const uint8_t *buf, Py_ssize_t end, int64_t count, uint64_t base_offset,    \
                          uint64_t base_ts, int has_lat, int64_t lat, int64_t src_base) {                         \
        if (b->views && b->wide)                                                                                   \
            return decode_records_impl(b, buf, end, count, base_offset, base_ts, has_lat, lat, 1, 1, src_base, v32); \
        if (b->views)                                                                                              \
            return decode_records_impl(b, buf, end, count, base_offset, base_ts, has_lat, lat, 1, 0, src_base, v32); \
        if (b->wide)                                                                                               \
            return decode_records_impl(b, buf, end, count, base_offset, base_ts, has_lat, lat, 0, 1, -1, v32);     \
        return decode_records_impl(b, buf, end, count, base_offset, base_ts, has_lat, lat, 0, 0, -1, v32);         \
    }

enum { WALK_PORTABLE, WALK_AVX2, WALK_NPATHS };
static const char *const walk_names[WALK_NPATHS] = {"portable", "avx2"};
static unsigned walk_available = 1u << WALK_PORTABLE;
static int walk_best = WALK_PORTABLE, walk_active = WALK_PORTABLE;

WALK_VARIANTS(decode_records_portable, , 0)

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define KAFKALOG_WALK_X86 1
#include <cpuid.h>
WALK_VARIANTS(decode_records_avx2, __attribute__((target("avx2,bmi,bmi2"))), 1)

/* AVX2, BMI1 and BMI2, with the OS saving the 256-bit registers (XCR0) */
static void walk_x86_detect(void) {
    unsigned a, b, c, d, lo, hi;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX)) return;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    if ((lo & 0x06) != 0x06 || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    if ((b & bit_AVX2) && (b & bit_BMI) && (b & bit_BMI2)) walk_available |= 1u << WALK_AVX2;
}
#endif

/* src_base: where buf starts in the source that run() walks, or -1 (a decompressed or handed-in payload). The
 * offsets of a payload of `end` bytes fit int32 when the columns' bytes stay below 2 GiB after it (builder_fit). */
static int decode_records(Builder *b, const uint8_t *buf, Py_ssize_t end, int64_t count, uint64_t base_offset,
                          uint64_t base_ts, int has_lat, int64_t lat, int64_t src_base) {
    if (builder_fit(b, end) < 0) return -1;
#ifdef KAFKALOG_WALK_X86
    if (walk_active == WALK_AVX2)
        return decode_records_avx2(b, buf, end, count, base_offset, base_ts, has_lat, lat, src_base);
#endif
    return decode_records_portable(b, buf, end, count, base_offset, base_ts, has_lat, lat, src_base);
}

/* the path called `name`: its number, -1 for an unknown name, -2 for a path this CPU or build lacks */
static int walk_lookup(const char *name) {
    for (int i = 0; i < WALK_NPATHS; i++)
        if (strcmp(name, walk_names[i]) == 0) return (walk_available >> i) & 1 ? i : -2;
    return -1;
}

/* Detects the CPU's paths and applies KAFKALOG_WALK_PATH (unset, empty or "auto": the best), as crc_init does
 * KAFKALOG_CRC32C_PATH: a name that is unknown or that this CPU lacks is a RuntimeWarning and the best path is
 * used. -1 if the warning raised. */
static int walk_init_py(void) {
#ifdef KAFKALOG_WALK_X86
    walk_x86_detect();
#endif
    for (int i = 0; i < WALK_NPATHS; i++)
        if ((walk_available >> i) & 1) walk_best = i;
    walk_active = walk_best;
    const char *want = getenv("KAFKALOG_WALK_PATH");
    if (!want || !*want || strcmp(want, "auto") == 0) return 0;
    int path = walk_lookup(want);
    if (path >= 0) {
        walk_active = path;
        return 0;
    }
    return PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "KAFKALOG_WALK_PATH=%.40s: %s; using %s", want,
                            path == -1 ? "no such record walk path (avx2, portable, auto)"
                                       : "this CPU (or build) cannot run that record walk path",
                            walk_names[walk_best]);
}

static PyObject *py_walk_paths(PyObject *self, PyObject *unused) {
    PyObject *out = PyList_New(0);
    for (int i = WALK_NPATHS - 1; out && i >= 0; i--)
        if ((walk_available >> i) & 1) {
            PyObject *s = PyUnicode_FromString(walk_names[i]);
            if (!s || PyList_Append(out, s) < 0) Py_CLEAR(out);
            Py_XDECREF(s);
        }
    return out;
}

static PyObject *py_walk_path(PyObject *self, PyObject *unused) { return PyUnicode_FromString(walk_names[walk_active]); }

static PyObject *py_set_walk_path(PyObject *self, PyObject *arg) {
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    int path = strcmp(name, "auto") == 0 ? walk_best : walk_lookup(name);
    if (path == -1) PyErr_Format(PyExc_ValueError, "no record walk path '%s'", name);
    if (path == -2) PyErr_Format(PyExc_ValueError, "this CPU (or build) cannot run the record walk path '%s'", name);
    if (path < 0) return NULL;
    walk_active = path;
    return PyUnicode_FromString(walk_names[walk_active]);
}

#define WALK_METHODS                                                                                               \
    {"walk_paths", py_walk_paths, METH_NOARGS, "walk_paths() -> list: the record walk paths this CPU runs, best first"}, \
    {"walk_path", py_walk_path, METH_NOARGS, "walk_path() -> str: the record walk path in use"},                   \
    {"set_walk_path", py_set_walk_path, METH_O,                                                                    \
     "set_walk_path(name) -> str: use that record walk path ('auto': the best; ValueError if this CPU lacks it)"},

#endif
