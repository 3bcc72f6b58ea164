/* fuzz-safetensors.c — libFuzzer target: safetensors header parser and
 * config.json parser over arbitrary bytes. Neither may crash, leak or read
 * outside the buffer; every tensor view it accepts must lie inside it. */
#include "hone-safetensors.h"
#include "hone-model.h"

#include <string.h>

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
  GBytes *bytes = g_bytes_new (data, size);
  HoneSafetensors *st = hone_safetensors_open_bytes (bytes, NULL);
  HoneModelConfig config;

  if (st != NULL)
    {
      volatile guint8 sink = 0;
      for (guint i = 0; i < hone_safetensors_n_tensors (st); i++)
        {
          const HoneTensor *t = hone_safetensors_tensor (st, i);
          if (t->nbytes > 0)
            sink ^= ((const guint8 *) t->data)[0] ^ ((const guint8 *) t->data)[t->nbytes - 1];
          (void) hone_safetensors_find_tensor (st, t->name);
          (void) hone_safetensors_tensor_dtype_name (st, i);
        }
      (void) hone_safetensors_get_metadata (st, "format");
      (void) sink;
      hone_safetensors_unref (st);
    }
  g_bytes_unref (bytes);

  (void) hone_model_config_from_json (&config, (const char *) data, (gssize) size, NULL);
  return 0;
}
