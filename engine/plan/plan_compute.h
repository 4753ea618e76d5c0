/* plan_compute.h - a decode token's matrix work timed at a model's widths
 * (plan_compute.c), for k3 plan's time model. */
#ifndef K3_PLAN_COMPUTE_H
#define K3_PLAN_COMPUTE_H

#include <stddef.h>
#include <stdint.h>
#include "dtype.h"
#include "config.h"
#include "k3.h"
#include "k3_plan.h"

/* A matrix format the probe times: a dtype and, for K3_DT_GGML, its
 * block type (quant_types.h). */
typedef struct k3_plan_format {
    k3_dtype dtype;
    const struct k3_quant_type *qtype;
} k3_plan_format;

/* A reader in the background: start() begins reading, stop() ends it and
 * gives the bytes read since start(). */
typedef struct k3_plan_reader {
    void (*start)(void *ctx);
    uint64_t (*stop)(void *ctx);
    void *ctx;
} k3_plan_reader;

/* layer_s[l] for l < n_layers: seconds of layer l's matrices for one token
 * (its trunk's, then top_k routed experts in a wave); layer_s[n_layers]:
 * the head's. Trunk matrices in trunk_dt, experts in expert_dt, n_threads
 * threads, weights spread through arena_bytes of memory.
 * *out gets the other figures but probe_s (the caller's, who opens the
 * reader): the layer kinds timed (attention kind x MoE or dense; the
 * layers of a kind share one figure; the head not counted), and one routed
 * expert's matrices over all the threads as the engine runs an expert
 * whose page is read for this token (plan_model.c counts from it how much
 * of a layer's miss reads hides under its expert compute).
 * With a reader (else NULL) the reads beside compute are measured too: the
 * layers round and round for 0.3 s while the reader reads, against 0.3 s
 * of reading alone and 0.3 s of the layers alone, in alternate windows of
 * 0.15 s. read_share is the reader's speed beside the layers over its
 * speed alone (on a machine with few cores the reader's threads, the
 * kernel's work for each read and the compute take turns);
 * slowdown_s_per_gb how much longer the layers take per GB it reads
 * meanwhile (the same turns, seen from the compute). Both 0 without one. */
int k3_plan_time_layers(const k3_config *c, k3_plan_format trunk_dt, k3_plan_format expert_dt, int n_threads, size_t arena_bytes,
                        const k3_plan_reader *reader, double *layer_s, k3_compute_figures *out, k3_error *err);

/* The weights in the trunk matrices that probe multiplies for layer l
 * (n_layers: the head): what the layer's unit holds in matrices, which
 * k3_planner_probe_compute checks before it times anything. */
double k3_plan_layer_matrix_weights(const k3_config *c, int l);

#endif
