/* hone-sampler.h — turning logits into the next token, and stop strings.
 *
 * The sampler is a plain struct used on the engine thread. Order of the
 * pipeline (as llama.cpp's default chain): penalties over the recent window →
 * temperature 0 ? argmax : (top-k → softmax(logits / T) → top-p → min-p →
 * renormalise → draw). Draws use the sampler's own PRNG (xoshiro256**), seeded
 * from params.seed, so a seed gives the same tokens on every machine.
 *
 * HoneStopMatcher finds stop strings in the decoded text across token
 * boundaries and holds back the text that might still become a stop string,
 * so the caller never shows (nor returns) any part of a stop string.
 */
#pragma once

#include <glib.h>
#include <glib-object.h>

G_BEGIN_DECLS

/* params.seed value: take a seed from the system clock/entropy. */
#define HONE_SAMPLER_SEED_RANDOM G_MAXUINT64

typedef struct {
  float temperature;        /* >= 0; 0 = greedy (argmax). Default 0.8 */
  int top_k;                /* >= 0; 0 = off. Default 40 */
  float top_p;              /* (0, 1]; 1 = off. Default 0.95 */
  float min_p;              /* [0, 1); 0 = off. Default 0.05 */
  float repeat_penalty;     /* > 0; 1 = off. Default 1.0. Logit l of a recent token → l>0 ? l/p : l*p */
  float presence_penalty;   /* any; 0 = off. l -= presence if the token is in the window */
  float frequency_penalty;  /* any; 0 = off. l -= frequency × count in the window */
  int penalty_window;       /* >= 0 tokens looked back (prompt included); 0 = penalties off. Default 64 */
  guint64 seed;             /* HONE_SAMPLER_SEED_RANDOM = random. Default random */
  int max_tokens;           /* >= 0 tokens to generate; 0 = until EOG or context full. Default 0 */
  char **stop;              /* NULL-terminated stop strings (owned, may be NULL). Default none */
  gboolean ignore_eog;      /* keep going past EOS/EOG tokens (bench). Default FALSE */
} HoneSamplerParams;

#define HONE_TYPE_SAMPLER_PARAMS (hone_sampler_params_get_type ())
GType hone_sampler_params_get_type (void) G_GNUC_CONST;

/* Fill with the defaults above (does not free what @params held). */
void               hone_sampler_params_init (HoneSamplerParams *params);
/* Convenience: greedy (temperature 0), no penalties, no stop strings. */
void               hone_sampler_params_init_greedy (HoneSamplerParams *params);
HoneSamplerParams *hone_sampler_params_new (void);            /* defaults */
HoneSamplerParams *hone_sampler_params_copy (const HoneSamplerParams *params);
void               hone_sampler_params_free (HoneSamplerParams *params);
/* Release what @params owns (stop strings) of a stack-allocated struct. */
void               hone_sampler_params_clear (HoneSamplerParams *params);
/* Replace the stop strings (copied; NULL clears). */
void               hone_sampler_params_set_stop (HoneSamplerParams *params, const char *const *stop);
/* HONE_ERROR_INVALID_ARGUMENT naming the parameter (e.g. "top-p must be in (0, 1], got 1.5"). */
gboolean           hone_sampler_params_validate (const HoneSamplerParams *params, GError **error);

typedef struct _HoneSampler HoneSampler;

/* Validates @params (copied) first. n_vocab > 0. */
HoneSampler *hone_sampler_new (const HoneSamplerParams *params, int n_vocab, GError **error);
void         hone_sampler_free (HoneSampler *sampler);
const HoneSamplerParams *hone_sampler_get_params (const HoneSampler *sampler);

/* Forget the penalty window and re-seed the PRNG from params.seed. */
void  hone_sampler_reset (HoneSampler *sampler);
/* Record a token in the penalty window (call for prompt tokens and for each sampled token). */
void  hone_sampler_accept (HoneSampler *sampler, gint32 token);

/* Pick the next token from @logits (n_vocab floats; modified in place:
 * penalties and temperature are applied to it). Does not call accept(). */
gint32 hone_sampler_sample (HoneSampler *sampler, float *logits);
/* The same with the uniform draw @u ∈ [0, 1) given instead of taken from the
 * PRNG: one the caller took from this sampler's sequence earlier (a device
 * sampler's fallback draws the host's token with the draw it was handed). */
gint32 hone_sampler_sample_with_draw (HoneSampler *sampler, float *logits, double u);

/* The pieces of the pipeline, exposed for tests and for speculative decoding. */
/* Apply the repetition/presence/frequency penalties of the current window in place. */
void  hone_sampler_apply_penalties (HoneSampler *sampler, float *logits);
/* The distribution sample() draws from for these raw @logits (not modified):
 * the window's penalties, temperature and the top-k/top-p/min-p masks applied
 * to a copy. @probs gets n_vocab probabilities summing to 1, zero where masked.
 * With temperature 0 it is one-hot at the argmax. */
void  hone_sampler_probabilities (HoneSampler *sampler, const float *logits, float *probs);
/* Uniform double in [0, 1) from the sampler's PRNG. */
double hone_sampler_next_double (HoneSampler *sampler);

/* Index of the largest value (first on ties). */
gint32 hone_argmax (const float *values, int n);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (HoneSampler, hone_sampler_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HoneSamplerParams, hone_sampler_params_free)

/* ---- stop strings --------------------------------------------------------- */

typedef struct _HoneStopMatcher HoneStopMatcher;

/* @stop: NULL-terminated; empty strings are ignored. NULL or empty → never stops. */
HoneStopMatcher *hone_stop_matcher_new (const char *const *stop);
void             hone_stop_matcher_free (HoneStopMatcher *matcher);
/* Feed newly decoded text. Returns the text that is now safe to show (owned,
 * possibly ""): everything except a tail that is a prefix of some stop string.
 * When a stop string is completed, *stopped becomes TRUE, the returned text
 * ends right before it, and the matcher ignores further input. */
char            *hone_stop_matcher_push (HoneStopMatcher *matcher, const char *text, gboolean *stopped);
/* End of generation without a stop: returns the held-back tail (owned). */
char            *hone_stop_matcher_flush (HoneStopMatcher *matcher);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (HoneStopMatcher, hone_stop_matcher_free)

G_END_DECLS
