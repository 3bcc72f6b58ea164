/* hone-k-forward.cu — one transformer step, enqueued kernel by kernel.
 *
 * Decode (≤ HONE_K_MAX_DECODE tokens): GEMVs with the RMSNorm fused into
 * BF16/F16 GEMVs and RoPE + KV writes fused into the QKV GEMV, split-KV
 * attention, SwiGLU and residual adds in GEMV epilogues: 5 launches a layer
 * for BF16 llama shapes, nothing read back to the host, so the step can be
 * captured as one CUDA graph with positions read from device memory.
 * Quantized matrices add a norm+quantize (or quantize) launch before them,
 * except where the staged GEMV (one token, sm_90) takes the f32 input and
 * normalizes and quantizes it itself: then 5 launches a layer for every type.
 * Streamed (one token, sm_90, hone_k_decode_set_stream): 2 launches a layer,
 * attention and one persistent launch for o, gate|up, down and the next
 * q|k|v (hone-k-decode-stream.cu).
 *
 * Prefill: cuBLASLt GEMMs (bf16 or f16 operands, an algorithm per shape
 * cached; f32 out with the residual added by beta = 1, or 16-bit out for
 * gate|up), quantized weights dequantized to f16 one matrix at a time, and
 * the causal flash-attention kernel writing the o GEMM's 16-bit input. Chunks
 * of at most hone_k_w4_gemm_max_for (w) tokens (192 for the 4-bit types, 128 for
 * Q8_0 and Q6_K by default) run their Q4Z, Q4_0, Q4_1, Q8_0, Q4_K and Q6_K matrices
 * (and q|k|v parts of them) through the fused GEMM instead (hone-k-gemm-w4.cu): no
 * dequantization pass. HONE_PREFILL_AHEAD=1 (opt-in) runs that pass one matrix ahead
 * on a side stream, into two buffers in turn.
 */
#include "hone-k-common.cuh"
#include "hone-k-gemv.cuh"
#include "hone-k-stream.h"
#include <cublas_v2.h>
#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>

extern "C" int hone_k_swiglu16 (const float *gu, int n_tok, int ffn, void *y16, int is_f16, cudaStream_t stream);
extern "C" int hone_k_add_bias (float *y, int n_tok, int n, const float *b, cudaStream_t stream);
extern "C" int hone_k_sample_feed (const float *logits, int n_tok, int vocab, float temperature, uint64_t seed,
                                   const int32_t *step, int32_t *out, int32_t *feed, void *scratch, cudaStream_t stream);
extern "C" int hone_k_advance (int32_t *pos, int n, int32_t *step, cudaStream_t stream);

static bool
is_f (const HoneKMatrix *w)
{
  return w->type == HONE_K_BF16 || w->type == HONE_K_F16;
}

/* Weights whose GEMV takes the f32 activation with the RMSNorm fused: 16-bit and W4A16 (Q4Z). */
static bool
takes_f32 (const HoneKMatrix *w)
{
  return is_f (w) || w->type == HONE_K_Q4Z;
}

static int
max_dim (const HoneKConfig *c)
{
  int m = c->hidden;
  if (c->ffn > m) m = c->ffn;
  if (c->n_heads * c->head_dim > m) m = c->n_heads * c->head_dim;
  return m;
}

/* Elements of the largest quantized matrix the prefill dequantizes: the layers' and,
 * with @head, the lm_head's */
static size_t
dequant_scratch_elems (const HoneKModel *m, bool head)
{
  size_t best = 0;
  for (int l = 0; l < m->cfg.n_layers; l++)
    {
      const HoneKMatrix *ws[4] = { &m->layers[l].wqkv, &m->layers[l].wo, &m->layers[l].wgu, &m->layers[l].wdown };
      for (int i = 0; i < 4; i++)
        if (!is_f (ws[i]) && (size_t) ws[i]->rows * ws[i]->cols > best)
          best = (size_t) ws[i]->rows * ws[i]->cols;
    }
  if (head && !is_f (&m->lm_head) && (size_t) m->lm_head.rows * m->lm_head.cols > best)
    best = (size_t) m->lm_head.rows * m->lm_head.cols;
  return best;
}

/* ---- prefill GEMMs (cuBLASLt) ------------------------------------------------
 * One cuBLASLt matmul descriptor, layouts and algorithm per shape, made once
 * and cached in the state: Y[n][rows] = X16[n][cols]·Wᵀ, with Y f32
 * (optionally accumulated: beta = 1 adds the residual in place) or bf16/f16
 * when the next op reads 16-bit (gate|up → SwiGLU): half the bytes written
 * and read back.
 *
 * The algorithm is the heuristic's first. Optional tuning (HONE_GEMM_TUNE=1):
 * the first GEMM of a shape with n >= 256 times the heuristic's first four
 * algorithms and cublasGemmEx on the real operands (2 runs each after one
 * warm-up; outputs that accumulate go to a scratch buffer) and keeps the
 * fastest; the winner is remembered per power-of-two bucket of n and reused
 * for other n in the bucket when cublasLtMatmulAlgoCheck accepts it; never
 * while the stream is being captured. It is off by default because on the
 * H200 it measured no gain (prefill session 2, call 2: tuned GEMMs 43.7 ms a
 * prefill against 43.4 with the first choice; the candidates differ by less
 * than the power-limited clock's drift) and it cost the first prefill 230 ms
 * (loading each candidate's kernels). Other switches (A/B runs):
 * HONE_GEMM=gemmex (session 1: cublasGemmEx everywhere), HONE_GEMM_ALGO=i
 * (the heuristic's i-th algorithm). */
#define LT_PLANS 48           /* the warm-up's sizes (n = 9, 16 … 2048: 4 GEMMs each) all stay */
#define LT_CANDIDATES 4

struct LtPlan {
  int m, n, k, ab, d, acc, align, pick;
  int tuned;                  /* 0 not yet, 1 done (or not to be done) */
  int gemmex;                 /* cublasGemmEx won the timing */
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatmulAlgo_t algo;
  cublasLtMatmulAlgo_t cand[LT_CANDIDATES];
  int n_cand;
};

struct LtWinner {             /* a timing's result, by shape and bucket of n */
  int m, k, ab, d, acc, align, bucket, gemmex, valid;
  cublasLtMatmulAlgo_t algo;
};

struct GemmCtx {
  cublasHandle_t blas;
  cublasLtHandle_t lt;
  void *ws;
  size_t ws_bytes;
  LtPlan plans[LT_PLANS];
  int n_plans, next;
  LtWinner winners[LT_PLANS];
  int n_winners, next_winner;
  /* HONE_PREFILL_AHEAD (measurement knob, off by default): the dequantization of a
   * prefill's matrices runs on a side stream one matrix ahead of the GEMMs, into st->w16
   * and w16b in turn; deq[i] = buffer i written, use[i] = its GEMM done */
  int ahead;
  cudaStream_t side;
  cudaEvent_t deq[2], use[2];
  void *w16b;
};

/* HONE_PREFILL_AHEAD: 0 off (default), 1 side stream at the main one's priority, 2 at a higher one */
static int
prefill_ahead_mode (void)
{
  const char *e = getenv ("HONE_PREFILL_AHEAD");
  return e ? atoi (e) : 0;
}

static bool
gemm_use_gemmex (void)
{
  const char *e = getenv ("HONE_GEMM");
  return e && !strcmp (e, "gemmex");
}

/* The heuristic's pick-th algorithm (0 by default), or -1: tune. */
static int
gemm_pick (void)
{
  const char *e = getenv ("HONE_GEMM_ALGO");
  if (e && *e)
    {
      const int i = atoi (e);
      return i < 0 ? 0 : i > 7 ? 7 : i;
    }
  const char *t = getenv ("HONE_GEMM_TUNE");
  return t && t[0] == '1' ? -1 : 0;
}

static void
lt_plan_clear (LtPlan *p)
{
  if (p->op) cublasLtMatmulDescDestroy (p->op);
  if (p->a) cublasLtMatrixLayoutDestroy (p->a);
  if (p->b) cublasLtMatrixLayoutDestroy (p->b);
  if (p->c) cublasLtMatrixLayoutDestroy (p->c);
  memset (p, 0, sizeof *p);
}

/* Largest power of two (≤ 256) dividing every address: what the algorithm may assume. */
static int
ptr_align (const void *a, const void *b, const void *c)
{
  const uintptr_t u = (uintptr_t) a | (uintptr_t) b | (uintptr_t) c | 256;
  return (int) (u & (~u + 1));
}

static int
n_bucket (int n)
{
  int b = 0;
  while ((1 << b) < n)
    b++;
  return b;
}

/* The cached plan of this GEMM under the current pick, or NULL. */
static LtPlan *
lt_find (GemmCtx *g, int m, int n, int k, cudaDataType_t ab, cudaDataType_t d, int acc, int align)
{
  const int pick = gemm_pick ();
  for (int i = 0; i < g->n_plans; i++)
    {
      LtPlan *p = &g->plans[i];
      if (p->m == m && p->n == n && p->k == k && p->ab == (int) ab && p->d == (int) d && p->acc == acc
          && p->align == align && p->pick == pick)
        return p;
    }
  return NULL;
}

static LtPlan *
lt_plan (GemmCtx *g, int m, int n, int k, cudaDataType_t ab, cudaDataType_t d, int acc, int align)
{
  LtPlan *p = lt_find (g, m, n, k, ab, d, acc, align);
  if (p)
    return p;
  const int pick = gemm_pick ();
  if (g->n_plans < LT_PLANS)
    p = &g->plans[g->n_plans++];
  else
    {
      p = &g->plans[g->next];      /* prefill chunks of many lengths: reuse slots round robin */
      g->next = (g->next + 1) % LT_PLANS;
      lt_plan_clear (p);
    }
  p->m = m; p->n = n; p->k = k; p->ab = (int) ab; p->d = (int) d; p->acc = acc; p->align = align; p->pick = pick;
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  cublasLtMatmulPreference_t pref = NULL;
  cublasLtMatmulHeuristicResult_t res[8];
  int nres = 0;
  const uint64_t ws = g->ws_bytes;
  const uint32_t al = (uint32_t) align;
  bool ok = cublasLtMatmulDescCreate (&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS
            && cublasLtMatmulDescSetAttribute (p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) == CUBLAS_STATUS_SUCCESS
            && cublasLtMatmulDescSetAttribute (p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) == CUBLAS_STATUS_SUCCESS
            /* W is [rows][cols] row-major = cols×rows column-major, used transposed */
            && cublasLtMatrixLayoutCreate (&p->a, ab, k, m, k) == CUBLAS_STATUS_SUCCESS
            && cublasLtMatrixLayoutCreate (&p->b, ab, k, n, k) == CUBLAS_STATUS_SUCCESS
            && cublasLtMatrixLayoutCreate (&p->c, d, m, n, m) == CUBLAS_STATUS_SUCCESS
            && cublasLtMatmulPreferenceCreate (&pref) == CUBLAS_STATUS_SUCCESS
            && cublasLtMatmulPreferenceSetAttribute (pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) == CUBLAS_STATUS_SUCCESS
            && cublasLtMatmulPreferenceSetAttribute (pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al) == CUBLAS_STATUS_SUCCESS
            && cublasLtMatmulPreferenceSetAttribute (pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al) == CUBLAS_STATUS_SUCCESS
            && cublasLtMatmulPreferenceSetAttribute (pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al) == CUBLAS_STATUS_SUCCESS
            && cublasLtMatmulPreferenceSetAttribute (pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al) == CUBLAS_STATUS_SUCCESS
            && cublasLtMatmulAlgoGetHeuristic (g->lt, p->op, p->a, p->b, p->c, p->c, pref, 8, res, &nres) == CUBLAS_STATUS_SUCCESS
            && nres > 0;
  if (pref)
    cublasLtMatmulPreferenceDestroy (pref);
  if (!ok)
    {
      lt_plan_clear (p);     /* an empty slot matches nothing (m = 0) */
      return NULL;
    }
  p->algo = res[pick > 0 ? (pick < nres ? pick : nres - 1) : 0].algo;
  p->n_cand = nres < LT_CANDIDATES ? nres : LT_CANDIDATES;
  for (int i = 0; i < p->n_cand; i++)
    p->cand[i] = res[i].algo;
  p->tuned = pick >= 0;
  return p;
}

/* One GEMM with plan p: algo (NULL: cublasGemmEx) into y. */
static cublasStatus_t
gemm_run (GemmCtx *g, const LtPlan *p, const cublasLtMatmulAlgo_t *algo, const void *wp, const void *x16, void *y,
          cudaStream_t s)
{
  const float alpha = 1.f, beta = p->acc ? 1.f : 0.f;
  if (algo)
    return cublasLtMatmul (g->lt, p->op, &alpha, wp, p->a, x16, p->b, &beta, y, p->c, y, p->c, algo, g->ws,
                           g->ws_bytes, s);
  cublasSetStream (g->blas, s);
  return cublasGemmEx (g->blas, CUBLAS_OP_T, CUBLAS_OP_N, p->m, p->n, p->k, &alpha, wp, (cudaDataType_t) p->ab, p->k,
                       x16, (cudaDataType_t) p->ab, p->k, &beta, y, (cudaDataType_t) p->d, p->m, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT);
}

/* Choose p's algorithm: a remembered winner of its bucket, else time the candidates. */
static void
gemm_tune (GemmCtx *g, LtPlan *p, const void *wp, const void *x16, void *y, void *scratch, size_t scratch_bytes,
           cudaStream_t s)
{
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing (s, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone)
    return;                       /* keep the heuristic's choice; try again outside a capture */
  p->tuned = 1;
  const size_t out_bytes = (size_t) p->m * p->n * (p->d == (int) CUDA_R_32F ? 4 : 2);
  void *out = p->acc ? scratch : y;     /* never accumulate into the real output twice */
  if (p->n < 256 || (p->acc && (!scratch || scratch_bytes < out_bytes)))
    return;
  const int bucket = n_bucket (p->n);
  for (int i = 0; i < g->n_winners; i++)
    {
      LtWinner *w = &g->winners[i];
      if (w->valid && w->m == p->m && w->k == p->k && w->ab == p->ab && w->d == p->d && w->acc == p->acc
          && w->align == p->align && w->bucket == bucket)
        {
          cublasLtMatmulHeuristicResult_t r;
          if (w->gemmex)
            p->gemmex = 1;
          else if (cublasLtMatmulAlgoCheck (g->lt, p->op, p->a, p->b, p->c, p->c, &w->algo, &r) == CUBLAS_STATUS_SUCCESS
                   && r.workspaceSize <= g->ws_bytes)
            p->algo = w->algo;
          return;
        }
    }
  cudaEvent_t e0, e1;
  if (cudaEventCreate (&e0) != cudaSuccess)
    return;
  if (cudaEventCreate (&e1) != cudaSuccess)
    {
      cudaEventDestroy (e0);
      return;
    }
  float best = INFINITY;
  int win = -2;
  for (int c = -1; c < p->n_cand; c++)      /* -1: cublasGemmEx */
    {
      const cublasLtMatmulAlgo_t *a = c < 0 ? NULL : &p->cand[c];
      bool ok = gemm_run (g, p, a, wp, x16, out, s) == CUBLAS_STATUS_SUCCESS
                && cudaEventRecord (e0, s) == cudaSuccess;
      for (int r = 0; ok && r < 2; r++)
        ok = gemm_run (g, p, a, wp, x16, out, s) == CUBLAS_STATUS_SUCCESS;
      float ms = INFINITY;
      if (ok && cudaEventRecord (e1, s) == cudaSuccess && cudaEventSynchronize (e1) == cudaSuccess
          && cudaEventElapsedTime (&ms, e0, e1) == cudaSuccess && ms < best)
        {
          best = ms;
          win = c;
        }
    }
  cudaEventDestroy (e0);
  cudaEventDestroy (e1);
  (void) cudaGetLastError ();
  if (win == -2)
    return;
  p->gemmex = win < 0;
  if (win >= 0)
    p->algo = p->cand[win];
  if (getenv ("HONE_GEMM_VERBOSE"))
    fprintf (stderr, "hone gemm tune %dx%dx%d acc=%d out=%s: %s (%.3f ms)\n", p->m, p->n, p->k, p->acc,
             p->d == (int) CUDA_R_32F ? "f32" : "16-bit", win < 0 ? "cublasGemmEx" : win == 0 ? "heuristic 0"
             : win == 1 ? "heuristic 1" : win == 2 ? "heuristic 2" : "heuristic 3", best / 2);
  LtWinner *w = g->n_winners < LT_PLANS ? &g->winners[g->n_winners++] : &g->winners[g->next_winner];
  if (w == &g->winners[g->next_winner])
    g->next_winner = (g->next_winner + 1) % LT_PLANS;
  w->m = p->m; w->k = p->k; w->ab = p->ab; w->d = p->d; w->acc = p->acc; w->align = p->align; w->bucket = bucket;
  w->gemmex = p->gemmex;
  w->algo = p->algo;
  w->valid = 1;
}

/* The fused GEMM takes a chunk of @n tokens of @w */
static bool
fused_gemm (const HoneKMatrix *w, int n)
{
  return n <= hone_k_w4_gemm_max_for (w) && hone_k_w4_gemm_supports (w);
}

/* Y (+)= X16·Wᵀ, W dequantized first when quantized; Y f32 or (y16) W's 16-bit
 * type. scratch: room the tuning may write when Y accumulates (or NULL). */
static int
gemm (HoneKState *st, const HoneKMatrix *w, int n, const void *x16, void *y, int y16, int accumulate, cudaStream_t s,
      void *scratch = NULL, size_t scratch_bytes = 0, const void *w16_ready = NULL)
{
  GemmCtx *g = (GemmCtx *) st->cublas;
  const void *wp = w->q;
  const cudaDataType_t t = w->type == HONE_K_BF16 ? CUDA_R_16BF : CUDA_R_16F;
  if (fused_gemm (w, n) && x16 != st->w16 && y != st->w16)
    /* short chunks of Q4Z, Q4_0, Q4_1, Q8_0, Q4_K, Q6_K and parts of them: the fused GEMM
     * (hone-k-gemm-w4.cu), no dequantization pass;
     * st->w16 (room for this matrix in 16 bits) takes its split partials */
    return hone_k_w4_gemm (w, n, x16, y, y16, accumulate, st->w16, (size_t) w->rows * w->cols * 2, s);
  if (w16_ready)
    wp = w16_ready;   /* dequantized already (prefill_ahead) */
  else if (!is_f (w))
    {
      /* a q|k|v of parts in different types dequantizes part by part at their row offsets */
      HONE_K_CHECK ((cudaError_t) (w->type == HONE_K_PARTS ? hone_k_parts_dequant (w, st->w16, 1, s)
                                                           : hone_k_dequant (w, st->w16, 1, s)));
      wp = st->w16;
    }
  const cudaDataType_t dt = y16 ? t : CUDA_R_32F;
  LtPlan *p = gemm_use_gemmex () ? NULL
              : lt_plan (g, w->rows, n, w->cols, t, dt, accumulate, ptr_align (wp, x16, y));
  if (p && !p->tuned)
    gemm_tune (g, p, wp, x16, y, scratch, scratch_bytes, s);
  if (p)
    return gemm_run (g, p, p->gemmex ? NULL : &p->algo, wp, x16, y, s) == CUBLAS_STATUS_SUCCESS
           ? 0 : (int) cudaErrorUnknown;
  const float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
  cublasSetStream (g->blas, s);
  const cublasStatus_t r = cublasGemmEx (g->blas, CUBLAS_OP_T, CUBLAS_OP_N, w->rows, n, w->cols, &alpha, wp, t,
                                         w->cols, x16, t, w->cols, &beta, y, dt, w->rows, CUBLAS_COMPUTE_32F,
                                         CUBLAS_GEMM_DEFAULT);
  return r == CUBLAS_STATUS_SUCCESS ? 0 : (int) cudaErrorUnknown;
}

/* Bytes of st->gu, the tuning's scratch (free whenever a GEMM accumulates). */
static size_t
gu_bytes (const HoneKState *st)
{
  return (size_t) ((const char *) st->logits - (const char *) st->gu);
}

extern "C" int
hone_k_gemm (HoneKState *st, const HoneKMatrix *w, int n, const void *x16, void *y, int y_type, int accumulate,
             cudaStream_t stream)
{
  const int wt = w->type == HONE_K_BF16 ? HONE_K_BF16 : HONE_K_F16;
  if (!st->cublas || n < 1 || (y_type != HONE_K_F32 && y_type != wt) || (!is_f (w) && !st->w16))
    return (int) cudaErrorInvalidValue;
  const bool gu_free = y != (void *) st->gu && x16 != (const void *) st->gu;
  return gemm (st, w, n, x16, y, y_type != HONE_K_F32, accumulate, stream, gu_free ? st->gu : NULL,
               gu_free ? gu_bytes (st) : 0);
}

/* y[i] = silu(gu[2i])·gu[2i+1] with gu the gate|up GEMM's 16-bit output
 * (rows interleaved, so pairs are adjacent), y in the same 16-bit type. */
template <typename T>
__global__ void __launch_bounds__ (256)
swiglu16in_kernel (const T *gu, size_t total4, T *y)
{
  const size_t i = (size_t) blockIdx.x * 256 + threadIdx.x;
  pdl_trigger ();
  pdl_wait ();
  if (i >= total4)
    return;
  const int4 v = ((const int4 *) gu)[i];     /* 4 (gate, up) pairs */
  const T *e = (const T *) &v;
  T r[4];
#pragma unroll
  for (int j = 0; j < 4; j++)
    {
      const float gt = (float) e[2 * j], up = (float) e[2 * j + 1];
      r[j] = (T) (silu (gt) * up);
    }
  ((uint2 *) y)[i] = *(const uint2 *) r;
}

static int
swiglu16in (const void *gu, int n_tok, int ffn, void *y, int is_f16, cudaStream_t s)
{
  const size_t total4 = (size_t) n_tok * ffn / 4;    /* ffn % 4 == 0 checked by the caller */
  const dim3 grid ((unsigned) ((total4 + 255) / 256)), block (256);
  if (is_f16)
    return hone_k_launch (swiglu16in_kernel<__half>, grid, block, 0, s, (const __half *) gu, total4, (__half *) y);
  return hone_k_launch (swiglu16in_kernel<__nv_bfloat16>, grid, block, 0, s, (const __nv_bfloat16 *) gu, total4,
                        (__nv_bfloat16 *) y);
}

#define ALIGN(x) (((x) + 255) & ~(size_t) 255)
#define ALIGN16(x) (((x) + 15) & ~(size_t) 15)

struct Layout {
  size_t small, h, xn, qkv, attn, gu, logits, xq, xds, xh, xhd, x16, w16, w16b, attn_s, sync, ws, total;
};

static Layout
layout (const HoneKModel *m, int max_tok, int logits_rows)
{
  const HoneKConfig *c = &m->cfg;
  Layout L;
  const size_t md = max_dim (c), qkvw = (size_t) (c->n_heads + 2 * c->n_kv_heads) * c->head_dim;
  L.small = ALIGN (ALIGN16 (sizeof (int32_t) * (3 * (size_t) max_tok + 8))
                   + std::max (HONE_K_SAMPLE_SCRATCH_BYTES (max_tok), HONE_K_SAMPLE_CHAIN_SCRATCH_BYTES));
  L.h = ALIGN ((size_t) max_tok * c->hidden * 4);
  L.xn = ALIGN ((size_t) max_tok * md * 4);
  L.qkv = ALIGN ((size_t) max_tok * qkvw * 4);
  L.attn = ALIGN ((size_t) max_tok * c->n_heads * c->head_dim * 4);
  L.gu = ALIGN ((size_t) max_tok * 2 * c->ffn * 4);
  L.logits = ALIGN ((size_t) logits_rows * c->vocab * 4);
  L.xq = ALIGN ((size_t) max_tok * md);
  L.xds = ALIGN ((size_t) max_tok * (md / 32 + 1) * 8);
  L.xh = ALIGN (HONE_K_H16_ROW (md) * 2);   /* one token's packed W4A16 input (HoneKActH16) */
  L.xhd = ALIGN (HONE_K_H16_DS (md) * 4);   /* its (d, Σv) a block of 32 */
  L.x16 = ALIGN ((size_t) max_tok * md * 2);
  L.w16 = max_tok > HONE_K_MAX_DECODE ? ALIGN (dequant_scratch_elems (m, true) * 2) : 0;
  /* HONE_PREFILL_AHEAD's second buffer takes layer matrices only; allocated apart, counted here */
  L.w16b = L.w16 && prefill_ahead_mode () ? ALIGN (dequant_scratch_elems (m, false) * 2) : 0;
  L.attn_s = ALIGN (hone_k_attn_scratch_bytes (c->n_heads, c->n_kv_heads, c->head_dim, max_tok));
  /* streamed decode: a counter set a launch site (layer 0's q|k|v, then one after each attention) */
  L.sync = ALIGN ((size_t) (c->n_layers + 1) * HONE_K_STREAM_SYNC * sizeof (unsigned));
  L.ws = max_tok > HONE_K_MAX_DECODE ? ((size_t) 32 << 20) : 0;
  L.total = L.small + L.h + L.xn + L.qkv + L.attn + L.gu + L.logits + L.xq + L.xds + L.xh + L.xhd + L.x16 + L.w16 + L.attn_s + L.sync
            + L.ws;
  return L;
}

extern "C" size_t
hone_k_state_bytes (const HoneKModel *m, int max_tok, int logits_rows)
{
  const Layout L = layout (m, max_tok, logits_rows);
  return L.total + L.w16b;
}

/* The side stream, its events and the second dequantization buffer of HONE_PREFILL_AHEAD */
static cudaError_t
ahead_init (GemmCtx *g, size_t w16b_bytes, int mode)
{
  int lo = 0, hi = 0;
  cudaDeviceGetStreamPriorityRange (&lo, &hi);
  cudaError_t e = cudaMalloc (&g->w16b, w16b_bytes);
  if (e == cudaSuccess)
    e = cudaStreamCreateWithPriority (&g->side, cudaStreamNonBlocking, mode == 2 ? hi : lo);
  for (int i = 0; i < 2 && e == cudaSuccess; i++)
    {
      e = cudaEventCreateWithFlags (&g->deq[i], cudaEventDisableTiming);
      if (e == cudaSuccess)
        e = cudaEventCreateWithFlags (&g->use[i], cudaEventDisableTiming);
    }
  if (e == cudaSuccess)
    g->ahead = mode;
  return e;
}

static void
ahead_free (GemmCtx *g)
{
  for (int i = 0; i < 2; i++)
    {
      if (g->deq[i]) cudaEventDestroy (g->deq[i]);
      if (g->use[i]) cudaEventDestroy (g->use[i]);
    }
  if (g->side)
    cudaStreamDestroy (g->side);
  if (g->w16b)
    cudaFree (g->w16b);
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
  if (e == cudaSuccess)   /* attention's split counters and the streamed launches' counters start at 0 */
    e = cudaMemset (p + L.total - L.ws - L.sync - L.attn_s, 0, L.attn_s + L.sync);
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
  st->sample_scratch = (char *) sm + ALIGN16 (sizeof (int32_t) * (3 * (size_t) max_tok + 8));   /* zeroed with L.small */
  p += L.small;
  st->h = (float *) p; p += L.h;
  st->xn = (float *) p; p += L.xn;
  st->qkv = (float *) p; p += L.qkv;
  st->attn = (float *) p; p += L.attn;
  st->gu = (float *) p; p += L.gu;   /* logits right after: gu_bytes() */
  st->logits = (float *) p; p += L.logits;
  st->xq.q = (int8_t *) p; p += L.xq;
  st->xq.ds = (float2 *) p; p += L.xds;
  st->xh.h = (uint16_t *) p; p += L.xh;
  st->xh.d = (float *) p; p += L.xhd;
  st->x16 = p; p += L.x16;
  st->w16 = L.w16 ? (void *) p : NULL; p += L.w16;
  st->attn_scratch = p; p += L.attn_s;
  st->stream_sync = (unsigned *) p; p += L.sync;
  st->cublas_ws = L.ws ? (void *) p : NULL;
  if (L.ws)
    {
      /* st->cublas holds the GEMM context: a cuBLASLt handle with its plan
       * cache, and a cuBLAS handle for the cublasGemmEx fallback */
      GemmCtx *g = (GemmCtx *) calloc (1, sizeof *g);
      if (!g || cublasCreate (&g->blas) != CUBLAS_STATUS_SUCCESS)
        {
          free (g);
          cudaFree (st->tokens);
          memset (st, 0, sizeof *st);
          return (int) cudaErrorUnknown;
        }
      if (cublasLtCreate (&g->lt) != CUBLAS_STATUS_SUCCESS)
        {
          cublasDestroy (g->blas);
          free (g);
          cudaFree (st->tokens);
          memset (st, 0, sizeof *st);
          return (int) cudaErrorUnknown;
        }
      g->ws = st->cublas_ws;
      g->ws_bytes = L.ws;
      cublasSetWorkspace (g->blas, st->cublas_ws, L.ws);
      cublasSetMathMode (g->blas, CUBLAS_DEFAULT_MATH);
      st->cublas = g;
      if (L.w16b)
        {
          const cudaError_t e2 = ahead_init (g, L.w16b, prefill_ahead_mode ());
          if (e2 != cudaSuccess)
            {
              hone_k_state_free (st);
              return (int) e2;
            }
          st->bytes += L.w16b;
        }
    }
  return 0;
}

extern "C" void
hone_k_state_free (HoneKState *st)
{
  if (st->cublas)
    {
      GemmCtx *g = (GemmCtx *) st->cublas;
      for (int i = 0; i < g->n_plans; i++)
        lt_plan_clear (&g->plans[i]);
      cublasLtDestroy (g->lt);
      cublasDestroy (g->blas);
      ahead_free (g);
      free (g);
    }
  if (st->tokens)
    cudaFree (st->tokens);
  memset (st, 0, sizeof *st);
}

/* Decode tuning: MB of the next matrix each GEMV's last wave prefetches into
 * L2, MB the attention kernel prefetches (the o matrix, then gate|up), how
 * (HoneKPrefetch.how) — off by default: every form measured slower
 * (tests/bench/RESULTS-cuda.md, "Decode, session 2"), but for the GEMVs of a
 * W4A16 step at the tiny tier (gemv_pf_mb) — and fuse_quant: 1 = attention
 * writes the quantized o projection's int8 input itself (one launch a layer
 * fewer, same bits). -1: not read from the environment yet; PF_AUTO:
 * HONE_DECODE_PF unset, gemv_pf_mb decides. */
enum { PF_AUTO = -2 };
static int pf_gemv_mb = -1, pf_attn_mb = -1, fuse_quant = -1, pf_how = -1;

static int
env_int (const char *name, int dflt)
{
  const char *v = getenv (name);
  return v && *v ? atoi (v) : dflt;
}

extern "C" void
hone_k_decode_tune (int pf_gemv, int pf_attn, int fuse, int how)
{
  if (pf_gemv >= 0) pf_gemv_mb = pf_gemv;
  if (pf_attn >= 0) pf_attn_mb = pf_attn;
  if (fuse >= 0) fuse_quant = fuse;
  if (how >= 0) pf_how = how;
}

static void
decode_tune_read (void)
{
  if (pf_gemv_mb == -1) pf_gemv_mb = env_int ("HONE_DECODE_PF", PF_AUTO);
  if (pf_attn_mb < 0) pf_attn_mb = env_int ("HONE_DECODE_PF_ATTN", 0);
  if (fuse_quant < 0) fuse_quant = env_int ("HONE_DECODE_FUSE", 1);
  if (pf_how < 0) pf_how = env_int ("HONE_DECODE_PF_HOW", 1);
}

/* Whether a step of n_tok tokens is a one-token graph bounded to the tiny
 * attention kernel's tier (HoneKState.ctx_bound). */
static bool
tiny_tier_step (const HoneKState *st, int n_tok)
{
  return n_tok == 1 && st->ctx_bound > 0 && st->ctx_bound <= hone_k_attn_tiny_ctx ();
}

/* MB of the next matrix a decode GEMV's last wave prefetches into L2. Unless
 * HONE_DECODE_PF says: 4 for a one-token W4A16 (AWQ) step bounded to the tiny
 * attention tier, 0 otherwise. Its GEMVs become resident only once the pack
 * before them has its loads in (the packs trigger late), so their first wave
 * reads DRAM after the wait; a few MB of the next matrix pulled into L2 during
 * the tail and the pack likely fill part of that gap (not traced at 4 MB; at
 * 12 MB the prefetch competes with the GEMVs it runs beside). Same binary,
 * H100, 8B AWQ g128, decode tok/s at -p 64 (RESULTS-cuda.md, "Session 47"):
 * 0 MB 456.7, 2 MB 456.8, 4 MB 462.5 (+1.3 %), 6 MB 459.2, 8 MB 447.8; at the
 * 2k tier (-p 1000) 4 MB -0.2 %, unbounded at 4k -2.1 %; the Q4_0 step at the
 * tiny tier -1.0 %. As built (session 48, another H100, against
 * HONE_DECODE_PF=0): AWQ -p 64 461.8-462.8 vs 456.2-457.0 (+1.2 %), -p 1000
 * +0.1 %, the Q4_0 step at -p 64 unchanged (it keeps 0). */
static int
gemv_pf_mb (const HoneKModel *m, const HoneKState *st, int n)
{
  if (pf_gemv_mb != PF_AUTO)
    return pf_gemv_mb;
  return tiny_tier_step (st, n) && m->cfg.n_layers > 0 && m->layers[0].wgu.type == HONE_K_Q4Z ? 4 : 0;
}

/* The types whose GEMV takes HoneKActQ8 input (attention can write it for o). */
static bool
is_q8q4 (const HoneKMatrix *w)
{
  return w->type == HONE_K_Q8_0 || w->type == HONE_K_Q4_0 || w->type == HONE_K_Q4_1 || w->type == HONE_K_Q4_K
         || w->type == HONE_K_Q6_K;
}

/* The first `mb` MB of a and then of b (either may be NULL). */
static HoneKPrefetch
prefetch_plan (const HoneKMatrix *a, const HoneKMatrix *b, int mb)
{
  HoneKPrefetch pf;
  memset (&pf, 0, sizeof pf);
  size_t left = (size_t) (mb > 0 ? mb : 0) << 20;
  if (a && left)
    left -= std::min (left, hone_k_prefetch_add_matrix (&pf, a, left));
  if (b && left > (1u << 20))
    hone_k_prefetch_add_matrix (&pf, b, left);
  pf.how = pf_how;
  return pf;
}

/* A GEMV op of w over n_tok tokens: y (+ res for ADD) with epilogue epi, every other field unset. */
static HoneKGemvOp
gemv_op (const HoneKMatrix *w, int n_tok, const float *res, float *y, int epi)
{
  HoneKGemvOp op;
  memset (&op, 0, sizeof op);
  op.w = w;
  op.n_tok = n_tok;
  op.res = res;
  op.y = y;
  op.epilogue = epi;
  return op;
}

/* y[n_tok][rows] (+)= W·norm(x): the norm fused for BF16/F16 and for staged
 * quantized GEMVs, else a norm+quantize launch. */
static int
gemv_normed (HoneKState *st, const HoneKMatrix *w, const float *x, const float *g, float eps, int n_tok,
             const float *bias, float *y, int epi, const HoneKGemvOp *rope, cudaStream_t s,
             const HoneKPrefetch *pf = NULL)
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
  op.x = x;
  op.norm_g = g;
  op.xh = &st->xh;
  if (!takes_f32 (w) && !hone_k_gemv_staged_takes (&op))
    {
      op.x = NULL;
      op.norm_g = NULL;
      HONE_K_CHECK ((cudaError_t) hone_k_rmsnorm (x, g, n_tok, w->cols, eps, NULL, &st->xq, NULL, 0, s));
      op.xq = &st->xq;
    }
  return hone_k_gemv_pf (&op, pf, s);
}

/* y (+)= W·x for an unnormalized input (attention output, SwiGLU output).
 * x_ready: the input is already quantized in st->xq (attention wrote it);
 * else a staged quantized GEMV quantizes the f32 input itself. */
static int
gemv_plain (HoneKState *st, const HoneKMatrix *w, const float *x, int n_tok, const float *res, float *y,
            int epi, cudaStream_t s, const HoneKPrefetch *pf = NULL, bool x_ready = false)
{
  HoneKGemvOp op = gemv_op (w, n_tok, res, y, epi);
  op.xh = &st->xh;
  if (takes_f32 (w))
    {
      op.x = x;
      op.xh_ready = x_ready && w->type == HONE_K_Q4Z && n_tok == 1;   /* attention wrote st->xh */
    }
  else if (x_ready)
    op.xq = &st->xq;
  else
    {
      op.x = x;
      if (!hone_k_gemv_staged_takes (&op))
        {
          op.x = NULL;
          HONE_K_CHECK ((cudaError_t) hone_k_quantize (x, n_tok, w->cols, &st->xq, NULL, 0, s));
          op.xq = &st->xq;
        }
    }
  return hone_k_gemv_pf (&op, pf, s);
}

/* Quantization in the GEMV epilogues (HoneKEpiQ, one token, Q8_0/Q4_0/Q4_1):
 * the residual GEMVs (o, down) write the int8 of h·g_next and Σh² per 32,
 * gate|up's SwiGLU writes down's int8 input, the consumers (qkv, gate|up,
 * lm_head) scale their row sums: no RMSNorm/quantize launch (5 launches a
 * layer). A mask of the producers used: EPIQ_O, EPIQ_GU, EPIQ_DOWN (0: off,
 * the default: every variant measured 2-30 % slower than the launches it
 * removes, tests/bench/RESULTS-cuda.md "Decode, session 4"); -1: not read
 * yet (HONE_DECODE_EPIQ, hone_k_decode_set_epiq: 1 = all). */
enum { EPIQ_O = 2, EPIQ_GU = 4, EPIQ_DOWN = 8, EPIQ_ALL = 14 };
static int epiq_mode = -1;

extern "C" void
hone_k_decode_set_epiq (int on)
{
  epiq_mode = on < 0 ? -1 : (on == 1 ? (int) EPIQ_ALL : on & EPIQ_ALL);
}

/* The second int8 vector of an EpiQ step (the first is st->xq, which
 * attention writes for o) and the Σh² partials, in st->x16: the 16-bit
 * activations of prefill GEMMs, unused by decode steps. */
struct EpiqBufs {
  HoneKActQ8 x1;
  float *ssq;
};

static bool
epiq_bufs (const HoneKModel *m, HoneKState *st, EpiqBufs *b)
{
  const HoneKConfig *c = &m->cfg;
  const size_t md = (size_t) max_dim (c);
  const size_t qb = ALIGN (md), dsb = ALIGN (md / 32 * 8), sb = ALIGN ((size_t) c->hidden / 32 * 4);
  if (!st->x16 || qb + dsb + sb > (size_t) st->max_tok * md * 2)
    return false;
  b->x1.q = (int8_t *) st->x16;
  b->x1.ds = (float2 *) ((char *) st->x16 + qb);
  b->ssq = (float *) ((char *) st->x16 + qb + dsb);
  return true;
}

/* Whether w, as the one-token consumer of a normalized input, takes EpiQ's int8 input. */
static bool
epiq_consumer (const HoneKMatrix *w, int epi)
{
  const HoneKGemvOp op = gemv_op (w, 1, NULL, NULL, epi);
  return hone_k_gemv_epiq_takes (&op, false);
}

/* The second half of a decode layer: o (+ residual), gate|up (+ SwiGLU),
 * down (+ residual). eb (one token, EpiQ on): where the types allow, o
 * writes the int8 of h·ffn_norm, gate|up's SwiGLU down's int8 input, down
 * the int8 of h·g for the next qkv / lm_head (*ready, else NULL); each
 * producer writes the int8 vector its own input is not (st->xq or eb->x1). */
static int
decode_step_ffn (const HoneKModel *m, HoneKState *st, int l, int n, const EpiqBufs *eb, int mask, bool attn_q,
                 const HoneKActQ8 **ready, const HoneKPrefetch *pf_o, const HoneKPrefetch *pf_gu,
                 const HoneKPrefetch *pf_down, cudaStream_t s)
{
  const HoneKConfig *c = &m->cfg;
  const HoneKLayer *L = &m->layers[l];
  *ready = NULL;
  if (n != 1)
    eb = NULL;
  HoneKGemvOp op = gemv_op (&L->wo, 1, st->h, st->h, HONE_K_EPI_ADD);
  op.xq = &st->xq;
  const HoneKActQ8 *gu_in = NULL;
  if (eb && (mask & EPIQ_O) && attn_q && hone_k_gemv_epiq_takes (&op, true)
      && epiq_consumer (&L->wgu, HONE_K_EPI_SWIGLU))
    {
      HoneKEpiQ eq;
      memset (&eq, 0, sizeof eq);
      eq.out = eb->x1;
      eq.out_ssq = eb->ssq;
      eq.out_g = L->ffn_norm;
      HONE_K_CHECK ((cudaError_t) hone_k_gemv_epiq (&op, &eq, pf_o, s));
      gu_in = &eb->x1;
    }
  else
    HONE_K_CHECK ((cudaError_t) gemv_plain (st, &L->wo, st->attn, n, st->h, st->h, HONE_K_EPI_ADD, s, pf_o, attn_q));
  op = gemv_op (&L->wgu, 1, NULL, st->gu, HONE_K_EPI_SWIGLU);
  op.eps = c->rms_eps;
  const HoneKActQ8 *down_in = NULL;
  const bool gu_prod = eb && (mask & EPIQ_GU) && hone_k_gemv_epiq_takes (&op, true)
                       && epiq_consumer (&L->wdown, HONE_K_EPI_ADD);
  if (gu_in || gu_prod)
    {
      HoneKEpiQ eq;
      memset (&eq, 0, sizeof eq);
      if (gu_in)
        {
          op.xq = gu_in;
          eq.in_ssq = eb->ssq;
        }
      else
        {
          HONE_K_CHECK ((cudaError_t) hone_k_rmsnorm (st->h, L->ffn_norm, 1, c->hidden, c->rms_eps, NULL, &st->xq,
                                                      NULL, 0, s));
          op.xq = &st->xq;
        }
      if (gu_prod)
        {
          down_in = op.xq == &st->xq ? &eb->x1 : &st->xq;
          eq.out = *down_in;
          op.y = NULL;   /* down reads the int8 copy only */
        }
      HONE_K_CHECK ((cudaError_t) hone_k_gemv_epiq (&op, &eq, pf_gu, s));
    }
  else
    HONE_K_CHECK ((cudaError_t) gemv_normed (st, &L->wgu, st->h, L->ffn_norm, c->rms_eps, n, NULL, st->gu,
                                             HONE_K_EPI_SWIGLU, NULL, s, pf_gu));
  const bool last = l + 1 == c->n_layers;
  const HoneKMatrix *next_w = last ? &m->lm_head : &m->layers[l + 1].wqkv;
  const float *next_g = last ? m->out_norm : m->layers[l + 1].attn_norm;
  const int next_epi = !last && m->layers[l + 1].q_norm == NULL ? (int) HONE_K_EPI_ROPE_KV : (int) HONE_K_EPI_STORE;
  op = gemv_op (&L->wdown, 1, st->h, st->h, HONE_K_EPI_ADD);
  op.xq = down_in ? down_in : &st->xq;
  if (eb && (mask & EPIQ_DOWN) && hone_k_gemv_epiq_takes (&op, true) && epiq_consumer (next_w, next_epi))
    {
      if (!down_in)
        HONE_K_CHECK ((cudaError_t) hone_k_quantize (st->gu, 1, L->wdown.cols, &st->xq, NULL, 0, s));
      HoneKEpiQ eq;
      memset (&eq, 0, sizeof eq);
      const HoneKActQ8 *out = op.xq == &st->xq ? &eb->x1 : &st->xq;
      eq.out = *out;
      eq.out_ssq = eb->ssq;
      eq.out_g = next_g;
      HONE_K_CHECK ((cudaError_t) hone_k_gemv_epiq (&op, &eq, pf_down, s));
      *ready = out;
      return 0;
    }
  if (down_in)
    return hone_k_gemv_pf (&op, pf_down, s);
  return gemv_plain (st, &L->wdown, st->gu, n, st->h, st->h, HONE_K_EPI_ADD, s, pf_down);
}

/* The context bound a decode attention launch is given: the captured
 * graph's (HoneKState.ctx_bound), never past what the block table holds —
 * the attention kernels may read that many table entries before they know
 * pos (hone-k-attn-tiny.cu). 0: unbounded. */
static int
attn_bound (const HoneKKv *kv, const HoneKState *st)
{
  const int cap = kv->max_blocks * HONE_K_KV_BLOCK;
  return st->ctx_bound > 0 && st->ctx_bound > cap ? cap : st->ctx_bound;
}

/* ---- streamed one-token steps (hone-k-decode-stream.cu) ---------------------
 * embed, layer 0's q|k|v as one launch, then per layer attention and one
 * launch of o (+ h), gate|up (+ SwiGLU), down (+ h) and the next layer's
 * q|k|v (RoPE + KV fused, or STORE then hone_k_rope_kv for qwen3's q/k
 * norms) or, after the last layer, the lm_head. */

/* Layer l's q|k|v GEMV of the one token in st->h. */
static HoneKGemvOp
stream_qkv_op (const HoneKModel *m, const HoneKKv *kv, HoneKState *st, int l)
{
  const HoneKConfig *c = &m->cfg;
  const HoneKLayer *L = &m->layers[l];
  const bool fuse_rope = L->q_norm == NULL;
  HoneKGemvOp op = gemv_op (&L->wqkv, 1, NULL, st->qkv, fuse_rope ? (int) HONE_K_EPI_ROPE_KV : (int) HONE_K_EPI_STORE);
  op.x = st->h;
  op.norm_g = L->attn_norm;
  op.eps = c->rms_eps;
  op.bias = L->bqkv;
  op.nq = c->n_heads;
  op.nkv = c->n_kv_heads;
  op.hd = c->head_dim;
  op.pos = st->pos;
  op.inv_freq = c->rope_inv_freq;
  op.k_pool = kv->k_pool[l];
  op.v_pool = kv->v_pool[l];
  op.block_table = kv->block_table;
  return op;
}

/* The launch after layer l's attention (l = -1: layer 0's q|k|v alone) into ops; returns how many. */
static int
stream_ops (const HoneKModel *m, const HoneKKv *kv, HoneKState *st, int l, HoneKGemvOp *ops)
{
  const HoneKConfig *c = &m->cfg;
  if (l < 0)
    {
      ops[0] = stream_qkv_op (m, kv, st, 0);
      return 1;
    }
  const HoneKLayer *L = &m->layers[l];
  ops[0] = gemv_op (&L->wo, 1, st->h, st->h, HONE_K_EPI_ADD);
  ops[0].x = st->attn;
  ops[1] = gemv_op (&L->wgu, 1, NULL, st->gu, HONE_K_EPI_SWIGLU);
  ops[1].x = st->h;
  ops[1].norm_g = L->ffn_norm;
  ops[1].eps = c->rms_eps;
  ops[2] = gemv_op (&L->wdown, 1, st->h, st->h, HONE_K_EPI_ADD);
  ops[2].x = st->gu;
  if (l + 1 < c->n_layers)
    ops[3] = stream_qkv_op (m, kv, st, l + 1);
  else
    {
      ops[3] = gemv_op (&m->lm_head, 1, NULL, st->logits, HONE_K_EPI_STORE);
      ops[3].x = st->h;
      ops[3].norm_g = m->out_norm;
      ops[3].eps = c->rms_eps;
    }
  return 4;
}

/* Whether this one-token step can run streamed (switched on, every launch fits the kernel). */
static bool
stream_fits (const HoneKModel *m, const HoneKKv *kv, HoneKState *st, int n, int n_logits)
{
  if (n != 1 || n_logits != 1 || !st->stream_sync || !hone_k_decode_stream_on ())
    {
      hone_k_stream_decline (n != 1 || n_logits != 1 ? "not a one-token step with one logits row"
                             : !st->stream_sync     ? "the state has no counters for streamed launches"
                                                    : "switched off, or the device has no bulk copies");
      return false;
    }
  HoneKGemvOp ops[HONE_K_STREAM_MAX_PHASES];
  for (int l = -1; l < m->cfg.n_layers; l++)
    {
      const int n_ops = stream_ops (m, kv, st, l, ops);
      if (!hone_k_stream_takes (ops, n_ops))
        return false;
    }
  return true;
}

static int
decode_step_stream (const HoneKModel *m, const HoneKKv *kv, HoneKState *st, cudaStream_t s)
{
  const HoneKConfig *c = &m->cfg;
  HONE_K_CHECK ((cudaError_t) hone_k_embed (&m->embd, st->tokens, 1, st->h, s));
  HoneKGemvOp ops[HONE_K_STREAM_MAX_PHASES];
  for (int l = -1; l < c->n_layers; l++)
    {
      if (l >= 0)
        HONE_K_CHECK ((cudaError_t) hone_k_attn_decode_ctx (st->qkv, 1, c->n_heads, c->n_kv_heads, c->head_dim, st->pos,
                                                            kv->k_pool[l], kv->v_pool[l], kv->block_table,
                                                            st->attn_scratch, st->attn, NULL, NULL, attn_bound (kv, st), s));
      const int n_ops = stream_ops (m, kv, st, l, ops);
      unsigned *sync = st->stream_sync + (size_t) (l + 1) * HONE_K_STREAM_SYNC;
      HONE_K_CHECK ((cudaError_t) hone_k_stream_gemvs (ops, n_ops, sync, hone_k_stream_trace_for (l + 1), s));
      const int next = l + 1;
      if (next < c->n_layers && m->layers[next].q_norm)   /* qwen3: q/k norms before RoPE */
        HONE_K_CHECK ((cudaError_t) hone_k_rope_kv (st->qkv, 1, c->n_heads, c->n_kv_heads, c->head_dim, st->pos,
                                                    c->rope_inv_freq, 0, m->layers[next].q_norm,
                                                    m->layers[next].k_norm, c->rms_eps, kv->k_pool[next],
                                                    kv->v_pool[next], kv->block_table, s));
    }
  return 0;
}

extern "C" int
hone_k_step_probe (void)
{
  static int mask = -1;
  if (mask < 0)
    {
      const char *e = getenv ("HONE_STEP_PROBE");
      mask = e ? (strstr (e, "pack") ? 1 : 0) | (strstr (e, "attn") ? 2 : 0) : 0;
      if (mask)   /* never silent: every output of the step is wrong then */
        fprintf (stderr, "hone: HONE_STEP_PROBE=%s leaves launches out of decode steps (measurement only: "
                         "the logits are wrong)\n", e);
    }
  return mask;
}

static int
decode_step (const HoneKModel *m, const HoneKKv *kv, HoneKState *st, int n, int n_logits, cudaStream_t s)
{
  const HoneKConfig *c = &m->cfg;
  const int nq = c->n_heads, nkv = c->n_kv_heads, hd = c->head_dim;
  decode_tune_read ();
  if (epiq_mode < 0)   /* off by default: slower in every variant measured (RESULTS-cuda.md, decode session 4) */
    hone_k_decode_set_epiq (env_int ("HONE_DECODE_EPIQ", 0));
  EpiqBufs eb;
  const bool epiq = n == 1 && n_logits == 1 && epiq_mode && epiq_bufs (m, st, &eb);
  /* the int8 of h·g for the next normalized GEMV (Σh² in eb.ssq), or NULL */
  const HoneKActQ8 *ready = NULL;
  const int pf_mb = gemv_pf_mb (m, st, n);
  HONE_K_CHECK ((cudaError_t) hone_k_embed (&m->embd, st->tokens, n, st->h, s));
  for (int l = 0; l < c->n_layers; l++)
    {
      const HoneKLayer *L = &m->layers[l];
      /* what each kernel prefetches: the next matrix in stream order */
      const HoneKMatrix *next_qkv = l + 1 < c->n_layers ? &m->layers[l + 1].wqkv : &m->lm_head;
      const HoneKPrefetch pf_qkv = prefetch_plan (&L->wo, NULL, pf_mb);
      const HoneKPrefetch pf_attn = prefetch_plan (&L->wo, &L->wgu, pf_attn_mb);
      const HoneKPrefetch pf_o = prefetch_plan (&L->wgu, NULL, pf_mb);
      const HoneKPrefetch pf_gu = prefetch_plan (&L->wdown, NULL, pf_mb);
      const HoneKPrefetch pf_down = prefetch_plan (next_qkv, NULL, pf_mb);
      /* a quantized o projection reads the int8 copy attention writes; a W4A16 one on the
       * register-streamed kernel (one token) the f16 copy */
      const bool attn_q = (fuse_quant & 1) && is_q8q4 (&L->wo);
      const bool attn_h = (fuse_quant & 1) && n == 1 && hone_k_q4z_takes_h16 (&L->wo);
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
      /* a q|k|v of parts in different types (Q4_K_M's Q4_K q,k + Q6_K v) runs one GEMV a
       * part, RoPE + KV apart; with n > 1 each part's rows pass through st->gu (free until gate|up) */
      const bool qkv_parts = L->wqkv.type == HONE_K_PARTS;
      const bool fuse_rope = L->q_norm == NULL && !qkv_parts;
      if (ready)   /* EpiQ consumer (never a HONE_K_PARTS matrix: epiq_consumer) */
        {
          HoneKGemvOp op = rope;
          op.w = &L->wqkv;
          op.n_tok = 1;
          op.bias = L->bqkv;
          op.y = st->qkv;
          op.epilogue = fuse_rope ? (int) HONE_K_EPI_ROPE_KV : (int) HONE_K_EPI_STORE;
          op.eps = c->rms_eps;
          op.xq = ready;
          HoneKEpiQ eq;
          memset (&eq, 0, sizeof eq);
          eq.in_ssq = eb.ssq;
          HONE_K_CHECK ((cudaError_t) hone_k_gemv_epiq (&op, &eq, &pf_qkv, s));
        }
      else if (qkv_parts)
        {
          HoneKGemvOp po;
          memset (&po, 0, sizeof po);
          po.w = &L->wqkv;
          po.x = st->h;
          po.norm_g = L->attn_norm;
          po.eps = c->rms_eps;
          po.xq = &st->xq;
          po.n_tok = n;
          po.bias = L->bqkv;
          po.y = st->qkv;
          po.epilogue = HONE_K_EPI_STORE;
          for (int i = 0; i < L->wqkv.n_parts; i++)
            if ((size_t) n * L->wqkv.parts[i].rows * sizeof (float) > gu_bytes (st))
              return (int) cudaErrorInvalidValue;
          HONE_K_CHECK ((cudaError_t) hone_k_gemv_parts (&po, st->gu, s));
        }
      else
        HONE_K_CHECK ((cudaError_t) gemv_normed (st, &L->wqkv, st->h, L->attn_norm, c->rms_eps, n, L->bqkv, st->qkv,
                                                 fuse_rope ? (int) HONE_K_EPI_ROPE_KV : (int) HONE_K_EPI_STORE, &rope,
                                                 s, &pf_qkv));
      ready = NULL;
      if (!fuse_rope)
        HONE_K_CHECK ((cudaError_t) hone_k_rope_kv (st->qkv, n, nq, nkv, hd, st->pos, c->rope_inv_freq, 0,
                                                    L->q_norm, L->k_norm, c->rms_eps, kv->k_pool[l],
                                                    kv->v_pool[l], kv->block_table, s));
      /* st->ctx_bound: the contexts this step will see (a captured graph's bound), for the launch shape */
      if (!(n == 1 && (hone_k_step_probe () & 2)))   /* measurement only: see hone_k_step_probe */
        HONE_K_CHECK ((cudaError_t) hone_k_attn_decode_h16 (st->qkv, n, nq, nkv, hd, st->pos, kv->k_pool[l],
                                                            kv->v_pool[l], kv->block_table, st->attn_scratch, st->attn,
                                                            attn_q ? &st->xq : NULL, attn_h ? &st->xh : NULL, &pf_attn,
                                                            attn_bound (kv, st), s));
      /* o, gate|up, down with EpiQ where the types allow (decode_step_ffn) */
      HONE_K_CHECK ((cudaError_t) decode_step_ffn (m, st, l, n, epiq ? &eb : NULL, epiq_mode, attn_q || attn_h, &ready,
                                                   &pf_o, &pf_gu, &pf_down, s));
    }
  const float *hl = st->h + (size_t) (n - n_logits) * c->hidden;
  if (ready)
    {
      HoneKGemvOp op = gemv_op (&m->lm_head, 1, NULL, st->logits, HONE_K_EPI_STORE);
      op.eps = c->rms_eps;
      op.xq = ready;
      HoneKEpiQ eq;
      memset (&eq, 0, sizeof eq);
      eq.in_ssq = eb.ssq;
      return hone_k_gemv_epiq (&op, &eq, NULL, s);
    }
  return gemv_normed (st, &m->lm_head, hl, m->out_norm, c->rms_eps, n_logits, NULL, st->logits,
                      HONE_K_EPI_STORE, NULL, s);
}

static int
x16_is_f16 (const HoneKMatrix *w)
{
  return w->type != HONE_K_BF16;
}

/* ---- per-op timing of prefill steps (hone_k_prefill_profile) -----------------
 * When on, prefill_step records an event after every op (the event between
 * two launches costs the PDL overlap of that pair, a few µs a layer), and
 * hone_k_prefill_profile_read sums the intervals per op. */
#define PP_MAX 2048
static struct {
  int on, n;
  cudaEvent_t ev[PP_MAX];
  int op[PP_MAX];
} pp;

static const char *const pp_names[HONE_K_PP_OPS] = {
  "embed", "rmsnorm (attn)", "gemm qkv", "rope+kv", "attention", "gemm o +=", "rmsnorm (ffn)", "gemm gate|up",
  "swiglu", "gemm down +=", "head (norm+gemv/gemm)", "sample+advance",
};

extern "C" const char *
hone_k_prefill_profile_name (int op)
{
  return op >= 0 && op < HONE_K_PP_OPS ? pp_names[op] : "?";
}

extern "C" int
hone_k_prefill_profile (int on)
{
  if (on && !pp.on)
    for (int i = 0; i < PP_MAX; i++)
      if (!pp.ev[i])
        HONE_K_CHECK (cudaEventCreate (&pp.ev[i]));
  pp.on = on;
  pp.n = 0;
  return 0;
}

/* an event after op (op < 0: the step's start) */
static void
pp_mark (int op, cudaStream_t s)
{
  if (!pp.on || pp.n >= PP_MAX)
    return;
  if (cudaEventRecord (pp.ev[pp.n], s) == cudaSuccess)
    pp.op[pp.n++] = op;
}

extern "C" int
hone_k_prefill_profile_read (double *ms)
{
  for (int i = 0; i < HONE_K_PP_OPS; i++)
    ms[i] = 0;
  if (pp.n > 0)
    HONE_K_CHECK (cudaEventSynchronize (pp.ev[pp.n - 1]));
  for (int i = 1; i < pp.n; i++)
    {
      float t = 0;
      if (pp.op[i] >= 0 && cudaEventElapsedTime (&t, pp.ev[i - 1], pp.ev[i]) == cudaSuccess)
        ms[pp.op[i]] += t;
    }
  pp.n = 0;
  return 0;
}

/* ---- HONE_PREFILL_AHEAD: the dequantization one matrix ahead on a side stream ----
 * Matrix j of a prefill is layer j / 4's q|k|v, o, gate|up or down (j % 4); it is
 * dequantized into st->w16 (j even) or w16b (j odd) on g->side once GEMM j - 2 has
 * let that buffer go, and GEMM j waits for it. Opt-in (session 55, 8B Q4_0 on an
 * H100, same binary): TTFT at 512 tokens 18.7-18.8 -> 17.8-17.9 ms, at 1,024 29.4 ->
 * 28.9, at 2,048 within the noise (54.4 -> 54.1), same generated ids; mode 2 (side
 * stream at a higher priority) gained half as much. At most 1 ms of the pass's ~6.5
 * ms is hidden, so it mostly runs between cuBLASLt's GEMMs, not beside them. It costs
 * a second buffer of the largest matrix in f16 (235 MB at 8B). */
static const HoneKMatrix *
ahead_matrix (const HoneKModel *m, int j)
{
  const HoneKLayer *L = &m->layers[j / 4];
  const HoneKMatrix *ws[4] = { &L->wqkv, &L->wo, &L->wgu, &L->wdown };
  return ws[j % 4];
}

/* Every layer matrix of an n-token chunk goes through the dequantization pass */
static bool
ahead_applies (const HoneKModel *m, const HoneKState *st, int n)
{
  const GemmCtx *g = (const GemmCtx *) st->cublas;
  if (!g || !g->ahead || !st->w16)
    return false;
  for (int j = 0; j < 4 * m->cfg.n_layers; j++)
    if (is_f (ahead_matrix (m, j)) || fused_gemm (ahead_matrix (m, j), n))
      return false;
  return true;
}

static int
ahead_dequant (const HoneKModel *m, HoneKState *st, int j)
{
  GemmCtx *g = (GemmCtx *) st->cublas;
  if (j >= 4 * m->cfg.n_layers)
    return 0;
  const HoneKMatrix *w = ahead_matrix (m, j);
  void *buf = (j & 1) ? g->w16b : st->w16;
  HONE_K_CHECK (cudaStreamWaitEvent (g->side, g->use[j & 1], 0));
  HONE_K_CHECK ((cudaError_t) (w->type == HONE_K_PARTS ? hone_k_parts_dequant (w, buf, 1, g->side)
                                                       : hone_k_dequant (w, buf, 1, g->side)));
  HONE_K_CHECK (cudaEventRecord (g->deq[j & 1], g->side));
  return 0;
}

/* Matrices 0 and 1 on their way once everything before on s is done */
static int
ahead_start (const HoneKModel *m, HoneKState *st, cudaStream_t s)
{
  GemmCtx *g = (GemmCtx *) st->cublas;
  HONE_K_CHECK (cudaEventRecord (g->use[0], s));
  HONE_K_CHECK (cudaEventRecord (g->use[1], s));
  HONE_K_CHECK ((cudaError_t) ahead_dequant (m, st, 0));
  return ahead_dequant (m, st, 1);
}

/* GEMM j of the prefill (see gemm), with its weights from the side stream when ahead */
static int
layer_gemm (const HoneKModel *m, HoneKState *st, bool ahead, int j, int n, const void *x16, void *y, int y16,
            int accumulate, cudaStream_t s, void *scratch = NULL, size_t scratch_bytes = 0)
{
  const HoneKMatrix *w = ahead_matrix (m, j);
  if (!ahead)
    return gemm (st, w, n, x16, y, y16, accumulate, s, scratch, scratch_bytes);
  GemmCtx *g = (GemmCtx *) st->cublas;
  HONE_K_CHECK (cudaStreamWaitEvent (s, g->deq[j & 1], 0));
  HONE_K_CHECK ((cudaError_t) gemm (st, w, n, x16, y, y16, accumulate, s, scratch, scratch_bytes,
                                    (j & 1) ? g->w16b : st->w16));
  HONE_K_CHECK (cudaEventRecord (g->use[j & 1], s));
  return ahead_dequant (m, st, j + 2);
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
  /* Session 1's data flow (f32 gate|up and attention outputs, converted by
   * separate launches) stays selectable for A/B runs: HONE_GEMM=gemmex and
   * HONE_ATTN_PREFILL=1 respectively. */
  const char *ea = getenv ("HONE_ATTN_PREFILL");
  const bool attn16 = !(ea && ea[0] == '1'), gu16 = !gemm_use_gemmex () && c->ffn % 4 == 0;
  const bool ahead = ahead_applies (m, st, n);
  if (ahead)
    HONE_K_CHECK ((cudaError_t) ahead_start (m, st, s));
  pp_mark (-1, s);
  HONE_K_CHECK ((cudaError_t) hone_k_embed (&m->embd, st->tokens, n, st->h, s));
  pp_mark (HONE_K_PP_EMBED, s);
  for (int l = 0; l < c->n_layers; l++)
    {
      const HoneKLayer *L = &m->layers[l];
      HONE_K_CHECK ((cudaError_t) hone_k_rmsnorm (st->h, L->attn_norm, n, c->hidden, c->rms_eps, NULL, NULL, st->x16,
                                                  x16_is_f16 (&L->wqkv), s));
      pp_mark (HONE_K_PP_NORM_ATTN, s);
      HONE_K_CHECK ((cudaError_t) layer_gemm (m, st, ahead, 4 * l, n, st->x16, st->qkv, 0, 0, s));
      if (L->bqkv)
        HONE_K_CHECK ((cudaError_t) hone_k_add_bias (st->qkv, n, qkvw, L->bqkv, s));
      pp_mark (HONE_K_PP_GEMM_QKV, s);
      HONE_K_CHECK ((cudaError_t) hone_k_rope_kv (st->qkv, n, nq, nkv, hd, st->pos, c->rope_inv_freq, 0, L->q_norm,
                                                  L->k_norm, c->rms_eps, kv->k_pool[l], kv->v_pool[l],
                                                  kv->block_table, s));
      pp_mark (HONE_K_PP_ROPE_KV, s);
      if (attn16)   /* attention writes the o GEMM's 16-bit input itself */
        HONE_K_CHECK ((cudaError_t) hone_k_attn_prefill_ex (st->qkv, n, nq, nkv, hd, pos_host, kv->k_pool[l],
                                                            kv->v_pool[l], kv->block_table, st->x16,
                                                            x16_is_f16 (&L->wo) ? HONE_K_F16 : HONE_K_BF16, s));
      else
        {
          HONE_K_CHECK ((cudaError_t) hone_k_attn_prefill (st->qkv, n, nq, nkv, hd, pos_host, kv->k_pool[l],
                                                           kv->v_pool[l], kv->block_table, st->attn, s));
          HONE_K_CHECK ((cudaError_t) hone_k_quantize (st->attn, n, nq * hd, NULL, st->x16, x16_is_f16 (&L->wo), s));
        }
      pp_mark (HONE_K_PP_ATTN, s);
      HONE_K_CHECK ((cudaError_t) layer_gemm (m, st, ahead, 4 * l + 1, n, st->x16, st->h, 0, 1, s, st->gu, gu_bytes (st)));
      pp_mark (HONE_K_PP_GEMM_O, s);
      HONE_K_CHECK ((cudaError_t) hone_k_rmsnorm (st->h, L->ffn_norm, n, c->hidden, c->rms_eps, NULL, NULL, st->x16,
                                                  x16_is_f16 (&L->wgu), s));
      pp_mark (HONE_K_PP_NORM_FFN, s);
      /* gate|up in 16 bits (half the bytes out of the GEMM and into SwiGLU),
       * where down reads the same 16-bit type as gate|up's weights give */
      if (gu16 && x16_is_f16 (&L->wgu) == x16_is_f16 (&L->wdown))
        {
          HONE_K_CHECK ((cudaError_t) layer_gemm (m, st, ahead, 4 * l + 2, n, st->x16, st->gu, 1, 0, s));
          pp_mark (HONE_K_PP_GEMM_GU, s);
          HONE_K_CHECK ((cudaError_t) swiglu16in (st->gu, n, c->ffn, st->x16, x16_is_f16 (&L->wgu), s));
        }
      else
        {
          HONE_K_CHECK ((cudaError_t) layer_gemm (m, st, ahead, 4 * l + 2, n, st->x16, st->gu, 0, 0, s));
          pp_mark (HONE_K_PP_GEMM_GU, s);
          HONE_K_CHECK ((cudaError_t) hone_k_swiglu16 (st->gu, n, c->ffn, st->x16, x16_is_f16 (&L->wdown), s));
        }
      pp_mark (HONE_K_PP_SWIGLU, s);
      HONE_K_CHECK ((cudaError_t) layer_gemm (m, st, ahead, 4 * l + 3, n, st->x16, st->h, 0, 1, s, st->gu, gu_bytes (st)));
      pp_mark (HONE_K_PP_GEMM_DOWN, s);
    }
  const float *hl = st->h + (size_t) (n - n_logits) * c->hidden;
  if (n_logits <= HONE_K_MAX_DECODE)
    HONE_K_CHECK ((cudaError_t) gemv_normed (st, &m->lm_head, hl, m->out_norm, c->rms_eps, n_logits, NULL, st->logits,
                                             HONE_K_EPI_STORE, NULL, s));
  else
    {
      HONE_K_CHECK ((cudaError_t) hone_k_rmsnorm (hl, m->out_norm, n_logits, c->hidden, c->rms_eps, NULL, NULL,
                                                  st->x16, x16_is_f16 (&m->lm_head), s));
      HONE_K_CHECK ((cudaError_t) gemm (st, &m->lm_head, n_logits, st->x16, st->logits, 0, 0, s));
    }
  pp_mark (HONE_K_PP_HEAD, s);
  return 0;
}

/* ---- warm-up -----------------------------------------------------------------
 * The first prefill after a load used to pay 150-200 ms (H200, 2,048 tokens)
 * for what loads lazily: cuBLASLt's heuristic queries and the kernels it
 * picks (loaded on first launch), and our own prefill kernels.
 * hone_k_prefill_warm pays that at load instead: the four layer GEMMs at
 * n = max_tok (each distinct weight type and alignment once) on the real
 * weights into scratch (st->qkv, st->gu, st->h: rewritten by every step
 * before they are read); a 9-token prefill through prefill_step (every
 * prefill kernel, the head GEMV; K/V land in page 0, which the caller
 * guarantees nobody holds yet: a page is always written before it is read);
 * then (mode 1, the default) the GEMMs at n = 16, 32, … below max_tok, so
 * that shorter prompts find their plans and kernels loaded too.
 * *st->pos and st->sampled[0] are left 0, as hone_k_state_alloc leaves
 * them; nothing a later step reads changes, so results do not either.
 * HONE_PREFILL_WARM=0 skips it, =2 stops after the 9-token prefill;
 * HONE_PREFILL_WARM_VERBOSE prints each phase's host time (with syncs). */

/* One GEMM of w at n the way prefill_step runs it, unless its plan exists already. */
static int
warm_gemm (HoneKState *st, const HoneKMatrix *w, int n, void *y, int y16, int acc, cudaStream_t s)
{
  GemmCtx *g = (GemmCtx *) st->cublas;
  const cudaDataType_t t = w->type == HONE_K_BF16 ? CUDA_R_16BF : CUDA_R_16F;
  const void *wp = is_f (w) ? w->q : st->w16;
  if (!gemm_use_gemmex () && !fused_gemm (w, n)   /* fused: run it, loads it */
      && lt_find (g, w->rows, n, w->cols, t, y16 ? t : CUDA_R_32F, acc, ptr_align (wp, st->x16, y)))
    return 0;
  return gemm (st, w, n, st->x16, y, y16, acc, s);
}

/* verbose: host milliseconds since *t (after a sync), then *t = now */
static double
warm_lap (bool verbose, cudaStream_t s, double *t)
{
  if (!verbose)
    return 0;
  cudaStreamSynchronize (s);
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  const double now = ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6, d = now - *t;
  *t = now;
  return d;
}

/* The four layer GEMMs at n, each distinct (type, alignment) once. */
static int
warm_layers (const HoneKModel *m, HoneKState *st, int n, cudaStream_t s)
{
  const HoneKConfig *c = &m->cfg;
  const bool gu16 = !gemm_use_gemmex () && c->ffn % 4 == 0;
  for (int l = 0; l < c->n_layers; l++)
    {
      const HoneKLayer *L = &m->layers[l];
      const bool g16 = gu16 && x16_is_f16 (&L->wgu) == x16_is_f16 (&L->wdown);
      HONE_K_CHECK ((cudaError_t) warm_gemm (st, &L->wqkv, n, st->qkv, 0, 0, s));
      HONE_K_CHECK ((cudaError_t) warm_gemm (st, &L->wo, n, st->h, 0, 1, s));
      HONE_K_CHECK ((cudaError_t) warm_gemm (st, &L->wgu, n, st->gu, g16, 0, s));
      HONE_K_CHECK ((cudaError_t) warm_gemm (st, &L->wdown, n, st->h, 0, 1, s));
    }
  return 0;
}

extern "C" int
hone_k_prefill_warm (const HoneKModel *m, const HoneKKv *kv, HoneKState *st, cudaStream_t s)
{
  const HoneKConfig *c = &m->cfg;
  const char *e = getenv ("HONE_PREFILL_WARM");
  const int mode = e && *e ? atoi (e) : 1;    /* 0 off, 1 all sizes, 2 max_tok and the tiny prefill only */
  /* nothing to warm where hone_k_forward would refuse the model anyway */
  if (!st->cublas || st->max_tok <= HONE_K_MAX_DECODE || mode <= 0 || (c->hidden % 32)
      || (c->head_dim != 64 && c->head_dim != 128) || c->n_layers < 1)
    return 0;
  const bool verbose = getenv ("HONE_PREFILL_WARM_VERBOSE") != NULL;
  double t = 0, ms[4];
  warm_lap (verbose, s, &t);
  /* the full-size GEMMs first (the plans the longest prompts use) */
  HONE_K_CHECK ((cudaError_t) warm_layers (m, st, st->max_tok, s));
  ms[0] = warm_lap (verbose, s, &t);
  /* the tiny prefill: tokens 0, position 0, block table {0} in st->sampled */
  const int nt = HONE_K_MAX_DECODE + 1;
  HONE_K_CHECK (cudaMemsetAsync (st->tokens, 0, (size_t) nt * sizeof (int32_t), s));
  HONE_K_CHECK (cudaMemsetAsync (st->pos, 0, sizeof (int32_t), s));
  HONE_K_CHECK (cudaMemsetAsync (st->sampled, 0, sizeof (int32_t), s));
  HoneKKv kw = *kv;
  kw.block_table = st->sampled;
  kw.max_blocks = 1;
  HONE_K_CHECK ((cudaError_t) prefill_step (m, &kw, st, nt, 0, 1, s));
  ms[1] = warm_lap (verbose, s, &t);
  /* the sizes between, each a power of two */
  char sizes[256] = "";
  size_t len = 0;
  for (int n = 16; mode == 1 && n < st->max_tok; n *= 2)
    {
      HONE_K_CHECK ((cudaError_t) warm_layers (m, st, n, s));
      const double d = warm_lap (verbose, s, &t);
      if (verbose && len < sizeof sizes - 24)
        len += (size_t) snprintf (sizes + len, sizeof sizes - len, " %d:%.1f", n, d);
    }
  if (verbose)
    fprintf (stderr, "hone prefill warm-up (mode %d, host ms): n=%d GEMMs %.1f, tiny prefill %.1f, sizes%s\n", mode,
             st->max_tok, ms[0], ms[1], sizes);
  return (int) cudaStreamSynchronize (s);
}

extern "C" int
hone_k_forward (const HoneKModel *m, const HoneKKv *kv, HoneKState *st, int n_tok, int pos_host,
                int n_logits, int sample, float temperature, uint64_t seed, cudaStream_t stream)
{
  if (n_tok < 1 || n_tok > st->max_tok || n_logits < 1 || n_logits > n_tok
      || (m->cfg.hidden % 32) || (m->cfg.head_dim != 64 && m->cfg.head_dim != 128))
    return (int) cudaErrorInvalidValue;
  /* PDL: on for quantized steps, and for one-token steps whose GEMVs are
   * staged (they issue their weight copies before waiting); otherwise for
   * BF16/F16 only on the launches of q|k|v, gate|up and down: on every launch
   * it measured 10 % slower (RESULTS-cuda.md, sessions 2 and 17: the big
   * GEMVs' blocks land unevenly, attention waits behind o's early loads), on
   * those three 0.7-1.1 % faster than on none at every context (session 18;
   * adding o, attention or both cost more than they saved — but for the tiny
   * attention kernel's tier, below) */
  bool pdl = m->cfg.n_layers > 0 && !is_f (&m->layers[0].wgu);
  int pdl_roles = HONE_K_PDL_ALL;
  /* a one-token graph bounded to the tiny attention kernel's tier */
  const bool tiny_tier = tiny_tier_step (st, n_tok);
  if (!pdl && m->cfg.n_layers > 0 && n_tok == 1)
    {
      HoneKGemvOp probe;
      memset (&probe, 0, sizeof probe);
      probe.w = &m->layers[0].wgu;
      probe.n_tok = 1;
      probe.x = st->h;
      probe.norm_g = m->layers[0].ffn_norm;
      probe.y = st->gu;
      probe.epilogue = HONE_K_EPI_SWIGLU;
      pdl = hone_k_gemv_staged_takes (&probe);
      if (!pdl)
        {
          pdl = true;
          pdl_roles = HONE_K_PDL_QKV | HONE_K_PDL_GU | HONE_K_PDL_DOWN;
          /* a graph bounded to the tiny attention kernel's tier (one block a
           * query head: 32 SMs at 8B, the others free for o's early loads)
           * adds attention and o (HONE_PDL_TINY_ROLES): 8B at 128 keys 3.835
           * -> 3.774 ms, same binary (RESULTS-cuda.md, "Decode, session 21") */
          static int tiny_roles = -1;
          if (tiny_roles < 0)
            tiny_roles = hone_k_roles_from_env ("HONE_PDL_TINY_ROLES", HONE_K_PDL_ATTN | HONE_K_PDL_O);
          if (tiny_tier)
            pdl_roles |= tiny_roles;
        }
    }
  /* streamed steps: the weight stream of each launch starts during attention (PDL) */
  const bool streamed = n_tok <= HONE_K_MAX_DECODE && stream_fits (m, kv, st, n_tok, n_logits);
  if (streamed)
    {
      pdl = true;
      pdl_roles = HONE_K_PDL_ALL;
    }
  hone_k_pdl_hint (pdl, pdl_roles);
  hone_k_gemv_tiny_tier (tiny_tier);
  const int r = streamed                      ? decode_step_stream (m, kv, st, stream)
                : n_tok <= HONE_K_MAX_DECODE ? decode_step (m, kv, st, n_tok, n_logits, stream)
                                             : prefill_step (m, kv, st, n_tok, pos_host, n_logits, stream);
  if (r)
    return r;
  if (sample)
    HONE_K_CHECK ((cudaError_t) hone_k_sample_feed (st->logits, n_logits, m->cfg.vocab, temperature, seed, st->step,
                                                    st->sampled, st->tokens, st->sample_scratch, stream));
  HONE_K_CHECK ((cudaError_t) hone_k_advance (st->pos, n_tok, st->step, stream));
  if (n_tok > HONE_K_MAX_DECODE)
    pp_mark (HONE_K_PP_SAMPLE, stream);
  return 0;
}
