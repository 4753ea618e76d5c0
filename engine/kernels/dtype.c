/* dtype.c - sizes and safetensors names of the element types in dtype.h. */
#include <string.h>
#include "dtype.h"

/* One row per enum value, in enum order, so name and size cannot drift apart. */
static const struct {
    const char *safetensors_name;
    size_t size_bytes;
} dtype_table[K3_DT_COUNT] = {
    [K3_DT_F32]     = {"F32", 4},
    [K3_DT_F16]     = {"F16", 2},
    [K3_DT_BF16]    = {"BF16", 2},
    [K3_DT_F8_E4M3] = {"F8_E4M3", 1},
    [K3_DT_U8]      = {"U8", 1},
    [K3_DT_I8]      = {"I8", 1},
    [K3_DT_I32]     = {"I32", 4},
    [K3_DT_I64]     = {"I64", 8},
    [K3_DT_F64]     = {"F64", 8},
    [K3_DT_F8_E5M2] = {"F8_E5M2", 1},
    [K3_DT_F8_E8M0] = {"F8_E8M0", 1},
    [K3_DT_I16]     = {"I16", 2},
    [K3_DT_U16]     = {"U16", 2},
    [K3_DT_U32]     = {"U32", 4},
    [K3_DT_U64]     = {"U64", 8},
    [K3_DT_BOOL]    = {"BOOL", 1},
};

/* Element size in bytes; 0 for an out-of-range value so callers computing
 * tensor sizes from a corrupt header get an obviously wrong size, not UB. */
size_t k3_dtype_size(k3_dtype dt)
{
    if ((unsigned)dt >= K3_DT_COUNT)
        return 0;
    return dtype_table[dt].size_bytes;
}

/* The safetensors header spelling, for error messages and writers. */
const char *k3_dtype_name(k3_dtype dt)
{
    if (dt == K3_DT_MXFP4)
        return "MXFP4";
    if (dt == K3_DT_GGML)
        return "GGML";
    if (dt == K3_DT_OPAQUE)
        return "unknown";
    if ((unsigned)dt >= K3_DT_COUNT)
        return "?";
    return dtype_table[dt].safetensors_name;
}

/* Inverse of k3_dtype_name: the reader maps header strings to the enum here. */
int k3_dtype_parse(const char *name, k3_dtype *out)
{
    if (!name)
        return -1;
    for (int i = 0; i < K3_DT_COUNT; i++) {
        if (!strcmp(name, dtype_table[i].safetensors_name)) {
            if (out)
                *out = (k3_dtype)i;
            return 0;
        }
    }
    return -1;
}
