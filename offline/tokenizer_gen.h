/* tokenizer_gen.h - write a small Kimi-style tokenizer for synthetic models.
 *
 * `k3 gen` needs tokenizer files in the real layout: a tiktoken.model with the
 * 256 single bytes plus BPE merges learned from a built-in multilingual text
 * (pre-tokenised with the same Kimi regex), and a tokenizer_config.json whose
 * added_tokens_decoder names the special tokens at the same offsets from
 * n_base as the real model (BOS +0, [EOS] +1, <|im_end|> +2, ...). */
#ifndef K3_TOKENIZER_GEN_H
#define K3_TOKENIZER_GEN_H

#include <stddef.h>

/* Learn n_base - 256 merges and write DIR/tiktoken.model and
 * DIR/tokenizer_config.json. Returns 0, or -1 with err set. n_base >= 256. */
int k3_tokenizer_generate(const char *dir, int n_base, k3_error *err);

/* The same, learning the merges from text[0..text_len) instead of the
 * built-in text (tools/train_demo.py: the demo model's corpus). */
int k3_tokenizer_generate_from(const char *dir, int n_base, const char *text, size_t text_len, k3_error *err);

#endif
