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
 *  - Before the PDL wait (the keys older than pos were written by earlier
 *    steps, not by the kernels in front): read pos and the pages, and copy
 *    the older keys' K and V rows into shared memory with cp.async. After
 *    it: pos and the pages read again (if either changed, a predecessor did
 *    write them: the copies are drained and redone from the fresh values,
 *    so the result never depends on the guess), q, and this step's row
 *    (written by the q|k|v epilogue just before) — one L2 round trip.
 *  - Scores: 8 lanes a key, each a 16-byte piece (hd 64) or two (hd 128) of
 *    the row (a quarter warp reads 128 contiguous bytes: no bank conflict),
 *    three shuffles a key.
 *  - Softmax without a block reduction: every warp reads all of the pass's
 *    scores (≤ 8 a lane) and takes their max itself.
 *  - P·V: warp w takes keys w, w + NW, …; lane l owns hd/32 adjacent dims.
 *    The warps' partial sums meet once in shared memory at the end; the
 *    passes of a longer context rescale them online (flash attention's rule).
 *  - Output: f32, and where asked the int8 blocks of 32 for a quantized o
 *    projection and the HoneKActH16 form for a W4A16 one, with the
 *    arithmetic of hone_k_quantize / hone_k_pack_h16 (same bits, a warp = a
 *    block of 32 values).
 * Only one token: several tokens (speculative decoding) take the split kernel.
 */
#include "hone-k-common.cuh"
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
  HONE_K_TRACE_FIELD
};

static __device__ __forceinline__ void
tiny_cp16 (void *smem, const void *gmem)
{
  const unsigned s = (unsigned) __cvta_generic_to_shared (smem);
  asm volatile ("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
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

template <int HD>
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
  __half *const ks = (__half *) tiny_sm;
  __half *const vs = ks + (size_t) a.chunk * HD;

  TRACE_ENTRY (a.trace);
  pdl_trigger ();                     /* the o projection may launch and load its weights meanwhile */
  const int h = blockIdx.x, kvh = h / a.G;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  /* keys [k0, k1) of the pass starting at c0, for the ones with key < klim
   * (older keys) or key >= kfrom (this step's): K rows then V rows, 16-byte
   * pieces, consecutive threads along a row. mypage: lane p holds the page of
   * the pass's p-th 64-key block (a pass spans ≤ 4 pages + 1). */
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
            tiny_cp16 (dst, src);
          }
      }
  };
  auto pages_of = [&] (int c0, int k1) -> int {
    const int p0 = c0 >> 6, np = k1 > c0 ? ((k1 - 1) >> 6) - p0 + 1 : 0;
    return lane < np ? __ldcg (a.block_table + p0 + lane) : 0;
  };

  /* before the wait, from a guess of pos: the first pass's pages, and the
   * copies of its older keys [0, e1) */
  const int pos_e = __ldcg (a.pos);
  const int n0_e = min (pos_e + 1, a.chunk), e1 = min (pos_e, n0_e);
  const int page_e = pages_of (0, n0_e);
  if (e1 > 0)
    copy (0, 0, e1, page_e);
  asm volatile ("cp.async.commit_group;" ::: "memory");

  pdl_wait ();
  TRACE_WAITED ();
  /* after it, all in one round: this step's row (by the guess), pos and the
   * pages again, q */
  if (n0_e > e1)
    copy (0, e1, n0_e, page_e);
  const int pos = __ldcg (a.pos), ctx = pos + 1;
  const int page_l = pages_of (0, n0_e);
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
  if (__syncthreads_or (pos != pos_e || page_l != page_e))
    {
      /* the guess was stale (a predecessor wrote pos or the table): drain
       * the guessed copies, redo the first pass from the fresh values */
      tiny_commit_wait_all ();
      __syncthreads ();
      const int n0 = min (ctx, a.chunk);
      copy (0, 0, n0, pages_of (0, n0));
    }

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
        TRACE_MARK (5);                       /* its scores */
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
      for (int k = warp; k < n; k += TINY_NW)
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

/* Version 2's work on one pass for a warp with NST steps of keys (32·s +
 * 4·warp + g, g = lane/8, pass-relative, < n): every shared-memory load is
 * issued first (rows past n read row n − 1, real values that p = 0 then
 * weighs), then the scores with their three shuffles a step, the warp's
 * max and sum, and P·V with p passed by shuffles: straight-line code, so
 * the latencies overlap instead of adding up step by step. Updates the
 * warp's running (m, l, acc) with flash attention's rescale. */
template <int HD, int NST>
struct TinyRegs {
  int4 kw[NST][HD / 64];               /* K pieces of the lane's score steps */
  uint32_t vw[NST][4][HD / 64];        /* V: the lane's dims of the warp's keys */
  float pr[NST];                       /* p of the lane group's key a step */
};

template <int HD, int NST>
static __device__ __forceinline__ void
tiny_warp_scores (const __half *ks, const __half *vs, int n, int warp, int lane, const float (&qv)[HD / 64][8],
                  float &m, float &l, float (&acc)[HD / 32], TinyRegs<HD, NST> &r)
{
  constexpr int PL = HD / 64, DL = HD / 32;
  const int g8 = lane >> 3, j8 = lane & 7, last = n - 1;
  auto &kw = r.kw;
  auto &vw = r.vw;
  auto &pr = r.pr;
#pragma unroll
  for (int st = 0; st < NST; st++)
    {
      const int k = min (32 * st + 4 * warp + g8, last);
#pragma unroll
      for (int p = 0; p < PL; p++)
        kw[st][p] = *(const int4 *) (ks + (size_t) k * HD + 8 * j8 + 64 * p);
    }
#pragma unroll
  for (int st = 0; st < NST; st++)
#pragma unroll
    for (int g = 0; g < 4; g++)
      {
        const int k = min (32 * st + 4 * warp + g, last);
        const __half *vr = vs + (size_t) k * HD + DL * lane;
        if constexpr (DL == 4)
          {
            const uint2 w = *(const uint2 *) vr;
            vw[st][g][0] = w.x;
            vw[st][g][DL / 2 - 1] = w.y;
          }
        else
          vw[st][g][0] = *(const uint32_t *) vr;
      }
  float sc[NST];
#pragma unroll
  for (int st = 0; st < NST; st++)
    {
      float d0 = 0.f, d1 = 0.f;
#pragma unroll
      for (int p = 0; p < PL; p++)
        {
          const __half2 *w2 = (const __half2 *) &kw[st][p];
#pragma unroll
          for (int e = 0; e < 4; e++)
            {
              const float2 f = __half22float2 (w2[e]);
              d0 = fmaf (qv[p][2 * e], f.x, d0);
              d1 = fmaf (qv[p][2 * e + 1], f.y, d1);
            }
        }
      sc[st] = d0 + d1;
    }
#pragma unroll
  for (int o = 1; o < 8; o <<= 1)
#pragma unroll
    for (int st = 0; st < NST; st++)
      sc[st] += __shfl_xor_sync (0xffffffffu, sc[st], o);
  float mx = -INFINITY;
#pragma unroll
  for (int st = 0; st < NST; st++)
    {
      if (32 * st + 4 * warp + g8 >= n)
        sc[st] = -INFINITY;
      mx = fmaxf (mx, sc[st]);
    }
  mx = fmaxf (mx, __shfl_xor_sync (0xffffffffu, mx, 8));
  mx = fmaxf (mx, __shfl_xor_sync (0xffffffffu, mx, 16));
  const float mn = fmaxf (m, mx);     /* finite: the warp's first key is < n */
  const float f = m == -INFINITY ? 0.f : __expf (m - mn);
  m = mn;
  float ls = 0.f;
#pragma unroll
  for (int st = 0; st < NST; st++)
    {
      pr[st] = sc[st] == -INFINITY ? 0.f : __expf (sc[st] - mn);
      ls += pr[st];
    }
  ls += __shfl_xor_sync (0xffffffffu, ls, 8);   /* the 4 groups' keys (a group's 8 lanes hold the same) */
  ls += __shfl_xor_sync (0xffffffffu, ls, 16);
  l = l * f + ls;
#pragma unroll
  for (int d = 0; d < DL; d++)
    acc[d] *= f;
}

template <int HD, int NST>
static __device__ __forceinline__ void
tiny_warp_pv (float (&acc)[HD / 32], const TinyRegs<HD, NST> &r)
{
  constexpr int DL = HD / 32;
#pragma unroll
  for (int st = 0; st < NST; st++)
#pragma unroll
    for (int g = 0; g < 4; g++)
      {
        const float p = __shfl_sync (0xffffffffu, r.pr[st], 8 * g);
#pragma unroll
        for (int e = 0; e < DL / 2; e++)
          {
            const float2 v = __half22float2 (*(const __half2 *) &r.vw[st][g][e]);
            acc[2 * e] = fmaf (p, v.x, acc[2 * e]);
            acc[2 * e + 1] = fmaf (p, v.y, acc[2 * e + 1]);
          }
      }
}

/* Version 2: every warp on its own keys, from its copies to its share of
 * P·V, so that only the final merge needs the block. Warp w owns the keys
 * 32·s + 4·w + g of a pass (step s, lane group g = lane/8; the score
 * mapping above): it copies their K and V rows itself (cp.async, its own
 * group: a __syncwarp orders them), then runs tiny_warp_scores and
 * tiny_warp_pv on them. The
 * warps' (m, l, O) merge once at the end with flash attention's rescale. */
template <int HD>
__global__ void __launch_bounds__ (TINY_NT)
attn_tiny2_kernel (TinyArgs a)
{
  constexpr int PR = HD / 8;          /* 16-byte pieces a row */
  constexpr int PL = HD / 64;         /* pieces a lane reads a key (8 lanes a key) */
  constexpr int DL = HD / 32;         /* dims a lane owns in P·V */
  constexpr int NS = HONE_K_ATTN_TINY_MAX / 32;   /* score steps a pass at most */
  constexpr int CPL = 4 * PR / 32;    /* a step's 16-byte pieces of K (or V) a lane copies: 4 rows */
  extern __shared__ __align__ (16) unsigned char tiny_sm[];
  __shared__ float red[TINY_NW][HD];
  __shared__ float redm[TINY_NW], redl[TINY_NW];
  __half *const ks = (__half *) tiny_sm;
  __half *const vs = ks + (size_t) a.chunk * HD;

  TRACE_ENTRY (a.trace);
  pdl_trigger ();                     /* the o projection may launch and load its weights meanwhile */
  const int h = blockIdx.x, kvh = h / a.G;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, j8 = lane & 7;

  /* this warp's rows of the pass at c0 with lo <= key < hi (pass-relative
   * keys 32·s + 4·warp + 0..3); mypage: lane p holds the page of the pass's
   * p-th 64-key block */
  auto copy = [&] (int c0, int lo, int hi, int mypage) {
#pragma unroll
    for (int st = 0; st < NS; st++)
      {
        const int kb = 32 * st + 4 * warp;
        if (kb >= hi)
          break;
#pragma unroll
        for (int i = 0; i < CPL; i++)
          {
            const int idx = lane + 32 * i, r = idx / PR, pc = idx - r * PR, key = kb + r, ak = c0 + key;
            const int page = __shfl_sync (0xffffffffu, mypage, (ak >> 6) - (c0 >> 6));
            if (key >= lo && key < hi)
              {
                const size_t off = (((size_t) page * a.nkv + kvh) * HONE_K_KV_BLOCK + (ak & 63)) * HD + pc * 8;
                tiny_cp16 (ks + (size_t) key * HD + pc * 8, a.k_pool + off);
                tiny_cp16 (vs + (size_t) key * HD + pc * 8, a.v_pool + off);
              }
          }
      }
  };
  auto pages_of = [&] (int c0, int n) -> int {   /* the pages of keys c0 .. c0 + n - 1 */
    const int p0 = c0 >> 6, np = n > 0 ? ((c0 + n - 1) >> 6) - p0 + 1 : 0;
    return lane < np ? __ldcg (a.block_table + p0 + lane) : 0;
  };

  /* before the wait, from a guess of pos: the first pass's older keys */
  const int pos_e = __ldcg (a.pos);
  const int n0_e = min (pos_e + 1, a.chunk), e1 = min (pos_e, n0_e);
  const int page_e = pages_of (0, n0_e);
  copy (0, 0, e1, page_e);
  asm volatile ("cp.async.commit_group;" ::: "memory");

  pdl_wait ();
  TRACE_WAITED ();
  copy (0, e1, n0_e, page_e);         /* this step's row, if it is this warp's */
  const int pos = __ldcg (a.pos), ctx = pos + 1;
  const int page_l = pages_of (0, n0_e);
  float qv[PL][8];
  {
    const float *qp = a.qkv + (size_t) h * HD;
#pragma unroll
    for (int p = 0; p < PL; p++)
      {
        const float4 x = *(const float4 *) (qp + 8 * j8 + 64 * p);
        const float4 y = *(const float4 *) (qp + 8 * j8 + 64 * p + 4);
        qv[p][0] = x.x; qv[p][1] = x.y; qv[p][2] = x.z; qv[p][3] = x.w;
        qv[p][4] = y.x; qv[p][5] = y.y; qv[p][6] = y.z; qv[p][7] = y.w;
      }
  }
  if (__any_sync (0xffffffffu, pos != pos_e || page_l != page_e))
    {
      /* a stale guess (a predecessor wrote pos or the table): drain this
       * warp's guessed copies and redo them from the fresh values */
      tiny_commit_wait_all ();
      __syncwarp ();
      const int n0 = min (ctx, a.chunk);
      copy (0, 0, n0, pages_of (0, n0));
    }

  TRACE_MARK (6);                     /* trace builds: this step's row issued, the guess checked */
  float m = -INFINITY, l = 0.f;       /* this warp's running max and sum */
  float acc[DL];
#pragma unroll
  for (int d = 0; d < DL; d++)
    acc[d] = 0.f;
  for (int c0 = 0; c0 < ctx; c0 += a.chunk)
    {
      const int n = min (a.chunk, ctx - c0);
      if (c0 > 0)
        {
          __syncwarp ();              /* this warp is done with the last pass's rows */
          copy (c0, 0, n, pages_of (c0, n));
        }
      tiny_commit_wait_all ();
      __syncwarp ();
      if (c0 == 0)
        TRACE_MARK (4);               /* trace builds: the first pass's rows landed */
      const int nst = n > 4 * warp ? (n - 4 * warp + 31) / 32 : 0;   /* this warp's steps in the pass */
      switch (nst)
        {
#define TINY_PASS(k) \
  case k: \
    { \
      TinyRegs<HD, k> r; \
      tiny_warp_scores<HD, k> (ks, vs, n, warp, lane, qv, m, l, acc, r); \
      if (c0 == 0) \
        TRACE_MARK (5); /* its scores, max and sum */ \
      tiny_warp_pv<HD, k> (acc, r); \
    } \
    break;
          TINY_PASS (1) TINY_PASS (2) TINY_PASS (3) TINY_PASS (4)
          TINY_PASS (5) TINY_PASS (6) TINY_PASS (7) TINY_PASS (8)
#undef TINY_PASS
          default: break;
        }
    }
  TRACE_MAIN ();
#pragma unroll
  for (int d = 0; d < DL; d++)
    red[warp][DL * lane + d] = acc[d];
  if (lane == 0)
    {
      redm[warp] = m;
      redl[warp] = l;
    }
  __syncthreads ();
  const int tid = threadIdx.x;
  if (tid < HD)
    {
      float M = -INFINITY;
#pragma unroll
      for (int w = 0; w < TINY_NW; w++)
        M = fmaxf (M, redm[w]);
      float o = 0.f, L = 0.f;
#pragma unroll
      for (int w = 0; w < TINY_NW; w++)
        {
          const float f = redm[w] == -INFINITY ? 0.f : __expf (redm[w] - M);
          o = fmaf (f, red[w][tid], o);
          L = fmaf (f, redl[w], L);
        }
      tiny_store (a, h * HD + tid, L > 0.f ? o / L : 0.f, lane);
    }
}

/* HONE_ATTN_TINY_V=2: version 2 (a warp's own keys), else version 1 (block-wide passes) */
static int tiny_version = -1;

template <int HD, int V>
static int
launch_tiny (TinyArgs a, cudaStream_t stream)
{
  static int raised;
  auto kernel = V == 1 ? attn_tiny_kernel<HD> : attn_tiny2_kernel<HD>;
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
      tiny_version = e && atoi (e) == 2 ? 2 : 1;
    }
  if (tiny_version == 1)
    return hd == 128 ? launch_tiny<128, 1> (a, stream) : launch_tiny<64, 1> (a, stream);
  return hd == 128 ? launch_tiny<128, 2> (a, stream) : launch_tiny<64, 2> (a, stream);
}

static int tiny_ctx = -1;

extern "C" int
hone_k_attn_tiny_ctx (void)
{
  if (tiny_ctx < 0)
    {
      const char *e = getenv ("HONE_ATTN_TINY");
      tiny_ctx = e && *e ? (atoi (e) > 0 ? atoi (e) : 0) : HONE_K_ATTN_TINY_MAX;
      int dev = 0, major = 0;
      if (cudaGetDevice (&dev) != cudaSuccess
          || cudaDeviceGetAttribute (&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess || major < 8)
        tiny_ctx = 0;
    }
  return tiny_ctx;
}
