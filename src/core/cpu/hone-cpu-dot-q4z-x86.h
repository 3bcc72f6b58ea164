/* hone-cpu-dot-q4z-x86.h — the Q4Z (AWQ int4) tile kernel, included by
 * hone-cpu-dot.c once per ISA right after hone-cpu-dot-x86.h, with the same
 * X / XTARGET / XMADD macros defined (it uses X(hsum), X(f16) and
 * X(unpack_nibbles) from there).
 *
 * A Q4Z block is s·(q − z): the Q4_1 kernel's shape with d = s and the
 * offset term m = −z·s, so Σ w·x = s·d_x·Σ q·q_x − z·s·(d_x·Σ q_x).
 */

#define XQINLINE static inline __attribute__((always_inline)) XTARGET
#define XQACT(t, b) ((const HoneQ8Act *) ((const uint8_t *) x + (size_t) (t) * x_stride) + (b))

XQINLINE void
X(tile_q4z) (int K, const void *w, size_t w_stride, const void *x, size_t x_stride,
             float *out, size_t out_stride, const int R, const int T)
{
  const int nb = K / 32;
  __m256 acc[4][4];
  float sacc[4][4];

#ifdef XHAVE512
  /* the 512-bit Q4 tile: a Q4Z block is a Q4_1 block with m = −z·s */
  X(tile_q4_512) (K, w, w_stride, x, x_stride, out, out_stride, R, T, 2);
  return;
#endif
  if (T == 1)
    {
      X(tile_q4_t1) (K, w, w_stride, x, out, R, 2);   /* a Q4Z block is a Q4_1 block with m = −z·s */
      return;
    }

#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
      {
        acc[r][t] = _mm256_setzero_ps ();
        sacc[r][t] = 0.0f;
      }

  for (int b = 0; b < nb; b++)
    {
      __m256i q[4];
      float dw[4];

#pragma GCC unroll 4
      for (int r = 0; r < R; r++)
        {
          const HoneBlockQ4Z *blk = (const HoneBlockQ4Z *) ((const uint8_t *) w + (size_t) r * w_stride) + b;
          hone_cpu_prefetch_ahead (blk);
          dw[r] = X(f16) (blk->s);
          q[r] = X(unpack_nibbles) (blk->qs);
        }
#pragma GCC unroll 4
      for (int t = 0; t < T; t++)
        {
          const HoneQ8Act *a = XQACT (t, b);
          __m256i xv = _mm256_loadu_si256 ((const __m256i *) a->qs);
          __m256 xd = _mm256_set1_ps (a->d);
#pragma GCC unroll 4
          for (int r = 0; r < R; r++)
            {
              __m256 p = _mm256_cvtepi32_ps (XMADD (q[r], xv));
              acc[r][t] = _mm256_fmadd_ps (p, _mm256_mul_ps (_mm256_set1_ps (dw[r]), xd), acc[r][t]);
            }
        }
    }

  /* The zero-point term in a second pass, as tile_q4 does for Q4_1's min
   * (kept in the main loop its sums would crowd the vector registers):
   * −z·s per block is not stored, so eight blocks at a time gather their
   * (s, z) headers (20 bytes apart) and the activations' ds (40 bytes apart). */
  {
    const __m256i hdr_idx = _mm256_setr_epi32 (0, 5, 10, 15, 20, 25, 30, 35);
    const __m256i ds_idx = _mm256_setr_epi32 (1, 11, 21, 31, 41, 51, 61, 71);
    __m256 zacc[4][4];
    int b8 = nb & ~7;

#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
      for (int t = 0; t < T; t++)
        zacc[r][t] = _mm256_setzero_ps ();
    for (int b = 0; b < b8; b += 8)
      {
        __m256 mw[4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
          {
            const HoneBlockQ4Z *blk = (const HoneBlockQ4Z *) ((const uint8_t *) w + (size_t) r * w_stride) + b;
            __m256i hdr = _mm256_i32gather_epi32 ((const int *) (const void *) blk, hdr_idx, 4);
            /* low 16 bits: the f16 scale; bits 16–23: z */
            __m256i lo = _mm256_and_si256 (hdr, _mm256_set1_epi32 (0xffff));
            __m256i packed = _mm256_permute4x64_epi64 (_mm256_packus_epi32 (lo, _mm256_setzero_si256 ()), 0x08);
            __m256 sv = _mm256_cvtph_ps (_mm256_castsi256_si128 (packed));
            __m256 zv = _mm256_cvtepi32_ps (_mm256_and_si256 (_mm256_srli_epi32 (hdr, 16), _mm256_set1_epi32 (0xff)));
            mw[r] = _mm256_mul_ps (zv, sv);
          }
#pragma GCC unroll 4
        for (int t = 0; t < T; t++)
          {
            __m256 ds = _mm256_i32gather_ps ((const float *) (const void *) XQACT (t, b), ds_idx, 4);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++)
              zacc[r][t] = _mm256_fmadd_ps (mw[r], ds, zacc[r][t]);
          }
      }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
      for (int t = 0; t < T; t++)
        sacc[r][t] = -X(hsum) (zacc[r][t]);
  }
  for (int b = nb & ~7; b < nb; b++)
    {
      float mw[4];
#pragma GCC unroll 4
      for (int r = 0; r < R; r++)
        {
          const HoneBlockQ4Z *blk = (const HoneBlockQ4Z *) ((const uint8_t *) w + (size_t) r * w_stride) + b;
          mw[r] = -(float) blk->z * X(f16) (blk->s);
        }
#pragma GCC unroll 4
      for (int t = 0; t < T; t++)
        {
          float ds = XQACT (t, b)->ds;
#pragma GCC unroll 4
          for (int r = 0; r < R; r++)
            sacc[r][t] += mw[r] * ds;
        }
    }

#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
      out[(size_t) t * out_stride + r] = X(hsum) (acc[r][t]) + sacc[r][t];
}

/* Fully unrolled instances by (R, T), as XDISPATCH in hone-cpu-dot-x86.h:
 * T = 1 takes up to 4 rows, T > 1 goes in pairs of rows. */
static XTARGET void
X(tile_q4z_d) (int K, const void *w, size_t w_stride, int R, const void *x, size_t x_stride, int T,
               float *out, size_t out_stride)
{
  if (T == 1)
    {
      switch (R)
        {
        case 1: X(tile_q4z) (K, w, w_stride, x, x_stride, out, out_stride, 1, 1); break;
        case 2: X(tile_q4z) (K, w, w_stride, x, x_stride, out, out_stride, 2, 1); break;
        case 3: X(tile_q4z) (K, w, w_stride, x, x_stride, out, out_stride, 3, 1); break;
        default: X(tile_q4z) (K, w, w_stride, x, x_stride, out, out_stride, 4, 1); break;
        }
      return;
    }
  for (int r0 = 0; r0 < R; r0 += 2)
    {
      const void *wr = (const uint8_t *) w + (size_t) r0 * w_stride;
      float *o = out + r0;
      switch (MIN (2, R - r0) * 8 + T)
        {
        case 8 + 2: X(tile_q4z) (K, wr, w_stride, x, x_stride, o, out_stride, 1, 2); break;
        case 8 + 3: X(tile_q4z) (K, wr, w_stride, x, x_stride, o, out_stride, 1, 3); break;
        case 8 + 4: X(tile_q4z) (K, wr, w_stride, x, x_stride, o, out_stride, 1, 4); break;
        case 16 + 2: X(tile_q4z) (K, wr, w_stride, x, x_stride, o, out_stride, 2, 2); break;
        case 16 + 3: X(tile_q4z) (K, wr, w_stride, x, x_stride, o, out_stride, 2, 3); break;
        default: X(tile_q4z) (K, wr, w_stride, x, x_stride, o, out_stride, 2, 4); break;
        }
    }
}

#undef XQACT
#undef XQINLINE
