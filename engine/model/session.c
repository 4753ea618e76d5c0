/* session.c - opening a model and running conversations on it (k3.h).
 *
 * A session owns all per-conversation state: KDA conv history and recurrent
 * matrices, the MLA latent cache sized for max_tokens, the token history and
 * the logits after the last token, plus scratch for one prompt chunk. */
#include <assert.h>
#include <malloc.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "k3_chat_format.h"
#include "cpu_limit.h"
#include "file_read.h"
#include "huge_pages.h"
#include "forward.h"
#include "weights.h"
#include "gguf_checkpoint.h"
#include "plan_speeds.h"
#include "stats.h"
#include "k3_util.h"

/* Threads a front end starts beside the engine's (the chat's engine thread
 * and its gauge poller, or the server's worker), kept free when a pids limit
 * leaves room for few. */
#define FRONT_END_THREADS 2

k3_model *k3_model_open(const char *dir, const k3_options *opt, k3_error *err)
{
    char path[4096];
    k3_model *m = calloc(1, sizeof *m);
    if (!m) { k3_err(err, "out of memory"); return NULL; }
    if (access(dir, F_OK) != 0) {
        k3_err(err, "%s: no such model directory", dir);
        free(m);
        return NULL;
    }
    uint64_t config_hash;
    if (k3_model_config_load(dir, &m->cfg, &config_hash, err)) { free(m); return NULL; }
    char folder[3800];                    /* where tiktoken.model sits (a .gguf's folder) */
    gguf_model_folder(dir, folder, sizeof folder);
    /* the thread count lives in the model: every parallel region of an
     * evaluation asks for it (num_threads, or the caller's setting, which
     * k3_session_eval makes equal to it), whatever thread evaluates */
    if (opt && opt->n_threads > 0) {
        m->n_threads = opt->n_threads;
        snprintf(m->threads_why, sizeof m->threads_why, "given (--threads or OMP_NUM_THREADS)");
    } else {
        m->n_threads = k3_default_threads(m->threads_why, sizeof m->threads_why);
    }
    if (m->n_threads > K3_MAX_THREADS) m->n_threads = K3_MAX_THREADS;
    omp_set_num_threads(m->n_threads);
    /* the MXFP4 activation path is the kernels' process-wide setting: the
     * model opened last decides it (one model per process in every command) */
    k3_kernels_set_activations_q8(opt && opt->activations_q8);
    m->stats.n_layers = (uint32_t)m->cfg.n_layers;
    m->layer_slot = calloc((size_t)m->cfg.n_layers, sizeof *m->layer_slot);
    if (!m->layer_slot) { k3_err(err, "out of memory"); free(m); return NULL; }
    int n_kda = 0, n_mla = 0;
    for (int l = 0; l < m->cfg.n_layers; l++)
        m->layer_slot[l] = m->cfg.attn_kind[l] == K3_ATTN_KDA ? n_kda++ : n_mla++;
    /* Tokenizer first (its memory counts in the plan); optional unless asked
     * for (eval works on ids alone). */
    snprintf(path, sizeof path, "%s/tiktoken.model", folder);
    if (!(opt && opt->skip_tokenizer) && (k3_tokenizer_model_has(dir) || (opt && opt->need_tokenizer))) {
        /* a tiktoken.model beside a GGUF wins over the file's vocabulary
         * (as k3 tokenize does); else a GGUF's own, or a pack's tokenizer.gguf */
        m->tok = k3_tokenizer_load_model(dir, err);
        if (!m->tok) {
            k3_model_close(m);
            return NULL;
        }
        if (k3_tokenizer_n_vocab(m->tok) > m->cfg.vocab_size &&
            k3_tokenizer_n_vocab(m->tok) > k3_tokenizer_n_base(m->tok) + 258) {   /* added ids past the reserved 258 */
            k3_err(err, "%s/tokenizer_config.json: added token id %d is not below vocab_size %d in config.json",
                   folder, k3_tokenizer_n_vocab(m->tok) - 1, m->cfg.vocab_size);
            k3_model_close(m);
            return NULL;
        }
        if (k3_tokenizer_n_vocab(m->tok) < m->cfg.vocab_size - 2 ||
            k3_tokenizer_n_base(m->tok) > m->cfg.vocab_size) {
            k3_err(err, "%s: tokenizer has %d base tokens, which does not fit vocab_size %d in config.json",
                   path, k3_tokenizer_n_base(m->tok), m->cfg.vocab_size);
            k3_model_close(m);
            return NULL;
        }
    }
    m->ctx_tokens = opt && opt->ctx_tokens > 0 ? opt->ctx_tokens : K3_CTX_TOKENS_DEFAULT;
    m->budgeted = opt && opt->mem_bytes;
    m->huge_pages = !(opt && opt->no_huge_pages);
    /* the plan charges a session with the smallest chunk and picks the
     * chunk (planner.c); --chunk-tokens N fixes it */
    const int given_chunk = opt && opt->chunk_tokens > 0 ? opt->chunk_tokens : 0;
    m->chunk_tokens = given_chunk ? given_chunk : K3_CHUNK_TOKENS;
    if (m->chunk_tokens > m->ctx_tokens) m->chunk_tokens = m->ctx_tokens;
    m->tile_tokens = m->chunk_tokens;
    k3_provider_options po = {.mem_bytes = opt ? opt->mem_bytes : 0,
                              .io_direct = !(opt && opt->io_buffered),
                              .io_backend = opt && opt->io_uring ? 1 : 0,
                              .io_depth = opt && opt->io_depth ? opt->io_depth : K3_IO_DEPTH_DEFAULT,
                              .cache_policy = opt && opt->cache_lru ? 0 : 1,
                              .ctx_tokens = m->ctx_tokens,
                              .session_bytes = k3_session_bytes(m, m->ctx_tokens),
                              .trace_path = opt ? opt->trace_path : NULL,
                              .prefetch = !(opt && opt->no_prefetch),
                              .chunk_min = m->chunk_tokens,
                              .chunk_max = given_chunk ? m->chunk_tokens
                                           : m->ctx_tokens < K3_CHUNK_TOKENS_MAX ? m->ctx_tokens : K3_CHUNK_TOKENS_MAX,
                              .chunk_token_bytes = given_chunk ? 0
                                                   : k3_scratch_bytes_per_chunk_token(&m->cfg, m->n_threads,
                                                                                      m->ctx_tokens),
                              .span_token_bytes = given_chunk ? 0
                                                  : k3_scratch_bytes_per_span_token(&m->cfg, m->n_threads,
                                                                                    m->ctx_tokens),
                              .huge_pages = m->huge_pages};
    /* libgomp ends the process when it cannot start a thread of a parallel
     * region (a pids limit, RLIMIT_NPROC): ask first for the compute
     * threads, the readers and FRONT_END_THREADS, and give up compute
     * threads for what is missing (the readers start as many as they can:
     * io.c) */
    const int io_threads = po.io_backend ? 1 : po.io_depth;
    const int want = m->n_threads - 1 + io_threads + FRONT_END_THREADS;
    const int room = k3_threads_startable(want);
    if (room < want) {
        const int fits = room - io_threads - FRONT_END_THREADS + 1;
        const int n = fits < 1 ? 1 : fits < m->n_threads ? fits : m->n_threads;
        if (n < m->n_threads) {
            snprintf(m->threads_why, sizeof m->threads_why, "%d of %d: only %d more threads could start (a pids limit?)",
                     n, m->n_threads, room);
            m->n_threads = n;
            omp_set_num_threads(n);
        }
    }
    #pragma omp parallel num_threads(m->n_threads)
    { /* start the thread pool now so its stacks count in the plan */ }
    /* the speeds the plan weighs at: measured ones for these threads when
     * this machine has them (plan_speeds.c) */
    if (k3_plan_speeds_load(opt ? opt->rates_path : NULL, m->n_threads, dir, &m->cfg, &po.speeds, err)) {
        k3_model_close(m);
        return NULL;
    }
    m->weights = k3_weights_open(dir, &m->cfg, &po, &m->stats, err);
    if (!m->weights) { k3_model_close(m); return NULL; }
    const char *why = "";
    m->chunk_tokens = k3_weights_chunk_tokens(m->weights, &why);
    m->tile_tokens = k3_weights_tile_tokens(m->weights);
    snprintf(m->chunk_why, sizeof m->chunk_why, "%s", why);
    uint64_t content_hash;
    if (k3_weights_content_hash(m->weights, &content_hash, err)) { k3_model_close(m); return NULL; }
    snprintf(m->fingerprint, sizeof m->fingerprint, "%016llx",
             (unsigned long long)(config_hash ^ (content_hash * 31)));
    return m;
}

/* See k3.h. */
int k3_model_finish(k3_model *m, k3_error *err)
{
    return m && m->weights ? k3_weights_finish(m->weights, err) : 0;
}

void k3_model_close(k3_model *m)
{
    if (!m) return;
    k3_weights_close(m->weights);
    if (m->tok) k3_tokenizer_free(m->tok);
    free(m->layer_slot);
    free(m);
    malloc_trim(0);   /* hand freed heap back, so a model opened next is planned on a true RSS */
}

void k3_model_get_info(const k3_model *m, k3_model_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->model_type, sizeof out->model_type, "%s", m->cfg.model_type);
    out->vocab_size = m->cfg.vocab_size;
    out->hidden = m->cfg.hidden;
    out->n_layers = m->cfg.n_layers;
    out->n_kda_layers = k3_config_count_attn(&m->cfg, K3_ATTN_KDA);
    out->n_mla_layers = k3_config_count_attn(&m->cfg, K3_ATTN_MLA);
    out->n_experts = m->cfg.n_experts;
    out->top_k = m->cfg.top_k;
    out->bos_id = m->cfg.bos_id;
    out->weight_bytes = m->weight_bytes;
    out->random_weights = m->cfg.random_weights;
    snprintf(out->dtype, sizeof out->dtype, "%s", m->cfg.dtype);
    out->experts_mxfp4 = m->cfg.experts_mxfp4;
    out->ctx_tokens = m->ctx_tokens;
    snprintf(out->type_label, sizeof out->type_label, "%s", k3_weights_type_label(m->weights));
}

const char *k3_model_fingerprint(const k3_model *m) { return m->fingerprint; }
/* The statistics live in the model; the copying is stats.c's (base/). */
void k3_stats_read(const k3_model *m, k3_stats *out) { stats_copy(&m->stats, out); }

int k3_model_plan_json(const k3_model *m, char *buf, size_t len)
{
    int n = k3_plan_json(k3_weights_plan(m->weights), buf, len);
    /* the arenas' page size belongs to the plan too: the kernel's THP mode
     * and whether this model asked for huge pages; and the compute threads
     * with where their number comes from (threads_why has no quote or
     * backslash: cpu_limit.c writes it from numbers and a cgroup path) */
    if (n > 1 && (size_t)n < len && buf[n - 1] == '}')
        n = n - 1 + snprintf(buf + n - 1, len - (size_t)(n - 1),
                             ",\"huge_pages\":\"%s\",\"huge_pages_requested\":%s,\"threads\":%d,\"threads_why\":\"%s\"}",
                             k3_huge_pages_mode(), m->huge_pages ? "true" : "false", m->n_threads, m->threads_why);
    return n;
}

void k3_model_plan(const k3_model *m, k3_plan_info *out)
{
    const k3_plan *p = k3_weights_plan(m->weights);
    *out = (k3_plan_info){.budget_bytes = p->budget_bytes, .fixed_bytes = p->fixed_bytes,
                          .state_bytes = p->state_bytes, .min_budget_bytes = p->min_budget_bytes,
                          .ctx_tokens = p->ctx_tokens, .n_trunk = p->n_trunk, .n_pinned = p->n_pinned,
                          .pinned_bytes = p->pinned_bytes, .n_ring = p->n_ring,
                          .ring_slot_bytes = p->ring_slot_bytes, .n_expert_slots = p->n_expert_slots,
                          .n_experts_total = p->n_experts_total, .expert_slot_bytes = p->expert_slot_bytes,
                          .all_resident = p->all_resident, .resident_bytes = p->resident_bytes,
                          .disk_gbps = p->speeds.read_bytes_per_s / 1e9,
                          .trunk_matvec_gbps = p->speeds.trunk_matvec_bytes_per_s / 1e9,
                          .expert_matvec_gbps = p->speeds.expert_matvec_bytes_per_s / 1e9};
    snprintf(out->budget_source, sizeof out->budget_source, "%s", p->budget_source);
    snprintf(out->speeds_source, sizeof out->speeds_source, "%s", p->speeds.source);
}

void k3_model_wait_prefault(k3_model *m, uint64_t *bytes, double *seconds)
{
    k3_weights_wait_prefault(m->weights, bytes, seconds);
}

int k3_model_probe_device(k3_model *m, double seconds, k3_device_probe *out, k3_error *err)
{
    return k3_weights_probe_device(m->weights, seconds, out, err);
}

int k3_model_probe_trunk(k3_model *m, double seconds, k3_trunk_probe *out, k3_error *err)
{
    return k3_weights_probe_trunk(m->weights, seconds, out, err);
}

const k3_tokenizer *k3_model_tokenizer(const k3_model *m) { return m->tok; }

int k3_model_stop_ids(const k3_model *m, int *ids, int max_ids)
{
    int n = 0;
    static const char *const kimi_names[] = {"<|im_end|>", "[EOS]", "[EOT]"};
    static const char *const k3_names[] = {"<|end_of_msg|>", "<|close|>", "[EOS]", "[EOT]"};
    const char *const *names = m->cfg.is_k3 ? k3_names : kimi_names;
    size_t n_names = m->cfg.is_k3 ? 4 : 3;
    for (size_t i = 0; i < n_names && n < max_ids; i++) {
        int id = m->tok ? k3_tokenizer_special_id(m->tok, names[i]) : -1;
        if (id >= 0 && id < m->cfg.vocab_size) ids[n++] = id;
    }
    if (m->cfg.eos_id >= 0 && n < max_ids) {
        int dup = 0;
        for (int i = 0; i < n; i++) dup |= ids[i] == m->cfg.eos_id;
        if (!dup) ids[n++] = m->cfg.eos_id;
    }
    return n;
}

int *k3_model_render_chat(const k3_model *m, const k3_chat_msg *msgs, int n_msgs, int add_generation_prompt,
                          int *n_out, k3_error *err)
{
    if (!m->tok) {
        k3_err(err, "this model directory has no tokenizer (tiktoken.model)");
        return NULL;
    }
    int *ids = m->cfg.is_k3 ? k3_chat_render_xtml(m->tok, msgs, n_msgs, add_generation_prompt, n_out, err)
                            : k3_chat_render_kimi(m->tok, msgs, n_msgs, add_generation_prompt, n_out, err);
    return ids;
}

int *k3_model_render_chat_think(const k3_model *m, const k3_chat_msg *msgs, int n_msgs, int add_generation_prompt,
                                const char *effort, int *n_out, k3_error *err)
{
    if (!effort) return k3_model_render_chat(m, msgs, n_msgs, add_generation_prompt, n_out, err);
    if (!m->tok) {
        k3_err(err, "this model directory has no tokenizer (tiktoken.model)");
        return NULL;
    }
    if (!m->cfg.is_k3) {
        k3_err(err, "this model (kimi_linear) has no thinking mode: only Kimi K3 models think");
        return NULL;
    }
    return k3_chat_render_xtml_think(m->tok, msgs, n_msgs, add_generation_prompt, effort, n_out, err);
}

int k3_model_can_think(const k3_model *m) { return m->cfg.is_k3 && m->tok; }

int k3_model_chat_close_ids(const k3_model *m, int *ids, int max_ids, k3_error *err)
{
    if (!m->tok) return k3_err(err, "this model directory has no tokenizer (tiktoken.model)");
    if (m->cfg.is_k3) {
        return k3_chat_xtml_close_ids(m->tok, ids, max_ids, err);
    }
    int id = k3_tokenizer_special_id(m->tok, "<|im_end|>");
    if (id < 0 || max_ids < 1) return k3_err(err, "tokenizer_config.json has no <|im_end|> token");
    ids[0] = id;
    return 1;
}

/* Bytes one session of ctx tokens holds: states, MLA cache, scratch. */
size_t k3_session_bytes(k3_model *m, int ctx)
{
    const k3_config *c = &m->cfg;
    const size_t n_mla = (size_t)k3_config_count_attn(c, K3_ATTN_MLA);
    size_t bytes = (size_t)ctx * sizeof(int) + (size_t)c->vocab_size * sizeof(float);
    bytes += 2 * (k3_config_kda_conv_floats(c) + k3_config_kda_state_floats(c)) * sizeof(float);   /* + roll-back copy */
    bytes += n_mla * (size_t)ctx * k3_config_mla_entry_floats(c) * sizeof(float);
    bytes += k3_draft_bytes(c);   /* a draft pass's KDA inputs and logits (speculate.c) */
    return bytes + k3_scratch_bytes(c, m->n_threads, ctx, m->tile_tokens, m->chunk_tokens);
}

/* See k3.h. */
int k3_model_chunk_tokens(const k3_model *m, char *why, size_t why_len)
{
    if (why && why_len) snprintf(why, why_len, "%s", m->chunk_why);
    return m->chunk_tokens;
}

uint64_t k3_model_prefill_bytes_min(const k3_model *m) { return k3_weights_prefill_bytes_min(m->weights); }

void k3_model_huge_pages(const k3_model *m, const char **mode, int *requested, uint64_t *anon_huge_bytes)
{
    *mode = k3_huge_pages_mode();
    *requested = m->huge_pages;
    *anon_huge_bytes = k3_huge_pages_anon_bytes();
}

k3_session *k3_session_new(k3_model *m, int max_tokens, k3_error *err)
{
    const k3_config *c = &m->cfg;
    if (max_tokens <= 0) max_tokens = m->ctx_tokens;
    if (m->budgeted && max_tokens > m->ctx_tokens) {
        k3_err(err, "a context of %d tokens exceeds the %d planned in the memory budget (raise --ctx)",
               max_tokens, m->ctx_tokens);
        return NULL;
    }
    k3_session *s = calloc(1, sizeof *s);
    if (!s) { k3_err(err, "out of memory"); return NULL; }
    s->m = m;
    s->max_tokens = max_tokens;
    const size_t n_mla = (size_t)k3_config_count_attn(c, K3_ATTN_MLA);
    s->tokens = calloc((size_t)s->max_tokens, sizeof *s->tokens);
    s->kda_conv = calloc(k3_config_kda_conv_floats(c) + 1, sizeof(float));
    s->kda_state = calloc(k3_config_kda_state_floats(c) + 1, sizeof(float));
    s->kda_conv_saved = calloc(k3_config_kda_conv_floats(c) + 1, sizeof(float));
    s->kda_state_saved = calloc(k3_config_kda_state_floats(c) + 1, sizeof(float));
    const size_t mla_bytes = (n_mla * (size_t)s->max_tokens * k3_config_mla_entry_floats(c) + 1) * sizeof(float);
    s->mla_cache = k3_huge_alloc(mla_bytes, 64, m->huge_pages);
    if (s->mla_cache) memset(s->mla_cache, 0, mla_bytes);
    s->logits = calloc((size_t)c->vocab_size, sizeof(float));
    if (!s->tokens || !s->kda_conv || !s->kda_state || !s->kda_conv_saved || !s->kda_state_saved ||
        !s->mla_cache || !s->logits ||
        k3_scratch_alloc(&s->sc, c, m->n_threads, s->max_tokens, m->tile_tokens, m->chunk_tokens, m->huge_pages)) {
        k3_session_free(s);
        k3_err(err, "out of memory for a session of %d tokens", max_tokens);
        return NULL;
    }
    return s;
}

void k3_session_free(k3_session *s)
{
    if (!s) return;
    k3_scratch_free(&s->sc);
    k3_draft_free(s->draft);
    free(s->tokens);
    free(s->kda_conv);
    free(s->kda_state);
    free(s->kda_conv_saved);
    free(s->kda_state_saved);
    free(s->mla_cache);
    free(s->logits);
    free(s);
}

void k3_session_reset(k3_session *s)
{
    const k3_config *c = &s->m->cfg;
    memset(s->kda_conv, 0, k3_config_kda_conv_floats(c) * sizeof(float));
    memset(s->kda_state, 0, k3_config_kda_state_floats(c) * sizeof(float));
    s->n_tokens = 0;
    s->has_logits = 0;
}

k3_model *k3_session_model(const k3_session *s) { return s->m; }
int k3_session_n_tokens(const k3_session *s) { return s->n_tokens; }

void k3_session_set_interrupt(k3_session *s, volatile int *flag) { s->interrupt = flag; }
int k3_session_max_tokens(const k3_session *s) { return s->max_tokens; }

const float *k3_session_logits(const k3_session *s) { return s->has_logits ? s->logits : NULL; }

int k3_session_check_tokens(const k3_session *s, const int *ids, int n, k3_error *err)
{
    const int vocab = s->m->cfg.vocab_size;
    if (s->n_tokens + n > s->max_tokens)
        return k3_err(err, "context full: %d tokens already, %d more would exceed the limit of %d",
                      s->n_tokens, n, s->max_tokens);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return k3_err(err, "token id %d is outside the vocabulary (0..%d)", ids[i], vocab - 1);
    return 0;
}

int k3_session_eval(k3_session *s, const int *ids, int n, float *all_logits, k3_error *err)
{
    const int vocab = s->m->cfg.vocab_size;
    if (n <= 0) return 0;
    if (k3_session_check_tokens(s, ids, n, err)) return -1;
    /* this thread's parallel regions (the kernels') use the model's count */
    omp_set_num_threads(s->m->n_threads);
    k3_stats *st = &s->m->stats;
    const k3_phase phase = n > 1 ? K3_PHASE_PREFILL : K3_PHASE_DECODE;
    stats_set32(&st->phase, phase);
    stats_set32(&st->chunk_total, (uint32_t)n);
    stats_set32(&st->chunk_done, 0);
    int rc = 0;
    for (int done = 0; done < n && rc == 0;) {
        if (done > 0 && s->interrupt && __atomic_load_n(s->interrupt, __ATOMIC_RELAXED)) {   /* stop at a chunk boundary */
            rc = K3_EVAL_INTERRUPTED;
            break;
        }
        /* a pass: a span when there is one (no logits of every position) */
        const int chunk = s->sc.span_tokens && !all_logits ? s->sc.span_tokens : s->sc.chunk_tokens;
        int T = n - done < chunk ? n - done : chunk;
        k3_token_record rec = {.n_tokens = (uint32_t)T, .phase = phase};
        stats_step_start step_start;
        stats_step_begin(st, &step_start);
        rc = k3_forward_chunk(s, ids + done, T, all_logits ? all_logits + (size_t)done * vocab : NULL, err);
        if (rc == 0) {
            assert(s->n_tokens + T <= s->max_tokens);   /* k3_session_check_tokens made room */
            memcpy(s->tokens + s->n_tokens, ids + done, (size_t)T * sizeof *ids);
            s->n_tokens += T;
            done += T;
        }
        stats_step_record(st, &step_start, &rec);
        stats_set32(&st->chunk_done, (uint32_t)done);
        if (phase == K3_PHASE_PREFILL) {
            stats_add(&st->tokens_prefilled, (uint64_t)T);
            stats_add_ms(&st->prefill_ms, rec.ms);
        } else {
            stats_add(&st->tokens_decoded, (uint64_t)T);
            stats_add_ms(&st->decode_ms, rec.ms);
        }
    }
    stats_set32(&st->phase, K3_PHASE_IDLE);
    return rc;
}
