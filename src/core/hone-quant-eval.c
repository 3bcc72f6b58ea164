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
