/* hone-cpu-gemm.h — Y = X·Wᵀ with f32 weights and activations over many
 * tokens, on the pool: AWQ calibration's matrix products on the CPU.
 *
 * The tile kernels (hone-cpu-matmul.h) stream every weight row once per 4
 * tokens, ≤ 8 sums in registers: right for decode, load-bound over the
 * hundreds of tokens calibration multiplies at once. This is a blocked GEMM:
 * rows are packed 32 (AVX-512) or 16 (AVX2) to a panel, k-major, a chunk of
 * panels sized for L2, and each panel runs against 12 (6) tokens at a time,
 * read from their rows: one or two weight vectors and one broadcast a token
 * into 24 (12) vector sums a step. Every output is one sum over k in order,
 * so the result does not depend on the thread count. Without AVX2 it calls
 * hone_cpu_matmul.
 */
#pragma once

#include "hone-cpu-threadpool.h"

G_BEGIN_DECLS

/* y[T × N] = x[T × K] · W[N × K]ᵀ (row strides K, K and N floats). */
void hone_cpu_gemm_f32 (HoneCpuPool *pool, const float *W, int N, int K, const float *x, int T, float *y);

G_END_DECLS
