/* safetensors.h - read the tensor index of a Hugging Face checkpoint.
 *
 * A checkpoint is one or many *.safetensors shards, optionally listed by
 * model.safetensors.index.json. Each shard is an 8-byte little-endian header
 * length, a JSON header {name: {dtype, shape, data_offsets}}, then the data.
 * Everything read from the file is bounds-checked before use: header length
 * against the file size, offsets against the data area, byte counts against
 * dtype x shape, and no two tensors may overlap. Only headers are read
 * here; the weight store reads tensor bytes with pread (weights_units.c). */
#ifndef K3_SAFETENSORS_H
#define K3_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "dtype.h"
#include "k3.h"
#include "strtab.h"

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER_BYTES (256u << 20)

typedef struct st_tensor {
    char *name;
    k3_dtype dtype;
    const struct k3_quant_type *qtype;  /* K3_DT_GGML: the GGUF block type (quant_types.h) */
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t file_offset;   /* absolute offset of the first byte in its shard */
    uint64_t nbytes;
    int shard;              /* index into st_index.shards */
} st_tensor;

typedef struct st_shard {
    char *path;
    int fd;
    uint64_t file_bytes;
    uint64_t header_bytes;  /* a GGUF part: the bytes before its data section; 0 = a safetensors shard */
} st_shard;

typedef struct st_index {
    st_shard *shards;
    int n_shards;
    st_tensor *tensors;
    int n_tensors;
    k3_strtab by_name;      /* tensor name -> index */
} st_index;

/* Parse one shard's header from its first bytes. `buf` holds the first
 * `len` bytes of a file of `file_bytes` bytes (len may be less than the file;
 * the header must fit in buf). Appends the tensors (shard number `shard`) to
 * *tensors / *n (realloc'd). `what` names the file in messages.
 * Used by st_index_open and directly by the fuzzer. */
int st_parse_header(const uint8_t *buf, size_t len, uint64_t file_bytes, int shard,
                    const char *what, st_tensor **tensors, int *n, k3_error *err);

/* Open every shard of the checkpoint in directory dir (index file if present,
 * else all *.safetensors in name order), read their headers and build the
 * name lookup. */
int st_index_open(st_index *ix, const char *dir, k3_error *err);
/* The same with the index's text given in memory instead of
 * DIR/model.safetensors.index.json (the fuzzer's entry; NULL = the file). */
int st_index_open_text(st_index *ix, const char *dir, const char *index_text, size_t index_len, k3_error *err);
void st_index_close(st_index *ix);

const st_tensor *st_find(const st_index *ix, const char *name);

/* 1 if a file name ends in ".safetensors" (a shard of a checkpoint). */
int st_is_shard_name(const char *name);

/* 1 if directory dir holds at least one *.safetensors file. */
int st_dir_has_shards(const char *dir);

/* Continue the FNV-1a 64 fingerprint h with one shard: its base name, its
 * size (8 bytes LE), its first 8 + header bytes, and four 4 KiB samples of
 * its data area (start, 1/3, 2/3, end), so two checkpoints with the same
 * layout but different weights differ. Shared by the weight provider and
 * `k3 pack` (a packed copy keeps its source's fingerprint). */
int st_shard_fingerprint(int fd, const char *path, uint64_t file_bytes, uint64_t *h, k3_error *err);
/* The same for a file whose header size is known (a GGUF part's
 * bytes before its data section): that header and four data samples. */
int st_file_fingerprint(int fd, const char *path, uint64_t file_bytes, uint64_t header_bytes, uint64_t *h,
                        k3_error *err);

/* (Re)build the name lookup of an index whose tensors were filled in by
 * other means (a packed manifest). Refuses duplicate names. */
int st_index_build_lookup(st_index *ix, k3_error *err);

/* Number of elements (product of the shape). */
int64_t st_tensor_numel(const st_tensor *t);

#endif
