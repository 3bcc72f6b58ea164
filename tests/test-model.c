/* test-model.c — model config (config.json, GGUF metadata), tensor mapping,
 * Q/K row permutation, loading of both sources, and bad input.
 *
 * References: tests/data/model/pair-llama* (written by the `gguf` and
 * `safetensors` packages with llama.cpp's own permute function),
 * smollm2-expected.json (the default model's metadata as the `gguf` package
 * reads it), and config.json texts whose meaning transformers defines. */
#include "hone-model.h"
#include "hone-model-info.h"
#include "hone-error.h"
#include "hone-gguf.h"
#include "hone-safetensors.h"
#include "hone-tokenizer.h"
#include "hone-test-models.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>
#include <glib/gstdio.h>

static char *
data_path (const char *name)
{
  const char *dir = g_getenv ("HONE_TEST_DATA");
  return g_build_filename (dir ? dir : "tests/data", "model", name, NULL);
}

/* Dequantized copy of a weight, rows in stored order. */
static float *
tensor_f32 (const HoneTensor *t)
{
  int64_t ne0 = t->ne[0], rows = hone_tensor_n_elements (t) / ne0;
  float *out = g_new (float, ne0 * rows);
  for (int64_t r = 0; r < rows; r++)
    hone_dequantize_row (t->type, hone_tensor_row (t, r), out + r * ne0, ne0);
  return out;
}

/* ---- config.json ------------------------------------------------------- */

static void
test_config_json_good (void)
{
  HoneModelConfig c;
  g_autoptr(GError) error = NULL;

  /* Llama-3.1-8B's config.json (abridged). */
  g_assert_true (hone_model_config_from_json (&c,
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 4096,"
    " \"intermediate_size\": 14336, \"num_hidden_layers\": 32, \"num_attention_heads\": 32,"
    " \"num_key_value_heads\": 8, \"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-05,"
    " \"rope_theta\": 500000.0, \"rope_scaling\": {\"factor\": 8.0, \"low_freq_factor\": 1.0,"
    " \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"},"
    " \"tie_word_embeddings\": false, \"vocab_size\": 128256, \"hidden_act\": \"silu\", \"mlp_bias\": false,"
    " \"attention_bias\": false}", -1, &error));
  g_assert_no_error (error);
  g_assert_cmpint (c.arch, ==, HONE_ARCH_LLAMA);
  g_assert_cmpstr (c.arch_name, ==, "llama");
  g_assert_cmpint (c.n_layers, ==, 32);
  g_assert_cmpint (c.hidden, ==, 4096);
  g_assert_cmpint (c.n_heads, ==, 32);
  g_assert_cmpint (c.n_kv_heads, ==, 8);
  g_assert_cmpint (c.head_dim, ==, 128);
  g_assert_cmpint (c.ffn, ==, 14336);
  g_assert_cmpint (c.vocab, ==, 128256);
  g_assert_cmpint (c.max_context, ==, 131072);
  g_assert_cmpfloat (c.rope_theta, ==, 500000.0f);
  g_assert_cmpfloat (c.rms_eps, ==, 1e-5f);
  g_assert_cmpint (c.rope_scaling.type, ==, HONE_ROPE_SCALING_LLAMA3);
  g_assert_cmpfloat (c.rope_scaling.factor, ==, 8.0f);
  g_assert_cmpfloat (c.rope_scaling.low_freq_factor, ==, 1.0f);
  g_assert_cmpfloat (c.rope_scaling.high_freq_factor, ==, 4.0f);
  g_assert_cmpint (c.rope_scaling.original_context, ==, 8192);
  g_assert_cmpint (c.rope_pairing, ==, HONE_ROPE_PAIRS_HALF);
  g_assert_false (c.tied_embeddings);
  g_assert_false (c.qkv_bias);
  g_assert_false (c.qk_norm);

  /* Qwen2.5-0.5B: bias, tied, no num_key_value_heads default needed. */
  g_assert_true (hone_model_config_from_json (&c,
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"hidden_size\": 896, \"intermediate_size\": 4864,"
    " \"max_position_embeddings\": 32768, \"model_type\": \"qwen2\", \"num_attention_heads\": 14,"
    " \"num_hidden_layers\": 24, \"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-06,"
    " \"rope_theta\": 1000000.0, \"tie_word_embeddings\": true, \"vocab_size\": 151936,"
    " \"rope_scaling\": null, \"sliding_window\": 32768, \"use_sliding_window\": false}", -1, &error));
  g_assert_no_error (error);
  g_assert_cmpint (c.arch, ==, HONE_ARCH_QWEN2);
  g_assert_cmpint (c.head_dim, ==, 64);
  g_assert_true (c.qkv_bias);
  g_assert_false (c.qk_norm);
  g_assert_true (c.tied_embeddings);
  g_assert_cmpint (c.rope_scaling.type, ==, HONE_ROPE_SCALING_NONE);

  /* Qwen3-0.6B: head_dim 128 though hidden/heads = 64. */
  g_assert_true (hone_model_config_from_json (&c,
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"attention_bias\": false, \"head_dim\": 128,"
    " \"hidden_act\": \"silu\", \"hidden_size\": 1024, \"intermediate_size\": 3072,"
    " \"max_position_embeddings\": 40960, \"model_type\": \"qwen3\", \"num_attention_heads\": 16,"
    " \"num_hidden_layers\": 28, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-06,"
    " \"rope_scaling\": null, \"rope_theta\": 1000000, \"tie_word_embeddings\": true, \"vocab_size\": 151936}",
    -1, &error));
  g_assert_no_error (error);
  g_assert_cmpint (c.arch, ==, HONE_ARCH_QWEN3);
  g_assert_cmpint (c.head_dim, ==, 128);
  g_assert_true (c.qk_norm);
  g_assert_false (c.qkv_bias);
  g_assert_cmpfloat (c.rope_theta, ==, 1000000.0f);

  /* Mistral by "architectures" only; KV heads default to heads; linear scaling. */
  g_assert_true (hone_model_config_from_json (&c,
    "{\"architectures\": [\"MistralForCausalLM\"], \"hidden_size\": 512, \"intermediate_size\": 1024,"
    " \"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"vocab_size\": 1000,"
    " \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}}", -1, &error));
  g_assert_no_error (error);
  g_assert_cmpint (c.arch, ==, HONE_ARCH_LLAMA);
  g_assert_cmpstr (c.arch_name, ==, "mistral");
  g_assert_cmpint (c.n_kv_heads, ==, 8);
  g_assert_cmpint (c.head_dim, ==, 64);
  g_assert_cmpint (c.rope_scaling.type, ==, HONE_ROPE_SCALING_LINEAR);
  g_assert_cmpfloat (c.rope_scaling.factor, ==, 2.0f);
  g_assert_cmpfloat (c.rope_theta, ==, 10000.0f);   /* transformers' default */
}

static void
expect_config_error (const char *json, int code, const char *needle)
{
  HoneModelConfig c;
  g_autoptr(GError) error = NULL;

  g_assert_false (hone_model_config_from_json (&c, json, -1, &error));
  g_assert_nonnull (error);
  if (error->code != code || (needle && strstr (error->message, needle) == NULL))
    g_error ("%s: expected %s naming “%s”, got %s: %s", json, hone_error_code_name (code), needle,
             hone_error_code_name (error->code), error->message);
}

#define BASE "\"model_type\": \"llama\", \"hidden_size\": 256, \"intermediate_size\": 512, " \
             "\"num_hidden_layers\": 2, \"vocab_size\": 300"

static void
test_config_json_bad (void)
{
  GString *deep = g_string_new ("{\"a\": ");
  expect_config_error ("{\"model_type\": \"llama\",", HONE_ERROR_INVALID_JSON, NULL);
  expect_config_error ("[1]", HONE_ERROR_INVALID_JSON, NULL);
  expect_config_error ("", HONE_ERROR_INVALID_JSON, NULL);
  expect_config_error ("{\"hidden_size\": 4}", HONE_ERROR_INVALID_JSON, "model_type");
  expect_config_error ("{\"model_type\": \"gpt_neox\", \"hidden_size\": 4}", HONE_ERROR_UNSUPPORTED_ARCH, "gpt_neox");
  expect_config_error ("{\"architectures\": [\"FalconForCausalLM\"]}", HONE_ERROR_UNSUPPORTED_ARCH, "FalconForCausalLM");
  expect_config_error ("{" BASE "}", HONE_ERROR_INVALID_JSON, "num_attention_heads");
  expect_config_error ("{\"model_type\": \"llama\", \"intermediate_size\": 512, \"num_hidden_layers\": 2,"
                       " \"vocab_size\": 300, \"num_attention_heads\": 4}", HONE_ERROR_INVALID_JSON, "hidden_size");
  expect_config_error ("{" BASE ", \"num_attention_heads\": 0}", HONE_ERROR_INVALID_JSON, "num_attention_heads");
  expect_config_error ("{" BASE ", \"num_attention_heads\": 4, \"head_dim\": 64, \"num_key_value_heads\": 0}",
                       HONE_ERROR_INVALID_JSON, "KV heads");
  expect_config_error ("{" BASE ", \"num_attention_heads\": 4, \"num_key_value_heads\": 3}",
                       HONE_ERROR_INVALID_JSON, "multiple");
  expect_config_error ("{" BASE ", \"num_attention_heads\": 3}", HONE_ERROR_INVALID_JSON, "multiple");
  expect_config_error ("{" BASE ", \"num_attention_heads\": 4, \"hidden_size\": \"256\"}",
                       HONE_ERROR_INVALID_JSON, "hidden_size");
  expect_config_error ("{" BASE ", \"num_attention_heads\": 4, \"rms_norm_eps\": -1}",
                       HONE_ERROR_INVALID_JSON, "epsilon");
  expect_config_error ("{" BASE ", \"num_attention_heads\": 4, \"rope_theta\": 0}", HONE_ERROR_INVALID_JSON, "theta");
  expect_config_error ("{" BASE ", \"num_attention_heads\": 4, \"num_hidden_layers\": 1e12}",
                       HONE_ERROR_INVALID_JSON, "num_hidden_layers");
  expect_config_error ("{" BASE ", \"num_attention_heads\": 4, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}}",
                       HONE_ERROR_FILE_UNSUPPORTED, "yarn");
  expect_config_error ("{" BASE ", \"num_attention_heads\": 4, \"rope_scaling\": {\"rope_type\": \"linear\"}}",
                       HONE_ERROR_INVALID_JSON, "factor");
  expect_config_error ("{" BASE ", \"num_attention_heads\": 4, \"rope_scaling\": {\"rope_type\": \"llama3\","
                       " \"factor\": 8, \"low_freq_factor\": 4, \"high_freq_factor\": 1}}", HONE_ERROR_INVALID_JSON, "llama3");
  expect_config_error ("{" BASE ", \"num_attention_heads\": 4, \"hidden_act\": \"gelu\"}", HONE_ERROR_FILE_UNSUPPORTED, "gelu");
  expect_config_error ("{" BASE ", \"num_attention_heads\": 4, \"attention_bias\": true}", HONE_ERROR_FILE_UNSUPPORTED,
                       "attention_bias");
  for (int i = 0; i < 5000; i++)
    g_string_append_c (deep, '[');
  expect_config_error (deep->str, HONE_ERROR_INVALID_JSON, NULL);
  g_string_free (deep, TRUE);
}

/* ---- permutation ------------------------------------------------------- */

static void
test_permute_inverse (void)
{
  /* 3 heads of dim 8, 2 ints per row: to GGUF and back is the identity, and
   * GGUF row h*8 + 2r + j holds HF row h*8 + j*4 + r. */
  int src[24][2], mid[24][2], back[24][2];
  for (int i = 0; i < 24; i++)
    src[i][0] = i, src[i][1] = -i;
  hone_model_permute_qk_rows (mid, src, 3, 8, sizeof src[0], TRUE);
  hone_model_permute_qk_rows (back, mid, 3, 8, sizeof src[0], FALSE);
  g_assert_cmpmem (back, sizeof back, src, sizeof src);
  for (int h = 0; h < 3; h++)
    for (int r = 0; r < 4; r++)
      for (int j = 0; j < 2; j++)
        g_assert_cmpint (mid[h * 8 + 2 * r + j][0], ==, h * 8 + j * 4 + r);
}

static void
assert_config_equal (const HoneModelConfig *a, const HoneModelConfig *b)
{
  g_assert_cmpint (a->arch, ==, b->arch);
  g_assert_cmpint (a->n_layers, ==, b->n_layers);
  g_assert_cmpint (a->hidden, ==, b->hidden);
  g_assert_cmpint (a->n_heads, ==, b->n_heads);
  g_assert_cmpint (a->n_kv_heads, ==, b->n_kv_heads);
  g_assert_cmpint (a->head_dim, ==, b->head_dim);
  g_assert_cmpint (a->ffn, ==, b->ffn);
  g_assert_cmpint (a->vocab, ==, b->vocab);
  g_assert_cmpint (a->max_context, ==, b->max_context);
  g_assert_cmpfloat (a->rope_theta, ==, b->rope_theta);
  g_assert_cmpfloat (a->rms_eps, ==, b->rms_eps);
  g_assert_cmpint (a->rope_scaling.type, ==, b->rope_scaling.type);
  g_assert_cmpint (a->tied_embeddings, ==, b->tied_embeddings);
  g_assert_cmpint (a->qkv_bias, ==, b->qkv_bias);
  g_assert_cmpint (a->qk_norm, ==, b->qk_norm);
}

/* A GGUF stored in llama.cpp's row order gives HF's rows after our inverse
 * permutation (the GGUF was permuted by the converter's own code). */
static void
check_same_tensor (const HoneTensor *g, const HoneTensor *h, int permute_heads, int head_dim)
{
  g_autofree float *gf = NULL;
  g_autofree float *hf = NULL;
  g_autofree float *back = NULL;
  int64_t n;

  g_assert_true (hone_tensor_present (g));
  g_assert_true (hone_tensor_present (h));
  g_assert_cmpint (g->ne[0], ==, h->ne[0]);
  g_assert_cmpint (hone_tensor_n_elements (g), ==, hone_tensor_n_elements (h));
  n = hone_tensor_n_elements (g);
  gf = tensor_f32 (g);
  hf = tensor_f32 (h);
  if (permute_heads)
    {
      back = g_new (float, n);
      hone_model_permute_qk_rows (back, gf, permute_heads, head_dim, (gsize) g->ne[0] * sizeof (float), FALSE);
      g_assert_cmpmem (back, n * sizeof (float), hf, n * sizeof (float));
      /* …and they really were in a different order. */
      g_assert_true (memcmp (gf, hf, n * sizeof (float)) != 0);
    }
  else
    g_assert_cmpmem (gf, n * sizeof (float), hf, n * sizeof (float));
}

static void
test_pair_fixture (void)
{
  g_autofree char *gguf_path = data_path ("pair-llama.gguf");
  g_autofree char *hf_path = data_path ("pair-llama-hf");
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneModel) g = hone_model_open (gguf_path, &error);
  g_autoptr(HoneModel) h = NULL;
  const HoneModelConfig *c;

  g_assert_no_error (error);
  h = hone_model_open (hf_path, &error);
  g_assert_no_error (error);
  c = &g->config;

  assert_config_equal (&g->config, &h->config);
  g_assert_cmpint (g->source, ==, HONE_MODEL_SOURCE_GGUF);
  g_assert_cmpint (h->source, ==, HONE_MODEL_SOURCE_SAFETENSORS);
  g_assert_cmpint (g->config.rope_pairing, ==, HONE_ROPE_PAIRS_ADJACENT);
  g_assert_cmpint (h->config.rope_pairing, ==, HONE_ROPE_PAIRS_HALF);
  /* Values the generator script wrote (pair-llama.json). */
  g_assert_cmpint (c->hidden, ==, 64);
  g_assert_cmpint (c->n_heads, ==, 4);
  g_assert_cmpint (c->n_kv_heads, ==, 2);
  g_assert_cmpint (c->head_dim, ==, 16);
  g_assert_cmpint (c->ffn, ==, 128);
  g_assert_cmpint (c->vocab, ==, 300);
  g_assert_cmpint (c->max_context, ==, 256);
  g_assert_cmpfloat (c->rope_theta, ==, 50000.0f);
  g_assert_cmpfloat (c->rms_eps, ==, 1e-5f);
  /* Tied: GGUF has no output.weight, config.json says tie_word_embeddings. */
  g_assert_true (g->config.tied_embeddings);
  g_assert_true (h->config.tied_embeddings);
  g_assert_true (g->output.data == g->tok_embd.data);
  g_assert_true (h->output.data == h->tok_embd.data);

  check_same_tensor (&g->tok_embd, &h->tok_embd, 0, 0);
  check_same_tensor (&g->output_norm, &h->output_norm, 0, 0);
  for (int i = 0; i < c->n_layers; i++)
    {
      const HoneLayerWeights *a = &g->layers[i], *b = &h->layers[i];
      check_same_tensor (&a->wq, &b->wq, c->n_heads, c->head_dim);
      check_same_tensor (&a->wk, &b->wk, c->n_kv_heads, c->head_dim);
      check_same_tensor (&a->wv, &b->wv, 0, 0);
      check_same_tensor (&a->wo, &b->wo, 0, 0);
      check_same_tensor (&a->attn_norm, &b->attn_norm, 0, 0);
      check_same_tensor (&a->ffn_norm, &b->ffn_norm, 0, 0);
      check_same_tensor (&a->w_gate, &b->w_gate, 0, 0);
      check_same_tensor (&a->w_up, &b->w_up, 0, 0);
      check_same_tensor (&a->w_down, &b->w_down, 0, 0);
      g_assert_false (hone_tensor_present (&a->bq));
      g_assert_false (hone_tensor_present (&b->q_norm));
    }
  g_assert_cmpint (hone_model_n_params (g), ==, hone_model_n_params (h));
  /* 300·64 + 64 + (64 + 64·64 + 2·64·32 + 64·64 + 64 + 3·64·128) per the script's shapes. */
  g_assert_cmpint (hone_model_n_params (g), ==, 300 * 64 + 64 + (64 + 64 * 64 + 2 * 64 * 32 + 64 * 64 + 64 + 3 * 64 * 128));
  /* Chat template: GGUF string, HF list entry "default". */
  g_assert_nonnull (g->chat_template);
  g_assert_cmpstr (g->chat_template, ==, h->chat_template);
  g_assert_cmpint (hone_tokenizer_n_vocab (g->tokenizer), ==, 300);
  g_assert_cmpint (hone_tokenizer_n_vocab (h->tokenizer), ==, 300);
  g_assert_cmpstr (g->name, ==, "pair-llama");
  g_assert_cmpstr (h->name, ==, "pair-llama-hf");
}

/* ---- generated models -------------------------------------------------- */

/* The loaded weights are exactly the generator's master weights. */
static void
check_against_master (const HoneTensor *t, const HoneTestTensor *m, int permute_heads, int head_dim)
{
  g_autofree float *have = NULL;
  g_autofree float *hf = NULL;
  int64_t n = m->ne[0] * m->ne[1];

  g_assert_true (hone_tensor_present (t));
  g_assert_cmpint (t->ne[0], ==, m->ne[0]);
  g_assert_cmpint (hone_tensor_n_elements (t), ==, n);
  have = tensor_f32 (t);
  if (permute_heads)
    {
      hf = g_new (float, n);
      hone_model_permute_qk_rows (hf, have, permute_heads, head_dim, (gsize) m->ne[0] * sizeof (float), FALSE);
      g_assert_cmpmem (hf, n * sizeof (float), m->data, n * sizeof (float));
    }
  else
    g_assert_cmpmem (have, n * sizeof (float), m->data, n * sizeof (float));
}

static void
check_generated (HoneModel *hm, const HoneTestModel *tm)
{
  const HoneModelConfig *c = &tm->config;
  gboolean permuted = hm->source == HONE_MODEL_SOURCE_GGUF && c->arch == HONE_ARCH_LLAMA;
  gint64 n_params = 0;

  assert_config_equal (&hm->config, c);
  g_assert_cmpint (hm->config.rope_pairing, ==, permuted ? HONE_ROPE_PAIRS_ADJACENT : HONE_ROPE_PAIRS_HALF);
  if (hm->source == HONE_MODEL_SOURCE_GGUF)
    {
      g_assert_cmpint (hm->layers[0].wq.type, ==, tm->spec.weight_type);
      g_assert_cmpint (hm->tok_embd.type, ==, tm->spec.embd_type);
    }
  check_against_master (&hm->tok_embd, &tm->tok_embd, 0, 0);
  check_against_master (&hm->output_norm, &tm->output_norm, 0, 0);
  n_params += tm->tok_embd.ne[0] * tm->tok_embd.ne[1] + tm->output_norm.ne[0];
  if (tm->spec.tied)
    g_assert_true (hm->output.data == hm->tok_embd.data);
  else
    {
      check_against_master (&hm->output, &tm->output, 0, 0);
      n_params += tm->output.ne[0] * tm->output.ne[1];
    }
  for (int i = 0; i < c->n_layers; i++)
    {
      const HoneLayerWeights *l = &hm->layers[i];
      const HoneTestLayer *m = &tm->layers[i];
      const HoneTensor *have[] = { &l->attn_norm, &l->wq, &l->wk, &l->wv, &l->wo, &l->bq, &l->bk, &l->bv,
                                   &l->q_norm, &l->k_norm, &l->ffn_norm, &l->w_gate, &l->w_up, &l->w_down };
      const HoneTestTensor *want[] = { &m->attn_norm, &m->wq, &m->wk, &m->wv, &m->wo, &m->bq, &m->bk, &m->bv,
                                       &m->q_norm, &m->k_norm, &m->ffn_norm, &m->w_gate, &m->w_up, &m->w_down };
      for (gsize j = 0; j < G_N_ELEMENTS (have); j++)
        {
          int heads = 0;
          if (permuted && (want[j] == &m->wq || want[j] == &m->bq))
            heads = c->n_heads;
          if (permuted && (want[j] == &m->wk || want[j] == &m->bk))
            heads = c->n_kv_heads;
          if (want[j]->data == NULL)
            {
              g_assert_false (hone_tensor_present (have[j]));
              continue;
            }
          check_against_master (have[j], want[j], heads, c->head_dim);
          n_params += want[j]->ne[0] * want[j]->ne[1];
        }
    }
  g_assert_cmpint (hone_model_n_params (hm), ==, n_params);
  g_assert_cmpstr (hm->chat_template, ==, hone_test_model_chat_template ());
  g_assert_cmpint (hone_tokenizer_n_vocab (hm->tokenizer), ==, tm->spec.vocab);
  g_assert_cmpint (hone_tokenizer_bos (hm->tokenizer), ==, 1);
  g_assert_cmpint (hone_tokenizer_eos (hm->tokenizer), ==, 2);
  g_assert_cmpint (hm->file_bytes, >, 0);
}

typedef struct {
  HoneArch arch;
  HoneDType type;
  gboolean tied;
  int shards;
} GenCase;

static void
test_generated (gconstpointer data)
{
  const GenCase *gc = data;
  HoneTestModelSpec spec;
  g_autoptr(GError) error = NULL;
  const char *keep = g_getenv ("HONE_TEST_KEEP_DIR");
  g_autofree char *dir = keep ? g_strdup (keep) : g_dir_make_tmp ("hone-model-XXXXXX", NULL);
  g_autoptr(HoneTestModel) tm = NULL;
  g_autoptr(HoneModel) g = NULL;
  g_autoptr(HoneModel) h = NULL;
  g_autofree char *gguf = NULL;
  g_autofree char *hf = NULL;

  hone_test_model_spec_init (&spec, gc->arch, gc->type);
  spec.tied = gc->tied;
  spec.hf_shards = gc->shards;
  if (gc->type == HONE_DTYPE_Q4_0)
    spec.embd_type = HONE_DTYPE_Q8_0;   /* mixed types, as real GGUFs have */
  if (gc->shards > 1)
    g_snprintf (spec.name, sizeof spec.name, "tiny-%s-sharded", gc->arch == HONE_ARCH_LLAMA ? "llama" : "qwen");
  tm = hone_test_model_new (&spec);
  gguf = g_strconcat (dir, "/", tm->spec.name, ".gguf", NULL);
  hf = g_strconcat (dir, "/", tm->spec.name, "-hf", NULL);
  g_assert_true (hone_test_model_save_gguf (tm, gguf, &error));
  g_assert_no_error (error);
  g_assert_true (hone_test_model_save_hf (tm, hf, &error));
  g_assert_no_error (error);

  g = hone_model_open (gguf, &error);
  g_assert_no_error (error);
  check_generated (g, tm);
  h = hone_model_open (hf, &error);
  g_assert_no_error (error);
  check_generated (h, tm);
  g_assert_cmpint (hone_model_n_params (g), ==, hone_model_n_params (h));

  /* The generator is deterministic. */
  {
    g_autoptr(HoneTestModel) again = hone_test_model_new (&spec);
    g_assert_cmpmem (again->layers[1].w_down.data, spec.hidden * spec.ffn * sizeof (float),
                     tm->layers[1].w_down.data, spec.hidden * spec.ffn * sizeof (float));
  }
  if (!keep)
    hone_test_rm_rf (dir);
}

/* A file inside the folder opens the folder; figures. */
static void
test_open_paths (void)
{
  HoneTestModelSpec spec;
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("hone-model-XXXXXX", NULL);
  g_autofree char *hf = NULL;
  g_autofree char *gguf = NULL;

  hone_test_model_spec_init (&spec, HONE_ARCH_LLAMA, HONE_DTYPE_F16);
  hf = hone_test_model_write_hf (dir, &spec, &error);
  g_assert_no_error (error);
  gguf = hone_test_model_write_gguf (dir, &spec, &error);
  g_assert_no_error (error);
  g_assert_true (g_str_has_suffix (gguf, "tiny-llama-f16.gguf"));
  {
    const char *inside[] = { "config.json", "model.safetensors", "tokenizer.json" };
    for (gsize i = 0; i < G_N_ELEMENTS (inside); i++)
      {
        g_autofree char *p = g_build_filename (hf, inside[i], NULL);
        g_autoptr(HoneModel) m = hone_model_open (p, &error);
        g_assert_no_error (error);
        g_assert_cmpint (m->source, ==, HONE_MODEL_SOURCE_SAFETENSORS);
        g_assert_cmpstr (m->name, ==, "tiny-llama-f16-hf");
        g_assert_cmpint (m->layers[0].wq.type, ==, HONE_DTYPE_F16);
      }
  }
  /* tokenizer_config.json's list form of chat_template: the "default" entry is taken; entries whose
   * "name" is not a string are passed over without a warning (json-glib's own getter raised a critical,
   * fatal in this test) */
  {
    g_autofree char *tc = g_build_filename (hf, "tokenizer_config.json", NULL);
    g_autoptr(JsonParser) p = json_parser_new ();
    g_autoptr(JsonNode) list = json_from_string ("[{\"name\": {}, \"template\": \"A\"}, {\"name\": 7, \"template\": "
                                                 "\"B\"}, {\"name\": \"default\", \"template\": \"C\"}]", NULL);
    g_autofree char *text = NULL;
    g_assert_true (json_parser_load_from_file (p, tc, NULL));
    json_object_set_member (json_node_get_object (json_parser_get_root (p)), "chat_template", g_steal_pointer (&list));
    text = json_to_string (json_parser_get_root (p), FALSE);
    g_assert_true (g_file_set_contents (tc, text, -1, NULL));
    {
      g_autoptr(HoneModel) m = hone_model_open (hf, &error);
      g_assert_no_error (error);
      g_assert_cmpstr (m->chat_template, ==, "C");
    }
  }
  {
    g_autoptr(HoneModel) m = hone_model_open (gguf, &error);
    GStatBuf sb;
    g_assert_no_error (error);
    g_assert_cmpstr (m->name, ==, "tiny-llama-f16");
    g_assert_cmpint (g_stat (gguf, &sb), ==, 0);
    g_assert_cmpint (m->file_bytes, ==, sb.st_size);
    /* K and V × layers × kv heads × head_dim × tokens × bytes. */
    g_assert_cmpint (hone_model_kv_bytes (&m->config, 1000, 2), ==, 2 * 2 * 2 * 64 * 1000 * 2);
    g_assert_true (hone_model_ref (m) == m);
    hone_model_unref (m);
  }
  hone_test_rm_rf (dir);
}

/* ---- bad models -------------------------------------------------------- */

static void
expect_open_error (const char *path, int code, const char *needle)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneModel) m = hone_model_open (path, &error);

  g_assert_null (m);
  g_assert_nonnull (error);
  if (error->code != code || (needle && strstr (error->message, needle) == NULL))
    g_error ("%s: expected %s naming “%s”, got %s: %s", path, hone_error_code_name (code), needle,
             hone_error_code_name (error->code), error->message);
}

/* Re-write a HF folder's weights with @drop left out and @reshape given one more row. */
static void
rewrite_hf (const char *hf, const char *drop, const char *reshape)
{
  g_autofree char *path = g_build_filename (hf, "model.safetensors", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneSafetensors) st = hone_safetensors_open (path, &error);
  g_autoptr(HoneSafetensorsWriter) w = hone_safetensors_writer_new ();

  g_assert_no_error (error);
  for (guint i = 0; i < hone_safetensors_n_tensors (st); i++)
    {
      const HoneTensor *t = hone_safetensors_tensor (st, i);
      if (g_strcmp0 (t->name, drop) == 0)
        continue;
      if (g_strcmp0 (t->name, reshape) == 0)
        {
          int64_t ne[2] = { t->ne[0], t->ne[1] + 1 };
          g_autofree guint8 *more = g_malloc0 (t->nbytes + hone_tensor_row_bytes (t));
          memcpy (more, t->data, t->nbytes);
          g_assert_true (hone_safetensors_writer_add_tensor (w, t->name, t->type, 2, ne, more,
                                                             t->nbytes + hone_tensor_row_bytes (t), &error));
        }
      else
        g_assert_true (hone_safetensors_writer_add_tensor (w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes, &error));
    }
  g_assert_true (hone_safetensors_writer_write (w, path, &error));
  g_assert_no_error (error);
}

/* The same for a GGUF, and optionally a different architecture name. */
static void
rewrite_gguf_full (const char *path, const char *drop, const char *reshape, const char *arch, int rope_freqs)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneGguf) g = hone_gguf_open (path, &error);
  g_autoptr(HoneGgufWriter) w = hone_gguf_writer_new ();

  g_assert_no_error (error);
  for (guint i = 0; i < hone_gguf_n_kv (g); i++)
    {
      if (arch && strcmp (hone_gguf_kv_key (g, i), "general.architecture") == 0)
        hone_gguf_writer_add_string (w, "general.architecture", arch, -1);
      else
        hone_gguf_writer_copy_kv (w, g, i);
    }
  for (guint i = 0; i < hone_gguf_n_tensors (g); i++)
    {
      const HoneTensor *t = hone_gguf_tensor (g, i);
      if (g_strcmp0 (t->name, drop) == 0)
        continue;
      if (g_strcmp0 (t->name, reshape) == 0)
        {
          int64_t ne[2] = { t->ne[0], t->ne[1] - 1 };
          g_assert_true (hone_gguf_writer_add_tensor (w, t->name, t->type, 2, ne, t->data,
                                                      t->nbytes - hone_tensor_row_bytes (t), &error));
        }
      else
        g_assert_true (hone_gguf_writer_add_tensor (w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes, &error));
    }
  if (rope_freqs > 0)
    {
      g_autofree float *f = g_new (float, rope_freqs);
      for (int i = 0; i < rope_freqs; i++)
        f[i] = 1.0f + (float) i;
      g_assert_true (hone_gguf_writer_add_tensor (w, "rope_freqs.weight", HONE_DTYPE_F32, 1,
                                                  (int64_t[]) { rope_freqs }, f, rope_freqs * sizeof (float), &error));
    }
  g_clear_pointer (&g, hone_gguf_unref);
  g_assert_true (hone_gguf_writer_write (w, path, &error));
  g_assert_no_error (error);
}

static void
rewrite_gguf (const char *path, const char *drop, const char *reshape, const char *arch)
{
  rewrite_gguf_full (path, drop, reshape, arch, 0);
}

static char *
fresh_hf (const char *dir, const HoneTestModelSpec *spec)
{
  g_autofree char *old = g_build_filename (dir, "tiny-qwen2-f32-hf", NULL);
  g_autoptr(GError) error = NULL;
  char *hf;

  hone_test_rm_rf (old);
  hf = hone_test_model_write_hf (dir, spec, &error);
  g_assert_no_error (error);
  return hf;
}

static void
test_bad_models (void)
{
  HoneTestModelSpec spec;
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("hone-model-XXXXXX", NULL);

  hone_test_model_spec_init (&spec, HONE_ARCH_QWEN2, HONE_DTYPE_F32);
  spec.n_layers = 1;

#define FRESH_HF(var) g_autofree char *var = fresh_hf (dir, &spec)
  {
    FRESH_HF (hf);
    rewrite_hf (hf, "model.layers.0.mlp.down_proj.weight", NULL);
    expect_open_error (hf, HONE_ERROR_MISSING_TENSOR, "model.layers.0.mlp.down_proj.weight");
  }
  {
    FRESH_HF (hf);
    rewrite_hf (hf, "model.layers.0.self_attn.k_proj.bias", NULL);   /* qwen2 needs biases */
    expect_open_error (hf, HONE_ERROR_MISSING_TENSOR, "k_proj.bias");
  }
  {
    FRESH_HF (hf);
    rewrite_hf (hf, NULL, "model.layers.0.self_attn.o_proj.weight");
    expect_open_error (hf, HONE_ERROR_SHAPE_MISMATCH, "o_proj");
  }
  {
    FRESH_HF (hf);
    g_autofree char *cfg = g_build_filename (hf, "config.json", NULL);
    g_assert_true (g_file_set_contents (cfg, "{\"model_type\": \"qwen2\", ", -1, NULL));
    expect_open_error (hf, HONE_ERROR_INVALID_JSON, "config.json");
    g_assert_true (g_file_set_contents (cfg, "{\"model_type\": \"phi3\"}", -1, NULL));
    expect_open_error (hf, HONE_ERROR_UNSUPPORTED_ARCH, "phi3");
    g_assert_true (g_file_set_contents (cfg, "{\"model_type\": \"qwen2\", \"hidden_size\": 256, \"intermediate_size\": 512,"
                                             " \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
                                             " \"num_key_value_heads\": 2, \"vocab_size\": 301}", -1, NULL));
    expect_open_error (hf, HONE_ERROR_SHAPE_MISMATCH, "embed_tokens");
    g_unlink (cfg);
    expect_open_error (hf, HONE_ERROR_IO, "is not a model folder");
  }
  {
    g_autofree char *gguf = hone_test_model_write_gguf (dir, &spec, &error);
    g_assert_no_error (error);
    rewrite_gguf (gguf, "blk.0.attn_q.bias", NULL, NULL);
    expect_open_error (gguf, HONE_ERROR_MISSING_TENSOR, "blk.0.attn_q.bias");
  }
  {
    g_autofree char *gguf = hone_test_model_write_gguf (dir, &spec, &error);
    rewrite_gguf (gguf, NULL, "blk.0.ffn_up.weight", NULL);
    expect_open_error (gguf, HONE_ERROR_SHAPE_MISMATCH, "blk.0.ffn_up.weight");
  }
  {
    g_autofree char *gguf = hone_test_model_write_gguf (dir, &spec, &error);
    rewrite_gguf (gguf, NULL, NULL, "mamba");
    expect_open_error (gguf, HONE_ERROR_UNSUPPORTED_ARCH, "mamba");
  }
  {
    g_autofree char *gguf = hone_test_model_write_gguf (dir, &spec, &error);
    rewrite_gguf (gguf, "token_embd.weight", NULL, NULL);
    expect_open_error (gguf, HONE_ERROR_MISSING_TENSOR, "token_embd.weight");
  }
  /* GGUF strings are UTF-8: a file whose chat template or name is not is refused at open, naming the key,
   * and so is its model card (found by tests/fuzz/fuzz-model: the template went into AWQ exports' JSON, the
   * name into `hone info` as raw bytes). Both patched in place, same lengths. */
  {
    HoneTestModelSpec named = spec;
    g_autofree char *gguf = NULL;
    g_autofree char *bytes = NULL;
    g_autofree char *orig = NULL;
    const char *tmpl = hone_test_model_chat_template ();
    gsize len;
    char *at;
    g_strlcpy (named.name, "zzname", sizeof named.name);
    gguf = hone_test_model_write_gguf (dir, &named, &error);
    g_assert_no_error (error);
    g_assert_true (g_file_get_contents (gguf, &bytes, &len, NULL));
    orig = g_memdup2 (bytes, len);
    at = memmem (bytes, len, "zzname", 6);
    g_assert_nonnull (at);
    at[0] = (char) 0xFF;
    g_assert_true (g_file_set_contents (gguf, bytes, (gssize) len, NULL));
    expect_open_error (gguf, HONE_ERROR_FILE_CORRUPT, "general.name");
    {
      g_autoptr(HoneModelInfo) info = hone_model_info_new_for_path (gguf, &error);
      g_assert_null (info);
      g_assert_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT);
      g_assert_true (g_utf8_validate (error->message, -1, NULL));
      g_clear_error (&error);
    }
    memcpy (bytes, orig, len);
    at = memmem (bytes, len, tmpl, strlen (tmpl));
    g_assert_nonnull (at);
    at[1] = (char) 0xC3;   /* a lead byte with no continuation */
    g_assert_true (g_file_set_contents (gguf, bytes, (gssize) len, NULL));
    expect_open_error (gguf, HONE_ERROR_FILE_CORRUPT, "tokenizer.chat_template");
  }
  /* Llama-3.1-style rope_freqs: loaded when shaped {head_dim/2}, refused otherwise. */
  {
    g_autofree char *gguf = hone_test_model_write_gguf (dir, &spec, &error);
    g_autoptr(HoneModel) m = NULL;
    const float *f;
    rewrite_gguf_full (gguf, NULL, NULL, NULL, spec.head_dim / 2);
    m = hone_model_open (gguf, &error);
    g_assert_no_error (error);
    g_assert_true (hone_tensor_present (&m->rope_freqs));
    f = m->rope_freqs.data;
    g_assert_cmpfloat (f[0], ==, 1.0f);
    g_assert_cmpfloat (f[spec.head_dim / 2 - 1], ==, (float) spec.head_dim / 2);
    rewrite_gguf_full (gguf, "rope_freqs.weight", NULL, NULL, spec.head_dim);
    expect_open_error (gguf, HONE_ERROR_SHAPE_MISMATCH, "rope_freqs.weight");
  }
  {
    g_autofree char *junk = g_build_filename (dir, "junk.bin", NULL);
    g_autofree char *nothing = g_build_filename (dir, "nothing.gguf", NULL);
    g_autofree char *sub = g_build_filename (dir, "sub", NULL);
    g_autofree char *junk2 = g_build_filename (sub, "junk.bin", NULL);
    g_mkdir (sub, 0755);
    g_assert_true (g_file_set_contents (junk2, "hello", -1, NULL));
    expect_open_error (junk2, HONE_ERROR_FILE_UNSUPPORTED, "junk.bin");
    expect_open_error (nothing, HONE_ERROR_IO, "nothing.gguf");
    g_assert_true (g_file_set_contents (junk, "GGUF\x03\0\0\0", 8, NULL));
    expect_open_error (junk, HONE_ERROR_FILE_CORRUPT, NULL);
  }
  hone_test_rm_rf (dir);
#undef FRESH_HF
}

/* GGUF metadata checks (the other source of configs). */
static void
test_config_gguf_bad (void)
{
  struct { const char *key; guint32 value; int code; const char *needle; } cases[] = {
    { "llama.attention.head_count", 0, HONE_ERROR_FILE_CORRUPT, "head" },
    { "llama.attention.head_count_kv", 3, HONE_ERROR_FILE_CORRUPT, "KV heads" },
    { "llama.block_count", 0, HONE_ERROR_FILE_CORRUPT, "layers" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(HoneGgufWriter) w = hone_gguf_writer_new ();
      g_autoptr(GBytes) b = NULL;
      g_autoptr(HoneGguf) g = NULL;
      g_autoptr(GError) error = NULL;
      HoneModelConfig c;
      hone_gguf_writer_add_string (w, "general.architecture", "llama", -1);
      hone_gguf_writer_add_u32 (w, "llama.vocab_size", 100);
#define U(k, v) hone_gguf_writer_add_u32 (w, k, strcmp (k, cases[i].key) == 0 ? cases[i].value : v)
      U ("llama.block_count", 2);
      U ("llama.embedding_length", 64);
      U ("llama.feed_forward_length", 128);
      U ("llama.attention.head_count", 4);
      U ("llama.attention.head_count_kv", 2);
#undef U
      b = hone_gguf_writer_to_bytes (w, &error);
      g_assert_no_error (error);
      g = hone_gguf_open_bytes (b, &error);
      g_assert_no_error (error);
      g_assert_false (hone_model_config_from_gguf (&c, g, &error));
      g_assert_nonnull (error);
      if (error->code != cases[i].code || strstr (error->message, cases[i].needle) == NULL)
        g_error ("%s: %s", cases[i].key, error->message);
    }
  /* Missing key is named. */
  {
    g_autoptr(HoneGgufWriter) w = hone_gguf_writer_new ();
    g_autoptr(GBytes) b = NULL;
    g_autoptr(HoneGguf) g = NULL;
    g_autoptr(GError) error = NULL;
    HoneModelConfig c;
    hone_gguf_writer_add_string (w, "general.architecture", "qwen3", -1);
    hone_gguf_writer_add_u32 (w, "qwen3.block_count", 2);
    b = hone_gguf_writer_to_bytes (w, &error);
    g = hone_gguf_open_bytes (b, &error);
    g_assert_no_error (error);
    g_assert_false (hone_model_config_from_gguf (&c, g, &error));
    g_assert_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT);
    g_assert_nonnull (strstr (error->message, "qwen3.embedding_length"));
  }
}

static void
test_tensor_names (void)
{
  struct { const char *what; int layer; const char *gguf, *hf; } n[] = {
    { "tok_embd", 0, "token_embd.weight", "model.embed_tokens.weight" },
    { "output", 3, "output.weight", "lm_head.weight" },
    { "wq", 3, "blk.3.attn_q.weight", "model.layers.3.self_attn.q_proj.weight" },
    { "bv", 0, "blk.0.attn_v.bias", "model.layers.0.self_attn.v_proj.bias" },
    { "k_norm", 11, "blk.11.attn_k_norm.weight", "model.layers.11.self_attn.k_norm.weight" },
    { "ffn_norm", 1, "blk.1.ffn_norm.weight", "model.layers.1.post_attention_layernorm.weight" },
    { "w_down", 2, "blk.2.ffn_down.weight", "model.layers.2.mlp.down_proj.weight" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (n); i++)
    {
      g_autofree char *g = hone_model_tensor_name (HONE_MODEL_SOURCE_GGUF, n[i].what, n[i].layer);
      g_autofree char *h = hone_model_tensor_name (HONE_MODEL_SOURCE_SAFETENSORS, n[i].what, n[i].layer);
      g_assert_cmpstr (g, ==, n[i].gguf);
      g_assert_cmpstr (h, ==, n[i].hf);
    }
  g_assert_null (hone_model_tensor_name (HONE_MODEL_SOURCE_GGUF, "nope", 0));
}

/* ---- the default model (suite "model") --------------------------------- */

static void
test_default_model (void)
{
  const char *env = g_getenv ("HONE_DEFAULT_MODEL");
  g_autofree char *path = env ? g_strdup (env)
                              : g_build_filename (g_get_user_cache_dir (), "hone", "models",
                                                  "SmolLM2-135M-Instruct.Q4_1.gguf", NULL);
  g_autofree char *exp_path = data_path ("smollm2-expected.json");
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneModel) m = NULL;
  JsonObject *exp;
  const HoneModelConfig *c;

  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    g_error ("default model not found at %s (set HONE_DEFAULT_MODEL or run .ci/fetch-model)", path);
  g_assert_true (json_parser_load_from_file (parser, exp_path, &error));
  exp = json_node_get_object (json_parser_get_root (parser));

  m = hone_model_open (path, &error);
  g_assert_no_error (error);
  c = &m->config;
  /* The preamble's / model card's figures… */
  g_assert_cmpint (c->arch, ==, HONE_ARCH_LLAMA);
  g_assert_cmpstr (c->arch_name, ==, "llama");
  g_assert_cmpint (c->n_layers, ==, 30);
  g_assert_cmpint (c->hidden, ==, 576);
  g_assert_cmpint (c->n_heads, ==, 9);
  g_assert_cmpint (c->n_kv_heads, ==, 3);
  g_assert_cmpint (c->head_dim, ==, 64);
  g_assert_cmpint (c->ffn, ==, 1536);
  g_assert_cmpint (c->vocab, ==, 49152);
  g_assert_cmpfloat (c->rope_theta, ==, 100000.0f);
  g_assert_cmpint (c->rope_pairing, ==, HONE_ROPE_PAIRS_ADJACENT);
  g_assert_true (c->tied_embeddings);
  g_assert_true (m->output.data == m->tok_embd.data);
  g_assert_false (c->qkv_bias);
  g_assert_false (c->qk_norm);
  g_assert_cmpint (m->tok_embd.type, ==, HONE_DTYPE_Q8_0);
  g_assert_cmpint (m->layers[0].wq.type, ==, HONE_DTYPE_Q4_1);
  g_assert_cmpint (m->layers[29].attn_norm.type, ==, HONE_DTYPE_F32);
  /* …and what the gguf package reads from the same file. */
  g_assert_cmpint (c->max_context, ==, json_object_get_int_member (exp, "context_length"));
  g_assert_cmpfloat (c->rms_eps, ==, (float) json_object_get_double_member (exp, "rms_eps"));
  g_assert_cmpint (hone_model_n_params (m), ==, json_object_get_int_member (exp, "n_params"));
  g_assert_cmpint (m->file_bytes, ==, json_object_get_int_member (exp, "file_bytes"));
  g_assert_cmpstr (m->name, ==, json_object_get_string_member (exp, "name"));
  g_assert_false (json_object_get_boolean_member (exp, "has_output_weight"));
  g_assert_nonnull (m->chat_template);
  g_assert_nonnull (strstr (m->chat_template, "<|im_start|>"));
  g_assert_cmpint (hone_tokenizer_n_vocab (m->tokenizer), ==, json_object_get_int_member (exp, "n_vocab"));
  g_assert_cmpint (hone_tokenizer_bos (m->tokenizer), ==, 1);
  g_assert_cmpint (hone_tokenizer_eos (m->tokenizer), ==, 2);
  /* 30 layers × 3 KV heads × 64 × 2 (K, V) × 2 bytes = 23040 bytes per token. */
  g_assert_cmpint (hone_model_kv_bytes (c, 8192, 2), ==, (gint64) 23040 * 8192);
}

int
main (int argc, char **argv)
{
  static const GenCase cases[] = {
    { HONE_ARCH_LLAMA, HONE_DTYPE_F32, FALSE, 1 },
    { HONE_ARCH_LLAMA, HONE_DTYPE_F16, TRUE, 1 },
    { HONE_ARCH_LLAMA, HONE_DTYPE_BF16, FALSE, 2 },
    { HONE_ARCH_LLAMA, HONE_DTYPE_Q8_0, TRUE, 1 },
    { HONE_ARCH_LLAMA, HONE_DTYPE_Q4_0, FALSE, 1 },
    { HONE_ARCH_LLAMA, HONE_DTYPE_Q4_1, TRUE, 1 },
    { HONE_ARCH_LLAMA, HONE_DTYPE_Q4_K, FALSE, 1 },
    { HONE_ARCH_LLAMA, HONE_DTYPE_Q6_K, FALSE, 1 },
    { HONE_ARCH_QWEN2, HONE_DTYPE_F32, TRUE, 1 },
    { HONE_ARCH_QWEN2, HONE_DTYPE_Q4_K, FALSE, 2 },
    { HONE_ARCH_QWEN3, HONE_DTYPE_BF16, TRUE, 1 },
    { HONE_ARCH_QWEN3, HONE_DTYPE_Q6_K, FALSE, 1 },
  };
  static const char *const arch_names[] = { "llama", "qwen2", "qwen3" };

  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/model/config-json/good", test_config_json_good);
  g_test_add_func ("/model/config-json/bad", test_config_json_bad);
  g_test_add_func ("/model/config-gguf/bad", test_config_gguf_bad);
  g_test_add_func ("/model/tensor-names", test_tensor_names);
  g_test_add_func ("/model/permute/inverse", test_permute_inverse);
  g_test_add_func ("/model/permute/pair-fixture", test_pair_fixture);
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *name = g_strdup_printf ("/model/generated/%s-%s%s%s", arch_names[cases[i].arch],
                                               hone_dtype_name (cases[i].type), cases[i].tied ? "-tied" : "",
                                               cases[i].shards > 1 ? "-sharded" : "");
      g_test_add_data_func (name, &cases[i], test_generated);
    }
  g_test_add_func ("/model/open-paths", test_open_paths);
  g_test_add_func ("/model/bad-models", test_bad_models);
  g_test_add_func ("/model/default", test_default_model);
  return g_test_run ();
}
