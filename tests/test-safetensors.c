/* test-safetensors.c — safetensors reader/writer against files written by the
 * `safetensors` PyPI package (tests/reference/gen_model_fixtures.py), a
 * round trip through our writer, and hostile headers. */
#include "hone-safetensors.h"
#include "hone-test-data.h"
#include "hone-error.h"
#include "hone-dtype.h"

#include <json-glib/json-glib.h>
#include <string.h>
#include <glib/gstdio.h>

static char *
data_path (const char *name)
{
  const char *dir = g_getenv ("HONE_TEST_DATA");
  return g_build_filename (dir ? dir : "tests/data", "model", name, NULL);
}

static JsonNode *
load_json (const char *name)
{
  g_autofree char *path = data_path (name);
  g_autoptr(JsonParser) p = json_parser_new ();
  g_autoptr(GError) error = NULL;
  g_assert_true (json_parser_load_from_file (p, path, &error));
  g_assert_no_error (error);
  return json_node_copy (json_parser_get_root (p));
}

/* Element i of a tensor as double, whatever its type. */
static double
element (const HoneTensor *t, const char *dtype_name, gint64 i)
{
  const guint8 *p = t->data;
  switch (t->type)
    {
    case HONE_DTYPE_F32: { float v; memcpy (&v, p + 4 * i, 4); return v; }
    case HONE_DTYPE_F64: { double v; memcpy (&v, p + 8 * i, 8); return v; }
    case HONE_DTYPE_F16: { hone_f16 v; memcpy (&v, p + 2 * i, 2); return hone_f16_to_f32 (v); }
    case HONE_DTYPE_BF16: { hone_bf16 v; memcpy (&v, p + 2 * i, 2); return hone_bf16_to_f32 (v); }
    case HONE_DTYPE_I64: { gint64 v; memcpy (&v, p + 8 * i, 8); return (double) v; }
    case HONE_DTYPE_I32: { gint32 v; memcpy (&v, p + 4 * i, 4); return v; }
    case HONE_DTYPE_I16: { gint16 v; memcpy (&v, p + 2 * i, 2); return v; }
    case HONE_DTYPE_I8:
      return strcmp (dtype_name, "U8") == 0 ? (double) p[i] : (double) (gint8) p[i];
    default:
      g_assert_not_reached ();
    }
  return 0;
}

/* Files written by the reference implementation read back to the values it recorded. */
static void
test_reference_mixed (void)
{
  g_autofree char *path = data_path ("ref-mixed.safetensors");
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneSafetensors) st = hone_safetensors_open (path, &error);
  g_autoptr(JsonNode) ref = load_json ("ref-mixed.json");
  JsonObject *tensors = json_object_get_object_member (json_node_get_object (ref), "tensors");
  JsonObject *meta = json_object_get_object_member (json_node_get_object (ref), "metadata");
  g_autoptr(GList) names = json_object_get_members (tensors);

  g_assert_no_error (error);
  g_assert_nonnull (st);
  g_assert_cmpuint (hone_safetensors_n_tensors (st), ==, g_list_length (names));
  g_assert_cmpstr (hone_safetensors_get_metadata (st, "format"), ==, json_object_get_string_member (meta, "format"));
  g_assert_cmpstr (hone_safetensors_get_metadata (st, "origin"), ==, "gen_model_fixtures");
  g_assert_null (hone_safetensors_get_metadata (st, "absent"));

  for (GList *l = names; l; l = l->next)
    {
      JsonObject *d = json_object_get_object_member (tensors, l->data);
      JsonArray *shape = json_object_get_array_member (d, "shape");
      JsonArray *values = json_object_get_array_member (d, "values");
      const HoneTensor *t = hone_safetensors_find_tensor (st, l->data);
      guint idx;
      guint n_dims = json_array_get_length (shape);

      g_assert_nonnull (t);
      g_assert_cmpstr (t->name, ==, l->data);
      for (idx = 0; hone_safetensors_tensor (st, idx) != t; idx++)
        ;
      g_assert_cmpstr (hone_safetensors_tensor_dtype_name (st, idx), ==, json_object_get_string_member (d, "dtype"));
      g_assert_cmpint (t->n_dims, ==, (int) n_dims);
      for (guint i = 0; i < n_dims; i++)   /* [out, in] → ne = {in, out} */
        g_assert_cmpint (t->ne[n_dims - 1 - i], ==, json_array_get_int_element (shape, i));
      g_assert_cmpint (hone_tensor_n_elements (t), ==, json_array_get_length (values));
      for (guint i = 0; i < json_array_get_length (values); i++)
        {
          double want = json_node_get_double (json_array_get_element (values, i));
          double have = element (t, json_object_get_string_member (d, "dtype"), i);
          g_assert_cmpfloat (have, ==, want);
        }
    }
  /* Sorted by name. */
  for (guint i = 1; i < hone_safetensors_n_tensors (st); i++)
    g_assert_cmpint (strcmp (hone_safetensors_tensor (st, i - 1)->name, hone_safetensors_tensor (st, i)->name), <, 0);
}

static void
check_sharded (HoneSafetensors *st)
{
  g_autoptr(JsonNode) ref = load_json ("ref-sharded.json");
  JsonObject *o = json_node_get_object (ref);
  g_autoptr(GList) names = json_object_get_members (o);

  g_assert_cmpuint (hone_safetensors_n_files (st), ==, 2);
  g_assert_cmpuint (hone_safetensors_n_tensors (st), ==, g_list_length (names));
  for (GList *l = names; l; l = l->next)
    {
      JsonArray *values = json_object_get_array_member (json_object_get_object_member (o, l->data), "values");
      const HoneTensor *t = hone_safetensors_find_tensor (st, l->data);
      g_assert_nonnull (t);
      for (guint i = 0; i < json_array_get_length (values); i++)
        g_assert_cmpfloat (element (t, "", i), ==, json_node_get_double (json_array_get_element (values, i)));
    }
}

static void
test_reference_sharded (void)
{
  g_autofree char *dir = data_path ("ref-sharded");
  g_autofree char *index = g_build_filename (dir, "model.safetensors.index.json", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneSafetensors) a = hone_safetensors_open (dir, &error);
  g_autoptr(HoneSafetensors) b = NULL;

  g_assert_no_error (error);
  check_sharded (a);
  b = hone_safetensors_open (index, &error);
  g_assert_no_error (error);
  check_sharded (b);
}

/* ---- writer ------------------------------------------------------------ */

static void
test_round_trip (void)
{
  g_autoptr(HoneSafetensorsWriter) w = hone_safetensors_writer_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("hone-st-XXXXXX", NULL);
  const char *keep = g_getenv ("HONE_TEST_KEEP_DIR");
  g_autofree char *path = g_build_filename (keep ? keep : dir, "round-trip.safetensors", NULL);
  g_autoptr(HoneSafetensors) st = NULL;
  g_autoptr(GBytes) mem = NULL;
  g_autofree char *file = NULL;
  gsize file_len;
  float f32[6];
  hone_f16 f16[5];
  hone_bf16 bf16[3];
  gint32 i32[4] = { -7, 0, 123456, G_MININT32 };
  gint8 i8[3] = { -128, 5, 127 };
  gint64 i64[2] = { G_MININT64, 1ll << 50 };
  double f64[1] = { 0.1 };
  struct { const char *name; HoneDType type; int n_dims; int64_t ne[3]; const void *data; gsize n; } items[] = {
    { "w.f32", HONE_DTYPE_F32, 2, { 3, 2 }, f32, sizeof f32 },
    { "w.f16", HONE_DTYPE_F16, 1, { 5 }, f16, sizeof f16 },
    { "w.bf16", HONE_DTYPE_BF16, 3, { 1, 3, 1 }, bf16, sizeof bf16 },
    { "odd \"name\"\n", HONE_DTYPE_I8, 1, { 3 }, i8, sizeof i8 },
    { "w.i32", HONE_DTYPE_I32, 2, { 2, 2 }, i32, sizeof i32 },
    { "w.i64", HONE_DTYPE_I64, 1, { 2 }, i64, sizeof i64 },
    { "w.f64", HONE_DTYPE_F64, 0, { 0 }, f64, sizeof f64 },
    { "w.empty", HONE_DTYPE_F32, 2, { 4, 0 }, f32, 0 },
  };
  guint64 header_len;

  for (int i = 0; i < 6; i++)
    f32[i] = (float) i * 0.25f - 1.0f;
  for (int i = 0; i < 5; i++)
    f16[i] = hone_f32_to_f16 ((float) i - 2.5f);
  for (int i = 0; i < 3; i++)
    bf16[i] = hone_f32_to_bf16 ((float) i * 3.0f + 0.5f);

  for (gsize i = 0; i < G_N_ELEMENTS (items); i++)
    {
      g_assert_true (hone_safetensors_writer_add_tensor (w, items[i].name, items[i].type, items[i].n_dims,
                                                         items[i].ne, items[i].data, items[i].n, &error));
      g_assert_no_error (error);
    }
  hone_safetensors_writer_add_metadata (w, "note", "hone");
  /* Refused: wrong size, duplicate, quantized type. */
  g_assert_false (hone_safetensors_writer_add_tensor (w, "bad", HONE_DTYPE_F32, 1, (int64_t[]) { 3 }, f32, 8, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (hone_safetensors_writer_add_tensor (w, "w.f32", HONE_DTYPE_F32, 1, (int64_t[]) { 1 }, f32, 4, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (hone_safetensors_writer_add_tensor (w, "q", HONE_DTYPE_Q4_0, 1, (int64_t[]) { 32 }, f32, 18, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_UNSUPPORTED_TYPE);
  g_clear_error (&error);

  g_assert_true (hone_safetensors_writer_write (w, path, &error));
  g_assert_no_error (error);
  mem = hone_safetensors_writer_to_bytes (w, &error);
  g_assert_no_error (error);
  g_assert_true (g_file_get_contents (path, &file, &file_len, NULL));
  g_assert_cmpmem (file, file_len, g_bytes_get_data (mem, NULL), g_bytes_get_size (mem));

  /* Header length a multiple of 8, padded with spaces; no temp file left. */
  memcpy (&header_len, file, 8);
  header_len = GUINT64_FROM_LE (header_len);
  g_assert_cmpuint (header_len % 8, ==, 0);
  g_assert_cmpint (file[8], ==, '{');
  g_assert_true (g_str_has_prefix (file + 8, "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"hone\"}"));

  st = hone_safetensors_open (path, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (hone_safetensors_n_tensors (st), ==, G_N_ELEMENTS (items));
  g_assert_cmpstr (hone_safetensors_get_metadata (st, "format"), ==, "pt");
  g_assert_cmpstr (hone_safetensors_get_metadata (st, "note"), ==, "hone");
  for (gsize i = 0; i < G_N_ELEMENTS (items); i++)
    {
      const HoneTensor *t = hone_safetensors_find_tensor (st, items[i].name);
      int elem = (int) hone_dtype_block_bytes (items[i].type);
      g_assert_nonnull (t);
      g_assert_cmpint (t->type, ==, items[i].type);
      g_assert_cmpint (t->n_dims, ==, items[i].n_dims);
      for (int d = 0; d < items[i].n_dims; d++)
        g_assert_cmpint (t->ne[d], ==, items[i].ne[d]);
      g_assert_cmpmem (t->data, t->nbytes, items[i].data, items[i].n);
      /* Zero-copy and aligned: the view points into the file mapping. */
      g_assert_cmpuint ((guintptr) t->data % (guintptr) elem, ==, 0);
    }
  if (keep)
    {
      /* Expected values for tests/reference/check_safetensors_writer.py. */
      g_autofree char *json = g_build_filename (keep, "round-trip.expected.json", NULL);
      GString *s = g_string_new ("{\"w.f32\": [");
      for (int i = 0; i < 6; i++)
        g_string_append_printf (s, "%s%.9g", i ? ", " : "", f32[i]);
      g_string_append (s, "], \"w.i64\": [-9223372036854775808, 1125899906842624]}");
      g_assert_true (g_file_set_contents (json, s->str, -1, NULL));
      g_string_free (s, TRUE);
    }
  if (!keep)
    g_unlink (path);
  g_rmdir (dir);
}

/* A writer that fails leaves the destination alone and no temp file behind. */
static void
test_write_failure (void)
{
  g_autoptr(HoneSafetensorsWriter) w = hone_safetensors_writer_new ();
  g_autoptr(GError) error = NULL;

  g_assert_false (hone_safetensors_writer_write (w, "/nonexistent-dir/x.safetensors", &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_IO);
}

/* ---- hostile input ----------------------------------------------------- */

static GBytes *
make_file (const char *header, gsize data_len, gint64 len_override)
{
  gsize hl = strlen (header);
  guint64 len = GUINT64_TO_LE (len_override >= 0 ? (guint64) len_override : hl);
  guint8 *buf = g_malloc0 (8 + hl + data_len);
  memcpy (buf, &len, 8);
  memcpy (buf + 8, header, hl);
  for (gsize i = 0; i < data_len; i++)
    buf[8 + hl + i] = (guint8) i;
  return g_bytes_new_take (buf, 8 + hl + data_len);
}

static void
expect_error (const char *header, gsize data_len, gint64 len_override, int code, const char *needle)
{
  g_autoptr(GBytes) b = make_file (header, data_len, len_override);
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneSafetensors) st = hone_safetensors_open_bytes (b, &error);

  g_assert_null (st);
  if (error == NULL || error->code != code)
    g_error ("header %s: expected %s, got %s (%s)", header, hone_error_code_name (code),
             error ? hone_error_code_name (error->code) : "success", error ? error->message : "");
  if (needle && strstr (error->message, needle) == NULL)
    g_error ("message “%s” does not name “%s”", error->message, needle);
}

static void
test_bad_headers (void)
{
  /* Truncated: fewer than 8 bytes. */
  {
    g_autoptr(GBytes) b = g_bytes_new ("\x10\0\0", 3);
    g_autoptr(GError) error = NULL;
    g_assert_null (hone_safetensors_open_bytes (b, &error));
    g_assert_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT);
  }
  /* Header length beyond the file, and beyond the 100 MB limit. */
  expect_error ("{}", 0, 1000, HONE_ERROR_FILE_CORRUPT, "exceeds");
  expect_error ("{}", 0, G_MAXINT64, HONE_ERROR_FILE_CORRUPT, "exceeds");
  {
    gsize big = HONE_SAFETENSORS_MAX_HEADER + 16;
    guint8 *buf = g_malloc0 (big);
    guint64 len = GUINT64_TO_LE ((guint64) HONE_SAFETENSORS_MAX_HEADER + 1);
    g_autoptr(GBytes) b = NULL;
    g_autoptr(GError) error = NULL;
    memcpy (buf, &len, 8);
    buf[8] = '{';
    b = g_bytes_new_take (buf, big);
    g_assert_null (hone_safetensors_open_bytes (b, &error));
    g_assert_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT);
    g_assert_nonnull (strstr (error->message, "limit"));
  }
  /* Not JSON / not an object / too deep / not UTF-8. */
  expect_error ("{\"a\": {", 0, -1, HONE_ERROR_INVALID_JSON, NULL);
  expect_error ("[1, 2]  ", 0, -1, HONE_ERROR_INVALID_JSON, NULL);
  expect_error ("{\"a\":[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]}", 0, -1, HONE_ERROR_INVALID_JSON, NULL);
  expect_error ("{\"\xff\": 1}", 0, -1, HONE_ERROR_INVALID_JSON, NULL);
  expect_error ("{\"t\": 5}", 0, -1, HONE_ERROR_INVALID_JSON, "“t”");
  expect_error ("{\"t\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4, -1, HONE_ERROR_INVALID_JSON, "“t”");
  expect_error ("{\"t\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4, -1, HONE_ERROR_INVALID_JSON, "“t”");
  expect_error ("{\"t\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", 4, -1,
                HONE_ERROR_INVALID_JSON, "“t”");
  expect_error ("{\"t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, \"4\"]}}", 4, -1,
                HONE_ERROR_INVALID_JSON, "“t”");
  expect_error ("{\"__metadata__\": {\"format\": 1}}", 0, -1, HONE_ERROR_INVALID_JSON, "format");
  /* Types. */
  expect_error ("{\"t.w\": {\"dtype\": \"F31\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, -1,
                HONE_ERROR_UNSUPPORTED_TYPE, "t.w");
  expect_error ("{\"t.w\": {\"dtype\": \"BOOL\", \"shape\": [1], \"data_offsets\": [0, 1]}}", 4, -1,
                HONE_ERROR_UNSUPPORTED_TYPE, "t.w");
  /* Values. */
  expect_error ("{\"t.w\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", 4, -1,
                HONE_ERROR_FILE_CORRUPT, "t.w");
  expect_error ("{\"t.w\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1], \"data_offsets\": [0, 4]}}", 4, -1,
                HONE_ERROR_FILE_UNSUPPORTED, "t.w");
  expect_error ("{\"t.w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 8, -1,
                HONE_ERROR_FILE_CORRUPT, "t.w");
  expect_error ("{\"t.w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 4]}}", 16, -1,
                HONE_ERROR_FILE_CORRUPT, "t.w");
  expect_error ("{\"t.w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 12]}}", 16, -1,
                HONE_ERROR_FILE_CORRUPT, "t.w");
  expect_error ("{\"t.w\": {\"dtype\": \"F32\", \"shape\": [4611686018427387904, 4611686018427387904], "
                "\"data_offsets\": [0, 0]}}", 16, -1, HONE_ERROR_FILE_CORRUPT, "t.w");
  expect_error ("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                " \"b\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [6, 10]}}", 16, -1,
                HONE_ERROR_FILE_CORRUPT, "overlap");
}

/* Edge cases a valid file may have: empty tensors, a scalar, misaligned offsets, gaps. */
static void
test_valid_edges (void)
{
  g_autoptr(GBytes) b = make_file ("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [1, 9]},"
                                   " \"z\": {\"dtype\": \"F32\", \"shape\": [0, 3], \"data_offsets\": [4, 4]},"
                                   " \"s\": {\"dtype\": \"I16\", \"shape\": [], \"data_offsets\": [12, 14]},"
                                   " \"__metadata__\": {}}", 16, -1);
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneSafetensors) st = hone_safetensors_open_bytes (b, &error);
  const HoneTensor *a, *z, *s;
  const guint8 *raw;
  gsize hl;
  float v[2];

  g_assert_no_error (error);
  g_assert_cmpuint (hone_safetensors_n_tensors (st), ==, 3);
  a = hone_safetensors_find_tensor (st, "a");
  z = hone_safetensors_find_tensor (st, "z");
  s = hone_safetensors_find_tensor (st, "s");
  g_assert_nonnull (a);
  g_assert_nonnull (z);
  g_assert_nonnull (s);
  g_assert_cmpuint ((guintptr) a->data % 4, ==, 0);
  raw = g_bytes_get_data (b, NULL);
  memcpy (&hl, raw, 8);
  memcpy (v, raw + 8 + hl + 1, 8);
  g_assert_cmpmem (a->data, 8, v, 8);
  g_assert_cmpint (z->n_dims, ==, 2);
  g_assert_cmpint (z->ne[0], ==, 3);
  g_assert_cmpint (z->ne[1], ==, 0);
  g_assert_cmpint (hone_tensor_n_elements (z), ==, 0);
  g_assert_cmpint (s->n_dims, ==, 0);
  g_assert_cmpint (hone_tensor_n_elements (s), ==, 1);
  g_assert_null (hone_safetensors_find_tensor (st, "__metadata__"));
}

/* Sharded folders that lie. */
static void
write_text (const char *dir, const char *name, const char *text)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
}

static void
write_shard (const char *dir, const char *name, const char *tensor)
{
  g_autoptr(HoneSafetensorsWriter) w = hone_safetensors_writer_new ();
  g_autofree char *path = g_build_filename (dir, name, NULL);
  float x[2] = { 1, 2 };
  g_assert_true (hone_safetensors_writer_add_tensor (w, tensor, HONE_DTYPE_F32, 1, (int64_t[]) { 2 }, x, 8, NULL));
  g_assert_true (hone_safetensors_writer_write (w, path, NULL));
}

static void
expect_dir_error (const char *dir, const char *index, int code, const char *needle)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneSafetensors) st = NULL;

  write_text (dir, "model.safetensors.index.json", index);
  st = hone_safetensors_open (dir, &error);
  g_assert_null (st);
  g_assert_nonnull (error);
  if (error->code != code || (needle && strstr (error->message, needle) == NULL))
    g_error ("index %s: got %s (%s)", index, hone_error_code_name (error->code), error->message);
}

static void
test_bad_shards (void)
{
  g_autofree char *dir = g_dir_make_tmp ("hone-st-XXXXXX", NULL);
  g_autoptr(GError) error = NULL;

  write_shard (dir, "a.safetensors", "x");
  write_shard (dir, "b.safetensors", "y");
  write_shard (dir, "c.safetensors", "x");
  expect_dir_error (dir, "{\"weight_map\": {\"x\": \"a.safetensors\", \"y\": \"missing.safetensors\"}}",
                    HONE_ERROR_IO, "missing.safetensors");
  expect_dir_error (dir, "{\"weight_map\": {\"x\": \"../a.safetensors\"}}", HONE_ERROR_INVALID_JSON, "“x”");
  expect_dir_error (dir, "{\"weight_map\": {\"x\": \"a.safetensors\", \"z\": \"b.safetensors\"}}",
                    HONE_ERROR_FILE_CORRUPT, "“z”");
  expect_dir_error (dir, "{\"weight_map\": {\"x\": \"b.safetensors\", \"y\": \"a.safetensors\"}}",
                    HONE_ERROR_FILE_CORRUPT, NULL);
  expect_dir_error (dir, "{\"weight_map\": {\"x\": \"a.safetensors\", \"x2\": \"c.safetensors\"}}",
                    HONE_ERROR_FILE_CORRUPT, "twice");
  expect_dir_error (dir, "{\"weight_map\": {}}", HONE_ERROR_FILE_CORRUPT, NULL);
  expect_dir_error (dir, "{\"weight_map\": [1]}", HONE_ERROR_INVALID_JSON, NULL);
  expect_dir_error (dir, "not json", HONE_ERROR_INVALID_JSON, NULL);

  /* A good index over the same files opens. */
  write_text (dir, "model.safetensors.index.json", "{\"weight_map\": {\"x\": \"a.safetensors\", \"y\": \"b.safetensors\"}}");
  {
    g_autoptr(HoneSafetensors) st = hone_safetensors_open (dir, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (hone_safetensors_n_tensors (st), ==, 2);
    g_assert_cmpuint (hone_safetensors_n_files (st), ==, 2);
  }
  /* Without an index, several files are ambiguous; a missing path is an IO error. */
  {
    g_autofree char *index = g_build_filename (dir, "model.safetensors.index.json", NULL);
    g_autofree char *nothing = g_build_filename (dir, "nothing.safetensors", NULL);
    g_autoptr(HoneSafetensors) st = NULL;
    g_unlink (index);
    st = hone_safetensors_open (dir, &error);
    g_assert_null (st);
    g_assert_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED);
    g_clear_error (&error);
    st = hone_safetensors_open (nothing, &error);
    g_assert_null (st);
    g_assert_error (error, HONE_ERROR, HONE_ERROR_IO);
  }
  {
    const char *names[] = { "a.safetensors", "b.safetensors", "c.safetensors" };
    for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
      {
        g_autofree char *p = g_build_filename (dir, names[i], NULL);
        g_unlink (p);
      }
  }
  g_rmdir (dir);
}

/* add_tensor_take: the writer owns the buffer (no copy), also when it
 * refuses the tensor (under ASan a leak or a double free fails this). */
static void
test_take (void)
{
  g_autoptr(HoneSafetensorsWriter) w = hone_safetensors_writer_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(HoneSafetensors) st = NULL;
  float *v = g_new (float, 6), *bad = g_new (float, 2), *dup = g_new (float, 6);
  const HoneTensor *t;
  const float want[6] = { 1, -2, 3.5f, 0, -0.25f, 1e30f };

  memcpy (v, want, sizeof want);
  memcpy (dup, want, sizeof want);
  g_assert_true (hone_safetensors_writer_add_tensor_take (w, "v", HONE_DTYPE_F32, 2, (int64_t[]) { 3, 2 }, v, 24,
                                                          &error));
  g_assert_no_error (error);
  g_assert_false (hone_safetensors_writer_add_tensor_take (w, "bad", HONE_DTYPE_F32, 1, (int64_t[]) { 3 }, bad, 8,
                                                           &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (hone_safetensors_writer_add_tensor_take (w, "v", HONE_DTYPE_F32, 2, (int64_t[]) { 3, 2 }, dup, 24,
                                                           &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  bytes = hone_safetensors_writer_to_bytes (w, &error);
  g_assert_no_error (error);
  st = hone_safetensors_open_bytes (bytes, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (hone_safetensors_n_tensors (st), ==, 1);
  t = hone_safetensors_find_tensor (st, "v");
  g_assert_nonnull (t);
  g_assert_cmpint (t->ne[0], ==, 3);
  g_assert_cmpint (t->ne[1], ==, 2);
  g_assert_cmpmem (t->data, t->nbytes, want, sizeof want);
}

/* Releasing a file tensor's pages: they leave the resident memory and read
 * back unchanged; a tensor of in-memory bytes, or of another reader, is left
 * alone (MADV_DONTNEED on anonymous memory would zero it). */
static void
test_release (void)
{
  enum { N = 8 << 20 };   /* 8 MiB of U8 */
  g_autoptr(HoneSafetensorsWriter) w = hone_safetensors_writer_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("hone-st-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "release.safetensors", NULL);
  g_autoptr(HoneSafetensors) st = NULL, mem_st = NULL;
  g_autoptr(GBytes) bytes = NULL;
  g_autofree guint8 *data = g_malloc (N);
  const HoneTensor *t, *mt;
  guint64 sum = 0, sum2 = 0;
  gint64 before, after;

  for (gsize i = 0; i < N; i++)
    data[i] = (guint8) (i * 2654435761u >> 24);
  g_assert_true (hone_safetensors_writer_add_tensor (w, "big", HONE_DTYPE_I8, 1, (int64_t[]) { N }, data, N, &error));
  g_assert_true (hone_safetensors_writer_add_tensor (w, "small", HONE_DTYPE_I8, 1, (int64_t[]) { 3 }, data, 3, &error));
  g_assert_no_error (error);
  g_assert_true (hone_safetensors_writer_write (w, path, &error));
  st = hone_safetensors_open (path, &error);
  g_assert_no_error (error);
  t = hone_safetensors_find_tensor (st, "big");
  g_assert_nonnull (t);
  for (gsize i = 0; i < N; i++)
    sum += ((const guint8 *) t->data)[i];
  before = hone_test_rss_file_kb ();
  hone_safetensors_release_tensor (st, t);
  hone_safetensors_release_tensor (st, hone_safetensors_find_tensor (st, "small"));   /* less than a page */
  after = hone_test_rss_file_kb ();
  if (before >= 0)
    {
      g_test_message ("RssFile %" G_GINT64_FORMAT " kB -> %" G_GINT64_FORMAT " kB", before, after);
      g_assert_cmpint (before - after, >=, N / 1024 / 2);
    }
  g_assert_cmpmem (t->data, N, data, N);   /* read back from the file */
  g_assert_cmpmem (hone_safetensors_find_tensor (st, "small")->data, 3, data, 3);

  bytes = hone_safetensors_writer_to_bytes (w, &error);
  g_assert_no_error (error);
  mem_st = hone_safetensors_open_bytes (bytes, &error);
  g_assert_no_error (error);
  mt = hone_safetensors_find_tensor (mem_st, "big");
  hone_safetensors_release_tensor (mem_st, mt);
  hone_safetensors_release_tensor (mem_st, t);   /* not its tensor */
  hone_safetensors_release_tensor (st, mt);      /* nor this */
  for (gsize i = 0; i < N; i++)
    sum2 += ((const guint8 *) mt->data)[i];
  g_assert_cmpuint (sum2, ==, sum);
  g_assert_cmpmem (mt->data, N, data, N);
  g_unlink (path);
  g_rmdir (dir);
}

/* A deferred tensor whose fill writes hone_test_fill_pattern's bytes (or fails). */
static gboolean
add_deferred (HoneSafetensorsWriter *w, const char *name, HoneDType type, int n_dims, const int64_t *ne, gsize nbytes,
              int seed, gboolean fail, int *freed, GError **error)
{
  HoneTestFill *f = hone_test_fill_new (seed, fail, freed);
  return hone_safetensors_writer_add_tensor_deferred (w, name, type, n_dims, ne, nbytes, hone_test_fill_pattern, f,
                                                      hone_test_fill_free, error);
}

/* Deferred tensors: made only when the file is written, the same bytes as
 * tensors given up front; a fill that fails fails the write with its own
 * error and leaves no file; the writer frees every fill's data (refused,
 * written or failed). */
static void
test_deferred (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("hone-st-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "deferred.safetensors", NULL);
  g_autofree char *contents = NULL;
  g_autoptr(GBytes) want = NULL, got = NULL;
  guint8 a[24], b[6];
  gsize len;
  int freed = 0;

  for (gsize i = 0; i < sizeof a; i++)
    a[i] = (guint8) (i * 7 + 1);
  for (gsize i = 0; i < sizeof b; i++)
    b[i] = (guint8) (i * 7 + 2);
  {
    g_autoptr(HoneSafetensorsWriter) w = hone_safetensors_writer_new ();
    g_assert_true (hone_safetensors_writer_add_tensor (w, "a", HONE_DTYPE_F32, 2, (int64_t[]) { 3, 2 }, a, 24, &error));
    g_assert_true (hone_safetensors_writer_add_tensor (w, "b", HONE_DTYPE_F16, 1, (int64_t[]) { 3 }, b, 6, &error));
    g_assert_true (hone_safetensors_writer_add_tensor (w, "e", HONE_DTYPE_I8, 1, (int64_t[]) { 0 }, "", 0, &error));
    want = hone_safetensors_writer_to_bytes (w, &error);
    g_assert_no_error (error);
  }
  {
    g_autoptr(HoneSafetensorsWriter) w = hone_safetensors_writer_new ();
    g_assert_true (add_deferred (w, "a", HONE_DTYPE_F32, 2, (int64_t[]) { 3, 2 }, 24, 1, FALSE, &freed, &error));
    g_assert_true (hone_safetensors_writer_add_tensor (w, "b", HONE_DTYPE_F16, 1, (int64_t[]) { 3 }, b, 6, &error));
    g_assert_true (add_deferred (w, "e", HONE_DTYPE_I8, 1, (int64_t[]) { 0 }, 0, 3, FALSE, &freed, &error));
    /* refused: the shape needs 24 bytes; a name given twice */
    g_assert_false (add_deferred (w, "c", HONE_DTYPE_F32, 2, (int64_t[]) { 3, 2 }, 20, 4, FALSE, &freed, &error));
    g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
    g_clear_error (&error);
    g_assert_false (add_deferred (w, "a", HONE_DTYPE_I8, 1, (int64_t[]) { 2 }, 2, 5, FALSE, &freed, &error));
    g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
    g_clear_error (&error);
    g_assert_cmpint (freed, ==, 2);
    got = hone_safetensors_writer_to_bytes (w, &error);
    g_assert_no_error (error);
    g_assert_cmpmem (g_bytes_get_data (got, NULL), g_bytes_get_size (got), g_bytes_get_data (want, NULL),
                     g_bytes_get_size (want));
    g_assert_true (hone_safetensors_writer_write (w, path, &error));
    g_assert_no_error (error);
    g_assert_true (g_file_get_contents (path, &contents, &len, NULL));
    g_assert_cmpmem (contents, len, g_bytes_get_data (want, NULL), g_bytes_get_size (want));
  }
  g_assert_cmpint (freed, ==, 4);
  {
    g_autoptr(HoneSafetensorsWriter) w = hone_safetensors_writer_new ();
    GDir *d;
    int n_files = 0;
    g_assert_true (hone_safetensors_writer_add_tensor (w, "b", HONE_DTYPE_F16, 1, (int64_t[]) { 3 }, b, 6, &error));
    g_assert_true (add_deferred (w, "a", HONE_DTYPE_F32, 2, (int64_t[]) { 3, 2 }, 24, 1, TRUE, &freed, &error));
    g_assert_null (hone_safetensors_writer_to_bytes (w, &error));
    g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
    g_clear_error (&error);
    /* over the earlier file: it stays as it was, and no temporary file is left */
    g_assert_false (hone_safetensors_writer_write (w, path, &error));
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

/* Deferred tensors made in pieces of whole rows (hone_safetensors_writer_set_fill_piece):
 * pieces of 2 rows, of 1 row (a limit under a row's bytes), and the whole
 * tensor by default all give the bytes of the tensor given up front, with
 * the progress reported after each piece up to 1; a fill that fails at its
 * third piece fails the write and leaves no file. */
static void
test_pieces (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("hone-st-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "pieces.safetensors", NULL);
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
    g_autoptr(HoneSafetensorsWriter) w = hone_safetensors_writer_new ();
    g_assert_true (hone_safetensors_writer_add_tensor (w, "b", HONE_DTYPE_I8, 2, (int64_t[]) { 10, 10 }, b, 100, &error));
    g_assert_true (hone_safetensors_writer_add_tensor (w, "v", HONE_DTYPE_I8, 1, (int64_t[]) { 7 }, v, 7, &error));
    want = hone_safetensors_writer_to_bytes (w, &error);
    g_assert_no_error (error);
  }
  for (gsize c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      g_autoptr(HoneSafetensorsWriter) w = hone_safetensors_writer_new ();
      g_autoptr(GBytes) got = NULL;
      HoneTestFill *fb = hone_test_fill_new (2, FALSE, &freed), *fv = hone_test_fill_new (3, FALSE, &freed);
      g_autofree char *contents = NULL;
      gsize len;
      HoneTestProgress pr = { 0 };
      g_assert_true (hone_safetensors_writer_add_tensor_deferred (w, "b", HONE_DTYPE_I8, 2, (int64_t[]) { 10, 10 },
                                                                  100, hone_test_fill_pattern, fb,
                                                                  hone_test_fill_free, &error));
      g_assert_true (hone_safetensors_writer_add_tensor_deferred (w, "v", HONE_DTYPE_I8, 1, (int64_t[]) { 7 }, 7,
                                                                  hone_test_fill_pattern, fv, hone_test_fill_free,
                                                                  &error));
      if (cases[c].limit)
        hone_safetensors_writer_set_fill_piece (w, cases[c].limit);
      hone_safetensors_writer_set_progress (w, hone_test_progress, &pr);
      got = hone_safetensors_writer_to_bytes (w, &error);
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
      g_assert_true (hone_safetensors_writer_write (w, path, &error));
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
    g_autoptr(HoneSafetensorsWriter) w = hone_safetensors_writer_new ();
    HoneTestFill *fb = hone_test_fill_new (2, FALSE, &freed);
    GDir *d;
    fb->fail_at_piece = 2;
    g_assert_true (hone_safetensors_writer_add_tensor_deferred (w, "b", HONE_DTYPE_I8, 2, (int64_t[]) { 10, 10 }, 100,
                                                                hone_test_fill_pattern, fb, hone_test_fill_free,
                                                                &error));
    hone_safetensors_writer_set_fill_piece (w, 20);
    g_assert_false (hone_safetensors_writer_write (w, path, &error));
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

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/safetensors/reference-mixed", test_reference_mixed);
  g_test_add_func ("/safetensors/reference-sharded", test_reference_sharded);
  g_test_add_func ("/safetensors/round-trip", test_round_trip);
  g_test_add_func ("/safetensors/write-failure", test_write_failure);
  g_test_add_func ("/safetensors/bad-headers", test_bad_headers);
  g_test_add_func ("/safetensors/valid-edges", test_valid_edges);
  g_test_add_func ("/safetensors/bad-shards", test_bad_shards);
  g_test_add_func ("/safetensors/release", test_release);
  g_test_add_func ("/safetensors/deferred", test_deferred);
  g_test_add_func ("/safetensors/pieces", test_pieces);
  g_test_add_func ("/safetensors/take", test_take);
  return g_test_run ();
}
