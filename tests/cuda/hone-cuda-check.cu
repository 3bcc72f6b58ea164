/* hone-cuda-check.cu — correctness checks and benchmarks of kernels/ on the GPU.
 *
 * Plain CUDA C++ (no GLib), so that it builds and runs on the GPU machine with
 * nothing carried: `nvcc -O3 -arch=sm_90 -Ikernels tests/cuda/hone-cuda-check.cu kernels/*.cu -lcublas`.
 *
 * Checks: every kernel against a float64 CPU reference written here from the
 * formats' definitions (not from the kernels), on fresh random inputs, with
 * outputs poisoned (NaN bytes) before each run; a tiny random llama model run
 * end to end (prefill and token-by-token decode) against a float64 CPU forward.
 * Benchmarks: each GEMV at Llama-3-8B shapes, the whole decode step of a
 * random-weight Llama-3-8B captured as a CUDA graph at several contexts, and
 * a 2,048-token prefill. Exit status 1 if any check fails.
 *
 * Usage: hone-cuda-check [--check] [--bench] [--quick]   (default both)
 *        hone-cuda-check --prefill | --check-prefill   (prefill benchmarks / checks only)
 *        hone-cuda-check --decode | --check-epiq       (decode session 4: GEMVs and steps with the quantization
 *                                                       in the epilogues vs old / its checks, small, for
 *                                                       compute-sanitizer; HONE_DECODE_STAGED=1: session 3's
 *                                                       staged-vs-old tables instead)
 *        hone-cuda-check --check-staged                (the staged GEMV's checks, small, for compute-sanitizer)
 *        hone-cuda-check --decode2                     (decode session 2's variants)
 *        hone-cuda-check --decode-stream | --check-stream (session 5: whole steps streamed vs per-GEMV kernels,
 *                                                       with a per-block trace / the streamed checks alone)
 *        hone-cuda-check --bench-sample                (the samplers' time a call over a Llama-3 / Qwen2.5 row)
 *        hone-cuda-check --check-misc                  (the norm, dequantization and embedding checks alone)
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <stdint.h>
#include <vector>
#include <algorithm>
#include <string>
#include <map>
#include <unistd.h>
#include "hone-kernels.h"
#include "hone-k-common.cuh"   /* decode_step's internal entry points (prefetch, fused quantization) */
#include "hone-k-gemv.cuh"     /* the staged GEMV's internals (which path ran, ring size) */
#include "hone-check-util.cuh"

/* ---- host helpers --------------------------------------------------------- */

/* GGUF rows of a type from f32 values, quantized the way ggml's reference
 * quantizers do (written here from the block definitions), plus the
 * dequantized values the reference uses. */
static std::vector<uint8_t>
gguf_quantize (int type, const std::vector<float> &x, int rows, int cols, std::vector<double> &deq)
{
  std::vector<uint8_t> out;
  deq.assign ((size_t) rows * cols, 0);
  for (int r = 0; r < rows; r++)
    {
      const float *xr = &x[(size_t) r * cols];
      double *dr = &deq[(size_t) r * cols];
      if (type == HONE_K_BF16 || type == HONE_K_F16)
        {
          for (int k = 0; k < cols; k++)
            {
              const uint16_t u = type == HONE_K_BF16 ? f2bf (xr[k]) : f2h (xr[k]);
              out.push_back (u & 0xff);
              out.push_back (u >> 8);
              dr[k] = type == HONE_K_BF16 ? bf2f (u) : h2f (u);
            }
          continue;
        }
      for (int b = 0; b < cols / 32; b++)
        {
          const float *v = xr + b * 32;
          double *dv = dr + b * 32;
          if (type == HONE_K_Q8_0)
            {
              float amax = 0;
              for (int i = 0; i < 32; i++) amax = fmaxf (amax, fabsf (v[i]));
              const float d = amax / 127.f, id = d ? 1.f / d : 0.f;
              const uint16_t dh = f2h (d);
              out.push_back (dh & 0xff); out.push_back (dh >> 8);
              for (int i = 0; i < 32; i++)
                {
                  const int q = (int) roundf (v[i] * id);
                  out.push_back ((uint8_t) (int8_t) q);
                  dv[i] = (double) q * h2f (dh);
                }
            }
          else if (type == HONE_K_Q4_0)
            {
              float amax = 0, mx = 0;
              for (int i = 0; i < 32; i++) if (fabsf (v[i]) > amax) { amax = fabsf (v[i]); mx = v[i]; }
              const float d = mx / -8.f, id = d ? 1.f / d : 0.f;
              const uint16_t dh = f2h (d);
              out.push_back (dh & 0xff); out.push_back (dh >> 8);
              int q[32];
              for (int i = 0; i < 32; i++)
                q[i] = std::min (15, (int) (int8_t) (v[i] * id + 8.5f));
              for (int j = 0; j < 16; j++)
                out.push_back ((uint8_t) (q[j] | (q[j + 16] << 4)));
              for (int i = 0; i < 32; i++)
                dv[i] = (double) (q[i] - 8) * h2f (dh);
            }
          else   /* Q4_1 */
            {
              float mn = v[0], mx = v[0];
              for (int i = 1; i < 32; i++) { mn = fminf (mn, v[i]); mx = fmaxf (mx, v[i]); }
              const float d = (mx - mn) / 15.f, id = d ? 1.f / d : 0.f;
              const uint16_t dh = f2h (d), mh = f2h (mn);
              out.push_back (dh & 0xff); out.push_back (dh >> 8);
              out.push_back (mh & 0xff); out.push_back (mh >> 8);
              int q[32];
              for (int i = 0; i < 32; i++)
                q[i] = std::min (15, (int) (uint8_t) ((v[i] - mn) * id + 0.5f));
              for (int j = 0; j < 16; j++)
                out.push_back ((uint8_t) (q[j] | (q[j + 16] << 4)));
              for (int i = 0; i < 32; i++)
                dv[i] = (double) q[i] * h2f (dh) + h2f (mh);
            }
        }
    }
  return out;
}

static const char *
type_name (int t)
{
  switch (t)
    {
    case HONE_K_BF16: return "BF16";
    case HONE_K_F16: return "F16";
    case HONE_K_Q8_0: return "Q8_0";
    case HONE_K_Q4_0: return "Q4_0";
    case HONE_K_Q4_1: return "Q4_1";
    case HONE_K_Q4_K: return "Q4_K";
    case HONE_K_Q6_K: return "Q6_K";
    default: return "?";
    }
}

static HoneKMatrix
matrix_alloc (int type, int rows, int cols)
{
  HoneKMatrix m;
  size_t qb, sb;
  m.type = hone_k_upload_type (type);
  m.rows = rows;
  m.cols = cols;
  hone_k_matrix_bytes (m.type, rows, cols, &qb, &sb);
  CK (cudaMalloc (&m.q, qb + 16));
  m.s = NULL;
  if (sb)
    CK (cudaMalloc (&m.s, sb + 16));
  return m;
}

/* Upload GGUF rows into a fresh GPU matrix. */
static HoneKMatrix
matrix_from_gguf (int type, const std::vector<uint8_t> &bytes, int rows, int cols)
{
  HoneKMatrix m = matrix_alloc (type, rows, cols);
  uint8_t *src = dev_upload (bytes);
  CK (hone_k_repack (type, src, rows, cols, &m, 0, 1, 0));
  CK (cudaDeviceSynchronize ());
  cudaFree (src);
  return m;
}

/* ---- checks ----------------------------------------------------------------- */

/* what check labels call a staged run: the loader under test */
static const char *staged_tag = " [staged]";

/* xin_f32: quantized weights get the f32 input (and the norm weights) and
 * quantize it themselves (the staged kernel) instead of an int8 input made
 * by hone_k_rmsnorm / hone_k_quantize. staged: -1 the default dispatch, 0
 * the register-streamed kernel forced, 1 the staged kernel forced (the check
 * fails if it did not run). */
static void
check_gemv (int type, int rows, int cols, int n_tok, int epi, bool with_norm, bool xin_f32 = false, int staged = -1)
{
  std::vector<float> w ((size_t) rows * cols), x ((size_t) n_tok * cols), bias (rows), res ((size_t) n_tok * rows),
      g (cols);
  for (auto &v : w) v = rng_normal () * 0.05f;
  for (auto &v : x) v = rng_normal ();
  for (auto &v : bias) v = rng_normal ();
  for (auto &v : res) v = rng_normal ();
  for (auto &v : g) v = 1.f + 0.3f * rng_normal ();
  std::vector<double> wd;
  const std::vector<uint8_t> bytes = gguf_quantize (type, w, rows, cols, wd);
  HoneKMatrix m = matrix_from_gguf (type, bytes, rows, cols);
  const bool quant = !(type == HONE_K_BF16 || type == HONE_K_F16);

  /* the input the matrix sees, in f64 */
  std::vector<double> xin ((size_t) n_tok * cols);
  for (int t = 0; t < n_tok; t++)
    {
      double ss = 0;
      for (int k = 0; k < cols; k++) ss += (double) x[(size_t) t * cols + k] * x[(size_t) t * cols + k];
      const double sc = with_norm ? 1.0 / sqrt (ss / cols + 1e-5) : 1.0;
      for (int k = 0; k < cols; k++)
        xin[(size_t) t * cols + k] = x[(size_t) t * cols + k] * sc * (with_norm ? g[k] : 1.0);
    }
  const std::vector<double> xq_ref = quant ? act_q8_roundtrip (xin) : xin;

  float *dx = dev_upload (x), *dres = dev_upload (res), *dbias = dev_upload (bias), *dg = dev_upload (g);
  const int out_cols = epi == HONE_K_EPI_SWIGLU ? rows / 2 : rows;
  float *dy = (float *) dev_poisoned ((size_t) n_tok * out_cols * 4);
  HoneKActQ8 xq;
  xq.q = (int8_t *) dev_poisoned ((size_t) n_tok * cols);
  xq.ds = (float2 *) dev_poisoned ((size_t) n_tok * cols / 32 * 8);
  const float *bptr = epi == HONE_K_EPI_SWIGLU ? NULL : dbias;
  if (epi == HONE_K_EPI_ADD)
    {
      CK (cudaMemcpy (dy, dres, (size_t) n_tok * rows * 4, cudaMemcpyDeviceToDevice));
    }
  HoneKGemvOp op;
  memset (&op, 0, sizeof op);
  op.w = &m;
  op.n_tok = n_tok;
  op.bias = bptr;
  op.res = epi == HONE_K_EPI_ADD ? dy : NULL;   /* in place, as the forward pass does */
  op.y = dy;
  op.epilogue = epi;
  op.eps = 1e-5f;
  if (quant && !xin_f32)
    {
      if (with_norm)
        CK (hone_k_rmsnorm (dx, dg, n_tok, cols, 1e-5f, NULL, &xq, NULL, 0, 0));
      else
        CK (hone_k_quantize (dx, n_tok, cols, &xq, NULL, 0, 0));
      op.xq = &xq;
    }
  else
    {
      op.x = dx;
      op.norm_g = with_norm ? dg : NULL;
    }
  if (staged >= 0)
    hone_k_gemv_set_staged (staged);
  const unsigned runs0 = hone_k_gemv_staged_runs ();
  const int rc = hone_k_gemv_ex (&op, 0);
  const bool ran_staged = hone_k_gemv_staged_runs () != runs0;
  hone_k_gemv_set_staged (-1);
  CK (rc);
  CK (cudaGetLastError ());
  const std::vector<float> y = dev_download<float> (dy, (size_t) n_tok * out_cols);
  std::vector<double> xq_used = xq_ref;
  bool q_ok = true;
  int q_flips = 0;
  if (quant && !xin_f32)
    {
      /* the GEMV is checked on the int8 input it was given; that input against the
       * f64 quantization, where only near-ties (the f32 RMSNorm rounds differently
       * from the f64 one) may land one step apart */
      const std::vector<int8_t> qg = dev_download<int8_t> (xq.q, (size_t) n_tok * cols);
      const std::vector<float2> dg2 = dev_download<float2> (xq.ds, (size_t) n_tok * cols / 32);
      for (size_t b = 0; b < dg2.size (); b++)
        {
          float amax = 0;
          for (int i = 0; i < 32; i++) amax = fmaxf (amax, fabsf ((float) xin[b * 32 + i]));
          const double dh = amax / 127.0;
          if (!(fabs (dg2[b].x - dh) <= 1e-5 * dh + 1e-30))
            q_ok = false;
          for (int i = 0; i < 32; i++)
            {
              const size_t k = b * 32 + i;
              xq_used[k] = (double) qg[k] * dg2[b].x;
              const double v = dh > 0 ? xin[k] / dh : 0.0;
              const int qh = (int) lrint (xq_ref[k] / (dh > 0 ? dh : 1));
              if (qg[k] != qh)
                {
                  q_flips++;
                  if (abs (qg[k] - qh) > 1 || fabs (fabs (v - floor (v)) - 0.5) > 1e-3)
                    q_ok = false;
                }
            }
        }
    }

  std::vector<double> ref ((size_t) n_tok * out_cols), ref_true ((size_t) n_tok * out_cols);
  for (int pass = 0; pass < 2; pass++)
    {
      const std::vector<double> &xs = pass == 0 ? xq_used : xin;
      std::vector<double> &out = pass == 0 ? ref : ref_true;
      for (int t = 0; t < n_tok; t++)
        {
          std::vector<double> acc (rows);
          for (int r = 0; r < rows; r++)
            {
              double s = 0;
              for (int k = 0; k < cols; k++) s += wd[(size_t) r * cols + k] * xs[(size_t) t * cols + k];
              acc[r] = s + (bptr ? bias[r] : 0.0);
            }
          for (int r = 0; r < out_cols; r++)
            {
              double v;
              if (epi == HONE_K_EPI_SWIGLU)
                {
                  const double gg = acc[2 * r], u = acc[2 * r + 1];
                  v = gg / (1 + exp (-gg)) * u;
                }
              else
                v = acc[r] + (epi == HONE_K_EPI_ADD ? res[(size_t) t * rows + r] : 0.0);
              out[(size_t) t * out_cols + r] = v;
            }
        }
    }
  bool fin;
  const double e = rel_err (y.data (), ref.data (), y.size (), &fin);
  char what[160];
  snprintf (what, sizeof what, "gemv %s %dx%d tok=%d epi=%d%s%s%s", type_name (type), rows, cols, n_tok, epi,
            with_norm ? " +norm" : "", quant && xin_f32 ? " f32-in" : "", ran_staged ? staged_tag : "");
  const double bound = 2e-5;   /* f32 accumulation of the same (de)quantized operands */
  check (fin && e < bound && (staged != 1 || ran_staged) && !(staged == 0 && ran_staged), what, e, bound);
  if (quant && !xin_f32)
    {
      snprintf (what, sizeof what, "  its int8 input vs the f64 quantization (%d near-tie steps)", q_flips);
      check (q_ok, what, q_flips, 0);
    }
  if (quant)
    {
      const double e2 = rel_err (y.data (), ref_true.data (), y.size (), &fin);
      snprintf (what, sizeof what, "  vs unquantized activations %s tok=%d", type_name (type), n_tok);
      check (fin && e2 < 2e-2, what, e2, 2e-2);
    }
  matrix_free (&m);
  cudaFree (dx); cudaFree (dres); cudaFree (dbias); cudaFree (dg); cudaFree (dy); cudaFree (xq.q); cudaFree (xq.ds);
}

/* ---- quantization in the GEMV epilogue (HoneKEpiQ, engineer fuseq) ----------
 * role 0: consumer: the input is the int8 of x·g (hone_k_quantize of the
 * product) with Σx² per 32 inputs, the kernel scales the row sums by
 * rsqrt(Σ/cols + eps); role 1: producer: a plain int8 input, the outputs
 * (ADD or SWIGLU) also quantized as out·g_out with Σout² per 32; role 2:
 * both (gate|up as decode_step runs it). References: the f64 GEMV on the
 * dequantized operands; the int8 output against the format's definition
 * applied in f32 to the GPU's own f32 outputs (d = absmax/127, q = rint(v/d):
 * bit for bit) and, dequantized, against the f64 outputs; Σout² against f64.
 * Every case runs twice (the same bits both times: deterministic, no state
 * left behind); y_null: the second run passes no f32 output (SWIGLU). */
static void
check_epiq (int type, int rows, int cols, int epi, int role, int cfg = -1, bool y_null = false)
{
  const bool cons = role != 1, prod = role != 0;
  const int out_cols = epi == HONE_K_EPI_SWIGLU ? rows / 2 : rows;
  std::vector<float> w ((size_t) rows * cols), x (cols), bias (rows), res (rows), g (cols), go (out_cols);
  for (auto &v : w) v = rng_normal () * 0.05f;
  for (auto &v : x) v = rng_normal ();
  for (auto &v : bias) v = rng_normal ();
  for (auto &v : res) v = rng_normal ();
  for (auto &v : g) v = 1.f + 0.3f * rng_normal ();
  for (auto &v : go) v = 1.f + 0.3f * rng_normal ();
  std::vector<double> wd;
  HoneKMatrix m = matrix_from_gguf (type, gguf_quantize (type, w, rows, cols, wd), rows, cols);
  /* the activation: consumer x·g (quantized as is; the scale comes from the partials), else x */
  std::vector<float> xa (cols), part (cols / 32);
  for (int k = 0; k < cols; k++)
    xa[k] = cons ? x[k] * g[k] : x[k];
  double ssum = 0;
  for (int b = 0; b < cols / 32; b++)
    {
      double p = 0;
      for (int i = 0; i < 32; i++) p += (double) x[b * 32 + i] * x[b * 32 + i];
      part[b] = (float) p;
      ssum += part[b];
    }
  const double sc = cons ? 1.0 / sqrt (ssum / cols + 1e-5) : 1.0;
  std::vector<double> xad (xa.begin (), xa.end ());
  const std::vector<double> xq_ref = act_q8_roundtrip (xad);
  const bool with_bias = epi == HONE_K_EPI_STORE;
  std::vector<double> ref (out_cols);
  {
    std::vector<double> acc (rows);
    for (int r = 0; r < rows; r++)
      {
        double t = 0;
        for (int k = 0; k < cols; k++) t += wd[(size_t) r * cols + k] * xq_ref[k];
        acc[r] = sc * t + (with_bias ? bias[r] : 0.0);
      }
    for (int r = 0; r < out_cols; r++)
      ref[r] = epi == HONE_K_EPI_SWIGLU ? acc[2 * r] / (1 + exp (-acc[2 * r])) * acc[2 * r + 1]
                                        : acc[r] + (epi == HONE_K_EPI_ADD ? res[r] : 0.0);
  }
  float *dxa = dev_upload (xa), *dpart = dev_upload (part), *dbias = dev_upload (bias), *dgo = dev_upload (go);
  float *dres = dev_upload (res);
  HoneKActQ8 xq, oq;
  xq.q = (int8_t *) dev_poisoned (cols);
  xq.ds = (float2 *) dev_poisoned (cols / 32 * 8);
  CK (hone_k_quantize (dxa, 1, cols, &xq, NULL, 0, 0));
  oq.q = (int8_t *) dev_poisoned (out_cols);
  oq.ds = (float2 *) dev_poisoned ((out_cols + 31) / 32 * 8);
  float *dssq = (float *) dev_poisoned ((out_cols + 31) / 32 * 4);
  float *dy = (float *) dev_poisoned ((size_t) out_cols * 4);
  std::vector<int8_t> q_first;
  std::vector<float2> ds_first;
  std::vector<float> y_first, ss_first;
  hone_k_gemv_set_config (cfg);
  char what[200];
  snprintf (what, sizeof what, "epiq gemv %s %dx%d epi=%d %s cfg=%d%s", type_name (type), rows, cols, epi,
            role == 0 ? "consumer" : role == 1 ? "producer" : "consumer+producer", cfg, y_null ? " y=NULL" : "");
  bool same = true, ran = true;
  for (int run = 0; run < 2; run++)
    {
      const bool no_y = y_null && run == 1;
      if (epi == HONE_K_EPI_ADD)
        CK (cudaMemcpy (dy, dres, (size_t) rows * 4, cudaMemcpyDeviceToDevice));
      CK (cudaMemset (oq.q, 0xff, out_cols));
      CK (cudaMemset (oq.ds, 0xff, (out_cols + 31) / 32 * 8));
      CK (cudaMemset (dssq, 0xff, (out_cols + 31) / 32 * 4));
      HoneKGemvOp op;
      memset (&op, 0, sizeof op);
      op.w = &m;
      op.n_tok = 1;
      op.xq = &xq;
      op.bias = with_bias ? dbias : NULL;
      op.res = epi == HONE_K_EPI_ADD ? dy : NULL;
      op.y = no_y ? NULL : dy;
      op.epilogue = epi;
      op.eps = 1e-5f;
      HoneKEpiQ eq;
      memset (&eq, 0, sizeof eq);
      if (cons)
        eq.in_ssq = dpart;
      if (prod)
        {
          eq.out = oq;
          eq.out_ssq = epi == HONE_K_EPI_ADD ? dssq : NULL;
          eq.out_g = dgo;
        }
      const unsigned r0 = hone_k_gemv_epiq_runs ();
      CK (hone_k_gemv_epiq (&op, &eq, NULL, 0));
      CK (cudaDeviceSynchronize ());
      ran &= hone_k_gemv_epiq_runs () == r0 + 1;
      const std::vector<float> y = dev_download<float> (dy, out_cols);
      const std::vector<int8_t> q = dev_download<int8_t> (oq.q, out_cols);
      const std::vector<float2> ds = dev_download<float2> (oq.ds, out_cols / 32);
      const std::vector<float> ss = dev_download<float> (dssq, out_cols / 32);
      if (run == 0)
        {
          y_first = y;
          q_first = q;
          ds_first = ds;
          ss_first = ss;
          bool fin;
          const double e = rel_err (y.data (), ref.data (), y.size (), &fin);
          check (fin && e < 2e-5 && ran, what, e, 2e-5);
          if (!prod)
            continue;
          /* the int8 format applied in f32 to the GPU's f32 outputs: the same bits */
          int bad = 0;
          std::vector<double> deq (out_cols), vref (out_cols);
          double ssq_err = 0;
          for (int b = 0; b < out_cols / 32; b++)
            {
              float amax = 0, v[32];
              for (int i = 0; i < 32; i++)
                {
                  v[i] = y[b * 32 + i] * go[b * 32 + i];
                  amax = fmaxf (amax, fabsf (v[i]));
                }
              const float d = amax / 127.f;
              float sq = 0;
              for (int i = 0; i < 32; i++)
                {
                  const int qi = d > 0 ? (int) rintf (v[i] / d) : 0;
                  bad += q[b * 32 + i] != qi;
                  sq += (float) qi;
                  deq[b * 32 + i] = (double) q[b * 32 + i] * ds[b].x;
                  vref[b * 32 + i] = ref[b * 32 + i] * go[b * 32 + i];
                }
              bad += ds[b].x != d || ds[b].y != d * sq;
              if (epi == HONE_K_EPI_ADD)
                {
                  double t = 0;
                  for (int i = 0; i < 32; i++) t += (double) y[b * 32 + i] * y[b * 32 + i];
                  ssq_err = std::max (ssq_err, fabs (ss[b] - t) / (t + 1e-30));
                }
            }
          snprintf (what, sizeof what, "  int8 output = the format applied to the f32 outputs (mismatches)");
          check (bad == 0, what, bad, 0);
          std::vector<float> deqf (deq.begin (), deq.end ());
          const double e2 = rel_err (deqf.data (), vref.data (), deqf.size (), &fin);
          /* int8 rounding: ~d/sqrt(12) an element, d = absmax/127 (heavy-tailed SwiGLU outputs: ~1e-2) */
          snprintf (what, sizeof what, "  int8 output dequantized vs f64 out*g");
          check (fin && e2 < 2e-2, what, e2, 2e-2);
          if (epi == HONE_K_EPI_ADD)
            {
              snprintf (what, sizeof what, "  sum of squares per 32 vs f64");
              check (ssq_err < 1e-5, what, ssq_err, 1e-5);
            }
        }
      else
        {
          /* bytes (poisoned NaN outputs a case does not write compare equal too) */
          same &= !memcmp (q.data (), q_first.data (), q.size ())
                  && !memcmp (ss.data (), ss_first.data (), ss.size () * 4)
                  && !memcmp (ds.data (), ds_first.data (), ds.size () * 8)
                  && (no_y || !memcmp (y.data (), y_first.data (), y.size () * 4));
        }
    }
  snprintf (what, sizeof what, "  second run: the same bits%s", y_null ? " (without the f32 output)" : "");
  check (same && ran, what, same ? 0 : 1, 0);
  hone_k_gemv_set_config (-1);
  matrix_free (&m);
  cudaFree (dxa); cudaFree (dpart); cudaFree (dbias); cudaFree (dgo); cudaFree (dres); cudaFree (xq.q); cudaFree (xq.ds);
  cudaFree (oq.q); cudaFree (oq.ds); cudaFree (dssq); cudaFree (dy);
}

/* Shapes the producer cannot take are refused (no launch, an error code). */
static void
check_epiq_refuses (void)
{
  std::vector<float> w ((size_t) 100 * 64, 0.01f);
  std::vector<double> wd;
  HoneKMatrix m = matrix_from_gguf (HONE_K_Q4_0, gguf_quantize (HONE_K_Q4_0, w, 100, 64, wd), 100, 64);
  HoneKActQ8 xq;
  xq.q = (int8_t *) dev_poisoned (128);
  xq.ds = (float2 *) dev_poisoned (64);
  float *dy = (float *) dev_poisoned (400);
  HoneKGemvOp op;
  memset (&op, 0, sizeof op);
  op.w = &m; op.n_tok = 1; op.xq = &xq; op.y = dy; op.res = dy; op.epilogue = HONE_K_EPI_ADD;
  HoneKEpiQ eq;
  memset (&eq, 0, sizeof eq);
  eq.out = xq;
  const unsigned r0 = hone_k_gemv_epiq_runs ();
  const int rc1 = hone_k_gemv_epiq (&op, &eq, NULL, 0);   /* 100 rows: not whole groups of 32 */
  op.n_tok = 2;
  memset (&eq, 0, sizeof eq);
  const int rc2 = hone_k_gemv_epiq (&op, &eq, NULL, 0);   /* two tokens */
  check (rc1 == cudaErrorInvalidValue && rc2 == cudaErrorInvalidValue && hone_k_gemv_epiq_runs () == r0
         && cudaGetLastError () == cudaSuccess, "epiq refuses 100 rows as a producer and 2 tokens", 0, 0);
  matrix_free (&m);
  cudaFree (xq.q); cudaFree (xq.ds); cudaFree (dy);
}

static void
check_epiq_all (bool small)
{
  for (int type : { HONE_K_Q8_0, HONE_K_Q4_0, HONE_K_Q4_1 })
    {
      /* odd shapes (3 groups, 18 blocks of 32 columns), every launch shape: clusters of 1/4/2/8 blocks */
      for (int cfg = -1; cfg < HONE_K_GEMV_CONFIGS; cfg++)
        check_epiq (type, 96, 576, HONE_K_EPI_ADD, 1, cfg);
      /* gate|up: consumer + SwiGLU producer (cfg 3 would need clusters of 16: cfg 1 instead) */
      for (int cfg = -1; cfg < HONE_K_GEMV_CONFIGS; cfg++)
        check_epiq (type, 2 * 224, 512, HONE_K_EPI_SWIGLU, 2, cfg);
      check_epiq (type, 2 * 224, 512, HONE_K_EPI_SWIGLU, 1, -1, true);
      /* the producers' own launch shape (HONE_EPIQ_PCFG): 32 rows a block, clusters of 1 / 2 */
      hone_k_gemv_epiq_set_producer_config (0);
      check_epiq (type, 96, 576, HONE_K_EPI_ADD, 1);
      check_epiq (type, 2 * 224, 512, HONE_K_EPI_SWIGLU, 2);
      hone_k_gemv_epiq_set_producer_config (-1);
      check_epiq (type, 1000, 256, HONE_K_EPI_STORE, 0);    /* consumer, rows not a multiple of 32, bias */
      if (!small)
        {
          check_epiq (type, 4096, 14336, HONE_K_EPI_ADD, 1);   /* down: 4 K slices, clusters of 8 */
          check_epiq (type, 2 * 1024, 4096, HONE_K_EPI_SWIGLU, 2);
          check_epiq (type, 4000, 4096, HONE_K_EPI_STORE, 0);
        }
    }
  check_epiq_refuses ();
}

/* rope in f64: pairs per pairing */
static void
rope_ref (double *v, int hd, int p, const std::vector<float> &inv_freq, int pairing)
{
  for (int i = 0; i < hd / 2; i++)
    {
      const int i0 = pairing == 0 ? 2 * i : i, i1 = pairing == 0 ? 2 * i + 1 : i + hd / 2;
      const double a = (double) p * inv_freq[i], c = cos (a), s = sin (a);
      const double x0 = v[i0], x1 = v[i1];
      v[i0] = x0 * c - x1 * s;
      v[i1] = x0 * s + x1 * c;
    }
}

/* A random paged cache: pages scattered through the pool. */
struct Cache {
  int nkv, hd, n_pages;
  std::vector<int32_t> table;
  std::vector<uint16_t> k, v;   /* pool, f16 bits */
  void *dk, *dv;
  int32_t *dtable;
};

static Cache
cache_make (int nkv, int hd, int max_tok, bool fill)
{
  Cache c;
  c.nkv = nkv;
  c.hd = hd;
  const int need = (max_tok + HONE_K_KV_BLOCK - 1) / HONE_K_KV_BLOCK;
  c.n_pages = need + 3;
  std::vector<int32_t> perm (c.n_pages);
  for (int i = 0; i < c.n_pages; i++) perm[i] = i;
  for (int i = c.n_pages - 1; i > 0; i--) std::swap (perm[i], perm[rng_u64 () % (i + 1)]);
  c.table.assign (perm.begin (), perm.begin () + need);
  const size_t n = (size_t) c.n_pages * nkv * HONE_K_KV_BLOCK * hd;
  c.k.resize (n);
  c.v.resize (n);
  for (size_t i = 0; i < n; i++)
    {
      c.k[i] = fill ? f2h (rng_normal ()) : 0xffff;
      c.v[i] = fill ? f2h (rng_normal ()) : 0xffff;
    }
  c.dk = dev_upload (c.k);
  c.dv = dev_upload (c.v);
  c.dtable = dev_upload (c.table);
  return c;
}

static size_t
cache_index (const Cache &c, int p, int kvh, int d)
{
  return (((size_t) c.table[p / HONE_K_KV_BLOCK] * c.nkv + kvh) * HONE_K_KV_BLOCK + p % HONE_K_KV_BLOCK) * c.hd + d;
}

static void
cache_free (Cache &c)
{
  cudaFree (c.dk); cudaFree (c.dv); cudaFree (c.dtable);
}

static void
check_rope_kv (int pairing, bool qk_norm, bool fused_gemv, int n_tok = 3, int pos = 101, int staged = -1,
               bool gemv_norm = false)
{
  const int nq = 8, nkv = 2, hd = 128;
  bool ran_staged = false;
  const int W = (nq + 2 * nkv) * hd;
  std::vector<float> qkv ((size_t) n_tok * W), qn (hd), kn (hd), g (W);
  for (auto &v : qkv) v = rng_normal ();
  for (auto &v : qn) v = 1 + 0.2f * rng_normal ();
  for (auto &v : kn) v = 1 + 0.2f * rng_normal ();
  for (auto &v : g) v = 1 + 0.3f * rng_normal ();
  /* gemv_norm: the GEMV's input is RMS-normalized by weights g first (op.norm_g, as decode_step's q|k|v) */
  std::vector<double> nsc (n_tok, 1.0);
  if (gemv_norm)
    for (int t = 0; t < n_tok; t++)
      {
        double ss = 0;
        for (int i = 0; i < W; i++) ss += (double) qkv[(size_t) t * W + i] * qkv[(size_t) t * W + i];
        nsc[t] = 1 / sqrt (ss / W + 1e-5);
      }
  const std::vector<float> inv = make_inv_freq (hd, 500000.0);
  Cache c = cache_make (nkv, hd, 256, false);
  float *dqkv = dev_upload (qkv), *dinv = dev_upload (inv), *dqn = dev_upload (qn), *dkn = dev_upload (kn);
  float *dg = dev_upload (g);
  std::vector<int32_t> posv = { pos };
  int32_t *dpos = dev_upload (posv);
  std::vector<float> got_q;
  if (!fused_gemv)
    {
      CK (hone_k_rope_kv (dqkv, n_tok, nq, nkv, hd, dpos, dinv, pairing, qk_norm ? dqn : NULL, qk_norm ? dkn : NULL,
                          1e-6f, c.dk, c.dv, c.dtable, 0));
      got_q = dev_download<float> (dqkv, qkv.size ());
    }
  else
    {
      /* GEMV with an identity-like BF16 matrix is not exact; instead use the
       * ROPE_KV epilogue on W = I (exact in bf16) so the input passes through. */
      std::vector<float> eye ((size_t) W * W, 0.f);
      for (int i = 0; i < W; i++) eye[(size_t) i * W + i] = 1.f;
      std::vector<double> wd;
      HoneKMatrix m = matrix_from_gguf (HONE_K_BF16, gguf_quantize (HONE_K_BF16, eye, W, W, wd), W, W);
      float *dy = (float *) dev_poisoned (qkv.size () * 4);
      HoneKGemvOp op;
      memset (&op, 0, sizeof op);
      op.w = &m; op.x = dqkv; op.n_tok = n_tok; op.y = dy; op.epilogue = HONE_K_EPI_ROPE_KV;
      op.nq = nq; op.nkv = nkv; op.hd = hd; op.pos = dpos; op.inv_freq = dinv;
      op.k_pool = c.dk; op.v_pool = c.dv; op.block_table = c.dtable;
      if (gemv_norm)
        {
          op.norm_g = dg;
          op.eps = 1e-5f;
        }
      if (staged >= 0)
        hone_k_gemv_set_staged (staged);
      const unsigned runs0 = hone_k_gemv_staged_runs ();
      CK (hone_k_gemv_ex (&op, 0));
      ran_staged = hone_k_gemv_staged_runs () != runs0;
      hone_k_gemv_set_staged (-1);
      got_q = dev_download<float> (dy, qkv.size ());
      matrix_free (&m);
      cudaFree (dy);
    }
  const std::vector<uint16_t> gk = dev_download<uint16_t> (c.dk, c.k.size ()), gv = dev_download<uint16_t> (c.dv, c.v.size ());
  std::vector<float> gq, gkv;
  std::vector<double> rq, rkv;
  for (int t = 0; t < n_tok; t++)
    for (int h = 0; h < nq + 2 * nkv; h++)
      {
        double v[256];
        for (int d = 0; d < hd; d++)
          v[d] = qkv[(size_t) t * W + h * hd + d] * (gemv_norm ? g[h * hd + d] * nsc[t] : 1.0);
        if (h < nq + nkv)
          {
            if (qk_norm)
              {
                double ss = 0;
                for (int d = 0; d < hd; d++) ss += v[d] * v[d];
                const double sc = 1 / sqrt (ss / hd + 1e-6);
                for (int d = 0; d < hd; d++) v[d] *= sc * (h < nq ? qn[d] : kn[d]);
              }
            rope_ref (v, hd, pos + t, inv, pairing);
          }
        for (int d = 0; d < hd; d++)
          {
            if (h < nq)
              {
                gq.push_back (got_q[(size_t) t * W + h * hd + d]);
                rq.push_back (v[d] / sqrt ((double) hd));
              }
            else
              {
                const bool isk = h < nq + nkv;
                const int kvh = h - nq - (isk ? 0 : nkv);
                gkv.push_back (h2f ((isk ? gk : gv)[cache_index (c, pos + t, kvh, d)]));
                rkv.push_back (v[d]);
              }
          }
      }
  bool f1, f2;
  const double e1 = rel_err (gq.data (), rq.data (), gq.size (), &f1);
  const double e2 = rel_err (gkv.data (), rkv.data (), gkv.size (), &f2);
  char what[128];
  const bool path_ok = staged != 1 || ran_staged;
  const char *fused = !fused_gemv ? "rope_kv" : gemv_norm ? "gemv ROPE_KV epilogue, normed input" : "gemv ROPE_KV epilogue";
  snprintf (what, sizeof what, "%s pairing=%s%s tok=%d pos=%d%s: q", fused, pairing ? "half" : "adjacent",
            qk_norm ? " qk-norm" : "", n_tok, pos, ran_staged ? staged_tag : "");
  check (f1 && e1 < 1e-5 && path_ok, what, e1, 1e-5);
  snprintf (what, sizeof what, "%s pairing=%s%s tok=%d pos=%d%s: k,v pages (f16)", fused,
            pairing ? "half" : "adjacent", qk_norm ? " qk-norm" : "", n_tok, pos, ran_staged ? staged_tag : "");
  check (f2 && e2 < 1e-3 && path_ok, what, e2, 1e-3);
  cache_free (c);
  cudaFree (dqkv); cudaFree (dinv); cudaFree (dqn); cudaFree (dkn); cudaFree (dpos); cudaFree (dg);
}

/* f64 attention of token t (absolute position pos+t) over keys 0..pos+t. q in f32 (scaled). */
static void
attn_ref (const Cache &c, const float *q, int qh, int G, int last_key, double *out, bool q_f16)
{
  const int hd = c.hd, kvh = qh / G;
  std::vector<double> s (last_key + 1);
  double mx = -1e300;
  for (int j = 0; j <= last_key; j++)
    {
      double d = 0;
      for (int i = 0; i < hd; i++)
        d += (q_f16 ? (double) h2f (f2h (q[i])) : (double) q[i]) * h2f (c.k[cache_index (c, j, kvh, i)]);
      s[j] = d;
      mx = std::max (mx, d);
    }
  double sum = 0;
  for (int j = 0; j <= last_key; j++) { s[j] = exp (s[j] - mx); sum += s[j]; }
  for (int i = 0; i < hd; i++)
    {
      double o = 0;
      for (int j = 0; j <= last_key; j++) o += s[j] * h2f (c.v[cache_index (c, j, kvh, i)]);
      out[i] = o / sum;
    }
}

/* prefill: out_type f32/bf16/f16 (hone_k_attn_prefill_ex); ver: HONE_ATTN_PREFILL (0 the default,
 * 1 session 1's kernel, 2 / 3 version 2 with 8 / 4 warps) */
static void
check_attn (bool prefill, int hd, int nq, int nkv, int pos, int n_tok, int out_type = HONE_K_F32, int ver = 0)
{
  const int W = (nq + 2 * nkv) * hd, G = nq / nkv;
  Cache c = cache_make (nkv, hd, pos + n_tok, true);
  std::vector<float> qkv ((size_t) n_tok * W);
  for (auto &v : qkv) v = rng_normal () * 0.3f;   /* scores of a few units: a peaked softmax */
  float *dqkv = dev_upload (qkv);
  std::vector<int32_t> posv = { pos };
  int32_t *dpos = dev_upload (posv);
  float *dout = (float *) dev_poisoned ((size_t) n_tok * nq * hd * 4);
  void *scratch = NULL;
  if (prefill)
    {
      if (ver)
        setenv ("HONE_ATTN_PREFILL", ver == 1 ? "1" : ver == 2 ? "2" : "3", 1);
      CK (hone_k_attn_prefill_ex (dqkv, n_tok, nq, nkv, hd, pos, c.dk, c.dv, c.dtable, dout, out_type, 0));
      unsetenv ("HONE_ATTN_PREFILL");
    }
  else
    {
      const size_t sb = hone_k_attn_scratch_bytes (nq, nkv, hd, n_tok);
      CK (cudaMalloc (&scratch, sb));
      CK (cudaMemset (scratch, 0, sb));
      /* run twice: the split counters must come back to zero */
      CK (hone_k_attn_decode (dqkv, n_tok, nq, nkv, hd, dpos, c.dk, c.dv, c.dtable, scratch, dout, 0));
      CK (cudaMemset (dout, 0xff, (size_t) n_tok * nq * hd * 4));
      CK (hone_k_attn_decode (dqkv, n_tok, nq, nkv, hd, dpos, c.dk, c.dv, c.dtable, scratch, dout, 0));
    }
  std::vector<float> got;
  if (out_type == HONE_K_F32)
    got = dev_download<float> (dout, (size_t) n_tok * nq * hd);
  else
    {
      const std::vector<uint16_t> g16 = dev_download<uint16_t> (dout, (size_t) n_tok * nq * hd);
      for (uint16_t u : g16) got.push_back (out_type == HONE_K_BF16 ? bf2f (u) : h2f (u));
    }
  std::vector<double> ref ((size_t) n_tok * nq * hd);
  for (int t = 0; t < n_tok; t++)
    for (int h = 0; h < nq; h++)
      attn_ref (c, &qkv[(size_t) t * W + h * hd], h, G, pos + t, &ref[((size_t) t * nq + h) * hd], prefill);
  bool fin;
  const double e = rel_err (got.data (), ref.data (), got.size (), &fin);
  /* prefill: f16 P and q on the tensor cores; a bf16 output adds its rounding (2^-9) */
  const double bound = !prefill ? 1e-4 : out_type == HONE_K_BF16 ? 8e-3 : 5e-3;
  char what[128];
  snprintf (what, sizeof what, "attn %s%s hd=%d heads %d/%d pos=%d tok=%d%s", prefill ? "prefill" : "decode",
            !prefill ? "" : ver == 1 ? " v1" : ver == 2 ? " v2/8w" : ver == 3 ? " v2/4w" : " v2", hd, nq, nkv, pos, n_tok,
            out_type == HONE_K_BF16 ? " out bf16" : out_type == HONE_K_F16 ? " out f16" : "");
  check (fin && e < bound, what, e, bound);
  cache_free (c);
  cudaFree (dqkv); cudaFree (dpos); cudaFree (dout);
  if (scratch) cudaFree (scratch);
}

/* Prefill GEMM (cuBLASLt, or cublasGemmEx with HONE_GEMM=gemmex) against f64:
 * y = x·Wᵀ with W as uploaded (quantized W dequantized by the GEMM path),
 * f32 out (plain and accumulating) and 16-bit out. */
static void
check_gemm (int type, int rows, int cols, int n, bool gemmex, bool tune = false)
{
  std::vector<float> w ((size_t) rows * cols);
  for (auto &v : w) v = rng_normal ();
  std::vector<double> wd;
  HoneKMatrix m = matrix_from_gguf (type, gguf_quantize (type, w, rows, cols, wd), rows, cols);
  const bool bf = m.type == HONE_K_BF16;
  /* a one-layer model only to size the state (w16 scratch for quantized W) */
  HoneKModel mod;
  memset (&mod, 0, sizeof mod);
  HoneKLayer lay;
  memset (&lay, 0, sizeof lay);
  lay.wqkv = m;
  lay.wo.type = lay.wgu.type = lay.wdown.type = HONE_K_BF16;
  mod.cfg.n_layers = 1; mod.cfg.hidden = cols; mod.cfg.n_heads = 1; mod.cfg.n_kv_heads = 1; mod.cfg.head_dim = 64;
  mod.cfg.ffn = rows; mod.cfg.vocab = 32;
  mod.layers = &lay;
  mod.lm_head.type = HONE_K_BF16;
  HoneKState st;
  CK (hone_k_state_alloc (&st, &mod, std::max (n, HONE_K_MAX_DECODE + 1), HONE_K_MAX_DECODE));
  std::vector<uint16_t> x16 ((size_t) n * cols);
  std::vector<double> xd (x16.size ());
  for (size_t i = 0; i < x16.size (); i++)
    {
      const float v = rng_normal ();
      x16[i] = bf ? f2bf (v) : f2h (v);
      xd[i] = bf ? bf2f (x16[i]) : h2f (x16[i]);
    }
  std::vector<float> y0 ((size_t) n * rows);
  for (auto &v : y0) v = rng_normal ();
  uint16_t *dx = dev_upload (x16);
  float *dy = dev_upload (y0);
  void *dy16 = dev_poisoned (y0.size () * 2);
  if (gemmex)
    setenv ("HONE_GEMM", "gemmex", 1);
  if (tune)
    setenv ("HONE_GEMM_TUNE", "1", 1);
  std::vector<double> ref (y0.size ());
  for (int t = 0; t < n; t++)
    for (int r = 0; r < rows; r++)
      {
        double acc = 0;
        for (int k = 0; k < cols; k++) acc += wd[(size_t) r * cols + k] * xd[(size_t) t * cols + k];
        ref[(size_t) t * rows + r] = acc;
      }
  char what[128];
  bool fin;
  for (int mode = 0; mode < 3; mode++)
    {
      /* 0: f32 out, 1: f32 out accumulated onto y0 (the residual), 2: 16-bit out */
      if (mode == 1 && gemmex)
        continue;
      if (mode < 2)
        {
          CK (cudaMemcpy (dy, y0.data (), y0.size () * 4, cudaMemcpyHostToDevice));
          if (mode == 0)
            CK (cudaMemset (dy, 0xff, y0.size () * 4));
          CK (hone_k_gemm (&st, &m, n, dx, dy, HONE_K_F32, mode, 0));
        }
      else
        CK (hone_k_gemm (&st, &m, n, dx, dy16, bf ? HONE_K_BF16 : HONE_K_F16, 0, 0));
      std::vector<float> got;
      if (mode < 2)
        got = dev_download<float> (dy, y0.size ());
      else
        for (uint16_t u : dev_download<uint16_t> (dy16, y0.size ())) got.push_back (bf ? bf2f (u) : h2f (u));
      std::vector<double> r2 = ref;
      if (mode == 1)
        for (size_t i = 0; i < r2.size (); i++) r2[i] += y0[i];
      const double e = rel_err (got.data (), r2.data (), got.size (), &fin);
      /* f32 accumulation of exact products: ~1e-7; a quantized W is dequantized
       * to f16 first (2^-11 a weight); a 16-bit output adds its rounding */
      const double bound = mode < 2 ? (bf ? 1e-5 : 1e-3) : bf ? 4e-3 : 2e-3;
      snprintf (what, sizeof what, "gemm %s %s %dx%d n=%d %s", gemmex ? "gemmex" : tune ? "cublasLt tuned" : "cublasLt",
                type_name (type), rows,
                cols, n, mode == 0 ? "f32 out" : mode == 1 ? "f32 += (residual)" : bf ? "bf16 out" : "f16 out");
      check (fin && e < bound, what, e, bound);
    }
  unsetenv ("HONE_GEMM");
  unsetenv ("HONE_GEMM_TUNE");
  hone_k_state_free (&st);
  matrix_free (&m);
  cudaFree (dx); cudaFree (dy); cudaFree (dy16);
}

/* Decode attention as decode_step runs it for a quantized o projection: with
 * an L2 prefetch of another buffer in flight and the output also written as
 * int8 blocks. The f32 output must be the plain kernel's bits (and within the
 * f64 bound), the int8 copy hone_k_quantize's bits of it. */
static void
check_attn_decode_q (int hd, int nq, int nkv, int pos, int n_tok)
{
  const int W = (nq + 2 * nkv) * hd, G = nq / nkv, n = n_tok * nq * hd;
  Cache c = cache_make (nkv, hd, pos + n_tok, true);
  std::vector<float> qkv ((size_t) n_tok * W);
  for (auto &v : qkv) v = rng_normal () * 0.3f;
  float *dqkv = dev_upload (qkv);
  std::vector<int32_t> posv = { pos };
  int32_t *dpos = dev_upload (posv);
  float *d0 = (float *) dev_poisoned ((size_t) n * 4), *d1 = (float *) dev_poisoned ((size_t) n * 4);
  HoneKActQ8 q1 = { (int8_t *) dev_poisoned (n), (float2 *) dev_poisoned ((size_t) n / 32 * 8) };
  HoneKActQ8 q0 = { (int8_t *) dev_poisoned (n), (float2 *) dev_poisoned ((size_t) n / 32 * 8) };
  const size_t sb = hone_k_attn_scratch_bytes (nq, nkv, hd, n_tok);
  void *scratch;
  CK (cudaMalloc (&scratch, sb));
  CK (cudaMemset (scratch, 0, sb));
  HoneKPrefetch pf;
  memset (&pf, 0, sizeof pf);
  pf.p[0] = (const char *) c.dk;
  pf.n[0] = 4096;
  pf.p[1] = (const char *) c.dv;
  pf.n[1] = 128 * 3;
  CK (hone_k_attn_decode (dqkv, n_tok, nq, nkv, hd, dpos, c.dk, c.dv, c.dtable, scratch, d0, 0));
  CK (hone_k_quantize (d0, n_tok, nq * hd, &q0, NULL, 0, 0));
  CK (hone_k_attn_decode_pf (dqkv, n_tok, nq, nkv, hd, dpos, c.dk, c.dv, c.dtable, scratch, d1, &q1, &pf, 0));
  CK (cudaDeviceSynchronize ());
  const std::vector<float> o0 = dev_download<float> (d0, n), o1 = dev_download<float> (d1, n);
  const std::vector<int8_t> qa = dev_download<int8_t> (q0.q, n), qb = dev_download<int8_t> (q1.q, n);
  const std::vector<float2> da = dev_download<float2> (q0.ds, n / 32), db = dev_download<float2> (q1.ds, n / 32);
  size_t diff = memcmp (o0.data (), o1.data (), (size_t) n * 4) != 0;
  diff += memcmp (qa.data (), qb.data (), n) != 0;
  diff += memcmp (da.data (), db.data (), (size_t) n / 32 * 8) != 0;
  std::vector<double> ref (n);
  for (int t = 0; t < n_tok; t++)
    for (int h = 0; h < nq; h++)
      attn_ref (c, &qkv[(size_t) t * W + h * hd], h, G, pos + t, &ref[((size_t) t * nq + h) * hd], false);
  bool fin;
  const double e = rel_err (o1.data (), ref.data (), n, &fin);
  char what[128];
  snprintf (what, sizeof what, "attn decode +int8 out +prefetch hd=%d %d/%d pos=%d tok=%d", hd, nq, nkv, pos, n_tok);
  check (fin && e < 1e-4 && diff == 0, what, diff ? (double) diff : e, 1e-4);
  cache_free (c);
  cudaFree (dqkv); cudaFree (dpos); cudaFree (d0); cudaFree (d1); cudaFree (scratch);
  cudaFree (q0.q); cudaFree (q0.ds); cudaFree (q1.q); cudaFree (q1.ds);
}

/* The staged GEMV forced on (the check fails if the shape fell back): one
 * token, every type, odd rows, short and 14336-column rows, bias, every
 * epilogue, the norm, quantized weights given the int8 input (copied into
 * shared memory) or the f32 input (normalized and quantized by the kernel),
 * fewer rows than SMs. small: a subset for compute-sanitizer. */
static void
check_staged_gemvs (bool small)
{
  for (int type : { HONE_K_BF16, HONE_K_F16, HONE_K_Q8_0, HONE_K_Q4_0, HONE_K_Q4_1 })
    {
      const bool quant = !(type == HONE_K_BF16 || type == HONE_K_F16);
      check_gemv (type, 1031, 512, 1, HONE_K_EPI_STORE, false, false, 1);     /* odd rows, bias */
      check_gemv (type, 2 * 350, 1024, 1, HONE_K_EPI_SWIGLU, true, false, 1);
      check_gemv (type, 3, 256, 1, HONE_K_EPI_STORE, false, false, 1);        /* 3 blocks of one row */
      if (quant)
        {
          check_gemv (type, 2 * 350, 1024, 1, HONE_K_EPI_SWIGLU, true, true, 1);
          check_gemv (type, 1031, 512, 1, HONE_K_EPI_ADD, false, true, 1);
        }
      if (small)
        continue;
      check_gemv (type, 1030, 256, 1, HONE_K_EPI_ADD, false, false, 1);
      check_gemv (type, 13000, 512, 1, HONE_K_EPI_STORE, true, false, 1);
      check_gemv (type, 4000, 256, 1, HONE_K_EPI_ADD, false, false, 1);
      check_gemv (type, 16500, 256, 1, HONE_K_EPI_STORE, false, false, 1);
      check_gemv (type, 300, 8192, 1, HONE_K_EPI_ADD, false, false, 1);
      check_gemv (type, 770, 4096, 1, HONE_K_EPI_STORE, true, quant, 1);     /* qkv-like, norm */
      check_gemv (type, 257, 14336, 1, HONE_K_EPI_ADD, false, quant, 1);     /* down-like */
      check_gemv (type, 200, 14336, 1, HONE_K_EPI_STORE, false, false, 1);
      check_gemv (type, 33, 768, 1, HONE_K_EPI_ADD, false, quant, 1);        /* fewer rows than SMs */
      if (quant)
        check_gemv (type, 200, 32768, 1, HONE_K_EPI_STORE, false, true, 1);
    }
  /* RoPE + paged KV writes: the last slot of a page and the first of the next */
  check_rope_kv (0, false, true, 1, 63, 1);
  check_rope_kv (0, false, true, 1, 64, 1);
}

static void
check_sample (void)
{
  /* greedy */
  const int vocab = 50000, n_tok = 3;
  std::vector<float> l ((size_t) n_tok * vocab);
  for (auto &v : l) v = rng_normal () * 3;
  float *dl = dev_upload (l);
  int32_t *dout = (int32_t *) dev_poisoned (n_tok * 4);
  void *scr;
  CK (cudaMalloc (&scr, HONE_K_SAMPLE_SCRATCH_BYTES (n_tok)));
  CK (cudaMemset (scr, 0, HONE_K_SAMPLE_SCRATCH_BYTES (n_tok)));
  for (int many : { 0, 1, 1 })   /* one block a row; many blocks, twice (the tickets must have wrapped to 0) */
    {
      CK (cudaMemset (dout, 0xff, n_tok * 4));
      CK (hone_k_sample (dl, n_tok, vocab, 0.f, 1, NULL, dout, many ? scr : NULL, 0));
      const std::vector<int32_t> got = dev_download<int32_t> (dout, n_tok);
      bool ok = true;
      for (int t = 0; t < n_tok; t++)
        ok &= got[t] == (int) (std::max_element (l.begin () + (size_t) t * vocab, l.begin () + (size_t) (t + 1) * vocab)
                               - (l.begin () + (size_t) t * vocab));
      check (ok, many ? "sample greedy = argmax (3 rows × 50000, 128 blocks a row)" : "sample greedy = argmax (3 rows × 50000, a block a row)",
             ok ? 0 : 1, 0);
    }
  /* the Gumbel draws are the same keys whichever form reduces them */
  {
    int32_t *d2 = (int32_t *) dev_poisoned (n_tok * 4);
    CK (hone_k_sample (dl, n_tok, vocab, 0.9f, 5, NULL, dout, NULL, 0));
    CK (hone_k_sample (dl, n_tok, vocab, 0.9f, 5, NULL, d2, scr, 0));
    const bool same = dev_download<int32_t> (dout, n_tok) == dev_download<int32_t> (d2, n_tok);
    check (same, "sample Gumbel T=0.9: 128 blocks a row draw what one block a row draws (3 rows)", same ? 0 : 1, 0);
    cudaFree (d2);
  }
  /* Gumbel-max: frequencies of 8 logits at T=0.7 over 20000 steps vs softmax */
  const int V = 8, N = 20000;
  std::vector<float> l8 (V);
  for (auto &v : l8) v = rng_normal ();
  float *dl8 = dev_upload (l8);
  int32_t *dstep, *dids;
  CK (cudaMalloc (&dstep, 4 * N));
  CK (cudaMalloc (&dids, 4 * N));
  std::vector<int32_t> steps (N);
  for (int i = 0; i < N; i++) steps[i] = i;
  CK (cudaMemcpy (dstep, steps.data (), 4 * N, cudaMemcpyHostToDevice));
  for (int i = 0; i < N; i++)
    CK (hone_k_sample (dl8, 1, V, 0.7f, 42, dstep + i, dids + i, scr, 0));
  const std::vector<int32_t> ids = dev_download<int32_t> (dids, N);
  std::vector<double> p (V), cnt (V, 0);
  double z = 0;
  for (int i = 0; i < V; i++) { p[i] = exp (l8[i] / 0.7); z += p[i]; }
  for (int i = 0; i < N; i++) if (ids[i] >= 0 && ids[i] < V) cnt[ids[i]]++;
  double chi2 = 0;
  for (int i = 0; i < V; i++) { const double e = N * p[i] / z; chi2 += (cnt[i] - e) * (cnt[i] - e) / e; }
  check (chi2 < 24.3, "sample Gumbel-max T=0.7: chi² of 20000 draws, 7 dof (p=0.001)", chi2, 24.3);
  cudaFree (dl); cudaFree (dout); cudaFree (dl8); cudaFree (dstep); cudaFree (dids); cudaFree (scr);
}

/* The device sampler chain's pick (hone_k_sample_chain, no penalties) computed
 * on the host as its header states it; *edge = the distance from u to the
 * nearest cumulative boundary (a rounding of the device's sums can move the
 * pick only when that is tiny). whole: the chain walks the whole row where
 * the answer lies past the 256 best (the many-block chain: the host sampler's
 * pick, by value then id); otherwise -1 where the top-k-less set reaches
 * past them (the one-block chain). */
static int
chain_ref (const float *l, int V, const HoneKSampleParams &p, double *edge, bool whole)
{
  *edge = 1.0;
  std::vector<std::pair<float, int>> k;
  float mx = -INFINITY;
  int am = 0;
  for (int i = 0; i < V; i++)
    {
      const float v = l[i] != l[i] ? -INFINITY : l[i];
      if (v > mx) { mx = v; am = i; }
      k.push_back ({ v, i });
    }
  if (p.temperature <= 0.f)
    return am;
  double sum = 0;
  for (int i = 0; i < V; i++)
    if (l[i] == l[i])
      sum += (double) expf ((l[i] - mx) / p.temperature);
  std::sort (k.begin (), k.end (), [] (const std::pair<float, int> &a, const std::pair<float, int> &b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second; });
  const bool topk = p.top_k > 0 && p.top_k < V;
  const int K = topk ? std::min (p.top_k, HONE_K_SAMPLE_MAX_K) : whole ? V : std::min (V, HONE_K_SAMPLE_MAX_K);
  std::vector<double> pr (K);
  for (int i = 0; i < K; i++)
    pr[i] = (float) ((double) expf ((k[i].first - mx) / p.temperature) / sum);
  int n = K;
  bool cut = false;
  double mass = 1.0;
  if (topk) { mass = 0; for (int i = 0; i < n; i++) mass += (float) pr[i]; }
  if (p.top_p < 1.f)
    {
      double cum = 0;
      for (int i = 0; i < n; i++)
        {
          cum += (float) pr[i] / mass;
          *edge = std::min (*edge, fabs (cum - p.top_p));
          if (cum >= p.top_p) { n = i + 1; cut = true; break; }
        }
    }
  if (p.min_p > 0.f)
    {
      int kept = 1;
      while (kept < n && (float) pr[kept] >= (float) pr[0] * p.min_p)
        kept++;
      cut = cut || kept < n;
      n = kept;
    }
  if (!topk && V > K && !cut)
    return -1;
  mass = 0;
  for (int i = 0; i < n; i++) mass += (float) pr[i];
  double cum = 0;
  for (int i = 0; i < n; i++)
    {
      cum += (float) ((float) pr[i] / mass);
      *edge = std::min (*edge, fabs (p.u - cum));
      if (p.u < cum)
        return k[i].second;
    }
  return k[n - 1].second;
}

/* Both samplers over rows that start 4, 8 or 12 bytes past a 16-byte boundary
 * (an odd vocabulary: hone-k-logits.cuh reads the first and last values one
 * by one), with ties and a NaN, against host references. */
static void
check_sample_rows (void)
{
  const int V = 50001;
  std::vector<float> buf (4 + 4 * (size_t) V);
  for (auto &v : buf) v = (float) (rng_normal () * 3);
  float *d = dev_upload (buf);
  int32_t *dout = (int32_t *) dev_poisoned (16);
  void *scr;
  CK (cudaMalloc (&scr, HONE_K_SAMPLE_CHAIN_SCRATCH_BYTES));
  CK (cudaMemset (scr, 0, HONE_K_SAMPLE_CHAIN_SCRATCH_BYTES));
  int bad = 0, n = 0, edges = 0;
  for (int off : { 0, 1, 2, 3 })
    {
      float *row = buf.data () + off;
      /* ties at the top (the lower id must win), a NaN (never the pick) */
      const int a = (int) (rng_u64 () % V), b2 = (int) (rng_u64 () % V);
      row[a] = row[b2] = 40.f + (float) off;
      row[(a + 7) % V] = NAN;
      CK (cudaMemcpy (d + off, row, (size_t) V * 4, cudaMemcpyHostToDevice));
      double edge;
      HoneKSampleParams p;
      memset (&p, 0, sizeof p);
      p.repeat_penalty = 1.f;
      p.top_p = 1.f;
      const int want = chain_ref (row, V, p, &edge, true);
      for (void *sc : { (void *) NULL, scr })
        {
          CK (hone_k_sample (d + off, 1, V, 0.f, 1, NULL, dout, sc, 0));
          bad += dev_download<int32_t> (dout, 1)[0] != want;
          CK (hone_k_sample_chain (d + off, V, &p, NULL, dout, sc, 0));
          bad += dev_download<int32_t> (dout, 1)[0] != want;
          n += 2;
        }
      /* sampled: the CLI's defaults, and top-p alone (the 256 best must hold the nucleus) */
      for (int c = 0; c < 2; c++)
        for (double u : { 0.03, 0.31, 0.62, 0.97 })
          {
            p.temperature = c ? 1.5f : 0.8f;
            p.top_k = c ? 0 : 40;
            p.top_p = c ? 0.5f : 0.95f;
            p.min_p = c ? 0.f : 0.05f;
            p.u = u;
            const int w = chain_ref (row, V, p, &edge, true);
            CK (hone_k_sample_chain (d + off, V, &p, NULL, dout, scr, 0));
            const int got = dev_download<int32_t> (dout, 1)[0];
            if (got != w && edge < 1e-5)
              edges++;
            else
              bad += got != w;
            n++;
          }
    }
  check (bad == 0, "samplers over rows 4/8/12 bytes off 16-byte alignment, ties, a NaN: greedy and chain vs host",
         bad, 0);
  /* the chain over many blocks against the one-block chain (no scratch) and the host: settings × draws, three
   * vocabularies (≤ 256: every value a candidate; odd; past the many-block form's 262,144: one block for both),
   * a row of equal values (more ties than the one block's 512 candidates: it leaves them to the host, −1; the
   * many-block chain ranks by value and id, as the host, and draws), and a row of values rounded to 0.5 (ties
   * at every slice's and the row's K-th value). The settings past the 256 best (pure temperature, a wide
   * top-p or min-p: the many-block chain walks the whole row, the one block answers −1) come last. */
  int diff = 0, cmp = 0, past = 0;
  const struct { float T; int k; float tp, mp; } set[] = {
    { 0.8f, 40, 0.95f, 0.05f }, { 1.0f, 1, 1.f, 0.f }, { 1.5f, 256, 1.f, 0.f }, { 0.7f, 40, 0.9f, 0.f },
    { 2.0f, 0, 0.5f, 0.f }, { 0.3f, 0, 1.f, 0.1f },
    { 1.0f, 0, 1.f, 0.f }, { 6.0f, 0, 1.f, 0.f }, { 4.0f, 0, 0.95f, 0.f }, { 5.0f, 0, 1.f, 0.02f },
    { 3.0f, 0, 0.9f, 0.01f } };
  const int n_set = (int) (sizeof set / sizeof set[0]);
  for (int V2 : { 200, 50001, 300000 })
    for (int flat : { 0, 1, 2 })   /* 1: equal values, 2: rounded to 0.5 */
      {
        if (flat && V2 != 50001)
          continue;
        std::vector<float> r (V2);
        for (auto &v : r) v = flat == 1 ? 1.5f : flat == 2 ? roundf ((float) rng_normal () * 6) * 0.5f : (float) (rng_normal () * 3);
        float *dr = dev_upload (r);
        for (const auto &c : set)
          for (int d = 0; d < 8; d++)
            {
              HoneKSampleParams p;
              memset (&p, 0, sizeof p);
              p.repeat_penalty = 1.f;
              p.temperature = c.T;
              p.top_k = c.k;
              p.top_p = c.tp;
              p.min_p = c.mp;
              p.u = rng_uniform ();
              CK (hone_k_sample_chain (dr, V2, &p, NULL, dout, NULL, 0));
              const int one = dev_download<int32_t> (dout, 1)[0];
              CK (hone_k_sample_chain (dr, V2, &p, NULL, dout, scr, 0));
              const int many = dev_download<int32_t> (dout, 1)[0];
              double edge, edge1;
              const int want = chain_ref (r.data (), V2, p, &edge, V2 <= 262144),
                        want1 = chain_ref (r.data (), V2, p, &edge1, false);
              edge = std::min (edge, edge1);
              cmp++;
              past += V2 <= 262144 && want1 == -1;
              /* the many-block chain (unique keys: ties never make it give up; past the 256 best it walks the
               * row) = the host's pick everywhere; the one-block chain the same within the 256 best (−1 past
               * them), but for the equal-values row, whose crowd of ties it leaves to the host (−1) */
              if (!(many == want && (one == want1 || (flat == 1 && one == -1))) && edge >= 1e-5)
                {
                  if (diff < 5)
                    report ("  chain V=%d%s T=%g k=%d p=%g min-p=%g u=%.4f: one block %d (host %d), many %d (host %d)\n", V2,
                            flat == 1 ? " (equal values)" : flat == 2 ? " (rounded)" : "", c.T, c.k, c.tp, c.mp, p.u,
                            one, want1, many, want);
                  diff++;
                }
            }
        cudaFree (dr);
      }
  report ("  (%d of the many-block chain's draws lay past the 256 best: the whole row walked)\n", past);
  check (diff == 0 && cmp == n_set * 8 * 5 && past >= 60,
         "sampler chain over 128 blocks = the host, the one-block chain the same or -1 past the 256 best "
         "(11 settings × 8 draws, 5 rows)", diff, 0);
  /* penalties (applied per slice by the many-block form): against the one-block chain and the host, which
   * applies them to a copy of the row; half the window among the 20 best values so that they move the picks,
   * with repeats (counts), and a repeat penalty that lowers and one that raises */
  int pdiff = 0, pcmp = 0;
  for (int V2 : { 200, 50001 })
    {
      std::vector<float> r (V2);
      for (auto &v : r) v = (float) (rng_normal () * 3);
      std::vector<int> order (V2);
      for (int i = 0; i < V2; i++) order[i] = i;
      std::partial_sort (order.begin (), order.begin () + 20, order.end (), [&] (int a, int b) { return r[a] > r[b]; });
      std::vector<int32_t> win (64);
      for (int j = 0; j < 64; j++) win[j] = j % 2 ? order[rng_u64 () % 20] : (int32_t) (rng_u64 () % V2);
      float *dr = dev_upload (r);
      int32_t *dw = dev_upload (win);
      for (float rp : { 1.3f, 0.8f })
        for (int c = 0; c < 3; c++)
          for (int d = 0; d < 4; d++)
            {
              HoneKSampleParams p;
              memset (&p, 0, sizeof p);
              p.temperature = c == 0 ? 0.f : c == 1 ? 0.8f : 1.0f;
              p.top_k = c == 1 ? 40 : c == 2 ? 256 : 0;
              p.top_p = c == 1 ? 0.95f : 1.f;
              p.min_p = c == 1 ? 0.05f : 0.f;
              p.repeat_penalty = rp;
              p.presence_penalty = 0.5f;
              p.frequency_penalty = 0.2f;
              p.n_window = 64;
              p.u = rng_uniform ();
              std::vector<float> pr = r;
              for (int j = 0; j < 64; j++)
                {
                  const int t = win[j];
                  int count = 0, first = j;
                  for (int k = 63; k >= 0; k--)
                    if (win[k] == t) { count++; first = k; }
                  if (first != j)
                    continue;
                  float v = r[t];
                  v = v > 0.0f ? v / rp : v * rp;
                  v -= (float) count * p.frequency_penalty + p.presence_penalty;
                  pr[t] = v;
                }
              double edge;
              const int want = chain_ref (pr.data (), V2, p, &edge, false);   /* top-k or greedy: never past */
              CK (hone_k_sample_chain (dr, V2, &p, dw, dout, NULL, 0));
              const int one = dev_download<int32_t> (dout, 1)[0];
              CK (hone_k_sample_chain (dr, V2, &p, dw, dout, scr, 0));
              const int many = dev_download<int32_t> (dout, 1)[0];
              pcmp++;
              if ((one != many || many != want) && edge >= 1e-5)
                {
                  if (pdiff < 5)
                    report ("  chain with penalties V=%d repeat %g T=%g k=%d u=%.4f: one block %d, many %d, host %d\n",
                            V2, rp, p.temperature, p.top_k, p.u, one, many, want);
                  pdiff++;
                }
            }
      cudaFree (dr);
      cudaFree (dw);
    }
  check (pdiff == 0 && pcmp == 2 * 2 * 3 * 4,
         "sampler chain with penalties over 128 blocks = the one-block chain = the host (2 rows × 2 × 3 settings × 4)",
         pdiff, 0);
  if (edges)
    report ("  (%d of %d draws within 1e-5 of a cumulative boundary: not compared)\n", edges, n);
  cudaFree (d); cudaFree (dout); cudaFree (scr);
}

/* --bench-sample: µs a call of each sampler over one 128,256-float row held in
 * L2 (as after the lm_head), 200 calls back to back. */
static void
bench_sample (void)
{
  for (int V : { 128256, 151936 })
    {
      std::vector<float> l (V);
      for (auto &v : l) v = (float) (rng_normal () * 3);
      float *d = dev_upload (l);
      int32_t *dout = (int32_t *) dev_poisoned (16), *dwin;
      void *scr;
      CK (cudaMalloc (&scr, HONE_K_SAMPLE_CHAIN_SCRATCH_BYTES));
      CK (cudaMemset (scr, 0, HONE_K_SAMPLE_CHAIN_SCRATCH_BYTES));
      std::vector<int32_t> win (64);
      for (auto &w : win) w = (int32_t) (rng_u64 () % V);
      dwin = dev_upload (win);
      cudaEvent_t e0, e1;
      CK (cudaEventCreate (&e0));
      CK (cudaEventCreate (&e1));
      struct { const char *name; float T; int k; float tp, mp, rep; int win; int which; int past_on_host; } cases[] = {
        { "forward sampler, greedy, 128 blocks", 0.f, 0, 1.f, 0.f, 1.f, 0, 0 },
        { "forward sampler, Gumbel T=0.7, 128 blocks", 0.7f, 0, 1.f, 0.f, 1.f, 0, 0 },
        { "forward sampler, greedy, one block (no scratch)", 0.f, 0, 1.f, 0.f, 1.f, 0, 2 },
        { "forward sampler, Gumbel T=0.7, one block (no scratch)", 0.7f, 0, 1.f, 0.f, 1.f, 0, 2 },
        { "chain, greedy", 0.f, 0, 1.f, 0.f, 1.f, 0, 1 },
        { "chain, greedy, repeat penalty (64 ids)", 0.f, 0, 1.f, 0.f, 1.1f, 64, 1 },
        { "chain, T 0.8 top-k 40 top-p 0.95 min-p 0.05 (CLI default)", 0.8f, 40, 0.95f, 0.05f, 1.f, 0, 1 },
        { "chain, T 0.7 top-p 0.9, no top-k (nucleus past the 256 best)", 0.7f, 0, 0.9f, 0.f, 1.f, 0, 1 },
        { "chain, T 0.3 top-p 0.9, no top-k (nucleus within the 256 best)", 0.3f, 0, 0.9f, 0.f, 1.f, 0, 1 },
        { "chain, T 0.7 top-k 40 top-p 0.9 min-p 0.05 (app default)", 0.7f, 40, 0.9f, 0.05f, 1.f, 0, 1 },
        { "chain one block (no scratch), CLI default", 0.8f, 40, 0.95f, 0.05f, 1.f, 0, 3 },
        { "chain one block (no scratch), greedy", 0.f, 0, 1.f, 0.f, 1.f, 0, 3 },
        { "chain, CLI default + repeat penalty 1.1 (64 ids)", 0.8f, 40, 0.95f, 0.05f, 1.1f, 64, 1 },
        { "chain one block (no scratch), greedy, repeat penalty (64 ids)", 0.f, 0, 1.f, 0.f, 1.1f, 64, 3 },
        { "chain one block (no scratch), CLI default + repeat penalty 1.1", 0.8f, 40, 0.95f, 0.05f, 1.1f, 64, 3 },
        { "chain, pure temperature T 2 (draw past the 256 best: walked)", 2.f, 0, 1.f, 0.f, 1.f, 0, 1 },
        { "chain, pure temperature T 2, past the 256 best on the host (-1)", 2.f, 0, 1.f, 0.f, 1.f, 0, 1, 1 },
        { "chain, T 1 top-p 0.95 (nucleus past the 256 best: walked)", 1.f, 0, 0.95f, 0.f, 1.f, 0, 1 },
        { "chain, T 1 top-p 0.95 min-p 0.001 (walked)", 1.f, 0, 0.95f, 0.001f, 1.f, 0, 1 },
      };
      for (const auto &c : cases)
        {
          HoneKSampleParams p;
          memset (&p, 0, sizeof p);
          p.temperature = c.T;
          p.top_k = c.k;
          p.top_p = c.tp;
          p.min_p = c.mp;
          p.repeat_penalty = c.rep;
          p.n_window = c.win;
          p.past_k_on_host = c.past_on_host;
          p.u = 0.5;
          auto run = [&] () {
            if (c.which == 0 || c.which == 2)
              CK (hone_k_sample (d, 1, V, c.T, 7, NULL, dout, c.which == 0 ? scr : NULL, 0));
            else
              CK (hone_k_sample_chain (d, V, &p, dwin, dout, c.which == 1 ? scr : NULL, 0));
          };
          for (int i = 0; i < 10; i++)
            run ();
          const int reps = 200;
          CK (cudaEventRecord (e0, 0));
          for (int i = 0; i < reps; i++)
            run ();
          CK (cudaEventRecord (e1, 0));
          CK (cudaEventSynchronize (e1));
          float ms = 0;
          CK (cudaEventElapsedTime (&ms, e0, e1));
          report ("sample bench vocab %d: %-58s %8.2f us a call (id %d)\n", V, c.name, ms * 1e3 / reps,
                  dev_download<int32_t> (dout, 1)[0]);
        }
      cudaFree (d); cudaFree (dout); cudaFree (dwin); cudaFree (scr);
      cudaEventDestroy (e0); cudaEventDestroy (e1);
    }
}

static void
check_norm_misc (void)
{
  const int n_tok = 3, n = 576;
  std::vector<float> x ((size_t) n_tok * n), g (n);
  for (auto &v : x) v = rng_normal () * 4;
  for (auto &v : g) v = rng_normal ();
  float *dx = dev_upload (x), *dg = dev_upload (g);
  float *dy = (float *) dev_poisoned (x.size () * 4);
  HoneKActQ8 q;
  q.q = (int8_t *) dev_poisoned (x.size ());
  q.ds = (float2 *) dev_poisoned (x.size () / 32 * 8);
  void *d16 = dev_poisoned (x.size () * 2);
  CK (hone_k_rmsnorm (dx, dg, n_tok, n, 1e-5f, dy, &q, d16, 0, 0));
  const std::vector<float> y = dev_download<float> (dy, x.size ());
  const std::vector<int8_t> qq = dev_download<int8_t> (q.q, x.size ());
  const std::vector<float2> ds = dev_download<float2> (q.ds, x.size () / 32);
  const std::vector<uint16_t> y16 = dev_download<uint16_t> (d16, x.size ());
  std::vector<double> ref (x.size ());
  for (int t = 0; t < n_tok; t++)
    {
      double ss = 0;
      for (int i = 0; i < n; i++) ss += (double) x[t * n + i] * x[t * n + i];
      for (int i = 0; i < n; i++) ref[t * n + i] = x[t * n + i] / sqrt (ss / n + 1e-5) * g[i];
    }
  bool fin;
  double e = rel_err (y.data (), ref.data (), y.size (), &fin);
  check (fin && e < 1e-6, "rmsnorm f32", e, 1e-6);
  std::vector<float> yq (x.size ()), yb (x.size ());
  bool sums_ok = true;
  for (size_t i = 0; i < x.size (); i++)
    {
      yq[i] = qq[i] * ds[i / 32].x;
      yb[i] = bf2f (y16[i]);
    }
  for (size_t b = 0; b < x.size () / 32; b++)
    {
      double s = 0;
      for (int i = 0; i < 32; i++) s += qq[b * 32 + i];
      sums_ok &= fabs (s * ds[b].x - ds[b].y) <= 1e-4 * (fabs (ds[b].y) + ds[b].x);
    }
  e = rel_err (yq.data (), ref.data (), y.size (), &fin);
  check (fin && e < 1e-2 && sums_ok, "rmsnorm → int8 per 32 (+ d·Σq)", e, 1e-2);
  e = rel_err (yb.data (), ref.data (), y.size (), &fin);
  check (fin && e < 4e-3, "rmsnorm → bf16", e, 4e-3);
  cudaFree (dx); cudaFree (dg); cudaFree (dy); cudaFree (q.q); cudaFree (q.ds); cudaFree (d16);

  /* dequant to f16 of each quantized type, embed of a row */
  for (int type : { HONE_K_Q8_0, HONE_K_Q4_0, HONE_K_Q4_1, HONE_K_BF16 })
    {
      const int rows = 37, cols = 256;
      std::vector<float> w ((size_t) rows * cols);
      for (auto &v : w) v = rng_normal ();
      std::vector<double> wd;
      HoneKMatrix m = matrix_from_gguf (type, gguf_quantize (type, w, rows, cols, wd), rows, cols);
      char what[96];
      const int q4_setting = hone_k_dequant_set_q4_blocks (0);
      /* the 16-bit values against the f64 reference; for Q4_0/Q4_1 with the
       * element kernel and with the block kernel (the default) */
      for (int q4b = 0; q4b < ((type == HONE_K_Q4_0 || type == HONE_K_Q4_1) ? 2 : 1); q4b++)
        {
          hone_k_dequant_set_q4_blocks (q4b);
          void *dd = dev_poisoned (w.size () * 2);
          CK (hone_k_dequant (&m, dd, 1, 0));
          const std::vector<uint16_t> got = dev_download<uint16_t> (dd, w.size ());
          std::vector<float> gf (w.size ());
          for (size_t i = 0; i < w.size (); i++) gf[i] = h2f (got[i]);
          e = rel_err (gf.data (), wd.data (), w.size (), &fin);
          snprintf (what, sizeof what, "repack + dequant→f16 %s%s", type_name (type), q4b ? " (block kernel)" : "");
          check (fin && e < 1e-3, what, e, 1e-3);
          cudaFree (dd);
        }
      /* the block kernel (16-byte aligned output) and the element kernel (output
       * 4 bytes off that alignment) give the same bits, to f16 and to bf16 */
      hone_k_dequant_set_q4_blocks (1);
      for (int to_f16 = 0; type != HONE_K_BF16 && to_f16 < 2; to_f16++)
        {
          char *da = (char *) dev_poisoned (w.size () * 2), *db = (char *) dev_poisoned (w.size () * 2 + 16);
          CK (hone_k_dequant (&m, da, to_f16, 0));
          CK (hone_k_dequant (&m, db + 4, to_f16, 0));
          const std::vector<uint16_t> a = dev_download<uint16_t> (da, w.size ());
          std::vector<uint16_t> b (w.size ());
          CK (cudaMemcpy (b.data (), db + 4, w.size () * 2, cudaMemcpyDeviceToHost));
          size_t differ = 0;
          for (size_t i = 0; i < w.size (); i++) differ += a[i] != b[i];
          snprintf (what, sizeof what, "dequant→%s %s: block kernel = element kernel (bits)", to_f16 ? "f16" : "bf16",
                    type_name (type));
          check (differ == 0, what, (double) differ, 0);
          cudaFree (da); cudaFree (db);
        }
      hone_k_dequant_set_q4_blocks (q4_setting);
      std::vector<int32_t> toks = { 5, 36, 0 };
      int32_t *dt = dev_upload (toks);
      float *dh = (float *) dev_poisoned (3 * cols * 4);
      CK (hone_k_embed (&m, dt, 3, dh, 0));
      const std::vector<float> h = dev_download<float> (dh, 3 * cols);
      std::vector<double> rr (3 * cols);
      for (int t = 0; t < 3; t++) for (int k = 0; k < cols; k++) rr[t * cols + k] = wd[(size_t) toks[t] * cols + k];
      e = rel_err (h.data (), rr.data (), h.size (), &fin);
      snprintf (what, sizeof what, "embed %s", type_name (type));
      check (fin && e < 1e-6, what, e, 1e-6);
      matrix_free (&m);
      cudaFree (dt); cudaFree (dh);
    }
}

/* ---- tiny model, end to end -------------------------------------------------- */

struct HostLayer {
  std::vector<float> an, fn, wq, wk, wv, wo, wg, wu, wd;
  std::vector<double> dq, dk, dv, dout, dg, du, ddn;   /* dequantized as uploaded */
};

struct TinyModel {
  int L = 2, D = 256, nq = 4, nkv = 2, hd = 64, F = 512, V = 1000;
  int type;
  std::vector<HostLayer> hl;
  std::vector<float> emb, onorm, head;
  std::vector<double> demb, dhead;
  HoneKModel m;
  std::vector<HoneKLayer> layers;
  std::vector<float> inv;
};

static std::vector<float>
randv (size_t n, float s)
{
  std::vector<float> v (n);
  for (auto &x : v) x = rng_normal () * s;
  return v;
}

static HoneKMatrix
upload_rows (int type, std::vector<std::pair<const std::vector<float> *, int>> parts, int cols, int step,
             std::vector<std::vector<double> *> deq)
{
  int rows = 0;
  for (auto &p : parts) rows += p.second;
  HoneKMatrix m = matrix_alloc (type, rows, cols);
  int row0 = 0;
  for (size_t i = 0; i < parts.size (); i++)
    {
      std::vector<double> d;
      const std::vector<uint8_t> b = gguf_quantize (type, *parts[i].first, parts[i].second, cols, d);
      *deq[i] = d;
      uint8_t *src = dev_upload (b);
      CK (hone_k_repack (type, src, parts[i].second, cols, &m, step == 1 ? row0 : (int) i, step, 0));
      CK (cudaDeviceSynchronize ());
      cudaFree (src);
      row0 += parts[i].second;
    }
  return m;
}

static void
tiny_build (TinyModel &t, int type)
{
  t.type = type;
  t.hl.resize (t.L);
  t.layers.resize (t.L);
  t.inv = make_inv_freq (t.hd, 10000.0);
  const float s = 0.08f;
  for (int l = 0; l < t.L; l++)
    {
      HostLayer &h = t.hl[l];
      h.an = randv (t.D, 0.2f); for (auto &x : h.an) x += 1;
      h.fn = randv (t.D, 0.2f); for (auto &x : h.fn) x += 1;
      h.wq = randv ((size_t) t.nq * t.hd * t.D, s);
      h.wk = randv ((size_t) t.nkv * t.hd * t.D, s);
      h.wv = randv ((size_t) t.nkv * t.hd * t.D, s);
      h.wo = randv ((size_t) t.D * t.nq * t.hd, s);
      h.wg = randv ((size_t) t.F * t.D, s);
      h.wu = randv ((size_t) t.F * t.D, s);
      h.wd = randv ((size_t) t.D * t.F, s);
      HoneKLayer &L = t.layers[l];
      memset (&L, 0, sizeof L);
      L.attn_norm = dev_upload (h.an);
      L.ffn_norm = dev_upload (h.fn);
      L.wqkv = upload_rows (type, { { &h.wq, t.nq * t.hd }, { &h.wk, t.nkv * t.hd }, { &h.wv, t.nkv * t.hd } }, t.D, 1,
                            { &h.dq, &h.dk, &h.dv });
      L.wo = upload_rows (type, { { &h.wo, t.D } }, t.nq * t.hd, 1, { &h.dout });
      L.wgu = upload_rows (type, { { &h.wg, t.F }, { &h.wu, t.F } }, t.D, 2, { &h.dg, &h.du });
      L.wdown = upload_rows (type, { { &h.wd, t.D } }, t.F, 1, { &h.ddn });
    }
  t.emb = randv ((size_t) t.V * t.D, 1.0f);
  t.onorm = randv (t.D, 0.2f); for (auto &x : t.onorm) x += 1;
  t.head = randv ((size_t) t.V * t.D, s);
  memset (&t.m, 0, sizeof t.m);
  t.m.cfg.n_layers = t.L; t.m.cfg.hidden = t.D; t.m.cfg.n_heads = t.nq; t.m.cfg.n_kv_heads = t.nkv;
  t.m.cfg.head_dim = t.hd; t.m.cfg.ffn = t.F; t.m.cfg.vocab = t.V; t.m.cfg.rms_eps = 1e-5f;
  t.m.cfg.rope_inv_freq = dev_upload (t.inv);
  t.m.layers = t.layers.data ();
  t.m.embd = upload_rows (type, { { &t.emb, t.V } }, t.D, 1, { &t.demb });
  t.m.out_norm = dev_upload (t.onorm);
  t.m.lm_head = upload_rows (type, { { &t.head, t.V } }, t.D, 1, { &t.dhead });
}

/* f64 forward of the tiny model over tokens[0..n), logits of every position. */
static std::vector<double>
tiny_ref (const TinyModel &t, const std::vector<int> &tok)
{
  const int n = (int) tok.size (), D = t.D, hd = t.hd, G = t.nq / t.nkv;
  std::vector<double> h ((size_t) n * D);
  for (int i = 0; i < n; i++) for (int k = 0; k < D; k++) h[(size_t) i * D + k] = t.demb[(size_t) tok[i] * D + k];
  auto norm = [&] (const double *x, const std::vector<float> &g, double *y) {
    double ss = 0;
    for (int k = 0; k < D; k++) ss += x[k] * x[k];
    const double sc = 1 / sqrt (ss / D + 1e-5);
    for (int k = 0; k < D; k++) y[k] = x[k] * sc * g[k];
  };
  auto mv = [&] (const std::vector<double> &w, int rows, int cols, const double *x, double *y) {
    for (int r = 0; r < rows; r++) { double s = 0; for (int k = 0; k < cols; k++) s += w[(size_t) r * cols + k] * x[k]; y[r] = s; }
  };
  std::vector<double> K ((size_t) n * t.nkv * hd), Vv ((size_t) n * t.nkv * hd), Q ((size_t) n * t.nq * hd);
  std::vector<double> logits ((size_t) n * t.V);
  for (int l = 0; l < t.L; l++)
    {
      const HostLayer &w = t.hl[l];
      std::vector<double> x (D), a ((size_t) t.nq * hd), o (D), f1 (t.F), f2 (t.F);
      for (int i = 0; i < n; i++)
        {
          norm (&h[(size_t) i * D], w.an, x.data ());
          mv (w.dq, t.nq * hd, D, x.data (), &Q[(size_t) i * t.nq * hd]);
          mv (w.dk, t.nkv * hd, D, x.data (), &K[(size_t) i * t.nkv * hd]);
          mv (w.dv, t.nkv * hd, D, x.data (), &Vv[(size_t) i * t.nkv * hd]);
          for (int hh = 0; hh < t.nq; hh++) rope_ref (&Q[((size_t) i * t.nq + hh) * hd], hd, i, t.inv, 0);
          for (int hh = 0; hh < t.nkv; hh++) rope_ref (&K[((size_t) i * t.nkv + hh) * hd], hd, i, t.inv, 0);
        }
      for (int i = 0; i < n; i++)
        {
          for (int hh = 0; hh < t.nq; hh++)
            {
              const int kvh = hh / G;
              std::vector<double> s (i + 1);
              double mx = -1e300, sum = 0;
              for (int j = 0; j <= i; j++)
                {
                  double d = 0;
                  for (int e = 0; e < hd; e++) d += Q[((size_t) i * t.nq + hh) * hd + e] * K[((size_t) j * t.nkv + kvh) * hd + e];
                  s[j] = d / sqrt ((double) hd);
                  mx = std::max (mx, s[j]);
                }
              for (int j = 0; j <= i; j++) { s[j] = exp (s[j] - mx); sum += s[j]; }
              for (int e = 0; e < hd; e++)
                {
                  double acc = 0;
                  for (int j = 0; j <= i; j++) acc += s[j] * Vv[((size_t) j * t.nkv + kvh) * hd + e];
                  a[(size_t) hh * hd + e] = acc / sum;
                }
            }
          mv (w.dout, D, t.nq * hd, a.data (), o.data ());
          for (int k = 0; k < D; k++) h[(size_t) i * D + k] += o[k];
          norm (&h[(size_t) i * D], w.fn, x.data ());
          mv (w.dg, t.F, D, x.data (), f1.data ());
          mv (w.du, t.F, D, x.data (), f2.data ());
          for (int k = 0; k < t.F; k++) f1[k] = f1[k] / (1 + exp (-f1[k])) * f2[k];
          mv (w.ddn, D, t.F, f1.data (), o.data ());
          for (int k = 0; k < D; k++) h[(size_t) i * D + k] += o[k];
        }
    }
  std::vector<double> x (D);
  for (int i = 0; i < n; i++)
    {
      norm (&h[(size_t) i * D], t.onorm, x.data ());
      mv (t.dhead, t.V, D, x.data (), &logits[(size_t) i * t.V]);
    }
  return logits;
}

/* staged: as check_gemv (-1 default dispatch, 0 off, 1 on); modes: bit mask of the modes below */
/* epiq: quantization in the GEMV epilogues (decode_step, one token): -1 the
 * default, 0 off, 1 on (then every one-token quantized step must use it);
 * forced off when the staged kernel is forced on (it takes those GEMVs). */
/* stream: streamed one-token steps (hone-k-decode-stream.cu) -1 default, 0 off, 1 on
 * (then every one-token step must run streamed: L + 1 launches each) */
static void
check_tiny_model (int type, int staged = -1, int modes = 7, int epiq = -1, int stream = 0)
{
  if (staged == 1)
    epiq = 0;
  if (stream == 1)
    staged = epiq = 0;
  hone_k_decode_set_epiq (epiq);
  hone_k_decode_set_stream (stream);
  TinyModel t;
  tiny_build (t, type);
  const int n = 70;   /* > one KV page, > HONE_K_MAX_DECODE: the GEMM path */
  std::vector<int> tok (n);
  for (auto &x : tok) x = (int) (rng_u64 () % t.V);
  const std::vector<double> ref = tiny_ref (t, tok);
  Cache c = cache_make (t.nkv * t.L, t.hd, 256, false);   /* one pool per layer below */
  std::vector<void *> kp (t.L), vp (t.L);
  const size_t per_layer = (size_t) c.n_pages * t.nkv * HONE_K_KV_BLOCK * t.hd;
  for (int l = 0; l < t.L; l++)
    {
      CK (cudaMalloc (&kp[l], per_layer * 2));
      CK (cudaMalloc (&vp[l], per_layer * 2));
      CK (cudaMemset (kp[l], 0xff, per_layer * 2));
      CK (cudaMemset (vp[l], 0xff, per_layer * 2));
    }
  HoneKKv kv = { kp.data (), vp.data (), c.dtable, (int) c.table.size () };
  char what[128];
  if (staged >= 0)
    hone_k_gemv_set_staged (staged);
  for (int mode = 0; mode < 3; mode++)
    {
      if (!(modes & (1 << mode)))
        continue;
      /* mode 0: prefill of n-3 tokens (GEMM path, logits of every row) then
       * decode steps of 1, then 2 tokens; mode 1: decode one token at a time;
       * mode 2: prefill in chunks of 20 and 47 (the second starts inside a
       * KV page), then 1 and 2 tokens. */
      HoneKState st;
      CK (hone_k_state_alloc (&st, &t.m, n, n));
      std::vector<int32_t> tk (tok.begin (), tok.end ());
      std::vector<float> got ((size_t) n * t.V, NAN);
      const unsigned runs0 = hone_k_gemv_staged_runs (), eq0 = hone_k_gemv_epiq_runs (), sr0 = hone_k_stream_runs ();
      int one_token_steps = 0;
      int p = 0;
      while (p < n)
        {
          int step = mode == 0 ? (p == 0 ? n - 3 : (p == n - 3 ? 1 : 2))
                   : mode == 2 ? (p == 0 ? 20 : p == 20 ? n - 23 : (p == n - 3 ? 1 : 2)) : 1;
          if (p + step > n) step = n - p;
          CK (cudaMemcpy (st.tokens, tk.data () + p, 4 * step, cudaMemcpyHostToDevice));
          CK (cudaMemcpy (st.pos, &p, 4, cudaMemcpyHostToDevice));
          CK (cudaMemset (st.logits, 0xff, (size_t) step * t.V * 4));
          one_token_steps += step == 1;
          CK (hone_k_forward (&t.m, &kv, &st, step, p, step, 0, 0.f, 0, 0));
          CK (cudaDeviceSynchronize ());
          CK (cudaMemcpy (&got[(size_t) p * t.V], st.logits, (size_t) step * t.V * 4, cudaMemcpyDeviceToHost));
          p += step;
        }
      int32_t pos_after;
      CK (cudaMemcpy (&pos_after, st.pos, 4, cudaMemcpyDeviceToHost));
      bool fin;
      const double e = rel_err (got.data (), ref.data (), got.size (), &fin);
      /* top-1 must agree wherever the reference's winner leads the runner-up by
       * more than 6x this position's RMS logit error (a flip then needs two
       * logits off by > 4 sigma of their difference: ~3e-5 a position for
       * Gaussian errors). Session 9 saw 3 flips with 3x the run's mean error as
       * the margin: positions whose own error was above the mean. */
      int top1 = 0, decided = 0;
      for (int i = 0; i < n; i++)
        {
          const float *g = &got[(size_t) i * t.V];
          const double *r = &ref[(size_t) i * t.V];
          const int rb = (int) (std::max_element (r, r + t.V) - r);
          double second = -1e300, err2 = 0;
          for (int v = 0; v < t.V; v++)
            {
              err2 += ((double) g[v] - r[v]) * ((double) g[v] - r[v]);
              if (v != rb) second = std::max (second, r[v]);
            }
          const double rms_err = sqrt (err2 / t.V);
          if (!(r[rb] - second > 6 * rms_err))
            continue;
          decided++;
          const int gb = (int) (std::max_element (g, g + t.V) - g);
          top1 += gb == rb;
          if (gb != rb)
            report ("      position %d: top-1 %d, reference %d; margin %.4g, RMS logit error %.4g\n", i, gb, rb,
                    r[rb] - second, rms_err);
        }
      /* bound: BF16 prefill rounds activations to bf16 for the GEMMs (~4e-3 per
       * matrix); quantized decode quantizes activations to int8 (~1e-2). */
      const double bound = (type == HONE_K_BF16 || type == HONE_K_F16) ? 2e-2 : 5e-2;
      const unsigned runs = hone_k_gemv_staged_runs () - runs0, eqr = hone_k_gemv_epiq_runs () - eq0;
      const unsigned srr = hone_k_stream_runs () - sr0;
      snprintf (what, sizeof what, "tiny llama %s %s: logits of %d positions vs f64 (%u staged, %u epiq GEMVs, %u streamed)",
                type_name (type), mode == 0 ? "prefill+decode" : mode == 2 ? "prefill 20+47+decode" : "decode x1", n,
                runs, eqr, srr);
      /* forced on, every one-token GEMV is staged (the tiny shapes qualify); forced off, none */
      bool path_ok = staged < 0 || (staged == 1 ? (mode != 1 || runs >= (unsigned) (n * (4 * t.L + 1)))
                                               : runs == 0);
      /* epiq on: every GEMV of a one-token step but layer 0's qkv (after the embedding) */
      const bool quant = type != HONE_K_BF16 && type != HONE_K_F16;
      if (epiq == 1 && quant && mode == 1)
        path_ok &= eqr == (unsigned) (n * 4 * t.L);
      if (epiq == 0 || !quant)
        path_ok &= eqr == 0;
      if (stream >= 0 && srr != (stream == 1 ? (unsigned) (one_token_steps * (t.L + 1)) : 0u))
        {
          path_ok = false;
          const char *why = hone_k_stream_why ();
          report ("      streamed launches %u, expected %u; the last step declined because: %s\n", srr,
                  stream == 1 ? (unsigned) (one_token_steps * (t.L + 1)) : 0u, why ? why : "(it did not)");
        }
      check (fin && e < bound && pos_after == n && path_ok, what, e, bound);
      snprintf (what, sizeof what, "  top-1 agreement %d/%d where the margin exceeds 6x the position's error (of %d)", top1,
                decided, n);
      check (top1 == decided && decided >= n / 3, what, decided - top1, 0);   /* n / 3: not vacuous */
      hone_k_state_free (&st);
    }
  hone_k_gemv_set_staged (-1);
  hone_k_decode_set_epiq (-1);
  hone_k_decode_set_stream (-1);
  for (int l = 0; l < t.L; l++) { cudaFree (kp[l]); cudaFree (vp[l]); }
  cache_free (c);
}

/* ---- benchmarks --------------------------------------------------------------- */

static void
fill_matrix (HoneKMatrix &m, uint64_t seed)
{
  size_t qb, sb;
  hone_k_matrix_bytes (m.type, m.rows, m.cols, &qb, &sb);
  fill_random<<<1024, 256>>> ((uint8_t *) m.q, qb, seed, m.type == HONE_K_BF16 ? 1 : m.type == HONE_K_F16 ? 3 : 0);
  if (sb)
    {
      if (m.type == HONE_K_Q4_1)   /* (d, m) pairs: both small */
        fill_random<<<1024, 256>>> ((uint8_t *) m.s, sb, seed + 1, 2);
      else
        fill_random<<<1024, 256>>> ((uint8_t *) m.s, sb, seed + 1, 2);
    }
  CK (cudaGetLastError ());
}

struct GemvBench {
  std::vector<HoneKMatrix> ms;
  int cur;
  float *x, *y, *res;
  HoneKActQ8 xq;
  int n_tok, epi;
};

static void
gemv_bench_fn (void *p)
{
  GemvBench *b = (GemvBench *) p;
  HoneKMatrix *m = &b->ms[b->cur];
  b->cur = (b->cur + 1) % (int) b->ms.size ();
  HoneKGemvOp op;
  memset (&op, 0, sizeof op);
  op.w = m;
  op.n_tok = b->n_tok;
  op.y = b->y;
  op.res = b->res;
  op.epilogue = b->epi;
  if (m->type == HONE_K_BF16 || m->type == HONE_K_F16)
    op.x = b->x;
  else
    op.xq = &b->xq;
  hone_k_gemv_ex (&op, 0);
}

static void
bench_gemvs (bool quick)
{
  struct { const char *name; int rows, cols, epi; } shapes[] = {
    { "qkv 6144x4096", 6144, 4096, HONE_K_EPI_STORE },
    { "o 4096x4096 +res", 4096, 4096, HONE_K_EPI_ADD },
    { "gate|up 28672x4096 swiglu", 28672, 4096, HONE_K_EPI_SWIGLU },
    { "down 4096x14336 +res", 4096, 14336, HONE_K_EPI_ADD },
    { "lm_head 128256x4096", 128256, 4096, HONE_K_EPI_STORE },
  };
  const int types[] = { HONE_K_BF16, HONE_K_Q8_0, HONE_K_Q4_0, HONE_K_Q4_1 };
  report ("\n== GEMV at Llama-3-8B shapes (weights rotated over >= 400 MB, median of 5x20) ==\n");
  report ("%-28s %-5s %4s %9s %9s %7s\n", "matrix", "type", "tok", "us", "GB/s", "%read");
  float *x, *y, *res;
  CK (cudaMalloc (&x, 8 * 14336 * 4));
  CK (cudaMalloc (&y, (size_t) 8 * 128256 * 4));
  CK (cudaMalloc (&res, (size_t) 8 * 128256 * 4));
  fill_random<<<256, 256>>> ((uint8_t *) x, 8 * 14336 * 4, 7, 3);
  CK (cudaMemset (res, 0, (size_t) 8 * 128256 * 4));
  HoneKActQ8 xq;
  CK (cudaMalloc (&xq.q, 8 * 14336));
  CK (cudaMalloc (&xq.ds, 8 * 14336 / 32 * 8));
  CK (hone_k_quantize (x, 8, 14336, &xq, NULL, 0, 0));
  const char *only = getenv ("HONE_DECODE_TYPES");   /* Q4_0,Q4_1 (say): only those types */
  for (int type : types)
    for (auto &sh : shapes)
      {
        if (only && !strstr (only, type_name (type)))
          continue;
        GemvBench b;
        const size_t one = hone_k_matrix_bytes (type, sh.rows, sh.cols, NULL, NULL);
        const int copies = (int) std::max<size_t> (2, (400u << 20) / one + 1);
        for (int i = 0; i < copies; i++)
          {
            HoneKMatrix m = matrix_alloc (type, sh.rows, sh.cols);
            fill_matrix (m, 100 + i);
            b.ms.push_back (m);
          }
        b.cur = 0;
        b.x = x; b.y = y; b.res = res; b.xq = xq; b.epi = sh.epi;
        for (int n_tok : { 1, 4 })
          {
            if (quick && n_tok != 1)
              continue;
            b.n_tok = n_tok;
            const double act = (type == HONE_K_BF16 ? 4.0 : 1.0 + 8.0 / 32) * sh.cols * n_tok
                               + 4.0 * n_tok * (sh.epi == HONE_K_EPI_SWIGLU ? sh.rows / 2 : sh.rows) * (sh.epi == HONE_K_EPI_ADD ? 2 : 1);
            /* automatic shape, then (tok=1) every forced shape */
            std::string sweep;
            double best = 1e30;
            int best_cfg = -1;
            for (int cfg = -1; cfg < (n_tok == 1 && !quick ? HONE_K_GEMV_CONFIGS_Q1 : 0); cfg++)
              {
                hone_k_gemv_set_config (cfg);
                const double ms = bench_ms (0, 20, gemv_bench_fn, &b);
                if (cfg >= 0)
                  {
                    char buf[32];
                    snprintf (buf, sizeof buf, " %d:%.1f", cfg, ms * 1e3);
                    sweep += buf;
                    if (ms < best) { best = ms; best_cfg = cfg; }
                  }
                else
                  {
                    const double gbs = (one + act) / (ms * 1e-3) / 1e9;
                    report ("%-28s %-5s %4d %9.1f %9.0f %6.1f%%", sh.name, type_name (type), n_tok, ms * 1e3, gbs,
                            100 * gbs * 1e9 / READ_CEIL);
                  }
              }
            hone_k_gemv_set_config (-1);
            if (best_cfg >= 0)
              report ("  best cfg %d %.1f us = %.1f%% |%s\n", best_cfg, best * 1e3,
                      100 * (one + act) / (best * 1e-3) / READ_CEIL, sweep.c_str ());
            else
              report ("\n");
          }
        for (auto &m : b.ms) matrix_free (&m);
      }
  cudaFree (x); cudaFree (y); cudaFree (res); cudaFree (xq.q); cudaFree (xq.ds);
}

/* A random-weight Llama-3-8B on the device. */
struct BigModel {
  HoneKModel m;
  std::vector<HoneKLayer> layers;
  std::vector<void *> kp, vp;
  int32_t *table;
  int max_ctx;
  size_t weight_bytes;
  std::vector<void *> frees;
};

static void
big_build (BigModel &b, int type, int max_ctx)
{
  const int L = 32, D = 4096, nq = 32, nkv = 8, hd = 128, F = 14336, V = 128256;
  HoneKConfig &c = b.m.cfg;
  memset (&b.m, 0, sizeof b.m);
  c.n_layers = L; c.hidden = D; c.n_heads = nq; c.n_kv_heads = nkv; c.head_dim = hd; c.ffn = F; c.vocab = V;
  c.rms_eps = 1e-5f;
  std::vector<float> inv = make_inv_freq (hd, 500000.0);
  c.rope_inv_freq = dev_upload (inv);
  std::vector<float> ones (D, 1.f);
  float *norm = dev_upload (ones);
  b.layers.resize (L);
  b.weight_bytes = 0;
  uint64_t seed = 1000;
  auto mk = [&] (int rows, int cols, int t) {
    HoneKMatrix m = matrix_alloc (t, rows, cols);
    fill_matrix (m, seed++);
    b.weight_bytes += hone_k_matrix_bytes (t, rows, cols, NULL, NULL);
    b.frees.push_back (m.q);
    if (m.s) b.frees.push_back (m.s);
    return m;
  };
  for (int l = 0; l < L; l++)
    {
      HoneKLayer &y = b.layers[l];
      memset (&y, 0, sizeof y);
      y.attn_norm = norm;
      y.ffn_norm = norm;
      y.wqkv = mk ((nq + 2 * nkv) * hd, D, type);
      y.wo = mk (D, nq * hd, type);
      y.wgu = mk (2 * F, D, type);
      y.wdown = mk (D, F, type);
    }
  b.m.layers = b.layers.data ();
  /* Llama-3 GGUFs at Q4: token_embd Q4 too and output Q6_K (→ F16 here); keep
   * the head in the model's type except BF16. */
  b.m.embd = mk (V, D, type);
  b.m.out_norm = norm;
  b.m.lm_head = mk (V, D, type);
  b.weight_bytes -= hone_k_matrix_bytes (type, V, D, NULL, NULL);   /* decode reads one embedding row */
  b.max_ctx = max_ctx;
  const int pages = (max_ctx + HONE_K_KV_BLOCK - 1) / HONE_K_KV_BLOCK;
  std::vector<int32_t> t (pages);
  for (int i = 0; i < pages; i++) t[i] = i;
  b.table = dev_upload (t);
  b.kp.resize (L);
  b.vp.resize (L);
  const size_t kvb = (size_t) pages * nkv * HONE_K_KV_BLOCK * hd * 2;
  for (int l = 0; l < L; l++)
    {
      CK (cudaMalloc (&b.kp[l], kvb));
      CK (cudaMalloc (&b.vp[l], kvb));
      fill_random<<<1024, 256>>> ((uint8_t *) b.kp[l], kvb, 5000 + l, 3);
      fill_random<<<1024, 256>>> ((uint8_t *) b.vp[l], kvb, 6000 + l, 3);
      b.frees.push_back (b.kp[l]);
      b.frees.push_back (b.vp[l]);
    }
  CK (cudaDeviceSynchronize ());
}

static void
big_free (BigModel &b)
{
  for (void *p : b.frees) cudaFree (p);
  b.frees.clear ();
}

/* What a whole-step benchmark runs on: the random 8B model with KV pages for
 * 16k + 256 positions, a one-token decode state and a stream. */
struct StepRig {
  BigModel b;
  HoneKKv kv;
  HoneKState st;
  cudaStream_t s;
};

static void
step_rig_open (StepRig &r, int type)
{
  const int max_ctx = 16384 + 256;
  big_build (r.b, type, max_ctx);
  r.kv = { r.b.kp.data (), r.b.vp.data (), r.b.table, (max_ctx + HONE_K_KV_BLOCK - 1) / HONE_K_KV_BLOCK };
  CK (hone_k_state_alloc (&r.st, &r.b.m, HONE_K_MAX_DECODE, HONE_K_MAX_DECODE));
  CK (cudaStreamCreateWithFlags (&r.s, cudaStreamNonBlocking));
}

static void
step_rig_close (StepRig &r)
{
  hone_k_state_free (&r.st);
  cudaStreamDestroy (r.s);
  big_free (r.b);
}

static void
bench_decode_step (int type, bool quick)
{
  StepRig rig;
  step_rig_open (rig, type);
  BigModel &b = rig.b;
  HoneKKv &kv = rig.kv;
  HoneKState &st = rig.st;
  cudaStream_t s = rig.s;
  const int32_t zero_tok = 1;
  CK (cudaMemcpy (st.tokens, &zero_tok, 4, cudaMemcpyHostToDevice));
  for (int variant = 0; variant < 3; variant++)
    {
      /* PDL on, off, and on with the weight prefetch after the wait */
      const int pdl = variant == 1 ? 0 : 1, early = variant == 2 ? 0 : 1;
      if (quick && variant > 0)
        break;
      hone_k_set_pdl (pdl);
      hone_k_gemv_set_early (early);
      cudaGraph_t g;
      cudaGraphExec_t ge;
      CK (cudaStreamBeginCapture (s, cudaStreamCaptureModeThreadLocal));
      const int r = hone_k_forward (&b.m, &kv, &st, 1, 0, 1, 1, 0.f, 0, s);
      CK (cudaStreamEndCapture (s, &g));
      CK (r);
      CK (cudaGraphInstantiate (&ge, g, 0));
      for (int ctx : { 128, 4096, 16384 })
        {
          if (quick && ctx == 4096)
            continue;
          const int reps = 50;
          std::vector<float> ts;
          cudaEvent_t e0, e1;
          CK (cudaEventCreate (&e0));
          CK (cudaEventCreate (&e1));
          for (int it = 0; it < 4; it++)
            {
              CK (cudaMemcpyAsync (st.pos, &ctx, 4, cudaMemcpyHostToDevice, s));
              CK (cudaGraphLaunch (ge, s));   /* warm */
              CK (cudaEventRecord (e0, s));
              for (int i = 0; i < reps; i++)
                CK (cudaGraphLaunch (ge, s));
              CK (cudaEventRecord (e1, s));
              CK (cudaEventSynchronize (e1));
              float ms;
              CK (cudaEventElapsedTime (&ms, e0, e1));
              if (it > 0) ts.push_back (ms / reps);
            }
          std::sort (ts.begin (), ts.end ());
          const double ms = ts[1];
          const double kvbytes = 2.0 * 32 * (ctx + reps / 2) * 8 * 128 * 2;
          const double bytes = b.weight_bytes + kvbytes;
          const double gbs = bytes / (ms * 1e-3) / 1e9;
          report ("decode step %-5s ctx %5d  pdl=%d%s: %7.3f ms  %6.1f tok/s  %6.0f GB/s  %5.1f%% of 4.52 TB/s (weights %.2f GB, KV %.2f GB)\n",
                  type_name (type), ctx, pdl, early ? "" : " late-loads", ms, 1e3 / ms, gbs, 100 * gbs * 1e9 / READ_CEIL, b.weight_bytes / 1e9,
                  kvbytes / 1e9);
          cudaEventDestroy (e0);
          cudaEventDestroy (e1);
        }
      int32_t tok;
      CK (cudaMemcpy (&tok, st.sampled, 4, cudaMemcpyDeviceToHost));
      report ("  (last sampled id %d; graph nodes: %d layers x kernels)\n", tok, 32);
      cudaGraphExecDestroy (ge);
      cudaGraphDestroy (g);
    }
  hone_k_set_pdl (-1);
  hone_k_gemv_set_early (1);
  /* the uncaptured path, for the graph's worth */
  {
    int ctx = 128;
    CK (cudaMemcpy (st.pos, &ctx, 4, cudaMemcpyHostToDevice));
    cudaEvent_t e0, e1;
    CK (cudaEventCreate (&e0));
    CK (cudaEventCreate (&e1));
    CK (hone_k_forward (&b.m, &kv, &st, 1, 0, 1, 1, 0.f, 0, s));
    CK (cudaEventRecord (e0, s));
    for (int i = 0; i < 20; i++)
      CK (hone_k_forward (&b.m, &kv, &st, 1, 0, 1, 1, 0.f, 0, s));
    CK (cudaEventRecord (e1, s));
    CK (cudaEventSynchronize (e1));
    float ms;
    CK (cudaEventElapsedTime (&ms, e0, e1));
    report ("decode step %-5s ctx   128  no graph: %7.3f ms  %6.1f tok/s\n", type_name (type), ms / 20, 20e3 / ms);
    cudaEventDestroy (e0);
    cudaEventDestroy (e1);
  }
  step_rig_close (rig);
}

/* ---- prefill benchmarks (2,048 tokens of the Llama-3-8B shape) ---------------
 * Session 2 (cuBLASLt GEMMs tuned per shape, attention v2, 16-bit gate|up and
 * attention outputs) against session 1 (HONE_GEMM=gemmex HONE_ATTN_PREFILL=1)
 * and mixes of the two, in the same binary; per-GEMM TFLOP/s for each
 * candidate algorithm; attention alone, v1 and v2 (8 and 4 warps). */
static double
now_s (void)
{
  struct timespec t;
  clock_gettime (CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

struct GemmBench {
  HoneKState *st;
  std::vector<const HoneKMatrix *> ws;
  int cur, n, y_type, acc;
  void *x16, *y;
};

static void
gemm_bench_fn (void *p)
{
  GemmBench *b = (GemmBench *) p;
  CK (hone_k_gemm (b->st, b->ws[b->cur], b->n, b->x16, b->y, b->y_type, b->acc, 0));
  b->cur = (b->cur + 1) % (int) b->ws.size ();
}

struct PrefillVariant {
  const char *name, *gemm, *attn, *tune;
};
static const PrefillVariant prefill_variants[] = {
  { "session 2 (default)", NULL, NULL, NULL },
  { "session 1 (cublasGemmEx, attn v1)", "gemmex", "1", NULL },
  { "cublasGemmEx + attn v2", "gemmex", NULL, NULL },
  { "cuBLASLt tuned + attn v1", NULL, "1", NULL },
  { "session 2, GEMMs tuned (HONE_GEMM_TUNE=1)", NULL, NULL, "1" },
  { "session 2, attn v2 8 warps", NULL, "2", NULL },
  { "session 2, attn v2 4 warps", NULL, "3", NULL },
};

static void
prefill_env (const PrefillVariant &v)
{
  unsetenv ("HONE_GEMM_ALGO");
  if (v.gemm) setenv ("HONE_GEMM", v.gemm, 1); else unsetenv ("HONE_GEMM");
  if (v.attn) setenv ("HONE_ATTN_PREFILL", v.attn, 1); else unsetenv ("HONE_ATTN_PREFILL");
  if (v.tune) setenv ("HONE_GEMM_TUNE", v.tune, 1); else unsetenv ("HONE_GEMM_TUNE");
}

static void
bench_prefill (int type, bool quick)
{
  const int n = 2048, L = 32, nq = 32, nkv = 8;
  report ("\n== prefill %d tokens, random-weight Llama-3-8B %s ==\n", n, type_name (type));
  BigModel b;
  big_build (b, type, n + HONE_K_KV_BLOCK);
  HoneKKv kv = { b.kp.data (), b.vp.data (), b.table, (n + HONE_K_KV_BLOCK) / HONE_K_KV_BLOCK };
  std::vector<int32_t> toks (n);
  for (auto &t : toks) t = (int) (rng_u64 () % 128256);
  cudaStream_t s;
  CK (cudaStreamCreateWithFlags (&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CK (cudaEventCreate (&e0));
  CK (cudaEventCreate (&e1));
  const double params = (double) L * (6144.0 * 4096 + 4096.0 * 4096 + 28672.0 * 4096 + 4096.0 * 14336);
  const double gemm_flop = 2.0 * params * n + 2.0 * 128256 * 4096;
  const double attn_flop = (double) L * nq * 2 * 2.0 * n * (n + 1) / 2 * 128;
  const int n_var = (int) (sizeof prefill_variants / sizeof prefill_variants[0]);
  double ms_default = 0, ms_s1 = 0;
  /* Variants run round robin, one prefill each in turn, so that the clock's
   * drift under the 700 W power limit (call 2: 1.98 → 1.4-1.7 GHz as the card
   * warmed) spreads over all of them instead of favouring the first. Each
   * has its own state, so its first prefill includes any GEMM tuning. */
  std::vector<HoneKState> sts (n_var);
  std::vector<std::vector<float>> tv (n_var);
  std::vector<float> first (n_var, 0.f);
  std::vector<bool> on (n_var);
  for (int v = 0; v < n_var; v++)
    {
      on[v] = !quick || v == 0 || v == 1 || v == 6;
      if (on[v])
        CK (hone_k_state_alloc (&sts[v], &b.m, n, HONE_K_MAX_DECODE));
    }
  for (int it = 0; it < 9; it++)
    for (int v = 0; v < n_var; v++)
      {
        if (!on[v])
          continue;
        prefill_env (prefill_variants[v]);
        const int zero = 0;
        CK (cudaMemcpyAsync (sts[v].pos, &zero, 4, cudaMemcpyHostToDevice, s));
        CK (cudaMemcpyAsync (sts[v].tokens, toks.data (), 4 * n, cudaMemcpyHostToDevice, s));
        CK (cudaStreamSynchronize (s));
        const double t0 = now_s ();
        CK (cudaEventRecord (e0, s));
        /* TTFT at kernel level: the whole prompt, the last row's logits, the sampled id */
        CK (hone_k_forward (&b.m, &kv, &sts[v], n, 0, 1, 1, 0.f, 0, s));
        CK (cudaEventRecord (e1, s));
        CK (cudaEventSynchronize (e1));
        float ms;
        CK (cudaEventElapsedTime (&ms, e0, e1));
        if (it == 0)
          first[v] = (float) ((now_s () - t0) * 1e3);   /* host clock: the tuning's syncs split the events' view */
        else
          tv[v].push_back (ms);
      }
  for (int v = 0; v < n_var; v++)
    {
      if (!on[v])
        continue;
      std::vector<float> &ts = tv[v];
      std::sort (ts.begin (), ts.end ());
      const double ms = 0.5 * (ts[3] + ts[4]);
      if (v == 0) ms_default = ms;
      if (v == 1) ms_s1 = ms;
      report ("prefill %d tok %-5s %-42s: %7.2f ms (min %.2f max %.2f, first %.1f)  %6.1f TFLOP/s = %5.1f%% of 781\n",
              n, type_name (type), prefill_variants[v].name, ms, ts.front (), ts.back (), first[v],
              (gemm_flop + attn_flop) / (ms * 1e-3) / 1e12, 100 * (gemm_flop + attn_flop) / (ms * 1e-3) / GEMM_CEIL);
      if (v > 0)
        hone_k_state_free (&sts[v]);
    }
  HoneKState &st = sts[0];
  report ("  (GEMM %.1f + attention %.1f TFLOP; median of 8 after a first run, variants interleaved; TTFT = the whole step incl. head+sample)\n",
          gemm_flop / 1e12, attn_flop / 1e12);
  prefill_env (prefill_variants[0]);

  /* each GEMM alone at n = 2048, rotating over the 32 layers' matrices */
  const bool bf = type == HONE_K_BF16;
  fill_random<<<1024, 256>>> ((uint8_t *) st.x16, (size_t) n * 14336 * 2, 77, bf ? 1 : 3);
  CK (cudaDeviceSynchronize ());
  const char *gname[4] = { "qkv 6144x4096", "o 4096x4096 +=", "gate|up 28672x4096", "down 4096x14336 +=" };
  double sum_tuned = 0, sum_old = 0, sum_lt0 = 0;
  for (int gi = 0; gi < 4; gi++)
    {
      GemmBench gb;
      gb.st = &st;
      gb.cur = 0;
      gb.n = n;
      gb.x16 = st.x16;
      for (int l = 0; l < L; l++)
        {
          const HoneKLayer &y = b.layers[l];
          gb.ws.push_back (gi == 0 ? &y.wqkv : gi == 1 ? &y.wo : gi == 2 ? &y.wgu : &y.wdown);
        }
      const HoneKMatrix *w0 = gb.ws[0];
      gb.acc = gi == 1 || gi == 3;
      const double flop = 2.0 * w0->rows * w0->cols * n;
      char line[512];
      int len = snprintf (line, sizeof line, "gemm %-5s %-19s n=%d:", type_name (type), gname[gi], n);
      double tuned_tf = 0;
      for (int v = 0; v < 7; v++)
        {
          /* v 0: cublasGemmEx f32 out (session 1); 1..4: cuBLASLt heuristic v-1 (1 is
           * the default), the output session 2 uses; 5: tuned; 6: heuristic 0, f32 out */
          if (quick && v != 0 && v != 1)
            continue;
          if (v == 6 && gi != 2)
            continue;
          prefill_env (prefill_variants[v == 0 ? 2 : 0]);
          if (v == 5)
            setenv ("HONE_GEMM_TUNE", "1", 1);
          if ((v >= 1 && v <= 4) || v == 6)
            {
              char a[8];
              snprintf (a, sizeof a, "%d", v == 6 ? 0 : v - 1);
              setenv ("HONE_GEMM_ALGO", a, 1);
            }
          gb.y_type = (gi == 2 && v >= 1 && v <= 5) ? (bf ? HONE_K_BF16 : HONE_K_F16) : HONE_K_F32;
          gb.y = gi == 0 ? (void *) st.qkv : gi == 2 ? (void *) st.gu : (void *) st.h;
          const double ms = bench_ms (0, L, gemm_bench_fn, &gb);
          const double tf = flop / (ms * 1e-3) / 1e12;
          static const char *vn[7] = { "gemmex", "lt0", "lt1", "lt2", "lt3", "tuned", "lt0-f32" };
          len += snprintf (line + len, sizeof line - len, "  %s %.3f ms %.0f", vn[v], ms, tf);
          if (v == 0)
            sum_old += ms * L;
          if (v == 1)
            sum_lt0 += ms * L;
          if (v == 5)
            {
              sum_tuned += ms * L;
              tuned_tf = tf;
            }
        }
      report ("%s TF  (tuned %.1f%% of 781)\n", line, 100 * tuned_tf * 1e12 / GEMM_CEIL);
    }
  prefill_env (prefill_variants[0]);
  report ("  GEMMs x32 layers: session 2 %.2f ms (tuned %.2f), session 1 %.2f ms\n", sum_lt0, sum_tuned, sum_old);

  /* attention alone on the last layer's q (real scaled values) and layer 0's pages */
  double attn_default = 0, attn_v1 = 0;
  for (int hd : { 128, 64 })
    for (int variant = 0; variant < 4; variant++)
      {
        if (quick && hd == 64)
          break;
        /* 0: v1 (f32 out), 1: v2 8 warps f32 out, 2: v2 4 warps f32 out, 3: v2 default bf16 out */
        for (int pos : { 0, 1024 })
          {
            const int nt = pos ? n - pos : n;
            if (pos && (variant == 0 || variant == 3))
              continue;
            static const char *av[4] = { "1", "2", "3", NULL };
            if (av[variant]) setenv ("HONE_ATTN_PREFILL", av[variant], 1); else unsetenv ("HONE_ATTN_PREFILL");
            void *out = variant == 3 ? st.x16 : (void *) st.attn;
            const int ot = variant == 3 ? HONE_K_BF16 : HONE_K_F32;
            CK (hone_k_attn_prefill_ex (st.qkv, nt, nq, nkv, hd, pos, b.kp[0], b.vp[0], b.table, out, ot, s));
            std::vector<float> at;
            for (int rep = 0; rep < 5; rep++)
              {
                CK (cudaEventRecord (e0, s));
                for (int i = 0; i < 10; i++)
                  CK (hone_k_attn_prefill_ex (st.qkv, nt, nq, nkv, hd, pos, b.kp[0], b.vp[0], b.table, out, ot, s));
                CK (cudaEventRecord (e1, s));
                CK (cudaEventSynchronize (e1));
                float ams;
                CK (cudaEventElapsedTime (&ams, e0, e1));
                at.push_back (ams / 10);
              }
            unsetenv ("HONE_ATTN_PREFILL");
            std::sort (at.begin (), at.end ());
            const double ams = at[2];
            /* causal pairs: Σ over new tokens of the keys each sees */
            const double pairs = (double) nt * pos + (double) nt * (nt + 1) / 2;
            const double fl = (double) nq * 2 * 2.0 * pairs * hd;
            static const char *an[4] = { "v1 f32          ", "v2 8 warps f32  ", "v2 4 warps f32  ", "v2 default bf16 " };
            report ("  attention %s hd %3d heads 32/8 pos %4d tok %4d: %.3f ms = %.1f TFLOP/s\n", an[variant], hd, pos,
                    nt, ams, fl / (ams * 1e-3) / 1e12);
            if (hd == 128 && pos == 0 && variant == 0)
              attn_v1 = ams;
            if (hd == 128 && pos == 0 && variant == 3)
              attn_default = ams;
          }
      }
  report ("  rest (norms, RoPE+KV, SwiGLU, embed, head, sample) ~ session 2 %.2f ms, session 1 %.2f ms\n",
          ms_default - sum_lt0 - L * attn_default, ms_s1 - sum_old - L * attn_v1);
  CK (cudaGetLastError ());
  cudaEventDestroy (e0);
  cudaEventDestroy (e1);
  hone_k_state_free (&st);
  cudaStreamDestroy (s);
  big_free (b);
}

static void
bench_attn (void)
{
  report ("\n== decode attention alone (one layer, 32/8 heads, hd 128) ==\n");
  BigModel dummy;
  const int max_ctx = 16384 + 64, pages = max_ctx / HONE_K_KV_BLOCK + 1;
  std::vector<int32_t> t (pages);
  for (int i = 0; i < pages; i++) t[i] = i;
  int32_t *table = dev_upload (t);
  const size_t kvb = (size_t) pages * 8 * HONE_K_KV_BLOCK * 128 * 2;
  void *k, *v;
  CK (cudaMalloc (&k, kvb));
  CK (cudaMalloc (&v, kvb));
  fill_random<<<1024, 256>>> ((uint8_t *) k, kvb, 1, 3);
  fill_random<<<1024, 256>>> ((uint8_t *) v, kvb, 2, 3);
  float *qkv, *out;
  CK (cudaMalloc (&qkv, 8 * 6144 * 4));
  CK (cudaMalloc (&out, 8 * 4096 * 4));
  fill_random<<<64, 256>>> ((uint8_t *) qkv, 8 * 6144 * 4, 3, 3);
  void *scratch;
  const size_t sb = hone_k_attn_scratch_bytes (32, 8, 128, 8);
  CK (cudaMalloc (&scratch, sb));
  CK (cudaMemset (scratch, 0, sb));
  int32_t *pos;
  CK (cudaMalloc (&pos, 4));
  cudaEvent_t e0, e1;
  CK (cudaEventCreate (&e0));
  CK (cudaEventCreate (&e1));
  for (int ctx : { 128, 4096, 16384 })
    {
      CK (cudaMemcpy (pos, &ctx, 4, cudaMemcpyHostToDevice));
      CK (hone_k_attn_decode (qkv, 1, 32, 8, 128, pos, k, v, table, scratch, out, 0));
      CK (cudaEventRecord (e0, 0));
      for (int i = 0; i < 50; i++)
        CK (hone_k_attn_decode (qkv, 1, 32, 8, 128, pos, k, v, table, scratch, out, 0));
      CK (cudaEventRecord (e1, 0));
      CK (cudaEventSynchronize (e1));
      float ms;
      CK (cudaEventElapsedTime (&ms, e0, e1));
      ms /= 50;
      const double bytes = 2.0 * (ctx + 1) * 8 * 128 * 2;
      report ("attn decode ctx %5d: %7.2f us  %6.0f GB/s  %5.1f%% (KV %.1f MB)\n", ctx, ms * 1e3,
              bytes / (ms * 1e-3) / 1e9, 100 * bytes / (ms * 1e-3) / READ_CEIL, bytes / 1e6);
    }
  cudaFree (table); cudaFree (k); cudaFree (v); cudaFree (qkv); cudaFree (out); cudaFree (scratch); cudaFree (pos);
  (void) dummy;
}

/* ---- decode, session 2: variants of the whole step in one binary ---------- */

/* The step's time at a context: back-to-back graph replays (each advances the
 * position by one), median of 3 × 50 after a warm-up, as bench_decode_step. */
static double
decode_graph_ms (cudaGraphExec_t ge, HoneKState &st, cudaStream_t s, int ctx)
{
  const int reps = 50;
  std::vector<float> ts;
  cudaEvent_t e0, e1;
  CK (cudaEventCreate (&e0));
  CK (cudaEventCreate (&e1));
  for (int it = 0; it < 4; it++)
    {
      CK (cudaMemcpyAsync (st.pos, &ctx, 4, cudaMemcpyHostToDevice, s));
      CK (cudaGraphLaunch (ge, s));
      CK (cudaEventRecord (e0, s));
      for (int i = 0; i < reps; i++)
        CK (cudaGraphLaunch (ge, s));
      CK (cudaEventRecord (e1, s));
      CK (cudaEventSynchronize (e1));
      float ms;
      CK (cudaEventElapsedTime (&ms, e0, e1));
      if (it > 0) ts.push_back (ms / reps);
    }
  std::sort (ts.begin (), ts.end ());
  cudaEventDestroy (e0);
  cudaEventDestroy (e1);
  return ts[1];
}

/* The one-token step of b captured as a graph (its node count in *nodes). */
static cudaGraphExec_t
capture_decode_step (BigModel &b, HoneKKv &kv, HoneKState &st, cudaStream_t s, size_t *nodes)
{
  cudaGraph_t g;
  cudaGraphExec_t ge;
  trace_prepare ();
  CK (cudaStreamBeginCapture (s, cudaStreamCaptureModeThreadLocal));
  const int r = hone_k_forward (&b.m, &kv, &st, 1, 0, 1, 1, 0.f, 0, s);
  CK (cudaStreamEndCapture (s, &g));
  CK (r);
  *nodes = 0;
  CK (cudaGraphGetNodes (g, NULL, nodes));
  CK (cudaGraphInstantiate (&ge, g, 0));
  cudaGraphDestroy (g);
  return ge;
}

/* The logits of one replay of ge for token 1 at position 128 (poisoned first). */
static std::vector<float>
decode_step_logits (cudaGraphExec_t ge, HoneKState &st, cudaStream_t s, int vocab, int32_t p0 = 128)
{
  const int32_t tok = 1;
  CK (cudaMemcpyAsync (st.tokens, &tok, 4, cudaMemcpyHostToDevice, s));
  CK (cudaMemcpyAsync (st.pos, &p0, 4, cudaMemcpyHostToDevice, s));
  CK (cudaMemsetAsync (st.logits, 0xff, (size_t) vocab * 4, s));
  CK (cudaGraphLaunch (ge, s));
  CK (cudaStreamSynchronize (s));
  return dev_download<float> (st.logits, (size_t) vocab);
}

/* ‖a − ref‖ / ‖ref‖; *fin: every value of a finite. */
static double
logits_rel_l2 (const std::vector<float> &a, const std::vector<float> &ref, bool *fin)
{
  double num = 0, den = 0;
  *fin = true;
  for (size_t i = 0; i < a.size (); i++)
    {
      *fin &= std::isfinite (a[i]);
      num += ((double) a[i] - ref[i]) * ((double) a[i] - ref[i]);
      den += (double) ref[i] * ref[i];
    }
  return sqrt (num / (den + 1e-300));
}

/* The BF16 GEMVs that take a normalized input: the RMSNorm as a prologue in
 * every block vs applied at the end. */
static void
bench_gemv_norm (void)
{
  report ("\n== GEMVs after an RMSNorm, tok 1, rotated >= 400 MB, stream launches ==\n");
  struct { const char *name; int rows, cols, epi; } shapes[] = {
    { "qkv 6144x4096", 6144, 4096, HONE_K_EPI_STORE },
    { "gate|up 28672x4096 swiglu", 28672, 4096, HONE_K_EPI_SWIGLU },
  };
  float *x, *y, *g;
  CK (cudaMalloc (&x, 4096 * 4));
  CK (cudaMalloc (&g, 4096 * 4));
  CK (cudaMalloc (&y, 28672 * 4));
  fill_random<<<16, 256>>> ((uint8_t *) x, 4096 * 4, 7, 3);
  fill_random<<<16, 256>>> ((uint8_t *) g, 4096 * 4, 8, 3);
  for (int type : { HONE_K_BF16 })
    for (auto &sh : shapes)
      {
        const size_t one = hone_k_matrix_bytes (type, sh.rows, sh.cols, NULL, NULL);
        const int copies = (int) std::max<size_t> (2, (400u << 20) / one + 1);
        std::vector<HoneKMatrix> ms;
        for (int i = 0; i < copies; i++)
          {
            ms.push_back (matrix_alloc (type, sh.rows, sh.cols));
            fill_matrix (ms.back (), 300 + i);
          }
        double t[2];
        for (int variant = 0; variant < 2; variant++)
          {
            hone_k_gemv_set_norm_end (variant);
            cudaEvent_t e0, e1;
            CK (cudaEventCreate (&e0));
            CK (cudaEventCreate (&e1));
            std::vector<float> ts;
            for (int it = 0; it < 6; it++)
              {
                CK (cudaEventRecord (e0, 0));
                for (int i = 0; i < 20; i++)
                  {
                    HoneKGemvOp op;
                    memset (&op, 0, sizeof op);
                    op.w = &ms[(it * 20 + i) % copies];
                    op.n_tok = 1;
                    op.y = y;
                    op.epilogue = sh.epi;
                    op.eps = 1e-5f;
                    op.x = x;
                    op.norm_g = g;
                    CK (hone_k_gemv_ex (&op, 0));
                  }
                CK (cudaEventRecord (e1, 0));
                CK (cudaEventSynchronize (e1));
                float ms_;
                CK (cudaEventElapsedTime (&ms_, e0, e1));
                if (it > 0) ts.push_back (ms_ / 20);
              }
            std::sort (ts.begin (), ts.end ());
            t[variant] = ts[2];
            cudaEventDestroy (e0);
            cudaEventDestroy (e1);
          }
        hone_k_gemv_set_norm_end (1);
        report ("%-28s %-5s norm prologue %7.1f us  norm at end %7.1f us (%5.1f%% of 4.52 TB/s)\n", sh.name,
                type_name (type), t[0] * 1e3, t[1] * 1e3, 100.0 * one / (t[1] * 1e-3) / READ_CEIL);
        for (auto &m : ms) matrix_free (&m);
      }
  cudaFree (x); cudaFree (y); cudaFree (g);
}

/* Does an L2 prefetch issued by the attention kernel land? The o GEMV timed
 * right after decode attention (ctx 128) that prefetched the first 32 MB of
 * that very o matrix, by each mechanism, vs no prefetch; matrices rotated. */
static void
bench_o_after_attn (int type)
{
  const int ctx = 128, pages = 16384 / HONE_K_KV_BLOCK + 1;
  std::vector<int32_t> tv (pages);
  for (int i = 0; i < pages; i++) tv[i] = i;
  int32_t *table = dev_upload (tv);
  const size_t kvb = (size_t) pages * 8 * HONE_K_KV_BLOCK * 128 * 2;
  void *k, *v, *scratch;
  CK (cudaMalloc (&k, kvb));
  CK (cudaMalloc (&v, kvb));
  fill_random<<<1024, 256>>> ((uint8_t *) k, kvb, 1, 3);
  fill_random<<<1024, 256>>> ((uint8_t *) v, kvb, 2, 3);
  float *qkv, *out, *y;
  CK (cudaMalloc (&qkv, 6144 * 4));
  CK (cudaMalloc (&out, 4096 * 4));
  CK (cudaMalloc (&y, 4096 * 4));
  CK (cudaMemset (y, 0, 4096 * 4));
  fill_random<<<64, 256>>> ((uint8_t *) qkv, 6144 * 4, 3, 3);
  const size_t sb = hone_k_attn_scratch_bytes (32, 8, 128, 8);
  CK (cudaMalloc (&scratch, sb));
  CK (cudaMemset (scratch, 0, sb));
  int32_t *pos = dev_upload (std::vector<int32_t> { ctx });
  HoneKActQ8 xq;
  CK (cudaMalloc (&xq.q, 4096));
  CK (cudaMalloc (&xq.ds, 4096 / 32 * 8));
  const bool f = type == HONE_K_BF16;
  const size_t one = hone_k_matrix_bytes (type, 4096, 4096, NULL, NULL);
  const int copies = (int) std::max<size_t> (2, (400u << 20) / one + 1);
  std::vector<HoneKMatrix> ms;
  for (int i = 0; i < copies; i++)
    {
      ms.push_back (matrix_alloc (type, 4096, 4096));
      fill_matrix (ms.back (), 500 + i);
    }
  const int n = 40;
  std::vector<cudaEvent_t> ev (3 * n);
  for (auto &e : ev) CK (cudaEventCreate (&e));
  for (int how = -1; how < 3; how++)
    {
      for (int it = 0; it < 2; it++)   /* the first round warms up */
        {
          for (int i = 0; i < n; i++)
            {
              HoneKMatrix &m = ms[(it * n + i) % copies];
              HoneKPrefetch pf;
              memset (&pf, 0, sizeof pf);
              if (how >= 0)
                hone_k_prefetch_add_matrix (&pf, &m, (size_t) 32 << 20);
              pf.how = how < 0 ? 0 : how;
              CK (cudaEventRecord (ev[3 * i], 0));
              CK (hone_k_attn_decode_pf (qkv, 1, 32, 8, 128, pos, k, v, table, scratch, out, f ? NULL : &xq, &pf, 0));
              CK (cudaEventRecord (ev[3 * i + 1], 0));
              HoneKGemvOp op;
              memset (&op, 0, sizeof op);
              op.w = &m;
              op.n_tok = 1;
              op.y = y;
              op.res = y;
              op.epilogue = HONE_K_EPI_ADD;
              if (f)
                op.x = out;
              else
                op.xq = &xq;
              CK (hone_k_gemv_ex (&op, 0));
              CK (cudaEventRecord (ev[3 * i + 2], 0));
            }
          CK (cudaDeviceSynchronize ());
        }
      std::vector<float> ta, to;
      for (int i = 0; i < n; i++)
        {
          float a_, o_;
          CK (cudaEventElapsedTime (&a_, ev[3 * i], ev[3 * i + 1]));
          CK (cudaEventElapsedTime (&o_, ev[3 * i + 1], ev[3 * i + 2]));
          ta.push_back (a_);
          to.push_back (o_);
        }
      std::sort (ta.begin (), ta.end ());
      std::sort (to.begin (), to.end ());
      report ("o after attention %-5s prefetch %-10s: attention %6.2f us, o GEMV %6.2f us (median of %d)\n",
              type_name (type), how < 0 ? "none" : how == 0 ? "bulk" : how == 1 ? "line" : "line-evl",
              ta[n / 2] * 1e3, to[n / 2] * 1e3, n);
    }
  for (auto &e : ev) cudaEventDestroy (e);
  for (auto &m : ms) matrix_free (&m);
  cudaFree (table); cudaFree (k); cudaFree (v); cudaFree (qkv); cudaFree (out); cudaFree (y); cudaFree (scratch);
  cudaFree (pos); cudaFree (xq.q); cudaFree (xq.ds);
}

/* The whole step with each decode variant (prefetch sizes, fused
 * quantization, PDL), the graph re-captured per variant; every variant must
 * give the same logits bits at the same position as the first. */
static void
bench_decode_variants (int type)
{
  /* pf: MB the GEMV tails / attention prefetch; how: 0 bulk, 1 line, 2 line evict_last;
   * fuse: bit mask (hone-k-forward.cu); ne: BF16 norm at the end (1) or prologue (0) */
  /* min_chunk: fewest keys a KV split gets (another split count sums in another order: not the same bits) */
  struct Var { const char *name; int pf, pfa, how, fuse, ne, pdl; bool all_ctx; int min_chunk = 32; };
  const bool f = type == HONE_K_BF16;
  std::vector<Var> vars;
  if (f)
    vars = { { "old (prologue norm, no pf)", 0, 0, 1, 0, 0, 0, true },
             { "norm-end", 0, 0, 1, 0, 1, 0, true },
             { "norm-end line pf 8/32", 8, 32, 1, 0, 1, 0, true },
             { "norm-end line pf 0/32", 0, 32, 1, 0, 1, 0, false },
             { "norm-end line pf 8/0", 8, 0, 1, 0, 1, 0, false },
             { "norm-end evict_last pf 8/32", 8, 32, 2, 0, 1, 0, false },
             { "norm-end bulk pf 8/32", 8, 32, 0, 0, 1, 0, false },
             { "norm-end line pf 16/32", 16, 32, 1, 0, 1, 0, false },
             { "norm-end line pf 4/32", 4, 32, 1, 0, 1, 0, false },
             { "norm-end pdl", 0, 0, 1, 0, 1, 1, false },
             { "norm-end line pf 8/32 pdl", 8, 32, 1, 0, 1, 1, false },
             { "norm-end attn split >= 64 keys", 0, 0, 1, 0, 1, 0, false, 64 },
             { "norm-end attn split >= 160 keys", 0, 0, 1, 0, 1, 0, false, 160 },
             { "old pdl", 0, 0, 1, 0, 0, 1, false } };
  else
    vars = { { "old (4 quantize launches)", 0, 0, 1, 0, 1, 1, true },
             { "attn-q", 0, 0, 1, 1, 1, 1, true },
             { "attn-q line pf 8/32", 8, 32, 1, 1, 1, 1, true },
             { "attn-q line pf 0/32", 0, 32, 1, 1, 1, 1, false },
             { "attn-q line pf 8/0", 8, 0, 1, 1, 1, 1, false },
             { "attn-q evict_last pf 8/32", 8, 32, 2, 1, 1, 1, false },
             { "attn-q bulk pf 8/32", 8, 32, 0, 1, 1, 1, false },
             { "attn-q line pf 16/48", 16, 48, 1, 1, 1, 1, false },
             { "attn-q no pdl", 0, 0, 1, 1, 1, 0, false },
             { "old no pdl", 0, 0, 1, 0, 1, 0, false } };
  StepRig rig;
  step_rig_open (rig, type);
  BigModel &b = rig.b;
  HoneKKv &kv = rig.kv;
  HoneKState &st = rig.st;
  cudaStream_t s = rig.s;
  std::vector<float> logits0[2];   /* per norm mode: the first variant's logits */
  for (size_t vi = 0; vi < vars.size (); vi++)
    {
      const Var &v = vars[vi];
      hone_k_decode_tune (v.pf, v.pfa, v.fuse, v.how);
      hone_k_gemv_set_norm_end (v.ne);
      hone_k_attn_set_min_chunk (v.min_chunk);
      hone_k_set_pdl (v.pdl);
      cudaGraph_t g;
      cudaGraphExec_t ge;
      CK (cudaStreamBeginCapture (s, cudaStreamCaptureModeThreadLocal));
      const int r = hone_k_forward (&b.m, &kv, &st, 1, 0, 1, 1, 0.f, 0, s);
      CK (cudaStreamEndCapture (s, &g));
      CK (r);
      CK (cudaGraphInstantiate (&ge, g, 0));
      /* one step at a fixed position and token: the logits' bits */
      const int32_t tok = 1, p0 = 128;
      CK (cudaMemcpyAsync (st.tokens, &tok, 4, cudaMemcpyHostToDevice, s));
      CK (cudaMemcpyAsync (st.pos, &p0, 4, cudaMemcpyHostToDevice, s));
      CK (cudaGraphLaunch (ge, s));
      CK (cudaStreamSynchronize (s));
      const std::vector<float> lg = dev_download<float> (st.logits, 128256);
      bool same = true, first = logits0[v.ne].empty ();
      if (first)
        logits0[v.ne] = lg;
      else
        same = memcmp (lg.data (), logits0[v.ne].data (), lg.size () * 4) == 0;
      if (!same && v.min_chunk == 32)
        n_fail++;
      if (first && v.ne && !logits0[0].empty ())
        {
          /* the norm at the end rounds differently: close to the prologue's logits, not equal */
          double num = 0, den = 0;
          for (size_t i = 0; i < lg.size (); i++)
            {
              num += ((double) lg[i] - logits0[0][i]) * ((double) lg[i] - logits0[0][i]);
              den += (double) logits0[0][i] * logits0[0][i];
            }
          const double e = sqrt (num / (den + 1e-300));
          report ("decode2 %-5s norm-end vs prologue logits: relative L2 %.3g%s\n", type_name (type), e,
                  e < 1e-4 ? "" : "  (FAIL > 1e-4)");
          if (!(e < 1e-4))
            n_fail++;
        }
      for (int ctx : { 128, 4096, 16384 })
        {
          if (!v.all_ctx && ctx != 128)
            continue;
          const double ms = decode_graph_ms (ge, st, s, ctx);
          const double kvbytes = 2.0 * 32 * (ctx + 25) * 8 * 128 * 2;
          const double gbs = (b.weight_bytes + kvbytes) / (ms * 1e-3) / 1e9;
          report ("decode2 %-5s %-26s ctx %5d: %7.3f ms  %6.1f tok/s  %5.1f%% of 4.52 TB/s  logits %s\n",
                  type_name (type), v.name, ctx, ms, 1e3 / ms, 100 * gbs * 1e9 / READ_CEIL,
                  first ? "(reference)" : same ? "same bits" : v.min_chunk != 32 ? "differ (other split sums)" : "DIFFER");
        }
      cudaGraphExecDestroy (ge);
      cudaGraphDestroy (g);
    }
  hone_k_set_pdl (-1);
  step_rig_close (rig);
}

/* ---- decode, session 3: staged GEMVs against the register-streamed ones ---- */

struct StagedBench {
  std::vector<HoneKMatrix> ms;
  int cur;
  const float *x, *g;
  float *y, *res;
  HoneKActQ8 xq;
  int epi;
  bool norm, staged, quant;
};

/* One GEMV as decode_step enqueues it: old quantized ones behind their
 * norm+quantize (or quantize) launch, except o whose int8 input attention
 * writes; staged ones take the f32 input (o: attention's int8 copy). */
static void
staged_bench_fn (void *p)
{
  StagedBench *b = (StagedBench *) p;
  HoneKMatrix *m = &b->ms[b->cur];
  b->cur = (b->cur + 1) % (int) b->ms.size ();
  HoneKGemvOp op;
  memset (&op, 0, sizeof op);
  op.w = m;
  op.n_tok = 1;
  op.y = b->y;
  op.res = b->res;
  op.epilogue = b->epi;
  op.eps = 1e-5f;
  const bool is_o = b->epi == HONE_K_EPI_ADD && m->cols == 4096;
  if (!b->quant || (b->staged && !is_o))
    {
      op.x = b->x;
      op.norm_g = b->norm ? b->g : NULL;
    }
  else
    {
      if (b->norm)
        CK (hone_k_rmsnorm (b->x, b->g, 1, m->cols, 1e-5f, NULL, &b->xq, NULL, 0, 0));
      else if (!is_o)
        CK (hone_k_quantize (b->x, 1, m->cols, &b->xq, NULL, 0, 0));
      op.xq = &b->xq;
    }
  CK (hone_k_gemv_ex (&op, 0));
}

static void
bench_gemvs_staged (void)
{
  struct { const char *name; int rows, cols, epi; bool norm; } shapes[] = {
    { "qkv 6144x4096 +norm", 6144, 4096, HONE_K_EPI_STORE, true },
    { "o 4096x4096 +res", 4096, 4096, HONE_K_EPI_ADD, false },
    { "gate|up 28672x4096 +norm swiglu", 28672, 4096, HONE_K_EPI_SWIGLU, true },
    { "down 4096x14336 +res", 4096, 14336, HONE_K_EPI_ADD, false },
    { "lm_head 128256x4096 +norm", 128256, 4096, HONE_K_EPI_STORE, true },
  };
  report ("\n== one-token GEMVs as decode_step runs them: old (register-streamed, + its norm/quantize launch) vs "
          "staged; back-to-back, weights rotated over >= 400 MB, median of 5x20 ==\n");
  /* cp.async columns only with HONE_BENCH_CPASYNC=1: that loader has not run in its present form */
  const bool cpa = getenv ("HONE_BENCH_CPASYNC") != NULL;
  report ("%-32s %-5s %7s %8s | %8s %6s | %8s %6s %7s | staged us: bulk96 bulk4K/96 bulk64 cpa96 cpa128\n",
          "matrix", "type", "MB", "ideal us", "old us", "%read", "stg us", "%read", "-ideal");
  float *x, *g, *y, *res;
  CK (cudaMalloc (&x, 14336 * 4));
  CK (cudaMalloc (&g, 14336 * 4));
  CK (cudaMalloc (&y, (size_t) 128256 * 4));
  CK (cudaMalloc (&res, (size_t) 128256 * 4));
  fill_random<<<64, 256>>> ((uint8_t *) x, 14336 * 4, 7, 3);
  fill_random<<<64, 256>>> ((uint8_t *) g, 14336 * 4, 8, 3);
  CK (cudaMemset (res, 0, (size_t) 128256 * 4));
  HoneKActQ8 xq;
  CK (cudaMalloc (&xq.q, 14336));
  CK (cudaMalloc (&xq.ds, 14336 / 32 * 8));
  CK (hone_k_quantize (x, 1, 4096, &xq, NULL, 0, 0));
  for (int type : { HONE_K_BF16, HONE_K_Q8_0, HONE_K_Q4_0, HONE_K_Q4_1 })
    for (auto &sh : shapes)
      {
        StagedBench b;
        const size_t one = hone_k_matrix_bytes (type, sh.rows, sh.cols, NULL, NULL);
        const int copies = (int) std::max<size_t> (2, (400u << 20) / one + 1);
        for (int i = 0; i < copies; i++)
          {
            HoneKMatrix m = matrix_alloc (type, sh.rows, sh.cols);
            fill_matrix (m, 100 + i);
            b.ms.push_back (m);
          }
        b.cur = 0;
        b.x = x; b.g = g; b.y = y; b.res = res; b.xq = xq; b.epi = sh.epi; b.norm = sh.norm;
        b.quant = type != HONE_K_BF16;
        const double act = (type == HONE_K_BF16 ? 4.0 : 1.0 + 8.0 / 32) * sh.cols
                           + 4.0 * (sh.epi == HONE_K_EPI_SWIGLU ? sh.rows / 2 : sh.rows) * (sh.epi == HONE_K_EPI_ADD ? 2 : 1);
        const double bytes = one + act, ideal = bytes / 4.4e12 * 1e6;
        /* old: PDL as decode_step used it (off for BF16, on for quantized); staged: on */
        b.staged = false;
        hone_k_gemv_set_staged (0);
        hone_k_set_pdl (b.quant ? 1 : 0);
        const double t_old = bench_ms (0, 20, staged_bench_fn, &b) * 1e3;
        b.staged = true;
        hone_k_gemv_set_staged (1);
        hone_k_set_pdl (1);
        /* the default (bulk, 128 KB), then other loaders and rings */
        const unsigned r0 = hone_k_gemv_staged_runs ();
        const double t_new = bench_ms (0, 20, staged_bench_fn, &b) * 1e3;
        const bool took = hone_k_gemv_staged_runs () != r0;
        const struct { int ld, kb; } vs[5] = { { 0, 96 }, { 1, 96 }, { 0, 64 }, { 2, 96 }, { 2, 128 } };
        double t_v[5];
        for (int i = 0; i < 5; i++)
          {
            t_v[i] = NAN;
            if (vs[i].ld == 2 && !cpa)
              continue;
            hone_k_gemv_set_stage_loader (vs[i].ld);
            hone_k_gemv_set_stage_kb (vs[i].kb);
            t_v[i] = bench_ms (0, 20, staged_bench_fn, &b) * 1e3;
          }
        hone_k_gemv_set_stage_kb (0);
        hone_k_gemv_set_stage_loader (-1);
        hone_k_gemv_set_staged (-1);
        hone_k_set_pdl (-1);
        report ("%-32s %-5s %7.1f %8.2f | %8.2f %5.1f%% | %8.2f %5.1f%% %+7.2f | %.2f %.2f %.2f %.2f %.2f%s\n", sh.name,
                type_name (type), one / 1e6, ideal, t_old, 100 * bytes / (t_old * 1e-6) / READ_CEIL, t_new,
                100 * bytes / (t_new * 1e-6) / READ_CEIL, t_new - ideal, t_v[0], t_v[1], t_v[2], t_v[3], t_v[4],
                took ? "" : "  (NOT STAGED)");
        for (auto &m : b.ms) matrix_free (&m);
      }
  cudaFree (x); cudaFree (g); cudaFree (y); cudaFree (res); cudaFree (xq.q); cudaFree (xq.ds);
}

/* The whole step, old kernels vs staged variants (loader, ring, PDL), each
 * captured in its own graph in the same process, at ctx 128; then the
 * fastest staged variant at 4k and 16k. Logits at a fixed position against
 * the old kernels': relative L2 within max(floor, 4 × what another launch
 * shape of the old kernels alone moves them), the model's own sensitivity
 * to the order of f32 sums (int8 re-quantization amplifies it). */
static void
bench_decode_staged (int type)
{
  struct Var { const char *name; int staged, pdl, fuse, ring, loader, cfg; };
  const bool f = type == HONE_K_BF16;
  const int opdl = f ? 0 : 1;   /* the old kernels' PDL default */
  std::vector<Var> vars = {
    { f ? "old (norm at end, no pdl)" : "old (attn int8 for o, pdl)", 0, opdl, 1, 0, -1, -1 },
    { "old, launch shape 0", 0, opdl, 1, 0, -1, 0 },
    { "staged bulk 128K", 1, 1, 1, 128, 0, -1 },
    { "staged bulk 96K", 1, 1, 1, 96, 0, -1 },
    { "staged bulk/4K 96K", 1, 1, 1, 96, 1, -1 },
    { "staged bulk 128K no pdl", 1, 0, 1, 128, 0, -1 },
  };
  if (!f)
    vars.push_back ({ "staged bulk 128K, o quantizes", 1, 1, 0, 128, 0, -1 });
  if (getenv ("HONE_BENCH_CPASYNC"))   /* not yet run in its present form */
    {
      vars.push_back ({ "staged cp.async 96K", 1, 1, 1, 96, 2, -1 });
      vars.push_back ({ "staged cp.async 128K", 1, 1, 1, 128, 2, -1 });
      vars.push_back ({ "staged cp.async 96K no pdl", 1, 0, 1, 96, 2, -1 });
    }
  /* HONE_DECODE_DEFAULT_ONLY: the default kernels alone, at every context (the headline table) */
  if (getenv ("HONE_DECODE_DEFAULT_ONLY"))
    vars.resize (1);
  StepRig rig;
  step_rig_open (rig, type);
  BigModel &b = rig.b;
  HoneKKv &kv = rig.kv;
  HoneKState &st = rig.st;
  cudaStream_t s = rig.s;
  std::vector<float> logits0;
  double sens = 0;
  int best = -1;
  double best_ms = 1e30;
  hone_k_gemv_set_norm_end (1);
  for (size_t vi = 0; vi <= vars.size (); vi++)
    {
      /* the last round: the fastest staged variant again, at every context */
      const bool again = vi == vars.size ();
      if (again && best < 0)
        break;
      const Var &v = vars[again ? best : vi];
      hone_k_gemv_set_staged (v.staged);
      hone_k_gemv_set_stage_kb (v.ring);
      hone_k_gemv_set_stage_loader (v.loader);
      hone_k_gemv_set_config (v.cfg);
      hone_k_set_pdl (v.pdl);
      hone_k_decode_tune (0, 0, v.fuse, -1);
      cudaGraph_t g;
      cudaGraphExec_t ge;
      const unsigned r0 = hone_k_gemv_staged_runs ();
      CK (cudaStreamBeginCapture (s, cudaStreamCaptureModeThreadLocal));
      const int r = hone_k_forward (&b.m, &kv, &st, 1, 0, 1, 1, 0.f, 0, s);
      CK (cudaStreamEndCapture (s, &g));
      CK (r);
      const unsigned staged_gemvs = hone_k_gemv_staged_runs () - r0;
      size_t nodes = 0;
      CK (cudaGraphGetNodes (g, NULL, &nodes));
      CK (cudaGraphInstantiate (&ge, g, 0));
      const int32_t tok = 1, p0 = 128;
      CK (cudaMemcpyAsync (st.tokens, &tok, 4, cudaMemcpyHostToDevice, s));
      CK (cudaMemcpyAsync (st.pos, &p0, 4, cudaMemcpyHostToDevice, s));
      CK (cudaMemsetAsync (st.logits, 0xff, 128256 * 4, s));
      CK (cudaGraphLaunch (ge, s));
      CK (cudaStreamSynchronize (s));
      const std::vector<float> lg = dev_download<float> (st.logits, 128256);
      char cmp[112] = "(reference)";
      if (vi == 0)
        logits0 = lg;
      else
        {
          double num = 0, den = 0;
          bool fin = true;
          for (size_t i = 0; i < lg.size (); i++)
            {
              fin &= std::isfinite (lg[i]);
              num += ((double) lg[i] - logits0[i]) * ((double) lg[i] - logits0[i]);
              den += (double) logits0[i] * logits0[i];
            }
          const double e = sqrt (num / (den + 1e-300));
          if (vi == 1)
            {
              sens = e;
              snprintf (cmp, sizeof cmp, "logits vs old: rel L2 %.2e (the model's sensitivity to sum order)", e);
            }
          else
            {
              const double bound = std::max (f ? 1e-4 : 2e-2, 4 * sens);
              const bool ok = fin && e < bound;
              if (!ok && !again)
                n_fail++;
              snprintf (cmp, sizeof cmp, "logits vs old: rel L2 %.2e (bound %.1e)%s", e, bound, ok ? "" : " FAIL");
            }
        }
      for (int ctx : { 128, 4096, 16384 })
        {
          if ((vi > 0 && ctx != 128 && !again) || (again && ctx == 128))
            continue;
          const double ms = decode_graph_ms (ge, st, s, ctx);
          if (v.staged && !again && ms < best_ms)
            {
              best_ms = ms;
              best = (int) vi;
            }
          const double kvbytes = 2.0 * 32 * (ctx + 25) * 8 * 128 * 2;
          const double gbs = (b.weight_bytes + kvbytes) / (ms * 1e-3) / 1e9;
          report ("decode3 %-5s %-34s ctx %5d: %7.3f ms  %6.1f tok/s  %5.1f%% of 4.52 TB/s  [%zu nodes, %u staged]  %s\n",
                  type_name (type), v.name, ctx, ms, 1e3 / ms, 100 * gbs * 1e9 / READ_CEIL, nodes, staged_gemvs,
                  again ? "(fastest staged)" : cmp);
        }
      cudaGraphExecDestroy (ge);
      cudaGraphDestroy (g);
    }
  hone_k_gemv_set_staged (-1);
  hone_k_gemv_set_stage_kb (0);
  hone_k_gemv_set_stage_loader (-1);
  hone_k_gemv_set_config (-1);
  hone_k_set_pdl (-1);
  hone_k_decode_tune (0, 0, 1, -1);
  step_rig_close (rig);
}

/* ---- decode with quantization in the epilogues (fuseq) ------------------------ */

struct EpiqBench {
  std::vector<HoneKMatrix> ms;
  int cur;
  HoneKActQ8 in, out;
  float *ssq, *g, *y, *res;
  int epi;
  bool cons, prod;
};

/* One GEMV as decode_step runs it with EpiQ: one launch, no norm/quantize. */
static void
epiq_bench_fn (void *p)
{
  EpiqBench *b = (EpiqBench *) p;
  HoneKMatrix *m = &b->ms[b->cur];
  b->cur = (b->cur + 1) % (int) b->ms.size ();
  HoneKGemvOp op;
  memset (&op, 0, sizeof op);
  op.w = m;
  op.n_tok = 1;
  op.xq = &b->in;
  op.epilogue = b->epi;
  op.eps = 1e-5f;
  op.res = b->epi == HONE_K_EPI_ADD ? b->res : NULL;
  op.y = b->epi == HONE_K_EPI_SWIGLU && b->prod ? NULL : b->y;
  HoneKEpiQ eq;
  memset (&eq, 0, sizeof eq);
  if (b->cons)
    eq.in_ssq = b->ssq;
  if (b->prod)
    {
      eq.out = b->out;
      eq.out_ssq = b->epi == HONE_K_EPI_ADD ? b->ssq + 1024 : NULL;
      eq.out_g = b->g;
    }
  CK (hone_k_gemv_epiq (&op, &eq, NULL, 0));
}

/* Per GEMV: old (register-streamed + its norm/quantize launch, as decode_step
 * enqueued it; o reads attention's int8) vs EpiQ (one launch), PDL on. */
static void
bench_gemvs_epiq (void)
{
  struct { const char *name; int rows, cols, epi; bool norm, cons, prod; } shapes[] = {
    { "qkv 6144x4096 +norm", 6144, 4096, HONE_K_EPI_STORE, true, true, false },
    { "o 4096x4096 +res", 4096, 4096, HONE_K_EPI_ADD, false, false, true },
    { "gate|up 28672x4096 +norm swiglu", 28672, 4096, HONE_K_EPI_SWIGLU, true, true, true },
    { "down 4096x14336 +res", 4096, 14336, HONE_K_EPI_ADD, false, false, true },
    { "lm_head 128256x4096 +norm", 128256, 4096, HONE_K_EPI_STORE, true, true, false },
  };
  report ("\n== one-token GEMVs: old (+ its norm/quantize launch, as decode_step enqueued it) vs epiq (quantization in "
          "the epilogue, one launch); PDL on; weights rotated over >= 400 MB, median of 5x20 ==\n");
  report ("%-32s %-5s %7s %8s | %8s %6s | %8s %6s %7s | producers shape 0 / 2 us\n", "matrix", "type", "MB",
          "ideal us", "old us", "%read", "epiq us", "%read", "-old");
  float *x, *g, *y, *res, *ssq;
  CK (cudaMalloc (&x, 14336 * 4));
  CK (cudaMalloc (&g, 14336 * 4));
  CK (cudaMalloc (&y, (size_t) 128256 * 4));
  CK (cudaMalloc (&res, (size_t) 128256 * 4));
  CK (cudaMalloc (&ssq, 2048 * 4));
  fill_random<<<64, 256>>> ((uint8_t *) x, 14336 * 4, 7, 3);
  fill_random<<<64, 256>>> ((uint8_t *) g, 14336 * 4, 8, 3);
  CK (cudaMemset (res, 0, (size_t) 128256 * 4));
  CK (cudaMemset (ssq, 0, 2048 * 4));
  HoneKActQ8 xq, oq;
  CK (cudaMalloc (&xq.q, 14336));
  CK (cudaMalloc (&xq.ds, 14336 / 32 * 8));
  CK (cudaMalloc (&oq.q, 14336));
  CK (cudaMalloc (&oq.ds, 14336 / 32 * 8));
  CK (hone_k_quantize (x, 1, 14336, &xq, NULL, 0, 0));
  for (int type : { HONE_K_Q8_0, HONE_K_Q4_0, HONE_K_Q4_1 })
    for (auto &sh : shapes)
      {
        StagedBench b;
        EpiqBench e;
        const size_t one = hone_k_matrix_bytes (type, sh.rows, sh.cols, NULL, NULL);
        const int copies = (int) std::max<size_t> (2, (400u << 20) / one + 1);
        for (int i = 0; i < copies; i++)
          {
            HoneKMatrix m = matrix_alloc (type, sh.rows, sh.cols);
            fill_matrix (m, 100 + i);
            b.ms.push_back (m);
          }
        e.ms = b.ms;
        b.cur = e.cur = 0;
        b.x = x; b.g = g; b.y = y; b.res = res; b.xq = xq; b.epi = sh.epi; b.norm = sh.norm;
        b.quant = true;
        b.staged = false;
        e.in = xq; e.out = oq; e.ssq = ssq; e.g = g; e.y = y; e.res = res; e.epi = sh.epi;
        e.cons = sh.cons; e.prod = sh.prod;
        const double act = (1.0 + 8.0 / 32) * sh.cols
                           + 4.0 * (sh.epi == HONE_K_EPI_SWIGLU ? sh.rows / 2 : sh.rows) * (sh.epi == HONE_K_EPI_ADD ? 2 : 1);
        const double bytes = one + act, ideal = bytes / 4.4e12 * 1e6;
        hone_k_gemv_set_staged (0);
        hone_k_set_pdl (1);
        const double t_old = bench_ms (0, 20, staged_bench_fn, &b) * 1e3;
        const double t_new = bench_ms (0, 20, epiq_bench_fn, &e) * 1e3;
        double t_p[2] = { NAN, NAN };
        for (int i = 0; i < 2 && sh.prod; i++)
          {
            hone_k_gemv_epiq_set_producer_config (i == 0 ? 0 : 2);
            t_p[i] = bench_ms (0, 20, epiq_bench_fn, &e) * 1e3;
          }
        hone_k_gemv_epiq_set_producer_config (-1);
        hone_k_gemv_set_staged (-1);
        hone_k_set_pdl (-1);
        report ("%-32s %-5s %7.1f %8.2f | %8.2f %5.1f%% | %8.2f %5.1f%% %+7.2f | %.2f %.2f\n", sh.name, type_name (type),
                one / 1e6, ideal, t_old, 100 * bytes / (t_old * 1e-6) / READ_CEIL, t_new,
                100 * bytes / (t_new * 1e-6) / READ_CEIL, t_new - t_old, t_p[0], t_p[1]);
        for (auto &m : b.ms) matrix_free (&m);
      }
  cudaFree (x); cudaFree (g); cudaFree (y); cudaFree (res); cudaFree (ssq);
  cudaFree (xq.q); cudaFree (xq.ds); cudaFree (oq.q); cudaFree (oq.ds);
}

/* The whole step (CUDA graph, greedy on the GPU): the default (EpiQ off:
 * measured slower) against EpiQ variants (producer mask, producer launch
 * shape), each captured in its own graph in the same process, at ctx 128
 * (default, old and EpiQ-all also at 4k / 16k). Logits at position 128 of the two against each other: relative L2
 * within max(2e-2, 4 × what another launch shape moves them) — the model's
 * own sensitivity to rounding order (int8 re-quantization in 32 layers
 * amplifies it). HONE_DECODE_DEFAULT_ONLY: the default alone. */
static void
bench_decode_epiq (int type)
{
  /* bound: the step captured with HoneKState.ctx_bound (short-context attention), run at contexts within it */
  /* pdl: -1 automatic, 0/1 forced; pick: the launch-shape rule (hone_k_gemv_set_pick), -1 the default */
  struct Var { const char *name; int epiq, cfg, pcfg, bound; int pdl = -1; int pick = -1; };
  const bool q = type != HONE_K_BF16;
  std::vector<Var> vars = { { q ? "default (epiq off)" : "default", -1, -1, -1, 0 } };
  /* the second variant measures how much another summation order alone moves
   * this random model's logits (the bound of the others' comparison): the
   * random Q8_0 model moves by 1.5-4e-2, the others by < 1e-4 */
  if (q)
    vars.push_back ({ "default, launch shape 0", -1, 0, -1, 0 });
  if (q && !getenv ("HONE_DECODE_DEFAULT_ONLY"))
    {
      vars.push_back ({ "old (norm/quantize launches)", 0, -1, -1, 0 });
      vars.push_back ({ "epiq all", 1, -1, -1, 0 });
      vars.push_back ({ "epiq all, producers shape 0", 1, -1, 0, 0 });
      vars.push_back ({ "epiq all, producers shape 2", 1, -1, 2, 0 });
      vars.push_back ({ "epiq down only", 8, -1, -1, 0 });
      vars.push_back ({ "epiq down only, shape 0", 8, -1, 0, 0 });
      vars.push_back ({ "epiq gate|up+down", 12, -1, -1, 0 });
      vars.push_back ({ "epiq o+down", 10, -1, -1, 0 });
    }
  /* the short-context attention shape, as the CUDA backend captures a step
   * while the context is within hone_k_attn_short_ctx () (0: not on this device) */
  if (hone_k_attn_short_ctx () > 0)
    vars.push_back ({ "default, short-ctx attention", -1, -1, -1, hone_k_attn_short_ctx () });
  /* and up to 256 keys (hone_k_attn_tiny_ctx (): the tiny attention kernel), timed at 128 */
  if (hone_k_attn_tiny_ctx () > 0)
    vars.push_back ({ "default, tiny-ctx attention", -1, -1, -1, hone_k_attn_tiny_ctx () });
  /* HONE_DECODE_PDL_AB: the default with PDL the other way (automatic: off for BF16, on for quantized) */
  if (getenv ("HONE_DECODE_PDL_AB"))
    vars.push_back ({ q ? "default, PDL forced off" : "default, PDL forced on", -1, -1, -1, 0, q ? 0 : 1 });
  /* HONE_DECODE_PICK_AB: the default with session 2's launch shapes (rule 9) */
  if (getenv ("HONE_DECODE_PICK_AB"))
    vars.push_back ({ "default, session-2 shapes", -1, -1, -1, 0, -1, 9 });
  StepRig rig;
  step_rig_open (rig, type);
  BigModel &b = rig.b;
  HoneKKv &kv = rig.kv;
  HoneKState &st = rig.st;
  cudaStream_t s = rig.s;
  std::vector<float> logits0;
  double sens = 0;
  for (size_t vi = 0; vi < vars.size (); vi++)
    {
      const Var &v = vars[vi];
      st.ctx_bound = v.bound;
      hone_k_decode_set_epiq (v.epiq);
      hone_k_gemv_set_config (v.cfg);
      hone_k_gemv_epiq_set_producer_config (v.pcfg);
      if (v.pdl >= 0)   /* (else HONE_PDL or automatic, as before) */
        hone_k_set_pdl (v.pdl);
      hone_k_gemv_set_pick (v.pick);
      const unsigned r0 = hone_k_gemv_epiq_runs ();
      size_t nodes;
      cudaGraphExec_t ge = capture_decode_step (b, kv, st, s, &nodes);
      st.ctx_bound = 0;
      if (vi == 0)
        {
          profile_step_maybe (type_name (type), ge, st.pos, s, 128);
          trace_step_maybe (type_name (type), ge, st.pos, s, 128);
        }
      if (v.bound)   /* ":bound" the 2k tier's graph, ":tiny" the 256-key one's */
        {
          const std::string tag = std::string (type_name (type)) + (v.bound == hone_k_attn_tiny_ctx () ? ":tiny" : ":bound");
          profile_step_maybe (tag.c_str (), ge, st.pos, s, 128);
          trace_step_maybe (tag.c_str (), ge, st.pos, s, 128);
        }
      const unsigned eq = hone_k_gemv_epiq_runs () - r0;
      const std::vector<float> lg = decode_step_logits (ge, st, s, 128256);
      char cmp[128] = "(reference)";
      if (vi > 0)
        {
          bool fin;
          const double e = logits_rel_l2 (lg, logits0, &fin);
          if (vi == 1 && !v.bound)
            {
              sens = e;
              snprintf (cmp, sizeof cmp, "logits vs default: rel L2 %.2e (sensitivity to rounding order)", e);
            }
          else
            {
              const double bound = std::max (2e-2, 4 * sens);
              const bool ok = fin && e < bound;
              if (!ok)
                n_fail++;
              snprintf (cmp, sizeof cmp, "logits vs default: rel L2 %.2e (bound %.1e)%s", e, bound, ok ? "" : " FAIL");
            }
        }
      else
        logits0 = lg;
      for (int ctx : { 128, 1024, 2048, 4096, 16384 })
        {
          if (v.bound ? ctx > v.bound : vi > 0 && (ctx == 1024 || ctx == 2048))
            continue;
          if (!v.bound && vi > 3 && ctx != 128)   /* default, old, epiq all: every context */
            continue;
          if (v.cfg >= 0 && ctx != 128)
            continue;
          const double ms = decode_graph_ms (ge, st, s, ctx);
          const double kvbytes = 2.0 * 32 * (ctx + 25) * 8 * 128 * 2;
          const double gbs = (b.weight_bytes + kvbytes) / (ms * 1e-3) / 1e9;
          report ("decode4 %-5s %-30s ctx %5d: %7.3f ms  %6.1f tok/s  %5.1f%% of 4.52 TB/s  [%zu nodes, %u epiq]  %s\n",
                  type_name (type), v.name, ctx, ms, 1e3 / ms, 100 * gbs * 1e9 / READ_CEIL, nodes, eq, cmp);
        }
      cudaGraphExecDestroy (ge);
    }
  hone_k_decode_set_epiq (-1);
  hone_k_gemv_set_config (-1);
  hone_k_gemv_epiq_set_producer_config (-1);
  if (getenv ("HONE_DECODE_PDL_AB"))
    hone_k_set_pdl (-1);
  hone_k_gemv_set_pick (-1);
  step_rig_close (rig);
}

/* Per-block timestamps of one streamed launch (site 5: after layer 4's
 * attention), replayed at ctx 128: per phase the spread over blocks of the
 * time its input was staged and the block's tasks of it were published, and
 * when the producers issued the phase's last copy, in µs from the earliest
 * staging of phase 0 (the first block past attention); and how long the
 * producer waited for free slots and consumer group 0 for full ones. */
static void
stream_trace_report (BigModel &b, HoneKKv &kv, HoneKState &st, cudaStream_t s, const char *tag)
{
  int sms = 0;
  CK (cudaDeviceGetAttribute (&sms, cudaDevAttrMultiProcessorCount, 0));
  unsigned long long *tr;
  constexpr int W = HONE_K_STREAM_TRACE_WORDS;   /* [7][3] a block */
  const size_t n = (size_t) 2 * sms * W;         /* sites 5 and 6: layer 4's launch and layer 5's */
  CK (cudaMalloc (&tr, n * 8));
  /* the trace pointer is read when the launch is enqueued: a graph of its own */
  hone_k_stream_set_trace (tr, 5);
  size_t nodes;
  cudaGraphExec_t te = capture_decode_step (b, kv, st, s, &nodes);
  hone_k_stream_set_trace (NULL, -1);
  const int32_t p0 = 128;
  for (int i = 0; i < 3; i++)
    {
      CK (cudaMemcpyAsync (st.pos, &p0, 4, cudaMemcpyHostToDevice, s));
      if (i == 2)
        CK (cudaMemsetAsync (tr, 0, n * 8, s));
      CK (cudaGraphLaunch (te, s));
    }
  CK (cudaStreamSynchronize (s));
  std::vector<unsigned long long> h = dev_download<unsigned long long> (tr, n);
  auto at = [&] (int site, int blk, int row, int col) { return h[(size_t) site * sms * W + (size_t) blk * W + row * 3 + col]; };
  unsigned long long t0 = ~0ull;
  for (int b = 0; b < sms; b++)
    if (at (0, b, 0, 0) && at (0, b, 0, 0) < t0)
      t0 = at (0, b, 0, 0);
  auto rel = [&] (unsigned long long x) { return (double) (long long) (x - t0) / 1e3; };
  /* min/median/max over blocks of one word, µs from t0 */
  auto stats = [&] (int site, int row, int col) -> std::string {
    std::vector<double> v;
    for (int b = 0; b < sms; b++)
      if (at (site, b, row, col) && t0 != ~0ull)
        v.push_back (rel (at (site, b, row, col)));
    if (v.empty ())
      return "-";
    std::sort (v.begin (), v.end ());
    char buf[64];
    snprintf (buf, sizeof buf, "%6.2f/%6.2f/%6.2f", v.front (), v[v.size () / 2], v.back ());
    return buf;
  };
  report ("stream trace %s block start %s (%d blocks)\n", tag, stats (0, 4, 0).c_str (), sms);
  {
    /* which side waited: the producer for free slots (consumers the bottleneck) or
     * consumer group 0 for full ones (the copies) */
    std::vector<double> pw, cw;
    for (int b = 0; b < sms; b++)
      {
        pw.push_back (at (0, b, 4, 1) / 1980.0);
        cw.push_back (at (0, b, 4, 2) / 1980.0);
      }
    std::sort (pw.begin (), pw.end ());
    std::sort (cw.begin (), cw.end ());
    report ("stream trace %s waits (µs at 1.98 GHz, median/max over blocks): producer for a free slot %.1f/%.1f, "
            "consumer group 0 for a full slot %.1f/%.1f\n", tag, pw[sms / 2], pw.back (), cw[sms / 2], cw.back ());
  }
  static const char *pn[4] = { "o", "gate|up", "down", "qkv" };
  for (int p = 0; p < 4; p++)
    report ("stream trace %s %-8s %s staged %s  published %s  last copy %s  (µs from the first o staging: "
            "min/median/max over blocks)\n", tag, pn[p],
            p ? ("input seen " + stats (0, 6, p - 1) + " ").c_str () : "", stats (0, p, 0).c_str (),
            stats (0, p, 1).c_str (), stats (0, p, 2).c_str ());
  /* the boundary to the next layer: this launch's exit, the next launch's
   * blocks' start and its o staged (after attention, between the two) */
  report ("stream trace %s exit %s  next launch: block start %s, o staged %s\n", tag, stats (0, 5, 0).c_str (),
          stats (1, 4, 0).c_str (), stats (1, 0, 0).c_str ());
  cudaGraphExecDestroy (te);
  cudaFree (tr);
}

/* HONE_STREAM_WATCH=1: one replay of the step captured with the streamed
 * launches' watch on (hone_k_stream_set_watch: every warp's position in
 * mapped host memory); if it has not finished after 10 s, every warp's last
 * position is printed and the process exits (a stalled launch cannot be
 * stopped otherwise). */
static void
stream_watched_replay (BigModel &b, HoneKKv &kv, HoneKState &st, cudaStream_t s)
{
  if (!getenv ("HONE_STREAM_WATCH"))
    return;
  static const char *names[] = { "-", "producer: waits for a free slot", "producer: issued a task",
                                 "producer: wrote a mark", "producer: done", "consumer: waits for a full slot",
                                 "consumer: read the slot's meta", "consumer: waits for the previous phase",
                                 "consumer: at the staging barrier", "consumer: staged", "consumer: in a task",
                                 "consumer: task done", "consumer: mark done", "consumer: done" };
  int dev_id = 0, nsm = 0;
  CK (cudaGetDevice (&dev_id));
  CK (cudaDeviceGetAttribute (&nsm, cudaDevAttrMultiProcessorCount, dev_id));
  const size_t words = (size_t) nsm * 9 * HONE_K_STREAM_WATCH_WORDS;
  unsigned *host = NULL, *dev = NULL;
  CK (cudaHostAlloc ((void **) &host, words * 4, cudaHostAllocMapped));
  memset (host, 0, words * 4);
  CK (cudaHostGetDevicePointer ((void **) &dev, host, 0));
  hone_k_stream_set_watch (dev);
  size_t nodes;
  cudaGraphExec_t ge = capture_decode_step (b, kv, st, s, &nodes);
  hone_k_stream_set_watch (NULL);
  const int32_t tok = 1, p0 = 128;
  CK (cudaMemcpyAsync (st.tokens, &tok, 4, cudaMemcpyHostToDevice, s));
  CK (cudaMemcpyAsync (st.pos, &p0, 4, cudaMemcpyHostToDevice, s));
  CK (cudaGraphLaunch (ge, s));
  cudaError_t q = cudaErrorNotReady;
  for (int i = 0; i < 1000 && (q = cudaStreamQuery (s)) == cudaErrorNotReady; i++)
    usleep (10000);
  if (q == cudaSuccess)
    {
      report ("stream watch: the watched replay finished\n");
      cudaGraphExecDestroy (ge);
      cudaFreeHost (host);
      return;
    }
  if (q == cudaErrorNotReady)
    report ("stream watch: the watched replay has not finished after 10 s; each warp's last position:\n");
  else
    report ("stream watch: the watched replay failed (%s); each warp's last position (the last writes may be lost):\n",
            cudaGetErrorString (q));
  std::map<std::string, int> hist;
  for (int blk = 0; blk < nsm; blk++)
    for (int w = 0; w < 9; w++)
      {
        const volatile unsigned *r = host + ((size_t) blk * 9 + w) * HONE_K_STREAM_WATCH_WORDS;
        const unsigned where = r[0];
        const char *nm = (where & 0xff) < sizeof names / sizeof *names ? names[where & 0xff] : "?";
        char key[160];
        snprintf (key, sizeof key, "%s%s, phase %d, cur %d", nm, where & 0x100 ? " (STUCK)" : "", (int) r[3], (int) r[5]);
        hist[key]++;
        report ("watch block %3d warp %d: %-40s%s k %u slot %d phase %d task %d cur %d seen %u target %u\n", blk, w, nm,
                where & 0x100 ? " STUCK" : "", r[1], (int) r[2], (int) r[3], (int) r[4], (int) r[5], r[6], r[7]);
      }
  for (auto &h : hist)
    report ("watch summary: %4d warps  %s\n", h.second, h.first.c_str ());
  fflush (stdout);
  _exit (3);
}

/* The whole one-token step (CUDA graph, greedy on the GPU), per-GEMV kernels
 * against the streamed launches (hone-k-decode-stream.cu) and their shapes
 * (shared memory a block, slot size, PDL), each in its own graph in the same
 * process; logits at position 128 against the default within max(2e-2,
 * 4 × what another launch shape of the default moves them). */
static void
bench_decode_stream (int type)
{
  /* bound: the graph captured for contexts <= bound (HoneKState.ctx_bound, as
   * the engine's short-context graphs), timed at 128, 1k and 2k keys; else at
   * 128, 4k and 16k. */
  struct Var { const char *name; int stream, smem_kb, slot_kb, pct, loader, pdl, cfg, early = -1, bound = 0; };
  const bool q = type != HONE_K_BF16;
  std::vector<Var> vars = {
    { "per-GEMV kernels", 0, 0, 0, -1, -1, -1, -1 },
    { "per-GEMV, launch shape 0", 0, 0, 0, -1, -1, -1, 0 },
    { "streamed", 1, 0, 0, -1, -1, -1, -1 },
    { "per-GEMV, bound 2k", 0, 0, 0, -1, -1, -1, -1, -1, 2048 },
    { "streamed, bound 2k", 1, 0, 0, -1, -1, -1, -1, -1, 2048 },
  };
  const size_t n_full = vars.size ();   /* the rows timed at every context */
  if (!getenv ("HONE_DECODE_DEFAULT_ONLY"))
    {
      vars.push_back ({ "streamed, cp.async loader", 1, 0, 0, -1, 1, -1, -1 });
      vars.push_back ({ "streamed, all claimed", 1, 0, 0, 0, -1, -1, -1 });
      vars.push_back ({ "streamed, 90 % static", 1, 0, 0, 90, -1, -1, -1 });
      vars.push_back ({ "streamed 226 KB", 1, 226, 0, -1, -1, -1, -1 });
      vars.push_back ({ "streamed 226 KB, cp.async", 1, 226, 0, -1, 1, -1, -1 });
      vars.push_back ({ "streamed slot 16 KB", 1, 0, 16, -1, -1, -1, -1 });
      vars.push_back ({ "streamed slot 24 KB", 1, 0, 24, -1, -1, -1, -1 });
      vars.push_back ({ "streamed, PDL off", 1, 0, 0, -1, -1, 0, -1 });
      vars.push_back ({ "streamed, copies after attention", 1, 0, 0, -1, -1, -1, -1, 0 });
      if (q)
        vars.push_back ({ "streamed 176 KB (attn beside)", 1, 176, 0, -1, -1, -1, -1 });
    }
  StepRig rig;
  step_rig_open (rig, type);
  BigModel &b = rig.b;
  HoneKKv &kv = rig.kv;
  HoneKState &st = rig.st;
  cudaStream_t s = rig.s;
  auto set_knobs = [&] (const Var &v) {
    hone_k_decode_set_stream (v.stream);
    hone_k_stream_set_shape (v.smem_kb, v.slot_kb, v.pct, v.loader);
    hone_k_stream_set_early (v.early);
    hone_k_gemv_set_config (v.cfg);
    hone_k_set_pdl (v.pdl >= 0 ? v.pdl : -1);
    st.ctx_bound = v.bound;
  };
  /* every variant's graph and logits first (at 128 and 16k keys), before
   * any timing: the timed replays write KV rows past those positions (the
   * token each step samples), which a later variant's 16k step would read */
  struct Run { cudaGraphExec_t ge; size_t nodes; unsigned sr; std::vector<float> lg, lg16; };
  std::vector<Run> runs (vars.size ());
  for (size_t vi = 0; vi < vars.size (); vi++)
    {
      const Var &v = vars[vi];
      set_knobs (v);
      if (v.stream)
        stream_watched_replay (b, kv, st, s);
      const unsigned r0 = hone_k_stream_runs ();
      runs[vi].ge = capture_decode_step (b, kv, st, s, &runs[vi].nodes);
      st.ctx_bound = 0;
      runs[vi].sr = hone_k_stream_runs () - r0;
      runs[vi].lg = decode_step_logits (runs[vi].ge, st, s, 128256);
      if (!v.bound)
        runs[vi].lg16 = decode_step_logits (runs[vi].ge, st, s, 128256, 16384);
    }
  /* a bounded graph (all rows here share one bound) is compared at its bound instead, with the unbounded
   * per-GEMV graph's logits there, after every 16k step (a step at the bound
   * writes KV row bound - 1, which a 16k step reads) */
  std::vector<float> ref_bound;
  for (size_t vi = 0; vi < vars.size (); vi++)
    if (vars[vi].bound)
      {
        if (ref_bound.empty ())
          {
            set_knobs (vars[0]);
            ref_bound = decode_step_logits (runs[0].ge, st, s, 128256, vars[vi].bound - 1);
          }
        set_knobs (vars[vi]);
        runs[vi].lg16 = decode_step_logits (runs[vi].ge, st, s, 128256, vars[vi].bound - 1);
      }
  double sens = 0, sens16 = 0;
  for (size_t vi = 0; vi < vars.size (); vi++)
    {
      const Var &v = vars[vi];
      const Run &r = runs[vi];
      set_knobs (v);
      char cmp[192] = "(reference)";
      if (vi > 0)
        {
          bool fin, fin16;
          const double e = logits_rel_l2 (r.lg, runs[0].lg, &fin);
          /* bounded graphs: at their bound, against the unbounded per-GEMV graph there */
          const double e16 = logits_rel_l2 (r.lg16, v.bound ? ref_bound : runs[0].lg16, &fin16);
          if (vi == 1)
            {
              sens = e;
              sens16 = e16;
              snprintf (cmp, sizeof cmp, "logits vs default: rel L2 %.2e, at 16k %.2e (sensitivity to rounding order)", e,
                        e16);
            }
          else
            {
              const double bound = std::max (2e-2, 4 * sens), bound16 = std::max (2e-2, 4 * sens16);
              const bool ok = fin && fin16 && e < bound && e16 < bound16 && (v.stream == 0 || r.sr > 0);
              if (!ok)
                n_fail++;
              snprintf (cmp, sizeof cmp, "logits vs default: rel L2 %.2e, at 16k (bounded: at the bound) %.2e (bounds %.1e, %.1e)%s", e, e16,
                        bound, bound16, ok ? "" : " FAIL");
            }
        }
      for (int ctx : { 128, 4096, 16384, 1024, 2048 })
        {
          if (v.bound ? ctx > v.bound : ctx == 1024 || ctx == 2048)
            continue;
          if ((vi >= n_full || vi == 1) && ctx != 128)
            continue;
          const double ms = decode_graph_ms (r.ge, st, s, ctx);
          const double kvbytes = 2.0 * 32 * (ctx + 25) * 8 * 128 * 2;
          const double gbs = (b.weight_bytes + kvbytes) / (ms * 1e-3) / 1e9;
          report ("stream %-5s %-30s ctx %5d: %7.3f ms  %6.1f tok/s  %5.1f%% of 4.52 TB/s  [%zu nodes, %u streamed]  %s\n",
                  type_name (type), v.name, ctx, ms, 1e3 / ms, 100 * gbs * 1e9 / READ_CEIL, r.nodes, r.sr, cmp);
        }
      if (vi == 2 || (v.stream && v.loader == 1 && !v.smem_kb) || v.early == 0)
        {
          const std::string tag = std::string (type_name (type)) + (v.loader == 1 ? " cp.async" : v.early == 0 ? " late copies" : "");
          stream_trace_report (b, kv, st, s, tag.c_str ());
        }
      cudaGraphExecDestroy (r.ge);
    }
  hone_k_set_pdl (-1);
  hone_k_decode_set_stream (-1);
  hone_k_stream_set_shape (0, 0, -1, -1);
  hone_k_stream_set_early (-1);
  hone_k_gemv_set_config (-1);
  step_rig_close (rig);
}

int
main (int argc, char **argv)
{
  bool do_check = true, do_bench = true, quick = false, prefill_only = false, check_prefill = false;
  bool decode_only = false, check_staged = false, decode2 = false, check_epiq_only = false;
  bool decode_stream = false, check_stream = false, gemv_sweep = false, sample_bench = false, check_samplers = false,
       sample_rows_only = false,
       check_misc = false;
  for (int i = 1; i < argc; i++)
    {
      if (!strcmp (argv[i], "--check")) do_bench = false;
      else if (!strcmp (argv[i], "--bench")) do_check = false;
      else if (!strcmp (argv[i], "--quick")) quick = true;
      else if (!strcmp (argv[i], "--decode")) { do_check = false; do_bench = false; decode_only = true; }   /* decode session 2 */
      else if (!strcmp (argv[i], "--prefill")) { do_check = false; prefill_only = true; }   /* prefill benchmarks only */
      else if (!strcmp (argv[i], "--check-prefill")) { do_check = false; do_bench = false; check_prefill = true; }
      else if (!strcmp (argv[i], "--check-staged")) { do_check = false; do_bench = false; check_staged = true; }
      else if (!strcmp (argv[i], "--decode2")) { do_check = false; do_bench = false; decode2 = true; }   /* session 2's variants */
      else if (!strcmp (argv[i], "--check-epiq")) { do_check = false; do_bench = false; check_epiq_only = true; }
      else if (!strcmp (argv[i], "--decode-stream")) { do_check = false; do_bench = false; decode_stream = true; }
      else if (!strcmp (argv[i], "--check-stream")) { do_check = false; do_bench = false; check_stream = true; }
      else if (!strcmp (argv[i], "--gemv-sweep")) { do_check = false; do_bench = false; gemv_sweep = true; }   /* every launch shape */
      else if (!strcmp (argv[i], "--bench-sample")) { do_check = false; do_bench = false; sample_bench = true; }   /* decode session 24 */
      else if (!strcmp (argv[i], "--check-misc")) { do_check = false; do_bench = false; check_misc = true; }   /* norms, dequantization, embedding alone */
      else if (!strcmp (argv[i], "--check-sample")) { do_check = false; do_bench = false; check_samplers = true; }   /* the samplers' checks alone (sanitizers) */
      else if (!strcmp (argv[i], "--check-sample-rows")) { do_check = false; do_bench = false; check_samplers = true; sample_rows_only = true; }   /* the chain's checks alone (racecheck: the Gumbel χ² is 20,000 launches) */
    }
  const char *out = getenv ("OUT");
  if (out && *out)
    {
      std::string p = std::string (out) + "/results.txt";
      results = fopen (p.c_str (), "w");
    }
  int dev = 0;
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties (&prop, dev) != cudaSuccess)
    {
      fprintf (stderr, "no CUDA device\n");
      return 77;
    }
  report ("device: %s, %d SMs, %.0f MB L2, cc %d.%d\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1e6,
          prop.major, prop.minor);
  if (do_check)
    {
      report ("== checks ==\n");
      /* the register-streamed kernels (staged forced off) */
      for (int type : { HONE_K_BF16, HONE_K_F16, HONE_K_Q8_0, HONE_K_Q4_0, HONE_K_Q4_1 })
        {
          check_gemv (type, 1030, 576, 1, HONE_K_EPI_STORE, false, false, 0);
          check_gemv (type, 1030, 576, 3, HONE_K_EPI_ADD, false, false, 0);
          check_gemv (type, 2 * 700, 1024, 8, HONE_K_EPI_SWIGLU, true, false, 0);
          check_gemv (type, 13000, 512, 1, HONE_K_EPI_STORE, true, false, 0);     /* R = 4 rows a warp */
          check_gemv (type, 4000, 256, 5, HONE_K_EPI_ADD, false, false, 0);       /* R = 1, 2 K slices */
          check_gemv (type, 16500, 256, 2, HONE_K_EPI_STORE, false, false, 0);    /* R = 4 */
          check_gemv (type, 16500, 256, 1, HONE_K_EPI_STORE, false, false, 0);    /* one token: Q4 R = 2, 2 loads, no K split */
          check_gemv (type, 300, 8192, 1, HONE_K_EPI_ADD, false, false, 0);       /* R = 1, 4 K slices (BF16/F16) */
          check_gemv (type, 200, 32768, 3, HONE_K_EPI_STORE, false, false, 0);    /* R = 1, 4 K slices (all) */
        }
      /* the one-token extra launch shapes, each forced */
      for (int type : { HONE_K_BF16, HONE_K_F16, HONE_K_Q8_0, HONE_K_Q4_0, HONE_K_Q4_1 })
        for (int cfg = HONE_K_GEMV_CONFIGS; cfg < HONE_K_GEMV_CONFIGS_Q1; cfg++)
          {
            int r, u, k;
            hone_k_gemv_config_shape (cfg, &r, &u, &k);
            report ("-- %s one token, launch shape %d (R%d U%d KS%d) forced --\n", type_name (type), cfg, r, u, k);
            hone_k_gemv_set_config (cfg);
            check_gemv (type, 1030, 576, 1, HONE_K_EPI_STORE, false, false, 0);
            check_gemv (type, 2 * 350, 1024, 1, HONE_K_EPI_SWIGLU, true, false, 0);
            check_gemv (type, 300, 8192, 1, HONE_K_EPI_ADD, false, false, 0);
            check_gemv (type, 257, 14336, 1, HONE_K_EPI_ADD, false, false, 0);
            /* the q|k|v GEMV's RoPE + KV epilogue (its matrix is BF16), plain and normed; adjacent pairs
             * only, as the epilogue rotates them (loaders reorder half-pairing models' q/k rows) */
            if (type == HONE_K_BF16)
              for (bool normed : { false, true })
                check_rope_kv (0, false, true, 1, 63, 0, normed);
            hone_k_gemv_set_config (-1);
          }
      /* one bulk copy a part (the default), bulk copies of 4 KB, cp.async (not yet run in its plain form) */
      for (int ld : { 0, 1, 2 })
        {
          hone_k_gemv_set_stage_loader (ld);
          staged_tag = ld == 2 ? " [staged cp.async]" : ld == 0 ? " [staged bulk]" : " [staged bulk/4K]";
          check_staged_gemvs (false);
        }
      hone_k_gemv_set_stage_loader (-1);
      staged_tag = " [staged]";
      /* BF16/F16 RMSNorm: the prologue form (the default applies it at the end) */
      hone_k_gemv_set_norm_end (0);
      check_gemv (HONE_K_BF16, 2 * 700, 1024, 8, HONE_K_EPI_SWIGLU, true);
      check_gemv (HONE_K_F16, 13000, 512, 1, HONE_K_EPI_STORE, true);
      hone_k_gemv_set_norm_end (1);
      check_attn_decode_q (128, 32, 8, 1000, 1);
      check_attn_decode_q (128, 32, 8, 37, 4);
      check_attn_decode_q (64, 9, 3, 5000, 8);
      check_attn_decode_q (128, 28, 4, 0, 1);
      for (int pairing = 0; pairing < 2; pairing++)
        for (int qkn = 0; qkn < 2; qkn++)
          check_rope_kv (pairing, qkn, false);
      check_rope_kv (0, false, true);
      check_rope_kv (0, false, true, 1, 63, 0);   /* one token, last slot of a page: register-streamed */
      check_rope_kv (0, false, true, 1, 63, 0, true);   /* the same with the normed input of decode_step's q|k|v */
      check_norm_misc ();
      check_attn (false, 128, 32, 8, 1000, 1);
      check_attn (false, 128, 32, 8, 37, 4);
      check_attn (false, 64, 9, 3, 5000, 8);
      check_attn (false, 128, 28, 4, 0, 1);
      check_attn (true, 128, 32, 8, 0, 200);
      check_attn (true, 128, 8, 2, 70, 150);
      check_attn (true, 64, 9, 3, 0, 64);
      /* prefill v2: GQA 1/3/4/8, continuation chunks (pos > 0, inside a page),
       * lengths off the 128-query and 64-key tiles, 16-bit outputs; v1 kept */
      for (int ver : { 2, 3 })
        {
          check_attn (true, 128, 8, 8, 130, 300, HONE_K_F32, ver);
          check_attn (true, 64, 16, 2, 5, 257, HONE_K_F32, ver);
          check_attn (true, 128, 16, 2, 1000, 129, HONE_K_F32, ver);
          check_attn (true, 128, 4, 1, 3, 17, HONE_K_F32, ver);
          check_attn (true, 64, 8, 8, 64, 9, HONE_K_F32, ver);
          check_attn (true, 128, 32, 8, 0, 200, HONE_K_BF16, ver);
          check_attn (true, 128, 8, 2, 70, 150, HONE_K_F16, ver);
          check_attn (true, 64, 9, 3, 77, 100, HONE_K_BF16, ver);
        }
      check_attn (true, 128, 8, 2, 70, 150, HONE_K_F32, 1);
      check_attn (true, 64, 9, 3, 0, 64, HONE_K_F32, 1);
      check_gemm (HONE_K_BF16, 300, 256, 37, false);
      check_gemm (HONE_K_BF16, 512, 1024, 200, false);
      check_gemm (HONE_K_Q4_0, 300, 256, 37, false);
      check_gemm (HONE_K_Q8_0, 256, 512, 129, false);
      check_gemm (HONE_K_BF16, 300, 256, 37, true);
      check_gemm (HONE_K_BF16, 640, 512, 300, false, true);   /* n >= 256: the first call times the candidates */
      check_gemm (HONE_K_Q4_0, 512, 256, 260, false, true);
      check_sample ();
      check_sample_rows ();
      check_epiq_all (false);
      check_tiny_model (HONE_K_BF16, 0);
      check_tiny_model (HONE_K_Q8_0, 0);
      check_tiny_model (HONE_K_Q4_1, 0);
      /* quantization in the epilogues (decode_step) on and off, every quantized type */
      for (int type : { HONE_K_Q8_0, HONE_K_Q4_0, HONE_K_Q4_1 })
        {
          check_tiny_model (type, 0, 7, 1);
          check_tiny_model (type, 0, 2, 0);
        }
      /* staged forced on: decode one token at a time, and prefill + 1- and 2-token steps */
      for (int type : { HONE_K_BF16, HONE_K_Q8_0, HONE_K_Q4_0, HONE_K_Q4_1 })
        check_tiny_model (type, 1, 3);
      hone_k_gemv_set_stage_loader (2);   /* and the cp.async loader */
      check_tiny_model (HONE_K_Q4_1, 1, 2);
      hone_k_gemv_set_stage_loader (-1);
      /* streamed one-token steps, every type the kernel takes, each on the
       * same model as a per-GEMV run just before it (same seed) */
      for (int type : { HONE_K_BF16, HONE_K_F16, HONE_K_Q8_0, HONE_K_Q4_0, HONE_K_Q4_1 })
        for (int on : { 0, 1 })
          {
            rng_state = HONE_CHECK_SEED + 77 * (uint64_t) type;
            check_tiny_model (type, -1, 7, -1, on);
          }
      report ("checks: %d passed, %d failed\n", n_pass, n_fail);
    }
  if (check_stream)
    {
      /* the streamed steps alone (small: compute-sanitizer) */
      report ("== streamed decode checks ==\n");
      /* each model twice from the same seed: per-GEMV kernels, then streamed */
      const int modes = getenv ("HONE_CHECK_STREAM_MODES") ? atoi (getenv ("HONE_CHECK_STREAM_MODES")) : 7;
      for (int type : { HONE_K_BF16, HONE_K_Q8_0, HONE_K_Q4_0, HONE_K_Q4_1 })
        /* per-GEMV; streamed with bulk copies, with cp.async; then on 2 and 3
         * blocks, where every block goes round its ring many times (a tight
         * ring of 64 KB in 12 KB slots with bulk copies; the default ring with
         * cp.async) */
        for (int run : { 0, 1, 2, 3, 4 })
          {
            rng_state = HONE_CHECK_SEED + 77 * (uint64_t) type;
            hone_k_stream_set_shape (run == 3 ? 64 : 0, run == 3 ? 12 : 0, -1, run == 2 || run == 4 ? 1 : 0);
            hone_k_stream_set_blocks (run == 3 ? 2 : run == 4 ? 3 : 0);
            check_tiny_model (type, -1, modes, -1, run > 0);
          }
      hone_k_stream_set_shape (0, 0, -1, -1);
      hone_k_stream_set_blocks (0);
      report ("checks: %d passed, %d failed\n", n_pass, n_fail);
    }
  if (decode_stream)
    {
      report ("\n== decode session 5: whole step, streamed vs per-GEMV kernels (CUDA graph, greedy on the GPU) ==\n");
      /* HONE_DECODE_STREAM_TYPES=BF16,Q4_0 (say): only those */
      const char *only = getenv ("HONE_DECODE_STREAM_TYPES");
      for (int type : { HONE_K_BF16, HONE_K_Q4_0, HONE_K_Q4_1, HONE_K_Q8_0 })
        if (!only || strstr (only, type_name (type)))
          bench_decode_stream (type);
    }
  if (check_epiq_only)
    {
      /* quantization in the epilogue alone, small (compute-sanitizer) */
      report ("== epiq checks ==\n");
      check_epiq_all (true);
      if (!getenv ("HONE_CHECK_NO_TINY"))
        check_tiny_model (HONE_K_Q4_0, 0, 2, 1);
      report ("checks: %d passed, %d failed\n", n_pass, n_fail);
    }
  if (check_staged)
    {
      /* the staged kernel's checks alone, small enough for compute-sanitizer */
      report ("== staged GEMV checks ==\n");
      for (int ld : { 0, 2 })
        {
          hone_k_gemv_set_stage_loader (ld);
          staged_tag = ld == 2 ? " [staged cp.async]" : " [staged bulk]";
          check_staged_gemvs (true);
        }
      hone_k_gemv_set_stage_loader (-1);
      if (!getenv ("HONE_CHECK_NO_TINY"))   /* racecheck: the attention kernel's warnings would drown the log */
        check_tiny_model (HONE_K_Q4_0, 1, 2);
      report ("checks: %d passed, %d failed\n", n_pass, n_fail);
    }
  if (decode_only)
    {
      /* decode session 3: staged GEMVs against the register-streamed ones, same process
       * (session 2's variants: bench_decode_variants, bench_gemv_norm, bench_o_after_attn) */
      if (getenv ("HONE_DECODE_STAGED"))   /* session 3's staged GEMVs */
        {
          if (!getenv ("HONE_DECODE_DEFAULT_ONLY"))
            {
              bench_gemvs_staged ();
              bench_attn ();
            }
          report ("\n== decode session 3: whole step, old vs staged (CUDA graph, greedy on the GPU) ==\n");
          for (int type : { HONE_K_BF16, HONE_K_Q4_0, HONE_K_Q4_1, HONE_K_Q8_0 })
            bench_decode_staged (type);
        }
      else
        {
          /* decode session 4: quantization in the GEMV epilogues vs the norm/quantize launches */
          if (!getenv ("HONE_DECODE_DEFAULT_ONLY"))
            bench_gemvs_epiq ();
          report ("\n== decode session 4: whole step, epiq vs old (CUDA graph, greedy on the GPU) ==\n");
          /* HONE_DECODE_TYPES=Q4_0,Q4_1 (say): only those */
          const char *only = getenv ("HONE_DECODE_TYPES");
          for (int type : { HONE_K_BF16, HONE_K_Q4_0, HONE_K_Q4_1, HONE_K_Q8_0 })
            if (!only || strstr (only, type_name (type)))
              bench_decode_epiq (type);
        }
    }
  if (decode2)
    {
      hone_k_gemv_set_staged (0);
      bench_gemvs (true);
      bench_gemv_norm ();
      bench_o_after_attn (HONE_K_BF16);
      bench_o_after_attn (HONE_K_Q4_0);
      report ("\n== decode session 2: whole step per variant (CUDA graph, greedy on the GPU) ==\n");
      for (int type : { HONE_K_BF16, HONE_K_Q4_0, HONE_K_Q4_1, HONE_K_Q8_0 })
        bench_decode_variants (type);
      hone_k_gemv_set_staged (-1);
    }
  if (check_prefill)
    {
      /* the prefill kernels' checks alone (small enough for compute-sanitizer) */
      report ("== prefill checks ==\n");
      check_attn (true, 128, 8, 2, 70, 150, HONE_K_F32, 2);
      check_attn (true, 64, 16, 2, 5, 257, HONE_K_BF16, 2);
      check_attn (true, 128, 4, 1, 3, 17, HONE_K_F16, 3);
      check_attn (true, 128, 8, 2, 70, 150, HONE_K_F32, 3);
      check_gemm (HONE_K_BF16, 300, 256, 37, false);
      check_gemm (HONE_K_Q4_0, 300, 256, 37, false);
      check_gemm (HONE_K_BF16, 640, 512, 300, false, true);
      report ("checks: %d passed, %d failed\n", n_pass, n_fail);
    }
  if (prefill_only)
    {
      bench_prefill (HONE_K_BF16, false);
      bench_prefill (HONE_K_Q4_0, true);
      do_bench = false;
    }
  if (check_misc)
    {
      report ("== norms, dequantization, embedding ==\n");
      check_norm_misc ();
      report ("checks: %d passed, %d failed\n", n_pass, n_fail);
    }
  if (check_samplers)
    {
      report ("== sampler checks ==\n");
      if (!sample_rows_only)
        check_sample ();
      check_sample_rows ();
      report ("checks: %d passed, %d failed\n", n_pass, n_fail);
    }
  if (sample_bench)
    bench_sample ();
  if (gemv_sweep)
    bench_gemvs (false);
  if (do_bench)
    {
      bench_gemvs (quick);
      bench_attn ();
      report ("\n== whole decode step, random-weight Llama-3-8B, CUDA graph ==\n");
      bench_decode_step (HONE_K_BF16, quick);
      bench_decode_step (HONE_K_Q4_0, quick);
      bench_decode_step (HONE_K_Q4_1, quick);
      if (!quick)
        bench_decode_step (HONE_K_Q8_0, quick);
      bench_prefill (HONE_K_BF16, quick);
      if (!quick)
        bench_prefill (HONE_K_Q4_0, true);
    }
  if (results)
    fclose (results);
  return n_fail ? 1 : 0;
}
