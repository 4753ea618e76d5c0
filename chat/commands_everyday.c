/* commands_everyday.c - the / commands ollama and llm users reach for
 * first, in the shared table (commands.c) so both front ends have them:
 * /show (what model is this, is it real), /copy (the last answer to the
 * clipboard), /rename, /raw (markdown rendering on or off: the front end
 * does it), and the spellings /set accepts besides key=value. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "commands.h"
#include "markdown.h"
#include "remote.h"
#include "model_facts.h"

/* /show [info]: ollama's `/show info`, from the loaded model (no store
 * access, so it answers while an answer streams). */
chat_action chat_cmd_show(chat_cmd_ctx *x, const char *args)
{
    if (*args && strcmp(args, "info")) {
        chat_say(x, CHAT_SAY_ERROR, "usage: /show [info]");
        return CHAT_ACT_NONE;
    }
    if (!x->model) {                      /* a server: what it was asked for and where */
        remote *r = conversation_remote(x->conv);
        chat_say(x, CHAT_SAY_NOTICE, "model         %s\nserved by     %s (an OpenAI-compatible server; /stats shows "
                 "its /metrics figures)", conversation_remote_model(x->conv), r ? remote_url(r) : "?");
        return CHAT_ACT_NONE;
    }
    char *text = model_facts_text(x->model, x->model_dir);
    if (!text) return CHAT_ACT_NONE;
    x->say(x->ui, CHAT_SAY_NOTICE, text);
    free(text);
    return CHAT_ACT_NONE;
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

/* /copy: the last answer as stored (raw markdown), or with N / code only
 * its N-th (first) fenced code block as llm's --extract and aichat's .copy
 * do, to the terminal's clipboard through OSC 52, written to the
 * controlling terminal (never into stdout, which may be a pipe of answers).
 * It works over ssh and inside tmux (set-clipboard on); a terminal that
 * ignores OSC 52 leaves its clipboard. */
chat_action chat_cmd_copy(chat_cmd_ctx *x, const char *args)
{
    int which = 0;                               /* 0 = the whole answer, else the code block's number */
    if (!strcmp(args, "code")) which = 1;
    else if (*args) {
        char *end;
        long v = strtol(args, &end, 10);
        if (*end || v < 1 || v > 1000) {
            chat_say(x, CHAT_SAY_ERROR, "usage: /copy [N|code] (N: the answer's N-th code block; code: its first)");
            return CHAT_ACT_NONE;
        }
        which = (int)v;
    }
    history_message *msgs = NULL;
    size_t n = 0;
    history_error herr;
    if (conversation_id(x->conv) < 0) {
        chat_say(x, CHAT_SAY_ERROR, "/copy: no answer in this conversation yet");
        return CHAT_ACT_NONE;
    }
    if (history_msg_list(x->db, conversation_id(x->conv), &msgs, &n, &herr)) {
        chat_say(x, CHAT_SAY_ERROR, "%s", herr.msg);
        return CHAT_ACT_NONE;
    }
    const history_message *last = NULL;
    for (size_t i = n; i-- > 0 && !last;)
        if (!strcmp(msgs[i].role, "assistant") && *msgs[i].content) last = &msgs[i];
    size_t from = 0, to = last ? strlen(last->content) : 0;
    int n_blocks = 0;
    if (last && which && md_code_block(last->content, to, which, &from, &to)) {
        size_t b0, b1;
        while (md_code_block(last->content, strlen(last->content), n_blocks + 1, &b0, &b1) == 0) n_blocks++;
        chat_say(x, CHAT_SAY_ERROR, "/copy %s: the last answer has %d code block%s", args, n_blocks,
                 n_blocks == 1 ? "" : "s");
        history_msg_list_free(msgs, n);
        return CHAT_ACT_NONE;
    }
    int fd = last ? open("/dev/tty", O_WRONLY | O_NOCTTY | O_CLOEXEC) : -1;
    if (!last) {
        chat_say(x, CHAT_SAY_ERROR, "/copy: no answer in this conversation yet");
    } else if (fd < 0) {
        chat_say(x, CHAT_SAY_ERROR, "/copy: no terminal to send the clipboard sequence to");
    } else {
        size_t len = to - from;
        char *b64 = base64(last->content + from, len);
        if (b64 && dprintf(fd, "\033]52;c;%s\a", b64) > 0) {
            if (which) chat_say(x, CHAT_SAY_NOTICE, "copied code block %d of the last answer (%zu bytes) to the "
                                "clipboard (OSC 52)", which, len);
            else chat_say(x, CHAT_SAY_NOTICE, "copied the last answer (%zu bytes) to the clipboard (OSC 52)", len);
        } else {
            chat_say(x, CHAT_SAY_ERROR, "/copy: cannot write to the terminal");
        }
        free(b64);
    }
    if (fd >= 0) close(fd);
    history_msg_list_free(msgs, n);
    return CHAT_ACT_NONE;
}

/* /rename TITLE: what `history list` and /resume show for this conversation. */
chat_action chat_cmd_rename(chat_cmd_ctx *x, const char *args)
{
    if (!*args) {
        chat_say(x, CHAT_SAY_ERROR, "usage: /rename TITLE");
        return CHAT_ACT_NONE;
    }
    if (conversation_id(x->conv) < 0) {
        chat_say(x, CHAT_SAY_ERROR, "/rename: the conversation is stored with its first message; send one first");
        return CHAT_ACT_NONE;
    }
    history_error herr;
    if (history_conv_set_title(x->db, conversation_id(x->conv), args, &herr))
        chat_say(x, CHAT_SAY_ERROR, "%s", herr.msg);
    else
        chat_say(x, CHAT_SAY_NOTICE, "conversation %s renamed to \"%s\"", conversation_uid(x->conv), args);
    return CHAT_ACT_NONE;
}

/* /raw: the front end switches markdown rendering. */
chat_action chat_cmd_raw(chat_cmd_ctx *x, const char *args)
{
    (void)x;
    (void)args;
    return CHAT_ACT_RAW;
}

/* /reasoning: the front end shows a thinking model's reasoning whole or
 * collapsed to its first line. */
chat_action chat_cmd_reasoning(chat_cmd_ctx *x, const char *args)
{
    (void)x;
    (void)args;
    return CHAT_ACT_REASONING;
}

int chat_set_spelling(const char *args, char *buf, size_t cap)
{
    if (strncmp(args, "parameter ", 10)) {
        snprintf(buf, cap, "%s", args);
        return 0;
    }
    char key[64] = "", val[64] = "", extra[8] = "";
    if (sscanf(args + 10, "%63s %63s %7s", key, val, extra) != 2) return -1;
    snprintf(buf, cap, "%s=%s", key, val);
    return 0;
}
