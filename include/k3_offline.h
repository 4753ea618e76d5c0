/* k3_offline.h - the offline tools' public interface: writing synthetic
 * checkpoints (`k3 gen`) and converting a Hugging Face checkpoint into the
 * packed streaming layout (`k3 pack`). None of this runs during a chat; it
 * lives in offline/ (its own library) and the command line reaches it only
 * through this header. */
#ifndef K3_OFFLINE_H
#define K3_OFFLINE_H
/* Packing: convert a Hugging Face checkpoint into the packed layout (`k3 pack`).
 *
 * The packed directory (docs/ARCHITECTURE.md, "The packed layout", manifest.h) is what the streaming runtime
 * reads from disk: one 4 KiB-aligned run per layer in trunk.bin, one
 * fixed-size page per routed expert in experts.bin, embedding rows readable
 * one at a time in embed.bin, the final norm and lm_head in head.bin.
 *
 * Packing streams shard by shard through one fixed copy buffer: every output
 * offset is computed up front from the shard headers, output files are
 * preallocated, and tensors are copied source-sequentially with pread/pwrite
 * to their final offsets. Work happens in DST.partial/; the manifest is
 * written last, after the files are fsync'd and re-read (checksums compared
 * with what was computed while writing, a sample of tensors compared with the
 * source); only then is DST.partial renamed to DST. An interrupted run thus
 * never leaves a directory that loads, and a re-run starts clean. */

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include "k3_error.h"

#define K3_PACK_DEFAULT_BUFFER (64u << 20)

/* Called from the packing thread: phase is "copy" or "verify"; done/total in bytes. */
typedef void (*k3_pack_progress_fn)(void *user, const char *phase, uint64_t done, uint64_t total);

typedef struct k3_pack_opts {
    int force;                       /* replace an existing packed DST */
    size_t buffer_bytes;             /* the copy buffer: the bulk of peak memory */
    double throttle_mb_s;            /* 0 = unlimited; limits the copy rate */
    int64_t simulate_free_bytes;     /* TEST ONLY: free space to assume; -1 = ask statvfs */
    int sample_tensors;              /* tensors compared byte for byte with the source */
    k3_pack_progress_fn progress;    /* NULL = silent */
    void *progress_user;
    volatile sig_atomic_t *cancel;   /* set to nonzero to stop (DST.partial is removed) */
    const char *trunk_type;          /* --trunk: "Q8_0", "Q4_K", ... for the layers' matrices; NULL = as stored */
    const char *experts_type;        /* --experts: the same for the routed experts' (K3's MXFP4 ones too) */
} k3_pack_opts;

typedef struct k3_pack_result {
    int n_tensors;                   /* packed */
    int n_skipped;                   /* vision_tower.* / mm_projector.* */
    int n_layers, n_layers_moe, n_pages;
    uint64_t page_bytes;
    uint64_t tensor_bytes;           /* bytes copied from the source */
    uint64_t out_bytes;              /* sum of the four .bin files */
    double copy_s, verify_s, total_s;
    int sampled;                     /* tensors compared with the source */
    int removed_stale;               /* a stale DST.partial was removed first */
    uint64_t fingerprint;
    size_t peak_bytes_estimate;      /* buffer + tables */
    int n_quantized;                 /* matrices written in a block type (--trunk, --experts) */
    int n_quantized_experts;         /* of those, routed experts' */
    int n_fallback;                  /* of those, rows not whole blocks of the asked type: Q5_0 / Q8_0 */
    int n_kept;                      /* matrices left as stored: rows not whole 32-weight blocks */
} k3_pack_result;

void k3_pack_default_opts(k3_pack_opts *o);

/* 0 when name is a block type `k3 pack --trunk/--experts` writes (Q8_0,
 * Q4_0, Q5_0, Q4_K, Q5_K, Q6_K, MXFP4); else -1 with err saying so and
 * listing them. */
int k3_pack_quant_type_check(const char *name, k3_error *err);

/* Pack src (HF checkpoint dir) into dst. 0, or -1 with err set; on failure
 * or cancel nothing named dst is created or changed (DST.partial is removed). */
int k3_pack(const char *src, const char *dst, const k3_pack_opts *o, k3_pack_result *res, k3_error *err);

/* The scratch of --trunk / --experts: source rows as fp32 and their blocks,
 * this many bytes each, besides the copy buffer. */
#define K3_PACK_QUANT_BUFFER ((size_t)16 << 20)

/* Approximate bytes of table memory per source tensor: the source index, the
 * layout plan, and the manifest re-loaded for the final self-check (measured:
 * ~450 B; ~600 B with a model.safetensors.index.json, which the shared
 * safetensors reader holds as a JSON tree while it opens the shards). */
#define K3_PACK_BYTES_PER_TENSOR 600u


/* What `k3 pack --check DIR` reports after a full verification. */
typedef struct k3_pack_check_result {
    int n_tensors, n_layers, n_pages;
    uint64_t page_bytes;
} k3_pack_check_result;

/* Load DIR's manifest (every bounds check the runtime makes) and re-verify
 * every file checksum. 0, or -1 with err set. */
int k3_pack_check(const char *dir, k3_pack_check_result *out, k3_error *err);

/* ---- synthetic checkpoints (`k3 gen`) ------------------------------------ */

typedef struct k3_gen_opts {
    const char *preset;      /* tiny, small, demo, k3-tiny, k3-sim, k3-16g, k3-real-widths, kl-4g */
    uint64_t seed;
    int f32;                 /* big matrices in F32 instead of BF16 */
    int shards;              /* 1..64 */
} k3_gen_opts;

typedef struct k3_gen_result {
    uint64_t weight_bytes;   /* bytes of all tensors written */
} k3_gen_result;

/* The preset names, comma-separated, for messages. */
const char *k3_gen_preset_names(void);
/* 1 if name is a preset. */
int k3_gen_preset_exists(const char *name);

/* Write a synthetic checkpoint in the Hugging Face layout into dir (created
 * with its parents). 0, or -1 with err set. */
int k3_gen_model(const char *dir, const k3_gen_opts *o, k3_gen_result *res, k3_error *err);

/* Write only a Kimi K3 tokenizer (tiktoken.model, tokenizer_config.json)
 * into dir, with n_base - 256 BPE merges learned from the text of
 * corpus_path (at most 1 GiB). 0, or -1 with err set. */
int k3_gen_tokenizer(const char *dir, int n_base, const char *corpus_path, k3_error *err);

#endif
