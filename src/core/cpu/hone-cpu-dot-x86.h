/* hone-cpu-dot-x86.h — x86 tile kernels, included by hone-cpu-dot.c once per ISA.
 *
 * Before including, include hone-cpu-x86-vec.h and define:
 *   X(name)      the name with the ISA suffix (name##_avx2, name##_vnni)
 *   XTARGET      __attribute__((target("…"))) for every function here
 *   XMADD(u, s)  eight int32 lanes, lane i = Σ_{j<4} u[4i+j]·s[4i+j] (u unsigned, s signed bytes)
 *
 * Every kernel has the same shape: load and unpack the weight blocks of R rows
 * once, then run them against T tokens, keeping R·T accumulators in registers.
 * Lane i of XMADD covers elements 4i..4i+3 of a 32-block, so lanes 0–3 are the
 * first 16 elements and 4–7 the second (Q6_K's two sub-block scales).
 */

#define XINLINE static inline __attribute__((always_inline)) XTARGET

XINLINE float
X(hsum) (__m256 v)
{
  __m128 s = _mm_add_ps (_mm256_castps256_ps128 (v), _mm256_extractf128_ps (v, 1));
  s = _mm_add_ps (s, _mm_movehl_ps (s, s));
  s = _mm_add_ss (s, _mm_movehdup_ps (s));
  return _mm_cvtss_f32 (s);
}

XINLINE float
X(f16) (uint16_t h)
{
  return _cvtsh_ss (h);
}

/* 16 bytes of packed nibbles → 32 bytes: element j (low nibble of byte j) in
 * byte j, element j+16 (high nibble) in byte j+16. */
XINLINE __m256i
X(unpack_nibbles) (const uint8_t *qs)
{
  __m128i raw = _mm_loadu_si128 ((const __m128i *) qs);
  __m256i both = _mm256_set_m128i (_mm_srli_epi16 (raw, 4), raw);
  return _mm256_and_si256 (both, _mm256_set1_epi8 (0x0f));
}

/* Activations → HoneQ8Act, rounding to nearest-even like lrintf in the portable path. */
static XTARGET G_GNUC_UNUSED void
X(quantize_act) (const float *x, HoneQ8Act *y, int64_t n)
{
  const __m256 sign = _mm256_set1_ps (-0.0f);
  const __m256i perm = _mm256_setr_epi32 (0, 4, 1, 5, 2, 6, 3, 7);

  for (int64_t b = 0; b < n / 32; b++)
    {
      const float *xb = x + b * 32;
      __m256 v[4], mx;
      __m128 m;
      __m256i q[4], s16, s8, sum;
      float amax, d, id;

      for (int i = 0; i < 4; i++)
        v[i] = _mm256_loadu_ps (xb + 8 * i);
      mx = _mm256_max_ps (_mm256_max_ps (_mm256_andnot_ps (sign, v[0]), _mm256_andnot_ps (sign, v[1])),
                          _mm256_max_ps (_mm256_andnot_ps (sign, v[2]), _mm256_andnot_ps (sign, v[3])));
      m = _mm_max_ps (_mm256_castps256_ps128 (mx), _mm256_extractf128_ps (mx, 1));
      m = _mm_max_ps (m, _mm_movehl_ps (m, m));
      m = _mm_max_ss (m, _mm_movehdup_ps (m));
      amax = _mm_cvtss_f32 (m);
      d = amax / 127.0f;
      id = d > 0.0f ? 1.0f / d : 0.0f;
      for (int i = 0; i < 4; i++)
        q[i] = _mm256_cvtps_epi32 (_mm256_mul_ps (v[i], _mm256_set1_ps (id)));
      sum = _mm256_add_epi32 (_mm256_add_epi32 (q[0], q[1]), _mm256_add_epi32 (q[2], q[3]));
      /* packs work per 128-bit lane; the permute puts the 32 bytes back in order */
      s16 = _mm256_packs_epi32 (q[0], q[1]);
      s8 = _mm256_packs_epi16 (s16, _mm256_packs_epi32 (q[2], q[3]));
      _mm256_storeu_si256 ((__m256i *) y[b].qs, _mm256_permutevar8x32_epi32 (s8, perm));
      {
        __m128i s = _mm_add_epi32 (_mm256_castsi256_si128 (sum), _mm256_extracti128_si256 (sum, 1));
        s = _mm_add_epi32 (s, _mm_shuffle_epi32 (s, 0x4e));
        s = _mm_add_epi32 (s, _mm_shuffle_epi32 (s, 0xb1));
        y[b].d = d;
        y[b].ds = d * (float) _mm_cvtsi128_si32 (s);
      }
    }
}

#define XACT(t, b) ((const HoneQ8Act *) ((const uint8_t *) x + (size_t) (t) * x_stride) + (b))

#ifdef XHAVE512
/* Q4_0/Q4_1/Q4Z (@kind 0/1/2), two blocks a step in 512-bit registers (AVX-512 VNNI), R rows ×
 * T tokens (R·T ≤ 8 as everywhere). Lanes of 128 bits: block b's elements
 * 0–15, b+1's 0–15, b's 16–31, b+1's 16–31 — the weights as their nibbles
 * unpack, the activations shuffled to match. A row's two (d, m) come from two
 * 4-byte loads and one conversion; [d·xd, m·xs] for both blocks is one
 * multiply, its m halves are summed on the side and its d halves spread over
 * the lanes by one permute. */
XINLINE void
X(tile_q4_512) (int K, const void *w, size_t w_stride, const void *x, size_t x_stride,
                float *out, size_t out_stride, const int R, const int T, const int kind)
{
  const int nb = K / 32;
  /* Q4_1 and Q4Z: 2-byte scale, 2 bytes (m; or z and a pad byte), 16 of quants */
  const size_t bbytes = kind ? sizeof (HoneBlockQ4_1) : sizeof (HoneBlockQ4_0);
  const size_t qoff = kind ? 4 : 2;
  const __m512i m4 = _mm512_set1_epi8 (0x0f);
  const __m512i spread = _mm512_setr_epi32 (0, 0, 0, 0, 2, 2, 2, 2, 0, 0, 0, 0, 2, 2, 2, 2);
  const __m128 q40 = _mm_setr_ps (1.0f, -8.0f, 1.0f, -8.0f);
  /* Q4Z: z and its zero pad byte, read as an f16, are the subnormal z·2⁻²⁴
   * (HONE_Q4Z_Z_SCALE), so the header's conversion gives [s0, z0·2⁻²⁴, s1,
   * z1·2⁻²⁴] and one FMA makes [1, z0, 1, z1]. The scales times these are
   * z·s, exact in f32, so the offsets' sums are the negated sums of −z·s·xs:
   * bit for bit what adding −z·s would give (rounding is symmetric in sign). */
  const __m128 z_unscale = _mm_setr_ps (0.0f, 1.0f / HONE_Q4Z_Z_SCALE, 0.0f, 1.0f / HONE_Q4Z_Z_SCALE);
  const __m128 ones_even = _mm_setr_ps (1.0f, 0.0f, 1.0f, 0.0f);
  __m512 acc[4][4];
  __m128 macc[4][4];
  float tail[4][4];
  int b;

#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
      {
        acc[r][t] = _mm512_setzero_ps ();
        macc[r][t] = _mm_setzero_ps ();
        tail[r][t] = 0.0f;
      }
  for (b = 0; b + 1 < nb; b += 2)
    {
      __m512i qz[4];
      __m128 dm[4];

#pragma GCC unroll 4
      for (int r = 0; r < R; r++)
        {
          const uint8_t *blk = (const uint8_t *) w + (size_t) r * w_stride + (size_t) b * bbytes;
          uint32_t h0, h1;
          __m256i raw;

          hone_cpu_prefetch_ahead (blk);
          hone_cpu_prefetch_ahead (blk + 64);
          memcpy (&h0, blk, 4);
          memcpy (&h1, blk + bbytes, 4);
          dm[r] = _mm_cvtph_ps (_mm_insert_epi32 (_mm_cvtsi32_si128 ((int) h0), (int) h1, 1));   /* d0 m0 d1 m1 */
          if (kind == 0)
            dm[r] = _mm_mul_ps (_mm_moveldup_ps (dm[r]), q40);                               /* d0 −8d0 d1 −8d1 */
          else if (kind == 2)   /* s0 z0s0 s1 z1s1: the offsets' sums are subtracted at the end */
            dm[r] = _mm_mul_ps (_mm_moveldup_ps (dm[r]), _mm_fmadd_ps (dm[r], z_unscale, ones_even));
          raw = _mm256_set_m128i (_mm_loadu_si128 ((const __m128i *) (blk + bbytes + qoff)),
                                  _mm_loadu_si128 ((const __m128i *) (blk + qoff)));
          qz[r] = _mm512_and_si512 (_mm512_inserti64x4 (_mm512_castsi256_si512 (raw), _mm256_srli_epi16 (raw, 4), 1),
                                    m4);
        }
#pragma GCC unroll 4
      for (int t = 0; t < T; t++)
        {
          const HoneQ8Act *a0 = XACT (t, b), *a1 = a0 + 1;
          __m512i xz = _mm512_inserti64x4 (_mm512_castsi256_si512 (_mm256_loadu_si256 ((const __m256i *) a0->qs)),
                                           _mm256_loadu_si256 ((const __m256i *) a1->qs), 1);
          /* [d0, ds0, d1, ds1]: the first 8 bytes of each activation block */
          __m128 xdm = _mm_castpd_ps (_mm_loadh_pd (_mm_load_sd ((const double *) (const void *) &a0->d),
                                                    (const double *) (const void *) &a1->d));

          xz = _mm512_shuffle_i64x2 (xz, xz, _MM_SHUFFLE (3, 1, 2, 0));
#pragma GCC unroll 4
          for (int r = 0; r < R; r++)
            {
              __m128 sv = _mm_mul_ps (dm[r], xdm);
              macc[r][t] = _mm_add_ps (macc[r][t], sv);
              acc[r][t] = _mm512_fmadd_ps (_mm512_cvtepi32_ps (_mm512_dpbusd_epi32 (_mm512_setzero_si512 (), qz[r], xz)),
                                           _mm512_permutexvar_ps (spread, _mm512_castps128_ps512 (sv)), acc[r][t]);
            }
        }
    }
  if (b < nb)   /* an odd last block */
    {
#pragma GCC unroll 4
      for (int r = 0; r < R; r++)
        {
          const uint8_t *blk = (const uint8_t *) w + (size_t) r * w_stride + (size_t) b * bbytes;
          uint32_t hdr;
          __m128 dm;
          __m256i q = X(unpack_nibbles) (blk + qoff);
          float d, m;

          memcpy (&hdr, blk, 4);
          dm = _mm_cvtph_ps (_mm_cvtsi32_si128 ((int) hdr));
          d = _mm_cvtss_f32 (dm);
          m = kind == 1 ? _mm_cvtss_f32 (_mm_movehdup_ps (dm))
              : kind == 2 ? _mm_cvtss_f32 (_mm_movehdup_ps (dm)) * (d * (-1.0f / HONE_Q4Z_Z_SCALE))   /* −z·s, exact */
                          : -8.0f * d;
#pragma GCC unroll 4
          for (int t = 0; t < T; t++)
            {
              const HoneQ8Act *a = XACT (t, b);
              __m256i xv = _mm256_loadu_si256 ((const __m256i *) a->qs);
              tail[r][t] = X(hsum) (_mm256_cvtepi32_ps (XMADD (q, xv))) * (d * a->d) + m * a->ds;
            }
        }
    }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
      {
        /* the m·xs halves: lanes 1 and 3 */
        __m128 m = _mm_add_ps (macc[r][t], _mm_movehl_ps (macc[r][t], macc[r][t]));
        const float ms = _mm_cvtss_f32 (_mm_movehdup_ps (m));
        out[(size_t) t * out_stride + r] = _mm512_reduce_add_ps (acc[r][t]) + (kind == 2 ? -ms : ms) + tail[r][t];
      }
}
#endif

/* One token (decode), Q4_0/Q4_1/Q4Z (@kind 0/1/2), 256-bit: R accumulators
 * leave registers free, so the offset term (Q4_0 −8·d, Q4_1 m, Q4Z −z·s)
 * stays in the one loop, and a block's scale and offset come from one 4-byte
 * load and one conversion. */
XINLINE void
X(tile_q4_t1) (int K, const void *w, size_t w_stride, const void *x, float *out, const int R, const int kind)
{
  const int nb = K / 32;
  /* Q4_1 and Q4Z: 2-byte scale, 2 bytes (m; or z and a pad byte), 16 of quants */
  const size_t bbytes = kind ? sizeof (HoneBlockQ4_1) : sizeof (HoneBlockQ4_0);
  const HoneQ8Act *xa = x;
  __m256 acc[4];
  float sacc[4];

#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
    {
      acc[r] = _mm256_setzero_ps ();
      sacc[r] = 0.0f;
    }
  for (int b = 0; b < nb; b++)
    {
      const HoneQ8Act *a = xa + b;
      __m256i xv = _mm256_loadu_si256 ((const __m256i *) a->qs);
      const float xd = a->d, xs = a->ds;

#pragma GCC unroll 4
      for (int r = 0; r < R; r++)
        {
          const uint8_t *blk = (const uint8_t *) w + (size_t) r * w_stride + (size_t) b * bbytes;
          uint32_t hdr;
          __m128 dm;
          float d, m;

          hone_cpu_prefetch_ahead (blk);
          memcpy (&hdr, blk, 4);
          dm = _mm_cvtph_ps (_mm_cvtsi32_si128 ((int) hdr));
          d = _mm_cvtss_f32 (dm);
          m = kind == 1 ? _mm_cvtss_f32 (_mm_movehdup_ps (dm))
              : kind == 2 ? _mm_cvtss_f32 (_mm_movehdup_ps (dm)) * (d * (-1.0f / HONE_Q4Z_Z_SCALE))   /* −z·s, exact */
                          : -8.0f * d;
          acc[r] = _mm256_fmadd_ps (_mm256_cvtepi32_ps (XMADD (X(unpack_nibbles) (blk + (kind ? 4 : 2)), xv)),
                                    _mm256_set1_ps (d * xd), acc[r]);
          sacc[r] += m * xs;
        }
    }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
    out[r] = X(hsum) (acc[r]) + sacc[r];
}

/* Q4_0 and Q4_1 share one kernel: value = q·d + m, with m = −8·d for Q4_0. */
XINLINE void
X(tile_q4) (int K, const void *w, size_t w_stride, const void *x, size_t x_stride,
            float *out, size_t out_stride, const int R, const int T, const int has_min)
{
  const int nb = K / 32;
  const size_t bbytes = has_min ? sizeof (HoneBlockQ4_1) : sizeof (HoneBlockQ4_0);
  __m256 acc[4][4];
  float sacc[4][4];

#ifdef XHAVE512
  /* every tile: the 256-bit forms below are AVX2's and AVX-VNNI's */
  X(tile_q4_512) (K, w, w_stride, x, x_stride, out, out_stride, R, T, has_min);
  return;
#endif
  if (T == 1)
    {
      X(tile_q4_t1) (K, w, w_stride, x, out, R, has_min);
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
          const uint8_t *blk = (const uint8_t *) w + (size_t) r * w_stride + (size_t) b * bbytes;
          uint16_t dbits;
          hone_cpu_prefetch_ahead (blk);
          memcpy (&dbits, blk, 2);
          dw[r] = X(f16) (dbits);
          q[r] = X(unpack_nibbles) (blk + (has_min ? 4 : 2));
        }
#pragma GCC unroll 4
      for (int t = 0; t < T; t++)
        {
          const HoneQ8Act *a = XACT (t, b);
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

  /* The offset/min term Σ_b m·d_x·Σq_x in a second pass: kept in the main
   * loop, its R·T scalar sums push the vector accumulators out of the 16
   * AVX2 registers. */
  for (int b = 0; b < nb; b++)
    {
      float mw[4];
#pragma GCC unroll 4
      for (int r = 0; r < R; r++)
        {
          const uint8_t *blk = (const uint8_t *) w + (size_t) r * w_stride + (size_t) b * bbytes;
          uint16_t bits;
          memcpy (&bits, blk + (has_min ? 2 : 0), 2);
          mw[r] = has_min ? X(f16) (bits) : -8.0f * X(f16) (bits);
        }
#pragma GCC unroll 4
      for (int t = 0; t < T; t++)
        {
          float ds = XACT (t, b)->ds;
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

XINLINE void
X(tile_q8_0) (int K, const void *w, size_t w_stride, const void *x, size_t x_stride,
              float *out, size_t out_stride, const int R, const int T)
{
  const int nb = K / 32;
  __m256 acc[4][4];


#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
      acc[r][t] = _mm256_setzero_ps ();

  for (int b = 0; b < nb; b++)
    {
      __m256i wv[4], aw[4];
      float dw[4];

#pragma GCC unroll 4
      for (int r = 0; r < R; r++)
        {
          const HoneBlockQ8_0 *blk = (const HoneBlockQ8_0 *) ((const uint8_t *) w + (size_t) r * w_stride) + b;
          hone_cpu_prefetch_ahead (blk);
          dw[r] = X(f16) (blk->d);
          wv[r] = _mm256_loadu_si256 ((const __m256i *) blk->qs);
          aw[r] = _mm256_sign_epi8 (wv[r], wv[r]);   /* |w| as unsigned bytes (−128 → 128) */
        }
#pragma GCC unroll 4
      for (int t = 0; t < T; t++)
        {
          const HoneQ8Act *a = XACT (t, b);
          __m256i xv = _mm256_loadu_si256 ((const __m256i *) a->qs);
          __m256 xd = _mm256_set1_ps (a->d);
#pragma GCC unroll 4
          for (int r = 0; r < R; r++)
            {
              /* w·x = |w|·(x with w's sign) */
              __m256 p = _mm256_cvtepi32_ps (XMADD (aw[r], _mm256_sign_epi8 (xv, wv[r])));
              acc[r][t] = _mm256_fmadd_ps (p, _mm256_mul_ps (_mm256_set1_ps (dw[r]), xd), acc[r][t]);
            }
        }
    }

#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
      out[(size_t) t * out_stride + r] = X(hsum) (acc[r][t]);
}

/* Super-block @i of row @r (@bytes each), its bytes prefetched ahead. */
XINLINE const void *
X(superblock) (const void *w, size_t w_stride, int r, int i, size_t bytes)
{
  const uint8_t *p = (const uint8_t *) w + (size_t) r * w_stride + (size_t) i * bytes;

  for (size_t o = 0; o < bytes; o += 64)
    hone_cpu_prefetch_ahead (p + o);
  return p;
}

/* The scales d and d·Σq of super-block @i's 8 activation blocks, as two
 * vectors, from the row's copy of its scales (hone_cpu_act_scales). Picking
 * them from the 8 blocks took 16 scalar loads and 14 inserts a token and
 * super-block, and 8-lane gathers measured 20 % slower still (session 27). */
XINLINE void
X(act_scales8) (const HoneQ8Act *row, int K, int i, __m256 *d, __m256 *ds)
{
  const float *s = hone_cpu_act_scales (row, K) + 8 * i;

  *d = _mm256_loadu_ps (s);
  *ds = _mm256_loadu_ps (s + K / 32);
}

/* The rows' sub-block scales and mins of Q4_K super-block @i: 8 of each, as
 * d·sc and dmin·m. */
XINLINE void
X(q4k_scales) (const HoneBlockQ4_K *blk, __m256 *dsc, __m256 *dmn)
{
  const __m128i scm = hone_x86_q4k_scales_mins (blk->scales);

  *dsc = _mm256_mul_ps (_mm256_set1_ps (X(f16) (blk->d)), _mm256_cvtepi32_ps (_mm256_cvtepu8_epi32 (scm)));
  *dmn = _mm256_mul_ps (_mm256_set1_ps (X(f16) (blk->dmin)),
                        _mm256_cvtepi32_ps (_mm256_cvtepu8_epi32 (_mm_srli_si128 (scm, 8))));
}

#ifdef XHAVE512
/* Q4_K in 512-bit registers (AVX-512 VNNI): a pair of sub-blocks a step, the
 * low nibbles of 32 quant bytes (sub-block 2j) in the low half and the high
 * nibbles (2j+1) in the high half, against the two blocks of activations; the
 * pair's two scale products spread over the halves by one permute. */
XINLINE void
X(tile_q4_k_512) (int K, const void *w, size_t w_stride, const void *x, size_t x_stride,
                  float *out, size_t out_stride, const int R, const int T)
{
  const int nsb = K / 256;
  const __m256i m4 = _mm256_set1_epi8 (0x0f);
  __m512 acc[4][4];

#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
      acc[r][t] = _mm512_setzero_ps ();

  for (int i = 0; i < nsb; i++)
    {
      __m256 dscv[4], dmnv[4], sv[4][4];
      const HoneBlockQ4_K *blk[4];

#pragma GCC unroll 4
      for (int r = 0; r < R; r++)
        {
          blk[r] = (const HoneBlockQ4_K *) X(superblock) (w, w_stride, r, i, sizeof (HoneBlockQ4_K));
          X(q4k_scales) (blk[r], &dscv[r], &dmnv[r]);
        }
#pragma GCC unroll 4
      for (int t = 0; t < T; t++)
        {
          __m256 adv, adsv;
          X(act_scales8) (XACT (t, 0), K, i, &adv, &adsv);
#pragma GCC unroll 4
          for (int r = 0; r < R; r++)
            {
              sv[r][t] = _mm256_mul_ps (dscv[r], adv);
              acc[r][t] = _mm512_fnmadd_ps (_mm512_zextps256_ps512 (dmnv[r]), _mm512_zextps256_ps512 (adsv),
                                            acc[r][t]);
            }
        }
      for (int j = 0; j < 4; j++)
        {
          const __m512i pair = _mm512_setr_epi32 (2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j,
                                                  2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1,
                                                  2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1);
          __m512i q[4];

#pragma GCC unroll 4
          for (int r = 0; r < R; r++)
            {
              const __m256i raw = _mm256_loadu_si256 ((const __m256i *) (blk[r]->qs + 32 * j));
              q[r] = _mm512_inserti64x4 (_mm512_castsi256_si512 (_mm256_and_si256 (raw, m4)),
                                         _mm256_and_si256 (_mm256_srli_epi16 (raw, 4), m4), 1);
            }
#pragma GCC unroll 4
          for (int t = 0; t < T; t++)
            {
              const HoneQ8Act *a0 = XACT (t, 8 * i + 2 * j);
              const __m512i xa = _mm512_inserti64x4 (
                  _mm512_castsi256_si512 (_mm256_loadu_si256 ((const __m256i *) a0->qs)),
                  _mm256_loadu_si256 ((const __m256i *) (a0 + 1)->qs), 1);
#pragma GCC unroll 4
              for (int r = 0; r < R; r++)
                {
                  const __m512 p = _mm512_cvtepi32_ps (_mm512_dpbusd_epi32 (_mm512_setzero_si512 (), q[r], xa));
                  const __m512 sc = _mm512_permutexvar_ps (pair, _mm512_castps256_ps512 (sv[r][t]));
                  acc[r][t] = _mm512_fmadd_ps (p, sc, acc[r][t]);
                }
            }
        }
    }

#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
      out[(size_t) t * out_stride + r] = _mm512_reduce_add_ps (acc[r][t]);
}
#endif

/* Per super-block, the rows' 8 sub-block scales and mins and the tokens' 8 block
 * scales and sums go into vectors once: the min term is one FNMADD per row and
 * token (its lanes are summed with the rest at the end), and each sub-block's
 * scale product is one broadcast from sv. */
XINLINE void
X(tile_q4_k) (int K, const void *w, size_t w_stride, const void *x, size_t x_stride,
              float *out, size_t out_stride, const int R, const int T)
{
  const int nsb = K / 256;
  const __m256i m4 = _mm256_set1_epi8 (0x0f);
  __m256 acc[4][4];

#ifdef XHAVE512
  X(tile_q4_k_512) (K, w, w_stride, x, x_stride, out, out_stride, R, T);
  return;
#endif
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
      acc[r][t] = _mm256_setzero_ps ();

  for (int i = 0; i < nsb; i++)
    {
      float sv[4][4][8] __attribute__ ((aligned (32)));
      __m256 dscv[4], dmnv[4];
      const HoneBlockQ4_K *blk[4];

#pragma GCC unroll 4
      for (int r = 0; r < R; r++)
        {
          blk[r] = (const HoneBlockQ4_K *) X(superblock) (w, w_stride, r, i, sizeof (HoneBlockQ4_K));
          X(q4k_scales) (blk[r], &dscv[r], &dmnv[r]);
        }
#pragma GCC unroll 4
      for (int t = 0; t < T; t++)
        {
          __m256 adv, adsv;
          X(act_scales8) (XACT (t, 0), K, i, &adv, &adsv);
#pragma GCC unroll 4
          for (int r = 0; r < R; r++)
            {
              _mm256_store_ps (sv[r][t], _mm256_mul_ps (dscv[r], adv));
              acc[r][t] = _mm256_fnmadd_ps (dmnv[r], adsv, acc[r][t]);
            }
        }
      for (int j = 0; j < 4; j++)
        {
          __m256i lo[4], hi[4];

#pragma GCC unroll 4
          for (int r = 0; r < R; r++)
            {
              __m256i raw = _mm256_loadu_si256 ((const __m256i *) (blk[r]->qs + 32 * j));
              lo[r] = _mm256_and_si256 (raw, m4);
              hi[r] = _mm256_and_si256 (_mm256_srli_epi16 (raw, 4), m4);
            }
#pragma GCC unroll 4
          for (int t = 0; t < T; t++)
            {
              const HoneQ8Act *a0 = XACT (t, 8 * i + 2 * j);
              __m256i x0 = _mm256_loadu_si256 ((const __m256i *) a0->qs);
              __m256i x1 = _mm256_loadu_si256 ((const __m256i *) (a0 + 1)->qs);
#pragma GCC unroll 4
              for (int r = 0; r < R; r++)
                {
                  __m256 p0 = _mm256_cvtepi32_ps (XMADD (lo[r], x0));
                  __m256 p1 = _mm256_cvtepi32_ps (XMADD (hi[r], x1));
                  acc[r][t] = _mm256_fmadd_ps (p0, _mm256_broadcast_ss (&sv[r][t][2 * j]), acc[r][t]);
                  acc[r][t] = _mm256_fmadd_ps (p1, _mm256_broadcast_ss (&sv[r][t][2 * j + 1]), acc[r][t]);
                }
            }
        }
    }

#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
      out[(size_t) t * out_stride + r] = X(hsum) (acc[r][t]);
}

#ifdef XHAVE512
/* Q6_K in 512-bit registers (AVX-512 VNNI): two 32-element groups a step. The
 * quants stay unsigned (0..63, no −32): dpbusd starts from −32·Σx of the same
 * 4 activations, so each lane is Σ (q − 32)·x. The 16-element scales spread over
 * their 4 lanes by one permute. */
XINLINE void
X(tile_q6_k_512) (int K, const void *w, size_t w_stride, const void *x, size_t x_stride,
                  float *out, size_t out_stride, const int R, const int T)
{
  const int nsb = K / 256;
  const __m512i m4 = _mm512_set1_epi8 (0x0f), m30 = _mm512_set1_epi8 (0x30), ones = _mm512_set1_epi8 (1);
  /* qh bits 2g, 2g+1 to bits 4, 5: groups 0|1 shift left by 4|2, groups 2|3 right by 0|2 */
  const __m512i sh01 = _mm512_inserti64x4 (_mm512_castsi256_si512 (_mm256_set1_epi16 (4)), _mm256_set1_epi16 (2), 1);
  const __m512i sh23 = _mm512_inserti64x4 (_mm512_castsi256_si512 (_mm256_set1_epi16 (0)), _mm256_set1_epi16 (2), 1);
  __m512 acc[4][4];

#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
      acc[r][t] = _mm512_setzero_ps ();

  for (int i = 0; i < nsb; i++)
    {
      const HoneBlockQ6_K *blk[4];
      float d[4];

#pragma GCC unroll 4
      for (int r = 0; r < R; r++)
        {
          blk[r] = (const HoneBlockQ6_K *) X(superblock) (w, w_stride, r, i, sizeof (HoneBlockQ6_K));
          d[r] = X(f16) (blk[r]->d);
        }
      for (int n = 0; n < 2; n++)
        {
          __m512i qa[4][2];
          __m256 s8[4];

#pragma GCC unroll 4
          for (int r = 0; r < R; r++)
            {
              const __m512i l = _mm512_loadu_si512 ((const void *) (blk[r]->ql + 64 * n));
              const __m512i hh = _mm512_broadcast_i64x4 (_mm256_loadu_si256 ((const __m256i *) (blk[r]->qh + 32 * n)));
              qa[r][0] = _mm512_or_si512 (_mm512_and_si512 (l, m4), _mm512_and_si512 (_mm512_sllv_epi16 (hh, sh01), m30));
              qa[r][1] = _mm512_or_si512 (_mm512_and_si512 (_mm512_srli_epi16 (l, 4), m4),
                                          _mm512_and_si512 (_mm512_srlv_epi16 (hh, sh23), m30));
              s8[r] = _mm256_mul_ps (_mm256_set1_ps (d[r]), _mm256_cvtepi32_ps (_mm256_cvtepi8_epi32 (
                                         _mm_loadl_epi64 ((const __m128i *) (blk[r]->scales + 8 * n)))));
            }
          for (int p = 0; p < 2; p++)
            {
              const __m512i spread = _mm512_setr_epi32 (4 * p, 4 * p, 4 * p, 4 * p, 4 * p + 1, 4 * p + 1, 4 * p + 1,
                                                        4 * p + 1, 4 * p + 2, 4 * p + 2, 4 * p + 2, 4 * p + 2,
                                                        4 * p + 3, 4 * p + 3, 4 * p + 3, 4 * p + 3);
              __m512 scr[4];

#pragma GCC unroll 4
              for (int r = 0; r < R; r++)
                scr[r] = _mm512_permutexvar_ps (spread, _mm512_castps256_ps512 (s8[r]));
#pragma GCC unroll 4
              for (int t = 0; t < T; t++)
                {
                  const HoneQ8Act *a0 = XACT (t, 8 * i + 4 * n + 2 * p);
                  const __m512i xa = _mm512_inserti64x4 (
                      _mm512_castsi256_si512 (_mm256_loadu_si256 ((const __m256i *) a0->qs)),
                      _mm256_loadu_si256 ((const __m256i *) (a0 + 1)->qs), 1);
                  const __m512i neg = _mm512_sub_epi32 (_mm512_setzero_si512 (),
                                                        _mm512_slli_epi32 (_mm512_dpbusd_epi32 (_mm512_setzero_si512 (),
                                                                                                ones, xa), 5));
                  const __m512 xd = _mm512_insertf32x8 (_mm512_set1_ps (a0->d), _mm256_set1_ps ((a0 + 1)->d), 1);
#pragma GCC unroll 4
                  for (int r = 0; r < R; r++)
                    {
                      const __m512 v = _mm512_cvtepi32_ps (_mm512_dpbusd_epi32 (neg, qa[r][p], xa));
                      acc[r][t] = _mm512_fmadd_ps (v, _mm512_mul_ps (scr[r], xd), acc[r][t]);
                    }
                }
            }
        }
    }

#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
      out[(size_t) t * out_stride + r] = _mm512_reduce_add_ps (acc[r][t]);
}
#endif

XINLINE void
X(tile_q6_k) (int K, const void *w, size_t w_stride, const void *x, size_t x_stride,
              float *out, size_t out_stride, const int R, const int T)
{
  const int nsb = K / 256;
  const __m256i m4 = _mm256_set1_epi8 (0x0f);
  const __m256i m30 = _mm256_set1_epi8 (0x30);
  const __m256i k32 = _mm256_set1_epi8 (32);
  __m256 acc[4][4];

#ifdef XHAVE512
  X(tile_q6_k_512) (K, w, w_stride, x, x_stride, out, out_stride, R, T);
  return;
#endif
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
      acc[r][t] = _mm256_setzero_ps ();

  for (int i = 0; i < nsb; i++)
    {
      const HoneBlockQ6_K *blk[4];
      float d[4];

#pragma GCC unroll 4
      for (int r = 0; r < R; r++)
        {
          blk[r] = (const HoneBlockQ6_K *) X(superblock) (w, w_stride, r, i, sizeof (HoneBlockQ6_K));
          d[r] = X(f16) (blk[r]->d);
        }
      for (int n = 0; n < 2; n++)
        for (int g = 0; g < 4; g++)
          {
            __m256i qv[4], aq[4];
            __m256 sc[4];

#pragma GCC unroll 4
            for (int r = 0; r < R; r++)
              {
                const uint8_t *ql = blk[r]->ql + 64 * n + 32 * (g & 1);
                __m256i l = _mm256_loadu_si256 ((const __m256i *) ql);
                __m256i h = _mm256_loadu_si256 ((const __m256i *) (blk[r]->qh + 32 * n));
                const int8_t *s = blk[r]->scales + 8 * n + 2 * g;
                __m256i q;

                /* group g: low nibbles of ql[0..31] (g=0) or ql[32..63] (g=1),
                 * high nibbles for g=2,3; high bits from qh bits 2g, 2g+1. */
                l = (g < 2) ? _mm256_and_si256 (l, m4) : _mm256_and_si256 (_mm256_srli_epi16 (l, 4), m4);
                switch (g)
                  {
                  case 0: h = _mm256_and_si256 (_mm256_slli_epi16 (h, 4), m30); break;
                  case 1: h = _mm256_and_si256 (_mm256_slli_epi16 (h, 2), m30); break;
                  case 2: h = _mm256_and_si256 (h, m30); break;
                  default: h = _mm256_and_si256 (_mm256_srli_epi16 (h, 2), m30); break;
                  }
                q = _mm256_sub_epi8 (_mm256_or_si256 (l, h), k32);   /* −32..31 */
                qv[r] = q;
                aq[r] = _mm256_sign_epi8 (q, q);
                sc[r] = _mm256_mul_ps (_mm256_set1_ps (d[r]),
                                       _mm256_set_m128 (_mm_set1_ps ((float) s[1]), _mm_set1_ps ((float) s[0])));
              }
#pragma GCC unroll 4
            for (int t = 0; t < T; t++)
              {
                const HoneQ8Act *a = XACT (t, 8 * i + 4 * n + g);
                __m256i xv = _mm256_loadu_si256 ((const __m256i *) a->qs);
                __m256 xd = _mm256_set1_ps (a->d);
#pragma GCC unroll 4
                for (int r = 0; r < R; r++)
                  {
                    __m256 p = _mm256_cvtepi32_ps (XMADD (aq[r], _mm256_sign_epi8 (xv, qv[r])));
                    acc[r][t] = _mm256_fmadd_ps (p, _mm256_mul_ps (sc[r], xd), acc[r][t]);
                  }
              }
          }
    }

#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
      out[(size_t) t * out_stride + r] = X(hsum) (acc[r][t]);
}

/* Float weights: kind 0 = F32, 1 = F16, 2 = BF16. */
XINLINE __m256
X(load8) (const uint8_t *row, int k, const int kind)
{
  if (kind == 0)
    return _mm256_loadu_ps ((const float *) row + k);
  if (kind == 1)
    return _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) ((const uint16_t *) row + k)));
  return _mm256_castsi256_ps (_mm256_slli_epi32 (
      _mm256_cvtepu16_epi32 (_mm_loadu_si128 ((const __m128i *) ((const uint16_t *) row + k))), 16));
}

XINLINE float
X(load1) (const uint8_t *row, int k, const int kind)
{
  if (kind == 0)
    return ((const float *) row)[k];
  if (kind == 1)
    return X(f16) (((const uint16_t *) row)[k]);
  return hone_bf16_to_f32 (((const uint16_t *) row)[k]);
}

XINLINE void
X(tile_float) (int K, const void *w, size_t w_stride, const void *x, size_t x_stride,
               float *out, size_t out_stride, const int R, const int T, const int kind)
{
  __m256 acc[4][4];
  float tail[4][4];
  int k;

#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
      {
        acc[r][t] = _mm256_setzero_ps ();
        tail[r][t] = 0.0f;
      }
  for (k = 0; k + 8 <= K; k += 8)
    {
      __m256 wv[4];
#pragma GCC unroll 4
      for (int r = 0; r < R; r++)
        {
          /* one prefetch a 64-byte line: every 16 (F32) or 32 (F16, BF16) values */
          if ((k & (kind == 0 ? 15 : 31)) == 0)
            hone_cpu_prefetch_ahead ((const uint8_t *) w + (size_t) r * w_stride + (size_t) k * (kind == 0 ? 4 : 2));
          wv[r] = X(load8) ((const uint8_t *) w + (size_t) r * w_stride, k, kind);
        }
#pragma GCC unroll 4
      for (int t = 0; t < T; t++)
        {
          __m256 xv = _mm256_loadu_ps ((const float *) ((const uint8_t *) x + (size_t) t * x_stride) + k);
#pragma GCC unroll 4
          for (int r = 0; r < R; r++)
            acc[r][t] = _mm256_fmadd_ps (wv[r], xv, acc[r][t]);
        }
    }
  for (; k < K; k++)
    for (int r = 0; r < R; r++)
      for (int t = 0; t < T; t++)
        tail[r][t] += X(load1) ((const uint8_t *) w + (size_t) r * w_stride, k, kind) *
                      ((const float *) ((const uint8_t *) x + (size_t) t * x_stride))[k];

#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
      out[(size_t) t * out_stride + r] = X(hsum) (acc[r][t]) + tail[r][t];
}

/* Dispatch on (R, T) to fully unrolled instances: T = 1 takes up to 4 rows;
 * T > 1 goes in pairs of rows (R·T ≤ 8 accumulators stay in registers). */
#define XDISPATCH(NAME, CALL)                                                         \
  static XTARGET void                                                                 \
  X(NAME) (int K, const void *w, size_t w_stride, int R, const void *x,               \
           size_t x_stride, int T, float *out, size_t out_stride)                     \
  {                                                                                   \
    if (T == 1)                                                                       \
      {                                                                               \
        switch (R)                                                                    \
          {                                                                           \
          case 1: CALL (1, 1); break;                                                 \
          case 2: CALL (2, 1); break;                                                 \
          case 3: CALL (3, 1); break;                                                 \
          default: CALL (4, 1); break;                                                \
          }                                                                           \
        return;                                                                       \
      }                                                                               \
    for (int r0 = 0; r0 < R; r0 += 2)                                                 \
      {                                                                               \
        const void *wr = (const uint8_t *) w + (size_t) r0 * w_stride;                \
        float *o = out + r0;                                                          \
        int rr = MIN (2, R - r0);                                                     \
        (void) wr; (void) o;                                                          \
        switch (rr * 8 + T)                                                           \
          {                                                                           \
          case 8 + 2: CALLR (wr, o, 1, 2); break;                                     \
          case 8 + 3: CALLR (wr, o, 1, 3); break;                                     \
          case 8 + 4: CALLR (wr, o, 1, 4); break;                                     \
          case 16 + 2: CALLR (wr, o, 2, 2); break;                                    \
          case 16 + 3: CALLR (wr, o, 2, 3); break;                                    \
          default: CALLR (wr, o, 2, 4); break;                                        \
          }                                                                           \
      }                                                                               \
  }

#define CALL(R_, T_) CALLR (w, out, R_, T_)

#define CALLR(W_, O_, R_, T_) X(tile_q4) (K, W_, w_stride, x, x_stride, O_, out_stride, R_, T_, 0)
XDISPATCH (tile_q4_0, CALL)
#undef CALLR
#define CALLR(W_, O_, R_, T_) X(tile_q4) (K, W_, w_stride, x, x_stride, O_, out_stride, R_, T_, 1)
XDISPATCH (tile_q4_1, CALL)
#undef CALLR
#define CALLR(W_, O_, R_, T_) X(tile_q8_0) (K, W_, w_stride, x, x_stride, O_, out_stride, R_, T_)
XDISPATCH (tile_q8_0_d, CALL)
#undef CALLR
#define CALLR(W_, O_, R_, T_) X(tile_q4_k) (K, W_, w_stride, x, x_stride, O_, out_stride, R_, T_)
XDISPATCH (tile_q4_k_d, CALL)
#undef CALLR
#define CALLR(W_, O_, R_, T_) X(tile_q6_k) (K, W_, w_stride, x, x_stride, O_, out_stride, R_, T_)
XDISPATCH (tile_q6_k_d, CALL)
#undef CALLR
#define CALLR(W_, O_, R_, T_) X(tile_float) (K, W_, w_stride, x, x_stride, O_, out_stride, R_, T_, 0)
XDISPATCH (tile_f32, CALL)
#undef CALLR
#define CALLR(W_, O_, R_, T_) X(tile_float) (K, W_, w_stride, x, x_stride, O_, out_stride, R_, T_, 1)
XDISPATCH (tile_f16, CALL)
#undef CALLR
#define CALLR(W_, O_, R_, T_) X(tile_float) (K, W_, w_stride, x, x_stride, O_, out_stride, R_, T_, 2)
XDISPATCH (tile_bf16, CALL)
#undef CALLR
#undef CALL

static HoneCpuTileFunc
X(tile_func) (HoneDType type)
{
  switch (type)
    {
    case HONE_DTYPE_Q4_0: return X(tile_q4_0);
    case HONE_DTYPE_Q4_1: return X(tile_q4_1);
    case HONE_DTYPE_Q8_0: return X(tile_q8_0_d);
    case HONE_DTYPE_Q4_K: return X(tile_q4_k_d);
    case HONE_DTYPE_Q6_K: return X(tile_q6_k_d);
    case HONE_DTYPE_F32: return X(tile_f32);
    case HONE_DTYPE_F16: return X(tile_f16);
    case HONE_DTYPE_BF16: return X(tile_bf16);
    default: return NULL;
    }
}

#undef XACT
#undef XINLINE
#undef XDISPATCH
