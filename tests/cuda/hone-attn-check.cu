/* hone-attn-check.cu — decode attention (kernels/hone-k-attn-decode.cu) on
 * the GPU: checks against a float64 reference and old-vs-new benchmarks.
 *
 * Plain CUDA C++ like hone-cuda-check.cu. Build (on the developer machine,
 * carried to the GPU machine in .carry-attn/):
 *   nvcc -std=c++17 -O3 -lineinfo -gencode arch=compute_90,code=sm_90 -Ikernels \
 *        tests/cuda/hone-attn-check.cu kernels/hone-k-*.cu -lcublas -lcublasLt -o .carry-attn/hone-attn-check
 * and on the GPU machine `tests/run-cuda.sh attn` (carry .carry-attn): benchmarks, checks, then
 * compute-sanitizer memcheck over --small.
 *
 * Checks (fresh random inputs each, outputs poisoned first): a paged f16 KV
 * cache with a scattered block table whose unused slots and pages hold NaN
 * (a kernel that reads past the context fails), 1..8 new tokens, head dims
 * 64/128, GQA ratios 1/4/8, contexts across page boundaries up to 32k (and
 * one over 130k: a split spanning more than 32 pages), several split sizes
 * (one split, many, the 64-split cap); the reference is the f64 softmax
 * attention of each query over its causal keys, read from the same paged
 * layout by this file's own indexing. Each case runs twice (the split
 * counters must come back to zero), then through hone_k_attn_decode_h16 with
 * the int8 and f16 outputs and a prefetch: the f32 output must be the same
 * bits, the int8 blocks hone_k_quantize's bits of it and the packed f16 ones
 * (HoneKActH16) hone_k_pack_h16's. Both kernels are checked:
 * version 3 (default) and session 2's (HONE_ATTN_DECODE=old).
 *
 * Version 4's switches (shapes G–M: pos and pages read before the PDL wait,
 * clusters combining in shared memory) get their own cases: every split and
 * page edge of the one-cluster path, the two-level combine, and pos written
 * late by a PDL predecessor (late_pos_kernel), which the early read must catch.
 * Shapes L, M also copy the older keys before the wait: this step's K/V rows
 * written late by a predecessor (late_rows_kernel, NaN until then) check that
 * those rows, and only those, are read after it. Shape T is the tiny kernel
 * (kernels/hone-k-attn-tiny.cu: one token, one block a query head), with the
 * same late-pos and late-row cases (check_tiny).
 *
 * Benchmarks: session 2's kernel vs every version-3 block shape (HONE_ATTN_V3) at
 * 128..32k keys (KV of 8 layers in rotation, so HBM not L2), the launch floor
 * (floor_kernel: same grid, no attention), split sizes per shape
 * (HONE_ATTN_CHUNK), several tokens, PDL off, head dim 64.
 *
 * Usage: hone-attn-check [--check] [--small] [--bench] [--profile] [--shapes LETTERS] [--no-default]
 *   (default --check --bench)
 *   --small: a few small shapes only (for compute-sanitizer).
 *   --shapes: the block shapes to check and time (default all, A–O and T; the 40-case
 *             lists of G–M only for shapes named here).
 *   --no-default: leave out the default kernel's and session 2's cases.
 *   --profile: two launches each of a few configurations, for ncu -k regex:attn3.
 * Session 4: built the same way into .carry-attn4/dev/, run by its run.sh (a copy in the session notes).
 * Exit status 1 if any check fails. With $OUT set, results also go to $OUT/results.txt.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdint.h>
#include <vector>
#include <algorithm>
#include <string>
#define HONE_CHECK_WIDTH 70
#include "hone-kernels.h"
#include "hone-k-common.cuh"
#include "hone-check-util.cuh"

/* ---- paged cache ---------------------------------------------------------- */

struct Paged {
  int nkv, hd, ctx, n_pages;
  std::vector<int32_t> table;
  std::vector<uint16_t> k, v;      /* pools, f16 bits; NaN where no key lives */
  __half *dk, *dv;
  int32_t *dtable;
};

static size_t
paged_index (const Paged &c, int key, int kvh, int d)
{
  return (((size_t) c.table[key / HONE_K_KV_BLOCK] * c.nkv + kvh) * HONE_K_KV_BLOCK + key % HONE_K_KV_BLOCK) * c.hd + d;
}

/* ctx keys in a pool of (pages needed + 3) blocks, the table a random
 * permutation (scattered) or the identity; everything else NaN. */
static Paged
paged_make (int nkv, int hd, int ctx, bool scattered)
{
  Paged c;
  c.nkv = nkv;
  c.hd = hd;
  c.ctx = ctx;
  const int need = (ctx + HONE_K_KV_BLOCK - 1) / HONE_K_KV_BLOCK;
  c.n_pages = need + 3;
  std::vector<int32_t> perm (c.n_pages);
  for (int i = 0; i < c.n_pages; i++) perm[i] = i;
  if (scattered)
    for (int i = c.n_pages - 1; i > 0; i--) std::swap (perm[i], perm[rng_u64 () % (i + 1)]);
  c.table.assign (perm.begin (), perm.begin () + need);
  const size_t n = (size_t) c.n_pages * nkv * HONE_K_KV_BLOCK * hd;
  c.k.assign (n, 0xffff);
  c.v.assign (n, 0xffff);
  for (int key = 0; key < ctx; key++)
    for (int h = 0; h < nkv; h++)
      for (int d = 0; d < hd; d++)
        {
          const size_t i = paged_index (c, key, h, d);
          c.k[i] = f2h ((float) (rng_uniform () * 2 - 1));
          c.v[i] = f2h ((float) (rng_uniform () * 2 - 1));
        }
  c.dk = (__half *) dev_upload (c.k);
  c.dv = (__half *) dev_upload (c.v);
  c.dtable = dev_upload (c.table);
  return c;
}

static void
paged_free (Paged &c)
{
  cudaFree (c.dk); cudaFree (c.dv); cudaFree (c.dtable);
}

/* f64 attention of query head qh of token t (absolute position pos + t): keys 0..pos+t */
static void
attn_ref64 (const Paged &c, const float *q, int qh, int G, int last_key, double *out)
{
  const int hd = c.hd, kvh = qh / G;
  std::vector<double> s (last_key + 1);
  double mx = -1e300;
  for (int j = 0; j <= last_key; j++)
    {
      const uint16_t *kr = &c.k[paged_index (c, j, kvh, 0)];
      double d = 0;
      for (int i = 0; i < hd; i++)
        d += (double) q[i] * h2f (kr[i]);
      s[j] = d;
      mx = std::max (mx, d);
    }
  double sum = 0;
  for (int j = 0; j <= last_key; j++) { s[j] = exp (s[j] - mx); sum += s[j]; }
  std::vector<double> o (hd, 0.0);
  for (int j = 0; j <= last_key; j++)
    {
      const uint16_t *vr = &c.v[paged_index (c, j, kvh, 0)];
      for (int i = 0; i < hd; i++)
        o[i] += s[j] * h2f (vr[i]);
    }
  for (int i = 0; i < hd; i++)
    out[i] = o[i] / sum;
}

extern "C" int hone_k_attn3_occupancy (int hd, char shape);   /* hone-k-attn-decode.cu, for this harness */
extern "C" int hone_k_attn3_occupancy_ex (int hd, char shape, int clusters);

/* version 3's block shapes (kernels/hone-k-attn-decode.cu, V3_SHAPES): warps × ring a warp, copy pattern;
 * G–K add version 4's switches: early pos/page read (G), clusters of 8 (H), both (I, J), K: I with
 * session 3's global combine over 1024 keys; L, M: I, G with the older keys' copies before the PDL wait;
 * N, O (session 43): G with 8 warps of an 8 KB ring (one 16-key step each in flight, 64 KB) */
static const char ALL_SHAPES[] = "ABCDEFGHIJKLMNOT";
static const char *ALL_SHAPE_NAMES[] = { "A 4w 12K own", "B 4w 12K", "C 2w 24K", "D 4w 20K", "E 8w 12K", "F 4w 16K",
                                         "G A+early", "H A+cluster8", "I A+early+cl8", "J E+early+cl8",
                                         "K I,long:global", "L I+old KV early", "M G+old KV early",
                                         "N 8w 8K early", "O N+whole runs", "T tiny 1 blk/head" };
/* the shapes this run checks and times (--shapes); the long case lists of
 * version 4's shapes (check_v4) only for shapes named there, so that a plain
 * --check stays within tests/cuda/run-release.sh's time */
static std::string SHAPES = ALL_SHAPES;
static bool shapes_named;
static const char *
shape_name (char c)
{
  const char *p = strchr (ALL_SHAPES, c);
  return p ? ALL_SHAPE_NAMES[p - ALL_SHAPES] : "?";
}

/* A predecessor in the PDL chain that writes pos late: it lets its
 * dependents start at once, waits ns nanoseconds, then stores the true
 * position. A kernel that reads pos before its griddepcontrol.wait sees the
 * stale value and must notice. */
__global__ void
late_pos_kernel (int32_t *pos, int value, long long ns)
{
  pdl_trigger ();
  long long t0, t;
  asm volatile ("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do
    asm volatile ("mov.u64 %0, %%globaltimer;" : "=l"(t));
  while (t - t0 < ns);
  *pos = value;
}

/* A predecessor that writes this step's K/V rows late (as the q|k|v
 * epilogue does just before attention): the pools hold NaN there until it
 * copies the true rows in, ns nanoseconds after letting its dependents
 * start. A kernel that copies those rows before its griddepcontrol.wait
 * reads the NaN. rows: element offsets of the rows (hd halves each). */
__global__ void
late_rows_kernel (__half *k, __half *v, const __half *k_src, const __half *v_src, const size_t *rows, int n_rows,
                  int hd, long long ns)
{
  pdl_trigger ();
  long long t0, t;
  asm volatile ("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do
    asm volatile ("mov.u64 %0, %%globaltimer;" : "=l"(t));
  while (t - t0 < ns);
  for (int i = threadIdx.x; i < n_rows * hd; i += blockDim.x)
    {
      const size_t o = rows[i / hd] + i % hd;
      k[o] = k_src[o];
      v[o] = v_src[o];
    }
}

/* old: session 2's kernel; else version 3 with block shape `shape` (0: the
 * default) and split size `chunk` (0: the default) */
static void
set_variant (bool old, int chunk, char shape = 0)
{
  if (old)
    setenv ("HONE_ATTN_DECODE", "old", 1);
  else
    unsetenv ("HONE_ATTN_DECODE");
  if (shape)
    {
      const char b[2] = { shape, 0 };
      setenv ("HONE_ATTN_V3", b, 1);
    }
  else
    unsetenv ("HONE_ATTN_V3");
  if (chunk > 0)
    {
      char b[16];
      snprintf (b, sizeof b, "%d", chunk);
      setenv ("HONE_ATTN_CHUNK", b, 1);
    }
  else
    unsetenv ("HONE_ATTN_CHUNK");
}

/* One case: pos = ctx − n_tok (the new tokens are already in the cache).
 * chunk: HONE_ATTN_CHUNK for version 3 (0: the default). */
static void
check_case (int hd, int nq, int nkv, int ctx, int n_tok, bool scattered, bool old, int chunk = 0, char shape = 0,
            int stale = 0, bool late_kv = false, int bound = 0)
{
  const int pos = ctx - n_tok, G = nq / nkv, W = (nq + 2 * nkv) * hd, n = n_tok * nq * hd;
  Paged c = paged_make (nkv, hd, ctx, scattered);
  std::vector<float> qkv ((size_t) n_tok * W);
  for (auto &x : qkv) x = rng_normal () * 0.3f;   /* scores of a few units: a peaked softmax */
  float *dqkv = dev_upload (qkv);
  std::vector<int32_t> posv = { pos };
  int32_t *dpos = dev_upload (posv);
  float *d0 = (float *) dev_poisoned ((size_t) n * 4), *d1 = (float *) dev_poisoned ((size_t) n * 4);
  HoneKActQ8 q0 = { (int8_t *) dev_poisoned (n), (float2 *) dev_poisoned ((size_t) n / 32 * 8) };
  HoneKActQ8 q1 = { (int8_t *) dev_poisoned (n), (float2 *) dev_poisoned ((size_t) n / 32 * 8) };
  /* the W4A16 o projection's packed input: written by attention = hone_k_pack_h16 of the f32 output */
  const size_t nh = (size_t) n_tok * HONE_K_H16_ROW (nq * hd);
  HoneKActH16 h0 = { (uint16_t *) dev_poisoned (nh * 2), (float *) dev_poisoned (HONE_K_H16_DS (n) * 4) };
  HoneKActH16 h1 = { (uint16_t *) dev_poisoned (nh * 2), (float *) dev_poisoned (HONE_K_H16_DS (n) * 4) };
  const size_t sb = hone_k_attn_scratch_bytes (nq, nkv, hd, n_tok);
  void *scratch;
  CK (cudaMalloc (&scratch, sb));
  CK (cudaMemset (scratch, 0, sb));
  set_variant (old, chunk, shape);
  /* stale > 0: pos reads pos − stale until a PDL predecessor writes the true value late */
  auto late = [&] (void) {
    if (!stale)
      return;
    const int32_t sp = pos - stale;
    CK (cudaMemcpy (dpos, &sp, 4, cudaMemcpyHostToDevice));
    late_pos_kernel<<<1, 1>>> (dpos, pos, 20000);
    CK (cudaGetLastError ());
  };
  /* late_kv: this step's rows (pos..ctx−1 of every KV head) NaN until a PDL predecessor writes them */
  __half *dk_src = NULL, *dv_src = NULL;
  size_t *drows = NULL;
  std::vector<size_t> rows;
  const size_t pool_n = (size_t) c.n_pages * nkv * HONE_K_KV_BLOCK * hd;
  if (late_kv)
    {
      for (int key = pos; key < ctx; key++)
        for (int h = 0; h < nkv; h++)
          rows.push_back (paged_index (c, key, h, 0));
      CK (cudaMalloc (&dk_src, pool_n * 2));
      CK (cudaMalloc (&dv_src, pool_n * 2));
      CK (cudaMemcpy (dk_src, c.dk, pool_n * 2, cudaMemcpyDeviceToDevice));
      CK (cudaMemcpy (dv_src, c.dv, pool_n * 2, cudaMemcpyDeviceToDevice));
      drows = dev_upload (rows);
    }
  auto late_rows = [&] (void) {
    if (!late_kv)
      return;
    for (size_t r : rows)
      {
        CK (cudaMemset (c.dk + r, 0xff, (size_t) hd * 2));
        CK (cudaMemset (c.dv + r, 0xff, (size_t) hd * 2));
      }
    late_rows_kernel<<<1, 128>>> (c.dk, c.dv, dk_src, dv_src, drows, (int) rows.size (), hd, 20000);
    CK (cudaGetLastError ());
  };
  /* twice: the split counters must be back at zero after a run */
  /* bound > 0: every launch states it (max_ctx), as a captured decode step does; the table holds
   * ceil(bound / HONE_K_KV_BLOCK) entries (the caller's promise), so bound <= the pages' keys */
  if ((size_t) bound > c.table.size () * HONE_K_KV_BLOCK)
    bound = (int) c.table.size () * HONE_K_KV_BLOCK;
  auto run0 = [&] (void) {
    if (bound > 0)
      CK (hone_k_attn_decode_h16 (dqkv, n_tok, nq, nkv, hd, dpos, c.dk, c.dv, c.dtable, scratch, d0, NULL, NULL, NULL,
                                  bound, 0));
    else
      CK (hone_k_attn_decode (dqkv, n_tok, nq, nkv, hd, dpos, c.dk, c.dv, c.dtable, scratch, d0, 0));
  };
  late ();
  late_rows ();
  run0 ();
  CK (cudaGetLastError ());
  CK (cudaDeviceSynchronize ());
  CK (cudaMemset (d0, 0xff, (size_t) n * 4));
  late ();
  late_rows ();
  run0 ();
  CK (hone_k_quantize (d0, n_tok, nq * hd, &q0, NULL, 0, 0));
  CK (hone_k_pack_h16 (d0, NULL, n_tok, nq * hd, 0.f, &h0, 0));
  /* decode_step's form: int8 output for the o projection, an L2 prefetch in flight */
  HoneKPrefetch pf;
  memset (&pf, 0, sizeof pf);
  pf.p[0] = (const char *) c.dk;
  pf.n[0] = 4096;
  pf.p[1] = (const char *) c.dv;
  pf.n[1] = 128 * 3;
  pf.how = 1;
  late ();
  late_rows ();
  CK (hone_k_attn_decode_h16 (dqkv, n_tok, nq, nkv, hd, dpos, c.dk, c.dv, c.dtable, scratch, d1, &q1, &h1, &pf, bound,
                              0));
  CK (cudaGetLastError ());
  CK (cudaDeviceSynchronize ());
  set_variant (false, 0);
  const std::vector<float> o0 = dev_download<float> (d0, n), o1 = dev_download<float> (d1, n);
  const std::vector<int8_t> qa = dev_download<int8_t> (q0.q, n), qb = dev_download<int8_t> (q1.q, n);
  const std::vector<float2> da = dev_download<float2> (q0.ds, n / 32), db = dev_download<float2> (q1.ds, n / 32);
  size_t diff = memcmp (o0.data (), o1.data (), (size_t) n * 4) != 0;
  diff += memcmp (qa.data (), qb.data (), n) != 0;
  diff += memcmp (da.data (), db.data (), (size_t) n / 32 * 8) != 0;
  diff += dev_download<uint16_t> (h0.h, nh) != dev_download<uint16_t> (h1.h, nh);
  diff += dev_download<uint32_t> (h0.d, HONE_K_H16_DS (n)) != dev_download<uint32_t> (h1.d, HONE_K_H16_DS (n));
  std::vector<double> ref (n);
  for (int t = 0; t < n_tok; t++)
    for (int h = 0; h < nq; h++)
      attn_ref64 (c, &qkv[(size_t) t * W + h * hd], h, G, pos + t, &ref[((size_t) t * nq + h) * hd]);
  bool fin;
  const double e = rel_err (o0.data (), ref.data (), n, &fin);
  char what[200];
  const char vname[8] = { 'v', '3', shape ? shape : ' ', 0 };
  snprintf (what, sizeof what, "%s hd=%d %d/%d ctx=%d tok=%d%s%s%s%s%s%s%s%s", old ? "old" : vname, hd, nq, nkv, ctx,
            n_tok, scattered ? " scattered" : " identity", chunk ? " chunk=" : "",
            chunk ? std::to_string (chunk).c_str () : "", stale ? " stale-pos=-" : "",
            stale ? std::to_string (stale).c_str () : "", late_kv ? " late-kv" : "", bound ? " bound=" : "",
            bound ? std::to_string (bound).c_str () : "");
  check (fin && e < 1e-4 && diff == 0, what, diff ? (double) diff : e, 1e-4);
  paged_free (c);
  cudaFree (dqkv); cudaFree (dpos); cudaFree (d0); cudaFree (d1); cudaFree (scratch);
  cudaFree (q0.q); cudaFree (q0.ds); cudaFree (q1.q); cudaFree (q1.ds);
  cudaFree (h0.h); cudaFree (h0.d); cudaFree (h1.h); cudaFree (h1.d);
  cudaFree (dk_src); cudaFree (dv_src); cudaFree (drows);
}

/* version 4's switches (kernels/hone-k-attn-decode.cu): short contexts on
 * the one-cluster path (CL shapes), every page and split-count edge, the
 * two-level cluster combine (forced by a split size), and pos written late by
 * a PDL predecessor (the early read must be caught and redone) */
static void
check_v4 (char sh, bool small)
{
  if (small)
    {
      check_case (128, 32, 8, 129, 1, true, false, 0, sh);
      check_case (128, 32, 8, 700, 3, true, false, 0, sh, 100);
      check_case (64, 32, 4, 1500, 8, true, false, 0, sh, 600);
      check_case (128, 32, 8, 3001, 2, true, false, 64, sh);
      check_case (128, 32, 8, 129, 1, true, false, 0, sh, 0, true);
      check_case (64, 32, 4, 100, 8, true, false, 0, sh, 0, true);
      return;
    }
  for (int ctx : { 1, 2, 16, 17, 64, 65, 127, 128, 500, 1000, 1023, 1024, 1025, 1040, 2047, 4097, 32768 })
    check_case (128, 32, 8, ctx, 1, true, false, 0, sh);
  for (int nt : { 2, 5, 8 })
    {
      check_case (128, 32, 8, 37 + nt, nt, true, false, 0, sh);
      check_case (128, 32, 8, 1003 + nt, nt, true, false, 0, sh);
    }
  for (int ch : { 16, 64, 256, 100000 })
    check_case (128, 32, 8, 3001, 4, true, false, ch, sh);
  check_case (64, 8, 8, 900, 3, true, false, 0, sh);          /* G 1, hd 64, short */
  check_case (128, 64, 8, 516, 3, true, false, 0, sh);        /* G 8: three query groups */
  /* pos written late: same regime, another page count, short → two-level, 64 queries, a 20k context */
  check_case (128, 32, 8, 1000, 1, true, false, 0, sh, 1);
  check_case (128, 32, 8, 4097, 1, true, false, 0, sh, 3000);
  check_case (64, 32, 4, 1500, 8, true, false, 0, sh, 600);
  check_case (128, 8, 2, 20000, 2, true, false, 16, sh, 7000);
  /* this step's K/V rows written late (L, M copy the older rows before the wait) */
  for (int ctx : { 1, 16, 17, 128, 129, 1000, 1024, 4097 })
    check_case (128, 32, 8, ctx, 1, true, false, 0, sh, 0, true);
  for (int nt : { 2, 5, 8 })
    {
      check_case (128, 32, 8, 37 + nt, nt, true, false, 0, sh, 0, true);
      check_case (128, 32, 8, 1003 + nt, nt, true, false, 0, sh, 0, true);
    }
  check_case (64, 8, 8, 900, 3, true, false, 0, sh, 0, true);
  check_case (64, 32, 4, 47, 8, true, false, 16, sh, 0, true);
}

/* the tiny kernel (kernels/hone-k-attn-tiny.cu, shape T; one token only —
 * several take the default shapes; without a bound version 1, with one
 * version 4): every page and score-step edge up to its
 * 256 keys a pass, several passes past it, head dims 64/128, G 1..8, pos
 * written late (the guess must be caught and redone) and this step's K/V rows
 * written late (they, and only they, are copied after the wait) */
static void
check_tiny (bool small)
{
  if (small)
    {
      check_case (128, 32, 8, 129, 1, true, false, 0, 'T');
      check_case (64, 9, 3, 300, 1, true, false, 0, 'T');
      check_case (128, 32, 8, 200, 1, true, false, 0, 'T', 100);
      check_case (128, 32, 8, 129, 1, true, false, 0, 'T', 0, true);
      check_case (128, 32, 8, 129, 1, true, false, 0, 'T', 0, false, 256);
      check_case (64, 9, 3, 300, 1, true, false, 0, 'T', 0, false, 256);
      check_case (128, 32, 8, 200, 1, true, false, 0, 'T', 100, false, 256);
      check_case (128, 32, 8, 129, 1, true, false, 0, 'T', 0, true, 256);
      return;
    }
  for (int ctx : { 1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 130, 200, 255, 256, 257, 300, 513, 1000 })
    check_case (128, 32, 8, ctx, 1, true, false, 0, 'T');
  check_case (128, 32, 8, 129, 1, false, false, 0, 'T');
  for (int ctx : { 1, 33, 129, 256, 700 })
    {
      check_case (64, 9, 3, ctx, 1, true, false, 0, 'T');      /* SmolLM2's 9/3 heads, hd 64 */
      check_case (64, 8, 8, ctx, 1, true, false, 0, 'T');      /* G 1 */
      check_case (128, 64, 8, ctx, 1, true, false, 0, 'T');    /* G 8 */
      check_case (128, 16, 2, ctx, 1, true, false, 0, 'T');    /* Qwen-like 16/2 */
    }
  /* pos written late: the early guess is stale by 1, by a page, by more than a pass */
  check_case (128, 32, 8, 129, 1, true, false, 0, 'T', 1);
  check_case (128, 32, 8, 200, 1, true, false, 0, 'T', 100);
  check_case (64, 32, 4, 600, 1, true, false, 0, 'T', 500);
  /* this step's K/V rows written late */
  for (int ctx : { 1, 16, 17, 64, 65, 128, 129, 256, 257, 1000 })
    check_case (128, 32, 8, ctx, 1, true, false, 0, 'T', 0, true);
  check_case (64, 9, 3, 130, 1, true, false, 0, 'T', 0, true);
  /* several tokens with T forced: the default shapes serve them */
  check_case (128, 32, 8, 100, 4, true, false, 0, 'T');
  /* with a bound, as a captured step launches it (version 4: the pages read beside pos, bulk copies);
   * the bound is cut to the table's pages; past the bound: passes */
  for (int ctx : { 1, 2, 15, 63, 64, 65, 127, 128, 129, 130, 200, 255, 256, 257, 300, 1000 })
    check_case (128, 32, 8, ctx, 1, true, false, 0, 'T', 0, false, 256);
  for (int ctx : { 1, 65, 129, 256 })
    {
      check_case (64, 8, 8, ctx, 1, true, false, 0, 'T', 0, false, 256);     /* G 1 */
      check_case (128, 16, 8, ctx, 1, true, false, 0, 'T', 0, false, 256);   /* G 2 */
      check_case (128, 28, 4, ctx, 1, true, false, 0, 'T', 0, false, 256);   /* G 7 (Qwen2.5-7B) */
      check_case (64, 9, 3, ctx, 1, true, false, 0, 'T', 0, false, 256);
      check_case (128, 64, 8, ctx, 1, true, false, 0, 'T', 0, false, 256);
      check_case (128, 32, 8, ctx, 1, true, false, 0, 'T', 0, false, 160);
    }
  check_case (128, 32, 8, 129, 1, false, false, 0, 'T', 0, false, 256);
  check_case (128, 32, 8, 129, 1, true, false, 0, 'T', 1, false, 256);      /* pos written late */
  check_case (128, 32, 8, 200, 1, true, false, 0, 'T', 100, false, 256);
  check_case (64, 9, 3, 250, 1, true, false, 0, 'T', 200, false, 256);
  for (int ctx : { 1, 16, 64, 65, 128, 129, 256, 257 })                       /* this step's rows written late */
    check_case (128, 32, 8, ctx, 1, true, false, 0, 'T', 0, true, 256);
}

static void
run_checks (bool small, bool with_default)
{
  report ("== decode attention checks (f64 reference, rel err bound 1e-4) ==\n");
  if (small)
    {
      if (with_default)
        {
          check_case (128, 32, 8, 129, 1, true, false);
          check_case (128, 32, 8, 700, 3, true, false, 64);
          check_case (64, 8, 8, 200, 8, true, false, 16);
          check_case (64, 32, 4, 100, 8, true, false, 32);
          check_case (128, 32, 8, 129, 1, true, false, 0, 'B');
          check_case (128, 32, 8, 700, 3, true, false, 64, 'C');
          check_case (64, 32, 4, 100, 8, true, false, 32, 'D');
          check_case (128, 32, 8, 300, 2, true, false, 16, 'E');
          check_case (128, 32, 8, 300, 2, true, true);
          check_case (128, 16, 8, 1500, 1, true, false);        /* 2 queries a block: 2 groups combine */
        }
      for (char sh : SHAPES)
        if (strchr ("GHIJKLMNO", sh))
          check_v4 (sh, true);
        else if (sh == 'T')
          check_tiny (true);
      return;
    }
  if (with_default)
    {
  /* fewer queries a block than 4-value columns for the threads (Qwen3-0.6B's G 2, G 1): the last
   * block's threads split the splits into 2 or 4 groups that add up in shared memory */
  for (int ctx : { 100, 2100, 4096, 20000 })
    {
      check_case (128, 16, 8, ctx, 1, true, false);
      check_case (128, 8, 8, ctx, 1, true, false);
    }
  check_case (64, 8, 4, 3000, 1, true, false);

  for (int ctx : { 1, 2, 15, 16, 17, 63, 64, 65, 127, 128, 129, 130, 1000, 1025, 4096, 4097, 16385, 32768 })
    check_case (128, 32, 8, ctx, 1, true, false);
  check_case (128, 32, 8, 4097, 1, false, false);
  /* several new tokens (causal among them); G·n_tok > 8 takes several query groups */
  for (int nt : { 2, 3, 4, 5, 8 })
    {
      check_case (128, 32, 8, 37 + nt, nt, true, false);
      check_case (128, 32, 8, 1003 + nt, nt, true, false);
    }
  check_case (128, 8, 2, 32768, 8, true, false);
  /* split sizes: one split, many, the 64-split cap with long splits */
  for (int ch : { 16, 32, 64, 256, 100000 })
    {
      check_case (128, 32, 8, 1000, 1, true, false, ch);
      check_case (128, 32, 8, 3001, 4, true, false, ch);
    }
  check_case (128, 8, 2, 20000, 2, true, false, 16);
  /* head dim 64 and GQA ratios 1, 4, 8 */
  for (int nt : { 1, 3, 8 })
    {
      check_case (64, 8, 8, 130 + nt, nt, true, false);      /* G 1 */
      check_case (64, 12, 3, 2000 + nt, nt, true, false);    /* G 4 */
      check_case (64, 32, 4, 640 + nt, nt, true, false);     /* G 8: 64 queries at 8 tokens */
      check_case (128, 64, 8, 513 + nt, nt, true, false);    /* G 8, hd 128 */
      check_case (128, 8, 8, 4000 + nt, nt, true, false);    /* G 1, hd 128 */
    }
  check_case (64, 9, 3, 577, 1, true, false);                /* SmolLM2's 9/3 heads */
  check_case (64, 9, 3, 5000, 7, true, false);
  /* a split over more than 32 pages (130k keys, 64 splits of ~2k) */
  check_case (64, 1, 1, 131000, 1, true, false);
  check_case (64, 4, 1, 131000, 2, true, false);
  /* pos written late by a PDL predecessor (the default kernel reads it after the wait) */
  check_case (128, 32, 8, 4097, 1, true, false, 0, 0, 3000);
  check_case (64, 32, 4, 1500, 8, true, false, 0, 0, 600);
  /* this step's K/V rows written late by a PDL predecessor, as q|k|v does */
  check_case (128, 32, 8, 129, 1, true, false, 0, 0, 0, true);
  check_case (128, 32, 8, 4097, 2, true, false, 0, 0, 0, true);
  check_case (64, 32, 4, 648, 8, true, false, 0, 0, 0, true);
    }
  /* the block shapes (HONE_ATTN_V3) */
  for (char sh : SHAPES)
    {
      check_case (128, 32, 8, 129, 1, true, false, 0, sh);
      check_case (128, 32, 8, 16385, 1, true, false, 0, sh);
      check_case (128, 32, 8, 3001, 4, true, false, 64, sh);
      check_case (128, 32, 8, 1011, 8, true, false, 16, sh);
      check_case (64, 32, 4, 648, 8, true, false, 0, sh);
      check_case (64, 9, 3, 5000, 7, true, false, 32, sh);
      check_case (64, 4, 1, 131000, 2, true, false, 0, sh);
      if (strchr ("GHIJKLMNO", sh) && shapes_named)
        check_v4 (sh, false);
      if (sh == 'T')
        check_tiny (false);
    }
  if (with_default)
    {
      /* session 2's kernel, still selectable */
      for (int ctx : { 1, 129, 4097 })
        check_case (128, 32, 8, ctx, 1, true, true);
      check_case (128, 32, 8, 1005, 5, true, true);
      check_case (64, 32, 4, 648, 8, true, true);
    }
}

/* ---- benchmarks ------------------------------------------------------------ */

struct BenchArg {
  int hd, nq, nkv, n_tok, layers, *layer;
  const float *qkv;
  const int32_t *pos, *table;
  void **k, **v;
  void *scratch;
  float *out;
};

static void
bench_fn (void *p)
{
  BenchArg *b = (BenchArg *) p;
  const int l = (*b->layer)++ % b->layers;
  CK (hone_k_attn_decode (b->qkv, b->n_tok, b->nq, b->nkv, b->hd, b->pos, b->k[l], b->v[l], b->table, b->scratch,
                          b->out, 0));
}

/* Time one configuration: median µs a launch, back-to-back launches (PDL as
 * decode_step runs them), the KV of `layers` distinct layers in rotation. */
static double
bench_one (BenchArg &b, int ctx, int layers)
{
  const int pos = ctx - b.n_tok;
  CK (cudaMemcpy ((void *) b.pos, &pos, 4, cudaMemcpyHostToDevice));
  b.layers = layers;
  return 1e3 * bench_ms (0, 64, bench_fn, &b);
}

/* The launch-and-latency floor under the kernel (bench only): the same grid
 * as version 3 (8 × 64 blocks of 128 threads, PDL, blocks y > 0 leave after
 * the wait); after the wait, mode 0 stores at once, 1 reads pos first, 2 pos
 * then a block-table entry, 3 pos, table, then 16 bytes of K: the dependent
 * round trips of the short-context chain, one at a time. */
__global__ void
floor_kernel (int mode, const int32_t *pos, const int32_t *table, const int4 *kv, float *out)
{
  pdl_trigger ();
  pdl_wait ();
  if (blockIdx.y)
    return;
  int v = 0;
  if (mode >= 1)
    v = __ldcg (pos);
  if (mode >= 2)
    v = __ldcg (table + (v >> 24));
  float f = (float) v;
  if (mode >= 3)
    f += (float) __ldcg (kv + (size_t) (v >> 24) * 4096 + threadIdx.x).x;
  out[blockIdx.x * blockDim.x + threadIdx.x] = f;
}

struct FloorArg {
  int mode;
  const int32_t *pos, *table;
  const int4 *kv;
  float *out;
};

static void
floor_fn (void *p)
{
  FloorArg *f = (FloorArg *) p;
  CK (hone_k_launch (floor_kernel, dim3 (8, HONE_K_ATTN_MAX_SPLITS), dim3 (128), 0, (cudaStream_t) 0, f->mode, f->pos,
                     f->table, f->kv, f->out));
}

/* KV of L layers for the 8B shape up to 32k keys, identity table */
struct BenchEnv {
  static const int hd = 128, nq = 32, nkv = 8, L = 8;
  int32_t *table, *pos;
  void *k[L], *v[L], *scratch;
  float *qkv, *out;
  int layer;
};

static void
env_make (BenchEnv &e)
{
  const int max_ctx = 32768, pages = max_ctx / HONE_K_KV_BLOCK + 1;
  std::vector<int32_t> t (pages);
  for (int i = 0; i < pages; i++) t[i] = i;
  e.table = dev_upload (t);
  const size_t kvb = (size_t) pages * e.nkv * HONE_K_KV_BLOCK * e.hd * 2;
  for (int l = 0; l < e.L; l++)
    {
      CK (cudaMalloc (&e.k[l], kvb));
      CK (cudaMalloc (&e.v[l], kvb));
      fill_random<<<1024, 256>>> ((uint8_t *) e.k[l], kvb, 1 + 2 * l, 3);
      fill_random<<<1024, 256>>> ((uint8_t *) e.v[l], kvb, 2 + 2 * l, 3);
    }
  const int W = (e.nq + 2 * e.nkv) * e.hd;
  CK (cudaMalloc (&e.qkv, 8 * W * 4));
  CK (cudaMalloc (&e.out, 8 * e.nq * e.hd * 4));
  fill_random<<<64, 256>>> ((uint8_t *) e.qkv, 8 * W * 4, 3, 3);
  const size_t sb = hone_k_attn_scratch_bytes (e.nq, e.nkv, e.hd, 8);
  CK (cudaMalloc (&e.scratch, sb));
  CK (cudaMemset (e.scratch, 0, sb));
  CK (cudaMalloc (&e.pos, 4));
  e.layer = 0;
  CK (cudaDeviceSynchronize ());
}

static void
env_free (BenchEnv &e)
{
  for (int l = 0; l < e.L; l++) { cudaFree (e.k[l]); cudaFree (e.v[l]); }
  cudaFree (e.table); cudaFree (e.qkv); cudaFree (e.out); cudaFree (e.scratch); cudaFree (e.pos);
}

/* --profile: a few launches per configuration for ncu (-k regex:attn3): 2 a
 * configuration, the KV of 8 layers in rotation; the second is the one to read */
static void
run_profile (void)
{
  BenchEnv e;
  env_make (e);
  BenchArg b = { e.hd, e.nq, e.nkv, 1, e.L, &e.layer, e.qkv, e.pos, e.table, e.k, e.v, e.scratch, e.out };
  const struct { int ctx; char shape; } cfgs[] = { { 4096, 'A' }, { 16384, 'A' }, { 4096, 'I' }, { 16384, 'I' },
                                                   { 128, 'A' }, { 128, 'I' } };
  for (auto c : cfgs)
    {
      if (c.shape != 'A' && SHAPES.find (c.shape) == std::string::npos)
        continue;
      set_variant (false, 0, c.shape);
      const int pos = c.ctx - 1;
      CK (cudaMemcpy ((void *) b.pos, &pos, 4, cudaMemcpyHostToDevice));
      for (int i = 0; i < 2; i++)
        bench_fn (&b);
      CK (cudaDeviceSynchronize ());
      report ("profiled: ctx %d shape %c (launches %d, %d of attn3)\n", c.ctx, c.shape, 2, 2);
    }
  set_variant (false, 0);
  env_free (e);
}

static void
run_bench (void)
{
  BenchEnv e;
  env_make (e);
  const int hd = e.hd, nq = e.nq, nkv = e.nkv, L = e.L;
  BenchArg b = { hd, nq, nkv, 1, L, &e.layer, e.qkv, e.pos, e.table, e.k, e.v, e.scratch, e.out };

  report ("\nblocks an SM (occupancy API), hd 128 / 64; clusters of 8 the chip holds at once (hd 128):");
  for (char sh : SHAPES)
    {
      report ("  %s: %d/%d", shape_name (sh), hone_k_attn3_occupancy (128, sh), hone_k_attn3_occupancy (64, sh));
      if (strchr ("HIJKL", sh))
        report (" (%d clusters)", -hone_k_attn3_occupancy_ex (128, sh, 1));
    }
  report ("\n");

  /* the floor: launch + PDL wait + dependent round trips, no attention */
  {
    FloorArg f = { 0, e.pos, e.table, (const int4 *) e.k[0], e.out };
    const int pos = 127;
    CK (cudaMemcpy (e.pos, &pos, 4, cudaMemcpyHostToDevice));
    report ("\n== floor (same grid, PDL, no attention), us: store only / pos / pos+table / pos+table+K ==\n ");
    for (int m = 0; m < 4; m++)
      {
        f.mode = m;
        report (" %8.2f", 1e3 * bench_ms (0, 64, floor_fn, &f));
      }
    report ("\n");
  }

  const int ctxs[] = { 128, 512, 1024, 4096, 16384, 32768 };
  report ("\n== decode attention, one layer, 32/8 heads x 128, 1 token, us (KV of 8 layers in rotation: HBM) ==\n");
  report ("%7s %9s", "ctx", "old");
  for (char sh : SHAPES) report ("  %9c", sh);
  report ("   best GB/s  %%4.52\n");
  for (int ctx : ctxs)
    {
      const double bytes = 2.0 * ctx * nkv * hd * 2;
      set_variant (true, 0);
      report ("%7d %9.2f", ctx, bench_one (b, ctx, L));
      double best = 1e30;
      for (char sh : SHAPES)
        {
          set_variant (false, 0, sh);
          const double u = bench_one (b, ctx, L);
          best = std::min (best, u);
          report ("  %9.2f", u);
        }
      report ("   %8.0f  %5.1f%%\n", bytes / (best * 1e-6) / 1e9, 100 * bytes / (best * 1e-6) / READ_CEIL);
    }
  report ("again (spread: the same runs a second time):\n");
  for (int ctx : { 128, 1024, 16384 })
    {
      report ("%7d %9s", ctx, "");
      for (char sh : SHAPES)
        {
          set_variant (false, 0, sh);
          report ("  %9.2f", bench_one (b, ctx, L));
        }
      report ("\n");
    }
  report ("L2-resident (one layer again and again): ");
  for (int ctx : { 128, 4096, 16384 })
    {
      set_variant (false, 0, 'A');
      const double ua = bench_one (b, ctx, 1);
      set_variant (false, 0, 'I');
      report (" ctx %d A %.2f I %.2f;", ctx, ua, bench_one (b, ctx, 1));
    }
  report ("\n");

  report ("\n== split size (HONE_ATTN_CHUNK: splits = ctx / chunk, 1..64) per shape, us ==\n");
  const int chunks[] = { 32, 64, 128, 256 };
  for (char sh : SHAPES)
    {
      if (!strchr ("AEGHIJKLMNO", sh))
        continue;
      report ("%-14s", shape_name (sh));
      for (int ch : chunks) report (" %8d", ch);
      report ("\n");
      for (int ctx : { 1024, 4096, 16384, 32768 })
        {
          report ("%14d", ctx);
          for (int ch : chunks)
            {
              set_variant (false, ch, sh);
              report (" %8.2f", bench_one (b, ctx, L));
            }
          report ("\n");
        }
    }
  set_variant (false, 0);

  report ("\n== several tokens (speculative decoding), us ==\n");
  report ("%7s %4s %9s", "ctx", "tok", "old");
  for (char sh : SHAPES) report ("  %9c", sh);
  report ("\n");
  for (int nt : { 2, 4, 8 })
    for (int ctx : { 128, 1024, 4096, 16384 })
      {
        b.n_tok = nt;
        set_variant (true, 0);
        report ("%7d %4d %9.2f", ctx, nt, bench_one (b, ctx, L));
        for (char sh : SHAPES)
          {
            set_variant (false, 0, sh);
            report ("  %9.2f", bench_one (b, ctx, L));
          }
        report ("\n");
      }
  b.n_tok = 1;

  report ("\n== PDL off (each launch waits for the last), 1 token, us ==\n");
  hone_k_set_pdl (0);
  for (int ctx : { 128, 1024, 4096, 16384 })
    {
      set_variant (true, 0);
      report ("ctx %6d: old %8.2f", ctx, bench_one (b, ctx, L));
      for (char sh : SHAPES)
        {
          set_variant (false, 0, sh);
          report ("  %c %8.2f", sh, bench_one (b, ctx, L));
        }
      report ("\n");
    }
  hone_k_set_pdl (-1);

  report ("\n== head dim 64 (32/8 heads), 1 token, us ==\n");
  b.hd = 64;
  for (int ctx : { 128, 1024, 4096, 16384, 32768 })
    {
      set_variant (true, 0);
      report ("ctx %6d: old %8.2f", ctx, bench_one (b, ctx, L));
      for (char sh : SHAPES)
        {
          set_variant (false, 0, sh);
          report ("  %c %8.2f", sh, bench_one (b, ctx, L));
        }
      report ("\n");
    }
  set_variant (false, 0);
  env_free (e);
}

int
main (int argc, char **argv)
{
  bool do_check = false, do_bench = false, small = false, with_default = true, profile = false;
  for (int i = 1; i < argc; i++)
    {
      if (!strcmp (argv[i], "--check")) do_check = true;
      else if (!strcmp (argv[i], "--bench")) do_bench = true;
      else if (!strcmp (argv[i], "--small")) do_check = small = true;
      else if (!strcmp (argv[i], "--no-default")) with_default = false;
      else if (!strcmp (argv[i], "--profile")) profile = true;
      else if (!strcmp (argv[i], "--shapes") && i + 1 < argc)
        {
          SHAPES.clear ();
          shapes_named = true;
          for (const char *c = argv[++i]; *c; c++)
            if (strchr (ALL_SHAPES, *c))
              SHAPES += *c;
        }
      else
        {
          fprintf (stderr, "usage: %s [--check] [--small] [--bench] [--profile] [--shapes LETTERS] [--no-default]\n",
                   argv[0]);
          return 2;
        }
    }
  if (!do_check && !do_bench && !profile)
    do_check = do_bench = true;
  const char *out = getenv ("OUT");
  if (out && *out)
    {
      char path[1024];
      snprintf (path, sizeof path, "%s/results.txt", out);
      results = fopen (path, "a");
    }
  cudaDeviceProp prop;
  CK (cudaGetDeviceProperties (&prop, 0));
  report ("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  if (profile)
    run_profile ();
  if (do_check)
    run_checks (small, with_default);
  if (do_bench)
    run_bench ();
  report ("\n%d passed, %d failed\n", n_pass, n_fail);
  return n_fail ? 1 : 0;
}
