/* hone-k-gemv.cu — decode GEMV (1..8 tokens) with dequantization fused in registers.
 *
 * A warp owns R consecutive rows and walks them in 16-byte chunks, lane l
 * taking chunks l, l+32, …; each lane keeps U×R chunk loads in flight before
 * it uses any, and the first batch is issued before waiting for the previous
 * kernel (PDL), so the weight stream starts while that kernel drains.
 * Weights bypass L1 (read once); activations are re-read from L1/L2.
 *
 * Chunk = 16 bytes: BF16/F16 8 values; Q8_0 16 quants (half a block);
 * Q4_0/Q4_1 32 quants (one block). Quantized types dot against the int8
 * activation with dp4a.
 *
 * Optionally (HoneKPrefetch, off by default: it measured slower, see
 * tests/bench/RESULTS-cuda.md "Decode, session 2") the blocks of the last
 * wave, once through their rows, prefetch a slice of the next matrix into L2.
 */
#include "hone-k-gemv.cuh"
#include "hone-k-stage.cuh"   /* hone_k_stage_supported: sm_90 (clusters) */
#include <cooperative_groups.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

extern "C" int hone_k_q4z_gemv (const HoneKGemvOp *op, const HoneKPrefetch *pf, cudaStream_t stream);

/* The cluster barrier in two halves (sm_90): arrive at kernel entry
 * (relaxed), wait before the first access to another block's shared memory
 * (that block has then started); arrive (release) after the writes, and only
 * the block that reads waits (acquire) — the others exit at once instead of
 * idling on their slots until the slowest block of the cluster is done. */
[[maybe_unused]] static __device__ __forceinline__ void
cluster_arrive_relaxed (void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile ("barrier.cluster.arrive.relaxed;" ::: "memory");
#endif
}

[[maybe_unused]] static __device__ __forceinline__ void
cluster_arrive (void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile ("barrier.cluster.arrive.release;" ::: "memory");
#endif
}

[[maybe_unused]] static __device__ __forceinline__ void
cluster_wait (void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile ("barrier.cluster.wait.acquire;" ::: "memory");
#endif
}

/* EQ producer epilogue (one token): the STORE/ADD or SWIGLU outputs of the
 * warp's rows are stored as epi_rows would, and also sent to the shared
 * memory of the cluster's first block; after the cluster barrier that block
 * quantizes the cluster's 32 outputs (quant32_store's arithmetic) times
 * out_g, and writes their Σout². live: this warp holds finished sums (a
 * warp of another K slice only joins the barrier). Every thread of every
 * block of the cluster must call it, having called cluster_arrive_relaxed()
 * at entry. */
template <int R, int MAXT>
static __device__ __forceinline__ void
gemv_epiq_out (const GemvArgs &a, int row0, int lane, const float (&acc)[R][MAXT], bool live)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  __shared__ float grp_out[32];
  cg::cluster_group cluster = cg::this_cluster ();
  float *dst = cluster.map_shared_rank (grp_out, 0);
  const bool pair = a.epi == HONE_K_EPI_SWIGLU;
  cluster_wait ();   /* every block of the cluster has started (its entry arrive) */
  if (live)
#pragma unroll
    for (int r = 0; r < R; r += (pair ? 2 : 1))
      {
        const int row = row0 + r;
        if (lane != r || row >= a.rows)
          continue;
        float v = acc[r][0];
        if (a.bias)
          v += a.bias[row];
        if (pair)
          {
            float v1 = acc[r + 1 < R ? r + 1 : r][0];
            if (a.bias)
              v1 += a.bias[row + 1];
            v = silu (v) * v1;
            if (a.y)
              a.y[row >> 1] = v;
            dst[(row >> 1) & 31] = v;
          }
        else
          {
            if (a.epi == HONE_K_EPI_ADD)
              v += a.res[row];
            a.y[row] = v;
            dst[row & 31] = v;
          }
      }
  cluster_arrive ();
  if (cluster.block_rank () == 0 && threadIdx.x < 32)
    {
      cluster_wait ();
      const int grp = (int) (blockIdx.x / cluster.num_blocks ());
      const float h = grp_out[lane];
      const float v = a.out_g ? h * a.out_g[grp * 32 + lane] : h;
      quant32_store (v, a.out_q + grp * 32, a.out_ds + grp, lane);
      if (a.out_ssq)
        {
          const float ss = warp_sum (h * h);
          if (lane == 0)
            a.out_ssq[grp] = ss;
        }
    }
#else
  (void) a; (void) row0; (void) lane; (void) acc; (void) live;
#endif
}

/* Where a GEMV triggers its dependent launch (PDL): GemvArgs.late_trigger is
 * TRIG_ENTRY, TRIG_LATE or TRIG_WAIT; the QKV / OTHER modes give TRIG_WAIT to
 * the q|k|v GEMVs (RoPE + KV epilogue, before attention) or to the others and
 * TRIG_LATE to the rest; AUTO picks per weight type (trigger_of). */
enum { TRIG_ENTRY = 0, TRIG_LATE = 1, TRIG_WAIT = 2, TRIG_QKV, TRIG_OTHER, TRIG_AUTO };

/* NORM (f32 input, BF16/F16 weights): 0 none; 1 every block first computes
 * the rows' RMS scale in a prologue and scales x on load; 2 the dot runs on
 * x·g and the scale, from the Σx² of the very x chunks the lanes load
 * anyway, multiplies the sums at the end (no prologue: no serial L2 round
 * trips before a block's weights are used, no second pass over x).
 * EQ (one token, quantized weights, sm_90): quantization in the epilogue,
 * see GemvArgs.in_ssq / out_q; the launch forms clusters of blocks that
 * together own whole groups of 32 outputs. */
template <int WT, int R, int U, int KS, int MAXT, int NORM, int EQ = 0>
__global__ void __launch_bounds__ (256, EQ ? 3 : 0)   /* EQ: 3 blocks an SM (≤ 80 registers) as the others get; 0: no bound */
gemv_kernel (GemvArgs a)
{
  TRACE_ENTRY (a.trace);
  const int lane = threadIdx.x & 31;
  const int wib = threadIdx.x >> 5;                    /* warp in block */
  const int ks = wib % KS;                             /* K slice of this warp */
  const int row0 = ((blockIdx.x * (8 / KS)) + wib / KS) * R;
  const int nchunk = a.nchunk;

  float acc[R][MAXT];
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int t = 0; t < MAXT; t++)
      acc[r][t] = 0.f;
  float ssq[NORM == 2 ? MAXT : 1];   /* NORM 2: this lane's share of Σx² per token */
#pragma unroll
  for (int t = 0; t < (NORM == 2 ? MAXT : 1); t++)
    ssq[t] = 0.f;

  int4 w[U][R];
  uint32_t sc[U][R];   /* raw scale bits (f16 d, or d|m<<16 for Q4_1) */
  uint32_t zp[WT == HONE_K_Q4Z ? U : 1][R];   /* Q4Z zero points (kept apart from sc until used) */

  /* Triggering at entry lets a chain of dependents launch ahead (each one
   * triggers at its own entry), their waiting blocks holding SM slots and
   * registers while this kernel still has waves to run; triggering after the
   * main loop keeps at most the next kernel resident early. */
  if (a.late_trigger == TRIG_ENTRY)
    pdl_trigger ();
  if (EQ && a.out_q)
    cluster_arrive_relaxed ();

  auto load = [&] (int c0) {
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
      for (int r = 0; r < R; r++)
        {
          const int c = c0 + u * 32 * KS;
          const int row = row0 + r;
          if (c < nchunk && row < a.rows)
            {
              w[u][r] = ld_stream (a.q + (size_t) row * nchunk + c);
              if (WT == HONE_K_Q8_0)
                sc[u][r] = ((const uint16_t *) a.s)[(size_t) row * (nchunk >> 1) + (c >> 1)];
              else if (WT == HONE_K_Q4_0)
                sc[u][r] = ((const uint16_t *) a.s)[(size_t) row * nchunk + c];
              else if (WT == HONE_K_Q4_1)
                sc[u][r] = ((const uint32_t *) a.s)[(size_t) row * nchunk + c];
              else if (WT == HONE_K_Q4Z)
                {
                  const size_t gi = (size_t) row * a.ng + (c >> a.cshift);
                  sc[u][r] = ((const uint16_t *) a.s)[gi];
                  zp[WT == HONE_K_Q4Z ? u : 0][r] = a.z[gi];
                }
            }
          else
            {
              w[u][r] = make_int4 (0, 0, 0, 0);
              sc[u][r] = 0;
              if (WT == HONE_K_Q4Z)
                zp[WT == HONE_K_Q4Z ? u : 0][r] = 0;
            }
        }
  };

  int c0 = ks * 32 + lane;
  if (a.early)
    load (c0);
  pdl_wait ();
  TRACE_WAITED ();
  if (a.late_trigger == TRIG_WAIT)   /* after the wait: the next kernel's blocks may start, not the one after it */
    pdl_trigger ();
  if (!a.early)
    load (c0);
  if constexpr (WT == HONE_K_BF16 || WT == HONE_K_F16)   /* see epi_prefetch: kept for the codegen */
    if (ks == 0 && lane == 0 && a.epi_pf)
      epi_prefetch<R> (a, row0);
  /* EQ consumer: this lane's share of the producer's Σx² partials, loaded
   * while the first weights are in flight (fixed order: lane-strided, then
   * the butterfly at the end; every warp gets the same bits) */
  constexpr int NP = EQ ? 8 : 1;   /* partials a lane holds (hidden ≤ 8192 without the loop at the end) */
  float in_part[NP];
#pragma unroll
  for (int j = 0; j < NP; j++)
    in_part[j] = EQ && a.in_ssq && lane + 32 * j < (a.cols >> 5) ? a.in_ssq[lane + 32 * j] : 0.f;

  /* Fused RMSNorm: every block recomputes the input rows' scale. */
  __shared__ float nscale[MAXT];
  if (NORM == 1)
    {
      __shared__ float part[8][MAXT];
      for (int t = 0; t < MAXT && t < a.n_tok; t++)
        {
          float ss = 0.f;
          const float4 *xp = (const float4 *) (a.x + (size_t) t * a.cols);
          for (int i = threadIdx.x; i < (a.cols >> 2); i += 256)
            {
              const float4 v = xp[i];
              ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
            }
          ss = warp_sum (ss);
          if (lane == 0)
            part[threadIdx.x >> 5][t] = ss;
        }
      __syncthreads ();
      if (threadIdx.x < MAXT && (int) threadIdx.x < a.n_tok)
        {
          float ss = 0.f;
          for (int i = 0; i < 8; i++)
            ss += part[i][threadIdx.x];
          nscale[threadIdx.x] = rsqrtf (ss / (float) a.cols + a.eps);
        }
      __syncthreads ();
    }

  for (;;)
    {
#pragma unroll
      for (int u = 0; u < U; u++)
        {
          const int c = c0 + u * 32 * KS;
          if (c >= nchunk)
            break;
#pragma unroll
          for (int t = 0; t < MAXT; t++)
            {
              if (t >= a.n_tok)
                break;
              if (WT == HONE_K_BF16 || WT == HONE_K_F16)
                {
                  const float4 *xp = (const float4 *) (a.x + (size_t) t * a.cols + (size_t) c * 8);
                  float4 x0 = xp[0], x1 = xp[1];
                  if (NORM == 2)
                    {
                      ssq[t] += x0.x * x0.x + x0.y * x0.y + x0.z * x0.z + x0.w * x0.w
                                + x1.x * x1.x + x1.y * x1.y + x1.z * x1.z + x1.w * x1.w;
                      const float4 *gp = (const float4 *) (a.norm_g + (size_t) c * 8);
                      const float4 g0 = gp[0], g1 = gp[1];
                      x0.x *= g0.x; x0.y *= g0.y; x0.z *= g0.z; x0.w *= g0.w;
                      x1.x *= g1.x; x1.y *= g1.y; x1.z *= g1.z; x1.w *= g1.w;
                    }
                  if (NORM == 1)
                    {
                      const float4 *gp = (const float4 *) (a.norm_g + (size_t) c * 8);
                      const float4 g0 = gp[0], g1 = gp[1];
                      const float ns = nscale[t];
                      x0.x *= g0.x * ns; x0.y *= g0.y * ns; x0.z *= g0.z * ns; x0.w *= g0.w * ns;
                      x1.x *= g1.x * ns; x1.y *= g1.y * ns; x1.z *= g1.z * ns; x1.w *= g1.w * ns;
                    }
#pragma unroll
                  for (int r = 0; r < R; r++)
                    acc[r][t] = dot_chunk_f<WT> (w[u][r], x0, x1, acc[r][t]);
                }
              else if (WT == HONE_K_Q8_0)
                {
                  const int4 xv = *(const int4 *) (a.xq + (size_t) t * a.cols + (size_t) c * 16);
                  const float2 xd = a.xds[(size_t) t * (a.cols >> 5) + (c >> 1)];
#pragma unroll
                  for (int r = 0; r < R; r++)
                    acc[r][t] = dot_chunk_q8 (w[u][r], sc[u][r], xv, xd.x, acc[r][t]);
                }
              else if (WT == HONE_K_Q4Z)
                {
                  /* tile order: piece p of the warp's 32 chunks = 512 contiguous bytes */
                  const uint4 *xp = (const uint4 *) (a.xh + (size_t) t * HONE_K_H16_ROW (a.cols)) + ((c >> 5) << 7)
                                    + (c & 31);
                  const uint4 xv[4] = { xp[0], xp[32], xp[64], xp[96] };
                  const float2 xd = a.xhd[(size_t) t * (a.cols >> 5) + c];
#pragma unroll
                  for (int r = 0; r < R; r++)
                    acc[r][t] = dot_chunk_w4 (w[u][r], sc[u][r], zp[WT == HONE_K_Q4Z ? u : 0][r], xv, xd, acc[r][t]);
                }
              else   /* Q4_0, Q4_1 */
                {
                  const int4 *xp = (const int4 *) (a.xq + (size_t) t * a.cols + (size_t) c * 32);
                  const int4 xa = xp[0], xb = xp[1];
                  const float2 xd = a.xds[(size_t) t * (a.cols >> 5) + c];
#pragma unroll
                  for (int r = 0; r < R; r++)
                    acc[r][t] = dot_chunk_q4<WT> (w[u][r], sc[u][r], xa, xb, xd, acc[r][t]);
                }
            }
        }
      c0 += 32 * U * KS;
      if (c0 >= nchunk)
        break;
      load (c0);
    }
  TRACE_MAIN ();
  if (a.late_trigger == TRIG_LATE)
    pdl_trigger ();
  if ((int) blockIdx.x >= a.pf_first)
    prefetch_slice (a.pf, (blockIdx.x - a.pf_first) * 8 + wib, (gridDim.x - a.pf_first) * 8, lane);

#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int t = 0; t < MAXT; t++)
      acc[r][t] = warp_sum (acc[r][t]);
  if (NORM == 2)
#pragma unroll
    for (int t = 0; t < MAXT; t++)
      ssq[t] = warp_sum (ssq[t]);
  if (KS > 1)
    {
      /* the K slices of a row group meet in shared memory */
      __shared__ float red[8][R][MAXT];
      __shared__ float red_ss[NORM == 2 ? 8 : 1][MAXT];
      if (lane == 0)
        {
#pragma unroll
          for (int r = 0; r < R; r++)
#pragma unroll
            for (int t = 0; t < MAXT; t++)
              red[wib][r][t] = acc[r][t];
          if (NORM == 2)
#pragma unroll
            for (int t = 0; t < MAXT; t++)
              red_ss[NORM == 2 ? wib : 0][t] = ssq[t];
        }
      __syncthreads ();
      if (ks != 0)
        {
          /* EQ producers: every thread reaches the cluster barrier */
          if (EQ && a.out_q)
            gemv_epiq_out<R, MAXT> (a, row0, lane, acc, false);
          return;
        }
#pragma unroll
      for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < MAXT; t++)
          {
            float v = 0.f;
#pragma unroll
            for (int k = 0; k < KS; k++)
              v += red[wib + k][r][t];
            acc[r][t] = v;
          }
      if (NORM == 2)
#pragma unroll
        for (int t = 0; t < MAXT; t++)
          {
            float v = 0.f;
#pragma unroll
            for (int k = 0; k < KS; k++)
              v += red_ss[NORM == 2 ? wib + k : 0][t];
            ssq[t] = v;
          }
    }
  if (NORM == 2)
#pragma unroll
    for (int t = 0; t < MAXT; t++)
      {
        const float sc = rsqrtf (ssq[t] / (float) a.cols + a.eps);
#pragma unroll
        for (int r = 0; r < R; r++)
          acc[r][t] *= sc;
      }
  if (EQ && a.in_ssq)
    {
      /* loaded before the main loop, summed only now: no stall on them */
      float in_ss = 0.f;
#pragma unroll
      for (int j = 0; j < NP; j++)
        in_ss += in_part[j];
      for (int i = lane + 32 * NP; i < (a.cols >> 5); i += 32)
        in_ss += a.in_ssq[i];
      const float sc = rsqrtf (warp_sum (in_ss) / (float) a.cols + a.eps);
#pragma unroll
      for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < MAXT; t++)
          acc[r][t] *= sc;
    }
  if (EQ && a.out_q)
    gemv_epiq_out<R, MAXT> (a, row0, lane, acc, true);
  else
    epi_rows<R, MAXT> (a, row0, lane, acc);
}

/* RMSNorm of BF16/F16 GEMVs applied at the end (NORM 2) or by a prologue
 * (NORM 1); set by hone_k_gemv_set_norm_end or HONE_GEMV_NORM_END=0/1. */
static int norm_at_end = 1;

void
hone_k_gemv_set_norm_end (int on)
{
  norm_at_end = on ? 1 : 0;
}

/* Blocks resident at once on the whole chip (the last wave's size), cached per kernel. */
static int
resident_blocks (const void *kernel, size_t smem)
{
  static struct { const void *k; size_t smem; int n; } cache[128];
  static int n_cache;
  for (int i = 0; i < n_cache; i++)
    if (cache[i].k == kernel && cache[i].smem == smem)
      return cache[i].n;
  int per = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor (&per, kernel, 256, smem) != cudaSuccess || per < 1)
    per = 1;
  const int n = per * hone_k_sm_count ();
  if (n_cache < 128)
    {
      cache[n_cache].k = kernel;
      cache[n_cache].smem = smem;
      cache[n_cache].n = n;
      n_cache++;
    }
  return n;
}

/* Whether launch shapes HONE_K_GEMV_CONFIGS.. exist for this GEMV. */
template <int WT>
static bool
extra_shape_ok (const GemvArgs &a)
{
  constexpr bool F = (WT == HONE_K_BF16 || WT == HONE_K_F16);
  return a.n_tok == 1 && (!F || !a.norm_g || norm_at_end);
}

/* ONE: only the one-token kernel exists in this shape (quantized weights'
 * extra shapes, and W4A16 which this kernel runs at one token only). */
template <int WT, int R, int U, int KS, bool ONE = false>
static int
launch_t (GemvArgs a, cudaStream_t stream)
{
  const int groups = (a.rows + R - 1) / R;
  const dim3 grid ((groups + (8 / KS) - 1) / (8 / KS)), block (256);
  constexpr bool F = (WT == HONE_K_BF16 || WT == HONE_K_F16);
  void (*k) (GemvArgs);
  if constexpr (WT == HONE_K_Q4Z || ONE)
    {
      if (a.n_tok != 1 || (F && a.norm_g && !norm_at_end))
        return (int) cudaErrorInvalidValue;
      if constexpr (F)
        k = a.norm_g ? gemv_kernel<WT, R, U, KS, 1, 2> : gemv_kernel<WT, R, U, KS, 1, 0>;
      else
        k = gemv_kernel<WT, R, U, KS, 1, 0>;
    }
  else if (a.norm_g && F && norm_at_end)
    k = a.n_tok == 1 ? gemv_kernel<WT, R, U, KS, 1, F ? 2 : 0> : gemv_kernel<WT, R, U, KS, HONE_K_MAX_DECODE, F ? 2 : 0>;
  else if (a.norm_g && F)
    k = a.n_tok == 1 ? gemv_kernel<WT, R, U, KS, 1, F> : gemv_kernel<WT, R, U, KS, HONE_K_MAX_DECODE, F>;
  else
    k = a.n_tok == 1 ? gemv_kernel<WT, R, U, KS, 1, 0> : gemv_kernel<WT, R, U, KS, HONE_K_MAX_DECODE, 0>;
  const size_t smem = 0;
  a.pf_first = INT_MAX;
  unsigned long long pf_bytes = 0;
  for (int r = 0; r < HONE_K_PF_RANGES; r++)
    pf_bytes += a.pf.n[r];
  if (pf_bytes)
    {
      const int w = resident_blocks ((const void *) k, smem);
      a.pf_first = (int) grid.x > w ? (int) grid.x - w : 0;
    }
  HONE_K_TRACE_SET (a, HONE_K_TR_GEMV, grid, a.rows, a.cols);
  /* The one-token dp4a GEMVs ask for all of the shared memory (they use a few
   * bytes of it, and their int8 input is small in L1): decode attention's
   * carveout, so that no SM reconfigures between them. Bounded steps at 128
   * keys, same binary: Q4_0 1.660 -> 1.616 ms, Q4_1 1.741 -> 1.702, Q8_0
   * 2.529 -> 2.445 (RESULTS-cuda.md "Decode, session 19"). BF16/F16 and
   * W4A16 re-read their wider inputs through L1: all shared measured 13 % and
   * 4.6 % slower there, so they keep the driver's choice. */
  constexpr bool DP4A = WT == HONE_K_Q8_0 || WT == HONE_K_Q4_0 || WT == HONE_K_Q4_1;
  const int role = a.role ? a.role : (int) HONE_K_PDL_OTHER;
  hone_k_carveout_apply ((const void *) k, role, DP4A && a.n_tok == 1 ? (int) cudaSharedmemCarveoutMaxShared : -1);
  return hone_k_launch_role (role, k, grid, block, smem, stream, a);
}

/* Launch shapes (rows a warp R, chunk loads in flight a lane U, warps
 * splitting a row KS). A warp's serial memory round trips (chunks per lane /
 * U) cost more than anything else in a matrix of a few tens of MB, so small
 * matrices split rows over warps and keep many loads in flight; big ones
 * share activation loads over 4 rows. Picked from the sweep in
 * tests/bench/RESULTS-cuda.md; hone_k_gemv_set_config() forces one. */
static int forced_config = -1;
/* Which GEMVs issue their first weight loads before the PDL wait: a mask of
 * GEMV roles (gemv_role); -1: read HONE_GEMV_EARLY — 0 none, 1 or unset all,
 * or a comma list of qkv, o, gu, down, head. */
enum { ROLE_QKV = HONE_K_PDL_QKV, ROLE_O = HONE_K_PDL_O, ROLE_GU = HONE_K_PDL_GU, ROLE_DOWN = HONE_K_PDL_DOWN,
       ROLE_HEAD = HONE_K_PDL_HEAD, ROLE_ALL = 31 };
static int early_loads = -1;
static int late_trigger = -1;  /* -1: read HONE_PDL_TRIGGER (entry, late, wait, qkv, other; unset: auto) */
static int epi_pf = -1;        /* -1: read HONE_GEMV_EPI_PF (1: on; unset or 0: off, the default) */
static int pick_rule = -1;     /* -1: read HONE_GEMV_PICK ("3" / "9": session 2's call-3 / call-9 choice; default the session-9 one) */

extern "C" void
hone_k_gemv_set_early (int on)
{
  early_loads = on ? ROLE_ALL : 0;
}

/* A decode GEMV's place in the layer, from its epilogue and shape (the
 * Llama-style layer of decode_step: o is square, down is wider than tall). */
static int
gemv_role (const HoneKMatrix *w, int epi)
{
  if (epi == HONE_K_EPI_ROPE_KV)
    return ROLE_QKV;
  if (epi == HONE_K_EPI_SWIGLU)
    return ROLE_GU;
  if (epi == HONE_K_EPI_ADD)
    return w->cols > w->rows ? ROLE_DOWN : ROLE_O;
  return w->rows >= 32768 ? ROLE_HEAD : ROLE_QKV;   /* STORE: the lm_head, or q|k|v before a separate RoPE */
}

/* The role named by the @len characters at @p (qkv, o, gu, down, head), or 0. */
static int
role_of_name (const char *p, size_t len)
{
  static const struct { const char *name; int role; } names[] = {
    { "qkv", ROLE_QKV }, { "o", ROLE_O }, { "gu", ROLE_GU }, { "down", ROLE_DOWN }, { "head", ROLE_HEAD } };
  for (const auto &n : names)
    if (strlen (n.name) == len && !strncmp (p, n.name, len))
      return n.role;
  return 0;
}

/* The HONE_K_PDL_* bits of a comma list of role names: the GEMV roles of
 * role_of_name, attn and other. */
static int
roles_of_list (const char *list)
{
  int m = 0;
  for (const char *p = list; *p;)
    {
      const size_t len = strcspn (p, ",");
      m |= role_of_name (p, len);
      if (len == 4 && !strncmp (p, "attn", 4))
        m |= HONE_K_PDL_ATTN;
      if (len == 5 && !strncmp (p, "other", 5))
        m |= HONE_K_PDL_OTHER;
      p += len;
      if (*p)
        p++;
    }
  return m;
}

extern "C" int
hone_k_roles_from_env (const char *name, int dflt)
{
  const char *env = getenv (name);
  return env && *env ? roles_of_list (env) : dflt;
}

static int
early_from_env (void)
{
  const char *env = getenv ("HONE_GEMV_EARLY");
  if (!env || !*env || !strcmp (env, "1"))
    return ROLE_ALL;
  return roles_of_list (env) & ROLE_ALL;
}

extern "C" void
hone_k_gemv_set_config (int config)
{
  forced_config = config;
}

extern "C" void
hone_k_gemv_set_pick (int rule)
{
  pick_rule = rule == 3 || rule == 9 || rule == 10 ? rule : -1;
}

/* The launch shapes: rows a warp R, chunk loads in flight a lane U, warps a
 * row KS. 0..HONE_K_GEMV_CONFIGS-1 for every GEMV; the rest one token only
 * (extra_shape_ok): W4A16's 16-bit input is 4x the weights' bytes, BF16/F16's
 * f32 input 2x, so more rows a warp share each activation load. Swept by hone-w4-check --rs-sweep
 * and hone-cuda-check --gemv-sweep, forced by hone_k_gemv_set_config. */
struct GemvShape { int r, u, ks; };
static constexpr GemvShape gemv_shapes[HONE_K_GEMV_CONFIGS_Q1] = {
  { 4, 2, 1 }, { 2, 4, 2 }, { 2, 2, 1 }, { 2, 4, 4 }, { 2, 2, 4 }, { 2, 4, 8 }, { 2, 8, 2 }, { 4, 2, 2 },
  { 2, 2, 8 }, { 2, 8, 4 }, { 4, 1, 2 }, { 4, 2, 4 }, { 8, 1, 2 }, { 8, 1, 4 }, { 4, 1, 4 }, { 8, 1, 1 },
  { 4, 1, 1 }, { 8, 1, 8 } };

/* Launch with shape @cfg (>= I), searched from I up; the shapes from
 * HONE_K_GEMV_CONFIGS on exist only where extra_shape_ok (else 3). */
template <int WT, int I = 0>
static int
launch_cfg (int cfg, const GemvArgs &a, cudaStream_t stream)
{
  if constexpr (I < HONE_K_GEMV_CONFIGS_Q1)
    {
      constexpr GemvShape sh = gemv_shapes[I];
      if (cfg != I)
        return launch_cfg<WT, I + 1> (cfg, a, stream);
      if constexpr (I < HONE_K_GEMV_CONFIGS)
        return launch_t<WT, sh.r, sh.u, sh.ks> (a, stream);
      else if (extra_shape_ok<WT> (a))
        return launch_t<WT, sh.r, sh.u, sh.ks, true> (a, stream);
    }
  return launch_t<WT, 2, 4, 4> (a, stream);
}

/* Rows a warp, chunk loads in flight a lane and warps a row of launch shape
 * @cfg, or -1s when there is no such shape. */
extern "C" void
hone_k_gemv_config_shape (int cfg, int *rows, int *loads, int *ksplit)
{
  const bool ok = cfg >= 0 && cfg < HONE_K_GEMV_CONFIGS_Q1;
  *rows = ok ? gemv_shapes[cfg].r : -1;
  *loads = ok ? gemv_shapes[cfg].u : -1;
  *ksplit = ok ? gemv_shapes[cfg].ks : -1;
}

/* HONE_GEMV_SHAPE=<role>=<shape>[,…] (roles as HONE_GEMV_EARLY's: qkv, o,
 * gu, down, head): a launch shape for one-token GEMVs of that role, for A/B
 * runs of the whole step (hone_k_gemv_set_config forces one for all). */
static int role_shape[32];
static int role_shape_read;

static int
shape_of_role (int role)
{
  if (!role_shape_read)
    {
      role_shape_read = 1;
      for (int i = 0; i < 32; i++)
        role_shape[i] = -1;
      const char *env = getenv ("HONE_GEMV_SHAPE");
      for (const char *p = env ? env : ""; *p;)
        {
          const size_t len = strcspn (p, ",");
          const char *eq = (const char *) memchr (p, '=', len);
          const int role = eq ? role_of_name (p, (size_t) (eq - p)) : 0;
          if (role)
            role_shape[role] = atoi (eq + 1);
          p += len;
          if (*p)
            p++;
        }
    }
  return role_shape[role];
}

/* The launch shape of a GEMV: 0..HONE_K_GEMV_CONFIGS-1, or for one token
 * (extra_shape_ok) up to HONE_K_GEMV_CONFIGS_Q1-1. */
template <int WT>
static int
pick_config (const GemvArgs &a)
{
  if (a.n_tok == 1 && a.role)
    {
      const int s = shape_of_role (a.role);
      if (s >= 0 && s < HONE_K_GEMV_CONFIGS_Q1 && (s < HONE_K_GEMV_CONFIGS || extra_shape_ok<WT> (a)))
        return s;
    }
  if (forced_config >= 0
      && (forced_config < HONE_K_GEMV_CONFIGS || (extra_shape_ok<WT> (a) && forced_config < HONE_K_GEMV_CONFIGS_Q1)))
    return forced_config;
  /* Sweep of 8 shapes at the Llama-3-8B matrices (RESULTS-cuda.md, call 3):
   * quantized weights do best or within noise of best with 2 rows, 4 loads,
   * 2 K slices everywhere; BF16 wants 4 K slices on the big matrices and no
   * K split (2 loads) on qkv-sized ones. */
  if (pick_rule < 0)
    {
      const char *env = getenv ("HONE_GEMV_PICK");
      pick_rule = env && strcmp (env, "3") == 0 ? 3 : env && strcmp (env, "9") == 0 ? 9 : 10;
    }
  if (WT == HONE_K_BF16 || WT == HONE_K_F16)
    {
      /* session-9 sweep, one token (the extra shapes need the norm at the end):
       * the f32 input is 2x the weights' bytes, so 8 rows a warp on o/down
       * (R8 U1 KS4: 11.1 -> 10.1 / 30.0 -> 28.5 us), R4 U1 KS2 on gate|up
       * (54.7 -> 53.5); the lm_head keeps 3. Session 17, whole step under
       * session 16's codegen (RESULTS-cuda.md "Decode, session 17"): q|k|v
       * on R4 U1 KS2 (was R2 U2 KS8), o/down on R8 U1 KS8 (was KS4).
       * Session 18, with PDL on q|k|v, gate|up and down: o on R4 U1 KS4 and
       * the lm_head on R4 U1 KS2 (was 3), step -0.2 % at every context. */
      if (pick_rule == 10 && extra_shape_ok<WT> (a))
        {
          if (a.rows >= 16384)
            return 10;
          if (a.cols < 8192 && a.rows >= 5000)
            return 10;
          return a.role == ROLE_O ? 14 : 17;
        }
      if (a.rows >= 16384)
        return 3;
      if (a.rows >= 5000)
        return 2;
      return 1;
    }
  /* Session-9 sweep (tests/bench/RESULTS-cuda.md "Decode, session 9"), one
   * token, 18 shapes: with the extra shapes, 4 rows a warp win almost
   * everywhere — an activation load serves 4 rows — at 1 chunk load a lane
   * (dp4a types: R4 U1, 2 K slices on gate|up/lm_head, 4 elsewhere but q|k|v)
   * or 2 (W4A16, whose 16-bit input is 4x its weights' bytes: R4 U2 KS2 on o
   * and down); q|k|v-sized matrices R4 U2 KS2 (dp4a) / R2 U2 KS1 (W4A16), W4A16
   * gate|up keeps R2 U2 KS1. */
  if (pick_rule == 10 && a.n_tok == 1)
    {
      /* W4A16 with the integer dot (session 10): q|k|v keeps R2 U2 KS1 — R4 U1 KS2 is faster alone
       * (5.45 vs 5.84 us with a STORE epilogue) but made the step 0.1 ms slower (2.104 vs 2.004 ms) */
      if (WT == HONE_K_Q4Z)
        return a.rows >= 5000 && a.cols < 8192 ? 2 : 7;
      if (a.cols >= 8192)
        return 14;
      if (a.rows >= 16384)
        return WT == HONE_K_Q8_0 ? 14 : 10;
      return a.rows >= 5000 ? 7 : 14;
    }
  /* Call-9 sweep (RESULTS-cuda.md, engineer cuda2), one token: for every
   * quantized type the long rows of down (14336 columns) want 4 K slices
   * (Q8_0 20.2 → 17.5 µs, Q4_0 12.9 → 11.4), and Q4's big matrices (gate|up,
   * lm_head) 2 rows × 2 loads without a K split (Q4_0 gate|up 20.1 → 17.8,
   * lm_head 79.5 → 68.8). Several tokens keep the call-3 choice (not swept). */
  if (pick_rule == 9 && a.n_tok == 1)
    {
      if (a.cols >= 8192)
        return 3;
      if ((WT == HONE_K_Q4_0 || WT == HONE_K_Q4_1 || WT == HONE_K_Q4Z) && a.rows >= 16384)
        return 2;
    }
  return 1;
}

template <int WT>
static int
launch_w (const GemvArgs &a, cudaStream_t stream)
{
  return launch_cfg<WT> (pick_config<WT> (a), a, stream);
}

extern "C" int
hone_k_gemv_ex (const HoneKGemvOp *op, cudaStream_t stream)
{
  return hone_k_gemv_pf (op, NULL, stream);
}

size_t
hone_k_prefetch_add_matrix (HoneKPrefetch *pf, const HoneKMatrix *w, size_t bytes)
{
  size_t qb = 0, sb = 0;
  if (!w || !w->q || w->rows < 1 || !bytes)
    return 0;
  hone_k_matrix_bytes_g (w->type, w->rows, w->cols, w->group, &qb, &sb);
  size_t rows = bytes / ((qb + sb) / (size_t) w->rows);
  if (rows > (size_t) w->rows)
    rows = (size_t) w->rows;
  /* the rows' quants, then their scales; whole 128-byte lines inside each allocation */
  const struct { const void *p; size_t n; } parts[2] = {
    { w->q, (qb / (size_t) w->rows * rows) & ~(size_t) 127 },
    { w->s, w->s ? (sb / (size_t) w->rows * rows) & ~(size_t) 127 : 0 },
  };
  size_t added = 0;
  for (int i = 0; i < 2; i++)
    {
      if (!parts[i].n || ((uintptr_t) parts[i].p & 15))   /* the bulk prefetch wants 16-byte alignment */
        continue;
      int r = 0;
      while (r < HONE_K_PF_RANGES && pf->n[r])
        r++;
      if (r == HONE_K_PF_RANGES)
        break;
      pf->p[r] = (const char *) parts[i].p;
      pf->n[r] = parts[i].n;
      added += parts[i].n;
    }
  return added;
}

/* hone_k_gemv_tiny_tier: the step being enqueued is bounded to the tiny
 * attention kernel's tier; HONE_TINY_QKV_TRIGGER=0 ignores it (A/B runs). */
static int tiny_tier, tiny_qkv_trigger = -1, tiny_f16_entry = -1;

extern "C" void
hone_k_gemv_tiny_tier (int on)
{
  tiny_tier = on;
}

/* The trigger placement (TRIG_ENTRY / LATE / WAIT) of a GEMV of weight type
 * @type and epilogue @epi. */
static int
trigger_of (int type, int epi)
{
  if (late_trigger < 0)
    {
      const char *env = getenv ("HONE_PDL_TRIGGER");
      late_trigger = !env || !*env            ? TRIG_AUTO
                     : !strcmp (env, "entry") ? TRIG_ENTRY
                     : !strcmp (env, "wait")  ? TRIG_WAIT
                     : !strcmp (env, "qkv")   ? TRIG_QKV
                     : !strcmp (env, "other") ? TRIG_OTHER
                                              : TRIG_LATE;
    }
  int mode = late_trigger;
  /* auto (session 12, RESULTS-cuda.md): Q4_0/Q4_1 "other" — their o, gate|up, down and lm_head trigger right
   * after the wait (same-binary A/B: Q4_0 step -1.9 % bounded, -7.9 % unbounded at 128 keys, -4.2 % at 4k;
   * Q4_1 -2.8 / -9.0 / -5.0 %); every other type late (AWQ +4..+8 %, bounded Q8_0 +4 % with an earlier trigger;
   * BF16/F16 steps run without PDL) */
  if (tiny_qkv_trigger < 0)
    {
      const char *env = getenv ("HONE_TINY_QKV_TRIGGER");
      tiny_qkv_trigger = !env || !*env || env[0] != '0';
    }
  /* the tiny attention kernel's tier, quantized and W4A16 weights: q|k|v lets
   * attention launch right after its wait (attention's blocks take SMs as
   * q|k|v drains and issue their K/V copies sooner). Same binary, 8B at 128
   * keys: Q4_0 1.549 -> 1.542 ms, AWQ 1.830 -> 1.801, Q8_0 2.347 -> 2.335,
   * Q4_1 unchanged; BF16 unchanged with it, and at the other tiers the
   * earlier triggers were slower (RESULTS-cuda.md, "Decode, session 21") */
  if (mode == TRIG_AUTO && tiny_tier && tiny_qkv_trigger && epi == HONE_K_EPI_ROPE_KV && type != HONE_K_BF16
      && type != HONE_K_F16)
    return TRIG_WAIT;
  /* the same tier, BF16/F16 weights (every launch of the layer on PDL there):
   * the GEMVs trigger at entry (HONE_TINY_F16_TRIGGER=0: late, as at the
   * other tiers). Same binary, 8B at 128 keys: 3.773 -> 3.746 ms with every
   * tier at entry (session 22, call 2; the 2k and unbounded tiers +0.8 %
   * there), 3.808 -> 3.786 with this rule (call 3) */
  if (tiny_f16_entry < 0)
    {
      const char *env = getenv ("HONE_TINY_F16_TRIGGER");
      tiny_f16_entry = !env || !*env || env[0] != '0';
    }
  if (mode == TRIG_AUTO && tiny_tier && tiny_f16_entry && (type == HONE_K_BF16 || type == HONE_K_F16))
    return TRIG_ENTRY;
  if (mode == TRIG_AUTO)
    mode = type == HONE_K_Q4_0 || type == HONE_K_Q4_1 ? TRIG_OTHER : TRIG_LATE;
  if (mode == TRIG_QKV || mode == TRIG_OTHER)
    return (epi == HONE_K_EPI_ROPE_KV) == (mode == TRIG_QKV) ? TRIG_WAIT : TRIG_LATE;
  return mode;
}

/* GemvArgs of op (the register-streamed kernel's fields; EQ ones NULL);
 * nonzero for an op the epilogue cannot take. */
static int
args_from_op (const HoneKGemvOp *op, const HoneKPrefetch *pf, GemvArgs &a)
{
  const HoneKMatrix *w = op->w;
  memset (&a, 0, sizeof a);
  if (pf)
    a.pf = *pf;
  else
    memset (&a.pf, 0, sizeof a.pf);
  a.q = (const int4 *) w->q;
  a.s = w->s;
  a.rows = w->rows;
  a.cols = w->cols;
  a.x = op->x;
  a.xq = op->xq ? op->xq->q : NULL;
  a.xds = op->xq ? op->xq->ds : NULL;
  a.n_tok = op->n_tok;
  a.norm_g = op->norm_g;
  a.eps = op->eps;
  epi_args_from_op (a, op);
  if (early_loads < 0)
    {
      early_loads = early_from_env ();
      const char *env = getenv ("HONE_GEMV_NORM_END");
      if (env && *env)
        norm_at_end = env[0] != '0';
    }
  a.role = gemv_role (w, a.epi);
  a.early = (early_loads & a.role) != 0;
  a.late_trigger = trigger_of (w->type, a.epi);
  if (epi_pf < 0)
    {
      const char *env = getenv ("HONE_GEMV_EPI_PF");
      epi_pf = env && env[0] == '1';
    }
  a.epi_pf = epi_pf;
  if ((a.epi == HONE_K_EPI_SWIGLU || a.epi == HONE_K_EPI_ROPE_KV) && (w->rows & 1))
    return (int) cudaErrorInvalidValue;
  if (a.epi == HONE_K_EPI_ROPE_KV
      && (a.hd <= 0 || (a.hd & 1) || w->rows != (a.nq + 2 * a.nkv) * a.hd || !a.pos || !a.inv_freq
          || !a.k_pool || !a.v_pool || !a.block_table))
    return (int) cudaErrorInvalidValue;
  return 0;
}

extern "C" int
hone_k_gemv_pf (const HoneKGemvOp *op, const HoneKPrefetch *pf, cudaStream_t stream)
{
  const HoneKMatrix *w = op->w;
  GemvArgs a;
  if (w->type == HONE_K_Q4Z)   /* W4A16 (AWQ): hone-k-gemv-w4.cu */
    return hone_k_q4z_gemv (op, pf, stream);
  if (w->type == HONE_K_Q4_K || w->type == HONE_K_Q6_K) return hone_k_kquant_gemv (op, stream);   /* hone-k-gemv-kquant.cu */
  if (op->n_tok < 1 || op->n_tok > HONE_K_MAX_DECODE)
    return (int) cudaErrorInvalidValue;
  const int rc = args_from_op (op, pf, a);
  if (rc)
    return rc;
  /* one token on sm_90: the staged kernel (hone-k-gemv-staged.cu), which
   * also takes a quantized GEMV's f32 input and quantizes it itself */
  if (hone_k_gemv_staged_takes (op))
    return hone_k_gemv_staged (op, stream);
  const bool f = (w->type == HONE_K_BF16 || w->type == HONE_K_F16);
  if (a.norm_g && (!f || (w->cols & 3)))
    return (int) cudaErrorInvalidValue;
  switch (w->type)
    {
    case HONE_K_BF16:
      if (w->cols % 8 || !a.x) return (int) cudaErrorInvalidValue;
      a.nchunk = w->cols / 8;
      return launch_w<HONE_K_BF16> (a, stream);
    case HONE_K_F16:
      if (w->cols % 8 || !a.x) return (int) cudaErrorInvalidValue;
      a.nchunk = w->cols / 8;
      return launch_w<HONE_K_F16> (a, stream);
    case HONE_K_Q8_0:
      if (w->cols % 32 || !a.xq) return (int) cudaErrorInvalidValue;
      a.nchunk = w->cols / 16;
      return launch_w<HONE_K_Q8_0> (a, stream);
    case HONE_K_Q4_0:
      if (w->cols % 32 || !a.xq) return (int) cudaErrorInvalidValue;
      a.nchunk = w->cols / 32;
      return launch_w<HONE_K_Q4_0> (a, stream);
    case HONE_K_Q4_1:
      if (w->cols % 32 || !a.xq) return (int) cudaErrorInvalidValue;
      a.nchunk = w->cols / 32;
      return launch_w<HONE_K_Q4_1> (a, stream);
    default:
      return (int) cudaErrorInvalidValue;
    }
}

/* ---- quantization in the epilogue (HoneKEpiQ) ------------------------------ */

bool
hone_k_gemv_epiq_takes (const HoneKGemvOp *op, bool producer)
{
  const HoneKMatrix *w = op->w;
  if (!w || op->n_tok != 1 || op->norm_g || w->rows < 1 || w->cols < 32 || (w->cols & 31)
      || (w->type != HONE_K_Q8_0 && w->type != HONE_K_Q4_0 && w->type != HONE_K_Q4_1) || !hone_k_stage_supported ())
    return false;
  if (!producer)
    return true;
  if (op->epilogue == HONE_K_EPI_SWIGLU)
    return (w->rows & 63) == 0;
  return (op->epilogue == HONE_K_EPI_ADD || op->epilogue == HONE_K_EPI_STORE) && (w->rows & 31) == 0 && op->y
         && (op->epilogue != HONE_K_EPI_ADD || op->res);
}

/* A producer's launch is a grid of clusters of `cluster` blocks (0: no
 * cluster attribute, a consumer only). */
template <int WT, int R, int U, int KS>
static int
launch_eq_t (GemvArgs a, int cluster, cudaStream_t stream)
{
  const int groups = (a.rows + R - 1) / R;
  const dim3 grid ((groups + (8 / KS) - 1) / (8 / KS));
  void (*k) (GemvArgs) = gemv_kernel<WT, R, U, KS, 1, 0, 1>;
  a.pf_first = INT_MAX;
  unsigned long long pf_bytes = 0;
  for (int r = 0; r < HONE_K_PF_RANGES; r++)
    pf_bytes += a.pf.n[r];
  if (pf_bytes)
    {
      const int w = resident_blocks ((const void *) k, 0);
      a.pf_first = (int) grid.x > w ? (int) grid.x - w : 0;
    }
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[2];
  int n = 0;
  cfg.gridDim = grid;
  cfg.blockDim = dim3 (256);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  if (hone_k_pdl_for (a.role ? a.role : (int) HONE_K_PDL_OTHER))
    {
      attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[n].val.programmaticStreamSerializationAllowed = 1;
      n++;
    }
  if (cluster > 0)
    {
      if (grid.x % (unsigned) cluster)
        return (int) cudaErrorInvalidValue;
      attr[n].id = cudaLaunchAttributeClusterDimension;
      attr[n].val.clusterDim.x = (unsigned) cluster;
      attr[n].val.clusterDim.y = 1;
      attr[n].val.clusterDim.z = 1;
      n++;
    }
  cfg.attrs = attr;
  cfg.numAttrs = (unsigned) n;
  hone_k_carveout_apply ((const void *) k, a.role ? a.role : (int) HONE_K_PDL_OTHER, -1);
  return (int) cudaLaunchKernelEx (&cfg, k, a);
}

/* Launch shape of EpiQ producers: -1 the GEMV's own (clusters of up to 8
 * blocks), else forced (0: 32 rows a block, no cluster for ADD);
 * HONE_EPIQ_PCFG. */
static int epiq_pcfg = -2;

void
hone_k_gemv_epiq_set_producer_config (int cfg)
{
  epiq_pcfg = cfg < HONE_K_GEMV_CONFIGS ? cfg : -1;
}

template <int WT>
static int
launch_eq (const GemvArgs &a, cudaStream_t stream)
{
  if (epiq_pcfg == -2)
    {
      const char *env = getenv ("HONE_EPIQ_PCFG");
      epiq_pcfg = env && *env ? atoi (env) : -1;
      if (epiq_pcfg >= HONE_K_GEMV_CONFIGS)
        epiq_pcfg = -1;
    }
  int cfg = a.out_q && epiq_pcfg >= 0 ? epiq_pcfg : pick_config<WT> (a);
  if (cfg >= HONE_K_GEMV_CONFIGS)   /* a one-token extra shape forced: not built with the epilogue */
    cfg = 1;
  static const int rows_a_block[HONE_K_GEMV_CONFIGS] = { 32, 8, 16, 4 };   /* R · 8/KS of launch_cfg's shapes */
  const int per_cluster = a.epi == HONE_K_EPI_SWIGLU ? 64 : 32;   /* rows behind 32 outputs */
  if (a.out_q && per_cluster / rows_a_block[cfg] > 8)   /* the portable cluster size */
    cfg = 1;
  const int cluster = a.out_q ? per_cluster / rows_a_block[cfg] : 0;
  switch (cfg)
    {
    case 0: return launch_eq_t<WT, 4, 2, 1> (a, cluster, stream);
    case 1: return launch_eq_t<WT, 2, 4, 2> (a, cluster, stream);
    case 2: return launch_eq_t<WT, 2, 2, 1> (a, cluster, stream);
    default: return launch_eq_t<WT, 2, 4, 4> (a, cluster, stream);
    }
}

static unsigned epiq_runs;

unsigned
hone_k_gemv_epiq_runs (void)
{
  return epiq_runs;
}

int
hone_k_gemv_epiq (const HoneKGemvOp *op, const HoneKEpiQ *eq, const HoneKPrefetch *pf, cudaStream_t stream)
{
  const bool producer = eq && eq->out.q;
  if (!op->xq || !op->xq->q || !op->xq->ds || !hone_k_gemv_epiq_takes (op, producer)
      || (producer && !eq->out.ds))
    return (int) cudaErrorInvalidValue;
  GemvArgs a;
  const int rc = args_from_op (op, pf, a);
  if (rc)
    return rc;
  if (eq)
    {
      a.in_ssq = eq->in_ssq;
      a.out_q = eq->out.q;
      a.out_ds = eq->out.ds;
      a.out_ssq = eq->out_ssq;
      a.out_g = eq->out_g;
    }
  epiq_runs++;
  switch (op->w->type)
    {
    case HONE_K_Q8_0:
      a.nchunk = op->w->cols / 16;
      return launch_eq<HONE_K_Q8_0> (a, stream);
    case HONE_K_Q4_0:
      a.nchunk = op->w->cols / 32;
      return launch_eq<HONE_K_Q4_0> (a, stream);
    default:
      a.nchunk = op->w->cols / 32;
      return launch_eq<HONE_K_Q4_1> (a, stream);
    }
}

extern "C" int
hone_k_gemv (const HoneKMatrix *w, const float *x, const HoneKActQ8 *xq, int n_tok,
             const float *bias, const float *res, float *y, int epilogue, cudaStream_t stream)
{
  HoneKGemvOp op;
  memset (&op, 0, sizeof op);
  op.w = w;
  op.x = x;
  op.xq = xq;
  op.n_tok = n_tok;
  op.bias = bias;
  op.res = res;
  op.y = y;
  op.epilogue = epilogue;
  if (epilogue == HONE_K_EPI_ROPE_KV)
    return (int) cudaErrorInvalidValue;
  return hone_k_gemv_ex (&op, stream);
}

/* PDL: -1 automatic (per step, see hone_k_pdl_hint), else forced. */
static int pdl_state = -2;   /* -2: environment not read yet */
static int pdl_hint = 1;
static int pdl_hint_roles = HONE_K_PDL_ALL;   /* automatic mode: the launches that take it */

extern "C" void
hone_k_set_pdl (int on)
{
  pdl_state = on < 0 ? -1 : (on ? 1 : 0);
}

void
hone_k_pdl_hint (int on, int roles)
{
  pdl_hint = on;
  pdl_hint_roles = roles;
}

int
hone_k_pdl_enabled (void)
{
  static int major = -1;
  if (major < 0)
    {
      int dev = 0;
      cudaGetDevice (&dev);
      cudaDeviceGetAttribute (&major, cudaDevAttrComputeCapabilityMajor, dev);
    }
  if (pdl_state == -2)
    {
      const char *env = getenv ("HONE_PDL");
      pdl_state = env && *env ? (env[0] == '1' ? 1 : 0) : -1;
    }
  if (major < 9)
    return 0;
  return pdl_state >= 0 ? pdl_state : pdl_hint;
}

void
hone_k_carveout_apply (const void *kernel, int role, int preferred)
{
  static int mode = -3;   /* -3: not read yet; -2: the driver's everywhere; -1: the kernels' own; 0..100 forced */
  static int roles = HONE_K_PDL_ALL;
  static struct { const void *kernel; int dev; } done[512];   /* the attribute is set once a kernel and device */
  static int n_done;
  if (mode == -3)
    {
      const char *e = getenv ("HONE_CARVEOUT");
      mode = !e || !*e ? -1 : !strcmp (e, "driver") ? -2 : atoi (e) < 0 ? -1 : atoi (e) > 100 ? 100 : atoi (e);
      const char *r = getenv ("HONE_CARVEOUT_ROLES");
      if (r && *r)
        roles = roles_of_list (r);
    }
  const int pct = mode >= 0 ? ((roles & role) ? mode : -1) : mode == -1 ? preferred : -1;
  if (pct < 0)   /* the driver's choice: nothing to set (most launches) */
    return;
  int dev = 0;
  cudaGetDevice (&dev);
  for (int i = 0; i < n_done; i++)
    if (done[i].kernel == kernel && done[i].dev == dev)
      return;
  if (cudaFuncSetAttribute (kernel, cudaFuncAttributePreferredSharedMemoryCarveout, pct) != cudaSuccess)
    cudaGetLastError ();
  if (n_done < 512)
    done[n_done++] = { kernel, dev };
}

static int pdl_roles = -2;   /* -2: HONE_PDL_ROLES not read yet; -1: unset */

int
hone_k_pdl_for (int role)
{
  if (pdl_roles == -2)
    {
      const char *env = getenv ("HONE_PDL_ROLES");
      pdl_roles = env && *env ? roles_of_list (env) : -1;
    }
  if (!hone_k_pdl_enabled ())
    return 0;
  /* HONE_PDL_ROLES, else all when PDL is forced (HONE_PDL, hone_k_set_pdl), else the step's hint */
  const int m = pdl_roles >= 0 ? pdl_roles : pdl_state >= 0 ? (int) HONE_K_PDL_ALL : pdl_hint_roles;
  return (m & role) != 0;
}

/* W4A16 (Q4Z) one token on this file's register-streamed kernel, called by
 * hone_k_q4z_gemv (hone-k-gemv-w4.cu) once op->xh holds the packed input
 * (its RMSNorm, if any, already applied by hone_k_pack_h16). */
extern "C" int
hone_k_gemv_q4z_rs (const HoneKGemvOp *op, const HoneKPrefetch *pf, cudaStream_t stream)
{
  const HoneKMatrix *w = op->w;
  GemvArgs a;
  if (w->type != HONE_K_Q4Z || op->n_tok != 1 || !op->xh || !op->xh->h || !op->xh->d || w->cols % 32)
    return (int) cudaErrorInvalidValue;
  const int g = w->group > 0 ? w->group : 32;
  if ((g != 32 && g != 64 && g != 128) || w->cols % g)
    return (int) cudaErrorInvalidValue;
  const int rc = args_from_op (op, pf, a);
  if (rc)
    return rc;
  a.x = NULL;
  a.norm_g = NULL;
  a.nchunk = w->cols / 32;
  a.ng = w->cols / g;
  a.cshift = g == 32 ? 0 : g == 64 ? 1 : 2;
  a.z = (const uint8_t *) w->s + (size_t) w->rows * a.ng * 2;
  a.xh = op->xh->h;
  a.xhd = (const float2 *) op->xh->d;
  return launch_w<HONE_K_Q4Z> (a, stream);
}
