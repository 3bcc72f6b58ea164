/* hone-cpu-ops.h — the small per-token operations of a transformer layer. */
#pragma once

#include <glib.h>
#include "hone-model.h"

G_BEGIN_DECLS

/* y = x / sqrt(mean(x²) + eps) · w   (y may alias x) */
void  hone_cpu_rmsnorm (const float *x, const float *w, float *y, int n, float eps);

/* inv_freq[i] for i < head_dim/2: 1/theta^(2i/d), then the config's scaling
 * (linear: /factor; llama3: wavelength-dependent blend), as HF computes it. */
void  hone_cpu_rope_inv_freq (const HoneModelConfig *config, int head_dim, float *inv_freq);
/* cos/sin of pos·inv_freq[i], i < head_dim/2. */
void  hone_cpu_rope_cos_sin (const float *inv_freq, int head_dim, int pos, float *cos_out, float *sin_out);
/* Rotate n_heads vectors of head_dim in place. ADJACENT pairs (2i, 2i+1),
 * HALF pairs (i, i + head_dim/2); pair i rotates by angle i. */
void  hone_cpu_rope (float *v, int n_heads, int head_dim, const float *cos_t, const float *sin_t,
                     HoneRopePairing pairing);

/* In place; returns nothing; max-subtracted, sums in double. */
void  hone_cpu_softmax (float *x, int n);

/* y[i] = e^((x[i] − shift)·scale) for x[i] ≤ shift (a NaN, or an argument
 * below −87.3, gives 0); returns Σ y[i] in double. The vector paths' e^x is
 * within 2 ulp of expf. y may alias x. */
double hone_cpu_exp_sum (const float *x, float *y, int n, float shift, float scale);

/* The largest of x[0..n) that is not NaN (−inf if none). */
float hone_cpu_max (const float *x, int n);

/* The index of the first x[i] > t (never a NaN), or n if none. */
int   hone_cpu_first_above (const float *x, int n, float t);

/* The indices of every x[i] > t (never a NaN), ascending, into idx; returns
 * how many. */
int   hone_cpu_indices_above (const float *x, int n, float t, gint32 *idx);

/* g[i] = silu(g[i]) · u[i] */
void  hone_cpu_swiglu (float *g, const float *u, int n);

/* y[i] += x[i] */
void  hone_cpu_add (float *y, const float *x, int n);

G_END_DECLS
