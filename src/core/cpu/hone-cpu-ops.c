/* hone-cpu-ops.c — RMSNorm, RoPE, softmax, SwiGLU. */
#include "hone-cpu-ops.h"

#include <math.h>
#include "hone-cpu-dot.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HONE_HAVE_X86 1
#include <immintrin.h>
#include "hone-cpu-x86-vec.h"

/* The sum of squares in double, 16 at a time (products of floats are exact
 * in double, so only the order of the sums differs); y bit for bit as the
 * scalar loop. */
static HONE_X86_512_TARGET void
rmsnorm_avx512 (const float *x, const float *w, float *y, int n, float eps)
{
  __m512d s0 = _mm512_setzero_pd (), s1 = _mm512_setzero_pd ();
  __m512 sv;
  double ss;
  float scale;
  int i = 0;

  for (; i + 16 <= n; i += 16)
    {
      const __m512 v = _mm512_loadu_ps (x + i);
      const __m512d lo = _mm512_cvtps_pd (_mm512_castps512_ps256 (v));
      const __m512d hi = _mm512_cvtps_pd (_mm256_castpd_ps (_mm512_extractf64x4_pd (_mm512_castps_pd (v), 1)));
      s0 = _mm512_fmadd_pd (lo, lo, s0);
      s1 = _mm512_fmadd_pd (hi, hi, s1);
    }
  ss = _mm512_reduce_add_pd (_mm512_add_pd (s0, s1));
  for (int j = i; j < n; j++)
    ss += (double) x[j] * x[j];
  scale = (float) (1.0 / sqrt (ss / n + eps));
  sv = _mm512_set1_ps (scale);
  for (i = 0; i + 16 <= n; i += 16)
    _mm512_storeu_ps (y + i, _mm512_mul_ps (_mm512_mul_ps (_mm512_loadu_ps (x + i), sv), _mm512_loadu_ps (w + i)));
  for (; i < n; i++)
    y[i] = x[i] * scale * w[i];
}

/* rmsnorm_avx512 in 8 lanes (4 doubles a vector). */
static HONE_X86_256_TARGET void
rmsnorm_avx2 (const float *x, const float *w, float *y, int n, float eps)
{
  __m256d s0 = _mm256_setzero_pd (), s1 = _mm256_setzero_pd ();
  __m128d h;
  __m256 sv;
  double ss;
  float scale;
  int i = 0;

  for (; i + 8 <= n; i += 8)
    {
      const __m256 v = _mm256_loadu_ps (x + i);
      const __m256d lo = _mm256_cvtps_pd (_mm256_castps256_ps128 (v)), hi = _mm256_cvtps_pd (_mm256_extractf128_ps (v, 1));
      s0 = _mm256_fmadd_pd (lo, lo, s0);
      s1 = _mm256_fmadd_pd (hi, hi, s1);
    }
  s0 = _mm256_add_pd (s0, s1);
  h = _mm_add_pd (_mm256_castpd256_pd128 (s0), _mm256_extractf128_pd (s0, 1));
  ss = _mm_cvtsd_f64 (_mm_add_sd (h, _mm_unpackhi_pd (h, h)));
  for (int j = i; j < n; j++)
    ss += (double) x[j] * x[j];
  scale = (float) (1.0 / sqrt (ss / n + eps));
  sv = _mm256_set1_ps (scale);
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps (y + i, _mm256_mul_ps (_mm256_mul_ps (_mm256_loadu_ps (x + i), sv), _mm256_loadu_ps (w + i)));
  for (; i < n; i++)
    y[i] = x[i] * scale * w[i];
}

/* swiglu_avx512 in 8 lanes (hone_x86_exp256 stops at e^88.4 = 2.4e38: a gate
 * below −88.4 gives g / 2.4e38, −4e-37 at −100, rather than −0). */
static HONE_X86_256_TARGET void
swiglu_avx2 (float *g, const float *u, int n)
{
  int i = 0;

  for (; i + 8 <= n; i += 8)
    {
      const __m256 gv = _mm256_loadu_ps (g + i);
      const __m256 e = hone_x86_exp256 (_mm256_sub_ps (_mm256_setzero_ps (), gv));
      _mm256_storeu_ps (g + i, _mm256_mul_ps (_mm256_div_ps (gv, _mm256_add_ps (_mm256_set1_ps (1.0f), e)),
                                              _mm256_loadu_ps (u + i)));
    }
  for (; i < n; i++)
    g[i] = g[i] / (1.0f + expf (-g[i])) * u[i];
}

/* silu(g)·u with a vector e^x (hone_x86_exp512, within 2 ulp of expf). */
static HONE_X86_512_TARGET void
swiglu_avx512 (float *g, const float *u, int n)
{
  int i = 0;

  for (; i + 16 <= n; i += 16)
    {
      const __m512 gv = _mm512_loadu_ps (g + i);
      const __m512 e = hone_x86_exp512 (_mm512_sub_ps (_mm512_setzero_ps (), gv));
      _mm512_storeu_ps (g + i, _mm512_mul_ps (_mm512_div_ps (gv, _mm512_add_ps (_mm512_set1_ps (1.0f), e)),
                                              _mm512_loadu_ps (u + i)));
    }
  for (; i < n; i++)
    g[i] = g[i] / (1.0f + expf (-g[i])) * u[i];
}

/* hone_cpu_exp_sum in 16 lanes, the sums in two 8-lane doubles. */
static HONE_X86_512_TARGET double
exp_sum_avx512 (const float *x, float *y, int n, float shift, float scale)
{
  const __m512 sv = _mm512_set1_ps (shift), kv = _mm512_set1_ps (scale), lo = _mm512_set1_ps (-87.33654f);
  __m512d s0 = _mm512_setzero_pd (), s1 = _mm512_setzero_pd ();
  double sum;
  int i = 0;

  for (; i + 16 <= n; i += 16)
    {
      const __m512 a = _mm512_mul_ps (_mm512_sub_ps (_mm512_loadu_ps (x + i), sv), kv);
      const __mmask16 ok = _mm512_cmp_ps_mask (a, lo, _CMP_GE_OQ);   /* false for NaN */
      const __m512 e = _mm512_maskz_mov_ps (ok, hone_x86_exp512 (a));
      _mm512_storeu_ps (y + i, e);
      s0 = _mm512_add_pd (s0, _mm512_cvtps_pd (_mm512_castps512_ps256 (e)));
      s1 = _mm512_add_pd (s1, _mm512_cvtps_pd (_mm256_castpd_ps (_mm512_extractf64x4_pd (_mm512_castps_pd (e), 1))));
    }
  sum = _mm512_reduce_add_pd (_mm512_add_pd (s0, s1));
  for (; i < n; i++)
    {
      const float a = (x[i] - shift) * scale;
      y[i] = a >= -87.33654f ? expf (a) : 0.0f;
      sum += y[i];
    }
  return sum;
}

/* hone_cpu_exp_sum in 8 lanes, the sums in two 4-lane doubles. */
static HONE_X86_256_TARGET double
exp_sum_avx2 (const float *x, float *y, int n, float shift, float scale)
{
  const __m256 sv = _mm256_set1_ps (shift), kv = _mm256_set1_ps (scale), lo = _mm256_set1_ps (-87.33654f);
  __m256d s0 = _mm256_setzero_pd (), s1 = _mm256_setzero_pd ();
  __m128d h;
  double sum;
  int i = 0;

  for (; i + 8 <= n; i += 8)
    {
      const __m256 a = _mm256_mul_ps (_mm256_sub_ps (_mm256_loadu_ps (x + i), sv), kv);
      const __m256 ok = _mm256_cmp_ps (a, lo, _CMP_GE_OQ);   /* false for NaN */
      const __m256 e = _mm256_and_ps (ok, hone_x86_exp256 (a));
      _mm256_storeu_ps (y + i, e);
      s0 = _mm256_add_pd (s0, _mm256_cvtps_pd (_mm256_castps256_ps128 (e)));
      s1 = _mm256_add_pd (s1, _mm256_cvtps_pd (_mm256_extractf128_ps (e, 1)));
    }
  s0 = _mm256_add_pd (s0, s1);
  h = _mm_add_pd (_mm256_castpd256_pd128 (s0), _mm256_extractf128_pd (s0, 1));
  sum = _mm_cvtsd_f64 (_mm_add_sd (h, _mm_unpackhi_pd (h, h)));
  for (; i < n; i++)
    {
      const float a = (x[i] - shift) * scale;
      y[i] = a >= -87.33654f ? expf (a) : 0.0f;
      sum += y[i];
    }
  return sum;
}

static HONE_X86_256_TARGET float
max_avx2 (const float *x, int n)
{
  __m256 m0 = _mm256_set1_ps (-INFINITY), m1 = m0;
  __m128 h;
  float m;
  int i = 0;

  for (; i + 16 <= n; i += 16)   /* maxps gives its second operand where the first is NaN */
    {
      m0 = _mm256_max_ps (_mm256_loadu_ps (x + i), m0);
      m1 = _mm256_max_ps (_mm256_loadu_ps (x + i + 8), m1);
    }
  m0 = _mm256_max_ps (m0, m1);
  h = _mm_max_ps (_mm256_castps256_ps128 (m0), _mm256_extractf128_ps (m0, 1));
  h = _mm_max_ps (h, _mm_movehl_ps (h, h));
  h = _mm_max_ss (h, _mm_shuffle_ps (h, h, 1));
  m = _mm_cvtss_f32 (h);
  for (; i < n; i++)
    if (x[i] > m)
      m = x[i];
  return m;
}

static HONE_X86_256_TARGET int
first_above_avx2 (const float *x, int n, float t)
{
  const __m256 tv = _mm256_set1_ps (t);
  int i = 0;

  for (; i + 16 <= n; i += 16)
    {
      const __m256 a = _mm256_cmp_ps (_mm256_loadu_ps (x + i), tv, _CMP_GT_OQ);
      const __m256 b = _mm256_cmp_ps (_mm256_loadu_ps (x + i + 8), tv, _CMP_GT_OQ);
      const unsigned mask = (unsigned) _mm256_movemask_ps (a) | (unsigned) _mm256_movemask_ps (b) << 8;
      if (mask)
        return i + __builtin_ctz (mask);
    }
  for (; i < n; i++)
    if (x[i] > t)
      return i;
  return n;
}

static HONE_X86_256_TARGET int
indices_above_avx2 (const float *x, int n, float t, gint32 *idx)
{
  const __m256 tv = _mm256_set1_ps (t);
  int i = 0, m = 0;

  for (; i + 8 <= n; i += 8)
    {
      unsigned mask = (unsigned) _mm256_movemask_ps (_mm256_cmp_ps (_mm256_loadu_ps (x + i), tv, _CMP_GT_OQ));
      for (; mask; mask &= mask - 1)
        idx[m++] = i + __builtin_ctz (mask);
    }
  for (; i < n; i++)
    if (x[i] > t)
      idx[m++] = i;
  return m;
}
#endif

int
hone_cpu_indices_above (const float *x, int n, float t, gint32 *idx)
{
  int m = 0;

#ifdef HONE_HAVE_X86
  if (hone_cpu_isa () >= HONE_CPU_ISA_AVX2)
    return indices_above_avx2 (x, n, t, idx);
#endif
  for (int i = 0; i < n; i++)
    if (x[i] > t)
      idx[m++] = i;
  return m;
}

float
hone_cpu_max (const float *x, int n)
{
  float m = -INFINITY;

#ifdef HONE_HAVE_X86
  if (hone_cpu_isa () >= HONE_CPU_ISA_AVX2)
    return max_avx2 (x, n);
#endif
  for (int i = 0; i < n; i++)
    if (x[i] > m)
      m = x[i];
  return m;
}

int
hone_cpu_first_above (const float *x, int n, float t)
{
#ifdef HONE_HAVE_X86
  if (hone_cpu_isa () >= HONE_CPU_ISA_AVX2)
    return first_above_avx2 (x, n, t);
#endif
  for (int i = 0; i < n; i++)
    if (x[i] > t)
      return i;
  return n;
}

double
hone_cpu_exp_sum (const float *x, float *y, int n, float shift, float scale)
{
  double sum = 0.0;

#ifdef HONE_HAVE_X86
  if (hone_cpu_isa () >= HONE_CPU_ISA_AVX512VNNI)
    return exp_sum_avx512 (x, y, n, shift, scale);
  if (hone_cpu_isa () >= HONE_CPU_ISA_AVX2)
    return exp_sum_avx2 (x, y, n, shift, scale);
#endif
  for (int i = 0; i < n; i++)
    {
      const float a = (x[i] - shift) * scale;
      y[i] = a >= -87.33654f ? expf (a) : 0.0f;
      sum += y[i];
    }
  return sum;
}

void
hone_cpu_rmsnorm (const float *x, const float *w, float *y, int n, float eps)
{
  double ss = 0.0;
  float scale;

#ifdef HONE_HAVE_X86
  if (hone_cpu_isa () >= HONE_CPU_ISA_AVX512VNNI)
    {
      rmsnorm_avx512 (x, w, y, n, eps);
      return;
    }
  if (hone_cpu_isa () >= HONE_CPU_ISA_AVX2)
    {
      rmsnorm_avx2 (x, w, y, n, eps);
      return;
    }
#endif
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
#ifdef HONE_HAVE_X86
  if (hone_cpu_isa () >= HONE_CPU_ISA_AVX512VNNI)
    {
      swiglu_avx512 (g, u, n);
      return;
    }
  if (hone_cpu_isa () >= HONE_CPU_ISA_AVX2)
    {
      swiglu_avx2 (g, u, n);
      return;
    }
#endif
  for (int i = 0; i < n; i++)
    g[i] = g[i] / (1.0f + expf (-g[i])) * u[i];
}

void
hone_cpu_add (float *y, const float *x, int n)
{
  for (int i = 0; i < n; i++)
    y[i] += x[i];
}
