/* MD5 (RFC 1321) of a key, for the cleaner's offset map (included once, by _cleaner.c).
 *
 * Kafka's SkimpyOffsetMap keys its entries by each record key's MD5: the map only needs the same 16 bytes, not a
 * secure hash, and calling hashlib per key from C is not possible (and costs a Python call per record). This is
 * the algorithm as the RFC specifies it, written for this file; tests compare it with hashlib on random inputs.
 */
#ifndef KAFKALOG_CLEANER_MD5_H
#define KAFKALOG_CLEANER_MD5_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MD5_F(x, y, z) ((z) ^ ((x) & ((y) ^ (z))))
#define MD5_G(x, y, z) ((y) ^ ((z) & ((x) ^ (y))))
#define MD5_H(x, y, z) ((x) ^ (y) ^ (z))
#define MD5_I(x, y, z) ((y) ^ ((x) | ~(z)))
/* one step: a = b + rotl(a + f(b, c, d) + m + k, s); the four registers rotate from step to step */
#define STEP(f, a, b, c, d, x, k, s)                                                                               \
    (a) += MD5_##f((b), (c), (d)) + (x) + (k);                                                                     \
    (a) = ((a) << (s)) | ((a) >> (32 - (s)));                                                                      \
    (a) += (b);

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define MD5_LITTLE_ENDIAN 1
#else
#define MD5_LITTLE_ENDIAN 0
#endif

/* the 64 steps of RFC 1321 section 3.4 on a block's 16 little-endian words, unrolled; the constants are
 * floor(|sin(i + 1)| * 2^32) */
static inline void md5_words(uint32_t h[4], const uint32_t m[16]) {
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    STEP(F, a, b, c, d, m[0], 0xd76aa478u, 7);
    STEP(F, d, a, b, c, m[1], 0xe8c7b756u, 12);
    STEP(F, c, d, a, b, m[2], 0x242070dbu, 17);
    STEP(F, b, c, d, a, m[3], 0xc1bdceeeu, 22);
    STEP(F, a, b, c, d, m[4], 0xf57c0fafu, 7);
    STEP(F, d, a, b, c, m[5], 0x4787c62au, 12);
    STEP(F, c, d, a, b, m[6], 0xa8304613u, 17);
    STEP(F, b, c, d, a, m[7], 0xfd469501u, 22);
    STEP(F, a, b, c, d, m[8], 0x698098d8u, 7);
    STEP(F, d, a, b, c, m[9], 0x8b44f7afu, 12);
    STEP(F, c, d, a, b, m[10], 0xffff5bb1u, 17);
    STEP(F, b, c, d, a, m[11], 0x895cd7beu, 22);
    STEP(F, a, b, c, d, m[12], 0x6b901122u, 7);
    STEP(F, d, a, b, c, m[13], 0xfd987193u, 12);
    STEP(F, c, d, a, b, m[14], 0xa679438eu, 17);
    STEP(F, b, c, d, a, m[15], 0x49b40821u, 22);
    STEP(G, a, b, c, d, m[1], 0xf61e2562u, 5);
    STEP(G, d, a, b, c, m[6], 0xc040b340u, 9);
    STEP(G, c, d, a, b, m[11], 0x265e5a51u, 14);
    STEP(G, b, c, d, a, m[0], 0xe9b6c7aau, 20);
    STEP(G, a, b, c, d, m[5], 0xd62f105du, 5);
    STEP(G, d, a, b, c, m[10], 0x02441453u, 9);
    STEP(G, c, d, a, b, m[15], 0xd8a1e681u, 14);
    STEP(G, b, c, d, a, m[4], 0xe7d3fbc8u, 20);
    STEP(G, a, b, c, d, m[9], 0x21e1cde6u, 5);
    STEP(G, d, a, b, c, m[14], 0xc33707d6u, 9);
    STEP(G, c, d, a, b, m[3], 0xf4d50d87u, 14);
    STEP(G, b, c, d, a, m[8], 0x455a14edu, 20);
    STEP(G, a, b, c, d, m[13], 0xa9e3e905u, 5);
    STEP(G, d, a, b, c, m[2], 0xfcefa3f8u, 9);
    STEP(G, c, d, a, b, m[7], 0x676f02d9u, 14);
    STEP(G, b, c, d, a, m[12], 0x8d2a4c8au, 20);
    STEP(H, a, b, c, d, m[5], 0xfffa3942u, 4);
    STEP(H, d, a, b, c, m[8], 0x8771f681u, 11);
    STEP(H, c, d, a, b, m[11], 0x6d9d6122u, 16);
    STEP(H, b, c, d, a, m[14], 0xfde5380cu, 23);
    STEP(H, a, b, c, d, m[1], 0xa4beea44u, 4);
    STEP(H, d, a, b, c, m[4], 0x4bdecfa9u, 11);
    STEP(H, c, d, a, b, m[7], 0xf6bb4b60u, 16);
    STEP(H, b, c, d, a, m[10], 0xbebfbc70u, 23);
    STEP(H, a, b, c, d, m[13], 0x289b7ec6u, 4);
    STEP(H, d, a, b, c, m[0], 0xeaa127fau, 11);
    STEP(H, c, d, a, b, m[3], 0xd4ef3085u, 16);
    STEP(H, b, c, d, a, m[6], 0x04881d05u, 23);
    STEP(H, a, b, c, d, m[9], 0xd9d4d039u, 4);
    STEP(H, d, a, b, c, m[12], 0xe6db99e5u, 11);
    STEP(H, c, d, a, b, m[15], 0x1fa27cf8u, 16);
    STEP(H, b, c, d, a, m[2], 0xc4ac5665u, 23);
    STEP(I, a, b, c, d, m[0], 0xf4292244u, 6);
    STEP(I, d, a, b, c, m[7], 0x432aff97u, 10);
    STEP(I, c, d, a, b, m[14], 0xab9423a7u, 15);
    STEP(I, b, c, d, a, m[5], 0xfc93a039u, 21);
    STEP(I, a, b, c, d, m[12], 0x655b59c3u, 6);
    STEP(I, d, a, b, c, m[3], 0x8f0ccc92u, 10);
    STEP(I, c, d, a, b, m[10], 0xffeff47du, 15);
    STEP(I, b, c, d, a, m[1], 0x85845dd1u, 21);
    STEP(I, a, b, c, d, m[8], 0x6fa87e4fu, 6);
    STEP(I, d, a, b, c, m[15], 0xfe2ce6e0u, 10);
    STEP(I, c, d, a, b, m[6], 0xa3014314u, 15);
    STEP(I, b, c, d, a, m[13], 0x4e0811a1u, 21);
    STEP(I, a, b, c, d, m[4], 0xf7537e82u, 6);
    STEP(I, d, a, b, c, m[11], 0xbd3af235u, 10);
    STEP(I, c, d, a, b, m[2], 0x2ad7d2bbu, 15);
    STEP(I, b, c, d, a, m[9], 0xeb86d391u, 21);
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
}

static void md5_block(uint32_t h[4], const uint8_t *p) {
    uint32_t m[16];
#if MD5_LITTLE_ENDIAN
    memcpy(m, p, 64);
#else
    for (int i = 0; i < 16; i++)
        m[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
               (uint32_t)p[4 * i + 3] << 24;
#endif
    md5_words(h, m);
}

static void md5_digest(const uint8_t *p, size_t n, uint8_t out[16]) {
    uint32_t h[4] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u};
#if MD5_LITTLE_ENDIAN
    if (n < 56) { /* a key of one block (most keys): padded in place as words, no buffering */
        uint32_t m[16] = {0};
        memcpy(m, p, n);
        ((uint8_t *)m)[n] = 0x80;
        m[14] = (uint32_t)(n * 8);
        md5_words(h, m);
        memcpy(out, h, 16);
        return;
    }
#endif
    size_t full = n / 64, rem = n % 64;
    for (size_t i = 0; i < full; i++) md5_block(h, p + 64 * i);
    uint8_t tail[128];
    memcpy(tail, p + 64 * full, rem);
    tail[rem] = 0x80;
    size_t tl = rem < 56 ? 64 : 128;
    memset(tail + rem + 1, 0, tl - rem - 1);
    uint64_t bits = (uint64_t)n * 8;
    for (int i = 0; i < 8; i++) tail[tl - 8 + i] = (uint8_t)(bits >> (8 * i));
    md5_block(h, tail);
    if (tl == 128) md5_block(h, tail + 64);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) out[4 * i + j] = (uint8_t)(h[i] >> (8 * j));
}

#endif
