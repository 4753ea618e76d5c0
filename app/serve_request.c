/* serve_request.c - OpenAI request bodies into serve jobs, and the JSON of
 * the answers (see serve.h).
 *
 * Every field of a request is looked at: a known field of the wrong type or
 * out of range, an unknown field, or a feature k3 does not implement
 * (n > 1, logprobs, penalties, tools, images) is a 400 that names the field,
 * so a client never silently gets something other than what it asked for.
 * What real clients send that changes nothing (tools: [], tool_choice none,
 * parallel_tool_calls, response_format text, logprobs false, penalties 0,
 * store, metadata) is accepted.
 *
 * Bounded before the parse: a body with more JSON containers than a chat
 * of MAX_MESSAGES messages can hold is refused before jansson builds it
 * (a 1 MB body of {} would otherwise be 77 MB of objects, measured). */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "serve.h"
#include "k3_util.h"

#define MAX_MESSAGES 4096   /* SERVE_MAX_CONTAINERS (serve.h) allows 4 containers a message */

size_t serve_request_reserve_bytes(size_t max_body_bytes)
{
    return SERVE_BODIES_IN_FLIGHT * max_body_bytes + SERVE_PARSE_SLOTS * (3 * max_body_bytes + SERVE_MAX_CONTAINERS * 512u);
}

/* Fill msg/param and return the HTTP status, so callers `return bad(...)`. */
static int bad(int status, char *msg, size_t msglen, char *param, size_t paramlen, const char *field,
               const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static int bad(int status, char *msg, size_t msglen, char *param, size_t paramlen, const char *field,
               const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msglen, fmt, ap);
    va_end(ap);
    snprintf(param, paramlen, "%s", field ? field : "");
    return status;
}

#define BAD(status, field, ...) bad(status, msg, msglen, param, paramlen, field, __VA_ARGS__)

/* A number field, or null (then *set stays 0). */
static int get_number(json_t *v, double lo, double hi, double *out, int *set)
{
    if (json_is_null(v)) return 0;
    if (!json_is_number(v)) return -1;
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi)) return -1;
    *out = d;
    *set = 1;
    return 0;
}

static int get_integer(json_t *v, long long lo, long long hi, long long *out, int *set)
{
    if (json_is_null(v)) return 0;
    if (!json_is_integer(v)) return -1;
    long long x = json_integer_value(v);
    if (x < lo || x > hi) return -1;
    *out = x;
    *set = 1;
    return 0;
}

/* The static name of a valid effort (the job keeps it after the JSON is freed). */
static const char *effort_name(const char *e)
{
    static const char *const names[] = {"low", "medium", "high", "max"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(e, names[i])) return names[i];
    return NULL;
}

/* The fields chat and completion requests share; returns 0 if key was one
 * of them (handled), 1 if not one of them, or an HTTP status. */
static int common_field(serve *sv, const char *key, json_t *v, serve_job *job, long long *max_tokens, int *max_set,
                        int *seed_set, char *msg, size_t msglen, char *param, size_t paramlen)
{
    double d;
    long long x;
    int set = 0;
    if (!strcmp(key, "model")) {
        if (!json_is_string(v)) return BAD(400, key, "'model' must be a string");
        if (strcmp(json_string_value(v), sv->model_name))
            return BAD(404, key, "The model '%.100s' does not exist; this server serves '%s'", json_string_value(v),
                       sv->model_name);
    } else if (!strcmp(key, "stream")) {
        if (!json_is_boolean(v) && !json_is_null(v)) return BAD(400, key, "'stream' must be a boolean");
        job->stream = json_is_true(v);
    } else if (!strcmp(key, "stream_options")) {
        if (json_is_null(v)) return 0;
        if (!json_is_object(v)) return BAD(400, key, "'stream_options' must be an object");
        const char *k;
        json_t *o;
        json_object_foreach(v, k, o) {
            if (strcmp(k, "include_usage")) return BAD(400, "stream_options", "unsupported field 'stream_options.%.60s'", k);
            if (!json_is_boolean(o)) return BAD(400, "stream_options", "'stream_options.include_usage' must be a boolean");
            job->include_usage = json_is_true(o);
        }
    } else if (!strcmp(key, "temperature")) {
        if (get_number(v, 0, 2, &d, &set)) return BAD(400, key, "'temperature' must be a number from 0 to 2");
        if (set) job->temperature = (float)d;
    } else if (!strcmp(key, "top_p")) {
        if (get_number(v, 0, 1, &d, &set) || (set && d <= 0)) return BAD(400, key, "'top_p' must be a number in (0, 1]");
        if (set) job->top_p = (float)d;
    } else if (!strcmp(key, "top_k")) {
        if (get_integer(v, -1, 1 << 24, &x, &set)) return BAD(400, key, "'top_k' must be an integer >= -1 (-1 or 0 = off)");
        if (set) job->top_k = x < 0 ? 0 : (int)x;
    } else if (!strcmp(key, "seed")) {
        if (get_integer(v, INT64_MIN, INT64_MAX, &x, &set)) return BAD(400, key, "'seed' must be an integer");
        if (set) { job->seed = (uint64_t)x; *seed_set = 1; }
    } else if (!strcmp(key, "max_tokens") || !strcmp(key, "max_completion_tokens")) {
        if (get_integer(v, 1, sv->max_tokens_limit, &x, &set))
            return BAD(400, key, "'%s' must be an integer from 1 to %d", key, sv->max_tokens_limit);
        if (set) { *max_tokens = x; *max_set = 1; }
    } else if (!strcmp(key, "stop")) {
        if (json_is_null(v)) return 0;
        json_t *one = json_is_string(v) ? v : NULL;
        size_t n = one ? 1 : json_is_array(v) ? json_array_size(v) : 0;
        if ((!one && !json_is_array(v)) || n > SERVE_MAX_STOP)
            return BAD(400, key, "'stop' must be a string or an array of at most %d strings", SERVE_MAX_STOP);
        for (size_t i = 0; i < n; i++) {
            json_t *s = one ? one : json_array_get(v, i);
            if (!json_is_string(s) || json_string_length(s) == 0 || json_string_length(s) > 256)
                return BAD(400, key, "'stop' entries must be non-empty strings of at most 256 bytes");
            job->stop[job->n_stop] = strdup(json_string_value(s));
            if (!job->stop[job->n_stop]) return BAD(500, key, "out of memory");
            if (json_string_length(s) > job->max_stop_len) job->max_stop_len = json_string_length(s);
            job->n_stop++;
        }
    } else if (!strcmp(key, "ignore_eos")) {
        if (!json_is_boolean(v) && !json_is_null(v)) return BAD(400, key, "'ignore_eos' must be a boolean");
        job->ignore_eos = json_is_true(v);
    } else if (!strcmp(key, "n")) {
        if (get_integer(v, 1, 1, &x, &set)) return BAD(400, key, "only 'n': 1 is supported");
    } else if (!strcmp(key, "user")) {
        if (!json_is_string(v)) return BAD(400, key, "'user' must be a string");
    } else if (!strcmp(key, "frequency_penalty") || !strcmp(key, "presence_penalty")) {
        if (get_number(v, 0, 0, &d, &set)) return BAD(400, key, "'%s' is not supported (only 0)", key);
    } else if (!strcmp(key, "logprobs")) {
        if (!json_is_null(v) && !json_is_false(v)) return BAD(400, key, "'logprobs' is not supported");
    } else if (!strcmp(key, "top_logprobs")) {
        if (get_integer(v, 0, 0, &x, &set)) return BAD(400, key, "'top_logprobs' is not supported (only 0)");
    } else if (!strcmp(key, "tools") || !strcmp(key, "functions")) {   /* no tools offered: nothing changes */
        if (!json_is_null(v) && !(json_is_array(v) && json_array_size(v) == 0))
            return BAD(400, key, "'%s' is not supported: this server cannot call tools (send none, or an empty list)", key);
    } else if (!strcmp(key, "tool_choice") || !strcmp(key, "function_call")) {
        const char *c = json_string_value(v);
        if (!json_is_null(v) && !(c && (!strcmp(c, "none") || !strcmp(c, "auto"))))
            return BAD(400, key, "'%s' must be \"none\" or \"auto\": this server cannot call tools", key);
    } else if (!strcmp(key, "parallel_tool_calls") || !strcmp(key, "store")) {
        if (!json_is_boolean(v) && !json_is_null(v)) return BAD(400, key, "'%s' must be a boolean", key);
    } else if (!strcmp(key, "metadata")) {
        if (!json_is_object(v) && !json_is_null(v)) return BAD(400, key, "'metadata' must be an object");
    } else if (!strcmp(key, "reasoning_effort") && job->kind == SERVE_CHAT) {   /* OpenAI's and vLLM's spelling */
        const char *e = json_string_value(v);
        if (json_is_null(v)) return 0;
        if (!e || !(k3_chat_think_effort_valid(e) || !strcmp(e, "none")))
            return BAD(400, key, "'reasoning_effort' must be one of none, low, medium, high, max");
        if (!strcmp(e, "none")) job->think_asked = 0;
        else job->effort_asked = effort_name(e);
    } else if (!strcmp(key, "chat_template_kwargs") && job->kind == SERVE_CHAT) {   /* vLLM's: the template's own switches */
        if (json_is_null(v)) return 0;
        if (!json_is_object(v)) return BAD(400, key, "'chat_template_kwargs' must be an object");
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) {
            if (!strcmp(k, "thinking") || !strcmp(k, "enable_thinking")) {
                if (!json_is_boolean(x)) return BAD(400, key, "chat_template_kwargs.%s must be true or false", k);
                job->think_asked = json_is_true(x);
            } else if (!strcmp(k, "thinking_effort")) {
                const char *e = json_string_value(x);
                if (!e || !k3_chat_think_effort_valid(e))
                    return BAD(400, key, "chat_template_kwargs.thinking_effort must be one of low, medium, high, max");
                job->effort_asked = effort_name(e);
            } else {
                return BAD(400, key, "chat_template_kwargs.%.60s is not supported (thinking, thinking_effort)", k);
            }
        }
    } else if (!strcmp(key, "response_format")) {
        const char *type = json_string_value(json_object_get(v, "type"));
        if (!json_is_null(v) && !(type && !strcmp(type, "text")))
            return BAD(400, key, "'response_format' type '%.40s' is not supported (only \"text\": no JSON mode or "
                                 "schema here)", type ? type : "?");
    } else {
        return 1;
    }
    return 0;
}

/* What both kinds do after their own fields: the context and token limits,
 * defaults, an id. */
static int finish_job(serve *sv, serve_job *job, long long max_tokens, int max_set, int seed_set, char *msg,
                      size_t msglen, char *param, size_t paramlen)
{
    if (job->n_ids == 0) return BAD(400, job->kind == SERVE_CHAT ? "messages" : "prompt", "the prompt is empty");
    if (job->n_ids >= sv->ctx_tokens)
        return BAD(400, job->kind == SERVE_CHAT ? "messages" : "prompt",
                   "This model's maximum context length is %d tokens; the prompt has %d tokens", sv->ctx_tokens,
                   job->n_ids);
    if (!max_set) {
        max_tokens = sv->ctx_tokens - job->n_ids;
        if (max_tokens > sv->max_tokens_limit) max_tokens = sv->max_tokens_limit;
    } else if (job->n_ids + max_tokens > sv->ctx_tokens) {
        return BAD(400, "max_tokens",
                   "This model's maximum context length is %d tokens; the prompt has %d tokens and max_tokens "
                   "asks for %lld more",
                   sv->ctx_tokens, job->n_ids, max_tokens);
    }
    job->max_tokens = (int)max_tokens;
    if (!seed_set) job->seed = (uint64_t)k3_now_ns() ^ ((uint64_t)job->n_ids << 32);
    if (job->include_usage && !job->stream) job->include_usage = 0;
    job->created = (int64_t)time(NULL);
    return 0;
}

/* The text of a message's content: a string, null, or text parts. */
static int content_text(json_t *c, char **out, char *msg, size_t msglen, char *param, size_t paramlen)
{
    if (json_is_null(c)) { *out = strdup(""); return *out ? 0 : 500; }
    if (json_is_string(c)) { *out = strdup(json_string_value(c)); return *out ? 0 : 500; }
    if (!json_is_array(c)) return BAD(400, "messages", "a message's 'content' must be a string or an array of text parts");
    size_t total = 1, i;
    json_t *p;
    json_array_foreach(c, i, p) {
        json_t *type = json_object_get(p, "type"), *text = json_object_get(p, "text");
        if (!json_is_object(p) || !json_is_string(type) || strcmp(json_string_value(type), "text") || !json_is_string(text))
            return BAD(400, "messages", "only content parts of type 'text' are supported");
        total += json_string_length(text);
    }
    char *s = malloc(total);
    if (!s) return 500;
    size_t len = 0;
    json_array_foreach(c, i, p) {
        json_t *text = json_object_get(p, "text");
        memcpy(s + len, json_string_value(text), json_string_length(text));
        len += json_string_length(text);
    }
    s[len] = 0;
    *out = s;
    return 0;
}

/* JSON containers ({ and [) outside strings, counted before any parse. */
static size_t count_containers(const char *body, size_t len)
{
    size_t n = 0;
    int in_string = 0;
    for (size_t i = 0; i < len; i++) {
        const char c = body[i];
        if (in_string) {
            if (c == '\\') i++;
            else if (c == '"') in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '{' || c == '[') {
            n++;
        }
    }
    return n;
}

static json_t *load_object(const char *body, size_t len, char *msg, size_t msglen, char *param, size_t paramlen, int *status)
{
    if (count_containers(body, len) > SERVE_MAX_CONTAINERS) {
        *status = BAD(400, NULL, "the request has more than %d JSON objects and arrays (at most %d messages of a few "
                                 "parts each)", SERVE_MAX_CONTAINERS, MAX_MESSAGES);
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        *status = BAD(400, NULL, "invalid JSON in the request body: %s (line %d, column %d)", je.text, je.line, je.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        *status = BAD(400, NULL, "the request body must be a JSON object");
        return NULL;
    }
    return root;
}

int serve_parse_chat(serve *sv, const char *body, size_t len, serve_job *job, char *msg, size_t msglen, char *param,
                     size_t paramlen)
{
    int status = 0, max_set = 0, seed_set = 0;
    long long max_tokens = 0;
    json_t *root = load_object(body, len, msg, msglen, param, paramlen, &status);
    if (!root) return status;
    job->kind = SERVE_CHAT;
    job->think_asked = -1;
    json_t *messages = NULL;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "messages")) { messages = v; continue; }
        int r = common_field(sv, key, v, job, &max_tokens, &max_set, &seed_set, msg, msglen, param, paramlen);
        if (r == 1) r = BAD(400, key, "unsupported field '%.60s'", key);
        if (r) { json_decref(root); return r; }
    }
    if (!json_object_get(root, "model")) status = BAD(400, "model", "'model' is required");
    else if (!json_is_array(messages) || json_array_size(messages) == 0 || json_array_size(messages) > MAX_MESSAGES)
        status = BAD(400, "messages", "'messages' must be a non-empty array of at most %d messages", MAX_MESSAGES);
    size_t n = status ? 0 : json_array_size(messages);
    k3_chat_msg *msgs = calloc(n ? n : 1, sizeof *msgs);
    char **texts = calloc(n ? n : 1, sizeof *texts);
    if (!msgs || !texts) status = BAD(500, NULL, "out of memory");
    for (size_t i = 0; i < n && !status; i++) {
        json_t *m = json_array_get(messages, i), *role = json_object_get(m, "role");
        if (!json_is_object(m) || !json_is_string(role)) {
            status = BAD(400, "messages", "messages[%zu] must be an object with a string 'role'", i);
            break;
        }
        const char *r = json_string_value(role);
        if (!strcmp(r, "developer")) r = "system";
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool")) {
            status = BAD(400, "messages", "messages[%zu].role '%.40s' is not one of system, developer, user, assistant, tool", i, r);
            break;
        }
        json_object_foreach(m, key, v)   /* a vLLM client sends an answer's reasoning back: not rendered */
            if (strcmp(key, "role") && strcmp(key, "content") && strcmp(key, "name") &&
                !((!strcmp(key, "reasoning_content") || !strcmp(key, "reasoning")) && (json_is_string(v) || json_is_null(v))) &&
                !(!strcmp(key, "tool_calls") && (json_is_null(v) || (json_is_array(v) && !json_array_size(v))))) {
                status = BAD(400, "messages", "messages[%zu]: unsupported field '%.60s'", i, key);
                break;
            }
        if (status) break;
        json_t *c = json_object_get(m, "content");
        if (!c) { status = BAD(400, "messages", "messages[%zu] has no 'content'", i); break; }
        status = content_text(c, &texts[i], msg, msglen, param, paramlen);
        if (status == 500) BAD(500, NULL, "out of memory");
        msgs[i].role = r;
        msgs[i].content = texts[i];
        /* an earlier answer's reasoning, as vLLM clients send it back: rendered when thinking */
        json_t *rc = json_object_get(m, "reasoning_content");
        if (!json_is_string(rc)) rc = json_object_get(m, "reasoning");
        msgs[i].reasoning = json_string_value(rc);
    }
    /* thinking: what the request says (chat_template_kwargs.thinking, reasoning_effort), else the server's --think;
     * on without an effort is the template's default, max */
    if (job->think_asked == 0) job->think = NULL;
    else if (job->think_asked == 1 || job->effort_asked)
        job->think = job->effort_asked ? job->effort_asked : sv->think ? sv->think : "max";
    else job->think = sv->think;
    if (!status && job->think && !k3_model_can_think(sv->model))
        status = BAD(400, "chat_template_kwargs", "this model has no thinking mode (only Kimi K3 models think)");
    if (!status) {
        k3_error err;
        job->ids = k3_model_render_chat_think(sv->model, msgs, (int)n, 1, job->think, &job->n_ids, &err);
        if (!job->ids) status = BAD(400, "messages", "%s", err.msg);
    }
    for (size_t i = 0; texts && i < n; i++) free(texts[i]);
    free(texts);
    free(msgs);
    if (!status) status = finish_job(sv, job, max_tokens, max_set, seed_set, msg, msglen, param, paramlen);
    json_decref(root);
    return status;
}

int serve_parse_completion(serve *sv, const char *body, size_t len, serve_job *job, char *msg, size_t msglen,
                           char *param, size_t paramlen)
{
    int status = 0, max_set = 0, seed_set = 0;
    long long max_tokens = 0;
    json_t *root = load_object(body, len, msg, msglen, param, paramlen, &status);
    if (!root) return status;
    job->kind = SERVE_COMPLETION;
    json_t *prompt = NULL;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "prompt")) { prompt = v; continue; }
        if (!strcmp(key, "echo")) {
            if (!json_is_null(v) && !json_is_false(v)) { status = BAD(400, key, "'echo' is not supported"); break; }
            continue;
        }
        int r = common_field(sv, key, v, job, &max_tokens, &max_set, &seed_set, msg, msglen, param, paramlen);
        if (r == 1) r = BAD(400, key, "unsupported field '%.60s'", key);
        if (r) { status = r; break; }
    }
    if (!status && !json_object_get(root, "model")) status = BAD(400, "model", "'model' is required");
    if (!status && json_is_array(prompt) && json_array_size(prompt) == 1 && json_is_string(json_array_get(prompt, 0)))
        prompt = json_array_get(prompt, 0);
    if (status) {
    } else if (json_is_string(prompt)) {
        k3_error eerr;
        job->ids = k3_tokenizer_encode(k3_model_tokenizer(sv->model), json_string_value(prompt), json_string_length(prompt),
                                       0, &job->n_ids, &eerr);
        if (!job->ids) status = BAD(400, "prompt", "'prompt': %s", eerr.msg);
    } else if (json_is_array(prompt) && json_array_size(prompt) > 0 && json_array_size(prompt) <= (size_t)sv->ctx_tokens) {
        k3_model_info info;
        k3_model_get_info(sv->model, &info);
        size_t n = json_array_size(prompt), i;
        job->ids = malloc(n * sizeof *job->ids);
        if (!job->ids) status = BAD(500, NULL, "out of memory");
        json_array_foreach(prompt, i, v) {
            if (status) break;
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= info.vocab_size)
                status = BAD(400, "prompt", "'prompt' must be a string or an array of token ids in 0..%d", info.vocab_size - 1);
            else job->ids[job->n_ids++] = (int)json_integer_value(v);
        }
    } else {
        status = BAD(400, "prompt", "'prompt' must be a string, one string in an array, or an array of token ids "
                     "(at most the context)");
    }
    if (!status) status = finish_job(sv, job, max_tokens, max_set, seed_set, msg, msglen, param, paramlen);
    json_decref(root);
    return status;
}

/* json_dumps with a fallback, so a response is never NULL by surprise. */
static char *dump(json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return s;
}

char *serve_json_error(const char *msg, const char *type, const char *param, const char *code)
{
    return dump(json_pack("{s:{s:s, s:s, s:s?, s:s?}}", "error", "message", msg, "type", type, "param",
                          param && *param ? param : NULL, "code", code));
}

static json_t *usage_json(const serve_job *job)
{
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", job->n_ids, "completion_tokens", job->n_generated,
                     "total_tokens", job->n_ids + job->n_generated, "prompt_tokens_details", "cached_tokens",
                     job->cached_tokens);
}

char *serve_json_result(serve *sv, const serve_job *job)
{
    json_t *choice;
    if (job->kind == SERVE_CHAT) {
        choice = json_pack("{s:i, s:{s:s, s:s%}, s:n, s:s}", "index", 0, "message", "role", "assistant", "content",
                           job->text ? job->text : "", job->len, "logprobs", "finish_reason", job->finish);
        if (job->think)   /* vLLM's reasoning parser: the reasoning apart from the content, null when none */
            json_object_set_new(json_object_get(choice, "message"), "reasoning_content",
                                job->reasoning_len ? json_stringn(job->reasoning, job->reasoning_len) : json_null());
    }
    else
        choice = json_pack("{s:i, s:s%, s:n, s:s}", "index", 0, "text", job->text ? job->text : "", job->len, "logprobs",
                           "finish_reason", job->finish);
    return dump(json_pack("{s:s, s:s, s:I, s:s, s:s, s:[o], s:o}", "id", job->id, "object",
                          job->kind == SERVE_CHAT ? "chat.completion" : "text_completion", "created",
                          (json_int_t)job->created, "model", sv->model_name, "system_fingerprint",
                          k3_model_fingerprint(sv->model), "choices", choice, "usage", usage_json(job)));
}

/* One streamed chunk: a text delta (and the role on the first), the finish
 * reason on the last, or (usage_only) the final usage chunk with no choices. */
static char *json_chunk(serve *sv, const serve_job *job, const char *field, const char *delta_text, size_t n, int role,
                        const char *finish, int usage_only)
{
    json_t *choices = json_array();
    if (!usage_only) {
        json_t *choice;
        if (job->kind == SERVE_CHAT) {
            json_t *delta = json_object();
            if (role) json_object_set_new(delta, "role", json_string("assistant"));
            if (delta_text) json_object_set_new(delta, field, json_stringn(delta_text, n));
            choice = json_pack("{s:i, s:o, s:n}", "index", 0, "delta", delta, "logprobs");
        } else {
            choice = json_pack("{s:i, s:s%, s:n}", "index", 0, "text", delta_text ? delta_text : "", n, "logprobs");
        }
        json_object_set_new(choice, "finish_reason", finish ? json_string(finish) : json_null());
        json_array_append_new(choices, choice);
    }
    json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:s, s:o}", "id", job->id, "object",
                          job->kind == SERVE_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)job->created, "model", sv->model_name, "system_fingerprint",
                          k3_model_fingerprint(sv->model), "choices", choices);
    if (j && job->include_usage) json_object_set_new(j, "usage", usage_only ? usage_json(job) : json_null());
    return dump(j);
}

char *serve_json_model(serve *sv)
{
    return dump(json_pack("{s:s, s:s, s:i, s:s, s:i}", "id", sv->model_name, "object", "model", "created", 0,
                          "owned_by", "k3", "max_model_len", sv->ctx_tokens));
}

char *serve_json_models(serve *sv)
{
    json_error_t je;
    char *one = serve_json_model(sv);
    json_t *m = one ? json_loads(one, 0, &je) : NULL;
    free(one);
    return dump(json_pack("{s:s, s:[o]}", "object", "list", "data", m));
}

char *serve_json_chunk(serve *sv, const serve_job *job, const char *delta_text, size_t n, int role, const char *finish,
                       int usage_only)
{
    return json_chunk(sv, job, "content", delta_text, n, role, finish, usage_only);
}

char *serve_json_reasoning_chunk(serve *sv, const serve_job *job, const char *text, size_t n)
{
    return json_chunk(sv, job, "reasoning_content", text, n, 0, NULL, 0);
}
