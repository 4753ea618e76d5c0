/* tui_gauges.c - turn the engine's live counters (k3_stats_read, lock-free,
 * safe while the worker computes) into what the panel shows: a disk rate
 * over at least 500 ms (htop's method) with a one-sample-per-second
 * history, bytes of the token in progress, windowed and total expert-cache
 * hit rates, per-layer rates for this answer, speeds and TTFT. Nothing is
 * estimated: a figure the engine does not report stays "unknown" (-1). */
#include <stdio.h>
#include <string.h>
#include "tui_internal.h"

#define HIT_WINDOW_TOKENS 16     /* "now" hit rate and tok/s: the last 16 steps */

/* All bytes the engine read from disk, whatever they were for. */
static uint64_t read_bytes_total(const k3_stats *s)
{
    return s->bytes_read_trunk + s->bytes_read_experts + s->bytes_read_other;
}

/* Push one per-second rate into the minute-long history. */
static void spark_push(tui_gauges *g, float v)
{
    if (g->n_spark == TUI_SPARK_SAMPLES) {
        memmove(g->spark, g->spark + 1, (TUI_SPARK_SAMPLES - 1) * sizeof g->spark[0]);
        g->n_spark--;
    }
    g->spark[g->n_spark++] = v;
}

/* Where the counters stood when the step in progress began. Records carry
 * each finished step's own bytes, so the start of the next one is the old
 * start plus those bytes (not the counters when we happen to look, which
 * would drop what was read between the step's end and our frame). When the
 * engine is idle with no read in flight the counters are a sync point. */
static void track_token_start(tui_gauges *g)
{
    const k3_stats *s = &g->now;
    if (s->phase == K3_PHASE_IDLE && s->reads_in_flight == 0) {
        g->tok_trunk0 = s->bytes_read_trunk;
        g->tok_experts0 = s->bytes_read_experts;
        g->seen_records = s->n_records;
        return;
    }
    uint64_t fresh = s->n_records - g->seen_records;
    if (fresh > s->n_valid) fresh = s->n_valid;          /* older ones fell off the ring */
    for (uint64_t i = s->n_valid - fresh; i < s->n_valid; i++) {
        g->tok_trunk0 += s->records[i].bytes_trunk;
        g->tok_experts0 += s->records[i].bytes_experts;
    }
    g->seen_records = s->n_records;
    if (g->tok_trunk0 > s->bytes_read_trunk) g->tok_trunk0 = s->bytes_read_trunk;
    if (g->tok_experts0 > s->bytes_read_experts) g->tok_experts0 = s->bytes_read_experts;
}

/* Called once per frame: one lock-free copy of the counters (a remote
 * backend's: the server's engine, m is NULL), then the rate (over at least
 * 500 ms), the per-second history and the start of the token in progress. */
void tui_gauges_sample(tui_gauges *g, const k3_model *m, double now_s)
{
    if (m) k3_stats_read(m, &g->now);
    else if (g->remote.r) tui_remote_sample(&g->remote, &g->now, now_s);
    g->now_s = now_s;
    const k3_stats *s = &g->now;
    uint64_t bytes = read_bytes_total(s);
    if (!g->have_now) {
        g->have_now = 1;
        g->spark_t0 = now_s;
        g->spark_b0 = bytes;
        memset(&g->rate, 0, sizeof g->rate);
        rate_window_add(&g->rate, now_s, bytes);
        g->rate_bps = -1;
        g->seen_records = s->n_records;
        g->tok_trunk0 = s->bytes_read_trunk;
        g->tok_experts0 = s->bytes_read_experts;
        return;
    }
    rate_window_add(&g->rate, now_s, bytes);
    g->rate_bps = rate_window_bps(&g->rate);
    double dt = now_s - g->spark_t0;
    if (dt >= 1.0) {                     /* one sample per whole second elapsed */
        int secs = (int)dt;
        float v = (float)((double)(bytes - g->spark_b0) / dt);
        for (int i = 0; i < secs && i < TUI_SPARK_SAMPLES; i++) spark_push(g, v);
        g->spark_t0 += secs;
        g->spark_b0 = bytes;
    }
    track_token_start(g);
    if (g->busy && g->first_token_s == 0 && s->tokens_decoded > g->decoded0) g->first_token_s = now_s;
}

/* Baselines so "this answer" figures (per-layer hits, tokens, TTFT) exclude earlier turns. */
void tui_gauges_turn_start(tui_gauges *g, const k3_model *m, int ctx_used, int ctx_limit, double now_s)
{
    tui_gauges_sample(g, m, now_s);
    memcpy(g->layer_lookups0, g->now.layer_lookups, sizeof g->layer_lookups0);
    memcpy(g->layer_hits0, g->now.layer_hits, sizeof g->layer_hits0);
    g->prefilled0 = g->now.tokens_prefilled;
    g->decoded0 = g->now.tokens_decoded;
    g->draft_tokens0 = g->now.draft_tokens;
    g->draft_kept0 = g->now.draft_kept;
    g->turn_start_s = now_s;
    g->first_token_s = 0;
    g->ctx_at_start = ctx_used;
    g->ctx_limit = ctx_limit;
    g->busy = 1;
    if (g->remote.r) tui_remote_turn_start(&g->remote);
}

/* Keep the finished turn's own figures for the idle screen. */
void tui_gauges_turn_end(tui_gauges *g, const turn_result *r)
{
    g->busy = 0;
    if (g->remote.r) tui_remote_turn_end(&g->remote, r);
    if (!r) return;
    if (r->generated_tokens > 0) g->last_ttft_ms = r->ttft_ms;
    if (r->prefill_ms > 0) g->last_prompt_tok_s = r->prefilled_tokens * 1e3 / r->prefill_ms;
    if (r->generated_tokens > 1) g->last_gen_tok_s = r->decode_tok_s;
    g->last_draft_kept = r->drafted_tokens ? (double)r->draft_kept_tokens / r->drafted_tokens : 0;
    g->last_tokens_per_pass = r->drafted_tokens && r->decode_passes ? (double)(r->generated_tokens - 1) / r->decode_passes : 0;
}

/* Every pass over the model decodes one token and keeps some drafts, so
 * passes = tokens decoded - drafts kept (plain steps included). */
int tui_gauges_draft(const tui_gauges *g, double *kept_share, double *tokens_per_pass)
{
    *kept_share = g->last_draft_kept;
    *tokens_per_pass = g->last_tokens_per_pass;
    if (!g->busy) return g->last_tokens_per_pass > 0;
    const k3_stats *s = &g->now;
    const uint64_t drafted = s->draft_tokens - g->draft_tokens0, kept = s->draft_kept - g->draft_kept0;
    const uint64_t decoded = s->tokens_decoded - g->decoded0;
    if (!drafted || decoded <= kept) return 0;
    *kept_share = (double)kept / drafted;
    *tokens_per_pass = (double)decoded / (decoded - kept);
    return 1;
}

/* While answering: decode speed over the last steps (records carry each
 * step's compute time); afterwards, the answer's own figure. */
double tui_gauges_gen_tok_s(const tui_gauges *g)
{
    if (g->remote.r) return g->remote.tok_s > 0 ? g->remote.tok_s : 0;   /* pieces as they arrive, then the turn's */
    if (!g->busy) return g->last_gen_tok_s;
    const k3_stats *s = &g->now;
    if (s->tokens_decoded <= g->decoded0) return 0;
    double ms = 0;
    int n = 0, tokens = 0;
    for (int i = (int)s->n_valid - 1; i >= 0 && n < HIT_WINDOW_TOKENS; i--) {
        const k3_token_record *r = &s->records[i];
        if (r->phase != K3_PHASE_DECODE) break;     /* this answer's decode steps only */
        ms += r->ms;
        tokens += (int)r->n_tokens;                 /* a draft pass decodes the tokens it kept */
        n++;
    }
    return ms > 0 ? tokens * 1e3 / ms : 0;
}

/* Prompt speed: chunks done over the time since the turn began (until the first token). */
double tui_gauges_prompt_tok_s(const tui_gauges *g)
{
    if (!g->busy) return g->last_prompt_tok_s;
    const k3_stats *s = &g->now;
    uint64_t done = s->tokens_prefilled - g->prefilled0;     /* whole chunks, counted as they finish */
    double end = g->first_token_s > 0 ? g->first_token_s : g->now_s;
    double secs = end - g->turn_start_s;
    return done > 0 && secs > 0 ? done / secs : 0;
}

/* TTFT counting up while we wait for the first token, fixed once it came. */
double tui_gauges_ttft_ms(const tui_gauges *g, int *live)
{
    *live = 0;
    if (!g->busy) return g->last_ttft_ms;
    if (g->first_token_s > 0) return (g->first_token_s - g->turn_start_s) * 1e3;
    *live = 1;
    return (g->now_s - g->turn_start_s) * 1e3;
}

/* Context in use without touching the session while the worker owns it. */
int tui_gauges_ctx_used(const tui_gauges *g)
{
    if (!g->busy) return g->ctx_at_start;
    const k3_stats *s = &g->now;
    return g->ctx_at_start + (int)(s->tokens_prefilled - g->prefilled0) + (int)(s->tokens_decoded - g->decoded0);
}

/* Hit rate of the last steps that looked experts up: what the cache does now. */
double tui_gauges_hit_window(const tui_gauges *g)
{
    const k3_stats *s = &g->now;
    uint64_t look = 0, hit = 0;
    int n = 0;
    for (int i = (int)s->n_valid - 1; i >= 0 && n < HIT_WINDOW_TOKENS; i--) {
        if (!s->records[i].expert_lookups) continue;
        look += s->records[i].expert_lookups;
        hit += s->records[i].expert_hits;
        n++;
    }
    return look ? (double)hit / look : -1;
}

/* Hit rate since the model was opened. */
double tui_gauges_hit_total(const tui_gauges *g)
{
    const k3_stats *s = &g->now;
    return s->expert_lookups ? (double)s->expert_hits / s->expert_lookups : -1;
}

/* One layer's hit rate for the per-layer strip. */
double tui_gauges_layer_hit(const tui_gauges *g, int l)
{
    const k3_stats *s = &g->now;
    if (l < 0 || l >= K3_STATS_MAX_LAYERS) return -1;
    uint64_t dl = s->layer_lookups[l] - g->layer_lookups0[l];
    if (dl) return (double)(s->layer_hits[l] - g->layer_hits0[l]) / dl;
    return s->layer_lookups[l] ? (double)s->layer_hits[l] / s->layer_lookups[l] : -1;
}

/* Bytes read since the step in progress began (see track_token_start). */
void tui_gauges_token_bytes(const tui_gauges *g, uint64_t *trunk, uint64_t *experts)
{
    *trunk = g->now.bytes_read_trunk - g->tok_trunk0;
    *experts = g->now.bytes_read_experts - g->tok_experts0;
}

/* The decode steps from the record ring, oldest first, plus the token being computed. */
int tui_gauges_timeline(const tui_gauges *g, tui_timeline_col *cols, int max_cols)
{
    const k3_stats *s = &g->now;
    int live = g->busy && s->phase == K3_PHASE_DECODE;
    int want = max_cols - live;
    int n = 0;
    int start = (int)s->n_valid;
    for (int i = (int)s->n_valid - 1; i >= 0 && n < want; i--)
        if (s->records[i].phase == K3_PHASE_DECODE) { n++; start = i; }
    int k = 0;
    for (int i = start; i < (int)s->n_valid && k < want; i++) {
        const k3_token_record *r = &s->records[i];
        if (r->phase != K3_PHASE_DECODE) continue;
        cols[k++] = (tui_timeline_col){.bytes = r->bytes_trunk + r->bytes_experts, .ms = r->ms,
                                       .lookups = r->expert_lookups, .hits = r->expert_hits, .live = 0};
    }
    if (live && k < max_cols) {
        uint64_t t, e;
        tui_gauges_token_bytes(g, &t, &e);
        cols[k++] = (tui_timeline_col){.bytes = t + e, .ms = 0, .lookups = 0, .hits = 0, .live = 1};
    }
    return k;
}

/* Decimal units, matching the MB/s of the rate; negative means unknown (a dash). */
void tui_fmt_bytes(char *buf, size_t cap, double b)
{
    if (b < 0) snprintf(buf, cap, "%s", tui_unknown());
    else if (b < 1e3) snprintf(buf, cap, "%.0f B", b);
    else if (b < 1e6) snprintf(buf, cap, "%.1f kB", b / 1e3);
    else if (b < 1e9) snprintf(buf, cap, "%.1f MB", b / 1e6);
    else snprintf(buf, cap, "%.2f GB", b / 1e9);
}

/* Short token counts for the status line. */
void tui_fmt_count(char *buf, size_t cap, double n)
{
    if (n < 1e3) snprintf(buf, cap, "%.0f", n);
    else if (n < 1e6) snprintf(buf, cap, "%.1fk", n / 1e3);
    else snprintf(buf, cap, "%.1fM", n / 1e6);
}

/* Low hit rates are the bad ones: colours run opposite to a load meter. */
tui_role tui_hit_role(double rate)
{
    if (rate < 0) return TR_DIM;
    if (rate >= 0.7) return TR_GOOD;
    if (rate >= 0.5) return TR_WARN;
    return TR_BAD;
}
