/* plan_compute.h - a decode token's matrix work timed at a model's widths
 * (plan_compute.c), for k3 plan's time model. */
#ifndef K3_PLAN_COMPUTE_H
#define K3_PLAN_COMPUTE_H

#include <stddef.h>
#include <stdint.h>
#include "dtype.h"
#include "config.h"

/* A reader in the background: start() begins reading, stop() ends it and
 * gives the bytes read since start(). */
typedef struct k3_plan_reader {
    void (*start)(void *ctx);
    uint64_t (*stop)(void *ctx);
    void *ctx;
} k3_plan_reader;

/* What k3_plan_time_layers measures besides layer_s. */
typedef struct k3_plan_timed {
    int kinds;                  /* layer kinds timed (attention kind x MoE or dense; the layers of a
                                 * kind share one figure), the head not counted */
    double miss_expert_s;       /* one routed expert's matrices over all the threads, as the engine
                                 * runs an expert whose page is read for this token (0: the model has
                                 * no routed experts). A layer's misses are computed one by one as
                                 * their reads arrive, so part of their reads hides under the layer's
                                 * expert compute; plan_model.c needs this figure to count how much */
    double read_share;          /* with a reader: its speed while the layers compute over all the
                                 * threads, as a share of its speed alone (0: not measured). On a
                                 * machine with few cores the reader's threads, the kernel's work for
                                 * each read and the compute take turns: on this 2-core VM decode's
                                 * reads got 64-95% of the probe's speed */
    double slowdown_s_per_gb;   /* with a reader: seconds the layers take longer per GB it reads
                                 * while they compute (the same turns, seen from the compute) */
} k3_plan_timed;

/* layer_s[l] for l < n_layers: seconds of layer l's matrices for one token
 * (its trunk's, then top_k routed experts in a wave); layer_s[n_layers]:
 * the head's. Trunk matrices in trunk_dt, experts in expert_dt, n_threads
 * threads, weights spread through arena_bytes of memory.
 * With a reader (else NULL) the reads beside compute are measured too: the
 * layers round and round for 0.3 s while the reader reads, against 0.3 s
 * of reading alone and 0.3 s of the layers alone, in alternate windows of
 * 0.15 s. */
int k3_plan_time_layers(const k3_config *c, k3_dtype trunk_dt, k3_dtype expert_dt, int n_threads, size_t arena_bytes,
                        const k3_plan_reader *reader, double *layer_s, k3_plan_timed *out, k3_error *err);

/* The weights in the trunk matrices that probe multiplies for layer l
 * (n_layers: the head): what the layer's unit holds in matrices, which
 * k3_planner_probe_compute checks before it times anything. */
double k3_plan_layer_matrix_weights(const k3_config *c, int l);

#endif
