/* hone-model.h — a model: its config and its weights, from GGUF or a HF folder.
 *
 * HoneModel is a plain ref-counted struct (hot paths read it directly). It owns
 * the backing files (mmapped GGUF or safetensors shards), the tokenizer and the
 * chat template source. Weights are HoneTensor views into the mapping, in their
 * stored type; nothing is expanded at load.
 *
 * RoPE pairing. HF llama checkpoints rotate half-split pairs (i, i+d/2) — NeoX
 * style. llama.cpp's converter permutes the Q/K rows of llama-architecture
 * GGUFs so that adjacent pairs (2i, 2i+1) give the same result. We keep the
 * stored rows and record the pairing the rows need in config.rope_pairing, so
 * both sources compute the same model. hone_model_permute_qk_rows() converts
 * between the two row orders (export, tests).
 */
#pragma once

#include <glib.h>
#include <gio/gio.h>
#include "hone-progress.h"
#include "hone-tensor.h"

G_BEGIN_DECLS

typedef struct _HoneTokenizer HoneTokenizer;

typedef enum {
  HONE_ARCH_LLAMA,   /* Llama-2/3, Mistral, SmolLM, TinyLlama */
  HONE_ARCH_QWEN2,   /* q/k/v bias, NeoX RoPE */
  HONE_ARCH_QWEN3,   /* q/k RMSNorm per head, NeoX RoPE */
} HoneArch;

typedef enum {
  HONE_ROPE_PAIRS_ADJACENT,   /* (2i, 2i+1): llama GGUF row order */
  HONE_ROPE_PAIRS_HALF,       /* (i, i + head_dim/2): HF order, qwen2/3 everywhere */
} HoneRopePairing;

typedef enum {
  HONE_ROPE_SCALING_NONE,
  HONE_ROPE_SCALING_LINEAR,
  HONE_ROPE_SCALING_LLAMA3,
} HoneRopeScalingType;

typedef struct {
  HoneRopeScalingType type;
  float factor;                 /* linear and llama3 */
  float low_freq_factor;        /* llama3 */
  float high_freq_factor;       /* llama3 */
  int original_context;         /* llama3: original_max_position_embeddings */
} HoneRopeScaling;

typedef enum {
  HONE_MODEL_SOURCE_GGUF,
  HONE_MODEL_SOURCE_SAFETENSORS,
} HoneModelSource;

typedef struct {
  HoneArch arch;
  char arch_name[32];           /* as stored: "llama", "qwen2", "qwen3" */
  int n_layers;
  int hidden;                   /* embedding length */
  int n_heads;
  int n_kv_heads;
  int head_dim;                 /* usually hidden / n_heads; qwen3 sets it explicitly */
  int ffn;                      /* intermediate size */
  int vocab;
  int max_context;              /* trained context length */
  float rope_theta;
  HoneRopeScaling rope_scaling;
  HoneRopePairing rope_pairing;
  float rms_eps;
  gboolean tied_embeddings;     /* lm_head = token embeddings */
  gboolean qkv_bias;            /* qwen2 */
  gboolean qk_norm;             /* qwen3 */
} HoneModelConfig;

typedef struct {
  HoneTensor attn_norm;         /* [hidden] */
  HoneTensor wq, wk, wv, wo;    /* [hidden -> n_heads*head_dim], [hidden -> n_kv*head_dim] ×2, [n_heads*head_dim -> hidden] */
  HoneTensor bq, bk, bv;        /* qwen2 only */
  HoneTensor q_norm, k_norm;    /* qwen3 only: [head_dim] */
  HoneTensor ffn_norm;          /* [hidden] */
  HoneTensor w_gate, w_up;      /* [hidden -> ffn] */
  HoneTensor w_down;            /* [ffn -> hidden] */
} HoneLayerWeights;

typedef struct _HoneModel HoneModel;
struct _HoneModel {
  gint ref_count;
  char *path;                   /* the GGUF file or the HF folder */
  HoneModelSource source;
  HoneModelConfig config;
  HoneTensor tok_embd;          /* [hidden × vocab] (ne = {hidden, vocab}) */
  HoneTensor output_norm;       /* [hidden] */
  HoneTensor output;            /* lm_head; when tied, a copy of tok_embd's view */
  HoneLayerWeights *layers;     /* n_layers */
  HoneTokenizer *tokenizer;     /* never NULL once opened */
  char *chat_template;          /* NULL when the model has none */
  char *name;                   /* human name (general.name, or folder name) */
  gint64 file_bytes;            /* bytes of weight files on disk */
  gpointer priv;                /* backing files; see hone-model.c */
  /* Llama-3.1-style GGUFs carry RoPE scaling as per-frequency divisors
   * (rope_freqs.weight, F32, ne = {head_dim/2}) instead of rope.scaling.*:
   * angle_i = pos · theta^(−2i/head_dim) / rope_freqs[i]. Absent otherwise. */
  HoneTensor rope_freqs;
  /* AWQ group size (32/64/128) of a HF AutoAWQ "GEMM" checkpoint, whose seven
   * linears per layer are HONE_DTYPE_Q4Z rows owned by the model
   * (hone-awq-load.h): repacked at open, or with HONE_MODEL_OPEN_DEFER_REPACK
   * when asked (hone_model_read_rows, hone_model_materialize); 0 when the
   * model is not AWQ. A backend may repack per group from it. */
  int awq_group_size;
};

typedef enum {
  HONE_MODEL_OPEN_DEFAULT = 0,
  /* AWQ linears are checked at open but repacked into Q4Z only when asked:
   * their tensors have type Q4Z, their shape and nbytes, and data NULL
   * until hone_model_materialize; hone_model_read_rows makes any rows of
   * them on the way (the CUDA upload, which never needs the whole copy). */
  HONE_MODEL_OPEN_DEFER_REPACK = 1 << 0,
} HoneModelOpenFlags;

/* Open a GGUF file, a HF folder (config.json + *.safetensors + tokenizer.json),
 * or a path to a config.json/model.safetensors inside such a folder. Every
 * weight is readable at its HoneTensor's data. */
HoneModel *hone_model_open (const char *path, GError **error);
HoneModel *hone_model_open_full (const char *path, HoneModelOpenFlags flags, GError **error);
/* TRUE for an AWQ linear of a model opened with HONE_MODEL_OPEN_DEFER_REPACK
 * that is not repacked yet (@t: the model's tensor or a copy of it). */
gboolean   hone_model_tensor_deferred (const HoneModel *model, const HoneTensor *t);
/* hone_tensor_present, or deferred. */
gboolean   hone_model_tensor_available (const HoneModel *model, const HoneTensor *t);
/* Rows [@row0, @row0 + @n) of the matrix @t of @model, in t->type, into
 * @dst (n · row bytes): a copy of its data, or for a deferred AWQ linear the
 * Q4Z rows repacked from the checkpoint (whose pages are let go once its
 * last row was read). FALSE when @t has no data and is not deferred. */
gboolean   hone_model_read_rows (const HoneModel *model, const HoneTensor *t, int64_t row0, int64_t n, void *dst);
/* Bytes the deferred AWQ linears not repacked yet would take (0: none). */
guint64    hone_model_deferred_bytes (const HoneModel *model);
/* Repack every deferred AWQ linear into memory owned by the model, so that
 * each HoneTensor's data is set (a no-op when none is deferred). Progress
 * 0..1 over the bytes made; between linears a cancel stops it with
 * HONE_ERROR_CANCELLED, and no memory stops it with HONE_ERROR_OUT_OF_MEMORY
 * — the linears already made stay, the rest stay deferred. */
gboolean   hone_model_materialize (HoneModel *model, GCancellable *cancellable, HoneProgressFunc progress,
                                   gpointer progress_data, GError **error);
HoneModel *hone_model_ref (HoneModel *model);
void       hone_model_unref (HoneModel *model);
/* A backend that copied these bytes of a weight elsewhere (the CUDA upload)
 * lets the pages of the model file they lie in leave the process's resident
 * memory; reading them again brings them back from the file, so the model
 * stays whole. A no-op for bytes the model holds in memory (AWQ repacks). */
void       hone_model_release_bytes (const HoneModel *model, const void *data, gsize nbytes);

/* Fill a config from GGUF metadata or a HF config.json (also used by `hone info`
 * before loading weights). Unknown architecture → HONE_ERROR_UNSUPPORTED_ARCH. */
typedef struct _HoneGguf HoneGguf;
gboolean hone_model_config_from_gguf (HoneModelConfig *config, const HoneGguf *gguf, GError **error);
gboolean hone_model_config_from_json (HoneModelConfig *config, const char *config_json, gssize length, GError **error);

/* Check a filled config: sizes > 0 and within sane bounds, heads divisible
 * by KV heads, head_dim even, finite positive rope_theta / rms_eps / scaling.
 * Failures use @code (HONE_ERROR_INVALID_JSON for config.json,
 * HONE_ERROR_FILE_CORRUPT for GGUF metadata) and name @source. */
gboolean hone_model_config_validate (const HoneModelConfig *config, int code, const char *source, GError **error);

/* The tensor names a model of @config needs, as stored in each scheme:
 * GGUF ("blk.3.attn_q.weight") or HF ("model.layers.3.self_attn.q_proj.weight").
 * @what is one of the HoneModel / HoneLayerWeights field names: "tok_embd",
 * "rope_freqs", "output_norm", "output", "attn_norm", "wq", "wk", "wv", "wo", "bq", "bk",
 * "bv", "q_norm", "k_norm", "ffn_norm", "w_gate", "w_up", "w_down"; @layer is
 * ignored for the first four. Returns a newly allocated name or NULL. */
char    *hone_model_tensor_name (HoneModelSource source, const char *what, int layer);

/* Number of parameters (elements of all weight tensors). */
gint64   hone_model_n_params (const HoneModel *model);
/* Bytes of the KV cache for n_ctx tokens at the given bytes per element (2 for f16). */
gint64   hone_model_kv_bytes (const HoneModelConfig *config, int n_ctx, int bytes_per_elem);

/* Reorder the rows of a Q or K weight (or bias) between HF (half-split) and
 * llama-GGUF (adjacent-pair) order. rows = n_heads*head_dim, row_bytes per row.
 * to_gguf = TRUE: HF → GGUF. dst and src must not overlap. */
void     hone_model_permute_qk_rows (void *dst, const void *src, int n_heads, int head_dim,
                                     size_t row_bytes, gboolean to_gguf);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (HoneModel, hone_model_unref)

G_END_DECLS
