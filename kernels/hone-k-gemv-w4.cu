/* hone-k-gemv-w4.cu — W4A16 for AWQ int4 weights (HONE_K_Q4Z): the GPU layout's
 * repack from the host's Q4Z blocks, the decode GEMV, and the dequantization
 * to 16-bit used by the prefill GEMMs.
 *
 * Layout (hone-kernels.h): 16-byte chunks of 32 weights; in 32-bit word i of
 * a chunk, weight 8i+2p sits in nibble p and weight 8i+2p+1 in nibble p+4
 * (p = 0..3), so that one LOP3 with 0x000f000f (or 0x00f000f0) | 0x64006400
 * turns a word into an f16 pair (1024 + q, 1024 + q') (or (1024 + 16q, …))
 * of two *adjacent* weights — the "magic number" int4→f16x2 conversion. One
 * f16 scale and one zero point per group of g weights, apart from the
 * nibbles: 0.5 + 3/g bytes a weight (0.523 at g = 128).
 *
 * Decode GEMV (why it is shaped so): W4A16 keeps the activation 16-bit, so
 * the dot product runs on HFMA2 — 8 weights of a word cost 1 shift, 4 LOP3,
 * 4 HSUB2/HFMA2 (subtracting the zero point exactly: (1024+q)-(1024+z)) and
 * 4 HFMA2, about 2 instructions a weight of arithmetic, where an H200 issues
 * ~3.7 a weight at the 4.52 TB/s read ceiling. Measured (RESULTS-cuda.md,
 * "AWQ W4A16"): ≈ 2.9 TB/s on big matrices; its SASS spends 3.5 instructions
 * a weight (per-load address math, predicates, separate scale/zero loads) and
 * joins scale and zero right after issuing the loads, which waits out a memory
 * round trip per batch — latency-bound more than issue-bound. Variant 2 below (w4v2_gemv_kernel, chosen by
 * hone_k_q4z_set_config or HONE_Q4Z_KERNEL) is the trimmed version, and the staged
 * kernel (w4s_gemv_kernel, one token: one wave, weights through shared memory by
 * bulk copies issued before the PDL wait) the session-3 experiment. Since
 * session 8 one token runs by default on neither: hone_k_pack_h16 packs the
 * input once (HoneKActH16) and the register-streamed GEMV of hone-k-gemv.cu
 * dots it (config 13, below): with this file's arithmetic in session 8, since
 * session 10 with integer dot products against the input's 16-bit fixed
 * point (2 LOP3/SHF + 4 dp4a a word of 8 weights, exact sums; still 16-bit
 * activations, as the name says: each value within absmax/65534 of its
 * block of 32's absmax scale, where f16 is within |x|/2048). In variant 2 the
 * f32 activation rows are staged once per block into shared memory as f16, the
 * RMSNorm applied on the way (Σx² and max|x·g| in one pass), and scaled by
 * 8/max so that a chunk's 16 f16 products per lane half stay far from f16
 * overflow (|sum| ≤ 16·15·8) whatever the activation's outliers; the scale
 * comes back in the f32 epilogue. The shared rows are swizzled per chunk so
 * that a warp's 16-byte reads are free of bank conflicts.
 * A warp owns 2 rows (SWIGLU and ROPE_KV need row pairs) across the whole
 * input; lanes stride over 16-byte chunks (coalesced 512-byte warp loads
 * that bypass L1); blocks are persistent (grid-stride over row pairs, the
 * grid sized so every warp gets the same number of pairs), and each warp keeps
 * its current and next batch of U chunk loads a lane in flight, the first
 * two issued before the PDL wait.
 */
#include "hone-k-common.cuh"
#include "hone-k-stage.cuh"
#include "hone-k-w4.cuh"
#include <string.h>
#include <stdlib.h>

#define W4_R 2                       /* rows a warp */
#define W4_SMEM (96 * 1024)          /* shared bytes for staged activations per launch */

extern "C" size_t
hone_k_matrix_bytes_g (int t, int rows, int cols, int group, size_t *qb, size_t *sb)
{
  if (t != HONE_K_Q4Z)
    return hone_k_matrix_bytes (t, rows, cols, qb, sb);
  if (group <= 0)
    group = 32;
  if (rows < 0 || cols < 0 || cols % 32 || (group != 32 && group != 64 && group != 128) || cols % group)
    return 0;
  const size_t q = (size_t) rows * cols / 2, s = (size_t) rows * (cols / group) * 3;
  if (qb) *qb = q;
  if (sb) *sb = s;
  return q + s;
}

static int
q4z_group (const HoneKMatrix *w)
{
  return w->group > 0 ? w->group : 32;
}

static bool
q4z_shape_ok (const HoneKMatrix *w)
{
  const int g = q4z_group (w);
  return w->rows > 0 && w->cols > 0 && (g == 32 || g == 64 || g == 128) && w->cols % g == 0;
}

/* ---- repack: host Q4Z blocks → GPU layout ------------------------------------ */

/* One thread per 20-byte block {f16 s, u8 z, pad, qs[16]} (element j: qs[j]
 * low nibble, j+16 high). The group's first block gives its (s, z). */
__global__ void
q4z_repack_kernel (const uint8_t *src, int rows, int cols, int group, uint32_t *dq, uint16_t *ds, uint8_t *dz,
                   int row0, int step)
{
  const int nb = cols / 32, ng = cols / group;
  const size_t b = (size_t) blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= (size_t) rows * nb)
    return;
  const size_t r = b / nb, j = b - r * nb, dr = (size_t) row0 + r * step;
  const uint8_t *blk = src + b * 20;
  uint8_t v[32];
  for (int i = 0; i < 16; i++)
    {
      v[i] = blk[4 + i] & 15;
      v[i + 16] = blk[4 + i] >> 4;
    }
  uint32_t *o = dq + (dr * nb + j) * 4;
  for (int i = 0; i < 4; i++)
    {
      uint32_t w = 0;
      for (int p = 0; p < 4; p++)
        w |= ((uint32_t) v[8 * i + 2 * p] << (4 * p)) | ((uint32_t) v[8 * i + 2 * p + 1] << (4 * p + 16));
      o[i] = w;
    }
  if ((j * 32) % group == 0)
    {
      const size_t gi = dr * ng + j * 32 / group;
      ds[gi] = (uint16_t) (blk[0] | (blk[1] << 8));
      dz[gi] = blk[2] & 15;
    }
}

extern "C" int
hone_k_q4z_repack (const void *src, int rows, int cols, HoneKMatrix *dst, int row0, int step, cudaStream_t stream)
{
  if (rows < 1 || cols < 1 || step < 1 || row0 < 0 || dst->type != HONE_K_Q4Z || dst->cols != cols
      || !q4z_shape_ok (dst) || row0 + (size_t) (rows - 1) * step >= (size_t) dst->rows)
    return (int) cudaErrorInvalidValue;
  const int g = q4z_group (dst);
  const size_t n = (size_t) rows * (cols / 32);
  uint16_t *ds = (uint16_t *) dst->s;
  uint8_t *dz = (uint8_t *) dst->s + (size_t) dst->rows * (cols / g) * 2;
  q4z_repack_kernel<<<(unsigned) ((n + 255) / 256), 256, 0, stream>>> ((const uint8_t *) src, rows, cols, g,
                                                                       (uint32_t *) dst->q, ds, dz, row0, step);
  return (int) cudaGetLastError ();
}

/* the int4 → f16x2 conversion (lop3_and_or, as_h2, h2_bits, w4_word, w4_zero): hone-k-w4.cuh */

/* ---- decode GEMV ------------------------------------------------------------------ */

struct W4Args {
  const int4 *q;
  const uint16_t *s;
  const uint8_t *z;
  int rows, cols, nchunk, ng, cshift, ntask, nround;
  const float *x;
  int n_tok, tok0;            /* tokens of this launch, and the first one's index */
  const float *norm_g;
  float eps;
  const float *bias, *res;
  float *y;
  int epi;
  int nq, nkv, hd;
  const int32_t *pos;
  const float *inv_freq;
  __half *k_pool, *v_pool;
  const int32_t *block_table;
  HoneKPrefetch pf;           /* the next weights, pulled into L2 once a warp is through */
  /* staged kernel (w4s_gemv_kernel) only: rows a stage, stages in the ring, bytes of a
   * ring slot, offsets of its scale and zero regions, bytes of the staged activation */
  int st_rows, st_n, st_bytes, st_soff, st_zoff, st_xbytes, st_trig_end;
  /* tensor-core kernel (w4m_gemv_kernel) only: tiles a block task, items a warp, items a row,
   * block tasks, staged chunks a row (padded), uint4 stride of a staged token row */
  int m_tiles, m_ipp, m_nitem, m_nbt, m_ncp, m_tstride;
  int m_pair;   /* (scale, zero) of a warp item's 2 groups by one 32-bit and one 16-bit load a row */
};

/* RoPE'd store of rows (row, row + 1) of token t at position p, @freq = a.inv_freq[(row % hd) / 2] */
static __device__ __forceinline__ void
w4_rope_store_at (const W4Args &a, int row, int t, int p, float freq, float v0, float v1)
{
  const int hd = a.hd;
  const int head = row / hd, d = row - head * hd;
  if (head < a.nq + a.nkv)
    {
      float sn, cs;
      sincosf ((float) p * freq, &sn, &cs);
      const float r0 = v0 * cs - v1 * sn, r1 = v0 * sn + v1 * cs;
      if (head < a.nq)
        {
          const float qs = rsqrtf ((float) hd);
          float *qo = a.y + (size_t) t * a.rows + row;
          qo[0] = r0 * qs;
          qo[1] = r1 * qs;
          return;
        }
      v0 = r0;
      v1 = r1;
    }
  const bool is_k = head < a.nq + a.nkv;
  const int kvh = head - a.nq - (is_k ? 0 : a.nkv);
  const int page = a.block_table[p / HONE_K_KV_BLOCK], slot = p % HONE_K_KV_BLOCK;
  __half *dst = (is_k ? a.k_pool : a.v_pool) + (((size_t) page * a.nkv + kvh) * HONE_K_KV_BLOCK + slot) * hd + d;
  *(__half2 *) dst = __floats2half2_rn (v0, v1);
}

static __device__ __forceinline__ void
w4_rope_store (const W4Args &a, int row, int t, float v0, float v1)
{
  w4_rope_store_at (a, row, t, *a.pos + t, a.inv_freq[(row % a.hd) >> 1], v0, v1);
}

/* Bias and epilogue of one row pair (row0, row0 + 1) of token tt: the last
 * step of both GEMV variants. */
static __device__ __forceinline__ void
w4_store_pair (const W4Args &a, int row0, int tt, float v0, float v1)
{
  if (a.bias)
    {
      v0 += a.bias[row0];
      if (row0 + 1 < a.rows)
        v1 += a.bias[row0 + 1];
    }
  if (a.epi == HONE_K_EPI_SWIGLU)
    a.y[(size_t) tt * (a.rows >> 1) + (row0 >> 1)] = silu (v0) * v1;
  else if (a.epi == HONE_K_EPI_ROPE_KV)
    w4_rope_store (a, row0, tt, v0, v1);
  else
    {
      const size_t i = (size_t) tt * a.rows + row0;
      if (a.epi == HONE_K_EPI_ADD)
        {
          v0 += a.res[i];
          if (row0 + 1 < a.rows)
            v1 += a.res[i + 1];
        }
      a.y[i] = v0;
      if (row0 + 1 < a.rows)
        a.y[i + 1] = v1;
    }
}

/* Activation staging of the first kernel and variant 2, pass 1: each warp's
 * Σx² and max|x·g| of token t's row into part_ss/part_mx[warp][t]. */
template <int MAXT, bool NORM>
static __device__ __forceinline__ void
w4_act_stats (const W4Args &a, int n8, float (*part_ss)[MAXT], float (*part_mx)[MAXT], int wib, int lane)
{
  for (int t = 0; t < MAXT && t < a.n_tok; t++)
    {
      const float4 *xp = (const float4 *) (a.x + (size_t) (a.tok0 + t) * a.cols);
      float ss = 0.f, mx = 0.f;
      for (int i = threadIdx.x; i < n8; i += 256)
        {
          float4 v0 = xp[2 * i], v1 = xp[2 * i + 1];
          ss += v0.x * v0.x + v0.y * v0.y + v0.z * v0.z + v0.w * v0.w + v1.x * v1.x + v1.y * v1.y + v1.z * v1.z
                + v1.w * v1.w;
          if (NORM)
            {
              const float4 g0 = ((const float4 *) a.norm_g)[2 * i], g1 = ((const float4 *) a.norm_g)[2 * i + 1];
              v0.x *= g0.x; v0.y *= g0.y; v0.z *= g0.z; v0.w *= g0.w;
              v1.x *= g1.x; v1.y *= g1.y; v1.z *= g1.z; v1.w *= g1.w;
            }
          mx = fmaxf (mx, fmaxf (fmaxf (fmaxf (fabsf (v0.x), fabsf (v0.y)), fmaxf (fabsf (v0.z), fabsf (v0.w))),
                                 fmaxf (fmaxf (fabsf (v1.x), fabsf (v1.y)), fmaxf (fabsf (v1.z), fabsf (v1.w)))));
        }
      ss = warp_sum (ss);
      mx = warp_max (mx);
      if (lane == 0)
        {
          part_ss[wib][t] = ss;
          part_mx[wib][t] = mx;
        }
    }
}

/* Pass 2: the 8 values i·8… of row xp as f16 x·g·sc, packed. */
template <bool NORM>
static __device__ __forceinline__ uint4
w4_pack8 (const W4Args &a, const float4 *xp, int i, float sc)
{
  const float4 v0 = xp[2 * i], v1 = xp[2 * i + 1];
  float4 g0 = make_float4 (sc, sc, sc, sc), g1 = g0;
  if (NORM)
    {
      g0 = ((const float4 *) a.norm_g)[2 * i];
      g1 = ((const float4 *) a.norm_g)[2 * i + 1];
      g0.x *= sc; g0.y *= sc; g0.z *= sc; g0.w *= sc;
      g1.x *= sc; g1.y *= sc; g1.z *= sc; g1.w *= sc;
    }
  uint4 pk;
  pk.x = h2_bits (__floats2half2_rn (v0.x * g0.x, v0.y * g0.y));
  pk.y = h2_bits (__floats2half2_rn (v0.z * g0.z, v0.w * g0.w));
  pk.z = h2_bits (__floats2half2_rn (v1.x * g1.x, v1.y * g1.y));
  pk.w = h2_bits (__floats2half2_rn (v1.z * g1.z, v1.w * g1.w));
  return pk;
}

template <int MAXT, bool NORM, int U>
__global__ void __launch_bounds__ (256, 2)
w4_gemv_kernel (W4Args a)
{
  extern __shared__ uint4 xs[];          /* f16 activations [n_tok][nchunk][4 swizzled 16-byte pieces] */
  __shared__ float part_ss[8][MAXT], part_mx[8][MAXT];
  __shared__ float alpha[MAXT], xscale[MAXT];
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
  const int nw = gridDim.x * 8;
  int task = blockIdx.x * 8 + wib, rnd = 0;

  int4 wa[U][W4_R], wb[U][W4_R];
  uint32_t sa[U][W4_R], sb[U][W4_R];   /* f16 scale bits | zero << 16 */

  auto load = [&] (int4 (&w)[U][W4_R], uint32_t (&sc)[U][W4_R], int tk, int rd) {
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
      for (int r = 0; r < W4_R; r++)
        {
          const int c = lane + 32 * (rd * U + u);
          const int row = tk * W4_R + r;
          if (tk < a.ntask && c < a.nchunk && row < a.rows)
            {
              w[u][r] = ld_stream (a.q + (size_t) row * a.nchunk + c);
              const size_t gi = (size_t) row * a.ng + (c >> a.cshift);
              sc[u][r] = (uint32_t) __ldg (a.s + gi) | ((uint32_t) __ldg (a.z + gi) << 16);
            }
          else
            {
              w[u][r] = make_int4 (0, 0, 0, 0);
              sc[u][r] = 0;
            }
        }
  };
  auto advance = [&] (int &tk, int &rd) {
    if (++rd == a.nround)
      {
        rd = 0;
        tk += nw;
      }
  };

  /* the weight stream starts before the previous kernel's results are needed */
  load (wa, sa, task, rnd);
  int tn = task, rn = rnd;
  advance (tn, rn);
  load (wb, sb, tn, rn);
  pdl_wait ();

  /* Stage the activation rows: Σx² and max|x·g| per token, then f16 x·g·(8/max). */
  const int n8 = a.cols >> 3;
  w4_act_stats<MAXT, NORM> (a, n8, part_ss, part_mx, wib, lane);
  __syncthreads ();
  if ((int) threadIdx.x < MAXT && (int) threadIdx.x < a.n_tok)
    {
      const int t = threadIdx.x;
      float ss = 0.f, mx = 0.f;
      for (int i = 0; i < 8; i++)
        {
          ss += part_ss[i][t];
          mx = fmaxf (mx, part_mx[i][t]);
        }
      const float ns = NORM ? rsqrtf (ss / (float) a.cols + a.eps) : 1.f;
      xscale[t] = mx > 0.f ? 8.f / mx : 0.f;
      alpha[t] = mx * 0.125f * ns;
    }
  __syncthreads ();
  for (int t = 0; t < MAXT && t < a.n_tok; t++)
    {
      const float4 *xp = (const float4 *) (a.x + (size_t) (a.tok0 + t) * a.cols);
      const float sc = xscale[t];
      for (int i = threadIdx.x; i < n8; i += 256)
        {
          const uint4 pk = w4_pack8<NORM> (a, xp, i, sc);
          const int c = i >> 2, p = i & 3;
          xs[((size_t) t * a.nchunk + c) * 4 + (p ^ ((c >> 1) & 3))] = pk;
        }
    }
  __syncthreads ();

  float acc[W4_R][MAXT];
#pragma unroll
  for (int r = 0; r < W4_R; r++)
#pragma unroll
    for (int t = 0; t < MAXT; t++)
      acc[r][t] = 0.f;

  /* Two batches in flight a warp: each buffer is computed, then reloaded
   * with the step two ahead, while the other buffer's loads land. */
  auto step = [&] (int4 (&w)[U][W4_R], uint32_t (&sc)[U][W4_R], int &tk, int &rd) -> bool {
    if (tk >= a.ntask)
      return false;
#pragma unroll
      for (int u = 0; u < U; u++)
        {
          const int c = lane + 32 * (rd * U + u);
          if (c >= a.nchunk)
            break;
          const int swz = (c >> 1) & 3;
          __half2 wq[W4_R][16];
          float sf[W4_R];
#pragma unroll
          for (int r = 0; r < W4_R; r++)
            {
              __half2 zc0, nzc1;
              w4_zero ((sc[u][r] >> 16) & 0xffu, zc0, nzc1);
              sf[r] = f16_bits_to_f32 ((uint16_t) (sc[u][r] & 0xffffu));
              const uint32_t ww[4] = { (uint32_t) w[u][r].x, (uint32_t) w[u][r].y, (uint32_t) w[u][r].z,
                                       (uint32_t) w[u][r].w };
#pragma unroll
              for (int i = 0; i < 4; i++)
                {
                  __half2 o[4];
                  w4_word (ww[i], zc0, nzc1, o);
#pragma unroll
                  for (int j = 0; j < 4; j++)
                    wq[r][4 * i + j] = o[j];
                }
            }
#pragma unroll
          for (int t = 0; t < MAXT; t++)
            {
              if (t >= a.n_tok)
                break;
              const uint4 *xc = xs + ((size_t) t * a.nchunk + c) * 4;
              uint4 xv[4];
#pragma unroll
              for (int p = 0; p < 4; p++)
                xv[p] = xc[p ^ swz];
#pragma unroll
              for (int r = 0; r < W4_R; r++)
                {
                  __half2 h0 = __float2half2_rn (0.f), h1 = h0;
#pragma unroll
                  for (int p = 0; p < 4; p += 2)
                    {
                      h0 = __hfma2 (wq[r][4 * p + 0], as_h2 (xv[p].x), h0);
                      h0 = __hfma2 (wq[r][4 * p + 1], as_h2 (xv[p].y), h0);
                      h0 = __hfma2 (wq[r][4 * p + 2], as_h2 (xv[p].z), h0);
                      h0 = __hfma2 (wq[r][4 * p + 3], as_h2 (xv[p].w), h0);
                      h1 = __hfma2 (wq[r][4 * p + 4], as_h2 (xv[p + 1].x), h1);
                      h1 = __hfma2 (wq[r][4 * p + 5], as_h2 (xv[p + 1].y), h1);
                      h1 = __hfma2 (wq[r][4 * p + 6], as_h2 (xv[p + 1].z), h1);
                      h1 = __hfma2 (wq[r][4 * p + 7], as_h2 (xv[p + 1].w), h1);
                    }
                  const float2 f0 = __half22float2 (h0), f1 = __half22float2 (h1);
                  acc[r][t] = fmaf (sf[r], (f0.x + f0.y) + (f1.x + f1.y), acc[r][t]);
                }
            }
        }

      if (rd == a.nround - 1)
        {
          /* the warp's row pair is complete: reduce over lanes, epilogue */
          const int row0 = tk * W4_R;
#pragma unroll
          for (int r = 0; r < W4_R; r++)
#pragma unroll
            for (int t = 0; t < MAXT; t++)
              acc[r][t] = warp_sum (acc[r][t]);
#pragma unroll
          for (int t = 0; t < MAXT; t++)
            {
              if (t < a.n_tok && lane == t)
                w4_store_pair (a, row0, a.tok0 + t, acc[0][t] * alpha[t], acc[1][t] * alpha[t]);
            }
#pragma unroll
          for (int r = 0; r < W4_R; r++)
#pragma unroll
            for (int t = 0; t < MAXT; t++)
              acc[r][t] = 0.f;
        }

    advance (tk, rd);
    advance (tk, rd);
    load (w, sc, tk, rd);
    return true;
  };
  int ta = task, ra = rnd;
  while (step (wa, sa, ta, ra) && step (wb, sb, tn, rn))
    ;
  pdl_trigger ();
  prefetch_slice (a.pf, blockIdx.x * 8 + wib, gridDim.x * 8, lane);
}

/* ---- decode GEMV, variant 2: the same layout and arithmetic, issue-lean ------------
 * The first kernel spends ≈ 6 instructions a weight where its arithmetic needs
 * ≈ 2 (RESULTS-cuda.md, "AWQ W4A16"): per load a 64-bit address, bound
 * predicates and a branch, and two byte loads (scale, zero) per chunk. Here:
 *  - no predicates: a chunk offset past the row clamps to the row's last chunk
 *    and a row past the matrix to its last row (valid memory, results unused or
 *    multiplied by the zero padding of the staged activation, whose rows are
 *    padded to whole warp items of W4V2_SPAN chunks);
 *  - a warp item is 2 chunks a lane (64 chunks) of each of its 2 rows; the
 *    (scale, zero) pairs of the item's groups are loaded once, one group a lane
 *    (two at g32), packed into one word when the item is computed (not when
 *    loaded: the first kernel joined them right after the loads, which made
 *    every warp wait for its loads there), and each chunk takes its word by one
 *    shuffle from the lane that loaded it and two byte permutes;
 *  - the staged activation is stored by 32 chunks, each 16-byte piece p of
 *    the 32 together, so a warp's reads are consecutive 16-byte words, free of
 *    bank conflicts without a swizzle, at constant offsets from a lane's base;
 *  - one f16 add joins a chunk's two partial sums (16 products each) before
 *    the f32 scale: 5 instructions a chunk-row instead of 8;
 *  - the staging needs two barriers, not three: every thread sums the 8 warps'
 *    partial Σx² and max itself instead of waiting for one thread to.
 * Same results as the first kernel up to f16 rounding order (the checks run both). */
#define W4V2_SPAN 64   /* chunks a warp item covers in each row: 32 lanes × 2 */

template <int MAXT, bool NORM>
__global__ void __launch_bounds__ (256, 2)
w4v2_gemv_kernel (W4Args a)
{
  extern __shared__ uint4 xs[];          /* f16 activations [n_tok][ncp/32][4 pieces][32 chunks] */
  __shared__ float part_ss[8][MAXT], part_mx[8][MAXT];
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
  const int nw = gridDim.x * 8;
  const int ncp = a.nround * W4V2_SPAN;  /* chunks of a staged row, padded */
  const int cs = a.cshift;
  const int cmax = a.nchunk - 1 - lane;  /* a lane's chunk offsets clamp here */
  const int gmax = a.ng - 1 - lane;      /* and its group offsets here */
  int task = blockIdx.x * 8 + wib, rnd = 0;

  /* a warp's two item buffers; scale and zero stay apart until the item is
   * computed (joining them here would wait for the loads) */
  struct Buf {
    int4 w[2][W4_R];
    uint32_t s[2][W4_R], z[2][W4_R];   /* of groups g0 + lane and g0 + 32 + lane (g32 only) */
  } ba, bb;

  auto load = [&] (Buf &b, int tk, int rd) {
    /* 32-bit element indices (a matrix has < 2^31 chunks), one wide multiply-add an address */
    const int t = min (tk, a.ntask - 1);
    const int c0 = rd * W4V2_SPAN, g0 = c0 >> cs;
    const unsigned o0 = (unsigned) (lane + min (c0, cmax)), o1 = (unsigned) (lane + min (c0 + 32, cmax));
    const unsigned h0 = (unsigned) (lane + min (g0, gmax)), h1 = (unsigned) (lane + min (g0 + 32, gmax));
#pragma unroll
    for (int r = 0; r < W4_R; r++)
      {
        const unsigned row = (unsigned) min (t * W4_R + r, a.rows - 1);
        const unsigned qr = row * (unsigned) a.nchunk, gr = row * (unsigned) a.ng;
        b.w[0][r] = ld_stream (a.q + (qr + o0));
        b.w[1][r] = ld_stream (a.q + (qr + o1));
        b.s[0][r] = __ldg (a.s + (gr + h0));
        b.z[0][r] = __ldg (a.z + (gr + h0));
        if (cs == 0)   /* g32: the item spans 64 groups */
          {
            b.s[1][r] = __ldg (a.s + (gr + h1));
            b.z[1][r] = __ldg (a.z + (gr + h1));
          }
        else
          b.s[1][r] = b.z[1][r] = 0;
      }
  };
  auto advance = [&] (int &tk, int &rd) {
    if (++rd == a.nround)
      {
        rd = 0;
        tk += nw;
      }
  };

  load (ba, task, rnd);
  int tn = task, rn = rnd;
  advance (tn, rn);
  load (bb, tn, rn);
  pdl_wait ();

  /* Stage: Σx² and max|x·g| per token (pass 1), then f16 x·g·(8/max) (pass 2). */
  const int n8 = a.cols >> 3;
  w4_act_stats<MAXT, NORM> (a, n8, part_ss, part_mx, wib, lane);
  __syncthreads ();
  /* lane t keeps token t's output factor max/8 · rsqrt(mean x² + eps) */
  float alpha_l = 0.f;
  if (lane < MAXT && lane < a.n_tok)
    {
      float ss = 0.f, mx = 0.f;
#pragma unroll
      for (int i = 0; i < 8; i++)
        {
          ss += part_ss[i][lane];
          mx = fmaxf (mx, part_mx[i][lane]);
        }
      alpha_l = mx * 0.125f * (NORM ? rsqrtf (ss / (float) a.cols + a.eps) : 1.f);
    }
  const int npiece = ncp * 4;
  for (int t = 0; t < MAXT && t < a.n_tok; t++)
    {
      const float4 *xp = (const float4 *) (a.x + (size_t) (a.tok0 + t) * a.cols);
      float mx = 0.f;
#pragma unroll
      for (int i = 0; i < 8; i++)
        mx = fmaxf (mx, part_mx[i][t]);
      const float sc = mx > 0.f ? 8.f / mx : 0.f;
      uint4 *xt = xs + (size_t) t * npiece;
      for (int i = threadIdx.x; i < npiece; i += 256)
        {
          uint4 pk = make_uint4 (0, 0, 0, 0);   /* the padding past the row stays 0 */
          if (i < n8)
            {
              pk = w4_pack8<NORM> (a, xp, i, sc);
            }
          const int c = i >> 2;
          xt[(((c >> 5) * 4 + (i & 3)) << 5) + (c & 31)] = pk;
        }
    }
  __syncthreads ();

  float acc[W4_R][MAXT];
#pragma unroll
  for (int r = 0; r < W4_R; r++)
#pragma unroll
    for (int t = 0; t < MAXT; t++)
      acc[r][t] = 0.f;

  /* the lane each chunk's (scale, zero) word comes from, for the item's 2 chunks a lane */
  const int src0 = lane >> cs, src1 = (32 + lane) >> cs;   /* g32: 32 + lane wraps to the lane itself */
  const uint4 *xl = xs + lane;

  auto step = [&] (Buf &b, int &tk, int &rd) -> bool {
    if (tk >= a.ntask)
      return false;
    const uint4 *xi = xl + rd * (W4V2_SPAN * 4);
    /* (scale, zero) words: f16 scale bits, z in byte 2, z << 4 in byte 3 — one
     * byte permute each then gives the zero-point constants of w4_zero */
    uint32_t sz[2][W4_R];
#pragma unroll
    for (int r = 0; r < W4_R; r++)
      {
        sz[0][r] = b.s[0][r] + b.z[0][r] * 0x10010000u;
        sz[1][r] = cs == 0 ? b.s[1][r] + b.z[1][r] * 0x10010000u : sz[0][r];
      }
#pragma unroll
    for (int u = 0; u < 2; u++)
      {
        __half2 wq[W4_R][16];
        float sf[W4_R];
#pragma unroll
        for (int r = 0; r < W4_R; r++)
          {
            const uint32_t sw = __shfl_sync (0xffffffffu, sz[u][r], u == 0 ? src0 : src1);
            const __half2 zc0 = as_h2 (__byte_perm (sw, 0xD464u, 0x4242));    /* (1024+z, 1024+z) */
            const __half2 nzc1 = as_h2 (__byte_perm (sw, 0xD464u, 0x5353));   /* −(64+z, 64+z) */
            sf[r] = f16_bits_to_f32 ((uint16_t) (sw & 0xffffu));
            const uint32_t ww[4] = { (uint32_t) b.w[u][r].x, (uint32_t) b.w[u][r].y, (uint32_t) b.w[u][r].z,
                                     (uint32_t) b.w[u][r].w };
#pragma unroll
            for (int i = 0; i < 4; i++)
              {
                __half2 o[4];
                w4_word (ww[i], zc0, nzc1, o);
#pragma unroll
                for (int j = 0; j < 4; j++)
                  wq[r][4 * i + j] = o[j];
              }
          }
#pragma unroll
        for (int t = 0; t < MAXT; t++)
          {
            if (t > MAXT / 2 && t >= a.n_tok)   /* MAXT 4 holds 3–4 tokens, 8 holds 5–8 */
              break;
            const uint4 *xc = xi + 128 * u + t * npiece;
            uint4 xv[4];
#pragma unroll
            for (int p = 0; p < 4; p++)
              xv[p] = xc[32 * p];
#pragma unroll
            for (int r = 0; r < W4_R; r++)
              {
                __half2 h0 = __float2half2_rn (0.f), h1 = h0;
#pragma unroll
                for (int p = 0; p < 4; p += 2)
                  {
                    h0 = __hfma2 (wq[r][4 * p + 0], as_h2 (xv[p].x), h0);
                    h0 = __hfma2 (wq[r][4 * p + 1], as_h2 (xv[p].y), h0);
                    h0 = __hfma2 (wq[r][4 * p + 2], as_h2 (xv[p].z), h0);
                    h0 = __hfma2 (wq[r][4 * p + 3], as_h2 (xv[p].w), h0);
                    h1 = __hfma2 (wq[r][4 * p + 4], as_h2 (xv[p + 1].x), h1);
                    h1 = __hfma2 (wq[r][4 * p + 5], as_h2 (xv[p + 1].y), h1);
                    h1 = __hfma2 (wq[r][4 * p + 6], as_h2 (xv[p + 1].z), h1);
                    h1 = __hfma2 (wq[r][4 * p + 7], as_h2 (xv[p + 1].w), h1);
                  }
                const __half2 h = __hadd2 (h0, h1);
                acc[r][t] = fmaf (sf[r], __low2float (h) + __high2float (h), acc[r][t]);
              }
          }
      }

    if (rd == a.nround - 1)
      {
        /* the warp's row pair is complete: reduce over lanes, epilogue (as the first kernel) */
        const int row0 = tk * W4_R;
#pragma unroll
        for (int r = 0; r < W4_R; r++)
#pragma unroll
          for (int t = 0; t < MAXT; t++)
            acc[r][t] = warp_sum (acc[r][t]);
#pragma unroll
        for (int t = 0; t < MAXT; t++)
          {
            if (t < a.n_tok && lane == t)
              w4_store_pair (a, row0, a.tok0 + t, acc[0][t] * alpha_l, acc[1][t] * alpha_l);
          }
#pragma unroll
        for (int r = 0; r < W4_R; r++)
#pragma unroll
          for (int t = 0; t < MAXT; t++)
            acc[r][t] = 0.f;
      }

    advance (tk, rd);
    advance (tk, rd);
    load (b, tk, rd);
    return true;
  };
  int ta = task, ra = rnd;
  while (step (ba, ta, ra) && step (bb, tn, rn))
    ;
  pdl_trigger ();
  prefetch_slice (a.pf, blockIdx.x * 8 + wib, gridDim.x * 8, lane);
}

/* ---- decode GEMV, staged (session 3): one wave, weights through shared memory ------
 * Variant 2 still pays ≈ 5–7 µs a launch above its bytes (RESULTS-cuda.md, "Session
 * 2b"): thousands of blocks each stage the activation after the PDL wait, the memory
 * pipe drains between kernels, and the last wave leaves a tail. This kernel, for one
 * token (the batch-1 decode that matters), is shaped for that instead:
 *  - the grid is ONE wave: one block of 256 threads per SM (or fewer when the matrix
 *    has fewer row pairs), each block owning a contiguous, balanced range of row
 *    pairs; its registers (≤ 128 a thread) and shared memory (≤ 100 KB) leave room
 *    for the next kernel's block on the same SM;
 *  - the block streams its rows through a ring of st_n shared-memory slots with the
 *    bulk-copy engine (hone-k-stage.cuh): a slot holds st_rows whole rows, i.e. one
 *    contiguous range of the nibbles plus the rows' scales and zero points (3 bulk
 *    copies, one mbarrier a slot). Thread 0 fills the whole ring at entry, BEFORE the
 *    PDL wait — the weights do not depend on the previous kernel — and the kernel
 *    triggers its own dependents at entry, so the next GEMV's block (co-resident) can
 *    do the same while this one drains: the memory never idles between launches;
 *  - after the wait, each block (≈ 132, not thousands) stages the activation once:
 *    RMSNorm fused, f16, scaled by 8/max as variant 2 (same numerics), laid out as
 *    variant 2's (32 chunks × 4 pieces) so the reads are free of bank conflicts;
 *  - compute from shared memory: a slot's rows are taken in pairs by 256/(st_rows/2)
 *    threads each (one to eight warps a pair), each thread a pair's chunks c, c +
 *    TPP, …; per 32-bit word of 8 weights 1 shift, 4 LOP3 (→ f16 1024+q), 4 HSUB2/HFMA2
 *    with the group's precomputed (1024+z) constants (→ exact q − z) and 4 HFMA2
 *    against the f16 activation; the f32 scale once per chunk; a pair's partials are
 *    reduced per slot (one shuffle tree for both rows) and its epilogue (STORE, ADD
 *    in place, SWIGLU, ROPE_KV, bias) runs as soon as the slot is done, by lanes that
 *    fetched its residual/bias/frequency before the slot's compute (a global load
 *    there holds up the next slot's barrier by a memory round trip: the first
 *    version did that, and `down`, 16 slots a block, was its slowest GEMV).
 * Two and more tokens keep variant 2 (its HFMA2 dot per token re-reads the weights
 * from registers; the staged slots would only add a shared-memory pass).
 * Measured (RESULTS-cuda.md, "AWQ W4A16, session 3 (staged)"): exact to the same
 * bounds as variant 2, memcheck/racecheck clean; the fixed cost a launch drops from
 * 4.7 to 3.8 µs and `o` gains 1.27x, but the big matrices stream at only 2.3–2.9 TB/s
 * (variant 2: 2.9–3.4): the shared-memory loop issues 2.27 SASS instructions a weight
 * (cuobjdump: 291 per 128 weights a thread) at ~1.5 IPC, load latency unhidden (the
 * loads of a chunk are consumed right away; variant 2 keeps a batch in registers one
 * step ahead), and with 256 threads the next kernel's co-resident block makes the
 * whole step slower (its ring fill queues before this kernel's refills, presumably
 * on the SM's one bulk-copy unit). Not the default: hone_k_q4z_set_config 3 / 5. */
#define W4S_MAXST 8                   /* ring slots at most */
/* Two shapes (hone_k_q4z_set_config): 256 threads, ≤ 100 KB of shared memory and
 * 16 KB slots, so that the next kernel's block fits beside this one (config 3); or
 * 512 threads, ≤ 200 KB and 32 KB slots, the SM to itself (config 5: twice the warps
 * to hide the latency of the shared-memory reads and the HFMA2 chains, deeper ring). */
#define W4S_SMEM_MAX(nt) ((nt) == 512 ? 200 * 1024 : 100 * 1024)
#define W4S_STAGE_TARGET(nt) ((nt) == 512 ? 32 * 1024 : 16 * 1024)
#define W4S_XR 4                      /* activation loads a thread keeps in registers */

/* Sum of @v0 over the warp into lane 0 and of @v1 into lane 16 (5 shuffles, not 10). */
static __device__ __forceinline__ float
w4s_pair_sum (float v0, float v1, int lane)
{
  const bool hi = lane & 16;
  float v = hi ? v1 : v0;
  v += __shfl_xor_sync (0xffffffffu, hi ? v0 : v1, 16);
#pragma unroll
  for (int o = 8; o > 0; o >>= 1)
    v += __shfl_xor_sync (0xffffffffu, v, o);
  return v;
}

/* w4_zero's constants by one multiply-add each (z ≤ 15: no carries between the halves) */
static __device__ __forceinline__ void
w4s_zero (uint32_t z, __half2 &zc0, __half2 &nzc1)
{
  zc0 = as_h2 (z * 0x00010001u + 0x64006400u);
  nzc1 = as_h2 (z * 0x00100010u + 0xD400D400u);
}

template <bool NORM, int PS, int W4S_NT>
__global__ void __launch_bounds__ (W4S_NT, 512 / W4S_NT)
w4s_gemv_kernel (W4Args a)
{
  constexpr int TPP = W4S_NT / PS;      /* threads a row pair of a slot */
  constexpr int WPP = TPP / 32;         /* warps a row pair */
  extern __shared__ __align__ (128) uint8_t w4s_smem[];   /* [activation][ring slots] */
  __shared__ uint64_t bar[W4S_MAXST];
  __shared__ float2 red[2][W4S_NT / 32];
  __shared__ float part_ss[W4S_NT / 32], part_mx[W4S_NT / 32];
  const int tid = threadIdx.x, lane = tid & 31, wib = tid >> 5;

  /* the next kernel may become resident and start its own weight copies now
   * (st_trig_end: only once this one is done, as variant 2 does) */
  if (!a.st_trig_end)
    pdl_trigger ();

  const int npair = (a.rows + 1) >> 1;
  const int p0 = (int) ((long long) blockIdx.x * npair / gridDim.x);
  const int p1 = (int) ((long long) (blockIdx.x + 1) * npair / gridDim.x);
  const int r0 = 2 * p0, r1 = min (2 * p1, a.rows);
  const int rs = a.st_rows, S = a.st_n;
  const int nstage = (r1 - r0 + rs - 1) / rs;
  const unsigned rowq = (unsigned) a.cols >> 1;                      /* nibble bytes a row */
  const size_t zbase = (size_t) a.rows * a.ng * 2;                  /* zeros, from a.s */
  uint8_t *const ring = w4s_smem + a.st_xbytes;

  /* Slot k % S ← rows [r0 + k·rs, +nr): the nibbles (16-byte multiples, aligned), then
   * the scales and zeros rounded out to 16-byte bounds (the buffer is readable up to
   * the next 16-byte bound: hone-kernels.h); the compute side finds the rows at the
   * same rounding offsets. */
  auto issue = [&] (int k, uint64_t pol) {
    const int rb = r0 + k * rs, nr = min (rs, r1 - rb);
    uint8_t *dst = ring + (size_t) (k % S) * a.st_bytes;
    uint64_t *b = &bar[k % S];
    const uint32_t qn = (uint32_t) nr * rowq;
    const size_t sa = (size_t) rb * a.ng * 2, se = sa + (size_t) nr * a.ng * 2;
    const size_t za = zbase + (size_t) rb * a.ng, ze = za + (size_t) nr * a.ng;
    const size_t s0 = sa & ~(size_t) 15, s1 = (se + 15) & ~(size_t) 15;
    const size_t z0 = za & ~(size_t) 15, z1 = (ze + 15) & ~(size_t) 15;
    stage_bar_expect (b, qn + (uint32_t) (s1 - s0) + (uint32_t) (z1 - z0));
    stage_copy (dst, (const uint8_t *) a.q + (size_t) rb * rowq, qn, b, pol);
    stage_copy (dst + a.st_soff, (const uint8_t *) a.s + s0, (uint32_t) (s1 - s0), b, pol);
    stage_copy (dst + a.st_zoff, (const uint8_t *) a.s + z0, (uint32_t) (z1 - z0), b, pol);
  };
  if (tid == 0)
    {
      for (int i = 0; i < S; i++)
        stage_bar_init (&bar[i]);
      stage_bar_fence_init ();
      const uint64_t pol = stage_policy_evict_first ();
      for (int k = 0; k < S && k < nstage; k++)
        issue (k, pol);
    }

  /* the norm weights do not depend on the previous kernel either */
  const int n8 = a.cols >> 3;
  const float4 *xp = (const float4 *) a.x;
  float4 gc[W4S_XR][2];
#pragma unroll
  for (int j = 0; j < W4S_XR; j++)
    {
      const int i = tid + j * W4S_NT;
      if (NORM && i < n8)
        {
          gc[j][0] = __ldg ((const float4 *) a.norm_g + 2 * i);
          gc[j][1] = __ldg ((const float4 *) a.norm_g + 2 * i + 1);
        }
      else
        gc[j][0] = gc[j][1] = make_float4 (1.f, 1.f, 1.f, 1.f);
    }
  pdl_wait ();
  const int pos = a.epi == HONE_K_EPI_ROPE_KV ? *a.pos : 0;

  /* Stage the activation: Σx² and max|x·g| (pass 1, the first W4S_XR loads kept in
   * registers), then f16 x·g·(8/max) in variant 2's layout (pass 2), padded with 0. */
  float ss = 0.f, mx = 0.f;
  float4 xc[W4S_XR][2];
  auto scan = [&] (float4 &v0, float4 &v1, const float4 &g0, const float4 &g1) {
    ss += v0.x * v0.x + v0.y * v0.y + v0.z * v0.z + v0.w * v0.w + v1.x * v1.x + v1.y * v1.y + v1.z * v1.z
          + v1.w * v1.w;
    if (NORM)
      {
        v0.x *= g0.x; v0.y *= g0.y; v0.z *= g0.z; v0.w *= g0.w;
        v1.x *= g1.x; v1.y *= g1.y; v1.z *= g1.z; v1.w *= g1.w;
      }
    mx = fmaxf (mx, fmaxf (fmaxf (fmaxf (fabsf (v0.x), fabsf (v0.y)), fmaxf (fabsf (v0.z), fabsf (v0.w))),
                           fmaxf (fmaxf (fabsf (v1.x), fabsf (v1.y)), fmaxf (fabsf (v1.z), fabsf (v1.w)))));
  };
#pragma unroll
  for (int j = 0; j < W4S_XR; j++)
    {
      const int i = tid + j * W4S_NT;
      if (i < n8)
        {
          xc[j][0] = xp[2 * i];
          xc[j][1] = xp[2 * i + 1];
        }
    }
#pragma unroll
  for (int j = 0; j < W4S_XR; j++)
    if (tid + j * W4S_NT < n8)
      scan (xc[j][0], xc[j][1], gc[j][0], gc[j][1]);   /* xc now holds x·g */
  for (int i = tid + W4S_XR * W4S_NT; i < n8; i += W4S_NT)
    {
      float4 v0 = xp[2 * i], v1 = xp[2 * i + 1];
      float4 g0 = make_float4 (1.f, 1.f, 1.f, 1.f), g1 = g0;
      if (NORM)
        {
          g0 = __ldg ((const float4 *) a.norm_g + 2 * i);
          g1 = __ldg ((const float4 *) a.norm_g + 2 * i + 1);
        }
      scan (v0, v1, g0, g1);
    }
  ss = warp_sum (ss);
  mx = warp_max (mx);
  if (lane == 0)
    {
      part_ss[wib] = ss;
      part_mx[wib] = mx;
    }
  __syncthreads ();
  ss = 0.f;
  mx = 0.f;
#pragma unroll
  for (int i = 0; i < W4S_NT / 32; i++)
    {
      ss += part_ss[i];
      mx = fmaxf (mx, part_mx[i]);
    }
  const float alpha = mx * 0.125f * (NORM ? rsqrtf (ss / (float) a.cols + a.eps) : 1.f);
  const float sc = mx > 0.f ? 8.f / mx : 0.f;
  uint4 *const xs = (uint4 *) w4s_smem;   /* [chunks/32][4 pieces][32 chunks] */
  auto put = [&] (int i, float4 v0, float4 v1) {
    uint4 pk;
    pk.x = h2_bits (__floats2half2_rn (v0.x * sc, v0.y * sc));
    pk.y = h2_bits (__floats2half2_rn (v0.z * sc, v0.w * sc));
    pk.z = h2_bits (__floats2half2_rn (v1.x * sc, v1.y * sc));
    pk.w = h2_bits (__floats2half2_rn (v1.z * sc, v1.w * sc));
    const int c = i >> 2;
    xs[(((c >> 5) * 4 + (i & 3)) << 5) + (c & 31)] = pk;
  };
  const int npiece = a.st_xbytes >> 4;   /* 8-element pieces of the padded row */
  auto zero = [&] (int i) {
    const int c = i >> 2;
    xs[(((c >> 5) * 4 + (i & 3)) << 5) + (c & 31)] = make_uint4 (0, 0, 0, 0);
  };
#pragma unroll
  for (int j = 0; j < W4S_XR; j++)
    {
      const int i = tid + j * W4S_NT;
      if (i < n8)
        put (i, xc[j][0], xc[j][1]);
      else if (i < npiece)
        zero (i);
    }
  for (int i = tid + W4S_XR * W4S_NT; i < npiece; i += W4S_NT)
    if (i < n8)
      {
        float4 v0 = xp[2 * i], v1 = xp[2 * i + 1];
        if (NORM)
          {
            const float4 g0 = __ldg ((const float4 *) a.norm_g + 2 * i);
            const float4 g1 = __ldg ((const float4 *) a.norm_g + 2 * i + 1);
            v0.x *= g0.x; v0.y *= g0.y; v0.z *= g0.z; v0.w *= g0.w;
            v1.x *= g1.x; v1.y *= g1.y; v1.z *= g1.z; v1.w *= g1.w;
          }
        put (i, v0, v1);
      }
    else
      zero (i);
  __syncthreads ();

  /* Stream the slots. */
  const int pi = wib / WPP, sub = tid % TPP;
  const int lr0 = 2 * pi;
  const int cs = a.cshift, ng = a.ng, nchunk = a.nchunk;
  for (int k = 0; k < nstage; k++)
    {
      const int slot = k % S;
      const int rb = r0 + k * rs, nr = min (rs, r1 - rb);
      const uint8_t *st = ring + (size_t) slot * a.st_bytes;
      /* The epilogue lanes (last warp, one a row pair) fetch what the epilogue adds now,
       * so that no global load latency sits between this slot's barrier and the next. */
      const bool epi_lane = wib == W4S_NT / 32 - 1 && lane < PS && 2 * lane < nr;
      const int erow = rb + 2 * lane;
      float e0 = 0.f, e1 = 0.f, freq = 0.f;
      if (epi_lane)
        {
          const bool two = erow + 1 < a.rows;
          if (a.bias)
            {
              e0 = a.bias[erow];
              e1 = two ? a.bias[erow + 1] : 0.f;
            }
          if (a.epi == HONE_K_EPI_ADD)
            {
              e0 += a.res[erow];
              e1 += two ? a.res[erow + 1] : 0.f;
            }
          if (a.epi == HONE_K_EPI_ROPE_KV)
            freq = a.inv_freq[(erow % a.hd) >> 1];
        }
      stage_bar_wait (&bar[slot], (uint32_t) (k / S) & 1u);
      float acc0 = 0.f, acc1 = 0.f;
      if (lr0 < nr)   /* uniform in a warp */
        {
          const int lr1 = min (lr0 + 1, nr - 1);   /* a lone last row computes twice, stores once */
          const uint4 *w0p = (const uint4 *) st + lr0 * nchunk, *w1p = (const uint4 *) st + lr1 * nchunk;
          const int shead = (int) (((size_t) rb * ng * 2) & 15), zhead = (int) ((zbase + (size_t) rb * ng) & 15);
          const uint16_t *s0p = (const uint16_t *) (st + a.st_soff + shead) + lr0 * ng;
          const uint16_t *s1p = (const uint16_t *) (st + a.st_soff + shead) + lr1 * ng;
          const uint8_t *z0p = st + a.st_zoff + zhead + lr0 * ng, *z1p = st + a.st_zoff + zhead + lr1 * ng;
#pragma unroll 2
          for (int c = sub; c < nchunk; c += TPP)
            {
              const uint4 w0 = w0p[c], w1 = w1p[c];
              const int g = c >> cs;
              __half2 zc0[2], nzc1[2];
              w4s_zero (z0p[g], zc0[0], nzc1[0]);
              w4s_zero (z1p[g], zc0[1], nzc1[1]);
              const float sf0 = f16_bits_to_f32 (s0p[g]), sf1 = f16_bits_to_f32 (s1p[g]);
              const uint4 *xq = xs + ((c >> 5) << 7) + (c & 31);
              const uint32_t wv[2][4] = { { w0.x, w0.y, w0.z, w0.w }, { w1.x, w1.y, w1.z, w1.w } };
              __half2 h[2][2];
              h[0][0] = h[0][1] = h[1][0] = h[1][1] = __float2half2_rn (0.f);
#pragma unroll
              for (int p = 0; p < 4; p++)
                {
                  const uint4 xv = xq[32 * p];   /* elements 8p..8p+7 of the chunk = word p's weights */
#pragma unroll
                  for (int r = 0; r < 2; r++)
                    {
                      __half2 o[4];
                      w4_word (wv[r][p], zc0[r], nzc1[r], o);
                      h[r][p & 1] = __hfma2 (o[0], as_h2 (xv.x), h[r][p & 1]);
                      h[r][p & 1] = __hfma2 (o[1], as_h2 (xv.y), h[r][p & 1]);
                      h[r][p & 1] = __hfma2 (o[2], as_h2 (xv.z), h[r][p & 1]);
                      h[r][p & 1] = __hfma2 (o[3], as_h2 (xv.w), h[r][p & 1]);
                    }
                }
              const __half2 t0 = __hadd2 (h[0][0], h[0][1]), t1 = __hadd2 (h[1][0], h[1][1]);
              acc0 = fmaf (sf0, __low2float (t0) + __high2float (t0), acc0);
              acc1 = fmaf (sf1, __low2float (t1) + __high2float (t1), acc1);
            }
        }
      const float v = w4s_pair_sum (acc0, acc1, lane);
      if (lane == 0)
        red[k & 1][wib].x = v;
      if (lane == 16)
        red[k & 1][wib].y = v;
      __syncthreads ();   /* every read of the slot and every partial are done */
      if (tid == 0 && k + S < nstage)
        issue (k + S, stage_policy_evict_first ());
      if (epi_lane)
        {
          float v0 = 0.f, v1 = 0.f;
#pragma unroll
          for (int j = 0; j < WPP; j++)
            {
              v0 += red[k & 1][lane * WPP + j].x;
              v1 += red[k & 1][lane * WPP + j].y;
            }
          v0 = v0 * alpha + e0;   /* w4_store_pair's bias and residual, fetched above */
          v1 = v1 * alpha + e1;
          if (a.epi == HONE_K_EPI_SWIGLU)
            a.y[erow >> 1] = silu (v0) * v1;
          else if (a.epi == HONE_K_EPI_ROPE_KV)
            w4_rope_store_at (a, erow, 0, pos, freq, v0, v1);
          else
            {
              a.y[erow] = v0;
              if (erow + 1 < a.rows)
                a.y[erow + 1] = v1;
            }
        }
    }
  if (a.st_trig_end)
    pdl_trigger ();
  prefetch_slice (a.pf, blockIdx.x * (W4S_NT / 32) + wib, gridDim.x * (W4S_NT / 32), lane);
}

/* ---- decode GEMV, tensor cores (session 4): mma.sync m16n8k16 -----------------------
 * Variant 2 spends 2.76 SASS instructions a weight and runs ~2.1 IPC: the dequant
 * arithmetic (shift, LOP3, HSUB2/HFMA2, then an HFMA2 dot per token) binds, not the
 * memory (RESULTS-cuda.md, "AWQ W4A16"). Here the dot product goes to the tensor
 * cores: a warp computes a 16-row tile with mma.sync.m16n8k16 (f16 in, f32
 * accumulate), the weights as the 16×16 A operand, the activation as B (16 k × 8
 * tokens; columns past n_tok repeat the last token and are dropped), so 1..8 tokens
 * cost the same MMA. Today's GPU layout is used as it is, no repack:
 *  - a lane (group g = lane / 4, t = lane % 4) loads chunk 4s + t of rows g and
 *    g + 8 of its tile (16 bytes each) for step s; one 32-bit word i of a chunk gives,
 *    by one SHF and 4 LOP3 per row, exactly its A registers of two k16 steps:
 *    (1024 + q) pairs of adjacent weights (8i+4h, +1) for a0/a1 and (1024 + 16q)
 *    pairs (8i+4h+2, +3) for a2/a3 (h = 0, 1). The k order inside an MMA is the
 *    weights' own order within each lane's chunk, and B follows it: the staged
 *    activation keeps the chunk's natural order with every second pair divided by
 *    16 (exact), so a2·b1 = (1024 + 16q)·x/16 = 64x + q·x;
 *  - the four t lanes of a step cover 4 consecutive chunks = one g128 group, so the
 *    C fragment of a step's 8 MMAs is one group's sum for rows g, g + 8. The offset
 *    and the zero point come off in f32, once a group and row (mode CORR):
 *    Σ(q − z)·x = C − (1024·ΣL x + 64·ΣH x' + z·Σx), whose per-group activation sums
 *    are made while staging, from the very f16 values the MMA reads; then × scale.
 *    That leaves ≈ 5 instructions per 8 weights of dequant (SHF + 4 LOP3) + 1 MMA.
 *    Mode SUB (config 9) subtracts the zero point exactly in f16 first (HSUB2,
 *    (q − z) and 16(q − z)) and scales C in f32: no large offsets in the MMA's f32
 *    sums, 4 HSUB2 more per 8 weights. Groups of 32/64 mix groups inside one MMA,
 *    so they (and config 10) use mode SCALED: A = (q − z)·s by HSUB2 + HMUL2 (one
 *    f16 rounding a weight), C accumulating the whole row;
 *  - a block task is M tiles of 16 rows whose k range is split over its 8 warps
 *    (KS = 8 / M parts); the parts meet in shared memory (one barrier a task, two
 *    buffers) and the block's threads run the epilogue (STORE, ADD in place,
 *    SWIGLU, ROPE_KV, bias; w4_store_pair) on whole row pairs. M is chosen so the
 *    persistent grid (2 blocks an SM) gets balanced work;
 *  - as variant 2: two warp items of loads in flight a lane (ping-pong buffers), the
 *    first two issued before the PDL wait, clamped offsets instead of predicates,
 *    32-bit element offsets; the activation staged once per block (RMSNorm fused,
 *    f16 scaled by 8/max, variant 2's numerics), stored [piece][chunk] per token so a
 *    step's four 16-byte B reads per lane are conflict-free (token rows 64 bytes apart
 *    mod 128 for several tokens). */
#define W4M_U 2                /* 4-chunk steps a warp item */
#define W4M_SPAN (4 * W4M_U)   /* chunks of a row a warp item covers */
enum { W4M_CORR = 0, W4M_SUB = 1, W4M_SCALED = 2 };

static __device__ __forceinline__ uint32_t
h2_sub (uint32_t a, uint32_t b)
{
  return h2_bits (__hsub2 (as_h2 (a), as_h2 (b)));
}

static __device__ __forceinline__ uint32_t
h2_mul (uint32_t a, uint32_t b)
{
  return h2_bits (__hmul2 (as_h2 (a), as_h2 (b)));
}

template <int MODE, bool BOTH, bool NORM>
__global__ void __launch_bounds__ (256, 2)
w4m_gemv_kernel (W4Args a)
{
  /* per token: B pieces [4][ncp] (uint4; piece p of chunk c at p·ncp + c), row stride
   * m_tstride; then (CORR) float2 (1024·ΣL + 64·ΣH, ΣL + ΣH) [n_tok][ncp / 4] */
  extern __shared__ uint4 xs[];
  __shared__ float part_ss[8][8], part_mx[8][8];
  __shared__ float alpha_s[8];
  __shared__ float red[2][8][16][8];     /* [task parity][warp][row of tile][token] */
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int M = a.m_tiles, mt = wib % M, kp = wib / M;
  const int ipp = a.m_ipp, cs = a.cshift, ncp = a.m_ncp;
  const int rounds = (a.m_nbt - (int) blockIdx.x + (int) gridDim.x - 1) / (int) gridDim.x;
  const int nseq = rounds * ipp;
  const int cmax = a.nchunk - 1;

  struct Buf {
    int4 w[W4M_U][2];                  /* chunk of row g / g + 8 */
    uint32_t s[W4M_U][2], z[W4M_U][2]; /* m_pair: both groups' in s[0][r] and z[0][r], split when used */
  } ba, bb;

  auto load = [&] (Buf &b, int n) {
    const int q = n / ipp;
    const int tile = ((int) blockIdx.x + q * (int) gridDim.x) * M + mt;
    const int c0 = (kp * ipp + (n - q * ipp)) * W4M_SPAN + t;
#pragma unroll
    for (int r = 0; r < 2; r++)
      {
        const unsigned row = (unsigned) min (tile * 16 + g + 8 * r, a.rows - 1);
        const unsigned qr = row * (unsigned) a.nchunk, gr = row * (unsigned) a.ng;
#pragma unroll
        for (int u = 0; u < W4M_U; u++)
          {
            const unsigned c = (unsigned) min (c0 + 4 * u, cmax);
            b.w[u][r] = ld_stream (a.q + (qr + c));
            if (!a.m_pair)
              {
                b.s[u][r] = __ldg (a.s + (gr + (c >> cs)));
                b.z[u][r] = __ldg (a.z + (gr + (c >> cs)));
              }
          }
        if (a.m_pair)
          {
            /* g128: the item's steps are groups 2·it and 2·it + 1 (ng even, so aligned) —
             * half the scalar loads, each touching 8 rows' lines */
            const unsigned g0 = gr + (unsigned) min ((c0 - t) >> 2, a.ng - 2);
            b.s[0][r] = __ldg ((const unsigned int *) (a.s + g0));
            b.z[0][r] = __ldg ((const unsigned short *) (a.z + g0));
          }
      }
  };

  if (nseq > 0)
    load (ba, 0);
  if (nseq > 1)
    load (bb, 1);
  pdl_wait ();

  /* Stage: Σx² and max|x·g| per token, then f16 x·g·(8/max), odd pairs / 16. */
  const int n8 = a.cols >> 3;
  w4_act_stats<8, NORM> (a, n8, part_ss, part_mx, wib, lane);
  __syncthreads ();
  if ((int) threadIdx.x < a.n_tok)
    {
      const int tk = threadIdx.x;
      float ss = 0.f, mx = 0.f;
#pragma unroll
      for (int i = 0; i < 8; i++)
        {
          ss += part_ss[i][tk];
          mx = fmaxf (mx, part_mx[i][tk]);
        }
      alpha_s[tk] = mx * 0.125f * (NORM ? rsqrtf (ss / (float) a.cols + a.eps) : 1.f);
    }
  const int npiece = ncp * 4, ngp = ncp >> 2;
  float2 *gs = (float2 *) (xs + (size_t) a.n_tok * a.m_tstride);
  const __half2 sixteenth = as_h2 (0x2C002C00u);
  for (int tk = 0; tk < a.n_tok; tk++)
    {
      const float4 *xp = (const float4 *) (a.x + (size_t) (a.tok0 + tk) * a.cols);
      float mx = 0.f;
#pragma unroll
      for (int i = 0; i < 8; i++)
        mx = fmaxf (mx, part_mx[i][tk]);
      const float sc = mx > 0.f ? 8.f / mx : 0.f;
      uint4 *xt = xs + (size_t) tk * a.m_tstride;
      for (int i = threadIdx.x; i < npiece; i += 256)   /* npiece % 32 == 0: whole warps */
        {
          uint4 pk = make_uint4 (0, 0, 0, 0);   /* the padding past the row stays 0 */
          if (i < n8)
            {
              pk = w4_pack8<NORM> (a, xp, i, sc);
              pk.y = h2_bits (__hmul2 (as_h2 (pk.y), sixteenth));
              pk.w = h2_bits (__hmul2 (as_h2 (pk.w), sixteenth));
            }
          xt[(i & 3) * ncp + (i >> 2)] = pk;
          if (MODE == W4M_CORR)
            {
              /* the group's sums of what the MMA reads: 16 pieces (4 chunks) a group */
              const float2 l0 = __half22float2 (as_h2 (pk.x)), l1 = __half22float2 (as_h2 (pk.z));
              const float2 h0 = __half22float2 (as_h2 (pk.y)), h1 = __half22float2 (as_h2 (pk.w));
              float sl = (l0.x + l0.y) + (l1.x + l1.y), sh = 16.f * ((h0.x + h0.y) + (h1.x + h1.y));
#pragma unroll
              for (int o = 8; o > 0; o >>= 1)
                {
                  sl += __shfl_xor_sync (0xffffffffu, sl, o);
                  sh += __shfl_xor_sync (0xffffffffu, sh, o);
                }
              if ((lane & 15) == 0)
                gs[(size_t) tk * ngp + (i >> 4)] = make_float2 (1024.f * sl + 64.f * sh, sl + sh);
            }
        }
    }
  __syncthreads ();

  float acc[4] = { 0.f, 0.f, 0.f, 0.f };   /* C layout: (row g, token 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1) */
  const uint4 *xb = xs + (size_t) min (g, a.n_tok - 1) * a.m_tstride + t;
  const float2 *gsa = gs + (size_t) min (2 * t, a.n_tok - 1) * ngp;
  const float2 *gsb = gs + (size_t) min (2 * t + 1, a.n_tok - 1) * ngp;

  auto step = [&] (Buf &b, int n) -> bool {
    if (n >= nseq)
      return false;
    const int q = n / ipp, j = n - q * ipp;
    const int it = kp * ipp + j;
    if (it < a.m_nitem)
      {
#pragma unroll
        for (int u = 0; u < W4M_U; u++)
          {
            const int s = it * W4M_U + u;   /* 4-chunk step: the group at g128 */
            const uint4 *xc = xb + 4 * s;
            uint4 bx[4];
#pragma unroll
            for (int p = 0; p < 4; p++)
              bx[p] = xc[p * ncp];
            uint32_t zl[2], zh[2], s2[2], sb[2], zb[2];
#pragma unroll
            for (int r = 0; r < 2; r++)
              {
                sb[r] = !a.m_pair ? b.s[u][r] : u == 0 ? b.s[0][r] & 0xffffu : b.s[0][r] >> 16;
                zb[r] = !a.m_pair ? b.z[u][r] : u == 0 ? b.z[0][r] & 0xffu : (b.z[0][r] >> 8) & 0xffu;
                zl[r] = 0x64006400u | (zb[r] * 0x10001u);
                zh[r] = 0x64006400u | (zb[r] * 0x100010u);
                s2[r] = sb[r] * 0x10001u;
              }
            float cl[4] = { 0.f, 0.f, 0.f, 0.f };
            const uint32_t wg[4] = { (uint32_t) b.w[u][0].x, (uint32_t) b.w[u][0].y, (uint32_t) b.w[u][0].z,
                                     (uint32_t) b.w[u][0].w };
            const uint32_t w8[4] = { (uint32_t) b.w[u][1].x, (uint32_t) b.w[u][1].y, (uint32_t) b.w[u][1].z,
                                     (uint32_t) b.w[u][1].w };
#pragma unroll
            for (int i = 0; i < 4; i++)
              {
                uint32_t v0 = wg[i], v1 = w8[i];
                uint32_t l0g = lop3_and_or (v0, 0x000f000fu, 0x64006400u);
                uint32_t h0g = lop3_and_or (v0, 0x00f000f0u, 0x64006400u);
                uint32_t l0e = lop3_and_or (v1, 0x000f000fu, 0x64006400u);
                uint32_t h0e = lop3_and_or (v1, 0x00f000f0u, 0x64006400u);
                v0 >>= 8;
                v1 >>= 8;
                uint32_t l1g = lop3_and_or (v0, 0x000f000fu, 0x64006400u);
                uint32_t h1g = lop3_and_or (v0, 0x00f000f0u, 0x64006400u);
                uint32_t l1e = lop3_and_or (v1, 0x000f000fu, 0x64006400u);
                uint32_t h1e = lop3_and_or (v1, 0x00f000f0u, 0x64006400u);
                if (MODE != W4M_CORR)
                  {
                    l0g = h2_sub (l0g, zl[0]); h0g = h2_sub (h0g, zh[0]);
                    l1g = h2_sub (l1g, zl[0]); h1g = h2_sub (h1g, zh[0]);
                    l0e = h2_sub (l0e, zl[1]); h0e = h2_sub (h0e, zh[1]);
                    l1e = h2_sub (l1e, zl[1]); h1e = h2_sub (h1e, zh[1]);
                  }
                if (MODE == W4M_SCALED)
                  {
                    l0g = h2_mul (l0g, s2[0]); h0g = h2_mul (h0g, s2[0]);
                    l1g = h2_mul (l1g, s2[0]); h1g = h2_mul (h1g, s2[0]);
                    l0e = h2_mul (l0e, s2[1]); h0e = h2_mul (h0e, s2[1]);
                    l1e = h2_mul (l1e, s2[1]); h1e = h2_mul (h1e, s2[1]);
                    w4_mma (acc, l0g, l0e, h0g, h0e, bx[i].x, bx[i].y);
                    w4_mma (acc, l1g, l1e, h1g, h1e, bx[i].z, bx[i].w);
                  }
                else
                  {
                    w4_mma (cl, l0g, l0e, h0g, h0e, bx[i].x, bx[i].y);
                    w4_mma (cl, l1g, l1e, h1g, h1e, bx[i].z, bx[i].w);
                  }
              }
            if (MODE != W4M_SCALED)
              {
                float2 ga = make_float2 (0.f, 0.f), gb = ga;
                if (MODE == W4M_CORR)
                  {
                    ga = gsa[s];
                    if (BOTH)
                      gb = gsb[s];
                  }
#pragma unroll
                for (int r = 0; r < 2; r++)
                  {
                    const float sf = f16_bits_to_f32 ((uint16_t) sb[r]);
                    const float zf = (float) zb[r];
                    acc[2 * r] = fmaf (sf, cl[2 * r] - fmaf (zf, ga.y, ga.x), acc[2 * r]);
                    if (BOTH)
                      acc[2 * r + 1] = fmaf (sf, cl[2 * r + 1] - fmaf (zf, gb.y, gb.x), acc[2 * r + 1]);
                  }
              }
          }
      }
    if (j == ipp - 1)
      {
        /* the block task is complete: the k parts meet, whole row pairs go to the epilogue */
        float (*rb)[16][8] = red[q & 1];
        if (BOTH || t == 0)
          {
            rb[wib][g][2 * t] = acc[0];
            rb[wib][g + 8][2 * t] = acc[2];
            if (BOTH)
              {
                rb[wib][g][2 * t + 1] = acc[1];
                rb[wib][g + 8][2 * t + 1] = acc[3];
              }
          }
        acc[0] = acc[1] = acc[2] = acc[3] = 0.f;
        __syncthreads ();
        const int bt = (int) blockIdx.x + q * (int) gridDim.x, nt = a.n_tok, ks = 8 / M;
        for (int e = threadIdx.x; e < M * 8 * nt; e += 256)
          {
            const int tk = e % nt, pr = (e / nt) & 7, m = e / (8 * nt);
            const int row0 = (bt * M + m) * 16 + 2 * pr;
            if (row0 < a.rows)
              {
                float v0 = 0.f, v1 = 0.f;
                for (int k = 0; k < ks; k++)
                  {
                    v0 += rb[k * M + m][2 * pr][tk];
                    v1 += rb[k * M + m][2 * pr + 1][tk];
                  }
                w4_store_pair (a, row0, a.tok0 + tk, v0 * alpha_s[tk], v1 * alpha_s[tk]);
              }
          }
      }
    if (n + 2 < nseq)
      load (b, n + 2);
    return true;
  };
  int n = 0;
  while (step (ba, n) && step (bb, n + 1))
    n += 2;
  pdl_trigger ();
  prefetch_slice (a.pf, blockIdx.x * 8 + wib, gridDim.x * 8, lane);
}

static int sm_count = 0;

/* per kernel instance: the opt-in to large shared memory, and blocks per SM by staging size */
struct W4LaunchCache {
  bool attr_set;
  size_t occ_smem[4];
  int occ_blocks[4], occ_n;
};

static int
w4_launch_grid (void (*kern) (W4Args), W4LaunchCache &c, const W4Args &a, size_t smem, cudaStream_t stream)
{
  if (!c.attr_set)
    {
      HONE_K_CHECK (cudaFuncSetAttribute (kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int) W4_SMEM));
      c.attr_set = true;
    }
  if (!sm_count)
    {
      int dev = 0;
      HONE_K_CHECK (cudaGetDevice (&dev));
      HONE_K_CHECK (cudaDeviceGetAttribute (&sm_count, cudaDevAttrMultiProcessorCount, dev));
    }
  int blocks_per_sm = 0;
  for (int i = 0; i < c.occ_n; i++)
    if (c.occ_smem[i] == smem)
      blocks_per_sm = c.occ_blocks[i];
  if (!blocks_per_sm)
    {
      HONE_K_CHECK (cudaOccupancyMaxActiveBlocksPerMultiprocessor (&blocks_per_sm, kern, 256, smem));
      if (blocks_per_sm < 1)
        blocks_per_sm = 1;
      const int i = c.occ_n < 4 ? c.occ_n++ : 3;
      c.occ_smem[i] = smem;
      c.occ_blocks[i] = blocks_per_sm;
    }
  /* every warp gets the same number of row pairs (the last block may idle a few warps) */
  const int max_warps = blocks_per_sm * sm_count * 8;
  const int per_warp = (a.ntask + max_warps - 1) / max_warps;
  const int warps = (a.ntask + per_warp - 1) / per_warp;
  return hone_k_launch (kern, dim3 ((unsigned) ((warps + 7) / 8)), dim3 (256), smem, stream, a);
}

template <int MAXT, bool NORM, int U>
static int
w4_launch (W4Args a, size_t smem, cudaStream_t stream)
{
  static W4LaunchCache cache;
  a.nround = ((a.nchunk + 31) / 32 + U - 1) / U;
  return w4_launch_grid (w4_gemv_kernel<MAXT, NORM, U>, cache, a, smem, stream);
}

/* a.nround set by the caller: the staged row's padded chunks / W4V2_SPAN */
template <int MAXT, bool NORM>
static int
w4v2_launch (const W4Args &a, size_t smem, cudaStream_t stream)
{
  static W4LaunchCache cache;
  return w4_launch_grid (w4v2_gemv_kernel<MAXT, NORM>, cache, a, smem, stream);
}

template <bool NORM>
static int
w4v2_launch_t (const W4Args &a, size_t smem, cudaStream_t stream)
{
  if (a.n_tok == 1)
    return w4v2_launch<1, NORM> (a, smem, stream);
  if (a.n_tok == 2)
    return w4v2_launch<2, NORM> (a, smem, stream);
  if (a.n_tok <= 4)
    return w4v2_launch<4, NORM> (a, smem, stream);
  return w4v2_launch<8, NORM> (a, smem, stream);
}

/* Kernel choice and tuning hook (hone_k_q4z_set_config): 0 automatic, 1 the
 * first kernel, 4 the first kernel with 4 chunk loads a lane per batch, 2
 * variant 2, 3 the staged kernel for one token (variant 2 for more, and where
 * the staged kernel does not apply: before sm_90, unaligned buffers, rows too
 * long for its shared memory) with 256 threads, 5 the same with 512 threads and
 * the SM's shared memory to itself, 6 / 7 = 5 / 3 with the dependents triggered
 * at the end instead of at entry. Automatic: HONE_Q4Z_KERNEL=old|new|staged|staged512
 * in the environment, else W4_DEFAULT: variant 2 since it passed the GPU checks (82/82,
 * memcheck clean, 2026-11-29 13:40 UTC) and measured 1.05x on the whole 8B step
 * (RESULTS-cuda.md); the staged kernels measured 0.96x (512 threads) and 0.71x (256)
 * on that step (2026-11-29 15:28 UTC), so variant 2 stays. 8 / 9 / 10: the tensor-core
 * kernel (w4m_gemv_kernel) with g128 in mode CORR / SUB / SCALED (other groups always
 * SCALED); 11 = 8 with the plan that ignores the cost of a block task's barrier, 12 = 8
 * without the paired scale/zero loads (A/B of session 4's second call).
 * HONE_Q4Z_KERNEL=mma|mma-sub|mma-scaled. Automatic with 2..8 tokens at g128: mode SUB
 * (see hone_k_q4z_gemv). 13 (HONE_Q4Z_KERNEL=rs): one token on the register-streamed
 * GEMV of hone-k-gemv.cu (dp4a kernels' launch shapes and loop; since session 10 its
 * dot_chunk_w4 multiplies the nibbles by the input's 16-bit fixed point in integers,
 * dp4a, instead of dequantizing to f16) after one hone_k_pack_h16 launch into op->xh
 * (decode attention writes o's itself) — no per-block staging; without op->xh, and for more tokens, variant 2 /
 * the tensor-core kernel as before. W4_DEFAULT since 2026-12-02: the same-process A/B
 * on the random AWQ g128 8B step measured 2.369 vs 2.382 ms (call 2) and, with o's
 * input from attention, 2.360 vs 2.391 ms at 128 keys, 2.680 vs 2.693 at 4k (call 3),
 * checks and memcheck clean (tests/bench/RESULTS-cuda.md, "Decode, session 8"). */
#define W4_DEFAULT 13
static int w4_config = 0;
static int w4_env = -1;   /* HONE_Q4Z_KERNEL read once: the kernel it names, 0 unset */
static int w4_last = 0;   /* hone_k_q4z_last_kernel */

extern "C" int
hone_k_q4z_last_kernel (void)
{
  return w4_last;
}

extern "C" void
hone_k_q4z_set_config (int config)
{
  w4_config = config;
}

/* 1 the first kernel (configs 1 and 4), 2 variant 2, 3 staged, 4 tensor cores (8..12),
 * 5 register-streamed with the packed input (13) */
static int
w4_kind (void)
{
  if (w4_config == 2 || w4_config == 3)
    return w4_config;
  if (w4_config == 13)
    return 5;
  if (w4_config >= 5 && w4_config <= 7)
    return 3;
  if (w4_config >= 8 && w4_config <= 12)
    return 4;
  if (w4_config != 0)
    return 1;   /* 1 and 4 */
  if (w4_env < 0)
    {
      const char *e = getenv ("HONE_Q4Z_KERNEL");
      w4_env = !e ? 0 : !strcmp (e, "old") ? 1 : !strcmp (e, "new") ? 2 : !strcmp (e, "staged") ? 3
               : !strcmp (e, "staged512") ? 5 : !strcmp (e, "mma") ? 8 : !strcmp (e, "mma-sub") ? 9
               : !strcmp (e, "mma-scaled") ? 10 : !strcmp (e, "rs") ? 13 : 0;
    }
  const int k = w4_env ? w4_env : W4_DEFAULT;
  return k == 13 ? 5 : k >= 8 ? 4 : k >= 5 ? 3 : k;
}

/* The staged kernel's slot plan for a.cols with @nt threads (false: it does not fit, use variant 2). */
static bool
w4s_plan (W4Args &a, int nt)
{
  const int rowq = a.cols / 2;
  const int ncp = (a.nchunk + 31) / 32 * 32;
  a.st_xbytes = ncp * 64;
  int rs = 2 * (nt / 32);   /* at most one warp a row pair */
  while (rs > 2 && rs * rowq > W4S_STAGE_TARGET (nt))
    rs >>= 1;
  const int sreg = (rs * a.ng * 2 + 32 + 15) & ~15, zreg = (rs * a.ng + 32 + 15) & ~15;
  a.st_rows = rs;
  a.st_soff = rs * rowq;
  a.st_zoff = a.st_soff + sreg;
  a.st_bytes = (a.st_zoff + zreg + 127) & ~127;
  const int n = (W4S_SMEM_MAX (nt) - a.st_xbytes) / a.st_bytes;
  a.st_n = n < W4S_MAXST ? n : W4S_MAXST;
  return a.st_xbytes < W4S_SMEM_MAX (nt) && a.st_n >= 2;
}

template <bool NORM, int PS, int NT>
static int
w4s_launch (const W4Args &a, size_t smem, cudaStream_t stream)
{
  static bool attr_set = false;
  if (!attr_set)
    {
      HONE_K_CHECK (cudaFuncSetAttribute (w4s_gemv_kernel<NORM, PS, NT>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, W4S_SMEM_MAX (NT)));
      /* all of the SM's shared memory for blocks, so the next kernel's block fits beside this one */
      HONE_K_CHECK (cudaFuncSetAttribute (w4s_gemv_kernel<NORM, PS, NT>,
                                          cudaFuncAttributePreferredSharedMemoryCarveout,
                                          (int) cudaSharedmemCarveoutMaxShared));
      attr_set = true;
    }
  if (!sm_count)
    {
      int dev = 0;
      HONE_K_CHECK (cudaGetDevice (&dev));
      HONE_K_CHECK (cudaDeviceGetAttribute (&sm_count, cudaDevAttrMultiProcessorCount, dev));
    }
  const int npair = (a.rows + 1) / 2;
  const int grid = npair < sm_count ? npair : sm_count;
  return hone_k_launch (w4s_gemv_kernel<NORM, PS, NT>, dim3 ((unsigned) grid), dim3 (NT), smem, stream, a);
}

template <bool NORM, int NT>
static int
w4s_launch_ps (const W4Args &a, size_t smem, cudaStream_t stream)
{
  switch (a.st_rows)
    {
    case 2:  return w4s_launch<NORM, 1, NT> (a, smem, stream);
    case 4:  return w4s_launch<NORM, 2, NT> (a, smem, stream);
    case 8:  return w4s_launch<NORM, 4, NT> (a, smem, stream);
    case 16: return w4s_launch<NORM, 8, NT> (a, smem, stream);
    default: return w4s_launch<NORM, NT == 512 ? 16 : 8, NT> (a, smem, stream);
    }
}

/* One token through the staged kernel (@nt threads, the dependents triggered at
 * entry or, @trig_end, at the end); -1 when it does not apply (the caller runs variant 2). */
static int
w4s_try (W4Args a, int nt, int trig_end, cudaStream_t stream)
{
  if (a.n_tok != 1 || !hone_k_stage_supported () || ((uintptr_t) a.q & 15) || ((uintptr_t) a.s & 15)
      || ((uintptr_t) a.x & 15) || (a.norm_g && ((uintptr_t) a.norm_g & 15)) || !w4s_plan (a, nt))
    return -1;
  a.tok0 = 0;
  a.st_trig_end = trig_end;
  const size_t smem = (size_t) a.st_xbytes + (size_t) a.st_n * a.st_bytes;
  const bool norm = a.norm_g != NULL;
  if (nt == 512)
    return norm ? w4s_launch_ps<true, 512> (a, smem, stream) : w4s_launch_ps<false, 512> (a, smem, stream);
  return norm ? w4s_launch_ps<true, 256> (a, smem, stream) : w4s_launch_ps<false, 256> (a, smem, stream);
}

/* The tensor-core kernel's plan for one launch: chunks staged, tiles a block task (M),
 * k parts (8 / M), items a warp, grid. Returns the shared bytes a token.
 * Cost of a plan = rounds × (items a warp + w4m_task_cost): every block task ends in a
 * barrier, where the block waits for its slowest warp's loads (call 1: gate|up at 7
 * rounds of 2 items ran at 2.6 TB/s), so fewer, longer tasks win over a finer split. */
static int w4m_task_cost = 4, w4m_pair_ok = 1;   /* configs 11 / 12: 0 / 0 (A/B of call 2) */

static size_t
w4m_plan (W4Args &a, int blocks_per_sm, int *grid)
{
  const int nitem = (a.nchunk + W4M_SPAN - 1) / W4M_SPAN;
  a.m_nitem = nitem;
  a.m_ncp = nitem * W4M_SPAN;
  a.m_tstride = 4 * a.m_ncp + 4;   /* 64 bytes mod 128 between token rows: no bank conflicts */
  const int ntile = (a.rows + 15) / 16;
  const int gmax = blocks_per_sm * sm_count;
  int best = 0, best_cost = 0, best_rounds = 1;
  for (int m = 1; m <= 8; m *= 2)
    {
      const int ks = 8 / m;
      if (ks > nitem && m < 8)
        continue;   /* k parts with nothing to do */
      const int nbt = (ntile + m - 1) / m, rounds = (nbt + gmax - 1) / gmax;
      const int cost = rounds * ((nitem + ks - 1) / ks + w4m_task_cost);
      if (!best || cost <= best_cost)
        {
          best = m;
          best_cost = cost;
          best_rounds = rounds;
        }
    }
  a.m_tiles = best;
  a.m_ipp = (nitem + 8 / best - 1) / (8 / best);
  a.m_nbt = (ntile + best - 1) / best;
  *grid = (a.m_nbt + best_rounds - 1) / best_rounds;
  return (size_t) a.m_tstride * 16 + (size_t) (a.m_ncp / 4) * 8;
}

template <int MODE, bool BOTH, bool NORM>
static int
w4m_launch_i (W4Args &a, cudaStream_t stream)
{
  static int bps = 0;
  if (!bps)
    {
      HONE_K_CHECK (cudaFuncSetAttribute (w4m_gemv_kernel<MODE, BOTH, NORM>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, (int) W4_SMEM));
      HONE_K_CHECK (cudaOccupancyMaxActiveBlocksPerMultiprocessor (&bps, w4m_gemv_kernel<MODE, BOTH, NORM>, 256,
                                                                   W4_SMEM));
      if (bps < 1)
        bps = 1;
    }
  int grid;
  const size_t smem = w4m_plan (a, bps, &grid) * a.n_tok;
  return hone_k_launch (w4m_gemv_kernel<MODE, BOTH, NORM>, dim3 ((unsigned) grid), dim3 (256), smem, stream, a);
}

template <int MODE>
static int
w4m_launch_m (W4Args &a, cudaStream_t stream)
{
  if (a.n_tok == 1)
    return a.norm_g ? w4m_launch_i<MODE, false, true> (a, stream) : w4m_launch_i<MODE, false, false> (a, stream);
  return a.norm_g ? w4m_launch_i<MODE, true, true> (a, stream) : w4m_launch_i<MODE, true, false> (a, stream);
}

/* All tokens of @op through the tensor-core kernel, as many a launch as the shared budget holds. */
static int
w4m_run (W4Args a, int n_tok, int mode, const HoneKPrefetch *pf, cudaStream_t stream)
{
  if (!sm_count)
    {
      int dev = 0;
      HONE_K_CHECK (cudaGetDevice (&dev));
      HONE_K_CHECK (cudaDeviceGetAttribute (&sm_count, cudaDevAttrMultiProcessorCount, dev));
    }
  int dummy;
  const size_t row16 = w4m_plan (a, 1, &dummy);
  int per = (int) (W4_SMEM / row16);
  if (per < 1)
    return (int) cudaErrorInvalidValue;   /* rows over ~48k columns */
  if (per > HONE_K_MAX_DECODE)
    per = HONE_K_MAX_DECODE;
  for (int t0 = 0; t0 < n_tok; t0 += per)
    {
      a.tok0 = t0;
      a.n_tok = n_tok - t0 < per ? n_tok - t0 : per;
      memset (&a.pf, 0, sizeof a.pf);
      if (pf && t0 + a.n_tok == n_tok)
        a.pf = *pf;
      const int r = mode == W4M_CORR ? w4m_launch_m<W4M_CORR> (a, stream)
                    : mode == W4M_SUB ? w4m_launch_m<W4M_SUB> (a, stream) : w4m_launch_m<W4M_SCALED> (a, stream);
      if (r)
        return r;
    }
  return 0;
}

template <bool NORM, int U>
static int
w4_launch_u (const W4Args &a, size_t smem, cudaStream_t stream)
{
  if (a.n_tok == 1)
    return w4_launch<1, NORM, U> (a, smem, stream);
  if (a.n_tok == 2)
    return w4_launch<2, NORM, U> (a, smem, stream);
  if (a.n_tok <= 4)
    return w4_launch<4, NORM, U> (a, smem, stream);
  return w4_launch<8, NORM, U> (a, smem, stream);
}

template <bool NORM>
static int
w4_launch_t (const W4Args &a, size_t smem, cudaStream_t stream)
{
  if (w4_config == 4)
    return w4_launch_u<NORM, 4> (a, smem, stream);
  return w4_launch_u<NORM, 2> (a, smem, stream);
}

extern "C" int hone_k_gemv_q4z_rs (const HoneKGemvOp *op, const HoneKPrefetch *pf, cudaStream_t stream);

extern "C" bool
hone_k_q4z_takes_h16 (const HoneKMatrix *w)
{
  return w->type == HONE_K_Q4Z && q4z_shape_ok (w) && w4_kind () == 5;
}

extern "C" int
hone_k_q4z_gemv (const HoneKGemvOp *op, const HoneKPrefetch *pf, cudaStream_t stream)
{
  const HoneKMatrix *w = op->w;
  if (w->type != HONE_K_Q4Z || !q4z_shape_ok (w) || op->n_tok < 1 || op->n_tok > HONE_K_MAX_DECODE || !op->x
      || !op->y || (op->epilogue == HONE_K_EPI_ADD && !op->res))
    return (int) cudaErrorInvalidValue;
  if ((op->epilogue == HONE_K_EPI_SWIGLU || op->epilogue == HONE_K_EPI_ROPE_KV) && (w->rows & 1))
    return (int) cudaErrorInvalidValue;
  if (op->epilogue == HONE_K_EPI_ROPE_KV
      && (op->hd <= 0 || (op->hd & 1) || w->rows != (op->nq + 2 * op->nkv) * op->hd || !op->pos || !op->inv_freq
          || !op->k_pool || !op->v_pool || !op->block_table))
    return (int) cudaErrorInvalidValue;
  if (op->epilogue < HONE_K_EPI_STORE || op->epilogue > HONE_K_EPI_ROPE_KV)
    return (int) cudaErrorInvalidValue;
  const int g = q4z_group (w);
  W4Args a;
  memset (&a, 0, sizeof a);
  a.q = (const int4 *) w->q;
  a.s = (const uint16_t *) w->s;
  a.rows = w->rows;
  a.cols = w->cols;
  a.nchunk = w->cols / 32;
  a.ng = w->cols / g;
  a.z = (const uint8_t *) w->s + (size_t) w->rows * a.ng * 2;
  a.cshift = g == 32 ? 0 : g == 64 ? 1 : 2;
  a.ntask = (w->rows + W4_R - 1) / W4_R;
  a.norm_g = op->norm_g;
  a.eps = op->eps;
  epi_args_from_op (a, op);
  a.x = op->x;
  /* Tokens whose f16 rows fit the shared budget go in one launch; more take
   * several launches over the same weights (long rows at several tokens).
   * Variant 2 stages rows padded to whole items of W4V2_SPAN chunks. */
  int kind = w4_kind ();
  int cfg = w4_config ? w4_config : w4_env > 0 ? w4_env : W4_DEFAULT;
  if (!w4_config && w4_env <= 0 && op->n_tok >= 2 && g == 128)
    {
      /* automatic, 2..8 tokens at g128 (what was measured): the tensor-core kernel, zero point
       * in f16 — the 8-token Llama-3-8B step 1.22x faster than variant 2 (6.006 vs 7.329 ms,
       * 2026-11-29 18:08 UTC), mode SUB the fastest of the three at 4 and 8 tokens. One
       * token stays variant 2 (the tensor-core kernel measured 0.80x on that step). */
      kind = 4;
      cfg = 9;
    }
  if (kind == 5 && op->n_tok == 1 && op->xh && op->xh->h && op->xh->d)
    {
      const bool packed = (op->xh_ready && !op->norm_g) || (hone_k_step_probe () & 1);   /* probe: measurement only */
      const int r = packed ? 0 : hone_k_pack_h16 (op->x, op->norm_g, 1, w->cols, op->eps, op->xh, stream);
      if (r)
        return r;
      w4_last = 5;
      return hone_k_gemv_q4z_rs (op, pf, stream);
    }
  if (kind == 5)
    kind = 2;   /* no scratch, or several tokens: variant 2 */
  if (kind == 3 && op->n_tok == 1)
    {
      if (pf)
        a.pf = *pf;
      a.n_tok = 1;
      const int c = w4_config ? w4_config : w4_env > 0 ? w4_env : W4_DEFAULT;
      const int r = w4s_try (a, c == 5 || c == 6 ? 512 : 256, c == 6 || c == 7, stream);
      if (r != -1)
        {
          w4_last = 3;
          return r;
        }
      memset (&a.pf, 0, sizeof a.pf);
    }
  if (kind == 4)
    {
      /* tensor cores: g128 subtracts offset and zero point in f32 a group (config 8) or
       * the zero point in f16 first (9); other groups, and config 10, scale in f16 */
      const int c = cfg;
      const int mode = g != 128 || c == 10 ? W4M_SCALED : c == 9 ? W4M_SUB : W4M_CORR;
      w4m_task_cost = c == 11 ? 0 : 4;
      w4m_pair_ok = c != 12;
      a.m_pair = w4m_pair_ok && mode != W4M_SCALED && a.ng % 2 == 0 && !((uintptr_t) a.s & 3);
      w4_last = 4;
      return w4m_run (a, op->n_tok, mode, pf, stream);
    }
  const bool v2 = kind >= 2 && kind <= 3;
  w4_last = v2 ? 2 : 1;
  const int ncp = (a.nchunk + W4V2_SPAN - 1) / W4V2_SPAN * W4V2_SPAN;
  const size_t row16 = v2 ? (size_t) ncp * 64 : (size_t) w->cols * 2;
  int per = (int) (W4_SMEM / row16);
  if (per < 1)
    return (int) cudaErrorInvalidValue;   /* rows over 48k columns */
  if (per > HONE_K_MAX_DECODE)
    per = HONE_K_MAX_DECODE;
  for (int t0 = 0; t0 < op->n_tok; t0 += per)
    {
      a.tok0 = t0;
      a.n_tok = op->n_tok - t0 < per ? op->n_tok - t0 : per;
      if (pf && t0 + a.n_tok == op->n_tok)
        a.pf = *pf;
      const size_t smem = row16 * a.n_tok;
      int r;
      if (v2)
        {
          a.nround = ncp / W4V2_SPAN;
          r = op->norm_g ? w4v2_launch_t<true> (a, smem, stream) : w4v2_launch_t<false> (a, smem, stream);
        }
      else
        r = op->norm_g ? w4_launch_t<true> (a, smem, stream) : w4_launch_t<false> (a, smem, stream);
      if (r)
        return r;
    }
  return 0;
}

/* ---- dequantization to 16-bit (prefill GEMMs) ------------------------------------ */

/* One thread per 32-bit word (8 weights); consecutive threads write consecutive 16 bytes. */
__global__ void __launch_bounds__ (256)
q4z_dequant_kernel (const uint32_t *q, const uint16_t *s, const uint8_t *z, size_t words, int cols, int ng,
                    int cshift, void *dst, int to_f16)
{
  const size_t i = (size_t) blockIdx.x * 256 + threadIdx.x;
  if (i >= words)
    return;
  const int wpr = cols / 8;
  const size_t row = i / wpr;
  const int c = (int) (i - row * wpr) >> 2;
  const size_t gi = row * ng + (c >> cshift);
  const uint32_t sbits = s[gi];
  __half2 zc0, nzc1, o[4];
  w4_zero (z[gi], zc0, nzc1);
  w4_word (q[i], zc0, nzc1, o);
  uint32_t ov[4];
  if (to_f16)
    {
      const __half2 s2 = as_h2 (sbits | (sbits << 16));
#pragma unroll
      for (int j = 0; j < 4; j++)
        ov[j] = h2_bits (__hmul2 (o[j], s2));
    }
  else
    {
      const float sf = f16_bits_to_f32 ((uint16_t) sbits);
#pragma unroll
      for (int j = 0; j < 4; j++)
        {
          const float2 f = __half22float2 (o[j]);
          const __nv_bfloat162_raw v = __floats2bfloat162_rn (f.x * sf, f.y * sf);
          ov[j] = (uint32_t) v.x | ((uint32_t) v.y << 16);
        }
    }
  ((uint4 *) dst)[i] = make_uint4 (ov[0], ov[1], ov[2], ov[3]);
}

extern "C" int
hone_k_q4z_dequant (const HoneKMatrix *w, void *dst, int to_f16, cudaStream_t stream)
{
  if (w->type != HONE_K_Q4Z || !q4z_shape_ok (w) || !dst)
    return (int) cudaErrorInvalidValue;
  const int g = q4z_group (w), ng = w->cols / g;
  const size_t words = (size_t) w->rows * w->cols / 8;
  const uint8_t *z = (const uint8_t *) w->s + (size_t) w->rows * ng * 2;
  q4z_dequant_kernel<<<(unsigned) ((words + 255) / 256), 256, 0, stream>>> (
      (const uint32_t *) w->q, (const uint16_t *) w->s, z, words, w->cols, ng, g == 32 ? 0 : g == 64 ? 1 : 2, dst,
      to_f16);
  return (int) cudaGetLastError ();
}
