/* fuzz-model.c — libFuzzer target: opening a whole model (hone_model_open)
 * from hostile files — what a user gets by downloading one: the GGUF path
 * (architecture and shapes from metadata, the tokenizer from the vocabulary
 * arrays, the chat template, every tensor checked against the shapes, llama
 * Q/K rows) and the Hugging Face folder path (config.json, model.safetensors,
 * tied embeddings, qwen2 biases, qwen3 q/k norms).
 *
 * The first byte picks the form: even, the rest is a GGUF file; odd, the rest
 * is config.json, a NUL, tokenizer_config.json (none when empty), a NUL, then
 * model.safetensors, in a folder that also holds a fixed small
 * tokenizer.json. The model card's reader (hone_model_info_new_for_path) reads
 * the same files first. It may not crash, leak, read outside the files
 * or warn (GLib criticals and warnings abort); a model it opens must keep the
 * promise of hone-model.h — every weight readable at its tensor's data, in
 * the shape the configuration says — so the first and last byte of each are
 * read (ASan sees a view outside its file). Seeds: tests/fuzz/corpus-model,
 * written by tests/fuzz/make-model-seeds.py. */
#include "hone-model.h"
#include "hone-json.h"
#include "hone-model-info.h"

#include <glib/gstdio.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static char *gguf_path, *hf_dir, *hf_config, *hf_weights, *hf_tok_config;
static gboolean verbose;

/* A byte-level BPE tokenizer.json of the 256 byte symbols and no merges. */
static char *
tokenizer_json (void)
{
  GString *s = g_string_new ("{\"version\": \"1.0\", \"added_tokens\": [], \"normalizer\": null, "
                             "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                             "\"trim_offsets\": true, \"use_regex\": true}, \"post_processor\": null, "
                             "\"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {");
  int n = 0;
  /* GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to U+0100 on */
  for (int b = 0; b < 256; b++)
    {
      const gboolean direct = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      gunichar c = direct ? (gunichar) b : 0x100 + (gunichar) n++;
      char u[8] = { 0 };
      g_unichar_to_utf8 (c, u);
      g_string_append_printf (s, "%s\"%s%s\": %d", b ? ", " : "", c == '"' || c == '\\' ? "\\" : "", u, b);
    }
  g_string_append (s, "}, \"merges\": []}}");
  return g_string_free (s, FALSE);
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  g_autofree char *root = g_dir_make_tmp ("hone-fuzz-model-XXXXXX", NULL);
  g_autofree char *tok = NULL, *tok_path = NULL;

  g_log_set_always_fatal (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
  verbose = g_getenv ("HONE_FUZZ_VERBOSE") != NULL;
  gguf_path = g_build_filename (root, "model.gguf", NULL);
  hf_dir = g_build_filename (root, "hf", NULL);
  g_assert (g_mkdir (hf_dir, 0700) == 0);
  hf_config = g_build_filename (hf_dir, "config.json", NULL);
  hf_weights = g_build_filename (hf_dir, "model.safetensors", NULL);
  hf_tok_config = g_build_filename (hf_dir, "tokenizer_config.json", NULL);
  tok = tokenizer_json ();
  tok_path = g_build_filename (hf_dir, "tokenizer.json", NULL);
  g_assert (g_file_set_contents (tok_path, tok, -1, NULL));
  return 0;
}

static volatile uint8_t sink;

/* Read the first and last byte of a tensor the model says is there. */
static void
touch (const HoneTensor *t)
{
  if (t->data == NULL || t->nbytes == 0)
    return;
  sink ^= ((const uint8_t *) t->data)[0] ^ ((const uint8_t *) t->data)[t->nbytes - 1];
}

/* A matrix of @in inputs and @out outputs, as hone-model.h promises: ne =
 * {in, out} and the bytes of that many rows of its type. */
static void
check_shape (const HoneTensor *t, int in, int out)
{
  g_assert (t->data != NULL);
  g_assert (t->ne[0] == in && t->ne[1] == out);
  g_assert (t->nbytes == hone_dtype_row_bytes (t->type, in) * (gsize) out);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr(GError) error = NULL;
  HoneModel *m;
  const char *path;

  if (size < 1)
    return 0;
  if ((data[0] & 1) == 0)
    {
      g_assert (g_file_set_contents (gguf_path, (const char *) data + 1, (gssize) size - 1, NULL));
      path = gguf_path;
    }
  else
    {
      /* the three parts: up to the first NUL, up to the second, the rest (missing ones empty) */
      const uint8_t *p = data + 1, *end = data + size, *part[3];
      size_t len[3];
      for (int i = 0; i < 3; i++)
        {
          const uint8_t *nul = i < 2 ? memchr (p, 0, (size_t) (end - p)) : NULL;
          part[i] = p;
          len[i] = (size_t) ((nul ? nul : end) - p);
          p = nul ? nul + 1 : end;
        }
      g_assert (g_file_set_contents (hf_config, (const char *) part[0], (gssize) len[0], NULL));
      if (len[1])
        g_assert (g_file_set_contents (hf_tok_config, (const char *) part[1], (gssize) len[1], NULL));
      else
        g_unlink (hf_tok_config);
      g_assert (g_file_set_contents (hf_weights, (const char *) part[2], (gssize) len[2], NULL));
      path = hf_dir;
    }
  {
    g_autoptr(GError) info_error = NULL;
    g_autoptr(HoneModelInfo) info = hone_model_info_new_for_path (path, &info_error);
    g_assert ((info != NULL) != (info_error != NULL));
    g_assert (info_error == NULL || g_utf8_validate (info_error->message, -1, NULL));
    if (info)
      {
        /* the card as `hone info` prints it, and its JSON (`hone info --json`) must read back as JSON */
        g_autofree char *text = hone_model_info_to_text (info, 0);
        g_autoptr(JsonNode) node = hone_model_info_to_json (info, 0);
        g_autofree char *json = json_to_string (node, FALSE);
        g_autoptr(JsonParser) parser = json_parser_new ();
        g_assert (g_utf8_validate (text, -1, NULL));
        g_assert (hone_json_load (parser, json, -1, 16, NULL));
      }
  }
  m = hone_model_open (path, &error);
  if (verbose)   /* for checking the seeds: run the target on them with HONE_FUZZ_VERBOSE=1 */
    fprintf (stderr, "fuzz-model: %s\n", m ? "opened" : error->message);
  if (m == NULL)
    {
      /* one clear error, which the app shows in a label: UTF-8 even when the file is not */
      g_assert (error != NULL && error->message != NULL && *error->message);
      g_assert (g_utf8_validate (error->message, -1, NULL));
      return 0;
    }
  g_assert (error == NULL);
  {
    const HoneModelConfig *c = &m->config;
    g_assert (m->tokenizer != NULL);
    g_assert (c->n_layers > 0 && c->hidden > 0 && c->n_heads > 0 && c->n_kv_heads > 0 && c->vocab > 0);
    touch (&m->tok_embd);
    touch (&m->output_norm);
    touch (&m->output);
    touch (&m->rope_freqs);
    check_shape (&m->tok_embd, c->hidden, c->vocab);
    check_shape (&m->output, c->hidden, c->vocab);
    for (int l = 0; l < c->n_layers; l++)
      {
        const HoneLayerWeights *w = &m->layers[l];
        const int q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
        const HoneTensor *all[] = { &w->attn_norm, &w->wq, &w->wk, &w->wv, &w->wo, &w->bq, &w->bk, &w->bv,
                                    &w->q_norm, &w->k_norm, &w->ffn_norm, &w->w_gate, &w->w_up, &w->w_down };
        check_shape (&w->wq, c->hidden, q);
        check_shape (&w->wk, c->hidden, kv);
        check_shape (&w->wv, c->hidden, kv);
        check_shape (&w->wo, q, c->hidden);
        check_shape (&w->w_gate, c->hidden, c->ffn);
        check_shape (&w->w_up, c->hidden, c->ffn);
        check_shape (&w->w_down, c->ffn, c->hidden);
        for (gsize i = 0; i < G_N_ELEMENTS (all); i++)
          touch (all[i]);
      }
    sink ^= (uint8_t) hone_model_n_params (m);
    if (m->chat_template)
      g_assert (g_utf8_validate (m->chat_template, -1, NULL));
    g_assert (m->name != NULL && g_utf8_validate (m->name, -1, NULL));
  }
  hone_model_unref (m);
  return 0;
}
