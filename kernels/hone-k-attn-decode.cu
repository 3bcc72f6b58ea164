/* hone-k-attn-decode.cu — flash-decoding: attention of 1..8 new tokens over
 * the paged f16 KV cache, split over the KV length so that even one sequence
 * fills the chip; the last block of each KV head to finish combines the
 * splits (no second launch).
 *
 * Two kernels: version 3 (session 3, the default; see its comment below:
 * tensor cores, a cp.async ring a warp, no barrier in the main loop), with
 * session 4's switches (pos read before the PDL wait, thread block clusters
 * combining in distributed shared memory: "Version 4 additions" below), and
 * session 2's, kept selectable with HONE_ATTN_DECODE=old for comparison.
 * Both take the same scratch, write the same outputs, and hold the combine's
 * int8 output and prefetch features described here.
 *
 * Session 2's kernel: block = one KV head × one split; it serves all G query heads of the group
 * and all new tokens (queries qi = t·G + g), so each K/V byte is read once.
 * Within a split, tiles of 64 keys: the K and V tiles go to shared memory
 * with every thread's 16-byte loads issued together (one memory round trip a
 * tile), scores by a thread per key, online softmax per query, then P·V with
 * each thread owning a column pair of the output. The combine spreads the
 * split weights over a warp per query and reads partials with float4 loads,
 * many in flight (a serial combine cost more than the attention itself).
 *
 * For decode_step: the combine can also write its output quantized to int8
 * blocks of 32 for a quantized o projection, with the arithmetic of
 * hone_k_quantize (same bits, one launch fewer). Optionally every block first
 * prefetches a slice of the next weights into L2 (off by default: at short
 * context this kernel is a chain of dependent latencies that leaves the
 * memory idle, but the prefetch measured slower: RESULTS-cuda.md).
 */
#include "hone-k-common.cuh"
#include "hone-k-stage.cuh"   /* hone_k_stage_supported: sm_90 (clusters) */
#include "hone-k-attn-tiny.h"  /* one token over a short context: one block a query head */
#include <string.h>
#include <stdlib.h>
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

#define TILE 64
#define NT 128
#define MAXQ 64            /* G × n_tok */

struct AttnArgs {
  const float *qkv;
  int n_tok, nq, nkv, hd, G, QN;
  const int32_t *pos;
  const __half *k_pool, *v_pool;
  const int32_t *block_table;
  float *part_o;          /* [nkv][splits][MAXQ][hd] */
  float2 *part_ml;        /* [nkv][splits][MAXQ] */
  unsigned *counters;     /* [nkv] */
  float *out;
  int min_chunk;          /* fewest keys a split gets */
  int8_t *out_q;          /* optional: out quantized, [n_tok][nq·hd] */
  float2 *out_ds;         /* [n_tok][nq·hd/32] */
  uint16_t *out_h;        /* optional: out as HoneKActH16 (hone_k_pack_h16's bits), out_hd its (d, Σv) */
  float *out_hd;
  HoneKPrefetch pf;
  int trigger;            /* version 3, PDL: let the next kernel launch at entry (0), after the main loop (1), at exit (2) */
  int max_splits;         /* version 3, clustered shapes (CL > 1): at most this many splits (a multiple of CL; 0: no
                           * cap), so that every KV head's clusters are resident at once (launch_attn3) */
  int combine;            /* version 3: 0 by the split count (two levels of 8 at ≤ 8 and > 32 splits, else flat),
                           * 1 the last block combines all splits (HONE_ATTN_COMBINE=flat), 2 two levels always (=two) */
  HONE_K_TRACE_FIELD   /* kernel_trace builds only (hone-k-trace.cuh; the version-3 kernel) */
};

/* One thread's 4 output values at o (on: a real query; off-query threads
 * still join the shuffles) and, with the int8 output, their 32-value block:
 * 8 adjacent threads hold one block (HD/4 is a multiple of 8, so a block
 * never straddles two heads); quant32_store's arithmetic: d = absmax/127,
 * q = rint(v/d), (d, d·Σq). With the 16-bit output, hone_k_pack_h16's:
 * d = absmax/32767, v = rint(x·32767/absmax), (d, Σv). Every thread of the warp must call it. */
static __device__ __forceinline__ void
store_out4 (const AttnArgs &a, size_t o, float4 acc, bool on, int d4)
{
  if (on)
    *(float4 *) (a.out + o) = acc;
  if (a.out_q)
    {
      float amax = fmaxf (fmaxf (fabsf (acc.x), fabsf (acc.y)), fmaxf (fabsf (acc.z), fabsf (acc.w)));
#pragma unroll
      for (int m = 1; m < 8; m <<= 1)
        amax = fmaxf (amax, __shfl_xor_sync (0xffffffffu, amax, m));
      const float d = amax / 127.f;
      const int q0 = d > 0.f ? __float2int_rn (acc.x / d) : 0, q1 = d > 0.f ? __float2int_rn (acc.y / d) : 0;
      const int q2 = d > 0.f ? __float2int_rn (acc.z / d) : 0, q3 = d > 0.f ? __float2int_rn (acc.w / d) : 0;
      float sum = (float) (q0 + q1 + q2 + q3);
#pragma unroll
      for (int m = 1; m < 8; m <<= 1)
        sum += __shfl_xor_sync (0xffffffffu, sum, m);
      if (on)
        {
          *(uint32_t *) (a.out_q + o) = (uint32_t) (q0 & 0xff) | ((uint32_t) (q1 & 0xff) << 8)
                                        | ((uint32_t) (q2 & 0xff) << 16) | ((uint32_t) (q3 & 0xff) << 24);
          if ((d4 & 7) == 0)
            a.out_ds[o >> 5] = make_float2 (d, d * sum);
        }
    }
  if (a.out_h)
    {
      float amax = fmaxf (fmaxf (fabsf (acc.x), fabsf (acc.y)), fmaxf (fabsf (acc.z), fabsf (acc.w)));
#pragma unroll
      for (int m = 1; m < 8; m <<= 1)
        amax = fmaxf (amax, __shfl_xor_sync (0xffffffffu, amax, m));
      const float inv = amax > 0.f ? 32767.f / amax : 0.f;
      const int v0 = h16_fixed (acc.x, inv), v1 = h16_fixed (acc.y, inv);
      const int v2 = h16_fixed (acc.z, inv), v3 = h16_fixed (acc.w, inv);
      float sum = (float) (v0 + v1 + v2 + v3);   /* exact: |Σ| < 2^24 */
#pragma unroll
      for (int m = 1; m < 8; m <<= 1)
        sum += __shfl_xor_sync (0xffffffffu, sum, m);
      if (on)
        {
          const int cols = a.nq * a.hd;
          const size_t t = o / (size_t) cols;
          const int j = (int) (o - t * cols);
          h16_store (a.out_h, cols, t, j, v0);
          h16_store (a.out_h, cols, t, j + 1, v1);
          h16_store (a.out_h, cols, t, j + 2, v2);
          h16_store (a.out_h, cols, t, j + 3, v3);
          if ((d4 & 7) == 0)
            h16_store_ds (a.out_hd, cols, t, j >> 5, amax, (int) sum);
        }
    }
}

static __device__ __forceinline__ const __half *
kv_row (const __half *pool, const int32_t *table, int key, int nkv, int kvh, int hd)
{
  const int page = table[key / HONE_K_KV_BLOCK], slot = key % HONE_K_KV_BLOCK;
  return pool + (((size_t) page * nkv + kvh) * HONE_K_KV_BLOCK + slot) * hd;
}

template <int HD, int QMAX>
__global__ void __launch_bounds__ (NT)
attn_decode_kernel (AttnArgs a)
{
  constexpr int KP = HD + 8;                 /* padded K row (halves): no bank conflicts */
  extern __shared__ __align__ (16) unsigned char smraw[];
  __half *Ks = (__half *) smraw;             /* [TILE][KP] */
  __half *Vs = Ks + TILE * KP;               /* [TILE][HD] */
  float *qs = (float *) (Vs + TILE * HD);    /* [QN][HD] */
  float *S = qs + a.QN * HD;                 /* [QN][TILE] */
  __shared__ float m_s[MAXQ], l_s[MAXQ], al_s[MAXQ];
  __shared__ int last;

  const int kvh = blockIdx.x, split = blockIdx.y;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int G = a.G, QN = a.QN;
  pdl_trigger ();
  if (warp == 0)
    prefetch_slice (a.pf, blockIdx.y * gridDim.x + blockIdx.x, gridDim.x * gridDim.y, lane);
  pdl_wait ();
  const int pos = *a.pos;
  const int ctx = pos + a.n_tok;
  int nsplit = (ctx + a.min_chunk - 1) / a.min_chunk;
  if (nsplit > HONE_K_ATTN_MAX_SPLITS)
    nsplit = HONE_K_ATTN_MAX_SPLITS;
  int chunk = (ctx + nsplit - 1) / nsplit;
  chunk = (chunk + 15) & ~15;
  nsplit = (ctx + chunk - 1) / chunk;
  if (split >= nsplit)
    return;
  const int k0 = split * chunk, k1 = min (ctx, k0 + chunk);

  const int S_row = (a.nq + 2 * a.nkv) * HD;
  for (int i = tid; i < QN * HD; i += NT)
    {
      const int qi = i / HD, d = i - qi * HD, t = qi / G, g = qi - t * G;
      qs[i] = a.qkv[(size_t) t * S_row + (size_t) (kvh * G + g) * HD + d];
    }
  for (int i = tid; i < QN; i += NT)
    {
      m_s[i] = -INFINITY;
      l_s[i] = 0.f;
    }

  constexpr int NPAIR = HD / 2;
  constexpr int QG = NT / NPAIR;             /* query groups in P·V */
  float o[(QMAX + QG - 1) / QG][2];
#pragma unroll
  for (int j = 0; j < (QMAX + QG - 1) / QG; j++)
    o[j][0] = o[j][1] = 0.f;
  const int dp = tid % NPAIR, qg = tid / NPAIR;

  for (int kt = k0; kt < k1; kt += TILE)
    {
      const int nk = min (TILE, k1 - kt);
      /* K and V tiles to shared memory: every thread's 16-byte loads at once */
      constexpr int V16 = HD / 8;            /* 16-byte vectors a row */
#pragma unroll 4
      for (int i = tid; i < TILE * V16; i += NT)
        {
          const int kk = i / V16, c = i - kk * V16;
          int4 kv = make_int4 (0, 0, 0, 0), vv = make_int4 (0, 0, 0, 0);
          if (kk < nk)
            {
              kv = *((const int4 *) kv_row (a.k_pool, a.block_table, kt + kk, a.nkv, kvh, HD) + c);
              vv = *((const int4 *) kv_row (a.v_pool, a.block_table, kt + kk, a.nkv, kvh, HD) + c);
            }
          *(int4 *) (Ks + kk * KP + c * 8) = kv;
          *(int4 *) (Vs + kk * HD + c * 8) = vv;
        }
      __syncthreads ();
      /* scores: thread = key (tid % 64) × query parity (tid / 64) */
      {
        const int kk = tid & (TILE - 1), qpar = tid / TILE;
        const __half *kr = Ks + kk * KP;
        for (int qi0 = qpar; qi0 < QN; qi0 += 2 * 4)
          {
            float acc[4] = { 0.f, 0.f, 0.f, 0.f };
#pragma unroll 4
            for (int c = 0; c < V16; c++)
              {
                const int4 kv = *(const int4 *) (kr + c * 8);
                const __half2 *h = (const __half2 *) &kv;
                float kf[8];
#pragma unroll
                for (int i = 0; i < 4; i++)
                  {
                    const float2 f = __half22float2 (h[i]);
                    kf[2 * i] = f.x;
                    kf[2 * i + 1] = f.y;
                  }
#pragma unroll
                for (int j = 0; j < 4; j++)
                  {
                    const int qi = qi0 + 2 * j;
                    if (qi < QN)
                      {
                        const float4 *qp = (const float4 *) (qs + qi * HD + c * 8);
                        const float4 q0 = qp[0], q1 = qp[1];
                        acc[j] += q0.x * kf[0] + q0.y * kf[1] + q0.z * kf[2] + q0.w * kf[3]
                                  + q1.x * kf[4] + q1.y * kf[5] + q1.z * kf[6] + q1.w * kf[7];
                      }
                  }
              }
#pragma unroll
            for (int j = 0; j < 4; j++)
              {
                const int qi = qi0 + 2 * j;
                if (qi < QN)
                  S[qi * TILE + kk] = (kk < nk && kt + kk <= pos + qi / G) ? acc[j] : -INFINITY;
              }
          }
      }
      __syncthreads ();
      /* online softmax: warp per query, lanes over keys */
      for (int qi = warp; qi < QN; qi += 4)
        {
          float *row = S + qi * TILE;
          const float s0 = row[lane], s1 = row[lane + 32];
          const float mt = warp_max (fmaxf (s0, s1));
          const float mo = m_s[qi];
          const float mn = fmaxf (mo, mt);
          float p0 = 0.f, p1 = 0.f, alpha = 1.f;
          if (mn != -INFINITY)
            {
              p0 = __expf (s0 - mn);
              p1 = __expf (s1 - mn);
              alpha = mo == -INFINITY ? 0.f : __expf (mo - mn);
            }
          row[lane] = p0;
          row[lane + 32] = p1;
          const float ps = warp_sum (p0 + p1);
          __syncwarp ();   /* every lane has read m_s[qi] (line "mo" above) before lane 0 replaces it:
                              the shuffles order execution, not shared memory (racecheck) */
          if (lane == 0)
            {
              m_s[qi] = mn;
              l_s[qi] = l_s[qi] * alpha + ps;
              al_s[qi] = alpha;
            }
        }
      __syncthreads ();
      /* P·V from shared memory */
#pragma unroll
      for (int j = 0; j < (QMAX + QG - 1) / QG; j++)
        {
          const int qi = qg + j * QG;
          if (qi < QN)
            {
              o[j][0] *= al_s[qi];
              o[j][1] *= al_s[qi];
            }
        }
#pragma unroll 4
      for (int kk = 0; kk < nk; kk++)
        {
          const float2 vf = __half22float2 (*(const __half2 *) (Vs + kk * HD + 2 * dp));
#pragma unroll
          for (int j = 0; j < (QMAX + QG - 1) / QG; j++)
            {
              const int qi = qg + j * QG;
              if (qi < QN)
                {
                  const float p = S[qi * TILE + kk];
                  o[j][0] = fmaf (p, vf.x, o[j][0]);
                  o[j][1] = fmaf (p, vf.y, o[j][1]);
                }
            }
        }
      __syncthreads ();
    }

  /* partials out */
  const size_t base = ((size_t) kvh * HONE_K_ATTN_MAX_SPLITS + split) * MAXQ;
#pragma unroll
  for (int j = 0; j < (QMAX + QG - 1) / QG; j++)
    {
      const int qi = qg + j * QG;
      if (qi < QN)
        *(float2 *) (a.part_o + (base + qi) * HD + 2 * dp) = make_float2 (o[j][0], o[j][1]);
    }
  for (int i = tid; i < QN; i += NT)
    a.part_ml[base + i] = make_float2 (m_s[i], l_s[i]);
  __threadfence ();
  __syncthreads ();
  if (tid == 0)
    last = atomicAdd (a.counters + kvh, 1u) == (unsigned) (nsplit - 1);
  __syncthreads ();
  if (!last)
    return;
  __threadfence ();
  /* combine the splits: weights per (query, split) by a warp per query, then
   * every thread sums float4 columns over the splits with loads in flight */
  const size_t hb = (size_t) kvh * HONE_K_ATTN_MAX_SPLITS * MAXQ;
  /* the K/V tiles are done with: their 16+ KB hold the weights now */
  float (*wts)[HONE_K_ATTN_MAX_SPLITS] = (float (*)[HONE_K_ATTN_MAX_SPLITS]) smraw;
  for (int qi = warp; qi < QN; qi += 4)
    {
      float2 ml[2];
      float M = -INFINITY;
#pragma unroll
      for (int h = 0; h < 2; h++)
        {
          const int s = lane + 32 * h;
          ml[h] = s < nsplit ? __ldcg (&a.part_ml[hb + (size_t) s * MAXQ + qi]) : make_float2 (-INFINITY, 0.f);
          M = fmaxf (M, ml[h].x);
        }
      M = warp_max (M);
      float w[2], den = 0.f;
#pragma unroll
      for (int h = 0; h < 2; h++)
        {
          w[h] = ml[h].x == -INFINITY ? 0.f : __expf (ml[h].x - M);
          den += w[h] * ml[h].y;
        }
      den = warp_sum (den);
      const float inv = den > 0.f ? 1.f / den : 0.f;
#pragma unroll
      for (int h = 0; h < 2; h++)
        if (lane + 32 * h < nsplit)
          wts[qi][lane + 32 * h] = w[h] * inv;
    }
  __syncthreads ();
  /* whole warps go round together (the quantization below shuffles) */
  for (int i0 = 0; i0 < QN * HD / 4; i0 += NT)
    {
      const int i = i0 + tid;
      const bool on = i < QN * HD / 4;
      const int qi = on ? i / (HD / 4) : 0, d4 = i - qi * (HD / 4);
      float4 acc = make_float4 (0.f, 0.f, 0.f, 0.f);
      if (on)
        {
#pragma unroll 16
          for (int s = 0; s < nsplit; s++)
            {
              const float ww = wts[qi][s];
              const float4 v = __ldcg ((const float4 *) (a.part_o + (hb + (size_t) s * MAXQ + qi) * HD) + d4);
              acc.x = fmaf (ww, v.x, acc.x);
              acc.y = fmaf (ww, v.y, acc.y);
              acc.z = fmaf (ww, v.z, acc.z);
              acc.w = fmaf (ww, v.w, acc.w);
            }
        }
      const int t = qi / G, g = qi - t * G;
      const size_t o = (size_t) t * a.nq * HD + (size_t) (kvh * G + g) * HD + 4 * d4;
      store_out4 (a, o, acc, on, d4);
    }
  if (tid == 0)
    a.counters[kvh] = 0;
}

/* ---- version 3 (session 3): tensor cores, a warp per 16-key step ----------
 * Session 2's kernel (above, HONE_ATTN_DECODE=old) spent its time in issue:
 * a thread per key converting K to f32 and a P·V loop from shared memory,
 * three block barriers a 64-key tile and no load in flight while it computed
 * (15–22 % of bandwidth at 4k–16k). Here each warp walks its own 16-key
 * steps with no block barrier: K and V arrive by cp.async into a per-warp
 * ring (each thread reads back only the 16-byte pieces it copied, so
 * cp.async.wait_group is the only synchronisation), scores and P·V are
 * mma.sync m16n8k16 with keys as M and up to 8 queries as N:
 *   Sᵀ = K·Qᵀ   A = the K rows as loaded (head dims permuted alike in K and
 *               Q: a thread's 16-byte piece of dims 8(l%4)+32c.. serves two
 *               k-steps), B = q;
 *   Oᵀ += Vᵀ·Pᵀ A = V rows transposed in registers (movmatrix), B = P
 *               (the Sᵀ accumulator, transposed by movmatrix).
 * f16 operands would cost ~1e-3 of accuracy, so q and P are each split into
 * f16 hi + lo parts (two MMAs, f32 accumulate): error ~1e-6 like the f32
 * kernel, K and V are f16 anyway. The arithmetic is then a few hundred
 * instructions a 16-key step, and the kernel is a stream of 16-byte copies.
 * The warps of a block merge through shared memory; one split writes the
 * output directly (no partials, no second phase: the short-context path);
 * otherwise the last block of a (KV head, query group) combines the splits as
 * before. More than 8 queries (several tokens, G·n_tok > 8): blockIdx.z takes
 * groups of 8 (each re-reads K/V, mostly from L2).
 * Measured (RESULTS-cuda.md, "Decode attention, session 3"): 1.3–1.7× session
 * 2's kernel from 1k keys up, but still ~2.3 TB/s at 32k: not the copies
 * (coalescing and ring depth changed nothing), not the fence (session 3's
 * release call). Session 4's counters (ncu, 4k and 16k): 0.3 instructions
 * issued a cycle a scheduler with 3.7 warps resident and 0.5 eligible, the
 * stalls short scoreboard and MIO throttle first (LDGSTS, LDS, MOVM and SHFL
 * share the MIO queue: ~80 of them a warp a 16-key step) then long
 * scoreboard; SMs idle 31–41 % of the launch (start, imbalance, the last
 * block's combine): latency-bound, DRAM at 19 % (4k) and 40 % (16k).
 * Session 43 (a per-block trace of the 8B step, ncu by SASS region): the
 * warp merge after the main loop was half of the instructions at 4k (2.8 µs
 * a block) — it now weighs the warps once a query and merges 4 values a
 * thread for the block's queries only: 4k 18.1 → 15.6 µs, 128 keys 8.0 →
 * 6.4 µs (H100). The last block's combine of 64 splits (~6 µs of the 4k
 * step's tail: 128 KB of partials through one SM) became two levels of at
 * most 8 (below): 4k 15.4 → 15.0 µs, the 8B step +1.8 %. Session 44: V's
 * fragments by ldmatrix.trans (80 → 48 MIO instructions a warp-step, eb7c5a9)
 * moved 4k–32k by only −1 % and no engine row, so the MIO queue is not the
 * main loop's bound after all; not kept. A 4k layer whose K/V sit in L2
 * still takes 13 of its 15 µs: its length is the chain of dependent steps. */
#define V3_QG 8                 /* queries a block (the MMA's N) */

static __device__ __forceinline__ void
v3_mma (float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1)
{
  asm ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
       : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* 8×8 b16 transpose across the warp: lane l's (row l/4, cols 2(l%4)..+1)
 * becomes (row 2(l%4)..+1, col l/4) of the original. */
static __device__ __forceinline__ uint32_t
v3_trans (uint32_t x)
{
  uint32_t y;
  asm ("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

/* (x, y) as f16 pairs hi + lo with hi + lo = (x, y) to ~2^-22 */
static __device__ __forceinline__ void
v3_split (float x, float y, uint32_t &hi, uint32_t &lo)
{
  const __half2 h = __floats2half2_rn (x, y);
  const float2 hf = __half22float2 (h);
  const __half2 l = __floats2half2_rn (x - hf.x, y - hf.y);
  hi = *(const uint32_t *) &h;
  lo = *(const uint32_t *) &l;
}

static __device__ __forceinline__ void
v3_cp16 (void *smem, const void *gmem, bool ok)
{
  const unsigned s = (unsigned) __cvta_generic_to_shared (smem);
  asm volatile ("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(ok ? 16 : 0) : "memory");
}

static __device__ __forceinline__ void
v3_commit (void)
{
  asm volatile ("cp.async.commit_group;" ::: "memory");
}

template <int N>
static __device__ __forceinline__ void
v3_wait (void)
{
  asm volatile ("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* The block's final [8][HD] values (fin, f32) to out, and, for a quantized o
 * projection, int8 blocks of 32 with hone_k_quantize's arithmetic (8 adjacent
 * threads × 4 values a block: the same bits as quant32_store). */
template <int HD, int NTH>
static __device__ __forceinline__ void
v3_store (const AttnArgs &a, const float *fin, int kvh, int z, int qn, int tid)
{
  for (int i0 = 0; i0 < qn * HD / 4; i0 += NTH)   /* qn is the block's: whole warps call store_out4 */
    {
      const int i = i0 + tid, q = i / (HD / 4), d4 = i - q * (HD / 4);
      const bool on = q < qn;
      const float4 acc = on ? *(const float4 *) (fin + q * HD + 4 * d4) : make_float4 (0.f, 0.f, 0.f, 0.f);
      const int qi = V3_QG * z + q, t = qi / a.G, g = qi - t * a.G;
      const size_t o = (size_t) t * a.nq * HD + (size_t) (kvh * a.G + g) * HD + 4 * d4;
      store_out4 (a, o, acc, on, d4);
    }
}

/* Version 4 additions (session 4), template switches of the same kernel:
 * EARLY: pos and the split's page list are read before pdl_wait (they are
 *   written by the host or by the previous step, not by the kernels just
 *   before this one), so at short context the chain after the wait is K/V →
 *   merge → store. Both are read again after the wait, in the same round as
 *   the first K/V copies; if either changed (a predecessor in the PDL chain
 *   did write them after all) the block drains its copies and starts over
 *   from the fresh values, so the result never depends on the guess.
 *   EARLY 2 (session 15) also issues, before the wait, the copies of the
 *   keys older than pos in the first NH − 1 half steps (the prologue): they
 *   were written by earlier steps, not by the kernels in front, so their
 *   DRAM round trip overlaps the predecessor's tail and goes ahead of the
 *   next kernel's early weight loads. The rows from pos on (this step's
 *   keys, written by the q|k|v epilogue just before) are skipped there and
 *   copied after the wait, in a group of their own that the warp waits for.
 * CL > 1: the blocks are launched in clusters of CL splits (thread block
 *   clusters, sm_90) and combine through distributed shared memory: no
 *   global partials, no atomic, no second round trip when ctx <= CL·128
 *   (one cluster, CL splits of <= 128 keys); longer contexts combine within
 *   each cluster first (TWO), then the last cluster's first block combines
 *   the <= 8 cluster results (one round of loads instead of four for 64
 *   splits); without TWO they combine as session 3's kernel does. */
#define V3_SHORT 128            /* keys a block at most on the one-cluster path */

/* NW warps a block, RING bytes of cp.async ring a warp; COAL: the copies
 * are whole 512-byte runs a warp instruction (lane = 16-byte chunk of the
 * rows) stored where the lane that reads the fragment expects them (XOR
 * swizzle: no bank conflicts either way), so a __syncwarp orders the ring;
 * else every lane copies the pieces it reads (4 lanes a 64-byte run). */
template <int HD, int NW, int RING, bool COAL, int EARLY, int CL, bool TWO>
__global__ void __launch_bounds__ (NW * 32, 16 / NW)
attn3_kernel (AttnArgs a)
{
  constexpr int NC = HD / 32;                 /* 32-dim chunks of a row */
  constexpr int HV = 2 * NC;                  /* 16-byte pieces a lane copies a half step (K or V of 16 keys) */
  constexpr int NH = RING / (HV * 16 * 32);   /* half steps the ring holds (12 KB: 3 at hd 128, 6 at hd 64) */
  constexpr int NT3 = NW * 32;
  static_assert (NH >= 2, "ring too small");
  extern __shared__ __align__ (16) unsigned char sm3[];
  __shared__ float wm[NW][V3_QG], wl[NW][V3_QG];
  __shared__ float wts[V3_QG][HONE_K_ATTN_MAX_SPLITS];
  __shared__ float bm[V3_QG], bl[V3_QG];      /* CL: this block's merged (m, l) a query, read by the cluster */
  __shared__ int last;

  TRACE_ENTRY (a.trace);
  const int kvh = blockIdx.x, split = blockIdx.y, z = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (a.trigger == 0 || (a.trigger == 3 && EARLY < 2))
    pdl_trigger ();
  if (warp == 0)
    prefetch_slice (a.pf, (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x,
                    gridDim.x * gridDim.y * gridDim.z, lane);
  /* The split plan from pos: keys k0..k1 of this block, nsplit splits, ncl
   * clusters (CL > 1; a block of an active cluster with no keys still takes
   * part in the cluster's combine). Returns whether this block runs.
   * Splits of at least min_chunk keys (at most MAX_SPLITS), multiples of 16;
   * min_chunk 0: 64 keys under 256, else 32 (the fastest measured for the
   * default shape: RESULTS-cuda.md, "Decode attention, session 3"); CL > 1
   * with min_chunk 0 and ctx <= CL·V3_SHORT: one cluster of CL splits. */
  int nsplit = 1, ncl = 1, k0 = 0, k1 = 0;
  bool ccomb = false;                         /* the cluster combines (else session 3's way) */
  auto plan = [&] (int pos_) -> bool {
    const int ctx = pos_ + a.n_tok;
    int chunk;
    const bool one_cluster = CL > 1 && a.min_chunk <= 0 && ctx <= CL * V3_SHORT;
    ccomb = one_cluster || (CL > 1 && TWO);
    if (one_cluster)
      {
        nsplit = CL;
        chunk = (((ctx + CL - 1) / CL) + 15) & ~15;
      }
    else
      {
        const int mc = a.min_chunk > 0 ? a.min_chunk : ctx < 256 ? 64 : 32;
        nsplit = ctx / mc;
        const int cap = CL > 1 && a.max_splits > 0 ? a.max_splits : HONE_K_ATTN_MAX_SPLITS;
        nsplit = nsplit < 1 ? 1 : nsplit > cap ? cap : nsplit;
        chunk = (ctx + nsplit - 1) / nsplit;
        chunk = (chunk + 15) & ~15;
        nsplit = (ctx + chunk - 1) / chunk;
      }
    ncl = ccomb ? (nsplit + CL - 1) / CL : 1;
    k0 = min (ctx, split * chunk);
    k1 = min (ctx, k0 + chunk);
    return ccomb ? split < ncl * CL : split < nsplit;
  };
  /* the split's pages, one a lane (a step's 16 keys share a page) */
  int p0 = 0, np = 0, mypage = 0;
  auto pages = [&] (void) {
    p0 = k0 / HONE_K_KV_BLOCK;
    np = k1 > k0 ? (k1 - 1) / HONE_K_KV_BLOCK - p0 + 1 : 0;
    mypage = lane < np ? (EARLY ? __ldcg (a.block_table + p0 + lane) : a.block_table[p0 + lane]) : 0;
  };
  int pos = 0;
  bool run = false;
  if (EARLY)
    {
      /* __ldcg: the late read below must not hit a line this one left in L1 */
      pos = __ldcg (a.pos);
      run = plan (pos);
      if (run)
        pages ();
    }

  /* this warp's 16-key steps: warp, warp + NW, … of the split */
  int nh = 0;                                 /* half steps: K of a step, then its V */
  auto steps = [&] (void) {
    const int ns = (k1 - k0 + 15) >> 4;
    const int nsw = ns > warp ? (ns - warp + NW - 1) / NW : 0;
    nh = 2 * nsw;
  };
  int4 *ring = (int4 *) sm3 + (size_t) warp * NH * HV * 32;
  const int ksub = lane >> 2, dsub = (lane & 3) * 8;

  /* half step h's copies; which rows: ALL (keys past k1 zero-filled), OLD
   * (keys below pos only, past k1 zero-filled, pos..k1 left alone) or NEW
   * (pos..k1 only); returns whether any lane of the warp copied a row */
  enum { ALL, OLD, NEW };
  auto issue = [&] (int h, int which) -> bool {
    const int s = warp + (h >> 1) * NW, kb = k0 + 16 * s;
    const int rel = kb / HONE_K_KV_BLOCK - p0;
    const int pg_sh = __shfl_sync (0xffffffffu, mypage, rel & 31);
    const int page = rel < 32 ? pg_sh : a.block_table[kb / HONE_K_KV_BLOCK];
    const __half *pool = (h & 1) ? a.v_pool : a.k_pool;
    const __half *base = pool + (((size_t) page * a.nkv + kvh) * HONE_K_KV_BLOCK + (kb & (HONE_K_KV_BLOCK - 1))) * HD;
    int4 *slot = ring + (size_t) (h % NH) * HV * 32;
    bool any = false;
    auto cp = [&] (void *dst, const void *src, int key) {
      const bool in = key < k1, isnew = key >= pos;
      if (which == ALL || (which == OLD && !(in && isnew)))
        v3_cp16 (dst, src, in && (which == ALL || !isnew));
      else if (which == NEW && in && isnew)
        {
          v3_cp16 (dst, src, true);
          any = true;
        }
    };
    if (COAL)
#pragma unroll
      for (int j = 0; j < HV; j++)
        {
          /* chunk g of the 16 rows: key g / (HD/8), dims 8·(g % (HD/8)) */
          const int g = j * 32 + lane, kk = g / (HD / 8), cc = g % (HD / 8);
          const int i = (kk >> 3) * NC + (cc >> 2), lp = 4 * (kk & 7) + (cc & 3);
          cp (slot + i * 32 + (lp ^ ((i & 1) << 2)), base + kk * HD + cc * 8, kb + kk);
        }
    else
#pragma unroll
      for (int i = 0; i < HV; i++)
        {
          const int kk = ksub + 8 * (i / NC), c = i % NC;
          cp (slot + i * 32 + lane, base + kk * HD + dsub + 32 * c, kb + kk);
        }
    return __any_sync (0xffffffffu, any);
  };
  /* piece i of a ring slot as this lane's fragment */
  auto piece = [&] (const int4 *slot, int i) -> int4 {
    return slot[i * 32 + (COAL ? lane ^ ((i & 1) << 2) : lane)];
  };
  /* the first NH − 1 half steps, all in flight at once */
  auto prologue = [&] (int which) {
#pragma unroll
    for (int p = 0; p < NH - 1; p++)
      {
        if (p < nh)
          issue (p, which);
        v3_commit ();
      }
  };
  if (EARLY >= 2)
    {
      if (run)
        {
          steps ();
          prologue (OLD);
        }
      if (a.trigger == 3)
        pdl_trigger ();                       /* HONE_ATTN_TRIGGER=copies: after them */
    }

  pdl_wait ();
  TRACE_WAITED ();
  int pos_l = 0, page_l = 0;
  if (!EARLY)
    {
      pos = *a.pos;
      if (!plan (pos))
        return;
      pages ();
    }
  else
    {
      pos_l = __ldcg (a.pos);
      page_l = run && lane < np ? __ldcg (a.block_table + p0 + lane) : 0;
    }
  const int qn = min (V3_QG, a.QN - V3_QG * z);

  /* q as the B operand: query lane/4 of the group, dims 8(lane%4) + 32c + 0..7;
   * loaded here, split into f16 hi + lo after the first copies are issued */
  float4 qx[NC][2];
  {
    const int q = lane >> 2, qi = V3_QG * z + q;
    if (q < qn)
      {
        const int t = qi / a.G, g = qi - t * a.G;
        const float *qp = a.qkv + (size_t) t * (a.nq + 2 * a.nkv) * HD + (size_t) (kvh * a.G + g) * HD + (lane & 3) * 8;
#pragma unroll
        for (int c = 0; c < NC; c++)
          {
            qx[c][0] = *(const float4 *) (qp + 32 * c);
            qx[c][1] = *(const float4 *) (qp + 32 * c + 4);
          }
      }
    else
#pragma unroll
      for (int c = 0; c < NC; c++)
        qx[c][0] = qx[c][1] = make_float4 (0.f, 0.f, 0.f, 0.f);
  }

  if (!EARLY)
    {
      steps ();
      prologue (ALL);
    }
  else
    {
      bool fresh = false;                     /* EARLY 2: this warp copied this step's rows */
      if (run && EARLY >= 2)
        {
          for (int p = 0; p < NH - 1 && p < nh; p++)
            fresh |= issue (p, NEW);
          v3_commit ();
        }
      else if (run)
        {
          steps ();
          prologue (ALL);
        }
      /* the guess checked: pos and the pages read again after the wait (their
       * loads were issued before the copies above, so this costs no round) */
      const bool guess_wrong = __syncthreads_or (pos_l != pos || page_l != mypage);
      TRACE_MARK (4);
      if (guess_wrong)
        {
          v3_wait<0> ();                      /* the guessed copies land before the ring is reused */
          __syncwarp ();
          pos = pos_l;
          run = plan (pos);
          if (!run)
            return;
          pages ();
          steps ();
          prologue (ALL);
        }
      else if (!run)
        return;
      else if (fresh)
        v3_wait<0> ();                        /* this step's rows (one L2 round, beside q's) */
    }

  uint32_t qh[NC][4], ql[NC][4];
#pragma unroll
  for (int c = 0; c < NC; c++)
    {
      v3_split (qx[c][0].x, qx[c][0].y, qh[c][0], ql[c][0]);
      v3_split (qx[c][0].z, qx[c][0].w, qh[c][1], ql[c][1]);
      v3_split (qx[c][1].x, qx[c][1].y, qh[c][2], ql[c][2]);
      v3_split (qx[c][1].z, qx[c][1].w, qh[c][3], ql[c][3]);
    }

  float o[HD / 16][4];
#pragma unroll
  for (int j = 0; j < HD / 16; j++)
    o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float ma = -INFINITY, mb = -INFINITY, la = 0.f, lb = 0.f;   /* queries 2(lane%4), +1; l per lane */
  uint32_t pbh0 = 0, pbh1 = 0, pbl0 = 0, pbl1 = 0;            /* Pᵀ as B (keys 0–7, 8–15), hi/lo */
  const int qa = V3_QG * z + (lane & 3) * 2;
  const int lim_a = pos + qa / a.G, lim_b = pos + (qa + 1) / a.G;   /* causal: last key a query sees */

  for (int h = 0; h < nh; h++)
    {
      if (COAL)
        __syncwarp ();                        /* the slot refilled next was read by other lanes */
      if (h + NH - 1 < nh)
        issue (h + NH - 1, ALL);
      v3_commit ();
      v3_wait<NH - 1> ();
      if (COAL)
        __syncwarp ();                        /* other lanes' copies into this slot are visible */
      const int4 *sl = ring + (size_t) (h % NH) * HV * 32;
      if (!(h & 1))
        {
          /* Sᵀ (16 keys × 8 queries) = K·Qᵀ, q hi and lo in two accumulators */
          float sh[4] = { 0.f, 0.f, 0.f, 0.f }, slo[4] = { 0.f, 0.f, 0.f, 0.f };
#pragma unroll
          for (int c = 0; c < NC; c++)
            {
              const int4 ka = piece (sl, c), kb8 = piece (sl, NC + c);
              v3_mma (sh, ka.x, kb8.x, ka.y, kb8.y, qh[c][0], qh[c][1]);
              v3_mma (slo, ka.x, kb8.x, ka.y, kb8.y, ql[c][0], ql[c][1]);
              v3_mma (sh, ka.z, kb8.z, ka.w, kb8.w, qh[c][2], qh[c][3]);
              v3_mma (slo, ka.z, kb8.z, ka.w, kb8.w, ql[c][2], ql[c][3]);
            }
          const int kb = k0 + 16 * (warp + (h >> 1) * NW);
          const int key0 = kb + ksub, key1 = key0 + 8;
          float s0 = sh[0] + slo[0], s1 = sh[1] + slo[1], s2 = sh[2] + slo[2], s3 = sh[3] + slo[3];
          s0 = key0 < k1 && key0 <= lim_a ? s0 : -INFINITY;
          s1 = key0 < k1 && key0 <= lim_b ? s1 : -INFINITY;
          s2 = key1 < k1 && key1 <= lim_a ? s2 : -INFINITY;
          s3 = key1 < k1 && key1 <= lim_b ? s3 : -INFINITY;
          /* online softmax per query over the 8 lanes that share lane%4 */
          float ta = fmaxf (s0, s2), tb = fmaxf (s1, s3);
#pragma unroll
          for (int m = 4; m < 32; m <<= 1)
            {
              ta = fmaxf (ta, __shfl_xor_sync (0xffffffffu, ta, m));
              tb = fmaxf (tb, __shfl_xor_sync (0xffffffffu, tb, m));
            }
          const float na = fmaxf (ma, ta), nb = fmaxf (mb, tb);
          float p0 = 0.f, p1 = 0.f, p2 = 0.f, p3 = 0.f, aa = 1.f, ab = 1.f;
          if (na != -INFINITY)
            {
              p0 = __expf (s0 - na);
              p2 = __expf (s2 - na);
              aa = ma == -INFINITY ? 0.f : __expf (ma - na);
            }
          if (nb != -INFINITY)
            {
              p1 = __expf (s1 - nb);
              p3 = __expf (s3 - nb);
              ab = mb == -INFINITY ? 0.f : __expf (mb - nb);
            }
          ma = na;
          mb = nb;
          la = la * aa + p0 + p2;
          lb = lb * ab + p1 + p3;
#pragma unroll
          for (int j = 0; j < HD / 16; j++)
            {
              o[j][0] *= aa;
              o[j][1] *= ab;
              o[j][2] *= aa;
              o[j][3] *= ab;
            }
          uint32_t h01, l01, h23, l23;
          v3_split (p0, p1, h01, l01);
          v3_split (p2, p3, h23, l23);
          pbh0 = v3_trans (h01);
          pbl0 = v3_trans (l01);
          pbh1 = v3_trans (h23);
          pbl1 = v3_trans (l23);
        }
      else
        {
          /* Oᵀ (dims × 8 queries) += Vᵀ·Pᵀ; m-tile (c, j): dims of the pieces j, j+1 */
#pragma unroll
          for (int c = 0; c < NC; c++)
            {
              const int4 va = piece (sl, c), vb = piece (sl, NC + c);
              const uint32_t a0 = v3_trans (va.x), a1 = v3_trans (va.y), a2 = v3_trans (vb.x), a3 = v3_trans (vb.y);
              v3_mma (o[2 * c], a0, a1, a2, a3, pbh0, pbh1);
              v3_mma (o[2 * c], a0, a1, a2, a3, pbl0, pbl1);
              const uint32_t c0 = v3_trans (va.z), c1 = v3_trans (va.w), c2 = v3_trans (vb.z), c3 = v3_trans (vb.w);
              v3_mma (o[2 * c + 1], c0, c1, c2, c3, pbh0, pbh1);
              v3_mma (o[2 * c + 1], c0, c1, c2, c3, pbl0, pbl1);
            }
        }
    }
  v3_wait<0> ();
  TRACE_MAIN ();
  if (a.trigger == 1)
    pdl_trigger ();
#pragma unroll
  for (int m = 4; m < 32; m <<= 1)
    {
      la += __shfl_xor_sync (0xffffffffu, la, m);
      lb += __shfl_xor_sync (0xffffffffu, lb, m);
    }
  __syncthreads ();                           /* every warp is done with its ring */

  /* the warps' (m, l, O) to shared memory: wo[warp][q][HD], the queries of
   * this block only (qn of 8) */
  float *wo = (float *) sm3;
  float *fin = wo + NW * V3_QG * HD;          /* [8][HD] */
  {
    const int ql0 = (lane & 3) * 2, x = lane >> 2;
    const bool on0 = ql0 < qn, on1 = ql0 + 1 < qn;
    float *w0 = wo + ((size_t) warp * V3_QG + ql0) * HD, *w1 = w0 + HD;
#pragma unroll
    for (int c = 0; c < NC; c++)
#pragma unroll
      for (int pr = 0; pr < 2; pr++)
#pragma unroll
        for (int hf = 0; hf < 2; hf++)
          {
            /* row x (+8) of m-tile (c, pr) is dim (x/2)·8 + 32c + 4pr + 2hf + x%2 */
            const int d = (x >> 1) * 8 + 32 * c + 4 * pr + 2 * hf + (x & 1);
            if (on0)
              w0[d] = o[2 * c + pr][2 * hf];
            if (on1)
              w1[d] = o[2 * c + pr][2 * hf + 1];
          }
    if (x == 0)
      {
        wm[warp][ql0] = ma;
        wm[warp][ql0 + 1] = mb;
        wl[warp][ql0] = la;
        wl[warp][ql0 + 1] = lb;
      }
  }
  __syncthreads ();
  /* each warp's weight a query, exp(m_w − M), and the block's (M, L): once a
   * query here, not once a value (session 43: the merge recomputed them for
   * every one of the 8 × HD values and was half the kernel's instructions) */
  if (tid < V3_QG)
    {
      const int q = tid;
      float M = -INFINITY;
#pragma unroll
      for (int w = 0; w < NW; w++)
        M = fmaxf (M, wm[w][q]);
      float L = 0.f;
#pragma unroll
      for (int w = 0; w < NW; w++)
        {
          const float f = wm[w][q] == -INFINITY ? 0.f : __expf (wm[w][q] - M);
          L += f * wl[w][q];
          wl[w][q] = f;                       /* wl now holds the weights */
        }
      bm[q] = M;
      bl[q] = L;
    }
  __syncthreads ();
  const size_t hb = (size_t) kvh * HONE_K_ATTN_MAX_SPLITS * MAXQ;
  /* merge the warps, 4 values a thread: normalized to fin when this is the
   * only split, unnormalized to fin (the cluster combines) or else the
   * block's partial (unnormalized O, m, l) as session 2's kernel writes it */
  for (int i = tid; i < qn * HD / 4; i += NT3)
    {
      const int q = i / (HD / 4), d4 = i - q * (HD / 4);
      float4 O = make_float4 (0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int w = 0; w < NW; w++)
        {
          const float f = wl[w][q];
          const float4 v = *(const float4 *) (wo + ((size_t) w * V3_QG + q) * HD + 4 * d4);
          O.x = fmaf (f, v.x, O.x);
          O.y = fmaf (f, v.y, O.y);
          O.z = fmaf (f, v.z, O.z);
          O.w = fmaf (f, v.w, O.w);
        }
      const float M = bm[q], L = bl[q];
      if (ccomb)
        *(float4 *) (fin + q * HD + 4 * d4) = O;
      else if (nsplit == 1)
        {
          *(float4 *) (fin + q * HD + 4 * d4) = L > 0.f ? make_float4 (O.x / L, O.y / L, O.z / L, O.w / L)
                                                        : make_float4 (0.f, 0.f, 0.f, 0.f);
        }
      else
        {
          const size_t r = hb + (size_t) split * MAXQ + V3_QG * z + q;
          *(float4 *) (a.part_o + r * HD + 4 * d4) = O;
          if (d4 == 0)
            a.part_ml[r] = make_float2 (M, L);
        }
    }
  TRACE_MARK (5);
  if (CL > 1 && ccomb)
    {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
      __trap ();                              /* clusters are sm_90's; the launch fails before this anyway */
#else
      /* The cluster's CL blocks combine through distributed shared memory:
       * block rank r takes query r, a thread a head dim, and reads every
       * block's (m, l) and O of it (one round of DSMEM loads). */
      cg::cluster_group cl = cg::this_cluster ();
      cl.sync ();                             /* every block's fin, bm, bl written */
      TRACE_MARK (6);
      const int r = (int) cl.block_rank (), c = split / CL;
      if (r < qn)
        for (int d = tid; d < HD; d += NT3)   /* whole warps: HD and NT3 are multiples of 32 */
          {
            float Mb[CL], Lb[CL], Ob[CL];
#pragma unroll
            for (int b = 0; b < CL; b++)
              {
                Mb[b] = cl.map_shared_rank (bm, b)[r];
                Lb[b] = cl.map_shared_rank (bl, b)[r];
                Ob[b] = cl.map_shared_rank (fin, b)[r * HD + d];
              }
            float M = -INFINITY;
#pragma unroll
            for (int b = 0; b < CL; b++)
              M = fmaxf (M, Mb[b]);
            float L = 0.f, O = 0.f;
#pragma unroll
            for (int b = 0; b < CL; b++)
              {
                const float f = Mb[b] == -INFINITY ? 0.f : __expf (Mb[b] - M);
                L += f * Lb[b];
                O += f * Ob[b];
              }
            if (ncl == 1)
              {
                const float v = L > 0.f ? O / L : 0.f;
                const int qi = V3_QG * z + r, t = qi / a.G, g = qi - t * a.G;
                const size_t o = (size_t) t * a.nq * HD + (size_t) (kvh * a.G + g) * HD + d;
                a.out[o] = v;
                if (a.out_q)   /* a warp is one block of 32: quant32_store = hone_k_quantize's bits */
                  quant32_store (v, a.out_q + (o - lane), a.out_ds + (o >> 5), lane);
                if (a.out_h)   /* and hone_k_pack_h16's */
                  {
                    const float amax = warp_max (fabsf (v));
                    const float inv = amax > 0.f ? 32767.f / amax : 0.f;
                    const int q = h16_fixed (v, inv);
                    const int sum = (int) warp_sum ((float) q);
                    const int cols = a.nq * a.hd;
                    const size_t t = o / (size_t) cols;
                    const int j = (int) (o - t * cols);
                    h16_store (a.out_h, cols, t, j, q);
                    if (lane == 0)
                      h16_store_ds (a.out_hd, cols, t, j >> 5, amax, sum);
                  }
              }
            else
              {
                const size_t rr = hb + (size_t) c * MAXQ + V3_QG * z + r;
                a.part_o[rr * HD + d] = O;
                if (d == 0)
                  a.part_ml[rr] = make_float2 (M, L);
                __threadfence ();             /* release, before the cluster barrier below */
              }
          }
      cl.sync ();                             /* no block leaves while others read its shared memory */
      if (ncl == 1 || r != 0)
        return;
      unsigned *cnt = a.counters + a.nkv + kvh * 8 + z;
      if (tid == 0)
        {
          __threadfence ();
          last = atomicAdd (cnt, 1u) == (unsigned) (ncl - 1);
          if (last)
            __threadfence ();   /* acquire: the other clusters' partials */
        }
      __syncthreads ();
      if (!last)
        return;
      for (int q = warp; q < qn; q += NW)
        {
          const float2 ml = lane < ncl ? __ldcg (&a.part_ml[hb + (size_t) lane * MAXQ + V3_QG * z + q])
                                       : make_float2 (-INFINITY, 0.f);
          const float M = warp_max (ml.x);
          const float w = ml.x == -INFINITY ? 0.f : __expf (ml.x - M);
          const float den = warp_sum (w * ml.y);
          const float inv = den > 0.f ? 1.f / den : 0.f;
          if (lane < ncl)
            wts[q][lane] = w * inv;
        }
      __syncthreads ();
      for (int i = tid; i < qn * HD / 4; i += NT3)
        {
          const int q = i / (HD / 4), d4 = i - q * (HD / 4);
          const float4 *src = (const float4 *) (a.part_o + (hb + V3_QG * z + q) * HD) + d4;
          float4 v[CL];
#pragma unroll
          for (int cc = 0; cc < CL; cc++)
            v[cc] = cc < ncl ? __ldcg (src + (size_t) cc * MAXQ * HD / 4) : make_float4 (0.f, 0.f, 0.f, 0.f);
          float4 acc = make_float4 (0.f, 0.f, 0.f, 0.f);
#pragma unroll
          for (int cc = 0; cc < CL; cc++)
            if (cc < ncl)
              {
                const float ww = wts[q][cc];
                acc.x = fmaf (ww, v[cc].x, acc.x);
                acc.y = fmaf (ww, v[cc].y, acc.y);
                acc.z = fmaf (ww, v[cc].z, acc.z);
                acc.w = fmaf (ww, v[cc].w, acc.w);
              }
          *(float4 *) (fin + q * HD + 4 * d4) = acc;
        }
      if (tid == 0)
        *cnt = 0;
      __syncthreads ();
      v3_store<HD, NT3> (a, fin, kvh, z, qn, tid);
      return;
#endif
    }
  if (nsplit > 1)
    {
      /* Publish the partials: the block's writes are ordered before thread 0's
       * fence by the barrier, and one thread's fence + atomic is the
       * last-block-done handshake (the pattern of cooperative groups' grid
       * sync). The all-thread __threadfence it replaced was suspected of the
       * cost that grows with the splits; measured the same (16k: 36.7 vs
       * 37.0 µs, RESULTS-cuda.md "Decode attention, session 3"), kept as the
       * lighter form. */
      __syncthreads ();
      unsigned *cnt = a.counters + a.nkv + kvh * 8 + z;
      /* Two levels of at most 8 (session 43) where they measured faster: at
       * ≤ 8 splits (one merge of one round of loads) and beyond 32; at 9–32
       * the flat combine's one handshake beat the extra level (H100, shape G:
       * 512 keys 7.96 vs 9.22 µs, 1k 8.81 vs 9.55; RESULTS-cuda.md
       * "Session 44"). */
      if (a.combine == 2 || (a.combine == 0 && (nsplit <= 8 || nsplit > 32)))
        {
          /* The last block of each group of 8 consecutive splits merges the
           * group into the partial slot of its first split, the last of
           * those merges the groups. Each merge is one round of loads ((m, l)
           * and O of its ≤ 8 inputs together, weighed in registers), spread
           * over one SM a group instead of 64 splits' partials through one
           * SM (~6 µs at 4k). */
          const int ngr = (nsplit + 7) >> 3;
          const int g = split >> 3, gn = min (8, nsplit - 8 * g);
          /* one merge: n ≤ 8 inputs at slots s0 + j·stride → fin (normalized, final) or
           * the partial slot s0 (unnormalized, with its (M, L): a group) */
          auto merge8 = [&] (int s0, int stride, int n, bool final_) {
            for (int c = tid; c < qn * HD / 4; c += NT3)
              {
                const int q = c / (HD / 4), d4 = c - q * (HD / 4);
                float2 ml[8];
                float4 v[8];
#pragma unroll
                for (int j = 0; j < 8; j++)
                  {
                    const size_t r = hb + (size_t) (s0 + j * stride) * MAXQ + V3_QG * z + q;
                    ml[j] = j < n ? __ldcg (a.part_ml + r) : make_float2 (-INFINITY, 0.f);
                    v[j] = j < n ? __ldcg ((const float4 *) (a.part_o + r * HD) + d4) : make_float4 (0.f, 0.f, 0.f, 0.f);
                  }
                float M = -INFINITY;
#pragma unroll
                for (int j = 0; j < 8; j++)
                  M = fmaxf (M, ml[j].x);
                float L = 0.f;
                float4 acc = make_float4 (0.f, 0.f, 0.f, 0.f);
#pragma unroll
                for (int j = 0; j < 8; j++)
                  {
                    const float w = ml[j].x == -INFINITY ? 0.f : __expf (ml[j].x - M);
                    L = fmaf (w, ml[j].y, L);
                    acc.x = fmaf (w, v[j].x, acc.x);
                    acc.y = fmaf (w, v[j].y, acc.y);
                    acc.z = fmaf (w, v[j].z, acc.z);
                    acc.w = fmaf (w, v[j].w, acc.w);
                  }
                if (final_)
                  {
                    const float inv = L > 0.f ? 1.f / L : 0.f;
                    *(float4 *) (fin + q * HD + 4 * d4) = make_float4 (acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
                  }
                else
                  {
                    const size_t r = hb + (size_t) s0 * MAXQ + V3_QG * z + q;
                    *(float4 *) (a.part_o + r * HD + 4 * d4) = acc;   /* this thread's own value: read above */
                    if (d4 == 0)
                      {
                        bm[q] = M;                    /* written to part_ml after every thread has read it */
                        bl[q] = L;
                      }
                  }
              }
          };
          if (ngr > 1)
            {
              unsigned *gcnt = a.counters + 9 * a.nkv + (kvh * 8 + z) * 8 + g;
              if (tid == 0)
                {
                  __threadfence ();
                  last = atomicAdd (gcnt, 1u) == (unsigned) (gn - 1);
                  if (last)
                    __threadfence ();
                }
              __syncthreads ();
              if (!last)
                return;
              merge8 (8 * g, 1, gn, false);
              __syncthreads ();
              if (tid < qn)
                a.part_ml[hb + (size_t) (8 * g) * MAXQ + V3_QG * z + tid] = make_float2 (bm[tid], bl[tid]);
              if (tid == 0)
                *gcnt = 0;
              __syncthreads ();
            }
          if (tid == 0)
            {
              __threadfence ();
              last = atomicAdd (cnt, 1u) == (unsigned) ((ngr > 1 ? ngr : nsplit) - 1);
              if (last)
                __threadfence ();
            }
          __syncthreads ();
          if (!last)
            return;
          TRACE_MARK (6);
          if (ngr > 1)
            merge8 (0, 8, ngr, true);
          else
            merge8 (0, 1, nsplit, true);
          if (tid == 0)
            *cnt = 0;
          __syncthreads ();
          v3_store<HD, NT3> (a, fin, kvh, z, qn, tid);
          return;
        }
      if (tid == 0)
        {
          __threadfence ();
          last = atomicAdd (cnt, 1u) == (unsigned) (nsplit - 1);
          if (last)
            __threadfence ();   /* acquire: the other splits' partials, read below through L2 */
        }
      __syncthreads ();
      if (!last)
        return;
      TRACE_MARK (6);
      const int ncol = qn * HD / 4;
      const int NG = ncol >= NT3 ? 1 : min (NT3 / ncol, NW);   /* group g's sums at wo + g·8·HD */
      const int grp = tid / ncol;
      /* split weights: a warp per query, lanes over the splits (the block's
       * qn queries only: at most 4 of them is one round of loads) */
      for (int q = warp; q < qn; q += NW)
        {
          float2 ml[2];
          float M = -INFINITY;
#pragma unroll
          for (int e = 0; e < 2; e++)
            {
              const int s = lane + 32 * e;
              ml[e] = s < nsplit ? __ldcg (&a.part_ml[hb + (size_t) s * MAXQ + V3_QG * z + q])
                                 : make_float2 (-INFINITY, 0.f);
              M = fmaxf (M, ml[e].x);
            }
          M = warp_max (M);
          float w[2], den = 0.f;
#pragma unroll
          for (int e = 0; e < 2; e++)
            {
              w[e] = ml[e].x == -INFINITY ? 0.f : __expf (ml[e].x - M);
              den += w[e] * ml[e].y;
            }
          den = warp_sum (den);
          const float inv = den > 0.f ? 1.f / den : 0.f;
#pragma unroll
          for (int e = 0; e < 2; e++)
            if (lane + 32 * e < nsplit)
              wts[q][lane + 32 * e] = w[e] * inv;
        }
      __syncthreads ();
      /* The weighted sum of the splits, 4 values a thread; when the block's
       * qn·HD/4 columns leave threads over (qn < 4 at hd 128), NG groups of
       * threads take every NG-th split each and add up through shared memory
       * (the wo area, free now): NG times fewer rounds of loads. */
      for (int i = tid; i < (NG > 1 ? ncol * NG : ncol); i += NT3)
        {
          const int c = NG > 1 ? i - grp * ncol : i;
          const int q = c / (HD / 4), d4 = c - q * (HD / 4);
          const float4 *src = (const float4 *) (a.part_o + (hb + V3_QG * z + q) * HD) + d4;
          float4 acc = make_float4 (0.f, 0.f, 0.f, 0.f);
          /* a unit-stride count, so that the loop unrolls and its 16 loads go
           * out together (a stride of NG in the loop itself left it rolled: a
           * round trip a split, 13 us at 4k — session 43's call 2) */
          const int s0 = NG > 1 ? grp : 0, nk = (nsplit - s0 + NG - 1) / NG;
#pragma unroll 16
          for (int k = 0; k < nk; k++)
            {
              const int s = s0 + k * NG;
              const float ww = wts[q][s];
              const float4 v = __ldcg (src + (size_t) s * MAXQ * HD / 4);
              acc.x = fmaf (ww, v.x, acc.x);
              acc.y = fmaf (ww, v.y, acc.y);
              acc.z = fmaf (ww, v.z, acc.z);
              acc.w = fmaf (ww, v.w, acc.w);
            }
          *(float4 *) ((NG > 1 ? wo + (size_t) grp * V3_QG * HD : fin) + q * HD + 4 * d4) = acc;
        }
      if (NG > 1)
        {
          __syncthreads ();
          for (int i = tid; i < ncol; i += NT3)
            {
              const int q = i / (HD / 4), d4 = i - q * (HD / 4);
              float4 acc = *(const float4 *) (wo + q * HD + 4 * d4);
              for (int g = 1; g < NG; g++)
                {
                  const float4 v = *(const float4 *) (wo + (size_t) g * V3_QG * HD + q * HD + 4 * d4);
                  acc.x += v.x;
                  acc.y += v.y;
                  acc.z += v.z;
                  acc.w += v.w;
                }
              *(float4 *) (fin + q * HD + 4 * d4) = acc;
            }
        }
      if (tid == 0)
        *cnt = 0;
    }
  __syncthreads ();
  v3_store<HD, NT3> (a, fin, kvh, z, qn, tid);
}

extern "C" size_t
hone_k_attn_scratch_bytes (int nq, int nkv, int hd, int max_tok)
{
  (void) nq; (void) max_tok;
  /* partials, (m, l), then counters: [nkv] session 2's, [nkv][8] a query group's, [nkv][8][8] a group of 8 splits' */
  return (size_t) nkv * HONE_K_ATTN_MAX_SPLITS * MAXQ * (hd + 2) * sizeof (float) + 256 + 73 * nkv * sizeof (unsigned);
}

template <int HD, int QMAX>
static int
launch_attn (const AttnArgs &a, size_t smem, cudaStream_t stream)
{
  static int raised;
  if (!raised)
    {
      const cudaError_t e = cudaFuncSetAttribute (attn_decode_kernel<HD, QMAX>,
                                                  cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024);
      if (e != cudaSuccess)
        return (int) e;
      raised = 1;
    }
  return hone_k_launch_role (HONE_K_PDL_ATTN, attn_decode_kernel<HD, QMAX>, dim3 (a.nkv, HONE_K_ATTN_MAX_SPLITS),
                             dim3 (NT), smem, stream, a);
}

extern "C" int
hone_k_attn_decode (const float *qkv, int n_tok, int nq, int nkv, int hd, const int32_t *pos,
                    const void *k_pool, const void *v_pool, const int32_t *block_table,
                    void *scratch, float *out, cudaStream_t stream)
{
  return hone_k_attn_decode_pf (qkv, n_tok, nq, nkv, hd, pos, k_pool, v_pool, block_table, scratch, out, NULL, NULL,
                                stream);
}

/* Session 2's kernel: fewest keys a split gets (32: at short context many
 * splits of half a tile, all combined; more: fewer splits, each a longer
 * serial walk). hone_k_attn_set_min_chunk sets this one. */
static int min_chunk = 32;

/* Version 3: block shape v3_shape (A: 4 warps × 12 KB, 48 KB a block: the
 * ≤ 60 KB that leaves room for the next kernel's staged weights); split size
 * chosen on the device from the context (HONE_ATTN_CHUNK fixes it). With PDL
 * on and 1–2 new tokens the default is G (A with pos and pages read before
 * the PDL wait; one token on sm_90 past the short bound: I, see
 * long_shape): measured faster at every context 128..32k, hd 128 and 64
 * (1.5–4 %, RESULTS-cuda.md "Decode attention, session 4"); slower with PDL
 * off (one more round trip) and at 4–8 tokens at short context, so A there.
 * The cluster shapes (H, I: 5.8 / 6.2 / 7.8 µs at 128 / 512 / 1k, A 7.9 /
 * 10.7 / 11.5) lose 20–25 % from 4k up (64 clusters of 8 > the 62 the chip
 * holds at once): only for launches bounded to short contexts (below) —
 * until session 45 capped their splits to the clusters the chip holds at
 * once, which made I the one-token shape past the short bound too
 * (long_shape). */
static char v3_shape = 'A';
/* ... except that a launch bounded to short contexts (hone_k_attn_decode_ctx,
 * one token, ≤ SHORT_CTX_DEFAULT keys, HONE_ATTN_SHORT_CTX) takes H, whose
 * splits combine in distributed shared memory: one launch serves only the
 * contexts its caller bounded it to, so the 4k+ loss does not apply. Whole
 * 8B step (RESULTS-cuda.md "Decode, session 4: short-context attention"):
 * harness 128 / 1k / 2k keys BF16 −2.2 / −0.8 / −0.9 %, Q4_0 −0.7 / −0.3 /
 * −3.9 %; 4k +0.7 to +2.5 % (so the bound stops at 2k); engine at 900–1,020
 * keys BF16 +2.7 % tok/s, Q4_0 −0.3 to −1.7 %, at 1,800–1,920 Q4_0 +1.0 to
 * +2.7 %, BF16 ±0.5 %. With PDL on (quantized steps) such a launch takes I
 * (H with pos and pages read before the PDL wait) since session 13: bounded
 * steps at 128 / 1k / 2k keys Q4_0 −1.0 / −1.0 / −1.1 %, AWQ at 128 / 512 /
 * 1k −0.1 / −0.2 / −0.7 % (same binary, RESULTS-cuda.md "Decode, session 13";
 * session 11, before the Q4 GEMVs' earlier trigger, had it mixed). */
#define SHORT_CTX_DEFAULT 2048

template <int HD, int NW, int RING, bool COAL, int EARLY, int CL, bool TWO>
static int occupancy3 (bool clusters);

/* Clusters of CL splits: session 4 measured the clustered shapes 20-25 %
 * slower from 4k keys up, when 8 KV heads × 8 clusters = 64 clusters were
 * more than the 62 an H100 holds at once (two waves). The splits of a
 * (KV head, query group) are capped so that all the launch's clusters are
 * resident together — where there are at most 8 such groups (measured: 8
 * KV heads, 7 clusters each on an H100); with more, each would keep only a
 * few splits, an unmeasured trade, so they keep 8 clusters as before.
 * HONE_ATTN_CAP=<n> sets n clusters a group instead (measurement). */
template <int HD, int NW, int RING, bool COAL, int EARLY, int CL, bool TWO>
static int
cluster_split_cap (int groups)
{
  static int held = -1;                       /* clusters the chip holds at once, 0 if unknown */
  static int forced = -1;                     /* HONE_ATTN_CAP=<clusters a group> (measurement), 0 if unset */
  if (held < 0)
    held = -occupancy3<HD, NW, RING, COAL, EARLY, CL, TWO> (true);
  if (forced < 0)
    {
      const char *e = getenv ("HONE_ATTN_CAP");
      forced = e && atoi (e) > 0 ? atoi (e) : 0;
    }
  if (held <= 0 || groups <= 0 || groups > 8)
    return 0;
  const int per = forced ? forced : held / groups;
  return (per < 1 ? 1 : per > HONE_K_ATTN_MAX_SPLITS / CL ? HONE_K_ATTN_MAX_SPLITS / CL : per) * CL;
}

template <int HD, int NW, int RING, bool COAL, int EARLY, int CL, bool TWO>
static int
launch_attn3 (AttnArgs a, cudaStream_t stream)
{
  static int raised;
  const size_t smem = (size_t) NW * RING;
  auto kernel = attn3_kernel<HD, NW, RING, COAL, EARLY, CL, TWO>;
  if (!raised)
    {
      const cudaError_t e = cudaFuncSetAttribute (kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int) smem);
      if (e != cudaSuccess)
        return (int) e;
      raised = 1;
    }
  const dim3 grid (a.nkv, HONE_K_ATTN_MAX_SPLITS, (a.QN + V3_QG - 1) / V3_QG);
  static const bool no_cap = getenv ("HONE_ATTN_NO_CAP") != NULL;   /* measurement: session 4's uncapped launch */
  a.max_splits = CL > 1 && !no_cap ? cluster_split_cap<HD, NW, RING, COAL, EARLY, CL, TWO> ((int) (grid.x * grid.z)) : 0;
  HONE_K_TRACE_SET (a, HONE_K_TR_ATTN, grid, CL, a.n_tok);
  if (CL == 1)
    return hone_k_launch_role (HONE_K_PDL_ATTN, kernel, grid, dim3 (NW * 32), smem, stream, a);
  /* clusters of CL splits (grid y = 64 is a multiple), with PDL as hone_k_launch sets it */
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[2];
  cfg.gridDim = grid;
  cfg.blockDim = dim3 (NW * 32);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = CL;
  attr[0].val.clusterDim.z = 1;
  int n = 1;
  if (hone_k_pdl_for (HONE_K_PDL_ATTN))
    {
      attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[1].val.programmaticStreamSerializationAllowed = 1;
      n = 2;
    }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  hone_k_carveout_apply ((const void *) kernel, HONE_K_PDL_ATTN, -1);
  return (int) cudaLaunchKernelEx (&cfg, kernel, a);
}

/* Block shapes of version 3 (HONE_ATTN_V3=A..O for experiments): warps a
 * block × ring bytes a warp (shared memory a block = their product), copy
 * pattern, early reads (1: pos and pages, 2: also the older keys), cluster size, whether the cluster also
 * combines over CL·128 keys (version 4's switches, see attn3_kernel). One table for launches and the harness's occupancy query. */
#define V3_SHAPES(X) \
  X ('A', 4, 12 * 1024, false, false, 1, false)   /* 48 KB, lane-own copies (session 3's default) */ \
  X ('B', 4, 12 * 1024, true, false, 1, false)    /* 48 KB */ \
  X ('C', 2, 24 * 1024, true, false, 1, false)    /* 48 KB, deep rings */ \
  X ('D', 4, 20 * 1024, true, false, 1, false)    /* 80 KB */ \
  X ('E', 8, 12 * 1024, true, false, 1, false)    /* 96 KB */ \
  X ('F', 4, 16 * 1024, true, false, 1, false)    /* 64 KB */ \
  X ('G', 4, 12 * 1024, false, true, 1, false)    /* A + pos and pages read before the PDL wait */ \
  X ('H', 4, 12 * 1024, false, false, 8, true)    /* A + clusters of 8 combining in shared memory */ \
  X ('I', 4, 12 * 1024, false, true, 8, true)     /* A + both */ \
  X ('J', 8, 12 * 1024, true, true, 8, true)      /* E + both (96 KB: a reference, over the 60 KB) */ \
  X ('K', 4, 12 * 1024, false, true, 8, false)    /* I, but over CL·128 keys session 3's global combine */ \
  X ('L', 4, 12 * 1024, false, 2, 8, true)        /* I + the older keys' copies before the PDL wait */ \
  X ('M', 4, 12 * 1024, false, 2, 1, false)       /* G + the older keys' copies before the PDL wait */ \
  X ('N', 8, 8 * 1024, false, true, 1, false)     /* G with 8 warps of one step each in flight (64 KB) */ \
  X ('O', 8, 8 * 1024, true, true, 1, false)      /* N with whole-run copies */

template <int HD>
static int
launch_attn3_shape (const AttnArgs &a, char shape, cudaStream_t stream)
{
#define V3_LAUNCH(c, nw, ring, coal, early, cl, two) \
  if (shape == c) return launch_attn3<HD, nw, ring, coal, early, cl, two> (a, stream);
  V3_SHAPES (V3_LAUNCH)
#undef V3_LAUNCH
  return (int) cudaErrorInvalidValue;
}

void
hone_k_attn_set_min_chunk (int keys)
{
  min_chunk = keys >= 16 ? keys : 16;
}

/* Contexts of at most this many keys take shape H for one token when the
 * caller bounds the context (hone_k_attn_decode_ctx); -1: not read yet. */
static int short_ctx = -1;

extern "C" int
hone_k_attn_short_ctx (void)
{
  if (short_ctx < 0)
    {
      const char *e = getenv ("HONE_ATTN_SHORT_CTX");
      short_ctx = e && *e ? (atoi (e) > 0 ? atoi (e) : 0) : SHORT_CTX_DEFAULT;
      if (!hone_k_stage_supported ())   /* thread-block clusters are sm_90's */
        short_ctx = 0;
    }
  return short_ctx;
}

extern "C" int
hone_k_attn_ctx_bound (int keys)
{
  const int tiny = hone_k_attn_tiny_ctx (), lim = hone_k_attn_short_ctx ();
  return tiny > 0 && keys <= tiny ? tiny : lim > 0 && keys <= lim ? lim : 0;
}

extern "C" int
hone_k_attn_decode_pf (const float *qkv, int n_tok, int nq, int nkv, int hd, const int32_t *pos,
                       const void *k_pool, const void *v_pool, const int32_t *block_table,
                       void *scratch, float *out, HoneKActQ8 *out_q, const HoneKPrefetch *pf,
                       cudaStream_t stream)
{
  return hone_k_attn_decode_ctx (qkv, n_tok, nq, nkv, hd, pos, k_pool, v_pool, block_table, scratch, out, out_q, pf,
                                 0, stream);
}

extern "C" int
hone_k_attn_decode_ctx (const float *qkv, int n_tok, int nq, int nkv, int hd, const int32_t *pos,
                        const void *k_pool, const void *v_pool, const int32_t *block_table,
                        void *scratch, float *out, HoneKActQ8 *out_q, const HoneKPrefetch *pf,
                        int max_ctx, cudaStream_t stream)
{
  return hone_k_attn_decode_h16 (qkv, n_tok, nq, nkv, hd, pos, k_pool, v_pool, block_table, scratch, out, out_q,
                                 NULL, pf, max_ctx, stream);
}

/* The shape of one- and two-token launches under PDL past the short-context
 * bound. One token on sm_90: I, the clustered shape, its splits capped so
 * that every cluster is resident at once (cluster_split_cap): each cluster
 * of 8 splits merges in distributed shared memory, and only its result goes
 * through the global fence/atomic handshake. Against G (session 4's default
 * here, which passes every split through two such handshakes; call 2 of
 * session 45 traced them at ~6-7 us of a 4k layer) in the engine, same call,
 * H100 (RESULTS-cuda.md "Session 45"): 8B Q4_0 at -p 2600 / 3900 / 7900
 * +0.8 / +1.0 / +3.6 % tok/s, Qwen3-0.6B Q4_0 at -p 16000 +1.8 %, though
 * one layer alone is slower at 4k (17.1 vs 14.9 us) and even at 16k-32k.
 * Session 46 (H100): Q4_0 -p 3900 +1.1 % again; AWQ (W4A16, the same
 * attention writing o's f16 input) -0.5 / -0.8 % at -p 2600 / 3900, +0.9 /
 * +1.1 % at 5200 / 7900. Past the 2k bound the graph is unbounded, so the
 * shape cannot follow the context; I stays for both.
 * Two tokens, more than 8 KV heads (no cap, above) and GPUs without
 * clusters: G. HONE_ATTN_LONG=<letter> forces a shape (measurement). */
static char
long_shape (int n_tok, int nkv)
{
  static char forced = 0;
  if (!forced)
    {
      const char *e = getenv ("HONE_ATTN_LONG");
      forced = e && e[0] >= 'A' && e[0] <= 'O' ? e[0] : '-';
    }
  if (forced != '-')
    return forced;
  return n_tok == 1 && nkv <= 8 && hone_k_stage_supported () ? 'I' : 'G';
}

extern "C" int
hone_k_attn_decode_h16 (const float *qkv, int n_tok, int nq, int nkv, int hd, const int32_t *pos,
                        const void *k_pool, const void *v_pool, const int32_t *block_table,
                        void *scratch, float *out, HoneKActQ8 *out_q, HoneKActH16 *out_h,
                        const HoneKPrefetch *pf, int max_ctx, cudaStream_t stream)
{
  AttnArgs a;
  if (n_tok < 1 || n_tok > HONE_K_MAX_DECODE || nkv < 1 || nq % nkv || (hd != 64 && hd != 128))
    return (int) cudaErrorInvalidValue;
  if (out_h && (!out_h->h || !out_h->d || ((uintptr_t) out_h->h & 7)))
    return (int) cudaErrorInvalidValue;
  a.min_chunk = min_chunk;
  {
    /* HONE_ATTN_TRIGGER=entry|main|end|copies: where version 3 lets the next kernel launch (PDL; default
     * entry; copies: EARLY 2 shapes after their early copies are issued, others at entry) */
    static int trig = -1;
    if (trig < 0)
      {
        const char *t = getenv ("HONE_ATTN_TRIGGER");
        trig = t && !strcmp (t, "main") ? 1 : t && !strcmp (t, "end") ? 2 : t && !strcmp (t, "copies") ? 3 : 0;
      }
    a.trigger = trig;
    const char *cm = getenv ("HONE_ATTN_COMBINE");   /* read at every launch: the harness switches it */
    a.combine = cm && !strcmp (cm, "flat") ? 1 : cm && !strcmp (cm, "two") ? 2 : 0;
  }
  a.out_q = out_q ? out_q->q : NULL;
  a.out_ds = out_q ? out_q->ds : NULL;
  a.out_h = out_h ? out_h->h : NULL;
  a.out_hd = out_h ? out_h->d : NULL;
  if (pf)
    a.pf = *pf;
  else
    memset (&a.pf, 0, sizeof a.pf);
  a.qkv = qkv;
  a.n_tok = n_tok;
  a.nq = nq;
  a.nkv = nkv;
  a.hd = hd;
  a.G = nq / nkv;
  a.QN = a.G * n_tok;
  if (a.QN > MAXQ)
    return (int) cudaErrorInvalidValue;
  a.pos = pos;
  a.k_pool = (const __half *) k_pool;
  a.v_pool = (const __half *) v_pool;
  a.block_table = block_table;
  a.part_o = (float *) scratch;
  a.part_ml = (float2 *) (a.part_o + (size_t) nkv * HONE_K_ATTN_MAX_SPLITS * MAXQ * hd);
  a.counters = (unsigned *) (a.part_ml + (size_t) nkv * HONE_K_ATTN_MAX_SPLITS * MAXQ);
  a.out = out;
  const char *ver = getenv ("HONE_ATTN_DECODE");
  if (!ver || strcmp (ver, "old") != 0)
    {
      /* version 3; HONE_ATTN_CHUNK (keys) overrides the split size for experiments */
      const char *ch = getenv ("HONE_ATTN_CHUNK");
      a.min_chunk = ch && atoi (ch) >= 16 ? atoi (ch) : 0;
      const char *sh = getenv ("HONE_ATTN_V3");
      char forced = sh && *sh ? sh[0] : 0;
      /* one token over a context bounded to the tiny kernel's (or HONE_ATTN_V3=T): hone-k-attn-tiny.cu */
      if (n_tok == 1 && (forced == 'T' || (!forced && max_ctx > 0 && max_ctx <= hone_k_attn_tiny_ctx ())))
        return hone_k_attn_tiny (qkv, nq, nkv, hd, pos, k_pool, v_pool, block_table, out, a.out_q, a.out_ds, a.out_h,
                                 a.out_hd, max_ctx, stream);
      if (forced == 'T')                      /* several tokens: the default shapes */
        forced = 0;
      const int lim = hone_k_attn_short_ctx ();
      const char shape = forced                                      ? forced
                         : n_tok == 1 && max_ctx > 0 && max_ctx <= lim ? (hone_k_pdl_for (HONE_K_PDL_ATTN) ? 'I' : 'H')
                         : hone_k_pdl_for (HONE_K_PDL_ATTN) && n_tok <= 2 ? long_shape (n_tok, nkv)
                                                                        : v3_shape;
      return hd == 128 ? launch_attn3_shape<128> (a, shape, stream) : launch_attn3_shape<64> (a, shape, stream);
    }
  const size_t smem = (size_t) TILE * (hd + 8) * 2 + (size_t) TILE * hd * 2
                      + ((size_t) a.QN * hd + (size_t) a.QN * TILE) * sizeof (float);
  /* The P·V loop is unrolled over the queries a thread owns: size it to the
   * actual G·n_tok (a 64-wide loop on 4 queries made the kernel issue-bound). */
  if (hd == 128)
    {
      if (a.QN <= 4) return launch_attn<128, 4> (a, smem, stream);
      if (a.QN <= 8) return launch_attn<128, 8> (a, smem, stream);
      if (a.QN <= 16) return launch_attn<128, 16> (a, smem, stream);
      if (a.QN <= 32) return launch_attn<128, 32> (a, smem, stream);
      return launch_attn<128, 64> (a, smem, stream);
    }
  if (a.QN <= 4) return launch_attn<64, 4> (a, smem, stream);
  if (a.QN <= 8) return launch_attn<64, 8> (a, smem, stream);
  if (a.QN <= 16) return launch_attn<64, 16> (a, smem, stream);
  if (a.QN <= 32) return launch_attn<64, 32> (a, smem, stream);
  return launch_attn<64, 64> (a, smem, stream);
}

/* For the harness (tests/cuda/hone-attn-check.cu): blocks an SM of a
 * version-3 shape, and for clustered shapes the clusters the chip holds at
 * once (cudaOccupancyMaxActiveClusters; 0 on error) as a negative number. */
template <int HD, int NW, int RING, bool COAL, int EARLY, int CL, bool TWO>
static int
occupancy3 (bool clusters)
{
  int n = 0;
  auto kernel = attn3_kernel<HD, NW, RING, COAL, EARLY, CL, TWO>;
  cudaFuncSetAttribute (kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, NW * RING);
  if (!clusters || CL == 1)
    {
      cudaOccupancyMaxActiveBlocksPerMultiprocessor (&n, kernel, NW * 32, (size_t) NW * RING);
      return n;
    }
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  cfg.gridDim = dim3 (8, HONE_K_ATTN_MAX_SPLITS, 1);
  cfg.blockDim = dim3 (NW * 32);
  cfg.dynamicSmemBytes = (size_t) NW * RING;
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = CL;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (cudaOccupancyMaxActiveClusters (&n, kernel, &cfg) != cudaSuccess)
    {
      cudaGetLastError ();
      return 0;
    }
  return -n;
}

/* blocks an SM of a shape (as HONE_ATTN_V3); clusters != 0 and a clustered
 * shape: minus the clusters the chip holds at once */
extern "C" int
hone_k_attn3_occupancy_ex (int hd, char shape, int clusters)
{
#define V3_OCC(c, nw, ring, coal, early, cl, two) \
  if (shape == c) \
    return hd == 64 ? occupancy3<64, nw, ring, coal, early, cl, two> (clusters) \
                    : occupancy3<128, nw, ring, coal, early, cl, two> (clusters);
  V3_SHAPES (V3_OCC)
#undef V3_OCC
  return 0;
}

extern "C" int
hone_k_attn3_occupancy (int hd, char shape)
{
  return hone_k_attn3_occupancy_ex (hd, shape, 0);
}
