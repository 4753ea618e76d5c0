/* line_input.c - see line_input.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <readline/history.h>
#include <readline/readline.h>
#include "line_input.h"

static char history_file[4096];

/* The input history lives under the XDG state directory (created 0700). */
int line_input_history_path(char *path, size_t cap)
{
    const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    char dir[4000];
    if (state && *state) snprintf(dir, sizeof dir, "%s/k3", state);
    else if (home && *home) snprintf(dir, sizeof dir, "%s/.local/state/k3", home);
    else return -1;
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') { *p = 0; mkdir(dir, 0700); *p = '/'; }
    mkdir(dir, 0700);
    snprintf(path, cap, "%.3900s/input_history", dir);
    return 0;
}

void line_input_open(int interactive)
{
    if (!interactive) return;
    /* keep bytes >= 0x80 as text in any locale (see tui_input.c) */
    rl_initialize();
    rl_variable_bind("input-meta", "on");
    rl_variable_bind("convert-meta", "off");
    rl_variable_bind("output-meta", "on");
    if (line_input_history_path(history_file, sizeof history_file) == 0) read_history(history_file);
}

char *line_input_read(int interactive, const char *prompt)
{
    if (interactive) {
        char *l = readline(prompt);
        if (l && *l) add_history(l);
        return l;
    }
    char *l = NULL;
    size_t cap = 0;
    ssize_t n = getline(&l, &cap, stdin);
    if (n < 0) { free(l); return NULL; }
    while (n > 0 && (l[n - 1] == '\n' || l[n - 1] == '\r')) l[--n] = 0;
    return l;
}

static const char *preset_text;

/* readline's startup hook: put the preset text in the fresh line. */
static int insert_preset(void)
{
    if (preset_text) rl_insert_text(preset_text);
    preset_text = NULL;
    rl_startup_hook = NULL;
    return 0;
}

char *line_input_edit(int interactive, const char *prompt, const char *text)
{
    if (!interactive) return line_input_read(0, prompt);
    preset_text = text;
    rl_startup_hook = insert_preset;
    return line_input_read(1, prompt);
}

void line_input_close(int interactive)
{
    if (!interactive || !*history_file) return;
    write_history(history_file);
    history_truncate_file(history_file, 1000);
}
