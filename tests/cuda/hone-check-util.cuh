/* hone-check-util.cuh — what the plain-CUDA check/bench harnesses share
 * (tests/cuda/hone-cuda-check.cu, tests/cuda/hone-w4-check.cu): PASS/FAIL
 * reporting, the measured ceilings, a seeded RNG, f16/bf16 bit helpers,
 * relative error against f64 references, poisoned device buffers (outputs are
 * 0xff… = NaN until a kernel writes them), random fills and event timing.
 * Header-only (each harness is one translation unit plus the kernels).
 * Before including, a harness may define HONE_CHECK_WIDTH (name column),
 * HONE_CHECK_SEED (RNG seed) and HONE_CHECK_GUARD (poisoned bytes past a buffer). */
#pragma once

#include <cuda_runtime.h>
#include <cuda_profiler_api.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdint.h>
#include <algorithm>
#include <string>
#include <vector>
#include "hone-kernels.h"

#ifndef HONE_CHECK_WIDTH
#define HONE_CHECK_WIDTH 58
#endif
#ifndef HONE_CHECK_SEED
#define HONE_CHECK_SEED 0x1234567
#endif
#ifndef HONE_CHECK_GUARD
#define HONE_CHECK_GUARD 16
#endif

#define CK(x) do { cudaError_t e_ = (cudaError_t) (x); if (e_ != cudaSuccess) { \
  fprintf (stderr, "FATAL %s:%d: %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorString (e_)); exit (2); } } while (0)

static const double READ_CEIL = 4.52e12;   /* measured read-only streaming, B/s (DESIGN.md) */
static const double GEMM_CEIL = 781e12;    /* measured bf16 GEMM, FLOP/s */
static int n_fail, n_pass;
static FILE *results;                      /* $OUT/results.txt when set */

/* HONE_PROFILE_STEP=<type> (BF16, Q4_0, Q4_1, Q8_0: hone-cuda-check --decode;
 * AWQ: hone-w4-check --bench), or <type>:bound for the step captured bounded to
 * short contexts as the engine does: the whole-step benchmarks replay that
 * step once more at @ctx keys between
 * cudaProfilerStart/Stop and the harness exits, for
 *   ncu --profile-from-start off --graph-profiling node --clock-control none …
 * which then times each kernel of one step alone (serialized: no PDL overlap). */
static void
profile_step_maybe (const char *type, cudaGraphExec_t ge, int32_t *pos, cudaStream_t s, int ctx)
{
  const char *want = getenv ("HONE_PROFILE_STEP");
  if (!want || strcmp (want, type) != 0)
    return;
  CK (cudaMemcpyAsync (pos, &ctx, 4, cudaMemcpyHostToDevice, s));
  CK (cudaGraphLaunch (ge, s));   /* warm */
  CK (cudaMemcpyAsync (pos, &ctx, 4, cudaMemcpyHostToDevice, s));
  CK (cudaStreamSynchronize (s));
  CK (cudaProfilerStart ());
  CK (cudaGraphLaunch (ge, s));
  CK (cudaStreamSynchronize (s));
  CK (cudaProfilerStop ());
  fprintf (stderr, "HONE_PROFILE_STEP: %s step profiled at ctx %d; exiting\n", type, ctx);
  exit (0);
}

/* HONE_TRACE_STEP=<type>[:bound][,…] (a build with the meson option
 * kernel_trace; the same names as HONE_PROFILE_STEP): a per-block timeline of
 * the step (kernels/hone-k-trace.cuh) replayed at @ctx keys, written to
 * $OUT/trace-<type>[-bound].csv (tests/cuda/trace-summary.py reads it); the
 * harness then goes on. HONE_TRACE_CTX=<keys> replays it at that context
 * instead (one the graph was captured for: bounded graphs stop at their
 * bound). trace_prepare () before the capture reserves the records (the
 * capture assigns them). */
static bool
trace_wanted (const char *type)
{
  const char *want = getenv ("HONE_TRACE_STEP");
  if (!want)
    return false;
  const size_t n = strlen (type);
  for (const char *p = want; *p;)
    {
      const char *e = strchr (p, ',');
      const size_t len = e ? (size_t) (e - p) : strlen (p);
      if (len == n && !strncmp (p, type, n))
        return true;
      if (!e)
        break;
      p = e + 1;
    }
  return false;
}

static void
trace_prepare (void)
{
  static bool done;
  if (done || !getenv ("HONE_TRACE_STEP"))
    return;
  done = true;
  const int e = hone_k_trace_reserve ((size_t) 1 << 20);
  if (e)
    fprintf (stderr, "HONE_TRACE_STEP: no trace (%s: needs a build with -Dkernel_trace=true)\n",
             cudaGetErrorString ((cudaError_t) e));
}

static void
trace_step_maybe (const char *type, cudaGraphExec_t ge, int32_t *pos, cudaStream_t s, int ctx)
{
  if (!trace_wanted (type))
    return;
  const char *ce = getenv ("HONE_TRACE_CTX");
  const int ce_keys = ce ? atoi (ce) : 0;
  if (ce_keys > 0)
    ctx = ce_keys;
  for (int i = 0; i < 3; i++)   /* warm: the trace is of a step like the timed ones */
    {
      CK (cudaMemcpyAsync (pos, &ctx, 4, cudaMemcpyHostToDevice, s));
      CK (cudaGraphLaunch (ge, s));
    }
  CK (cudaMemcpyAsync (pos, &ctx, 4, cudaMemcpyHostToDevice, s));
  if (hone_k_trace_clear (s))
    return;
  CK (cudaGraphLaunch (ge, s));
  const char *out = getenv ("OUT");
  std::string path = std::string (out && *out ? out : ".") + "/trace-" + type + ".csv";
  for (char &c : path)
    if (c == ':')
      c = '-';
  const int e = hone_k_trace_dump (path.c_str (), s);
  fprintf (stderr, "HONE_TRACE_STEP: %s step at ctx %d -> %s (%s)\n", type, ctx, path.c_str (),
           e ? cudaGetErrorString ((cudaError_t) e) : "ok");
}

static void
report (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  char buf[1024];
  vsnprintf (buf, sizeof buf, fmt, ap);
  va_end (ap);
  fputs (buf, stdout);
  fflush (stdout);
  if (results)
    {
      fputs (buf, results);
      fflush (results);
    }
}

static void
check (bool ok, const char *what, double err, double bound)
{
  if (ok)
    n_pass++;
  else
    n_fail++;
  report ("%s  %-*s err %.3g (bound %.3g)\n", ok ? "PASS" : "FAIL", HONE_CHECK_WIDTH, what, err, bound);
}

static uint64_t rng_state = HONE_CHECK_SEED;
static uint64_t
rng_u64 (void)
{
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double rng_uniform (void) { return (double) (rng_u64 () >> 11) / 9007199254740992.0; }

static float
rng_normal (void)
{
  const double u = rng_uniform () + 1e-300, v = rng_uniform ();
  return (float) (sqrt (-2 * log (u)) * cos (2 * M_PI * v));
}

static uint16_t f2h (float f) { __half h = __float2half_rn (f); uint16_t u; memcpy (&u, &h, 2); return u; }

static float h2f (uint16_t u) { __half h; memcpy (&h, &u, 2); return __half2float (h); }

static uint16_t f2bf (float f) { __nv_bfloat16 h = __float2bfloat16_rn (f); uint16_t u; memcpy (&u, &h, 2); return u; }

static float bf2f (uint16_t u) { uint32_t w = (uint32_t) u << 16; float f; memcpy (&f, &w, 4); return f; }

static double
rel_err (const float *got, const double *ref, size_t n, bool *all_finite)
{
  double num = 0, den = 0;
  *all_finite = true;
  for (size_t i = 0; i < n; i++)
    {
      if (!isfinite (got[i]))
        *all_finite = false;
      num += (got[i] - ref[i]) * (got[i] - ref[i]);
      den += ref[i] * ref[i];
    }
  return sqrt (num / (den + 1e-300));
}

template <typename T>
static T *
dev_upload (const std::vector<T> &v)
{
  T *p;
  CK (cudaMalloc ((void **) &p, v.size () * sizeof (T) + 16));
  CK (cudaMemcpy (p, v.data (), v.size () * sizeof (T), cudaMemcpyHostToDevice));
  return p;
}

static void *
dev_poisoned (size_t bytes)
{
  void *p;
  CK (cudaMalloc (&p, bytes + HONE_CHECK_GUARD));
  CK (cudaMemset (p, 0xff, bytes + HONE_CHECK_GUARD));   /* 0xffff… is NaN in f32, f16 and bf16 */
  return p;
}

template <typename T>
static std::vector<T>
dev_download (const void *p, size_t n)
{
  std::vector<T> v (n);
  CK (cudaDeviceSynchronize ());
  CK (cudaMemcpy (v.data (), p, n * sizeof (T), cudaMemcpyDeviceToHost));
  return v;
}

/* A Q4Z matrix of @group on the device, its buffers 16 bytes longer than
 * hone_k_matrix_bytes_g says and poisoned (0xff). */
static HoneKMatrix
q4z_alloc (int rows, int cols, int group)
{
  HoneKMatrix m;
  memset (&m, 0, sizeof m);
  m.type = HONE_K_Q4Z;
  m.rows = rows;
  m.cols = cols;
  m.group = group;
  size_t qb, sb;
  if (!hone_k_matrix_bytes_g (HONE_K_Q4Z, rows, cols, group, &qb, &sb))
    {
      fprintf (stderr, "bad Q4Z shape\n");
      exit (2);
    }
  CK (cudaMalloc (&m.q, qb + 16));
  CK (cudaMalloc (&m.s, sb + 16));
  CK (cudaMemset (m.q, 0xff, qb + 16));
  CK (cudaMemset (m.s, 0xff, sb + 16));
  return m;
}

static void
matrix_free (HoneKMatrix *m)
{
  cudaFree (m->q);
  if (m->s)
    cudaFree (m->s);
}

/* GGUF rows (@bytes) of @type uploaded through hone_k_repack as the loader does, into
 * buffers 16 bytes longer than hone_k_matrix_bytes says */
static HoneKMatrix
gguf_upload (int type, const std::vector<uint8_t> &bytes, int rows, int cols)
{
  HoneKMatrix m;
  memset (&m, 0, sizeof m);
  m.type = type;
  m.rows = rows;
  m.cols = cols;
  size_t qb, sb;
  if (!hone_k_matrix_bytes (type, rows, cols, &qb, &sb))
    {
      fprintf (stderr, "FATAL: no GPU layout for type %d, %dx%d\n", type, rows, cols);
      exit (2);
    }
  CK (cudaMalloc (&m.q, qb + 16));
  if (sb)
    CK (cudaMalloc (&m.s, sb + 16));
  uint8_t *src = dev_upload (bytes);
  CK (hone_k_repack (type, src, rows, cols, &m, 0, 1, 0));
  CK (cudaDeviceSynchronize ());
  cudaFree (src);
  return m;
}

/* ---- K-quant blocks and their reference values (hone-kquant-check, hone-w4-check) ---- */

static double
h2d (uint16_t h)
{
  return (double) h2f (h);   /* every f16 is exact in float */
}

/* A random f16 of magnitude lo..hi (sign negative with probability neg). */
static uint16_t
rand_f16 (double lo, double hi, double neg)
{
  double v = lo + (hi - lo) * rng_uniform ();
  if (rng_uniform () < neg)
    v = -v;
  return f2h ((float) v);
}

/* Nearest-even rounding of an f64 to f16 / bf16 bits (mantissa bits mb, min normal exponent emin). */
static uint16_t
round16 (double v, bool bf)
{
  const int mb = bf ? 7 : 10, emin = bf ? -126 : -14;
  const double a = fabs (v);
  double r = 0;
  if (a > 0)
    {
      int e;
      frexp (a, &e);
      const int E = std::max (e - 1, emin);
      const double q = ldexp (1.0, E - mb);
      r = nearbyint (a / q) * q;   /* the default rounding mode: ties to even */
    }
  if (signbit (v))   /* −0 stays −0 (d < 0 times a zero quant) */
    r = -r;
  /* r is representable (or overflows to inf in both conversions), so these are exact */
  return bf ? f2bf ((float) r) : f2h ((float) r);
}

/* v rounded to the nearest f16 (one rounding) */
static double
r16 (double v)
{
  return h2d (round16 (v, false));
}

/* rows GGUF rows of cols values (cols % 256 == 0) of random Q4_K or Q6_K blocks (llama.cpp's block_q4_K /
 * block_q6_K byte layouts, dequantize_row_q4_K / _q6_K's rules); deq = their values in f64. @f16w (optional):
 * the values the fused 4-bit GEMM (kernels/hone-k-gemm-w4.cu) forms in f16 from the same bytes: Q4_K
 * r16(q·r16(d·sc) + r16(−dmin·m)) (one f16 FMA), Q6_K r16((q − 32)·r16(d·sc)). */
static std::vector<uint8_t>
kquant_make_gguf (int type, int rows, int cols, std::vector<double> &deq, std::vector<double> *f16w = NULL)
{
  const int nb = cols / 256;
  const int bs = type == HONE_K_Q4_K ? 144 : 210;
  std::vector<uint8_t> out ((size_t) rows * nb * bs);
  deq.assign ((size_t) rows * cols, 0.0);
  if (f16w)
    f16w->assign ((size_t) rows * cols, 0.0);
  for (size_t b = 0; b < (size_t) rows * nb; b++)
    {
      uint8_t *blk = &out[b * bs];
      double *y = &deq[b * 256];
      double *fw = f16w ? &(*f16w)[b * 256] : NULL;
      for (int i = 0; i < bs; i++)
        blk[i] = (uint8_t) rng_u64 ();
      if (type == HONE_K_Q4_K)
        {
          const uint16_t d = rand_f16 (2e-4, 2e-3, 0.05), dmin = rand_f16 (0, 2e-3, 0.05);
          blk[0] = d & 0xff; blk[1] = d >> 8; blk[2] = dmin & 0xff; blk[3] = dmin >> 8;
          const uint8_t *sc = blk + 4, *qs = blk + 16;
          for (int j = 0; j < 8; j++)
            {
              int s, m;
              if (j < 4)
                {
                  s = sc[j] & 63;
                  m = sc[j + 4] & 63;
                }
              else
                {
                  s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
                  m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
                }
              /* sub-block j: values 32j..32j+31, nibbles of qs[32(j/2) + l], low for even j */
              for (int l = 0; l < 32; l++)
                {
                  const uint8_t byte = qs[32 * (j / 2) + l];
                  const int q = (j & 1) ? byte >> 4 : byte & 15;
                  y[32 * j + l] = h2d (d) * s * q - h2d (dmin) * m;
                  if (fw)
                    fw[32 * j + l] = r16 (q * r16 (h2d (d) * s) + r16 (-h2d (dmin) * m));
                }
            }
        }
      else
        {
          const uint16_t d = rand_f16 (2e-5, 2e-4, 0.05);
          blk[208] = d & 0xff; blk[209] = d >> 8;
          const uint8_t *ql = blk, *qh = blk + 128;
          const int8_t *sc = (const int8_t *) (blk + 192);
          for (int n = 0; n < 2; n++)
            for (int l = 0; l < 32; l++)
              {
                const int q1 = ((ql[64 * n + l] & 15) | (((qh[32 * n + l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[64 * n + l + 32] & 15) | (((qh[32 * n + l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[64 * n + l] >> 4) | (((qh[32 * n + l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[64 * n + l + 32] >> 4) | (((qh[32 * n + l] >> 6) & 3) << 4)) - 32;
                const int is = 8 * n + l / 16;
                y[128 * n + l] = h2d (d) * sc[is] * q1;
                y[128 * n + l + 32] = h2d (d) * sc[is + 2] * q2;
                y[128 * n + l + 64] = h2d (d) * sc[is + 4] * q3;
                y[128 * n + l + 96] = h2d (d) * sc[is + 6] * q4;
                if (fw)
                  {
                    fw[128 * n + l] = r16 (q1 * r16 (h2d (d) * sc[is]));
                    fw[128 * n + l + 32] = r16 (q2 * r16 (h2d (d) * sc[is + 2]));
                    fw[128 * n + l + 64] = r16 (q3 * r16 (h2d (d) * sc[is + 4]));
                    fw[128 * n + l + 96] = r16 (q4 * r16 (h2d (d) * sc[is + 6]));
                  }
              }
        }
    }
  return out;
}

static std::vector<float>
make_inv_freq (int hd, double theta)
{
  std::vector<float> f (hd / 2);
  for (int i = 0; i < hd / 2; i++)
    f[i] = (float) pow (theta, -2.0 * i / hd);
  return f;
}

__global__ void
fill_random (uint8_t *p, size_t n, uint64_t seed, int kind)
{
  for (size_t i = (size_t) blockIdx.x * blockDim.x + threadIdx.x; i < n / 2; i += (size_t) gridDim.x * blockDim.x)
    {
      uint64_t z = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z ^= z >> 27;
      uint16_t v = (uint16_t) z;
      if (kind == 1)        /* bf16 in ±0.03 */
        v = __bfloat16_as_ushort (__float2bfloat16_rn ((float) ((int) (z & 0xffff) - 32768) * (0.03f / 32768.f)));
      else if (kind == 2)   /* f16 scales ~ 0.002 */
        v = __half_as_ushort (__float2half_rn (0.001f + (float) (z & 0xff) * 1e-5f));
      else if (kind == 3)   /* f16 in ±1 */
        v = __half_as_ushort (__float2half_rn ((float) ((int) (z & 0xffff) - 32768) / 32768.f));
      else if (kind == 4)   /* two zero points 0..15 */
        v = (uint16_t) (z & 0x0f0f);
      ((uint16_t *) p)[i] = v;
    }
}

static double
bench_ms (cudaStream_t s, int reps, void (*fn) (void *), void *arg)
{
  cudaEvent_t a, b;
  CK (cudaEventCreate (&a));
  CK (cudaEventCreate (&b));
  for (int i = 0; i < 3; i++) fn (arg);
  std::vector<float> ts;
  for (int it = 0; it < 5; it++)
    {
      CK (cudaEventRecord (a, s));
      for (int i = 0; i < reps; i++) fn (arg);
      CK (cudaEventRecord (b, s));
      CK (cudaEventSynchronize (b));
      float ms;
      CK (cudaEventElapsedTime (&ms, a, b));
      ts.push_back (ms / reps);
    }
  CK (cudaGetLastError ());
  std::sort (ts.begin (), ts.end ());
  cudaEventDestroy (a);
  cudaEventDestroy (b);
  return ts[2];
}

/* The activation quantization the quantized GEMVs see (d = absmax/127, round half even). */
static inline std::vector<double>
act_q8_roundtrip (const std::vector<double> &x)
{
  std::vector<double> y (x.size ());
  for (size_t b = 0; b < x.size (); b += 32)
    {
      float amax = 0;
      for (int i = 0; i < 32; i++) amax = fmaxf (amax, fabsf ((float) x[b + i]));
      const float d = amax / 127.f;
      for (int i = 0; i < 32; i++)
        y[b + i] = d > 0 ? (double) rintf ((float) x[b + i] / d) * d : 0.0;
    }
  return y;
}
