/* gguf_checkpoint.h - a GGUF file (gguf.h) as a checkpoint the weight store
 * loads: its config, written from the metadata and the tensor shapes, and
 * its tensors under the Hugging Face names the store already asks for.
 *
 * docs/MODEL.md ("Kimi Linear in a GGUF", "Kimi K3 in a GGUF") is the
 * mapping. The config is written as config.json text and read by the same
 * parser as a real config.json (config.c), so one set of checks holds for
 * both. Each routed expert's matrix is a slab of its layer's stacked tensor
 * and becomes a tensor of its own (the store reads an expert's three slabs).
 * Two tensors keep a GGUF form the store knows: MLA's kv_b split in k_b
 * (each head's nope block transposed) and v_b, and KDA's decay stored as
 * -exp(A_log) ("ssm_a"). */
#ifndef K3_GGUF_CHECKPOINT_H
#define K3_GGUF_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include "config.h"
#include "gguf.h"
#include "safetensors.h"

/* 1 if path is a GGUF model: a file ending in .gguf, or a folder without a
 * config.json holding one .gguf file or one split set whose header opens. */
int gguf_is_model_path(const char *path);

/* The folder a model's side files (tiktoken.model) sit in: the path, or a
 * .gguf file's folder. */
void gguf_model_folder(const char *path, char *out, size_t len);

/* The model's config from the file's metadata and tensor shapes. 0, or -1
 * with err naming the file and what is missing or wrong. */
int gguf_checkpoint_config(const gguf_file *g, k3_config *c, k3_error *err);

/* The same config as config.json text (malloc'd), for k3 pack, which
 * writes it beside a pack of the file. */
int gguf_checkpoint_config_text(const gguf_file *g, char **text, k3_error *err);

/* Write a GGUF holding only the file's vocabulary: general.architecture and
 * every tokenizer.* key, byte for byte, and no tensors (k3 pack of a GGUF
 * keeps it as tokenizer.gguf, which k3 reads as the file's own). */
int gguf_write_vocab_file(const gguf_file *g, const char *path, k3_error *err);

/* The open file's tensors as an st_index under k3's names (cfg from
 * gguf_checkpoint_config: its tensor prefix). The index owns copies of the
 * names and the parts' paths (fd -1), and each part's header size for the
 * fingerprint. 0, or -1 with err. */
int gguf_checkpoint_index(const gguf_file *g, const k3_config *cfg, st_index *ix, k3_error *err);

/* The GGUF name of a tensor k3 asks for by its own name (prefix: the
 * config's tensor_prefix), for messages: "blk.3.attn_k_b.weight"; the name
 * itself when it has no GGUF counterpart. */
void gguf_checkpoint_name(const char *name, const char *prefix, char *out, size_t len);

/* llama.cpp's name of the file's type (general.file_type: "Q4_K_M",
 * "MXFP4_MOE", "BF16"), or "" when the file does not say. */
const char *gguf_file_type_name(const gguf_file *g);

#endif
