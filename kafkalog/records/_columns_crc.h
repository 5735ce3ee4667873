/* CRC32C of batch bodies for the compiled decoder (included once, by _columns.c).
 *
 * Calling the crc32c package costs a Python call per batch, and on one 16 KiB batch its function runs far below
 * its bulk speed; here the CRC is computed in C with the SSE4.2 crc32 instruction: three interleaved streams
 * (the instruction's latency is three times its throughput) joined by precomputed "append zeros" tables, Mark
 * Adler's construction (the one the crc32c package itself uses). Without SSE4.2 (checked at run time) or off
 * x86-64, crc_available() is 0 and callers fall back to the package's function.
 */
#ifndef KAFKALOG_COLUMNS_CRC_H
#define KAFKALOG_COLUMNS_CRC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define KAFKALOG_HW_CRC 1
#include <nmmintrin.h>
#endif

#define CRC_POLY 0x82f63b78u /* CRC-32C (Castagnoli), reflected */
#define CRC_LONG 4096         /* bytes per stream in the long interleaved loop */
#define CRC_SHORT 256         /* bytes per stream in the short interleaved loop */

static int crc_hw_ok;      /* SSE4.2 present and the tables built */
static int crc_hw_enabled; /* what the decoder uses (tests switch it off to run the fallback) */
static uint32_t crc_long_tab[4][256], crc_short_tab[4][256];

static uint32_t gf2_times(const uint32_t *mat, uint32_t vec) {
    uint32_t sum = 0;
    for (; vec; vec >>= 1, mat++)
        if (vec & 1) sum ^= *mat;
    return sum;
}

static void gf2_square(uint32_t *square, const uint32_t *mat) {
    for (int n = 0; n < 32; n++) square[n] = gf2_times(mat, mat[n]);
}

/* the operator that appends len zero bytes (len a power of two) to a CRC */
static void crc_zeros_op(uint32_t *even, size_t len) {
    uint32_t odd[32], row = 1;
    odd[0] = CRC_POLY; /* one zero bit */
    for (int n = 1; n < 32; n++, row <<= 1) odd[n] = row;
    gf2_square(even, odd); /* two zero bits */
    gf2_square(odd, even); /* four */
    do {
        gf2_square(even, odd); /* even: a power-of-two number of bytes */
        len >>= 1;
        if (len == 0) return;
        gf2_square(odd, even);
        len >>= 1;
    } while (len);
    memcpy(even, odd, sizeof(odd));
}

/* byte-wise tables of the operator, applied by crc_shift */
static void crc_zeros(uint32_t tab[4][256], size_t len) {
    uint32_t op[32];
    crc_zeros_op(op, len);
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 0; k < 4; k++) tab[k][n] = gf2_times(op, n << (8 * k));
}

static inline uint32_t crc_shift(uint32_t tab[4][256], uint32_t crc) {
    return tab[0][crc & 0xff] ^ tab[1][(crc >> 8) & 0xff] ^ tab[2][(crc >> 16) & 0xff] ^ tab[3][crc >> 24];
}

#ifdef KAFKALOG_HW_CRC
static inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Three streams over the next 3 x `block` bytes while they last, joined into crc0 with the block's zeros table */
__attribute__((target("sse4.2"))) static inline uint64_t crc_streams(uint64_t crc0, const uint8_t **next, size_t *len,
                                                                     size_t block, uint32_t tab[4][256]) {
    const uint8_t *p = *next;
    while (*len >= block * 3) {
        uint64_t crc1 = 0, crc2 = 0;
        const uint8_t *end = p + block;
        do {
            crc0 = _mm_crc32_u64(crc0, load64(p));
            crc1 = _mm_crc32_u64(crc1, load64(p + block));
            crc2 = _mm_crc32_u64(crc2, load64(p + 2 * block));
            p += 8;
        } while (p < end);
        crc0 = crc_shift(tab, (uint32_t)crc0) ^ (uint32_t)crc1;
        crc0 = crc_shift(tab, (uint32_t)crc0) ^ (uint32_t)crc2;
        p += block * 2;
        *len -= block * 3;
    }
    *next = p;
    return crc0;
}

/* CRC32C of buf[0:len] (a whole CRC: initial and final inversion included) */
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(const uint8_t *next, size_t len) {
    uint64_t crc0 = 0xffffffffu;
    while (len && ((uintptr_t)next & 7)) {
        crc0 = _mm_crc32_u8((uint32_t)crc0, *next++);
        len--;
    }
    crc0 = crc_streams(crc0, &next, &len, CRC_LONG, crc_long_tab);
    crc0 = crc_streams(crc0, &next, &len, CRC_SHORT, crc_short_tab);
    for (; len >= 8; len -= 8, next += 8) crc0 = _mm_crc32_u64(crc0, load64(next));
    for (; len; len--) crc0 = _mm_crc32_u8((uint32_t)crc0, *next++);
    return (uint32_t)crc0 ^ 0xffffffffu;
}
#endif

static void crc_init(void) {
#ifdef KAFKALOG_HW_CRC
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        crc_zeros(crc_long_tab, CRC_LONG);
        crc_zeros(crc_short_tab, CRC_SHORT);
        crc_hw_ok = crc_hw_enabled = 1;
    }
#endif
}

/* CRC32C of p[0:n] in C when the CPU allows (1), else 0 and the caller asks the crc32c package */
static inline int crc_compute(const uint8_t *p, size_t n, uint32_t *out) {
#ifdef KAFKALOG_HW_CRC
    if (crc_hw_enabled) {
        *out = crc32c_hw(p, n);
        return 1;
    }
#endif
    (void)p;
    (void)n;
    (void)out;
    return 0;
}

/* ---- for the tests: the C CRC against the crc32c package, and the fallback forced --------------------------- */

static PyObject *py_hw_crc32c(PyObject *self, PyObject *arg) {
    Py_buffer view;
    uint32_t crc;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    int ok = crc_compute((const uint8_t *)view.buf, (size_t)view.len, &crc);
    PyBuffer_Release(&view);
    if (!ok) {
        PyErr_SetString(PyExc_RuntimeError, "the SSE4.2 CRC32C is not available (or switched off)");
        return NULL;
    }
    return PyLong_FromUnsignedLong(crc);
}

static PyObject *py_set_hw_crc(PyObject *self, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    crc_hw_enabled = on && crc_hw_ok;
    return PyBool_FromLong(crc_hw_enabled);
}

#define CRC_METHODS                                                                                                \
    {"hw_crc32c", py_hw_crc32c, METH_O, "hw_crc32c(buf) -> int: CRC32C in C (RuntimeError when unavailable)"},    \
    {"set_hw_crc", py_set_hw_crc, METH_O,                                                                          \
     "set_hw_crc(enabled) -> bool: use the C CRC32C when the CPU allows (False: the crc32c package's function)"},

#endif
