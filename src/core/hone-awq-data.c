/* hone-awq-data.c — calibration documents (see hone-awq-data.h). */
#include "hone-awq-data.h"

#include <dlfcn.h>
#include <string.h>
#include <unistd.h>
#include <json-glib/json-glib.h>
#include "hone-error.h"
#include "hone-i18n.h"
#include "hone-json.h"
#include "hone-safetensors.h"

void
hone_awq_data_free (HoneAwqData *d)
{
  if (d == NULL)
    return;
  g_free (d->samples);
  g_free (d->heldout);
  if (d->warnings)
    g_ptr_array_unref (d->warnings);
  g_free (d);
}

/* ---- PDF through poppler-glib, loaded on first use ---------------------- */

typedef struct {
  gboolean tried;
  void *lib;
  gpointer (*doc_new_from_bytes) (GBytes *bytes, const char *password, GError **error);
  int (*doc_n_pages) (gpointer doc);
  gpointer (*doc_get_page) (gpointer doc, int index);
  char *(*page_get_text) (gpointer page);
  GQuark (*error_quark) (void);
} Poppler;

static Poppler poppler;
static GMutex poppler_lock;

static gboolean
poppler_load (void)
{
  g_mutex_lock (&poppler_lock);
  if (!poppler.tried)
    {
      poppler.tried = TRUE;
      poppler.lib = dlopen ("libpoppler-glib.so.8", RTLD_NOW | RTLD_LOCAL);
      if (poppler.lib)
        {
          poppler.doc_new_from_bytes = dlsym (poppler.lib, "poppler_document_new_from_bytes");
          poppler.doc_n_pages = dlsym (poppler.lib, "poppler_document_get_n_pages");
          poppler.doc_get_page = dlsym (poppler.lib, "poppler_document_get_page");
          poppler.page_get_text = dlsym (poppler.lib, "poppler_page_get_text");
          poppler.error_quark = dlsym (poppler.lib, "poppler_error_quark");
          if (!poppler.doc_new_from_bytes || !poppler.doc_n_pages || !poppler.doc_get_page
              || !poppler.page_get_text || !poppler.error_quark)
            poppler.lib = NULL;   /* keep the handle loaded; never used */
        }
    }
  g_mutex_unlock (&poppler_lock);
  return poppler.lib != NULL;
}

#define POPPLER_ERROR_ENCRYPTED 1

static char *
pdf_text (const char *path, GBytes *bytes, GCancellable *cancellable, GError **error)
{
  g_autoptr(GError) local = NULL;
  gpointer doc;
  GString *s;
  int n;

  if (!poppler_load ())
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                   _("%s: reading PDF needs poppler-glib (libpoppler-glib.so.8), which is not installed"), path);
      return NULL;
    }
  doc = poppler.doc_new_from_bytes (bytes, NULL, &local);
  if (doc == NULL)
    {
      if (local && local->domain == poppler.error_quark () && local->code == POPPLER_ERROR_ENCRYPTED)
        g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                     _("%s: the PDF is encrypted (password protected); decrypt it first"), path);
      else
        g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT, _("%s: not a readable PDF (%s)"), path,
                     local ? local->message : "unknown error");
      return NULL;
    }
  s = g_string_new (NULL);
  n = poppler.doc_n_pages (doc);
  for (int i = 0; i < n; i++)
    {
      gpointer page;
      char *t;
      if (cancellable && g_cancellable_is_cancelled (cancellable))
        {
          g_object_unref (doc);
          g_string_free (s, TRUE);
          g_set_error (error, HONE_ERROR, HONE_ERROR_CANCELLED, _("Reading documents cancelled"));
          return NULL;
        }
      page = poppler.doc_get_page (doc, i);
      if (page == NULL)
        continue;
      t = poppler.page_get_text (page);
      if (t)
        {
          g_string_append (s, t);
          g_string_append_c (s, '\n');
          g_free (t);
        }
      g_object_unref (page);
    }
  g_object_unref (doc);
  if (g_strstrip (s->str)[0] == '\0')
    {
      g_string_free (s, TRUE);
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("%s: the PDF has no text layer (%d pages; scanned images need OCR first)"), path, n);
      return NULL;
    }
  return g_string_free (s, FALSE);
}

/* ---- JSON ----------------------------------------------------------------- */

static const char *const text_keys[] = { "text", "content", "body", "message", "prompt", "completion",
                                         "response", "instruction", "input", "output", "question", "answer",
                                         "title", "abstract", "value", NULL };

static void
collect_json (JsonNode *node, gboolean named_only, const char *key, GString *out)
{
  if (node == NULL)
    return;
  switch (json_node_get_node_type (node))
    {
    case JSON_NODE_OBJECT:
      {
        JsonObjectIter it;
        const char *k;
        JsonNode *v;
        json_object_iter_init (&it, json_node_get_object (node));
        while (json_object_iter_next (&it, &k, &v))
          collect_json (v, named_only, k, out);
        break;
      }
    case JSON_NODE_ARRAY:
      {
        JsonArray *a = json_node_get_array (node);
        for (guint i = 0; i < json_array_get_length (a); i++)
          collect_json (json_array_get_element (a, i), named_only, key, out);
        break;
      }
    case JSON_NODE_VALUE:
      if (json_node_get_value_type (node) == G_TYPE_STRING)
        {
          const char *s = json_node_get_string (node);
          gboolean take = named_only ? (key && g_strv_contains (text_keys, key)) : strlen (s) >= 32;
          if (take && s[0])
            {
              g_string_append (out, s);   /* UTF-8: hone_json_load refused escapes that are not */
              g_string_append (out, "\n\n");
            }
        }
      break;
    default:
      break;
    }
}

static gboolean
json_text_one (const char *path, const char *text, gssize len, GString *out, GError **error)
{
  g_autoptr(JsonParser) p = json_parser_new_immutable ();
  g_autoptr(GError) local = NULL;
  gsize before = out->len;

  if (!hone_json_load (p, text, len, 256, &local))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT, _("%s: not valid JSON%s%s"), path,
                   local ? ": " : "", local ? local->message : "");
      return FALSE;
    }
  collect_json (json_parser_get_root (p), TRUE, NULL, out);
  if (out->len == before)
    collect_json (json_parser_get_root (p), FALSE, NULL, out);
  return TRUE;
}

static char *
json_text (const char *path, const char *text, gsize len, gboolean lines, GError **error)
{
  GString *out = g_string_new (NULL);

  if (!lines)
    {
      if (!json_text_one (path, text, (gssize) len, out, error))
        {
          g_string_free (out, TRUE);
          return NULL;
        }
    }
  else
    {
      g_auto(GStrv) ls = g_strsplit (text, "\n", -1);
      for (int i = 0; ls[i]; i++)
        {
          g_autoptr(GError) local = NULL;
          if (g_strstrip (ls[i])[0] == '\0')
            continue;
          if (!json_text_one (path, ls[i], -1, out, &local))
            {
              g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT, _("%s: line %d is not valid JSON"), path,
                           i + 1);
              g_string_free (out, TRUE);
              return NULL;
            }
        }
    }
  return g_string_free (out, FALSE);
}

/* ---- documents ---------------------------------------------------------- */

typedef enum { DOC_TEXT, DOC_PDF, DOC_JSON, DOC_JSONL, DOC_UNKNOWN } DocKind;

static DocKind
doc_kind (const char *path)
{
  g_autofree char *lower = g_ascii_strdown (path, -1);
  static const char *const text_ext[] = { ".txt", ".md", ".markdown", ".rst", ".text", ".org", NULL };
  for (int i = 0; text_ext[i]; i++)
    if (g_str_has_suffix (lower, text_ext[i]))
      return DOC_TEXT;
  if (g_str_has_suffix (lower, ".pdf"))
    return DOC_PDF;
  if (g_str_has_suffix (lower, ".jsonl") || g_str_has_suffix (lower, ".ndjson"))
    return DOC_JSONL;
  if (g_str_has_suffix (lower, ".json"))
    return DOC_JSON;
  return DOC_UNKNOWN;
}

static gboolean
looks_binary (const char *data, gsize len)
{
  return memchr (data, '\0', MIN (len, (gsize) 65536)) != NULL || !g_utf8_validate_len (data, len, NULL);
}

char *
hone_awq_document_text (const char *path, GCancellable *cancellable, GError **error)
{
  g_autofree char *data = NULL;
  g_autoptr(GError) local = NULL;
  DocKind kind = doc_kind (path);
  gsize len;
  char *text;

  if (g_file_test (path, G_FILE_TEST_EXISTS) && !g_file_test (path, G_FILE_TEST_IS_REGULAR)
      && !g_file_test (path, G_FILE_TEST_IS_DIR))
    {
      /* reading a FIFO would wait for a writer */
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED, _("%s is not a regular file"), path);
      return NULL;
    }
  if (!g_file_get_contents (path, &data, &len, &local))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("Cannot read %s: %s"), path, local->message);
      return NULL;
    }
  if (kind == DOC_PDF || (len >= 5 && memcmp (data, "%PDF-", 5) == 0))
    {
      g_autoptr(GBytes) bytes = g_bytes_new_take (g_steal_pointer (&data), len);
      return pdf_text (path, bytes, cancellable, error);
    }
  if (looks_binary (data, len))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                   _("%s is a binary file, not text (supported: .txt, .md, .pdf, .json, .jsonl)"), path);
      return NULL;
    }
  if (kind == DOC_JSON || kind == DOC_JSONL)
    text = json_text (path, data, len, kind == DOC_JSONL, error);
  else
    text = g_steal_pointer (&data);
  if (text && g_strstrip (text)[0] == '\0')
    {
      g_free (text);
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT, _("%s has no text"), path);
      return NULL;
    }
  return text;
}

static int
compare_str (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* Files of a folder (recursive, sorted, hidden skipped, supported types only). */
static void
list_folder (const char *dir, GPtrArray *out, int depth)
{
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  GDir *d;
  const char *name;

  if (depth > 32 || (d = g_dir_open (dir, 0, NULL)) == NULL)
    return;
  while ((name = g_dir_read_name (d)) != NULL)
    if (name[0] != '.')
      g_ptr_array_add (names, g_strdup (name));
  g_dir_close (d);
  g_ptr_array_sort (names, compare_str);
  for (guint i = 0; i < names->len; i++)
    {
      g_autofree char *p = g_build_filename (dir, names->pdata[i], NULL);
      if (g_file_test (p, G_FILE_TEST_IS_DIR))
        list_folder (p, out, depth + 1);
      else if (doc_kind (p) != DOC_UNKNOWN && g_file_test (p, G_FILE_TEST_IS_REGULAR))   /* no FIFOs, devices */
        g_ptr_array_add (out, g_steal_pointer (&p));
    }
}

gint32 *
hone_awq_tokenize_samples (const HoneTokenizer *tok, const char *text, int seq_len, int max_samples, int *n_samples,
                           GError **error)
{
  g_autoptr(GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  int n;

  *n_samples = 0;
  if (!hone_tokenizer_encode (tok, text, -1, 0, ids, error))
    return NULL;
  n = (int) MIN ((guint) (ids->len / (guint) seq_len), (guint) max_samples);
  if (n <= 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("The text is too short: %u tokens, at least %d needed"), ids->len, seq_len);
      return NULL;
    }
  *n_samples = n;
  return g_memdup2 (ids->data, (gsize) n * seq_len * sizeof (gint32));
}

HoneAwqData *
hone_awq_data_load (const HoneTokenizer *tok, const char *const *paths, int max_samples, int seq_len, int max_heldout,
                    GCancellable *cancellable, GError **error)
{
  g_autoptr(HoneAwqData) d = g_new0 (HoneAwqData, 1);
  g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GArray) all = g_array_new (FALSE, FALSE, sizeof (gint32));
  g_autoptr(GHashTable) explicit = g_hash_table_new (g_str_hash, g_str_equal);
  int eos = hone_tokenizer_eos (tok), n_blocks, n_rest;

  if (seq_len < 16 || seq_len > 1 << 16 || max_samples < 1)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("Invalid calibration shape: %d samples of %d tokens"), max_samples, seq_len);
      return NULL;
    }
  d->seq_len = seq_len;
  d->warnings = g_ptr_array_new_with_free_func (g_free);
  for (int i = 0; paths && paths[i]; i++)
    {
      if (g_file_test (paths[i], G_FILE_TEST_IS_DIR))
        {
          guint before = files->len;
          list_folder (paths[i], files, 0);
          if (files->len == before)
            {
              g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                           _("%s holds no documents (.txt, .md, .pdf, .json, .jsonl)"), paths[i]);
              return NULL;
            }
        }
      else if (!g_file_test (paths[i], G_FILE_TEST_EXISTS))
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("%s does not exist"), paths[i]);
          return NULL;
        }
      else
        {
          g_ptr_array_add (files, g_strdup (paths[i]));
          g_hash_table_add (explicit, files->pdata[files->len - 1]);
        }
    }
  if (files->len == 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT, _("No calibration documents given"));
      return NULL;
    }
  for (guint i = 0; i < files->len; i++)
    {
      const char *p = files->pdata[i];
      gboolean is_explicit = g_hash_table_contains (explicit, p);
      g_autoptr(GError) local = NULL;
      g_autofree char *text = NULL;
      g_autoptr(GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint32));

      if (cancellable && g_cancellable_is_cancelled (cancellable))
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_CANCELLED, _("Reading documents cancelled"));
          return NULL;
        }
      text = hone_awq_document_text (p, cancellable, &local);
      if (text && !hone_tokenizer_encode (tok, text, -1, 0, ids, &local))
        g_clear_pointer (&text, g_free);
      if (text && ids->len < HONE_AWQ_MIN_DOC_TOKENS)
        {
          g_set_error (&local, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                       _("%s is too short: %u tokens, at least %d needed"), p, ids->len, HONE_AWQ_MIN_DOC_TOKENS);
          g_clear_pointer (&text, g_free);
        }
      if (text == NULL)
        {
          if (is_explicit || local->code == HONE_ERROR_CANCELLED)
            {
              g_propagate_error (error, g_steal_pointer (&local));
              return NULL;
            }
          g_ptr_array_add (d->warnings, g_strdup (local->message));
          continue;
        }
      if (all->len > 0 && eos >= 0)
        {
          gint32 e = eos;
          g_array_append_val (all, e);
        }
      g_array_append_vals (all, ids->data, ids->len);
      d->n_documents++;
    }
  d->n_tokens = all->len;
  n_blocks = (int) (all->len / (guint) seq_len);
  if (n_blocks < 2)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("The documents are too short: %u tokens in all, at least %d needed "
                     "(one calibration and one held-out sample of %d tokens)"),
                   all->len, 2 * seq_len, seq_len);
      return NULL;
    }
  /* Every tenth block (the last one of each ten) is held out. */
  d->n_heldout = MAX (1, n_blocks / 10);
  if (max_heldout > 0)
    d->n_heldout = MIN (d->n_heldout, max_heldout);
  d->heldout = g_new (gint32, (gsize) d->n_heldout * seq_len);
  {
    int stride = n_blocks / d->n_heldout;
    g_autofree gboolean *held = g_new0 (gboolean, n_blocks);
    int k = 0;
    for (int h = 0; h < d->n_heldout; h++)
      {
        int b = h * stride + stride - 1;
        held[b] = TRUE;
        memcpy (d->heldout + (gsize) h * seq_len, (gint32 *) all->data + (gsize) b * seq_len,
                seq_len * sizeof (gint32));
      }
    n_rest = n_blocks - d->n_heldout;
    d->n_samples = MIN (max_samples, n_rest);
    d->samples = g_new (gint32, (gsize) d->n_samples * seq_len);
    /* Evenly spaced over the remaining blocks. */
    for (int s = 0; s < d->n_samples; s++)
      {
        int want = (int) ((gint64) s * n_rest / d->n_samples), seen = 0;
        for (int b = 0; b < n_blocks; b++)
          if (!held[b] && seen++ == want)
            {
              memcpy (d->samples + (gsize) k++ * seq_len, (gint32 *) all->data + (gsize) b * seq_len,
                      seq_len * sizeof (gint32));
              break;
            }
      }
    g_assert (k == d->n_samples);
  }
  return g_steal_pointer (&d);
}

/* ---- the built-in set ----------------------------------------------------- */

char *
hone_awq_builtin_dir (void)
{
  const char *env = g_getenv ("HONE_CALIBRATION_DIR");
  const char *root = g_getenv ("HONE_SOURCE_ROOT");
  g_autofree char *exe = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *exe_dir = exe ? g_path_get_dirname (exe) : NULL;
  char *cands[5] = { 0 };
  char *found = NULL;

  cands[0] = env ? g_strdup (env) : NULL;
  cands[1] = root ? g_build_filename (root, "data", "calibration", NULL) : NULL;
  cands[2] = exe_dir ? g_build_filename (exe_dir, "..", "..", "..", "data", "calibration", NULL) : NULL;
  cands[3] = exe_dir ? g_build_filename (exe_dir, "..", "share", "hone", "calibration", NULL) : NULL;
#ifdef HONE_PKGDATADIR
  cands[4] = g_build_filename (HONE_PKGDATADIR, "calibration", NULL);
#else
  cands[4] = g_strdup ("/usr/share/hone/calibration");
#endif
  for (int i = 0; i < 5; i++)
    {
      if (found == NULL && cands[i])
        {
          g_autofree char *texts = g_build_filename (cands[i], "texts", NULL);
          if (g_file_test (texts, G_FILE_TEST_IS_DIR))
            found = g_canonicalize_filename (cands[i], NULL);
        }
      g_free (cands[i]);
    }
  return found;
}

char *
hone_awq_builtin_generic_text (void)
{
  g_autofree char *dir = hone_awq_builtin_dir ();
  g_autofree char *p = dir ? g_build_filename (dir, "generic.txt", NULL) : NULL;
  char *text = NULL;
  if (p && g_file_get_contents (p, &text, NULL, NULL))
    return text;
  return NULL;
}
