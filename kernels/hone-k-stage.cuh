/* hone-k-stage.cuh — bulk and asynchronous copies of weights into shared memory (internal).
 *
 * The staged decode GEMVs stream a block's contiguous slice of a matrix into
 * a ring of shared-memory buffers with the Hopper bulk-copy engine (the 1-D
 * form of TMA: `cp.async.bulk`), each buffer's completion counted in bytes on
 * its own mbarrier. One thread issues a copy of tens of KB where a warp would
 * issue hundreds of 16-byte loads, the copy needs no registers, and it can be
 * issued *before* griddepcontrol.wait — the weights do not depend on the
 * previous kernel — so the memory system is busy while that kernel drains.
 *
 * Rules the callers keep (PTX ISA, cp.async.bulk): source and destination
 * 16-byte aligned, size a multiple of 16; a buffer is re-filled only after
 * every thread that reads it has passed a barrier (__syncthreads) following
 * its last read. Everything here is sm_90 only: on older chips the functions
 * compile to nothing and the staged kernels must not be launched
 * (hone_k_stage_supported()).
 */
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

/* Initialise an mbarrier expecting one arrival per phase (the issuing thread's
 * arrive.expect_tx); call from one thread, then fence + __syncthreads. */
static __device__ __forceinline__ void
stage_bar_init (uint64_t *bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t a = (uint32_t) __cvta_generic_to_shared (bar);
  asm volatile ("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(a) : "memory");
#endif
}

/* Make initialised mbarriers visible to the async (bulk-copy) proxy. */
static __device__ __forceinline__ void
stage_bar_fence_init (void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile ("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

/* The issuing thread: this phase completes when @bytes have landed. */
static __device__ __forceinline__ void
stage_bar_expect (uint64_t *bar, uint32_t bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t a = (uint32_t) __cvta_generic_to_shared (bar);
  asm volatile ("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(a), "r"(bytes) : "memory");
#endif
}

/* Wait until the phase with @parity (0, 1, 0, … per use of the buffer) completed. */
static __device__ __forceinline__ void
stage_bar_wait (uint64_t *bar, uint32_t parity)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t a = (uint32_t) __cvta_generic_to_shared (bar);
  asm volatile ("{\n\t.reg .pred p;\n"
                "WAIT_%=:\n\t"
                "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
                "@!p bra WAIT_%=;\n}" :: "r"(a), "r"(parity) : "memory");
#endif
}

/* A plain arrival on @bar (release: the thread's earlier shared-memory stores
 * are seen by whoever waits for the phase). */
static __device__ __forceinline__ void
stage_bar_arrive (uint64_t *bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t a = (uint32_t) __cvta_generic_to_shared (bar);
  asm volatile ("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(a) : "memory");
#endif
}

/* One 16-byte asynchronous copy global → shared (the LSU path, cached in L2
 * only; sm_80+). The plain form: the .L2::cache_hint form (with the
 * evict_first policy) raised "illegal instruction" on the H200 for the scale
 * copies of quantized matrices (session 3, hone-k-gemv-staged.cu). */
static __device__ __forceinline__ void
cp_async16 (void *dst, const void *src)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t d = (uint32_t) __cvta_generic_to_shared (dst);
  asm volatile ("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(d), "l"(src) : "memory");
#endif
}

/* @bar gets one arrival once this thread's cp.async copies so far have landed
 * (.noinc: the barrier's expected count includes these arrivals). */
static __device__ __forceinline__ void
cp_async_arrive_noinc (uint64_t *bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t b = (uint32_t) __cvta_generic_to_shared (bar);
  asm volatile ("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(b) : "memory");
#endif
}

/* L2 policy for read-once weights: evict first, so they do not push out the
 * activations, KV pages and the next kernel's inputs. */
static __device__ __forceinline__ uint64_t
stage_policy_evict_first (void)
{
  uint64_t pol = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile ("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
#endif
  return pol;
}

/* Bulk copy @bytes from global @src to shared @dst, completing on @bar. */
static __device__ __forceinline__ void
stage_copy (void *dst, const void *src, uint32_t bytes, uint64_t *bar, uint64_t policy)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t d = (uint32_t) __cvta_generic_to_shared (dst);
  const uint32_t b = (uint32_t) __cvta_generic_to_shared (bar);
  asm volatile ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                " [%0], [%1], %2, [%3], %4;"
                :: "r"(d), "l"(src), "r"(bytes), "r"(b), "l"(policy) : "memory");
#endif
}

/* Host: whether the current device runs the staged kernels (sm_90 or newer).
 * Remembered per device once read; a failed query is not remembered (it
 * would switch the staged and streamed paths off for the whole process). */
static inline bool
hone_k_stage_supported (void)
{
  static int major[16] = { -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1 };
  int dev = 0;
  if (cudaGetDevice (&dev) != cudaSuccess || dev < 0)
    return false;
  if (dev >= 16)
    {
      int mj = 0;
      return cudaDeviceGetAttribute (&mj, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && mj >= 9;
    }
  if (major[dev] < 0)
    {
      int mj = 0;
      if (cudaDeviceGetAttribute (&mj, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
        return false;
      major[dev] = mj;
    }
  return major[dev] >= 9;
}
