/* config_peek.c - a model's config from its path, whatever the format (a
 * folder with config.json, a packed folder, a GGUF file or split set), for
 * model open and for callers that need facts before opening a model
 * (k3.h: k3_model_peek_vocab, and k3_model_peek_type: the weights' type from
 * the tensor headers or the GGUF's file type). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "forward.h"
#include "gguf_checkpoint.h"
#include "k3.h"
#include "k3_util.h"
#include "weights_type.h"

_Static_assert(K3_EVAL_CHUNK_TOKENS == K3_CHUNK_TOKENS, "k3.h's chunk size is the forward pass's");

int k3_model_config_load(const char *path, k3_config *c, uint64_t *config_hash, k3_error *err)
{
    if (config_hash) *config_hash = K3_FNV_INIT;
    if (gguf_is_model_path(path)) {
        gguf_file g;
        if (gguf_open(&g, path, err)) return -1;
        int rc = gguf_checkpoint_config(&g, c, err);
        if (!rc && config_hash) {                 /* the metadata is part of the header the content hash reads */
            const char *ftype = gguf_file_type_name(&g);
            *config_hash = k3_fnv1a64(K3_FNV_INIT, ftype, strlen(ftype));
        }
        gguf_close(&g);
        return rc;
    }
    char file[4200];
    snprintf(file, sizeof file, "%s/config.json", path);
    if (k3_config_load(c, file, err)) return -1;
    char *text = NULL;
    size_t len = 0;
    if (config_hash && k3_read_file(file, K3_MAX_CONFIG_BYTES, &text, &len, NULL) == 0)
        *config_hash = k3_fnv1a64(K3_FNV_INIT, text, len);
    free(text);
    return 0;
}

int k3_model_path_is_gguf(const char *path) { return gguf_is_model_path(path); }

int k3_model_peek_gguf(const char *path, k3_model_info *out, k3_error *err)
{
    memset(out, 0, sizeof *out);
    gguf_file g;
    if (gguf_open(&g, path, err)) return -1;
    k3_config c;
    int rc = gguf_checkpoint_config(&g, &c, err);
    if (!rc) {
        snprintf(out->model_type, sizeof out->model_type, "%s", c.model_type);
        out->vocab_size = c.vocab_size;
        out->hidden = c.hidden;
        out->n_layers = c.n_layers;
        out->n_kda_layers = k3_config_count_attn(&c, K3_ATTN_KDA);
        out->n_mla_layers = k3_config_count_attn(&c, K3_ATTN_MLA);
        out->n_experts = c.n_experts;
        out->top_k = c.top_k;
        out->bos_id = c.bos_id;
        snprintf(out->dtype, sizeof out->dtype, "%s", c.dtype);
        snprintf(out->type_label, sizeof out->type_label, "%s", gguf_file_type_name(&g));
        for (int i = 0; i < g.n_parts; i++) out->weight_bytes += g.parts[i].file_bytes;
    }
    gguf_close(&g);
    return rc;
}

/* A caller that allocates before k3_model_open (so the plan, which counts
 * the process's memory when it is made, includes the buffer) needs the
 * vocabulary size first; the config is small, reading it is cheap. */
int k3_model_peek_vocab(const char *dir, int *vocab_size, k3_error *err)
{
    k3_config c;
    if (k3_model_config_load(dir, &c, NULL, err)) return -1;
    *vocab_size = c.vocab_size;
    return 0;
}

/* `k3 models` lists what it finds without loading anything: the type comes
 * from the shards' headers (or the packed manifest), as the store names it
 * at open, or is a GGUF's own file type. */
int k3_model_peek_type(const char *dir, char *out, size_t cap, k3_error *err)
{
    if (!gguf_is_model_path(dir)) return weights_peek_type_label(dir, out, cap, err);
    gguf_file g;
    if (gguf_open(&g, dir, err)) return -1;
    snprintf(out, cap, "%s", gguf_file_type_name(&g));
    gguf_close(&g);
    return 0;
}
