/* CRC32C of batch bodies for the compiled decoder (included once, by _columns.c).
 *
 * Calling the crc32c package costs a Python call per batch, and on one 16 KiB batch its function runs far below
 * its bulk speed; here the CRC is computed in C with the SSE4.2 crc32 instruction: three interleaved streams
 * (the instruction's latency is three times its throughput) joined by precomputed "append zeros" tables, Mark
 * Adler's construction (the one the crc32c package itself uses). Those streams end at 8 bytes a cycle; where the
 * CPU has AVX-512 carry-less multiplication (VPCLMULQDQ, checked at run time), inputs of 256 bytes or more are
 * first folded 64 bytes per instruction pair (crc_fold: the 16-byte lanes of four 512-bit accumulators carried
 * forward by multiplying them with x^n mod P) and only the last 16 folded bytes and the tail go through crc32.
 * Without SSE4.2 (checked at run time) or off x86-64, crc_compute() is 0 and callers fall back to the package's
 * function.
 */
#ifndef KAFKALOG_COLUMNS_CRC_H
#define KAFKALOG_COLUMNS_CRC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define KAFKALOG_HW_CRC 1
#include <cpuid.h>
#include <immintrin.h>
/* compilers whose intrinsics include the 512-bit carry-less multiply (older ones build the crc32 streams only) */
#if defined(bit_VPCLMULQDQ) && defined(bit_AVX512F) && \
    ((defined(__clang__) && __clang_major__ >= 8) || (!defined(__clang__) && __GNUC__ >= 9))
#define KAFKALOG_FOLD_CRC 1
#endif
#endif

#define CRC_POLY 0x82f63b78u /* CRC-32C (Castagnoli), reflected */
#define CRC_LONG 4096         /* bytes per stream in the long interleaved loop */
#define CRC_SHORT 256         /* bytes per stream in the short interleaved loop */

static int crc_hw_ok;      /* SSE4.2 present and the tables built */
static int crc_hw_enabled; /* what the decoder uses (tests switch it off to run the fallback) */
static int crc_fold_ok, crc_fold_enabled; /* AVX-512 VPCLMULQDQ present (usable by the OS); in use */
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

#ifdef KAFKALOG_FOLD_CRC
/* Folding constants: a 16-byte lane (bytes 0-7 `lo`, 8-15 `hi`, little-endian) carried n bytes forward is
 * clmul(lo, K_LO) ^ clmul(hi, K_HI) with K_LO = x^(8n+31) mod P and K_HI = x^(8n-33) mod P, bit-reflected as the
 * register is (tests/test_record_columns_crc.py checks the result against the crc32c package at every length). */
#define CRC_K16_LO 0xf20c0dfeu
#define CRC_K16_HI 0x493c7d27u
#define CRC_K32_LO 0x3da6d0cbu
#define CRC_K32_HI 0xba4fc28eu
#define CRC_K48_LO 0x1c291d04u
#define CRC_K48_HI 0xddc0152bu
#define CRC_K64_LO 0x740eef02u
#define CRC_K64_HI 0x9e4addf8u
#define CRC_K256_LO 0xdcb17aa4u
#define CRC_K256_HI 0xb9e02b86u
#define CRC_FOLD_MIN 256 /* the bytes crc_fold needs (its four accumulators' first load) */
#define CRC_FOLD_TARGET __attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2")))

CRC_FOLD_TARGET static inline __m512i fold512(__m512i x, __m512i k) {
    return _mm512_xor_si512(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11));
}

CRC_FOLD_TARGET static inline __m128i fold128(__m128i x, uint32_t lo, uint32_t hi) {
    __m128i k = _mm_set_epi64x(hi, lo);
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/* The register `crc` carried over the whole 64-byte blocks of *next[0:*len] (*len >= CRC_FOLD_MIN): the register
 * is xored into the first bytes (a reflected CRC's register is its message's first 4 bytes, xored in), the
 * blocks folded into one 16-byte value, whose crc32 from a zero register is the CRC so far. *next and *len move
 * past the blocks (fewer than 64 bytes stay). */
CRC_FOLD_TARGET static uint32_t crc_fold(uint32_t crc, const uint8_t **next, size_t *len) {
    const uint8_t *p = *next;
    size_t n = *len;
    __m512i x0 = _mm512_xor_si512(_mm512_loadu_si512(p), _mm512_maskz_set1_epi32(1, (int)crc));
    __m512i x1 = _mm512_loadu_si512(p + 64), x2 = _mm512_loadu_si512(p + 128), x3 = _mm512_loadu_si512(p + 192);
    p += 256;
    n -= 256;
    const __m512i k256 = _mm512_broadcast_i32x4(_mm_set_epi64x(CRC_K256_HI, CRC_K256_LO));
    for (; n >= 256; p += 256, n -= 256) {
        x0 = _mm512_xor_si512(fold512(x0, k256), _mm512_loadu_si512(p));
        x1 = _mm512_xor_si512(fold512(x1, k256), _mm512_loadu_si512(p + 64));
        x2 = _mm512_xor_si512(fold512(x2, k256), _mm512_loadu_si512(p + 128));
        x3 = _mm512_xor_si512(fold512(x3, k256), _mm512_loadu_si512(p + 192));
    }
    const __m512i k64 = _mm512_broadcast_i32x4(_mm_set_epi64x(CRC_K64_HI, CRC_K64_LO));
    x1 = _mm512_xor_si512(fold512(x0, k64), x1);
    x2 = _mm512_xor_si512(fold512(x1, k64), x2);
    x3 = _mm512_xor_si512(fold512(x2, k64), x3);
    for (; n >= 64; p += 64, n -= 64) x3 = _mm512_xor_si512(fold512(x3, k64), _mm512_loadu_si512(p));
    /* the four lanes of the last block into its last */
    __m128i a = _mm512_extracti32x4_epi32(x3, 3);
    a = _mm_xor_si128(a, fold128(_mm512_extracti32x4_epi32(x3, 0), CRC_K48_LO, CRC_K48_HI));
    a = _mm_xor_si128(a, fold128(_mm512_extracti32x4_epi32(x3, 1), CRC_K32_LO, CRC_K32_HI));
    a = _mm_xor_si128(a, fold128(_mm512_extracti32x4_epi32(x3, 2), CRC_K16_LO, CRC_K16_HI));
    uint64_t r = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(a));
    r = _mm_crc32_u64(r, (uint64_t)_mm_extract_epi64(a, 1));
    *next = p;
    *len = n;
    return (uint32_t)r;
}

/* AVX-512F and VPCLMULQDQ on the CPU, and the OS saving the opmask and 512-bit registers (XCR0) */
static int cpu_has_fold(void) {
    unsigned a, b, c, d, lo, hi;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_PCLMUL)) return 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0xe6) != 0xe6) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b & bit_AVX512F) && (c & bit_VPCLMULQDQ);
}
#endif

/* CRC32C of buf[0:len] (a whole CRC: initial and final inversion included) */
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(const uint8_t *next, size_t len) {
    uint64_t crc0 = 0xffffffffu;
    while (len && ((uintptr_t)next & 7)) {
        crc0 = _mm_crc32_u8((uint32_t)crc0, *next++);
        len--;
    }
#ifdef KAFKALOG_FOLD_CRC
    if (crc_fold_enabled && len >= CRC_FOLD_MIN) crc0 = crc_fold((uint32_t)crc0, &next, &len);
#endif
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
#ifdef KAFKALOG_FOLD_CRC
        crc_fold_ok = crc_fold_enabled = cpu_has_fold();
#endif
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

/* CRC32C of p[0:n]: in C (SSE4.2), else crc_func(memoryview of p[0:n]) (the crc32c package's, one call a batch) */
static inline int call_crc(PyObject *crc_func, const uint8_t *p, Py_ssize_t n, uint32_t *out) {
    if (crc_compute(p, (size_t)n, out)) return 0;
    PyObject *mv = PyMemoryView_FromMemory((char *)p, n, PyBUF_READ);
    if (!mv) return -1;
    PyObject *res = PyObject_CallOneArg(crc_func, mv);
    Py_DECREF(mv);
    if (!res) return -1;
    unsigned long crc = PyLong_AsUnsignedLong(res);
    Py_DECREF(res);
    if (crc == (unsigned long)-1 && PyErr_Occurred()) return -1;
    *out = (uint32_t)crc;
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

static PyObject *py_set_crc_fold(PyObject *self, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    crc_fold_enabled = on && crc_fold_ok;
    return PyBool_FromLong(crc_fold_enabled);
}

#define CRC_METHODS                                                                                                \
    {"hw_crc32c", py_hw_crc32c, METH_O, "hw_crc32c(buf) -> int: CRC32C in C (RuntimeError when unavailable)"},    \
    {"set_hw_crc", py_set_hw_crc, METH_O,                                                                          \
     "set_hw_crc(enabled) -> bool: use the C CRC32C when the CPU allows (False: the crc32c package's function)"},  \
    {"set_crc_fold", py_set_crc_fold, METH_O,                                                                      \
     "set_crc_fold(enabled) -> bool: fold long inputs with AVX-512 VPCLMULQDQ when the CPU allows (False: crc32 "  \
     "streams only)"},

#endif
