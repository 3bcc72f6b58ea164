/* hone-cpu-attention.c — causal GQA attention: 16 (AVX-512) or 8 (AVX2)
 * queries of one KV head a work item, or one (token, head) a work item. */
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

/* ---------------------------------------------------------------- queries in vector lanes */

#define AL(name) name##_avx512
#define AL_TARGET HONE_X86_512_TARGET
#define AL_N 16
#define AL_V __m512
#define AL_VI __m512i
#define AL_LOAD(p) _mm512_loadu_ps (p)
#define AL_STORE(p, v) _mm512_storeu_ps ((p), (v))
#define AL_SET1(f) _mm512_set1_ps (f)
#define AL_ZERO() _mm512_setzero_ps ()
#define AL_FMA(a, b, c) _mm512_fmadd_ps ((a), (b), (c))
#define AL_MUL(a, b) _mm512_mul_ps ((a), (b))
#define AL_SUB(a, b) _mm512_sub_ps ((a), (b))
#define AL_ADD(a, b) _mm512_add_ps ((a), (b))
#define AL_MAX(a, b) _mm512_max_ps ((a), (b))
#define AL_DIV(a, b) _mm512_div_ps ((a), (b))
#define AL_LOADI(p) _mm512_loadu_si512 ((const void *) (p))
#define AL_CVTPH(p) _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *) (p)))
#define AL_RND16(v) _mm512_cvtph_ps (_mm512_cvtps_ph ((v), _MM_FROUND_TO_NEAREST_INT))
#define AL_EXP(v) hone_x86_exp512 (v)
#define AL_SEEN(j, lim, v, other) \
  _mm512_mask_mov_ps ((other), _mm512_cmple_epi32_mask (_mm512_set1_epi32 (j), (lim)), (v))
#include "hone-cpu-attention-lanes-x86.h"
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

#define AL(name) name##_avx2
#define AL_TARGET HONE_X86_256_TARGET
#define AL_N 8
#define AL_V __m256
#define AL_VI __m256i
#define AL_LOAD(p) _mm256_loadu_ps (p)
#define AL_STORE(p, v) _mm256_storeu_ps ((p), (v))
#define AL_SET1(f) _mm256_set1_ps (f)
#define AL_ZERO() _mm256_setzero_ps ()
#define AL_FMA(a, b, c) _mm256_fmadd_ps ((a), (b), (c))
#define AL_MUL(a, b) _mm256_mul_ps ((a), (b))
#define AL_SUB(a, b) _mm256_sub_ps ((a), (b))
#define AL_ADD(a, b) _mm256_add_ps ((a), (b))
#define AL_MAX(a, b) _mm256_max_ps ((a), (b))
#define AL_DIV(a, b) _mm256_div_ps ((a), (b))
#define AL_LOADI(p) _mm256_loadu_si256 ((const __m256i *) (p))
#define AL_CVTPH(p) _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) (p)))
#define AL_RND16(v) _mm256_cvtph_ps (_mm256_cvtps_ph ((v), _MM_FROUND_TO_NEAREST_INT))
#define AL_EXP(v) hone_x86_exp256 (v)
/* lanes with j > lim take other */
#define AL_SEEN(j, lim, v, other) \
  _mm256_blendv_ps ((v), (other), _mm256_castsi256_ps (_mm256_cmpgt_epi32 (_mm256_set1_epi32 (j), (lim))))
#include "hone-cpu-attention-lanes-x86.h"
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
  int lanes;              /* queries an item in vector lanes (16, 8), or 0: one (token, head) an item */
  int items_per_head;      /* lanes: ⌈T·group / lanes⌉ */
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

/* Queries a batch: 16 with AVX-512, 8 with AVX2, 0 (one head at a time) where
 * head_dim is not a multiple of that or a KV head has fewer than 8 queries
 * (decode keeps the one-head kernel). */
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
  /* the one-head kernel: max_ctx scores; the batches: Qt, 8 keys, 16 scores a key (+ 8 rounding up) */
  return MAX ((size_t) max_ctx, (size_t) head_dim * (16 + 8) + (size_t) (max_ctx + 8) * 16);
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
    .lanes = lanes_for (T, group, kv->head_dim),
  };
  job.items_per_head = job.lanes > 0 ? (T * group + job.lanes - 1) / job.lanes : 0;
  g_return_if_fail (scratch_stride >= hone_cpu_attention_scratch_floats (pos0 + T, kv->head_dim));
  atomic_init (&job.next, 0);
  hone_cpu_pool_run (pool, attention_worker, &job);
}
