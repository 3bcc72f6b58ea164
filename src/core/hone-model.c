/* hone-model.c — open a model (GGUF file or HF folder): config, weight views,
 * tokenizer and chat template.
 *
 * Weights stay in their stored type and order inside the mapping; this file
 * only finds each tensor by name, checks its type and shape against the
 * config, and records views in HoneModel.
 */
#include <inttypes.h>
#include "hone-model.h"
#include "hone-awq-load.h"
#include "hone-error.h"
#include "hone-gguf.h"
#include "hone-i18n.h"
#include "hone-json.h"
#include "hone-safetensors.h"
#include "hone-tokenizer.h"

#include <json-glib/json-glib.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* An AWQ linear whose Q4Z rows are made only when asked (hone_model_read_rows,
 * hone_model_materialize): its tensor in HoneModel (data NULL until then)
 * and its checkpoint tensors. */
typedef struct {
  HoneTensor *dst;
  HoneAwqSource src;
} Deferred;

typedef struct {
  HoneGguf *gguf;
  HoneSafetensors *st;
  GPtrArray *owned;           /* buffers made at load (AWQ → Q4Z repacks) and their names */
  GArray *deferred;           /* Deferred: AWQ linears not repacked yet (HONE_MODEL_OPEN_DEFER_REPACK) */
  GMutex lock;                /* guards the deferred tensors' data and the owned list after opening */
  gboolean defer;             /* opening: record AWQ linears instead of repacking them */
} ModelPriv;

/* ---- tensor names ------------------------------------------------------ */

typedef struct {
  const char *what;
  const char *gguf;           /* printf format with the layer number, if per layer */
  const char *hf;
  gboolean per_layer;
} TensorName;

static const TensorName tensor_names[] = {
  { "tok_embd", "token_embd.weight", "model.embed_tokens.weight", FALSE },
  { "rope_freqs", "rope_freqs.weight", "rope_freqs.weight", FALSE },
  { "output_norm", "output_norm.weight", "model.norm.weight", FALSE },
  { "output", "output.weight", "lm_head.weight", FALSE },
  { "attn_norm", "blk.%d.attn_norm.weight", "model.layers.%d.input_layernorm.weight", TRUE },
  { "wq", "blk.%d.attn_q.weight", "model.layers.%d.self_attn.q_proj.weight", TRUE },
  { "wk", "blk.%d.attn_k.weight", "model.layers.%d.self_attn.k_proj.weight", TRUE },
  { "wv", "blk.%d.attn_v.weight", "model.layers.%d.self_attn.v_proj.weight", TRUE },
  { "wo", "blk.%d.attn_output.weight", "model.layers.%d.self_attn.o_proj.weight", TRUE },
  { "bq", "blk.%d.attn_q.bias", "model.layers.%d.self_attn.q_proj.bias", TRUE },
  { "bk", "blk.%d.attn_k.bias", "model.layers.%d.self_attn.k_proj.bias", TRUE },
  { "bv", "blk.%d.attn_v.bias", "model.layers.%d.self_attn.v_proj.bias", TRUE },
  { "q_norm", "blk.%d.attn_q_norm.weight", "model.layers.%d.self_attn.q_norm.weight", TRUE },
  { "k_norm", "blk.%d.attn_k_norm.weight", "model.layers.%d.self_attn.k_norm.weight", TRUE },
  { "ffn_norm", "blk.%d.ffn_norm.weight", "model.layers.%d.post_attention_layernorm.weight", TRUE },
  { "w_gate", "blk.%d.ffn_gate.weight", "model.layers.%d.mlp.gate_proj.weight", TRUE },
  { "w_up", "blk.%d.ffn_up.weight", "model.layers.%d.mlp.up_proj.weight", TRUE },
  { "w_down", "blk.%d.ffn_down.weight", "model.layers.%d.mlp.down_proj.weight", TRUE },
};

char *
hone_model_tensor_name (HoneModelSource source, const char *what, int layer)
{
  for (gsize i = 0; i < G_N_ELEMENTS (tensor_names); i++)
    if (strcmp (tensor_names[i].what, what) == 0)
      {
        const char *fmt = source == HONE_MODEL_SOURCE_GGUF ? tensor_names[i].gguf : tensor_names[i].hf;
        if (!tensor_names[i].per_layer)
          return g_strdup (fmt);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        return g_strdup_printf (fmt, layer);
#pragma GCC diagnostic pop
      }
  return NULL;
}

/* ---- config from GGUF metadata ----------------------------------------- */

static gboolean
gguf_int (const HoneGguf *gguf, const char *arch, const char *suffix, int *out, gboolean required, GError **error)
{
  g_autofree char *key = g_strdup_printf ("%s.%s", arch, suffix);
  gint64 v;
  int idx = hone_gguf_find_kv (gguf, key);

  if (idx < 0)
    {
      if (!required)
        return TRUE;
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT, _("GGUF metadata “%s” is missing"), key);
      return FALSE;
    }
  if (!hone_gguf_get_i64 (gguf, key, &v) || v < G_MININT || v > G_MAXINT)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT, _("GGUF metadata “%s” is not an integer"), key);
      return FALSE;
    }
  *out = (int) v;
  return TRUE;
}

static gboolean
gguf_float (const HoneGguf *gguf, const char *arch, const char *suffix, float *out, GError **error)
{
  g_autofree char *key = g_strdup_printf ("%s.%s", arch, suffix);
  if (hone_gguf_find_kv (gguf, key) < 0)
    return TRUE;
  if (!hone_gguf_get_f32 (gguf, key, out))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT, _("GGUF metadata “%s” is not a number"), key);
      return FALSE;
    }
  return TRUE;
}

gboolean
hone_model_config_from_gguf (HoneModelConfig *config, const HoneGguf *gguf, GError **error)
{
  HoneModelConfig c = { 0 };
  g_autofree char *arch = hone_gguf_dup_string (gguf, "general.architecture");
  g_autofree char *scaling_key = NULL;
  g_autofree char *scaling = NULL;
  gboolean has_head_dim = FALSE;
  float linear = 0.0f;

  if (arch == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT, _("GGUF metadata “general.architecture” is missing"));
      return FALSE;
    }
  if (strcmp (arch, "llama") == 0)
    c.arch = HONE_ARCH_LLAMA;
  else if (strcmp (arch, "qwen2") == 0)
    c.arch = HONE_ARCH_QWEN2;
  else if (strcmp (arch, "qwen3") == 0)
    c.arch = HONE_ARCH_QWEN3;
  else
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_UNSUPPORTED_ARCH,
                   _("model architecture “%s” is not supported (llama, qwen2, qwen3 are)"), arch);
      return FALSE;
    }
  g_strlcpy (c.arch_name, arch, sizeof c.arch_name);

  c.max_context = 4096;
  c.rope_theta = 10000.0f;
  c.rms_eps = 1e-5f;
  c.head_dim = -1;
  c.vocab = -1;
  if (!gguf_int (gguf, arch, "block_count", &c.n_layers, TRUE, error)
      || !gguf_int (gguf, arch, "embedding_length", &c.hidden, TRUE, error)
      || !gguf_int (gguf, arch, "attention.head_count", &c.n_heads, TRUE, error)
      || !gguf_int (gguf, arch, "feed_forward_length", &c.ffn, TRUE, error)
      || !gguf_int (gguf, arch, "context_length", &c.max_context, FALSE, error)
      || !gguf_int (gguf, arch, "attention.key_length", &c.head_dim, FALSE, error)
      || !gguf_int (gguf, arch, "vocab_size", &c.vocab, FALSE, error)
      || !gguf_float (gguf, arch, "rope.freq_base", &c.rope_theta, error)
      || !gguf_float (gguf, arch, "attention.layer_norm_rms_epsilon", &c.rms_eps, error))
    return FALSE;
  c.n_kv_heads = c.n_heads;
  if (!gguf_int (gguf, arch, "attention.head_count_kv", &c.n_kv_heads, FALSE, error))
    return FALSE;

  has_head_dim = c.head_dim != -1;
  if (!has_head_dim)
    {
      if (c.n_heads <= 0 || c.hidden % c.n_heads != 0)
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                       _("GGUF: embedding length %d is not a multiple of %d heads"), c.hidden, c.n_heads);
          return FALSE;
        }
      c.head_dim = c.hidden / c.n_heads;
    }
  if (c.vocab == -1)
    {
      int idx = hone_gguf_find_kv (gguf, "tokenizer.ggml.tokens");
      guint64 n = idx >= 0 && hone_gguf_kv_type (gguf, (guint) idx) == HONE_GGUF_ARRAY
                    ? hone_gguf_kv_array_length (gguf, (guint) idx) : 0;
      if (n == 0)
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                       _("GGUF: no vocabulary size (neither %s.vocab_size nor tokenizer.ggml.tokens)"), arch);
          return FALSE;
        }
      c.vocab = n > G_MAXINT ? G_MAXINT : (int) n;
    }

  /* RoPE scaling: rope.scaling.type/factor (newer), rope.scale_linear (older). */
  scaling_key = g_strdup_printf ("%s.rope.scaling.type", arch);
  scaling = hone_gguf_dup_string (gguf, scaling_key);
  if (!gguf_float (gguf, arch, "rope.scale_linear", &linear, error))
    return FALSE;
  if (scaling != NULL && strcmp (scaling, "linear") == 0)
    {
      c.rope_scaling.type = HONE_ROPE_SCALING_LINEAR;
      c.rope_scaling.factor = 1.0f;
      if (!gguf_float (gguf, arch, "rope.scaling.factor", &c.rope_scaling.factor, error))
        return FALSE;
    }
  else if (scaling != NULL && strcmp (scaling, "none") != 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                   _("GGUF: rope scaling type “%s” is not supported"), scaling);
      return FALSE;
    }
  else if (scaling == NULL && linear != 0.0f && linear != 1.0f)
    {
      c.rope_scaling.type = HONE_ROPE_SCALING_LINEAR;
      c.rope_scaling.factor = linear;
    }
  if (c.rope_scaling.type != HONE_ROPE_SCALING_NONE
      && !gguf_int (gguf, arch, "rope.scaling.original_context_length", &c.rope_scaling.original_context, FALSE, error))
    return FALSE;

  /* llama.cpp's converter permutes Q/K rows of llama-architecture models only. */
  c.rope_pairing = c.arch == HONE_ARCH_LLAMA ? HONE_ROPE_PAIRS_ADJACENT : HONE_ROPE_PAIRS_HALF;
  c.qkv_bias = c.arch == HONE_ARCH_QWEN2;
  c.qk_norm = c.arch == HONE_ARCH_QWEN3;
  c.tied_embeddings = hone_gguf_find_tensor (gguf, "output.weight") == NULL;

  if (!hone_model_config_validate (&c, HONE_ERROR_FILE_CORRUPT, "GGUF", error))
    return FALSE;
  *config = c;
  return TRUE;
}

/* ---- weights ----------------------------------------------------------- */

static const HoneTensor *
find_tensor (const HoneModel *m, const char *name)
{
  const ModelPriv *p = m->priv;
  return p->gguf ? hone_gguf_find_tensor (p->gguf, name) : hone_safetensors_find_tensor (p->st, name);
}

static gboolean
type_ok (HoneDType t, gboolean matrix)
{
  switch (t)
    {
    case HONE_DTYPE_F32: case HONE_DTYPE_F16: case HONE_DTYPE_BF16:
      return TRUE;
    case HONE_DTYPE_Q8_0: case HONE_DTYPE_Q4_0: case HONE_DTYPE_Q4_1: case HONE_DTYPE_Q4_K: case HONE_DTYPE_Q6_K:
      return matrix;
    default:
      return FALSE;
    }
}

static int
effective_dims (const int64_t *ne, int n_dims)
{
  while (n_dims > 1 && ne[n_dims - 1] == 1)
    n_dims--;
  return n_dims;
}

static char *
shape_string (const int64_t *ne, int n_dims)
{
  GString *s = g_string_new ("{");
  for (int i = 0; i < n_dims; i++)
    g_string_append_printf (s, "%s%" PRId64, i ? ", " : "", (gint64) ne[i]);
  g_string_append_c (s, '}');
  return g_string_free (s, FALSE);
}

/* An AWQ linear (@what of @layer): <prefix>.qweight/qzeros/scales checked and
 * repacked into Q4Z rows owned by the model — or, when opening deferred,
 * only checked and recorded (data NULL). *handled FALSE when the linear is
 * stored unquantized (AutoAWQ's modules_to_not_convert): the caller binds it
 * as usual. */
static gboolean
bind_awq (HoneModel *m, HoneTensor *dst, const char *what, int layer, int64_t ne0, int64_t ne1,
          gboolean *handled, GError **error)
{
  ModelPriv *p = m->priv;
  char *name = hone_model_tensor_name (m->source, what, layer);
  g_autofree char *prefix = g_strndup (name, strlen (name) - strlen (".weight"));
  g_autofree char *qweight = g_strconcat (prefix, ".qweight", NULL);
  Deferred d = { dst, { 0 } };

  *handled = FALSE;
  if (hone_safetensors_find_tensor (p->st, qweight) == NULL && hone_safetensors_find_tensor (p->st, name) != NULL)
    {
      g_free (name);
      return TRUE;
    }
  *handled = TRUE;
  g_ptr_array_add (p->owned, name);
  if (!p->defer)
    {
      void *buf = hone_awq_load_linear (p->st, prefix, name, ne0, ne1, m->awq_group_size, dst, error);
      if (buf == NULL)
        {
          g_prefix_error (error, "%s: ", m->path);
          return FALSE;
        }
      g_ptr_array_add (p->owned, buf);
      return TRUE;
    }
  if (!hone_awq_source_find (p->st, prefix, ne0, ne1, m->awq_group_size, &d.src, error))
    {
      g_prefix_error (error, "%s: ", m->path);
      return FALSE;
    }
  hone_awq_source_view (&d.src, name, NULL, dst);
  if (p->deferred == NULL)
    p->deferred = g_array_new (FALSE, FALSE, sizeof (Deferred));
  g_array_append_val (p->deferred, d);
  return TRUE;
}

/* Find the tensor for @what (of @layer), check it, and store its view in @dst.
 * ne0/ne1: expected ne (ne1 = 0 for vectors). */
static gboolean
bind (HoneModel *m, HoneTensor *dst, const char *what, int layer, int64_t ne0, int64_t ne1,
      gboolean required, GError **error)
{
  g_autofree char *name = NULL;
  const HoneTensor *t;
  int64_t want[2] = { ne0, ne1 };
  int want_dims = ne1 ? 2 : 1;
  gboolean matrix = ne1 != 0;

  /* The seven linears of a layer; embeddings and lm_head stay fp16/bf16. */
  if (m->awq_group_size > 0 && matrix && layer >= 0 && strncmp (what, "w", 1) == 0)
    {
      gboolean handled;
      if (!bind_awq (m, dst, what, layer, ne0, ne1, &handled, error))
        return FALSE;
      if (handled)
        return TRUE;
    }
  name = hone_model_tensor_name (m->source, what, layer);
  t = find_tensor (m, name);
  memset (dst, 0, sizeof *dst);
  if (t == NULL)
    {
      if (!required)
        return TRUE;
      g_set_error (error, HONE_ERROR, HONE_ERROR_MISSING_TENSOR,
                   _("%s: tensor “%s” is missing"), m->path, name);
      return FALSE;
    }
  if (!type_ok (t->type, matrix))
    {
      const char *tn = hone_dtype_name (t->type);
      g_set_error (error, HONE_ERROR, HONE_ERROR_UNSUPPORTED_TYPE,
                   _("%s: tensor “%s” has type %s, which is not supported here"),
                   m->path, name, tn ? tn : "?");
      return FALSE;
    }
  if (effective_dims (t->ne, t->n_dims) != effective_dims (want, want_dims)
      || t->ne[0] != want[0] || (matrix && t->ne[1] != want[1]))
    {
      g_autofree char *have = shape_string (t->ne, t->n_dims);
      g_autofree char *expect = shape_string (want, want_dims);
      g_set_error (error, HONE_ERROR, HONE_ERROR_SHAPE_MISMATCH,
                   _("%s: tensor “%s” has shape %s but the config needs %s (ne, innermost first)"),
                   m->path, name, have, expect);
      return FALSE;
    }
  *dst = *t;
  return TRUE;
}

static gboolean
bind_weights (HoneModel *m, GError **error)
{
  const HoneModelConfig *c = &m->config;
  int64_t q = (int64_t) c->n_heads * c->head_dim, kv = (int64_t) c->n_kv_heads * c->head_dim;

  if (!bind (m, &m->tok_embd, "tok_embd", 0, c->hidden, c->vocab, TRUE, error)
      || !bind (m, &m->output_norm, "output_norm", 0, c->hidden, 0, TRUE, error))
    return FALSE;
  if (!m->config.tied_embeddings)
    {
      if (!bind (m, &m->output, "output", 0, c->hidden, c->vocab, FALSE, error))
        return FALSE;
      /* No lm_head stored: it is the embedding matrix. */
      if (!hone_tensor_present (&m->output))
        m->config.tied_embeddings = TRUE;
    }
  if (m->config.tied_embeddings)
    m->output = m->tok_embd;
  if (m->source == HONE_MODEL_SOURCE_GGUF
      && !bind (m, &m->rope_freqs, "rope_freqs", 0, c->head_dim / 2, 0, FALSE, error))
    return FALSE;
  if (hone_tensor_present (&m->rope_freqs) && m->rope_freqs.type != HONE_DTYPE_F32)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_UNSUPPORTED_TYPE,
                   _("%s: tensor “rope_freqs.weight” must be F32"), m->path);
      return FALSE;
    }

  m->layers = g_new0 (HoneLayerWeights, c->n_layers);
  for (int i = 0; i < c->n_layers; i++)
    {
      HoneLayerWeights *l = &m->layers[i];
      if (!bind (m, &l->attn_norm, "attn_norm", i, c->hidden, 0, TRUE, error)
          || !bind (m, &l->wq, "wq", i, c->hidden, q, TRUE, error)
          || !bind (m, &l->wk, "wk", i, c->hidden, kv, TRUE, error)
          || !bind (m, &l->wv, "wv", i, c->hidden, kv, TRUE, error)
          || !bind (m, &l->wo, "wo", i, q, c->hidden, TRUE, error)
          || !bind (m, &l->bq, "bq", i, q, 0, c->qkv_bias, error)
          || !bind (m, &l->bk, "bk", i, kv, 0, c->qkv_bias, error)
          || !bind (m, &l->bv, "bv", i, kv, 0, c->qkv_bias, error)
          || !bind (m, &l->q_norm, "q_norm", i, c->head_dim, 0, c->qk_norm, error)
          || !bind (m, &l->k_norm, "k_norm", i, c->head_dim, 0, c->qk_norm, error)
          || !bind (m, &l->ffn_norm, "ffn_norm", i, c->hidden, 0, TRUE, error)
          || !bind (m, &l->w_gate, "w_gate", i, c->hidden, c->ffn, TRUE, error)
          || !bind (m, &l->w_up, "w_up", i, c->hidden, c->ffn, TRUE, error)
          || !bind (m, &l->w_down, "w_down", i, c->ffn, c->hidden, TRUE, error))
        return FALSE;
      /* Biases and norms the architecture does not use stay absent. */
      if (!c->qkv_bias)
        memset (&l->bq, 0, 3 * sizeof (HoneTensor));
      if (!c->qk_norm)
        memset (&l->q_norm, 0, 2 * sizeof (HoneTensor));
    }
  return TRUE;
}

/* ---- opening ----------------------------------------------------------- */

static HoneModel *
model_new (const char *path, HoneModelSource source)
{
  HoneModel *m = g_new0 (HoneModel, 1);
  m->ref_count = 1;
  m->path = g_strdup (path);
  m->source = source;
  m->priv = g_new0 (ModelPriv, 1);
  ((ModelPriv *) m->priv)->owned = g_ptr_array_new_with_free_func (g_free);
  g_mutex_init (&((ModelPriv *) m->priv)->lock);
  return m;
}

static HoneModel *
open_gguf (const char *path, GError **error)
{
  g_autoptr(HoneModel) m = model_new (path, HONE_MODEL_SOURCE_GGUF);
  ModelPriv *p = m->priv;

  p->gguf = hone_gguf_open (path, error);
  if (p->gguf == NULL
      || !hone_model_config_from_gguf (&m->config, p->gguf, error)
      || !bind_weights (m, error))
    return NULL;
  m->tokenizer = hone_tokenizer_new_from_gguf (p->gguf, error);
  if (m->tokenizer == NULL)
    return NULL;
  m->chat_template = hone_gguf_dup_string (p->gguf, "tokenizer.chat_template");   /* UTF-8: the reader checks */
  m->name = hone_gguf_dup_text (p->gguf, "general.name", -1);
  if (m->name == NULL || m->name[0] == '\0')
    {
      g_autofree char *base = g_path_get_basename (path);
      g_free (m->name);
      if (g_str_has_suffix (base, ".gguf"))
        base[strlen (base) - 5] = '\0';
      m->name = g_steal_pointer (&base);
    }
  m->file_bytes = (gint64) hone_gguf_file_size (p->gguf);
  return g_steal_pointer (&m);
}

/* chat_template from tokenizer_config.json: a string, or a list of
 * {name, template} of which "default" is the one to use. Newer exports keep
 * it in chat_template.jinja instead. */
static gboolean
load_hf_chat_template (HoneModel *m, const char *dir, GError **error)
{
  g_autofree char *cfg_path = g_build_filename (dir, "tokenizer_config.json", NULL);
  g_autofree char *jinja_path = g_build_filename (dir, "chat_template.jinja", NULL);
  g_autofree char *text = NULL;
  gsize length;

  if (g_file_get_contents (cfg_path, &text, &length, NULL))
    {
      g_autoptr(JsonParser) parser = json_parser_new_immutable ();
      g_autoptr(GError) local = NULL;
      JsonNode *root, *ct;

      if (!hone_json_load (parser, text, (gssize) length, 64, &local)
          || (root = json_parser_get_root (parser)) == NULL || !JSON_NODE_HOLDS_OBJECT (root))
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("%s: not a JSON object%s%s"),
                       cfg_path, local ? ": " : "", local ? local->message : "");
          return FALSE;
        }
      ct = json_object_get_member (json_node_get_object (root), "chat_template");
      if (ct && JSON_NODE_HOLDS_VALUE (ct) && json_node_get_value_type (ct) == G_TYPE_STRING)
        m->chat_template = g_strdup (json_node_get_string (ct));
      else if (ct && JSON_NODE_HOLDS_ARRAY (ct))
        {
          JsonArray *a = json_node_get_array (ct);
          for (guint i = 0; i < json_array_get_length (a); i++)
            {
              JsonNode *e = json_array_get_element (a, i);
              JsonObject *o = JSON_NODE_HOLDS_OBJECT (e) ? json_node_get_object (e) : NULL;
              if (o && g_strcmp0 (hone_json_get_string (o, "name", ""), "default") == 0
                  && json_object_has_member (o, "template"))
                {
                  JsonNode *tn = json_object_get_member (o, "template");
                  if (JSON_NODE_HOLDS_VALUE (tn) && json_node_get_value_type (tn) == G_TYPE_STRING)
                    m->chat_template = g_strdup (json_node_get_string (tn));
                }
            }
        }
    }
  if (m->chat_template == NULL)
    {
      g_autofree char *jinja = NULL;
      if (g_file_get_contents (jinja_path, &jinja, &length, NULL) && g_utf8_validate (jinja, (gssize) length, NULL))
        m->chat_template = g_steal_pointer (&jinja);
    }
  return TRUE;
}

static HoneModel *
open_hf (const char *dir, HoneModelOpenFlags flags, GError **error)
{
  g_autoptr(HoneModel) m = model_new (dir, HONE_MODEL_SOURCE_SAFETENSORS);
  ModelPriv *p = m->priv;
  g_autofree char *config_path = g_build_filename (dir, "config.json", NULL);
  g_autofree char *text = NULL;
  g_autoptr(GError) local = NULL;
  gsize length;

  if (!g_file_get_contents (config_path, &text, &length, &local))
    {
      if (g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        g_set_error (error, HONE_ERROR, HONE_ERROR_IO,
                     _("%s is not a model folder: a Hugging Face model has a config.json beside its weights"), dir);
      else
        g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("Cannot read %s: %s"), config_path, local->message);
      return NULL;
    }
  if (!hone_model_config_from_json (&m->config, text, (gssize) length, error))
    {
      g_prefix_error (error, "%s: ", dir);
      return NULL;
    }
  if (!hone_awq_load_config (dir, text, (gssize) length, &m->awq_group_size, error))
    {
      g_prefix_error (error, "%s: ", dir);
      return NULL;
    }
  p->st = hone_safetensors_open (dir, error);
  if (p->st == NULL)
    return NULL;
  if (m->awq_group_size == 0
      && hone_safetensors_find_tensor (p->st, "model.layers.0.self_attn.q_proj.qweight") != NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                   _("%s: the weights are quantized (qweight/qzeros/scales) but config.json has no "
                     "quantization_config saying how"), dir);
      return NULL;
    }
  p->defer = (flags & HONE_MODEL_OPEN_DEFER_REPACK) != 0;
  if (!bind_weights (m, error))
    return NULL;
  p->defer = FALSE;
  m->tokenizer = hone_tokenizer_new_from_hf_dir (dir, error);
  if (m->tokenizer == NULL || !load_hf_chat_template (m, dir, error))
    return NULL;
  m->name = g_path_get_basename (dir);
  m->file_bytes = hone_safetensors_total_bytes (p->st);
  return g_steal_pointer (&m);
}

HoneModel *
hone_model_open (const char *path, GError **error)
{
  return hone_model_open_full (path, HONE_MODEL_OPEN_DEFAULT, error);
}

HoneModel *
hone_model_open_full (const char *path, HoneModelOpenFlags flags, GError **error)
{
  g_autofree char *dir = NULL;
  g_autofree char *config = NULL;
  char magic[4] = { 0 };
  FILE *f;

  g_return_val_if_fail (path != NULL, NULL);
  if (g_file_test (path, G_FILE_TEST_IS_DIR))
    {
      g_autofree char *canon = g_canonicalize_filename (path, NULL);
      return open_hf (canon, flags, error);
    }
  if (g_file_test (path, G_FILE_TEST_EXISTS) && !g_file_test (path, G_FILE_TEST_IS_REGULAR))
    {
      /* a FIFO would block the open, a device maps nothing */
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                   _("%s is not a regular file: a model is a GGUF file or a Hugging Face model folder"), path);
      return NULL;
    }
  f = fopen (path, "rb");
  if (f == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("Cannot open %s: %s"), path, g_strerror (errno));
      return NULL;
    }
  if (fread (magic, 1, 4, f) != 4)
    memset (magic, 0, sizeof magic);
  fclose (f);
  if (memcmp (magic, "GGUF", 4) == 0)
    return open_gguf (path, error);

  /* A file inside a HF folder (config.json, model.safetensors, …). */
  {
    g_autofree char *canon = g_canonicalize_filename (path, NULL);
    dir = g_path_get_dirname (canon);
  }
  config = g_build_filename (dir, "config.json", NULL);
  if (g_file_test (config, G_FILE_TEST_IS_REGULAR))
    return open_hf (dir, flags, error);
  g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
               _("%s is neither a GGUF file nor part of a Hugging Face model folder (no config.json beside it)"),
               path);
  return NULL;
}

HoneModel *
hone_model_ref (HoneModel *model)
{
  g_return_val_if_fail (model != NULL, NULL);
  g_atomic_int_inc (&model->ref_count);
  return model;
}

void
hone_model_unref (HoneModel *model)
{
  ModelPriv *p;

  if (model == NULL || !g_atomic_int_dec_and_test (&model->ref_count))
    return;
  p = model->priv;
  if (model->tokenizer)
    hone_tokenizer_free (model->tokenizer);
  g_free (model->layers);
  g_free (model->chat_template);
  g_free (model->name);
  g_free (model->path);
  if (p)
    {
      if (p->gguf)
        hone_gguf_unref (p->gguf);
      if (p->st)
        hone_safetensors_unref (p->st);
      if (p->owned)
        g_ptr_array_free (p->owned, TRUE);
      if (p->deferred)
        g_array_free (p->deferred, TRUE);
      g_mutex_clear (&p->lock);
      g_free (p);
    }
  g_free (model);
}

void
hone_model_release_bytes (const HoneModel *model, const void *data, gsize nbytes)
{
  const ModelPriv *p = model != NULL ? model->priv : NULL;
  if (p == NULL)
    return;
  if (p->gguf)
    hone_gguf_release_bytes (p->gguf, data, nbytes);
  if (p->st)
    hone_safetensors_release_bytes (p->st, data, nbytes);
}

/* ---- deferred AWQ linears --------------------------------------------- */

/* The deferred entry of @t (the model's tensor, or a copy of it), or NULL. */
static Deferred *
deferred_of (const ModelPriv *p, const HoneTensor *t)
{
  if (p == NULL || p->deferred == NULL || t == NULL)
    return NULL;
  for (guint i = 0; i < p->deferred->len; i++)
    {
      Deferred *d = &g_array_index (p->deferred, Deferred, i);
      if (t == d->dst || (t->name != NULL && t->name == d->dst->name))
        return d;
    }
  return NULL;
}

gboolean
hone_model_tensor_deferred (const HoneModel *model, const HoneTensor *t)
{
  ModelPriv *p = model != NULL ? model->priv : NULL;
  gboolean deferred;

  if (p == NULL || p->deferred == NULL)
    return FALSE;
  g_mutex_lock (&p->lock);
  {
    const Deferred *d = deferred_of (p, t);
    deferred = d != NULL && d->dst->data == NULL;
  }
  g_mutex_unlock (&p->lock);
  return deferred;
}

gboolean
hone_model_tensor_available (const HoneModel *model, const HoneTensor *t)
{
  return hone_tensor_present (t) || hone_model_tensor_deferred (model, t);
}

gboolean
hone_model_read_rows (const HoneModel *model, const HoneTensor *t, int64_t row0, int64_t n, void *dst)
{
  ModelPriv *p = model != NULL ? model->priv : NULL;
  const size_t rb = hone_tensor_row_bytes (t);
  const Deferred *d;

  g_return_val_if_fail (t != NULL && row0 >= 0 && n >= 0 && row0 + n <= (t->n_dims > 1 ? t->ne[1] : 1), FALSE);
  if (t->data != NULL)
    {
      memcpy (dst, (const char *) t->data + (size_t) row0 * rb, (size_t) n * rb);
      return TRUE;
    }
  if (p == NULL)
    return FALSE;
  g_mutex_lock (&p->lock);
  d = deferred_of (p, t);
  if (d != NULL && d->dst->data != NULL)
    memcpy (dst, (const char *) d->dst->data + (size_t) row0 * rb, (size_t) n * rb);
  else if (d != NULL)
    {
      hone_awq_source_rows (&d->src, row0, n, dst);
      /* the last rows read: the checkpoint's pages may go (they come back if read again) */
      if (row0 + n == d->src.N)
        hone_awq_source_release (&d->src);
    }
  g_mutex_unlock (&p->lock);
  return d != NULL;
}

guint64
hone_model_deferred_bytes (const HoneModel *model)
{
  ModelPriv *p = model != NULL ? model->priv : NULL;
  guint64 total = 0;

  if (p == NULL || p->deferred == NULL)
    return 0;
  g_mutex_lock (&p->lock);
  for (guint i = 0; i < p->deferred->len; i++)
    {
      const Deferred *d = &g_array_index (p->deferred, Deferred, i);
      if (d->dst->data == NULL)
        total += hone_awq_source_q4z_bytes (&d->src);
    }
  g_mutex_unlock (&p->lock);
  return total;
}

gboolean
hone_model_materialize (HoneModel *model, GCancellable *cancellable, HoneProgressFunc progress,
                        gpointer progress_data, GError **error)
{
  ModelPriv *p = model->priv;
  gboolean ok = TRUE;
  guint64 total = 0, done = 0;

  if (p->deferred == NULL)
    return TRUE;
  g_mutex_lock (&p->lock);
  for (guint i = 0; i < p->deferred->len; i++)
    {
      const Deferred *d = &g_array_index (p->deferred, Deferred, i);
      if (d->dst->data == NULL)
        total += hone_awq_source_q4z_bytes (&d->src);
    }
  for (guint i = 0; ok && i < p->deferred->len; i++)
    {
      Deferred *d = &g_array_index (p->deferred, Deferred, i);
      const gsize nbytes = hone_awq_source_q4z_bytes (&d->src);
      void *buf;

      if (d->dst->data != NULL)
        continue;
      if (cancellable != NULL && g_cancellable_is_cancelled (cancellable))
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_CANCELLED, _("Loading the model was cancelled"));
          ok = FALSE;
          break;
        }
      buf = g_try_malloc (nbytes);
      if (buf == NULL)
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY,
                       _("%s: cannot allocate %zu bytes for the int4 weights"), d->dst->name, (size_t) nbytes);
          ok = FALSE;
          break;
        }
      hone_awq_source_rows (&d->src, 0, d->src.N, buf);
      hone_awq_source_release (&d->src);
      g_ptr_array_add (p->owned, buf);
      d->dst->data = buf;
      done += nbytes;
      if (progress != NULL)
        progress (total > 0 ? (double) done / (double) total : 1.0, progress_data);
    }
  g_mutex_unlock (&p->lock);
  return ok;
}

/* ---- figures ----------------------------------------------------------- */

static gint64
n_el (const HoneTensor *t)
{
  /* a deferred AWQ linear (data NULL until repacked) counts as well */
  return hone_tensor_present (t) || t->nbytes > 0 ? hone_tensor_n_elements (t) : 0;
}

gint64
hone_model_n_params (const HoneModel *m)
{
  gint64 n = n_el (&m->tok_embd) + n_el (&m->output_norm) + n_el (&m->rope_freqs);

  if (!m->config.tied_embeddings)
    n += n_el (&m->output);
  for (int i = 0; m->layers && i < m->config.n_layers; i++)
    {
      const HoneLayerWeights *l = &m->layers[i];
      n += n_el (&l->attn_norm) + n_el (&l->wq) + n_el (&l->wk) + n_el (&l->wv) + n_el (&l->wo)
           + n_el (&l->bq) + n_el (&l->bk) + n_el (&l->bv) + n_el (&l->q_norm) + n_el (&l->k_norm)
           + n_el (&l->ffn_norm) + n_el (&l->w_gate) + n_el (&l->w_up) + n_el (&l->w_down);
    }
  return n;
}

gint64
hone_model_kv_bytes (const HoneModelConfig *config, int n_ctx, int bytes_per_elem)
{
  /* K and V, every layer, every KV head. */
  return (gint64) 2 * config->n_layers * config->n_kv_heads * config->head_dim * (gint64) n_ctx * bytes_per_elem;
}

void
hone_model_permute_qk_rows (void *dst, const void *src, int n_heads, int head_dim,
                            size_t row_bytes, gboolean to_gguf)
{
  /* llama.cpp convert_hf_to_gguf.py:
   *   w.reshape(n_head, 2, head_dim/2, …).swapaxes(1, 2).reshape(w.shape)
   * HF row h·d + j·d/2 + r (j ∈ {0,1}) becomes GGUF row h·d + 2r + j. */
  int half = head_dim / 2;
  for (int h = 0; h < n_heads; h++)
    for (int r = 0; r < half; r++)
      for (int j = 0; j < 2; j++)
        {
          size_t hf = (size_t) h * head_dim + (size_t) j * half + r;
          size_t gg = (size_t) h * head_dim + 2 * (size_t) r + j;
          size_t to = to_gguf ? gg : hf, from = to_gguf ? hf : gg;
          memcpy ((char *) dst + to * row_bytes, (const char *) src + from * row_bytes, row_bytes);
        }
}
