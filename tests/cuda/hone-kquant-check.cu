/* hone-kquant-check.cu — checks and benchmarks of the native K-quant kernels
 * (Q4_K, Q6_K: kernels/hone-k-gemv-kquant.cu): repack, decode GEMV with every
 * epilogue, dequantization to f16/bf16, embedding lookup.
 *
 * Plain CUDA C++ (no GLib), linked with the kernels' objects; built on the
 * developer machine and carried to the GPU one:
 *   nvcc -std=c++17 -O3 -lineinfo -gencode arch=compute_90,code=sm_90 -Ikernels \
 *        tests/cuda/hone-kquant-check.cu kernels/*.cu -o .carry-kquant/hone-kquant-check -lcublas -lcublasLt
 * Reference: the GGUF super-blocks are made here from random bytes and
 * decoded here from the block definitions of llama.cpp's ggml-common.h /
 * dequantize_row_q4_K / dequantize_row_q6_K (Q4_K: f16 d, f16 dmin, 12 bytes
 * of 6-bit scales and mins in get_scale_min_k4's packing, 128 bytes of
 * nibbles, value 64p+l the low nibble of qs[32p+l] and 64p+32+l its high one,
 * y = d·sc·q − dmin·m; Q6_K: ql[128], qh[64], int8 scales[16], f16 d,
 * y = d·sc[i/16]·(q − 32)), in float64 — not from the kernels' layouts.
 * Every GPU result is compared with that reference, outputs poisoned (NaN
 * bytes) first and the bytes past them checked untouched:
 *  - GEMV (activations quantized by hone_k_quantize / hone_k_rmsnorm, the
 *    reference reading the same int8 values back from the device, each
 *    within one step of the f64 roundtrip): STORE with bias, ADD in place,
 *    SWIGLU, ROPE_KV (q rotated, k/v into f16 pages across a page boundary,
 *    other slots untouched), tokens 1..8, odd rows, cols 256..14336, each
 *    launch shape forced; relative L2 error < 2e-5 (f32 sums of the same
 *    operands) and < 2e-2 against the unquantized activations;
 *  - dequantization to f16 and bf16: bit-exact against the f64 values
 *    rounded to nearest-even (rounding written here); embedding rows: exact;
 *    a repack interleaving two matrices (gate/up) lands every row right;
 *  - bad shapes are refused (cudaErrorInvalidValue), VRAM = GGUF bytes;
 *  - mixed-type q|k|v (HONE_K_PARTS, session 4): hone_k_gemv_parts (one
 *    GEMV a part after one RMSNorm+quantize; bias at each part's offset;
 *    several tokens through the scatter) and then the separate
 *    hone_k_rope_kv, as decode_step runs Q4_K_M's Q4_K q|k + Q6_K v, and a
 *    3-part Q8_0 | F16 | Q6_K one (the F16 part takes the f32 input, norm
 *    fused): y before RoPE against f64 (< 5e-5), q after RoPE (< 5e-5), k/v
 *    f16 pages (< 1e-3), no stray page writes; hone_k_parts_dequant
 *    bit-exact; bad part descriptions refused.
 * Benchmarks (--bench): each GEMV at the Llama-3-8B shapes for Q4_K and
 * Q6_K, next to F16 (what K-quants were uploaded as before) and Q4_0, in µs
 * and % of the 4.52 TB/s read ceiling, one token with every launch shape,
 * and 4 tokens; the dequantization (prefill path; alone: --bench-dequant, with
 * Q4_1 and Q8_0 too).
 *
 * The fused 4-bit prefill GEMM on Q4_K / Q6_K (--bench-gemm; its checks are
 * hone-w4-check --gemm's): see bench_gemm.
 *
 * Usage: hone-kquant-check [--check] [--bench] [--bench-mixed] [--bench-dequant] [--bench-gemm] [--sweep-tok] [--small]
 *   (default --check --bench; --bench-mixed, --sweep-tok: see there;
 * --small: the checks on small shapes only, for compute-sanitizer). Exit 1
 * if a check fails.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdint.h>
#include <vector>
#include <algorithm>
#include <string>
#include <utility>
#include "hone-kernels.h"
int hone_k_dequant_set_q4_blocks (int on);   /* hone-k-common.cuh (internal) */

#define HONE_CHECK_WIDTH 66
#define HONE_CHECK_SEED 0x4b5155414e54ull
#include "hone-check-util.cuh"

static bool small_only;

/* ---- GGUF blocks and their reference values ---------------------------------- */

static const char *
tname (int t)
{
  switch (t)
    {
    case HONE_K_Q4_K: return "Q4_K";
    case HONE_K_Q6_K: return "Q6_K";
    case HONE_K_Q4_0: return "Q4_0";
    case HONE_K_Q4_1: return "Q4_1";
    case HONE_K_Q8_0: return "Q8_0";
    case HONE_K_F16: return "F16";
    default: return "?";
    }
}

static HoneKMatrix
kmatrix_alloc (int type, int rows, int cols, size_t guard = 16)
{
  HoneKMatrix m;
  memset (&m, 0, sizeof m);
  size_t qb, sb;
  m.type = type;
  m.rows = rows;
  m.cols = cols;
  if (!hone_k_matrix_bytes (type, rows, cols, &qb, &sb))
    {
      fprintf (stderr, "FATAL: no layout for %s %dx%d\n", tname (type), rows, cols);
      exit (2);
    }
  CK (cudaMalloc (&m.q, qb + guard));
  if (sb)
    CK (cudaMalloc (&m.s, sb + guard));
  return m;
}

static bool
guard_intact (const void *dev_end, size_t n)
{
  std::vector<uint8_t> g (n);
  CK (cudaDeviceSynchronize ());
  CK (cudaMemcpy (g.data (), dev_end, n, cudaMemcpyDeviceToHost));
  for (uint8_t b : g)
    if (b != 0xff)
      return false;
  return true;
}

/* ---- checks ------------------------------------------------------------------ */

static void
check_layout (int type)
{
  char what[160];
  size_t qb, sb;
  bool ok = true;
  for (int cols : { 256, 4096, 14336 })
    for (int rows : { 1, 7, 1000 })
      {
        const size_t all = hone_k_matrix_bytes (type, rows, cols, &qb, &sb);
        ok = ok && all == (size_t) rows * hone_k_gguf_row_bytes (type, cols) && all == qb + sb
             && hone_k_matrix_bytes_g (type, rows, cols, 64, NULL, NULL) == all;
      }
  ok = ok && hone_k_upload_type (type) == type && hone_k_matrix_bytes (type, 4, 288, NULL, NULL) == 0;
  snprintf (what, sizeof what, "%s layout: upload type native, bytes = GGUF bytes", tname (type));
  check (ok, what, ok ? 0 : 1, 0);

  /* bad input is refused, nothing written */
  HoneKMatrix m = kmatrix_alloc (type, 4, 512);
  std::vector<double> deq;
  std::vector<uint8_t> g = kquant_make_gguf (type, 4, 512, deq);
  uint8_t *src = dev_upload (g);
  HoneKMatrix bad = m;
  bad.cols = 300;
  bool refused = hone_k_repack (type, src, 4, 300, &bad, 0, 1, 0) == (int) cudaErrorInvalidValue
                 && hone_k_repack (type, src, 4, 512, &m, 1, 1, 0) == (int) cudaErrorInvalidValue   /* past the end */
                 && hone_k_repack (type, src, 4, 512, &m, 0, 0, 0) == (int) cudaErrorInvalidValue;
  float *y, *gvec;
  CK (cudaMalloc (&y, 4 * 8));
  CK (cudaMalloc (&gvec, 512 * 4));
  HoneKActQ8 xq;
  CK (cudaMalloc (&xq.q, 512));
  CK (cudaMalloc (&xq.ds, 512 / 32 * 8));
  HoneKGemvOp op;
  memset (&op, 0, sizeof op);
  op.w = &m; op.xq = &xq; op.n_tok = 1; op.y = y; op.epilogue = HONE_K_EPI_STORE;
  op.norm_g = gvec;   /* a K-quant GEMV takes no fused norm */
  refused = refused && hone_k_gemv_ex (&op, 0) == (int) cudaErrorInvalidValue;
  op.norm_g = NULL;
  op.n_tok = 9;
  refused = refused && hone_k_gemv_ex (&op, 0) == (int) cudaErrorInvalidValue;
  op.n_tok = 1;
  op.xq = NULL;
  refused = refused && hone_k_gemv_ex (&op, 0) == (int) cudaErrorInvalidValue;
  HoneKMatrix odd = m;
  odd.rows = 3;
  op.w = &odd;
  op.xq = &xq;
  op.epilogue = HONE_K_EPI_SWIGLU;
  refused = refused && hone_k_gemv_ex (&op, 0) == (int) cudaErrorInvalidValue;
  CK (cudaGetLastError ());
  snprintf (what, sizeof what, "%s bad shapes / arguments refused", tname (type));
  check (refused, what, refused ? 0 : 1, 0);
  cudaFree (src); cudaFree (y); cudaFree (gvec); cudaFree (xq.q); cudaFree (xq.ds);
  matrix_free (&m);
}

/* Dequantization (f16 and bf16) and the embedding lookup against the reference values. */
static void
check_dequant (int type, int rows, int cols)
{
  std::vector<double> deq;
  const std::vector<uint8_t> g = kquant_make_gguf (type, rows, cols, deq);
  HoneKMatrix m = gguf_upload (type, g, rows, cols);
  const size_t n = (size_t) rows * cols;
  char what[160];
  for (int to_f16 = 0; to_f16 < 2; to_f16++)
    {
      uint16_t *d = (uint16_t *) dev_poisoned (n * 2);
      CK (hone_k_dequant (&m, d, to_f16, 0));
      const std::vector<uint16_t> got = dev_download<uint16_t> (d, n);
      size_t bad = 0;
      for (size_t i = 0; i < n; i++)
        bad += got[i] != round16 (deq[i], !to_f16);
      const bool intact = guard_intact (d + n, HONE_CHECK_GUARD);
      snprintf (what, sizeof what, "%s dequant %dx%d -> %s bit-exact (+ guard bytes)", tname (type), rows, cols,
                to_f16 ? "f16" : "bf16");
      check (bad == 0 && intact, what, (double) bad, 0);
      cudaFree (d);
    }
  /* embedding rows (f32, exact) */
  std::vector<int32_t> toks = { 0, rows - 1, rows / 2, 1 % rows };
  int32_t *dt = dev_upload (toks);
  float *h = (float *) dev_poisoned (toks.size () * cols * 4);
  CK (hone_k_embed (&m, dt, (int) toks.size (), h, 0));
  const std::vector<float> got = dev_download<float> (h, toks.size () * cols);
  size_t bad = 0;
  for (size_t t = 0; t < toks.size (); t++)
    for (int k = 0; k < cols; k++)
      bad += got[t * cols + k] != (float) deq[(size_t) toks[t] * cols + k];
  const bool intact = guard_intact (h + toks.size () * cols, HONE_CHECK_GUARD);
  snprintf (what, sizeof what, "%s embed 4 rows of %d exact (+ guard bytes)", tname (type), cols);
  check (bad == 0 && intact, what, (double) bad, 0);
  cudaFree (dt); cudaFree (h);
  matrix_free (&m);
}

/* Two matrices interleaved row by row (gate/up) by repack's row0/step. */
static void
check_interleave (int type)
{
  const int rows = 37, cols = 768;
  std::vector<double> da, db;
  const std::vector<uint8_t> ga = kquant_make_gguf (type, rows, cols, da), gb = kquant_make_gguf (type, rows, cols, db);
  HoneKMatrix m = kmatrix_alloc (type, 2 * rows, cols);
  uint8_t *sa = dev_upload (ga), *sb = dev_upload (gb);
  CK (hone_k_repack (type, sa, rows, cols, &m, 0, 2, 0));
  CK (hone_k_repack (type, sb, rows, cols, &m, 1, 2, 0));
  uint16_t *d = (uint16_t *) dev_poisoned ((size_t) 2 * rows * cols * 2);
  CK (hone_k_dequant (&m, d, 1, 0));
  const std::vector<uint16_t> got = dev_download<uint16_t> (d, (size_t) 2 * rows * cols);
  size_t bad = 0;
  for (int r = 0; r < 2 * rows; r++)
    for (int k = 0; k < cols; k++)
      bad += got[(size_t) r * cols + k] != round16 ((r & 1 ? db : da)[(size_t) (r / 2) * cols + k], false);
  char what[160];
  snprintf (what, sizeof what, "%s repack interleaving two matrices (row0 0/1, step 2)", tname (type));
  check (bad == 0, what, (double) bad, 0);
  cudaFree (sa); cudaFree (sb); cudaFree (d);
  matrix_free (&m);
}

/* The int8 activation a quantized GEMV read, from the device (q·d per 32), so
 * that the GEMV is compared with its own operands: the f64 roundtrip of an
 * RMSNorm'ed input may round a value the other way than the f32 kernel did
 * (session 4 saw one such flip: 2.9e-4 on a 2-token Q6_K check). *close:
 * every value within one step d of that roundtrip (the norm+quantize check). */
static std::vector<double>
device_act (const HoneKActQ8 &xq, int n_tok, int cols, const std::vector<double> &roundtrip, bool *close)
{
  const size_t n = (size_t) n_tok * cols;
  const std::vector<int8_t> q = dev_download<int8_t> (xq.q, n);
  const std::vector<float2> ds = dev_download<float2> (xq.ds, n / 32);
  std::vector<double> v (n);
  *close = true;
  for (size_t i = 0; i < n; i++)
    {
      const double d = ds[i / 32].x;
      v[i] = (double) q[i] * d;
      if (!(fabs (v[i] - roundtrip[i]) <= 1.01 * d))
        *close = false;
    }
  return v;
}

static void
check_gemv (int type, int rows, int cols, int n_tok, int epi, bool with_norm, int cfg = -1)
{
  std::vector<float> x ((size_t) n_tok * cols), bias (rows), res ((size_t) n_tok * rows), g (cols);
  for (auto &v : x) v = rng_normal ();
  for (auto &v : bias) v = rng_normal ();
  for (auto &v : res) v = rng_normal ();
  for (auto &v : g) v = 1.f + 0.3f * rng_normal ();
  std::vector<double> wd;
  const std::vector<uint8_t> bytes = kquant_make_gguf (type, rows, cols, wd);
  HoneKMatrix m = gguf_upload (type, bytes, rows, cols);

  std::vector<double> xin ((size_t) n_tok * cols);
  for (int t = 0; t < n_tok; t++)
    {
      double ss = 0;
      for (int k = 0; k < cols; k++) ss += (double) x[(size_t) t * cols + k] * x[(size_t) t * cols + k];
      const double sc = with_norm ? 1.0 / sqrt (ss / cols + 1e-5) : 1.0;
      for (int k = 0; k < cols; k++)
        xin[(size_t) t * cols + k] = x[(size_t) t * cols + k] * sc * (with_norm ? g[k] : 1.0);
    }
  const std::vector<double> xq_f64 = act_q8_roundtrip (xin);

  float *dx = dev_upload (x), *dres = dev_upload (res), *dbias = dev_upload (bias), *dg = dev_upload (g);
  const int out_cols = epi == HONE_K_EPI_SWIGLU ? rows / 2 : rows;
  const size_t ny = (size_t) n_tok * out_cols;
  float *dy = (float *) dev_poisoned (ny * 4);
  HoneKActQ8 xq;
  xq.q = (int8_t *) dev_poisoned ((size_t) n_tok * cols);
  xq.ds = (float2 *) dev_poisoned ((size_t) n_tok * cols / 32 * 8);
  const bool use_bias = epi != HONE_K_EPI_ADD;
  if (epi == HONE_K_EPI_ADD)
    CK (cudaMemcpy (dy, dres, ny * 4, cudaMemcpyDeviceToDevice));
  if (with_norm)
    CK (hone_k_rmsnorm (dx, dg, n_tok, cols, 1e-5f, NULL, &xq, NULL, 0, 0));
  else
    CK (hone_k_quantize (dx, n_tok, cols, &xq, NULL, 0, 0));
  bool act_close;
  const std::vector<double> xq_ref = device_act (xq, n_tok, cols, xq_f64, &act_close);
  HoneKGemvOp op;
  memset (&op, 0, sizeof op);
  op.w = &m;
  op.xq = &xq;
  op.n_tok = n_tok;
  op.bias = use_bias ? dbias : NULL;
  op.res = epi == HONE_K_EPI_ADD ? dy : NULL;   /* in place, as the forward pass does */
  op.y = dy;
  op.epilogue = epi;
  hone_k_kquant_set_config (cfg);
  CK (hone_k_gemv_ex (&op, 0));
  hone_k_kquant_set_config (-1);
  CK (cudaGetLastError ());
  const std::vector<float> y = dev_download<float> (dy, ny);
  const bool intact = guard_intact (dy + ny, HONE_CHECK_GUARD);

  std::vector<double> ref (ny), ref_true (ny);
  for (int pass = 0; pass < 2; pass++)
    {
      const std::vector<double> &xs = pass == 0 ? xq_ref : xin;
      std::vector<double> &out = pass == 0 ? ref : ref_true;
      std::vector<double> acc (rows);
      for (int t = 0; t < n_tok; t++)
        {
          for (int r = 0; r < rows; r++)
            {
              double s = 0;
              const double *wr = &wd[(size_t) r * cols], *xr = &xs[(size_t) t * cols];
              for (int k = 0; k < cols; k++) s += wr[k] * xr[k];
              acc[r] = s + (use_bias ? bias[r] : 0.0);
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
  const double e = rel_err (y.data (), ref.data (), ny, &fin);
  char what[200];
  static const char *epin[] = { "STORE+bias", "ADD", "SWIGLU+bias" };
  char cfgs[16] = "";
  if (cfg >= 0)
    snprintf (cfgs, sizeof cfgs, " cfg%d", cfg);
  snprintf (what, sizeof what, "gemv %s %dx%d tok=%d %s%s%s", tname (type), rows, cols, n_tok, epin[epi],
            with_norm ? " +norm" : "", cfgs);
  const double bound = 2e-5;   /* f32 accumulation of the same (de)quantized operands */
  check (fin && e < bound && intact && act_close, what, e, bound);
  const double e2 = rel_err (y.data (), ref_true.data (), ny, &fin);
  snprintf (what, sizeof what, "  vs unquantized activations");
  check (fin && e2 < 2e-2, what, e2, 2e-2);
  matrix_free (&m);
  cudaFree (dx); cudaFree (dres); cudaFree (dbias); cudaFree (dg); cudaFree (dy); cudaFree (xq.q); cudaFree (xq.ds);
}

/* ROPE_KV epilogue: q rows rotated (adjacent pairs) and scaled into y, k rotated
 * and v copied into f16 pages at *pos + t, across a page boundary. */
static void
check_rope (int type, int n_tok, int pos, int cfg = -1)
{
  const int nq = 8, nkv = 2, hd = 128, cols = 512;
  const int W = (nq + 2 * nkv) * hd;
  std::vector<float> x ((size_t) n_tok * cols), bias (W);
  for (auto &v : x) v = rng_normal ();
  for (auto &v : bias) v = rng_normal ();
  std::vector<double> wd;
  const std::vector<uint8_t> bytes = kquant_make_gguf (type, W, cols, wd);
  HoneKMatrix m = gguf_upload (type, bytes, W, cols);
  std::vector<double> xin (x.begin (), x.end ());
  const std::vector<double> xs = act_q8_roundtrip (xin);
  const std::vector<float> inv = make_inv_freq (hd, 500000.0);

  /* pages: a shuffled table over a pool with spare pages, everything poisoned */
  const int max_tok = pos + n_tok, need = (max_tok + HONE_K_KV_BLOCK - 1) / HONE_K_KV_BLOCK, n_pages = need + 2;
  std::vector<int32_t> table (need);
  for (int i = 0; i < need; i++) table[i] = n_pages - 1 - i;
  const size_t pool = (size_t) n_pages * nkv * HONE_K_KV_BLOCK * hd;
  void *kp = dev_poisoned (pool * 2), *vp = dev_poisoned (pool * 2);
  int32_t *dtable = dev_upload (table);
  std::vector<int32_t> posv = { pos };
  int32_t *dpos = dev_upload (posv);
  float *dx = dev_upload (x), *dbias = dev_upload (bias), *dinv = dev_upload (inv);
  const size_t ny = (size_t) n_tok * W;
  float *dy = (float *) dev_poisoned (ny * 4);
  HoneKActQ8 xq;
  xq.q = (int8_t *) dev_poisoned ((size_t) n_tok * cols);
  xq.ds = (float2 *) dev_poisoned ((size_t) n_tok * cols / 32 * 8);
  CK (hone_k_quantize (dx, n_tok, cols, &xq, NULL, 0, 0));
  HoneKGemvOp op;
  memset (&op, 0, sizeof op);
  op.w = &m; op.xq = &xq; op.n_tok = n_tok; op.bias = dbias; op.y = dy; op.epilogue = HONE_K_EPI_ROPE_KV;
  op.nq = nq; op.nkv = nkv; op.hd = hd; op.pos = dpos; op.inv_freq = dinv;
  op.k_pool = kp; op.v_pool = vp; op.block_table = dtable;
  hone_k_kquant_set_config (cfg);
  CK (hone_k_gemv_ex (&op, 0));
  hone_k_kquant_set_config (-1);
  const std::vector<float> y = dev_download<float> (dy, ny);
  const std::vector<uint16_t> gk = dev_download<uint16_t> (kp, pool), gv = dev_download<uint16_t> (vp, pool);
  const bool intact = guard_intact (dy + ny, HONE_CHECK_GUARD) && guard_intact ((uint16_t *) kp + pool, HONE_CHECK_GUARD)
                      && guard_intact ((uint16_t *) vp + pool, HONE_CHECK_GUARD);

  std::vector<float> gq, gkv;
  std::vector<double> rq, rkv;
  std::vector<bool> written (pool * 2, false);
  bool y_kv_untouched = true;
  for (int t = 0; t < n_tok; t++)
    for (int h = 0; h < nq + 2 * nkv; h++)
      {
        double v[128];
        for (int d = 0; d < hd; d++)
          {
            const int r = h * hd + d;
            double s = 0;
            for (int k = 0; k < cols; k++) s += wd[(size_t) r * cols + k] * xs[(size_t) t * cols + k];
            v[d] = s + bias[r];
          }
        if (h < nq + nkv)
          for (int i = 0; i < hd / 2; i++)
            {
              const double a = (double) (pos + t) * inv[i], c = cos (a), sn = sin (a);
              const double x0 = v[2 * i], x1 = v[2 * i + 1];
              v[2 * i] = x0 * c - x1 * sn;
              v[2 * i + 1] = x0 * sn + x1 * c;
            }
        for (int d = 0; d < hd; d++)
          {
            const size_t yi = (size_t) t * W + h * hd + d;
            if (h < nq)
              {
                gq.push_back (y[yi]);
                rq.push_back (v[d] / sqrt ((double) hd));
              }
            else
              {
                uint32_t bits;
                memcpy (&bits, &y[yi], 4);
                y_kv_untouched = y_kv_untouched && bits == 0xffffffffu;
                const bool isk = h < nq + nkv;
                const int kvh = h - nq - (isk ? 0 : nkv), p = pos + t;
                const size_t ci = (((size_t) table[p / HONE_K_KV_BLOCK] * nkv + kvh) * HONE_K_KV_BLOCK
                                   + p % HONE_K_KV_BLOCK) * hd + d;
                gkv.push_back (h2f ((isk ? gk : gv)[ci]));
                rkv.push_back (v[d]);
                written[(isk ? 0 : pool) + ci] = true;
              }
          }
      }
  size_t stray = 0;
  for (size_t i = 0; i < pool; i++)
    {
      stray += !written[i] && gk[i] != 0xffff;
      stray += !written[pool + i] && gv[i] != 0xffff;
    }
  bool f1, f2;
  const double e1 = rel_err (gq.data (), rq.data (), gq.size (), &f1);
  const double e2 = rel_err (gkv.data (), rkv.data (), gkv.size (), &f2);
  char what[200];
  snprintf (what, sizeof what, "gemv %s ROPE_KV+bias tok=%d pos=%d cfg%d: q (y's k/v part untouched)", tname (type), n_tok,
            pos, cfg);
  check (f1 && e1 < 5e-5 && intact && y_kv_untouched, what, e1, 5e-5);
  snprintf (what, sizeof what, "  k, v f16 pages (%zu stray writes)", stray);
  check (f2 && e2 < 1e-3 && stray == 0, what, e2, 1e-3);
  matrix_free (&m);
  cudaFree (kp); cudaFree (vp); cudaFree (dtable); cudaFree (dpos); cudaFree (dx); cudaFree (dbias); cudaFree (dinv);
  cudaFree (dy); cudaFree (xq.q); cudaFree (xq.ds);
}

/* ---- mixed-type fused matrices (HONE_K_PARTS) ----------------------------------- */

/* Q8_0 in its GPU layout (int8 [rows][cols], f16 d [rows][cols/32]) made directly; deq its values. */
static HoneKMatrix
make_q8_0 (int rows, int cols, std::vector<double> &deq)
{
  HoneKMatrix m = kmatrix_alloc (HONE_K_Q8_0, rows, cols);
  std::vector<int8_t> q ((size_t) rows * cols);
  std::vector<uint16_t> d ((size_t) rows * cols / 32);
  for (auto &v : d) v = rand_f16 (2e-4, 2e-3, 0.1);
  deq.resize (q.size ());
  for (size_t i = 0; i < q.size (); i++)
    {
      q[i] = (int8_t) (rng_u64 () % 255 - 127);
      deq[i] = (double) q[i] * h2d (d[i / 32]);
    }
  CK (cudaMemcpy (m.q, q.data (), q.size (), cudaMemcpyHostToDevice));
  CK (cudaMemcpy (m.s, d.data (), d.size () * 2, cudaMemcpyHostToDevice));
  return m;
}

static HoneKMatrix
make_f16 (int rows, int cols, std::vector<double> &deq)
{
  HoneKMatrix m = kmatrix_alloc (HONE_K_F16, rows, cols);
  std::vector<uint16_t> h ((size_t) rows * cols);
  deq.resize (h.size ());
  for (size_t i = 0; i < h.size (); i++)
    {
      h[i] = f2h (0.05f * rng_normal ());
      deq[i] = h2d (h[i]);
    }
  CK (cudaMemcpy (m.q, h.data (), h.size () * 2, cudaMemcpyHostToDevice));
  return m;
}

/* variant 0: Q4_K_M's q|k Q4_K + v Q6_K; 1: q Q8_0 | k F16 | v Q6_K. */
static void
check_parts (int variant, int n_tok, int pos)
{
  const int nq = 8, nkv = 2, hd = 128, cols = 512;
  const int W = (nq + 2 * nkv) * hd;
  const std::vector<std::pair<int, int>> spec
    = variant == 0 ? std::vector<std::pair<int, int>> { { HONE_K_Q4_K, (nq + nkv) * hd }, { HONE_K_Q6_K, nkv * hd } }
                   : std::vector<std::pair<int, int>> { { HONE_K_Q8_0, nq * hd }, { HONE_K_F16, nkv * hd },
                                                        { HONE_K_Q6_K, nkv * hd } };
  std::vector<HoneKMatrix> parts;
  std::vector<double> wd ((size_t) W * cols);
  std::vector<bool> row_f32 (W);    /* rows whose GEMV reads the f32 input, not the int8 one */
  int row0 = 0, max_rows = 0;
  for (const auto &p : spec)
    {
      std::vector<double> d;
      HoneKMatrix m;
      if (p.first == HONE_K_Q8_0)
        m = make_q8_0 (p.second, cols, d);
      else if (p.first == HONE_K_F16)
        m = make_f16 (p.second, cols, d);
      else
        m = gguf_upload (p.first, kquant_make_gguf (p.first, p.second, cols, d), p.second, cols);
      std::copy (d.begin (), d.end (), wd.begin () + (size_t) row0 * cols);
      for (int r = 0; r < p.second; r++)
        row_f32[row0 + r] = p.first == HONE_K_F16;
      parts.push_back (m);
      row0 += p.second;
      max_rows = std::max (max_rows, p.second);
    }
  HoneKMatrix w;
  memset (&w, 0, sizeof w);
  w.type = HONE_K_PARTS;
  w.rows = W;
  w.cols = cols;
  w.n_parts = (int) parts.size ();
  w.parts = parts.data ();

  std::vector<float> x ((size_t) n_tok * cols), bias (W), g (cols);
  for (auto &v : x) v = rng_normal ();
  for (auto &v : bias) v = rng_normal ();
  for (auto &v : g) v = 1.f + 0.3f * rng_normal ();
  std::vector<double> xin ((size_t) n_tok * cols);
  for (int t = 0; t < n_tok; t++)
    {
      double ss = 0;
      for (int k = 0; k < cols; k++) ss += (double) x[(size_t) t * cols + k] * x[(size_t) t * cols + k];
      const double sc = 1.0 / sqrt (ss / cols + 1e-5);
      for (int k = 0; k < cols; k++)
        xin[(size_t) t * cols + k] = x[(size_t) t * cols + k] * sc * g[k];
    }
  const std::vector<double> xq_f64 = act_q8_roundtrip (xin);
  const std::vector<float> inv = make_inv_freq (hd, 500000.0);

  const int max_tok = pos + n_tok, need = (max_tok + HONE_K_KV_BLOCK - 1) / HONE_K_KV_BLOCK, n_pages = need + 2;
  std::vector<int32_t> table (need);
  for (int i = 0; i < need; i++) table[i] = n_pages - 1 - i;
  const size_t pool = (size_t) n_pages * nkv * HONE_K_KV_BLOCK * hd;
  void *kp = dev_poisoned (pool * 2), *vp = dev_poisoned (pool * 2);
  int32_t *dtable = dev_upload (table);
  std::vector<int32_t> posv = { pos };
  int32_t *dpos = dev_upload (posv);
  float *dx = dev_upload (x), *dbias = dev_upload (bias), *dinv = dev_upload (inv), *dg = dev_upload (g);
  const size_t ny = (size_t) n_tok * W;
  float *dy = (float *) dev_poisoned (ny * 4);
  float *tmp = (float *) dev_poisoned ((size_t) n_tok * max_rows * 4);
  HoneKActQ8 xq;
  xq.q = (int8_t *) dev_poisoned ((size_t) n_tok * cols);
  xq.ds = (float2 *) dev_poisoned ((size_t) n_tok * cols / 32 * 8);
  HoneKGemvOp op;
  memset (&op, 0, sizeof op);
  op.w = &w; op.x = dx; op.norm_g = dg; op.eps = 1e-5f; op.xq = &xq; op.n_tok = n_tok; op.bias = dbias; op.y = dy;
  op.epilogue = HONE_K_EPI_STORE;
  CK (hone_k_gemv_parts (&op, tmp, 0));
  CK (cudaGetLastError ());
  const std::vector<float> y0 = dev_download<float> (dy, ny);
  bool act_close;   /* the int8 input hone_k_gemv_parts made (see device_act) */
  const std::vector<double> xq_ref = device_act (xq, n_tok, cols, xq_f64, &act_close);
  CK (hone_k_rope_kv (dy, n_tok, nq, nkv, hd, dpos, dinv, 0, NULL, NULL, 1e-5f, kp, vp, dtable, 0));
  const std::vector<float> y = dev_download<float> (dy, ny);
  const std::vector<uint16_t> gk = dev_download<uint16_t> (kp, pool), gv = dev_download<uint16_t> (vp, pool);
  const bool intact = guard_intact (dy + ny, HONE_CHECK_GUARD) && guard_intact ((uint16_t *) kp + pool, HONE_CHECK_GUARD)
                      && guard_intact ((uint16_t *) vp + pool, HONE_CHECK_GUARD)
                      && guard_intact (tmp + (size_t) n_tok * max_rows, HONE_CHECK_GUARD);

  std::vector<double> r0 (ny);
  std::vector<float> gq, gkv;
  std::vector<double> rq, rkv;
  std::vector<bool> written (pool * 2, false);
  for (int t = 0; t < n_tok; t++)
    for (int h = 0; h < nq + 2 * nkv; h++)
      {
        double v[128];
        for (int d = 0; d < hd; d++)
          {
            const int r = h * hd + d;
            const std::vector<double> &xs = row_f32[r] ? xin : xq_ref;
            double sum = 0;
            for (int k = 0; k < cols; k++) sum += wd[(size_t) r * cols + k] * xs[(size_t) t * cols + k];
            v[d] = sum + bias[r];
            r0[(size_t) t * W + r] = v[d];
          }
        if (h < nq + nkv)
          for (int i = 0; i < hd / 2; i++)
            {
              const double a = (double) (pos + t) * inv[i], c = cos (a), sn = sin (a);
              const double x0 = v[2 * i], x1 = v[2 * i + 1];
              v[2 * i] = x0 * c - x1 * sn;
              v[2 * i + 1] = x0 * sn + x1 * c;
            }
        for (int d = 0; d < hd; d++)
          {
            if (h < nq)
              {
                gq.push_back (y[(size_t) t * W + h * hd + d]);
                rq.push_back (v[d] / sqrt ((double) hd));
                continue;
              }
            const bool isk = h < nq + nkv;
            const int kvh = h - nq - (isk ? 0 : nkv), p = pos + t;
            const size_t ci = (((size_t) table[p / HONE_K_KV_BLOCK] * nkv + kvh) * HONE_K_KV_BLOCK
                               + p % HONE_K_KV_BLOCK) * hd + d;
            gkv.push_back (h2f ((isk ? gk : gv)[ci]));
            rkv.push_back (v[d]);
            written[(isk ? 0 : pool) + ci] = true;
          }
      }
  size_t stray = 0;
  for (size_t i = 0; i < pool; i++)
    {
      stray += !written[i] && gk[i] != 0xffff;
      stray += !written[pool + i] && gv[i] != 0xffff;
    }
  bool f0, f1, f2;
  const double e0 = rel_err (y0.data (), r0.data (), ny, &f0);
  const double e1 = rel_err (gq.data (), rq.data (), gq.size (), &f1);
  const double e2 = rel_err (gkv.data (), rkv.data (), gkv.size (), &f2);
  std::string name;
  for (const auto &p : spec)
    name += std::string (name.empty () ? "" : "|") + (p.first == HONE_K_Q8_0 ? "Q8_0" : tname (p.first));
  char what[200];
  snprintf (what, sizeof what, "parts %s +norm+bias tok=%d: y before RoPE", name.c_str (), n_tok);
  check (f0 && e0 < 5e-5 && intact && act_close, what, e0, 5e-5);
  snprintf (what, sizeof what, "  then hone_k_rope_kv pos=%d: q", pos);
  check (f1 && e1 < 5e-5, what, e1, 5e-5);
  snprintf (what, sizeof what, "  k, v f16 pages (%zu stray writes)", stray);
  check (f2 && e2 < 1e-3 && stray == 0, what, e2, 1e-3);

  /* prefill's path: the parts dequantized to f16 at their row offsets */
  if (n_tok == 1)
    {
      uint16_t *d = (uint16_t *) dev_poisoned ((size_t) W * cols * 2);
      CK (hone_k_parts_dequant (&w, d, 1, 0));
      const std::vector<uint16_t> got = dev_download<uint16_t> (d, (size_t) W * cols);
      size_t bad = 0;
      for (size_t i = 0; i < got.size (); i++)
        bad += got[i] != round16 (wd[i], false);
      const bool ok = bad == 0 && guard_intact (d + (size_t) W * cols, HONE_CHECK_GUARD);
      snprintf (what, sizeof what, "parts %s dequant -> f16 bit-exact (+ guard bytes)", name.c_str ());
      check (ok, what, (double) bad, 0);

      /* bad descriptions are refused */
      HoneKMatrix bad_w = w;
      bad_w.rows = W + 1;                       /* parts do not add up */
      op.w = &bad_w;
      bool refused = hone_k_gemv_parts (&op, tmp, 0) == (int) cudaErrorInvalidValue;
      bad_w = w;
      bad_w.n_parts = HONE_K_MAX_PARTS + 1;
      refused = refused && hone_k_gemv_parts (&op, tmp, 0) == (int) cudaErrorInvalidValue;
      op.w = &w;
      op.epilogue = HONE_K_EPI_ROPE_KV;         /* RoPE is not fused for parts */
      refused = refused && hone_k_gemv_parts (&op, tmp, 0) == (int) cudaErrorInvalidValue;
      op.epilogue = HONE_K_EPI_STORE;
      op.n_tok = 2;                             /* several tokens need tmp */
      refused = refused && hone_k_gemv_parts (&op, NULL, 0) == (int) cudaErrorInvalidValue;
      refused = refused && hone_k_parts_dequant (&parts[0], d, 1, 0) == (int) cudaErrorInvalidValue;
      CK (cudaGetLastError ());
      snprintf (what, sizeof what, "parts %s: bad descriptions refused", name.c_str ());
      check (refused, what, refused ? 0 : 1, 0);
      cudaFree (d);
    }
  for (auto &m : parts)
    matrix_free (&m);
  cudaFree (kp); cudaFree (vp); cudaFree (dtable); cudaFree (dpos); cudaFree (dx); cudaFree (dbias); cudaFree (dinv);
  cudaFree (dg); cudaFree (dy); cudaFree (tmp); cudaFree (xq.q); cudaFree (xq.ds);
}

static void
run_checks (void)
{
  report ("== K-quant checks (f64 references from the GGUF block definitions) ==\n");
  for (int variant = 0; variant < 2; variant++)
    {
      check_parts (variant, 1, 5);
      check_parts (variant, 3, 62);    /* several tokens (scatter), positions across a page */
      if (!small_only)
        check_parts (variant, HONE_K_MAX_DECODE, 120);
    }
  for (int type : { HONE_K_Q4_K, HONE_K_Q6_K })
    {
      check_layout (type);
      check_dequant (type, 37, 768);
      check_dequant (type, 3, 14336);
      check_interleave (type);
      check_gemv (type, 1030, 256, 1, HONE_K_EPI_STORE, false);
      check_gemv (type, 1031, 512, 3, HONE_K_EPI_ADD, false);
      check_gemv (type, 2 * 350, 1024, 8, HONE_K_EPI_SWIGLU, true);
      check_rope (type, 3, 62);   /* positions 62..64: crosses a page */
      check_rope (type, 1, 5);
      for (int cfg = 0; cfg < HONE_K_KQUANT_CONFIGS; cfg++)
        {
          check_gemv (type, 517, 768, 1, HONE_K_EPI_STORE, false, cfg);
          check_gemv (type, 2 * 101, 512, 4, HONE_K_EPI_SWIGLU, false, cfg);
          check_gemv (type, 33, 2304, 2, HONE_K_EPI_ADD, false, cfg);   /* 9 super-blocks: odd unit counts */
          check_rope (type, 1, 63, cfg);
        }
      /* 2..4 tokens through the kernel built for 4 (a tuning option, off by default) */
      report ("-- %s, kernel built for 4 tokens (hone_k_kquant_set_tiers (1)):\n", tname (type));
      hone_k_kquant_set_tiers (1);
      for (int cfg = 0; cfg < HONE_K_KQUANT_CONFIGS; cfg++)
        {
          check_gemv (type, 2 * 101, 512, 4, HONE_K_EPI_SWIGLU, false, cfg);
          check_gemv (type, 33, 2304, 2, HONE_K_EPI_ADD, false, cfg);
        }
      check_gemv (type, 515, 768, 3, HONE_K_EPI_STORE, true);
      hone_k_kquant_set_tiers (-1);
      if (small_only)
        continue;
      for (int t = 1; t <= HONE_K_MAX_DECODE; t++)
        check_gemv (type, 515, 768, t, t & 1 ? HONE_K_EPI_STORE : HONE_K_EPI_ADD, t == 2);
      check_gemv (type, 16500, 256, 1, HONE_K_EPI_STORE, false);   /* many rows: 2 rows x 2 loads, no K split */
      check_gemv (type, 301, 14336, 1, HONE_K_EPI_ADD, false);     /* long rows: 4 K slices */
      check_gemv (type, 129, 14336, 5, HONE_K_EPI_STORE, false);
      check_gemv (type, 2 * 300, 4096, 2, HONE_K_EPI_SWIGLU, true);
    }
}

/* ---- benchmarks --------------------------------------------------------------- */

struct Bench {
  std::vector<HoneKMatrix> ms;
  size_t cur;
  float *x, *y, *res;
  HoneKActQ8 xq;
  int n_tok, epi;
};

static void
bench_fn (void *p)
{
  Bench *b = (Bench *) p;
  HoneKGemvOp op;
  memset (&op, 0, sizeof op);
  op.w = &b->ms[b->cur];
  b->cur = (b->cur + 1) % b->ms.size ();
  const bool f = op.w->type == HONE_K_F16;
  op.x = f ? b->x : NULL;
  op.xq = f ? NULL : &b->xq;
  op.n_tok = b->n_tok;
  op.res = b->epi == HONE_K_EPI_ADD ? b->res : NULL;
  op.y = b->y;
  op.epilogue = b->epi;
  hone_k_gemv_ex (&op, 0);
}

/* Random bytes in the GPU layout (speed does not depend on the values; the scales stay finite). */
static void
fill_layout (HoneKMatrix &m, uint64_t seed)
{
  size_t qb, sb;
  hone_k_matrix_bytes (m.type, m.rows, m.cols, &qb, &sb);
  fill_random<<<1024, 256>>> ((uint8_t *) m.q, qb, seed, m.type == HONE_K_F16 ? 3 : 0);
  if (sb)
    fill_random<<<1024, 256>>> ((uint8_t *) m.s, sb, seed ^ 0x55, 2);
  CK (cudaGetLastError ());
}

/* Dequantization to f16 (the prefill GEMM path) of a gate|up, 28672 x 4096: µs and
 * GB/s of read + write (--bench, --bench-dequant). */
static void
bench_dequant (void)
{
  report ("\n== Dequantization to f16 (prefill GEMM path), gate|up 28672x4096 ==\n");
  /* Q4_0 and Q4_1 twice: the element kernel (their default) and the block kernel */
  const int q4_setting = hone_k_dequant_set_q4_blocks (0);
  const int types[] = { HONE_K_Q4_K, HONE_K_Q6_K, HONE_K_Q4_0, HONE_K_Q4_0, HONE_K_Q4_1, HONE_K_Q4_1, HONE_K_Q8_0 };
  for (int ti = 0; ti < (int) (sizeof types / sizeof types[0]); ti++)
    {
      const int type = types[ti];
      const bool q4 = type == HONE_K_Q4_0 || type == HONE_K_Q4_1, blocks = q4 && types[ti - 1] == type;
      hone_k_dequant_set_q4_blocks (blocks);
      HoneKMatrix m = kmatrix_alloc (type, 28672, 4096);
      fill_layout (m, 9);
      void *d;
      CK (cudaMalloc (&d, (size_t) 28672 * 4096 * 2));
      struct Dq { HoneKMatrix *m; void *d; } dq = { &m, d };
      const double ms = bench_ms (0, 10, [] (void *p) { Dq *q = (Dq *) p; hone_k_dequant (q->m, q->d, 1, 0); }, &dq);
      const double bytes = hone_k_matrix_bytes (type, 28672, 4096, NULL, NULL) + (double) 28672 * 4096 * 2;
      report ("  %-5s %8.1f us, %6.0f GB/s read+write%s\n", tname (type), ms * 1e3, bytes / (ms * 1e-3) / 1e9,
              blocks ? " (block kernel)" : q4 ? " (element kernel)" : "");
      cudaFree (d);
      matrix_free (&m);
    }
  hone_k_dequant_set_q4_blocks (q4_setting);
}

static void
run_bench (void)
{
  struct { const char *name; int rows, cols, epi; } shapes[] = {
    { "qkv 6144x4096", 6144, 4096, HONE_K_EPI_STORE },
    { "o 4096x4096 +res", 4096, 4096, HONE_K_EPI_ADD },
    { "gate|up 28672x4096 swiglu", 28672, 4096, HONE_K_EPI_SWIGLU },
    { "down 4096x14336 +res", 4096, 14336, HONE_K_EPI_ADD },
    { "lm_head 128256x4096", 128256, 4096, HONE_K_EPI_STORE },
  };
  const char *staged = getenv ("HONE_GEMV_STAGED");
  report ("\n== GEMV at Llama-3-8B shapes (weights rotated over >= 400 MB, median of 5x20; HONE_GEMV_STAGED=%s) ==\n",
          staged ? staged : "(unset)");
  report ("%-27s %-5s %3s %8s %8s %7s   launch shapes 0..%d (us)\n", "matrix", "type", "tok", "us", "GB/s", "%read",
          HONE_K_KQUANT_CONFIGS - 1);
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
  double layer_us[4][2] = { { 0 } };   /* per type (Q4_K, Q6_K, F16, Q4_0), tok 1: sum of a layer's GEMVs, lm_head */
  const int types[] = { HONE_K_Q4_K, HONE_K_Q6_K, HONE_K_F16, HONE_K_Q4_0 };
  for (int ti = 0; ti < 4; ti++)
    for (auto &sh : shapes)
      {
        const int type = types[ti];
        Bench b;
        const size_t one = hone_k_matrix_bytes (type, sh.rows, sh.cols, NULL, NULL);
        const int copies = (int) std::max<size_t> (2, (400u << 20) / one + 1);
        for (int i = 0; i < copies; i++)
          {
            HoneKMatrix m = kmatrix_alloc (type, sh.rows, sh.cols);
            fill_layout (m, 100 + i);
            b.ms.push_back (m);
          }
        b.cur = 0;
        b.x = x; b.y = y; b.res = res; b.xq = xq; b.epi = sh.epi;
        const bool kq = type == HONE_K_Q4_K || type == HONE_K_Q6_K;
        {
          /* one probe launch: a failing path is reported, not fatal */
          HoneKGemvOp op;
          memset (&op, 0, sizeof op);
          op.w = &b.ms[0]; op.x = type == HONE_K_F16 ? x : NULL; op.xq = type == HONE_K_F16 ? NULL : &xq;
          op.n_tok = 1; op.res = sh.epi == HONE_K_EPI_ADD ? res : NULL; op.y = y; op.epilogue = sh.epi;
          const int rc = hone_k_gemv_ex (&op, 0);
          const cudaError_t e = cudaDeviceSynchronize ();
          cudaGetLastError ();
          if (rc || e)
            {
              report ("%-27s %-5s launch failed: %s / %s\n", sh.name, tname (type), cudaGetErrorString ((cudaError_t) rc),
                      cudaGetErrorString (e));
              for (auto &m : b.ms) matrix_free (&m);
              continue;
            }
        }
        for (int n_tok : { 1, 4 })
          {
            b.n_tok = n_tok;
            const double act = (type == HONE_K_F16 ? 4.0 : 1.0 + 8.0 / 32) * sh.cols * n_tok
                               + 4.0 * n_tok * (sh.epi == HONE_K_EPI_SWIGLU ? sh.rows / 2 : sh.rows)
                                     * (sh.epi == HONE_K_EPI_ADD ? 2 : 1);
            const double ms = bench_ms (0, 20, bench_fn, &b);
            const double gbs = (one + act) / (ms * 1e-3) / 1e9;
            report ("%-27s %-5s %3d %8.1f %8.0f %6.1f%%", sh.name, tname (type), n_tok, ms * 1e3, gbs,
                    100 * gbs * 1e9 / READ_CEIL);
            if (n_tok == 1)
              layer_us[ti][sh.rows == 128256] += ms * 1e3;
            if (kq && n_tok == 1)
              {
                std::string sweep;
                for (int cfg = 0; cfg < HONE_K_KQUANT_CONFIGS; cfg++)
                  {
                    hone_k_kquant_set_config (cfg);
                    char buf[32];
                    snprintf (buf, sizeof buf, " %d:%.1f", cfg, bench_ms (0, 20, bench_fn, &b) * 1e3);
                    sweep += buf;
                  }
                hone_k_kquant_set_config (-1);
                report ("  |%s", sweep.c_str ());
              }
            report ("\n");
          }
        for (auto &m : b.ms) matrix_free (&m);
      }
  report ("\nGEMVs of one token of the 8B shape (32 layers x (qkv+o+gate|up+down) + lm_head), no attention/norms:\n");
  for (int ti = 0; ti < 4; ti++)
    {
      const int type = types[ti];
      const double us = 32 * layer_us[ti][0] + layer_us[ti][1];
      const double bytes = 32.0 * (hone_k_matrix_bytes (type, 6144, 4096, NULL, NULL)
                                   + hone_k_matrix_bytes (type, 4096, 4096, NULL, NULL)
                                   + hone_k_matrix_bytes (type, 28672, 4096, NULL, NULL)
                                   + hone_k_matrix_bytes (type, 4096, 14336, NULL, NULL))
                           + hone_k_matrix_bytes (type, 128256, 4096, NULL, NULL);
      report ("  %-5s %8.0f us, weights %.2f GB, %.1f%% of read ceiling\n", tname (type), us, bytes / 1e9,
              100 * bytes / (us * 1e-6) / READ_CEIL);
    }

  bench_dequant ();
  cudaFree (x); cudaFree (y); cudaFree (res); cudaFree (xq.q); cudaFree (xq.ds);
}

/* The fused 4-bit prefill GEMM (hone_k_w4_gemm, kernels/hone-k-gemm-w4.cu) on the
 * K-quants at the Llama-3-8B shapes, Q4_0 (session 50's type) and Q8_0 beside them, for 16,
 * 64, 128 and 192 tokens (f32 out; the engine's split scratch): µs, GB/s of weights and
 * TFLOP/s, weight copies rotated through >= 256 MB so that L2 holds none; and the
 * f16 dequantization of the same matrix alone, the pass the fused GEMM removes
 * (dequantize + cuBLASLt pays it and the GEMM on top). --bench-gemm. */
struct GemmRun {
  std::vector<HoneKMatrix> *m;
  int n, next;
  void *x, *y, *scratch;
  size_t scratch_bytes;
};

static void
bench_gemm (void)
{
  report ("\n== Fused 4-bit prefill GEMM (hone_k_w4_gemm), Llama-3-8B shapes, weights rotated ==\n");
  const struct { const char *name; int rows, cols; } shapes[] = {
    { "q|k|v", 6144, 4096 }, { "o", 4096, 4096 }, { "gate|up", 28672, 4096 }, { "down", 4096, 14336 } };
  void *x, *y, *scratch;
  const size_t sbytes = (size_t) 28672 * 4096 * 2;
  CK (cudaMalloc (&x, (size_t) 192 * 14336 * 2));
  CK (cudaMalloc (&y, (size_t) 192 * 28672 * 4));
  CK (cudaMalloc (&scratch, sbytes));
  fill_random<<<1024, 256>>> ((uint8_t *) x, (size_t) 192 * 14336 * 2, 77, 3);
  for (int type : { HONE_K_Q4_K, HONE_K_Q6_K, HONE_K_Q4_0, HONE_K_Q8_0 })
    for (const auto &sh : shapes)
      {
        const size_t wb = hone_k_matrix_bytes (type, sh.rows, sh.cols, NULL, NULL);
        const int copies = (int) std::max<size_t> (1, ((size_t) 256 << 20) / wb + 1);
        std::vector<HoneKMatrix> ms;
        for (int c = 0; c < copies; c++)
          {
            ms.push_back (kmatrix_alloc (type, sh.rows, sh.cols));
            fill_layout (ms.back (), 100 + c);
          }
        void *d;
        CK (cudaMalloc (&d, (size_t) sh.rows * sh.cols * 2));
        struct Dq { HoneKMatrix *m; void *d; } dq = { &ms[0], d };
        const double dq_us = bench_ms (0, 10, [] (void *p) { Dq *q = (Dq *) p; hone_k_dequant (q->m, q->d, 1, 0); },
                                       &dq) * 1e3;
        cudaFree (d);
        for (int n : { 16, 64, 128, 192 })
          {
            GemmRun r = { &ms, n, 0, x, y, scratch, sbytes };
            const double us = bench_ms (0, 20, [] (void *p) {
              GemmRun *g = (GemmRun *) p;
              const HoneKMatrix &w = (*g->m)[g->next++ % g->m->size ()];
              CK (hone_k_w4_gemm (&w, g->n, g->x, g->y, 0, 0, g->scratch, g->scratch_bytes, 0));
            }, &r) * 1e3;
            report ("  %-5s %-7s %5dx%-5d n %3d: fused %7.1f us, %5.0f GB/s of weights (%4.1f%% of 4.52 TB/s), "
                    "%4.0f TFLOP/s; the f16 dequantization alone %7.1f us\n", tname (type), sh.name, sh.rows, sh.cols,
                    n, us, wb / (us * 1e-6) / 1e9, 100 * wb / (us * 1e-6) / READ_CEIL,
                    2.0 * sh.rows * sh.cols * n / (us * 1e-6) / 1e12, dq_us);
          }
        for (auto &m : ms)
          matrix_free (&m);
      }
  cudaFree (x);
  cudaFree (y);
  cudaFree (scratch);
}

/* ---- session 4: mixed q|k|v, and launch shapes for 2..8 tokens --------------------
 * --bench-mixed: the Llama-3-8B q|k|v (4096 + 1024 + 1024 rows of 4096) with
 * RMSNorm, RoPE and the KV writes, as decode runs it for a Q4_K_M file — old:
 * one F16 matrix (what mixed q|k|v went up as), fused norm and ROPE_KV; new:
 * HONE_K_PARTS (Q4_K q|k + Q6_K v: norm+quantize, 2 GEMVs, hone_k_rope_kv);
 * and a pure Q4_K q|k|v (norm+quantize, fused ROPE_KV) for scale. Each is
 * captured in a CUDA graph (PDL on, as decode of quantized models) over
 * weight copies rotated through >= 400 MB; µs per q|k|v, median of 5. */
static void
bench_mixed (void)
{
  const int nq = 32, nkv = 8, hd = 128, D = 4096, W = (nq + 2 * nkv) * hd;
  hone_k_set_pdl (1);
  float *x, *g, *y, *tmp, *inv;
  int32_t *pos, *table;
  void *kp, *vp;
  HoneKActQ8 xq;
  CK (cudaMalloc (&x, 8 * D * 4));
  CK (cudaMalloc (&g, D * 4));
  CK (cudaMalloc (&y, (size_t) 8 * W * 4));
  CK (cudaMalloc (&tmp, (size_t) 8 * W * 4));
  CK (cudaMalloc (&inv, hd / 2 * 4));
  CK (cudaMalloc (&pos, 4));
  CK (cudaMalloc (&table, 4));
  CK (cudaMalloc (&kp, (size_t) nkv * HONE_K_KV_BLOCK * hd * 2));
  CK (cudaMalloc (&vp, (size_t) nkv * HONE_K_KV_BLOCK * hd * 2));
  CK (cudaMalloc (&xq.q, 8 * D));
  CK (cudaMalloc (&xq.ds, 8 * D / 32 * 8));
  fill_random<<<256, 256>>> ((uint8_t *) x, 8 * D * 4, 7, 3);
  fill_random<<<256, 256>>> ((uint8_t *) g, D * 4, 8, 3);
  {
    const std::vector<float> f = make_inv_freq (hd, 500000.0);
    CK (cudaMemcpy (inv, f.data (), hd / 2 * 4, cudaMemcpyHostToDevice));
  }
  CK (cudaMemset (pos, 0, 4));
  CK (cudaMemset (table, 0, 4));
  cudaStream_t s;
  CK (cudaStreamCreateWithFlags (&s, cudaStreamNonBlocking));
  report ("\n== q|k|v of Llama-3-8B (6144x4096) with norm, RoPE, KV writes: CUDA graph, PDL, weights rotated ==\n");
  report ("%-44s %3s %8s %9s %8s %7s\n", "variant", "tok", "us", "weights", "GB/s", "%read");
  static const char *names[3] = { "old: F16 (fused norm + ROPE_KV), 1 launch", "new: parts Q4_K q|k + Q6_K v, 4 launches",
                                  "pure Q4_K (quantize + ROPE_KV), 2 launches" };
  for (int v = 0; v < 3; v++)
    {
      std::vector<HoneKMatrix> ms, ps;
      size_t one;
      if (v == 0)
        one = hone_k_matrix_bytes (HONE_K_F16, W, D, NULL, NULL);
      else if (v == 1)
        one = hone_k_matrix_bytes (HONE_K_Q4_K, (nq + nkv) * hd, D, NULL, NULL)
              + hone_k_matrix_bytes (HONE_K_Q6_K, nkv * hd, D, NULL, NULL);
      else
        one = hone_k_matrix_bytes (HONE_K_Q4_K, W, D, NULL, NULL);
      const int copies = (int) std::max<size_t> (2, (400u << 20) / one + 1);
      ps.reserve (2 * copies);
      for (int i = 0; i < copies; i++)
        {
          HoneKMatrix m;
          if (v == 1)
            {
              ps.push_back (kmatrix_alloc (HONE_K_Q4_K, (nq + nkv) * hd, D));
              ps.push_back (kmatrix_alloc (HONE_K_Q6_K, nkv * hd, D));
              fill_layout (ps[2 * i], 300 + i);
              fill_layout (ps[2 * i + 1], 600 + i);
              memset (&m, 0, sizeof m);
              m.type = HONE_K_PARTS;
              m.rows = W;
              m.cols = D;
              m.n_parts = 2;
              m.parts = &ps[2 * i];
            }
          else
            {
              m = kmatrix_alloc (v == 0 ? HONE_K_F16 : HONE_K_Q4_K, W, D);
              fill_layout (m, 200 + i);
            }
          ms.push_back (m);
        }
      for (int n_tok : { 1, 4 })
        {
          int rc = 0;
          CK (cudaStreamBeginCapture (s, cudaStreamCaptureModeThreadLocal));
          for (int i = 0; i < copies && !rc; i++)
            {
              HoneKGemvOp op;
              memset (&op, 0, sizeof op);
              op.w = &ms[i];
              op.n_tok = n_tok;
              op.y = y;
              op.eps = 1e-5f;
              op.nq = nq; op.nkv = nkv; op.hd = hd; op.pos = pos; op.inv_freq = inv;
              op.k_pool = kp; op.v_pool = vp; op.block_table = table;
              if (v == 0)
                {
                  op.x = x; op.norm_g = g; op.epilogue = HONE_K_EPI_ROPE_KV;
                  rc = hone_k_gemv_ex (&op, s);
                }
              else if (v == 1)
                {
                  op.x = x; op.norm_g = g; op.xq = &xq; op.epilogue = HONE_K_EPI_STORE;
                  rc = hone_k_gemv_parts (&op, tmp, s);
                  if (!rc)
                    rc = hone_k_rope_kv (y, n_tok, nq, nkv, hd, pos, inv, 0, NULL, NULL, 1e-5f, kp, vp, table, s);
                }
              else
                {
                  rc = hone_k_rmsnorm (x, g, n_tok, D, 1e-5f, NULL, &xq, NULL, 0, s);
                  op.xq = &xq; op.epilogue = HONE_K_EPI_ROPE_KV;
                  if (!rc)
                    rc = hone_k_gemv_ex (&op, s);
                }
            }
          cudaGraph_t graph;
          CK (cudaStreamEndCapture (s, &graph));
          if (rc)
            {
              report ("%-44s %3d launch failed: %s\n", names[v], n_tok, cudaGetErrorString ((cudaError_t) rc));
              cudaGraphDestroy (graph);
              cudaGetLastError ();
              continue;
            }
          cudaGraphExec_t ge;
          CK (cudaGraphInstantiate (&ge, graph, 0));
          struct G { cudaGraphExec_t ge; cudaStream_t s; } gg = { ge, s };
          const double ms_ = bench_ms (s, 1, [] (void *p) { G *q = (G *) p; cudaGraphLaunch (q->ge, q->s); }, &gg);
          const double us = ms_ * 1e3 / copies;
          report ("%-44s %3d %8.2f %7.1f MB %8.0f %6.1f%%\n", names[v], n_tok, us, one / 1e6, one / (us * 1e-6) / 1e9,
                  100 * one / (us * 1e-6) / READ_CEIL);
          cudaGraphExecDestroy (ge);
          cudaGraphDestroy (graph);
        }
      for (auto &m : (v == 1 ? ps : ms))
        matrix_free (&m);
    }
  hone_k_set_pdl (-1);
  cudaStreamDestroy (s);
  cudaFree (x); cudaFree (g); cudaFree (y); cudaFree (tmp); cudaFree (inv); cudaFree (pos); cudaFree (table);
  cudaFree (kp); cudaFree (vp); cudaFree (xq.q); cudaFree (xq.ds);
}

/* --sweep-tok: every launch shape of the K-quant GEMV at 2, 4 and 8 tokens on
 * the 8B shapes (stream launches as run_bench; weights rotated), to pick the
 * several-token rule. "auto" is the rule as built; 2 and 4 tokens with the
 * kernel built for 4 tokens (max4, hone_k_kquant_set_tiers (1)) and the
 * 8-token one (max8, the default). */
static void
sweep_tok (void)
{
  struct { const char *name; int rows, cols, epi; } shapes[] = {
    { "qkv 6144x4096", 6144, 4096, HONE_K_EPI_STORE },
    { "o 4096x4096 +res", 4096, 4096, HONE_K_EPI_ADD },
    { "gate|up 28672x4096 swiglu", 28672, 4096, HONE_K_EPI_SWIGLU },
    { "down 4096x14336 +res", 4096, 14336, HONE_K_EPI_ADD },
    { "lm_head 128256x4096", 128256, 4096, HONE_K_EPI_STORE },
  };
  report ("\n== K-quant GEMV, 2..8 tokens: auto and launch shapes 0..%d (us; %%read of the best) ==\n",
          HONE_K_KQUANT_CONFIGS - 1);
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
  for (int type : { HONE_K_Q4_K, HONE_K_Q6_K })
    for (auto &sh : shapes)
      {
        Bench b;
        const size_t one = hone_k_matrix_bytes (type, sh.rows, sh.cols, NULL, NULL);
        const int copies = (int) std::max<size_t> (2, (400u << 20) / one + 1);
        for (int i = 0; i < copies; i++)
          {
            HoneKMatrix m = kmatrix_alloc (type, sh.rows, sh.cols);
            fill_layout (m, 100 + i);
            b.ms.push_back (m);
          }
        b.cur = 0;
        b.x = x; b.y = y; b.res = res; b.xq = xq; b.epi = sh.epi;
        for (int n_tok : { 2, 4, 8 })
          for (int tiers = 1; tiers >= (n_tok <= 4 ? 0 : 1); tiers--)
          {
            b.n_tok = n_tok;
            hone_k_kquant_set_tiers (tiers);
            const double act = (1.0 + 8.0 / 32) * sh.cols * n_tok
                               + 4.0 * n_tok * (sh.epi == HONE_K_EPI_SWIGLU ? sh.rows / 2 : sh.rows)
                                     * (sh.epi == HONE_K_EPI_ADD ? 2 : 1);
            hone_k_kquant_set_config (-1);
            const double auto_us = bench_ms (0, 20, bench_fn, &b) * 1e3;
            double best = auto_us;
            int best_cfg = -1;
            std::string sw;
            for (int cfg = 0; cfg < HONE_K_KQUANT_CONFIGS; cfg++)
              {
                hone_k_kquant_set_config (cfg);
                const double us = bench_ms (0, 20, bench_fn, &b) * 1e3;
                char buf[32];
                snprintf (buf, sizeof buf, " %d:%.1f", cfg, us);
                sw += buf;
                if (us < best)
                  {
                    best = us;
                    best_cfg = cfg;
                  }
              }
            hone_k_kquant_set_config (-1);
            hone_k_kquant_set_tiers (-1);
            report ("%-27s %-5s tok %d%s auto %7.1f (%4.1f%%) |%s | best %d %.1f (%4.1f%%)\n", sh.name, tname (type), n_tok,
                    n_tok > 4 ? "     " : tiers ? " max4" : " max8", auto_us, 100 * (one + act) / (auto_us * 1e-6) / READ_CEIL, sw.c_str (), best_cfg, best,
                    100 * (one + act) / (best * 1e-6) / READ_CEIL);
          }
        for (auto &m : b.ms) matrix_free (&m);
      }
  cudaFree (x); cudaFree (y); cudaFree (res); cudaFree (xq.q); cudaFree (xq.ds);
}

int
main (int argc, char **argv)
{
  bool do_check = false, do_bench = false, do_mixed = false, do_sweep = false, do_dequant = false, do_gemm = false;
  for (int i = 1; i < argc; i++)
    {
      if (!strcmp (argv[i], "--check")) do_check = true;
      else if (!strcmp (argv[i], "--bench")) do_bench = true;
      else if (!strcmp (argv[i], "--bench-mixed")) do_mixed = true;
      else if (!strcmp (argv[i], "--bench-dequant")) do_dequant = true;
      else if (!strcmp (argv[i], "--bench-gemm")) do_gemm = true;
      else if (!strcmp (argv[i], "--sweep-tok")) do_sweep = true;
      else if (!strcmp (argv[i], "--small")) { small_only = true; do_check = true; }
      else
        {
          fprintf (stderr, "usage: %s [--check] [--bench] [--bench-mixed] [--bench-dequant] [--bench-gemm] [--sweep-tok] "
                   "[--small]\n", argv[0]);
          return 2;
        }
    }
  if (!do_check && !do_bench && !do_mixed && !do_sweep && !do_dequant && !do_gemm)
    do_check = do_bench = true;
  const char *out = getenv ("OUT");
  if (out && *out)
    {
      std::string p = std::string (out) + "/kquant-results.txt";
      results = fopen (p.c_str (), "a");
    }
  cudaDeviceProp prop;
  CK (cudaGetDeviceProperties (&prop, 0));
  report ("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  if (do_check)
    run_checks ();
  if (do_bench)
    run_bench ();
  if (do_mixed)
    bench_mixed ();
  if (do_dequant)
    bench_dequant ();
  if (do_gemm)
    bench_gemm ();
  if (do_sweep)
    sweep_tok ();
  report ("\n%d passed, %d failed\n", n_pass, n_fail);
  return n_fail ? 1 : 0;
}
