/* hone-cpu-attention-split-x86.h — the decode attention kernel (a few queries
 * of one KV head against a segment of its keys), included by
 * hone-cpu-attention.c once per vector width.
 *
 * Before including, define (undefined again at the end):
 *   AP(name)        the name with the width's suffix
 *   AP_TARGET       __attribute__((target ("…")))
 *   AP_N            lanes: 16 or 8 (a 16-key block of the cache is 16 / AP_N vectors)
 *   AP_OV           vector registers the outputs may hold across the keys (16 of
 *                   AVX-512's 32, 8 of AVX2's 16)
 *   AP_V            the float vector type
 *   AP_LOAD, AP_STORE, AP_SET1, AP_ZERO, AP_FMA, AP_MUL, AP_SUB, AP_ADD, AP_MAX   float ops
 *   AP_CVTPH(p)     AP_N halves from p as floats
 *   AP_RND16(v)     v rounded to f16 and back
 *   AP_EXP(v)       e^v (hone-cpu-x86-vec.h)
 *   AP_RMAX(v), AP_RADD(v)   the max, the sum of v's lanes
 *   AP_RANGE(h, lo, hi, v, other)   vector h of a block (keys h·AP_N + lane):
 *                   v in the lanes of keys lo ≤ key < hi, other in the rest
 *
 * The cache holds a head's keys in blocks of 16 positions, [block][dim][16]
 * (hone-cpu-kv.h), so one block's 16 scores of a query are one vector (or two)
 * of FMAs over the dims, each dim's 16 halves converted once for every query
 * of the pass: no conversion buffer, no sums across lanes. The outputs stay in
 * registers over the whole segment, so a pass takes as many queries as
 * AP_OV / (the dims it writes ÷ AP_N) allow (AVX-512: 4 at head_dim 64, 2 at
 * 128; AVX2: 1, and head_dim 128 in two passes over the dims); more queries
 * run more passes over the same (cached) keys. Online softmax: a running max
 * per query, the earlier sum and outputs rescaled when it grows; q and the
 * probabilities rounded to f16 as everywhere. Writes query g's partial state:
 * m[g] (max score), l[g] (Σ e^{s − m}), o[g·hd …] (Σ p·V, not normalized).
 * Against the [key][dim] layout's kernel (session 30) this was 1.9–2.7× faster
 * with AVX-512 and 1.3–2.6× with AVX2 (RESULTS.md, session 31).
 */

#define AP_KV (16 / AP_N)

/* GB queries, K dims HDK·AP_N, the V dims [c0, c0 + HDV)·AP_N of them. keep
 * (GB = 1, NULL otherwise): 17 floats a block, the block's rounded
 * probabilities and rescale factor, written by the pass with c0 = 0 and read
 * back by the later ones instead of their own q·k. */
static inline __attribute__((always_inline)) AP_TARGET void
AP(attention_part_pass) (const float *const *q, const int GB, const uint16_t *k, const uint16_t *v, float scale,
                         int jb, int je, float *m, float *l, float *o, const int HDK, const int HDV, const int c0,
                         float *keep)
{
  const int hd = AP_N * HDK;
  float qh[4][128] __attribute__((aligned (64)));
  float pb[4][16] __attribute__((aligned (64)));
  float mm[4], ll[4];
  AP_V ov[4][8];

#pragma GCC unroll 4
  for (int g = 0; g < GB; g++)
    {
      for (int c = 0; c < HDK; c++)
        AP_STORE (qh[g] + AP_N * c, AP_RND16 (AP_LOAD (q[g] + AP_N * c)));
#pragma GCC unroll 8
      for (int c = 0; c < HDV; c++)
        ov[g][c] = AP_ZERO ();
      mm[g] = -INFINITY;
      ll[g] = 0.0f;
    }
  for (int b = jb / 16; b * 16 < je; b++)
    {
      const int lo = MAX (jb - b * 16, 0), hi = MIN (je - b * 16, 16);
      const uint16_t *kb = k + (size_t) b * 16 * hd;
      float *kp = keep != NULL ? keep + (size_t) (b - jb / 16) * 17 : NULL;
      AP_V acc[4][2][AP_KV];

      if (kp != NULL && c0 > 0)
        {
          memcpy (pb[0], kp, 16 * sizeof (float));
#pragma GCC unroll 8
          for (int c = 0; c < HDV; c++)
            ov[0][c] = AP_MUL (ov[0][c], AP_SET1 (kp[16]));
          goto pv;
        }

#pragma GCC unroll 4
      for (int g = 0; g < GB; g++)
#pragma GCC unroll 2
        for (int h = 0; h < AP_KV; h++)
          acc[g][0][h] = acc[g][1][h] = AP_ZERO ();
      /* two dims a step: two accumulators a query and vector, for the FMA latency */
#pragma GCC unroll 4
      for (int d = 0; d < hd; d += 2)
        {
          AP_V k0[AP_KV], k1[AP_KV];

#pragma GCC unroll 2
          for (int h = 0; h < AP_KV; h++)
            {
              k0[h] = AP_CVTPH (kb + (size_t) d * 16 + AP_N * h);
              k1[h] = AP_CVTPH (kb + (size_t) (d + 1) * 16 + AP_N * h);
            }
#pragma GCC unroll 4
          for (int g = 0; g < GB; g++)
            {
              const AP_V q0 = AP_SET1 (qh[g][d]), q1 = AP_SET1 (qh[g][d + 1]);
#pragma GCC unroll 2
              for (int h = 0; h < AP_KV; h++)
                {
                  acc[g][0][h] = AP_FMA (q0, k0[h], acc[g][0][h]);
                  acc[g][1][h] = AP_FMA (q1, k1[h], acc[g][1][h]);
                }
            }
        }
#pragma GCC unroll 4
      for (int g = 0; g < GB; g++)
        {
          AP_V s[AP_KV], e[AP_KV], smax, esum;
          float mnew, corr;

#pragma GCC unroll 2
          for (int h = 0; h < AP_KV; h++)
            s[h] = AP_RANGE (h, lo, hi, AP_MUL (AP_ADD (acc[g][0][h], acc[g][1][h]), AP_SET1 (scale)),
                             AP_SET1 (-INFINITY));
          smax = s[0];
#pragma GCC unroll 2
          for (int h = 1; h < AP_KV; h++)
            smax = AP_MAX (smax, s[h]);
          mnew = fmaxf (mm[g], AP_RMAX (smax));   /* finite: a block has a key in range */
          corr = expf (mm[g] - mnew);             /* 0 on the first block (mm = −inf) */
          esum = AP_ZERO ();
#pragma GCC unroll 2
          for (int h = 0; h < AP_KV; h++)
            {
              e[h] = AP_RANGE (h, lo, hi, AP_EXP (AP_SUB (s[h], AP_SET1 (mnew))), AP_ZERO ());
              esum = AP_ADD (esum, e[h]);
              AP_STORE (pb[g] + AP_N * h, AP_RND16 (e[h]));
            }
          ll[g] = ll[g] * corr + AP_RADD (esum);
          mm[g] = mnew;
          if (kp != NULL)
            {
              memcpy (kp, pb[0], 16 * sizeof (float));
              kp[16] = corr;
            }
#pragma GCC unroll 8
          for (int c = 0; c < HDV; c++)
            ov[g][c] = AP_MUL (ov[g][c], AP_SET1 (corr));
        }
    pv:
      for (int i = lo; i < hi; i++)
        {
          const uint16_t *vi = v + (size_t) (b * 16 + i) * hd + AP_N * c0;
#pragma GCC unroll 8
          for (int c = 0; c < HDV; c++)
            {
              const AP_V vv = AP_CVTPH (vi + AP_N * c);
#pragma GCC unroll 4
              for (int g = 0; g < GB; g++)
                ov[g][c] = AP_FMA (AP_SET1 (pb[g][i]), vv, ov[g][c]);
            }
        }
    }
#pragma GCC unroll 4
  for (int g = 0; g < GB; g++)
    {
      if (c0 == 0)
        {
          m[g] = mm[g];
          l[g] = ll[g];
        }
#pragma GCC unroll 8
      for (int c = 0; c < HDV; c++)
        AP_STORE (o + (size_t) g * hd + AP_N * (c0 + c), ov[g][c]);
    }
}

/* Queries q[0 … G − 1] (any G) against keys [jb, je) of one KV head;
 * head_dim 64 or 128. keep: 17 floats a block of the segment, scratch for
 * AVX2's second pass over the dims at head_dim 128. */
static AP_TARGET void
AP(attention_part) (const float *const *q, int G, const uint16_t *k, const uint16_t *v, int hd, float scale,
                    int jb, int je, float *keep, float *m, float *l, float *o)
{
  const int HDK = hd / AP_N, HDV = MIN (HDK, 8), per = MAX (1, MIN (4, AP_OV / HDV));

  for (int g0 = 0; g0 < G; g0 += per)
    for (int c0 = 0; c0 < HDK; c0 += HDV)
      {
        const int gb G_GNUC_UNUSED = MIN (per, G - g0);   /* AVX2: always 1 */
        const float *const *qg = q + g0;
        float *mg = m + g0, *lg = l + g0, *og = o + (size_t) g0 * hd;

#if AP_N == 16
        (void) keep;
        if (HDK == 4)          /* head_dim 64: up to 4 queries a pass */
          switch (gb)
            {
            case 1: AP(attention_part_pass) (qg, 1, k, v, scale, jb, je, mg, lg, og, 4, 4, 0, NULL); break;
            case 2: AP(attention_part_pass) (qg, 2, k, v, scale, jb, je, mg, lg, og, 4, 4, 0, NULL); break;
            case 3: AP(attention_part_pass) (qg, 3, k, v, scale, jb, je, mg, lg, og, 4, 4, 0, NULL); break;
            default: AP(attention_part_pass) (qg, 4, k, v, scale, jb, je, mg, lg, og, 4, 4, 0, NULL); break;
            }
        else if (gb == 1)      /* head_dim 128: up to 2 */
          AP(attention_part_pass) (qg, 1, k, v, scale, jb, je, mg, lg, og, 8, 8, 0, NULL);
        else
          AP(attention_part_pass) (qg, 2, k, v, scale, jb, je, mg, lg, og, 8, 8, 0, NULL);
#else
        if (HDK == 8)          /* head_dim 64: one query a pass */
          AP(attention_part_pass) (qg, 1, k, v, scale, jb, je, mg, lg, og, 8, 8, 0, NULL);
        else                   /* head_dim 128: dims [0, 64), then [64, 128) */
          AP(attention_part_pass) (qg, 1, k, v, scale, jb, je, mg, lg, og, 16, 8, c0, keep);
#endif
      }
}

#undef AP_KV
#undef AP
#undef AP_TARGET
#undef AP_N
#undef AP_OV
#undef AP_V
#undef AP_LOAD
#undef AP_STORE
#undef AP_SET1
#undef AP_ZERO
#undef AP_FMA
#undef AP_MUL
#undef AP_SUB
#undef AP_ADD
#undef AP_MAX
#undef AP_CVTPH
#undef AP_RND16
#undef AP_EXP
#undef AP_RMAX
#undef AP_RADD
#undef AP_RANGE
