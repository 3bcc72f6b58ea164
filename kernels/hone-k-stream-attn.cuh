/* hone-k-stream-attn.cuh — one token's decode attention as the first step
 * of a streamed launch (hone-k-decode-stream.cu includes this after its
 * group barrier, group_sync, and ST_CG).
 *
 * Why inside the launch: with attention as its own kernel between two
 * streamed launches, a layer lost ~17 µs (BF16) from one launch's exit to the
 * next one's first weights used, against 10 µs of attention alone, and the
 * weight stream waited for it (RESULTS-cuda.md, "Decode, session 6"). Here the
 * consumer groups of every block run the attention tasks first, while the
 * block's producer warp already copies the o projection's weights into the
 * ring; o's staging then waits for every task to be published, as any phase
 * waits for the one before.
 *
 * Tasks: (KV head, split of the keys), one a block at a time; the four
 * consumer groups of the block take the split's 16-key tiles in turn and
 * merge their softmax states through shared memory at the end. The splits
 * (at most gridDim / KV heads, at least min_keys keys each) are chosen from
 * the position, which the kernel reads (a captured graph replays at any
 * position). A group of 64 threads:
 *  - loads its G query rows (already RoPE'd and scaled by the q|k|v
 *    epilogue) into shared memory, and keeps two of its tiles of K and V in
 *    flight in registers (16-byte loads through L2);
 *  - per tile: scores by 16 threads a query pair (thread = key), an online
 *    softmax across those 16 lanes, then P·V with each thread owning HD/64
 *    output dims of every query.
 * The block then merges the four groups' (m, l, o): one split writes
 * out = o / l; several write (o, m, l) partials, and the block that finishes a
 * KV head's last split (a counter a KV head) combines them, as
 * hone_k_attn_decode's combine does. A block publishes how many tasks it
 * finished to *done (one release a block that had any); the caller waits for
 * done = the task count this returns.
 *
 * Measured first with one group a task (session 7, call 1): at 128 keys the
 * step took ~16 µs (a chain of dependent round trips, each slower while the
 * producers' copies load the memory system) and at 16k keys ~100 µs (a
 * group's 2 warps spend ~3 µs a tile: issue-bound on 256 of the 528 groups),
 * hence the block tasks. Measured (H200, 8B shape, call 3, splits of >= 64
 * keys): ctx 128 BF16 4.525 ms vs 4.583 with attention as its own kernel
 * (Q4_0 2.296 vs 2.364); at 4k and 16k keys slower (5.12 / 6.46 vs 4.81 /
 * 5.55 ms: 16 splits a KV head, ~4 µs a 16-key tile a group), so decode_step
 * takes it only for graphs bounded to short contexts. Without any attention
 * the streamed step would take 4.112 ms (BF16) / 1.925 (Q4_0): attention in
 * either form costs ~13-15 µs a layer, a chain of dependent round trips. */
#pragma once

#include "hone-k-common.cuh"
#include "hone-k-stream.h"
#include <cuda_fp16.h>

#define SA_TILE 16          /* keys a tile (within one KV page: pages are 64 keys) */
#define SA_QMAX 8           /* query heads a KV head, at most */
#define SA_MAX_SPLITS 32    /* splits a KV head, at most (the combine reads them all) */
#define SA_THREADS 64       /* a consumer group */
#define SA_BLOCK (SA_THREADS * ST_CG)   /* the consumer threads of a block */
#define SA_STRIDE (SA_TILE * ST_CG)     /* keys from one of a group's tiles to its next */

/* One group's shared memory. The tile buffers are reused by the combine;
 * at the end q holds the group's o (unnormalized), m and l its softmax state. */
template <int HD>
struct SaSmem {
  float q[SA_QMAX][HD];
  union {
    struct {
      uint4 k[SA_TILE][HD / 8 + 1];   /* padded rows: a lane a key reads without bank conflicts */
      uint4 v[SA_TILE][HD / 8];
    } t;
    struct {
      float2 ml[SA_MAX_SPLITS][SA_QMAX];
      float w[SA_QMAX][SA_MAX_SPLITS];
    } c;
  } u;
  float p[SA_QMAX][SA_TILE];
  float alpha[SA_QMAX], m[SA_QMAX], l[SA_QMAX];
  int last;
};

/* Shared memory the four groups of a block need for head size hd (0: not a size this takes). */
static inline size_t
stream_attn_smem (int hd)
{
  return hd == 128 ? ST_CG * sizeof (SaSmem<128>) : hd == 64 ? ST_CG * sizeof (SaSmem<64>) : 0;
}

/* The splits of a context over @blocks blocks and @nkv KV heads: how many a
 * KV head (at most blocks / nkv and SA_MAX_SPLITS, at least min_keys keys
 * each) and keys each (a multiple of SA_STRIDE: every group gets whole tiles). */
static __host__ __device__ __forceinline__ void
stream_attn_splits (int ctx, int blocks, int nkv, int min_keys, int *nsplit, int *chunk)
{
  int n = (ctx + min_keys - 1) / min_keys;
  const int cap = blocks / nkv < 1 ? 1 : blocks / nkv;
  n = n > cap ? cap : n;
  n = n < 1 ? 1 : n > SA_MAX_SPLITS ? SA_MAX_SPLITS : n;
  int c = (ctx + n - 1) / n;
  c = (c + SA_STRIDE - 1) / SA_STRIDE * SA_STRIDE;
  *nsplit = (ctx + c - 1) / c;
  *chunk = c;
}

static __device__ __forceinline__ const uint4 *
sa_row (const __half *pool, const int32_t *table, int key, int nkv, int kvh, int hd)
{
  const int page = __ldg (table + key / HONE_K_KV_BLOCK), slot = key % HONE_K_KV_BLOCK;
  return (const uint4 *) (pool + (((size_t) page * nkv + kvh) * HONE_K_KV_BLOCK + slot) * hd);
}

/* Group @group's tiles of keys [k0, k1) for KV head kvh: its (m, l) per query
 * into sm.m / sm.l and its unnormalized o into sm.q (every group runs this,
 * also one without tiles: m = -inf, l = 0, o = 0). */
template <int HD>
static __device__ __forceinline__ void
sa_group_tiles (const HoneKStreamAttn &A, int kvh, int k0, int k1, int group, SaSmem<HD> &sm)
{
  constexpr int V16 = HD / 8;                        /* 16-byte pieces a K or V row */
  constexpr int LD = SA_TILE * V16 / SA_THREADS;     /* of K (and of V) a thread loads a tile */
  constexpr int DP = HD / SA_THREADS;                /* output dims a thread */
  static_assert (LD >= 1 && DP >= 1 && DP <= 2, "head size");
  const int gt = threadIdx.x & (SA_THREADS - 1);
  const int nkv = A.nkv, G = A.nq / A.nkv;
  const __half *kp = (const __half *) A.k_pool, *vp = (const __half *) A.v_pool;
  const int key = gt & (SA_TILE - 1), qs = gt / SA_TILE;   /* scores: this thread's key, first query */
  const int d0 = gt * DP;                                   /* P·V: this thread's output dims */
  const int first = k0 + SA_TILE * group;                   /* this group's first tile */
  for (int i = gt; i < G * HD / 4; i += SA_THREADS)
    {
      const int qi = i / (HD / 4), d4 = i - qi * (HD / 4);
      *(float4 *) &sm.q[qi][4 * d4] = __ldcg ((const float4 *) (A.qkv + (size_t) (kvh * G + qi) * HD) + d4);
    }
  uint4 ka[LD], va[LD], kb[LD], vb[LD];
  auto load = [&] (uint4 (&kr)[LD], uint4 (&vr)[LD], int kt) {
#pragma unroll
    for (int j = 0; j < LD; j++)
      {
        const int piece = gt + SA_THREADS * j, kk = piece / V16, c = piece - kk * V16;
        const int k = kt + kk;
        if (k < k1)
          {
            kr[j] = __ldcg (sa_row (kp, A.block_table, k, nkv, kvh, HD) + c);
            vr[j] = __ldcg (sa_row (vp, A.block_table, k, nkv, kvh, HD) + c);
          }
        else
          kr[j] = vr[j] = make_uint4 (0u, 0u, 0u, 0u);
      }
  };
  float m[2] = { -INFINITY, -INFINITY }, l[2] = { 0.f, 0.f };
  float acc[SA_QMAX][DP];
#pragma unroll
  for (int q = 0; q < SA_QMAX; q++)
#pragma unroll
    for (int d = 0; d < DP; d++)
      acc[q][d] = 0.f;
  /* one tile: into shared memory, this group's tile after next issued, then scores, softmax, P·V */
  auto step = [&] (uint4 (&kr)[LD], uint4 (&vr)[LD], int kt) {
#pragma unroll
    for (int j = 0; j < LD; j++)
      {
        const int piece = gt + SA_THREADS * j, kk = piece / V16, c = piece - kk * V16;
        sm.u.t.k[kk][c] = kr[j];
        sm.u.t.v[kk][c] = vr[j];
      }
    if (kt + 2 * SA_STRIDE < k1)
      load (kr, vr, kt + 2 * SA_STRIDE);
    group_sync (group);
    float s[2] = { 0.f, 0.f };
#pragma unroll 4
    for (int c = 0; c < V16; c++)
      {
        const uint4 kv = sm.u.t.k[key][c];
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
        for (int j = 0; j < 2; j++)
          {
            const int q = qs + 4 * j;
            if (q < G)
              {
                const float4 a = *(const float4 *) &sm.q[q][8 * c], b = *(const float4 *) &sm.q[q][8 * c + 4];
                s[j] += a.x * kf[0] + a.y * kf[1] + a.z * kf[2] + a.w * kf[3] + b.x * kf[4] + b.y * kf[5]
                        + b.z * kf[6] + b.w * kf[7];
              }
          }
      }
    /* online softmax across the 16 lanes of a query (xor < 16 stays in the half warp) */
#pragma unroll
    for (int j = 0; j < 2; j++)
      {
        const int q = qs + 4 * j;
        const float sv = q < G && kt + key < k1 ? s[j] : -INFINITY;
        float mt = sv;
#pragma unroll
        for (int o = 8; o > 0; o >>= 1)
          mt = fmaxf (mt, __shfl_xor_sync (0xffffffffu, mt, o));
        const float mn = fmaxf (m[j], mt);
        float p = 0.f, al = 1.f;
        if (mn != -INFINITY)
          {
            p = sv == -INFINITY ? 0.f : __expf (sv - mn);
            al = m[j] == -INFINITY ? 0.f : __expf (m[j] - mn);
          }
        float ps = p;
#pragma unroll
        for (int o = 8; o > 0; o >>= 1)
          ps += __shfl_xor_sync (0xffffffffu, ps, o);
        l[j] = l[j] * al + ps;
        m[j] = mn;
        if (q < G)
          {
            sm.p[q][key] = p;
            if (key == 0)
              sm.alpha[q] = al;
          }
      }
    group_sync (group);
#pragma unroll
    for (int q = 0; q < SA_QMAX; q++)
      if (q < G)
        {
          const float al = sm.alpha[q];
#pragma unroll
          for (int d = 0; d < DP; d++)
            acc[q][d] *= al;
        }
#pragma unroll 4
    for (int kk = 0; kk < SA_TILE; kk++)
      {
        float2 vf;
        if (DP == 2)
          vf = __half22float2 (((const __half2 *) &sm.u.t.v[kk][0])[gt]);
        else
          vf = make_float2 (__half2float (((const __half *) &sm.u.t.v[kk][0])[gt]), 0.f);
#pragma unroll
        for (int q = 0; q < SA_QMAX; q++)
          if (q < G)
            {
              const float p = sm.p[q][kk];
              acc[q][0] = fmaf (p, vf.x, acc[q][0]);
              if (DP == 2)
                acc[q][DP - 1] = fmaf (p, vf.y, acc[q][DP - 1]);
            }
      }
    group_sync (group);   /* the tile's buffers (and q, after the last) are free again */
  };
  if (first < k1)
    load (ka, va, first);
  if (first + SA_STRIDE < k1)
    load (kb, vb, first + SA_STRIDE);
  for (int kt = first; kt < k1; kt += 2 * SA_STRIDE)
    {
      step (ka, va, kt);
      if (kt + SA_STRIDE < k1)
        step (kb, vb, kt + SA_STRIDE);
    }
  group_sync (group);   /* q read by every thread (also when this group had no tile) */
#pragma unroll
  for (int j = 0; j < 2; j++)
    {
      const int q = qs + 4 * j;
      if (q < G && key == 0)
        {
          sm.m[q] = m[j];
          sm.l[q] = l[j];
        }
    }
#pragma unroll
  for (int q = 0; q < SA_QMAX; q++)
    if (q < G)
#pragma unroll
      for (int d = 0; d < DP; d++)
        sm.q[q][d0 + d] = acc[q][d];
}

/* This block's attention tasks (every consumer thread calls it; sm: the
 * four groups' shared memory); returns the step's task count (the same in
 * every block). */
/* Not inlined: inlined, its code made the kernel's GEMV phases 3-6 % slower
 * even in launches without attention (session 7, call 3: the same kernel
 * file with the step compiled out ran as fast as before it; __noinline__
 * left 0.5-1 %). */
template <int HD>
static __device__ __noinline__ int
stream_attention (const HoneKStreamAttn &A, int min_keys, unsigned *kv_count, unsigned *done, int group,
                  SaSmem<HD> *sm)
{
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int nkv = A.nkv, G = A.nq / A.nkv;
  const int ctx = *A.pos + 1;
  int nsplit, chunk;
  stream_attn_splits (ctx, (int) gridDim.x, nkv, min_keys, &nsplit, &chunk);
  const int n_tasks = nkv * nsplit;
  float *part_o = (float *) A.scratch;                                                /* [nkv][MS][QMAX][HD] */
  float2 *part_ml = (float2 *) (part_o + (size_t) nkv * SA_MAX_SPLITS * SA_QMAX * HD);   /* [nkv][MS][QMAX] */
  SaSmem<HD> &s0 = sm[0];
  int mine = 0;
  for (int t = (int) blockIdx.x; t < n_tasks; t += (int) gridDim.x)
    {
      const int kvh = t % nkv, split = t / nkv;
      const int k0 = split * chunk, k1 = min (ctx, k0 + chunk);
      sa_group_tiles<HD> (A, kvh, k0, k1, group, sm[group]);
      consumers_sync ();
      /* the four groups' states merged: a thread per output (two a thread for G·HD = 512) */
      for (int o = tid; o < G * HD; o += SA_BLOCK)
        {
          const int q = o / HD, d = o - q * HD;
          float M = -INFINITY;
#pragma unroll
          for (int g = 0; g < ST_CG; g++)
            M = fmaxf (M, sm[g].m[q]);
          float L = 0.f, acc = 0.f;
#pragma unroll
          for (int g = 0; g < ST_CG; g++)
            {
              const float w = sm[g].m[q] == -INFINITY ? 0.f : __expf (sm[g].m[q] - M);
              L += w * sm[g].l[q];
              acc += w * sm[g].q[q][d];
            }
          if (nsplit == 1)
            A.out[(size_t) (kvh * G + q) * HD + d] = acc / L;
          else
            {
              const size_t b = ((size_t) kvh * SA_MAX_SPLITS + split) * SA_QMAX + q;
              part_o[b * HD + d] = acc;
              if (d == 0)
                part_ml[b] = make_float2 (M, L);
            }
        }
      consumers_sync ();
      if (nsplit > 1)
        {
          /* the block's partials written (barrier), then counted; the block
           * that completes the KV head combines */
          if (tid == 0)
            {
              __threadfence ();
              s0.last = atomicAdd (kv_count + kvh, 1u) == (unsigned) (nsplit - 1);
            }
          consumers_sync ();
          if (s0.last)
            {
              __threadfence ();
              for (int i = tid; i < nsplit * SA_QMAX; i += SA_BLOCK)
                s0.u.c.ml[i / SA_QMAX][i % SA_QMAX] = __ldcg (part_ml + (size_t) kvh * SA_MAX_SPLITS * SA_QMAX + i);
              consumers_sync ();
              /* split weights: a warp a query, a lane a split */
              for (int q = warp; q < G; q += SA_BLOCK / 32)
                {
                  const float2 ml = lane < nsplit ? s0.u.c.ml[lane][q] : make_float2 (-INFINITY, 0.f);
                  const float M = warp_max (ml.x);
                  const float w = ml.x == -INFINITY ? 0.f : __expf (ml.x - M);
                  const float den = warp_sum (w * ml.y);
                  if (lane < nsplit)
                    s0.u.c.w[q][lane] = den > 0.f ? w / den : 0.f;
                }
              consumers_sync ();
              for (int o = tid; o < G * HD; o += SA_BLOCK)
                {
                  const int q = o / HD, d = o - q * HD;
                  const float *po = part_o + ((size_t) kvh * SA_MAX_SPLITS * SA_QMAX + q) * HD + d;
                  float r = 0.f;
#pragma unroll 8
                  for (int sp = 0; sp < nsplit; sp++)
                    r = fmaf (s0.u.c.w[q][sp], __ldcg (po + (size_t) sp * SA_QMAX * HD), r);
                  A.out[(size_t) (kvh * G + q) * HD + d] = r;
                }
              consumers_sync ();   /* s0.u.c read by all before the next task's tiles */
            }
        }
      mine++;
    }
  /* the block's outputs written (the last barrier above), then its count published */
  if (mine && tid == 0)
    {
      __threadfence ();
      atomicAdd (done, (unsigned) mine);
    }
  return n_tasks;
}
