/* hone-cpu-kv.c — f16 KV cache buffer. */
#include <inttypes.h>
#include "hone-cpu-kv.h"

#include "hone-dtype.h"
#include "hone-error.h"
#include "hone-i18n.h"

gint64
hone_cpu_kv_bytes_for (int n_layers, int n_kv_heads, int head_dim, int capacity)
{
  return (gint64) n_layers * 2 * n_kv_heads * head_dim * (gint64) capacity * (gint64) sizeof (uint16_t);
}

HoneCpuKv *
hone_cpu_kv_new (int n_layers, int n_kv_heads, int head_dim, int capacity, GError **error)
{
  HoneCpuKv *kv = g_new0 (HoneCpuKv, 1);

  kv->n_layers = n_layers;
  kv->n_kv_heads = n_kv_heads;
  kv->head_dim = head_dim;
  kv->capacity = capacity;
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

void
hone_cpu_kv_store (HoneCpuKv *kv, int layer, int pos, const float *k, const float *v)
{
  for (int h = 0; h < kv->n_kv_heads; h++)
    {
      uint16_t *kd = hone_cpu_kv_head (kv, layer, 0, h) + (size_t) pos * kv->head_dim;
      uint16_t *vd = hone_cpu_kv_head (kv, layer, 1, h) + (size_t) pos * kv->head_dim;
      for (int i = 0; i < kv->head_dim; i++)
        {
          kd[i] = hone_f32_to_f16 (k[h * kv->head_dim + i]);
          vd[i] = hone_f32_to_f16 (v[h * kv->head_dim + i]);
        }
    }
}
