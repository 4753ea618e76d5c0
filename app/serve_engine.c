/* serve_engine.c - the generation thread of `k3 serve` (see serve.h).
 *
 * One generation at a time: the machine is the bottleneck, so requests wait
 * in a bounded FIFO and the engine runs them in turn. Chat clients re-send
 * the whole conversation every turn, so after each prompt the session state
 * is copied (k3_state_capture) into a small cache bounded in bytes and in
 * entries; a request whose tokens start with a kept state restores it and
 * prefills only the rest. KDA state cannot be rolled back, so states are
 * kept exactly at prompt ends, and at answer ends closed as the chat format
 * closes an assistant message (what the client will send back). Restoring
 * copies the same bytes, so the logits equal a fresh prefill. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "generate.h"
#include "text_append.h"
#include "serve.h"
#include "k3_util.h"

serve_job *serve_job_new(void)
{
    serve_job *job = calloc(1, sizeof *job);
    if (!job) return NULL;
    job->temperature = 1.0f;
    job->top_p = 1.0f;
    job->conn_fd = -1;
    job->arrival_ns = k3_now_ns();
    return job;
}

static void job_free(serve_job *job)
{
    free(job->ids);
    for (int i = 0; i < job->n_stop; i++) free(job->stop[i]);
    free(job->text);
    free(job->reasoning);
    free(job->out);
    free(job);
}

void serve_job_release(serve *sv, serve_job *job)
{
    pthread_mutex_lock(&sv->mu);
    int last = --job->refs <= 0;
    pthread_mutex_unlock(&sv->mu);
    if (last) job_free(job);
}

int serve_submit(serve *sv, serve_job *job)
{
    pthread_mutex_lock(&sv->mu);
    if (sv->shutting_down || sv->n_waiting >= sv->queue_max) {
        sv->requests_rejected++;
        pthread_mutex_unlock(&sv->mu);
        return -1;
    }
    job->refs = 2;
    job->state = JOB_QUEUED;
    snprintf(job->id, sizeof job->id, "%s-k3%06llu%08llx", job->kind == SERVE_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)++sv->next_id, (unsigned long long)(job->arrival_ns & 0xffffffffu));
    if (sv->queue_tail) sv->queue_tail->next = job;
    else sv->queue_head = job;
    sv->queue_tail = job;
    sv->n_waiting++;
    pthread_cond_signal(&sv->work_cv);
    pthread_mutex_unlock(&sv->mu);
    return 0;
}

/* ---- the state cache (generation thread only; sizes under mu) ---------- */

/* The kept state with the longest token list that is a prefix of ids. */
static serve_state_entry *state_find(serve *sv, const int *ids, int n)
{
    serve_state_entry *best = NULL;
    for (int i = 0; i < SERVE_STATE_SLOTS; i++) {
        serve_state_entry *e = &sv->states[i];
        if (!e->st) continue;
        int k = k3_state_n_tokens(e->st);
        if (k == 0 || k > n || (best && k <= k3_state_n_tokens(best->st))) continue;
        if (!memcmp(k3_state_tokens(e->st), ids, (size_t)k * sizeof *ids)) best = e;
    }
    return best;
}

static void state_drop(serve *sv, serve_state_entry *e)
{
    pthread_mutex_lock(&sv->mu);
    sv->states_bytes -= k3_state_bytes(e->st);
    pthread_mutex_unlock(&sv->mu);
    k3_state_free(e->st);
    e->st = NULL;
}

/* Keep a copy of the session's state, evicting the least recently used
 * states until it fits in the byte and entry limits. */
static void state_keep(serve *sv)
{
    const int n = k3_session_n_tokens(sv->session);
    const size_t need = k3_state_bytes_for(sv->model, n);
    if (!sv->state_cache_bytes || n == 0 || need > sv->state_cache_bytes) return;
    const int *toks = k3_session_tokens(sv->session);
    int n_used = 0;
    for (int i = 0; i < SERVE_STATE_SLOTS; i++) {
        serve_state_entry *e = &sv->states[i];
        if (e->st && k3_state_n_tokens(e->st) == n && !memcmp(k3_state_tokens(e->st), toks, (size_t)n * sizeof *toks))
            state_drop(sv, e);   /* the same tokens: replaced by the fresh copy */
        n_used += e->st != NULL;
    }
    while (sv->states_bytes + need > sv->state_cache_bytes || n_used >= sv->state_cache_entries) {
        serve_state_entry *lru = NULL;
        for (int i = 0; i < SERVE_STATE_SLOTS; i++)
            if (sv->states[i].st && (!lru || sv->states[i].last_used < lru->last_used)) lru = &sv->states[i];
        if (!lru) break;
        state_drop(sv, lru);
        n_used--;
    }
    k3_error err;
    k3_state *st = k3_state_capture(sv->session, &err);
    if (!st) return;   /* out of memory: simply not kept */
    for (int i = 0; i < SERVE_STATE_SLOTS; i++)
        if (!sv->states[i].st) {
            sv->states[i].st = st;
            sv->states[i].last_used = ++sv->use_clock;
            pthread_mutex_lock(&sv->mu);
            sv->states_bytes += k3_state_bytes(st);
            pthread_mutex_unlock(&sv->mu);
            return;
        }
    k3_state_free(st);
}

/* ---- one job ----------------------------------------------------------- */

typedef struct text_sink {
    serve *sv;
    serve_job *job;
} text_sink;

/* Append a piece of the answer; cut at the first stop string and halt. */
static void on_text(void *user, const char *text, size_t n)
{
    text_sink *ts = user;
    serve_job *job = ts->job;
    pthread_mutex_lock(&ts->sv->mu);
    if (!job->stop_hit) {
        size_t from = job->len > job->max_stop_len ? job->len - job->max_stop_len : 0;
        if (text_append(&job->text, &job->len, &job->cap, text, n) == 0) {
            size_t cut = job->len;
            for (int i = 0; i < job->n_stop; i++) {
                char *hit = memmem(job->text + from, job->len - from, job->stop[i], strlen(job->stop[i]));
                if (hit && (size_t)(hit - job->text) < cut) cut = (size_t)(hit - job->text);
            }
            if (cut < job->len) {
                job->len = cut;
                job->text[cut] = 0;
                job->stop_hit = 1;
                __atomic_store_n(&job->halt, 1, __ATOMIC_RELAXED);   /* polled by generate_answer */
            }
        }
    }
    pthread_cond_broadcast(&ts->sv->job_cv);
    pthread_mutex_unlock(&ts->sv->mu);
}

/* Append a piece of the reasoning (never cut by stop strings: they apply to the answer). */
static void on_reasoning(void *user, const char *text, size_t n)
{
    text_sink *ts = user;
    pthread_mutex_lock(&ts->sv->mu);
    text_append(&ts->job->reasoning, &ts->job->reasoning_len, &ts->job->reasoning_cap, text, n);
    pthread_cond_broadcast(&ts->sv->job_cv);
    pthread_mutex_unlock(&ts->sv->mu);
}

/* Record the decode steps of this answer (engine compute per token) in the
 * inter-token histogram; the last n records are this answer's. */
static void record_token_times(serve *sv, int n_decoded, k3_stats *st)
{
    k3_stats_read(sv->model, st);
    int taken = 0;
    for (int i = (int)st->n_valid - 1; i >= 0 && taken < n_decoded; i--)
        if (st->records[i].phase == K3_PHASE_DECODE) {
            serve_hist_add(&sv->itl, st->records[i].ms * 1e-3);
            taken++;
        }
}

static void fail_job(serve *sv, serve_job *job, int status, const char *msg)
{
    pthread_mutex_lock(&sv->mu);
    job->http_status = status;
    snprintf(job->error, sizeof job->error, "%s", msg);
    pthread_mutex_unlock(&sv->mu);
}

static void run_job(serve *sv, serve_job *job, k3_stats *scratch_stats)
{
    k3_error err;
    k3_session *s = sv->session;
    if (job->halt) return;   /* cancelled while waiting */
    const uint64_t t_start = k3_now_ns();
    serve_state_entry *e = state_find(sv, job->ids, job->n_ids);
    int cached = 0;
    if (e && k3_state_restore(s, e->st, &err) == 0) {
        cached = k3_state_n_tokens(e->st);
        e->last_used = ++sv->use_clock;
    } else {
        k3_session_reset(s);
    }
    k3_session_set_interrupt(s, (volatile int *)&job->halt);
    int rc = k3_session_eval(s, job->ids + cached, job->n_ids - cached, NULL, &err);
    k3_session_set_interrupt(s, NULL);
    const uint64_t t_prefilled = k3_now_ns();
    pthread_mutex_lock(&sv->mu);
    job->cached_tokens = cached;
    job->prefilled = job->n_ids - cached;
    sv->prefix_queries++;
    if (cached) { sv->prefix_hits++; sv->prefix_cached_tokens += (uint64_t)cached; }
    pthread_mutex_unlock(&sv->mu);
    if (rc == K3_EVAL_INTERRUPTED) { k3_session_reset(s); return; }
    if (rc) { k3_session_reset(s); fail_job(sv, job, 500, err.msg); return; }
    if (job->n_ids > cached) state_keep(sv);

    k3_model_info info;
    k3_model_get_info(sv->model, &info);
    k3_sampler sp = {.temperature = job->temperature, .top_p = job->top_p, .top_k = job->top_k, .seed = job->seed};
    if (k3_sampler_init(&sp, info.vocab_size)) { fail_job(sv, job, 500, "out of memory"); return; }
    text_sink ts = {sv, job};
    generate_result res;
    const uint64_t t_gen = k3_now_ns();
    if (job->think)
        rc = generate_thinking(s, &sp, sv->stop_ids, job->ignore_eos ? 0 : sv->n_stop_ids, job->max_tokens, sv->draft,
                               &job->halt, on_reasoning, on_text, NULL, &ts, &res, &err);
    else
        rc = generate_answer(s, &sp, sv->stop_ids, job->ignore_eos ? 0 : sv->n_stop_ids, job->max_tokens, sv->draft,
                             &job->halt, on_text, NULL, &ts, &res, &err);
    k3_sampler_free(&sp);
    const uint64_t t_end = k3_now_ns();
    pthread_mutex_lock(&sv->mu);
    job->n_generated = res.n_generated;
    job->finish = res.stopped_on >= 0 || job->stop_hit ? "stop" : "length";
    if (rc) { job->http_status = 500; snprintf(job->error, sizeof job->error, "%s", err.msg); }
    else if (sv->shutting_down && res.interrupted && !job->stop_hit) {   /* cut short, not finished: say so */
        job->http_status = 503;
        snprintf(job->error, sizeof job->error, "the server is shutting down; the answer was cut after %d tokens",
                 res.n_generated);
    }
    sv->prompt_tokens += (uint64_t)job->n_ids;
    sv->prefilled_tokens += (uint64_t)(job->n_ids - cached);
    sv->generation_tokens += (uint64_t)res.n_generated;
    if (res.n_generated > 0) serve_hist_add(&sv->ttft, (t_gen - job->arrival_ns) * 1e-9 + res.first_token_s);
    serve_hist_add(&sv->e2e, (t_end - job->arrival_ns) * 1e-9);
    if (res.n_generated > 1) record_token_times(sv, res.n_generated - 1, scratch_stats);
    const int cancelled = job->cancelled;
    pthread_mutex_unlock(&sv->mu);
    if (sv->verbose)
        fprintf(stderr, "k3 serve: %s: prompt %d tokens (%d from a kept state, %d prefilled in %.0f ms), "
                        "%d generated, %.1f tok/s, finish %s%s\n",
                job->id, job->n_ids, cached, job->n_ids - cached, (t_prefilled - t_start) * 1e-6, res.n_generated,
                res.n_generated > 1 && res.decode_s > 0 ? (res.n_generated - 1) / res.decode_s : 0.0,
                job->finish, cancelled ? " (client gone: cancelled)" : "");
    /* Close the answer as the chat format does and keep that state too: the
     * client's next turn starts with exactly these tokens when the answer's
     * text re-encodes to the same ids (done after the answer is delivered). */
    pthread_mutex_lock(&sv->mu);
    job->state = JOB_DONE;
    pthread_cond_broadcast(&sv->job_cv);
    pthread_mutex_unlock(&sv->mu);
    if (job->kind == SERVE_CHAT && rc == 0 && !cancelled && !job->stop_hit && !res.interrupted && !res.context_full &&
        !res.think_open && sv->n_close > 0) {
        int close_ids[40], n_close = 0;
        if (res.pending_token >= 0) close_ids[n_close++] = res.pending_token;
        for (int i = 0; i < sv->n_close && n_close < 40; i++) close_ids[n_close++] = sv->close_ids[i];
        if (k3_session_n_tokens(s) + n_close <= k3_session_max_tokens(s) &&
            k3_session_eval(s, close_ids, n_close, NULL, &err) == 0)
            state_keep(sv);
    }
    free(res.text);
    free(res.reasoning);
    free(res.ids);
}

static void *worker_main(void *arg)
{
    serve *sv = arg;
    omp_set_num_threads(sv->n_threads > 0 ? sv->n_threads : k3_default_threads(NULL, 0));
    k3_stats *st = malloc(sizeof *st);
    for (;;) {
        pthread_mutex_lock(&sv->mu);
        while (!sv->queue_head && !sv->shutting_down) pthread_cond_wait(&sv->work_cv, &sv->mu);
        if (sv->shutting_down) { pthread_mutex_unlock(&sv->mu); break; }
        serve_job *job = sv->queue_head;
        sv->queue_head = job->next;
        if (!sv->queue_head) sv->queue_tail = NULL;
        job->next = NULL;
        sv->n_waiting--;
        sv->n_running = 1;
        sv->running = job;
        job->state = JOB_RUNNING;
        pthread_cond_broadcast(&sv->job_cv);
        pthread_mutex_unlock(&sv->mu);
        if (st) run_job(sv, job, st);
        else fail_job(sv, job, 500, "out of memory");
        pthread_mutex_lock(&sv->mu);
        sv->n_running = 0;
        sv->running = NULL;
        if (job->http_status) sv->requests_error++;
        else if (job->cancelled) sv->requests_cancelled++;
        else sv->requests_ok++;
        job->state = JOB_DONE;
        pthread_cond_broadcast(&sv->job_cv);
        pthread_mutex_unlock(&sv->mu);
        serve_job_release(sv, job);
    }
    free(st);
    return NULL;
}

int serve_engine_start(serve *sv, k3_error *err)
{
    sv->session = k3_session_new(sv->model, sv->ctx_tokens, err);
    if (!sv->session) return -1;
    sv->n_stop_ids = k3_model_stop_ids(sv->model, sv->stop_ids, 8);
    k3_error cerr;
    sv->n_close = k3_model_chat_close_ids(sv->model, sv->close_ids, 32, &cerr);
    if (sv->n_close < 0) sv->n_close = 0;
    pthread_mutex_init(&sv->mu, NULL);
    pthread_cond_init(&sv->work_cv, NULL);
    pthread_cond_init(&sv->job_cv, NULL);
    pthread_cond_init(&sv->parse_cv, NULL);
    sv->parse_slots_free = SERVE_PARSE_SLOTS;
    if (pthread_create(&sv->worker, NULL, worker_main, sv)) {
        k3_session_free(sv->session);
        sv->session = NULL;
        return k3_err(err, "cannot start the generation thread");
    }
    sv->worker_started = 1;
    return 0;
}

/* Fail what waits, stop what runs, join the thread, free the states. */
void serve_engine_stop(serve *sv)
{
    if (!sv->worker_started) return;
    pthread_mutex_lock(&sv->mu);
    sv->shutting_down = 1;
    for (serve_job *j = sv->queue_head; j;) {
        serve_job *next = j->next;
        j->http_status = 503;
        snprintf(j->error, sizeof j->error, "the server is shutting down");
        j->state = JOB_DONE;
        j->next = NULL;
        if (--j->refs <= 0) job_free(j);
        j = next;
    }
    sv->queue_head = sv->queue_tail = NULL;
    sv->n_waiting = 0;
    if (sv->running) __atomic_store_n(&sv->running->halt, 1, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&sv->work_cv);
    pthread_cond_broadcast(&sv->job_cv);
    pthread_mutex_unlock(&sv->mu);
    pthread_join(sv->worker, NULL);
    sv->worker_started = 0;
    for (int i = 0; i < SERVE_STATE_SLOTS; i++)
        if (sv->states[i].st) state_drop(sv, &sv->states[i]);
    k3_session_free(sv->session);
    sv->session = NULL;
}
