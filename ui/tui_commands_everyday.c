/* tui_commands_everyday.c - the / commands ollama and llm users reach for
 * first: /show (what model is this, is it real), /copy (the last answer to
 * the clipboard), /rename and /raw (markdown rendering on or off). The
 * dispatcher and the table are in tui_commands.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "model_facts.h"
#include "tui_internal.h"

/* /show [info]: ollama's `/show info`, from the loaded model. */
int tui_cmd_show(tui *t, const char *args)
{
    if (*args && strcmp(args, "info")) {
        tui_transcript_notice(&t->tr, TE_ERROR, "usage: /show [info]");
        return 0;
    }
    char *text = model_facts_text(t->model, t->opt.model_dir);
    if (!text) return 0;
    tui_transcript_add(&t->tr, TE_NOTICE, text);
    free(text);
    return 0;
}

/* Standard base64 (RFC 4648) with padding, as OSC 52 wants it; malloc'd. */
static char *base64(const char *s, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out) return NULL;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)u[i] << 16 | (i + 1 < n ? (uint32_t)u[i + 1] << 8 : 0) | (i + 2 < n ? u[i + 2] : 0);
        *o++ = tab[v >> 18 & 63];
        *o++ = tab[v >> 12 & 63];
        *o++ = i + 1 < n ? tab[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? tab[v & 63] : '=';
    }
    *o = 0;
    return out;
}

/* /copy: the last answer as stored (raw markdown) to the terminal's
 * clipboard through OSC 52, which works over ssh and inside tmux (with
 * set-clipboard on); terminals that ignore it leave the clipboard as is. */
int tui_cmd_copy(tui *t, const char *args)
{
    (void)args;
    history_message *msgs = NULL;
    size_t n = 0;
    history_error herr;
    if (history_msg_list(t->db, conversation_id(t->conv), &msgs, &n, &herr)) {
        tui_transcript_notice(&t->tr, TE_ERROR, "%s", herr.msg);
        return 0;
    }
    const history_message *last = NULL;
    for (size_t i = n; i-- > 0 && !last;)
        if (!strcmp(msgs[i].role, "assistant") && *msgs[i].content) last = &msgs[i];
    if (!last) {
        tui_transcript_notice(&t->tr, TE_ERROR, "/copy: no answer in this conversation yet");
        history_msg_list_free(msgs, n);
        return 0;
    }
    size_t len = strlen(last->content);
    char *b64 = base64(last->content, len);
    if (b64) {
        fflush(stdout);
        dprintf(STDOUT_FILENO, "\033]52;c;%s\a", b64);
        tui_transcript_notice(&t->tr, TE_NOTICE, "copied the last answer (%zu bytes) to the clipboard (OSC 52)", len);
        free(b64);
    }
    history_msg_list_free(msgs, n);
    return 0;
}

/* /rename TITLE: what `history list` and /resume show for this conversation. */
int tui_cmd_rename(tui *t, const char *args)
{
    if (!*args) {
        tui_transcript_notice(&t->tr, TE_ERROR, "usage: /rename TITLE");
        return 0;
    }
    history_error herr;
    if (history_conv_set_title(t->db, conversation_id(t->conv), args, &herr))
        tui_transcript_notice(&t->tr, TE_ERROR, "%s", herr.msg);
    else
        tui_transcript_notice(&t->tr, TE_NOTICE, "conversation %s renamed to \"%s\"", conversation_uid(t->conv), args);
    return 0;
}

/* /raw: answers as the model wrote them (markdown source) or rendered;
 * the store always keeps the raw text. */
int tui_cmd_raw(tui *t, const char *args)
{
    (void)args;
    tui_transcript_set_raw(&t->tr, !t->tr.raw);
    tui_transcript_notice(&t->tr, TE_NOTICE, t->tr.raw ? "answers shown as raw text (/raw again renders markdown)"
                                                        : "answers rendered as markdown (/raw shows the raw text)");
    return 0;
}
