/* hone-cpu-attention-lanes-x86.h — the batched attention kernel, included by
 * hone-cpu-attention.c once per vector width.
 *
 * Before including, define:
 *   AL(name)           the name with the width's suffix
 *   AL_TARGET          __attribute__((target ("…")))
 *   AL_N               lanes: 16 or 8 (a batch is up to AL_N queries)
 *   AL_QG, AL_NV       a register tile: AL_QG queries × AL_NV vectors (AVX2: 4 × 2 in its 16
 *                      registers; AVX-512: 16 × 1, see below)
 *   AL_V               the float vector type
 *   AL_LOAD, AL_STORE, AL_SET1, AL_ZERO, AL_FMA, AL_MUL, AL_SUB, AL_ADD, AL_MAX   float ops
 *   AL_CVTPH(p)        AL_N halves from p as floats
 *   AL_RND16(v)        v rounded to f16 and back
 *   AL_EXP(v)          e^v (hone-cpu-x86-vec.h)
 *   AL_UPTO(j0, lim, v, other)   v in the lanes i with j0 + i ≤ lim, other in the rest
 *   AL_HMAX(v), AL_HADD(v)       the largest lane, the sum of the lanes
 * (undefined again at the end, ready for the next width).
 *
 * Up to AL_N queries of one KV head: query l is q + qoff[l], its output
 * out + qoff[l], and it sees keys 0 … lim[l]. Each product runs on a register
 * tile of AL_QG queries × AL_NV vectors: a vector converted from f16 feeds
 * AL_QG FMAs, a broadcast AL_NV. AVX2 (4 × 2: 0.75 loads an FMA, against 1.1
 * with one operand of every FMA from memory) was waiting on its loads; the
 * AVX-512 form runs its 512-bit FMAs at half rate on the CPUs measured (Zen 4
 * and 5 class) and is bound by them: 16 × 1 there keeps one conversion per
 * 16 FMAs, where 8 × 2 took two and measured 6 % slower
 * (tests/bench/RESULTS.md, session 32):
 *   q·k: the scores as [query][key]; per dimension, AL_NV vectors of keys
 *        straight from their blocks in the cache ([dim][16], hone-cpu-kv.h)
 *        times AL_QG broadcast query values;
 *   softmax: along each query's row, up to its own lim;
 *   P·V: per key, AL_NV vectors of V's dimensions times AL_QG broadcast
 *        probabilities.
 * Numbers as attention_head_avx2: q and the probabilities rounded to f16,
 * products and sums in f32 (other summation orders). head_dim: a multiple of AL_N.
 */

/* Scores of queries l0 … l0 + AL_QG − 1 against keys kt … kt + NV·AL_N − 1
 * (NV ≤ AL_NV vectors), scaled, into sc rows of stride ns. */
#define AL_QK_TILE(NV)                                                                                        \
  do                                                                                                          \
    {                                                                                                         \
      AL_V acc[AL_QG][NV];                                                                                    \
      const uint16_t *kp[NV];                                                                                 \
      _Pragma ("GCC unroll 2")                                                                                \
      for (int c = 0; c < (NV); c++)                                                                          \
        kp[c] = k + hone_cpu_kv_key_index (kt + c * AL_N, 0, hd);                                             \
      _Pragma ("GCC unroll 16")                                                                                \
      for (int l = 0; l < AL_QG; l++)                                                                         \
        _Pragma ("GCC unroll 2")                                                                              \
        for (int c = 0; c < (NV); c++)                                                                        \
          acc[l][c] = AL_ZERO ();                                                                             \
      for (int d = 0; d < hd; d++)                                                                            \
        {                                                                                                     \
          AL_V kv[NV];                                                                                        \
          _Pragma ("GCC unroll 2")                                                                            \
          for (int c = 0; c < (NV); c++)                                                                      \
            kv[c] = AL_CVTPH (kp[c] + (size_t) d * HONE_CPU_KV_BLOCK);                                        \
          _Pragma ("GCC unroll 16")                                                                            \
          for (int l = 0; l < AL_QG; l++)                                                                     \
            {                                                                                                 \
              const AL_V qb = AL_SET1 (qr[(size_t) (l0 + l) * hd + d]);                                       \
              _Pragma ("GCC unroll 2")                                                                        \
              for (int c = 0; c < (NV); c++)                                                                  \
                acc[l][c] = AL_FMA (qb, kv[c], acc[l][c]);                                                    \
            }                                                                                                 \
        }                                                                                                     \
      _Pragma ("GCC unroll 16")                                                                                \
      for (int l = 0; l < AL_QG; l++)                                                                         \
        _Pragma ("GCC unroll 2")                                                                              \
        for (int c = 0; c < (NV); c++)                                                                        \
          AL_STORE (sc + (size_t) (l0 + l) * ns + kt + c * AL_N, AL_MUL (acc[l][c], vscale));                 \
    }                                                                                                         \
  while (0)

/* out rows l0 … of dimensions d0 … d0 + NV·AL_N − 1 = Σ_j p[l][j] · V[j][d0 …] over keys 0 … nk − 1. */
#define AL_PV_TILE(NV)                                                                                        \
  do                                                                                                          \
    {                                                                                                         \
      AL_V acc[AL_QG][NV];                                                                                    \
      _Pragma ("GCC unroll 16")                                                                                \
      for (int l = 0; l < AL_QG; l++)                                                                         \
        _Pragma ("GCC unroll 2")                                                                              \
        for (int c = 0; c < (NV); c++)                                                                        \
          acc[l][c] = AL_ZERO ();                                                                             \
      for (int j = 0; j < nk; j++)                                                                            \
        {                                                                                                     \
          AL_V vv[NV];                                                                                        \
          _Pragma ("GCC unroll 2")                                                                            \
          for (int c = 0; c < (NV); c++)                                                                      \
            vv[c] = AL_CVTPH (v + (size_t) j * hd + d0 + c * AL_N);                                           \
          _Pragma ("GCC unroll 16")                                                                            \
          for (int l = 0; l < AL_QG; l++)                                                                     \
            {                                                                                                 \
              const AL_V pb = AL_SET1 (sc[(size_t) (l0 + l) * ns + j]);                                       \
              _Pragma ("GCC unroll 2")                                                                        \
              for (int c = 0; c < (NV); c++)                                                                  \
                acc[l][c] = AL_FMA (pb, vv[c], acc[l][c]);                                                    \
            }                                                                                                 \
        }                                                                                                     \
      for (int l = 0; l < AL_QG && l0 + l < nl; l++)                                                          \
        _Pragma ("GCC unroll 2")                                                                              \
        for (int c = 0; c < (NV); c++)                                                                        \
          AL_STORE (out + qoff[l0 + l] + d0 + c * AL_N, acc[l][c]);                                           \
    }                                                                                                         \
  while (0)

static AL_TARGET void
AL(attention_lanes) (const float *q, float *out, const size_t *qoff, const int *lim, int nl,
                     const uint16_t *k, const uint16_t *v, int hd, float scale, float *scratch)
{
  const int nq = (nl + AL_QG - 1) / AL_QG * AL_QG;   /* rows past nl: a zero query, discarded */
  float *qr = scratch;                               /* [AL_N][hd] */
  float *sc = qr + (size_t) AL_N * hd;               /* [AL_N][ns] */
  const AL_V vscale = AL_SET1 (scale);
  int n_keys = 0, ns;

  for (int l = 0; l < nl; l++)
    n_keys = MAX (n_keys, lim[l] + 1);
  /* rows of ns scores: n_keys rounded up to a tile's keys, so the tiles need no tail */
  ns = (n_keys + AL_NV * AL_N - 1) / (AL_NV * AL_N) * (AL_NV * AL_N);

  /* qr[l] = f16-rounded query l */
  for (int l = 0; l < nq; l++)
    for (int d = 0; d < hd; d += AL_N)
      AL_STORE (qr + (size_t) l * hd + d, AL_RND16 (l < nl ? AL_LOAD (q + qoff[l] + d) : AL_ZERO ()));

  /* scores: AL_NV vectors of keys a tile while all start below n_keys (a block past the cache's rows
   * is never read), one for the last; keys past a row's lim are scored and then dropped by the softmax */
  for (int l0 = 0; l0 < nq; l0 += AL_QG)
    {
      int kt = 0;
      for (; kt + (AL_NV - 1) * AL_N < n_keys && AL_NV > 1; kt += AL_NV * AL_N)
        AL_QK_TILE (AL_NV);
      for (; kt < n_keys; kt += AL_N)
        AL_QK_TILE (1);
    }

  /* softmax along each row up to its lim; the rest of the row, to ns, zero */
  for (int l = 0; l < nq; l++)
    {
      float *row = sc + (size_t) l * ns;
      const int lm = l < nl ? lim[l] : 0;
      const int nv = lm / AL_N + 1;   /* vectors holding keys 0 … lm */
      AL_V mx = AL_SET1 (-INFINITY), sum = AL_ZERO (), inv;

      for (int i = 0; i < nv; i++)
        mx = AL_MAX (mx, AL_UPTO (i * AL_N, lm, AL_LOAD (row + i * AL_N), AL_SET1 (-INFINITY)));
      mx = AL_SET1 (AL_HMAX (mx));
      for (int i = 0; i < nv; i++)
        {
          const AL_V e = AL_UPTO (i * AL_N, lm, AL_EXP (AL_SUB (AL_LOAD (row + i * AL_N), mx)), AL_ZERO ());
          AL_STORE (row + i * AL_N, e);
          sum = AL_ADD (sum, e);
        }
      inv = AL_SET1 (1.0f / AL_HADD (sum));
      for (int i = 0; i < nv; i++)
        AL_STORE (row + i * AL_N, AL_RND16 (AL_MUL (AL_LOAD (row + i * AL_N), inv)));
      for (int i = nv * AL_N; i < ns; i += AL_N)
        AL_STORE (row + i, AL_ZERO ());
    }

  /* out = P·V, each tile of queries over the keys its rows see */
  for (int l0 = 0; l0 < nq; l0 += AL_QG)
    {
      int nk = 0, d0 = 0;
      for (int l = l0; l < l0 + AL_QG && l < nl; l++)
        nk = MAX (nk, lim[l] + 1);
      for (; d0 + AL_NV * AL_N <= hd && AL_NV > 1; d0 += AL_NV * AL_N)
        AL_PV_TILE (AL_NV);
      for (; d0 < hd; d0 += AL_N)
        AL_PV_TILE (1);
    }
}

#undef AL_QK_TILE
#undef AL_PV_TILE
#undef AL
#undef AL_TARGET
#undef AL_N
#undef AL_V
#undef AL_LOAD
#undef AL_STORE
#undef AL_SET1
#undef AL_ZERO
#undef AL_FMA
#undef AL_MUL
#undef AL_SUB
#undef AL_ADD
#undef AL_MAX
#undef AL_CVTPH
#undef AL_RND16
#undef AL_EXP
#undef AL_UPTO
#undef AL_HMAX
#undef AL_HADD
#undef AL_QG
#undef AL_NV
