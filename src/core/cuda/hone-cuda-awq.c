/* hone-cuda-awq.c — AWQ calibration on the GPU (host side; see hone-cuda-awq.h).
 *
 * The algorithm of hone-awq.c step for step, with the layer's activations
 * and f32 weights on the device: per layer the unquantized forward (inputs of
 * every linear, reference outputs), the four scale searches (candidate
 * weights fake-quantized on the device, the inspected module re-run through
 * cuBLAS, MSE reduced on the device in a fixed order), the folds, the clip
 * search, the final quantizer; only q/z/s come back. The grid's scales are
 * computed on the host by the same function as the CPU path
 * (hone_awq_grid_scales) from statistics summed on the device.
 *
 * Memory: the layer's f32 weights twice (originals and candidates) plus the
 * activations of all samples (about 8·T·hidden + 3·T·ffn floats); nothing
 * of other layers. Weights in BF16/F16/F32 go up as stored and are widened
 * there; other types are dequantized on the host first.
 *
 * GEMM operands (HONE_AWQ_GEMM=f32|tf32|bf16, default tf32; f32 accumulation
 * always): the search compares candidates whose losses differ by percents,
 * far above TF32 operand rounding (2^-11). Measured against the CPU path
 * (tests/test-cuda-awq.c, tests/bench/RESULTS-awq.md): the same grid choice
 * in all groups but near-ties (< 0.03 % apart in loss), > 99.8 % of the
 * int4 values equal. bf16: the linears' operands are rounded to BF16 on the
 * device before each GEMM (attention stays TF32); asking cuBLAS for
 * CUBLAS_COMPUTE_32F_FAST_16BF on f32 operands instead ran exactly the TF32
 * kernels on the H200 (same time, same bits).
 */
#include "hone-cuda-awq.h"
#include "hone-awq-private.h"
#include "hone-backend.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <string.h>
#include "hone-dtype.h"
#include "hone-error.h"
#include "hone-i18n.h"
#include "hone-k-awq.h"
#include "cpu/hone-cpu-ops.h"

#define S_BYTES ((size_t) 256 << 20)      /* attention score scratch */
#define EMB_CHUNK 4096                    /* tokens dequantized on the host at a time */

typedef struct {
  HoneModel *model;
  const HoneModelConfig *c;
  const HoneAwqOptions *o;
  cudaStream_t st;
  void *blas;
  int prec;
  int L, n_seq, T, n_loss_seq, Tl, g;
  int H, qdim, kvdim, F, hd, half, s_seqs;
  GPtrArray *allocs;
  /* device */
  float *h, *h2, *xa, *xm, *q, *k, *v, *att, *att_c, *gs, *u, *act, *oref, *yref, *out, *S;
  float *W[HONE_AWQ_N_LINEARS], *tmp[HONE_AWQ_N_LINEARS];
  int N[HONE_AWQ_N_LINEARS], K[HONE_AWQ_N_LINEARS];
  float *d_attn_norm, *d_ffn_norm, *d_bq, *d_bk, *d_bv, *d_qn, *d_kn, *d_cos, *d_sin, *d_s, *gram;
  double *partial, *colsum, *errp;
  guint16 *wb, *xb;                    /* BF16 operands (HONE_AWQ_GEMM=bf16) */
  /* host: the layer's small vectors (folded here) */
  float *attn_norm, *ffn_norm, *bq, *bk, *bv, *qn, *kn;
} Gpu;

/* ---- errors and memory ---------------------------------------------------- */

static gboolean
failed (int e, const char *what, GError **error)
{
  if (e == 0)
    return FALSE;
  if (e >= HONE_K_AWQ_BLAS_ERROR)
    g_set_error (error, HONE_ERROR, HONE_ERROR_BACKEND, _("cuBLAS: %s failed (status %d)"), what,
                 e - HONE_K_AWQ_BLAS_ERROR);
  else
    {
      (void) cudaGetLastError ();
      g_set_error (error, HONE_ERROR, e == cudaErrorMemoryAllocation ? HONE_ERROR_OUT_OF_MEMORY : HONE_ERROR_BACKEND,
                   _("CUDA: %s failed: %s"), what, cudaGetErrorString ((cudaError_t) e));
    }
  return TRUE;
}

static void *
dalloc (Gpu *G, size_t bytes, GError **error)
{
  void *p = NULL;
  if (cudaMalloc (&p, bytes ? bytes : 16) != cudaSuccess)
    {
      (void) cudaGetLastError ();
      g_set_error (error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY,
                   _("Out of GPU memory allocating %.1f MiB for AWQ calibration"), bytes / 1048576.0);
      return NULL;
    }
  g_ptr_array_add (G->allocs, p);
  return p;
}

static gboolean
upload (Gpu *G, void *dst, const void *src, size_t bytes, GError **error)
{
  return !failed (cudaMemcpyAsync (dst, src, bytes, cudaMemcpyHostToDevice, G->st), "upload", error);
}

static gboolean
download (Gpu *G, void *dst, const void *src, size_t bytes, GError **error)
{
  return !failed (cudaMemcpyAsync (dst, src, bytes, cudaMemcpyDeviceToHost, G->st), "download", error)
      && !failed (cudaStreamSynchronize (G->st), "synchronize", error);
}

static void
stage (Gpu *G, const char *name, gint64 *ts)
{
  if (hone_awq_debug ())
    cudaStreamSynchronize (G->st);
  hone_awq_stage_time (name, ts);
}

gboolean
hone_cuda_awq_available (GError **error)
{
  /* the same device, driver and cuBLAS checks as the CUDA backend's, on device 0 */
  return hone_cuda_device_check (0, error);
}

static int
gemm_precision (void)
{
  const char *p = g_getenv ("HONE_AWQ_GEMM");
  if (g_strcmp0 (p, "f32") == 0)
    return HONE_K_AWQ_GEMM_F32;
  if (g_strcmp0 (p, "bf16") == 0)
    return HONE_K_AWQ_GEMM_BF16;
  return HONE_K_AWQ_GEMM_TF32;
}

/* ---- the layer's weights ---------------------------------------------------- */

static float *
host_vec (const HoneTensor *t)
{
  return hone_tensor_present (t) ? hone_awq_dequant_tensor (t) : NULL;
}

static gboolean
load_layer (Gpu *G, const HoneLayerWeights *L, GError **error)
{
  for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
    {
      const HoneTensor *t = hone_awq_layer_tensor (L, i);
      size_t n = (size_t) G->N[i] * G->K[i];

      if (t->ne[0] != G->K[i] || t->ne[1] != G->N[i])
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT, _("A layer's %s has an unexpected shape"),
                       t->name ? t->name : "weight");
          return FALSE;
        }
      if (t->type == HONE_DTYPE_F32)
        {
          if (!upload (G, G->W[i], t->data, n * sizeof (float), error))
            return FALSE;
        }
      else if (t->type == HONE_DTYPE_BF16 || t->type == HONE_DTYPE_F16)
        {
          /* As stored into the candidate buffer (room for 2× that), widened there. */
          if (!upload (G, G->tmp[i], t->data, n * 2, error)
              || failed (hone_k_awq_widen ((const uint16_t *) G->tmp[i], (int) t->type, n, G->W[i], G->st),
                         "widen", error))
            return FALSE;
        }
      else
        {
          g_autofree float *w = hone_awq_dequant_tensor (t);
          if (!upload (G, G->W[i], w, n * sizeof (float), error)
              || failed (cudaStreamSynchronize (G->st), "synchronize", error))
            return FALSE;
        }
    }
  /* the linears are on the device: their file pages leave the resident memory */
  if (failed (cudaStreamSynchronize (G->st), "synchronize", error))
    return FALSE;
  for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
    {
      const HoneTensor *t = hone_awq_layer_tensor (L, i);
      hone_model_release_bytes (G->model, t->data, t->nbytes);
    }
  G->attn_norm = hone_awq_dequant_tensor (&L->attn_norm);
  G->ffn_norm = hone_awq_dequant_tensor (&L->ffn_norm);
  G->bq = host_vec (&L->bq);
  G->bk = host_vec (&L->bk);
  G->bv = host_vec (&L->bv);
  G->qn = host_vec (&L->q_norm);
  G->kn = host_vec (&L->k_norm);
  if (G->bq && (!G->bk || !G->bv))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT, _("A layer has a q bias but no k or v bias"));
      return FALSE;
    }
  if (G->qn && !G->kn)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT, _("A layer has a q norm but no k norm"));
      return FALSE;
    }
  return upload (G, G->d_attn_norm, G->attn_norm, G->H * sizeof (float), error)
      && upload (G, G->d_ffn_norm, G->ffn_norm, G->H * sizeof (float), error)
      && (!G->bq || (upload (G, G->d_bq, G->bq, G->qdim * sizeof (float), error)
                     && upload (G, G->d_bk, G->bk, G->kvdim * sizeof (float), error)
                     && upload (G, G->d_bv, G->bv, G->kvdim * sizeof (float), error)))
      && (!G->qn || (upload (G, G->d_qn, G->qn, G->hd * sizeof (float), error)
                     && upload (G, G->d_kn, G->kn, G->hd * sizeof (float), error)))
      && !failed (cudaStreamSynchronize (G->st), "synchronize", error);
}

static void
layer_host_clear (Gpu *G)
{
  g_clear_pointer (&G->attn_norm, g_free);
  g_clear_pointer (&G->ffn_norm, g_free);
  g_clear_pointer (&G->bq, g_free);
  g_clear_pointer (&G->bk, g_free);
  g_clear_pointer (&G->bv, g_free);
  g_clear_pointer (&G->qn, g_free);
  g_clear_pointer (&G->kn, g_free);
}

/* ---- the forward pieces ------------------------------------------------------ */

/* y = x·Wᵀ. BF16: W and x are rounded into wb/xb first; x_ready: xb already
 * holds x (the previous GEMM had the same input). */
static gboolean
gemm_x (Gpu *G, const float *W, int N, int K, const float *x, int T, float *y, gboolean x_ready, GError **error)
{
  if (G->prec == HONE_K_AWQ_GEMM_BF16 && G->wb)
    return !failed (hone_k_awq_to_bf16 (W, G->wb, (size_t) N * K, G->st), "BF16 rounding", error)
        && (x_ready || !failed (hone_k_awq_to_bf16 (x, G->xb, (size_t) T * K, G->st), "BF16 rounding", error))
        && !failed (hone_k_awq_gemm_bf16 (G->blas, G->wb, N, K, G->xb, T, y), "GEMM", error);
  return !failed (hone_k_awq_gemm (G->blas, G->prec, W, N, K, x, T, y), "GEMM", error);
}

static gboolean
gemm (Gpu *G, const float *W, int N, int K, const float *x, int T, float *y, GError **error)
{
  return gemm_x (G, W, N, K, x, T, y, FALSE, error);
}

/* Attention of the first n_seq samples: xn [T×H] → att [T×qdim] (o's input). */
static gboolean
attention (Gpu *G, const float *xn, int n_seq, const float *Wq, const float *Wk, const float *Wv, float *att,
           GError **error)
{
  int T = n_seq * G->L;
  const HoneModelConfig *c = G->c;

  return gemm (G, Wq, G->qdim, G->H, xn, T, G->q, error)
      && gemm_x (G, Wk, G->kvdim, G->H, xn, T, G->k, TRUE, error)
      && gemm_x (G, Wv, G->kvdim, G->H, xn, T, G->v, TRUE, error)
      && !failed (hone_k_awq_qk_prep (G->q, G->k, G->v, G->bq ? G->d_bq : NULL, G->d_bk, G->d_bv,
                                      G->qn ? G->d_qn : NULL, G->d_kn, G->d_cos, G->d_sin, T, G->L,
                                      c->n_heads, c->n_kv_heads, G->hd,
                                      c->rope_pairing == HONE_ROPE_PAIRS_ADJACENT, c->rms_eps, G->st),
                  "attention", error)
      && !failed (hone_k_awq_attention (G->blas, G->prec, G->q, G->k, G->v, att, G->S, G->s_seqs, n_seq, G->L,
                                        c->n_heads, c->n_kv_heads, G->hd, G->st), "attention", error);
}

/* Output of the inspected module over the loss samples with the weights W. */
static gboolean
inspect (Gpu *G, HoneAwqGroupKind kind, float *const *W, const float *x, float *out, GError **error)
{
  int Tl = G->Tl, H = G->H, F = G->F;

  switch (kind)
    {
    case HONE_AWQ_GROUP_QKV:
      return attention (G, x, G->n_loss_seq, W[HONE_AWQ_WQ], W[HONE_AWQ_WK], W[HONE_AWQ_WV], G->att, error)
          && gemm (G, W[HONE_AWQ_WO], H, G->qdim, G->att, Tl, out, error);
    case HONE_AWQ_GROUP_VO:
      return gemm (G, W[HONE_AWQ_WO], H, G->qdim, x, Tl, out, error);
    case HONE_AWQ_GROUP_GATE_UP:
      return gemm (G, W[HONE_AWQ_W_GATE], F, H, x, Tl, G->gs, error)
          && gemm_x (G, W[HONE_AWQ_W_UP], F, H, x, Tl, G->u, TRUE, error)
          && !failed (hone_k_awq_swiglu (G->gs, G->u, (size_t) Tl * F, G->st), "SwiGLU", error)
          && gemm (G, W[HONE_AWQ_W_DOWN], H, F, G->gs, Tl, out, error);
    default:
      return gemm (G, W[HONE_AWQ_W_DOWN], H, F, x, Tl, out, error);
    }
}

/* Σ(a − b)² / n, reduced in a fixed order. */
static gboolean
mse (Gpu *G, const float *a, const float *b, size_t n, double *result, GError **error)
{
  double part[HONE_K_AWQ_N_PARTIALS], sum = 0.0;

  if (failed (hone_k_awq_sq_err (a, b, n, G->errp, G->st), "MSE", error)
      || !download (G, part, G->errp, sizeof part, error))
    return FALSE;
  for (int i = 0; i < HONE_K_AWQ_N_PARTIALS; i++)
    sum += part[i];
  *result = sum / (double) n;
  return TRUE;
}

/* ---- the scale search ---------------------------------------------------------- */

static gboolean
search_group (Gpu *G, HoneAwqGroupKind kind, const int *ids, int n_ids, const float *x, const float *ref,
              float *best_s, double *losses, int *choice, GCancellable *cancellable, GError **error)
{
  const HoneAwqOptions *o = G->o;
  int K = G->K[ids[0]], g = o->group_size;
  g_autofree double *xs = g_new (double, K), *ws = g_new (double, K);
  g_autofree float *x_mean = g_new (float, K), *w_mean = g_new (float, K), *s = g_new (float, K);
  float *W[HONE_AWQ_N_LINEARS];
  double best = INFINITY;
  gint64 rows = 0;

  /* Statistics: mean |x| per input channel over all tokens, mean normalised |W|. */
  if (failed (cudaMemsetAsync (G->colsum, 0, K * sizeof (double), G->st), "memset", error)
      || failed (hone_k_awq_col_sum (x, G->T, K, g, 0, G->partial, G->colsum, G->st), "statistics", error)
      || !download (G, xs, G->colsum, K * sizeof (double), error)
      || failed (cudaMemsetAsync (G->colsum, 0, K * sizeof (double), G->st), "memset", error))
    return FALSE;
  for (int i = 0; i < n_ids; i++)
    {
      if (failed (hone_k_awq_col_sum (G->W[ids[i]], G->N[ids[i]], K, g, 1, G->partial, G->colsum, G->st),
                  "statistics", error))
        return FALSE;
      rows += G->N[ids[i]];
    }
  if (!download (G, ws, G->colsum, K * sizeof (double), error))
    return FALSE;
  for (int k = 0; k < K; k++)
    {
      x_mean[k] = (float) (xs[k] / G->T);
      w_mean[k] = (float) (ws[k] / (double) rows);
    }

  memcpy (W, G->W, sizeof W);
  for (int i = 0; i < n_ids; i++)
    W[ids[i]] = G->tmp[ids[i]];
  for (int k = 0; k < K; k++)
    best_s[k] = 1.0f;

  for (int gi = 0; gi < o->n_grid; gi++)
    {
      double loss;

      if (hone_awq_cancelled (cancellable, error))
        return FALSE;
      hone_awq_grid_scales (x_mean, w_mean, K, gi, o->n_grid, s);
      if (!upload (G, G->d_s, s, K * sizeof (float), error))
        return FALSE;
      for (int i = 0; i < n_ids; i++)
        if (failed (hone_k_awq_fake_quant (G->W[ids[i]], G->d_s, G->tmp[ids[i]], G->N[ids[i]], K, g, G->st),
                    "fake quantization", error))
          return FALSE;
      if (!inspect (G, kind, W, x, G->out, error)
          || !mse (G, G->out, ref, (size_t) G->Tl * G->H, &loss, error))
        return FALSE;
      losses[gi] = loss;
      if (isfinite (loss) && loss < best)
        {
          best = loss;
          *choice = gi;
          memcpy (best_s, s, K * sizeof (float));
        }
    }
  return TRUE;
}

static void
div_host (float *v, int n, const float *s)
{
  if (v)
    for (int i = 0; i < n; i++)
      v[i] /= s[i];
}

/* Fold the four groups' scales (see hone-awq.c): previous op ÷ s, the
 * linears' input columns × s, the cached inputs ÷ s. */
static gboolean
fold (Gpu *G, const float *s1, const float *s2, const float *s3, const float *s4, GError **error)
{
  int H = G->H, qdim = G->qdim, kvdim = G->kvdim, F = G->F, T = G->T;
  cudaStream_t st = G->st;

  div_host (G->attn_norm, H, s1);
  if (!upload (G, G->d_s, s1, H * sizeof (float), error))
    return FALSE;
  for (int i = HONE_AWQ_WQ; i <= HONE_AWQ_WV; i++)
    if (failed (hone_k_awq_scale_cols (G->W[i], G->N[i], G->K[i], G->d_s, 0, st), "fold", error))
      return FALSE;
  if (failed (hone_k_awq_scale_cols (G->xa, T, H, G->d_s, 1, st), "fold", error))
    return FALSE;
  if (s2)
    {
      if (!upload (G, G->d_s, s2, qdim * sizeof (float), error)
          || failed (hone_k_awq_div_rows (G->W[HONE_AWQ_WV], kvdim, H, G->d_s, st), "fold", error)
          || failed (hone_k_awq_scale_cols (G->W[HONE_AWQ_WO], H, qdim, G->d_s, 0, st), "fold", error)
          || failed (hone_k_awq_scale_cols (G->att_c, T, qdim, G->d_s, 1, st), "fold", error))
        return FALSE;
      div_host (G->bv, kvdim, s2);
    }
  div_host (G->ffn_norm, H, s3);
  if (!upload (G, G->d_s, s3, H * sizeof (float), error)
      || failed (hone_k_awq_scale_cols (G->W[HONE_AWQ_W_GATE], F, H, G->d_s, 0, st), "fold", error)
      || failed (hone_k_awq_scale_cols (G->W[HONE_AWQ_W_UP], F, H, G->d_s, 0, st), "fold", error)
      || failed (hone_k_awq_scale_cols (G->xm, T, H, G->d_s, 1, st), "fold", error))
    return FALSE;
  /* d_s is reused at once: the copy is stream-ordered after the kernels above. */
  if (!upload (G, G->d_s, s4, F * sizeof (float), error)
      || failed (hone_k_awq_div_rows (G->W[HONE_AWQ_W_UP], F, H, G->d_s, st), "fold", error)
      || failed (hone_k_awq_scale_cols (G->W[HONE_AWQ_W_DOWN], H, F, G->d_s, 0, st), "fold", error)
      || failed (hone_k_awq_scale_cols (G->act, T, F, G->d_s, 1, st), "fold", error))
    return FALSE;
  /* The host vectors s1..s4 are freed by the caller: wait for the copies. */
  return !failed (cudaStreamSynchronize (st), "synchronize", error);
}

static gboolean
clip (Gpu *G, int i, const float *x, GCancellable *cancellable, GError **error)
{
  int n = MIN (G->T, G->o->clip_tokens), g = G->o->group_size, K = G->K[i];

  if (n <= 0)
    return TRUE;
  if (hone_awq_cancelled (cancellable, error))
    return FALSE;
  return !failed (hone_k_awq_gram (x, K, n, MAX (1, G->T / n), g, G->gram, G->st), "clip statistics", error)
      && !failed (hone_k_awq_clip (G->W[i], G->gram, G->N[i], K, g, G->o->n_grid, G->st), "clip search", error);
}

/* The final quantizer on the device; q/z/s into @out (host). The candidate
 * buffer is the scratch (N·K floats hold N·K + 3·N·K/g bytes). */
static gboolean
store_linear (Gpu *G, int i, HoneAwqLinear *out, GError **error)
{
  int N = G->N[i], K = G->K[i], g = G->o->group_size, ng = K / g;
  guint8 *dq = (guint8 *) G->tmp[i], *dz = dq + (size_t) N * K;
  guint16 *ds = (guint16 *) (dz + (((size_t) N * ng + 15) & ~(size_t) 15));
  g_autofree guint8 *q = g_new (guint8, (size_t) N * K);   /* one value a byte, as the kernel writes them */

  out->K = K;
  out->N = N;
  out->group_size = g;
  out->q = g_new (guint8, (size_t) N * K / 2);
  out->z = g_new (guint8, (size_t) N * ng);
  out->s = g_new (guint16, (size_t) N * ng);
  if (failed (hone_k_awq_quantize (G->W[i], N, K, g, dq, dz, ds, G->st), "quantize", error)
      || !download (G, q, dq, (size_t) N * K, error)
      || !download (G, out->z, dz, (size_t) N * ng, error)
      || !download (G, out->s, ds, (size_t) N * ng * sizeof (guint16), error))
    return FALSE;
  hone_awq_pack_nibbles (q, (size_t) N * K, out->q);
  return TRUE;
}

/* ---- setup ----------------------------------------------------------------------- */

static gboolean
setup (Gpu *G, const gint32 *tokens, gboolean calibrate, GError **error)
{
  const HoneModelConfig *c = G->c;
  const HoneLayerWeights *L0 = &G->model->layers[0];
  size_t T = (size_t) G->T, Tl = (size_t) G->Tl;
  int kmax;

#define A(ptr, n) ((ptr) = dalloc (G, (size_t) (n) * sizeof *(ptr), error)) != NULL
  for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
    {
      const HoneTensor *t = hone_awq_layer_tensor (L0, i);
      G->K[i] = (int) t->ne[0];
      G->N[i] = (int) t->ne[1];
      if (!(A (G->W[i], (size_t) G->N[i] * G->K[i]) && A (G->tmp[i], (size_t) G->N[i] * G->K[i])))
        return FALSE;
    }
  kmax = MAX (G->H, MAX (G->qdim, G->F));
  if (!(A (G->d_attn_norm, G->H) && A (G->d_ffn_norm, G->H) && A (G->d_bq, G->qdim) && A (G->d_bk, G->kvdim)
        && A (G->d_bv, G->kvdim) && A (G->d_qn, G->hd) && A (G->d_kn, G->hd) && A (G->d_s, kmax)))
    return FALSE;
  if (!calibrate)
    return TRUE;
  G->s_seqs = (int) CLAMP (S_BYTES / ((size_t) G->L * G->L * sizeof (float)), 1, (size_t) G->n_seq);
  if (!(A (G->h, T * G->H) && A (G->h2, T * G->H) && A (G->xa, T * G->H) && A (G->xm, T * G->H)
        && A (G->q, T * G->qdim) && A (G->k, T * G->kvdim) && A (G->v, T * G->kvdim)
        && A (G->att, Tl * G->qdim) && A (G->att_c, T * G->qdim)
        && A (G->gs, Tl * G->F) && A (G->u, T * G->F) && A (G->act, T * G->F)
        && A (G->oref, Tl * G->H) && A (G->yref, Tl * G->H) && A (G->out, Tl * G->H)
        && A (G->S, (size_t) G->s_seqs * G->L * G->L)
        && A (G->d_cos, (size_t) G->L * G->half) && A (G->d_sin, (size_t) G->L * G->half)
        && A (G->gram, (size_t) kmax * G->g)
        && A (G->partial, (size_t) 64 * kmax) && A (G->colsum, kmax) && A (G->errp, HONE_K_AWQ_N_PARTIALS)))
    return FALSE;
  if (G->prec == HONE_K_AWQ_GEMM_BF16)
    {
      size_t wmax = 0;
      for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
        wmax = MAX (wmax, (size_t) G->N[i] * G->K[i]);
      if (!(A (G->wb, wmax) && A (G->xb, T * kmax)))
        return FALSE;
    }
#undef A

  {
    g_autofree float *inv = g_new (float, G->half);
    g_autofree float *cs = g_new (float, (size_t) G->L * G->half);
    g_autofree float *sn = g_new (float, (size_t) G->L * G->half);
    hone_cpu_rope_inv_freq (c, G->hd, inv);
    for (int p = 0; p < G->L; p++)
      hone_cpu_rope_cos_sin (inv, G->hd, p, cs + (size_t) p * G->half, sn + (size_t) p * G->half);
    if (!upload (G, G->d_cos, cs, (size_t) G->L * G->half * sizeof (float), error)
        || !upload (G, G->d_sin, sn, (size_t) G->L * G->half * sizeof (float), error)
        || failed (cudaStreamSynchronize (G->st), "synchronize", error))
      return FALSE;
  }
  {
    /* The embeddings of the calibration tokens, a chunk at a time. */
    g_autofree float *e = g_new (float, (size_t) MIN (T, EMB_CHUNK) * G->H);
    for (size_t t0 = 0; t0 < T; t0 += EMB_CHUNK)
      {
        size_t n = MIN (T - t0, EMB_CHUNK);
        for (size_t t = 0; t < n; t++)
          hone_dequantize_row (G->model->tok_embd.type, hone_tensor_row (&G->model->tok_embd, tokens[t0 + t]),
                               e + t * G->H, G->H);
        if (!upload (G, G->h + t0 * G->H, e, n * G->H * sizeof (float), error)
            || failed (cudaStreamSynchronize (G->st), "synchronize", error))
          return FALSE;
      }
  }
  return TRUE;
}

/* ---- one layer ---------------------------------------------------------------------- */

static gboolean
calibrate_layer (Gpu *G, HoneAwqResult *res, int l, gint64 *stage_t0, GCancellable *cancellable, GError **error)
{
  const HoneAwqOptions *o = G->o;
  int H = G->H, F = G->F, qdim = G->qdim, kvdim = G->kvdim, T = G->T;
  size_t TH = (size_t) T * H;
  gint64 ts = *stage_t0;
  cudaStream_t st = G->st;
  gboolean ok;

  /* The unquantized layer: inputs of every linear and the reference outputs. */
  ok = !failed (hone_k_awq_rmsnorm (G->h, G->d_attn_norm, G->xa, T, H, G->c->rms_eps, st), "RMSNorm", error)
    && attention (G, G->xa, G->n_seq, G->W[HONE_AWQ_WQ], G->W[HONE_AWQ_WK], G->W[HONE_AWQ_WV], G->att_c, error)
    && gemm (G, G->W[HONE_AWQ_WO], H, qdim, G->att_c, T, G->h2, error)
    && !failed (cudaMemcpyAsync (G->oref, G->h2, (size_t) G->Tl * H * sizeof (float), cudaMemcpyDeviceToDevice, st),
                "copy", error)
    && !failed (hone_k_awq_add (G->h2, G->h2, G->h, TH, st), "residual", error)
    && !failed (hone_k_awq_rmsnorm (G->h2, G->d_ffn_norm, G->xm, T, H, G->c->rms_eps, st), "RMSNorm", error)
    && gemm (G, G->W[HONE_AWQ_W_GATE], F, H, G->xm, T, G->act, error)
    && gemm_x (G, G->W[HONE_AWQ_W_UP], F, H, G->xm, T, G->u, TRUE, error)
    && !failed (hone_k_awq_swiglu (G->act, G->u, (size_t) T * F, st), "SwiGLU", error)
    && gemm (G, G->W[HONE_AWQ_W_DOWN], H, F, G->act, T, G->h, error)     /* h is free: y goes there */
    && !failed (cudaMemcpyAsync (G->yref, G->h, (size_t) G->Tl * H * sizeof (float), cudaMemcpyDeviceToDevice, st),
                "copy", error)
    && !failed (hone_k_awq_add (G->h, G->h2, G->h, TH, st), "residual", error);   /* the next layer's input */
  stage (G, "forward", &ts);

  if (ok && o->search_scales)
    {
      static const int ids_qkv[] = { HONE_AWQ_WQ, HONE_AWQ_WK, HONE_AWQ_WV };
      static const int ids_o[] = { HONE_AWQ_WO };
      static const int ids_gu[] = { HONE_AWQ_W_GATE, HONE_AWQ_W_UP };
      static const int ids_d[] = { HONE_AWQ_W_DOWN };
      g_autofree float *s1 = g_new (float, H), *s3 = g_new (float, H), *s4 = g_new (float, F);
      g_autofree float *s2 = NULL;
      gboolean vo = (qdim == kvdim);
#define REC(group) \
  res->search_loss + ((gsize) l * HONE_AWQ_N_GROUPS + (group)) * o->n_grid, \
  res->search_choice + (gsize) l * HONE_AWQ_N_GROUPS + (group)

      ok = search_group (G, HONE_AWQ_GROUP_QKV, ids_qkv, 3, G->xa, G->oref, s1, REC (HONE_AWQ_GROUP_QKV),
                         cancellable, error);
      stage (G, "qkv", &ts);
      if (ok && vo)
        {
          s2 = g_new (float, qdim);
          ok = search_group (G, HONE_AWQ_GROUP_VO, ids_o, 1, G->att_c, G->oref, s2, REC (HONE_AWQ_GROUP_VO),
                             cancellable, error);
        }
      if (ok)
        ok = search_group (G, HONE_AWQ_GROUP_GATE_UP, ids_gu, 2, G->xm, G->yref, s3, REC (HONE_AWQ_GROUP_GATE_UP),
                           cancellable, error);
      stage (G, "gate-up", &ts);
      if (ok)
        ok = search_group (G, HONE_AWQ_GROUP_DOWN, ids_d, 1, G->act, G->yref, s4, REC (HONE_AWQ_GROUP_DOWN),
                           cancellable, error);
#undef REC
      if (ok)
        ok = fold (G, s1, s2, s3, s4, error);
      stage (G, "down+fold", &ts);
    }
  if (ok && o->search_clip)
    ok = clip (G, HONE_AWQ_WV, G->xa, cancellable, error)
      && clip (G, HONE_AWQ_WO, G->att_c, cancellable, error)
      && clip (G, HONE_AWQ_W_GATE, G->xm, cancellable, error)
      && clip (G, HONE_AWQ_W_UP, G->xm, cancellable, error)
      && clip (G, HONE_AWQ_W_DOWN, G->act, cancellable, error);
  stage (G, "clip", &ts);
  *stage_t0 = ts;
  return ok;
}

/* ---- the driver ---------------------------------------------------------------------- */

HoneAwqResult *
hone_cuda_awq_quantize (HoneModel *model, const gint32 *tokens, int n_samples, int seq_len,
                        const HoneAwqOptions *o, HoneAwqProgressFunc progress, gpointer progress_data,
                        GCancellable *cancellable, GError **error)
{
  const HoneModelConfig *c = &model->config;
  gboolean calibrate = o->search_scales || o->search_clip;
  g_autoptr(HoneAwqResult) res = NULL;
  gint64 t_start = g_get_monotonic_time (), ts = t_start;
  Gpu G = { 0 };
  gboolean ok = TRUE;

  if (!hone_cuda_awq_available (error))
    return NULL;
  if (!calibrate)
    n_samples = seq_len = 0;
  G.model = model;
  G.c = c;
  G.o = o;
  G.prec = gemm_precision ();
  G.L = seq_len;
  G.n_seq = n_samples;
  G.T = n_samples * seq_len;
  G.n_loss_seq = calibrate && o->loss_tokens > 0 ? CLAMP (o->loss_tokens / seq_len, 1, n_samples) : n_samples;
  G.Tl = G.n_loss_seq * seq_len;
  G.g = o->group_size;
  G.H = c->hidden;
  G.hd = c->head_dim;
  G.half = c->head_dim / 2;
  G.qdim = c->n_heads * c->head_dim;
  G.kvdim = c->n_kv_heads * c->head_dim;
  G.F = c->ffn;
  G.allocs = g_ptr_array_new ();
  if (c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads != 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT, _("%d attention heads do not split into %d KV heads"),
                   c->n_heads, c->n_kv_heads);
      g_ptr_array_free (G.allocs, TRUE);
      return NULL;
    }

  res = hone_awq_result_new (model, o, calibrate, n_samples, seq_len);
  res->cuda = TRUE;
  ok = !failed (cudaSetDevice (0), "cudaSetDevice", error)
    && !failed (cudaStreamCreateWithFlags (&G.st, cudaStreamNonBlocking), "cudaStreamCreate", error)
    && !failed (hone_k_awq_blas_create (&G.blas, G.st), "cublasCreate", error)
    && setup (&G, tokens, calibrate, error);
  stage (&G, "setup", &ts);

  for (int l = 0; l < c->n_layers && ok; l++)
    {
      if (hone_awq_cancelled (cancellable, error))
        {
          ok = FALSE;
          break;
        }
      ok = load_layer (&G, &model->layers[l], error);
      stage (&G, "load", &ts);
      if (ok && calibrate)
        ok = calibrate_layer (&G, res, l, &ts, cancellable, error);
      if (ok)
        {
          HoneAwqLayer *out = &res->layers[l];
          for (int i = 0; i < HONE_AWQ_N_LINEARS && ok; i++)
            ok = store_linear (&G, i, &out->lin[i], error);
          out->attn_norm = g_steal_pointer (&G.attn_norm);
          out->ffn_norm = g_steal_pointer (&G.ffn_norm);
          out->bq = g_steal_pointer (&G.bq);
          out->bk = g_steal_pointer (&G.bk);
          out->bv = g_steal_pointer (&G.bv);
          stage (&G, "store", &ts);
        }
      layer_host_clear (&G);
      if (ok && progress)
        {
          double elapsed = (g_get_monotonic_time () - t_start) / 1e6;
          progress (l, c->n_layers, elapsed, elapsed / (l + 1) * (c->n_layers - l - 1), progress_data);
        }
    }

  if (G.st)
    cudaStreamSynchronize (G.st);
  hone_k_awq_blas_destroy (G.blas);
  for (guint i = 0; i < G.allocs->len; i++)
    cudaFree (g_ptr_array_index (G.allocs, i));
  g_ptr_array_free (G.allocs, TRUE);
  if (G.st)
    cudaStreamDestroy (G.st);
  layer_host_clear (&G);
  if (!ok)
    return NULL;
  res->seconds = (g_get_monotonic_time () - t_start) / 1e6;
  return g_steal_pointer (&res);
}
