/* bench-attention.c — the CPU backend's attention alone, as decode (one token
 * against a long cache) or prefill (a batch of tokens) runs it, on random
 * f16 keys and values: microseconds a call and the K/V bytes a call reads per second.
 *
 * The whole-model benchmark (bench-cpu) mixes attention with the weight
 * matmuls; this one times hone_cpu_attention over one layer's cache, with its
 * thread pool and key split, so a kernel change can be measured first and on
 * its own (tests/bench/RESULTS.md, session 31).
 *
 * usage: bench-attention [--keys 2048] [--tokens 1] [--head-dim 64] [--heads 9] [--kv-heads 3]
 *                        [--threads 2] [--reps 200] [--rounds 5] [--isa portable|avx2|avx-vnni|avx512-vnni]
 * Defaults: the default model's shape (SmolLM2-135M: 9 query heads, 3 KV heads, head_dim 64).
 * Prints each round's microseconds a call, then the median, and one JSON line.
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu/hone-cpu-attention.h"
#include "cpu/hone-cpu-dot.h"

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

int
main (int argc, char **argv)
{
  int keys = 2048, tokens = 1, hd = 64, heads = 9, kv_heads = 3, threads = 2, reps = 200, rounds = 5;
  const char *isa = NULL;
  g_autoptr (GError) error = NULL;
  HoneCpuKv *kv;
  HoneCpuPool *pool;
  GRand *r = g_rand_new_with_seed (7);
  float *k, *v, *q, *out, *scratch;
  size_t stride;
  double *us;

  for (int i = 1; i < argc; i++)
    {
      if (g_str_equal (argv[i], "--keys") && i + 1 < argc) keys = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--tokens") && i + 1 < argc) tokens = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--head-dim") && i + 1 < argc) hd = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--heads") && i + 1 < argc) heads = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--kv-heads") && i + 1 < argc) kv_heads = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--threads") && i + 1 < argc) threads = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--reps") && i + 1 < argc) reps = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--rounds") && i + 1 < argc) rounds = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--isa") && i + 1 < argc) isa = argv[++i];
      else
        {
          g_printerr ("bench-attention: unknown argument %s (see the usage at the top of bench-attention.c)\n", argv[i]);
          return 2;
        }
    }
  if (keys < tokens || tokens < 1 || hd < 1 || hd > HONE_CPU_MAX_HEAD_DIM || kv_heads < 1 || heads % kv_heads != 0
      || threads < 1 || reps < 1 || rounds < 1)
    {
      g_printerr ("bench-attention: need keys >= tokens >= 1, 1 <= head-dim <= %d, heads a multiple of kv-heads, "
                  "threads, reps and rounds >= 1\n", HONE_CPU_MAX_HEAD_DIM);
      return 2;
    }
  if (isa != NULL)
    {
      const HoneCpuIsa want = hone_cpu_isa_from_name (isa);
      if (want == HONE_CPU_ISA_COUNT_ || !hone_cpu_isa_supported (want))
        {
          g_printerr ("bench-attention: ISA %s is unknown or this CPU lacks it\n", isa);
          return 2;
        }
      hone_cpu_set_isa (want);
    }

  if ((kv = hone_cpu_kv_new (1, kv_heads, hd, keys, &error)) == NULL
      || (pool = hone_cpu_pool_new (threads, &error)) == NULL)
    {
      g_printerr ("bench-attention: %s\n", error->message);
      return 1;
    }
  k = g_new (float, (gsize) kv_heads * hd);
  v = g_new (float, (gsize) kv_heads * hd);
  for (int p = 0; p < keys; p++)
    {
      for (int i = 0; i < kv_heads * hd; i++)
        {
          k[i] = (float) g_rand_double_range (r, -2, 2);
          v[i] = (float) g_rand_double_range (r, -1, 1);
        }
      hone_cpu_kv_store (kv, 0, p, k, v);
    }
  q = g_new (float, (gsize) tokens * heads * hd);
  out = g_new (float, (gsize) tokens * heads * hd);
  for (int i = 0; i < tokens * heads * hd; i++)
    q[i] = (float) g_rand_double_range (r, -2, 2);
  stride = hone_cpu_attention_scratch_floats (keys, hd);
  scratch = g_new (float, stride * threads);
  us = g_new (double, rounds);

  /* the last `tokens` positions, as a decode step (tokens = 1) or a prompt's batch */
  hone_cpu_attention (pool, kv, 0, q, tokens, keys - tokens, heads, out, scratch, stride);   /* warm-up */
  for (int round = 0; round < rounds; round++)
    {
      gint64 t0 = g_get_monotonic_time ();
      for (int i = 0; i < reps; i++)
        hone_cpu_attention (pool, kv, 0, q, tokens, keys - tokens, heads, out, scratch, stride);
      us[round] = (double) (g_get_monotonic_time () - t0) / reps;
      g_print ("round %d: %.2f us a call\n", round, us[round]);
    }
  qsort (us, rounds, sizeof (double), cmp_double);
  {
    /* K and V of every cached position, each read once a call */
    const double bytes = 2.0 * keys * kv_heads * hd * sizeof (uint16_t), med = us[rounds / 2];
    g_print ("{\"isa\": \"%s\", \"threads\": %d, \"keys\": %d, \"tokens\": %d, \"head_dim\": %d, \"heads\": %d, "
             "\"kv_heads\": %d, \"us_per_call\": %.2f, \"kv_gb_per_s\": %.2f}\n",
             hone_cpu_isa_name (hone_cpu_isa ()), threads, keys, tokens, hd, heads, kv_heads, med,
             bytes / (med * 1e3));
  }
  g_free (us); g_free (scratch); g_free (out); g_free (q); g_free (v); g_free (k);
  hone_cpu_pool_free (pool);
  hone_cpu_kv_free (kv);
  g_rand_free (r);
  return 0;
}
