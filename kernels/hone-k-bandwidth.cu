/* hone-k-bandwidth.cu — the device's read bandwidth, the ceiling of a decode
 * step (which only reads weights and KV): `hone bench` reports against it.
 *
 * Each block reads one contiguous 64 KB slice of a buffer much larger than L2
 * with 16-byte non-caching loads, 4 in flight a thread, folded into one word
 * so nothing is dead code. Measured on two H200s (tests/bench/RESULTS-cuda.md,
 * session 33): contiguous slices of 16-256 KB read 4,606-4,628 GB/s where the
 * earlier grid-stride form (4 loads a thread one grid apart) read 4,518-4,537
 * over the same 4.2 GB; 4 KB slices 4,059. */
#include "hone-k-common.cuh"

#define HONE_K_BW_SLICE 4096   /* 16-byte chunks a block: 64 KB */

__global__ void __launch_bounds__ (256)
read_stream_kernel (const int4 *p, size_t n, unsigned int *sink)
{
  const size_t base = (size_t) blockIdx.x * HONE_K_BW_SLICE;
  unsigned int acc = 0;
  for (int i = threadIdx.x; i < HONE_K_BW_SLICE; i += 4 * 256)
    {
      int4 v[4];
#pragma unroll
      for (int u = 0; u < 4; u++)
        {
          const size_t c = base + i + u * 256;
          v[u] = c < n ? ld_stream (p + c) : make_int4 (0, 0, 0, 0);
        }
#pragma unroll
      for (int u = 0; u < 4; u++)
        acc ^= (unsigned) (v[u].x ^ v[u].y ^ v[u].z ^ v[u].w);
    }
  acc = __reduce_xor_sync (0xffffffffu, acc);
  if ((threadIdx.x & 31) == 0 && acc == 0x9e3779b9u)
    *sink = acc;   /* practically never taken, but the compiler cannot know */
}

extern "C" int
hone_k_read_stream (const void *buf, size_t bytes, unsigned int *sink, cudaStream_t stream)
{
  if (!buf || bytes < 16 || !sink)
    return (int) cudaErrorInvalidValue;
  const size_t n = bytes / 16;
  const size_t blocks = (n + HONE_K_BW_SLICE - 1) / HONE_K_BW_SLICE;
  if (blocks > 0x7fffffffu)
    return (int) cudaErrorInvalidValue;
  read_stream_kernel<<<(unsigned) blocks, 256, 0, stream>>> ((const int4 *) buf, n, sink);
  return (int) cudaGetLastError ();
}
