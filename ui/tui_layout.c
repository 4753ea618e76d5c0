/* tui_layout.c - where everything goes, and the three one-line bars.
 * From the top: status line; the gauge band (narrow terminals) or the
 * transcript with the gauge column beside it (wide ones); a rule; the
 * input (1..8 rows, growing with multi-line text); the F-key bar. Gauges
 * are dropped first when space runs out; below 40x10 only a "too small"
 * notice is drawn. Windows are rebuilt on every resize (pads and windows
 * do not resize themselves reliably). */
#include <stdio.h>
#include <string.h>
#include "tui_input.h"
#include "tui_internal.h"

#define MIN_COLS 40
#define MIN_ROWS 10
#define SIDE_PANEL_MIN_COLS 110     /* from this width the gauges sit beside the transcript */

/* Delete a window if there is one. */
static void drop(WINDOW **w)
{
    if (*w) delwin(*w);
    *w = NULL;
}

/* Before a rebuild and at exit. */
void tui_layout_free(tui_layout *l)
{
    drop(&l->status);
    drop(&l->gauges);
    drop(&l->transcript);
    drop(&l->separator);
    drop(&l->input);
    drop(&l->keys);
}

/* The input may take a quarter of the screen, at most 8 rows. */
int tui_layout_max_input_rows(int rows)
{
    int r = rows / 4;
    return r < 1 ? 1 : r > 8 ? 8 : r;
}

/* A window that never shows a cursor of its own. */
static WINDOW *pane(int h, int w, int y, int x)
{
    WINDOW *win = newwin(h, w, y, x);
    if (win) leaveok(win, TRUE);
    return win;
}

/* Rebuilt on every resize, F2 and input growth: fresh windows of the right size. */
void tui_layout_build(tui *t)
{
    tui_layout *l = &t->lay;
    tui_layout_free(l);
    getmaxyx(stdscr, l->rows, l->cols);
    int rows = l->rows, cols = l->cols;
    if (!l->keyreader) {                /* reads keys; never drawn, so never refreshed by wgetch */
        l->keyreader = newwin(1, 1, 0, 0);
        keypad(l->keyreader, TRUE);
        meta(l->keyreader, TRUE);       /* 8-bit bytes as they come (non-UTF-8 locales read bytes) */
        nodelay(l->keyreader, TRUE);
        wnoutrefresh(l->keyreader);
    }
    l->too_small = cols < MIN_COLS || rows < MIN_ROWS;
    if (l->too_small) {
        l->status = pane(rows, cols, 0, 0);
        return;
    }
    l->input_rows = tui_input_rows(cols, tui_layout_max_input_rows(rows));
    int mid = rows - 3 - l->input_rows;        /* between status and rule */
    l->gauges_shown = t->want_gauges && cols >= 60 && rows >= 20;
    l->gauges_side = l->gauges_shown && cols >= SIDE_PANEL_MIN_COLS;
    l->status = pane(1, cols, 0, 0);
    l->separator = pane(1, cols, 1 + mid, 0);
    l->input = newwin(l->input_rows, cols, 2 + mid, 0);
    l->keys = pane(1, cols, rows - 1, 0);
    if (l->gauges_shown && l->gauges_side) {
        int gw = cols / 3 < 40 ? 40 : cols / 3 > 56 ? 56 : cols / 3;
        l->transcript = pane(mid, cols - gw, 1, 0);     /* its last column stays blank: a gutter */
        l->gauges = pane(mid, gw, 1, cols - gw);
        t->tr.right_margin = 1;
    } else if (l->gauges_shown && mid - tui_gauges_band_rows(rows) >= 4) {
        int bh = tui_gauges_band_rows(rows);
        l->gauges = pane(bh, cols, 1, 0);
        l->transcript = pane(mid - bh, cols, 1 + bh, 0);
        t->tr.right_margin = 0;
    } else {
        l->gauges_shown = 0;
        l->transcript = pane(mid, cols, 1, 0);
        t->tr.right_margin = 0;
    }
    tui_input_resize(rows, cols);
    t->dirty = 1;
}

/* Fields of the status line in order, dropped from the least important
 * until the line fits. */
typedef struct status_field {
    char text[160];
    tui_role role;
    int priority;                /* higher = kept longer */
} status_field;

/* "ctx 1.2k/4.1k 30%" with a warning colour near the limit. */
static void ctx_field(tui *t, status_field *f)
{
    int used = tui_gauges_ctx_used(&t->g), limit = t->g.ctx_limit;
    char u[16], lim[16];
    tui_fmt_count(u, sizeof u, used);
    tui_fmt_count(lim, sizeof lim, limit);
    double pct = limit > 0 ? 100.0 * used / limit : 0;
    snprintf(f->text, sizeof f->text, "ctx %s/%s %.0f%%", u, lim, pct);
    f->role = pct >= 90 ? TR_BAD : pct >= 75 ? TR_WARN : TR_STATUS;
    f->priority = 8;
}

/* idle / prefill n/N / decoding / stopping / resuming, with the layer. */
static void state_field(tui *t, status_field *f)
{
    const k3_stats *s = &t->g.now;
    f->priority = 10;
    f->role = TR_STATUS;
    if (!t->g.busy) {
        snprintf(f->text, sizeof f->text, "idle");
        return;
    }
    if (t->g.remote.r && t->job != TJ_RESUME && t->job != TJ_UNDO) {   /* a server: the stream, not its engine */
        if (t->stopping) snprintf(f->text, sizeof f->text, "stopping%s", tui_glyph()->ellipsis);
        else if (t->g.remote.n_pieces) snprintf(f->text, sizeof f->text, "streaming %d", t->g.remote.n_pieces);
        else snprintf(f->text, sizeof f->text, "waiting for the server%s", tui_glyph()->ellipsis);
        return;
    }
    char layer[32] = "";
    if (s->phase != K3_PHASE_IDLE && s->n_layers)
        snprintf(layer, sizeof layer, " L%u/%u", s->layer + 1, s->n_layers);
    if ((t->job == TJ_RESUME || t->job == TJ_UNDO)) {
        if (t->progress_total) {
            char bar[11];                  /* re-prefill progress: n/N and a bar */
            int fill = (int)((int64_t)t->progress_done * 10 / t->progress_total);
            for (int i = 0; i < 10; i++) bar[i] = i < fill ? '#' : '.';
            bar[10] = 0;
            snprintf(f->text, sizeof f->text, "prefilling %d/%d [%s]%s", t->progress_done, t->progress_total, bar, layer);
        } else {
            snprintf(f->text, sizeof f->text, "resuming%s", layer);
        }
        return;
    }
    uint64_t decoded = s->tokens_decoded - t->g.decoded0;
    if (t->stopping) snprintf(f->text, sizeof f->text, "stopping%s", tui_glyph()->ellipsis);
    else if (s->phase == K3_PHASE_PREFILL)
        snprintf(f->text, sizeof f->text, "prefill %u/%u%s", s->chunk_done, s->chunk_total, layer);
    else if (decoded > 0 || s->phase == K3_PHASE_DECODE)
        snprintf(f->text, sizeof f->text, "decoding %llu%s", (unsigned long long)decoded + 1, layer);
    else
        snprintf(f->text, sizeof f->text, "prefill%s", layer);
}

/* Model and its type, conversation, turn, context, sampling, state and
 * speed, most important kept. */
void tui_draw_status(tui *t)
{
    WINDOW *w = t->lay.status;
    int cols = getmaxx(w);
    status_field f[9];
    int n = 0;
    memset(f, 0, sizeof f);
    snprintf(f[n].text, sizeof f[n].text, "k3");
    f[n].role = TR_STATUS;
    f[n++].priority = 11;
    snprintf(f[n].text, sizeof f[n].text, "%s", t->model_name);
    f[n].role = TR_STATUS;
    f[n++].priority = 6;
    if (t->model_type[0]) {   /* as ollama and llama.cpp name a file's type: "BF16", "Q4_K_M" */
        snprintf(f[n].text, sizeof f[n].text, "%s", t->model_type);
        f[n].role = TR_STATUS;
        f[n++].priority = 1;  /* it never changes and /show says it: the first to go on a narrow screen */
    }
    if (!t->g.busy) {   /* the worker is idle: the conversation is the UI thread's to read */
        snprintf(t->status_uid, sizeof t->status_uid, "%s", conversation_uid(t->conv));
        t->status_turns = conversation_turns(t->conv);
    }
    snprintf(f[n].text, sizeof f[n].text, "conv %s", *t->status_uid ? t->status_uid : "new");
    f[n].role = TR_STATUS;
    f[n++].priority = 7;
    snprintf(f[n].text, sizeof f[n].text, "turn %d", t->status_turns);
    f[n].role = TR_STATUS;
    f[n++].priority = 3;
    if (t->g.ctx_limit > 0) ctx_field(t, &f[n++]);   /* a remote backend has no local context */
    if (!t->g.busy) {   /* a /resume on the worker sets the resumed conversation's sampling */
        t->status_temperature = conversation_sampler(t->conv)->temperature;
        t->status_top_p = conversation_sampler(t->conv)->top_p;
    }
    if (t->status_temperature <= 0) snprintf(f[n].text, sizeof f[n].text, "greedy");
    else snprintf(f[n].text, sizeof f[n].text, "temp %.2g top-p %.2g", t->status_temperature, t->status_top_p);
    f[n].role = TR_STATUS;
    f[n++].priority = 2;
    state_field(t, &f[n++]);
    double gen = tui_gauges_gen_tok_s(&t->g);
    if (gen > 0) {
        snprintf(f[n].text, sizeof f[n].text, "%.1f tok/s", gen);
        f[n].role = TR_STATUS;
        f[n++].priority = 5;
    }
    const char *sep = tui_glyph()->unicode ? " \u2502 " : " | ";
    int sep_w = tui_text_width(sep, strlen(sep));
    int keep[9];
    for (int i = 0; i < n; i++) keep[i] = 1;
    for (;;) {                                       /* drop low priorities until it fits */
        int width = 1, lowest = -1;
        for (int i = 0; i < n; i++) {
            if (!keep[i]) continue;
            width += tui_text_width(f[i].text, strlen(f[i].text)) + sep_w;
            if (lowest < 0 || f[i].priority < f[lowest].priority) lowest = i;
        }
        if (width <= cols || lowest < 0) break;
        keep[lowest] = 0;
    }
    wbkgdset(w, ' ' | tui_attr(TR_STATUS));
    werase(w);
    wmove(w, 0, 1);
    int first = 1;
    for (int i = 0; i < n; i++) {
        if (!keep[i]) continue;
        if (!first) {
            wattrset(w, tui_attr(TR_STATUS));
            tui_put(w, sep, cols);
        }
        first = 0;
        attr_t a = tui_attr(f[i].role);
        if (f[i].role != TR_STATUS) a = tui_attr(TR_STATUS) | A_BOLD;   /* warn within the bar: bold */
        if (i == 0) a |= A_BOLD;
        wattrset(w, a);
        tui_put(w, f[i].text, cols);
    }
    wattrset(w, A_NORMAL);
    wnoutrefresh(w);
}

/* htop-style key bar: key names plain, their labels in the bar colour. */
void tui_draw_keys(tui *t)
{
    WINDOW *w = t->lay.keys;
    int cols = getmaxx(w);
    const char *stop = t->g.busy ? "Stop" : "Clear";
    const char *keys[][2] = {{"F1", "Help"}, {"F2", "Gauges"}, {"F10", "Quit"}, {"PgUp/Dn", "Scroll"},
                             {"^C", stop},   {"^D", "Quit"},   {"Tab", "Complete"}, {"^R", "Search"},
                             {"^J", "Newline"}};
    werase(w);
    wmove(w, 0, 0);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        int need = (int)strlen(keys[i][0]) + (int)strlen(keys[i][1]) + 1;
        if (getcurx(w) + need > cols) break;
        wattrset(w, tui_attr(TR_KEYNAME));
        waddstr(w, keys[i][0]);
        wattrset(w, tui_attr(TR_KEYLABEL));
        waddstr(w, keys[i][1]);
        wattrset(w, A_NORMAL);
        if (getcurx(w) < cols - 1) waddch(w, ' ');
    }
    wattrset(w, A_NORMAL);
    wnoutrefresh(w);
}

/* The rule above the input: says when the view is scrolled, else hints. */
void tui_draw_separator(tui *t)
{
    WINDOW *w = t->lay.separator;
    int cols = getmaxx(w);
    const tui_glyphs *gl = tui_glyph();
    werase(w);
    wattrset(w, tui_attr(TR_DIM));
    for (int x = 0; x < cols; x++) mvwaddstr(w, 0, x, gl->hline);
    char msg[128];
    if (t->tr.scroll > 0) {
        snprintf(msg, sizeof msg, " %s %d more lines below (PgDn) ", gl->arrow_down, t->tr.scroll);
        wattrset(w, tui_attr(TR_NOTICE) | A_BOLD);
        wmove(w, 0, 2);
        tui_put(w, msg, cols - 2);
    } else if (t->ctrl_c_armed) {
        wattrset(w, tui_attr(TR_NOTICE) | A_BOLD);
        wmove(w, 0, 2);
        tui_put(w, " press Ctrl-C again (or Ctrl-D) to quit ", cols - 2);
    } else {
        snprintf(msg, sizeof msg, " Enter send %s Ctrl-J new line %s /help ", gl->bullet, gl->bullet);
        int mw = tui_text_width(msg, strlen(msg));
        if (mw + 4 < cols) {
            wmove(w, 0, cols - mw - 2);
            tui_put(w, msg, mw);
        }
    }
    wattrset(w, A_NORMAL);
    wnoutrefresh(w);
}

/* Below the minimum there is no sane layout: say what size is needed. */
void tui_draw_too_small(tui *t)
{
    WINDOW *w = t->lay.status;
    werase(w);
    char msg[96];
    wmove(w, t->lay.rows / 2 - 1, 0);
    tui_put(w, "terminal too small", t->lay.cols);
    snprintf(msg, sizeof msg, "%dx%d, need %dx%d", t->lay.cols, t->lay.rows, MIN_COLS, MIN_ROWS);
    wmove(w, t->lay.rows / 2, 0);
    tui_put(w, msg, t->lay.cols);
    wnoutrefresh(w);
}
