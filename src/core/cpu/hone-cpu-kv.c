/* hone-cpu-kv.c — f16 KV cache buffer. */
#include <inttypes.h>
#include "hone-cpu-kv.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

#include "hone-cpu-dot.h"
#include "hone-dtype.h"
#include "hone-error.h"
#include "hone-i18n.h"

gint64
hone_cpu_kv_bytes_for (int n_layers, int n_kv_heads, int head_dim, int capacity)
{
  const gint64 rows = ((gint64) capacity + HONE_CPU_KV_BLOCK - 1) / HONE_CPU_KV_BLOCK * HONE_CPU_KV_BLOCK;

  return (gint64) n_layers * 2 * n_kv_heads * head_dim * rows * (gint64) sizeof (uint16_t);
}

HoneCpuKv *
hone_cpu_kv_new (int n_layers, int n_kv_heads, int head_dim, int capacity, GError **error)
{
  HoneCpuKv *kv = g_new0 (HoneCpuKv, 1);

  kv->n_layers = n_layers;
  kv->n_kv_heads = n_kv_heads;
  kv->head_dim = head_dim;
  kv->capacity = capacity;
  kv->rows = (capacity + HONE_CPU_KV_BLOCK - 1) / HONE_CPU_KV_BLOCK * HONE_CPU_KV_BLOCK;
  kv->bytes = hone_cpu_kv_bytes_for (n_layers, n_kv_heads, head_dim, capacity);
  /* Large allocations are fresh anonymous mappings: untouched pages cost no RAM. */
  kv->data = g_try_malloc ((gsize) kv->bytes);
  if (kv->data == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY,
                   _("Could not allocate a KV cache of %" PRId64 " MiB for %d tokens"),
                   kv->bytes >> 20, capacity);
      g_free (kv);
      return NULL;
    }
  return kv;
}

void
hone_cpu_kv_free (HoneCpuKv *kv)
{
  if (kv == NULL)
    return;
  g_free (kv->data);
  g_free (kv);
}

/* f32 → f16, n values: F16C's conversion (round to nearest even, NaN kept
 * quiet: the same bits as hone_f32_to_f16) where the CPU has it, 8 at a time.
 * The scalar function call per value was 3.5 % of a Q4_K_M prefill's perf
 * samples; the vector form took 9–18 % off the prefill's CPU time (session 28,
 * tests/bench/RESULTS.md). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
static __attribute__((target ("avx2,f16c"))) void
to_f16_f16c (const float *x, uint16_t *y, int n)
{
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128 ((__m128i *) (y + i), _mm256_cvtps_ph (_mm256_loadu_ps (x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++)
    y[i] = hone_f32_to_f16 (x[i]);
}
#endif

static void
to_f16 (const float *x, uint16_t *y, int n)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (hone_cpu_isa () >= HONE_CPU_ISA_AVX2)
    {
      to_f16_f16c (x, y, n);
      return;
    }
#endif
  for (int i = 0; i < n; i++)
    y[i] = hone_f32_to_f16 (x[i]);
}

void
hone_cpu_kv_store (HoneCpuKv *kv, int layer, int pos, const float *k, const float *v)
{
  const int hd = kv->head_dim;
  uint16_t kh[HONE_CPU_MAX_HEAD_DIM];

  g_return_if_fail (hd <= HONE_CPU_MAX_HEAD_DIM);
  for (int h = 0; h < kv->n_kv_heads; h++)
    {
      uint16_t *kb = hone_cpu_kv_head (kv, layer, 0, h) + hone_cpu_kv_key_index (pos, 0, hd);

      /* the key's dims 16 apart in its block */
      to_f16 (k + (size_t) h * hd, kh, hd);
      for (int d = 0; d < hd; d++)
        kb[(size_t) d * HONE_CPU_KV_BLOCK] = kh[d];
      to_f16 (v + (size_t) h * hd, hone_cpu_kv_head (kv, layer, 1, h) + (size_t) pos * hd, hd);
    }
}
