/* tui_commands.c - the / commands in the terminal chat: the shared table
 * (chat/commands.c) runs them, this file carries out what they ask of the
 * screen, and completes them with Tab. Commands that read or write the
 * history store refuse while a job runs on the worker (the store handle
 * belongs to one thread at a time); /help, /stats, /clear and /quit always
 * work. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tui_input.h"
#include "tui_internal.h"

/* Every counter the engine reports, plus how the screen itself keeps up. */
static void show_stats(tui *t)
{
    tui_gauges_sample(&t->g, t->model, tui_now_s());
    const k3_stats *s = &t->g.now;
    char b[8][32];
    if (t->g.remote.r) {                          /* a server: what its /metrics says, and the last answer */
        char line[1024];
        const tui_remote_gauges *rg = &t->g.remote;
        if (rg->have_m) remote_metrics_summary(&rg->m, line, sizeof line);
        else snprintf(line, sizeof line, "/metrics of %s: %s", rg->host, rg->m_err[0] ? rg->m_err : "not read yet");
        char answer[512];
        tui_fmt_bytes(b[0], sizeof b[0], (double)remote_bytes_in(rg->r));
        tui_remote_answer_text(&t->g, answer, sizeof answer);
        tui_transcript_notice(&t->tr, TE_NOTICE, "%s\nnetwork: %s received from %s\nlast answer: %s", line, b[0],
                              rg->host, answer);
        return;
    }
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
}

/* The shared table talks back through this: notices and errors go into the transcript. */
static void say(void *ui, chat_say_kind kind, const char *text)
{
    tui *t = ui;
    tui_transcript_add(&t->tr, kind == CHAT_SAY_ERROR ? TE_ERROR : TE_NOTICE, text);
}

/* Set up the shared command context once the UI state exists. */
void tui_commands_init(tui *t, const char *system)
{
    t->cx.conv = t->conv;
    t->cx.db = t->db;
    t->cx.model = t->model;
    t->cx.model_dir = t->opt.model_dir;
    t->cx.system = system ? strdup(system) : NULL;
    t->cx.say = say;
    t->cx.ui = t;
}

void tui_commands_free(tui *t)
{
    free(t->cx.system);
    free(t->cx.edit_text);
    t->cx.system = t->cx.edit_text = NULL;
}

/* Start a long job (resume, retry, undo) on the worker with the gauges running. */
static void start_job(tui *t, tui_job job, const char *arg)
{
    t->job = job;
    t->progress_done = t->progress_total = 0;
    t->stopping = 0;
    tui_gauges_turn_start(&t->g, t->model, tui_session_tokens(t), tui_session_limit(t), tui_now_s());
    tui_worker_submit(&t->w, job, arg);
    t->dirty = 1;
}

/* Dispatch "/name args" through the shared table and carry out what it asks
 * of the screen; store commands wait while the worker owns the store. */
int tui_command(tui *t, const char *line)
{
    char args[4096];
    const chat_command *cmd = chat_command_parse(&t->cx, line, args, sizeof args);
    if (!cmd) return 0;
    if (cmd->needs_store && tui_refuse_if_busy(t, cmd->name)) return 0;
    switch (cmd->run(&t->cx, args)) {
    case CHAT_ACT_NONE: break;
    case CHAT_ACT_QUIT: return 1;
    case CHAT_ACT_HELP:
        t->show_help = 1;
        t->help_top = 0;
        break;
    case CHAT_ACT_CLEAR:                 /* the command's notice (where ollama's /clear is) stays on screen */
        tui_transcript_clear(&t->tr);
        tui_transcript_notice(&t->tr, TE_NOTICE, "screen cleared; the conversation goes on (/new starts an empty "
                                                 "one, as ollama's /clear)");
        break;
    case CHAT_ACT_STATS: show_stats(t); break;
    case CHAT_ACT_NEW:
        tui_transcript_clear(&t->tr);
        t->g.ctx_at_start = tui_session_tokens(t);
        tui_transcript_notice(&t->tr, TE_NOTICE, "new conversation%s",
                              t->cx.system && *t->cx.system ? " (with the system prompt)" : "");
        break;
    case CHAT_ACT_RESUME:
        tui_transcript_clear(&t->tr);
        tui_transcript_notice(&t->tr, TE_NOTICE, "resuming conversation %s%s", args, tui_glyph()->ellipsis);
        start_job(t, TJ_RESUME, args);
        break;
    case CHAT_ACT_RETRY: {
        /* the old answer goes from the screen; the new one streams in its place */
        tui_transcript_clear(&t->tr);
        tui_load_transcript(t);
        int n = t->tr.n_entries;
        if (n > 0 && t->tr.entries[n - 1].kind == TE_ASSISTANT) tui_transcript_pop(&t->tr);
        t->answer_entry = tui_transcript_add(&t->tr, TE_ASSISTANT, "");
        t->utf8_tail_len = 0;
        t->tr.scroll = 0;
        start_job(t, TJ_RETRY, NULL);
        break;
    }
    case CHAT_ACT_UNDO: start_job(t, TJ_UNDO, NULL); break;
    case CHAT_ACT_REASONING:
        tui_transcript_set_reasoning_collapsed(&t->tr, !t->tr.reasoning_collapsed);
        tui_transcript_notice(&t->tr, TE_NOTICE, t->tr.reasoning_collapsed
                                                     ? "reasoning collapsed to its first line (/reasoning shows it whole)"
                                                     : "reasoning shown whole (/reasoning collapses it)");
        break;
    case CHAT_ACT_RAW:
        tui_transcript_set_raw(&t->tr, !t->tr.raw);
        tui_transcript_notice(&t->tr, TE_NOTICE, t->tr.raw ? "answers shown as raw text (/raw again renders markdown)"
                                                            : "answers rendered as markdown (/raw shows the raw text)");
        break;
    case CHAT_ACT_EDIT:
        tui_input_set_text(t->cx.edit_text);
        t->editing = 1;
        tui_transcript_notice(&t->tr, TE_NOTICE, "editing the last message: Enter sends it in place of the old one");
        break;
    }
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
        size_t n_cmds;
        const chat_command *cmds = chat_commands(&n_cmds);
        for (size_t i = 0; i < n_cmds; i++) {
            char c[32];
            snprintf(c, sizeof c, "/%s", cmds[i].name);
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
            if (m->reasoning) tui_transcript_append_reasoning(&t->tr, e, m->reasoning, strlen(m->reasoning));
            char footer[128] = "";
            int fl = 0;
            if (m->generated_tokens >= 0)
                fl = snprintf(footer, sizeof footer, "%lld tokens", (long long)m->generated_tokens);
            /* a chat killed mid-answer is not a Ctrl-C: say what the store says */
            if (m->in_progress)
                snprintf(footer + fl, sizeof footer - (size_t)fl, "%sincomplete: the chat stopped while answering",
                         fl ? ", " : "");
            else if (m->status != HISTORY_COMPLETE)
                snprintf(footer + fl, sizeof footer - (size_t)fl, "%s%s", fl ? ", " : "",
                         history_status_name(m->status));
            if (*footer) tui_transcript_set_footer(&t->tr, e, footer);
        } else if (!strcmp(m->role, "system")) {
            tui_transcript_add(&t->tr, TE_SYSTEM, m->content);
        }
    }
    history_msg_list_free(msgs, n);
}
