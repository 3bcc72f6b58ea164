/* hone-k-awq.h — the kernels of AWQ calibration on the GPU (plain C ABI).
 *
 * The host side (src/core/cuda/hone-cuda-awq.c) runs DESIGN.md's AWQ search
 * layer by layer with these: f32 activations and weights, GEMMs through
 * cuBLAS (f32, TF32 or BF16 operands, always f32 accumulation), causal
 * attention per sample as two batched GEMMs around a masked softmax, the
 * zero-point quantizer as in hone_awq_quantize_group(), and every reduction
 * in a fixed order (partial sums over fixed chunks, then the chunks in
 * order), so the same inputs give the same bits.
 *
 * Conventions as hone-kernels.h: activations row-major [tokens][features], a
 * weight W is [N rows (outputs)][K cols (inputs)], y = x·Wᵀ; every launcher
 * returns a cudaError_t as int (0 = success; cuBLAS failures come back as
 * HONE_K_AWQ_BLAS_ERROR + the cuBLAS status) and only enqueues on @stream
 * (or the stream the cuBLAS handle was created with).
 *
 * The quantizer (fake_quant, clip, quantize) is bit-exact with the CPU code:
 * IEEE division and rounding, no fused multiply-adds where the CPU has none,
 * the same 7-bit scale rounding.
 */
#ifndef HONE_K_AWQ_H
#define HONE_K_AWQ_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HONE_K_AWQ_BLAS_ERROR 10000
#define HONE_K_AWQ_N_PARTIALS 1024     /* hone_k_awq_sq_err's partial sums */

typedef enum {
  HONE_K_AWQ_GEMM_F32 = 0,     /* plain f32 (slow; the reference) */
  HONE_K_AWQ_GEMM_TF32 = 1,    /* TF32 operands (10-bit mantissa) */
  HONE_K_AWQ_GEMM_BF16 = 2,    /* BF16 operands through hone_k_awq_gemm_bf16; f32 operands
                                  (hone_k_awq_gemm, attention) then run as TF32 */
} HoneKAwqGemm;

/* A cuBLAS handle bound to @stream. */
int hone_k_awq_blas_create (void **handle, cudaStream_t stream);
void hone_k_awq_blas_destroy (void *handle);

/* y[T×N] = x[T×K]·W[N×K]ᵀ. */
int hone_k_awq_gemm (void *blas, int prec, const float *W, int N, int K, const float *x, int T, float *y);

/* y[T×N] = x·Wᵀ with both operands in BF16 (uint16 bits), f32 accumulation
 * and output. to_bf16: dst = round-to-nearest-even BF16 of src (n values). */
int hone_k_awq_gemm_bf16 (void *blas, const uint16_t *W, int N, int K, const uint16_t *x, int T, float *y);
int hone_k_awq_to_bf16 (const float *src, uint16_t *dst, size_t n, cudaStream_t stream);

/* Causal attention of n_seq samples of L tokens: q [n_seq·L × nh·hd],
 * k, v [n_seq·L × nkv·hd] (after bias/norm/RoPE) → out [n_seq·L × nh·hd].
 * S: scratch of s_seqs·L·L floats; samples go s_seqs at a time. */
int hone_k_awq_attention (void *blas, int prec, const float *q, const float *k, const float *v, float *out,
                          float *S, int s_seqs, int n_seq, int L, int nh, int nkv, int hd, cudaStream_t stream);

/* y = x / sqrt(mean(x²) + eps) · w per row (sums in double). */
int hone_k_awq_rmsnorm (const float *x, const float *w, float *y, int T, int n, float eps, cudaStream_t stream);

/* Per token t (position t mod L), in place: q/k/v += biases (when bq is not
 * NULL), per-head RMSNorm of q and k (when qn is not NULL), RoPE of q and k
 * with cos/sin [L × hd/2] (adjacent: pairs (2i, 2i+1), else (i, i+hd/2)). */
int hone_k_awq_qk_prep (float *q, float *k, float *v, const float *bq, const float *bk, const float *bv,
                        const float *qn, const float *kn, const float *cos_t, const float *sin_t, int T, int L,
                        int nh, int nkv, int hd, int adjacent, float eps, cudaStream_t stream);

/* g = silu(g)·u;  y = a + b  (n elements). */
int hone_k_awq_swiglu (float *g, const float *u, size_t n, cudaStream_t stream);
int hone_k_awq_add (float *y, const float *a, const float *b, size_t n, cudaStream_t stream);

/* Column sums in double, accumulated into out[K] (out is not cleared):
 * mode 0: Σ_t |x[t][k]| over R rows of x [R×K];
 * mode 1: Σ_r |W[r][k]| / (absmax of W[r]'s group of g holding k + 1e-6).
 * partial: scratch of 64·K doubles. */
int hone_k_awq_col_sum (const float *x, int R, int K, int g, int mode, double *partial, double *out,
                        cudaStream_t stream);

/* dst = Q(src·s)/s per row group of g (s per column), the search's candidate. */
int hone_k_awq_fake_quant (const float *src, const float *s, float *dst, int N, int K, int g, cudaStream_t stream);

/* partial[HONE_K_AWQ_N_PARTIALS] = Σ (a − b)² over fixed chunks (double);
 * the caller adds the partials in order. */
int hone_k_awq_sq_err (const float *a, const float *b, size_t n, double *partial, cudaStream_t stream);

/* W[r][k] ·= s[k] (divide = 0) or /= s[k] (divide = 1) over N rows;
 * div_rows: W[r][k] /= s[r]. */
int hone_k_awq_scale_cols (float *W, int N, int K, const float *s, int divide, cudaStream_t stream);
int hone_k_awq_div_rows (float *W, int N, int K, const float *s, cudaStream_t stream);

/* The clip search (see hone-awq.c): gram [K/g][g][g] = (1/n)·Σ_t x_gᵀx_g over
 * rows 0, step, 2·step, … (n of them) of x [·×K]; then W (N×K) clamped in
 * place per group to the best of n_grid/2 candidate maxima. */
int hone_k_awq_gram (const float *x, int K, int n, int step, int g, float *gram, cudaStream_t stream);
int hone_k_awq_clip (float *W, const float *gram, int N, int K, int g, int n_grid, cudaStream_t stream);

/* The final quantizer: q [N×K] values 0..15, z [N×K/g], s [N×K/g] fp16 bits. */
int hone_k_awq_quantize (const float *W, int N, int K, int g, uint8_t *q, uint8_t *z, uint16_t *s,
                         cudaStream_t stream);

/* f32 from stored 16-bit values: type 1 = F16, 30 = BF16 (GGUF numbers). */
int hone_k_awq_widen (const uint16_t *src, int type, size_t n, float *dst, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
