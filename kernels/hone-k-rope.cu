/* hone-k-rope.cu — RoPE (both pairings), optional per-head q/k RMSNorm
 * (qwen3), and the K/V page writes, for any number of tokens. The decode path
 * of llama-shaped models does this inside the QKV GEMV instead. */
#include "hone-k-common.cuh"

/* grid (n_tok, nq + 2·nkv heads), block hd/2 threads: one rotation pair each. */
__global__ void
rope_kv_kernel (float *qkv, int nq, int nkv, int hd, const int32_t *pos, const float *inv_freq,
                int pairing, const float *q_norm, const float *k_norm, float eps,
                __half *k_pool, __half *v_pool, const int32_t *block_table)
{
  __shared__ float part[4];
  const int t = blockIdx.x, head = blockIdx.y, i = threadIdx.x, half = hd >> 1;
  pdl_trigger ();
  pdl_wait ();
  float *row = qkv + (size_t) t * (nq + 2 * nkv) * hd + (size_t) head * hd;
  const int i0 = pairing == 0 ? 2 * i : i;
  const int i1 = pairing == 0 ? 2 * i + 1 : i + half;
  float v0 = row[i0], v1 = row[i1];
  const int p = *pos + t;
  if (head < nq + nkv)
    {
      const float *nw = head < nq ? q_norm : k_norm;
      if (nw)
        {
          float ss = warp_sum (v0 * v0 + v1 * v1);
          if ((i & 31) == 0)
            part[i >> 5] = ss;
          __syncthreads ();
          ss = 0.f;
          for (int w = 0; w < (half + 31) / 32; w++)
            ss += part[w];
          const float sc = rsqrtf (ss / (float) hd + eps);
          v0 *= sc * nw[i0];
          v1 *= sc * nw[i1];
        }
      float sn, cs;
      sincosf ((float) p * inv_freq[i], &sn, &cs);
      const float r0 = v0 * cs - v1 * sn, r1 = v0 * sn + v1 * cs;
      v0 = r0;
      v1 = r1;
      if (head < nq)
        {
          const float qs = rsqrtf ((float) hd);
          row[i0] = v0 * qs;
          row[i1] = v1 * qs;
          return;
        }
    }
  const bool is_k = head < nq + nkv;
  const int kvh = head - nq - (is_k ? 0 : nkv);
  const int page = block_table[p / HONE_K_KV_BLOCK], slot = p % HONE_K_KV_BLOCK;
  __half *dst = (is_k ? k_pool : v_pool) + (((size_t) page * nkv + kvh) * HONE_K_KV_BLOCK + slot) * hd;
  /* Pages hold the cache in adjacent-pair order either way; the attention
   * only needs q and k in the same order. */
  dst[i0] = __float2half_rn (v0);
  dst[i1] = __float2half_rn (v1);
}

extern "C" int
hone_k_rope_kv (float *qkv, int n_tok, int nq, int nkv, int hd, const int32_t *pos,
                const float *inv_freq, int pairing, const float *q_norm, const float *k_norm,
                float eps, void *k_pool, void *v_pool, const int32_t *block_table,
                cudaStream_t stream)
{
  if (n_tok < 1 || n_tok > 65535 || hd < 64 || (hd & 31) || hd > 256 || nq < 1 || nkv < 1)
    return (int) cudaErrorInvalidValue;
  return hone_k_launch (rope_kv_kernel, dim3 (n_tok, nq + 2 * nkv), dim3 (hd / 2), 0, stream,
                        qkv, nq, nkv, hd, pos, inv_freq, pairing, q_norm, k_norm, eps,
                        (__half *) k_pool, (__half *) v_pool, block_table);
}
