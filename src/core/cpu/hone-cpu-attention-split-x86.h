/* hone-cpu-attention-split-x86.h — the decode attention kernel (a few queries
 * of one KV head against a segment of its keys), included by
 * hone-cpu-attention.c once per vector width.
 *
 * Before including, define (undefined again at the end):
 *   AP(name)        the name with the width's suffix
 *   AP_TARGET       __attribute__((target ("…")))
 *   AP_N            lanes, and keys a block: 16 or 8
 *   AP_V            the float vector type
 *   AP_LOAD, AP_STORE, AP_SET1, AP_ZERO, AP_FMA, AP_MUL, AP_SUB   float ops
 *   AP_CVTPH(p)     AP_N halves from p as floats
 *   AP_RND16(v)     v rounded to f16 and back
 *   AP_EXP(v)       e^v (hone-cpu-x86-vec.h)
 *   AP_SUMS(a)      the AP_N vectors a[0 …]'s sums: lane i = Σ of a[i]'s lanes
 *   AP_RMAX(v), AP_RADD(v)   the max, the sum of v's lanes
 *   AP_FIRST(n, v, other)    v in lanes 0 … n − 1, other in the rest
 *
 * Queries q[0 … G − 1] (rounded to f16 here, as everywhere) of one KV head
 * against its keys [jb, je), AP_N keys a block: each block's K and V rows
 * converted once into buf (2·AP_N·hd floats, then hd for the rounded query)
 * for all G queries; q·k as AP_N accumulators per query summed across lanes by
 * AP_SUMS; an online softmax (a running max per query, earlier sums rescaled
 * when it grows); probabilities rounded to f16. Writes the partial state of
 * query g: m[g] (max score), l[g] (Σ e^{s − m}), o[g·hd …] (Σ p·V, not normalized).
 * HDN = hd / AP_N, a compile-time constant.
 */

static inline __attribute__((always_inline)) AP_TARGET void
AP(attention_part_hd) (const float *const *q, int G, const uint16_t *k, const uint16_t *v, float scale, int jb,
                       int je, float *buf, float *m, float *l, float *o, const int HDN)
{
  const int hd = AP_N * HDN;
  /* P·V holds up to 8 vectors of outputs in registers at a time */
  const int PVN = HDN < 8 ? HDN : 8;
  float *kb = buf, *vb = buf + (size_t) AP_N * hd, *qb = vb + (size_t) AP_N * hd;

  for (int g = 0; g < G; g++)
    {
      m[g] = -INFINITY;
      l[g] = 0.0f;
      memset (o + (size_t) g * hd, 0, (size_t) hd * sizeof (float));
    }
  for (int j0 = jb; j0 < je; j0 += AP_N)
    {
      const int nk = MIN (AP_N, je - j0);

      for (int i = 0; i < AP_N; i++)
        for (int c = 0; c < HDN; c++)
          {
            AP_STORE (kb + (size_t) i * hd + AP_N * c, i < nk ? AP_CVTPH (k + (size_t) (j0 + i) * hd + AP_N * c) : AP_ZERO ());
            AP_STORE (vb + (size_t) i * hd + AP_N * c, i < nk ? AP_CVTPH (v + (size_t) (j0 + i) * hd + AP_N * c) : AP_ZERO ());
          }
      for (int g = 0; g < G; g++)
        {
          AP_V acc[AP_N], s, e;
          float bm, mnew, corr, p[AP_N];

          for (int c = 0; c < HDN; c++)
            AP_STORE (qb + AP_N * c, AP_RND16 (AP_LOAD (q[g] + AP_N * c)));
#pragma GCC unroll 16
          for (int i = 0; i < AP_N; i++)
            acc[i] = AP_ZERO ();
#pragma GCC unroll 16
          for (int c = 0; c < HDN; c++)
            {
              const AP_V qv = AP_LOAD (qb + AP_N * c);
#pragma GCC unroll 16
              for (int i = 0; i < AP_N; i++)
                acc[i] = AP_FMA (AP_LOAD (kb + (size_t) i * hd + AP_N * c), qv, acc[i]);
            }
          s = AP_FIRST (nk, AP_MUL (AP_SUMS (acc), AP_SET1 (scale)), AP_SET1 (-INFINITY));
          bm = AP_RMAX (s);
          mnew = fmaxf (m[g], bm);
          corr = expf (m[g] - mnew);   /* 0 on the first block (m = −inf) */
          e = AP_FIRST (nk, AP_EXP (AP_SUB (s, AP_SET1 (mnew))), AP_ZERO ());
          l[g] = l[g] * corr + AP_RADD (e);
          m[g] = mnew;
          AP_STORE (p, AP_RND16 (e));
          for (int c0 = 0; c0 < HDN; c0 += PVN)
            {
              AP_V ov[8];

#pragma GCC unroll 8
              for (int c = 0; c < PVN; c++)
                ov[c] = AP_MUL (AP_LOAD (o + (size_t) g * hd + AP_N * (c0 + c)), AP_SET1 (corr));
              for (int i = 0; i < nk; i++)
                {
                  const AP_V pi = AP_SET1 (p[i]);
#pragma GCC unroll 8
                  for (int c = 0; c < PVN; c++)
                    ov[c] = AP_FMA (pi, AP_LOAD (vb + (size_t) i * hd + AP_N * (c0 + c)), ov[c]);
                }
#pragma GCC unroll 8
              for (int c = 0; c < PVN; c++)
                AP_STORE (o + (size_t) g * hd + AP_N * (c0 + c), ov[c]);
            }
        }
    }
}

/* head_dim 64 or 128 */
static AP_TARGET void
AP(attention_part) (const float *const *q, int G, const uint16_t *k, const uint16_t *v, int hd, float scale,
                    int jb, int je, float *buf, float *m, float *l, float *o)
{
  if (hd == 64)
    AP(attention_part_hd) (q, G, k, v, scale, jb, je, buf, m, l, o, 64 / AP_N);
  else
    AP(attention_part_hd) (q, G, k, v, scale, jb, je, buf, m, l, o, 128 / AP_N);
}

#undef AP
#undef AP_TARGET
#undef AP_N
#undef AP_V
#undef AP_LOAD
#undef AP_STORE
#undef AP_SET1
#undef AP_ZERO
#undef AP_FMA
#undef AP_MUL
#undef AP_SUB
#undef AP_CVTPH
#undef AP_RND16
#undef AP_EXP
#undef AP_SUMS
#undef AP_RMAX
#undef AP_RADD
#undef AP_FIRST
