/* test_state.c - in-memory session state copies (k3_state_*, k3_session_copy):
 * a state captured at the end of a prompt and restored into another session
 * continues with bit-identical logits to one fresh prefill of the whole
 * token sequence, for Kimi Linear and Kimi K3 layouts; a state of another
 * model or too long for the session is refused. */
#include <string.h>
#include "k3.h"
#include "k3_offline.h"
#include "test.h"

/* Prefill a+b in one session; prefill a, capture, restore into a second
 * session, prefill b there: the logits after every token of b must match. */
static void check_preset(const char *preset)
{
    char dir[256], name[128];
    snprintf(dir, sizeof dir, "tests/out/state_%s", preset);
    snprintf(name, sizeof name, "state restore == fresh prefill (%s)", preset);
    TEST_BEGIN(name);
    k3_error err;
    k3_gen_opts go = {.preset = preset, .seed = 7, .shards = 1};
    k3_gen_result gr;
    CHECK(k3_gen_model(dir, &go, &gr, &err) == 0, "gen: %s", err.msg);
    k3_options opt = {.n_threads = 2, .ctx_tokens = 256};
    k3_model *m = k3_model_open(dir, &opt, &err);
    CHECK(m != NULL, "open: %s", err.msg);
    if (!m) { TEST_END(); return; }
    k3_model_info info;
    k3_model_get_info(m, &info);
    enum { NA = 45, NB = 13 };   /* a crosses a chunk boundary; b is split differently */
    int ids[NA + NB];
    for (int i = 0; i < NA + NB; i++) ids[i] = (i * 7919 + 13) % info.vocab_size;
    const size_t V = (size_t)info.vocab_size;
    float *fresh = malloc((NA + NB) * V * sizeof(float)), *cont = malloc(NB * V * sizeof(float));
    k3_session *a = k3_session_new(m, 0, &err), *b = k3_session_new(m, 0, &err), *c = k3_session_new(m, 0, &err);
    CHECK(a && b && c && fresh && cont, "alloc");
    CHECK(k3_session_eval(a, ids, NA + NB, fresh, &err) == 0, "eval: %s", err.msg);
    k3_session_reset(a);
    CHECK(k3_session_eval(a, ids, NA, NULL, &err) == 0, "eval: %s", err.msg);
    k3_state *st = k3_state_capture(a, &err);
    CHECK(st && k3_state_n_tokens(st) == NA, "capture: %s", err.msg);
    CHECK(st && k3_state_bytes(st) == k3_state_bytes_for(m, NA), "bytes %zu vs %zu", k3_state_bytes(st),
          k3_state_bytes_for(m, NA));
    /* b is dirty first: restore must overwrite everything that matters */
    CHECK(k3_session_eval(b, ids + 3, 20, NULL, &err) == 0, "eval: %s", err.msg);
    CHECK(k3_state_restore(b, st, &err) == 0, "restore: %s", err.msg);
    CHECK(k3_session_n_tokens(b) == NA, "restored %d tokens", k3_session_n_tokens(b));
    CHECK(memcmp(k3_session_logits(b), fresh + (NA - 1) * V, V * sizeof(float)) == 0,
          "restored logits differ from the fresh prefill");
    CHECK(k3_session_eval(b, ids + NA, NB, cont, &err) == 0, "eval: %s", err.msg);
    CHECK(memcmp(cont, fresh + NA * V, NB * V * sizeof(float)) == 0, "continued logits differ from a fresh prefill");
    CHECK(memcmp(k3_session_tokens(b), ids, sizeof ids) == 0, "token history differs");
    /* k3_session_copy forks a live session */
    CHECK(k3_session_copy(c, b, &err) == 0, "copy: %s", err.msg);
    CHECK(memcmp(k3_session_logits(c), fresh + (NA + NB - 1) * V, V * sizeof(float)) == 0, "copied logits differ");
    /* too long for a smaller session: refused, nothing half-restored */
    k3_session *small = k3_session_new(m, 16, &err);
    CHECK(small && k3_state_restore(small, st, &err) != 0 && strstr(err.msg, "context"), "small restore not refused");
    k3_session_free(small);
    k3_state_free(st);
    k3_session_free(a);
    k3_session_free(b);
    k3_session_free(c);
    free(fresh);
    free(cont);
    k3_model_close(m);
    TEST_END();
}

int main(void)
{
    check_preset("tiny");
    check_preset("k3-tiny");
    TEST_EXIT();
}
