/* hone-k-elementwise.cu — RMSNorm, activation quantization, SwiGLU, embedding
 * lookup, sampling: the small kernels around the matrix work. */
#include "hone-k-common.cuh"
#include <stdlib.h>
#include <string.h>

/* quant32_store (hone-k-common.cuh) quantizes a warp's 32 values. */

static __device__ __forceinline__ void
store16 (void *y16, int is_f16, size_t i, float v)
{
  if (is_f16)
    ((__half *) y16)[i] = __float2half_rn (v);
  else
    ((__nv_bfloat16 *) y16)[i] = __float2bfloat16_rn (v);
}

/* row_rms_scale (hone-k-common.cuh): a row's RMS scale, summed by a block. */

/* Element i of row t (xi, with its weight gi), normalized, into whichever
 * outputs are set (yq: a warp covers whole 32-blocks, n % 32 == 0). */
static __device__ __forceinline__ void
norm_store (float xi, float gi, int n, int t, int i, float scale, float *y, int8_t *yq, float2 *yds,
            void *y16, int y16_is_f16)
{
  const float v = xi * scale * gi;
  const size_t o = (size_t) t * n + i;
  if (y)
    y[o] = v;
  if (y16)
    store16 (y16, y16_is_f16, o, v);
  if (yq)
    quant32_store (v, yq + (size_t) t * n + (i & ~31), yds + (size_t) t * (n >> 5) + (i >> 5), threadIdx.x & 31);
}

/* Where the decode step's small kernels (RMSNorm, quantize, W4A16 pack) let
 * the next kernel launch (PDL): at entry, or LATE — once their own loads are
 * in (the norms, the pack) or at the end (quantize), so that the next GEMV's
 * early weight loads do not queue ahead of theirs. Measured (RESULTS-cuda.md,
 * "Decode, session 13"): late made the AWQ step 0.5-1.2 % faster (its pack
 * kernels) and the Q4_0 step 1-5 % slower (rmsnorm, quantize), so the pack
 * triggers late and the others at entry; HONE_NORM_TRIGGER=entry|late forces
 * one placement on all three (A/B runs). @pack: asked for the pack kernel. */
static bool
small_trigger_late (bool pack)
{
  static int mode = -1;   /* 0 auto, 1 entry, 2 late */
  if (mode < 0)
    {
      const char *e = getenv ("HONE_NORM_TRIGGER");
      mode = e && !strcmp (e, "late") ? 2 : e && !strcmp (e, "entry") ? 1 : 0;
    }
  return mode == 2 || (mode == 0 && pack);
}

/* grid (chunks of 256 values, tokens): for a few tokens (decode), every
 * block sums the whole row (a few KB from L2) and writes its chunk. */
template <bool LATE>
__global__ void __launch_bounds__ (256)
rmsnorm_kernel (const float *x, const float *g, int n, float eps, float *y, int8_t *yq, float2 *yds,
                void *y16, int y16_is_f16 HONE_K_TP)
{
  TRACE_ENTRY (trace_);
  const int t = blockIdx.y;
  const float *xr = x + (size_t) t * n;
  if (!LATE)
    pdl_trigger ();
  pdl_wait ();
  TRACE_WAITED ();
  /* this thread's element loaded with the sum's loads, not a round trip after it */
  const int i = blockIdx.x * 256 + threadIdx.x;
  const float xi = i < n ? xr[i] : 0.f, gi = i < n ? g[i] : 0.f;
  const float scale = row_rms_scale<false> (xr, n, eps);
  if (LATE)
    pdl_trigger ();
  if (i < n)
    norm_store (xi, gi, n, t, i, scale, y, yq, yds, y16, y16_is_f16);
}

/* grid (tokens): one block a row — for many tokens, where the form above
 * would read every row (n/256) times over (16 KB × 16 a row at hidden 4096:
 * a 2,048-token prefill's norm ran at ~0.75 TB/s). The second pass re-reads
 * the row from L1. */
__global__ void __launch_bounds__ (256)
rmsnorm_row_kernel (const float *x, const float *g, int n, float eps, float *y, int8_t *yq, float2 *yds,
                    void *y16, int y16_is_f16)
{
  const int t = blockIdx.x;
  const float *xr = x + (size_t) t * n;
  pdl_trigger ();
  pdl_wait ();
  const float scale = (n & 3) ? row_rms_scale<false> (xr, n, eps) : row_rms_scale<true> (xr, n, eps);
  for (int i = threadIdx.x; i < n; i += 256)
    norm_store (xr[i], g[i], n, t, i, scale, y, yq, yds, y16, y16_is_f16);
}

/* Tokens from which the one-block-a-row form is used (decode keeps the
 * parallel form: its few rows want every SM, not one block each). */
#define RMSNORM_ROW_MIN_TOKENS 16

extern "C" int
hone_k_rmsnorm (const float *x, const float *g, int n_tok, int n, float eps,
                float *y, HoneKActQ8 *yq, void *y16, int y16_is_f16, cudaStream_t stream)
{
  if (n_tok < 1 || n < 1 || (yq && (n & 31)) || n_tok > 65535)
    return (int) cudaErrorInvalidValue;
  if (n_tok >= RMSNORM_ROW_MIN_TOKENS && ((uintptr_t) x & 15) == 0)
    return hone_k_launch (rmsnorm_row_kernel, dim3 (n_tok), dim3 (256), 0, stream,
                          x, g, n, eps, y, yq ? yq->q : (int8_t *) NULL, yq ? yq->ds : (float2 *) NULL,
                          y16, y16_is_f16);
  const dim3 grid ((n + 255) / 256, n_tok);
  return hone_k_launch (small_trigger_late (false) ? rmsnorm_kernel<true> : rmsnorm_kernel<false>, grid, dim3 (256), 0, stream,
                        x, g, n, eps, y, yq ? yq->q : (int8_t *) NULL, yq ? yq->ds : (float2 *) NULL,
                        y16, y16_is_f16 HONE_K_TA (HONE_K_TR_NORM, grid, n, n_tok));
}

/* grid (chunks of 256 values, tokens): HoneKActH16 of x (RMSNorm'ed by g when
 * set: every block sums the row, as rmsnorm_kernel); a warp packs one block
 * of 32 values: d = absmax/32767, v = rint(x·32767/absmax) as hi/lo bytes in
 * tile order, and Σv. */
template <bool LATE>
__global__ void __launch_bounds__ (256)
pack_h16_kernel (const float *x, const float *g, int n, float eps, uint16_t *yh, float *yd HONE_K_TP)
{
  TRACE_ENTRY (trace_);
  const int t = blockIdx.y;
  const float *xr = x + (size_t) t * n;
  if (!LATE)
    pdl_trigger ();
  pdl_wait ();
  TRACE_WAITED ();
  const int i = blockIdx.x * 256 + threadIdx.x;
  /* this thread's value loaded with the sum's loads, not a round trip after it */
  const float xi = i < n ? xr[i] : 0.f, gi = g && i < n ? g[i] : 0.f;
  const float scale = !g ? 1.f : ((uintptr_t) xr & 15) ? row_rms_scale<false> (xr, n, eps)
                                                      : row_rms_scale<true> (xr, n, eps);   /* n % 32 == 0 */
  if ((i & ~31) >= n)   /* whole warps: n % 32 == 0 */
    return;
  const float v = g ? xi * scale * gi : xi;
  if (LATE)
    pdl_trigger ();
  h16_pack32 (v, yh, yd, n, t, i);
}

extern "C" int
hone_k_pack_h16 (const float *x, const float *g, int n_tok, int n, float eps, HoneKActH16 *yh, cudaStream_t stream)
{
  if (n_tok < 1 || n < 32 || (n & 31) || n_tok > 65535 || !x || !yh || !yh->h || !yh->d)
    return (int) cudaErrorInvalidValue;
  const dim3 grid ((n + 255) / 256, n_tok);
  return hone_k_launch (small_trigger_late (true) ? pack_h16_kernel<true> : pack_h16_kernel<false>, grid, dim3 (256), 0,
                        stream, x, g, n, eps,
                        yh->h, yh->d HONE_K_TA (HONE_K_TR_PACK, grid, n, g != NULL));
}

template <bool LATE>
__global__ void __launch_bounds__ (256)
quantize_kernel (const float *x, size_t total, int n, int8_t *yq, float2 *yds, void *y16, int y16_is_f16 HONE_K_TP)
{
  TRACE_ENTRY (trace_);
  const size_t i = (size_t) blockIdx.x * 256 + threadIdx.x;
  const int lane = threadIdx.x & 31;
  if (!LATE)
    pdl_trigger ();
  pdl_wait ();
  TRACE_WAITED ();
  if (i >= total)
    return;
  const float v = x[i];
  if (y16)
    store16 (y16, y16_is_f16, i, v);
  if (yq)
    quant32_store (v, yq + (i & ~(size_t) 31), yds + (i >> 5), lane);
  if (LATE)
    pdl_trigger ();
  (void) n;
}

extern "C" int
hone_k_quantize (const float *x, int n_tok, int n, HoneKActQ8 *yq, void *y16, int y16_is_f16,
                 cudaStream_t stream)
{
  const size_t total = (size_t) n_tok * n;
  if (n_tok < 1 || n < 1 || (yq && (n & 31)))
    return (int) cudaErrorInvalidValue;
  const dim3 grid ((unsigned) ((total + 255) / 256));
  return hone_k_launch (small_trigger_late (false) ? quantize_kernel<true> : quantize_kernel<false>, grid, dim3 (256), 0, stream,
                        x, total, n, yq ? yq->q : (int8_t *) NULL, yq ? yq->ds : (float2 *) NULL,
                        y16, y16_is_f16 HONE_K_TA (HONE_K_TR_QUANT, grid, n, n_tok));
}

__global__ void __launch_bounds__ (256)
swiglu_kernel (const float *gu, size_t total, int ffn, float *y)
{
  const size_t i = (size_t) blockIdx.x * 256 + threadIdx.x;
  pdl_trigger ();
  pdl_wait ();
  if (i >= total)
    return;
  const size_t t = i / ffn, j = i - t * ffn;
  const float2 v = ((const float2 *) gu)[t * ffn + j];
  y[i] = silu (v.x) * v.y;
}

extern "C" int
hone_k_swiglu (const float *gu, int n_tok, int ffn, float *y, cudaStream_t stream)
{
  const size_t total = (size_t) n_tok * ffn;
  if (n_tok < 1 || ffn < 1)
    return (int) cudaErrorInvalidValue;
  return hone_k_launch (swiglu_kernel, dim3 ((unsigned) ((total + 255) / 256)), dim3 (256), 0, stream,
                        gu, total, ffn, y);
}

/* Dequantize element k of row r of a GPU-layout matrix. */
static __device__ __forceinline__ float
matrix_elem (const HoneKMatrix &w, size_t r, int k)
{
  switch (w.type)
    {
    case HONE_K_BF16:
      return __bfloat162float (((const __nv_bfloat16 *) w.q)[r * w.cols + k]);
    case HONE_K_F16:
      return __half2float (((const __half *) w.q)[r * w.cols + k]);
    case HONE_K_Q8_0:
      return (float) ((const int8_t *) w.q)[r * w.cols + k]
             * f16_bits_to_f32 (((const uint16_t *) w.s)[r * (w.cols / 32) + k / 32]);
    case HONE_K_Q4_0:
    case HONE_K_Q4_1:
      {
        const uint8_t *blk = (const uint8_t *) w.q + r * (w.cols / 2) + (k / 32) * 16;
        const int j = k & 31;
        const int q = j < 16 ? (blk[j] & 15) : (blk[j - 16] >> 4);
        if (w.type == HONE_K_Q4_0)
          return (float) (q - 8) * f16_bits_to_f32 (((const uint16_t *) w.s)[r * (w.cols / 32) + k / 32]);
        const uint16_t *dm = (const uint16_t *) w.s + 2 * (r * (w.cols / 32) + k / 32);
        return (float) q * f16_bits_to_f32 (dm[0]) + f16_bits_to_f32 (dm[1]);
      }
    default:
      return 0.f;
    }
}

__global__ void __launch_bounds__ (256)
embed_kernel (HoneKMatrix w, const int32_t *tokens, float *h)
{
  const int t = blockIdx.y;
  pdl_trigger ();
  pdl_wait ();
  int tok = tokens[t];
  if (tok < 0 || tok >= w.rows)
    tok = 0;   /* the host validates ids; never read out of bounds */
  for (int k = blockIdx.x * 256 + threadIdx.x; k < w.cols; k += gridDim.x * 256)
    h[(size_t) t * w.cols + k] = matrix_elem (w, (size_t) tok, k);
}

extern "C" int
hone_k_embed (const HoneKMatrix *embd, const int32_t *tokens, int n_tok, float *h, cudaStream_t stream)
{
  if (embd->type == HONE_K_Q4_K || embd->type == HONE_K_Q6_K) return hone_k_kquant_embed (embd, tokens, n_tok, h, stream);
  if (n_tok < 1 || n_tok > 65535)
    return (int) cudaErrorInvalidValue;
  return hone_k_launch (embed_kernel, dim3 ((embd->cols + 255) / 256, n_tok), dim3 (256), 0, stream,
                        *embd, tokens, h);
}

/* Dequantize a whole matrix to 16-bit (GEMM path). One thread per 2 elements. */
__global__ void __launch_bounds__ (256)
dequant_kernel (HoneKMatrix w, void *dst, int to_f16)
{
  const size_t i = ((size_t) blockIdx.x * 256 + threadIdx.x) * 2;
  const size_t total = (size_t) w.rows * w.cols;
  if (i >= total)
    return;
  const size_t r = i / w.cols;
  const int k = (int) (i - r * w.cols);
  const float a = matrix_elem (w, r, k), b = matrix_elem (w, r, k + 1);
  if (to_f16)
    ((__half2 *) dst)[i / 2] = __floats2half2_rn (a, b);
  else
    ((__nv_bfloat162 *) dst)[i / 2] = __floats2bfloat162_rn (a, b);
}

/* Q8_0 / Q4_0 / Q4_1 to 16-bit, one thread per 8 outputs of a 32-block: one
 * 8-byte load of quants (Q4: the low or high nibbles of one half of the block's
 * 16 bytes), one 16-byte store, so a warp writes 512 contiguous bytes. The same
 * float arithmetic as matrix_elem, so the same 16-bit values as dequant_kernel,
 * which took 354 µs for a Q4_0 gate|up (28672 × 4096, 850 GB/s read + write)
 * with its two elements a thread, byte loads and a 64-bit division each; this
 * one 81 µs (H200, session 27). Q4_0/Q4_1 take it unless
 * hone_k_dequant_set_q4_blocks is off (HONE_DEQUANT_Q4_BLOCKS=0): its values
 * match f64 and the element kernel bit for bit on the GPU (hone-cuda-check
 * --check-misc, session 28). */
template <int T>
__global__ void __launch_bounds__ (256)
dequant8_kernel (HoneKMatrix w, void *dst, size_t n8, int to_f16)
{
  const size_t i = (size_t) blockIdx.x * 256 + threadIdx.x;
  if (i >= n8)
    return;
  const size_t b = i >> 2;
  const int p = (int) (i & 3);
  float v[8];
  if (T == HONE_K_Q8_0)
    {
      const uint2 a = __ldg ((const uint2 *) ((const int8_t *) w.q + b * 32 + p * 8));
      const float d = f16_bits_to_f32 (__ldg ((const uint16_t *) w.s + b));
#pragma unroll
      for (int j = 0; j < 8; j++)
        v[j] = (float) (int8_t) (((j < 4 ? a.x : a.y) >> (8 * (j & 3))) & 0xff) * d;
    }
  else
    {
      const uint2 a = __ldg ((const uint2 *) ((const uint8_t *) w.q + b * 16 + (p & 1) * 8));
      const int sh = (p >> 1) * 4;
      float d, m = 0.f;
      if (T == HONE_K_Q4_0)
        d = f16_bits_to_f32 (__ldg ((const uint16_t *) w.s + b));
      else
        {
          const uint32_t dm = __ldg ((const uint32_t *) w.s + b);
          d = f16_bits_to_f32 ((uint16_t) (dm & 0xffff));
          m = f16_bits_to_f32 ((uint16_t) (dm >> 16));
        }
#pragma unroll
      for (int j = 0; j < 8; j++)
        {
          const int q = (int) (((j < 4 ? a.x : a.y) >> (8 * (j & 3) + sh)) & 15);
          v[j] = T == HONE_K_Q4_0 ? (float) (q - 8) * d : (float) q * d + m;
        }
    }
  uint4 o;
  uint32_t *ow = (uint32_t *) &o;
#pragma unroll
  for (int j = 0; j < 4; j++)
    {
      if (to_f16)
        {
          const __half2 h = __floats2half2_rn (v[2 * j], v[2 * j + 1]);
          ow[j] = *(const uint32_t *) &h;
        }
      else
        {
          const __nv_bfloat162 h = __floats2bfloat162_rn (v[2 * j], v[2 * j + 1]);
          ow[j] = *(const uint32_t *) &h;
        }
    }
  ((uint4 *) dst)[i] = o;
}

static int q4_blocks = -1;   /* -1: not read yet (HONE_DEQUANT_Q4_BLOCKS) */

static int
q4_blocks_on (void)
{
  if (q4_blocks < 0)
    q4_blocks = !(getenv ("HONE_DEQUANT_Q4_BLOCKS") && atoi (getenv ("HONE_DEQUANT_Q4_BLOCKS")) == 0);
  return q4_blocks;
}

int
hone_k_dequant_set_q4_blocks (int on)
{
  const int was = q4_blocks_on ();
  q4_blocks = on ? 1 : 0;
  return was;
}

extern "C" int
hone_k_dequant (const HoneKMatrix *w, void *dst, int to_f16, cudaStream_t stream)
{
  const size_t total = (size_t) w->rows * w->cols;
  if (w->type == HONE_K_Q4Z)
    return hone_k_q4z_dequant (w, dst, to_f16, stream);
  if (w->type == HONE_K_Q4_K || w->type == HONE_K_Q6_K) return hone_k_kquant_dequant (w, dst, to_f16, stream);
  if (w->cols & 1)
    return (int) cudaErrorInvalidValue;
  const bool blocks = (w->type == HONE_K_Q8_0 || (q4_blocks_on () && (w->type == HONE_K_Q4_0 || w->type == HONE_K_Q4_1)))
                      && w->cols % 32 == 0 && ((uintptr_t) w->q & 7) == 0 && ((uintptr_t) w->s & 3) == 0
                      && ((uintptr_t) dst & 15) == 0 && total > 0;
  if (blocks)
    {
      const size_t n8 = total / 8;
      const unsigned grid = (unsigned) ((n8 + 255) / 256);
      if (w->type == HONE_K_Q8_0)
        dequant8_kernel<HONE_K_Q8_0><<<grid, 256, 0, stream>>> (*w, dst, n8, to_f16);
      else if (w->type == HONE_K_Q4_0)
        dequant8_kernel<HONE_K_Q4_0><<<grid, 256, 0, stream>>> (*w, dst, n8, to_f16);
      else
        dequant8_kernel<HONE_K_Q4_1><<<grid, 256, 0, stream>>> (*w, dst, n8, to_f16);
      return (int) cudaGetLastError ();
    }
  dequant_kernel<<<(unsigned) ((total / 2 + 255) / 256), 256, 0, stream>>> (*w, dst, to_f16);
  return (int) cudaGetLastError ();
}

__global__ void
add_i32_kernel (int32_t *p, int n, int32_t *p2)
{
  pdl_trigger ();
  pdl_wait ();
  *p += n;
  if (p2)
    *p2 += 1;
}

extern "C" int
hone_k_add_i32 (int32_t *p, int n, cudaStream_t stream)
{
  return hone_k_launch (add_i32_kernel, dim3 (1), dim3 (1), 0, stream, p, n, (int32_t *) NULL);
}

extern "C" int
hone_k_advance (int32_t *pos, int n, int32_t *step, cudaStream_t stream)
{
  return hone_k_launch (add_i32_kernel, dim3 (1), dim3 (1), 0, stream, pos, n, step);
}

/* Internal (prefill): SwiGLU straight to 16-bit GEMM input. */
__global__ void __launch_bounds__ (256)
swiglu16_kernel (const float *gu, size_t total, int ffn, void *y16, int is_f16)
{
  const size_t i = (size_t) blockIdx.x * 256 + threadIdx.x;
  pdl_trigger ();
  pdl_wait ();
  if (i >= total)
    return;
  const size_t t = i / ffn, j = i - t * ffn;
  const float2 v = ((const float2 *) gu)[t * ffn + j];
  store16 (y16, is_f16, i, silu (v.x) * v.y);
}

extern "C" int
hone_k_swiglu16 (const float *gu, int n_tok, int ffn, void *y16, int is_f16, cudaStream_t stream)
{
  const size_t total = (size_t) n_tok * ffn;
  return hone_k_launch (swiglu16_kernel, dim3 ((unsigned) ((total + 255) / 256)), dim3 (256), 0, stream,
                        gu, total, ffn, y16, is_f16);
}

__global__ void __launch_bounds__ (256)
add_bias_kernel (float *y, size_t total, int n, const float *b)
{
  const size_t i = (size_t) blockIdx.x * 256 + threadIdx.x;
  pdl_trigger ();
  pdl_wait ();
  if (i < total)
    y[i] += b[i % n];
}

extern "C" int
hone_k_add_bias (float *y, int n_tok, int n, const float *b, cudaStream_t stream)
{
  const size_t total = (size_t) n_tok * n;
  return hone_k_launch (add_bias_kernel, dim3 ((unsigned) ((total + 255) / 256)), dim3 (256), 0, stream,
                        y, total, n, b);
}
