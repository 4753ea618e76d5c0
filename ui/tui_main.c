/* tui_main.c - the terminal chat's event loop. One thread owns the screen:
 * it poll()s the keyboard, the worker's eventfd and the captured stderr
 * with a timeout that is the frame timer, feeds keys to readline (or acts on
 * F-keys, PgUp/PgDn, Ctrl-C, Ctrl-D, paste), moves streamed text from the
 * worker into the transcript (holding back a cut UTF-8 character), and
 * redraws at most ~30 times a second with one doupdate() per frame. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>
#include "tui_input.h"
#include "tui_internal.h"
#include "k3_util.h"

#define FRAME_S (1.0 / 30)           /* frame cap */
#define IDLE_FRAME_S 1.0             /* gauges (rss, sparkline) refresh when nothing happens */

/* Monotonic seconds for frame pacing and latency figures. */
double tui_now_s(void) { return (double)k3_now_ns() * 1e-9; }

/* Context in use and its limit; a remote backend keeps no local session. */
int tui_session_tokens(tui *t)
{
    k3_session *s = conversation_session(t->conv);
    return s ? k3_session_n_tokens(s) : 0;
}

int tui_session_limit(tui *t)
{
    k3_session *s = conversation_session(t->conv);
    return s ? k3_session_max_tokens(s) : 0;
}

/* The store and the session belong to the worker while it runs a job. */
int tui_refuse_if_busy(tui *t, const char *what)
{
    if (!t->g.busy) return 0;
    tui_transcript_notice(&t->tr, TE_NOTICE, "/%s waits until the answer is done (Ctrl-C stops it)", what);
    return 1;
}

/* Quit as soon as nothing runs: a running answer is stopped first so its
 * partial text is committed (as interrupted) before we leave. */
static void request_quit(tui *t)
{
    t->quit_requested = 1;
    if (t->g.busy && (t->job == TJ_TURN || t->job == TJ_RETRY || t->job == TJ_EDIT)) {
        __atomic_store_n(&t->w.interrupt, 1, __ATOMIC_RELAXED);   /* read by the worker */
        t->stopping = 1;
    }
    t->dirty = 1;
}

/* Start a turn on the worker; while one runs, hand the text back instead of losing it. */
void tui_send_message(tui *t, const char *text)
{
    if (t->g.busy) {
        tui_input_set_text(text);
        tui_transcript_notice(&t->tr, TE_NOTICE, "still answering: press Enter again when it is done (Ctrl-C stops it)");
        return;
    }
    t->tr.scroll = 0;
    if (t->editing) {                    /* the edited message replaces the last exchange on screen too */
        tui_transcript_clear(&t->tr);
        tui_load_transcript(t);
        int n = t->tr.n_entries;
        if (n > 0 && t->tr.entries[n - 1].kind == TE_ASSISTANT) tui_transcript_pop(&t->tr);
        n = t->tr.n_entries;
        if (n > 0 && t->tr.entries[n - 1].kind == TE_USER) tui_transcript_pop(&t->tr);
    }
    tui_transcript_add(&t->tr, TE_USER, text);
    t->answer_entry = tui_transcript_add(&t->tr, TE_ASSISTANT, "");
    t->utf8_tail_len = 0;
    t->job = t->editing ? TJ_EDIT : TJ_TURN;
    t->stopping = 0;
    free(t->last_sent);
    t->last_sent = strdup(text);
    tui_gauges_turn_start(&t->g, t->model, tui_session_tokens(t), tui_session_limit(t), tui_now_s());
    tui_worker_submit(&t->w, t->job, text);
    t->editing = 0;
    t->dirty = 1;
}

/* Ctrl-C: stop the answer; else leave a search or clear the line; at an
 * empty idle prompt, arm, and quit on the second press. Pressing it many
 * times while an answer runs never quits. */
static void on_ctrl_c(tui *t)
{
    t->dirty = 1;
    if (t->g.busy) {
        if (t->job == TJ_TURN || t->job == TJ_RETRY || t->job == TJ_EDIT) {
            __atomic_store_n(&t->w.interrupt, 1, __ATOMIC_RELAXED);
            t->stopping = 1;
        }
        t->ctrl_c_armed = 0;
    } else if (tui_input_is_empty() && t->ml.open) {        /* drop a half-entered """ block */
        multiline_reset(&t->ml);
        tui_transcript_notice(&t->tr, TE_NOTICE, "multi-line message dropped");
    } else if (!tui_input_is_empty() || tui_input_in_search()) {
        tui_input_cancel();
        t->editing = 0;
        t->ctrl_c_armed = 0;
    } else if (t->ctrl_c_armed) {
        request_quit(t);
    } else {
        t->ctrl_c_armed = 1;
    }
}

/* A line of a """ block: shown as it grows (one notice), sent when closed. */
static void multiline_line(tui *t, const char *line)
{
    char *msg = NULL;
    int was_open = t->ml.open;
    int rc = multiline_feed(&t->ml, line, &msg);
    if (rc == 0) {
        if (!was_open || t->ml_entry < 0 || t->ml_entry >= t->tr.n_entries)   /* new, or the screen was cleared */
            t->ml_entry = tui_transcript_add(&t->tr, TE_NOTICE, "multi-line message (end it with \"\"\"):");
        tui_transcript_append(&t->tr, t->ml_entry, "\n", 1);
        tui_transcript_append(&t->tr, t->ml_entry, line, strlen(line));
        return;
    }
    if (was_open && t->ml_entry == t->tr.n_entries - 1) tui_transcript_pop(&t->tr);
    t->ml_entry = -1;
    if (rc == 1 && *msg) tui_send_message(t, msg);
    free(msg);
}

/* An accepted input line: a command, or a message ("//x" sends "/x"). */
static void handle_line(tui *t, char *line)
{
    t->ctrl_c_armed = 0;
    const char *p = line;
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    if (*p || t->ml.open) {
        tui_input_remember(line);
        if (t->ml.open || !strncmp(line, "\"\"\"", 3)) {
            multiline_line(t, line);
        } else if (line[0] == '/' && line[1] != '/') {
            if (tui_command(t, line)) request_quit(t);
        } else {
            tui_send_message(t, line[0] == '/' ? line + 1 : line);
        }
    }
    free(line);
    t->dirty = 1;
}

/* Hand the collected bytes to readline, then act on any accepted lines. */
static void flush_to_readline(tui *t, char *bytes, size_t *n)
{
    if (*n) tui_input_feed(bytes, *n);
    *n = 0;
    int eof;
    char *line;
    while ((line = tui_input_take_line(&eof))) handle_line(t, line);
    if (eof) request_quit(t);
    if (tui_input_changed()) t->dirty = 1;
}

/* Our SIGWINCH handler replaced curses' own: read the size and rebuild. */
static void do_resize(tui *t)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0)
        resize_term(ws.ws_row, ws.ws_col);
    tui_layout_build(t);
    clearok(curscr, TRUE);
    t->dirty = 1;
}

/* The bytes of a typed character in the locale's encoding. Outside a UTF-8
 * locale curses hands over each byte the terminal sent as its own
 * character, which the locale may not be able to encode (LANG=C): keep the
 * byte itself, so "naïve" typed on a UTF-8 terminal stays "naïve". Returns
 * the length, 0 for nothing. */
static size_t key_bytes(wint_t ch, char *mb)
{
    mbstate_t st;
    memset(&st, 0, sizeof st);
    size_t l = wcrtomb(mb, (wchar_t)ch, &st);
    if (l != (size_t)-1) return l;
    if (ch >= 0x80 && ch <= 0xFF) { mb[0] = (char)ch; return 1; }
    if (ch >= 0xDC80 && ch <= 0xDCFF) { mb[0] = (char)(ch & 0xFF); return 1; }   /* an escaped raw byte */
    return 0;
}

/* Bracketed paste: collect everything up to ESC[201~ and insert it as
 * text, newlines included, instead of letting Enter send half of it. */
static void paste_char(tui *t, wint_t ch)
{
    char mb[MB_LEN_MAX];
    if (ch == '\r') ch = '\n';
    size_t n = key_bytes(ch, mb);
    if (n == 0) return;
    if (t->paste_len + n + 1 > t->paste_cap) {
        size_t cap = t->paste_cap ? t->paste_cap * 2 : 1024;
        while (cap < t->paste_len + n + 1) cap *= 2;
        char *g = realloc(t->paste, cap);
        if (!g) return;
        t->paste = g;
        t->paste_cap = cap;
    }
    memcpy(t->paste + t->paste_len, mb, n);
    t->paste_len += n;
    t->paste[t->paste_len] = 0;
}

/* Keys the help view sees: scroll keys scroll, anything else closes it. */
static void help_key(tui *t, int kind, wint_t ch)
{
    if (kind == KEY_CODE_YES && (ch == KEY_NPAGE || ch == KEY_DOWN)) t->help_top += ch == KEY_NPAGE ? 10 : 1;
    else if (kind == KEY_CODE_YES && (ch == KEY_PPAGE || ch == KEY_UP)) t->help_top -= ch == KEY_PPAGE ? 10 : 1;
    else if (kind == KEY_CODE_YES && ch == KEY_RESIZE) do_resize(t);
    else t->show_help = 0;
    t->dirty = 1;
}

/* Function and cursor keys: our actions, or the escape sequence readline
 * knows (keypad mode turned it into a KEY_ code). */
static void special_key(tui *t, wint_t ch, char *bytes, size_t *n)
{
    const char *seq = NULL;
    switch (ch) {
    case KEY_RESIZE: flush_to_readline(t, bytes, n); do_resize(t); return;
    case KEY_F(1): t->show_help = 1; t->help_top = 0; t->dirty = 1; return;
    case KEY_F(2): t->want_gauges = !t->want_gauges; tui_layout_build(t); return;
    case KEY_F(10): request_quit(t); return;
    case KEY_PPAGE: tui_transcript_page(&t->tr, 1); t->dirty = 1; return;
    case KEY_NPAGE: tui_transcript_page(&t->tr, -1); t->dirty = 1; return;
    case TUI_KEY_PASTE_BEGIN: t->pasting = 1; t->paste_len = 0; return;
    case TUI_KEY_PASTE_END: return;
    case KEY_UP: seq = "\033[A"; break;
    case KEY_DOWN: seq = "\033[B"; break;
    case KEY_RIGHT: seq = "\033[C"; break;
    case KEY_LEFT: seq = "\033[D"; break;
    case KEY_HOME: seq = "\033[H"; break;
    case KEY_END: seq = "\033[F"; break;
    case KEY_DC: seq = "\033[3~"; break;
    case KEY_BACKSPACE: seq = "\177"; break;
    case KEY_ENTER: seq = "\r"; break;
    default: return;                                  /* other keys do nothing */
    }
    size_t l = strlen(seq);
    memcpy(bytes + *n, seq, l);
    *n += l;
}

/* One key like wget_wch. Outside a UTF-8 locale wget_wch waits forever for
 * the rest of a character it cannot decode (a UTF-8 byte >= 0x80 under
 * LANG=C) and swallows every key after it, so there we read bytes. */
static int read_key(WINDOW *w, wint_t *ch)
{
    if (tui_glyph()->unicode) return wget_wch(w, ch);
    int c = wgetch(w);
    if (c == ERR) return ERR;
    *ch = (wint_t)c;
    return c >= KEY_MIN ? KEY_CODE_YES : OK;
}

/* Drain every key curses has, in order; readline bytes are batched so an
 * escape sequence reaches it whole. */
static void process_keys(tui *t)
{
    char bytes[512];
    size_t n = 0;
    wint_t ch;
    int kind;
    while ((kind = read_key(t->lay.keyreader, &ch)) != ERR) {
        if (t->key_seen_s == 0) t->key_seen_s = tui_now_s();
        if (n > sizeof bytes - 16) flush_to_readline(t, bytes, &n);
        if (t->pasting) {
            if (kind == KEY_CODE_YES && ch == TUI_KEY_PASTE_END) {
                t->pasting = 0;
                flush_to_readline(t, bytes, &n);
                if (t->paste_len) tui_input_insert(t->paste);
                t->paste_len = 0;
                t->dirty = 1;
            } else if (kind == OK) {
                paste_char(t, ch);
            }
            continue;
        }
        if (t->show_help) { help_key(t, kind, ch); continue; }
        if (kind == KEY_CODE_YES) {
            if (ch != KEY_RESIZE) t->ctrl_c_armed = 0;
            special_key(t, ch, bytes, &n);
            continue;
        }
        if (ch == 3) {                                /* Ctrl-C */
            flush_to_readline(t, bytes, &n);
            on_ctrl_c(t);
            continue;
        }
        t->ctrl_c_armed = 0;
        if (ch == 4) {                                /* Ctrl-D: quit on an empty line */
            flush_to_readline(t, bytes, &n);
            if (tui_input_is_empty() && !tui_input_in_search()) { request_quit(t); continue; }
        } else if (ch == 0x1A) {                      /* Ctrl-Z */
            flush_to_readline(t, bytes, &n);
            tui_term_suspend();
            do_resize(t);
            continue;
        } else if (ch == 0x0C) {                      /* Ctrl-L */
            clearok(curscr, TRUE);
            t->dirty = 1;
            continue;
        }
        char mb[MB_LEN_MAX];
        size_t l = key_bytes(ch, mb);
        if (l == 0) continue;
        memcpy(bytes + n, mb, l);
        n += l;
    }
    flush_to_readline(t, bytes, &n);
}

/* Move streamed text into the answer, never splitting a character. */
static void append_answer(tui *t, const char *text, size_t len, int final)
{
    if (t->answer_entry < 0) return;
    char buf[8 + 4096];
    while (len > 0 || (final && t->utf8_tail_len)) {
        size_t take = len < 4096 ? len : 4096;
        memcpy(buf, t->utf8_tail, t->utf8_tail_len);
        memcpy(buf + t->utf8_tail_len, text, take);
        size_t total = t->utf8_tail_len + take;
        size_t whole = final && take == len ? total : tui_utf8_whole(buf, total);
        tui_transcript_append(&t->tr, t->answer_entry, buf, whole);
        t->utf8_tail_len = total - whole;
        memcpy(t->utf8_tail, buf + whole, t->utf8_tail_len);
        text += take;
        len -= take;
        if (final && len == 0) { t->utf8_tail_len = 0; break; }
    }
}

/* The footer under a finished answer. */
static void finish_turn(tui *t, int rc, turn_result *r, const k3_error *err)
{
    const char *bul = tui_glyph()->bullet;
    append_answer(t, "", 0, 1);
    if (rc == 1) {                                    /* not sent: nothing was stored */
        tui_transcript_pop(&t->tr);
        tui_transcript_notice(&t->tr, TE_ERROR, "%s", err->msg);
        if (tui_input_is_empty() && t->last_sent) tui_input_set_text(t->last_sent);
    } else {
        char footer[256];
        int n = snprintf(footer, sizeof footer, "%d tokens", r->generated_tokens);
        if (r->generated_tokens > 1) n += snprintf(footer + n, sizeof footer - (size_t)n, " %s %.1f tok/s", bul, r->decode_tok_s);
        if (r->generated_tokens > 0) n += snprintf(footer + n, sizeof footer - (size_t)n, " %s TTFT %.2f s", bul, r->ttft_ms / 1e3);
        if (conversation_remote(t->conv) && r->generated_tokens > 1)    /* a server: the gaps as they arrived */
            n += snprintf(footer + n, sizeof footer - (size_t)n, " %s inter-token p50 %.1f ms p90 %.1f ms", bul,
                          r->itl_p50_ms, r->itl_p90_ms);
        if (rc < 0 || r->error) snprintf(footer + n, sizeof footer - (size_t)n, " %s error", bul);
        else if (r->interrupted) snprintf(footer + n, sizeof footer - (size_t)n, " %s interrupted", bul);
        else if (r->context_full) snprintf(footer + n, sizeof footer - (size_t)n, " %s context full: /new starts over", bul);
        else if (r->length_limit) snprintf(footer + n, sizeof footer - (size_t)n, " %s length limit reached (-n)", bul);
        else if (r->loop_period) snprintf(footer + n, sizeof footer - (size_t)n, " %s stopped: it repeated itself", bul);
        tui_transcript_set_footer(&t->tr, t->answer_entry, footer);
        if (rc < 0) tui_transcript_notice(&t->tr, TE_ERROR, "%s", err->msg);
        else if (r->error && r->error_msg[0])          /* a server's failure: the conversation goes on */
            tui_transcript_notice(&t->tr, TE_ERROR, "%s", r->error_msg);
        else if (r->length_in_reasoning)               /* the whole budget went on thinking */
            tui_transcript_notice(&t->tr, TE_ERROR, "the answer ran out of tokens while still reasoning (finish_reason "
                                                    "length, no answer): /set n=N raises the limit");
    }
    tui_gauges_turn_end(&t->g, rc == 1 ? NULL : r);
}

/* A resume finished: show the stored conversation, or fall back to a new
 * one (a half-rebuilt session must not take more turns). */
static void finish_resume(tui *t, int rc, int from_snapshot, const k3_error *err)
{
    tui_gauges_turn_end(&t->g, NULL);
    tui_transcript_clear(&t->tr);
    if (rc == 0) {
        tui_load_transcript(t);
        tui_transcript_notice(&t->tr, TE_NOTICE, "resumed conversation %s %s", conversation_uid(t->conv),
                              from_snapshot ? "from its state snapshot" : "by re-reading its messages");
        return;
    }
    if (rc == 1) {                        /* not resumed: the current conversation goes on */
        tui_load_transcript(t);
        tui_transcript_notice(&t->tr, TE_ERROR, "%s", err->msg);
        return;
    }
    tui_transcript_notice(&t->tr, TE_ERROR, "%s", err->msg);
    k3_error e2;
    if (conversation_start(t->conv, t->cx.system, &e2) == 0)
        tui_transcript_notice(&t->tr, TE_NOTICE, "started a new conversation %s instead", conversation_uid(t->conv));
    else
        tui_transcript_notice(&t->tr, TE_ERROR, "%s", e2.msg);
}

/* /undo finished: show the record as it now is. */
static void finish_undo(tui *t, int rc, const k3_error *err)
{
    tui_gauges_turn_end(&t->g, NULL);
    tui_transcript_clear(&t->tr);
    tui_load_transcript(t);
    if (rc) tui_transcript_notice(&t->tr, TE_ERROR, "%s", err->msg);
    else if (!conversation_session(t->conv)) tui_transcript_notice(&t->tr, TE_NOTICE, "the last exchange was undone");
    else tui_transcript_notice(&t->tr, TE_NOTICE, "the last exchange was undone (%d tokens of state kept)",
                               tui_session_tokens(t));
}

/* Take what the worker produced since the last look. */
static void take_worker_output(tui *t)
{
    tui_worker *w = &t->w;
    pthread_mutex_lock(&w->mu);
    char *text = w->text;
    size_t len = w->text_len;
    w->text = NULL;
    w->text_len = w->text_cap = 0;
    char *reasoning = w->reasoning;
    size_t reasoning_len = w->reasoning_len;
    w->reasoning = NULL;
    w->reasoning_len = w->reasoning_cap = 0;
    t->progress_done = w->progress_done;
    t->progress_total = w->progress_total;
    if (w->conv_published) {
        memcpy(t->status_uid, w->conv_uid, sizeof t->status_uid);
        t->status_turns = w->conv_turns;
    }
    int finished = w->finished;
    tui_job job = w->finished_job;
    int rc = w->rc, from_snapshot = w->from_snapshot;
    turn_result r = w->result;
    k3_error err = w->err;
    if (finished) {
        w->finished = 0;
        memset(&w->result, 0, sizeof w->result);
    }
    pthread_mutex_unlock(&w->mu);
    if (reasoning_len) {
        if (t->g.first_token_s == 0) t->g.first_token_s = tui_now_s();
        tui_transcript_append_reasoning(&t->tr, t->answer_entry, reasoning, reasoning_len);
        t->dirty = 1;
    }
    free(reasoning);
    if (len) {
        if (t->g.first_token_s == 0) t->g.first_token_s = tui_now_s();
        append_answer(t, text, len, 0);
        t->dirty = 1;
    }
    free(text);
    if ((t->job == TJ_RESUME || t->job == TJ_UNDO) && t->progress_total) t->dirty = 1;
    if (!finished) return;
    if (job == TJ_TURN || job == TJ_RETRY || job == TJ_EDIT) finish_turn(t, rc, &r, &err);
    else if (job == TJ_UNDO) finish_undo(t, rc, &err);
    else finish_resume(t, rc, from_snapshot, &err);
    turn_result_free(&r);
    t->answer_entry = -1;
    t->job = TJ_NONE;
    t->stopping = 0;
    t->g.ctx_at_start = tui_session_tokens(t);
    t->dirty = 1;
}

/* Lines written to stderr (conversation warnings) become notices. */
static void take_stderr(tui *t)
{
    if (t->stderr_fd < 0) return;
    for (;;) {
        ssize_t n = read(t->stderr_fd, t->errbuf + t->errlen, sizeof t->errbuf - 1 - t->errlen);
        if (n <= 0) break;
        t->errlen += (size_t)n;
        t->errbuf[t->errlen] = 0;
        char *start = t->errbuf, *nl;
        while ((nl = strchr(start, '\n'))) {
            *nl = 0;
            if (*start) tui_transcript_add(&t->tr, TE_NOTICE, start);
            start = nl + 1;
        }
        size_t rest = t->errlen - (size_t)(start - t->errbuf);
        if (rest == sizeof t->errbuf - 1) {           /* a huge line: show it as is */
            tui_transcript_add(&t->tr, TE_NOTICE, t->errbuf);
            rest = 0;
        }
        memmove(t->errbuf, start, rest);
        t->errlen = rest;
        t->dirty = 1;
    }
}

/* One frame: every pane into curses' virtual screen, the input last (it
 * owns the cursor), then a single doupdate(), which sends only changes. */
static void draw_frame(tui *t, double now)
{
    if (!t->lay.too_small && t->lay.input_rows != tui_input_rows(t->lay.cols, tui_layout_max_input_rows(t->lay.rows)))
        tui_layout_build(t);
    tui_gauges_sample(&t->g, t->model, now);
    tui_remote_live(&t->g, &t->w);
    if (t->lay.too_small) {
        tui_draw_too_small(t);
        curs_set(0);
    } else {
        tui_draw_status(t);
        if (t->show_help) {
            tui_help_draw(t);
        } else {
            if (t->lay.gauges_shown) tui_gauges_draw(&t->g, t->lay.gauges, t->lay.gauges_side);
            tui_transcript_draw(&t->tr, t->lay.transcript);
        }
        tui_draw_keys(t);
        if (!t->show_help) {                         /* help covers the rule and the input */
            tui_draw_separator(t);
            tui_input_draw(t->lay.input);
            wnoutrefresh(t->lay.input);
        }
        curs_set(t->show_help ? 0 : 1);
    }
    doupdate();
    double done = tui_now_s();
    if (t->g.busy && t->last_frame_s > 0) {
        double gap = now - t->last_frame_s;
        t->frame_gap_sum_s += gap;
        t->n_frame_gaps++;
        if (gap > t->frame_gap_max_s) t->frame_gap_max_s = gap;
    }
    if (t->key_seen_s > 0) {
        double lat = done - t->key_seen_s;
        t->input_lat_sum_s += lat;
        t->n_input_lat++;
        if (lat > t->input_lat_max_s) t->input_lat_max_s = lat;
        t->key_seen_s = 0;
    }
    t->n_frames++;
    t->last_frame_s = now;
    t->dirty = 0;
}

/* How long poll() may sleep: until the next frame is allowed when there is
 * something to draw, a frame period while busy, else the idle refresh. */
static int poll_timeout_ms(const tui *t, double now)
{
    double since = now - t->last_frame_s;
    double wait = t->dirty || t->g.busy ? FRAME_S - since : IDLE_FRAME_S - since;
    if (wait < 0) wait = 0;
    return (int)(wait * 1e3 + 0.5);
}

/* Until quit is asked and the worker is idle (so an interrupted answer is committed). */
static void loop(tui *t)
{
    struct pollfd fds[3] = {{STDIN_FILENO, POLLIN, 0}, {t->wake_fd, POLLIN, 0}, {t->stderr_fd, POLLIN, 0}};
    int nfds = t->stderr_fd >= 0 ? 3 : 2;
    for (;;) {
        int rc = poll(fds, (nfds_t)nfds, poll_timeout_ms(t, tui_now_s()));
        if (rc < 0 && errno != EINTR) break;
        if (fds[1].revents & POLLIN) {
            uint64_t v;
            ssize_t r = read(t->wake_fd, &v, sizeof v);
            (void)r;
        }
        if (tui_term_take_resize()) do_resize(t);
        if (tui_term_take_continue()) { clearok(curscr, TRUE); t->dirty = 1; }
        if (tui_term_take_interrupt()) on_ctrl_c(t);
        if (tui_term_take_terminate()) {           /* SIGTERM/SIGHUP: keep the answer so far, exit 128 + 15 */
            t->exit_code = 143;
            request_quit(t);
        }
        take_worker_output(t);
        take_stderr(t);
        process_keys(t);
        if (t->quit_requested && !t->g.busy) break;
        double now = tui_now_s();
        double since = now - t->last_frame_s;
        if (((t->dirty || t->g.busy) && since >= FRAME_S) || since >= IDLE_FRAME_S) draw_frame(t, now);
    }
}

/* The model directory's last component names the model on screen, with
 * the weights' type beside it (a server's model has none to show). */
static void set_model_name(tui *t, const char *dir)
{
    const char *d = dir ? dir : "";
    size_t len = strlen(d);
    while (len > 1 && d[len - 1] == '/') len--;
    size_t start = len;
    while (start > 0 && d[start - 1] != '/') start--;
    snprintf(t->model_name, sizeof t->model_name, "%.*s", (int)(len - start), d + start);
    if (!t->model) {                             /* a server: its model, and where */
        snprintf(t->model_name, sizeof t->model_name, "%.30s @ %.30s", conversation_remote_model(t->conv),
                 t->g.remote.host);
        return;
    }
    k3_model_info info;
    k3_model_get_info(t->model, &info);
    snprintf(t->model_type, sizeof t->model_type, "%s", info.type_label);
    if (info.random_weights)                     /* nobody should mistake the demo for a real model */
        snprintf(t->model_name, sizeof t->model_name, "%.*s (random weights)", (int)(len - start < 40 ? len - start : 40),
                 d + start);
}

/* Completion candidates readline wants listed go to the transcript. */
static void show_matches(void *ctx, char **matches, int n)
{
    tui *t = ctx;
    char line[1024];
    size_t len = 0;
    line[0] = 0;
    for (int i = 0; i < n && len < sizeof line - 40; i++)
        len += (size_t)snprintf(line + len, sizeof line - len, "%s%s", i ? "  " : "", matches[i]);
    tui_transcript_notice(&t->tr, TE_NOTICE, "%s", line);
    t->dirty = 1;
}

/* Set up terminal, signals, stderr capture, worker and readline; run; undo it all in
 * reverse order; then say how to resume. */
int tui_chat_run(conversation *c, k3_model *m, history *db, const tui_options *opt)
{
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) return TUI_UNAVAILABLE;
    int wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd < 0) return TUI_UNAVAILABLE;
    if (tui_term_open()) {
        close(wake_fd);
        return TUI_UNAVAILABLE;
    }
    tui *t = calloc(1, sizeof *t);
    if (!t) {
        tui_term_close();
        close(wake_fd);
        return 1;
    }
    t->conv = c;
    t->model = m;
    t->db = db;
    t->opt = *opt;
    t->wake_fd = wake_fd;
    t->want_gauges = 1;
    t->answer_entry = -1;
    t->ml_entry = -1;
    tui_commands_init(t, opt->system);
    if (!m && (!conversation_remote(c) || tui_remote_start(&t->g.remote, conversation_remote(c)))) {
        tui_term_close();
        fprintf(stderr, "k3: cannot start the /metrics reader of the remote endpoint\n");
        tui_commands_free(t);
        free(t);
        close(wake_fd);
        return 1;
    }
    set_model_name(t, opt->model_dir);
    tui_term_signals(wake_fd);
    t->stderr_fd = tui_term_capture_stderr();
    int rc = 0;
    if (tui_worker_start(&t->w, c, wake_fd)) {
        tui_term_release_stderr();
        tui_term_close();
        fprintf(stderr, "k3: cannot start the engine thread\n");
        tui_commands_free(t);
        free(t);
        close(wake_fd);
        return 1;
    }
    tui_input_open(tui_glyph()->unicode ? "\u203a " : "> ", tui_command_complete, show_matches, t);
    tui_layout_build(t);
    t->g.ctx_at_start = tui_session_tokens(t);
    t->g.ctx_limit = tui_session_limit(t);
    tui_load_transcript(t);
    tui_transcript_notice(&t->tr, TE_NOTICE, "conversation %s%s %s Enter sends %s F1 help %s Ctrl-D quits",
                          *conversation_uid(c) ? conversation_uid(c) : "(new)",
                          conversation_turns(c) ? (conversation_resumed_from_snapshot(c) ? " (resumed from its snapshot)" : " (resumed)") : "",
                          tui_glyph()->bullet, tui_glyph()->bullet, tui_glyph()->bullet);
    if (strstr(t->model_name, "(random weights)"))
        tui_transcript_notice(&t->tr, TE_NOTICE, "this model has random weights (k3 gen): its answers are noise; "
                              "k3 help models says how to get a real one");
    draw_frame(t, tui_now_s());
    loop(t);
    tui_worker_stop(&t->w);
    tui_remote_stop(&t->g.remote);
    tui_input_close();
    tui_layout_free(&t->lay);
    if (t->lay.keyreader) delwin(t->lay.keyreader);
    tui_term_close();
    take_stderr(t);
    tui_term_release_stderr();
    if (*conversation_uid(c))
        fprintf(stderr, "k3: conversation %s saved; resume with: %s --resume %s\n", conversation_uid(c),
                opt->resume_hint ? opt->resume_hint : "k3 chat", conversation_uid(c));
    else
        fprintf(stderr, "k3: no message sent, nothing saved\n");
    if (t->exit_code) rc = t->exit_code;
    tui_transcript_free(&t->tr);
    multiline_free(&t->ml);
    tui_commands_free(t);
    free(t->last_sent);
    free(t->paste);
    free(t);
    close(wake_fd);
    return rc;
}
