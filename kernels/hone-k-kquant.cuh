/* hone-k-kquant.cuh — the K-quant (Q4_K, Q6_K) GPU layouts' offsets and Q4_K's
 * 6-bit scale decode (internal), shared by the native decode GEMV and the
 * dequantization of hone-k-gemv-kquant.cu and the fused prefill GEMM of
 * hone-k-gemm-w4.cu so that they read the layouts alike (hone-kernels.h has the
 * layouts' contract). */
#pragma once

#include "hone-k-common.cuh"

/* Q6_K: the high-bit array follows the nibbles in q; d follows the scales in s. */
static __host__ __device__ __forceinline__ size_t
q6k_qh_offset (int rows, int cols)
{
  return (size_t) rows * cols / 2;
}

static __host__ __device__ __forceinline__ size_t
q6k_d_offset (int rows, int cols)
{
  return (size_t) rows * cols / 16;
}

/* Scale and min (6 bits each) of sub-block j (0..7) from a Q4_K record's
 * words w1 w2 w3 (GGUF bytes 4..15, get_scale_min_k4's packing). */
static __device__ __forceinline__ void
q4k_scale_min (uint32_t w1, uint32_t w2, uint32_t w3, int j, int &sc, int &m)
{
  const int sh = 8 * (j & 3);
  if (j < 4)
    {
      sc = (int) ((w1 >> sh) & 63);
      m = (int) ((w2 >> sh) & 63);
    }
  else
    {
      sc = (int) (((w3 >> sh) & 15) | ((w1 >> (sh + 2)) & 48));
      m = (int) (((w3 >> (sh + 4)) & 15) | ((w2 >> (sh + 2)) & 48));
    }
}
