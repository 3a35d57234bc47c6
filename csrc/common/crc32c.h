/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord, iSCSI and S3 use it.
 *
 * ``crc32c_extend(value, data, size)`` continues a CRC: ``crc32c_extend(0, "123456789", 9)`` is
 * 0xE3069283, and extending by two pieces equals one call over both. On x86-64 CPUs with SSE4.2
 * the CRC32 instruction does 8 bytes per step (checked once at run time), on three streams at
 * once (the instruction's latency is three steps) whose CRCs are then combined: a raw CRC
 * followed by L zero bytes is a linear function of the CRC, tabulated per byte at init for the
 * two stream lengths used; elsewhere (or built with -DCRC32C_SOFTWARE_ONLY) a slicing-by-8
 * table does. Call ``crc32c_init()`` once (under the GIL, at module init) before
 * any other function: it builds the table and reads the CPU's features. Header-only, static:
 * each extension that includes it gets its own copy (2 KiB x 8 of table).
 */
#ifndef RECPIPE_CRC32C_H
#define RECPIPE_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(CRC32C_SOFTWARE_ONLY)
#include <nmmintrin.h>
#define CRC32C_HAVE_SSE42 1
#endif

#define CRC32C_POLY 0x82F63B78u

#define CRC32C_LONG 4096 /* bytes per stream: 3-stream blocks of 12 KiB, then of 768 bytes */
#define CRC32C_SHORT 256

static uint32_t crc32c_table[8][256];
static uint32_t crc32c_shift_long[4][256], crc32c_shift_short[4][256];
static int crc32c_hardware = 0;

static uint32_t crc32c_software(uint32_t crc, const unsigned char *p, size_t n);
#ifdef CRC32C_HAVE_SSE42
static uint32_t crc32c_sse42(uint32_t crc, const unsigned char *p, size_t n);
#endif

/* ``table`` maps a raw crc, byte by byte, to the raw crc after ``length`` zero bytes. */
static void crc32c_shift_table(uint32_t table[4][256], size_t length)
{
    static const unsigned char zeros[CRC32C_LONG];
    for (int k = 0; k < 4; k++)
        for (uint32_t v = 0; v < 256; v++)
            table[k][v] = crc32c_software(v << (8 * k), zeros, length);
}

static inline uint32_t crc32c_shift(uint32_t table[4][256], uint32_t crc)
{
    return table[0][crc & 0xFF] ^ table[1][(crc >> 8) & 0xFF] ^ table[2][(crc >> 16) & 0xFF]
           ^ table[3][crc >> 24];
}

static void crc32c_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = n;
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (CRC32C_POLY & (0u - (crc & 1u)));
        crc32c_table[0][n] = crc;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int t = 1; t < 8; t++)
            crc32c_table[t][n] = (crc32c_table[t - 1][n] >> 8)
                                 ^ crc32c_table[0][crc32c_table[t - 1][n] & 0xFF];
    crc32c_shift_table(crc32c_shift_long, CRC32C_LONG);
    crc32c_shift_table(crc32c_shift_short, CRC32C_SHORT);
#ifdef CRC32C_HAVE_SSE42
    __builtin_cpu_init();
    crc32c_hardware = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
}

/* The table walk over a raw (pre-inverted) crc. */
static uint32_t crc32c_software(uint32_t crc, const unsigned char *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        crc = (crc >> 8) ^ crc32c_table[0][(crc ^ *p++) & 0xFF];
        n--;
    }
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= crc;
        crc = crc32c_table[7][lo & 0xFF] ^ crc32c_table[6][(lo >> 8) & 0xFF]
              ^ crc32c_table[5][(lo >> 16) & 0xFF] ^ crc32c_table[4][lo >> 24]
              ^ crc32c_table[3][hi & 0xFF] ^ crc32c_table[2][(hi >> 8) & 0xFF]
              ^ crc32c_table[1][(hi >> 16) & 0xFF] ^ crc32c_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ crc32c_table[0][(crc ^ *p++) & 0xFF];
    return crc;
}

#ifdef CRC32C_HAVE_SSE42
__attribute__((target("sse4.2")))
static uint64_t crc32c_word(const unsigned char *p)
{
    uint64_t word;
    memcpy(&word, p, 8);
    return word;
}

/* Three streams of ``length`` bytes at ``*p`` at once, combined into ``crc``; advances ``*p``. */
__attribute__((target("sse4.2")))
static uint32_t crc32c_three(uint32_t crc, const unsigned char **p, size_t length,
                             uint32_t shift[4][256])
{
    const unsigned char *a = *p, *b = a + length, *c = b + length;
    uint64_t ca = crc, cb = 0, cc = 0;
    for (size_t i = 0; i < length; i += 8) {
        ca = _mm_crc32_u64(ca, crc32c_word(a + i));
        cb = _mm_crc32_u64(cb, crc32c_word(b + i));
        cc = _mm_crc32_u64(cc, crc32c_word(c + i));
    }
    *p = c + length;
    crc = crc32c_shift(shift, (uint32_t)ca) ^ (uint32_t)cb;
    return crc32c_shift(shift, crc) ^ (uint32_t)cc;
}

/* The CRC32 instruction over a raw crc, three streams at a time on long buffers. */
__attribute__((target("sse4.2")))
static uint32_t crc32c_sse42(uint32_t crc, const unsigned char *p, size_t n)
{
    uint64_t wide;
    while (n && ((uintptr_t)p & 7)) {
        crc = _mm_crc32_u8(crc, *p++);
        n--;
    }
    for (; n >= 3 * CRC32C_LONG; n -= 3 * CRC32C_LONG)
        crc = crc32c_three(crc, &p, CRC32C_LONG, crc32c_shift_long);
    for (; n >= 3 * CRC32C_SHORT; n -= 3 * CRC32C_SHORT)
        crc = crc32c_three(crc, &p, CRC32C_SHORT, crc32c_shift_short);
    wide = crc;
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        wide = _mm_crc32_u64(wide, word);
        p += 8;
        n -= 8;
    }
    while (n--)
        wide = _mm_crc32_u8((uint32_t)wide, *p++);
    return (uint32_t)wide;
}
#endif

/* CRC32C of ``data`` continuing ``value`` (0 to start). */
static uint32_t crc32c_extend(uint32_t value, const void *data, size_t size)
{
    uint32_t crc = ~value;
#ifdef CRC32C_HAVE_SSE42
    if (crc32c_hardware)
        return ~crc32c_sse42(crc, (const unsigned char *)data, size);
#endif
    return ~crc32c_software(crc, (const unsigned char *)data, size);
}

#endif /* RECPIPE_CRC32C_H */
