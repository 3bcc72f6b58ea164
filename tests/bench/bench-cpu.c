/* bench-cpu.c — prefill and decode speed of the CPU backend on a model.
 *
 * Same protocol as bench_llamacpp.py: a fixed prompt of N token ids
 * (id_i = 1 + (7919·i + 13) mod (vocab − 1); speed does not depend on the ids),
 * prefill timed as one forward of the whole prompt (logits of the last token),
 * then D decode steps of one token each feeding back the argmax; median of R
 * runs, a fresh sequence per run, context 512.
 *
 * usage: bench-cpu [MODEL] [--threads 2] [--prompt 256] [--decode 128] [--runs 5] [--isa portable|avx2|avx-vnni]
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hone-backend.h"
#include "hone-model.h"
#include "cpu/hone-cpu-dot.h"

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

/* CPU seconds of the whole process: on a shared machine wall time depends on
 * the neighbours, CPU time on the work done. */
static double
cpu_seconds (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static gint64
status_kb (const char *key)
{
  g_autofree char *s = NULL;
  char *p;
  if (!g_file_get_contents ("/proc/self/status", &s, NULL, NULL) || (p = strstr (s, key)) == NULL)
    return -1;
  return g_ascii_strtoll (p + strlen (key) + 1, NULL, 10);
}

int
main (int argc, char **argv)
{
  int threads = 2, n_prompt = 256, n_decode = 128, runs = 5;
  const char *isa = NULL, *path = NULL;
  g_autoptr(GError) error = NULL;
  HoneModel *model;
  HoneBackend *be;
  HoneBackendOptions opt = { 0 };
  gint32 *ids;
  float *logits;
  double *pre, *dec, *pre_cpu, *dec_cpu;

  for (int i = 1; i < argc; i++)
    {
      if (g_str_equal (argv[i], "--threads") && i + 1 < argc) threads = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--prompt") && i + 1 < argc) n_prompt = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--decode") && i + 1 < argc) n_decode = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--runs") && i + 1 < argc) runs = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--isa") && i + 1 < argc) isa = argv[++i];
      else path = argv[i];
    }
  if (path == NULL)
    path = g_getenv ("HONE_DEFAULT_MODEL");
  if (path == NULL)
    path = g_build_filename (g_get_user_cache_dir (), "hone", "models", "SmolLM2-135M-Instruct.Q4_1.gguf", NULL);
  if (isa != NULL && hone_cpu_isa_from_name (isa) < HONE_CPU_ISA_COUNT_)
    hone_cpu_set_isa (hone_cpu_isa_from_name (isa));

  model = hone_model_open (path, &error);
  if (model == NULL)
    {
      g_printerr ("bench-cpu: %s\n", error->message);
      return 1;
    }
  be = hone_cpu_backend_new (&error);
  opt.n_threads = threads;
  opt.max_context = MAX (512, n_prompt + n_decode);   /* as bench_llamacpp.py's n_ctx */
  if (!be->klass->load (be, model, &opt, NULL, NULL, NULL, &error))
    {
      g_printerr ("bench-cpu: %s\n", error->message);
      return 1;
    }
  ids = g_new (gint32, n_prompt);
  for (int i = 0; i < n_prompt; i++)
    ids[i] = 1 + (gint32) (((gint64) 7919 * i + 13) % (model->config.vocab - 1));
  logits = g_new (float, model->config.vocab);
  pre = g_new (double, runs);
  dec = g_new (double, runs);
  pre_cpu = g_new (double, runs);
  dec_cpu = g_new (double, runs);

  for (int r = 0; r < runs; r++)
    {
      int seq = be->klass->seq_new (be, &error);
      HoneBatch batch = { seq, ids, n_prompt, FALSE, logits };
      gint64 t0 = g_get_monotonic_time (), t1;
      double c0 = cpu_seconds (), c1;

      if (!hone_backend_forward (be, &batch, NULL, &error))
        {
          g_printerr ("bench-cpu: %s\n", error->message);
          return 1;
        }
      t1 = g_get_monotonic_time ();
      c1 = cpu_seconds ();
      pre[r] = n_prompt / ((t1 - t0) / 1e6);
      pre_cpu[r] = (c1 - c0) * 1e3 / n_prompt;
      for (int d = 0; d < n_decode; d++)
        {
          gint32 tok = 0;
          for (int v = 1; v < model->config.vocab; v++)
            if (logits[v] > logits[tok])
              tok = v;
          batch = (HoneBatch) { seq, &tok, 1, FALSE, logits };
          if (!hone_backend_forward (be, &batch, NULL, &error))
            {
              g_printerr ("bench-cpu: %s\n", error->message);
              return 1;
            }
        }
      dec[r] = n_decode / ((g_get_monotonic_time () - t1) / 1e6);
      dec_cpu[r] = (cpu_seconds () - c1) * 1e3 / n_decode;
      be->klass->seq_free (be, seq);
      g_printerr ("run %d: prefill %.1f tok/s (%.2f cpu-ms/tok), decode %.1f tok/s (%.2f cpu-ms/tok)\n",
                  r, pre[r], pre_cpu[r], dec[r], dec_cpu[r]);
    }
  qsort (pre, runs, sizeof (double), cmp_double);
  qsort (dec, runs, sizeof (double), cmp_double);
  qsort (pre_cpu, runs, sizeof (double), cmp_double);
  qsort (dec_cpu, runs, sizeof (double), cmp_double);
  printf ("{\"engine\": \"hone-cpu\", \"isa\": \"%s\", \"threads\": %d, \"prompt\": %d, \"decode\": %d, \"runs\": %d, "
          "\"prefill_tok_s\": %.1f, \"decode_tok_s\": %.1f, \"prefill_cpu_ms_per_tok\": %.3f, \"decode_cpu_ms_per_tok\": %.3f, \"peak_rss_mib\": %.1f, \"model_mib\": %.1f}\n",
          hone_cpu_isa_name (hone_cpu_isa ()), threads, n_prompt, n_decode, runs, pre[runs / 2], dec[runs / 2], pre_cpu[runs / 2], dec_cpu[runs / 2],
          status_kb ("VmHWM") / 1024.0, model->file_bytes / 1048576.0);
  hone_backend_free (be);
  hone_model_unref (model);
  return 0;
}
