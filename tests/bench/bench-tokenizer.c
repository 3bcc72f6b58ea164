/* bench-tokenizer.c — tokenizer throughput (MB/s of UTF-8 input encoded).
 *
 *   bench-tokenizer TEXT [--gguf MODEL.gguf | --hf-dir DIR] [--chunk BYTES] [--repeat N]
 *
 * Defaults to the default model's GGUF vocabulary. The text is encoded in
 * chunks (default: the whole file at once; --chunk 4096 for prompt-sized
 * pieces) on a fresh tokenizer (cold pre-token cache), then again (warm).
 * tests/bench/bench_tokenizer_hf.py makes the text and times HF tokenizers
 * on the same file, single-threaded, for comparison.
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hone-gguf.h"
#include "hone-tokenizer.h"

static HoneTokenizer *
load (const char *gguf_path, const char *hf_dir, GError **error)
{
  if (hf_dir)
    return hone_tokenizer_new_from_hf_dir (hf_dir, error);
  {
    g_autoptr (HoneGguf) g = hone_gguf_open (gguf_path, error);
    return g ? hone_tokenizer_new_from_gguf (g, error) : NULL;
  }
}

static double
cpu_seconds (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Wall seconds; *cpu gets the process CPU seconds (the box is shared, so
 * both are printed). */
static double
run (HoneTokenizer *tok, const char *text, gsize len, gsize chunk, guint64 *n_tokens, double *cpu)
{
  g_autoptr (GArray) ids = g_array_sized_new (FALSE, FALSE, sizeof (gint32), len / 3);
  gint64 t0 = g_get_monotonic_time ();
  double c0 = cpu_seconds ();
  gsize off = 0;
  *n_tokens = 0;
  while (off < len)
    {
      gsize n = MIN (chunk, len - off);
      /* Cut at a line end so chunks do not split characters or words. */
      if (off + n < len)
        {
          const char *nl = g_strrstr_len (text + off, (gssize) n, "\n");
          if (nl && nl > text + off)
            n = (gsize) (nl - (text + off)) + 1;
        }
      g_array_set_size (ids, 0);
      if (!hone_tokenizer_encode (tok, text + off, (gssize) n, 0, ids, NULL))
        return -1;
      *n_tokens += ids->len;
      off += n;
    }
  *cpu = cpu_seconds () - c0;
  return (double) (g_get_monotonic_time () - t0) / 1e6;
}

int
main (int argc, char **argv)
{
  const char *text_path = NULL, *gguf_path = NULL, *hf_dir = NULL;
  gsize chunk = G_MAXSIZE, len;
  int repeat = 3, i;
  g_autofree char *text = NULL;
  g_autofree char *default_gguf = NULL;
  GError *error = NULL;
  HoneTokenizer *tok;
  double best = 1e30, cold, cold_cpu, cpu, best_cpu = 1e30;
  guint64 n_tokens;

  for (i = 1; i < argc; i++)
    {
      if (g_str_equal (argv[i], "--gguf") && i + 1 < argc)
        gguf_path = argv[++i];
      else if (g_str_equal (argv[i], "--hf-dir") && i + 1 < argc)
        hf_dir = argv[++i];
      else if (g_str_equal (argv[i], "--chunk") && i + 1 < argc)
        chunk = (gsize) g_ascii_strtoull (argv[++i], NULL, 10);
      else if (g_str_equal (argv[i], "--repeat") && i + 1 < argc)
        repeat = atoi (argv[++i]);
      else
        text_path = argv[i];
    }
  if (text_path == NULL)
    {
      fprintf (stderr, "usage: %s TEXT [--gguf MODEL | --hf-dir DIR] [--chunk BYTES] [--repeat N]\n", argv[0]);
      return 2;
    }
  if (gguf_path == NULL && hf_dir == NULL)
    {
      const char *env = g_getenv ("HONE_DEFAULT_MODEL");
      default_gguf = env ? g_strdup (env)
                         : g_build_filename (g_get_user_cache_dir (), "hone", "models",
                                             "SmolLM2-135M-Instruct.Q4_1.gguf", NULL);
      gguf_path = default_gguf;
    }
  if (!g_file_get_contents (text_path, &text, &len, &error))
    {
      fprintf (stderr, "%s\n", error->message);
      return 1;
    }
  if (chunk == 0)
    chunk = G_MAXSIZE;

  {
    gint64 t0 = g_get_monotonic_time ();
    tok = load (gguf_path, hf_dir, &error);
    if (tok == NULL)
      {
        fprintf (stderr, "%s\n", error->message);
        return 1;
      }
    printf ("load: %.1f ms (%d tokens)\n", (g_get_monotonic_time () - t0) / 1e3, hone_tokenizer_n_vocab (tok));
  }
  cold = run (tok, text, len, chunk, &n_tokens, &cold_cpu);
  for (i = 0; i < repeat; i++)
    {
      double t = run (tok, text, len, chunk, &n_tokens, &cpu);
      if (t < best)
        best = t;
      if (cpu < best_cpu)
        best_cpu = cpu;
    }
  printf ("text: %s, %.2f MB, %" G_GUINT64_FORMAT " tokens, chunk %s\n", text_path, len / 1e6, n_tokens,
          chunk == G_MAXSIZE ? "whole" : "lines");
  printf ("hone encode cold cache: %.2f MB/s wall (%.3f s), %.2f MB/s CPU\n", len / 1e6 / cold, cold, len / 1e6 / cold_cpu);
  printf ("hone encode warm cache: %.2f MB/s wall (best of %d, %.3f s), %.2f MB/s CPU\n", len / 1e6 / best, repeat, best,
          len / 1e6 / best_cpu);
  hone_tokenizer_free (tok);
  return 0;
}
