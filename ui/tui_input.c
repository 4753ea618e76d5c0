/* tui_input.c - see tui_input.h. The pattern (docs/ARCHITECTURE.md,
 * "Layers and the door"): readline reads from our byte buffer through rl_getc_function and
 * rl_input_available_hook, writes nothing (rl_outstream is /dev/null), and
 * its redisplay hook only marks the line changed; the UI draws the line in
 * its own frame, so readline never draws at an odd moment. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <readline/history.h>
#include <readline/readline.h>
#include "line_input.h"
#include "tui_input.h"
#include "tui_text.h"

#define FEED_CAP 8192
#define MAX_QUEUED_LINES 64

static struct {
    unsigned char feed[FEED_CAP];
    size_t feed_head, feed_len;
    char *lines[MAX_QUEUED_LINES];
    int n_lines;
    int eof;
    int changed;
    FILE *devnull;
    char history_file[4096];
    tui_complete_fn complete;
    tui_matches_fn show_matches;
    void *ctx;
    char **candidates;               /* current completion list */
    int installed;
} in;

/* readline asks for the next byte: serve the buffer. It may ask once more
 * than we have while looking ahead for an escape sequence; 0 (C-@, a
 * harmless set-mark) is safer than EOF, which would end the chat. */
static int feed_getc(FILE *f)
{
    (void)f;
    if (in.feed_head < in.feed_len) return in.feed[in.feed_head++];
    return 0;
}

/* Our buffer, not the real stdin, says whether more input is queued. */
static int feed_available(void)
{
    return in.feed_head < in.feed_len;
}

/* readline wants the line redrawn: do it in the next frame. */
static void note_redisplay(void)
{
    in.changed = 1;
}

/* An accepted line (or EOF) waits for the UI in a small queue, so commands
 * run outside readline's callback. */
static void on_line(char *line)
{
    if (!line) { in.eof = 1; return; }
    if (in.n_lines < MAX_QUEUED_LINES) in.lines[in.n_lines++] = line;
    else free(line);
    in.changed = 1;
}

/* Ctrl-J and Alt-Enter put a newline in the message (multi-line entry). */
static int insert_newline(int count, int key)
{
    (void)key;
    for (int i = 0; i < (count > 0 ? count : 1); i++) rl_insert_text("\n");
    return 0;
}

/* readline's generator protocol over the candidate list we were given. */
static char *candidate_generator(const char *text, int state)
{
    static int index;
    if (state == 0) index = 0;
    if (!in.candidates) return NULL;
    size_t n = strlen(text);
    while (in.candidates[index]) {
        const char *c = in.candidates[index++];
        if (!strncmp(c, text, n)) return strdup(c);
    }
    return NULL;
}

/* The candidate list lives until the next completion. */
static void free_candidates(void)
{
    if (!in.candidates) return;
    for (char **c = in.candidates; *c; c++) free(*c);
    free(in.candidates);
    in.candidates = NULL;
}

/* Only our own candidates (commands, options, ids): never file names. A
 * candidate ending in '=' (an option to fill in) gets no trailing space. */
static char **attempt_completion(const char *text, int start, int end)
{
    rl_attempted_completion_over = 1;
    free_candidates();
    if (!in.complete) return NULL;
    in.candidates = in.complete(in.ctx, rl_line_buffer, start, end, text);
    if (!in.candidates) return NULL;
    int all_eq = 1, any = 0;
    for (char **c = in.candidates; *c; c++) {
        if (strncmp(*c, text, strlen(text))) continue;
        any = 1;
        size_t l = strlen(*c);
        if (!l || (*c)[l - 1] != '=') all_eq = 0;
    }
    if (any && all_eq) rl_completion_suppress_append = 1;
    return rl_completion_matches(text, candidate_generator);
}

/* Several matches: hand them to the UI to show (readline would print them
 * to its output stream, which goes nowhere). */
static void display_matches(char **matches, int n, int max_len)
{
    (void)max_len;
    if (in.show_matches) in.show_matches(in.ctx, matches + 1, n);
    in.changed = 1;
}

/* The input history file under the XDG state directory (shared with the
 * line mode), created so that per-line appends work from the first line. */
static void open_history_file(void)
{
    if (line_input_history_path(in.history_file, sizeof in.history_file)) return;
    int fd = open(in.history_file, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) { in.history_file[0] = 0; return; }
    close(fd);
    using_history();
    read_history(in.history_file);
    stifle_history(1000);
}

/* Configure readline before installing the handler: no signals, no SIGWINCH, no terminal
 * preparation, no environment changes, output to /dev/null, input from our buffer. */
void tui_input_open(const char *prompt, tui_complete_fn complete, tui_matches_fn show_matches, void *ctx)
{
    in.complete = complete;
    in.show_matches = show_matches;
    in.ctx = ctx;
    in.devnull = fopen("/dev/null", "w");
    rl_readline_name = "k3";
    rl_catch_signals = 0;
    rl_catch_sigwinch = 0;
    rl_change_environment = 0;
    rl_prep_term_function = NULL;
    rl_deprep_term_function = NULL;
    rl_getc_function = feed_getc;
    rl_input_available_hook = feed_available;
    rl_redisplay_function = note_redisplay;
    rl_outstream = in.devnull ? in.devnull : stdout;
    rl_attempted_completion_function = attempt_completion;
    rl_completion_display_matches_hook = display_matches;
    rl_initialize();
    rl_variable_bind("bell-style", "none");
    rl_variable_bind("enable-bracketed-paste", "off");   /* the UI handles paste */
    rl_variable_bind("enable-keypad", "off");
    rl_variable_bind("show-all-if-ambiguous", "on");
    /* every byte typed is text, whatever the locale says: in LANG=C readline
     * would otherwise turn bytes >= 0x80 (UTF-8 from the terminal) into Meta
     * keys and drop them */
    rl_variable_bind("input-meta", "on");
    rl_variable_bind("convert-meta", "off");
    rl_variable_bind("output-meta", "on");
    rl_bind_key('\n', insert_newline);
    rl_bind_keyseq("\\e\\r", insert_newline);
    rl_bind_keyseq("\\e\\n", insert_newline);
    rl_set_screen_size(LINES, COLS);
    open_history_file();
    rl_callback_handler_install(prompt, on_line);
    in.installed = 1;
    in.changed = 1;
}

/* Leave readline and the history file in order at exit. */
void tui_input_close(void)
{
    if (!in.installed) return;
    in.installed = 0;
    rl_callback_handler_remove();
    if (*in.history_file) history_truncate_file(in.history_file, 1000);
    for (int i = 0; i < in.n_lines; i++) free(in.lines[i]);
    in.n_lines = 0;
    free_candidates();
    if (in.devnull) fclose(in.devnull);
    in.devnull = NULL;
}

/* Run readline over the bytes until it consumed them all (it reads one key per call). */
void tui_input_feed(const char *bytes, size_t n)
{
    while (n > 0) {
        size_t take = n < FEED_CAP ? n : FEED_CAP;
        memcpy(in.feed, bytes, take);
        in.feed_head = 0;
        in.feed_len = take;
        while (in.feed_head < in.feed_len) rl_callback_read_char();
        bytes += take;
        n -= take;
    }
    in.feed_head = in.feed_len = 0;
}

/* Pasted text goes in as text, so its newlines do not send the message. */
void tui_input_insert(const char *text)
{
    rl_insert_text(text);
    in.changed = 1;
}

/* Lines wait here until the UI handles them, outside readline's callback. */
char *tui_input_take_line(int *eof)
{
    *eof = 0;
    if (in.n_lines > 0) {
        char *l = in.lines[0];
        memmove(in.lines, in.lines + 1, (size_t)(in.n_lines - 1) * sizeof in.lines[0]);
        in.n_lines--;
        return l;
    }
    if (in.eof) {
        in.eof = 0;
        *eof = 1;
    }
    return NULL;
}

/* Ctrl-C and Ctrl-D act differently on an empty line. */
int tui_input_is_empty(void)
{
    return rl_end == 0;
}

/* Ctrl-C first leaves a Ctrl-R search. */
int tui_input_in_search(void)
{
    return RL_ISSTATE(RL_STATE_ISEARCH | RL_STATE_NSEARCH) != 0;
}

/* Ctrl-C at the prompt: drop the line and any half-typed key sequence. */
void tui_input_cancel(void)
{
    if (tui_input_in_search()) tui_input_feed("\007", 1);   /* C-g: leave the search, then clear */
    rl_callback_sigcleanup();
    rl_replace_line("", 0);
    rl_point = rl_end = rl_mark = 0;
    in.changed = 1;
}

/* Put a message back for editing when it could not be sent. */
void tui_input_set_text(const char *text)
{
    rl_replace_line(text, 0);
    rl_point = rl_end;
    in.changed = 1;
}

/* The file holds one entry per line (the line mode reads and rewrites it
 * too), so a multi-line message is remembered for this session only. */
void tui_input_remember(const char *line)
{
    if (!*line || *line == ' ') return;      /* a leading space keeps a line out of the history */
    add_history(line);
    if (*in.history_file && !strchr(line, '\n')) append_history(1, in.history_file);
    /* readline already began the next line (and set its history position)
     * when it handed us this one: move the position past the new entry, as
     * readline() itself does before each line, so Up brings this line back */
    using_history();
}

/* Walk the prompt and the text cell by cell, as they will be drawn: wrap at
 * the width, break at '\n', and indent continuation rows under the text.
 * Draws rows [row_off, row_off + max_rows) into w when w is not NULL.
 * Returns the rows used; *cur_row and *cur_col receive the edit point. */
static int walk(WINDOW *w, int cols, int row_off, int max_rows, int *cur_row, int *cur_col)
{
    const char *prompt = rl_display_prompt ? rl_display_prompt : "";
    const char *buf = rl_line_buffer ? rl_line_buffer : "";
    size_t blen = rl_line_buffer ? (size_t)rl_end : 0;
    size_t point = rl_point < 0 ? 0 : (size_t)rl_point;
    int row = 0, col = 0;
    uint32_t cp;
    if (cols < 2) cols = 2;
    for (size_t i = 0, n = strlen(prompt); i < n;) {
        int len = tui_utf8_decode(prompt + i, n - i, &cp);
        int cw = tui_cp_width(cp);
        if (cp == 1 || cp == 2) { i += (size_t)len; continue; }   /* readline's invisible markers */
        if (col + cw > cols) { row++; col = 0; }
        if (w && row >= row_off && row < row_off + max_rows) {
            wmove(w, row - row_off, col);
            wattron(w, A_BOLD);
            tui_put_text(w, prompt + i, (size_t)len, cols - col);
            wattroff(w, A_BOLD);
        }
        col += cw;
        i += (size_t)len;
    }
    int indent = col < cols / 2 ? col : 0;
    *cur_row = row;
    *cur_col = col;
    for (size_t i = 0; i < blen;) {
        int len = tui_utf8_decode(buf + i, blen - i, &cp);
        if (cp == '\n') {
            if (i == point) { *cur_row = row; *cur_col = col; }
            row++;
            col = indent;
            i += (size_t)len;
            continue;
        }
        int cw = tui_cp_width(cp);
        if (col + cw > cols) { row++; col = indent; }
        if (i == point) { *cur_row = row; *cur_col = col; }
        if (w && row >= row_off && row < row_off + max_rows) {
            wmove(w, row - row_off, col);
            tui_put_text(w, buf + i, (size_t)len, cols - col);
        }
        col += cw;
        i += (size_t)len;
    }
    if (point >= blen) {
        if (col >= cols) { row++; col = indent; }
        *cur_row = row;
        *cur_col = col;
    }
    return row + 1;
}

/* The layout grows the input window with multi-line text. */
int tui_input_rows(int cols, int max_rows)
{
    int r, c;
    int rows = walk(NULL, cols, 0, 0, &r, &c);
    if (rows > max_rows) rows = max_rows;
    return rows < 1 ? 1 : rows;
}

/* Draw in the frame, scrolled so the edit point is visible, cursor at the edit point. */
void tui_input_draw(WINDOW *w)
{
    int rows, cols, cr, cc;
    getmaxyx(w, rows, cols);
    werase(w);
    walk(NULL, cols, 0, 0, &cr, &cc);
    int off = cr >= rows ? cr - rows + 1 : 0;       /* keep the edit point visible */
    walk(w, cols, off, rows, &cr, &cc);
    if (cc >= cols) cc = cols - 1;
    wmove(w, cr - off, cc);
    in.changed = 0;
}

/* readline's idea of the screen size (for its own line wrapping logic). */
void tui_input_resize(int rows, int cols)
{
    rl_set_screen_size(rows, cols);
    in.changed = 1;
}

/* Tells the loop a frame is due after readline changed the line. */
int tui_input_changed(void)
{
    return in.changed;
}
