/* generate.c - see generate.h. */
#include <stdlib.h>
#include <string.h>
#include "generate.h"

/* Append to a growing string. */
static int append_text(char **buf, size_t *len, size_t *cap, const char *p, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        while (c < *len + n + 1) c *= 2;
        char *g = realloc(*buf, c);
        if (!g) return -1;
        *buf = g;
        *cap = c;
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    (*buf)[*len] = 0;
    return 0;
}

int generate_answer(k3_session *s, k3_sampler *sp, const int *stop_ids, int n_stop_ids,
                    int max_new, volatile sig_atomic_t *interrupt_flag, generate_text_fn on_text,
                    generate_progress_fn on_progress, void *user, generate_result *out, k3_error *err)
{
    memset(out, 0, sizeof *out);
    out->stopped_on = -1;
    out->pending_token = -1;
    size_t len = 0, cap = 0;
    if (append_text(&out->text, &len, &cap, "", 0)) return k3_err(err, "out of memory");
    const k3_tokenizer *tok = k3_model_tokenizer(k3_session_model(s));
    k3_detok dt;
    k3_detok_init(&dt, tok);
    const int n_base = k3_tokenizer_n_base(tok);
    char piece[256];
    const double t0 = (k3_now_ns() / 1e9);
    double t_first = t0;
    int rc = 0;
    while (out->n_generated < max_new) {
        if (interrupt_flag && __atomic_load_n(interrupt_flag, __ATOMIC_RELAXED)) { out->interrupted = 1; break; }
        if (out->pending_token >= 0) {          /* feed the previous token, then sample anew */
            if (k3_session_n_tokens(s) >= k3_session_max_tokens(s)) { out->context_full = 1; break; }
            if (k3_session_eval(s, &out->pending_token, 1, NULL, err)) { rc = -1; break; }
            out->pending_token = -1;
            if (interrupt_flag && __atomic_load_n(interrupt_flag, __ATOMIC_RELAXED)) { out->interrupted = 1; break; }
        }
        int next = k3_sample(sp, k3_session_logits(s));
        for (int i = 0; i < n_stop_ids; i++)
            if (next == stop_ids[i]) out->stopped_on = next;
        if (out->stopped_on >= 0) break;
        out->pending_token = next;
        int *grown = realloc(out->ids, (size_t)(out->n_generated + 1) * sizeof *grown);
        if (!grown) { rc = k3_err(err, "out of memory"); break; }
        out->ids = grown;
        out->ids[out->n_generated] = next;
        out->n_generated++;
        if (out->n_generated == 1) {
            t_first = (k3_now_ns() / 1e9);
            out->first_token_s = t_first - t0;
        }
        /* special and reserved tokens are not text: not shown (as llama.cpp
         * without --special), still part of the session */
        size_t n = next < n_base ? k3_detok_push(&dt, next, piece, sizeof piece) : 0;
        if (n) {
            if (append_text(&out->text, &len, &cap, piece, n)) { rc = k3_err(err, "out of memory"); break; }
            if (on_text) on_text(user, piece, n);
        }
        if (on_progress) on_progress(user, out);
    }
    out->length_limit = rc == 0 && out->n_generated >= max_new && out->stopped_on < 0 && !out->interrupted;
    size_t n = k3_detok_flush(&dt, piece, sizeof piece);
    if (n && append_text(&out->text, &len, &cap, piece, n) == 0 && on_text) on_text(user, piece, n);
    out->decode_s = out->n_generated ? (k3_now_ns() / 1e9) - t_first : 0;
    return rc;
}
