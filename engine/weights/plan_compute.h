/* plan_compute.h - a decode token's matrix work timed at a model's widths
 * (plan_compute.c), for k3 plan's time model. */
#ifndef K3_PLAN_COMPUTE_H
#define K3_PLAN_COMPUTE_H

#include <stddef.h>
#include <stdint.h>
#include "dtype.h"
#include "config.h"

/* layer_s[l] for l < n_layers: seconds of layer l's matrices for one token
 * (its trunk's, then top_k routed experts in a wave); layer_s[n_layers]:
 * the head's. Trunk matrices in trunk_dt, experts in expert_dt, n_threads
 * threads, weights spread through arena_bytes of memory. *kinds: the
 * layer kinds timed (attention kind x MoE or dense; the layers of a kind
 * share one figure), the head not counted. */
/* A reader in the background: start() begins reading, stop() ends it and
 * gives the bytes read since start(). */
typedef struct k3_plan_reader {
    void (*start)(void *ctx);
    uint64_t (*stop)(void *ctx);
    void *ctx;
} k3_plan_reader;

/* With a reader (else NULL): *read_share, the reader's speed while the
 * layers compute over all the threads, as a share of its speed alone (0:
 * not measured). Decode reads while it computes, and on a machine with few
 * cores the reader's threads, the kernel's work for each read and the
 * compute take turns: on this 2-core VM decode's reads got 64-95% of the
 * probe's speed. Measured: one layer of each kind and the head round and
 * round for 0.3 s while the reader reads, against 0.3 s of reading alone,
 * in alternate windows of 0.15 s. */
/* *miss_expert_s: seconds of one routed expert's matrices over all the
 * threads, as the engine runs an expert whose page is read for this token
 * (0: the model has no routed experts). A layer's misses are computed one
 * by one as their reads arrive, so part of their reads hides under the
 * layer's expert compute; plan_model.c needs this figure to count how
 * much. */
int k3_plan_time_layers(const k3_config *c, k3_dtype trunk_dt, k3_dtype expert_dt, int n_threads, size_t arena_bytes,
                        const k3_plan_reader *reader, double *layer_s, int *kinds, double *read_share,
                        double *miss_expert_s, k3_error *err);

/* The weights in the trunk matrices that probe multiplies for layer l
 * (n_layers: the head): what the layer's unit holds in matrices, which
 * k3_planner_probe_compute checks before it times anything. */
double k3_plan_layer_matrix_weights(const k3_config *c, int l);

#endif
