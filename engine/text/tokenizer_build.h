/* tokenizer_build.h - the tokenizer from a vocabulary that is not a
 * tiktoken.model: plain arrays of token bytes and special names (a GGUF's
 * metadata, engine/formats/gguf_vocab.c), and the GPT-2 byte spelling those
 * files write token bytes in.
 *
 * The tokenizer built here is the tiktoken.model path's exactly: base token
 * i has rank i, the special table is finished by the same code (unnamed
 * slots are "<|reserved_token_N|>", at least 258 slots), the same
 * pre-tokenizer and BPE. Engine-internal: the front ends open a tokenizer
 * through include/k3_tokenizer.h. */
#ifndef K3_TOKENIZER_BUILD_H
#define K3_TOKENIZER_BUILD_H

#include <stddef.h>
#include <stdint.h>
#include "k3_error.h"
#include "k3_tokenizer.h"

#define K3_TOKENIZER_MIN_SPECIALS 258        /* num_reserved_special_tokens (256) + 2 */
#define K3_TOKENIZER_MAX_SPECIALS (1 << 18)  /* added tokens sit in n_base .. n_base + this */
#define K3_TOKENIZER_MAX_BASE (1 << 24)      /* BPE ranks (Kimi has 163,584) */

/* A vocabulary as arrays. Base token i (rank i) is
 * bytes[offsets[i] .. offsets[i + 1]); special slot s (id n_base + s) is
 * named special_names[s], NULL for an unnamed slot. */
typedef struct k3_vocab_arrays {
    int n_base;
    const uint8_t *bytes;
    const size_t *offsets;               /* n_base + 1 entries, non-decreasing */
    int n_names;                         /* slots given; the table has at least 258 */
    const char *const *special_names;    /* [n_names], NUL-terminated, or NULL */
} k3_vocab_arrays;

/* Build a tokenizer from v, copying what it keeps. Refuses (NULL, one line
 * in err starting with `what`) an empty or oversized vocabulary, an empty
 * token, two base tokens with the same bytes, a byte with no token of its
 * own, an empty special name, two specials with the same name. */
k3_tokenizer *k3_tokenizer_from_arrays(const k3_vocab_arrays *v, const char *what, k3_error *err);

/* Rank (= id) of a base token's bytes, or -1 if no base token has them. */
int k3_tokenizer_rank(const k3_tokenizer *t, const uint8_t *bytes, size_t len);

/* GPT-2's byte-to-unicode spelling (byte_spelling.c): each byte is one code
 * point, the printable Latin-1 bytes themselves ('!'..'~', U+00A1..U+00AC,
 * U+00AE..U+00FF) and the other 68 bytes U+0100.. in byte order.
 * Decode the UTF-8 string s of len bytes into out (room for len bytes:
 * never longer). Returns the byte count, or -1 if s is not valid UTF-8
 * or holds a code point no byte is spelled as. */
long k3_byte_spelling_decode(const char *s, size_t len, uint8_t *out);
/* The code point that spells byte b. */
uint32_t k3_byte_spelling_of(uint8_t b);

#endif
