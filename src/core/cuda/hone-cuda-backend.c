/* hone-cuda-backend.c — the CUDA backend (host side): upload, KV pages,
 * graphs, memory accounting. The kernels and the step itself are in
 * kernels/ (hone_k_forward); this file owns every device allocation.
 *
 * Layout on the device (see kernels/hone-kernels.h): q|k|v concatenated into
 * one matrix and gate/up interleaved row by row, so that a decode step is
 * five launches a layer; Q/K rows of half-split (HF, qwen) models are
 * permuted to adjacent-pair order at upload (scores are unchanged because q
 * and k move alike). A q|k|v whose parts differ in type (llama.cpp's Q4_K_M
 * mix: q, k Q4_K, v Q6_K in some layers) stays native as HONE_K_PARTS: each
 * run of equal type one matrix in its own layout (plan_qkv). A gate/up pair
 * that differs in type still goes up as F16 (their rows interleave).
 *
 * Steps of one token run as a CUDA graph per sequence, captured on first use
 * (the graph reads the token and the position from device memory; it is
 * captured bounded to the context tier hone_k_attn_ctx_bound () gives —
 * 256 keys for the tiny attention kernel, 2,048 for the clustered shape,
 * then unbounded — and captured again when the context passes a tier); longer
 * steps run the GEMM path in chunks. KV: f16 pages of HONE_K_KV_BLOCK tokens
 * from one pool sized for POOL_SEQS sequences of max_context tokens.
 */
#include <inttypes.h>
#include "hone-backend.h"
#include "hone-error.h"
#include "hone-i18n.h"
#include "hone-kernels.h"
#include "cpu/hone-cpu-ops.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <string.h>

#define SEQ_MAX 16
#define POOL_SEQS 2
#define PREFILL_CHUNK 2048
#define LOGIT_ROWS 512
#define DEFAULT_CONTEXT_CAP 16384
#define STAGING_BYTES ((size_t) 64 << 20)
/* Device memory that creating the cuBLAS handle takes beyond our workspace
 * (its modules and internal buffers): 68 MiB measured on the H200 with
 * CUDA 13.0 (HONE_CUDA_DEBUG_MEM=1 prints the stages). Counted as "other";
 * the estimate adds this figure. */
#define CUBLAS_HANDLE_BYTES ((gint64) 68 << 20)

typedef struct {
  gboolean used;
  int len;
  int n_pages;
  gint32 *table;              /* host copy of the block table */
  gint32 *d_table;            /* device */
  cudaGraphExec_t graph;      /* one-token step, captured on first use */
  int graph_bound;            /* the context bound it was captured for (HoneKState.ctx_bound) */
  gint64 graph_bytes;         /* device memory its capture took (counted in other_bytes) */
} Seq;

typedef struct {
  unsigned long long total, free, used;
} NvmlMemory;

typedef struct {
  HoneBackend parent;
  int device;
  cudaStream_t stream;
  HoneModel *model;
  HoneKModel km;
  HoneKLayer *layers;
  HoneKMatrix *parts;         /* [n_layers][HONE_K_MAX_PARTS]: the parts of mixed-type q|k|v */
  GPtrArray *allocs;          /* device pointers we free at unload */
  char *arena;                /* all weights: one allocation, so no per-allocation rounding */
  size_t arena_size, arena_used;
  gint64 weight_bytes, kv_bytes, ws_bytes, other_bytes, peak;
  void **k_pool, **v_pool;
  int n_pages, max_context, max_blocks;
  int *free_pages, n_free;
  HoneKState dec, pre;
  Seq seqs[SEQ_MAX];
  /* sampling on the device (see sample_params): window ids and the id out */
  gboolean gpu_sampling;      /* FALSE when HONE_GPU_SAMPLING=0 */
  gboolean past_k_on_host;    /* TRUE when HONE_GPU_SAMPLING_WALK=0: no whole-row walk on the device */
  gint32 *d_samp;             /* device: [0] the id, [64..] the window */
  gint32 *h_samp;             /* pinned host, same layout; [1], [2]: the ids of decode-ahead slots 0, 1 */
  /* decode ahead (see the section of that name) */
  gboolean ahead_on;          /* FALSE when HONE_DECODE_AHEAD=0 or without device sampling */
  cudaEvent_t ahead_ev[2];    /* recorded after slot i's id is downloaded */
  struct {
    int seq;                  /* the sequence of the step in flight ahead; -1: none */
    int pos;                  /* its position */
    HoneKSampleParams kp;     /* the parameters and draw it samples with */
    int slot;                 /* its id lands in h_samp[1 + slot] */
    gint32 fed;               /* the id it runs on (the step before's), once the host has read it */
  } ahead;
  /* NVML, dlopened */
  void *nvml;
  int (*nvml_mem) (void *dev, NvmlMemory *m);
  void *nvml_dev;
} HoneCudaBackend;

static HoneCudaBackend *
cu (HoneBackend *self)
{
  return (HoneCudaBackend *) self;
}

/* Map a CUDA failure to a GError; TRUE when @e is a failure. */
static gboolean
cuda_failed (cudaError_t e, const char *what, GError **error)
{
  if (e == cudaSuccess)
    return FALSE;
  (void) cudaGetLastError ();   /* clear a non-sticky error so the backend stays usable */
  g_set_error (error, HONE_ERROR, e == cudaErrorMemoryAllocation ? HONE_ERROR_OUT_OF_MEMORY : HONE_ERROR_BACKEND,
               _("CUDA: %s failed: %s"), what, cudaGetErrorString (e));
  return TRUE;
}

static void *
dalloc (HoneCudaBackend *b, size_t bytes, gint64 *counter, GError **error)
{
  void *p = NULL;
  cudaError_t e = cudaMalloc (&p, bytes ? bytes : 16);
  if (e != cudaSuccess)
    {
      (void) cudaGetLastError ();
      g_set_error (error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY,
                   _("Out of GPU memory allocating %.1f MiB"), bytes / 1048576.0);
      return NULL;
    }
  g_ptr_array_add (b->allocs, p);
  if (counter)
    *counter += (gint64) bytes;
  return p;
}

#define WALIGN(x) (((gint64) (x) + 255) & ~(gint64) 255)

/* A piece of the weight arena (256-byte aligned). */
static void *
wtake (HoneCudaBackend *b, size_t bytes, GError **error)
{
  void *p;
  if (b->arena_used + (size_t) WALIGN (bytes) > b->arena_size)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_BACKEND, _("CUDA: weight arena overflow (%zu + %zu > %zu bytes)"),
                   b->arena_used, bytes, b->arena_size);
      return NULL;
    }
  p = b->arena + b->arena_used;
  b->arena_used += (size_t) WALIGN (bytes);
  return p;
}

/* HONE_CUDA_DEBUG_MEM=1: device memory in use at each load stage, on stderr. */
static void
mem_trace (const char *stage)
{
  static int on = -1;
  size_t f = 0, t = 0;
  if (on < 0)
    on = g_getenv ("HONE_CUDA_DEBUG_MEM") != NULL;
  if (!on)
    return;
  cudaMemGetInfo (&f, &t);
  g_printerr ("hone-cuda: %-24s %.1f MiB in use\n", stage, (t - f) / 1048576.0);
}

/* ------------------------------------------------------------------ plan */

static int
context_for (HoneModel *model, const HoneBackendOptions *options)
{
  const int n = model->config.max_context > 0 ? model->config.max_context : 4096;
  if (options != NULL && options->max_context > 0)
    return options->max_context;
  return MIN (n, DEFAULT_CONTEXT_CAP);
}

/* GPU type of gate|up fused from @n parts: their common upload type, or F16. */
static int
fused_type (const HoneTensor *const *parts, int n)
{
  int t = hone_k_upload_type (parts[0]->type);
  for (int i = 1; i < n; i++)
    if (hone_k_upload_type (parts[i]->type) != t)
      return HONE_K_F16;
  return t;
}

/* q|k|v (@t, @rows each): one matrix in their common GPU type, or where the
 * types differ a HONE_K_PARTS matrix whose parts (written to @parts, room for
 * HONE_K_MAX_PARTS) are the runs of equal type, each kept native — Q4_K_M's
 * Q4_K q, k and Q6_K v make 2 parts (q|k, v), so 2 GEMVs in decode. */
static void
plan_qkv (HoneKMatrix *m, const HoneTensor *const *t, const int *rows, int cols, int group, HoneKMatrix *parts)
{
  int n = 0;
  memset (m, 0, sizeof *m);
  m->cols = cols;
  m->group = group;
  for (int i = 0; i < 3; i++)
    {
      const int ty = hone_k_upload_type (t[i]->type);
      if (n > 0 && parts[n - 1].type == ty)
        parts[n - 1].rows += rows[i];
      else
        {
          memset (&parts[n], 0, sizeof parts[n]);
          parts[n].type = ty;
          parts[n].rows = rows[i];
          parts[n].cols = cols;
          parts[n].group = group;
          n++;
        }
      m->rows += rows[i];
    }
  if (n == 1)
    {
      m->type = parts[0].type;
      return;
    }
  m->type = HONE_K_PARTS;
  m->n_parts = n;
  m->parts = parts;
}

static gboolean
check_matrix (const HoneModel *model, const HoneTensor *t, const char *what, GError **error)
{
  if (!hone_model_tensor_available (model, t))   /* AWQ linears may not be repacked yet: upload_part makes their rows */
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_MISSING_TENSOR, _("Tensor %s is missing"), what);
      return FALSE;
    }
  if (hone_k_upload_type (t->type) < 0 || hone_k_gguf_row_bytes (t->type, (int) t->ne[0]) == 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_UNSUPPORTED_TYPE, _("Tensor %s has type %s, which the CUDA backend cannot run"),
                   t->name ? t->name : what, hone_dtype_name (t->type) ? hone_dtype_name (t->type) : "?");
      return FALSE;
    }
  return TRUE;
}

/* Fill km/layers (and parts: [n_layers][HONE_K_MAX_PARTS]) with types and shapes (no device pointers). */
static gboolean
plan (HoneModel *model, HoneKModel *km, HoneKLayer *layers, HoneKMatrix *parts, GError **error)
{
  const HoneModelConfig *c = &model->config;
  const int nq = c->n_heads, nkv = c->n_kv_heads, hd = c->head_dim;

  if (hd != 64 && hd != 128)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_UNSUPPORTED_ARCH,
                   _("The CUDA backend runs head dimensions 64 and 128, not %d"), hd);
      return FALSE;
    }
  if (c->hidden % 32 || c->ffn % 32 || nkv <= 0 || nq % nkv || nq / nkv * HONE_K_MAX_DECODE > 64)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_UNSUPPORTED_ARCH,
                   _("The CUDA backend cannot run this shape (hidden %d, FFN %d, %d/%d heads)"), c->hidden, c->ffn, nq, nkv);
      return FALSE;
    }
  memset (km, 0, sizeof *km);
  km->cfg.n_layers = c->n_layers;
  km->cfg.hidden = c->hidden;
  km->cfg.n_heads = nq;
  km->cfg.n_kv_heads = nkv;
  km->cfg.head_dim = hd;
  km->cfg.ffn = c->ffn;
  km->cfg.vocab = c->vocab;
  km->cfg.rms_eps = c->rms_eps;
  km->layers = layers;
  for (int l = 0; l < c->n_layers; l++)
    {
      const HoneLayerWeights *L = &model->layers[l];
      HoneKLayer *y = &layers[l];
      const HoneTensor *qkv[3] = { &L->wq, &L->wk, &L->wv }, *gu[2] = { &L->w_gate, &L->w_up };
      const HoneTensor *all[7] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down };
      for (int i = 0; i < 7; i++)
        if (!check_matrix (model, all[i], "layer matrix", error))
          return FALSE;
      memset (y, 0, sizeof *y);
      {
        const int qkv_rows[3] = { nq * hd, nkv * hd, nkv * hd };
        plan_qkv (&y->wqkv, qkv, qkv_rows, c->hidden, model->awq_group_size > 0 ? model->awq_group_size : 32,
                  parts + (gsize) HONE_K_MAX_PARTS * l);
      }
      y->wo.type = hone_k_upload_type (L->wo.type);
      y->wo.rows = c->hidden;
      y->wo.cols = nq * hd;
      y->wgu.type = fused_type (gu, 2);
      y->wgu.rows = 2 * c->ffn;
      y->wgu.cols = c->hidden;
      y->wdown.type = hone_k_upload_type (L->w_down.type);
      y->wdown.rows = c->hidden;
      y->wdown.cols = c->ffn;
      /* Q4Z (AWQ): one scale and zero a group on the GPU (the host repeats them per 32) */
      y->wqkv.group = y->wo.group = y->wgu.group = y->wdown.group = model->awq_group_size > 0 ? model->awq_group_size : 32;
    }
  if (!check_matrix (model, &model->tok_embd, "token_embd", error))
    return FALSE;
  km->embd.type = hone_k_upload_type (model->tok_embd.type);
  if (km->embd.type == HONE_K_Q4Z)   /* the embedding lookup reads F16 (the lm_head GEMV then too) */
    km->embd.type = HONE_K_F16;
  km->embd.rows = c->vocab;
  km->embd.cols = c->hidden;
  km->lm_head = km->embd;
  if (hone_tensor_present (&model->output) && model->output.data != model->tok_embd.data)
    {
      if (!check_matrix (model, &model->output, "output", error))
        return FALSE;
      km->lm_head.type = hone_k_upload_type (model->output.type);
    }
  return TRUE;
}

static gboolean
lm_head_tied (HoneModel *model)
{
  return !hone_tensor_present (&model->output) || model->output.data == model->tok_embd.data;
}

/* Host bytes upload_part reads for every matrix of @model (its progress counts them):
 * the file's bytes for stored matrices, the Q4Z rows made for AWQ linears. */
static gint64
upload_bytes (HoneModel *model)
{
  gint64 n = (gint64) model->tok_embd.nbytes + (lm_head_tied (model) ? 0 : (gint64) model->output.nbytes);
  for (int l = 0; l < model->config.n_layers; l++)
    {
      const HoneLayerWeights *L = &model->layers[l];
      n += (gint64) (L->wq.nbytes + L->wk.nbytes + L->wv.nbytes + L->wo.nbytes + L->w_gate.nbytes + L->w_up.nbytes
                     + L->w_down.nbytes);
    }
  return n;
}

typedef struct {
  gint64 weights, kv, workspace, other;
  int pages;
} Sizes;

/* Arena bytes of a planned matrix (each part's, for HONE_K_PARTS). */
static gint64
matrix_arena_bytes (const HoneKMatrix *m)
{
  size_t qb = 0, sb = 0;
  if (m->type == HONE_K_PARTS)
    {
      gint64 sum = 0;
      for (int i = 0; i < m->n_parts; i++)
        sum += matrix_arena_bytes (&m->parts[i]);
      return sum;
    }
  hone_k_matrix_bytes_g (m->type, m->rows, m->cols, m->group, &qb, &sb);
  return WALIGN (qb) + (sb ? WALIGN (sb) : 0);
}

static void
sizes_for (HoneModel *model, const HoneKModel *km, int max_context, Sizes *s)
{
  const HoneModelConfig *c = &model->config;
  s->weights = 0;
  for (int l = 0; l < c->n_layers; l++)
    {
      const HoneKLayer *y = &km->layers[l];
      const HoneLayerWeights *L = &model->layers[l];
      const HoneKMatrix *ms[4] = { &y->wqkv, &y->wo, &y->wgu, &y->wdown };
      for (int i = 0; i < 4; i++)
        s->weights += matrix_arena_bytes (ms[i]);
      s->weights += WALIGN ((gint64) 4 * (2 * c->hidden + (L->bq.data ? (c->n_heads + 2 * c->n_kv_heads) * c->head_dim : 0)
                                          + (L->q_norm.data ? 2 * c->head_dim : 0)));
    }
  {
    size_t qb, sb;
    hone_k_matrix_bytes (km->embd.type, km->embd.rows, km->embd.cols, &qb, &sb);
    s->weights += WALIGN (qb) + (sb ? WALIGN (sb) : 0);
    if (!lm_head_tied (model))
      {
        hone_k_matrix_bytes (km->lm_head.type, km->lm_head.rows, km->lm_head.cols, &qb, &sb);
        s->weights += WALIGN (qb) + (sb ? WALIGN (sb) : 0);
      }
  }
  s->weights += WALIGN ((gint64) 4 * (c->hidden + c->head_dim / 2));
  s->pages = POOL_SEQS * ((max_context + HONE_K_KV_BLOCK - 1) / HONE_K_KV_BLOCK);
  s->kv = (gint64) 2 * c->n_layers * s->pages * c->n_kv_heads * HONE_K_KV_BLOCK * c->head_dim * 2;
  s->workspace = (gint64) hone_k_state_bytes (km, HONE_K_MAX_DECODE, HONE_K_MAX_DECODE)
                 + (gint64) hone_k_state_bytes (km, MIN (PREFILL_CHUNK, max_context), LOGIT_ROWS)
                 + (gint64) SEQ_MAX * ((max_context + HONE_K_KV_BLOCK - 1) / HONE_K_KV_BLOCK) * 4;
  s->other = CUBLAS_HANDLE_BYTES;
}

/* ------------------------------------------------------------------ upload */

typedef struct {
  HoneCudaBackend *b;
  void *staging;              /* device, STAGING_BYTES */
  void *tmp16;                /* device scratch for mixed-type parts (lazily) */
  void *host_rows;            /* pinned host, STAGING_BYTES: deferred AWQ rows made here (lazily) */
  size_t tmp16_bytes;
  GCancellable *cancellable;
  HoneProgressFunc progress;
  gpointer progress_data;
  gint64 done, total;
} Upload;

/* Rows of @t (host, GGUF layout), optionally Q/K-permuted to adjacent pairs,
 * into dst rows row0 + r·step. */
static gboolean
upload_part (Upload *u, const HoneTensor *t, HoneKMatrix *dst, int row0, int step, int permute_heads, int head_dim,
             GError **error)
{
  const int rows = (int) t->ne[1], cols = (int) t->ne[0];
  const size_t rb = hone_k_gguf_row_bytes (t->type, cols);
  const guint8 *src = t->data;
  g_autofree guint8 *perm = NULL;
  const gboolean same = hone_k_upload_type (t->type) == dst->type;
  const int chunk_rows = (int) MAX (1, MIN ((size_t) rows, STAGING_BYTES / MAX (rb, 1)));
  HoneKMatrix tmp = { 0 };
  /* an AWQ linear opened deferred: each chunk's Q4Z rows are made on the host
   * here (hone_model_read_rows), so no whole repacked copy is ever held */
  gboolean deferred = src == NULL && hone_model_tensor_deferred (u->b->model, t);
  g_autofree guint8 *rows_buf = NULL;

  if (t->ne[0] != dst->cols || (t->n_dims > 2 && t->ne[2] != 1))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_SHAPE_MISMATCH, _("Tensor %s has %" PRId64 " columns, expected %d"),
                   t->name ? t->name : "?", t->ne[0], dst->cols);
      return FALSE;
    }
  if (src == NULL && !deferred)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_MISSING_TENSOR, _("Tensor %s is missing"), t->name ? t->name : "?");
      return FALSE;
    }
  /* a deferred tensor's chunk of rows is made in the pinned u->host_rows; a q or k matrix's
   * rows all at once, for their permutation */
  if (deferred && permute_heads == 0 && !u->host_rows
      && cuda_failed (cudaMallocHost (&u->host_rows, STAGING_BYTES), "cudaMallocHost (upload)", error))
    return FALSE;
  if (deferred && permute_heads > 0 && (rows_buf = g_try_malloc ((size_t) rows * rb)) == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY, _("%s: cannot allocate %zu bytes for the int4 weights"),
                   t->name ? t->name : "?", (size_t) rows * rb);
      return FALSE;
    }
  if (permute_heads > 0)
    {
      perm = g_malloc ((size_t) rows * rb);
      if (deferred)
        {
          hone_model_read_rows (u->b->model, t, 0, rows, rows_buf);
          hone_model_permute_qk_rows (perm, rows_buf, permute_heads, head_dim, rb, TRUE);
          g_clear_pointer (&rows_buf, g_free);
          deferred = FALSE;
        }
      else
        {
          hone_model_permute_qk_rows (perm, src, permute_heads, head_dim, rb, TRUE);
          hone_model_release_bytes (u->b->model, t->data, (size_t) rows * rb);
        }
      src = perm;
    }
  if (!same)
    {
      /* Convert through the part's own layout, then to f16 rows. */
      size_t need = (size_t) chunk_rows * cols * 2, qb, sb;
      tmp.type = hone_k_upload_type (t->type);
      tmp.rows = chunk_rows;
      tmp.cols = cols;
      hone_k_matrix_bytes (tmp.type, chunk_rows, cols, &qb, &sb);
      need += qb + sb + 64;
      if (u->tmp16_bytes < need)
        {
          if (u->tmp16)
            cudaFree (u->tmp16);
          u->tmp16 = NULL;
          u->tmp16_bytes = 0;
          if (cuda_failed (cudaMalloc (&u->tmp16, need), "cudaMalloc (conversion scratch)", error))
            return FALSE;
          u->tmp16_bytes = need;
        }
      tmp.q = (char *) u->tmp16 + (size_t) chunk_rows * cols * 2;
      tmp.s = sb ? (char *) tmp.q + ((qb + 15) & ~(size_t) 15) : NULL;
    }
  for (int r = 0; r < rows; r += chunk_rows)
    {
      const int n = MIN (chunk_rows, rows - r);
      if (g_cancellable_set_error_if_cancelled (u->cancellable, error))
        return FALSE;
      if (deferred)
        hone_model_read_rows (u->b->model, t, r, n, u->host_rows);
      if (cuda_failed (cudaMemcpyAsync (u->staging, deferred ? u->host_rows : src + (size_t) r * rb, (size_t) n * rb,
                                        cudaMemcpyHostToDevice, u->b->stream), "upload", error))
        return FALSE;
      if (same)
        {
          if (cuda_failed ((cudaError_t) hone_k_repack (t->type, u->staging, n, cols, dst, row0 + r * step, step,
                                                        u->b->stream), "repack", error))
            return FALSE;
        }
      else
        {
          tmp.rows = n;
          if (cuda_failed ((cudaError_t) hone_k_repack (t->type, u->staging, n, cols, &tmp, 0, 1, u->b->stream), "repack", error)
              || cuda_failed ((cudaError_t) hone_k_dequant (&tmp, u->tmp16, 1, u->b->stream), "dequant", error)
              || cuda_failed ((cudaError_t) hone_k_repack (HONE_K_F16, u->tmp16, n, cols, dst, row0 + r * step, step,
                                                           u->b->stream), "repack", error))
            return FALSE;
        }
      /* the staging buffer is reused by the next chunk */
      if (cuda_failed (cudaStreamSynchronize (u->b->stream), "upload", error))
        return FALSE;
      /* the file's pages of these rows are on the device now: out of the
       * process's resident memory with them (no-op for bytes in memory) */
      if (!perm && !deferred)
        hone_model_release_bytes (u->b->model, src + (size_t) r * rb, (size_t) n * rb);
      u->done += (gint64) n * rb;
      if (u->progress)
        u->progress (u->total > 0 ? (double) u->done / u->total : 1.0, u->progress_data);
    }
  return TRUE;
}

static gboolean
alloc_matrix (HoneCudaBackend *b, HoneKMatrix *m, GError **error)
{
  size_t qb, sb;
  if (m->type == HONE_K_PARTS)
    {
      /* the parts live in b->parts (ours): each gets its own pieces */
      for (int i = 0; i < m->n_parts; i++)
        if (!alloc_matrix (b, (HoneKMatrix *) &m->parts[i], error))
          return FALSE;
      m->q = m->s = NULL;
      return TRUE;
    }
  hone_k_matrix_bytes_g (m->type, m->rows, m->cols, m->group, &qb, &sb);
  m->q = wtake (b, qb, error);
  if (!m->q)
    return FALSE;
  m->s = NULL;
  if (sb && !(m->s = wtake (b, sb, error)))
    return FALSE;
  return TRUE;
}

/* The matrix that row @row0 of a fused q|k|v goes to (a part for
 * HONE_K_PARTS: every tensor lies in one part) and the row there. */
static HoneKMatrix *
qkv_target (HoneKMatrix *m, int row0, int *local)
{
  *local = row0;
  if (m->type != HONE_K_PARTS)
    return m;
  for (int i = 0; i < m->n_parts; i++)
    {
      if (*local < m->parts[i].rows)
        return (HoneKMatrix *) &m->parts[i];
      *local -= m->parts[i].rows;
    }
  return m;   /* unreachable: the parts' rows sum to m->rows */
}

/* A vector (F32/F16/BF16) to f32 on the device, written at dst (n floats),
 * optionally permuted within heads of head_dim. */
static gboolean
upload_vector (Upload *u, const HoneTensor *t, float *dst, int n, int permute_heads, int head_dim, const char *what,
               GError **error)
{
  const size_t es = t->type == HONE_DTYPE_F32 ? 4 : 2;
  const void *src = t->data;
  g_autofree void *perm = NULL;

  if (!hone_tensor_present (t) || hone_tensor_n_elements (t) != n
      || (t->type != HONE_DTYPE_F32 && t->type != HONE_DTYPE_F16 && t->type != HONE_DTYPE_BF16))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_SHAPE_MISMATCH, _("Tensor %s should be a vector of %d values"),
                   t->name ? t->name : what, n);
      return FALSE;
    }
  if (permute_heads > 0)
    {
      perm = g_malloc ((size_t) n * es);
      hone_model_permute_qk_rows (perm, src, permute_heads, head_dim, es, TRUE);
      src = perm;
    }
  return !cuda_failed (cudaMemcpyAsync (u->staging, src, (size_t) n * es, cudaMemcpyHostToDevice, u->b->stream), "upload", error)
         && !cuda_failed ((cudaError_t) hone_k_to_f32 (t->type, u->staging, dst, n, u->b->stream), "convert", error)
         && !cuda_failed (cudaStreamSynchronize (u->b->stream), "upload", error);
}

/* ------------------------------------------------------------------ vtable */

static void seq_free_impl (HoneBackend *self, int seq);
static void ahead_drop (HoneCudaBackend *b);

static void
unload_impl (HoneBackend *self)
{
  HoneCudaBackend *b = cu (self);
  ahead_drop (b);
  cudaStreamSynchronize (b->stream);
  for (int i = 0; i < SEQ_MAX; i++)
    if (b->seqs[i].used)
      seq_free_impl (self, i);
  hone_k_state_free (&b->dec);
  hone_k_state_free (&b->pre);
  if (b->allocs)
    {
      for (guint i = 0; i < b->allocs->len; i++)
        cudaFree (g_ptr_array_index (b->allocs, i));
      g_ptr_array_set_size (b->allocs, 0);
    }
  g_clear_pointer (&b->layers, g_free);
  g_clear_pointer (&b->parts, g_free);
  g_clear_pointer (&b->k_pool, g_free);
  g_clear_pointer (&b->v_pool, g_free);
  g_clear_pointer (&b->free_pages, g_free);
  g_clear_pointer (&b->model, hone_model_unref);
  memset (&b->km, 0, sizeof b->km);
  b->weight_bytes = b->kv_bytes = b->ws_bytes = b->other_bytes = 0;
  b->arena = NULL;
  b->arena_size = b->arena_used = 0;
  b->n_pages = b->n_free = 0;
  (void) cudaGetLastError ();
}

static gint64
estimate_impl (HoneBackend *self, HoneModel *model, const HoneBackendOptions *options)
{
  HoneKModel km;
  g_autofree HoneKLayer *layers = g_new0 (HoneKLayer, MAX (1, model->config.n_layers));
  g_autofree HoneKMatrix *parts = g_new0 (HoneKMatrix, (gsize) HONE_K_MAX_PARTS * MAX (1, model->config.n_layers));
  Sizes s;
  if (!plan (model, &km, layers, parts, NULL))
    return -1;
  sizes_for (model, &km, context_for (model, options), &s);
  return s.weights + s.kv + s.workspace + s.other;
}

static gboolean
load_impl (HoneBackend *self, HoneModel *model, const HoneBackendOptions *options, HoneProgressFunc progress,
           gpointer progress_data, GCancellable *cancellable, GError **error)
{
  HoneCudaBackend *b = cu (self);
  const HoneModelConfig *c = &model->config;
  const int nq = c->n_heads, nkv = c->n_kv_heads, hd = c->head_dim;
  Upload u = { 0 };
  Sizes s;
  size_t free_b = 0, total_b = 0;

  if (b->model)
    unload_impl (self);
  if (options && options->int8_kv)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT, _("The CUDA backend has no int8 KV cache yet"));
      return FALSE;
    }
  if (cuda_failed (cudaSetDevice (b->device), "cudaSetDevice", error))
    return FALSE;
  b->layers = g_new0 (HoneKLayer, MAX (1, c->n_layers));
  b->parts = g_new0 (HoneKMatrix, (gsize) HONE_K_MAX_PARTS * MAX (1, c->n_layers));
  if (!plan (model, &b->km, b->layers, b->parts, error))
    goto fail;
  b->max_context = context_for (model, options);
  sizes_for (model, &b->km, b->max_context, &s);
  cudaMemGetInfo (&free_b, &total_b);
  {
    const gint64 need = s.weights + s.kv + s.workspace + s.other + (gint64) STAGING_BYTES;
    if ((options && options->memory_budget > 0 && need > options->memory_budget) || (gint64) free_b < need)
      {
        g_set_error (error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY,
                     _("Not enough GPU memory: the model needs %.2f GiB (weights %.2f, KV cache %.2f, scratch %.2f), %.2f GiB %s"),
                     need / 1073741824.0, s.weights / 1073741824.0, s.kv / 1073741824.0, s.workspace / 1073741824.0,
                     (options && options->memory_budget > 0 ? MIN ((gint64) free_b, options->memory_budget) : (gint64) free_b)
                         / 1073741824.0,
                     options && options->memory_budget > 0 ? _("allowed") : _("free"));
        goto fail;
      }
  }
  b->model = hone_model_ref (model);
  mem_trace ("load start");
  if (!(b->arena = dalloc (b, (size_t) s.weights, &b->weight_bytes, error)))
    goto fail;
  b->arena_size = (size_t) s.weights;
  b->arena_used = 0;

  u.b = b;
  u.cancellable = cancellable;
  u.progress = progress;
  u.progress_data = progress_data;
  u.total = upload_bytes (model);
  if (cuda_failed (cudaMalloc (&u.staging, STAGING_BYTES), "cudaMalloc (staging)", error))
    goto fail;

  {
    const gboolean perm = c->rope_pairing == HONE_ROPE_PAIRS_HALF;
    const int qrows = nq * hd, krows = nkv * hd;
    float *onorm, inv[256];
    for (int l = 0; l < c->n_layers; l++)
      {
        const HoneLayerWeights *L = &model->layers[l];
        HoneKLayer *y = &b->layers[l];
        HoneKMatrix *dq, *dk, *dv;
        int rq, rk, rv;
        float *vec;
        const int nvec = 2 * c->hidden + (L->bq.data ? qrows + 2 * krows : 0) + (L->q_norm.data ? 2 * hd : 0);
        if (!(vec = wtake (b, (size_t) nvec * 4, error)))
          goto fail;
        y->attn_norm = vec;
        y->ffn_norm = vec + c->hidden;
        if (!upload_vector (&u, &L->attn_norm, vec, c->hidden, 0, 0, "attn_norm", error)
            || !upload_vector (&u, &L->ffn_norm, vec + c->hidden, c->hidden, 0, 0, "ffn_norm", error))
          goto fail;
        vec += 2 * c->hidden;
        if (L->bq.data)
          {
            y->bqkv = vec;
            if (!upload_vector (&u, &L->bq, vec, qrows, perm ? nq : 0, hd, "bq", error)
                || !upload_vector (&u, &L->bk, vec + qrows, krows, perm ? nkv : 0, hd, "bk", error)
                || !upload_vector (&u, &L->bv, vec + qrows + krows, krows, 0, 0, "bv", error))
              goto fail;
            vec += qrows + 2 * krows;
          }
        if (L->q_norm.data)
          {
            y->q_norm = vec;
            y->k_norm = vec + hd;
            if (!upload_vector (&u, &L->q_norm, vec, hd, perm ? 1 : 0, hd, "q_norm", error)
                || !upload_vector (&u, &L->k_norm, vec + hd, hd, perm ? 1 : 0, hd, "k_norm", error))
              goto fail;
          }
        if (L->wq.ne[1] != qrows || L->wk.ne[1] != krows || L->wv.ne[1] != krows || L->w_gate.ne[1] != c->ffn
            || L->w_up.ne[1] != c->ffn || L->wo.ne[1] != c->hidden || L->w_down.ne[1] != c->hidden)
          {
            g_set_error (error, HONE_ERROR, HONE_ERROR_SHAPE_MISMATCH, _("Layer %d has matrices of the wrong shape"), l);
            goto fail;
          }
        if (!alloc_matrix (b, &y->wqkv, error) || !alloc_matrix (b, &y->wo, error) || !alloc_matrix (b, &y->wgu, error)
            || !alloc_matrix (b, &y->wdown, error)
            || !(dq = qkv_target (&y->wqkv, 0, &rq)) || !(dk = qkv_target (&y->wqkv, qrows, &rk))
            || !(dv = qkv_target (&y->wqkv, qrows + krows, &rv))
            || !upload_part (&u, &L->wq, dq, rq, 1, perm ? nq : 0, hd, error)
            || !upload_part (&u, &L->wk, dk, rk, 1, perm ? nkv : 0, hd, error)
            || !upload_part (&u, &L->wv, dv, rv, 1, 0, 0, error)
            || !upload_part (&u, &L->wo, &y->wo, 0, 1, 0, 0, error)
            || !upload_part (&u, &L->w_gate, &y->wgu, 0, 2, 0, 0, error)
            || !upload_part (&u, &L->w_up, &y->wgu, 1, 2, 0, 0, error)
            || !upload_part (&u, &L->w_down, &y->wdown, 0, 1, 0, 0, error))
          goto fail;
      }
    if (!alloc_matrix (b, &b->km.embd, error) || !upload_part (&u, &model->tok_embd, &b->km.embd, 0, 1, 0, 0, error))
      goto fail;
    if (lm_head_tied (model))
      b->km.lm_head = b->km.embd;
    else if (!alloc_matrix (b, &b->km.lm_head, error)
             || !upload_part (&u, &model->output, &b->km.lm_head, 0, 1, 0, 0, error))
      goto fail;
    onorm = wtake (b, (size_t) 4 * (c->hidden + hd / 2), error);
    if (!onorm || !upload_vector (&u, &model->output_norm, onorm, c->hidden, 0, 0, "output_norm", error))
      goto fail;
    b->km.out_norm = onorm;
    hone_cpu_rope_inv_freq (c, hd, inv);
    if (cuda_failed (cudaMemcpy (onorm + c->hidden, inv, (size_t) hd / 2 * 4, cudaMemcpyHostToDevice), "upload", error))
      goto fail;
    b->km.cfg.rope_inv_freq = onorm + c->hidden;
  }
  mem_trace ("weights uploaded");
  cudaFree (u.staging);
  u.staging = NULL;
  if (u.tmp16)
    cudaFree (u.tmp16);
  u.tmp16 = NULL;
  if (u.host_rows)
    cudaFreeHost (u.host_rows);
  u.host_rows = NULL;
  mem_trace ("staging freed");

  /* KV pool: one allocation, split per layer into K and V */
  {
    const size_t per = (size_t) s.pages * nkv * HONE_K_KV_BLOCK * hd * 2;
    char *pool = dalloc (b, per * 2 * c->n_layers, &b->kv_bytes, error);
    if (!pool)
      goto fail;
    b->n_pages = s.pages;
    b->max_blocks = (b->max_context + HONE_K_KV_BLOCK - 1) / HONE_K_KV_BLOCK;
    b->k_pool = g_new (void *, c->n_layers);
    b->v_pool = g_new (void *, c->n_layers);
    for (int l = 0; l < c->n_layers; l++)
      {
        b->k_pool[l] = pool + per * 2 * l;
        b->v_pool[l] = pool + per * (2 * l + 1);
      }
    b->free_pages = g_new (int, s.pages);
    for (int i = 0; i < s.pages; i++)
      b->free_pages[i] = s.pages - 1 - i;
    b->n_free = s.pages;
  }
  mem_trace ("KV pool");
  cudaMemGetInfo (&free_b, &total_b);
  if (cuda_failed ((cudaError_t) hone_k_state_alloc (&b->dec, &b->km, HONE_K_MAX_DECODE, HONE_K_MAX_DECODE),
                   "scratch", error)
      || cuda_failed ((cudaError_t) hone_k_state_alloc (&b->pre, &b->km, MIN (PREFILL_CHUNK, b->max_context), LOGIT_ROWS),
                      "scratch", error))
    goto fail;
  b->ws_bytes = (gint64) (b->dec.bytes + b->pre.bytes);
  {
    /* what the cuBLAS handle took on top of our buffers */
    size_t f1 = 0, t1 = 0;
    cudaMemGetInfo (&f1, &t1);
    if ((gint64) free_b - (gint64) f1 > b->ws_bytes)
      b->other_bytes += (gint64) free_b - (gint64) f1 - b->ws_bytes;
  }
  mem_trace ("scratch (+ cuBLAS)");
  {
    /* Load now what the first prompt would otherwise load lazily (~180 ms
     * of cuBLASLt plans and kernels on the H200; hone_k_prefill_warm): no
     * pages are in use yet, so the warm-up may write page 0. The modules it
     * loads count as "other". It only saves time: should it fail, the
     * first prompt loads lazily as before (or reports the error itself). */
    HoneKKv kv = { b->k_pool, b->v_pool, NULL, b->max_blocks };
    const gint64 t0 = g_get_monotonic_time ();
    size_t f0 = 0, f1 = 0, t;
    int r;
    cudaMemGetInfo (&f0, &t);
    r = hone_k_prefill_warm (&b->km, &kv, &b->pre, b->stream);
    cudaMemGetInfo (&f1, &t);
    if (f0 > f1)
      b->other_bytes += (gint64) (f0 - f1);
    if (r != 0)
      g_printerr (_("hone: the GPU warm-up after loading failed (%s); the first prompt will be slower\n"),
                  cudaGetErrorString ((cudaError_t) r));
    else if (g_getenv ("HONE_PREFILL_WARM_VERBOSE"))
      g_printerr ("hone-cuda: prefill warm-up %.1f ms (host clock)\n", (g_get_monotonic_time () - t0) / 1e3);
    (void) cudaGetLastError ();
    mem_trace ("prefill warm-up");
  }
  if (cuda_failed (cudaStreamSynchronize (b->stream), "load", error))
    goto fail;
  if (progress)
    progress (1.0, progress_data);
  return TRUE;

fail:
  if (u.staging)
    cudaFree (u.staging);
  if (u.tmp16)
    cudaFree (u.tmp16);
  if (u.host_rows)
    cudaFreeHost (u.host_rows);
  unload_impl (self);
  return FALSE;
}

static HoneBackendCaps
caps_impl (HoneBackend *self)
{
  return cu (self)->gpu_sampling ? HONE_BACKEND_CAP_GPU_SAMPLING : 0;
}

#define SAMP_WINDOW_OFF 64

/* The device sampler's parameters for @bs, or FALSE when the kernel cannot
 * give the host sampler's result exactly for them (top-k above its K, a long
 * penalty window, a pure-temperature draw over a vocabulary it cannot walk
 * whole: past 262,144 ids, with penalties, or HONE_GPU_SAMPLING_WALK=0): the
 * host then samples from the logits. */
static gboolean
sample_params (HoneCudaBackend *b, const HoneBatchSampling *bs, HoneKSampleParams *kp)
{
  const int V = b->km.cfg.vocab;
  const gboolean greedy = bs->temperature <= 0.0f;
  const gboolean topk_on = bs->top_k > 0 && bs->top_k < V;
  const gboolean pen = bs->n_window > 0 && bs->window != NULL
                       && (bs->repeat_penalty != 1.0f || bs->presence_penalty != 0.0f || bs->frequency_penalty != 0.0f);

  if (!b->gpu_sampling)
    return FALSE;
  if (!greedy && topk_on && bs->top_k > HONE_K_SAMPLE_MAX_K)
    return FALSE;
  if (!greedy && !topk_on && bs->top_p >= 1.0f && bs->min_p <= 0.0f && V > HONE_K_SAMPLE_MAX_K
      && (pen || V > (1 << 18) || b->past_k_on_host))
    return FALSE;
  if (pen && (bs->n_window > HONE_K_SAMPLE_MAX_WINDOW || V > (1 << 18)))
    return FALSE;
  memset (kp, 0, sizeof *kp);
  kp->temperature = greedy ? 0.0f : bs->temperature;
  kp->top_k = topk_on && !greedy ? bs->top_k : 0;
  kp->top_p = bs->top_p;
  kp->min_p = bs->min_p;
  kp->repeat_penalty = bs->repeat_penalty;
  kp->presence_penalty = bs->presence_penalty;
  kp->frequency_penalty = bs->frequency_penalty;
  kp->n_window = pen ? bs->n_window : 0;
  kp->past_k_on_host = b->past_k_on_host;
  kp->u = bs->u;
  return TRUE;
}

/* Sample the last row of st->logits on the device; *sampled = the id, or -1
 * when the kernel found the candidate set too small (then nothing else is
 * done: the caller downloads the logits). Synchronizes. */
static gboolean
sample_on_device (HoneCudaBackend *b, HoneKState *st, int row, const HoneKSampleParams *kp, const gint32 *window,
                  gint32 *sampled, GError **error)
{
  const size_t wbytes = (size_t) kp->n_window * 4;
  if (kp->n_window > 0)
    {
      memcpy (b->h_samp + SAMP_WINDOW_OFF, window, wbytes);
      if (cuda_failed (cudaMemcpyAsync (b->d_samp + SAMP_WINDOW_OFF, b->h_samp + SAMP_WINDOW_OFF, wbytes,
                                        cudaMemcpyHostToDevice, b->stream), "upload", error))
        return FALSE;
    }
  if (cuda_failed ((cudaError_t) hone_k_sample_chain (st->logits + (size_t) row * b->km.cfg.vocab, b->km.cfg.vocab, kp,
                                                      b->d_samp + SAMP_WINDOW_OFF, b->d_samp, st->sample_scratch,
                                                      b->stream), "sample", error)
      || cuda_failed (cudaMemcpyAsync (b->h_samp, b->d_samp, 4, cudaMemcpyDeviceToHost, b->stream), "download", error)
      || cuda_failed (cudaStreamSynchronize (b->stream), "sample", error))
    return FALSE;
  *sampled = b->h_samp[0];
  return TRUE;
}

static int
seq_new_impl (HoneBackend *self, GError **error)
{
  HoneCudaBackend *b = cu (self);
  if (!b->model)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_NO_MODEL, _("No model is loaded"));
      return -1;
    }
  for (int i = 0; i < SEQ_MAX; i++)
    if (!b->seqs[i].used)
      {
        Seq *s = &b->seqs[i];
        memset (s, 0, sizeof *s);
        if (cuda_failed (cudaMalloc ((void **) &s->d_table, (size_t) b->max_blocks * 4), "cudaMalloc (block table)", error))
          return -1;
        s->table = g_new0 (gint32, b->max_blocks);
        s->used = TRUE;
        return i;
      }
  g_set_error (error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY, _("Too many sequences (at most %d)"), SEQ_MAX);
  return -1;
}

static Seq *
get_seq (HoneCudaBackend *b, int seq)
{
  return seq >= 0 && seq < SEQ_MAX && b->seqs[seq].used ? &b->seqs[seq] : NULL;
}

static void
release_pages (HoneCudaBackend *b, Seq *s, int keep)
{
  while (s->n_pages > keep)
    b->free_pages[b->n_free++] = s->table[--s->n_pages];
}

/* s's table grown to @need pages from the pool, the new entries uploaded;
 * FALSE (error set, nothing taken) when the pool has too few or the upload
 * failed. */
static gboolean
take_pages (HoneCudaBackend *b, Seq *s, int need, GError **error)
{
  const int had = s->n_pages;

  if (need <= had)
    return TRUE;
  if (need - had > b->n_free)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY, _("The KV cache is full (%d pages of %d tokens in use)"),
                   b->n_pages - b->n_free, HONE_K_KV_BLOCK);
      return FALSE;
    }
  while (s->n_pages < need)
    s->table[s->n_pages++] = b->free_pages[--b->n_free];
  if (cuda_failed (cudaMemcpyAsync (s->d_table + had, s->table + had, (size_t) (need - had) * 4,
                                    cudaMemcpyHostToDevice, b->stream), "upload", error))
    {
      release_pages (b, s, had);
      return FALSE;
    }
  return TRUE;
}

static void
drop_graph (HoneCudaBackend *b, Seq *s)
{
  if (!s->graph)
    return;
  cudaGraphExecDestroy (s->graph);
  s->graph = NULL;
  b->other_bytes -= s->graph_bytes;
  s->graph_bytes = 0;
}

static void
seq_free_impl (HoneBackend *self, int seq)
{
  HoneCudaBackend *b = cu (self);
  Seq *s = get_seq (b, seq);
  if (!s)
    return;
  if (b->ahead.seq == seq)
    ahead_drop (b);
  release_pages (b, s, 0);
  drop_graph (b, s);
  cudaFree (s->d_table);
  g_free (s->table);
  memset (s, 0, sizeof *s);
}

static int
seq_length_impl (HoneBackend *self, int seq)
{
  Seq *s = get_seq (cu (self), seq);
  return s ? s->len : 0;
}

static void
seq_truncate_impl (HoneBackend *self, int seq, int n_tokens)
{
  HoneCudaBackend *b = cu (self);
  Seq *s = get_seq (b, seq);
  if (!s || n_tokens < 0 || n_tokens >= s->len)
    return;
  if (b->ahead.seq == seq)
    ahead_drop (b);
  s->len = n_tokens;
  release_pages (b, s, (n_tokens + HONE_K_KV_BLOCK - 1) / HONE_K_KV_BLOCK);
}

/* The one-token step's graph for position @pos in s->graph. A graph replays
 * at growing contexts: captured for the attention launch shape of the
 * context's tier (hone_k_attn_ctx_bound), and captured again when the
 * context passes into the next tier. */
static gboolean
ensure_graph (HoneCudaBackend *b, Seq *s, int pos, GError **error)
{
  HoneKState *st = &b->dec;
  HoneKKv kv = { b->k_pool, b->v_pool, s->d_table, b->max_blocks };
  const int bound = hone_k_attn_ctx_bound (pos + 1);
  cudaGraph_t g = NULL;
  size_t f0 = 0, f1 = 0, t;
  cudaError_t e;
  int r;

  if (s->graph && s->graph_bound != bound)
    drop_graph (b, s);
  if (s->graph)
    return TRUE;
  cudaMemGetInfo (&f0, &t);
  if (cuda_failed (cudaStreamBeginCapture (b->stream, cudaStreamCaptureModeThreadLocal), "graph capture", error))
    return FALSE;
  st->ctx_bound = bound;
  r = hone_k_forward (&b->km, &kv, st, 1, pos, 1, 0, 0.f, 0, b->stream);
  st->ctx_bound = 0;
  e = cudaStreamEndCapture (b->stream, &g);
  if (cuda_failed ((cudaError_t) r, "decode step", error) || cuda_failed (e, "graph capture", error))
    {
      if (g)
        cudaGraphDestroy (g);
      return FALSE;
    }
  e = cudaGraphInstantiate (&s->graph, g, 0);
  cudaGraphDestroy (g);
  if (cuda_failed (e, "graph instantiate", error))
    {
      s->graph = NULL;
      return FALSE;
    }
  cudaMemGetInfo (&f1, &t);
  s->graph_bound = bound;
  s->graph_bytes = f0 > f1 ? (gint64) (f0 - f1) : 0;
  b->other_bytes += s->graph_bytes;
  return TRUE;
}

/* Run n tokens (≤ the state's size) at pos; logits of the last n_logits to @out (may be NULL).
 * With @kp, the last row is sampled on the device first: *sampled = the id
 * and @out is left alone, or *sampled = -1 and @out gets the logits. */
static gboolean
run_chunk (HoneCudaBackend *b, Seq *s, const gint32 *tokens, int n, int pos, int n_logits, float *out,
           const HoneKSampleParams *kp, const gint32 *window, gint32 *sampled, GError **error)
{
  HoneKState *st = n <= HONE_K_MAX_DECODE ? &b->dec : &b->pre;
  HoneKKv kv = { b->k_pool, b->v_pool, s->d_table, b->max_blocks };

  if (cuda_failed (cudaMemcpyAsync (st->tokens, tokens, (size_t) n * 4, cudaMemcpyHostToDevice, b->stream), "upload", error)
      || cuda_failed (cudaMemcpyAsync (st->pos, &pos, 4, cudaMemcpyHostToDevice, b->stream), "upload", error))
    return FALSE;
  if (n == 1 && n_logits == 1)
    {
      if (!ensure_graph (b, s, pos, error)
          || cuda_failed (cudaGraphLaunch (s->graph, b->stream), "graph launch", error))
        return FALSE;
    }
  else if (cuda_failed ((cudaError_t) hone_k_forward (&b->km, &kv, st, n, pos, n_logits, 0, 0.f, 0, b->stream),
                        "forward", error))
    return FALSE;
  if (kp)
    {
      if (!sample_on_device (b, st, n_logits - 1, kp, window, sampled, error))
        return FALSE;
      if (*sampled >= 0)
        return TRUE;
    }
  if (out && cuda_failed (cudaMemcpyAsync (out, st->logits, (size_t) n_logits * b->km.cfg.vocab * 4,
                                           cudaMemcpyDeviceToHost, b->stream), "download", error))
    return FALSE;
  return !cuda_failed (cudaStreamSynchronize (b->stream), "forward", error);
}

/* ---- decode ahead -------------------------------------------------------
 * A one-token step whose id is sampled on the device ends in a 4-byte
 * download and a wait; the host then hands the id out, checks its stop
 * conditions and calls again, and the GPU idles in between (17–33 µs a token
 * at the 8B shape on the H200, session 21). When the caller says the next call
 * will most likely be the step after (HoneBatchSampling.next), that step is
 * enqueued before the wait, its input fed on the device from the id just
 * sampled (hone_k_decode_feed). A later call that matches it — same
 * sequence, position, id, parameters and draw — only waits for its id and
 * enqueues the one after. Anything else on the backend (another call, a
 * truncate, a free, unload) drops it first with a synchronize: the KV row it
 * wrote lies past the sequence's length and is written again by the step
 * that does run there. Not with a penalty window (the window changes with
 * every id) or where the step after needs another graph tier, a page that is
 * not free, or the context is full. HONE_DECODE_AHEAD=0 turns it off. */

static void
ahead_drop (HoneCudaBackend *b)
{
  if (b->ahead.seq < 0)
    return;
  b->ahead.seq = -1;
  (void) cudaStreamSynchronize (b->stream);   /* an error of that step shows on the next call */
}

static gboolean
same_params (const HoneKSampleParams *a, const HoneKSampleParams *c)
{
  return a->temperature == c->temperature && a->top_k == c->top_k && a->top_p == c->top_p && a->min_p == c->min_p
         && a->repeat_penalty == c->repeat_penalty && a->presence_penalty == c->presence_penalty
         && a->frequency_penalty == c->frequency_penalty && a->n_window == c->n_window && a->u == c->u;
}

/* Enqueue the one-token step at @pos of @s, sampled with @kp (no penalty
 * window), its id downloaded into slot @slot: the token from the host
 * (@token) or, when @token is NULL, fed on the device from the id the step
 * before sampled. The graph must exist for @pos's tier unless the stream is
 * idle (a capture). */
static gboolean
enqueue_decode (HoneCudaBackend *b, Seq *s, int pos, const gint32 *token, const HoneKSampleParams *kp, int slot,
                GError **error)
{
  HoneKState *st = &b->dec;

  if (token)
    {
      if (cuda_failed (cudaMemcpyAsync (st->tokens, token, 4, cudaMemcpyHostToDevice, b->stream), "upload", error)
          || cuda_failed (cudaMemcpyAsync (st->pos, &pos, 4, cudaMemcpyHostToDevice, b->stream), "upload", error))
        return FALSE;
    }
  else if (cuda_failed ((cudaError_t) hone_k_decode_feed (b->d_samp, st->tokens, st->pos, pos, b->stream), "feed", error))
    return FALSE;
  return ensure_graph (b, s, pos, error)
         && !cuda_failed (cudaGraphLaunch (s->graph, b->stream), "graph launch", error)
         && !cuda_failed ((cudaError_t) hone_k_sample_chain (st->logits, b->km.cfg.vocab, kp, NULL, b->d_samp,
                                                                   st->sample_scratch, b->stream),
                          "sample", error)
         && !cuda_failed (cudaMemcpyAsync (b->h_samp + 1 + slot, b->d_samp, 4, cudaMemcpyDeviceToHost, b->stream),
                          "download", error)
         && !cuda_failed (cudaEventRecord (b->ahead_ev[slot], b->stream), "event", error);
}

/* Can the step at @pos of @s run ahead? Its page is taken here if needed. */
static gboolean
ahead_fits (HoneCudaBackend *b, Seq *s, int pos)
{
  return pos + 1 <= b->max_context && s->graph && s->graph_bound == hone_k_attn_ctx_bound (pos + 1)
         && take_pages (b, s, pos / HONE_K_KV_BLOCK + 1, NULL);
}

/* One token at s->len sampled on the device with @kp (no window): the
 * forward of the engine's decode loop. Runs the step ahead when it is this
 * one, starts the next ahead when @bs asks for it. */
static gboolean
decode_sampled (HoneCudaBackend *b, int seq, Seq *s, HoneBatch *batch, const HoneKSampleParams *kp, GError **error)
{
  const gint32 tok = batch->tokens[0];
  const int pos = s->len;
  const gboolean hit = b->ahead.seq == seq && b->ahead.pos == pos && b->ahead.fed == tok
                       && same_params (&b->ahead.kp, kp);
  int slot = 0;
  gint32 id;

  if (hit)
    {
      slot = b->ahead.slot;
      b->ahead.seq = -1;
    }
  else
    {
      ahead_drop (b);
      if (!enqueue_decode (b, s, pos, &tok, kp, slot, error))
        return FALSE;
    }
  if (batch->sampling->next && kp->n_window == 0 && ahead_fits (b, s, pos + 1))
    {
      b->ahead.kp = *kp;
      b->ahead.kp.u = batch->sampling->u_next;
      b->ahead.pos = pos + 1;
      b->ahead.slot = 1 - slot;
      b->ahead.fed = -1;
      if (!enqueue_decode (b, s, pos + 1, NULL, &b->ahead.kp, b->ahead.slot, error))
        {
          (void) cudaStreamSynchronize (b->stream);
          return FALSE;
        }
      b->ahead.seq = seq;
    }
  if (cuda_failed (cudaEventSynchronize (b->ahead_ev[slot]), "forward", error))
    {
      ahead_drop (b);
      return FALSE;
    }
  id = b->h_samp[1 + slot];
  if (id < 0)
    {
      /* the host samples from this step's logits, which the step ahead has
       * overwritten: run it again */
      ahead_drop (b);
      return run_chunk (b, s, &tok, 1, pos, 1, batch->logits, kp, NULL, &batch->sampled, error);
    }
  b->ahead.fed = id;
  batch->sampled = id;
  batch->ahead = hit;
  return TRUE;
}

static gboolean
forward_impl (HoneBackend *self, HoneBatch *batch, GCancellable *cancellable, GError **error)
{
  HoneCudaBackend *b = cu (self);
  Seq *s;
  const int n = batch->n_tokens;
  int len0, chunk;
  HoneKSampleParams kp;
  const gboolean dev_sample = batch->sampling != NULL && !batch->all_logits && b->model != NULL
                              && sample_params (b, batch->sampling, &kp);

  if (!b->model)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_NO_MODEL, _("No model is loaded"));
      return FALSE;
    }
  if (!(s = get_seq (b, batch->seq)) || n < 1 || batch->tokens == NULL || batch->logits == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT, _("Invalid batch (sequence %d, %d tokens)"), batch->seq, n);
      return FALSE;
    }
  for (int i = 0; i < n; i++)
    if (batch->tokens[i] < 0 || batch->tokens[i] >= b->km.cfg.vocab)
      {
        g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT, _("Token id %d is outside the vocabulary (%d)"),
                     batch->tokens[i], b->km.cfg.vocab);
        return FALSE;
      }
  if (b->ahead_on && !(b->ahead.seq == batch->seq && n == 1 && dev_sample && kp.n_window == 0))
    ahead_drop (b);
  if (s->len + n > b->max_context)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_CONTEXT_OVERFLOW, _("%d tokens do not fit the context window (%d of %d used)"),
                   n, s->len, b->max_context);
      return FALSE;
    }
  /* pages for the new positions */
  if (!take_pages (b, s, (s->len + n + HONE_K_KV_BLOCK - 1) / HONE_K_KV_BLOCK, error))
    return FALSE;
  len0 = s->len;
  if (b->ahead_on && n == 1 && dev_sample && kp.n_window == 0)
    {
      if (g_cancellable_set_error_if_cancelled (cancellable, error) || !decode_sampled (b, batch->seq, s, batch, &kp, error))
        goto undo;
      s->len = len0 + 1;
      return TRUE;
    }
  chunk = batch->all_logits ? LOGIT_ROWS : b->pre.max_tok;
  for (int done = 0; done < n;)
    {
      const int c = MIN (chunk, n - done);
      const gboolean last = done + c == n;
      if (g_cancellable_set_error_if_cancelled (cancellable, error))
        goto undo;
      if (!run_chunk (b, s, batch->tokens + done, c, len0 + done, batch->all_logits ? c : 1,
                      batch->all_logits ? batch->logits + (size_t) done * b->km.cfg.vocab : (last ? batch->logits : NULL),
                      last && dev_sample ? &kp : NULL, dev_sample ? batch->sampling->window : NULL, &batch->sampled,
                      error))
        goto undo;
      done += c;
    }
  s->len = len0 + n;
  return TRUE;

undo:
  ahead_drop (b);
  s->len = len0;
  release_pages (b, s, (len0 + HONE_K_KV_BLOCK - 1) / HONE_K_KV_BLOCK);
  return FALSE;
}

static void
memory_impl (HoneBackend *self, HoneMemoryReport *r)
{
  HoneCudaBackend *b = cu (self);
  size_t free_b = 0, total_b = 0;
  NvmlMemory m;

  memset (r, 0, sizeof *r);
  r->weights = b->weight_bytes;
  r->kv_cache = b->kv_bytes;
  r->workspace = b->ws_bytes;
  r->other = b->other_bytes;
  if (b->nvml_mem && b->nvml_dev && b->nvml_mem (b->nvml_dev, &m) == 0)
    {
      r->used = (gint64) m.used;
      r->total = (gint64) m.total;
    }
  else if (cudaMemGetInfo (&free_b, &total_b) == cudaSuccess)
    {
      r->used = (gint64) (total_b - free_b);
      r->total = (gint64) total_b;
    }
  b->peak = MAX (b->peak, r->used);
  r->peak = b->peak;
}

static void
free_impl (HoneBackend *self)
{
  HoneCudaBackend *b = cu (self);
  unload_impl (self);
  if (b->d_samp)
    cudaFree (b->d_samp);
  if (b->h_samp)
    cudaFreeHost (b->h_samp);
  for (int i = 0; i < 2; i++)
    if (b->ahead_ev[i])
      cudaEventDestroy (b->ahead_ev[i]);
  if (b->allocs)
    g_ptr_array_free (b->allocs, TRUE);
  if (b->stream)
    cudaStreamDestroy (b->stream);
  if (b->nvml)
    dlclose (b->nvml);
  g_free (b);
}

static const HoneBackendClass cuda_class = {
  .name = "cuda",
  .load = load_impl,
  .unload = unload_impl,
  .estimate = estimate_impl,
  .caps = caps_impl,
  .prefill_chunk = PREFILL_CHUNK,
  .seq_new = seq_new_impl,
  .seq_free = seq_free_impl,
  .seq_length = seq_length_impl,
  .seq_truncate = seq_truncate_impl,
  .forward = forward_impl,
  .memory = memory_impl,
  .free = free_impl,
};

/* NVML reports device memory the way nvidia-smi does; it is dlopened so that
 * the library never links against the driver's libraries. */
static void
nvml_open (HoneCudaBackend *b)
{
  char bus[32];
  int (*init) (void);
  int (*by_bus) (const char *, void **);

  if (cudaDeviceGetPCIBusId (bus, sizeof bus, b->device) != cudaSuccess)
    return;
  b->nvml = dlopen ("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!b->nvml)
    return;
  init = (int (*) (void)) dlsym (b->nvml, "nvmlInit_v2");
  by_bus = (int (*) (const char *, void **)) dlsym (b->nvml, "nvmlDeviceGetHandleByPciBusId_v2");
  b->nvml_mem = (int (*) (void *, NvmlMemory *)) dlsym (b->nvml, "nvmlDeviceGetMemoryInfo");
  if (!init || !by_bus || !b->nvml_mem || init () != 0 || by_bus (bus, &b->nvml_dev) != 0)
    {
      b->nvml_mem = NULL;
      b->nvml_dev = NULL;
    }
}

gboolean
hone_cuda_device_check (int device, GError **error)
{
  int count = 0, major = 0, minor = 0, drv = 0, rt = 0;
  cudaError_t e = cudaGetDeviceCount (&count);

  if (e == cudaErrorInsufficientDriver)
    {
      cudaDriverGetVersion (&drv);
      cudaRuntimeGetVersion (&rt);
      (void) cudaGetLastError ();
      if (drv == 0)
        g_set_error (error, HONE_ERROR, HONE_ERROR_BACKEND, _("No NVIDIA driver is installed (no CUDA GPU to use)"));
      else
        g_set_error (error, HONE_ERROR, HONE_ERROR_BACKEND,
                     _("The NVIDIA driver (CUDA %d.%d) is older than this build needs (CUDA %d.%d)"), drv / 1000,
                     drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
      return FALSE;
    }
  if (e != cudaSuccess || count == 0)
    {
      (void) cudaGetLastError ();
      g_set_error (error, HONE_ERROR, HONE_ERROR_BACKEND, _("No usable CUDA GPU: %s"),
                   e != cudaSuccess ? cudaGetErrorString (e) : _("none found"));
      return FALSE;
    }
  if (device < 0 || device >= count)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT, _("There is no CUDA device %d (%d found)"), device, count);
      return FALSE;
    }
  cudaDeviceGetAttribute (&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute (&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (major < 8)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_BACKEND,
                   _("CUDA device %d has compute capability %d.%d; the kernels need 8.0 or newer"), device, major, minor);
      return FALSE;
    }
  {
    /* cuBLAS is opened here, not linked (kernels/hone-k-cublas.c) */
    char why[512];
    if (hone_k_cublas_open (why, sizeof why) != 0)
      {
        /* TRANSLATORS: %s is the dynamic loader's reason, e.g. "libcublasLt.so.13: cannot open shared object file" */
        g_set_error (error, HONE_ERROR, HONE_ERROR_BACKEND, _("The GPU needs cuBLAS, which could not be opened: %s"), why);
        return FALSE;
      }
  }
  return TRUE;
}

HoneBackend *
hone_cuda_backend_new (int device, GError **error)
{
  HoneCudaBackend *b;

  if (!hone_cuda_device_check (device, error))
    return NULL;
  b = g_new0 (HoneCudaBackend, 1);
  b->parent.klass = &cuda_class;
  b->device = device;
  b->allocs = g_ptr_array_new ();
  if (cuda_failed (cudaSetDevice (device), "cudaSetDevice", error)
      || cuda_failed (cudaStreamCreateWithFlags (&b->stream, cudaStreamNonBlocking), "cudaStreamCreate", error))
    {
      g_ptr_array_free (b->allocs, TRUE);
      g_free (b);
      return NULL;
    }
  /* device sampling: a few KB for the id and the penalty window, here rather
   * than at load so that a model's memory report is unchanged */
  b->gpu_sampling = g_strcmp0 (g_getenv ("HONE_GPU_SAMPLING"), "0") != 0;
  b->past_k_on_host = g_strcmp0 (g_getenv ("HONE_GPU_SAMPLING_WALK"), "0") == 0;
  if (b->gpu_sampling
      && (cudaMalloc ((void **) &b->d_samp, (SAMP_WINDOW_OFF + HONE_K_SAMPLE_MAX_WINDOW) * 4) != cudaSuccess
          || cudaHostAlloc ((void **) &b->h_samp, (SAMP_WINDOW_OFF + HONE_K_SAMPLE_MAX_WINDOW) * 4, cudaHostAllocDefault)
               != cudaSuccess))
    {
      (void) cudaGetLastError ();
      b->gpu_sampling = FALSE;   /* the host samples */
    }
  b->ahead.seq = -1;
  b->ahead_on = b->gpu_sampling && g_strcmp0 (g_getenv ("HONE_DECODE_AHEAD"), "0") != 0;
  for (int i = 0; i < 2 && b->ahead_on; i++)
    if (cudaEventCreateWithFlags (&b->ahead_ev[i], cudaEventDisableTiming) != cudaSuccess)
      {
        (void) cudaGetLastError ();
        b->ahead_on = FALSE;   /* every step waits for its own id */
      }
  nvml_open (b);
  return &b->parent;
}
