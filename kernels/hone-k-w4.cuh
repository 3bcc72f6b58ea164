/* hone-k-w4.cuh — the int4 → f16x2 arithmetic of the W4A16 (HONE_K_Q4Z) GPU
 * layout (internal), shared by the W4A16 kernels of hone-k-gemv-w4.cu and the
 * fused 4-bit GEMM of hone-k-gemm-w4.cu so that
 * they dequantize alike (the register-streamed GEMV of hone-k-gemv.cu does not
 * dequantize: dot_chunk_w4 multiplies the nibbles in integers).
 * Layout (hone-kernels.h): in 32-bit word i of a 16-byte chunk of 32 weights,
 * weight 8i+2p sits in nibble p and weight 8i+2p+1 in nibble p+4 (p = 0..3). */
#pragma once

#include "hone-k-common.cuh"

static __device__ __forceinline__ uint32_t
lop3_and_or (uint32_t a, uint32_t b, uint32_t c)
{
  uint32_t d;
  asm ("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(b), "r"(c));   /* (a & b) | c */
  return d;
}

static __device__ __forceinline__ __half2
as_h2 (uint32_t u)
{
  return *reinterpret_cast<__half2 *> (&u);
}

static __device__ __forceinline__ uint32_t
h2_bits (__half2 h)
{
  const __half2_raw r = h;
  return (uint32_t) r.x | ((uint32_t) r.y << 16);
}

/* The 8 weights of word @v as 4 f16 pairs (q − z), exact: (1024+q) − (1024+z)
 * for the low nibbles, (1024+16q)/16 − (64+z) for the high ones. */
static __device__ __forceinline__ void
w4_word (uint32_t v, __half2 zc0, __half2 nzc1, __half2 (&o)[4])
{
  const __half2 sixteenth = as_h2 (0x2C002C00u);   /* 1/16 */
  const uint32_t a0 = lop3_and_or (v, 0x000f000fu, 0x64006400u);
  const uint32_t a1 = lop3_and_or (v, 0x00f000f0u, 0x64006400u);
  v >>= 8;
  const uint32_t a2 = lop3_and_or (v, 0x000f000fu, 0x64006400u);
  const uint32_t a3 = lop3_and_or (v, 0x00f000f0u, 0x64006400u);
  o[0] = __hsub2 (as_h2 (a0), zc0);
  o[1] = __hfma2 (as_h2 (a1), sixteenth, nzc1);
  o[2] = __hsub2 (as_h2 (a2), zc0);
  o[3] = __hfma2 (as_h2 (a3), sixteenth, nzc1);
}

/* Zero-point constants (1024+z, 1024+z) and −(64+z, 64+z) straight from the bits. */
static __device__ __forceinline__ void
w4_zero (uint32_t z, __half2 &zc0, __half2 &nzc1)
{
  zc0 = as_h2 (0x64006400u | z | (z << 16));
  nzc1 = as_h2 (0xD400D400u | (z << 4) | (z << 20));
}

/* c += A·B on the tensor cores: mma.sync m16n8k16, f16 in, f32 accumulate (A 4 registers
 * of f16 pairs, B 2), the W4A16 GEMV's and the fused 4-bit GEMM's (hone-k-gemm-w4.cu). */
static __device__ __forceinline__ void
w4_mma (float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800   /* every gpu_archs value is; older ones compute nothing */
  asm ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
       "{%0,%1,%2,%3};"
       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}
