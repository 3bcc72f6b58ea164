/* hone-hf-config.c — HoneModelConfig from a HF config.json, and config validation.
 *
 * Defaults follow transformers' LlamaConfig / Qwen2Config / Qwen3Config for
 * the keys a config.json may leave out.
 */
#include "hone-model.h"
#include "hone-error.h"
#include "hone-i18n.h"
#include "hone-json.h"
#include "hone-safetensors.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#define CONFIG_MAX_BYTES (16 * 1024 * 1024)
#define CONFIG_MAX_DEPTH 32

#define SRC "config.json"

typedef struct {
  const char *model_type;
  const char *architecture;
  HoneArch arch;
  int default_context;
} ArchInfo;

static const ArchInfo arch_table[] = {
  { "llama", "LlamaForCausalLM", HONE_ARCH_LLAMA, 2048 },
  { "mistral", "MistralForCausalLM", HONE_ARCH_LLAMA, 32768 },
  { "qwen2", "Qwen2ForCausalLM", HONE_ARCH_QWEN2, 32768 },
  { "qwen3", "Qwen3ForCausalLM", HONE_ARCH_QWEN3, 32768 },
};

gboolean
hone_model_config_validate (const HoneModelConfig *c, int code, const char *source, GError **error)
{
#define BAD(...) do { g_set_error (error, HONE_ERROR, code, __VA_ARGS__); return FALSE; } while (0)
#define RANGE(field, lo, hi, what) \
  if (c->field < (lo) || c->field > (hi)) \
    BAD (_("%s: %s is %d (must be %d to %d)"), source, what, c->field, (int) (lo), (int) (hi))

  RANGE (n_layers, 1, 4096, _("the number of layers"));
  RANGE (hidden, 1, 1 << 17, _("the hidden size"));
  RANGE (n_heads, 1, 4096, _("the number of attention heads"));
  RANGE (n_kv_heads, 1, 4096, _("the number of KV heads"));
  RANGE (head_dim, 2, 4096, _("the head dimension"));
  RANGE (ffn, 1, 1 << 20, _("the feed-forward size"));
  RANGE (vocab, 1, 1 << 24, _("the vocabulary size"));
  RANGE (max_context, 1, 1 << 26, _("the context length"));
  if (c->n_heads % c->n_kv_heads != 0)
    BAD (_("%s: %d attention heads are not a multiple of %d KV heads"), source, c->n_heads, c->n_kv_heads);
  if (c->head_dim % 2 != 0)
    BAD (_("%s: head dimension %d is odd (RoPE rotates pairs)"), source, c->head_dim);
  if ((gint64) c->n_heads * c->head_dim > (1 << 18))
    BAD (_("%s: %d heads × %d head dimension is too large"), source, c->n_heads, c->head_dim);
  if (!(isfinite (c->rope_theta) && c->rope_theta > 0.0f))
    BAD (_("%s: rope theta %g must be a positive number"), source, (double) c->rope_theta);
  if (!(isfinite (c->rms_eps) && c->rms_eps > 0.0f && c->rms_eps < 1.0f))
    BAD (_("%s: RMS norm epsilon %g must be between 0 and 1"), source, (double) c->rms_eps);
  if (c->rope_scaling.type != HONE_ROPE_SCALING_NONE
      && !(isfinite (c->rope_scaling.factor) && c->rope_scaling.factor > 0.0f && c->rope_scaling.factor <= 1024.0f))
    BAD (_("%s: rope scaling factor %g must be a positive number"), source, (double) c->rope_scaling.factor);
  if (c->rope_scaling.type == HONE_ROPE_SCALING_LLAMA3)
    {
      const HoneRopeScaling *s = &c->rope_scaling;
      if (!(isfinite (s->low_freq_factor) && isfinite (s->high_freq_factor)
            && s->low_freq_factor > 0.0f && s->high_freq_factor > s->low_freq_factor))
        BAD (_("%s: llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor (got %g, %g)"),
             source, (double) s->low_freq_factor, (double) s->high_freq_factor);
      if (s->original_context < 1 || s->original_context > (1 << 26))
        BAD (_("%s: llama3 rope scaling original context %d is out of range"), source, s->original_context);
    }
  return TRUE;
#undef RANGE
#undef BAD
}

/* Integer member: absent → *found FALSE; present but not an integer → error. */
static gboolean
get_int (JsonObject *obj, const char *key, int *out, gboolean *found, GError **error)
{
  JsonNode *n = json_object_get_member (obj, key);
  double v;

  *found = FALSE;
  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    return TRUE;
  if (JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_INT64)
    {
      gint64 i = json_node_get_int (n);
      if (i < G_MININT || i > G_MAXINT)
        goto bad;
      *out = (int) i;
      *found = TRUE;
      return TRUE;
    }
  if (JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_DOUBLE)
    {
      v = json_node_get_double (n);
      if (!(v == floor (v) && v >= G_MININT && v <= G_MAXINT))
        goto bad;
      *out = (int) v;
      *found = TRUE;
      return TRUE;
    }
bad:
  g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("%s: “%s” must be an integer"), SRC, key);
  return FALSE;
}

static gboolean
require_int (JsonObject *obj, const char *key, int *out, GError **error)
{
  gboolean found;
  if (!get_int (obj, key, out, &found, error))
    return FALSE;
  if (!found)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("%s: “%s” is missing"), SRC, key);
      return FALSE;
    }
  return TRUE;
}

static gboolean
get_float (JsonObject *obj, const char *key, float *out, GError **error)
{
  JsonNode *n = json_object_get_member (obj, key);
  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    return TRUE;
  if (JSON_NODE_HOLDS_VALUE (n)
      && (json_node_get_value_type (n) == G_TYPE_INT64 || json_node_get_value_type (n) == G_TYPE_DOUBLE))
    {
      *out = (float) json_node_get_double (n);
      return TRUE;
    }
  g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("%s: “%s” must be a number"), SRC, key);
  return FALSE;
}

static gboolean
get_bool (JsonObject *obj, const char *key, gboolean *out, GError **error)
{
  JsonNode *n = json_object_get_member (obj, key);
  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    return TRUE;
  if (JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_BOOLEAN)
    {
      *out = json_node_get_boolean (n);
      return TRUE;
    }
  g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("%s: “%s” must be true or false"), SRC, key);
  return FALSE;
}

static const char *
get_string (JsonObject *obj, const char *key)
{
  JsonNode *n = json_object_get_member (obj, key);
  if (n && JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_STRING)
    return json_node_get_string (n);
  return NULL;
}

static gboolean
parse_rope_scaling (JsonObject *root, HoneModelConfig *c, GError **error)
{
  JsonNode *n = json_object_get_member (root, "rope_scaling");
  JsonObject *rs;
  const char *type;

  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    return TRUE;
  if (!JSON_NODE_HOLDS_OBJECT (n))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("%s: “rope_scaling” must be an object"), SRC);
      return FALSE;
    }
  rs = json_node_get_object (n);
  type = get_string (rs, "rope_type");
  if (type == NULL)
    type = get_string (rs, "type");
  if (type == NULL || strcmp (type, "default") == 0)
    return TRUE;
  if (strcmp (type, "linear") == 0)
    c->rope_scaling.type = HONE_ROPE_SCALING_LINEAR;
  else if (strcmp (type, "llama3") == 0)
    {
      gboolean found;
      c->rope_scaling.type = HONE_ROPE_SCALING_LLAMA3;
      /* transformers' defaults for keys a llama3 entry leaves out. */
      c->rope_scaling.low_freq_factor = 1.0f;
      c->rope_scaling.high_freq_factor = 4.0f;
      c->rope_scaling.original_context = 8192;
      if (!get_float (rs, "low_freq_factor", &c->rope_scaling.low_freq_factor, error)
          || !get_float (rs, "high_freq_factor", &c->rope_scaling.high_freq_factor, error)
          || !get_int (rs, "original_max_position_embeddings", &c->rope_scaling.original_context, &found, error))
        return FALSE;
    }
  else
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                   _("%s: rope scaling type “%s” is not supported"), SRC, type);
      return FALSE;
    }
  c->rope_scaling.factor = 1.0f;
  if (json_object_get_member (rs, "factor") == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("%s: “rope_scaling” has no “factor”"), SRC);
      return FALSE;
    }
  return get_float (rs, "factor", &c->rope_scaling.factor, error);
}

gboolean
hone_model_config_from_json (HoneModelConfig *config, const char *config_json, gssize length, GError **error)
{
  g_autoptr(JsonParser) parser = NULL;
  g_autoptr(GError) local = NULL;
  HoneModelConfig c = { 0 };
  const ArchInfo *arch = NULL;
  const char *model_type;
  JsonNode *root;
  JsonObject *obj;
  gboolean found, explicit_head_dim = FALSE, bias = FALSE;
  const char *act;
  gsize len;

  g_return_val_if_fail (config != NULL && config_json != NULL, FALSE);
  len = length < 0 ? strlen (config_json) : (gsize) length;
  if (len > CONFIG_MAX_BYTES)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("%s: file is too large"), SRC);
      return FALSE;
    }
  parser = json_parser_new_immutable ();
  if (!hone_json_load (parser, config_json, (gssize) len, CONFIG_MAX_DEPTH, &local))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("%s: %s"), SRC, local->message);
      return FALSE;
    }
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("%s: not a JSON object"), SRC);
      return FALSE;
    }
  obj = json_node_get_object (root);

  /* The architecture: model_type, else the first of "architectures". */
  model_type = get_string (obj, "model_type");
  if (model_type != NULL)
    {
      for (gsize i = 0; i < G_N_ELEMENTS (arch_table); i++)
        if (strcmp (arch_table[i].model_type, model_type) == 0)
          arch = &arch_table[i];
    }
  else
    {
      JsonNode *an = json_object_get_member (obj, "architectures");
      if (an && JSON_NODE_HOLDS_ARRAY (an) && json_array_get_length (json_node_get_array (an)) > 0)
        {
          JsonNode *first = json_array_get_element (json_node_get_array (an), 0);
          if (JSON_NODE_HOLDS_VALUE (first) && json_node_get_value_type (first) == G_TYPE_STRING)
            model_type = json_node_get_string (first);
          for (gsize i = 0; model_type && i < G_N_ELEMENTS (arch_table); i++)
            if (strcmp (arch_table[i].architecture, model_type) == 0)
              arch = &arch_table[i];
        }
      if (model_type == NULL)
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON,
                       _("%s: neither “model_type” nor “architectures” says what model this is"), SRC);
          return FALSE;
        }
    }
  if (arch == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_UNSUPPORTED_ARCH,
                   _("%s: model architecture “%s” is not supported (llama, mistral, qwen2, qwen3 are)"),
                   SRC, model_type);
      return FALSE;
    }
  c.arch = arch->arch;
  g_strlcpy (c.arch_name, arch->model_type, sizeof c.arch_name);

  if (!require_int (obj, "hidden_size", &c.hidden, error)
      || !require_int (obj, "num_hidden_layers", &c.n_layers, error)
      || !require_int (obj, "num_attention_heads", &c.n_heads, error)
      || !require_int (obj, "intermediate_size", &c.ffn, error)
      || !require_int (obj, "vocab_size", &c.vocab, error))
    return FALSE;
  c.n_kv_heads = c.n_heads;
  if (!get_int (obj, "num_key_value_heads", &c.n_kv_heads, &found, error)
      || !get_int (obj, "head_dim", &c.head_dim, &explicit_head_dim, error))
    return FALSE;
  if (!explicit_head_dim)
    {
      if (c.n_heads <= 0 || c.hidden % c.n_heads != 0)
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON,
                       _("%s: hidden_size %d is not a multiple of num_attention_heads %d"),
                       SRC, c.hidden, c.n_heads);
          return FALSE;
        }
      c.head_dim = c.hidden / c.n_heads;
    }
  c.max_context = arch->default_context;
  c.rope_theta = 10000.0f;
  c.rms_eps = 1e-6f;
  if (!get_int (obj, "max_position_embeddings", &c.max_context, &found, error)
      || !get_float (obj, "rope_theta", &c.rope_theta, error)
      || !get_float (obj, "rms_norm_eps", &c.rms_eps, error)
      || !get_bool (obj, "tie_word_embeddings", &c.tied_embeddings, error)
      || !parse_rope_scaling (obj, &c, error))
    return FALSE;

  /* Variants we would compute wrongly: refuse them by name. */
  act = get_string (obj, "hidden_act");
  if (act != NULL && strcmp (act, "silu") != 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                   _("%s: activation “%s” is not supported (silu is)"), SRC, act);
      return FALSE;
    }
  if (!get_bool (obj, "attention_bias", &bias, error))
    return FALSE;
  if (bias && c.arch != HONE_ARCH_QWEN2)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                   _("%s: attention_bias is not supported for %s"), SRC, c.arch_name);
      return FALSE;
    }
  bias = FALSE;
  if (!get_bool (obj, "mlp_bias", &bias, error))
    return FALSE;
  if (bias)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED, _("%s: mlp_bias is not supported"), SRC);
      return FALSE;
    }

  /* HF checkpoints keep the half-split row order for every architecture. */
  c.rope_pairing = HONE_ROPE_PAIRS_HALF;
  c.qkv_bias = c.arch == HONE_ARCH_QWEN2;
  c.qk_norm = c.arch == HONE_ARCH_QWEN3;

  if (!hone_model_config_validate (&c, HONE_ERROR_INVALID_JSON, SRC, error))
    return FALSE;
  *config = c;
  return TRUE;
}
