/* hone-cpu-attention.h — causal GQA attention over the f16 KV cache. */
#pragma once

#include "hone-cpu-kv.h"
#include "hone-cpu-threadpool.h"

G_BEGIN_DECLS

/* One query head over n_pos cached positions: out = softmax(q·Kᵀ·scale)·V.
 * q is rounded to f16 for the q·k products and the probabilities to f16 for
 * the V product, as llama.cpp's f16-cache attention does, so both engines
 * compute the same numbers (the f16 cache already bounds the precision).
 * k: the head's keys as the cache holds them, in blocks of 16 positions
 * (hone_cpu_kv_key_index; the last block may be partly filled); v: n_pos ×
 * head_dim. scores: n_pos floats of scratch. */
void hone_cpu_attention_head (const float *q, const uint16_t *k, const uint16_t *v, int n_pos,
                              int head_dim, float scale, float *scores, float *out);

/* Whether attention uses its batched kernels where the CPU can (8+ queries a
 * KV head in vector lanes; fewer against segments of the keys split over the
 * threads): on, unless the environment has
 * HONE_CPU_ATTN_LANES=0 (A/B measurements) or a test switched them off; off,
 * every query runs the one-head kernel. The setter returns the previous state. */
gboolean hone_cpu_attention_lanes_enabled (void);
gboolean hone_cpu_attention_lanes_set_enabled (gboolean on);

/* Scratch floats a pool thread needs for contexts of up to @max_ctx positions. */
size_t hone_cpu_attention_scratch_floats (int max_ctx, int head_dim);

/* T tokens at positions pos0.. (already stored in kv), n_heads query heads each:
 * token t sees positions [0, pos0 + t]. q and out: T × n_heads × head_dim.
 * scratch: n_threads × scratch_stride floats, scratch_stride ≥
 * hone_cpu_attention_scratch_floats (pos0 + T, head_dim). Where a KV head has
 * 8+ queries (prefill), they run 16 at a time with AVX-512, 8 with AVX2, one
 * per vector lane (hone-cpu-attention-lanes-x86.h). Fewer (decode), with
 * head_dim 64 or 128: a KV head's queries against each block of 16 of its
 * keys, a block's scores in vector lanes and the outputs in registers
 * (hone-cpu-attention-split-x86.h), the keys split into segments ≥ 256 long so
 * every thread has work, the segments' softmax states merged at the end. */
void hone_cpu_attention (HoneCpuPool *pool, HoneCpuKv *kv, int layer, const float *q, int T, int pos0,
                         int n_heads, float *out, float *scratch, size_t scratch_stride);

G_END_DECLS
