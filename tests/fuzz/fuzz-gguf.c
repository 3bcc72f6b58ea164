/* fuzz-gguf.c — libFuzzer target for the GGUF reader.
 *
 * Opens the input with hone_gguf_open_bytes(); when it opens, reads every
 * metadata entry through every getter, touches the first and last byte of
 * every tensor (ASan catches a view that leaves the buffer) and dequantizes
 * the first and last row of every tensor of a supported type.
 */
#include "hone-error.h"
#include "hone-gguf.h"

#include <stdint.h>
#include <string.h>

static volatile uint8_t sink;

static void
touch_kvs (const HoneGguf *g)
{
  for (guint i = 0; i < hone_gguf_n_kv (g); i++)
    {
      const char *key = hone_gguf_kv_key (g, i);
      guint32 u32;
      gint64 i64;
      float f;
      gboolean b;
      gsize len;
      HoneGgufType et;
      guint64 n;
      const char *s;
      const guint8 *p;

      sink ^= (uint8_t) hone_gguf_get_u32 (g, key, &u32);
      sink ^= (uint8_t) hone_gguf_get_i64 (g, key, &i64);
      sink ^= (uint8_t) hone_gguf_get_f32 (g, key, &f);
      sink ^= (uint8_t) hone_gguf_get_bool (g, key, &b);
      s = hone_gguf_get_string (g, key, &len);
      if (s && len > 0)
        sink ^= (uint8_t) (s[0] ^ s[len - 1]);
      g_free (hone_gguf_dup_string (g, key));
      p = hone_gguf_get_array (g, key, &et, &n);
      if (p && n > 0 && et != HONE_GGUF_STRING && et != HONE_GGUF_ARRAY)
        sink ^= p[0];
      if (p && et == HONE_GGUF_STRING)
        for (guint64 k = 0; k < n && k < 64; k++)
          {
            s = hone_gguf_get_array_string (g, key, n - 1 - k, &len);
            if (len > 0)
              sink ^= (uint8_t) (s[0] ^ s[len - 1]);
          }
      sink ^= (uint8_t) hone_gguf_kv_array_type (g, i);
      sink ^= (uint8_t) hone_gguf_kv_array_length (g, i);
      sink ^= (uint8_t) (hone_gguf_find_kv (g, key) == (int) i);
    }
}

static void
touch_tensors (const HoneGguf *g)
{
  for (guint i = 0; i < hone_gguf_n_tensors (g); i++)
    {
      const HoneTensor *t = hone_gguf_tensor (g, i);
      const uint8_t *d = t->data;
      int64_t rows;

      sink ^= d[0] ^ d[t->nbytes - 1];
      sink ^= (uint8_t) (hone_gguf_find_tensor (g, t->name) == t);
      if (!hone_dtype_is_supported (t->type) || t->ne[0] > (1 << 20))
        continue;
      rows = hone_tensor_n_elements (t) / t->ne[0];
      {
        float *row = g_new (float, t->ne[0]);
        hone_dequantize_row (t->type, hone_tensor_row (t, 0), row, t->ne[0]);
        hone_dequantize_row (t->type, hone_tensor_row (t, rows - 1), row, t->ne[0]);
        sink ^= (uint8_t) (row[0] == row[t->ne[0] - 1]);
        g_free (row);
      }
    }
}

int LLVMFuzzerInitialize (int *argc, char ***argv);
/* A GLib critical or warning (a g_return_if_fail tripping, json-glib asserting
 * on a member of the wrong type) is a finding too: make it a crash libFuzzer sees. */
int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  g_log_set_always_fatal (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
  return 0;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  /* A heap copy of exactly the input, so ASan sees reads past its end. */
  GBytes *bytes = g_bytes_new (data, size);
  GError *error = NULL;
  HoneGguf *g = hone_gguf_open_bytes (bytes, &error);

  if (g != NULL)
    {
      g_assert (error == NULL);
      sink ^= (uint8_t) hone_gguf_version (g);
      sink ^= (uint8_t) hone_gguf_alignment (g);
      touch_kvs (g);
      touch_tensors (g);
      hone_gguf_unref (g);
    }
  else
    {
      /* Every failure is one GError of ours with a message. */
      g_assert (error != NULL && error->domain == HONE_ERROR && error->message[0] != '\0');
      g_error_free (error);
    }
  g_bytes_unref (bytes);
  return 0;
}
