/* Readers of the record format's integers and strings for the compiled decoder (included once, by _columns.c):
 * big-endian batch header fields, Kafka's zig-zag varints (bounded, as ByteUtils reads them), strict UTF-8. */
#ifndef KAFKALOG_COLUMNS_WIRE_H
#define KAFKALOG_COLUMNS_WIRE_H

#include <stdint.h>

static inline uint16_t be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}
static inline uint64_t be64(const uint8_t *p) { return ((uint64_t)be32(p) << 32) | be32(p + 4); }

/* Unsigned varint of at most maxb bytes read below lim; -1 when it is longer or runs past lim. */
static inline int rd_uvarint(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t lim, int maxb, uint64_t *out) {
    Py_ssize_t p = *pos;
    if (p < lim && buf[p] < 0x80) { /* the common one-byte case */
        *out = buf[p];
        *pos = p + 1;
        return 0;
    }
    uint64_t r = 0;
    int shift = 0;
    for (int i = 0; i < maxb; i++) {
        if (p >= lim) return -1;
        uint8_t b = buf[p++];
        r |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *out = r;
            *pos = p;
            return 0;
        }
        shift += 7;
    }
    return -1;
}

/* zig-zag int (5 bytes, masked to 32 bits as Kafka's readVarint) */
static inline int rd_varint(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t lim, int64_t *out) {
    uint64_t u;
    if (rd_uvarint(buf, pos, lim, 5, &u) < 0) return -1;
    u &= 0xFFFFFFFFu;
    *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
    return 0;
}

/* zig-zag long (10 bytes) */
static inline int rd_varlong(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t lim, int64_t *out) {
    uint64_t u;
    if (rd_uvarint(buf, pos, lim, 10, &u) < 0) return -1;
    *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
    return 0;
}

/* Strict UTF-8 as Python's bytes.decode("utf-8"): no overlongs, no surrogates, nothing above U+10FFFF. */
static int utf8_valid(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n) return 0;
            uint8_t c1 = s[i + 1];
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && c1 < 0xA0) return 0; /* overlong */
            if (c == 0xED && c1 > 0x9F) return 0; /* surrogates */
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n) return 0;
            uint8_t c1 = s[i + 1];
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80) return 0;
            if (c == 0xF0 && c1 < 0x90) return 0;
            if (c == 0xF4 && c1 > 0x8F) return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

#endif
