/* model_facts.h - what a person wants to know about a model, in words:
 * `/show` in both chat front ends (from the loaded model) and `k3 models`
 * (from a directory's config.json, without loading anything). */
#ifndef K3_MODEL_FACTS_H
#define K3_MODEL_FACTS_H

#include <stddef.h>
#include <stdint.h>
#include "k3.h"

/* "561.3 MB", "1.03 TB": decimal units, as disks are sold. */
void model_fmt_bytes(char *buf, size_t cap, double bytes);

/* Bytes of the regular files directly in dir (a checkpoint or packed
 * directory keeps its weights at the top); -1 if dir cannot be read. */
int64_t model_dir_bytes(const char *dir);

/* The /show text for a loaded model (malloc'd, lines separated by '\n'):
 * name and path, a random-weights warning when the config carries the
 * k3 gen marker, architecture, layers, experts, dtype, context, size on
 * disk and the memory plan. NULL when out of memory. */
char *model_facts_text(const k3_model *m, const char *model_dir);

/* One line about a model directory from its config.json alone, for
 * `k3 models`: "kimi_linear, 12 layers, 24 experts top-4, bfloat16" with
 * ", random weights" and ", packed" when they apply. Returns 0, or -1 when
 * dir has no readable config.json (why goes to why_out). */
int model_dir_summary(const char *dir, char *out, size_t cap, char *why_out, size_t why_cap);

#endif
