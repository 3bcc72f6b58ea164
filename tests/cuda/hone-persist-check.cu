/* hone-persist-check.cu — checks and benchmark of the persistent decode layer
 * kernel prototype (tests/cuda/hone-persist-proto.cu) against f64 references and against
 * the existing per-GEMV kernels, in one process.
 *
 *   hone-persist-check --check   small and 8B-shape checks (compute-sanitizer friendly with --small)
 *   hone-persist-check --small   the small checks only
 *   hone-persist-check --bench   barrier cost; 32 layers of o → norm → gate|up → down → norm → qkv,
 *                                existing kernels vs persistent variants (CUDA graphs, weights rotated)
 *
 * Plain CUDA, built by nvcc against the library's kernels (libhoneall.so as
 * tests/cuda/make-bundle-shared.sh makes it, or kernels/libhone-kernels.a):
 *   nvcc -std=c++17 -O3 -lineinfo -gencode arch=compute_90,code=sm_90 -Ikernels -Itests/cuda \
 *        tests/cuda/hone-persist-check.cu tests/cuda/hone-persist-proto.cu -o hone-persist-check \
 *        -L DIR -lhoneall -lcublas -lcublasLt
 * Results also go to $OUT/persist.txt when $OUT is set.
 */
#include "hone-kernels.h"
#include "hone-persist-proto.h"
#include <algorithm>
#include "hone-check-util.cuh"

static const float EPS = 1e-5f;

/* ---- host model of one layer --------------------------------------------- */

struct HostMat {
  int type, rows, cols;
  std::vector<uint16_t> bf;   /* BF16 values */
  std::vector<uint8_t> q;     /* Q4_0 quants, [rows][cols/2] in GPU order */
  std::vector<uint16_t> s;    /* Q4_0 f16 d [rows][cols/32] */
  double at (int r, int c) const
  {
    if (type == HONE_K_BF16)
      return bf2f (bf[(size_t) r * cols + c]);
    const int blk = c / 32, j = c % 32;
    const uint8_t byte = q[(size_t) r * (cols / 2) + blk * 16 + (j & 15)];
    const int nib = j < 16 ? (byte & 15) : (byte >> 4);
    return (double) h2f (s[(size_t) r * (cols / 32) + blk]) * (nib - 8);
  }
};

static HostMat
host_mat (int type, int rows, int cols)
{
  HostMat m;
  m.type = type;
  m.rows = rows;
  m.cols = cols;
  const double amp = 1.7 / sqrt ((double) cols);   /* keeps outputs O(1) */
  if (type == HONE_K_BF16)
    {
      m.bf.resize ((size_t) rows * cols);
      for (auto &v : m.bf)
        v = f2bf ((float) ((2 * rng_uniform () - 1) * amp));
    }
  else
    {
      m.q.resize ((size_t) rows * cols / 2);
      for (size_t i = 0; i < m.q.size (); i += 8)
        {
          const uint64_t z = rng_u64 ();
          for (int k = 0; k < 8 && i + k < m.q.size (); k++)
            m.q[i + k] = (uint8_t) (z >> (8 * k));
        }
      m.s.resize ((size_t) rows * cols / 32);
      for (auto &v : m.s)
        v = f2h ((float) (amp / 4.6 * (0.5 + rng_uniform ())));
    }
  return m;
}

static void
mat_upload (const HostMat &m, const void **q, const void **s)
{
  if (m.type == HONE_K_BF16)
    {
      *q = dev_upload (m.bf);
      *s = NULL;
    }
  else
    {
      *q = dev_upload (m.q);
      *s = dev_upload (m.s);
    }
}

static std::vector<float>
rand_vec (int n, double mean, double sd)
{
  std::vector<float> v (n);
  for (auto &x : v)
    x = (float) (mean + sd * rng_normal ());
  return v;
}

struct HostLayer {
  HostMat wo, wgu, wdown, wqkv;
  std::vector<float> attn, ffn_norm, attn_norm;
};

static std::vector<double>
matvec (const HostMat &m, const std::vector<double> &x)
{
  std::vector<double> y (m.rows);
  for (int r = 0; r < m.rows; r++)
    {
      double s = 0;
      for (int c = 0; c < m.cols; c++)
        s += m.at (r, c) * x[c];
      y[r] = s;
    }
  return y;
}

static std::vector<double>
rmsnorm (const std::vector<double> &x, const std::vector<float> &g)
{
  double ss = 0;
  for (double v : x)
    ss += v * v;
  const double sc = 1 / sqrt (ss / x.size () + EPS);
  std::vector<double> y (x.size ());
  for (size_t i = 0; i < x.size (); i++)
    y[i] = x[i] * sc * g[i];
  return y;
}

/* f64 reference of the layers; q8: the int8 activation quantization the Q4_0 path applies */
static void
reference (const std::vector<HostLayer> &L, std::vector<double> &h, std::vector<std::vector<double>> &qkv, bool q8)
{
  auto Q = [&] (const std::vector<double> &x) { return q8 ? act_q8_roundtrip (x) : x; };
  qkv.clear ();
  for (const HostLayer &l : L)
    {
      std::vector<double> a (l.attn.begin (), l.attn.end ());
      std::vector<double> o = matvec (l.wo, Q (a));
      for (size_t i = 0; i < h.size (); i++)
        h[i] += o[i];
      std::vector<double> gu = matvec (l.wgu, Q (rmsnorm (h, l.ffn_norm)));
      std::vector<double> act (gu.size () / 2);
      for (size_t i = 0; i < act.size (); i++)
        act[i] = gu[2 * i] / (1 + exp (-gu[2 * i])) * gu[2 * i + 1];
      std::vector<double> dn = matvec (l.wdown, Q (act));
      for (size_t i = 0; i < h.size (); i++)
        h[i] += dn[i];
      qkv.push_back (matvec (l.wqkv, Q (rmsnorm (h, l.attn_norm))));
    }
}

/* ---- checks -------------------------------------------------------------- */

struct CheckCase {
  int type, H, F, Q, n_layers, grid, prefetch, unroll, async, barrier, dyn;
};

static int n_sms;

static void
check_case (const CheckCase &cc)
{
  char name[200];
  snprintf (name, sizeof name, "%s H%d F%d Q%d L%d grid %d pf %d U%d st %d bar %d dyn %d",
            cc.type == HONE_K_BF16 ? "BF16" : "Q4_0", cc.H, cc.F, cc.Q, cc.n_layers, cc.grid, cc.prefetch, cc.unroll,
            cc.async, cc.barrier, cc.dyn);
  std::vector<HostLayer> L (cc.n_layers);
  std::vector<HoneKPersistLayer> dl (cc.n_layers);
  std::vector<float *> qkv_dev (cc.n_layers);
  for (int l = 0; l < cc.n_layers; l++)
    {
      L[l].wo = host_mat (cc.type, cc.H, cc.H);
      L[l].wgu = host_mat (cc.type, 2 * cc.F, cc.H);
      L[l].wdown = host_mat (cc.type, cc.H, cc.F);
      L[l].wqkv = host_mat (cc.type, cc.Q, cc.H);
      L[l].attn = rand_vec (cc.H, 0, 1);
      L[l].ffn_norm = rand_vec (cc.H, 1, 0.2);
      L[l].attn_norm = rand_vec (cc.H, 1, 0.2);
      HoneKPersistLayer &d = dl[l];
      mat_upload (L[l].wo, &d.wo_q, &d.wo_s);
      mat_upload (L[l].wgu, &d.wgu_q, &d.wgu_s);
      mat_upload (L[l].wdown, &d.wdown_q, &d.wdown_s);
      mat_upload (L[l].wqkv, &d.wqkv_q, &d.wqkv_s);
      d.attn = dev_upload (L[l].attn);
      d.ffn_norm = dev_upload (L[l].ffn_norm);
      d.attn_norm = dev_upload (L[l].attn_norm);
      qkv_dev[l] = (float *) dev_poisoned ((size_t) cc.Q * 4);
      d.qkv = qkv_dev[l];
    }
  const std::vector<float> h0 = rand_vec (cc.H, 0, 1);
  std::vector<double> href (h0.begin (), h0.end ()), hplain = href;
  std::vector<std::vector<double>> qref, qplain;
  const bool q4 = cc.type == HONE_K_Q4_0;
  reference (L, href, qref, q4);
  if (q4)
    reference (L, hplain, qplain, false);

  HoneKPersistLayer *layers = dev_upload (dl);
  float *h = dev_upload (h0);
  float *act = (float *) dev_poisoned ((size_t) cc.F * 4);
  unsigned *sync;
  CK (cudaMalloc (&sync, 64));
  CK (cudaMemset (sync, 0, 64));
  HoneKPersistArgs a;
  memset (&a, 0, sizeof a);
  a.type = cc.type;
  a.hidden = cc.H;
  a.ffn = cc.F;
  a.qkv_rows = cc.Q;
  a.n_layers = cc.n_layers;
  a.layers = layers;
  a.h = h;
  a.act = act;
  a.eps = EPS;
  a.sync = sync;
  a.grid = cc.grid;
  a.prefetch = cc.prefetch;
  a.unroll = cc.unroll;
  a.cooperative = 1;
  a.stage_async = cc.async;
  a.barrier = cc.barrier;
  a.dyn = cc.dyn;
  std::vector<float> first_h, first_q;
  for (int run = 0; run < 2; run++)
    {
      CK (cudaMemcpy (h, h0.data (), h0.size () * 4, cudaMemcpyHostToDevice));
      for (int l = 0; l < cc.n_layers; l++)
        CK (cudaMemset (qkv_dev[l], 0xff, (size_t) cc.Q * 4));
      CK (hone_k_decode_persist (&a, 0));
      CK (cudaGetLastError ());
      std::vector<float> gh = dev_download<float> (h, cc.H);
      std::vector<float> gq;
      double eq = 0;
      bool fin_q = true;
      for (int l = 0; l < cc.n_layers; l++)
        {
          std::vector<float> g = dev_download<float> (qkv_dev[l], cc.Q);
          bool f;
          eq = std::max (eq, rel_err (g.data (), qref[l].data (), cc.Q, &f));
          fin_q = fin_q && f;
          gq.insert (gq.end (), g.begin (), g.end ());
        }
      bool fin_h;
      const double eh = rel_err (gh.data (), href.data (), cc.H, &fin_h);
      const double bound = q4 ? 2e-3 : 1e-4;
      char what[300];
      if (run == 0)
        {
          snprintf (what, sizeof what, "%s: h vs f64", name);
          check (fin_h && eh < bound, what, eh, bound);
          snprintf (what, sizeof what, "%s: qkv vs f64", name);
          check (fin_q && eq < bound, what, eq, bound);
          if (q4)
            {
              std::vector<double> all;
              for (auto &v : qplain)
                all.insert (all.end (), v.begin (), v.end ());
              /* Not a check of the kernel (it matches the int8-emulating f64 reference above to ~1e-7 and the
               * existing kernels to ~1e-7): how far the int8 activation scheme moves this random model's
               * output. Call 2 saw 0.003-0.068 over the cases, so it is printed, not bounded. */
              const double e2 = rel_err (gq.data (), all.data (), gq.size (), &fin_q);
              report ("INFO  %-*s %.3g\n", HONE_CHECK_WIDTH, "  qkv vs f64 without int8 activations", e2);
            }
          first_h = gh;
          first_q = gq;
        }
      else
        {
          const bool same = memcmp (gh.data (), first_h.data (), gh.size () * 4) == 0
                            && memcmp (gq.data (), first_q.data (), gq.size () * 4) == 0;
          snprintf (what, sizeof what, "%s: run 2 same bits as run 1", name);
          check (same, what, same ? 0 : 1, 0);
          unsigned sv[16];
          CK (cudaMemcpy (sv, sync, 64, cudaMemcpyDeviceToHost));
          unsigned others = 0;
          for (int i = 2; i < 16; i++)
            others |= sv[i];
          snprintf (what, sizeof what, "%s: exit and work counters back to 0", name);
          check (others == 0, what, others, 0);
          const unsigned want = 2u * (4u * cc.n_layers - 1u);
          if (cc.barrier == 0)
            {
              snprintf (what, sizeof what, "%s: barrier words (0, %u) after 2 runs", name, want);
              check (sv[0] == 0 && sv[1] == want, what, (double) sv[0] + fabs ((double) sv[1] - want), 0);
            }
          else
            {
              unsigned long long c64;
              memcpy (&c64, sv, 8);
              const unsigned long long w64 = (unsigned long long) want * (cc.grid ? cc.grid : 2 * n_sms);
              snprintf (what, sizeof what, "%s: barrier counter %llu after 2 runs", name, w64);
              check (c64 == w64, what, fabs ((double) c64 - (double) w64), 0);
            }
        }
    }
  for (int l = 0; l < cc.n_layers; l++)
    {
      HoneKPersistLayer &d = dl[l];
      cudaFree ((void *) d.wo_q); cudaFree ((void *) d.wo_s); cudaFree ((void *) d.wgu_q); cudaFree ((void *) d.wgu_s);
      cudaFree ((void *) d.wdown_q); cudaFree ((void *) d.wdown_s); cudaFree ((void *) d.wqkv_q);
      cudaFree ((void *) d.wqkv_s); cudaFree ((void *) d.attn); cudaFree ((void *) d.ffn_norm);
      cudaFree ((void *) d.attn_norm); cudaFree (d.qkv);
    }
  cudaFree (layers); cudaFree (h); cudaFree (act); cudaFree (sync);
}

/* ---- benchmark ----------------------------------------------------------- */

struct DevSet {   /* one layer's weights on the device (rotated sets) */
  HoneKMatrix wo, wgu, wdown, wqkv;
  float *ffn_norm, *attn_norm;
};

static void
dev_mat (HoneKMatrix *m, int type, int rows, int cols, uint64_t seed)
{
  size_t qb = 0, sb = 0;
  hone_k_matrix_bytes (type, rows, cols, &qb, &sb);
  m->type = type;
  m->rows = rows;
  m->cols = cols;
  m->group = 0;
  CK (cudaMalloc (&m->q, qb + 16));
  fill_random<<<1024, 256>>> ((uint8_t *) m->q, qb, seed, type == HONE_K_BF16 ? 1 : 0);
  m->s = NULL;
  if (sb)
    {
      CK (cudaMalloc (&m->s, sb + 16));
      fill_random<<<1024, 256>>> ((uint8_t *) m->s, sb, seed ^ 0x5555, 2);
    }
  CK (cudaGetLastError ());
}

static double
graph_ms (cudaGraphExec_t ge, cudaStream_t s)
{
  cudaEvent_t e0, e1;
  CK (cudaEventCreate (&e0));
  CK (cudaEventCreate (&e1));
  for (int i = 0; i < 3; i++)
    CK (cudaGraphLaunch (ge, s));
  std::vector<float> ts;
  for (int it = 0; it < 7; it++)
    {
      CK (cudaEventRecord (e0, s));
      for (int i = 0; i < 10; i++)
        CK (cudaGraphLaunch (ge, s));
      CK (cudaEventRecord (e1, s));
      CK (cudaEventSynchronize (e1));
      float ms;
      CK (cudaEventElapsedTime (&ms, e0, e1));
      ts.push_back (ms / 10);
    }
  CK (cudaGetLastError ());
  std::sort (ts.begin (), ts.end ());
  cudaEventDestroy (e0);
  cudaEventDestroy (e1);
  return ts[3];
}

typedef int (*EnqueueFn) (void *ctx, cudaStream_t s);

/* capture fn into a graph and time it; returns ms or -1 (with the error printed) */
static double
time_graph (EnqueueFn fn, void *ctx, cudaStream_t s, const char *what)
{
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK (cudaStreamBeginCapture (s, cudaStreamCaptureModeGlobal));
  const int r = fn (ctx, s);
  const cudaError_t ec = cudaStreamEndCapture (s, &g);
  if (r || ec != cudaSuccess)
    {
      report ("  %s: capture failed (%s / %s)\n", what, cudaGetErrorString ((cudaError_t) r), cudaGetErrorString (ec));
      cudaGetLastError ();
      return -1;
    }
  const cudaError_t ei = cudaGraphInstantiate (&ge, g, 0);
  if (ei != cudaSuccess)
    {
      report ("  %s: instantiate failed (%s)\n", what, cudaGetErrorString (ei));
      cudaGetLastError ();
      cudaGraphDestroy (g);
      return -1;
    }
  const double ms = graph_ms (ge, s);
  cudaGraphExecDestroy (ge);
  cudaGraphDestroy (g);
  return ms;
}

struct BenchCtx {
  int type, H, F, Q, n_layers, nsets;
  std::vector<DevSet> sets;
  float *h, *act, *qkv, *attn;   /* qkv [n_layers][Q], attn [n_layers][H] */
  HoneKActQ8 xq, attn_q;         /* attn_q [n_layers] quantized attention outputs */
  HoneKPersistLayer *layers;     /* device [n_layers] */
  unsigned *sync;
  HoneKPersistArgs pa;
  int per_layer;                 /* persistent: one launch a layer (else one for all) */
  int phase = -1;                /* enqueue_old: only this phase (-1 all) */
};

static int
enqueue_old (void *vc, cudaStream_t s)
{
  BenchCtx *c = (BenchCtx *) vc;
  const bool q4 = c->type == HONE_K_Q4_0;
  for (int l = 0; l < c->n_layers; l++)
    {
      const DevSet &w = c->sets[l % c->nsets];
      HoneKGemvOp op;
      if (c->phase < 0 || c->phase == 0)
        {
          /* o (+ residual): BF16 reads attention's f32 output, Q4_0 the int8 copy attention writes */
          memset (&op, 0, sizeof op);
          op.w = &w.wo;
          op.n_tok = 1;
          op.res = c->h;
          op.y = c->h;
          op.epilogue = HONE_K_EPI_ADD;
          HoneKActQ8 aq = { c->attn_q.q + (size_t) l * c->H, c->attn_q.ds + (size_t) l * (c->H / 32) };
          if (q4)
            op.xq = &aq;
          else
            op.x = c->attn + (size_t) l * c->H;
          if (int r = hone_k_gemv_ex (&op, s)) return r;
        }
      if (c->phase < 0 || c->phase == 1)
        {
          /* gate|up (+ SwiGLU) of RMSNorm(h) */
          memset (&op, 0, sizeof op);
          op.w = &w.wgu;
          op.n_tok = 1;
          op.y = c->act;
          op.epilogue = HONE_K_EPI_SWIGLU;
          op.eps = EPS;
          if (q4)
            {
              if (int r = hone_k_rmsnorm (c->h, w.ffn_norm, 1, c->H, EPS, NULL, &c->xq, NULL, 0, s)) return r;
              op.xq = &c->xq;
            }
          else
            {
              op.x = c->h;
              op.norm_g = w.ffn_norm;
            }
          if (int r = hone_k_gemv_ex (&op, s)) return r;
        }
      if (c->phase < 0 || c->phase == 2)
        {
          /* down (+ residual) */
          memset (&op, 0, sizeof op);
          op.w = &w.wdown;
          op.n_tok = 1;
          op.res = c->h;
          op.y = c->h;
          op.epilogue = HONE_K_EPI_ADD;
          if (q4)
            {
              if (int r = hone_k_quantize (c->act, 1, c->F, &c->xq, NULL, 0, s)) return r;
              op.xq = &c->xq;
            }
          else
            op.x = c->act;
          if (int r = hone_k_gemv_ex (&op, s)) return r;
        }
      if (c->phase < 0 || c->phase == 3)
        {
          /* next layer's qkv of RMSNorm(h), stored */
          memset (&op, 0, sizeof op);
          op.w = &w.wqkv;
          op.n_tok = 1;
          op.y = c->qkv + (size_t) l * c->Q;
          op.epilogue = HONE_K_EPI_STORE;
          op.eps = EPS;
          if (q4)
            {
              if (int r = hone_k_rmsnorm (c->h, w.attn_norm, 1, c->H, EPS, NULL, &c->xq, NULL, 0, s)) return r;
              op.xq = &c->xq;
            }
          else
            {
              op.x = c->h;
              op.norm_g = w.attn_norm;
            }
          if (int r = hone_k_gemv_ex (&op, s)) return r;
        }
    }
  return 0;
}

static int
enqueue_persist (void *vc, cudaStream_t s)
{
  BenchCtx *c = (BenchCtx *) vc;
  HoneKPersistArgs a = c->pa;
  if (!c->per_layer)
    {
      a.n_layers = c->n_layers;
      a.layers = c->layers;
      return hone_k_decode_persist (&a, s);
    }
  a.n_layers = 1;
  for (int l = 0; l < c->n_layers; l++)
    {
      a.layers = c->layers + l;
      if (int r = hone_k_decode_persist (&a, s)) return r;
    }
  return 0;
}

struct BarrierCtx { int blocks, n, coop, mode; unsigned *sync; };

static int
enqueue_barrier (void *vc, cudaStream_t s)
{
  BarrierCtx *c = (BarrierCtx *) vc;
  return hone_k_persist_barrier_bench (c->blocks, c->n, c->sync, c->coop, c->mode, s);
}

static void
bench_barrier (cudaStream_t s, int sms)
{
  report ("\n== grid barrier alone (256-thread blocks, graph of one cooperative launch; per barrier = (t(1000) - t(0)) / 1000) ==\n");
  unsigned *sync;
  CK (cudaMalloc (&sync, 64));
  for (int mode = 0; mode < 2; mode++)
    for (int bps = 1; bps <= 2; bps++)
      {
        CK (cudaMemset (sync, 0, 64));
        BarrierCtx c0 = { sms * bps, 0, 1, mode, sync }, c1 = { sms * bps, 1000, 1, mode, sync };
        const double t0 = time_graph (enqueue_barrier, &c0, s, "barrier 0");
        const double t1 = time_graph (enqueue_barrier, &c1, s, "barrier 1000");
        report ("  %3d blocks, %s: %.3f us per barrier (launch alone %.2f us)\n", sms * bps,
                mode ? "64-bit counter" : "count + generation", (t1 - t0) * 1e3 / 1000, t0 * 1e3);
      }
  cudaFree (sync);
}

static void
bench_type (int type, cudaStream_t s, int sms)
{
  const int H = 4096, F = 14336, Q = 6144, NL = 32;
  const bool q4 = type == HONE_K_Q4_0;
  BenchCtx c;
  c.type = type;
  c.H = H;
  c.F = F;
  c.Q = Q;
  c.n_layers = NL;
  size_t layer_bytes = 0;
  {
    size_t qb, sb;
    layer_bytes += hone_k_matrix_bytes (type, H, H, &qb, &sb);
    layer_bytes += hone_k_matrix_bytes (type, 2 * F, H, &qb, &sb);
    layer_bytes += hone_k_matrix_bytes (type, H, F, &qb, &sb);
    layer_bytes += hone_k_matrix_bytes (type, Q, H, &qb, &sb);
  }
  c.nsets = (int) ((400e6 + layer_bytes - 1) / layer_bytes) + 1;
  c.sets.resize (c.nsets);
  for (int i = 0; i < c.nsets; i++)
    {
      DevSet &d = c.sets[i];
      dev_mat (&d.wo, type, H, H, 11 + 4 * i);
      dev_mat (&d.wgu, type, 2 * F, H, 12 + 4 * i);
      dev_mat (&d.wdown, type, H, F, 13 + 4 * i);
      dev_mat (&d.wqkv, type, Q, H, 14 + 4 * i);
      d.ffn_norm = dev_upload (rand_vec (H, 1, 0.2));
      d.attn_norm = dev_upload (rand_vec (H, 1, 0.2));
    }
  c.h = dev_upload (rand_vec (H, 0, 1));
  c.act = dev_upload (rand_vec (F, 0, 0.5));   /* the one-phase runs of down read it as it is */
  CK (cudaMalloc (&c.qkv, (size_t) NL * Q * 4));
  c.attn = dev_upload (rand_vec (NL * H, 0, 1));
  CK (cudaMalloc (&c.xq.q, (size_t) F + 64));
  CK (cudaMalloc (&c.xq.ds, (size_t) F / 32 * 8 + 64));
  CK (cudaMalloc (&c.attn_q.q, (size_t) NL * H + 64));
  CK (cudaMalloc (&c.attn_q.ds, (size_t) NL * H / 32 * 8 + 64));
  CK (hone_k_quantize (c.attn, NL, H, &c.attn_q, NULL, 0, s));
  std::vector<HoneKPersistLayer> dl (NL);
  for (int l = 0; l < NL; l++)
    {
      const DevSet &d = c.sets[l % c.nsets];
      dl[l].wo_q = d.wo.q; dl[l].wo_s = d.wo.s;
      dl[l].wgu_q = d.wgu.q; dl[l].wgu_s = d.wgu.s;
      dl[l].wdown_q = d.wdown.q; dl[l].wdown_s = d.wdown.s;
      dl[l].wqkv_q = d.wqkv.q; dl[l].wqkv_s = d.wqkv.s;
      dl[l].attn = c.attn + (size_t) l * H;
      dl[l].ffn_norm = d.ffn_norm;
      dl[l].attn_norm = d.attn_norm;
      dl[l].qkv = c.qkv + (size_t) l * Q;
    }
  c.layers = dev_upload (dl);
  CK (cudaMalloc (&c.sync, 64));
  CK (cudaMemset (c.sync, 0, 64));
  CK (cudaDeviceSynchronize ());
  memset (&c.pa, 0, sizeof c.pa);
  c.pa.type = type;
  c.pa.hidden = H;
  c.pa.ffn = F;
  c.pa.qkv_rows = Q;
  c.pa.h = c.h;
  c.pa.act = c.act;
  c.pa.eps = EPS;
  c.pa.sync = c.sync;

  const double ideal_us = layer_bytes / 4.4e12 * 1e6;
  report ("\n== %s: 32 layers of o+res -> norm -> gate|up+SwiGLU -> down+res -> norm -> qkv (no attention, no RoPE), "
          "%d weight sets (%.0f MB) rotated; graph of the 32 layers, median of 7x10 ==\n",
          q4 ? "Q4_0" : "BF16", c.nsets, c.nsets * layer_bytes / 1e6);
  report ("  %.1f MB a layer; ideal at 4.4 TB/s %.1f us a layer\n", layer_bytes / 1e6, ideal_us);
  auto row = [&] (const char *what, double ms) {
    if (ms < 0)
      return;
    const double us = ms * 1e3 / NL;
    report ("  %-52s %8.2f us/layer  %7.1f GB/s  %5.1f %% of 4.52 TB/s\n", what, us, layer_bytes / (us * 1e3),
            100.0 * layer_bytes / (us * 1e-6) / 4.52e12);
  };
  /* existing kernels, PDL as decode_step uses it (off for BF16, on for quantized) */
  hone_k_set_pdl (q4 ? 1 : 0);
  row (q4 ? "existing kernels (PDL on, as decode_step)" : "existing kernels (PDL off, as decode_step)",
       time_graph (enqueue_old, &c, s, "old"));
  hone_k_set_pdl (q4 ? 0 : 1);
  row (q4 ? "existing kernels, PDL off" : "existing kernels, PDL on", time_graph (enqueue_old, &c, s, "old pdl"));
  hone_k_set_pdl (-1);
  struct V { int u, bps, per_layer, pf, as, bar, dyn; };
  std::vector<V> vs;
  for (int as = 0; as < 2; as++)
    for (int bar = 0; bar < 2; bar++)
      for (int pf = 1; pf >= 0; pf--)
        vs.push_back ({ 4, 2, 0, pf, as, bar, 0 });
  vs.push_back ({ 4, 2, 0, 1, 1, 1, 128 });
  vs.push_back ({ 4, 2, 0, 1, 1, 1, 256 });
  vs.push_back ({ 4, 2, 0, 1, 1, 1, 512 });
  vs.push_back ({ 4, 2, 0, 0, 1, 1, 256 });
  vs.push_back ({ 4, 2, 1, 1, 1, 1, 0 });
  vs.push_back ({ 4, 2, 1, 1, 1, 1, 256 });
  vs.push_back ({ 4, 1, 0, 1, 1, 1, 256 });
  if (!q4)
    {
      vs.push_back ({ 8, 2, 0, 1, 1, 1, 0 });
      vs.push_back ({ 8, 2, 0, 1, 1, 1, 256 });
      vs.push_back ({ 8, 1, 0, 1, 1, 1, 256 });
    }
  for (const V &v : vs)
    {
      c.pa.unroll = v.u;
      c.pa.blocks_per_sm = v.bps;
      c.pa.prefetch = v.pf;
      c.pa.cooperative = 1;
      c.pa.stage_async = v.as;
      c.pa.barrier = v.bar;
      c.pa.phase_mask = 0;
      c.pa.dyn = v.dyn;
      c.per_layer = v.per_layer;
      CK (cudaMemset (c.sync, 0, 64));
      char what[160];
      snprintf (what, sizeof what, "persist U%d %d/SM %s, %s, %s, pf %s, dyn %d", v.u, v.bps,
                v.per_layer ? "launch/layer" : "1 launch", v.as ? "cp.async" : "ld", v.bar ? "ctr64" : "gen",
                v.pf ? "on" : "off", v.dyn);
      double ms = time_graph (enqueue_persist, &c, s, what);
      if (ms < 0)
        {
          c.pa.cooperative = 0;
          strcat (what, " (plain)");
          ms = time_graph (enqueue_persist, &c, s, what);
        }
      row (what, ms);
    }

  /* one phase at a time, 32 layers (one launch, a barrier between layers) vs the existing kernels */
  static const char *const pname[4] = { "o +res", "norm + gate|up + SwiGLU", "down +res", "norm + qkv" };
  size_t pbytes[4];
  {
    size_t qb, sb;
    pbytes[0] = hone_k_matrix_bytes (type, H, H, &qb, &sb);
    pbytes[1] = hone_k_matrix_bytes (type, 2 * F, H, &qb, &sb);
    pbytes[2] = hone_k_matrix_bytes (type, H, F, &qb, &sb);
    pbytes[3] = hone_k_matrix_bytes (type, Q, H, &qb, &sb);
  }
  report ("  -- one phase, 32 layers back to back (persistent: one launch, U4 2/SM, cp.async, ctr64; "
          "us/layer incl. one barrier; dyn only changes gate|up and down) --\n");
  for (int p = 0; p < 4; p++)
    {
      c.phase = p;
      hone_k_set_pdl (q4 ? 1 : 0);
      const double mo = time_graph (enqueue_old, &c, s, "old phase");
      hone_k_set_pdl (-1);
      c.phase = -1;
      c.pa.unroll = 4; c.pa.blocks_per_sm = 2; c.pa.cooperative = 1; c.pa.stage_async = 1; c.pa.barrier = 1;
      c.pa.phase_mask = 1 << p;
      c.per_layer = 0;
      double mp[3];
      for (int k = 0; k < 3; k++)
        {
          c.pa.prefetch = k > 0;
          c.pa.dyn = k == 2 ? 256 : 0;
          CK (cudaMemset (c.sync, 0, 64));
          mp[k] = time_graph (enqueue_persist, &c, s, "persist phase");
        }
      c.pa.dyn = 0;
      c.pa.phase_mask = 0;
      const double ideal = pbytes[p] / 4.4e12 * 1e6;
      auto pc = [&] (double ms) { return 100 * pbytes[p] / (ms * 1e-3 / NL) / 4.52e12; };
      report ("  %-24s ideal %6.2f | old %6.2f us %5.1f%% | pf off %6.2f %5.1f%% | pf on %6.2f %5.1f%% | +dyn256 %6.2f %5.1f%%\n",
              pname[p], ideal, mo * 1e3 / NL, pc (mo), mp[0] * 1e3 / NL, pc (mp[0]), mp[1] * 1e3 / NL, pc (mp[1]),
              mp[2] * 1e3 / NL, pc (mp[2]));
    }

  /* where a layer's time goes: per-block timestamps of one 32-layer launch (after warm-up) */
  {
    const int grid = 2 * sms, NP = 4 * NL;
    unsigned long long *tr;
    CK (cudaMalloc (&tr, (size_t) grid * NP * 6 * 8));
    for (int cfg = 0; cfg < 3; cfg++)
      {
        const int pf = cfg != 1, dyn = cfg == 2 ? 256 : 0;
        HoneKPersistArgs a = c.pa;
        a.unroll = 4; a.blocks_per_sm = 2; a.cooperative = 1; a.stage_async = 1; a.barrier = 1; a.prefetch = pf;
        a.phase_mask = 0; a.n_layers = NL; a.layers = c.layers; a.trace = tr; a.dyn = dyn;
        CK (cudaMemset (c.sync, 0, 64));
        for (int i = 0; i < 3; i++)
          CK (hone_k_decode_persist (&a, s));
        CK (cudaStreamSynchronize (s));
        std::vector<unsigned long long> t (dev_download<unsigned long long> (tr, (size_t) grid * NP * 6));
        /* per phase p (layers 1..NL-2): median over blocks of staging (cycles → us at the SM clock),
         * compute (staged → done), spread of done (last − first block, ns), barrier (next start − last done) */
        double st[4] = { 0 }, co[4] = { 0 }, sp[4] = { 0 }, ba[4] = { 0 }, ph[4] = { 0 };
        int cnt = 0;
        int clk_khz = 0;
        cudaDeviceGetAttribute (&clk_khz, cudaDevAttrClockRate, 0);
        for (int l = 1; l < NL - 1; l++, cnt++)
          for (int p = 0; p < 4; p++)
            {
              std::vector<double> vst, vco;
              unsigned long long dmin = ~0ull, dmax = 0, smin = ~0ull, nmin = ~0ull;
              for (int b = 0; b < grid; b++)
                {
                  const unsigned long long *r = &t[((size_t) b * NP + 4 * l + p) * 6];
                  const unsigned long long *rn = &t[((size_t) b * NP + 4 * l + p + 1) * 6];
                  vst.push_back ((double) (r[4] - r[3]));
                  vco.push_back ((double) (r[5] - r[4]));
                  dmin = std::min (dmin, r[2]);
                  dmax = std::max (dmax, r[2]);
                  smin = std::min (smin, r[0]);
                  nmin = std::min (nmin, rn[0]);
                }
              std::sort (vst.begin (), vst.end ());
              std::sort (vco.begin (), vco.end ());
              st[p] += vst[grid / 2] / (clk_khz * 1e-3);
              co[p] += vco[grid / 2] / (clk_khz * 1e-3);
              sp[p] += (dmax - dmin) * 1e-3;
              ba[p] += (nmin > dmax ? nmin - dmax : 0) * 1e-3;
              ph[p] += (nmin - smin) * 1e-3;
            }
        report ("  -- timestamps, prefetch %s, dyn %d (median block; layers 2..%d; clock %d MHz): staging / compute / "
                "spread of block ends / last end -> next start / phase start-to-start, us --\n",
                pf ? "on" : "off", dyn, NL - 1, clk_khz / 1000);
        for (int p = 0; p < 4; p++)
          report ("  %-26s %6.2f / %6.2f / %6.2f / %6.2f / %6.2f\n", pname[p], st[p] / cnt, co[p] / cnt, sp[p] / cnt,
                  ba[p] / cnt, ph[p] / cnt);
      }
    cudaFree (tr);
  }
  CK (cudaGetLastError ());
  for (auto &d : c.sets)
    {
      matrix_free (&d.wo); matrix_free (&d.wgu); matrix_free (&d.wdown); matrix_free (&d.wqkv);
      cudaFree (d.ffn_norm); cudaFree (d.attn_norm);
    }
  cudaFree (c.h); cudaFree (c.act); cudaFree (c.qkv); cudaFree (c.attn); cudaFree (c.xq.q); cudaFree (c.xq.ds);
  cudaFree (c.attn_q.q); cudaFree (c.attn_q.ds); cudaFree (c.layers); cudaFree (c.sync);
}

/* The existing kernels' output against the persistent kernel's at the 8B shape (one layer). */
static void
check_vs_old (int type, cudaStream_t s)
{
  const int H = 4096, F = 14336, Q = 6144;
  BenchCtx c;
  c.type = type; c.H = H; c.F = F; c.Q = Q; c.n_layers = 1; c.nsets = 1;
  c.sets.resize (1);
  DevSet &d = c.sets[0];
  dev_mat (&d.wo, type, H, H, 91);
  dev_mat (&d.wgu, type, 2 * F, H, 92);
  dev_mat (&d.wdown, type, H, F, 93);
  dev_mat (&d.wqkv, type, Q, H, 94);
  d.ffn_norm = dev_upload (rand_vec (H, 1, 0.2));
  d.attn_norm = dev_upload (rand_vec (H, 1, 0.2));
  const std::vector<float> h0 = rand_vec (H, 0, 1);
  c.h = dev_upload (h0);
  c.act = (float *) dev_poisoned ((size_t) F * 4);
  c.qkv = (float *) dev_poisoned ((size_t) Q * 4);
  c.attn = dev_upload (rand_vec (H, 0, 1));
  CK (cudaMalloc (&c.xq.q, (size_t) F + 64));
  CK (cudaMalloc (&c.xq.ds, (size_t) F / 32 * 8 + 64));
  CK (cudaMalloc (&c.attn_q.q, (size_t) H + 64));
  CK (cudaMalloc (&c.attn_q.ds, (size_t) H / 32 * 8 + 64));
  CK (hone_k_quantize (c.attn, 1, H, &c.attn_q, NULL, 0, s));
  CK (enqueue_old (&c, s));
  std::vector<float> oh = dev_download<float> (c.h, H), oq = dev_download<float> (c.qkv, Q);
  HoneKPersistLayer dl;
  dl.wo_q = d.wo.q; dl.wo_s = d.wo.s; dl.wgu_q = d.wgu.q; dl.wgu_s = d.wgu.s;
  dl.wdown_q = d.wdown.q; dl.wdown_s = d.wdown.s; dl.wqkv_q = d.wqkv.q; dl.wqkv_s = d.wqkv.s;
  dl.attn = c.attn; dl.ffn_norm = d.ffn_norm; dl.attn_norm = d.attn_norm; dl.qkv = c.qkv;
  HoneKPersistLayer *layers = dev_upload (std::vector<HoneKPersistLayer> (1, dl));
  unsigned *sync;
  CK (cudaMalloc (&sync, 64));
  CK (cudaMemset (sync, 0, 64));
  CK (cudaMemcpy (c.h, h0.data (), H * 4, cudaMemcpyHostToDevice));
  CK (cudaMemset (c.qkv, 0xff, Q * 4));
  HoneKPersistArgs a;
  memset (&a, 0, sizeof a);
  a.type = type; a.hidden = H; a.ffn = F; a.qkv_rows = Q; a.n_layers = 1; a.layers = layers;
  a.h = c.h; a.act = c.act; a.eps = EPS; a.sync = sync; a.prefetch = 1; a.unroll = 4; a.cooperative = 1;
  a.stage_async = 1; a.barrier = 1;
  CK (hone_k_decode_persist (&a, s));
  std::vector<float> ph = dev_download<float> (c.h, H), pq = dev_download<float> (c.qkv, Q);
  std::vector<double> rh (oh.begin (), oh.end ()), rq (oq.begin (), oq.end ());
  bool f1, f2;
  const double eh = rel_err (ph.data (), rh.data (), H, &f1), eq = rel_err (pq.data (), rq.data (), Q, &f2);
  const double bound = type == HONE_K_Q4_0 ? 2e-3 : 1e-5;
  char what[160];
  snprintf (what, sizeof what, "%s 8B layer: persistent h vs existing kernels' h", type == HONE_K_Q4_0 ? "Q4_0" : "BF16");
  check (f1 && eh < bound, what, eh, bound);
  snprintf (what, sizeof what, "%s 8B layer: persistent qkv vs existing kernels' qkv", type == HONE_K_Q4_0 ? "Q4_0" : "BF16");
  check (f2 && eq < bound, what, eq, bound);
  matrix_free (&d.wo); matrix_free (&d.wgu); matrix_free (&d.wdown); matrix_free (&d.wqkv);
  cudaFree (d.ffn_norm); cudaFree (d.attn_norm); cudaFree (c.h); cudaFree (c.act); cudaFree (c.qkv);
  cudaFree (c.attn); cudaFree (c.xq.q); cudaFree (c.xq.ds); cudaFree (c.attn_q.q); cudaFree (c.attn_q.ds);
  cudaFree (layers); cudaFree (sync);
}

int
main (int argc, char **argv)
{
  bool do_check = false, do_bench = false, small = false;
  for (int i = 1; i < argc; i++)
    {
      if (!strcmp (argv[i], "--check")) do_check = true;
      else if (!strcmp (argv[i], "--small")) do_check = small = true;
      else if (!strcmp (argv[i], "--bench")) do_bench = true;
    }
  if (!do_check && !do_bench)
    do_check = do_bench = true;
  const char *out = getenv ("OUT");
  if (out)
    {
      char path[1024];
      snprintf (path, sizeof path, "%s/persist%s.txt", out, small ? "-small" : "");
      results = fopen (path, "a");
    }
  int dev = 0, sms = 0;
  CK (cudaGetDevice (&dev));
  CK (cudaDeviceGetAttribute (&sms, cudaDevAttrMultiProcessorCount, dev));
  n_sms = sms;
  cudaDeviceProp prop;
  CK (cudaGetDeviceProperties (&prop, dev));
  report ("device %s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
  cudaStream_t s;
  CK (cudaStreamCreateWithFlags (&s, cudaStreamNonBlocking));
  if (do_check)
    {
      report ("\n== checks (outputs poisoned, f64 references, two runs) ==\n");
      const int types[2] = { HONE_K_BF16, HONE_K_Q4_0 };
      for (int ti = 0; ti < 2; ti++)
        {
          const int t = types[ti];
          const int U8 = t == HONE_K_BF16 ? 8 : 4;
          for (int st = 0; st < 2; st++)
            {
              const int bar = st;   /* call 1's staging with call 1's barrier; async with the 64-bit counter */
              check_case ({ t, 96, 160, 197, 1, 3, 1, 4, st, bar, 0 });
              check_case ({ t, 96, 160, 197, 2, 3, 0, U8, st, bar, 0 });
              check_case ({ t, 96, 160, 197, 2, 0, 1, U8, st, bar, 0 });
              check_case ({ t, 256, 704, 385, 2, 7, 1, 4, st, bar, 0 });
              if (!small)
                {
                  check_case ({ t, 1024, 2816, 1535, 2, 0, 1, 4, st, bar, 0 });
                  check_case ({ t, 1024, 2816, 1535, 1, 0, 0, U8, st, bar, 0 });
                  check_case ({ t, 4096, 14336, 6144, 1, 0, 1, 4, st, bar, 0 });
                }
            }
          check_case ({ t, 96, 160, 197, 2, 5, 1, 4, 1, 0, 0 });
          check_case ({ t, 96, 160, 197, 2, 5, 1, 4, 0, 1, 0 });
          /* dynamic tails: 3 blocks, blocks with no static pairs (264 blocks, 48-80 pairs), all dynamic */
          check_case ({ t, 96, 160, 197, 2, 3, 1, 4, 1, 1, 256 });
          check_case ({ t, 96, 160, 197, 2, 0, 1, 4, 1, 1, 256 });
          check_case ({ t, 256, 704, 385, 3, 7, 0, 4, 0, 0, 1024 });
          check_case ({ t, 256, 704, 385, 1, 7, 1, 4, 1, 1, 100 });
          if (!small)
            {
              check_case ({ t, 1024, 2816, 1535, 2, 0, 1, 4, 1, 1, 256 });
              check_case ({ t, 4096, 14336, 6144, 1, 0, 1, 4, 1, 1, 256 });
              check_case ({ t, 4096, 14336, 6144, 1, 0, 1, U8, 1, 1, 128 });
            }
          if (!small)
            check_vs_old (t, s);
        }
      report ("checks: %d passed, %d failed\n", n_pass, n_fail);
    }
  if (do_bench)
    {
      bench_barrier (s, sms);
      bench_type (HONE_K_BF16, s, sms);
      bench_type (HONE_K_Q4_0, s, sms);
    }
  if (results)
    fclose (results);
  return n_fail ? 1 : 0;
}
