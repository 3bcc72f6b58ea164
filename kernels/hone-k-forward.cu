/* hone-k-forward.cu — one transformer step, enqueued kernel by kernel.
 *
 * Decode (≤ HONE_K_MAX_DECODE tokens): GEMVs with the RMSNorm fused into
 * BF16/F16 GEMVs and RoPE + KV writes fused into the QKV GEMV, split-KV
 * attention, SwiGLU and residual adds in GEMV epilogues: 5 launches a layer
 * for BF16 llama shapes, nothing read back to the host, so the step can be
 * captured as one CUDA graph with positions read from device memory.
 * Quantized matrices add a norm+quantize (or quantize) launch before them.
 *
 * Prefill: cuBLAS GEMMs (bf16 or f16 operands, f32 out, the residual added by
 * beta = 1), quantized weights dequantized to f16 one matrix at a time, and
 * the causal flash-attention kernel.
 */
#include "hone-k-common.cuh"
#include <cublas_v2.h>
#include <string.h>

extern "C" int hone_k_swiglu16 (const float *gu, int n_tok, int ffn, void *y16, int is_f16, cudaStream_t stream);
extern "C" int hone_k_add_bias (float *y, int n_tok, int n, const float *b, cudaStream_t stream);
extern "C" int hone_k_sample_feed (const float *logits, int n_tok, int vocab, float temperature, uint64_t seed,
                                   const int32_t *step, int32_t *out, int32_t *feed, cudaStream_t stream);
extern "C" int hone_k_advance (int32_t *pos, int n, int32_t *step, cudaStream_t stream);

static bool
is_f (const HoneKMatrix *w)
{
  return w->type == HONE_K_BF16 || w->type == HONE_K_F16;
}

static int
max_dim (const HoneKConfig *c)
{
  int m = c->hidden;
  if (c->ffn > m) m = c->ffn;
  if (c->n_heads * c->head_dim > m) m = c->n_heads * c->head_dim;
  return m;
}

static size_t
dequant_scratch_elems (const HoneKModel *m)
{
  size_t best = 0;
  for (int l = 0; l < m->cfg.n_layers; l++)
    {
      const HoneKMatrix *ws[4] = { &m->layers[l].wqkv, &m->layers[l].wo, &m->layers[l].wgu, &m->layers[l].wdown };
      for (int i = 0; i < 4; i++)
        if (!is_f (ws[i]) && (size_t) ws[i]->rows * ws[i]->cols > best)
          best = (size_t) ws[i]->rows * ws[i]->cols;
    }
  if (!is_f (&m->lm_head) && (size_t) m->lm_head.rows * m->lm_head.cols > best)
    best = (size_t) m->lm_head.rows * m->lm_head.cols;
  return best;
}

#define ALIGN(x) (((x) + 255) & ~(size_t) 255)

struct Layout {
  size_t small, h, xn, qkv, attn, gu, logits, xq, xds, x16, w16, attn_s, ws, total;
};

static Layout
layout (const HoneKModel *m, int max_tok, int logits_rows)
{
  const HoneKConfig *c = &m->cfg;
  Layout L;
  const size_t md = max_dim (c), qkvw = (size_t) (c->n_heads + 2 * c->n_kv_heads) * c->head_dim;
  L.small = ALIGN (sizeof (int32_t) * (3 * (size_t) max_tok + 8) + 8 * (size_t) max_tok);
  L.h = ALIGN ((size_t) max_tok * c->hidden * 4);
  L.xn = ALIGN ((size_t) max_tok * md * 4);
  L.qkv = ALIGN ((size_t) max_tok * qkvw * 4);
  L.attn = ALIGN ((size_t) max_tok * c->n_heads * c->head_dim * 4);
  L.gu = ALIGN ((size_t) max_tok * 2 * c->ffn * 4);
  L.logits = ALIGN ((size_t) logits_rows * c->vocab * 4);
  L.xq = ALIGN ((size_t) max_tok * md);
  L.xds = ALIGN ((size_t) max_tok * (md / 32 + 1) * 8);
  L.x16 = ALIGN ((size_t) max_tok * md * 2);
  L.w16 = max_tok > HONE_K_MAX_DECODE ? ALIGN (dequant_scratch_elems (m) * 2) : 0;
  L.attn_s = ALIGN (hone_k_attn_scratch_bytes (c->n_heads, c->n_kv_heads, c->head_dim, max_tok));
  L.ws = max_tok > HONE_K_MAX_DECODE ? ((size_t) 32 << 20) : 0;
  L.total = L.small + L.h + L.xn + L.qkv + L.attn + L.gu + L.logits + L.xq + L.xds + L.x16 + L.w16 + L.attn_s + L.ws;
  return L;
}

extern "C" size_t
hone_k_state_bytes (const HoneKModel *m, int max_tok, int logits_rows)
{
  return layout (m, max_tok, logits_rows).total;
}

extern "C" int
hone_k_state_alloc (HoneKState *st, const HoneKModel *m, int max_tok, int logits_rows)
{
  memset (st, 0, sizeof *st);
  if (max_tok < 1 || logits_rows < 1)
    return (int) cudaErrorInvalidValue;
  const Layout L = layout (m, max_tok, logits_rows);
  char *p = NULL;
  HONE_K_CHECK (cudaMalloc ((void **) &p, L.total));
  cudaError_t e = cudaMemset (p, 0, L.small);
  if (e == cudaSuccess)
    e = cudaMemset (p + L.total - L.ws - L.attn_s, 0, L.attn_s);   /* split counters start at 0 */
  if (e != cudaSuccess)
    {
      cudaFree (p);
      return (int) e;
    }
  st->max_tok = max_tok;
  st->bytes = L.total;
  int32_t *sm = (int32_t *) p;
  st->tokens = sm;
  st->sampled = sm + max_tok;
  st->pos = sm + 2 * max_tok;
  st->step = sm + 2 * max_tok + 1;
  st->sample_scratch = sm + 3 * max_tok + 8;
  p += L.small;
  st->h = (float *) p; p += L.h;
  st->xn = (float *) p; p += L.xn;
  st->qkv = (float *) p; p += L.qkv;
  st->attn = (float *) p; p += L.attn;
  st->gu = (float *) p; p += L.gu;
  st->logits = (float *) p; p += L.logits;
  st->xq.q = (int8_t *) p; p += L.xq;
  st->xq.ds = (float2 *) p; p += L.xds;
  st->x16 = p; p += L.x16;
  st->w16 = L.w16 ? (void *) p : NULL; p += L.w16;
  st->attn_scratch = p; p += L.attn_s;
  st->cublas_ws = L.ws ? (void *) p : NULL;
  if (L.ws)
    {
      cublasHandle_t h;
      if (cublasCreate (&h) != CUBLAS_STATUS_SUCCESS)
        {
          cudaFree (st->tokens);
          memset (st, 0, sizeof *st);
          return (int) cudaErrorUnknown;
        }
      cublasSetWorkspace (h, st->cublas_ws, L.ws);
      cublasSetMathMode (h, CUBLAS_DEFAULT_MATH);
      st->cublas = h;
    }
  return 0;
}

extern "C" void
hone_k_state_free (HoneKState *st)
{
  if (st->cublas)
    cublasDestroy ((cublasHandle_t) st->cublas);
  if (st->tokens)
    cudaFree (st->tokens);
  memset (st, 0, sizeof *st);
}

/* y[n_tok][rows] (+)= W·norm(x): the norm fused for BF16/F16, else a norm+quantize launch. */
static int
gemv_normed (HoneKState *st, const HoneKMatrix *w, const float *x, const float *g, float eps, int n_tok,
             const float *bias, float *y, int epi, const HoneKGemvOp *rope, cudaStream_t s)
{
  HoneKGemvOp op;
  if (rope)
    op = *rope;
  else
    memset (&op, 0, sizeof op);
  op.w = w;
  op.n_tok = n_tok;
  op.bias = bias;
  op.y = y;
  op.epilogue = epi;
  op.eps = eps;
  if (is_f (w))
    {
      op.x = x;
      op.norm_g = g;
    }
  else
    {
      HONE_K_CHECK ((cudaError_t) hone_k_rmsnorm (x, g, n_tok, w->cols, eps, NULL, &st->xq, NULL, 0, s));
      op.xq = &st->xq;
    }
  return hone_k_gemv_ex (&op, s);
}

/* y (+)= W·x for an unnormalized input (attention output, SwiGLU output). */
static int
gemv_plain (HoneKState *st, const HoneKMatrix *w, const float *x, int n_tok, const float *res, float *y,
            int epi, cudaStream_t s)
{
  HoneKGemvOp op;
  memset (&op, 0, sizeof op);
  op.w = w;
  op.n_tok = n_tok;
  op.res = res;
  op.y = y;
  op.epilogue = epi;
  if (is_f (w))
    op.x = x;
  else
    {
      HONE_K_CHECK ((cudaError_t) hone_k_quantize (x, n_tok, w->cols, &st->xq, NULL, 0, s));
      op.xq = &st->xq;
    }
  return hone_k_gemv_ex (&op, s);
}

static int
decode_step (const HoneKModel *m, const HoneKKv *kv, HoneKState *st, int n, int n_logits, cudaStream_t s)
{
  const HoneKConfig *c = &m->cfg;
  const int nq = c->n_heads, nkv = c->n_kv_heads, hd = c->head_dim;
  HONE_K_CHECK ((cudaError_t) hone_k_embed (&m->embd, st->tokens, n, st->h, s));
  for (int l = 0; l < c->n_layers; l++)
    {
      const HoneKLayer *L = &m->layers[l];
      HoneKGemvOp rope;
      memset (&rope, 0, sizeof rope);
      rope.nq = nq;
      rope.nkv = nkv;
      rope.hd = hd;
      rope.pos = st->pos;
      rope.inv_freq = c->rope_inv_freq;
      rope.k_pool = kv->k_pool[l];
      rope.v_pool = kv->v_pool[l];
      rope.block_table = kv->block_table;
      const bool fuse_rope = L->q_norm == NULL;
      HONE_K_CHECK ((cudaError_t) gemv_normed (st, &L->wqkv, st->h, L->attn_norm, c->rms_eps, n, L->bqkv, st->qkv,
                                               fuse_rope ? (int) HONE_K_EPI_ROPE_KV : (int) HONE_K_EPI_STORE, &rope, s));
      if (!fuse_rope)
        HONE_K_CHECK ((cudaError_t) hone_k_rope_kv (st->qkv, n, nq, nkv, hd, st->pos, c->rope_inv_freq, 0,
                                                    L->q_norm, L->k_norm, c->rms_eps, kv->k_pool[l],
                                                    kv->v_pool[l], kv->block_table, s));
      HONE_K_CHECK ((cudaError_t) hone_k_attn_decode (st->qkv, n, nq, nkv, hd, st->pos, kv->k_pool[l], kv->v_pool[l],
                                                      kv->block_table, st->attn_scratch, st->attn, s));
      HONE_K_CHECK ((cudaError_t) gemv_plain (st, &L->wo, st->attn, n, st->h, st->h, HONE_K_EPI_ADD, s));
      HONE_K_CHECK ((cudaError_t) gemv_normed (st, &L->wgu, st->h, L->ffn_norm, c->rms_eps, n, NULL, st->gu,
                                               HONE_K_EPI_SWIGLU, NULL, s));
      HONE_K_CHECK ((cudaError_t) gemv_plain (st, &L->wdown, st->gu, n, st->h, st->h, HONE_K_EPI_ADD, s));
    }
  const float *hl = st->h + (size_t) (n - n_logits) * c->hidden;
  return gemv_normed (st, &m->lm_head, hl, m->out_norm, c->rms_eps, n_logits, NULL, st->logits,
                      HONE_K_EPI_STORE, NULL, s);
}

/* Y[n][rows] = X16[n][cols]·Wᵀ (+ Y when accumulate), W dequantized first when quantized. */
static int
gemm (HoneKState *st, const HoneKMatrix *w, int n, const void *x16, float *y, int accumulate, cudaStream_t s)
{
  cublasHandle_t h = (cublasHandle_t) st->cublas;
  const void *wp = w->q;
  cudaDataType_t t = w->type == HONE_K_BF16 ? CUDA_R_16BF : CUDA_R_16F;
  if (!is_f (w))
    {
      HONE_K_CHECK ((cudaError_t) hone_k_dequant (w, st->w16, 1, s));
      wp = st->w16;
    }
  const float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
  cublasSetStream (h, s);
  cublasStatus_t r = cublasGemmEx (h, CUBLAS_OP_T, CUBLAS_OP_N, w->rows, n, w->cols, &alpha, wp, t, w->cols,
                                   x16, t, w->cols, &beta, y, CUDA_R_32F, w->rows, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT);
  return r == CUBLAS_STATUS_SUCCESS ? 0 : (int) cudaErrorUnknown;
}

static int
x16_is_f16 (const HoneKMatrix *w)
{
  return w->type != HONE_K_BF16;
}

static int
prefill_step (const HoneKModel *m, const HoneKKv *kv, HoneKState *st, int n, int pos_host, int n_logits,
              cudaStream_t s)
{
  const HoneKConfig *c = &m->cfg;
  const int nq = c->n_heads, nkv = c->n_kv_heads, hd = c->head_dim;
  const int qkvw = (nq + 2 * nkv) * hd;
  if (!st->cublas)
    return (int) cudaErrorInvalidValue;
  HONE_K_CHECK ((cudaError_t) hone_k_embed (&m->embd, st->tokens, n, st->h, s));
  for (int l = 0; l < c->n_layers; l++)
    {
      const HoneKLayer *L = &m->layers[l];
      HONE_K_CHECK ((cudaError_t) hone_k_rmsnorm (st->h, L->attn_norm, n, c->hidden, c->rms_eps, NULL, NULL, st->x16,
                                                  x16_is_f16 (&L->wqkv), s));
      HONE_K_CHECK ((cudaError_t) gemm (st, &L->wqkv, n, st->x16, st->qkv, 0, s));
      if (L->bqkv)
        HONE_K_CHECK ((cudaError_t) hone_k_add_bias (st->qkv, n, qkvw, L->bqkv, s));
      HONE_K_CHECK ((cudaError_t) hone_k_rope_kv (st->qkv, n, nq, nkv, hd, st->pos, c->rope_inv_freq, 0, L->q_norm,
                                                  L->k_norm, c->rms_eps, kv->k_pool[l], kv->v_pool[l],
                                                  kv->block_table, s));
      HONE_K_CHECK ((cudaError_t) hone_k_attn_prefill (st->qkv, n, nq, nkv, hd, pos_host, kv->k_pool[l],
                                                       kv->v_pool[l], kv->block_table, st->attn, s));
      HONE_K_CHECK ((cudaError_t) hone_k_quantize (st->attn, n, nq * hd, NULL, st->x16, x16_is_f16 (&L->wo), s));
      HONE_K_CHECK ((cudaError_t) gemm (st, &L->wo, n, st->x16, st->h, 1, s));
      HONE_K_CHECK ((cudaError_t) hone_k_rmsnorm (st->h, L->ffn_norm, n, c->hidden, c->rms_eps, NULL, NULL, st->x16,
                                                  x16_is_f16 (&L->wgu), s));
      HONE_K_CHECK ((cudaError_t) gemm (st, &L->wgu, n, st->x16, st->gu, 0, s));
      HONE_K_CHECK ((cudaError_t) hone_k_swiglu16 (st->gu, n, c->ffn, st->x16, x16_is_f16 (&L->wdown), s));
      HONE_K_CHECK ((cudaError_t) gemm (st, &L->wdown, n, st->x16, st->h, 1, s));
    }
  const float *hl = st->h + (size_t) (n - n_logits) * c->hidden;
  if (n_logits <= HONE_K_MAX_DECODE)
    return gemv_normed (st, &m->lm_head, hl, m->out_norm, c->rms_eps, n_logits, NULL, st->logits,
                        HONE_K_EPI_STORE, NULL, s);
  HONE_K_CHECK ((cudaError_t) hone_k_rmsnorm (hl, m->out_norm, n_logits, c->hidden, c->rms_eps, NULL, NULL, st->x16,
                                              x16_is_f16 (&m->lm_head), s));
  return gemm (st, &m->lm_head, n_logits, st->x16, st->logits, 0, s);
}

extern "C" int
hone_k_forward (const HoneKModel *m, const HoneKKv *kv, HoneKState *st, int n_tok, int pos_host,
                int n_logits, int sample, float temperature, uint64_t seed, cudaStream_t stream)
{
  if (n_tok < 1 || n_tok > st->max_tok || n_logits < 1 || n_logits > n_tok
      || (m->cfg.hidden % 32) || (m->cfg.head_dim != 64 && m->cfg.head_dim != 128))
    return (int) cudaErrorInvalidValue;
  hone_k_pdl_hint (m->cfg.n_layers > 0 && !is_f (&m->layers[0].wgu));
  const int r = n_tok <= HONE_K_MAX_DECODE ? decode_step (m, kv, st, n_tok, n_logits, stream)
                                           : prefill_step (m, kv, st, n_tok, pos_host, n_logits, stream);
  if (r)
    return r;
  if (sample)
    HONE_K_CHECK ((cudaError_t) hone_k_sample_feed (st->logits, n_logits, m->cfg.vocab, temperature, seed, st->step,
                                                    st->sampled, st->tokens, stream));
  return hone_k_advance (st->pos, n_tok, st->step, stream);
}
