/* tui_commands.c - the / commands of the terminal chat and their Tab
 * completion. Commands that read or write the history store refuse while a
 * job runs on the worker (the store handle belongs to one thread at a
 * time); /help, /stats, /clear and /quit always work. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tui_internal.h"

typedef struct tui_cmd {
    const char *name;
    const char *args;            /* for completion hints */
    int needs_store;             /* touches the history store or the session */
    int (*run)(tui *t, const char *args);
} tui_cmd;

/* Time of a stored row, local, minutes. */
static void fmt_when(int64_t ms, char *buf, size_t cap)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    localtime_r(&s, &tm);
    strftime(buf, cap, "%Y-%m-%d %H:%M", &tm);
}

/* One line per recent conversation, the current one starred. */
static void list_conversations(tui *t, const char *title)
{
    history_conversation *list = NULL;
    size_t n = 0;
    history_error herr;
    if (history_conv_list(t->db, 15, &list, &n, &herr)) {
        tui_transcript_notice(&t->tr, TE_ERROR, "%s", herr.msg);
        return;
    }
    size_t cap = 256 + n * 160, len = 0;
    char *text = malloc(cap);
    if (!text) { history_conv_list_free(list, n); return; }
    len += (size_t)snprintf(text + len, cap - len, "%s", title);
    for (size_t i = 0; i < n; i++) {
        char when[32];
        fmt_when(list[i].updated_ms, when, sizeof when);
        char title_cut[64];
        size_t tl = tui_text_fit(list[i].title, strlen(list[i].title), 48);
        snprintf(title_cut, sizeof title_cut, "%.*s", (int)tl, list[i].title);
        for (char *p = title_cut; *p; p++) if (*p == '\n' || *p == '\t') *p = ' ';
        len += (size_t)snprintf(text + len, cap - len, "\n%s %s  %s  %3lld turns  %s",
                                list[i].id == conversation_id(t->conv) ? "*" : " ", list[i].uid, when,
                                (long long)list[i].n_turns, *title_cut ? title_cut : "(untitled)");
        if (len >= cap) len = cap - 1;
    }
    if (n == 0) snprintf(text + len, cap - len, "\n(no conversations stored)");
    tui_transcript_add(&t->tr, TE_NOTICE, text);
    free(text);
    history_conv_list_free(list, n);
}

/* /help: the same view as F1. */
static int cmd_help(tui *t, const char *args)
{
    (void)args;
    t->show_help = 1;
    t->help_top = 0;
    return 0;
}

/* /new: a fresh stored conversation with an empty session; the screen starts over too. */
static int cmd_new(tui *t, const char *args)
{
    (void)args;
    k3_error err;
    if (conversation_start(t->conv, t->system, &err)) {
        tui_transcript_notice(&t->tr, TE_ERROR, "%s", err.msg);
        return 0;
    }
    tui_transcript_clear(&t->tr);
    t->g.ctx_at_start = k3_session_n_tokens(conversation_session(t->conv));
    tui_transcript_notice(&t->tr, TE_NOTICE, "new conversation %s%s", conversation_uid(t->conv),
                          t->system && *t->system ? " (with the system prompt)" : "");
    return 0;
}

/* /resume [ID]: without an id, what there is to resume; with one, check it here (a bad id
 * must not leave the controller without a conversation), then rebuild the state on the worker. */
static int cmd_resume(tui *t, const char *args)
{
    if (!*args) {
        list_conversations(t, "conversations (resume one with /resume ID):");
        return 0;
    }
    history_conversation row;
    history_error herr;
    if (history_conv_find(t->db, args, &row, &herr)) {
        tui_transcript_notice(&t->tr, TE_ERROR, "%s", herr.msg);
        return 0;
    }
    if (row.id == conversation_id(t->conv)) {
        tui_transcript_notice(&t->tr, TE_NOTICE, "already in conversation %s", row.uid);
        history_conv_free(&row);
        return 0;
    }
    tui_transcript_clear(&t->tr);
    tui_transcript_notice(&t->tr, TE_NOTICE, "resuming conversation %s%s", row.uid, tui_glyph()->ellipsis);
    t->job = TJ_RESUME;
    t->progress_done = t->progress_total = 0;
    k3_session *s = conversation_session(t->conv);
    tui_gauges_turn_start(&t->g, t->model, 0, k3_session_max_tokens(s), tui_now_s());
    tui_worker_submit(&t->w, TJ_RESUME, row.uid);
    history_conv_free(&row);
    return 0;
}

/* /history: the recent conversations, to find an id for /resume or /export. */
static int cmd_history(tui *t, const char *args)
{
    (void)args;
    list_conversations(t, "recent conversations (* = this one):");
    return 0;
}

/* /search TEXT: full-text hits across all conversations, one line each. */
static int cmd_search(tui *t, const char *args)
{
    if (!*args) {
        tui_transcript_notice(&t->tr, TE_ERROR, "usage: /search TEXT");
        return 0;
    }
    history_hit *hits = NULL;
    size_t n = 0;
    int substring = 0;
    history_error herr;
    if (history_msg_search(t->db, args, 20, NULL, NULL, &hits, &n, &substring, &herr)) {
        tui_transcript_notice(&t->tr, TE_ERROR, "%s", herr.msg);
        return 0;
    }
    size_t cap = 256 + n * 400, len = 0;
    char *text = malloc(cap);
    if (!text) { history_hits_free(hits, n); return 0; }
    len += (size_t)snprintf(text + len, cap - len, "%zu match%s for \"%s\"%s", n, n == 1 ? "" : "es", args,
                            substring ? " (substring match)" : "");
    for (size_t i = 0; i < n; i++) {
        char snip[300];
        snprintf(snip, sizeof snip, "%s", hits[i].snippet ? hits[i].snippet : "");
        for (char *p = snip; *p; p++) if (*p == '\n' || *p == '\t' || *p == '\r') *p = ' ';
        len += (size_t)snprintf(text + len, cap - len, "\n%s #%lld %s: %s", hits[i].uid, (long long)hits[i].seq,
                                hits[i].role, snip);
        if (len >= cap) len = cap - 1;
    }
    if (n) snprintf(text + len, cap - len, "\n(/resume ID continues a conversation)");
    tui_transcript_add(&t->tr, TE_NOTICE, text);
    free(text);
    history_hits_free(hits, n);
    return 0;
}

/* /system [TEXT]: the model only sees a system prompt at the start of a conversation, so
 * say whether it applies now or from the next /new. */
static int cmd_system(tui *t, const char *args)
{
    if (!*args) {
        tui_transcript_notice(&t->tr, TE_NOTICE, "system prompt: %s", t->system && *t->system ? t->system : "(none)");
        return 0;
    }
    k3_error err;
    if (conversation_set_system(t->conv, args, &err)) {
        tui_transcript_notice(&t->tr, TE_ERROR, "%s", err.msg);
        return 0;
    }
    free(t->system);
    t->system = strdup(args);
    if (k3_session_n_tokens(conversation_session(t->conv)) == 0)
        tui_transcript_notice(&t->tr, TE_NOTICE, "system prompt set; it applies from the first message");
    else
        tui_transcript_notice(&t->tr, TE_NOTICE, "system prompt stored; the model sees it in a new conversation (/new)");
    return 0;
}

/* Parse "key=value" pairs; all are checked before any is applied. */
static int cmd_set(tui *t, const char *args)
{
    k3_sampler *sp = conversation_sampler(t->conv);
    if (!*args) {                             /* everything a turn runs with */
        tui_transcript_notice(&t->tr, TE_NOTICE,
                              "temp=%g top_p=%g top_k=%d min_p=%g seed=%llu n=%d (answer length)\n"
                              "context %d tokens, markdown %s, system prompt: %s",
                              sp->temperature, sp->top_p, sp->top_k, sp->min_p, (unsigned long long)sp->seed,
                              conversation_max_new(t->conv), k3_session_max_tokens(conversation_session(t->conv)),
                              t->tr.raw ? "off (/raw)" : "on", t->system && *t->system ? t->system : "(none)");
        return 0;
    }
    k3_sampler next = *sp;
    int seed_changed = 0, max_new = conversation_max_new(t->conv);
    char buf[512];
    if (!strncmp(args, "parameter ", 10)) {   /* ollama: /set parameter temperature 0.7 */
        char key[64] = "", val[64] = "", extra[8] = "";
        if (sscanf(args + 10, "%63s %63s %7s", key, val, extra) != 2) {
            tui_transcript_notice(&t->tr, TE_ERROR, "usage: /set parameter NAME VALUE");
            return 0;
        }
        snprintf(buf, sizeof buf, "%s=%s", !strcmp(key, "num_predict") ? "n" : key, val);
    } else {
        snprintf(buf, sizeof buf, "%s", args);
    }
    for (char *save = NULL, *tok = strtok_r(buf, " \t,", &save); tok; tok = strtok_r(NULL, " \t,", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || !eq[1]) {
            tui_transcript_notice(&t->tr, TE_ERROR, "/set: expected key=value, got '%s'", tok);
            return 0;
        }
        *eq = 0;
        const char *key = tok, *val = eq + 1;
        char *end;
        errno = 0;
        double v = strtod(val, &end);
        if (*end || errno) {
            tui_transcript_notice(&t->tr, TE_ERROR, "/set: %s: '%s' is not a number", key, val);
            return 0;
        }
        if (!strcmp(key, "temp") || !strcmp(key, "temperature")) {
            if (v < 0 || v > 100) { tui_transcript_notice(&t->tr, TE_ERROR, "/set: temp must be 0..100"); return 0; }
            next.temperature = (float)v;
        } else if (!strcmp(key, "top_p") || !strcmp(key, "top-p")) {
            if (v <= 0 || v > 1) { tui_transcript_notice(&t->tr, TE_ERROR, "/set: top_p must be in (0, 1]"); return 0; }
            next.top_p = (float)v;
        } else if (!strcmp(key, "min_p") || !strcmp(key, "min-p")) {
            if (v < 0 || v > 1) { tui_transcript_notice(&t->tr, TE_ERROR, "/set: min_p must be 0..1"); return 0; }
            next.min_p = (float)v;
        } else if (!strcmp(key, "top_k") || !strcmp(key, "top-k")) {
            if (v < 0 || v != (int)v) { tui_transcript_notice(&t->tr, TE_ERROR, "/set: top_k must be a whole number >= 0"); return 0; }
            next.top_k = (int)v;
        } else if (!strcmp(key, "seed")) {
            if (v < 0 || v != (double)(uint64_t)v) { tui_transcript_notice(&t->tr, TE_ERROR, "/set: seed must be a whole number >= 0"); return 0; }
            next.seed = (uint64_t)v;
            seed_changed = 1;
        } else if (!strcmp(key, "n") || !strcmp(key, "max_tokens") || !strcmp(key, "num_predict")) {
            if (v < 1 || v > (1 << 24) || v != (int)v) { tui_transcript_notice(&t->tr, TE_ERROR, "/set: n must be a whole number 1..16777216"); return 0; }
            max_new = (int)v;
        } else {
            tui_transcript_notice(&t->tr, TE_ERROR, "/set: unknown key '%s' (temp top_p top_k min_p seed n)", key);
            return 0;
        }
    }
    conversation_set_max_new(t->conv, max_new);
    sp->temperature = next.temperature;
    sp->top_p = next.top_p;
    sp->top_k = next.top_k;
    sp->min_p = next.min_p;
    if (seed_changed) {                       /* restart the generator from the new seed */
        int n_vocab = sp->n_vocab;
        sp->seed = next.seed;
        k3_sampler_free(sp);
        if (k3_sampler_init(sp, n_vocab)) {
            tui_transcript_notice(&t->tr, TE_ERROR, "/set: out of memory");
            return 0;
        }
    }
    k3_error err;
    if (conversation_store_sampling(t->conv, &err)) tui_transcript_notice(&t->tr, TE_ERROR, "%s", err.msg);
    tui_transcript_notice(&t->tr, TE_NOTICE, "sampling: temp=%g top_p=%g top_k=%d min_p=%g seed=%llu n=%d",
                          sp->temperature, sp->top_p, sp->top_k, sp->min_p, (unsigned long long)sp->seed, max_new);
    return 0;
}

/* /export md|json [FILE]: the store writes the conversation; we pick a default file name. */
static int cmd_export(tui *t, const char *args)
{
    char fmt_word[16] = "", path[4096] = "";
    sscanf(args, "%15s %4095[^\n]", fmt_word, path);
    history_format fmt;
    if (!strcmp(fmt_word, "md") || !strcmp(fmt_word, "markdown")) fmt = HISTORY_MARKDOWN;
    else if (!strcmp(fmt_word, "json")) fmt = HISTORY_JSON;
    else {
        tui_transcript_notice(&t->tr, TE_ERROR, "usage: /export md|json [FILE]");
        return 0;
    }
    if (!*path)
        snprintf(path, sizeof path, "k3-%s.%s", conversation_uid(t->conv), fmt == HISTORY_JSON ? "json" : "md");
    FILE *f = fopen(path, "w");
    if (!f) {
        tui_transcript_notice(&t->tr, TE_ERROR, "/export: %s: %s", path, strerror(errno));
        return 0;
    }
    history_error herr;
    int rc = history_export(t->db, conversation_id(t->conv), fmt, f, &herr);
    long size = ftell(f);
    if (fclose(f) != 0 && rc == 0) {
        tui_transcript_notice(&t->tr, TE_ERROR, "/export: %s: %s", path, strerror(errno));
        return 0;
    }
    if (rc) tui_transcript_notice(&t->tr, TE_ERROR, "%s", herr.msg);
    else tui_transcript_notice(&t->tr, TE_NOTICE, "exported conversation %s to %s (%ld bytes)",
                               conversation_uid(t->conv), path, size);
    return 0;
}

/* Every counter the engine reports, plus how the screen itself keeps up. */
static int cmd_stats(tui *t, const char *args)
{
    (void)args;
    tui_gauges_sample(&t->g, t->model, tui_now_s());
    const k3_stats *s = &t->g.now;
    char b[8][32];
    tui_fmt_bytes(b[0], sizeof b[0], (double)s->bytes_read_trunk);
    tui_fmt_bytes(b[1], sizeof b[1], (double)s->bytes_read_experts);
    tui_fmt_bytes(b[2], sizeof b[2], (double)s->bytes_read_other);
    double frame_avg = t->n_frame_gaps ? t->frame_gap_sum_s / t->n_frame_gaps * 1e3 : 0;
    double lat_avg = t->n_input_lat ? t->input_lat_sum_s / t->n_input_lat * 1e3 : 0;
    char text[2048];
    int n = snprintf(text, sizeof text,
                     "engine: %llu tokens prefilled in %.0f ms, %llu decoded in %.0f ms\n"
                     "disk: trunk %s, experts %s, other %s; %llu reads, %u in flight, busy %.1f s\n"
                     "expert cache: %llu lookups, %llu hits, %llu misses; prefetch %llu used, %llu unused\n",
                     (unsigned long long)s->tokens_prefilled, s->prefill_ms, (unsigned long long)s->tokens_decoded,
                     s->decode_ms, b[0], b[1], b[2], (unsigned long long)s->reads_done, s->reads_in_flight,
                     s->read_busy_ns / 1e9, (unsigned long long)s->expert_lookups,
                     (unsigned long long)s->expert_hits, (unsigned long long)s->expert_misses,
                     (unsigned long long)s->prefetch_used, (unsigned long long)s->prefetch_unused);
    tui_fmt_bytes(b[0], sizeof b[0], s->budget_bytes ? (double)s->budget_bytes : -1);
    tui_fmt_bytes(b[1], sizeof b[1], (double)s->pinned_trunk_bytes);
    tui_fmt_bytes(b[2], sizeof b[2], (double)s->ring_bytes);
    tui_fmt_bytes(b[3], sizeof b[3], (double)s->expert_cache_bytes);
    tui_fmt_bytes(b[4], sizeof b[4], (double)s->state_bytes);
    tui_fmt_bytes(b[5], sizeof b[5], (double)s->other_bytes);
    tui_fmt_bytes(b[6], sizeof b[6], (double)s->rss_bytes);
    tui_fmt_bytes(b[7], sizeof b[7], (double)s->peak_rss_bytes);
    snprintf(text + n, sizeof text - (size_t)n,
             "memory: budget %s; trunk %s (%u layers pinned), ring %s (%u slots), expert cache %s (%u slots), "
             "state %s, other %s; rss %s, peak %s\n"
             "screen: %llu frames, %.1f ms between frames while busy (max %.1f ms); "
             "key to screen %.1f ms average, %.1f ms max over %llu keys",
             b[0], b[1], s->pinned_layers, b[2], s->ring_slots, b[3], s->expert_slots, b[4], b[5], b[6], b[7],
             (unsigned long long)t->n_frames, frame_avg, t->frame_gap_max_s * 1e3, lat_avg,
             t->input_lat_max_s * 1e3, (unsigned long long)t->n_input_lat);
    tui_transcript_add(&t->tr, TE_NOTICE, text);
    return 0;
}

/* /clear: only the screen forgets; the store keeps everything. */
static int cmd_clear(tui *t, const char *args)
{
    (void)args;
    tui_transcript_clear(&t->tr);
    return 0;
}

/* /quit and /exit. */
static int cmd_quit(tui *t, const char *args)
{
    (void)t;
    (void)args;
    return 1;
}

static const tui_cmd commands[] = {
    {"help", "", 0, cmd_help},          {"new", "", 1, cmd_new},
    {"resume", "[ID]", 1, cmd_resume},  {"history", "", 1, cmd_history},
    {"search", "TEXT", 1, cmd_search},  {"system", "[TEXT]", 1, cmd_system},
    {"set", "key=value...", 1, cmd_set}, {"export", "md|json [FILE]", 1, cmd_export},
    {"stats", "", 0, cmd_stats},        {"clear", "", 0, cmd_clear},
    {"quit", "", 0, cmd_quit},          {"exit", "", 0, cmd_quit},
    {"show", "[info]", 0, tui_cmd_show}, {"copy", "", 1, tui_cmd_copy},
    {"rename", "TITLE", 1, tui_cmd_rename}, {"raw", "", 0, tui_cmd_raw},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

/* Dispatch "/name args"; store commands wait while the worker owns the store. */
int tui_command(tui *t, const char *line)
{
    const char *p = line + 1;
    size_t nlen = 0;
    while (p[nlen] && !isspace((unsigned char)p[nlen])) nlen++;
    const char *args = p + nlen;
    while (isspace((unsigned char)*args)) args++;
    char argbuf[4096];
    snprintf(argbuf, sizeof argbuf, "%s", args);
    for (size_t l = strlen(argbuf); l > 0 && isspace((unsigned char)argbuf[l - 1]);) argbuf[--l] = 0;
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strlen(commands[i].name) != nlen || strncmp(commands[i].name, p, nlen)) continue;
        if (commands[i].needs_store && tui_refuse_if_busy(t, commands[i].name)) return 0;
        return commands[i].run(t, argbuf);
    }
    tui_transcript_notice(&t->tr, TE_ERROR, "unknown command /%.*s (see /help; start a message with // to send a slash)",
                          (int)nlen, p);
    return 0;
}

/* Grow a NULL-terminated string list. */
static void add_candidate(char ***list, size_t *n, const char *s)
{
    char **g = realloc(*list, (*n + 2) * sizeof *g);
    if (!g) return;
    *list = g;
    g[(*n)++] = strdup(s);
    g[*n] = NULL;
}

/* Tab candidates by position: command names first, then the argument words each command
 * takes (formats, sampling keys, stored conversation ids). */
char **tui_command_complete(void *ctx, const char *line, int start, int end, const char *word)
{
    tui *t = ctx;
    (void)end;
    (void)word;
    char **list = NULL;
    size_t n = 0;
    if (line[0] != '/') return NULL;
    if (start == 0) {
        for (size_t i = 0; i < N_COMMANDS; i++) {
            char c[32];
            snprintf(c, sizeof c, "/%s", commands[i].name);
            add_candidate(&list, &n, c);
        }
        return list;
    }
    if (!strncmp(line, "/export ", 8)) {
        add_candidate(&list, &n, "md");
        add_candidate(&list, &n, "json");
    } else if (!strncmp(line, "/set ", 5)) {
        const char *keys[] = {"temp=", "top_p=", "top_k=", "min_p=", "seed=", "n=", "parameter"};
        for (size_t i = 0; i < 7; i++) add_candidate(&list, &n, keys[i]);
    } else if (!strncmp(line, "/resume ", 8) && !tui_worker_busy(&t->w)) {
        history_conversation *convs = NULL;
        size_t nc = 0;
        history_error herr;
        if (history_conv_list(t->db, 30, &convs, &nc, &herr) == 0) {
            add_candidate(&list, &n, "last");
            for (size_t i = 0; i < nc; i++) add_candidate(&list, &n, convs[i].uid);
            history_conv_list_free(convs, nc);
        }
    }
    return list;
}

/* Show a stored conversation as it was (its system prompt, messages and how each answer
 * ended), at start and after /resume. */
void tui_load_transcript(tui *t)
{
    history_message *msgs = NULL;
    size_t n = 0;
    history_error herr;
    history_conversation row;
    if (history_conv_get(t->db, conversation_id(t->conv), &row, &herr) == 0) {
        if (row.system_prompt && *row.system_prompt) tui_transcript_add(&t->tr, TE_SYSTEM, row.system_prompt);
        history_conv_free(&row);
    }
    if (history_msg_list(t->db, conversation_id(t->conv), &msgs, &n, &herr)) {
        tui_transcript_notice(&t->tr, TE_ERROR, "%s", herr.msg);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const history_message *m = &msgs[i];
        if (!strcmp(m->role, "user")) {
            tui_transcript_add(&t->tr, TE_USER, m->content);
        } else if (!strcmp(m->role, "assistant")) {
            int e = tui_transcript_add(&t->tr, TE_ASSISTANT, m->content);
            char footer[128] = "";
            int fl = 0;
            if (m->generated_tokens >= 0)
                fl = snprintf(footer, sizeof footer, "%lld tokens", (long long)m->generated_tokens);
            if (m->status != HISTORY_COMPLETE)
                snprintf(footer + fl, sizeof footer - (size_t)fl, "%s%s", fl ? ", " : "",
                         history_status_name(m->status));
            if (*footer) tui_transcript_set_footer(&t->tr, e, footer);
        } else if (!strcmp(m->role, "system")) {
            tui_transcript_add(&t->tr, TE_SYSTEM, m->content);
        }
    }
    history_msg_list_free(msgs, n);
}
