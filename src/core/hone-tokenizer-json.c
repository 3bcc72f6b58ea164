/* hone-tokenizer-json.c — a HoneTokenizer from HF tokenizer.json (+ tokenizer_config.json).
 *
 * Reads the parts of the tokenizers format that BPE models use: model BPE
 * (vocab, merges as "a b" strings or [a, b] pairs, unk_token, byte_fallback,
 * fuse_unk, ignore_merges), added_tokens, the normalizer (NFC/NFD/NFKC/NFKD,
 * Lowercase, Prepend, Replace, Sequence), the pre-tokenizer (ByteLevel, Split,
 * Digits, Metaspace, Sequence), the decoder (ByteLevel; Strip/Metaspace for
 * the leading space) and the post-processor (TemplateProcessing). Anything
 * else is refused with HONE_ERROR_TOKENIZER naming it, rather than guessed.
 */
#include <inttypes.h>
#include "hone-tokenizer-private.h"
#include "hone-error.h"
#include "hone-i18n.h"
#include "hone-json.h"

/* tokenizer.json nests a few levels (normalizer and pre-tokenizer sequences); json-glib recurses. */
#define HONE_TOKENIZER_JSON_MAX_DEPTH 64

#include <json-glib/json-glib.h>
#include <string.h>

#define TOKENIZER_ERROR(...) g_set_error (error, HONE_ERROR, HONE_ERROR_TOKENIZER, __VA_ARGS__)
#define SHAPE_ERROR(...) g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, __VA_ARGS__)

/* ---- checked getters (json-glib asserts on wrong types; the object, array,
 * string and boolean members: hone_json_get_*) ---- */

static gboolean
node_int (JsonNode *n, gint64 *out)
{
  if (n && JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_INT64)
    {
      *out = json_node_get_int (n);
      return TRUE;
    }
  return FALSE;
}

static gboolean
has_member (JsonObject *o, const char *name)
{
  return o && json_object_has_member (o, name);
}

/* A token given as "text" or {"content": "text"} (tokenizer_config style). */
static const char *
token_string (JsonObject *o, const char *name)
{
  const char *s = hone_json_get_string (o, name, NULL);
  if (s == NULL)
    s = hone_json_get_string (hone_json_get_object (o, name), "content", NULL);
  return s;
}

static JsonObject *
parse_object (const char *data, gssize length, const char *what, JsonParser **parser, GError **error)
{
  GError *local = NULL;
  JsonNode *root;
  *parser = json_parser_new ();
  if (length < 0)
    length = (gssize) strlen (data);
  if (!hone_json_load (*parser, data, length, HONE_TOKENIZER_JSON_MAX_DEPTH, &local))
    {
      SHAPE_ERROR (_("%s is not valid JSON: %s"), what, local->message);
      g_error_free (local);
      return NULL;
    }
  root = json_parser_get_root (*parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      SHAPE_ERROR (_("%s is not a JSON object"), what);
      return NULL;
    }
  return json_node_get_object (root);
}

/* ---- pipeline parts ---- */

static gboolean
add_norm (HoneTokenizer *tok, JsonObject *n, GError **error)
{
  const char *type = hone_json_get_string (n, "type", NULL);
  HoneNormStep st = { 0, NULL, NULL };

  if (type == NULL)
    {
      SHAPE_ERROR (_("tokenizer.json: a normalizer has no type"));
      return FALSE;
    }
  if (g_str_equal (type, "Sequence"))
    {
      JsonArray *a = hone_json_get_array (n, "normalizers");
      guint i;
      for (i = 0; a && i < json_array_get_length (a); i++)
        {
          JsonNode *e = json_array_get_element (a, i);
          if (!JSON_NODE_HOLDS_OBJECT (e) || !add_norm (tok, json_node_get_object (e), error))
            {
              if (error && *error == NULL)
                SHAPE_ERROR (_("tokenizer.json: normalizer %u of a Sequence is not an object"), i);
              return FALSE;
            }
        }
      return TRUE;
    }
  if (g_str_equal (type, "NFC")) st.kind = HONE_NORM_NFC;
  else if (g_str_equal (type, "NFD")) st.kind = HONE_NORM_NFD;
  else if (g_str_equal (type, "NFKC")) st.kind = HONE_NORM_NFKC;
  else if (g_str_equal (type, "NFKD")) st.kind = HONE_NORM_NFKD;
  else if (g_str_equal (type, "Lowercase")) st.kind = HONE_NORM_LOWERCASE;
  else if (g_str_equal (type, "Prepend"))
    {
      const char *p = hone_json_get_string (n, "prepend", NULL);
      if (p == NULL)
        {
          SHAPE_ERROR (_("tokenizer.json: Prepend normalizer without “prepend”"));
          return FALSE;
        }
      st.kind = HONE_NORM_PREPEND;
      st.a = g_strdup (p);
    }
  else if (g_str_equal (type, "Replace"))
    {
      const char *pat = hone_json_get_string (hone_json_get_object (n, "pattern"), "String", NULL);
      const char *content = hone_json_get_string (n, "content", NULL);
      if (pat == NULL || content == NULL)
        {
          TOKENIZER_ERROR (_("tokenizer.json: only Replace normalizers with a String pattern are supported"));
          return FALSE;
        }
      st.kind = HONE_NORM_REPLACE;
      st.a = g_strdup (pat);
      st.b = g_strdup (content);
    }
  else
    {
      TOKENIZER_ERROR (_("tokenizer.json: unsupported normalizer “%s”"), type);
      return FALSE;
    }
  tok->norm = g_renew (HoneNormStep, tok->norm, tok->n_norm + 1);
  tok->norm[tok->n_norm++] = st;
  return TRUE;
}

static gboolean
add_stage (HoneTokenizer *tok, HonePreKind kind, const char *pattern, HoneSplitBehavior behavior,
           gboolean invert, GError **error)
{
  HonePreStage st = { kind, NULL, behavior, invert, FALSE };
  if (pattern)
    {
      st.regex = hone_pretokenizer_compile (pattern, error);
      if (st.regex == NULL)
        return FALSE;
    }
  tok->pre = g_renew (HonePreStage, tok->pre, tok->n_pre + 1);
  tok->pre[tok->n_pre++] = st;
  return TRUE;
}

static gboolean
parse_behavior (const char *b, HoneSplitBehavior *out)
{
  static const char *const names[] = { "Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous" };
  guint i;
  for (i = 0; b && i < G_N_ELEMENTS (names); i++)
    if (g_str_equal (b, names[i]))
      {
        *out = (HoneSplitBehavior) i;
        return TRUE;
      }
  return FALSE;
}

static gboolean
add_pre (HoneTokenizer *tok, JsonObject *p, gboolean first, GError **error)
{
  const char *type = hone_json_get_string (p, "type", NULL);
  if (type == NULL)
    {
      SHAPE_ERROR (_("tokenizer.json: a pre-tokenizer has no type"));
      return FALSE;
    }
  if (g_str_equal (type, "Sequence"))
    {
      JsonArray *a = hone_json_get_array (p, "pretokenizers");
      guint i;
      for (i = 0; a && i < json_array_get_length (a); i++)
        {
          JsonNode *e = json_array_get_element (a, i);
          if (!JSON_NODE_HOLDS_OBJECT (e))
            {
              SHAPE_ERROR (_("tokenizer.json: pre-tokenizer %u of a Sequence is not an object"), i);
              return FALSE;
            }
          if (!add_pre (tok, json_node_get_object (e), first && i == 0, error))
            return FALSE;
        }
      return TRUE;
    }
  if (g_str_equal (type, "ByteLevel"))
    {
      tok->byte_level = TRUE;
      if (hone_json_get_bool (p, "add_prefix_space", FALSE))
        {
          if (!first)
            {
              TOKENIZER_ERROR (_("tokenizer.json: ByteLevel with add_prefix_space after other pre-tokenizers is not supported"));
              return FALSE;
            }
          tok->byte_level_prefix_space = TRUE;
        }
      if (hone_json_get_bool (p, "use_regex", TRUE))
        return add_stage (tok, HONE_PRE_SPLIT_REGEX, hone_pretokenizer_gpt2_regex, HONE_SPLIT_ISOLATED, FALSE, error);
      return TRUE;
    }
  if (g_str_equal (type, "Split"))
    {
      JsonObject *pat = hone_json_get_object (p, "pattern");
      const char *re = hone_json_get_string (pat, "Regex", NULL);
      const char *lit = hone_json_get_string (pat, "String", NULL);
      HoneSplitBehavior behavior;
      g_autofree char *escaped = NULL;
      if (!parse_behavior (hone_json_get_string (p, "behavior", NULL), &behavior) || (re == NULL && lit == NULL))
        {
          SHAPE_ERROR (_("tokenizer.json: Split pre-tokenizer needs a pattern and a known behavior"));
          return FALSE;
        }
      if (re == NULL)
        re = escaped = g_regex_escape_string (lit, -1);
      return add_stage (tok, HONE_PRE_SPLIT_REGEX, re, behavior, hone_json_get_bool (p, "invert", FALSE), error);
    }
  if (g_str_equal (type, "Digits"))
    {
      gboolean individual = hone_json_get_bool (p, "individual_digits", FALSE);
      return add_stage (tok, HONE_PRE_SPLIT_REGEX, "\\p{N}",
                        individual ? HONE_SPLIT_ISOLATED : HONE_SPLIT_CONTIGUOUS, FALSE, error);
    }
  if (g_str_equal (type, "Metaspace"))
    {
      const char *repl = hone_json_get_string (p, "replacement", NULL);
      const char *scheme = hone_json_get_string (p, "prepend_scheme", NULL);
      if (tok->metaspace || !first)
        {
          TOKENIZER_ERROR (_("tokenizer.json: Metaspace must be the first pre-tokenizer"));
          return FALSE;
        }
      tok->metaspace = TRUE;
      tok->metaspace_repl = g_strdup (repl ? repl : "\xe2\x96\x81");
      if (scheme)
        tok->metaspace_prepend = g_str_equal (scheme, "always") ? 2 : g_str_equal (scheme, "first") ? 1 : 0;
      else
        tok->metaspace_prepend = hone_json_get_bool (p, "add_prefix_space", TRUE) ? 2 : 0;
      if (hone_json_get_bool (p, "split", TRUE))
        {
          if (!g_str_equal (tok->metaspace_repl, "\xe2\x96\x81"))
            {
              TOKENIZER_ERROR (_("tokenizer.json: Metaspace split on “%s” is not supported"), tok->metaspace_repl);
              return FALSE;
            }
          return add_stage (tok, HONE_PRE_METASPACE_SPLIT, NULL, HONE_SPLIT_MERGED_WITH_NEXT, FALSE, error);
        }
      return TRUE;
    }
  TOKENIZER_ERROR (_("tokenizer.json: unsupported pre-tokenizer “%s”"), type);
  return FALSE;
}

static void
scan_decoder (HoneTokenizer *tok, JsonObject *d)
{
  const char *type = hone_json_get_string (d, "type", NULL);
  if (type == NULL)
    return;
  if (g_str_equal (type, "Sequence"))
    {
      JsonArray *a = hone_json_get_array (d, "decoders");
      guint i;
      for (i = 0; a && i < json_array_get_length (a); i++)
        {
          JsonNode *e = json_array_get_element (a, i);
          if (JSON_NODE_HOLDS_OBJECT (e))
            scan_decoder (tok, json_node_get_object (e));
        }
    }
  else if (g_str_equal (type, "Strip"))
    {
      const char *c = hone_json_get_string (d, "content", NULL);
      JsonNode *start = json_object_get_member (d, "start");
      gint64 n = 0;
      if (c && g_str_equal (c, " ") && node_int (start, &n) && n >= 1)
        tok->strip_leading_space = TRUE;
    }
  else if (g_str_equal (type, "Metaspace"))
    {
      const char *scheme = hone_json_get_string (d, "prepend_scheme", NULL);
      if (scheme ? !g_str_equal (scheme, "never") : hone_json_get_bool (d, "add_prefix_space", TRUE))
        tok->strip_leading_space = TRUE;
    }
}

static gboolean
template_ids (JsonObject *pp, GArray *prefix, GArray *suffix, GError **error)
{
  JsonArray *single = hone_json_get_array (pp, "single");
  JsonObject *specials = hone_json_get_object (pp, "special_tokens");
  gboolean seen_a = FALSE;
  guint i;
  for (i = 0; single && i < json_array_get_length (single); i++)
    {
      JsonNode *e = json_array_get_element (single, i);
      JsonObject *o = JSON_NODE_HOLDS_OBJECT (e) ? json_node_get_object (e) : NULL;
      JsonObject *sp = hone_json_get_object (o, "SpecialToken");
      if (hone_json_get_object (o, "Sequence"))
        {
          seen_a = TRUE;
          continue;
        }
      if (sp)
        {
          const char *name = hone_json_get_string (sp, "id", NULL);
          JsonArray *ids = hone_json_get_array (hone_json_get_object (specials, name ? name : ""), "ids");
          guint j;
          if (ids == NULL)
            {
              SHAPE_ERROR (_("tokenizer.json: TemplateProcessing names special token “%s” without ids"),
                           name ? name : "");
              return FALSE;
            }
          for (j = 0; j < json_array_get_length (ids); j++)
            {
              gint64 v;
              gint32 id;
              if (!node_int (json_array_get_element (ids, j), &v) || v < 0 || v > G_MAXINT32)
                {
                  SHAPE_ERROR (_("tokenizer.json: bad id for special token “%s”"), name);
                  return FALSE;
                }
              id = (gint32) v;
              g_array_append_vals (seen_a ? suffix : prefix, &id, 1);
            }
        }
    }
  return TRUE;
}

static gboolean
parse_post (HoneTokenizer *tok, JsonObject *pp, GError **error)
{
  const char *type = hone_json_get_string (pp, "type", NULL);
  if (type == NULL || g_str_equal (type, "ByteLevel"))
    return TRUE;
  if (g_str_equal (type, "TemplateProcessing"))
    return template_ids (pp, tok->prefix_ids, tok->suffix_ids, error);
  if (g_str_equal (type, "Sequence"))
    {
      JsonArray *a = hone_json_get_array (pp, "processors");
      guint i;
      for (i = 0; a && i < json_array_get_length (a); i++)
        {
          JsonNode *e = json_array_get_element (a, i);
          if (JSON_NODE_HOLDS_OBJECT (e) && !parse_post (tok, json_node_get_object (e), error))
            return FALSE;
        }
      return TRUE;
    }
  TOKENIZER_ERROR (_("tokenizer.json: unsupported post-processor “%s”"), type);
  return FALSE;
}

/* ---- the model ---- */

typedef struct {
  HoneTokenizer *tok;
  GError **error;
  gboolean failed;
} VocabFill;

static void
fill_vocab (JsonObject *o, const char *name, JsonNode *node, gpointer data)
{
  VocabFill *f = data;
  gint64 id;
  HoneTokenType type = HONE_TOKEN_NORMAL;
  gsize len = strlen (name);
  if (f->failed)
    return;
  if (!node_int (node, &id))
    {
      g_set_error (f->error, HONE_ERROR, HONE_ERROR_INVALID_JSON,
                   _("tokenizer.json: vocab entry “%s” has no integer id"), name);
      f->failed = TRUE;
      return;
    }
  if (!f->tok->byte_level && len == 6 && g_str_has_prefix (name, "<0x") && name[5] == '>')
    type = HONE_TOKEN_BYTE;
  if (!_hone_tokenizer_set_token (f->tok, (int) CLAMP (id, -1, G_MAXINT), name, len, type, f->error))
    f->failed = TRUE;
}

static gboolean
split_merge (JsonNode *e, const char **l, gsize *ll, const char **r, gsize *rl)
{
  if (JSON_NODE_HOLDS_ARRAY (e))
    {
      JsonArray *a = json_node_get_array (e);
      JsonNode *x, *y;
      if (json_array_get_length (a) != 2)
        return FALSE;
      x = json_array_get_element (a, 0);
      y = json_array_get_element (a, 1);
      if (!JSON_NODE_HOLDS_VALUE (x) || json_node_get_value_type (x) != G_TYPE_STRING ||
          !JSON_NODE_HOLDS_VALUE (y) || json_node_get_value_type (y) != G_TYPE_STRING)
        return FALSE;
      *l = json_node_get_string (x);
      *r = json_node_get_string (y);
      *ll = strlen (*l);
      *rl = strlen (*r);
      return TRUE;
    }
  if (JSON_NODE_HOLDS_VALUE (e) && json_node_get_value_type (e) == G_TYPE_STRING)
    {
      const char *s = json_node_get_string (e);
      const char *sp = strchr (s, ' ');
      if (sp == NULL)
        return FALSE;
      *l = s;
      *ll = (gsize) (sp - s);
      *r = sp + 1;
      *rl = strlen (sp + 1);
      return TRUE;
    }
  return FALSE;
}

static int
max_id (JsonObject *vocab, JsonArray *added, GError **error)
{
  gint64 m = -1;
  GList *names = json_object_get_members (vocab), *l;
  guint i;
  for (l = names; l; l = l->next)
    {
      gint64 v;
      if (!node_int (json_object_get_member (vocab, l->data), &v))
        {
          SHAPE_ERROR (_("tokenizer.json: vocab entry “%s” has no integer id"), (const char *) l->data);
          g_list_free (names);
          return -1;
        }
      if (v > m)
        m = v;
    }
  g_list_free (names);
  for (i = 0; added && i < json_array_get_length (added); i++)
    {
      JsonNode *e = json_array_get_element (added, i);
      gint64 v;
      if (JSON_NODE_HOLDS_OBJECT (e) && node_int (json_object_get_member (json_node_get_object (e), "id"), &v) && v > m)
        m = v;
    }
  if (m >= 16 * 1024 * 1024)
    {
      TOKENIZER_ERROR (_("tokenizer.json: token id %" PRId64 " is implausibly large"), m);
      return -1;
    }
  if (m < 0)
    {
      TOKENIZER_ERROR (_("tokenizer.json: the vocabulary is empty"));
      return -1;
    }
  return (int) m;
}

HoneTokenizer *
hone_tokenizer_new_from_json (const char *tokenizer_json, gssize length,
                              const char *tokenizer_config_json, gssize config_length,
                              GError **error)
{
  g_autoptr (JsonParser) parser = NULL;
  g_autoptr (JsonParser) cparser = NULL;
  JsonObject *root, *model, *config = NULL, *pre, *norm;
  JsonArray *merges, *added;
  JsonObject *vocab;
  const char *type, *unk, *s;
  HoneTokenizer *tok;
  VocabFill fill;
  int top;
  guint i;

  g_return_val_if_fail (tokenizer_json != NULL, NULL);
  root = parse_object (tokenizer_json, length, "tokenizer.json", &parser, error);
  if (root == NULL)
    return NULL;
  if (tokenizer_config_json)
    {
      config = parse_object (tokenizer_config_json, config_length, "tokenizer_config.json", &cparser, error);
      if (config == NULL)
        return NULL;
    }

  model = hone_json_get_object (root, "model");
  if (model == NULL)
    {
      SHAPE_ERROR (_("tokenizer.json has no “model” object"));
      return NULL;
    }
  type = hone_json_get_string (model, "type", NULL);
  if (type == NULL && has_member (model, "merges"))
    type = "BPE";
  if (type == NULL || !g_str_equal (type, "BPE"))
    {
      TOKENIZER_ERROR (_("Unsupported tokenizer model type “%s” (only BPE is supported)"),
                       type ? type : "(none)");
      return NULL;
    }
  vocab = hone_json_get_object (model, "vocab");
  merges = hone_json_get_array (model, "merges");
  if (vocab == NULL || merges == NULL)
    {
      SHAPE_ERROR (_("tokenizer.json: the BPE model needs “vocab” (object) and “merges” (array)"));
      return NULL;
    }
  if (hone_json_get_string (model, "continuing_subword_prefix", NULL)
      || hone_json_get_string (model, "end_of_word_suffix", NULL))
    {
      TOKENIZER_ERROR (_("tokenizer.json: BPE with a subword prefix or end-of-word suffix is not supported"));
      return NULL;
    }
  added = hone_json_get_array (root, "added_tokens");
  top = max_id (vocab, added, error);
  if (top < 0)
    return NULL;

  tok = _hone_tokenizer_alloc (HONE_TOKENIZER_SPM_BPE, top + 1);

  /* The pipeline first: byte_level decides how vocab entries are typed. */
  norm = hone_json_get_object (root, "normalizer");
  if (norm && !add_norm (tok, norm, error))
    goto fail;
  pre = hone_json_get_object (root, "pre_tokenizer");
  if (pre && !add_pre (tok, pre, TRUE, error))
    goto fail;
  if (tok->byte_level)
    tok->kind = HONE_TOKENIZER_BYTE_BPE;
  scan_decoder (tok, hone_json_get_object (root, "decoder"));

  fill.tok = tok;
  fill.error = error;
  fill.failed = FALSE;
  json_object_foreach_member (vocab, fill_vocab, &fill);
  if (fill.failed)
    goto fail;

  for (i = 0; added && i < json_array_get_length (added); i++)
    {
      JsonNode *e = json_array_get_element (added, i);
      JsonObject *a = JSON_NODE_HOLDS_OBJECT (e) ? json_node_get_object (e) : NULL;
      const char *content = hone_json_get_string (a, "content", NULL);
      gint64 id;
      gboolean special = hone_json_get_bool (a, "special", FALSE);
      if (content == NULL || !node_int (json_object_get_member (a, "id"), &id))
        {
          SHAPE_ERROR (_("tokenizer.json: added token %u needs “id” and “content”"), i);
          goto fail;
        }
      if (!_hone_tokenizer_set_token (tok, (int) CLAMP (id, -1, G_MAXINT), content, strlen (content),
                                      special ? HONE_TOKEN_CONTROL : HONE_TOKEN_USER_DEFINED, error))
        goto fail;
      if (content[0] != '\0')
        _hone_tokenizer_add_added (tok, (int) id, special, hone_json_get_bool (a, "lstrip", FALSE),
                                   hone_json_get_bool (a, "rstrip", FALSE));
    }

  tok->byte_fallback = hone_json_get_bool (model, "byte_fallback", FALSE);
  tok->fuse_unk = hone_json_get_bool (model, "fuse_unk", FALSE);
  tok->ignore_merges = hone_json_get_bool (model, "ignore_merges", FALSE);
  if (!_hone_tokenizer_finish (tok, error))
    goto fail;
  unk = hone_json_get_string (model, "unk_token", NULL);
  if (unk)
    {
      tok->unk_id = _hone_tokenizer_lookup (tok, unk, strlen (unk));
      if (tok->unk_id < 0)
        {
          TOKENIZER_ERROR (_("tokenizer.json: unk_token “%s” is not in the vocabulary"), unk);
          goto fail;
        }
      if (tok->types[tok->unk_id] == HONE_TOKEN_NORMAL)
        tok->types[tok->unk_id] = HONE_TOKEN_UNKNOWN;
    }

  hone_merge_map_init (&tok->merges, json_array_get_length (merges));
  for (i = 0; i < json_array_get_length (merges); i++)
    {
      const char *l, *r;
      gsize ll, rl;
      if (!split_merge (json_array_get_element (merges, i), &l, &ll, &r, &rl))
        {
          SHAPE_ERROR (_("tokenizer.json: merge %u is neither “a b” nor [a, b]"), i);
          goto fail;
        }
      if (!_hone_tokenizer_add_merge (tok, l, ll, r, rl, (int) i, error))
        goto fail;
    }

  if (!parse_post (tok, hone_json_get_object (root, "post_processor"), error))
    goto fail;
  for (i = 0; i < tok->prefix_ids->len + tok->suffix_ids->len; i++)
    {
      gint32 id = i < tok->prefix_ids->len ? g_array_index (tok->prefix_ids, gint32, i)
                                           : g_array_index (tok->suffix_ids, gint32, i - tok->prefix_ids->len);
      if (id >= tok->n_vocab)
        {
          TOKENIZER_ERROR (_("tokenizer.json: post-processor token id %d is outside the vocabulary"), id);
          goto fail;
        }
    }

  /* BOS/EOS: tokenizer_config.json names them; else the template's first token is BOS. */
  s = token_string (config, "bos_token");
  if (s)
    tok->bos = _hone_tokenizer_lookup (tok, s, strlen (s));
  else if (tok->prefix_ids->len > 0)
    tok->bos = g_array_index (tok->prefix_ids, gint32, 0);
  s = token_string (config, "eos_token");
  if (s)
    tok->eos = _hone_tokenizer_lookup (tok, s, strlen (s));
  if (tok->eos >= 0)
    tok->eog[tok->eos] = TRUE;
  /* Explicit add_bos_token/add_eos_token (LlamaTokenizerFast rebuilds its
   * template from them). */
  if (has_member (config, "add_bos_token") && tok->bos >= 0)
    {
      gboolean want = hone_json_get_bool (config, "add_bos_token", FALSE);
      if (want != hone_tokenizer_adds_bos (tok))
        {
          g_array_set_size (tok->prefix_ids, 0);
          if (want)
            g_array_append_vals (tok->prefix_ids, &tok->bos, 1);
        }
    }
  if (has_member (config, "add_eos_token") && tok->eos >= 0)
    {
      g_array_set_size (tok->suffix_ids, 0);
      if (hone_json_get_bool (config, "add_eos_token", FALSE))
        g_array_append_vals (tok->suffix_ids, &tok->eos, 1);
    }
  return tok;

fail:
  hone_tokenizer_free (tok);
  return NULL;
}

HoneTokenizer *
hone_tokenizer_new_from_hf_dir (const char *dir, GError **error)
{
  g_autofree char *path = g_build_filename (dir, "tokenizer.json", NULL);
  g_autofree char *cpath = g_build_filename (dir, "tokenizer_config.json", NULL);
  g_autofree char *data = NULL, *cdata = NULL;
  gsize len = 0, clen = 0;
  GError *local = NULL;

  if (!g_file_get_contents (path, &data, &len, &local))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("Cannot read %s: %s"), path, local->message);
      g_error_free (local);
      return NULL;
    }
  if (g_file_test (cpath, G_FILE_TEST_EXISTS) && !g_file_get_contents (cpath, &cdata, &clen, &local))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("Cannot read %s: %s"), cpath, local->message);
      g_error_free (local);
      return NULL;
    }
  return hone_tokenizer_new_from_json (data, (gssize) len, cdata, (gssize) clen, error);
}
