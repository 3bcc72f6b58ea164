/* hone-w4-check.cu — checks and benchmarks of the W4A16 (AWQ int4, HONE_K_Q4Z)
 * kernels: repack, decode GEMV (all epilogues, fused RMSNorm), dequantization.
 *
 * Plain CUDA C++ (no GLib), linked with the kernels' objects; built on the developer
 * machine and carried to the GPU one (tests/run-cuda.sh w4 runs it from .carry-w4a16/):
 *   nvcc -std=c++17 -O3 -lineinfo -gencode arch=compute_90,code=sm_90 -Ikernels \
 *        tests/cuda/hone-w4-check.cu kernels/*.cu -o .carry-w4a16/hone-w4-check -lcublas -lcublasLt
 * Checks: Q4Z rows are made here from the byte layout of the contract
 * (src/core/hone-dtype.h HoneBlockQ4Z: f16 s, u8 z, pad, qs[16], element j
 * low nibble of qs[j], j+16 high; w = s·(q − z)); every result is compared
 * with a float64 reference computed here from that definition, on fresh
 * random inputs, outputs poisoned (NaN bytes) first and the bytes past them
 * checked untouched. A tiny Q4Z model is run through hone_k_forward (decode
 * GEMVs and the prefill GEMM path) against the same model with the weights
 * given as F16 (whose path hone-cuda-check verifies against float64).
 * Every GEMV check runs with each Q4Z GEMV kernel (hone_k_q4z_set_config:
 * 1 the first kernel, 4 the same with 4 loads a lane, 2 variant 2, 3 / 5 the
 * staged one-token kernel with 256 / 512 threads), plus one-token shapes that
 * walk the staged kernel's slot plans; --staged runs those for configs 3 and 5
 * (compute-sanitizer memcheck), --staged-small the small ones (racecheck);
 * configs 8 / 9 / 10 are the tensor-core kernel (mma.sync; g128 with the offset
 * taken off in f32 / with the zero point subtracted in f16 / scales in f16, the
 * last also for g32/g64), 11 = 8 with another block-task plan, with full-size shapes
 * added; --mma runs every check with those configs only (memcheck), --mma-small the
 * small shapes (racecheck); config 13 is the register-streamed kernel on the input packed
 * by hone_k_pack_h16 (one token; its checks fail if another kernel ran), --rs runs every
 * check with it only (memcheck).
 * Benchmarks: per-GEMV at Llama-3-8B shapes (Q4Z g128, first kernel "v1" and
 * variant 2 "v2" and the staged kernels side by side, next to the dp4a Q4_0 kernel), the
 * dequantization, the whole decode step of a random AWQ g128 Llama-3-8B (f16
 * embeddings and lm_head) at ctx 128/4k with v1 and v2, and prefill (16..2048
 * tokens) against the BF16 model.
 *
 * The fused prefill GEMM (hone_k_w4_gemm, kernels/hone-k-gemm-w4.cu) is checked alone
 * against float64 and inside the tiny models' prefill (fused and not); --gemm runs only
 * its checks (compute-sanitizer). Its benchmark times each Llama-3-8B matrix at 16..512
 * tokens fused and dequantized + cuBLASLt, and the whole prefill both ways; --prefill-bench
 * runs only those.
 *
 * Usage: hone-w4-check [--check] [--bench]   (default both); exit 1 if a check fails.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdint.h>
#include <vector>
#include <algorithm>
#include <string>
#include "hone-kernels.h"

#define HONE_CHECK_WIDTH 66
#define HONE_CHECK_SEED 0x5eed4a16
#define HONE_CHECK_GUARD 256   /* poisoned bytes past every output, checked untouched */
#include "hone-check-util.cuh"

/* round-to-nearest-even f64 → bf16 bits (values here are exact in f32) */
static uint16_t
bf16_rne (double d)
{
  float f = (float) d;
  uint32_t u;
  memcpy (&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t) (u >> 16);
}

static const size_t GUARD = HONE_CHECK_GUARD;

static bool
guard_intact (const void *p, size_t bytes)
{
  std::vector<uint8_t> g (GUARD);
  CK (cudaDeviceSynchronize ());
  CK (cudaMemcpy (g.data (), (const uint8_t *) p + bytes, GUARD, cudaMemcpyDeviceToHost));
  for (uint8_t b : g)
    if (b != 0xff)
      return false;
  return true;
}

/* ---- Q4Z host rows (the contract's byte layout) and their f64 values ------------- */

struct HostQ4Z {
  int rows, cols, group;
  std::vector<uint8_t> bytes;   /* rows × cols/32 blocks of 20 bytes */
  std::vector<double> w;        /* s·(q − z) */
};

static HostQ4Z
q4z_make (int rows, int cols, int group, float scale)
{
  HostQ4Z h;
  h.rows = rows;
  h.cols = cols;
  h.group = group;
  const int nb = cols / 32, bpg = group / 32;
  h.bytes.resize ((size_t) rows * nb * 20);
  h.w.resize ((size_t) rows * cols);
  for (int r = 0; r < rows; r++)
    for (int gi = 0; gi < cols / group; gi++)
      {
        /* AWQ-like: positive scale, zero point anywhere in 0..15 */
        const uint16_t s = f2h (scale * (float) (0.25 + rng_uniform ()));
        const uint8_t z = (uint8_t) (rng_u64 () % 16);
        for (int b = 0; b < bpg; b++)
          {
            const int j = gi * bpg + b;
            uint8_t *blk = &h.bytes[((size_t) r * nb + j) * 20];
            blk[0] = (uint8_t) (s & 0xff);
            blk[1] = (uint8_t) (s >> 8);
            blk[2] = z;
            blk[3] = (uint8_t) rng_u64 ();   /* pad: must be ignored */
            uint8_t q[32];
            for (int i = 0; i < 32; i++)
              q[i] = (uint8_t) (rng_u64 () % 16);
            for (int i = 0; i < 16; i++)
              blk[4 + i] = (uint8_t) (q[i] | (q[i + 16] << 4));
            for (int i = 0; i < 32; i++)
              h.w[(size_t) r * cols + j * 32 + i] = (double) h2f (s) * ((int) q[i] - (int) z);
          }
      }
  return h;
}

/* q4z_alloc: hone-check-util.cuh */

/* Upload host rows into rows row0 + r·step of m (the backend's gate/up interleave). */
static void
q4z_upload (HoneKMatrix &m, const HostQ4Z &h, int row0, int step)
{
  uint8_t *src = dev_upload (h.bytes);
  CK (hone_k_repack (HONE_K_Q4Z, src, h.rows, h.cols, &m, row0, step, 0));
  CK (cudaDeviceSynchronize ());
  cudaFree (src);
}

/* ---- checks ------------------------------------------------------------------------ */

/* The GEMV bound: f16 activations (2^-11 relative) and f16 partial sums of 16
 * products (a few ulp of each chunk's sum) against exact f64. */
static const double GEMV_BOUND = 4e-3;

/* The packed-input scratch every GEMV op here is given (config 13 reads it at one token;
 * the other kernels ignore it), allocated in main for rows up to 32768 columns. */
static HoneKActH16 g_xh;
static int cur_cfg = 0;   /* the config the checks run under (set with hone_k_q4z_set_config) */

static void
set_cfg (int cfg)
{
  cur_cfg = cfg;
  hone_k_q4z_set_config (cfg);
}

static void
check_gemv (int rows, int cols, int g, int n_tok, int epi, bool norm, bool bias_on, bool outliers = false,
            bool interleave = false)
{
  /* ROPE_KV: heads of 64, rows = (nq + 2 nkv)·64 */
  const int hd = 64, nkv = epi == HONE_K_EPI_ROPE_KV ? rows / hd / 4 : 0, nq = 2 * nkv;
  HostQ4Z h = q4z_make (rows, cols, g, 0.02f);
  HoneKMatrix m = q4z_alloc (rows, cols, g);
  std::vector<double> W = h.w;
  if (interleave)
    {
      /* two halves uploaded with step 2, like gate/up: row 2i = A_i, 2i+1 = B_i */
      HostQ4Z a = h, b = h;
      a.rows = b.rows = rows / 2;
      const size_t half = (size_t) rows / 2 * (cols / 32) * 20;
      a.bytes.assign (h.bytes.begin (), h.bytes.begin () + half);
      b.bytes.assign (h.bytes.begin () + half, h.bytes.end ());
      q4z_upload (m, a, 0, 2);
      q4z_upload (m, b, 1, 2);
      for (int i = 0; i < rows / 2; i++)
        for (int k = 0; k < cols; k++)
          {
            W[(size_t) (2 * i) * cols + k] = h.w[(size_t) i * cols + k];
            W[(size_t) (2 * i + 1) * cols + k] = h.w[(size_t) (rows / 2 + i) * cols + k];
          }
    }
  else
    q4z_upload (m, h, 0, 1);

  std::vector<float> x ((size_t) n_tok * cols), bias (rows), res ((size_t) n_tok * rows), g_ (cols);
  for (auto &v : x) v = rng_normal ();
  if (outliers)   /* a few channels 300× larger, like LLM activation outliers */
    for (int t = 0; t < n_tok; t++)
      for (int k = 5; k < cols; k += cols / 3)
        x[(size_t) t * cols + k] *= 300.f;
  for (auto &v : bias) v = rng_normal ();
  for (auto &v : res) v = rng_normal ();
  for (auto &v : g_) v = 1.f + 0.3f * rng_normal ();

  std::vector<double> xin ((size_t) n_tok * cols);
  for (int t = 0; t < n_tok; t++)
    {
      double ss = 0;
      for (int k = 0; k < cols; k++) ss += (double) x[(size_t) t * cols + k] * x[(size_t) t * cols + k];
      const double sc = norm ? 1.0 / sqrt (ss / cols + 1e-5) : 1.0;
      for (int k = 0; k < cols; k++)
        xin[(size_t) t * cols + k] = x[(size_t) t * cols + k] * sc * (norm ? g_[k] : 1.0);
    }
  std::vector<double> acc ((size_t) n_tok * rows);
  for (int t = 0; t < n_tok; t++)
    for (int r = 0; r < rows; r++)
      {
        double s = 0;
        for (int k = 0; k < cols; k++) s += W[(size_t) r * cols + k] * xin[(size_t) t * cols + k];
        acc[(size_t) t * rows + r] = s + (bias_on ? bias[r] : 0.0);
      }

  float *dx = dev_upload (x), *dres = dev_upload (res), *dbias = dev_upload (bias), *dg = dev_upload (g_);
  const int out_cols = epi == HONE_K_EPI_SWIGLU ? rows / 2 : rows;
  const size_t ybytes = (size_t) n_tok * out_cols * 4;
  float *dy = (float *) dev_poisoned (ybytes);
  if (epi == HONE_K_EPI_ADD)
    CK (cudaMemcpy (dy, dres, (size_t) n_tok * rows * 4, cudaMemcpyDeviceToDevice));

  /* ROPE_KV: a scattered page table, positions crossing a page boundary */
  const int pos0 = 61;
  const int pages = 4;
  std::vector<int32_t> table = { 2, 0, 3, 1 };
  const size_t pool_elems = (size_t) pages * (nkv > 0 ? nkv : 1) * HONE_K_KV_BLOCK * hd;
  void *kp = dev_poisoned (pool_elems * 2), *vp = dev_poisoned (pool_elems * 2);
  int32_t *dtable = dev_upload (table), *dpos = dev_upload (std::vector<int32_t> { pos0 });
  std::vector<float> inv = make_inv_freq (hd, 10000.0);
  float *dinv = dev_upload (inv);

  HoneKGemvOp op;
  memset (&op, 0, sizeof op);
  op.w = &m;
  op.x = dx;
  op.n_tok = n_tok;
  op.bias = bias_on ? dbias : NULL;
  op.res = epi == HONE_K_EPI_ADD ? dy : NULL;   /* in place, as the forward pass does */
  op.y = dy;
  op.epilogue = epi;
  op.norm_g = norm ? dg : NULL;
  op.eps = 1e-5f;
  op.xh = &g_xh;
  if (epi == HONE_K_EPI_ROPE_KV)
    {
      op.nq = nq; op.nkv = nkv; op.hd = hd; op.pos = dpos; op.inv_freq = dinv;
      op.k_pool = kp; op.v_pool = vp; op.block_table = dtable;
    }
  CK (hone_k_gemv_ex (&op, 0));
  CK (cudaGetLastError ());
  const std::vector<float> y = dev_download<float> (dy, (size_t) n_tok * out_cols);

  char what[200];
  const int kern = hone_k_q4z_last_kernel ();
  snprintf (what, sizeof what, "q4z gemv %dx%d g%d tok=%d epi=%d%s%s%s%s [%s]", rows, cols, g, n_tok, epi,
            norm ? " +norm" : "", bias_on ? " +bias" : "", outliers ? " outliers" : "", interleave ? " step2" : "",
            kern == 5 ? "rs" : kern == 4 ? "mma" : kern == 3 ? "staged" : kern == 2 ? "v2" : "v1");
  /* config 13 at one token must have run the register-streamed kernel, not a fallback */
  const bool kern_ok = !(cur_cfg == 13 && n_tok == 1 && kern != 5);
  std::vector<double> ref ((size_t) n_tok * out_cols);
  std::vector<double> kref, vref;
  std::vector<size_t> kvidx;
  for (int t = 0; t < n_tok; t++)
    for (int r = 0; r < out_cols; r++)
      {
        const double *a = &acc[(size_t) t * rows];
        double v;
        if (epi == HONE_K_EPI_SWIGLU)
          v = a[2 * r] / (1 + exp (-a[2 * r])) * a[2 * r + 1];
        else
          v = a[r] + (epi == HONE_K_EPI_ADD ? res[(size_t) t * rows + r] : 0.0);
        ref[(size_t) t * out_cols + r] = v;
      }
  bool ok_guard = guard_intact (dy, ybytes);
  if (epi == HONE_K_EPI_ROPE_KV)
    {
      /* q rows rotated and scaled into y; k rotated, v copied, into the pages */
      std::vector<uint16_t> kh = dev_download<uint16_t> (kp, pool_elems), vh = dev_download<uint16_t> (vp, pool_elems);
      std::vector<float> qgot, kvgot;
      std::vector<double> qref, kvr;
      size_t written = 0;
      for (int t = 0; t < n_tok; t++)
        {
          const int p = pos0 + t;
          for (int head = 0; head < nq + 2 * nkv; head++)
            for (int d = 0; d < hd; d += 2)
              {
                const int row = head * hd + d;
                double v0 = acc[(size_t) t * rows + row], v1 = acc[(size_t) t * rows + row + 1];
                if (head < nq + nkv)
                  {
                    const double ang = (double) p * inv[d / 2];
                    const double r0 = v0 * cos (ang) - v1 * sin (ang), r1 = v0 * sin (ang) + v1 * cos (ang);
                    v0 = r0;
                    v1 = r1;
                  }
                if (head < nq)
                  {
                    qref.push_back (v0 / sqrt ((double) hd));
                    qref.push_back (v1 / sqrt ((double) hd));
                    qgot.push_back (y[(size_t) t * rows + row]);
                    qgot.push_back (y[(size_t) t * rows + row + 1]);
                    continue;
                  }
                const bool is_k = head < nq + nkv;
                const int kvh = head - nq - (is_k ? 0 : nkv);
                const size_t idx = (((size_t) table[p / HONE_K_KV_BLOCK] * nkv + kvh) * HONE_K_KV_BLOCK
                                    + p % HONE_K_KV_BLOCK) * hd + d;
                const std::vector<uint16_t> &pool = is_k ? kh : vh;
                kvr.push_back (v0);
                kvr.push_back (v1);
                kvgot.push_back (h2f (pool[idx]));
                kvgot.push_back (h2f (pool[idx + 1]));
                written += 2;
              }
        }
      /* everything else in the pools is still poison */
      size_t poisoned = 0;
      for (size_t i = 0; i < pool_elems; i++)
        poisoned += (kh[i] == 0xffff) + (vh[i] == 0xffff);
      bool fin1, fin2;
      const double e1 = rel_err (qgot.data (), qref.data (), qgot.size (), &fin1);
      const double e2 = rel_err (kvgot.data (), kvr.data (), kvgot.size (), &fin2);
      const bool ok = fin1 && fin2 && e1 < GEMV_BOUND && e2 < GEMV_BOUND && poisoned == 2 * pool_elems - written
                      && ok_guard && kern_ok;
      check (ok, what, std::max (e1, e2), GEMV_BOUND);
    }
  else
    {
      bool fin;
      const double e = rel_err (y.data (), ref.data (), y.size (), &fin);
      check (fin && ok_guard && kern_ok && e < GEMV_BOUND, what, e, GEMV_BOUND);
    }
  matrix_free (&m);
  cudaFree (dx); cudaFree (dres); cudaFree (dbias); cudaFree (dg); cudaFree (dy);
  cudaFree (kp); cudaFree (vp); cudaFree (dtable); cudaFree (dpos); cudaFree (dinv);
}

/* One-token shapes that walk the staged kernel's plans (hone-k-gemv-w4.cu,
 * w4s_plan): 16, 8, 4 and 2 rows a ring slot, more slots than the ring holds
 * (slots reused, mbarrier parities flipping), fewer row pairs than SMs, odd
 * rows, scale/zero ranges that start and end off 16-byte bounds (3 groups a
 * row), every epilogue; with the other configs they check the same shapes. */
static int only_staged = 0;   /* --staged: just these, config 3 (memcheck); --staged-small: the small ones (racecheck) */
static int only_rs = 0;       /* --rs: every check with config 13 only (memcheck) */
static int only_gemm = 0;     /* --gemm: the fused prefill GEMM's checks only (memcheck, racecheck) */
static int only_mma = 0;      /* --mma: every check with configs 8, 9, 10 only (memcheck); --mma-small: the small
                               * one-token shapes with them (racecheck) */

static void
check_gemv_one_token (void)
{
  check_gemv (263, 384, 128, 1, HONE_K_EPI_STORE, false, true);                    /* odd, unaligned groups */
  check_gemv (97, 96, 32, 1, HONE_K_EPI_STORE, true, true);                        /* 3 chunks a row */
  check_gemv (4 * 4 * 64, 512, 64, 1, HONE_K_EPI_ROPE_KV, true, true);             /* 16 rows a slot */
  check_gemv (300, 1024, 32, 1, HONE_K_EPI_SWIGLU, true, false, false, true);      /* 16 rows, fewer pairs than SMs */
  if (only_staged == 2)
    return;
  check_gemv (2048, 1024, 128, 1, HONE_K_EPI_ROPE_KV, true, true);                 /* 16 rows a slot, 8 slots */
  check_gemv (8192, 4096, 64, 1, HONE_K_EPI_SWIGLU, true, false, false, true);     /* 8 rows, 8 slots a block */
  check_gemv (1000, 8192, 32, 1, HONE_K_EPI_ADD, false, true);                     /* 4 rows */
  check_gemv (64, 14336, 128, 1, HONE_K_EPI_ADD, false, false, true);              /* 2 rows, 32 blocks */
  check_gemv (6144, 4096, 128, 1, HONE_K_EPI_STORE, true, false, true);            /* qkv-like, outliers */
  if (!only_staged)
    check_gemv (20000, 4096, 128, 1, HONE_K_EPI_ADD, false, false);                /* 152 rows a block */
}

/* Dequantization: f16 must be exactly round(s·(q − z)) and bf16 likewise (one rounding of an exact product). */
static void
check_dequant (int rows, int cols, int g)
{
  HostQ4Z h = q4z_make (rows, cols, g, 0.5f);
  HoneKMatrix m = q4z_alloc (rows, cols, g);
  q4z_upload (m, h, 0, 1);
  const size_t n = (size_t) rows * cols;
  for (int to_f16 = 0; to_f16 < 2; to_f16++)
    {
      void *d = dev_poisoned (n * 2);
      CK (hone_k_dequant (&m, d, to_f16, 0));
      std::vector<uint16_t> got = dev_download<uint16_t> (d, n);
      size_t bad = 0;
      double worst = 0;
      for (size_t i = 0; i < n; i++)
        {
          const uint16_t want = to_f16 ? f2h ((float) h.w[i]) : bf16_rne (h.w[i]);
          if (got[i] != want)
            {
              bad++;
              worst = std::max (worst, fabs ((to_f16 ? h2f (got[i]) : bf2f (got[i])) - h.w[i]));
            }
        }
      char what[160];
      snprintf (what, sizeof what, "q4z dequant %dx%d g%d -> %s (bit-exact, %zu differ)", rows, cols, g,
                to_f16 ? "f16" : "bf16", bad);
      check (bad == 0 && guard_intact (d, n * 2), what, worst, 0);
      cudaFree (d);
    }
  matrix_free (&m);
}

/* GGUF Q4_0 / Q4_1 rows from their block layout (f16 d, [f16 m,] qs[16], element j
 * in the low nibble of qs[j], j + 16 in the high one; w = d·(q − 8) or d·q + m),
 * uploaded through hone_k_repack like the loader's; f64 values in w. */
static HoneKMatrix
gguf4_make (int type, int rows, int cols, std::vector<double> &w)
{
  const int nb = cols / 32, bsz = type == HONE_K_Q4_0 ? 18 : 20;
  std::vector<uint8_t> bytes ((size_t) rows * nb * bsz);
  w.resize ((size_t) rows * cols);
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < nb; j++)
      {
        uint8_t *blk = &bytes[((size_t) r * nb + j) * bsz];
        const uint16_t d = f2h (0.02f * (float) (0.25 + rng_uniform ())), m = f2h (-0.16f * (float) rng_uniform ());
        blk[0] = (uint8_t) d;
        blk[1] = (uint8_t) (d >> 8);
        if (type == HONE_K_Q4_1)
          {
            blk[2] = (uint8_t) m;
            blk[3] = (uint8_t) (m >> 8);
          }
        uint8_t *qs = blk + bsz - 16;
        for (int i = 0; i < 16; i++)
          qs[i] = (uint8_t) rng_u64 ();
        for (int i = 0; i < 32; i++)
          {
            const int q = i < 16 ? qs[i] & 15 : qs[i - 16] >> 4;
            w[(size_t) r * cols + j * 32 + i] = type == HONE_K_Q4_0 ? (double) h2f (d) * (q - 8)
                                                                     : (double) h2f (d) * q + h2f (m);
          }
      }
  return gguf_upload (type, bytes, rows, cols);
}

/* The fused prefill GEMM (hone_k_w4_gemm) against float64 on the values it is
 * defined on: weights rounded to f16 (hone_k_dequant's, which cuBLASLt multiplies
 * on the other path) and x in f16; only the f32 sums differ (order, the tensor
 * cores' accumulation), so the bound is tight: 1e-4 RMS relative, 1e-3 for an f16
 * output (one f16 rounding). A wrong k order, lane map or split gives errors of
 * order 1. Outputs poisoned, the bytes past them checked untouched; with
 * accumulate Y starts at random values. @type Q4Z (group @g), Q4_0, Q4_1, Q4_K or
 * Q6_K; the K-quants' values are the ones the kernel forms in f16 (scale d·sc and
 * Q4_K's min rounded to f16 first: kquant_make_gguf's f16w). With @type2 ≥ 0 the
 * matrix is HONE_K_PARTS: @rows of @type, then @rows2 of @type2 (Q4_K_M's q|k|v). */
static const double GEMM_BOUND = 1e-4, GEMM_BOUND16 = 1e-3;

/* one part: its device matrix, its f64 values as the kernel forms them in f16 into @wf */
static HoneKMatrix
gemm_part (int type, int rows, int cols, int g, std::vector<double> &wf)
{
  std::vector<double> wexact;
  HoneKMatrix m;
  if (type == HONE_K_Q4Z)
    {
      HostQ4Z h = q4z_make (rows, cols, g, 0.02f);
      m = q4z_alloc (rows, cols, g);
      q4z_upload (m, h, 0, 1);
      wexact = h.w;
    }
  else if (type == HONE_K_Q4_K || type == HONE_K_Q6_K)
    {
      const std::vector<uint8_t> bytes = kquant_make_gguf (type, rows, cols, wexact, &wf);
      return gguf_upload (type, bytes, rows, cols);
    }
  else if (type == HONE_K_Q8_0)
    {
      /* GGUF block_q8_0: f16 d, int8 qs[32]; w = d·q (exact in f64, one f16 rounding in the kernel) */
      const int nb = cols / 32;
      std::vector<uint8_t> bytes ((size_t) rows * nb * 34);
      wexact.resize ((size_t) rows * cols);
      for (size_t b = 0; b < (size_t) rows * nb; b++)
        {
          uint8_t *blk = &bytes[b * 34];
          const uint16_t d = f2h (0.02f / 127 * (float) (0.25 + rng_uniform ()));
          blk[0] = (uint8_t) d;
          blk[1] = (uint8_t) (d >> 8);
          for (int i = 0; i < 32; i++)
            {
              const int8_t q = (int8_t) (rng_u64 () & 0xff);
              blk[2 + i] = (uint8_t) q;
              wexact[b * 32 + i] = (double) h2f (d) * q;
            }
        }
      m = gguf_upload (type, bytes, rows, cols);
    }
  else
    m = gguf4_make (type, rows, cols, wexact);
  wf.resize (wexact.size ());
  for (size_t i = 0; i < wf.size (); i++)
    wf[i] = h2f (f2h ((float) wexact[i]));
  return m;
}

static const char *
gemm_tname (int t)
{
  switch (t)
    {
    case HONE_K_Q4Z: return "q4z";
    case HONE_K_Q4_0: return "q4_0";
    case HONE_K_Q4_1: return "q4_1";
    case HONE_K_Q4_K: return "q4_k";
    case HONE_K_Q6_K: return "q6_k";
    case HONE_K_Q8_0: return "q8_0";
    default: return "?";
    }
}

static void
check_gemm (int type, int rows, int cols, int g, int n, bool y16, bool acc, bool split, bool outliers = false,
            int type2 = -1, int rows2 = 0)
{
  std::vector<double> wf;
  HoneKMatrix m, parts[2];
  if (type2 < 0)
    m = gemm_part (type, rows, cols, g, wf);
  else
    {
      std::vector<double> wf2;
      parts[0] = gemm_part (type, rows, cols, g, wf);
      parts[1] = gemm_part (type2, rows2, cols, g, wf2);
      wf.insert (wf.end (), wf2.begin (), wf2.end ());
      memset (&m, 0, sizeof m);
      m.type = HONE_K_PARTS;
      m.rows = rows + rows2;
      m.cols = cols;
      m.n_parts = 2;
      m.parts = parts;
      rows += rows2;
    }
  std::vector<uint16_t> xh ((size_t) n * cols);
  std::vector<double> xd ((size_t) n * cols);
  for (size_t i = 0; i < xh.size (); i++)
    {
      float v = rng_normal ();
      if (outliers && i % cols == 7)
        v *= 300.f;
      xh[i] = f2h (v);
      xd[i] = h2f (xh[i]);
    }
  const size_t ny = (size_t) n * rows;
  std::vector<float> y0 (ny);
  std::vector<uint16_t> y0h (ny);
  for (size_t i = 0; i < ny; i++)
    {
      y0h[i] = f2h (rng_normal ());
      y0[i] = h2f (y0h[i]);
    }
  std::vector<double> ref (ny);
  for (int t = 0; t < n; t++)
    for (int r = 0; r < rows; r++)
      {
        const double *w = &wf[(size_t) r * cols], *x = &xd[(size_t) t * cols];
        double sum = 0;
        for (int k = 0; k < cols; k++)
          sum += w[k] * x[k];
        ref[(size_t) t * rows + r] = sum + (acc ? y0[(size_t) t * rows + r] : 0.0);
      }
  uint16_t *dx = dev_upload (xh);
  const size_t ybytes = ny * (y16 ? 2 : 4);
  void *dy = dev_poisoned (ybytes);
  if (acc)
    CK (cudaMemcpy (dy, y16 ? (const void *) y0h.data () : (const void *) y0.data (), ybytes, cudaMemcpyHostToDevice));
  /* scratch for the split: as much as the engine gives (this matrix in 16 bits) */
  const size_t sbytes = split ? (size_t) rows * cols * 2 : 0;
  void *scratch = split ? dev_poisoned (sbytes) : NULL;
  CK (hone_k_w4_gemm (&m, n, dx, dy, y16, acc, scratch, sbytes, 0));
  CK (cudaGetLastError ());
  std::vector<float> got (ny);
  if (y16)
    {
      const std::vector<uint16_t> g16 = dev_download<uint16_t> (dy, ny);
      for (size_t i = 0; i < ny; i++)
        got[i] = h2f (g16[i]);
    }
  else
    got = dev_download<float> ((float *) dy, ny);
  bool fin;
  const double e = rel_err (got.data (), ref.data (), ny, &fin);
  const double bound = y16 ? GEMM_BOUND16 : GEMM_BOUND;
  char what[200];
  snprintf (what, sizeof what, "%s%s%s gemm %dx%d g%d n=%d -> %s%s%s%s", gemm_tname (type),
            type2 >= 0 ? "|" : "", type2 >= 0 ? gemm_tname (type2) : "", rows, cols,
            type == HONE_K_Q4Z ? g : 32, n, y16 ? "f16" : "f32",
            acc ? " +=" : "", split ? " (split k)" : "", outliers ? " outliers" : "");
  check (fin && e < bound && guard_intact (dy, ybytes), what, e, bound);
  if (type2 < 0)
    matrix_free (&m);
  else
    {
      matrix_free (&parts[0]);
      matrix_free (&parts[1]);
    }
  cudaFree (dx); cudaFree (dy);
  if (scratch) cudaFree (scratch);
}

static void
check_gemms (void)
{
  report ("-- fused prefill GEMM (hone_k_w4_gemm) --\n");
  const int Z = HONE_K_Q4Z;
  check_gemm (Z, 262, 256, 32, 9, false, false, false);          /* 2 k steps, 9 tokens: 2 n8 tiles */
  check_gemm (Z, 263, 384, 64, 16, false, true, true);          /* odd rows, 3 k steps */
  check_gemm (Z, 300, 576, 32, 17, true, false, true);          /* a last half step (576 = 4.5 × 128): 4 n8 tiles */
  check_gemm (Z, 130, 96, 32, 33, false, false, false);         /* less than one step, 8 n8 tiles */
  check_gemm (Z, 1000, 4096, 128, 40, false, true, true, true); /* split k, outliers */
  check_gemm (Z, 512, 1024, 128, 130, true, true, true);        /* 3 token tiles, the last part-filled */
  check_gemm (Z, 1024, 14336, 128, 64, false, true, true);      /* down's k, split many ways */
  check_gemm (Z, 2048 + 16, 4096, 64, 24, true, false, true);   /* gate|up-like rows, f16 out */
  check_gemm (Z, 4096, 4096, 128, 8 + 1, false, true, false);   /* no scratch: one split */
  for (int t : { HONE_K_Q4_0, HONE_K_Q4_1 })
    {
      check_gemm (t, 262, 256, 32, 9, false, false, false);
      check_gemm (t, 300, 576, 32, 17, true, true, true);         /* half step, f16 out */
      check_gemm (t, 130, 96, 32, 40, false, true, false);        /* less than one step */
      check_gemm (t, 1000, 4096, 32, 64, false, true, true, true);
      check_gemm (t, 512, 1024, 32, 150, true, false, true);      /* 3 token tiles */
      check_gemm (t, 1024, 14336, 32, 33, false, true, true);
    }
  for (int t : { HONE_K_Q4_K, HONE_K_Q6_K })
    {
      check_gemm (t, 262, 256, 32, 9, false, false, false);         /* one super-block, 2 k steps */
      check_gemm (t, 300, 768, 32, 17, true, true, true);         /* 3 super-blocks, f16 out */
      check_gemm (t, 1000, 4096, 32, 64, false, true, true, true);
      check_gemm (t, 512, 1024, 32, 150, true, false, true);      /* 3 token tiles */
      check_gemm (t, 1024, 14336, 32, 33, false, true, true);
      check_gemm (t, 130, 512, 32, 12, false, false, false);
    }
  /* Q8_0: 8-bit halves of a chunk swizzled in the stage, rows of one, odd and many k steps */
  check_gemm (HONE_K_Q8_0, 262, 256, 32, 9, false, false, false);
  check_gemm (HONE_K_Q8_0, 300, 576, 32, 17, true, true, true);      /* half step, f16 out */
  check_gemm (HONE_K_Q8_0, 131, 96, 32, 40, false, true, false);     /* less than one step, odd rows */
  check_gemm (HONE_K_Q8_0, 1000, 4096, 32, 64, false, true, true, true);
  check_gemm (HONE_K_Q8_0, 512, 1024, 32, 150, true, false, true);   /* 3 token tiles */
  check_gemm (HONE_K_Q8_0, 1024, 14336, 32, 33, false, true, true);
  /* Q4_K_M's q|k|v: Q4_K q|k, Q6_K v, each into its columns of y */
  check_gemm (HONE_K_Q4_K, 640, 1024, 32, 20, false, false, true, false, HONE_K_Q6_K, 130);
  check_gemm (HONE_K_Q4_K, 384, 4096, 32, 64, true, true, true, false, HONE_K_Q6_K, 128);
  check_gemm (HONE_K_Q4_0, 200, 512, 32, 9, false, true, false, false, HONE_K_Q4_1, 72);
  check_gemm (HONE_K_Q4_0, 28672, 512, 32, 65, false, true, true);   /* 448 tiles: more than a wave of blocks */
  /* bad arguments */
  HoneKMatrix m = q4z_alloc (64, 128, 128);
  void *x = dev_poisoned (64 * 128 * 2), *y = dev_poisoned (64 * 64 * 4);
  const bool refused = hone_k_w4_gemm (&m, 0, x, y, 0, 0, NULL, 0, 0) != 0
                       && hone_k_w4_gemm (&m, 4, (char *) x + 2, y, 0, 0, NULL, 0, 0) != 0
                       && hone_k_w4_gemm (&m, 4, x, NULL, 0, 0, NULL, 0, 0) != 0;
  m.type = HONE_K_F16;   /* not quantized: cuBLASLt takes it as it is */
  const bool refused_type = hone_k_w4_gemm (&m, 4, x, y, 0, 0, NULL, 0, 0) != 0 && !hone_k_w4_gemm_supports (&m);
  m.type = HONE_K_Q4Z;
  HoneKMatrix kq = m;
  kq.type = HONE_K_Q4_K;   /* cols 128: not whole super-blocks */
  const bool refused_kq = !hone_k_w4_gemm_supports (&kq) && hone_k_w4_gemm (&kq, 4, x, y, 0, 0, NULL, 0, 0) != 0;
  HoneKMatrix pp[2] = { m, m }, pm = m;
  pp[1].type = HONE_K_F16;
  pm.type = HONE_K_PARTS;
  pm.rows = 128;
  pm.n_parts = 2;
  pm.parts = pp;
  const bool refused_parts = !hone_k_w4_gemm_supports (&pm);   /* an F16 part */
  pp[1].type = HONE_K_Q4Z;
  pm.rows = 127;
  const bool refused_rows = !hone_k_w4_gemm_supports (&pm);    /* parts' rows ≠ rows */
  pm.rows = 128;
  const bool takes_parts = hone_k_w4_gemm_supports (&pm);
  check (refused && refused_type && refused_kq && refused_parts && refused_rows && takes_parts
         && guard_intact (y, 64 * 64 * 4), "w4 gemm refuses n=0, unaligned x, no y, F16, bad Q4_K, bad parts", 0, 0);
  matrix_free (&m);
  cudaFree (x); cudaFree (y);
}

/* Bad arguments are refused with an error, never run. */
static void
check_refusals (void)
{
  HostQ4Z h = q4z_make (4, 128, 64, 0.02f);
  uint8_t *src = dev_upload (h.bytes);
  HoneKMatrix m = q4z_alloc (4, 128, 64);
  int bad = 0;
  HoneKMatrix m48 = m;
  m48.group = 48;
  bad += hone_k_repack (HONE_K_Q4Z, src, 4, 128, &m48, 0, 1, 0) == 0;          /* group 48 */
  bad += hone_k_repack (HONE_K_Q4Z, src, 4, 128, &m, 2, 1, 0) == 0;            /* rows past the end */
  bad += hone_k_matrix_bytes_g (HONE_K_Q4Z, 4, 96, 64, NULL, NULL) != 0;        /* cols % group */
  float *x = (float *) dev_poisoned (4096), *y = (float *) dev_poisoned (4096);
  HoneKGemvOp op;
  memset (&op, 0, sizeof op);
  op.w = &m;
  op.x = x;
  op.y = y;
  op.n_tok = 9;
  op.xh = &g_xh;
  bad += hone_k_gemv_ex (&op, 0) == 0;                                          /* too many tokens */
  op.n_tok = 1;
  op.epilogue = HONE_K_EPI_ROPE_KV;
  bad += hone_k_gemv_ex (&op, 0) == 0;                                          /* no rope arguments */
  op.epilogue = HONE_K_EPI_ADD;
  bad += hone_k_gemv_ex (&op, 0) == 0;                                          /* ADD without res */
  op.epilogue = HONE_K_EPI_STORE;
  op.x = NULL;
  bad += hone_k_gemv_ex (&op, 0) == 0;                                          /* no f32 input */
  CK (cudaDeviceSynchronize ());
  check (bad == 0 && cudaGetLastError () == cudaSuccess, "q4z refusals (group 48, rows, cols%g, tok 9, rope, add, x)",
         bad, 0);
  cudaFree (src); cudaFree (x); cudaFree (y);
  matrix_free (&m);
}

/* ---- tiny model: Q4Z path vs the same weights as F16 -------------------------------- */

struct Tiny {
  HoneKModel m;
  std::vector<HoneKLayer> layers;
  std::vector<void *> frees;
};

static void
tiny_build (Tiny &t, const std::vector<HoneKMatrix> &q4z, bool as_f16, const HoneKConfig &cfg, float *norms,
            HoneKMatrix embd)
{
  memset (&t.m, 0, sizeof t.m);
  t.m.cfg = cfg;
  t.layers.resize (cfg.n_layers);
  for (int l = 0; l < cfg.n_layers; l++)
    {
      HoneKMatrix w[4];
      for (int i = 0; i < 4; i++)
        {
          w[i] = q4z[l * 4 + i];
          if (as_f16)
            {
              HoneKMatrix f;
              memset (&f, 0, sizeof f);
              f.type = HONE_K_F16;
              f.rows = w[i].rows;
              f.cols = w[i].cols;
              CK (cudaMalloc (&f.q, (size_t) f.rows * f.cols * 2));
              CK (hone_k_dequant (&w[i], f.q, 1, 0));
              t.frees.push_back (f.q);
              w[i] = f;
            }
        }
      HoneKLayer &y = t.layers[l];
      memset (&y, 0, sizeof y);
      y.attn_norm = norms;
      y.ffn_norm = norms + cfg.hidden;
      y.wqkv = w[0];
      y.wo = w[1];
      y.wgu = w[2];
      y.wdown = w[3];
    }
  t.m.layers = t.layers.data ();
  t.m.embd = embd;
  t.m.lm_head = embd;
  t.m.out_norm = norms;
  CK (cudaDeviceSynchronize ());
}

static void
check_tiny_model (int g)
{
  HoneKConfig cfg;
  memset (&cfg, 0, sizeof cfg);
  cfg.n_layers = 2; cfg.hidden = 256; cfg.n_heads = 4; cfg.n_kv_heads = 2; cfg.head_dim = 64; cfg.ffn = 384;
  cfg.vocab = 1000; cfg.rms_eps = 1e-5f;
  std::vector<float> inv = make_inv_freq (64, 10000.0);
  cfg.rope_inv_freq = dev_upload (inv);
  std::vector<float> nv (2 * cfg.hidden);
  for (auto &v : nv) v = 1.f + 0.2f * rng_normal ();
  float *norms = dev_upload (nv);
  std::vector<HoneKMatrix> q4z;
  const int qkv = (cfg.n_heads + 2 * cfg.n_kv_heads) * cfg.head_dim;
  for (int l = 0; l < cfg.n_layers; l++)
    {
      const int shapes[4][2] = { { qkv, cfg.hidden }, { cfg.hidden, cfg.n_heads * cfg.head_dim },
                                 { 2 * cfg.ffn, cfg.hidden }, { cfg.hidden, cfg.ffn } };
      for (int i = 0; i < 4; i++)
        {
          HostQ4Z h = q4z_make (shapes[i][0], shapes[i][1], g, 0.03f);
          HoneKMatrix m = q4z_alloc (shapes[i][0], shapes[i][1], g);
          q4z_upload (m, h, 0, 1);
          q4z.push_back (m);
        }
    }
  std::vector<uint16_t> e ((size_t) cfg.vocab * cfg.hidden);
  for (auto &v : e) v = f2h (rng_normal ());
  HoneKMatrix embd;
  memset (&embd, 0, sizeof embd);
  embd.type = HONE_K_F16;
  embd.rows = cfg.vocab;
  embd.cols = cfg.hidden;
  embd.q = dev_upload (e);

  Tiny a, b;
  tiny_build (a, q4z, false, cfg, norms, embd);
  tiny_build (b, q4z, true, cfg, norms, embd);
  const int n_pre = 20, n_dec = 6, max_ctx = 64;
  std::vector<int32_t> toks (n_pre + n_dec);
  for (auto &t : toks) t = (int32_t) (rng_u64 () % cfg.vocab);
  std::vector<float> logits[2];
  for (int which = 0; which < 2; which++)
    {
      Tiny &t = which ? b : a;
      std::vector<void *> kp (cfg.n_layers), vp (cfg.n_layers);
      const int pages = max_ctx / HONE_K_KV_BLOCK;
      for (int l = 0; l < cfg.n_layers; l++)
        {
          kp[l] = dev_poisoned ((size_t) pages * cfg.n_kv_heads * HONE_K_KV_BLOCK * 64 * 2);
          vp[l] = dev_poisoned ((size_t) pages * cfg.n_kv_heads * HONE_K_KV_BLOCK * 64 * 2);
        }
      std::vector<int32_t> tab (pages);
      for (int i = 0; i < pages; i++) tab[i] = i;
      HoneKKv kv = { kp.data (), vp.data (), dev_upload (tab), pages };
      HoneKState st;
      CK (hone_k_state_alloc (&st, &t.m, n_pre, n_pre));
      /* prefill (GEMM path), all logits, then one-token decode steps (GEMV path) */
      CK (cudaMemcpy (st.tokens, toks.data (), 4 * n_pre, cudaMemcpyHostToDevice));
      const int zero = 0;
      CK (cudaMemcpy (st.pos, &zero, 4, cudaMemcpyHostToDevice));
      CK (hone_k_forward (&t.m, &kv, &st, n_pre, 0, n_pre, 0, 0.f, 0, 0));
      std::vector<float> l0 = dev_download<float> (st.logits, (size_t) n_pre * cfg.vocab);
      logits[which].insert (logits[which].end (), l0.begin (), l0.end ());
      for (int i = 0; i < n_dec; i++)
        {
          CK (cudaMemcpy (st.tokens, &toks[n_pre + i], 4, cudaMemcpyHostToDevice));
          CK (hone_k_forward (&t.m, &kv, &st, 1, n_pre + i, 1, 0, 0.f, 0, 0));
          std::vector<float> l1 = dev_download<float> (st.logits, cfg.vocab);
          logits[which].insert (logits[which].end (), l1.begin (), l1.end ());
        }
      hone_k_state_free (&st);
      for (int l = 0; l < cfg.n_layers; l++) { cudaFree (kp[l]); cudaFree (vp[l]); }
      cudaFree (kv.block_table);
    }
  /* prefill: identical f16 weights → near-identical; decode: HFMA2 GEMV vs the F16 GEMV */
  for (int part = 0; part < 2; part++)
    {
      const size_t o = part ? (size_t) n_pre * cfg.vocab : 0, n = part ? (size_t) n_dec * cfg.vocab : (size_t) n_pre * cfg.vocab;
      std::vector<double> ref (logits[1].begin () + o, logits[1].begin () + o + n);
      bool fin;
      const double e = rel_err (logits[0].data () + o, ref.data (), n, &fin);
      int agree = 0;
      const int rows = (int) (n / cfg.vocab);
      for (int r = 0; r < rows; r++)
        {
          const float *p = logits[0].data () + o + (size_t) r * cfg.vocab, *q = logits[1].data () + o + (size_t) r * cfg.vocab;
          agree += std::max_element (p, p + cfg.vocab) - p == std::max_element (q, q + cfg.vocab) - q;
        }
      char what[160];
      const double bound = part ? 1e-2 : 2e-3;
      snprintf (what, sizeof what, "tiny model g%d %s: Q4Z vs F16 weights, top-1 %d/%d", g,
                part ? "decode (GEMV)" : n_pre <= hone_k_w4_gemm_max () ? "prefill (fused GEMM)"
                : "prefill (dequant+GEMM)", agree, rows);
      check (fin && e < bound && agree >= rows - 1, what, e, bound);
    }
  for (auto &m : q4z) matrix_free (&m);
  for (void *p : a.frees) cudaFree (p);
  for (void *p : b.frees) cudaFree (p);
  cudaFree (embd.q); cudaFree (norms); cudaFree ((void *) cfg.rope_inv_freq);
}

/* ---- benchmarks ---------------------------------------------------------------------- */

static void
fill_matrix (HoneKMatrix &m, uint64_t seed)
{
  size_t qb, sb;
  hone_k_matrix_bytes_g (m.type, m.rows, m.cols, m.group, &qb, &sb);
  fill_random<<<1024, 256>>> ((uint8_t *) m.q, qb, seed, m.type == HONE_K_BF16 ? 1 : m.type == HONE_K_F16 ? 3 : 0);
  if (m.type == HONE_K_Q4Z)
    {
      const size_t ns = (size_t) m.rows * (m.cols / m.group) * 2;
      fill_random<<<1024, 256>>> ((uint8_t *) m.s, ns, seed + 1, 2);
      fill_random<<<1024, 256>>> ((uint8_t *) m.s + ns, sb - ns, seed + 2, 4);
    }
  else if (sb)
    fill_random<<<1024, 256>>> ((uint8_t *) m.s, sb, seed + 1, 2);
  CK (cudaGetLastError ());
}

static HoneKMatrix
matrix_alloc (int type, int rows, int cols, int group)
{
  HoneKMatrix m;
  memset (&m, 0, sizeof m);
  m.type = type;
  m.rows = rows;
  m.cols = cols;
  m.group = group;
  size_t qb, sb;
  hone_k_matrix_bytes_g (type, rows, cols, group, &qb, &sb);
  CK (cudaMalloc (&m.q, qb + 16));
  if (sb)
    CK (cudaMalloc (&m.s, sb + 16));
  return m;
}

struct GemvBench {
  std::vector<HoneKMatrix> ms;
  int cur;
  float *x, *y, *res, *g;
  HoneKActQ8 xq;
  int n_tok, epi;
  bool norm;
};

/* The op of the next matrix in the rotation (input fields left to the caller). */
static HoneKGemvOp
bench_next_op (GemvBench *b)
{
  HoneKGemvOp op;
  memset (&op, 0, sizeof op);
  op.w = &b->ms[b->cur];
  b->cur = (b->cur + 1) % (int) b->ms.size ();
  op.n_tok = b->n_tok;
  op.y = b->y;
  op.res = b->res;
  op.epilogue = b->epi;
  op.eps = 1e-5f;
  return op;
}

static void
gemv_bench_fn (void *p)
{
  GemvBench *b = (GemvBench *) p;
  HoneKGemvOp op = bench_next_op (b);
  const HoneKMatrix *m = op.w;
  if (m->type == HONE_K_Q4Z)
    {
      op.x = b->x;
      op.norm_g = b->norm ? b->g : NULL;
      op.xh = &g_xh;
    }
  else
    op.xq = &b->xq;
  hone_k_gemv_ex (&op, 0);
}

struct DequantBench {
  HoneKMatrix *m;
  void *dst;
};

static void
dequant_bench_fn (void *p)
{
  DequantBench *d = (DequantBench *) p;
  hone_k_dequant (d->m, d->dst, 1, 0);
}

static void
bench_gemvs (void)
{
  struct { const char *name; int rows, cols, epi; bool norm; } shapes[] = {
    { "qkv 6144x4096 +norm", 6144, 4096, HONE_K_EPI_STORE, true },
    { "o 4096x4096 +res", 4096, 4096, HONE_K_EPI_ADD, false },
    { "gate|up 28672x4096 +norm swiglu", 28672, 4096, HONE_K_EPI_SWIGLU, true },
    { "down 4096x14336 +res", 4096, 14336, HONE_K_EPI_ADD, false },
    { "small 256x4096 +norm (fixed cost)", 256, 4096, HONE_K_EPI_STORE, true },
  };
  report ("\n== GEMV at Llama-3-8B shapes (weights rotated over >= 400 MB, median of 5x20) ==\n");
  report ("Q4Z: f32 input (norm fused where marked), W4A16 HFMA2; Q4_0: int8 input already quantized, dp4a\n");
  report ("Q4Z: v1 = the first kernel (config 1), v2 = variant 2 (config 2), mma / mma-sub / mma-scaled = the "
          "tensor-core kernel (configs 8 / 9 / 10; 11 = 8 planned without the task cost, 12 = 8 without paired "
          "scale/zero loads), same call, "
          "same weights\n");
  report ("%-34s %-8s %4s %9s %9s %7s\n", "matrix", "type", "tok", "us", "GB/s", "%read");
  float *x, *y, *res, *g;
  CK (cudaMalloc (&x, 8 * 14336 * 4));
  CK (cudaMalloc (&g, 14336 * 4));
  CK (cudaMalloc (&y, (size_t) 8 * 28672 * 4));
  CK (cudaMalloc (&res, (size_t) 8 * 28672 * 4));
  fill_random<<<256, 256>>> ((uint8_t *) x, 8 * 14336 * 4, 7, 3);
  fill_random<<<256, 256>>> ((uint8_t *) g, 14336 * 4, 8, 3);
  CK (cudaMemset (res, 0, (size_t) 8 * 28672 * 4));
  HoneKActQ8 xq;
  CK (cudaMalloc (&xq.q, 8 * 14336));
  CK (cudaMalloc (&xq.ds, 8 * 14336 / 32 * 8));
  CK (hone_k_quantize (x, 8, 14336, &xq, NULL, 0, 0));
  struct { int type, group; const char *name; } types[] = {
    { HONE_K_Q4Z, 128, "Q4Z-g128" }, { HONE_K_Q4Z, 32, "Q4Z-g32" }, { HONE_K_Q4_0, 0, "Q4_0" } };
  for (auto &ty : types)
    for (auto &sh : shapes)
      {
        GemvBench b;
        const size_t one = hone_k_matrix_bytes_g (ty.type, sh.rows, sh.cols, ty.group, NULL, NULL);
        const int copies = (int) std::max<size_t> (2, (400u << 20) / one + 1);
        for (int i = 0; i < copies; i++)
          {
            HoneKMatrix m = matrix_alloc (ty.type, sh.rows, sh.cols, ty.group);
            fill_matrix (m, 100 + i);
            b.ms.push_back (m);
          }
        b.cur = 0;
        b.x = x; b.y = y; b.res = res; b.g = g; b.xq = xq; b.epi = sh.epi; b.norm = sh.norm;
        for (int n_tok : { 1, 4, 8 })
          {
            if ((ty.group == 32 || sh.rows == 256) && n_tok != 1)
              continue;
            b.n_tok = n_tok;
            const double act = (ty.type == HONE_K_Q4Z ? 4.0 : 1.0 + 8.0 / 32) * sh.cols * n_tok
                               + 4.0 * n_tok * (sh.epi == HONE_K_EPI_SWIGLU ? sh.rows / 2 : sh.rows)
                                     * (sh.epi == HONE_K_EPI_ADD ? 2 : 1);
            double us[8] = { 0, 0, 0, 0, 0, 0, 0, 0 };
            static const int kcfg[8] = { 1, 2, 8, 9, 10, 11, 12, 13 };
            static const char *kname[8] = { " v1", " v2", " mma", " mma-sub", " mma-scaled", " mma old-plan",
                                            " mma unpaired", " rs (pack + register-streamed)" };
            for (int k = 0; k < (ty.type != HONE_K_Q4Z ? 1 : n_tok == 1 ? 8 : 5); k++)
              {
                hone_k_q4z_set_config (kcfg[k]);
                const double ms = bench_ms (0, 20, gemv_bench_fn, &b);
                const double gbs = (one + act) / (ms * 1e-3) / 1e9;
                us[k] = ms * 1e3;
                report ("%-34s %-8s %4d %9.2f %9.0f %6.1f%%  (%.4f B/weight)%s\n", sh.name, ty.name, n_tok, ms * 1e3,
                        gbs, 100 * gbs * 1e9 / READ_CEIL, (double) one / ((double) sh.rows * sh.cols),
                        ty.type != HONE_K_Q4Z ? "" : kname[k]);
              }
            if (ty.type == HONE_K_Q4Z)
              report ("%-34s %-8s %4d   v1 %.2f us -> v2 %.2f us: %.2fx\n", sh.name, ty.name, n_tok, us[0], us[1],
                      us[0] / us[1]);
            if (ty.type == HONE_K_Q4Z)
              report ("%-34s %-8s %4d   v2 %.2f us -> mma %.2f (%.2fx, %.0f GB/s), mma-sub %.2f (%.2fx), mma-scaled "
                      "%.2f (%.2fx); old-plan %.2f, unpaired %.2f (bytes at 4.52 TB/s: %.2f us)\n", sh.name, ty.name,
                      n_tok, us[1], us[2], us[1] / us[2], (one + act) / (us[2] * 1e-6) / 1e9, us[3], us[1] / us[3],
                      us[4], us[1] / us[4], us[5], us[6], (one + act) / READ_CEIL * 1e6);
            if (ty.type == HONE_K_Q4Z && n_tok == 1)
              report ("%-34s %-8s %4d   v2 %.2f us -> rs %.2f us (%.2fx, %.0f GB/s, %.1f%% of 4.52 TB/s)\n", sh.name,
                      ty.name, n_tok, us[1], us[7], us[1] / us[7], (one + act) / (us[7] * 1e-6) / 1e9,
                      100 * (one + act) / (us[7] * 1e-6) / READ_CEIL);
          }
        hone_k_q4z_set_config (0);
        for (auto &m : b.ms) matrix_free (&m);
      }
  /* dequantization to f16 (prefill path) */
  {
    HoneKMatrix m = matrix_alloc (HONE_K_Q4Z, 28672, 4096, 128);
    fill_matrix (m, 77);
    DequantBench d = { &m, NULL };
    CK (cudaMalloc (&d.dst, (size_t) 28672 * 4096 * 2));
    const double ms = bench_ms (0, 10, dequant_bench_fn, &d);
    const double bytes = hone_k_matrix_bytes_g (HONE_K_Q4Z, 28672, 4096, 128, NULL, NULL) + 28672.0 * 4096 * 2;
    report ("dequant Q4Z-g128 28672x4096 -> f16: %.1f us, %.0f GB/s (read+write), %.1f%% of 4.52 TB/s\n", ms * 1e3,
            bytes / (ms * 1e-3) / 1e9, 100 * bytes / (ms * 1e-3) / READ_CEIL);
    cudaFree (d.dst);
    matrix_free (&m);
  }
  cudaFree (x); cudaFree (y); cudaFree (res); cudaFree (g); cudaFree (xq.q); cudaFree (xq.ds);
}

/* A random-weight Llama-3-8B: AWQ g128 (embeddings and lm_head f16) or BF16. */
struct BigModel {
  HoneKModel m;
  std::vector<HoneKLayer> layers;
  std::vector<void *> kp, vp;
  int32_t *table;
  size_t weight_bytes;   /* bytes a decode step reads: every matrix once, one embedding row */
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
    HoneKMatrix m = matrix_alloc (t, rows, cols, 128);
    fill_matrix (m, seed++);
    b.weight_bytes += hone_k_matrix_bytes_g (t, rows, cols, 128, NULL, NULL);
    b.frees.push_back (m.q);
    if (m.s) b.frees.push_back (m.s);
    return m;
  };
  const int head_t = type == HONE_K_Q4Z ? HONE_K_F16 : type;
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
  b.m.embd = mk (V, D, head_t);
  b.m.out_norm = norm;
  b.m.lm_head = mk (V, D, head_t);
  b.weight_bytes -= hone_k_matrix_bytes (head_t, V, D, NULL, NULL);
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
  b.frees.push_back (b.table);
  b.frees.push_back (norm);
  b.frees.push_back ((void *) c.rope_inv_freq);
  CK (cudaDeviceSynchronize ());
}

static void
big_free (BigModel &b)
{
  for (void *p : b.frees) cudaFree (p);
  b.frees.clear ();
}

static double
time_prefill (BigModel &b, HoneKKv &kv, int n, cudaStream_t s)
{
  HoneKState st;
  CK (hone_k_state_alloc (&st, &b.m, n, HONE_K_MAX_DECODE));
  std::vector<int32_t> toks (n);
  for (auto &t : toks) t = (int) (rng_u64 () % 128256);
  CK (cudaMemcpy (st.tokens, toks.data (), 4 * n, cudaMemcpyHostToDevice));
  cudaEvent_t e0, e1;
  CK (cudaEventCreate (&e0));
  CK (cudaEventCreate (&e1));
  std::vector<float> ts;
  for (int it = 0; it < 4; it++)
    {
      const int zero = 0;
      CK (cudaMemcpyAsync (st.pos, &zero, 4, cudaMemcpyHostToDevice, s));
      CK (cudaEventRecord (e0, s));
      CK (hone_k_forward (&b.m, &kv, &st, n, 0, 1, 1, 0.f, 0, s));
      CK (cudaEventRecord (e1, s));
      CK (cudaEventSynchronize (e1));
      float ms;
      CK (cudaEventElapsedTime (&ms, e0, e1));
      if (it > 0) ts.push_back (ms);
    }
  std::sort (ts.begin (), ts.end ());
  cudaEventDestroy (e0);
  cudaEventDestroy (e1);
  hone_k_state_free (&st);
  return ts[1];
}

/* prompt lengths of the prefill rows */
#define W4_PREFILL_NS 9
static const int w4_prefill_ns[W4_PREFILL_NS] = { 16, 32, 64, 96, 128, 192, 256, 512, 2048 };
static bool prefill_bench = false;   /* --prefill-bench: the prefill benchmarks only (A/B of the fused GEMM) */

/* The fused prefill GEMM against dequantization + cuBLASLt, per matrix of layer 0 at
 * 16..512 tokens (hone_k_gemm, the forward pass's entry, with the threshold forced
 * each way); inputs random f16 in ±1 (tensor-core power depends on the data). */
struct GemmBench {
  HoneKState *st;
  const HoneKMatrix *w;
  int n, y_type, acc;
  void *x, *y;
};

static void
gemm_bench_fn (void *p)
{
  GemmBench *b = (GemmBench *) p;
  CK (hone_k_gemm (b->st, b->w, b->n, b->x, b->y, b->y_type, b->acc, 0));
}

static void
bench_prefill_gemms (BigModel &b)
{
  report ("\n== W4A16 prefill GEMMs: fused (hone_k_w4_gemm) vs dequantize + cuBLASLt, layer 0 ==\n");
  const int nmax = 512, nn = 6;
  HoneKState st;
  CK (hone_k_state_alloc (&st, &b.m, nmax, HONE_K_MAX_DECODE));
  void *x, *y;
  const size_t xb = (size_t) nmax * 14336 * 2, yb = (size_t) nmax * 28672 * 4;
  CK (cudaMalloc (&x, xb));
  CK (cudaMalloc (&y, yb));
  fill_random<<<1024, 256>>> ((uint8_t *) x, xb, 4242, 3);
  CK (cudaMemset (y, 0, yb));
  const HoneKLayer &L = b.layers[0];
  const struct { const HoneKMatrix *w; const char *name; int y_type, acc; } mats[] = {
    { &L.wqkv, "qkv", HONE_K_F32, 0 }, { &L.wo, "o", HONE_K_F32, 1 },
    { &L.wgu, "gate|up", HONE_K_F16, 0 }, { &L.wdown, "down", HONE_K_F32, 1 } };
  double tot[2][nn] = {};
  for (const auto &mt : mats)
    for (int i = 0; i < nn; i++)
      {
        const int n = 16 << i;
        double us[2];
        for (int fused = 0; fused < 2; fused++)
          {
            hone_k_w4_gemm_set_max (fused ? 1 << 30 : 0);
            GemmBench gb = { &st, mt.w, n, mt.y_type, mt.acc, x, y };
            us[fused] = bench_ms (0, 20, gemm_bench_fn, &gb) * 1e3;
            tot[fused][i] += us[fused];
          }
        const double wbytes = (double) hone_k_matrix_bytes_g (HONE_K_Q4Z, mt.w->rows, mt.w->cols, 128, NULL, NULL);
        const double flop = 2.0 * mt.w->rows * mt.w->cols * n;
        report ("prefill gemm %-7s %5dx%-5d n %3d: dequant+cuBLASLt %8.1f us, fused %8.1f us (%.2fx); fused %5.0f GB/s "
                "of weights (%4.1f%% of 4.52 TB/s), %4.0f TFLOP/s\n", mt.name, mt.w->rows, mt.w->cols, n, us[0], us[1],
                us[0] / us[1], wbytes / (us[1] * 1e-6) / 1e9, 100 * wbytes / (us[1] * 1e-6) / READ_CEIL,
                flop / (us[1] * 1e-6) / 1e12);
      }
  for (int i = 0; i < nn; i++)
    report ("prefill gemms of one layer, n %3d: dequant+cuBLASLt %8.1f us, fused %8.1f us (%.2fx)\n", 16 << i,
            tot[0][i], tot[1][i], tot[0][i] / tot[1][i]);
  hone_k_w4_gemm_set_max (-1);
  cudaFree (x);
  cudaFree (y);
  hone_k_state_free (&st);
}

static void
bench_model (int type, std::vector<std::vector<double>> &prefill_ms)
{
  const bool step_only = getenv ("HONE_W4_STEP_ONLY") != NULL;
  const int max_ctx = 4096 + 2048 + 256;
  const char *name = type == HONE_K_Q4Z ? "AWQ-g128" : "BF16";
  BigModel b;
  big_build (b, type, max_ctx);
  HoneKKv kv = { b.kp.data (), b.vp.data (), b.table, (max_ctx + HONE_K_KV_BLOCK - 1) / HONE_K_KV_BLOCK };
  cudaStream_t s;
  CK (cudaStreamCreateWithFlags (&s, cudaStreamNonBlocking));
  HoneKState st;
  CK (hone_k_state_alloc (&st, &b.m, HONE_K_MAX_DECODE, HONE_K_MAX_DECODE));
  const int one_tok = 1;
  CK (cudaMemcpy (st.tokens, &one_tok, 4, cudaMemcpyHostToDevice));
  /* variants (one token unless said): Q4Z GEMV v1 (config 1), v2 (config 2), rs (13), the tensor-core kernel in its
   * three modes (configs 8, 9, 10) and A/B variants (11 old plan, 12 unpaired loads), mma and v2 with PDL
   * off, then 8 tokens a step: automatic, mma, v2 and mma-sub (the last two: the summaries below rely on
   * that order) */
  /* bound 1: the step captured as the engine does at short contexts (HoneKState.ctx_bound =
   * hone_k_attn_short_ctx (): the clustered attention kernel), timed at 128, 512 and 1k keys;
   * bound 2: as it does up to 256 keys (hone_k_attn_tiny_ctx (): the tiny kernel), timed at 128 */
  static const struct { int cfg, pdl, n_tok; const char *name; int pick; int bound; } vars[] = {
    { 1, -1, 1, " v1" }, { 2, -1, 1, " v2" }, { 13, -1, 1, " rs" }, { 13, -1, 1, " rs s2-shapes", 9 },
    { 13, -1, 1, " rs short-ctx", 0, 1 }, { 13, -1, 1, " rs tiny-ctx", 0, 2 },
    { 8, -1, 1, " mma" }, { 9, -1, 1, " mma-sub" },
    { 10, -1, 1, " mma-scaled" }, { 11, -1, 1, " mma old-plan" }, { 12, -1, 1, " mma unpaired" },
    { 8, 0, 1, " mma pdl-off" }, { 2, 0, 1, " v2 pdl-off" }, { 0, -1, 8, " auto (mma-sub)" },
    { 8, -1, 8, " mma" }, { 2, -1, 8, " v2" }, { 9, -1, 8, " mma-sub" } };
  const int nvars = (int) (sizeof vars / sizeof vars[0]);
  std::vector<std::vector<double>> step_ms (nvars, std::vector<double> (2, 0.0));   /* [variant][ctx 128, 4k] */
  for (int variant = 0; variant < nvars && !prefill_bench; variant++)
    {
      const int n_tok = vars[variant].n_tok;
      if (type != HONE_K_Q4Z && variant != 0)
        continue;
      if (step_only && variant != 2 && !vars[variant].bound)   /* HONE_W4_STEP_ONLY: rs and its bounded row */
        continue;
      hone_k_q4z_set_config (vars[variant].cfg);
      hone_k_set_pdl (vars[variant].pdl);
      hone_k_gemv_set_pick (vars[variant].pick ? vars[variant].pick : -1);   /* 9: session 2's launch shapes */
      const char *vname = type != HONE_K_Q4Z ? "" : vars[variant].name;
      /* bound 2: the tier below, as the engine captures a step up to 256 keys (the tiny attention kernel) */
      const int bound = vars[variant].bound == 2 ? hone_k_attn_tiny_ctx () : vars[variant].bound ? hone_k_attn_short_ctx () : 0;
      if (vars[variant].bound && bound <= 0)
        continue;
      cudaGraph_t g;
      cudaGraphExec_t ge;
      st.ctx_bound = bound;
      trace_prepare ();
      CK (cudaStreamBeginCapture (s, cudaStreamCaptureModeThreadLocal));
      const int r = hone_k_forward (&b.m, &kv, &st, n_tok, 0, 1, 1, 0.f, 0, s);
      CK (cudaStreamEndCapture (s, &g));
      st.ctx_bound = 0;
      CK (r);
      CK (cudaGraphInstantiate (&ge, g, 0));
      if (variant == 2)   /* rs: the default at one token */
        {
          profile_step_maybe (type == HONE_K_Q4Z ? "AWQ" : "BF16", ge, st.pos, s, 128);
          trace_step_maybe (type == HONE_K_Q4Z ? "AWQ" : "BF16", ge, st.pos, s, 128);
        }
      if (vars[variant].bound)   /* ":bound" the 2k tier's graph, ":tiny" the 256-key one's */
        {
          const char *tag = vars[variant].bound == 2 ? "AWQ:tiny" : "AWQ:bound";
          profile_step_maybe (tag, ge, st.pos, s, 128);
          trace_step_maybe (tag, ge, st.pos, s, 128);
        }
      for (int ctx : { 128, 512, 1024, 4096 })
        {
          /* unbounded graphs at 128 and 4k keys; bounded ones (the engine's below 2k) at 128, 512, 1k */
          if (bound ? ctx > bound || ctx > 1024 : ctx == 512 || ctx == 1024)
            continue;
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
          const double ms = ts[1];
          if (ctx == 128 || ctx == 4096)
            step_ms[variant][ctx == 128 ? 0 : 1] = ms;
          const double kvbytes = 2.0 * 32 * (ctx + reps / 2 * n_tok) * 8 * 128 * 2;
          const double bytes = b.weight_bytes + kvbytes;
          const double gbs = bytes / (ms * 1e-3) / 1e9;
          report ("decode step %-8s tok %d ctx %5d%-15s: %7.3f ms  %7.1f tok/s  %6.0f GB/s  %5.1f%% of 4.52 TB/s "
                  "(weights %.3f GB, KV %.2f GB)\n", name, n_tok, ctx, vname, ms, n_tok * 1e3 / ms, gbs,
                  100 * gbs * 1e9 / READ_CEIL, b.weight_bytes / 1e9, kvbytes / 1e9);
          cudaEventDestroy (e0);
          cudaEventDestroy (e1);
        }
      int32_t tok;
      CK (cudaMemcpy (&tok, st.sampled, 4, cudaMemcpyDeviceToHost));
      /* the last step's logits, hashed: equal bits across runs and across variants that must
       * give the same arithmetic (an A/B of two builds of exact changes) */
      const std::vector<uint32_t> lg = dev_download<uint32_t> (st.logits, (size_t) b.m.cfg.vocab);
      uint64_t hsh = 1469598103934665603ull;
      for (uint32_t v : lg)
        hsh = (hsh ^ v) * 1099511628211ull;
      report ("  (last sampled id %d, logits fnv1a %016llx)\n", tok, (unsigned long long) hsh);
      cudaGraphExecDestroy (ge);
      cudaGraphDestroy (g);
    }
  if (type == HONE_K_Q4Z && !step_only && !prefill_bench)
    for (int c = 0; c < 2; c++)
      report ("decode step AWQ-g128 tok 1 ctx %s: v1 %.3f ms (%.1f tok/s) -> v2 %.3f ms (%.1f tok/s, %.1f%% of "
              "4.52 TB/s): %.2fx\n", c ? "4096" : " 128", step_ms[0][c], 1e3 / step_ms[0][c], step_ms[1][c],
              1e3 / step_ms[1][c], 100 * (b.weight_bytes + 2.0 * 32 * ((c ? 4096 : 128) + 25) * 8 * 128 * 2)
              / (step_ms[1][c] * 1e-3) / READ_CEIL, step_ms[0][c] / step_ms[1][c]);
  if (type == HONE_K_Q4Z && !step_only && !prefill_bench)
    for (int c = 0; c < 2; c++)
      report ("decode step AWQ-g128 tok 8 ctx %s: v2 %.3f ms (%.1f tok/s) -> mma-sub %.3f ms (%.1f tok/s): %.2fx\n",
              c ? "4096" : " 128", step_ms[nvars - 2][c], 8e3 / step_ms[nvars - 2][c], step_ms[nvars - 1][c],
              8e3 / step_ms[nvars - 1][c], step_ms[nvars - 2][c] / step_ms[nvars - 1][c]);
  if (type == HONE_K_Q4Z && !step_only && !prefill_bench)
    for (int v = 2; v < nvars - 4; v++)
      for (int c = 0; c < 2; c++)
        if (step_ms[v][c] > 0)
        report ("decode step AWQ-g128 tok 1 ctx %s: v2 %.3f ms (%.1f tok/s) -> %-15s %.3f ms (%.1f tok/s, %.1f%% of "
                "4.52 TB/s): %.2fx\n", c ? "4096" : " 128", step_ms[1][c], 1e3 / step_ms[1][c], vars[v].name,
                step_ms[v][c], 1e3 / step_ms[v][c], 100 * (b.weight_bytes + 2.0 * 32 * ((c ? 4096 : 128) + 25) * 8
                * 128 * 2) / (step_ms[v][c] * 1e-3) / READ_CEIL, step_ms[1][c] / step_ms[v][c]);
  hone_k_q4z_set_config (0);
  hone_k_set_pdl (-1);
  hone_k_gemv_set_pick (-1);
  hone_k_state_free (&st);
  if (type == HONE_K_Q4Z && !step_only)
    bench_prefill_gemms (b);
  const double params = 32.0 * (6144.0 * 4096 + 4096.0 * 4096 + 28672.0 * 4096 + 4096.0 * 14336);
  /* AWQ: the default (fused GEMM up to hone_k_w4_gemm_max tokens), dequantize + cuBLASLt, fused always */
  static const char *modes[] = { "", " dequant", " fused" };
  prefill_ms.assign (type == HONE_K_Q4Z ? 3 : 1, std::vector<double> ());
  for (size_t mode = 0; mode < prefill_ms.size (); mode++)
    for (int i = 0; i < (step_only ? 0 : W4_PREFILL_NS); i++)
      {
        const int n = w4_prefill_ns[i];
        hone_k_w4_gemm_set_max (mode == 0 ? -1 : mode == 1 ? 0 : 1 << 30);
        const double ms = time_prefill (b, kv, n, s);
        prefill_ms[mode].push_back (ms);
        const double flop = 2.0 * params * n + 2.0 * 128256 * 4096 + 32.0 * 32 * 2 * 2.0 * n * (n + 1) / 2 * 128;
        report ("prefill %-8s%-8s %5d tok: %8.2f ms  %8.0f tok/s  %5.1f%% of 781 TFLOP/s\n", name, modes[mode], n, ms,
                n * 1e3 / ms, 100 * flop / (ms * 1e-3) / GEMM_CEIL);
      }
  hone_k_w4_gemm_set_max (-1);
  cudaStreamDestroy (s);
  big_free (b);
}

/* hone_k_pack_h16 against a host f64 reference: each block of 32 decoded from
 * its hi/lo bytes (the byte order of hone-kernels.h) must be the 16-bit fixed
 * point of the (RMSNorm'ed) input — v = rint(x·32767/absmax) within one step
 * at a rounding tie — with d = absmax/32767 and Σv exact; a block of zeros
 * all zero; padding slots past cols untouched (poisoned). */
static void
check_pack_h16 (int n_tok, int cols, bool norm)
{
  std::vector<float> x ((size_t) n_tok * cols), g (cols);
  for (auto &v : x) v = rng_normal ();
  for (auto &v : g) v = 0.5f + 0.5f * (float) fabs (rng_normal ());
  x[5] = 300.f;                                        /* an outlier */
  for (int j = 64; j < 96 && j < cols; j++) x[j] = 0.f;   /* a block of zeros */
  float *dx = dev_upload (x), *dg = dev_upload (g);
  const size_t nh = (size_t) n_tok * HONE_K_H16_ROW (cols);
  HoneKActH16 h = { (uint16_t *) dev_poisoned (nh * 2), (float *) dev_poisoned (HONE_K_H16_DS (cols) * n_tok * 4) };
  CK (hone_k_pack_h16 (dx, norm ? dg : NULL, n_tok, cols, 1e-5f, &h, 0));
  CK (cudaDeviceSynchronize ());
  const std::vector<uint8_t> hb = dev_download<uint8_t> (h.h, nh * 2);
  const std::vector<float> ds = dev_download<float> (h.d, HONE_K_H16_DS (cols) * n_tok);
  int bad = 0, ties = 0;
  double worst = 0;
  for (int t = 0; t < n_tok; t++)
    {
      double ss = 0;
      for (int j = 0; j < cols; j++) ss += (double) x[(size_t) t * cols + j] * x[(size_t) t * cols + j];
      const double sc = norm ? 1.0 / sqrt (ss / cols + 1e-5) : 1.0;
      for (int c = 0; c < cols / 32; c++)
        {
          double ref[32], amax = 0;
          for (int k = 0; k < 32; k++)
            {
              const int j = c * 32 + k;
              ref[k] = x[(size_t) t * cols + j] * sc * (norm ? g[j] : 1.0);
              amax = fmax (amax, fabs (ref[k]));
            }
          const float d = ds[((size_t) t * (cols / 32) + c) * 2];
          int32_t sum_bits;
          memcpy (&sum_bits, &ds[((size_t) t * (cols / 32) + c) * 2 + 1], 4);
          if (fabs (d - amax / 32767.0) > 1e-6 * amax / 32767.0 + 1e-30)
            bad++;
          int sum = 0;
          for (int k = 0; k < 32; k++)
            {
              /* the piece's first slot, as hone-kernels.h lays it out */
              const size_t slot = (size_t) t * HONE_K_H16_ROW (cols) + ((size_t) ((c / 32) * 4 + k / 8) * 32 + c % 32) * 8;
              const int b = 2 * (k & 7 & 3) + ((k & 7) >> 2);
              const int v = 256 * (int) (int8_t) hb[slot * 2 + b] + (int) hb[slot * 2 + b + 8];
              sum += v;
              const double want = amax > 0 ? ref[k] * 32767.0 / amax : 0.0;
              const double e = fabs (v - want);
              worst = fmax (worst, e);
              if (e > 0.5 + 1e-3)
                {
                  if (e <= 1.0 + 1e-3 && fabs (fabs (want - floor (want)) - 0.5) < 1e-2)
                    ties++;   /* f32 vs f64 on the two sides of a tie */
                  else
                    bad++;
                }
            }
          if (sum != sum_bits)
            bad++;
        }
      /* the padding of a row (cols not a multiple of 1024) is not written */
      for (size_t i = (size_t) t * HONE_K_H16_ROW (cols) * 2; i < (size_t) (t + 1) * HONE_K_H16_ROW (cols) * 2; i++)
        {
          const size_t slot = i / 2 - (size_t) t * HONE_K_H16_ROW (cols);
          const int c = (int) (((slot >> 3) & 31) + (slot >> 10) * 32);
          if (c >= cols / 32 && hb[i] != 0xff)
            bad++;
        }
    }
  char what[96];
  snprintf (what, sizeof what, "pack_h16 %d x %d%s: 16-bit fixed point, bytes and (d, sum)", n_tok, cols, norm ? " +norm" : "");
  check (bad == 0, what, worst, 0.5);
  if (ties)
    report ("  (%d values one step off at a rounding tie)\n", ties);
  cudaFree (dx); cudaFree (dg); cudaFree (h.h); cudaFree (h.d);
}

struct HoneKPrefetch;   /* hone-k-common.cuh (internal); passed as NULL here */
extern "C" int hone_k_gemv_q4z_rs (const HoneKGemvOp *op, const HoneKPrefetch *pf, cudaStream_t stream);

/* rs alone on an input packed beforehand (what the step runs when attention or
 * an earlier launch wrote the packed input) */
static void
rs_ready_fn (void *p)
{
  GemvBench *b = (GemvBench *) p;
  HoneKGemvOp op = bench_next_op (b);   /* b->n_tok is 1 here */
  op.xh = &g_xh;
  CK (hone_k_gemv_q4z_rs (&op, NULL, 0));
}

/* --rs-sweep: the register-streamed W4A16 GEMV (config 13, AWQ g128, one token)
 * at the Llama-3-8B shapes under every launch shape, with its pack launch and on
 * an input packed beforehand; each shape's output checked against the
 * automatic shape's on the same weights. */
static void
bench_rs_shapes (void)
{
  static const struct { const char *name; int rows, cols, epi; bool norm; } shapes[] = {
    { "qkv 6144x4096 +norm", 6144, 4096, HONE_K_EPI_STORE, true },
    { "o 4096x4096 +res", 4096, 4096, HONE_K_EPI_ADD, false },
    { "gate|up 28672x4096 +norm swiglu", 28672, 4096, HONE_K_EPI_SWIGLU, true },
    { "down 4096x14336 +res", 4096, 14336, HONE_K_EPI_ADD, false },
  };
  char shape_name[HONE_K_GEMV_CONFIGS_Q1 + 1][24];
  snprintf (shape_name[0], sizeof shape_name[0], "auto");
  for (int c = 0; c < HONE_K_GEMV_CONFIGS_Q1; c++)
    {
      int r, u, k;
      hone_k_gemv_config_shape (c, &r, &u, &k);
      snprintf (shape_name[c + 1], sizeof shape_name[c + 1], "%d: R%d U%d KS%d", c, r, u, k);
    }
  report ("\n== rs launch shapes (AWQ g128, one token; weights rotated over >= 400 MB; median of 5x20) ==\n");
  report ("%-34s %-14s %10s %10s %8s\n", "matrix", "shape", "pack+rs us", "rs us", "%read");
  float *x, *y, *y0, *res, *g;
  CK (cudaMalloc (&x, 14336 * 4));
  CK (cudaMalloc (&g, 14336 * 4));
  CK (cudaMalloc (&y, (size_t) 28672 * 4));
  CK (cudaMalloc (&y0, (size_t) 28672 * 4));
  CK (cudaMalloc (&res, (size_t) 28672 * 4));
  fill_random<<<256, 256>>> ((uint8_t *) x, 14336 * 4, 7, 3);
  fill_random<<<256, 256>>> ((uint8_t *) g, 14336 * 4, 8, 3);
  CK (cudaMemset (res, 0, (size_t) 28672 * 4));
  set_cfg (13);
  for (auto &sh : shapes)
    {
      GemvBench b;
      const size_t one = hone_k_matrix_bytes_g (HONE_K_Q4Z, sh.rows, sh.cols, 128, NULL, NULL);
      const int copies = (int) std::max<size_t> (2, (400u << 20) / one + 1);
      for (int i = 0; i < copies; i++)
        {
          HoneKMatrix m = matrix_alloc (HONE_K_Q4Z, sh.rows, sh.cols, 128);
          fill_matrix (m, 100 + i);
          b.ms.push_back (m);
        }
      b.x = x; b.y = y; b.res = res; b.g = g; b.epi = sh.epi; b.norm = sh.norm; b.n_tok = 1;
      const int outs = sh.epi == HONE_K_EPI_SWIGLU ? sh.rows / 2 : sh.rows;
      CK (hone_k_pack_h16 (x, sh.norm ? g : NULL, 1, sh.cols, 1e-5f, &g_xh, 0));
      double best = 1e30;
      int best_shape = -1;
      for (int shape = -1; shape < HONE_K_GEMV_CONFIGS_Q1; shape++)
        {
          hone_k_gemv_set_config (shape);
          /* same weights (copy 0), same input: this shape's output against the automatic one's */
          b.cur = 0;
          rs_ready_fn (&b);
          CK (cudaDeviceSynchronize ());
          if (shape < 0)
            CK (cudaMemcpy (y0, y, (size_t) outs * 4, cudaMemcpyDeviceToDevice));
          else
            {
              const std::vector<float> got = dev_download<float> (y, outs), want = dev_download<float> (y0, outs);
              double num = 0, den = 0;
              for (int i = 0; i < outs; i++)
                {
                  num += ((double) got[i] - want[i]) * ((double) got[i] - want[i]);
                  den += (double) want[i] * want[i];
                }
              const double rel = sqrt (num / (den > 0 ? den : 1));
              char what[160];
              snprintf (what, sizeof what, "%s: launch shape %s gives the automatic shape's output", sh.name,
                        shape_name[shape + 1]);
              check (den > 0 && rel < 1e-5 && std::isfinite (rel), what, rel, 1e-5);
            }
          b.cur = 0;
          const double ms_pack = bench_ms (0, 20, gemv_bench_fn, &b);
          CK (hone_k_pack_h16 (x, sh.norm ? g : NULL, 1, sh.cols, 1e-5f, &g_xh, 0));
          const double ms_rs = bench_ms (0, 20, rs_ready_fn, &b);
          const double act = 2.0 * sh.cols + 4.0 * outs * (sh.epi == HONE_K_EPI_ADD ? 2 : 1);
          report ("%-34s %-14s %10.2f %10.2f %7.1f%%\n", sh.name, shape_name[shape + 1], ms_pack * 1e3, ms_rs * 1e3,
                  100 * (one + act) / (ms_rs * 1e-3) / READ_CEIL);
          if (shape >= 0 && ms_rs < best)
            best = ms_rs, best_shape = shape;
        }
      report ("%-34s best forced shape: %s, %.2f us (bytes at 4.52 TB/s: %.2f us)\n", sh.name,
              shape_name[best_shape + 1], best * 1e3, (one + 2.0 * sh.cols) / READ_CEIL * 1e6);
      hone_k_gemv_set_config (-1);
      for (auto &m : b.ms) matrix_free (&m);
    }
  set_cfg (0);
  cudaFree (x); cudaFree (g); cudaFree (y); cudaFree (y0); cudaFree (res);
}

int
main (int argc, char **argv)
{
  bool do_check = true, do_bench = true, do_sweep = false;
  for (int i = 1; i < argc; i++)
    {
      if (!strcmp (argv[i], "--check")) do_bench = false;
      else if (!strcmp (argv[i], "--bench")) do_check = false;
      else if (!strcmp (argv[i], "--staged")) do_bench = false, only_staged = 1;
      else if (!strcmp (argv[i], "--staged-small")) do_bench = false, only_staged = 2;
      else if (!strcmp (argv[i], "--mma")) do_bench = false, only_mma = 1;
      else if (!strcmp (argv[i], "--rs")) do_bench = false, only_rs = 1;
      else if (!strcmp (argv[i], "--rs-sweep")) do_bench = do_check = false, do_sweep = true;
      else if (!strcmp (argv[i], "--gemm")) do_bench = false, only_gemm = 1;
      else if (!strcmp (argv[i], "--prefill-bench")) do_check = false, prefill_bench = true;
      else if (!strcmp (argv[i], "--mma-small")) do_bench = false, only_mma = 2, only_staged = 2;
    }
  const char *out = getenv ("OUT");
  if (out && *out)
    {
      std::string p = std::string (out) + "/w4-results.txt";
      results = fopen (p.c_str (), "w");
    }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties (&prop, 0) != cudaSuccess)
    {
      fprintf (stderr, "no CUDA device\n");
      return 77;
    }
  report ("device: %s, %d SMs, %.0f MB L2, cc %d.%d\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1e6,
          prop.major, prop.minor);
  CK (cudaMalloc (&g_xh.h, 32768 * 2));
  CK (cudaMalloc (&g_xh.d, HONE_K_H16_DS (32768) * 4));
  if (do_check)
    {
      report ("== W4A16 checks ==\n");
      /* every GEMV check with each kernel: 1 the first, 4 the first with 4 loads a lane, 2 variant 2 */
      for (int cfg : { 1, 4, 2, 3, 5, 8, 9, 10, 11, 13 })
      {
      if (only_gemm)
        break;
      if (only_rs ? cfg != 13 : only_mma ? cfg < 8 || cfg > 12 : only_staged && cfg != 3 && cfg != 5)
        continue;
      set_cfg (cfg);
      report ("-- GEMV kernel %s (config %d) --\n", cfg == 13 ? "rs (pack + register-streamed; 1 token, v2/mma for more)"
              : cfg == 8 ? "mma (tensor cores; g128 offset in f32)"
              : cfg == 9 ? "mma-sub (tensor cores; g128 zero point in f16)"
              : cfg == 10 ? "mma-scaled (tensor cores; scale in f16)"
              : cfg == 11 ? "mma, plan without the task cost (tensor cores)"
              : cfg == 3 ? "staged, 256 threads (1 token; v2 for more)"
              : cfg == 5 ? "staged, 512 threads (1 token; v2 for more)" : cfg == 2 ? "v2"
              : cfg == 4 ? "v1, 4 loads a lane" : "v1", cfg);
      check_gemv_one_token ();
      if (only_staged)
        continue;
      for (int g : { 32, 64, 128 })
        {
          check_gemv (262, 256, g, 1, HONE_K_EPI_STORE, false, false);
          check_gemv (263, 384, g == 64 ? 64 : g, 3, HONE_K_EPI_ADD, false, true);     /* odd rows */
          check_gemv (2 * 150, 512, g, 8, HONE_K_EPI_SWIGLU, true, false, false, true);
          check_gemv (4 * 3 * 64, 640, g == 128 ? 128 : g, 5, HONE_K_EPI_ROPE_KV, true, true);
          check_gemv (4 * 2 * 64, 256, g, 8, HONE_K_EPI_ROPE_KV, true, false);
          if (cfg == 1)
            check_dequant (37, 1024, g);
        }
      check_gemv (97, 96, 32, 2, HONE_K_EPI_STORE, true, true);        /* 3 chunks a row */
      check_gemv (1001, 4096, 128, 1, HONE_K_EPI_STORE, true, false, true);   /* activation outliers */
      check_gemv (4096 + 2, 512, 64, 4, HONE_K_EPI_ADD, false, false);   /* several row pairs a warp */
      check_gemv (64, 14336, 128, 8, HONE_K_EPI_ADD, false, false);     /* 3 launches over the tokens */
      check_gemv (130, 14336, 128, 1, HONE_K_EPI_SWIGLU, true, false, true);
      check_gemv (32, 32768, 32, 3, HONE_K_EPI_STORE, false, false);
      if (cfg >= 8 || cfg == 13)
        {
          /* the tensor-core kernel's plans at full size: several rounds of block tasks, k split 8 ways
           * (config 13: the launch shape of matrices of >= 16384 rows, one token) */
          check_gemv (28672, 4096, 128, 1, HONE_K_EPI_SWIGLU, true, false, true, true);
          check_gemv (4096, 14336, 128, 2, HONE_K_EPI_ADD, false, false);
          check_gemv (6144 + 16 * 3 + 2, 4096, 64, 1, HONE_K_EPI_STORE, true, true);
        }
      for (int g : { 32, 128 })
        check_tiny_model (g);
      if (cfg == 13)
        {
          check_pack_h16 (1, 4096, true);
          check_pack_h16 (2, 14336, false);
          check_pack_h16 (3, 96 + 1024, true);   /* padding: a row's last tile part-filled */
        }
      if (cfg == 13)
        /* every launch shape the register-streamed W4A16 GEMV can be forced to
         * (hone_k_gemv_set_config; --rs-sweep times them), on the one-token shapes */
        for (int shape = 0; shape < HONE_K_GEMV_CONFIGS_Q1; shape++)
          {
            report ("-- rs, launch shape %d forced --\n", shape);
            hone_k_gemv_set_config (shape);
            check_gemv (263, 384, 128, 1, HONE_K_EPI_STORE, false, true);
            check_gemv (300, 1024, 32, 1, HONE_K_EPI_SWIGLU, true, false, false, true);
            check_gemv (4 * 4 * 64, 512, 64, 1, HONE_K_EPI_ROPE_KV, true, true);
            check_gemv (1000, 8192, 32, 1, HONE_K_EPI_ADD, false, true);
            check_gemv (130, 14336, 128, 1, HONE_K_EPI_SWIGLU, true, false, true);
            check_gemv (4096, 14336, 128, 1, HONE_K_EPI_ADD, false, false);
            hone_k_gemv_set_config (-1);
          }
      }
      set_cfg (0);
      if (only_gemm)
        check_gemms ();
      else if (!only_staged && !only_rs && only_mma != 1)
        {
          check_gemms ();
          /* the tiny models' prefill with the fused GEMM off (dequantize + cuBLASLt) and forced on */
          for (int fused : { 0, 1 })
            {
              hone_k_w4_gemm_set_max (fused ? 1 << 30 : 0);
              for (int g : { 32, 128 })
                check_tiny_model (g);
            }
          hone_k_w4_gemm_set_max (-1);
        }
      check_refusals ();
      report ("w4 checks: %d passed, %d failed\n", n_pass, n_fail);
    }
  if (do_sweep)
    bench_rs_shapes ();
  if (do_bench)
    {
      /* HONE_PROFILE_STEP: the step alone under ncu; HONE_W4_STEP_ONLY: the AWQ step's rs rows alone (A/B runs) */
      const bool step_only = getenv ("HONE_W4_STEP_ONLY") != NULL;
      if (!getenv ("HONE_PROFILE_STEP") && !step_only && !prefill_bench)
        bench_gemvs ();
      report ("\n== random Llama-3-8B: decode (CUDA graph, greedy on the GPU) and prefill ==\n");
      std::vector<std::vector<double>> q, bf;
      bench_model (HONE_K_Q4Z, q);
      if (!step_only)
        bench_model (HONE_K_BF16, bf);
      for (size_t i = 0; q.size () == 3 && bf.size () == 1 && i < q[0].size () && i < bf[0].size (); i++)
        report ("prefill %5d tok: AWQ %.2f ms vs BF16 %.2f ms = %+.1f %% (AWQ dequantize + cuBLASLt %.2f ms, fused "
                "%.2f ms; default fuses up to %d tokens)\n", w4_prefill_ns[i], q[0][i], bf[0][i],
                100 * (q[0][i] / bf[0][i] - 1), q[1][i], q[2][i], hone_k_w4_gemm_max ());
    }
  if (results)
    fclose (results);
  return n_fail ? 1 : 0;
}
