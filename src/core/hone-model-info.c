/* hone-model-info.c — the model card, from metadata only. */
#include <inttypes.h>
#include "hone-model-info.h"

#include <string.h>

#include "hone-awq-load.h"
#include "hone-dtype.h"
#include "hone-error.h"
#include "hone-gguf.h"
#include "hone-i18n.h"
#include "hone-json.h"
#include "hone-model.h"
#include "hone-safetensors.h"
#include "hone-tokenizer.h"

struct _HoneModelInfo {
  GObject parent_instance;
  char *path;
  char *name;
  char *source;
  HoneModelConfig config;
  gint64 n_params;
  gint64 file_size;
  gint64 weights_bytes;
  gint64 weight_bytes_per_token;
  char *tokenizer_kind;
  gboolean has_chat_template;
  int awq_group_size;         /* AWQ GEMM checkpoint's group size; 0 when not AWQ */
  gint64 output_bytes;        /* bytes of the stored output matrix (lm_head), if any */
  GArray *types;              /* HoneTensorTypeCount */
};

enum {
  PROP_0,
  PROP_PATH, PROP_NAME, PROP_ARCHITECTURE, PROP_N_PARAMS, PROP_CONTEXT_LENGTH,
  PROP_N_LAYERS, PROP_HIDDEN_SIZE, PROP_N_HEADS, PROP_N_KV_HEADS, PROP_HEAD_DIM,
  PROP_FFN_SIZE, PROP_VOCAB_SIZE, PROP_TOKENIZER_KIND, PROP_HAS_CHAT_TEMPLATE,
  PROP_FILE_SIZE, PROP_WEIGHTS_BYTES, PROP_TIED_EMBEDDINGS, PROP_ROPE_THETA, PROP_SOURCE,
  N_PROPS
};
static GParamSpec *props[N_PROPS];

G_DEFINE_FINAL_TYPE (HoneModelInfo, hone_model_info, G_TYPE_OBJECT)

static void
hone_model_info_finalize (GObject *object)
{
  HoneModelInfo *self = HONE_MODEL_INFO (object);
  g_free (self->path);
  g_free (self->name);
  g_free (self->source);
  g_free (self->tokenizer_kind);
  g_clear_pointer (&self->types, g_array_unref);
  G_OBJECT_CLASS (hone_model_info_parent_class)->finalize (object);
}

static void
hone_model_info_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  HoneModelInfo *self = HONE_MODEL_INFO (object);

  switch (prop_id)
    {
    case PROP_PATH: g_value_set_string (value, self->path); break;
    case PROP_NAME: g_value_set_string (value, self->name); break;
    case PROP_ARCHITECTURE: g_value_set_string (value, self->config.arch_name); break;
    case PROP_N_PARAMS: g_value_set_int64 (value, self->n_params); break;
    case PROP_CONTEXT_LENGTH: g_value_set_int (value, self->config.max_context); break;
    case PROP_N_LAYERS: g_value_set_int (value, self->config.n_layers); break;
    case PROP_HIDDEN_SIZE: g_value_set_int (value, self->config.hidden); break;
    case PROP_N_HEADS: g_value_set_int (value, self->config.n_heads); break;
    case PROP_N_KV_HEADS: g_value_set_int (value, self->config.n_kv_heads); break;
    case PROP_HEAD_DIM: g_value_set_int (value, self->config.head_dim); break;
    case PROP_FFN_SIZE: g_value_set_int (value, self->config.ffn); break;
    case PROP_VOCAB_SIZE: g_value_set_int (value, self->config.vocab); break;
    case PROP_TOKENIZER_KIND: g_value_set_string (value, self->tokenizer_kind); break;
    case PROP_HAS_CHAT_TEMPLATE: g_value_set_boolean (value, self->has_chat_template); break;
    case PROP_FILE_SIZE: g_value_set_int64 (value, self->file_size); break;
    case PROP_WEIGHTS_BYTES: g_value_set_int64 (value, self->weights_bytes); break;
    case PROP_TIED_EMBEDDINGS: g_value_set_boolean (value, self->config.tied_embeddings); break;
    case PROP_ROPE_THETA: g_value_set_double (value, self->config.rope_theta); break;
    case PROP_SOURCE: g_value_set_string (value, self->source); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
hone_model_info_class_init (HoneModelInfoClass *klass)
{
  GObjectClass *oc = G_OBJECT_CLASS (klass);
  GParamFlags f = G_PARAM_READABLE | G_PARAM_STATIC_STRINGS;

  oc->finalize = hone_model_info_finalize;
  oc->get_property = hone_model_info_get_property;
  props[PROP_PATH] = g_param_spec_string ("path", NULL, NULL, NULL, f);
  props[PROP_NAME] = g_param_spec_string ("name", NULL, NULL, NULL, f);
  props[PROP_ARCHITECTURE] = g_param_spec_string ("architecture", NULL, NULL, NULL, f);
  props[PROP_N_PARAMS] = g_param_spec_int64 ("n-params", NULL, NULL, 0, G_MAXINT64, 0, f);
  props[PROP_CONTEXT_LENGTH] = g_param_spec_int ("context-length", NULL, NULL, 0, G_MAXINT, 0, f);
  props[PROP_N_LAYERS] = g_param_spec_int ("n-layers", NULL, NULL, 0, G_MAXINT, 0, f);
  props[PROP_HIDDEN_SIZE] = g_param_spec_int ("hidden-size", NULL, NULL, 0, G_MAXINT, 0, f);
  props[PROP_N_HEADS] = g_param_spec_int ("n-heads", NULL, NULL, 0, G_MAXINT, 0, f);
  props[PROP_N_KV_HEADS] = g_param_spec_int ("n-kv-heads", NULL, NULL, 0, G_MAXINT, 0, f);
  props[PROP_HEAD_DIM] = g_param_spec_int ("head-dim", NULL, NULL, 0, G_MAXINT, 0, f);
  props[PROP_FFN_SIZE] = g_param_spec_int ("ffn-size", NULL, NULL, 0, G_MAXINT, 0, f);
  props[PROP_VOCAB_SIZE] = g_param_spec_int ("vocab-size", NULL, NULL, 0, G_MAXINT, 0, f);
  props[PROP_TOKENIZER_KIND] = g_param_spec_string ("tokenizer-kind", NULL, NULL, NULL, f);
  props[PROP_HAS_CHAT_TEMPLATE] = g_param_spec_boolean ("has-chat-template", NULL, NULL, FALSE, f);
  props[PROP_FILE_SIZE] = g_param_spec_int64 ("file-size", NULL, NULL, 0, G_MAXINT64, 0, f);
  props[PROP_WEIGHTS_BYTES] = g_param_spec_int64 ("weights-bytes", NULL, NULL, 0, G_MAXINT64, 0, f);
  props[PROP_TIED_EMBEDDINGS] = g_param_spec_boolean ("tied-embeddings", NULL, NULL, FALSE, f);
  props[PROP_ROPE_THETA] = g_param_spec_double ("rope-theta", NULL, NULL, 0, G_MAXDOUBLE, 0, f);
  props[PROP_SOURCE] = g_param_spec_string ("source", NULL, NULL, NULL, f);
  g_object_class_install_properties (oc, N_PROPS, props);
}

static void
hone_model_info_init (HoneModelInfo *self)
{
  self->types = g_array_new (FALSE, TRUE, sizeof (HoneTensorTypeCount));
}

/* ---- filling ---------------------------------------------------------------- */

static void
count_tensor (HoneModelInfo *self, const HoneTensor *t, const char *embd_name, const char *output_name,
              gint64 *embd_bytes, gboolean *has_output)
{
  HoneTensorTypeCount *row = NULL;
  gint64 n = hone_tensor_n_elements (t);

  for (guint i = 0; i < self->types->len; i++)
    if (g_array_index (self->types, HoneTensorTypeCount, i).type == (int) t->type)
      row = &g_array_index (self->types, HoneTensorTypeCount, i);
  if (row == NULL)
    {
      HoneTensorTypeCount r = { hone_dtype_name (t->type), t->type, 0, 0, 0 };
      if (r.type_name == NULL)
        r.type_name = "?";
      g_array_append_val (self->types, r);
      row = &g_array_index (self->types, HoneTensorTypeCount, self->types->len - 1);
    }
  row->count++;
  row->n_elements += n;
  row->bytes += (gint64) t->nbytes;
  self->n_params += n;
  self->weights_bytes += (gint64) t->nbytes;
  if (embd_bytes != NULL && t->name != NULL && g_strcmp0 (t->name, embd_name) == 0)
    *embd_bytes = (gint64) t->nbytes;
  if (has_output != NULL && t->name != NULL && g_strcmp0 (t->name, output_name) == 0)
    {
      *has_output = TRUE;
      self->output_bytes = (gint64) t->nbytes;
    }
}

/* An AWQ checkpoint's packed linear (<prefix>.qweight, .qzeros, .scales) is
 * counted as the Q4Z matrix it becomes at load: K·N elements in K/32·N
 * 20-byte blocks, which is what the backends hold. TRUE when @t is one of
 * the three (the qweight counts the whole linear; the others nothing). */
static gboolean
count_awq_part (HoneModelInfo *self, const HoneTensor *t)
{
  HoneTensor q4z = { 0 };

  if (self->awq_group_size == 0 || t->name == NULL || t->n_dims != 2)
    return FALSE;
  if (g_str_has_suffix (t->name, ".qzeros") || g_str_has_suffix (t->name, ".scales"))
    return TRUE;
  if (!g_str_has_suffix (t->name, ".qweight"))
    return FALSE;
  /* qweight is int32 [K, N/8]: ne = {N/8, K}. */
  q4z.name = t->name;
  q4z.type = HONE_DTYPE_Q4Z;
  q4z.n_dims = 2;
  q4z.ne[0] = t->ne[1];
  q4z.ne[1] = t->ne[0] * 8;
  q4z.ne[2] = q4z.ne[3] = 1;
  q4z.nbytes = (size_t) (q4z.ne[0] / 32) * sizeof (HoneBlockQ4Z) * (size_t) q4z.ne[1];
  count_tensor (self, &q4z, NULL, NULL, NULL, NULL);
  return TRUE;
}

static int
type_rows_by_bytes (gconstpointer a, gconstpointer b)
{
  const HoneTensorTypeCount *x = a, *y = b;
  return (x->bytes < y->bytes) - (x->bytes > y->bytes);
}

static void
finish_counts (HoneModelInfo *self, gint64 embd_bytes, gboolean has_output)
{
  g_array_sort (self->types, type_rows_by_bytes);
  /* Decoding reads every matrix once; the embedding table only one row,
   * unless it doubles as the output matrix (tied). */
  self->weight_bytes_per_token = self->weights_bytes;
  if (has_output && !self->config.tied_embeddings)
    self->weight_bytes_per_token -= embd_bytes;
  /* Tied, yet an lm_head is stored (AutoAWQ exports write it): the embedding
   * matrix is the output one, the stored copy is never read. */
  if (has_output && self->config.tied_embeddings)
    self->weight_bytes_per_token -= self->output_bytes;
}

static gboolean
fill_from_gguf (HoneModelInfo *self, const char *path, GError **error)
{
  g_autoptr (HoneGguf) gguf = hone_gguf_open (path, error);
  const char *tok_model;
  gsize len = 0;
  gint64 embd_bytes = 0;
  gboolean has_output = FALSE;
  char *name;

  if (gguf == NULL)
    return FALSE;
  if (!hone_model_config_from_gguf (&self->config, gguf, error))
    return FALSE;
  self->source = g_strdup ("gguf");
  self->file_size = hone_gguf_file_size (gguf);
  name = hone_gguf_dup_text (gguf, "general.name", -1);
  if (name == NULL || name[0] == '\0')
    {
      g_free (name);
      name = g_path_get_basename (path);
    }
  self->name = name;
  tok_model = hone_gguf_get_string (gguf, "tokenizer.ggml.model", &len);
  if (tok_model == NULL)
    self->tokenizer_kind = g_strdup (_("none"));
  else if (len == 4 && memcmp (tok_model, "gpt2", 4) == 0)
    self->tokenizer_kind = g_strdup ("byte-level BPE (gpt2)");
  else if (len == 5 && memcmp (tok_model, "llama", 5) == 0)
    self->tokenizer_kind = g_strdup ("SentencePiece BPE (llama)");
  else
    self->tokenizer_kind = hone_gguf_dup_text (gguf, "tokenizer.ggml.model", 64);
  self->has_chat_template = hone_gguf_find_kv (gguf, "tokenizer.chat_template") >= 0;

  for (guint i = 0; i < hone_gguf_n_tensors (gguf); i++)
    count_tensor (self, hone_gguf_tensor (gguf, i), "token_embd.weight", "output.weight",
                  &embd_bytes, &has_output);
  /* Tied when the file has no output.weight; trust the tensors over the config. */
  if (!has_output)
    self->config.tied_embeddings = TRUE;
  finish_counts (self, embd_bytes, has_output);
  return TRUE;
}

static gboolean
fill_from_hf_dir (HoneModelInfo *self, const char *dir, GError **error)
{
  g_autofree char *config_path = g_build_filename (dir, "config.json", NULL);
  g_autofree char *tc_path = g_build_filename (dir, "tokenizer_config.json", NULL);
  g_autofree char *jinja_path = g_build_filename (dir, "chat_template.jinja", NULL);
  g_autofree char *config_json = NULL;
  g_autofree char *tc_json = NULL;
  gsize config_len = 0, tc_len = 0;
  g_autoptr (HoneSafetensors) st = NULL;
  gint64 embd_bytes = 0;
  gboolean has_output = FALSE;
  GError *local = NULL;
  HoneTokenizer *tok;

  if (!g_file_get_contents (config_path, &config_json, &config_len, &local))
    {
      if (g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        g_set_error (error, HONE_ERROR, HONE_ERROR_IO,
                     _("%s is not a model folder: a Hugging Face model has a config.json beside its weights"), dir);
      else
        g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("cannot read %s: %s"), config_path, local->message);
      g_error_free (local);
      return FALSE;
    }
  if (!hone_model_config_from_json (&self->config, config_json, config_len, error)
      || !hone_awq_load_config (dir, config_json, (gssize) config_len, &self->awq_group_size, error))
    return FALSE;
  st = hone_safetensors_open (dir, error);
  if (st == NULL)
    return FALSE;
  self->source = g_strdup ("safetensors");
  self->file_size = hone_safetensors_total_bytes (st);
  self->name = g_path_get_basename (dir);

  tok = hone_tokenizer_new_from_hf_dir (dir, NULL);
  if (tok != NULL)
    {
      self->tokenizer_kind = g_strdup (hone_tokenizer_kind (tok) == HONE_TOKENIZER_BYTE_BPE
                                       ? "byte-level BPE" : "SentencePiece BPE");
      hone_tokenizer_free (tok);
    }
  else
    self->tokenizer_kind = g_strdup (_("none"));

  self->has_chat_template = g_file_test (jinja_path, G_FILE_TEST_EXISTS);
  if (!self->has_chat_template && g_file_get_contents (tc_path, &tc_json, &tc_len, NULL))
    {
      g_autoptr (JsonParser) parser = json_parser_new ();
      if (hone_json_load (parser, tc_json, tc_len, 64, NULL)
          && JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
        {
          JsonObject *o = json_node_get_object (json_parser_get_root (parser));
          JsonNode *t = json_object_get_member (o, "chat_template");
          self->has_chat_template = t != NULL && !JSON_NODE_HOLDS_NULL (t);
        }
    }

  for (guint i = 0; i < hone_safetensors_n_tensors (st); i++)
    if (!count_awq_part (self, hone_safetensors_tensor (st, i)))
      count_tensor (self, hone_safetensors_tensor (st, i), "model.embed_tokens.weight", "lm_head.weight",
                    &embd_bytes, &has_output);
  finish_counts (self, embd_bytes, has_output);
  return TRUE;
}

HoneModelInfo *
hone_model_info_new_for_path (const char *path, GError **error)
{
  g_autoptr (HoneModelInfo) self = NULL;
  g_autofree char *dir = NULL;
  gboolean ok;

  g_return_val_if_fail (path != NULL, NULL);
  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("%s: no such file or folder"), path);
      return NULL;
    }
  if (!g_file_test (path, G_FILE_TEST_IS_DIR) && !g_file_test (path, G_FILE_TEST_IS_REGULAR))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                   _("%s is not a regular file: a model is a GGUF file or a Hugging Face model folder"), path);
      return NULL;
    }
  self = g_object_new (HONE_TYPE_MODEL_INFO, NULL);
  self->path = g_strdup (path);
  if (g_file_test (path, G_FILE_TEST_IS_DIR))
    ok = fill_from_hf_dir (self, path, error);
  else if (g_str_has_suffix (path, ".json") || g_str_has_suffix (path, ".safetensors"))
    {
      dir = g_path_get_dirname (path);
      ok = fill_from_hf_dir (self, dir, error);
    }
  else
    ok = fill_from_gguf (self, path, error);
  if (!ok)
    return NULL;
  return g_steal_pointer (&self);
}

static void
info_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  GError *error = NULL;
  HoneModelInfo *info = hone_model_info_new_for_path (task_data, &error);

  if (info == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, info, g_object_unref);
}

void
hone_model_info_new_for_path_async (const char *path, GCancellable *cancellable,
                                    GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (NULL, cancellable, callback, user_data);
  g_task_set_source_tag (task, hone_model_info_new_for_path_async);
  g_task_set_task_data (task, g_strdup (path), g_free);
  g_task_run_in_thread (task, info_thread);
  g_object_unref (task);
}

HoneModelInfo *
hone_model_info_new_for_path_finish (GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* ---- getters ------------------------------------------------------------------ */

const char *hone_model_info_get_path (HoneModelInfo *self) { return self->path; }
const char *hone_model_info_get_name (HoneModelInfo *self) { return self->name; }
const char *hone_model_info_get_architecture (HoneModelInfo *self) { return self->config.arch_name; }
gint64 hone_model_info_get_n_params (HoneModelInfo *self) { return self->n_params; }
int hone_model_info_get_context_length (HoneModelInfo *self) { return self->config.max_context; }
int hone_model_info_get_n_layers (HoneModelInfo *self) { return self->config.n_layers; }
int hone_model_info_get_hidden_size (HoneModelInfo *self) { return self->config.hidden; }
int hone_model_info_get_n_heads (HoneModelInfo *self) { return self->config.n_heads; }
int hone_model_info_get_n_kv_heads (HoneModelInfo *self) { return self->config.n_kv_heads; }
int hone_model_info_get_head_dim (HoneModelInfo *self) { return self->config.head_dim; }
int hone_model_info_get_ffn_size (HoneModelInfo *self) { return self->config.ffn; }
int hone_model_info_get_vocab_size (HoneModelInfo *self) { return self->config.vocab; }
const char *hone_model_info_get_tokenizer_kind (HoneModelInfo *self) { return self->tokenizer_kind; }
gboolean hone_model_info_get_has_chat_template (HoneModelInfo *self) { return self->has_chat_template; }
gint64 hone_model_info_get_file_size (HoneModelInfo *self) { return self->file_size; }
gint64 hone_model_info_get_weights_bytes (HoneModelInfo *self) { return self->weights_bytes; }
gboolean hone_model_info_get_tied_embeddings (HoneModelInfo *self) { return self->config.tied_embeddings; }
double hone_model_info_get_rope_theta (HoneModelInfo *self) { return self->config.rope_theta; }
const char *hone_model_info_get_source (HoneModelInfo *self) { return self->source; }
gint64 hone_model_info_get_weight_bytes_per_token (HoneModelInfo *self) { return self->weight_bytes_per_token; }
int hone_model_info_get_awq_group_size (HoneModelInfo *self) { return self->awq_group_size; }

const HoneTensorTypeCount *
hone_model_info_get_tensor_types (HoneModelInfo *self, guint *n_types)
{
  if (n_types != NULL)
    *n_types = self->types->len;
  return (const HoneTensorTypeCount *) (void *) self->types->data;
}

/* Tokens processed per forward pass during prefill (the engine's chunk). */
#define ESTIMATE_CHUNK 512

void
hone_model_info_estimate_memory (HoneModelInfo *self, int context_length, gboolean int8_kv,
                                 HoneMemoryEstimate *est)
{
  const HoneModelConfig *c = &self->config;
  int ctx = context_length > 0 ? context_length : c->max_context;
  gint64 q = (gint64) c->n_heads * c->head_dim;
  gint64 kv = (gint64) c->n_kv_heads * c->head_dim;
  gint64 chunk = MIN (ESTIMATE_CHUNK, MAX (ctx, 1));

  est->weights = self->weights_bytes;
  est->kv_cache = hone_model_kv_bytes (c, ctx, int8_kv ? 1 : 2);
  if (int8_kv)   /* one f32 scale per head and position, for K and V */
    est->kv_cache += (gint64) 2 * c->n_layers * ctx * c->n_kv_heads * 4;
  /* f32 activations of one chunk (residual, norm, q, k, v, attention out,
   * gate, up), the attention scores of one chunk against the context (one
   * head at a time), and the last logits. */
  est->workspace = chunk * (3 * (gint64) c->hidden + q + 2 * kv + q + 2 * (gint64) c->ffn) * 4
                   + chunk * (gint64) ctx * 4
                   + (gint64) c->vocab * 4;
  est->total = est->weights + est->kv_cache + est->workspace;
}

/* ---- text / JSON ----------------------------------------------------------------- */

char *
hone_model_info_to_text (HoneModelInfo *self, int context_length)
{
  GString *s = g_string_new (NULL);
  HoneMemoryEstimate est;
  int ctx = context_length > 0 ? context_length : self->config.max_context;
  g_autofree char *fsize = g_format_size (self->file_size);
  g_autofree char *w = NULL, *kv = NULL, *ws = NULL, *tot = NULL;

  hone_model_info_estimate_memory (self, ctx, FALSE, &est);
  w = g_format_size (est.weights);
  kv = g_format_size (est.kv_cache);
  ws = g_format_size (est.workspace);
  tot = g_format_size (est.total);

  g_string_append_printf (s, "%-18s %s\n", _("name:"), self->name);
  g_string_append_printf (s, "%-18s %s\n", _("path:"), self->path);
  g_string_append_printf (s, "%-18s %s (%s)\n", _("format:"), self->source, fsize);
  g_string_append_printf (s, "%-18s %s\n", _("architecture:"), self->config.arch_name);
  g_string_append_printf (s, "%-18s %" PRId64 " (%.1f M)\n", _("parameters:"),
                          self->n_params, self->n_params / 1e6);
  g_string_append_printf (s, "%-18s %d\n", _("layers:"), self->config.n_layers);
  g_string_append_printf (s, "%-18s %d\n", _("hidden size:"), self->config.hidden);
  g_string_append_printf (s, "%-18s %d / %d KV, dim %d\n", _("heads:"), self->config.n_heads,
                          self->config.n_kv_heads, self->config.head_dim);
  g_string_append_printf (s, "%-18s %d\n", _("FFN size:"), self->config.ffn);
  g_string_append_printf (s, "%-18s %d\n", _("vocabulary:"), self->config.vocab);
  g_string_append_printf (s, "%-18s %d\n", _("context length:"), self->config.max_context);
  g_string_append_printf (s, "%-18s %g\n", _("RoPE theta:"), self->config.rope_theta);
  g_string_append_printf (s, "%-18s %s\n", _("tied embeddings:"), self->config.tied_embeddings ? _("yes") : _("no"));
  g_string_append_printf (s, "%-18s %s\n", _("tokenizer:"), self->tokenizer_kind);
  g_string_append_printf (s, "%-18s %s\n", _("chat template:"), self->has_chat_template ? _("yes") : _("no"));
  if (self->awq_group_size > 0)
    {
      g_autofree char *q = g_strdup_printf (_("AWQ int4 g%d (runs as Q4Z)"), self->awq_group_size);
      g_string_append_printf (s, "%-18s %s\n", _("quantization:"), q);
    }
  g_string_append_printf (s, "%s\n", _("tensor types:"));
  for (guint i = 0; i < self->types->len; i++)
    {
      const HoneTensorTypeCount *r = &g_array_index (self->types, HoneTensorTypeCount, i);
      g_autofree char *b = g_format_size (r->bytes);
      g_string_append_printf (s, "  %-8s %5d %s, %" PRId64 " %s, %s\n", r->type_name, r->count,
                              r->count == 1 ? _("tensor") : _("tensors"), r->n_elements, _("elements"), b);
    }
  g_string_append_printf (s, _("memory estimate at %d tokens of context (fp16 KV):\n"), ctx);
  g_string_append_printf (s, "  %-16s %s\n", _("weights:"), w);
  g_string_append_printf (s, "  %-16s %s\n", _("KV cache:"), kv);
  g_string_append_printf (s, "  %-16s %s\n", _("workspace:"), ws);
  g_string_append_printf (s, "  %-16s %s\n", _("total:"), tot);
  return g_string_free (s, FALSE);
}

JsonNode *
hone_model_info_to_json (HoneModelInfo *self, int context_length)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  HoneMemoryEstimate est;
  int ctx = context_length > 0 ? context_length : self->config.max_context;

  hone_model_info_estimate_memory (self, ctx, FALSE, &est);
#define S(k, v) json_builder_set_member_name (b, k); json_builder_add_string_value (b, v)
#define I(k, v) json_builder_set_member_name (b, k); json_builder_add_int_value (b, v)
#define B(k, v) json_builder_set_member_name (b, k); json_builder_add_boolean_value (b, v)
  json_builder_begin_object (b);
  S ("name", self->name);
  S ("path", self->path);
  S ("source", self->source);
  I ("file_size", self->file_size);
  S ("architecture", self->config.arch_name);
  I ("n_params", self->n_params);
  I ("n_layers", self->config.n_layers);
  I ("hidden_size", self->config.hidden);
  I ("n_heads", self->config.n_heads);
  I ("n_kv_heads", self->config.n_kv_heads);
  I ("head_dim", self->config.head_dim);
  I ("ffn_size", self->config.ffn);
  I ("vocab_size", self->config.vocab);
  I ("context_length", self->config.max_context);
  json_builder_set_member_name (b, "rope_theta");
  json_builder_add_double_value (b, self->config.rope_theta);
  B ("tied_embeddings", self->config.tied_embeddings);
  S ("tokenizer", self->tokenizer_kind);
  B ("chat_template", self->has_chat_template);
  if (self->awq_group_size > 0)
    {
      json_builder_set_member_name (b, "quantization");
      json_builder_begin_object (b);
      S ("method", "awq");
      I ("bits", 4);
      I ("group_size", self->awq_group_size);
      S ("runtime_type", "Q4Z");
      json_builder_end_object (b);
    }
  json_builder_set_member_name (b, "tensor_types");
  json_builder_begin_array (b);
  for (guint i = 0; i < self->types->len; i++)
    {
      const HoneTensorTypeCount *r = &g_array_index (self->types, HoneTensorTypeCount, i);
      json_builder_begin_object (b);
      S ("type", r->type_name);
      I ("count", r->count);
      I ("elements", r->n_elements);
      I ("bytes", r->bytes);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_set_member_name (b, "memory_estimate");
  json_builder_begin_object (b);
  I ("context", ctx);
  I ("weights", est.weights);
  I ("kv_cache", est.kv_cache);
  I ("workspace", est.workspace);
  I ("total", est.total);
  json_builder_end_object (b);
  json_builder_end_object (b);
#undef S
#undef I
#undef B
  return json_builder_get_root (b);
}
