/* hone-k-attn-decode.cu — flash-decoding: attention of 1..8 new tokens over
 * the paged f16 KV cache, split over the KV length so that even one sequence
 * fills the chip; the last block of each KV head to finish combines the
 * splits (no second launch).
 *
 * Block = one KV head × one split; it serves all G query heads of the group
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
#include <string.h>

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
  HoneKPrefetch pf;
};

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
      if (on)
        *(float4 *) (a.out + o) = acc;
      if (a.out_q)
        {
          /* 8 adjacent threads hold one 32-value block (HD/4 is a multiple
           * of 8, so a block never straddles two heads); quant32_store's
           * arithmetic: d = absmax/127, q = rint(v/d), (d, d·Σq) */
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
    }
  if (tid == 0)
    a.counters[kvh] = 0;
}

extern "C" size_t
hone_k_attn_scratch_bytes (int nq, int nkv, int hd, int max_tok)
{
  (void) nq; (void) max_tok;
  return (size_t) nkv * HONE_K_ATTN_MAX_SPLITS * MAXQ * (hd + 2) * sizeof (float) + 256 + nkv * sizeof (unsigned);
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
  return hone_k_launch (attn_decode_kernel<HD, QMAX>, dim3 (a.nkv, HONE_K_ATTN_MAX_SPLITS), dim3 (NT), smem,
                        stream, a);
}

extern "C" int
hone_k_attn_decode (const float *qkv, int n_tok, int nq, int nkv, int hd, const int32_t *pos,
                    const void *k_pool, const void *v_pool, const int32_t *block_table,
                    void *scratch, float *out, cudaStream_t stream)
{
  return hone_k_attn_decode_pf (qkv, n_tok, nq, nkv, hd, pos, k_pool, v_pool, block_table, scratch, out, NULL, NULL,
                                stream);
}

/* Fewest keys a split gets (32: at short context many splits of half a tile,
 * all combined; more: fewer splits, each a longer serial walk). */
static int min_chunk = 32;

void
hone_k_attn_set_min_chunk (int keys)
{
  min_chunk = keys >= 16 ? keys : 16;
}

extern "C" int
hone_k_attn_decode_pf (const float *qkv, int n_tok, int nq, int nkv, int hd, const int32_t *pos,
                       const void *k_pool, const void *v_pool, const int32_t *block_table,
                       void *scratch, float *out, HoneKActQ8 *out_q, const HoneKPrefetch *pf,
                       cudaStream_t stream)
{
  AttnArgs a;
  if (n_tok < 1 || n_tok > HONE_K_MAX_DECODE || nkv < 1 || nq % nkv || (hd != 64 && hd != 128))
    return (int) cudaErrorInvalidValue;
  a.min_chunk = min_chunk;
  a.out_q = out_q ? out_q->q : NULL;
  a.out_ds = out_q ? out_q->ds : NULL;
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
