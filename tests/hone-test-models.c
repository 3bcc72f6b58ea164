/* hone-test-models.c — tiny random models for tests (see the header). */
#include "hone-test-models.h"
#include "hone-error.h"
#include "hone-gguf.h"
#include "hone-safetensors.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>
#include <glib/gstdio.h>

/* ---- random numbers: splitmix64, so any language can reproduce them ---- */

static guint64
splitmix64 (guint64 *state)
{
  guint64 z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float
uniform (guint64 *state)
{
  return (float) ((double) (splitmix64 (state) >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

static guint64
name_hash (const char *s)
{
  guint64 h = 1469598103934665603ull;   /* FNV-1a */
  for (; *s; s++)
    h = (h ^ (guint8) *s) * 1099511628211ull;
  return h;
}

/* ---- spec -------------------------------------------------------------- */

static const char *
arch_name (HoneArch arch)
{
  switch (arch)
    {
    case HONE_ARCH_QWEN2: return "qwen2";
    case HONE_ARCH_QWEN3: return "qwen3";
    case HONE_ARCH_LLAMA: default: return "llama";
    }
}

static gboolean
is_float_type (HoneDType t)
{
  return t == HONE_DTYPE_F32 || t == HONE_DTYPE_F16 || t == HONE_DTYPE_BF16;
}

void
hone_test_model_spec_init (HoneTestModelSpec *spec, HoneArch arch, HoneDType weight_type)
{
  memset (spec, 0, sizeof *spec);
  spec->arch = arch;
  spec->weight_type = weight_type;
  spec->embd_type = weight_type;
  spec->n_layers = 2;
  spec->hidden = 256;
  spec->n_heads = 4;
  spec->n_kv_heads = 2;
  spec->head_dim = 64;
  spec->ffn = 512;
  spec->vocab = 300;
  spec->max_context = 512;
  spec->rope_theta = 10000.0f;
  spec->rms_eps = arch == HONE_ARCH_LLAMA ? 1e-5f : 1e-6f;
  spec->hf_shards = 1;
  spec->seed = 42;
}

static void
spec_name (const HoneTestModelSpec *spec, char *out, gsize size)
{
  if (spec->name[0])
    g_strlcpy (out, spec->name, size);
  else
    {
      g_autofree char *t = g_ascii_strdown (hone_dtype_name (spec->weight_type), -1);
      g_snprintf (out, size, "tiny-%s-%s", arch_name (spec->arch), t);
    }
}

/* ---- tokenizer pieces -------------------------------------------------- */

#define N_SPECIALS 3
static const char *const specials[N_SPECIALS] = { "<|endoftext|>", "<|im_start|>", "<|im_end|>" };

/* Merges as raw bytes (left, right); each side is a byte or an earlier result. */
static const char *const merge_pairs[][2] = {
  { " ", "t" }, { "h", "e" }, { "i", "n" }, { "e", "r" }, { "a", "n" }, { " ", "a" }, { "o", "n" },
  { "r", "e" }, { " ", "s" }, { "e", "n" }, { "a", "t" }, { "o", "r" }, { " t", "he" }, { "e", "s" },
  { " ", "w" }, { "i", "s" }, { "i", "t" }, { " ", "o" }, { " ", "c" }, { " ", "b" }, { "in", "g" },
  { " ", "f" }, { " ", "p" }, { "a", "l" }, { " ", "m" }, { "e", "d" }, { "l", "l" }, { "o", "u" },
  { " ", "h" }, { "a", "r" }, { " ", "d" }, { "i", "c" }, { " ", "i" }, { " a", "n" }, { " o", "f" },
  { " ", "l" }, { " t", "o" }, { " ", "n" }, { "l", "e" }, { " ", "in" }, { "s", "t" },
};

static const char chatml_template[] =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
  "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

const char *
hone_test_model_chat_template (void)
{
  return chatml_template;
}

const char *
hone_test_byte_token (guint8 b)
{
  static char table[256][4];
  static gsize done = 0;

  if (g_once_init_enter (&done))
    {
      /* GPT-2 bytes_to_unicode: printable bytes map to themselves, the
       * others to 256, 257, … in byte order. */
      int n = 0;
      for (int i = 0; i < 256; i++)
        {
          gunichar cp;
          if ((i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE && i <= 0xFF))
            cp = (gunichar) i;
          else
            cp = 256 + (gunichar) n++;
          table[i][g_unichar_to_utf8 (cp, table[i])] = '\0';
        }
      g_once_init_leave (&done, 1);
    }
  return table[b];
}

static char *
encode_bytes (const char *raw)
{
  GString *s = g_string_new (NULL);
  for (const char *p = raw; *p; p++)
    g_string_append (s, hone_test_byte_token ((guint8) *p));
  return g_string_free (s, FALSE);
}

/* Token texts in id order and the merges ("left right") in rank order. */
static void
build_vocab (int vocab, GPtrArray *tokens, GPtrArray *merges)
{
  int n_merges = (int) G_N_ELEMENTS (merge_pairs);

  if (n_merges > vocab - N_SPECIALS - 256)
    n_merges = MAX (vocab - N_SPECIALS - 256, 0);
  for (int i = 0; i < N_SPECIALS; i++)
    g_ptr_array_add (tokens, g_strdup (specials[i]));
  for (int b = 0; b < 256; b++)
    g_ptr_array_add (tokens, g_strdup (hone_test_byte_token ((guint8) b)));
  for (int i = 0; i < n_merges; i++)
    {
      g_autofree char *l = encode_bytes (merge_pairs[i][0]);
      g_autofree char *r = encode_bytes (merge_pairs[i][1]);
      g_ptr_array_add (merges, g_strdup_printf ("%s %s", l, r));
      g_ptr_array_add (tokens, g_strconcat (l, r, NULL));
    }
  for (int i = 0; (int) tokens->len < vocab; i++)
    g_ptr_array_add (tokens, g_strdup_printf ("<|unused_%d|>", i));
}

/* ---- weights ----------------------------------------------------------- */

/* Round values to what @type stores (row by row); keeps the stored bytes in
 * @out when given (quantizing twice is not idempotent for K-quants). */
static void
snap (float *data, int64_t ne0, int64_t rows, HoneDType type, guint8 **out)
{
  gsize rb = hone_dtype_row_bytes (type, ne0);
  guint8 *buf = g_malloc (rb * (gsize) rows);

  for (int64_t r = 0; r < rows; r++)
    {
      hone_quantize_row (type, data + r * ne0, buf + (gsize) r * rb, ne0);
      hone_dequantize_row (type, buf + (gsize) r * rb, data + r * ne0, ne0);
    }
  if (out)
    *out = buf;
  else
    g_free (buf);
}

typedef enum { INIT_LINEAR, INIT_EMBD, INIT_NORM, INIT_BIAS } InitKind;

static void
make_tensor (HoneTestTensor *t, const HoneTestModelSpec *spec, const char *gguf_name, const char *hf_name,
             int64_t ne0, int64_t ne1, InitKind kind, HoneDType snap_type)
{
  guint64 state;
  int64_t n = ne0 * (ne1 ? ne1 : 1);
  float scale;

  t->name = g_strdup (gguf_name);
  t->hf_name = g_strdup (hf_name);
  t->n_dims = ne1 ? 2 : 1;
  t->ne[0] = ne0;
  t->ne[1] = ne1 ? ne1 : 1;
  t->data = g_new (float, n);
  state = spec->seed ^ name_hash (hf_name);
  /* Uniform weights of unit-variance output for linears, norms near 1. */
  scale = kind == INIT_LINEAR ? sqrtf (3.0f / (float) ne0) : kind == INIT_EMBD ? 1.0f : kind == INIT_BIAS ? 0.1f : 0.2f;
  for (int64_t i = 0; i < n; i++)
    t->data[i] = (kind == INIT_NORM ? 1.0f : 0.0f) + scale * uniform (&state);
  if (t->n_dims == 2)
    {
      t->gguf_type = snap_type;
      snap (t->data, ne0, t->ne[1], snap_type, &t->gguf_data);
    }
  else
    {
      t->gguf_type = HONE_DTYPE_F32;
      snap (t->data, ne0, 1, snap_type, NULL);
    }
}

static void
tensor_clear (HoneTestTensor *t)
{
  g_free (t->name);
  g_free (t->hf_name);
  g_free (t->data);
  g_free (t->gguf_data);
}

HoneTestModel *
hone_test_model_new (const HoneTestModelSpec *spec)
{
  HoneTestModel *m = g_new0 (HoneTestModel, 1);
  HoneModelConfig *c = &m->config;
  HoneDType vec_type = is_float_type (spec->weight_type) ? spec->weight_type : HONE_DTYPE_F32;
  int64_t q = (int64_t) spec->n_heads * spec->head_dim, kv = (int64_t) spec->n_kv_heads * spec->head_dim;

  m->spec = *spec;
  spec_name (spec, m->spec.name, sizeof m->spec.name);

  c->arch = spec->arch;
  g_strlcpy (c->arch_name, arch_name (spec->arch), sizeof c->arch_name);
  c->n_layers = spec->n_layers;
  c->hidden = spec->hidden;
  c->n_heads = spec->n_heads;
  c->n_kv_heads = spec->n_kv_heads;
  c->head_dim = spec->head_dim;
  c->ffn = spec->ffn;
  c->vocab = spec->vocab;
  c->max_context = spec->max_context;
  c->rope_theta = spec->rope_theta;
  c->rope_pairing = HONE_ROPE_PAIRS_HALF;
  c->rms_eps = spec->rms_eps;
  c->tied_embeddings = spec->tied;
  c->qkv_bias = spec->arch == HONE_ARCH_QWEN2;
  c->qk_norm = spec->arch == HONE_ARCH_QWEN3;

  make_tensor (&m->tok_embd, spec, "token_embd.weight", "model.embed_tokens.weight",
               spec->hidden, spec->vocab, INIT_EMBD, m->spec.embd_type);
  make_tensor (&m->output_norm, spec, "output_norm.weight", "model.norm.weight",
               spec->hidden, 0, INIT_NORM, vec_type);
  if (!spec->tied)
    make_tensor (&m->output, spec, "output.weight", "lm_head.weight",
                 spec->hidden, spec->vocab, INIT_LINEAR, spec->weight_type);

  m->layers = g_new0 (HoneTestLayer, spec->n_layers);
  for (int i = 0; i < spec->n_layers; i++)
    {
      HoneTestLayer *l = &m->layers[i];
      HoneDType wt = spec->weight_type;
#define T(field, gguf, hf, ne0, ne1, kind, type) \
      do { \
        g_autofree char *gn = g_strdup_printf ("blk.%d." gguf, i); \
        g_autofree char *hn = g_strdup_printf ("model.layers.%d." hf, i); \
        make_tensor (&l->field, spec, gn, hn, ne0, ne1, kind, type); \
      } while (0)
      T (attn_norm, "attn_norm.weight", "input_layernorm.weight", spec->hidden, 0, INIT_NORM, vec_type);
      T (wq, "attn_q.weight", "self_attn.q_proj.weight", spec->hidden, q, INIT_LINEAR, wt);
      T (wk, "attn_k.weight", "self_attn.k_proj.weight", spec->hidden, kv, INIT_LINEAR, wt);
      T (wv, "attn_v.weight", "self_attn.v_proj.weight", spec->hidden, kv, INIT_LINEAR, wt);
      T (wo, "attn_output.weight", "self_attn.o_proj.weight", q, spec->hidden, INIT_LINEAR, wt);
      if (c->qkv_bias)
        {
          T (bq, "attn_q.bias", "self_attn.q_proj.bias", q, 0, INIT_BIAS, vec_type);
          T (bk, "attn_k.bias", "self_attn.k_proj.bias", kv, 0, INIT_BIAS, vec_type);
          T (bv, "attn_v.bias", "self_attn.v_proj.bias", kv, 0, INIT_BIAS, vec_type);
        }
      if (c->qk_norm)
        {
          T (q_norm, "attn_q_norm.weight", "self_attn.q_norm.weight", spec->head_dim, 0, INIT_NORM, vec_type);
          T (k_norm, "attn_k_norm.weight", "self_attn.k_norm.weight", spec->head_dim, 0, INIT_NORM, vec_type);
        }
      T (ffn_norm, "ffn_norm.weight", "post_attention_layernorm.weight", spec->hidden, 0, INIT_NORM, vec_type);
      T (w_gate, "ffn_gate.weight", "mlp.gate_proj.weight", spec->hidden, spec->ffn, INIT_LINEAR, wt);
      T (w_up, "ffn_up.weight", "mlp.up_proj.weight", spec->hidden, spec->ffn, INIT_LINEAR, wt);
      T (w_down, "ffn_down.weight", "mlp.down_proj.weight", spec->ffn, spec->hidden, INIT_LINEAR, wt);
#undef T
    }
  return m;
}

#define N_LAYER_TENSORS 14

static HoneTestTensor *
layer_tensor (HoneTestLayer *l, int i)
{
  HoneTestTensor *all[N_LAYER_TENSORS] = {
    &l->attn_norm, &l->wq, &l->wk, &l->wv, &l->wo, &l->bq, &l->bk, &l->bv,
    &l->q_norm, &l->k_norm, &l->ffn_norm, &l->w_gate, &l->w_up, &l->w_down,
  };
  return all[i];
}

void
hone_test_model_free (HoneTestModel *m)
{
  if (m == NULL)
    return;
  tensor_clear (&m->tok_embd);
  tensor_clear (&m->output_norm);
  tensor_clear (&m->output);
  for (int i = 0; i < m->spec.n_layers; i++)
    for (int j = 0; j < N_LAYER_TENSORS; j++)
      tensor_clear (layer_tensor (&m->layers[i], j));
  g_free (m->layers);
  g_free (m);
}

/* All present tensors in file order. */
static GPtrArray *
tensor_list (const HoneTestModel *m)
{
  GPtrArray *a = g_ptr_array_new ();
  g_ptr_array_add (a, (gpointer) &m->tok_embd);
  for (int i = 0; i < m->spec.n_layers; i++)
    for (int j = 0; j < N_LAYER_TENSORS; j++)
      {
        HoneTestTensor *t = layer_tensor (&m->layers[i], j);
        if (t->data)
          g_ptr_array_add (a, t);
      }
  g_ptr_array_add (a, (gpointer) &m->output_norm);
  if (m->output.data)
    g_ptr_array_add (a, (gpointer) &m->output);
  return a;
}

/* ---- GGUF -------------------------------------------------------------- */

static gboolean
is_qk (const HoneTestModel *m, const HoneTestTensor *t, int *n_heads)
{
  for (int i = 0; i < m->spec.n_layers; i++)
    {
      if (t == &m->layers[i].wq || t == &m->layers[i].bq)
        {
          *n_heads = m->spec.n_heads;
          return TRUE;
        }
      if (t == &m->layers[i].wk || t == &m->layers[i].bk)
        {
          *n_heads = m->spec.n_kv_heads;
          return TRUE;
        }
    }
  return FALSE;
}

gboolean
hone_test_model_save_gguf (const HoneTestModel *m, const char *path, GError **error)
{
  g_autoptr(HoneGgufWriter) w = hone_gguf_writer_new ();
  g_autoptr(GPtrArray) tokens = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) merges = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) list = tensor_list (m);
  g_autofree gint32 *types = NULL;
  const HoneTestModelSpec *s = &m->spec;
  const char *arch = m->config.arch_name;
  gboolean permute = s->arch == HONE_ARCH_LLAMA;

#define KEY(suffix) (g_snprintf (key, sizeof key, "%s." suffix, arch), key)
  char key[128];

  hone_gguf_writer_add_string (w, "general.architecture", arch, -1);
  hone_gguf_writer_add_string (w, "general.name", s->name, -1);
  hone_gguf_writer_add_u32 (w, KEY ("block_count"), (guint32) s->n_layers);
  hone_gguf_writer_add_u32 (w, KEY ("context_length"), (guint32) s->max_context);
  hone_gguf_writer_add_u32 (w, KEY ("embedding_length"), (guint32) s->hidden);
  hone_gguf_writer_add_u32 (w, KEY ("feed_forward_length"), (guint32) s->ffn);
  hone_gguf_writer_add_u32 (w, KEY ("attention.head_count"), (guint32) s->n_heads);
  hone_gguf_writer_add_u32 (w, KEY ("attention.head_count_kv"), (guint32) s->n_kv_heads);
  hone_gguf_writer_add_u32 (w, KEY ("attention.key_length"), (guint32) s->head_dim);
  hone_gguf_writer_add_u32 (w, KEY ("attention.value_length"), (guint32) s->head_dim);
  hone_gguf_writer_add_u32 (w, KEY ("rope.dimension_count"), (guint32) s->head_dim);
  hone_gguf_writer_add_f32 (w, KEY ("rope.freq_base"), s->rope_theta);
  hone_gguf_writer_add_f32 (w, KEY ("attention.layer_norm_rms_epsilon"), s->rms_eps);
  hone_gguf_writer_add_u32 (w, KEY ("vocab_size"), (guint32) s->vocab);
#undef KEY

  build_vocab (s->vocab, tokens, merges);
  types = g_new (gint32, tokens->len);
  for (guint i = 0; i < tokens->len; i++)
    types[i] = i < N_SPECIALS ? 3 /* control */ : 1 /* normal */;
  hone_gguf_writer_add_string (w, "tokenizer.ggml.model", "gpt2", -1);
  hone_gguf_writer_add_string (w, "tokenizer.ggml.pre", "gpt-2", -1);
  hone_gguf_writer_add_string_array (w, "tokenizer.ggml.tokens", (const char *const *) tokens->pdata, NULL, tokens->len);
  hone_gguf_writer_add_array (w, "tokenizer.ggml.token_type", HONE_GGUF_INT32, types, tokens->len);
  hone_gguf_writer_add_string_array (w, "tokenizer.ggml.merges", (const char *const *) merges->pdata, NULL, merges->len);
  hone_gguf_writer_add_u32 (w, "tokenizer.ggml.bos_token_id", 1);
  hone_gguf_writer_add_u32 (w, "tokenizer.ggml.eos_token_id", 2);
  hone_gguf_writer_add_u32 (w, "tokenizer.ggml.padding_token_id", 0);
  hone_gguf_writer_add_bool (w, "tokenizer.ggml.add_bos_token", FALSE);
  hone_gguf_writer_add_string (w, "tokenizer.chat_template", chatml_template, -1);

  for (guint i = 0; i < list->len; i++)
    {
      const HoneTestTensor *t = g_ptr_array_index (list, i);
      gsize rb = hone_dtype_row_bytes (t->gguf_type, t->ne[0]);
      gsize rows = t->n_dims == 2 ? (gsize) t->ne[1] : 1;
      g_autofree guint8 *buf = g_malloc (rb * rows);
      int n_heads;

      if (t->n_dims == 2)
        memcpy (buf, t->gguf_data, rb * rows);
      else
        hone_quantize_row (HONE_DTYPE_F32, t->data, buf, t->ne[0]);
      if (permute && is_qk (m, t, &n_heads))
        {
          /* llama.cpp's converter stores llama Q/K rows in adjacent-pair order. */
          g_autofree guint8 *hf = g_memdup2 (buf, rb * rows);
          if (t->n_dims == 2)
            hone_model_permute_qk_rows (buf, hf, n_heads, s->head_dim, rb, TRUE);
          else
            hone_model_permute_qk_rows (buf, hf, n_heads, s->head_dim, sizeof (float), TRUE);
        }
      if (!hone_gguf_writer_add_tensor (w, t->name, t->gguf_type, t->n_dims, t->ne, buf, rb * rows, error))
        return FALSE;
    }
  return hone_gguf_writer_write (w, path, error);
}

char *
hone_test_model_write_gguf (const char *dir, const HoneTestModelSpec *spec, GError **error)
{
  g_autoptr(HoneTestModel) m = hone_test_model_new (spec);
  g_autofree char *file = g_strconcat (m->spec.name, ".gguf", NULL);
  char *path = g_build_filename (dir, file, NULL);

  if (!hone_test_model_save_gguf (m, path, error))
    {
      g_free (path);
      return NULL;
    }
  return path;
}

/* ---- HF folder --------------------------------------------------------- */

static gboolean
write_json (JsonBuilder *b, const char *dir, const char *file, GError **error)
{
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) root = json_builder_get_root (b);
  g_autofree char *path = g_build_filename (dir, file, NULL);
  g_autofree char *text = NULL;
  g_autoptr(GError) local = NULL;

  json_generator_set_root (gen, root);
  json_generator_set_pretty (gen, TRUE);
  text = json_generator_to_data (gen, NULL);
  if (!g_file_set_contents (path, text, -1, &local))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, "%s: %s", path, local->message);
      return FALSE;
    }
  return TRUE;
}

static gboolean
write_config_json (const HoneTestModel *m, const char *dir, GError **error)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  const HoneTestModelSpec *s = &m->spec;
  static const char *const archs[] = { "LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM" };
  HoneDType hf_type = is_float_type (s->weight_type) ? s->weight_type : HONE_DTYPE_F32;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "architectures");
  json_builder_begin_array (b);
  json_builder_add_string_value (b, archs[s->arch]);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "model_type");
  json_builder_add_string_value (b, m->config.arch_name);
#define INT(k, v) json_builder_set_member_name (b, k); json_builder_add_int_value (b, v)
  INT ("hidden_size", s->hidden);
  INT ("intermediate_size", s->ffn);
  INT ("num_hidden_layers", s->n_layers);
  INT ("num_attention_heads", s->n_heads);
  INT ("num_key_value_heads", s->n_kv_heads);
  INT ("head_dim", s->head_dim);
  INT ("max_position_embeddings", s->max_context);
  INT ("vocab_size", s->vocab);
  INT ("bos_token_id", 1);
  INT ("eos_token_id", 2);
#undef INT
  json_builder_set_member_name (b, "rms_norm_eps");
  json_builder_add_double_value (b, s->rms_eps);
  json_builder_set_member_name (b, "rope_theta");
  json_builder_add_double_value (b, s->rope_theta);
  json_builder_set_member_name (b, "tie_word_embeddings");
  json_builder_add_boolean_value (b, s->tied);
  json_builder_set_member_name (b, "hidden_act");
  json_builder_add_string_value (b, "silu");
  json_builder_set_member_name (b, "torch_dtype");
  json_builder_add_string_value (b, hf_type == HONE_DTYPE_F16 ? "float16" : hf_type == HONE_DTYPE_BF16 ? "bfloat16" : "float32");
  json_builder_set_member_name (b, "rope_scaling");
  json_builder_add_null_value (b);
  if (s->arch == HONE_ARCH_LLAMA || s->arch == HONE_ARCH_QWEN3)
    {
      json_builder_set_member_name (b, "attention_bias");
      json_builder_add_boolean_value (b, FALSE);
    }
  json_builder_end_object (b);
  return write_json (b, dir, "config.json", error);
}

static void
add_special_token (JsonBuilder *b, int id, const char *content)
{
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "id");
  json_builder_add_int_value (b, id);
  json_builder_set_member_name (b, "content");
  json_builder_add_string_value (b, content);
  json_builder_set_member_name (b, "single_word");
  json_builder_add_boolean_value (b, FALSE);
  json_builder_set_member_name (b, "lstrip");
  json_builder_add_boolean_value (b, FALSE);
  json_builder_set_member_name (b, "rstrip");
  json_builder_add_boolean_value (b, FALSE);
  json_builder_set_member_name (b, "normalized");
  json_builder_add_boolean_value (b, FALSE);
  json_builder_set_member_name (b, "special");
  json_builder_add_boolean_value (b, TRUE);
  json_builder_end_object (b);
}

static void
add_byte_level (JsonBuilder *b, const char *member, gboolean add_prefix_space)
{
  json_builder_set_member_name (b, member);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "type");
  json_builder_add_string_value (b, "ByteLevel");
  json_builder_set_member_name (b, "add_prefix_space");
  json_builder_add_boolean_value (b, add_prefix_space);
  json_builder_set_member_name (b, "trim_offsets");
  json_builder_add_boolean_value (b, TRUE);
  json_builder_set_member_name (b, "use_regex");
  json_builder_add_boolean_value (b, TRUE);
  json_builder_end_object (b);
}

static gboolean
write_tokenizer_files (const HoneTestModel *m, const char *dir, GError **error)
{
  g_autoptr(GPtrArray) tokens = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) merges = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonBuilder) c = json_builder_new ();

  build_vocab (m->spec.vocab, tokens, merges);

  /* tokenizer.json, as HF tokenizers saves a GPT-2 style BPE. */
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "version");
  json_builder_add_string_value (b, "1.0");
  json_builder_set_member_name (b, "truncation");
  json_builder_add_null_value (b);
  json_builder_set_member_name (b, "padding");
  json_builder_add_null_value (b);
  json_builder_set_member_name (b, "added_tokens");
  json_builder_begin_array (b);
  for (int i = 0; i < N_SPECIALS; i++)
    add_special_token (b, i, specials[i]);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "normalizer");
  json_builder_add_null_value (b);
  add_byte_level (b, "pre_tokenizer", FALSE);
  add_byte_level (b, "post_processor", FALSE);
  add_byte_level (b, "decoder", TRUE);
  json_builder_set_member_name (b, "model");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "type");
  json_builder_add_string_value (b, "BPE");
  json_builder_set_member_name (b, "dropout");
  json_builder_add_null_value (b);
  json_builder_set_member_name (b, "unk_token");
  json_builder_add_null_value (b);
  json_builder_set_member_name (b, "continuing_subword_prefix");
  json_builder_add_null_value (b);
  json_builder_set_member_name (b, "end_of_word_suffix");
  json_builder_add_null_value (b);
  json_builder_set_member_name (b, "fuse_unk");
  json_builder_add_boolean_value (b, FALSE);
  json_builder_set_member_name (b, "byte_fallback");
  json_builder_add_boolean_value (b, FALSE);
  json_builder_set_member_name (b, "vocab");
  json_builder_begin_object (b);
  for (guint i = 0; i < tokens->len; i++)
    {
      json_builder_set_member_name (b, g_ptr_array_index (tokens, i));
      json_builder_add_int_value (b, i);
    }
  json_builder_end_object (b);
  json_builder_set_member_name (b, "merges");
  json_builder_begin_array (b);
  for (guint i = 0; i < merges->len; i++)
    json_builder_add_string_value (b, g_ptr_array_index (merges, i));
  json_builder_end_array (b);
  json_builder_end_object (b);
  json_builder_end_object (b);
  if (!write_json (b, dir, "tokenizer.json", error))
    return FALSE;

  /* tokenizer_config.json */
  json_builder_begin_object (c);
  json_builder_set_member_name (c, "add_bos_token");
  json_builder_add_boolean_value (c, FALSE);
  json_builder_set_member_name (c, "add_eos_token");
  json_builder_add_boolean_value (c, FALSE);
  json_builder_set_member_name (c, "added_tokens_decoder");
  json_builder_begin_object (c);
  for (int i = 0; i < N_SPECIALS; i++)
    {
      char id[16];
      g_snprintf (id, sizeof id, "%d", i);
      json_builder_set_member_name (c, id);
      json_builder_begin_object (c);
      json_builder_set_member_name (c, "content");
      json_builder_add_string_value (c, specials[i]);
      json_builder_set_member_name (c, "lstrip");
      json_builder_add_boolean_value (c, FALSE);
      json_builder_set_member_name (c, "normalized");
      json_builder_add_boolean_value (c, FALSE);
      json_builder_set_member_name (c, "rstrip");
      json_builder_add_boolean_value (c, FALSE);
      json_builder_set_member_name (c, "single_word");
      json_builder_add_boolean_value (c, FALSE);
      json_builder_set_member_name (c, "special");
      json_builder_add_boolean_value (c, TRUE);
      json_builder_end_object (c);
    }
  json_builder_end_object (c);
  json_builder_set_member_name (c, "bos_token");
  json_builder_add_string_value (c, specials[1]);
  json_builder_set_member_name (c, "eos_token");
  json_builder_add_string_value (c, specials[2]);
  json_builder_set_member_name (c, "pad_token");
  json_builder_add_string_value (c, specials[0]);
  json_builder_set_member_name (c, "unk_token");
  json_builder_add_null_value (c);
  json_builder_set_member_name (c, "model_max_length");
  json_builder_add_int_value (c, m->spec.max_context);
  json_builder_set_member_name (c, "tokenizer_class");
  json_builder_add_string_value (c, "GPT2Tokenizer");
  json_builder_set_member_name (c, "clean_up_tokenization_spaces");
  json_builder_add_boolean_value (c, FALSE);
  json_builder_set_member_name (c, "chat_template");
  json_builder_add_string_value (c, chatml_template);
  json_builder_end_object (c);
  return write_json (c, dir, "tokenizer_config.json", error);
}

static gboolean
add_hf_tensor (HoneSafetensorsWriter *w, const HoneTestTensor *t, HoneDType type, GError **error)
{
  int64_t n = t->ne[0] * t->ne[1];
  gsize bytes = hone_dtype_row_bytes (type, n);
  g_autofree guint8 *buf = g_malloc (bytes);

  hone_quantize_row (type, t->data, buf, n);
  return hone_safetensors_writer_add_tensor (w, t->hf_name, type, t->n_dims, t->ne, buf, bytes, error);
}

gboolean
hone_test_model_save_hf (const HoneTestModel *m, const char *dir, GError **error)
{
  g_autoptr(GPtrArray) list = tensor_list (m);
  HoneDType vec_type = is_float_type (m->spec.weight_type) ? m->spec.weight_type : HONE_DTYPE_F32;
  int shards = CLAMP (m->spec.hf_shards, 1, 2);
  g_autoptr(JsonBuilder) index = json_builder_new ();

  if (g_mkdir_with_parents (dir, 0755) != 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, "cannot create %s", dir);
      return FALSE;
    }
  if (!write_config_json (m, dir, error) || !write_tokenizer_files (m, dir, error))
    return FALSE;

  json_builder_begin_object (index);
  json_builder_set_member_name (index, "metadata");
  json_builder_begin_object (index);
  json_builder_end_object (index);
  json_builder_set_member_name (index, "weight_map");
  json_builder_begin_object (index);
  for (int s = 0; s < shards; s++)
    {
      g_autoptr(HoneSafetensorsWriter) w = hone_safetensors_writer_new ();
      g_autofree char *file = shards == 1 ? g_strdup ("model.safetensors")
                                          : g_strdup_printf ("model-%05d-of-%05d.safetensors", s + 1, shards);
      g_autofree char *path = g_build_filename (dir, file, NULL);

      /* Shard s holds every other tensor, so each shard mixes kinds. */
      for (guint i = (guint) s; i < list->len; i += (guint) shards)
        {
          const HoneTestTensor *t = g_ptr_array_index (list, i);
          HoneDType type = t->n_dims == 1 ? vec_type
                           : is_float_type (t == &m->tok_embd ? m->spec.embd_type : m->spec.weight_type)
                               ? (t == &m->tok_embd ? m->spec.embd_type : m->spec.weight_type) : HONE_DTYPE_F32;
          if (!add_hf_tensor (w, t, type, error))
            return FALSE;
          json_builder_set_member_name (index, t->hf_name);
          json_builder_add_string_value (index, file);
        }
      if (!hone_safetensors_writer_write (w, path, error))
        return FALSE;
    }
  json_builder_end_object (index);
  json_builder_end_object (index);
  if (shards > 1 && !write_json (index, dir, "model.safetensors.index.json", error))
    return FALSE;
  return TRUE;
}

char *
hone_test_model_write_hf (const char *dir, const HoneTestModelSpec *spec, GError **error)
{
  g_autoptr(HoneTestModel) m = hone_test_model_new (spec);
  g_autofree char *sub = g_strconcat (m->spec.name, "-hf", NULL);
  char *path = g_build_filename (dir, sub, NULL);

  if (!hone_test_model_save_hf (m, path, error))
    {
      g_free (path);
      return NULL;
    }
  return path;
}

void
hone_test_rm_rf (const char *path)
{
  GDir *d;
  const char *name;

  if (path == NULL)
    return;
  if (!g_file_test (path, G_FILE_TEST_IS_DIR) || g_file_test (path, G_FILE_TEST_IS_SYMLINK))
    {
      g_unlink (path);
      return;
    }
  d = g_dir_open (path, 0, NULL);
  while (d && (name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *child = g_build_filename (path, name, NULL);
      hone_test_rm_rf (child);
    }
  if (d)
    g_dir_close (d);
  g_rmdir (path);
}
