/* hone-k-awq.cu — AWQ calibration kernels (see hone-k-awq.h).
 *
 * Nothing here is on a hot decode path: these kernels are written to be
 * exact and deterministic first (fixed reduction order, no atomics, the CPU
 * quantizer's arithmetic bit for bit), fast enough second. The heavy work
 * (the candidate forwards) is cuBLAS.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>
#include <math.h>
#include "hone-k-awq.h"

#define CHECK_LAUNCH() do { cudaError_t e_ = cudaGetLastError (); if (e_ != cudaSuccess) return (int) e_; } while (0)
#define COL_CHUNKS 64

static unsigned
blocks_for (size_t n, unsigned threads)
{
  size_t b = (n + threads - 1) / threads;
  return (unsigned) (b > 65535u * 16u ? 65535u * 16u : (b ? b : 1));
}

/* ---- cuBLAS ------------------------------------------------------------- */

int
hone_k_awq_blas_create (void **handle, cudaStream_t stream)
{
  cublasHandle_t h;
  cublasStatus_t st = cublasCreate (&h);
  if (st != CUBLAS_STATUS_SUCCESS)
    return HONE_K_AWQ_BLAS_ERROR + (int) st;
  cublasSetStream (h, stream);
  cublasSetMathMode (h, CUBLAS_DEFAULT_MATH);
  *handle = h;
  return 0;
}

void
hone_k_awq_blas_destroy (void *handle)
{
  if (handle)
    cublasDestroy ((cublasHandle_t) handle);
}

static cublasComputeType_t
compute_type (int prec)
{
  switch (prec)
    {
    /* CUBLAS_COMPUTE_32F_FAST_16BF on f32 operands ran the same kernels as
     * TF32 on the H200 (same time, same bits): BF16 proper converts first. */
    case HONE_K_AWQ_GEMM_TF32: case HONE_K_AWQ_GEMM_BF16: return CUBLAS_COMPUTE_32F_FAST_TF32;
    default: return CUBLAS_COMPUTE_32F;
    }
}

int
hone_k_awq_gemm (void *blas, int prec, const float *W, int N, int K, const float *x, int T, float *y)
{
  const float one = 1.0f, zero = 0.0f;
  /* Column-major view: Yᵀ[N×T] = (Wᵀ)ᵀ·Xᵀ with W as K×N (ld K) and X as K×T. */
  cublasStatus_t st = cublasGemmEx ((cublasHandle_t) blas, CUBLAS_OP_T, CUBLAS_OP_N, N, T, K, &one,
                                    W, CUDA_R_32F, K, x, CUDA_R_32F, K, &zero, y, CUDA_R_32F, N,
                                    compute_type (prec), CUBLAS_GEMM_DEFAULT);
  return st == CUBLAS_STATUS_SUCCESS ? 0 : HONE_K_AWQ_BLAS_ERROR + (int) st;
}

int
hone_k_awq_gemm_bf16 (void *blas, const uint16_t *W, int N, int K, const uint16_t *x, int T, float *y)
{
  const float one = 1.0f, zero = 0.0f;
  cublasStatus_t st = cublasGemmEx ((cublasHandle_t) blas, CUBLAS_OP_T, CUBLAS_OP_N, N, T, K, &one,
                                    W, CUDA_R_16BF, K, x, CUDA_R_16BF, K, &zero, y, CUDA_R_32F, N,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return st == CUBLAS_STATUS_SUCCESS ? 0 : HONE_K_AWQ_BLAS_ERROR + (int) st;
}

/* Four values a thread: two 16-byte loads become one 8-byte store. */
__global__ void
to_bf16_kernel (const float *src, uint16_t *dst, size_t n)
{
  size_t n4 = n / 4;
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n4; i += (size_t) gridDim.x * blockDim.x)
    {
      float4 v = ((const float4 *) src)[i];
      __nv_bfloat162 a = __floats2bfloat162_rn (v.x, v.y), b = __floats2bfloat162_rn (v.z, v.w);
      uint2 o;
      o.x = *(uint32_t *) &a;
      o.y = *(uint32_t *) &b;
      ((uint2 *) dst)[i] = o;
    }
  for (size_t i = n4 * 4 + blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
       i += (size_t) gridDim.x * blockDim.x)
    dst[i] = __bfloat16_as_ushort (__float2bfloat16_rn (src[i]));
}

int
hone_k_awq_to_bf16 (const float *src, uint16_t *dst, size_t n, cudaStream_t stream)
{
  if (n == 0)
    return 0;
  if (((uintptr_t) src | (uintptr_t) dst) & 15)
    return (int) cudaErrorMisalignedAddress;
  to_bf16_kernel<<<blocks_for (n / 4 + 1, 256), 256, 0, stream>>> (src, dst, n);
  CHECK_LAUNCH ();
  return 0;
}

/* ---- attention ---------------------------------------------------------- */

/* One warp per row t of a sample's score matrix (keys contiguous): causal
 * mask, max-subtracted exp, sum in double, scale by 1/sum (as hone_cpu_softmax). */
__global__ void
softmax_causal_kernel (float *S, int rows, int L)
{
  int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  float *x, mx = -INFINITY, inv;
  double sum = 0.0;
  int t;

  if (row >= rows)
    return;
  t = row % L;
  x = S + (size_t) row * L;
  for (int s = lane; s <= t; s += 32)
    mx = fmaxf (mx, x[s]);
  for (int o = 16; o > 0; o >>= 1)
    mx = fmaxf (mx, __shfl_xor_sync (0xffffffffu, mx, o));
  for (int s = lane; s <= t; s += 32)
    {
      float e = expf (x[s] - mx);
      x[s] = e;
      sum += (double) e;
    }
  for (int o = 16; o > 0; o >>= 1)
    sum += __shfl_xor_sync (0xffffffffu, sum, o);
  inv = (float) (1.0 / sum);
  for (int s = lane; s < L; s += 32)
    x[s] = s <= t ? x[s] * inv : 0.0f;
}

int
hone_k_awq_attention (void *blas, int prec, const float *q, const float *k, const float *v, float *out,
                      float *S, int s_seqs, int n_seq, int L, int nh, int nkv, int hd, cudaStream_t stream)
{
  cublasHandle_t h = (cublasHandle_t) blas;
  int qdim = nh * hd, kvdim = nkv * hd, group = nh / nkv;
  const float scale = 1.0f / sqrtf ((float) hd), one = 1.0f, zero = 0.0f;
  cublasComputeType_t ct = compute_type (prec);

  for (int s0 = 0; s0 < n_seq; s0 += s_seqs)
    {
      int ns = n_seq - s0 < s_seqs ? n_seq - s0 : s_seqs;
      for (int hh = 0; hh < nh; hh++)
        {
          int kh = hh / group;
          const float *qh = q + (size_t) s0 * L * qdim + (size_t) hh * hd;
          const float *kh_ = k + (size_t) s0 * L * kvdim + (size_t) kh * hd;
          const float *vh = v + (size_t) s0 * L * kvdim + (size_t) kh * hd;
          float *oh = out + (size_t) s0 * L * qdim + (size_t) hh * hd;
          cublasStatus_t st;
          int rows = ns * L;

          /* S(s, t) = scale · K[s]·Q[t], stored t-major (row t: keys contiguous). */
          st = cublasGemmStridedBatchedEx (h, CUBLAS_OP_T, CUBLAS_OP_N, L, L, hd, &scale,
                                           kh_, CUDA_R_32F, kvdim, (long long) L * kvdim,
                                           qh, CUDA_R_32F, qdim, (long long) L * qdim, &zero,
                                           S, CUDA_R_32F, L, (long long) L * L, ns, ct, CUBLAS_GEMM_DEFAULT);
          if (st != CUBLAS_STATUS_SUCCESS)
            return HONE_K_AWQ_BLAS_ERROR + (int) st;
          softmax_causal_kernel<<<(rows + 7) / 8, 256, 0, stream>>> (S, rows, L);
          CHECK_LAUNCH ();
          /* O[t] = Σ_s P(t, s)·V[s]. */
          st = cublasGemmStridedBatchedEx (h, CUBLAS_OP_N, CUBLAS_OP_N, hd, L, L, &one,
                                           vh, CUDA_R_32F, kvdim, (long long) L * kvdim,
                                           S, CUDA_R_32F, L, (long long) L * L, &zero,
                                           oh, CUDA_R_32F, qdim, (long long) L * qdim, ns, ct, CUBLAS_GEMM_DEFAULT);
          if (st != CUBLAS_STATUS_SUCCESS)
            return HONE_K_AWQ_BLAS_ERROR + (int) st;
        }
    }
  return 0;
}

/* ---- per-token operations ----------------------------------------------- */

/* Block sum in double over blockDim.x (a power of two ≤ 1024), fixed order. */
static __device__ double
block_sum_double (double v, double *sh)
{
  int t = threadIdx.x;
  sh[t] = v;
  __syncthreads ();
  for (int w = blockDim.x / 2; w > 0; w >>= 1)
    {
      if (t < w)
        sh[t] += sh[t + w];
      __syncthreads ();
    }
  v = sh[0];
  __syncthreads ();
  return v;
}

__global__ void
rmsnorm_kernel (const float *x, const float *w, float *y, int n, float eps)
{
  __shared__ double sh[256];
  const float *xr = x + (size_t) blockIdx.x * n;
  float *yr = y + (size_t) blockIdx.x * n;
  double ss = 0.0;
  float scale;

  for (int i = threadIdx.x; i < n; i += blockDim.x)
    ss += (double) xr[i] * (double) xr[i];
  ss = block_sum_double (ss, sh);
  scale = (float) (1.0 / sqrt (ss / n + (double) eps));
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    yr[i] = __fmul_rn (__fmul_rn (xr[i], scale), w[i]);
}

int
hone_k_awq_rmsnorm (const float *x, const float *w, float *y, int T, int n, float eps, cudaStream_t stream)
{
  if (T <= 0)
    return 0;
  rmsnorm_kernel<<<T, 256, 0, stream>>> (x, w, y, n, eps);
  CHECK_LAUNCH ();
  return 0;
}

/* One block (4 warps) per token. */
__global__ void
qk_prep_kernel (float *q, float *k, float *v, const float *bq, const float *bk, const float *bv,
                const float *qn, const float *kn, const float *cos_t, const float *sin_t, int L,
                int nh, int nkv, int hd, int adjacent, float eps)
{
  int t = blockIdx.x, pos = t % L, half = hd / 2;
  int qdim = nh * hd, kvdim = nkv * hd;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
  float *qt = q + (size_t) t * qdim, *kt = k + (size_t) t * kvdim, *vt = v + (size_t) t * kvdim;

  if (bq)
    {
      for (int i = threadIdx.x; i < qdim; i += blockDim.x)
        qt[i] = __fadd_rn (qt[i], bq[i]);
      for (int i = threadIdx.x; i < kvdim; i += blockDim.x)
        {
          kt[i] = __fadd_rn (kt[i], bk[i]);
          vt[i] = __fadd_rn (vt[i], bv[i]);
        }
      __syncthreads ();
    }
  if (qn)
    {
      for (int hh = warp; hh < nh + nkv; hh += nwarps)
        {
          float *x = hh < nh ? qt + hh * hd : kt + (hh - nh) * hd;
          const float *w = hh < nh ? qn : kn;
          double ss = 0.0;
          float scale;
          for (int i = lane; i < hd; i += 32)
            ss += (double) x[i] * (double) x[i];
          for (int o = 16; o > 0; o >>= 1)
            ss += __shfl_xor_sync (0xffffffffu, ss, o);
          scale = (float) (1.0 / sqrt (ss / hd + (double) eps));
          __syncwarp ();
          for (int i = lane; i < hd; i += 32)
            x[i] = __fmul_rn (__fmul_rn (x[i], scale), w[i]);
        }
      __syncthreads ();
    }
  for (int p = threadIdx.x; p < (nh + nkv) * half; p += blockDim.x)
    {
      int hh = p / half, i = p % half;
      float *x = hh < nh ? qt + hh * hd : kt + (hh - nh) * hd;
      int a = adjacent ? 2 * i : i, b = adjacent ? 2 * i + 1 : i + half;
      float c = cos_t[(size_t) pos * half + i], s = sin_t[(size_t) pos * half + i];
      float x0 = x[a], x1 = x[b];
      x[a] = __fsub_rn (__fmul_rn (x0, c), __fmul_rn (x1, s));
      x[b] = __fadd_rn (__fmul_rn (x0, s), __fmul_rn (x1, c));
    }
}

int
hone_k_awq_qk_prep (float *q, float *k, float *v, const float *bq, const float *bk, const float *bv,
                    const float *qn, const float *kn, const float *cos_t, const float *sin_t, int T, int L,
                    int nh, int nkv, int hd, int adjacent, float eps, cudaStream_t stream)
{
  if (T <= 0)
    return 0;
  qk_prep_kernel<<<T, 128, 0, stream>>> (q, k, v, bq, bk, bv, qn, kn, cos_t, sin_t, L, nh, nkv, hd, adjacent, eps);
  CHECK_LAUNCH ();
  return 0;
}

__global__ void
swiglu_kernel (float *g, const float *u, size_t n)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    {
      float x = g[i];
      g[i] = __fmul_rn (__fdiv_rn (x, __fadd_rn (1.0f, expf (-x))), u[i]);
    }
}

__global__ void
add_kernel (float *y, const float *a, const float *b, size_t n)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    y[i] = __fadd_rn (a[i], b[i]);
}

int
hone_k_awq_swiglu (float *g, const float *u, size_t n, cudaStream_t stream)
{
  if (n == 0)
    return 0;
  swiglu_kernel<<<blocks_for (n, 256), 256, 0, stream>>> (g, u, n);
  CHECK_LAUNCH ();
  return 0;
}

int
hone_k_awq_add (float *y, const float *a, const float *b, size_t n, cudaStream_t stream)
{
  if (n == 0)
    return 0;
  add_kernel<<<blocks_for (n, 256), 256, 0, stream>>> (y, a, b, n);
  CHECK_LAUNCH ();
  return 0;
}

/* ---- statistics --------------------------------------------------------- */

/* Thread per column k, block row y = chunk c of rows: partial[c][k]. */
__global__ void
col_sum_kernel (const float *x, int R, int K, int g, int mode, int chunk, double *partial)
{
  int k = blockIdx.x * blockDim.x + threadIdx.x, c = blockIdx.y;
  int r0 = c * chunk, r1 = min (R, r0 + chunk);
  double acc = 0.0;

  if (k >= K)
    return;
  for (int r = r0; r < r1; r++)
    {
      const float *row = x + (size_t) r * K;
      if (mode == 0)
        acc += (double) fabsf (row[k]);
      else
        {
          /* The group's absmax, recomputed per thread: g ≤ 128 loads that
           * the warp's neighbours share through L1. */
          const float *grp = row + (k / g) * g;
          float amax = 0.0f;
          for (int i = 0; i < g; i++)
            amax = fmaxf (amax, fabsf (grp[i]));
          acc += (double) __fdiv_rn (fabsf (row[k]), __fadd_rn (amax, 1e-6f));
        }
    }
  partial[(size_t) c * K + k] = acc;
}

__global__ void
col_sum_finish_kernel (const double *partial, int K, int chunks, double *out)
{
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  double acc = 0.0;
  if (k >= K)
    return;
  for (int c = 0; c < chunks; c++)
    acc += partial[(size_t) c * K + k];
  out[k] += acc;
}

int
hone_k_awq_col_sum (const float *x, int R, int K, int g, int mode, double *partial, double *out,
                    cudaStream_t stream)
{
  int chunk = (R + COL_CHUNKS - 1) / COL_CHUNKS;
  int chunks;
  if (R <= 0 || K <= 0)
    return 0;
  chunks = (R + chunk - 1) / chunk;
  col_sum_kernel<<<dim3 ((K + 127) / 128, chunks), 128, 0, stream>>> (x, R, K, g, mode, chunk, partial);
  CHECK_LAUNCH ();
  col_sum_finish_kernel<<<(K + 127) / 128, 128, 0, stream>>> (partial, K, chunks, out);
  CHECK_LAUNCH ();
  return 0;
}

__global__ void
sq_err_kernel (const float *a, const float *b, size_t n, double *partial)
{
  __shared__ double sh[256];
  /* Contiguous chunk per block, strided by threads inside it. */
  size_t per = (n + gridDim.x - 1) / gridDim.x;
  size_t i0 = blockIdx.x * per, i1 = i0 + per < n ? i0 + per : n;
  double acc = 0.0;
  for (size_t i = i0 + threadIdx.x; i < i1; i += blockDim.x)
    {
      double d = (double) a[i] - (double) b[i];
      acc += d * d;
    }
  acc = block_sum_double (acc, sh);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = acc;
}

int
hone_k_awq_sq_err (const float *a, const float *b, size_t n, double *partial, cudaStream_t stream)
{
  sq_err_kernel<<<HONE_K_AWQ_N_PARTIALS, 256, 0, stream>>> (a, b, n, partial);
  CHECK_LAUNCH ();
  return 0;
}

/* ---- scaling ------------------------------------------------------------ */

__global__ void
scale_cols_kernel (float *W, size_t n, int K, const float *s, int divide)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    {
      float sk = s[i % K];
      W[i] = divide ? __fdiv_rn (W[i], sk) : __fmul_rn (W[i], sk);
    }
}

__global__ void
div_rows_kernel (float *W, size_t n, int K, const float *s)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    W[i] = __fdiv_rn (W[i], s[i / K]);
}

int
hone_k_awq_scale_cols (float *W, int N, int K, const float *s, int divide, cudaStream_t stream)
{
  size_t n = (size_t) N * K;
  if (n == 0)
    return 0;
  scale_cols_kernel<<<blocks_for (n, 256), 256, 0, stream>>> (W, n, K, s, divide);
  CHECK_LAUNCH ();
  return 0;
}

int
hone_k_awq_div_rows (float *W, int N, int K, const float *s, cudaStream_t stream)
{
  size_t n = (size_t) N * K;
  if (n == 0)
    return 0;
  div_rows_kernel<<<blocks_for (n, 256), 256, 0, stream>>> (W, n, K, s);
  CHECK_LAUNCH ();
  return 0;
}

/* ---- the quantizer ------------------------------------------------------ */

/* hone_awq_round_scale as a float (exact in fp16): 7 significant bits, in
 * [2^-14, 4096]. */
static __device__ __forceinline__ float
round_scale (float s)
{
  int e;
  float m;
  if (!(s >= 0x1p-14f))
    s = 0x1p-14f;
  if (s > 4096.0f)
    s = 4096.0f;
  m = frexpf (s, &e);
  m = __fdiv_rn (rintf (__fmul_rn (m, 128.0f)), 128.0f);
  return ldexpf (m, e);
}

/* Scale and zero point of a group with extremes mn ≤ mx (sanitised values). */
static __device__ __forceinline__ void
group_params (float mx, float mn, float *sf, float *zf)
{
  float range = __fsub_rn (mx, mn), z;
  if (!(range >= 1e-5f))
    range = 1e-5f;
  *sf = round_scale (__fdiv_rn (range, 15.0f));
  z = -rintf (__fdiv_rn (mn, *sf));
  if (!(z >= 0.0f))
    z = 0.0f;
  if (z > 15.0f)
    z = 15.0f;
  *zf = z;
}

static __device__ __forceinline__ float
quant_level (float v, float sf, float zf)
{
  float t = __fadd_rn (rintf (__fdiv_rn (v, sf)), zf);
  if (!(t >= 0.0f))
    t = 0.0f;
  if (t > 15.0f)
    t = 15.0f;
  return t;
}

static __device__ __forceinline__ float
sanitize (float v, float clip)
{
  if (clip > 0.0f)
    v = v > clip ? clip : (v < -clip ? -clip : v);
  return isfinite (v) ? v : 0.0f;
}

#define GMAX 4      /* values per lane: g ≤ 128 */

/* Warp per (row, group): lanes hold elements lane + 32·j. */
__global__ void
fake_quant_kernel (const float *src, const float *s, float *dst, int N, int K, int g)
{
  int ng = K / g, per = g / 32;
  size_t wid = (blockIdx.x * (size_t) blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  float v[GMAX], mx = -INFINITY, mn = INFINITY, sf, zf;
  size_t base;
  int k0;

  if (wid >= (size_t) N * ng)
    return;
  k0 = (int) (wid % ng) * g;
  base = (wid / ng) * (size_t) K + k0;
  for (int j = 0; j < per; j++)
    {
      int k = k0 + lane + 32 * j;
      v[j] = sanitize (__fmul_rn (src[base + lane + 32 * j], s[k]), 0.0f);
      mx = fmaxf (mx, v[j]);
      mn = fminf (mn, v[j]);
    }
  for (int o = 16; o > 0; o >>= 1)
    {
      mx = fmaxf (mx, __shfl_xor_sync (0xffffffffu, mx, o));
      mn = fminf (mn, __shfl_xor_sync (0xffffffffu, mn, o));
    }
  group_params (mx, mn, &sf, &zf);
  for (int j = 0; j < per; j++)
    {
      int k = k0 + lane + 32 * j;
      float w = __fmul_rn (__fsub_rn (quant_level (v[j], sf, zf), zf), sf);
      dst[base + lane + 32 * j] = __fdiv_rn (w, s[k]);
    }
}

int
hone_k_awq_fake_quant (const float *src, const float *s, float *dst, int N, int K, int g, cudaStream_t stream)
{
  size_t threads = (size_t) N * (K / g) * 32;
  if (g % 32 != 0 || g > 32 * GMAX)
    return (int) cudaErrorInvalidValue;
  if (threads == 0)
    return 0;
  fake_quant_kernel<<<(unsigned) ((threads + 255) / 256), 256, 0, stream>>> (src, s, dst, N, K, g);
  CHECK_LAUNCH ();
  return 0;
}

__global__ void
quantize_kernel (const float *W, int N, int K, int g, uint8_t *q, uint8_t *z, uint16_t *s)
{
  int ng = K / g, per = g / 32;
  size_t wid = (blockIdx.x * (size_t) blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  float v[GMAX], mx = -INFINITY, mn = INFINITY, sf, zf;
  size_t base;

  if (wid >= (size_t) N * ng)
    return;
  base = (wid / ng) * (size_t) K + (wid % ng) * g;
  for (int j = 0; j < per; j++)
    {
      v[j] = sanitize (W[base + lane + 32 * j], 0.0f);
      mx = fmaxf (mx, v[j]);
      mn = fminf (mn, v[j]);
    }
  for (int o = 16; o > 0; o >>= 1)
    {
      mx = fmaxf (mx, __shfl_xor_sync (0xffffffffu, mx, o));
      mn = fminf (mn, __shfl_xor_sync (0xffffffffu, mn, o));
    }
  group_params (mx, mn, &sf, &zf);
  for (int j = 0; j < per; j++)
    q[base + lane + 32 * j] = (uint8_t) quant_level (v[j], sf, zf);
  if (lane == 0)
    {
      z[wid] = (uint8_t) zf;
      s[wid] = __half_as_ushort (__float2half_rn (sf));
    }
}

int
hone_k_awq_quantize (const float *W, int N, int K, int g, uint8_t *q, uint8_t *z, uint16_t *s,
                     cudaStream_t stream)
{
  size_t threads = (size_t) N * (K / g) * 32;
  if (g % 32 != 0 || g > 32 * GMAX)
    return (int) cudaErrorInvalidValue;
  if (threads == 0)
    return 0;
  quantize_kernel<<<(unsigned) ((threads + 255) / 256), 256, 0, stream>>> (W, N, K, g, q, z, s);
  CHECK_LAUNCH ();
  return 0;
}

/* ---- clip search -------------------------------------------------------- */

/* Thread (gi, a, b): Σ_t x[t·step][gi·g + a]·x[t·step][gi·g + b] in double,
 * in token order (products of two floats are exact in double, so this is
 * the CPU's sum bit for bit). */
__global__ void
gram_kernel (const float *x, int K, int n, int step, int g, float *gram)
{
  int gi = blockIdx.y, a = blockIdx.x, b = threadIdx.x;
  const float *col = x + (size_t) gi * g;
  double acc = 0.0;
  for (int t = 0; t < n; t++)
    {
      const float *row = col + (size_t) t * step * K;
      acc += (double) row[a] * (double) row[b];
    }
  gram[((size_t) gi * g + a) * g + b] = (float) (acc / n);
}

int
hone_k_awq_gram (const float *x, int K, int n, int step, int g, float *gram, cudaStream_t stream)
{
  if (n <= 0 || K <= 0)
    return 0;
  gram_kernel<<<dim3 (g, K / g), g, 0, stream>>> (x, K, n, step, g, gram);
  CHECK_LAUNCH ();
  return 0;
}

#define CLIP_ROWS 32

static __device__ float
block_max (float v, float *sh)
{
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf (v, __shfl_xor_sync (0xffffffffu, v, o));
  __syncthreads ();
  if (lane == 0)
    sh[warp] = v;
  __syncthreads ();
  v = sh[0];
  for (int w = 1; w < nw; w++)
    v = fmaxf (v, sh[w]);
  return v;
}

static __device__ float
block_min (float v, float *sh)
{
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
  for (int o = 16; o > 0; o >>= 1)
    v = fminf (v, __shfl_xor_sync (0xffffffffu, v, o));
  __syncthreads ();
  if (lane == 0)
    sh[warp] = v;
  __syncthreads ();
  v = sh[0];
  for (int w = 1; w < nw; w++)
    v = fminf (v, sh[w]);
  return v;
}

/* Block = g threads = one group column gi (blockIdx.y) over CLIP_ROWS rows;
 * the group's g×g Gram matrix sits in shared memory. Thread i holds w_i and
 * d_i; y_k = Σ_i d_i·G[i][k] in i order without FMA, err = Σ_i d_i·y_i in
 * double by one thread, in order: the CPU's clip_worker exactly. */
__global__ void
clip_kernel (float *W, const float *gram, int N, int K, int g, int n_grid)
{
  extern __shared__ float smem[];
  float *G = smem, *d = G + g * g, *y = d + g, *red = y + g;   /* red: 4 floats; then the broadcast */
  int gi = blockIdx.y, i = threadIdx.x;
  int r0 = blockIdx.x * CLIP_ROWS, r1 = min (N, r0 + CLIP_ROWS);

  for (int j = i; j < g * g; j += blockDim.x)
    G[j] = gram[(size_t) gi * g * g + j];
  __syncthreads ();

  for (int r = r0; r < r1; r++)
    {
      float *wp = W + (size_t) r * K + (size_t) gi * g;
      float w = wp[i], amax = block_max (fabsf (w), red), best_max = amax;
      double min_err = 1e9;

      for (int is = 0; is < n_grid / 2; is++)
        {
          float max_val = __fmul_rn (amax, __fsub_rn (1.0f, __fdiv_rn ((float) is, (float) n_grid)));
          float clip = max_val > 0 ? max_val : 0.0f;
          float v = sanitize (w, clip), sf, zf, acc = 0.0f;
          float mx = block_max (v, red), mn = block_min (v, red);

          group_params (mx, mn, &sf, &zf);
          d[i] = __fsub_rn (__fmul_rn (__fsub_rn (quant_level (v, sf, zf), zf), sf), w);
          __syncthreads ();
          for (int a = 0; a < g; a++)
            acc = __fadd_rn (acc, __fmul_rn (d[a], G[a * g + i]));
          y[i] = acc;
          __syncthreads ();
          if (i == 0)
            {
              double err = 0.0;
              for (int a = 0; a < g; a++)
                err += (double) d[a] * (double) y[a];
              if (isfinite (err) && err < min_err)
                {
                  min_err = err;
                  best_max = max_val;
                }
            }
          __syncthreads ();
        }
      if (i == 0)
        red[4] = best_max;
      __syncthreads ();
      best_max = red[4];
      wp[i] = w > best_max ? best_max : (w < -best_max ? -best_max : w);
      __syncthreads ();
    }
}

int
hone_k_awq_clip (float *W, const float *gram, int N, int K, int g, int n_grid, cudaStream_t stream)
{
  size_t smem = ((size_t) g * g + 2 * g + 8) * sizeof (float);
  cudaError_t e;
  if (g % 32 != 0 || g > 32 * GMAX)
    return (int) cudaErrorInvalidValue;
  if (N <= 0 || K <= 0)
    return 0;
  e = cudaFuncSetAttribute (clip_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int) smem);
  if (e != cudaSuccess)
    return (int) e;
  clip_kernel<<<dim3 ((N + CLIP_ROWS - 1) / CLIP_ROWS, K / g), g, smem, stream>>> (W, gram, N, K, g, n_grid);
  CHECK_LAUNCH ();
  return 0;
}

/* ---- weights ------------------------------------------------------------ */

__global__ void
widen_kernel (const uint16_t *src, int type, size_t n, float *dst)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    dst[i] = type == 30 ? __bfloat162float (__ushort_as_bfloat16 (src[i])) : __half2float (__ushort_as_half (src[i]));
}

int
hone_k_awq_widen (const uint16_t *src, int type, size_t n, float *dst, cudaStream_t stream)
{
  if (n == 0)
    return 0;
  widen_kernel<<<blocks_for (n, 256), 256, 0, stream>>> (src, type, n, dst);
  CHECK_LAUNCH ();
  return 0;
}
