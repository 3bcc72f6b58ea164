/* hone-k-attn-prefill.cu — causal flash attention for prefill on the tensor
 * cores (mma.sync m16n8k16, f16 in, f32 accumulate), reading K/V from the
 * paged cache; no [seq × seq] matrix is ever stored.
 *
 * Block = 64 queries of one q head, 4 warps × 16 query rows. Q stays in
 * registers as A fragments; per 64-key tile (one KV page) K goes to shared
 * memory as is and V transposed, S = Q·Kᵀ lands in registers, the online
 * softmax runs on the accumulator fragments (a thread holds two rows; a row
 * is spread over the 4 threads of a quad), and P is re-packed straight from
 * the S accumulators into A fragments for O += P·V (the FlashAttention-2
 * register layout). Heaviest query tiles are scheduled first.
 *
 * That is version 1 (session 1, 56 TFLOP/s at 2,048 tokens hd 128), kept for
 * A/B runs (HONE_ATTN_PREFILL=1); version 2 below is the default.
 */
#include "hone-k-common.cuh"
#include <stdlib.h>
#include <type_traits>

#define QT 64
#define KT 64          /* = HONE_K_KV_BLOCK: a key tile is one page */

static __device__ __forceinline__ void
mma16816 (float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1)
{
  asm volatile ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

static __device__ __forceinline__ uint32_t
pack_h2 (float lo, float hi)
{
  __half2 h = __floats2half2_rn (lo, hi);
  return *(uint32_t *) &h;
}

/* 3 blocks an SM (12 warps): the tile loads of one block hide behind the
 * others' tensor-core work. */
template <int HD>
__global__ void __launch_bounds__ (128, 3)
attn_prefill_kernel (const float *qkv, int n_tok, int nq, int nkv, int pos0,
                     const __half *k_pool, const __half *v_pool, const int32_t *table, float *out)
{
  constexpr int KP = HD + 8;     /* padded rows: conflict-free fragment loads */
  constexpr int VP = KT + 8;
  __shared__ __align__ (16) __half Ks[KT * KP];
  __shared__ __align__ (16) __half Vt[HD * VP];

  const int qt = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, kvh = h / (nq / nkv);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int S_row = (nq + 2 * nkv) * HD;
  const int q0 = qt * QT;
  pdl_trigger ();
  pdl_wait ();

  /* Q fragments: rows r0 = q0+16w+g and r0+8 */
  const int r0 = q0 + warp * 16 + g, r1 = r0 + 8;
  uint32_t qf[HD / 16][4];
  {
    const float *qa = qkv + (size_t) r0 * S_row + (size_t) h * HD;
    const float *qb = qkv + (size_t) r1 * S_row + (size_t) h * HD;
    const bool va = r0 < n_tok, vb = r1 < n_tok;
#pragma unroll
    for (int kc = 0; kc < HD / 16; kc++)
      {
        const int c = kc * 16 + 2 * t4;
        const float2 a01 = va ? *(const float2 *) (qa + c) : make_float2 (0.f, 0.f);
        const float2 a45 = va ? *(const float2 *) (qa + c + 8) : make_float2 (0.f, 0.f);
        const float2 b01 = vb ? *(const float2 *) (qb + c) : make_float2 (0.f, 0.f);
        const float2 b45 = vb ? *(const float2 *) (qb + c + 8) : make_float2 (0.f, 0.f);
        qf[kc][0] = pack_h2 (a01.x, a01.y);
        qf[kc][1] = pack_h2 (b01.x, b01.y);
        qf[kc][2] = pack_h2 (a45.x, a45.y);
        qf[kc][3] = pack_h2 (b45.x, b45.y);
      }
  }
  float o[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; n++)
    o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m_run[2] = { -INFINITY, -INFINITY }, l_run[2] = { 0.f, 0.f };
  const int end = pos0 + n_tok;                          /* keys that exist */
  const int qpos0 = pos0 + r0, qpos1 = pos0 + r1;        /* absolute positions of my rows */
  const int kend = min (end, pos0 + q0 + QT);

  for (int kt = 0; kt < kend; kt += KT)
    {
      __syncthreads ();
      const __half *kp = k_pool + ((size_t) table[kt / KT] * nkv + kvh) * KT * HD;
      const __half *vp = v_pool + ((size_t) table[kt / KT] * nkv + kvh) * KT * HD;
      constexpr int V16 = HD / 8;
#pragma unroll 4
      for (int i = tid; i < KT * V16; i += 128)
        {
          const int kk = i / V16, c = i - kk * V16;
          /* Slots past the sequence's end hold whatever was there: zero
           * them, since 0·NaN would poison P·V even under a zero weight. */
          const bool ok = kt + kk < end;
          const int4 kv = ok ? ((const int4 *) kp)[i] : make_int4 (0, 0, 0, 0);
          const int4 vv = ok ? ((const int4 *) vp)[i] : make_int4 (0, 0, 0, 0);
          *(int4 *) (Ks + kk * KP + c * 8) = kv;
          const __half *vh = (const __half *) &vv;
#pragma unroll
          for (int e = 0; e < 8; e++)
            Vt[(c * 8 + e) * VP + kk] = vh[e];
        }
      __syncthreads ();

      float s[KT / 8][4];
#pragma unroll
      for (int j = 0; j < KT / 8; j++)
        {
          s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
          const __half *kr = Ks + (j * 8 + g) * KP + 2 * t4;
#pragma unroll
          for (int kc = 0; kc < HD / 16; kc++)
            {
              const uint32_t b0 = *(const uint32_t *) (kr + kc * 16);
              const uint32_t b1 = *(const uint32_t *) (kr + kc * 16 + 8);
              mma16816 (s[j], qf[kc][0], qf[kc][1], qf[kc][2], qf[kc][3], b0, b1);
            }
        }
      /* mask + online softmax on the fragments */
      float mt[2] = { -INFINITY, -INFINITY };
#pragma unroll
      for (int j = 0; j < KT / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          {
            const int key = kt + j * 8 + 2 * t4 + (e & 1);
            const int qp = e < 2 ? qpos0 : qpos1;
            if (key > qp || key >= end)
              s[j][e] = -INFINITY;
            mt[e >> 1] = fmaxf (mt[e >> 1], s[j][e]);
          }
      float alpha[2], mn[2];
#pragma unroll
      for (int r = 0; r < 2; r++)
        {
          mt[r] = fmaxf (mt[r], __shfl_xor_sync (0xffffffffu, mt[r], 1));
          mt[r] = fmaxf (mt[r], __shfl_xor_sync (0xffffffffu, mt[r], 2));
          mn[r] = fmaxf (m_run[r], mt[r]);
          alpha[r] = (m_run[r] == -INFINITY) ? 0.f : __expf (m_run[r] - mn[r]);
          if (mn[r] == -INFINITY)
            alpha[r] = 1.f;
        }
      float ps[2] = { 0.f, 0.f };
#pragma unroll
      for (int j = 0; j < KT / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          {
            const int r = e >> 1;
            const float p = mn[r] == -INFINITY ? 0.f : __expf (s[j][e] - mn[r]);
            s[j][e] = p;
            ps[r] += p;
          }
#pragma unroll
      for (int r = 0; r < 2; r++)
        {
          ps[r] += __shfl_xor_sync (0xffffffffu, ps[r], 1);
          ps[r] += __shfl_xor_sync (0xffffffffu, ps[r], 2);
          l_run[r] = l_run[r] * alpha[r] + ps[r];
          m_run[r] = mn[r];
        }
#pragma unroll
      for (int n = 0; n < HD / 8; n++)
        {
          o[n][0] *= alpha[0];
          o[n][1] *= alpha[0];
          o[n][2] *= alpha[1];
          o[n][3] *= alpha[1];
        }
      /* O += P·V: P's accumulators become A fragments as they are */
#pragma unroll
      for (int kc = 0; kc < KT / 16; kc++)
        {
          const uint32_t a0 = pack_h2 (s[2 * kc][0], s[2 * kc][1]);
          const uint32_t a1 = pack_h2 (s[2 * kc][2], s[2 * kc][3]);
          const uint32_t a2 = pack_h2 (s[2 * kc + 1][0], s[2 * kc + 1][1]);
          const uint32_t a3 = pack_h2 (s[2 * kc + 1][2], s[2 * kc + 1][3]);
#pragma unroll
          for (int n = 0; n < HD / 8; n++)
            {
              const __half *vr = Vt + (n * 8 + g) * VP + kc * 16 + 2 * t4;
              const uint32_t b0 = *(const uint32_t *) vr;
              const uint32_t b1 = *(const uint32_t *) (vr + 8);
              mma16816 (o[n], a0, a1, a2, a3, b0, b1);
            }
        }
    }
  const float inv0 = l_run[0] > 0.f ? 1.f / l_run[0] : 0.f;
  const float inv1 = l_run[1] > 0.f ? 1.f / l_run[1] : 0.f;
#pragma unroll
  for (int n = 0; n < HD / 8; n++)
    {
      const int c = h * HD + n * 8 + 2 * t4;
      if (r0 < n_tok)
        *(float2 *) (out + (size_t) r0 * nq * HD + c) = make_float2 (o[n][0] * inv0, o[n][1] * inv0);
      if (r1 < n_tok)
        *(float2 *) (out + (size_t) r1 * nq * HD + c) = make_float2 (o[n][2] * inv1, o[n][3] * inv1);
    }
}

static int
launch_v1 (const float *qkv, int n_tok, int nq, int nkv, int hd, int pos_host,
           const void *k_pool, const void *v_pool, const int32_t *block_table, float *out, cudaStream_t stream)
{
  const dim3 grid ((n_tok + QT - 1) / QT, nq), block (128);
  if (hd == 128)
    return hone_k_launch (attn_prefill_kernel<128>, grid, block, 0, stream, qkv, n_tok, nq, nkv, pos_host,
                          (const __half *) k_pool, (const __half *) v_pool, block_table, out);
  return hone_k_launch (attn_prefill_kernel<64>, grid, block, 0, stream, qkv, n_tok, nq, nkv, pos_host,
                        (const __half *) k_pool, (const __half *) v_pool, block_table, out);
}

/* ---- version 2 ---------------------------------------------------------------
 * 128 queries a block (8 warps × 16 rows; or 64 with 4 warps, see
 * NW_DEFAULT), so every K/V tile in shared memory feeds up to twice the work
 * of version 1; tiles arrive by cp.async into a two-stage ring (the next page
 * loads while this one is computed), fragments
 * come out of shared memory with ldmatrix (V with .trans, so V is stored as it
 * is in the cache, not transposed element by element); the softmax runs in
 * base 2 with log2(e) folded into one FFMA; only tiles that cross the
 * diagonal (or the sequence end) are masked, and a warp skips a tile whose
 * keys all lie after its rows. Grid x = heads, y = query tiles heaviest first,
 * so all heads' long tiles start before any short one (the causal tail).
 * The output can be written as bf16/f16 straight into the o GEMM's input.
 */
/* Warps a block (16 query rows each): 8 (128 queries, 222 registers, one
 * block an SM at hd 128) or 4 (64 queries, 168 registers, three blocks an SM,
 * out of step with each other through softmax and barriers). On the H200 at
 * 2,048 tokens hd 128 they measured 207 and 203 TFLOP/s (8 wins at pos > 0:
 * 223 against 186), so 8 is the default. HONE_ATTN_PREFILL=2 / 3 picks 8 / 4. */
#define NW_DEFAULT 8

static __device__ __forceinline__ void
cp_async16 (void *smem, const void *gmem, bool ok)
{
  const uint32_t s = (uint32_t) __cvta_generic_to_shared (smem);
  asm volatile ("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(ok ? 16 : 0));
}

static __device__ __forceinline__ void
cp_async_commit (void)
{
  asm volatile ("cp.async.commit_group;" ::);
}

template <int N>
static __device__ __forceinline__ void
cp_async_wait (void)
{
  asm volatile ("cp.async.wait_group %0;" ::"n"(N));
}

static __device__ __forceinline__ void
ldsm_x4 (uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3, const __half *p)
{
  const uint32_t s = (uint32_t) __cvta_generic_to_shared (p);
  asm volatile ("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(s));
}

static __device__ __forceinline__ void
ldsm_x4_t (uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3, const __half *p)
{
  const uint32_t s = (uint32_t) __cvta_generic_to_shared (p);
  asm volatile ("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(s));
}

static __device__ __forceinline__ float
ex2 (float x)
{
  float y;
  asm ("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <int HD>
static constexpr int
attn2_smem_bytes (void)
{
  return 2 * 2 * KT * (HD + 8) * 2;   /* 2 stages × (K, V) × 64 rows padded */
}

/* OUT: 0 f32, 1 bf16, 2 f16 */
template <int HD, int OUT, int NW>
__global__ void __launch_bounds__ (NW * 32, NW == 8 ? (HD == 128 ? 1 : 2) : (HD == 128 ? 3 : 4))
attn_prefill2_kernel (const float *qkv, int n_tok, int nq, int nkv, int pos0,
                      const __half *k_pool, const __half *v_pool, const int32_t *table, void *out)
{
  constexpr int KP = HD + 8;           /* 16 bytes of padding a row: ldmatrix rows hit distinct banks */
  constexpr int TILE = KT * KP;
  constexpr float L2E = 1.4426950408889634f;
  extern __shared__ __align__ (16) __half smem2[];

  const int h = blockIdx.x, qt = gridDim.y - 1 - blockIdx.y, kvh = h / (nq / nkv);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int S_row = (nq + 2 * nkv) * HD;
  constexpr int QT2 = 16 * NW;
  const int q0 = qt * QT2;
  pdl_trigger ();
  pdl_wait ();

  const int end = pos0 + n_tok;                          /* keys that exist */
  const int kend = min (end, pos0 + q0 + QT2);           /* keys this block needs */
  const int n_tiles = (kend + KT - 1) / KT;
  const int wfirst = pos0 + q0 + warp * 16;              /* my warp's first query position */
  const int wkend = min (end, wfirst + 16);              /* keys my warp needs */

  auto load_tile = [&] (int i, int stage) {
    const size_t base = ((size_t) table[i] * nkv + kvh) * KT * HD;
    __half *ks = smem2 + stage * 2 * TILE, *vs = ks + TILE;
    constexpr int CH = HD / 8;
#pragma unroll
    for (int u = 0; u < KT * CH / (NW * 32); u++)
      {
        const int c = tid + u * NW * 32, r = c / CH, cc = c - r * CH;
        /* slots past the end hold whatever was there: zero-fill them, since
         * 0·NaN would poison P·V even under a zero weight */
        const bool ok = i * KT + r < end;
        cp_async16 (ks + r * KP + cc * 8, k_pool + base + (size_t) c * 8, ok);
        cp_async16 (vs + r * KP + cc * 8, v_pool + base + (size_t) c * 8, ok);
      }
    cp_async_commit ();
  };
  load_tile (0, 0);

  /* Q fragments straight from the f32 activations (already scaled by 1/sqrt(hd)) */
  const int r0 = q0 + warp * 16 + g, r1 = r0 + 8;
  uint32_t qf[HD / 16][4];
  {
    const float *qa = qkv + (size_t) r0 * S_row + (size_t) h * HD;
    const float *qb = qkv + (size_t) r1 * S_row + (size_t) h * HD;
    const bool va = r0 < n_tok, vb = r1 < n_tok;
#pragma unroll
    for (int kc = 0; kc < HD / 16; kc++)
      {
        const int c = kc * 16 + 2 * t4;
        const float2 a01 = va ? *(const float2 *) (qa + c) : make_float2 (0.f, 0.f);
        const float2 a45 = va ? *(const float2 *) (qa + c + 8) : make_float2 (0.f, 0.f);
        const float2 b01 = vb ? *(const float2 *) (qb + c) : make_float2 (0.f, 0.f);
        const float2 b45 = vb ? *(const float2 *) (qb + c + 8) : make_float2 (0.f, 0.f);
        qf[kc][0] = pack_h2 (a01.x, a01.y);
        qf[kc][1] = pack_h2 (b01.x, b01.y);
        qf[kc][2] = pack_h2 (a45.x, a45.y);
        qf[kc][3] = pack_h2 (b45.x, b45.y);
      }
  }
  float o[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; n++)
    o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m_run[2] = { -INFINITY, -INFINITY }, l_run[2] = { 0.f, 0.f };
  const int qpos0 = pos0 + r0, qpos1 = pos0 + r1;

  /* ldmatrix lane addressing (lanes 8i..8i+7 give the rows of matrix i) */
  const int k_row = lane & 7, k_col = (lane >> 3) * 8;               /* K: 8 keys × 4 d-chunks */
  const int v_row = (lane & 7) + ((lane >> 3) & 1) * 8, v_col = (lane >> 4) * 8;  /* V: 16 keys × 2 d-chunks */

  for (int i = 0; i < n_tiles; i++)
    {
      if (i + 1 < n_tiles)
        {
          load_tile (i + 1, (i + 1) & 1);
          cp_async_wait<1> ();
        }
      else
        cp_async_wait<0> ();
      __syncthreads ();
      const int kt = i * KT;
      if (kt < wkend)
        {
          const __half *Ks = smem2 + (i & 1) * 2 * TILE, *Vs = Ks + TILE;
          float s[KT / 8][4];
#pragma unroll
          for (int j = 0; j < KT / 8; j++)
            {
              s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
              for (int kc = 0; kc < HD / 16; kc += 2)
                {
                  uint32_t b0, b1, b2, b3;
                  ldsm_x4 (b0, b1, b2, b3, Ks + (j * 8 + k_row) * KP + kc * 16 + k_col);
                  mma16816 (s[j], qf[kc][0], qf[kc][1], qf[kc][2], qf[kc][3], b0, b1);
                  mma16816 (s[j], qf[kc + 1][0], qf[kc + 1][1], qf[kc + 1][2], qf[kc + 1][3], b2, b3);
                }
            }
          /* mask only where the tile crosses my rows' diagonal or the end */
          if (kt + KT - 1 > wfirst || kt + KT > end)
            {
#pragma unroll
              for (int j = 0; j < KT / 8; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                  {
                    const int key = kt + j * 8 + 2 * t4 + (e & 1);
                    if (key > (e < 2 ? qpos0 : qpos1) || key >= end)
                      s[j][e] = -INFINITY;
                  }
            }
          float mt[2] = { -INFINITY, -INFINITY };
#pragma unroll
          for (int j = 0; j < KT / 8; j++)
            {
              mt[0] = fmaxf (mt[0], fmaxf (s[j][0], s[j][1]));
              mt[1] = fmaxf (mt[1], fmaxf (s[j][2], s[j][3]));
            }
          float ms[2];
#pragma unroll
          for (int r = 0; r < 2; r++)
            {
              mt[r] = fmaxf (mt[r], __shfl_xor_sync (0xffffffffu, mt[r], 1));
              mt[r] = fmaxf (mt[r], __shfl_xor_sync (0xffffffffu, mt[r], 2));
              const float mn = fmaxf (m_run[r], mt[r]);
              /* a row with nothing unmasked yet keeps a finite reference so
               * exp2(-inf - ms) stays 0, never NaN */
              ms[r] = mn == -INFINITY ? 0.f : mn * L2E;
              const float alpha = ex2 (m_run[r] * L2E - ms[r]);   /* m_run = -inf → 0 */
              m_run[r] = mn;
              l_run[r] *= alpha;
#pragma unroll
              for (int n = 0; n < HD / 8; n++)
                {
                  o[n][2 * r] *= alpha;
                  o[n][2 * r + 1] *= alpha;
                }
            }
#pragma unroll
          for (int j = 0; j < KT / 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
              {
                const float p = ex2 (fmaf (s[j][e], L2E, -ms[e >> 1]));
                s[j][e] = p;
                l_run[e >> 1] += p;    /* this thread's share; the quad sums at the end */
              }
          /* O += P·V: P's accumulators become A fragments as they are */
#pragma unroll
          for (int kc = 0; kc < KT / 16; kc++)
            {
              const uint32_t a0 = pack_h2 (s[2 * kc][0], s[2 * kc][1]);
              const uint32_t a1 = pack_h2 (s[2 * kc][2], s[2 * kc][3]);
              const uint32_t a2 = pack_h2 (s[2 * kc + 1][0], s[2 * kc + 1][1]);
              const uint32_t a3 = pack_h2 (s[2 * kc + 1][2], s[2 * kc + 1][3]);
#pragma unroll
              for (int n = 0; n < HD / 8; n += 2)
                {
                  uint32_t b0, b1, b2, b3;
                  ldsm_x4_t (b0, b1, b2, b3, Vs + (kc * 16 + v_row) * KP + n * 8 + v_col);
                  mma16816 (o[n], a0, a1, a2, a3, b0, b1);
                  mma16816 (o[n + 1], a0, a1, a2, a3, b2, b3);
                }
            }
        }
      __syncthreads ();   /* this stage is refilled two tiles on */
    }
#pragma unroll
  for (int r = 0; r < 2; r++)
    {
      l_run[r] += __shfl_xor_sync (0xffffffffu, l_run[r], 1);
      l_run[r] += __shfl_xor_sync (0xffffffffu, l_run[r], 2);
    }
  const float inv0 = l_run[0] > 0.f ? 1.f / l_run[0] : 0.f;
  const float inv1 = l_run[1] > 0.f ? 1.f / l_run[1] : 0.f;
#pragma unroll
  for (int n = 0; n < HD / 8; n++)
    {
      const size_t c = (size_t) h * HD + n * 8 + 2 * t4;
      const size_t i0 = (size_t) r0 * nq * HD + c, i1 = (size_t) r1 * nq * HD + c;
      const float x0 = o[n][0] * inv0, x1 = o[n][1] * inv0, y0 = o[n][2] * inv1, y1 = o[n][3] * inv1;
      if (OUT == 0)
        {
          if (r0 < n_tok) *(float2 *) ((float *) out + i0) = make_float2 (x0, x1);
          if (r1 < n_tok) *(float2 *) ((float *) out + i1) = make_float2 (y0, y1);
        }
      else if (OUT == 1)
        {
          if (r0 < n_tok) *(__nv_bfloat162 *) ((__nv_bfloat16 *) out + i0) = __floats2bfloat162_rn (x0, x1);
          if (r1 < n_tok) *(__nv_bfloat162 *) ((__nv_bfloat16 *) out + i1) = __floats2bfloat162_rn (y0, y1);
        }
      else
        {
          if (r0 < n_tok) *(__half2 *) ((__half *) out + i0) = __floats2half2_rn (x0, x1);
          if (r1 < n_tok) *(__half2 *) ((__half *) out + i1) = __floats2half2_rn (y0, y1);
        }
    }
}

template <int HD, int OUT, int NW>
static int
launch_v2 (const float *qkv, int n_tok, int nq, int nkv, int pos, const void *k_pool, const void *v_pool,
           const int32_t *table, void *out, cudaStream_t stream)
{
  constexpr int smem = attn2_smem_bytes<HD> ();
  static bool attr_set;   /* the limit is per kernel and process; setting it twice is harmless */
  if (!attr_set)
    {
      HONE_K_CHECK (cudaFuncSetAttribute (attn_prefill2_kernel<HD, OUT, NW>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      attr_set = true;
    }
  const dim3 grid (nq, (n_tok + 16 * NW - 1) / (16 * NW)), block (NW * 32);
  return hone_k_launch (attn_prefill2_kernel<HD, OUT, NW>, grid, block, smem, stream, qkv, n_tok, nq, nkv, pos,
                        (const __half *) k_pool, (const __half *) v_pool, table, out);
}

template <int HD, int NW>
static int
launch_v2_out (const float *qkv, int n_tok, int nq, int nkv, int pos, const void *k_pool, const void *v_pool,
               const int32_t *table, void *out, int out_type, cudaStream_t stream)
{
  if (out_type == HONE_K_BF16)
    return launch_v2<HD, 1, NW> (qkv, n_tok, nq, nkv, pos, k_pool, v_pool, table, out, stream);
  if (out_type == HONE_K_F16)
    return launch_v2<HD, 2, NW> (qkv, n_tok, nq, nkv, pos, k_pool, v_pool, table, out, stream);
  return launch_v2<HD, 0, NW> (qkv, n_tok, nq, nkv, pos, k_pool, v_pool, table, out, stream);
}

/* HONE_ATTN_PREFILL: 1 version 1 (f32 output only), 2 version 2 with 8 warps,
 * 3 version 2 with 4 warps; unset: version 2 with NW_DEFAULT warps. (A version 3
 * that issued the next tile's S MMAs inside this tile's softmax measured the
 * same for hd 128 and 9 % slower for hd 64: RESULTS-cuda.md "Prefill,
 * session 3"; removed.) */
static int
variant (void)
{
  const char *e = getenv ("HONE_ATTN_PREFILL");
  return e && e[0] >= '1' && e[0] <= '3' ? e[0] - '0' : (NW_DEFAULT == 8 ? 2 : 3);
}

extern "C" int
hone_k_attn_prefill_ex (const float *qkv, int n_tok, int nq, int nkv, int hd, int pos_host,
                        const void *k_pool, const void *v_pool, const int32_t *block_table,
                        void *out, int out_type, cudaStream_t stream)
{
  if (n_tok < 1 || nkv < 1 || nq < 1 || nq % nkv || (hd != 64 && hd != 128) || pos_host < 0
      || (out_type != HONE_K_F32 && out_type != HONE_K_BF16 && out_type != HONE_K_F16))
    return (int) cudaErrorInvalidValue;
  const int v = variant ();
  if (out_type == HONE_K_F32 && v == 1)
    return launch_v1 (qkv, n_tok, nq, nkv, hd, pos_host, k_pool, v_pool, block_table, (float *) out, stream);
  if (hd == 128)
    return v == 3 ? launch_v2_out<128, 4> (qkv, n_tok, nq, nkv, pos_host, k_pool, v_pool, block_table, out, out_type, stream)
                  : launch_v2_out<128, 8> (qkv, n_tok, nq, nkv, pos_host, k_pool, v_pool, block_table, out, out_type, stream);
  return v == 3 ? launch_v2_out<64, 4> (qkv, n_tok, nq, nkv, pos_host, k_pool, v_pool, block_table, out, out_type, stream)
                : launch_v2_out<64, 8> (qkv, n_tok, nq, nkv, pos_host, k_pool, v_pool, block_table, out, out_type, stream);
}

extern "C" int
hone_k_attn_prefill (const float *qkv, int n_tok, int nq, int nkv, int hd, int pos_host,
                     const void *k_pool, const void *v_pool, const int32_t *block_table,
                     float *out, cudaStream_t stream)
{
  return hone_k_attn_prefill_ex (qkv, n_tok, nq, nkv, hd, pos_host, k_pool, v_pool, block_table, out, HONE_K_F32,
                                 stream);
}
