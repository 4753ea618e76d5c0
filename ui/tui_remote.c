/* tui_remote.c - the figures of a remote backend (k3 chat --endpoint) for
 * the gauge panel. Three sources, none estimated:
 *  - the server's own /metrics (chat/remote_metrics.h), read once a second
 *    by a thread of its own so a slow or absent server never stalls the
 *    screen; for k3 serve the remote engine's counters become a k3_stats,
 *    so the disk, expert-cache and memory sections draw them as they draw
 *    a local engine's;
 *  - the bytes the stream brought in (remote_bytes_in), as a rate;
 *  - the times the answer's pieces arrived (the worker stamps them), for
 *    TTFT, tokens/s and inter-token p50/p90 while the answer streams, then
 *    the turn's own result. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "k3_util.h"
#include "tui_internal.h"

#define POLL_S 1                 /* /metrics once a second */
#define POLL_AFTER_FAILURE_S 5   /* a server without /metrics is asked less often */
#define METRICS_TIMEOUT_S 3

/* Sleep until the next poll or until stop is set (under mu). */
static void nap(tui_remote_gauges *rg, int seconds)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += seconds;
    while (!rg->stop && pthread_cond_timedwait(&rg->cv, &rg->mu, &until) != ETIMEDOUT) {}
}

/* The poller: GET /metrics, parse, publish, sleep; until stopped. */
static void *poller_main(void *arg)
{
    tui_remote_gauges *rg = arg;
    pthread_mutex_lock(&rg->mu);
    while (!rg->stop) {
        pthread_mutex_unlock(&rg->mu);
        size_t len = 0;
        k3_error err = {{0}};
        remote_metrics m;
        char *text = remote_get_metrics(rg->r, &len, METRICS_TIMEOUT_S, &err);
        int ok = text != NULL;
        const double now_s = k3_now_ns() / 1e9;
        if (ok) remote_metrics_parse(text, len, &m);
        free(text);
        pthread_mutex_lock(&rg->mu);
        if (ok) {
            if (rg->polled_ok) remote_metrics_between(&rg->polled, &m, now_s - rg->polled_s);   /* rates between polls */
            rg->polled_s = now_s;
            rg->polled = m;
            rg->polled_err[0] = 0;
        } else {
            snprintf(rg->polled_err, sizeof rg->polled_err, "%.200s", err.msg);
        }
        rg->polled_ok = ok;
        rg->n_polls++;
        nap(rg, ok ? POLL_S : POLL_AFTER_FAILURE_S);
    }
    pthread_mutex_unlock(&rg->mu);
    return NULL;
}

/* Unknown figures start as "not known" (negative), the host is kept for titles. */
int tui_remote_start(tui_remote_gauges *rg, remote *r)
{
    memset(rg, 0, sizeof *rg);
    rg->r = r;
    rg->net_bps = rg->ttft_ms = rg->tok_s = rg->itl_p50_ms = rg->itl_p90_ms = -1;
    rg->cached_tokens = rg->prompt_tokens = -1;
    const char *u = remote_url(r), *p = strstr(u, "://");
    snprintf(rg->host, sizeof rg->host, "%s", p ? p + 3 : u);
    pthread_mutex_init(&rg->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&rg->cv, &ca);
    pthread_condattr_destroy(&ca);
    sigset_t ui_signals, old;                   /* the UI thread takes every signal */
    sigemptyset(&ui_signals);
    int blocked[] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH, SIGCONT, SIGTSTP, SIGQUIT};
    for (size_t i = 0; i < sizeof blocked / sizeof blocked[0]; i++) sigaddset(&ui_signals, blocked[i]);
    pthread_sigmask(SIG_BLOCK, &ui_signals, &old);
    int rc = pthread_create(&rg->poller, NULL, poller_main, rg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) return -1;
    rg->poller_started = 1;
    return 0;
}

/* Wake the poller and wait for it (a GET in flight ends within its timeout). */
void tui_remote_stop(tui_remote_gauges *rg)
{
    if (!rg->r) return;
    if (rg->poller_started) {
        pthread_mutex_lock(&rg->mu);
        rg->stop = 1;
        pthread_cond_signal(&rg->cv);
        pthread_mutex_unlock(&rg->mu);
        pthread_join(rg->poller, NULL);
        rg->poller_started = 0;
    }
    pthread_mutex_destroy(&rg->mu);
    pthread_cond_destroy(&rg->cv);
    rg->r = NULL;
}

/* A figure the server gave, else 0 (only used where `have` was checked by the panel). */
static uint64_t u64(const remote_figure *f) { return f->have && f->v > 0 ? (uint64_t)f->v : 0; }

/* The poller's latest reading into the UI's copy; a k3 serve engine's
 * counters into out (the panel's disk, cache and memory sections draw
 * them); the stream's byte rate over at least 500 ms. */
void tui_remote_sample(tui_remote_gauges *rg, k3_stats *out, double now_s)
{
    pthread_mutex_lock(&rg->mu);
    if (rg->n_polls != rg->polls_seen) {
        rg->polls_seen = rg->n_polls;
        rg->have_m = rg->polled_ok;
        if (rg->polled_ok) rg->m = rg->polled;
        snprintf(rg->m_err, sizeof rg->m_err, "%s", rg->polled_err);
    }
    pthread_mutex_unlock(&rg->mu);
    memset(out, 0, sizeof *out);
    if (rg->have_m && rg->m.kind == REMOTE_K3) {
        const remote_metrics *m = &rg->m;
        out->bytes_read_trunk = u64(&m->bytes_trunk);
        out->bytes_read_experts = u64(&m->bytes_experts);
        out->bytes_read_other = u64(&m->bytes_other);
        out->expert_lookups = u64(&m->expert_lookups);
        out->expert_hits = u64(&m->expert_hits);
        out->expert_misses = out->expert_lookups - out->expert_hits;
        out->budget_bytes = u64(&m->mem_budget);
        out->pinned_trunk_bytes = u64(&m->mem_trunk);
        out->ring_bytes = u64(&m->mem_ring);
        out->expert_cache_bytes = u64(&m->mem_cache);
        out->state_bytes = u64(&m->mem_state);
        out->other_bytes = u64(&m->mem_other);
        out->rss_bytes = u64(&m->rss);
        out->n_layers = (uint32_t)u64(&m->n_layers);
        out->layer = (uint32_t)u64(&m->layer);
        out->phase = (uint32_t)u64(&m->phase);
    }
    uint64_t bytes = remote_bytes_in(rg->r);
    if (rg->net_t0 == 0) {
        rg->net_t0 = now_s;
        rg->net_b0 = bytes;
    } else if (now_s - rg->net_t0 >= 0.5) {
        rg->net_bps = (double)(bytes - rg->net_b0) / (now_s - rg->net_t0);
        rg->net_t0 = now_s;
        rg->net_b0 = bytes;
    }
    rg->net_answer_bytes = bytes - rg->net_turn_b0;
}

/* This answer's figures start unknown. */
void tui_remote_turn_start(tui_remote_gauges *rg)
{
    rg->net_turn_b0 = remote_bytes_in(rg->r);
    rg->net_answer_bytes = 0;
    rg->n_pieces = 0;
    rg->ttft_ms = rg->tok_s = rg->itl_p50_ms = rg->itl_p90_ms = -1;
    rg->cached_tokens = rg->prompt_tokens = -1;
}

/* The turn's own figures (from the whole stream, with the server's usage). */
void tui_remote_turn_end(tui_remote_gauges *rg, const turn_result *r)
{
    if (!r) return;
    if (r->generated_tokens > 0) rg->ttft_ms = r->ttft_ms;
    rg->tok_s = r->generated_tokens > 1 && r->decode_tok_s > 0 ? r->decode_tok_s : -1;
    rg->itl_p50_ms = r->generated_tokens > 1 ? r->itl_p50_ms : -1;
    rg->itl_p90_ms = r->generated_tokens > 1 ? r->itl_p90_ms : -1;
    rg->cached_tokens = r->cached_tokens;
    rg->prompt_tokens = r->cached_tokens >= 0 ? r->prefilled_tokens + r->cached_tokens : -1;
}

int tui_remote_has_engine(const tui_gauges *g)
{
    return g->remote.r && g->remote.have_m && g->remote.m.kind == REMOTE_K3;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* While busy: the pieces so far, as the worker stamped them. */
void tui_remote_live(tui_gauges *g, tui_worker *w)
{
    tui_remote_gauges *rg = &g->remote;
    if (!rg->r || !g->busy) return;
    static float gaps[TUI_GAPS_MAX];             /* UI thread only */
    pthread_mutex_lock(&w->mu);
    int n = w->n_pieces, n_gaps = w->n_gaps;
    uint64_t first = w->first_piece_ns, last = w->last_piece_ns;
    memcpy(gaps, w->gaps_ms, (size_t)n_gaps * sizeof gaps[0]);
    pthread_mutex_unlock(&w->mu);
    rg->n_pieces = n;
    if (n > 0) rg->ttft_ms = (first * 1e-9 - g->turn_start_s) * 1e3;
    if (n > 1 && last > first) rg->tok_s = (n - 1) / ((last - first) * 1e-9);
    if (n_gaps > 0) {
        qsort(gaps, (size_t)n_gaps, sizeof gaps[0], cmp_float);
        rg->itl_p50_ms = gaps[(n_gaps - 1) / 2];
        rg->itl_p90_ms = gaps[(int)((n_gaps - 1) * 0.9)];
    }
}
