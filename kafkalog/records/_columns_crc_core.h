/* CRC32C (Castagnoli) in C with a path per CPU family, chosen at run time (no Python here: the decoder, the
 * cleaner and tests/c/crc_harness.c, which runs the aarch64 paths under qemu-user, include it).
 *
 * Paths, best first (crc_init picks the best the CPU and the compiler allow; KAFKALOG_CRC32C_PATH=name forces
 * one, crc_select switches at run time):
 *   avx512    x86-64: 512-bit VPCLMULQDQ folding of 256-byte rounds, then the avx2 and sse42 steps for the rest
 *   avx2      x86-64: 256-bit VPCLMULQDQ folding of 128-byte rounds, then the sse42 steps    (_columns_crc_x86.h)
 *   sse42     x86-64: crc32q in three interleaved streams joined with PCLMULQDQ
 *   arm-pmull aarch64: PMULL folding of 64-byte rounds, then crc32cx                         (_columns_crc_arm.h)
 *   arm-crc   aarch64: crc32cx in three interleaved streams joined with "append zeros" tables
 *   portable  any CPU: slicing-by-8 tables
 * Every path gives the same CRC at every length and alignment (tests/records/test_record_columns_crc.py against the crc32c
 * package; tests/records/test_crc_aarch64.py runs the arm paths under qemu).
 */
#ifndef KAFKALOG_COLUMNS_CRC_CORE_H
#define KAFKALOG_COLUMNS_CRC_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CRC_POLY 0x82f63b78u /* CRC-32C (Castagnoli), reflected */
#define CRC_LONG 4096         /* bytes per stream in the long interleaved loop */
#define CRC_SHORT 256         /* bytes per stream in the short interleaved loop */

enum { CRC_PORTABLE, CRC_SSE42, CRC_AVX2, CRC_AVX512, CRC_ARM, CRC_ARM_PMULL, CRC_NPATHS };
static const char *const crc_names[CRC_NPATHS] = {"portable", "sse42", "avx2", "avx512", "arm-crc", "arm-pmull"};
static unsigned crc_available = 1u << CRC_PORTABLE; /* bit per path this CPU and build can run */
static int crc_best = CRC_PORTABLE, crc_active = CRC_PORTABLE;
static uint32_t crc_tab8[8][256];                   /* slicing-by-8: crc_tab8[k][b] = b followed by k zero bytes */
static uint32_t crc_long_tab[4][256], crc_short_tab[4][256]; /* "append CRC_LONG / CRC_SHORT zero bytes" */

static inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t load64le(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i]; /* one load on little-endian CPUs */
    return v;
}

/* ---- "append zeros" operators (Mark Adler's construction): joining CRCs of consecutive blocks --------------- */

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

/* ---- portable: slicing-by-8 --------------------------------------------------------------------------------- */

static void crc_tables_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ CRC_POLY : c >> 1;
        crc_tab8[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 1; k < 8; k++) crc_tab8[k][n] = (crc_tab8[k - 1][n] >> 8) ^ crc_tab8[0][crc_tab8[k - 1][n] & 0xff];
    crc_zeros(crc_long_tab, CRC_LONG);
    crc_zeros(crc_short_tab, CRC_SHORT);
}

/* the register `crc` (not inverted) carried over p[0:n] */
static uint32_t crc_portable(uint32_t crc, const uint8_t *p, size_t n) {
    for (; n && ((uintptr_t)p & 7); n--) crc = crc_tab8[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w = load64le(p) ^ crc;
        crc = crc_tab8[7][w & 0xff] ^ crc_tab8[6][(w >> 8) & 0xff] ^ crc_tab8[5][(w >> 16) & 0xff] ^
              crc_tab8[4][(w >> 24) & 0xff] ^ crc_tab8[3][(w >> 32) & 0xff] ^ crc_tab8[2][(w >> 40) & 0xff] ^
              crc_tab8[1][(w >> 48) & 0xff] ^ crc_tab8[0][w >> 56];
    }
    for (; n; n--) crc = crc_tab8[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

#include "_columns_crc_arm.h"
#include "_columns_crc_x86.h"

/* ---- dispatch ------------------------------------------------------------------------------------------------ */

/* CRC32C of p[0:n] (a whole CRC: initial and final inversion included) by `path` (one of crc_available) */
static uint32_t crc32c_by(int path, const uint8_t *p, size_t n) {
    uint32_t reg = 0xffffffffu;
    switch (path) {
#ifdef KAFKALOG_CRC_X86
    case CRC_SSE42: reg = crc_x86_sse42(reg, p, n); break;
#ifdef KAFKALOG_CRC_VPCLMUL
    case CRC_AVX2: reg = crc_x86_avx2(reg, p, n); break;
    case CRC_AVX512: reg = crc_x86_avx512(reg, p, n); break;
#endif
#endif
#ifdef KAFKALOG_CRC_ARM
    case CRC_ARM: reg = crc_arm(reg, p, n); break;
    case CRC_ARM_PMULL: reg = crc_arm_pmull(reg, p, n); break;
#endif
    default: reg = crc_portable(reg, p, n); break;
    }
    return reg ^ 0xffffffffu;
}

/* CRC32C of p[0:n] by the active path */
static inline uint32_t crc32c_fast(const uint8_t *p, size_t n) { return crc32c_by(crc_active, p, n); }

/* the path called `name`: its number, -1 for an unknown name, -2 for a path this CPU or build lacks */
static int crc_lookup(const char *name) {
    for (int i = 0; i < CRC_NPATHS; i++)
        if (strcmp(name, crc_names[i]) == 0) return (crc_available >> i) & 1 ? i : -2;
    return -1;
}

static int crc_select(const char *name) {
    int path = crc_lookup(name);
    if (path >= 0) crc_active = path;
    return path;
}

/* Detects the CPU's paths, builds the tables and applies KAFKALOG_CRC32C_PATH (unset, empty or "auto": the best
 * path). Returns NULL, or a one-line warning when the variable names an unknown path or one this CPU or build
 * lacks: the best path is used then (the variable is a tuning knob, often set fleet-wide; failing the import on
 * an older CPU would take the compiled decoder away entirely). */
static const char *crc_init(void) {
    static char warning[200];
    crc_tables_init();
#ifdef KAFKALOG_CRC_X86
    crc_x86_detect();
#endif
#ifdef KAFKALOG_CRC_ARM
    crc_arm_detect();
#endif
    for (int i = 0; i < CRC_NPATHS; i++)
        if ((crc_available >> i) & 1) crc_best = i; /* the enum lists each family's paths worst to best */
    crc_active = crc_best;
    const char *want = getenv("KAFKALOG_CRC32C_PATH");
    if (!want || !*want || strcmp(want, "auto") == 0) return NULL;
    int path = crc_select(want);
    if (path >= 0) return NULL;
    snprintf(warning, sizeof(warning), "KAFKALOG_CRC32C_PATH=%.40s: %s; using %s", want,
             path == -1 ? "no such CRC32C path (avx512, avx2, sse42, arm-pmull, arm-crc, portable, auto)"
                        : "this CPU (or build) cannot run that CRC32C path",
             crc_names[crc_best]);
    return warning;
}

#endif
