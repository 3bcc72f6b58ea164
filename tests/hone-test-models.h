/* hone-test-models.h — tiny random models for tests (deterministic).
 *
 * Usage:
 *   HoneTestModelSpec spec;
 *   hone_test_model_spec_init (&spec, HONE_ARCH_LLAMA, HONE_DTYPE_Q4_K);
 *   spec.tied = TRUE;                                  // optional tweaks
 *   g_autofree char *dir = g_dir_make_tmp ("hone-XXXXXX", NULL);
 *   g_autofree char *gguf = hone_test_model_write_gguf (dir, &spec, &error);  // dir/<name>.gguf
 *   g_autofree char *hf = hone_test_model_write_hf (dir, &spec, &error);      // dir/<name>-hf/
 *   …hone_model_open (gguf, &error)…
 *   hone_test_rm_rf (dir);
 *
 * For reference computations keep the master weights:
 *   HoneTestModel *m = hone_test_model_new (&spec);
 *   hone_test_model_save_gguf (m, path, &error);   // and/or _save_hf (m, folder, &error)
 *   m->layers[0].wq.data …                         // f32, HF row order
 *   hone_test_model_free (m);
 *
 * Master weights are f32 in HF (half-split RoPE) row order, ne innermost-first
 * like HoneTensor (a [out, in] matrix has ne = {in, out}, row r at data + r*ne[0]).
 * They are already rounded to what the files store (quantize → dequantize
 * per row for the GGUF type of 2-D weights; F16/BF16 rounding of 1-D
 * tensors when the weight type is F16/BF16), so a f64 forward pass over them
 * computes exactly the model that both files hold. The GGUF of a llama model
 * stores Q/K rows permuted as llama.cpp's converter does (its config says
 * HONE_ROPE_PAIRS_ADJACENT); qwen2/qwen3 GGUFs and all HF folders keep HF order.
 *
 * Files: GGUF (general.architecture, <arch>.* hyper-parameters, a byte-level
 * BPE vocabulary in tokenizer.ggml.* — 3 specials <|endoftext|>=0,
 * <|im_start|>=1 (BOS), <|im_end|>=2 (EOS), 256 byte tokens in GPT-2
 * byte-to-unicode form (byte b = id 3+b), 41 merges, then <|unused_N|>
 * fillers up to spec.vocab — and a ChatML chat template); HF folder
 * (config.json, model.safetensors or 2 shards + index, tokenizer.json,
 * tokenizer_config.json with the same template). HF tensors are F32 unless
 * the weight type is F16/BF16.
 */
#pragma once

#include <glib.h>
#include "hone-model.h"

G_BEGIN_DECLS

typedef struct {
  HoneArch arch;
  HoneDType weight_type;    /* 2-D weights: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q4_K Q6_K */
  HoneDType embd_type;      /* token embeddings (and output when tied); default weight_type */
  int n_layers, hidden, n_heads, n_kv_heads, head_dim, ffn, vocab, max_context;
  float rope_theta, rms_eps;
  gboolean tied;            /* no output.weight / lm_head */
  int hf_shards;            /* 1 (model.safetensors) or 2 (index + 2 shards) */
  guint64 seed;
  char name[64];            /* file name stem; default "tiny-<arch>-<type>" */
} HoneTestModelSpec;

typedef struct {
  char *name;               /* GGUF name, e.g. "blk.0.attn_q.weight" */
  char *hf_name;            /* HF name */
  int n_dims;               /* 1 or 2 */
  int64_t ne[2];
  float *data;              /* NULL when absent */
  HoneDType gguf_type;      /* type in the GGUF file */
  guint8 *gguf_data;        /* 2-D: the stored rows (HF order) that data dequantizes from */
} HoneTestTensor;

typedef struct {
  HoneTestTensor attn_norm, wq, wk, wv, wo, bq, bk, bv, q_norm, k_norm, ffn_norm, w_gate, w_up, w_down;
} HoneTestLayer;

typedef struct {
  HoneTestModelSpec spec;
  HoneModelConfig config;   /* as a HF folder loads it (rope_pairing HALF) */
  HoneTestTensor tok_embd, output_norm, output;   /* output.data NULL when tied */
  HoneTestLayer *layers;
} HoneTestModel;

/* Defaults: 2 layers, hidden 256, 4 heads / 2 KV heads, head_dim 64, ffn 512,
 * vocab 300, context 512, theta 10000, eps 1e-5 (1e-6 for qwen), not tied,
 * 1 shard, seed 42. Sizes are multiples of 256, as K-quants need. */
void           hone_test_model_spec_init (HoneTestModelSpec *spec, HoneArch arch, HoneDType weight_type);

HoneTestModel *hone_test_model_new (const HoneTestModelSpec *spec);
void           hone_test_model_free (HoneTestModel *model);
gboolean       hone_test_model_save_gguf (const HoneTestModel *model, const char *path, GError **error);
/* Creates @dir if needed. */
gboolean       hone_test_model_save_hf (const HoneTestModel *model, const char *dir, GError **error);

/* Convenience: new + save into @dir; returns the file / folder path. */
char          *hone_test_model_write_gguf (const char *dir, const HoneTestModelSpec *spec, GError **error);
char          *hone_test_model_write_hf (const char *dir, const HoneTestModelSpec *spec, GError **error);

/* The ChatML template written into both formats. */
const char    *hone_test_model_chat_template (void);
/* GPT-2 byte-to-unicode: the UTF-8 text of byte @b's token (static). */
const char    *hone_test_byte_token (guint8 b);

/* Remove a folder tree made by a test. */
void           hone_test_rm_rf (const char *path);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (HoneTestModel, hone_test_model_free)

G_END_DECLS
