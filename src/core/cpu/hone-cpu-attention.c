/* hone-cpu-attention.c — causal GQA attention, one (token, head) per work item. */
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
  atomic_int next;
} AttentionJob;

static void
attention_worker (gpointer data, int ith, int nth)
{
  AttentionJob *job = data;
  const int hd = job->kv->head_dim;
  const int group = job->n_heads / job->kv->n_kv_heads;
  const float scale = 1.0f / sqrtf ((float) hd);
  float *scores = job->scratch + (size_t) ith * job->scratch_stride;

  for (;;)
    {
      int item = atomic_fetch_add_explicit (&job->next, 1, memory_order_relaxed);
      int t, h;
      size_t off;

      if (item >= job->T * job->n_heads)
        break;
      t = item / job->n_heads;
      h = item % job->n_heads;
      off = ((size_t) t * job->n_heads + h) * hd;
      hone_cpu_attention_head (job->q + off,
                               hone_cpu_kv_head (job->kv, job->layer, 0, h / group),
                               hone_cpu_kv_head (job->kv, job->layer, 1, h / group),
                               job->pos0 + t + 1, hd, scale, scores, job->out + off);
    }
}

void
hone_cpu_attention (HoneCpuPool *pool, HoneCpuKv *kv, int layer, const float *q, int T, int pos0,
                    int n_heads, float *out, float *scratch, size_t scratch_stride)
{
  AttentionJob job = {
    .kv = kv, .layer = layer, .q = q, .T = T, .pos0 = pos0, .n_heads = n_heads,
    .out = out, .scratch = scratch, .scratch_stride = scratch_stride,
  };
  atomic_init (&job.next, 0);
  hone_cpu_pool_run (pool, attention_worker, &job);
}
