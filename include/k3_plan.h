/* k3_plan.h - k3 plan's predictor (engine/plan/): planning before
 * downloading. Used by app/cmd_plan.c; part of the door (include/). */
#ifndef K3_PLAN_H
#define K3_PLAN_H

#include "k3.h"

/* ---- planning before downloading (k3 plan) --------------------------------
 * From a model directory, or a config.json alone: the engine's own memory
 * plan at a budget, the bytes a decode token reads, the expert hit rate and
 * predicted times on this machine (engine/plan/plan_model.c states the model). */

/* Kernel rates measured on this machine: bytes of weights per second of the
 * decode kernel (one token per pass) and of the prompt kernel (32 tokens
 * per pass, bytes x tokens per second), per weight format. */
enum { K3_RATE_F32, K3_RATE_BF16, K3_RATE_F16, K3_RATE_F8, K3_RATE_MXFP4, K3_RATE_N };
typedef struct k3_kernel_rates {
    int n_threads;
    double matvec_gbps[K3_RATE_N];
    double matmul32_gbps[K3_RATE_N];
    double situ_ns;              /* one SiTU-GLU activation element on one thread, ns (K3's MLPs;
                                  * 0 = not measured: no time counted for it) */
} k3_kernel_rates;

/* A short probe (about a second) of the kernels the forward pass runs. */
int k3_kernel_rates_measure(int n_threads, k3_kernel_rates *out, k3_error *err);
/* "f32", "bf16", "f16", "f8_e4m3", "mxfp4". */
const char *k3_rate_format_name(int f);
/* The CPU's model name ("unknown"): part of the cached rates' key. */
void k3_cpu_name(char *out, size_t len);

typedef struct k3_planner k3_planner;

typedef struct k3_plan_options {
    int n_threads;               /* 0 = k3_default_threads */
    int ctx_tokens;              /* context the sessions will use (default 4096) */
    int cache_lru;               /* --cache-policy lru (default lfru) */
    uint64_t fixed_bytes;        /* the plan's fixed claim; 0 = estimated as the engine counts it */
    const char *trace_path;      /* routing trace (--trace of run/bench) for the hit rate; NULL = uniform */
    const char *trunk_type;      /* --trunk TYPE: predict the weights at this type (a GGUF block type
                                  * "Q8_0", BF16, MXFP4...) from the config; NULL = as they are */
    const char *expert_type;     /* --experts TYPE: the same for the routed experts */
} k3_plan_options;

/* The compute probe's figures besides its layer times
 * (k3_planner_probe_compute), out of the planner and back in for a cache. */
typedef struct k3_compute_figures {
    int kinds;                   /* layer kinds timed (0: nothing timed: compute from the rates) */
    double probe_s;              /* seconds the probe took */
    double read_share;           /* the disk's speed while the layers compute, as a share of its speed
                                  * alone, timed by that probe on the model's largest file (0: not
                                  * measured: no weight file here holds four expert pages) */
    double slowdown_s_per_gb;    /* seconds the layers' compute takes longer per GB read meanwhile
                                  * (the same probe; 0 when not measured) */
    double miss_expert_s;        /* one routed expert's matrices over all the threads, as the engine
                                  * computes an expert read for this token (0: no routed experts) */
} k3_compute_figures;

typedef struct k3_planner_info {
    char model_type[32];
    const char *sizes_from;      /* "safetensors headers", "packed manifest" or "config.json" */
    int n_layers, n_moe_layers, n_experts, top_k;
    uint64_t trunk_bytes;        /* all layers' trunk units */
    uint64_t head_bytes;
    uint64_t expert_slot_bytes, experts_bytes;
    uint64_t session_bytes;
    int ctx_tokens, n_threads;
    long long trace_tokens;      /* 0 = uniform routing */
    int trace_lookups;
    k3_compute_figures compute;  /* all zero when nothing was timed */
    char plan_speeds[320];       /* the speeds the memory plan's split is weighed at, and their source
                                  * (k3_planner_load_speeds; the engine's at open) */
} k3_planner_info;

typedef struct k3_plan_estimate {
    /* the memory plan (as the engine prints it) */
    uint64_t budget_bytes, fixed_bytes, min_budget_bytes, pinned_bytes, ring_slot_bytes, expert_slot_bytes;
    int trunk_units, pinned_units, ring_slots, expert_slots, experts_total, fully_resident;
    /* one decode token */
    double hit_rate;             /* expert cache true hit rate */
    double bytes_trunk, bytes_experts, bytes_head;   /* expected bytes read (head: head unit + embedding row) */
    double disk_gbps;            /* expert pages and embedding rows: random reads */
    double trunk_gbps;           /* trunk units and the head, streamed through the ring */
    double read_share;           /* reads made while the layers compute go at this share of the disk's
                                  * speed (k3_planner_info; 1 when not measured) */
    double io_trunk_s;           /* (bytes_trunk + the head unit) / trunk_gbps: part of io_s */
    double io_s, compute_s;
    double matrices_s;           /* of compute_s: the matrices (timed at the model's widths after
                                  * k3_planner_probe_compute, else bytes / kernel rate) */
    double miss_expert_s;        /* one expert's compute as a miss runs (k3_planner_info, else from
                                  * the rates): what of the misses' reads hides under compute */
    double expert_wait_s;        /* expert misses' reads, waited for after each layer's router, less
                                  * what hides under the layer's expert compute; reads under compute
                                  * at read_share of disk_gbps */
    double read_slowdown_s;      /* the compute lost to the misses' reads made while a layer computes
                                  * (their pages x the probe's slowdown_s_per_gb; 0 without it) */
    double decode_s;             /* max(io_s + compute_s x (1 - read_share),
                                  *     compute_s + read_slowdown_s + expert_wait_s) */
    /* the prompt */
    int prompt_tokens, prompt_chunks;
    int chunk_tokens;            /* tokens per prompt chunk, chosen from the budget as the engine does */
    double prompt_s;
} k3_plan_estimate;

/* path: a model directory (sizes from its headers or packed manifest), a
 * directory holding only config.json, or a config.json file. */
k3_planner *k3_planner_open(const char *path, const k3_plan_options *o, k3_error *err);
void k3_planner_get_info(const k3_planner *p, k3_planner_info *out);
/* Device speed for the runtime's reads on the filesystem of the model (its
 * weight files), or of scratch_dir when they are not here: *gbps reading a
 * sample again (the steady state), *first_read_gbps (may be NULL) its first
 * reading. */
int k3_planner_probe_disk(k3_planner *p, const char *scratch_dir, double seconds, double *gbps, double *first_read_gbps,
                          k3_error *err);
/* The trunk probe (k3_model_probe_trunk) on the model's own files: the
 * units that stream with the plan at mem_bytes (> 0), into two buffers of
 * at most 256 MiB; needs the weights here (else an error). */
int k3_planner_probe_trunk(k3_planner *p, uint64_t mem_bytes, double seconds, k3_trunk_probe *out, k3_error *err);
/* A decode token's matrix work timed on this machine at the model's own
 * widths: one layer of each kind and the head, the engine's kernels called
 * as the engine calls them (trunk matrices over all threads, top_k experts
 * one per thread in a wave, and one expert over all threads as a miss
 * runs), weights spread through memory. Estimates then
 * take their compute from it instead of from the rates' bytes / rate. A
 * few hundred ms; nothing is timed for an F8 trunk (the rates stand). With
 * the weights here it also times the reader on the model's largest file
 * while those layers compute, against reading alone and the layers alone
 * (0.9 s): k3_compute_figures.read_share and slowdown_s_per_gb. */
int k3_planner_probe_compute(k3_planner *p, k3_error *err);
/* What that probe depends on besides the machine (the config's widths and
 * formats), for a cache of its figures; and its figures out and back in
 * (n_layers + 1 values: the layers, then the head; -1 when there are none,
 * or when what is given is not a set of n_layers + 1 times with figures
 * that could be the probe's; the other figures are k3_planner_info's
 * compute). */
uint64_t k3_planner_compute_key(const k3_planner *p);
int k3_planner_compute_layers(const k3_planner *p, double *layer_s);
int k3_planner_set_compute_layers(k3_planner *p, const double *layer_s, int n, const k3_compute_figures *f);
/* The plan at mem_bytes (0 = as the engine without --mem) and the predicted
 * times, the trunk's reads at trunk_gbps and the rest at disk_gbps; a
 * budget below the minimum fails with the engine's message. */
int k3_planner_estimate(k3_planner *p, uint64_t mem_bytes, double disk_gbps, double trunk_gbps, const k3_kernel_rates *r,
                        int prompt_tokens, k3_plan_estimate *out, k3_error *err);
/* The speeds the plan weighs pinned trunk against expert slots at, as the
 * engine takes them at open (a --rates file, else the cached probes of this
 * machine, else defaults), so that the plan is the engine's; call after the
 * probes have been cached. Until called: the defaults. 0, or -1 with err
 * (a rates file without the model's formats). */
int k3_planner_load_speeds(k3_planner *p, const char *rates_path, k3_error *err);
void k3_planner_close(k3_planner *p);


#endif
