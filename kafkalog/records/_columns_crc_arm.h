/* The aarch64 CRC32C paths (included by _columns_crc_core.h; little-endian aarch64 only). Functions carry their
 * extensions in target attributes (no -march flag needed); crc_arm_detect reads the kernel's HWCAP bits.
 *
 * arm-crc: crc32cx (ARMv8.1 requires it, most ARMv8.0 server cores have it) in three interleaved streams over
 * 4 KiB, then 256-byte blocks (the instruction's latency is 2-3 times its throughput on Neoverse / Cortex-A cores),
 * joined by the "append zeros" tables of _columns_crc_core.h.
 * arm-pmull: with the crypto extension's 64-bit carry-less multiply (PMULL), inputs of 64 bytes or more are first
 * folded, four 16-byte accumulators carried 64 bytes forward a round with the constants of _columns_crc_x86.h's
 * layout (x^(8n+31), x^(8n-33) mod P, bit-reflected), then reduced to one 16-byte value run through crc32cx; the
 * tail goes through arm-crc's steps.
 * No aarch64 machine was at hand: tests/records/test_crc_aarch64.py builds tests/c/crc_harness.c with Debian's cross
 * compiler and runs both paths under qemu-user at every length and alignment (correctness, not speed).
 */
#ifndef KAFKALOG_COLUMNS_CRC_ARM_H
#define KAFKALOG_COLUMNS_CRC_ARM_H

#if defined(__aarch64__) && defined(__AARCH64EL__) && (defined(__GNUC__) || defined(__clang__))
#define KAFKALOG_CRC_ARM 1
#include <arm_acle.h>
#include <arm_neon.h>
#if defined(__linux__)
#include <sys/auxv.h>
#endif

#ifdef __clang__
#define CRC_ARM_TARGET __attribute__((target("crc")))
#define CRC_PMULL_TARGET __attribute__((target("crc,aes")))
#else
#define CRC_ARM_TARGET __attribute__((target("+crc")))
#define CRC_PMULL_TARGET __attribute__((target("+crc+crypto")))
#endif

#define CRC_ARM_K16_LO 0xf20c0dfeu /* x^(8*16+31), x^(8*16-33), x^(8*64+31), x^(8*64-33) mod P, reflected */
#define CRC_ARM_K16_HI 0x493c7d27u
#define CRC_ARM_K64_LO 0x740eef02u
#define CRC_ARM_K64_HI 0x9e4addf8u

/* Three streams over the next 3 x `block` bytes while they last, joined into crc0 with the block's zeros table */
CRC_ARM_TARGET static inline uint32_t crc_arm_streams(uint32_t crc0, const uint8_t **next, size_t *len, size_t block,
                                                      uint32_t tab[4][256]) {
    const uint8_t *p = *next;
    while (*len >= block * 3) {
        uint32_t crc1 = 0, crc2 = 0;
        const uint8_t *end = p + block;
        do {
            crc0 = __crc32cd(crc0, load64(p));
            crc1 = __crc32cd(crc1, load64(p + block));
            crc2 = __crc32cd(crc2, load64(p + 2 * block));
            p += 8;
        } while (p < end);
        crc0 = crc_shift(tab, crc0) ^ crc1;
        crc0 = crc_shift(tab, crc0) ^ crc2;
        p += block * 2;
        *len -= block * 3;
    }
    *next = p;
    return crc0;
}

/* the register `crc` carried over p[0:n] */
CRC_ARM_TARGET static uint32_t crc_arm(uint32_t crc, const uint8_t *p, size_t n) {
    for (; n && ((uintptr_t)p & 7); n--) crc = __crc32cb(crc, *p++);
    crc = crc_arm_streams(crc, &p, &n, CRC_LONG, crc_long_tab);
    crc = crc_arm_streams(crc, &p, &n, CRC_SHORT, crc_short_tab);
    for (; n >= 8; n -= 8, p += 8) crc = __crc32cd(crc, load64(p));
    for (; n; n--) crc = __crc32cb(crc, *p++);
    return crc;
}

/* a 16-byte lane carried forward: clmul(lo, klo) ^ clmul(hi, khi) */
CRC_PMULL_TARGET static inline uint64x2_t crc_arm_fold(uint64x2_t x, uint64_t klo, uint64_t khi) {
    poly128_t a = vmull_p64((poly64_t)vgetq_lane_u64(x, 0), (poly64_t)klo);
    poly128_t b = vmull_p64((poly64_t)vgetq_lane_u64(x, 1), (poly64_t)khi);
    return veorq_u64(vreinterpretq_u64_p128(a), vreinterpretq_u64_p128(b));
}

CRC_PMULL_TARGET static inline uint64x2_t crc_arm_load(const uint8_t *p) { return vreinterpretq_u64_u8(vld1q_u8(p)); }

/* the register `crc` carried over p[0:n]: 64-byte rounds folded, 16-byte blocks, then arm-crc's steps */
CRC_PMULL_TARGET static uint32_t crc_arm_pmull(uint32_t crc, const uint8_t *p, size_t n) {
    if (n < 64) return crc_arm(crc, p, n);
    uint64x2_t x0 = veorq_u64(crc_arm_load(p), vcombine_u64(vcreate_u64(crc), vcreate_u64(0)));
    uint64x2_t x1 = crc_arm_load(p + 16), x2 = crc_arm_load(p + 32), x3 = crc_arm_load(p + 48);
    p += 64;
    n -= 64;
    for (; n >= 64; p += 64, n -= 64) {
        x0 = veorq_u64(crc_arm_fold(x0, CRC_ARM_K64_LO, CRC_ARM_K64_HI), crc_arm_load(p));
        x1 = veorq_u64(crc_arm_fold(x1, CRC_ARM_K64_LO, CRC_ARM_K64_HI), crc_arm_load(p + 16));
        x2 = veorq_u64(crc_arm_fold(x2, CRC_ARM_K64_LO, CRC_ARM_K64_HI), crc_arm_load(p + 32));
        x3 = veorq_u64(crc_arm_fold(x3, CRC_ARM_K64_LO, CRC_ARM_K64_HI), crc_arm_load(p + 48));
    }
    x1 = veorq_u64(crc_arm_fold(x0, CRC_ARM_K16_LO, CRC_ARM_K16_HI), x1);
    x2 = veorq_u64(crc_arm_fold(x1, CRC_ARM_K16_LO, CRC_ARM_K16_HI), x2);
    x3 = veorq_u64(crc_arm_fold(x2, CRC_ARM_K16_LO, CRC_ARM_K16_HI), x3);
    for (; n >= 16; p += 16, n -= 16) x3 = veorq_u64(crc_arm_fold(x3, CRC_ARM_K16_LO, CRC_ARM_K16_HI), crc_arm_load(p));
    crc = __crc32cd(0, vgetq_lane_u64(x3, 0));
    crc = __crc32cd(crc, vgetq_lane_u64(x3, 1));
    return crc_arm(crc, p, n);
}

#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#ifndef HWCAP_PMULL
#define HWCAP_PMULL (1 << 4)
#endif

/* the paths the CPU runs (Apple's arm64 cores all have both extensions) */
static void crc_arm_detect(void) {
#if defined(__linux__)
    unsigned long hw = getauxval(AT_HWCAP);
    int has_crc = (hw & HWCAP_CRC32) != 0, has_pmull = (hw & HWCAP_PMULL) != 0;
#elif defined(__APPLE__)
    int has_crc = 1, has_pmull = 1;
#else
    int has_crc = 0, has_pmull = 0;
#endif
    if (has_crc) crc_available |= 1u << CRC_ARM;
    if (has_crc && has_pmull) crc_available |= 1u << CRC_ARM_PMULL;
}
#endif

#endif
