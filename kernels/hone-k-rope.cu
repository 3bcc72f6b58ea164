/* hone-k-rope.cu — RoPE (both pairings), optional per-head q/k RMSNorm
 * (qwen3), and the K/V page writes, for any number of tokens. The decode path
 * of llama-shaped models does this inside the QKV GEMV instead.
 *
 * One block a token, a warp a head at a time: the rotation angles depend on
 * the token and the pair only, so each lane computes its pairs' sin/cos once
 * and reuses them for all nq + 2·nkv heads; a head's RMSNorm is one warp sum;
 * loads and stores are whole coalesced rows. (Session 2's form, a block of
 * hd/2 threads per (token, head), ran a 2,048-token prefill's 98,304 tiny
 * blocks at ~0.75 TB/s and recomputed every sincos 48 times.) */
#include "hone-k-common.cuh"

#define ROPE_WARPS 8
#define ROPE_MAX_PAIRS 4   /* hd/2 / 32: head dims up to 256 */

__global__ void __launch_bounds__ (ROPE_WARPS * 32)
rope_kv_kernel (float *qkv, int nq, int nkv, int hd, const int32_t *pos, const float *inv_freq,
                int pairing, const float *q_norm, const float *k_norm, float eps,
                __half *k_pool, __half *v_pool, const int32_t *block_table)
{
  const int t = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, half = hd >> 1;
  const int np = (half + 31) / 32;   /* pairs a lane handles in a head */
  pdl_trigger ();
  pdl_wait ();
  const int p = *pos + t;
  float sn[ROPE_MAX_PAIRS], cs[ROPE_MAX_PAIRS];
#pragma unroll
  for (int j = 0; j < ROPE_MAX_PAIRS; j++)
    {
      const int i = lane + 32 * j;
      sn[j] = 0.f;
      cs[j] = 1.f;
      if (j < np && i < half)
        sincosf ((float) p * inv_freq[i], &sn[j], &cs[j]);
    }
  const int page = block_table[p / HONE_K_KV_BLOCK], slot = p % HONE_K_KV_BLOCK;
  const float qs = rsqrtf ((float) hd);
  float *tok = qkv + (size_t) t * (nq + 2 * nkv) * hd;
  for (int head = warp; head < nq + 2 * nkv; head += ROPE_WARPS)
    {
      float *row = tok + (size_t) head * hd;
      float v0[ROPE_MAX_PAIRS], v1[ROPE_MAX_PAIRS];
      float ss = 0.f;
#pragma unroll
      for (int j = 0; j < ROPE_MAX_PAIRS; j++)
        {
          const int i = lane + 32 * j;
          v0[j] = v1[j] = 0.f;
          if (j < np && i < half)
            {
              if (pairing == 0)
                {
                  const float2 v = *(const float2 *) (row + 2 * i);
                  v0[j] = v.x;
                  v1[j] = v.y;
                }
              else
                {
                  v0[j] = row[i];
                  v1[j] = row[i + half];
                }
              ss += v0[j] * v0[j] + v1[j] * v1[j];
            }
        }
      const bool rotate = head < nq + nkv;
      const float *nw = head < nq ? q_norm : k_norm;
      float sc = 1.f;
      if (rotate && nw)
        sc = rsqrtf (warp_sum (ss) / (float) hd + eps);
      const bool is_k = head >= nq && head < nq + nkv;
      __half *dst = NULL;
      if (head >= nq)
        {
          const int kvh = head - nq - (is_k ? 0 : nkv);
          dst = (is_k ? k_pool : v_pool) + (((size_t) page * nkv + kvh) * HONE_K_KV_BLOCK + slot) * hd;
        }
#pragma unroll
      for (int j = 0; j < ROPE_MAX_PAIRS; j++)
        {
          const int i = lane + 32 * j;
          if (j >= np || i >= half)
            continue;
          const int i0 = pairing == 0 ? 2 * i : i;
          const int i1 = pairing == 0 ? 2 * i + 1 : i + half;
          float a = v0[j], b = v1[j];
          if (rotate)
            {
              if (nw)
                {
                  a *= sc * nw[i0];
                  b *= sc * nw[i1];
                }
              const float r0 = a * cs[j] - b * sn[j], r1 = a * sn[j] + b * cs[j];
              a = r0;
              b = r1;
            }
          if (head < nq)
            {
              if (pairing == 0)
                *(float2 *) (row + i0) = make_float2 (a * qs, b * qs);
              else
                {
                  row[i0] = a * qs;
                  row[i1] = b * qs;
                }
            }
          else if (pairing == 0)
            /* Pages hold the cache in adjacent-pair order either way; the
             * attention only needs q and k in the same order. */
            *(__half2 *) (dst + i0) = __floats2half2_rn (a, b);
          else
            {
              dst[i0] = __float2half_rn (a);
              dst[i1] = __float2half_rn (b);
            }
        }
    }
}

extern "C" int
hone_k_rope_kv (float *qkv, int n_tok, int nq, int nkv, int hd, const int32_t *pos,
                const float *inv_freq, int pairing, const float *q_norm, const float *k_norm,
                float eps, void *k_pool, void *v_pool, const int32_t *block_table,
                cudaStream_t stream)
{
  if (n_tok < 1 || n_tok > 65535 || hd < 64 || (hd & 31) || hd > 256 || nq < 1 || nkv < 1)
    return (int) cudaErrorInvalidValue;
  return hone_k_launch (rope_kv_kernel, dim3 (n_tok), dim3 (ROPE_WARPS * 32), 0, stream,
                        qkv, nq, nkv, hd, pos, inv_freq, pairing, q_norm, k_norm, eps,
                        (__half *) k_pool, (__half *) v_pool, block_table);
}
