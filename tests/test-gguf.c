/* test-gguf.c — the GGUF reader and writer.
 *
 * References: the files in tests/data/gguf/, written by tests/reference/gen_gguf_fixtures.py
 * with the `gguf` package (0.19.0) — its GGUFWriter made the files, its reader
 * the offsets, its dequantizer the expected values. Files Hone writes are read
 * back here and by tests/reference/check_gguf_writer.py (the package again).
 *
 *   test-gguf            unit tests
 *   test-gguf --model    the default model (suite 'model')
 */
#include "hone-dtype.h"
#include "hone-error.h"
#include "hone-gguf.h"
#include "hone-test-data.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

/* Fixtures of this test live in tests/data/gguf. */
#define data_path(name) hone_test_data_path ("gguf", (name))
#define load_data(name) hone_test_data_load ("gguf", (name))
#define load_json(name, parser_out) hone_test_data_load_json ("gguf", (name), (parser_out))
#define fbits hone_test_fbits

static float *
floats_at (GBytes *b, gint64 offset, gint64 n)
{
  gsize len;
  const guint8 *p = g_bytes_get_data (b, &len);
  float *out = g_new (float, n);
  g_assert_cmpuint ((offset + n) * 4, <=, len);
  for (gint64 i = 0; i < n; i++)
    {
      uint32_t u;
      memcpy (&u, p + 4 * (offset + i), 4);
      u = GUINT32_FROM_LE (u);
      memcpy (&out[i], &u, 4);
    }
  return out;
}

/* ---- metadata checks against a JSON description ------------------------ */

static gsize
elem_size (HoneGgufType t)
{
  switch (t)
    {
    case HONE_GGUF_UINT8: case HONE_GGUF_INT8: case HONE_GGUF_BOOL: return 1;
    case HONE_GGUF_UINT16: case HONE_GGUF_INT16: return 2;
    case HONE_GGUF_UINT32: case HONE_GGUF_INT32: case HONE_GGUF_FLOAT32: return 4;
    default: return 8;
    }
}

static gboolean
is_signed_type (HoneGgufType t)
{
  return t == HONE_GGUF_INT8 || t == HONE_GGUF_INT16 || t == HONE_GGUF_INT32 || t == HONE_GGUF_INT64;
}

/* Sign- or zero-extend a packed little-endian integer element. */
static void
load_int (const guint8 *p, HoneGgufType t, gint64 *s, guint64 *u)
{
  guint64 v = 0;
  gsize n = elem_size (t);
  for (gsize i = 0; i < n; i++)
    v |= (guint64) p[i] << (8 * i);
  if (is_signed_type (t) && n < 8 && (v >> (8 * n - 1)) & 1)
    v |= ~(guint64) 0 << (8 * n);
  *u = v;
  *s = (gint64) v;
}

static void
check_int_value (const HoneGguf *g, const char *key, HoneGgufType t, const char *text)
{
  gint64 i64 = 0;
  guint32 u32 = 0;
  gboolean neg = text[0] == '-';
  guint64 mag = g_ascii_strtoull (neg ? text + 1 : text, NULL, 10);

  if (neg)
    {
      gint64 v = g_ascii_strtoll (text, NULL, 10);
      g_assert_true (hone_gguf_get_i64 (g, key, &i64));
      g_assert_cmpint (i64, ==, v);
      g_assert_false (hone_gguf_get_u32 (g, key, &u32));   /* negative does not fit */
    }
  else
    {
      if (mag <= G_MAXINT64)
        {
          g_assert_true (hone_gguf_get_i64 (g, key, &i64));
          g_assert_cmpint (i64, ==, (gint64) mag);
        }
      else
        g_assert_false (hone_gguf_get_i64 (g, key, &i64));
      g_assert_cmpint (hone_gguf_get_u32 (g, key, &u32), ==, mag <= G_MAXUINT32);
      if (mag <= G_MAXUINT32)
        g_assert_cmpuint (u32, ==, mag);
    }
  (void) t;
}

static void
check_string_array (const HoneGguf *g, const char *key, JsonArray *arr)
{
  for (guint i = 0; i < json_array_get_length (arr); i++)
    {
      const char *want = json_array_get_string_element (arr, i);
      gsize len;
      const char *s = hone_gguf_get_array_string (g, key, i, &len);
      g_assert_nonnull (s);
      /* json-glib strings stop at an embedded NUL; the fixture has "a\0b" */
      if (strlen (want) < len && strcmp (want, "a") == 0)
        g_assert_cmpmem (s, len, "a\0b", 3);
      else
        g_assert_cmpmem (s, len, want, strlen (want));
    }
  g_assert_null (hone_gguf_get_array_string (g, key, json_array_get_length (arr), NULL));
}

static void
check_kvs (const HoneGguf *g, JsonObject *kvs)
{
  GList *keys = json_object_get_members (kvs);
  g_assert_cmpuint (hone_gguf_n_kv (g), ==, g_list_length (keys));
  for (GList *l = keys; l; l = l->next)
    {
      const char *key = l->data;
      JsonObject *o = json_object_get_object_member (kvs, key);
      HoneGgufType type = (HoneGgufType) json_object_get_int_member (o, "type");
      JsonNode *value = json_object_get_member (o, "value");
      int idx = hone_gguf_find_kv (g, key);

      g_test_message ("key %s", key);
      g_assert_cmpint (idx, >=, 0);
      g_assert_cmpstr (hone_gguf_kv_key (g, idx), ==, key);
      g_assert_cmpint (hone_gguf_kv_type (g, idx), ==, type);
      switch (type)
        {
        case HONE_GGUF_UINT8: case HONE_GGUF_INT8: case HONE_GGUF_UINT16: case HONE_GGUF_INT16:
        case HONE_GGUF_UINT32: case HONE_GGUF_INT32: case HONE_GGUF_UINT64: case HONE_GGUF_INT64:
          check_int_value (g, key, type, json_node_get_string (value));
          g_assert_false (hone_gguf_get_bool (g, key, NULL));
          g_assert_null (hone_gguf_get_string (g, key, NULL));
          g_assert_null (hone_gguf_get_array (g, key, NULL, NULL));
          break;
        case HONE_GGUF_FLOAT32:
        case HONE_GGUF_FLOAT64:
          {
            float f;
            g_assert_true (hone_gguf_get_f32 (g, key, &f));
            g_assert_cmphex (fbits (f), ==, fbits ((float) json_node_get_double (value)));
            g_assert_false (hone_gguf_get_u32 (g, key, NULL));
            g_assert_false (hone_gguf_get_i64 (g, key, NULL));
            break;
          }
        case HONE_GGUF_BOOL:
          {
            gboolean b;
            g_assert_true (hone_gguf_get_bool (g, key, &b));
            g_assert_cmpint (b, ==, json_node_get_boolean (value));
            g_assert_false (hone_gguf_get_u32 (g, key, NULL));
            break;
          }
        case HONE_GGUF_STRING:
          {
            gsize len;
            const char *s = hone_gguf_get_string (g, key, &len);
            char *dup = hone_gguf_dup_string (g, key);
            g_assert_nonnull (s);
            g_assert_cmpmem (s, len, json_node_get_string (value), strlen (json_node_get_string (value)));
            g_assert_cmpstr (dup, ==, json_node_get_string (value));
            g_free (dup);
            g_assert_false (hone_gguf_get_u32 (g, key, NULL));
            break;
          }
        case HONE_GGUF_ARRAY:
          {
            HoneGgufType sub = (HoneGgufType) json_object_get_int_member (o, "subtype");
            JsonArray *arr = json_node_get_array (value);
            guint n_want = json_array_get_length (arr);
            HoneGgufType et;
            guint64 n;
            const guint8 *p = hone_gguf_get_array (g, key, &et, &n);
            g_assert_nonnull (p);
            g_assert_cmpint (et, ==, sub);
            g_assert_cmpuint (n, ==, n_want);
            g_assert_cmpint (hone_gguf_kv_array_type (g, idx), ==, sub);
            g_assert_cmpuint (hone_gguf_kv_array_length (g, idx), ==, n_want);
            g_assert_null (hone_gguf_get_string (g, key, NULL));
            g_assert_false (hone_gguf_get_u32 (g, key, NULL));
            if (sub == HONE_GGUF_STRING)
              check_string_array (g, key, arr);
            else if (sub == HONE_GGUF_ARRAY)
              g_assert_null (hone_gguf_get_array_string (g, key, 0, NULL));
            else
              for (guint i = 0; i < n_want; i++)
                {
                  const guint8 *e = p + i * elem_size (sub);
                  if (sub == HONE_GGUF_FLOAT32)
                    {
                      float f;
                      memcpy (&f, e, 4);
                      g_assert_cmphex (fbits (f), ==, fbits ((float) json_array_get_double_element (arr, i)));
                    }
                  else if (sub == HONE_GGUF_BOOL)
                    g_assert_cmpint (e[0], ==, json_array_get_boolean_element (arr, i));
                  else
                    {
                      gint64 s;
                      guint64 u;
                      const char *text = json_array_get_string_element (arr, i);
                      load_int (e, sub, &s, &u);
                      if (text[0] == '-')
                        g_assert_cmpint (s, ==, g_ascii_strtoll (text, NULL, 10));
                      else
                        g_assert_cmpuint (u, ==, g_ascii_strtoull (text, NULL, 10));
                    }
                }
            break;
          }
        default:
          g_assert_not_reached ();
        }
    }
  g_list_free (keys);
  g_assert_cmpint (hone_gguf_find_kv (g, "no.such.key"), ==, -1);
  g_assert_false (hone_gguf_get_u32 (g, "no.such.key", NULL));
  g_assert_null (hone_gguf_get_string (g, "no.such.key", NULL));
  g_assert_null (hone_gguf_get_array (g, "no.such.key", NULL, NULL));
}

/* Tensors: shape, type, zero-copy location, and dequantized values. */
static void
check_tensors (const HoneGguf *g, GBytes *file, JsonArray *tensors, GBytes *expected, gboolean check_offsets)
{
  const guint8 *base = g_bytes_get_data (file, NULL);

  g_assert_cmpuint (hone_gguf_n_tensors (g), ==, json_array_get_length (tensors));
  for (guint i = 0; i < json_array_get_length (tensors); i++)
    {
      JsonObject *o = json_array_get_object_element (tensors, i);
      const char *name = json_object_get_string_member (o, "name");
      const HoneTensor *t = hone_gguf_tensor (g, i);
      JsonArray *ne = json_object_get_array_member (o, "ne");
      gint64 n, rows;
      float *want, *got;

      g_assert_true (hone_gguf_find_tensor (g, name) == t);
      g_assert_cmpstr (t->name, ==, name);
      g_assert_cmpint (t->type, ==, json_object_get_int_member (o, "type"));
      g_assert_cmpint (t->n_dims, ==, json_array_get_length (ne));
      for (int d = 0; d < HONE_TENSOR_MAX_DIMS; d++)
        g_assert_cmpint (t->ne[d], ==, d < t->n_dims ? json_array_get_int_element (ne, d) : 1);
      n = hone_tensor_n_elements (t);
      rows = n / t->ne[0];
      g_assert_cmpuint (t->nbytes, ==, hone_dtype_row_bytes (t->type, t->ne[0]) * rows);
      if (check_offsets)
        {
          g_assert_true ((const guint8 *) t->data == base + json_object_get_int_member (o, "data_offset"));
          g_assert_cmpuint (t->nbytes, ==, json_object_get_int_member (o, "n_bytes"));
        }
      want = floats_at (expected, json_object_get_int_member (o, "expected_offset"), n);
      got = g_new (float, n);
      for (gint64 r = 0; r < rows; r++)
        hone_dequantize_row (t->type, hone_tensor_row (t, r), got + r * t->ne[0], t->ne[0]);
      for (gint64 k = 0; k < n; k++)
        if (fbits (got[k]) != fbits (want[k]))
          g_error ("%s[%" G_GINT64_FORMAT "]: hone %a, gguf-py %a", name, k, got[k], want[k]);
      g_free (want);
      g_free (got);
    }
  g_assert_null (hone_gguf_find_tensor (g, "no.such.tensor"));
}

static void
test_read_v3 (void)
{
  JsonParser *parser;
  JsonObject *root = load_json ("types-v3.json", &parser);
  GBytes *file = load_data ("types-v3.gguf");
  GBytes *expected = load_data ("types-v3.expected.bin");
  GError *error = NULL;
  HoneGguf *g = hone_gguf_open_bytes (file, &error);

  g_assert_no_error (error);
  g_assert_cmpuint (hone_gguf_version (g), ==, 3);
  g_assert_cmpuint (hone_gguf_alignment (g), ==, 32);
  g_assert_cmpuint (hone_gguf_file_size (g), ==, g_bytes_get_size (file));
  g_assert_cmpstr (hone_gguf_kv_key (g, 0), ==, "general.architecture");
  check_kvs (g, json_object_get_object_member (root, "kv"));
  check_tensors (g, file, json_object_get_array_member (root, "tensors"), expected, TRUE);

  /* The file's bytes stay alive as long as the reader, not the caller's ref. */
  hone_gguf_ref (g);
  g_bytes_unref (file);
  hone_gguf_unref (g);
  g_assert_cmpstr (hone_gguf_tensor (g, 0)->name, ==, "t.f32");
  hone_gguf_unref (g);
  g_bytes_unref (expected);
  g_object_unref (parser);
}

static void
test_read_v2 (void)
{
  JsonParser *parser;
  JsonObject *root = load_json ("types-v2.json", &parser);
  GBytes *file = load_data ("types-v2.gguf");
  GBytes *expected = load_data ("types-v2.expected.bin");
  GError *error = NULL;
  HoneGguf *g = hone_gguf_open_bytes (file, &error);
  JsonArray *offs = json_object_get_array_member (root, "data_offsets");
  const guint8 *base = g_bytes_get_data (file, NULL);

  g_assert_no_error (error);
  g_assert_cmpuint (hone_gguf_version (g), ==, 2);
  g_assert_cmpuint (hone_gguf_alignment (g), ==, 64);
  /* check_kvs wants every key; this JSON lists a few, so check them one by one */
  {
    JsonObject *kvs = json_object_get_object_member (root, "kv");
    guint32 v;
    gsize len;
    const char *s;
    g_assert_true (hone_gguf_get_u32 (g, "test.answer", &v));
    g_assert_cmpuint (v, ==, 42);
    g_assert_true (hone_gguf_get_u32 (g, "general.alignment", &v));
    g_assert_cmpuint (v, ==, 64);
    s = hone_gguf_get_string (g, "test.s", &len);
    g_assert_cmpmem (s, len, "v2", 2);
    check_string_array (g, "test.words",
                        json_node_get_array (json_object_get_member (json_object_get_object_member (kvs, "test.words"),
                                                                     "value")));
  }
  for (guint i = 0; i < hone_gguf_n_tensors (g); i++)
    {
      const HoneTensor *t = hone_gguf_tensor (g, i);
      g_assert_true ((const guint8 *) t->data == base + json_array_get_int_element (offs, i));
      g_assert_cmpuint (((const guint8 *) t->data - base) % 64, ==, 0);
    }
  check_tensors (g, file, json_object_get_array_member (root, "tensors"), expected, FALSE);
  hone_gguf_unref (g);
  g_bytes_unref (file);
  g_bytes_unref (expected);
  g_object_unref (parser);
}

static void
test_open_path (void)
{
  char *path = data_path ("types-v3.gguf");
  GBytes *file = load_data ("types-v3.gguf");
  GError *error = NULL;
  HoneGguf *a = hone_gguf_open (path, &error), *b;

  g_assert_no_error (error);
  b = hone_gguf_open_bytes (file, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (hone_gguf_file_size (a), ==, g_bytes_get_size (file));
  g_assert_cmpuint (hone_gguf_n_kv (a), ==, hone_gguf_n_kv (b));
  g_assert_cmpuint (hone_gguf_n_tensors (a), ==, hone_gguf_n_tensors (b));
  for (guint i = 0; i < hone_gguf_n_tensors (a); i++)
    g_assert_cmpmem (hone_gguf_tensor (a, i)->data, hone_gguf_tensor (a, i)->nbytes,
                     hone_gguf_tensor (b, i)->data, hone_gguf_tensor (b, i)->nbytes);
  hone_gguf_unref (a);
  hone_gguf_unref (b);
  g_bytes_unref (file);
  g_free (path);

  g_assert_null (hone_gguf_open ("/nonexistent/dir/model.gguf", &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_IO);
  g_assert_nonnull (strstr (error->message, "/nonexistent/dir/model.gguf"));
  g_clear_error (&error);

  /* An empty file is no GGUF (and no crash on a zero-length mapping). */
  {
    char *tmp = NULL;
    int fd = g_file_open_tmp ("hone-gguf-XXXXXX", &tmp, &error);
    g_assert_no_error (error);
    close (fd);
    g_assert_null (hone_gguf_open (tmp, &error));
    g_assert_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT);
    g_assert_nonnull (strstr (error->message, tmp));
    g_clear_error (&error);
    g_unlink (tmp);
    g_free (tmp);
  }
}

/* ---- the writer ---------------------------------------------------------- */

/* Re-writing the gguf-py files through Hone's writer (copy every kv, add every
 * tensor) reproduces them byte for byte: same layout, padding and encoding. */
static void
rewrite_and_compare (const char *name, guint32 version)
{
  GBytes *file = load_data (name);
  GError *error = NULL;
  HoneGguf *g = hone_gguf_open_bytes (file, &error);
  g_autoptr (HoneGgufWriter) w = hone_gguf_writer_new ();
  GBytes *out;

  g_assert_no_error (error);
  hone_gguf_writer_set_version (w, version);
  for (guint i = 0; i < hone_gguf_n_kv (g); i++)
    hone_gguf_writer_copy_kv (w, g, i);
  for (guint i = 0; i < hone_gguf_n_tensors (g); i++)
    {
      const HoneTensor *t = hone_gguf_tensor (g, i);
      g_assert_true (hone_gguf_writer_add_tensor (w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes, &error));
      g_assert_no_error (error);
    }
  out = hone_gguf_writer_to_bytes (w, &error);
  g_assert_no_error (error);
  g_assert_cmpmem (g_bytes_get_data (out, NULL), g_bytes_get_size (out),
                   g_bytes_get_data (file, NULL), g_bytes_get_size (file));
  g_bytes_unref (out);
  hone_gguf_unref (g);
  g_bytes_unref (file);
}

static void
test_writer_reproduces_gguf_py (void)
{
  rewrite_and_compare ("types-v3.gguf", 3);
  rewrite_and_compare ("types-v2.gguf", 2);
}

/* The deterministic content of a Hone-written test file (check_gguf_writer.py
 * recomputes it: keep the two in step). */
static float
writer_src (int tensor, int64_t i)
{
  return (float) (((i * 7919 + tensor * 104729) % 2001) - 1000) / 1000.0f;
}

static const struct {
  const char *name;
  HoneDType type;
  int n_dims;
  int64_t ne[4];
} writer_tensors[] = {
  { "w.f32", HONE_DTYPE_F32, 2, { 64, 2 } },
  { "w.f16", HONE_DTYPE_F16, 2, { 64, 2 } },
  { "w.bf16", HONE_DTYPE_BF16, 2, { 64, 2 } },
  { "w.q8_0", HONE_DTYPE_Q8_0, 2, { 128, 3 } },
  { "w.q4_0", HONE_DTYPE_Q4_0, 2, { 128, 3 } },
  { "w.q4_1", HONE_DTYPE_Q4_1, 2, { 128, 3 } },
  { "w.q4_k", HONE_DTYPE_Q4_K, 2, { 256, 2 } },
  { "w.q6_k", HONE_DTYPE_Q6_K, 2, { 512, 2 } },
  { "w.f32_3d", HONE_DTYPE_F32, 3, { 4, 3, 2 } },
  { "w.vec", HONE_DTYPE_F32, 1, { 5 } },
};

static HoneGgufWriter *
build_writer_file (GPtrArray *blobs)
{
  HoneGgufWriter *w = hone_gguf_writer_new ();
  static const guint16 a_u16[] = { 1, 65535 };
  static const gint16 a_i16[] = { -2, 32767 };
  static const guint8 a_u8[] = { 0, 255, 7 };
  static const gint8 a_i8[] = { -128, 127 };
  static const guint32 a_u32[] = { 4000000000u };
  static const gint32 a_i32[] = { -5, 6, -7 };
  static const guint64 a_u64[] = { G_GUINT64_CONSTANT (18446744073709551615) };
  static const gint64 a_i64[] = { G_GINT64_CONSTANT (-9223372036854775807) - 1, 3 };
  static const float a_f32[] = { 1.5f, -0.0f, 1e-30f };
  static const double a_f64[] = { 3.141592653589793, -1e300 };
  static const guint8 a_bool[] = { 1, 0 };
  const char *words[] = { "hello", "", "wörld", "<|im_end|>" };
  const char *raw[] = { "a\0b", "xyz" };
  const gsize raw_len[] = { 3, 2 };
  GError *error = NULL;

  hone_gguf_writer_add_string (w, "general.architecture", "hone-test", -1);
  hone_gguf_writer_set_alignment (w, 64);
  hone_gguf_writer_add_u8 (w, "w.u8", 250);
  hone_gguf_writer_add_i8 (w, "w.i8", -120);
  hone_gguf_writer_add_u16 (w, "w.u16", 65000);
  hone_gguf_writer_add_i16 (w, "w.i16", -32000);
  hone_gguf_writer_add_u32 (w, "w.u32", 3000000000u);
  hone_gguf_writer_add_i32 (w, "w.i32", -2100000000);
  hone_gguf_writer_add_u64 (w, "w.u64", G_GUINT64_CONSTANT (12345678901234567890));
  hone_gguf_writer_add_i64 (w, "w.i64", G_GINT64_CONSTANT (-1234567890123456789));
  hone_gguf_writer_add_f32 (w, "w.f32", 0.1f);
  hone_gguf_writer_add_f64 (w, "w.f64", 0.1);
  hone_gguf_writer_add_bool (w, "w.bool", TRUE);
  hone_gguf_writer_add_string (w, "w.str", "ChatML ✓ {{ x }}", -1);
  hone_gguf_writer_add_string (w, "w.replaced", "old", -1);
  hone_gguf_writer_add_array (w, "w.a_u8", HONE_GGUF_UINT8, a_u8, 3);
  hone_gguf_writer_add_array (w, "w.a_i8", HONE_GGUF_INT8, a_i8, 2);
  hone_gguf_writer_add_array (w, "w.a_u16", HONE_GGUF_UINT16, a_u16, 2);
  hone_gguf_writer_add_array (w, "w.a_i16", HONE_GGUF_INT16, a_i16, 2);
  hone_gguf_writer_add_array (w, "w.a_u32", HONE_GGUF_UINT32, a_u32, 1);
  hone_gguf_writer_add_array (w, "w.a_i32", HONE_GGUF_INT32, a_i32, 3);
  hone_gguf_writer_add_array (w, "w.a_u64", HONE_GGUF_UINT64, a_u64, 1);
  hone_gguf_writer_add_array (w, "w.a_i64", HONE_GGUF_INT64, a_i64, 2);
  hone_gguf_writer_add_array (w, "w.a_f32", HONE_GGUF_FLOAT32, a_f32, 3);
  hone_gguf_writer_add_array (w, "w.a_f64", HONE_GGUF_FLOAT64, a_f64, 2);
  hone_gguf_writer_add_array (w, "w.a_bool", HONE_GGUF_BOOL, a_bool, 2);
  hone_gguf_writer_add_array (w, "w.a_empty", HONE_GGUF_INT32, NULL, 0);
  hone_gguf_writer_add_string_array (w, "w.a_str", words, NULL, 4);
  hone_gguf_writer_add_string_array (w, "w.a_raw", raw, raw_len, 2);
  hone_gguf_writer_add_i32 (w, "w.replaced", 99);   /* replaces the string in place */

  for (guint k = 0; k < G_N_ELEMENTS (writer_tensors); k++)
    {
      int64_t n = 1, ne0 = writer_tensors[k].ne[0];
      float *src;
      guint8 *q;
      gsize nbytes;
      for (int d = 0; d < writer_tensors[k].n_dims; d++)
        n *= writer_tensors[k].ne[d];
      src = g_new (float, n);
      for (int64_t i = 0; i < n; i++)
        src[i] = writer_src ((int) k, i);
      nbytes = hone_dtype_row_bytes (writer_tensors[k].type, ne0) * (n / ne0);
      q = g_malloc (nbytes);
      for (int64_t r = 0; r < n / ne0; r++)
        g_assert_true (hone_quantize_row (writer_tensors[k].type, src + r * ne0,
                                          q + r * hone_dtype_row_bytes (writer_tensors[k].type, ne0), ne0));
      g_assert_true (hone_gguf_writer_add_tensor (w, writer_tensors[k].name, writer_tensors[k].type,
                                                  writer_tensors[k].n_dims, writer_tensors[k].ne, q, nbytes, &error));
      g_assert_no_error (error);
      g_ptr_array_add (blobs, g_bytes_new_take (q, nbytes));
      g_free (src);
    }
  return w;
}

static void
check_written (const HoneGguf *g, GPtrArray *blobs)
{
  guint32 u32;
  gint64 i64;
  float f;
  gboolean b;
  gsize len;
  const char *s;
  HoneGgufType et;
  guint64 n;
  const guint8 *p;

  g_assert_cmpuint (hone_gguf_version (g), ==, 3);
  g_assert_cmpuint (hone_gguf_alignment (g), ==, 64);
  g_assert_cmpuint (hone_gguf_n_kv (g), ==, 29);
  g_assert_cmpint (hone_gguf_find_kv (g, "w.replaced"), ==, 14);   /* kept its place */
  g_assert_cmpint (hone_gguf_kv_type (g, 14), ==, HONE_GGUF_INT32);
  g_assert_true (hone_gguf_get_i64 (g, "w.replaced", &i64) && i64 == 99);
  g_assert_true (hone_gguf_get_u32 (g, "w.u8", &u32) && u32 == 250);
  g_assert_true (hone_gguf_get_i64 (g, "w.i8", &i64) && i64 == -120);
  g_assert_true (hone_gguf_get_u32 (g, "w.u16", &u32) && u32 == 65000);
  g_assert_true (hone_gguf_get_i64 (g, "w.i16", &i64) && i64 == -32000);
  g_assert_true (hone_gguf_get_u32 (g, "w.u32", &u32) && u32 == 3000000000u);
  g_assert_true (hone_gguf_get_i64 (g, "w.i32", &i64) && i64 == -2100000000);
  g_assert_false (hone_gguf_get_i64 (g, "w.u64", &i64));
  g_assert_true (hone_gguf_get_i64 (g, "w.i64", &i64) && i64 == G_GINT64_CONSTANT (-1234567890123456789));
  g_assert_true (hone_gguf_get_f32 (g, "w.f32", &f) && f == 0.1f);
  g_assert_true (hone_gguf_get_f32 (g, "w.f64", &f) && f == (float) 0.1);
  g_assert_true (hone_gguf_get_bool (g, "w.bool", &b) && b);
  s = hone_gguf_get_string (g, "w.str", &len);
  g_assert_cmpmem (s, len, "ChatML ✓ {{ x }}", strlen ("ChatML ✓ {{ x }}"));
  p = hone_gguf_get_array (g, "w.a_u64", &et, &n);
  g_assert_true (et == HONE_GGUF_UINT64 && n == 1);
  {
    guint64 v;
    memcpy (&v, p, 8);
    g_assert_cmpuint (GUINT64_FROM_LE (v), ==, G_GUINT64_CONSTANT (18446744073709551615));
  }
  p = hone_gguf_get_array (g, "w.a_i16", &et, &n);
  g_assert_true (et == HONE_GGUF_INT16 && n == 2);
  g_assert_cmpmem (p, 4, "\xfe\xff\xff\x7f", 4);
  p = hone_gguf_get_array (g, "w.a_f64", &et, &n);
  g_assert_true (et == HONE_GGUF_FLOAT64 && n == 2);
  {
    double d;
    memcpy (&d, p + 8, 8);
    g_assert_cmpfloat (d, ==, -1e300);
  }
  p = hone_gguf_get_array (g, "w.a_empty", &et, &n);
  g_assert_true (p != NULL && et == HONE_GGUF_INT32 && n == 0);
  s = hone_gguf_get_array_string (g, "w.a_str", 2, &len);
  g_assert_cmpmem (s, len, "wörld", strlen ("wörld"));
  s = hone_gguf_get_array_string (g, "w.a_str", 1, &len);
  g_assert_cmpuint (len, ==, 0);
  s = hone_gguf_get_array_string (g, "w.a_raw", 0, &len);
  g_assert_cmpmem (s, len, "a\0b", 3);

  g_assert_cmpuint (hone_gguf_n_tensors (g), ==, G_N_ELEMENTS (writer_tensors));
  for (guint k = 0; k < G_N_ELEMENTS (writer_tensors); k++)
    {
      const HoneTensor *t = hone_gguf_tensor (g, k);
      GBytes *blob = g_ptr_array_index (blobs, k);
      g_assert_cmpstr (t->name, ==, writer_tensors[k].name);
      g_assert_cmpint (t->type, ==, writer_tensors[k].type);
      g_assert_cmpint (t->n_dims, ==, writer_tensors[k].n_dims);
      for (int d = 0; d < t->n_dims; d++)
        g_assert_cmpint (t->ne[d], ==, writer_tensors[k].ne[d]);
      g_assert_cmpmem (t->data, t->nbytes, g_bytes_get_data (blob, NULL), g_bytes_get_size (blob));
    }
}

static void
test_writer_roundtrip (void)
{
  GPtrArray *blobs = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  HoneGgufWriter *w = build_writer_file (blobs);
  GError *error = NULL;
  GBytes *bytes = hone_gguf_writer_to_bytes (w, &error);
  HoneGguf *g;
  char *dir, *path;
  const char *out = g_getenv ("HONE_GGUF_WRITE_OUT");

  g_assert_no_error (error);
  g = hone_gguf_open_bytes (bytes, &error);
  g_assert_no_error (error);
  check_written (g, blobs);
  for (guint k = 0; k < hone_gguf_n_tensors (g); k++)
    g_assert_cmpuint (((const guint8 *) hone_gguf_tensor (g, k)->data - (const guint8 *) g_bytes_get_data (bytes, NULL))
                      % 64, ==, 0);
  hone_gguf_unref (g);

  /* write(): the same bytes land in the file, atomically (no temp file left). */
  dir = g_dir_make_tmp ("hone-gguf-XXXXXX", &error);
  g_assert_no_error (error);
  path = g_build_filename (dir, "out.gguf", NULL);
  g_assert_true (hone_gguf_writer_write (w, path, &error));
  g_assert_no_error (error);
  g = hone_gguf_open (path, &error);
  g_assert_no_error (error);
  check_written (g, blobs);
  hone_gguf_unref (g);
  {
    char *contents;
    gsize len;
    GDir *d;
    int n_files = 0;
    g_assert_true (g_file_get_contents (path, &contents, &len, NULL));
    g_assert_cmpmem (contents, len, g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes));
    g_free (contents);
    d = g_dir_open (dir, 0, NULL);
    while (g_dir_read_name (d))
      n_files++;
    g_dir_close (d);
    g_assert_cmpint (n_files, ==, 1);
  }
  if (out != NULL && *out)
    {
      /* For tests/reference/check_gguf_writer.py (the gguf package reads it). */
      g_assert_true (hone_gguf_writer_write (w, out, &error));
      g_assert_no_error (error);
      g_test_message ("wrote %s", out);
    }
  g_unlink (path);
  g_rmdir (dir);
  g_free (path);
  g_free (dir);

  /* Writing into a folder that does not exist is an IO error, not a crash. */
  g_assert_false (hone_gguf_writer_write (w, "/nonexistent/dir/x.gguf", &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_IO);
  g_clear_error (&error);

  g_bytes_unref (bytes);
  hone_gguf_writer_free (w);
  g_ptr_array_unref (blobs);
}

static void
test_writer_errors (void)
{
  g_autoptr (HoneGgufWriter) w = hone_gguf_writer_new ();
  GError *error = NULL;
  float data[64] = { 0 };
  const int64_t ne[] = { 32, 2 }, ne_bad[] = { 33, 2 }, ne_zero[] = { 0, 2 }, ne5[] = { 1, 1, 1, 1, 1 };
  GBytes *bytes;
  HoneGguf *g;

  g_assert_true (hone_gguf_writer_add_tensor (w, "a", HONE_DTYPE_F32, 2, ne, data, sizeof data, &error));
  g_assert_no_error (error);
  g_assert_false (hone_gguf_writer_add_tensor (w, "a", HONE_DTYPE_F32, 2, ne, data, sizeof data, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (hone_gguf_writer_add_tensor (w, "b", HONE_DTYPE_F32, 2, ne, data, sizeof data - 4, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_SHAPE_MISMATCH);
  g_clear_error (&error);
  g_assert_false (hone_gguf_writer_add_tensor (w, "b", HONE_DTYPE_Q4_0, 2, ne_bad, data, 36, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_SHAPE_MISMATCH);
  g_clear_error (&error);
  g_assert_false (hone_gguf_writer_add_tensor (w, "b", HONE_DTYPE_F32, 2, ne_zero, data, 0, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (hone_gguf_writer_add_tensor (w, "b", HONE_DTYPE_F32, 5, ne5, data, 4, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (hone_gguf_writer_add_tensor (w, "b", (HoneDType) 99, 2, ne, data, 4, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_UNSUPPORTED_TYPE);
  g_clear_error (&error);

  /* A tensor added from GBytes is referenced, not copied. */
  {
    GBytes *ref = g_bytes_new_static (data, sizeof data);
    g_assert_true (hone_gguf_writer_add_tensor_bytes (w, "c", HONE_DTYPE_F16, 1, (const int64_t[]) { 128 }, ref, &error));
    g_assert_no_error (error);
    g_bytes_unref (ref);
  }
  bytes = hone_gguf_writer_to_bytes (w, &error);
  g_assert_no_error (error);
  g = hone_gguf_open_bytes (bytes, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (hone_gguf_n_tensors (g), ==, 2);
  g_assert_cmpint (hone_gguf_tensor (g, 1)->type, ==, HONE_DTYPE_F16);
  g_assert_cmpint (hone_gguf_tensor (g, 1)->ne[0], ==, 128);
  hone_gguf_unref (g);
  g_bytes_unref (bytes);
}

/* ---- hostile input ------------------------------------------------------- */

static void
raw_u32 (GByteArray *a, guint32 v)
{
  v = GUINT32_TO_LE (v);
  g_byte_array_append (a, (guint8 *) &v, 4);
}

static void
raw_u64 (GByteArray *a, guint64 v)
{
  v = GUINT64_TO_LE (v);
  g_byte_array_append (a, (guint8 *) &v, 8);
}

static void
raw_str (GByteArray *a, const char *s)
{
  raw_u64 (a, strlen (s));
  g_byte_array_append (a, (const guint8 *) s, strlen (s));
}

static GByteArray *
raw_header (guint32 version, guint64 n_tensors, guint64 n_kv)
{
  GByteArray *a = g_byte_array_new ();
  g_byte_array_append (a, (const guint8 *) "GGUF", 4);
  raw_u32 (a, version);
  raw_u64 (a, n_tensors);
  raw_u64 (a, n_kv);
  return a;
}

static void
raw_kv_u32 (GByteArray *a, const char *key, guint32 v)
{
  raw_str (a, key);
  raw_u32 (a, HONE_GGUF_UINT32);
  raw_u32 (a, v);
}

static void
raw_tensor (GByteArray *a, const char *name, guint32 n_dims, const guint64 *ne, guint32 type, guint64 offset)
{
  raw_str (a, name);
  raw_u32 (a, n_dims);
  for (guint32 i = 0; i < n_dims; i++)
    raw_u64 (a, ne[i]);
  raw_u32 (a, type);
  raw_u64 (a, offset);
}

static void
raw_pad (GByteArray *a, gsize align, gsize extra)
{
  static const guint8 zero[1] = { 0 };
  while (a->len % align != 0)
    g_byte_array_append (a, zero, 1);
  for (gsize i = 0; i < extra; i++)
    g_byte_array_append (a, zero, 1);
}

/* Open @a (consumed); expect failure with @code and every one of the NULL-terminated
 * substrings in the message. NULL code: expect success. */
static void
expect_open (GByteArray *a, int code, ...)
{
  GBytes *b = g_byte_array_free_to_bytes (a);
  GError *error = NULL;
  HoneGguf *g = hone_gguf_open_bytes (b, &error);
  va_list ap;
  const char *sub;

  if (code < 0)
    {
      g_assert_no_error (error);
      g_assert_nonnull (g);
      hone_gguf_unref (g);
      g_bytes_unref (b);
      return;
    }
  g_assert_null (g);
  g_assert_error (error, HONE_ERROR, code);
  g_test_message ("%s", error->message);
  va_start (ap, code);
  while ((sub = va_arg (ap, const char *)) != NULL)
    if (strstr (error->message, sub) == NULL)
      g_error ("message \"%s\" does not mention \"%s\"", error->message, sub);
  va_end (ap);
  g_error_free (error);
  g_bytes_unref (b);
}

#define OK (-1)
#define CORRUPT HONE_ERROR_FILE_CORRUPT

static void
test_bad_header (void)
{
  GByteArray *a;

  expect_open (g_byte_array_new (), CORRUPT, "magic", NULL);
  a = g_byte_array_new ();
  g_byte_array_append (a, (const guint8 *) "GGU", 3);
  expect_open (a, CORRUPT, NULL);
  a = raw_header (3, 0, 0);
  a->data[3] = 'X';
  expect_open (a, CORRUPT, "magic", NULL);
  expect_open (raw_header (3, 0, 0), OK, NULL);
  expect_open (raw_header (2, 0, 0), OK, NULL);
  expect_open (raw_header (1, 0, 0), HONE_ERROR_FILE_UNSUPPORTED, "version 1", NULL);
  expect_open (raw_header (4, 0, 0), HONE_ERROR_FILE_UNSUPPORTED, "4", NULL);
  expect_open (raw_header (0x03000000, 0, 0), HONE_ERROR_FILE_UNSUPPORTED, "big-endian", NULL);
  a = raw_header (3, 0, 0);
  g_byte_array_set_size (a, 12);
  expect_open (a, CORRUPT, "truncated", NULL);

  /* Counts a hostile file may claim: refused before any allocation. */
  expect_open (raw_header (3, 0, G_GUINT64_CONSTANT (1) << 60), CORRUPT, "metadata count", NULL);
  expect_open (raw_header (3, G_GUINT64_CONSTANT (1) << 40, 0), CORRUPT, "tensor count", NULL);
  expect_open (raw_header (3, G_MAXUINT64, G_MAXUINT64), CORRUPT, NULL);
  a = raw_header (3, 0, 1000);
  raw_kv_u32 (a, "a", 1);
  expect_open (a, CORRUPT, "metadata count", NULL);
  a = raw_header (3, 0, 2);   /* fits by size, but the second kv is missing */
  raw_kv_u32 (a, "a", 1);
  raw_pad (a, 1, 10);
  expect_open (a, CORRUPT, NULL);
}

static void
test_bad_metadata (void)
{
  GByteArray *a;

  /* key length past the end */
  a = raw_header (3, 0, 1);
  raw_u64 (a, 1000);
  g_byte_array_append (a, (const guint8 *) "abcdefghijklm", 13);
  expect_open (a, CORRUPT, "offset 24", NULL);
  /* string value length past the end */
  a = raw_header (3, 0, 1);
  raw_str (a, "k.str");
  raw_u32 (a, HONE_GGUF_STRING);
  raw_u64 (a, G_GUINT64_CONSTANT (1) << 63);
  g_byte_array_append (a, (const guint8 *) "abcdefgh", 8);
  expect_open (a, CORRUPT, "'k.str'", "past the end", NULL);
  /* numeric array count past the end / overflowing count × size */
  a = raw_header (3, 0, 1);
  raw_str (a, "k.arr");
  raw_u32 (a, HONE_GGUF_ARRAY);
  raw_u32 (a, HONE_GGUF_UINT32);
  raw_u64 (a, G_GUINT64_CONSTANT (1) << 62);
  raw_pad (a, 1, 16);
  expect_open (a, CORRUPT, "'k.arr'", NULL);
  /* string array count past the end (would be a huge offset table) */
  a = raw_header (3, 0, 1);
  raw_str (a, "k.strs");
  raw_u32 (a, HONE_GGUF_ARRAY);
  raw_u32 (a, HONE_GGUF_STRING);
  raw_u64 (a, G_GUINT64_CONSTANT (1) << 61);
  raw_pad (a, 1, 16);
  expect_open (a, CORRUPT, "'k.strs'", NULL);
  /* a string inside a string array past the end */
  a = raw_header (3, 0, 1);
  raw_str (a, "k.strs");
  raw_u32 (a, HONE_GGUF_ARRAY);
  raw_u32 (a, HONE_GGUF_STRING);
  raw_u64 (a, 2);
  raw_str (a, "ok");
  raw_u64 (a, 99);
  raw_pad (a, 1, 8);
  expect_open (a, CORRUPT, "'k.strs'", NULL);
  /* array of arrays: valid, then too many */
  a = raw_header (3, 0, 1);
  raw_str (a, "k.nest");
  raw_u32 (a, HONE_GGUF_ARRAY);
  raw_u32 (a, HONE_GGUF_ARRAY);
  raw_u64 (a, 2);
  raw_u32 (a, HONE_GGUF_UINT8);
  raw_u64 (a, 3);
  g_byte_array_append (a, (const guint8 *) "xyz", 3);
  raw_u32 (a, HONE_GGUF_STRING);
  raw_u64 (a, 1);
  raw_str (a, "s");
  expect_open (a, OK, NULL);
  a = raw_header (3, 0, 1);
  raw_str (a, "k.nest");
  raw_u32 (a, HONE_GGUF_ARRAY);
  raw_u32 (a, HONE_GGUF_ARRAY);
  raw_u64 (a, G_GUINT64_CONSTANT (1) << 60);
  raw_pad (a, 1, 40);
  expect_open (a, CORRUPT, "'k.nest'", NULL);
  /* nesting deeper than the bound */
  a = raw_header (3, 0, 1);
  raw_str (a, "k.deep");
  raw_u32 (a, HONE_GGUF_ARRAY);
  for (int i = 0; i < 20; i++)
    {
      raw_u32 (a, HONE_GGUF_ARRAY);
      raw_u64 (a, 1);
    }
  raw_u32 (a, HONE_GGUF_UINT8);
  raw_u64 (a, 0);
  expect_open (a, CORRUPT, "'k.deep'", "deeper", NULL);
  /* unknown value type, unknown array element type */
  a = raw_header (3, 0, 1);
  raw_str (a, "k.bad");
  raw_u32 (a, 13);
  raw_u32 (a, 0);
  expect_open (a, CORRUPT, "'k.bad'", "13", NULL);
  a = raw_header (3, 0, 1);
  raw_str (a, "k.bad");
  raw_u32 (a, HONE_GGUF_ARRAY);
  raw_u32 (a, 99);
  raw_u64 (a, 1);
  raw_u32 (a, 0);
  expect_open (a, CORRUPT, "'k.bad'", "99", NULL);
  /* duplicate key */
  a = raw_header (3, 0, 2);
  raw_kv_u32 (a, "k.dup", 1);
  raw_kv_u32 (a, "k.dup", 2);
  expect_open (a, CORRUPT, "duplicate", "'k.dup'", NULL);
  /* NUL inside a key */
  a = raw_header (3, 0, 1);
  raw_u64 (a, 3);
  g_byte_array_append (a, (const guint8 *) "a\0b", 3);
  raw_u32 (a, HONE_GGUF_UINT8);
  g_byte_array_append (a, (const guint8 *) "\1", 1);
  expect_open (a, CORRUPT, "NUL", NULL);
  /* strings that are not UTF-8: a key, a value, an element of a string array (GGUF strings are UTF-8; a
   * NUL inside a value is, and the v3 fixture holds one) */
  a = raw_header (3, 0, 1);
  raw_str (a, "k.\xff");
  raw_u32 (a, HONE_GGUF_UINT8);
  g_byte_array_append (a, (const guint8 *) "\1", 1);
  expect_open (a, CORRUPT, "metadata key", "UTF-8", NULL);
  a = raw_header (3, 0, 1);
  raw_str (a, "k.str");
  raw_u32 (a, HONE_GGUF_STRING);
  raw_str (a, "caf\xc3");
  expect_open (a, CORRUPT, "'k.str'", "UTF-8", NULL);
  a = raw_header (3, 0, 1);
  raw_str (a, "k.strs");
  raw_u32 (a, HONE_GGUF_ARRAY);
  raw_u32 (a, HONE_GGUF_STRING);
  raw_u64 (a, 2);
  raw_str (a, "ok");
  raw_str (a, "\xed\xa0\x80");   /* a UTF-16 surrogate written as UTF-8 */
  expect_open (a, CORRUPT, "'k.strs'", "UTF-8", NULL);
  /* general.alignment: not a power of two, zero, wrong type */
  a = raw_header (3, 0, 1);
  raw_kv_u32 (a, "general.alignment", 48);
  expect_open (a, CORRUPT, "general.alignment", "power of two", NULL);
  a = raw_header (3, 0, 1);
  raw_kv_u32 (a, "general.alignment", 0);
  expect_open (a, CORRUPT, "general.alignment", NULL);
  a = raw_header (3, 0, 1);
  raw_str (a, "general.alignment");
  raw_u32 (a, HONE_GGUF_UINT64);
  raw_u64 (a, 64);
  expect_open (a, CORRUPT, "general.alignment", "u32", NULL);
}

/* Two F32 tensors 'a' and 'b' of 8 elements (32 bytes each); the caller picks
 * b's shape/type/offset. */
static GByteArray *
two_tensors (guint32 b_dims, const guint64 *b_ne, guint32 b_type, guint64 b_off, gsize data_bytes)
{
  static const guint64 ne8[] = { 8 };
  GByteArray *a = raw_header (3, 2, 1);
  raw_kv_u32 (a, "some.key", 7);
  raw_tensor (a, "a", 1, ne8, HONE_DTYPE_F32, 0);
  raw_tensor (a, "tensor.b", b_dims, b_ne, b_type, b_off);
  raw_pad (a, 32, data_bytes);
  return a;
}

static void
test_bad_tensors (void)
{
  static const guint64 ne8[] = { 8 }, ne16[] = { 16 }, ne0[] = { 8, 0 }, ne33[] = { 33 },
                       ne_ovf[] = { G_GUINT64_CONSTANT (1) << 32, G_GUINT64_CONSTANT (1) << 32 },
                       ne_big[] = { G_GUINT64_CONSTANT (1) << 60 }, ne5[] = { 8, 1, 1, 1, 1 },
                       ne_q[] = { G_GUINT64_CONSTANT (1) << 40, G_GUINT64_CONSTANT (1) << 22 };
  GByteArray *a;

  expect_open (two_tensors (1, ne8, HONE_DTYPE_F32, 32, 64), OK, NULL);
  /* offset past the data section, or past the end of it */
  expect_open (two_tensors (1, ne8, HONE_DTYPE_F32, 64, 64), CORRUPT, "'tensor.b'", "outside", NULL);
  expect_open (two_tensors (1, ne8, HONE_DTYPE_F32, 32, 63), CORRUPT, "'tensor.b'", "outside", NULL);
  expect_open (two_tensors (1, ne8, HONE_DTYPE_F32, G_GUINT64_CONSTANT (1) << 63, 64), CORRUPT, "'tensor.b'", NULL);
  expect_open (two_tensors (1, ne8, HONE_DTYPE_F32, G_MAXUINT64 - 31, 64), CORRUPT, "'tensor.b'", NULL);
  /* overlapping tensors */
  expect_open (two_tensors (1, ne8, HONE_DTYPE_F32, 0, 64), CORRUPT, "overlap", "'tensor.b'", NULL);
  expect_open (two_tensors (1, ne16, HONE_DTYPE_F32, 0, 96), CORRUPT, "overlap", NULL);
  /* misaligned offset */
  expect_open (two_tensors (1, ne8, HONE_DTYPE_F32, 36, 96), CORRUPT, "'tensor.b'", "aligned", NULL);
  /* unknown / layout-less types */
  expect_open (two_tensors (1, ne8, 99, 32, 64), HONE_ERROR_UNSUPPORTED_TYPE, "'tensor.b'", "99", NULL);
  expect_open (two_tensors (1, ne8, 16, 32, 64), HONE_ERROR_UNSUPPORTED_TYPE, "'tensor.b'", "16", NULL);
  expect_open (two_tensors (1, ne8, G_MAXUINT32, 32, 64), HONE_ERROR_UNSUPPORTED_TYPE, "'tensor.b'", NULL);
  /* dimensions: too many, zero, none, overflowing, not a block multiple, too big for the file */
  expect_open (two_tensors (5, ne5, HONE_DTYPE_F32, 32, 64), CORRUPT, "'tensor.b'", "dimensions", NULL);
  expect_open (two_tensors (0, ne8, HONE_DTYPE_F32, 32, 64), CORRUPT, "'tensor.b'", NULL);
  expect_open (two_tensors (2, ne0, HONE_DTYPE_F32, 32, 64), CORRUPT, "'tensor.b'", NULL);
  expect_open (two_tensors (2, ne_ovf, HONE_DTYPE_F32, 32, 64), CORRUPT, "'tensor.b'", NULL);
  expect_open (two_tensors (1, ne33, HONE_DTYPE_Q4_0, 32, 64), CORRUPT, "'tensor.b'", "block", NULL);
  expect_open (two_tensors (1, ne_big, HONE_DTYPE_F32, 32, 64), CORRUPT, "'tensor.b'", NULL);
  expect_open (two_tensors (2, ne_q, HONE_DTYPE_Q8_0, 32, 64), CORRUPT, "'tensor.b'", NULL);
  /* duplicate tensor names */
  a = raw_header (3, 2, 0);
  raw_tensor (a, "same", 1, ne8, HONE_DTYPE_F32, 0);
  raw_tensor (a, "same", 1, ne8, HONE_DTYPE_F32, 32);
  raw_pad (a, 32, 64);
  expect_open (a, CORRUPT, "duplicate", "'same'", NULL);
  /* no data section at all */
  a = raw_header (3, 1, 0);
  raw_tensor (a, "a", 1, ne8, HONE_DTYPE_F32, 0);
  expect_open (a, CORRUPT, "'a'", NULL);
  /* alignment 64 from the metadata governs offsets */
  a = raw_header (3, 1, 1);
  raw_kv_u32 (a, "general.alignment", 64);
  raw_tensor (a, "a", 1, ne8, HONE_DTYPE_F32, 32);
  raw_pad (a, 64, 128);
  expect_open (a, CORRUPT, "'a'", "aligned", NULL);
  a = raw_header (3, 1, 1);
  raw_kv_u32 (a, "general.alignment", 64);
  raw_tensor (a, "a", 1, ne8, HONE_DTYPE_F32, 64);
  raw_pad (a, 64, 128);
  expect_open (a, OK, NULL);
  /* NUL in a tensor name */
  a = raw_header (3, 1, 0);
  raw_u64 (a, 3);
  g_byte_array_append (a, (const guint8 *) "x\0y", 3);
  raw_u32 (a, 1);
  raw_u64 (a, 8);
  raw_u32 (a, HONE_DTYPE_F32);
  raw_u64 (a, 0);
  raw_pad (a, 32, 32);
  expect_open (a, CORRUPT, "NUL", NULL);
}

/* Every prefix of a valid file: a clean FILE_CORRUPT, or success when only
 * padding after the last tensor was cut. */
static void
truncate_file (const char *name)
{
  GBytes *file = load_data (name);
  gsize size;
  const guint8 *p = g_bytes_get_data (file, &size);
  GError *error = NULL;
  HoneGguf *full = hone_gguf_open_bytes (file, &error);
  gsize data_end = 0;

  g_assert_no_error (error);
  for (guint i = 0; i < hone_gguf_n_tensors (full); i++)
    {
      const HoneTensor *t = hone_gguf_tensor (full, i);
      data_end = MAX (data_end, (gsize) ((const guint8 *) t->data - p) + t->nbytes);
    }
  hone_gguf_unref (full);
  for (gsize len = 0; len < size; len++)
    {
      /* a fresh heap copy of exactly len bytes, so ASan sees any over-read */
      GBytes *b = g_bytes_new (p, len);
      HoneGguf *g = hone_gguf_open_bytes (b, &error);
      if (len >= data_end)
        {
          g_assert_no_error (error);
          hone_gguf_unref (g);
        }
      else
        {
          g_assert_null (g);
          g_assert_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT);
          g_clear_error (&error);
        }
      g_bytes_unref (b);
    }
  g_bytes_unref (file);
}

static void
test_bad_truncated (void)
{
  truncate_file ("types-v3.gguf");
  truncate_file ("types-v2.gguf");
}

/* Random byte corruptions of the header area: any outcome but a crash, and a
 * file that opens has every tensor inside the buffer. */
static void
test_bad_random_bytes (void)
{
  GBytes *file = load_data ("types-v3.gguf");
  gsize size;
  const guint8 *p = g_bytes_get_data (file, &size);
  GRand *rand = g_rand_new_with_seed (99);
  int opened = 0;

  for (int it = 0; it < 3000; it++)
    {
      guint8 *copy = g_memdup2 (p, size);
      GBytes *b;
      GError *error = NULL;
      HoneGguf *g;
      int n = g_rand_int_range (rand, 1, 4);
      for (int k = 0; k < n; k++)
        copy[g_rand_int_range (rand, 0, 1900)] = (guint8) g_rand_int (rand);
      b = g_bytes_new_take (copy, size);
      g = hone_gguf_open_bytes (b, &error);
      if (g)
        {
          opened++;
          for (guint i = 0; i < hone_gguf_n_tensors (g); i++)
            {
              const HoneTensor *t = hone_gguf_tensor (g, i);
              g_assert_true ((const guint8 *) t->data >= copy);
              g_assert_true ((const guint8 *) t->data + t->nbytes <= copy + size);
            }
          hone_gguf_unref (g);
        }
      else
        {
          g_assert_true (error->domain == HONE_ERROR);
          g_assert_true (error->code == HONE_ERROR_FILE_CORRUPT || error->code == HONE_ERROR_FILE_UNSUPPORTED
                         || error->code == HONE_ERROR_UNSUPPORTED_TYPE);
          g_error_free (error);
        }
      g_bytes_unref (b);
    }
  g_test_message ("%d of 3000 corrupted files still opened", opened);
  g_rand_free (rand);
  g_bytes_unref (file);
}

/* ---- the default model (suite 'model') ---------------------------------- */

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
  char *path = default_model_path ();
  JsonParser *parser;
  JsonObject *root = load_json ("smollm2-sample.json", &parser);
  GBytes *expected = load_data ("smollm2-sample.bin");
  GError *error = NULL;
  HoneGguf *g;
  JsonObject *meta, *strings;
  JsonArray *rows;
  GList *keys;
  gint64 t0 = g_get_monotonic_time ();

  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    {
      g_test_message ("default model not found at %s (set HONE_DEFAULT_MODEL or run .ci/fetch-model)", path);
      g_test_fail ();
      goto out;
    }
  g = hone_gguf_open (path, &error);
  g_assert_no_error (error);
  g_test_message ("opened %s in %.1f ms", path, (g_get_monotonic_time () - t0) / 1000.0);
  g_assert_cmpuint (hone_gguf_n_tensors (g), ==, json_object_get_int_member (root, "n_tensors"));
  g_assert_cmpuint (hone_gguf_n_kv (g), ==, json_object_get_int_member (root, "n_kv"));

  meta = json_object_get_object_member (root, "meta");
  keys = json_object_get_members (meta);
  for (GList *l = keys; l; l = l->next)
    {
      JsonObject *o = json_object_get_object_member (meta, l->data);
      JsonNode *v = json_object_get_member (o, "value");
      int type = (int) json_object_get_int_member (o, "type");
      int idx = hone_gguf_find_kv (g, l->data);
      g_assert_cmpint (idx, >=, 0);
      g_assert_cmpint (hone_gguf_kv_type (g, idx), ==, type);
      if (type == HONE_GGUF_STRING)
        {
          char *s = hone_gguf_dup_string (g, l->data);
          g_assert_cmpstr (s, ==, json_node_get_string (v));
          g_free (s);
        }
      else if (type == HONE_GGUF_ARRAY)
        g_assert_cmpuint (hone_gguf_kv_array_length (g, idx), ==, json_node_get_int (v));
      else if (type == HONE_GGUF_FLOAT32)
        {
          float f;
          g_assert_true (hone_gguf_get_f32 (g, l->data, &f));
          g_assert_cmphex (fbits (f), ==, fbits ((float) json_node_get_double (v)));
        }
      else
        {
          gint64 i;
          g_assert_true (hone_gguf_get_i64 (g, l->data, &i));
          g_assert_cmpint (i, ==, json_node_get_int (v));
        }
    }
  g_list_free (keys);
  /* The facts the rest of Hone relies on, as read from the file by gguf-py. */
  {
    char *arch = hone_gguf_dup_string (g, "general.architecture");
    guint32 v;
    g_assert_cmpstr (arch, ==, "llama");
    g_free (arch);
    g_assert_true (hone_gguf_get_u32 (g, "llama.block_count", &v) && v == 30);
    g_assert_true (hone_gguf_get_u32 (g, "llama.embedding_length", &v) && v == 576);
    g_assert_true (hone_gguf_get_u32 (g, "llama.attention.head_count", &v) && v == 9);
    g_assert_true (hone_gguf_get_u32 (g, "llama.attention.head_count_kv", &v) && v == 3);
    g_assert_true (hone_gguf_get_u32 (g, "llama.feed_forward_length", &v) && v == 1536);
    g_assert_null (hone_gguf_find_tensor (g, "output.weight"));   /* tied embeddings */
  }

  strings = json_object_get_object_member (root, "strings");
  keys = json_object_get_members (strings);
  for (GList *l = keys; l; l = l->next)
    {
      JsonObject *o = json_object_get_object_member (strings, l->data);
      GList *idxs = json_object_get_members (o);
      for (GList *m = idxs; m; m = m->next)
        {
          gsize len;
          const char *s = hone_gguf_get_array_string (g, l->data, g_ascii_strtoull (m->data, NULL, 10), &len);
          const char *want = json_object_get_string_member (o, m->data);
          g_assert_cmpmem (s, len, want, strlen (want));
        }
      g_list_free (idxs);
    }
  g_list_free (keys);

  rows = json_object_get_array_member (root, "rows");
  for (guint i = 0; i < json_array_get_length (rows); i++)
    {
      JsonObject *o = json_array_get_object_element (rows, i);
      const HoneTensor *t = hone_gguf_find_tensor (g, json_object_get_string_member (o, "tensor"));
      gint64 row = json_object_get_int_member (o, "row");
      float *want, *got;
      g_assert_nonnull (t);
      g_assert_cmpint (t->type, ==, json_object_get_int_member (o, "type"));
      want = floats_at (expected, json_object_get_int_member (o, "offset"), t->ne[0]);
      got = g_new (float, t->ne[0]);
      hone_dequantize_row (t->type, hone_tensor_row (t, row), got, t->ne[0]);
      for (gint64 k = 0; k < t->ne[0]; k++)
        if (fbits (got[k]) != fbits (want[k]))
          g_error ("%s row %" G_GINT64_FORMAT "[%" G_GINT64_FORMAT "]: hone %a, gguf-py %a",
                   t->name, row, k, got[k], want[k]);
      g_free (want);
      g_free (got);
    }
  hone_gguf_unref (g);
out:
  g_bytes_unref (expected);
  g_object_unref (parser);
  g_free (path);
}

/* A deferred tensor whose fill writes hone_test_fill_pattern's bytes (or fails). */
static gboolean
add_deferred (HoneGgufWriter *w, const char *name, HoneDType type, int n_dims, const int64_t *ne, gsize nbytes,
              int seed, gboolean fail, int *freed, GError **error)
{
  HoneTestFill *f = hone_test_fill_new (seed, fail, freed);
  return hone_gguf_writer_add_tensor_deferred (w, name, type, n_dims, ne, nbytes, hone_test_fill_pattern, f,
                                               hone_test_fill_free, error);
}

/* Deferred tensors: the same file as tensors given up front; a fill that
 * fails fails the write with its error, leaves the earlier file and no
 * temporary one; the fill data is freed on every path. */
static void
test_writer_deferred (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("hone-gguf-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "deferred.gguf", NULL);
  g_autofree char *contents = NULL;
  g_autoptr(GBytes) want = NULL, got = NULL;
  guint8 a[36], b[100];
  gsize len;
  int freed = 0;

  for (gsize i = 0; i < sizeof a; i++)
    a[i] = (guint8) (i * 7 + 1);
  for (gsize i = 0; i < sizeof b; i++)
    b[i] = (guint8) (i * 7 + 2);
  {
    g_autoptr(HoneGgufWriter) w = hone_gguf_writer_new ();
    hone_gguf_writer_add_u32 (w, "x.n", 3);
    g_assert_true (hone_gguf_writer_add_tensor (w, "a", HONE_DTYPE_I8, 1, (int64_t[]) { 36 }, a, 36, &error));
    g_assert_true (hone_gguf_writer_add_tensor (w, "b", HONE_DTYPE_I8, 2, (int64_t[]) { 10, 10 }, b, 100, &error));
    g_assert_no_error (error);
    want = hone_gguf_writer_to_bytes (w, &error);
    g_assert_no_error (error);
  }
  {
    g_autoptr(HoneGgufWriter) w = hone_gguf_writer_new ();
    hone_gguf_writer_add_u32 (w, "x.n", 3);
    g_assert_true (add_deferred (w, "a", HONE_DTYPE_I8, 1, (int64_t[]) { 36 }, 36, 1, FALSE, &freed, &error));
    g_assert_true (add_deferred (w, "b", HONE_DTYPE_I8, 2, (int64_t[]) { 10, 10 }, 100, 2, FALSE, &freed, &error));
    g_assert_no_error (error);
    /* refused: a size its shape does not have; a name used twice */
    g_assert_false (add_deferred (w, "c", HONE_DTYPE_I8, 1, (int64_t[]) { 10 }, 9, 3, FALSE, &freed, &error));
    g_assert_error (error, HONE_ERROR, HONE_ERROR_SHAPE_MISMATCH);
    g_clear_error (&error);
    g_assert_false (add_deferred (w, "b", HONE_DTYPE_I8, 1, (int64_t[]) { 10 }, 10, 4, FALSE, &freed, &error));
    g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
    g_clear_error (&error);
    g_assert_cmpint (freed, ==, 2);
    got = hone_gguf_writer_to_bytes (w, &error);
    g_assert_no_error (error);
    g_assert_cmpmem (g_bytes_get_data (got, NULL), g_bytes_get_size (got), g_bytes_get_data (want, NULL),
                     g_bytes_get_size (want));
    g_assert_true (hone_gguf_writer_write (w, path, &error));
    g_assert_no_error (error);
    g_assert_true (g_file_get_contents (path, &contents, &len, NULL));
    g_assert_cmpmem (contents, len, g_bytes_get_data (want, NULL), g_bytes_get_size (want));
  }
  g_assert_cmpint (freed, ==, 4);
  {
    g_autoptr(HoneGgufWriter) w = hone_gguf_writer_new ();
    GDir *d;
    int n_files = 0;
    g_assert_true (hone_gguf_writer_add_tensor (w, "b", HONE_DTYPE_I8, 2, (int64_t[]) { 10, 10 }, b, 100, &error));
    g_assert_true (add_deferred (w, "a", HONE_DTYPE_I8, 1, (int64_t[]) { 36 }, 36, 1, TRUE, &freed, &error));
    g_assert_null (hone_gguf_writer_to_bytes (w, &error));
    g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
    g_clear_error (&error);
    g_assert_false (hone_gguf_writer_write (w, path, &error));
    g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
    g_clear_error (&error);
    g_clear_pointer (&contents, g_free);
    g_assert_true (g_file_get_contents (path, &contents, &len, NULL));
    g_assert_cmpmem (contents, len, g_bytes_get_data (want, NULL), g_bytes_get_size (want));
    d = g_dir_open (dir, 0, NULL);
    while (g_dir_read_name (d))
      n_files++;
    g_dir_close (d);
    g_assert_cmpint (n_files, ==, 1);
  }
  g_assert_cmpint (freed, ==, 5);
  g_unlink (path);
  g_rmdir (dir);
}

/* Deferred tensors made in pieces of whole rows (hone_gguf_writer_set_fill_piece):
 * pieces of 2 rows, of 1 row (a limit under a row's bytes), and the whole
 * tensor by default all give the bytes of the tensor given up front, with
 * the progress reported after each piece up to 1; a fill that fails at its
 * third piece fails the write and leaves no file. */
static void
test_writer_pieces (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("hone-gguf-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "pieces.gguf", NULL);
  g_autoptr(GBytes) want = NULL;
  guint8 b[100], v[7];
  int freed = 0;
  static const struct {
    gsize limit;
    int pieces;   /* of "b" (10 rows of 10 bytes) */
    gsize largest;
  } cases[] = { { 25, 5, 20 }, { 7, 10, 10 }, { 0, 1, 100 }, { 100, 1, 100 }, { 1000, 1, 100 } };

  for (gsize i = 0; i < sizeof b; i++)
    b[i] = (guint8) (i * 7 + 2);
  for (gsize i = 0; i < sizeof v; i++)
    v[i] = (guint8) (i * 7 + 3);
  {
    g_autoptr(HoneGgufWriter) w = hone_gguf_writer_new ();
    g_assert_true (hone_gguf_writer_add_tensor (w, "b", HONE_DTYPE_I8, 2, (int64_t[]) { 10, 10 }, b, 100, &error));
    g_assert_true (hone_gguf_writer_add_tensor (w, "v", HONE_DTYPE_I8, 1, (int64_t[]) { 7 }, v, 7, &error));
    want = hone_gguf_writer_to_bytes (w, &error);
    g_assert_no_error (error);
  }
  for (gsize c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      g_autoptr(HoneGgufWriter) w = hone_gguf_writer_new ();
      g_autoptr(GBytes) got = NULL;
      HoneTestFill *fb = hone_test_fill_new (2, FALSE, &freed), *fv = hone_test_fill_new (3, FALSE, &freed);
      g_autofree char *contents = NULL;
      gsize len;
      HoneTestProgress pr = { 0 };
      g_assert_true (hone_gguf_writer_add_tensor_deferred (w, "b", HONE_DTYPE_I8, 2, (int64_t[]) { 10, 10 }, 100,
                                                         hone_test_fill_pattern, fb, hone_test_fill_free, &error));
      g_assert_true (hone_gguf_writer_add_tensor_deferred (w, "v", HONE_DTYPE_I8, 1, (int64_t[]) { 7 }, 7,
                                                         hone_test_fill_pattern, fv, hone_test_fill_free, &error));
      if (cases[c].limit)
        hone_gguf_writer_set_fill_piece (w, cases[c].limit);
      hone_gguf_writer_set_progress (w, hone_test_progress, &pr);
      got = hone_gguf_writer_to_bytes (w, &error);
      g_assert_no_error (error);
      g_assert_cmpmem (g_bytes_get_data (got, NULL), g_bytes_get_size (got), g_bytes_get_data (want, NULL),
                       g_bytes_get_size (want));
      g_assert_cmpint (fb->pieces, ==, cases[c].pieces);
      g_assert_cmpuint (fb->largest, ==, cases[c].largest);
      g_assert_cmpint (fv->pieces, ==, 1);   /* one row */
      /* progress after each piece and tensor, ending at 1 */
      g_assert_cmpint (pr.calls, ==, cases[c].pieces + 1);
      g_assert_cmpfloat (pr.last, ==, 1.0);
      pr = (HoneTestProgress) { 0 };
      fb->largest = 0;
      g_assert_true (hone_gguf_writer_write (w, path, &error));
      g_assert_no_error (error);
      g_assert_cmpint (fb->pieces, ==, cases[c].pieces);
      g_assert_cmpuint (fb->largest, ==, cases[c].largest);
      g_assert_cmpint (pr.calls, ==, cases[c].pieces + 1);
      g_assert_cmpfloat (pr.last, ==, 1.0);
      g_assert_true (g_file_get_contents (path, &contents, &len, NULL));
      g_assert_cmpmem (contents, len, g_bytes_get_data (want, NULL), g_bytes_get_size (want));
      g_unlink (path);
    }
  {
    g_autoptr(HoneGgufWriter) w = hone_gguf_writer_new ();
    HoneTestFill *fb = hone_test_fill_new (2, FALSE, &freed);
    GDir *d;
    fb->fail_at_piece = 2;
    g_assert_true (hone_gguf_writer_add_tensor_deferred (w, "b", HONE_DTYPE_I8, 2, (int64_t[]) { 10, 10 }, 100,
                                                       hone_test_fill_pattern, fb, hone_test_fill_free, &error));
    hone_gguf_writer_set_fill_piece (w, 20);
    g_assert_false (hone_gguf_writer_write (w, path, &error));
    g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
    g_clear_error (&error);
    g_assert_cmpint (fb->pieces, ==, 2);
    d = g_dir_open (dir, 0, NULL);
    g_assert_null (g_dir_read_name (d));   /* nothing left behind */
    g_dir_close (d);
  }
  g_assert_cmpint (freed, ==, 2 * (int) G_N_ELEMENTS (cases) + 1);
  g_rmdir (dir);
}

/* Releasing bytes of a mapped file's tensor (what the CUDA upload does after
 * each chunk): the pages leave the resident memory and read back unchanged;
 * ranges of a reader over memory, or outside the file, are left alone
 * (MADV_DONTNEED on anonymous memory would zero them). */
static void
test_release_bytes (void)
{
  enum { N = 8 << 20 };   /* 8 MiB of I8 */
  g_autoptr(HoneGgufWriter) w = hone_gguf_writer_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("hone-gguf-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "release.gguf", NULL);
  g_autofree guint8 *data = g_malloc (N);
  g_autoptr(GBytes) bytes = NULL;
  HoneGguf *g, *mem;
  const HoneTensor *t, *mt;
  gint64 before, after;

  for (gsize i = 0; i < N; i++)
    data[i] = (guint8) (i * 2654435761u >> 24);
  g_assert_true (hone_gguf_writer_add_tensor (w, "big", HONE_DTYPE_I8, 1, (int64_t[]) { N }, data, N, &error));
  g_assert_no_error (error);
  g_assert_true (hone_gguf_writer_write (w, path, &error));
  g = hone_gguf_open (path, &error);
  g_assert_no_error (error);
  t = hone_gguf_find_tensor (g, "big");
  g_assert_nonnull (t);
  g_assert_cmpmem (t->data, N, data, N);   /* every page resident */
  before = hone_test_rss_file_kb ();
  /* in two halves, as the upload's chunks come: each releases its own whole pages */
  hone_gguf_release_bytes (g, t->data, N / 2 + 100);
  hone_gguf_release_bytes (g, (const guint8 *) t->data + N / 2 + 100, N / 2 - 100);
  hone_gguf_release_bytes (g, t->data, 0);
  hone_gguf_release_bytes (g, (const guint8 *) t->data + N, 1 << 30);   /* past the file: ignored */
  after = hone_test_rss_file_kb ();
  if (before >= 0)
    {
      g_test_message ("RssFile %" G_GINT64_FORMAT " kB -> %" G_GINT64_FORMAT " kB", before, after);
      g_assert_cmpint (before - after, >=, N / 1024 * 3 / 4);
    }
  g_assert_cmpmem (t->data, N, data, N);   /* read back from the file */

  bytes = hone_gguf_writer_to_bytes (w, &error);
  g_assert_no_error (error);
  mem = hone_gguf_open_bytes (bytes, &error);
  g_assert_no_error (error);
  mt = hone_gguf_find_tensor (mem, "big");
  hone_gguf_release_bytes (mem, mt->data, N);   /* memory, not a file */
  hone_gguf_release_bytes (g, mt->data, N);     /* not this reader's */
  g_assert_cmpmem (mt->data, N, data, N);
  hone_gguf_unref (mem);
  hone_gguf_unref (g);
  g_unlink (path);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  gboolean model = hone_test_take_flag (&argc, argv, "--model");
  g_test_init (&argc, &argv, NULL);
  if (model)
    {
      g_test_add_func ("/gguf/model/default", test_default_model);
      return g_test_run ();
    }
  g_test_add_func ("/gguf/read/v3", test_read_v3);
  g_test_add_func ("/gguf/read/v2", test_read_v2);
  g_test_add_func ("/gguf/read/path", test_open_path);
  g_test_add_func ("/gguf/writer/reproduces-gguf-py", test_writer_reproduces_gguf_py);
  g_test_add_func ("/gguf/writer/roundtrip", test_writer_roundtrip);
  g_test_add_func ("/gguf/writer/errors", test_writer_errors);
  g_test_add_func ("/gguf/writer/deferred", test_writer_deferred);
  g_test_add_func ("/gguf/writer/pieces", test_writer_pieces);
  g_test_add_func ("/gguf/release-bytes", test_release_bytes);
  g_test_add_func ("/gguf/bad/header", test_bad_header);
  g_test_add_func ("/gguf/bad/metadata", test_bad_metadata);
  g_test_add_func ("/gguf/bad/tensors", test_bad_tensors);
  g_test_add_func ("/gguf/bad/truncated", test_bad_truncated);
  g_test_add_func ("/gguf/bad/random-bytes", test_bad_random_bytes);
  return g_test_run ();
}
