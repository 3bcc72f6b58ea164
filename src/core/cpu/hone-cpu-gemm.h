/* hone-cpu-gemm.h — Y = X·Wᵀ with F32/F16/BF16 weights and f32 activations
 * over many tokens, on the pool: the prompt's matrix products of float models
 * (hone_cpu_matmul hands them here) and AWQ calibration's on the CPU.
 *
 * The tile kernels (hone-cpu-matmul.h) stream every weight row once per 4
 * tokens, ≤ 8 sums in registers: right for decode, load-bound over the
 * hundreds of tokens of a prompt or a calibration. This is a blocked GEMM:
 * rows are converted to f32 and packed 32 (AVX-512) or 16 (AVX2) to a panel,
 * k-major, a chunk of panels sized for L2, and each panel runs against 12 (6)
 * tokens at a time, read from their rows: one or two weight vectors and one
 * broadcast a token into 24 (12) vector sums a step. Every output is one sum
 * over k in order, so the result does not depend on the thread count. Without
 * AVX2, the same blocking in plain C.
 */
#pragma once

#include "hone-tensor.h"
#include "hone-cpu-threadpool.h"

G_BEGIN_DECLS

/* Tokens from which hone_cpu_matmul runs float weights here (bench-gemm,
 * 2 threads: BF16/F16 1,536 × 576 at 64 tokens 1.05×, 128 1.4×, 256 1.6×
 * the tiles; at 32 the tiles' 1.1–1.3×). */
#define HONE_CPU_GEMM_MIN_T 64

/* Whether hone_cpu_gemm takes weights of @type (F32, F16, BF16). */
gboolean hone_cpu_gemm_takes (HoneDType type);
/* y[T × N] = x[T × K] · wᵀ, w: ne = {K, N} (row strides K and N floats). */
void     hone_cpu_gemm (HoneCpuPool *pool, const HoneTensor *w, const float *x, int T, float *y);
/* The same for f32 rows W[N × K]. */
void     hone_cpu_gemm_f32 (HoneCpuPool *pool, const float *W, int N, int K, const float *x, int T, float *y);

G_END_DECLS
