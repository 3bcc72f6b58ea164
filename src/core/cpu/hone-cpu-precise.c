/* hone-cpu-precise.c — dequantizing weight rows for the precise mode. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize ("O3")
#endif

#include "hone-cpu-precise.h"

#include "hone-cpu-dot.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HONE_HAVE_X86 1
#include <immintrin.h>

#define AVX_TARGET __attribute__((target ("avx2,fma,f16c")))

/* Eight unsigned bytes → eight floats. */
static inline AVX_TARGET __m256
u8x8_to_ps (__m128i b)
{
  return _mm256_cvtepi32_ps (_mm256_cvtepu8_epi32 (b));
}

/* 32 nibbles of a Q4_0/Q4_1 block → 4 × 8 floats in element order: the low
 * nibbles of bytes 0..15 are elements 0..15, the high nibbles 16..31. */
static inline AVX_TARGET void
nibbles_to_ps (const uint8_t *qs, __m256 out[4])
{
  const __m128i mask = _mm_set1_epi8 (0x0f);
  __m128i raw = _mm_loadu_si128 ((const __m128i *) qs);
  __m128i lo = _mm_and_si128 (raw, mask), hi = _mm_and_si128 (_mm_srli_epi16 (raw, 4), mask);

  out[0] = u8x8_to_ps (lo);
  out[1] = u8x8_to_ps (_mm_srli_si128 (lo, 8));
  out[2] = u8x8_to_ps (hi);
  out[3] = u8x8_to_ps (_mm_srli_si128 (hi, 8));
}

/* Multiply then add (not FMA): the gguf package and hone_dequantize_row
 * round d·q before adding m, and the reference runs on their values. */
static AVX_TARGET void
dequant_q4_1_avx2 (const HoneBlockQ4_1 *b, int nb, float *y)
{
  for (int i = 0; i < nb; i++, y += 32)
    {
      __m256 q[4];
      __m256 d = _mm256_set1_ps (_cvtsh_ss (b[i].d)), m = _mm256_set1_ps (_cvtsh_ss (b[i].m));
      nibbles_to_ps (b[i].qs, q);
      for (int j = 0; j < 4; j++)
        _mm256_storeu_ps (y + 8 * j, _mm256_add_ps (_mm256_mul_ps (q[j], d), m));
    }
}

static AVX_TARGET void
dequant_q4_0_avx2 (const HoneBlockQ4_0 *b, int nb, float *y)
{
  const __m256 eight = _mm256_set1_ps (8.0f);
  for (int i = 0; i < nb; i++, y += 32)
    {
      __m256 q[4];
      __m256 d = _mm256_set1_ps (_cvtsh_ss (b[i].d));
      nibbles_to_ps (b[i].qs, q);
      /* q − 8 is exact in f32, so this is the one rounding of (q − 8)·d */
      for (int j = 0; j < 4; j++)
        _mm256_storeu_ps (y + 8 * j, _mm256_mul_ps (_mm256_sub_ps (q[j], eight), d));
    }
}

static AVX_TARGET void
dequant_q8_0_avx2 (const HoneBlockQ8_0 *b, int nb, float *y)
{
  for (int i = 0; i < nb; i++, y += 32)
    {
      __m256 d = _mm256_set1_ps (_cvtsh_ss (b[i].d));
      for (int j = 0; j < 4; j++)
        {
          __m128i q = _mm_loadl_epi64 ((const __m128i *) (b[i].qs + 8 * j));
          _mm256_storeu_ps (y + 8 * j, _mm256_mul_ps (_mm256_cvtepi32_ps (_mm256_cvtepi8_epi32 (q)), d));
        }
    }
}
#endif

gboolean
hone_cpu_precise_dequantizes (HoneDType type)
{
  return hone_cpu_type_uses_q8 (type);
}

void
hone_cpu_precise_dequant_rows (HoneDType type, const void *w, size_t w_stride, int R, int K, float *dst)
{
  for (int r = 0; r < R; r++)
    {
      const uint8_t *row = (const uint8_t *) w + (size_t) r * w_stride;
      float *y = dst + (size_t) r * K;
#ifdef HONE_HAVE_X86
      if (hone_cpu_isa () >= HONE_CPU_ISA_AVX2)
        switch (type)
          {
          case HONE_DTYPE_Q4_1: dequant_q4_1_avx2 ((const HoneBlockQ4_1 *) row, K / 32, y); continue;
          case HONE_DTYPE_Q4_0: dequant_q4_0_avx2 ((const HoneBlockQ4_0 *) row, K / 32, y); continue;
          case HONE_DTYPE_Q8_0: dequant_q8_0_avx2 ((const HoneBlockQ8_0 *) row, K / 32, y); continue;
          default: break;
          }
#endif
      hone_dequantize_row (type, row, y, K);
    }
}
