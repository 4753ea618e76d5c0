/* manifest.h - read the manifest.json and tables.bin of a packed model
 * directory (`k3 pack`).
 *
 * A packed directory (docs/ARCHITECTURE.md, "The packed layout") holds
 * trunk.bin, experts.bin, embed.bin, head.bin, tables.bin and manifest.json,
 * which is written last. manifest.json is small whatever the model's size:
 * format and version, the source, the model's config, the embedding and head,
 * the four files' sizes and checksums, and the size, checksum and dtype names
 * of tables.bin. tables.bin holds the per-unit tables in fixed-size
 * little-endian records: every tensor's file, absolute offset, size, dtype and
 * shape, the 4 KiB-aligned per-layer trunk runs, and one fixed-size 4 KiB-
 * aligned page per routed expert (layout below). For the real K3 (93 layers x
 * 896 experts, ~500,000 tensors) the manifest stays a few KiB and the tables
 * are read straight into the compact arrays below: no JSON tree the size of
 * the model is ever built (docs/PERFORMANCE.md, "Manifest").
 *
 * k3_manifest_load checks everything before anything is used: the tables'
 * size, version and checksum, the four files exist with the recorded sizes,
 * every dtype name is known (a GGUF block type such as "Q8_0" or "Q4_K" only
 * in a version 3 manifest, with each row a whole number of blocks),
 * every tensor lies inside its file (and inside its layer run or expert page),
 * pages and runs are aligned and do not overlap, sizes match dtype x shape.
 * Any failure is one line naming the file and the problem. A directory packed
 * with format version 1 (tables inside manifest.json) is refused with one line
 * saying to re-pack it. */
#ifndef K3_MANIFEST_H
#define K3_MANIFEST_H

#include <stddef.h>
#include <stdint.h>
#include "dtype.h"
#include "quant_types.h"
#include "k3.h"
#include "strtab.h"

#define K3_PACK_FORMAT "k3-packed"
#define K3_PACK_VERSION 3            /* 1: the tables were inside manifest.json; 3: block types */
#define K3_PACK_VERSION_PLAIN 2      /* what a pack without block types is written as */
#define K3_PACK_ALIGN 4096u          /* runs, pages, file sizes */
#define K3_PACK_TENSOR_ALIGN 64u     /* every tensor's offset */
#define K3_MANIFEST_MAX_DIMS 8

typedef enum { K3_PK_TRUNK = 0, K3_PK_EXPERTS, K3_PK_EMBED, K3_PK_HEAD, K3_PK_NFILES } k3_pk_file;

/* tables.bin, all integers little-endian:
 *   header (64 bytes): magic "K3TABLES", u32 version (1), u32 header bytes
 *     (64), u32 n_tensors, u32 n_layers, u32 n_pages, u32 tensor record bytes
 *     (88), u64 names bytes, u64 FNV-1a 64 of everything after the header,
 *     16 zero bytes;
 *   n_tensors records of 88 bytes: u64 offset, u64 bytes, i64 shape[8] (unused
 *     dimensions 0), u8 dtype (an index into manifest.json's tables.dtypes),
 *     u8 ndim, u8 file (a k3_pk_file), 5 zero bytes;
 *   n_layers records of 16 bytes: u64 trunk_offset, u64 trunk_bytes;
 *   n_pages records of 16 bytes: u32 layer, u32 expert, u64 offset;
 *   the names: n_tensors NUL-terminated strings in tensor order.
 * The file is exactly that long; manifest.json records its size and checksum,
 * so tables.bin from another pack is refused. */
#define K3_TABLES_FILE "tables.bin"
#define K3_TABLES_MAGIC "K3TABLES"
#define K3_TABLES_VERSION 1u
#define K3_TABLES_HEADER_BYTES 64u
#define K3_TABLES_TENSOR_BYTES 88u
#define K3_TABLES_LAYER_BYTES 16u
#define K3_TABLES_PAGE_BYTES 16u
#define K3_TABLES_MAX_DTYPES 32

/* One routed expert's page in experts.bin. */
typedef struct k3_manifest_page { int32_t layer, expert; uint64_t offset; } k3_manifest_page;

typedef struct k3_manifest_tensor {
    const char *name;
    uint64_t offset;                 /* absolute, in its file */
    uint64_t bytes;
    int64_t shape[K3_MANIFEST_MAX_DIMS];
    int32_t layer;                   /* trunk and expert tensors: the layer; else -1 */
    int32_t expert;                  /* expert tensors: the expert id; else -1 */
    k3_dtype dtype;
    const k3_quant_type *qtype;      /* dtype K3_DT_GGML: which block type; else NULL */
    uint8_t ndim;
    uint8_t file;                    /* k3_pk_file */
} k3_manifest_tensor;

typedef struct k3_manifest_layer {
    uint64_t trunk_offset;           /* in trunk.bin, 4 KiB aligned */
    uint64_t trunk_bytes;            /* padded run length, a multiple of 4 KiB */
    int n_experts;                   /* routed expert pages of this layer; 0 = dense */
} k3_manifest_layer;

typedef struct k3_manifest {
    char *dir;
    uint64_t fingerprint;            /* source.fingerprint */
    char *config_json;               /* the "config" object, verbatim text */
    size_t config_len;

    int n_tensors;
    k3_manifest_tensor *tensors;     /* in manifest order */

    int n_layers;
    k3_manifest_layer *layers;

    uint64_t page_bytes;             /* every expert page; 0 if no experts */
    int n_layers_moe;
    int n_experts;                   /* experts per MoE layer (max over layers) */
    int n_pages;
    int *moe_row;                    /* per layer: its row of page_offsets, -1 = dense */
    uint64_t *page_offsets;          /* [n_layers_moe][n_experts]: one entry per page */

    const k3_manifest_tensor *embed; /* embed.bin, row r at r * embed_row_bytes */
    uint64_t embed_row_bytes;
    int64_t embed_rows;
    k3_dtype embed_dtype;
    const struct k3_quant_type *embed_qtype;   /* K3_DT_GGML: the table's block type, else NULL */
    const k3_manifest_tensor *final_norm;
    const k3_manifest_tensor *lm_head;   /* the embedding itself when tied */
    int tied;

    uint64_t file_bytes[K3_PK_NFILES];
    uint64_t checksum[K3_PK_NFILES];     /* FNV-1a 64 of each whole file */

    /* private */
    char *names_;
    k3_strtab by_name_;              /* tensor name -> index */
} k3_manifest;

/* Parse and check DIR/manifest.json and the files it names. 0, or -1 with
 * err naming the file and the problem (out is then empty). */
int k3_manifest_load(const char *dir, k3_manifest *out, k3_error *err);
void k3_manifest_free(k3_manifest *m);

/* Tensor by its source name (names are unchanged by packing); NULL if absent. */
const k3_manifest_tensor *k3_manifest_find(const k3_manifest *m, const char *name);

/* Layer's trunk run in trunk.bin. 0, or -1 if layer is out of range. */
int k3_manifest_layer_extent(const k3_manifest *m, int layer, uint64_t *offset, uint64_t *bytes);

/* Offset of the page of (layer, expert) in experts.bin (page_bytes long),
 * or -1 if there is none (dense layer, id out of range). */
int64_t k3_manifest_expert_page(const k3_manifest *m, int layer, int expert);

/* "trunk.bin", "experts.bin", ... */
const char *k3_pk_file_name(k3_pk_file f);

/* DIR/NAME of a packed file into buf. */
void k3_manifest_path(const k3_manifest *m, k3_pk_file f, char *buf, size_t len);

/* Re-read the four files and compare their FNV-1a 64 with the manifest
 * (slow: reads everything). buf/len is scratch space (NULL = 8 MiB malloc'd). */
int k3_manifest_verify_checksums(const k3_manifest *m, void *buf, size_t len, k3_error *err);

/* 1 if dir is a finished packed directory: not named *.partial, with a
 * manifest.json whose "format" is "k3-packed" and "version" is one this or an
 * earlier build wrote (cheap: the full checks, and the refusal of an old
 * version with the advice to re-pack, are k3_manifest_load's). 0 otherwise. */
int k3_is_packed_dir(const char *dir);


#endif
