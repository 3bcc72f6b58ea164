/* hone-cpu-kv.h — one sequence's KV cache on the CPU, stored as f16.
 *
 * f16 (as llama.cpp's default cache) halves the memory of f32 and loses
 * nothing that matters for attention. Layout, per layer: K then V, each
 * [n_kv_heads][capacity][head_dim], so one head's keys are contiguous for the
 * attention loop. The buffer is allocated for the full capacity but pages are
 * touched only as positions fill, so resident memory grows with the sequence.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

typedef struct {
  int n_layers;
  int n_kv_heads;
  int head_dim;
  int capacity;           /* positions */
  int length;             /* positions filled */
  uint16_t *data;
  gint64 bytes;
} HoneCpuKv;

/* NULL + HONE_ERROR_OUT_OF_MEMORY when the buffer cannot be allocated. */
HoneCpuKv *hone_cpu_kv_new (int n_layers, int n_kv_heads, int head_dim, int capacity, GError **error);
void       hone_cpu_kv_free (HoneCpuKv *kv);
gint64     hone_cpu_kv_bytes_for (int n_layers, int n_kv_heads, int head_dim, int capacity);

/* Keys (which = 0) or values (which = 1) of head h in layer l: capacity × head_dim. */
static inline uint16_t *
hone_cpu_kv_head (HoneCpuKv *kv, int layer, int which, int h)
{
  size_t per = (size_t) kv->capacity * kv->head_dim;
  return kv->data + (((size_t) layer * 2 + which) * kv->n_kv_heads + h) * per;
}

/* Store n_kv_heads × head_dim floats of K and V at position pos of layer l. */
void       hone_cpu_kv_store (HoneCpuKv *kv, int layer, int pos, const float *k, const float *v);

G_END_DECLS
