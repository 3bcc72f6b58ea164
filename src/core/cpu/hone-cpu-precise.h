/* hone-cpu-precise.h — the precise (checking) mode's weight unpacking.
 *
 * The fast path quantizes the activations of every integer-type matmul to 8
 * bits (hone-cpu-dot.h), as llama.cpp does; that rounding is what moves the
 * 135M default model's logits by a few tenths. The precise mode keeps
 * activations in f32: a chunk of weight rows (at most
 * HONE_CPU_PRECISE_CHUNK_ROWS) is dequantized block by block into a small
 * per-thread buffer and multiplied against the f32 activations by the F32 tile
 * kernel (f32 FMA accumulation). The whole model is never expanded: the buffer
 * holds a few rows, and is reused for every token tile of the chunk, so
 * prefill pays the unpacking once per 16 rows × all tokens of a batch.
 *
 * Float weights (F32/F16/BF16) already run with f32 activations and keep their
 * own kernels. Attention is the same in both modes (f16 KV cache, q and the
 * softmax probabilities rounded to f16 as llama.cpp's f16-cache matmuls do).
 */
#pragma once

#include <glib.h>
#include <stddef.h>
#include "hone-dtype.h"

G_BEGIN_DECLS

/* Rows a precise matmul work item dequantizes at a time (the buffer is
 * HONE_CPU_PRECISE_CHUNK_ROWS × K floats per thread). */
#define HONE_CPU_PRECISE_CHUNK_ROWS 16

/* TRUE for the weight types the precise mode dequantizes (those whose fast
 * kernels take 8-bit activations). */
gboolean hone_cpu_precise_dequantizes (HoneDType type);

/* Rows [0, R) of K elements each, w_stride bytes apart, → dst (R × K floats,
 * row stride K). Bit-identical to hone_dequantize_row (and to the gguf
 * package's dequantize: d·q, then + m, two roundings); AVX2 for Q4_0, Q4_1 and
 * Q8_0, hone_dequantize_row for the others. */
void     hone_cpu_precise_dequant_rows (HoneDType type, const void *w, size_t w_stride, int R, int K,
                                        float *dst);

G_END_DECLS
