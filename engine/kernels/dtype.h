/* dtype.h - element types that can appear in a checkpoint, and their sizes.
 *
 * One enum shared by the safetensors reader, the loader and the kernels, so a
 * tensor's type travels from the file header to the dot product unchanged. */
#ifndef K3_DTYPE_H
#define K3_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    K3_DT_F32 = 0,
    K3_DT_F16,
    K3_DT_BF16,
    K3_DT_F8_E4M3,
    K3_DT_U8,
    K3_DT_I8,
    K3_DT_I32,
    K3_DT_I64,
    K3_DT_F64,
    K3_DT_F8_E5M2,
    K3_DT_F8_E8M0,
    K3_DT_I16,
    K3_DT_U16,
    K3_DT_U32,
    K3_DT_U64,
    K3_DT_BOOL,
    K3_DT_COUNT,
    /* A header dtype this engine does not know (a future or exotic type in a
     * tensor it never uses, e.g. in a vision tower): kept with its byte
     * range, refused only if a loader asks for it. */
    K3_DT_OPAQUE = 99,
    /* Not a safetensors element type: a weight format assembled from a
     * compressed-tensors pair (U8 weight_packed + U8 E8M0 weight_scale). */
    K3_DT_MXFP4 = 100,
    /* Not a safetensors element type: a GGUF block type (Q8_0, Q4_K, ...);
     * the tensor's or weight's `qtype` (quant_types.h) says which, and its
     * byte count comes from the blocks, not from an element size. */
    K3_DT_GGML = 101
} k3_dtype;

/* Bytes per element (all recognised types are whole bytes). */
size_t k3_dtype_size(k3_dtype dt);

/* The safetensors spelling ("F32", "BF16", ...), and its inverse.
 * k3_dtype_parse returns -1 for a name we do not recognise. */
const char *k3_dtype_name(k3_dtype dt);
int k3_dtype_parse(const char *name, k3_dtype *out);

#endif
