/* ops.c - normalisations, softmax and row decode (see ops.h). Summation is
 * sequential in double where it feeds a normalisation, so results do not
 * depend on vector width and stay close to the float64 reference. */
#include "ops.h"
#include "quant_matvec.h"

void k3_rmsnorm(float *y, const float *x, const float *w, int n, float eps)
{
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float r = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++) y[i] = w[i] * (x[i] * r);
}

void k3_l2norm(float *x, int n, float eps)
{
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float r = (float)(1.0 / sqrt(ss + eps));
    for (int i = 0; i < n; i++) x[i] *= r;
}

void k3_softmax(float *x, int n)
{
    float mx = x[0];
    for (int i = 1; i < n; i++) if (x[i] > mx) mx = x[i];
    double sum = 0.0;
    for (int i = 0; i < n; i++) { x[i] = expf(x[i] - mx); sum += x[i]; }
    float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

/* The SiTU-GLU of a K3 MLP over T x inter elements: a prompt's experts run
 * millions per layer, and the former per-element double tanh (two libm
 * calls each) was 9% of a k3-16g prompt. `omp simd` vectorises the inline
 * element function; each lane does the element's operations in the same
 * order, so the bits equal the scalar k3_situ (tests/test_k3_ops.c). */
void k3_situ_glu(float *gate, const float *up, int64_t n, float beta, float linear_beta)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++)
        gate[i] = k3_situ(gate[i], up[i], beta, linear_beta);
}

void k3_weight_row_f32(const k3_weight *w, int64_t r, float *out)
{
    if (w->dtype == K3_DT_GGML) {
        k3_quant_decode_scalar(w->qtype, (const uint8_t *)w->data + (uint64_t)r * k3_quant_row_bytes(w->qtype, w->cols),
                               w->cols, out);
        return;
    }
    if (k3_decode_row_f32(w, r, out))
        return;
    const uint8_t *row = (const uint8_t *)w->data + (size_t)r * w->cols * k3_dtype_size(w->dtype);
    k3_convert_to_f32(out, row, w->dtype, w->cols);
    if (w->dtype == K3_DT_F8_E4M3 && w->block_scale) {
        const float *s = w->block_scale + (size_t)(r / 128) * ((w->cols + 127) / 128);
        for (int64_t c = 0; c < w->cols; c++) out[c] *= s[c / 128];
    }
}

void k3_attn_res_mix(float *out, const float *const *sources, int n, const float *score, int D, float eps,
                     float *logits)
{
    for (int i = 0; i < n; i++) {
        const float *v = sources[i];
        double ss = 0.0, dot = 0.0;
        for (int d = 0; d < D; d++) ss += (double)v[d] * v[d];
        const float r = (float)(1.0 / sqrt(ss / D + eps));
        for (int d = 0; d < D; d++) dot += (double)(v[d] * r) * score[d];
        logits[i] = (float)dot;
    }
    k3_softmax(logits, n);
    for (int d = 0; d < D; d++) out[d] = 0.0f;
    for (int i = 0; i < n; i++) k3_axpy_f32(out, logits[i], sources[i], D);
}
