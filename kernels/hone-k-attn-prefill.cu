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
 */
#include "hone-k-common.cuh"

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

extern "C" int
hone_k_attn_prefill (const float *qkv, int n_tok, int nq, int nkv, int hd, int pos_host,
                     const void *k_pool, const void *v_pool, const int32_t *block_table,
                     float *out, cudaStream_t stream)
{
  if (n_tok < 1 || nkv < 1 || nq % nkv || (hd != 64 && hd != 128) || pos_host < 0)
    return (int) cudaErrorInvalidValue;
  const dim3 grid ((n_tok + QT - 1) / QT, nq), block (128);
  if (hd == 128)
    return hone_k_launch (attn_prefill_kernel<128>, grid, block, 0, stream, qkv, n_tok, nq, nkv, pos_host,
                          (const __half *) k_pool, (const __half *) v_pool, block_table, out);
  return hone_k_launch (attn_prefill_kernel<64>, grid, block, 0, stream, qkv, n_tok, nq, nkv, pos_host,
                        (const __half *) k_pool, (const __half *) v_pool, block_table, out);
}
