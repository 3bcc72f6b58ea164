/* hone-cpu-ops.c — RMSNorm, RoPE, softmax, SwiGLU. */
#include "hone-cpu-ops.h"

#include <math.h>

void
hone_cpu_rmsnorm (const float *x, const float *w, float *y, int n, float eps)
{
  double ss = 0.0;
  float scale;

  for (int i = 0; i < n; i++)
    ss += (double) x[i] * x[i];
  scale = (float) (1.0 / sqrt (ss / n + eps));
  for (int i = 0; i < n; i++)
    y[i] = x[i] * scale * w[i];
}

void
hone_cpu_rope_inv_freq (const HoneModelConfig *config, int head_dim, float *inv_freq)
{
  const HoneRopeScaling *s = &config->rope_scaling;

  for (int i = 0; i < head_dim / 2; i++)
    {
      double f = 1.0 / pow ((double) config->rope_theta, (double) (2 * i) / head_dim);

      if (s->type == HONE_ROPE_SCALING_LINEAR && s->factor > 0.0f)
        f /= s->factor;
      else if (s->type == HONE_ROPE_SCALING_LLAMA3 && s->factor > 0.0f)
        {
          /* transformers' _compute_llama3_parameters */
          double old_ctx = s->original_context > 0 ? s->original_context : 8192;
          double lo = s->low_freq_factor > 0.0f ? s->low_freq_factor : 1.0;
          double hi = s->high_freq_factor > 0.0f ? s->high_freq_factor : 4.0;
          double low_wl = old_ctx / lo, high_wl = old_ctx / hi;
          double wl = 2.0 * G_PI / f;

          if (wl > low_wl)
            f = f / s->factor;
          else if (wl >= high_wl && hi != lo)
            {
              double smooth = (old_ctx / wl - lo) / (hi - lo);
              f = (1.0 - smooth) * f / s->factor + smooth * f;
            }
        }
      inv_freq[i] = (float) f;
    }
}

void
hone_cpu_rope_cos_sin (const float *inv_freq, int head_dim, int pos, float *cos_out, float *sin_out)
{
  for (int i = 0; i < head_dim / 2; i++)
    {
      /* HF multiplies in f32 (pos · inv_freq) before cos/sin; so do we. */
      float ang = (float) pos * inv_freq[i];
      cos_out[i] = (float) cos ((double) ang);
      sin_out[i] = (float) sin ((double) ang);
    }
}

void
hone_cpu_rope (float *v, int n_heads, int head_dim, const float *cos_t, const float *sin_t,
               HoneRopePairing pairing)
{
  const int half = head_dim / 2;

  for (int h = 0; h < n_heads; h++)
    {
      float *x = v + (size_t) h * head_dim;
      for (int i = 0; i < half; i++)
        {
          int a = pairing == HONE_ROPE_PAIRS_ADJACENT ? 2 * i : i;
          int b = pairing == HONE_ROPE_PAIRS_ADJACENT ? 2 * i + 1 : i + half;
          float x0 = x[a], x1 = x[b];
          x[a] = x0 * cos_t[i] - x1 * sin_t[i];
          x[b] = x0 * sin_t[i] + x1 * cos_t[i];
        }
    }
}

void
hone_cpu_softmax (float *x, int n)
{
  float mx = -INFINITY;
  double sum = 0.0;
  float inv;

  for (int i = 0; i < n; i++)
    mx = fmaxf (mx, x[i]);
  for (int i = 0; i < n; i++)
    {
      x[i] = expf (x[i] - mx);
      sum += x[i];
    }
  inv = (float) (1.0 / sum);
  for (int i = 0; i < n; i++)
    x[i] *= inv;
}

void
hone_cpu_swiglu (float *g, const float *u, int n)
{
  for (int i = 0; i < n; i++)
    g[i] = g[i] / (1.0f + expf (-g[i])) * u[i];
}

void
hone_cpu_add (float *y, const float *x, int n)
{
  for (int i = 0; i < n; i++)
    y[i] += x[i];
}
