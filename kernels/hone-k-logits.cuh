/* hone-k-logits.cuh — walking a logits row (or a slice of it) from one block
 * with many loads in flight.
 *
 * The forward's sampler reads a row (128,256 floats for Llama 3: 0.5 MB, in
 * L2 right after the lm_head wrote it), or a slice of it, once. A loop of one
 * 4-byte load a thread per iteration keeps a single load in flight; here
 * every thread issues B 16-byte loads before it looks at any of them
 * (tests/bench/RESULTS-cuda.md, "Decode, session 24").
 *
 * logits_for_each (l, n, f) calls f (i, v, valid) for every index i of
 * [0, n) exactly once with valid = true, and also with valid = false on
 * lanes that have nothing at that step: every lane of a warp makes the same
 * number of calls (warp-synchronous code inside f sees every lane). The
 * indices a thread sees are not in order. l only needs 4-byte alignment (a
 * row of an odd vocabulary): the first 0–3 values before a 16-byte boundary
 * and the last 0–3 are read one by one.
 */
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>

template <int B, class F>
static __device__ __forceinline__ void
logits_for_each (const float *l, int n, F f)
{
  const int tid = (int) threadIdx.x, nt = (int) blockDim.x;
  int head = (int) (((16u - ((uint32_t) (uintptr_t) l & 15u)) & 15u) >> 2);
  head = head < n ? head : n;
  f (tid, tid < head ? l[tid] : 0.f, tid < head);
  const float4 *v4 = (const float4 *) (l + head);
  const int n4 = (n - head) >> 2;
  for (int j0 = 0; j0 < n4; j0 += B * nt)
    {
      float4 v[B];
#pragma unroll
      for (int b = 0; b < B; b++)
        {
          const int j = j0 + b * nt + tid;
          v[b] = j < n4 ? v4[j] : make_float4 (0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
      for (int b = 0; b < B; b++)
        {
          const int j = j0 + b * nt + tid;
          const bool ok = j < n4;
          const int i = head + 4 * j;
          f (i, v[b].x, ok);
          f (i + 1, v[b].y, ok);
          f (i + 2, v[b].z, ok);
          f (i + 3, v[b].w, ok);
        }
    }
  const int t0 = head + 4 * n4;
  f (t0 + tid, t0 + tid < n ? l[t0 + tid] : 0.f, t0 + tid < n);
}
