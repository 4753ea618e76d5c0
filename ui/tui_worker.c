/* tui_worker.c - the engine thread. A turn (or a resume's re-prefill) can
 * take minutes on a big model, one token can take seconds: the worker runs
 * it while the UI thread keeps drawing. Streamed text and the result cross
 * over under a mutex; an eventfd wakes the UI's poll(). The worker blocks
 * the UI's signals so they always reach the UI thread. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "text_append.h"
#include "tui_internal.h"
#include "k3_util.h"

/* Poke the UI's poll(). */
static void wake_ui(tui_worker *w)
{
    uint64_t one = 1;
    ssize_t n = write(w->wake_fd, &one, sizeof one);
    (void)n;
}

/* With mu held, on the worker thread (which owns the conversation while a
 * job runs): copy what the status bar shows, for the UI thread to take. */
static void publish_conv(tui_worker *w)
{
    snprintf(w->conv_uid, sizeof w->conv_uid, "%s", conversation_uid(w->conv));
    w->conv_turns = conversation_turns(w->conv);
    w->conv_published = 1;
}

/* Text callback of conversation_turn (worker thread): append to the queue. */
static void on_text(void *user, const char *text, size_t len)
{
    tui_worker *w = user;
    pthread_mutex_lock(&w->mu);
    if (w->text_len + len + 1 > w->text_cap) {
        size_t cap = w->text_cap ? w->text_cap * 2 : 4096;
        while (cap < w->text_len + len + 1) cap *= 2;
        char *g = realloc(w->text, cap);
        if (g) {
            w->text = g;
            w->text_cap = cap;
        }
    }
    if (w->text_len + len + 1 <= w->text_cap) {
        memcpy(w->text + w->text_len, text, len);
        w->text_len += len;
        w->text[w->text_len] = 0;
    }
    uint64_t now = k3_now_ns();                 /* arrival times: a remote answer's TTFT and inter-token gaps */
    if (w->n_pieces++ == 0) w->first_piece_ns = now;
    else if (w->n_gaps < TUI_GAPS_MAX) w->gaps_ms[w->n_gaps++] = (float)((now - w->last_piece_ns) * 1e-6);
    w->last_piece_ns = now;
    publish_conv(w);
    pthread_mutex_unlock(&w->mu);
    wake_ui(w);
}

/* Reasoning callback (worker thread): its own queue, shown dim above the answer. */
static void on_reasoning(void *user, const char *text, size_t len)
{
    tui_worker *w = user;
    pthread_mutex_lock(&w->mu);
    text_append(&w->reasoning, &w->reasoning_len, &w->reasoning_cap, text, len);
    uint64_t now = k3_now_ns();                 /* reasoning counts for TTFT and the gaps as an answer does */
    if (w->n_pieces++ == 0) w->first_piece_ns = now;
    else if (w->n_gaps < TUI_GAPS_MAX) w->gaps_ms[w->n_gaps++] = (float)((now - w->last_piece_ns) * 1e-6);
    w->last_piece_ns = now;
    pthread_mutex_unlock(&w->mu);
    wake_ui(w);
}

/* Progress callback of conversation_resume's re-prefill. */
static void on_progress(void *user, int done, int total)
{
    tui_worker *w = user;
    pthread_mutex_lock(&w->mu);
    w->progress_done = done;
    w->progress_total = total;
    publish_conv(w);
    pthread_mutex_unlock(&w->mu);
    wake_ui(w);
}

/* Wait for a job, run it, publish the result, repeat. */
static void *worker_main(void *arg)
{
    tui_worker *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->job == TJ_NONE && !w->stop_thread) pthread_cond_wait(&w->cv, &w->mu);
        if (w->stop_thread) break;
        tui_job job = w->job;
        char *job_arg = w->arg;
        w->job = TJ_NONE;
        w->arg = NULL;
        w->running = job;
        pthread_mutex_unlock(&w->mu);

        turn_result r;
        k3_error err = {{0}};
        int from_snapshot = 0, rc;
        memset(&r, 0, sizeof r);
        if (job == TJ_TURN)
            rc = conversation_turn(w->conv, job_arg, &w->interrupt, on_text, w, &r, &err);
        else if (job == TJ_RETRY)
            rc = conversation_retry(w->conv, &w->interrupt, on_text, w, &r, &err);
        else if (job == TJ_EDIT)
            rc = conversation_edit(w->conv, job_arg, &w->interrupt, on_text, w, &r, &err);
        else if (job == TJ_UNDO)
            rc = conversation_undo(w->conv, on_progress, w, &err);
        else
            rc = conversation_resume(w->conv, job_arg, on_progress, w, &from_snapshot, &err);
        free(job_arg);

        pthread_mutex_lock(&w->mu);
        w->running = TJ_NONE;
        w->finished = 1;
        w->finished_job = job;
        w->rc = rc;
        w->from_snapshot = from_snapshot;
        publish_conv(w);
        w->result = r;
        w->err = err;
        pthread_mutex_unlock(&w->mu);
        wake_ui(w);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Created with the UI's signals blocked so they are always delivered to the UI thread. */
int tui_worker_start(tui_worker *w, conversation *c, int wake_fd)
{
    memset(w, 0, sizeof *w);
    w->conv = c;
    w->wake_fd = wake_fd;
    conversation_set_reasoning_fn(c, on_reasoning);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    sigset_t ui_signals, old;                   /* not the fatal ones: those must reach their handler */
    sigemptyset(&ui_signals);
    int blocked[] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH, SIGCONT, SIGTSTP, SIGQUIT};
    for (size_t i = 0; i < sizeof blocked / sizeof blocked[0]; i++) sigaddset(&ui_signals, blocked[i]);
    pthread_sigmask(SIG_BLOCK, &ui_signals, &old);   /* the worker (and its OpenMP team) inherit this */
    int rc = pthread_create(&w->thread, NULL, worker_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) return -1;
    w->started = 1;
    return 0;
}

/* At exit: stop any answer, let the thread finish what it commits, and join it. */
void tui_worker_stop(tui_worker *w)
{
    if (!w->started) return;
    __atomic_store_n(&w->interrupt, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&w->mu);
    w->stop_thread = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    w->started = 0;
    free(w->arg);
    free(w->text);
    free(w->reasoning);
    turn_result_free(&w->result);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
}

/* One job at a time; the interrupt flag is reset for it. */
void tui_worker_submit(tui_worker *w, tui_job job, const char *arg)
{
    pthread_mutex_lock(&w->mu);
    __atomic_store_n(&w->interrupt, 0, __ATOMIC_RELAXED);
    w->job = job;
    free(w->arg);
    w->arg = strdup(arg ? arg : "");
    w->progress_done = w->progress_total = 0;
    w->n_pieces = w->n_gaps = 0;
    w->running = job;            /* busy from now on, even before the thread wakes */
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* For callers that must not use the store while a job runs. */
int tui_worker_busy(tui_worker *w)
{
    pthread_mutex_lock(&w->mu);
    int busy = w->running != TJ_NONE || w->job != TJ_NONE;
    pthread_mutex_unlock(&w->mu);
    return busy;
}
