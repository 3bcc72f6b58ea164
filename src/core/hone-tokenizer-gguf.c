/* hone-tokenizer-gguf.c — a HoneTokenizer from GGUF tokenizer.ggml.* metadata.
 *
 * Follows llama.cpp (llama-vocab.cpp): model "gpt2" is byte-level BPE with
 * merges and the regex list of tokenizer.ggml.pre; model "llama" is the
 * SentencePiece-style tokenizer that merges by token score, with <0xNN> byte
 * fallback and a space prefix. CONTROL/UNKNOWN tokens are split out of the
 * text only when special parsing is asked for; USER_DEFINED ones always.
 */
#include <inttypes.h>
#include "hone-tokenizer-private.h"
#include "hone-gguf.h"
#include "hone-error.h"
#include "hone-i18n.h"

#include <string.h>

#define TOKENIZER_ERROR(...) g_set_error (error, HONE_ERROR, HONE_ERROR_TOKENIZER, __VA_ARGS__)

static gboolean
read_i32 (const void *data, HoneGgufType t, guint64 i, gint64 *out)
{
  const guint8 *p = data;
  switch (t)
    {
    case HONE_GGUF_INT32: { gint32 v; memcpy (&v, p + i * 4, 4); *out = GINT32_FROM_LE (v); return TRUE; }
    case HONE_GGUF_UINT32: { guint32 v; memcpy (&v, p + i * 4, 4); *out = GUINT32_FROM_LE (v); return TRUE; }
    case HONE_GGUF_INT8: *out = (gint8) p[i]; return TRUE;
    case HONE_GGUF_UINT8: *out = p[i]; return TRUE;
    default: return FALSE;
    }
}

HoneTokenizer *
hone_tokenizer_new_from_gguf (const HoneGguf *gguf, GError **error)
{
  const char *model, *pre_s;
  gsize model_len = 0, pre_len = 0;
  g_autofree char *model_name = NULL, *pre = NULL;
  HoneGgufType tt = 0, st = 0;
  guint64 n_tokens = 0, n_types = 0, n_scores = 0, i;
  const void *types = NULL, *scores = NULL;
  HoneTokenizer *tok;
  gboolean spm, flag;
  guint32 u;
  int tidx;

  g_return_val_if_fail (gguf != NULL, NULL);
  model = hone_gguf_get_string (gguf, "tokenizer.ggml.model", &model_len);
  if (model == NULL)
    {
      TOKENIZER_ERROR (_("The GGUF file has no tokenizer (tokenizer.ggml.model is missing)"));
      return NULL;
    }
  model_name = g_strndup (model, model_len);
  if (g_str_equal (model_name, "gpt2"))
    spm = FALSE;
  else if (g_str_equal (model_name, "llama"))
    spm = TRUE;
  else
    {
      TOKENIZER_ERROR (_("Unsupported tokenizer model “%s” (supported: gpt2, llama)"), model_name);
      return NULL;
    }

  tidx = hone_gguf_find_kv (gguf, "tokenizer.ggml.tokens");
  if (tidx < 0 || hone_gguf_kv_type (gguf, (guint) tidx) != HONE_GGUF_ARRAY ||
      hone_gguf_kv_array_type (gguf, (guint) tidx) != HONE_GGUF_STRING)
    {
      TOKENIZER_ERROR (_("tokenizer.ggml.tokens is missing or not an array of strings"));
      return NULL;
    }
  n_tokens = hone_gguf_kv_array_length (gguf, (guint) tidx);
  if (n_tokens == 0 || n_tokens > 16 * 1024 * 1024)
    {
      TOKENIZER_ERROR (_("tokenizer.ggml.tokens has %" PRIu64 " entries"), n_tokens);
      return NULL;
    }
  if (hone_gguf_find_kv (gguf, "tokenizer.ggml.token_type") >= 0)
    {
      types = hone_gguf_get_array (gguf, "tokenizer.ggml.token_type", &tt, &n_types);
      if (types == NULL || n_types != n_tokens || !(tt == HONE_GGUF_INT32 || tt == HONE_GGUF_UINT32 ||
                                                    tt == HONE_GGUF_INT8 || tt == HONE_GGUF_UINT8))
        {
          TOKENIZER_ERROR (_("tokenizer.ggml.token_type does not match tokenizer.ggml.tokens"));
          return NULL;
        }
    }
  if (hone_gguf_find_kv (gguf, "tokenizer.ggml.scores") >= 0)
    {
      scores = hone_gguf_get_array (gguf, "tokenizer.ggml.scores", &st, &n_scores);
      if (scores == NULL || n_scores != n_tokens || st != HONE_GGUF_FLOAT32)
        {
          TOKENIZER_ERROR (_("tokenizer.ggml.scores does not match tokenizer.ggml.tokens"));
          return NULL;
        }
    }

  tok = _hone_tokenizer_alloc (spm ? HONE_TOKENIZER_SPM_BPE : HONE_TOKENIZER_BYTE_BPE, (int) n_tokens);
  tok->byte_level = !spm;
  tok->use_scores = spm;
  tok->byte_fallback = spm;
  if (spm)
    {
      tok->scores = g_new0 (float, n_tokens);
      tok->strip_leading_space = TRUE;
    }
  for (i = 0; i < n_tokens; i++)
    {
      gsize len = 0;
      const char *s = hone_gguf_get_array_string (gguf, "tokenizer.ggml.tokens", i, &len);
      gint64 type = HONE_TOKEN_NORMAL;
      if (s == NULL)
        {
          TOKENIZER_ERROR (_("tokenizer.ggml.tokens[%" PRIu64 "] cannot be read"), i);
          goto fail;
        }
      if (types)
        read_i32 (types, tt, i, &type);
      if (type < HONE_TOKEN_NORMAL || type > HONE_TOKEN_BYTE)
        type = HONE_TOKEN_NORMAL;
      if (!_hone_tokenizer_set_token (tok, (int) i, s, len, (HoneTokenType) type, error))
        goto fail;
      if (scores)
        {
          float f;
          memcpy (&f, (const guint8 *) scores + i * 4, 4);
          tok->scores[i] = f;
        }
      if ((type == HONE_TOKEN_CONTROL || type == HONE_TOKEN_UNKNOWN || type == HONE_TOKEN_USER_DEFINED) && len > 0)
        _hone_tokenizer_add_added (tok, (int) i, type != HONE_TOKEN_USER_DEFINED, FALSE, FALSE);
    }
  if (!_hone_tokenizer_finish (tok, error))
    goto fail;

  if (!spm)
    {
      gboolean ignore_merges = FALSE;
      const char *const *regexes;
      int midx = hone_gguf_find_kv (gguf, "tokenizer.ggml.merges");
      guint64 n_merges;
      pre_s = hone_gguf_get_string (gguf, "tokenizer.ggml.pre", &pre_len);
      pre = pre_s ? g_strndup (pre_s, pre_len) : NULL;
      regexes = hone_pretokenizer_llama_regexes (pre, &ignore_merges);
      if (regexes == NULL)
        {
          TOKENIZER_ERROR (_("Unsupported pre-tokenizer type “%s” (tokenizer.ggml.pre)"), pre);
          goto fail;
        }
      tok->ignore_merges = ignore_merges;
      for (; *regexes; regexes++)
        {
          GRegex *re = hone_pretokenizer_compile (*regexes, error);
          HonePreStage stage = { HONE_PRE_SPLIT_REGEX, re, HONE_SPLIT_ISOLATED, FALSE, FALSE };
          if (re == NULL)
            goto fail;
          tok->pre = g_renew (HonePreStage, tok->pre, tok->n_pre + 1);
          tok->pre[tok->n_pre++] = stage;
        }
      if (midx < 0 || hone_gguf_kv_type (gguf, (guint) midx) != HONE_GGUF_ARRAY ||
          hone_gguf_kv_array_type (gguf, (guint) midx) != HONE_GGUF_STRING)
        {
          TOKENIZER_ERROR (_("tokenizer.ggml.merges is missing or not an array of strings"));
          goto fail;
        }
      n_merges = hone_gguf_kv_array_length (gguf, (guint) midx);
      hone_merge_map_init (&tok->merges, (guint) MIN (n_merges, G_MAXUINT / 4));
      for (i = 0; i < n_merges; i++)
        {
          gsize len = 0;
          const char *s = hone_gguf_get_array_string (gguf, "tokenizer.ggml.merges", i, &len);
          const char *sp = s && len > 1 ? memchr (s + 1, ' ', len - 1) : NULL;
          if (sp == NULL)
            {
              TOKENIZER_ERROR (_("tokenizer.ggml.merges[%" PRIu64 "] is not “a b”"), i);
              goto fail;
            }
          if (!_hone_tokenizer_add_merge (tok, s, (gsize) (sp - s), sp + 1, len - (gsize) (sp - s) - 1,
                                          (int) i, error))
            goto fail;
        }
    }
  else
    {
      tok->spm_add_space_prefix = TRUE;
      if (hone_gguf_get_bool (gguf, "tokenizer.ggml.add_space_prefix", &flag))
        tok->spm_add_space_prefix = flag;
      tok->strip_leading_space = tok->spm_add_space_prefix;
      tok->bos = 1;
      tok->eos = 2;
      tok->unk_id = 0;
    }

  if (hone_gguf_get_u32 (gguf, "tokenizer.ggml.bos_token_id", &u))
    tok->bos = u < (guint32) tok->n_vocab ? (int) u : -1;
  if (hone_gguf_get_u32 (gguf, "tokenizer.ggml.eos_token_id", &u))
    tok->eos = u < (guint32) tok->n_vocab ? (int) u : -1;
  if (hone_gguf_get_u32 (gguf, "tokenizer.ggml.unknown_token_id", &u))
    tok->unk_id = u < (guint32) tok->n_vocab ? (int) u : -1;
  if (tok->bos >= tok->n_vocab) tok->bos = -1;
  if (tok->eos >= tok->n_vocab) tok->eos = -1;
  if (tok->unk_id >= tok->n_vocab) tok->unk_id = -1;
  if (!spm)
    tok->unk_id = -1;   /* llama.cpp's BPE drops what it cannot map; HF has no unk here either */
  if (tok->eos >= 0)
    tok->eog[tok->eos] = TRUE;
  if (hone_gguf_get_u32 (gguf, "tokenizer.ggml.eot_token_id", &u) && u < (guint32) tok->n_vocab)
    tok->eog[u] = TRUE;
  if (hone_gguf_get_u32 (gguf, "tokenizer.ggml.eom_token_id", &u) && u < (guint32) tok->n_vocab)
    tok->eog[u] = TRUE;

  flag = spm;
  hone_gguf_get_bool (gguf, "tokenizer.ggml.add_bos_token", &flag);
  if (flag && tok->bos >= 0)
    g_array_append_vals (tok->prefix_ids, &tok->bos, 1);
  flag = FALSE;
  hone_gguf_get_bool (gguf, "tokenizer.ggml.add_eos_token", &flag);
  if (flag && tok->eos >= 0)
    g_array_append_vals (tok->suffix_ids, &tok->eos, 1);
  return tok;

fail:
  hone_tokenizer_free (tok);
  return NULL;
}
