/* hone-quant-eval.h — how much a quantized model differs from the original.
 *
 * Runs every model through the real CPU backend (forward with all_logits)
 * over the same samples and reports, per model: perplexity of the next token,
 * and against the first model (the reference) the mean KL divergence
 * KL(p_ref ‖ p) of the next-token distributions and the fraction of
 * positions whose most likely token (top-1) agrees.
 */
#pragma once

#include <glib.h>
#include <gio/gio.h>
#include "hone-model.h"

G_BEGIN_DECLS

typedef struct {
  double ppl;           /* exp(mean NLL) over the scored tokens */
  double kl;            /* mean KL(p_ref ‖ p) in nats; 0 for the reference */
  double top1;          /* fraction of positions with the reference's argmax; 1 for the reference */
  gint64 n_tokens;      /* tokens scored (seq_len − 1 per sample) */
} HoneQuantEvalScore;

/* models[0] is the reference. samples: n_samples × seq_len token ids.
 * n_threads 0 = all cores. out: n_models scores. */
gboolean hone_quant_eval (HoneModel *const *models, int n_models, const gint32 *samples, int n_samples,
                          int seq_len, int n_threads, HoneQuantEvalScore *out,
                          GCancellable *cancellable, GError **error);

/* The quality in words (translated), from the held-out scores of the
 * original, plain rounding (RTN) and AWQ — a grade by AWQ's perplexity
 * increase and how much of RTN's loss AWQ avoids — and, when @generic (the
 * same three on generic text) is given, a warning where AWQ lost more than RTN
 * there: the calibration fitted the documents rather than general use.
 * *good: the grade is good and nothing warns. */
char    *hone_quant_eval_verdict (const HoneQuantEvalScore heldout[3], const HoneQuantEvalScore *generic,
                                  gboolean *good);

G_END_DECLS
