/* The x86-64 CRC32C paths (included by _columns_crc_core.h). Each function carries its instruction sets in a
 * target attribute, so the build needs no -m flags and runs on any x86-64 CPU; crc_x86_detect says which the CPU
 * (and the OS, for the wide registers) allows.
 *
 * sse42: the crc32 instruction's latency is three times its throughput, so three streams run over consecutive
 * blocks (4 KiB, then 256 bytes) and are joined by carrying the first two forward over the blocks after them: a
 * 32-bit register carried n bytes forward is crc32q(0, clmul(reg, x^(8n-33) mod P)) (bit-reflected), the
 * layout of Intel's paper and of the crc32c package. Three streams end at one crc32 a cycle (8 bytes).
 * avx2 / avx512: carry-less multiplication folds the input first (VPCLMULQDQ on 256- or 512-bit registers): four
 * accumulators of 16-byte lanes carried a round forward by multiplying each lane with x^(8n+31) and x^(8n-33)
 * mod P, then folded into one 16-byte value whose crc32 from a zero register is the CRC so far; the tail (under
 * 32 bytes) goes through crc32q.
 */
#ifndef KAFKALOG_COLUMNS_CRC_X86_H
#define KAFKALOG_COLUMNS_CRC_X86_H

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define KAFKALOG_CRC_X86 1
#include <cpuid.h>
#include <immintrin.h>
/* compilers whose intrinsics include the wide carry-less multiply (older ones build the sse42 path only) */
#if defined(bit_VPCLMULQDQ) && defined(bit_AVX512F) && defined(bit_AVX2) && \
    ((defined(__clang__) && __clang_major__ >= 8) || (!defined(__clang__) && __GNUC__ >= 9))
#define KAFKALOG_CRC_VPCLMUL 1
#endif

/* x^(8n+31) and x^(8n-33) mod P, bit-reflected: a 16-byte lane (bytes 0-7 `lo`, 8-15 `hi`) carried n bytes
 * forward is clmul(lo, K_LO) ^ clmul(hi, K_HI); a 32-bit register carried n bytes forward uses K_HI alone */
#define CRC_K16_LO 0xf20c0dfeu
#define CRC_K16_HI 0x493c7d27u
#define CRC_K32_LO 0x3da6d0cbu
#define CRC_K32_HI 0xba4fc28eu
#define CRC_K48_LO 0x1c291d04u
#define CRC_K48_HI 0xddc0152bu
#define CRC_K64_LO 0x740eef02u
#define CRC_K64_HI 0x9e4addf8u
#define CRC_K128_LO 0x6992cea2u
#define CRC_K128_HI 0x0d3b6092u
#define CRC_K256_LO 0xdcb17aa4u
#define CRC_K256_HI 0xb9e02b86u
#define CRC_K512_HI 0xdd7e3b0cu
#define CRC_K4096_HI 0x82f89c77u
#define CRC_K8192_HI 0x54a86326u

#define CRC_SSE42_TARGET __attribute__((target("sse4.2,pclmul")))

/* crc32q(0, clmul(a, ka) ^ clmul(b, kb)): a and b carried forward by ka's and kb's distances, xored */
CRC_SSE42_TARGET static inline uint64_t crc_x86_carry2(uint64_t a, uint32_t ka, uint64_t b, uint32_t kb) {
    __m128i x = _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)(uint32_t)a), _mm_cvtsi32_si128((int)ka), 0);
    __m128i y = _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)(uint32_t)b), _mm_cvtsi32_si128((int)kb), 0);
    return _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(_mm_xor_si128(x, y)));
}

/* Three streams over the next 3 x `block` bytes while they last, joined into crc0; k1/k2 carry block / 2 x block */
CRC_SSE42_TARGET static inline uint64_t crc_x86_streams(uint64_t crc0, const uint8_t **next, size_t *len,
                                                        size_t block, uint32_t k1, uint32_t k2) {
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
        crc0 = crc_x86_carry2(crc0, k2, crc1, k1) ^ crc2;
        p += block * 2;
        *len -= block * 3;
    }
    *next = p;
    return crc0;
}

/* the rest of p[0:n] after any folding: the interleaved streams, then one crc32q / crc32b at a time */
CRC_SSE42_TARGET static inline uint32_t crc_x86_tail(uint64_t crc0, const uint8_t *p, size_t n) {
    crc0 = crc_x86_streams(crc0, &p, &n, CRC_LONG, CRC_K4096_HI, CRC_K8192_HI);
    crc0 = crc_x86_streams(crc0, &p, &n, CRC_SHORT, CRC_K256_HI, CRC_K512_HI);
    for (; n >= 8; n -= 8, p += 8) crc0 = _mm_crc32_u64(crc0, load64(p));
    for (; n; n--) crc0 = _mm_crc32_u8((uint32_t)crc0, *p++);
    return (uint32_t)crc0;
}

/* the register `crc` carried over p[0:n] */
CRC_SSE42_TARGET static uint32_t crc_x86_sse42(uint32_t crc, const uint8_t *p, size_t n) {
    for (; n && ((uintptr_t)p & 7); n--) crc = _mm_crc32_u8(crc, *p++);
    return crc_x86_tail(crc, p, n);
}

#ifdef KAFKALOG_CRC_VPCLMUL
#define CRC_AVX2_TARGET __attribute__((target("avx2,vpclmulqdq,pclmul,sse4.2")))
#define CRC_AVX512_TARGET __attribute__((target("avx512f,avx2,vpclmulqdq,pclmul,sse4.2")))
#define CRC_AVX2_MIN 128   /* the bytes crc_fold256 needs (its four accumulators' first load) */
#define CRC_AVX512_MIN 256 /* and crc_fold512 */

CRC_AVX2_TARGET static inline __m128i fold128(__m128i x, uint32_t lo, uint32_t hi) {
    __m128i k = _mm_set_epi64x(hi, lo);
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

CRC_AVX2_TARGET static inline __m256i fold256(__m256i x, __m256i k) {
    return _mm256_xor_si256(_mm256_clmulepi64_epi128(x, k, 0x00), _mm256_clmulepi64_epi128(x, k, 0x11));
}

/* 16 folded bytes to the register they stand for */
CRC_AVX2_TARGET static inline uint32_t crc_lane(__m128i a) {
    uint64_t r = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(a));
    return (uint32_t)_mm_crc32_u64(r, (uint64_t)_mm_extract_epi64(a, 1));
}

/* The register `crc` carried over the whole 32-byte blocks of *next[0:*len] (*len >= CRC_AVX2_MIN): the
 * register is xored into the first bytes (a reflected CRC's register is its message's first 4 bytes, xored in),
 * the blocks folded into one 16-byte value whose crc32 from a zero register is the CRC so far. *next and *len
 * move past the blocks (fewer than 32 bytes stay). */
CRC_AVX2_TARGET static uint32_t crc_fold256(uint32_t crc, const uint8_t **next, size_t *len) {
    const uint8_t *p = *next;
    size_t n = *len;
    __m256i x0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)p),
                                  _mm256_setr_epi32((int)crc, 0, 0, 0, 0, 0, 0, 0));
    __m256i x1 = _mm256_loadu_si256((const __m256i *)(p + 32)), x2 = _mm256_loadu_si256((const __m256i *)(p + 64)),
            x3 = _mm256_loadu_si256((const __m256i *)(p + 96));
    p += 128;
    n -= 128;
    const __m256i k128 = _mm256_broadcastsi128_si256(_mm_set_epi64x(CRC_K128_HI, CRC_K128_LO));
    for (; n >= 128; p += 128, n -= 128) {
        x0 = _mm256_xor_si256(fold256(x0, k128), _mm256_loadu_si256((const __m256i *)p));
        x1 = _mm256_xor_si256(fold256(x1, k128), _mm256_loadu_si256((const __m256i *)(p + 32)));
        x2 = _mm256_xor_si256(fold256(x2, k128), _mm256_loadu_si256((const __m256i *)(p + 64)));
        x3 = _mm256_xor_si256(fold256(x3, k128), _mm256_loadu_si256((const __m256i *)(p + 96)));
    }
    const __m256i k32 = _mm256_broadcastsi128_si256(_mm_set_epi64x(CRC_K32_HI, CRC_K32_LO));
    x1 = _mm256_xor_si256(fold256(x0, k32), x1);
    x2 = _mm256_xor_si256(fold256(x1, k32), x2);
    x3 = _mm256_xor_si256(fold256(x2, k32), x3);
    for (; n >= 32; p += 32, n -= 32) x3 = _mm256_xor_si256(fold256(x3, k32), _mm256_loadu_si256((const __m256i *)p));
    __m128i a = _mm_xor_si128(_mm256_extracti128_si256(x3, 1),
                              fold128(_mm256_castsi256_si128(x3), CRC_K16_LO, CRC_K16_HI));
    *next = p;
    *len = n;
    return crc_lane(a);
}

/* x^(8m-33) mod P, bit-reflected (m >= 5): the constant that carries a 32-bit register m bytes forward through one
 * carry-less multiply and a crc32 of the 64-bit product */
static uint32_t crc_xpow8(size_t m) {
    uint32_t v = 0x80000000u; /* x^0 */
    for (int b = 0; b < 7; b++) v = v & 1 ? (v >> 1) ^ CRC_POLY : v >> 1; /* x^7 = x^(8*5-33) */
    for (size_t i = 5; i < m; i++) v = (v >> 8) ^ crc_tab8[0][v & 0xff]; /* times x^8 */
    return v;
}

/* The hybrid: one pass keeps both units busy, the carry-less multiplier folding the first 128k bytes of a chunk
 * while crc32q runs three streams over the 3 x 48k bytes after them (on Zen 3 either alone runs ~8 bytes a
 * cycle). A chunk is 272k bytes, k <= CRC_HYBRID_KMAX; the four registers are joined at its end with the
 * carry constants of crc_hybrid_k (x^(8m-33) for m = 48k, 96k, 144k). */
#define CRC_HYBRID_FOLD 128
#ifndef CRC_HYBRID_STREAM
#define CRC_HYBRID_STREAM 48
#endif
#define CRC_HYBRID_UNIT (CRC_HYBRID_FOLD + 3 * CRC_HYBRID_STREAM)
#define CRC_HYBRID_KMAX 64
static uint32_t crc_hybrid_k[CRC_HYBRID_KMAX + 1][3];

CRC_AVX2_TARGET static uint32_t crc_hybrid256(uint32_t crc, const uint8_t **next, size_t *len) {
    const uint8_t *p = *next;
    size_t k = *len / CRC_HYBRID_UNIT;
    k = k < CRC_HYBRID_KMAX ? k : CRC_HYBRID_KMAX;
    const uint8_t *s = p + CRC_HYBRID_FOLD * k, *end = s + CRC_HYBRID_STREAM * k;
    const size_t sb = CRC_HYBRID_STREAM * k; /* bytes per stream */
    __m256i x0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)p),
                                  _mm256_setr_epi32((int)crc, 0, 0, 0, 0, 0, 0, 0));
    __m256i x1 = _mm256_loadu_si256((const __m256i *)(p + 32)), x2 = _mm256_loadu_si256((const __m256i *)(p + 64)),
            x3 = _mm256_loadu_si256((const __m256i *)(p + 96));
    const __m256i k128 = _mm256_broadcastsi128_si256(_mm_set_epi64x(CRC_K128_HI, CRC_K128_LO));
    uint64_t c0 = 0, c1 = 0, c2 = 0;
    for (;;) {
        for (int j = 0; j < CRC_HYBRID_STREAM; j += 8) {
            c0 = _mm_crc32_u64(c0, load64(s + j));
            c1 = _mm_crc32_u64(c1, load64(s + sb + j));
            c2 = _mm_crc32_u64(c2, load64(s + 2 * sb + j));
        }
        s += CRC_HYBRID_STREAM;
        if (s == end) break;
        p += CRC_HYBRID_FOLD;
        x0 = _mm256_xor_si256(fold256(x0, k128), _mm256_loadu_si256((const __m256i *)p));
        x1 = _mm256_xor_si256(fold256(x1, k128), _mm256_loadu_si256((const __m256i *)(p + 32)));
        x2 = _mm256_xor_si256(fold256(x2, k128), _mm256_loadu_si256((const __m256i *)(p + 64)));
        x3 = _mm256_xor_si256(fold256(x3, k128), _mm256_loadu_si256((const __m256i *)(p + 96)));
    }
    const __m256i k32 = _mm256_broadcastsi128_si256(_mm_set_epi64x(CRC_K32_HI, CRC_K32_LO));
    x1 = _mm256_xor_si256(fold256(x0, k32), x1);
    x2 = _mm256_xor_si256(fold256(x1, k32), x2);
    x3 = _mm256_xor_si256(fold256(x2, k32), x3);
    __m128i a = _mm_xor_si128(_mm256_extracti128_si256(x3, 1),
                              fold128(_mm256_castsi256_si128(x3), CRC_K16_LO, CRC_K16_HI));
    uint64_t f = crc_lane(a);
    __m128i j = _mm_xor_si128(_mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)f),
                                                   _mm_cvtsi32_si128((int)crc_hybrid_k[k][2]), 0),
                              _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)(uint32_t)c0),
                                                   _mm_cvtsi32_si128((int)crc_hybrid_k[k][1]), 0));
    j = _mm_xor_si128(j, _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)(uint32_t)c1),
                                              _mm_cvtsi32_si128((int)crc_hybrid_k[k][0]), 0));
    *next += CRC_HYBRID_UNIT * k;
    *len -= CRC_HYBRID_UNIT * k;
    return (uint32_t)(_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(j)) ^ c2);
}

CRC_AVX2_TARGET static uint32_t crc_x86_avx2(uint32_t crc, const uint8_t *p, size_t n) {
    while (n >= 2 * CRC_HYBRID_UNIT) crc = crc_hybrid256(crc, &p, &n);
    if (n >= CRC_AVX2_MIN) crc = crc_fold256(crc, &p, &n);
    return crc_x86_sse42(crc, p, n);
}

CRC_AVX512_TARGET static inline __m512i fold512(__m512i x, __m512i k) {
    return _mm512_xor_si512(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11));
}

/* crc_fold256 with four 512-bit accumulators: 256-byte rounds, 64-byte blocks (fewer than 64 bytes stay) */
CRC_AVX512_TARGET static uint32_t crc_fold512(uint32_t crc, const uint8_t **next, size_t *len) {
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
    *next = p;
    *len = n;
    return crc_lane(a);
}

CRC_AVX512_TARGET static uint32_t crc_x86_avx512(uint32_t crc, const uint8_t *p, size_t n) {
    if (n >= CRC_AVX512_MIN) crc = crc_fold512(crc, &p, &n);
    return crc_x86_avx2(crc, p, n);
}
#endif

/* the paths the CPU runs: SSE4.2 and PCLMULQDQ; with the OS saving the 256-bit (and for avx512 the opmask and
 * 512-bit) registers (XCR0), AVX2 (AVX-512F) and VPCLMULQDQ */
static void crc_x86_detect(void) {
    unsigned a, b, c, d, lo = 0, hi;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_2) || !(c & bit_PCLMUL)) return;
    crc_available |= 1u << CRC_SSE42;
#ifdef KAFKALOG_CRC_VPCLMUL
    if (!(c & bit_OSXSAVE) || !(c & bit_AVX)) return;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    if ((lo & 0x06) != 0x06 || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    if (!(b & bit_AVX2) || !(c & bit_VPCLMULQDQ)) return;
    crc_available |= 1u << CRC_AVX2;
    uint32_t pw[3 * CRC_HYBRID_KMAX + 1], v = crc_xpow8(CRC_HYBRID_STREAM); /* pw[j]: carries 48j bytes */
    for (int j = 1; j <= 3 * CRC_HYBRID_KMAX; j++) {
        pw[j] = v;
        for (int i = 0; i < CRC_HYBRID_STREAM; i++) v = (v >> 8) ^ crc_tab8[0][v & 0xff]; /* times x^(8*48) */
    }
    for (int k = 1; k <= CRC_HYBRID_KMAX; k++)
        for (int m = 0; m < 3; m++) crc_hybrid_k[k][m] = pw[k * (m + 1)];
    if ((lo & 0xe6) == 0xe6 && (b & bit_AVX512F)) crc_available |= 1u << CRC_AVX512;
#else
    (void)lo;
    (void)hi;
#endif
}

#endif
#endif
