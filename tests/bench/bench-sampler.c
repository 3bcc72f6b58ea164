/* bench-sampler.c — the host sampler (hone_sampler_sample) over one logits row:
 * microseconds a token, the median of --rounds rounds of --reps draws, each
 * draw on a fresh copy of the row (penalties change it in place).
 *
 * usage: bench-sampler [--vocab 49152] [--temp 0.8] [--top-k 40] [--top-p 0.95]
 *                      [--min-p 0.05] [--repeat-penalty 1.0] [--reps 2000] [--rounds 5]
 * Defaults: the CLI's sampling on the default model's vocabulary. The row is
 * uniform in [-3, 3) with every 997th logit raised by 8 (a few clear leaders,
 * as a model's rows have).
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hone-sampler.h"

static int
cmp_double (const void *a, const void *b)
{
  const double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

int
main (int argc, char **argv)
{
  int V = 49152, reps = 2000, rounds = 5;
  HoneSamplerParams p;
  HoneSampler *s;
  GError *error = NULL;
  float *row, *work;
  GRand *rand;
  double *us;
  gint64 sum = 0;

  hone_sampler_params_init (&p);
  p.seed = 1;
  for (int i = 1; i < argc; i++)
    {
      if (g_str_equal (argv[i], "--vocab") && i + 1 < argc) V = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--temp") && i + 1 < argc) p.temperature = (float) atof (argv[++i]);
      else if (g_str_equal (argv[i], "--top-k") && i + 1 < argc) p.top_k = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--top-p") && i + 1 < argc) p.top_p = (float) atof (argv[++i]);
      else if (g_str_equal (argv[i], "--min-p") && i + 1 < argc) p.min_p = (float) atof (argv[++i]);
      else if (g_str_equal (argv[i], "--repeat-penalty") && i + 1 < argc) p.repeat_penalty = (float) atof (argv[++i]);
      else if (g_str_equal (argv[i], "--reps") && i + 1 < argc) reps = atoi (argv[++i]);
      else if (g_str_equal (argv[i], "--rounds") && i + 1 < argc) rounds = atoi (argv[++i]);
      else
        {
          fprintf (stderr, "usage: bench-sampler [--vocab N] [--temp T] [--top-k K] [--top-p P] [--min-p P] "
                           "[--repeat-penalty X] [--reps N] [--rounds N]\n");
          return 2;
        }
    }
  if (V < 1 || reps < 1 || rounds < 1)
    {
      fprintf (stderr, "bench-sampler: --vocab, --reps and --rounds must be positive\n");
      return 2;
    }
  s = hone_sampler_new (&p, V, &error);
  if (s == NULL)
    {
      fprintf (stderr, "bench-sampler: %s\n", error->message);
      return 1;
    }
  row = g_new (float, V);
  work = g_new (float, V);
  us = g_new (double, rounds);
  rand = g_rand_new_with_seed (1);
  for (int i = 0; i < V; i++)
    row[i] = (float) g_rand_double_range (rand, -3.0, 3.0) + (i % 997 == 0 ? 8.0f : 0.0f);
  for (int r = 0; r < rounds; r++)
    {
      const gint64 t0 = g_get_monotonic_time ();
      for (int k = 0; k < reps; k++)
        {
          memcpy (work, row, sizeof (float) * V);
          sum += hone_sampler_sample (s, work);
          hone_sampler_accept (s, (gint32) (sum % V));
        }
      us[r] = (double) (g_get_monotonic_time () - t0) / reps;
    }
  qsort (us, rounds, sizeof *us, cmp_double);
  printf ("vocab %d, T %g, top-k %d, top-p %g, min-p %g, repeat penalty %g: %.1f us a token "
          "(median of %d rounds of %d; fastest %.1f, slowest %.1f; ids sum %" G_GINT64_FORMAT ")\n",
          V, p.temperature, p.top_k, p.top_p, p.min_p, p.repeat_penalty, us[rounds / 2], rounds, reps, us[0],
          us[rounds - 1], sum);
  g_rand_free (rand);
  g_free (us);
  g_free (work);
  g_free (row);
  hone_sampler_free (s);
  return 0;
}
