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
    k3_chat_msg one = {"user", msgs[1]};
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

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "interrupt")) return interrupted_prefill(argv[2], argv[3]) ? 1 : 0;
    if (argc == 7 && !strcmp(argv[1], "equiv")) return equivalence(argv[2], argv[3], argv + 4) ? 1 : 0;
    fprintf(stderr, "usage: tool_chat equiv MODEL DB msg1 msg2 msg3\n");
    return 2;
}
