/* k3_sampler.h - choose the next token from logits.
 *
 * temperature 0 = greedy (argmax, lowest id on ties). Otherwise the filters
 * apply in the llama.cpp order: top-k, then top-p (nucleus) and min-p on the
 * softmax at the given temperature, then a draw from a seeded xorshift
 * generator: the same seed and logits give the same tokens. */
#ifndef K3_SAMPLER_H
#define K3_SAMPLER_H

#include <stdint.h>

typedef struct k3_sampler {
    float temperature;   /* 0 = greedy */
    int top_k;           /* 0 = off */
    float top_p;         /* 1 = off */
    float min_p;         /* 0 = off */
    uint64_t seed;
    uint64_t rng_state;  /* set by k3_sampler_init */
    /* scratch, owned */
    int n_vocab;
    float *probs;
    int *order;
} k3_sampler;

/* Fill in parameters first, then init. Returns 0 or -1 (out of memory). */
int k3_sampler_init(k3_sampler *s, int n_vocab);
void k3_sampler_free(k3_sampler *s);
int k3_sample(k3_sampler *s, const float *logits);

#endif
