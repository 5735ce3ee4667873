/* The CRC32C paths of kafkalog/records/_columns_crc_core.h outside Python: every path this CPU runs against a
 * bit-at-a-time reference at every length 0..4200 from 16 alignments (4 past 640 bytes), and against published
 * CRC32C check values.
 * tests/records/test_crc_aarch64.py builds it with Debian's aarch64 cross compiler and runs it under qemu-user;
 * `crc_harness bench [bytes]` times each path on a buffer in cache (native builds; CPU time, best of 15).
 *
 *     cc -O2 -I kafkalog/records tests/c/crc_harness.c -o crc_harness && ./crc_harness
 */
#include <stdio.h>
#include <time.h>

#include "_columns_crc_core.h"

static uint32_t crc_bitwise(const uint8_t *p, size_t n) {
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = crc & 1 ? (crc >> 1) ^ CRC_POLY : crc >> 1;
    }
    return crc ^ 0xffffffffu;
}

static int check(void) {
    static uint8_t buf[4200 + 16 + 40000];
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (size_t i = 0; i < sizeof(buf); i++) { /* xorshift bytes */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (uint8_t)(x >> 24);
    }
    /* RFC 3720 (iSCSI) B.4 and the usual "123456789" check value */
    static const uint8_t ones[32] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    static const uint8_t zeros[32];
    uint8_t up[32];
    for (int i = 0; i < 32; i++) up[i] = (uint8_t)i;
    int fails = 0, paths = 0;
    for (int path = 0; path < CRC_NPATHS; path++) {
        if (!((crc_available >> path) & 1)) continue;
        paths++;
        int bad = crc32c_by(path, (const uint8_t *)"123456789", 9) != 0xe3069283u ||
                  crc32c_by(path, zeros, 32) != 0x8a9136aau || crc32c_by(path, ones, 32) != 0x62a8ab43u ||
                  crc32c_by(path, up, 32) != 0x46dd794eu;
        for (size_t off = 0; off < 16 && !bad; off++) {
            /* every length 0..4200 from 16 alignments (4 past 640 bytes), the reference register carried along */
            uint32_t reg = 0xffffffffu;
            for (size_t n = 0; n <= 4200 && !bad; n++) {
                if ((n <= 640 || off % 4 == 0) && crc32c_by(path, buf + off, n) != (reg ^ 0xffffffffu)) {
                    printf("%s: wrong at length %zu, offset %zu\n", crc_names[path], n, off);
                    bad = 1;
                }
                reg ^= buf[off + n];
                for (int k = 0; k < 8; k++) reg = reg & 1 ? (reg >> 1) ^ CRC_POLY : reg >> 1;
            }
        }
        for (size_t n = 4201; n < sizeof(buf) - 16 && !bad; n += 997)
            if (crc32c_by(path, buf + 3, n) != crc_bitwise(buf + 3, n)) {
                printf("%s: wrong at length %zu\n", crc_names[path], n);
                bad = 1;
            }
        printf("%s %s\n", crc_names[path], bad ? "FAIL" : "ok");
        fails += bad;
    }
    printf("%d paths, %d failed\n", paths, fails);
    return fails ? 1 : 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: a shared machine descheduling us counts less */
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int bench(size_t n) {
    uint8_t *buf = malloc(n + 64);
    for (size_t i = 0; i < n + 64; i++) buf[i] = (uint8_t)(i * 131 + 7);
    size_t reps = (size_t)(256u << 20) / (n + 1) + 1;
    for (int path = CRC_NPATHS - 1; path >= 0; path--) {
        if (!((crc_available >> path) & 1)) continue;
        double best = 1e30;
        volatile uint32_t sink = 0;
        for (int round = 0; round < 15; round++) {
            double t = now();
            for (size_t r = 0; r < reps; r++) sink ^= crc32c_by(path, buf + (r & 1), n);
            t = now() - t;
            if (t < best) best = t;
        }
        printf("%-9s %8zu B: %6.2f GB/s, %6.1f ns/call\n", crc_names[path], n, n * reps / best / 1e9,
               best / reps * 1e9);
    }
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    const char *warning = crc_init();
    if (warning) printf("warning: %s\n", warning);
    if (argc > 1 && strcmp(argv[1], "bench") == 0) return bench(argc > 2 ? (size_t)atol(argv[2]) : 16384);
    return check();
}
