/* tui_term.c - the terminal: curses setup in raw mode (Ctrl-C, Ctrl-Z and
 * Ctrl-\ arrive as bytes, so readline and the engine never see signals from
 * the keyboard), colours under NO_COLOR, the glyph set for the locale, the
 * signal handlers that wake the event loop, and the guarantee that the
 * terminal is restored on normal exit, error, or a fatal signal. */
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <term.h>
#include <termios.h>
#include <unistd.h>
#include "tui_internal.h"

#define BRACKETED_PASTE_ON "\033[?2004h"
#define BRACKETED_PASTE_OFF "\033[?2004l"

static struct {
    int active;
    int color;
    SCREEN *screen;
    struct termios saved_tty;
    int have_saved_tty;
    char rmcup[64], cnorm[32], sgr0[32];   /* copied so a signal handler can write them */
    int wake_fd;
    int stderr_saved, stderr_read;
    int atexit_done;
} term = {.wake_fd = -1, .stderr_saved = -1, .stderr_read = -1};

static volatile sig_atomic_t sig_resize, sig_interrupt, sig_terminate, sig_continue;

static const tui_glyphs glyphs_unicode = {
    1,
    {" ", "\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"},
    "\u2500", "\u2026", "\u00b7", "\u2191", "\u2193", "\u203a",
    {"\u2588", "\u2588", "\u2588", "\u2588", "\u2588"},
    "\u00b7",
};
static const tui_glyphs glyphs_unicode_mono = {
    1,
    {" ", "\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"},
    "\u2500", "\u2026", "\u00b7", "\u2191", "\u2193", "\u203a",
    {"#", "=", "*", "@", "%"},
    "\u00b7",
};
static const tui_glyphs glyphs_ascii = {
    0,
    {" ", ".", ".", ":", ":", "|", "|", "#", "#"},
    "-", "...", "|", "^", "v", ">",
    {"#", "=", "*", "@", "%"},
    ".",
};
static const tui_glyphs *glyphs = &glyphs_ascii;

/* Signal handlers only set a flag and poke the event loop's eventfd. */
static void wake_loop(void)
{
    if (term.wake_fd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(term.wake_fd, &one, sizeof one);
        (void)w;
    }
}

/* One handler for the signals the loop acts on. */
static void on_async_signal(int sig)
{
    int saved = errno;
    /* atomic stores (lock-free, async-signal-safe): the handler may run on
     * another thread (an I/O thread that does not block the signal) */
    if (sig == SIGWINCH) __atomic_store_n(&sig_resize, 1, __ATOMIC_RELAXED);
    else if (sig == SIGINT) __atomic_store_n(&sig_interrupt, 1, __ATOMIC_RELAXED);
    else if (sig == SIGCONT) __atomic_store_n(&sig_continue, 1, __ATOMIC_RELAXED);
    else __atomic_store_n(&sig_terminate, 1, __ATOMIC_RELAXED);
    wake_loop();
    errno = saved;
}

/* Write a saved escape string with write(2): async-signal-safe. */
static void write_raw(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

/* A crash must not leave the user's terminal raw and in the alternate
 * screen: undo both with async-signal-safe calls, then die as the signal
 * would have made us die. */
static void on_fatal_signal(int sig)
{
    if (term.active) {
        write_raw(STDOUT_FILENO, BRACKETED_PASTE_OFF);
        write_raw(STDOUT_FILENO, term.sgr0);
        write_raw(STDOUT_FILENO, term.rmcup);
        write_raw(STDOUT_FILENO, term.cnorm);
        if (term.have_saved_tty) tcsetattr(STDIN_FILENO, TCSANOW, &term.saved_tty);
    }
    if (term.stderr_saved >= 0) dup2(term.stderr_saved, STDERR_FILENO);
    write_raw(STDERR_FILENO, "k3: fatal signal; the terminal was restored\n");
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Copy a terminfo string for use from a signal handler. */
static void copy_cap(char *dst, size_t cap, const char *name)
{
    const char *s = tigetstr((char *)name);
    if (!s || s == (const char *)-1) { dst[0] = 0; return; }
    snprintf(dst, cap, "%s", s);
}

/* Colour pairs per role (background -1 = the terminal's own). */
static void init_colors(void)
{
    static const struct { tui_role role; short fg, bg; } pairs[] = {
        {TR_STATUS, COLOR_BLACK, COLOR_CYAN},   {TR_KEYNAME, -1, -1},
        {TR_KEYLABEL, COLOR_BLACK, COLOR_CYAN}, {TR_USER, COLOR_CYAN, -1},
        {TR_NOTICE, COLOR_YELLOW, -1},          {TR_ERROR, COLOR_RED, -1},
        {TR_DIM, -1, -1},                       {TR_TITLE, COLOR_CYAN, -1},
        {TR_GOOD, COLOR_GREEN, -1},             {TR_WARN, COLOR_YELLOW, -1},
        {TR_BAD, COLOR_RED, -1},                {TR_SEG_TRUNK, COLOR_BLUE, -1},
        {TR_SEG_RING, COLOR_MAGENTA, -1},       {TR_SEG_CACHE, COLOR_GREEN, -1},
        {TR_SEG_STATE, COLOR_YELLOW, -1},       {TR_SEG_OTHER, COLOR_CYAN, -1},
        {TR_TIMELINE, COLOR_BLUE, -1},          {TR_LIVE, COLOR_WHITE, -1},
        {TR_CODE, COLOR_GREEN, -1},
    };
    start_color();
    use_default_colors();
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        init_pair((short)pairs[i].role, pairs[i].fg, pairs[i].bg);
}

/* Refuse terminals curses cannot drive (TERM=dumb, no cursor addressing) before touching
 * the screen, so the caller can fall back to the line mode. */
int tui_term_open(void)
{
    const char *term_name = getenv("TERM");
    if (!term_name || !*term_name || !strcmp(term_name, "dumb")) return -1;
    setlocale(LC_CTYPE, "");
    int utf8 = !strcmp(nl_langinfo(CODESET), "UTF-8");
    if (tcgetattr(STDIN_FILENO, &term.saved_tty) == 0) term.have_saved_tty = 1;
    term.screen = newterm(NULL, stdout, stdin);
    if (!term.screen) return -1;
    const char *cup = tigetstr("cup");
    if (!cup || cup == (const char *)-1) {     /* no cursor addressing: not a screen */
        endwin();
        delscreen(term.screen);
        term.screen = NULL;
        return -1;
    }
    term.active = 1;
    copy_cap(term.rmcup, sizeof term.rmcup, "rmcup");
    copy_cap(term.cnorm, sizeof term.cnorm, "cnorm");
    copy_cap(term.sgr0, sizeof term.sgr0, "sgr0");
    raw();
    noecho();
    nonl();
    set_escdelay(25);
    curs_set(1);
    const char *no_color = getenv("NO_COLOR");
    term.color = has_colors() && !(no_color && *no_color);
    if (term.color) init_colors();
    glyphs = !utf8 ? &glyphs_ascii : term.color ? &glyphs_unicode : &glyphs_unicode_mono;
    define_key("\033[200~", TUI_KEY_PASTE_BEGIN);
    define_key("\033[201~", TUI_KEY_PASTE_END);
    fputs(BRACKETED_PASTE_ON, stdout);
    fflush(stdout);
    if (!term.atexit_done) {
        atexit(tui_term_close);
        term.atexit_done = 1;
    }
    return 0;
}

/* Bracketed paste off, attributes reset, main screen back, tty modes as we found them. */
void tui_term_close(void)
{
    if (!term.active) return;
    term.active = 0;
    fputs(BRACKETED_PASTE_OFF, stdout);
    fflush(stdout);
    curs_set(1);
    endwin();
    if (term.have_saved_tty) tcsetattr(STDIN_FILENO, TCSANOW, &term.saved_tty);
    delscreen(term.screen);
    term.screen = NULL;
}

/* Job control by hand: raw mode turned Ctrl-Z into a byte. */
void tui_term_suspend(void)
{
    fputs(BRACKETED_PASTE_OFF, stdout);
    fflush(stdout);
    endwin();
    struct sigaction dfl, old;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGTSTP, &dfl, &old);
    kill(0, SIGTSTP);                 /* stops here until fg */
    sigaction(SIGTSTP, &old, NULL);
    fputs(BRACKETED_PASTE_ON, stdout);
    fflush(stdout);
    clearok(curscr, TRUE);
    doupdate();
}

/* Installed after curses so our SIGWINCH handler replaces its own; fatal signals restore
 * the terminal before the process dies. */
void tui_term_signals(int wake_fd)
{
    term.wake_fd = wake_fd;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_async_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGWINCH, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGCONT, &sa, NULL);
    struct sigaction fatal;
    memset(&fatal, 0, sizeof fatal);
    fatal.sa_handler = on_fatal_signal;
    fatal.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigemptyset(&fatal.sa_mask);
    int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGQUIT};
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++)
        sigaction(fatal_signals[i], &fatal, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Each flag reads as "happened since last asked". */
static int take(volatile sig_atomic_t *flag)
{
    return __atomic_exchange_n(flag, 0, __ATOMIC_RELAXED) != 0;
}

int tui_term_take_resize(void) { return take(&sig_resize); }
int tui_term_take_interrupt(void) { return take(&sig_interrupt); }
int tui_term_take_terminate(void) { return take(&sig_terminate); }
int tui_term_take_continue(void) { return take(&sig_continue); }

/* Anything written to stderr while curses owns the screen would corrupt it. */
int tui_term_capture_stderr(void)
{
    int fds[2];
    fflush(stderr);
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    term.stderr_saved = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 10);
    if (term.stderr_saved < 0 || dup2(fds[1], STDERR_FILENO) < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    close(fds[1]);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    term.stderr_read = fds[0];
    return fds[0];
}

/* Back to the real stderr for the exit message. */
void tui_term_release_stderr(void)
{
    if (term.stderr_saved < 0) return;
    fflush(stderr);
    dup2(term.stderr_saved, STDERR_FILENO);
    close(term.stderr_saved);
    term.stderr_saved = -1;
    if (term.stderr_read >= 0) {     /* what the UI did not get to show */
        char buf[4096];
        ssize_t n;
        while ((n = read(term.stderr_read, buf, sizeof buf)) > 0) {
            ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
            (void)w;
        }
        close(term.stderr_read);
        term.stderr_read = -1;
    }
}

/* Without colour, roles fall back to attributes a monochrome terminal has. */
attr_t tui_attr(tui_role role)
{
    if (term.color) {
        attr_t a = COLOR_PAIR(role);
        switch (role) {
        case TR_USER: case TR_ERROR: case TR_TITLE: case TR_KEYNAME: return a | A_BOLD;
        case TR_DIM: return A_DIM;
        case TR_LIVE: return a | A_BOLD;
        case TR_PLAIN: return A_NORMAL;
        default: return a;
        }
    }
    switch (role) {
    case TR_STATUS: case TR_KEYLABEL: case TR_LIVE: return A_REVERSE;
    case TR_USER: case TR_ERROR: case TR_TITLE: case TR_KEYNAME: case TR_BAD: return A_BOLD;
    case TR_DIM: return A_DIM;
    default: return A_NORMAL;
    }
}

const tui_glyphs *tui_glyph(void) { return glyphs; }

/* Under LANG=C the em dash became "-", the same as the bullet, and "gen -
 * - prompt - -" could not be read: there a missing figure is "n/a". */
const char *tui_unknown(void) { return glyphs->unicode ? "\u2014" : "n/a"; }

attr_t tui_italic_attr(void)
{
    const char *sitm = tigetstr("sitm");
    return sitm && sitm != (const char *)-1 ? A_ITALIC : A_UNDERLINE;
}

/* Legends must not promise colours that NO_COLOR (or the terminal) took away. */
int tui_term_colour(void) { return term.color; }

int tui_text_unicode(void) { return glyphs->unicode; }
