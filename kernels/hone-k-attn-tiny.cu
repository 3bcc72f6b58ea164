/* hone-k-attn-tiny.cu — decode attention of one token over a short context
 * (≤ HONE_K_ATTN_TINY_MAX keys a pass), one block a query head.
 *
 * Why a kernel of its own: at short context the split kernel of
 * hone-k-attn-decode.cu is a chain of latencies — at 128 keys its blocks
 * finish their main loops 2.6–4.3 µs after the PDL wait and then spend
 * another 3.5–4 µs merging warps, waiting at the cluster barrier for the
 * cluster's slowest block and combining in distributed shared memory
 * (RESULTS-cuda.md, "Decode, session 13": 7.8 µs from the wait to the last
 * exit, ~15 % of a Q4_0 layer). Here nothing is combined across blocks: a
 * block owns one query head and all of its keys.
 *
 * Two forms of one kernel (template V4), the same arithmetic order but for
 * the scores' and P·V's partial sums:
 *  - Version 1 (no bound known, or HONE_ATTN_TINY_V=1): before the PDL wait
 *    (the keys older than pos were written by earlier steps, not by the
 *    kernels in front) read pos, then the pages, and copy the older keys' K
 *    and V rows into shared memory with every thread's cp.async. After it:
 *    pos and the pages read again (if either changed, a predecessor did
 *    write them: the copies are drained and redone from the fresh values,
 *    so the result never depends on the guess), q, and this step's row
 *    (written by the q|k|v epilogue just before) — one L2 round trip.
 *  - Version 4 (the default for a captured step, which states its bound;
 *    sm_90): the bound's pages read beside pos instead of after it (the
 *    caller promises the table holds them), one bulk copy of K and one of V
 *    a page issued by one thread on an mbarrier, the new row by warp 0; the
 *    scores two key steps an iteration and P·V four keys an iteration, for
 *    more loads in flight. Measured (RESULTS-cuda.md, "Decode, session 20"):
 *    q|k|v's exit to attention's exit 5.57 → 4.77 µs (Q4_0, 129 keys).
 *  - Scores: 8 lanes a key, each a 16-byte piece (hd 64) or two (hd 128) of
 *    the row (a quarter warp reads 128 contiguous bytes: no bank conflict),
 *    three shuffles a key.
 *  - Softmax without a block reduction: every warp reads all of the pass's
 *    scores (≤ 8 a lane) and takes their max itself.
 *  - P·V: warp w takes keys w, w + NW, …; lane l owns hd/32 adjacent dims.
 *    The warps' partial sums meet once in shared memory at the end; the
 *    passes of a longer context rescale them online (flash attention's rule).
 *  - PDL: the o projection is triggered once the first pass's older rows
 *    landed, not at entry, so that o's early weight loads do not compete
 *    with them (same binary, 8B at 128 keys: Q4_0 1.556 -> 1.545 ms, AWQ
 *    1.859 -> 1.829; after the scores 1.551 / 1.853, after P·V 1.580 /
 *    1.868: RESULTS-cuda.md, "Decode, session 21"). HONE_TINY_TRIGGER=0..3.
 *  - Output: f32, and where asked the int8 blocks of 32 for a quantized o
 *    projection and the HoneKActH16 form for a W4A16 one, with the
 *    arithmetic of hone_k_quantize / hone_k_pack_h16 (same bits, a warp = a
 *    block of 32 values).
 * Tried and taken out (history): a warp on its own keys end to end (version
 * 2/3: slower in the step), the G query heads of a KV head as a cluster
 * splitting the keys (version 5: its cluster barrier alone ~1.6 µs).
 * Only one token: several tokens (speculative decoding) take the split kernel.
 */
#include "hone-k-common.cuh"
#include "hone-k-stage.cuh"           /* cp_async16, mbarriers (version 4's bulk copies) */
#include "hone-k-attn-tiny.h"
#include <stdlib.h>

#define TINY_NW 8                     /* warps a block */
#define TINY_NT (TINY_NW * 32)
#define TINY_KPS (TINY_NW * 4)        /* keys a score step: 4 a warp (8 lanes a key) */

struct TinyArgs {
  const float *qkv;
  int nq, nkv, G, hd;
  const int32_t *pos;
  const __half *k_pool, *v_pool;
  const int32_t *block_table;
  float *out;
  int8_t *out_q;
  float2 *out_ds;
  uint16_t *out_h;
  float *out_hd;
  int chunk;                          /* keys a pass (multiple of 16, ≤ HONE_K_ATTN_TINY_MAX) */
  int tpages;                         /* V4: block_table entries surely there (ceil(chunk / 64)), 0 = unknown */
  int trigger;                        /* PDL: the o projection may launch at entry (0), once the first pass's older
                                         rows landed (1; version 1: once pos and the pages were checked), after
                                         its scores (2) or after its P·V (3) */
  HONE_K_TRACE_FIELD
};

/* Bulk copy (sm_90) of @bytes global → shared, completing on @bar; no L2
 * hint (the KV rows are read again next step). */
static __device__ __forceinline__ void
tiny_bulk (void *dst, const void *src, uint32_t bytes, uint64_t *bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t d = (uint32_t) __cvta_generic_to_shared (dst);
  const uint32_t b = (uint32_t) __cvta_generic_to_shared (bar);
  asm volatile ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                :: "r"(d), "l"(src), "r"(bytes), "r"(b) : "memory");
#endif
}

static __device__ __forceinline__ void
tiny_commit_wait_all (void)
{
  asm volatile ("cp.async.commit_group;\n\tcp.async.wait_group 0;" ::: "memory");
}

/* Output value oi (one token) = v, by a whole warp holding 32 consecutive
 * values: f32, and where asked int8 (quant32_store = hone_k_quantize's bits)
 * and HoneKActH16 (hone_k_pack_h16's). */
static __device__ __forceinline__ void
tiny_store (const TinyArgs &a, int oi, float v, int lane)
{
  a.out[oi] = v;
  if (a.out_q)
    quant32_store (v, a.out_q + (oi - lane), a.out_ds + (oi >> 5), lane);
  if (a.out_h)
    {
      const float amax = warp_max (fabsf (v));
      const float inv = amax > 0.f ? 32767.f / amax : 0.f;
      const int q = h16_fixed (v, inv);
      const int sum = (int) warp_sum ((float) q);
      const int cols = a.nq * a.hd;
      h16_store (a.out_h, cols, 0, oi, q);
      if (lane == 0)
        h16_store_ds (a.out_hd, cols, 0, oi >> 5, amax, sum);
    }
}

template <int HD, bool V4>
__global__ void __launch_bounds__ (TINY_NT)
attn_tiny_kernel (TinyArgs a)
{
  constexpr int PR = HD / 8;          /* 16-byte pieces a row */
  constexpr int PL = HD / 64;         /* pieces a lane reads a key (8 lanes a key) */
  constexpr int DL = HD / 32;         /* dims a lane owns in P·V */
  extern __shared__ __align__ (16) unsigned char tiny_sm[];
  __shared__ float sc[HONE_K_ATTN_TINY_MAX];
  __shared__ float red[TINY_NW][HD];
  __shared__ float redl[TINY_NW];
  __shared__ __align__ (8) uint64_t bar;      /* V4: the older rows' bulk copies */
  __half *const ks = (__half *) tiny_sm;
  __half *const vs = ks + (size_t) a.chunk * HD;

  TRACE_ENTRY (a.trace);
  if (a.trigger == 0)
    pdl_trigger ();                   /* the o projection may launch and load its weights meanwhile */
  const int h = blockIdx.x, kvh = h / a.G;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if constexpr (V4)
    {
      if (tid == 0)
        {
          stage_bar_init (&bar);
          stage_bar_fence_init ();
        }
      __syncthreads ();
    }

  /* the rows of keys [k0, k1) of the pass starting at c0 (pass-relative):
   * K rows then V rows, 16-byte pieces, consecutive threads along a row, by
   * every thread's cp.async. mypage: lane p holds the page of the pass's
   * p-th 64-key block (a pass spans ≤ 4 pages + 1). */
  auto copy = [&] (int c0, int k0, int k1, int mypage) {
    const int n = k1 - k0;
    for (int i0 = 0; i0 < 2 * n * PR; i0 += TINY_NT)
      {
        const int i = i0 + tid;
        const bool isv = i >= n * PR;
        const int j = isv ? i - n * PR : i, key = k0 + j / PR, pc = j - (j / PR) * PR;
        const int page = __shfl_sync (0xffffffffu, mypage, ((key < k1 ? key : k0) >> 6) - (c0 >> 6));
        if (i < 2 * n * PR)
          {
            const __half *pool = isv ? a.v_pool : a.k_pool;
            const __half *src = pool + (((size_t) page * a.nkv + kvh) * HONE_K_KV_BLOCK + (key & 63)) * HD + pc * 8;
            __half *dst = (isv ? vs : ks) + (size_t) (key - c0) * HD + pc * 8;
            cp_async16 (dst, src);
          }
      }
  };
  auto pages_of = [&] (int c0, int k1) -> int {
    const int p0 = c0 >> 6, np = k1 > c0 ? ((k1 - 1) >> 6) - p0 + 1 : 0;
    return lane < np ? __ldcg (a.block_table + p0 + lane) : 0;
  };

  /* before the wait, from a guess of pos: the first pass's pages, and the
   * copies of its older keys [0, e1). V4: the pages the table surely holds
   * (read beside pos, not after it) and one bulk copy of K and one of V a
   * page, issued by one thread. */
  const int pos_e = __ldcg (a.pos);
  const int n0_e = min (pos_e + 1, a.chunk), e1 = min (pos_e, n0_e);
  int page_e;
  if constexpr (V4)
    {
      page_e = warp == 0 && lane < a.tpages ? __ldcg (a.block_table + lane) : 0;
      if (warp == 0)
        {
          int pg[HONE_K_ATTN_TINY_MAX / 64];
#pragma unroll
          for (int p = 0; p < HONE_K_ATTN_TINY_MAX / 64; p++)
            pg[p] = __shfl_sync (0xffffffffu, page_e, p);
          if (lane == 0)
            {
              stage_bar_expect (&bar, e1 > 0 ? (uint32_t) (2 * e1 * HD * 2) : 0u);
#pragma unroll
              for (int p = 0; p < HONE_K_ATTN_TINY_MAX / 64; p++)
                {
                  const int r0 = 64 * p, r1 = min (64 * p + 64, e1);
                  if (r1 > r0)
                    {
                      const size_t off = ((size_t) pg[p] * a.nkv + kvh) * HONE_K_KV_BLOCK * HD;
                      tiny_bulk (ks + (size_t) r0 * HD, a.k_pool + off, (uint32_t) ((r1 - r0) * HD * 2), &bar);
                      tiny_bulk (vs + (size_t) r0 * HD, a.v_pool + off, (uint32_t) ((r1 - r0) * HD * 2), &bar);
                    }
                }
            }
        }
    }
  else
    {
      page_e = pages_of (0, n0_e);
      if (e1 > 0)
        copy (0, 0, e1, page_e);
      asm volatile ("cp.async.commit_group;" ::: "memory");
    }

  pdl_wait ();
  TRACE_WAITED ();
  /* after it, all in one round: this step's row (by the guess), pos and the
   * pages again, q */
  int page_l;
  if constexpr (V4)
    {
      page_l = warp == 0 && lane < a.tpages ? __ldcg (a.block_table + lane) : 0;
      const int page = __shfl_sync (0xffffffffu, page_e, (e1 >> 6) & 31);   /* (warp 0's) */
      if (warp == 0 && n0_e > e1 && lane < 2 * PR)
        {
          /* the one new row (pos_e < chunk): lanes 0..PR-1 its K pieces, PR..2PR-1 its V pieces */
          const bool isv = lane >= PR;
          const int pc = isv ? lane - PR : lane;
          const size_t off = (((size_t) page * a.nkv + kvh) * HONE_K_KV_BLOCK + (e1 & 63)) * HD + pc * 8;
          cp_async16 ((isv ? vs : ks) + (size_t) e1 * HD + pc * 8, (isv ? a.v_pool : a.k_pool) + off);
        }
    }
  else
    {
      if (n0_e > e1)
        copy (0, e1, n0_e, page_e);
      page_l = pages_of (0, n0_e);
    }
  const int pos = __ldcg (a.pos), ctx = pos + 1;
  /* q: this lane's dims of its score pieces (8·(lane%8) + 64·p + 0..7) */
  float qv[PL][8];
  {
    const float *qp = a.qkv + (size_t) h * HD;
#pragma unroll
    for (int p = 0; p < PL; p++)
      {
        const float4 x = *(const float4 *) (qp + 8 * (lane & 7) + 64 * p);
        const float4 y = *(const float4 *) (qp + 8 * (lane & 7) + 64 * p + 4);
        qv[p][0] = x.x; qv[p][1] = x.y; qv[p][2] = x.z; qv[p][3] = x.w;
        qv[p][4] = y.x; qv[p][5] = y.y; qv[p][6] = y.z; qv[p][7] = y.w;
      }
  }
  if constexpr (V4)
    if (warp == 0)
      tiny_commit_wait_all ();        /* the new row, before the barrier below shows it to every warp */
  if (__syncthreads_or (pos != pos_e || page_l != page_e))
    {
      /* the guess was stale (a predecessor wrote pos or the table): drain
       * the guessed copies, redo the first pass from the fresh values */
      if constexpr (V4)
        stage_bar_wait (&bar, 0);
      tiny_commit_wait_all ();
      __syncthreads ();
      const int n0 = min (ctx, a.chunk);
      copy (0, 0, n0, pages_of (0, n0));
    }
  else if constexpr (V4)
    stage_bar_wait (&bar, 0);         /* the older rows landed */
  if (a.trigger == 1)
    pdl_trigger ();                   /* o's early weight loads no longer compete with the rows */

  float m = -INFINITY, l = 0.f;                 /* running max and sum (the same in every lane) */
  float acc[DL];
#pragma unroll
  for (int d = 0; d < DL; d++)
    acc[d] = 0.f;
  const int g8 = lane >> 3, j8 = lane & 7;
  for (int c0 = 0; c0 < ctx; c0 += a.chunk)
    {
      const int n = min (a.chunk, ctx - c0);
      if (c0 > 0)
        {
          __syncthreads ();                     /* every warp is done with the last pass's rows */
          copy (c0, c0, c0 + n, pages_of (c0, c0 + n));
        }
      tiny_commit_wait_all ();
      __syncthreads ();
      if (c0 == 0)
        TRACE_MARK (4);                       /* trace builds: the first pass's rows landed */
      /* scores: key 4·warp + g8 + TINY_KPS·s; lane j8 takes pieces j8 + 8p */
      if constexpr (V4)
        {
          /* two steps an iteration, four accumulators, rows clamped to the
           * pass (a clamped row's score is not stored): more loads in flight */
          for (int k = 4 * warp + g8; k - g8 < n; k += 2 * TINY_KPS)
            {
              const int ka = min (k, n - 1), kb = min (k + TINY_KPS, n - 1);
              float d[4] = { 0.f, 0.f, 0.f, 0.f };
              int4 wa[PL], wb[PL];
#pragma unroll
              for (int p = 0; p < PL; p++)
                {
                  wa[p] = *(const int4 *) (ks + (size_t) ka * HD + 8 * j8 + 64 * p);
                  wb[p] = *(const int4 *) (ks + (size_t) kb * HD + 8 * j8 + 64 * p);
                }
#pragma unroll
              for (int p = 0; p < PL; p++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                  {
                    const float2 fa = __half22float2 (((const __half2 *) &wa[p])[e]);
                    const float2 fb = __half22float2 (((const __half2 *) &wb[p])[e]);
                    d[0] = fmaf (qv[p][2 * e], fa.x, d[0]);
                    d[1] = fmaf (qv[p][2 * e + 1], fa.y, d[1]);
                    d[2] = fmaf (qv[p][2 * e], fb.x, d[2]);
                    d[3] = fmaf (qv[p][2 * e + 1], fb.y, d[3]);
                  }
              float da = d[0] + d[1], db = d[2] + d[3];
#pragma unroll
              for (int o = 1; o < 8; o <<= 1)
                {
                  da += __shfl_xor_sync (0xffffffffu, da, o);
                  db += __shfl_xor_sync (0xffffffffu, db, o);
                }
              if (j8 == 0 && k < n)
                sc[k] = da;
              if (j8 == 0 && k + TINY_KPS < n)
                sc[k + TINY_KPS] = db;
            }
        }
      else
      for (int k = 4 * warp + g8; k - g8 < n; k += TINY_KPS)
        {
          float dot = 0.f;
          if (k < n)
            {
              const __half *kr = ks + (size_t) k * HD;
#pragma unroll
              for (int p = 0; p < PL; p++)
                {
                  const int4 w = *(const int4 *) (kr + 8 * j8 + 64 * p);
                  const __half2 *w2 = (const __half2 *) &w;
#pragma unroll
                  for (int e = 0; e < 4; e++)
                    {
                      const float2 f = __half22float2 (w2[e]);
                      dot = fmaf (qv[p][2 * e], f.x, dot);
                      dot = fmaf (qv[p][2 * e + 1], f.y, dot);
                    }
                }
            }
          dot += __shfl_xor_sync (0xffffffffu, dot, 1);
          dot += __shfl_xor_sync (0xffffffffu, dot, 2);
          dot += __shfl_xor_sync (0xffffffffu, dot, 4);
          if (j8 == 0 && k < n)
            sc[k] = dot;
        }
      __syncthreads ();
      if (c0 == 0)
        {
          TRACE_MARK (5);                     /* its scores */
          if (a.trigger == 2)
            pdl_trigger ();
        }
      /* the pass's max, by every warp for itself */
      float mx = -INFINITY;
      for (int k = lane; k < n; k += 32)
        mx = fmaxf (mx, sc[k]);
      mx = warp_max (mx);
      const float mn = fmaxf (m, mx);
      const float f = m == -INFINITY ? 0.f : __expf (m - mn);
      m = mn;
      l *= f;
#pragma unroll
      for (int d = 0; d < DL; d++)
        acc[d] *= f;
      if (c0 == 0)
        TRACE_MARK (6);                       /* and their max */
      /* P·V over this warp's keys; lane owns dims DL·lane .. +DL */
      int k0 = warp;
      if constexpr (V4)
        {
          /* four keys an iteration, two sets of sums: the loads and exps of
           * the four in flight together */
          float acc2[DL];
#pragma unroll
          for (int d = 0; d < DL; d++)
            acc2[d] = 0.f;
          for (; k0 + 3 * TINY_NW < n; k0 += 4 * TINY_NW)
            {
              float p[4];
              float2 v[4][DL / 2];
#pragma unroll
              for (int u = 0; u < 4; u++)
                {
                  const int k = k0 + u * TINY_NW;
                  p[u] = __expf (sc[k] - m);
                  const __half2 *vr = (const __half2 *) (vs + (size_t) k * HD + DL * lane);
#pragma unroll
                  for (int e = 0; e < DL / 2; e++)
                    v[u][e] = __half22float2 (vr[e]);
                }
              l += (p[0] + p[1]) + (p[2] + p[3]);
#pragma unroll
              for (int e = 0; e < DL / 2; e++)
                {
                  acc[2 * e] = fmaf (p[0], v[0][e].x, acc[2 * e]);
                  acc[2 * e + 1] = fmaf (p[0], v[0][e].y, acc[2 * e + 1]);
                  acc2[2 * e] = fmaf (p[1], v[1][e].x, acc2[2 * e]);
                  acc2[2 * e + 1] = fmaf (p[1], v[1][e].y, acc2[2 * e + 1]);
                  acc[2 * e] = fmaf (p[2], v[2][e].x, acc[2 * e]);
                  acc[2 * e + 1] = fmaf (p[2], v[2][e].y, acc[2 * e + 1]);
                  acc2[2 * e] = fmaf (p[3], v[3][e].x, acc2[2 * e]);
                  acc2[2 * e + 1] = fmaf (p[3], v[3][e].y, acc2[2 * e + 1]);
                }
            }
#pragma unroll
          for (int d = 0; d < DL; d++)
            acc[d] += acc2[d];
        }
      for (int k = k0; k < n; k += TINY_NW)
        {
          const float p = __expf (sc[k] - m);
          l += p;
          const __half *vr = vs + (size_t) k * HD + DL * lane;
          if constexpr (DL == 4)
            {
              const uint2 w = *(const uint2 *) vr;
              const float2 v0 = __half22float2 (*(const __half2 *) &w.x), v1 = __half22float2 (*(const __half2 *) &w.y);
              acc[0] = fmaf (p, v0.x, acc[0]);
              acc[1] = fmaf (p, v0.y, acc[1]);
              acc[2] = fmaf (p, v1.x, acc[2]);
              acc[3] = fmaf (p, v1.y, acc[3]);
            }
          else
            {
              const float2 v0 = __half22float2 (*(const __half2 *) vr);
              acc[0] = fmaf (p, v0.x, acc[0]);
              acc[1] = fmaf (p, v0.y, acc[1]);
            }
        }
    }
  TRACE_MAIN ();
  if (a.trigger == 3)
    pdl_trigger ();
  /* the warps' partial sums meet (every warp saw the same maxima: plain sums) */
#pragma unroll
  for (int d = 0; d < DL; d++)
    red[warp][DL * lane + d] = acc[d];
  if (lane == 0)
    redl[warp] = l;
  __syncthreads ();
  if (tid < HD)
    {
      float o = 0.f, L = 0.f;
#pragma unroll
      for (int w = 0; w < TINY_NW; w++)
        {
          o += red[w][tid];
          L += redl[w];
        }
      tiny_store (a, h * HD + tid, L > 0.f ? o / L : 0.f, lane);
    }
}

/* HONE_ATTN_TINY_V=1: version 1 (every early copy by cp.async after pos and
 * the pages; the scores and P·V one key group at a time), =4: version 4,
 * even where the bound allows a later one; for A/B runs */
static int tiny_version = -1;
/* HONE_TINY_TRIGGER: where the dependent launch is triggered, 0..3 as
 * TinyArgs.trigger (for A/B runs) */
static int tiny_trigger = -1;

template <int HD, bool V4>
static int
launch_tiny (TinyArgs a, cudaStream_t stream)
{
  static int raised;
  auto kernel = attn_tiny_kernel<HD, V4>;
  const size_t smem = (size_t) a.chunk * HD * 2 * 2;
  if (!raised)
    {
      const cudaError_t e = cudaFuncSetAttribute (kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  HONE_K_ATTN_TINY_MAX * HD * 2 * 2);
      if (e != cudaSuccess)
        return (int) e;
      raised = 1;
    }
  const dim3 grid (a.nq);
  HONE_K_TRACE_SET (a, HONE_K_TR_ATTN, grid, 0, 1);
  return hone_k_launch_role (HONE_K_PDL_ATTN, kernel, grid, dim3 (TINY_NT), smem, stream, a);
}

int
hone_k_attn_tiny (const float *qkv, int nq, int nkv, int hd, const int32_t *pos, const void *k_pool,
                  const void *v_pool, const int32_t *block_table, float *out, int8_t *out_q, float2 *out_ds,
                  uint16_t *out_h, float *out_hd, int bound, cudaStream_t stream)
{
  if (nkv < 1 || nq % nkv || (hd != 64 && hd != 128) || (out_q && !out_ds) || (out_h && !out_hd))
    return (int) cudaErrorInvalidValue;
  TinyArgs a;
  a.qkv = qkv;
  a.nq = nq;
  a.nkv = nkv;
  a.G = nq / nkv;
  a.hd = hd;
  a.pos = pos;
  a.k_pool = (const __half *) k_pool;
  a.v_pool = (const __half *) v_pool;
  a.block_table = block_table;
  a.out = out;
  a.out_q = out_q;
  a.out_ds = out_ds;
  a.out_h = out_h;
  a.out_hd = out_hd;
  int c = bound > 0 && bound < HONE_K_ATTN_TINY_MAX ? bound : HONE_K_ATTN_TINY_MAX;
  a.chunk = (c + 15) & ~15;
  if (tiny_version < 0)
    {
      const char *e = getenv ("HONE_ATTN_TINY_V");
      tiny_version = e && atoi (e) == 1 ? 1 : 4;
      e = getenv ("HONE_TINY_TRIGGER");
      tiny_trigger = e && *e ? atoi (e) : 1;
    }
  a.trigger = tiny_trigger;
  /* version 4 needs the bound (the table then holds the pass's pages: see hone-k-attn-tiny.h) */
  a.tpages = bound > 0 ? (a.chunk + 63) / 64 : 0;

  if (tiny_version == 4 && a.tpages > 0 && hone_k_stage_supported ())   /* bulk copies: sm_90 */
    return hd == 128 ? launch_tiny<128, true> (a, stream) : launch_tiny<64, true> (a, stream);
  return hd == 128 ? launch_tiny<128, false> (a, stream) : launch_tiny<64, false> (a, stream);
}

static int tiny_ctx = -1;

extern "C" int
hone_k_attn_tiny_ctx (void)
{
  if (tiny_ctx < 0)
    {
      /* HONE_ATTN_TINY: 0 = never, else the tier's keys, at most one pass */
      const char *e = getenv ("HONE_ATTN_TINY");
      const int v = e && *e ? atoi (e) : HONE_K_ATTN_TINY_MAX;
      tiny_ctx = v <= 0 ? 0 : v > HONE_K_ATTN_TINY_MAX ? HONE_K_ATTN_TINY_MAX : v;
    }
  /* the current device's: bulk copies and PDL are sm_90's (hone_k_stage_supported remembers it per device) */
  return hone_k_stage_supported () ? tiny_ctx : 0;
}
