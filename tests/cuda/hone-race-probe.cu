/* hone-race-probe.cu — does compute-sanitizer racecheck report the streamed
 * decode kernel's block sum (consumers_sum in kernels/hone-k-decode-stream.cu)
 * when nothing else is around it?
 *
 * The pattern: 8 "consumer" warps sum a value each through shared memory —
 * lane 0 of each warp stores red[warp], named barrier 1 over 256 threads, every
 * thread reads red[0..7], the same barrier again before red is reused — while
 * a ninth warp (the streamed kernel's producer) never joins barrier 1.
 * Racecheck reported hazards between that store and those reads in the
 * streamed kernel (RESULTS-cuda.md, "Decode, sessions 6 and 7"). The probes:
 *   A: 256 threads, the sum alone (barrier 1 spans the whole block);
 *   B: 288 threads, the ninth warp idles until the final __syncthreads;
 *   C: as B with the count passed in a register (as the kernel does);
 *   D: as B, the ninth warp spinning on shared flags the consumers set (a
 *      deliberate unsynchronized flag: racecheck should report that one);
 *   E: the streamed kernel's ring in small: the ninth warp writes a slot of
 *      two (st.shared) and arrives on its "full" mbarrier, the consumers wait
 *      for it, sum the slot's values and arrive on its "empty" mbarrier (256
 *      arrivals), which the ninth warp waits for before it rewrites the slot;
 *   F: as E, the slot filled by a bulk copy (cp.async.bulk, expect_tx).
 * Each runs the sum 64 times and checks the result (every thread must get
 * the exact sum). Run: compute-sanitizer --tool racecheck hone-race-probe
 *   nvcc -std=c++17 -O3 -Ikernels -gencode arch=compute_90,code=sm_90 -o hone-race-probe tests/cuda/hone-race-probe.cu */
#include <cstdio>
#include <cuda_runtime.h>
#include "hone-k-stage.cuh"

template <bool REG>
static __device__ __forceinline__ void
bar1 (int n)
{
  if (REG)
    asm volatile ("bar.sync 1, %0;" :: "r"(n) : "memory");
  else
    asm volatile ("bar.sync 1, 256;" ::: "memory");
}

template <bool REG>
static __device__ __forceinline__ float
block_sum (float v, float *red, int n)
{
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync (0xffffffffu, v, o);
  if (lane == 0)
    red[warp] = v;
  bar1<REG> (n);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 8; i++)
    s += red[i];
  bar1<REG> (n);
  return s;
}

/* mode: 'A'..'D' as above; bad: threads whose sums were wrong */
template <bool REG>
__global__ void
probe (char mode, int n, unsigned *bad)
{
  __shared__ float red[8];
  __shared__ volatile int flag[64];
  const int warp = threadIdx.x >> 5;
  if (threadIdx.x < 64)
    flag[threadIdx.x] = 0;
  __syncthreads ();
  if (warp < 8)
    {
      for (int it = 0; it < 64; it++)
        {
          const float s = block_sum<REG> ((float) (it + 1), red, n);
          if (s != 256.f * (float) (it + 1))
            atomicAdd (bad, 1u);
          if (mode == 'D' && threadIdx.x == 0)
            flag[it] = 1;
        }
    }
  else if (mode == 'D')
    for (int it = 0; it < 64; it++)
      while (!flag[it])
        ;
  __syncthreads ();
}

/* E and F: the sums of 64 slots passed through a ring of 2 (src: 64 × 256 floats, slot it holds src[it]) */
template <bool BULK>
__global__ void
ring_probe (const float *src, unsigned *bad)
{
  __shared__ __align__ (128) float slot[2][256];
  __shared__ float red[8];
  __shared__ uint64_t full[2], empty[2];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (tid == 0)
    for (int i = 0; i < 2; i++)
      {
        const uint32_t f = (uint32_t) __cvta_generic_to_shared (&full[i]);
        const uint32_t e = (uint32_t) __cvta_generic_to_shared (&empty[i]);
        asm volatile ("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(f) : "memory");
        asm volatile ("mbarrier.init.shared::cta.b64 [%0], 256;" :: "r"(e) : "memory");
      }
  stage_bar_fence_init ();
  __syncthreads ();
  if (warp == 8)
    {
      for (int it = 0; it < 64; it++)
        {
          const int b = it & 1;
          stage_bar_wait (&empty[b], ((it >> 1) & 1) ^ 1);
          if (BULK)
            {
              if (lane == 0)
                {
                  stage_bar_expect (&full[b], 1024);
                  stage_copy (slot[b], src + (size_t) it * 256, 1024, &full[b], stage_policy_evict_first ());
                }
            }
          else
            {
              for (int i = lane; i < 256; i += 32)
                slot[b][i] = src[(size_t) it * 256 + i];
              __syncwarp ();
              if (lane == 0)
                stage_bar_arrive (&full[b]);
            }
        }
    }
  else
    for (int it = 0; it < 64; it++)
      {
        const int b = it & 1;
        stage_bar_wait (&full[b], (it >> 1) & 1);
        const float v = slot[b][tid];
        stage_bar_arrive (&empty[b]);
        const float s = block_sum<false> (v, red, 256);
        if (s != 256.f * (float) (it + 1))
          atomicAdd (bad, 1u);
      }
  __syncthreads ();
}

int
main (void)
{
  unsigned *bad;
  cudaMalloc (&bad, sizeof (unsigned));
  int fails = 0;
  for (char m : { 'A', 'B', 'C', 'D' })
    {
      cudaMemset (bad, 0, sizeof (unsigned));
      const int threads = m == 'A' ? 256 : 288;
      if (m == 'C')
        probe<true><<<4, threads>>> (m, 256, bad);
      else
        probe<false><<<4, threads>>> (m, 256, bad);
      unsigned h = 0;
      const cudaError_t e = cudaMemcpy (&h, bad, sizeof h, cudaMemcpyDeviceToHost);
      printf ("probe %c (%d threads): %s, %u wrong sums\n", m, threads, cudaGetErrorString (e), h);
      fails += e != cudaSuccess || h != 0;
    }
  /* slot it: 256 values of it + 1 (sums exact in f32) */
  float *src;
  cudaMalloc (&src, 64 * 256 * sizeof (float));
  static float h_src[64 * 256];
  for (int i = 0; i < 64 * 256; i++)
    h_src[i] = (float) (i / 256 + 1);
  cudaMemcpy (src, h_src, sizeof h_src, cudaMemcpyHostToDevice);
  for (char m : { 'E', 'F' })
    {
      cudaMemset (bad, 0, sizeof (unsigned));
      if (m == 'E')
        ring_probe<false><<<4, 288>>> (src, bad);
      else
        ring_probe<true><<<4, 288>>> (src, bad);
      unsigned h = 0;
      const cudaError_t e = cudaMemcpy (&h, bad, sizeof h, cudaMemcpyDeviceToHost);
      printf ("probe %c (288 threads, ring of 2 slots): %s, %u wrong sums\n", m, cudaGetErrorString (e), h);
      fails += e != cudaSuccess || h != 0;
    }
  cudaFree (src);
  cudaFree (bad);
  printf ("%s\n", fails ? "FAIL" : "all sums right");
  return fails ? 1 : 0;
}
