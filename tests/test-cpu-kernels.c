/* test-cpu-kernels.c — CPU backend kernels against f64 computations.
 *
 * Weights are random, quantized by hone-dtype's reference quantizers, and the
 * reference is an f64 dot product over hone_dequantize_row()'s values, so the
 * SIMD and portable kernels are checked against an independent decoding of the
 * same blocks. Every ISA this CPU has is forced in turn.
 */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "hone-dtype.h"
#include "hone-model.h"
#include "cpu/hone-cpu-attention.h"
#include "cpu/hone-cpu-dot.h"
#include "cpu/hone-cpu-gemm.h"
#include "cpu/hone-cpu-kv.h"
#include "cpu/hone-cpu-matmul.h"
#include "cpu/hone-cpu-ops.h"
#include "cpu/hone-cpu-panel.h"
#include "cpu/hone-cpu-threadpool.h"
#include "hone-test-models.h"

static const HoneDType all_types[] = {
  HONE_DTYPE_F32, HONE_DTYPE_F16, HONE_DTYPE_BF16, HONE_DTYPE_Q8_0,
  HONE_DTYPE_Q4_0, HONE_DTYPE_Q4_1, HONE_DTYPE_Q4_K, HONE_DTYPE_Q6_K,
};

static float
rnd (GRand *r)
{
  /* roughly normal, with some larger values so blocks have varied scales */
  double s = 0;
  for (int i = 0; i < 4; i++)
    s += g_rand_double_range (r, -1.0, 1.0);
  return (float) (s * (g_rand_int_range (r, 0, 8) == 0 ? 3.0 : 0.7));
}

typedef struct {
  HoneDType type;
  int K, N;
  size_t row_bytes;
  guint8 *data;          /* stored blocks */
  double *deq;           /* N × K dequantized */
  HoneTensor tensor;
} Matrix;

static void
matrix_init (Matrix *m, GRand *r, HoneDType type, int K, int N)
{
  float *row = g_new (float, K);
  float *tmp = g_new (float, K);

  m->type = type;
  m->K = K;
  m->N = N;
  m->row_bytes = hone_dtype_row_bytes (type, K);
  g_assert_cmpuint (m->row_bytes, >, 0);
  m->data = g_malloc (m->row_bytes * N);
  m->deq = g_new (double, (gsize) N * K);
  for (int n = 0; n < N; n++)
    {
      for (int k = 0; k < K; k++)
        row[k] = rnd (r);
      g_assert_true (hone_quantize_row (type, row, m->data + n * m->row_bytes, K));
      hone_dequantize_row (type, m->data + n * m->row_bytes, tmp, K);
      for (int k = 0; k < K; k++)
        m->deq[(size_t) n * K + k] = tmp[k];
    }
  m->tensor = (HoneTensor) { .name = "w", .type = type, .n_dims = 2, .ne = { K, N, 1, 1 },
                             .data = m->data, .nbytes = m->row_bytes * N };
  g_free (row);
  g_free (tmp);
}

static void
matrix_clear (Matrix *m)
{
  g_free (m->data);
  g_free (m->deq);
}

/* Activations as the kernel sees them (dequantized q8 for integer types). */
static void
effective_x (HoneDType type, const float *x, const HoneQ8Act *xq, int K, double *out)
{
  for (int k = 0; k < K; k++)
    out[k] = hone_cpu_type_uses_q8 (type) ? (double) xq[k / 32].d * xq[k / 32].qs[k % 32] : x[k];
}

/* Check y (T × N) against f64 references:
 *  exact: the same quantized activations → only float rounding (rel 2e-5 of Σ|w·x|);
 *  true:  the original f32 activations → also the activation rounding, bounded
 *         by Σ_blocks (amax/254)·Σ|w| (plus the same float slack). */
static void
check_output (const Matrix *m, const float *x, const HoneQ8Act *xq, int T, const float *y)
{
  double *xe = g_new (double, m->K);

  for (int t = 0; t < T; t++)
    {
      const float *xt = x + (size_t) t * m->K;
      effective_x (m->type, xt, xq + (size_t) t * hone_cpu_act_row_blocks (m->K), m->K, xe);
      for (int n = 0; n < m->N; n++)
        {
          const double *w = m->deq + (size_t) n * m->K;
          double exact = 0, truth = 0, mag = 0, qbound = 0;
          double got = y[(size_t) t * m->N + n];
          for (int k = 0; k < m->K; k++)
            {
              exact += w[k] * xe[k];
              truth += w[k] * xt[k];
              mag += fabs (w[k] * xe[k]);
            }
          if (hone_cpu_type_uses_q8 (m->type))
            for (int b = 0; b < m->K / 32; b++)
              {
                double amax = 0, sw = 0;
                for (int k = 32 * b; k < 32 * b + 32; k++)
                  {
                    amax = fmax (amax, fabs (xt[k]));
                    sw += fabs (w[k]);
                  }
                qbound += amax / 254.0 * sw * 1.0001;
              }
          if (!(fabs (got - exact) <= 2e-5 * mag + 1e-5))   /* NaN fails too */
            g_error ("%s K=%d N=%d T=%d isa=%s: y[%d][%d] = %.7g, f64 on the same activations %.7g",
                     hone_dtype_name (m->type), m->K, m->N, T, hone_cpu_isa_name (hone_cpu_isa ()), t, n, got, exact);
          if (!(fabs (got - truth) <= qbound + 2e-5 * mag + 1e-5))
            g_error ("%s K=%d: y[%d][%d] = %.7g, f64 on f32 activations %.7g (bound %.3g)",
                     hone_dtype_name (m->type), m->K, t, n, got, truth, qbound);
        }
    }
  g_free (xe);
}

static void
test_act_quantize (void)
{
  GRand *r = g_rand_new_with_seed (7);
  float x[256];
  HoneQ8Act q[10];   /* hone_cpu_act_row_blocks (256): 8 blocks, then the scale copy */

  for (int i = 0; i < 256; i++)
    x[i] = rnd (r);
  memset (x + 64, 0, 32 * sizeof (float));     /* an all-zero block */
  hone_cpu_quantize_act (x, q, 256);
  for (int b = 0; b < 8; b++)
    {
      double amax = 0;
      int sum = 0;
      for (int j = 0; j < 32; j++)
        amax = fmax (amax, fabs (x[32 * b + j]));
      g_assert_cmpfloat_with_epsilon (q[b].d, amax / 127.0, 1e-6 * amax + 1e-30);
      for (int j = 0; j < 32; j++)
        {
          g_assert_cmpfloat (fabs (x[32 * b + j] - q[b].d * q[b].qs[j]), <=, q[b].d * 0.5001 + 1e-30);
          sum += q[b].qs[j];
        }
      g_assert_cmpfloat_with_epsilon (q[b].ds, q[b].d * sum, 1e-6 * fabs (q[b].d * sum) + 1e-30);
    }
  g_assert_cmpfloat (q[2].d, ==, 0.0f);
  g_assert_cmpint (hone_cpu_act_row_blocks (256), ==, G_N_ELEMENTS (q));
  /* the row's copy of the scales, which the Q4_K tiles read */
  for (int b = 0; b < 8; b++)
    {
      g_assert_cmpfloat (hone_cpu_act_scales (q, 256)[b], ==, q[b].d);
      g_assert_cmpfloat (hone_cpu_act_scales (q, 256)[8 + b], ==, q[b].ds);
    }
  /* every ISA quantizes identically (ties round to even everywhere) */
  {
    HoneQ8Act q2[10];
    x[5] = 0.5f * (q[0].d * 3);   /* not a tie in general; the bit-compare covers the rest */
    memset (q, 0, sizeof q);      /* the slots past the scale copy are not written */
    memset (q2, 0, sizeof q2);
    hone_cpu_set_isa (HONE_CPU_ISA_PORTABLE);
    hone_cpu_quantize_act (x, q, 256);
    hone_cpu_set_isa (HONE_CPU_ISA_COUNT_);
    hone_cpu_quantize_act (x, q2, 256);
    g_assert_cmpmem (q, sizeof q, q2, sizeof q2);
  }
  g_rand_free (r);
}

/* Every type × ISA × tile shape through the tile kernels directly. */
static void
test_tiles (void)
{
  GRand *r = g_rand_new_with_seed (11);
  HoneCpuIsa best = hone_cpu_isa_detect ();

  for (int isa = HONE_CPU_ISA_PORTABLE; isa <= (int) best; isa++)
    {
      if (!hone_cpu_isa_supported (isa))
        continue;
      g_assert_cmpint (hone_cpu_set_isa (isa), ==, isa);
      for (guint ti = 0; ti < G_N_ELEMENTS (all_types); ti++)
        {
          HoneDType type = all_types[ti];
          int Ks[] = { 256, 512, 96, 40 };
          for (guint ki = 0; ki < G_N_ELEMENTS (Ks); ki++)
            {
              int K = Ks[ki];
              Matrix m;
              if (K % hone_cpu_type_k_align (type) != 0 || (K % 32 != 0 && hone_cpu_type_uses_q8 (type)))
                continue;
              matrix_init (&m, r, type, K, 4);
              for (int R = 1; R <= 4; R++)
                for (int T = 1; T <= 4; T++)
                  {
                    float x[4 * 512], y[16];
                    HoneQ8Act xq[4 * 20];   /* 4 rows of hone_cpu_act_row_blocks (512) */
                    Matrix sub = m;
                    HoneCpuTileFunc fn = hone_cpu_tile_func (type, hone_cpu_isa ());
                    size_t xs;

                    for (int i = 0; i < T * K; i++)
                      x[i] = rnd (r);
                    if (hone_cpu_type_uses_q8 (type))
                      for (int t = 0; t < T; t++)
                        hone_cpu_quantize_act (x + t * K, xq + t * hone_cpu_act_row_blocks (K), K);
                    xs = hone_cpu_type_uses_q8 (type) ? hone_cpu_act_row_blocks (K) * sizeof (HoneQ8Act)
                                                      : K * sizeof (float);
                    g_assert_nonnull (fn);
                    fn (K, m.data, m.row_bytes, R, hone_cpu_type_uses_q8 (type) ? (void *) xq : (void *) x,
                        xs, T, y, R);
                    sub.N = R;
                    check_output (&sub, x, xq, T, y);
                  }
              matrix_clear (&m);
            }
        }
    }
  hone_cpu_set_isa (HONE_CPU_ISA_COUNT_);
  g_rand_free (r);
}

/* The parallel matmul: several matrices sharing one input, odd token and row
 * counts, 1–3 threads, every ISA. */
static void
test_matmul (void)
{
  GRand *r = g_rand_new_with_seed (13);
  HoneCpuIsa best = hone_cpu_isa_detect ();
  const int K = 512;
  const int Ts[] = { 1, 3, 7, 13 };
  HoneCpuPool *pools[3];
  HoneCpuPool *crowd = hone_cpu_pool_new (8, NULL);   /* more threads than cores: some are descheduled */

  for (int nth = 1; nth <= 3; nth++)
    g_assert_nonnull ((pools[nth - 1] = hone_cpu_pool_new (nth, NULL)));
  g_assert_nonnull (crowd);
  for (guint ti = 0; ti < G_N_ELEMENTS (all_types); ti++)
    for (guint tt = 0; tt < G_N_ELEMENTS (Ts); tt++)
      {
        int T = Ts[tt];
        Matrix a, b;
        float *x = g_new (float, T * K);
        HoneQ8Act *xq = g_new (HoneQ8Act, T * hone_cpu_act_row_blocks (K));
        float *ya = g_new (float, T * 37), *yb = g_new (float, T * 70);
        HoneCpuMatmulOut outs[2];

        matrix_init (&a, r, all_types[ti], K, 37);
        matrix_init (&b, r, all_types[(ti + 3) % G_N_ELEMENTS (all_types)], K, 70);
        for (int i = 0; i < T * K; i++)
          x[i] = rnd (r);
        for (int t = 0; t < T; t++)
          hone_cpu_quantize_act (x + t * K, xq + t * hone_cpu_act_row_blocks (K), K);
        outs[0] = (HoneCpuMatmulOut) { &a.tensor, ya };
        outs[1] = (HoneCpuMatmulOut) { &b.tensor, yb };
        for (int nth = 1; nth <= 4; nth++)
          for (int isa = HONE_CPU_ISA_PORTABLE; isa <= (int) best; isa++)
            {
              if (!hone_cpu_isa_supported (isa))
                continue;
              hone_cpu_set_isa (isa);
              memset (ya, 0xff, T * 37 * sizeof (float));   /* NaN: every output must be written */
              memset (yb, 0xff, T * 70 * sizeof (float));
              hone_cpu_matmul (nth == 4 ? crowd : pools[nth - 1], outs, 2, x, xq, K, T);
              check_output (&a, x, xq, T, ya);
              check_output (&b, x, xq, T, yb);
            }
        matrix_clear (&a);
        matrix_clear (&b);
        g_free (x); g_free (xq); g_free (ya); g_free (yb);
      }
  for (int nth = 1; nth <= 3; nth++)
    hone_cpu_pool_free (pools[nth - 1]);
  hone_cpu_pool_free (crowd);
  hone_cpu_set_isa (HONE_CPU_ISA_COUNT_);
  g_rand_free (r);
}

/* Q4Z blocks (no reference quantizer in hone-dtype): random scales, zero
 * points and quants, the reference from hone_dequantize_row. */
static void
matrix_init_q4z (Matrix *m, GRand *r, int K, int N)
{
  float *tmp = g_new (float, K);

  m->type = HONE_DTYPE_Q4Z;
  m->K = K;
  m->N = N;
  m->row_bytes = hone_dtype_row_bytes (HONE_DTYPE_Q4Z, K);
  m->data = g_malloc (m->row_bytes * N);
  m->deq = g_new (double, (gsize) N * K);
  for (int n = 0; n < N; n++)
    {
      HoneBlockQ4Z *b = (HoneBlockQ4Z *) (m->data + n * m->row_bytes);
      for (int i = 0; i < K / 32; i++)
        {
          b[i].s = hone_f32_to_f16 ((float) g_rand_double_range (r, 0.001, 0.05));
          b[i].z = (guint8) g_rand_int_range (r, 0, 16);
          b[i].pad = 0;
          for (int j = 0; j < 16; j++)
            b[i].qs[j] = (guint8) g_rand_int_range (r, 0, 256);
        }
      hone_dequantize_row (HONE_DTYPE_Q4Z, m->data + n * m->row_bytes, tmp, K);
      for (int k = 0; k < K; k++)
        m->deq[(size_t) n * K + k] = tmp[k];
    }
  m->tensor = (HoneTensor) { .name = "w", .type = HONE_DTYPE_Q4Z, .n_dims = 2, .ne = { K, N, 1, 1 },
                             .data = m->data, .nbytes = m->row_bytes * N };
  g_free (tmp);
}

/* Panels on every ISA that has them (AVX2, AVX-VNNI, AVX-512 VNNI): every
 * type they take, against f64 on the same activations, for partial panels
 * (R < the panel's rows) and token counts around the kernels' tiles; the
 * output lanes of rows past R must stay unwritten. */
static void
test_panels (void)
{
  static const HoneDType types[] = { HONE_DTYPE_Q4_0, HONE_DTYPE_Q4_1, HONE_DTYPE_Q8_0, HONE_DTYPE_Q4Z,
                                     HONE_DTYPE_Q4_K, HONE_DTYPE_Q6_K };
  const int Ks[] = { 64, 192, 256, 512 }, Ts[] = { 1, 2, 3, 4, 5, 7, 8, 9, 17 };
  const int OS = 20;   /* output row stride > 16 */
  GRand *r = g_rand_new_with_seed (17);
  int checked = 0, isas = 0;

  g_assert_false (hone_cpu_panel_supported (HONE_DTYPE_Q4_K, 192, HONE_CPU_ISA_AVX512VNNI));
  g_assert_false (hone_cpu_panel_supported (HONE_DTYPE_Q6_K, 192, HONE_CPU_ISA_AVX2));
  g_assert_false (hone_cpu_panel_supported (HONE_DTYPE_Q4_0, 96, HONE_CPU_ISA_AVXVNNI));
  g_assert_false (hone_cpu_panel_supported (HONE_DTYPE_F16, 256, HONE_CPU_ISA_AVX512VNNI));
  g_assert_false (hone_cpu_panel_supported (HONE_DTYPE_Q4_0, 256, HONE_CPU_ISA_PORTABLE));
  g_assert_false (hone_cpu_panel_supported (HONE_DTYPE_Q8_0, 256, HONE_CPU_ISA_AVX2));
  g_assert_true (hone_cpu_panel_supported (HONE_DTYPE_Q8_0, 256, HONE_CPU_ISA_AVXVNNI));
  for (int isa = HONE_CPU_ISA_AVX2; isa < HONE_CPU_ISA_COUNT_; isa++)
    {
      const int rows = hone_cpu_panel_rows (isa), Rs[] = { 1, 5, rows };

      if (!hone_cpu_isa_supported (isa))
        continue;
      isas++;
      for (guint ti = 0; ti < G_N_ELEMENTS (types); ti++)
        for (guint ki = 0; ki < G_N_ELEMENTS (Ks); ki++)
          {
            const HoneDType type = types[ti];
            const int K = Ks[ki];
            Matrix m;
            guint8 *panel;

            if (!hone_cpu_panel_supported (type, K, isa))
              continue;
            if (type == HONE_DTYPE_Q4Z)
              matrix_init_q4z (&m, r, K, rows);
            else
              matrix_init (&m, r, type, K, rows);
            panel = g_aligned_alloc (1, hone_cpu_panel_bytes (K), 64);
            for (guint ri = 0; ri < G_N_ELEMENTS (Rs); ri++)
              for (guint tt = 0; tt < G_N_ELEMENTS (Ts); tt++)
                {
                  const int R = Rs[ri], T = Ts[tt];
                  const int rb = hone_cpu_act_row_blocks (K);
                  float *x = g_new (float, T * K), *y = g_new (float, T * OS), *yc = g_new (float, T * R);
                  HoneQ8Act *xq = g_new (HoneQ8Act, T * rb);
                  guint8 *xb = NULL;
                  Matrix sub = m;

                  for (int i = 0; i < T * K; i++)
                    x[i] = rnd (r);
                  for (int t = 0; t < T; t++)
                    hone_cpu_quantize_act (x + t * K, xq + t * rb, K);
                  memset (panel, 0xab, hone_cpu_panel_bytes (K));   /* stale bytes: padding rows must be rewritten */
                  memset (y, 0xff, T * OS * sizeof (float));
                  hone_cpu_panel_pack (isa, type, m.data, m.row_bytes, R, K, panel);
                  if (hone_cpu_panel_needs_bias (type))
                    {
                      xb = g_malloc ((gsize) T * K);
                      hone_cpu_panel_bias_act (xq, rb * sizeof (HoneQ8Act), K, T, xb);
                      for (int i = 0; i < T * K; i++)
                        g_assert_cmpint (xb[i], ==, xq[(i / K) * rb + i % K / 32].qs[i % 32] + 128);
                    }
                  hone_cpu_panel_run (isa, type, panel, K, R, xq, rb * sizeof (HoneQ8Act), xb, T, y, OS);
                  for (int t = 0; t < T; t++)
                    {
                      guint32 bits;
                      for (int n = 0; n < R; n++)
                        yc[t * R + n] = y[t * OS + n];
                      for (int n = R; n < OS; n++)
                        {
                          memcpy (&bits, y + t * OS + n, 4);
                          if (bits != 0xffffffffu)
                            g_error ("%s %s K=%d R=%d T=%d: lane %d of token %d written", hone_cpu_isa_name (isa),
                                     hone_dtype_name (type), K, R, T, n, t);
                        }
                    }
                  sub.N = R;
                  check_output (&sub, x, xq, T, yc);
                  checked++;
                  g_free (x); g_free (y); g_free (yc); g_free (xq); g_free (xb);
                }
            g_aligned_free (panel);
            matrix_clear (&m);
          }
    }
  g_test_message ("%d panel configurations checked on %d ISAs", checked, isas);
  /* per ISA, 4 types × K 64, 192, 256, 512 (3 on plain AVX2: no Q8_0), the K-quants × 256, 512; 3 R × 9 T */
  g_assert_cmpint (checked, ==, 27 * ((hone_cpu_isa_supported (HONE_CPU_ISA_AVX2) ? 3 * 4 + 4 : 0)
                                      + (hone_cpu_isa_supported (HONE_CPU_ISA_AVXVNNI) ? 4 * 4 + 4 : 0)
                                      + (hone_cpu_isa_supported (HONE_CPU_ISA_AVX512VNNI) ? 4 * 4 + 4 : 0)));
  if (isas == 0)
    g_test_skip ("this CPU has no AVX2: matmuls use the portable tiles only");
  g_rand_free (r);
}

/* A matmul of more rows than 65,531 chunks of the usual length cover (the
 * chunk numbers are 16-bit): every row still computed, once. Q8_0 rows of 32
 * weights, all q = (n mod 7) − 3 at d = 1, against x = 1 … 1 and 2 … 2. */
static void
test_matmul_many_rows (void)
{
  const int K = 32, N = 1100000, T = 2;
  HoneBlockQ8_0 *w = g_new (HoneBlockQ8_0, N);
  float x[2 * 32], *y = g_new (float, (gsize) T * N);
  HoneQ8Act xq[2 * 2];   /* two rows of hone_cpu_act_row_blocks (32) */
  HoneTensor tensor = { 0 };
  HoneCpuMatmulOut out = { &tensor, y };
  HoneCpuPool *pool = hone_cpu_pool_new (2, NULL);

  for (int n = 0; n < N; n++)
    {
      w[n].d = 0x3c00;   /* 1.0 */
      memset (w[n].qs, (n % 7) - 3, sizeof w[n].qs);
    }
  for (int k = 0; k < K; k++)
    x[k] = 1.0f, x[K + k] = 2.0f;
  hone_cpu_quantize_act (x, xq, K);
  hone_cpu_quantize_act (x + K, xq + hone_cpu_act_row_blocks (K), K);
  tensor.type = HONE_DTYPE_Q8_0;
  tensor.n_dims = 2;
  tensor.ne[0] = K;
  tensor.ne[1] = N;
  tensor.data = w;
  tensor.nbytes = sizeof (HoneBlockQ8_0) * (gsize) N;
  for (int t = 1; t <= T; t++)
    {
      memset (y, 0xff, (gsize) T * N * sizeof (float));
      hone_cpu_matmul (pool, &out, 1, x, xq, K, t);
      for (int tt = 0; tt < t; tt++)
        for (int n = 0; n < N; n++)
          if (!(fabsf (y[(gsize) tt * N + n] - 32.0f * (tt + 1) * ((n % 7) - 3)) <= 1e-3f))   /* NaN fails */
            g_error ("T %d: row %d of token %d is %g, not %g", t, n, tt, y[(gsize) tt * N + n],
                     32.0 * (tt + 1) * ((n % 7) - 3));
    }
  hone_cpu_pool_free (pool);
  g_free (w);
  g_free (y);
}

typedef struct {
  int counts[8];
  int nth_seen;
} PoolCounts;

static void
count_fn (gpointer data, int ith, int nth)
{
  PoolCounts *c = data;
  g_atomic_int_inc (&c->counts[ith]);
  c->nth_seen = nth;
}

static void
test_pool (void)
{
  for (int n = 1; n <= 4; n++)
    {
      HoneCpuPool *pool = hone_cpu_pool_new (n, NULL);
      PoolCounts c = { { 0 }, 0 };
      g_assert_cmpint (hone_cpu_pool_n_threads (pool), ==, n);
      for (int i = 0; i < 300; i++)
        {
          hone_cpu_pool_run (pool, count_fn, &c);
          if (i == 150)
            g_usleep (50000);   /* let workers fall asleep, then wake them */
        }
      for (int i = 0; i < n; i++)
        g_assert_cmpint (c.counts[i], ==, 300);
      g_assert_cmpint (c.nth_seen, ==, n);
      hone_cpu_pool_free (pool);
    }
  {
    HoneCpuPool *pool = hone_cpu_pool_new (0, NULL);
    g_assert_cmpint (hone_cpu_pool_n_threads (pool), >=, 1);
    hone_cpu_pool_free (pool);
  }
}

/* Threads outnumbering the cores (8 on CI's 2): every part of every job runs
 * exactly once and with its own job's function and context, though threads
 * wake late and claim parts while the caller moves on to the next job. Two
 * functions alternate, each checking the tag of its context. */
typedef struct {
  guint32 tag;
  int job;
  int counts[8];
} TaggedJob;

static void
tagged_a (gpointer data, int ith, int nth)
{
  TaggedJob *j = data;
  if (j->tag != 0xa11a)
    g_error ("job %d: function A ran with a context tagged %#x", j->job, j->tag);
  g_atomic_int_inc (&j->counts[ith]);
}

static void
tagged_b (gpointer data, int ith, int nth)
{
  TaggedJob *j = data;
  if (j->tag != 0xb22b)
    g_error ("job %d: function B ran with a context tagged %#x", j->job, j->tag);
  g_atomic_int_inc (&j->counts[ith]);
  if (ith == 0)
    g_thread_yield ();   /* one part slow: the others are claimed meanwhile */
}

static void
test_pool_crowded (void)
{
  HoneCpuPool *pool = hone_cpu_pool_new (8, NULL);
  const int jobs = 20000;

  g_assert_cmpint (hone_cpu_pool_n_threads (pool), ==, 8);
  for (int i = 0; i < jobs; i++)
    {
      /* a fresh context each job, on the stack: a late claim of an old job
       * would find it gone or retagged */
      TaggedJob j = { (i & 1) ? 0xb22b : 0xa11a, i, { 0 } };
      hone_cpu_pool_run (pool, (i & 1) ? tagged_b : tagged_a, &j);
      for (int p = 0; p < 8; p++)
        if (j.counts[p] != 1)
          g_error ("job %d: part %d ran %d times", i, p, j.counts[p]);
      j.tag = 0xdead;
      if (i == jobs / 2)
        g_usleep (50000);   /* workers asleep, then woken */
    }
  hone_cpu_pool_free (pool);
}

/* The cgroup CPU quota read from a cgroup tree built here: v2 with a limit on
 * a parent, a tighter one below, none ("max"), a fraction rounded up; v1's
 * cfs quota; unreadable or odd text gives no limit. */
static void
write_file (const char *dir, const char *name, const char *text)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
}

/* The blocked GEMM (a prompt's float weights, AWQ calibration): every ISA,
 * F32/F16/BF16 weights, shapes around its panels (16 or 32 rows), token
 * blocks (6 or 12) and L2 chunks, 1–3 threads, against f64 with the f32
 * summation bound; the same bits at every thread count, nothing written past
 * y; at 70 tokens hone_cpu_matmul (which hands such products to it) too. */
static void
test_gemm_f32 (void)
{
  const int Ns[] = { 1, 15, 33, 100, 700 }, Ks[] = { 1, 7, 64, 1100 }, Ts[] = { 1, 5, 13, 70 };
  const HoneDType types[] = { HONE_DTYPE_F32, HONE_DTYPE_F16, HONE_DTYPE_BF16 };
  const int GUARD = 40;
  HoneCpuPool *pools[3];
  GRand *r = g_rand_new_with_seed (23);
  int checked = 0, isas = 0;

  for (int nth = 1; nth <= 3; nth++)
    {
      pools[nth - 1] = hone_cpu_pool_new (nth, NULL);
      g_assert_nonnull (pools[nth - 1]);
    }
  for (int isa = HONE_CPU_ISA_PORTABLE; isa < HONE_CPU_ISA_COUNT_; isa++)
    {
      if (!hone_cpu_isa_supported (isa))
        continue;
      g_assert_cmpint (hone_cpu_set_isa (isa), ==, isa);
      isas++;
      for (guint yi = 0; yi < G_N_ELEMENTS (types); yi++)
        for (guint ni = 0; ni < G_N_ELEMENTS (Ns); ni++)
          for (guint ki = 0; ki < G_N_ELEMENTS (Ks); ki++)
            for (guint ti = 0; ti < G_N_ELEMENTS (Ts); ti++)
              {
                const HoneDType type = types[yi];
                const int N = Ns[ni], K = Ks[ki], T = Ts[ti];
                const gsize esize = type == HONE_DTYPE_F32 ? 4 : 2;
                float *W = g_new (float, (gsize) N * K), *x = g_new (float, (gsize) T * K);
                float *y = g_new (float, (gsize) T * N + GUARD), *y1 = g_new (float, (gsize) T * N);
                guint8 *wdata = g_malloc ((gsize) N * K * esize);
                HoneTensor w = { .name = "w", .type = type, .n_dims = 2, .ne = { K, N, 1, 1 }, .data = wdata,
                                 .nbytes = (gsize) N * K * esize };

                for (int i = 0; i < N * K; i++)
                  {
                    const float v = (float) rnd (r);
                    if (type == HONE_DTYPE_F16)
                      ((hone_f16 *) wdata)[i] = hone_f32_to_f16 (v);
                    else if (type == HONE_DTYPE_BF16)
                      ((hone_bf16 *) wdata)[i] = hone_f32_to_bf16 (v);
                    else
                      ((float *) wdata)[i] = v;
                  }
                hone_dequantize_row (type, wdata, W, (gint64) N * K);   /* the values the kernels see */
                for (int i = 0; i < T * K; i++)
                  x[i] = (float) rnd (r);
                for (int nth = 1; nth <= 4; nth++)
                  {
                    memset (y, 0xff, ((gsize) T * N + GUARD) * sizeof (float));   /* NaN: every output must be written */
                    if (nth <= 3)
                      hone_cpu_gemm (pools[nth - 1], &w, x, T, y);
                    else if (T >= HONE_CPU_GEMM_MIN_T)
                      {
                        HoneCpuMatmulOut o = { &w, y };
                        hone_cpu_matmul (pools[1], &o, 1, x, NULL, K, T);
                      }
                    else
                      continue;
                    for (int i = 0; i < GUARD; i++)
                      {
                        guint32 bits;
                        memcpy (&bits, y + (gsize) T * N + i, 4);
                        if (bits != 0xffffffffu)
                          g_error ("%s %s N=%d K=%d T=%d: written past y", hone_cpu_isa_name (isa),
                                   hone_dtype_name (type), N, K, T);
                      }
                    if (nth == 1)
                      {
                        for (int t = 0; t < T; t++)
                          for (int n = 0; n < N; n++)
                            {
                              double ref = 0, mag = 0;
                              const double got = y[(gsize) t * N + n];
                              for (int k = 0; k < K; k++)
                                {
                                  const double p = (double) x[(gsize) t * K + k] * W[(gsize) n * K + k];
                                  ref += p;
                                  mag += fabs (p);
                                }
                              /* a sum of K f32 products: |error| ≤ K·2⁻²⁴·Σ|p| */
                              if (!(fabs (got - ref) <= 1.01 * K * 0x1p-24 * mag + 1e-30))
                                g_error ("%s %s N=%d K=%d T=%d: y[%d][%d] = %.9g, f64 %.9g", hone_cpu_isa_name (isa),
                                         hone_dtype_name (type), N, K, T, t, n, got, ref);
                            }
                        memcpy (y1, y, (gsize) T * N * sizeof (float));
                      }
                    else if (memcmp (y1, y, (gsize) T * N * sizeof (float)) != 0)
                      g_error ("%s %s N=%d K=%d T=%d: %s gives other bits than 1 thread", hone_cpu_isa_name (isa),
                               hone_dtype_name (type), N, K, T, nth <= 3 ? "another thread count" : "hone_cpu_matmul");
                    checked++;
                  }
                g_free (W); g_free (x); g_free (y); g_free (y1); g_free (wdata);
              }
    }
  g_test_message ("%d GEMM runs checked on %d ISAs", checked, isas);
  /* per ISA: 3 types × 5 N × 4 K × (3 token counts × 3 thread counts + 70 tokens × 4) */
  g_assert_cmpint (checked, ==, isas * 3 * 5 * 4 * (3 * 3 + 4));
  hone_cpu_set_isa (HONE_CPU_ISA_COUNT_);
  for (int nth = 1; nth <= 3; nth++)
    hone_cpu_pool_free (pools[nth - 1]);
  g_rand_free (r);
}

static void
test_cgroup_limit (void)
{
  g_autofree char *root = g_dir_make_tmp ("hone-cgroup-XXXXXX", NULL);
  g_autofree char *a = g_build_filename (root, "a", NULL);
  g_autofree char *ab = g_build_filename (root, "a", "b", NULL);
  g_autofree char *v1 = g_build_filename (root, "cpu", "box", NULL);
  g_autofree char *v1root = g_build_filename (root, "cpu", NULL);

  g_assert_nonnull (root);
  write_file (root, "cpu.max", "max 100000\n");
  g_assert_cmpint (hone_cpu_cgroup_limit (root, "0::/\n"), ==, 0);
  write_file (a, "cpu.max", "400000 100000\n");
  write_file (ab, "cpu.max", "max 100000\n");
  g_assert_cmpint (hone_cpu_cgroup_limit (root, "0::/a/b\n"), ==, 4);     /* the parent's */
  write_file (ab, "cpu.max", "150000 100000\n");
  g_assert_cmpint (hone_cpu_cgroup_limit (root, "0::/a/b\n"), ==, 2);     /* 1.5 rounded up */
  write_file (ab, "cpu.max", "50000 100000\n");
  g_assert_cmpint (hone_cpu_cgroup_limit (root, "0::/a/b\n"), ==, 1);     /* at least one */
  write_file (ab, "cpu.max", "garbage\n");
  g_assert_cmpint (hone_cpu_cgroup_limit (root, "0::/a/b\n"), ==, 4);
  g_assert_cmpint (hone_cpu_cgroup_limit (root, "0::/missing/x\n"), ==, 0);
  g_assert_cmpint (hone_cpu_cgroup_limit (root, ""), ==, 0);
  g_assert_cmpint (hone_cpu_cgroup_limit (root, "no colons\n:\n::\n"), ==, 0);
  /* v1: the cpu controller's line only */
  write_file (v1, "cpu.cfs_quota_us", "300000\n");
  write_file (v1, "cpu.cfs_period_us", "100000\n");
  write_file (v1root, "cpu.cfs_quota_us", "-1\n");
  g_assert_cmpint (hone_cpu_cgroup_limit (root, "4:memory:/box\n2:cpuacct:/box\n"), ==, 0);
  g_assert_cmpint (hone_cpu_cgroup_limit (root, "3:cpu,cpuacct:/box\n1:name=systemd:/\n"), ==, 3);
  g_assert_cmpint (hone_cpu_cgroup_limit (root, "1:cpu:/\n"), ==, 0);
  g_assert_cmpint (hone_cpu_pool_default_threads (), >=, 1);
  hone_test_rm_rf (root);
}

static void
test_rmsnorm_softmax_swiglu (void)
{
  HoneCpuIsa best = hone_cpu_isa_detect ();

  /* every ISA: the AVX-512 forms of RMSNorm and SwiGLU (vector e^x) included */
  for (int isa = HONE_CPU_ISA_PORTABLE; isa <= (int) best; isa++)
    {
      GRand *r = g_rand_new_with_seed (17);
      float x[300], w[300], y[300], g[300], u[300];
      double ss = 0, mx = -1e30, sum = 0;

      if (!hone_cpu_isa_supported (isa))
        {
          g_rand_free (r);
          continue;
        }
      hone_cpu_set_isa (isa);
      for (int i = 0; i < 300; i++)
        {
          x[i] = rnd (r);
          w[i] = rnd (r);
          g[i] = rnd (r) * 4;
          u[i] = rnd (r);
          ss += (double) x[i] * x[i];
        }
      /* the ends of e^x's range: silu(±90), silu(±100) (e^100 overflows a float) */
      g[3] = 90.0f, g[4] = -90.0f, g[5] = 100.0f, g[6] = -100.0f, g[7] = -87.0f;
      hone_cpu_rmsnorm (x, w, y, 300, 1e-5f);
      for (int i = 0; i < 300; i++)
        {
          double ref = x[i] / sqrt (ss / 300 + 1e-5) * w[i];
          g_assert_cmpfloat (fabs (y[i] - ref), <=, 1e-6 * fabs (ref) + 1e-7);
        }
      memcpy (y, x, sizeof x);
      hone_cpu_softmax (y, 300);
      for (int i = 0; i < 300; i++)
        mx = fmax (mx, x[i]);
      for (int i = 0; i < 300; i++)
        sum += exp (x[i] - mx);
      for (int i = 0; i < 300; i++)
        {
          double ref = exp (x[i] - mx) / sum;
          g_assert_cmpfloat (fabs (y[i] - ref), <=, 1e-6 * ref + 1e-9);
        }
      memcpy (y, g, sizeof g);
      hone_cpu_swiglu (y, u, 300);
      for (int i = 0; i < 300; i++)
        {
          double ref = g[i] / (1.0 + exp (-(double) g[i])) * u[i];
          if (!(fabs (y[i] - ref) <= 1e-6 * fabs (ref) + 1e-7))   /* NaN fails */
            g_error ("%s: swiglu (%g, %g) = %g, f64 %g", hone_cpu_isa_name (isa), g[i], u[i], y[i], ref);
        }
      /* a NaN gate stays NaN */
      y[0] = NAN;
      hone_cpu_swiglu (y, u, 16);
      g_assert_true (isnan (y[0]));
      g_rand_free (r);
    }
  hone_cpu_set_isa (HONE_CPU_ISA_COUNT_);
}

/* inv_freq as transformers computes it: default, linear, llama3. */
/* The sampler's vector scans (hone-cpu-ops) on every ISA against f64 and
 * plain loops: lengths off the vector widths, NaN, ±inf and arguments past
 * e^x's range. */
static void
test_sampler_scans (void)
{
  HoneCpuIsa best = hone_cpu_isa_detect ();
  enum { N = 1003 };

  for (int isa = HONE_CPU_ISA_PORTABLE; isa <= (int) best; isa++)
    {
      GRand *r = g_rand_new_with_seed (23);
      float x[N], y[N];
      gint32 idx[N];

      if (!hone_cpu_isa_supported (isa))
        {
          g_rand_free (r);
          continue;
        }
      hone_cpu_set_isa (isa);
      for (int i = 0; i < N; i++)
        x[i] = (float) g_rand_double_range (r, -20.0, 20.0);
      x[5] = NAN, x[17] = -INFINITY, x[40] = -200.0f, x[999] = NAN, x[1001] = 25.0f;
      for (int n = 0; n <= N; n += n < 40 ? 1 : 97)
        {
          const float shift = 25.0f, scale = 1.0f / 0.7f, t = 12.5f;
          float mx = -INFINITY;
          double sum = 0.0, got;
          int first = n, m = 0, k;

          for (int i = 0; i < n; i++)
            {
              if (x[i] > mx)
                mx = x[i];
              if (first == n && x[i] > t)
                first = i;
            }
          g_assert_cmpfloat (hone_cpu_max (x, n), ==, mx);
          g_assert_cmpint (hone_cpu_first_above (x, n, t), ==, first);
          k = hone_cpu_indices_above (x, n, t, idx);
          for (int i = 0; i < n; i++)
            if (x[i] > t)
              {
                g_assert_cmpint (m, <, k);
                g_assert_cmpint (idx[m], ==, i);
                m++;
              }
          g_assert_cmpint (k, ==, m);
          got = hone_cpu_exp_sum (x, y, n, shift, scale);
          for (int i = 0; i < n; i++)
            {
              const float a = (x[i] - shift) * scale;   /* the argument as the function forms it */
              const double ref = isnan (x[i]) || a < -87.33 ? 0.0 : exp ((double) a);
              if (!(fabs (y[i] - ref) <= 1e-6 * ref + 1e-38))   /* NaN fails */
                g_error ("%s: exp_sum [%d] of %g = %g, f64 %g", hone_cpu_isa_name (isa), i, x[i], y[i], ref);
              sum += ref;
            }
          g_assert_cmpfloat (fabs (got - sum), <=, 1e-6 * sum + 1e-37);
        }
      g_rand_free (r);
    }
  hone_cpu_set_isa (HONE_CPU_ISA_COUNT_);
}

static void
test_rope_freq (void)
{
  HoneModelConfig c = { 0 };
  float f[64];
  const int hd = 128;

  c.rope_theta = 500000.0f;
  c.rope_scaling.type = HONE_ROPE_SCALING_NONE;
  hone_cpu_rope_inv_freq (&c, hd, f);
  for (int i = 0; i < hd / 2; i++)
    g_assert_cmpfloat (fabs (f[i] - 1.0 / pow (500000.0, 2.0 * i / hd)), <=, 1e-6 * f[i]);

  c.rope_scaling.type = HONE_ROPE_SCALING_LINEAR;
  c.rope_scaling.factor = 4.0f;
  hone_cpu_rope_inv_freq (&c, hd, f);
  for (int i = 0; i < hd / 2; i++)
    g_assert_cmpfloat (fabs (f[i] - 0.25 / pow (500000.0, 2.0 * i / hd)), <=, 1e-6 * f[i]);

  /* Llama-3.1: factor 8, low 1, high 4, original 8192 */
  c.rope_scaling = (HoneRopeScaling) { HONE_ROPE_SCALING_LLAMA3, 8.0f, 1.0f, 4.0f, 8192 };
  hone_cpu_rope_inv_freq (&c, hd, f);
  for (int i = 0; i < hd / 2; i++)
    {
      double base = 1.0 / pow (500000.0, 2.0 * i / hd), wl = 2 * G_PI / base, ref;
      if (wl < 8192.0 / 4)
        ref = base;
      else if (wl > 8192.0 / 1)
        ref = base / 8;
      else
        {
          double s = (8192.0 / wl - 1) / (4 - 1);
          ref = (1 - s) * base / 8 + s * base;
        }
      g_assert_cmpfloat (fabs (f[i] - ref), <=, 1e-6 * ref);
    }
  /* first (high-frequency) kept, last (low-frequency) divided by 8 */
  g_assert_cmpfloat (fabs (f[0] - 1.0), <, 1e-6);
  g_assert_cmpfloat (fabs (f[63] * 8 - 1.0 / pow (500000.0, 126.0 / 128)), <, 1e-12);
}

/* RoPE against the rotation formula, and ADJACENT on GGUF-permuted rows
 * equals HALF on HF rows (the reason the two pairings exist). */
static void
test_rope (void)
{
  GRand *r = g_rand_new_with_seed (19);
  const int hd = 64, nh = 3, pos = 37;
  HoneModelConfig c = { .rope_theta = 10000.0f };
  float inv[32], cs[32], sn[32];
  float hf[3 * 64], gg[3 * 64], orig[3 * 64];

  hone_cpu_rope_inv_freq (&c, hd, inv);
  hone_cpu_rope_cos_sin (inv, hd, pos, cs, sn);
  for (int i = 0; i < nh * hd; i++)
    orig[i] = hf[i] = rnd (r);
  /* HF → GGUF order: gguf[2i] = hf[i], gguf[2i+1] = hf[i + hd/2] */
  for (int h = 0; h < nh; h++)
    for (int i = 0; i < hd / 2; i++)
      {
        gg[h * hd + 2 * i] = hf[h * hd + i];
        gg[h * hd + 2 * i + 1] = hf[h * hd + i + hd / 2];
      }
  hone_cpu_rope (hf, nh, hd, cs, sn, HONE_ROPE_PAIRS_HALF);
  hone_cpu_rope (gg, nh, hd, cs, sn, HONE_ROPE_PAIRS_ADJACENT);
  for (int h = 0; h < nh; h++)
    for (int i = 0; i < hd / 2; i++)
      {
        double a = pos / pow (10000.0, 2.0 * i / hd);
        double x0 = orig[h * hd + i], x1 = orig[h * hd + i + hd / 2];
        double r0 = x0 * cos (a) - x1 * sin (a), r1 = x0 * sin (a) + x1 * cos (a);
        g_assert_cmpfloat (fabs (hf[h * hd + i] - r0), <=, 2e-5);
        g_assert_cmpfloat (fabs (hf[h * hd + i + hd / 2] - r1), <=, 2e-5);
        g_assert_cmpfloat (gg[h * hd + 2 * i], ==, hf[h * hd + i]);
        g_assert_cmpfloat (gg[h * hd + 2 * i + 1], ==, hf[h * hd + i + hd / 2]);
      }
  g_rand_free (r);
}

/* One query head's attention in f64 over n cached f16 positions, q rounded to
 * f16 as the kernels do: ref[d], and mag[d] = Σ p·|v| (the scale of the
 * probabilities' f16 rounding, ≤ 2^-11 relative each: bound 4.9e-4·mag). */
static void
attention_ref (const float *q, const uint16_t *k, const uint16_t *v, int n, int hd, double *ref, double *mag)
{
  double *s = g_new (double, n), mx = -1e300, sum = 0;

  for (int j = 0; j < n; j++)
    {
      s[j] = 0;
      for (int d = 0; d < hd; d++)
        s[j] += (double) hone_f16_to_f32 (k[hone_cpu_kv_key_index (j, d, hd)]) * hone_f16_to_f32 (hone_f32_to_f16 (q[d]));
      s[j] /= sqrt (hd);
      mx = fmax (mx, s[j]);
    }
  for (int j = 0; j < n; j++)
    sum += (s[j] = exp (s[j] - mx));
  for (int d = 0; d < hd; d++)
    {
      ref[d] = mag[d] = 0;
      for (int j = 0; j < n; j++)
        {
          ref[d] += s[j] / sum * hone_f16_to_f32 (v[j * hd + d]);
          mag[d] += s[j] / sum * fabs (hone_f16_to_f32 (v[j * hd + d]));
        }
    }
  g_free (s);
}

static void
test_attention (void)
{
  GRand *r = g_rand_new_with_seed (23);
  HoneCpuIsa best = hone_cpu_isa_detect ();
  const int hds[] = { 64, 128, 24 };

  for (int isa = HONE_CPU_ISA_PORTABLE; isa <= (int) best; isa++)
    {
      if (!hone_cpu_isa_supported (isa))
        continue;
      hone_cpu_set_isa (isa);
      for (guint hi = 0; hi < G_N_ELEMENTS (hds); hi++)
        {
          int hd = hds[hi], n = 45;
          /* keys in the cache's blocks of 16 ([dim][16]), the last one partly filled: NaN past n */
          uint16_t *k = g_new (uint16_t, 48 * hd), *v = g_new (uint16_t, n * hd);
          float *q = g_new (float, hd), *out = g_new (float, hd), scores[45];
          double ref[128], mag[128];

          for (int i = 0; i < 48 * hd; i++)
            k[i] = 0x7e00;
          for (int i = 0; i < n * hd; i++)
            {
              k[hone_cpu_kv_key_index (i / hd, i % hd, hd)] = hone_f32_to_f16 (rnd (r));
              v[i] = hone_f32_to_f16 (rnd (r));
            }
          for (int i = 0; i < hd; i++)
            q[i] = rnd (r);
          hone_cpu_attention_head (q, k, v, n, hd, 1.0f / sqrtf (hd), scores, out);
          attention_ref (q, k, v, n, hd, ref, mag);
          for (int d = 0; d < hd; d++)
            g_assert_cmpfloat (fabs (out[d] - ref[d]), <=, 4.9e-4 * mag[d] * 1.01 + 1e-5);
          g_free (k); g_free (v); g_free (q); g_free (out);
        }
    }
  hone_cpu_set_isa (HONE_CPU_ISA_COUNT_);
  g_rand_free (r);
}

/* hone_cpu_attention over a KV cache: GQA groups 1–8, prompts and decode
 * (also over 700+ cached positions, where decode splits the keys in segments),
 * head dims the batches take (64, 128) and one they leave to the one-head
 * kernel (24, and 8-wide only), 1–3 threads, on every ISA (AVX-512: batches of
 * 16, AVX2: of 8); against f64 with q rounded to f16 as the kernels do, within
 * the probabilities' f16 rounding (2^-11 relative each). Every case runs once
 * with batches allowed and once without.
 * With AVX-512 the batched path runs where T·group ≥ 8; every case runs once
 * with batches allowed and once without. */
static void
test_attention_batch (void)
{
  GRand *r = g_rand_new_with_seed (29);
  const int hds[] = { 64, 128, 24 }, groups[] = { 1, 2, 3, 4, 8 }, Ts[] = { 1, 5, 16, 37 }, pos0s[] = { 0, 19, 700 };
  HoneCpuPool *pools[3];
  int cases = 0;

  for (int nth = 1; nth <= 3; nth++)
    g_assert_nonnull ((pools[nth - 1] = hone_cpu_pool_new (nth, NULL)));
  for (int isa = HONE_CPU_ISA_PORTABLE; isa < HONE_CPU_ISA_COUNT_; isa++)
    for (guint hi = 0; hi < G_N_ELEMENTS (hds); hi++)
      for (guint gi = 0; gi < G_N_ELEMENTS (groups); gi++)
        for (guint ti = 0; ti < G_N_ELEMENTS (Ts); ti++)
          for (guint pi = 0; pi < G_N_ELEMENTS (pos0s); pi++)
            {
              const int hd = hds[hi], G = groups[gi], T = Ts[ti], pos0 = pos0s[pi];
              const int n_kv = 2, n_heads = G * n_kv, ctx = pos0 + T, nth = 1 + cases % 3;
              const size_t stride = hone_cpu_attention_scratch_floats (ctx, hd);
              HoneCpuKv *kv = hone_cpu_kv_new (1, n_kv, hd, ctx, NULL);
              float *kk = g_new (float, n_kv * hd), *vv = g_new (float, n_kv * hd);
              float *q = g_new (float, (gsize) T * n_heads * hd), *out = g_new (float, (gsize) T * n_heads * hd);
              float *scratch = g_new (float, stride * nth);
              double ref[128], mag[128];
              gboolean was;

              /* AVX-VNNI: the AVX2 batches; long caches: decode and short runs (the split keys) */
              if (!hone_cpu_isa_supported (isa) || isa == HONE_CPU_ISA_AVXVNNI || (pos0 > 100 && T > 5))
                {
                  hone_cpu_kv_free (kv);
                  g_free (kk); g_free (vv); g_free (q); g_free (out); g_free (scratch);
                  continue;
                }
              hone_cpu_set_isa (isa);
              g_assert_nonnull (kv);
              /* NaN in every row not stored (a key block's tail): the kernels must not read it into a sum */
              memset (kv->data, 0xff, (gsize) kv->bytes);
              for (int p = 0; p < ctx; p++)
                {
                  for (int i = 0; i < n_kv * hd; i++)
                    {
                      kk[i] = rnd (r);
                      vv[i] = rnd (r);
                    }
                  hone_cpu_kv_store (kv, 0, p, kk, vv);
                }
              for (int i = 0; i < T * n_heads * hd; i++)
                q[i] = rnd (r) * 1.5f;
              for (int lanes = 1; lanes >= 0; lanes--)
                {
                  was = hone_cpu_attention_lanes_set_enabled (lanes);
                  memset (out, 0xff, (gsize) T * n_heads * hd * sizeof (float));
                  hone_cpu_attention (pools[nth - 1], kv, 0, q, T, pos0, n_heads, out, scratch, stride);
                  hone_cpu_attention_lanes_set_enabled (was);
                  for (int t = 0; t < T; t++)
                    for (int h = 0; h < n_heads; h++)
                      {
                        const uint16_t *k = hone_cpu_kv_head (kv, 0, 0, h / G), *v = hone_cpu_kv_head (kv, 0, 1, h / G);
                        const float *qh = q + ((size_t) t * n_heads + h) * hd;
                        const float *oh = out + ((size_t) t * n_heads + h) * hd;
                        attention_ref (qh, k, v, pos0 + t + 1, hd, ref, mag);
                        for (int d = 0; d < hd; d++)
                          if (!(fabs (oh[d] - ref[d]) <= 4.9e-4 * mag[d] * 1.01 + 1e-5))   /* NaN fails */
                            g_error ("hd %d group %d T %d pos0 %d lanes %d: token %d head %d dim %d = %.7g, f64 %.7g "
                                     "(bound %.3g)", hd, G, T, pos0, lanes, t, h, d, oh[d], ref[d],
                                     4.9e-4 * mag[d] * 1.01 + 1e-5);
                      }
                }
              cases++;
              hone_cpu_kv_free (kv);
              g_free (kk); g_free (vv); g_free (q); g_free (out); g_free (scratch);
            }
  hone_cpu_set_isa (HONE_CPU_ISA_COUNT_);
  g_test_message ("%d attention cases (batches of 16: %s, of 8: %s)", cases,
                  hone_cpu_isa_supported (HONE_CPU_ISA_AVX512VNNI) ? "yes" : "no, this CPU has no AVX-512",
                  hone_cpu_isa_supported (HONE_CPU_ISA_AVX2) ? "yes" : "no, this CPU has no AVX2");
  for (int nth = 1; nth <= 3; nth++)
    hone_cpu_pool_free (pools[nth - 1]);
  g_rand_free (r);
}

/* The KV cache's f32 → f16 store, on every ISA, gives hone_f32_to_f16's bits:
 * ties to even, the largest half and the first value past it, subnormals and
 * the tie at 2^-25, signed zeros, infinities and NaNs (quiet, payload kept);
 * a head of 20 values (two vectors of 8 and a scalar tail). */
static void
test_kv_store (void)
{
  const int hd = 20, heads = 2;
  const float special[] = { 0.0f, -0.0f, 1.0f, -1.0f, 1.0f + 0x1p-11f, 1.0f + 0x1p-10f + 0x1p-11f, 65504.0f,
                            65519.99f, 65520.0f, -70000.0f, 0x1p-14f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 3e-6f,
                            -5e-7f, INFINITY, -INFINITY, NAN, -NAN };
  HoneCpuIsa best = hone_cpu_isa_detect ();
  GRand *r = g_rand_new_with_seed (23);
  float k[2 * 20], v[2 * 20];

  G_STATIC_ASSERT (G_N_ELEMENTS (special) == 20);
  for (int i = 0; i < hd; i++)
    {
      k[i] = special[i];
      v[i] = -special[hd - 1 - i];
      k[hd + i] = (float) g_rand_double_range (r, -300, 300);
      v[hd + i] = (float) g_rand_double_range (r, -1e-3, 1e-3);
    }
  for (int isa = HONE_CPU_ISA_PORTABLE; isa <= (int) best; isa++)
    {
      HoneCpuKv *kv;
      if (!hone_cpu_isa_supported (isa))
        continue;
      hone_cpu_set_isa (isa);
      kv = hone_cpu_kv_new (1, heads, hd, 3, NULL);
      g_assert_nonnull (kv);
      hone_cpu_kv_store (kv, 0, 1, k, v);
      for (int h = 0; h < heads; h++)
        for (int i = 0; i < hd; i++)
          {
            const uint16_t gk = hone_cpu_kv_head (kv, 0, 0, h)[hone_cpu_kv_key_index (1, i, hd)];
            const uint16_t gv = hone_cpu_kv_head (kv, 0, 1, h)[hd + i];
            if (gk != hone_f32_to_f16 (k[h * hd + i]) || gv != hone_f32_to_f16 (v[h * hd + i]))
              g_error ("%s head %d [%d]: k %a -> %04x (want %04x), v %a -> %04x (want %04x)", hone_cpu_isa_name (isa), h,
                       i, k[h * hd + i], gk, hone_f32_to_f16 (k[h * hd + i]), v[h * hd + i], gv,
                       hone_f32_to_f16 (v[h * hd + i]));
          }
      hone_cpu_kv_free (kv);
    }
  hone_cpu_set_isa (HONE_CPU_ISA_COUNT_);
  g_rand_free (r);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_message ("best ISA on this CPU: %s", hone_cpu_isa_name (hone_cpu_isa_detect ()));
  g_test_add_func ("/cpu/kernels/act-quantize", test_act_quantize);
  g_test_add_func ("/cpu/kernels/tiles", test_tiles);
  g_test_add_func ("/cpu/kernels/matmul", test_matmul);
  g_test_add_func ("/cpu/kernels/matmul-many-rows", test_matmul_many_rows);
  g_test_add_func ("/cpu/kernels/panels", test_panels);
  g_test_add_func ("/cpu/kernels/gemm-f32", test_gemm_f32);
  g_test_add_func ("/cpu/kernels/pool", test_pool);
  g_test_add_func ("/cpu/kernels/pool-crowded", test_pool_crowded);
  g_test_add_func ("/cpu/kernels/cgroup-limit", test_cgroup_limit);
  g_test_add_func ("/cpu/kernels/norm-softmax-swiglu", test_rmsnorm_softmax_swiglu);
  g_test_add_func ("/cpu/kernels/sampler-scans", test_sampler_scans);
  g_test_add_func ("/cpu/kernels/rope-freq", test_rope_freq);
  g_test_add_func ("/cpu/kernels/rope", test_rope);
  g_test_add_func ("/cpu/kernels/attention", test_attention);
  g_test_add_func ("/cpu/kernels/attention-batch", test_attention_batch);
  g_test_add_func ("/cpu/kernels/kv-store", test_kv_store);
  return g_test_run ();
}
