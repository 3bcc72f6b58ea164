/* hone-cpu-backend.c — the CPU backend: a llama/qwen2/qwen3 forward pass over
 * weights in their stored type, on a thread pool.
 *
 * Prompts run as batches of 64–256 tokens (chunk_for): every matmul sees all of
 * a chunk's tokens at once (hone-cpu-matmul: weights repacked into panels of 16
 * or 8 rows, hone-cpu-panel.h), attention is causal inside the chunk. Decoding is
 * the same code with T = 1. Small per-token operations (norms, RoPE, quantizing
 * activations) run on the pool's threads over ranges of tokens (rows_run); they
 * are O(hidden) against the matmuls' O(hidden²).
 */
#include <inttypes.h>
#include "hone-backend.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "hone-error.h"
#include "hone-i18n.h"
#include "hone-cpu-attention.h"
#include "hone-cpu-dot.h"
#include "hone-cpu-kv.h"
#include "hone-cpu-matmul.h"
#include "hone-cpu-ops.h"
#include "hone-cpu-precise.h"
#include "hone-cpu-threadpool.h"

/* Tokens per prefill chunk (chunk_for): as many as CHUNK_MAX, giving the
 * kernels many tokens to reuse a weight block across — every chunk repacks the
 * weights into panels (hone-cpu-panel.h), and 256 tokens a chunk instead of 64
 * ran a 256-token prompt 14–19 % faster (session 29) — but the scratch, about
 * chunk·(4·hidden + 2·ffn) floats, is held to CHUNK_SHARE of the weights so a
 * small model stays within its memory budget (model + KV + 15 %): the
 * default model gets 128 (3.3 MB), Qwen3-0.6B and larger 256 (16 MB for
 * Qwen3-0.6B, 48 MB for Llama-3-8B). Cancellation is checked per layer. */
#define CHUNK_MAX 256
#define CHUNK_MIN 64
#define CHUNK_SHARE 0.05

typedef struct {
  float *attn_norm, *ffn_norm;
  float *bq, *bk, *bv;
  float *q_norm, *k_norm;
} CpuLayer;

typedef struct {
  HoneBackend parent;
  HoneModel *model;
  HoneModelConfig cfg;
  HoneCpuPool *pool;
  int max_ctx;
  int chunk;              /* tokens per prefill chunk (chunk_for) */
  int qdim, kvdim;
  CpuLayer *layers;
  float *output_norm;
  float *inv_freq;
  GPtrArray *seqs;          /* HoneCpuKv * or NULL (free slot) */

  /* workspace */
  float *x, *xn, *q, *k, *v, *att, *g, *u, *cosb, *sinb, *scores, *embd_row;
  HoneQ8Act *xq;
  gboolean precise;         /* f32 activations (hone-cpu-precise.h) */
  float *wdq;               /* precise: per-thread dequantized weight rows */
  gint64 workspace_bytes;
} HoneCpuBackend;

static HoneCpuBackend *
cpu (HoneBackend *self)
{
  return (HoneCpuBackend *) self;
}

/* ------------------------------------------------------------------ sizes */

static int
context_for (HoneModel *model, const HoneBackendOptions *options)
{
  int n = options != NULL && options->max_context > 0 ? options->max_context : model->config.max_context;
  return n > 0 ? n : 4096;
}

/* Precise mode: HoneBackendOptions.precise_activations, or HONE_CPU_PRECISE=1 in the environment. */
static gboolean
precise_for (const HoneBackendOptions *options)
{
  const char *env = g_getenv ("HONE_CPU_PRECISE");
  return (options != NULL && options->precise_activations) || (env != NULL && g_strcmp0 (env, "1") == 0);
}

/* Scratch bytes a token of a chunk takes (the buffers load() allocates). */
static gint64
chunk_bytes_per_token (const HoneModelConfig *c)
{
  gint64 qdim = (gint64) c->n_heads * c->head_dim, kvdim = (gint64) c->n_kv_heads * c->head_dim;
  gint64 wide = MAX (MAX (c->hidden, qdim), c->ffn);
  return 4 * (c->hidden + MAX (c->hidden, qdim) + 2 * qdim + 2 * kvdim + 2 * c->ffn + c->head_dim)
         + (gint64) hone_cpu_act_row_blocks ((int) wide) * (gint64) sizeof (HoneQ8Act);
}

/* Tokens per prefill chunk for weights of @weights bytes: a power of two in
 * [CHUNK_MIN, CHUNK_MAX], the largest whose scratch is ≤ CHUNK_SHARE of them. */
static int
chunk_for (const HoneModelConfig *c, gint64 weights)
{
  int chunk = CHUNK_MAX;

  while (chunk > CHUNK_MIN && chunk * chunk_bytes_per_token (c) > CHUNK_SHARE * weights)
    chunk /= 2;
  return chunk;
}

static gint64
workspace_bytes_for (const HoneModelConfig *c, int chunk, int max_ctx, int n_threads, gboolean precise)
{
  gint64 wide = MAX (MAX (c->hidden, (gint64) c->n_heads * c->head_dim), c->ffn);
  gint64 floats = (gint64) n_threads * (gint64) hone_cpu_attention_scratch_floats (max_ctx, c->head_dim) + c->hidden;
  if (precise)
    floats += (gint64) hone_cpu_matmul_precise_scratch ((int) wide, n_threads);
  return floats * 4 + (gint64) chunk * chunk_bytes_per_token (c);
}

static gint64
weight_bytes (HoneModel *model)
{
  gint64 n = (gint64) model->tok_embd.nbytes + model->output_norm.nbytes;
  if (!model->config.tied_embeddings && model->output.data != model->tok_embd.data)
    n += model->output.nbytes;
  for (int l = 0; l < model->config.n_layers; l++)
    {
      const HoneLayerWeights *L = &model->layers[l];
      const HoneTensor *ts[] = { &L->attn_norm, &L->wq, &L->wk, &L->wv, &L->wo, &L->bq, &L->bk, &L->bv,
                                 &L->q_norm, &L->k_norm, &L->ffn_norm, &L->w_gate, &L->w_up, &L->w_down };
      for (size_t i = 0; i < G_N_ELEMENTS (ts); i++)   /* absent: 0 bytes; AWQ linears not repacked yet count */
        n += ts[i]->nbytes;
    }
  return n;
}

/* ------------------------------------------------------------------ load */

static gint64 cpu_estimate (HoneBackend *self, HoneModel *model, const HoneBackendOptions *options);

static float *
vector_f32 (const HoneTensor *t, int n, const char *what, GError **error)
{
  float *v;

  if (!hone_tensor_present (t))
    return NULL;
  if (hone_tensor_n_elements (t) != n || hone_dtype_block_size (t->type) != 1 || !hone_dtype_is_supported (t->type))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_SHAPE_MISMATCH,
                   _("Tensor %s (%s) should be a vector of %d values"), t->name ? t->name : what,
                   hone_dtype_name (t->type) ? hone_dtype_name (t->type) : "?", n);
      return NULL;
    }
  v = g_new (float, n);
  hone_dequantize_row (t->type, t->data, v, n);
  return v;
}

static gboolean
check_matrix (const HoneTensor *t, int64_t K, int64_t N, const char *what, GError **error)
{
  if (!hone_tensor_present (t))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_MISSING_TENSOR, _("The model has no %s weight"), what);
      return FALSE;
    }
  if (!hone_cpu_type_supported (t->type))
    {
      const char *name = hone_dtype_name (t->type);
      g_set_error (error, HONE_ERROR, HONE_ERROR_UNSUPPORTED_TYPE,
                   _("The CPU backend cannot run tensor %s of type %s"), t->name ? t->name : what,
                   name ? name : "unknown");
      return FALSE;
    }
  if (t->n_dims != 2 || t->ne[0] != K || t->ne[1] != N || K % hone_cpu_type_k_align (t->type) != 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_SHAPE_MISMATCH,
                   _("Tensor %s has shape [%" PRId64 ", %" PRId64 "], expected [%" PRId64 ", %" PRId64 "]"),
                   t->name ? t->name : what, t->ne[0], t->ne[1], K, N);
      return FALSE;
    }
  return TRUE;
}

static void
release (HoneCpuBackend *b)
{
  if (b->seqs != NULL)
    g_ptr_array_free (b->seqs, TRUE);
  b->seqs = NULL;
  if (b->layers != NULL)
    for (int l = 0; l < b->cfg.n_layers; l++)
      {
        CpuLayer *L = &b->layers[l];
        g_free (L->attn_norm); g_free (L->ffn_norm);
        g_free (L->bq); g_free (L->bk); g_free (L->bv);
        g_free (L->q_norm); g_free (L->k_norm);
      }
  g_clear_pointer (&b->layers, g_free);
  g_clear_pointer (&b->output_norm, g_free);
  g_clear_pointer (&b->inv_freq, g_free);
  g_clear_pointer (&b->x, g_free);
  g_clear_pointer (&b->xn, g_free);
  g_clear_pointer (&b->q, g_free);
  g_clear_pointer (&b->k, g_free);
  g_clear_pointer (&b->v, g_free);
  g_clear_pointer (&b->att, g_free);
  g_clear_pointer (&b->g, g_free);
  g_clear_pointer (&b->u, g_free);
  g_clear_pointer (&b->cosb, g_free);
  g_clear_pointer (&b->sinb, g_free);
  g_clear_pointer (&b->scores, g_free);
  g_clear_pointer (&b->embd_row, g_free);
  g_clear_pointer (&b->xq, g_free);
  g_clear_pointer (&b->wdq, g_free);
  b->precise = FALSE;
  g_clear_pointer (&b->pool, hone_cpu_pool_free);
  g_clear_pointer (&b->model, hone_model_unref);
  b->workspace_bytes = 0;
}

static void
cpu_unload (HoneBackend *self)
{
  release (cpu (self));
}

/* Progress of a first part of the load, scaled to [0, span]. */
typedef struct {
  HoneProgressFunc func;
  gpointer data;
  double span;
} ScaledProgress;

static void
scaled_progress (double fraction, gpointer data)
{
  const ScaledProgress *s = data;
  s->func (fraction * s->span, s->data);
}

static gboolean
cpu_load (HoneBackend *self, HoneModel *model, const HoneBackendOptions *options,
          HoneProgressFunc progress, gpointer progress_data,
          GCancellable *cancellable, GError **error)
{
  HoneCpuBackend *b = cpu (self);
  const HoneModelConfig *c = &model->config;
  int qdim = c->n_heads * c->head_dim, kvdim = c->n_kv_heads * c->head_dim;
  int n_threads = options != NULL ? options->n_threads : 0;
  gint64 wide;
  double repack_share;

  release (b);
  if (options != NULL && options->memory_budget > 0 &&
      cpu_estimate (self, model, options) > options->memory_budget)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY,
                   _("The model needs %" PRId64 " MiB on the CPU backend, over the budget of %" PRId64 " MiB"),
                   cpu_estimate (self, model, options) >> 20, options->memory_budget >> 20);
      return FALSE;
    }
  if (c->n_layers <= 0 || c->hidden <= 0 || c->n_heads <= 0 || c->n_kv_heads <= 0 ||
      c->n_heads % c->n_kv_heads != 0 || c->head_dim <= 0 || c->head_dim % 2 != 0 ||
      c->head_dim > HONE_CPU_MAX_HEAD_DIM ||
      c->ffn <= 0 || c->vocab <= 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT, _("The model's configuration is not valid"));
      return FALSE;
    }
  if (!check_matrix (&model->tok_embd, c->hidden, c->vocab, "token_embd", error) ||
      !check_matrix (&model->output, c->hidden, c->vocab, "output", error))
    return FALSE;
  /* AWQ linears opened deferred are repacked now (most of an AWQ load's time) */
  repack_share = hone_model_deferred_bytes (model) > 0 ? 0.8 : 0.0;
  {
    ScaledProgress sp = { progress, progress_data, repack_share };
    if (!hone_model_materialize (model, cancellable, progress != NULL ? scaled_progress : NULL, &sp, error))
      return FALSE;
  }
  for (int l = 0; l < c->n_layers; l++)
    {
      const HoneLayerWeights *L = &model->layers[l];
      if (!check_matrix (&L->wq, c->hidden, qdim, "attn_q", error) ||
          !check_matrix (&L->wk, c->hidden, kvdim, "attn_k", error) ||
          !check_matrix (&L->wv, c->hidden, kvdim, "attn_v", error) ||
          !check_matrix (&L->wo, qdim, c->hidden, "attn_output", error) ||
          !check_matrix (&L->w_gate, c->hidden, c->ffn, "ffn_gate", error) ||
          !check_matrix (&L->w_up, c->hidden, c->ffn, "ffn_up", error) ||
          !check_matrix (&L->w_down, c->ffn, c->hidden, "ffn_down", error))
        return FALSE;
    }
  if (cancellable != NULL && g_cancellable_is_cancelled (cancellable))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_CANCELLED, _("Loading the model was cancelled"));
      return FALSE;
    }

  b->model = hone_model_ref (model);
  b->cfg = *c;
  b->qdim = qdim;
  b->kvdim = kvdim;
  b->max_ctx = context_for (model, options);
  b->pool = hone_cpu_pool_new (n_threads, error);
  if (b->pool == NULL)
    {
      release (b);
      return FALSE;
    }
  (void) hone_cpu_isa ();   /* detected here, once, before the pool's threads ask for it */

  b->layers = g_new0 (CpuLayer, c->n_layers);
  for (int l = 0; l < c->n_layers; l++)
    {
      const HoneLayerWeights *L = &model->layers[l];
      CpuLayer *C = &b->layers[l];
      GError *local = NULL;

      C->attn_norm = vector_f32 (&L->attn_norm, c->hidden, "attn_norm", &local);
      if (local == NULL)
        C->ffn_norm = vector_f32 (&L->ffn_norm, c->hidden, "ffn_norm", &local);
      if (local == NULL && (C->attn_norm == NULL || C->ffn_norm == NULL))
        g_set_error (&local, HONE_ERROR, HONE_ERROR_MISSING_TENSOR, _("Layer %d has no norm weights"), l);
      if (local == NULL && c->qkv_bias)
        {
          C->bq = vector_f32 (&L->bq, qdim, "attn_q.bias", &local);
          if (local == NULL)
            C->bk = vector_f32 (&L->bk, kvdim, "attn_k.bias", &local);
          if (local == NULL)
            C->bv = vector_f32 (&L->bv, kvdim, "attn_v.bias", &local);
        }
      if (local == NULL && c->qk_norm)
        {
          C->q_norm = vector_f32 (&L->q_norm, c->head_dim, "attn_q_norm", &local);
          if (local == NULL)
            C->k_norm = vector_f32 (&L->k_norm, c->head_dim, "attn_k_norm", &local);
          if (local == NULL && (C->q_norm == NULL || C->k_norm == NULL))
            g_set_error (&local, HONE_ERROR, HONE_ERROR_MISSING_TENSOR, _("Layer %d has no q/k norm weights"), l);
        }
      if (local != NULL)
        {
          g_propagate_error (error, local);
          release (b);
          return FALSE;
        }
      if (progress != NULL)
        progress (repack_share + (0.9 - repack_share) * (l + 1) / c->n_layers, progress_data);
    }
  {
    GError *local = NULL;
    b->output_norm = vector_f32 (&model->output_norm, c->hidden, "output_norm", &local);
    if (b->output_norm == NULL)
      {
        if (local == NULL)
          g_set_error (&local, HONE_ERROR, HONE_ERROR_MISSING_TENSOR, _("The model has no output_norm weight"));
        g_propagate_error (error, local);
        release (b);
        return FALSE;
      }
  }

  b->inv_freq = g_new (float, c->head_dim / 2);
  hone_cpu_rope_inv_freq (c, c->head_dim, b->inv_freq);

  wide = MAX (MAX (c->hidden, qdim), c->ffn);
  b->chunk = chunk_for (c, weight_bytes (model));
  b->x = g_new0 (float, (gsize) b->chunk * c->hidden);
  b->xn = g_new0 (float, (gsize) b->chunk * MAX (c->hidden, qdim));
  b->q = g_new0 (float, (gsize) b->chunk * qdim);
  b->att = g_new0 (float, (gsize) b->chunk * qdim);
  b->k = g_new0 (float, (gsize) b->chunk * kvdim);
  b->v = g_new0 (float, (gsize) b->chunk * kvdim);
  b->g = g_new0 (float, (gsize) b->chunk * c->ffn);
  b->u = g_new0 (float, (gsize) b->chunk * c->ffn);
  b->cosb = g_new0 (float, (gsize) b->chunk * c->head_dim / 2);
  b->sinb = g_new0 (float, (gsize) b->chunk * c->head_dim / 2);
  b->embd_row = g_new0 (float, c->hidden);
  b->scores = g_try_new (float, (gsize) hone_cpu_pool_n_threads (b->pool)
                                    * hone_cpu_attention_scratch_floats (b->max_ctx, c->head_dim));
  b->xq = g_new0 (HoneQ8Act, (gsize) b->chunk * hone_cpu_act_row_blocks ((int) wide));
  b->precise = precise_for (options);
  if (b->precise)
    b->wdq = g_try_new (float, hone_cpu_matmul_precise_scratch ((int) wide, hone_cpu_pool_n_threads (b->pool)));
  if (b->scores == NULL || (b->precise && b->wdq == NULL))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY, _("Could not allocate attention scratch for %d tokens"), b->max_ctx);
      release (b);
      return FALSE;
    }
  b->workspace_bytes = workspace_bytes_for (c, b->chunk, b->max_ctx, hone_cpu_pool_n_threads (b->pool), b->precise);
  b->seqs = g_ptr_array_new_with_free_func ((GDestroyNotify) hone_cpu_kv_free);
  if (progress != NULL)
    progress (1.0, progress_data);
  return TRUE;
}

static gint64
cpu_estimate (HoneBackend *self, HoneModel *model, const HoneBackendOptions *options)
{
  const HoneModelConfig *c = &model->config;
  int ctx = context_for (model, options);
  int nth = options != NULL && options->n_threads > 0 ? options->n_threads : hone_cpu_pool_default_threads ();
  return weight_bytes (model) + hone_cpu_kv_bytes_for (c->n_layers, c->n_kv_heads, c->head_dim, ctx)
         + workspace_bytes_for (c, chunk_for (c, weight_bytes (model)), ctx, nth, precise_for (options));
}

static HoneBackendCaps
cpu_caps (HoneBackend *self)
{
  return 0;
}

/* ------------------------------------------------------------------ sequences */

static HoneCpuKv *
seq_get (HoneCpuBackend *b, int seq)
{
  if (b->seqs == NULL || seq < 0 || (guint) seq >= b->seqs->len)
    return NULL;
  return g_ptr_array_index (b->seqs, seq);
}

static int
cpu_seq_new (HoneBackend *self, GError **error)
{
  HoneCpuBackend *b = cpu (self);
  HoneCpuKv *kv;
  guint slot;

  if (b->model == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_NO_MODEL, _("No model is loaded on the CPU backend"));
      return -1;
    }
  kv = hone_cpu_kv_new (b->cfg.n_layers, b->cfg.n_kv_heads, b->cfg.head_dim, b->max_ctx, error);
  if (kv == NULL)
    return -1;
  for (slot = 0; slot < b->seqs->len; slot++)
    if (g_ptr_array_index (b->seqs, slot) == NULL)
      break;
  if (slot == b->seqs->len)
    g_ptr_array_add (b->seqs, kv);
  else
    b->seqs->pdata[slot] = kv;
  return (int) slot;
}

static void
cpu_seq_free (HoneBackend *self, int seq)
{
  HoneCpuBackend *b = cpu (self);
  HoneCpuKv *kv = seq_get (b, seq);
  if (kv == NULL)
    return;
  hone_cpu_kv_free (kv);
  b->seqs->pdata[seq] = NULL;
}

static int
cpu_seq_length (HoneBackend *self, int seq)
{
  HoneCpuKv *kv = seq_get (cpu (self), seq);
  return kv != NULL ? kv->length : -1;
}

static void
cpu_seq_truncate (HoneBackend *self, int seq, int n_tokens)
{
  HoneCpuKv *kv = seq_get (cpu (self), seq);
  if (kv != NULL && n_tokens >= 0 && n_tokens < kv->length)
    kv->length = n_tokens;
}

/* ------------------------------------------------------------------ forward */

/* Per-token work between the matmuls (norms, activation quantization, SwiGLU,
 * q/k bias, norm and RoPE, the KV stores) on every thread of the pool, each
 * taking a contiguous range of the T tokens, when the batch is a prompt's:
 * done by the calling thread alone it left the other threads waiting (session
 * 28). A decode step (T below ROWS_PARALLEL_MIN) keeps it on one thread, where
 * waking the pool would cost more than the work. Each token's values are
 * computed as on one thread: the split changes no bit. */
#define ROWS_PARALLEL_MIN 4

typedef void (*RowsFunc) (gpointer ctx, int t0, int t1);

typedef struct {
  RowsFunc fn;
  gpointer ctx;
  int T;
} RowsJob;

static void
rows_worker (gpointer data, int ith, int nth)
{
  const RowsJob *job = data;
  const int t0 = (int) ((gint64) job->T * ith / nth), t1 = (int) ((gint64) job->T * (ith + 1) / nth);

  if (t1 > t0)
    job->fn (job->ctx, t0, t1);
}

static void
rows_run (HoneCpuBackend *b, int T, RowsFunc fn, gpointer ctx)
{
  RowsJob job = { fn, ctx, T };

  if (T < ROWS_PARALLEL_MIN || hone_cpu_pool_n_threads (b->pool) == 1)
    fn (ctx, 0, T);
  else
    hone_cpu_pool_run (b->pool, rows_worker, &job);
}

typedef struct {
  const float *x, *w;
  float *y;
  HoneQ8Act *xq;
  int n;
  float eps;
} RowsArgs;

static void
quantize_range (gpointer ctx, int t0, int t1)
{
  const RowsArgs *a = ctx;
  for (int t = t0; t < t1; t++)
    hone_cpu_quantize_act (a->x + (size_t) t * a->n, a->xq + (size_t) t * hone_cpu_act_row_blocks (a->n), a->n);
}

static void
norm_range (gpointer ctx, int t0, int t1)
{
  const RowsArgs *a = ctx;
  for (int t = t0; t < t1; t++)
    hone_cpu_rmsnorm (a->x + (size_t) t * a->n, a->w, a->y + (size_t) t * a->n, a->n, a->eps);
}

/* y = silu(y) · w, rows of n (y is the gate, x the up projection) */
static void
swiglu_range (gpointer ctx, int t0, int t1)
{
  const RowsArgs *a = ctx;
  hone_cpu_swiglu (a->y + (size_t) t0 * a->n, a->x + (size_t) t0 * a->n, (t1 - t0) * a->n);
}

static void
quantize_rows (HoneCpuBackend *b, const float *x, HoneQ8Act *xq, int T, int K)
{
  RowsArgs a = { .x = x, .xq = xq, .n = K };
  rows_run (b, T, quantize_range, &a);
}

/* y (T × N per out) = x (T × K) · Wᵀ for one or more matrices sharing x. */
static void
matmul (HoneCpuBackend *b, HoneCpuMatmulOut *outs, int n, const float *x, int K, int T)
{
  const HoneQ8Act *xq = NULL;
  if (b->precise)
    {
      hone_cpu_matmul_precise (b->pool, outs, n, x, K, T, b->wdq);
      return;
    }
  if (hone_cpu_matmul_needs_q8 (outs, n))
    {
      quantize_rows (b, x, b->xq, T, K);
      xq = b->xq;
    }
  hone_cpu_matmul (b->pool, outs, n, x, xq, K, T);
}

static void
norm_rows (HoneCpuBackend *b, const float *x, const float *w, float *y, int T, int n, float eps)
{
  RowsArgs a = { .x = x, .w = w, .y = y, .n = n, .eps = eps };
  rows_run (b, T, norm_range, &a);
}

static void
swiglu_rows (HoneCpuBackend *b, float *g, const float *u, int T, int n)
{
  RowsArgs a = { .x = u, .y = g, .n = n };
  rows_run (b, T, swiglu_range, &a);
}

/* q, k, v of tokens t0..t1 of a layer: biases, q/k norms, RoPE, then k and v
 * into the cache at their positions. */
typedef struct {
  HoneCpuBackend *b;
  HoneCpuKv *kv;
  int l, pos0;
} QkvArgs;

static void
qkv_range (gpointer ctx, int t0, int t1)
{
  const QkvArgs *a = ctx;
  HoneCpuBackend *b = a->b;
  const HoneModelConfig *c = &b->cfg;
  const CpuLayer *L = &b->layers[a->l];
  const int hd = c->head_dim, half = hd / 2;

  for (int t = t0; t < t1; t++)
    {
      float *q = b->q + (size_t) t * b->qdim, *k = b->k + (size_t) t * b->kvdim, *v = b->v + (size_t) t * b->kvdim;
      if (L->bq != NULL)
        {
          hone_cpu_add (q, L->bq, b->qdim);
          hone_cpu_add (k, L->bk, b->kvdim);
          hone_cpu_add (v, L->bv, b->kvdim);
        }
      if (L->q_norm != NULL)
        {
          for (int h = 0; h < c->n_heads; h++)
            hone_cpu_rmsnorm (q + h * hd, L->q_norm, q + h * hd, hd, c->rms_eps);
          for (int h = 0; h < c->n_kv_heads; h++)
            hone_cpu_rmsnorm (k + h * hd, L->k_norm, k + h * hd, hd, c->rms_eps);
        }
      hone_cpu_rope (q, c->n_heads, hd, b->cosb + t * half, b->sinb + t * half, c->rope_pairing);
      hone_cpu_rope (k, c->n_kv_heads, hd, b->cosb + t * half, b->sinb + t * half, c->rope_pairing);
      hone_cpu_kv_store (a->kv, a->l, a->pos0 + t, k, v);
    }
}

static void
layer_forward (HoneCpuBackend *b, HoneCpuKv *kv, int l, int pos0, int T)
{
  const HoneModelConfig *c = &b->cfg;
  const HoneLayerWeights *W = &b->model->layers[l];
  const CpuLayer *L = &b->layers[l];
  HoneCpuMatmulOut qkv[3] = { { &W->wq, b->q }, { &W->wk, b->k }, { &W->wv, b->v } };
  HoneCpuMatmulOut o[1] = { { &W->wo, b->xn } };
  HoneCpuMatmulOut gu[2] = { { &W->w_gate, b->g }, { &W->w_up, b->u } };
  HoneCpuMatmulOut down[1] = { { &W->w_down, b->xn } };

  /* attention */
  norm_rows (b, b->x, L->attn_norm, b->xn, T, c->hidden, c->rms_eps);
  matmul (b, qkv, 3, b->xn, c->hidden, T);
  {
    QkvArgs a = { b, kv, l, pos0 };
    rows_run (b, T, qkv_range, &a);
  }
  hone_cpu_attention (b->pool, kv, l, b->q, T, pos0, c->n_heads, b->att, b->scores,
                      hone_cpu_attention_scratch_floats (b->max_ctx, c->head_dim));
  matmul (b, o, 1, b->att, b->qdim, T);
  hone_cpu_add (b->x, b->xn, T * c->hidden);

  /* MLP */
  norm_rows (b, b->x, L->ffn_norm, b->xn, T, c->hidden, c->rms_eps);
  matmul (b, gu, 2, b->xn, c->hidden, T);
  swiglu_rows (b, b->g, b->u, T, c->ffn);
  matmul (b, down, 1, b->g, c->ffn, T);
  hone_cpu_add (b->x, b->xn, T * c->hidden);
}

static gboolean
cancelled (GCancellable *cancellable, GError **error)
{
  if (cancellable != NULL && g_cancellable_is_cancelled (cancellable))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_CANCELLED, _("The forward pass was cancelled"));
      return TRUE;
    }
  return FALSE;
}

static gboolean
cpu_forward (HoneBackend *self, HoneBatch *batch, GCancellable *cancellable, GError **error)
{
  HoneCpuBackend *b = cpu (self);
  const HoneModelConfig *c = &b->cfg;
  HoneCpuKv *kv;
  int start;

  if (b->model == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_NO_MODEL, _("No model is loaded on the CPU backend"));
      return FALSE;
    }
  kv = seq_get (b, batch->seq);
  if (kv == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT, _("Sequence %d does not exist"), batch->seq);
      return FALSE;
    }
  if (batch->n_tokens <= 0 || batch->tokens == NULL || batch->logits == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT, _("A forward batch needs tokens and a logits buffer"));
      return FALSE;
    }
  for (int i = 0; i < batch->n_tokens; i++)
    if (batch->tokens[i] < 0 || batch->tokens[i] >= c->vocab)
      {
        g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                     _("Token id %d at index %d is outside the vocabulary (%d tokens)"),
                     batch->tokens[i], i, c->vocab);
        return FALSE;
      }
  if ((gint64) kv->length + batch->n_tokens > kv->capacity)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_CONTEXT_OVERFLOW,
                   _("%d tokens do not fit: the sequence holds %d of %d positions"),
                   batch->n_tokens, kv->length, kv->capacity);
      return FALSE;
    }

  start = kv->length;
  for (int done = 0; done < batch->n_tokens; done += b->chunk)
    {
      const int T = MIN (b->chunk, batch->n_tokens - done);
      const int pos0 = start + done;
      const int half = c->head_dim / 2;
      const HoneTensor *E = &b->model->tok_embd;
      gboolean last_chunk = done + T == batch->n_tokens;

      if (cancelled (cancellable, error))
        {
          kv->length = start;
          return FALSE;
        }
      for (int t = 0; t < T; t++)
        {
          hone_dequantize_row (E->type, hone_tensor_row (E, batch->tokens[done + t]),
                               b->x + (size_t) t * c->hidden, c->hidden);
          hone_cpu_rope_cos_sin (b->inv_freq, c->head_dim, pos0 + t, b->cosb + t * half, b->sinb + t * half);
        }
      for (int l = 0; l < c->n_layers; l++)
        {
          if (l > 0 && cancelled (cancellable, error))
            {
              kv->length = start;
              return FALSE;
            }
          layer_forward (b, kv, l, pos0, T);
        }
      if (batch->all_logits)
        {
          HoneCpuMatmulOut out = { &b->model->output, batch->logits + (size_t) done * c->vocab };
          norm_rows (b, b->x, b->output_norm, b->xn, T, c->hidden, c->rms_eps);
          matmul (b, &out, 1, b->xn, c->hidden, T);
        }
      else if (last_chunk)
        {
          HoneCpuMatmulOut out = { &b->model->output, batch->logits };
          hone_cpu_rmsnorm (b->x + (size_t) (T - 1) * c->hidden, b->output_norm, b->xn, c->hidden, c->rms_eps);
          matmul (b, &out, 1, b->xn, c->hidden, 1);
        }
      /* positions are committed chunk by chunk: attention of the next chunk reads them */
      kv->length = pos0 + T;
    }
  return TRUE;
}

/* ------------------------------------------------------------------ memory */

static gint64
proc_status_kb (const char *key)
{
  g_autofree char *contents = NULL;
  const char *p;
  size_t klen = strlen (key);

  if (!g_file_get_contents ("/proc/self/status", &contents, NULL, NULL))
    return -1;
  for (p = contents; p != NULL && *p; p = strchr (p, '\n') ? strchr (p, '\n') + 1 : NULL)
    if (strncmp (p, key, klen) == 0 && p[klen] == ':')
      return g_ascii_strtoll (p + klen + 1, NULL, 10);
  return -1;
}

static void
cpu_memory (HoneBackend *self, HoneMemoryReport *report)
{
  HoneCpuBackend *b = cpu (self);
  gint64 rss = proc_status_kb ("VmRSS"), hwm = proc_status_kb ("VmHWM");
  long pages = sysconf (_SC_PHYS_PAGES), page = sysconf (_SC_PAGESIZE);

  memset (report, 0, sizeof *report);
  if (b->model != NULL)
    report->weights = weight_bytes (b->model);
  if (b->seqs != NULL)
    for (guint i = 0; i < b->seqs->len; i++)
      {
        HoneCpuKv *kv = g_ptr_array_index (b->seqs, i);
        if (kv != NULL)
          report->kv_cache += kv->bytes;
      }
  report->workspace = b->workspace_bytes;
  report->used = rss >= 0 ? rss * 1024 : 0;
  report->peak = hwm >= 0 ? hwm * 1024 : report->used;
  report->total = pages > 0 && page > 0 ? (gint64) pages * page : 0;
}

static void
cpu_free (HoneBackend *self)
{
  release (cpu (self));
  g_free (self);
}

static const HoneBackendClass cpu_class = {
  .name = "cpu",
  .load = cpu_load,
  .unload = cpu_unload,
  .estimate = cpu_estimate,
  .caps = cpu_caps,
  .seq_new = cpu_seq_new,
  .seq_free = cpu_seq_free,
  .seq_length = cpu_seq_length,
  .seq_truncate = cpu_seq_truncate,
  .forward = cpu_forward,
  .memory = cpu_memory,
  .free = cpu_free,
};

const char *
hone_cpu_backend_isa (void)
{
  return hone_cpu_isa_name (hone_cpu_isa ());
}

HoneBackend *
hone_cpu_backend_new (GError **error)
{
  HoneCpuBackend *b = g_new0 (HoneCpuBackend, 1);
  b->parent.klass = &cpu_class;
  return &b->parent;
}
