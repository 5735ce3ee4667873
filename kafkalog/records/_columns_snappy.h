/* snappy records sections for the compiled decoder (included once, by _columns.c, after _columns_codec.h): the
 * xerial stream framing of compression.py's _snappy_decompress walked in C, cramjam's snappy.decompress_raw_into
 * called per block straight into the scratch buffer, so a snappy batch costs one codec call per block and no Python
 * frame.
 *
 * Like the lz4 and zstd walks this only *accepts*: a block is decoded only when its length preamble (snappy's
 * varint, what decompress_raw_len reads) fits the max_size budget left and the scratch, and the call writes exactly
 * that many bytes; anything else declines the batch, so the Python path raises its own error
 * (tests/records/test_codec_snappy.py compares the two on golden, damaged and fuzzed payloads).
 */
#ifndef KAFKALOG_COLUMNS_SNAPPY_H
#define KAFKALOG_COLUMNS_SNAPPY_H

/* The uncompressed length a raw snappy block declares (a varint of at most 5 bytes, within 32 bits); -1 when it is
 * not one (the caller declines: the Python path's decompress_raw_len answers). */
static long long snappy_raw_len(const uint8_t *p, Py_ssize_t n) {
    uint64_t v = 0;
    for (int i = 0; i < 5 && i < n; i++) {
        v |= (uint64_t)(p[i] & 0x7F) << (7 * i);
        if (!(p[i] & 0x80)) return v <= 0xFFFFFFFFu ? (long long)v : -1;
    }
    return -1;
}

/* One raw snappy block into sc->p[*total:], within the budget max_size - *total. 0 = done, 1 = decline, 2 = the
 * scratch may be too small (ask decompress), -1 = error. */
static int snappy_block_into(Col *sc, const Codecs *cd, const uint8_t *p, Py_ssize_t n, Py_ssize_t *total) {
    long long want = snappy_raw_len(p, n);
    if (want < 0 || want > cd->max_size - *total) return 1;
    if (want > sc->cap - *total) return 2;
    Py_ssize_t w;
    PyObject *kept = NULL; /* a failing block is declined: the Python path raises its own error for it */
    int r = codec_into(cd->snappy, p, n, sc->p + *total, (Py_ssize_t)want, &w, &kept);
    Py_XDECREF(kept);
    if (r) return r;
    if (w != want) return 1;
    *total += w;
    return 0;
}

static inline uint32_t snappy_be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

/* A snappy payload (xerial framing, or a bare raw block) into the scratch buffer.
 * 0 = *out bytes written, 1 = decline, 2 = the scratch may be too small (ask decompress), -1 = error. */
static int snappy_into(Col *sc, const Codecs *cd, const uint8_t *body, Py_ssize_t len, Py_ssize_t *out) {
    static const uint8_t magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
    Py_ssize_t total = 0;
    int r;
    if (len < 8 || memcmp(body, magic, 8) != 0) {
        if ((r = snappy_block_into(sc, cd, body, len, &total)) != 0) return r;
        *out = total;
        return 0;
    }
    if (len < 16) return 1;
    for (Py_ssize_t pos = 16; pos < len;) {
        if (len - pos < 4) return 1;
        uint32_t n = snappy_be32(body + pos);
        pos += 4;
        if (n > 0x7FFFFFFFu || (Py_ssize_t)n > len - pos) return 1;
        if ((r = snappy_block_into(sc, cd, body + pos, (Py_ssize_t)n, &total)) != 0) return r;
        pos += (Py_ssize_t)n;
    }
    *out = total;
    return 0;
}

#endif
