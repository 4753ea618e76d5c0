/* safetensors_write.h - write one .safetensors shard.
 *
 * Used by `k3 gen` (synthetic checkpoints) and later by `k3 pack`. The
 * header is JSON with "__metadata__" {"format": "pt"}, padded with spaces
 * to a multiple of 8 bytes as the reference writer does; tensor data follow
 * in the order given, each produced by a callback so nothing large is held
 * in memory. The file is written to PATH.tmp and renamed into place, so an
 * interrupted write never leaves a valid-looking shard. */
#ifndef K3_SAFETENSORS_WRITE_H
#define K3_SAFETENSORS_WRITE_H

#include <stdint.h>
#include "dtype.h"
#include "k3_error.h"

typedef struct st_out_tensor {
    char name[256];
    k3_dtype dtype;
    int ndim;
    int64_t shape[4];
} st_out_tensor;

/* Fill dst (the tensor's nbytes) for tensor index i. */
typedef void (*st_fill_fn)(void *user, int i, const st_out_tensor *t, void *dst);

int st_write_shard(const char *path, const st_out_tensor *tensors, int n, st_fill_fn fill,
                   void *user, k3_error *err);

uint64_t st_out_tensor_bytes(const st_out_tensor *t);

#endif
