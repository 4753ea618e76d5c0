/* conversation.h - one chat conversation, independent of any screen: it
 * keeps the engine session across turns, commits every message to the
 * history store as it happens, snapshots the state after each answer and
 * resumes from a snapshot (or by re-prefilling the stored transcript).
 * The plain front end and the curses front end both drive this. */
#ifndef K3_CONVERSATION_H
#define K3_CONVERSATION_H

#include <signal.h>
#include "history.h"
#include "k3.h"

typedef struct conversation conversation;

typedef struct turn_result {
    int turn;                    /* 1, 2, ... */
    int prefilled_tokens;        /* tokens processed for this turn's prompt */
    int generated_tokens;
    double ttft_ms, prefill_ms, decode_ms, decode_tok_s;
    int interrupted, context_full, error;
    const char *status;          /* "complete" / "interrupted" / "error" */
    char *text;                  /* the answer (malloc'd; freed by turn_result_free) */
    /* a remote backend (conversation_create_remote) */
    int cached_tokens;           /* prompt tokens the server reused (-1 if it does not say) */
    double itl_p50_ms, itl_p90_ms, net_bytes_s;
    int retries;                 /* 429s retried */
    char error_msg[512];         /* why the turn failed (r->error), the conversation intact */
} turn_result;

void turn_result_free(turn_result *r);

/* Text callback: a complete UTF-8 piece of the answer as it is produced. */
typedef void (*conversation_text_fn)(void *user, const char *text, size_t len);
/* Progress callback for re-prefills: done of total tokens. */
typedef void (*conversation_progress_fn)(void *user, int done, int total);

/* Wrap a model (with tokenizer) and an open history. The sampler is copied
 * (and initialised); max_new bounds every answer; ctx is the context limit. */
conversation *conversation_create(k3_model *m, history *db, const char *model_dir,
                                  const k3_sampler *sampler, int max_new, int ctx, k3_error *err);
void conversation_free(conversation *c);

/* A conversation whose answers come from an OpenAI-compatible server
 * (chat/remote.h, which the caller keeps open): the transcript lives in the
 * local store and is re-sent each turn; the server's failures end a turn
 * with r->error and a message, the conversation intact. The sampler's
 * temperature, top_p and seed are sent; max_new is max_tokens. */
typedef struct remote remote;
conversation *conversation_create_remote(remote *r, const char *model_name, history *db, const k3_sampler *sampler,
                                         int max_new, int timeout_s, int max_retries, k3_error *err);
/* The server, or NULL for a local model. */
remote *conversation_remote(conversation *c);
const char *conversation_remote_model(const conversation *c);

/* Start a new stored conversation (system may be NULL). */
int conversation_start(conversation *c, const char *system, k3_error *err);
/* Continue a stored one ("last" or an id prefix). *from_snapshot tells how. */
int conversation_resume(conversation *c, const char *ref, conversation_progress_fn progress,
                        void *user, int *from_snapshot, k3_error *err);

/* One turn. Returns 0 (see r for how it ended), 1 if the message was not
 * sent (too long for the context, bad text: err says why), -1 on failure. */
int conversation_turn(conversation *c, const char *user_text, volatile sig_atomic_t *interrupt_flag,
                      conversation_text_fn on_text, void *user, turn_result *r, k3_error *err);

/* Facts for status lines and commands. */
const char *conversation_uid(const conversation *c);
int64_t conversation_id(const conversation *c);
int conversation_turns(const conversation *c);
int conversation_resumed_from_snapshot(const conversation *c);
k3_session *conversation_session(conversation *c);
k3_sampler *conversation_sampler(conversation *c);
/* Change the system prompt (takes effect for a new conversation or is
 * stored for this one) and the sampling parameters (stored). */
int conversation_set_system(conversation *c, const char *system, k3_error *err);
int conversation_store_sampling(conversation *c, k3_error *err);

#endif
