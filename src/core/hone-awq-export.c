/* hone-awq-export.c — AutoAWQ GEMM folder and Q4_1 GGUF writers (see hone-awq-export.h). */
#include "hone-awq-export.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include "hone-dtype.h"
#include "hone-error.h"
#include "hone-gguf.h"
#include "hone-i18n.h"
#include "hone-json.h"
#include "hone-safetensors.h"
#include "hone-tokenizer.h"
#include "hone-tokenizer-private.h"

static const char *const lin_what[HONE_AWQ_N_LINEARS] = { "wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down" };
static const char *const lin_hf[HONE_AWQ_N_LINEARS] = {
  "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
  "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj" };

static gboolean
check_cancel (GCancellable *cancellable, GError **error)
{
  if (cancellable && g_cancellable_is_cancelled (cancellable))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_CANCELLED, _("Export cancelled"));
      return FALSE;
    }
  return TRUE;
}

void
hone_awq_linear_to_q4_1 (const HoneAwqLinear *lin, int row, void *blocks)
{
  HoneBlockQ4_1 *b = blocks;
  int ng = lin->K / lin->group_size;
  const guint8 *p = lin->q + (size_t) row * lin->K / 2;   /* two values a byte, the even one low */

  for (int bi = 0; bi < lin->K / 32; bi++)
    {
      int gi = bi * 32 / lin->group_size;
      guint16 s = lin->s[(size_t) row * ng + gi];
      int z = lin->z[(size_t) row * ng + gi];
      /* Exact: s has ≤ 7 significant bits, so z·s (z ≤ 15) is an fp16. */
      b[bi].d = s;
      b[bi].m = hone_f32_to_f16 (-(float) z * hone_f16_to_f32 (s));
      for (int j = 0; j < 16; j++)
        {
          const int lo = bi * 32 + j, hi = lo + 16;
          b[bi].qs[j] = (guint8) (((p[lo / 2] >> (4 * (lo & 1))) & 15) | (((p[hi / 2] >> (4 * (hi & 1))) & 15) << 4));
        }
    }
}

/* ---- GGUF --------------------------------------------------------------- */

typedef struct { int layer; int what; } Slot;   /* what: 0..6 linears, 7 attn_norm, 8 ffn_norm, 9..11 bq bk bv */

static GHashTable *
slot_table (const HoneModelConfig *c)
{
  static const char *const extra[] = { "attn_norm", "ffn_norm", "bq", "bk", "bv" };
  GHashTable *t = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  for (int l = 0; l < c->n_layers; l++)
    for (int w = 0; w < HONE_AWQ_N_LINEARS + 5; w++)
      {
        const char *what = w < HONE_AWQ_N_LINEARS ? lin_what[w] : extra[w - HONE_AWQ_N_LINEARS];
        Slot *s = g_new (Slot, 1);
        s->layer = l;
        s->what = w;
        g_hash_table_insert (t, hone_model_tensor_name (HONE_MODEL_SOURCE_GGUF, what, l), s);
      }
  return t;
}

/* Deferred tensors of the GGUF export (made when the writer reaches them):
 * a linear's Q4_1 rows, or a tensor copied as stored whose source pages then
 * leave the resident memory. */
typedef struct {
  const HoneAwqLinear *lin;   /* or NULL: copy t */
  HoneGguf *src;              /* a ref, for a copy */
  const HoneTensor *t;
  GCancellable *cancellable;
} GgufFill;

static void
gguf_fill_free (gpointer data)
{
  GgufFill *f = data;
  if (f->src)
    hone_gguf_unref (f->src);
  g_free (f);
}

static gboolean
fill_gguf (gpointer data, void *buf, gsize offset, gsize nbytes, GError **error)
{
  const GgufFill *f = data;
  if (!check_cancel (f->cancellable, error))
    return FALSE;
  if (f->lin)
    {
      const size_t row_bytes = (size_t) f->lin->K / 32 * sizeof (HoneBlockQ4_1);
      const int r0 = (int) (offset / row_bytes), nr = (int) (nbytes / row_bytes);
      g_assert (offset % row_bytes == 0 && nbytes % row_bytes == 0 && r0 + nr <= f->lin->N);
      for (int r = 0; r < nr; r++)
        hone_awq_linear_to_q4_1 (f->lin, r0 + r, (guint8 *) buf + r * row_bytes);
    }
  else
    {
      const guint8 *src = (const guint8 *) f->t->data + offset;
      g_assert (offset + nbytes <= f->t->nbytes);
      memcpy (buf, src, nbytes);
      hone_gguf_release_bytes (f->src, src, nbytes);
    }
  return TRUE;
}

static HoneGgufWriter *
build_gguf (const HoneAwqResult *r, GCancellable *cancellable, GError **error)
{
  HoneModel *m = r->model;
  const HoneModelConfig *c = &m->config;
  g_autoptr(HoneGguf) src = NULL;
  g_autoptr(HoneGgufWriter) w = NULL;
  g_autoptr(GHashTable) slots = NULL;

  if (m->source != HONE_MODEL_SOURCE_GGUF)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                   _("GGUF export needs a GGUF source model (%s is a Hugging Face folder); use --format awq"),
                   m->path);
      return NULL;
    }
  src = hone_gguf_open (m->path, error);
  if (src == NULL)
    return NULL;
  w = hone_gguf_writer_new ();
  hone_gguf_writer_set_fill_piece (w, r->export_piece);
  hone_gguf_writer_set_alignment (w, hone_gguf_alignment (src));
  for (guint i = 0; i < hone_gguf_n_kv (src); i++)
    {
      const char *key = hone_gguf_kv_key (src, i);
      if (g_str_has_prefix (key, "hone.awq.") || strcmp (key, "general.alignment") == 0
          || strcmp (key, "general.file_type") == 0)
        continue;
      hone_gguf_writer_copy_kv (w, src, i);
    }
  hone_gguf_writer_add_u32 (w, "general.file_type", 3);   /* mostly Q4_1 */
  hone_gguf_writer_add_u32 (w, "hone.awq.group_size", (guint32) r->group_size);
  hone_gguf_writer_add_string (w, "hone.awq.method", r->rtn ? "rtn" : "awq", -1);
  hone_gguf_writer_add_u32 (w, "hone.awq.samples", (guint32) r->n_samples);
  hone_gguf_writer_add_u32 (w, "hone.awq.seq_len", (guint32) r->seq_len);

  slots = slot_table (c);
  for (guint i = 0; i < hone_gguf_n_tensors (src); i++)
    {
      const HoneTensor *t = hone_gguf_tensor (src, i);
      const Slot *s = g_hash_table_lookup (slots, t->name);
      const HoneAwqLayer *L = s ? &r->layers[s->layer] : NULL;
      gboolean ok;

      if (!check_cancel (cancellable, error))
        return NULL;
      if (s && s->what < HONE_AWQ_N_LINEARS)
        {
          const HoneAwqLinear *lin = &L->lin[s->what];
          const size_t row_bytes = (size_t) lin->K / 32 * sizeof (HoneBlockQ4_1);
          const int64_t ne[2] = { lin->K, lin->N };
          GgufFill *f = g_new0 (GgufFill, 1);
          f->lin = lin;
          f->cancellable = cancellable;
          ok = hone_gguf_writer_add_tensor_deferred (w, t->name, HONE_DTYPE_Q4_1, 2, ne, (size_t) lin->N * row_bytes,
                                                     fill_gguf, f, gguf_fill_free, error);
        }
      else if (s && s->what >= HONE_AWQ_N_LINEARS)
        {
          const float *v = NULL;
          switch (s->what - HONE_AWQ_N_LINEARS)
            {
            case 0: v = L->attn_norm; break;
            case 1: v = L->ffn_norm; break;
            case 2: v = L->bq; break;
            case 3: v = L->bk; break;
            default: v = L->bv; break;
            }
          if (v == NULL)
            {
              g_set_error (error, HONE_ERROR, HONE_ERROR_MISSING_TENSOR, _("No quantized value for %s"), t->name);
              return NULL;
            }
          ok = hone_gguf_writer_add_tensor (w, t->name, HONE_DTYPE_F32, 1, t->ne, v,
                                            (gsize) t->ne[0] * sizeof (float), error);
        }
      else
        {
          /* Copied as stored; the reader stays alive until the writer is done. */
          GgufFill *f = g_new0 (GgufFill, 1);
          f->src = hone_gguf_ref (src);
          f->t = t;
          f->cancellable = cancellable;
          ok = hone_gguf_writer_add_tensor_deferred (w, t->name, t->type, t->n_dims, t->ne, t->nbytes, fill_gguf, f,
                                                     gguf_fill_free, error);
        }
      if (!ok)
        return NULL;
    }
  return g_steal_pointer (&w);
}

gboolean
hone_awq_export_gguf (const HoneAwqResult *r, const char *path, GCancellable *cancellable,
                      HoneProgressFunc progress, gpointer progress_data, GError **error)
{
  g_autoptr(HoneGgufWriter) w = build_gguf (r, cancellable, error);

  if (w == NULL || !check_cancel (cancellable, error))
    return FALSE;
  hone_gguf_writer_set_progress (w, progress, progress_data);
  return hone_gguf_writer_write (w, path, error);
}

HoneModel *
hone_awq_result_open_model (const HoneAwqResult *r, GCancellable *cancellable, GError **error)
{
  g_autofree char *path = NULL;
  HoneModel *m;
  int fd = g_file_open_tmp ("hone-awq-XXXXXX.gguf", &path, NULL);

  if (fd < 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("Cannot create a temporary file"));
      return NULL;
    }
  close (fd);
  if (!hone_awq_export_gguf (r, path, cancellable, NULL, NULL, error))
    {
      g_unlink (path);
      return NULL;
    }
  m = hone_model_open (path, error);
  g_unlink (path);      /* the mapping keeps the data */
  return m;
}

/* ---- tokenizer files from GGUF metadata --------------------------------- */

static void
add_string_member (JsonBuilder *b, const char *key, const char *value)
{
  json_builder_set_member_name (b, key);
  if (value)
    json_builder_add_string_value (b, value);
  else
    json_builder_add_null_value (b);
}

gboolean
hone_awq_tokenizer_json_from_gguf (const char *gguf_path, char **tokenizer_json, char **tokenizer_config_json,
                                   GError **error)
{
  g_autoptr(HoneGguf) g = hone_gguf_open (gguf_path, error);
  g_autofree char *model = NULL, *pre = NULL, *tmpl = NULL;
  g_autoptr(JsonBuilder) b = NULL;
  g_autoptr(JsonGenerator) gen = NULL;
  g_autoptr(JsonNode) root = NULL;
  const char *const *regexes;
  const void *types = NULL;
  HoneGgufType tt = HONE_GGUF_INT32;
  guint64 n_tokens, n_types = 0, n_merges;
  gboolean ignore_merges = FALSE, add_bos = FALSE;
  guint32 bos = G_MAXUINT32, eos = G_MAXUINT32;
  int ti, mi;

  if (g == NULL)
    return FALSE;
  model = hone_gguf_dup_string (g, "tokenizer.ggml.model");
  if (g_strcmp0 (model, "gpt2") != 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_TOKENIZER,
                   _("Exporting tokenizer.json supports byte-level BPE vocabularies only (tokenizer.ggml.model “%s”)"),
                   model ? model : "");
      return FALSE;
    }
  pre = hone_gguf_dup_string (g, "tokenizer.ggml.pre");
  regexes = hone_pretokenizer_llama_regexes (pre, &ignore_merges);
  ti = hone_gguf_find_kv (g, "tokenizer.ggml.tokens");
  mi = hone_gguf_find_kv (g, "tokenizer.ggml.merges");
  if (regexes == NULL || ti < 0 || mi < 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_TOKENIZER,
                   _("Cannot rebuild tokenizer.json: unsupported pre-tokenizer “%s” or no tokens/merges"),
                   pre ? pre : "");
      return FALSE;
    }
  n_tokens = hone_gguf_kv_array_length (g, (guint) ti);
  n_merges = hone_gguf_kv_array_length (g, (guint) mi);
  if (hone_gguf_find_kv (g, "tokenizer.ggml.token_type") >= 0)
    types = hone_gguf_get_array (g, "tokenizer.ggml.token_type", &tt, &n_types);
  hone_gguf_get_u32 (g, "tokenizer.ggml.bos_token_id", &bos);
  hone_gguf_get_u32 (g, "tokenizer.ggml.eos_token_id", &eos);
  hone_gguf_get_bool (g, "tokenizer.ggml.add_bos_token", &add_bos);
  tmpl = hone_gguf_dup_string (g, "tokenizer.chat_template");

  b = json_builder_new ();
  json_builder_begin_object (b);
  add_string_member (b, "version", "1.0");
  json_builder_set_member_name (b, "truncation");
  json_builder_add_null_value (b);
  json_builder_set_member_name (b, "padding");
  json_builder_add_null_value (b);
  json_builder_set_member_name (b, "added_tokens");
  json_builder_begin_array (b);
  for (guint64 i = 0; i < n_tokens && types && i < n_types; i++)
    {
      gint32 type;
      gsize len;
      const char *s = hone_gguf_get_array_string (g, "tokenizer.ggml.tokens", i, &len);
      g_autofree char *text = NULL;
      memcpy (&type, (const guint8 *) types + i * 4, 4);
      if (type != 3 && type != 4)
        continue;
      text = g_strndup (s, len);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "id");
      json_builder_add_int_value (b, (gint64) i);
      add_string_member (b, "content", text);
      json_builder_set_member_name (b, "single_word");
      json_builder_add_boolean_value (b, FALSE);
      json_builder_set_member_name (b, "lstrip");
      json_builder_add_boolean_value (b, FALSE);
      json_builder_set_member_name (b, "rstrip");
      json_builder_add_boolean_value (b, FALSE);
      json_builder_set_member_name (b, "normalized");
      json_builder_add_boolean_value (b, FALSE);
      json_builder_set_member_name (b, "special");
      json_builder_add_boolean_value (b, type == 3);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_set_member_name (b, "normalizer");
  json_builder_add_null_value (b);

  /* llama.cpp's regex list for tokenizer.ggml.pre, then bytes to unicode. */
  json_builder_set_member_name (b, "pre_tokenizer");
  json_builder_begin_object (b);
  add_string_member (b, "type", "Sequence");
  json_builder_set_member_name (b, "pretokenizers");
  json_builder_begin_array (b);
  for (; *regexes; regexes++)
    {
      json_builder_begin_object (b);
      add_string_member (b, "type", "Split");
      json_builder_set_member_name (b, "pattern");
      json_builder_begin_object (b);
      add_string_member (b, "Regex", *regexes);
      json_builder_end_object (b);
      add_string_member (b, "behavior", "Isolated");
      json_builder_set_member_name (b, "invert");
      json_builder_add_boolean_value (b, FALSE);
      json_builder_end_object (b);
    }
  json_builder_begin_object (b);
  add_string_member (b, "type", "ByteLevel");
  json_builder_set_member_name (b, "add_prefix_space");
  json_builder_add_boolean_value (b, FALSE);
  json_builder_set_member_name (b, "trim_offsets");
  json_builder_add_boolean_value (b, TRUE);
  json_builder_set_member_name (b, "use_regex");
  json_builder_add_boolean_value (b, FALSE);
  json_builder_end_object (b);
  json_builder_end_array (b);
  json_builder_end_object (b);

  json_builder_set_member_name (b, "post_processor");
  json_builder_begin_object (b);
  if (add_bos && bos < n_tokens)
    {
      gsize len;
      const char *s = hone_gguf_get_array_string (g, "tokenizer.ggml.tokens", bos, &len);
      g_autofree char *bt = g_strndup (s, len);
      add_string_member (b, "type", "TemplateProcessing");
      json_builder_set_member_name (b, "single");
      json_builder_begin_array (b);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "SpecialToken");
      json_builder_begin_object (b);
      add_string_member (b, "id", bt);
      json_builder_set_member_name (b, "type_id");
      json_builder_add_int_value (b, 0);
      json_builder_end_object (b);
      json_builder_end_object (b);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "Sequence");
      json_builder_begin_object (b);
      add_string_member (b, "id", "A");
      json_builder_set_member_name (b, "type_id");
      json_builder_add_int_value (b, 0);
      json_builder_end_object (b);
      json_builder_end_object (b);
      json_builder_end_array (b);
      json_builder_set_member_name (b, "pair");
      json_builder_begin_array (b);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "Sequence");
      json_builder_begin_object (b);
      add_string_member (b, "id", "A");
      json_builder_set_member_name (b, "type_id");
      json_builder_add_int_value (b, 0);
      json_builder_end_object (b);
      json_builder_end_object (b);
      json_builder_end_array (b);
      json_builder_set_member_name (b, "special_tokens");
      json_builder_begin_object (b);
      json_builder_set_member_name (b, bt);
      json_builder_begin_object (b);
      add_string_member (b, "id", bt);
      json_builder_set_member_name (b, "ids");
      json_builder_begin_array (b);
      json_builder_add_int_value (b, bos);
      json_builder_end_array (b);
      json_builder_set_member_name (b, "tokens");
      json_builder_begin_array (b);
      json_builder_add_string_value (b, bt);
      json_builder_end_array (b);
      json_builder_end_object (b);
      json_builder_end_object (b);
    }
  else
    {
      add_string_member (b, "type", "ByteLevel");
      json_builder_set_member_name (b, "add_prefix_space");
      json_builder_add_boolean_value (b, TRUE);
      json_builder_set_member_name (b, "trim_offsets");
      json_builder_add_boolean_value (b, FALSE);
      json_builder_set_member_name (b, "use_regex");
      json_builder_add_boolean_value (b, TRUE);
    }
  json_builder_end_object (b);

  json_builder_set_member_name (b, "decoder");
  json_builder_begin_object (b);
  add_string_member (b, "type", "ByteLevel");
  json_builder_set_member_name (b, "add_prefix_space");
  json_builder_add_boolean_value (b, TRUE);
  json_builder_set_member_name (b, "trim_offsets");
  json_builder_add_boolean_value (b, TRUE);
  json_builder_set_member_name (b, "use_regex");
  json_builder_add_boolean_value (b, TRUE);
  json_builder_end_object (b);

  json_builder_set_member_name (b, "model");
  json_builder_begin_object (b);
  add_string_member (b, "type", "BPE");
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
  json_builder_set_member_name (b, "ignore_merges");
  json_builder_add_boolean_value (b, ignore_merges);
  json_builder_set_member_name (b, "vocab");
  json_builder_begin_object (b);
  for (guint64 i = 0; i < n_tokens; i++)
    {
      gsize len;
      const char *s = hone_gguf_get_array_string (g, "tokenizer.ggml.tokens", i, &len);
      g_autofree char *text = g_strndup (s, len);
      json_builder_set_member_name (b, text);
      json_builder_add_int_value (b, (gint64) i);
    }
  json_builder_end_object (b);
  json_builder_set_member_name (b, "merges");
  json_builder_begin_array (b);
  for (guint64 i = 0; i < n_merges; i++)
    {
      gsize len;
      const char *s = hone_gguf_get_array_string (g, "tokenizer.ggml.merges", i, &len);
      g_autofree char *text = g_strndup (s, len);
      json_builder_add_string_value (b, text);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
  json_builder_end_object (b);

  root = json_builder_get_root (b);
  gen = json_generator_new ();
  json_generator_set_root (gen, root);
  *tokenizer_json = json_generator_to_data (gen, NULL);

  /* tokenizer_config.json */
  {
    g_autoptr(JsonBuilder) cb = json_builder_new ();
    g_autoptr(JsonNode) croot = NULL;
    g_autofree char *bos_s = NULL, *eos_s = NULL;
    gsize len;
    if (bos < n_tokens)
      {
        const char *s = hone_gguf_get_array_string (g, "tokenizer.ggml.tokens", bos, &len);
        bos_s = g_strndup (s, len);
      }
    if (eos < n_tokens)
      {
        const char *s = hone_gguf_get_array_string (g, "tokenizer.ggml.tokens", eos, &len);
        eos_s = g_strndup (s, len);
      }
    json_builder_begin_object (cb);
    json_builder_set_member_name (cb, "add_bos_token");
    json_builder_add_boolean_value (cb, add_bos);
    json_builder_set_member_name (cb, "add_eos_token");
    json_builder_add_boolean_value (cb, FALSE);
    add_string_member (cb, "bos_token", bos_s);
    add_string_member (cb, "eos_token", eos_s);
    add_string_member (cb, "pad_token", eos_s);
    add_string_member (cb, "unk_token", NULL);
    json_builder_set_member_name (cb, "clean_up_tokenization_spaces");
    json_builder_add_boolean_value (cb, FALSE);
    add_string_member (cb, "tokenizer_class", "PreTrainedTokenizerFast");
    if (tmpl)
      add_string_member (cb, "chat_template", tmpl);
    json_builder_end_object (cb);
    croot = json_builder_get_root (cb);
    json_generator_set_root (gen, croot);
    json_generator_set_pretty (gen, TRUE);
    *tokenizer_config_json = json_generator_to_data (gen, NULL);
  }
  return TRUE;
}

/* ---- the AutoAWQ folder ------------------------------------------------- */

static void
rm_tree (const char *dir)
{
  GDir *d = g_dir_open (dir, 0, NULL);
  const char *name;
  if (d)
    {
      while ((name = g_dir_read_name (d)) != NULL)
        {
          g_autofree char *p = g_build_filename (dir, name, NULL);
          if (g_file_test (p, G_FILE_TEST_IS_DIR) && !g_file_test (p, G_FILE_TEST_IS_SYMLINK))
            rm_tree (p);
          else
            g_unlink (p);
        }
      g_dir_close (d);
    }
  g_rmdir (dir);
}

static gboolean
add_f16 (HoneSafetensorsWriter *w, const char *name, int n_dims, const int64_t *ne, const float *v,
         GError **error)
{
  gsize n = (gsize) ne[0] * (n_dims > 1 ? (gsize) ne[1] : 1);
  guint16 *h = g_new (guint16, n);
  for (gsize i = 0; i < n; i++)
    h[i] = hone_f32_to_f16 (v[i]);
  return hone_safetensors_writer_add_tensor_take (w, name, HONE_DTYPE_F16, n_dims, ne, h, n * 2, error);
}

/* Deferred tensors of the safetensors export: each is made only when the
 * writer reaches it, into the writer's buffer, so the export never holds more
 * than one tensor of the file (an 8B model's is ~5 GB). */

/* @t in f16, a row at a time (an embedding table is no f32 copy of itself). */
typedef struct {
  const HoneModel *model;     /* the source: its file pages of t go once read */
  const HoneTensor *t;
  GCancellable *cancellable;
} TensorFill;

static gboolean
fill_tensor_f16 (gpointer data, void *buf, gsize offset, gsize nbytes, GError **error)
{
  const TensorFill *f = data;
  const HoneTensor *t = f->t;
  const int64_t K = t->ne[0], N = t->n_dims > 1 ? t->ne[1] : 1;
  const int64_t r0 = (int64_t) (offset / ((gsize) K * 2)), nr = (int64_t) (nbytes / ((gsize) K * 2));
  g_autofree float *row = g_new (float, (gsize) K);
  guint16 *h = buf;

  g_assert (offset % ((gsize) K * 2) == 0 && nbytes % ((gsize) K * 2) == 0 && r0 + nr <= N);
  if (!check_cancel (f->cancellable, error))
    return FALSE;
  for (int64_t r = 0; r < nr; r++)
    {
      hone_dequantize_row (t->type, hone_tensor_row (t, r0 + r), row, K);
      for (int64_t k = 0; k < K; k++)
        h[r * K + k] = hone_f32_to_f16 (row[k]);
    }
  /* the source rows just read leave the resident memory */
  hone_model_release_bytes (f->model, hone_tensor_row (t, r0), (gsize) nr * hone_tensor_row_bytes (t));
  return TRUE;
}

static gboolean
add_tensor_f16 (HoneSafetensorsWriter *w, const char *name, const HoneModel *model, const HoneTensor *t,
                GCancellable *cancellable, GError **error)
{
  TensorFill *f = g_new (TensorFill, 1);
  f->model = model;
  f->t = t;
  f->cancellable = cancellable;
  return hone_safetensors_writer_add_tensor_deferred (w, name, HONE_DTYPE_F16, t->n_dims, t->ne,
                                                      (gsize) hone_tensor_n_elements (t) * 2, fill_tensor_f16, f,
                                                      g_free, error);
}

/* One of a linear's qweight / qzeros / scales, its rows in HF order: row n of
 * the output is row map[n] of @lin (Q/K of GGUF llama sources are permuted
 * back; else map[n] = n). */
enum { PART_QWEIGHT, PART_QZEROS, PART_SCALES };

typedef struct {
  const HoneAwqLinear *lin;
  int part;
  int *map;                   /* N, shared by the three parts of a linear */
  GCancellable *cancellable;
} LinearFill;

static void
linear_fill_free (gpointer data)
{
  LinearFill *f = data;
  g_rc_box_release (f->map);
  g_free (f);
}

/* Rows of the three parts (one a row of their stored [rows, cols] form):
 * qweight's row k holds column k of the N output rows, eight 4-bit values a
 * word; qzeros' and scales' row g the group g of every output row. */
static gboolean
fill_linear (gpointer data, void *buf, gsize offset, gsize nbytes, GError **error)
{
  const LinearFill *f = data;
  const HoneAwqLinear *lin = f->lin;
  const int K = lin->K, N = lin->N, ng = K / lin->group_size;
  const int *map = f->map;
  const gsize row_bytes = f->part == PART_SCALES ? (gsize) N * 2 : (gsize) N / 2;
  const int r0 = (int) (offset / row_bytes), nr = (int) (nbytes / row_bytes);

  g_assert (offset % row_bytes == 0 && nbytes % row_bytes == 0);
  g_assert (r0 + nr <= (f->part == PART_QWEIGHT ? K : ng));
  if (!check_cancel (f->cancellable, error))
    return FALSE;
  if (f->part == PART_QWEIGHT)
    {
      /* eight output rows at a time: word (k, c) holds rows 8c..8c+7 of column k */
      guint32 *qw = buf;
      for (int c = 0; c < N / 8; c++)
        {
          const guint8 *src[8];
          for (int j = 0; j < 8; j++)
            src[j] = lin->q + (size_t) map[8 * c + j] * K / 2;
          for (int i = 0; i < nr; i++)
            {
              const int k = r0 + i;
              guint8 v[8];
              for (int j = 0; j < 8; j++)
                v[j] = (src[j][k / 2] >> (4 * (k & 1))) & 15;
              hone_awq_pack_row (v, 8, qw + (size_t) i * (N / 8) + c);
            }
        }
    }
  else if (f->part == PART_QZEROS)
    {
      guint32 *qz = buf;
      g_autofree guint8 *col = g_new (guint8, N);
      for (int i = 0; i < nr; i++)
        {
          for (int n = 0; n < N; n++)
            col[n] = lin->z[(size_t) map[n] * ng + r0 + i];
          hone_awq_pack_row (col, N, qz + (size_t) i * (N / 8));
        }
    }
  else
    {
      guint16 *sc = buf;
      for (int i = 0; i < nr; i++)
        for (int n = 0; n < N; n++)
          sc[(size_t) i * N + n] = lin->s[(size_t) map[n] * ng + r0 + i];
    }
  return TRUE;
}

/* qweight/qzeros/scales of one linear; @n_heads > 0: its rows are Q/K rows
 * of a GGUF llama source, permuted back to HF order (head_dim each). */
static gboolean
add_linear (HoneSafetensorsWriter *w, const char *prefix, const HoneAwqLinear *lin, int n_heads, int head_dim,
            GCancellable *cancellable, GError **error)
{
  const int K = lin->K, N = lin->N, ng = K / lin->group_size;
  const int64_t ne[3][2] = { { N / 8, K }, { N / 8, ng }, { N, ng } };
  const gsize nbytes[3] = { (gsize) K * N / 2, (gsize) ng * N / 2, (gsize) ng * N * 2 };
  static const char *const suffix[3] = { "qweight", "qzeros", "scales" };
  static const HoneDType type[3] = { HONE_DTYPE_I32, HONE_DTYPE_I32, HONE_DTYPE_F16 };
  int *map = g_rc_box_alloc ((gsize) N * sizeof (int));

  if (n_heads > 0)
    {
      g_autofree int *ident = g_new (int, N);
      for (int n = 0; n < N; n++)
        ident[n] = n;
      hone_model_permute_qk_rows (map, ident, n_heads, head_dim, sizeof (int), FALSE);
    }
  else
    for (int n = 0; n < N; n++)
      map[n] = n;
  for (int i = 0; i < 3; i++)
    {
      g_autofree char *name = g_strdup_printf ("%s.%s", prefix, suffix[i]);
      LinearFill *f = g_new (LinearFill, 1);
      f->lin = lin;
      f->part = i;
      f->map = g_rc_box_acquire (map);
      f->cancellable = cancellable;
      if (!hone_safetensors_writer_add_tensor_deferred (w, name, type[i], 2, ne[i], nbytes[i], fill_linear, f,
                                                        linear_fill_free, error))
        {
          g_rc_box_release (map);
          return FALSE;
        }
    }
  g_rc_box_release (map);
  return TRUE;
}

static char *
config_json (const HoneAwqResult *r, GError **error)
{
  HoneModel *m = r->model;
  const HoneModelConfig *c = &m->config;
  g_autoptr(JsonParser) parser = NULL;
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  JsonObject *o, *q;

  if (m->source == HONE_MODEL_SOURCE_SAFETENSORS)
    {
      g_autofree char *p = g_build_filename (m->path, "config.json", NULL);
      g_autofree char *text = NULL;
      gsize len = 0;
      parser = json_parser_new ();
      if (!g_file_get_contents (p, &text, &len, NULL) || !hone_json_load (parser, text, (gssize) len, 64, NULL)
          || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("Cannot read %s"), p);
          return NULL;
        }
      root = json_node_copy (json_parser_get_root (parser));
      o = json_node_get_object (root);
    }
  else
    {
      const char *arch = c->arch == HONE_ARCH_QWEN2 ? "Qwen2ForCausalLM"
                       : c->arch == HONE_ARCH_QWEN3 ? "Qwen3ForCausalLM" : "LlamaForCausalLM";
      const char *type = c->arch == HONE_ARCH_QWEN2 ? "qwen2" : c->arch == HONE_ARCH_QWEN3 ? "qwen3" : "llama";
      JsonArray *a = json_array_new ();
      root = json_node_new (JSON_NODE_OBJECT);
      o = json_object_new ();
      json_node_take_object (root, o);
      json_array_add_string_element (a, arch);
      json_object_set_array_member (o, "architectures", a);
      json_object_set_string_member (o, "model_type", type);
      json_object_set_int_member (o, "hidden_size", c->hidden);
      json_object_set_int_member (o, "intermediate_size", c->ffn);
      json_object_set_int_member (o, "num_hidden_layers", c->n_layers);
      json_object_set_int_member (o, "num_attention_heads", c->n_heads);
      json_object_set_int_member (o, "num_key_value_heads", c->n_kv_heads);
      json_object_set_int_member (o, "head_dim", c->head_dim);
      json_object_set_int_member (o, "vocab_size", c->vocab);
      json_object_set_int_member (o, "max_position_embeddings", c->max_context);
      json_object_set_double_member (o, "rms_norm_eps", c->rms_eps);
      json_object_set_double_member (o, "rope_theta", c->rope_theta);
      json_object_set_string_member (o, "hidden_act", "silu");
      json_object_set_boolean_member (o, "tie_word_embeddings", c->tied_embeddings);
      json_object_set_boolean_member (o, "attention_bias", c->qkv_bias);
      json_object_set_boolean_member (o, "mlp_bias", FALSE);
      if (hone_tokenizer_bos (m->tokenizer) >= 0)
        json_object_set_int_member (o, "bos_token_id", hone_tokenizer_bos (m->tokenizer));
      if (hone_tokenizer_eos (m->tokenizer) >= 0)
        json_object_set_int_member (o, "eos_token_id", hone_tokenizer_eos (m->tokenizer));
      if (c->rope_scaling.type != HONE_ROPE_SCALING_NONE)
        {
          JsonObject *rs = json_object_new ();
          json_object_set_double_member (rs, "factor", c->rope_scaling.factor);
          if (c->rope_scaling.type == HONE_ROPE_SCALING_LINEAR)
            json_object_set_string_member (rs, "rope_type", "linear");
          else
            {
              json_object_set_string_member (rs, "rope_type", "llama3");
              json_object_set_double_member (rs, "low_freq_factor", c->rope_scaling.low_freq_factor);
              json_object_set_double_member (rs, "high_freq_factor", c->rope_scaling.high_freq_factor);
              json_object_set_int_member (rs, "original_max_position_embeddings", c->rope_scaling.original_context);
            }
          json_object_set_object_member (o, "rope_scaling", rs);
        }
    }
  json_object_set_string_member (o, "torch_dtype", "float16");
  q = json_object_new ();
  json_object_set_string_member (q, "quant_method", "awq");
  json_object_set_int_member (q, "bits", 4);
  json_object_set_int_member (q, "group_size", r->group_size);
  json_object_set_boolean_member (q, "zero_point", TRUE);
  json_object_set_string_member (q, "version", "gemm");
  json_object_set_array_member (q, "modules_to_not_convert", json_array_new ());
  json_object_set_object_member (o, "quantization_config", q);
  json_generator_set_root (gen, root);
  json_generator_set_pretty (gen, TRUE);
  return json_generator_to_data (gen, NULL);
}

static gboolean
write_text (const char *dir, const char *name, const char *text, GError **error)
{
  g_autofree char *p = g_build_filename (dir, name, NULL);
  g_autoptr(GError) local = NULL;
  if (!g_file_set_contents (p, text, -1, &local))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("Cannot write %s: %s"), p, local->message);
      return FALSE;
    }
  return TRUE;
}

static gboolean
fill_folder (const HoneAwqResult *r, const char *tmp, GCancellable *cancellable, HoneProgressFunc progress,
             gpointer progress_data, GError **error)
{
  HoneModel *m = r->model;
  const HoneModelConfig *c = &m->config;
  g_autoptr(HoneSafetensorsWriter) w = hone_safetensors_writer_new ();
  g_autofree char *cfg = NULL;
  g_autofree char *st_path = g_build_filename (tmp, "model.safetensors", NULL);
  gboolean permute = c->rope_pairing == HONE_ROPE_PAIRS_ADJACENT && m->source == HONE_MODEL_SOURCE_GGUF;

  hone_safetensors_writer_set_fill_piece (w, r->export_piece);
  hone_safetensors_writer_add_metadata (w, "quantized_by", "hone");
  if (!add_tensor_f16 (w, "model.embed_tokens.weight", m, &m->tok_embd, cancellable, error)
      || !add_tensor_f16 (w, "lm_head.weight", m, &m->output, cancellable, error)
      || !add_tensor_f16 (w, "model.norm.weight", m, &m->output_norm, cancellable, error))
    return FALSE;
  for (int l = 0; l < c->n_layers; l++)
    {
      const HoneAwqLayer *L = &r->layers[l];
      const HoneLayerWeights *src = &m->layers[l];
      int64_t neh[1] = { c->hidden }, neq[1] = { (int64_t) c->n_heads * c->head_dim },
              nek[1] = { (int64_t) c->n_kv_heads * c->head_dim };
      g_autofree char *n_in = g_strdup_printf ("model.layers.%d.input_layernorm.weight", l);
      g_autofree char *n_post = g_strdup_printf ("model.layers.%d.post_attention_layernorm.weight", l);

      if (!check_cancel (cancellable, error)
          || !add_f16 (w, n_in, 1, neh, L->attn_norm, error)
          || !add_f16 (w, n_post, 1, neh, L->ffn_norm, error))
        return FALSE;
      for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
        {
          g_autofree char *prefix = g_strdup_printf ("model.layers.%d.%s", l, lin_hf[i]);
          const gboolean qk = permute && (i == HONE_AWQ_WQ || i == HONE_AWQ_WK);
          const gboolean ok = add_linear (w, prefix, &L->lin[i], qk ? (i == HONE_AWQ_WQ ? c->n_heads : c->n_kv_heads) : 0,
                                          c->head_dim, cancellable, error);
          if (!ok)
            return FALSE;
        }
      if (L->bq)
        {
          g_autofree char *a = g_strdup_printf ("model.layers.%d.self_attn.q_proj.bias", l);
          g_autofree char *b = g_strdup_printf ("model.layers.%d.self_attn.k_proj.bias", l);
          g_autofree char *v = g_strdup_printf ("model.layers.%d.self_attn.v_proj.bias", l);
          if (!add_f16 (w, a, 1, neq, L->bq, error) || !add_f16 (w, b, 1, nek, L->bk, error)
              || !add_f16 (w, v, 1, nek, L->bv, error))
            return FALSE;
        }
      if (hone_tensor_present (&src->q_norm))
        {
          g_autofree char *a = g_strdup_printf ("model.layers.%d.self_attn.q_norm.weight", l);
          g_autofree char *b = g_strdup_printf ("model.layers.%d.self_attn.k_norm.weight", l);
          if (!add_tensor_f16 (w, a, m, &src->q_norm, cancellable, error)
              || !add_tensor_f16 (w, b, m, &src->k_norm, cancellable, error))
            return FALSE;
        }
    }
  hone_safetensors_writer_set_progress (w, progress, progress_data);
  if (!check_cancel (cancellable, error) || !hone_safetensors_writer_write (w, st_path, error))
    return FALSE;
  cfg = config_json (r, error);
  if (cfg == NULL || !write_text (tmp, "config.json", cfg, error))
    return FALSE;
  if (m->source == HONE_MODEL_SOURCE_SAFETENSORS)
    {
      static const char *const files[] = { "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                            "generation_config.json", "chat_template.jinja" };
      for (guint i = 0; i < G_N_ELEMENTS (files); i++)
        {
          g_autofree char *p = g_build_filename (m->path, files[i], NULL);
          g_autofree char *text = NULL;
          gsize len;
          if (g_file_get_contents (p, &text, &len, NULL))
            {
              g_autofree char *dst = g_build_filename (tmp, files[i], NULL);
              if (!g_file_set_contents (dst, text, (gssize) len, NULL))
                {
                  g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("Cannot write %s"), dst);
                  return FALSE;
                }
            }
        }
    }
  else
    {
      g_autofree char *tj = NULL, *tc = NULL;
      if (!hone_awq_tokenizer_json_from_gguf (m->path, &tj, &tc, error)
          || !write_text (tmp, "tokenizer.json", tj, error)
          || !write_text (tmp, "tokenizer_config.json", tc, error))
        return FALSE;
    }
  return check_cancel (cancellable, error);
}

/* Empty, or an earlier AWQ export holding only the files an export writes. */
static gboolean
dir_replaceable (const char *dir)
{
  static const char *const ours[] = { "model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json",
                                      "special_tokens_map.json", "generation_config.json", "chat_template.jinja",
                                      NULL };
  GDir *d = g_dir_open (dir, 0, NULL);
  const char *name;
  gboolean only_ours = TRUE, empty = TRUE;

  if (d == NULL)
    return FALSE;
  while ((name = g_dir_read_name (d)) != NULL)
    {
      empty = FALSE;
      if (!g_strv_contains (ours, name))
        only_ours = FALSE;
    }
  g_dir_close (d);
  return empty || (only_ours && hone_awq_path_is_quantized (dir, NULL));
}

gboolean
hone_awq_export_safetensors (const HoneAwqResult *r, const char *dir, GCancellable *cancellable,
                             HoneProgressFunc progress, gpointer progress_data, GError **error)
{
  g_autofree char *canon = g_canonicalize_filename (dir, NULL);
  g_autofree char *parent = g_path_get_dirname (canon);
  g_autofree char *base = g_path_get_basename (canon);
  g_autofree char *tmpl = g_strdup_printf ("%s/.%s.tmp-XXXXXX", parent, base);
  g_autofree char *old = NULL;
  char *tmp;

  if (g_file_test (canon, G_FILE_TEST_EXISTS) && !g_file_test (canon, G_FILE_TEST_IS_DIR))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("%s exists and is not a folder"), canon);
      return FALSE;
    }
  if (g_file_test (canon, G_FILE_TEST_IS_DIR) && !dir_replaceable (canon))
    {
      /* Never delete a folder of the user's that is not an earlier export. */
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO,
                   _("%s exists and is not an earlier AWQ export; choose a new folder"), canon);
      return FALSE;
    }
  tmp = g_mkdtemp (tmpl);
  if (tmp == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("Cannot create a folder in %s: %s"), parent,
                   g_strerror (errno));
      return FALSE;
    }
  g_chmod (tmp, 0755);          /* g_mkdtemp makes it private; an export is an ordinary folder */
  if (!fill_folder (r, tmp, cancellable, progress, progress_data, error))
    {
      rm_tree (tmp);
      return FALSE;
    }
  if (g_file_test (canon, G_FILE_TEST_IS_DIR))
    {
      /* Replace an earlier export: move it aside first, delete it after. */
      old = g_strdup_printf ("%s/.%s.old-XXXXXX", parent, base);
      if (g_mkdtemp (old) == NULL || g_rename (canon, old) != 0)
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("Cannot replace %s: %s"), canon, g_strerror (errno));
          if (old)
            g_rmdir (old);
          rm_tree (tmp);
          return FALSE;
        }
    }
  if (g_rename (tmp, canon) != 0)
    {
      int e = errno;
      if (old)
        g_rename (old, canon);
      rm_tree (tmp);
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("Cannot move the export into %s: %s"), canon, g_strerror (e));
      return FALSE;
    }
  if (old)
    rm_tree (old);
  return TRUE;
}
