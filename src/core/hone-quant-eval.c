/* hone-quant-eval.c — perplexity, KL and top-1 agreement through the CPU backend. */
#include "hone-quant-eval.h"

#include <math.h>
#include <string.h>
#include "hone-backend.h"
#include "hone-error.h"
#include "hone-i18n.h"

/* log-softmax of n logits into lp (double for the sums). */
static void
log_softmax (const float *x, int n, double *lp)
{
  double mx = -INFINITY, sum = 0;
  for (int i = 0; i < n; i++)
    mx = MAX (mx, (double) x[i]);
  for (int i = 0; i < n; i++)
    sum += exp ((double) x[i] - mx);
  sum = log (sum) + mx;
  for (int i = 0; i < n; i++)
    lp[i] = (double) x[i] - sum;
}

static int
argmax (const float *x, int n)
{
  int best = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[best])
      best = i;
  return best;
}

gboolean
hone_quant_eval (HoneModel *const *models, int n_models, const gint32 *samples, int n_samples, int seq_len,
                 int n_threads, HoneQuantEvalScore *out, GCancellable *cancellable, GError **error)
{
  HoneBackend **be = g_new0 (HoneBackend *, n_models);
  float **logits = g_new0 (float *, n_models);
  double *nll = g_new0 (double, n_models), *kl = g_new0 (double, n_models);
  gint64 *agree = g_new0 (gint64, n_models);
  int vocab = models[0]->config.vocab;
  double *lp_ref = g_new (double, vocab), *lp = g_new (double, vocab);
  gint64 n_scored = 0;
  gboolean ok = TRUE;

  if (n_samples <= 0 || seq_len < 2)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT, _("Nothing to evaluate"));
      ok = FALSE;
      goto out;
    }
  for (int m = 0; m < n_models && ok; m++)
    {
      HoneBackendOptions opt = { .n_threads = n_threads, .max_context = seq_len };
      if (models[m]->config.vocab != vocab)
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_SHAPE_MISMATCH, _("The models have different vocabularies"));
          ok = FALSE;
          break;
        }
      be[m] = hone_cpu_backend_new (error);
      ok = be[m] != NULL && be[m]->klass->load (be[m], models[m], &opt, NULL, NULL, cancellable, error);
      logits[m] = g_new (float, (gsize) seq_len * vocab);
    }
  for (int s = 0; s < n_samples && ok; s++)
    {
      const gint32 *tok = samples + (gsize) s * seq_len;
      for (int m = 0; m < n_models && ok; m++)
        {
          int seq = be[m]->klass->seq_new (be[m], error);
          HoneBatch b = { seq, tok, seq_len, TRUE, logits[m] };
          ok = seq >= 0 && hone_backend_forward (be[m], &b, cancellable, error);
          if (seq >= 0)
            be[m]->klass->seq_free (be[m], seq);
        }
      for (int t = 0; t + 1 < seq_len && ok; t++)
        {
          const float *ref = logits[0] + (gsize) t * vocab;
          int ref_top = argmax (ref, vocab);
          log_softmax (ref, vocab, lp_ref);
          for (int m = 0; m < n_models; m++)
            {
              const float *x = logits[m] + (gsize) t * vocab;
              double k = 0;
              if (m > 0)
                {
                  log_softmax (x, vocab, lp);
                  for (int v = 0; v < vocab; v++)
                    k += exp (lp_ref[v]) * (lp_ref[v] - lp[v]);
                }
              else
                memcpy (lp, lp_ref, vocab * sizeof (double));
              nll[m] -= lp[tok[t + 1]];
              kl[m] += k;
              agree[m] += argmax (x, vocab) == ref_top;
            }
          n_scored++;
        }
    }
  if (ok)
    for (int m = 0; m < n_models; m++)
      {
        out[m].ppl = exp (nll[m] / (double) n_scored);
        out[m].kl = kl[m] / (double) n_scored;
        out[m].top1 = (double) agree[m] / (double) n_scored;
        out[m].n_tokens = n_scored;
      }
out:
  for (int m = 0; m < n_models; m++)
    {
      if (be[m])
        {
          be[m]->klass->unload (be[m]);
          hone_backend_free (be[m]);
        }
      g_free (logits[m]);
    }
  g_free (be);
  g_free (logits);
  g_free (nll);
  g_free (kl);
  g_free (agree);
  g_free (lp_ref);
  g_free (lp);
  return ok;
}

/* Perplexity increase of score @i over the reference (score 0). */
static double
ppl_rise (const HoneQuantEvalScore *sc, int i)
{
  return sc[i].ppl / sc[0].ppl - 1.0;
}

char *
hone_quant_eval_verdict (const HoneQuantEvalScore heldout[3], const HoneQuantEvalScore *generic, gboolean *good)
{
  const double d_awq = ppl_rise (heldout, 2), d_rtn = ppl_rise (heldout, 1);
  const char *words;
  GString *s;

  *good = FALSE;
  if (!isfinite (d_awq) || !isfinite (d_rtn))
    return g_strdup (_("The quality could not be measured"));
  if (d_awq < 0.02)
    {
      words = _("Excellent: practically the same quality as the original.");
      *good = TRUE;
    }
  else if (d_awq < 0.05)
    {
      words = _("Good: a small loss of quality that is hard to notice in use.");
      *good = TRUE;
    }
  else if (d_awq < 0.15)
    words = _("Fair: a noticeable loss of quality. More, or more typical, documents or a smaller group size may help.");
  else
    words = _("Poor: a large loss of quality. This model does not quantize well to 4 bits with these settings.");
  s = g_string_new (words);
  if (d_rtn > 0.0005 && d_awq <= 0.0)
    {
      g_string_append_c (s, ' ');
      g_string_append (s, _("AWQ avoids all of the loss of plain rounding."));
    }
  else if (d_rtn > 0.0005 && d_awq < d_rtn)
    {
      g_string_append_c (s, ' ');
      /* Translators: how much of plain rounding's perplexity loss AWQ avoids */
      g_string_append_printf (s, _("AWQ avoids %.0f %% of the loss of plain rounding."),
                              100.0 * (1.0 - MAX (d_awq, 0.0) / d_rtn));
    }
  else if (d_awq > d_rtn + 0.0005)
    {
      g_string_append_c (s, ' ');
      g_string_append (s, _("Plain rounding did better here: the documents may not be typical of this model's use."));
    }
  if (generic != NULL)
    {
      const double g_awq = ppl_rise (generic, 2), g_rtn = ppl_rise (generic, 1);
      /* the scales fitted the documents at the cost of everything else: say so, whatever the held-out grade */
      if (isfinite (g_awq) && isfinite (g_rtn) && g_awq > g_rtn + 0.0005 && g_awq > 0.02)
        {
          g_string_append_c (s, ' ');
          /* Translators: the two figures are perplexity increases in percent, AWQ's then plain rounding's */
          g_string_append_printf (s, _("On generic text AWQ lost more than plain rounding (+%.1f %% against "
                                       "+%.1f %%): the calibration fitted these documents more than general use. "
                                       "More calibration samples, or more varied documents, help."),
                                  100.0 * g_awq, 100.0 * g_rtn);
          *good = FALSE;
        }
    }
  return g_string_free (s, FALSE);
}
