/* MD5 (RFC 1321) of a key, for the cleaner's offset map (included once, by _cleaner.c).
 *
 * Kafka's SkimpyOffsetMap keys its entries by each record key's MD5: the map only needs the same 16 bytes, not a
 * secure hash, and calling hashlib per key from C is not possible (and costs a Python call per record). This is
 * the algorithm as the RFC specifies it, written for this file; tests compare it with hashlib on random inputs.
 */
#ifndef KAFKALOG_CLEANER_MD5_H
#define KAFKALOG_CLEANER_MD5_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static uint32_t md5_k[64]; /* floor(|sin(i + 1)| * 2^32), filled by md5_init */
static const uint8_t md5_s[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                                  5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
                                  4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                  6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};

static void md5_init(void) {
    for (int i = 0; i < 64; i++) md5_k[i] = (uint32_t)floor(fabs(sin((double)(i + 1))) * 4294967296.0);
}

static inline uint32_t md5_rotl(uint32_t x, unsigned n) { return (x << n) | (x >> (32 - n)); }

static void md5_block(uint32_t h[4], const uint8_t *p) {
    uint32_t m[16];
    for (int i = 0; i < 16; i++)
        m[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
               (uint32_t)p[4 * i + 3] << 24;
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g;
        if (i < 16) {
            f = (b & c) | (~b & d);
            g = i;
        } else if (i < 32) {
            f = (d & b) | (~d & c);
            g = (5 * i + 1) & 15;
        } else if (i < 48) {
            f = b ^ c ^ d;
            g = (3 * i + 5) & 15;
        } else {
            f = c ^ (b | ~d);
            g = (7 * i) & 15;
        }
        f = f + a + md5_k[i] + m[g];
        a = d;
        d = c;
        c = b;
        b = b + md5_rotl(f, md5_s[i]);
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
}

static void md5_digest(const uint8_t *p, size_t n, uint8_t out[16]) {
    uint32_t h[4] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u};
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
