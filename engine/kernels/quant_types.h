/* quant_types.h - the block formats of GGUF files (llama.cpp's ggml types):
 * their sizes and a scalar reference dequantization of each.
 *
 * A ggml tensor row of n weights is n / block_elems blocks of block_bytes
 * bytes each, one block after the other; the block layouts are those of
 * llama.cpp's ggml-common.h and the values those of its dequantize_row_*
 * functions, restated in docs/MODEL.md ("GGUF"). The decoders below follow
 * the same fp32 operations in the same order, so each value is bit for bit
 * what llama.cpp computes (the build keeps -std=c11, so no multiply-add is
 * contracted into an FMA). tests/ref/gguf_np.py is the independent numpy
 * reference they are tested against. */
#ifndef K3_QUANT_TYPES_H
#define K3_QUANT_TYPES_H

#include <stddef.h>
#include <stdint.h>

/* The ggml type ids (the enum ggml_type of llama.cpp) of the types k3 reads. The
 * numbers are part of the file format. */
enum {
    K3_GGML_F32 = 0,
    K3_GGML_F16 = 1,
    K3_GGML_Q4_0 = 2,
    K3_GGML_Q4_1 = 3,
    K3_GGML_Q5_0 = 6,
    K3_GGML_Q5_1 = 7,
    K3_GGML_Q8_0 = 8,
    K3_GGML_Q2_K = 10,
    K3_GGML_Q3_K = 11,
    K3_GGML_Q4_K = 12,
    K3_GGML_Q5_K = 13,
    K3_GGML_Q6_K = 14,
    K3_GGML_IQ2_XXS = 16,
    K3_GGML_IQ2_XS = 17,
    K3_GGML_IQ3_XXS = 18,
    K3_GGML_IQ1_S = 19,
    K3_GGML_IQ4_NL = 20,
    K3_GGML_IQ3_S = 21,
    K3_GGML_IQ2_S = 22,
    K3_GGML_IQ4_XS = 23,
    K3_GGML_IQ1_M = 29,
    K3_GGML_BF16 = 30,
    K3_GGML_MXFP4 = 39
};

/* Decode n_blocks consecutive blocks into n_blocks * block_elems floats. */
typedef void (*k3_quant_decode_fn)(const uint8_t *blocks, int64_t n_blocks, float *out);

typedef struct k3_quant_type {
    const char *name;             /* llama.cpp's spelling: "Q4_K", "BF16" */
    uint32_t ggml_id;             /* K3_GGML_* */
    uint32_t block_elems;         /* weights per block (1 for F32/F16/BF16) */
    uint32_t block_bytes;         /* bytes per block */
    k3_quant_decode_fn decode_scalar;
} k3_quant_type;

/* The type with this ggml id, or NULL when k3 does not read it. */
const k3_quant_type *k3_quant_type_by_id(uint32_t ggml_id);

/* The type named name ("Q8_0", case-sensitive), or NULL. */
const k3_quant_type *k3_quant_type_by_name(const char *name);

/* llama.cpp's name of any ggml type id, known to k3 or not ("IQ2_XXS"), so
 * that a refusal can say which type a file holds; NULL for an id ggml never
 * had. */
const char *k3_ggml_type_name(uint32_t ggml_id);

/* Every type k3 reads, in table order: the count, and entry i. */
int k3_quant_type_count(void);
const k3_quant_type *k3_quant_type_at(int i);

/* Bytes of n_elems weights of type t (n_elems a multiple of block_elems):
 * 0 and the count in *bytes, or -1 when n_elems is not a whole number of
 * blocks or the byte count would not fit in 63 bits. */
int k3_quant_bytes(const k3_quant_type *t, uint64_t n_elems, uint64_t *bytes);

/* Decode n_elems weights (a multiple of t->block_elems) starting at src. */
void k3_quant_decode_scalar(const k3_quant_type *t, const void *src, int64_t n_elems, float *out);

/* E8M0 byte x -> 2^(x - 128) as llama.cpp's MXFP4 scale (half the E8M0
 * value, because its E2M1 table holds the doubled values 0..12); exact, with
 * x = 0 and 1 the subnormals 2^-128 and 2^-127. */
float k3_e8m0_half_to_f32(uint8_t x);

#endif
