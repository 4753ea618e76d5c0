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
#include "generate.h"

typedef struct conversation conversation;

typedef struct turn_result {
    int turn;                    /* 1, 2, ... */
    int prefilled_tokens;        /* tokens processed for this turn's prompt */
    int generated_tokens;
    double ttft_ms, prefill_ms, decode_ms, decode_tok_s;
    int interrupted, context_full, error;
    int length_limit;            /* the answer was cut by the -n limit */
    int loop_period;             /* the loop rule ended it (generate.h): its cycle in tokens, else 0 */
    int decode_passes;           /* passes over the model after the first token */
    int drafted_tokens, draft_kept_tokens;   /* --draft ngram: verified, and of those kept */
    const char *status;          /* "complete" / "interrupted" / "error" */
    char *text;                  /* the answer (malloc'd; freed by turn_result_free) */
    /* a remote backend (conversation_create_remote) */
    int cached_tokens;           /* prompt tokens the server reused (-1 if it does not say) */
    double itl_p50_ms, itl_p90_ms, net_bytes_s;
    int retries;                 /* 429s retried */
    char *reasoning;             /* a thinking model's reasoning (malloc'd, NULL when none; freed by turn_result_free) */
    int length_in_reasoning;     /* the -n budget ran out while the model was still reasoning: no answer */
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
 * temperature, top_p and seed are sent; max_new is max_tokens. There is no
 * local session: conversation_session() is NULL. */
typedef struct remote remote;
conversation *conversation_create_remote(remote *r, const char *model_name, history *db, const k3_sampler *sampler,
                                         int max_new, int timeout_s, int max_retries, k3_error *err);
/* Which sampling parameters the user set on the command line (options.h's
 * bits: temp 1, top-p 4, seed 16): only those, and values changed since
 * with /set, are sent to the server; the rest are the server's defaults. */
void conversation_set_remote_sampling_given(conversation *c, int given);
/* Called with each piece of a thinking model's reasoning as it streams
 * (the same user pointer as the turn's text callback); NULL = not shown. */
void conversation_set_reasoning_fn(conversation *c, conversation_text_fn on_reasoning);
/* The server, or NULL for a local model. */
remote *conversation_remote(conversation *c);
const char *conversation_remote_model(const conversation *c);

/* Start a new conversation (system may be NULL). It is stored with its
 * first message: a conversation nobody wrote in leaves no record. */
int conversation_start(conversation *c, const char *system, k3_error *err);
/* Continue a stored one ("last" or an id prefix). *from_snapshot tells how.
 * Returns 0, 1 when it was not resumed and the current conversation goes on
 * unchanged (unknown id, or another k3 is writing it: err names the
 * process), -1 when rebuilding the state failed. */
int conversation_resume(conversation *c, const char *ref, conversation_progress_fn progress,
                        void *user, int *from_snapshot, k3_error *err);

/* One turn. Returns 0 (see r for how it ended), 1 if the message was not
 * sent (too long for the context, bad text: err says why), -1 on failure. */
int conversation_turn(conversation *c, const char *user_text, volatile sig_atomic_t *interrupt_flag,
                      conversation_text_fn on_text, void *user, turn_result *r, k3_error *err);

/* The last exchange, for /undo, /retry and /edit. Each restores the state
 * from before the last user message by loading the snapshot taken at that
 * turn boundary (else the newest earlier one plus the ids after it), never
 * by re-reading the whole conversation when a snapshot exists.
 *  undo:  drop the last user message and its answer from the record;
 *  retry: the same, then answer the same message with the current sampling;
 *  edit:  the same, then answer user_text instead.
 * They return like conversation_turn; 1 = nothing to undo (err says so). */
int conversation_undo(conversation *c, conversation_progress_fn progress, void *user, k3_error *err);
int conversation_retry(conversation *c, volatile sig_atomic_t *interrupt_flag, conversation_text_fn on_text,
                       void *user, turn_result *r, k3_error *err);
int conversation_edit(conversation *c, const char *user_text, volatile sig_atomic_t *interrupt_flag,
                      conversation_text_fn on_text, void *user, turn_result *r, k3_error *err);
/* The text of the last user message (malloc'd), or NULL when there is none. */
char *conversation_last_user_text(conversation *c);

/* Facts for status lines and commands. uid is "" and id -1 until the
 * conversation is stored (its first message). */
const char *conversation_uid(const conversation *c);
int64_t conversation_id(const conversation *c);
int conversation_turns(const conversation *c);
int conversation_resumed_from_snapshot(const conversation *c);
k3_session *conversation_session(conversation *c);
k3_sampler *conversation_sampler(conversation *c);
/* Set the system prompt of a conversation that has not begun (1 with err
 * saying so once it has: the record keeps what the model saw), and store
 * the current sampling parameters as the conversation's settings (each
 * answer also records the sampling it was made with). */
int conversation_set_system(conversation *c, const char *system, k3_error *err);
int conversation_store_sampling(conversation *c, k3_error *err);
/* The system prompt the conversation began (or will begin) with; "" for none. */
const char *conversation_system(const conversation *c);
/* The current sampling as stored (malloc'd JSON object text). */
char *conversation_sampling_json(const conversation *c);

/* Kimi K3 thinking: effort "low", "medium", "high" or "max", or NULL for
 * off. 0 when it applies now (the conversation has not begun); 2 when the
 * conversation has begun with another setting, which it keeps (its record
 * re-renders the same; err says so): this one applies from
 * conversation_start; 1 with err set when the model cannot think. The
 * setting is stored with the conversation ("think" in its sampling) and a
 * resumed conversation takes its own back. */
int conversation_set_think(conversation *c, const char *effort, k3_error *err);
/* The current conversation's effort, NULL when it does not think. */
const char *conversation_think(const conversation *c);

/* The answer length limit (k3 chat -n, /set n=N). */
void conversation_set_max_new(conversation *c, int max_new);
int conversation_max_new(const conversation *c);
/* A per-token observer for every following turn (NULL = none): called after
 * each generated token with the answer so far, and the user pointer passed
 * to conversation_turn. */
void conversation_set_token_observer(conversation *c, generate_progress_fn on_token);
/* Speculative decoding for the following answers: DRAFT_NONE or DRAFT_NGRAM
 * (chat/draft.h; the answers are the same either way). */
void conversation_set_draft(conversation *c, int draft);

#endif
