/* test_gguf.c - the GGUF header reader (engine/formats/gguf.c) and the
 * block types (engine/kernels/quant_types.c) on files and blocks made here:
 * the type table's sizes, hand-computed blocks of each type, a file's
 * key/values and tensors read back through the getters, every prefix and
 * every single-byte corruption of a header (a clean "read more" or a
 * one-line error naming the file, never a crash), a header larger than the
 * first read, the split-set names and a split part named as a whole file.
 * tests/t_gguf.sh covers the same against the numpy reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gguf.h"
#include "kernels.h"
#include "mxfp4.h"
#include "quant_types.h"
#include "test.h"

/* ---- a little GGUF writer: a growing byte buffer */
typedef struct { uint8_t *p; size_t n, cap; } buf;

/* Append n bytes, growing the buffer. */
static void put(buf *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
/* Append v as `bytes` little-endian bytes; a string, a key with its type,
 * zero padding to a multiple of align. */
static void put_le(buf *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) { uint8_t c = (uint8_t)(v >> (8 * i)); put(b, &c, 1); }
}
static void put_str(buf *b, const char *s) { put_le(b, strlen(s), 8); put(b, s, strlen(s)); }
static void put_key(buf *b, const char *key, uint32_t type) { put_str(b, key); put_le(b, type, 4); }
static void pad_to(buf *b, size_t align) { while (b->n % align) put_le(b, 0, 1); }

/* The test file: 12 key/values of the kinds a model carries, two tensors
 * (a Q8_0 [64 x 2] at offset 0 and an F32 [3] at 192), alignment 64.
 * *header_end is where the tensor infos end. */
static buf test_file(size_t *header_end)
{
    buf b = {0};
    put(&b, "GGUF", 4);
    put_le(&b, 3, 4);
    put_le(&b, 2, 8);
    put_le(&b, 12, 8);
    put_key(&b, "general.architecture", GGUF_STRING); put_str(&b, "kimi-linear");
    put_key(&b, "general.alignment", GGUF_U32); put_le(&b, 64, 4);
    put_key(&b, "k.u8", GGUF_U8); put_le(&b, 250, 1);
    put_key(&b, "k.i8", GGUF_I8); put_le(&b, (uint8_t)-100, 1);
    put_key(&b, "k.i16", GGUF_I16); put_le(&b, (uint16_t)-30000, 2);
    put_key(&b, "k.i32", GGUF_I32); put_le(&b, (uint32_t)-7, 4);
    put_key(&b, "k.u64", GGUF_U64); put_le(&b, 1ull << 62, 8);
    float f = 0.25f; uint32_t fb; memcpy(&fb, &f, 4);
    put_key(&b, "k.f32", GGUF_F32); put_le(&b, fb, 4);
    put_key(&b, "k.bool", GGUF_BOOL); put_le(&b, 1, 1);
    put_key(&b, "tokenizer.tokens", GGUF_ARRAY); put_le(&b, GGUF_STRING, 4); put_le(&b, 3, 8);
    put_str(&b, "<s>"); put_str(&b, ""); put_str(&b, "\xc4\xa0the");
    put_key(&b, "k.scores", GGUF_ARRAY); put_le(&b, GGUF_I16, 4); put_le(&b, 2, 8);
    put_le(&b, (uint16_t)-5, 2); put_le(&b, 9, 2);
    put_key(&b, "k.nested", GGUF_ARRAY); put_le(&b, GGUF_ARRAY, 4); put_le(&b, 2, 8);
    put_le(&b, GGUF_U8, 4); put_le(&b, 1, 8); put_le(&b, 7, 1);
    put_le(&b, GGUF_STRING, 4); put_le(&b, 1, 8); put_str(&b, "x");
    put_str(&b, "blk.0.ffn_down.weight"); put_le(&b, 2, 4); put_le(&b, 64, 8); put_le(&b, 2, 8);
    put_le(&b, K3_GGML_Q8_0, 4); put_le(&b, 0, 8);
    put_str(&b, "output_norm.weight"); put_le(&b, 1, 4); put_le(&b, 3, 8);
    put_le(&b, K3_GGML_F32, 4); put_le(&b, 192, 8);
    *header_end = b.n;
    pad_to(&b, 64);
    for (int i = 0; i < 192 + 12; i++) put_le(&b, (uint8_t)i, 1);
    return b;
}

/* gguf_parse on a buffer into a one-part gguf_file-like set of outputs. */
static int parse(const uint8_t *p, size_t len, uint64_t file_bytes, gguf_part *part, gguf_tensor **t, int64_t *n,
                 k3_error *err)
{
    memset(part, 0, sizeof *part);
    *t = NULL;
    *n = 0;
    err->msg[0] = 0;
    return gguf_parse(p, len, file_bytes, 0, "mem.gguf", part, t, n, err);
}

/* What parse() allocated. */
static void free_parsed(gguf_part *part, gguf_tensor *t, int64_t n)
{
    for (int64_t i = 0; i < n; i++) free(t[i].name);
    free(t);
    gguf_part_free_kvs(part);
}

/* A one-line message naming the in-memory file. */
static int names_file(const k3_error *err)
{
    return !strncmp(err->msg, "mem.gguf: ", 10) && !strchr(err->msg, '\n');
}

/* 1 if the first n weights of one block of `type` have want's exact bits;
 * else 0 and why says which weight. */
static int decode_is(const char *type, const uint8_t *block, const float *want, int n, char *why)
{
    const k3_quant_type *t = k3_quant_type_by_name(type);
    float out[256];
    k3_quant_decode_scalar(t, block, t->block_elems, out);
    for (int i = 0; i < n; i++)
        if (memcmp(&out[i], &want[i], 4)) {
            sprintf(why, "%s weight %d is %g, want %g", type, i, out[i], want[i]);
            return 0;
        }
    return 1;
}

/* The little-endian bytes of a half. */
static void half_at(uint8_t *p, float v)
{
    uint16_t h = k3_f32_to_f16(v);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

int main(void)
{
    char why[256] = "";

    TEST_BEGIN("gguf types: the table's block sizes are ggml's, ids and names resolve both ways");
    static const struct { const char *name; uint32_t id, elems, bytes; } ggml[] = {
        {"F32", 0, 1, 4}, {"F16", 1, 1, 2}, {"BF16", 30, 1, 2}, {"Q8_0", 8, 32, 34}, {"Q4_0", 2, 32, 18},
        {"Q5_0", 6, 32, 22}, {"Q2_K", 10, 256, 84}, {"Q3_K", 11, 256, 110}, {"Q4_K", 12, 256, 144},
        {"Q5_K", 13, 256, 176}, {"Q6_K", 14, 256, 210}, {"MXFP4", 39, 32, 17}, {"IQ4_NL", 20, 32, 18},
        {"IQ4_XS", 23, 256, 136}, {"Q4_1", 3, 32, 20}, {"Q5_1", 7, 32, 24}, {"IQ2_XXS", 16, 256, 66},
        {"IQ2_XS", 17, 256, 74}, {"IQ2_S", 22, 256, 82}, {"IQ3_XXS", 18, 256, 98}, {"IQ3_S", 21, 256, 110},
        {"IQ1_S", 19, 256, 50}, {"IQ1_M", 29, 256, 56}};
    CHECK(k3_quant_type_count() == 23, "%d types", k3_quant_type_count());
    for (size_t i = 0; i < sizeof ggml / sizeof ggml[0]; i++) {
        const k3_quant_type *t = k3_quant_type_by_id(ggml[i].id);
        CHECK(t && t == k3_quant_type_by_name(ggml[i].name) && t->block_elems == ggml[i].elems &&
              t->block_bytes == ggml[i].bytes && !strcmp(k3_ggml_type_name(ggml[i].id), ggml[i].name),
              "%s", ggml[i].name);
    }
    CHECK(!k3_quant_type_by_id(35) && !strcmp(k3_ggml_type_name(35), "TQ2_0"), "TQ2_0");
    CHECK(!k3_ggml_type_name(4) && !k3_ggml_type_name(1000), "retired / unknown ids have no name");
    uint64_t bytes = 0;
    CHECK(k3_quant_bytes(k3_quant_type_by_name("Q4_K"), 7168ull * 2048, &bytes) == 0 &&
              bytes == 7168ull * 2048 / 256 * 144, "Q4_K bytes %llu", (unsigned long long)bytes);
    CHECK(k3_quant_bytes(k3_quant_type_by_name("Q8_0"), 48, &bytes) == -1, "48 weights are not Q8_0 blocks");
    TEST_END();

    TEST_BEGIN("gguf types: hand-computed F32, F16, BF16, Q8_0, Q4_0, Q5_0 and MXFP4 blocks");
    {
        uint8_t b[64] = {0};
        float want[32];
        b[0] = 0x00; b[1] = 0x3C; b[2] = 0x00; b[3] = 0xC0; b[4] = 0x01; b[5] = 0x00;   /* 1, -2, 2^-24 */
        const float f16_want[3] = {1.0f, -2.0f, 0x1p-24f};
        int ok = decode_is("F16", b, f16_want, 1, why) && decode_is("F16", b + 2, f16_want + 1, 1, why) &&
                 decode_is("F16", b + 4, f16_want + 2, 1, why);
        b[0] = 0x80; b[1] = 0x3F;                                    /* bf16 1.0 */
        ok = ok && decode_is("BF16", b, f16_want, 1, why);
        const float f32_want = -1.5f;                                /* f32: the bytes as they are */
        memcpy(b, &f32_want, 4);
        ok = ok && decode_is("F32", b, &f32_want, 1, why);
        half_at(b, 0.25f);                                           /* Q8_0: q * 0.25 */
        for (int j = 0; j < 32; j++) { b[2 + j] = (uint8_t)(int8_t)(j * 8 - 128); want[j] = (float)(j * 8 - 128) * 0.25f; }
        ok = ok && decode_is("Q8_0", b, want, 32, why);
        half_at(b, -1.0f);                                           /* Q4_0: low j - 8, high (15 - j) - 8 */
        for (int j = 0; j < 16; j++) { b[2 + j] = (uint8_t)(j | (15 - j) << 4); want[j] = -(float)(j - 8); want[16 + j] = -(float)(7 - j); }
        ok = ok && decode_is("Q4_0", b, want, 32, why);
        half_at(b, 1.0f);                                            /* Q5_0: fifth bit on weights 0..15 */
        b[2] = b[3] = 0xFF; b[4] = b[5] = 0;
        for (int j = 0; j < 16; j++) { b[6 + j] = 0; want[j] = 0; want[16 + j] = -16; }
        ok = ok && decode_is("Q5_0", b, want, 32, why);
        b[0] = 127;                                                  /* MXFP4: scale 2^-1 x doubled E2M1 */
        for (int j = 0; j < 16; j++) { b[1 + j] = (uint8_t)(j | j << 4); want[j] = want[16 + j] = j == 8 ? 0.0f : k3_e2m1_values[j]; }
        ok = ok && decode_is("MXFP4", b, want, 32, why);
        CHECK(ok, "%s", why);
        CHECK(k3_e8m0_half_to_f32(0) == 0x1p-128f && k3_e8m0_half_to_f32(1) == 0x1p-127f &&
              k3_e8m0_half_to_f32(128) == 1.0f && k3_e8m0_half_to_f32(254) == 0x1p126f, "E8M0 halves");
    }
    TEST_END();

    TEST_BEGIN("gguf types: hand-computed IQ4_NL and IQ4_XS blocks");
    {
        uint8_t b[136] = {0};
        float y[256];
        half_at(b, 0.5f);
        memset(b + 2, 0xF0, 16);                 /* nibble 0 (level -127) low, 15 (113) high */
        k3_quant_decode_scalar(k3_quant_type_by_name("IQ4_NL"), b, 32, y);
        CHECK(y[0] == -63.5f && y[15] == -63.5f && y[16] == 56.5f, "IQ4_NL %g %g", y[0], y[16]);
        /* IQ4_XS: group scales 33, 0+32, 32, 50 from low nibbles 1, 0, 0, 2 and high bits 2, 0, 0, 3;
         * nibbles 8 (level 1) low and 9 (level 13) high */
        half_at(b, 1.0f);
        b[2] = 0xC2; b[3] = 0; b[4] = 0x01; b[5] = 0x20; b[6] = b[7] = 0;
        memset(b + 8, 0x98, 128);
        k3_quant_decode_scalar(k3_quant_type_by_name("IQ4_XS"), b, 256, y);
        CHECK(y[0] == 1 && y[16] == 13 && y[32] == -32 && y[96] == 18 && y[112] == 18 * 13 && y[128] == -32,
              "IQ4_XS %g %g %g %g %g %g", y[0], y[16], y[32], y[96], y[112], y[128]);
    }
    TEST_END();

    TEST_BEGIN("gguf types: hand-computed Q2_K, Q3_K, Q4_K, Q5_K and Q6_K blocks");
    {
        uint8_t b[256] = {0};
        float y[256];
        memset(b, 0x21, 16); memset(b + 16, 0xE4, 64); half_at(b + 80, 1.0f); half_at(b + 82, 1.0f);
        k3_quant_decode_scalar(k3_quant_type_by_name("Q2_K"), b, 256, y);     /* scale 1, min 2, q 0,1,2,3 */
        CHECK(y[0] == -2 && y[32] == -1 && y[64] == 0 && y[96] == 1 && y[255] == 1, "Q2_K %g %g %g %g", y[0], y[32], y[64], y[96]);
        /* Q3_K: low 4 bits of every scale 1, top 2 bits k / 4 (bytes 8..11 = 11 10 01 00), so scale k is
         * (1 | (k / 4) << 4) - 32 = -31, -15, 1, 17 by quarter; q 3, hmask bit only in pass 0 */
        memset(b, 0x01, 32); memset(b + 32, 0xFF, 64); memset(b + 96, 0x11, 8); memset(b + 104, 0xE4, 4);
        half_at(b + 108, 1.0f);
        k3_quant_decode_scalar(k3_quant_type_by_name("Q3_K"), b, 256, y);
        CHECK(y[0] == -93 && y[31] == -93 && y[32] == 31 && y[64] == 15 && y[128] == -1 && y[224] == -17,
              "Q3_K %g %g %g %g %g", y[0], y[32], y[64], y[128], y[224]);
        memset(b, 0, 256);
        half_at(b, 1.0f); half_at(b + 2, 1.0f);
        b[4] = 0xC1; b[8] = 0x40; b[12] = 0x21; memset(b + 16, 0x11, 128);
        k3_quant_decode_scalar(k3_quant_type_by_name("Q4_K"), b, 256, y);     /* pair 4: scale 49, min 18 */
        CHECK(y[0] == 1 * 1 - 0 && y[128] == 49 - 18 && y[160] == 0, "Q4_K %g %g %g", y[0], y[128], y[160]);
        memset(b, 0, 256);
        half_at(b, 1.0f); memset(b + 4, 1, 4); memset(b + 16, 0x02, 32);
        k3_quant_decode_scalar(k3_quant_type_by_name("Q5_K"), b, 256, y);     /* fifth bit of group 1 */
        CHECK(y[0] == 0 && y[32] == 16 && y[64] == 0, "Q5_K %g %g %g", y[0], y[32], y[64]);
        memset(b, 0, 256);
        for (int i = 0; i < 16; i++) b[192 + i] = (uint8_t)(i + 1);
        b[192 + 15] = (uint8_t)(int8_t)-3;
        half_at(b + 208, 0.5f);
        k3_quant_decode_scalar(k3_quant_type_by_name("Q6_K"), b, 256, y);     /* q = -32, signed scales */
        CHECK(y[0] == -16 && y[16] == -32 && y[32] == -48 && y[128] == -144 && y[255] == 48,
              "Q6_K %g %g %g %g %g", y[0], y[16], y[32], y[128], y[255]);
    }
    TEST_END();

    size_t header_end;
    buf file = test_file(&header_end);
    gguf_part part;
    gguf_tensor *t;
    int64_t n;
    k3_error err;

    TEST_BEGIN("gguf: a file written here: key/values through the getters, tensors, offsets");
    {
        int rc = parse(file.p, file.n, file.n, &part, &t, &n, &err);
        CHECK(rc == 0, "rc %d: %s", rc, err.msg);
        if (rc == 0) {
            CHECK(part.version == 3 && part.n_kvs == 12 && part.alignment == 64,
                  "version %u kvs %lld alignment %u", part.version, (long long)part.n_kvs, part.alignment);
            CHECK(part.data_start == (header_end + 63) / 64 * 64, "data start %llu", (unsigned long long)part.data_start);
            const char *s;
            size_t len;
            uint64_t u;
            int64_t i;
            double d;
            const gguf_kv *kv = gguf_part_find_kv(&part, "general.architecture");
            CHECK(kv && gguf_kv_string(kv, &s, &len) == 0 && len == 11 && !memcmp(s, "kimi-linear", 11), "architecture");
            CHECK(kv && gguf_kv_uint(kv, &u) == -1, "a string read as a number");
            CHECK(gguf_kv_uint(gguf_part_find_kv(&part, "k.u8"), &u) == 0 && u == 250, "u8");
            CHECK(gguf_kv_int(gguf_part_find_kv(&part, "k.i8"), &i) == 0 && i == -100, "i8 %lld", (long long)i);
            CHECK(gguf_kv_int(gguf_part_find_kv(&part, "k.i16"), &i) == 0 && i == -30000, "i16");
            CHECK(gguf_kv_int(gguf_part_find_kv(&part, "k.i32"), &i) == 0 && i == -7, "i32");
            CHECK(gguf_kv_uint(gguf_part_find_kv(&part, "k.i32"), &u) == -1, "a signed value read as unsigned");
            CHECK(gguf_kv_uint(gguf_part_find_kv(&part, "k.u64"), &u) == 0 && u == 1ull << 62, "u64");
            CHECK(gguf_kv_f64(gguf_part_find_kv(&part, "k.f32"), &d) == 0 && d == 0.25, "f32");
            kv = gguf_part_find_kv(&part, "tokenizer.tokens");
            CHECK(kv && kv->count == 3 && gguf_kv_array_string(kv, 2, &s, &len) == 0 && len == 5 &&
                      !memcmp(s, "\xc4\xa0the", 5), "token 2");
            CHECK(kv && gguf_kv_array_string(kv, 1, &s, &len) == 0 && len == 0, "the empty token");
            CHECK(kv && gguf_kv_array_string(kv, 3, &s, &len) == -1, "token 3 of 3");
            kv = gguf_part_find_kv(&part, "k.scores");
            CHECK(kv && gguf_kv_array_number(kv, 0, &d) == 0 && d == -5 && gguf_kv_array_number(kv, 1, &d) == 0 &&
                      d == 9, "i16 array");
            kv = gguf_part_find_kv(&part, "k.nested");
            CHECK(kv && kv->array_type == GGUF_ARRAY && kv->count == 2 && gguf_kv_array_number(kv, 0, &d) == -1,
                  "nested array");
            CHECK(!gguf_part_find_kv(&part, "k.absent"), "an absent key found");
            CHECK(n == 2 && !strcmp(t[0].name, "blk.0.ffn_down.weight") && t[0].type->ggml_id == K3_GGML_Q8_0 &&
                      t[0].n_dims == 2 && t[0].dims[0] == 64 && t[0].dims[1] == 2 && t[0].bytes == 136 &&
                      t[0].file_offset == part.data_start, "tensor 0");
            CHECK(n == 2 && t[1].bytes == 12 && t[1].file_offset == part.data_start + 192 && t[1].dims[1] == 1, "tensor 1");
            free_parsed(&part, t, n);
        }
    }
    TEST_END();

    TEST_BEGIN("gguf: every prefix of the header: 'read more' when the file goes on, one line naming the file when it ends");
    {
        int bad_more = -1, bad_end = -1;
        for (size_t len = 0; len < header_end && bad_more < 0 && bad_end < 0; len++) {
            if (parse(file.p, len, file.n, &part, &t, &n, &err) != 1 || n != 0) bad_more = (int)len;
            free_parsed(&part, t, n);
            if (parse(file.p, len, len, &part, &t, &n, &err) != -1 || !names_file(&err)) bad_end = (int)len;
            free_parsed(&part, t, n);
        }
        CHECK(bad_more < 0, "prefix %d of a longer file did not ask for more", bad_more);
        CHECK(bad_end < 0, "a file of %d bytes: '%s'", bad_end, err.msg);
    }
    TEST_END();

    TEST_BEGIN("gguf: every single-byte change of the header is read or refused in one line, never a crash");
    {
        int bad = -1, refused = 0;
        buf copy = {0};
        put(&copy, file.p, file.n);
        static const uint8_t values[] = {0x00, 0xFF, 0x80, 0x07};
        for (size_t pos = 0; pos < header_end && bad < 0; pos++) {
            for (size_t v = 0; v < sizeof values; v++) {
                uint8_t keep = copy.p[pos];
                copy.p[pos] = values[v];
                int rc = parse(copy.p, copy.n, copy.n, &part, &t, &n, &err);
                if (rc == 1 || (rc == -1 && !names_file(&err))) bad = (int)pos;
                refused += rc == -1;
                free_parsed(&part, t, n);
                copy.p[pos] = keep;
            }
        }
        free(copy.p);
        CHECK(bad < 0, "byte %d: rc or message wrong: '%s'", bad, err.msg);
        CHECK(refused > (int)header_end, "only %d of %zu changes refused", refused, 4 * header_end);
    }
    TEST_END();

    TEST_BEGIN("gguf: a header longer than 128 MiB is refused before it is read (a 200 MiB string in a 300 MiB file)");
    {
        buf big = {0};
        put(&big, "GGUF", 4); put_le(&big, 3, 4); put_le(&big, 0, 8); put_le(&big, 1, 8);
        put_key(&big, "big", GGUF_STRING);
        put_le(&big, 200ull << 20, 8);
        int rc = parse(big.p, big.n, 300ull << 20, &part, &t, &n, &err);
        CHECK(rc == -1 && names_file(&err) && strstr(err.msg, "would exceed 128 MiB"), "rc %d: '%s'", rc, err.msg);
        free_parsed(&part, t, n);
        free(big.p);
    }
    TEST_END();

    char dir[] = "/tmp/k3_test_gguf_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256];

    TEST_BEGIN("gguf: a header larger than the first read (3 MiB of metadata) is read whole");
    {
        buf big = {0};
        put(&big, "GGUF", 4); put_le(&big, 2, 4); put_le(&big, 1, 8); put_le(&big, 1, 8);
        put_key(&big, "big", GGUF_STRING);
        put_le(&big, 3u << 20, 8);
        for (size_t i = 0; i < (3u << 20); i++) put_le(&big, 'a' + i % 26, 1);
        put_str(&big, "w"); put_le(&big, 1, 4); put_le(&big, 32, 8); put_le(&big, K3_GGML_Q8_0, 4); put_le(&big, 0, 8);
        pad_to(&big, 32);
        for (int i = 0; i < 34; i++) put_le(&big, 0, 1);
        snprintf(path, sizeof path, "%s/big.gguf", dir);
        FILE *f = fopen(path, "wb");
        fwrite(big.p, 1, big.n, f);
        fclose(f);
        gguf_file g;
        int rc = gguf_open(&g, path, &err);
        CHECK(rc == 0, "%s", err.msg);
        if (rc == 0) {
            const char *s;
            size_t len;
            CHECK(gguf_kv_string(gguf_find_kv(&g, "big"), &s, &len) == 0 && len == 3u << 20 && (size_t)s[len - 1] == 'a' + (len - 1) % 26,
                  "the 3 MiB string");
            CHECK(g.n_tensors == 1 && gguf_find_tensor(&g, "w") && gguf_find_tensor(&g, "w")->bytes == 34 &&
                      !gguf_find_tensor(&g, "x"), "tensor w");
            gguf_close(&g);
        }
        free(big.p);
    }
    TEST_END();

    TEST_BEGIN("gguf: split-set names, and a part named as a whole file is refused");
    {
        int no, count;
        size_t prefix;
        CHECK(gguf_split_name("Kimi-Linear-Q4_K_M-00002-of-00012.gguf", &no, &count, &prefix) && no == 2 &&
                  count == 12 && prefix == strlen("Kimi-Linear-Q4_K_M"), "a real name");
        CHECK(!gguf_split_name("-00001-of-00002.gguf", &no, &count, &prefix), "no prefix");
        CHECK(!gguf_split_name("m-00003-of-00002.gguf", &no, &count, &prefix), "part past the count");
        CHECK(!gguf_split_name("m-00000-of-00002.gguf", &no, &count, &prefix), "part 0");
        CHECK(!gguf_split_name("m-0001-of-00002.gguf", &no, &count, &prefix), "four digits");
        CHECK(!gguf_split_name("m-00001-of-00002.gguf.part", &no, &count, &prefix), "another suffix");
        buf part2 = {0};
        put(&part2, "GGUF", 4); put_le(&part2, 3, 4); put_le(&part2, 0, 8); put_le(&part2, 2, 8);
        put_key(&part2, "split.no", GGUF_U16); put_le(&part2, 1, 2);
        put_key(&part2, "split.count", GGUF_U16); put_le(&part2, 2, 2);
        snprintf(path, sizeof path, "%s/renamed.gguf", dir);
        FILE *f = fopen(path, "wb");
        fwrite(part2.p, 1, part2.n, f);
        fclose(f);
        gguf_file g;
        CHECK(gguf_open(&g, path, &err) == -1 && strstr(err.msg, "renamed.gguf: its metadata says it is one part of a 2-part"),
              "'%s'", err.msg);
        free(part2.p);
        unlink(path);
        snprintf(path, sizeof path, "%s/big.gguf", dir);
        unlink(path);
        rmdir(dir);
    }
    TEST_END();

    free(file.p);
    TEST_EXIT();
}
