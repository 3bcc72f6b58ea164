/* hone-model-info.h — a model card for the app and `hone info`.
 *
 * Filled from metadata only (GGUF header + tensor table, or a HF folder's
 * config.json + safetensors headers): no weights are read, so it is cheap
 * enough to show before the user decides to load. Immutable once created;
 * safe to share between threads.
 */
#pragma once

#include <glib-object.h>
#include <gio/gio.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

#define HONE_TYPE_MODEL_INFO (hone_model_info_get_type ())
G_DECLARE_FINAL_TYPE (HoneModelInfo, hone_model_info, HONE, MODEL_INFO, GObject)

/* One row of the "tensor types" table: e.g. {"Q4_1", 180, 61 MB}. */
typedef struct {
  const char *type_name;    /* hone_dtype_name(), static */
  int type;                 /* HoneDType */
  int count;                /* tensors of that type */
  gint64 n_elements;        /* sum of their elements */
  gint64 bytes;             /* sum of their stored bytes */
} HoneTensorTypeCount;

/* Memory a load would need (see hone_model_info_estimate_memory()). */
typedef struct {
  gint64 weights;           /* stored weight bytes (mapped / uploaded as stored) */
  gint64 kv_cache;          /* K and V for context_length tokens of one sequence */
  gint64 workspace;         /* activations, logits, scratch (approximate) */
  gint64 total;             /* the sum */
} HoneMemoryEstimate;

/* Read the card of a GGUF file or HF folder. Errors as hone_model_open()
 * would give them (IO, FILE_CORRUPT, UNSUPPORTED_ARCH, …). */
HoneModelInfo *hone_model_info_new_for_path (const char *path, GError **error);
/* The same in a worker thread. */
void           hone_model_info_new_for_path_async (const char *path, GCancellable *cancellable,
                                                   GAsyncReadyCallback callback, gpointer user_data);
HoneModelInfo *hone_model_info_new_for_path_finish (GAsyncResult *result, GError **error);

/* Properties (all read-only):
 *   path (string), name (string), architecture (string, e.g. "llama"),
 *   n-params (int64), context-length (int: trained), n-layers, hidden-size,
 *   n-heads, n-kv-heads, head-dim, ffn-size, vocab-size (int),
 *   tokenizer-kind (string: "byte-bpe (gpt2)", "spm-bpe (llama)", …),
 *   has-chat-template (boolean), file-size (int64: bytes on disk),
 *   weights-bytes (int64: stored tensor bytes), tied-embeddings (boolean),
 *   rope-theta (double), source (string: "gguf" | "safetensors"). */
const char *hone_model_info_get_path (HoneModelInfo *self);
const char *hone_model_info_get_name (HoneModelInfo *self);
const char *hone_model_info_get_architecture (HoneModelInfo *self);
gint64      hone_model_info_get_n_params (HoneModelInfo *self);
int         hone_model_info_get_context_length (HoneModelInfo *self);
int         hone_model_info_get_n_layers (HoneModelInfo *self);
int         hone_model_info_get_hidden_size (HoneModelInfo *self);
int         hone_model_info_get_n_heads (HoneModelInfo *self);
int         hone_model_info_get_n_kv_heads (HoneModelInfo *self);
int         hone_model_info_get_head_dim (HoneModelInfo *self);
int         hone_model_info_get_ffn_size (HoneModelInfo *self);
int         hone_model_info_get_vocab_size (HoneModelInfo *self);
const char *hone_model_info_get_tokenizer_kind (HoneModelInfo *self);
gboolean    hone_model_info_get_has_chat_template (HoneModelInfo *self);
gint64      hone_model_info_get_file_size (HoneModelInfo *self);
gint64      hone_model_info_get_weights_bytes (HoneModelInfo *self);
gboolean    hone_model_info_get_tied_embeddings (HoneModelInfo *self);
double      hone_model_info_get_rope_theta (HoneModelInfo *self);
const char *hone_model_info_get_source (HoneModelInfo *self);

/* Tensor types sorted by bytes, largest first. *n_types gets the row count;
 * the array is owned by @self. */
const HoneTensorTypeCount *hone_model_info_get_tensor_types (HoneModelInfo *self, guint *n_types);

/* AWQ group size of an AutoAWQ GEMM folder (its linears are counted as the
 * Q4Z matrices they become at load), 0 when the model is not AWQ. */
int         hone_model_info_get_awq_group_size (HoneModelInfo *self);

/* Bytes of weights read from memory for one decoded token (every matrix of
 * every layer + the output matrix; one embedding row). Used for the roofline. */
gint64      hone_model_info_get_weight_bytes_per_token (HoneModelInfo *self);

/* Estimate for one sequence of @context_length tokens (0 = trained length),
 * fp16 or int8 KV cache. */
void        hone_model_info_estimate_memory (HoneModelInfo *self, int context_length, gboolean int8_kv,
                                             HoneMemoryEstimate *estimate);

/* Plain-text card (what `hone info` prints) and a JSON object of the same. */
char       *hone_model_info_to_text (HoneModelInfo *self, int context_length);
JsonNode   *hone_model_info_to_json (HoneModelInfo *self, int context_length);

G_END_DECLS
