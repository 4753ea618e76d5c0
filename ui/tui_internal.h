/* tui_internal.h - what the pieces of the terminal chat share. One UI
 * thread owns curses, readline, the history handle (while no job runs) and
 * everything in `struct tui`; the worker thread (tui_worker.c) only touches
 * the conversation and the fields of `tui_worker` under its mutex.
 *
 * Files and their one job each:
 *   tui_main.c        the event loop: poll, keys, worker events, frames
 *   tui_term.c        terminal setup/restore, signals, colours, glyphs
 *   tui_text.c        UTF-8 decoding, display widths, drawing text
 *   tui_layout.c      window geometry, status line, key bar, separator
 *   tui_transcript.c  the message list, wrapping, scrolling, drawing
 *   tui_gauges.c      sampling k3_stats into rates and histories
 *   tui_gauges_draw.c drawing the gauge panel
 *   tui_input.c       the readline bridge (tui_input.h)
 *   tui_commands.c    the / commands and their Tab completion
 *   tui_help.c        the F1 help view
 *   tui_worker.c      the engine thread and its queue to the UI
 *   tui_remote.c      a remote backend's figures: /metrics poller, network rate, stream timing
 *   tui_gauges_draw_remote.c  drawing those figures */
#ifndef K3_TUI_INTERNAL_H
#define K3_TUI_INTERNAL_H

#ifndef NCURSES_WIDECHAR
#define NCURSES_WIDECHAR 1
#endif
#include <curses.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include "commands.h"
#include "conversation.h"
#include "k3.h"
#include "multiline.h"
#include "remote.h"
#include "remote_metrics.h"
#include "rate_window.h"
#include "tui.h"
#include "tui_text.h"

/* ---- tui_term.c: terminal, signals, look ------------------------------ */

/* Colour/attribute roles; tui_attr maps them to colour pairs or, without
 * colour, to bold/reverse/dim. */
typedef enum tui_role {
    TR_PLAIN = 0,
    TR_STATUS,        /* the status line */
    TR_KEYNAME,       /* "F1" in the key bar */
    TR_KEYLABEL,      /* "Help" in the key bar */
    TR_USER,          /* the user's messages */
    TR_NOTICE,        /* UI notices */
    TR_ERROR,         /* errors */
    TR_DIM,           /* footers, hints */
    TR_TITLE,         /* gauge section titles */
    TR_GOOD, TR_WARN, TR_BAD,   /* hit-rate and context colours */
    TR_SEG_TRUNK, TR_SEG_RING, TR_SEG_CACHE, TR_SEG_STATE, TR_SEG_OTHER,  /* memory bar */
    TR_TIMELINE,      /* timeline columns without a hit rate */
    TR_LIVE,          /* the token being computed */
    TR_CODE,          /* code in an answer: blocks and `inline code` */
    TR_N_ROLES
} tui_role;

/* Glyph set: Unicode when the locale is UTF-8, ASCII otherwise. */
typedef struct tui_glyphs {
    int unicode;
    const char *bar[9];      /* vertical eighths, bar[0] = empty ... bar[8] = full */
    const char *hline, *ellipsis, *bullet, *arrow_up, *arrow_down, *prompt_mark;
    const char *seg_fill[5]; /* memory-bar fill per segment (trunk ring cache state other) */
    const char *seg_free;
} tui_glyphs;

/* Key codes we define for bracketed paste (ESC [200~ and ESC [201~). */
#define TUI_KEY_PASTE_BEGIN (KEY_MAX + 1)
#define TUI_KEY_PASTE_END (KEY_MAX + 2)

/* Open curses on the terminal; 0 or -1 (nothing changed: caller uses plain mode). */
int tui_term_open(void);
/* Restore the terminal (idempotent, also called from atexit). */
void tui_term_close(void);
/* Ctrl-Z: give the terminal back, stop, and take it again on resume. */
void tui_term_suspend(void);
/* Install SIGINT/TERM/HUP/WINCH/CONT handlers and fatal-signal restorers;
 * they write a byte to wake_fd so poll() returns. */
void tui_term_signals(int wake_fd);
/* Pending signal events, each cleared when read. */
int tui_term_take_resize(void);
int tui_term_take_interrupt(void);
int tui_term_take_terminate(void);
int tui_term_take_continue(void);
/* Send stderr to a pipe the UI reads (conversation warnings would otherwise
 * scribble over the screen); returns the read end or -1. */
int tui_term_capture_stderr(void);
/* Put stderr back (and print what was left unread). */
void tui_term_release_stderr(void);
attr_t tui_attr(tui_role role);
const tui_glyphs *tui_glyph(void);
/* 1 when colours are in use (not under NO_COLOR or on a monochrome terminal). */
int tui_term_colour(void);
/* A figure not known (yet): an em dash, "n/a" without Unicode. */
const char *tui_unknown(void);

/* What *italic* is drawn with: italics when the terminal has them (terminfo
 * sitm), else underline. */
attr_t tui_italic_attr(void);

/* ---- tui_transcript.c: the message list -------------------------------- */

typedef enum tui_entry_kind { TE_USER, TE_ASSISTANT, TE_SYSTEM, TE_NOTICE, TE_ERROR } tui_entry_kind;

typedef struct tui_entry {
    tui_entry_kind kind;
    char *text;                  /* UTF-8, whole characters only */
    size_t len, cap;
    char *footer;                /* dim line under an answer ("230 tokens · 45 tok/s"), or NULL */
    char *reasoning;             /* a thinking model's reasoning, dim above the answer, or NULL */
    size_t reasoning_len, reasoning_cap;
    int first_line;              /* index of its first screen line once wrapped */
} tui_entry;

typedef enum tui_line_part { TL_TEXT, TL_FOOTER, TL_BLANK, TL_REASONING } tui_line_part;

/* One screen line: a slice of an entry's text or footer, or a blank gap. */
typedef struct tui_line {
    int entry;
    tui_line_part part;
    int first;                   /* first line of the entry (gets the prefix) */
    size_t off, len;
    int md;                      /* md_kind (markdown.h) of a rendered answer line, else MD_NONE */
    int level;                   /* heading level */
    size_t src_start;            /* start of the source line (bold state before off) */
} tui_line;

typedef struct tui_transcript {
    tui_entry *entries;
    int n_entries, cap_entries;
    tui_line *wrapped_lines;
    int n_lines, cap_lines;
    int width;                   /* wrap width the lines were made for */
    int wrapped_entries;         /* entries [0, wrapped_entries) are wrapped in lines */
    int scroll;                  /* lines the view is scrolled up from the bottom (0 = follow) */
    int view_rows;               /* rows of the last draw (for paging) */
    int right_margin;            /* blank columns kept at the right (a gutter before the gauges) */
    int raw;                     /* 1 = answers as raw text, 0 = markdown rendered (/raw) */
    int reasoning_collapsed;     /* 1 = each reasoning as its first line only (/reasoning) */
} tui_transcript;

void tui_transcript_free(tui_transcript *t);
void tui_transcript_clear(tui_transcript *t);
/* Add an entry with text (may be empty); returns its index. */
int tui_transcript_add(tui_transcript *t, tui_entry_kind kind, const char *text);
/* printf-style notice. */
void tui_transcript_notice(tui_transcript *t, tui_entry_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Append streamed text to an entry (text must be whole characters). */
void tui_transcript_append(tui_transcript *t, int entry, const char *text, size_t len);
void tui_transcript_set_footer(tui_transcript *t, int entry, const char *footer);
/* Append a thinking model's reasoning to an answer entry (drawn dim above its text). */
void tui_transcript_append_reasoning(tui_transcript *t, int entry, const char *text, size_t len);
/* Drop the last entry (a message that was not sent). */
void tui_transcript_pop(tui_transcript *t);
/* Scroll by pages (+ = up toward older text). */
void tui_transcript_page(tui_transcript *t, int pages);
void tui_transcript_draw(tui_transcript *t, WINDOW *w);
/* Markdown rendering of answers on (0) or off (1); everything is wrapped again. */
void tui_transcript_set_raw(tui_transcript *t, int raw);
void tui_transcript_set_reasoning_collapsed(tui_transcript *t, int collapsed);

/* ---- tui_gauges.c: live statistics ------------------------------------- */

#define TUI_SPARK_SAMPLES 60     /* one per second: the last minute */
#define TUI_TIMELINE_MAX 256     /* per-token columns kept */

typedef struct tui_timeline_col {
    uint64_t bytes;              /* trunk + experts read for the token */
    float ms;
    uint32_t lookups, hits;
    int live;                    /* 1 = the token still being computed */
} tui_timeline_col;

/* A remote backend (k3 chat --endpoint): what the server says on /metrics
 * (polled by a thread of its own: a slow server never stalls the screen),
 * the network rate of the stream, and the answer's timing as the pieces
 * arrive. r is NULL for a local model. */
#define TUI_GAPS_MAX 4096
typedef struct tui_remote_gauges {
    remote *r;
    char host[128];              /* host:port of the endpoint, for titles */
    /* the poller thread and what it last read, under mu */
    pthread_t poller;
    int poller_started, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    remote_metrics polled;
    double polled_s;             /* when polled was read (for the rates between two polls) */
    int polled_ok;               /* the last GET /metrics worked */
    uint64_t n_polls;
    char polled_err[256];
    /* the UI thread's copy, taken each frame */
    remote_metrics m;
    int have_m;                  /* 1 = m is the server's latest */
    uint64_t polls_seen;
    char m_err[256];             /* why /metrics gave nothing ("" while the first poll runs) */
    /* network: bytes of the streams over at least 500 ms */
    double net_t0;
    uint64_t net_b0, net_turn_b0;
    double net_bps;              /* < 0 until the first full interval */
    uint64_t net_answer_bytes;   /* of the answer in progress (or the last) */
    /* the answer's pieces (from the worker): live while busy, then the turn's result */
    int n_pieces;
    double ttft_ms, tok_s, itl_p50_ms, itl_p90_ms;   /* < 0 = not known yet */
    int cached_tokens, prompt_tokens;                /* -1 = the server did not say */
} tui_remote_gauges;

typedef struct tui_gauges {
    k3_stats now;                /* the latest k3_stats_read */
    double now_s;
    int have_now;
    /* disk rate over a window of ~5 s (rate_window.h); its peak never falls */
    rate_window rate;
    double rate_bps;             /* < 0 until the window has two samples */
    /* sparkline: one sample per second */
    double spark_t0;
    uint64_t spark_b0;
    float spark[TUI_SPARK_SAMPLES];
    int n_spark;
    /* the token in progress: counters when the last record was seen */
    uint64_t seen_records;
    uint64_t tok_trunk0, tok_experts0;
    /* per-layer hit baselines at the start of the current answer */
    uint64_t layer_lookups0[K3_STATS_MAX_LAYERS], layer_hits0[K3_STATS_MAX_LAYERS];
    /* the current turn */
    int busy;                    /* a job runs on the worker */
    double turn_start_s, first_token_s;
    uint64_t prefilled0, decoded0;
    uint64_t draft_tokens0, draft_kept0;   /* speculative decoding baselines */
    int ctx_at_start, ctx_limit;
    /* the last finished turn (from turn_result) */
    double last_ttft_ms, last_prompt_tok_s, last_gen_tok_s;
    double last_draft_kept, last_tokens_per_pass;   /* 0 = no draft verified */
    tui_remote_gauges remote;    /* remote.r != NULL: the backend is a server */
} tui_gauges;

/* Read the engine's statistics and update rates and histories. */
void tui_gauges_sample(tui_gauges *g, const k3_model *m, double now_s);
/* A turn starts/ends: baselines for "this answer" figures. */
void tui_gauges_turn_start(tui_gauges *g, const k3_model *m, int ctx_used, int ctx_limit, double now_s);
void tui_gauges_turn_end(tui_gauges *g, const turn_result *r);
/* Derived figures for the status line and the panel. */
double tui_gauges_gen_tok_s(const tui_gauges *g);
double tui_gauges_prompt_tok_s(const tui_gauges *g);
double tui_gauges_ttft_ms(const tui_gauges *g, int *live);
/* Speculative decoding in this answer: the share of draft tokens kept and
 * tokens per pass over the model; 0 when no draft was verified. */
int tui_gauges_draft(const tui_gauges *g, double *kept_share, double *tokens_per_pass);
int tui_gauges_ctx_used(const tui_gauges *g);
/* Hit rate (0..1) of the last window of tokens / of everything; -1 = no lookups. */
double tui_gauges_hit_window(const tui_gauges *g);
double tui_gauges_hit_total(const tui_gauges *g);
/* Hit rate of layer l during this answer (else overall); -1 = no lookups. */
double tui_gauges_layer_hit(const tui_gauges *g, int l);
/* Bytes read so far for the token being computed. */
void tui_gauges_token_bytes(const tui_gauges *g, uint64_t *trunk, uint64_t *experts);
/* The last n decode tokens (oldest first) plus the live one; returns the count. */
int tui_gauges_timeline(const tui_gauges *g, tui_timeline_col *cols, int max_cols);
/* Human units: "12.3 MB", "4.0 GB", "512 B". */
void tui_fmt_bytes(char *buf, size_t cap, double bytes);
/* "1.2k" style counts. */
void tui_fmt_count(char *buf, size_t cap, double n);
/* Role for a hit rate (good / warn / bad), reverse of load colours: low is bad. */
tui_role tui_hit_role(double rate);

/* ---- tui_remote.c: a remote backend's figures --------------------------- */

/* Start polling the server's /metrics (signals blocked, as for the worker); 0 or -1. */
int tui_remote_start(tui_remote_gauges *rg, remote *r);
void tui_remote_stop(tui_remote_gauges *rg);
/* The remote engine's counters (k3 serve) as k3_stats, zeros for other
 * servers, plus the network rate: the remote counterpart of k3_stats_read. */
void tui_remote_sample(tui_remote_gauges *rg, k3_stats *out, double now_s);
/* A turn starts / ends: this answer's figures from zero / from the result. */
void tui_remote_turn_start(tui_remote_gauges *rg);
void tui_remote_turn_end(tui_remote_gauges *rg, const turn_result *r);
/* 1 when the server's /metrics carries a k3 engine panel (disk, cache, memory). */
int tui_remote_has_engine(const tui_gauges *g);
struct tui_worker;
/* While the answer streams: TTFT, tokens/s and inter-token p50/p90 from the worker's piece times. */
void tui_remote_live(tui_gauges *g, struct tui_worker *w);

/* ---- tui_gauges_draw.c ------------------------------------------------- */

/* Shared by both panel files: text in a role's colour clipped to max_cols,
 * and a section title with a rule to the right edge. */
int tui_draw_role(WINDOW *w, tui_role role, const char *s, int max_cols);
void tui_draw_title_rule(WINDOW *w, int y, const char *title);

/* Draw the panel: compact rows for a band above the transcript (narrow
 * terminals), or a tall column beside it (wide terminals). */
void tui_gauges_draw(const tui_gauges *g, WINDOW *w, int side);
/* Rows the compact band needs. */
int tui_gauges_band_rows(int total_rows);
/* tui_gauges_draw_remote.c: the remote sections (network, answer, server),
 * from row y; return the next free row. */
int tui_remote_draw_side(const tui_gauges *g, WINDOW *w, int y);
int tui_remote_draw_band(const tui_gauges *g, WINDOW *w, int y);
/* The last (or current) answer's figures in one line, unknown ones as dashes. */
void tui_remote_answer_text(const tui_gauges *g, char *buf, size_t cap);

/* ---- tui_worker.c: the engine thread ----------------------------------- */

typedef enum tui_job { TJ_NONE = 0, TJ_TURN, TJ_RESUME, TJ_RETRY, TJ_UNDO, TJ_EDIT } tui_job;

typedef struct tui_worker {
    /* the answer's pieces as they arrived (worker -> UI, under mu): for a remote backend's timing */
    int n_pieces;
    uint64_t first_piece_ns, last_piece_ns;
    float gaps_ms[TUI_GAPS_MAX];
    int n_gaps;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int wake_fd;                 /* eventfd the UI polls */
    conversation *conv;
    /* the request (UI -> worker) */
    tui_job job;
    char *arg;
    int stop_thread;
    volatile sig_atomic_t interrupt;   /* set and read with __atomic (UI thread -> worker) */
    /* results (worker -> UI), under mu */
    tui_job running;             /* job being run (TJ_NONE = idle) */
    char *text;                  /* streamed text not yet taken by the UI */
    size_t text_len, text_cap;
    char *reasoning;             /* streamed reasoning not yet taken by the UI */
    size_t reasoning_len, reasoning_cap;
    int progress_done, progress_total;
    char conv_uid[16];           /* the conversation's id and turns as the worker last saw them */
    int conv_turns;
    int conv_published;          /* 1 once the two above are set */
    int finished;                /* a job finished; results below */
    tui_job finished_job;
    int rc;
    int from_snapshot;
    turn_result result;
    k3_error err;
} tui_worker;

int tui_worker_start(tui_worker *w, conversation *c, int wake_fd);
void tui_worker_stop(tui_worker *w);
/* Queue a job (the worker must be idle); arg is copied. */
void tui_worker_submit(tui_worker *w, tui_job job, const char *arg);
int tui_worker_busy(tui_worker *w);

/* ---- the whole UI state (tui_main.c) ----------------------------------- */

typedef struct tui_layout {
    int rows, cols;
    int too_small;
    int gauges_side;             /* 1 = panel beside the transcript, 0 = band above it */
    int gauges_shown;            /* after size rules */
    WINDOW *status, *gauges, *transcript, *separator, *input, *keys, *keyreader;
    int input_rows;
} tui_layout;

typedef struct tui {
    conversation *conv;
    k3_model *model;
    history *db;
    tui_options opt;
    char model_name[64];
    char model_type[48];         /* the weights' type for the status line ("BF16 + MXFP4 experts") */
    chat_cmd_ctx cx;             /* the shared / commands' context (system prompt for /new in cx.system) */
    int editing;                 /* /edit: the next message replaces the last one */
    tui_layout lay;
    tui_transcript tr;
    tui_gauges g;
    tui_worker w;
    int wake_fd, stderr_fd;
    tui_job job;                 /* the job the UI last started (TJ_NONE when idle) */
    int progress_done, progress_total;   /* resume re-prefill progress, copied from the worker */
    int want_gauges;             /* F2 */
    int show_help;               /* F1 */
    int help_top;                /* first help line shown */
    int quit_requested;
    int stopping;                /* Ctrl-C sent to the running answer */
    int ctrl_c_armed;            /* one Ctrl-C at an empty idle prompt seen */
    int answer_entry;            /* transcript entry the answer streams into, or -1 */
    char utf8_tail[8];           /* incomplete character held back */
    size_t utf8_tail_len;
    char *last_sent;             /* the message being answered (put back if not sent) */
    int pasting;                 /* between ESC[200~ and ESC[201~ */
    char *paste;
    size_t paste_len, paste_cap;
    char errbuf[4096];           /* captured stderr, up to a newline */
    size_t errlen;
    int dirty;
    double last_frame_s;
    /* measurement: frames and key-to-screen latency */
    uint64_t n_frames;
    double frame_gap_max_s, frame_gap_sum_s;
    uint64_t n_frame_gaps;
    double key_seen_s;           /* time of the oldest key not yet on screen, 0 = none */
    double input_lat_max_s, input_lat_sum_s;
    uint64_t n_input_lat;
    int exit_code;
    multiline ml;                /* a """ multi-line message being entered */
    int ml_entry;                /* the transcript entry showing it, or -1 */
    /* the conversation's id and turns for the status bar: read from the
     * conversation when the worker is idle, else as the worker published
     * them (it writes the conversation while a job runs) */
    char status_uid[16];
    int status_turns;
    float status_temperature, status_top_p;   /* the sampling shown, as of the last idle frame */
} tui;

/* tui_layout.c */
void tui_layout_build(tui *t);
/* Rows the input may grow to on a terminal of this height. */
int tui_layout_max_input_rows(int rows);
void tui_layout_free(tui_layout *l);
void tui_draw_status(tui *t);
void tui_draw_keys(tui *t);
void tui_draw_separator(tui *t);
void tui_draw_too_small(tui *t);

/* tui_help.c */
void tui_help_draw(tui *t);

/* tui_commands.c */
/* Run a / command line; returns 1 if the UI should quit. */
int tui_command(tui *t, const char *line);
/* Tab completion candidates for the input line (NULL-terminated, malloc'd). */
char **tui_command_complete(void *ctx, const char *line, int start, int end, const char *word);
/* The shared command context (copies system) and its release. */
void tui_commands_init(tui *t, const char *system);
void tui_commands_free(tui *t);
/* Reload the transcript from the store after /resume or at start. */
void tui_load_transcript(tui *t);

/* tui_main.c */
/* Tokens in the session and its limit (0 and 0 for a remote backend: no local session). */
int tui_session_tokens(tui *t);
int tui_session_limit(tui *t);
/* Send a user message to the worker. */
void tui_send_message(tui *t, const char *text);
/* A busy job blocks commands that need the store: say so and return 1. */
int tui_refuse_if_busy(tui *t, const char *what);
double tui_now_s(void);

#endif
