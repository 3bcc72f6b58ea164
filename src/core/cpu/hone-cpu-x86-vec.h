/* hone-cpu-x86-vec.h — small AVX2 / AVX-512 helpers shared by the CPU kernels
 * (panels, attention batches, per-token ops). Include on x86 only; every
 * function carries its own target attribute. */
#pragma once

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define HONE_X86_256_TARGET __attribute__((target ("avx2,fma,f16c")))
#define HONE_X86_256_INLINE static inline __attribute__((always_inline)) HONE_X86_256_TARGET
#define HONE_X86_512_TARGET __attribute__((target ("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512dq")))
#define HONE_X86_512_INLINE static inline __attribute__((always_inline)) HONE_X86_512_TARGET

/* A Q4_K super-block's 8 sub-block scales (bytes 0–7) and 8 mins (bytes 8–15),
 * 6 bits each, decoded from its 12 packed bytes at once (the rules of
 * hone_cpu_q4k_scale_min, on 3 words). SSE2: every x86-64 has it. */
static inline __m128i
hone_x86_q4k_scales_mins (const uint8_t *scales)
{
  uint32_t u[3];

  memcpy (u, scales, 12);
  return _mm_setr_epi32 ((int) (u[0] & 0x3f3f3f3f),
                         (int) ((u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4)),
                         (int) (u[1] & 0x3f3f3f3f),
                         (int) (((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4)));
}

/* e^x, 16 lanes: Cephes' expf (range reduction by n = round(x·log2 e), a
 * degree-6 polynomial), 2^n by vscalefps; within 2 ulp of expf. Below −87.3
 * the result is ~1e-38 rather than 0 (callers that need 0 mask those lanes);
 * past 88.7 it is +inf; NaN stays NaN. */
HONE_X86_512_INLINE __m512
hone_x86_exp512 (__m512 x)
{
  __m512 n, r, p;

  x = _mm512_max_ps (_mm512_set1_ps (-87.33654f), x);   /* NaN in x: x */
  n = _mm512_roundscale_ps (_mm512_mul_ps (x, _mm512_set1_ps (1.44269504088896341f)),
                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  r = _mm512_fnmadd_ps (n, _mm512_set1_ps (0.693359375f), x);
  r = _mm512_fnmadd_ps (n, _mm512_set1_ps (-2.12194440e-4f), r);
  p = _mm512_set1_ps (1.9875691500e-4f);
  p = _mm512_fmadd_ps (p, r, _mm512_set1_ps (1.3981999507e-3f));
  p = _mm512_fmadd_ps (p, r, _mm512_set1_ps (8.3334519073e-3f));
  p = _mm512_fmadd_ps (p, r, _mm512_set1_ps (4.1665795894e-2f));
  p = _mm512_fmadd_ps (p, r, _mm512_set1_ps (1.6666665459e-1f));
  p = _mm512_fmadd_ps (p, r, _mm512_set1_ps (5.0000001201e-1f));
  p = _mm512_fmadd_ps (p, _mm512_mul_ps (r, r), _mm512_add_ps (r, _mm512_set1_ps (1.0f)));
  return _mm512_scalef_ps (p, n);
}

/* e^x, 8 lanes: hone_x86_exp512's steps, with 2^n built in the exponent bits
 * (x clamped to [−87.3, 88.4], so n stays a normal exponent: past 88.4 the
 * result is 2.4e38 rather than +inf); NaN stays NaN. */
HONE_X86_256_INLINE __m256
hone_x86_exp256 (__m256 x)
{
  __m256 n, r, p;
  __m256i e;

  x = _mm256_max_ps (_mm256_set1_ps (-87.33654f), x);   /* NaN in x: x */
  x = _mm256_min_ps (_mm256_set1_ps (88.37626f), x);
  n = _mm256_round_ps (_mm256_mul_ps (x, _mm256_set1_ps (1.44269504088896341f)),
                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  r = _mm256_fnmadd_ps (n, _mm256_set1_ps (0.693359375f), x);
  r = _mm256_fnmadd_ps (n, _mm256_set1_ps (-2.12194440e-4f), r);
  p = _mm256_set1_ps (1.9875691500e-4f);
  p = _mm256_fmadd_ps (p, r, _mm256_set1_ps (1.3981999507e-3f));
  p = _mm256_fmadd_ps (p, r, _mm256_set1_ps (8.3334519073e-3f));
  p = _mm256_fmadd_ps (p, r, _mm256_set1_ps (4.1665795894e-2f));
  p = _mm256_fmadd_ps (p, r, _mm256_set1_ps (1.6666665459e-1f));
  p = _mm256_fmadd_ps (p, r, _mm256_set1_ps (5.0000001201e-1f));
  p = _mm256_fmadd_ps (p, _mm256_mul_ps (r, r), _mm256_add_ps (r, _mm256_set1_ps (1.0f)));
  e = _mm256_slli_epi32 (_mm256_add_epi32 (_mm256_cvtps_epi32 (n), _mm256_set1_epi32 (127)), 23);
  return _mm256_mul_ps (p, _mm256_castsi256_ps (e));
}

/* 8 rows of 8 dwords → 8 vectors of the rows' dword e. */
HONE_X86_256_INLINE void
hone_x86_transpose8 (const __m256i r[8], __m256i o[8])
{
  __m256i t[8], u[8];

  for (int i = 0; i < 8; i += 2)
    {
      t[i] = _mm256_unpacklo_epi32 (r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_epi32 (r[i], r[i + 1]);
    }
  for (int G = 0; G < 8; G += 4)
    {
      u[G + 0] = _mm256_unpacklo_epi64 (t[G], t[G + 2]);
      u[G + 1] = _mm256_unpackhi_epi64 (t[G], t[G + 2]);
      u[G + 2] = _mm256_unpacklo_epi64 (t[G + 1], t[G + 3]);
      u[G + 3] = _mm256_unpackhi_epi64 (t[G + 1], t[G + 3]);
    }
  /* u[4G + e], 128-bit lane L: dword 4L + e of rows 4G … 4G + 3 */
  for (int e = 0; e < 4; e++)
    {
      o[e] = _mm256_permute2x128_si256 (u[e], u[4 + e], 0x20);
      o[4 + e] = _mm256_permute2x128_si256 (u[e], u[4 + e], 0x31);
    }
}

/* 16 vectors of 16 dwords (rows) → 16 vectors of the rows' dword g (4×4
 * transposes in each 128-bit lane, then of the lanes). */
HONE_X86_512_INLINE void
hone_x86_transpose16 (const __m512i r[16], __m512i o[16])
{
  __m512i t[16], u[16];

  for (int i = 0; i < 16; i += 2)
    {
      t[i] = _mm512_unpacklo_epi32 (r[i], r[i + 1]);
      t[i + 1] = _mm512_unpackhi_epi32 (r[i], r[i + 1]);
    }
  for (int G = 0; G < 16; G += 4)
    {
      u[G + 0] = _mm512_unpacklo_epi64 (t[G], t[G + 2]);
      u[G + 1] = _mm512_unpackhi_epi64 (t[G], t[G + 2]);
      u[G + 2] = _mm512_unpacklo_epi64 (t[G + 1], t[G + 3]);
      u[G + 3] = _mm512_unpackhi_epi64 (t[G + 1], t[G + 3]);
    }
  /* u[4G + e], 128-bit lane L: dword 4L + e of rows 4G … 4G + 3 */
  for (int e = 0; e < 4; e++)
    {
      const __m512i s0 = _mm512_shuffle_i32x4 (u[e], u[4 + e], 0x44);
      const __m512i s1 = _mm512_shuffle_i32x4 (u[e], u[4 + e], 0xee);
      const __m512i s2 = _mm512_shuffle_i32x4 (u[8 + e], u[12 + e], 0x44);
      const __m512i s3 = _mm512_shuffle_i32x4 (u[8 + e], u[12 + e], 0xee);
      o[0 + e] = _mm512_shuffle_i32x4 (s0, s2, 0x88);
      o[4 + e] = _mm512_shuffle_i32x4 (s0, s2, 0xdd);
      o[8 + e] = _mm512_shuffle_i32x4 (s1, s3, 0x88);
      o[12 + e] = _mm512_shuffle_i32x4 (s1, s3, 0xdd);
    }
}
