/* Readers of the record format's integers and strings for the compiled decoder (included once, by _columns.c):
 * big-endian batch header fields, Kafka's zig-zag varints (bounded, as ByteUtils reads them), strict UTF-8, and
 * the length-prefixed fields copied into columns (Col, from _columns_mem.h). */
#ifndef KAFKALOG_COLUMNS_WIRE_H
#define KAFKALOG_COLUMNS_WIRE_H

#include <stdint.h>

static inline uint16_t be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}
static inline uint64_t be64(const uint8_t *p) { return ((uint64_t)be32(p) << 32) | be32(p + 4); }

/* the record walk's helpers are inlined into each of its compiled paths (_columns_records.h) whatever GCC's size
 * heuristics say: one out-of-line call per field cost more than the code it saves */
#define WIRE_INLINE static inline __attribute__((always_inline))

/* Unsigned varint of at most maxb bytes read below lim; -1 when it is longer or runs past lim. One and two bytes
 * (lengths and deltas below 8192: a record's size, a 100 B - 1 KiB value's length, most offset and timestamp
 * deltas) without the loop. */
WIRE_INLINE int rd_uvarint(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t lim, int maxb, uint64_t *out) {
    Py_ssize_t p = *pos;
    if (p < lim && buf[p] < 0x80) { /* the common one-byte case */
        *out = buf[p];
        *pos = p + 1;
        return 0;
    }
    if (p + 1 < lim && buf[p + 1] < 0x80) { /* two bytes (maxb is 5 or 10) */
        *out = (uint64_t)(buf[p] & 0x7F) | ((uint64_t)buf[p + 1] << 7);
        *pos = p + 2;
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
WIRE_INLINE int rd_varint(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t lim, int64_t *out) {
    uint64_t u;
    if (rd_uvarint(buf, pos, lim, 5, &u) < 0) return -1;
    u &= 0xFFFFFFFFu;
    *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
    return 0;
}

/* zig-zag long (10 bytes) */
WIRE_INLINE int rd_varlong(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t lim, int64_t *out) {
    uint64_t u;
    if (rd_uvarint(buf, pos, lim, 10, &u) < 0) return -1;
    *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
    return 0;
}

/* Strict UTF-8 as Python's bytes.decode("utf-8"): no overlongs, no surrogates, nothing above U+10FFFF. Header
 * keys are nearly always ASCII ("traceparent", "content-type"): eight bytes are checked at a time until one has
 * its top bit set; the byte loop takes over there, at a character boundary. */
static int utf8_valid(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i + 8 <= n) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        if (w & 0x8080808080808080ULL) break;
        i += 8;
    }
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

/* 32 bytes from src to dst: one 32-byte vector where the walk is compiled for AVX2 (`v32`), two 16-byte ones
 * elsewhere (SSE2, NEON; a 32-byte vector there went through the stack). Written out rather than left to a
 * fixed-size memcpy, which GCC 12 expanded as `rep movsl` once the walk function grew (a microcoded string move
 * per field). */
typedef uint8_t wire_v32 __attribute__((vector_size(32), aligned(1), may_alias));
typedef uint8_t wire_v16 __attribute__((vector_size(16), aligned(1), may_alias));
WIRE_INLINE void copy32(char *dst, const uint8_t *src, const int v32) {
    if (v32) {
        *(wire_v32 *)dst = *(const wire_v32 *)src;
    } else {
        wire_v16 a = *(const wire_v16 *)src, b = *(const wire_v16 *)(src + 16);
        *(wire_v16 *)dst = a;
        *(wire_v16 *)(dst + 16) = b;
    }
}

/* n bytes from src to dst: short strings as fixed-size copies (inlined moves, no libc call per field) when `room`
 * bytes are readable at src and writable at dst; what lands past n is overwritten by the next field.
 * Fields of 17-128 bytes also fetch the column's line 4 KiB ahead: a column of such fields is written at tens of
 * bytes per field, and without it each new line's first store waited on memory. (Longer fields go to libc's
 * memcpy, whose large copies write without reading the destination first; a fetch ahead slowed those.) */
WIRE_INLINE void copy_field(char *dst, const uint8_t *src, Py_ssize_t n, Py_ssize_t room, const int v32) {
    if (n <= 16 && room >= 16) {
        *(wire_v16 *)dst = *(const wire_v16 *)src;
    } else if (n <= 128 && room >= 128) {
        __builtin_prefetch((const void *)((uintptr_t)dst + 4096), 1, 3);
        copy32(dst, src, v32);
        if (n > 32) {
            copy32(dst + 32, src + 32, v32);
            if (n > 64) {
                copy32(dst + 64, src + 64, v32);
                copy32(dst + 96, src + 96, v32);
            }
        }
    } else {
        memcpy(dst, src, (size_t)n);
    }
}

/* an offset entry at dst: int64 (wide) or int32 (the caller knows that v fits) */
static inline void put_offset_at(char *dst, int64_t v, const int wide) {
    if (wide) {
        memcpy(dst, &v, 8);
    } else {
        int32_t n = (int32_t)v;
        memcpy(dst, &n, 4);
    }
}

/* append an offset entry (the width `wide` says) to a column that has room reserved for it */
static inline void append_offset(Col *off, int64_t v, const int wide) {
    put_offset_at(off->p + off->len, v, wide);
    off->len += wide ? 8 : 4;
}

/* A length-prefixed byte string (key, value, header value): n < 0 is null. The caller has reserved one entry of
 * `valid` and `off` (of the width `wide` says); buf[0:buf_end] is readable. -2 = decline. */
static inline int put_field(Col *off, Col *valid, Col *data, const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t lim,
                            Py_ssize_t buf_end, const int wide, long long *nbytes) {
    int64_t n;
    if (rd_varint(buf, pos, lim, &n) < 0) return -2;
    if (n < 0) {
        valid->p[valid->len++] = 0;
    } else {
        if (n > lim - *pos) return -2;
        if (col_reserve(data, (Py_ssize_t)n + 128) < 0) return -1;
        copy_field(data->p + data->len, buf + *pos, (Py_ssize_t)n, buf_end - *pos, 0);
        data->len += (Py_ssize_t)n;
        *pos += (Py_ssize_t)n;
        *nbytes += n;
        valid->p[valid->len++] = 1;
    }
    append_offset(off, (int64_t)data->len, wide);
    return 0;
}

/* A key or value: a varint length (negative = null) and that many bytes, copied to data (reserved: the batch's
 * bytes + 128 past it, so copy_field's fixed-size copies fit). *valid and *end_off (the new end of data, int64 or
 * int32 as `wide` says) are set. 0 = done, -2 = decline. */
WIRE_INLINE int take_field(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t lim, Py_ssize_t buf_end, char *data,
                           Py_ssize_t *len, uint8_t *valid, char *end_off, const int wide, long long *nbytes,
                           const int v32) {
    int64_t n;
    if (rd_varint(buf, pos, lim, &n) < 0) return -2;
    if (n < 0) {
        *valid = 0;
    } else {
        if (n > lim - *pos) return -2;
        copy_field(data + *len, buf + *pos, (Py_ssize_t)n, buf_end - *pos, v32);
        *len += (Py_ssize_t)n;
        *pos += (Py_ssize_t)n;
        *nbytes += n;
        *valid = 1;
    }
    put_offset_at(end_off, (int64_t)*len, wide);
    return 0;
}

/* the n <= 12 bytes at src into the zeroed 12 bytes at dst: on little-endian CPUs, with 12 bytes readable at src,
 * two loads masked to n bytes (a memcpy of variable length became a `rep movsb` per key in the walk) */
WIRE_INLINE void inline_view_bytes(char *dst, const uint8_t *src, int n, Py_ssize_t room) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (room >= 12) {
        uint64_t lo;
        uint32_t hi;
        memcpy(&lo, src, 8);
        memcpy(&hi, src + 8, 4);
        lo &= n >= 8 ? ~(uint64_t)0 : (((uint64_t)1 << (8 * n)) - 1);
        hi &= n <= 8 ? 0 : n >= 12 ? ~(uint32_t)0 : (((uint32_t)1 << (8 * (n - 8))) - 1);
        memcpy(dst, &lo, 8);
        memcpy(dst + 8, &hi, 4);
        return;
    }
#endif
    for (int i = 0; i < n; i++) dst[i] = (char)src[i];
}

/* A key or value as an Arrow binary_view entry (16 bytes at `view`: int32 length, then up to 12 inline bytes, or a
 * 4-byte prefix, buffer index and offset): buffer 0 is the source itself when buf lies in it at src_base (>= 0) and
 * the field ends below 2 GiB, else the bytes are copied to data (buffer 1, reserved as for take_field).
 * 0 = done, -2 = decline, -3 = the copies would pass 2 GiB (32-bit view offsets). */
WIRE_INLINE int take_view(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t lim, Py_ssize_t buf_end, int64_t src_base,
                            char *data, Py_ssize_t *len, uint8_t *valid, char *view, long long *nbytes,
                          const int v32) {
    int64_t n;
    if (rd_varint(buf, pos, lim, &n) < 0) return -2;
    memset(view, 0, 16);
    if (n < 0) {
        *valid = 0;
        return 0;
    }
    if (n > lim - *pos) return -2;
    const uint8_t *src = buf + *pos;
    int32_t n32 = (int32_t)n;
    memcpy(view, &n32, 4);
    if (n <= 12) {
        inline_view_bytes(view + 4, src, (int)n, buf_end - *pos);
    } else {
        int32_t idx, off;
        memcpy(view + 4, src, 4);
        if (src_base >= 0 && src_base + *pos + n <= INT32_MAX) {
            idx = 0;
            off = (int32_t)(src_base + *pos);
        } else {
            if (n > INT32_MAX - *len) return -3;
            copy_field(data + *len, src, (Py_ssize_t)n, buf_end - *pos, v32);
            idx = 1;
            off = (int32_t)*len;
            *len += (Py_ssize_t)n;
        }
        memcpy(view + 8, &idx, 4);
        memcpy(view + 12, &off, 4);
    }
    *pos += (Py_ssize_t)n;
    *nbytes += n;
    *valid = 1;
    return 0;
}

/* The records and batches of the magic 2 batches that chain from pos (headers only: lengths, magic, counts), for
 * run() to reserve a whole source's columns once instead of growing them by copies. A hint, never trusted:
 * it stops at the first header that does not chain, and counts at most a record per 7 bytes of a batch (the
 * least a record takes uncompressed), so a forged count cannot make it reserve more than the bytes allow. */
static Py_ssize_t chain_counts(const uint8_t *p, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t *batches) {
    Py_ssize_t records = 0, nb = 0;
    while (end - pos >= 61) {
        const uint8_t *h = p + pos;
        int32_t size = (int32_t)be32(h + 8), count = (int32_t)be32(h + 57);
        if (h[16] != 2 || size < 49 || (Py_ssize_t)size > end - pos - 12 || count < 0) break;
        Py_ssize_t most = (Py_ssize_t)(size - 49) / 7;
        records += count < most ? count : most;
        nb++;
        pos += 12 + (Py_ssize_t)size;
    }
    *batches = nb;
    return records;
}

#endif
