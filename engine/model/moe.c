/* moe.c - the feed-forward block: a dense SwiGLU MLP on the first layers,
 * Mixture-of-Experts elsewhere (docs/MODEL.md, "FFN and router").
 *
 * Router: sigmoid scores s in fp32; experts chosen by the top-k of
 * s + e_score_correction_bias (lowest id wins a tie); mixing weights from
 * the UNBIASED s, renormalised (+1e-20) and scaled by routed_scaling_factor
 * (docs/ARCHITECTURE.md, "Numerics"). For a chunk, each distinct expert is fetched once and run on
 * all the chunk's tokens routed to it; every token still sums its experts in
 * ascending expert id, so a chunk equals token-by-token exactly. */
#include <assert.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "forward.h"
#include "ops.h"

/* Elements of the GLU activation below which it stays on the calling
 * thread (waking the team costs more), and the granule of its split: a
 * multiple of every vector width, so each thread's piece starts as the
 * whole array does and the vector loop takes the same elements. */
#define GLU_PARALLEL_MIN_ELEMS ((int64_t)1 << 16)
#define GLU_SPLIT_ELEMS 64

/* gate[i] = act(gate[i], up[i]) for i < n, act = SiTU-GLU or SiLU-GLU: an
 * element's value depends on that element alone, so the split over threads
 * (a prompt chunk's shared and dense MLPs, n = T x inter) changes no bit.
 * Inside a parallel region (one routed expert per thread) it stays on the
 * calling thread. */
static void glu_activate(const k3_config *c, float *gate, const float *up, int64_t n)
{
    const int threads = n >= GLU_PARALLEL_MIN_ELEMS && !omp_in_parallel() ? omp_get_max_threads() : 1;
    const int64_t granules = (n + GLU_SPLIT_ELEMS - 1) / GLU_SPLIT_ELEMS;
    #pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int part = 0; part < threads; part++) {
        const int64_t begin = granules * part / threads * GLU_SPLIT_ELEMS;
        int64_t end = granules * (part + 1) / threads * GLU_SPLIT_ELEMS;
        if (end > n) end = n;
        if (c->use_situ)
            k3_situ_glu(gate + begin, up + begin, end - begin, c->situ_beta, c->situ_linear_beta);
        else
            for (int64_t i = begin; i < end; i++)
                gate[i] = k3_silu(gate[i]) * up[i];
    }
}

/* out[t] = down(act(gate x_t, up x_t)) for t < T, act = SiLU-GLU or SiTU-GLU;
 * gate_buf/up_buf hold T x inter floats. */
static void glu_mlp_into(const k3_config *c, float *gate_buf, float *up_buf, const k3_mlp_weights *w,
                         const float *x, float *out, int T)
{
    const int64_t inter = w->gate.rows;
    const k3_matvec_job gate_up[2] = {{gate_buf, &w->gate, x}, {up_buf, &w->up, x}};
    k3_matmul_group(gate_up, 2, T);
    glu_activate(c, gate_buf, up_buf, (int64_t)T * inter);
    k3_matmul(out, &w->down, gate_buf, T);
}

static void glu_mlp(const k3_config *c, k3_scratch *sc, const k3_mlp_weights *w, const float *x, float *out, int T)
{
    glu_mlp_into(c, sc->inter_gate, sc->inter_up, w, x, out, T);
}

/* One routed expert over the chunk's tokens that chose it: gather their
 * inputs, run the MLP, put each output in its (token, choice) row. */
static void run_expert(const k3_config *c, k3_expert_work *wk, const k3_mlp_weights *ew, int e, int T, int K,
                       const int *topk, const float *expert_x, int Din, float *results)
{
    int n = 0;
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++)
            if (topk[(size_t)t * K + k] == e) {
                wk->rows[n] = t * K + k;
                memcpy(wk->gathered + (size_t)n * Din, expert_x + (size_t)t * Din, (size_t)Din * sizeof(float));
                n++;
            }
    glu_mlp_into(c, wk->inter_gate, wk->inter_up, ew, wk->gathered, wk->out, n);
    for (int i = 0; i < n; i++)
        memcpy(results + (size_t)wk->rows[i] * Din, wk->out + (size_t)i * Din, (size_t)Din * sizeof(float));
}

/* Choose top_k experts for one token; writes ids (ascending) and weights.
 * The router's logits are turned into their sigmoids in place (each once:
 * the selection scans every expert top_k times); taken experts are marked
 * in a bitmap. The scores, the scan order and the tie rule are the
 * former repeated scan's, so the choice and the weights are the same bits. */
static void route_token(const k3_config *c, float *logits, const float *bias, int *ids, float *weights)
{
    enum { MAX_EXPERT_WORDS = 1024 };   /* the config loader caps experts at 65536 */
    uint64_t taken[MAX_EXPERT_WORDS];
    const int E = c->n_experts;
    memset(taken, 0, (size_t)(E + 63) / 64 * sizeof *taken);
    float *prob = logits;
    for (int e = 0; e < E; e++) prob[e] = k3_sigmoid(logits[e]);
    int chosen = 0;
    /* selection by score + bias, ties to the lower id: repeated max scan (k is small) */
    for (int k = 0; k < c->top_k; k++) {
        int best = -1;
        float best_score = 0.0f;
        for (int e = 0; e < E; e++) {
            if (taken[e / 64] >> (e % 64) & 1) continue;
            float sc = prob[e] + bias[e];
            if (best < 0 || sc > best_score) { best = e; best_score = sc; }
        }
        taken[best / 64] |= (uint64_t)1 << (best % 64);
        ids[chosen++] = best;
    }
    /* ascending ids: a fixed summation order independent of chunking */
    for (int i = 1; i < chosen; i++)
        for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) { int t = ids[j]; ids[j] = ids[j - 1]; ids[j - 1] = t; }
    double sum = 0.0;
    for (int k = 0; k < chosen; k++) { weights[k] = prob[ids[k]]; sum += weights[k]; }
    for (int k = 0; k < chosen; k++) {
        float wk = weights[k];
        /* K3's gate renormalises only for top_k > 1 (docs/MODEL.md, "Latent MoE and SiTU") */
        if (c->moe_renormalize && (!c->is_k3 || c->top_k > 1)) wk = (float)(wk / (sum + 1e-20));
        weights[k] = wk * c->routed_scaling;
    }
}

/* The distinct experts the chunk's tokens chose, ascending: each is fetched
 * once for all its tokens. Returns how many. */
static int distinct_experts(const k3_config *c, const int *topk, int T, int *distinct)
{
    int n = 0;
    for (int e = 0; e < c->n_experts; e++) {
        int used = 0;
        for (int i = 0; i < T * c->top_k && !used; i++) used = topk[i] == e;
        if (used) distinct[n++] = e;
    }
    return n;
}

static void prefetch_next_layer(k3_session *s, int layer);

/* Move the claimed experts whose bytes are in memory to the front of
 * todo[0..claimed) (their order otherwise kept); returns how many. A
 * prefetched expert still being read may sit among the resident ones. */
static int ready_first(k3_weights *wp, int layer, int *todo, int claimed)
{
    int ready = 0;
    for (int j = 0; j < claimed; j++)
        if (k3_weights_expert_ready(wp, layer, todo[j])) {
            const int e = todo[j];
            memmove(todo + ready + 1, todo + ready, (size_t)(j - ready) * sizeof *todo);
            todo[ready++] = e;
        }
    return ready;
}

/* The next of todo[from..claimed) to run: the first whose read has
 * arrived, else the first (its read went out first). It is swapped to
 * todo[from]. */
static void next_arrived(k3_weights *wp, int layer, int *todo, int from, int claimed)
{
    int pick = from;
    for (int j = from; j < claimed; j++)
        if (k3_weights_expert_ready(wp, layer, todo[j])) { pick = j; break; }
    const int e = todo[pick];
    todo[pick] = todo[from];
    todo[from] = e;
}

/* Job j of a wave of n_jobs jobs, side_chunks of them pieces of a side
 * matvec spread evenly between the experts: sets *chunk to the piece's
 * index and returns -1, or returns the expert's index in the wave. */
static int wave_job(int j, int n_jobs, int side_chunks, int *chunk)
{
    const int before = (int)((int64_t)j * side_chunks / n_jobs);   /* pieces ahead of job j */
    if ((int)((int64_t)(j + 1) * side_chunks / n_jobs) > before) {
        *chunk = before;
        return -1;
    }
    return j - before;
}

/* The wave scheduling of the routed experts: the weight store claims as many
 * experts as its cache holds at once (resident ones first, the rest read
 * meanwhile); those already in memory run one per thread (an expert's
 * kernels single-threaded give the same bits as multi-threaded; a prompt
 * chunk waits for its whole wave first), the rest with all threads as their
 * reads arrive, whichever arrives first. Outputs land in per-(token,
 * choice) rows of sc->expert_results, so the order experts run in changes
 * no sum. Decoding, the next layer's guessed experts are queued behind this
 * layer's misses (--prefetch).
 *
 * side (decode, may be NULL): a matvec that does not depend on the routed
 * experts (the shared experts' down projection). In the first parallel
 * wave its rows run as pieces between the experts, so one thread streams
 * its bf16 rows while the other decodes MXFP4 (the q8 expert kernel is
 * bound by its instructions, the bf16 one by memory; their mix uses both),
 * and it costs no parallel region of its own; *side_done then says so.
 * If no parallel wave took it, it runs whole before the first miss is
 * waited for, while the reads arrive. */
static int run_routed_experts(k3_session *s, int layer, const float *expert_x, int Din, int T,
                              const k3_matvec_job *side, int *side_done, k3_error *err)
{
    const k3_config *c = &s->m->cfg;
    k3_scratch *sc = &s->sc;
    const int K = c->top_k;
    k3_weights *wp = s->m->weights;
    int *todo = sc->distinct, remaining = distinct_experts(c, sc->topk, T, sc->distinct), first_wave = 1;
    while (remaining > 0) {
        int claimed = k3_weights_claim_experts(wp, layer, todo, remaining, first_wave, err);
        if (claimed < 0) return -1;
        assert(claimed >= 1 && claimed <= remaining);
        /* the guess for the next layer, once this layer's reads are queued
         * (all of them: a later wave would evict the guesses) */
        if (T == 1 && first_wave && claimed == remaining) prefetch_next_layer(s, layer);
        first_wave = 0;
        int ready = T > 1 ? claimed : ready_first(wp, layer, todo, claimed);
        /* one expert per thread when the wave's work (every routed token's
         * three matrices, at most) pays for waking the team */
        if (sc->n_workers > 1 && ready > 1 && (int64_t)T * K * 3 * Din * c->moe_inter >= K3_PARALLEL_MIN_MACS) {
            for (int j = 0; j < ready; j++)
                if (k3_weights_acquire_expert(wp, layer, todo[j], &sc->wave[j], err)) {
                    for (int r = 0; r < claimed; r++) k3_weights_release_expert(wp, layer, todo[r]);
                    return -1;
                }
            /* the side matvec in pieces of 4-row quads, about half an expert's three matrices each */
            const int side_chunks = side && T == 1 && !*side_done ? (ready + 1) / 2 : 0;
            const int n_jobs = ready + side_chunks;
            const int64_t side_quads = side_chunks ? (side->W->rows + 3) / 4 : 0;
            #pragma omp parallel for schedule(dynamic, 1) num_threads(sc->n_workers)
            for (int j = 0; j < n_jobs; j++) {
                int chunk = 0, e = wave_job(j, n_jobs, side_chunks, &chunk);
                if (e >= 0) {
                    run_expert(c, &sc->workers[omp_get_thread_num()], &sc->wave[e], todo[e], T, K, sc->topk,
                               expert_x, Din, sc->expert_results);
                } else {
                    int64_t begin = side_quads * chunk / side_chunks * 4, end = side_quads * (chunk + 1) / side_chunks * 4;
                    k3_matvec_rows(side->y, side->W, side->x, begin, end < side->W->rows ? end : side->W->rows);
                }
            }
            if (side_chunks) *side_done = 1;
            for (int j = 0; j < ready; j++) k3_weights_release_expert(wp, layer, todo[j]);
        } else {
            ready = 0;
        }
        for (int j = ready; j < claimed; j++) {
            if (T == 1 && side && !*side_done && !k3_weights_expert_ready(wp, layer, todo[j])) {
                k3_matvec(side->y, side->W, side->x);   /* compute while the reads arrive */
                *side_done = 1;
            }
            if (T == 1) next_arrived(wp, layer, todo, j, claimed);
            k3_mlp_weights ew;
            if (k3_weights_acquire_expert(wp, layer, todo[j], &ew, err)) {
                for (int r = j; r < claimed; r++) k3_weights_release_expert(wp, layer, todo[r]);
                return -1;
            }
            run_expert(c, &sc->workers[0], &ew, todo[j], T, K, sc->topk, expert_x, Din, sc->expert_results);
            k3_weights_release_expert(wp, layer, todo[j]);
        }
        todo += claimed;
        remaining -= claimed;
    }
    return 0;
}

/* Router lookahead (decode): the next layer's router on this layer's FFN
 * input guesses its experts; they are read behind this layer's misses,
 * while this layer finishes and the next one's attention runs (--prefetch;
 * the guesses' reads yield to every needed read, io.h). */
static void prefetch_next_layer(k3_session *s, int layer)
{
    const k3_config *c = &s->m->cfg;
    k3_scratch *sc = &s->sc;
    if (layer + 1 >= c->n_layers || !c->is_moe[layer + 1]) return;
    if (!k3_weights_prefetch_wanted(s->m->weights)) return;   /* the guess would be thrown away */
    const k3_layer_weights *next = k3_weights_peek_layer(s->m->weights, layer + 1);
    if (!next) return;
    /* a guess of top_k ids on the stack: real models route 8 (Kimi Linear)
     * or 16 (K3) experts per token; a config above 256 skips the guess */
    enum { MAX_GUESS = 256 };
    int guess[MAX_GUESS];
    float guess_w[MAX_GUESS];
    if (c->top_k > MAX_GUESS) return;
    k3_matvec(sc->router, &next->router, sc->xn);
    route_token(c, sc->router, next->router_bias, guess, guess_w);
    k3_weights_prefetch_experts(s->m->weights, layer + 1, guess, c->top_k);
}

/* Operations (tokens x experts x top_k for routing, tokens x top_k x
 * width for the weighted sums) below which they stay on the calling
 * thread: a parallel region costs a few microseconds on a quiet machine
 * and, on a loaded one, a wait for whichever thread was preempted. */
#define TOKENS_PARALLEL_MIN_OPS ((int64_t)1 << 18)

/* Each token's top_k experts and weights into topk, topw ([T][k]) from
 * the router's logits in sc->router; the tokens are independent, so they
 * are routed in parallel. */
static void route_logits(k3_session *s, const k3_layer_weights *lw, int T, int *topk, float *topw)
{
    const k3_config *c = &s->m->cfg;
    k3_scratch *sc = &s->sc;
    const int K = c->top_k;
    #pragma omp parallel for schedule(static) num_threads(s->m->n_threads) \
        if ((int64_t)T * c->n_experts * K >= TOKENS_PARALLEL_MIN_OPS)
    for (int t = 0; t < T; t++)
        route_token(c, sc->router + (size_t)t * c->n_experts, lw->router_bias, topk + (size_t)t * K,
                    topw + (size_t)t * K);
}

/* The router over the chunk's T tokens (sc->xn), then route_logits. */
static void route_chunk(k3_session *s, const k3_layer_weights *lw, int T, int *topk, float *topw)
{
    k3_matmul(s->sc.router, &lw->router, s->sc.xn, T);
    route_logits(s, lw, T, topk, topw);
}

/* How far the shared experts of a chunk have run before finish_chunk. */
enum shared_stage {
    SHARED_NOT_RUN,      /* nothing yet */
    SHARED_GATE_UP,      /* gate and up in sc->inter_gate, sc->inter_up */
    SHARED_ACTIVATED,    /* and the activation in sc->inter_gate */
    SHARED_DONE          /* and down-projected into sc->expert_out */
};

/* After the routed experts: the latent norm and up-projection of their sum
 * acc (K3; else acc is sc->out already), then the shared experts on
 * sc->xn added to sc->out; `shared` says how far they have run already
 * (k3_ffn_block runs the gate and up in the router's group, and in decode
 * the down projection among the routed experts). The up-projection and the
 * shared down projection run as one group: one parallel region. */
static void finish_chunk(k3_session *s, const k3_layer_weights *lw, float *acc, int T, enum shared_stage shared)
{
    const k3_config *c = &s->m->cfg;
    k3_scratch *sc = &s->sc;
    const int D = c->hidden, Din = c->latent_dim ? c->latent_dim : D;
    k3_matvec_job jobs[2];
    int n_jobs = 0;
    if (c->latent_dim) {                  /* norm of the aggregate, then back to full width */
        if (lw->latent_norm)
            for (int t = 0; t < T; t++)
                k3_rmsnorm(acc + (size_t)t * Din, acc + (size_t)t * Din, lw->latent_norm, Din, c->rms_eps);
        jobs[n_jobs++] = (k3_matvec_job){sc->out, &lw->latent_up, acc};
    }
    if (lw->has_shared && shared != SHARED_DONE) {   /* shared experts: full width, unweighted */
        const int64_t inter = lw->shared.gate.rows;
        if (shared == SHARED_NOT_RUN) {
            const k3_matvec_job gate_up[2] = {{sc->inter_gate, &lw->shared.gate, sc->xn},
                                              {sc->inter_up, &lw->shared.up, sc->xn}};
            k3_matmul_group(gate_up, 2, T);
        }
        if (shared != SHARED_ACTIVATED)
            glu_activate(c, sc->inter_gate, sc->inter_up, (int64_t)T * inter);
        jobs[n_jobs++] = (k3_matvec_job){sc->expert_out, &lw->shared.down, sc->inter_gate};
    }
    k3_matmul_group(jobs, n_jobs, T);
    if (lw->has_shared)
        for (int t = 0; t < T; t++)
            k3_axpy_f32(sc->out + (size_t)t * D, 1.0f, sc->expert_out + (size_t)t * D, D);
}

/* The FFN block of one layer over a chunk of T tokens: the dense SwiGLU MLP,
 * or route -> routed experts (latent for K3) -> weighted sum in ascending
 * expert id -> latent norm and up-projection -> plus the shared experts. */
int k3_ffn_block(k3_session *s, int layer, const k3_layer_weights *lw, int T, k3_error *err)
{
    const k3_config *c = &s->m->cfg;
    k3_scratch *sc = &s->sc;
    const int D = c->hidden, K = c->top_k;
    if (!c->is_moe[layer]) {
        glu_mlp(c, sc, &lw->dense, sc->xn, sc->out, T);
        return 0;
    }
    /* Everything that reads the FFN input sc->xn in one group: the router,
     * the latent down-projection (K3: routed experts read the latent, else
     * the hidden state itself), the shared experts' gate and up. */
    const int Din = c->latent_dim ? c->latent_dim : D;
    const float *expert_x = sc->xn;
    float *acc = sc->out;
    k3_matvec_job jobs[4];
    int n_jobs = 0;
    jobs[n_jobs++] = (k3_matvec_job){sc->router, &lw->router, sc->xn};
    if (c->latent_dim) {
        jobs[n_jobs++] = (k3_matvec_job){sc->latent_in, &lw->latent_down, sc->xn};
        expert_x = sc->latent_in;
        acc = sc->latent_acc;
    }
    if (lw->has_shared) {
        jobs[n_jobs++] = (k3_matvec_job){sc->inter_gate, &lw->shared.gate, sc->xn};
        jobs[n_jobs++] = (k3_matvec_job){sc->inter_up, &lw->shared.up, sc->xn};
    }
    k3_matmul_group(jobs, n_jobs, T);
    route_logits(s, lw, T, sc->topk, sc->topw);
    /* decode: the shared down projection goes among the routed experts */
    int shared_done = 0;
    const k3_matvec_job shared_down = {sc->expert_out, &lw->shared.down, sc->inter_gate};
    if (lw->has_shared && T == 1)
        glu_activate(c, sc->inter_gate, sc->inter_up, lw->shared.gate.rows);
    if (run_routed_experts(s, layer, expert_x, Din, T, lw->has_shared && T == 1 ? &shared_down : NULL, &shared_done,
                           err))
        return -1;
    memset(acc, 0, (size_t)T * Din * sizeof(float));
    #pragma omp parallel for schedule(static) num_threads(s->m->n_threads) \
        if ((int64_t)T * K * Din >= TOKENS_PARALLEL_MIN_OPS)
    for (int t = 0; t < T; t++)   /* each token its own sum, its experts in ascending id */
        for (int k = 0; k < K; k++)
            k3_axpy_f32(acc + (size_t)t * Din, sc->topw[(size_t)t * K + k],
                        sc->expert_results + ((size_t)t * K + k) * Din, Din);
    finish_chunk(s, lw, acc, T, shared_done ? SHARED_DONE : T == 1 ? SHARED_ACTIVATED : SHARED_GATE_UP);
    return 0;
}

/* Span step 1, for the chunk of T tokens at span row first (its FFN input
 * normalised in sc->xn): keep that input, route it, and for K3 project it
 * to the latent the routed experts read. */
void k3_ffn_span_route(k3_session *s, const k3_layer_weights *lw, int first, int T)
{
    const k3_config *c = &s->m->cfg;
    k3_scratch *sc = &s->sc;
    const int D = c->hidden, K = c->top_k;
    memcpy(sc->span_xn + (size_t)first * D, sc->xn, (size_t)T * D * sizeof(float));
    route_chunk(s, lw, T, sc->span_topk + (size_t)first * K, sc->span_topw + (size_t)first * K);
    if (c->latent_dim) k3_matmul(sc->span_x + (size_t)first * c->latent_dim, &lw->latent_down, sc->xn, T);
}

/* Gather into wk the span rows that chose expert e, skipping the first
 * `skip` of them, at most max_rows; returns how many. */
static int gather_span_rows(const k3_session *s, k3_expert_work *wk, int e, int n, int skip, int max_rows)
{
    const k3_config *c = &s->m->cfg;
    const k3_scratch *sc = &s->sc;
    const int K = c->top_k, Din = c->latent_dim ? c->latent_dim : c->hidden;
    const float *x = sc->span_x ? sc->span_x : sc->span_xn;
    int rows = 0;
    for (int t = 0; t < n && rows < max_rows; t++)
        for (int k = 0; k < K; k++)
            if (sc->span_topk[(size_t)t * K + k] == e && skip-- <= 0) {
                wk->rows[rows] = t * K + k;
                memcpy(wk->gathered + (size_t)rows * Din, x + (size_t)t * Din, (size_t)Din * sizeof(float));
                rows++;
            }
    return rows;
}

/* The window's claimed experts (ascending, weights in sc->wave) over the
 * span: cut into jobs of at most a chunk of one expert's rows (a worker's
 * buffers hold a chunk; a matmul row does not depend on the others), in
 * ascending expert order. A round runs one job per worker in parallel
 * (single-threaded kernels give the same bits), then adds each job's output
 * rows, in job order, with their tokens' weights to the tokens' sums: each
 * token still takes its experts in ascending id. */
static void run_window_span(k3_session *s, const int *experts, int n_experts, int n)
{
    const k3_config *c = &s->m->cfg;
    k3_scratch *sc = &s->sc;
    const int K = c->top_k, Din = c->latent_dim ? c->latent_dim : c->hidden, tile = sc->chunk_tokens;
    int job_expert[K3_MAX_THREADS + 1], job_skip[K3_MAX_THREADS + 1], job_rows[K3_MAX_THREADS + 1];
    int next = 0, next_skip = 0;   /* the next job: experts[next], after next_skip of its rows */
    while (next < n_experts) {
        int n_jobs = 0;
        while (n_jobs < sc->n_workers && next < n_experts) {
            job_expert[n_jobs] = next;
            job_skip[n_jobs++] = next_skip;
            int total = 0;   /* rows of this expert */
            for (int i = 0; i < n * K; i++) total += sc->span_topk[i] == experts[next];
            next_skip += tile;
            if (next_skip >= total) { next++; next_skip = 0; }
        }
        #pragma omp parallel for schedule(dynamic, 1) num_threads(n_jobs) if (n_jobs > 1)
        for (int w = 0; w < n_jobs; w++) {
            k3_expert_work *wk = &sc->workers[w];
            const int e = experts[job_expert[w]];
            job_rows[w] = gather_span_rows(s, wk, e, n, job_skip[w], tile);
            if (job_rows[w])
                glu_mlp_into(c, wk->inter_gate, wk->inter_up, &sc->wave[job_expert[w]], wk->gathered, wk->out,
                             job_rows[w]);
        }
        for (int w = 0; w < n_jobs; w++) {
            const k3_expert_work *wk = &sc->workers[w];
            for (int i = 0; i < job_rows[w]; i++) {
                const int row = wk->rows[i];
                k3_axpy_f32(sc->span_acc + (size_t)(row / K) * Din, sc->span_topw[row], wk->out + (size_t)i * Din,
                            Din);
            }
        }
    }
}

static int by_id(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Span step 2: every distinct expert of the span's n tokens, read once and
 * run on all its tokens. Each token's sum starts at zero and takes its
 * experts in ascending id, as in k3_ffn_block; so the experts are claimed a
 * cache's worth at a time from the ascending list (all of such a window
 * are claimed: nothing else is pinned meanwhile), each window sorted and
 * run in ascending order (run_window_span). */
int k3_ffn_span_experts(k3_session *s, int layer, int n, k3_error *err)
{
    const k3_config *c = &s->m->cfg;
    k3_scratch *sc = &s->sc;
    k3_weights *wp = s->m->weights;
    const int Din = c->latent_dim ? c->latent_dim : c->hidden;
    const int window = k3_weights_expert_slots(wp);
    memset(sc->span_acc, 0, (size_t)n * Din * sizeof(float));
    int *todo = sc->distinct, remaining = distinct_experts(c, sc->span_topk, n, sc->distinct);
    while (remaining > 0) {
        const int want = remaining < window ? remaining : window;
        int claimed = k3_weights_claim_experts(wp, layer, todo, want, 1, err);
        if (claimed < 0) return -1;
        if (claimed < want) {
            for (int r = 0; r < claimed; r++) k3_weights_release_expert(wp, layer, todo[r]);
            return k3_err(err, "internal: %d of %d experts of a span claimed", claimed, want);
        }
        qsort(todo, (size_t)claimed, sizeof *todo, by_id);
        for (int j = 0; j < claimed; j++)
            if (k3_weights_acquire_expert(wp, layer, todo[j], &sc->wave[j], err)) {
                for (int r = 0; r < claimed; r++) k3_weights_release_expert(wp, layer, todo[r]);
                return -1;
            }
        run_window_span(s, todo, claimed, n);
        for (int j = 0; j < claimed; j++) k3_weights_release_expert(wp, layer, todo[j]);
        todo += claimed;
        remaining -= claimed;
    }
    return 0;
}

/* Span step 3, for the chunk of T tokens at span row first: its routed sum
 * into sc->out (through the latent up-projection for K3), then the shared
 * experts on its kept FFN input. */
void k3_ffn_span_finish(k3_session *s, const k3_layer_weights *lw, int first, int T)
{
    const k3_config *c = &s->m->cfg;
    k3_scratch *sc = &s->sc;
    const int D = c->hidden, Din = c->latent_dim ? c->latent_dim : D;
    float *acc = sc->span_acc + (size_t)first * Din;
    memcpy(sc->xn, sc->span_xn + (size_t)first * D, (size_t)T * D * sizeof(float));
    if (!c->latent_dim) {
        memcpy(sc->out, acc, (size_t)T * D * sizeof(float));
        acc = sc->out;
    }
    finish_chunk(s, lw, acc, T, SHARED_NOT_RUN);
}
