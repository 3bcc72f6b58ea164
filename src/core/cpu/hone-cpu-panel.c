/* hone-cpu-panel.c — repacking weight rows into panels, and the panel kernel. */
#if defined(__GNUC__) && !defined(__clang__)
/* Like the tiles, the kernel relies on full unrolling of its small arrays. */
#pragma GCC optimize ("O3")
#endif

#include "hone-cpu-panel.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HONE_HAVE_X86 1
#include <immintrin.h>
#include "hone-cpu-x86-512.h"
#endif

/* A panel: q[K/4][16][4] (line g: elements 4g … 4g+3 of rows 0 … 15), then
 * a[K/32][16], b[K/32][16] and, for Q6_K, a2[K/32][16] (hone-cpu-panel.h):
 * 16·K + 6·K bytes at most. */
#define LINE 64

gsize
hone_cpu_panel_bytes (int K)
{
  return (gsize) K * HONE_CPU_PANEL_ROWS + 3 * (gsize) (K / 32) * HONE_CPU_PANEL_ROWS * sizeof (float);
}

static inline float *
panel_a (void *panel, int K)
{
  return (float *) ((uint8_t *) panel + (size_t) K * HONE_CPU_PANEL_ROWS);
}

#ifdef HONE_HAVE_X86

#define PTARGET __attribute__((target ("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512dq,avx512vnni")))
#define PINLINE static inline __attribute__((always_inline)) PTARGET

/* 16 packed bytes of a 32-block (byte j: element j low, j + 16 high) → 32 bytes. */
PINLINE __m256i
nibbles32 (const uint8_t *qs)
{
  const __m128i raw = _mm_loadu_si128 ((const __m128i *) qs);
  return _mm256_and_si256 (_mm256_set_m128i (_mm_srli_epi16 (raw, 4), raw), _mm256_set1_epi8 (0x0f));
}

PINLINE __m512i
join (__m256i lo, __m256i hi)
{
  return _mm512_inserti64x4 (_mm512_castsi256_si512 (lo), hi, 1);
}

/* Row @r's elements 64c … 64c + 63 as unsigned bytes, and the a/b terms of its
 * blocks 2c and 2c + 1 (or, for Q4_K, of the super-block's 8 blocks when c is
 * its first 64). */
PINLINE __m512i
unpack64 (HoneDType type, const uint8_t *row, int K, int c, float *a, float *b, int r)
{
  switch (type)
    {
    case HONE_DTYPE_Q4_0:
      {
        const HoneBlockQ4_0 *blk = (const HoneBlockQ4_0 *) row + 2 * c;
        for (int h = 0; h < 2; h++)
          {
            const float d = _cvtsh_ss (blk[h].d);
            a[(2 * c + h) * 16 + r] = d;
            b[(2 * c + h) * 16 + r] = -8.0f * d;
          }
        return join (nibbles32 (blk[0].qs), nibbles32 (blk[1].qs));
      }
    case HONE_DTYPE_Q4_1:
      {
        const HoneBlockQ4_1 *blk = (const HoneBlockQ4_1 *) row + 2 * c;
        for (int h = 0; h < 2; h++)
          {
            a[(2 * c + h) * 16 + r] = _cvtsh_ss (blk[h].d);
            b[(2 * c + h) * 16 + r] = _cvtsh_ss (blk[h].m);
          }
        return join (nibbles32 (blk[0].qs), nibbles32 (blk[1].qs));
      }
    case HONE_DTYPE_Q4Z:
      {
        const HoneBlockQ4Z *blk = (const HoneBlockQ4Z *) row + 2 * c;
        for (int h = 0; h < 2; h++)
          {
            const float s = _cvtsh_ss (blk[h].s);
            a[(2 * c + h) * 16 + r] = s;
            b[(2 * c + h) * 16 + r] = -(float) blk[h].z * s;
          }
        return join (nibbles32 (blk[0].qs), nibbles32 (blk[1].qs));
      }
    case HONE_DTYPE_Q8_0:
      {
        const HoneBlockQ8_0 *blk = (const HoneBlockQ8_0 *) row + 2 * c;
        const __m256i flip = _mm256_set1_epi8 ((char) 0x80);   /* q + 128 */
        for (int h = 0; h < 2; h++)
          {
            const float d = _cvtsh_ss (blk[h].d);
            a[(2 * c + h) * 16 + r] = d;
            b[(2 * c + h) * 16 + r] = -128.0f * d;
          }
        return join (_mm256_xor_si256 (_mm256_loadu_si256 ((const __m256i *) blk[0].qs), flip),
                     _mm256_xor_si256 (_mm256_loadu_si256 ((const __m256i *) blk[1].qs), flip));
      }
    case HONE_DTYPE_Q6_K:
      {
        /* Group c % 4 of the super-block: elements 0–63 (p = 0) or 64–127
         * (p = 1) of its half n; the bit tricks are tile_q6_k_512's. */
        const HoneBlockQ6_K *blk = (const HoneBlockQ6_K *) row + c / 4;
        const int n = (c % 4) / 2, p = c % 2;
        const __m512i m4 = _mm512_set1_epi8 (0x0f), m30 = _mm512_set1_epi8 (0x30);
        const __m512i l = _mm512_loadu_si512 ((const void *) (blk->ql + 64 * n));
        const __m512i hh = _mm512_broadcast_i64x4 (_mm256_loadu_si256 ((const __m256i *) (blk->qh + 32 * n)));
        const float d = _cvtsh_ss (blk->d);
        float *a2 = b + (size_t) (K / 32) * 16;
        __m512i u;
        uint64_t sum8[8];

        if (p == 0)
          {
            const __m512i sh = _mm512_inserti64x4 (_mm512_castsi256_si512 (_mm256_set1_epi16 (4)),
                                                   _mm256_set1_epi16 (2), 1);
            u = _mm512_or_si512 (_mm512_and_si512 (l, m4), _mm512_and_si512 (_mm512_sllv_epi16 (hh, sh), m30));
          }
        else
          {
            const __m512i sh = _mm512_inserti64x4 (_mm512_castsi256_si512 (_mm256_set1_epi16 (0)),
                                                   _mm256_set1_epi16 (2), 1);
            u = _mm512_or_si512 (_mm512_and_si512 (_mm512_srli_epi16 (l, 4), m4),
                                 _mm512_and_si512 (_mm512_srlv_epi16 (hh, sh), m30));
          }
        /* Σ of each 8 stored values → each 16's Σ (q − 32) */
        _mm512_storeu_si512 ((void *) sum8, _mm512_sad_epu8 (u, _mm512_setzero_si512 ()));
        for (int h = 0; h < 2; h++)
          {
            const int s = 2 * c + h, j = 2 * p + h;   /* block s is quarter j of half n */
            const float a0 = d * blk->scales[8 * n + 2 * j], a1 = d * blk->scales[8 * n + 2 * j + 1];
            const float c0 = (float) ((int) (sum8[4 * h] + sum8[4 * h + 1]) - 16 * 32);
            const float c1 = (float) ((int) (sum8[4 * h + 2] + sum8[4 * h + 3]) - 16 * 32);
            a[s * 16 + r] = a0;
            a2[s * 16 + r] = a1;
            b[s * 16 + r] = -128.0f * (a0 * c0 + a1 * c1);
          }
        return _mm512_sub_epi8 (u, _mm512_set1_epi8 (32));
      }
    default: /* HONE_DTYPE_Q4_K */
      {
        const HoneBlockQ4_K *blk = (const HoneBlockQ4_K *) row + c / 4;
        const int j = c % 4;
        const __m256i raw = _mm256_loadu_si256 ((const __m256i *) (blk->qs + 32 * j));
        const __m256i m4 = _mm256_set1_epi8 (0x0f);
        if (j == 0)
          {
            /* the 8 scales and mins from the 12 bytes at once (as the tiles' q4k_scales) */
            uint32_t u[3];
            float sv[8], mv[8];
            __m128i scm;

            memcpy (u, blk->scales, 12);
            scm = _mm_setr_epi32 ((int) (u[0] & 0x3f3f3f3f),
                                  (int) ((u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4)),
                                  (int) (u[1] & 0x3f3f3f3f),
                                  (int) (((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4)));
            _mm256_storeu_ps (sv, _mm256_mul_ps (_mm256_set1_ps (_cvtsh_ss (blk->d)),
                                                 _mm256_cvtepi32_ps (_mm256_cvtepu8_epi32 (scm))));
            _mm256_storeu_ps (mv, _mm256_mul_ps (_mm256_set1_ps (-_cvtsh_ss (blk->dmin)),
                                                 _mm256_cvtepi32_ps (_mm256_cvtepu8_epi32 (_mm_srli_si128 (scm, 8)))));
            for (int s = 0; s < 8; s++)
              {
                a[(2 * c + s) * 16 + r] = sv[s];
                b[(2 * c + s) * 16 + r] = mv[s];
              }
          }
        return join (_mm256_and_si256 (raw, m4), _mm256_and_si256 (_mm256_srli_epi16 (raw, 4), m4));
      }
    }
}

PINLINE void
pack_type (HoneDType type, const void *w, size_t w_stride, int R, int K, void *panel)
{
  uint8_t *q = panel;
  float *a = panel_a (panel, K), *b = a + (size_t) (K / 32) * 16;
  const size_t ahead_step = w_stride / (K / 64);   /* a row's stored bytes per 64 elements, about */

  for (int c = 0; c < K / 64; c++)
    {
      __m512i rows[16], lines[16];

      for (int r = 0; r < 16; r++)
        {
          if (r < R)
            {
              const uint8_t *row = (const uint8_t *) w + (size_t) r * w_stride;
              /* The chunks a thread packs next follow this one in memory (its
               * own range, hone-cpu-matmul.c): their weights are on the way from
               * memory while this panel runs, as in the tiles. */
              hone_cpu_prefetch_ahead (row + (size_t) c * ahead_step);
              rows[r] = unpack64 (type, row, K, c, a, b, r);
            }
          else
            {
              rows[r] = _mm512_setzero_si512 ();
              if (type != HONE_DTYPE_Q4_K || c % 4 == 0)
                for (int s = 2 * c; s < 2 * c + (type == HONE_DTYPE_Q4_K ? 8 : 2); s++)
                  {
                    a[s * 16 + r] = b[s * 16 + r] = 0.0f;
                    if (type == HONE_DTYPE_Q6_K)
                      b[(size_t) (K / 32) * 16 + s * 16 + r] = 0.0f;   /* a2 */
                  }
            }
        }
      hone_x86_transpose16 (rows, lines);
      for (int g = 0; g < 16; g++)
        _mm512_store_si512 ((void *) (q + ((size_t) c * 16 + g) * LINE), lines[g]);
    }
}

static PTARGET void
pack_avx512 (HoneDType type, const void *w, size_t w_stride, int R, int K, void *panel)
{
  /* one instance per type, so unpack64's switch folds away */
  switch (type)
    {
    case HONE_DTYPE_Q4_0: pack_type (HONE_DTYPE_Q4_0, w, w_stride, R, K, panel); break;
    case HONE_DTYPE_Q4_1: pack_type (HONE_DTYPE_Q4_1, w, w_stride, R, K, panel); break;
    case HONE_DTYPE_Q4Z: pack_type (HONE_DTYPE_Q4Z, w, w_stride, R, K, panel); break;
    case HONE_DTYPE_Q8_0: pack_type (HONE_DTYPE_Q8_0, w, w_stride, R, K, panel); break;
    case HONE_DTYPE_Q6_K: pack_type (HONE_DTYPE_Q6_K, w, w_stride, R, K, panel); break;
    default: pack_type (HONE_DTYPE_Q4_K, w, w_stride, R, K, panel); break;
    }
}

/* 16 rows × T tokens (T ≤ 8): per block and token, 8 vpdpbusd into an integer
 * accumulator (two for Q6_K's 16-element scales), then one conversion per
 * accumulator and two or three FMAs. @q6: the lines are signed (q − 32) and
 * @xb holds the activations + 128 (hone_cpu_panel_bias_act). */
PINLINE void
run_tile (const void *panel, int K, int R, const HoneQ8Act *x, size_t x_stride, const uint8_t *xb,
          float *out, size_t out_stride, const gboolean q6, const int T)
{
  const int nb = K / 32;
  const uint8_t *q = panel;
  const float *a = panel_a ((void *) panel, K), *b = a + (size_t) nb * 16, *a2 = b + (size_t) nb * 16;
  const HoneQ8Act *xr[8];
  const float *xs[8];
  __m512 acc[8];

#pragma GCC unroll 8
  for (int t = 0; t < T; t++)
    {
      xr[t] = (const HoneQ8Act *) ((const uint8_t *) x + (size_t) t * x_stride);
      xs[t] = hone_cpu_act_scales (xr[t], K);
      acc[t] = _mm512_setzero_ps ();
    }
  for (int s = 0; s < nb; s++)
    {
      __m512i sum[8], sum2[8];
      const __m512 as = _mm512_load_ps (a + (size_t) s * 16), bs = _mm512_load_ps (b + (size_t) s * 16);

#pragma GCC unroll 8
      for (int t = 0; t < T; t++)
        sum[t] = sum2[t] = _mm512_setzero_si512 ();
#pragma GCC unroll 8
      for (int g = 0; g < 8; g++)
        {
          const __m512i line = _mm512_load_si512 ((const void *) (q + ((size_t) s * 8 + g) * LINE));
#pragma GCC unroll 8
          for (int t = 0; t < T; t++)
            {
              int32_t x4;
              if (q6)
                {
                  memcpy (&x4, xb + (size_t) t * K + 32 * s + 4 * g, 4);
                  if (g < 4)
                    sum[t] = _mm512_dpbusd_epi32 (sum[t], _mm512_set1_epi32 (x4), line);
                  else
                    sum2[t] = _mm512_dpbusd_epi32 (sum2[t], _mm512_set1_epi32 (x4), line);
                }
              else
                {
                  memcpy (&x4, xr[t][s].qs + 4 * g, 4);
                  sum[t] = _mm512_dpbusd_epi32 (sum[t], line, _mm512_set1_epi32 (x4));
                }
            }
        }
      if (q6)
        {
          const __m512 as2 = _mm512_load_ps (a2 + (size_t) s * 16);
#pragma GCC unroll 8
          for (int t = 0; t < T; t++)
            {
              const __m512 v = _mm512_fmadd_ps (_mm512_cvtepi32_ps (sum[t]), as,
                                                _mm512_fmadd_ps (_mm512_cvtepi32_ps (sum2[t]), as2, bs));
              acc[t] = _mm512_fmadd_ps (v, _mm512_set1_ps (xs[t][s]), acc[t]);
            }
        }
      else
#pragma GCC unroll 8
        for (int t = 0; t < T; t++)
          {
            acc[t] = _mm512_fmadd_ps (_mm512_cvtepi32_ps (sum[t]), _mm512_mul_ps (as, _mm512_set1_ps (xs[t][s])),
                                      acc[t]);
            acc[t] = _mm512_fmadd_ps (bs, _mm512_set1_ps (xs[t][nb + s]), acc[t]);
          }
    }
  {
    const __mmask16 keep = (__mmask16) ((1u << R) - 1);
#pragma GCC unroll 8
    for (int t = 0; t < T; t++)
      _mm512_mask_storeu_ps (out + (size_t) t * out_stride, keep, acc[t]);
  }
}

PINLINE void
run_q (const void *panel, int K, int R, const HoneQ8Act *x, size_t x_stride, const uint8_t *xb, int T,
       float *out, size_t out_stride, const gboolean q6)
{
  int t = 0;

  for (; t + 8 <= T; t += 8)
    run_tile (panel, K, R, (const HoneQ8Act *) ((const uint8_t *) x + (size_t) t * x_stride), x_stride,
              xb + (size_t) t * K, out + (size_t) t * out_stride, out_stride, q6, 8);
  if (t == T)
    return;
  x = (const HoneQ8Act *) ((const uint8_t *) x + (size_t) t * x_stride);
  xb += (size_t) t * K;
  out += (size_t) t * out_stride;
  switch (T - t)
    {
    case 1: run_tile (panel, K, R, x, x_stride, xb, out, out_stride, q6, 1); break;
    case 2: run_tile (panel, K, R, x, x_stride, xb, out, out_stride, q6, 2); break;
    case 3: run_tile (panel, K, R, x, x_stride, xb, out, out_stride, q6, 3); break;
    case 4: run_tile (panel, K, R, x, x_stride, xb, out, out_stride, q6, 4); break;
    case 5: run_tile (panel, K, R, x, x_stride, xb, out, out_stride, q6, 5); break;
    case 6: run_tile (panel, K, R, x, x_stride, xb, out, out_stride, q6, 6); break;
    default: run_tile (panel, K, R, x, x_stride, xb, out, out_stride, q6, 7); break;
    }
}

static PTARGET void
run_avx512 (const void *panel, int K, int R, const HoneQ8Act *x, size_t x_stride, const uint8_t *xb, int T,
            float *out, size_t out_stride)
{
  /* xb (only Q6_K panels use it) picks the instance */
  if (xb != NULL)
    run_q (panel, K, R, x, x_stride, xb, T, out, out_stride, TRUE);
  else
    run_q (panel, K, R, x, x_stride, xb, T, out, out_stride, FALSE);
}

static PTARGET void
bias_avx512 (const HoneQ8Act *x, size_t x_stride, int K, int T, uint8_t *xb)
{
  const __m256i flip = _mm256_set1_epi8 ((char) 0x80);

  for (int t = 0; t < T; t++)
    {
      const HoneQ8Act *row = (const HoneQ8Act *) ((const uint8_t *) x + (size_t) t * x_stride);
      for (int s = 0; s < K / 32; s++)
        _mm256_storeu_si256 ((__m256i *) (xb + (size_t) t * K + 32 * s),
                             _mm256_xor_si256 (_mm256_loadu_si256 ((const __m256i *) row[s].qs), flip));
    }
}

#endif /* HONE_HAVE_X86 */

static int panels_on = -1;

gboolean
hone_cpu_panels_enabled (void)
{
  if (panels_on < 0)
    panels_on = g_strcmp0 (g_getenv ("HONE_CPU_PANELS"), "0") != 0;
  return panels_on;
}

gboolean
hone_cpu_panels_set_enabled (gboolean on)
{
  gboolean was = hone_cpu_panels_enabled ();

  panels_on = on != FALSE;
  return was;
}

gboolean
hone_cpu_panel_supported (HoneDType type, int K, HoneCpuIsa isa)
{
#ifdef HONE_HAVE_X86
  if (isa != HONE_CPU_ISA_AVX512VNNI || K <= 0 || K % 64 != 0)
    return FALSE;
  switch (type)
    {
    case HONE_DTYPE_Q4_0:
    case HONE_DTYPE_Q4_1:
    case HONE_DTYPE_Q4Z:
    case HONE_DTYPE_Q8_0:
      return TRUE;
    case HONE_DTYPE_Q4_K:
    case HONE_DTYPE_Q6_K:
      return K % 256 == 0;
    default:
      return FALSE;
    }
#else
  (void) type;
  (void) K;
  (void) isa;
  return FALSE;
#endif
}

void
hone_cpu_panel_pack (HoneDType type, const void *w, size_t w_stride, int R, int K, void *panel)
{
  g_return_if_fail (R >= 1 && R <= HONE_CPU_PANEL_ROWS);
  g_return_if_fail (((uintptr_t) panel & 63) == 0);
  g_return_if_fail (hone_cpu_panel_supported (type, K, HONE_CPU_ISA_AVX512VNNI));
  g_return_if_fail (hone_cpu_isa_supported (HONE_CPU_ISA_AVX512VNNI));
#ifdef HONE_HAVE_X86
  pack_avx512 (type, w, w_stride, R, K, panel);
#else
  (void) w;
  (void) w_stride;
#endif
}

gboolean
hone_cpu_panel_needs_bias (HoneDType type)
{
  return type == HONE_DTYPE_Q6_K;
}

void
hone_cpu_panel_bias_act (const HoneQ8Act *x, size_t x_stride, int K, int T, uint8_t *xb)
{
  g_return_if_fail (K % 32 == 0 && T >= 1);
  g_return_if_fail (hone_cpu_isa_supported (HONE_CPU_ISA_AVX512VNNI));
#ifdef HONE_HAVE_X86
  bias_avx512 (x, x_stride, K, T, xb);
#else
  (void) x;
  (void) x_stride;
  (void) xb;
#endif
}

void
hone_cpu_panel_run (HoneDType type, const void *panel, int K, int R, const HoneQ8Act *x, size_t x_stride,
                    const uint8_t *xb, int T, float *out, size_t out_stride)
{
  g_return_if_fail (R >= 1 && R <= HONE_CPU_PANEL_ROWS && T >= 1);
  g_return_if_fail (hone_cpu_panel_needs_bias (type) == (xb != NULL));
  g_return_if_fail (hone_cpu_isa_supported (HONE_CPU_ISA_AVX512VNNI));
#ifdef HONE_HAVE_X86
  run_avx512 (panel, K, R, x, x_stride, xb, T, out, out_stride);
#else
  (void) panel;
  (void) K;
  (void) x;
  (void) x_stride;
  (void) out;
  (void) out_stride;
#endif
}
