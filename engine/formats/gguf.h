/* gguf.h - read the header of a GGUF file (llama.cpp's model format): its
 * metadata key/values and its tensor index, one file or a split set.
 *
 * A GGUF file (docs/MODEL.md, "GGUF") is: "GGUF", a u32 version (2 or 3), a
 * u64 tensor count, a u64 key/value count, the key/values (a string key, a
 * u32 value type, the value), the tensor infos (a string name, a u32 number
 * of dimensions, that many u64 dimensions innermost first, a u32 ggml type,
 * a u64 offset into the data section), padding to general.alignment (32
 * unless the metadata says otherwise), then the data section. Strings are a
 * u64 byte count and the bytes; all numbers are little-endian.
 *
 * Everything read from the file is bounded before it is used or allocated:
 * each count against the bytes left in the file, string and array lengths,
 * nesting depth, dimensions against overflow, each tensor's type (one k3
 * reads), its first dimension a whole number of blocks, its offset aligned,
 * its bytes inside the file and clear of the other tensors, its name unique.
 * Any violation is one line naming the file. Only the header is read here;
 * tensor bytes are for a later pread. */
#ifndef K3_GGUF_H
#define K3_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include "k3_error.h"
#include "quant_types.h"
#include "strtab.h"

#define GGUF_MAX_DIMS 4                    /* ggml's GGML_MAX_DIMS */
#define GGUF_MAX_NAME_BYTES 63             /* ggml's GGML_MAX_NAME - 1 */
#define GGUF_MAX_KEY_BYTES 1024
#define GGUF_MAX_ARRAY_DEPTH 4             /* arrays of arrays of ... */
#define GGUF_MAX_HEADER_BYTES (128ull << 20)   /* real ones: 6-10 MB, mostly the vocabulary */
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_SPLIT_PARTS 9999

/* The metadata value types (the file's u32 codes). */
typedef enum {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10,
    GGUF_I64 = 11, GGUF_F64 = 12, GGUF_VALUE_TYPE_COUNT = 13
} gguf_value_type;

/* One key/value. Its bytes stay in the part's header buffer: `value` points
 * at the value as stored (for a string: its bytes after the length; for an
 * array: its first element). */
typedef struct gguf_kv {
    const char *key;            /* NUL-terminated copy */
    gguf_value_type type;
    gguf_value_type array_type; /* element type when type == GGUF_ARRAY */
    uint64_t count;             /* array elements, string bytes, else 1 */
    const uint8_t *value;
    uint64_t *string_offsets;   /* array of strings: each element's offset from value */
    uint64_t header_at, header_bytes;   /* the whole entry (key, type, value) in its part's header */
} gguf_kv;

typedef struct gguf_tensor {
    char *name;
    const k3_quant_type *type;
    int n_dims;
    int64_t dims[GGUF_MAX_DIMS];   /* ggml order: dims[0] is the row (innermost) */
    uint64_t file_offset;          /* absolute, in its part */
    uint64_t bytes;
    int part;
} gguf_tensor;

/* One file of a set, its header parsed. */
typedef struct gguf_part {
    char *path;
    int fd;                     /* -1 when parsed from memory */
    uint64_t file_bytes;
    uint32_t version;
    uint8_t *header;            /* the file's first header_bytes bytes */
    uint64_t header_bytes;
    gguf_kv *kvs;
    int64_t n_kvs;
    int64_t n_tensors;          /* this part's tensors */
    uint32_t alignment;
    uint64_t data_start;
} gguf_part;

typedef struct gguf_file {
    gguf_part *parts;           /* in split order; parts[0] holds the model's metadata */
    int n_parts;
    gguf_tensor *tensors;       /* every part's, in file order */
    int64_t n_tensors;
    k3_strtab by_name;
} gguf_file;

/* Parse one part's header from buf, the first len bytes of a file of
 * file_bytes bytes. Fills part (its kvs, alignment, data start) and appends
 * its tensors to *tensors / *n (realloc'd), numbered `part_no`. Returns 0;
 * 1 when buf ends inside the header but the file goes on (read more and
 * call again); -1 with err naming `what`. The header bytes stay owned by the
 * caller until the part is freed (part->header is set to NULL here).
 * Used by gguf_open and directly by the fuzzer. */
int gguf_parse(const uint8_t *buf, size_t len, uint64_t file_bytes, int part_no, const char *what,
               gguf_part *part, gguf_tensor **tensors, int64_t *n, k3_error *err);

/* Open path: a .gguf file, any part of a split set
 * (PREFIX-00001-of-00003.gguf: every part is opened and checked), or a
 * folder holding one file or one split set. */
int gguf_open(gguf_file *g, const char *path, k3_error *err);
void gguf_close(gguf_file *g);
/* Free what gguf_parse filled in one part (not the header buffer). */
void gguf_part_free_kvs(gguf_part *part);

const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name);
/* Build g->by_name over g->tensors (gguf_open's step; the fuzzer builds a
 * one-part file by hand). Refuses a tensor name given twice. */
int gguf_file_build_lookup(gguf_file *g, k3_error *err);
/* The key/value of parts[0] with this key, or NULL. */
const gguf_kv *gguf_find_kv(const gguf_file *g, const char *key);
const gguf_kv *gguf_part_find_kv(const gguf_part *part, const char *key);

/* Typed getters on a kv: 0, or -1 when its type differs (unsigned getters
 * accept any unsigned integer type that fits; gguf_kv_int any integer). */
int gguf_kv_uint(const gguf_kv *kv, uint64_t *out);
int gguf_kv_int(const gguf_kv *kv, int64_t *out);
int gguf_kv_f64(const gguf_kv *kv, double *out);    /* F32 or F64 */
int gguf_kv_string(const gguf_kv *kv, const char **s, size_t *len);
/* Element i of an array of strings. */
int gguf_kv_array_string(const gguf_kv *kv, uint64_t i, const char **s, size_t *len);
/* Element i of an array of numbers, as double (any numeric element type). */
int gguf_kv_array_number(const gguf_kv *kv, uint64_t i, double *out);

/* The name of a value type ("u32", "string", "array"); "?" if out of range. */
const char *gguf_value_type_name(uint32_t t);

/* 1 if name is PREFIX-NNNNN-of-MMMMM.gguf (the split naming of llama.cpp's
 * gguf-split); then *part_no (1-based), *n_parts and *prefix_len are set. */
int gguf_split_name(const char *name, int *part_no, int *n_parts, size_t *prefix_len);

#endif
