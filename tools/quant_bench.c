/* quant_bench.c - how fast `k3 pack --trunk/--experts` quantizes: weights
 * per second of each writable block type (engine/kernels/quant_quantize.c)
 * on one thread, over rows of Gaussian weights (the K-quants' search costs
 * depend a little on the data), best of several repetitions on this noisy
 * VM, and what that means for Kimi K3's trunk (about 56.7 G weights: 113.5
 * GB in bf16) on the threads pack would use.
 *
 * usage: quant_bench [--quick]   (--quick: fewer weights and repetitions) */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "k3_util.h"
#include "quant_quantize.h"
#include "quant_types.h"

/* Kimi K3's trunk in weights (docs/MODEL.md: 113.5 GB of bf16). */
#define K3_TRUNK_WEIGHTS 56.75e9

/* xorshift64 + Box-Muller: reproducible Gaussian weights of scale 0.02. */
static void gaussian_weights(float *x, int64_t n)
{
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (int64_t i = 0; i < n; i += 2) {
        double u[2];
        for (int k = 0; k < 2; k++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            u[k] = ((double)(s >> 11) + 0.5) / 9007199254740992.0;
        }
        double r = sqrt(-2.0 * log(u[0])) * 0.02;
        x[i] = (float)(r * cos(6.283185307179586 * u[1]));
        if (i + 1 < n) x[i + 1] = (float)(r * sin(6.283185307179586 * u[1]));
    }
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    const int64_t n = quick ? (1 << 18) : (1 << 21);
    const int reps = quick ? 2 : 5;
    float *x = malloc((size_t)n * sizeof *x);
    uint8_t *out = malloc((size_t)n * 2);
    if (!x || !out) { fprintf(stderr, "quant_bench: out of memory\n"); return 1; }
    gaussian_weights(x, n);
    int threads = omp_get_max_threads();
    printf("quantize, 1 thread, %lld Gaussian weights, best of %d; K3 trunk (%.1f G weights) on %d threads\n",
           (long long)n, reps, K3_TRUNK_WEIGHTS / 1e9, threads);
    printf("%-6s %12s %16s\n", "type", "M weights/s", "K3 trunk (min)");
    for (int i = 0; i < k3_quant_type_count(); i++) {
        const k3_quant_type *t = k3_quant_type_at(i);
        if (!k3_quant_can_quantize(t)) continue;
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = (double)k3_now_ns();
            k3_quant_quantize(t, x, n, out);
            double dt = ((double)k3_now_ns() - t0) * 1e-9;
            if (dt < best) best = dt;
        }
        double rate = (double)n / best;
        printf("%-6s %12.1f %16.1f\n", t->name, rate / 1e6, K3_TRUNK_WEIGHTS / (rate * threads) / 60.0);
    }
    free(x);
    free(out);
    return 0;
}
