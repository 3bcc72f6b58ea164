/* test-cuda-awq.c — AWQ calibration on the GPU against the CPU implementation
 * (suite `cuda`: needs a GPU; every test skips with the reason when there is
 * none, or when the library was built without CUDA).
 *
 * The CPU implementation (hone-awq.c, checked in test-awq against AutoAWQ's
 * formulas worked by hand and against RTN on real text) is the reference.
 * Both run the same algorithm; they differ in GEMM operand rounding (GPU:
 * TF32 tensor cores by default, f32 or BF16: HONE_AWQ_GEMM) and summation order.
 * Checks:
 *  - round to nearest (no search) gives bit-identical q/z/s on both: the
 *    device quantizer is the CPU's bit for bit;
 *  - per layer and scaling group the chosen grid ratio is the CPU's in most
 *    groups, and where it is not, the CPU's own loss of the GPU's choice is
 *    within 1 % of the CPU's best (a near-tie that operand rounding decides);
 *  - the quantized weights are equal in ≥ 99 % (BF16: 98 %) of the values of
 *    layers whose choices all agree;
 *  - held-out perplexity of the GPU result within 0.5 % of the CPU result's
 *    (both through the CPU backend, hone_quant_eval) on the default model and
 *    with f32 GEMMs. With TF32 on the tiny random models a near-tie choice
 *    moves their perplexity by up to ~1 % either way (measured: a 0.026 %
 *    loss gap gave −1.02 %), about as much as quantizing at all does; there
 *    the bound is 2 % and the GPU result's KL divergence from the original
 *    must be within 5 % of the CPU result's;
 *  - two GPU runs give identical bits; bad input and cancel as on the CPU.
 * With --model: the same on the default model (8 samples × 128 tokens of the
 * built-in calibration texts, loss over 256 tokens, group 64).
 * With --time MODEL SAMPLES SEQ_LEN: calibrate MODEL with random token ids on
 * the GPU and print the timing (for tests/bench/RESULTS-awq.md).
 */
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hone-awq.h"
#include "hone-awq-data.h"
#include "hone-awq-export.h"
#include "hone-error.h"
#include "hone-model.h"
#include "hone-quant-eval.h"
#include "hone-test-models.h"
#ifdef HONE_HAVE_CUDA
#include "cuda/hone-cuda-awq.h"
#include "hone-test-data.h"
#endif

static gboolean
gpu_or_skip (void)
{
#ifdef HONE_HAVE_CUDA
  g_autoptr(GError) error = NULL;
  if (hone_cuda_awq_available (&error))
    return TRUE;
  g_assert_true (strchr (error->message, '\n') == NULL);
  {
    g_autofree char *msg = g_strdup_printf ("no GPU for AWQ: %s", error->message);
    g_test_skip (msg);
  }
#else
  g_test_skip ("built without CUDA");
#endif
  return FALSE;
}

static HoneAwqResult *
run_on (const char *device, HoneModel *model, const gint32 *tokens, int n, int L, const HoneAwqOptions *o,
        GError **error)
{
  HoneAwqResult *r;
  g_setenv ("HONE_AWQ_DEVICE", device, TRUE);
  r = hone_awq_quantize (model, tokens, n, L, o, NULL, NULL, NULL, error);
  g_unsetenv ("HONE_AWQ_DEVICE");
  return r;
}

/* ---- comparisons ---------------------------------------------------------- */

typedef struct {
  int groups, same, near_tie;      /* searched groups; equal choices; differing but within 1 % */
  double worst_gap;                /* largest relative gap of a differing choice (CPU losses) */
  gint64 values, equal_values;     /* q values in layers whose choices all agree */
  double ppl_cpu, ppl_gpu, kl_cpu, kl_gpu;
} Comparison;

static void
compare (HoneModel *model, const HoneAwqResult *cpu, const HoneAwqResult *gpu, const gint32 *heldout, int n_heldout,
         int seq_len, Comparison *cmp)
{
  const HoneModelConfig *c = &model->config;
  int ng = cpu->n_grid;

  memset (cmp, 0, sizeof *cmp);
  g_assert_false (cpu->cuda);
  g_assert_true (gpu->cuda);
  g_assert_cmpint (gpu->n_grid, ==, ng);
  for (int l = 0; l < c->n_layers; l++)
    {
      gboolean all_same = TRUE;
      for (int gr = 0; gr < HONE_AWQ_N_GROUPS && cpu->search_choice; gr++)
        {
          int a = cpu->search_choice[l * HONE_AWQ_N_GROUPS + gr], b = gpu->search_choice[l * HONE_AWQ_N_GROUPS + gr];
          const double *la = cpu->search_loss + ((gsize) l * HONE_AWQ_N_GROUPS + gr) * ng;
          const double *lb = gpu->search_loss + ((gsize) l * HONE_AWQ_N_GROUPS + gr) * ng;
          g_assert_cmpint ((a < 0), ==, (b < 0));         /* the same groups were searched */
          if (a < 0)
            continue;
          cmp->groups++;
          /* The losses themselves agree to operand rounding. */
          g_assert_cmpfloat (fabs (lb[a] - la[a]), <=, 0.05 * la[a] + 1e-12);
          if (a == b)
            cmp->same++;
          else
            {
              double gap = (la[b] - la[a]) / la[a];
              all_same = FALSE;
              cmp->worst_gap = MAX (cmp->worst_gap, gap);
              if (gap <= 0.01)
                cmp->near_tie++;
              g_test_message ("layer %d group %d: CPU picks %d (%.6g), GPU %d (CPU loss %.6g, +%.3f %%)", l, gr, a,
                              la[a], b, la[b], 100 * gap);
            }
        }
      if (!all_same)
        continue;
      for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
        {
          const HoneAwqLinear *x = &cpu->layers[l].lin[i], *y = &gpu->layers[l].lin[i];
          g_assert_cmpint (x->N, ==, y->N);
          g_assert_cmpint (x->K, ==, y->K);
          for (int r = 0; r < x->N; r++)
            for (int k = 0; k < x->K; k++)
              cmp->equal_values += hone_awq_linear_q (x, r, k) == hone_awq_linear_q (y, r, k);
          cmp->values += (gint64) x->N * x->K;
        }
    }
  {
    g_autoptr(HoneModel) m_cpu = NULL, m_gpu = NULL;
    HoneModel *models[3];
    HoneQuantEvalScore sc[3];
    GError *error = NULL;
    m_cpu = hone_awq_result_open_model (cpu, NULL, &error);
    g_assert_no_error (error);
    m_gpu = hone_awq_result_open_model (gpu, NULL, &error);
    g_assert_no_error (error);
    models[0] = model;
    models[1] = m_cpu;
    models[2] = m_gpu;
    g_assert_true (hone_quant_eval (models, 3, heldout, n_heldout, seq_len, 0, sc, NULL, &error));
    g_assert_no_error (error);
    cmp->ppl_cpu = sc[1].ppl;
    cmp->ppl_gpu = sc[2].ppl;
    cmp->kl_cpu = sc[1].kl;
    cmp->kl_gpu = sc[2].kl;
    g_test_message ("held-out ppl: original %.4f, CPU AWQ %.4f, GPU AWQ %.4f (%+.3f %%); KL %.5f vs %.5f",
                    sc[0].ppl, sc[1].ppl, sc[2].ppl, 100 * (sc[2].ppl / sc[1].ppl - 1), sc[1].kl, sc[2].kl);
  }
  g_test_message ("choices equal in %d of %d groups; %d differ as near-ties (≤ 1 %%), worst gap %.3f %%; "
                  "q equal in %.3f %% of %" G_GINT64_FORMAT " values of agreeing layers; GPU %.2f s, CPU %.2f s",
                  cmp->same, cmp->groups, cmp->near_tie, 100 * cmp->worst_gap,
                  cmp->values ? 100.0 * cmp->equal_values / cmp->values : 100.0, cmp->values, gpu->seconds,
                  cpu->seconds);
}

static void
assert_comparison (const Comparison *cmp, double min_same, double min_equal, double ppl_tol)
{
  g_assert_cmpint (cmp->groups, >, 0);
  g_assert_cmpfloat ((double) cmp->same / cmp->groups, >=, min_same);
  g_assert_cmpint (cmp->same + cmp->near_tie, ==, cmp->groups);
  if (cmp->values > 0)
    g_assert_cmpfloat ((double) cmp->equal_values / cmp->values, >=, min_equal);
  g_assert_cmpfloat (fabs (cmp->ppl_gpu / cmp->ppl_cpu - 1), <=, ppl_tol);
  g_assert_cmpfloat (cmp->kl_gpu, <=, 1.05 * cmp->kl_cpu + 1e-9);
}

static void
assert_identical (const HoneAwqResult *a, const HoneAwqResult *b)
{
  const HoneModelConfig *c = &a->model->config;
  for (int l = 0; l < c->n_layers; l++)
    {
      const HoneAwqLayer *x = &a->layers[l], *y = &b->layers[l];
      g_assert_cmpmem (x->attn_norm, c->hidden * sizeof (float), y->attn_norm, c->hidden * sizeof (float));
      g_assert_cmpmem (x->ffn_norm, c->hidden * sizeof (float), y->ffn_norm, c->hidden * sizeof (float));
      for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
        {
          const HoneAwqLinear *p = &x->lin[i], *q = &y->lin[i];
          gsize n = (gsize) p->N * p->K, ng = n / p->group_size;
          g_assert_cmpmem (p->q, n / 2, q->q, n / 2);
          g_assert_cmpmem (p->z, ng, q->z, ng);
          g_assert_cmpmem (p->s, ng * 2, q->s, ng * 2);
        }
    }
}

/* ---- tiny generated models --------------------------------------------------- */

typedef struct {
  char *dir;
  HoneModel *model;
  gint32 *tokens, *heldout;
  int n_samples, n_heldout, seq_len;
} Fixture;

typedef struct {
  HoneArch arch;
  HoneDType type;
  int n_kv_heads;
} Variant;

static const Variant v_llama_mha = { HONE_ARCH_LLAMA, HONE_DTYPE_Q8_0, 4 };    /* v→o runs; llama row order */
static const Variant v_qwen2 = { HONE_ARCH_QWEN2, HONE_DTYPE_BF16, 2 };       /* biases, GQA, BF16 upload */
static const Variant v_qwen3 = { HONE_ARCH_QWEN3, HONE_DTYPE_F16, 2 };        /* q/k norms, F16 upload */

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  const Variant *v = data;
  HoneTestModelSpec spec;
  GError *error = NULL;
  g_autofree char *path = NULL;
  GRand *r = g_rand_new_with_seed (5);

  hone_test_model_spec_init (&spec, v->arch, v->type);
  spec.n_heads = 4;
  spec.n_kv_heads = v->n_kv_heads;
  f->dir = g_dir_make_tmp ("hone-cuda-awq-XXXXXX", &error);
  g_assert_no_error (error);
  path = hone_test_model_write_gguf (f->dir, &spec, &error);
  g_assert_no_error (error);
  f->model = hone_model_open (path, &error);
  g_assert_no_error (error);
  f->n_samples = 4;
  f->n_heldout = 3;
  f->seq_len = 32;
  f->tokens = g_new (gint32, f->n_samples * f->seq_len);
  f->heldout = g_new (gint32, f->n_heldout * f->seq_len);
  for (int i = 0; i < f->n_samples * f->seq_len; i++)
    f->tokens[i] = g_rand_int_range (r, 0, f->model->config.vocab);
  for (int i = 0; i < f->n_heldout * f->seq_len; i++)
    f->heldout[i] = g_rand_int_range (r, 0, f->model->config.vocab);
  g_rand_free (r);
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  hone_model_unref (f->model);
  hone_test_rm_rf (f->dir);
  g_free (f->dir);
  g_free (f->tokens);
  g_free (f->heldout);
}

static void
tiny_options (HoneAwqOptions *o)
{
  hone_awq_options_init (o);
  o->group_size = 64;
  o->clip_tokens = 64;
}

/* No search: the two quantizers must agree bit for bit. */
static void
test_rtn_exact (Fixture *f, gconstpointer data)
{
  g_autoptr(HoneAwqResult) a = NULL, b = NULL;
  GError *error = NULL;
  HoneAwqOptions o;

  if (!gpu_or_skip ())
    return;
  tiny_options (&o);
  o.search_scales = o.search_clip = FALSE;
  a = run_on ("cpu", f->model, NULL, 0, 0, &o, &error);
  g_assert_no_error (error);
  b = run_on ("cuda", f->model, NULL, 0, 0, &o, &error);
  g_assert_no_error (error);
  g_assert_true (b->cuda);
  assert_identical (a, b);
}

/* The whole calibration, with f32 GEMMs (differences: summation order only),
 * with the default TF32 operands and with BF16 ones. */
static void
test_vs_cpu (Fixture *f, gconstpointer data)
{
  const char *precs[] = { "f32", "tf32", "bf16" };
  GError *error = NULL;
  HoneAwqOptions o;

  if (!gpu_or_skip ())
    return;
  tiny_options (&o);
  for (guint p = 0; p < G_N_ELEMENTS (precs); p++)
    {
      g_autoptr(HoneAwqResult) cpu = NULL, gpu = NULL;
      Comparison cmp;
      g_setenv ("HONE_AWQ_GEMM", precs[p], TRUE);
      cpu = run_on ("cpu", f->model, f->tokens, f->n_samples, f->seq_len, &o, &error);
      g_assert_no_error (error);
      gpu = run_on ("cuda", f->model, f->tokens, f->n_samples, f->seq_len, &o, &error);
      g_assert_no_error (error);
      g_unsetenv ("HONE_AWQ_GEMM");
      g_test_message ("GEMM operands %s:", precs[p]);
      compare (f->model, cpu, gpu, f->heldout, f->n_heldout, f->seq_len, &cmp);
      /* f32: all choices equal, q 100 % equal, ppl ±0.03 % (measured on the
       * H200); tf32: ≥ 4 of 6 choices, q ≥ 99.85 %, ppl ±1.02 %; bf16: ≥ 4 of 6,
       * q ≥ 98.95 %, ppl ±1.40 %. */
      assert_comparison (&cmp, p == 0 ? 0.85 : 0.6, p == 2 ? 0.98 : 0.99, p == 0 ? 0.005 : 0.02);
    }
}

static void
test_deterministic (Fixture *f, gconstpointer data)
{
  g_autoptr(HoneAwqResult) a = NULL, b = NULL;
  GError *error = NULL;
  HoneAwqOptions o;

  if (!gpu_or_skip ())
    return;
  tiny_options (&o);
  a = run_on ("cuda", f->model, f->tokens, f->n_samples, f->seq_len, &o, &error);
  g_assert_no_error (error);
  b = run_on ("cuda", f->model, f->tokens, f->n_samples, f->seq_len, &o, &error);
  g_assert_no_error (error);
  assert_identical (a, b);
  g_assert_cmpmem (a->search_loss, sizeof (double) * f->model->config.n_layers * HONE_AWQ_N_GROUPS * o.n_grid,
                   b->search_loss, sizeof (double) * f->model->config.n_layers * HONE_AWQ_N_GROUPS * o.n_grid);
}

static void
cancel_after_first (int layer, int n_layers, double elapsed, double eta, gpointer data)
{
  g_assert_cmpfloat (eta, >=, 0.0);
  g_cancellable_cancel (data);
}

static void
test_bad_input (Fixture *f, gconstpointer data)
{
  g_autoptr(GCancellable) cancel = g_cancellable_new ();
  HoneAwqResult *r;
  GError *error = NULL;
  HoneAwqOptions o;
  gint32 bad[32];

  if (!gpu_or_skip ())
    return;
  tiny_options (&o);
  memcpy (bad, f->tokens, sizeof bad);
  bad[7] = f->model->config.vocab;
  r = run_on ("cuda", f->model, bad, 1, 32, &o, &error);
  g_assert_null (r);
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  o.group_size = 48;
  r = run_on ("cuda", f->model, f->tokens, f->n_samples, f->seq_len, &o, &error);
  g_assert_null (r);
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  tiny_options (&o);
  r = run_on ("cuda", f->model, NULL, 0, 0, &o, &error);
  g_assert_null (r);
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  r = run_on ("gpu0", f->model, f->tokens, f->n_samples, f->seq_len, &o, &error);
  g_assert_null (r);
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  /* Cancel from the progress callback after layer 0: nothing kept. */
  g_setenv ("HONE_AWQ_DEVICE", "cuda", TRUE);
  r = hone_awq_quantize (f->model, f->tokens, f->n_samples, f->seq_len, &o, cancel_after_first, cancel, cancel,
                         &error);
  g_unsetenv ("HONE_AWQ_DEVICE");
  g_assert_null (r);
  g_assert_error (error, HONE_ERROR, HONE_ERROR_CANCELLED);
  g_clear_error (&error);
}

/* ---- the default model ------------------------------------------------------------ */

static void
test_default_model (void)
{
  const char *env = g_getenv ("HONE_DEFAULT_MODEL");
  g_autofree char *path = env && *env ? g_strdup (env)
                        : g_build_filename (g_get_user_cache_dir (), "hone", "models",
                                            "SmolLM2-135M-Instruct.Q4_1.gguf", NULL);
  const char *root = g_getenv ("HONE_SOURCE_ROOT");
  g_autofree char *texts = root ? g_build_filename (root, "data", "calibration", "texts", NULL) : NULL;
  g_autoptr(HoneModel) model = NULL;
  g_autoptr(HoneAwqData) d = NULL;
  GError *error = NULL;
  HoneAwqOptions o;
  const char *paths[2] = { texts, NULL };

  if (!gpu_or_skip ())
    return;
  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    {
      g_test_fail_printf ("the default model is missing: %s (run .ci/fetch-model)", path);
      return;
    }
  g_assert_nonnull (texts);
  model = hone_model_open (path, &error);
  g_assert_no_error (error);
  d = hone_awq_data_load (model->tokenizer, paths, 8, 128, 4, NULL, &error);
  g_assert_no_error (error);
  hone_awq_options_init (&o);
  o.group_size = 64;
  o.loss_tokens = 256;
  o.clip_tokens = 256;
  /* The default operands and the f32 reference; BF16 is not held to these
   * bounds (measured: a layer's loss 7 % off the CPU's, see RESULTS-awq.md). */
  for (int p = 0; p < 2; p++)
    {
      static const char *const precs[] = { "tf32", "f32" };
      g_autoptr(HoneAwqResult) cpu = NULL, gpu = NULL;
      Comparison cmp;
      g_setenv ("HONE_AWQ_GEMM", precs[p], TRUE);
      cpu = run_on ("cpu", model, d->samples, d->n_samples, d->seq_len, &o, &error);
      g_assert_no_error (error);
      gpu = run_on ("cuda", model, d->samples, d->n_samples, d->seq_len, &o, &error);
      g_assert_no_error (error);
      g_unsetenv ("HONE_AWQ_GEMM");
      g_test_message ("default model (%d layers), GEMM operands %s:", model->config.n_layers, precs[p]);
      compare (model, cpu, gpu, d->heldout, d->n_heldout, d->seq_len, &cmp);
      assert_comparison (&cmp, 0.6, 0.99, 0.005);
    }
}

/* ---- timing ---------------------------------------------------------------------------- */

static void
print_progress (int layer, int n_layers, double elapsed, double eta, gpointer data)
{
  g_printerr ("layer %d/%d done: %.2f s elapsed, ETA %.1f s\n", layer + 1, n_layers, elapsed, eta);
}

static int
time_model (const char *path, int n_samples, int seq_len, const char *export_to)
{
  g_autoptr(HoneModel) model = NULL;
  g_autoptr(HoneAwqResult) r = NULL;
  g_autofree gint32 *tokens = NULL;
  GError *error = NULL;
  HoneAwqOptions o;
  gint64 t0 = g_get_monotonic_time (), t1, t2;
  GRand *rand = g_rand_new_with_seed (1);

  model = hone_model_open (path, &error);
  if (model == NULL)
    {
      g_printerr ("%s\n", error->message);
      return 1;
    }
  t1 = g_get_monotonic_time ();
  tokens = g_new (gint32, (gsize) n_samples * seq_len);
  for (gsize i = 0; i < (gsize) n_samples * seq_len; i++)
    tokens[i] = g_rand_int_range (rand, 0, model->config.vocab);
  g_rand_free (rand);
  hone_awq_options_init (&o);
  r = hone_awq_quantize (model, tokens, n_samples, seq_len, &o, print_progress, NULL, NULL, &error);
  if (r == NULL)
    {
      g_printerr ("%s\n", error->message);
      return 1;
    }
  t2 = g_get_monotonic_time ();
  printf ("model %s: %d layers, hidden %d, ffn %d; %d × %d tokens, group %d, loss over all tokens; on %s\n", path,
          model->config.n_layers, model->config.hidden, model->config.ffn, n_samples, seq_len, o.group_size,
          r->cuda ? "GPU" : "CPU");
  printf ("open %.2f s, calibrate %.2f s (%.2f s a layer)\n", (t1 - t0) / 1e6, (t2 - t1) / 1e6,
          (t2 - t1) / 1e6 / model->config.n_layers);
  fflush (stdout);
  if (export_to)
    {
      if (!hone_awq_export_gguf (r, export_to, NULL, NULL, NULL, &error))
        {
          g_printerr ("%s\n", error->message);
          return 1;
        }
      printf ("export GGUF %.2f s\n", (g_get_monotonic_time () - t2) / 1e6);
    }
  return 0;
}

int
main (int argc, char **argv)
{
  gboolean with_model = FALSE;

  if (argc >= 5 && strcmp (argv[1], "--time") == 0)
    return time_model (argv[2], atoi (argv[3]), atoi (argv[4]), argc > 5 ? argv[5] : NULL);
  with_model = hone_test_take_flag (&argc, argv, "--model");
  g_test_init (&argc, &argv, NULL);
  if (with_model)
    {
      g_test_add_func ("/cuda-awq/default-model", test_default_model);
      return g_test_run ();
    }
  g_test_add ("/cuda-awq/rtn-exact/llama", Fixture, &v_llama_mha, fixture_setup, test_rtn_exact, fixture_teardown);
  g_test_add ("/cuda-awq/rtn-exact/qwen2-bf16", Fixture, &v_qwen2, fixture_setup, test_rtn_exact, fixture_teardown);
  g_test_add ("/cuda-awq/vs-cpu/llama-mha", Fixture, &v_llama_mha, fixture_setup, test_vs_cpu, fixture_teardown);
  g_test_add ("/cuda-awq/vs-cpu/qwen2-bf16", Fixture, &v_qwen2, fixture_setup, test_vs_cpu, fixture_teardown);
  g_test_add ("/cuda-awq/vs-cpu/qwen3-f16", Fixture, &v_qwen3, fixture_setup, test_vs_cpu, fixture_teardown);
  g_test_add ("/cuda-awq/deterministic", Fixture, &v_llama_mha, fixture_setup, test_deterministic, fixture_teardown);
  g_test_add ("/cuda-awq/bad-input", Fixture, &v_qwen2, fixture_setup, test_bad_input, fixture_teardown);
  return g_test_run ();
}
