/* gguf_vocab.h - k3's tokenizer from a GGUF's vocabulary (docs/MODEL.md,
 * "The vocabulary in a GGUF").
 *
 * llama.cpp's converter writes a Kimi tiktoken vocabulary as
 * tokenizer.ggml.model "gpt2", tokenizer.ggml.pre "kimi-k2", the tokens in
 * id order (base tokens in GPT-2's byte spelling, specials by name), their
 * types and the merges rebuilt from the ranks. This reads those keys
 * through gguf.h's bounded getters, checks that the ids are tiktoken ranks,
 * and builds the same tokenizer as tiktoken.model + tokenizer_config.json
 * would (engine/text/tokenizer_build.h). Anything k3 could not tokenize
 * exactly as the file's model was trained is refused with one line. */
#ifndef K3_GGUF_VOCAB_H
#define K3_GGUF_VOCAB_H

#include "gguf.h"
#include "k3_error.h"
#include "k3_tokenizer.h"

/* The tokenizer of an open GGUF (its first part's metadata); `what` names
 * the file in messages. NULL with err set when the file has no vocabulary
 * or one k3 cannot reproduce. */
k3_tokenizer *gguf_tokenizer_open(const gguf_file *g, const char *what, k3_error *err);
/* The same from one parsed part (the fuzzer's entry). */
k3_tokenizer *gguf_tokenizer_from_part(const gguf_part *part, const char *what, k3_error *err);

#endif
