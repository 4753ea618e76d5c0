/* plan_speeds.h - the speeds the memory plan is weighed at, from what this
 * machine has measured (docs/ARCHITECTURE.md, "Weights and the memory budget"). */
#ifndef K3_PLAN_SPEEDS_H
#define K3_PLAN_SPEEDS_H

#include "config.h"
#include "k3.h"
#include "planner.h"

/* The planner's speeds for model `c` stored in model_dir, with n_threads
 * compute threads: from rates_path (a --rates file: {"matvec_gbps":
 * {"bf16": .., "mxfp4": .., ...}, optional "disk_gbps"}) when given; else
 * from k3 plan's cached probes in $XDG_CACHE_HOME/k3 (kernel_rates.json for
 * this CPU, thread count and engine build; disk_rates.json under the
 * model's filesystem); each speed not found stays the
 * default (k3_plan_default_speeds). out->source says which. A rates file
 * that cannot be read or lacks a format the model uses: -1 with err. */
int k3_plan_speeds_load(const char *rates_path, int n_threads, const char *model_dir, const k3_config *c,
                        k3_plan_speeds *out, k3_error *err);

#endif
