/* commands.c - see commands.h. The table is at the end. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "commands.h"
#include "export_file.h"

void chat_say(chat_cmd_ctx *x, chat_say_kind kind, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    x->say(x->ui, kind, buf);
}

void chat_format_sampling(const k3_sampler *sp, char *buf, size_t cap)
{
    snprintf(buf, cap, "temp=%g top_p=%g top_k=%d min_p=%g seed=%llu", sp->temperature, sp->top_p, sp->top_k,
             sp->min_p, (unsigned long long)sp->seed);
}

/* Time of a stored row, local, minutes. */
static void fmt_when(int64_t ms, char *buf, size_t cap)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    localtime_r(&s, &tm);
    strftime(buf, cap, "%Y-%m-%d %H:%M", &tm);
}

/* At most max_chars UTF-8 characters of s on one line, into buf. */
static void one_line_cut(const char *s, size_t max_chars, char *buf, size_t cap)
{
    size_t o = 0, chars = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && o + 1 < cap; p++) {
        if ((*p & 0xC0) != 0x80 && ++chars > max_chars) break;
        buf[o++] = (char)(*p < 0x20 || *p == 0x7f ? ' ' : *p);
    }
    buf[o] = 0;
}

/* One line per recent conversation, the current one starred. */
static void list_conversations(chat_cmd_ctx *x, const char *title)
{
    history_conversation *list = NULL;
    size_t n = 0;
    history_error herr;
    if (history_conv_list(x->db, 15, &list, &n, &herr)) {
        chat_say(x, CHAT_SAY_ERROR, "%s", herr.msg);
        return;
    }
    size_t cap = 256 + n * 200, len = 0;
    char *text = malloc(cap);
    if (!text) { history_conv_list_free(list, n); return; }
    len += (size_t)snprintf(text + len, cap - len, "%s", title);
    for (size_t i = 0; i < n; i++) {
        char when[32], title_cut[200];
        fmt_when(list[i].updated_ms, when, sizeof when);
        one_line_cut(list[i].title, 48, title_cut, sizeof title_cut);
        len += (size_t)snprintf(text + len, cap - len, "\n%s %s  %s  %3lld turns  %s",
                                list[i].id == conversation_id(x->conv) ? "*" : " ", list[i].uid, when,
                                (long long)list[i].n_turns, *title_cut ? title_cut : "(untitled)");
        if (len >= cap) len = cap - 1;
    }
    if (n == 0) snprintf(text + len, cap - len, "\n(no conversations stored)");
    x->say(x->ui, CHAT_SAY_NOTICE, text);
    free(text);
    history_conv_list_free(list, n);
}

/* /help, /clear, /stats, /quit: the front end does them. */
static chat_action cmd_help(chat_cmd_ctx *x, const char *args) { (void)x; (void)args; return CHAT_ACT_HELP; }
static chat_action cmd_clear(chat_cmd_ctx *x, const char *args) { (void)x; (void)args; return CHAT_ACT_CLEAR; }
static chat_action cmd_stats(chat_cmd_ctx *x, const char *args) { (void)x; (void)args; return CHAT_ACT_STATS; }
static chat_action cmd_quit(chat_cmd_ctx *x, const char *args) { (void)x; (void)args; return CHAT_ACT_QUIT; }

/* /new: a fresh conversation with an empty session. */
static chat_action cmd_new(chat_cmd_ctx *x, const char *args)
{
    (void)args;
    k3_error err;
    if (conversation_start(x->conv, x->system, &err)) {
        chat_say(x, CHAT_SAY_ERROR, "%s", err.msg);
        return CHAT_ACT_NONE;
    }
    return CHAT_ACT_NEW;
}

/* /resume [ID]: without an id, what there is to resume; with one, check it
 * here (a bad id must not leave the controller without a conversation). */
static chat_action cmd_resume(chat_cmd_ctx *x, const char *args)
{
    if (!*args) {
        list_conversations(x, "conversations (resume one with /resume ID):");
        return CHAT_ACT_NONE;
    }
    history_conversation row;
    history_error herr;
    if (history_conv_find(x->db, args, &row, &herr)) {
        chat_say(x, CHAT_SAY_ERROR, "%s", herr.msg);
        return CHAT_ACT_NONE;
    }
    int same = row.id == conversation_id(x->conv);
    if (same) chat_say(x, CHAT_SAY_NOTICE, "already in conversation %s", row.uid);
    history_conv_free(&row);
    return same ? CHAT_ACT_NONE : CHAT_ACT_RESUME;
}

/* /history: the recent conversations, to find an id for /resume or /export. */
static chat_action cmd_history(chat_cmd_ctx *x, const char *args)
{
    (void)args;
    list_conversations(x, "recent conversations (* = this one):");
    return CHAT_ACT_NONE;
}

/* /search TEXT: full-text hits across all conversations, one line each. */
static chat_action cmd_search(chat_cmd_ctx *x, const char *args)
{
    if (!*args) {
        chat_say(x, CHAT_SAY_ERROR, "usage: /search TEXT");
        return CHAT_ACT_NONE;
    }
    history_hit *hits = NULL;
    size_t n = 0;
    int substring = 0;
    history_error herr;
    if (history_msg_search(x->db, args, 20, NULL, NULL, &hits, &n, &substring, &herr)) {
        chat_say(x, CHAT_SAY_ERROR, "%s", herr.msg);
        return CHAT_ACT_NONE;
    }
    size_t cap = 256 + strlen(args) + n * 400, len = 0;
    char *text = malloc(cap);
    if (!text) { history_hits_free(hits, n); return CHAT_ACT_NONE; }
    len += (size_t)snprintf(text + len, cap - len, "%zu match%s for \"%s\"%s", n, n == 1 ? "" : "es", args,
                            substring ? " (substring match)" : "");
    for (size_t i = 0; i < n; i++) {
        char snip[300];
        one_line_cut(hits[i].snippet ? hits[i].snippet : "", 200, snip, sizeof snip);
        len += (size_t)snprintf(text + len, cap - len, "\n%s #%lld %s: %s", hits[i].uid, (long long)hits[i].seq,
                                hits[i].role, snip);
        if (len >= cap) len = cap - 1;
    }
    if (n) snprintf(text + len, cap - len, "\n(/resume ID continues a conversation)");
    x->say(x->ui, CHAT_SAY_NOTICE, text);
    free(text);
    history_hits_free(hits, n);
    return CHAT_ACT_NONE;
}

/* /system [TEXT]: the model only sees a system prompt at the start of a
 * conversation, so a new one applies now only to a conversation that has
 * not begun; otherwise it waits for /new and the record keeps what the
 * model saw. */
static chat_action cmd_system(chat_cmd_ctx *x, const char *args)
{
    if (!*args) {
        const char *now = conversation_system(x->conv);
        chat_say(x, CHAT_SAY_NOTICE, "system prompt of this conversation: %s\nfor the next /new: %s",
                 *now ? now : "(none)", x->system && *x->system ? x->system : "(none)");
        return CHAT_ACT_NONE;
    }
    k3_error err;
    int rc = conversation_set_system(x->conv, args, &err);
    if (rc < 0) {
        chat_say(x, CHAT_SAY_ERROR, "%s", err.msg);
        return CHAT_ACT_NONE;
    }
    free(x->system);
    x->system = strdup(args);
    if (rc == 0) chat_say(x, CHAT_SAY_NOTICE, "system prompt set; it applies from the first message");
    else chat_say(x, CHAT_SAY_NOTICE, "system prompt kept for the next conversation (/new); this one keeps the one it began with");
    return CHAT_ACT_NONE;
}

/* /set key=value...: all pairs are checked before any is applied. */
static chat_action cmd_system(chat_cmd_ctx *x, const char *args);

/* ollama's /set words other than "parameter": system is /system; verbose,
 * quiet, history, wordwrap and format have a k3 answer. 1 when args was one
 * of them (handled), else 0. */
static int set_ollama_word(chat_cmd_ctx *x, const char *args, chat_action *act)
{
    size_t n = strcspn(args, " \t");
    const char *rest = args + n;
    while (*rest == ' ' || *rest == '\t') rest++;
    if (n == 6 && !strncmp(args, "system", 6)) { *act = cmd_system(x, rest); return 1; }
    static const struct { const char *word, *answer; } words[] = {
        {"verbose", "k3 always shows each answer's figures (under it, or on stderr in line mode); /stats shows "
                    "the engine's counters"},
        {"quiet", "k3 shows each answer's figures under it (F2 hides the gauges in the full screen)"},
        {"history", "k3 keeps the input history always (Up, Ctrl-R)"},
        {"nohistory", "k3 keeps the input history always (Up, Ctrl-R)"},
        {"wordwrap", "k3 always wraps at word boundaries"},
        {"nowordwrap", "k3 always wraps at word boundaries"},
        {"format", "k3 has no JSON mode in the chat; k3 chat --json prints each turn as JSON"},
    };
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strlen(words[i].word) == n && !strncmp(args, words[i].word, n)) {
            chat_say(x, CHAT_SAY_NOTICE, "/set %s: %s", words[i].word, words[i].answer);
            *act = CHAT_ACT_NONE;
            return 1;
        }
    return 0;
}

static chat_action cmd_set(chat_cmd_ctx *x, const char *args)
{
    k3_sampler *sp = conversation_sampler(x->conv);
    char line[256];
    chat_action act;
    if (set_ollama_word(x, args, &act)) return act;
    if (!*args) {                             /* everything a turn runs with */
        chat_format_sampling(sp, line, sizeof line);
        k3_session *s = conversation_session(x->conv);   /* none for a remote backend: the server's context */
        char ctx[64];
        if (s) snprintf(ctx, sizeof ctx, "context %d tokens", k3_session_max_tokens(s));
        else snprintf(ctx, sizeof ctx, "context: the server's");
        chat_say(x, CHAT_SAY_NOTICE, "%s n=%d (answer length)\n%s; system prompt: %s", line,
                 conversation_max_new(x->conv), ctx, x->system && *x->system ? x->system : "(none)");
        return CHAT_ACT_NONE;
    }
    k3_sampler next = *sp;
    int seed_changed = 0, max_new = conversation_max_new(x->conv);
    char buf[512];
    if (chat_set_spelling(args, buf, sizeof buf)) {   /* also ollama's /set parameter NAME VALUE */
        chat_say(x, CHAT_SAY_ERROR, "usage: /set parameter NAME VALUE");
        return CHAT_ACT_NONE;
    }
    for (char *save = NULL, *tok = strtok_r(buf, " \t,", &save); tok; tok = strtok_r(NULL, " \t,", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || !eq[1]) {
            chat_say(x, CHAT_SAY_ERROR, "/set: expected key=value, got '%s'", tok);
            return CHAT_ACT_NONE;
        }
        *eq = 0;
        const char *key = tok, *val = eq + 1;
        char *end;
        errno = 0;
        double v = strtod(val, &end);
        if (*end || errno) {
            chat_say(x, CHAT_SAY_ERROR, "/set: %s: '%s' is not a number", key, val);
            return CHAT_ACT_NONE;
        }
        const char *bad = NULL;
        if (!strcmp(key, "temp") || !strcmp(key, "temperature")) {
            if (v < 0 || v > 100) bad = "temp must be 0..100";
            next.temperature = (float)v;
        } else if (!strcmp(key, "top_p") || !strcmp(key, "top-p")) {
            if (v <= 0 || v > 1) bad = "top_p must be in (0, 1]";
            next.top_p = (float)v;
        } else if (!strcmp(key, "min_p") || !strcmp(key, "min-p")) {
            if (v < 0 || v > 1) bad = "min_p must be 0..1";
            next.min_p = (float)v;
        } else if (!strcmp(key, "top_k") || !strcmp(key, "top-k")) {
            if (v < 0 || v > 1e9 || v != (int)v) bad = "top_k must be a whole number >= 0";
            else next.top_k = (int)v;
        } else if (!strcmp(key, "seed")) {
            if (v < 0 || v > 1.8e19 || v != (double)(uint64_t)v) bad = "seed must be a whole number >= 0";
            else next.seed = (uint64_t)v;
            seed_changed = 1;
        } else if (!strcmp(key, "n") || !strcmp(key, "num_predict") || !strcmp(key, "max_tokens")) {
            if (v < 1 || v > (1 << 24) || v != (int)v) bad = "n (answer length) must be a whole number 1..16777216";
            else max_new = (int)v;
        } else {
            chat_say(x, CHAT_SAY_ERROR, "/set: unknown key '%s' (temp top_p top_k min_p seed n)", key);
            return CHAT_ACT_NONE;
        }
        if (bad) {
            chat_say(x, CHAT_SAY_ERROR, "/set: %s", bad);
            return CHAT_ACT_NONE;
        }
    }
    conversation_set_max_new(x->conv, max_new);
    sp->temperature = next.temperature;
    sp->top_p = next.top_p;
    sp->top_k = next.top_k;
    sp->min_p = next.min_p;
    if (seed_changed) {                       /* restart the generator from the new seed */
        int n_vocab = sp->n_vocab;
        sp->seed = next.seed;
        k3_sampler_free(sp);
        if (k3_sampler_init(sp, n_vocab)) {
            chat_say(x, CHAT_SAY_ERROR, "/set: out of memory");
            return CHAT_ACT_NONE;
        }
    }
    k3_error err;
    if (conversation_store_sampling(x->conv, &err)) chat_say(x, CHAT_SAY_ERROR, "%s", err.msg);
    chat_format_sampling(sp, line, sizeof line);
    chat_say(x, CHAT_SAY_NOTICE, "sampling: %s n=%d", line, max_new);
    return CHAT_ACT_NONE;
}

/* /export md|json [FILE] [--force]: a private file that does not replace
 * another unless asked; the default name carries the conversation id. */
static chat_action cmd_export(chat_cmd_ctx *x, const char *args)
{
    char fmt_word[16] = "", path[4096] = "", word[4096];
    int force = 0, n = 0;
    const char *p = args;
    while (sscanf(p, "%4095s%n", word, &n) == 1) {
        p += n;
        if (!strcmp(word, "--force") || !strcmp(word, "-f")) force = 1;
        else if (!*fmt_word) snprintf(fmt_word, sizeof fmt_word, "%.15s", word);
        else if (!*path) snprintf(path, sizeof path, "%s", word);
        else { *fmt_word = 0; break; }
    }
    history_format fmt;
    if (!strcmp(fmt_word, "md") || !strcmp(fmt_word, "markdown")) fmt = HISTORY_MARKDOWN;
    else if (!strcmp(fmt_word, "json")) fmt = HISTORY_JSON;
    else {
        chat_say(x, CHAT_SAY_ERROR, "usage: /export md|json [FILE] [--force]");
        return CHAT_ACT_NONE;
    }
    if (conversation_id(x->conv) < 0) {
        chat_say(x, CHAT_SAY_ERROR, "/export: nothing to export yet (send a message first)");
        return CHAT_ACT_NONE;
    }
    if (!*path)
        snprintf(path, sizeof path, "k3-%s.%s", conversation_uid(x->conv), fmt == HISTORY_JSON ? "json" : "md");
    char used[4096];
    k3_error err;
    long bytes = chat_export_file(x->db, conversation_id(x->conv), fmt, path, force, used, sizeof used, &err);
    if (bytes < 0) chat_say(x, CHAT_SAY_ERROR, "/export: %s", err.msg);
    else chat_say(x, CHAT_SAY_NOTICE, "exported conversation %s to %s (%ld bytes)", conversation_uid(x->conv), used, bytes);
    return CHAT_ACT_NONE;
}

/* /retry, /undo: the front end runs them on its engine thread. */
static chat_action cmd_retry(chat_cmd_ctx *x, const char *args)
{
    (void)args;
    char *text = conversation_last_user_text(x->conv);
    if (!text) { chat_say(x, CHAT_SAY_ERROR, "/retry: nothing to retry yet"); return CHAT_ACT_NONE; }
    free(text);
    return CHAT_ACT_RETRY;
}

static chat_action cmd_undo(chat_cmd_ctx *x, const char *args)
{
    (void)args;
    char *text = conversation_last_user_text(x->conv);
    if (!text) { chat_say(x, CHAT_SAY_ERROR, "/undo: nothing to undo yet"); return CHAT_ACT_NONE; }
    free(text);
    return CHAT_ACT_UNDO;
}

/* /edit: the last message comes back into the input line. */
static chat_action cmd_edit(chat_cmd_ctx *x, const char *args)
{
    (void)args;
    free(x->edit_text);
    x->edit_text = conversation_last_user_text(x->conv);
    if (!x->edit_text) { chat_say(x, CHAT_SAY_ERROR, "/edit: no message to edit yet"); return CHAT_ACT_NONE; }
    return CHAT_ACT_EDIT;
}

/* ollama's /save and /load do what k3 does another way: say which (an
 * error, so a script that sent them sees exit 3: nothing was saved). */
static chat_action cmd_ollama_save(chat_cmd_ctx *x, const char *args)
{
    (void)args;
    chat_say(x, CHAT_SAY_ERROR, "/save is ollama's: k3 stores every conversation as it goes (k3 history); "
                                "/rename TITLE names it, /export md|json FILE writes it to a file");
    return CHAT_ACT_NONE;
}

static chat_action cmd_ollama_load(chat_cmd_ctx *x, const char *args)
{
    (void)args;
    chat_say(x, CHAT_SAY_ERROR, "/load is ollama's: k3 chat MODEL opens another model (quit first); /resume ID "
                                "continues a stored conversation");
    return CHAT_ACT_NONE;
}

/* /think [off|low|medium|high|max]: show or set Kimi K3 thinking. A
 * conversation keeps the setting it began with (its record must re-render
 * to the ids the model saw): a change to a begun one applies from /new. */
static chat_action cmd_think(chat_cmd_ctx *x, const char *args)
{
    const char *now = conversation_think(x->conv);
    if (!*args) {
        chat_say(x, CHAT_SAY_NOTICE, "thinking: %s (/think off|low|medium|high|max)", now ? now : "off");
        return CHAT_ACT_NONE;
    }
    static const char *const names[] = {"low", "medium", "high", "max"};
    const char *effort = NULL;
    for (int i = 0; i < 4; i++)
        if (!strcmp(args, names[i])) effort = names[i];
    if (!effort && strcmp(args, "off")) {
        chat_say(x, CHAT_SAY_ERROR, "/think: '%s' is not one of off, low, medium, high, max", args);
        return CHAT_ACT_NONE;
    }
    k3_error err;
    int rc = conversation_set_think(x->conv, effort, &err);
    if (rc == 1) chat_say(x, CHAT_SAY_ERROR, "/think: %s", err.msg);
    else if (rc == 2) chat_say(x, CHAT_SAY_NOTICE, "%s", err.msg);
    else chat_say(x, CHAT_SAY_NOTICE, "thinking: %s", effort ? effort : "off");
    return CHAT_ACT_NONE;
}

static const chat_command commands[] = {
    {"help", "", "this list (F1 in the full screen)", 0, cmd_help},
    {"new", "", "start a new conversation", 1, cmd_new},
    {"resume", "[ID]", "continue a stored conversation (without ID: list them)", 1, cmd_resume},
    {"history", "", "recent conversations", 1, cmd_history},
    {"search", "TEXT", "search every stored message", 1, cmd_search},
    {"system", "[TEXT]", "show or set the system prompt (for a conversation's start)", 1, cmd_system},
    {"set", "key=value...", "temp top_p top_k min_p seed n=length; parameter NAME VALUE; alone: all", 1, cmd_set},
    {"export", "md|json [FILE] [--force]", "write this conversation to a file (mode 0600)", 1, cmd_export},
    {"retry", "", "answer the last message again with the current settings", 1, cmd_retry},
    {"undo", "", "drop the last message and its answer", 1, cmd_undo},
    {"edit", "", "edit the last message and send it again", 1, cmd_edit},
    {"stats", "", "engine and screen counters", 0, cmd_stats},
    {"clear", "", "clear the screen (the record keeps everything; /new clears the context)", 0, cmd_clear},
    {"quit", "", "leave (the conversation is saved)", 0, cmd_quit},
    {"exit", "", "leave (the conversation is saved)", 0, cmd_quit},
    {"bye", "", "leave (ollama's spelling of /quit)", 0, cmd_quit},
    {"show", "[info]", "the model: architecture, experts, dtype, context, size, plan", 0, chat_cmd_show},
    {"copy", "[N|code]", "copy the last answer (or its N-th code block; code: the first) to the clipboard (OSC 52)", 1,
     chat_cmd_copy},
    {"rename", "TITLE", "rename this conversation", 1, chat_cmd_rename},
    {"raw", "", "answers as raw text / rendered markdown (toggle)", 0, chat_cmd_raw},
    {"save", "", "ollama's: names its k3 equivalents (/rename, /export)", 0, cmd_ollama_save},
    {"load", "", "ollama's: names its k3 equivalents (k3 chat MODEL, /resume)", 0, cmd_ollama_load},
    {"think", "[off|low|medium|high|max]", "Kimi K3 thinking and its effort (a begun conversation keeps its own)", 1,
     cmd_think},
    {"reasoning", "", "a thinking model's reasoning shown whole / collapsed to one line (toggle)", 0, chat_cmd_reasoning},
};

const chat_command *chat_commands(size_t *n)
{
    *n = sizeof commands / sizeof commands[0];
    return commands;
}

int chat_is_command(const char *line)
{
    return line[0] == '/' && line[1] != '/';
}

/* The name is the word after the slash, up to white space. */
const chat_command *chat_command_find(const char *line)
{
    if (!chat_is_command(line)) return NULL;
    const char *p = line + 1;
    size_t nlen = 0;
    while (p[nlen] && !isspace((unsigned char)p[nlen])) nlen++;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strlen(commands[i].name) == nlen && !strncmp(commands[i].name, p, nlen)) return &commands[i];
    return NULL;
}

const chat_command *chat_command_parse(chat_cmd_ctx *x, const char *line, char *args, size_t cap)
{
    const char *p = line + 1;
    size_t nlen = 0;
    while (p[nlen] && !isspace((unsigned char)p[nlen])) nlen++;
    const char *a = p + nlen;
    while (isspace((unsigned char)*a)) a++;
    snprintf(args, cap, "%s", a);
    for (size_t l = strlen(args); l > 0 && isspace((unsigned char)args[l - 1]);) args[--l] = 0;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strlen(commands[i].name) == nlen && !strncmp(commands[i].name, p, nlen)) return &commands[i];
    chat_say(x, CHAT_SAY_ERROR, "unknown command /%.*s (see /help; start a message with // to send a slash)",
             (int)(nlen > 64 ? 64 : nlen), p);
    return NULL;
}
