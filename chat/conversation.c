/* conversation.c - see conversation.h.
 *
 * Token bookkeeping: after an answer the session is closed exactly as the
 * chat template closes an assistant message (the last sampled token, which
 * generation leaves pending, then <|im_end|>), so the next turn prefills
 * only the new user message and its framing, and the session always equals
 * one pass over the whole rendered transcript. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "generate.h"
#include "conversation.h"
#include "remote.h"
#include "text_append.h"
#include "k3_util.h"

struct conversation {
    k3_model *model;
    history *db;
    char *model_dir;
    k3_session *session;
    k3_sampler sampler;
    int max_new;
    generate_progress_fn on_token;       /* per-token observer (--json --stream), or NULL */
    int draft;                           /* --draft (chat/draft.h) */
    history_conversation row;
    int have_row;
    int turn;
    int close_ids[32], n_close;  /* what ends an assistant message */
    int stops[8], n_stops;
    int resumed_from_snapshot;
    int stale;                   /* a prompt was interrupted mid-prefill: rebuild before the next turn */
    int restored_tokens;         /* tokens the last restore loaded from a snapshot */
    char *pending_system;        /* system prompt of a conversation not stored yet */
    remote *remote;              /* an OpenAI-compatible server instead of model/session (remote turns below) */
    char remote_model[256];
    int remote_timeout_s, remote_retries;
    int remote_sampling_given;   /* options.h's bits of what the user typed */
    k3_sampler remote_sampling_start;   /* the sampling at creation: a /set change from it is sent too */
    conversation_text_fn on_reasoning;
    const char *think;           /* this conversation's thinking effort ("low".."max"), NULL = off */
    const char *think_next;      /* what /think chose: the next conversation's (conversation_start) */
};

static int remote_turn(conversation *c, const char *user_text, volatile sig_atomic_t *interrupt_flag,
                       conversation_text_fn on_text, void *user, turn_result *r, k3_error *err);

void turn_result_free(turn_result *r)
{
    free(r->text);
    free(r->reasoning);
    r->text = r->reasoning = NULL;
}

conversation *conversation_create(k3_model *m, history *db, const char *model_dir,
                                  const k3_sampler *sampler, int max_new, int ctx, k3_error *err)
{
    const k3_tokenizer *tok = k3_model_tokenizer(m);
    if (!tok) { k3_err(err, "%s: the model has no tokenizer", model_dir); return NULL; }
    conversation *c = calloc(1, sizeof *c);
    if (!c) { k3_err(err, "out of memory"); return NULL; }
    c->model = m;
    c->db = db;
    c->model_dir = strdup(model_dir);
    c->max_new = max_new;
    c->n_close = k3_model_chat_close_ids(m, c->close_ids, 32, err);
    c->n_stops = k3_model_stop_ids(m, c->stops, 8);
    c->sampler = *sampler;
    k3_model_info info;
    k3_model_get_info(m, &info);
    if (c->n_close < 0) {
        /* err set */
    } else if (!(c->session = k3_session_new(m, ctx, err))) {
        /* err set */
    } else if (k3_sampler_init(&c->sampler, info.vocab_size)) {
        k3_err(err, "out of memory");
    } else {
        return c;
    }
    conversation_free(c);
    return NULL;
}

void conversation_free(conversation *c)
{
    if (!c) return;
    if (c->have_row) history_conv_free(&c->row);
    free(c->pending_system);
    k3_sampler_free(&c->sampler);
    k3_session_free(c->session);
    free(c->model_dir);
    free(c);
}

/* The sampling parameters as stored with the conversation and with each
 * answer. The sampler holds floats: printed with 7 significant digits they
 * read as typed (0.7, not 0.699999988079071). */
static char *sampling_json(const k3_sampler *sp, const char *think)
{
    json_t *o = json_pack("{s:f,s:i,s:f,s:f,s:I}", "temperature", (double)sp->temperature, "top_k",
                          sp->top_k, "top_p", (double)sp->top_p, "min_p", (double)sp->min_p, "seed",
                          (json_int_t)sp->seed);
    if (think) json_object_set_new(o, "think", json_string(think));   /* absent = thinking off */
    char *text = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(7));
    json_decref(o);
    return text;
}

/* Take the stored sampling back (on resume); fields missing keep their value. */
static void apply_sampling_json(k3_sampler *sp, const char *text)
{
    json_t *o = text ? json_loads(text, 0, NULL) : NULL;
    if (!json_is_object(o)) { json_decref(o); return; }
    json_t *v;
    if (json_is_number(v = json_object_get(o, "temperature"))) sp->temperature = (float)json_number_value(v);
    if (json_is_integer(v = json_object_get(o, "top_k"))) sp->top_k = (int)json_integer_value(v);
    if (json_is_number(v = json_object_get(o, "top_p"))) sp->top_p = (float)json_number_value(v);
    if (json_is_number(v = json_object_get(o, "min_p"))) sp->min_p = (float)json_number_value(v);
    if (json_is_integer(v = json_object_get(o, "seed")) && json_integer_value(v) >= 0 &&
        (uint64_t)json_integer_value(v) != sp->seed) {
        int n_vocab = sp->n_vocab;
        k3_sampler_free(sp);
        sp->seed = (uint64_t)json_integer_value(v);
        k3_sampler_init(sp, n_vocab);
    }
    json_decref(o);
}

/* The stored thinking effort of a conversation's settings ("think"), as one
 * of the static names, or NULL (off, or an older record without it). */
static const char *stored_think(const char *text)
{
    static const char *const names[] = {"low", "medium", "high", "max"};
    json_t *o = text ? json_loads(text, 0, NULL) : NULL;
    const char *v = json_string_value(json_object_get(o, "think")), *found = NULL;
    for (int i = 0; v && i < 4; i++)
        if (!strcmp(v, names[i])) found = names[i];
    json_decref(o);
    return found;
}

/* The ids that close an assistant message in the session; think_open: it
 * ended inside its think block, so close(think) open(response) come first.
 * Returns the count (at most 64), or -1 with err set. */
static int closing_ids(const conversation *c, int think_open, int *ids, k3_error *err)
{
    int n = 0;
    if (think_open) {
        n = k3_chat_xtml_think_end_ids(k3_model_tokenizer(c->model), ids, 32, err);
        if (n < 0) return -1;
    }
    memcpy(ids + n, c->close_ids, (size_t)c->n_close * sizeof *ids);
    return n + c->n_close;
}

/* Does the answer's ids hold the framing between reasoning and response? */
static int has_think_end(const conversation *c, const int32_t *ids, int64_t n)
{
    int end[32];
    k3_error err;
    int n_end = k3_chat_xtml_think_end_ids(k3_model_tokenizer(c->model), end, 32, &err);
    for (int64_t i = 0; n_end > 0 && i + n_end <= n; i++) {
        int j = 0;
        while (j < n_end && ids[i + j] == end[j]) j++;
        if (j == n_end) return 1;
    }
    return 0;
}

int conversation_set_think(conversation *c, const char *effort, k3_error *err)
{
    if (effort && (c->remote || !k3_model_can_think(c->model))) {
        k3_err(err, "--think %s: this model has no thinking mode (only Kimi K3 models think; --think off)", effort);
        return 1;
    }
    if (c->remote) return 0;              /* off, and it stays off: the server decides */
    c->think_next = effort;
    if (!c->have_row && k3_session_n_tokens(c->session) == 0) {
        c->think = effort;
        return 0;
    }
    if ((c->think == NULL) != (effort == NULL) || (effort && strcmp(c->think, effort))) {
        k3_err(err, "this conversation began with thinking %s and keeps it (its record re-renders the same): "
               "/new starts one with %s", c->think ? c->think : "off", effort ? effort : "off");
        return 2;
    }
    return 0;
}

const char *conversation_think(const conversation *c) { return c->think; }

/* A new conversation is stored with its first message, never empty: until
 * then only the session is reset and the system prompt waits here. */
int conversation_start(conversation *c, const char *system, k3_error *err)
{
    (void)err;
    if (c->have_row) history_conv_free(&c->row);
    c->have_row = 0;
    history_conv_unlock(c->db);
    free(c->pending_system);
    c->pending_system = system && *system ? strdup(system) : NULL;
    c->think = c->think_next;
    c->turn = 0;
    c->resumed_from_snapshot = 0;
    c->stale = 0;
    if (c->session) k3_session_reset(c->session);   /* none for a remote backend */
    return 0;
}

/* Create the stored row for a new conversation (at its first message). */
static int ensure_row(conversation *c, k3_error *err)
{
    if (c->have_row) return 0;
    history_error herr;
    char *sj = sampling_json(&c->sampler, c->think);
    char remote_fp[300];
    snprintf(remote_fp, sizeof remote_fp, "remote:%s", c->remote_model);
    k3_model_info info;
    memset(&info, 0, sizeof info);
    if (!c->remote) k3_model_get_info(c->model, &info);   /* a server's model has no type to name */
    history_conversation fields = {.model_path = c->model_dir,
                                   .model_fingerprint = c->remote ? remote_fp : (char *)k3_model_fingerprint(c->model),
                                   .model_type = info.type_label, .system_prompt = c->pending_system,
                                   .sampling_json = sj};
    int64_t id = history_conv_create(c->db, &fields, &c->row, &herr);
    free(sj);
    if (id < 0) return k3_err(err, "%s", herr.msg);
    c->have_row = 1;
    if (history_conv_lock(c->db, &c->row, &herr))           /* nobody else knows its id yet */
        fprintf(stderr, "k3: warning: %s\n", herr.msg);
    if (c->remote && history_conv_set_backend(c->db, c->row.id, remote_url(c->remote), c->remote_model, &herr))
        return k3_err(err, "%s", herr.msg);
    return 0;
}

/* The system prompt the conversation began (or will begin) with. */
static const char *system_prompt(const conversation *c)
{
    return c->have_row ? c->row.system_prompt : c->pending_system;
}

/* Snapshot the session after a completed turn (temp file, fsync, rename, row).
 * A failure only costs a slower resume, so it is reported, not fatal. */
static void save_snapshot(conversation *c, int64_t message_id)
{
    history_error herr;
    k3_error err;
    char *tmp = NULL;
    if (history_snapshot_begin(c->db, &tmp, &herr)) {
        fprintf(stderr, "k3: warning: no state snapshot: %s\n", herr.msg);
        return;
    }
    if (k3_session_save(c->session, tmp, &err)) {
        fprintf(stderr, "k3: warning: no state snapshot: %s\n", err.msg);
        history_snapshot_discard(c->db, tmp);
        free(tmp);
        return;
    }
    history_snapshot_key key = {.conversation_id = c->row.id, .message_id = message_id,
                                .n_tokens = k3_session_n_tokens(c->session),
                                .model_fingerprint = k3_model_fingerprint(c->model),
                                .format_version = K3_SESSION_FORMAT_VERSION};
    if (history_snapshot_commit(c->db, tmp, &key, &herr) < 0)
        fprintf(stderr, "k3: warning: no state snapshot: %s\n", herr.msg);
    free(tmp);
}

/* A re-prefill (resume without a usable snapshot) evaluates the transcript in
 * steps of this many tokens: each step is 8 prompt chunks of 32 tokens, long
 * enough to keep the chunked path efficient and short enough that the
 * progress line moves at least every few seconds on a streamed model. */
#define REPREFILL_STEP_TOKENS 256

/* Evaluate ids into the session in chunks, reporting done/total after each. */
static int feed_ids(conversation *c, const int *ids, int n, conversation_progress_fn progress, void *user,
                    k3_error *err)
{
    int rc = 0;
    for (int done = 0; done < n && rc == 0;) {
        int step = n - done < REPREFILL_STEP_TOKENS ? n - done : REPREFILL_STEP_TOKENS;
        rc = k3_session_eval(c->session, ids + done, step, NULL, err);
        done += step;
        if (progress) progress(user, done, n);
    }
    return rc;
}

/* Rebuild the session from the stored transcript: every message rendered
 * and closed, as the turns had left it. */
static int reprefill(conversation *c, history_message *msgs, size_t n, conversation_progress_fn progress,
                     void *user, k3_error *err)
{
    /* exact: every message kept the ids the model consumed for it, and this
     * is the model (so the same tokenizer) that produced them */
    int exact = n > 0 && c->row.model_fingerprint &&
                !strcmp(c->row.model_fingerprint, k3_model_fingerprint(c->model));
    int64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        exact &= msgs[i].token_ids && msgs[i].n_token_ids > 0;
        total += msgs[i].n_token_ids;
    }
    if (exact) {
        if (total > k3_session_max_tokens(c->session))
            return k3_err(err, "resume: the stored conversation has %lld tokens, more than the context limit %d",
                          (long long)total, k3_session_max_tokens(c->session));
        int *all = malloc((size_t)total * sizeof *all), at = 0;
        if (!all) return k3_err(err, "out of memory");
        for (size_t i = 0; i < n; i++)
            for (int64_t j = 0; j < msgs[i].n_token_ids; j++) all[at++] = msgs[i].token_ids[j];
        int rc = feed_ids(c, all, at, progress, user, err);
        free(all);
        return rc;
    }
    k3_chat_msg *cm = calloc(n + 1, sizeof *cm);
    int nm = 0;
    if (!cm) return k3_err(err, "out of memory");
    const char *system = system_prompt(c);
    if (system && *system) cm[nm++] = (k3_chat_msg){"system", system, NULL};
    for (size_t i = 0; i < n; i++)
        if (strcmp(msgs[i].role, "system")) cm[nm++] = (k3_chat_msg){msgs[i].role, msgs[i].content, msgs[i].reasoning};
    int n_ids = 0, *ids = NULL;
    if (nm) {
        k3_error rerr;
        ids = k3_model_render_chat_think(c->model, cm, nm, 0, c->think, &n_ids, &rerr);
        if (!ids) { free(cm); return k3_err(err, "resume: %s", rerr.msg); }
    }
    free(cm);
    if (n_ids > k3_session_max_tokens(c->session)) {
        free(ids);
        return k3_err(err, "resume: the stored conversation has %d tokens, more than the context limit %d",
                      n_ids, k3_session_max_tokens(c->session));
    }
    int rc = feed_ids(c, ids, n_ids, progress, user, err);
    free(ids);
    return rc;
}

/* Do the stored messages carry the exact ids this model consumed for them? */
static int ids_exact(const conversation *c, const history_message *msgs, size_t n)
{
    if (!c->row.model_fingerprint || strcmp(c->row.model_fingerprint, k3_model_fingerprint(c->model))) return 0;
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].token_ids || msgs[i].n_token_ids <= 0) return 0;
    return 1;
}

/* Make the session equal one pass over msgs[0, n): load the newest usable
 * snapshot taken at or before msgs[n - 1] (one per turn boundary is kept)
 * and evaluate only the ids of the messages after it; without one, rebuild
 * from the start. progress sees the tokens evaluated, not the loaded ones. */
static int restore_state(conversation *c, history_message *msgs, size_t n, conversation_progress_fn progress,
                         void *user, k3_error *err)
{
    history_error herr;
    if (c->remote) {                 /* no local state: the transcript is re-sent each turn */
        c->resumed_from_snapshot = 0;
        return 0;
    }
    k3_session_reset(c->session);
    c->resumed_from_snapshot = 0;
    c->restored_tokens = 0;
    c->stale = 0;
    if (n == 0) return 0;
    int64_t max_seq = msgs[n - 1].seq;
    while (ids_exact(c, msgs, n)) {
        history_snapshot snap;
        int found = history_snapshot_latest_upto(c->db, c->row.id, max_seq, k3_model_fingerprint(c->model),
                                                 K3_SESSION_FORMAT_VERSION, &snap, &herr);
        if (found != 1) {
            if (found < 0) fprintf(stderr, "k3: %s; re-prefilling\n", herr.msg);
            else fprintf(stderr, "k3: no state snapshot for this model; re-prefilling\n");
            break;
        }
        size_t at = n;
        int64_t upto = 0;
        for (size_t i = 0; i < n && at == n; i++) {
            upto += msgs[i].n_token_ids;
            if (msgs[i].id == snap.message_id) at = i;
        }
        k3_error lerr;
        int usable = 0;
        if (at == n || upto != snap.n_tokens)
            fprintf(stderr, "k3: snapshot unusable (it does not match the stored token ids); re-prefilling\n");
        else if (history_snapshot_verify(&snap, &herr))
            fprintf(stderr, "k3: snapshot unusable (%s); re-prefilling\n", herr.msg);
        else if (k3_session_load(c->session, snap.path, &lerr))
            fprintf(stderr, "k3: snapshot unusable (%s); re-prefilling\n", lerr.msg);
        else
            usable = 1;
        history_snapshot_free(&snap);
        if (!usable) {
            k3_session_reset(c->session);
            if (at == n) break;
            max_seq = msgs[at].seq - 1;       /* try an older one */
            continue;
        }
        int64_t rest = 0;
        for (size_t i = at + 1; i < n; i++) rest += msgs[i].n_token_ids;
        if (upto + rest > k3_session_max_tokens(c->session))
            return k3_err(err, "resume: the stored conversation has %lld tokens, more than the context limit %d",
                          (long long)(upto + rest), k3_session_max_tokens(c->session));
        int *ids = malloc((size_t)(rest + 1) * sizeof *ids), k = 0;
        if (!ids) return k3_err(err, "out of memory");
        for (size_t i = at + 1; i < n; i++)
            for (int64_t j = 0; j < msgs[i].n_token_ids; j++) ids[k++] = msgs[i].token_ids[j];
        if (k) fprintf(stderr, "k3: state snapshot of %lld tokens loaded; prefilling the %d tokens after it\n",
                       (long long)upto, k);
        int rc = feed_ids(c, ids, k, progress, user, err);
        free(ids);
        c->resumed_from_snapshot = 1;
        c->restored_tokens = (int)upto;
        if (rc) c->stale = 1;
        return rc;
    }
    if (!ids_exact(c, msgs, n))
        fprintf(stderr, "k3: no state snapshot for this model (the record was made with %s); re-prefilling\n",
                c->row.model_fingerprint && strcmp(c->row.model_fingerprint, k3_model_fingerprint(c->model))
                    ? "another model" : "messages without token ids");
    k3_session_reset(c->session);
    int rc = reprefill(c, msgs, n, progress, user, err);
    if (rc) c->stale = 1;
    return rc;
}

/* A chat killed mid-answer left the answer's row in progress with the ids
 * generated so far (or, killed during the prompt, no answer at all). Close
 * it as the template closes an answer, so the stored ids are again one pass
 * over a well-formed transcript: the row keeps in_progress = 1 (shown as
 * incomplete) and the text it had; /retry can answer again. */
static int close_cut_answer(conversation *c, const history_message *msgs, size_t n, k3_error *err)
{
    history_error herr;
    if (n == 0) return 0;
    const history_message *last = &msgs[n - 1];
    int close[64];
    if (!strcmp(last->role, "user")) {
        int n_close = closing_ids(c, c->think != NULL, close, err);
        if (n_close < 0) return -1;
        history_message am = history_message_make("assistant", "", HISTORY_INTERRUPTED);
        am.generated_tokens = 0;
        am.token_ids = (int32_t *)close;
        am.n_token_ids = n_close;
        am.in_progress = 1;
        return history_msg_add(c->db, c->row.id, &am, &herr) < 0 ? k3_err(err, "%s", herr.msg) : 0;
    }
    if (strcmp(last->role, "assistant") || !last->in_progress) return 0;
    int closed = last->n_token_ids >= c->n_close;
    for (int i = 0; closed && i < c->n_close; i++)
        closed = last->token_ids[last->n_token_ids - c->n_close + i] == c->close_ids[i];
    if (closed) return 0;
    /* cut while thinking: the think block is closed first */
    int n_close = closing_ids(c, c->think && !has_think_end(c, last->token_ids, last->n_token_ids), close, err);
    if (n_close < 0) return -1;
    int32_t *ids = malloc((size_t)(last->n_token_ids + n_close) * sizeof *ids);
    if (!ids) return k3_err(err, "out of memory");
    if (last->n_token_ids) memcpy(ids, last->token_ids, (size_t)last->n_token_ids * sizeof *ids);
    for (int i = 0; i < n_close; i++) ids[last->n_token_ids + i] = close[i];
    history_message am = *last;
    am.token_ids = ids;
    am.n_token_ids = last->n_token_ids + n_close;
    am.status = HISTORY_INTERRUPTED;
    int rc = history_msg_update(c->db, last->id, &am, &herr) ? k3_err(err, "%s", herr.msg) : 0;
    free(ids);
    if (rc == 0) fprintf(stderr, "k3: the last answer was cut off (%lld tokens kept, marked incomplete); /retry answers again\n",
                         (long long)last->generated_tokens);
    return rc;
}

int conversation_resume(conversation *c, const char *ref, conversation_progress_fn progress, void *user,
                        int *from_snapshot, k3_error *err)
{
    history_error herr;
    history_conversation row;
    if (history_conv_find(c->db, ref, &row, &herr)) {
        k3_err(err, "%s", herr.msg);
        return 1;
    }
    if (!(c->have_row && row.id == c->row.id) && history_conv_lock(c->db, &row, &herr)) {
        if (c->have_row) history_conv_lock(c->db, &c->row, NULL);   /* keep writing the current one */
        history_conv_free(&row);
        k3_err(err, "%s", herr.msg);
        return 1;
    }
    if (c->have_row) history_conv_free(&c->row);
    c->row = row;
    c->have_row = 1;
    history_message *msgs = NULL;
    size_t n = 0;
    if (history_msg_list(c->db, c->row.id, &msgs, &n, &herr)) return k3_err(err, "%s", herr.msg);
    c->turn = 0;
    for (size_t i = 0; i < n; i++) c->turn += !strcmp(msgs[i].role, "user");
    apply_sampling_json(&c->sampler, c->row.sampling_json);
    if (!c->remote) {
        const char *was = c->think;
        c->think = stored_think(c->row.sampling_json);   /* it keeps the thinking it began with */
        if ((was == NULL) != (c->think == NULL) || (was && strcmp(was, c->think)))
            fprintf(stderr, "k3: this conversation began with thinking %s and keeps it\n", c->think ? c->think : "off");
    }
    if (c->remote && history_conv_set_backend(c->db, c->row.id, remote_url(c->remote), c->remote_model, &herr))
        fprintf(stderr, "k3: warning: %s\n", herr.msg);   /* it talks to this server from now on */
    if (close_cut_answer(c, msgs, n, err)) {
        history_msg_list_free(msgs, n);
        return -1;
    }
    history_msg_list_free(msgs, n);
    if (history_msg_list(c->db, c->row.id, &msgs, &n, &herr)) return k3_err(err, "%s", herr.msg);
    int rc = restore_state(c, msgs, n, progress, user, err);
    if (from_snapshot) *from_snapshot = c->resumed_from_snapshot;
    history_msg_list_free(msgs, n);
    return rc;
}

/* The index of the last user message, or -1. */
static long last_user_index(const history_message *msgs, size_t n)
{
    for (size_t i = n; i-- > 0;)
        if (!strcmp(msgs[i].role, "user")) return (long)i;
    return -1;
}

char *conversation_last_user_text(conversation *c)
{
    history_error herr;
    history_message *msgs = NULL;
    size_t n = 0;
    if (!c->have_row || history_msg_list(c->db, c->row.id, &msgs, &n, &herr)) return NULL;
    long u = last_user_index(msgs, n);
    char *text = u >= 0 ? strdup(msgs[u].content) : NULL;
    history_msg_list_free(msgs, n);
    return text;
}

int conversation_undo(conversation *c, conversation_progress_fn progress, void *user, k3_error *err)
{
    history_error herr;
    history_message *msgs = NULL;
    size_t n = 0;
    if (!c->have_row) { k3_err(err, "nothing to undo: the conversation has no message yet"); return 1; }
    if (history_msg_list(c->db, c->row.id, &msgs, &n, &herr)) return k3_err(err, "%s", herr.msg);
    long u = last_user_index(msgs, n);
    if (u < 0) {
        history_msg_list_free(msgs, n);
        k3_err(err, "nothing to undo: the conversation has no message yet");
        return 1;
    }
    int rc = history_msg_truncate(c->db, c->row.id, msgs[u].id, &herr) < 0 ? k3_err(err, "%s", herr.msg) : 0;
    if (rc == 0) {
        c->turn--;
        rc = restore_state(c, msgs, (size_t)u, progress, user, err);
    }
    history_msg_list_free(msgs, n);
    return rc;
}

int conversation_edit(conversation *c, const char *user_text, volatile sig_atomic_t *interrupt_flag,
                      conversation_text_fn on_text, void *user, turn_result *r, k3_error *err)
{
    memset(r, 0, sizeof r[0]);
    int rc = conversation_undo(c, NULL, NULL, err);
    if (rc) return rc;
    return conversation_turn(c, user_text, interrupt_flag, on_text, user, r, err);
}

int conversation_retry(conversation *c, volatile sig_atomic_t *interrupt_flag, conversation_text_fn on_text,
                       void *user, turn_result *r, k3_error *err)
{
    memset(r, 0, sizeof r[0]);
    char *text = conversation_last_user_text(c);
    if (!text) { k3_err(err, "nothing to retry: the conversation has no message yet"); return 1; }
    int rc = conversation_edit(c, text, interrupt_flag, on_text, user, r, err);
    free(text);
    return rc;
}

/* Keeps a streaming answer durable: the row inserted when the answer starts
 * (in_progress = 1) is rewritten with the text and ids so far every second
 * or every SAVE_EVERY_TOKENS tokens, each in its own committed transaction
 * in the WAL, so a kill -9 loses at most that much. */
#define SAVE_EVERY_TOKENS 64
#define SAVE_EVERY_S 1.0
typedef struct stream_saver {
    conversation *c;
    conversation_text_fn on_text;
    void *user;
    int64_t message_id;
    int prompt_tokens;
    const char *sampling;
    double last_save_s;
    int saved_tokens;
} stream_saver;

/* Reasoning goes on to the front end's reasoning callback. */
static void saver_reasoning(void *user, const char *text, size_t len)
{
    stream_saver *sv = user;
    if (sv->c->on_reasoning) sv->c->on_reasoning(sv->user, text, len);
}

/* Text goes on to the front end unchanged. */
static void saver_text(void *user, const char *text, size_t len)
{
    stream_saver *sv = user;
    if (sv->on_text) sv->on_text(sv->user, text, len);
}

/* After each token: save when enough time or tokens went by. A failed save
 * is reported once per answer and costs only durability. */
static void saver_progress(void *user, const generate_result *g)
{
    stream_saver *sv = user;
    if (sv->c->on_token) sv->c->on_token(sv->user, g);      /* the front end's per-token observer */
    double now = k3_now_ns() / 1e9;
    if (g->n_generated - sv->saved_tokens < SAVE_EVERY_TOKENS && now - sv->last_save_s < SAVE_EVERY_S) return;
    history_message pm = history_message_make("assistant", g->text, HISTORY_INTERRUPTED);
    pm.reasoning = g->reasoning;
    pm.prompt_tokens = sv->prompt_tokens;
    pm.generated_tokens = g->n_generated;
    pm.token_ids = (int32_t *)g->ids;          /* generated so far; closed on resume */
    pm.n_token_ids = g->n_generated;
    pm.sampling_json = (char *)sv->sampling;
    pm.in_progress = 1;
    history_error herr;
    if (history_msg_update(sv->c->db, sv->message_id, &pm, &herr) && sv->saved_tokens >= 0)
        fprintf(stderr, "k3: warning: the answer so far was not saved: %s\n", herr.msg);
    sv->saved_tokens = g->n_generated;
    sv->last_save_s = now;
}

int conversation_turn(conversation *c, const char *user_text, volatile sig_atomic_t *interrupt_flag,
                      conversation_text_fn on_text, void *user, turn_result *r, k3_error *err)
{
    if (c->remote) return remote_turn(c, user_text, interrupt_flag, on_text, user, r, err);
    history_error herr;
    memset(r, 0, sizeof *r);
    if (c->stale && c->have_row) {        /* the last prompt was cut mid-prefill: rebuild the state */
        history_message *stored = NULL;
        size_t n_stored = 0;
        if (history_msg_list(c->db, c->row.id, &stored, &n_stored, &herr)) return k3_err(err, "%s", herr.msg);
        int rc = restore_state(c, stored, n_stored, NULL, NULL, err);
        history_msg_list_free(stored, n_stored);
        if (rc) return -1;
    }
    /* the new tokens: (system on the first turn) + user message + generation prompt */
    k3_chat_msg msgs[2];
    int nm = 0;
    const char *system = system_prompt(c);
    if (k3_session_n_tokens(c->session) == 0 && system && *system) msgs[nm++] = (k3_chat_msg){"system", system, NULL};
    msgs[nm++] = (k3_chat_msg){"user", user_text, NULL};
    int n_ids = 0;
    k3_error rerr;
    int *ids = k3_model_render_chat_think(c->model, msgs, nm, 1, c->think, &n_ids, &rerr);
    if (!ids) { k3_err(err, "message not sent: %s", rerr.msg); return 1; }
    if (c->think && k3_session_n_tokens(c->session) > 0) {
        /* the thinking-effort message opens the conversation once: drop it
         * from a later turn's ids (segments are encoded apart, so it is
         * exactly the ids rendered for no message at all) */
        int n_pre = 0, *pre = k3_model_render_chat_think(c->model, NULL, 0, 0, c->think, &n_pre, &rerr);
        if (!pre) { free(ids); k3_err(err, "message not sent: %s", rerr.msg); return 1; }
        free(pre);
        memmove(ids, ids + n_pre, (size_t)(n_ids - n_pre) * sizeof *ids);
        n_ids -= n_pre;
    }
    int used = k3_session_n_tokens(c->session), limit = k3_session_max_tokens(c->session);
    if (used + n_ids + 1 > limit) {
        k3_err(err, "message not sent: it needs %d tokens but only %d of the context limit %d are left "
               "(start a new conversation or raise --ctx)", n_ids, limit - used - 1 > 0 ? limit - used - 1 : 0, limit);
        free(ids);
        return 1;
    }
    if (ensure_row(c, err)) {
        free(ids);
        return -1;
    }
    history_message um = history_message_make("user", user_text, HISTORY_COMPLETE);
    um.prompt_tokens = n_ids;
    um.token_ids = (int32_t *)ids;
    um.n_token_ids = n_ids;
    if (history_msg_add(c->db, c->row.id, &um, &herr) < 0) {
        free(ids);
        return k3_err(err, "%s", herr.msg);
    }
    r->turn = ++c->turn;
    r->prefilled_tokens = n_ids;
    double t0 = (k3_now_ns() / 1e9);
    k3_session_set_interrupt(c->session, (volatile int *)interrupt_flag);
    int rc = k3_session_eval(c->session, ids, n_ids, NULL, err);
    k3_session_set_interrupt(c->session, NULL);
    double prefill_s = (k3_now_ns() / 1e9) - t0;
    free(ids);
    generate_result g = {0};
    g.pending_token = -1;
    if (rc == K3_EVAL_INTERRUPTED) {      /* Ctrl-C during the prompt: no answer, state rebuilt next turn */
        c->stale = 1;
        r->interrupted = 1;
        r->prefill_ms = prefill_s * 1e3;
        r->text = strdup("");
        r->status = history_status_name(HISTORY_INTERRUPTED);
        history_message am = history_message_make("assistant", "", HISTORY_INTERRUPTED);
        am.prompt_tokens = n_ids;
        am.generated_tokens = 0;
        int close[64], n_close = closing_ids(c, c->think != NULL, close, err);   /* an empty answer, closed */
        if (n_close < 0) return -1;
        am.token_ids = (int32_t *)close;
        am.n_token_ids = n_close;
        am.prefill_ms = r->prefill_ms;
        if (history_msg_add(c->db, c->row.id, &am, &herr) < 0) return k3_err(err, "%s", herr.msg);
        return 0;
    }
    char *answer_sampling = sampling_json(&c->sampler, c->think);
    stream_saver saver = {.c = c, .on_text = on_text, .user = user, .message_id = -1, .prompt_tokens = n_ids,
                          .sampling = answer_sampling, .last_save_s = k3_now_ns() / 1e9, .saved_tokens = 0};
    if (rc == 0) {
        /* the answer is on disk from its start, rewritten as it grows */
        history_message pm = history_message_make("assistant", "", HISTORY_INTERRUPTED);
        pm.prompt_tokens = n_ids;
        pm.generated_tokens = 0;
        pm.prefill_ms = prefill_s * 1e3;
        pm.sampling_json = answer_sampling;
        pm.in_progress = 1;
        if ((saver.message_id = history_msg_add(c->db, c->row.id, &pm, &herr)) < 0) {
            free(answer_sampling);
            return k3_err(err, "%s", herr.msg);
        }
        if (c->think)
            rc = generate_thinking(c->session, &c->sampler, c->stops, c->n_stops, c->max_new, c->draft, interrupt_flag,
                                   saver_reasoning, saver_text, saver_progress, &saver, &g, err);
        else
            rc = generate_answer(c->session, &c->sampler, c->stops, c->n_stops, c->max_new, c->draft, interrupt_flag,
                                 saver_text, saver_progress, &saver, &g, err);
    }
    r->generated_tokens = g.n_generated;
    r->prefill_ms = prefill_s * 1e3;
    r->ttft_ms = (prefill_s + g.first_token_s) * 1e3;
    r->decode_ms = g.decode_s * 1e3;
    r->decode_tok_s = g.n_generated > 1 && g.decode_s > 0 ? (g.n_generated - 1) / g.decode_s : 0;
    r->decode_passes = g.n_passes;
    r->drafted_tokens = g.n_drafted;
    r->draft_kept_tokens = g.n_draft_kept;
    r->interrupted = g.interrupted;
    r->context_full = g.context_full;
    r->length_limit = g.length_limit;
    r->loop_period = g.loop_period;
    r->error = rc != 0;
    r->text = g.text ? g.text : strdup("");
    if (g.reasoning && *g.reasoning) r->reasoning = g.reasoning;
    else free(g.reasoning);
    r->length_in_reasoning = g.think_open && g.length_limit;
    history_status st = rc ? HISTORY_ERROR : g.interrupted ? HISTORY_INTERRUPTED : HISTORY_COMPLETE;
    r->status = history_status_name(st);
    history_message am = history_message_make("assistant", r->text, st);
    am.prompt_tokens = n_ids;
    am.generated_tokens = g.n_generated;
    am.ttft_ms = r->ttft_ms;
    am.prefill_ms = r->prefill_ms;
    am.decode_ms = r->decode_ms;
    k3_stats stats;
    k3_stats_read(c->model, &stats);
    uint64_t bytes = stats.bytes_read_trunk + stats.bytes_read_experts + stats.bytes_read_other;
    double hit = stats.expert_lookups ? (double)stats.expert_hits / stats.expert_lookups : -1;
    am.engine_stats_json = history_stats_json((int64_t)bytes, hit, (int64_t)stats.peak_rss_bytes);
    am.sampling_json = answer_sampling;
    am.reasoning = r->reasoning;
    /* the ids that close it: after the reasoning when it ended while thinking */
    int closing[64];
    int n_closing = closing_ids(c, g.think_open, closing, err);
    if (n_closing < 0) n_closing = 0, rc = -1;
    /* the exact ids this answer leaves in the session: what was generated
     * (the last one pending) and, when the turn can be closed, the closing ids */
    const int closable = rc == 0 && k3_session_n_tokens(c->session) + (g.pending_token >= 0) + n_closing <=
                                        k3_session_max_tokens(c->session);
    int32_t *answer_ids = malloc((size_t)(g.n_generated + n_closing + 1) * sizeof *answer_ids);
    int n_answer = 0;
    if (answer_ids && rc == 0) {
        int keep = closable || g.pending_token < 0 ? g.n_generated : g.n_generated - 1;
        for (int i = 0; i < keep; i++) answer_ids[n_answer++] = g.ids[i];
        if (closable)
            for (int i = 0; i < n_closing; i++) answer_ids[n_answer++] = closing[i];
    }
    am.token_ids = n_answer ? answer_ids : NULL;
    am.n_token_ids = n_answer;
    int64_t am_id = saver.message_id;
    if (am_id < 0) am_id = history_msg_add(c->db, c->row.id, &am, &herr);
    else if (history_msg_update(c->db, am_id, &am, &herr)) am_id = -1;
    free(answer_ids);
    free(g.ids);
    free(am.engine_stats_json);
    free(answer_sampling);
    if (am_id < 0) { k3_err(err, "%s", herr.msg); return -1; }
    if (rc) return -1;
    /* close the answer in the session: the pending token, then the format's
     * closing ids (<|im_end|>, or XTML close tags and <|end_of_msg|>) */
    int close_ids[66], n_close = 0;
    if (g.pending_token >= 0) close_ids[n_close++] = g.pending_token;
    memcpy(close_ids + n_close, closing, (size_t)n_closing * sizeof(int));
    n_close += n_closing;
    if (k3_session_n_tokens(c->session) + n_close > limit) {
        r->context_full = 1;
        return 0;
    }
    if (k3_session_eval(c->session, close_ids, n_close, NULL, err)) return -1;
    save_snapshot(c, am_id);
    return 0;
}

const char *conversation_uid(const conversation *c) { return c->have_row ? c->row.uid : ""; }
int64_t conversation_id(const conversation *c) { return c->have_row ? c->row.id : -1; }
int conversation_turns(const conversation *c) { return c->turn; }
int conversation_resumed_from_snapshot(const conversation *c) { return c->resumed_from_snapshot; }
k3_session *conversation_session(conversation *c) { return c->session; }
k3_sampler *conversation_sampler(conversation *c) { return &c->sampler; }

int conversation_set_system(conversation *c, const char *system, k3_error *err)
{
    history_error herr;
    if (!c->have_row) {
        free(c->pending_system);
        c->pending_system = system && *system ? strdup(system) : NULL;
        return 0;
    }
    if (c->turn > 0 || k3_session_n_tokens(c->session) > 0) {
        k3_err(err, "the conversation has begun: its system prompt stays as it was (/new starts one with the new prompt)");
        return 1;
    }
    if (history_conv_set_system(c->db, c->row.id, system, &herr)) return k3_err(err, "%s", herr.msg);
    free(c->row.system_prompt);
    c->row.system_prompt = strdup(system ? system : "");
    return 0;
}

int conversation_store_sampling(conversation *c, k3_error *err)
{
    if (!c->have_row) return 0;           /* stored with the first message */
    history_error herr;
    char *sj = sampling_json(&c->sampler, c->think);
    int rc = history_conv_set_sampling(c->db, c->row.id, sj, &herr);
    free(sj);
    return rc ? k3_err(err, "%s", herr.msg) : 0;
}

/* /set n=N: the answer length limit for the next turns. */
void conversation_set_max_new(conversation *c, int max_new) { c->max_new = max_new; }
int conversation_max_new(const conversation *c) { return c->max_new; }

/* Scripts that watch each token: called with the same user pointer as the text callback. */
void conversation_set_token_observer(conversation *c, generate_progress_fn on_token) { c->on_token = on_token; }
/* --draft: the same answers, in fewer passes when drafts hit (draft.h). */
void conversation_set_draft(conversation *c, int draft) { c->draft = draft; }
const char *conversation_system(const conversation *c)
{
    const char *s = system_prompt(c);
    return s ? s : "";
}

char *conversation_sampling_json(const conversation *c)
{
    return sampling_json(&c->sampler, c->think);
}

/* ---- a remote backend --------------------------------------------------
 * No local state: every turn sends the stored transcript (system prompt,
 * every message, the new one) to the server, which may reuse its own
 * cache. Messages are committed as they happen, as for a local model; an
 * answer cut by Ctrl-C or a failure is kept with its status. /undo, /retry
 * and /edit work on the record alone (restore_state has nothing to do). */

conversation *conversation_create_remote(remote *r, const char *model_name, history *db, const k3_sampler *sampler,
                                         int max_new, int timeout_s, int max_retries, k3_error *err)
{
    conversation *c = calloc(1, sizeof *c);
    if (!c) { k3_err(err, "out of memory"); return NULL; }
    c->remote = r;
    snprintf(c->remote_model, sizeof c->remote_model, "%s", model_name);
    c->db = db;
    c->model_dir = strdup(remote_url(r));
    c->sampler = *sampler;   /* parameters only: sampling happens on the server */
    c->sampler.probs = NULL;
    c->sampler.order = NULL;
    c->max_new = max_new;
    c->remote_timeout_s = timeout_s;
    c->remote_retries = max_retries;
    c->remote_sampling_start = c->sampler;
    if (!c->model_dir) { free(c); k3_err(err, "out of memory"); return NULL; }
    return c;
}

void conversation_set_remote_sampling_given(conversation *c, int given) { c->remote_sampling_given = given; }
void conversation_set_reasoning_fn(conversation *c, conversation_text_fn on_reasoning) { c->on_reasoning = on_reasoning; }

/* The request's sampling: a parameter goes out only when the user typed it
 * or changed it since (/set, a resumed conversation's stored setting). */
static remote_params remote_sampling(const conversation *c)
{
    const k3_sampler *now = &c->sampler, *start = &c->remote_sampling_start;
    const int given = c->remote_sampling_given;
    remote_params p = {.temperature = -1, .top_p = 0, .seed = -1, .max_tokens = c->max_new,
                       .timeout_s = c->remote_timeout_s, .max_retries = c->remote_retries};
    if ((given & 1) || now->temperature != start->temperature) p.temperature = now->temperature;
    if ((given & 4) || now->top_p != start->top_p) p.top_p = now->top_p;
    if ((given & 16) || now->seed != start->seed) p.seed = (long long)now->seed;
    return p;
}

/* What an answer records as its sampling: the parameters that went to the
 * server, no more ({} = the server's own defaults), as typed. */
static char *sent_sampling_json(const remote_params *p)
{
    json_t *o = json_object();
    if (p->temperature >= 0) json_object_set_new(o, "temperature", json_real(remote_float_decimal((float)p->temperature)));
    if (p->top_p > 0 && p->top_p < 1) json_object_set_new(o, "top_p", json_real(remote_float_decimal((float)p->top_p)));
    if (p->seed >= 0) json_object_set_new(o, "seed", json_integer(p->seed));
    char *text = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(o);
    return text;
}

remote *conversation_remote(conversation *c) { return c->remote; }
const char *conversation_remote_model(const conversation *c) { return c->remote ? c->remote_model : ""; }

/* A remote answer is as durable as a local one: its row is inserted with
 * in_progress = 1 when the request goes out and rewritten with the text so
 * far every SAVE_EVERY_S or SAVE_EVERY_TOKENS pieces (stream_saver's
 * rhythm), so a kill -9 of the client loses at most that much; a resume
 * shows it as incomplete. */
typedef struct remote_sink {
    conversation_text_fn on_text;
    void *user;
    conversation *c;
    int64_t message_id;          /* the in-progress row, or -1 when it could not be written */
    char *text;                  /* the answer so far */
    size_t len, cap;
    char *reasoning;             /* the reasoning so far */
    size_t reasoning_len, reasoning_cap;
    int pieces, saved_pieces;
    double last_save_s;
    const char *sampling;
} remote_sink;

/* Rewrite the in-progress row with the text so far (a failure costs only durability). */
static void remote_save_partial(remote_sink *rs)
{
    history_message pm = history_message_make("assistant", rs->text ? rs->text : "", HISTORY_INTERRUPTED);
    pm.generated_tokens = rs->pieces;
    pm.sampling_json = (char *)rs->sampling;
    pm.in_progress = 1;
    pm.reasoning = rs->reasoning;
    history_error herr;
    if (history_msg_update(rs->c->db, rs->message_id, &pm, &herr) && rs->saved_pieces >= 0)
        fprintf(stderr, "k3: warning: the answer so far was not saved: %s\n", herr.msg);
    rs->saved_pieces = rs->pieces;
    rs->last_save_s = k3_now_ns() / 1e9;
}

static void remote_text(void *user, const char *text, size_t len)
{
    remote_sink *rs = user;
    if (rs->on_text) rs->on_text(rs->user, text, len);
    if (rs->message_id < 0) return;
    if (text_append(&rs->text, &rs->len, &rs->cap, text, len)) return;
    rs->pieces++;
    if (rs->pieces - rs->saved_pieces >= SAVE_EVERY_TOKENS || k3_now_ns() / 1e9 - rs->last_save_s >= SAVE_EVERY_S)
        remote_save_partial(rs);
}

/* A piece of reasoning: shown by the front end, kept beside the answer. */
static void remote_reasoning(void *user, const char *text, size_t len)
{
    remote_sink *rs = user;
    if (rs->c->on_reasoning) rs->c->on_reasoning(rs->user, text, len);
    if (rs->message_id < 0) return;
    if (text_append(&rs->reasoning, &rs->reasoning_len, &rs->reasoning_cap, text, len)) return;
    rs->pieces++;
    if (rs->pieces - rs->saved_pieces >= SAVE_EVERY_TOKENS || k3_now_ns() / 1e9 - rs->last_save_s >= SAVE_EVERY_S)
        remote_save_partial(rs);
}

/* 429 retries and the like, one line each (the front ends own stdout). */
static void remote_notice(void *user, const char *line)
{
    (void)user;
    fprintf(stderr, "\nk3: %s\n", line);
}

static int remote_turn(conversation *c, const char *user_text, volatile sig_atomic_t *interrupt_flag,
                       conversation_text_fn on_text, void *user, turn_result *r, k3_error *err)
{
    history_error herr;
    memset(r, 0, sizeof *r);
    r->cached_tokens = -1;
    if (ensure_row(c, err)) return -1;
    history_message *stored = NULL;
    size_t n_stored = 0;
    if (history_msg_list(c->db, c->row.id, &stored, &n_stored, &herr)) return k3_err(err, "%s", herr.msg);
    k3_chat_msg *msgs = calloc(n_stored + 2, sizeof *msgs);
    if (!msgs) { history_msg_list_free(stored, n_stored); return k3_err(err, "out of memory"); }
    int nm = 0;
    const char *system = system_prompt(c);
    if (system && *system) msgs[nm++] = (k3_chat_msg){"system", system, NULL};
    for (size_t i = 0; i < n_stored; i++)
        if (strcmp(stored[i].role, "system")) msgs[nm++] = (k3_chat_msg){stored[i].role, stored[i].content, NULL};
    msgs[nm++] = (k3_chat_msg){"user", user_text, NULL};
    history_message um = history_message_make("user", user_text, HISTORY_COMPLETE);
    if (history_msg_add(c->db, c->row.id, &um, &herr) < 0) {
        free(msgs);
        history_msg_list_free(stored, n_stored);
        return k3_err(err, "%s", herr.msg);
    }
    r->turn = ++c->turn;
    remote_params p = remote_sampling(c);
    p.on_reasoning = remote_reasoning;
    char *answer_sampling = sent_sampling_json(&p);
    remote_sink sink = {.on_text = on_text, .user = user, .c = c, .sampling = answer_sampling,
                        .last_save_s = k3_now_ns() / 1e9};
    history_message pm = history_message_make("assistant", "", HISTORY_INTERRUPTED);
    pm.sampling_json = answer_sampling;
    pm.in_progress = 1;               /* on disk before the first byte comes back */
    sink.message_id = history_msg_add(c->db, c->row.id, &pm, &herr);
    if (sink.message_id < 0) {
        free(answer_sampling);
        free(msgs);
        history_msg_list_free(stored, n_stored);
        return k3_err(err, "%s", herr.msg);
    }
    remote_result res;
    k3_error rerr;
    int rc = remote_chat(c->remote, c->remote_model, msgs, nm, &p, interrupt_flag, remote_text, remote_notice, &sink,
                         &res, &rerr);
    free(msgs);
    history_msg_list_free(stored, n_stored);
    const int generated = res.completion_tokens >= 0 ? res.completion_tokens : res.n_chunks;
    r->prefilled_tokens = res.prompt_tokens >= 0 ? res.prompt_tokens - (res.cached_tokens > 0 ? res.cached_tokens : 0) : 0;
    r->cached_tokens = res.cached_tokens;
    r->generated_tokens = generated;
    r->ttft_ms = res.ttft_ms;
    r->prefill_ms = res.ttft_ms;
    r->decode_ms = res.total_ms - res.ttft_ms;
    r->decode_tok_s = res.tok_s;
    r->itl_p50_ms = res.itl_p50_ms;
    r->itl_p90_ms = res.itl_p90_ms;
    r->net_bytes_s = res.total_ms > 0 ? res.bytes_in / (res.total_ms * 1e-3) : 0;
    r->retries = res.retries;
    r->interrupted = res.interrupted;
    r->error = rc != 0;
    if (rc) snprintf(r->error_msg, sizeof r->error_msg, "%s", rerr.msg);
    r->text = res.text;
    res.text = NULL;
    if (res.reasoning_len) { r->reasoning = res.reasoning; res.reasoning = NULL; }
    r->length_in_reasoning = res.length_in_reasoning;
    r->length_limit = !strcmp(res.finish_reason, "length");
    remote_result_free(&res);
    history_status st = rc ? HISTORY_ERROR : res.interrupted ? HISTORY_INTERRUPTED : HISTORY_COMPLETE;
    r->status = history_status_name(st);
    history_message am = history_message_make("assistant", r->text, st);
    am.prompt_tokens = res.prompt_tokens >= 0 ? res.prompt_tokens : 0;
    am.generated_tokens = generated;
    am.ttft_ms = r->ttft_ms;
    am.decode_ms = r->decode_ms;
    json_t *stats = json_pack("{s:s, s:s, s:I, s:i, s:f, s:f, s:i}", "endpoint", remote_url(c->remote), "model",
                              c->remote_model, "bytes_in", (json_int_t)res.bytes_in, "cached_tokens", res.cached_tokens,
                              "itl_p50_ms", res.itl_p50_ms, "itl_p90_ms", res.itl_p90_ms, "retries", res.retries);
    am.engine_stats_json = stats ? json_dumps(stats, JSON_COMPACT) : NULL;
    json_decref(stats);
    am.sampling_json = answer_sampling;
    am.reasoning = r->reasoning;
    int failed = history_msg_update(c->db, sink.message_id, &am, &herr);   /* in_progress = 0: the answer ended */
    free(am.engine_stats_json);
    free(answer_sampling);
    free(sink.text);
    free(sink.reasoning);
    if (failed) return k3_err(err, "%s", herr.msg);
    return 0;
}
