/* bench-gemm.c — the f32 GEMM of AWQ calibration on the CPU (hone_cpu_gemm_f32)
 * against the tile kernels it replaced (hone_cpu_matmul on f32 weights, 256
 * tokens a call, as calibration ran them before): milliseconds a call and
 * GFLOP/s, best of --reps.
 *
 * usage: bench-gemm [--rows 3072] [--cols 576] [--tokens 512] [--threads 1] [--reps 5]
 *                   [--type f32|f16|bf16] [--isa portable|avx2|avx-vnni|avx512-vnni]
 * Defaults: the default model's gate|up (576 → 1,536 each, as one 3,072-row call
 * would be) over 512 tokens, the CPU calibration's loss tokens.
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu/hone-cpu-dot.h"
#include "cpu/hone-cpu-gemm.h"
#include "cpu/hone-cpu-matmul.h"
#include "hone-dtype.h"

int
main (int argc, char **argv)
{
  int N = 3072, K = 576, T = 512, threads = 1, reps = 5;
  const char *isa = NULL, *type_name = "f32";
  HoneDType type = HONE_DTYPE_F32;
  HoneCpuPool *pool;
  float *W, *x, *y;
  void *wdata;
  HoneTensor t;

  for (int i = 1; i < argc; i++)
    {
      if (g_str_equal (argv[i], "--rows") && i + 1 < argc) N = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--cols") && i + 1 < argc) K = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--tokens") && i + 1 < argc) T = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--threads") && i + 1 < argc) threads = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--reps") && i + 1 < argc) reps = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--isa") && i + 1 < argc) isa = argv[++i];
      else if (g_str_equal (argv[i], "--type") && i + 1 < argc) type_name = argv[++i];
      else
        {
          g_printerr ("usage: bench-gemm [--rows N] [--cols K] [--tokens T] [--threads N] [--reps R] [--isa NAME]\n");
          return 2;
        }
    }
  if (g_str_equal (type_name, "f16"))
    type = HONE_DTYPE_F16;
  else if (g_str_equal (type_name, "bf16"))
    type = HONE_DTYPE_BF16;
  else if (!g_str_equal (type_name, "f32"))
    {
      g_printerr ("bench-gemm: --type is f32, f16 or bf16\n");
      return 2;
    }
  if (N <= 0 || K <= 0 || T <= 0 || threads <= 0 || reps <= 0)
    {
      g_printerr ("bench-gemm: every number must be > 0\n");
      return 2;
    }
  if (isa != NULL)
    {
      const HoneCpuIsa want = hone_cpu_isa_from_name (isa);
      if (want == HONE_CPU_ISA_COUNT_ || !hone_cpu_isa_supported (want))
        {
          g_printerr ("bench-gemm: ISA %s is unknown or this CPU lacks it\n", isa);
          return 2;
        }
      hone_cpu_set_isa (want);
    }
  pool = hone_cpu_pool_new (threads, NULL);
  if (pool == NULL)
    return 1;
  W = g_new (float, (gsize) N * K);
  x = g_new (float, (gsize) T * K);
  y = g_new (float, (gsize) T * N);
  for (gsize i = 0; i < (gsize) N * K; i++)
    W[i] = (float) ((i * 7919) % 201) / 100.0f - 1.0f;
  for (gsize i = 0; i < (gsize) T * K; i++)
    x[i] = (float) ((i * 104729) % 199) / 100.0f - 1.0f;
  wdata = W;
  if (type != HONE_DTYPE_F32)
    {
      guint16 *h = g_new (guint16, (gsize) N * K);
      for (gsize i = 0; i < (gsize) N * K; i++)
        h[i] = type == HONE_DTYPE_F16 ? hone_f32_to_f16 (W[i]) : hone_f32_to_bf16 (W[i]);
      wdata = h;
    }
  t = (HoneTensor) { .name = "w", .type = type, .n_dims = 2, .ne = { K, N, 1, 1 }, .data = wdata,
                     .nbytes = (size_t) N * K * hone_dtype_row_bytes (type, 1) };
  g_print ("%s weights, isa %s, %d threads, y[%d x %d] = x[%d x %d] W[%d x %d]^T\n", type_name, hone_cpu_isa_name (hone_cpu_isa ()), threads,
           T, N, T, K, N, K);
  for (int mode = 0; mode < 2; mode++)
    {
      double best = G_MAXDOUBLE;
      for (int r = 0; r < reps; r++)
        {
          const gint64 t0 = g_get_monotonic_time ();
          if (mode == 0)
            hone_cpu_gemm (pool, &t, x, T, y);
          else
            for (int s = 0; s < T; s += 256)
              {
                HoneCpuMatmulOut o = { &t, y + (size_t) s * N };
                hone_cpu_matmul (pool, &o, 1, x + (size_t) s * K, NULL, K, MIN (256, T - s));
              }
          best = MIN (best, (g_get_monotonic_time () - t0) / 1e6);
        }
      g_print ("%-26s %9.2f ms %8.1f GFLOP/s\n", mode == 0 ? "hone_cpu_gemm" : "hone_cpu_matmul",
               best * 1e3, 2.0 * N * K * T / best / 1e9);
    }
  hone_cpu_pool_free (pool);
  if (wdata != W)
    g_free (wdata);
  g_free (W);
  g_free (x);
  g_free (y);
  return 0;
}
