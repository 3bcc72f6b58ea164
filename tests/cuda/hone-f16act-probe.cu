/* hone-f16act-probe.cu — could the one-token Q4_0 GEMVs take a 16-bit input?
 *
 * Session 33 (tests/bench/RESULTS-cuda.md) measured that a Q4_0 decode step is
 * bound by its dependent launches (8 a layer), and that only a step without
 * the norm and int8-quantization launches can get under the 75 % goal. The
 * dp4a GEMVs need those launches: their int8 input carries a scale per 32
 * values, which no producer warp can form alone. A GEMV whose input is 16-bit
 * (x·g written element by element by the producer's epilogue, the RMS scale
 * multiplied at the end as the BF16 GEMVs do) would need neither — if it
 * streams as fast. This probe answers only that: the 8B shapes alone, the
 * weights in hone's Q4_0 layout (16-byte chunks of 32 nibbles, an f16 scale
 * per chunk), the input in f16, pre-permuted so that each 4-byte word of
 * nibbles meets its 8 inputs as 4 half2 pairs; the nibbles become f16 by the
 * 0x6400 exponent trick (2 lop3 and a shift for 4 values, no conversion
 * instructions), 16 HFMA2 a chunk into two half2 sums, one f32 FMA with the
 * block scale. Compare with `hone-cuda-check --gemv-sweep` (the dp4a kernels,
 * same shapes, same rotation of weights over >= 400 MB) in the same call.
 *
 *   hone-f16act-probe      (checks one small case against f64 first; prints
 *                           µs and GB/s per shape and launch shape)
 * Plain CUDA (headers of kernels/ and tests/cuda/, nothing of libhone linked);
 * built by tests/cuda/build-carry.sh.
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include "hone-check-util.cuh"   /* CK, rng_u64 */
#include "hone-k-w4.cuh"         /* ld_stream, lop3_and_or, as_h2 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>


/* Σ (q_e − 8) · x_e over one chunk's 32 elements. Element order (GGUF
 * Q4_0): byte j's low nibble is element j, its high nibble element j + 16.
 * Word k (bytes 4k..4k+3) meets x as xv[k] = [x(4k, 4k+2), x(4k+1, 4k+3),
 * x(4k+16, 4k+18), x(4k+17, 4k+19)]. */
static __device__ __forceinline__ float
dot_q4_f16 (const int4 w, const uint4 (&xv)[4])
{
  const __half2 k1032 = __halves2half2 (__ushort_as_half (0x6408), __ushort_as_half (0x6408));   /* 1032 */
  const __half2 k16th = __float2half2_rn (1.0f / 16), km72 = __float2half2_rn (-72.0f);
  const uint32_t ws[4] = { (uint32_t) w.x, (uint32_t) w.y, (uint32_t) w.z, (uint32_t) w.w };
  __half2 a0 = __float2half2_rn (0.f), a1 = a0;
#pragma unroll
  for (int k = 0; k < 4; k++)
    {
      const uint32_t v = ws[k], v8 = v >> 8;
      const __half2 lo = __hsub2 (as_h2 (lop3_and_or (v, 0x000f000fu, 0x64006400u)), k1032);          /* e 4k, 4k+2 */
      const __half2 lo1 = __hsub2 (as_h2 (lop3_and_or (v8, 0x000f000fu, 0x64006400u)), k1032);        /* 4k+1, 4k+3 */
      const __half2 hi = __hfma2 (as_h2 (lop3_and_or (v, 0x00f000f0u, 0x64006400u)), k16th, km72);    /* 4k+16, +18 */
      const __half2 hi1 = __hfma2 (as_h2 (lop3_and_or (v8, 0x00f000f0u, 0x64006400u)), k16th, km72);  /* 4k+17, +19 */
      a0 = __hfma2 (lo, as_h2 (xv[k].x), a0);
      a1 = __hfma2 (lo1, as_h2 (xv[k].y), a1);
      a0 = __hfma2 (hi, as_h2 (xv[k].z), a0);
      a1 = __hfma2 (hi1, as_h2 (xv[k].w), a1);
    }
  const float2 f = __half22float2 (__hadd2 (a0, a1));
  return f.x + f.y;
}

/* R rows a warp, U chunk loads in flight a lane, KS warps a row (as
 * hone-k-gemv.cu's one-token kernel); y[row] = scale · Σ d · dot. */
template <int R, int U, int KS>
__global__ void __launch_bounds__ (256)
q4_f16act_kernel (const int4 *q, const __half *s, const uint4 *xh, const float *scale, float *y, int rows, int nchunk)
{
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5, ks = wib % KS;
  const int row0 = ((blockIdx.x * (8 / KS)) + wib / KS) * R;
  float acc[R];
  int4 w[U][R];
  __half sc[U][R];
#pragma unroll
  for (int r = 0; r < R; r++)
    acc[r] = 0.f;
  auto load = [&] (int c0) {
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
      for (int r = 0; r < R; r++)
        {
          const int c = c0 + u * 32 * KS, row = row0 + r;
          const bool ok = c < nchunk && row < rows;
          w[u][r] = ok ? ld_stream (q + (size_t) row * nchunk + c) : make_int4 (0, 0, 0, 0);
          sc[u][r] = ok ? s[(size_t) row * nchunk + c] : __float2half (0.f);
        }
  };
  int c0 = ks * 32 + lane;
  load (c0);
  for (;;)
    {
#pragma unroll
      for (int u = 0; u < U; u++)
        {
          const int c = c0 + u * 32 * KS;
          if (c >= nchunk)
            break;
          const uint4 *xp = xh + (size_t) c * 4;
          const uint4 xv[4] = { xp[0], xp[1], xp[2], xp[3] };
#pragma unroll
          for (int r = 0; r < R; r++)
            acc[r] = fmaf (dot_q4_f16 (w[u][r], xv), __half2float (sc[u][r]), acc[r]);
        }
      c0 += 32 * U * KS;
      if (c0 >= nchunk)
        break;
      load (c0);
    }
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      acc[r] += __shfl_xor_sync (0xffffffffu, acc[r], o);
  __shared__ float red[8][R];
  if (KS > 1)
    {
      if (lane == 0)
#pragma unroll
        for (int r = 0; r < R; r++)
          red[wib][r] = acc[r];
      __syncthreads ();
      if (ks != 0)
        return;
#pragma unroll
      for (int r = 0; r < R; r++)
        {
          float v = 0.f;
#pragma unroll
          for (int k = 0; k < KS; k++)
            v += red[wib + k][r];
          acc[r] = v;
        }
    }
  if (lane < R)
#pragma unroll
    for (int r = 0; r < R; r++)
      if (r == lane && row0 + r < rows)
        y[row0 + r] = acc[r] * scale[0];
}

typedef void (*KernelFn) (const int4 *, const __half *, const uint4 *, const float *, float *, int, int);
struct Shape
{
  int r, u, ks;
  KernelFn fn;
};
static const Shape shapes[] = {
  { 4, 1, 2, q4_f16act_kernel<4, 1, 2> }, { 4, 2, 2, q4_f16act_kernel<4, 2, 2> },
  { 4, 1, 4, q4_f16act_kernel<4, 1, 4> }, { 4, 1, 1, q4_f16act_kernel<4, 1, 1> },
  { 2, 2, 1, q4_f16act_kernel<2, 2, 1> }, { 2, 2, 2, q4_f16act_kernel<2, 2, 2> },
  { 2, 4, 2, q4_f16act_kernel<2, 4, 2> }, { 8, 1, 2, q4_f16act_kernel<8, 1, 2> },
  { 8, 1, 1, q4_f16act_kernel<8, 1, 1> }, { 2, 4, 4, q4_f16act_kernel<2, 4, 4> },
};

static void
launch (const Shape &sh, const int4 *q, const __half *s, const uint4 *xh, const float *scale, float *y, int rows,
        int nchunk)
{
  const int groups = (rows + sh.r - 1) / sh.r;
  const int grid = (groups + (8 / sh.ks) - 1) / (8 / sh.ks);
  sh.fn<<<grid, 256>>> (q, s, xh, scale, y, rows, nchunk);
}

static uint32_t
rnd (void)
{
  return (uint32_t) (rng_u64 () >> 32);
}

/* The permuted f16 input of x (cols values): chunk c's 4 uint4 as dot_q4_f16 reads them. */
static std::vector<__half>
permute_x (const std::vector<float> &x)
{
  std::vector<__half> p (x.size ());
  const int nchunk = (int) x.size () / 32;
  for (int c = 0; c < nchunk; c++)
    for (int k = 0; k < 4; k++)
      {
        const int e[8] = { 4 * k, 4 * k + 2, 4 * k + 1, 4 * k + 3, 4 * k + 16, 4 * k + 18, 4 * k + 17, 4 * k + 19 };
        for (int i = 0; i < 8; i++)
          p[(size_t) c * 32 + k * 8 + i] = __float2half (x[(size_t) c * 32 + e[i]]);
      }
  return p;
}

/* A small case against f64: every row, output poisoned first. */
static int
check (void)
{
  const int rows = 300, cols = 4096 + 512, nchunk = cols / 32;
  std::vector<uint8_t> qb ((size_t) rows * nchunk * 16);
  std::vector<__half> sb ((size_t) rows * nchunk);
  std::vector<float> x (cols), d ((size_t) rows * nchunk);
  for (auto &b : qb)
    b = (uint8_t) rnd ();
  for (size_t i = 0; i < sb.size (); i++)
    {
      d[i] = __half2float (__float2half ((float) ((int) (rnd () % 2001) - 1000) / 1000.0f * 0.02f));
      sb[i] = __float2half (d[i]);
    }
  for (auto &v : x)   /* as a normalized residual times g: mostly O(1), a few outliers */
    v = __half2float (__float2half ((rnd () % 64 == 0 ? 20.0f : 1.0f) * ((float) ((int) (rnd () % 2001) - 1000) / 1000.0f)));
  const std::vector<__half> xp = permute_x (x);
  int4 *dq;
  __half *ds, *dx;
  float *dy, *dsc, one = 1.0f;
  CK (cudaMalloc (&dq, qb.size ()));
  CK (cudaMalloc (&ds, sb.size () * 2));
  CK (cudaMalloc (&dx, xp.size () * 2));
  CK (cudaMalloc (&dy, rows * 4));
  CK (cudaMalloc (&dsc, 4));
  CK (cudaMemcpy (dq, qb.data (), qb.size (), cudaMemcpyHostToDevice));
  CK (cudaMemcpy (ds, sb.data (), sb.size () * 2, cudaMemcpyHostToDevice));
  CK (cudaMemcpy (dx, xp.data (), xp.size () * 2, cudaMemcpyHostToDevice));
  CK (cudaMemcpy (dsc, &one, 4, cudaMemcpyHostToDevice));
  std::vector<double> ref (rows);
  double amax = 0;
  for (int r = 0; r < rows; r++)
    {
      double sum = 0;
      for (int c = 0; c < nchunk; c++)
        {
          double part = 0;
          for (int j = 0; j < 16; j++)
            {
              const uint8_t b = qb[((size_t) r * nchunk + c) * 16 + j];
              part += ((b & 15) - 8) * (double) x[(size_t) c * 32 + j] + ((b >> 4) - 8) * (double) x[(size_t) c * 32 + j + 16];
            }
          sum += part * d[(size_t) r * nchunk + c];
        }
      ref[r] = sum;
      amax = std::max (amax, fabs (sum));
    }
  int fails = 0;
  for (const Shape &sh : shapes)
    {
      std::vector<float> y (rows);
      CK (cudaMemset (dy, 0xff, rows * 4));   /* NaN poison */
      launch (sh, dq, ds, (const uint4 *) dx, dsc, dy, rows, nchunk);
      CK (cudaGetLastError ());
      CK (cudaMemcpy (y.data (), dy, rows * 4, cudaMemcpyDeviceToHost));
      double err = 0;
      for (int r = 0; r < rows; r++)
        err = std::max (err, isfinite (y[r]) ? fabs (y[r] - ref[r]) : INFINITY);
      const bool ok = err <= 2e-3 * amax;
      fails += !ok;
      printf ("check R%d U%d KS%d: %d rows x %d cols vs f64: max error %.3g (%.2e of the largest |y| %.3g) %s\n", sh.r,
              sh.u, sh.ks, rows, cols, err, err / amax, amax, ok ? "PASS" : "FAIL");
    }
  cudaFree (dq);
  cudaFree (ds);
  cudaFree (dx);
  cudaFree (dy);
  cudaFree (dsc);
  return fails;
}

int
main (void)
{
  cudaDeviceProp prop;
  CK (cudaGetDeviceProperties (&prop, 0));
  printf ("device %s\n", prop.name);
  const int fails = check ();
  struct { const char *name; int rows, cols; } mats[] = {
    { "qkv 6144x4096", 6144, 4096 }, { "o 4096x4096", 4096, 4096 }, { "gate|up 28672x4096", 28672, 4096 },
    { "down 4096x14336", 4096, 14336 }, { "lm_head 128256x4096", 128256, 4096 },
  };
  float *y, *scale;
  uint4 *xh;
  CK (cudaMalloc (&y, (size_t) 128256 * 4));
  CK (cudaMalloc (&scale, 4));
  CK (cudaMalloc (&xh, 14336 * 2));
  CK (cudaMemset (xh, 0x3c, 14336 * 2));   /* f16 ~1.06 */
  CK (cudaMemset (scale, 0, 4));
  cudaEvent_t e0, e1;
  CK (cudaEventCreate (&e0));
  CK (cudaEventCreate (&e1));
  printf ("%-22s %-10s %9s %9s   (weights rotated over >= 400 MB, median of 5 x 20 launches)\n", "matrix", "shape", "us",
          "GB/s");
  for (auto &m : mats)
    {
      const int nchunk = m.cols / 32;
      const size_t qbytes = (size_t) m.rows * nchunk * 16, sbytes = (size_t) m.rows * nchunk * 2;
      const int copies = (int) std::max<size_t> (2, (400u << 20) / (qbytes + sbytes) + 1);
      std::vector<int4 *> qs (copies);
      std::vector<__half *> ss (copies);
      for (int i = 0; i < copies; i++)
        {
          CK (cudaMalloc (&qs[i], qbytes));
          CK (cudaMalloc (&ss[i], sbytes));
          CK (cudaMemset (qs[i], 0x5a + i, qbytes));
          CK (cudaMemset (ss[i], 0x20, sbytes));
        }
      double best = 1e30;
      for (const Shape &sh : shapes)
        {
          std::vector<float> t;
          int cur = 0;
          for (int w = 0; w < 5; w++)
            launch (sh, qs[w % copies], ss[w % copies], xh, scale, y, m.rows, nchunk);
          for (int round = 0; round < 5; round++)
            {
              CK (cudaEventRecord (e0));
              for (int i = 0; i < 20; i++, cur = (cur + 1) % copies)
                launch (sh, qs[cur], ss[cur], xh, scale, y, m.rows, nchunk);
              CK (cudaEventRecord (e1));
              CK (cudaEventSynchronize (e1));
              float ms;
              CK (cudaEventElapsedTime (&ms, e0, e1));
              t.push_back (ms * 1e3f / 20);
            }
          CK (cudaGetLastError ());
          std::sort (t.begin (), t.end ());
          const double us = t[2];
          best = std::min (best, us);
          char name[32];
          snprintf (name, sizeof name, "R%d U%d KS%d", sh.r, sh.u, sh.ks);
          printf ("%-22s %-10s %9.2f %9.0f\n", m.name, name, us, (qbytes + sbytes) / (us * 1e-6) / 1e9);
        }
      printf ("%-22s %-10s %9.2f %9.0f\n", m.name, "best", best, (qbytes + sbytes) / (best * 1e-6) / 1e9);
      for (int i = 0; i < copies; i++)
        {
          cudaFree (qs[i]);
          cudaFree (ss[i]);
        }
    }
  printf ("checks: %d failed\n", fails);
  return fails ? 1 : 0;
}
