/* test_quant_matvec.c - the GGUF block-type matvec (engine/kernels/
 * quant_matvec.c) against plain scalar versions: the register-decoding
 * kernel of every block type, and the plain kernels F32/F16/BF16 go to,
 * equal k3_dot_f32 over the scalar decoder's row bit for bit (the canonical
 * order) at odd row counts; the batched matmul's decoded rows equal the
 * scalar decoder's weights; the forced-scalar reference equals a
 * left-to-right loop exactly and a float64 sum closely; results do not
 * change with the thread count; hand-computed rows of five types; the
 * batched matmul equals the matvec token by token; the IQ2/IQ3 grids
 * against points of ggml-common.h, their kernels on extreme blocks and two
 * hand-computed rows; the q8 activation path of every block type against
 * its scalar contract (random and extreme blocks, the IQ fixtures'
 * tensors) and the exact product. tests/arch_check.sh runs
 * this binary on the generic and aarch64 builds too. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gguf.h"
#include "kernels.h"
#include "quant_grids.h"
#include "quant_iq.h"
#include "quant_iq1.h"
#include "quant_matvec.h"
#include "quant_types.h"
#include "test.h"

/* xorshift64: the test's random bytes. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* Random blocks of type t with tame scales (f16 scales in +-[2^-10, 2^-4],
 * E8M0 bytes 118..130), so every product is finite. */
static void random_matrix(const k3_quant_type *t, uint8_t *data, int64_t n_blocks)
{
    for (int64_t i = 0; i < n_blocks * t->block_bytes; i++) data[i] = (uint8_t)rnd();
    for (int64_t b = 0; b < n_blocks; b++) {
        uint8_t *blk = data + b * t->block_bytes;
        int halves[2] = {-1, -1};
        switch (t->ggml_id) {
        case K3_GGML_F16: case K3_GGML_Q8_0: case K3_GGML_Q4_0: case K3_GGML_Q5_0: case K3_GGML_IQ4_NL:
        case K3_GGML_IQ4_XS: case K3_GGML_IQ2_XXS: case K3_GGML_IQ2_XS: case K3_GGML_IQ2_S: case K3_GGML_IQ3_XXS:
        case K3_GGML_IQ3_S: case K3_GGML_IQ1_S: halves[0] = 0; break;
        case K3_GGML_IQ1_M: {   /* the f16 d is the top nibbles of the four u16 scale words */
            uint16_t bits = (uint16_t)(((rnd() & 1) << 15) | ((5 + rnd() % 7) << 10) | (rnd() & 0x3FF));
            for (int k = 0; k < 4; k++) blk[49 + 2 * k] = (uint8_t)((blk[49 + 2 * k] & 0x0F) | ((bits >> (4 * k)) & 0x0F) << 4);
        } break;
        case K3_GGML_Q4_K: case K3_GGML_Q5_K: case K3_GGML_Q4_1: case K3_GGML_Q5_1: halves[0] = 0; halves[1] = 2; break;
        case K3_GGML_Q2_K: halves[0] = 80; halves[1] = 82; break;
        case K3_GGML_Q3_K: halves[0] = 108; break;
        case K3_GGML_Q6_K: halves[0] = 208; break;
        case K3_GGML_MXFP4: blk[0] = (uint8_t)(118 + rnd() % 13); break;
        case K3_GGML_BF16: blk[1] = (uint8_t)((blk[1] & 0x80) | (0x3C + rnd() % 4)); break;
        case K3_GGML_F32: { float f = (float)((int)(rnd() % 2001) - 1000) / 256.0f; memcpy(blk, &f, 4); } break;
        default: break;
        }
        for (int h = 0; h < 2; h++) {
            if (halves[h] < 0) continue;
            uint16_t bits = (uint16_t)(((rnd() & 1) << 15) | ((5 + rnd() % 7) << 10) | (rnd() & 0x3FF));
            blk[halves[h]] = (uint8_t)bits;
            blk[halves[h] + 1] = (uint8_t)(bits >> 8);
        }
    }
}

/* y from the vector path, and both references for each row. */
typedef struct { int64_t rows, cols; uint8_t *data; float *x, *y, *want_canonical, *want_loop; double *want_f64; } case_t;

/* A random matrix and x, with each row's canonical (decode + k3_dot_f32),
 * left-to-right and float64 references. */
static case_t make_case(const k3_quant_type *t, int64_t rows, int64_t cols)
{
    case_t c = {.rows = rows, .cols = cols};
    const int64_t n_blocks = rows * cols / t->block_elems;
    c.data = malloc((size_t)(n_blocks * t->block_bytes));
    c.x = malloc((size_t)cols * sizeof *c.x);
    c.y = malloc((size_t)rows * sizeof *c.y);
    c.want_canonical = malloc((size_t)rows * sizeof(float));
    c.want_loop = malloc((size_t)rows * sizeof(float));
    c.want_f64 = malloc((size_t)rows * sizeof(double));
    random_matrix(t, c.data, n_blocks);
    for (int64_t i = 0; i < cols; i++) c.x[i] = (float)((int)(rnd() % 2001) - 1000) / 500.0f;
    float *w = malloc((size_t)cols * sizeof *w);
    const uint64_t row_bytes = k3_quant_row_bytes(t, cols);
    for (int64_t r = 0; r < rows; r++) {
        k3_quant_decode_scalar(t, c.data + r * row_bytes, cols, w);
        c.want_canonical[r] = k3_dot_f32(w, c.x, cols);      /* SIMD canonical order */
        float loop = 0.0f;
        double f64 = 0.0;
        for (int64_t i = 0; i < cols; i++) {
            loop += w[i] * c.x[i];
            f64 += (double)w[i] * (double)c.x[i];
        }
        c.want_loop[r] = loop;
        c.want_f64[r] = f64;
    }
    free(w);
    return c;
}

/* What make_case allocated. */
static void free_case(case_t *c)
{
    free(c->data); free(c->x); free(c->y); free(c->want_canonical); free(c->want_loop); free(c->want_f64);
}

/* 1 if every row of the vector path equals the canonical reference's bits. */
static int canonical_equal(const k3_quant_type *t, int64_t rows, int64_t cols, char *why)
{
    case_t c = make_case(t, rows, cols);
    int ok = k3_quant_matvec(c.y, t, c.data, rows, cols, c.x) == 0;
    for (int64_t r = 0; ok && r < rows; r++)
        if (memcmp(&c.y[r], &c.want_canonical[r], 4)) {
            sprintf(why, "%s %lldx%lld row %lld: %.9g, decode + k3_dot_f32 %.9g", t->name, (long long)rows,
                    (long long)cols, (long long)r, c.y[r], c.want_canonical[r]);
            ok = 0;
        }
    free_case(&c);
    return ok;
}

/* IQ1_S / IQ1_M weight w (0..255) of a block, computed on its own from the
 * layout (docs/MODEL.md): its 8-weight group g = w / 8, the group's grid
 * index, scale and shift sign, then (d * (2 s + 1)) * (level + delta). */
static float iq1_weight_plain(int is_m, const uint8_t *blk, int w)
{
    const int g = w / 8;
    unsigned index, s, negative;
    uint16_t d_bits;
    if (!is_m) {
        const unsigned qh = blk[34 + 2 * (g / 4)] | blk[35 + 2 * (g / 4)] << 8;
        index = blk[2 + g] + 256 * ((qh >> (3 * (g % 4))) & 7);
        s = (qh >> 12) & 7;
        negative = qh >> 15;
        d_bits = (uint16_t)(blk[0] | blk[1] << 8);
    } else {
        const unsigned qh = blk[32 + g / 2] >> (4 * (g % 2));
        index = blk[g] + 256 * (qh & 7);
        negative = (qh >> 3) & 1;
        const int chunk = g / 2;   /* 16 weights per 3-bit scale, 4 scales per u16 word */
        const unsigned word = blk[48 + 2 * (chunk / 4)] | blk[49 + 2 * (chunk / 4)] << 8;
        s = (word >> (3 * (chunk % 4))) & 7;
        d_bits = (uint16_t)((blk[49] >> 4) | (blk[51] >> 4) << 4 | (blk[53] >> 4) << 8 | (blk[55] >> 4) << 12);
    }
    const int level = (int8_t)(k3_iq1_grid[index] >> (8 * (w % 8)));
    const float dl = k3_f16_to_f32(d_bits) * (float)(2 * s + 1);
    return dl * ((float)level + (negative ? -0.125f : 0.125f));
}

/* The point of largest magnitude sum among a grid's n points of `weights`
 * bytes. */
static int largest_point(const uint8_t *grid, int n, int weights)
{
    int best = 0, best_sum = -1;
    for (int i = 0; i < n; i++) {
        int sum = 0;
        for (int j = 0; j < weights; j++) sum += grid[i * weights + j];
        if (sum > best_sum) {
            best_sum = sum;
            best = i;
        }
    }
    return best;
}

/* A block of IQ2/IQ3 type t whose every point is the grid's largest, all
 * signs positive, every scale field 15 (sub-scale 31), d left 0 (the
 * caller sets it): the largest products the type allows. */
static void iq_extreme_block(const k3_quant_type *t, uint8_t *blk)
{
    const k3_iq_grids *g = k3_iq_grids_get();
    memset(blk, 0, t->block_bytes);
    switch (t->ggml_id) {
    case K3_GGML_IQ2_XXS: {   /* 4 index bytes, then sign indices 0 and scale 15 in the top nibble */
        const int p = largest_point(&g->iq2_xxs[0][0], 256, 8);
        for (int k = 0; k < 8; k++) {
            memset(blk + 2 + 8 * k, p, 4);
            blk[9 + 8 * k] = 0xF0;
        }
    } break;
    case K3_GGML_IQ2_XS: {   /* u16 words: the 9-bit index, sign index 0; scale bytes 0xFF */
        const int p = largest_point(&g->iq2_xs[0][0], 512, 8);
        for (int k = 0; k < 32; k++) {
            blk[2 + 2 * k] = (uint8_t)p;
            blk[3 + 2 * k] = (uint8_t)(p >> 8);
        }
        memset(blk + 66, 0xFF, 8);
    } break;
    case K3_GGML_IQ2_S: {   /* low index bytes, 2 high bits per run, sign bytes 0, scales 0xFF */
        const int p = largest_point(&g->iq2_s[0][0], 1024, 8);
        memset(blk + 2, p & 0xFF, 32);
        memset(blk + 66, (p >> 8) * 0x55, 8);
        memset(blk + 74, 0xFF, 8);
    } break;
    case K3_GGML_IQ3_XXS: {   /* index bytes, then per group sign indices 0 and scale 15 */
        const int p = largest_point(&g->iq3_xxs[0][0], 256, 4);
        memset(blk + 2, p, 64);
        for (int k = 0; k < 8; k++) blk[69 + 4 * k] = 0xF0;
    } break;
    case K3_GGML_IQ3_S: {   /* low index bytes, the 9th bits, sign bytes 0, scales 0xFF */
        const int p = largest_point(&g->iq3_s[0][0], 512, 4);
        memset(blk + 2, p & 0xFF, 64);
        memset(blk + 66, p >> 8 ? 0xFF : 0, 8);
        memset(blk + 106, 0xFF, 4);
    } break;
    default: break;
    }
}

int main(void)
{
    char why[256] = "";
    k3_kernels_force_scalar(0);

    TEST_BEGIN("quant matvec: every block type decoded in registers equals decode + k3_dot_f32 bit for bit (20 types, 1 to 13 rows, 1 to 16 blocks)");
    {
        int ok = 1, n_block_types = 0;
        for (int i = 0; ok && i < k3_quant_type_count(); i++) {
            const k3_quant_type *t = k3_quant_type_at(i);
            if (t->block_elems == 1) continue;
            n_block_types++;
            const int64_t blocks[3] = {1, 9, 16};
            const int64_t rows[3] = {1, 7, 13};
            for (int k = 0; ok && k < 3; k++) ok = canonical_equal(t, rows[k], blocks[k] * t->block_elems, why);
        }
        CHECK(ok, "%s", why);
        CHECK(n_block_types == 20, "%d block types in the table, the test names 20", n_block_types);
    }
    TEST_END();

    TEST_BEGIN("quant matvec: F32, F16 and BF16 (the plain kernels of matvec.c) equal decode + k3_dot_f32");
    {
        int ok = 1;
        const char *names[] = {"F32", "F16", "BF16"};
        for (int i = 0; ok && i < 3; i++) ok = canonical_equal(k3_quant_type_by_name(names[i]), 5, 1000, why);
        CHECK(ok, "%s", why);
    }
    TEST_END();

    TEST_BEGIN("quant matmul: the decoded rows (one-hot tokens) equal the scalar decoder's weights (21 types; MXFP4 at all 253 finite scales)");
    {
        /* token t = e_t makes Y[t][r] = W[r][t] exactly in the canonical
         * order (one fma by 1, the rest adds of +-0), so this reads back
         * the batched path's decoded matrix */
        for (int i = 0; i < k3_quant_type_count(); i++) {
            const k3_quant_type *t = k3_quant_type_at(i);
            const int64_t rows = 7, cols = t->block_elems == 1 ? 96 : t->block_elems == 32 ? 64 : 256;
            case_t c = make_case(t, rows, cols);
            float *X = calloc((size_t)(cols * cols), sizeof *X), *Y = malloc((size_t)(cols * rows) * sizeof *Y);
            float *w = malloc((size_t)cols * sizeof *w);
            for (int64_t k = 0; k < cols; k++) X[k * cols + k] = 1.0f;
            CHECK(k3_quant_matmul(Y, t, c.data, rows, cols, X, (int)cols) == 0, "%s: matmul failed", t->name);
            int64_t bad = -1;
            for (int64_t r = 0; r < rows && bad < 0; r++) {
                k3_quant_decode_scalar(t, c.data + r * k3_quant_row_bytes(t, cols), cols, w);
                for (int64_t k = 0; k < cols && bad < 0; k++)
                    if (Y[k * rows + r] != w[k]) bad = r * cols + k;
            }
            CHECK(bad < 0, "%s weight (%lld, %lld): batched %.9g, decoder %.9g", t->name, (long long)(bad / cols),
                  (long long)(bad % cols), bad < 0 ? 0.0 : Y[(bad % cols) * rows + bad / cols], bad < 0 ? 0.0 : w[bad % cols]);
            free(X); free(Y); free(w);
            free_case(&c);
        }
        /* MXFP4 at every finite scale: row e is one block with E8M0 byte e
         * (0 and 1 the subnormal scales; above 252 a weight could be inf,
         * and inf x 0 would spoil the read-back) */
        enum { SCALES = 253 };
        const k3_quant_type *mx = k3_quant_type_by_name("MXFP4");
        uint8_t *blocks = malloc(SCALES * 17);
        float *X = calloc(32 * 32, sizeof *X), *Y = malloc(32 * SCALES * sizeof *Y), w[32];
        for (int e = 0; e < SCALES; e++) {
            blocks[e * 17] = (uint8_t)e;
            for (int k = 1; k < 17; k++) blocks[e * 17 + k] = (uint8_t)rnd();
        }
        for (int k = 0; k < 32; k++) X[k * 32 + k] = 1.0f;
        k3_quant_matmul(Y, mx, blocks, SCALES, 32, X, 32);
        int bad = -1;
        for (int e = 0; e < SCALES && bad < 0; e++) {
            k3_quant_decode_scalar(mx, blocks + e * 17, 32, w);
            for (int k = 0; k < 32; k++)
                if (memcmp(&Y[k * SCALES + e], &w[k], 4) && !(Y[k * SCALES + e] == 0 && w[k] == 0)) bad = e;
        }
        CHECK(bad < 0, "MXFP4 with E8M0 byte %d: the batched decode differs from the decoder", bad);
        free(blocks); free(X); free(Y);
    }
    TEST_END();

    TEST_BEGIN("quant matvec: the scalar reference is the left-to-right loop, and the vector path is within 1e-5 of float64 (every type)");
    {
        for (int i = 0; i < k3_quant_type_count(); i++) {
            const k3_quant_type *t = k3_quant_type_at(i);
            case_t c = make_case(t, 6, 2048);
            k3_kernels_force_scalar(1);
            k3_quant_matvec(c.y, t, c.data, c.rows, c.cols, c.x);
            k3_kernels_force_scalar(0);
            int bad = -1;
            for (int64_t r = 0; r < c.rows; r++) if (memcmp(&c.y[r], &c.want_loop[r], 4)) bad = (int)r;
            CHECK(bad < 0, "%s row %d: scalar %.9g, loop %.9g", t->name, bad, c.y[bad < 0 ? 0 : bad],
                  c.want_loop[bad < 0 ? 0 : bad]);
            k3_quant_matvec(c.y, t, c.data, c.rows, c.cols, c.x);
            for (int64_t r = 0; r < c.rows; r++) {
                /* the scale of the sum: the float64 sum of |w x| */
                float *w = malloc((size_t)c.cols * sizeof *w);
                k3_quant_decode_scalar(t, c.data + r * k3_quant_row_bytes(t, c.cols), c.cols, w);
                double mag = 0;
                for (int64_t k = 0; k < c.cols; k++) mag += fabs((double)w[k] * c.x[k]);
                free(w);
                CHECK(fabs(c.y[r] - c.want_f64[r]) <= 1e-5 * mag + 1e-30, "%s row %lld: %.9g vs float64 %.17g (scale %g)",
                      t->name, (long long)r, c.y[r], c.want_f64[r], mag);
            }
            free_case(&c);
        }
    }
    TEST_END();

    TEST_BEGIN("quant matvec: the same bits on 1, 2 and 3 threads, 321 rows (a matrix large enough to split, 21 types)");
    {
        for (int i = 0; i < k3_quant_type_count(); i++) {
            const k3_quant_type *t = k3_quant_type_at(i);
            enum { ROWS = 321 };
            case_t c = make_case(t, ROWS, 1024);
            float *y1 = malloc(ROWS * sizeof *y1);
            omp_set_num_threads(1);
            k3_quant_matvec(y1, t, c.data, c.rows, c.cols, c.x);
            CHECK(!memcmp(y1, c.want_canonical, ROWS * sizeof *y1), "%s: 1 thread differs from decode + k3_dot_f32",
                  t->name);
            for (int threads = 2; threads <= 3; threads++) {
                omp_set_num_threads(threads);
                k3_quant_matvec(c.y, t, c.data, c.rows, c.cols, c.x);
                CHECK(!memcmp(y1, c.y, ROWS * sizeof *y1), "%s: %d threads differ from 1", t->name, threads);
            }
            omp_set_num_threads(2);
            free(y1);
            free_case(&c);
        }
    }
    TEST_END();

    TEST_BEGIN("quant matmul: each token's row equals k3_quant_matvec bit for bit, vector and scalar, 1 to 3 threads, 97 rows (every type)");
    {
        enum { TOKENS = 5, ROWS = 97 };
        for (int i = 0; i < k3_quant_type_count(); i++) {
            const k3_quant_type *t = k3_quant_type_at(i);
            case_t c = make_case(t, ROWS, 1024);
            float *X = malloc(TOKENS * 1024 * sizeof *X), *Y = malloc(TOKENS * ROWS * sizeof *Y);
            float *Y2 = malloc(TOKENS * ROWS * sizeof *Y2), *y = malloc(ROWS * sizeof *y);
            for (int k = 0; k < TOKENS * 1024; k++) X[k] = (float)((int)(rnd() % 2001) - 1000) / 300.0f;
            for (int scalar = 0; scalar < 2; scalar++) {
                k3_kernels_force_scalar(scalar);
                omp_set_num_threads(1);
                CHECK(k3_quant_matmul(Y, t, c.data, ROWS, 1024, X, TOKENS) == 0, "matmul");
                for (int threads = 2; threads <= 3; threads++) {
                    omp_set_num_threads(threads);
                    k3_quant_matmul(Y2, t, c.data, ROWS, 1024, X, TOKENS);
                    CHECK(!memcmp(Y, Y2, TOKENS * ROWS * sizeof *Y), "%s %s: 1 and %d threads differ", t->name,
                          scalar ? "scalar" : "vector", threads);
                }
                omp_set_num_threads(2);
                for (int tok = 0; tok < TOKENS; tok++) {
                    k3_quant_matvec(y, t, c.data, ROWS, 1024, X + tok * 1024);
                    CHECK(!memcmp(y, Y + tok * ROWS, ROWS * sizeof *y), "%s %s token %d: matmul differs from matvec",
                          t->name, scalar ? "scalar" : "vector", tok);
                }
            }
            k3_kernels_force_scalar(0);
            free(X); free(Y); free(Y2); free(y);
            free_case(&c);
        }
    }
    TEST_END();

    TEST_BEGIN("quant q8 activations: vector rows equal the scalar contract bit for bit (20 types; 1, 7, 13 and 321 rows; 1-3 threads), matmul equals matvec");
    {
        const char *names[] = {"Q8_0", "Q4_0", "Q5_0", "IQ4_NL", "MXFP4", "Q4_K", "Q6_K", "Q5_K", "Q2_K", "Q3_K", "IQ4_XS",
                               "IQ1_S", "IQ1_M", "Q4_1", "Q5_1", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S"};
        k3_kernels_set_activations_q8(1);
        for (int i = 0; i < 20; i++) {
            const k3_quant_type *t = k3_quant_type_by_name(names[i]);
            /* the last shape is large enough to split across threads */
            const int64_t rows[4] = {1, 7, 13, 321}, blocks[4] = {1, 9, 16, t->block_elems == 32 ? 32 : 4};
            for (int k = 0; k < 4; k++) {
                const int64_t cols = blocks[k] * t->block_elems;
                case_t c = make_case(t, rows[k], cols);
                float *want = malloc((size_t)rows[k] * sizeof *want);
                k3_kernels_force_scalar(1);
                CHECK(k3_quant_matvec(want, t, c.data, rows[k], cols, c.x) == 0, "%s: scalar q8 failed", t->name);
                k3_kernels_force_scalar(0);
                for (int threads = 1; threads <= 3; threads++) {
                    omp_set_num_threads(threads);
                    k3_quant_matvec(c.y, t, c.data, rows[k], cols, c.x);
                    int64_t bad = -1;
                    for (int64_t r = 0; r < rows[k] && bad < 0; r++)
                        if (memcmp(&c.y[r], &want[r], 4)) bad = r;
                    CHECK(bad < 0, "%s %lldx%lld, %d threads, row %lld: vector %.9g, scalar contract %.9g", t->name,
                          (long long)rows[k], (long long)cols, threads, (long long)bad, bad < 0 ? 0.0 : c.y[bad],
                          bad < 0 ? 0.0 : want[bad]);
                }
                omp_set_num_threads(2);
                if (k == 2) {   /* the batched path: 6 tokens (4 at once, then 2 alone), each equal to its matvec */
                    enum { TOKENS = 6 };
                    float *X = malloc((size_t)(TOKENS * cols) * sizeof *X);
                    float *Y = malloc((size_t)(TOKENS * rows[k]) * sizeof *Y);
                    for (int64_t j = 0; j < TOKENS * cols; j++) X[j] = (float)((int)(rnd() % 2001) - 1000) / 300.0f;
                    CHECK(k3_quant_matmul(Y, t, c.data, rows[k], cols, X, TOKENS) == 0, "%s: q8 matmul failed", t->name);
                    for (int tok = 0; tok < TOKENS; tok++) {
                        k3_quant_matvec(c.y, t, c.data, rows[k], cols, X + tok * cols);
                        CHECK(!memcmp(c.y, Y + tok * rows[k], (size_t)rows[k] * sizeof *Y),
                              "%s token %d: q8 matmul differs from q8 matvec", t->name, tok);
                    }
                    free(X); free(Y);
                }
                free(want);
                free_case(&c);
            }
        }
        k3_kernels_set_activations_q8(0);
    }
    TEST_END();

    TEST_BEGIN("quant q8 activations: within 2% of the exact product's scale (20 types), zero x gives 0, F32/F16/BF16 stay exact");
    {
        const char *names[] = {"Q8_0", "Q4_0", "Q5_0", "IQ4_NL", "MXFP4", "Q4_K", "Q6_K", "Q5_K", "Q2_K", "Q3_K", "IQ4_XS",
                               "IQ1_S", "IQ1_M", "Q4_1", "Q5_1", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S"};
        for (int i = 0; i < 20; i++) {
            const k3_quant_type *t = k3_quant_type_by_name(names[i]);
            case_t c = make_case(t, 13, 4 * 256);
            k3_kernels_set_activations_q8(1);
            k3_quant_matvec(c.y, t, c.data, c.rows, c.cols, c.x);
            k3_kernels_set_activations_q8(0);
            float *w = malloc((size_t)c.cols * sizeof *w);
            double worst = 0;
            for (int64_t r = 0; r < c.rows; r++) {
                k3_quant_decode_scalar(t, c.data + r * k3_quant_row_bytes(t, c.cols), c.cols, w);
                double mag = 0;
                for (int64_t k = 0; k < c.cols; k++) mag += fabs((double)w[k] * c.x[k]);
                double rel = fabs(c.y[r] - c.want_f64[r]) / mag;
                if (rel > worst) worst = rel;
            }
            CHECK(k3_quant_q8_available(t), "%s: no q8 kernel", t->name);
            /* and not the exact bits: the switch took the q8 path */
            CHECK(worst <= 0.02 && memcmp(c.y, c.want_canonical, (size_t)c.rows * sizeof *c.y),
                  "%s: q8 error %.4g of the scale, or equal to the exact path", t->name, worst);
            memset(c.x, 0, (size_t)c.cols * sizeof *c.x);
            k3_kernels_set_activations_q8(1);
            k3_quant_matvec(c.y, t, c.data, c.rows, c.cols, c.x);
            k3_kernels_set_activations_q8(0);
            CHECK(c.y[0] == 0.0f && c.y[12] == 0.0f, "%s: zero x gives %g", t->name, c.y[0]);
            free(w);
            free_case(&c);
        }
        const char *exact_names[] = {"F32", "F16", "BF16"};
        for (int i = 0; i < 3; i++) {
            const k3_quant_type *t = k3_quant_type_by_name(exact_names[i]);
            case_t c = make_case(t, 5, 512);
            k3_kernels_set_activations_q8(1);
            k3_quant_matvec(c.y, t, c.data, c.rows, c.cols, c.x);
            k3_kernels_set_activations_q8(0);
            CHECK(!memcmp(c.y, c.want_canonical, 5 * sizeof *c.y), "%s under q8: not the exact path", t->name);
            free_case(&c);
        }
    }
    TEST_END();

    TEST_BEGIN("IQ grids: expanded points equal ggml-common.h's (3 per grid), the computed sign bytes are ksigns_iq2xs");
    {
        /* point index and value as ggml-common.h writes them (little-endian:
         * byte j of the value is weight j) */
        static const struct { int grid, index; uint64_t value; } points[] = {
            {0, 1, 0x080808080808082bull}, {0, 131, 0x082b2b2b19081908ull}, {0, 255, 0x2b2b2b1908081908ull},
            {1, 1, 0x080808080808082bull}, {1, 259, 0x190808080819082bull}, {1, 511, 0x2b2b2b2b2b2b2b2bull},
            {2, 1, 0x080808080808082bull}, {2, 515, 0x190808191908192bull}, {2, 1023, 0x2b2b2b2b2b2b2b2bull},
            {3, 1, 0x04040414}, {3, 131, 0x14242c1c}, {3, 255, 0x3e341c04},
            {4, 1, 0x01010103}, {4, 259, 0x05090903}, {4, 511, 0x0f0f0101}};
        const k3_iq_grids *g = k3_iq_grids_get();
        for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
            const int p = points[i].index, weights = points[i].grid < 3 ? 8 : 4;
            const uint8_t *bytes = points[i].grid == 0 ? g->iq2_xxs[p] : points[i].grid == 1 ? g->iq2_xs[p]
                                 : points[i].grid == 2 ? g->iq2_s[p] : points[i].grid == 3 ? g->iq3_xxs[p] : g->iq3_s[p];
            uint64_t got = 0;
            for (int j = 0; j < weights; j++) got |= (uint64_t)bytes[j] << (8 * j);
            CHECK(got == points[i].value, "grid %d point %d: %016llx, ggml-common.h %016llx", points[i].grid, p,
                  (unsigned long long)got, (unsigned long long)points[i].value);
        }
        /* ksigns_iq2xs's first and last rows, and the rule: low 7 bits the index, an even count of ones */
        static const uint8_t ksigns_head[8] = {0, 129, 130, 3, 132, 5, 6, 135}, ksigns_tail[4] = {252, 125, 126, 255};
        for (int i = 0; i < 8; i++) CHECK(k3_iq_signs_of((unsigned)i) == ksigns_head[i], "signs of %d", i);
        for (int i = 0; i < 4; i++) CHECK(k3_iq_signs_of((unsigned)(124 + i)) == ksigns_tail[i], "signs of %d", 124 + i);
        for (unsigned i = 0; i < 128; i++)
            CHECK((k3_iq_signs_of(i) & 127) == i && __builtin_popcount(k3_iq_signs_of(i)) % 2 == 0, "signs of %u", i);
    }
    TEST_END();

    TEST_BEGIN("IQ2/IQ3 kernels on extreme blocks (f16 d 65504, -65504, 2^-24; every index, sign and scale bit set) equal decode + k3_dot_f32, and the batched decode the decoder");
    {
        const char *names[] = {"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S"};
        const uint16_t scales[3] = {0x7BFF, 0xFBFF, 0x0001};
        enum { ROWS = 6, COLS = 512 };
        float x[COLS], w[COLS], y[ROWS], decoded[COLS];
        for (int i = 0; i < COLS; i++) x[i] = (float)((int)(rnd() % 2001) - 1000) / 500.0f;
        for (int n = 0; n < 5; n++) {
            const k3_quant_type *t = k3_quant_type_by_name(names[n]);
            const uint64_t row_bytes = k3_quant_row_bytes(t, COLS);
            uint8_t *data = malloc(ROWS * row_bytes);
            /* rows 0-2: all bytes 0xFF; rows 3-5: random; each row its own d */
            for (int r = 0; r < ROWS; r++)
                for (uint64_t b = 0; b < row_bytes; b++) data[r * row_bytes + b] = r < 3 ? 0xFF : (uint8_t)rnd();
            for (int r = 0; r < ROWS; r++)
                for (int blk = 0; blk < COLS / 256; blk++) {
                    uint8_t *d = data + r * row_bytes + blk * t->block_bytes;
                    d[0] = (uint8_t)scales[r % 3];
                    d[1] = (uint8_t)(scales[r % 3] >> 8);
                }
            CHECK(k3_quant_matvec(y, t, data, ROWS, COLS, x) == 0, "%s matvec", t->name);
            for (int r = 0; r < ROWS; r++) {
                k3_quant_decode_scalar(t, data + r * row_bytes, COLS, w);
                const float want = k3_dot_f32(w, x, COLS);
                CHECK(!memcmp(&y[r], &want, 4) && isfinite(want), "%s row %d: %.9g, decode + k3_dot_f32 %.9g", t->name,
                      r, y[r], want);
                /* the batched decode, read back with one-hot tokens for the first 16 columns */
                float X[16 * COLS] = {0}, Y[16];
                for (int k = 0; k < 16; k++) X[k * COLS + 240 + k] = 1.0f;
                k3_quant_matmul(Y, t, data + r * row_bytes, 1, COLS, X, 16);
                for (int k = 0; k < 16; k++) decoded[k] = Y[k];
                CHECK(!memcmp(decoded, w + 240, 16 * sizeof(float)), "%s row %d: batched decode of columns 240-255 differs",
                      t->name, r);
            }
            free(data);
        }
    }
    TEST_END();

    TEST_BEGIN("quant matvec: hand-computed IQ2_XXS and IQ3_S rows, vector and scalar");
    {
        /* IQ2_XXS, d 1: every point index 0 (magnitudes 8); group 0 has
         * scale 3 ((1 x 3.5) x 0.25 = 0.875) and sign index 1 on its first 8
         * weights (weight 0 negative, and weight 7 for the parity): 0.875 x 8 x
         * (4 + 24) = 196; groups 1-7 scale 0 (0.125): 7 x 32 x 1 = 224 */
        uint8_t iq2[66] = {0};
        uint16_t half = k3_f32_to_f16(1.0f);
        iq2[0] = (uint8_t)half; iq2[1] = (uint8_t)(half >> 8);
        iq2[6] = 1; iq2[9] = 3 << 4;
        /* IQ3_S, d 0.5: every point index 0 (magnitudes 1), scale nibbles 0
         * (0.5 x 1) but group 1's 2 (0.5 x 5); sign byte 0xFF on weights
         * 0-7: 0.5 x (216 - 8) + 2.5 x 32 = 184 */
        uint8_t iq3[110] = {0};
        half = k3_f32_to_f16(0.5f);
        iq3[0] = (uint8_t)half; iq3[1] = (uint8_t)(half >> 8);
        iq3[74] = 0xFF; iq3[106] = 0x20;
        float x[256], y = 0;
        for (int i = 0; i < 256; i++) x[i] = 1.0f;
        for (int scalar = 0; scalar < 2; scalar++) {
            k3_kernels_force_scalar(scalar);
            k3_quant_matvec(&y, k3_quant_type_by_name("IQ2_XXS"), iq2, 1, 256, x);
            CHECK(y == 420.0f, "IQ2_XXS %s: %g, want 420", scalar ? "scalar" : "vector", y);
            k3_quant_matvec(&y, k3_quant_type_by_name("IQ3_S"), iq3, 1, 256, x);
            CHECK(y == 184.0f, "IQ3_S %s: %g, want 184", scalar ? "scalar" : "vector", y);
        }
        k3_kernels_force_scalar(0);
    }
    TEST_END();

    TEST_BEGIN("quant IQ1_S/IQ1_M: the grid is llama.cpp's (FNV-1a of its bytes), the decoders equal a per-weight formula on random and extreme blocks, hand-computed rows vector and scalar");
    {
        uint64_t fnv = 0xcbf29ce484222325ull;
        int levels_ok = 1;
        for (int i = 0; i < 2048; i++)
            for (int j = 0; j < 8; j++) {
                const uint8_t byte = (uint8_t)(k3_iq1_grid[i] >> (8 * j));
                levels_ok &= byte == 0xFF || byte == 0x00 || byte == 0x01;
                fnv = (fnv ^ byte) * 0x100000001b3ull;
            }
        /* the hash of iq1s_grid in ggml-common.h (llama.cpp d32676d77), computed from that header */
        CHECK(levels_ok && fnv == 0x6703ed863501ae2eull && k3_iq1_grid[1] == 0xffffffffffffff01ull &&
                  k3_iq1_grid[2047] == 0x0101010101010101ull,
              "grid: levels %s, FNV-1a %#llx", levels_ok ? "ok" : "not -1/0/1", (unsigned long long)fnv);
        for (int is_m = 0; is_m < 2; is_m++) {
            const k3_quant_type *t = k3_quant_type_by_name(is_m ? "IQ1_M" : "IQ1_S");
            CHECK(t && t->block_elems == 256 && t->block_bytes == (is_m ? 56u : 50u), "IQ1 type table row");
            if (!t) continue;
            enum { BLOCKS = 64 };
            uint8_t blocks[BLOCKS * 56];
            float w[BLOCKS * 256];
            random_matrix(t, blocks, BLOCKS);
            /* the extremes: block 0 every bit set (index 2047: all +1; scale 7, negative shifts: 15 x
             * 0.875), block 1 every index and scale bit clear (index 0: all -1; scale 0, positive
             * shifts); the f16 d kept at 1 in both */
            const int bytes = (int)t->block_bytes;
            memset(blocks, 0xFF, (size_t)bytes);
            memset(blocks + bytes, 0x00, (size_t)bytes);
            for (int b = 0; b < 2; b++) {
                uint8_t *blk = blocks + b * bytes;
                if (!is_m) { blk[0] = 0x00; blk[1] = 0x3C; }
                else for (int k = 0; k < 4; k++) blk[49 + 2 * k] = (uint8_t)((blk[49 + 2 * k] & 0x0F) | ((0x3C00 >> (4 * k)) & 0x0F) << 4);
            }
            k3_quant_decode_scalar(t, blocks, BLOCKS * 256, w);
            int bad = -1;
            for (int i = 0; i < BLOCKS * 256 && bad < 0; i++) {
                const float want = iq1_weight_plain(is_m, blocks + (i / 256) * bytes, i % 256);
                if (memcmp(&want, &w[i], 4)) bad = i;
            }
            CHECK(bad < 0, "%s weight %d: decoder %.9g, formula %.9g", t->name, bad, bad < 0 ? 0.0 : w[bad],
                  bad < 0 ? 0.0 : iq1_weight_plain(is_m, blocks + (bad / 256) * bytes, bad % 256));
            CHECK(w[0] == 15.0f * 0.875f && w[256] == -0.875f, "%s extremes: %g and %g, want 13.125 and -0.875",
                  t->name, w[0], w[256]);
        }
        /* IQ1_S: d 0.5, every index 0 (all levels -1), words 0 except word 1 = 0xF000 (scale 7, shift
         * -1/8): 224 weights 0.5 x -0.875 and 32 weights 7.5 x -1.125: -98 - 270 = -368 against x = 1.
         * IQ1_M: d 1, every scale 0 and index 0 (-0.875 each), but qh[0] = 0x80 (weights 8-15 shift
         * -1/8), scale of weights 0-15 = 1 (x 3), index 1 for group 2 (weight 16 level +1):
         * 3 x 8 x -0.875 + 3 x 8 x -1.125 + 1.125 + 239 x -0.875 = -21 - 27 + 1.125 - 209.125 = -256 */
        uint8_t s_blk[50] = {0}, m_blk[56] = {0};
        const uint16_t half = k3_f32_to_f16(0.5f);
        s_blk[0] = (uint8_t)half; s_blk[1] = (uint8_t)(half >> 8);
        s_blk[37] = 0xF0;
        m_blk[32] = 0x80; m_blk[48] = 0x01; m_blk[2] = 1;
        m_blk[53] = 0xC0; m_blk[55] = 0x30;                                       /* d = 0x3C00 */
        float x[256], y = 0;
        for (int i = 0; i < 256; i++) x[i] = 1.0f;
        for (int scalar = 0; scalar < 2; scalar++) {
            k3_kernels_force_scalar(scalar);
            k3_quant_matvec(&y, k3_quant_type_by_name("IQ1_S"), s_blk, 1, 256, x);
            CHECK(y == -368.0f, "IQ1_S %s: %g, want -368", scalar ? "scalar" : "vector", y);
            k3_quant_matvec(&y, k3_quant_type_by_name("IQ1_M"), m_blk, 1, 256, x);
            CHECK(y == -256.0f, "IQ1_M %s: %g, want -256", scalar ? "scalar" : "vector", y);
        }
        k3_kernels_force_scalar(0);
    }
    TEST_END();

    TEST_BEGIN("quant matvec: hand-computed Q8_0, Q4_K, Q5_0, MXFP4 and Q6_K rows, vector and scalar");
    {
        uint8_t row[144] = {0};
        float x[256], y = 0;
        for (int i = 0; i < 256; i++) x[i] = 1.0f;
        uint16_t half = k3_f32_to_f16(0.5f);
        row[0] = (uint8_t)half; row[1] = (uint8_t)(half >> 8);
        for (int j = 0; j < 32; j++) row[2 + j] = (uint8_t)(int8_t)(j - 16);      /* sum (j - 16) = -16 */
        for (int scalar = 0; scalar < 2; scalar++) {
            k3_kernels_force_scalar(scalar);
            k3_quant_matvec(&y, k3_quant_type_by_name("Q8_0"), row, 1, 32, x);
            CHECK(y == -8.0f, "Q8_0 %s: %g, want 0.5 x -16", scalar ? "scalar" : "vector", y);
        }
        memset(row, 0, sizeof row);
        half = k3_f32_to_f16(1.0f);
        row[0] = (uint8_t)half; row[1] = (uint8_t)(half >> 8);                    /* d 1, dmin 0 */
        for (int j = 0; j < 4; j++) row[4 + j] = (uint8_t)(j + 1);               /* scales 1..4 */
        memset(row + 16, 0x21, 128);                                              /* nibbles 1 low, 2 high */
        x[40] = 3.0f;                                                             /* group 1 (high, scale 2) */
        for (int scalar = 0; scalar < 2; scalar++) {
            k3_kernels_force_scalar(scalar);
            k3_quant_matvec(&y, k3_quant_type_by_name("Q4_K"), row, 1, 256, x);
            /* groups 0..3: 32 x (1x1 + 2x2 + 3x1 + 4x2) = 512, plus weight 40 (2 x 2 = 4) counted 3x: +8 */
            CHECK(y == 520.0f, "Q4_K %s: %g, want 520", scalar ? "scalar" : "vector", y);
        }
        for (int i = 0; i < 256; i++) x[i] = (float)(i + 1);
        /* Q5_0: d 0.5, nibbles all 8, fifth bits of weights 0 and 31 set:
         * those two are +8, the other 30 are -8;
         * 0.5 (8 x 1 + 8 x 32 - 8 x (528 - 1 - 32)) = -1848 */
        uint8_t q5[22] = {0};
        half = k3_f32_to_f16(0.5f);
        q5[0] = (uint8_t)half; q5[1] = (uint8_t)(half >> 8);
        q5[2] = 0x01; q5[5] = 0x80;
        memset(q5 + 6, 0x88, 16);
        /* MXFP4: E8M0 127 (x 0.5), byte 0 = 0x7F: weight 0 is nibble 15
         * (doubled -12), weight 16 nibble 7 (doubled 12); 0.5 (-12 x 1 + 12 x 17) = 96 */
        uint8_t mx[17] = {127, 0x7F};
        for (int scalar = 0; scalar < 2; scalar++) {
            k3_kernels_force_scalar(scalar);
            k3_quant_matvec(&y, k3_quant_type_by_name("Q5_0"), q5, 1, 32, x);
            CHECK(y == -1848.0f, "Q5_0 %s: %g, want -1848", scalar ? "scalar" : "vector", y);
            k3_quant_matvec(&y, k3_quant_type_by_name("MXFP4"), mx, 1, 32, x);
            CHECK(y == 96.0f, "MXFP4 %s: %g, want 96", scalar ? "scalar" : "vector", y);
        }
        /* Q6_K: d 1, ql and qh 0 (every q = -32), scales 1 except scale 6
         * (weights 96..111) = 2; weight 100 (l = 4, sub-group 3: the high
         * nibble of ql[36], bits 6-7 of qh[4]) is 63 - 32 = 31 and x[100] = 3:
         * 240 x -32 + 15 x -64 + 2 x 31 x 3 = -8454 with x = 1 elsewhere */
        uint8_t q6[210] = {0};
        for (int i = 0; i < 16; i++) q6[192 + i] = 1;
        q6[192 + 6] = 2;
        q6[36] = 0xF0;
        q6[128 + 4] = 0xC0;
        half = k3_f32_to_f16(1.0f);
        q6[208] = (uint8_t)half; q6[209] = (uint8_t)(half >> 8);
        for (int i = 0; i < 256; i++) x[i] = 1.0f;
        x[100] = 3.0f;
        for (int scalar = 0; scalar < 2; scalar++) {
            k3_kernels_force_scalar(scalar);
            k3_quant_matvec(&y, k3_quant_type_by_name("Q6_K"), q6, 1, 256, x);
            CHECK(y == -8454.0f, "Q6_K %s: %g, want -8454", scalar ? "scalar" : "vector", y);
        }
        k3_kernels_force_scalar(0);
    }
    TEST_END();

    /* GGUF MXFP4's exact kernel looks weights up in tables built per E8M0
     * byte (quant_mxfp4_lanes.h): every byte must give the decoder's
     * value, 255 included (12 x 2^127 overflows to inf); rows e hold two
     * blocks of scale e, 256 rows run as four-row quarter streams. The q8
     * path at the same bytes against its scalar contract. */
    TEST_BEGIN("quant matvec: GGUF MXFP4 at every E8M0 byte (0-255), exact path equals decode + k3_dot_f32, q8 path its scalar contract");
    {
        enum { ROWS = 256, COLS = 64 };
        const k3_quant_type *mx = k3_quant_type_by_name("MXFP4");
        uint8_t *blocks = malloc(ROWS * 2 * 17);
        float x[COLS], w[COLS], y[ROWS], want[ROWS];
        for (int e = 0; e < ROWS; e++)
            for (int b = 0; b < 2; b++) {
                blocks[(2 * e + b) * 17] = (uint8_t)e;
                for (int k = 1; k < 17; k++) blocks[(2 * e + b) * 17 + k] = (uint8_t)rnd();
            }
        for (int k = 0; k < COLS; k++) x[k] = (float)((int)(rnd() % 2001) - 1000) / 300.0f;
        omp_set_num_threads(1);
        k3_quant_matvec(y, mx, blocks, ROWS, COLS, x);
        int bad = -1;
        for (int e = 0; e < ROWS && bad < 0; e++) {
            k3_quant_decode_scalar(mx, blocks + e * 2 * 17, COLS, w);
            want[e] = k3_dot_f32(w, x, COLS);
            if (memcmp(&y[e], &want[e], 4) && !(isnan(y[e]) && isnan(want[e]))) bad = e;
        }
        CHECK(bad < 0, "E8M0 byte %d: %.9g, decode + k3_dot_f32 %.9g", bad, bad < 0 ? 0.0 : y[bad],
              bad < 0 ? 0.0 : want[bad]);
        CHECK(isfinite(want[0]) && !isfinite(want[255]), "byte 0 should give a finite row, 255 an overflow: %g, %g",
              want[0], want[255]);
        k3_kernels_set_activations_q8(1);
        k3_kernels_force_scalar(1);
        k3_quant_matvec(want, mx, blocks, ROWS, COLS, x);
        k3_kernels_force_scalar(0);
        k3_quant_matvec(y, mx, blocks, ROWS, COLS, x);
        k3_kernels_set_activations_q8(0);
        bad = -1;
        for (int e = 0; e < ROWS && bad < 0; e++)
            if (memcmp(&y[e], &want[e], 4) && !(isnan(y[e]) && isnan(want[e]))) bad = e;
        CHECK(bad < 0, "q8, E8M0 byte %d: %.9g, scalar contract %.9g", bad, bad < 0 ? 0.0 : y[bad], bad < 0 ? 0.0 : want[bad]);
        omp_set_num_threads(2);
        free(blocks);
    }
    TEST_END();

    /* The int16 bound of the 32-byte kernels (quant_lanes.h): blocks whose
     * every pair of products is the largest the type allows (Q8_0's code
     * -128, IQ4 level -127 times the IQ4_XS scale -32, Q6_K's scale -128,
     * Q4_K's 63 x 15, the mins of Q2_K, Q4_1 and Q5_1 at their largest, the
     * grid types' largest points, all of one sign, times sub-scale 31)
     * against x = +-1, whose codes are +-127 with the sign that makes the
     * products add up. A saturated vpmaddubsw word (32767 for 32512) would
     * move the result off both the scalar contract and the exact product of
     * the decoded weights, which the q8 result equals here up to the
     * rounding of 1/127 (x quantizes to +-127 x (1/127)). */
    TEST_BEGIN("quant q8 activations: extreme blocks (Q8_0 code -128, largest sub-scales, levels and grid points, x codes +-127) equal the scalar contract and the exact product: no int16 saturation");
    {
        static const struct {
            const char *name;
            int x_sign;   /* x = x_sign everywhere: the products' sign */
        } cases[] = {{"Q8_0", -1}, {"Q8_0", 1}, {"Q4_0", -1}, {"Q5_0", -1}, {"IQ4_NL", -1}, {"MXFP4", 1}, {"Q4_1", 1},
                     {"Q5_1", 1}, {"Q4_K", 1}, {"Q5_K", 1}, {"Q6_K", -1}, {"Q2_K", 1}, {"Q3_K", 1}, {"IQ4_XS", 1},
                     {"IQ2_XXS", 1}, {"IQ2_XS", 1}, {"IQ2_S", -1}, {"IQ3_XXS", 1}, {"IQ3_XXS", -1}, {"IQ3_S", 1}};
        enum { COLS = 512, ROWS = 3 };
        static uint8_t data[ROWS * COLS / 32 * 34];
        static float x[COLS], w[COLS];
        const uint16_t one = k3_f32_to_f16(1.0f);
        k3_kernels_set_activations_q8(1);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            const k3_quant_type *t = k3_quant_type_by_name(cases[i].name);
            const int64_t n_blocks = ROWS * COLS / t->block_elems;
            for (int64_t b = 0; b < n_blocks; b++) {
                uint8_t *blk = data + b * t->block_bytes;
                switch (t->ggml_id) {
                case K3_GGML_Q8_0: memset(blk + 2, 0x80, 32); break;                  /* every code -128 */
                case K3_GGML_Q4_0: case K3_GGML_IQ4_NL: memset(blk + 2, 0x00, 16); break;   /* -8, level -127 */
                case K3_GGML_Q5_0: memset(blk + 2, 0x00, 20); break;                  /* -16 */
                case K3_GGML_MXFP4: blk[0] = 128; memset(blk + 1, 0x77, 16); break;    /* doubled 12 */
                case K3_GGML_Q4_1: memset(blk + 4, 0xFF, 16); break;                  /* 15 */
                case K3_GGML_Q5_1: memset(blk + 4, 0xFF, 20); break;                  /* 31 */
                case K3_GGML_Q4_K: case K3_GGML_Q5_K: memset(blk + 4, 0xFF, t->block_bytes - 4); break;   /* 63, 63; 15 or 31 */
                case K3_GGML_Q6_K: memset(blk, 0, 192); memset(blk + 192, 0x80, 16); break;   /* q - 32 = -32, scales -128 */
                case K3_GGML_Q2_K: memset(blk, 0xFF, 80); break;                      /* scales and mins 15, codes 3 */
                case K3_GGML_Q3_K: memset(blk, 0, 108); break;                        /* codes -4, scales -32 */
                case K3_GGML_IQ4_XS: memset(blk + 2, 0, 134); break;                  /* level -127, scale -32 */
                default: iq_extreme_block(t, blk); break;                            /* largest points, scale 31 */
                }
                if (t->ggml_id != K3_GGML_MXFP4) {   /* d (and the min's scale) 1 */
                    const int at = t->ggml_id == K3_GGML_Q6_K ? 208 : t->ggml_id == K3_GGML_Q2_K ? 80
                                 : t->ggml_id == K3_GGML_Q3_K ? 108 : 0;
                    blk[at] = (uint8_t)one;
                    blk[at + 1] = (uint8_t)(one >> 8);
                    if (t->ggml_id == K3_GGML_Q4_1 || t->ggml_id == K3_GGML_Q5_1 || t->ggml_id == K3_GGML_Q4_K ||
                        t->ggml_id == K3_GGML_Q5_K || t->ggml_id == K3_GGML_Q2_K) {
                        blk[at + 2] = (uint8_t)one;
                        blk[at + 3] = (uint8_t)(one >> 8);
                    }
                }
            }
            for (int j = 0; j < COLS; j++) x[j] = (float)cases[i].x_sign;
            float y[ROWS], want[ROWS];
            k3_kernels_force_scalar(1);
            k3_quant_matvec(want, t, data, ROWS, COLS, x);
            k3_kernels_force_scalar(0);
            k3_quant_matvec(y, t, data, ROWS, COLS, x);
            for (int r = 0; r < ROWS; r++) {
                k3_quant_decode_scalar(t, data + r * k3_quant_row_bytes(t, COLS), COLS, w);
                double exact = 0, magnitude = 0;
                for (int j = 0; j < COLS; j++) {
                    exact += (double)w[j] * x[j];
                    magnitude += fabs((double)w[j]);
                }
                CHECK(!memcmp(&y[r], &want[r], sizeof y[r]), "%s x %+d row %d: vector %.9g, scalar contract %.9g",
                      t->name, cases[i].x_sign, r, y[r], want[r]);
                CHECK(fabs(y[r] - exact) <= 1e-5 * magnitude && magnitude > 0, "%s x %+d row %d: %.9g, exact %.9g",
                      t->name, cases[i].x_sign, r, y[r], exact);
            }
        }
        k3_kernels_set_activations_q8(0);
    }
    TEST_END();

    /* The AVX2 quantizers of x (8 lanes at a time) against the scalar rule on
     * the inputs where a rule can differ: a NaN (skipped by amax, code -127),
     * halves that round to even (|x| max 127, so the 32-column scale is 1 and
     * the 256-column one -1 exactly), the largest magnitude twice with the
     * negative one first (the 256-column rule takes the first), an all-zero
     * block. Every value must be the scalar contract's bits, and finite. */
    TEST_BEGIN("quant q8 activations: NaN, ties to even, a largest |x| of both signs and an all-zero block quantize as the scalar rule (32- and 256-column types)");
    {
        enum { COLS = 1024, ROWS = 5 };
        static float x[COLS];
        static const float halves[] = {2.5f, -3.5f, 0.5f, -0.5f, 1.5f, 126.5f, -125.5f};
        for (int j = 0; j < COLS; j++) x[j] = (float)((int)(rnd() % 2001) - 1000) / 10.0f;
        for (int b = 0; b < COLS / 256; b++) {
            float *xb = x + 256 * b;
            for (int j = 0; j < 256; j++)   /* below 127 in magnitude */
                if (fabsf(xb[j]) >= 127.0f) xb[j] = 0.0f;
            for (int k = 0; k < 7; k++) xb[20 + 37 * k] = halves[k];
            xb[33] = -127.0f;   /* the first of the two largest, in both a 32- and the 256-block */
            xb[50] = 127.0f;
            xb[5] = NAN;
        }
        memset(x + 512, 0, 256 * sizeof *x);   /* block 2: all zero */
        const char *names[] = {"Q8_0", "Q4_1", "MXFP4", "Q4_K", "Q6_K", "IQ4_XS"};
        k3_kernels_set_activations_q8(1);
        for (int i = 0; i < 6; i++) {
            const k3_quant_type *t = k3_quant_type_by_name(names[i]);
            const int64_t n_blocks = ROWS * COLS / t->block_elems;
            uint8_t *data = malloc((size_t)(n_blocks * t->block_bytes));
            random_matrix(t, data, n_blocks);
            float y[ROWS], want[ROWS];
            k3_kernels_force_scalar(1);
            k3_quant_matvec(want, t, data, ROWS, COLS, x);
            k3_kernels_force_scalar(0);
            k3_quant_matvec(y, t, data, ROWS, COLS, x);
            for (int r = 0; r < ROWS; r++)
                CHECK(!memcmp(&y[r], &want[r], sizeof y[r]) && isfinite(y[r]), "%s row %d: vector %.9g, scalar %.9g",
                      t->name, r, y[r], want[r]);
            free(data);
        }
        k3_kernels_set_activations_q8(0);
    }
    TEST_END();

    /* The q8 reference's integer view of an IQ2/IQ3 block (k3_iq_block_ints,
     * read weight by weight from the layout) against the scalar decoder:
     * code x sub-scale is an integer below 2^11 and the block scale an f16
     * times a power of two, so (code x sub-scale) x block scale is one
     * rounding of the real weight, which the decoder also rounds once: the
     * same bits. Random blocks with tame and extreme d (65504, -65504, the
     * subnormal 2^-24), and the largest-point blocks. */
    TEST_BEGIN("quant q8 IQ2/IQ3: the scalar contract's view of a block (codes x odd sub-scales x block scale) is the decoder's weights bit for bit (5 types, 68 blocks each)");
    {
        const char *names[] = {"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S"};
        const uint16_t extreme_d[4] = {0x7BFF, 0xFBFF, 0x0001, 0x7BFF};
        enum { BLOCKS = 68 };
        for (int n = 0; n < 5; n++) {
            const k3_quant_type *t = k3_quant_type_by_name(names[n]);
            uint8_t *data = malloc(BLOCKS * t->block_bytes);
            random_matrix(t, data, BLOCKS);
            for (int k = 0; k < 4; k++) {
                uint8_t *blk = data + (BLOCKS - 4 + k) * t->block_bytes;
                if (k == 3) iq_extreme_block(t, blk);
                blk[0] = (uint8_t)extreme_d[k];
                blk[1] = (uint8_t)(extreme_d[k] >> 8);
            }
            int bad = -1, codes_ok = 1;
            for (int b = 0; b < BLOCKS && bad < 0; b++) {
                const uint8_t *blk = data + b * t->block_bytes;
                int codes[256], sub_scale[16];
                float d_w, w[256];
                k3_iq_block_ints(t->ggml_id, blk, codes, sub_scale, &d_w);
                k3_quant_decode_scalar(t, blk, 256, w);
                for (int i = 0; i < 256 && bad < 0; i++) {
                    const float v = (float)(codes[i] * sub_scale[i / 16]) * d_w;
                    if (memcmp(&v, &w[i], 4) || !isfinite(v)) bad = 256 * b + i;
                    if (abs(codes[i]) > 62 || codes[i] == 0 || sub_scale[i / 16] % 2 != 1 || sub_scale[i / 16] > 31)
                        codes_ok = 0;
                }
            }
            CHECK(bad < 0, "%s block %d weight %d: the q8 view differs from the decoder", t->name, bad / 256, bad % 256);
            CHECK(codes_ok, "%s: a code outside +-1..62 or a sub-scale not odd in 1..31", t->name);
            free(data);
        }
    }
    TEST_END();

    /* The q8 kernels of the grid types over real tensors: every IQ2/IQ3
     * tensor of the four fixtures llama-quantize wrote with an importance
     * matrix (tests/fixtures/gguf/kimi_linear: trunk and expert matrices),
     * against 5 tokens of random x: the batched product (4 tokens at once,
     * then 1) and the matvec on the vector path each equal the scalar
     * contract's bits. */
    TEST_BEGIN("quant q8 IQ2/IQ3 on the fixtures' tensors (kl-IQ2_XXS, kl-IQ2_XS, kl-IQ2_M, kl-IQ3_XS): vector matvec and matmul equal the scalar contract bit for bit, all 5 grid types met");
    {
        static const char *files[] = {"kl-IQ2_XXS", "kl-IQ2_XS", "kl-IQ2_M", "kl-IQ3_XS"};
        static const uint32_t grid_types[5] = {K3_GGML_IQ2_XXS, K3_GGML_IQ2_XS, K3_GGML_IQ2_S, K3_GGML_IQ3_XXS,
                                               K3_GGML_IQ3_S};
        enum { TOKENS = 5 };
        int seen[5] = {0};
        k3_kernels_set_activations_q8(1);
        for (int f = 0; f < 4; f++) {
            char path[128];
            snprintf(path, sizeof path, "tests/fixtures/gguf/kimi_linear/%s.gguf", files[f]);
            gguf_file g;
            k3_error err;
            if (gguf_open(&g, path, &err)) {
                CHECK(0, "%s", err.msg);
                continue;
            }
            for (int64_t i = 0; i < g.n_tensors; i++) {
                const gguf_tensor *gt = &g.tensors[i];
                int kind = -1;
                for (int k = 0; k < 5; k++)
                    if (gt->type->ggml_id == grid_types[k]) kind = k;
                if (kind < 0) continue;
                const int64_t cols = gt->dims[0];
                const int64_t rows = (int64_t)(gt->bytes / k3_quant_row_bytes(gt->type, cols));
                uint8_t *data = malloc(gt->bytes);
                float *X = malloc((size_t)(TOKENS * cols) * sizeof *X);
                float *Y = malloc((size_t)(TOKENS * rows) * sizeof *Y), *y = malloc((size_t)rows * sizeof *y);
                float *want = malloc((size_t)rows * sizeof *want);
                const int read_ok = pread(g.parts[gt->part].fd, data, gt->bytes, (off_t)gt->file_offset) == (ssize_t)gt->bytes;
                CHECK(read_ok, "%s: cannot read tensor %s", path, gt->name);
                for (int64_t k = 0; k < TOKENS * cols; k++) X[k] = (float)((int)(rnd() % 2001) - 1000) / 700.0f;
                if (read_ok) {
                    seen[kind]++;
                    k3_quant_matmul(Y, gt->type, data, rows, cols, X, TOKENS);
                    for (int tok = 0; tok < TOKENS; tok++) {
                        k3_kernels_force_scalar(1);
                        k3_quant_matvec(want, gt->type, data, rows, cols, X + tok * cols);
                        k3_kernels_force_scalar(0);
                        k3_quant_matvec(y, gt->type, data, rows, cols, X + tok * cols);
                        CHECK(!memcmp(y, want, (size_t)rows * sizeof *y), "%s %s (%s) token %d: vector matvec differs from the scalar contract",
                              files[f], gt->name, gt->type->name, tok);
                        CHECK(!memcmp(Y + tok * rows, want, (size_t)rows * sizeof *y), "%s %s (%s) token %d: matmul differs from the scalar contract",
                              files[f], gt->name, gt->type->name, tok);
                    }
                }
                free(data); free(X); free(Y); free(y); free(want);
            }
            gguf_close(&g);
        }
        k3_kernels_set_activations_q8(0);
        CHECK(seen[0] && seen[1] && seen[2] && seen[3] && seen[4],
              "grid tensors met: IQ2_XXS %d, IQ2_XS %d, IQ2_S %d, IQ3_XXS %d, IQ3_S %d", seen[0], seen[1], seen[2],
              seen[3], seen[4]);
    }
    TEST_END();

    TEST_EXIT();
}
