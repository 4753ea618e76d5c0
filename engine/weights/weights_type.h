/* weights_type.h - the weights' type in the words ollama and llama.cpp use
 * for a file's ("BF16", "F8_E4M3", "BF16 + MXFP4 experts"; a GGUF's own
 * file type such as "Q4_K_M"), for the chat's status line, /show, `k3
 * models` and the history (k3.h: k3_model_info.type_label). */
#ifndef K3_WEIGHTS_TYPE_H
#define K3_WEIGHTS_TYPE_H

#include <stddef.h>
#include "k3_error.h"
#include "safetensors.h"

#define K3_TYPE_LABEL_BYTES 48

/* The label of a checkpoint's tensors: the dtype that holds most of the
 * language model's layer matrices (vision tensors, the embedding and the
 * head left out), then the routed experts' when it differs. */
void weights_index_type_label(const st_index *ix, char *out, size_t cap);

/* A directory k3_weights_open reads as a packed one (a manifest and no
 * safetensors shards beside it). */
int weights_dir_is_packed(const char *dir);

/* The label of a model directory from its headers alone (HF shards or a
 * packed manifest; no weight is read): `k3 models`. 0, or -1 with err set. */
int weights_peek_type_label(const char *dir, char *out, size_t cap, k3_error *err);

#endif
