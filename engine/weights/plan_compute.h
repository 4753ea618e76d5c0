/* plan_compute.h - a decode token's matrix work timed at a model's widths
 * (plan_compute.c), for k3 plan's time model. */
#ifndef K3_PLAN_COMPUTE_H
#define K3_PLAN_COMPUTE_H

#include <stddef.h>
#include "dtype.h"
#include "config.h"

/* layer_s[l] for l < n_layers: seconds of layer l's matrices for one token
 * (its trunk's, then top_k routed experts in a wave); layer_s[n_layers]:
 * the head's. Trunk matrices in trunk_dt, experts in expert_dt, n_threads
 * threads, weights spread through arena_bytes of memory. *kinds: the
 * layer kinds timed (attention kind x MoE or dense; the layers of a kind
 * share one figure), the head not counted. */
int k3_plan_time_layers(const k3_config *c, k3_dtype trunk_dt, k3_dtype expert_dt, int n_threads, size_t arena_bytes,
                        double *layer_s, int *kinds, k3_error *err);

/* The weights in the trunk matrices that probe multiplies for layer l
 * (n_layers: the head): what the layer's unit holds in matrices, which
 * k3_planner_probe_compute checks before it times anything. */
double k3_plan_layer_matrix_weights(const k3_config *c, int l);

#endif
