/* hone-cpu-attention.c — causal GQA attention: 16 queries of one KV head a
 * work item (AVX-512), or one (token, head) a work item. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize ("O3")
#endif

#include "hone-cpu-attention.h"

#include <math.h>
#include <stdatomic.h>
#include "hone-cpu-dot.h"
#include "hone-cpu-ops.h"
#include "hone-dtype.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HONE_HAVE_X86 1
#include <immintrin.h>
#include "hone-cpu-x86-512.h"

#define AVX_TARGET __attribute__((target ("avx2,fma,f16c")))

static AVX_TARGET void
attention_head_avx2 (const float *q, const uint16_t *k, const uint16_t *v, int n_pos,
                     int hd, float scale, float *scores, float *out)
{
  float mx = -INFINITY, sum = 0.0f, inv;
  float qh[HONE_CPU_MAX_HEAD_DIM];

  /* q·k as an f16 × f16 dot with f32 accumulation (llama.cpp's KQ matmul) */
  for (int d = 0; d < hd; d += 8)
    _mm256_storeu_ps (qh + d, _mm256_cvtph_ps (_mm256_cvtps_ph (_mm256_loadu_ps (q + d), _MM_FROUND_TO_NEAREST_INT)));
  for (int j = 0; j < n_pos; j++)
    {
      const uint16_t *kj = k + (size_t) j * hd;
      __m256 acc = _mm256_setzero_ps ();
      __m128 s;
      for (int d = 0; d < hd; d += 8)
        acc = _mm256_fmadd_ps (_mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) (kj + d))),
                               _mm256_loadu_ps (qh + d), acc);
      s = _mm_add_ps (_mm256_castps256_ps128 (acc), _mm256_extractf128_ps (acc, 1));
      s = _mm_add_ps (s, _mm_movehl_ps (s, s));
      s = _mm_add_ss (s, _mm_movehdup_ps (s));
      scores[j] = _mm_cvtss_f32 (s) * scale;
      mx = fmaxf (mx, scores[j]);
    }
  for (int j = 0; j < n_pos; j++)
    {
      scores[j] = expf (scores[j] - mx);
      sum += scores[j];
    }
  inv = 1.0f / sum;
  /* probabilities as f16, normalized before the V product (llama.cpp's KQV matmul) */
  for (int j = 0; j < n_pos; j++)
    scores[j] = _cvtsh_ss (_cvtss_sh (scores[j] * inv, _MM_FROUND_TO_NEAREST_INT));
  inv = 1.0f;
  /* 64 output dims (8 registers) at a time over all positions. */
  for (int d0 = 0; d0 < hd; d0 += 64)
    {
      int nv = MIN (64, hd - d0) / 8;
      __m256 acc[8];
      for (int i = 0; i < 8; i++)
        acc[i] = _mm256_setzero_ps ();
      for (int j = 0; j < n_pos; j++)
        {
          const uint16_t *vj = v + (size_t) j * hd + d0;
          __m256 p = _mm256_set1_ps (scores[j]);
          if (nv == 8)
            {
#pragma GCC unroll 8
              for (int i = 0; i < 8; i++)
                acc[i] = _mm256_fmadd_ps (_mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) (vj + 8 * i))), p, acc[i]);
            }
          else
            for (int i = 0; i < nv; i++)
              acc[i] = _mm256_fmadd_ps (_mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) (vj + 8 * i))), p, acc[i]);
        }
      for (int i = 0; i < nv; i++)
        _mm256_storeu_ps (out + d0 + 8 * i, _mm256_mul_ps (acc[i], _mm256_set1_ps (inv)));
    }
}

/* ---------------------------------------------------------------- 16 queries a batch (AVX-512) */

#define AVX512_TARGET HONE_X86_512_TARGET
#define LANES 16

/* Up to 16 queries of one KV head, one per lane: query l is q + qoff[l],
 * its output out + qoff[l], and it sees keys 0 … lim[l]. The scores are kept
 * as [key][lane] (scratch: n_keys × 16 floats), so q·k, the softmax and the
 * probability × V products all run across lanes with no horizontal sums:
 *   q·k: per key and dimension d, one FMA of k[d] (broadcast) × the 16
 *        queries' d (Qt, the queries transposed once);
 *   P·V: per key and 16 dimensions, one FMA per query of p (broadcast) × V.
 * Numbers as attention_head_avx2: q and the probabilities rounded to f16,
 * products and sums in f32 (other summation orders). */
static AVX512_TARGET void
attention_lanes_avx512 (const float *q, float *out, const size_t *qoff, const int *lim, int nl,
                        const uint16_t *k, const uint16_t *v, int hd, float scale, float *scratch)
{
  float *qt = scratch;                              /* [hd][16] */
  float *kf = qt + (size_t) hd * LANES;             /* [8][hd] */
  float *sc = kf + (size_t) 8 * hd;                 /* [n_keys][16] */
  int n_keys = 0;
  __m512i limv;
  __m512 mx = _mm512_set1_ps (-INFINITY), sum = _mm512_setzero_ps (), inv;

  {
    int l32[LANES];
    for (int l = 0; l < LANES; l++)
      {
        /* missing lanes see every key of the batch with a zero query: finite, discarded */
        l32[l] = l < nl ? lim[l] : -1;
        n_keys = MAX (n_keys, l32[l] + 1);
      }
    for (int l = nl; l < LANES; l++)
      l32[l] = n_keys - 1;
    limv = _mm512_loadu_si512 ((const void *) l32);
  }
  /* Qt[d][l] = f16-rounded query l */
  for (int d0 = 0; d0 < hd; d0 += 16)
    {
      float tile[LANES][LANES];
      for (int l = 0; l < LANES; l++)
        {
          __m512 x = l < nl ? _mm512_loadu_ps (q + qoff[l] + d0) : _mm512_setzero_ps ();
          _mm512_storeu_ps (tile[l], _mm512_cvtph_ps (_mm512_cvtps_ph (x, _MM_FROUND_TO_NEAREST_INT)));
        }
      for (int d = 0; d < 16; d++)
        for (int l = 0; l < LANES; l++)
          qt[(size_t) (d0 + d) * LANES + l] = tile[l][d];
    }

  /* scores, 8 keys at a time */
  for (int j0 = 0; j0 < n_keys; j0 += 8)
    {
      const int nk = MIN (8, n_keys - j0);
      __m512 acc[8];

      for (int kk = 0; kk < 8; kk++)
        {
          acc[kk] = _mm512_setzero_ps ();
          for (int d = 0; d < hd; d += 16)
            _mm512_storeu_ps (kf + (size_t) kk * hd + d,
                              kk < nk ? _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *) (k + (size_t) (j0 + kk) * hd + d)))
                                      : _mm512_setzero_ps ());
        }
      for (int d = 0; d < hd; d++)
        {
          const __m512 qd = _mm512_loadu_ps (qt + (size_t) d * LANES);
#pragma GCC unroll 8
          for (int kk = 0; kk < 8; kk++)
            acc[kk] = _mm512_fmadd_ps (_mm512_set1_ps (kf[(size_t) kk * hd + d]), qd, acc[kk]);
        }
      for (int kk = 0; kk < nk; kk++)
        {
          const __mmask16 seen = _mm512_cmple_epi32_mask (_mm512_set1_epi32 (j0 + kk), limv);
          const __m512 s = _mm512_mask_mov_ps (_mm512_set1_ps (-INFINITY), seen, _mm512_mul_ps (acc[kk], _mm512_set1_ps (scale)));
          _mm512_storeu_ps (sc + (size_t) (j0 + kk) * LANES, s);
          mx = _mm512_max_ps (mx, s);
        }
    }
  /* softmax over each lane's keys; probabilities normalized, then rounded to f16 */
  for (int j = 0; j < n_keys; j++)
    {
      const __mmask16 seen = _mm512_cmple_epi32_mask (_mm512_set1_epi32 (j), limv);
      const __m512 e = _mm512_maskz_mov_ps (seen, hone_x86_exp512 (_mm512_sub_ps (_mm512_loadu_ps (sc + (size_t) j * LANES), mx)));
      _mm512_storeu_ps (sc + (size_t) j * LANES, e);
      sum = _mm512_add_ps (sum, e);
    }
  inv = _mm512_div_ps (_mm512_set1_ps (1.0f), sum);
  for (int j = 0; j < n_keys; j++)
    {
      const __m512 p = _mm512_mul_ps (_mm512_loadu_ps (sc + (size_t) j * LANES), inv);
      _mm512_storeu_ps (sc + (size_t) j * LANES, _mm512_cvtph_ps (_mm512_cvtps_ph (p, _MM_FROUND_TO_NEAREST_INT)));
    }
  /* out[l][d0 … d0+15] = Σ_j p[j][l] · V[j][d0 …] */
  for (int d0 = 0; d0 < hd; d0 += 16)
    {
      __m512 acc[LANES];

#pragma GCC unroll 16
      for (int l = 0; l < LANES; l++)
        acc[l] = _mm512_setzero_ps ();
      for (int j = 0; j < n_keys; j++)
        {
          const __m512 vv = _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *) (v + (size_t) j * hd + d0)));
          const float *pj = sc + (size_t) j * LANES;
#pragma GCC unroll 16
          for (int l = 0; l < LANES; l++)
            acc[l] = _mm512_fmadd_ps (_mm512_set1_ps (pj[l]), vv, acc[l]);
        }
      for (int l = 0; l < nl; l++)
        _mm512_storeu_ps (out + qoff[l] + d0, acc[l]);
    }
}
#endif

static void
attention_head_portable (const float *q, const uint16_t *k, const uint16_t *v, int n_pos,
                         int hd, float scale, float *scores, float *out)
{
  float qh[HONE_CPU_MAX_HEAD_DIM];

  for (int d = 0; d < hd; d++)
    qh[d] = hone_cpu_f16_to_f32 (hone_f32_to_f16 (q[d]));
  for (int j = 0; j < n_pos; j++)
    {
      const uint16_t *kj = k + (size_t) j * hd;
      float s = 0.0f;
      for (int d = 0; d < hd; d++)
        s += hone_cpu_f16_to_f32 (kj[d]) * qh[d];
      scores[j] = s * scale;
    }
  hone_cpu_softmax (scores, n_pos);
  for (int j = 0; j < n_pos; j++)
    scores[j] = hone_cpu_f16_to_f32 (hone_f32_to_f16 (scores[j]));
  for (int d = 0; d < hd; d++)
    out[d] = 0.0f;
  for (int j = 0; j < n_pos; j++)
    {
      const uint16_t *vj = v + (size_t) j * hd;
      for (int d = 0; d < hd; d++)
        out[d] += scores[j] * hone_cpu_f16_to_f32 (vj[d]);
    }
}

void
hone_cpu_attention_head (const float *q, const uint16_t *k, const uint16_t *v, int n_pos,
                         int head_dim, float scale, float *scores, float *out)
{
#ifdef HONE_HAVE_X86
  if (hone_cpu_isa () >= HONE_CPU_ISA_AVX2 && head_dim % 8 == 0)
    {
      attention_head_avx2 (q, k, v, n_pos, head_dim, scale, scores, out);
      return;
    }
#endif
  attention_head_portable (q, k, v, n_pos, head_dim, scale, scores, out);
}

typedef struct {
  HoneCpuKv *kv;
  int layer;
  const float *q;
  int T, pos0, n_heads;
  float *out;
  float *scratch;
  size_t scratch_stride;
  gboolean lanes;          /* 16 queries an item (attention_lanes_avx512) */
  int items_per_head;      /* lanes: ⌈T·group / 16⌉ */
  atomic_int next;
} AttentionJob;

static int lanes_on = -1;

gboolean
hone_cpu_attention_lanes_enabled (void)
{
  if (lanes_on < 0)
    lanes_on = g_strcmp0 (g_getenv ("HONE_CPU_ATTN_LANES"), "0") != 0;
  return lanes_on;
}

gboolean
hone_cpu_attention_lanes_set_enabled (gboolean on)
{
  gboolean was = hone_cpu_attention_lanes_enabled ();

  lanes_on = on != FALSE;
  return was;
}

/* Batches of queries need AVX-512, head_dim a multiple of 16, and enough
 * queries per KV head to fill lanes (decode keeps the one-head kernel). */
static gboolean
use_lanes (int T, int group, int hd)
{
#ifdef HONE_HAVE_X86
  return hone_cpu_attention_lanes_enabled () && hone_cpu_isa () >= HONE_CPU_ISA_AVX512VNNI && hd % 16 == 0
         && T * group >= 8;
#else
  (void) T;
  (void) group;
  (void) hd;
  return FALSE;
#endif
}

size_t
hone_cpu_attention_scratch_floats (int max_ctx, int head_dim)
{
  /* the one-head kernel: max_ctx scores; the batches: Qt, 8 keys, 16 scores a key (+ 8 rounding up) */
  return MAX ((size_t) max_ctx, (size_t) head_dim * (LANES + 8) + (size_t) (max_ctx + 8) * LANES);
}

static void
attention_worker (gpointer data, int ith, int nth)
{
  AttentionJob *job = data;
  const int hd = job->kv->head_dim;
  const int group = job->n_heads / job->kv->n_kv_heads;
  const float scale = 1.0f / sqrtf ((float) hd);
  float *scores = job->scratch + (size_t) ith * job->scratch_stride;
  const int n_items = job->lanes ? job->kv->n_kv_heads * job->items_per_head : job->T * job->n_heads;

  (void) nth;
  for (;;)
    {
      int item = atomic_fetch_add_explicit (&job->next, 1, memory_order_relaxed);

      if (item >= n_items)
        break;
#ifdef HONE_HAVE_X86
      if (job->lanes)
        {
          /* queries i = batch·16 + l of KV head kh: token i / group, head kh·group + i % group */
          const int kh = item / job->items_per_head, i0 = item % job->items_per_head * LANES;
          const int nl = MIN (LANES, job->T * group - i0);
          size_t qoff[LANES];
          int lim[LANES];

          for (int l = 0; l < nl; l++)
            {
              const int t = (i0 + l) / group, h = kh * group + (i0 + l) % group;
              qoff[l] = ((size_t) t * job->n_heads + h) * hd;
              lim[l] = job->pos0 + t;
            }
          attention_lanes_avx512 (job->q, job->out, qoff, lim, nl, hone_cpu_kv_head (job->kv, job->layer, 0, kh),
                                  hone_cpu_kv_head (job->kv, job->layer, 1, kh), hd, scale, scores);
          continue;
        }
#endif
      {
        const int t = item / job->n_heads, h = item % job->n_heads;
        const size_t off = ((size_t) t * job->n_heads + h) * hd;
        hone_cpu_attention_head (job->q + off,
                                 hone_cpu_kv_head (job->kv, job->layer, 0, h / group),
                                 hone_cpu_kv_head (job->kv, job->layer, 1, h / group),
                                 job->pos0 + t + 1, hd, scale, scores, job->out + off);
      }
    }
}

void
hone_cpu_attention (HoneCpuPool *pool, HoneCpuKv *kv, int layer, const float *q, int T, int pos0,
                    int n_heads, float *out, float *scratch, size_t scratch_stride)
{
  const int group = n_heads / kv->n_kv_heads;
  AttentionJob job = {
    .kv = kv, .layer = layer, .q = q, .T = T, .pos0 = pos0, .n_heads = n_heads,
    .out = out, .scratch = scratch, .scratch_stride = scratch_stride,
    .lanes = use_lanes (T, group, kv->head_dim),
    .items_per_head = (T * group + LANES - 1) / LANES,
  };
  g_return_if_fail (scratch_stride >= hone_cpu_attention_scratch_floats (pos0 + T, kv->head_dim));
  atomic_init (&job.next, 0);
  hone_cpu_pool_run (pool, attention_worker, &job);
}
