/* test-sampler.c — the sampler against distributions computed here, in
 * double precision, from the definitions (softmax, top-k, nucleus, min-p,
 * penalties), and seeded draws against their expected frequencies. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hone-error.h"
#include "hone-sampler.h"

/* ---- a reference implementation of the documented pipeline ---------------------- */

typedef struct {
  int id;
  double p;
} Ref;

static int
ref_cmp (const void *a, const void *b)
{
  const Ref *x = a, *y = b;
  if (x->p != y->p)
    return x->p > y->p ? -1 : 1;
  return x->id - y->id;
}

/* Sort all, cut top-k, renormalise, cut nucleus, cut min-p, renormalise. */
static void
ref_probs (const float *logits, int n, double temp, int top_k, double top_p, double min_p, double *out)
{
  Ref *r = g_new (Ref, n);
  double mx = -INFINITY, sum = 0.0, mass = 0.0, cum = 0.0;
  int keep = n;

  for (int i = 0; i < n; i++)
    mx = MAX (mx, logits[i]);
  for (int i = 0; i < n; i++)
    {
      r[i].id = i;
      r[i].p = exp ((logits[i] - mx) / temp);
      sum += r[i].p;
    }
  for (int i = 0; i < n; i++)
    r[i].p /= sum;
  qsort (r, n, sizeof *r, ref_cmp);
  if (top_k > 0 && top_k < n)
    keep = top_k;
  for (int i = 0; i < keep; i++)
    mass += r[i].p;
  if (top_p < 1.0)
    for (int i = 0; i < keep; i++)
      {
        cum += r[i].p / mass;
        if (cum >= top_p)
          {
            keep = i + 1;
            break;
          }
      }
  if (min_p > 0.0)
    {
      int k = 1;
      while (k < keep && r[k].p >= r[0].p * min_p)
        k++;
      keep = k;
    }
  mass = 0.0;
  for (int i = 0; i < keep; i++)
    mass += r[i].p;
  memset (out, 0, sizeof (double) * n);
  for (int i = 0; i < keep; i++)
    out[r[i].id] = r[i].p / mass;
  g_free (r);
}

static HoneSampler *
make (float temp, int top_k, float top_p, float min_p, int n, guint64 seed)
{
  HoneSamplerParams p;
  GError *error = NULL;
  HoneSampler *s;

  hone_sampler_params_init (&p);
  p.temperature = temp;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.penalty_window = 0;
  p.seed = seed;
  s = hone_sampler_new (&p, n, &error);
  g_assert_no_error (error);
  return s;
}

static void
assert_probs (HoneSampler *s, const float *logits, int n, double temp, int top_k, double top_p, double min_p)
{
  g_autofree float *got = g_new (float, n);
  g_autofree double *want = g_new (double, n);

  hone_sampler_probabilities (s, logits, got);
  ref_probs (logits, n, temp, top_k, top_p, min_p, want);
  for (int i = 0; i < n; i++)
    {
      if (want[i] == 0.0)
        g_assert_cmpfloat (got[i], ==, 0.0f);
      else
        g_assert_cmpfloat_with_epsilon (got[i], want[i], 1e-5 + 1e-4 * want[i]);
    }
}

/* ---- validation --------------------------------------------------------------------- */

static void
expect_invalid (HoneSamplerParams *p, const char *name)
{
  GError *error = NULL;
  HoneSampler *s = hone_sampler_new (p, 10, &error);

  g_assert_null (s);
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, name));
  g_error_free (error);
  hone_sampler_params_init (p);
}

static void
test_validate (void)
{
  HoneSamplerParams p;
  GError *error = NULL;

  hone_sampler_params_init (&p);
  g_assert_true (hone_sampler_params_validate (&p, &error));
  g_assert_no_error (error);

  p.temperature = -0.1f;
  expect_invalid (&p, "temperature");
  p.temperature = NAN;
  expect_invalid (&p, "temperature");
  p.top_k = -1;
  expect_invalid (&p, "top-k");
  p.top_p = 0.0f;
  expect_invalid (&p, "top-p");
  p.top_p = 1.5f;
  expect_invalid (&p, "top-p");
  p.min_p = 1.0f;
  expect_invalid (&p, "min-p");
  p.min_p = -0.5f;
  expect_invalid (&p, "min-p");
  p.repeat_penalty = 0.0f;
  expect_invalid (&p, "repeat-penalty");
  p.frequency_penalty = INFINITY;
  expect_invalid (&p, "frequency-penalty");
  p.presence_penalty = NAN;
  expect_invalid (&p, "presence-penalty");
  p.penalty_window = -3;
  expect_invalid (&p, "penalty-window");
  p.max_tokens = -1;
  expect_invalid (&p, "max-tokens");

  g_assert_null (hone_sampler_new (&p, 0, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
}

/* ---- masks ---------------------------------------------------------------------------- */

static void
test_greedy (void)
{
  float logits[] = { 0.5f, 3.0f, -1.0f, 3.0f, 2.9f };
  g_autoptr (HoneSampler) s = make (0.0f, 0, 1.0f, 0.0f, 5, 1);
  float probs[5];

  g_assert_cmpint (hone_argmax (logits, 5), ==, 1);   /* first of the tie */
  g_assert_cmpint (hone_sampler_sample (s, logits), ==, 1);
  hone_sampler_probabilities (s, logits, probs);
  g_assert_cmpfloat (probs[1], ==, 1.0f);
  g_assert_cmpfloat (probs[0] + probs[2] + probs[3] + probs[4], ==, 0.0f);
}

static void
test_top_k (void)
{
  float logits[] = { 1.0f, 4.0f, 2.0f, 3.5f, -2.0f, 0.0f, 3.0f };
  g_autoptr (HoneSampler) s = make (1.0f, 3, 1.0f, 0.0f, 7, 1);
  float probs[7];
  double z;

  hone_sampler_probabilities (s, logits, probs);
  /* Only 4.0, 3.5, 3.0 survive, in softmax proportion. */
  z = exp (4.0) + exp (3.5) + exp (3.0);
  g_assert_cmpfloat_with_epsilon (probs[1], exp (4.0) / z, 1e-6);
  g_assert_cmpfloat_with_epsilon (probs[3], exp (3.5) / z, 1e-6);
  g_assert_cmpfloat_with_epsilon (probs[6], exp (3.0) / z, 1e-6);
  g_assert_cmpfloat (probs[0] + probs[2] + probs[4] + probs[5], ==, 0.0f);
  assert_probs (s, logits, 7, 1.0, 3, 1.0, 0.0);
}

static void
test_top_p_min_p (void)
{
  /* Probabilities 0.5, 0.25, 0.15, 0.1 as logits. */
  float logits[] = { logf (0.15f), logf (0.5f), logf (0.1f), logf (0.25f) };
  float probs[4];

  {
    g_autoptr (HoneSampler) s = make (1.0f, 0, 0.7f, 0.0f, 4, 1);
    hone_sampler_probabilities (s, logits, probs);
    /* 0.5 + 0.25 = 0.75 ≥ 0.7: the nucleus is {0.5, 0.25}. */
    g_assert_cmpfloat_with_epsilon (probs[1], 2.0 / 3.0, 1e-6);
    g_assert_cmpfloat_with_epsilon (probs[3], 1.0 / 3.0, 1e-6);
    g_assert_cmpfloat (probs[0] + probs[2], ==, 0.0f);
  }
  {
    g_autoptr (HoneSampler) s = make (1.0f, 0, 0.4f, 0.0f, 4, 1);
    hone_sampler_probabilities (s, logits, probs);
    g_assert_cmpfloat (probs[1], ==, 1.0f);
  }
  {
    /* min-p 0.29: keep p ≥ 0.145 → {0.5, 0.25, 0.15}. */
    g_autoptr (HoneSampler) s = make (1.0f, 0, 1.0f, 0.29f, 4, 1);
    hone_sampler_probabilities (s, logits, probs);
    g_assert_cmpfloat_with_epsilon (probs[1], 0.5 / 0.9, 1e-6);
    g_assert_cmpfloat_with_epsilon (probs[3], 0.25 / 0.9, 1e-6);
    g_assert_cmpfloat_with_epsilon (probs[0], 0.15 / 0.9, 1e-6);
    g_assert_cmpfloat (probs[2], ==, 0.0f);
  }
  {
    /* Temperature 2: p ∝ p0^(1/2). */
    g_autoptr (HoneSampler) s = make (2.0f, 0, 1.0f, 0.0f, 4, 1);
    double z = sqrt (0.15) + sqrt (0.5) + sqrt (0.1) + sqrt (0.25);
    hone_sampler_probabilities (s, logits, probs);
    g_assert_cmpfloat_with_epsilon (probs[1], sqrt (0.5) / z, 1e-6);
    g_assert_cmpfloat_with_epsilon (probs[2], sqrt (0.1) / z, 1e-6);
  }
}

/* A realistic vocabulary: the nucleus path that avoids a full sort, and all
 * filters together, against the full-sort reference. */
/* Top-k selects on the logits: ties at the k-th value go to the lower ids, a
 * NaN is never kept, −inf only when nothing better is left; a +inf leaves
 * only the argmax. */
static void
test_top_k_edges (void)
{
  float logits[] = { 2.0f, NAN, 3.0f, 3.0f, -INFINITY, 3.0f, 1.0f };
  float probs[7];

  {
    g_autoptr (HoneSampler) s = make (1.0f, 2, 1.0f, 0.0f, 7, 1);
    hone_sampler_probabilities (s, logits, probs);
    g_assert_cmpfloat_with_epsilon (probs[2], 0.5, 1e-6);
    g_assert_cmpfloat_with_epsilon (probs[3], 0.5, 1e-6);
    g_assert_cmpfloat (probs[0] + probs[1] + probs[4] + probs[5] + probs[6], ==, 0.0f);
  }
  {
    /* k = 6 of 7: everything but the NaN, the −inf with probability 0 */
    g_autoptr (HoneSampler) s = make (1.0f, 6, 1.0f, 0.0f, 7, 1);
    const double z = 3 * exp (0.0) + exp (-1.0) + exp (-2.0);
    hone_sampler_probabilities (s, logits, probs);
    g_assert_cmpfloat (probs[1], ==, 0.0f);
    g_assert_cmpfloat (probs[4], ==, 0.0f);
    g_assert_cmpfloat_with_epsilon (probs[5], 1.0 / z, 1e-6);
    g_assert_cmpfloat_with_epsilon (probs[0], exp (-1.0) / z, 1e-6);
    g_assert_cmpfloat_with_epsilon (probs[6], exp (-2.0) / z, 1e-6);
  }
  {
    float inf_logits[] = { 1.0f, INFINITY, 5.0f, INFINITY };
    g_autoptr (HoneSampler) s = make (1.0f, 2, 1.0f, 0.0f, 4, 1);
    hone_sampler_probabilities (s, inf_logits, probs);
    g_assert_cmpfloat (probs[1], ==, 1.0f);
    g_assert_cmpint (hone_sampler_sample (s, inf_logits), ==, 1);
  }
}

static void
test_large_vocab (void)
{
  const int n = 49152;
  g_autofree float *logits = g_new (float, n);
  GRand *rand = g_rand_new_with_seed (7);
  struct { float t; int k; float p; float m; } cases[] = {
    { 1.0f, 0, 0.9f, 0.0f },
    { 0.7f, 0, 0.5f, 0.0f },
    { 1.3f, 0, 0.99f, 0.0f },
    { 0.8f, 40, 0.95f, 0.05f },
    { 1.0f, 0, 1.0f, 0.01f },
    { 1.0f, 1000, 1.0f, 0.0f },
    { 2.0f, 0, 0.95f, 0.0f },    /* a flat distribution: a nucleus of most of the vocabulary */
    { 1.5f, 0, 1.0f, 0.0f },     /* pure temperature: nothing cut */
    { 2.0f, 0, 0.9f, 0.001f },
  };

  for (int i = 0; i < n; i++)
    logits[i] = (float) (g_rand_double_range (rand, -4.0, 4.0) + (i % 97 == 0 ? 6.0 : 0.0));
  for (guint c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      g_autoptr (HoneSampler) s = make (cases[c].t, cases[c].k, cases[c].p, cases[c].m, n, 3);
      assert_probs (s, logits, n, cases[c].t, cases[c].k, cases[c].p, cases[c].m);
    }
  g_rand_free (rand);
}

/* ---- seeded draws ------------------------------------------------------------------- */

/* Each draw is the candidate at u of the cumulative mass in best-first order
 * (ties to the lower id), u the seed's next double: hone_sampler_sample, and
 * hone_sampler_sample_with_draw handed that u, against a twin sampler's
 * probabilities sorted here whole. Without top-k the
 * sampler never sorts the vocabulary (it walks buckets of the probabilities'
 * top bits), so this holds that walk to the sorted one's answer. */
static void
test_draw_order (void)
{
  const int n = 49152;
  g_autofree float *logits = g_new (float, n);
  g_autofree float *l = g_new (float, n);
  g_autofree float *probs = g_new (float, n);
  Ref *r = g_new (Ref, n);
  GRand *rand = g_rand_new_with_seed (11);
  struct { float t; int k; float p; float m; } cases[] = {
    { 0.8f, 0, 1.0f, 0.0f },
    { 1.5f, 0, 1.0f, 0.0f },
    { 1.5f, 0, 0.95f, 0.0f },
    { 1.0f, 0, 1.0f, 0.02f },
    { 0.8f, 40, 0.95f, 0.05f },
    { 100.0f, 0, 1.0f, 0.0f },   /* near uniform: the walk goes down to the last bits */
    { 100.0f, 0, 0.9f, 0.0f },
    { 1.0f, 0, 1.0f, 0.0f },     /* all logits equal (the last case): ties only, to the lower id */
    { 1.0f, 0, 0.5f, 0.0f },
  };

  for (int i = 0; i < n; i++)
    logits[i] = (float) (g_rand_double_range (rand, -3.0, 3.0) + (i % 997 == 0 ? 8.0 : 0.0));
  for (int i = 0; i < n; i += 4099)   /* ties */
    logits[i + 1] = logits[i];
  for (guint c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      g_autoptr (HoneSampler) s = make (cases[c].t, cases[c].k, cases[c].p, cases[c].m, n, 99 + c);
      g_autoptr (HoneSampler) twin = make (cases[c].t, cases[c].k, cases[c].p, cases[c].m, n, 99 + c);
      int m = 0, deep = 0;

      if (c == G_N_ELEMENTS (cases) - 2)
        for (int i = 0; i < n; i++)
          logits[i] = 0.25f;

      hone_sampler_probabilities (twin, logits, probs);
      for (int i = 0; i < n; i++)
        if (probs[i] > 0.0f)
          r[m++] = (Ref) { i, probs[i] };
      qsort (r, m, sizeof *r, ref_cmp);
      for (int d = 0; d < 400; d++)
        {
          const double u = hone_sampler_next_double (twin);
          double cum = 0.0;
          int want = r[m - 1].id, at = m - 1;
          gint32 got;

          for (int i = 0; i < m; i++)
            {
              cum += (float) r[i].p;
              if (u < cum)
                {
                  want = r[i].id;
                  at = i;
                  break;
                }
            }
          deep += at >= 64;
          memcpy (l, logits, sizeof (float) * n);
          got = hone_sampler_sample (s, l);
          g_assert_cmpint (got, ==, want);
          memcpy (l, logits, sizeof (float) * n);   /* the device sampler's fallback: the draw handed in */
          g_assert_cmpint (hone_sampler_sample_with_draw (twin, l, u), ==, want);
        }
      /* the cases without top-k reach far into the order (not only the leaders) */
      if (cases[c].k == 0 && cases[c].m == 0.0f)
        g_assert_cmpint (deep, >, 10);
    }
  g_free (r);
  g_rand_free (rand);
}

static void
test_frequencies (void)
{
  const double p[] = { 0.4, 0.25, 0.15, 0.1, 0.07, 0.03 };
  const int k = G_N_ELEMENTS (p), draws = 60000;
  float logits[6];
  int counts[6] = { 0 };
  double chi2 = 0.0;
  g_autoptr (HoneSampler) s = make (1.0f, 0, 1.0f, 0.0f, k, 12345);

  for (int i = 0; i < k; i++)
    logits[i] = (float) log (p[i]) + 1.0f;   /* an offset must not matter */
  for (int d = 0; d < draws; d++)
    {
      float l[6];
      memcpy (l, logits, sizeof l);
      counts[hone_sampler_sample (s, l)]++;
    }
  for (int i = 0; i < k; i++)
    {
      double e = p[i] * draws;
      chi2 += (counts[i] - e) * (counts[i] - e) / e;
    }
  /* df = 5: P(χ² > 20.52) = 0.001. */
  g_test_message ("chi2 = %.2f", chi2);
  g_assert_cmpfloat (chi2, <, 20.52);

  /* With top-k 2 only tokens 0 and 1 appear, 0.4 : 0.25. */
  {
    g_autoptr (HoneSampler) s2 = make (1.0f, 2, 1.0f, 0.0f, k, 99);
    int c2[6] = { 0 };
    double e0 = draws * 0.4 / 0.65, e1 = draws * 0.25 / 0.65;
    for (int d = 0; d < draws; d++)
      {
        float l[6];
        memcpy (l, logits, sizeof l);
        c2[hone_sampler_sample (s2, l)]++;
      }
    g_assert_cmpint (c2[2] + c2[3] + c2[4] + c2[5], ==, 0);
    chi2 = (c2[0] - e0) * (c2[0] - e0) / e0 + (c2[1] - e1) * (c2[1] - e1) / e1;
    g_assert_cmpfloat (chi2, <, 10.83);   /* df = 1, p = 0.001 */
  }
}

static void
test_seed_determinism (void)
{
  float logits[16];
  gint32 a[200], b[200], c[200];

  for (int i = 0; i < 16; i++)
    logits[i] = (float) (i % 5) * 0.3f;
  for (int pass = 0; pass < 3; pass++)
    {
      g_autoptr (HoneSampler) s = make (1.0f, 0, 1.0f, 0.0f, 16, pass == 2 ? 8 : 7);
      gint32 *out = pass == 0 ? a : pass == 1 ? b : c;
      for (int i = 0; i < 200; i++)
        {
          float l[16];
          memcpy (l, logits, sizeof l);
          out[i] = hone_sampler_sample (s, l);
        }
    }
  g_assert_cmpmem (a, sizeof a, b, sizeof b);
  g_assert_true (memcmp (a, c, sizeof a) != 0);

  /* reset() re-seeds: the same sequence again. */
  {
    g_autoptr (HoneSampler) s = make (1.0f, 0, 1.0f, 0.0f, 16, 7);
    for (int i = 0; i < 50; i++)
      {
        float l[16];
        memcpy (l, logits, sizeof l);
        hone_sampler_sample (s, l);
      }
    hone_sampler_reset (s);
    for (int i = 0; i < 200; i++)
      {
        float l[16];
        memcpy (l, logits, sizeof l);
        g_assert_cmpint (hone_sampler_sample (s, l), ==, a[i]);
      }
  }

  /* next_double is uniform in [0, 1): mean and range. */
  {
    g_autoptr (HoneSampler) s = make (1.0f, 0, 1.0f, 0.0f, 16, 1);
    double sum = 0.0;
    for (int i = 0; i < 100000; i++)
      {
        double u = hone_sampler_next_double (s);
        g_assert_cmpfloat (u, >=, 0.0);
        g_assert_cmpfloat (u, <, 1.0);
        sum += u;
      }
    g_assert_cmpfloat_with_epsilon (sum / 100000, 0.5, 0.005);
  }
}

/* ---- penalties ------------------------------------------------------------------------- */

static void
test_penalties (void)
{
  HoneSamplerParams p;
  GError *error = NULL;
  HoneSampler *s;
  float logits[] = { 2.0f, -1.0f, 0.5f, 3.0f };

  hone_sampler_params_init (&p);
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  p.penalty_window = 3;
  s = hone_sampler_new (&p, 4, &error);
  g_assert_no_error (error);

  hone_sampler_accept (s, 3);   /* falls out of the window of 3 */
  hone_sampler_accept (s, 0);
  hone_sampler_accept (s, 1);
  hone_sampler_accept (s, 0);
  hone_sampler_apply_penalties (s, logits);
  /* token 0: count 2, positive logit: 2/2 − 2·0.5 − 0.25 */
  g_assert_cmpfloat_with_epsilon (logits[0], 2.0 / 2.0 - 2 * 0.5 - 0.25, 1e-6);
  /* token 1: count 1, negative logit: −1·2 − 0.5 − 0.25 */
  g_assert_cmpfloat_with_epsilon (logits[1], -1.0 * 2.0 - 0.5 - 0.25, 1e-6);
  g_assert_cmpfloat (logits[2], ==, 0.5f);
  g_assert_cmpfloat (logits[3], ==, 3.0f);

  /* Applying twice applies twice (no hidden state left behind). */
  {
    float again[] = { 2.0f, -1.0f, 0.5f, 3.0f };
    hone_sampler_apply_penalties (s, again);
    g_assert_cmpfloat_with_epsilon (again[0], -0.25, 1e-6);
  }
  /* Greedy with penalties: token 3 wins now that 0 is penalised. */
  hone_sampler_free (s);
  p.temperature = 0.0f;
  p.repeat_penalty = 4.0f;
  p.frequency_penalty = 0.0f;
  p.presence_penalty = 0.0f;
  s = hone_sampler_new (&p, 4, &error);
  {
    float l[] = { 3.5f, 0.0f, 0.0f, 3.0f };
    hone_sampler_accept (s, 0);
    g_assert_cmpint (hone_sampler_sample (s, l), ==, 3);
  }
  hone_sampler_free (s);
}

/* ---- stop strings -------------------------------------------------------------------- */

static char *
push (HoneStopMatcher *m, const char *text, gboolean *stopped)
{
  return hone_stop_matcher_push (m, text, stopped);
}

static void
test_stop_strings (void)
{
  const char *stops[] = { "</s>", "STOP", "", NULL };
  gboolean stopped = FALSE;

  {
    g_autoptr (HoneStopMatcher) m = hone_stop_matcher_new (stops);
    g_autofree char *a = push (m, "Hello </", &stopped);
    g_autofree char *b = NULL;
    g_autofree char *c = NULL;
    g_assert_cmpstr (a, ==, "Hello ");
    g_assert_false (stopped);
    b = push (m, "s> more", &stopped);
    g_assert_cmpstr (b, ==, "");
    g_assert_true (stopped);
    c = push (m, "x", &stopped);
    g_assert_cmpstr (c, ==, "");
    g_assert_true (stopped);
  }
  {
    /* Split over three tokens, text before it kept. */
    g_autoptr (HoneStopMatcher) m = hone_stop_matcher_new (stops);
    g_autofree char *a = push (m, "abcS", &stopped);
    g_autofree char *b = push (m, "T", &stopped);
    g_autofree char *c = push (m, "OPxyz", &stopped);
    g_assert_cmpstr (a, ==, "abc");
    g_assert_cmpstr (b, ==, "");
    g_assert_cmpstr (c, ==, "");
    g_assert_true (stopped);
  }
  {
    /* A false start is released once it cannot match. */
    g_autoptr (HoneStopMatcher) m = hone_stop_matcher_new (stops);
    g_autofree char *a = push (m, "a <", &stopped);
    g_autofree char *b = push (m, "b>", &stopped);
    g_autofree char *c = push (m, " ST", &stopped);
    g_autofree char *d = hone_stop_matcher_flush (m);
    g_assert_cmpstr (a, ==, "a ");
    g_assert_cmpstr (b, ==, "<b>");
    g_assert_cmpstr (c, ==, " ");
    g_assert_false (stopped);
    g_assert_cmpstr (d, ==, "ST");
  }
  {
    /* The earliest of two stops wins; multibyte stop strings. */
    const char *s2[] = { "fin", "é!", NULL };
    g_autoptr (HoneStopMatcher) m = hone_stop_matcher_new (s2);
    g_autofree char *a = push (m, "café", &stopped);
    g_autofree char *b = push (m, "! fin", &stopped);
    g_assert_cmpstr (a, ==, "caf");
    g_assert_cmpstr (b, ==, "");
    g_assert_true (stopped);
  }
  {
    g_autoptr (HoneStopMatcher) m = hone_stop_matcher_new (NULL);
    g_autofree char *a = push (m, "anything </s>", &stopped);
    g_assert_cmpstr (a, ==, "anything </s>");
    g_assert_false (stopped);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/sampler/validate", test_validate);
  g_test_add_func ("/sampler/greedy", test_greedy);
  g_test_add_func ("/sampler/top-k", test_top_k);
  g_test_add_func ("/sampler/top-k-edges", test_top_k_edges);
  g_test_add_func ("/sampler/top-p-min-p-temperature", test_top_p_min_p);
  g_test_add_func ("/sampler/large-vocab", test_large_vocab);
  g_test_add_func ("/sampler/frequencies", test_frequencies);
  g_test_add_func ("/sampler/draw-order", test_draw_order);
  g_test_add_func ("/sampler/seed", test_seed_determinism);
  g_test_add_func ("/sampler/penalties", test_penalties);
  g_test_add_func ("/sampler/stop-strings", test_stop_strings);
  return g_test_run ();
}
