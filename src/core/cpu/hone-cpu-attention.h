/* hone-cpu-attention.h — causal GQA attention over the f16 KV cache. */
#pragma once

#include "hone-cpu-kv.h"
#include "hone-cpu-threadpool.h"

G_BEGIN_DECLS

/* Largest head_dim the attention kernels take (load() checks). */
#define HONE_CPU_MAX_HEAD_DIM 512

/* One query head over n_pos cached positions: out = softmax(q·Kᵀ·scale)·V.
 * q is rounded to f16 for the q·k products and the probabilities to f16 for
 * the V product, as llama.cpp's f16-cache attention does, so both engines
 * compute the same numbers (the f16 cache already bounds the precision).
 * scores: n_pos floats of scratch. */
void hone_cpu_attention_head (const float *q, const uint16_t *k, const uint16_t *v, int n_pos,
                              int head_dim, float scale, float *scores, float *out);

/* T tokens at positions pos0.. (already stored in kv), n_heads query heads each:
 * token t sees positions [0, pos0 + t]. q and out: T × n_heads × head_dim.
 * scratch: n_threads × scratch_stride floats, scratch_stride ≥ pos0 + T. */
void hone_cpu_attention (HoneCpuPool *pool, HoneCpuKv *kv, int layer, const float *q, int T, int pos0,
                         int n_heads, float *out, float *scratch, size_t scratch_stride);

G_END_DECLS
