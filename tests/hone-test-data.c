/* hone-test-data.c — reading committed fixtures under $HONE_TEST_DATA (tests/data). */
#include <gio/gio.h>
#include <string.h>
#include "hone-test-data.h"

char *
hone_test_data_path (const char *subdir, const char *name)
{
  const char *dir = g_getenv ("HONE_TEST_DATA");
  return g_build_filename (dir ? dir : "tests/data", subdir, name, NULL);
}

GBytes *
hone_test_data_load (const char *subdir, const char *name)
{
  char *path = hone_test_data_path (subdir, name);
  char *contents = NULL;
  gsize len = 0;
  GError *error = NULL;
  g_file_get_contents (path, &contents, &len, &error);
  g_assert_no_error (error);
  g_free (path);
  return g_bytes_new_take (contents, len);
}

JsonObject *
hone_test_data_load_json (const char *subdir, const char *name, JsonParser **parser_out)
{
  char *path = hone_test_data_path (subdir, name);
  JsonParser *parser = json_parser_new ();
  GError *error = NULL;
  json_parser_load_from_file (parser, path, &error);
  g_assert_no_error (error);
  g_free (path);
  *parser_out = parser;
  return json_node_get_object (json_parser_get_root (parser));
}

uint32_t
hone_test_fbits (float f)
{
  uint32_t u;
  memcpy (&u, &f, 4);
  return u;
}

gboolean
hone_test_take_flag (int *argc, char **argv, const char *flag)
{
  gboolean found = FALSE;
  int j = 1;
  for (int i = 1; i < *argc; i++)
    {
      if (strcmp (argv[i], flag) == 0)
        found = TRUE;
      else
        argv[j++] = argv[i];
    }
  if (j < *argc)
    argv[j] = NULL;
  *argc = j;
  return found;
}

gint64
hone_test_rss_file_kb (void)
{
  g_autofree char *status = NULL;
  const char *p;
  if (!g_file_get_contents ("/proc/self/status", &status, NULL, NULL) || (p = strstr (status, "RssFile:")) == NULL)
    return -1;
  return g_ascii_strtoll (p + strlen ("RssFile:"), NULL, 10);
}

HoneTestFill *
hone_test_fill_new (int seed, gboolean fail, int *freed)
{
  HoneTestFill *f = g_new0 (HoneTestFill, 1);
  f->seed = seed;
  f->fail = fail;
  f->freed = freed;
  f->fail_at_piece = -1;
  return f;
}

gboolean
hone_test_fill_pattern (gpointer fill, void *buf, gsize offset, gsize nbytes, GError **error)
{
  HoneTestFill *f = fill;
  if (offset == 0)            /* a new pass (a writer may be written more than once) */
    {
      f->next = 0;
      f->pieces = 0;
    }
  if (f->fail || f->pieces == f->fail_at_piece)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED, "cancelled in the fill");
      return FALSE;
    }
  g_assert_cmpuint (offset, ==, f->next);
  g_assert_cmpuint (nbytes, >, 0);
  f->next = offset + nbytes;
  f->pieces++;
  f->largest = MAX (f->largest, nbytes);
  for (gsize i = 0; i < nbytes; i++)
    ((guint8 *) buf)[i] = (guint8) ((offset + i) * 7 + (gsize) f->seed);
  return TRUE;
}

void
hone_test_fill_free (gpointer fill)
{
  HoneTestFill *f = fill;
  (*f->freed)++;
  g_free (f);
}

void
hone_test_progress (double fraction, gpointer progress)
{
  HoneTestProgress *p = progress;
  g_assert_cmpfloat (fraction, >=, p->last);
  g_assert_cmpfloat (fraction, <=, 1.0 + 1e-12);
  p->last = fraction;
  p->calls++;
}
