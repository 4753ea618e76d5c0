/* plan_compute.c - a decode token's matrix work, timed at the model's own
 * widths (k3 plan).
 *
 * The kernel rates (plan_model.c) time one matrix shape, far larger than any
 * cache, and a decode token is then bytes / rate. A real token is many
 * smaller calls: every trunk matrix is one k3_matvec split over the threads
 * (a fork and join, and a fresh stream to ramp up, per call), and the routed
 * experts run one per thread in a wave that ends when its slowest expert
 * does. On this VM that put the rate-based compute 20-50% under the
 * measured decode at every budget (docs/PERFORMANCE.md). So here the calls
 * of one layer of each kind (attention kind x MoE or dense) and of the head
 * are made as the engine makes them: the same kernels, the same shapes, the
 * same order, the experts in the same wave, over weights spread through a
 * buffer larger than the last-level cache (so they come from memory, as a
 * model's do), and timed, with the work between the matrices (norms, the
 * KDA recurrence, MLA's absorbed heads, routing). What it leaves out, and
 * plan_model.c counts apart, is K3's SiTU and the reads of the MLA cache,
 * which grow with the context. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "forward.h"
#include "delta_rule.h"
#include "kernels.h"
#include "ops.h"
#include "plan_compute.h"
#include "quant_matvec.h"
#include "k3_util.h"
#include "k3_plan.h"

/* One matrix of a decode step: rows x cols of the trunk's or the experts'
 * format. */
typedef struct step_matrix { int64_t rows, cols; } step_matrix;

enum { MAX_STEP_MATRICES = 24 };

/* The trunk matrices layer l (n_layers: the head) multiplies for one
 * token, in the engine's order (engine/model/kda.c, mla.c, moe.c,
 * forward.c). *kv_b: the index of MLA's kv_b, which the engine applies per
 * head from converted rows (absorbed attention), not as a matvec (-1: none). */
static int trunk_matrices(const k3_config *c, int l, step_matrix *m, int *kv_b)
{
    int n = 0;
    *kv_b = -1;
    const int64_t D = c->hidden;
    if (l == c->n_layers) { m[n++] = (step_matrix){c->vocab_size, D}; return n; }
    if (c->attn_kind[l] == K3_ATTN_KDA) {
        const int64_t P = (int64_t)c->kda_heads * c->kda_head_dim, R = c->kda_head_dim;
        for (int i = 0; i < 3; i++) m[n++] = (step_matrix){P, D};
        m[n++] = (step_matrix){R, D};
        m[n++] = (step_matrix){P, R};
        if (c->kda_full_rank_gate) m[n++] = (step_matrix){P, D};
        else { m[n++] = (step_matrix){R, D}; m[n++] = (step_matrix){P, R}; }
        m[n++] = (step_matrix){c->kda_heads, D};
        m[n++] = (step_matrix){D, P};
    } else {
        const int64_t H = c->mla_heads, qd = (int64_t)c->qk_nope_dim + c->qk_rope_dim;
        if (c->q_lora_rank) {
            m[n++] = (step_matrix){c->q_lora_rank, D};
            m[n++] = (step_matrix){H * qd, c->q_lora_rank};
        } else {
            m[n++] = (step_matrix){H * qd, D};
        }
        m[n++] = (step_matrix){(int64_t)c->kv_lora_rank + c->qk_rope_dim, D};
        *kv_b = n;
        m[n++] = (step_matrix){H * ((int64_t)c->qk_nope_dim + c->v_head_dim), c->kv_lora_rank};
        if (c->mla_output_gate) m[n++] = (step_matrix){H * c->v_head_dim, D};
        m[n++] = (step_matrix){D, H * c->v_head_dim};
    }
    if (!c->is_moe[l]) {
        m[n++] = (step_matrix){c->dense_inter, D};
        m[n++] = (step_matrix){c->dense_inter, D};
        m[n++] = (step_matrix){D, c->dense_inter};
        return n;
    }
    m[n++] = (step_matrix){c->n_experts, D};
    if (c->latent_dim) m[n++] = (step_matrix){c->latent_dim, D};
    if (c->n_shared_experts > 0) {
        const int64_t I = (int64_t)c->moe_inter * c->n_shared_experts;
        m[n++] = (step_matrix){I, D};
        m[n++] = (step_matrix){I, D};
        m[n++] = (step_matrix){D, I};
    }
    if (c->latent_dim) m[n++] = (step_matrix){D, c->latent_dim};
    return n;
}

double k3_plan_layer_matrix_weights(const k3_config *c, int l)
{
    step_matrix m[MAX_STEP_MATRICES];
    int kv_b;
    const int n = trunk_matrices(c, l, m, &kv_b);
    double w = 0;
    for (int i = 0; i < n; i++) w += (double)m[i].rows * (double)m[i].cols;
    return w;
}

/* Weights carved one after the other from a buffer larger than the caches,
 * starting over at its beginning when the next does not fit. */
typedef struct weight_arena { uint8_t *buf; size_t bytes, at; } weight_arena;

/* The format a matrix of this many columns takes: a block type whose
 * blocks do not divide the rows falls back as llama-quantize falls back
 * (to Q8_0 when 32 divides them, else to BF16). */
static k3_plan_format format_for_cols(k3_plan_format f, int64_t cols)
{
    if (f.dtype != K3_DT_GGML || cols % f.qtype->block_elems == 0) return f;
    if (cols % 32 == 0) return (k3_plan_format){.dtype = K3_DT_GGML, .qtype = k3_quant_type_by_id(K3_GGML_Q8_0)};
    return (k3_plan_format){.dtype = K3_DT_BF16};
}

static size_t weight_bytes(k3_plan_format f, int64_t rows, int64_t cols)
{
    const size_t n = (size_t)rows * (size_t)cols;
    f = format_for_cols(f, cols);
    if (f.dtype == K3_DT_GGML) return (size_t)rows * k3_quant_row_bytes(f.qtype, cols);
    return f.dtype == K3_DT_MXFP4 ? n / 2 + n / 32 : n * k3_dtype_size(f.dtype);
}

static k3_weight arena_weight(weight_arena *a, k3_plan_format f, int64_t rows, int64_t cols)
{
    f = format_for_cols(f, cols);
    const size_t b = (weight_bytes(f, rows, cols) + 4095) & ~(size_t)4095;
    if (a->at + b > a->bytes) a->at = 0;
    k3_weight w = {.dtype = f.dtype, .qtype = f.qtype, .rows = rows, .cols = cols, .data = a->buf + a->at};
    if (f.dtype == K3_DT_MXFP4) w.mx_scale = a->buf + a->at + (size_t)rows * cols / 2;
    a->at += b;
    return w;
}

/* y = W x for a matrix that may be larger than the arena: in row pieces of
 * at most a quarter of it (a piece's call costs what the engine's one call
 * would, to within one fork). */
static void trunk_matvec(weight_arena *a, k3_plan_format dt, step_matrix m, float *x, float *y)
{
    int64_t piece = m.rows;
    while (piece > 1 && weight_bytes(dt, piece, m.cols) > a->bytes / 4) piece = (piece + 1) / 2;
    for (int64_t r = 0; r < m.rows; r += piece) {
        const int64_t rows = m.rows - r < piece ? m.rows - r : piece;
        k3_weight w = arena_weight(a, dt, rows, m.cols);
        k3_matvec(y, &w, x);
    }
}

typedef struct step_probe {
    const k3_config *c;
    k3_plan_format trunk_dt, expert_dt;
    int n_threads;
    weight_arena arena;
    float *x, *y, *expert_y;     /* expert_y: one row of outputs per thread */
    int64_t expert_y_len;
    float *vec[4];               /* activations of the work between the matrices */
    float *kda_state;            /* n_kda_states recurrent states, one per KDA layer, used in turn,
                                  * then as many saved copies */
    int n_kda_states, next_kda_state;
} step_probe;

/* The KDA work of one token between its matrices (engine/model/kda.c): the
 * short convolutions and their SiLU, then per head (over the threads, as
 * the engine splits them) the q, k norms, the decay, the delta-rule step
 * on that layer's state and the gated output norm. */
static void kda_between(step_probe *sp)
{
    const k3_config *c = sp->c;
    const int H = c->kda_heads, Dk = c->kda_head_dim, Dv = c->kda_head_dim, P = H * Dk, W = c->conv_kernel;
    float *q = sp->vec[0], *k = sp->vec[1], *v = sp->vec[2], *o = sp->vec[3];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < P; j++) {
            float acc = 0;
            for (int t = 0; t < W; t++) acc += 0.25f * sp->x[(j + t) % P];
            sp->vec[i][j] = k3_silu(acc);
        }
    /* the engine saves each KDA layer's state before a pass changes it
     * (kda_save_layer: a failed or interrupted pass is undone), every token */
    const size_t state_floats = (size_t)H * Dk * Dv;
    float *S_all = sp->kda_state + (size_t)sp->next_kda_state * state_floats;
    memcpy(S_all + (size_t)sp->n_kda_states * state_floats, S_all, state_floats * sizeof(float));
    sp->next_kda_state = (sp->next_kda_state + 1) % sp->n_kda_states;
    #pragma omp parallel for schedule(static) num_threads(sp->n_threads) \
        if ((int64_t)H * Dk * Dv * 4 >= K3_PARALLEL_MIN_MACS)
    for (int h = 0; h < H; h++) {
        float u[2 * 1024], alpha[1024];
        k3_l2norm(q + (size_t)h * Dk, Dk, 1e-6f);
        k3_l2norm(k + (size_t)h * Dk, Dk, 1e-6f);
        for (int i = 0; i < Dk; i++) alpha[i] = k3_kda_decay_softplus(0.5f, sp->x[(size_t)h * Dk + i]);
        const float beta = k3_sigmoid(sp->x[h]);
        const k3_delta_tokens in = {.q = q + (size_t)h * Dk, .k = k + (size_t)h * Dk, .v = v + (size_t)h * Dv,
                                    .alpha = alpha, .stride = (size_t)P, .beta = &beta, .beta_stride = 1,
                                    .o = o + (size_t)h * Dv, .o_stride = (size_t)P};
        k3_delta_rule_tokens(S_all + (size_t)h * Dk * Dv, &in, 1, Dk, Dv, u);
        float *oh = o + (size_t)h * Dv;
        double ss = 0.0;
        for (int j = 0; j < Dv; j++) ss += (double)oh[j] * oh[j];
        const float r = (float)(1.0 / sqrt(ss / Dv + 1e-5));
        for (int j = 0; j < Dv; j++) oh[j] = oh[j] * r * k3_sigmoid(sp->x[j]);
    }
}

/* MLA's absorbed kv_b (engine/model/mla.c): per head, the k_nope rows
 * decoded one by one into the query's latent, the token's own key, and the
 * v rows decoded one by one against the attended latent. The keys before
 * it (the cache) are counted apart, by the bytes they hold. */
static void mla_between(step_probe *sp, step_matrix kv_b)
{
    const k3_config *c = sp->c;
    const int H = c->mla_heads, nope = c->qk_nope_dim, rope = c->qk_rope_dim, vd = c->v_head_dim;
    const int L = c->kv_lora_rank;
    const k3_weight w = arena_weight(&sp->arena, sp->trunk_dt, kv_b.rows, kv_b.cols);
    #pragma omp parallel for schedule(static) num_threads(sp->n_threads) \
        if ((int64_t)H * ((int64_t)nope * L + (int64_t)(L + rope + vd)) >= K3_PARALLEL_MIN_MACS)
    for (int h = 0; h < H; h++) {
        float *row = sp->expert_y + (size_t)omp_get_thread_num() * sp->expert_y_len;
        float *ql = row + L, *ctx = row + 2 * (size_t)L, score;
        memset(ql, 0, (size_t)L * sizeof(float));
        for (int d = 0; d < nope; d++) {
            k3_weight_row_f32(&w, (int64_t)h * (nope + vd) + d, row);
            k3_axpy_f32(ql, sp->x[d], row, L);
        }
        score = k3_dot_f32(ql, sp->x, L) + k3_dot_f32(ql, sp->x + L, rope);
        k3_softmax(&score, 1);
        memset(ctx, 0, (size_t)L * sizeof(float));
        k3_axpy_f32(ctx, score, sp->x, L);
        for (int d = 0; d < vd; d++) {
            k3_weight_row_f32(&w, (int64_t)h * (nope + vd) + nope + d, row);
            sp->y[(size_t)h * vd + d] = k3_dot_f32(row, ctx, L);
        }
    }
}

/* One token through layer l: its trunk's matrices and the work between
 * them (the input and FFN norms; KDA's recurrence, MLA's absorbed heads;
 * the router's selection, the weighting of the routed outputs), then top_k
 * routed experts in a wave, one expert per thread, as run_routed_experts
 * runs the experts already in memory (all threads on each expert's
 * matrices when the wave's work is too small to wake the team). SiTU and
 * the cache's reads are counted apart (plan_model.c); SiLU is here. */
static void run_layer(step_probe *sp, int l)
{
    const k3_config *c = sp->c;
    step_matrix m[MAX_STEP_MATRICES];
    int kv_b;
    const int n = trunk_matrices(c, l, m, &kv_b);
    const int64_t D = c->hidden;
    for (int i = 0; i < n; i++)
        if (i != kv_b) trunk_matvec(&sp->arena, sp->trunk_dt, m[i], sp->x, sp->y);
    if (l == c->n_layers) return;
    for (int i = 0; i < 2; i++) k3_rmsnorm(sp->vec[3], sp->x, sp->x, (int)D, 1e-5f);
    if (c->attn_kind[l] == K3_ATTN_KDA) kda_between(sp);
    else mla_between(sp, m[kv_b]);
    if (!c->is_moe[l] || c->top_k <= 0) return;
    const int64_t Din = c->latent_dim ? c->latent_dim : c->hidden, I = c->moe_inter;
    const int K = c->top_k;
    for (int e = 0; e < c->n_experts; e++) sp->vec[0][e] = k3_sigmoid(sp->x[e % D]);
    for (int k = 0; k < K; k++) {                 /* route_token's selection scan */
        int best = 0;
        for (int e = 1; e < c->n_experts; e++) best = sp->vec[0][e] > sp->vec[0][best] ? e : best;
        sp->vec[0][best] = -1;
    }
    k3_weight e[64][3];
    const int n_experts = K < 64 ? K : 64;
    for (int j = 0; j < n_experts; j++) {
        e[j][0] = arena_weight(&sp->arena, sp->expert_dt, I, Din);
        e[j][1] = arena_weight(&sp->arena, sp->expert_dt, I, Din);
        e[j][2] = arena_weight(&sp->arena, sp->expert_dt, Din, I);
    }
    const int wave = sp->n_threads > 1 && n_experts > 1 && (int64_t)K * 3 * Din * I >= K3_PARALLEL_MIN_MACS;
    const int silu = !c->use_situ;
    #pragma omp parallel for schedule(dynamic, 1) num_threads(sp->n_threads) if (wave)
    for (int j = 0; j < n_experts; j++) {
        float *y = sp->expert_y + (size_t)omp_get_thread_num() * sp->expert_y_len;
        k3_matvec(y, &e[j][0], sp->x);
        k3_matvec(y + I, &e[j][1], sp->x);
        if (silu)
            for (int64_t i = 0; i < I; i++) y[i] = k3_silu(y[i]) * y[I + i];
        k3_matvec(y + 2 * I, &e[j][2], y);
    }
    for (int j = 0; j < K; j++) k3_axpy_f32(sp->vec[1], 0.5f, sp->expert_y, (int)Din);
}

/* One routed expert over all the threads for one token, as
 * run_routed_experts runs the experts whose pages are read for this token:
 * one after the other as their reads arrive, each matrix split over the
 * threads. */
static void run_miss_expert(step_probe *sp)
{
    const k3_config *c = sp->c;
    const int64_t Din = c->latent_dim ? c->latent_dim : c->hidden, I = c->moe_inter;
    const k3_weight gate = arena_weight(&sp->arena, sp->expert_dt, I, Din);
    const k3_weight up = arena_weight(&sp->arena, sp->expert_dt, I, Din);
    const k3_weight down = arena_weight(&sp->arena, sp->expert_dt, Din, I);
    float *y = sp->expert_y;
    k3_matvec(y, &gate, sp->x);
    k3_matvec(y + I, &up, sp->x);
    if (!c->use_situ)
        for (int64_t i = 0; i < I; i++) y[i] = k3_silu(y[i]) * y[I + i];
    k3_matvec(y + 2 * I, &down, y);
}

/* Median of n (n small; sorts in place). */
static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) { double t = v[j]; v[j] = v[j - 1]; v[j - 1] = t; }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Seconds of each layer in layers[0..n) for one token: the median of
 * `rounds` runs (at most 16) after one unmeasured run each; runs holds
 * n x rounds. The median, not
 * the fastest: decode pays the typical call, and every run here is many
 * calls. The layers take turns, one run each a round, so that a slow spell
 * of this shared machine (the same real-width layer measured 60% slower
 * in one probe of three, minutes apart) falls on a few runs of every layer
 * rather than on all the runs of one. */
static void time_layers(step_probe *sp, const int *layers, int n, int rounds, double *runs, double *layer_s)
{
    if (rounds > 16) rounds = 16;
    for (int i = 0; i < n; i++) run_layer(sp, layers[i]);
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < n; i++) {
            const uint64_t t0 = k3_now_ns();
            run_layer(sp, layers[i]);
            runs[(size_t)i * rounds + r] = (double)(k3_now_ns() - t0) * 1e-9;
        }
    for (int i = 0; i < n; i++) layer_s[layers[i]] = median(runs + (size_t)i * rounds, rounds);
}

/* What k3_plan_time_layers allocated (free(NULL) for what it could not). */
static void step_probe_free(step_probe *sp)
{
    free(sp->arena.buf); free(sp->x); free(sp->y); free(sp->expert_y); free(sp->kda_state);
    for (int i = 0; i < 4; i++) free(sp->vec[i]);
}

/* Seconds of one expert run by run_miss_expert: the median of 5 runs of
 * top_k of them (at least 4) after one unmeasured run, per expert. */
static double time_miss_expert(step_probe *sp)
{
    const int n = sp->c->top_k > 4 ? sp->c->top_k : 4;
    double t[5];
    run_miss_expert(sp);
    for (int r = 0; r < 5; r++) {
        const uint64_t t0 = k3_now_ns();
        for (int i = 0; i < n; i++) run_miss_expert(sp);
        t[r] = (double)(k3_now_ns() - t0) * 1e-9 / n;
    }
    return median(t, 5);
}

/* One window of about `seconds`: the reader alone (the calling thread
 * asleep), the layers alone, or both at once. The layers run in cycles
 * (each representative layer once, then the head) over all the threads. */
typedef struct probe_window { double seconds, bytes, cycles; } probe_window;

static probe_window run_window(step_probe *sp, const int *reps, int n_reps, double seconds,
                               const k3_plan_reader *reader, int compute)
{
    probe_window w = {0};
    if (reader) reader->start(reader->ctx);
    const uint64_t t0 = k3_now_ns();
    if (compute) {
        do {
            for (int i = 0; i < n_reps; i++) run_layer(sp, reps[i]);
            w.cycles++;
        } while ((double)(k3_now_ns() - t0) * 1e-9 < seconds);
    } else {
        const struct timespec ts = {0, (long)(seconds * 1e9)};
        nanosleep(&ts, NULL);
    }
    if (reader) w.bytes = (double)reader->stop(reader->ctx);
    w.seconds = (double)(k3_now_ns() - t0) * 1e-9;
    return w;
}

/* The reader and the layers side by side, against each alone: windows of
 * each kind, alternated so the machine's drift falls on all three.
 * *read_share: the reader's speed while the layers compute over its speed
 * alone. *slowdown_s_per_gb: how much longer the layers take per GB the
 * reader brings in meanwhile (the reader's threads and the kernel's work
 * for each read take CPU from them). */
static void reads_beside_compute(step_probe *sp, const int *reps, int n_reps, const k3_plan_reader *reader,
                                 double *read_share, double *slowdown_s_per_gb)
{
    probe_window alone = {0}, both = {0}, compute = {0};
    for (int i = 0; i < 2; i++) {
        const probe_window a = run_window(sp, reps, n_reps, 0.15, reader, 0);
        const probe_window b = run_window(sp, reps, n_reps, 0.15, reader, 1);
        const probe_window c = run_window(sp, reps, n_reps, 0.15, NULL, 1);
        alone.seconds += a.seconds, alone.bytes += a.bytes;
        both.seconds += b.seconds, both.bytes += b.bytes, both.cycles += b.cycles;
        compute.seconds += c.seconds, compute.cycles += c.cycles;
    }
    *read_share = *slowdown_s_per_gb = 0;
    if (alone.bytes <= 0 || both.bytes <= 0) return;
    const double share = (both.bytes / both.seconds) / (alone.bytes / alone.seconds);
    *read_share = share < 1 ? share : 1;
    const double slower_s = both.seconds - both.cycles * (compute.seconds / compute.cycles);
    *slowdown_s_per_gb = slower_s > 0 ? slower_s / (both.bytes * 1e-9) : 0;
}

int k3_plan_time_layers(const k3_config *c, k3_plan_format trunk_dt, k3_plan_format expert_dt, int n_threads, size_t arena_bytes,
                        const k3_plan_reader *reader, double *layer_s, k3_compute_figures *out, k3_error *err)
{
    memset(out, 0, sizeof *out);
    step_probe sp = {.c = c, .trunk_dt = trunk_dt, .expert_dt = expert_dt, .n_threads = n_threads > 0 ? n_threads : 1};
    int64_t max_cols = c->hidden, max_rows = c->vocab_size;
    const int64_t widths[] = {c->dense_inter, (int64_t)c->moe_inter * (c->n_shared_experts > 0 ? c->n_shared_experts : 1),
                              (int64_t)c->kda_heads * c->kda_head_dim, c->latent_dim, c->n_experts,
                              (int64_t)c->mla_heads * ((int64_t)c->qk_nope_dim + c->qk_rope_dim),
                              (int64_t)c->mla_heads * ((int64_t)c->qk_nope_dim + c->v_head_dim), c->moe_inter,
                              (int64_t)c->kv_lora_rank + c->qk_rope_dim};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
        if (widths[i] > max_cols) max_cols = widths[i];
        if (widths[i] > max_rows) max_rows = widths[i];
    }
    /* an expert's three outputs, or MLA's three latent rows, per thread */
    sp.expert_y_len = 3 * (max_rows > (int64_t)c->kv_lora_rank ? max_rows : (int64_t)c->kv_lora_rank) + 64;
    /* the KDA layers' states, as many as the model has (at most a quarter
     * of the arena's size: beyond the caches either way), and a saved copy
     * of each */
    int n_kda = 0;
    for (int l = 0; l < c->n_layers; l++) n_kda += c->attn_kind[l] == K3_ATTN_KDA;
    const size_t state_bytes = (size_t)c->kda_heads * c->kda_head_dim * c->kda_head_dim * sizeof(float);
    sp.n_kda_states = n_kda > 0 ? n_kda : 1;
    while (sp.n_kda_states > 1 && (size_t)sp.n_kda_states * state_bytes > arena_bytes / 4) sp.n_kda_states--;
    const size_t kda_floats = 2 * (size_t)sp.n_kda_states * state_bytes / sizeof(float);   /* states, saved copies */
    sp.kda_state = calloc(kda_floats + 1, sizeof(float));
    for (int i = 0; i < 4; i++) sp.vec[i] = calloc((size_t)max_rows + max_cols + 64, sizeof(float));
    sp.arena.bytes = arena_bytes;
    sp.arena.buf = aligned_alloc(4096, arena_bytes);
    sp.x = malloc((size_t)max_cols * sizeof(float));
    sp.y = malloc((size_t)max_rows * sizeof(float));
    sp.expert_y = malloc((size_t)sp.n_threads * (size_t)sp.expert_y_len * sizeof(float));
    int vec_ok = 1;
    for (int i = 0; i < 4; i++) vec_ok &= sp.vec[i] != NULL;
    if (!sp.arena.buf || !sp.x || !sp.y || !sp.expert_y || !sp.kda_state || !vec_ok) {
        step_probe_free(&sp);
        return k3_err(err, "out of memory for the compute probe (%zu MiB)", arena_bytes >> 20);
    }
    /* the bytes the kernel-rate probe uses: a normal value in every format;
     * written now, as the states are, so that no timed run pays the first
     * touch of their pages (a session's states are written by its prompt;
     * untouched, the KDA layers' first rounds ran 2.7x slower on the demo) */
    memset(sp.arena.buf, 0x3C, arena_bytes);
    for (size_t i = 0; i < kda_floats; i++) sp.kda_state[i] = 0.01f;
    for (int64_t i = 0; i < max_cols; i++) sp.x[i] = 1.0f - (float)(i % 7) * 0.1f;
    for (int i = 0; i < 4; i++)
        for (int64_t j = 0; j < max_rows + max_cols; j++) sp.vec[i][j] = 0.5f - (float)(j % 5) * 0.1f;
    omp_set_num_threads(sp.n_threads);
    /* one layer of each kind (attention kind, MoE or dense), then the head;
     * layers of a kind measured before take its time */
    int *reps = malloc(((size_t)c->n_layers + 1) * sizeof *reps), n_reps = 0;   /* a layer of each kind, the head */
    int *same = malloc(((size_t)c->n_layers + 1) * sizeof *same);
    enum { ROUNDS = 5 };
    double *runs = malloc(((size_t)c->n_layers + 1) * ROUNDS * sizeof *runs);   /* time_layers' */
    if (!reps || !same || !runs) {
        free(reps); free(same); free(runs);
        step_probe_free(&sp);
        return k3_err(err, "out of memory for the compute probe");
    }
    for (int l = 0; l <= c->n_layers; l++) {
        same[l] = -1;
        for (int p = 0; p < l && same[l] < 0 && l < c->n_layers; p++)
            if (c->attn_kind[p] == c->attn_kind[l] && c->is_moe[p] == c->is_moe[l]) same[l] = p;
        if (same[l] >= 0) continue;
        reps[n_reps++] = l;
        if (l < c->n_layers) out->kinds++;
    }
    time_layers(&sp, reps, n_reps, ROUNDS, runs, layer_s);
    for (int l = 0; l <= c->n_layers; l++)
        if (same[l] >= 0) layer_s[l] = layer_s[same[l]];
    free(same);
    free(runs);
    int moe = 0;
    for (int l = 0; l < c->n_layers; l++) moe |= c->is_moe[l];
    if (moe && c->top_k > 0) out->miss_expert_s = time_miss_expert(&sp);
    if (reader) reads_beside_compute(&sp, reps, n_reps, reader, &out->read_share, &out->slowdown_s_per_gb);
    free(reps);
    step_probe_free(&sp);
    return 0;
}
