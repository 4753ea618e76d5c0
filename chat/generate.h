/* generate.h - the token loop shared by `k3 run` and `k3 chat`: sample,
 * stream whole UTF-8 characters (special and reserved tokens are not shown),
 * feed the token back, stop on a stop id, the token limit, a full context or
 * an interrupt flag, and time it all. */
#ifndef K3_GENERATE_H
#define K3_GENERATE_H

#include <signal.h>
#include "k3.h"

typedef struct generate_result {
    int n_generated;          /* tokens produced (stop token excluded) */
    int stopped_on;           /* the stop id that ended it, or -1 */
    int interrupted;          /* the interrupt flag ended it */
    int context_full;         /* the context limit ended it */
    int pending_token;        /* last sampled token not yet fed to the session, or -1 */
    double first_token_s;     /* seconds from start to the first token */
    double decode_s;          /* seconds from the first token to the end */
    char *text;               /* malloc'd answer text (UTF-8) */
    int *ids;                 /* malloc'd: every token produced, in order (the last may be pending) */
} generate_result;

/* Called with each complete piece of text as it is produced. */
typedef void (*generate_text_fn)(void *user, const char *text, size_t len);

/* Called once per generated token (stop tokens excluded) with its id and
 * the text it completed (may be empty: a special token, or bytes of a
 * character still incomplete), before the next token is computed. */
typedef void (*generate_token_fn)(void *user, int id, const char *text, size_t len);

/* Generate up to max_new tokens from the session's current logits. The last
 * sampled token is left pending (not fed) so a stop or limit costs no extra
 * forward pass; the caller feeds it when the conversation goes on. Returns
 * 0, or -1 with err set (the result still describes what was produced). */
int generate_answer(k3_session *s, k3_sampler *sp, const int *stop_ids, int n_stop_ids,
                    int max_new, volatile sig_atomic_t *interrupt_flag, generate_text_fn on_text,
                    void *user, generate_result *out, k3_error *err);

/* generate_answer with a per-token callback as well (on_token may be NULL;
 * it receives the same user pointer). */
int generate_answer_tokens(k3_session *s, k3_sampler *sp, const int *stop_ids, int n_stop_ids,
                           int max_new, volatile sig_atomic_t *interrupt_flag, generate_text_fn on_text,
                           generate_token_fn on_token, void *user, generate_result *out, k3_error *err);


#endif
