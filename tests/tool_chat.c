/* tool_chat.c - drives the real conversation controller (chat/conversation.c)
 * for tests/t_chat.sh.
 *
 *   tool_chat equiv MODEL DB "msg1" "msg2" "msg3"
 *       three greedy turns; then the session's logits must equal, bit for
 *       bit, one pass over all the tokens the session holds (the rendered
 *       transcript), and turn 2 must have prefilled only its own tokens.
 *   tool_chat interrupt MODEL DB
 *       Ctrl-C during a long prompt: the turn stops at a chunk boundary with
 *       no answer (stored as interrupted), and the next turn rebuilds the
 *       state: it equals one pass over the session's tokens.
 *   tool_chat redo MODEL DB
 *       /retry, /undo and /edit on the real controller: after each the
 *       session's logits equal, bit for bit, a fresh session fed the same
 *       transcript; the greedy answer of /retry (and of the turn re-sent after
 *       /undo) equals the original; each restores from the turn-boundary
 *       snapshot, so it evaluates only the last message and its answer, never
 *       the whole conversation; the record drops the undone exchange.
 *   tool_chat think MODEL DB EFFORT
 *       two thinking turns on a Kimi K3 model (t_think.sh forces the
 *       tokens with K3_TEST_FORCE_IDS: reasoning, <|close|>, answer,
 *       <|end_of_msg|>, twice; then a reasoning longer than -n): the reasoning is stored beside the answer, not in it;
 *       turn 2 prefilled only its message (the thinking-effort message is
 *       not repeated); the kept state equals the template's rendering of
 *       the record (k3_model_render_chat_think with the stored reasoning),
 *       and a resume from the record rebuilds the same state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "history.h"
#include "k3.h"
#include "conversation.h"

static int equivalence(const char *dir, const char *db_path, char **msgs)
{
    k3_error err;
    history_error herr;
    k3_options opt = {.need_tokenizer = 1};
    k3_model *m = k3_model_open(dir, &opt, &err);
    history *db = m ? history_open(db_path, 0, &herr) : NULL;
    if (!m || !db) { printf("FAIL equivalence setup: %s\n", m ? herr.msg : err.msg); return 1; }
    k3_sampler sp = {.temperature = 0, .top_p = 1};
    conversation *c = conversation_create(m, db, dir, &sp, 12, 1024, &err);
    if (!c || conversation_start(c, "Be brief.", &err)) { printf("FAIL equivalence: %s\n", err.msg); return 1; }
    int fails = 0, turn2_prefill = -1;
    for (int t = 0; t < 3; t++) {
        turn_result r;
        if (conversation_turn(c, msgs[t], NULL, NULL, NULL, &r, &err)) { printf("FAIL turn %d: %s\n", t + 1, err.msg); return 1; }
        if (t == 1) turn2_prefill = r.prefilled_tokens;
        turn_result_free(&r);
    }
    /* turn 2 prefilled exactly the rendering of its user message + prompt */
    k3_chat_msg one = {"user", msgs[1], NULL};
    int n_one = 0;
    int *ids_one = k3_model_render_chat(m, &one, 1, 1, &n_one, &err);
    if (ids_one && turn2_prefill == n_one) printf("PASS turn 2 prefilled only its %d new tokens\n", n_one);
    else { printf("FAIL turn 2 prefilled %d tokens, its own rendering has %d\n", turn2_prefill, n_one); fails++; }
    free(ids_one);
    /* incremental state == one pass over the whole transcript */
    k3_session *s = conversation_session(c);
    int n = k3_session_n_tokens(s);
    k3_model_info info;
    k3_model_get_info(m, &info);
    float *incremental = malloc((size_t)info.vocab_size * sizeof(float));
    memcpy(incremental, k3_session_logits(s), (size_t)info.vocab_size * sizeof(float));
    k3_session *fresh = k3_session_new(m, 1024, &err);
    int *all = malloc((size_t)n * sizeof *all);
    memcpy(all, k3_session_tokens(s), (size_t)n * sizeof *all);
    if (!fresh || k3_session_eval(fresh, all, n, NULL, &err)) { printf("FAIL one pass: %s\n", err.msg); return 1; }
    if (!memcmp(incremental, k3_session_logits(fresh), (size_t)info.vocab_size * sizeof(float)))
        printf("PASS three turns incrementally == one pass over the %d-token transcript (bit-identical logits)\n", n);
    else { printf("FAIL incremental turns differ from one pass over the transcript\n"); fails++; }
    free(all);
    free(incremental);
    k3_session_free(fresh);
    conversation_free(c);
    history_close(db);
    k3_model_close(m);
    return fails;
}

/* Do the session's ids equal the rendering of the stored record? */
static int state_is_record(k3_model *m, history *db, conversation *c, const char *effort, const char *label)
{
    history_message *msgs = NULL;
    size_t n = 0;
    history_error herr;
    k3_error err;
    if (history_msg_list(db, conversation_id(c), &msgs, &n, &herr)) { printf("FAIL %s: %s\n", label, herr.msg); return 1; }
    k3_chat_msg *cm = calloc(n + 1, sizeof *cm);
    int nm = 0;
    cm[nm++] = (k3_chat_msg){"system", conversation_system(c), NULL};
    for (size_t i = 0; i < n; i++) cm[nm++] = (k3_chat_msg){msgs[i].role, msgs[i].content, msgs[i].reasoning};
    int n_ids = 0, *ids = k3_model_render_chat_think(m, cm, nm, 0, effort, &n_ids, &err);
    k3_session *s = conversation_session(c);
    int same = ids && n_ids == k3_session_n_tokens(s) && !memcmp(ids, k3_session_tokens(s), (size_t)n_ids * sizeof *ids);
    if (same) printf("PASS %s: the %d ids the session holds == the template's rendering of the record\n", label, n_ids);
    else {
        int at = 0;
        while (ids && at < n_ids && at < k3_session_n_tokens(s) && ids[at] == k3_session_tokens(s)[at]) at++;
        printf("FAIL %s: session %d ids, rendering of the record %d, first difference at %d\n", label,
               k3_session_n_tokens(s), n_ids, at);
    }
    free(ids);
    free(cm);
    history_msg_list_free(msgs, n);
    return !same;
}

static int thinking(const char *dir, const char *db_path, const char *effort)
{
    k3_error err;
    history_error herr;
    k3_options opt = {.need_tokenizer = 1};
    k3_model *m = k3_model_open(dir, &opt, &err);
    history *db = m ? history_open(db_path, 0, &herr) : NULL;
    if (!m || !db) { printf("FAIL think setup: %s\n", m ? herr.msg : err.msg); return 1; }
    k3_sampler sp = {.temperature = 0, .top_p = 1};
    conversation *c = conversation_create(m, db, dir, &sp, 40, 2048, &err);
    if (!c || conversation_set_think(c, effort, &err) || conversation_start(c, "Be brief.", &err)) {
        printf("FAIL think: %s\n", err.msg);
        return 1;
    }
    const char *said[3] = {"Hello there", "What is 2+2?", "And a long one?"};
    char *reasoning[3] = {0}, *answer[3] = {0};
    int fails = 0, prefill2 = 0, cut_in_reasoning = 0;
    for (int t = 0; t < 3; t++) {
        turn_result r;
        if (conversation_turn(c, said[t], NULL, NULL, NULL, &r, &err)) { printf("FAIL think turn %d: %s\n", t + 1, err.msg); return 1; }
        reasoning[t] = r.reasoning ? strdup(r.reasoning) : NULL;
        answer[t] = strdup(r.text);
        if (t == 1) prefill2 = r.prefilled_tokens;
        if (t == 2) cut_in_reasoning = r.length_in_reasoning && !*r.text && r.reasoning && r.generated_tokens == 40;
        turn_result_free(&r);
    }
    /* the record: reasoning beside the answer */
    history_message *msgs = NULL;
    size_t n = 0;
    int stored_ok = !history_msg_list(db, conversation_id(c), &msgs, &n, &herr) && n == 6;
    stored_ok = stored_ok && answer[0] && !strcmp(answer[0], "Hi there!") && answer[1] && !strcmp(answer[1], "4");
    for (int t = 0; stored_ok && t < 2; t++) {
        const history_message *a = &msgs[2 * t + 1];
        stored_ok = reasoning[t] && *reasoning[t] && a->reasoning && !strcmp(a->reasoning, reasoning[t]) &&
                    !strcmp(a->content, answer[t]) && !strstr(a->content, reasoning[t]);
    }
    if (stored_ok) printf("PASS think %s: each answer's reasoning stored in its own column, the answer apart (\"%.20s\"...)\n",
                          effort, msgs[1].reasoning);
    else { printf("FAIL think %s: reasoning not stored apart (%zu messages)\n", effort, n); fails++; }
    if (cut_in_reasoning && n == 6 && msgs[5].reasoning && !strcmp(msgs[5].reasoning, reasoning[2]) && !*msgs[5].content)
        printf("PASS think %s: an answer cut by -n while thinking says so (no answer; its reasoning \"%.16s...\" kept)\n",
               effort, reasoning[2]);
    else { printf("FAIL think %s: the answer cut while thinking (flag %d)\n", effort, cut_in_reasoning); fails++; }
    history_msg_list_free(msgs, n);
    /* turn 2's prompt: its message and the generation prompt, no second effort message */
    k3_chat_msg one = {"user", said[1], NULL};
    int n_one = 0, n_pre = 0;
    int *ids_one = k3_model_render_chat_think(m, &one, 1, 1, effort, &n_one, &err);
    int *pre = k3_model_render_chat_think(m, NULL, 0, 0, effort, &n_pre, &err);
    if (ids_one && pre && n_pre > 0 && prefill2 == n_one - n_pre)
        printf("PASS think %s: turn 2 prefilled only its %d new tokens (the %d-token effort message once)\n", effort,
               prefill2, n_pre);
    else { printf("FAIL think %s: turn 2 prefilled %d, expected %d - %d\n", effort, prefill2, n_one, n_pre); fails++; }
    free(ids_one);
    free(pre);
    char label[64];
    snprintf(label, sizeof label, "think %s live", effort);
    fails += state_is_record(m, db, c, effort, label);
    /* a new controller resumes it from the record alone (no snapshot) */
    char uid[64];
    snprintf(uid, sizeof uid, "%s", conversation_uid(c));
    conversation_free(c);
    history_close(db);
    db = history_open(db_path, 0, &herr);
    char rm[4200];
    snprintf(rm, sizeof rm, "rm -rf '%s.snapshots'", db_path);   /* no snapshot: rebuilt from the record's ids */
    if (system(rm)) printf("FAIL think: %s\n", rm);
    c = conversation_create(m, db, dir, &sp, 40, 2048, &err);
    int from_snapshot = -1;
    if (!c || conversation_resume(c, uid, NULL, NULL, &from_snapshot, &err)) { printf("FAIL think resume: %s\n", err.msg); return 1; }
    snprintf(label, sizeof label, "think %s resumed (%s)", effort, from_snapshot ? "snapshot" : "re-prefill");
    fails += state_is_record(m, db, c, conversation_think(c), label);
    for (int t = 0; t < 3; t++) { free(reasoning[t]); free(answer[t]); }
    conversation_free(c);
    history_close(db);
    k3_model_close(m);
    return fails;
}

static int interrupted_prefill(const char *dir, const char *db_path)
{
    k3_error err;
    history_error herr;
    k3_options opt = {.need_tokenizer = 1};
    k3_model *m = k3_model_open(dir, &opt, &err);
    history *db = m ? history_open(db_path, 0, &herr) : NULL;
    if (!m || !db) { printf("FAIL interrupt setup\n"); return 1; }
    k3_sampler sp = {.temperature = 0, .top_p = 1};
    conversation *c = conversation_create(m, db, dir, &sp, 8, 2048, &err);
    if (!c || conversation_start(c, NULL, &err)) { printf("FAIL interrupt: %s\n", err.msg); return 1; }
    turn_result r;
    volatile sig_atomic_t flag = 0;
    if (conversation_turn(c, "A first short question?", &flag, NULL, NULL, &r, &err)) { printf("FAIL turn 1\n"); return 1; }
    turn_result_free(&r);
    int before = k3_session_n_tokens(conversation_session(c));
    char longmsg[4096] = "";
    for (int i = 0; i < 40; i++) strcat(longmsg, "a long prompt that takes several chunks to prefill ");
    flag = 1;                              /* Ctrl-C already pressed when the prompt starts */
    int rc = conversation_turn(c, longmsg, &flag, NULL, NULL, &r, &err);
    int after = k3_session_n_tokens(conversation_session(c));
    int fails = 0;
    if (rc == 0 && r.interrupted && r.generated_tokens == 0 && !strcmp(r.status, "interrupted") && after < before + r.prefilled_tokens)
        printf("PASS Ctrl-C during a %d-token prompt stops at a chunk boundary (%d of them prefilled), stored as interrupted\n",
               r.prefilled_tokens, after - before);
    else { printf("FAIL interrupted prefill: rc %d interrupted %d tokens %d -> %d\n", rc, r.interrupted, before, after); fails++; }
    turn_result_free(&r);
    flag = 0;
    if (conversation_turn(c, "And now?", &flag, NULL, NULL, &r, &err)) { printf("FAIL turn 3: %s\n", err.msg); return 1; }
    turn_result_free(&r);
    k3_session *s = conversation_session(c);
    int n = k3_session_n_tokens(s);
    k3_model_info info;
    k3_model_get_info(m, &info);
    k3_session *fresh = k3_session_new(m, 2048, &err);
    int *all = malloc((size_t)n * sizeof *all);
    memcpy(all, k3_session_tokens(s), (size_t)n * sizeof *all);
    if (!fresh || k3_session_eval(fresh, all, n, NULL, &err)) { printf("FAIL one pass: %s\n", err.msg); return 1; }
    if (!memcmp(k3_session_logits(s), k3_session_logits(fresh), (size_t)info.vocab_size * sizeof(float)))
        printf("PASS the next turn rebuilt the state: equal to one pass over its %d tokens\n", n);
    else { printf("FAIL state after an interrupted prefill differs from one pass\n"); fails++; }
    free(all);
    k3_session_free(fresh);
    conversation_free(c);
    history_close(db);
    k3_model_close(m);
    return fails;
}

/* The session's logits against one pass of a fresh session over the same tokens. */
static int same_as_fresh(k3_model *m, k3_session *s, int ctx)
{
    k3_error err;
    k3_model_info info;
    k3_model_get_info(m, &info);
    int n = k3_session_n_tokens(s);
    k3_session *fresh = k3_session_new(m, ctx, &err);
    if (!fresh) return 0;
    int ok = k3_session_eval(fresh, k3_session_tokens(s), n, NULL, &err) == 0 &&
             !memcmp(k3_session_logits(s), k3_session_logits(fresh), (size_t)info.vocab_size * sizeof(float));
    k3_session_free(fresh);
    return ok;
}

/* Tokens the engine evaluated so far (prompt + decode). */
static uint64_t evaluated(k3_model *m)
{
    k3_stats st;
    k3_stats_read(m, &st);
    return st.tokens_prefilled + st.tokens_decoded;
}

static int redo(const char *dir, const char *db_path)
{
    k3_error err;
    history_error herr;
    k3_options opt = {.need_tokenizer = 1};
    k3_model *m = k3_model_open(dir, &opt, &err);
    history *db = m ? history_open(db_path, 0, &herr) : NULL;
    if (!m || !db) { printf("FAIL redo setup\n"); return 1; }
    k3_sampler sp = {.temperature = 0, .top_p = 1};
    const int ctx = 2048;
    conversation *c = conversation_create(m, db, dir, &sp, 16, ctx, &err);
    if (!c || conversation_start(c, "Be brief.", &err)) { printf("FAIL redo: %s\n", err.msg); return 1; }
    const char *msgs[3] = {"Hello there, how are you today?", "What is the capital of France?", "Tell me a short story."};
    char *answers[3] = {0};
    int fails = 0, n_after[3] = {0};
    turn_result r;
    for (int t = 0; t < 3; t++) {
        if (conversation_turn(c, msgs[t], NULL, NULL, NULL, &r, &err)) { printf("FAIL redo turn %d: %s\n", t + 1, err.msg); return 1; }
        answers[t] = strdup(r.text);
        n_after[t] = k3_session_n_tokens(conversation_session(c));
        turn_result_free(&r);
    }
    k3_session *s = conversation_session(c);
    int total = n_after[2];
    /* /retry */
    uint64_t e0 = evaluated(m);
    if (conversation_retry(c, NULL, NULL, NULL, &r, &err)) { printf("FAIL retry: %s\n", err.msg); return 1; }
    uint64_t spent = evaluated(m) - e0;
    int last_exchange = total - n_after[1];
    if (!strcmp(r.text, answers[2]) && k3_session_n_tokens(s) == total && same_as_fresh(m, s, ctx))
        printf("PASS /retry: same greedy answer, logits bit-identical to a fresh session over the %d-token transcript\n", total);
    else { printf("FAIL /retry: answer '%s' vs '%s', %d tokens vs %d, or logits differ\n", r.text, answers[2], k3_session_n_tokens(s), total); fails++; }
    if (spent <= (uint64_t)last_exchange)
        printf("PASS /retry evaluated %llu tokens (the last exchange is %d, the conversation %d): no re-prefill\n",
               (unsigned long long)spent, last_exchange, total);
    else { printf("FAIL /retry evaluated %llu tokens, more than the last exchange (%d)\n", (unsigned long long)spent, last_exchange); fails++; }
    turn_result_free(&r);
    /* /undo */
    e0 = evaluated(m);
    if (conversation_undo(c, NULL, NULL, &err)) { printf("FAIL undo: %s\n", err.msg); return 1; }
    spent = evaluated(m) - e0;
    history_message *list = NULL;
    size_t n = 0;
    history_msg_list(db, conversation_id(c), &list, &n, &herr);
    if (k3_session_n_tokens(s) == n_after[1] && same_as_fresh(m, s, ctx) && n == 4 && spent == 0 && conversation_turns(c) == 2)
        printf("PASS /undo: 4 messages left, state of %d tokens loaded from the turn-boundary snapshot (0 evaluated), "
               "bit-identical to a fresh session\n", n_after[1]);
    else { printf("FAIL /undo: %d tokens (want %d), %zu messages, %llu evaluated\n", k3_session_n_tokens(s), n_after[1], n,
                  (unsigned long long)spent); fails++; }
    history_msg_list_free(list, n);
    if (conversation_turn(c, msgs[2], NULL, NULL, NULL, &r, &err)) { printf("FAIL turn after undo: %s\n", err.msg); return 1; }
    if (!strcmp(r.text, answers[2]) && same_as_fresh(m, s, ctx)) printf("PASS the message re-sent after /undo gets the same greedy answer\n");
    else { printf("FAIL after /undo the answer differs: '%s' vs '%s'\n", r.text, answers[2]); fails++; }
    turn_result_free(&r);
    /* twice /undo: back to the first boundary, then to nothing */
    if (conversation_undo(c, NULL, NULL, &err) || conversation_undo(c, NULL, NULL, &err)) { printf("FAIL undo x2: %s\n", err.msg); return 1; }
    if (k3_session_n_tokens(s) == n_after[0] && same_as_fresh(m, s, ctx)) printf("PASS /undo twice: the state after turn 1, bit-identical\n");
    else { printf("FAIL /undo twice: %d tokens, want %d\n", k3_session_n_tokens(s), n_after[0]); fails++; }
    if (conversation_undo(c, NULL, NULL, &err) == 0 && k3_session_n_tokens(s) == 0 && conversation_undo(c, NULL, NULL, &err) == 1)
        printf("PASS /undo of the first exchange empties the state; one more says: %s\n", err.msg);
    else { printf("FAIL /undo to empty\n"); fails++; }
    /* /edit: the first message replaced; the system prompt still applies */
    if (conversation_turn(c, msgs[0], NULL, NULL, NULL, &r, &err)) { printf("FAIL turn 1 again\n"); return 1; }
    int same_first = !strcmp(r.text, answers[0]);
    turn_result_free(&r);
    if (conversation_edit(c, msgs[1], NULL, NULL, NULL, &r, &err)) { printf("FAIL edit: %s\n", err.msg); return 1; }
    turn_result_free(&r);
    char *last = conversation_last_user_text(c);
    history_msg_list(db, conversation_id(c), &list, &n, &herr);
    if (same_first && last && !strcmp(last, msgs[1]) && n == 2 && same_as_fresh(m, s, ctx))
        printf("PASS /edit: the last message replaced in the record (2 messages), state bit-identical to a fresh session\n");
    else { printf("FAIL /edit: last '%s', %zu messages, first answer again same %d\n", last ? last : "(none)", n, same_first); fails++; }
    history_msg_list_free(list, n);
    free(last);
    for (int t = 0; t < 3; t++) free(answers[t]);
    conversation_free(c);
    history_close(db);
    k3_model_close(m);
    return fails;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "think")) return thinking(argv[2], argv[3], argv[4]) ? 1 : 0;
    if (argc == 4 && !strcmp(argv[1], "redo")) return redo(argv[2], argv[3]) ? 1 : 0;
    if (argc == 4 && !strcmp(argv[1], "interrupt")) return interrupted_prefill(argv[2], argv[3]) ? 1 : 0;
    if (argc == 7 && !strcmp(argv[1], "equiv")) return equivalence(argv[2], argv[3], argv + 4) ? 1 : 0;
    fprintf(stderr, "usage: tool_chat equiv MODEL DB msg1 msg2 msg3\n");
    return 2;
}
