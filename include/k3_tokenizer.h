/* k3_tokenizer.h - Kimi tiktoken-style byte-level BPE tokenizer.
 *
 * Loads `tiktoken.model` (one "base64(bytes) rank" per line; rank = id) and
 * the special tokens from `tokenizer_config.json` (`added_tokens_decoder`),
 * pre-tokenises with the Kimi regex (docs/MODEL.md, "Tokenizer and chat format") and merges by
 * lowest rank. Special tokens occupy ids n_base .. n_base+257; unnamed slots
 * are "<|reserved_token_N|>" with N = id - n_base. */
#ifndef K3_TOKENIZER_H
#define K3_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include "k3_error.h"

typedef struct k3_tokenizer k3_tokenizer;

/* Load from a model directory (reads DIR/tiktoken.model and
 * DIR/tokenizer_config.json). On failure returns NULL and writes one line
 * naming the file and the problem into err. */
k3_tokenizer *k3_tokenizer_load(const char *dir, k3_error *err);
/* The same from the two files' bytes in memory (vocab = tiktoken.model,
 * config = tokenizer_config.json); dir only names them in messages. */
k3_tokenizer *k3_tokenizer_parse(const char *vocab, size_t vocab_len, const char *config,
                                 size_t config_len, const char *dir, k3_error *err);
/* Replace t's special-token table with one parsed from tokenizer_config.json
 * bytes (the second half of k3_tokenizer_parse; the fuzzer runs it alone on
 * a vocabulary parsed once). 0, or -1 with err set and t left unusable
 * (free it). */
int k3_tokenizer_parse_specials(k3_tokenizer *t, const char *config, size_t config_len, const char *dir,
                                k3_error *err);
/* The vocabulary a GGUF carries (path: a .gguf file, a split set or a
 * folder holding one; engine/formats/gguf_vocab.c): the same tokenizer as
 * the model's tiktoken.model + tokenizer_config.json would give. NULL with
 * one line in err when the file has none or one k3 cannot reproduce. */
k3_tokenizer *k3_tokenizer_load_gguf(const char *path, k3_error *err);
/* A model's tokenizer wherever it is (path: a model folder or a GGUF): a
 * tiktoken.model in the folder wins; else a GGUF's own vocabulary; else a
 * pack of a GGUF's tokenizer.gguf; else k3_tokenizer_load's error naming
 * the missing tiktoken.model. k3_tokenizer_model_has: 1 when one of those
 * is there. */
k3_tokenizer *k3_tokenizer_load_model(const char *path, k3_error *err);
int k3_tokenizer_model_has(const char *path);
void k3_tokenizer_free(k3_tokenizer *t);

int k3_tokenizer_n_base(const k3_tokenizer *t);     /* number of BPE ranks */
int k3_tokenizer_n_vocab(const k3_tokenizer *t);    /* n_base + 258 */

/* Id of a special token by its text ("<|im_end|>"), or -1. */
int k3_tokenizer_special_id(const k3_tokenizer *t, const char *text);

/* Encode UTF-8 text. allow_special: 1 = special-token strings in the text map
 * to their ids (the tiktoken allowed_special="all" behaviour); 0 = they are
 * encoded as plain text. Returns a malloc'd id array, count in *n_out, or NULL
 * with err set (e.g. invalid UTF-8: "invalid UTF-8 at byte 17"). */
int *k3_tokenizer_encode(const k3_tokenizer *t, const char *text, size_t len,
                         int allow_special, int *n_out, k3_error *err);

/* Bytes of one token (not NUL-terminated); NULL for an id out of range.
 * A special token's bytes are its name. */
const uint8_t *k3_tokenizer_token_bytes(const k3_tokenizer *t, int id, size_t *len);

/* Longest token in bytes (base or special); sizes k3_detok_push buffers. */
size_t k3_tokenizer_max_token_bytes(const k3_tokenizer *t);

/* Streaming decoder: feed ids one by one, get back only complete UTF-8
 * characters; an incomplete tail is held until the next token (or flushed as
 * U+FFFD replacement by k3_detok_flush when it can never complete). */
typedef struct k3_detok {
    const k3_tokenizer *tok;
    uint8_t pending[8];
    int n_pending;
} k3_detok;
void k3_detok_init(k3_detok *d, const k3_tokenizer *t);
/* Appends decoded text for `id` into out (capacity outcap); returns bytes
 * written. Never writes past outcap; an outcap of at least
 * 3 * (k3_tokenizer_max_token_bytes + 4) always holds a token's text (each
 * invalid byte becomes a 3-byte U+FFFD). An unknown id decodes as U+FFFD. */
size_t k3_detok_push(k3_detok *d, int id, char *out, size_t outcap);
size_t k3_detok_flush(k3_detok *d, char *out, size_t outcap);

/* Decode a whole id list to a malloc'd NUL-terminated UTF-8 string (invalid
 * sequences replaced with U+FFFD, as Python's errors="replace"; an unknown id
 * also becomes U+FFFD). NULL only when out of memory. */
char *k3_tokenizer_decode(const k3_tokenizer *t, const int *ids, int n);
/* Same, also giving the length in *len (the text may contain U+0000). */
char *k3_tokenizer_decode_len(const k3_tokenizer *t, const int *ids, int n, size_t *len);

/* Chat rendering. role is "system", "user", "assistant" or "tool". */
typedef struct k3_chat_msg {
    const char *role;
    const char *content;
    const char *reasoning;   /* an assistant message's reasoning (XTML with thinking on), or NULL */
} k3_chat_msg;

/* Render messages with the Kimi K2 framing (docs/MODEL.md, "Tokenizer and chat format"), no
 * injected system prompt, no BOS, and (if add_generation_prompt) the
 * assistant header. Framing tokens are emitted as special ids; message
 * content is encoded with allow_special = 0 (a user cannot inject framing).
 * Returns malloc'd ids or NULL with err set. */
int *k3_chat_render_kimi(const k3_tokenizer *t, const k3_chat_msg *msgs, int n_msgs,
                         int add_generation_prompt, int *n_out, k3_error *err);

#endif
