/* hone-k-attn-tiny.h — decode attention of one token over a short context
 * in one block a query head (internal: kernels/ only; hone-k-attn-tiny.cu,
 * chosen by hone_k_attn_decode_h16 in hone-k-attn-decode.cu). */
#pragma once

#include "hone-kernels.h"

/* Keys a block holds in shared memory at once (a longer context is walked in
 * passes of this many: correct, but slow; callers bound the context). */
#define HONE_K_ATTN_TINY_MAX 256

/* Attention of the one token at *pos over keys 0..*pos, into out (f32,
 * [nq·hd]) and, where given, its int8 blocks of 32 (out_q, out_ds:
 * hone_k_quantize's bits of out) and its HoneKActH16 form (out_h, out_hd:
 * hone_k_pack_h16's bits). @bound: the most keys the caller will ask for
 * (sizes the shared memory; 0 = HONE_K_ATTN_TINY_MAX, unknown); with a bound
 * block_table must hold ceil(bound / HONE_K_KV_BLOCK) entries — version 4
 * reads them beside pos, before it knows how many it needs. Longer contexts
 * than the bound are still right (passes). hd 64 or 128. */
int hone_k_attn_tiny (const float *qkv, int nq, int nkv, int hd, const int32_t *pos, const void *k_pool,
                      const void *v_pool, const int32_t *block_table, float *out, int8_t *out_q, float2 *out_ds,
                      uint16_t *out_h, float *out_hd, int bound, cudaStream_t stream);
