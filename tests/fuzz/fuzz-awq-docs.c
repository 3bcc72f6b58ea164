/* fuzz-awq-docs.c — libFuzzer target: the AWQ calibration-document readers
 * (hone-awq-data.c: plain text / Markdown, JSON and JSONL text-field walker)
 * and the AWQ quantization_config reader (hone-awq-load.c) over arbitrary
 * bytes. None may crash, leak, hang or read outside the input; text that
 * comes back must be valid UTF-8.
 *
 * The first byte picks the reader: 0 .txt, 1 .md, 2 .json, 3 .jsonl (through
 * hone_awq_document_text() on a temporary file, the only way in), 4 the
 * quantization_config of a config.json. PDFs go to poppler (dlopened, not
 * ours) and are left out. GLib criticals and warnings abort (findings). */
#include "hone-awq-data.h"
#include "hone-awq-load.h"

#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static char *tmp_dir;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  /* A g_return_if_fail tripping is a bug too: make it a crash libFuzzer sees. */
  g_log_set_always_fatal (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static const char *const ext[] = { "txt", "md", "json", "jsonl" };
  int mode;

  if (size < 1)
    return 0;
  mode = data[0] % 5;
  data++;
  size--;
  if (mode == 4)
    {
      int group = -1;
      GError *error = NULL;
      if (hone_awq_load_config (NULL, (const char *) data, (gssize) size, &group, &error))
        g_assert (group == 0 || group == 32 || group == 64 || group == 128);
      else
        g_assert (error != NULL && group == 0);
      g_clear_error (&error);
      return 0;
    }
  if (tmp_dir == NULL)
    tmp_dir = g_dir_make_tmp ("hone-fuzz-docs-XXXXXX", NULL);
  {
    char *path = g_strdup_printf ("%s/doc.%s", tmp_dir, ext[mode]);
    GError *error = NULL;
    char *text;

    g_assert (g_file_set_contents (path, (const char *) data, (gssize) size, NULL));
    text = hone_awq_document_text (path, NULL, &error);
    if (text != NULL)
      g_assert (g_utf8_validate (text, -1, NULL));
    else
      g_assert (error != NULL);
    g_clear_error (&error);
    g_free (text);
    g_unlink (path);
    g_free (path);
  }
  return 0;
}
