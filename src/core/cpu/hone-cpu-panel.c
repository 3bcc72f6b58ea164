/* hone-cpu-panel.c — repacking weight rows into panels, and the panel kernel. */
#if defined(__GNUC__) && !defined(__clang__)
/* Like the tiles, the kernel relies on full unrolling of its small arrays. */
#pragma GCC optimize ("O3")
#endif

#include "hone-cpu-panel.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HONE_HAVE_X86 1
#include <immintrin.h>
#include "hone-cpu-x86-vec.h"
#endif

/* A panel of N rows (16 or 8): q[K/4][N][4] (line g: elements 4g … 4g+3 of
 * rows 0 … N − 1), then from byte 16·K on a[K/32][N], b[K/32][N] and, for
 * Q6_K, a2[K/32][N] (hone-cpu-panel.h): 16·K + 6·K bytes at most. */
#define MAX_ROWS 16

gsize
hone_cpu_panel_bytes (int K)
{
  return (gsize) K * MAX_ROWS + 3 * (gsize) (K / 32) * MAX_ROWS * sizeof (float);
}

static inline float *
panel_a (void *panel, int K)
{
  return (float *) ((uint8_t *) panel + (size_t) K * MAX_ROWS);
}

#ifdef HONE_HAVE_X86

#define ATARGET __attribute__((target ("avx2,fma,f16c")))
#define VTARGET __attribute__((target ("avx2,fma,f16c,avxvnni")))
#define PTARGET __attribute__((target ("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512dq,avx512vnni")))
#define AINLINE static inline __attribute__((always_inline)) ATARGET
#define PINLINE static inline __attribute__((always_inline)) PTARGET

/* 16 packed bytes of a 32-block (byte j: element j low, j + 16 high) → 32 bytes. */
AINLINE __m256i
nibbles32 (const uint8_t *qs)
{
  const __m128i raw = _mm_loadu_si128 ((const __m128i *) qs);
  return _mm256_and_si256 (_mm256_set_m128i (_mm_srli_epi16 (raw, 4), raw), _mm256_set1_epi8 (0x0f));
}

/* Row @r's elements 64c … 64c + 63 as stored bytes (*lo: the first 32, *hi:
 * the next), and the a/b (a2) terms of its blocks 2c and 2c + 1 (for Q4_K, of
 * the super-block's 8 blocks when c is its first 64) at [block][@nr rows]. */
AINLINE void
unpack64 (HoneDType type, const uint8_t *row, int K, int c, float *a, float *b, int r, int nr,
          __m256i *lo, __m256i *hi)
{
  switch (type)
    {
    case HONE_DTYPE_Q4_0:
      {
        const HoneBlockQ4_0 *blk = (const HoneBlockQ4_0 *) row + 2 * c;
        for (int h = 0; h < 2; h++)
          {
            const float d = _cvtsh_ss (blk[h].d);
            a[(2 * c + h) * nr + r] = d;
            b[(2 * c + h) * nr + r] = -8.0f * d;
          }
        *lo = nibbles32 (blk[0].qs);
        *hi = nibbles32 (blk[1].qs);
        return;
      }
    case HONE_DTYPE_Q4_1:
      {
        const HoneBlockQ4_1 *blk = (const HoneBlockQ4_1 *) row + 2 * c;
        for (int h = 0; h < 2; h++)
          {
            a[(2 * c + h) * nr + r] = _cvtsh_ss (blk[h].d);
            b[(2 * c + h) * nr + r] = _cvtsh_ss (blk[h].m);
          }
        *lo = nibbles32 (blk[0].qs);
        *hi = nibbles32 (blk[1].qs);
        return;
      }
    case HONE_DTYPE_Q4Z:
      {
        const HoneBlockQ4Z *blk = (const HoneBlockQ4Z *) row + 2 * c;
        for (int h = 0; h < 2; h++)
          {
            const float sc = _cvtsh_ss (blk[h].s);
            a[(2 * c + h) * nr + r] = sc;
            b[(2 * c + h) * nr + r] = -(float) blk[h].z * sc;
          }
        *lo = nibbles32 (blk[0].qs);
        *hi = nibbles32 (blk[1].qs);
        return;
      }
    case HONE_DTYPE_Q8_0:
      {
        const HoneBlockQ8_0 *blk = (const HoneBlockQ8_0 *) row + 2 * c;
        const __m256i flip = _mm256_set1_epi8 ((char) 0x80);   /* q + 128 */
        for (int h = 0; h < 2; h++)
          {
            const float d = _cvtsh_ss (blk[h].d);
            a[(2 * c + h) * nr + r] = d;
            b[(2 * c + h) * nr + r] = -128.0f * d;
          }
        *lo = _mm256_xor_si256 (_mm256_loadu_si256 ((const __m256i *) blk[0].qs), flip);
        *hi = _mm256_xor_si256 (_mm256_loadu_si256 ((const __m256i *) blk[1].qs), flip);
        return;
      }
    case HONE_DTYPE_Q6_K:
      {
        /* Group c % 4 of the super-block: elements 0–63 (p = 0) or 64–127
         * (p = 1) of its half n; the bit tricks are the Q6_K tiles'. */
        const HoneBlockQ6_K *blk = (const HoneBlockQ6_K *) row + c / 4;
        const int n = (c % 4) / 2, p = c % 2;
        const __m256i m4 = _mm256_set1_epi8 (0x0f), m30 = _mm256_set1_epi8 (0x30);
        const __m256i l0 = _mm256_loadu_si256 ((const __m256i *) (blk->ql + 64 * n));
        const __m256i l1 = _mm256_loadu_si256 ((const __m256i *) (blk->ql + 64 * n + 32));
        const __m256i hh = _mm256_loadu_si256 ((const __m256i *) (blk->qh + 32 * n));
        const float d = _cvtsh_ss (blk->d);
        float *a2 = b + (size_t) (K / 32) * nr;
        uint64_t sum8[8];

        if (p == 0)   /* qh bits 0–1 (first 32) and 2–3 (next 32) to bits 4–5 */
          {
            *lo = _mm256_or_si256 (_mm256_and_si256 (l0, m4), _mm256_and_si256 (_mm256_slli_epi16 (hh, 4), m30));
            *hi = _mm256_or_si256 (_mm256_and_si256 (l1, m4), _mm256_and_si256 (_mm256_slli_epi16 (hh, 2), m30));
          }
        else          /* bits 4–5 and 6–7 */
          {
            *lo = _mm256_or_si256 (_mm256_and_si256 (_mm256_srli_epi16 (l0, 4), m4), _mm256_and_si256 (hh, m30));
            *hi = _mm256_or_si256 (_mm256_and_si256 (_mm256_srli_epi16 (l1, 4), m4),
                                   _mm256_and_si256 (_mm256_srli_epi16 (hh, 2), m30));
          }
        /* Σ of each 8 stored values → each 16's Σ (q − 32) */
        _mm256_storeu_si256 ((__m256i *) sum8, _mm256_sad_epu8 (*lo, _mm256_setzero_si256 ()));
        _mm256_storeu_si256 ((__m256i *) (sum8 + 4), _mm256_sad_epu8 (*hi, _mm256_setzero_si256 ()));
        for (int h = 0; h < 2; h++)
          {
            const int s = 2 * c + h, j = 2 * p + h;   /* block s is quarter j of half n */
            const float a0 = d * blk->scales[8 * n + 2 * j], a1 = d * blk->scales[8 * n + 2 * j + 1];
            const float c0 = (float) ((int) (sum8[4 * h] + sum8[4 * h + 1]) - 16 * 32);
            const float c1 = (float) ((int) (sum8[4 * h + 2] + sum8[4 * h + 3]) - 16 * 32);
            a[s * nr + r] = a0;
            a2[s * nr + r] = a1;
            b[s * nr + r] = -128.0f * (a0 * c0 + a1 * c1);
          }
        *lo = _mm256_sub_epi8 (*lo, _mm256_set1_epi8 (32));
        *hi = _mm256_sub_epi8 (*hi, _mm256_set1_epi8 (32));
        return;
      }
    default: /* HONE_DTYPE_Q4_K */
      {
        const HoneBlockQ4_K *blk = (const HoneBlockQ4_K *) row + c / 4;
        const int j = c % 4;
        const __m256i raw = _mm256_loadu_si256 ((const __m256i *) (blk->qs + 32 * j));
        const __m256i m4 = _mm256_set1_epi8 (0x0f);
        if (j == 0)
          {
            const __m128i scm = hone_x86_q4k_scales_mins (blk->scales);
            float sv[8], mv[8];

            _mm256_storeu_ps (sv, _mm256_mul_ps (_mm256_set1_ps (_cvtsh_ss (blk->d)),
                                                 _mm256_cvtepi32_ps (_mm256_cvtepu8_epi32 (scm))));
            _mm256_storeu_ps (mv, _mm256_mul_ps (_mm256_set1_ps (-_cvtsh_ss (blk->dmin)),
                                                 _mm256_cvtepi32_ps (_mm256_cvtepu8_epi32 (_mm_srli_si128 (scm, 8)))));
            for (int s = 0; s < 8; s++)
              {
                a[(2 * c + s) * nr + r] = sv[s];
                b[(2 * c + s) * nr + r] = mv[s];
              }
          }
        *lo = _mm256_and_si256 (raw, m4);
        *hi = _mm256_and_si256 (_mm256_srli_epi16 (raw, 4), m4);
        return;
      }
    }
}

/* Rows 0 … @R − 1 of the panel's 64 elements from c on: unpacked into
 * @lo/@hi (zeros, with zero a/b terms, for rows past @R). */
AINLINE void
unpack_rows (HoneDType type, const void *w, size_t w_stride, int R, int K, int c, float *a, float *b, int nr,
             size_t ahead_step, __m256i *lo, __m256i *hi)
{
  for (int r = 0; r < nr; r++)
    {
      if (r < R)
        {
          const uint8_t *row = (const uint8_t *) w + (size_t) r * w_stride;
          /* The chunks a thread packs next follow this one in memory (its own
           * range, hone-cpu-matmul.c): their weights are on the way from
           * memory while this panel runs, as in the tiles. */
          hone_cpu_prefetch_ahead (row + (size_t) c * ahead_step);
          unpack64 (type, row, K, c, a, b, r, nr, lo + r, hi + r);
        }
      else
        {
          lo[r] = hi[r] = _mm256_setzero_si256 ();
          if (type != HONE_DTYPE_Q4_K || c % 4 == 0)
            for (int s = 2 * c; s < 2 * c + (type == HONE_DTYPE_Q4_K ? 8 : 2); s++)
              {
                a[s * nr + r] = b[s * nr + r] = 0.0f;
                if (type == HONE_DTYPE_Q6_K)
                  b[(size_t) (K / 32) * nr + s * nr + r] = 0.0f;   /* a2 */
              }
        }
    }
}

/* ---- 16-row panels, AVX-512 VNNI */

PINLINE void
pack16_type (HoneDType type, const void *w, size_t w_stride, int R, int K, void *panel)
{
  uint8_t *q = panel;
  float *a = panel_a (panel, K), *b = a + (size_t) (K / 32) * 16;
  const size_t ahead_step = w_stride / (K / 64);   /* a row's stored bytes per 64 elements, about */

  for (int c = 0; c < K / 64; c++)
    {
      __m256i lo[16], hi[16];
      __m512i rows[16], lines[16];

      unpack_rows (type, w, w_stride, R, K, c, a, b, 16, ahead_step, lo, hi);
      for (int r = 0; r < 16; r++)
        rows[r] = _mm512_inserti64x4 (_mm512_castsi256_si512 (lo[r]), hi[r], 1);
      hone_x86_transpose16 (rows, lines);
      for (int g = 0; g < 16; g++)
        _mm512_store_si512 ((void *) (q + ((size_t) c * 16 + g) * 64), lines[g]);
    }
}

static PTARGET void
pack16 (HoneDType type, const void *w, size_t w_stride, int R, int K, void *panel)
{
  /* one instance per type, so unpack64's switch folds away */
  switch (type)
    {
    case HONE_DTYPE_Q4_0: pack16_type (HONE_DTYPE_Q4_0, w, w_stride, R, K, panel); break;
    case HONE_DTYPE_Q4_1: pack16_type (HONE_DTYPE_Q4_1, w, w_stride, R, K, panel); break;
    case HONE_DTYPE_Q4Z: pack16_type (HONE_DTYPE_Q4Z, w, w_stride, R, K, panel); break;
    case HONE_DTYPE_Q8_0: pack16_type (HONE_DTYPE_Q8_0, w, w_stride, R, K, panel); break;
    case HONE_DTYPE_Q6_K: pack16_type (HONE_DTYPE_Q6_K, w, w_stride, R, K, panel); break;
    default: pack16_type (HONE_DTYPE_Q4_K, w, w_stride, R, K, panel); break;
    }
}

/* 16 rows × T tokens (T ≤ 8): per block and token, 8 vpdpbusd into an integer
 * accumulator (two for Q6_K's 16-element scales), then one conversion per
 * accumulator and two or three FMAs. @q6: the lines are signed (q − 32) and
 * @xb holds the activations + 128 (hone_cpu_panel_bias_act). */
PINLINE void
run16_tile (const void *panel, int K, int R, const HoneQ8Act *x, size_t x_stride, const uint8_t *xb,
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
          const __m512i line = _mm512_load_si512 ((const void *) (q + ((size_t) s * 8 + g) * 64));
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

/* Tokens TMAX at a time, then the rest as one tile; @TILE the kernel's tile
 * function (run16_tile: TMAX 8; run8v_tile, run8a_tile: 4 — their arrays
 * are sized 8 for the switch's cases past TMAX, which never run). */
#define RUN_TOKENS(TILE, TMAX, ...)                                                              \
  do                                                                                             \
    {                                                                                            \
      int t_ = 0;                                                                                \
      for (; t_ + TMAX <= T; t_ += TMAX)                                                         \
        TILE (panel, K, R, (const HoneQ8Act *) ((const uint8_t *) x + (size_t) t_ * x_stride),   \
              x_stride, xb + (size_t) t_ * K, out + (size_t) t_ * out_stride, out_stride,        \
              __VA_ARGS__, TMAX);                                                                \
      if (t_ == T)                                                                               \
        break;                                                                                   \
      x = (const HoneQ8Act *) ((const uint8_t *) x + (size_t) t_ * x_stride);                    \
      xb += (size_t) t_ * K;                                                                     \
      out += (size_t) t_ * out_stride;                                                           \
      switch (T - t_)                                                                            \
        {                                                                                        \
        case 1: TILE (panel, K, R, x, x_stride, xb, out, out_stride, __VA_ARGS__, 1); break;     \
        case 2: TILE (panel, K, R, x, x_stride, xb, out, out_stride, __VA_ARGS__, 2); break;     \
        case 3: TILE (panel, K, R, x, x_stride, xb, out, out_stride, __VA_ARGS__, 3); break;     \
        case 4: TILE (panel, K, R, x, x_stride, xb, out, out_stride, __VA_ARGS__, 4); break;     \
        case 5: TILE (panel, K, R, x, x_stride, xb, out, out_stride, __VA_ARGS__, 5); break;     \
        case 6: TILE (panel, K, R, x, x_stride, xb, out, out_stride, __VA_ARGS__, 6); break;     \
        default: TILE (panel, K, R, x, x_stride, xb, out, out_stride, __VA_ARGS__, 7); break;    \
        }                                                                                        \
    }                                                                                            \
  while (0)

static PTARGET void
run16 (const void *panel, int K, int R, const HoneQ8Act *x, size_t x_stride, const uint8_t *xb, int T,
       float *out, size_t out_stride)
{
  /* xb (only Q6_K panels use it) picks the instance */
  if (xb != NULL)
    RUN_TOKENS (run16_tile, 8, TRUE);
  else
    RUN_TOKENS (run16_tile, 8, FALSE);
}

/* ---- 8-row panels, AVX2 and AVX-VNNI (32-byte lines) */

AINLINE void
pack8_type (HoneDType type, const void *w, size_t w_stride, int R, int K, void *panel)
{
  uint8_t *q = panel;
  float *a = panel_a (panel, K), *b = a + (size_t) (K / 32) * 8;
  const size_t ahead_step = w_stride / (K / 64);

  for (int c = 0; c < K / 64; c++)
    {
      __m256i lo[8], hi[8], lines[8];

      unpack_rows (type, w, w_stride, R, K, c, a, b, 8, ahead_step, lo, hi);
      hone_x86_transpose8 (lo, lines);
      for (int g = 0; g < 8; g++)
        _mm256_store_si256 ((__m256i *) (q + ((size_t) c * 16 + g) * 32), lines[g]);
      hone_x86_transpose8 (hi, lines);
      for (int g = 0; g < 8; g++)
        _mm256_store_si256 ((__m256i *) (q + ((size_t) c * 16 + 8 + g) * 32), lines[g]);
    }
}

static ATARGET void
pack8 (HoneDType type, const void *w, size_t w_stride, int R, int K, void *panel)
{
  switch (type)
    {
    case HONE_DTYPE_Q4_0: pack8_type (HONE_DTYPE_Q4_0, w, w_stride, R, K, panel); break;
    case HONE_DTYPE_Q4_1: pack8_type (HONE_DTYPE_Q4_1, w, w_stride, R, K, panel); break;
    case HONE_DTYPE_Q4Z: pack8_type (HONE_DTYPE_Q4Z, w, w_stride, R, K, panel); break;
    case HONE_DTYPE_Q8_0: pack8_type (HONE_DTYPE_Q8_0, w, w_stride, R, K, panel); break;
    case HONE_DTYPE_Q6_K: pack8_type (HONE_DTYPE_Q6_K, w, w_stride, R, K, panel); break;
    default: pack8_type (HONE_DTYPE_Q4_K, w, w_stride, R, K, panel); break;
    }
}

/* 4 unsigned × 4 signed bytes a lane, summed into @acc: vpdpbusd on AVX-VNNI;
 * on AVX2 vpmaddubsw (no saturation: the panels' products stay ≤ 2·255·32 or
 * 2·15·127 a pair — Q8_0, whose u reach 255 against |q| ≤ 127, takes the
 * tiles there) and vpmaddwd by ones. */
#define DOT8_VNNI(ACC, U, S) _mm256_dpbusd_avx_epi32 ((ACC), (U), (S))
#define DOT8_AVX2(ACC, U, S) \
  _mm256_add_epi32 ((ACC), _mm256_madd_epi16 (_mm256_maddubs_epi16 ((U), (S)), _mm256_set1_epi16 (1)))
/* The 4-bit types' products (u ≤ 15, |q| ≤ 127: ≤ 3,810 a vpmaddubsw lane) add
 * up over a block's 8 lines in 16 bits (≤ 30,480); one vpmaddwd then widens
 * them. With VNNI the block's sums are 32-bit from the start. */
#define DOTQ4_VNNI(ACC, U, S) _mm256_dpbusd_avx_epi32 ((ACC), (U), (S))
#define FINQ4_VNNI(ACC) (ACC)
#define DOTQ4_AVX2(ACC, U, S) _mm256_add_epi16 ((ACC), _mm256_maddubs_epi16 ((U), (S)))
#define FINQ4_AVX2(ACC) _mm256_madd_epi16 ((ACC), _mm256_set1_epi16 (1))

/* 8 rows × T tokens (T ≤ 4: 16 vector registers). */
#define RUN8_TILE_BODY(DOT8, DOTQ4, FINQ4)                                                                     \
  {                                                                                              \
    const int nb = K / 32;                                                                       \
    const uint8_t *q = panel;                                                                    \
    const float *a = panel_a ((void *) panel, K), *b = a + (size_t) nb * 8, *a2 = b + (size_t) nb * 8; \
    const HoneQ8Act *xr[8];                                                                      \
    const float *xs[8];                                                                          \
    __m256 acc[8];                                                                               \
    float keep[8][8];                                                                            \
                                                                                                 \
    for (int t = 0; t < T; t++)                                                                  \
      {                                                                                          \
        xr[t] = (const HoneQ8Act *) ((const uint8_t *) x + (size_t) t * x_stride);               \
        xs[t] = hone_cpu_act_scales (xr[t], K);                                                  \
        acc[t] = _mm256_setzero_ps ();                                                           \
      }                                                                                          \
    for (int s = 0; s < nb; s++)                                                                 \
      {                                                                                          \
        __m256i sum[8], sum2[8];                                                                 \
        for (int t = 0; t < T; t++)                                                              \
          sum[t] = sum2[t] = _mm256_setzero_si256 ();                                            \
        for (int g = 0; g < 8; g++)                                                              \
          {                                                                                      \
            const __m256i line = _mm256_load_si256 ((const __m256i *) (q + ((size_t) s * 8 + g) * 32)); \
            for (int t = 0; t < T; t++)                                                          \
              {                                                                                  \
                int32_t x4;                                                                      \
                if (q6)                                                                          \
                  {                                                                              \
                    memcpy (&x4, xb + (size_t) t * K + 32 * s + 4 * g, 4);                       \
                    if (g < 4)                                                                   \
                      sum[t] = DOT8 (sum[t], _mm256_set1_epi32 (x4), line);                \
                    else                                                                         \
                      sum2[t] = DOT8 (sum2[t], _mm256_set1_epi32 (x4), line);              \
                  }                                                                              \
                else                                                                             \
                  {                                                                              \
                    memcpy (&x4, xr[t][s].qs + 4 * g, 4);                                        \
                    sum[t] = DOTQ4 (sum[t], line, _mm256_set1_epi32 (x4));                       \
                  }                                                                              \
              }                                                                                  \
          }                                                                                      \
        {                                                                                        \
          const __m256 as = _mm256_load_ps (a + (size_t) s * 8), bs = _mm256_load_ps (b + (size_t) s * 8); \
          if (q6)                                                                                \
            {                                                                                    \
              const __m256 as2 = _mm256_load_ps (a2 + (size_t) s * 8);                           \
              for (int t = 0; t < T; t++)                                                        \
                {                                                                                \
                  const __m256 v = _mm256_fmadd_ps (_mm256_cvtepi32_ps (sum[t]), as,             \
                                                    _mm256_fmadd_ps (_mm256_cvtepi32_ps (sum2[t]), as2, bs)); \
                  acc[t] = _mm256_fmadd_ps (v, _mm256_set1_ps (xs[t][s]), acc[t]);              \
                }                                                                                \
            }                                                                                    \
          else                                                                                   \
            for (int t = 0; t < T; t++)                                                          \
              {                                                                                  \
                sum[t] = FINQ4 (sum[t]);                                                         \
                acc[t] = _mm256_fmadd_ps (_mm256_cvtepi32_ps (sum[t]),                           \
                                          _mm256_mul_ps (as, _mm256_set1_ps (xs[t][s])), acc[t]); \
                acc[t] = _mm256_fmadd_ps (bs, _mm256_set1_ps (xs[t][nb + s]), acc[t]);           \
              }                                                                                  \
        }                                                                                        \
      }                                                                                          \
    for (int t = 0; t < T; t++)                                                                  \
      {                                                                                          \
        _mm256_storeu_ps (keep[t], acc[t]);                                                      \
        memcpy (out + (size_t) t * out_stride, keep[t], (size_t) R * sizeof (float));           \
      }                                                                                          \
  }

static inline __attribute__((always_inline)) VTARGET void
run8v_tile (const void *panel, int K, int R, const HoneQ8Act *x, size_t x_stride, const uint8_t *xb,
            float *out, size_t out_stride, const gboolean q6, const int T)
RUN8_TILE_BODY (DOT8_VNNI, DOTQ4_VNNI, FINQ4_VNNI)

AINLINE void
run8a_tile (const void *panel, int K, int R, const HoneQ8Act *x, size_t x_stride, const uint8_t *xb,
            float *out, size_t out_stride, const gboolean q6, const int T)
RUN8_TILE_BODY (DOT8_AVX2, DOTQ4_AVX2, FINQ4_AVX2)

static VTARGET void
run8v (const void *panel, int K, int R, const HoneQ8Act *x, size_t x_stride, const uint8_t *xb, int T,
       float *out, size_t out_stride)
{
  if (xb != NULL)
    RUN_TOKENS (run8v_tile, 4, TRUE);
  else
    RUN_TOKENS (run8v_tile, 4, FALSE);
}

static ATARGET void
run8a (const void *panel, int K, int R, const HoneQ8Act *x, size_t x_stride, const uint8_t *xb, int T,
       float *out, size_t out_stride)
{
  if (xb != NULL)
    RUN_TOKENS (run8a_tile, 4, TRUE);
  else
    RUN_TOKENS (run8a_tile, 4, FALSE);
}

static ATARGET void
bias_avx2 (const HoneQ8Act *x, size_t x_stride, int K, int T, uint8_t *xb)
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
  return hone_cpu_switch_get (&panels_on, "HONE_CPU_PANELS");
}

gboolean
hone_cpu_panels_set_enabled (gboolean on)
{
  return hone_cpu_switch_set (&panels_on, "HONE_CPU_PANELS", on);
}

int
hone_cpu_panel_rows (HoneCpuIsa isa)
{
  return isa == HONE_CPU_ISA_AVX512VNNI ? 16 : 8;
}

gboolean
hone_cpu_panel_supported (HoneDType type, int K, HoneCpuIsa isa)
{
#ifdef HONE_HAVE_X86
  if (isa == HONE_CPU_ISA_PORTABLE || isa >= HONE_CPU_ISA_COUNT_ || K <= 0 || K % 64 != 0)
    return FALSE;
  switch (type)
    {
    case HONE_DTYPE_Q8_0:
      /* vpmaddubsw would saturate on q + 128 against the activations */
      return isa != HONE_CPU_ISA_AVX2;
    case HONE_DTYPE_Q4_0:
    case HONE_DTYPE_Q4_1:
    case HONE_DTYPE_Q4Z:
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

gboolean
hone_cpu_panel_needs_bias (HoneDType type)
{
  return type == HONE_DTYPE_Q6_K;
}

void
hone_cpu_panel_bias_act (const HoneQ8Act *x, size_t x_stride, int K, int T, uint8_t *xb)
{
  g_return_if_fail (K % 32 == 0 && T >= 1);
#ifdef HONE_HAVE_X86
  if (hone_cpu_isa_supported (HONE_CPU_ISA_AVX2))
    {
      bias_avx2 (x, x_stride, K, T, xb);
      return;
    }
#endif
  for (int t = 0; t < T; t++)
    {
      const HoneQ8Act *row = (const HoneQ8Act *) ((const uint8_t *) x + (size_t) t * x_stride);
      for (int k = 0; k < K; k++)
        xb[(size_t) t * K + k] = (uint8_t) (row[k / 32].qs[k % 32] + 128);
    }
}

void
hone_cpu_panel_pack (HoneCpuIsa isa, HoneDType type, const void *w, size_t w_stride, int R, int K, void *panel)
{
  g_return_if_fail (R >= 1 && R <= hone_cpu_panel_rows (isa));
  g_return_if_fail (((uintptr_t) panel & 63) == 0);
  g_return_if_fail (hone_cpu_panel_supported (type, K, isa) && hone_cpu_isa_supported (isa));
#ifdef HONE_HAVE_X86
  if (isa == HONE_CPU_ISA_AVX512VNNI)
    pack16 (type, w, w_stride, R, K, panel);
  else
    pack8 (type, w, w_stride, R, K, panel);
#else
  (void) w;
  (void) w_stride;
#endif
}

void
hone_cpu_panel_run (HoneCpuIsa isa, HoneDType type, const void *panel, int K, int R, const HoneQ8Act *x,
                    size_t x_stride, const uint8_t *xb, int T, float *out, size_t out_stride)
{
  g_return_if_fail (R >= 1 && R <= hone_cpu_panel_rows (isa) && T >= 1);
  g_return_if_fail (hone_cpu_panel_needs_bias (type) == (xb != NULL));
  g_return_if_fail (hone_cpu_panel_supported (type, K, isa) && hone_cpu_isa_supported (isa));
#ifdef HONE_HAVE_X86
  switch (isa)
    {
    case HONE_CPU_ISA_AVX512VNNI: run16 (panel, K, R, x, x_stride, xb, T, out, out_stride); break;
    case HONE_CPU_ISA_AVXVNNI: run8v (panel, K, R, x, x_stride, xb, T, out, out_stride); break;
    default: run8a (panel, K, R, x, x_stride, xb, T, out, out_stride); break;
    }
#else
  (void) panel;
  (void) x;
  (void) x_stride;
  (void) out;
  (void) out_stride;
#endif
}
