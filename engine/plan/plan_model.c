/* plan_model.c - what a model will cost on this machine, from its config
 * alone (k3 plan).
 *
 * The unit sizes come from the checkpoint when it is here (the weight
 * provider lays its units out with sizes_only, so they are the engine's own
 * bytes), else from config.json (shapes times the dtypes it names, MXFP4
 * pages for quantised experts). The memory plan is then k3_plan_make, the
 * planner the engine runs, with the same fixed claim (k3_plan_fixed_bytes).
 *
 * The time model, per decode token:
 *   reads   = unpinned trunk units + the head when unpinned + one embedding
 *             row (none when fully resident: the table is held) + (1 - hit
 *             rate) x top_k x MoE layers expert pages
 *   compute = on this machine, one layer of each kind and the head timed
 *             at the model's widths (plan_compute.c: the engine's kernels
 *             called as it calls them, the work between the matrices and
 *             the KDA states included), else every trunk unit, top_k
 *             experts per MoE layer and the head through the measured
 *             kernel rate of their format plus the KDA states' traffic;
 *             then the MLA cache's traffic at the measured f32 rate and
 *             K3's SiTU at its measured rate
 *   wait    = the expert misses' read time less what hides under the
 *             layer's expert compute: a layer's misses are known only once
 *             its router has run, and engine/model/moe.c computes the
 *             experts in memory while they are read, then each miss as its
 *             page arrives while the next ones are read
 *             (expert_wait_seconds: per layer, over the binomial count of
 *             its misses)
 *   decode  = max(reads' time, compute + wait): the trunk ring reads
 *             ahead under compute; expert misses do not.
 * The reads' time takes two speeds: the trunk units and the head (what the
 * ring streams: whole units, the same ones every token) at the trunk speed,
 * the expert pages and the embedding row (random reads) at the disk speed.
 * They differ: decode re-reads the same trunk units each token, which a
 * host's cache can serve many times faster than cold random pages
 * (k3_planner_probe_trunk measures the one, k3_planner_probe_disk the
 * other).
 * A prompt runs in chunks of the plan's chunk_tokens (chosen from the budget
 * by k3_plan_make, as in the engine; a span when it is run layer by layer):
 * each chunk reads the unpinned trunk once and each distinct expert once,
 * and computes every matrix with the chunk's tokens in one pass (the
 * measured 32-token matmul rate); a chunk waits for each wave of its
 * experts before computing them, so their reads add to its compute as a
 * decode token's misses do.
 * The hit rate is the cache policy replayed on a recorded routing trace, or
 * for uniform routing the LRU closed form (an expert survives while fewer
 * than `slots` distinct others were used since its last use). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <ctype.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "cpu_limit.h"
#include "expert_cache.h"
#include "forward.h"
#include "io.h"
#include "kernels.h"
#include "manifest.h"
#include "layer_weights.h"
#include "ops.h"
#include "plan_speeds.h"
#include "plan_compute.h"
#include "quant_matvec.h"
#include "planner.h"
#include "read_load.h"
#include "safetensors.h"
#include "weights.h"
#include "stats.h"
#include "k3_util.h"
#include "k3_plan.h"

struct k3_planner {
    k3_config cfg;
    char dir[4096];
    const char *sizes_from;
    int n_trunk;                  /* layers, then the head */
    uint64_t *trunk_bytes;
    double *trunk_params;         /* weights in each unit's matrices (for its format) */
    uint64_t expert_bytes;
    double expert_params;
    int n_experts_total, n_moe;
    uint64_t embed_buf_bytes, embed_row_bytes, embed_table_bytes;
    uint64_t session_bytes, process_bytes;
    uint64_t chunk_token_bytes;   /* scratch per prompt-chunk token beyond K3_CHUNK_TOKENS */
    uint64_t span_token_bytes;    /* scratch per token of a prompt span */
    int n_threads, ctx_tokens, cache_lru;
    uint64_t fixed_override;
    k3_cache_lookup *trace;
    int n_trace;
    long long trace_tokens;
    int trace_decode_only;        /* the trace has decode steps: count only those */
    int f16;                      /* 16-bit matrices are float16, not bfloat16 */
    k3_plan_format trunk_fmt, expert_fmt;   /* what the compute probe times */
    int formats_known;            /* set from the weights or from --trunk/--experts */
    int quant_asked;              /* --trunk/--experts: sizes from the config at those types */
    double *layer_s;              /* a token's matrix work per layer, then the head, timed at the
                                   * model's widths (k3_planner_probe_compute); NULL = from the rates */
    k3_compute_figures compute;   /* that probe's other figures */
    char probe_file[4096];        /* largest weight file, for the disk probe */
    uint64_t probe_file_bytes;
    k3_plan_speeds speeds;        /* the plan's weighing (k3_planner_load_speeds), as the engine's */
};


/* ---- kernel rates ------------------------------------------------------- */

/* Seconds per call of fn: the fastest of the calls made in min_s after a
 * warm-up. The fastest, because on a shared machine the other calls include
 * time the kernel spent descheduled, which is the neighbours' load, not the
 * kernel's rate. */
static double time_kernel(void (*fn)(void *), void *arg, double min_s)
{
    fn(arg);
    const uint64_t t0 = k3_now_ns();
    double best = 1e30;
    for (uint64_t t = t0; (t - t0) * 1e-9 < min_s;) {
        fn(arg);
        const uint64_t t1 = k3_now_ns();
        if ((t1 - t) * 1e-9 < best) best = (t1 - t) * 1e-9;
        t = t1;
    }
    return best;
}

typedef struct probe_arg { k3_weight w; float *x, *y; } probe_arg;
/* A decode token streams many different matrices once each: the matvec
 * rate is timed as one sweep over 64 MiB matrices at successive addresses
 * (the whole buffer), not one matrix called again and again, which the
 * caches and prefetchers favour (bf16, 2 threads: 34.6 GB/s on one 64 MiB
 * matrix against 29.2 GB/s streaming 2 GiB of 3072 x 3072 matrices, 13-16%
 * at 1 and 2 threads). The sweep is 256 MiB and at least twice the L3
 * (k3_l3_cache_bytes: 9 matrices under a 260 MiB L3), at most
 * PROBE_SWEEP_MAX matrices. */
#define PROBE_SWEEP_MIN 4
#define PROBE_SWEEP_MAX 32
typedef struct sweep_arg { probe_arg m[PROBE_SWEEP_MAX]; int n; } sweep_arg;
static void run_sweep(void *a)
{
    sweep_arg *p = a;
    for (int i = 0; i < p->n; i++) k3_matvec(p->m[i].y, &p->m[i].w, p->m[i].x);
}
typedef struct situ_arg { const float *g, *u; float *out; int n; } situ_arg;
/* The SiTU-GLU loop of engine/model/moe.c's MLPs, over n elements (into a
 * separate output, so the inputs stay the same call after call). */
static void run_situ(void *a)
{
    situ_arg *p = a;
    memcpy(p->out, p->g, (size_t)p->n * sizeof(float));
    k3_situ_glu(p->out, p->u, p->n, 4.0f, 25.0f);
}
static void run_matmul(void *a) { probe_arg *p = a; k3_matmul(p->y, &p->w, p->x, K3_CHUNK_TOKENS); }

/* Per format: matvec as a sweep over 64 MiB matrices (at least 256 MiB and
 * twice the last-level cache, as a model's weights are; fewer where memory
 * is short), matmul on the first of them, through the kernels the
 * forward pass calls. The bytes are 0x3C everywhere: a normal value in
 * every format, so no denormal slows a kernel down. */
int k3_kernel_rates_measure(int n_threads, k3_kernel_rates *out, k3_error *err)
{
    memset(out, 0, sizeof *out);
    if (n_threads <= 0) n_threads = k3_default_threads(NULL, 0);
    omp_set_num_threads(n_threads);
    out->n_threads = n_threads;
    const int64_t cols = 4096;
    /* the sweep takes at most a quarter of what this process may still hold
     * (a probe in a small container must not be what gets it killed), and
     * never less than one 64 MiB matrix */
    const size_t buf_bytes = 64u << 20;
    k3_mem_limit lim;
    k3_mem_limit_read(0, &lim);
    int n_sweep = (int)((2 * k3_l3_cache_bytes() + buf_bytes - 1) / buf_bytes);
    if (n_sweep < PROBE_SWEEP_MIN) n_sweep = PROBE_SWEEP_MIN;
    if (n_sweep > PROBE_SWEEP_MAX) n_sweep = PROBE_SWEEP_MAX;
    while (n_sweep > 1 && lim.avail_bytes && (uint64_t)n_sweep * buf_bytes > lim.avail_bytes / 4) n_sweep--;
    const size_t sweep_bytes = buf_bytes * (size_t)n_sweep;
    uint8_t *buf = aligned_alloc(64, sweep_bytes);
    float *x = malloc((size_t)cols * K3_CHUNK_TOKENS * sizeof *x);
    float *y = malloc((size_t)32768 * K3_CHUNK_TOKENS * sizeof *y);
    float *scale = malloc((size_t)(32768 / 128 + 1) * (cols / 128) * sizeof *scale);
    if (!buf || !x || !y || !scale) {
        free(buf); free(x); free(y); free(scale);
        return k3_err(err, "out of memory for the kernel probe");
    }
    memset(buf, 0x3C, sweep_bytes);
    for (int64_t i = 0; i < cols * K3_CHUNK_TOKENS; i++) x[i] = 1.0f - (float)(i % 7) * 0.1f;
    for (int64_t i = 0; i < (32768 / 128 + 1) * (cols / 128); i++) scale[i] = 0.5f;
    static const k3_dtype dt[K3_RATE_N] = {K3_DT_F32, K3_DT_BF16, K3_DT_F16, K3_DT_F8_E4M3, K3_DT_MXFP4};
    static const double bytes_per_weight[K3_RATE_N] = {4, 2, 2, 1, 0.53125};
    for (int f = 0; f < K3_RATE_N; f++) {
        int64_t rows = (int64_t)(buf_bytes / (bytes_per_weight[f] * cols));
        if (rows > 32768) rows = 32768;
        probe_arg a = {.w = {.dtype = dt[f], .rows = rows, .cols = cols, .data = buf}, .x = x, .y = y};
        if (dt[f] == K3_DT_F8_E4M3) a.w.block_scale = scale;
        if (dt[f] == K3_DT_MXFP4) a.w.mx_scale = buf + (size_t)rows * cols / 2;
        const double weight_bytes = bytes_per_weight[f] * rows * cols;
        sweep_arg sweep = {.n = n_sweep};
        for (int i = 0; i < n_sweep; i++) {      /* matrix i: matrix 0 moved i buffers on */
            sweep.m[i] = a;
            sweep.m[i].w.data = buf + (size_t)i * buf_bytes;
            if (a.w.mx_scale) sweep.m[i].w.mx_scale = a.w.mx_scale + (size_t)i * buf_bytes;
        }
        out->matvec_gbps[f] = weight_bytes * n_sweep / time_kernel(run_sweep, &sweep, 0.2) / 1e9;
        out->matmul32_gbps[f] = weight_bytes * K3_CHUNK_TOKENS / time_kernel(run_matmul, &a, 0.15) / 1e9;
    }
    /* K3's activation is no small cost beside its matrices (two tanh per
     * element): timed on inputs spread over its range */
    {
        const int n = 16384;
        float *g = x, *u = x + n;                         /* x holds 4096 x 32 floats */
        situ_arg a = {.g = g, .u = u, .out = y, .n = n};
        for (int i = 0; i < 2 * n; i++) x[i] = (float)((i * 37) % 200 - 100) * 0.05f;
        out->situ_ns = time_kernel(run_situ, &a, 0.05) / n * 1e9;
    }
    free(buf); free(x); free(y); free(scale);
    return 0;
}

/* ---- sizes from the config ------------------------------------------------ */

/* Bytes per weight of the trunk's matrices, from "torch_dtype"/"dtype"
 * (top level or text_config); bf16 when absent, as every Kimi release is.
 * *f16 = 1 for float16 (its kernel differs from bf16's). */
static double config_trunk_dtype_bytes(const char *config_path, int *f16)
{
    *f16 = 0;
    json_error_t je;
    json_t *root = json_load_file(config_path, 0, &je);
    double b = 2;
    if (!root) return b;
    json_t *objs[2] = {root, json_object_get(root, "text_config")};
    for (int i = 0; i < 2; i++) {
        if (!json_is_object(objs[i])) continue;
        const char *keys[2] = {"torch_dtype", "dtype"};
        for (int k = 0; k < 2; k++) {
            json_t *v = json_object_get(objs[i], keys[k]);
            if (!json_is_string(v)) continue;
            const char *s = json_string_value(v);
            if (!strcmp(s, "float32")) b = 4;
            else if (!strcmp(s, "float8_e4m3fn")) b = 1;
            else if (!strcmp(s, "float16")) *f16 = 1;
        }
    }
    json_decref(root);
    return b;
}

/* Weights in layer l's trunk matrices (what load_layer reads into the
 * layer's unit) and the bytes of its small tensors (norms, conv taps, A_log,
 * dt_bias, biases: F32 in the releases). KDA gate ranks are head_dim, as
 * in both releases. */
static double layer_params(const k3_config *c, int l, double *small_bytes)
{
    const double D = c->hidden, P = (double)c->kda_heads * c->kda_head_dim, R = c->kda_head_dim;
    double w = 0, s = 2 * D * 4;
    if (c->attn_res_block) s += 4 * D * 4;
    if (c->attn_kind[l] == K3_ATTN_KDA) {
        w += 3 * P * D + R * D + P * R + c->kda_heads * D + D * P;
        w += c->kda_full_rank_gate ? P * D : R * D + P * R;
        s += (3 * P * c->conv_kernel + (c->is_k3 ? 128 : c->kda_heads) + P + c->kda_head_dim) * 4;
    } else {
        const double H = c->mla_heads, qd = (double)c->qk_nope_dim + c->qk_rope_dim;
        w += c->q_lora_rank ? (double)c->q_lora_rank * D + H * qd * c->q_lora_rank : H * qd * D;
        if (c->mla_output_gate) w += H * c->v_head_dim * D;
        w += ((double)c->kv_lora_rank + c->qk_rope_dim) * D + H * ((double)c->qk_nope_dim + c->v_head_dim) * c->kv_lora_rank;
        w += D * H * c->v_head_dim;
        s += ((double)c->q_lora_rank + c->kv_lora_rank) * 4;
    }
    *small_bytes = s;
    if (!c->is_moe[l]) return w + 3.0 * c->dense_inter * D;
    w += (double)c->n_experts * D;
    s += c->n_experts * 4.0;
    if (c->latent_dim) { w += 2.0 * c->latent_dim * D; s += c->latent_dim * 4.0; }
    if (c->n_shared_experts > 0) w += 3.0 * c->moe_inter * c->n_shared_experts * D;
    *small_bytes = s;
    return w;
}

/* A unit's memory: its tensors' bytes in aligned pages, plus the page its
 * unaligned start costs (tensors in a downloaded checkpoint start wherever
 * the header ends; k3 pack aligns them, so a packed copy is a page less). */
static uint64_t round_up(double b) { return (uint64_t)ceil(b / K3_IO_ALIGN) * K3_IO_ALIGN + K3_IO_ALIGN; }

/* A type name of --trunk / --experts: a GGUF block type ("Q8_0", "Q4_K"),
 * BF16, F16, F32, or MXFP4 (k3's own MXFP4 layout: the same 4.25 bits). */
static int parse_format(const char *name, k3_plan_format *f)
{
    if (!strcasecmp(name, "MXFP4")) { *f = (k3_plan_format){.dtype = K3_DT_MXFP4}; return 0; }
    if (!strcasecmp(name, "BF16")) { *f = (k3_plan_format){.dtype = K3_DT_BF16}; return 0; }
    if (!strcasecmp(name, "F16")) { *f = (k3_plan_format){.dtype = K3_DT_F16}; return 0; }
    if (!strcasecmp(name, "F32")) { *f = (k3_plan_format){.dtype = K3_DT_F32}; return 0; }
    char upper[16];
    size_t n = strlen(name);
    if (n >= sizeof upper) return -1;
    for (size_t i = 0; i <= n; i++) upper[i] = (char)toupper((unsigned char)name[i]);
    const k3_quant_type *q = k3_quant_type_by_name(upper);
    if (!q) return -1;
    *f = (k3_plan_format){.dtype = K3_DT_GGML, .qtype = q};
    return 0;
}

/* Bytes per weight of a format (a block type's blocks over its weights). */
static double format_bytes_per_weight(k3_plan_format f)
{
    if (f.dtype == K3_DT_GGML) return (double)f.qtype->block_bytes / f.qtype->block_elems;
    if (f.dtype == K3_DT_MXFP4) return 0.5 + 1.0 / 32;
    return (double)k3_dtype_size(f.dtype);
}

/* Unit sizes from the config alone: each unit one aligned run of its
 * tensors (the layout of the releases: a layer's trunk contiguous, an
 * expert's tensors contiguous). */
static int sizes_from_config(k3_planner *p, const char *config_path, k3_error *err)
{
    const k3_config *c = &p->cfg;
    double wb = config_trunk_dtype_bytes(config_path, &p->f16);
    int f16_unused;
    if (p->formats_known) wb = format_bytes_per_weight(p->trunk_fmt);
    else if (!p->cfg.dtype[0]) wb = config_trunk_dtype_bytes(config_path, &f16_unused);
    double total = 0;
    for (int l = 0; l < c->n_layers; l++) {
        double small;
        p->trunk_params[l] = layer_params(c, l, &small);
        p->trunk_bytes[l] = round_up(p->trunk_params[l] * wb + small);
        total += (double)p->trunk_bytes[l];
    }
    p->trunk_params[c->n_layers] = (double)c->vocab_size * c->hidden;
    p->trunk_bytes[c->n_layers] = round_up(p->trunk_params[c->n_layers] * wb);
    const double in = c->latent_dim ? c->latent_dim : c->hidden;
    p->expert_params = 3.0 * c->moe_inter * in;
    p->expert_bytes = round_up(p->formats_known ? p->expert_params * format_bytes_per_weight(p->expert_fmt)
                               : c->experts_mxfp4 ? p->expert_params * (0.5 + 1.0 / 32)
                                                  : p->expert_params * wb);
    p->n_experts_total = p->n_moe * c->n_experts;
    total += (double)p->n_experts_total * p->expert_bytes + (double)p->trunk_bytes[c->n_layers];
    if (total > 1e14)   /* 100 TB: 64 times Kimi K3 */
        return k3_err(err, "%s: the config implies %.3g bytes of weights, more than any model k3 can plan "
                      "(check hidden_size, num_experts, moe_intermediate_size)", config_path, total);
    p->embed_row_bytes = (uint64_t)(c->hidden * wb);
    p->embed_buf_bytes = k3_weights_embed_buf_bytes(c->hidden);
    p->embed_table_bytes = round_up((double)c->vocab_size * c->hidden * wb);   /* its aligned extent */
    /* what the engine's process would hold at open beyond this one: the
     * small tensors as f32, the tensor index, the tokenizer */
    double small_all = 0;
    for (int l = 0; l < c->n_layers; l++) { double s; layer_params(c, l, &s); small_all += s; }
    const double n_tensors = c->n_layers * 16.0 + (double)p->n_experts_total * 6;
    p->process_bytes += (uint64_t)(small_all + n_tensors * 160 + c->vocab_size * 96.0);
    return 0;
}

/* 1 if dir holds a checkpoint (safetensors or the packed layout). */
static int has_weights(const char *dir)
{
    return k3_model_path_is_gguf(dir) || k3_is_packed_dir(dir) || st_dir_has_shards(dir);
}

/* The largest regular file of dir (weights), for the disk probe. */
static void find_probe_file(k3_planner *p)
{
    struct stat fst;
    if (stat(p->dir, &fst) == 0 && S_ISREG(fst.st_mode)) {   /* a .gguf file */
        p->probe_file_bytes = (uint64_t)fst.st_size;
        snprintf(p->probe_file, sizeof p->probe_file, "%.4095s", p->dir);
        return;
    }
    DIR *d = opendir(p->dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        char path[4096 + 256];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", p->dir, e->d_name);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size > p->probe_file_bytes &&
            strlen(path) < sizeof p->probe_file) {
            p->probe_file_bytes = (uint64_t)st.st_size;
            snprintf(p->probe_file, sizeof p->probe_file, "%.4095s", path);   /* length checked above */
        }
    }
    closedir(d);
}

/* Unit sizes as the weight provider lays them out (headers or manifest);
 * no unit is read. */
static int sizes_from_checkpoint(k3_planner *p, k3_error *err)
{
    const k3_config *c = &p->cfg;
    k3_stats *st = calloc(1, sizeof *st);
    if (!st) return k3_err(err, "out of memory");
    k3_provider_options po = {.io_direct = 0, .io_depth = 1, .ctx_tokens = p->ctx_tokens,
                              .session_bytes = p->session_bytes, .sizes_only = 1};
    k3_weights *wp = k3_weights_open(p->dir, c, &po, st, err);
    if (!wp) { free(st); return -1; }
    k3_weights_unit_sizes(wp, p->trunk_bytes, &p->expert_bytes, &p->n_experts_total, &p->embed_buf_bytes,
                          &p->embed_table_bytes);
    k3_weights_formats(wp, &p->trunk_fmt.dtype, &p->trunk_fmt.qtype, &p->expert_fmt.dtype, &p->expert_fmt.qtype);
    p->formats_known = p->trunk_fmt.dtype != K3_DT_F8_E4M3;   /* an F8 trunk's scales are not laid out by the probe */
    uint64_t rss, peak;
    stats_read_rss(&rss, &peak);
    p->process_bytes = rss;            /* what the engine holds at this point, less the tokenizer */
    k3_weights_close(wp);
    free(st);
    char tok[4096 + 32];
    struct stat tst;
    snprintf(tok, sizeof tok, "%s/tiktoken.model", p->dir);
    if (stat(tok, &tst) == 0) p->process_bytes += (uint64_t)tst.st_size * 3;
    /* formats: weights per unit from the config's shapes */
    for (int l = 0; l < c->n_layers; l++) { double s; p->trunk_params[l] = layer_params(c, l, &s); }
    p->trunk_params[c->n_layers] = (double)c->vocab_size * c->hidden;
    p->expert_params = 3.0 * c->moe_inter * (c->latent_dim ? c->latent_dim : c->hidden);
    p->embed_row_bytes = (uint64_t)c->hidden * 2;
    p->sizes_from = k3_model_path_is_gguf(p->dir) ? "GGUF header"
                    : k3_is_packed_dir(p->dir)       ? "packed manifest"
                                                     : "safetensors headers";
    return 0;
}

/* A recorded routing trace: "token layer expert" per line (--trace). */
static int load_trace(k3_planner *p, const char *path, k3_error *err)
{
    FILE *f = fopen(path, "r");
    if (!f) return k3_err(err, "%s: %s", path, strerror(errno));
    int cap = 4096;
    p->trace = malloc((size_t)cap * sizeof *p->trace);
    long long tok;
    int layer, expert, line = 0;
    while (p->trace && fscanf(f, "%lld %d %d", &tok, &layer, &expert) == 3) {
        line++;
        if (layer < 0 || layer >= p->cfg.n_layers || !p->cfg.is_moe[layer] || expert < 0 ||
            expert >= p->cfg.n_experts) {
            fclose(f);
            return k3_err(err, "%s: line %d: layer %d expert %d is not a routed expert of this model "
                          "(a trace of another model?)", path, line, layer, expert);
        }
        if (p->n_trace == cap) {
            k3_cache_lookup *g = realloc(p->trace, (size_t)(cap *= 2) * sizeof *g);
            if (!g) break;
            p->trace = g;
        }
        p->trace[p->n_trace++] = (k3_cache_lookup){tok, layer, expert};
    }
    int bad = !feof(f);
    fclose(f);
    if (!p->trace) return k3_err(err, "out of memory");
    if (bad) return k3_err(err, "%s: line %d is not \"token layer expert\"", path, line + 1);
    if (!p->n_trace) return k3_err(err, "%s: no lookups in the trace", path);
    p->trace_tokens = p->trace[p->n_trace - 1].token - p->trace[0].token + 1;
    /* decode steps (top_k lookups of one token in one layer) are what a
     * decode token meets; prompt chunks (more per step) only warm the cache */
    for (int i = 0, j; i < p->n_trace; i = j) {
        for (j = i; j < p->n_trace && p->trace[j].token == p->trace[i].token && p->trace[j].layer == p->trace[i].layer;) j++;
        if (j - i <= p->cfg.top_k) { p->trace_decode_only = 1; break; }
    }
    return 0;
}

k3_planner *k3_planner_open(const char *path, const k3_plan_options *o, k3_error *err)
{
    k3_planner *p = calloc(1, sizeof *p);
    if (!p) { k3_err(err, "out of memory"); return NULL; }
    k3_plan_default_speeds(&p->speeds);
    struct stat st;
    if (stat(path, &st) != 0) { k3_err(err, "%s: %s", path, strerror(errno)); free(p); return NULL; }
    char config_path[4096 + 16];
    const int gguf = k3_model_path_is_gguf(path);
    if (gguf) {                           /* a GGUF: the file (or folder) is the checkpoint */
        snprintf(p->dir, sizeof p->dir, "%s", path);
        snprintf(config_path, sizeof config_path, "%s", path);
    } else if (S_ISDIR(st.st_mode)) {
        snprintf(p->dir, sizeof p->dir, "%s", path);
        snprintf(config_path, sizeof config_path, "%s/config.json", path);
    } else {
        snprintf(config_path, sizeof config_path, "%s", path);
        snprintf(p->dir, sizeof p->dir, "%s", path);
        char *slash = strrchr(p->dir, '/');
        if (slash) *slash = 0;
        else snprintf(p->dir, sizeof p->dir, ".");
    }
    if (gguf ? k3_model_config_load(path, &p->cfg, NULL, err) : k3_config_load(&p->cfg, config_path, err)) {
        free(p);
        return NULL;
    }
    const k3_config *c = &p->cfg;
    p->n_threads = o && o->n_threads > 0 ? o->n_threads : k3_default_threads(NULL, 0);
    omp_set_num_threads(p->n_threads);
    p->ctx_tokens = o && o->ctx_tokens > 0 ? o->ctx_tokens : 4096;
    p->cache_lru = o ? o->cache_lru : 0;
    p->fixed_override = o ? o->fixed_bytes : 0;
    for (int l = 0; l < c->n_layers; l++) p->n_moe += c->is_moe[l] != 0;
    p->n_trunk = c->n_layers + 1;
    p->trunk_bytes = calloc((size_t)p->n_trunk, sizeof *p->trunk_bytes);
    p->trunk_params = calloc((size_t)p->n_trunk, sizeof *p->trunk_params);
    if (!p->trunk_bytes || !p->trunk_params) { k3_err(err, "out of memory"); k3_planner_close(p); return NULL; }
    const int chunk_min = p->ctx_tokens < K3_CHUNK_TOKENS ? p->ctx_tokens : K3_CHUNK_TOKENS;
    k3_model probe = {.cfg = *c, .n_threads = p->n_threads, .chunk_tokens = chunk_min, .tile_tokens = chunk_min};
    p->session_bytes = k3_session_bytes(&probe, p->ctx_tokens);
    p->chunk_token_bytes = k3_scratch_bytes_per_chunk_token(c, p->n_threads, p->ctx_tokens);
    p->span_token_bytes = k3_scratch_bytes_per_span_token(c, p->n_threads, p->ctx_tokens);
    int rc;
    config_trunk_dtype_bytes(config_path, &p->f16);
    const char *types[2] = {o ? o->trunk_type : NULL, o ? o->expert_type : NULL};
    k3_plan_format *fmts[2] = {&p->trunk_fmt, &p->expert_fmt};
    for (int i = 0; i < 2; i++)
        if (types[i] && parse_format(types[i], fmts[i])) {
            k3_err(err, "--%s %s: not a type k3 knows (Q8_0, Q6_K, Q5_K, Q4_K, Q3_K, Q2_K, Q5_0, Q4_0, IQ4_NL, "
                   "IQ4_XS, MXFP4, BF16, F16, F32)", i ? "experts" : "trunk", types[i]);
            k3_planner_close(p);
            return NULL;
        }
    p->quant_asked = types[0] || types[1];
    if (p->quant_asked) {                 /* the one not given keeps the config's */
        const k3_plan_format cfg_trunk = {.dtype = !strcmp(c->dtype, "float32") ? K3_DT_F32
                                                   : !strcmp(c->dtype, "float16") ? K3_DT_F16 : K3_DT_BF16};
        if (!types[0]) p->trunk_fmt = cfg_trunk;
        if (!types[1]) p->expert_fmt = c->experts_mxfp4 ? (k3_plan_format){.dtype = K3_DT_MXFP4} : cfg_trunk;
        p->formats_known = 1;
    }
    if (has_weights(p->dir) && !p->quant_asked) {
        rc = sizes_from_checkpoint(p, err);
    } else {
        uint64_t rss, peak;
        stats_read_rss(&rss, &peak);
        p->process_bytes = rss;
        p->sizes_from = "config.json";
        rc = sizes_from_config(p, config_path, err);
    }
    if (rc == 0 && o && o->trace_path) rc = load_trace(p, o->trace_path, err);
    if (rc) { k3_planner_close(p); return NULL; }
    find_probe_file(p);
    return p;
}

int k3_planner_load_speeds(k3_planner *p, const char *rates_path, k3_error *err)
{
    return k3_plan_speeds_load(rates_path, p->n_threads, p->dir, &p->cfg, &p->speeds, err);
}

void k3_planner_close(k3_planner *p)
{
    if (!p) return;
    free(p->trunk_bytes);
    free(p->trunk_params);
    free(p->trace);
    free(p->layer_s);
    free(p);
}

void k3_planner_get_info(const k3_planner *p, k3_planner_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->model_type, sizeof out->model_type, "%s", p->cfg.model_type);
    out->sizes_from = p->sizes_from;
    out->n_layers = p->cfg.n_layers;
    out->n_moe_layers = p->n_moe;
    out->n_experts = p->cfg.n_experts;
    out->top_k = p->cfg.top_k;
    for (int i = 0; i < p->cfg.n_layers; i++) out->trunk_bytes += p->trunk_bytes[i];
    out->head_bytes = p->trunk_bytes[p->cfg.n_layers];
    out->expert_slot_bytes = p->expert_bytes;
    if (p->layer_s) out->compute = p->compute;
    out->experts_bytes = (uint64_t)p->n_experts_total * p->expert_bytes;
    out->session_bytes = p->session_bytes;
    out->ctx_tokens = p->ctx_tokens;
    snprintf(out->plan_speeds, sizeof out->plan_speeds, "disk %.3g GB/s, matvec %.3g GB/s trunk / %.3g GB/s experts (%s)",
             p->speeds.read_bytes_per_s / 1e9, p->speeds.trunk_matvec_bytes_per_s / 1e9,
             p->speeds.expert_matvec_bytes_per_s / 1e9, p->speeds.source);
    out->n_threads = p->n_threads;
    out->trace_tokens = p->trace_tokens;
    out->trace_lookups = p->n_trace;
}

/* ---- the disk ------------------------------------------------------------ */

/* Random reads of one expert page (at least 1 MiB), 4 in flight, as the
 * runtime reads: over the model's largest weight file when it is here,
 * else over a scratch file written in scratch_dir (the filesystem the
 * model would go to) and removed. As k3_model_probe_device, a first reading
 * of the sample and the figure of reading it again (decode's steady state
 * re-reads the pages it evicted). */
int k3_planner_probe_disk(k3_planner *p, const char *scratch_dir, double seconds, double *gbps, double *first_read_gbps,
                          k3_error *err)
{
    uint64_t size = p->expert_bytes > (1u << 20) ? p->expert_bytes : (1u << 20);
    char path[4096 + 64];
    uint64_t file_bytes = p->probe_file_bytes;
    int scratch = 0;
    if (file_bytes >= 4 * size && file_bytes >= (64u << 20)) {
        snprintf(path, sizeof path, "%s", p->probe_file);
    } else {
        snprintf(path, sizeof path, "%s/k3-disk-probe.%d.tmp", scratch_dir, (int)getpid());
        file_bytes = 16 * size > (256u << 20) ? 16 * size : (256u << 20);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) return k3_err(err, "%s: cannot create the disk probe file: %s", path, strerror(errno));
        scratch = 1;
        uint8_t *chunk = malloc(1u << 20);
        int rc = chunk ? 0 : -1;
        if (chunk) memset(chunk, 0xA5, 1u << 20);
        for (uint64_t w = 0; rc == 0 && w < file_bytes; w += 1u << 20)
            if (write(fd, chunk, 1u << 20) != (ssize_t)(1u << 20)) rc = -1;
        free(chunk);
        if (rc == 0 && fsync(fd) != 0) rc = -1;
        close(fd);
        if (rc) { unlink(path); return k3_err(err, "%s: cannot write the disk probe file (disk full?)", path); }
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd < 0) fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { if (scratch) unlink(path); return k3_err(err, "%s: %s", path, strerror(errno)); }
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);   /* a scratch file just written is in the page cache */
    k3_stats *st = calloc(1, sizeof *st);
    uint8_t *mem = aligned_alloc(K3_IO_ALIGN, (size_t)size * 4);
    uint8_t *bufs[4] = {mem, mem + size, mem + 2 * size, mem + 3 * size};
    k3_io *io = st && mem ? k3_io_open(K3_IO_POOL, 4, st, err) : NULL;
    /* the first reads for a quarter of the time, then those places again;
     * places seeded by the clock, so the last plan's probe did not read them */
    const uint64_t seed = k3_now_ns() | 1;
    uint64_t n_read = 0;
    double first = 0;
    int rc = io ? k3_io_probe(io, fd, path, file_bytes, size, bufs, 4, seconds / 4, seed, 0, &first, &n_read, err) : -1;
    if (rc == 0) rc = k3_io_probe(io, fd, path, file_bytes, size, bufs, 4, seconds * 3 / 4, seed, n_read, gbps, NULL, err);
    if (rc == 0 && first_read_gbps) *first_read_gbps = first;
    if (!st || !mem) k3_err(err, "out of memory");
    k3_io_close(io);
    free(mem);
    free(st);
    close(fd);
    if (scratch) unlink(path);
    return rc;
}

/* The ring's own reads on the model's own files: the weights opened for
 * their layout alone (no unit read at open) but with the runtime's reader
 * (O_DIRECT where the filesystem has it, the default depth), the plan at
 * mem_bytes saying which units stream. Two buffers of the ring slot's size
 * up to 256 MiB: beyond it a unit is read in pieces, still in order. */
static int plan_at(k3_planner *pl, uint64_t mem_bytes, k3_plan *plan, uint64_t *budget_out, k3_error *err);

int k3_planner_probe_trunk(k3_planner *p, uint64_t mem_bytes, double seconds, k3_trunk_probe *out, k3_error *err)
{
    memset(out, 0, sizeof *out);
    if (!has_weights(p->dir)) return k3_err(err, "%s: no weight files here to probe the trunk reads on", p->dir);
    k3_plan plan;
    uint64_t budget;
    if (plan_at(p, mem_bytes, &plan, &budget, err)) return -1;
    k3_stats *st = calloc(1, sizeof *st);
    if (!st) { k3_plan_free(&plan); return k3_err(err, "out of memory"); }
    k3_provider_options po = {.io_direct = 1, .io_depth = K3_IO_DEPTH_DEFAULT, .ctx_tokens = p->ctx_tokens,
                              .session_bytes = p->session_bytes, .sizes_only = 1};
    k3_error open_err;
    k3_weights *wp = k3_weights_open(p->dir, &p->cfg, &po, st, &open_err);
    if (!wp) {                        /* a filesystem without O_DIRECT: the reads k3 --io buffered makes */
        po.io_direct = 0;
        wp = k3_weights_open(p->dir, &p->cfg, &po, st, err);
    }
    uint64_t buf_bytes = plan.ring_slot_bytes < (256u << 20) ? plan.ring_slot_bytes : (256u << 20);
    buf_bytes = buf_bytes / K3_IO_ALIGN * K3_IO_ALIGN;
    uint8_t *mem = wp && buf_bytes ? aligned_alloc(K3_IO_ALIGN, (size_t)buf_bytes * 2) : NULL;
    int rc = -1;
    if (!wp) rc = -1;
    else if (!plan.n_ring || !buf_bytes) rc = 0;     /* every unit pinned: nothing streams */
    else if (!mem) k3_err(err, "out of memory for the trunk probe's %llu-byte buffers", (unsigned long long)buf_bytes * 2);
    else {
        uint8_t *bufs[2] = {mem, mem + buf_bytes};
        rc = k3_weights_probe_trunk_into(wp, plan.pinned, bufs, plan.n_ring < 2 ? 1 : 2, buf_bytes, seconds, out, err);
    }
    free(mem);
    k3_weights_close(wp);
    free(st);
    k3_plan_free(&plan);
    return rc;
}

/* ---- the estimate -------------------------------------------------------- */

/* The format a unit's kernel runs: from its bytes per weight. */
static int unit_format(double bytes, double params, int f16)
{
    const double r = params > 0 ? bytes / params : 2;
    if (r >= 3) return K3_RATE_F32;
    if (r >= 1.5) return f16 ? K3_RATE_F16 : K3_RATE_BF16;
    if (r >= 0.8) return K3_RATE_F8;
    return K3_RATE_MXFP4;
}

/* Seconds for `bytes` of weights of format f applied to t tokens in one
 * pass: linear between the measured 1-token and 32-token rates. */
static double unit_seconds(const k3_kernel_rates *r, int f, double bytes, double t)
{
    const double s1 = 1.0 / (r->matvec_gbps[f] * 1e9);
    const double s32 = K3_CHUNK_TOKENS / (r->matmul32_gbps[f] * 1e9);
    const double per_token = (s32 - s1) / (K3_CHUNK_TOKENS - 1);
    return bytes * (s1 + per_token * (t - 1));
}

/* The engine's plan at mem_bytes (0 = as the engine without --mem), with
 * the budget it was made for; k3_plan_free it. */
static int plan_at(k3_planner *pl, uint64_t mem_bytes, k3_plan *plan, uint64_t *budget_out, k3_error *err)
{
    const k3_config *c = &pl->cfg;
    uint64_t fixed = pl->fixed_override ? pl->fixed_override
                                        : k3_plan_fixed_bytes(pl->process_bytes, pl->session_bytes, pl->embed_buf_bytes);
    if (fixed < pl->session_bytes)
        return k3_err(err, "fixed cost %llu bytes is less than one session's state (%llu bytes)",
                      (unsigned long long)fixed, (unsigned long long)pl->session_bytes);
    const int chunk_min = pl->ctx_tokens < K3_CHUNK_TOKENS ? pl->ctx_tokens : K3_CHUNK_TOKENS;
    k3_plan_input in = {.budget_bytes = mem_bytes, .fixed_bytes = fixed, .state_bytes = pl->session_bytes,
                        .ctx_tokens = pl->ctx_tokens, .n_trunk = pl->n_trunk, .trunk_bytes = pl->trunk_bytes,
                        .expert_bytes = pl->expert_bytes, .n_experts_total = pl->n_experts_total, .top_k = c->top_k,
                        .budget_source = mem_bytes ? "--mem" : "as the engine", .chunk_min = chunk_min,
                        .chunk_max = pl->ctx_tokens < K3_CHUNK_TOKENS_MAX ? pl->ctx_tokens : K3_CHUNK_TOKENS_MAX,
                        .chunk_token_bytes = pl->chunk_token_bytes, .chunk_room_bytes = 0,
                        .span_token_bytes = pl->span_token_bytes, .embed_table_bytes = pl->embed_table_bytes};
    if (!mem_bytes) {                     /* as the engine: resident if it fits in available memory */
        k3_mem_limit lim;
        k3_mem_limit_read(pl->process_bytes, &lim);
        k3_plan_default_budget(&in, &lim);
    }
    /* the engine's own weighing of pinned trunk against expert slots
     * (weights_plan.c), so that this plan is the engine's */
    double *unit_compute_s = calloc((size_t)pl->n_trunk, sizeof *unit_compute_s);
    uint64_t *unit_expert_bytes = calloc((size_t)pl->n_trunk, sizeof *unit_expert_bytes);
    if (!unit_compute_s || !unit_expert_bytes) {
        free(unit_compute_s);
        free(unit_expert_bytes);
        return k3_err(err, "out of memory");
    }
    for (int l = 0; l < c->n_layers && l < pl->n_trunk; l++)
        if (c->is_moe[l]) unit_expert_bytes[l] = (uint64_t)c->top_k * pl->expert_bytes;
    k3_plan_costs costs;
    k3_plan_costs_at(&costs, &pl->speeds, pl->trunk_bytes, unit_expert_bytes, pl->n_trunk, unit_compute_s, pl->n_moe,
                     c->n_experts);
    if (pl->n_experts_total) in.costs = &costs;
    *budget_out = in.budget_bytes;
    const int rc = k3_plan_make(&in, plan, err);
    free(unit_compute_s);
    free(unit_expert_bytes);
    if (rc) { k3_plan_free(plan); return -1; }
    return 0;
}

/* Seconds of SiTU-GLU activation per token (K3): the routed experts' run
 * in the workers, in parallel; the shared experts' and the dense MLPs' on
 * one thread (engine/model/moe.c). */
static double situ_s_per_token(const k3_planner *pl, const k3_kernel_rates *r)
{
    const k3_config *c = &pl->cfg;
    if (!c->use_situ || r->situ_ns <= 0) return 0;
    const int threads = r->n_threads > 0 ? r->n_threads : 1;
    double routed = 0, serial = 0;
    for (int l = 0; l < c->n_layers; l++) {
        if (!c->is_moe[l]) { serial += c->dense_inter; continue; }
        routed += (double)c->top_k * c->moe_inter;
        serial += (double)c->n_shared_experts * c->moe_inter;
    }
    return (routed / threads + serial) * r->situ_ns * 1e-9;
}

/* The read share's reads: an expert page (at least 1 MiB) of the model's
 * largest file, which must hold four of them: else nothing is read. */
static uint64_t load_read_bytes(const k3_planner *p)
{
    return p->expert_bytes > (1u << 20) ? p->expert_bytes : (1u << 20);
}

static int read_share_measurable(const k3_planner *p) { return p->probe_file_bytes >= 4 * load_read_bytes(p); }

int k3_planner_probe_compute(k3_planner *p, k3_error *err)
{
    const k3_config *c = &p->cfg;
    /* the trunk's dtype as the config declares it (bf16 when it says
     * nothing, as every Kimi release is); an F8 trunk is not timed: its
     * block scales are not laid out here, and its rate stands */
    k3_plan_format trunk_dt = {.dtype = K3_DT_BF16};
    if (!strcmp(c->dtype, "float32")) trunk_dt.dtype = K3_DT_F32;
    else if (!strcmp(c->dtype, "float16")) trunk_dt.dtype = K3_DT_F16;
    else if (!strncmp(c->dtype, "float8", 6) && !p->formats_known) return 0;
    k3_plan_format expert_dt = c->experts_mxfp4 ? (k3_plan_format){.dtype = K3_DT_MXFP4} : trunk_dt;
    if (p->formats_known) {               /* the weights' own, or --trunk / --experts */
        trunk_dt = p->trunk_fmt;
        expert_dt = p->expert_fmt;
    }
    /* the matrices timed are the ones the units hold, to the weight */
    for (int l = 0; l <= c->n_layers; l++)
        if (k3_plan_layer_matrix_weights(c, l) != p->trunk_params[l])
            return k3_err(err, "compute probe: %s %d has %.0f weights in its matrices, the probe would multiply "
                          "%.0f (a shape the probe does not know)", l < c->n_layers ? "layer" : "head (unit)", l,
                          p->trunk_params[l], k3_plan_layer_matrix_weights(c, l));
    /* 256 MiB, far more than a last-level cache, and at most a quarter of
     * what this process may still hold (as the kernel-rate probe) */
    size_t arena = (size_t)256 << 20;
    k3_mem_limit lim;
    k3_mem_limit_read(0, &lim);
    while (arena > ((size_t)64 << 20) && lim.avail_bytes && arena > lim.avail_bytes / 4) arena /= 2;
    /* and no more than the model holds: a model smaller than the caches
     * decodes from them, and so must its probe */
    double model_bytes = (double)p->n_experts_total * (double)p->expert_bytes;
    for (int l = 0; l <= c->n_layers; l++) model_bytes += (double)p->trunk_bytes[l];
    const size_t model_arena = ((size_t)model_bytes + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
    if (model_arena < arena) arena = model_arena;
    double *layer_s = calloc((size_t)c->n_layers + 1, sizeof *layer_s);
    if (!layer_s) return k3_err(err, "out of memory");
    /* the disk's speed while the layers compute, timed on the model's own
     * largest file (not without the weights: a scratch file's pages say
     * nothing of the model's filesystem) */
    read_load *load = NULL;
    if (read_share_measurable(p)) {
        load = read_load_open(p->probe_file, p->probe_file_bytes, load_read_bytes(p), err);
        if (!load) { free(layer_s); return -1; }
    }
    const k3_plan_reader reader = load ? read_load_reader(load) : (k3_plan_reader){0};
    const uint64_t t0 = k3_now_ns();
    k3_compute_figures figures;
    const int rc = k3_plan_time_layers(c, trunk_dt, expert_dt, p->n_threads, arena, load ? &reader : NULL, layer_s,
                                       &figures, err);
    read_load_close(load);
    if (rc) { free(layer_s); return -1; }
    figures.probe_s = (double)(k3_now_ns() - t0) * 1e-9;
    p->compute = figures;
    free(p->layer_s);
    p->layer_s = layer_s;
    return 0;
}

uint64_t k3_planner_compute_key(const k3_planner *p)
{
    /* the config holds every width the probe multiplies (it is zeroed
     * before it is read, so its padding hashes the same every time) */
    uint64_t h = k3_fnv1a64(K3_FNV_INIT, &p->cfg, sizeof p->cfg);
    h = k3_fnv1a64(h, &p->f16, sizeof p->f16);
    if (!p->formats_known) return h;      /* as before: cached figures stay valid */
    const uint32_t fmt[4] = {(uint32_t)p->trunk_fmt.dtype, p->trunk_fmt.qtype ? p->trunk_fmt.qtype->ggml_id : 0,
                             (uint32_t)p->expert_fmt.dtype, p->expert_fmt.qtype ? p->expert_fmt.qtype->ggml_id : 0};
    return k3_fnv1a64(h, fmt, sizeof fmt);
}

int k3_planner_compute_layers(const k3_planner *p, double *layer_s)
{
    if (!p->layer_s) return -1;
    memcpy(layer_s, p->layer_s, ((size_t)p->cfg.n_layers + 1) * sizeof *layer_s);
    return 0;
}

int k3_planner_set_compute_layers(k3_planner *p, const double *layer_s, int n, const k3_compute_figures *f)
{
    if (n != p->cfg.n_layers + 1 || f->kinds < 1 || !(f->read_share >= 0 && f->read_share <= 1)) return -1;
    if (f->read_share == 0 && read_share_measurable(p)) return -1;   /* measured without the weights: again */
    if (!(f->slowdown_s_per_gb >= 0 && f->slowdown_s_per_gb < 1e4) || !(f->probe_s >= 0)) return -1;
    if (!(f->miss_expert_s >= 0 && f->miss_expert_s < 1e4) ||
        (f->miss_expert_s == 0 && p->n_moe > 0 && p->cfg.top_k > 0))
        return -1;                                                   /* none, for a model with routed experts */
    for (int i = 0; i < n; i++)
        if (!(layer_s[i] >= 0 && layer_s[i] < 1e4)) return -1;
    double *copy = malloc((size_t)n * sizeof *copy);
    if (!copy) return -1;
    memcpy(copy, layer_s, (size_t)n * sizeof *copy);
    free(p->layer_s);
    p->layer_s = copy;
    p->compute = *f;
    return 0;
}

/* What j expert misses of its top_k cost one MoE layer of a decode token
 * beyond the layer's own compute: the time it waits for them, and the
 * pages it reads while it computes (whose reads take CPU from it). */
typedef struct miss_cost { double wait_s, pages_under_compute; } miss_cost;

/* The layer's reads go out together once its router has run, `depth` of
 * them in flight at a time (sharing the disk, so they arrive in batches of
 * depth); the k - j experts in memory compute meanwhile, then each miss
 * computes when its page has arrived (all threads on it, expert_s) while
 * the next pages are read (engine/model/moe.c). So:
 *   - the reads take j pages at page_s each (the disk alone), slowed to
 *     read_share of its speed while the CPU computes, which it does for
 *     all but the last batch's compute at most, (k - batch) expert_s: the
 *     reads end at read_s = min(j page_s / share,
 *     j page_s + (1 - share) (k - batch) expert_s);
 *   - the layer's experts end at the latest of: all k computed back to
 *     back (no wait), the last batch's arrival plus its compute, and the
 *     first batch's arrival plus the j misses' compute (when the experts
 *     in memory are done before it);
 *   - the pages read while it computes: all j when the reads end within
 *     that compute, else what the disk reads at the share meanwhile.
 * k3 bench's figures at k3-16g's 4405M (every lookup a miss, 16 of 16):
 * 0.229 s waited of 0.314 s read a token, where reading then computing
 * would wait it all; the reads ended 2.2 ms a layer before the layer's
 * experts did, about six experts' compute (0.38 ms each) where one
 * arriving at a time would leave one. */
static miss_cost layer_miss_cost(int k, int j, int depth, double page_s, double share, double expert_s)
{
    miss_cost m = {0, 0};
    if (j <= 0) return m;
    const int batch = j < depth ? j : depth;
    const double computing_s = (k - batch) * expert_s;
    const double under_compute_s = j * page_s / share;
    const double beside_compute_s = j * page_s + (1 - share) * computing_s;
    const double read_s = under_compute_s < beside_compute_s ? under_compute_s : beside_compute_s;
    const int in_memory = k - j;
    const double first_batch_s = batch * (in_memory > 0 ? page_s / share : page_s);
    double wait = read_s + batch * expert_s - k * expert_s;
    const double first_wait = first_batch_s - in_memory * expert_s;
    if (first_wait > wait) wait = first_wait;
    m.wait_s = wait > 0 ? wait : 0;
    m.pages_under_compute = under_compute_s <= computing_s ? j : computing_s * share / page_s;
    return m;
}

/* A decode token's misses over its n_moe layers, with each lookup a miss
 * at 1 - hit_rate independently: the layers' misses binomial. The average
 * of the costs, not the cost of the average: at 98% hits most layers miss
 * nothing and a layer that misses one expert reads it under its fifteen
 * others' compute (k3-16g 11622M: 0.1 ms waited a token of 8 ms read). */
static miss_cost token_miss_cost(int n_moe, int k, int depth, double hit_rate, double page_s, double share,
                                 double expert_s)
{
    miss_cost sum = {0, 0};
    if (n_moe <= 0 || k <= 0 || hit_rate >= 1) return sum;
    const double miss = 1 - hit_rate;
    for (int j = 1; j <= k; j++) {
        const double p = hit_rate <= 0 ? (j == k)
                                       : exp(lgamma(k + 1.0) - lgamma(j + 1.0) - lgamma(k - j + 1.0) + j * log(miss) +
                                             (k - j) * log(hit_rate));
        if (p <= 0) continue;
        const miss_cost m = layer_miss_cost(k, j, depth, page_s, share, expert_s);
        sum.wait_s += n_moe * p * m.wait_s;
        sum.pages_under_compute += n_moe * p * m.pages_under_compute;
    }
    return sum;
}

int k3_planner_estimate(k3_planner *pl, uint64_t mem_bytes, double disk_gbps, double trunk_gbps, const k3_kernel_rates *r,
                        int prompt_tokens, k3_plan_estimate *out, k3_error *err)
{
    memset(out, 0, sizeof *out);
    const k3_config *c = &pl->cfg;
    k3_plan plan;
    uint64_t budget;
    if (plan_at(pl, mem_bytes, &plan, &budget, err)) return -1;
    out->budget_bytes = budget;
    out->fixed_bytes = plan.fixed_bytes;  /* with the prompt chunk's scratch, as the engine reports it */
    out->min_budget_bytes = plan.min_budget_bytes;
    out->trunk_units = plan.n_trunk;
    out->pinned_units = plan.n_pinned;
    out->pinned_bytes = plan.pinned_bytes;
    out->ring_slots = plan.n_ring;
    out->ring_slot_bytes = plan.ring_slot_bytes;
    out->expert_slots = plan.n_expert_slots;
    out->experts_total = plan.n_experts_total;
    out->expert_slot_bytes = plan.expert_slot_bytes;
    out->fully_resident = plan.all_resident;
    out->chunk_tokens = plan.chunk_tokens;

    /* hit rate */
    if (plan.all_resident) out->hit_rate = 1;
    else if (pl->n_trace)
        out->hit_rate = k3_expert_cache_replay(pl->trace, pl->n_trace, plan.n_expert_slots,
                                               pl->cache_lru ? K3_CACHE_LRU : K3_CACHE_LFRU, c->n_layers, c->n_experts,
                                               pl->trace_decode_only ? c->top_k : 0);
    else out->hit_rate = k3_expert_cache_uniform_hit_rate(pl->n_moe, c->n_experts, c->top_k, plan.n_expert_slots);

    /* reads per decode token */
    const int head = c->n_layers;
    for (int l = 0; l < c->n_layers; l++)
        if (!plan.pinned[l]) out->bytes_trunk += (double)pl->trunk_bytes[l];
    const double embed_row_bytes = plan.all_resident ? 0 : (double)pl->embed_row_bytes;  /* the table is held */
    out->bytes_head = (plan.pinned[head] ? 0 : (double)pl->trunk_bytes[head]) + embed_row_bytes;
    const double lookups = (double)c->top_k * pl->n_moe;
    out->bytes_experts = (1 - out->hit_rate) * lookups * (double)pl->expert_bytes;
    out->read_share = pl->layer_s && pl->compute.read_share > 0 ? pl->compute.read_share : 1;
    const double bps = disk_gbps * 1e9, trunk_bps = trunk_gbps * 1e9;
    const double head_unit_bytes = out->bytes_head - embed_row_bytes;   /* streamed as a trunk unit */
    out->disk_gbps = disk_gbps;
    out->trunk_gbps = trunk_gbps;
    out->io_trunk_s = (out->bytes_trunk + head_unit_bytes) / trunk_bps;
    out->io_s = out->io_trunk_s + (embed_row_bytes + out->bytes_experts) / bps;

    /* compute per decode token */
    const int f16 = pl->f16;
    double trunk_s = 0;
    for (int i = 0; i < pl->n_trunk; i++)
        trunk_s += unit_seconds(r, unit_format((double)pl->trunk_bytes[i], pl->trunk_params[i], f16),
                                (double)pl->trunk_bytes[i], 1);
    const int ef = unit_format((double)pl->expert_bytes, pl->expert_params, f16);
    const double expert_s = unit_seconds(r, ef, (double)pl->expert_bytes, 1);
    double matrices_s = trunk_s + lookups * expert_s;
    if (pl->layer_s) {                    /* timed at the model's widths: the calls as the engine makes them */
        matrices_s = 0;
        for (int i = 0; i <= c->n_layers; i++) matrices_s += pl->layer_s[i];
    }
    const double mem_bps = r->matvec_gbps[K3_RATE_F32] * 1e9;
    const double ctx = prompt_tokens > 0 ? prompt_tokens : 1;
    const double kda_state_bytes = 2.0 * k3_config_kda_state_floats(c) * 4;
    const double state_bytes = kda_state_bytes +
                               k3_config_count_attn(c, K3_ATTN_MLA) * ctx * k3_config_mla_entry_floats(c) * 4;
    /* the KDA states' traffic is in the timed layers (each its own state) */
    const double decode_state_bytes = state_bytes - (pl->layer_s ? kda_state_bytes : 0);
    out->matrices_s = matrices_s;
    out->compute_s = matrices_s + decode_state_bytes / mem_bps + situ_s_per_token(pl, r);
    /* Reads made while the layers compute get read_share of the disk's
     * speed (the compute probe's figure, when it ran here). A layer's
     * misses wait as layer_miss_cost says, and the pages read while it
     * computes slow that compute by the probe's slowdown per GB. When the
     * reads bound the token, the disk reads through the compute at that
     * share and alone at the whole speed the rest of the time. */
    const double share = out->read_share;
    out->miss_expert_s = pl->layer_s && pl->compute.miss_expert_s > 0 ? pl->compute.miss_expert_s : expert_s;
    if (!plan.all_resident) {
        const miss_cost m = token_miss_cost(pl->n_moe, c->top_k, K3_IO_DEPTH_DEFAULT, out->hit_rate,
                                            (double)pl->expert_bytes / bps, share, out->miss_expert_s);
        out->expert_wait_s = m.wait_s;
        out->read_slowdown_s = pl->layer_s ? m.pages_under_compute * (double)pl->expert_bytes * 1e-9 *
                                             pl->compute.slowdown_s_per_gb
                                           : 0;
    }
    const double serial_s = out->compute_s + out->read_slowdown_s + out->expert_wait_s;
    const double io_bound_s = out->io_s + out->compute_s * (1 - share);
    out->decode_s = io_bound_s > serial_s ? io_bound_s : serial_s;

    /* the prompt, chunk by chunk */
    out->prompt_tokens = prompt_tokens;
    for (int done = 0; done < prompt_tokens;) {
        const int T = prompt_tokens - done < plan.chunk_tokens ? prompt_tokens - done : plan.chunk_tokens;
        const double E = c->n_experts, distinct = E ? E * (1 - pow(1 - c->top_k / E, T)) : 0;
        const double io_s = out->io_trunk_s +
                            (embed_row_bytes * T +
                             (1 - out->hit_rate) * distinct * pl->n_moe * (double)pl->expert_bytes) / bps;
        double comp = 0;
        for (int i = 0; i < c->n_layers; i++)
            comp += unit_seconds(r, unit_format((double)pl->trunk_bytes[i], pl->trunk_params[i], f16),
                                 (double)pl->trunk_bytes[i], T);
        comp += unit_seconds(r, unit_format((double)pl->trunk_bytes[head], pl->trunk_params[head], f16),
                             (double)pl->trunk_bytes[head], 1);
        if (distinct > 0)
            comp += pl->n_moe * distinct *
                    unit_seconds(r, ef, (double)pl->expert_bytes, T * c->top_k / distinct);
        comp += T * (state_bytes / mem_bps + situ_s_per_token(pl, r));
        const double expert_read_s = (1 - out->hit_rate) * distinct * pl->n_moe * (double)pl->expert_bytes / bps;
        out->prompt_s += io_s > comp + expert_read_s ? io_s : comp + expert_read_s;
        out->prompt_chunks++;
        done += T;
    }
    k3_plan_free(&plan);
    return 0;
}
