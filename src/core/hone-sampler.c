/* hone-sampler.c — penalties, temperature, top-k/top-p/min-p, seeded draws,
 * and the stop-string matcher. */
#include "hone-sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hone-error.h"
#include "hone-i18n.h"
#include "cpu/hone-cpu-ops.h"

/* ---- params ---------------------------------------------------------------- */

G_DEFINE_BOXED_TYPE (HoneSamplerParams, hone_sampler_params,
                     hone_sampler_params_copy, hone_sampler_params_free)

void
hone_sampler_params_init (HoneSamplerParams *params)
{
  memset (params, 0, sizeof *params);
  params->temperature = 0.8f;
  params->top_k = 40;
  params->top_p = 0.95f;
  params->min_p = 0.05f;
  params->repeat_penalty = 1.0f;
  params->presence_penalty = 0.0f;
  params->frequency_penalty = 0.0f;
  params->penalty_window = 64;
  params->seed = HONE_SAMPLER_SEED_RANDOM;
  params->max_tokens = 0;
  params->stop = NULL;
  params->ignore_eog = FALSE;
}

void
hone_sampler_params_init_greedy (HoneSamplerParams *params)
{
  hone_sampler_params_init (params);
  params->temperature = 0.0f;
  params->top_k = 0;
  params->top_p = 1.0f;
  params->min_p = 0.0f;
  params->penalty_window = 0;
  params->seed = 0;
}

HoneSamplerParams *
hone_sampler_params_new (void)
{
  HoneSamplerParams *p = g_new0 (HoneSamplerParams, 1);
  hone_sampler_params_init (p);
  return p;
}

HoneSamplerParams *
hone_sampler_params_copy (const HoneSamplerParams *params)
{
  HoneSamplerParams *p = g_new0 (HoneSamplerParams, 1);
  *p = *params;
  p->stop = g_strdupv (params->stop);
  return p;
}

void
hone_sampler_params_clear (HoneSamplerParams *params)
{
  g_clear_pointer (&params->stop, g_strfreev);
}

void
hone_sampler_params_free (HoneSamplerParams *params)
{
  if (params == NULL)
    return;
  hone_sampler_params_clear (params);
  g_free (params);
}

void
hone_sampler_params_set_stop (HoneSamplerParams *params, const char *const *stop)
{
  g_strfreev (params->stop);
  params->stop = g_strdupv ((char **) stop);
}

static gboolean
invalid (GError **error, const char *name, const char *requirement, double value)
{
  /* TRANSLATORS: e.g. "invalid sampling parameter top-p: must be in (0, 1], got 1.5" */
  g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
               _("invalid sampling parameter %s: must be %s, got %g"), name, requirement, value);
  return FALSE;
}

gboolean
hone_sampler_params_validate (const HoneSamplerParams *p, GError **error)
{
  if (!isfinite (p->temperature) || p->temperature < 0.0f)
    return invalid (error, "temperature", _("a finite number ≥ 0"), p->temperature);
  if (p->top_k < 0)
    return invalid (error, "top-k", _("≥ 0"), p->top_k);
  if (!isfinite (p->top_p) || p->top_p <= 0.0f || p->top_p > 1.0f)
    return invalid (error, "top-p", _("in (0, 1]"), p->top_p);
  if (!isfinite (p->min_p) || p->min_p < 0.0f || p->min_p >= 1.0f)
    return invalid (error, "min-p", _("in [0, 1)"), p->min_p);
  if (!isfinite (p->repeat_penalty) || p->repeat_penalty <= 0.0f)
    return invalid (error, "repeat-penalty", _("a finite number > 0"), p->repeat_penalty);
  if (!isfinite (p->presence_penalty))
    return invalid (error, "presence-penalty", _("finite"), p->presence_penalty);
  if (!isfinite (p->frequency_penalty))
    return invalid (error, "frequency-penalty", _("finite"), p->frequency_penalty);
  if (p->penalty_window < 0)
    return invalid (error, "penalty-window", _("≥ 0"), p->penalty_window);
  if (p->max_tokens < 0)
    return invalid (error, "max-tokens", _("≥ 0"), p->max_tokens);
  return TRUE;
}

/* ---- PRNG: xoshiro256** seeded through splitmix64 -------------------------- */

typedef struct {
  guint64 s[4];
} Xoshiro;

static guint64
splitmix64 (guint64 *x)
{
  guint64 z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static void
xoshiro_seed (Xoshiro *r, guint64 seed)
{
  guint64 x = seed;
  for (int i = 0; i < 4; i++)
    r->s[i] = splitmix64 (&x);
}

static inline guint64
rotl (guint64 x, int k)
{
  return (x << k) | (x >> (64 - k));
}

static guint64
xoshiro_next (Xoshiro *r)
{
  guint64 *s = r->s;
  guint64 result = rotl (s[1] * 5, 7) * 9;
  guint64 t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl (s[3], 45);
  return result;
}

/* ---- the sampler ------------------------------------------------------------- */

typedef struct {
  gint32 id;
  float p;
} Candidate;

struct _HoneSampler {
  HoneSamplerParams params;
  int n_vocab;
  Xoshiro rng;
  gint32 *window;        /* ring of the last penalty_window accepted tokens */
  int window_len;
  int window_pos;
  guint16 *counts;       /* scratch: per-token count in the window (n_vocab) */
  float *scratch;        /* n_vocab floats */
  float *exps;           /* n_vocab floats: e^((l − max) / T) without top-k */
  double *bucket_mass;   /* candidate_at's 8,192 bucket sums */
  gint32 *ids;           /* n_vocab: the candidates' ids without top-k */
  Candidate *side;       /* n_vocab: candidate_at's bucket */
  Candidate *cands;      /* n_vocab candidates */
};

HoneSampler *
hone_sampler_new (const HoneSamplerParams *params, int n_vocab, GError **error)
{
  HoneSampler *s;

  if (!hone_sampler_params_validate (params, error))
    return NULL;
  if (n_vocab <= 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("invalid vocabulary size %d"), n_vocab);
      return NULL;
    }
  s = g_new0 (HoneSampler, 1);
  s->params = *params;
  s->params.stop = g_strdupv (params->stop);
  s->n_vocab = n_vocab;
  s->window = g_new0 (gint32, MAX (params->penalty_window, 1));
  s->counts = g_new0 (guint16, n_vocab);
  s->scratch = g_new (float, n_vocab);
  s->exps = g_new (float, n_vocab);
  s->bucket_mass = g_new (double, 1 << 13);
  s->ids = g_new (gint32, n_vocab);
  s->side = g_new (Candidate, n_vocab);
  s->cands = g_new (Candidate, n_vocab);
  hone_sampler_reset (s);
  return s;
}

void
hone_sampler_free (HoneSampler *s)
{
  if (s == NULL)
    return;
  hone_sampler_params_clear (&s->params);
  g_free (s->window);
  g_free (s->counts);
  g_free (s->scratch);
  g_free (s->exps);
  g_free (s->bucket_mass);
  g_free (s->ids);
  g_free (s->side);
  g_free (s->cands);
  g_free (s);
}

const HoneSamplerParams *
hone_sampler_get_params (const HoneSampler *s)
{
  return &s->params;
}

void
hone_sampler_reset (HoneSampler *s)
{
  guint64 seed = s->params.seed;

  if (seed == HONE_SAMPLER_SEED_RANDOM)
    seed = ((guint64) g_random_int () << 32) ^ g_random_int () ^ (guint64) g_get_monotonic_time ();
  xoshiro_seed (&s->rng, seed);
  s->window_len = 0;
  s->window_pos = 0;
}

void
hone_sampler_accept (HoneSampler *s, gint32 token)
{
  int cap = s->params.penalty_window;

  if (cap <= 0)
    return;
  s->window[s->window_pos] = token;
  s->window_pos = (s->window_pos + 1) % cap;
  if (s->window_len < cap)
    s->window_len++;
}

double
hone_sampler_next_double (HoneSampler *s)
{
  return (double) (xoshiro_next (&s->rng) >> 11) * (1.0 / 9007199254740992.0);
}

gint32
hone_argmax (const float *values, int n)
{
  gint32 best = 0;
  for (int i = 1; i < n; i++)
    if (values[i] > values[best])
      best = i;
  return best;
}

void
hone_sampler_apply_penalties (HoneSampler *s, float *logits)
{
  const HoneSamplerParams *p = &s->params;
  gboolean any = p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;

  if (!any || s->window_len == 0)
    return;
  for (int i = 0; i < s->window_len; i++)
    {
      gint32 t = s->window[i];
      if (t >= 0 && t < s->n_vocab && s->counts[t] < G_MAXUINT16)
        s->counts[t]++;
    }
  /* Each distinct token is penalised once, then its count is cleared so the
   * scratch array is all zeros again for the next call. */
  for (int i = 0; i < s->window_len; i++)
    {
      gint32 t = s->window[i];
      float l;
      int c;

      if (t < 0 || t >= s->n_vocab || s->counts[t] == 0)
        continue;
      c = s->counts[t];
      l = logits[t];
      l = l > 0.0f ? l / p->repeat_penalty : l * p->repeat_penalty;
      l -= (float) c * p->frequency_penalty + p->presence_penalty;
      logits[t] = l;
      s->counts[t] = 0;
    }
}

static int
cand_cmp_desc (const void *a, const void *b)
{
  const Candidate *x = a, *y = b;
  if (x->p > y->p)
    return -1;
  if (x->p < y->p)
    return 1;
  return (x->id > y->id) - (x->id < y->id);   /* ties: lower id first, deterministic */
}

/* Min-heap on (p, then higher id = "smaller") for top-k selection. */
static gboolean
cand_less (const Candidate *a, const Candidate *b)
{
  return cand_cmp_desc (a, b) > 0;
}

static void
heap_sift_down (Candidate *h, int n, int i)
{
  for (;;)
    {
      int l = 2 * i + 1, r = l + 1, m = i;
      Candidate tmp;
      if (l < n && cand_less (&h[l], &h[m]))
        m = l;
      if (r < n && cand_less (&h[r], &h[m]))
        m = r;
      if (m == i)
        return;
      tmp = h[i];
      h[i] = h[m];
      h[m] = tmp;
      i = m;
    }
}

/* The k best logits of l[0..n) (0 < k < n; NaN as −inf, ties to the lower
 * id) into c[0..k), sorted best first, their logits in .p. A min-heap of k;
 * a later index never wins a tie, so only a logit above the heap's root gets
 * in, and the vector scan for the next one (hone_cpu_first_above) skips the
 * rest 16 at a time. */
static int
select_top_k_logits (Candidate *c, const float *l, int n, int k)
{
  float root;

  for (int i = 0; i < k; i++)
    {
      c[i].id = i;
      c[i].p = isnan (l[i]) ? -INFINITY : l[i];
    }
  for (int i = k / 2 - 1; i >= 0; i--)
    heap_sift_down (c, k, i);
  root = c[0].p;
  for (int i = k; (i += hone_cpu_first_above (l + i, n - i, root)) < n; i++)   /* never a NaN */
    {
      c[0].id = i;
      c[0].p = l[i];
      heap_sift_down (c, k, 0);
      root = c[0].p;
    }
  qsort (c, k, sizeof *c, cand_cmp_desc);
  return k;
}

/* ---- best-first order without sorting: a radix walk over a float's bits -------
 * A positive float's bits order as its value. candidate_at sums c's
 * probabilities per bucket of their top 13 bits (exponent and 5 mantissa
 * bits: values within 3.1 % of each other), walks the buckets best first to
 * the one where the running sum reaches the target, and goes on inside it
 * with the next 13 bits, then the last 5, until a few candidates are left;
 * only those are sorted. So the result is a full sort's walk's but where the
 * sum lies within rounding of a boundary (the sums before the last bucket are
 * taken in another order), in three passes at most however flat the
 * distribution. */

static inline guint32
float_bits (float p)
{
  guint32 bits;

  memcpy (&bits, &p, sizeof bits);
  return bits;
}

/* The candidate of c[0..n) (n ≥ 1) at which the running sum of p in
 * best-first order first reaches target (≥ it where inclusive, past it
 * otherwise), or the last one in that order. */
static Candidate
candidate_at (HoneSampler *s, const Candidate *c, int n, double target, gboolean inclusive)
{
  static const int shift[] = { 18, 5, 0 }, width[] = { 13, 13, 5 };
  Candidate *side = s->side;
  double *mass = s->bucket_mass, above = 0.0;
  int level;

  for (level = 0; level < 3 && n > 16; level++)
    {
      const guint32 mask = (1u << width[level]) - 1;
      int lo = (int) mask, hi = 0, b, m = 0;

      memset (mass, 0, sizeof (double) * (mask + 1));
      for (int i = 0; i < n; i++)
        {
          const int k = (int) (float_bits (c[i].p) >> shift[level] & mask);
          mass[k] += c[i].p;
          lo = MIN (lo, k);
          hi = MAX (hi, k);
        }
      for (b = hi; b > lo; b--)
        {
          const double next = above + mass[b];
          if (inclusive ? next >= target : next > target)
            break;
          above = next;
        }
      for (int i = 0; i < n; i++)   /* in place from the second level on: m ≤ i */
        if ((int) (float_bits (c[i].p) >> shift[level] & mask) == b)
          side[m++] = c[i];
      c = side;
      n = m;
    }
  /* past the last level every value is the same and c keeps ascending ids */
  if (level < 3)
    {
      if (c != side)
        memcpy (side, c, sizeof *c * n);
      qsort (side, n, sizeof *side, cand_cmp_desc);
      c = side;
    }
  for (int i = 0; i < n; i++)
    {
      above += c[i].p;
      if (inclusive ? above >= target : above > target)
        return c[i];
    }
  return c[n - 1];
}

/* Builds the final candidate list (probabilities normalised) from the
 * logits. Returns the count; *sorted says whether the list is sorted best
 * first — with top-k it is; without, the vocabulary's candidates are never
 * sorted whole (candidate_at finds top-p's cut and the draw). */
static int
build_candidates (HoneSampler *s, const float *logits, gboolean *sorted)
{
  const HoneSamplerParams *p = &s->params;
  Candidate *c = s->cands;
  int n = s->n_vocab;
  float max_l;
  double mass = 0.0;

  *sorted = p->top_k > 0 && p->top_k < s->n_vocab;
  /* With top-k, select first, on the logits themselves (the order of their
   * probabilities, but for float ties; ties to the lower id), and take only the
   * k exponentials: everything after top-k renormalises over the k kept, so the
   * whole vocabulary's softmax sum cancels and is never needed (a 49,152
   * vocabulary: 297 -> 24 µs a token on a 2-vCPU VM, RESULTS.md "Session 39"). */
  if (*sorted)
    {
      n = select_top_k_logits (c, logits, n, p->top_k);
      max_l = c[0].p;
    }
  else
    max_l = hone_cpu_max (logits, n);
  if (!isfinite (max_l))
    {
      /* All -inf (or NaN), or a +inf: nothing to choose from but the argmax. */
      c[0].id = hone_argmax (logits, s->n_vocab);
      c[0].p = 1.0f;
      *sorted = TRUE;
      return 1;
    }
  if (*sorted)
    {
      for (int i = 0; i < n; i++)
        {
          c[i].p = expf ((c[i].p - max_l) / p->temperature);
          mass += c[i].p;
        }
      if (p->top_p < 1.0f)   /* on the cumulative mass of what top-k kept, renormalised */
        {
          double cum = 0.0;
          for (int i = 0; i < n; i++)
            {
              cum += c[i].p / mass;
              if (cum >= p->top_p)
                {
                  n = i + 1;
                  break;
                }
            }
        }
      if (p->min_p > 0.0f)
        {
          const float floor_p = c[0].p * p->min_p;
          int kept = 1;
          while (kept < n && c[kept].p >= floor_p)
            kept++;
          n = kept;
        }
    }
  else
    {
      /* Without top-k: e^((l − max) / T) over the vocabulary (vector code,
       * hone-cpu-ops), then only what can be kept becomes a candidate: the
       * tokens whose e reaches min-p (e of the best is 1), and for top-p, where
       * the tokens with e ≥ 1e-3 already hold top_p of the mass, only those
       * (the nucleus is a prefix of the best-first order, so it lies among them). */
      float *e = s->exps;
      const double sum = hone_cpu_exp_sum (logits, e, n, max_l, 1.0f / p->temperature);
      const double inv_sum = 1.0 / sum;
      const float floor_e = p->min_p > 0.0f ? p->min_p * 0.999f : 0.0f;   /* min-p's exact cut comes later */
      gint32 *ids = s->ids;
      int m = -1;

      if (p->top_p < 1.0f && floor_e < 1e-3f)
        {
          double kept_mass = 0.0;
          m = hone_cpu_indices_above (e, n, nextafterf (1e-3f, 0.0f), ids);   /* e ≥ 1e-3 */
          for (int j = 0; j < m; j++)
            kept_mass += e[ids[j]];
          if (kept_mass < p->top_p * sum)
            m = -1;   /* not enough: everything min-p keeps */
        }
      if (m < 0)
        m = hone_cpu_indices_above (e, n, floor_e > 0.0f ? nextafterf (floor_e, 0.0f) : 0.0f, ids);
      for (int j = 0; j < m; j++)
        {
          c[j].id = ids[j];
          c[j].p = (float) (e[ids[j]] * inv_sum);
        }
      n = m;
      if (p->top_p < 1.0f)   /* the shortest best-first prefix holding top_p (of the whole mass, 1) */
        {
          const Candidate last = candidate_at (s, c, n, p->top_p, TRUE);
          m = 0;
          for (int i = 0; i < n; i++)   /* what comes before it in that order, and it: in any order */
            {
              c[m] = c[i];
              m += (c[i].p > last.p) | ((c[i].p == last.p) & (c[i].id <= last.id));   /* no branch: coin flips when flat */
            }
          n = m;
        }
      if (p->min_p > 0.0f)   /* p ≥ min-p of the best: in any order */
        {
          float floor_p = 0.0f;
          m = 0;
          for (int i = 0; i < n; i++)
            floor_p = MAX (floor_p, c[i].p);
          floor_p *= p->min_p;
          for (int i = 0; i < n; i++)
            if (c[i].p >= floor_p)
              c[m++] = c[i];
          n = m;
        }
      if (p->top_p >= 1.0f && p->min_p <= 0.0f)
        return n;   /* nothing was cut: normalised already */
    }
  mass = 0.0;
  for (int i = 0; i < n; i++)
    mass += c[i].p;
  for (int i = 0; i < n; i++)
    c[i].p = (float) (c[i].p / mass);
  return n;
}

void
hone_sampler_probabilities (HoneSampler *s, const float *logits, float *probs)
{
  gboolean sorted;
  int n;

  memcpy (s->scratch, logits, sizeof (float) * s->n_vocab);
  hone_sampler_apply_penalties (s, s->scratch);
  memset (probs, 0, sizeof (float) * s->n_vocab);
  if (s->params.temperature == 0.0f)
    {
      probs[hone_argmax (s->scratch, s->n_vocab)] = 1.0f;
      return;
    }
  n = build_candidates (s, s->scratch, &sorted);
  for (int i = 0; i < n; i++)
    probs[s->cands[i].id] = s->cands[i].p;
}

/* The candidate at u of the list build_candidates made (n of them). */
static gint32
draw_at (HoneSampler *s, int n, gboolean sorted, double u)
{
  double cum = 0.0;

  if (!sorted)
    return candidate_at (s, s->cands, n, u, FALSE).id;
  for (int i = 0; i < n; i++)
    {
      cum += s->cands[i].p;
      if (u < cum)
        return s->cands[i].id;
    }
  return s->cands[n - 1].id;   /* rounding: u beyond the float sum */
}

gint32
hone_sampler_sample_with_draw (HoneSampler *s, float *logits, double u)
{
  gboolean sorted;
  int n;

  hone_sampler_apply_penalties (s, logits);
  if (s->params.temperature == 0.0f)
    return hone_argmax (logits, s->n_vocab);
  n = build_candidates (s, logits, &sorted);
  return draw_at (s, n, sorted, u);
}

gint32
hone_sampler_sample (HoneSampler *s, float *logits)
{
  /* greedy takes no draw from the sequence */
  return hone_sampler_sample_with_draw (s, logits, s->params.temperature == 0.0f ? 0.0 : hone_sampler_next_double (s));
}

/* ---- stop strings ------------------------------------------------------------ */

struct _HoneStopMatcher {
  GPtrArray *stops;      /* char*, non-empty */
  GString *pending;      /* decoded text not yet returned */
  gboolean stopped;
};

HoneStopMatcher *
hone_stop_matcher_new (const char *const *stop)
{
  HoneStopMatcher *m = g_new0 (HoneStopMatcher, 1);
  m->stops = g_ptr_array_new_with_free_func (g_free);
  m->pending = g_string_new (NULL);
  for (guint i = 0; stop != NULL && stop[i] != NULL; i++)
    if (stop[i][0] != '\0')
      g_ptr_array_add (m->stops, g_strdup (stop[i]));
  return m;
}

void
hone_stop_matcher_free (HoneStopMatcher *m)
{
  if (m == NULL)
    return;
  g_ptr_array_unref (m->stops);
  g_string_free (m->pending, TRUE);
  g_free (m);
}

char *
hone_stop_matcher_push (HoneStopMatcher *m, const char *text, gboolean *stopped)
{
  gsize len, hold = 0;
  const char *first = NULL;
  char *out;

  if (stopped != NULL)
    *stopped = m->stopped;
  if (m->stopped)
    return g_strdup ("");
  g_string_append (m->pending, text);
  len = m->pending->len;

  /* Earliest complete stop string wins. */
  for (guint i = 0; i < m->stops->len; i++)
    {
      const char *hit = strstr (m->pending->str, g_ptr_array_index (m->stops, i));
      if (hit != NULL && (first == NULL || hit < first))
        first = hit;
    }
  if (first != NULL)
    {
      out = g_strndup (m->pending->str, first - m->pending->str);
      g_string_truncate (m->pending, 0);
      m->stopped = TRUE;
      if (stopped != NULL)
        *stopped = TRUE;
      return out;
    }

  /* Hold back the longest tail that could still grow into a stop string. */
  for (guint i = 0; i < m->stops->len; i++)
    {
      const char *st = g_ptr_array_index (m->stops, i);
      gsize sl = strlen (st);
      for (gsize k = MIN (sl - 1, len); k > hold; k--)
        if (memcmp (m->pending->str + len - k, st, k) == 0)
          {
            hold = k;
            break;
          }
    }
  out = g_strndup (m->pending->str, len - hold);
  g_string_erase (m->pending, 0, len - hold);
  return out;
}

char *
hone_stop_matcher_flush (HoneStopMatcher *m)
{
  char *out = g_strndup (m->pending->str, m->pending->len);
  g_string_truncate (m->pending, 0);
  return out;
}
