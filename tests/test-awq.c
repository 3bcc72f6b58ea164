/* test-awq.c — AWQ int4: quantizer, packing, exports, cancellation, documents.
 *
 * References are independent of the code under test: the quantizer is
 * checked against values worked out by hand from AutoAWQ's formulas, the
 * AutoAWQ folder is read back with hone-safetensors and dequantized here by
 * AutoAWQ's rules (unpack with the order map, (q − z)·s), the GGUF with
 * hone-dtype's Q4_1 dequantizer (checked against libggml in test-dtype).
 * With --model: a short calibration of the default model must not be worse
 * than round-to-nearest on held-out text.
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "hone-awq.h"
#include "hone-awq-data.h"
#include "hone-awq-export.h"
#include "hone-dtype.h"
#include "hone-error.h"
#include "hone-gguf.h"
#include "hone-model.h"
#include "hone-quant-eval.h"
#include "hone-safetensors.h"
#include "hone-tokenizer.h"
#include "hone-test-models.h"
#include "hone-test-data.h"

/* ---- quantizer -------------------------------------------------------- */

static void
test_quantizer_known (void)
{
  float w[32];
  guint8 q[32], z;
  guint16 s;

  /* min −0.5, max 1.0: range 1.5, s = 0.1 → 7 significant bits: 102/1024. */
  for (int i = 0; i < 32; i++)
    w[i] = -0.5f + 1.5f * (float) i / 31.0f;
  hone_awq_quantize_group (w, 32, 0.0f, q, &z, &s);
  g_assert_cmpfloat (hone_f16_to_f32 (s), ==, 102.0f / 1024.0f);
  g_assert_cmpint (z, ==, 5);              /* −round(−0.5 / 0.0996) = 5 */
  g_assert_cmpint (q[0], ==, 0);           /* round(−5.02) + 5 */
  g_assert_cmpint (q[31], ==, 15);         /* round(10.04) + 5 */
  for (int i = 0; i < 32; i++)
    {
      double sd = 102.0 / 1024.0;
      double t = nearbyint ((double) w[i] / sd) + 5;
      g_assert_cmpint (q[i], ==, (int) CLAMP (t, 0, 15));
    }

  /* Clipping at 0.25: range 0.5 → s = 0.5/15 = 0.0333 → 68/2048. */
  hone_awq_quantize_group (w, 32, 0.25f, q, &z, &s);
  g_assert_cmpfloat (hone_f16_to_f32 (s), ==, 68.0f / 2048.0f);
  g_assert_cmpint (z, ==, 8);              /* −round(−0.25 / 0.0332) = round(7.53) = 8 */
  g_assert_cmpint (q[0], ==, 0);
  g_assert_cmpint (q[31], ==, 15);

  /* All positive: z clamps to 0. Constant group: range clamps to 1e-5, s to 2^-14. */
  for (int i = 0; i < 32; i++)
    w[i] = 2.0f + i;
  hone_awq_quantize_group (w, 32, 0.0f, q, &z, &s);
  g_assert_cmpint (z, ==, 0);
  for (int i = 0; i < 32; i++)
    w[i] = 0.0f;
  hone_awq_quantize_group (w, 32, 0.0f, q, &z, &s);
  g_assert_cmpfloat (hone_f16_to_f32 (s), ==, 0x1p-14f);
  g_assert_cmpint (z, ==, 0);
  g_assert_cmpint (q[3], ==, 0);

  /* NaN and inf never escape. */
  w[3] = NAN;
  w[5] = INFINITY;
  hone_awq_quantize_group (w, 32, 0.0f, q, &z, &s);
  g_assert_true (isfinite (hone_f16_to_f32 (s)));
  for (int i = 0; i < 32; i++)
    g_assert_cmpint (q[i], <=, 15);
}

static void
test_scale_exact (void)
{
  /* Every rounded scale s makes −z·s an exact fp16 (Q4_1's m), z = 0..15. */
  GRand *r = g_rand_new_with_seed (7);
  for (int i = 0; i < 20000; i++)
    {
      float s = (float) exp (g_rand_double_range (r, log (1e-7), log (1e4)));
      float sf = hone_f16_to_f32 (hone_awq_round_scale (s));
      g_assert_true (sf >= 0x1p-14f);
      if (s >= 0x1p-14f && s <= 4096.0f)
        g_assert_cmpfloat (fabsf (sf - s) / s, <=, 1.0f / 128.0f);
      for (int z = 0; z <= 15; z++)
        {
          float m = -(float) z * sf;
          g_assert_cmpfloat (hone_f16_to_f32 (hone_f32_to_f16 (m)), ==, m);
        }
    }
  g_rand_free (r);
}

static void
test_pack_order (void)
{
  guint8 v[16], back[16];
  guint32 w[2];

  for (int i = 0; i < 16; i++)
    v[i] = (guint8) (i & 15);
  hone_awq_pack_row (v, 16, w);
  /* nibble i holds column order[i] = 0,2,4,6,1,3,5,7. */
  g_assert_cmphex (w[0], ==, 0x75316420u);
  g_assert_cmphex (w[1], ==, 0xFDB9ECA8u);
  hone_awq_unpack_row (w, 16, back);
  g_assert_cmpmem (v, 16, back, 16);
}

/* A result's q holds two values a byte, the even column low; the accessor,
 * the row unpacking and the dequantization read it back. */
static void
test_q_nibbles (void)
{
  enum { N = 3, K = 64, G = 32 };
  guint8 v[N * K], packed[N * K / 2], row[K], z[N * K / G] = { 3, 0, 15, 7, 1, 9 };
  guint16 sc[N * K / G];
  float out[K];
  HoneAwqLinear lin = { K, N, G, packed, z, sc };

  for (int i = 0; i < N * K; i++)
    v[i] = (guint8) ((i * 7 + i / 5) & 15);
  for (int i = 0; i < N * K / G; i++)
    sc[i] = hone_f32_to_f16 (0.25f * (float) (i + 1));
  hone_awq_pack_nibbles (v, N * K, packed);
  g_assert_cmphex (packed[0], ==, (guint) (v[0] | v[1] << 4));
  g_assert_cmpuint (hone_awq_linear_q_bytes (&lin), ==, sizeof packed);
  for (int r = 0; r < N; r++)
    {
      hone_awq_linear_q_row (&lin, r, row);
      g_assert_cmpmem (row, K, v + r * K, K);
      hone_awq_linear_dequantize_row (&lin, r, out);
      for (int k = 0; k < K; k++)
        {
          g_assert_cmpint (hone_awq_linear_q (&lin, r, k), ==, v[r * K + k]);
          g_assert_cmpfloat (out[k], ==, (float) (v[r * K + k] - z[r * 2 + k / G]) * 0.25f * (float) (r * 2 + k / G + 1));
        }
    }
}

/* ---- a tiny model and a calibration ----------------------------------- */

typedef struct {
  char *dir;
  char *gguf;
  HoneModel *model;
  gint32 *tokens;
  int n_samples, seq_len;
} Fixture;

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  HoneTestModelSpec spec;
  GError *error = NULL;
  GRand *r = g_rand_new_with_seed (11);

  hone_test_model_spec_init (&spec, HONE_ARCH_LLAMA, HONE_DTYPE_Q8_0);
  spec.n_heads = 4;
  spec.n_kv_heads = data ? 4 : 2;       /* data: MHA, so v→o runs */
  f->dir = g_dir_make_tmp ("hone-awq-XXXXXX", &error);
  g_assert_no_error (error);
  f->gguf = hone_test_model_write_gguf (f->dir, &spec, &error);
  g_assert_no_error (error);
  f->model = hone_model_open (f->gguf, &error);
  g_assert_no_error (error);
  f->n_samples = 3;
  f->seq_len = 24;
  f->tokens = g_new (gint32, f->n_samples * f->seq_len);
  for (int i = 0; i < f->n_samples * f->seq_len; i++)
    f->tokens[i] = 3 + g_rand_int_range (r, 0, 256);
  g_rand_free (r);
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  hone_model_unref (f->model);
  hone_test_rm_rf (f->dir);
  g_free (f->dir);
  g_free (f->gguf);
  g_free (f->tokens);
}

static HoneAwqResult *
calibrate (Fixture *f, int group_size, GError **error)
{
  HoneAwqOptions o;
  hone_awq_options_init (&o);
  o.group_size = group_size;
  o.n_threads = 2;
  o.clip_tokens = 40;
  return hone_awq_quantize (f->model, f->tokens, f->n_samples, f->seq_len, &o, NULL, NULL, NULL, error);
}

static const char *const hf_names[HONE_AWQ_N_LINEARS] = {
  "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
  "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj" };

/* The export made again with the writers' pieces cut to at most @piece bytes
 * (whole rows: for the default model one or a few rows a piece, so every
 * fill's row ranges are used) is byte for byte the export @path; its
 * progress rises to 1. */
static void
assert_same_in_pieces (HoneAwqResult *r, const char *path, gboolean gguf, gsize piece)
{
  GError *error = NULL;
  g_autofree char *again = g_strconcat (path, "-pieces", NULL);
  g_autofree char *a = NULL, *b = NULL, *fa = NULL, *fb = NULL;
  gsize na, nb;
  HoneTestProgress pr = { 0 };

  r->export_piece = piece;
  if (gguf)
    g_assert_true (hone_awq_export_gguf (r, again, NULL, hone_test_progress, &pr, &error));
  else
    g_assert_true (hone_awq_export_safetensors (r, again, NULL, hone_test_progress, &pr, &error));
  g_assert_no_error (error);
  r->export_piece = 0;
  /* the progress: after every tensor and piece (more than there are tensors), ending at 1 */
  g_assert_cmpint (pr.calls, >, 7 * r->model->config.n_layers);
  g_assert_cmpfloat (pr.last, ==, 1.0);
  fa = gguf ? g_strdup (path) : g_build_filename (path, "model.safetensors", NULL);
  fb = gguf ? g_strdup (again) : g_build_filename (again, "model.safetensors", NULL);
  g_assert_true (g_file_get_contents (fa, &a, &na, NULL));
  g_assert_true (g_file_get_contents (fb, &b, &nb, NULL));
  g_assert_cmpmem (a, na, b, nb);
  if (!gguf)
    {
      g_autofree char *cfg = g_build_filename (again, "config.json", NULL);
      g_autofree char *tj = g_build_filename (again, "tokenizer.json", NULL);
      g_autofree char *tc = g_build_filename (again, "tokenizer_config.json", NULL);
      g_unlink (cfg);
      g_unlink (tj);
      g_unlink (tc);
    }
  g_unlink (fb);
  if (!gguf)
    g_rmdir (again);
}

static void
test_export_safetensors (Fixture *f, gconstpointer data)
{
  static const int order[8] = { 0, 2, 4, 6, 1, 3, 5, 7 };
  GError *error = NULL;
  g_autoptr(HoneAwqResult) r = calibrate (f, 64, &error);
  g_autofree char *out = g_build_filename (f->dir, "awq", NULL);
  g_autofree char *cfg_path = g_build_filename (out, "config.json", NULL);
  g_autofree char *cfg = NULL;
  g_autoptr(HoneSafetensors) st = NULL;
  g_autoptr(HoneTokenizer) tok = NULL;
  const HoneModelConfig *c = &f->model->config;

  g_assert_no_error (error);
  g_assert_true (hone_awq_export_safetensors (r, out, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  st = hone_safetensors_open (out, &error);
  g_assert_no_error (error);

  for (int l = 0; l < c->n_layers; l++)
    for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
      {
        const HoneAwqLinear *lin = &r->layers[l].lin[i];
        g_autofree char *nq = g_strdup_printf ("model.layers.%d.%s.qweight", l, hf_names[i]);
        g_autofree char *nz = g_strdup_printf ("model.layers.%d.%s.qzeros", l, hf_names[i]);
        g_autofree char *ns = g_strdup_printf ("model.layers.%d.%s.scales", l, hf_names[i]);
        const HoneTensor *tq = hone_safetensors_find_tensor (st, nq);
        const HoneTensor *tz = hone_safetensors_find_tensor (st, nz);
        const HoneTensor *ts = hone_safetensors_find_tensor (st, ns);
        int K = lin->K, N = lin->N, g = lin->group_size;
        int heads = i == HONE_AWQ_WQ ? c->n_heads : c->n_kv_heads;
        g_autofree float *mine = g_new (float, (gsize) N * K);
        g_autofree float *mine_hf = g_new (float, (gsize) N * K);

        g_assert_nonnull (tq);
        g_assert_nonnull (tz);
        g_assert_nonnull (ts);
        g_assert_cmpint (tq->type, ==, HONE_DTYPE_I32);
        g_assert_cmpint (tq->ne[0], ==, N / 8);
        g_assert_cmpint (tq->ne[1], ==, K);
        g_assert_cmpint (tz->ne[0], ==, N / 8);
        g_assert_cmpint (tz->ne[1], ==, K / g);
        g_assert_cmpint (ts->type, ==, HONE_DTYPE_F16);
        g_assert_cmpint (ts->ne[0], ==, N);
        g_assert_cmpint (ts->ne[1], ==, K / g);
        for (int n = 0; n < N; n++)
          hone_awq_linear_dequantize_row (lin, n, mine + (gsize) n * K);
        if (i == HONE_AWQ_WQ || i == HONE_AWQ_WK)    /* GGUF row order → HF */
          hone_model_permute_qk_rows (mine_hf, mine, heads, c->head_dim, K * sizeof (float), FALSE);
        else
          memcpy (mine_hf, mine, (gsize) N * K * sizeof (float));
        /* AutoAWQ's rules, written out here. */
        for (int k = 0; k < K; k++)
          for (int n = 0; n < N; n++)
            {
              guint32 wq, wz;
              guint16 sh;
              int nib = -1, qv, zv;
              for (int j = 0; j < 8; j++)
                if (order[j] == n % 8)
                  nib = j;
              memcpy (&wq, (const guint8 *) tq->data + ((gsize) k * (N / 8) + n / 8) * 4, 4);
              memcpy (&wz, (const guint8 *) tz->data + ((gsize) (k / g) * (N / 8) + n / 8) * 4, 4);
              memcpy (&sh, (const guint8 *) ts->data + ((gsize) (k / g) * N + n) * 2, 2);
              qv = (wq >> (4 * nib)) & 15;
              zv = (wz >> (4 * nib)) & 15;
              g_assert_cmpfloat ((float) (qv - zv) * hone_f16_to_f32 (sh), ==, mine_hf[(gsize) n * K + k]);
            }
      }
  g_assert_nonnull (hone_safetensors_find_tensor (st, "lm_head.weight"));
  g_assert_nonnull (hone_safetensors_find_tensor (st, "model.embed_tokens.weight"));
  g_assert_true (g_file_get_contents (cfg_path, &cfg, NULL, NULL));
  g_assert_nonnull (strstr (cfg, "\"quant_method\" : \"awq\""));
  g_assert_nonnull (strstr (cfg, "\"group_size\" : 64"));
  g_assert_nonnull (strstr (cfg, "\"version\" : \"gemm\""));

  /* The rebuilt tokenizer.json tokenizes as the GGUF's tokenizer does. */
  tok = hone_tokenizer_new_from_hf_dir (out, &error);
  g_assert_no_error (error);
  {
    const char *text = "Hello world, 12345 tokens!\n  <|im_start|>user\nqq zz's";
    g_autoptr(GArray) a = g_array_new (FALSE, FALSE, sizeof (gint32));
    g_autoptr(GArray) b = g_array_new (FALSE, FALSE, sizeof (gint32));
    g_assert_true (hone_tokenizer_encode (f->model->tokenizer, text, -1, HONE_ENCODE_PARSE_SPECIAL, a, NULL));
    g_assert_true (hone_tokenizer_encode (tok, text, -1, HONE_ENCODE_PARSE_SPECIAL, b, NULL));
    g_assert_cmpmem (a->data, a->len * 4, b->data, b->len * 4);
  }
  /* Quantizing the result again is refused with a clear error. */
  g_assert_true (hone_awq_path_is_quantized (out, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED);
  g_clear_error (&error);
  g_assert_false (hone_awq_path_is_quantized (f->gguf, &error));
  g_assert_no_error (error);
  /* A config.json whose quantization_config has members of the wrong types is not taken for AWQ, and
   * raises no warning (json-glib's own getter did: fatal here) */
  {
    static const char *const configs[] = { "{\"quantization_config\": {\"quant_method\": {}}}",
                                            "{\"quantization_config\": {\"quant_method\": 4}}",
                                            "{\"quantization_config\": [\"awq\"]}" };
    g_autofree char *dir = g_dir_make_tmp ("hone-awq-cfg-XXXXXX", NULL);
    g_autofree char *qcfg = g_build_filename (dir, "config.json", NULL);
    for (gsize i = 0; i < G_N_ELEMENTS (configs); i++)
      {
        g_assert_true (g_file_set_contents (qcfg, configs[i], -1, NULL));
        g_assert_false (hone_awq_path_is_quantized (dir, &error));
        g_assert_no_error (error);
      }
    g_unlink (qcfg);
    g_rmdir (dir);
  }
  /* And Hone loads the folder: every linear as Q4Z holding exactly the
   * result's values (Q/K rows in HF order, as exported). */
  {
    g_autoptr(HoneModel) m = hone_model_open (out, &error);
    g_assert_no_error (error);
    g_assert_cmpint (m->awq_group_size, ==, 64);
    for (int l = 0; l < c->n_layers; l++)
      for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
        {
          const HoneLayerWeights *L = &m->layers[l];
          const HoneTensor *ts[HONE_AWQ_N_LINEARS] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up,
                                                       &L->w_down };
          const HoneAwqLinear *lin = &r->layers[l].lin[i];
          int K = lin->K, N = lin->N;
          int heads = i == HONE_AWQ_WQ ? c->n_heads : c->n_kv_heads;
          g_autofree float *mine = g_new (float, (gsize) N * K);
          g_autofree float *mine_hf = g_new (float, (gsize) N * K);
          g_autofree float *loaded = g_new (float, (gsize) N * K);

          g_assert_cmpint (ts[i]->type, ==, HONE_DTYPE_Q4Z);
          for (int n = 0; n < N; n++)
            {
              hone_awq_linear_dequantize_row (lin, n, mine + (gsize) n * K);
              hone_dequantize_row (HONE_DTYPE_Q4Z, hone_tensor_row (ts[i], n), loaded + (gsize) n * K, K);
            }
          if (i == HONE_AWQ_WQ || i == HONE_AWQ_WK)
            hone_model_permute_qk_rows (mine_hf, mine, heads, c->head_dim, K * sizeof (float), FALSE);
          else
            memcpy (mine_hf, mine, (gsize) N * K * sizeof (float));
          g_assert_cmpmem (loaded, (gsize) N * K * sizeof (float), mine_hf, (gsize) N * K * sizeof (float));
        }
  }
  assert_same_in_pieces (r, out, FALSE, 1000);
}

static void
test_export_gguf (Fixture *f, gconstpointer data)
{
  GError *error = NULL;
  g_autoptr(HoneAwqResult) r = calibrate (f, 32, &error);
  g_autofree char *out = g_build_filename (f->dir, "awq.gguf", NULL);
  g_autoptr(HoneGguf) g = NULL;
  g_autoptr(HoneModel) m = NULL;
  const HoneModelConfig *c = &f->model->config;
  static const char *const what[HONE_AWQ_N_LINEARS] = { "wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down" };

  g_assert_no_error (error);
  g_assert_true (hone_awq_export_gguf (r, out, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  g = hone_gguf_open (out, &error);
  g_assert_no_error (error);
  for (int l = 0; l < c->n_layers; l++)
    {
      g_autofree char *nn = hone_model_tensor_name (HONE_MODEL_SOURCE_GGUF, "attn_norm", l);
      const HoneTensor *tn = hone_gguf_find_tensor (g, nn);
      g_assert_cmpint (tn->type, ==, HONE_DTYPE_F32);
      g_assert_cmpmem (tn->data, tn->nbytes, r->layers[l].attn_norm, c->hidden * sizeof (float));
      for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
        {
          const HoneAwqLinear *lin = &r->layers[l].lin[i];
          g_autofree char *name = hone_model_tensor_name (HONE_MODEL_SOURCE_GGUF, what[i], l);
          const HoneTensor *t = hone_gguf_find_tensor (g, name);
          g_autofree float *a = g_new (float, lin->K);
          g_autofree float *b = g_new (float, lin->K);
          g_assert_nonnull (t);
          g_assert_cmpint (t->type, ==, HONE_DTYPE_Q4_1);
          for (int n = 0; n < lin->N; n++)
            {
              hone_dequantize_row (HONE_DTYPE_Q4_1, hone_tensor_row (t, n), a, lin->K);
              hone_awq_linear_dequantize_row (lin, n, b);
              g_assert_cmpmem (a, lin->K * sizeof (float), b, lin->K * sizeof (float));
            }
        }
    }
  /* It runs as a model, and quantizing it again is refused. */
  g_assert_true (hone_awq_path_is_quantized (out, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED);
  g_clear_error (&error);
  m = hone_model_open (out, &error);
  g_assert_no_error (error);
  {
    HoneAwqOptions o;
    hone_awq_options_init (&o);
    o.group_size = 32;
    g_assert_false (hone_awq_check (m, &o, &error));
    g_assert_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED);
    g_clear_error (&error);
  }
  assert_same_in_pieces (r, out, TRUE, 1000);
}

static void
test_bad_options (Fixture *f, gconstpointer data)
{
  HoneAwqOptions o;
  GError *error = NULL;

  hone_awq_options_init (&o);
  o.group_size = 48;
  g_assert_false (hone_awq_check (f->model, &o, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  o.group_size = 64;
  o.bits = 3;
  g_assert_false (hone_awq_check (f->model, &o, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  o.bits = 4;
  g_assert_true (hone_awq_check (f->model, &o, &error));
  g_assert_no_error (error);
}

static gboolean
dir_is_empty_but (const char *dir, const char *keep)
{
  GDir *d = g_dir_open (dir, 0, NULL);
  const char *name;
  gboolean empty = TRUE;
  while ((name = g_dir_read_name (d)) != NULL)
    if (g_strcmp0 (name, keep) != 0)
      {
        g_test_message ("left behind: %s", name);
        empty = FALSE;
      }
  g_dir_close (d);
  return empty;
}

static void
cancel_after_first_layer (int layer, int n_layers, double elapsed, double eta, gpointer data)
{
  g_cancellable_cancel (data);
}

static void
test_cancel (Fixture *f, gconstpointer data)
{
  GError *error = NULL;
  g_autoptr(GCancellable) c = g_cancellable_new ();
  g_autoptr(GCancellable) pre = g_cancellable_new ();
  g_autoptr(HoneAwqResult) r = NULL;
  g_autofree char *out_dir = g_dir_make_tmp ("hone-awq-out-XXXXXX", NULL);
  g_autofree char *awq = g_build_filename (out_dir, "awq", NULL);
  g_autofree char *gguf = g_build_filename (out_dir, "awq.gguf", NULL);
  HoneAwqOptions o;

  hone_awq_options_init (&o);
  o.group_size = 64;
  r = hone_awq_quantize (f->model, f->tokens, f->n_samples, f->seq_len, &o, cancel_after_first_layer, c, c, &error);
  g_assert_null (r);
  g_assert_error (error, HONE_ERROR, HONE_ERROR_CANCELLED);
  g_clear_error (&error);

  r = calibrate (f, 64, &error);
  g_assert_no_error (error);
  g_cancellable_cancel (pre);
  g_assert_false (hone_awq_export_safetensors (r, awq, pre, NULL, NULL, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_CANCELLED);
  g_clear_error (&error);
  g_assert_false (hone_awq_export_gguf (r, gguf, pre, NULL, NULL, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_CANCELLED);
  g_clear_error (&error);
  g_assert_true (dir_is_empty_but (out_dir, NULL));

  /* A failed write (the target's parent is a file) leaves nothing either. */
  {
    g_autofree char *file = g_build_filename (out_dir, "file", NULL);
    g_autofree char *bad = g_build_filename (file, "awq", NULL);
    g_assert_true (g_file_set_contents (file, "x", 1, NULL));
    g_assert_false (hone_awq_export_safetensors (r, bad, NULL, NULL, NULL, &error));
    g_assert_nonnull (error);
    g_clear_error (&error);
    g_assert_true (dir_is_empty_but (out_dir, "file"));
  }
  /* A folder of the user's is never replaced. */
  {
    g_autofree char *mine = g_build_filename (out_dir, "mine", NULL);
    g_autofree char *precious = g_build_filename (mine, "notes.txt", NULL);
    g_mkdir (mine, 0700);
    g_assert_true (g_file_set_contents (precious, "keep", -1, NULL));
    g_assert_false (hone_awq_export_safetensors (r, mine, NULL, NULL, NULL, &error));
    g_assert_error (error, HONE_ERROR, HONE_ERROR_IO);
    g_clear_error (&error);
    g_assert_true (g_file_test (precious, G_FILE_TEST_EXISTS));
    hone_test_rm_rf (mine);
  }
  /* Replacing an earlier export works and leaves no sibling behind. */
  g_assert_true (hone_awq_export_safetensors (r, awq, NULL, NULL, NULL, &error));
  g_assert_true (hone_awq_export_safetensors (r, awq, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  hone_test_rm_rf (awq);
  g_assert_true (dir_is_empty_but (out_dir, "file"));
  hone_test_rm_rf (out_dir);
}

static GBytes *
file_bytes (const char *path)
{
  char *data;
  gsize len;
  g_assert_true (g_file_get_contents (path, &data, &len, NULL));
  return g_bytes_new_take (data, len);
}

/* A thread that cancels an export as soon as its temporary sibling appears
 * in @parent (the export is then writing), or gives up when told to stop. */
typedef struct {
  const char *parent;
  GCancellable *cancellable;
  gint stop;
  gboolean fired;             /* cancelled while the temporary folder existed */
} Watcher;

static gpointer
watch_export (gpointer data)
{
  Watcher *w = data;
  while (!g_atomic_int_get (&w->stop))
    {
      GDir *d = g_dir_open (w->parent, 0, NULL);
      const char *name;
      while (d && (name = g_dir_read_name (d)) != NULL)
        if (strstr (name, ".tmp-") != NULL)
          {
            g_cancellable_cancel (w->cancellable);
            w->fired = TRUE;
            break;
          }
      if (d)
        g_dir_close (d);
      if (w->fired)
        break;
      g_usleep (20);
    }
  return NULL;
}

static guint32
model_checksum (HoneModel *m)
{
  guint32 h = 2166136261u;
  for (int l = 0; l < m->config.n_layers; l++)
    {
      const HoneLayerWeights *L = &m->layers[l];
      const HoneTensor *ts[] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down,
                                 &L->attn_norm, &L->ffn_norm };
      for (guint i = 0; i < G_N_ELEMENTS (ts); i++)
        for (gsize b = 0; b < ts[i]->nbytes; b++)
          h = (h ^ ((const guint8 *) ts[i]->data)[b]) * 16777619u;
    }
  return h;
}

static guint32
result_checksum (const HoneAwqResult *r)
{
  guint32 h = 2166136261u;
  for (int l = 0; l < r->model->config.n_layers; l++)
    for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
      {
        const HoneAwqLinear *lin = &r->layers[l].lin[i];
        gsize nq = hone_awq_linear_q_bytes (lin), ng = (gsize) lin->N * (lin->K / lin->group_size);
        for (gsize b = 0; b < nq; b++)
          h = (h ^ lin->q[b]) * 16777619u;
        for (gsize b = 0; b < ng; b++)
          h = (h ^ lin->z[b] ^ lin->s[b]) * 16777619u;
      }
  return h;
}

/* Cancel while the AutoAWQ export writes (its temporary folder exists): one
 * CANCELLED error, no temporary sibling left, the earlier exports at the same
 * places byte-identical, and the model and the result untouched (a new
 * export after it works and loads). A race, so it is tried until a cancel
 * lands mid-write (an export finishing first is retried). The GGUF export
 * has no such window: its cancel points all come before its temporary file,
 * whose write is not interruptible (test_cancel covers its cancel). */
static void
test_cancel_mid_export (Fixture *f, gconstpointer data)
{
  GError *error = NULL;
  g_autoptr(HoneAwqResult) r = NULL;
  g_autofree char *parent = g_dir_make_tmp ("hone-awq-mid-XXXXXX", NULL);
  g_autofree char *awq = g_build_filename (parent, "awq", NULL);
  g_autofree char *st_path = g_build_filename (awq, "model.safetensors", NULL);
  g_autofree char *gguf = g_build_filename (parent, "awq.gguf", NULL);
  guint32 model_sum = model_checksum (f->model), result_sum;
  g_autoptr(GBytes) before_st = NULL, before_gguf = NULL;
  HoneAwqOptions o;

  /* Round to nearest: what is exported does not matter here, only when. */
  hone_awq_options_init (&o);
  o.group_size = 64;
  o.search_scales = o.search_clip = FALSE;
  r = hone_awq_quantize (f->model, NULL, 0, 0, &o, NULL, NULL, NULL, &error);
  g_assert_no_error (error);
  result_sum = result_checksum (r);
  g_assert_true (hone_awq_export_safetensors (r, awq, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (hone_awq_export_gguf (r, gguf, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  before_st = file_bytes (st_path);
  before_gguf = file_bytes (gguf);

  {
      int tries, mid = 0;
      for (tries = 0; tries < 50 && mid == 0; tries++)
        {
          g_autoptr(GCancellable) c = g_cancellable_new ();
          Watcher w = { parent, c, 0, FALSE };
          GThread *t = g_thread_new ("watch", watch_export, &w);
          gboolean ok = hone_awq_export_safetensors (r, awq, c, NULL, NULL, &error);
          g_atomic_int_set (&w.stop, 1);
          g_thread_join (t);
          if (ok)
            {
              /* Finished before the watcher saw it: a whole export, as before. */
              g_assert_no_error (error);
              continue;
            }
          g_assert_error (error, HONE_ERROR, HONE_ERROR_CANCELLED);
          g_clear_error (&error);
          g_assert_true (w.fired);
          mid++;
        }
      g_test_message ("AutoAWQ export cancelled mid-write after %d tries", tries);
      g_assert_cmpint (mid, ==, 1);
      /* Only the earlier exports, unchanged. */
      {
        GDir *d = g_dir_open (parent, 0, NULL);
        const char *name;
        while ((name = g_dir_read_name (d)) != NULL)
          g_assert_true (g_strcmp0 (name, "awq") == 0 || g_strcmp0 (name, "awq.gguf") == 0);
        g_dir_close (d);
      }
      {
        g_autoptr(GBytes) now_st = file_bytes (st_path);
        g_autoptr(GBytes) now_gguf = file_bytes (gguf);
        g_assert_true (g_bytes_equal (now_st, before_st));
        g_assert_true (g_bytes_equal (now_gguf, before_gguf));
      }
    }
  g_assert_cmpuint (model_checksum (f->model), ==, model_sum);
  g_assert_cmpuint (result_checksum (r), ==, result_sum);
  /* And the model and the result still work: a new export loads and runs. */
  hone_test_rm_rf (awq);
  g_assert_true (hone_awq_export_safetensors (r, awq, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  {
    g_autoptr(HoneModel) m = hone_model_open (awq, &error);
    g_assert_no_error (error);
    g_assert_cmpint (m->awq_group_size, ==, 64);
  }
  hone_test_rm_rf (parent);
}

static void
test_determinism (Fixture *f, gconstpointer data)
{
  GError *error = NULL;
  g_autofree char *a = g_build_filename (f->dir, "a.gguf", NULL);
  g_autofree char *b = g_build_filename (f->dir, "b.gguf", NULL);
  g_autofree char *da = g_build_filename (f->dir, "a", NULL);
  g_autofree char *db = g_build_filename (f->dir, "b", NULL);
  g_autofree char *sa = g_build_filename (da, "model.safetensors", NULL);
  g_autofree char *sb = g_build_filename (db, "model.safetensors", NULL);
  HoneAwqOptions o;

  for (int run = 0; run < 2; run++)
    {
      g_autoptr(HoneAwqResult) r = NULL;
      hone_awq_options_init (&o);
      o.group_size = 64;
      o.clip_tokens = 40;
      o.n_threads = run == 0 ? 1 : 3;     /* thread count must not matter */
      r = hone_awq_quantize (f->model, f->tokens, f->n_samples, f->seq_len, &o, NULL, NULL, NULL, &error);
      g_assert_no_error (error);
      g_assert_true (hone_awq_export_gguf (r, run == 0 ? a : b, NULL, NULL, NULL, &error));
      g_assert_true (hone_awq_export_safetensors (r, run == 0 ? da : db, NULL, NULL, NULL, &error));
      g_assert_no_error (error);
    }
  {
    g_autoptr(GBytes) x = file_bytes (a), y = file_bytes (b), u = file_bytes (sa), v = file_bytes (sb);
    g_assert_true (g_bytes_equal (x, y));
    g_assert_true (g_bytes_equal (u, v));
  }
}

/* AWQ's scale search must not do worse than plain rounding on the data it saw. */
static void
test_awq_vs_rtn (Fixture *f, gconstpointer data)
{
  GError *error = NULL;
  HoneAwqOptions o;
  g_autoptr(HoneAwqResult) awq = calibrate (f, 64, &error);
  g_autoptr(HoneAwqResult) rtn = NULL;
  g_autoptr(HoneModel) m_awq = NULL, m_rtn = NULL;
  HoneModel *models[3];
  HoneQuantEvalScore sc[3];

  g_assert_no_error (error);
  hone_awq_options_init (&o);
  o.group_size = 64;
  o.search_scales = o.search_clip = FALSE;
  rtn = hone_awq_quantize (f->model, NULL, 0, 0, &o, NULL, NULL, NULL, &error);
  g_assert_no_error (error);
  m_awq = hone_awq_result_open_model (awq, NULL, &error);
  g_assert_no_error (error);
  m_rtn = hone_awq_result_open_model (rtn, NULL, &error);
  g_assert_no_error (error);
  models[0] = f->model;
  models[1] = m_rtn;
  models[2] = m_awq;
  g_assert_true (hone_quant_eval (models, 3, f->tokens, f->n_samples, f->seq_len, 2, sc, NULL, &error));
  g_assert_no_error (error);
  g_test_message ("orig ppl %.4f, RTN %.4f KL %.5f top1 %.3f, AWQ %.4f KL %.5f top1 %.3f", sc[0].ppl, sc[1].ppl,
                  sc[1].kl, sc[1].top1, sc[2].ppl, sc[2].kl, sc[2].top1);
  g_assert_cmpfloat (sc[0].kl, ==, 0.0);
  g_assert_cmpfloat (sc[0].top1, ==, 1.0);
  g_assert_cmpfloat (sc[1].kl, >, 0.0);
  g_assert_cmpfloat (sc[2].kl, <=, sc[1].kl);
}

/* ---- documents ---------------------------------------------------------- */

static char *
write_file (const char *dir, const char *name, const char *data, gssize len)
{
  char *p = g_build_filename (dir, name, NULL);
  g_assert_true (g_file_set_contents (p, data, len, NULL));
  return p;
}

/* A one-page PDF with correct xref offsets; text NULL: an empty page. */
static GString *
make_pdf (const char *text, gboolean encrypted)
{
  GString *s = g_string_new ("%PDF-1.4\n");
  gsize off[7];
  g_autofree char *content = text ? g_strdup_printf ("BT /F1 12 Tf 72 720 Td (%s) Tj ET", text) : g_strdup ("");
  int n = 5;

  off[1] = s->len;
  g_string_append (s, "1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n");
  off[2] = s->len;
  g_string_append (s, "2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n");
  off[3] = s->len;
  g_string_append (s, "3 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
                      "/Resources << /Font << /F1 5 0 R >> >> >> endobj\n");
  off[4] = s->len;
  g_string_append_printf (s, "4 0 obj << /Length %zu >> stream\n%s\nendstream endobj\n", strlen (content), content);
  off[5] = s->len;
  g_string_append (s, "5 0 obj << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> endobj\n");
  if (encrypted)
    {
      off[6] = s->len;
      g_string_append (s, "6 0 obj << /Filter /Standard /V 1 /R 2 /Length 40 /P -4 "
                          "/O <0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF> "
                          "/U <FEDCBA9876543210FEDCBA9876543210FEDCBA9876543210FEDCBA9876543210> >> endobj\n");
      n = 6;
    }
  {
    gsize xref = s->len;
    g_string_append_printf (s, "xref\n0 %d\n0000000000 65535 f \n", n + 1);
    for (int i = 1; i <= n; i++)
      g_string_append_printf (s, "%010zu 00000 n \n", off[i]);
    g_string_append_printf (s, "trailer << /Size %d /Root 1 0 R%s >>\nstartxref\n%zu\n%%%%EOF\n", n + 1,
                            encrypted ? " /Encrypt 6 0 R /ID [<00112233445566778899AABBCCDDEEFF> "
                                        "<00112233445566778899AABBCCDDEEFF>]" : "",
                            xref);
  }
  return s;
}

static void
expect_doc_error (const char *path, int code)
{
  GError *error = NULL;
  char *t = hone_awq_document_text (path, NULL, &error);
  if (t)
    g_test_message ("%s gave text: %s", path, t);
  g_assert_null (t);
  g_assert_error (error, HONE_ERROR, code);
  g_assert_nonnull (strstr (error->message, path));
  g_clear_error (&error);
}

static void
test_documents (Fixture *f, gconstpointer data)
{
  GError *error = NULL;
  g_autofree char *dir = g_build_filename (f->dir, "docs", NULL);
  g_autofree char *empty = NULL, *bin = NULL, *json = NULL, *jsonl = NULL, *badjson = NULL, *md = NULL;
  g_autofree char *pdf = NULL, *pdf_empty = NULL, *pdf_enc = NULL, *pdf_bad = NULL, *shortdoc = NULL;
  g_autofree char *t = NULL;
  const guint8 binary[] = { 0x7f, 'E', 'L', 'F', 0, 0, 1, 2, 0xff, 0xfe };
  GString *long_text = g_string_new (NULL);

  g_mkdir_with_parents (dir, 0700);
  for (int i = 0; i < 60; i++)
    g_string_append_printf (long_text, "Paragraph %d: the quick brown fox jumps over the lazy dog. ", i);
  empty = write_file (dir, "empty.txt", "  \n", -1);
  bin = write_file (dir, "blob.txt", (const char *) binary, sizeof binary);
  json = write_file (dir, "a.json", "{\"meta\": 3, \"items\": [{\"text\": \"first text\"}, {\"content\": \"second\"}]}", -1);
  jsonl = write_file (dir, "b.jsonl", "{\"prompt\": \"p1\", \"id\": 1}\n\n{\"response\": \"r2\"}\n", -1);
  badjson = write_file (dir, "c.json", "{\"text\": ", -1);
  md = write_file (dir, "d.md", long_text->str, -1);
  shortdoc = write_file (dir, "short.txt", "hi", -1);

  expect_doc_error (empty, HONE_ERROR_INVALID_ARGUMENT);
  expect_doc_error (bin, HONE_ERROR_FILE_UNSUPPORTED);
  {
    /* a FIFO named like a document: refused at once (reading it would wait
     * for a writer), and left out of a folder (the load below would hang) */
    g_autofree char *fifo = g_build_filename (dir, "pipe.txt", NULL);
    g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
    expect_doc_error (fifo, HONE_ERROR_FILE_UNSUPPORTED);
  }
  expect_doc_error (badjson, HONE_ERROR_FILE_CORRUPT);
  t = hone_awq_document_text (json, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (strstr (t, "first text"));
  g_assert_nonnull (strstr (t, "second"));
  g_clear_pointer (&t, g_free);
  t = hone_awq_document_text (jsonl, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (strstr (t, "p1"));
  g_assert_nonnull (strstr (t, "r2"));
  g_clear_pointer (&t, g_free);
  {
    /* an escape JSON does not have (\351, which json-glib 1.6 reads as the raw byte 0xE9:
     * found by fuzz-awq-docs) is refused like any invalid JSON, not handed on as non-UTF-8 text */
    g_autofree char *octal = write_file (dir, "e.json", "{\"text\": \"caf\\351 au lait\"}", -1);
    t = hone_awq_document_text (octal, NULL, &error);
    g_assert_null (t);
    g_assert_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT);
    g_assert_nonnull (strstr (error->message, "escape"));
    g_clear_error (&error);
  }

  {
    GString *p = make_pdf ("Hello from a PDF", FALSE), *pe = make_pdf (NULL, FALSE), *pc = make_pdf ("secret", TRUE);
    pdf = write_file (dir, "x.pdf", p->str, (gssize) p->len);
    pdf_empty = write_file (dir, "y.pdf", pe->str, (gssize) pe->len);
    pdf_enc = write_file (dir, "z.pdf", pc->str, (gssize) pc->len);
    pdf_bad = write_file (dir, "w.pdf", "%PDF-1.4\nthis is not a pdf at all", -1);
    g_string_free (p, TRUE);
    g_string_free (pe, TRUE);
    g_string_free (pc, TRUE);
  }
  t = hone_awq_document_text (pdf, NULL, &error);
  if (error && error->code == HONE_ERROR_FILE_UNSUPPORTED && strstr (error->message, "poppler"))
    {
      g_test_message ("poppler-glib absent: PDF checks skipped");
      g_clear_error (&error);
    }
  else
    {
      g_assert_no_error (error);
      g_assert_nonnull (strstr (t, "Hello from a PDF"));
      expect_doc_error (pdf_empty, HONE_ERROR_INVALID_ARGUMENT);
      expect_doc_error (pdf_enc, HONE_ERROR_FILE_UNSUPPORTED);
      expect_doc_error (pdf_bad, HONE_ERROR_FILE_CORRUPT);
    }
  g_clear_pointer (&t, g_free);

  /* Loading: an explicit bad file fails with its error; in a folder it is skipped. */
  {
    const char *one[] = { shortdoc, NULL };
    const char *folder[] = { dir, NULL };
    const char *good[] = { md, NULL };
    HoneAwqData *d = hone_awq_data_load (f->model->tokenizer, one, 4, 32, 0, NULL, &error);
    g_assert_null (d);
    g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
    g_assert_nonnull (strstr (error->message, "too short"));
    g_clear_error (&error);
    d = hone_awq_data_load (f->model->tokenizer, folder, 4, 32, 0, NULL, &error);
    g_assert_no_error (error);
    g_assert_cmpint (d->warnings->len, >=, 3);
    g_assert_cmpint (d->n_samples, ==, 4);
    g_assert_cmpint (d->n_heldout, >=, 1);
    for (int i = 0; i < d->n_samples * d->seq_len; i++)
      g_assert_cmpint (d->samples[i], <, f->model->config.vocab);
    hone_awq_data_free (d);
    /* Too few tokens for one calibration and one held-out sample of 4096. */
    d = hone_awq_data_load (f->model->tokenizer, good, 4, 4096, 0, NULL, &error);
    g_assert_null (d);
    g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
    g_clear_error (&error);
  }
  g_string_free (long_text, TRUE);
}

/* ---- the default model ---------------------------------------------------- */

static char *
default_model (void)
{
  const char *env = g_getenv ("HONE_DEFAULT_MODEL");
  if (env && *env)
    return g_strdup (env);
  return g_build_filename (g_get_user_cache_dir (), "hone", "models", "SmolLM2-135M-Instruct.Q4_1.gguf", NULL);
}

static void
test_default_model (void)
{
  g_autofree char *path = default_model ();
  g_autofree char *root = g_strdup (g_getenv ("HONE_SOURCE_ROOT"));
  g_autofree char *texts = NULL;
  g_autoptr(HoneModel) model = NULL;
  g_autoptr(HoneAwqData) d = NULL;
  g_autoptr(HoneAwqResult) awq = NULL, rtn = NULL;
  g_autoptr(HoneModel) m_awq = NULL, m_rtn = NULL;
  HoneModel *models[3];
  HoneQuantEvalScore sc[3];
  GError *error = NULL;
  HoneAwqOptions o;
  const char *paths[2];

  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    {
      g_test_fail_printf ("the default model is missing: %s (run .ci/fetch-model)", path);
      return;
    }
  model = hone_model_open (path, &error);
  g_assert_no_error (error);
  texts = root ? g_build_filename (root, "data", "calibration", "texts", NULL) : NULL;
  g_assert_nonnull (texts);
  paths[0] = texts;
  paths[1] = NULL;
  d = hone_awq_data_load (model->tokenizer, paths, 8, 128, 4, NULL, &error);
  g_assert_no_error (error);
  hone_awq_options_init (&o);
  o.group_size = 64;
  o.loss_tokens = 256;
  o.clip_tokens = 256;
  awq = hone_awq_quantize (model, d->samples, d->n_samples, d->seq_len, &o, NULL, NULL, NULL, &error);
  g_assert_no_error (error);
  o.search_scales = o.search_clip = FALSE;
  rtn = hone_awq_quantize (model, NULL, 0, 0, &o, NULL, NULL, NULL, &error);
  g_assert_no_error (error);
  m_awq = hone_awq_result_open_model (awq, NULL, &error);
  g_assert_no_error (error);
  m_rtn = hone_awq_result_open_model (rtn, NULL, &error);
  g_assert_no_error (error);
  models[0] = model;
  models[1] = m_rtn;
  models[2] = m_awq;
  g_assert_true (hone_quant_eval (models, 3, d->heldout, d->n_heldout, d->seq_len, 0, sc, NULL, &error));
  g_assert_no_error (error);
  g_test_message ("held-out: orig %.4f RTN %.4f AWQ %.4f (KL %.5f vs %.5f, top-1 %.3f vs %.3f), %.1f s",
                  sc[0].ppl, sc[1].ppl, sc[2].ppl, sc[1].kl, sc[2].kl, sc[1].top1, sc[2].top1, awq->seconds);
  g_assert_cmpfloat (sc[2].ppl, <=, sc[1].ppl);
  g_assert_cmpfloat (sc[2].kl, <=, sc[1].kl);
}

/* The verdict in words: the grade from the held-out rise, how much of RTN's
 * loss AWQ avoids, and the warning when AWQ lost more than RTN on generic
 * text (calibration fitted the documents). Scores: original, RTN, AWQ. */
static void
test_verdict (void)
{
  const HoneQuantEvalScore held[3] = { { 10.0, 0, 1, 100 }, { 12.0, 0.3, 0.7, 100 }, { 10.3, 0.1, 0.9, 100 } };
  const HoneQuantEvalScore gen_ok[3] = { { 20.0, 0, 1, 100 }, { 24.0, 0.3, 0.7, 100 }, { 21.0, 0.1, 0.9, 100 } };
  const HoneQuantEvalScore gen_bad[3] = { { 20.0, 0, 1, 100 }, { 21.0, 0.3, 0.7, 100 }, { 25.0, 0.4, 0.6, 100 } };
  const HoneQuantEvalScore bad[3] = { { 10.0, 0, 1, 100 }, { NAN, 0, 0, 0 }, { 10.3, 0, 0, 0 } };
  gboolean good = TRUE;
  g_autofree char *a = hone_quant_eval_verdict (held, NULL, &good);
  g_autofree char *b = NULL, *c = NULL, *d = NULL;

  /* +3 %: good, and 85 % of RTN's 20 % rise avoided */
  g_assert_true (good);
  g_assert_true (g_str_has_prefix (a, "Good:"));
  g_assert_nonnull (strstr (a, "AWQ avoids 85 % of the loss"));
  g_assert_null (strstr (a, "generic"));
  b = hone_quant_eval_verdict (held, gen_ok, &good);
  g_assert_true (good);
  g_assert_cmpstr (b, ==, a);
  /* AWQ +25 % on generic text where RTN lost 5 %: warned, not good */
  c = hone_quant_eval_verdict (held, gen_bad, &good);
  g_assert_false (good);
  g_assert_true (g_str_has_prefix (c, a));
  g_assert_nonnull (strstr (c, "On generic text AWQ lost more than plain rounding (+25.0 % against +5.0 %)"));
  /* nothing measurable */
  d = hone_quant_eval_verdict (bad, NULL, &good);
  g_assert_false (good);
  g_assert_cmpstr (d, ==, "The quality could not be measured");
}

int
main (int argc, char **argv)
{
  gboolean model = hone_test_take_flag (&argc, argv, "--model");

  g_test_init (&argc, &argv, NULL);
  if (model)
    {
      g_test_add_func ("/awq/default-model", test_default_model);
      return g_test_run ();
    }
  g_test_add_func ("/awq/quantizer/known", test_quantizer_known);
  g_test_add_func ("/awq/quantizer/scale-exact", test_scale_exact);
  g_test_add_func ("/awq/pack-order", test_pack_order);
  g_test_add_func ("/awq/q-nibbles", test_q_nibbles);
  g_test_add_func ("/awq/verdict", test_verdict);
  g_test_add ("/awq/export/safetensors", Fixture, NULL, fixture_setup, test_export_safetensors, fixture_teardown);
  g_test_add ("/awq/export/safetensors-mha", Fixture, GINT_TO_POINTER (1), fixture_setup, test_export_safetensors,
              fixture_teardown);
  g_test_add ("/awq/export/gguf", Fixture, NULL, fixture_setup, test_export_gguf, fixture_teardown);
  g_test_add ("/awq/bad-options", Fixture, NULL, fixture_setup, test_bad_options, fixture_teardown);
  g_test_add ("/awq/cancel", Fixture, NULL, fixture_setup, test_cancel, fixture_teardown);
  g_test_add ("/awq/cancel-mid-export", Fixture, NULL, fixture_setup, test_cancel_mid_export, fixture_teardown);
  g_test_add ("/awq/determinism", Fixture, GINT_TO_POINTER (1), fixture_setup, test_determinism, fixture_teardown);
  g_test_add ("/awq/awq-vs-rtn", Fixture, NULL, fixture_setup, test_awq_vs_rtn, fixture_teardown);
  g_test_add ("/awq/documents", Fixture, NULL, fixture_setup, test_documents, fixture_teardown);
  return g_test_run ();
}
