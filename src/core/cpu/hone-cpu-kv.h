/* hone-cpu-kv.h — one sequence's KV cache on the CPU, stored as f16.
 *
 * f16 (as llama.cpp's default cache) halves the memory of f32 and loses
 * nothing that matters for attention. Layout, per layer: K then V, each
 * [n_kv_heads][rows], rows = capacity rounded up to HONE_CPU_KV_BLOCK. A
 * head's values are [position][head_dim]; its keys are in blocks of 16
 * positions, [block][head_dim][16] (hone_cpu_kv_key_index), so the decode
 * kernel computes a block's 16 scores of a query in vector lanes, one FMA a
 * dim, with no sums across lanes (hone-cpu-attention-split-x86.h). The buffer
 * is allocated for the full capacity but pages are touched only as positions
 * fill, so resident memory grows with the sequence.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/* Largest head_dim the cache and the attention kernels take (load() checks). */
#define HONE_CPU_MAX_HEAD_DIM 512

/* Positions a block of keys: [head_dim][16] */
#define HONE_CPU_KV_BLOCK 16

typedef struct {
  int n_layers;
  int n_kv_heads;
  int head_dim;
  int capacity;           /* positions */
  int rows;               /* capacity rounded up to HONE_CPU_KV_BLOCK */
  int length;             /* positions filled */
  uint16_t *data;
  gint64 bytes;
} HoneCpuKv;

/* NULL + HONE_ERROR_OUT_OF_MEMORY when the buffer cannot be allocated. */
HoneCpuKv *hone_cpu_kv_new (int n_layers, int n_kv_heads, int head_dim, int capacity, GError **error);
void       hone_cpu_kv_free (HoneCpuKv *kv);
gint64     hone_cpu_kv_bytes_for (int n_layers, int n_kv_heads, int head_dim, int capacity);

/* Keys (which = 0) or values (which = 1) of head h in layer l: rows × head_dim
 * halves, the keys in blocks (hone_cpu_kv_key_index), the values by position. */
static inline uint16_t *
hone_cpu_kv_head (HoneCpuKv *kv, int layer, int which, int h)
{
  size_t per = (size_t) kv->rows * kv->head_dim;
  return kv->data + (((size_t) layer * 2 + which) * kv->n_kv_heads + h) * per;
}

/* Where key dim d of position pos is in a head's keys: [block][head_dim][16]. */
static inline size_t
hone_cpu_kv_key_index (int pos, int d, int head_dim)
{
  return ((size_t) (pos / HONE_CPU_KV_BLOCK) * head_dim + d) * HONE_CPU_KV_BLOCK + pos % HONE_CPU_KV_BLOCK;
}

/* Store n_kv_heads × head_dim floats of K and V at position pos of layer l. */
void       hone_cpu_kv_store (HoneCpuKv *kv, int layer, int pos, const float *k, const float *v);

G_END_DECLS
