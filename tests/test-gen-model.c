/* test-gen-model.c — `hone gen-model`, run as a subprocess.
 *
 * Usage: test-gen-model HONE_BINARY
 *
 * Generates a one-layer Qwen3-0.6B-shaped Q4_0 model into a temporary folder
 * and opens it with hone_model_open. The expected shapes are Qwen3-0.6B's
 * published config.json (huggingface.co/Qwen/Qwen3-0.6B: hidden_size 1024,
 * num_attention_heads 16, num_key_value_heads 8, head_dim 128,
 * intermediate_size 3072, vocab_size 151936, max_position_embeddings 40960,
 * rope_theta 1000000, rms_norm_eps 1e-6, tie_word_embeddings true), not
 * anything the generator computed. The weights are checked for their
 * statistics (uniform, std 0.02, not zeros, different per tensor) after
 * dequantization by the library's independent Q4_0 reader.
 */
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "hone.h"

static const char *hone_bin;
static char *tmp_dir;

static int
run_gen (const char *const *args, char **err_out)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GSubprocess) p = NULL;
  g_autofree char *err = NULL;
  GError *error = NULL;

  g_ptr_array_add (argv, (gpointer) hone_bin);
  g_ptr_array_add (argv, (gpointer) "gen-model");
  for (; *args; args++)
    g_ptr_array_add (argv, (gpointer) *args);
  g_ptr_array_add (argv, NULL);
  p = g_subprocess_newv ((const char *const *) argv->pdata,
                         G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_PIPE, &error);
  g_assert_no_error (error);
  g_subprocess_communicate_utf8 (p, NULL, NULL, NULL, &err, &error);
  g_assert_no_error (error);
  if (err_out)
    *err_out = g_steal_pointer (&err);
  return g_subprocess_get_if_exited (p) ? g_subprocess_get_exit_status (p) : -1;
}

/* Mean and standard deviation of a dequantized weight matrix's first rows. */
static void
row_stats (const HoneTensor *t, int rows, double *mean, double *sd, double *max_abs)
{
  gsize rb = hone_dtype_row_bytes (t->type, t->ne[0]);
  g_autofree float *row = g_new (float, t->ne[0]);
  double s = 0, s2 = 0, m = 0;
  gint64 n = 0;

  for (int r = 0; r < rows; r++)
    {
      hone_dequantize_row (t->type, (const guint8 *) t->data + (gsize) r * rb, row, t->ne[0]);
      for (int64_t i = 0; i < t->ne[0]; i++, n++)
        {
          s += row[i];
          s2 += (double) row[i] * row[i];
          m = MAX (m, fabs (row[i]));
        }
    }
  *mean = s / n;
  *sd = sqrt (s2 / n - *mean * *mean);
  *max_abs = m;
}

static void
test_qwen3_q4_0 (void)
{
  g_autofree char *path = g_build_filename (tmp_dir, "qwen3.gguf", NULL);
  const char *args[] = { "--shape", "qwen3-0.6b", "--type", "q4_0", "--layers", "1", "-t", "2", "-o", path, NULL };
  g_autofree char *err = NULL;
  g_autoptr (HoneModel) m = NULL;
  g_autoptr (GDir) dir = NULL;
  GError *error = NULL;
  const HoneModelConfig *c;
  double mean, sd, max_abs, mean2, sd2, max2;

  g_assert_cmpint (run_gen (args, &err), ==, 0);
  g_assert_cmpstr (err, ==, "");
  /* Written atomically: no temporary file left beside it. */
  dir = g_dir_open (tmp_dir, 0, NULL);
  g_assert_cmpstr (g_dir_read_name (dir), ==, "qwen3.gguf");
  g_assert_null (g_dir_read_name (dir));

  m = hone_model_open (path, &error);
  g_assert_no_error (error);
  c = &m->config;
  g_assert_cmpint (c->arch, ==, HONE_ARCH_QWEN3);
  g_assert_cmpint (c->n_layers, ==, 1);
  g_assert_cmpint (c->hidden, ==, 1024);
  g_assert_cmpint (c->n_heads, ==, 16);
  g_assert_cmpint (c->n_kv_heads, ==, 8);
  g_assert_cmpint (c->head_dim, ==, 128);
  g_assert_cmpint (c->ffn, ==, 3072);
  g_assert_cmpint (c->vocab, ==, 151936);
  g_assert_cmpint (c->max_context, ==, 40960);
  g_assert_cmpfloat (c->rope_theta, ==, 1000000.0f);
  g_assert_cmpfloat (c->rms_eps, ==, 1e-6f);
  g_assert_true (c->tied_embeddings);
  g_assert_true (c->qk_norm);
  g_assert_false (c->qkv_bias);
  g_assert_cmpint (m->tok_embd.type, ==, HONE_DTYPE_Q4_0);
  g_assert_cmpint (m->layers[0].wq.type, ==, HONE_DTYPE_Q4_0);
  g_assert_cmpint (m->layers[0].wq.ne[1], ==, 2048);
  g_assert_cmpint (m->layers[0].w_down.ne[0], ==, 3072);
  g_assert_cmpint (m->layers[0].attn_norm.type, ==, HONE_DTYPE_F32);
  g_assert_cmpint (m->layers[0].q_norm.ne[0], ==, 128);
  g_assert_cmpint (hone_tokenizer_n_vocab (m->tokenizer), ==, 151936);

  /* Uniform on ±0.0346: std 0.02, mean 0 (Q4_0 rounding adds ~1e-3). */
  row_stats (&m->layers[0].w_gate, 64, &mean, &sd, &max_abs);
  g_assert_cmpfloat (fabs (mean), <, 1e-3);
  g_assert_cmpfloat (sd, >, 0.018);
  g_assert_cmpfloat (sd, <, 0.022);
  g_assert_cmpfloat (max_abs, <, 0.04);
  row_stats (&m->layers[0].w_up, 64, &mean2, &sd2, &max2);
  g_assert_cmpfloat (sd2, >, 0.018);
  /* Different streams per tensor: gate and up must not be the same bytes. */
  g_assert_true (memcmp (m->layers[0].w_gate.data, m->layers[0].w_up.data,
                         hone_dtype_row_bytes (HONE_DTYPE_Q4_0, 1024) * 64) != 0);
  /* Norm weights near 1. */
  {
    const float *nw = m->layers[0].attn_norm.data;
    for (int i = 0; i < 1024; i++)
      g_assert_cmpfloat (fabs (nw[i] - 1.0f), <, 0.035);
  }
  /* The byte-level tokenizer round-trips text. */
  {
    g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint32));
    g_autofree char *back = NULL;
    gsize len = 0;
    g_assert_true (hone_tokenizer_encode (m->tokenizer, "Hello, world!", -1, 0, ids, &error));
    g_assert_no_error (error);
    g_assert_cmpuint (ids->len, ==, 13);    /* no merges: one token a byte */
    back = hone_tokenizer_decode (m->tokenizer, (const gint32 *) (void *) ids->data, ids->len, FALSE, &len);
    g_assert_cmpstr (back, ==, "Hello, world!");
  }
  g_clear_pointer (&m, hone_model_unref);
  g_assert_cmpint (g_unlink (path), ==, 0);
}

/* --type q4_k_m: llama.cpp's Q4_K_M layout. With 4 layers its use_more_bits rule
 * (i < n/8 || i >= 7n/8 || (i − n/8) % 3 == 2) picks layers 2 and 3 for Q6_K
 * attn_v and ffn_down; everything else that is a matrix is Q4_K (Qwen3 ties
 * the output to the embeddings, so there is no Q6_K output matrix). */
static void
test_qwen3_q4_k_m (void)
{
  g_autofree char *path = g_build_filename (tmp_dir, "qwen3-km.gguf", NULL);
  const char *args[] = { "--shape", "qwen3-0.6b", "--type", "q4_k_m", "--layers", "4", "-t", "2", "-o", path, NULL };
  g_autofree char *err = NULL;
  g_autoptr (HoneModel) m = NULL;
  GError *error = NULL;
  double mean, sd, max_abs;

  g_assert_cmpint (run_gen (args, &err), ==, 0);
  g_assert_cmpstr (err, ==, "");
  m = hone_model_open (path, &error);
  g_assert_no_error (error);
  g_assert_cmpint (m->config.n_layers, ==, 4);
  g_assert_cmpint (m->tok_embd.type, ==, HONE_DTYPE_Q4_K);
  for (int i = 0; i < 4; i++)
    {
      const HoneDType wide = i >= 2 ? HONE_DTYPE_Q6_K : HONE_DTYPE_Q4_K;
      g_assert_cmpint (m->layers[i].wq.type, ==, HONE_DTYPE_Q4_K);
      g_assert_cmpint (m->layers[i].wk.type, ==, HONE_DTYPE_Q4_K);
      g_assert_cmpint (m->layers[i].wv.type, ==, wide);
      g_assert_cmpint (m->layers[i].wo.type, ==, HONE_DTYPE_Q4_K);
      g_assert_cmpint (m->layers[i].w_gate.type, ==, HONE_DTYPE_Q4_K);
      g_assert_cmpint (m->layers[i].w_up.type, ==, HONE_DTYPE_Q4_K);
      g_assert_cmpint (m->layers[i].w_down.type, ==, wide);
    }
  /* the values survive both types (the library's own K-quant readers) */
  row_stats (&m->layers[0].w_down, 16, &mean, &sd, &max_abs);
  g_assert_cmpfloat (fabs (mean), <, 1e-3);
  g_assert_cmpfloat (sd, >, 0.018);
  g_assert_cmpfloat (sd, <, 0.022);
  row_stats (&m->layers[3].w_down, 16, &mean, &sd, &max_abs);
  g_assert_cmpfloat (fabs (mean), <, 1e-3);
  g_assert_cmpfloat (sd, >, 0.019);
  g_assert_cmpfloat (sd, <, 0.021);
  g_assert_cmpfloat (max_abs, <, 0.036);
  g_clear_pointer (&m, hone_model_unref);
  g_assert_cmpint (g_unlink (path), ==, 0);
}

static void
test_bad_args (void)
{
  g_autofree char *path = g_build_filename (tmp_dir, "bad.gguf", NULL);
  const char *bad_shape[] = { "--shape", "gpt5", "-o", path, NULL };
  const char *bad_type[] = { "--shape", "qwen3-0.6b", "--type", "q3_k", "-o", path, NULL };
  const char *bad_layers[] = { "--shape", "qwen3-0.6b", "--layers", "29", "-o", path, NULL };
  const char *no_out[] = { "--shape", "qwen3-0.6b", NULL };
  const char *const *cases[] = { bad_shape, bad_type, bad_layers, no_out };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *err = NULL;
      g_assert_cmpint (run_gen (cases[i], &err), ==, 1);
      g_assert_true (g_str_has_prefix (err, "hone: "));
      g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
    }
}

int
main (int argc, char **argv)
{
  int rc;

  g_test_init (&argc, &argv, NULL);
  if (argc < 2)
    {
      g_printerr ("usage: test-gen-model HONE_BINARY\n");
      return 2;
    }
  hone_bin = argv[1];
  tmp_dir = g_dir_make_tmp ("hone-gen-model-XXXXXX", NULL);
  g_assert_nonnull (tmp_dir);
  g_test_add_func ("/gen-model/qwen3-0.6b-q4_0", test_qwen3_q4_0);
  g_test_add_func ("/gen-model/qwen3-0.6b-q4_k_m", test_qwen3_q4_k_m);
  g_test_add_func ("/gen-model/bad-args", test_bad_args);
  rc = g_test_run ();
  g_rmdir (tmp_dir);
  g_free (tmp_dir);
  return rc;
}
