/* hone-k-attn-o.cu — one-token decode attention at short context fused with
 * the o projection and its residual add: h += Wo · attention(q, K, V).
 *
 * Why: at short context the separate attention launch is a chain of
 * dependent latencies (8–9 µs a layer at 128 keys on the H200 while the
 * memory idles, RESULTS-cuda.md sessions 13–18) and the o GEMV behind it
 * starts cold. Here the o projection's weights stream into shared memory
 * from the moment the kernel starts (before its PDL wait, while q|k|v
 * drains), and each block computes the attention it needs itself.
 *
 * Grid: (nkv, RG) blocks in clusters of nkv along x. Block (h, g) owns KV head
 * h — the G = nq/nkv query heads h·G … h·G+G−1, i.e. o's input columns
 * [h·G·hd, (h+1)·G·hd) — and rows [g·RR, g·RR+RR) of o. It
 *   1. issues cp.async copies of its weight tile (RR rows × its columns) into
 *      shared memory and loads the tile's scales, then the K/V rows of the
 *      keys older than the new token (all before the PDL wait: none of them
 *      depends on the previous kernel);
 *   2. waits, loads q and the new token's K/V row, and computes the
 *      attention of its G heads over keys 0..pos (scores, online softmax a
 *      tile of keys at a time, P·V) in f32 — every block of the same KV head
 *      computes the same values (redundant work sized for short contexts:
 *      the K/V bytes are re-read from L2, not from memory);
 *   3. puts the G·hd attention outputs in the input format of Wo's type
 *      (f32; int8 per 32 with (d, d·Σq), quant32_store's arithmetic; or
 *      HoneKActH16's 16-bit fixed point) and takes the dot products of its
 *      rows with the weights in shared memory;
 *   4. the nkv blocks of a cluster (same rows, every KV head) add their row
 *      sums through distributed shared memory in a fixed order (deterministic)
 *      and each writes a share of the rows: h[row] += Σ_heads.
 * Weight tiles larger than the shared memory (BF16/F16) go through two slots,
 * both filled before the wait, refilled as they are used.
 *
 * Types: BF16, F16, Q8_0, Q4_0, Q4_1, Q4Z (AWQ); hd 64 or 128; G ≤ 8;
 * nkv ≤ 8 (a portable cluster); sm_90 (clusters, PDL). hone_k_attn_o_takes()
 * says whether a shape runs here; decode_step falls back to attention + GEMV.
 */
#include "hone-k-gemv.cuh"
#include "hone-k-stage.cuh"   /* cp_async16; hone_k_stage_supported: sm_90 (clusters) */
#include <cooperative_groups.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AO_NT 256               /* threads a block */
#define AO_NW (AO_NT / 32)
#define AO_STEPS 8              /* key steps a tile: a thread holds AO_STEPS K and V chunks */
#define AO_GM 8                 /* most query heads a KV head */
#define AO_SCMAX 32             /* scale entries a thread loads (RR·NC ≤ AO_NT·AO_SCMAX) */
#define AO_CTX_DEFAULT 256      /* keys: the default bound of the fused path (HONE_ATTN_O_CTX) */

struct AoArgs {
  const float *qkv;             /* [(nq + 2nkv)·hd]: q rotated and scaled, as q|k|v's epilogue stores it */
  const int32_t *pos;
  const __half *k_pool, *v_pool;
  const int32_t *block_table;
  int nkv, G;
  /* o projection */
  const int4 *wq;               /* 16-byte chunks [rows][nchunk] */
  const void *ws;               /* scales (type's layout), NULL for BF16/F16 */
  const uint8_t *wz;            /* Q4Z zero points */
  int rows, nchunk, ng, cshift;
  float *h;                     /* residual in, output (h += o) */
  int RR;                       /* rows a block */
  int PR;                       /* rows a slot (a pass) */
  int nslot;                    /* 1: the whole tile in one slot; 2: two slots refilled */
  int trigger;                  /* PDL: launch dependents at entry (1) or not at all (0) */
  int probe;                    /* measurement only (HONE_ATTN_O_PROBE): 1 no attention (x = q), 2 no dots,
                                 * 4 no weight copies, 8 no cluster sum (each block writes its own rows) */
};

/* Chunk geometry of a weight type: values a 16-byte chunk. */
template <int WT>
struct AoType {
  static constexpr int E = (WT == HONE_K_BF16 || WT == HONE_K_F16) ? 8 : WT == HONE_K_Q8_0 ? 16 : 32;
  static constexpr bool SCALES = !(WT == HONE_K_BF16 || WT == HONE_K_F16);
};

static __device__ __forceinline__ void
cp_async_commit (void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile ("cp.async.commit_group;" ::: "memory");
#endif
}

/* Wait until at most n of this thread's committed groups are pending (n = 0 or 1). */
static __device__ __forceinline__ void
cp_async_wait (int n)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (n <= 0)
    asm volatile ("cp.async.wait_group 0;" ::: "memory");
  else
    asm volatile ("cp.async.wait_group 1;" ::: "memory");
#endif
}

/* f16 K/V chunk (8 values) → f32. */
static __device__ __forceinline__ void
h8_to_f32 (int4 v, float (&f)[8])
{
  const uint32_t w[4] = { (uint32_t) v.x, (uint32_t) v.y, (uint32_t) v.z, (uint32_t) v.w };
#pragma unroll
  for (int i = 0; i < 4; i++)
    {
      const float2 p = __half22float2 (*(const __half2 *) &w[i]);
      f[2 * i] = p.x;
      f[2 * i + 1] = p.y;
    }
}

/* Issue the copies of pass p's rows (PR rows from p·PR) into slot `slot` and commit them as one group. */
template <int WT>
static __device__ __forceinline__ void
issue_pass (const AoArgs &a, int4 *ring, int slot, int p, int row0, int c0, int NC)
{
  const int pr0 = p * a.PR;
  const int n = min (a.PR, a.RR - pr0);
  int4 *dst = ring + (size_t) slot * a.PR * NC;
  for (int i = threadIdx.x; i < n * NC; i += AO_NT)
    {
      const int r = i / NC, c = i - r * NC;
      const int row = row0 + pr0 + r;
      if (row < a.rows)
        cp_async16 (dst + i, a.wq + (size_t) row * a.nchunk + c0 + c);
    }
  cp_async_commit ();
}

/* The raw scale bits of chunk (row, global chunk cg) as the decode GEMV keeps them (sc, and Q4Z's zero point above bit 16). */
template <int WT>
static __device__ __forceinline__ uint32_t
scale_bits (const AoArgs &a, int row, int cg)
{
  if (WT == HONE_K_Q8_0)
    return ((const uint16_t *) a.ws)[(size_t) row * (a.nchunk >> 1) + (cg >> 1)];
  if (WT == HONE_K_Q4_0)
    return ((const uint16_t *) a.ws)[(size_t) row * a.nchunk + cg];
  if (WT == HONE_K_Q4_1)
    return ((const uint32_t *) a.ws)[(size_t) row * a.nchunk + cg];
  if (WT == HONE_K_Q4Z)
    {
      const size_t gi = (size_t) row * a.ng + (cg >> a.cshift);
      return (uint32_t) ((const uint16_t *) a.ws)[gi] | ((uint32_t) a.wz[gi] << 16);
    }
  return 0;
}

/* Scale entries (u32) of a block, rounded up to 16 bytes. */
static __host__ __device__ __forceinline__ int
ao_scale_words (int RR, int NC)
{
  return (RR * NC + 3) & ~3;
}

template <int WT, int HD, int GM>
__global__ void __launch_bounds__ (AO_NT, 1)
attn_o_kernel (AoArgs a)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  using T = AoType<WT>;
  constexpr int LPK = HD / 8;                 /* lanes a key (16 bytes of K or V a lane) */
  constexpr int KPS = AO_NT / LPK;            /* keys a block step */
  constexpr int KT = KPS * AO_STEPS;          /* keys a tile */
  extern __shared__ __align__ (16) unsigned char smraw[];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int kvh = blockIdx.x;                 /* also the rank in the cluster */
  const int G = a.G, GH = G * HD;             /* this block's input columns */
  const int NC = GH / T::E;                   /* chunks of a row in this block */
  const int c0 = kvh * NC;                    /* first global chunk */
  const int row0 = blockIdx.y * a.RR;

  /* shared memory: ring | scales [RR][NC] u32 | q [G][HD] | S [G][KT] | part [NW][G][HD] | x (f32) [GH] | xin */
  int4 *ring = (int4 *) smraw;
  uint32_t *sc_s = (uint32_t *) (ring + (size_t) a.nslot * a.PR * NC);
  float *q_s = (float *) (sc_s + (T::SCALES ? ao_scale_words (a.RR, NC) : 0));
  float *S_s = q_s + GH;
  float *part_s = S_s + G * KT;
  float *x_s = part_s + AO_NW * GH;
  unsigned char *xin = (unsigned char *) (x_s + GH);   /* int8 [GH] + float2 [GH/32], or H16 pieces [NC][4] + float2 [NC] */
  __shared__ float m_s[GM], l_s[GM], al_s[GM];
  __shared__ float red[1024];                 /* this block's row sums (RR ≤ 1024) */

  if (a.trigger)
    pdl_trigger ();
  cg::cluster_group cluster = cg::this_cluster ();

  /* 1. weights: the passes that fit, then the scales; nothing here depends on the previous kernel */
  const int npass = (a.RR + a.PR - 1) / a.PR;
  const bool copies = !(a.probe & 4);
  if (copies)
    issue_pass<WT> (a, ring, 0, 0, row0, c0, NC);
  if (copies && a.nslot > 1 && npass > 1)
    issue_pass<WT> (a, ring, 1, 1, row0, c0, NC);
  /* the scales: every load issued before the first store (a load→store loop would wait on each) */
  constexpr int SCN = T::SCALES ? AO_SCMAX : 1;
  uint32_t sct[SCN];
  if (T::SCALES)
    {
#pragma unroll
      for (int k = 0; k < SCN; k++)
        {
          const int i = tid + k * AO_NT;
          const int r = i / NC, c = i - r * NC;
          sct[k] = i < a.RR * NC && row0 + r < a.rows ? scale_bits<WT> (a, row0 + r, c0 + c) : 0u;
        }
    }

  /* the keys older than the new token, tile 0 (every K/V row is f16 [HD]) */
  const int pos = *a.pos, ctx = pos + 1;
  const int slot = tid / LPK, d0 = (tid % LPK) * 8;
  int4 kr[AO_STEPS], vr[AO_STEPS];
  auto load_kv = [&] (int tile, bool old_only) {
#pragma unroll
    for (int s = 0; s < AO_STEPS; s++)
      {
        const int j = tile * KT + s * KPS + slot;
        if (j < ctx && (!old_only || j < pos))
          {
            const int page = a.block_table[j / HONE_K_KV_BLOCK], sl = j % HONE_K_KV_BLOCK;
            const size_t off = (((size_t) page * a.nkv + kvh) * HONE_K_KV_BLOCK + sl) * HD + d0;
            kr[s] = *(const int4 *) (a.k_pool + off);
            vr[s] = *(const int4 *) (a.v_pool + off);
          }
        else if (old_only ? j != pos : true)
          {
            kr[s] = make_int4 (0, 0, 0, 0);
            vr[s] = make_int4 (0, 0, 0, 0);
          }
      }
  };
  load_kv (0, true);
  if (T::SCALES)
#pragma unroll
    for (int k = 0; k < SCN; k++)
      if (tid + k * AO_NT < a.RR * NC)
        sc_s[tid + k * AO_NT] = sct[k];

  pdl_wait ();

  /* 2. q of this block's heads and the new token's K/V row (written by q|k|v) */
  for (int i = tid; i < GH; i += AO_NT)
    q_s[i] = a.qkv[(size_t) kvh * GH + i];
  if (pos < KT)
    {
#pragma unroll
      for (int s = 0; s < AO_STEPS; s++)
        if (s * KPS + slot == pos)
          {
            const int page = a.block_table[pos / HONE_K_KV_BLOCK], sl = pos % HONE_K_KV_BLOCK;
            const size_t off = (((size_t) page * a.nkv + kvh) * HONE_K_KV_BLOCK + sl) * HD + d0;
            kr[s] = *(const int4 *) (a.k_pool + off);
            vr[s] = *(const int4 *) (a.v_pool + off);
          }
    }
  if (tid < GM)
    {
      m_s[tid] = -INFINITY;
      l_s[tid] = 0.f;
    }
  __syncthreads ();

  float acc[GM][8];
#pragma unroll
  for (int g = 0; g < GM; g++)
#pragma unroll
    for (int i = 0; i < 8; i++)
      acc[g][i] = 0.f;

  const int ntile = a.probe & 1 ? 0 : (ctx + KT - 1) / KT;
  for (int tile = 0; tile < ntile; tile++)
    {
      if (tile > 0)
        {
          load_kv (tile, false);
          __syncthreads ();   /* every warp is done with the last tile's probabilities */
        }
      /* scores: a key a group of LPK lanes, each lane 8 of its dims */
#pragma unroll
      for (int s = 0; s < AO_STEPS; s++)
        {
          float kf[8];
          h8_to_f32 (kr[s], kf);
          const int jl = s * KPS + slot, j = tile * KT + jl;
#pragma unroll
          for (int g = 0; g < GM; g++)
            {
              if (g >= G)
                break;
              const float4 qa = *(const float4 *) (q_s + g * HD + d0);
              const float4 qb = *(const float4 *) (q_s + g * HD + d0 + 4);
              float p = qa.x * kf[0] + qa.y * kf[1] + qa.z * kf[2] + qa.w * kf[3]
                        + qb.x * kf[4] + qb.y * kf[5] + qb.z * kf[6] + qb.w * kf[7];
#pragma unroll
              for (int o = LPK / 2; o > 0; o >>= 1)
                p += __shfl_xor_sync (0xffffffffu, p, o);
              if ((tid % LPK) == 0)
                S_s[g * KT + jl] = j < ctx ? p : -INFINITY;
            }
        }
      __syncthreads ();
      /* online softmax: warp g takes head g */
      for (int g = warp; g < G; g += AO_NW)
        {
          float mx = -INFINITY;
          for (int jl = lane; jl < KT; jl += 32)
            mx = fmaxf (mx, S_s[g * KT + jl]);
          mx = warp_max (mx);
          const float m_old = m_s[g], m_new = fmaxf (m_old, mx);
          float sum = 0.f;
          for (int jl = lane; jl < KT; jl += 32)
            {
              const float e = __expf (S_s[g * KT + jl] - m_new);   /* -inf → 0 */
              S_s[g * KT + jl] = e;
              sum += e;
            }
          sum = warp_sum (sum);
          if (lane == 0)
            {
              const float al = m_old == -INFINITY ? 0.f : __expf (m_old - m_new);
              al_s[g] = al;
              l_s[g] = l_s[g] * al + sum;
              m_s[g] = m_new;
            }
        }
      __syncthreads ();
      /* P·V into this lane's 8 dims of each head */
#pragma unroll
      for (int g = 0; g < GM; g++)
        if (g < G)
          {
            const float al = al_s[g];
#pragma unroll
            for (int i = 0; i < 8; i++)
              acc[g][i] *= al;
          }
#pragma unroll
      for (int s = 0; s < AO_STEPS; s++)
        {
          float vf[8];
          h8_to_f32 (vr[s], vf);
          const int jl = s * KPS + slot;
#pragma unroll
          for (int g = 0; g < GM; g++)
            {
              if (g >= G)
                break;
              const float p = S_s[g * KT + jl];
#pragma unroll
              for (int i = 0; i < 8; i++)
                acc[g][i] = fmaf (p, vf[i], acc[g][i]);
            }
        }
    }
  /* the key slots of a warp meet by shuffles, the warps in shared memory */
#pragma unroll
  for (int g = 0; g < GM; g++)
    {
      if (g >= G)
        break;
#pragma unroll
      for (int i = 0; i < 8; i++)
        {
          float v = acc[g][i];
#pragma unroll
          for (int o = 16; o >= LPK; o >>= 1)
            v += __shfl_xor_sync (0xffffffffu, v, o);
          acc[g][i] = v;
        }
      if (lane < LPK)
        {
          float *dst = part_s + (size_t) warp * GH + g * HD + d0;
          *(float4 *) dst = make_float4 (acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
          *(float4 *) (dst + 4) = make_float4 (acc[g][4], acc[g][5], acc[g][6], acc[g][7]);
        }
    }
  __syncthreads ();
  for (int i = tid; i < GH; i += AO_NT)
    {
      float v = 0.f;
#pragma unroll
      for (int w = 0; w < AO_NW; w++)
        v += part_s[w * GH + i];
      x_s[i] = a.probe & 1 ? q_s[i] : v / l_s[i / HD];
    }
  __syncthreads ();

  /* 3. the input in Wo's format */
  int8_t *xq_s = (int8_t *) xin;
  float2 *xds_s = (float2 *) (xin + GH);
  uint4 *xh_s = (uint4 *) xin;
  float2 *xhd_s = (float2 *) (xin + (size_t) NC * 64);
  if (WT == HONE_K_Q8_0 || WT == HONE_K_Q4_0 || WT == HONE_K_Q4_1)
    {
      for (int b = warp; b < GH / 32; b += AO_NW)
        quant32_store (x_s[b * 32 + lane], xq_s + b * 32, xds_s + b, lane);
    }
  else if (WT == HONE_K_Q4Z)
    {
      /* HoneKActH16 of each 32 values: pieces [chunk][4] in h16_store's byte order */
      for (int b = warp; b < NC; b += AO_NW)
        {
          const float v = x_s[b * 32 + lane];
          const float amax = warp_max (fabsf (v));
          const float inv = amax > 0.f ? 32767.f / amax : 0.f;
          const int vi = h16_fixed (v, inv);
          const int sum = (int) warp_sum ((float) vi);   /* exact: |Σ| < 2^24 */
          const int k = lane & 7;
          uint8_t *piece = (uint8_t *) (xh_s + b * 4 + (lane >> 3));
          const int byte = 2 * (k & 3) + (k >> 2);
          piece[byte] = (uint8_t) ((unsigned) vi >> 8);
          piece[byte + 8] = (uint8_t) (vi & 0xff);
          if (lane == 0)
            xhd_s[b] = make_float2 (amax / 32767.f, __int_as_float (sum));
        }
    }
  __syncthreads ();

  /* this lane's input chunk(s), the same for every row */
  constexpr int NCL = (WT == HONE_K_BF16 || WT == HONE_K_F16) ? 2 : 1;   /* chunks a lane: NC ≤ 32·NCL */
  const int LPR = NC >= 32 ? 32 : NC > 16 ? 32 : NC > 8 ? 16 : NC > 4 ? 8 : NC > 2 ? 4 : NC > 1 ? 2 : 1;
  const int RPS = 32 / LPR, lr = lane % LPR;
  float4 xf[NCL][2];
  int4 xa[NCL], xb[NCL];
  uint4 xv[NCL][4];
  float2 xd[NCL];
#pragma unroll
  for (int k = 0; k < NCL; k++)
    {
      const int c = lr + k * 32;
      const bool on = c < NC;
      if (WT == HONE_K_BF16 || WT == HONE_K_F16)
        {
          xf[k][0] = on ? *(const float4 *) (x_s + c * 8) : make_float4 (0.f, 0.f, 0.f, 0.f);
          xf[k][1] = on ? *(const float4 *) (x_s + c * 8 + 4) : make_float4 (0.f, 0.f, 0.f, 0.f);
        }
      else if (WT == HONE_K_Q8_0)
        {
          xa[k] = on ? *(const int4 *) (xq_s + c * 16) : make_int4 (0, 0, 0, 0);
          xd[k] = on ? xds_s[c >> 1] : make_float2 (0.f, 0.f);
        }
      else if (WT == HONE_K_Q4Z)
        {
#pragma unroll
          for (int p = 0; p < 4; p++)
            xv[k][p] = on ? xh_s[c * 4 + p] : make_uint4 (0, 0, 0, 0);
          xd[k] = on ? xhd_s[c] : make_float2 (0.f, 0.f);
        }
      else
        {
          xa[k] = on ? *(const int4 *) (xq_s + c * 32) : make_int4 (0, 0, 0, 0);
          xb[k] = on ? *(const int4 *) (xq_s + c * 32 + 16) : make_int4 (0, 0, 0, 0);
          xd[k] = on ? xds_s[c] : make_float2 (0.f, 0.f);
        }
    }

  /* 4. the rows, pass by pass */
  for (int p = 0; p < npass; p++)
    {
      const int sl = a.nslot > 1 ? (p & 1) : 0;
      /* groups committed so far: min(npass, p + nslot); pass p is ready when at most (that − p − 1) are pending */
      const int issued = min (npass, p + a.nslot);
      cp_async_wait (copies ? issued - p - 1 : 0);
      __syncthreads ();
      if (a.probe & 2)
        {
          for (int r = tid; r < a.PR && p * a.PR + r < a.RR; r += AO_NT)
            red[p * a.PR + r] = 0.f;
          if (copies && p + a.nslot < npass)
            {
              __syncthreads ();
              issue_pass<WT> (a, ring, sl, p + a.nslot, row0, c0, NC);
            }
          continue;
        }
      const int pr0 = p * a.PR, n = min (a.PR, a.RR - pr0);
      const int4 *wt = ring + (size_t) sl * a.PR * NC;
      for (int r = warp * RPS + lane / LPR; r - (lane / LPR) < n; r += AO_NW * RPS)
        {
          float s = 0.f;
          if (r < n)
            {
#pragma unroll
              for (int k = 0; k < NCL; k++)
                {
                  const int c = lr + k * 32;
                  if (c >= NC)
                    continue;
                  const int4 w = wt[r * NC + c];
                  const uint32_t sc = T::SCALES ? sc_s[(pr0 + r) * NC + c] : 0u;
                  if (WT == HONE_K_BF16 || WT == HONE_K_F16)
                    s = dot_chunk_f<WT> (w, xf[k][0], xf[k][1], s);
                  else if (WT == HONE_K_Q8_0)
                    s = dot_chunk_q8 (w, sc, xa[k], xd[k].x, s);
                  else if (WT == HONE_K_Q4Z)
                    s = dot_chunk_w4 (w, sc & 0xffffu, sc >> 16, xv[k], xd[k], s);
                  else
                    s = dot_chunk_q4<WT> (w, sc, xa[k], xb[k], xd[k], s);
                }
            }
#pragma unroll
          for (int o = 16; o > 0; o >>= 1)
            if (o < LPR)
              s += __shfl_xor_sync (0xffffffffu, s, o);
          if (lr == 0 && r < n)
            red[pr0 + r] = s;
        }
      if (copies && p + a.nslot < npass)
        {
          __syncthreads ();   /* every warp is done with this slot */
          issue_pass<WT> (a, ring, sl, p + a.nslot, row0, c0, NC);
        }
    }
  if (a.probe & 8)
    {
      __syncthreads ();
      for (int i = tid; i < a.RR; i += AO_NT)
        if (row0 + i < a.rows && (i % (int) gridDim.x) == kvh)
          a.h[row0 + i] += red[i];
      return;
    }

  /* 5. the heads' sums meet in the cluster (fixed order), each block writes every nkv-th row */
  cluster.sync ();
  const int nk = (int) cluster.num_blocks ();
  for (int i = kvh + nk * tid; i < a.RR; i += nk * AO_NT)
    {
      const int row = row0 + i;
      float v = 0.f;
      for (int k = 0; k < nk; k++)
        v += cluster.map_shared_rank (red, k)[i];
      if (row < a.rows)
        a.h[row] += v;
    }
  cluster.sync ();   /* the others' reads of this block's sums are done */
#else
  (void) a;
#endif
}

/* ---- host ------------------------------------------------------------------ */

static int ao_ctx = -1;
static unsigned ao_runs;

extern "C" unsigned
hone_k_attn_o_runs (void)
{
  return ao_runs;
}

extern "C" int
hone_k_attn_o_ctx (void)
{
  if (ao_ctx < 0)
    {
      const char *e = getenv ("HONE_ATTN_O");
      const char *c = getenv ("HONE_ATTN_O_CTX");
      ao_ctx = e && !strcmp (e, "0") ? 0 : c && *c ? (atoi (c) > 0 ? atoi (c) : 0) : AO_CTX_DEFAULT;
      if (!hone_k_stage_supported ())   /* clusters and PDL: sm_90 */
        ao_ctx = 0;
    }
  return ao_ctx;
}

extern "C" void
hone_k_attn_o_set_ctx (int keys)
{
  ao_ctx = keys < 0 ? -1 : keys;
}

/* The launch geometry of a shape (0 on success). */
struct AoGeom {
  int RR, RG, PR, nslot, NC;
  size_t smem;
};

static int
ao_elems (int type)
{
  switch (type)
    {
    case HONE_K_BF16: case HONE_K_F16: return 8;
    case HONE_K_Q8_0: return 16;
    case HONE_K_Q4_0: case HONE_K_Q4_1: case HONE_K_Q4Z: return 32;
    default: return 0;
    }
}

static bool
ao_geom (const HoneKMatrix *wo, int nq, int nkv, int hd, AoGeom *g)
{
  const int E = ao_elems (wo->type);
  if (!E || nkv < 1 || nkv > 8 || nq % nkv || (hd != 64 && hd != 128))
    return false;
  const int G = nq / nkv, GH = G * hd;
  if (G > AO_GM || wo->cols != nq * hd || GH % E || GH % 32)
    return false;
  const int NC = GH / E;
  const bool scales = E != 8;
  if (NC > (E == 8 ? 64 : 32))   /* a lane holds at most two (BF16/F16) or one chunk */
    return false;
  if (wo->type == HONE_K_Q4Z)
    {
      const int grp = wo->group ? wo->group : 32;
      if (grp != 32 && grp != 64 && grp != 128)
        return false;
    }
  const int sms = hone_k_sm_count ();
  int RG = sms / nkv;
  if (RG < 1)
    RG = 1;
  int RR = (wo->rows + RG - 1) / RG;
  if (RR > 1024 || (scales && RR * NC > AO_NT * AO_SCMAX))
    return false;
  RG = (wo->rows + RR - 1) / RR;
  const int KT = (256 / (hd / 8)) * AO_STEPS;
  const size_t other = (size_t) (scales ? ao_scale_words (RR, NC) * 4 : 0)                /* scales */
                       + (size_t) GH * 4                                                   /* q */
                       + (size_t) G * KT * 4                                               /* scores */
                       + (size_t) AO_NW * GH * 4                                           /* P·V partials */
                       + (size_t) GH * 4                                                   /* x */
                       + (size_t) NC * 64 + (size_t) GH + (size_t) GH / 32 * 8 + 64;       /* xin */
  const size_t budget = 227 * 1024 - 5 * 1024;   /* the opt-in maximum less the static arrays (red[], m/l/α) */
  if (other + (size_t) NC * 16 > budget)
    return false;
  const size_t row_bytes = (size_t) NC * 16;
  int PR = RR, nslot = 1;
  if (other + (size_t) RR * row_bytes > budget)
    {
      nslot = 2;
      PR = (int) ((budget - other) / 2 / row_bytes);
      if (PR < 1)
        return false;
    }
  g->RR = RR;
  g->RG = RG;
  g->PR = PR;
  g->nslot = nslot;
  g->NC = NC;
  g->smem = other + (size_t) nslot * PR * row_bytes;
  return true;
}

/* The launch configuration of a shape: grid (nkv, RG), clusters of nkv, the
 * shared memory, PDL when on (HONE_ATTN_O_PDL=0 takes it off, for A/B runs). */
struct AoLaunch {
  cudaLaunchConfig_t cfg;
  cudaLaunchAttribute attr[2];
};

static void
ao_launch_config (AoLaunch &l, const AoGeom &g, int nkv, cudaStream_t stream)
{
  static int pdl_env = -1;
  if (pdl_env < 0)
    {
      const char *e = getenv ("HONE_ATTN_O_PDL");
      pdl_env = e && !strcmp (e, "0") ? 0 : 1;
    }
  l = AoLaunch {};
  l.cfg.gridDim = dim3 (nkv, g.RG, 1);
  l.cfg.blockDim = dim3 (AO_NT);
  l.cfg.dynamicSmemBytes = g.smem;
  l.cfg.stream = stream;
  l.attr[0].id = cudaLaunchAttributeClusterDimension;
  l.attr[0].val.clusterDim.x = nkv;
  l.attr[0].val.clusterDim.y = 1;
  l.attr[0].val.clusterDim.z = 1;
  int n = 1;
  if (pdl_env && hone_k_pdl_enabled ())
    {
      l.attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      l.attr[1].val.programmaticStreamSerializationAllowed = 1;
      n = 2;
    }
  l.cfg.attrs = l.attr;
  l.cfg.numAttrs = n;
}

/* launch (fits == NULL), or say whether at least one cluster of the shape fits the device */
template <int WT, int HD, int GM>
static int
launch_ao (const AoArgs &a, const AoGeom &g, int nkv, cudaStream_t stream, bool *fits)
{
  auto kernel = attn_o_kernel<WT, HD, GM>;
  static size_t smem_set;
  if (g.smem > smem_set)
    {
      HONE_K_CHECK (cudaFuncSetAttribute (kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int) g.smem));
      smem_set = g.smem;
    }
  AoLaunch l;
  ao_launch_config (l, g, nkv, stream);
  if (fits)
    {
      int n = 0;
      const cudaError_t e = cudaOccupancyMaxActiveClusters (&n, kernel, &l.cfg);
      if (e != cudaSuccess)
        cudaGetLastError ();
      *fits = e == cudaSuccess && n > 0;
      return 0;
    }
  const cudaError_t e = cudaLaunchKernelEx (&l.cfg, kernel, a);
  if (e == cudaSuccess)
    ao_runs++;
  return (int) e;
}

template <int HD, int GM>
static int
launch_ao_type (const AoArgs &a, const AoGeom &g, int type, int nkv, cudaStream_t stream, bool *fits)
{
  switch (type)
    {
    case HONE_K_BF16: return launch_ao<HONE_K_BF16, HD, GM> (a, g, nkv, stream, fits);
    case HONE_K_F16: return launch_ao<HONE_K_F16, HD, GM> (a, g, nkv, stream, fits);
    case HONE_K_Q8_0: return launch_ao<HONE_K_Q8_0, HD, GM> (a, g, nkv, stream, fits);
    case HONE_K_Q4_0: return launch_ao<HONE_K_Q4_0, HD, GM> (a, g, nkv, stream, fits);
    case HONE_K_Q4_1: return launch_ao<HONE_K_Q4_1, HD, GM> (a, g, nkv, stream, fits);
    case HONE_K_Q4Z: return launch_ao<HONE_K_Q4Z, HD, GM> (a, g, nkv, stream, fits);
    default: return (int) cudaErrorInvalidValue;
    }
}

static int
launch_ao_any (const AoArgs &a, const AoGeom &g, int type, int nkv, int hd, cudaStream_t stream, bool *fits)
{
  /* the P·V accumulators are sized for at most 4 or 8 query heads a KV head */
  if (a.G <= 4)
    return hd == 128 ? launch_ao_type<128, 4> (a, g, type, nkv, stream, fits)
                     : launch_ao_type<64, 4> (a, g, type, nkv, stream, fits);
  return hd == 128 ? launch_ao_type<128, 8> (a, g, type, nkv, stream, fits)
                   : launch_ao_type<64, 8> (a, g, type, nkv, stream, fits);
}

extern "C" bool
hone_k_attn_o_takes (const HoneKMatrix *wo, int nq, int nkv, int hd)
{
  AoGeom g;
  if (hone_k_attn_o_ctx () <= 0 || !ao_geom (wo, nq, nkv, hd, &g))
    return false;
  /* whether a cluster of it fits the device, asked once a shape */
  static struct { int type, nq, nkv, hd, rows; bool fits; } seen[16];
  static int n_seen;
  for (int i = 0; i < n_seen; i++)
    if (seen[i].type == wo->type && seen[i].nq == nq && seen[i].nkv == nkv && seen[i].hd == hd
        && seen[i].rows == wo->rows)
      return seen[i].fits;
  AoArgs a;
  memset (&a, 0, sizeof a);
  a.G = nq / nkv;
  bool fits = false;
  launch_ao_any (a, g, wo->type, nkv, hd, 0, &fits);
  if (n_seen < 16)
    seen[n_seen++] = { wo->type, nq, nkv, hd, wo->rows, fits };
  return fits;
}

extern "C" int
hone_k_attn_o (const float *qkv, int nq, int nkv, int hd, const int32_t *pos, const void *k_pool,
               const void *v_pool, const int32_t *block_table, const HoneKMatrix *wo, float *h,
               cudaStream_t stream)
{
  AoGeom g;
  if (!ao_geom (wo, nq, nkv, hd, &g))
    return (int) cudaErrorInvalidValue;
  AoArgs a;
  memset (&a, 0, sizeof a);
  a.qkv = qkv;
  a.pos = pos;
  a.k_pool = (const __half *) k_pool;
  a.v_pool = (const __half *) v_pool;
  a.block_table = block_table;
  a.nkv = nkv;
  a.G = nq / nkv;
  a.wq = (const int4 *) wo->q;
  a.ws = wo->s;
  a.rows = wo->rows;
  a.nchunk = wo->cols / ao_elems (wo->type);
  if (wo->type == HONE_K_Q4Z)
    {
      const int grp = wo->group ? wo->group : 32;
      a.ng = wo->cols / grp;
      a.cshift = grp == 128 ? 2 : grp == 64 ? 1 : 0;
      a.wz = (const uint8_t *) wo->s + (size_t) wo->rows * a.ng * 2;
    }
  a.h = h;
  a.RR = g.RR;
  a.PR = g.PR;
  a.nslot = g.nslot;
  a.trigger = 1;
  static int probe = -1;
  if (probe < 0)
    {
      const char *e = getenv ("HONE_ATTN_O_PROBE");
      probe = e ? atoi (e) & 15 : 0;
      if (probe)   /* never silent: the output is wrong then */
        fprintf (stderr, "hone: HONE_ATTN_O_PROBE=%d leaves stages out of attention+o (measurement only)\n", probe);
    }
  a.probe = probe;
  return launch_ao_any (a, g, wo->type, nkv, hd, stream, NULL);
}
