/* hone-k-common.cuh — device helpers shared by the kernels (internal). */
#pragma once

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include "hone-kernels.h"

#define HONE_K_CHECK(expr) do { cudaError_t e_ = (expr); if (e_ != cudaSuccess) return (int) e_; } while (0)

/* Programmatic dependent launch (sm_90): a kernel starts while its
 * predecessor drains, does what does not depend on it (weight loads), then
 * waits here for the predecessor's results. A no-op on older chips. */
static __device__ __forceinline__ void
pdl_wait (void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile ("griddepcontrol.wait;" ::: "memory");
#endif
}

static __device__ __forceinline__ void
pdl_trigger (void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile ("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* Read-once weight stream: skip L1 so activations stay there. */
static __device__ __forceinline__ int4
ld_stream (const int4 *p)
{
  int4 v;
  asm volatile ("ld.global.nc.L1::no_allocate.v4.s32 {%0,%1,%2,%3}, [%4];"
                : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

static __device__ __forceinline__ float
warp_sum (float v)
{
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync (0xffffffffu, v, o);
  return v;
}

static __device__ __forceinline__ float
warp_max (float v)
{
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf (v, __shfl_xor_sync (0xffffffffu, v, o));
  return v;
}

static __device__ __forceinline__ float
bf16_lo (uint32_t w)
{
  return __uint_as_float (w << 16);
}

static __device__ __forceinline__ float
bf16_hi (uint32_t w)
{
  return __uint_as_float (w & 0xffff0000u);
}

static __device__ __forceinline__ float
f16_bits_to_f32 (uint16_t h)
{
  return __half2float (__ushort_as_half (h));
}

static __device__ __forceinline__ float
silu (float x)
{
  return x / (1.0f + __expf (-x));
}

/* Host: launch with the PDL attribute where the device supports it. */
int hone_k_pdl_enabled (void);
/* hone_k_forward: whether PDL pays for this step's weights (automatic mode). */
void hone_k_pdl_hint (int on);

template <typename... KArgs, typename... Args>
static inline int
hone_k_launch (void (*kernel) (KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
               Args... args)
{
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  if (hone_k_pdl_enabled ())
    {
      attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
    }
  cudaError_t e = cudaLaunchKernelEx (&cfg, kernel, ((KArgs) args)...);
  return (int) e;
}
