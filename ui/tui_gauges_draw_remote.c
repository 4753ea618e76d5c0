/* tui_gauges_draw_remote.c - the panel's sections for a remote backend:
 * NETWORK (the stream's bytes/s), ANSWER (TTFT, tokens/s, inter-token
 * p50/p90, the prompt tokens the server reused) and SERVER (what its
 * /metrics says: vLLM's and SGLang's figures, k3 serve's queue and state
 * reuse; k3 serve's disk, cache and memory follow in the usual sections).
 * A figure the server does not give is named as not available, never
 * drawn as a zero. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "tui_internal.h"

/* "12.3 ms", or a dash when unknown. */
static void fmt_ms(char *buf, size_t cap, double ms)
{
    if (ms < 0) snprintf(buf, cap, "%s", tui_unknown());
    else if (ms < 1000) snprintf(buf, cap, "%.1f ms", ms);
    else snprintf(buf, cap, "%.2f s", ms / 1e3);
}

/* The answer's figures as text, shared by both layouts. */
typedef struct remote_text {
    char net[32], answer_bytes[32], ttft[32], tok_s[32], p50[32], p90[32], cached[64];
} remote_text;

static void make_text(const tui_gauges *g, remote_text *f)
{
    const tui_remote_gauges *rg = &g->remote;
    const char *dash = tui_unknown();
    if (rg->net_bps < 0) snprintf(f->net, sizeof f->net, "%s", dash);
    else {
        tui_fmt_bytes(f->net, sizeof f->net - 2, rg->net_bps);
        strcat(f->net, "/s");
    }
    tui_fmt_bytes(f->answer_bytes, sizeof f->answer_bytes, (double)rg->net_answer_bytes);
    fmt_ms(f->ttft, sizeof f->ttft, rg->ttft_ms);
    if (rg->tok_s > 0) snprintf(f->tok_s, sizeof f->tok_s, "%.1f tok/s", rg->tok_s);
    else snprintf(f->tok_s, sizeof f->tok_s, "%s", dash);
    fmt_ms(f->p50, sizeof f->p50, rg->itl_p50_ms);
    fmt_ms(f->p90, sizeof f->p90, rg->itl_p90_ms);
    if (rg->cached_tokens >= 0 && rg->prompt_tokens >= 0)
        snprintf(f->cached, sizeof f->cached, "reused %d of %d prompt tokens", rg->cached_tokens, rg->prompt_tokens);
    else if (g->busy || rg->ttft_ms < 0)
        snprintf(f->cached, sizeof f->cached, "prompt reuse %s", dash);
    else
        snprintf(f->cached, sizeof f->cached, "prompt reuse not reported");
}

/* Inside one figure ("state reuse hit 39%") the words are joined by this
 * byte: put_wrapped never breaks there and draws it as a space. */
#define NO_BREAK '\x01'

/* Text over up to max_rows rows of the panel, broken at spaces, never
 * inside a figure (a byte count: a multi-byte bullet only makes a row a
 * little shorter); returns the rows used. */
static int put_wrapped(WINDOW *w, int y, int x, tui_role role, const char *text, int max_rows)
{
    int width = getmaxx(w) - x, used = 0;
    size_t len = strlen(text), at = 0;
    while (at < len && used < max_rows && width > 8) {
        size_t take = len - at;
        if (take > (size_t)width) {                      /* cut at a space, never inside a character */
            take = (size_t)width;
            while (take > 0 && text[at + take] != ' ') take--;
            if (take == 0) take = (size_t)width;
        }
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)take, text + at);
        for (char *c = line; *c; c++)
            if (*c == NO_BREAK) *c = ' ';
        wmove(w, y + used++, x);
        tui_draw_role(w, role, line, width);
        at += take;
        while (at < len && text[at] == ' ') at++;
    }
    return used;
}

/* One figure appended to the list at figs[*at]: a bullet before all but
 * the first, its own words joined by NO_BREAK so a row never ends inside
 * it ("state reuse" above, "hit 39%" below). */
static void add_figure(char *figs, size_t cap, size_t *at, const char *fmt, ...)
{
    char item[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(item, sizeof item, fmt, ap);
    va_end(ap);
    for (char *c = item; *c; c++)
        if (*c == ' ') *c = NO_BREAK;
    if (*at >= cap) return;
    int n = snprintf(figs + *at, cap - *at, "%s%s%s%s", *at ? " " : "", *at ? tui_glyph()->bullet : "", *at ? " " : "",
                     item);
    if (n > 0) *at += (size_t)n;
}

/* The SERVER lines: each figure the server gives, then those it does not.
 * Returns the rows used (at most max_rows). */
static int server_lines(const tui_gauges *g, WINDOW *w, int y, int x, int max_rows)
{
    const tui_remote_gauges *rg = &g->remote;
    const remote_metrics *m = &rg->m;
    int cols = getmaxx(w), used = 0;
    char line[512];
    if (!rg->have_m) {                    /* no /metrics: every server figure is unknown */
        const char *why = rg->m_err;
        size_t ul = strlen(remote_url(rg->r));
        if (!strncmp(why, remote_url(rg->r), ul)) why += ul;   /* "/metrics: HTTP 404" without the URL again */
        if (rg->m_err[0]) snprintf(line, sizeof line, "no server figures (%s)", why);
        else snprintf(line, sizeof line, "/metrics: asking%s", tui_glyph()->ellipsis);
        used += put_wrapped(w, y, x, TR_DIM, line, max_rows);
        if (used < max_rows && rg->m_err[0])
            used += put_wrapped(w, y + used, x, TR_DIM, "not available: running and waiting requests, KV cache use, "
                                "prefix-cache hit rate, server tokens/s", max_rows - used);
        return used;
    }
    char figs[256] = "";
    size_t at = 0;
    if (m->running.have) add_figure(figs, sizeof figs, &at, "running %.0f", m->running.v);
    if (m->waiting.have) add_figure(figs, sizeof figs, &at, "waiting %.0f", m->waiting.v);
    if (m->kv_usage.have) add_figure(figs, sizeof figs, &at, "KV cache %.0f%%", m->kv_usage.v * 100);
    if (m->state_usage.have) add_figure(figs, sizeof figs, &at, "state pool %.0f%%", m->state_usage.v * 100);
    if (m->cache_hit_rate.have)
        add_figure(figs, sizeof figs, &at, "%s %.0f%%", m->kind == REMOTE_K3 ? "state reuse hit" : "prefix-cache hit",
                   m->cache_hit_rate.v * 100);
    if (m->gen_throughput.have) add_figure(figs, sizeof figs, &at, "%.1f tok/s", m->gen_throughput.v);
    char head[192];
    snprintf(head, sizeof head, "%s at %s", remote_server_name(m->kind), rg->host);
    wmove(w, y + used++, x);
    tui_put(w, head, cols - x);
    if (used < max_rows && figs[0]) used += put_wrapped(w, y + used, x, TR_PLAIN, figs, max_rows - used);
    char missing[256];
    remote_metrics_missing(m, missing, sizeof missing);
    if (used < max_rows && missing[0]) {
        snprintf(line, sizeof line, "not available: %s", missing);
        used += put_wrapped(w, y + used, x, TR_DIM, line, max_rows - used);
    }
    return used;
}

/* The answer's figures in one line, for /stats. */
void tui_remote_answer_text(const tui_gauges *g, char *buf, size_t cap)
{
    remote_text f;
    make_text(g, &f);
    snprintf(buf, cap, "%d pieces, TTFT %s, %s, inter-token p50 %s p90 %s, %s", g->remote.n_pieces, f.ttft, f.tok_s,
             f.p50, f.p90, f.cached);
}

/* Tall column: NETWORK, ANSWER, SERVER. */
int tui_remote_draw_side(const tui_gauges *g, WINDOW *w, int y)
{
    int rows = getmaxy(w), cols = getmaxx(w);
    const char *bul = tui_glyph()->bullet;
    remote_text f;
    make_text(g, &f);
    char line[256];
    tui_draw_title_rule(w, y++, "NETWORK");
    wmove(w, y++, 1);
    snprintf(line, sizeof line, "now %s  %s this answer %s", f.net, bul, f.answer_bytes);
    tui_put(w, line, cols - 1);
    if (y >= rows) return y;
    tui_draw_title_rule(w, y++, g->busy ? "ANSWER (streaming)" : "ANSWER (last)");
    wmove(w, y++, 1);
    snprintf(line, sizeof line, "gen %s  %s TTFT %s", f.tok_s, bul, f.ttft);
    tui_put(w, line, cols - 1);
    wmove(w, y++, 1);
    snprintf(line, sizeof line, "inter-token p50 %s p90 %s", f.p50, f.p90);   /* fits 40 columns */
    tui_put(w, line, cols - 1);
    wmove(w, y++, 1);
    snprintf(line, sizeof line, "%d pieces", g->remote.n_pieces);
    tui_put(w, line, cols - 1);
    wmove(w, y++, 1);
    tui_put(w, f.cached, cols - 1);
    if (y >= rows) return y;
    tui_draw_title_rule(w, y++, "SERVER");
    y += server_lines(g, w, y, 1, rows - y > 6 ? 6 : rows - y);
    return y;
}

/* Compact band: one row each for the network, the answer and the server. */
int tui_remote_draw_band(const tui_gauges *g, WINDOW *w, int y)
{
    int cols = getmaxx(w);
    const int lab = 7;
    const char *bul = tui_glyph()->bullet;
    remote_text f;
    make_text(g, &f);
    char line[256];
    wmove(w, y, 0);
    tui_draw_role(w, TR_TITLE, "net", lab);
    wmove(w, y++, lab);
    snprintf(line, sizeof line, "%s  %s this answer %s  %s %d pieces", f.net, bul, f.answer_bytes, bul,
             g->remote.n_pieces);
    tui_put(w, line, cols - lab);
    wmove(w, y, 0);
    tui_draw_role(w, TR_TITLE, "answer", lab);
    wmove(w, y++, lab);
    snprintf(line, sizeof line, "gen %s  %s TTFT %s  %s ITL p50 %s p90 %s", f.tok_s, bul, f.ttft, bul, f.p50, f.p90);
    tui_put(w, line, cols - lab);
    wmove(w, y, 0);
    tui_draw_role(w, TR_TITLE, "server", lab);
    if (tui_remote_has_engine(g)) {       /* one line: the engine's rows follow */
        remote_metrics_summary(&g->remote.m, line, sizeof line);
        wmove(w, y++, lab);
        tui_put(w, line, cols - lab);
    } else {                              /* the band's other rows are free: the figures and what is missing */
        int free_rows = getmaxy(w) - 1 - y;
        y += server_lines(g, w, y, lab, free_rows > 1 ? free_rows : 1);
    }
    return y;
}
