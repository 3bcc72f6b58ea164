/* hone-prefill-check.cu — the prefill session 3 harness: checks and
 * measurements of what session 3 added to the prefill path (the load-time
 * warm-up, the per-op profile, attention version 2's 8- and 4-warp forms), on the GPU.
 *
 * Plain CUDA C++ like tests/cuda/hone-cuda-check.cu (which keeps the prefill
 * checks and benchmarks of sessions 1–2); built on the developer machine:
 *   nvcc -std=c++17 -O3 -lineinfo -gencode arch=compute_90,code=sm_90 -Ikernels \
 *        kernels/*.cu tests/cuda/hone-prefill-check.cu -lcublas -lcublasLt -o .carry-prefill/hone-prefill-check
 *
 * Usage:
 *   --check        the warm-up leaves the logits of a later prefill bit-identical
 *                  to an unwarmed state's and writes no KV page but page 0;
 *                  attention version 2 (8 and 4 warps) against a float64 reference (outputs
 *                  poisoned first). --check-quick: the warm-up checks and three
 *                  attention cases, for compute-sanitizer.
 *   --first [L]    time a fresh process's first prefill (2,048 and 1,000
 *                  tokens, Llama-3-8B shape, L layers, default 4) against the
 *                  steady one; with HONE_PREFILL_WARM=0 the warm-up is off.
 *                  Run it once per process: what it measures is per process.
 *   --bench        whole 2,048-token prefill of the 32-layer BF16 shape, the
 *                  variants round robin (attention v2 with 8 / 4 warps), then the
 *                  per-op profile, then attention alone, both forms.
 * Exit status 1 if a check fails.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <stdint.h>
#include <vector>
#include <algorithm>
#include "hone-kernels.h"
#include "hone-check-util.cuh"

static double
now_ms (void)
{
  struct timespec t;
  clock_gettime (CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

/* ---- a random-weight BF16 model of the Llama-3-8B shape, L layers ---------- */
struct Model {
  HoneKModel m;
  std::vector<HoneKLayer> layers;
  std::vector<void *> kp, vp, frees;
  int32_t *table;
  int pages;
  size_t kv_bytes;             /* per pool */
};

static HoneKMatrix
bf16_matrix (Model &b, int rows, int cols, uint64_t seed)
{
  HoneKMatrix w;
  memset (&w, 0, sizeof w);
  w.type = HONE_K_BF16;
  w.rows = rows;
  w.cols = cols;
  CK (cudaMalloc (&w.q, (size_t) rows * cols * 2));
  fill_random<<<1024, 256>>> ((uint8_t *) w.q, (size_t) rows * cols * 2, seed, 1);
  b.frees.push_back (w.q);
  return w;
}

static void
model_build (Model &b, int L, int max_ctx, int D = 4096, int nq = 32, int nkv = 8, int hd = 128, int F = 14336,
             int V = 128256)
{
  HoneKConfig &c = b.m.cfg;
  memset (&b.m, 0, sizeof b.m);
  c.n_layers = L; c.hidden = D; c.n_heads = nq; c.n_kv_heads = nkv; c.head_dim = hd; c.ffn = F; c.vocab = V;
  c.rms_eps = 1e-5f;
  const std::vector<float> inv = make_inv_freq (hd, 500000.0);
  c.rope_inv_freq = dev_upload (inv);
  std::vector<float> ones (D, 1.f);
  float *norm = dev_upload (ones);
  b.frees.push_back ((void *) c.rope_inv_freq);
  b.frees.push_back (norm);
  b.layers.resize (L);
  uint64_t seed = 1000;
  for (int l = 0; l < L; l++)
    {
      HoneKLayer &y = b.layers[l];
      memset (&y, 0, sizeof y);
      y.attn_norm = norm;
      y.ffn_norm = norm;
      y.wqkv = bf16_matrix (b, (nq + 2 * nkv) * hd, D, seed++);
      y.wo = bf16_matrix (b, D, nq * hd, seed++);
      y.wgu = bf16_matrix (b, 2 * F, D, seed++);
      y.wdown = bf16_matrix (b, D, F, seed++);
    }
  b.m.layers = b.layers.data ();
  b.m.embd = bf16_matrix (b, V, D, seed++);
  b.m.out_norm = norm;
  b.m.lm_head = bf16_matrix (b, V, D, seed++);
  b.pages = (max_ctx + HONE_K_KV_BLOCK - 1) / HONE_K_KV_BLOCK;
  /* identity table: page 0 (the one the warm-up writes) is the sequence's first */
  std::vector<int32_t> t (b.pages);
  for (int i = 0; i < b.pages; i++)
    t[i] = i;
  b.table = dev_upload (t);
  b.frees.push_back (b.table);
  b.kp.resize (L);
  b.vp.resize (L);
  b.kv_bytes = (size_t) b.pages * nkv * HONE_K_KV_BLOCK * hd * 2;
  for (int l = 0; l < L; l++)
    {
      CK (cudaMalloc (&b.kp[l], b.kv_bytes));
      CK (cudaMalloc (&b.vp[l], b.kv_bytes));
      fill_random<<<1024, 256>>> ((uint8_t *) b.kp[l], b.kv_bytes, 5000 + l, 3);
      fill_random<<<1024, 256>>> ((uint8_t *) b.vp[l], b.kv_bytes, 6000 + l, 3);
      b.frees.push_back (b.kp[l]);
      b.frees.push_back (b.vp[l]);
    }
  CK (cudaDeviceSynchronize ());
}

static void
model_free (Model &b)
{
  for (void *p : b.frees)
    cudaFree (p);
  b.frees.clear ();
}

static HoneKKv
model_kv (Model &b)
{
  HoneKKv kv = { b.kp.data (), b.vp.data (), b.table, b.pages };
  return kv;
}

/* one prefill of toks at pos 0 (the whole step: logits of the last row, sampled id) */
static void
prefill (Model &b, HoneKState &st, const std::vector<int32_t> &toks, int n, cudaStream_t s)
{
  HoneKKv kv = model_kv (b);
  const int zero = 0;
  CK (cudaMemcpyAsync (st.pos, &zero, 4, cudaMemcpyHostToDevice, s));
  CK (cudaMemcpyAsync (st.tokens, toks.data (), 4 * (size_t) n, cudaMemcpyHostToDevice, s));
  CK (hone_k_forward (&b.m, &kv, &st, n, 0, 1, 1, 0.f, 0, s));
}

/* ---- checks ------------------------------------------------------------------ */

/* The warm-up changes nothing a later step reads: a prefill (n tokens, then
 * a continuation chunk and a decode token) on a warmed state, over the pools
 * as the warm-up left them (its page 0 is the sequence's first), gives logits
 * bit-identical to the same on a fresh unwarmed state over the original
 * pools; the warm-up writes no KV byte outside page 0; *pos and sampled[0]
 * stay 0. */
static void
check_warm_invariance (void)
{
  Model b;
  model_build (b, 2, 1024, 512, 8, 2, 64, 1024, 1000);   /* small llama shape, hd 64, GQA 4 */
  const int n = 300, n2 = 45;
  cudaStream_t s;
  CK (cudaStreamCreateWithFlags (&s, cudaStreamNonBlocking));
  std::vector<int32_t> toks (n + n2 + 1);
  for (auto &t : toks) t = (int) (rng_u64 () % 1000);
  /* snapshot the pools, warm a state, compare the pools */
  std::vector<std::vector<uint8_t>> k0, v0;
  for (int l = 0; l < 2; l++)
    {
      k0.push_back (dev_download<uint8_t> (b.kp[l], b.kv_bytes));
      v0.push_back (dev_download<uint8_t> (b.vp[l], b.kv_bytes));
    }
  HoneKState sw, sc;
  CK (hone_k_state_alloc (&sw, &b.m, 512, HONE_K_MAX_DECODE));
  HoneKKv kv = model_kv (b);
  CK (hone_k_prefill_warm (&b.m, &kv, &sw, s));
  const size_t page = b.kv_bytes / b.pages;
  bool same = true, page0 = false;
  for (int l = 0; l < 2; l++)
    {
      const std::vector<uint8_t> k1 = dev_download<uint8_t> (b.kp[l], b.kv_bytes);
      const std::vector<uint8_t> v1 = dev_download<uint8_t> (b.vp[l], b.kv_bytes);
      same = same && !memcmp (k1.data () + page, k0[l].data () + page, b.kv_bytes - page)
             && !memcmp (v1.data () + page, v0[l].data () + page, b.kv_bytes - page);
      page0 = page0 || memcmp (k1.data (), k0[l].data (), page);
    }
  check (same && page0, "warm-up writes KV page 0 only (and does write it)", same && page0 ? 0 : 1, 0.5);
  const std::vector<int32_t> pos_samp = dev_download<int32_t> (sw.pos, 1), s0 = dev_download<int32_t> (sw.sampled, 1);
  check (pos_samp[0] == 0 && s0[0] == 0, "warm-up leaves *pos = 0, sampled[0] = 0", pos_samp[0] + s0[0], 0.5);
  /* the same steps on both states (each from the same pools: restore between) */
  std::vector<float> out[2];
  for (int which = 0; which < 2; which++)
    {
      HoneKState &st = which == 0 ? sw : sc;
      if (which == 1)
        {
          setenv ("HONE_PREFILL_WARM", "0", 1);
          CK (hone_k_state_alloc (&sc, &b.m, 512, HONE_K_MAX_DECODE));
          CK (hone_k_prefill_warm (&b.m, &kv, &sc, s));    /* a no-op with the switch */
          unsetenv ("HONE_PREFILL_WARM");
        }
      for (int l = 0; which == 1 && l < 2; l++)
        {
          CK (cudaMemcpy (b.kp[l], k0[l].data (), b.kv_bytes, cudaMemcpyHostToDevice));
          CK (cudaMemcpy (b.vp[l], v0[l].data (), b.kv_bytes, cudaMemcpyHostToDevice));
        }
      CK (cudaMemset (st.logits, 0xff, (size_t) 8 * 1000 * 4));
      prefill (b, st, toks, n, s);
      std::vector<float> a = dev_download<float> (st.logits, 1000);
      /* a continuation chunk at pos n (hone_k_forward advanced *pos) and one decode token */
      CK (cudaMemcpyAsync (st.tokens, toks.data () + n, 4 * (size_t) n2, cudaMemcpyHostToDevice, s));
      CK (hone_k_forward (&b.m, &kv, &st, n2, n, 1, 1, 0.f, 0, s));
      std::vector<float> c = dev_download<float> (st.logits, 1000);
      HoneKState dec;
      CK (hone_k_state_alloc (&dec, &b.m, HONE_K_MAX_DECODE, HONE_K_MAX_DECODE));
      const int p = n + n2;
      CK (cudaMemcpy (dec.pos, &p, 4, cudaMemcpyHostToDevice));
      CK (cudaMemcpy (dec.tokens, &toks[n + n2], 4, cudaMemcpyHostToDevice));
      CK (hone_k_forward (&b.m, &kv, &dec, 1, p, 1, 1, 0.f, 0, s));
      std::vector<float> d = dev_download<float> (dec.logits, 1000);
      hone_k_state_free (&dec);
      out[which] = a;
      out[which].insert (out[which].end (), c.begin (), c.end ());
      out[which].insert (out[which].end (), d.begin (), d.end ());
    }
  bool fin = true;
  for (float x : out[0])
    fin = fin && isfinite (x);
  const bool ident = !memcmp (out[0].data (), out[1].data (), out[0].size () * 4);
  size_t diff = 0;
  for (size_t i = 0; i < out[0].size (); i++)
    diff += memcmp (&out[0][i], &out[1][i], 4) != 0;
  check (fin && ident, "warmed vs fresh state: logits bit-identical (300+45+1 tok)", (double) diff, 0.5);
  hone_k_state_free (&sw);
  hone_k_state_free (&sc);
  cudaStreamDestroy (s);
  model_free (b);
}

/* Attention prefill (HONE_ATTN_PREFILL=ver) against float64 from the same
 * paged f16 cache, scattered pages, outputs poisoned. */
static void
check_attn (int ver, int hd, int nq, int nkv, int pos, int n_tok, int out_type)
{
  const int W = (nq + 2 * nkv) * hd, G = nq / nkv, len = pos + n_tok;
  const int pages = (len + HONE_K_KV_BLOCK - 1) / HONE_K_KV_BLOCK + 3;
  /* physical pages shuffled, one spare in front and two at the end */
  std::vector<int32_t> table (pages);
  for (int i = 0; i < pages; i++)
    table[i] = i;
  for (int i = pages - 1; i > 0; i--)
    std::swap (table[i], table[rng_u64 () % (i + 1)]);
  const size_t pool_elems = (size_t) pages * nkv * HONE_K_KV_BLOCK * hd;
  std::vector<uint16_t> k (pool_elems), v (pool_elems);
  for (size_t i = 0; i < pool_elems; i++)
    {
      k[i] = f2h (rng_normal ());
      v[i] = f2h (rng_normal ());
    }
  /* slots past len hold NaN: the kernel must not let them reach the output */
  for (int p = len; p < pages * HONE_K_KV_BLOCK; p++)
    {
      const int pg = table[p / HONE_K_KV_BLOCK], sl = p % HONE_K_KV_BLOCK;
      for (int kh = 0; kh < nkv; kh++)
        for (int d = 0; d < hd; d++)
          {
            const size_t i = (((size_t) pg * nkv + kh) * HONE_K_KV_BLOCK + sl) * hd + d;
            k[i] = 0x7e00;
            v[i] = 0x7e00;
          }
    }
  std::vector<float> qkv ((size_t) n_tok * W);
  for (auto &x : qkv) x = rng_normal () * 0.3f;
  float *dqkv = dev_upload (qkv);
  uint16_t *dk = dev_upload (k), *dv = dev_upload (v);
  int32_t *dt = dev_upload (table);
  const size_t out_elems = (size_t) n_tok * nq * hd;
  void *dout = dev_poisoned (out_elems * 4);
  char e[8];
  snprintf (e, sizeof e, "%d", ver);
  setenv ("HONE_ATTN_PREFILL", e, 1);
  CK (hone_k_attn_prefill_ex (dqkv, n_tok, nq, nkv, hd, pos, dk, dv, dt, dout, out_type, 0));
  unsetenv ("HONE_ATTN_PREFILL");
  std::vector<float> got;
  if (out_type == HONE_K_F32)
    got = dev_download<float> (dout, out_elems);
  else
    for (uint16_t u : dev_download<uint16_t> (dout, out_elems))
      got.push_back (out_type == HONE_K_BF16 ? bf2f (u) : h2f (u));
  /* guard bytes past the output stay poisoned */
  const std::vector<uint8_t> guard = dev_download<uint8_t> ((uint8_t *) dout + out_elems * (out_type == HONE_K_F32 ? 4 : 2),
                                                            HONE_CHECK_GUARD);
  bool guard_ok = true;
  for (uint8_t g : guard)
    guard_ok = guard_ok && g == 0xff;
  std::vector<double> ref (out_elems), sc (len);
  for (int t = 0; t < n_tok; t++)
    for (int h = 0; h < nq; h++)
      {
        const int kh = h / G, qp = pos + t;
        const float *q = &qkv[(size_t) t * W + (size_t) h * hd];
        double mx = -INFINITY;
        for (int j = 0; j <= qp; j++)
          {
            const size_t base = (((size_t) table[j / HONE_K_KV_BLOCK] * nkv + kh) * HONE_K_KV_BLOCK + j % HONE_K_KV_BLOCK) * hd;
            double a = 0;
            for (int d = 0; d < hd; d++)
              a += (double) q[d] * h2f (k[base + d]);
            sc[j] = a;
            mx = std::max (mx, a);
          }
        double sum = 0;
        for (int j = 0; j <= qp; j++)
          sum += (sc[j] = exp (sc[j] - mx));
        double *o = &ref[((size_t) t * nq + h) * hd];
        for (int d = 0; d < hd; d++)
          o[d] = 0;
        for (int j = 0; j <= qp; j++)
          {
            const size_t base = (((size_t) table[j / HONE_K_KV_BLOCK] * nkv + kh) * HONE_K_KV_BLOCK + j % HONE_K_KV_BLOCK) * hd;
            for (int d = 0; d < hd; d++)
              o[d] += sc[j] / sum * h2f (v[base + d]);
          }
      }
  bool fin;
  const double err = rel_err (got.data (), ref.data (), got.size (), &fin);
  const double bound = out_type == HONE_K_BF16 ? 8e-3 : 5e-3;
  char what[128];
  snprintf (what, sizeof what, "attn prefill v%d hd=%d heads %d/%d pos=%d tok=%d%s", ver == 4 ? 3 : 2, hd, nq, nkv,
            pos, n_tok, out_type == HONE_K_BF16 ? " bf16" : out_type == HONE_K_F16 ? " f16" : "");
  check (fin && guard_ok && err < bound, what, err, bound);
  cudaFree (dqkv); cudaFree (dk); cudaFree (dv); cudaFree (dt); cudaFree (dout);
}

static void
run_checks (bool quick)
{
  report ("== prefill session 3 checks%s ==\n", quick ? " (quick: for compute-sanitizer)" : "");
  check_warm_invariance ();
  if (quick)
    {
      check_attn (2, 128, 8, 2, 70, 150, HONE_K_F32);
      check_attn (2, 64, 4, 2, 63, 70, HONE_K_BF16);
      check_attn (2, 128, 4, 4, 0, 1, HONE_K_F16);
      report ("checks: %d passed, %d failed\n", n_pass, n_fail);
      return;
    }
  for (int ver : { 2, 3 })
    {
      check_attn (ver, 128, 8, 2, 0, 200, HONE_K_F32);
      check_attn (ver, 128, 8, 8, 130, 300, HONE_K_F32);
      check_attn (ver, 64, 16, 2, 5, 257, HONE_K_BF16);
      check_attn (ver, 128, 16, 2, 1000, 129, HONE_K_F32);
      check_attn (ver, 128, 4, 1, 3, 17, HONE_K_F16);
      check_attn (ver, 64, 8, 8, 64, 9, HONE_K_F32);
      check_attn (ver, 128, 32, 8, 0, 64, HONE_K_BF16);
      check_attn (ver, 128, 8, 2, 70, 150, HONE_K_F16);
      check_attn (ver, 64, 9, 3, 77, 100, HONE_K_F32);
      if (ver == 2)
        {
          check_attn (ver, 128, 4, 4, 0, 1, HONE_K_F32);
          check_attn (ver, 64, 4, 2, 63, 2, HONE_K_F32);
          check_attn (ver, 128, 8, 2, 0, 513, HONE_K_BF16);
        }
    }
  report ("checks: %d passed, %d failed\n", n_pass, n_fail);
}

/* ---- first prefill after load ------------------------------------------------- */
static void
run_first (int L)
{
  const char *e = getenv ("HONE_PREFILL_WARM");
  const int mode = e && *e ? atoi (e) : 1;
  const char *warm = mode <= 0 ? "off" : mode == 1 ? "on (all sizes)" : "on (max_tok only)";
  report ("== first prefill after load, Llama-3-8B shape, %d layers, BF16, warm-up %s ==\n", L, warm);
  const double t0 = now_ms ();
  Model b;
  model_build (b, L, 2048 + HONE_K_KV_BLOCK);
  cudaStream_t s;
  CK (cudaStreamCreateWithFlags (&s, cudaStreamNonBlocking));
  const double t1 = now_ms ();
  HoneKState st;
  CK (hone_k_state_alloc (&st, &b.m, 2048, HONE_K_MAX_DECODE));
  CK (cudaDeviceSynchronize ());
  const double t2 = now_ms ();
  HoneKKv kv = model_kv (b);
  CK (hone_k_prefill_warm (&b.m, &kv, &st, s));
  const double t3 = now_ms ();
  report ("model build %.0f ms, state alloc (cuBLAS handles) %.1f ms, warm-up %.1f ms\n", t1 - t0, t2 - t1, t3 - t2);
  std::vector<int32_t> toks (2048);
  for (auto &t : toks) t = (int) (rng_u64 () % 128256);
  for (int n : { 2048, 1000, 300 })
    {
      std::vector<double> ts;
      for (int it = 0; it < 6; it++)
        {
          CK (cudaStreamSynchronize (s));
          const double a = now_ms ();
          prefill (b, st, toks, n, s);
          int32_t id;
          CK (cudaMemcpyAsync (&id, st.sampled, 4, cudaMemcpyDeviceToHost, s));
          CK (cudaStreamSynchronize (s));
          ts.push_back (now_ms () - a);
        }
      std::vector<double> rest (ts.begin () + 1, ts.end ());
      std::sort (rest.begin (), rest.end ());
      report ("prefill %4d tok, %d layers, warm-up mode %d: first %7.2f ms, steady %7.2f ms (median of 5), first - steady %+7.2f ms\n",
              n, L, mode, ts[0], rest[2], ts[0] - rest[2]);
    }
  hone_k_state_free (&st);
  cudaStreamDestroy (s);
  model_free (b);
}

/* ---- whole prefill, profile, attention alone ---------------------------------- */
struct Variant {
  const char *name, *attn;
};

static void
run_bench (void)
{
  const int n = 2048, L = 32, nq = 32, nkv = 8;
  report ("\n== prefill %d tokens, random-weight Llama-3-8B BF16 (session 3) ==\n", n);
  Model b;
  model_build (b, L, n + HONE_K_KV_BLOCK);
  cudaStream_t s;
  CK (cudaStreamCreateWithFlags (&s, cudaStreamNonBlocking));
  std::vector<int32_t> toks (n);
  for (auto &t : toks) t = (int) (rng_u64 () % 128256);
  const double params = (double) L * (6144.0 * 4096 + 4096.0 * 4096 + 28672.0 * 4096 + 4096.0 * 14336);
  const double gemm_flop = 2.0 * params * n + 2.0 * 128256 * 4096;
  const double attn_flop = (double) L * nq * 2 * 2.0 * n * (n + 1) / 2 * 128;
  const Variant vars[] = { { "attention v2 (session 2)", "2" }, { "attention v2, 4 warps", "3" } };
  const int nv = 2;
  HoneKState st;
  CK (hone_k_state_alloc (&st, &b.m, n, HONE_K_MAX_DECODE));
  HoneKKv kv = model_kv (b);
  CK (hone_k_prefill_warm (&b.m, &kv, &st, s));
  cudaEvent_t e0, e1;
  CK (cudaEventCreate (&e0));
  CK (cudaEventCreate (&e1));
  std::vector<std::vector<float>> tv (nv);
  for (int it = 0; it < 10; it++)
    for (int v = 0; v < nv; v++)
      {
        setenv ("HONE_ATTN_PREFILL", vars[v].attn, 1);
        CK (cudaStreamSynchronize (s));
        CK (cudaEventRecord (e0, s));
        prefill (b, st, toks, n, s);
        CK (cudaEventRecord (e1, s));
        CK (cudaEventSynchronize (e1));
        float ms;
        CK (cudaEventElapsedTime (&ms, e0, e1));
        if (it > 0)
          tv[v].push_back (ms);
      }
  unsetenv ("HONE_ATTN_PREFILL");
  for (int v = 0; v < nv; v++)
    {
      std::vector<float> &ts = tv[v];
      std::sort (ts.begin (), ts.end ());
      const double ms = ts[ts.size () / 2];
      report ("prefill %d tok BF16 %-40s: %7.2f ms (min %.2f max %.2f, %zu runs)  %6.1f TFLOP/s = %5.1f%% of 781\n", n,
              vars[v].name, ms, ts.front (), ts.back (), ts.size (), (gemm_flop + attn_flop) / (ms * 1e-3) / 1e12,
              100 * (gemm_flop + attn_flop) / (ms * 1e-3) / GEMM_CEIL);
    }

  /* per-op profile: events between the ops, 5 prefills after one, each variant */
  for (int v = 0; v < nv; v++)
    {
      setenv ("HONE_ATTN_PREFILL", vars[v].attn, 1);
      double acc[HONE_K_PP_OPS] = { 0 }, ms[HONE_K_PP_OPS];
      const int reps = 5;
      CK (hone_k_prefill_profile (1));
      for (int r = 0; r <= reps; r++)
        {
          prefill (b, st, toks, n, s);
          CK (hone_k_prefill_profile_read (ms));
          for (int i = 0; r > 0 && i < HONE_K_PP_OPS; i++)
            acc[i] += ms[i] / reps;
        }
      CK (hone_k_prefill_profile (0));
      double total = 0, gemm = 0;
      for (int i = 0; i < HONE_K_PP_OPS; i++)
        total += acc[i];
      gemm = acc[HONE_K_PP_GEMM_QKV] + acc[HONE_K_PP_GEMM_O] + acc[HONE_K_PP_GEMM_GU] + acc[HONE_K_PP_GEMM_DOWN];
      report ("per-op profile, %s (mean of %d; events between ops):\n", vars[v].name, reps);
      for (int i = 0; i < HONE_K_PP_OPS; i++)
        report ("  %-24s %7.3f ms  %5.1f%%  (%.1f us a layer)\n", hone_k_prefill_profile_name (i), acc[i],
                100 * acc[i] / total, 1e3 * acc[i] / L);
      report ("  total %.2f ms: GEMMs %.2f, attention %.2f, everything else %.2f\n", total, gemm, acc[HONE_K_PP_ATTN],
              total - gemm - acc[HONE_K_PP_ATTN]);
    }
  unsetenv ("HONE_ATTN_PREFILL");

  /* attention alone (layer 0's pages, the last prefill's q), both variants, interleaved */
  for (int hd : { 128, 64 })
    for (int pos : { 0, 1024 })
      {
        const int nt = n - pos;
        std::vector<float> at[2];
        for (int rep = 0; rep < 7; rep++)
          for (int v = 0; v < nv; v++)
            {
              setenv ("HONE_ATTN_PREFILL", vars[v].attn, 1);
              CK (hone_k_attn_prefill_ex (st.qkv, nt, nq, nkv, hd, pos, b.kp[0], b.vp[0], b.table, st.x16, HONE_K_BF16, s));
              CK (cudaEventRecord (e0, s));
              for (int i = 0; i < 10; i++)
                CK (hone_k_attn_prefill_ex (st.qkv, nt, nq, nkv, hd, pos, b.kp[0], b.vp[0], b.table, st.x16, HONE_K_BF16, s));
              CK (cudaEventRecord (e1, s));
              CK (cudaEventSynchronize (e1));
              float ams;
              CK (cudaEventElapsedTime (&ams, e0, e1));
              at[v].push_back (ams / 10);
            }
        unsetenv ("HONE_ATTN_PREFILL");
        const double pairs = (double) nt * pos + (double) nt * (nt + 1) / 2;
        const double fl = (double) nq * 2 * 2.0 * pairs * hd;
        for (int v = 0; v < nv; v++)
          {
            std::sort (at[v].begin (), at[v].end ());
            report ("  attention %-40s hd %3d heads 32/8 pos %4d tok %4d bf16 out: %.3f ms = %.1f TFLOP/s\n",
                    vars[v].name, hd, pos, nt, at[v][3], fl / (at[v][3] * 1e-3) / 1e12);
          }
      }
  CK (cudaGetLastError ());
  cudaEventDestroy (e0);
  cudaEventDestroy (e1);
  hone_k_state_free (&st);
  cudaStreamDestroy (s);
  model_free (b);
}

int
main (int argc, char **argv)
{
  const char *out = getenv ("OUT");
  if (out && *out)
    {
      char path[1024];
      snprintf (path, sizeof path, "%s/results-prefill3.txt", out);
      results = fopen (path, "a");
    }
  bool any = false;
  for (int i = 1; i < argc; i++)
    {
      if (!strcmp (argv[i], "--check"))
        run_checks (false);
      else if (!strcmp (argv[i], "--check-quick"))
        run_checks (true);
      else if (!strcmp (argv[i], "--first"))
        run_first (i + 1 < argc && atoi (argv[i + 1]) > 0 ? atoi (argv[++i]) : 4);
      else if (!strcmp (argv[i], "--bench"))
        run_bench ();
      else
        {
          fprintf (stderr, "usage: %s [--check] [--check-quick] [--first [LAYERS]] [--bench]\n", argv[0]);
          return 2;
        }
      any = true;
    }
  if (!any)
    run_checks (false);
  if (results)
    fclose (results);
  return n_fail ? 1 : 0;
}
