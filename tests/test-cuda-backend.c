/* test-cuda-backend.c — the CUDA backend against the CPU backend on the default
 * model (suite `cuda`: needs a GPU; skips with the reason when there is none).
 *
 * The CPU backend (src/core/cpu, checked against f64 references and
 * llama.cpp by its own tests) is the reference here. Both run the same
 * weights; they differ in activation rounding (CPU: int8 activations for
 * quantized dots; CUDA decode: int8 per 32, CUDA prefill: f16 operands on
 * the tensor cores) and in summation order. Bounds: relative L2 error of the
 * logits over all positions < 5e-2; top-1 equal on >= 99 % of the positions
 * the reference decides (see compare()) and >= 95 % of all 512, for the
 * prefill (GEMM) path, the one-token graph path and 5-token GEMV steps.
 *
 * /cuda/tiny/<type>: the same comparison on tiny generated models (2 layers,
 * hidden 256, 4/2 heads of 64, FFN 512, vocab 300; tests/hone-test-models.h)
 * of every weight type the CUDA backend takes — F16, BF16, Q8_0, Q4_0, Q4_1,
 * Q4_K, Q6_K (GGUF, uploaded in their own GPU layouts; K-quant embeddings
 * and lm_head too) and AWQ int4 (Q4Z: the F16 model quantized round-to-
 * nearest at group 64 and exported as an AutoAWQ folder) — over 40 tokens,
 * prefill (GEMM path, all logits) and decode (3-token prefill, one token a
 * step through the graph, then 5-token GEMV steps). Bounds, as above:
 * relative L2 error of all logits < 5e-2; top-1 equal on >= 99 % of the
 * positions where the CPU's winner leads by >= MARGIN (at least a quarter of
 * them must be so decided) and on >= 85 % of all (random tiny models have
 * flatter logits than a trained one).
 *
 * /cuda/mixed/<name>: tiny models whose matrices differ in type inside one
 * model, as llama.cpp's mixes do — "Q4_K_M" (attn_q/attn_k Q4_K, attn_v
 * Q6_K, ffn_down Q6_K in layer 1, output Q6_K: the Hub's most common file),
 * 3-part q|k|v (Q8_0|BF16|Q4_1), and qwen2 (biases, half-split RoPE) with
 * F16|Q6_K|Q4_K — whose q|k|v the CUDA backend keeps as native parts
 * (HONE_K_PARTS). Same comparison and bounds as /cuda/tiny; plus memory: the
 * weights on the GPU within 2 % of the GGUF tensors' bytes (the F16 upload of
 * q|k|v this replaces would be ~35 % more) and the before-load estimate
 * within 5 % of the device memory the load took.
 */
#include <cuda_runtime_api.h>
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hone-awq.h"
#include "hone-awq-export.h"
#include "hone-backend.h"
#include "hone-default-model.h"
#include "hone-engine.h"
#include "hone-error.h"
#include "hone-kernels.h"
#include "hone-model.h"
#include "hone-sampler.h"
#include "hone-tokenizer.h"
#include "hone-test-data.h"
#include "hone-test-models.h"

#define N_POS 512

static HoneModel *model;
static GArray *tokens;     /* N_POS ids of real text */
static float *cpu_logits;  /* N_POS × vocab */

static const char text[] =
  "The history of the printing press begins in the fifteenth century, when Johannes Gutenberg combined "
  "a screw press with movable metal type, oil-based ink and a hand mould for casting letters. Within a few "
  "decades printing shops had spread from Mainz to more than two hundred cities across Europe, and the price "
  "of books fell so far that ordinary merchants could own them. Scholars argue about how much this changed "
  "society: some credit the press with the Reformation and the scientific revolution, while others point out "
  "that manuscripts kept circulating for a long time and that literacy rose slowly. What is certain is that "
  "the ability to reproduce a text exactly, many times, made it possible to compare editions, to correct "
  "errors, and to build on the work of others in a way that copying by hand never allowed. ";

static HoneBackend *
new_cuda (void)
{
  GError *error = NULL;
  HoneBackend *be = hone_cuda_backend_new (0, &error);
  char *msg;

  if (be == NULL)
    {
      g_assert_nonnull (error);
      g_assert_true (strchr (error->message, '\n') == NULL);   /* a one-line reason */
      msg = g_strdup_printf ("no CUDA backend: %s", error->message);
      g_test_skip (msg);
      g_free (msg);
      g_error_free (error);
    }
  return be;
}

static gboolean
ensure_reference (void)
{
  HoneBackend *probe;

  GError *error = NULL;
  g_autofree char *path = NULL;
  HoneBackend *cpu;
  HoneBackendOptions opt = { 0 };
  HoneBatch b;
  int seq;

  if (cpu_logits)
    return TRUE;
  /* no GPU: skip before spending time on the CPU reference */
  if (!(probe = new_cuda ()))
    return FALSE;
  hone_backend_free (probe);
  path = hone_default_model_find (&error);
  if (!path)
    {
      char *msg = g_strdup_printf ("default model: %s", error->message);
      g_test_skip (msg);
      g_free (msg);
      g_error_free (error);
      return FALSE;
    }
  model = hone_model_open (path, &error);
  g_assert_no_error (error);
  tokens = g_array_new (FALSE, FALSE, sizeof (gint32));
  while (tokens->len < N_POS)
    g_assert_true (hone_tokenizer_encode (model->tokenizer, text, -1, 0, tokens, &error));
  g_array_set_size (tokens, N_POS);

  cpu = hone_cpu_backend_new (&error);
  g_assert_no_error (error);
  opt.max_context = 1024;
  g_assert_true (cpu->klass->load (cpu, model, &opt, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  seq = cpu->klass->seq_new (cpu, &error);
  g_assert_cmpint (seq, >=, 0);
  cpu_logits = g_new (float, (gsize) N_POS * model->config.vocab);
  b = (HoneBatch) { seq, (const gint32 *) tokens->data, N_POS, TRUE, cpu_logits };
  g_assert_true (cpu->klass->forward (cpu, &b, NULL, &error));
  g_assert_no_error (error);
  hone_backend_free (cpu);
  return TRUE;
}

static int
argmax (const float *v, int n)
{
  int b = 0;
  for (int i = 1; i < n; i++)
    if (v[i] > v[b])
      b = i;
  return b;
}

/* The two backends round activations differently (see the top), so where
 * the reference's best two logits are within a hair of each other either
 * may win: top-1 is required to agree on >= 99 % of the positions where the
 * CPU's winner leads by at least MARGIN, and the raw agreement is reported.
 * (On the full 30-layer default model nearly every position is decided; the
 * 8-layer cut carried to the GPU machine has flatter distributions.) */
#define MARGIN 0.25

/* Logits @got against @ref, n rows of V (row p is position first + p):
 * relative L2 error, top-1 agreement overall and where the reference's
 * margin is >= MARGIN (a row that differs below the margin is reported). */
typedef struct {
  double err;
  int agree, decided, decided_agree;
} LogitStats;

static LogitStats
logit_stats (const float *got, const float *ref, int first, int n, int V)
{
  LogitStats st = { 0 };
  double num = 0, den = 0;

  for (int p = 0; p < n; p++)
    {
      const float *g = got + (gsize) p * V, *r = ref + (gsize) p * V;
      const int rb = argmax (r, V);
      float second = -G_MAXFLOAT;
      gboolean same;
      for (int i = 0; i < V; i++)
        {
          g_assert_true (isfinite (g[i]));
          num += (double) (g[i] - r[i]) * (g[i] - r[i]);
          den += (double) r[i] * r[i];
          if (i != rb && r[i] > second)
            second = r[i];
        }
      same = argmax (g, V) == rb;
      st.agree += same;
      if (r[rb] - second >= MARGIN)
        {
          st.decided++;
          st.decided_agree += same;
        }
      else if (!same)
        g_printerr ("#   position %d: top-1 differs where the reference margin is %.3f\n", first + p, r[rb] - second);
    }
  st.err = sqrt (num / den);
  return st;
}

static void
compare (const float *got, int first, int n, const char *what)
{
  const int V = model->config.vocab;
  const LogitStats st = logit_stats (got, cpu_logits + (gsize) first * V, first, n, V);
  const double err = st.err;
  const int agree = st.agree, decided = st.decided, decided_agree = st.decided_agree;
  g_printerr ("# %s: relative L2 error %.4g, top-1 agreement %d/%d (%.1f %%), %d/%d where the margin >= %.2f\n", what,
              err, agree, n, 100.0 * agree / n, decided_agree, decided, MARGIN);
  g_assert_cmpfloat (err, <, 5e-2);
  g_assert_cmpint (decided_agree * 100, >=, 99 * decided);
  g_assert_cmpint (decided * 2, >=, n);
  g_assert_cmpint (agree * 100, >=, 95 * n);
}

static HoneBackend *
load_cuda (int max_context)
{
  GError *error = NULL;
  HoneBackend *be = new_cuda ();
  HoneBackendOptions opt = { 0 };

  if (!be)
    return NULL;
  opt.max_context = max_context;
  g_assert_true (be->klass->load (be, model, &opt, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  return be;
}

/* All N_POS logits of one prefill on @be (a single chunk: past the fused W4A16
 * GEMM's range, so every quantized matrix goes through the dequantization pass) */
static float *
prefill_logits (HoneBackend *be)
{
  GError *error = NULL;
  float *logits = g_new (float, (gsize) N_POS * model->config.vocab);
  const int seq = be->klass->seq_new (be, &error);
  HoneBatch b = { seq, (const gint32 *) tokens->data, N_POS, TRUE, logits };

  g_assert_no_error (error);
  g_assert_true (be->klass->forward (be, &b, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpint (be->klass->seq_length (be, seq), ==, N_POS);
  be->klass->seq_free (be, seq);
  return logits;
}

static void
test_prefill (void)
{
  HoneBackend *be;
  g_autofree float *logits = NULL;

  if (!ensure_reference () || !(be = load_cuda (1024)))
    return;
  logits = prefill_logits (be);
  compare (logits, 0, N_POS, "prefill, all logits");
  hone_backend_free (be);
}

static void
test_decode (void)
{
  GError *error = NULL;
  HoneBackend *be;
  const int first = 3;
  g_autofree float *logits = NULL, *again = NULL;
  HoneBatch b, r;
  int seq, p, V;

  if (!ensure_reference () || !(be = load_cuda (1024)))
    return;
  V = model->config.vocab;
  logits = g_new (float, (gsize) N_POS * V);
  again = g_new (float, V);
  seq = be->klass->seq_new (be, &error);
  /* a short prefill, then one token a step (the graph path), then steps of 5
   * (the GEMV path with several tokens) */
  b = (HoneBatch) { seq, (const gint32 *) tokens->data, first, FALSE, logits };
  g_assert_true (be->klass->forward (be, &b, NULL, &error));
  g_assert_no_error (error);
  p = first;
  while (p < N_POS)
    {
      const int n = p < 400 ? 1 : MIN (5, N_POS - p);
      HoneBatch s = { seq, (const gint32 *) tokens->data + p, n, n > 1, logits + (gsize) (p - first) * V };
      g_assert_true (be->klass->forward (be, &s, NULL, &error));
      g_assert_no_error (error);
      p += n;
    }
  compare (logits, first, N_POS - first, "decode, 1 then 5 tokens a step");
  /* truncate and redo a stretch: same logits again */
  be->klass->seq_truncate (be, seq, 200);
  g_assert_cmpint (be->klass->seq_length (be, seq), ==, 200);
  r = (HoneBatch) { seq, (const gint32 *) tokens->data + 200, 1, FALSE, again };
  g_assert_true (be->klass->forward (be, &r, NULL, &error));
  compare (again, 200, 1, "after truncate");
  hone_backend_free (be);
}

/* Elements of the model's largest quantized layer matrix as the CUDA backend
 * holds it (q|k|v and gate|up merged); 0 when none is quantized */
static gint64
largest_quantized_matrix (void)
{
  const HoneModelConfig *c = &model->config;
  gint64 best = 0;

  for (int l = 0; l < c->n_layers; l++)
    {
      const HoneLayerWeights *L = &model->layers[l];
      const gint64 e[4] = { (gint64) (c->n_heads + 2 * c->n_kv_heads) * c->head_dim * c->hidden,
                            (gint64) c->n_heads * c->head_dim * c->hidden, 2 * (gint64) c->ffn * c->hidden,
                            (gint64) c->hidden * c->ffn };
      const gboolean q[4] = { hone_dtype_block_size (L->wq.type) > 1 || hone_dtype_block_size (L->wk.type) > 1
                                || hone_dtype_block_size (L->wv.type) > 1,
                              hone_dtype_block_size (L->wo.type) > 1,
                              hone_dtype_block_size (L->w_gate.type) > 1 || hone_dtype_block_size (L->w_up.type) > 1,
                              hone_dtype_block_size (L->w_down.type) > 1 };
      for (int i = 0; i < 4; i++)
        if (q[i] && e[i] > best)
          best = e[i];
    }
  return best;
}

/* HONE_PREFILL_AHEAD=1 (opt-in: the dequantization pass one matrix ahead on a
 * side stream, into two buffers in turn). Its second buffer shows in the
 * workspace as exactly the largest layer matrix in f16 (256-byte aligned), and
 * three 512-token prefills give the default path's logits: relative L2
 * difference < 1e-2 (the GEMM algorithms are chosen per load, so summation
 * order may differ) and the same top-1 wherever the default run's winner leads
 * by MARGIN — a GEMM reading a buffer the side stream is still writing would
 * not — and the CPU bounds of /cuda/prefill. */
static void
test_prefill_ahead (void)
{
  HoneBackend *be;
  HoneMemoryReport m0, m1;
  g_autofree float *base = NULL;
  gint64 largest;

  if (!ensure_reference () || !(be = load_cuda (1024)))
    return;
  largest = largest_quantized_matrix ();
  g_assert_cmpint (largest, >, 0);   /* the default model is quantized: the pass runs */
  be->klass->memory (be, &m0);
  base = prefill_logits (be);
  hone_backend_free (be);

  g_setenv ("HONE_PREFILL_AHEAD", "1", TRUE);
  be = load_cuda (1024);
  g_unsetenv ("HONE_PREFILL_AHEAD");
  be->klass->memory (be, &m1);
  g_printerr ("# workspace %.2f MiB, %.2f MiB with the second buffer\n", m0.workspace / 1048576.0,
              m1.workspace / 1048576.0);
  g_assert_cmpint (m1.workspace - m0.workspace, ==, (largest * 2 + 255) / 256 * 256);
  for (int r = 0; r < 3; r++)
    {
      g_autofree float *got = prefill_logits (be);
      const LogitStats st = logit_stats (got, base, 0, N_POS, model->config.vocab);
      g_printerr ("# ahead run %d against the default path: relative L2 %.3g, top-1 %d/%d, %d/%d decided\n", r, st.err,
                  st.agree, N_POS, st.decided_agree, st.decided);
      g_assert_cmpfloat (st.err, <, 1e-2);
      g_assert_cmpint (st.decided_agree, ==, st.decided);
      compare (got, 0, N_POS, "prefill ahead, all logits");
    }
  hone_backend_free (be);
}

static void
test_memory (void)
{
  GError *error = NULL;
  HoneBackend *be;
  HoneMemoryReport r0, r1;
  HoneBackendOptions opt = { 0 }, small;
  gint64 est, delta, parts;
  g_autofree gint32 *many = NULL;
  g_autofree float *lg = NULL;
  HoneBatch b, bad;
  int seq;

  if (!ensure_reference () || !(be = new_cuda ()))
    return;
  opt.max_context = 4096;
  be->klass->memory (be, &r0);
  est = be->klass->estimate (be, model, &opt);
  g_assert_cmpint (est, >, 0);

  /* a budget below the estimate: out of memory, and the backend stays usable */
  small = opt;
  small.memory_budget = est / 2;
  g_assert_false (be->klass->load (be, model, &small, NULL, NULL, NULL, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);

  g_assert_true (be->klass->load (be, model, &opt, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  be->klass->memory (be, &r1);
  delta = r1.used - r0.used;
  parts = r1.weights + r1.kv_cache + r1.workspace + r1.other;
  g_printerr ("# estimate %.1f MiB, measured %.1f MiB (weights %.1f, KV %.1f, workspace %.1f, other %.1f)\n",
              est / 1048576.0, delta / 1048576.0, r1.weights / 1048576.0, r1.kv_cache / 1048576.0,
              r1.workspace / 1048576.0, r1.other / 1048576.0);
  g_assert_cmpfloat (fabs ((double) (delta - est)) / est, <, 0.05);
  g_assert_cmpfloat (fabs ((double) (parts - est)) / est, <, 0.05);

  /* context overflow is an error, not a crash */
  seq = be->klass->seq_new (be, &error);
  many = g_new0 (gint32, 4097);
  lg = g_new (float, model->config.vocab);
  b = (HoneBatch) { seq, many, 4097, FALSE, lg };
  g_assert_false (be->klass->forward (be, &b, NULL, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_CONTEXT_OVERFLOW);
  g_clear_error (&error);
  many[0] = model->config.vocab;
  bad = (HoneBatch) { seq, many, 1, FALSE, lg };
  g_assert_false (be->klass->forward (be, &bad, NULL, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  many[0] = 1;
  g_assert_true (be->klass->forward (be, &bad, NULL, &error));
  g_assert_no_error (error);
  hone_backend_free (be);
}


/* A model in VRAM does not keep its file in the process's resident memory:
 * the upload lets each chunk's pages go once they are on the device (the
 * whole file was resident after a load before that). The model still reads
 * right afterwards (the pages come back from the file). */
static void
test_host_pages (void)
{
  GError *error = NULL;
  g_autofree char *path = NULL;
  g_autoptr(HoneModel) m = NULL;
  HoneBackend *be;
  HoneBackendOptions opt = { 0 };
  gint64 before, after;

  if (!ensure_reference () || !(be = new_cuda ()))
    return;
  path = hone_default_model_find (&error);
  g_assert_no_error (error);
  m = hone_model_open (path, &error);   /* a mapping of its own: none of its pages touched by other tests */
  g_assert_no_error (error);
  before = hone_test_rss_file_kb ();
  opt.max_context = 256;
  g_assert_true (be->klass->load (be, m, &opt, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  after = hone_test_rss_file_kb ();
  if (before < 0)
    g_test_skip ("no RssFile in /proc/self/status");
  else
    {
      g_printerr ("# RssFile %" G_GINT64_FORMAT " -> %" G_GINT64_FORMAT " kB over a load of a %.1f MB file\n", before,
                  after, m->file_bytes / 1e6);
      g_assert_cmpint ((after - before) * 1024, <, m->file_bytes / 4);
    }
  /* the tensors still read right on the host */
  g_assert_cmpmem (m->tok_embd.data, m->tok_embd.nbytes, model->tok_embd.data, model->tok_embd.nbytes);
  hone_backend_free (be);
}

/* ---- tiny generated models of every weight type ------------------------------ */

#define TINY_N 40      /* tokens run */
#define TINY_FIRST 3   /* decode: prompt of the decode run */
#define TINY_ONE 24    /* decode: one token a step up to here, then 5 a step */

typedef struct {
  const char *name;
  HoneArch arch;
  HoneDType type;      /* 2-D weights */
  HoneDType embd;      /* token embeddings (and lm_head when tied) */
  gboolean tied;
  gboolean awq;        /* quantize to AWQ int4 (Q4Z) and load the exported folder */
} TinyCase;

static const TinyCase tiny_cases[] = {
  /* tied (the embedding read back as lm_head): peaked logits, and every type's embedding lookup */
  { "F16", HONE_ARCH_LLAMA, HONE_DTYPE_F16, HONE_DTYPE_F16, TRUE, FALSE },
  { "BF16", HONE_ARCH_LLAMA, HONE_DTYPE_BF16, HONE_DTYPE_BF16, TRUE, FALSE },
  { "Q8_0", HONE_ARCH_LLAMA, HONE_DTYPE_Q8_0, HONE_DTYPE_Q8_0, TRUE, FALSE },
  { "Q4_0", HONE_ARCH_LLAMA, HONE_DTYPE_Q4_0, HONE_DTYPE_Q4_0, TRUE, FALSE },
  { "Q4_1", HONE_ARCH_LLAMA, HONE_DTYPE_Q4_1, HONE_DTYPE_Q8_0, TRUE, FALSE },   /* like the default model */
  { "Q4_K", HONE_ARCH_LLAMA, HONE_DTYPE_Q4_K, HONE_DTYPE_Q4_K, TRUE, FALSE },
  { "Q6_K", HONE_ARCH_LLAMA, HONE_DTYPE_Q6_K, HONE_DTYPE_Q6_K, TRUE, FALSE },
  { "Q4_K-qwen2", HONE_ARCH_QWEN2, HONE_DTYPE_Q4_K, HONE_DTYPE_Q6_K, TRUE, FALSE }, /* q/k/v biases, half-split RoPE */
  /* F16 lm_head written by the export */
  { "AWQ", HONE_ARCH_LLAMA, HONE_DTYPE_F16, HONE_DTYPE_F16, FALSE, TRUE },
};

/* All logits of @n tokens (@all) or, steps of @step tokens after a @first-token prefill. */
static void
run_tokens (HoneBackend *be, const gint32 *toks, int n, int V, float *logits, gboolean decode)
{
  GError *error = NULL;
  int seq = be->klass->seq_new (be, &error), p = 0;

  g_assert_no_error (error);
  g_assert_cmpint (seq, >=, 0);
  if (!decode)
    {
      HoneBatch b = { seq, toks, n, TRUE, logits, NULL, -1 };
      g_assert_true (be->klass->forward (be, &b, NULL, &error));
      g_assert_no_error (error);
    }
  else
    while (p < n)
      {
        const int k = p == 0 ? TINY_FIRST : p < TINY_ONE ? 1 : MIN (5, n - p);
        HoneBatch b = { seq, toks + p, k, TRUE, logits + (gsize) p * V, NULL, -1 };
        g_assert_true (be->klass->forward (be, &b, NULL, &error));
        g_assert_no_error (error);
        p += k;
      }
  g_assert_cmpint (be->klass->seq_length (be, seq), ==, n);
  be->klass->seq_free (be, seq);
}

static void
compare_tiny (const float *got, const float *ref, int n, int V, const char *what)
{
  const LogitStats st = logit_stats (got, ref, 0, n, V);
  const double err = st.err;
  const int agree = st.agree, decided = st.decided, decided_agree = st.decided_agree;
  g_printerr ("# %s: relative L2 error %.3g, top-1 agreement %d/%d, %d/%d where the margin >= %.2f\n", what, err,
              agree, n, decided_agree, decided, MARGIN);
  g_assert_cmpfloat (err, <, 5e-2);
  g_assert_cmpint (decided_agree * 100, >=, 99 * decided);
  g_assert_cmpint (decided * 4, >=, n);
  g_assert_cmpint (agree * 100, >=, 85 * n);
}

/* The F16 tiny model quantized round-to-nearest (group 64), exported as an
 * AutoAWQ GEMM folder under @dir and loaded from there (Q4Z weights). */
static HoneModel *
tiny_awq (HoneModel *src, const char *dir)
{
  GError *error = NULL;
  HoneAwqOptions o;
  g_autoptr (HoneAwqResult) r = NULL;
  g_autofree char *out = g_build_filename (dir, "awq", NULL);
  HoneModel *m;

  hone_awq_options_init (&o);
  o.group_size = 64;
  o.search_scales = FALSE;
  o.search_clip = FALSE;
  r = hone_awq_quantize (src, NULL, 0, 0, &o, NULL, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (hone_awq_export_safetensors (r, out, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  m = hone_model_open (out, &error);
  g_assert_no_error (error);
  g_assert_cmpint (m->layers[0].wq.type, ==, HONE_DTYPE_Q4Z);
  return m;
}

/* CPU logits (prefill, all 40) as the reference, then the CUDA backend's
 * prefill and decode runs against them (see the top for the bounds). */
static void
compare_on_model (HoneModel *m, const char *name, guint32 seed, const HoneBackendOptions *opt)
{
  GError *error = NULL;
  HoneBackend *cpu, *be;
  HoneMemoryReport mem;
  g_autofree float *ref = NULL, *got = NULL;
  gint32 toks[TINY_N];
  GRand *rng;
  gboolean ok;
  const int V = m->config.vocab;
  char what[96];

  rng = g_rand_new_with_seed (seed);
  for (int i = 0; i < TINY_N; i++)
    toks[i] = g_rand_int_range (rng, 3, V);
  g_rand_free (rng);
  ref = g_new (float, (gsize) TINY_N * V);
  got = g_new (float, (gsize) TINY_N * V);

  cpu = hone_cpu_backend_new (&error);
  g_assert_no_error (error);
  ok = cpu->klass->load (cpu, m, opt, NULL, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  run_tokens (cpu, toks, TINY_N, V, ref, FALSE);
  hone_backend_free (cpu);

  be = new_cuda ();
  g_assert_nonnull (be);
  ok = be->klass->load (be, m, opt, NULL, NULL, NULL, &error);
  g_assert_no_error (error);   /* first: the message says what failed */
  g_assert_true (ok);
  be->klass->memory (be, &mem);
  g_printerr ("# %s: %.2f MiB of weights on the GPU\n", name, mem.weights / 1048576.0);
  run_tokens (be, toks, TINY_N, V, got, FALSE);
  snprintf (what, sizeof what, "%s, prefill", name);
  compare_tiny (got, ref, TINY_N, V, what);
  memset (got, 0xff, sizeof (float) * TINY_N * V);
  run_tokens (be, toks, TINY_N, V, got, TRUE);
  snprintf (what, sizeof what, "%s, decode (1 then 5 tokens a step)", name);
  compare_tiny (got, ref, TINY_N, V, what);
  hone_backend_free (be);
}

static void
test_tiny (gconstpointer data)
{
  const TinyCase *c = data;
  GError *error = NULL;
  HoneBackend *probe;
  HoneBackendOptions opt = { 0 };
  HoneTestModelSpec spec;
  HoneModel *m;
  g_autofree char *dir = NULL, *path = NULL;
  char what[96];

  if (!(probe = new_cuda ()))
    return;
  hone_backend_free (probe);
  dir = g_dir_make_tmp ("hone-cuda-tiny-XXXXXX", &error);
  g_assert_no_error (error);
  hone_test_model_spec_init (&spec, c->arch, c->type);
  spec.embd_type = c->embd;
  spec.tied = c->tied;
  path = hone_test_model_write_gguf (dir, &spec, &error);
  g_assert_no_error (error);
  m = hone_model_open (path, &error);
  g_assert_no_error (error);
  if (c->awq)
    {
      HoneModel *q = tiny_awq (m, dir);
      hone_model_unref (m);
      m = q;
    }
  opt.max_context = 128;
  snprintf (what, sizeof what, "tiny %s", c->name);
  compare_on_model (m, what, 7 + (guint32) c->type, &opt);
  if (c->awq)
    {
      /* opened as the engine opens it (HONE_MODEL_OPEN_DEFER_REPACK), the upload makes the Q4Z rows chunk by
       * chunk (the q/k matrices whole, for their row permutation) and never a whole copy: the same logits,
       * bit for bit, and the model still deferred afterwards */
      g_autofree char *folder = g_build_filename (dir, "awq", NULL);
      HoneModel *lazy = hone_model_open_full (folder, HONE_MODEL_OPEN_DEFER_REPACK, &error);
      const int V = m->config.vocab;
      g_autofree float *want = g_new (float, (gsize) TINY_N * V), *got = g_new (float, (gsize) TINY_N * V);
      gint32 toks[TINY_N];
      HoneBackend *be;
      guint64 deferred;
      HoneTestProgress prog = { 0 };

      g_assert_no_error (error);
      deferred = hone_model_deferred_bytes (lazy);
      g_assert_cmpuint (deferred, >, 0);
      for (int i = 0; i < TINY_N; i++)
        toks[i] = 3 + (gint32) ((i * 37) % (V - 3));
      be = new_cuda ();
      g_assert_true (be->klass->load (be, m, &opt, NULL, NULL, NULL, &error));
      g_assert_no_error (error);
      run_tokens (be, toks, TINY_N, V, want, FALSE);
      hone_backend_free (be);
      be = new_cuda ();
      g_assert_true (be->klass->load (be, lazy, &opt, hone_test_progress, &prog, NULL, &error));
      g_assert_no_error (error);
      g_assert_cmpint (prog.calls, >, 0);
      g_assert_cmpfloat (fabs (prog.last - 1.0), <, 1e-9);
      g_assert_cmpuint (hone_model_deferred_bytes (lazy), ==, deferred);   /* nothing made on the host */
      run_tokens (be, toks, TINY_N, V, got, FALSE);
      hone_backend_free (be);
      g_assert_cmpmem (got, sizeof (float) * TINY_N * V, want, sizeof (float) * TINY_N * V);
      hone_model_unref (lazy);
    }
  hone_model_unref (m);
  hone_test_rm_rf (dir);
}

/* ---- mixed weight types in one model ------------------------------------------ */

typedef struct {
  const char *name;
  HoneArch arch;
  HoneDType base;        /* every 2-D weight not named below, and the embedding */
  HoneDType q, k, v;     /* attn_q, attn_k, attn_v of every layer */
  HoneDType down1;       /* ffn_down of layer 1 */
  HoneDType output;      /* output.weight (untied); HONE_DTYPE_F32 here means tied */
} MixedCase;

static const MixedCase mixed_cases[] = {
  /* llama.cpp's Q4_K_M: Q4_K, with attn_v, some ffn_down and output in Q6_K */
  { "Q4_K_M", HONE_ARCH_LLAMA, HONE_DTYPE_Q4_K, HONE_DTYPE_Q4_K, HONE_DTYPE_Q4_K, HONE_DTYPE_Q6_K, HONE_DTYPE_Q6_K,
    HONE_DTYPE_Q6_K },
  /* three parts, one of them 16-bit (RMSNorm fused into its GEMV, int8 input for the others) */
  { "Q8_0-BF16-Q4_1", HONE_ARCH_LLAMA, HONE_DTYPE_Q4_0, HONE_DTYPE_Q8_0, HONE_DTYPE_BF16, HONE_DTYPE_Q4_1,
    HONE_DTYPE_Q4_0, HONE_DTYPE_F32 },
  /* qwen2: q/k/v biases at each part's offset, half-split rows permuted per part */
  { "qwen2-F16-Q6_K-Q4_K", HONE_ARCH_QWEN2, HONE_DTYPE_Q8_0, HONE_DTYPE_F16, HONE_DTYPE_Q6_K, HONE_DTYPE_Q4_K,
    HONE_DTYPE_Q4_K, HONE_DTYPE_Q6_K },
};

/* Store @t as @type: its rows quantized (from the values it holds) and the
 * values made what the new bytes dequantize to, as the generator does. */
static void
retype (HoneTestTensor *t, HoneDType type)
{
  const gsize rb = hone_dtype_row_bytes (type, t->ne[0]);
  g_free (t->gguf_data);
  t->gguf_data = g_malloc (rb * (gsize) t->ne[1]);
  for (int64_t r = 0; r < t->ne[1]; r++)
    {
      g_assert_true (hone_quantize_row (type, t->data + r * t->ne[0], t->gguf_data + r * rb, t->ne[0]));
      hone_dequantize_row (type, t->gguf_data + r * rb, t->data + r * t->ne[0], t->ne[0]);
    }
  t->gguf_type = type;
}

/* Bytes of a tensor as the GGUF stores it (1-D tensors are F32 there). */
static gint64
gguf_bytes (const HoneTestTensor *t)
{
  if (!t->data)
    return 0;
  if (t->n_dims == 1)
    return 4 * t->ne[0];
  return (gint64) hone_dtype_row_bytes (t->gguf_type, t->ne[0]) * t->ne[1];
}

static void
test_mixed (gconstpointer data)
{
  const MixedCase *c = data;
  GError *error = NULL;
  HoneBackend *be;
  HoneBackendOptions opt = { 0 };
  HoneTestModelSpec spec;
  HoneTestModel *tm;
  HoneModel *m;
  HoneMemoryReport r0, r1;
  g_autofree char *dir = NULL, *path = NULL;
  gint64 est, delta, file_weights = 0;
  char what[96];

  if (!(be = new_cuda ()))
    return;
  dir = g_dir_make_tmp ("hone-cuda-mixed-XXXXXX", &error);
  g_assert_no_error (error);
  hone_test_model_spec_init (&spec, c->arch, c->base);
  spec.tied = c->output == HONE_DTYPE_F32;
  tm = hone_test_model_new (&spec);
  for (int l = 0; l < spec.n_layers; l++)
    {
      retype (&tm->layers[l].wq, c->q);
      retype (&tm->layers[l].wk, c->k);
      retype (&tm->layers[l].wv, c->v);
    }
  retype (&tm->layers[1].w_down, c->down1);
  if (!spec.tied)
    retype (&tm->output, c->output);
  for (int l = 0; l < spec.n_layers; l++)
    {
      const HoneTestTensor *ts[] = { &tm->layers[l].attn_norm, &tm->layers[l].wq, &tm->layers[l].wk, &tm->layers[l].wv,
                                     &tm->layers[l].wo, &tm->layers[l].bq, &tm->layers[l].bk, &tm->layers[l].bv,
                                     &tm->layers[l].q_norm, &tm->layers[l].k_norm, &tm->layers[l].ffn_norm,
                                     &tm->layers[l].w_gate, &tm->layers[l].w_up, &tm->layers[l].w_down };
      for (guint i = 0; i < G_N_ELEMENTS (ts); i++)
        file_weights += gguf_bytes (ts[i]);
    }
  file_weights += gguf_bytes (&tm->tok_embd) + gguf_bytes (&tm->output_norm) + gguf_bytes (&tm->output);
  path = g_build_filename (dir, "mixed.gguf", NULL);
  g_assert_true (hone_test_model_save_gguf (tm, path, &error));
  g_assert_no_error (error);
  hone_test_model_free (tm);
  m = hone_model_open (path, &error);
  g_assert_no_error (error);
  g_assert_cmpint (m->layers[0].wq.type, ==, c->q);
  g_assert_cmpint (m->layers[0].wv.type, ==, c->v);
  g_assert_cmpint (m->layers[1].w_down.type, ==, c->down1);

  opt.max_context = 128;
  snprintf (what, sizeof what, "mixed %s", c->name);
  compare_on_model (m, what, 11, &opt);

  /* memory: the estimate before the load against what the load took, and
   * the weights against the file's tensors (every type keeps its bytes) */
  be->klass->memory (be, &r0);
  est = be->klass->estimate (be, m, &opt);
  g_assert_cmpint (est, >, 0);
  g_assert_true (be->klass->load (be, m, &opt, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  be->klass->memory (be, &r1);
  delta = r1.used - r0.used;
  g_printerr ("# %s: estimate %.2f MiB, measured %.2f MiB; weights %.3f MiB on the GPU, %.3f MiB in the file\n", what,
              est / 1048576.0, delta / 1048576.0, r1.weights / 1048576.0, file_weights / 1048576.0);
  g_assert_cmpfloat (fabs ((double) (r1.weights - file_weights)) / file_weights, <, 0.02);
  g_assert_cmpfloat (fabs ((double) (delta - est)) / est, <, 0.05);
  hone_backend_free (be);
  hone_model_unref (m);
  hone_test_rm_rf (dir);
}

/* ---- sampling on the device ------------------------------------------------
 * The reference is the host sampler (src/core/hone-sampler.c, checked on its
 * own by test-sampler) run on the same backend's logits: the backend is
 * deterministic, so a token redone after a truncate gives the same logits
 * again, once returned to the host and once sampled on the device. */

#define SAMPLE_POS 300
#define N_DRAWS 2000

typedef struct {
  gint32 id;
  float p;
} Pick;

static int
pick_cmp (const void *a, const void *b)
{
  const Pick *x = a, *y = b;
  if (x->p != y->p)
    return x->p > y->p ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

/* The host sampler's pick for draw @u: the first token, best first (lower id
 * on ties), where the cumulative probability passes u (hone_sampler_sample). */
static gint32
host_pick (const float *probs, int V, double u)
{
  g_autofree Pick *c = g_new (Pick, V);
  int n = 0;
  double cum = 0.0;

  for (int i = 0; i < V; i++)
    if (probs[i] > 0.0f)
      c[n++] = (Pick) { i, probs[i] };
  g_assert_cmpint (n, >, 0);
  qsort (c, n, sizeof *c, pick_cmp);
  for (int i = 0; i < n; i++)
    {
      cum += c[i].p;
      if (u < cum)
        return c[i].id;
    }
  return c[n - 1].id;
}

/* A CUDA backend with tokens[0, len-1) in a sequence; NULL (skipped) without a GPU. */
static HoneBackend *
sampling_backend (int len, int *seq)
{
  GError *error = NULL;
  HoneBackend *be;
  g_autofree float *lg = NULL;
  HoneBatch b;

  if (!ensure_reference () || !(be = load_cuda (1024)))
    return NULL;
  g_assert_true (be->klass->caps (be) & HONE_BACKEND_CAP_GPU_SAMPLING);
  *seq = be->klass->seq_new (be, &error);
  g_assert_no_error (error);
  lg = g_new (float, model->config.vocab);
  b = (HoneBatch) { *seq, (const gint32 *) tokens->data, len - 1, FALSE, lg };
  g_assert_true (be->klass->forward (be, &b, NULL, &error));
  g_assert_no_error (error);
  return be;
}

/* Redo token len-1 (truncate, forward): logits to @logits, or with @bs the
 * device's sample (-1 when it left the sampling to the host). */
static gint32
redo_last (HoneBackend *be, int seq, int len, const HoneBatchSampling *bs, float *logits)
{
  GError *error = NULL;
  HoneBatch b = { seq, (const gint32 *) tokens->data + len - 1, 1, FALSE, logits };

  be->klass->seq_truncate (be, seq, len - 1);
  b.sampling = bs;
  b.sampled = -1;
  g_assert_true (be->klass->forward (be, &b, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpint (be->klass->seq_length (be, seq), ==, len);
  return b.sampled;
}

static void
batch_sampling_from (HoneBatchSampling *bs, const HoneSamplerParams *p, const gint32 *window, int n_window)
{
  memset (bs, 0, sizeof *bs);
  bs->temperature = p->temperature;
  bs->top_k = p->top_k;
  bs->top_p = p->top_p;
  bs->min_p = p->min_p;
  bs->repeat_penalty = p->repeat_penalty;
  bs->presence_penalty = p->presence_penalty;
  bs->frequency_penalty = p->frequency_penalty;
  bs->window = window;
  bs->n_window = n_window;
}

/* Greedy, with and without penalties: the device's argmax is the host's, at 11 positions. */
static void
test_sample_greedy (void)
{
  HoneBackend *be;
  const int W = 64;
  int seq, same = 0, n = 0, V;
  g_autofree float *lg = NULL, *pen = NULL;

  if (!(be = sampling_backend (N_POS, &seq)))
    return;
  V = model->config.vocab;
  lg = g_new (float, model->config.vocab);
  pen = g_new (float, model->config.vocab);
  /* from the end backwards: each redo truncates below the last one */
  for (int pos = N_POS; pos >= 80; pos -= 40)
    for (int with_pen = 0; with_pen < 2; with_pen++)
      {
        GError *error = NULL;
        HoneSamplerParams p;
        HoneBatchSampling bs;
        g_autoptr (HoneSampler) host = NULL;
        const gint32 *window = (const gint32 *) tokens->data + pos - W;
        gint32 want, got;
        float first, second = -G_MAXFLOAT;

        hone_sampler_params_init_greedy (&p);
        if (with_pen)
          {
            p.repeat_penalty = 1.3f;
            p.presence_penalty = 0.4f;
            p.frequency_penalty = 0.2f;
            p.penalty_window = W;
          }
        host = hone_sampler_new (&p, V, &error);
        g_assert_no_error (error);
        for (int i = 0; i < W; i++)
          hone_sampler_accept (host, window[i]);
        g_assert_cmpint (redo_last (be, seq, pos, NULL, lg), ==, -1);
        memcpy (pen, lg, sizeof (float) * V);
        want = hone_sampler_sample (host, pen);   /* applies the penalties to pen */
        first = pen[want];
        for (int i = 0; i < V; i++)
          if (i != want && pen[i] > second)
            second = pen[i];
        batch_sampling_from (&bs, &p, window, with_pen ? W : 0);
        got = redo_last (be, seq, pos, &bs, lg);
        n++;
        same += got == want;
        if (got != want)
          g_printerr ("# greedy at %d (penalties %d): device %d, host %d, margin %.3g\n", pos, with_pen, got, want,
                      first - second);
        g_assert_true (got == want || first - second < 1e-4f);
      }
  g_printerr ("# greedy on the device: %d/%d positions as the host (with and without penalties)\n", same, n);
  hone_backend_free (be);
}

typedef struct {
  const char *name;
  float temperature;
  int top_k;
  float top_p, min_p;
  gboolean penalties;
  gboolean host_only;      /* the device must leave this one to the host */
} SampleCase;

static void
run_sample_case (HoneBackend *be, int seq, const SampleCase *c)
{
  GError *error = NULL;
  const int V = model->config.vocab, W = 64;
  const gint32 *window = (const gint32 *) tokens->data + SAMPLE_POS - W;
  HoneSamplerParams p;
  HoneBatchSampling bs;
  g_autoptr (HoneSampler) host = NULL;
  g_autofree float *lg = g_new (float, V), *probs = g_new (float, V), *again = g_new (float, V);
  g_autofree int *count = g_new0 (int, V);
  g_autoptr (GRand) rng = g_rand_new_with_seed (20261129);
  int support = 0, agree = 0, outside = 0, fallback = 0, bins = 0;
  double chi2 = 0.0, tv = 0.0, rest_e = 0.0, rest_o = 0.0, limit;

  hone_sampler_params_init (&p);
  p.temperature = c->temperature;
  p.top_k = c->top_k;
  p.top_p = c->top_p;
  p.min_p = c->min_p;
  p.seed = 1;
  if (c->penalties)
    {
      p.repeat_penalty = 1.3f;
      p.presence_penalty = 0.4f;
      p.frequency_penalty = 0.2f;
      p.penalty_window = W;
    }
  else
    p.penalty_window = 0;
  host = hone_sampler_new (&p, V, &error);
  g_assert_no_error (error);
  for (int i = 0; i < W; i++)
    hone_sampler_accept (host, window[i]);
  g_assert_cmpint (redo_last (be, seq, SAMPLE_POS, NULL, lg), ==, -1);
  hone_sampler_probabilities (host, lg, probs);
  for (int i = 0; i < V; i++)
    support += probs[i] > 0.0f;
  batch_sampling_from (&bs, &p, window, c->penalties ? W : 0);

  if (c->host_only)
    {
      /* declined: the logits come back as they would without sampling */
      double diff = 0.0, scale = 0.0;
      bs.u = 0.5;
      g_assert_cmpint (redo_last (be, seq, SAMPLE_POS, &bs, again), ==, -1);
      for (int i = 0; i < V; i++)
        {
          diff = MAX (diff, fabs ((double) again[i] - lg[i]));
          scale = MAX (scale, fabs ((double) lg[i]));
        }
      g_printerr ("# %s: left to the host (support %d tokens), logits returned (max difference to the "
                  "plain forward %.3g%s)\n", c->name, support, diff, diff == 0.0 ? ": bitwise equal" : "");
      g_assert_cmpfloat (diff, <=, 1e-4 * scale);
      return;
    }
  for (int d = 0; d < N_DRAWS; d++)
    {
      gint32 got;
      bs.u = g_rand_double (rng);
      got = redo_last (be, seq, SAMPLE_POS, &bs, again);
      if (got < 0)
        {
          /* the backend declined this draw: the engine would sample on the host */
          fallback++;
          got = host_pick (probs, V, bs.u);
        }
      g_assert_cmpint (got, <, V);
      count[got]++;
      agree += got == host_pick (probs, V, bs.u);
      outside += probs[got] == 0.0f;
    }
  /* Pearson's chi-square over the tokens expected ≥ 5 times (the rest in one bin) */
  for (int i = 0; i < V; i++)
    {
      const double e = (double) N_DRAWS * probs[i];
      tv += fabs (count[i] / (double) N_DRAWS - probs[i]);
      if (e >= 5.0)
        {
          chi2 += (count[i] - e) * (count[i] - e) / e;
          bins++;
        }
      else
        {
          rest_e += e;
          rest_o += count[i];
        }
    }
  if (rest_e >= 5.0)
    {
      chi2 += (rest_o - rest_e) * (rest_o - rest_e) / rest_e;
      bins++;
    }
  tv *= 0.5;
  /* df = bins - 1; mean df, sd sqrt(2 df): 6 sd above is p < 1e-6 */
  limit = (bins - 1) + 6.0 * sqrt (2.0 * MAX (bins - 1, 1)) + 5.0;
  g_printerr ("# %s: support %d, %d draws: same token as the host for the same u %d (%.2f %%), outside the "
              "host's support %d, left to the host %d; chi-square %.1f on %d bins (limit %.1f), TV %.4f\n",
              c->name, support, N_DRAWS, agree, 100.0 * agree / N_DRAWS, outside, fallback, chi2, bins, limit, tv);
  /* Without top-k the device sorts only its 256 best and walks the whole row
   * when the set (or a pure-temperature draw) reaches past them: it never
   * declines a draw without penalties. */
  g_assert_cmpint (fallback, ==, 0);
  g_assert_cmpint (agree * 100, >=, 99 * N_DRAWS);
  g_assert_cmpint (outside * 500, <=, N_DRAWS);
  if (bins >= 2)   /* else (one token holds all the mass) the agreement above says it all */
    g_assert_cmpfloat (chi2, <, limit);
}

static const SampleCase sample_cases[] = {
  { "temperature 1, top-k 40", 1.0f, 40, 1.0f, 0.0f, FALSE, FALSE },
  { "temperature 0.9, top-p 0.8", 0.9f, 0, 0.8f, 0.0f, FALSE, FALSE },
  { "temperature 0.5, top-p 0.9", 0.5f, 0, 0.9f, 0.0f, FALSE, FALSE },
  { "temperature 1.2, min-p 0.05", 1.2f, 0, 1.0f, 0.05f, FALSE, FALSE },
  { "temperature 0.6, min-p 0.1", 0.6f, 0, 1.0f, 0.1f, FALSE, FALSE },
  { "defaults (T 0.8, top-k 40, top-p 0.95, min-p 0.05) + penalties", 0.8f, 40, 0.95f, 0.05f, TRUE, FALSE },
  { "temperature 1.5, top-k 200, top-p 0.95, penalties", 1.5f, 200, 0.95f, 0.0f, TRUE, FALSE },
  { "temperature 0.8 alone (whole vocabulary)", 0.8f, 0, 1.0f, 0.0f, FALSE, FALSE },
  { "temperature 1.5, top-p 0.99 (past the device's 256 best)", 1.5f, 0, 0.99f, 0.0f, FALSE, FALSE },
  { "temperature 0.8 alone + penalties (whole vocabulary)", 0.8f, 0, 1.0f, 0.0f, TRUE, TRUE },
  { "top-k 1000 (above the device's 256)", 1.0f, 1000, 0.9f, 0.0f, FALSE, TRUE },
};

static void
test_sample_distribution (void)
{
  HoneBackend *be;
  int seq;

  if (!(be = sampling_backend (SAMPLE_POS, &seq)))
    return;
  for (guint i = 0; i < G_N_ELEMENTS (sample_cases); i++)
    run_sample_case (be, seq, &sample_cases[i]);
  hone_backend_free (be);
}

/* ---- the engine with sampling on the device -------------------------------- */

static HoneGenerateResult *
engine_generate (const char *device, gboolean gpu_sampling, gboolean ahead, const HoneSamplerParams *params,
                 GArray **prompt)
{
  GError *error = NULL;
  g_autofree char *path = hone_default_model_find (&error);
  g_autoptr (HoneEngine) e = NULL;
  g_autoptr (HoneSession) s = NULL;
  g_autofree char *prompt_text = g_strndup (text, 160);
  HoneGenerateResult *r;

  g_assert_no_error (error);
  /* read by the CUDA backend when the engine creates it at load */
  g_setenv ("HONE_GPU_SAMPLING", gpu_sampling ? "1" : "0", TRUE);
  g_setenv ("HONE_DECODE_AHEAD", ahead ? "1" : "0", TRUE);
  e = hone_engine_new ();
  hone_engine_set_device (e, device);
  hone_engine_set_context_length (e, 1024);
  g_assert_true (hone_engine_load_sync (e, path, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (hone_engine_get_device (e), ==, device);
  s = hone_session_new (e);
  r = hone_session_complete_sync (s, prompt_text, params, NULL, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (r);
  if (prompt)
    *prompt = g_array_ref (r->prompt_tokens);
  g_unsetenv ("HONE_GPU_SAMPLING");
  g_unsetenv ("HONE_DECODE_AHEAD");
  return r;
}

static gboolean
same_tokens (const GArray *a, const GArray *b)
{
  return a->len == b->len && memcmp (a->data, b->data, sizeof (gint32) * a->len) == 0;
}

static void
test_engine_sampling (void)
{
  GError *error = NULL;
  HoneSamplerParams greedy, seeded;
  HoneGenerateResult *gpu, *host, *cpu, *ser;
  g_autoptr (GArray) prompt = NULL;
  guint k = 0;

  if (!ensure_reference ())
    return;
  hone_sampler_params_init_greedy (&greedy);
  greedy.max_tokens = 48;
  greedy.ignore_eog = TRUE;

  /* greedy: the device's ids = the host sampler's on the same backend, with
   * and without decode ahead; every step but the first decode ran ahead (the
   * last one asks for none: the engine knows it is the 48th) */
  gpu = engine_generate ("cuda:0", TRUE, TRUE, &greedy, &prompt);
  host = engine_generate ("cuda:0", FALSE, TRUE, &greedy, NULL);
  ser = engine_generate ("cuda:0", TRUE, FALSE, &greedy, NULL);
  g_assert_cmpint (gpu->metrics.generated_tokens, ==, 48);
  g_assert_cmpint (gpu->metrics.device_sampled_tokens, ==, 48);
  g_assert_cmpint (host->metrics.device_sampled_tokens, ==, 0);
  g_assert_cmpint (gpu->metrics.decode_tokens, ==, 47);
  g_assert_cmpint (gpu->metrics.decode_ahead_tokens, ==, 46);
  g_assert_cmpint (host->metrics.decode_ahead_tokens, ==, 0);
  g_assert_cmpint (ser->metrics.decode_ahead_tokens, ==, 0);
  g_assert_true (same_tokens (gpu->generated_tokens, host->generated_tokens));
  g_assert_true (same_tokens (ser->generated_tokens, host->generated_tokens));
  g_printerr ("# engine, greedy: 48 tokens sampled on the GPU = the host sampler's on the CUDA logits; "
              "decode %.1f tok/s (GPU sampling, %d of %d steps ahead) vs %.1f (GPU sampling, none ahead) "
              "vs %.1f (host)\n", gpu->metrics.decode_tps, gpu->metrics.decode_ahead_tokens, gpu->metrics.decode_tokens,
              ser->metrics.decode_tps, host->metrics.decode_tps);
  hone_generate_result_free (ser);

  /* greedy vs the CPU backend: equal up to a position where the CPU's best
   * two logits are within MARGIN (the backends round differently) */
  cpu = engine_generate ("cpu", FALSE, FALSE, &greedy, NULL);
  while (k < cpu->generated_tokens->len && k < gpu->generated_tokens->len
         && g_array_index (cpu->generated_tokens, gint32, k) == g_array_index (gpu->generated_tokens, gint32, k))
    k++;
  if (k < cpu->generated_tokens->len)
    {
      /* the CPU's margin at the first difference */
      const int V = model->config.vocab;
      HoneBackend *ref = hone_cpu_backend_new (&error);
      HoneBackendOptions opt = { 0 };
      g_autoptr (GArray) ctx = g_array_copy (prompt);
      g_autofree float *lg = g_new (float, V);
      HoneBatch b;
      int seq, best;
      float second = -G_MAXFLOAT;

      g_array_append_vals (ctx, cpu->generated_tokens->data, k);
      opt.max_context = 1024;
      g_assert_true (ref->klass->load (ref, model, &opt, NULL, NULL, NULL, &error));
      seq = ref->klass->seq_new (ref, &error);
      b = (HoneBatch) { seq, (const gint32 *) ctx->data, (int) ctx->len, FALSE, lg };
      g_assert_true (ref->klass->forward (ref, &b, NULL, &error));
      g_assert_no_error (error);
      best = argmax (lg, V);
      for (int i = 0; i < V; i++)
        if (i != best && lg[i] > second)
          second = lg[i];
      g_printerr ("# engine, greedy vs CPU: first %u of 48 tokens equal; at %u the CPU's margin is %.3f\n", k, k,
                  lg[best] - second);
      g_assert_cmpfloat (lg[best] - second, <, MARGIN);
      hone_backend_free (ref);
    }
  else
    g_printerr ("# engine, greedy vs CPU: all 48 tokens equal\n");

  /* seeded sampling: same seed → same draws → same tokens as host sampling */
  hone_sampler_params_init (&seeded);
  seeded.seed = 1234;
  seeded.max_tokens = 48;
  seeded.ignore_eog = TRUE;
  seeded.repeat_penalty = 1.1f;
  hone_generate_result_free (gpu);
  hone_generate_result_free (host);
  gpu = engine_generate ("cuda:0", TRUE, TRUE, &seeded, NULL);
  host = engine_generate ("cuda:0", FALSE, TRUE, &seeded, NULL);
  g_assert_cmpint (gpu->metrics.device_sampled_tokens, ==, gpu->metrics.generated_tokens);
  g_assert_cmpint (gpu->metrics.decode_ahead_tokens, ==, 0);   /* the window changes every step */
  g_assert_true (same_tokens (gpu->generated_tokens, host->generated_tokens));
  g_printerr ("# engine, seed 1234 (defaults + repeat penalty 1.1): %u tokens, GPU sampling = host sampling\n",
              gpu->generated_tokens->len);
  hone_generate_result_free (gpu);
  hone_generate_result_free (host);

  /* the defaults (no penalty): the steps run ahead draw one step early, and
   * the seed still gives the host sampler's tokens */
  seeded.repeat_penalty = 1.0f;
  gpu = engine_generate ("cuda:0", TRUE, TRUE, &seeded, NULL);
  host = engine_generate ("cuda:0", FALSE, TRUE, &seeded, NULL);
  g_assert_cmpint (gpu->metrics.device_sampled_tokens, ==, gpu->metrics.generated_tokens);
  g_assert_cmpint (gpu->metrics.decode_ahead_tokens, ==, gpu->metrics.decode_tokens - 1);
  g_assert_true (same_tokens (gpu->generated_tokens, host->generated_tokens));
  g_printerr ("# engine, seed 1234 (defaults): %u tokens, %d of %d steps ahead, GPU sampling = host sampling\n",
              gpu->generated_tokens->len, gpu->metrics.decode_ahead_tokens, gpu->metrics.decode_tokens);
  hone_generate_result_free (gpu);
  hone_generate_result_free (host);

  /* past the device's 256 best: pure temperature (every draw over the whole
   * vocabulary) and a top-p 0.99 nucleus at T 1.5 (thousands of tokens wide
   * on this model): the device walks the whole row, still one id a step and
   * every step but the first ahead, and the seed gives the host's tokens;
   * with the walk off (HONE_GPU_SAMPLING_WALK=0) pure temperature is left
   * to the host */
  for (int c = 0; c < 2; c++)
    {
      HoneSamplerParams wide;

      hone_sampler_params_init (&wide);
      wide.seed = 4321;
      wide.max_tokens = 48;
      wide.ignore_eog = TRUE;
      wide.temperature = c ? 1.5f : 1.0f;
      wide.top_k = 0;
      wide.top_p = c ? 0.99f : 1.0f;
      wide.min_p = 0.0f;
      gpu = engine_generate ("cuda:0", TRUE, TRUE, &wide, NULL);
      host = engine_generate ("cuda:0", FALSE, TRUE, &wide, NULL);
      g_assert_cmpint (gpu->metrics.device_sampled_tokens, ==, gpu->metrics.generated_tokens);
      g_assert_cmpint (gpu->metrics.decode_ahead_tokens, ==, gpu->metrics.decode_tokens - 1);
      g_assert_true (same_tokens (gpu->generated_tokens, host->generated_tokens));
      g_printerr ("# engine, seed 4321 (%s): %u tokens sampled on the GPU, %d of %d steps ahead, = host sampling "
                  "(decode %.1f vs %.1f tok/s)\n", c ? "T 1.5, top-p 0.99, no top-k" : "pure temperature T 1",
                  gpu->generated_tokens->len, gpu->metrics.decode_ahead_tokens, gpu->metrics.decode_tokens,
                  gpu->metrics.decode_tps, host->metrics.decode_tps);
      hone_generate_result_free (gpu);
      if (c == 0)
        {
          g_setenv ("HONE_GPU_SAMPLING_WALK", "0", TRUE);
          gpu = engine_generate ("cuda:0", TRUE, TRUE, &wide, NULL);
          g_unsetenv ("HONE_GPU_SAMPLING_WALK");
          g_assert_cmpint (gpu->metrics.device_sampled_tokens, ==, 0);
          g_assert_true (same_tokens (gpu->generated_tokens, host->generated_tokens));
          hone_generate_result_free (gpu);
        }
      hone_generate_result_free (host);
    }
  hone_generate_result_free (cpu);
}

/* Decode ahead through the backend itself: one backend that runs the step
 * after each one ahead (HoneBatchSampling.next) and one that does not
 * (HONE_DECODE_AHEAD=0) get the same calls and must give the same ids. The
 * calls cross the 256-key graph tier and page edges, feed another id than the
 * one sampled (i = 20), switch greedy to seeded sampling (30), truncate (35),
 * take logits to the host (45), ask for no step after (50) and draw from a
 * nucleus wider than the device sampler's 256 best (56..59): the device walks
 * the whole row and both backends give the same ids, or, with the walk off
 * (@data: HONE_GPU_SAMPLING_WALK=0), it answers -1, the backend re-runs the
 * step for its logits and both backends must give the same ones; the backend
 * must report a step as run ahead exactly where it could have been. */
static void
test_decode_ahead (gconstpointer data)
{
  const gboolean walk = GPOINTER_TO_INT (data);
  GError *error = NULL;
  HoneBackend *be[2];
  int seq[2], L = 239, hits = 0, want = 0, V;
  g_autofree float *lg = NULL, *lg0 = NULL;
  g_autoptr (GRand) rng = g_rand_new_with_seed (20261204);
  HoneBatchSampling bs, prev;
  gboolean prev_sampled = FALSE, prev_fallback = FALSE;
  int fallbacks = 0;
  gint32 feed, prev_id = -1;
  double u_next = g_rand_double (rng);

  if (!walk)
    g_setenv ("HONE_GPU_SAMPLING_WALK", "0", TRUE);
  g_setenv ("HONE_DECODE_AHEAD", "0", TRUE);
  be[0] = sampling_backend (L + 1, &seq[0]);
  g_unsetenv ("HONE_DECODE_AHEAD");
  if (!be[0])
    {
      g_unsetenv ("HONE_GPU_SAMPLING_WALK");
      return;
    }
  be[1] = sampling_backend (L + 1, &seq[1]);
  g_unsetenv ("HONE_GPU_SAMPLING_WALK");
  V = model->config.vocab;
  lg = g_new (float, V);
  lg0 = g_new (float, V);
  memset (&prev, 0, sizeof prev);
  feed = g_array_index (tokens, gint32, L);
  for (int i = 0; i < 64; i++)
    {
      const gboolean host = i == 45, flat = i >= 56 && i < 60;
      gint32 got[2], sampled[2];
      gboolean ahead[2], truncated = FALSE, expect;

      if (i == 20)
        feed = (prev_id + 1) % V;
      if (i == 35)
        {
          L -= 3;
          for (int k = 0; k < 2; k++)
            be[k]->klass->seq_truncate (be[k], seq[k], L);
          feed = g_array_index (tokens, gint32, L);
          truncated = TRUE;
        }
      memset (&bs, 0, sizeof bs);
      bs.temperature = i >= 30 ? 0.8f : 0.0f;
      bs.top_k = i >= 30 ? 40 : 0;
      bs.top_p = i >= 30 ? 0.95f : 1.0f;
      bs.min_p = i >= 30 ? 0.05f : 0.0f;
      if (flat)
        {
          /* nearly flat: the 0.99 nucleus holds far more than the device's candidates */
          bs.temperature = 50.0f;
          bs.top_k = 0;
          bs.top_p = 0.99f;
          bs.min_p = 0.0f;
        }
      bs.repeat_penalty = 1.0f;
      bs.u = u_next;
      u_next = g_rand_double (rng);
      bs.u_next = u_next;
      bs.next = i != 50;
      /* run ahead: the call before asked for it, fits the same graph tier,
       * and this one is the step it started */
      expect = i > 0 && prev_sampled && !prev_fallback && !host && prev.next && !truncated && feed == prev_id
               && bs.temperature == prev.temperature && hone_k_attn_ctx_bound (L) == hone_k_attn_ctx_bound (L + 1);
      for (int k = 0; k < 2; k++)
        {
          HoneBatch b = { seq[k], &feed, 1, FALSE, k ? lg : lg0 };
          b.sampling = host ? NULL : &bs;
          b.sampled = -1;
          g_assert_true (be[k]->klass->forward (be[k], &b, NULL, &error));
          g_assert_no_error (error);
          g_assert_cmpint (be[k]->klass->seq_length (be[k], seq[k]), ==, L + 1);
          sampled[k] = b.sampled;
          /* the engine would sample on the host from the logits; any id they fix will do here */
          got[k] = host || b.sampled < 0 ? argmax (k ? lg : lg0, V) : b.sampled;
          ahead[k] = b.ahead;
        }
      if (flat && walk)
        {
          g_assert_cmpint (sampled[0], >=, 0);
          g_assert_cmpint (sampled[1], ==, sampled[0]);
        }
      else if (flat)
        {
          float worst = 0.f;
          for (int v = 0; v < V; v++)
            worst = MAX (worst, fabsf (lg[v] - lg0[v]));
          g_assert_cmpint (sampled[0], ==, -1);
          g_assert_cmpint (sampled[1], ==, -1);
          g_assert_cmpfloat (worst, <=, 1e-4f);
          fallbacks++;
        }
      g_assert_cmpint (got[0], >=, 0);
      g_assert_cmpint (got[1], ==, got[0]);
      g_assert_false (ahead[0]);
      if (ahead[1] != expect)
        g_printerr ("# decode ahead: call %d at %d: ahead %d, expected %d\n", i, L, ahead[1], expect);
      g_assert_true (ahead[1] == expect);
      hits += ahead[1];
      want += expect;
      prev = bs;
      prev_sampled = !host;
      prev_fallback = flat && !walk;
      prev_id = got[1];
      feed = got[1];
      L++;
    }
  g_printerr ("# decode ahead%s: 64 calls, the same ids with and without; %d run ahead (as expected: %d); %d taken to "
              "the host by the sampler, with the same logits\n", walk ? "" : " (no whole-row walk)", hits, want,
              fallbacks);
  g_assert_cmpint (fallbacks, ==, walk ? 0 : 4);
  g_assert_cmpint (hits, >, 40);
  for (int k = 0; k < 2; k++)
    hone_backend_free (be[k]);
}

/* On the GPU machine "auto" picks the first GPU, with nothing to say, and
 * the checks the backend runs pass for it (cuBLAS opened, not linked). */
static void
test_pick_device (void)
{
  g_autofree char *why = NULL;
  g_autofree char *picked = NULL;
  char msg[512] = "";
  HoneBackend *probe = new_cuda ();

  if (probe == NULL)
    return;   /* skipped: no GPU */
  hone_backend_free (probe);
  picked = hone_engine_pick_device ("auto", &why);
  g_assert_cmpstr (picked, ==, "cuda:0");
  g_assert_null (why);
  g_assert_true (hone_cuda_device_check (0, NULL));
  g_assert_cmpint (hone_k_cublas_open (msg, sizeof msg), ==, 0);
}

/* ---- "auto" on a GPU without the memory for the model ----------------------- */

static void
assert_loaded_on (HoneEngine *e, const char *device, const char *note_part)
{
  g_autofree char *active = NULL, *note = NULL;

  g_object_get (e, "active-device", &active, "device-note", &note, NULL);
  g_assert_cmpint (hone_engine_get_state (e), ==, HONE_ENGINE_STATE_READY);
  g_assert_cmpstr (active, ==, device);
  if (note_part == NULL)
    g_assert_null (note);
  else
    {
      g_assert_nonnull (note);
      g_assert_nonnull (strstr (note, note_part));
      g_assert_null (strchr (note, '\n'));
    }
}

/* load-progress as the owner's context sees it: never back within one load. */
static void
on_load_progress (GObject *e, GParamSpec *pspec, gpointer data)
{
  double *last = data, p = 0.0;

  g_object_get (e, "load-progress", &p, NULL);
  g_assert_cmpfloat (p, >=, *last);
  *last = p;
}

/* With the GPU's memory taken (by this process, so that free memory is just
 * below what the default model needs there): "auto" loads on the CPU and the
 * device note carries the GPU's out-of-memory error; a named GPU fails with
 * that error and keeps the loaded model; with the memory back, "auto" takes
 * the GPU again, with no note. */
static void
test_auto_fallback (void)
{
  GError *error = NULL;
  g_autofree char *path = NULL;
  g_autoptr (HoneEngine) e = NULL;
  g_autoptr (GPtrArray) hogs = g_ptr_array_new ();
  HoneBackend *be = new_cuda ();
  HoneBackendOptions opt = { 0 };
  HoneModel *m;
  gint64 need;
  size_t free_b = 0, total_b = 0;
  double last_progress = 0.0;
  gulong handler;

  if (be == NULL)
    return;   /* skipped: no GPU */
  path = hone_default_model_find (&error);
  if (path == NULL)
    {
      g_test_skip (error->message);
      g_error_free (error);
      hone_backend_free (be);
      return;
    }
  m = hone_model_open (path, &error);
  g_assert_no_error (error);
  opt.max_context = 1024;
  need = be->klass->estimate (be, m, &opt);
  hone_backend_free (be);
  hone_model_unref (m);
  g_assert_cmpint (need, >, 64 << 20);

  /* Take the GPU's memory down to need - 32 MiB (the backend also keeps 64 MiB
   * of staging beyond the estimate): enough for a context and cuBLAS, not for
   * the model. */
  g_assert_cmpint (cudaMemGetInfo (&free_b, &total_b), ==, cudaSuccess);
  while ((gint64) free_b > need - (32 << 20))
    {
      size_t take = MIN ((size_t) 1 << 30, free_b - (size_t) (need - (32 << 20)));
      void *p = NULL;
      if (take < (2u << 20) || cudaMalloc (&p, take) != cudaSuccess)
        break;
      g_ptr_array_add (hogs, p);
      g_assert_cmpint (cudaMemGetInfo (&free_b, &total_b), ==, cudaSuccess);
    }
  g_assert_cmpint ((gint64) free_b, <, need + (64 << 20));

  e = hone_engine_new ();
  hone_engine_set_context_length (e, 1024);
  hone_engine_set_device (e, "auto");
  handler = g_signal_connect (e, "notify::load-progress", G_CALLBACK (on_load_progress), &last_progress);
  g_assert_true (hone_engine_load_sync (e, path, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  while (g_main_context_iteration (NULL, FALSE))
    ;   /* the last notifications */
  g_signal_handler_disconnect (e, handler);
  g_assert_cmpfloat (last_progress, ==, 1.0);
  assert_loaded_on (e, "cpu", "The model does not fit on cuda:0");
  assert_loaded_on (e, "cpu", "GPU memory");

  hone_engine_set_device (e, "cuda:0");
  g_assert_false (hone_engine_load_sync (e, path, NULL, NULL, NULL, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY);
  g_assert_nonnull (strstr (error->message, "GPU memory"));
  g_clear_error (&error);
  /* the previous load (the CPU's, with its note) is back */
  assert_loaded_on (e, "cpu", "The model does not fit on cuda:0");

  for (guint i = 0; i < hogs->len; i++)
    g_assert_cmpint (cudaFree (g_ptr_array_index (hogs, i)), ==, cudaSuccess);
  hone_engine_set_device (e, "auto");
  g_assert_true (hone_engine_load_sync (e, path, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  assert_loaded_on (e, "cuda:0", NULL);
}

int
main (int argc, char **argv)
{
  int r;

  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cuda/pick-device", test_pick_device);
  g_test_add_func ("/cuda/auto-fallback", test_auto_fallback);
  g_test_add_func ("/cuda/prefill", test_prefill);
  g_test_add_func ("/cuda/prefill-ahead", test_prefill_ahead);
  g_test_add_func ("/cuda/decode", test_decode);
  g_test_add_func ("/cuda/memory", test_memory);
  g_test_add_func ("/cuda/host-pages", test_host_pages);
  g_test_add_func ("/cuda/sample-greedy", test_sample_greedy);
  g_test_add_func ("/cuda/sample-distribution", test_sample_distribution);
  g_test_add_func ("/cuda/engine-sampling", test_engine_sampling);
  g_test_add_data_func ("/cuda/decode-ahead", GINT_TO_POINTER (TRUE), test_decode_ahead);
  g_test_add_data_func ("/cuda/decode-ahead-no-walk", GINT_TO_POINTER (FALSE), test_decode_ahead);
  for (guint i = 0; i < G_N_ELEMENTS (tiny_cases); i++)
    {
      char *name = g_strdup_printf ("/cuda/tiny/%s", tiny_cases[i].name);
      g_test_add_data_func (name, &tiny_cases[i], test_tiny);
      g_free (name);
    }
  for (guint i = 0; i < G_N_ELEMENTS (mixed_cases); i++)
    {
      char *name = g_strdup_printf ("/cuda/mixed/%s", mixed_cases[i].name);
      g_test_add_data_func (name, &mixed_cases[i], test_mixed);
      g_free (name);
    }
  r = g_test_run ();
  g_free (cpu_logits);
  if (tokens)
    g_array_unref (tokens);
  if (model)
    hone_model_unref (model);
  return r;
}
