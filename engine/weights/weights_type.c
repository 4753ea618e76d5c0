/* weights_type.c - the weights' type as people name a downloaded file's:
 * ollama's "quantization" and llama.cpp's "file type" ("BF16", "Q4_K_M").
 * A safetensors or packed checkpoint has no such field, so it is named from
 * its tensors: the dtype of most of the layer matrices' bytes, and the
 * routed experts' when theirs differs (Kimi K3: "BF16 + MXFP4 experts").
 * A file that names its own type (a GGUF's general.file_type, in
 * k3_weights.file_type) keeps that name instead (weights.c). */
#include "weights_type.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "manifest.h"
#include "weights_internal.h"

/* Slots of the tally: the dtypes, then MXFP4 (stored as U8 codes and
 * scales), then the GGUF block types of a `k3 pack --trunk/--experts` pack
 * (K3_DT_GGML; slot MXFP4_SLOT + 1 + the type's index in quant_types.c's
 * table, whose MXFP4 shares MXFP4_SLOT). */
#define MXFP4_SLOT K3_DT_COUNT
#define N_SLOTS (K3_DT_COUNT + 1 + 32)

/* Bytes per slot of the layers' trunk matrices and of their routed experts. */
typedef struct type_tally {
    uint64_t trunk[N_SLOTS], experts[N_SLOTS];
} type_tally;

/* The tally slot of a GGUF block type, or -1. */
static int block_type_slot(const k3_quant_type *q)
{
    if (!q) return -1;
    if (q->ggml_id == K3_GGML_MXFP4) return MXFP4_SLOT;
    for (int i = 0; i < k3_quant_type_count() && MXFP4_SLOT + 1 + i < N_SLOTS; i++)
        if (k3_quant_type_at(i) == q) return MXFP4_SLOT + 1 + i;
    return -1;
}

/* 1 if name ends with suffix. */
static int ends_with(const char *name, const char *suffix)
{
    size_t n = strlen(name), s = strlen(suffix);
    return n >= s && !strcmp(name + n - s, suffix);
}

/* Count one tensor: only matrices inside the language model's layers (the
 * vision tower, the embedding and the head are left out; llama.cpp names a
 * file by its layers' type too). A routed expert's name has ".experts."
 * (a shared expert's has "shared_experts."); MXFP4 is its "_packed" codes
 * and "_scale" exponents. */
static void tally_add(type_tally *t, const char *name, k3_dtype dtype, const k3_quant_type *qtype, int ndim,
                      uint64_t bytes)
{
    if (ndim < 2 || !strstr(name, ".layers.") || strstr(name, "vision")) return;
    const int expert = strstr(name, ".experts.") != NULL;
    int slot = dtype == K3_DT_GGML ? block_type_slot(qtype)
               : dtype == K3_DT_MXFP4 || (expert && (ends_with(name, "_packed") || ends_with(name, "_scale")))
                   ? MXFP4_SLOT
                   : (int)dtype;
    if (slot < 0 || slot >= N_SLOTS || (dtype != K3_DT_GGML && slot > MXFP4_SLOT))
        return;   /* an opaque type: not one to name */
    (expert ? t->experts : t->trunk)[slot] += bytes;
}

/* The slot holding the most bytes, or -1 when none has any. */
static int most_bytes(const uint64_t *bytes)
{
    int best = -1;
    for (int i = 0; i < N_SLOTS; i++)
        if (bytes[i] && (best < 0 || bytes[i] > bytes[best])) best = i;
    return best;
}

static const char *slot_name(int slot)
{
    if (slot > MXFP4_SLOT) return k3_quant_type_at(slot - MXFP4_SLOT - 1)->name;
    return slot == MXFP4_SLOT ? "MXFP4" : k3_dtype_name((k3_dtype)slot);
}

/* "BF16", "BF16 + MXFP4 experts", "" when there is no layer matrix. */
static void tally_label(const type_tally *t, char *out, size_t cap)
{
    const int trunk = most_bytes(t->trunk), experts = most_bytes(t->experts);
    if (trunk < 0 && experts < 0) snprintf(out, cap, "%s", "");
    else if (experts < 0 || experts == trunk) snprintf(out, cap, "%s", slot_name(trunk));
    else if (trunk < 0) snprintf(out, cap, "%s experts", slot_name(experts));
    else snprintf(out, cap, "%s + %s experts", slot_name(trunk), slot_name(experts));
}

void weights_index_type_label(const st_index *ix, char *out, size_t cap)
{
    type_tally t;
    memset(&t, 0, sizeof t);
    for (int i = 0; i < ix->n_tensors; i++) {
        const st_tensor *ts = &ix->tensors[i];
        tally_add(&t, ts->name, ts->dtype, ts->qtype, ts->ndim, ts->nbytes);
    }
    tally_label(&t, out, cap);
}

/* A directory with a manifest.json and no *.safetensors is meant to be a
 * packed model even when its manifest is empty, garbage or another version:
 * loading it as one says what is wrong with the manifest, where loading it
 * as a checkpoint would only say that no shards were found. */
int weights_dir_is_packed(const char *dir)
{
    if (k3_is_packed_dir(dir)) return 1;
    char path[4200];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    return access(path, F_OK) == 0 && !st_dir_has_shards(dir);
}

int weights_peek_type_label(const char *dir, char *out, size_t cap, k3_error *err)
{
    if (weights_dir_is_packed(dir)) {
        k3_manifest mf;
        if (k3_manifest_load(dir, &mf, err)) return -1;
        type_tally t;
        memset(&t, 0, sizeof t);
        for (int i = 0; i < mf.n_tensors; i++)
            tally_add(&t, mf.tensors[i].name, mf.tensors[i].dtype, mf.tensors[i].qtype, mf.tensors[i].ndim,
                      mf.tensors[i].bytes);
        tally_label(&t, out, cap);
        k3_manifest_free(&mf);
        return 0;
    }
    st_index ix;
    if (st_index_open(&ix, dir, err)) return -1;
    weights_index_type_label(&ix, out, cap);
    st_index_close(&ix);
    return 0;
}

const char *k3_weights_type_label(const k3_weights *w) { return w->type_label; }
