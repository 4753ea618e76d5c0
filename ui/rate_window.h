/* rate_window.h - a byte counter's rate over a sliding window, for the
 * disk gauge: the rate over the last 0.5 s jumped 6.7 <-> 568 MB/s while
 * every token read a steady 35-70 MB, because reads come in bursts (a
 * layer's experts at once, then compute). Over ~5 s the bursts average out.
 * Plain C, no curses: tests/test_chat_text.c checks it. */
#ifndef K3_RATE_WINDOW_H
#define K3_RATE_WINDOW_H

#include <stdint.h>

#define RATE_WINDOW_SAMPLES 16
#define RATE_WINDOW_SPAN_S 5.0      /* the window the rate is taken over */
#define RATE_WINDOW_GAP_S 0.5       /* samples closer than this are not kept */

typedef struct rate_window {
    double t_s[RATE_WINDOW_SAMPLES];     /* oldest first */
    uint64_t bytes[RATE_WINDOW_SAMPLES];
    int n;
    double peak_bps;                     /* the highest windowed rate so far: it never falls */
} rate_window;

/* The rate over the samples kept: bytes per second, or -1 before two. */
static inline double rate_window_bps(const rate_window *w)
{
    if (w->n < 2 || w->t_s[w->n - 1] <= w->t_s[0]) return -1;
    return (double)(w->bytes[w->n - 1] - w->bytes[0]) / (w->t_s[w->n - 1] - w->t_s[0]);
}

/* A sample of the running byte total at time t_s: kept when at least
 * RATE_WINDOW_GAP_S after the last one; samples older than the span (but
 * the one that starts it) go. */
static inline void rate_window_add(rate_window *w, double t_s, uint64_t bytes)
{
    if (w->n && t_s - w->t_s[w->n - 1] < RATE_WINDOW_GAP_S) return;
    if (w->n == RATE_WINDOW_SAMPLES) {
        for (int i = 1; i < w->n; i++) { w->t_s[i - 1] = w->t_s[i]; w->bytes[i - 1] = w->bytes[i]; }
        w->n--;
    }
    w->t_s[w->n] = t_s;
    w->bytes[w->n] = bytes;
    w->n++;
    while (w->n > 2 && t_s - w->t_s[1] >= RATE_WINDOW_SPAN_S) {
        for (int i = 1; i < w->n; i++) { w->t_s[i - 1] = w->t_s[i]; w->bytes[i - 1] = w->bytes[i]; }
        w->n--;
    }
    double r = rate_window_bps(w);
    if (r > w->peak_bps) w->peak_bps = r;
}

#endif
