/* kernels_x86.h - the x86-64-v3 back end of the kernels (AVX2, FMA, F16C).
 *
 * The kernel bodies in matvec.c and mxfp4.c are written once on an 8-lane
 * fp32 vector (v8f) and a few decoders; this file, kernels_neon.h and
 * kernels_generic.h each implement that small vocabulary for one machine, so
 * the canonical summation order (matvec.c) is defined in one place and every
 * back end performs exactly the same sequence of IEEE operations. Included
 * only through kernels_arch.h. This is the only file that includes
 * <immintrin.h>. */
#ifndef K3_KERNELS_X86_H
#define K3_KERNELS_X86_H

#include <immintrin.h>
#include <stdint.h>
#include "mxfp4.h"

#define K3_KERNELS_NAME "x86-64-v3 (AVX2 FMA F16C)"

typedef __m256 v8f;

/* All lanes +0. */
K3_INLINE v8f v8_zero(void) { return _mm256_setzero_ps(); }
/* All lanes f. */
K3_INLINE v8f v8_set1(float f) { return _mm256_set1_ps(f); }
/* 8 floats from any address. */
K3_INLINE v8f v8_loadu(const float *p) { return _mm256_loadu_ps(p); }
/* 8 floats from a 32-byte aligned address (the matmul scratch). */
K3_INLINE v8f v8_load_aligned(const float *p) { return _mm256_load_ps(p); }
/* Store 8 floats to any address. */
K3_INLINE void v8_storeu(float *p, v8f v) { _mm256_storeu_ps(p, v); }
/* Lane-wise a + b, a * b, and a * b + c rounded once. */
K3_INLINE v8f v8_add(v8f a, v8f b) { return _mm256_add_ps(a, b); }
K3_INLINE v8f v8_mul(v8f a, v8f b) { return _mm256_mul_ps(a, b); }
/* v unchanged, but the compiler forgets that its lanes are equal: GCC
 * turns set1(a) * set1(b) into a scalar multiply and a broadcast shuffle,
 * where a broadcast load and a vector multiply cost one shuffle less. */
K3_INLINE v8f v8_keep(v8f v) { __asm__("" : "+x"(v)); return v; }
K3_INLINE v8f v8_fma(v8f a, v8f b, v8f c) { return _mm256_fmadd_ps(a, b, c); }

/* The fixed reduction of the canonical order: lane i + lane i+4 (i < 4),
 * then lane i + lane i+2 (i < 2), then lane 0 + lane 1. */
K3_INLINE float v8_hsum(v8f v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

/* An empty asm that claims to modify the two vectors, so they must sit in
 * registers: without it gcc folds every use into an FMA memory operand and
 * the 2x2 matmul loop issues 12-16 loads per 8 FMAs instead of 8, which made
 * it load-bound (measured 50 -> 80 GFLOP/s per core for bf16 T=32). */
K3_INLINE void v8_pin_in_register(v8f *a, v8f *b)
{
    __asm__("" : "+x"(*a), "+x"(*b));
}

/* 8 bf16 -> 8 fp32: zero-extend to 32 bits and shift into the high half. */
K3_INLINE v8f v8_from_bf16(const void *p)
{
    __m256i u32 = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u32, 16));
}

/* 8 f16 -> 8 fp32 (exact). */
K3_INLINE v8f v8_from_f16(const void *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* 16 e4m3 bytes -> 16 fp32 values equal to e4m3 / 256 (columns 0-7 in *lo,
 * 8-15 in *hi). The e4m3 bit pattern s.eeee.mmm placed at f16 bits 15 | 13..7
 * is the same number with exponent bias 15 instead of 7 (subnormals
 * included), i.e. scaled by 2^-8; the 2^8 goes into the per-block scale
 * (exact: power of two). Sign-extending the byte and shifting left by 7 puts
 * s at bit 15 and bits 6..0 at 13..7; the AND clears the copy of s that lands
 * on bit 14. With check_nan, the NaN codes S.1111.111 (low 7 bits all ones)
 * become f16 0xFFFF, a NaN; without, they would decode as +-480/256, so
 * callers skip the check only for blocks that v16_e4m3_has_nan() cleared. */
K3_INLINE void v16_from_e4m3_div256(const void *p, int check_nan, v8f *lo, v8f *hi)
{
    __m256i sx16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p));
    __m256i h = _mm256_and_si256(_mm256_slli_epi16(sx16, 7), _mm256_set1_epi16((short)0xBFFF));
    if (check_nan) {
        __m256i is_nan = _mm256_cmpeq_epi16(_mm256_or_si256(sx16, _mm256_set1_epi16((short)0xFF80)),
                                            _mm256_set1_epi16(-1));
        h = _mm256_or_si256(h, is_nan);
    }
    *lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
    *hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
}

/* True if any of the n_bytes (a multiple of 16) fp8 codes at p is a NaN.
 * b | 0x80 is 0xFF exactly for the NaN codes, so a running unsigned byte
 * max finds them with two operations per 32 weights - cheaper than the
 * per-chunk NaN merge, which then only runs for blocks that need it. */
K3_INLINE int v16_e4m3_has_nan(const unsigned char *p, int64_t n_bytes)
{
    const __m256i high_bit = _mm256_set1_epi8((char)0x80);
    __m256i max_code = _mm256_setzero_si256();
    int64_t i = 0;
    for (; i + 32 <= n_bytes; i += 32) {
        __m256i codes = _mm256_loadu_si256((const __m256i *)(p + i));
        max_code = _mm256_max_epu8(max_code, _mm256_or_si256(codes, high_bit));
    }
    if (i < n_bytes) {   /* 16 left; the upper half of the cast is zeroed */
        __m256i codes = _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(p + i)));
        max_code = _mm256_max_epu8(max_code, _mm256_or_si256(codes, high_bit));
    }
    return _mm256_movemask_epi8(_mm256_cmpeq_epi8(max_code, _mm256_set1_epi8(-1))) != 0;
}

/* One MXFP4 group: 16 bytes of nibbles (low nibble = even column) -> four
 * vectors of doubled E2M1 values (exact small integers as floats) for
 * columns 0-7, 8-15, 16-23, 24-31. All 32 nibbles are looked up with one
 * pshufb on the table of doubled values. */
K3_INLINE void v32_from_mxfp4_doubled(const uint8_t *bytes16, v8f f[4])
{
    const __m128i lut = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    const __m128i low_mask = _mm_set1_epi8(0x0F);
    __m128i b = _mm_loadu_si128((const __m128i *)bytes16);
    __m128i lo = _mm_and_si128(b, low_mask);
    __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), low_mask);
    __m128i first = _mm_shuffle_epi8(lut, _mm_unpacklo_epi8(lo, hi));
    __m128i second = _mm_shuffle_epi8(lut, _mm_unpackhi_epi8(lo, hi));
    f[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(first));
    f[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(first, 8)));
    f[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(second));
    f[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(second, 8)));
}

/* The MXFP4 matvec's lane order on this back end (see dot_rows_mxfp4 in
 * matvec.c): lane l of each 16-column chunk's two vectors (l < 8 the first,
 * l >= 8 the second) holds column MXFP4_LANE_COLUMNS[l] of the chunk, so the
 * accumulator lane l always carries the canonical chain of that column. It
 * is the order v32_from_mxfp4_lanes produces without moving a float. */
#define MXFP4_LANE_COLUMNS {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}

/* 16 floats of x (one chunk) in the lane order above: the chunk read as a
 * 4 x 4 matrix, transposed. */
K3_INLINE void v16_to_mxfp4_lanes(const float *x16, float *lanes16)
{
    __m128 r0 = _mm_loadu_ps(x16), r1 = _mm_loadu_ps(x16 + 4), r2 = _mm_loadu_ps(x16 + 8),
           r3 = _mm_loadu_ps(x16 + 12);
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_storeu_ps(lanes16, r0);
    _mm_storeu_ps(lanes16 + 4, r1);
    _mm_storeu_ps(lanes16 + 8, r2);
    _mm_storeu_ps(lanes16 + 12, r3);
}

/* 32 weights as four 8-float vectors from their nibble codes (one per
 * byte, in the lanes' order) through one scale's bf16 byte tables: two
 * shuffles give each weight's low and high byte, the unpacks pair them,
 * and each 32-bit lane's two words become two floats by a shift and a
 * mask. Shared by the packed and the GGUF MXFP4 layouts, which differ
 * only in where the nibbles sit. */
K3_INLINE void v32_from_bf16_table(const k3_mxfp4_bf16_bytes *table, __m256i nibbles, v8f w[4])
{
    __m256i low = _mm256_shuffle_epi8(_mm256_load_si256((const __m256i *)table->low), nibbles);
    __m256i high = _mm256_shuffle_epi8(_mm256_load_si256((const __m256i *)table->high), nibbles);
    __m256i chunk0 = _mm256_unpacklo_epi8(low, high), chunk1 = _mm256_unpackhi_epi8(low, high);
    const __m256i upper_word = _mm256_set1_epi32((int)0xFFFF0000u);
    w[0] = _mm256_castsi256_ps(_mm256_slli_epi32(chunk0, 16));
    w[1] = _mm256_castsi256_ps(_mm256_and_si256(chunk0, upper_word));
    w[2] = _mm256_castsi256_ps(_mm256_slli_epi32(chunk1, 16));
    w[3] = _mm256_castsi256_ps(_mm256_and_si256(chunk1, upper_word));
}

/* One MXFP4 group (16 bytes of nibbles, scale byte `scale`) -> its 32 exact
 * weights, scale applied, in the lane order above: w[0], w[1] are columns
 * 0-15, w[2], w[3] columns 16-31. Both nibble halves come from one
 * broadcast load (the high 128-bit half shifted by 4), two byte shuffles
 * look up the low and high byte of each weight's bf16 pattern in the
 * scale's table (mxfp4.h), an unpack pairs them into 16-bit words, and a
 * 32-bit lane's two words become two floats by a shift and a mask: 4
 * shuffles and no convert or multiply per 32 weights, against 10 shuffles,
 * 4 converts and 4 multiplies for v32_from_mxfp4_doubled. */
K3_INLINE void v32_from_mxfp4_lanes(const uint8_t *bytes16, uint8_t scale, v8f w[4])
{
    const k3_mxfp4_bf16_bytes *table = &k3_mxfp4_bf16_tables[scale];
    __m256i packed = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)bytes16));
    __m256i nibbles = _mm256_and_si256(_mm256_srlv_epi32(packed, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                                       _mm256_set1_epi8(0x0F));
    v32_from_bf16_table(table, nibbles, w);
}

/* One MXFP4 group's 32 doubled E2M1 codes + 12 (0..24, unsigned), in q8
 * position order: the low nibbles in the low 128 bits (positions 0-15),
 * the high ones above (16-31). */
K3_INLINE __m256i mxfp4_q8_codes(const uint8_t *bytes16)
{
    const __m256i codes_plus_12 = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,
                                                   12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
    __m256i packed = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)bytes16));
    __m256i nibbles = _mm256_and_si256(_mm256_srlv_epi32(packed, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                                       _mm256_set1_epi8(0x0F));
    return _mm256_shuffle_epi8(codes_plus_12, nibbles);
}

/* The 8 integer partial sums of one MXFP4 group against 32 int8 codes in
 * q8 position order (mxfp4_q8.c), as exact floats: lane l = sum over
 * positions 4l..4l+3 of doubled E2M1 code x q. The nibbles unpack as for
 * the exact path (low nibbles in the low 128 bits = positions 0-15, high
 * nibbles = 16-31); pshufb looks up code + 12 (0..24, unsigned) so
 * vpmaddubsw can multiply it with the signed q directly, vpmaddwd with ones
 * adds the pairs, and the quantizer's per-lane 12 * sum(q) (offsets8) is
 * subtracted: all exact in int16/int32, the same integers as the plain
 * sums of the generic back end. For n_tokens (1..4) tokens' codes at once
 * (a prompt): the nibbles are looked up once. */
K3_INLINE void v8_mxfp4_q8_partials_tokens(const uint8_t *bytes16, int n_tokens, const int8_t *const *q32,
                                            const int32_t *const *offsets8, v8f *partials)
{
    const __m256i codes = mxfp4_q8_codes(bytes16);
#pragma GCC unroll 4
    for (int t = 0; t < n_tokens; t++) {
        __m256i pairs = _mm256_maddubs_epi16(codes, _mm256_loadu_si256((const __m256i *)q32[t]));
        __m256i sums = _mm256_sub_epi32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)),
                                        _mm256_loadu_si256((const __m256i *)offsets8[t]));
        partials[t] = _mm256_cvtepi32_ps(sums);
    }
}

/* v8_mxfp4_q8_partials_tokens on a CPU with AVX-VNNI (mxfp4_q8.c asks
 * the CPU before it calls this): vpdpbusd multiplies the unsigned
 * code + 12 by the signed q and adds each lane's four products to the
 * lane's -offsets in one instruction, where vpmaddubsw, vpmaddwd and
 * vpsubd took three. The products (at most 24 x 127) and their sums fit
 * without saturation either way, so the integers, and the bits, are the
 * same. Inline assembly, because the baseline (x86-64-v3) does not let the
 * compiler emit the instruction; {vex} picks the AVX-VNNI encoding. */
#define K3_HAVE_AVX_VNNI_Q8 1
K3_INLINE void v8_mxfp4_q8_partials_tokens_vnni(const uint8_t *bytes16, int n_tokens, const int8_t *const *q32,
                                                 const int32_t *const *offsets8, v8f *partials)
{
    const __m256i codes = mxfp4_q8_codes(bytes16);
#pragma GCC unroll 4
    for (int t = 0; t < n_tokens; t++) {
        __m256i sums = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_loadu_si256((const __m256i *)offsets8[t]));
        __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(sums) : "x"(codes), "xm"(*(const __m256i_u *)q32[t]));
        partials[t] = _mm256_cvtepi32_ps(sums);
    }
}

/* The q8 quantization of one 32-column group (mxfp4_q8.c's contract,
 * which its scalar loop states): amax of |x| with NaN lanes taken as 0
 * (the scalar compare skips them), then per column x * inverse clamped to
 * [-127, 127] (NaN -> -127, as max_ps returns its second operand) and
 * rounded to nearest even: element by element the same IEEE operations, so
 * the same codes. Codes in column order into ints32 (the caller reorders);
 * returns amax. */
#define K3_HAVE_Q8_QUANTIZE_GROUP 1
K3_INLINE float q8_quantize_group_columns(const float *x32, float (*inverse_of)(float), int32_t ints32[32])
{
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 v[4], m = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_loadu_ps(x32 + 8 * i);
        __m256 a = _mm256_and_ps(v[i], abs_mask);
        a = _mm256_and_ps(a, _mm256_cmp_ps(a, a, _CMP_ORD_Q));   /* NaN -> 0 */
        m = _mm256_max_ps(m, a);
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    float amax = _mm_cvtss_f32(h);
    const __m256 inverse = _mm256_set1_ps(inverse_of(amax));
    for (int i = 0; i < 4; i++) {
        __m256 scaled = _mm256_max_ps(_mm256_mul_ps(v[i], inverse), _mm256_set1_ps(-127.0f));
        scaled = _mm256_min_ps(scaled, _mm256_set1_ps(127.0f));
        scaled = _mm256_round_ps(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_si256((__m256i *)(ints32 + 8 * i), _mm256_cvtps_epi32(scaled));
    }
    return amax;
}

/* The largest |x| of n floats (n a multiple of 8), NaN lanes taken as 0 as
 * the scalar compare skips them: q8's 256-column quantizer (quant_matvec.c)
 * then finds the first value of that magnitude itself. */
#define K3_HAVE_Q8_SCALED_CODES 1
K3_INLINE float q8_abs_max(const float *x, int n)
{
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) {
        __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask);
        m = _mm256_max_ps(m, _mm256_and_ps(a, _mm256_cmp_ps(a, a, _CMP_ORD_Q)));
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    return _mm_cvtss_f32(h);
}

/* codes[i] = x[i] * scale clamped to [-127, 127] (NaN -> -127, as max_ps
 * returns its second operand) and rounded to nearest even, 8 at a time
 * (n a multiple of 8): per element the IEEE operations of quant_matvec.c's
 * scalar q8_code(x * scale), so the same codes. */
K3_INLINE void q8_scaled_codes(const float *x, int n, float scale, int8_t *codes)
{
    const __m256 s = _mm256_set1_ps(scale), low = _mm256_set1_ps(-127.0f), high = _mm256_set1_ps(127.0f);
    for (int i = 0; i < n; i += 8) {
        __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), s), low), high);
        __m256i ints = _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(ints), _mm256_extracti128_si256(ints, 1));
        _mm_storel_epi64((__m128i *)(codes + i), _mm_packs_epi16(words, words));
    }
}

#endif
