/* test-tokenizer.c — HoneTokenizer against HF tokenizers and llama.cpp.
 *
 *   test-tokenizer           small vocabularies trained by the generator (suite 'unit')
 *   test-tokenizer --model   the default model's GGUF vocabulary (suite 'model')
 *
 * Expected ids come from tests/reference/gen_tokenizer_fixtures.py (HF
 * tokenizers for tokenizer.json, llama.cpp for GGUF) over the corpus in
 * tests/data/tokenizer/corpus.json (≥ 2,000 strings, some malformed UTF-8).
 * Each check counts mismatches over the whole corpus and prints the count.
 */
#include <glib.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "hone-error.h"
#include "hone-gguf.h"
#include "hone-tokenizer.h"
#include "hone-test-data.h"

/* ---- fixtures ---- */

static GPtrArray *corpus;   /* GBytes */

static char *
data_path (const char *name)
{
  const char *dir = g_getenv ("HONE_TEST_DATA");
  return g_build_filename (dir ? dir : "tests/data", "tokenizer", name, NULL);
}

static JsonNode *
load_json (const char *name)
{
  g_autofree char *path = data_path (name);
  g_autoptr (JsonParser) parser = json_parser_new ();
  GError *error = NULL;
  if (!json_parser_load_from_mapped_file (parser, path, &error))
    g_error ("cannot load %s: %s", path, error->message);
  return json_node_copy (json_parser_get_root (parser));
}

static void
load_corpus (void)
{
  JsonNode *root;
  JsonArray *a;
  guint i;
  if (corpus)
    return;
  root = load_json ("corpus.json");
  a = json_object_get_array_member (json_node_get_object (root), "strings_b64");
  corpus = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  for (i = 0; i < json_array_get_length (a); i++)
    {
      gsize len;
      guchar *b = g_base64_decode (json_array_get_string_element (a, i), &len);
      g_ptr_array_add (corpus, g_bytes_new_take (b, len));
    }
  json_node_unref (root);
}

static GArray *
ids_from_json (JsonArray *a)
{
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  guint i;
  for (i = 0; a && i < json_array_get_length (a); i++)
    {
      gint32 v = (gint32) json_array_get_int_element (a, i);
      g_array_append_val (ids, v);
    }
  return ids;
}

/* Expected ids of string @i: HF's, overridden by llama.cpp's where @llama. */
static GArray *
expected (JsonObject *exp, const char *which, guint i, gboolean llama)
{
  char key[16];
  JsonObject *o;
  g_snprintf (key, sizeof key, "%u", i);
  if (llama)
    {
      o = json_object_get_object_member (json_object_get_object_member (exp, "llama_cpp"), which);
      if (json_object_has_member (o, key))
        return ids_from_json (json_object_get_array_member (o, key));
      if (g_str_equal (which, "ids_add_special"))
        return NULL;
    }
  if (g_str_equal (which, "ids"))
    return ids_from_json (json_array_get_array_element (json_object_get_array_member (exp, "ids"), i));
  o = json_object_get_object_member (exp, which);
  if (json_object_has_member (o, key))
    return ids_from_json (json_object_get_array_member (o, key));
  if (g_str_equal (which, "ids_special"))
    return expected (exp, "ids", i, FALSE);
  return NULL;
}

static char *
ids_str (const GArray *ids)
{
  GString *s = g_string_new ("[");
  guint i;
  for (i = 0; i < ids->len && i < 40; i++)
    g_string_append_printf (s, "%s%d", i ? " " : "", g_array_index (ids, gint32, i));
  if (ids->len > 40)
    g_string_append (s, " …");
  g_string_append (s, "]");
  return g_string_free (s, FALSE);
}

static gboolean
same_ids (const GArray *a, const GArray *b)
{
  return a->len == b->len && (a->len == 0 || memcmp (a->data, b->data, a->len * sizeof (gint32)) == 0);
}

/* The documented malformed-input rule, written independently of the library:
 * Python's strict UTF-8 decoder semantics, one U+FFFD per offending byte. */
static char *
replace_invalid (const char *s, gsize len)
{
  GString *out = g_string_new (NULL);
  const char *end = s + len;
  while (s < end)
    {
      const char *bad;
      if (g_utf8_validate_len (s, (gsize) (end - s), &bad))
        {
          g_string_append_len (out, s, end - s);
          break;
        }
      if (*bad == '\0' && bad < end)
        {
          /* g_utf8_validate_len stops at NUL, which is valid UTF-8. */
          g_string_append_len (out, s, bad - s + 1);
          s = bad + 1;
          continue;
        }
      g_string_append_len (out, s, bad - s);
      g_string_append (out, "\xef\xbf\xbd");
      s = bad + 1;
    }
  return g_string_free (out, FALSE);
}

/* ---- the checks ---- */

typedef struct {
  const char *name;
  gboolean llama;        /* compare against llama.cpp (GGUF path) */
  gboolean nfc;          /* decode gives the NFC form */
  gboolean raw_bytes;    /* decode gives back the raw bytes (llama.cpp SPM) */
  gboolean lossy_space;  /* Metaspace adds no ▁ before a leading space, the decoder strips one anyway */
} Vocab;

static void
report (const char *what, const Vocab *v, guint checked, guint mismatches)
{
  g_print ("# %s/%s %s: %u strings checked, %u mismatches\n", v->name, v->llama ? "gguf" : "json",
           what, checked, mismatches);
}

static void
check_encode (HoneTokenizer *tok, JsonObject *exp, const Vocab *v)
{
  static const struct { const char *key; HoneEncodeFlags flags; } modes[] = {
    { "ids", 0 },
    { "ids_special", HONE_ENCODE_PARSE_SPECIAL },
    { "ids_add_special", HONE_ENCODE_ADD_SPECIAL },
  };
  guint m, i;
  for (m = 0; m < G_N_ELEMENTS (modes); m++)
    {
      guint checked = 0, bad = 0;
      for (i = 0; i < corpus->len; i++)
        {
          gsize len;
          const char *s = g_bytes_get_data (corpus->pdata[i], &len);
          g_autoptr (GArray) want = expected (exp, modes[m].key, i, v->llama);
          g_autoptr (GArray) got = g_array_new (FALSE, FALSE, sizeof (gint32));
          GError *error = NULL;
          if (want == NULL)
            continue;
          g_assert_true (hone_tokenizer_encode (tok, s, (gssize) len, modes[m].flags, got, &error));
          g_assert_no_error (error);
          checked++;
          if (!same_ids (want, got))
            {
              if (bad++ < 5)
                {
                  g_autofree char *esc = g_strescape (g_strndup (s, MIN (len, 120)), NULL);
                  g_autofree char *ws = ids_str (want), *gs = ids_str (got);
                  g_printerr ("MISMATCH %s %s #%u \"%s\"\n  want %s\n  got  %s\n", v->name, modes[m].key, i, esc, ws, gs);
                }
            }
        }
      report (modes[m].key, v, checked, bad);
      g_assert_cmpuint (bad, ==, 0);
      g_assert_cmpuint (checked, >, 0);
    }
}

/* Decode against HF's decode (JSON path) and the round trip to the input. */
static void
check_decode (HoneTokenizer *tok, JsonObject *exp, const Vocab *v)
{
  JsonObject *dec = json_object_get_object_member (exp, "decoded");
  guint i, checked = 0, bad = 0, rt_checked = 0, rt_bad = 0;

  for (i = 0; i < corpus->len; i++)
    {
      gsize len, out_len;
      const char *s = g_bytes_get_data (corpus->pdata[i], &len);
      g_autoptr (GArray) ids = expected (exp, "ids", i, v->llama);
      g_autofree char *text = v->raw_bytes ? g_strndup (s, len) : replace_invalid (s, len);
      g_autofree char *want = NULL, *got = NULL;
      gsize want_len = v->raw_bytes ? len : strlen (text);
      char key[16];

      if (v->nfc)
        {
          want = g_utf8_normalize (text, -1, G_NORMALIZE_NFC);
          want_len = strlen (want);
        }
      else
        want = g_memdup2 (text, want_len + 1);
      got = hone_tokenizer_decode (tok, (const gint32 *) ids->data, ids->len, FALSE, &out_len);
      /* llama.cpp's SPM cuts raw malformed bytes by their lead byte, so an
       * escaped space can end up inside byte-fallback tokens: no identity there
       * (the ids themselves are checked against llama.cpp above). */
      if (v->raw_bytes && !g_utf8_validate_len (s, len, NULL))
        goto special;
      /* The llama3 fixture's "<mask>" eats the whitespace around it (lstrip/rstrip). */
      if (!v->llama && g_strstr_len (text, -1, "<mask>"))
        goto special;
      if (v->lossy_space && text[0] == ' ')
        goto special;
      rt_checked++;
      if (out_len != want_len || memcmp (got, want, want_len) != 0)
        {
          if (rt_bad++ < 5)
            g_printerr ("ROUND TRIP %s #%u\n  want \"%s\"\n  got  \"%s\"\n", v->name, i,
                        g_strescape (want, NULL), g_strescape (got, NULL));
        }

    special:
      g_snprintf (key, sizeof key, "%u", i);
      if (!v->llama && json_object_has_member (dec, key))
        {
          JsonArray *pair = json_object_get_array_member (dec, key);
          g_autoptr (GArray) sids = expected (exp, "ids_special", i, FALSE);
          int skip;
          for (skip = 0; skip < 2; skip++)
            {
              g_autofree char *d = hone_tokenizer_decode (tok, (const gint32 *) sids->data, sids->len, skip, &out_len);
              g_autofree char *valid = replace_invalid (d, out_len);
              const char *ref = json_array_get_string_element (pair, (guint) skip);
              checked++;
              if (!g_str_equal (valid, ref))
                {
                  if (bad++ < 5)
                    g_printerr ("DECODE %s #%u skip=%d\n  want \"%s\"\n  got  \"%s\"\n", v->name, i, skip,
                                g_strescape (ref, NULL), g_strescape (valid, NULL));
                }
            }
        }
    }
  report ("round-trip", v, rt_checked, rt_bad);
  g_assert_cmpuint (rt_bad, ==, 0);
  if (!v->llama)
    {
      report ("decode", v, checked, bad);
      g_assert_cmpuint (bad, ==, 0);
      g_assert_cmpuint (checked, >, 0);
    }
}

/* Streaming: every chunk valid UTF-8, and the chunks add up to the full decode
 * (made valid). Uses the parsed-special ids, with and without skipping them. */
static void
check_stream (HoneTokenizer *tok, JsonObject *exp, const Vocab *v)
{
  guint i, checked = 0;
  int skip;
  for (skip = 0; skip < 2; skip++)
    for (i = 0; i < corpus->len; i++)
      {
        g_autoptr (GArray) ids = expected (exp, "ids_special", i, v->llama);
        g_autoptr (HoneDecodeStream) st = hone_decode_stream_new (tok, skip);
        GString *acc = g_string_new (NULL);
        gsize full_len;
        g_autofree char *full = hone_tokenizer_decode (tok, (const gint32 *) ids->data, ids->len, skip, &full_len);
        g_autofree char *want = replace_invalid (full, full_len);
        g_autofree char *rest = NULL;
        guint k;
        for (k = 0; k < ids->len; k++)
          {
            g_autofree char *chunk = hone_decode_stream_push (st, g_array_index (ids, gint32, k));
            g_assert_true (g_utf8_validate (chunk, -1, NULL));
            g_string_append (acc, chunk);
          }
        rest = hone_decode_stream_finish (st);
        g_assert_true (g_utf8_validate (rest, -1, NULL));
        g_string_append (acc, rest);
        g_assert_cmpstr (acc->str, ==, want);
        g_string_free (acc, TRUE);
        checked++;
      }
  report ("stream", v, checked, 0);
}

static void
check_all (HoneTokenizer *tok, const char *expected_file, const Vocab *v)
{
  JsonNode *root;
  load_corpus ();
  root = load_json (expected_file);
  check_encode (tok, json_node_get_object (root), v);
  check_decode (tok, json_node_get_object (root), v);
  check_stream (tok, json_node_get_object (root), v);
  json_node_unref (root);
}

static HoneTokenizer *
open_gguf_tokenizer (const char *path)
{
  GError *error = NULL;
  g_autoptr (HoneGguf) g = hone_gguf_open (path, &error);
  HoneTokenizer *tok;
  g_assert_no_error (error);
  tok = hone_tokenizer_new_from_gguf (g, &error);
  g_assert_no_error (error);
  return tok;
}

static HoneTokenizer *
open_dir_tokenizer (const char *name)
{
  g_autofree char *dir = data_path (name);
  GError *error = NULL;
  HoneTokenizer *tok = hone_tokenizer_new_from_hf_dir (dir, &error);
  g_assert_no_error (error);
  return tok;
}

/* ---- unit tests ---- */

static void
test_spm_json (void)
{
  Vocab v = { "spm", FALSE, FALSE, FALSE };
  g_autoptr (HoneTokenizer) tok = open_dir_tokenizer ("spm");
  g_assert_cmpint (hone_tokenizer_kind (tok), ==, HONE_TOKENIZER_SPM_BPE);
  g_assert_cmpint (hone_tokenizer_bos (tok), ==, 1);
  g_assert_cmpint (hone_tokenizer_eos (tok), ==, 2);
  g_assert_true (hone_tokenizer_adds_bos (tok));
  g_assert_true (hone_tokenizer_is_eog (tok, 2));
  g_assert_true (hone_tokenizer_is_special (tok, 1));
  g_assert_cmpstr (hone_tokenizer_token_text (tok, 3), ==, "<0x00>");
  check_all (tok, "spm-expected.json", &v);
}

static void
test_spm_metaspace_json (void)
{
  Vocab v = { "spm-metaspace", FALSE, FALSE, FALSE, TRUE };
  g_autoptr (HoneTokenizer) tok = open_dir_tokenizer ("spm-metaspace");
  g_assert_cmpint (hone_tokenizer_kind (tok), ==, HONE_TOKENIZER_SPM_BPE);
  g_assert_true (hone_tokenizer_adds_bos (tok));
  check_all (tok, "spm-metaspace-expected.json", &v);
}

static void
test_spm_gguf (void)
{
  Vocab v = { "spm", TRUE, FALSE, TRUE };
  g_autofree char *path = data_path ("spm/spm.gguf");
  g_autoptr (HoneTokenizer) tok = open_gguf_tokenizer (path);
  g_assert_cmpint (hone_tokenizer_kind (tok), ==, HONE_TOKENIZER_SPM_BPE);
  g_assert_true (hone_tokenizer_adds_bos (tok));
  check_all (tok, "spm-expected.json", &v);
}

static void
test_qwen2_json (void)
{
  Vocab v = { "qwen2", FALSE, TRUE, FALSE };
  g_autoptr (HoneTokenizer) tok = open_dir_tokenizer ("qwen2");
  g_assert_cmpint (hone_tokenizer_kind (tok), ==, HONE_TOKENIZER_BYTE_BPE);
  g_assert_false (hone_tokenizer_adds_bos (tok));
  g_assert_true (hone_tokenizer_is_eog (tok, hone_tokenizer_token_id (tok, "<|im_end|>")));
  g_assert_true (hone_tokenizer_is_eog (tok, hone_tokenizer_token_id (tok, "<|endoftext|>")));
  g_assert_false (hone_tokenizer_is_eog (tok, hone_tokenizer_token_id (tok, "<|im_start|>")));
  check_all (tok, "qwen2-expected.json", &v);
}

static void
test_qwen2_gguf (void)
{
  Vocab v = { "qwen2", TRUE, FALSE, FALSE };
  g_autofree char *path = data_path ("qwen2/qwen2.gguf");
  g_autoptr (HoneTokenizer) tok = open_gguf_tokenizer (path);
  check_all (tok, "qwen2-expected.json", &v);
}

static void
test_llama3_json (void)
{
  Vocab v = { "llama3", FALSE, FALSE, FALSE };
  g_autoptr (HoneTokenizer) tok = open_dir_tokenizer ("llama3");
  g_assert_true (hone_tokenizer_adds_bos (tok));
  g_assert_cmpint (hone_tokenizer_bos (tok), ==, hone_tokenizer_token_id (tok, "<|begin_of_text|>"));
  g_assert_true (hone_tokenizer_is_eog (tok, hone_tokenizer_token_id (tok, "<|eot_id|>")));
  check_all (tok, "llama3-expected.json", &v);
}

static void
test_llama3_gguf (void)
{
  Vocab v = { "llama3", TRUE, FALSE, FALSE };
  g_autofree char *path = data_path ("llama3/llama3.gguf");
  g_autoptr (HoneTokenizer) tok = open_gguf_tokenizer (path);
  g_assert_true (hone_tokenizer_adds_bos (tok));
  check_all (tok, "llama3-expected.json", &v);
}

/* Two threads encode the corpus with one tokenizer (the pre-token cache is
 * shared under a trylock) and must both get the reference ids. */
typedef struct {
  HoneTokenizer *tok;
  JsonObject *exp;
  guint bad;
} ThreadJob;

static gpointer
thread_encode (gpointer data)
{
  ThreadJob *job = data;
  guint i;
  for (i = 0; i < corpus->len; i++)
    {
      gsize len;
      const char *s = g_bytes_get_data (corpus->pdata[i], &len);
      g_autoptr (GArray) want = expected (job->exp, "ids_special", i, FALSE);
      g_autoptr (GArray) got = g_array_new (FALSE, FALSE, sizeof (gint32));
      if (!hone_tokenizer_encode (job->tok, s, (gssize) len, HONE_ENCODE_PARSE_SPECIAL, got, NULL) ||
          !same_ids (want, got))
        job->bad++;
    }
  return NULL;
}

static void
test_threads (void)
{
  g_autoptr (HoneTokenizer) tok = open_dir_tokenizer ("qwen2");
  JsonNode *root;
  ThreadJob jobs[2];
  GThread *threads[2];
  int i;
  load_corpus ();
  root = load_json ("qwen2-expected.json");
  for (i = 0; i < 2; i++)
    {
      jobs[i].tok = tok;
      jobs[i].exp = json_node_get_object (root);
      jobs[i].bad = 0;
      threads[i] = g_thread_new ("encode", thread_encode, &jobs[i]);
    }
  for (i = 0; i < 2; i++)
    g_thread_join (threads[i]);
  g_assert_cmpuint (jobs[0].bad, ==, 0);
  g_assert_cmpuint (jobs[1].bad, ==, 0);
  json_node_unref (root);
}

/* ---- bad input ---- */

static void
expect_json_error (const char *json, int code, const char *needle)
{
  GError *error = NULL;
  HoneTokenizer *tok = hone_tokenizer_new_from_json (json, -1, NULL, 0, &error);
  g_assert_null (tok);
  g_assert_error (error, HONE_ERROR, code);
  if (needle && strstr (error->message, needle) == NULL)
    g_error ("error “%s” does not mention “%s”", error->message, needle);
  g_error_free (error);
}

#define BPE_HEAD "{\"model\":{\"type\":\"BPE\",\"vocab\":"

static void
test_bad_input (void)
{
  GError *error = NULL;
  HoneTokenizer *tok;

  expect_json_error ("{\"model\": ", HONE_ERROR_INVALID_JSON, NULL);
  expect_json_error ("[1, 2]", HONE_ERROR_INVALID_JSON, NULL);
  expect_json_error ("{}", HONE_ERROR_INVALID_JSON, "model");
  expect_json_error ("{\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\",0.0]]}}", HONE_ERROR_TOKENIZER, "Unigram");
  expect_json_error ("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0}}}", HONE_ERROR_TOKENIZER, "WordPiece");
  expect_json_error ("{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":0}}}", HONE_ERROR_TOKENIZER, "WordLevel");
  /* merges that refer to unknown tokens, or make one */
  expect_json_error (BPE_HEAD "{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a c\"]}}", HONE_ERROR_TOKENIZER, "Merge 0");
  expect_json_error (BPE_HEAD "{\"a\":0,\"b\":1},\"merges\":[[\"a\",\"b\"]]}}", HONE_ERROR_TOKENIZER, "not in the vocabulary");
  expect_json_error (BPE_HEAD "{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"ab\"]}}", HONE_ERROR_INVALID_JSON, "merge 0");
  expect_json_error (BPE_HEAD "{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[[\"a\"]]}}", HONE_ERROR_INVALID_JSON, "merge 0");
  /* id gaps and duplicates */
  expect_json_error (BPE_HEAD "{\"a\":0,\"b\":2},\"merges\":[]}}", HONE_ERROR_TOKENIZER, "1");
  expect_json_error (BPE_HEAD "{\"a\":0,\"b\":0},\"merges\":[]}}", HONE_ERROR_TOKENIZER, "twice");
  expect_json_error (BPE_HEAD "{\"a\":-1},\"merges\":[]}}", HONE_ERROR_TOKENIZER, NULL);
  expect_json_error (BPE_HEAD "{\"a\":\"x\"},\"merges\":[]}}", HONE_ERROR_INVALID_JSON, NULL);
  expect_json_error (BPE_HEAD "{\"a\":99999999999},\"merges\":[]}}", HONE_ERROR_TOKENIZER, NULL);
  expect_json_error (BPE_HEAD "{\"a\":0},\"merges\":[]},\"added_tokens\":[{\"id\":0,\"content\":\"b\"}]}",
                     HONE_ERROR_TOKENIZER, "twice");
  /* unsupported pipeline parts are named */
  expect_json_error (BPE_HEAD "{\"a\":0},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"}}",
                     HONE_ERROR_TOKENIZER, "BertPreTokenizer");
  expect_json_error (BPE_HEAD "{\"a\":0},\"merges\":[]},\"normalizer\":{\"type\":\"BertNormalizer\"}}",
                     HONE_ERROR_TOKENIZER, "BertNormalizer");
  expect_json_error (BPE_HEAD "{\"a\":0},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\"}}",
                     HONE_ERROR_TOKENIZER, "regex");
  expect_json_error (BPE_HEAD "{\"a\":0},\"merges\":[],\"unk_token\":\"<unk>\"}}", HONE_ERROR_TOKENIZER, "<unk>");

  /* A minimal valid one works, and encodes anything. */
  tok = hone_tokenizer_new_from_json (BPE_HEAD "{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}}", -1, NULL, 0, &error);
  g_assert_no_error (error);
  {
    g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint32));
    g_assert_true (hone_tokenizer_encode (tok, "abxab\xff", -1, HONE_ENCODE_ADD_SPECIAL, ids, &error));
    g_assert_cmpuint (ids->len, ==, 2);   /* HF drops characters it cannot map without unk */
    g_assert_cmpint (g_array_index (ids, gint32, 0), ==, 2);
  }
  hone_tokenizer_free (tok);

  /* GGUF with an unsupported tokenizer model. */
  {
    g_autoptr (HoneGgufWriter) w = hone_gguf_writer_new ();
    g_autoptr (GBytes) bytes = NULL;
    g_autoptr (HoneGguf) g = NULL;
    const char *toks[] = { "[PAD]", "a" };
    hone_gguf_writer_add_string (w, "general.architecture", "bert", -1);
    hone_gguf_writer_add_string (w, "tokenizer.ggml.model", "bert", -1);
    hone_gguf_writer_add_string_array (w, "tokenizer.ggml.tokens", toks, NULL, 2);
    bytes = hone_gguf_writer_to_bytes (w, &error);
    g_assert_no_error (error);
    g = hone_gguf_open_bytes (bytes, &error);
    g_assert_no_error (error);
    g_assert_null (hone_tokenizer_new_from_gguf (g, &error));
    g_assert_error (error, HONE_ERROR, HONE_ERROR_TOKENIZER);
    g_assert_nonnull (strstr (error->message, "bert"));
    g_clear_error (&error);
  }
  /* GGUF gpt2 whose merges name a missing token, and an unknown pre type. */
  {
    const char *toks[] = { "a", "b", "ab" };
    const char *bad_merges[] = { "a c" };
    const char *pres[] = { "smollm", "no-such-pre" };
    int k;
    for (k = 0; k < 2; k++)
      {
        g_autoptr (HoneGgufWriter) w = hone_gguf_writer_new ();
        g_autoptr (GBytes) bytes = NULL;
        g_autoptr (HoneGguf) g = NULL;
        hone_gguf_writer_add_string (w, "tokenizer.ggml.model", "gpt2", -1);
        hone_gguf_writer_add_string (w, "tokenizer.ggml.pre", pres[k], -1);
        hone_gguf_writer_add_string_array (w, "tokenizer.ggml.tokens", toks, NULL, 3);
        hone_gguf_writer_add_string_array (w, "tokenizer.ggml.merges", bad_merges, NULL, 1);
        bytes = hone_gguf_writer_to_bytes (w, &error);
        g_assert_no_error (error);
        g = hone_gguf_open_bytes (bytes, &error);
        g_assert_no_error (error);
        g_assert_null (hone_tokenizer_new_from_gguf (g, &error));
        g_assert_error (error, HONE_ERROR, HONE_ERROR_TOKENIZER);
        g_assert_nonnull (strstr (error->message, k == 0 ? "Merge 0" : "no-such-pre"));
        g_clear_error (&error);
      }
  }
}

/* The streaming decoder holds back a split character and never emits half of it. */
static void
test_stream_split_char (void)
{
  g_autoptr (HoneTokenizer) tok = open_dir_tokenizer ("spm");
  int b0 = hone_tokenizer_token_id (tok, "<0xE4>"), b1 = hone_tokenizer_token_id (tok, "<0xB8>"),
      b2 = hone_tokenizer_token_id (tok, "<0xAD>"), a = hone_tokenizer_token_id (tok, "a");
  g_autoptr (HoneDecodeStream) st = hone_decode_stream_new (tok, TRUE);
  g_autofree char *c0 = NULL, *c1 = NULL, *c2 = NULL, *c3 = NULL, *c4 = NULL, *c5 = NULL;
  g_assert_cmpint (b0, >=, 0);
  c0 = hone_decode_stream_push (st, b0);
  c1 = hone_decode_stream_push (st, b1);
  g_assert_cmpstr (c0, ==, "");
  g_assert_cmpstr (c1, ==, "");
  c2 = hone_decode_stream_push (st, b2);
  g_assert_cmpstr (c2, ==, "中");
  /* A cut-short sequence followed by a plain char: one U+FFFD per byte. */
  c3 = hone_decode_stream_push (st, b0);
  c4 = hone_decode_stream_push (st, a);
  g_assert_cmpstr (c3, ==, "");
  g_assert_cmpstr (c4, ==, "\xef\xbf\xbd" "a");
  /* A stray continuation byte is replaced at once; a cut-short tail at the end. */
  g_free (c0);
  c0 = hone_decode_stream_push (st, b1);
  g_assert_cmpstr (c0, ==, "\xef\xbf\xbd");
  g_free (c1);
  c1 = hone_decode_stream_push (st, b0);
  g_assert_cmpstr (c1, ==, "");
  c5 = hone_decode_stream_finish (st);
  g_assert_cmpstr (c5, ==, "\xef\xbf\xbd");
}

/* ---- the default model ---- */

static char *
default_model_path (void)
{
  const char *env = g_getenv ("HONE_DEFAULT_MODEL");
  if (env && *env)
    return g_strdup (env);
  return g_build_filename (g_get_user_cache_dir (), "hone", "models", "SmolLM2-135M-Instruct.Q4_1.gguf", NULL);
}

static void
test_default_model (void)
{
  Vocab v = { "smollm2", TRUE, FALSE, FALSE };
  g_autofree char *path = default_model_path ();
  g_autoptr (HoneTokenizer) tok = NULL;
  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    {
      g_test_message ("default model not found at %s (set HONE_DEFAULT_MODEL or run .ci/fetch-model)", path);
      g_test_fail ();
      return;
    }
  tok = open_gguf_tokenizer (path);
  g_assert_cmpint (hone_tokenizer_kind (tok), ==, HONE_TOKENIZER_BYTE_BPE);
  g_assert_cmpint (hone_tokenizer_n_vocab (tok), ==, 49152);
  g_assert_cmpint (hone_tokenizer_bos (tok), ==, 1);
  g_assert_cmpint (hone_tokenizer_eos (tok), ==, 2);
  g_assert_false (hone_tokenizer_adds_bos (tok));
  g_assert_true (hone_tokenizer_is_eog (tok, 2));    /* <|im_end|> */
  g_assert_true (hone_tokenizer_is_eog (tok, 0));    /* <|endoftext|> */
  g_assert_false (hone_tokenizer_is_eog (tok, 1));   /* <|im_start|> */
  g_assert_true (hone_tokenizer_is_special (tok, 1));
  g_assert_cmpstr (hone_tokenizer_token_text (tok, 1), ==, "<|im_start|>");
  g_assert_cmpint (hone_tokenizer_token_id (tok, "<|im_end|>"), ==, 2);
  check_all (tok, "smollm2-expected.json", &v);
}

/* The same vocabulary through the tokenizer.json path: a tokenizer.json built
 * here from the GGUF's tokens and merges with SmolLM2's own pipeline (what
 * the generator gives HF), checked against HF's ids and decodes. */
static void
test_default_model_json (void)
{
  Vocab v = { "smollm2", FALSE, FALSE, FALSE };
  g_autofree char *path = default_model_path ();
  g_autoptr (HoneGguf) g = NULL;
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (HoneTokenizer) tok = NULL;
  g_autofree char *json = NULL;
  JsonNode *root;
  GError *error = NULL;
  HoneGgufType tt;
  guint64 n, nm, i;
  const gint32 *types;

  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    {
      g_test_message ("default model not found at %s", path);
      g_test_fail ();
      return;
    }
  g = hone_gguf_open (path, &error);
  g_assert_no_error (error);
  types = hone_gguf_get_array (g, "tokenizer.ggml.token_type", &tt, &n);
  g_assert_nonnull (types);
  nm = hone_gguf_kv_array_length (g, (guint) hone_gguf_find_kv (g, "tokenizer.ggml.merges"));

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "model");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "type");
  json_builder_add_string_value (b, "BPE");
  json_builder_set_member_name (b, "vocab");
  json_builder_begin_object (b);
  for (i = 0; i < n; i++)
    {
      gsize len;
      const char *t = hone_gguf_get_array_string (g, "tokenizer.ggml.tokens", i, &len);
      g_autofree char *z = g_strndup (t, len);
      json_builder_set_member_name (b, z);
      json_builder_add_int_value (b, (gint64) i);
    }
  json_builder_end_object (b);
  json_builder_set_member_name (b, "merges");
  json_builder_begin_array (b);
  for (i = 0; i < nm; i++)
    {
      gsize len;
      const char *t = hone_gguf_get_array_string (g, "tokenizer.ggml.merges", i, &len);
      g_autofree char *z = g_strndup (t, len);
      json_builder_add_string_value (b, z);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "added_tokens");
  json_builder_begin_array (b);
  for (i = 0; i < n; i++)
    {
      gint32 ty;
      gsize len;
      const char *t = hone_gguf_get_array_string (g, "tokenizer.ggml.tokens", i, &len);
      g_autofree char *z = g_strndup (t, len);
      memcpy (&ty, (const guint8 *) types + i * 4, 4);
      if (ty != 3)
        continue;
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "id");
      json_builder_add_int_value (b, (gint64) i);
      json_builder_set_member_name (b, "content");
      json_builder_add_string_value (b, z);
      json_builder_set_member_name (b, "special");
      json_builder_add_boolean_value (b, TRUE);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_set_member_name (b, "pre_tokenizer");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "type");
  json_builder_add_string_value (b, "Sequence");
  json_builder_set_member_name (b, "pretokenizers");
  json_builder_begin_array (b);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "type");
  json_builder_add_string_value (b, "Digits");
  json_builder_set_member_name (b, "individual_digits");
  json_builder_add_boolean_value (b, TRUE);
  json_builder_end_object (b);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "type");
  json_builder_add_string_value (b, "ByteLevel");
  json_builder_set_member_name (b, "add_prefix_space");
  json_builder_add_boolean_value (b, FALSE);
  json_builder_end_object (b);
  json_builder_end_array (b);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "decoder");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "type");
  json_builder_add_string_value (b, "ByteLevel");
  json_builder_end_object (b);
  json_builder_end_object (b);

  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  json = json_generator_to_data (gen, NULL);
  json_node_unref (root);
  tok = hone_tokenizer_new_from_json (json, -1, "{\"bos_token\":\"<|im_start|>\",\"eos_token\":\"<|im_end|>\"}", -1, &error);
  g_assert_no_error (error);
  g_assert_cmpint (hone_tokenizer_n_vocab (tok), ==, 49152);
  g_assert_cmpint (hone_tokenizer_eos (tok), ==, 2);
  g_assert_false (hone_tokenizer_adds_bos (tok));
  check_all (tok, "smollm2-expected.json", &v);
}

int
main (int argc, char **argv)
{
  gboolean model = hone_test_take_flag (&argc, argv, "--model");
  int status;

  g_test_init (&argc, &argv, NULL);
  if (model)
    {
      g_test_add_func ("/tokenizer/model/smollm2-gguf", test_default_model);
      g_test_add_func ("/tokenizer/model/smollm2-json", test_default_model_json);
    }
  else
    {
      g_test_add_func ("/tokenizer/spm/json", test_spm_json);
      g_test_add_func ("/tokenizer/spm/gguf", test_spm_gguf);
      g_test_add_func ("/tokenizer/spm/metaspace-json", test_spm_metaspace_json);
      g_test_add_func ("/tokenizer/qwen2/json", test_qwen2_json);
      g_test_add_func ("/tokenizer/qwen2/gguf", test_qwen2_gguf);
      g_test_add_func ("/tokenizer/llama3/json", test_llama3_json);
      g_test_add_func ("/tokenizer/llama3/gguf", test_llama3_gguf);
      g_test_add_func ("/tokenizer/bad-input", test_bad_input);
      g_test_add_func ("/tokenizer/stream-split-char", test_stream_split_char);
      g_test_add_func ("/tokenizer/threads", test_threads);
    }
  status = g_test_run ();
  if (corpus)
    g_ptr_array_unref (corpus);
  return status;
}
