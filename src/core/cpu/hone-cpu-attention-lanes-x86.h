/* hone-cpu-attention-lanes-x86.h — the batched attention kernel, included by
 * hone-cpu-attention.c once per vector width.
 *
 * Before including, define:
 *   AL(name)           the name with the width's suffix
 *   AL_TARGET          __attribute__((target ("…")))
 *   AL_N               lanes (queries a batch): 16 or 8
 *   AL_V, AL_VI        the float and int vector types
 *   AL_LOAD, AL_STORE, AL_SET1, AL_ZERO, AL_FMA, AL_MUL, AL_SUB, AL_ADD, AL_MAX, AL_DIV   float ops
 *   AL_LOADI(p)        AL_N ints
 *   AL_CVTPH(p)        AL_N halves from p as floats
 *   AL_RND16(v)        v rounded to f16 and back
 *   AL_EXP(v)          e^v (hone-cpu-x86-vec.h)
 *   AL_SEEN(j, lim, v, other)   v in the lanes whose lim ≥ j, other in the rest
 * (undefined again at the end, ready for the next width).
 *
 * Up to AL_N queries of one KV head, one per lane: query l is q + qoff[l],
 * its output out + qoff[l], and it sees keys 0 … lim[l]. The scores are kept
 * as [key][lane] (scratch: n_keys × AL_N floats), so q·k, the softmax and the
 * probability × V products all run across lanes with no horizontal sums:
 *   q·k: per key and dimension d, one FMA of k[d] (broadcast) × the queries'
 *        d (Qt, the queries transposed once); 8 keys at a time, converted from
 *        their block of the cache ([dim][16], hone-cpu-kv.h);
 *   P·V: per key and AL_N dimensions, one FMA per query of p (broadcast) × V.
 * Numbers as attention_head_avx2: q and the probabilities rounded to f16,
 * products and sums in f32 (other summation orders). head_dim: a multiple of AL_N.
 */

static AL_TARGET void
AL(attention_lanes) (const float *q, float *out, const size_t *qoff, const int *lim, int nl,
                     const uint16_t *k, const uint16_t *v, int hd, float scale, float *scratch)
{
  float *qt = scratch;                              /* [hd][AL_N] */
  float *kf = qt + (size_t) hd * AL_N;              /* [hd][8] */
  float *sc = kf + (size_t) 8 * hd;                 /* [n_keys][AL_N] */
  int n_keys = 0;
  AL_VI limv;
  AL_V mx = AL_SET1 (-INFINITY), sum = AL_ZERO (), inv;

  {
    int l32[AL_N];
    for (int l = 0; l < AL_N; l++)
      {
        /* missing lanes see every key of the batch with a zero query: finite, discarded */
        l32[l] = l < nl ? lim[l] : -1;
        n_keys = MAX (n_keys, l32[l] + 1);
      }
    for (int l = nl; l < AL_N; l++)
      l32[l] = n_keys - 1;
    limv = AL_LOADI (l32);
  }
  /* Qt[d][l] = f16-rounded query l */
  for (int d0 = 0; d0 < hd; d0 += AL_N)
    {
      float tile[AL_N][AL_N];
      for (int l = 0; l < AL_N; l++)
        AL_STORE (tile[l], AL_RND16 (l < nl ? AL_LOAD (q + qoff[l] + d0) : AL_ZERO ()));
      for (int d = 0; d < AL_N; d++)
        for (int l = 0; l < AL_N; l++)
          qt[(size_t) (d0 + d) * AL_N + l] = tile[l][d];
    }

  /* scores, 8 keys at a time */
  for (int j0 = 0; j0 < n_keys; j0 += 8)
    {
      const int nk = MIN (8, n_keys - j0);
      AL_V acc[8];

      /* keys j0 … j0 + 7 of their block of 16 ([dim][16]), as kf[d][kk]; past nk the block's
       * unfilled rows, whose sums are not kept */
      const uint16_t *kb = k + hone_cpu_kv_key_index (j0, 0, hd);

#pragma GCC unroll 8
      for (int kk = 0; kk < 8; kk++)
        acc[kk] = AL_ZERO ();
      for (int d = 0; d < hd; d++)
        _mm256_storeu_ps (kf + (size_t) d * 8, _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) (kb + (size_t) d * HONE_CPU_KV_BLOCK))));
      for (int d = 0; d < hd; d++)
        {
          const AL_V qd = AL_LOAD (qt + (size_t) d * AL_N);
#pragma GCC unroll 8
          for (int kk = 0; kk < 8; kk++)
            acc[kk] = AL_FMA (AL_SET1 (kf[(size_t) d * 8 + kk]), qd, acc[kk]);
        }
      for (int kk = 0; kk < nk; kk++)
        {
          const AL_V s = AL_SEEN (j0 + kk, limv, AL_MUL (acc[kk], AL_SET1 (scale)), AL_SET1 (-INFINITY));
          AL_STORE (sc + (size_t) (j0 + kk) * AL_N, s);
          mx = AL_MAX (mx, s);
        }
    }
  /* softmax over each lane's keys; probabilities normalized, then rounded to f16 */
  for (int j = 0; j < n_keys; j++)
    {
      const AL_V e = AL_SEEN (j, limv, AL_EXP (AL_SUB (AL_LOAD (sc + (size_t) j * AL_N), mx)), AL_ZERO ());
      AL_STORE (sc + (size_t) j * AL_N, e);
      sum = AL_ADD (sum, e);
    }
  inv = AL_DIV (AL_SET1 (1.0f), sum);
  for (int j = 0; j < n_keys; j++)
    AL_STORE (sc + (size_t) j * AL_N, AL_RND16 (AL_MUL (AL_LOAD (sc + (size_t) j * AL_N), inv)));
  /* out[l][d0 … d0 + AL_N − 1] = Σ_j p[j][l] · V[j][d0 …] */
  for (int d0 = 0; d0 < hd; d0 += AL_N)
    {
      AL_V acc[AL_N];

#pragma GCC unroll 16
      for (int l = 0; l < AL_N; l++)
        acc[l] = AL_ZERO ();
      for (int j = 0; j < n_keys; j++)
        {
          const AL_V vv = AL_CVTPH (v + (size_t) j * hd + d0);
          const float *pj = sc + (size_t) j * AL_N;
#pragma GCC unroll 16
          for (int l = 0; l < AL_N; l++)
            acc[l] = AL_FMA (AL_SET1 (pj[l]), vv, acc[l]);
        }
      for (int l = 0; l < nl; l++)
        AL_STORE (out + qoff[l] + d0, acc[l]);
    }
}

#undef AL
#undef AL_TARGET
#undef AL_N
#undef AL_V
#undef AL_VI
#undef AL_LOAD
#undef AL_STORE
#undef AL_SET1
#undef AL_ZERO
#undef AL_FMA
#undef AL_MUL
#undef AL_SUB
#undef AL_ADD
#undef AL_MAX
#undef AL_DIV
#undef AL_LOADI
#undef AL_CVTPH
#undef AL_RND16
#undef AL_EXP
#undef AL_SEEN
