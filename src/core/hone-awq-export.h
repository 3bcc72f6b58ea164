/* hone-awq-export.h — write an AWQ result as an AutoAWQ GEMM folder or a Q4_1 GGUF.
 *
 * AutoAWQ "GEMM" folder (what transformers and vLLM load): model.safetensors
 * with per linear qweight int32 [K, N/8], qzeros int32 [K/g, N/8], scales fp16
 * [K/g, N] (nibble i of a word holds column 8c + {0,2,4,6,1,3,5,7}[i]; zeros
 * raw; w = (q − z)·s), fp16 embeddings, norms and lm_head (written even when
 * tied), config.json with quantization_config, tokenizer.json and
 * tokenizer_config.json (copied from a HF source; rebuilt from tokenizer.ggml.*
 * for a GGUF source: byte-level BPE only). Q/K rows in HF order.
 *
 * GGUF (source must be a GGUF): every metadata key copied, plus
 * hone.awq.group_size; the seven linears of each layer as Q4_1 blocks with
 * d = s, m = −z·s, which are exactly the AWQ values (see hone-awq.h); norms
 * F32 with the AWQ scales folded in; everything else copied as stored.
 *
 * Both are atomic: written into a temporary sibling and renamed into place;
 * on error or cancellation nothing is left behind.
 */
#pragma once

#include <glib.h>
#include <gio/gio.h>
#include "hone-awq.h"

G_BEGIN_DECLS

/* @progress (may be NULL): the fraction of the weights' bytes written, on the
 * calling thread, reaching 1 once they all are. */
gboolean hone_awq_export_safetensors (const HoneAwqResult *result, const char *dir, GCancellable *cancellable,
                                      HoneProgressFunc progress, gpointer progress_data, GError **error);
gboolean hone_awq_export_gguf (const HoneAwqResult *result, const char *path, GCancellable *cancellable,
                               HoneProgressFunc progress, gpointer progress_data, GError **error);

/* Q4_1 blocks of row @row of a linear (K/32 blocks), exact. */
void     hone_awq_linear_to_q4_1 (const HoneAwqLinear *lin, int row, void *blocks);

/* A runnable model holding the quantized weights (Q4_1, exact): written as a
 * GGUF into a temporary file that is unlinked once mapped. */
HoneModel *hone_awq_result_open_model (const HoneAwqResult *result, GCancellable *cancellable, GError **error);

/* The tokenizer.json / tokenizer_config.json texts for a GGUF source
 * (byte-level BPE); HONE_ERROR_TOKENIZER for others. */
gboolean hone_awq_tokenizer_json_from_gguf (const char *gguf_path, char **tokenizer_json,
                                            char **tokenizer_config_json, GError **error);

G_END_DECLS
