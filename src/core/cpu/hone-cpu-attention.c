/* hone-cpu-attention.c — causal GQA attention: 16 (AVX-512) or 8 (AVX2)
 * queries of one KV head a work item (prefill); a KV head's few queries against
 * a segment of its keys a work item (decode); or, without AVX2 or for other
 * head sizes, one (token, head) a work item. */
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
#include "hone-cpu-x86-vec.h"

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
  /* a block's 16 keys ([dim][16]) in two vectors of lanes, one FMA a dim each */
  for (int j0 = 0; j0 < n_pos; j0 += HONE_CPU_KV_BLOCK)
    {
      const uint16_t *kb = k + hone_cpu_kv_key_index (j0, 0, hd);
      __m256 a0 = _mm256_setzero_ps (), a1 = _mm256_setzero_ps ();
      float s[HONE_CPU_KV_BLOCK];

      for (int d = 0; d < hd; d++)
        {
          const __m256 qd = _mm256_broadcast_ss (qh + d);
          a0 = _mm256_fmadd_ps (_mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) (kb + (size_t) d * 16))), qd, a0);
          a1 = _mm256_fmadd_ps (_mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) (kb + (size_t) d * 16 + 8))), qd, a1);
        }
      _mm256_storeu_ps (s, a0);
      _mm256_storeu_ps (s + 8, a1);
      for (int i = 0; i < MIN (HONE_CPU_KV_BLOCK, n_pos - j0); i++)
        {
          scores[j0 + i] = s[i] * scale;
          mx = fmaxf (mx, scores[j0 + i]);
        }
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

/* ---------------------------------------------------------------- queries in vector lanes */

static inline __attribute__((always_inline)) HONE_X86_256_TARGET float
hmax8 (__m256 v)
{
  __m128 x = _mm_max_ps (_mm256_castps256_ps128 (v), _mm256_extractf128_ps (v, 1));
  x = _mm_max_ps (x, _mm_movehl_ps (x, x));
  return _mm_cvtss_f32 (_mm_max_ss (x, _mm_movehdup_ps (x)));
}

static inline __attribute__((always_inline)) HONE_X86_256_TARGET float
hadd8 (__m256 v)
{
  __m128 x = _mm_add_ps (_mm256_castps256_ps128 (v), _mm256_extractf128_ps (v, 1));
  x = _mm_add_ps (x, _mm_movehl_ps (x, x));
  return _mm_cvtss_f32 (_mm_add_ss (x, _mm_movehdup_ps (x)));
}

#define AL(name) name##_avx512
#define AL_TARGET HONE_X86_512_TARGET
#define AL_N 16
#define AL_QG 16
#define AL_NV 1
#define AL_V __m512
#define AL_LOAD(p) _mm512_loadu_ps (p)
#define AL_STORE(p, v) _mm512_storeu_ps ((p), (v))
#define AL_SET1(f) _mm512_set1_ps (f)
#define AL_ZERO() _mm512_setzero_ps ()
#define AL_FMA(a, b, c) _mm512_fmadd_ps ((a), (b), (c))
#define AL_MUL(a, b) _mm512_mul_ps ((a), (b))
#define AL_SUB(a, b) _mm512_sub_ps ((a), (b))
#define AL_ADD(a, b) _mm512_add_ps ((a), (b))
#define AL_MAX(a, b) _mm512_max_ps ((a), (b))
#define AL_CVTPH(p) _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *) (p)))
#define AL_RND16(v) _mm512_cvtph_ps (_mm512_cvtps_ph ((v), _MM_FROUND_TO_NEAREST_INT))
#define AL_EXP(v) hone_x86_exp512 (v)
#define AL_UPTO(j0, lim, v, other)                                                                          \
  _mm512_mask_mov_ps ((other),                                                                              \
                      _mm512_cmple_epi32_mask (_mm512_add_epi32 (_mm512_set1_epi32 (j0),                    \
                                                                 _mm512_setr_epi32 (0, 1, 2, 3, 4, 5, 6, 7, \
                                                                                    8, 9, 10, 11, 12, 13,   \
                                                                                    14, 15)),               \
                                               _mm512_set1_epi32 (lim)),                                    \
                      (v))
#define AL_HMAX(v) _mm512_reduce_max_ps (v)
#define AL_HADD(v) _mm512_reduce_add_ps (v)
#include "hone-cpu-attention-lanes-x86.h"   /* it undefines the AL_ macros */

#define AL(name) name##_avx2
#define AL_TARGET HONE_X86_256_TARGET
#define AL_N 8
#define AL_QG 4
#define AL_NV 2
#define AL_V __m256
#define AL_LOAD(p) _mm256_loadu_ps (p)
#define AL_STORE(p, v) _mm256_storeu_ps ((p), (v))
#define AL_SET1(f) _mm256_set1_ps (f)
#define AL_ZERO() _mm256_setzero_ps ()
#define AL_FMA(a, b, c) _mm256_fmadd_ps ((a), (b), (c))
#define AL_MUL(a, b) _mm256_mul_ps ((a), (b))
#define AL_SUB(a, b) _mm256_sub_ps ((a), (b))
#define AL_ADD(a, b) _mm256_add_ps ((a), (b))
#define AL_MAX(a, b) _mm256_max_ps ((a), (b))
#define AL_CVTPH(p) _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) (p)))
#define AL_RND16(v) _mm256_cvtph_ps (_mm256_cvtps_ph ((v), _MM_FROUND_TO_NEAREST_INT))
#define AL_EXP(v) hone_x86_exp256 (v)
/* lanes with j0 + i > lim take other */
#define AL_UPTO(j0, lim, v, other)                                                                          \
  _mm256_blendv_ps ((v), (other),                                                                           \
                    _mm256_castsi256_ps (_mm256_cmpgt_epi32 (_mm256_add_epi32 (_mm256_set1_epi32 (j0),      \
                                                                               _mm256_setr_epi32 (0, 1, 2, \
                                                                                                  3, 4, 5, \
                                                                                                  6, 7)),   \
                                                             _mm256_set1_epi32 (lim))))
#define AL_HMAX(v) hmax8 (v)
#define AL_HADD(v) hadd8 (v)
#include "hone-cpu-attention-lanes-x86.h"   /* it undefines the AL_ macros */

/* ---------------------------------------------------------------- a few queries, keys split */

#define MAX_SPLIT_GROUP 64

/* lanes i with lo ≤ base + i < hi: all ones */
static inline __attribute__((always_inline)) HONE_X86_256_TARGET __m256i
range8 (int base, int lo, int hi)
{
  const __m256i idx = _mm256_add_epi32 (_mm256_setr_epi32 (0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32 (base));

  return _mm256_andnot_si256 (_mm256_cmpgt_epi32 (_mm256_set1_epi32 (lo), idx),
                              _mm256_cmpgt_epi32 (_mm256_set1_epi32 (hi), idx));
}

#define AP(name) name##_avx512
#define AP_TARGET HONE_X86_512_TARGET
#define AP_N 16
#define AP_OV 16
#define AP_V __m512
#define AP_LOAD(p) _mm512_loadu_ps (p)
#define AP_STORE(p, v) _mm512_storeu_ps ((p), (v))
#define AP_SET1(f) _mm512_set1_ps (f)
#define AP_ZERO() _mm512_setzero_ps ()
#define AP_FMA(a, b, c) _mm512_fmadd_ps ((a), (b), (c))
#define AP_MUL(a, b) _mm512_mul_ps ((a), (b))
#define AP_SUB(a, b) _mm512_sub_ps ((a), (b))
#define AP_ADD(a, b) _mm512_add_ps ((a), (b))
#define AP_MAX(a, b) _mm512_max_ps ((a), (b))
#define AP_CVTPH(p) _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *) (p)))
#define AP_RND16(v) _mm512_cvtph_ps (_mm512_cvtps_ph ((v), _MM_FROUND_TO_NEAREST_INT))
#define AP_EXP(v) hone_x86_exp512 (v)
#define AP_RMAX(v) _mm512_reduce_max_ps (v)
#define AP_RADD(v) _mm512_reduce_add_ps (v)
#define AP_RANGE(h, lo, hi, v, other) \
  _mm512_mask_mov_ps ((other), (__mmask16) (((1u << (hi)) - 1) & ~((1u << (lo)) - 1)), (v))
#include "hone-cpu-attention-split-x86.h"   /* it undefines the AP_ macros */

#define AP(name) name##_avx2
#define AP_TARGET HONE_X86_256_TARGET
#define AP_N 8
#define AP_OV 8
#define AP_V __m256
#define AP_LOAD(p) _mm256_loadu_ps (p)
#define AP_STORE(p, v) _mm256_storeu_ps ((p), (v))
#define AP_SET1(f) _mm256_set1_ps (f)
#define AP_ZERO() _mm256_setzero_ps ()
#define AP_FMA(a, b, c) _mm256_fmadd_ps ((a), (b), (c))
#define AP_MUL(a, b) _mm256_mul_ps ((a), (b))
#define AP_SUB(a, b) _mm256_sub_ps ((a), (b))
#define AP_ADD(a, b) _mm256_add_ps ((a), (b))
#define AP_MAX(a, b) _mm256_max_ps ((a), (b))
#define AP_CVTPH(p) _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) (p)))
#define AP_RND16(v) _mm256_cvtph_ps (_mm256_cvtps_ph ((v), _MM_FROUND_TO_NEAREST_INT))
#define AP_EXP(v) hone_x86_exp256 (v)
#define AP_RMAX(v) hmax8 (v)
#define AP_RADD(v) hadd8 (v)
/* keys h·8 + lane in [lo, hi) */
#define AP_RANGE(h, lo, hi, v, other) \
  _mm256_blendv_ps ((other), (v), _mm256_castsi256_ps (range8 (8 * (h), (lo), (hi))))
#include "hone-cpu-attention-split-x86.h"
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
      float s = 0.0f;
      for (int d = 0; d < hd; d++)
        s += hone_cpu_f16_to_f32 (k[hone_cpu_kv_key_index (j, d, hd)]) * qh[d];
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
  int lanes;              /* queries an item in vector lanes (16, 8), or 0 */
  int items_per_head;     /* lanes: ⌈T·group / lanes⌉ */
  int split;              /* lanes == 0: an item is a (KV head, token) and one of split segments of
                           * its keys; 0: an item is a (token, head) (attention_head) */
  float *part;            /* split: per item, group × (max, sum, hd outputs) */
  gboolean split_avx512;  /* split: attention_part_avx512, else _avx2 */
  atomic_int next;
} AttentionJob;

static int lanes_on = -1;

gboolean
hone_cpu_attention_lanes_enabled (void)
{
  return hone_cpu_switch_get (&lanes_on, "HONE_CPU_ATTN_LANES");
}

gboolean
hone_cpu_attention_lanes_set_enabled (gboolean on)
{
  return hone_cpu_switch_set (&lanes_on, "HONE_CPU_ATTN_LANES", on);
}

/* Queries a batch: 16 with AVX-512, 8 with AVX2, 0 where head_dim is not a
 * multiple of that or a KV head has fewer than 8 queries (decode: split_for). */
static int
lanes_for (int T, int group, int hd)
{
#ifdef HONE_HAVE_X86
  const int n = hone_cpu_isa () >= HONE_CPU_ISA_AVX512VNNI ? 16 : hone_cpu_isa () >= HONE_CPU_ISA_AVX2 ? 8 : 0;
  return hone_cpu_attention_lanes_enabled () && n > 0 && hd % n == 0 && T * group >= 8 ? n : 0;
#else
  (void) T;
  (void) group;
  (void) hd;
  return 0;
#endif
}

size_t
hone_cpu_attention_scratch_floats (int max_ctx, int head_dim)
{
  /* the one-head kernel: max_ctx scores; the batches: 16 query rows, 16 rows of scores (+ 32 rounding
   * up); the split keys: 17 a block of 16 keys (AVX2 at head_dim 128), fewer than the batches' */
  return MAX ((size_t) max_ctx, (size_t) head_dim * 16 + (size_t) (max_ctx + 32) * 16);
}

static void
attention_worker (gpointer data, int ith, int nth)
{
  AttentionJob *job = data;
  const int hd = job->kv->head_dim;
  const int group = job->n_heads / job->kv->n_kv_heads;
  const float scale = 1.0f / sqrtf ((float) hd);
  float *scores = job->scratch + (size_t) ith * job->scratch_stride;
  const int n_items = job->lanes ? job->kv->n_kv_heads * job->items_per_head
                      : job->split ? job->kv->n_kv_heads * job->T * job->split : job->T * job->n_heads;

  (void) nth;
  for (;;)
    {
      int item = atomic_fetch_add_explicit (&job->next, 1, memory_order_relaxed);

      if (item >= n_items)
        break;
#ifdef HONE_HAVE_X86
      if (job->lanes)
        {
          /* queries i = batch·lanes + l of KV head kh: token i / group, head kh·group + i % group */
          const int kh = item / job->items_per_head, i0 = item % job->items_per_head * job->lanes;
          const int nl = MIN (job->lanes, job->T * group - i0);
          size_t qoff[16];
          int lim[16];

          for (int l = 0; l < nl; l++)
            {
              const int t = (i0 + l) / group, h = kh * group + (i0 + l) % group;
              qoff[l] = ((size_t) t * job->n_heads + h) * hd;
              lim[l] = job->pos0 + t;
            }
          (job->lanes == 16 ? attention_lanes_avx512 : attention_lanes_avx2)
            (job->q, job->out, qoff, lim, nl, hone_cpu_kv_head (job->kv, job->layer, 0, kh),
             hone_cpu_kv_head (job->kv, job->layer, 1, kh), hd, scale, scores);
          continue;
        }
      if (job->split)
        {
          /* KV head kh, token t, keys [n·seg/split, n·(seg+1)/split) of its n */
          const int kh = item / (job->T * job->split), t = item / job->split % job->T, seg = item % job->split;
          const int n = job->pos0 + t + 1;
          float *part = job->part + (size_t) item * group * (hd + 2);
          const float *qp[MAX_SPLIT_GROUP];

          for (int g = 0; g < group; g++)
            qp[g] = job->q + ((size_t) t * job->n_heads + kh * group + g) * hd;
          (job->split_avx512 ? attention_part_avx512 : attention_part_avx2)
            (qp, group, hone_cpu_kv_head (job->kv, job->layer, 0, kh), hone_cpu_kv_head (job->kv, job->layer, 1, kh),
             hd, scale, (int) ((gint64) n * seg / job->split), (int) ((gint64) n * (seg + 1) / job->split),
             scores, part, part + group, part + 2 * group);
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

/* Segments to split each (KV head, token)'s keys into where a few queries a KV
 * head (decode) take attention_part_*: enough items for every thread (4 each),
 * each segment ≥ 256 keys; 0 where those kernels do not apply. */
static int
split_for (int T, int group, int hd, int n_kv, int pos0, int nth)
{
#ifdef HONE_HAVE_X86
  const int base = n_kv * T;

  if (!hone_cpu_attention_lanes_enabled () || hone_cpu_isa () < HONE_CPU_ISA_AVX2 || (hd != 64 && hd != 128)
      || group > MAX_SPLIT_GROUP)
    return 0;
  return MAX (1, MIN ((4 * nth + base - 1) / base, (pos0 + 1 + 255) / 256));
#else
  (void) T; (void) group; (void) hd; (void) n_kv; (void) pos0; (void) nth;
  return 0;
#endif
}

/* Each (KV head, token, query)'s segments into its output: the softmax's
 * partial states rescaled to their common max. */
static void
merge_split (const AttentionJob *job)
{
  const int hd = job->kv->head_dim, group = job->n_heads / job->kv->n_kv_heads;

  for (int kh = 0; kh < job->kv->n_kv_heads; kh++)
    for (int t = 0; t < job->T; t++)
      for (int g = 0; g < group; g++)
        {
          const size_t item0 = ((size_t) kh * job->T + t) * job->split;
          float *o = job->out + ((size_t) t * job->n_heads + kh * group + g) * hd;
          float mx = -INFINITY, sum = 0.0f;

          for (int seg = 0; seg < job->split; seg++)
            mx = fmaxf (mx, job->part[(item0 + seg) * group * (hd + 2) + g]);
          memset (o, 0, (size_t) hd * sizeof (float));
          for (int seg = 0; seg < job->split; seg++)
            {
              const float *part = job->part + (item0 + seg) * group * (hd + 2);
              const float w = expf (part[g] - mx);
              sum += w * part[group + g];
              for (int d = 0; d < hd; d++)
                o[d] += w * part[2 * group + (size_t) g * hd + d];
            }
          for (int d = 0; d < hd; d++)
            o[d] /= sum;
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
    .lanes = lanes_for (T, group, kv->head_dim),
  };
  job.items_per_head = job.lanes > 0 ? (T * group + job.lanes - 1) / job.lanes : 0;
  if (job.lanes == 0)
    job.split = split_for (T, group, kv->head_dim, kv->n_kv_heads, pos0, hone_cpu_pool_n_threads (pool));
  job.split_avx512 = hone_cpu_isa () >= HONE_CPU_ISA_AVX512VNNI;
  g_return_if_fail (scratch_stride >= hone_cpu_attention_scratch_floats (pos0 + T, kv->head_dim));
  if (job.split)
    job.part = g_new (float, (gsize) kv->n_kv_heads * T * job.split * group * (kv->head_dim + 2));
  atomic_init (&job.next, 0);
  hone_cpu_pool_run (pool, attention_worker, &job);
  if (job.split)
    {
      merge_split (&job);
      g_free (job.part);
    }
}
