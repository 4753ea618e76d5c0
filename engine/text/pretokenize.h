/* pretokenize.h - the Kimi pre-tokeniser (docs/MODEL.md, "Tokenizer and chat format").
 *
 * Two steps, both before byte-level BPE:
 *  - k3_pretok_chunks: the tiktoken limit workaround of tokenization_kimi.py:
 *    400,000-code-point chunks, each cut where a run of whitespace or of
 *    non-whitespace (Python str.isspace) grows past 25,000 code points;
 *  - k3_pretok_split: the Kimi `pat_str` regex, compiled with PCRE2. PCRE2
 *    has no class intersection (`&&`), so the Han exclusions are written as
 *    complement classes; \s is spelled out as Unicode White_Space and
 *    \p{Han} as \p{sc:Han} (PCRE2's \p{Han} means Script_Extensions).
 * Both shared by the tokenizer and the tokenizer generator. */
#ifndef K3_PRETOKENIZE_H
#define K3_PRETOKENIZE_H

#include <stddef.h>
#include "k3_error.h"

/* Called for each piece; a nonzero return stops the walk and is returned. */
typedef int (*k3_piece_fn)(void *ud, const char *piece, size_t len);

#define K3_PRETOK_MAX_CHUNK_CHARS 400000
#define K3_PRETOK_MAX_RUN_CHARS 25000

/* text must be valid UTF-8. Calls fn for each non-empty chunk (none for an
 * empty text, as in Python). Returns 0 or the callback's value. */
int k3_pretok_chunks(const char *text, size_t len, k3_piece_fn fn, void *ud);

typedef struct k3_pretok k3_pretok;

/* Compile the regex; NULL with err set if PCRE2 refuses it. */
k3_pretok *k3_pretok_new(k3_error *err);
void k3_pretok_free(k3_pretok *p);
/* One regex compiled once per process and shared by every tokenizer (it is
 * read-only once compiled; each split has its own match data). Never freed.
 * NULL with err set if it cannot be compiled. */
const k3_pretok *k3_pretok_shared(k3_error *err);

/* Call fn for each regex match in text (valid UTF-8; not re-checked).
 * Thread-safe for a shared k3_pretok. Returns 0, the callback's nonzero
 * value, or -1 with err set if the matcher fails (e.g. out of memory). */
int k3_pretok_split(const k3_pretok *p, const char *text, size_t len,
                    k3_piece_fn fn, void *ud, k3_error *err);

#endif
