/* test-awq-load.c — AWQ GEMM checkpoints loaded as Q4Z weights and run on the CPU.
 *
 * References, all independent of the loader:
 *  - tests/data/awq/ comes from tests/reference/gen_awq_load.py, which packs
 *    known integers by AutoAWQ's rules with numpy and writes, beside the AWQ
 *    folder, the same model with each linear as the f32 weight (q − z)·s it
 *    implies (exact in f32). Every dequantized Q4Z value must equal it bit
 *    for bit (and the lone linears at group sizes 32 and 128 their
 *    "expected" tensors).
 *  - The Q4Z tile kernels against an f64 dot product of the dequantized
 *    weights with the dequantized 8-bit activations, on every ISA this CPU has.
 *  - The CPU forward pass on the AWQ folder against the same backend's float
 *    path on the f32 folder (itself checked against an f64 forward in
 *    test-cpu-forward), within that test's budget for 8-bit activations.
 * With --model: the default model is quantized (a short AWQ calibration),
 * exported as an AutoAWQ folder, loaded back, generates greedily, and its
 * perplexity equals the quality report's AWQ figure within 3 %.
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "hone-awq.h"
#include "hone-awq-data.h"
#include "hone-awq-export.h"
#include "hone-awq-load.h"
#include "hone-backend.h"
#include "hone-dtype.h"
#include "hone-engine.h"
#include "hone-error.h"
#include "hone-gguf.h"
#include "hone-model.h"
#include "hone-model-info.h"
#include "hone-quant-eval.h"
#include "hone-safetensors.h"
#include "hone-sampler.h"
#include "hone-test-models.h"
#include "cpu/hone-cpu-dot.h"
#include "hone-test-data.h"

static char *
data_path (const char *name)
{
  const char *dir = g_getenv ("HONE_TEST_DATA");
  g_assert_nonnull (dir);
  return g_build_filename (dir, "awq", name, NULL);
}

static const char *const lin_what[HONE_AWQ_N_LINEARS] = { "wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down" };

static const HoneTensor *
layer_linear (const HoneModel *m, int l, int i)
{
  const HoneLayerWeights *L = &m->layers[l];
  const HoneTensor *t[HONE_AWQ_N_LINEARS] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down };
  return t[i];
}

/* ---- exact values ---------------------------------------------------------- */

static void
test_values (void)
{
  g_autofree char *awq_dir = data_path ("tiny-awq");
  g_autofree char *f32_dir = data_path ("tiny-f32");
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneModel) awq = hone_model_open (awq_dir, &error);
  g_autoptr(HoneModel) ref = NULL;

  g_assert_no_error (error);
  ref = hone_model_open (f32_dir, &error);
  g_assert_no_error (error);
  g_assert_cmpint (awq->awq_group_size, ==, 64);
  g_assert_cmpint (ref->awq_group_size, ==, 0);
  g_assert_cmpint (hone_model_n_params (awq), ==, hone_model_n_params (ref));
  /* The unquantized tensors are the stored ones (bf16 embeddings, f16 lm_head). */
  g_assert_cmpint (awq->tok_embd.type, ==, HONE_DTYPE_BF16);
  g_assert_cmpint (awq->output.type, ==, HONE_DTYPE_F16);
  g_assert_false (awq->config.tied_embeddings);
  for (int l = 0; l < awq->config.n_layers; l++)
    for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
      {
        const HoneTensor *q = layer_linear (awq, l, i), *f = layer_linear (ref, l, i);
        g_autofree float *row = g_new (float, q->ne[0]);
        g_autofree char *name = hone_model_tensor_name (HONE_MODEL_SOURCE_SAFETENSORS, lin_what[i], l);

        g_assert_cmpint (q->type, ==, HONE_DTYPE_Q4Z);
        g_assert_cmpint (f->type, ==, HONE_DTYPE_F32);
        g_assert_cmpstr (q->name, ==, name);
        g_assert_cmpint (q->ne[0], ==, f->ne[0]);
        g_assert_cmpint (q->ne[1], ==, f->ne[1]);
        g_assert_cmpuint (q->nbytes, ==, (gsize) (q->ne[0] / 32) * 20 * (gsize) q->ne[1]);
        for (int64_t r = 0; r < q->ne[1]; r++)
          {
            hone_dequantize_row (HONE_DTYPE_Q4Z, hone_tensor_row (q, r), row, q->ne[0]);
            if (memcmp (row, hone_tensor_row (f, r), (gsize) q->ne[0] * sizeof (float)) != 0)
              g_error ("%s row %" G_GINT64_FORMAT ": dequantized Q4Z differs from the reference", name, r);
          }
      }
}

/* Group sizes 32 and 128 through the loader's entry point. */
static void
test_linears (void)
{
  g_autofree char *path = data_path ("linears.safetensors");
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneSafetensors) st = hone_safetensors_open (path, &error);
  const int groups[] = { 32, 128 };

  g_assert_no_error (error);
  for (guint gi = 0; gi < G_N_ELEMENTS (groups); gi++)
    {
      g_autofree char *prefix = g_strdup_printf ("g%d", groups[gi]);
      g_autofree char *ename = g_strdup_printf ("g%d.expected", groups[gi]);
      const HoneTensor *e = hone_safetensors_find_tensor (st, ename);
      HoneTensor t;
      g_autofree void *buf = NULL;
      float row[128];

      g_assert_nonnull (e);
      buf = hone_awq_load_linear (st, prefix, ename, 128, 16, groups[gi], &t, &error);
      g_assert_no_error (error);
      g_assert_nonnull (buf);
      g_assert_cmpint (t.type, ==, HONE_DTYPE_Q4Z);
      for (int r = 0; r < 16; r++)
        {
          hone_dequantize_row (HONE_DTYPE_Q4Z, hone_tensor_row (&t, r), row, 128);
          g_assert_cmpmem (row, sizeof row, hone_tensor_row (e, r), sizeof row);
        }
      /* The wrong group size for these tensors is a shape error, not garbage. */
      g_assert_null (hone_awq_load_linear (st, prefix, ename, 128, 16, groups[gi] == 32 ? 64 : 32, &t, &error));
      g_assert_error (error, HONE_ERROR, HONE_ERROR_SHAPE_MISMATCH);
      g_clear_error (&error);
    }
}

/* A linear large enough for the repack to split over threads, checked
 * weight by weight against AutoAWQ's rule applied here: w[n][k] = (q − z)·s
 * with q the nibble {0,4,1,5,2,6,3,7}[n % 8] of qweight[k][n / 8]. */
static void
test_repack_threads (void)
{
  enum { K = 1024, N = 1024, G = 128 };
  guint32 *qw = g_new (guint32, K * N / 8), *qz = g_new (guint32, K / G * N / 8);
  guint16 *sc = g_new (guint16, K / G * N);
  HoneBlockQ4Z *out = g_new (HoneBlockQ4Z, N * (K / 32));
  static const int nib[8] = { 0, 4, 1, 5, 2, 6, 3, 7 };
  GRand *rng = g_rand_new_with_seed (5);
  float row[K];

  for (int i = 0; i < K * N / 8; i++)
    qw[i] = g_rand_int (rng);
  for (int i = 0; i < K / G * N / 8; i++)
    qz[i] = g_rand_int (rng);
  for (int i = 0; i < K / G * N; i++)
    sc[i] = hone_f32_to_f16 ((float) g_rand_double_range (rng, 0.001, 0.1));
  hone_awq_repack_q4z (qw, qz, sc, K, N, G, out);
  for (int n = 0; n < N; n++)
    {
      hone_dequantize_row (HONE_DTYPE_Q4Z, out + (gsize) n * (K / 32), row, K);
      for (int k = 0; k < K; k++)
        {
          int q = (qw[k * (N / 8) + n / 8] >> (4 * nib[n % 8])) & 15;
          int z = (qz[(k / G) * (N / 8) + n / 8] >> (4 * nib[n % 8])) & 15;
          float want = (float) (q - z) * hone_f16_to_f32 (sc[(k / G) * N + n]);
          if (row[k] != want)
            g_error ("w[%d][%d] = %g, AutoAWQ's rule gives %g", n, k, row[k], want);
        }
    }
  g_rand_free (rng);
  g_free (qw);
  g_free (qz);
  g_free (sc);
  g_free (out);
}

/* ---- kernels ----------------------------------------------------------------- */

static void
test_kernels (void)
{
  enum { K = 32 * 19, N = 4, T = 4 };   /* 19 blocks: two groups of 8 (the gathered path) and a tail of 3 */
  HoneBlockQ4Z w[N][K / 32];
  float x[T][K], wf[N][K];
  HoneQ8Act xq[T][K / 32 + 4];   /* rows of hone_cpu_act_row_blocks (K): the blocks, then their scales' copy */
  GRand *rng = g_rand_new_with_seed (7);
  HoneCpuIsa saved = hone_cpu_isa ();

  for (int r = 0; r < N; r++)
    for (int b = 0; b < K / 32; b++)
      {
        w[r][b].s = hone_f32_to_f16 ((float) g_rand_double_range (rng, 0.001, 0.05));
        w[r][b].z = (guint8) g_rand_int_range (rng, 0, 16);
        w[r][b].pad = 0;
        for (int j = 0; j < 16; j++)
          w[r][b].qs[j] = (guint8) g_rand_int_range (rng, 0, 256);
      }
  for (int r = 0; r < N; r++)
    hone_dequantize_row (HONE_DTYPE_Q4Z, w[r], wf[r], K);
  for (int t = 0; t < T; t++)
    {
      for (int k = 0; k < K; k++)
        x[t][k] = (float) g_rand_double_range (rng, -2, 2);
      hone_cpu_quantize_act (x[t], xq[t], K);
    }
  g_assert_cmpint (hone_cpu_act_row_blocks (K), ==, G_N_ELEMENTS (xq[0]));
  g_assert_true (hone_cpu_type_supported (HONE_DTYPE_Q4Z));
  g_assert_true (hone_cpu_type_uses_q8 (HONE_DTYPE_Q4Z));
  g_assert_cmpint (hone_cpu_type_k_align (HONE_DTYPE_Q4Z), ==, 32);
  for (int isa = HONE_CPU_ISA_PORTABLE; isa < HONE_CPU_ISA_COUNT_; isa++)
    {
      HoneCpuTileFunc fn;
      if (!hone_cpu_isa_supported (isa))
        continue;
      fn = hone_cpu_tile_func (HONE_DTYPE_Q4Z, isa);
      g_assert_nonnull (fn);
      for (int R = 1; R <= N; R++)
        for (int TT = 1; TT <= T; TT++)
          {
            float out[T][N];
            memset (out, 0xff, sizeof out);   /* NaN: every written value is checked */
            fn (K, w, sizeof w[0], R, xq, sizeof xq[0], TT, &out[0][0], N);
            for (int t = 0; t < TT; t++)
              for (int r = 0; r < R; r++)
                {
                  double ref = 0, mag = 0;
                  for (int b = 0; b < K / 32; b++)
                    for (int j = 0; j < 32; j++)
                      {
                        double a = (double) xq[t][b].d * xq[t][b].qs[j];
                        ref += (double) wf[r][32 * b + j] * a;
                        mag += fabs ((double) wf[r][32 * b + j] * a);
                      }
                  /* f32 sums of K products: a few ulps of the magnitude. */
                  if (!(fabs (out[t][r] - ref) <= 1e-5 * mag))
                    g_error ("%s R=%d T=%d: out[%d][%d] = %.7g, f64 %.7g", hone_cpu_isa_name (isa), R, TT, t, r,
                             out[t][r], ref);
                }
          }
    }
  hone_cpu_set_isa (saved);
  g_rand_free (rng);
}

/* ---- forward ------------------------------------------------------------------ */

static float *
forward (HoneModel *m, const gint32 *tokens, int n)
{
  g_autoptr(GError) error = NULL;
  HoneBackendOptions opt = { .n_threads = 2, .max_context = 64 };
  HoneBackend *be = hone_cpu_backend_new (&error);
  float *logits = g_new (float, (gsize) n * m->config.vocab);
  HoneBatch b = { 0, tokens, n, TRUE, logits };
  int seq;

  g_assert_no_error (error);
  g_assert_true (be->klass->load (be, m, &opt, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  seq = be->klass->seq_new (be, NULL);
  b.seq = seq;
  g_assert_true (hone_backend_forward (be, &b, NULL, &error));
  g_assert_no_error (error);
  hone_backend_free (be);
  return logits;
}

static void
test_forward (void)
{
  g_autofree char *awq_dir = data_path ("tiny-awq");
  g_autofree char *f32_dir = data_path ("tiny-f32");
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneModel) awq = hone_model_open (awq_dir, &error);
  g_autoptr(HoneModel) ref = hone_model_open (f32_dir, &error);
  gint32 tokens[19];
  const int n = G_N_ELEMENTS (tokens), V = 300;
  g_autofree float *lr = NULL;
  HoneCpuIsa saved = hone_cpu_isa ();
  GRand *rng = g_rand_new_with_seed (3);

  g_assert_no_error (error);
  for (int i = 0; i < n; i++)
    tokens[i] = g_rand_int_range (rng, 3, V);
  g_rand_free (rng);
  lr = forward (ref, tokens, n);
  for (int isa = HONE_CPU_ISA_PORTABLE; isa < HONE_CPU_ISA_COUNT_; isa++)
    {
      g_autofree float *la = NULL;
      double ss = 0, se = 0, mx = 0;
      int agree = 0;
      if (!hone_cpu_isa_supported (isa))
        continue;
      hone_cpu_set_isa (isa);
      la = forward (awq, tokens, n);
      for (int i = 0; i < n * V; i++)
        {
          double d = fabs ((double) la[i] - lr[i]);
          g_assert_true (isfinite (la[i]));
          ss += (double) lr[i] * lr[i];
          se += d * d;
          mx = fmax (mx, d);
        }
      for (int t = 0; t < n; t++)
        {
          int a = 0, b = 0;
          for (int v = 1; v < V; v++)
            {
              if (la[t * V + v] > la[t * V + a]) a = v;
              if (lr[t * V + v] > lr[t * V + b]) b = v;
            }
          agree += a == b;
        }
      g_test_message ("%s: max |dlogit| / rms = %.2e, rms(d)/rms = %.2e, argmax agrees at %d/%d",
                      hone_cpu_isa_name (isa), mx / sqrt (ss / (n * V)), sqrt (se / ss), agree, n);
      /* test-cpu-forward's budget for 8-bit activations against f64: 1e-1 and 2e-2. */
      g_assert_cmpfloat (mx / sqrt (ss / (n * V)), <=, 1e-1);
      g_assert_cmpfloat (sqrt (se / ss), <=, 2e-2);
      g_assert_cmpint (agree, >=, n - 1);
    }
  hone_cpu_set_isa (saved);
}

/* ---- model card, engine -------------------------------------------------------- */

static void
test_info (void)
{
  g_autofree char *awq_dir = data_path ("tiny-awq");
  g_autofree char *f32_dir = data_path ("tiny-f32");
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneModelInfo) a = hone_model_info_new_for_path (awq_dir, &error);
  g_autoptr(HoneModelInfo) f = NULL;
  g_autoptr(HoneModel) m = NULL;
  g_autofree char *text = NULL;
  const HoneTensorTypeCount *types;
  guint n_types;
  gint64 q4z_bytes = 0, q4z_n = 0, other = 0;

  g_assert_no_error (error);
  f = hone_model_info_new_for_path (f32_dir, &error);
  g_assert_no_error (error);
  m = hone_model_open (awq_dir, &error);
  g_assert_no_error (error);
  g_assert_cmpint (hone_model_info_get_awq_group_size (a), ==, 64);
  g_assert_cmpint (hone_model_info_get_n_params (a), ==, hone_model_info_get_n_params (f));
  types = hone_model_info_get_tensor_types (a, &n_types);
  for (guint i = 0; i < n_types; i++)
    {
      g_assert_true (types[i].type != HONE_DTYPE_I32);    /* no packed int32 left in the count */
      if (types[i].type == HONE_DTYPE_Q4Z)
        {
          g_assert_cmpstr (types[i].type_name, ==, "Q4Z");
          q4z_bytes = types[i].bytes;
          q4z_n = types[i].count;
        }
      else
        other += types[i].bytes;
    }
  g_assert_cmpint (q4z_n, ==, 7 * m->config.n_layers);
  /* The card counts what the backends hold: the loaded model's Q4Z bytes. */
  {
    gint64 held = 0;
    for (int l = 0; l < m->config.n_layers; l++)
      for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
        held += (gint64) layer_linear (m, l, i)->nbytes;
    g_assert_cmpint (q4z_bytes, ==, held);
    g_assert_cmpint (hone_model_info_get_weights_bytes (a), ==, held + other);
  }
  /* Untied: a decoded token reads every matrix and one embedding row. */
  g_assert_cmpint (hone_model_info_get_weight_bytes_per_token (a), ==,
                   hone_model_info_get_weights_bytes (a) - (gint64) m->tok_embd.nbytes);
  text = hone_model_info_to_text (a, 0);
  g_assert_nonnull (strstr (text, "AWQ int4 g64"));
  g_assert_nonnull (strstr (text, "Q4Z"));
}

static void
test_engine (void)
{
  g_autofree char *awq_dir = data_path ("tiny-awq");
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneEngine) e = hone_engine_new ();
  g_autoptr(HoneSession) s = NULL;
  HoneGenerateResult *r;
  HoneSamplerParams p;

  hone_engine_set_n_threads (e, 2);
  hone_engine_set_device (e, "cpu");
  g_assert_true (hone_engine_load_sync (e, awq_dir, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpint (hone_model_info_get_awq_group_size (hone_engine_get_model_info (e)), ==, 64);
  s = hone_session_new (e);
  hone_sampler_params_init_greedy (&p);
  p.max_tokens = 6;
  r = hone_session_complete_sync (s, "hello world", &p, NULL, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (r);
  g_assert_cmpuint (r->generated_tokens->len, >=, 1);
  g_assert_cmpuint (r->generated_tokens->len, <=, 6);
  hone_generate_result_free (r);
}

/* ---- deferred repack ------------------------------------------------------------ */

/* Any range of rows repacked on its own is those rows of the whole repack. */
static void
test_source_rows (void)
{
  g_autofree char *path = data_path ("linears.safetensors");
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneSafetensors) st = hone_safetensors_open (path, &error);
  static const int ranges[][2] = { { 0, 16 }, { 0, 1 }, { 3, 5 }, { 7, 2 }, { 8, 8 }, { 15, 1 }, { 5, 11 } };
  HoneAwqSource src;
  HoneTensor t;
  g_autofree void *all = NULL;

  g_assert_no_error (error);
  all = hone_awq_load_linear (st, "g32", "w", 128, 16, 32, &t, &error);
  g_assert_no_error (error);
  g_assert_true (hone_awq_source_find (st, "g32", 128, 16, 32, &src, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (hone_awq_source_q4z_bytes (&src), ==, t.nbytes);
  for (guint i = 0; i < G_N_ELEMENTS (ranges); i++)
    {
      const int r0 = ranges[i][0], n = ranges[i][1];
      const gsize rb = hone_tensor_row_bytes (&t);
      g_autofree guint8 *rows = g_malloc ((gsize) (n + 1) * rb);
      memset (rows, 0xa5, (gsize) (n + 1) * rb);
      hone_awq_source_rows (&src, r0, n, (HoneBlockQ4Z *) rows);
      g_assert_cmpmem (rows, (gsize) n * rb, hone_tensor_row (&t, r0), (gsize) n * rb);
      for (gsize b = (gsize) n * rb; b < (gsize) (n + 1) * rb; b++)   /* nothing written past the range */
        g_assert_cmpuint (rows[b], ==, 0xa5);
    }
  /* the same checks as the whole load: a wrong group size is a shape error */
  g_assert_false (hone_awq_source_find (st, "g32", 128, 16, 64, &src, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_SHAPE_MISMATCH);
}

/* A model opened with HONE_MODEL_OPEN_DEFER_REPACK: the AWQ linears are there
 * (type, shape, bytes) but not made; their rows read as the eager model's;
 * a cancelled materialize changes nothing; a finished one gives the eager
 * model's bytes, and the CPU backend (which materializes at load) the same
 * logits, bit for bit. */
static void
test_deferred (void)
{
  g_autofree char *awq_dir = data_path ("tiny-awq");
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneModel) eager = hone_model_open (awq_dir, &error);
  g_autoptr(HoneModel) lazy = NULL, lazy2 = NULL;
  g_autoptr(GCancellable) cancel = g_cancellable_new ();
  g_autofree float *le = NULL, *ll = NULL;
  gint32 tokens[7] = { 5, 17, 101, 3, 250, 42, 9 };
  const int n = G_N_ELEMENTS (tokens);
  HoneTestProgress prog = { 0 };

  g_assert_no_error (error);
  lazy = hone_model_open_full (awq_dir, HONE_MODEL_OPEN_DEFER_REPACK, &error);
  g_assert_no_error (error);
  g_assert_cmpint (hone_model_n_params (lazy), ==, hone_model_n_params (eager));
  g_assert_cmpuint (hone_model_deferred_bytes (eager), ==, 0);
  {
    guint64 want = 0;
    for (int l = 0; l < eager->config.n_layers; l++)
      for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
        want += layer_linear (eager, l, i)->nbytes;
    g_assert_cmpuint (hone_model_deferred_bytes (lazy), ==, want);
  }
  /* unquantized tensors are read as usual */
  g_assert_true (hone_tensor_present (&lazy->tok_embd));
  g_assert_false (hone_model_tensor_deferred (lazy, &lazy->tok_embd));
  for (int l = 0; l < lazy->config.n_layers; l++)
    for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
      {
        const HoneTensor *a = layer_linear (eager, l, i), *b = layer_linear (lazy, l, i);
        const gsize rb = hone_tensor_row_bytes (a);
        const int rows = (int) a->ne[1];
        g_autofree guint8 *buf = g_malloc ((gsize) rows * rb);
        HoneTensor copy = *b;

        g_assert_cmpint (b->type, ==, HONE_DTYPE_Q4Z);
        g_assert_null (b->data);
        g_assert_false (hone_tensor_present (b));
        g_assert_true (hone_model_tensor_deferred (lazy, b));
        g_assert_true (hone_model_tensor_deferred (lazy, &copy));   /* a copy of the view too */
        g_assert_true (hone_model_tensor_available (lazy, b));
        g_assert_false (hone_model_tensor_deferred (eager, a));
        g_assert_cmpstr (b->name, ==, a->name);
        g_assert_cmpint (b->ne[0], ==, a->ne[0]);
        g_assert_cmpint (b->ne[1], ==, a->ne[1]);
        g_assert_cmpuint (b->nbytes, ==, a->nbytes);
        /* in chunks of 3 rows (not a multiple of the 8 a packed word holds), then whole */
        for (int r = 0; r < rows; r += 3)
          g_assert_true (hone_model_read_rows (lazy, b, r, MIN (3, rows - r), buf + (gsize) r * rb));
        g_assert_cmpmem (buf, (gsize) rows * rb, a->data, a->nbytes);
        memset (buf, 0, (gsize) rows * rb);
        g_assert_true (hone_model_read_rows (lazy, &copy, 0, rows, buf));
        g_assert_cmpmem (buf, (gsize) rows * rb, a->data, a->nbytes);
        /* the eager model's rows read the same way */
        memset (buf, 0, (gsize) rows * rb);
        g_assert_true (hone_model_read_rows (eager, a, 0, rows, buf));
        g_assert_cmpmem (buf, (gsize) rows * rb, a->data, a->nbytes);
      }
  /* cancelled before the first linear: nothing made, nothing lost */
  g_cancellable_cancel (cancel);
  g_assert_false (hone_model_materialize (lazy, cancel, NULL, NULL, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_CANCELLED);
  g_clear_error (&error);
  g_assert_null (lazy->layers[0].wq.data);
  g_assert_true (hone_model_tensor_deferred (lazy, &lazy->layers[0].wq));
  /* materialized: the eager bytes, progress up to 1 */
  g_assert_true (hone_model_materialize (lazy, NULL, hone_test_progress, &prog, &error));
  g_assert_no_error (error);
  g_assert_cmpint (prog.calls, ==, HONE_AWQ_N_LINEARS * lazy->config.n_layers);
  g_assert_cmpfloat (prog.last, ==, 1.0);
  g_assert_cmpuint (hone_model_deferred_bytes (lazy), ==, 0);
  for (int l = 0; l < lazy->config.n_layers; l++)
    for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
      {
        const HoneTensor *a = layer_linear (eager, l, i), *b = layer_linear (lazy, l, i);
        g_assert_nonnull (b->data);
        g_assert_false (hone_model_tensor_deferred (lazy, b));
        g_assert_cmpmem (b->data, b->nbytes, a->data, a->nbytes);
      }
  g_assert_true (hone_model_materialize (lazy, NULL, NULL, NULL, &error));   /* again: a no-op */
  g_assert_no_error (error);
  /* the CPU backend materializes a deferred model at load: the same logits as the eager model's */
  lazy2 = hone_model_open_full (awq_dir, HONE_MODEL_OPEN_DEFER_REPACK, &error);
  g_assert_no_error (error);
  le = forward (eager, tokens, n);
  ll = forward (lazy2, tokens, n);
  g_assert_cmpmem (ll, (gsize) n * lazy2->config.vocab * sizeof (float), le,
                   (gsize) n * eager->config.vocab * sizeof (float));
  g_assert_cmpuint (hone_model_deferred_bytes (lazy2), ==, 0);
}

/* ---- bad input --------------------------------------------------------------- */

typedef struct {
  const char *drop;           /* tensor left out */
  const char *transpose;      /* tensor stored with its two dims swapped */
  const char *as_f32;         /* f16 tensor stored as f32 */
  const char *inf_in;         /* f16 tensor with an inf in it */
} TensorEdit;

/* A copy of tiny-awq in @dir with config.json's @from replaced by @to and the
 * tensors rewritten (one file) with @edit applied. */
static void
make_variant (const char *dir, const char *from, const char *to, const TensorEdit *edit)
{
  g_autofree char *src = data_path ("tiny-awq");
  g_autofree char *cfg_src = g_build_filename (src, "config.json", NULL);
  g_autofree char *cfg = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneSafetensors) st = hone_safetensors_open (src, &error);
  g_autoptr(HoneSafetensorsWriter) w = hone_safetensors_writer_new ();
  static const char *const copy[] = { "tokenizer.json", "tokenizer_config.json" };

  g_assert_no_error (error);
  g_assert_true (g_file_get_contents (cfg_src, &cfg, NULL, NULL));
  if (from != NULL)
    {
      g_auto(GStrv) parts = g_strsplit (cfg, from, 2);
      g_assert_cmpint (g_strv_length (parts), ==, 2);
      g_free (cfg);
      cfg = g_strjoin (to, parts[0], parts[1], NULL);
    }
  g_mkdir_with_parents (dir, 0755);
  {
    g_autofree char *p = g_build_filename (dir, "config.json", NULL);
    g_assert_true (g_file_set_contents (p, cfg, -1, NULL));
  }
  for (guint i = 0; i < G_N_ELEMENTS (copy); i++)
    {
      g_autofree char *a = g_build_filename (src, copy[i], NULL);
      g_autofree char *b = g_build_filename (dir, copy[i], NULL);
      g_autofree char *text = NULL;
      gsize len;
      g_assert_true (g_file_get_contents (a, &text, &len, NULL));
      g_assert_true (g_file_set_contents (b, text, (gssize) len, NULL));
    }
  for (guint i = 0; i < hone_safetensors_n_tensors (st); i++)
    {
      const HoneTensor *t = hone_safetensors_tensor (st, i);
      int64_t ne[2] = { t->ne[0], t->n_dims > 1 ? t->ne[1] : 1 };
      g_autofree void *copy_data = g_memdup2 (t->data, t->nbytes);
      HoneDType type = t->type;
      gsize nbytes = t->nbytes;

      if (edit && g_strcmp0 (edit->drop, t->name) == 0)
        continue;
      if (edit && g_strcmp0 (edit->transpose, t->name) == 0)
        {
          ne[0] = t->ne[1];
          ne[1] = t->ne[0];
        }
      if (edit && g_strcmp0 (edit->inf_in, t->name) == 0)
        ((guint16 *) copy_data)[3] = 0x7c00;
      if (edit && g_strcmp0 (edit->as_f32, t->name) == 0)
        {
          float *f = g_new (float, nbytes / 2);
          hone_dequantize_row (HONE_DTYPE_F16, copy_data, f, (int64_t) (nbytes / 2));
          g_free (copy_data);
          copy_data = f;
          nbytes *= 2;
          type = HONE_DTYPE_F32;
        }
      g_assert_true (hone_safetensors_writer_add_tensor (w, t->name, type, t->n_dims, ne, copy_data, nbytes, &error));
      g_assert_no_error (error);
    }
  {
    g_autofree char *p = g_build_filename (dir, "model.safetensors", NULL);
    g_assert_true (hone_safetensors_writer_write (w, p, &error));
    g_assert_no_error (error);
  }
}

typedef struct {
  const char *from, *to;
  TensorEdit edit;
  int code;
  const char *says;           /* the message names it */
} BadCase;

static void
test_bad_input (void)
{
  static const BadCase cases[] = {
    { "\"bits\": 4", "\"bits\": 8", { 0 }, HONE_ERROR_FILE_UNSUPPORTED, "8 bits" },
    { "\"bits\": 4", "\"bits\": 3", { 0 }, HONE_ERROR_FILE_UNSUPPORTED, "3 bits" },
    { "\"group_size\": 64", "\"group_size\": 256", { 0 }, HONE_ERROR_FILE_UNSUPPORTED, "group size 256" },
    { "\"group_size\": 64", "\"group_size\": 48", { 0 }, HONE_ERROR_FILE_UNSUPPORTED, "group size 48" },
    /* 128 is supported but does not divide hidden 64 */
    { "\"group_size\": 64", "\"group_size\": 128", { 0 }, HONE_ERROR_SHAPE_MISMATCH, "group size 128" },
    { "\"zero_point\": true", "\"zero_point\": false", { 0 }, HONE_ERROR_FILE_UNSUPPORTED, "zero_point" },
    { "\"version\": \"gemm\"", "\"version\": \"GEMV\"", { 0 }, HONE_ERROR_FILE_UNSUPPORTED, "GEMV layout" },
    { "\"version\": \"gemm\"", "\"version\": \"marlin\"", { 0 }, HONE_ERROR_FILE_UNSUPPORTED, "Marlin layout" },
    { "\"version\": \"gemm\"", "\"version\": \"exllama\"", { 0 }, HONE_ERROR_FILE_UNSUPPORTED, "ExLlama layout" },
    { "\"quant_method\": \"awq\"", "\"quant_method\": \"gptq\"", { 0 }, HONE_ERROR_FILE_UNSUPPORTED, "gptq" },
    { "\"quantization_config\"", "\"not_quantization_config\"", { 0 }, HONE_ERROR_FILE_UNSUPPORTED,
      "quantization_config" },
    { "\"bits\": 4", "\"bits\": \"four\"", { 0 }, HONE_ERROR_INVALID_JSON, "bits" },
    { "\"version\": \"gemm\"", "\"version\": 5", { 0 }, HONE_ERROR_INVALID_JSON, "version" },
    { "\"quant_method\": \"awq\"", "\"quant_method\": null", { 0 }, HONE_ERROR_FILE_UNSUPPORTED, "quant_method" },
    { NULL, NULL, { .drop = "model.layers.1.self_attn.k_proj.qzeros" }, HONE_ERROR_MISSING_TENSOR,
      "model.layers.1.self_attn.k_proj.qzeros" },
    { NULL, NULL, { .drop = "model.layers.0.mlp.up_proj.qweight" }, HONE_ERROR_MISSING_TENSOR,
      "model.layers.0.mlp.up_proj.qweight" },
    { NULL, NULL, { .transpose = "model.layers.0.mlp.down_proj.scales" }, HONE_ERROR_SHAPE_MISMATCH,
      "model.layers.0.mlp.down_proj.scales" },
    { NULL, NULL, { .transpose = "model.layers.1.self_attn.o_proj.qweight" }, HONE_ERROR_SHAPE_MISMATCH,
      "model.layers.1.self_attn.o_proj.qweight" },
    { NULL, NULL, { .as_f32 = "model.layers.0.self_attn.v_proj.scales" }, HONE_ERROR_UNSUPPORTED_TYPE,
      "model.layers.0.self_attn.v_proj.scales" },
    { NULL, NULL, { .inf_in = "model.layers.1.mlp.gate_proj.scales" }, HONE_ERROR_FILE_CORRUPT, "not finite" },
  };
  g_autofree char *tmp = g_dir_make_tmp ("hone-awq-load-XXXXXX", NULL);

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const BadCase *c = &cases[i];
      g_autofree char *dir = g_strdup_printf ("%s/case%u", tmp, i);
      g_autoptr(GError) error = NULL;
      g_autoptr(HoneModel) m = NULL;

      make_variant (dir, c->from, c->to, &c->edit);
      m = hone_model_open (dir, &error);
      g_assert_null (m);
      g_assert_nonnull (error);
      g_test_message ("case %u: %s", i, error->message);
      g_assert_error (error, HONE_ERROR, c->code);
      g_assert_nonnull (strstr (error->message, c->says));
      /* a deferred repack checks the same at open: the same error, not a later failure */
      {
        g_autoptr(GError) e2 = NULL;
        g_autoptr(HoneModel) m2 = hone_model_open_full (dir, HONE_MODEL_OPEN_DEFER_REPACK, &e2);
        g_assert_null (m2);
        g_assert_nonnull (e2);
        g_assert_cmpstr (e2->message, ==, error->message);
      }
    }
  /* The untouched variant loads (so the cases above fail for their reason). */
  {
    g_autofree char *dir = g_strdup_printf ("%s/good", tmp);
    g_autoptr(GError) error = NULL;
    g_autoptr(HoneModel) m = NULL;
    make_variant (dir, NULL, NULL, NULL);
    m = hone_model_open (dir, &error);
    g_assert_no_error (error);
    g_assert_cmpint (m->awq_group_size, ==, 64);
  }
  /* Older AutoAWQ exports: no quantization_config, a quant_config.json beside. */
  {
    g_autofree char *dir = g_strdup_printf ("%s/quant-config", tmp);
    g_autofree char *qc = g_build_filename (dir, "quant_config.json", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(HoneModel) m = NULL;
    make_variant (dir, "\"quantization_config\"", "\"not_quantization_config\"", NULL);
    g_assert_true (g_file_set_contents (qc, "{\"zero_point\": true, \"q_group_size\": 64, \"w_bit\": 4, "
                                            "\"version\": \"GEMM\"}", -1, NULL));
    m = hone_model_open (dir, &error);
    g_assert_no_error (error);
    g_assert_cmpint (m->awq_group_size, ==, 64);
    g_assert_cmpint (m->layers[1].w_down.type, ==, HONE_DTYPE_Q4Z);
  }
  /* A truncated shard. */
  {
    g_autofree char *src = data_path ("tiny-awq");
    g_autofree char *dir = g_strdup_printf ("%s/truncated", tmp);
    const char *files[] = { "config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors.index.json",
                            "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors" };
    g_autoptr(GError) error = NULL;
    g_autoptr(HoneModel) m = NULL;
    g_mkdir_with_parents (dir, 0755);
    for (guint i = 0; i < G_N_ELEMENTS (files); i++)
      {
        g_autofree char *a = g_build_filename (src, files[i], NULL);
        g_autofree char *b = g_build_filename (dir, files[i], NULL);
        g_autofree char *text = NULL;
        gsize len;
        g_assert_true (g_file_get_contents (a, &text, &len, NULL));
        if (i == G_N_ELEMENTS (files) - 1)
          len /= 2;
        g_assert_true (g_file_set_contents (b, text, (gssize) len, NULL));
      }
    m = hone_model_open (dir, &error);
    g_assert_null (m);
    g_assert_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT);
  }
  /* Q4Z never goes into a GGUF. */
  {
    g_autoptr(HoneGgufWriter) gw = hone_gguf_writer_new ();
    g_autoptr(GError) error = NULL;
    guint8 block[20] = { 0 };
    int64_t ne[2] = { 32, 1 };
    g_assert_false (hone_dtype_is_gguf (HONE_DTYPE_Q4Z));
    g_assert_false (hone_gguf_writer_add_tensor (gw, "w", HONE_DTYPE_Q4Z, 2, ne, block, sizeof block, &error));
    g_assert_error (error, HONE_ERROR, HONE_ERROR_UNSUPPORTED_TYPE);
  }
  hone_test_rm_rf (tmp);
}

/* ---- the default model ------------------------------------------------------- */

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
  g_autofree char *tmp = g_dir_make_tmp ("hone-awq-load-XXXXXX", NULL);
  g_autofree char *out = g_build_filename (tmp, "awq", NULL);
  g_autoptr(HoneModel) model = NULL, m_report = NULL, m_loaded = NULL;
  g_autoptr(HoneAwqData) d = NULL;
  g_autoptr(HoneAwqResult) awq = NULL;
  g_autoptr(HoneEngine) e = NULL;
  g_autoptr(HoneSession) s = NULL;
  g_autoptr(GError) error = NULL;
  HoneModel *models[3];
  HoneQuantEvalScore sc[3];
  HoneAwqOptions o;
  HoneSamplerParams p;
  HoneGenerateResult *r;
  const char *paths[2];
  double rel;

  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    {
      g_test_fail_printf ("the default model is missing: %s (run .ci/fetch-model)", path);
      return;
    }
  model = hone_model_open (path, &error);
  g_assert_no_error (error);
  texts = g_build_filename (root, "data", "calibration", "texts", NULL);
  paths[0] = texts;
  paths[1] = NULL;
  /* A short calibration (4 × 64 tokens) keeps the model suite fast; the
   * figure compared is whatever that calibration gives. */
  d = hone_awq_data_load (model->tokenizer, paths, 4, 64, 4, NULL, &error);
  g_assert_no_error (error);
  hone_awq_options_init (&o);
  o.group_size = 64;
  o.loss_tokens = 128;
  o.clip_tokens = 128;
  awq = hone_awq_quantize (model, d->samples, d->n_samples, d->seq_len, &o, NULL, NULL, NULL, &error);
  g_assert_no_error (error);
  /* The quality report's AWQ model (as `hone quantize` evaluates it). */
  m_report = hone_awq_result_open_model (awq, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (hone_awq_export_safetensors (awq, out, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  m_loaded = hone_model_open (out, &error);
  g_assert_no_error (error);
  g_assert_cmpint (m_loaded->awq_group_size, ==, 64);
  g_assert_cmpint (m_loaded->layers[0].wq.type, ==, HONE_DTYPE_Q4Z);

  models[0] = model;
  models[1] = m_report;
  models[2] = m_loaded;
  g_assert_true (hone_quant_eval (models, 3, d->heldout, d->n_heldout, d->seq_len, 0, sc, NULL, &error));
  g_assert_no_error (error);
  rel = fabs (sc[2].ppl - sc[1].ppl) / sc[1].ppl;
  g_test_message ("held-out ppl: original %.4f, report's AWQ (Q4_1 GGUF) %.4f, loaded AutoAWQ folder (Q4Z) %.4f "
                  "(rel. diff %.2e); KL %.5f vs %.5f; top-1 %.3f vs %.3f",
                  sc[0].ppl, sc[1].ppl, sc[2].ppl, rel, sc[1].kl, sc[2].kl, sc[1].top1, sc[2].top1);
  /* The int4 weights are identical (test-awq checks the values); what
   * differs is the tied embedding/lm_head: Q8_0 in the report's GGUF, its fp16
   * rounding in the folder, and the fp16 lm_head runs on f32 activations
   * instead of 8-bit ones. Measured 1.5–1.9 % apart (the folder lower) at
   * these 64-token samples; bound 3 %. */
  g_assert_cmpfloat (rel, <=, 0.03);
  /* And the two agree as distributions: KL and top-1 of the folder against
   * the report's model (measured separately, the report's model as reference). */
  models[0] = m_report;
  models[1] = m_loaded;
  g_assert_true (hone_quant_eval (models, 2, d->heldout, d->n_heldout, d->seq_len, 0, sc, NULL, &error));
  g_assert_no_error (error);
  g_test_message ("loaded folder vs report's model: KL %.5f, top-1 %.3f", sc[1].kl, sc[1].top1);
  /* Measured KL 0.0029–0.0030, top-1 0.960–0.972 (the kernels' summation
   * order moves near-ties); bounds 0.02 and 0.93. */
  g_assert_cmpfloat (sc[1].kl, <=, 0.02);
  g_assert_cmpfloat (sc[1].top1, >=, 0.93);

  /* Greedy generation through the engine. */
  e = hone_engine_new ();
  hone_engine_set_device (e, "cpu");
  g_assert_true (hone_engine_load_sync (e, out, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  s = hone_session_new (e);
  hone_sampler_params_init_greedy (&p);
  p.max_tokens = 12;
  r = hone_session_complete_sync (s, "The capital of France is", &p, NULL, NULL, NULL, &error);
  g_assert_no_error (error);
  g_test_message ("greedy: “The capital of France is%s” (%u tokens)", r->text, r->generated_tokens->len);
  g_assert_cmpuint (r->generated_tokens->len, >=, 1);
  g_assert_true (g_utf8_validate (r->text, -1, NULL));
  hone_generate_result_free (r);
  hone_test_rm_rf (tmp);
}

int
main (int argc, char **argv)
{
  gboolean model = hone_test_take_flag (&argc, argv, "--model");

  g_test_init (&argc, &argv, NULL);
  if (model)
    {
      g_test_add_func ("/awq-load/default-model", test_default_model);
      return g_test_run ();
    }
  g_test_add_func ("/awq-load/values", test_values);
  g_test_add_func ("/awq-load/linears", test_linears);
  g_test_add_func ("/awq-load/repack-threads", test_repack_threads);
  g_test_add_func ("/awq-load/source-rows", test_source_rows);
  g_test_add_func ("/awq-load/deferred", test_deferred);
  g_test_add_func ("/awq-load/kernels", test_kernels);
  g_test_add_func ("/awq-load/forward", test_forward);
  g_test_add_func ("/awq-load/info", test_info);
  g_test_add_func ("/awq-load/engine", test_engine);
  g_test_add_func ("/awq-load/bad-input", test_bad_input);
  return g_test_run ();
}
