/* tui_gauges_draw.c - the gauge panel: disk rate + minute sparkline, bytes
 * of the token in progress, expert-cache hit rates with a per-layer strip,
 * the memory bar split by use against the budget, speeds and TTFT, and the
 * per-token I/O timeline (one column per generated token, height = bytes,
 * colour = hit rate). Two arrangements: a compact band above the transcript
 * on narrow terminals, a tall column beside it on wide ones. Unknown
 * figures are drawn as a dash, never invented. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "tui_internal.h"

#define SEGMENTS 5
static const char *const seg_names[SEGMENTS] = {"trunk", "ring", "cache", "state", "other"};
static const tui_role seg_roles[SEGMENTS] = {TR_SEG_TRUNK, TR_SEG_RING, TR_SEG_CACHE, TR_SEG_STATE, TR_SEG_OTHER};

/* Encode a code point (for braille cells). */
static int utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
}

/* Text in a role's colour, clipped to the window. */
int tui_draw_role(WINDOW *w, tui_role role, const char *s, int max_cols)
{
    wattrset(w, tui_attr(role));
    int n = tui_put(w, s, max_cols);
    wattrset(w, A_NORMAL);
    return n;
}

/* A section title followed by a rule to the right edge (tall layout). */
void tui_draw_title_rule(WINDOW *w, int y, const char *title)
{
    int cols = getmaxx(w);
    wmove(w, y, 0);
    int used = tui_draw_role(w, TR_TITLE, title, cols);
    wattrset(w, tui_attr(TR_DIM));
    for (int x = used + 1; x < cols; x++) mvwaddstr(w, y, x, tui_glyph()->hline);
    wattrset(w, A_NORMAL);
}

/* A rate, or a dash before the first full interval. */
static void fmt_rate(char *buf, size_t cap, double bps)
{
    if (bps < 0) { tui_fmt_bytes(buf, cap, -1); return; }
    tui_fmt_bytes(buf, cap > 2 ? cap - 2 : cap, bps);
    strcat(buf, "/s");
}

/* A percentage, or a dash when nothing was looked up. */
static void fmt_pct(char *buf, size_t cap, double rate)
{
    if (rate < 0) snprintf(buf, cap, "%s", tui_unknown());
    else snprintf(buf, cap, "%.0f%%", rate * 100);
}

/* Sparkline of the per-second disk rate, newest at the right: braille
 * (two samples per cell, four levels) or one ASCII level per cell. */
static void draw_sparkline(const tui_gauges *g, WINDOW *w, int y, int x, int width)
{
    if (width <= 0) return;
    const tui_glyphs *gl = tui_glyph();
    int per_cell = gl->unicode ? 2 : 1;
    int n = g->n_spark < width * per_cell ? g->n_spark : width * per_cell;
    const float *v = g->spark + g->n_spark - n;
    float max = 0;
    for (int i = 0; i < n; i++) max = v[i] > max ? v[i] : max;
    int cells = (n + per_cell - 1) / per_cell;
    wmove(w, y, x + width - cells);
    for (int c = 0; c < cells; c++) {
        int lvl[2] = {0, 0}, any = 0;
        for (int k = 0; k < per_cell; k++) {
            int i = n - (cells - c) * per_cell + k;
            if (i < 0) continue;
            if (v[i] > 0 && max > 0) {
                lvl[k] = 1 + (int)(v[i] / max * (gl->unicode ? 3.999f : 7.999f));
                any = 1;
            }
        }
        wattrset(w, any ? tui_attr(TR_TIMELINE) : tui_attr(TR_DIM));
        if (gl->unicode) {
            static const unsigned left[5] = {0, 0x40, 0x44, 0x46, 0x47};
            static const unsigned right[5] = {0, 0x80, 0xA0, 0xB0, 0xB8};
            unsigned bits = left[lvl[0] > 4 ? 4 : lvl[0]] | right[lvl[1] > 4 ? 4 : lvl[1]];
            if (!any) bits = 0xC0;                   /* zero: the baseline dots */
            char buf[4];
            int len = utf8_encode(0x2800 + bits, buf);
            waddnstr(w, buf, len);
        } else {
            waddstr(w, any ? gl->bar[lvl[0] > 8 ? 8 : lvl[0]] : "_");
        }
    }
    wattrset(w, A_NORMAL);
}

/* Per-layer hit rates of this answer, one cell per layer (or per group of
 * layers when they do not fit); the layer being computed is reversed. */
static void draw_layer_strip(const tui_gauges *g, WINDOW *w, int y, int x, int width)
{
    const tui_glyphs *gl = tui_glyph();
    int n = (int)g->now.n_layers;
    if (n > K3_STATS_MAX_LAYERS) n = K3_STATS_MAX_LAYERS;
    if (n <= 0 || width <= 0) return;
    int per = (n + width - 1) / width;
    int computing = g->busy && g->now.phase != K3_PHASE_IDLE ? (int)g->now.layer : -1;
    wmove(w, y, x);
    for (int l0 = 0; l0 < n; l0 += per) {
        double sum = 0;
        int k = 0, here = 0;
        for (int l = l0; l < l0 + per && l < n; l++) {
            double r = tui_gauges_layer_hit(g, l);
            if (r >= 0) { sum += r; k++; }
            if (l == computing) here = 1;
        }
        double rate = k ? sum / k : -1;
        attr_t a = tui_attr(tui_hit_role(rate)) | (here ? A_REVERSE : 0);
        wattrset(w, a);
        waddstr(w, rate < 0 ? gl->seg_free : gl->bar[1 + (int)lround(rate * 7)]);
    }
    wattrset(w, A_NORMAL);
}

/* The memory bar: pinned trunk, ring, expert cache, state and other, each
 * in its colour (or its own fill character), against the budget. */
static void draw_memory_bar(const k3_stats *s, WINDOW *w, int y, int x, int width)
{
    const tui_glyphs *gl = tui_glyph();
    uint64_t seg[SEGMENTS] = {s->pinned_trunk_bytes, s->ring_bytes, s->expert_cache_bytes, s->state_bytes,
                              s->other_bytes};
    uint64_t used = 0;
    for (int i = 0; i < SEGMENTS; i++) used += seg[i];
    uint64_t total = s->budget_bytes > used ? s->budget_bytes : used;
    if (width < 3 || total == 0) return;
    int inner = width - 2;
    mvwaddstr(w, y, x, "[");
    uint64_t acc = 0;
    int drawn = 0;
    for (int i = 0; i < SEGMENTS; i++) {
        acc += seg[i];
        int upto = (int)((double)acc / total * inner + 0.5);
        wattrset(w, tui_attr(seg_roles[i]));
        for (; drawn < upto; drawn++) waddstr(w, gl->seg_fill[i]);
    }
    wattrset(w, tui_attr(TR_DIM));
    for (; drawn < inner; drawn++) waddstr(w, gl->seg_free);
    wattrset(w, A_NORMAL);
    waddstr(w, "]");
}

/* Legend cells "■ trunk 1.2GB" for the segments, wrapping across rows
 * (units without a space so five fit on an 80-column band). */
static int draw_memory_legend(const k3_stats *s, WINDOW *w, int y, int x, int rows)
{
    const tui_glyphs *gl = tui_glyph();
    uint64_t seg[SEGMENTS] = {s->pinned_trunk_bytes, s->ring_bytes, s->expert_cache_bytes, s->state_bytes,
                              s->other_bytes};
    int cols = getmaxx(w), cx = x, cy = y;
    for (int i = 0; i < SEGMENTS; i++) {
        char b[32], cell[64];
        tui_fmt_bytes(b, sizeof b, (double)seg[i]);
        char *sp = strchr(b, ' ');
        if (sp) memmove(sp, sp + 1, strlen(sp));
        snprintf(cell, sizeof cell, " %s %s ", seg_names[i], b);
        int cw = 1 + tui_text_width(cell, strlen(cell));
        if (cx + cw > cols && cx > x) {
            if (++cy >= y + rows) return cy - y;
            cx = x;
        }
        wmove(w, cy, cx);
        wattrset(w, tui_attr(seg_roles[i]));
        waddstr(w, gl->seg_fill[i]);
        wattrset(w, A_NORMAL);
        tui_put(w, cell, cols - cx - 1);
        cx += cw;
    }
    return cy - y + 1;
}

/* The per-token timeline, newest token at the right edge; the height is the
 * bytes read (or, when the engine read nothing from disk, the step time, as
 * the caption then says), the colour the token's hit rate. */
static void draw_timeline(const tui_gauges *g, WINDOW *w, int y, int x, int rows, int width, int caption_y)
{
    const tui_glyphs *gl = tui_glyph();
    tui_timeline_col cols[TUI_TIMELINE_MAX];
    if (width > TUI_TIMELINE_MAX) width = TUI_TIMELINE_MAX;
    int n = tui_gauges_timeline(g, cols, width);
    double max_bytes = 0, max_ms = 0;
    for (int i = 0; i < n; i++) {
        if (cols[i].bytes > max_bytes) max_bytes = (double)cols[i].bytes;
        if (cols[i].ms > max_ms) max_ms = cols[i].ms;
    }
    int by_bytes = max_bytes > 0;
    int wcols = getmaxx(w);
    if (caption_y >= 0) {
        char cap[128], m[32];
        wmove(w, caption_y, x);
        if (n == 0) {
            tui_draw_role(w, TR_DIM, "no generated tokens yet", wcols - x);
        } else if (by_bytes) {
            tui_fmt_bytes(m, sizeof m, max_bytes);
            snprintf(cap, sizeof cap, tui_term_colour() ? "max %s/token, colour = hit rate" : "max %s/token, bold = hit rate < 50%%", m);
            tui_draw_role(w, TR_DIM, cap, wcols - x);
        } else {
            snprintf(cap, sizeof cap, "max %.1f ms/token (no disk reads)", max_ms);
            tui_draw_role(w, TR_DIM, cap, wcols - x);
        }
    }
    int x0 = x + width - n;
    for (int i = 0; i < n; i++) {
        double v = by_bytes ? (double)cols[i].bytes / max_bytes : max_ms > 0 ? cols[i].ms / max_ms : 0;
        int eighths = (int)ceil(v * rows * 8);
        if (cols[i].live && eighths == 0) eighths = 1;          /* the token in progress is always visible */
        tui_role role = cols[i].live ? TR_LIVE
                        : cols[i].lookups ? tui_hit_role((double)cols[i].hits / cols[i].lookups)
                                          : TR_TIMELINE;
        wattrset(w, tui_attr(role));
        for (int r = 0; r < rows; r++) {
            int fill = eighths - r * 8;
            fill = fill < 0 ? 0 : fill > 8 ? 8 : fill;
            if (fill) mvwaddstr(w, y + rows - 1 - r, x0 + i, gl->bar[fill]);
        }
    }
    wattrset(w, A_NORMAL);
}

/* Shared text of the figures, formatted once per draw. */
typedef struct figures {
    char rate[32], spark_max[32], tok_now[32], tok_trunk[32], tok_exp[32], tok_last[32];
    char hit_now[16], hit_total[16];
    char mem_used[32], budget[32], rss[32], peak[32];
    char gen[32], prompt[32], ttft[32], draft[48];
    char total[32], trunk_total[32], experts_total[32];
    int have_reads, have_split, ttft_live;
} figures;

/* Every figure of the panel as text, so both layouts say the same thing. */
static void make_figures(const tui_gauges *g, figures *f)
{
    const k3_stats *s = &g->now;
    memset(f, 0, sizeof *f);
    f->have_reads = s->bytes_read_trunk + s->bytes_read_experts + s->bytes_read_other > 0;
    fmt_rate(f->rate, sizeof f->rate, g->rate_bps);
    tui_fmt_bytes(f->total, sizeof f->total, (double)(s->bytes_read_trunk + s->bytes_read_experts + s->bytes_read_other));
    tui_fmt_bytes(f->trunk_total, sizeof f->trunk_total, (double)s->bytes_read_trunk);
    tui_fmt_bytes(f->experts_total, sizeof f->experts_total, (double)s->bytes_read_experts);
    fmt_rate(f->spark_max, sizeof f->spark_max, g->rate.peak_bps > 0 ? g->rate.peak_bps : -1);   /* never falls */
    uint64_t t, e;
    tui_gauges_token_bytes(g, &t, &e);
    tui_fmt_bytes(f->tok_now, sizeof f->tok_now, (double)(t + e));
    tui_fmt_bytes(f->tok_trunk, sizeof f->tok_trunk, (double)t);
    tui_fmt_bytes(f->tok_exp, sizeof f->tok_exp, (double)e);
    double last = -1;
    for (int i = (int)s->n_valid - 1; i >= 0; i--)
        if (s->records[i].phase == K3_PHASE_DECODE) {
            last = (double)(s->records[i].bytes_trunk + s->records[i].bytes_experts);
            break;
        }
    tui_fmt_bytes(f->tok_last, sizeof f->tok_last, last);
    fmt_pct(f->hit_now, sizeof f->hit_now, tui_gauges_hit_window(g));
    fmt_pct(f->hit_total, sizeof f->hit_total, tui_gauges_hit_total(g));
    uint64_t used = s->pinned_trunk_bytes + s->ring_bytes + s->expert_cache_bytes + s->state_bytes + s->other_bytes;
    f->have_split = used > 0;
    tui_fmt_bytes(f->mem_used, sizeof f->mem_used, f->have_split ? (double)used : -1);
    tui_fmt_bytes(f->budget, sizeof f->budget, s->budget_bytes ? (double)s->budget_bytes : -1);
    tui_fmt_bytes(f->rss, sizeof f->rss, s->rss_bytes ? (double)s->rss_bytes : -1);
    tui_fmt_bytes(f->peak, sizeof f->peak, s->peak_rss_bytes ? (double)s->peak_rss_bytes : -1);
    double gen = tui_gauges_gen_tok_s(g), pp = tui_gauges_prompt_tok_s(g);
    const char *dash = tui_unknown();
    if (gen > 0) snprintf(f->gen, sizeof f->gen, "%.1f tok/s", gen);
    else snprintf(f->gen, sizeof f->gen, "%s", dash);
    if (pp > 0) snprintf(f->prompt, sizeof f->prompt, "%.0f tok/s", pp);
    else snprintf(f->prompt, sizeof f->prompt, "%s", dash);
    double kept, per_pass;
    if (tui_gauges_draft(g, &kept, &per_pass))
        snprintf(f->draft, sizeof f->draft, "draft %.0f%% kept, %.2f tok/pass", kept * 100, per_pass);
    else
        snprintf(f->draft, sizeof f->draft, "draft %s", dash);
    double ttft = tui_gauges_ttft_ms(g, &f->ttft_live);
    if (ttft > 0) snprintf(f->ttft, sizeof f->ttft, "%.2f s%s", ttft / 1e3, f->ttft_live ? tui_glyph()->ellipsis : "");
    else snprintf(f->ttft, sizeof f->ttft, "%s", dash);
}

/* Memory as text when there is no split to draw. */
static void memory_text(const figures *f, const k3_stats *s, char *buf, size_t cap)
{
    if (f->have_split && s->budget_bytes)
        snprintf(buf, cap, "%s of %s budget", f->mem_used, f->budget);
    else if (f->have_split)
        snprintf(buf, cap, "%s in use, no budget", f->mem_used);
    else
        snprintf(buf, cap, "rss %s (peak %s); split by use not reported%s", f->rss, f->peak,
                 s->budget_bytes ? "" : ", no budget: weights resident");
}

/* Compact band: a label column and one line per gauge. */
static void draw_band(const tui_gauges *g, WINDOW *w)
{
    int rows, cols;
    getmaxyx(w, rows, cols);
    const k3_stats *s = &g->now;
    figures f;
    make_figures(g, &f);
    char line[256];
    const int lab = 7;
    int y = 0;
    if (g->remote.r) {                    /* a server: its rows, then (k3 serve) its engine's */
        y = tui_remote_draw_band(g, w, y);
        if (!tui_remote_has_engine(g)) goto rule;
    }
    /* disk */
    wmove(w, y, 0);
    tui_draw_role(w, TR_TITLE, "disk", lab);
    wmove(w, y, lab);
    snprintf(line, sizeof line, "%-11s", f.rate);
    tui_put(w, line, cols - lab);
    char tail[64];
    snprintf(tail, sizeof tail, " peak %s", f.spark_max);
    int tail_w = tui_text_width(tail, strlen(tail));
    int spark_w = cols - lab - 11 - tail_w - 1;
    if (spark_w > 30) spark_w = 30;
    draw_sparkline(g, w, y, lab + 11, spark_w);
    wmove(w, y, lab + 11 + (spark_w > 0 ? spark_w : 0));
    tui_draw_role(w, TR_DIM, tail, cols - (lab + 11 + spark_w));
    /* token bytes */
    y++;
    wmove(w, y, lab);
    if (g->remote.r) {
        snprintf(line, sizeof line, "read in all %s (trunk %s, experts %s) on the server", f.total, f.trunk_total,
                 f.experts_total);
        tui_put(w, line, cols - lab);
    } else if (f.have_reads) {
        snprintf(line, sizeof line, "token %s (trunk %s, experts %s) %s last %s %s %u in flight", f.tok_now,
                 f.tok_trunk, f.tok_exp, tui_glyph()->bullet, f.tok_last, tui_glyph()->bullet, s->reads_in_flight);
        tui_put(w, line, cols - lab);
    } else {
        tui_draw_role(w, TR_DIM, "token bytes: none read from disk (weights resident)", cols - lab);
    }
    /* cache */
    y++;
    wmove(w, y, 0);
    tui_draw_role(w, TR_TITLE, "cache", lab);
    wmove(w, y, lab);
    waddstr(w, "hit now ");
    tui_draw_role(w, tui_hit_role(tui_gauges_hit_window(g)), f.hit_now, 5);
    waddstr(w, "  total ");
    tui_draw_role(w, tui_hit_role(tui_gauges_hit_total(g)), f.hit_total, 5);
    waddstr(w, "  layers ");
    int cx = getcurx(w);
    draw_layer_strip(g, w, y, cx, cols - cx - 1);
    /* memory */
    y++;
    wmove(w, y, 0);
    tui_draw_role(w, TR_TITLE, "mem", lab);
    wmove(w, y, lab);
    memory_text(&f, s, line, sizeof line);
    if (f.have_split) {
        int bw = (cols - lab) / 2;
        draw_memory_bar(s, w, y, lab, bw);
        wmove(w, y, lab + bw + 1);
        tui_put(w, line, cols - lab - bw - 1);
        y++;
        draw_memory_legend(s, w, y, lab, 1);
    } else {
        tui_put(w, line, cols - lab);
    }
    if (g->remote.r) goto rule;           /* the answer's speed is in the remote rows */
    /* speed */
    y++;
    if (y < rows) {
        wmove(w, y, 0);
        tui_draw_role(w, TR_TITLE, "speed", lab);
        wmove(w, y, lab);
        const char *bul = tui_glyph()->bullet;
        snprintf(line, sizeof line, "gen %s %s prompt %s %s TTFT %s %s %s", f.gen, bul, f.prompt, bul, f.ttft, bul,
                 f.draft);
        if (tui_text_width(line, strlen(line)) > cols - lab && y + 1 < rows - 2) {   /* narrow: draft on its own row */
            snprintf(line, sizeof line, "gen %s %s prompt %s %s TTFT %s", f.gen, bul, f.prompt, bul, f.ttft);
            tui_put(w, line, cols - lab);
            wmove(w, ++y, lab);
            tui_put(w, f.draft, cols - lab);
        } else {
            tui_put(w, line, cols - lab);
        }
    }
    /* timeline: caption, then the remaining rows but the last (the rule) */
    y++;
    int tl_rows = rows - 1 - (y + 1);
    if (y < rows - 2 && tl_rows > 0) {
        wmove(w, y, 0);
        tui_draw_role(w, TR_TITLE, "tokens", lab);
        draw_timeline(g, w, y + 1, lab, tl_rows, cols - lab, y);
    }
rule:                                     /* the rule closing the band */
    wattrset(w, tui_attr(TR_DIM));
    for (int x = 0; x < cols; x++) mvwaddstr(w, rows - 1, x, tui_glyph()->hline);
    wattrset(w, A_NORMAL);
}

/* Tall column: titled sections, the timeline takes the rows left over. */
static void draw_side(const tui_gauges *g, WINDOW *w)
{
    int rows, cols;
    getmaxyx(w, rows, cols);
    const k3_stats *s = &g->now;
    figures f;
    make_figures(g, &f);
    char line[256];
    const char *bul = tui_glyph()->bullet;
    int y = 0;
    if (g->remote.r) {                    /* a server: its sections, then (k3 serve) its engine's */
        y = tui_remote_draw_side(g, w, y);
        if (!tui_remote_has_engine(g) || y >= rows) return;
    }
    tui_draw_title_rule(w, y++, g->remote.r ? "SERVER DISK READ" : "DISK READ");
    wmove(w, y++, 1);
    snprintf(line, sizeof line, "now %s  %s peak %s", f.rate, bul, f.spark_max);
    tui_put(w, line, cols - 1);
    draw_sparkline(g, w, y++, 1, cols - 2);
    wmove(w, y++, 1);
    if (g->remote.r) {                    /* per-token figures stay on the server: its totals */
        snprintf(line, sizeof line, "in all %s", f.total);
        tui_put(w, line, cols - 1);
        wmove(w, y++, 1);
        snprintf(line, sizeof line, "trunk %s  %s experts %s", f.trunk_total, bul, f.experts_total);
        tui_put(w, line, cols - 1);
    } else if (f.have_reads) {
        snprintf(line, sizeof line, "this token %s  %s last %s", f.tok_now, bul, f.tok_last);
        tui_put(w, line, cols - 1);
        wmove(w, y++, 1);
        snprintf(line, sizeof line, "trunk %s  %s experts %s", f.tok_trunk, bul, f.tok_exp);
        tui_put(w, line, cols - 1);
        wmove(w, y++, 1);
        snprintf(line, sizeof line, "%u reads in flight  %s %llu done", s->reads_in_flight, bul,
                 (unsigned long long)s->reads_done);
        tui_put(w, line, cols - 1);
    } else {
        tui_draw_role(w, TR_DIM, "no disk reads (weights resident)", cols - 1);
    }
    if (y >= rows) return;
    tui_draw_title_rule(w, y++, g->remote.r ? "SERVER EXPERT CACHE" : "EXPERT CACHE");
    wmove(w, y, 1);
    waddstr(w, "hit now ");
    tui_draw_role(w, tui_hit_role(tui_gauges_hit_window(g)), f.hit_now, 5);
    waddstr(w, "  total ");
    tui_draw_role(w, tui_hit_role(tui_gauges_hit_total(g)), f.hit_total, 5);
    y++;
    wmove(w, y, 1);
    waddstr(w, "layers ");
    draw_layer_strip(g, w, y, getcurx(w), cols - getcurx(w) - 1);
    y++;
    if (y >= rows) return;
    tui_draw_title_rule(w, y++, g->remote.r ? "SERVER MEMORY" : "MEMORY");
    memory_text(&f, s, line, sizeof line);
    if (f.have_split) {
        draw_memory_bar(s, w, y++, 1, cols - 2);
        wmove(w, y++, 1);
        tui_put(w, line, cols - 1);
        y += draw_memory_legend(s, w, y, 1, 3);
        wmove(w, y++, 1);
        snprintf(line, sizeof line, "rss %s  %s peak %s", f.rss, bul, f.peak);
        tui_put(w, line, cols - 1);
    } else {
        wmove(w, y++, 1);
        snprintf(line, sizeof line, "rss %s  %s peak %s", f.rss, bul, f.peak);
        tui_put(w, line, cols - 1);
        wmove(w, y++, 1);
        tui_draw_role(w, TR_DIM, s->budget_bytes ? "split by use not reported" : "no budget: weights resident",
                 cols - 1);
    }
    if (y >= rows || g->remote.r) return;     /* a server's speed is in its ANSWER section */
    tui_draw_title_rule(w, y++, "SPEED");
    wmove(w, y++, 1);
    snprintf(line, sizeof line, "gen %s  %s prompt %s", f.gen, bul, f.prompt);
    tui_put(w, line, cols - 1);
    wmove(w, y++, 1);
    snprintf(line, sizeof line, "TTFT %s", f.ttft);
    tui_put(w, line, cols - 1);
    if (y + 4 <= rows) {
        wmove(w, y++, 1);
        tui_put(w, f.draft, cols - 1);
    }
    if (y + 3 > rows) return;
    tui_draw_title_rule(w, y++, "PER-TOKEN I/O");
    int tl_rows = rows - y - 1;
    if (tl_rows > 12) tl_rows = 12;
    if (tl_rows < 1) return;
    draw_timeline(g, w, y + 1, 1, tl_rows, cols - 2, y);
}

/* Taller terminals give the band's timeline more rows. */
int tui_gauges_band_rows(int total_rows)
{
    return total_rows >= 40 ? 12 : total_rows >= 30 ? 11 : 10;
}

/* Redrawn whole each frame; curses sends only the cells that changed. */
void tui_gauges_draw(const tui_gauges *g, WINDOW *w, int side)
{
    werase(w);
    if (g->have_now) {
        if (side) draw_side(g, w);
        else draw_band(g, w);
    }
    wnoutrefresh(w);
}
