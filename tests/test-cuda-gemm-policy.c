/* test-cuda-gemm-policy.c — which prefill chunks of which matrices run the fused
 * quantized GEMM (kernels/hone-k-gemm-w4.cu) rather than dequantize + cuBLASLt.
 * Host code only: in suite 'unit' of a CUDA build, no GPU needed.
 *
 *  - hone_k_w4_gemm_supports: the types and shapes the kernel takes (Q4Z at
 *    groups 32/64/128, Q4_0, Q4_1, Q8_0, Q4_K and Q6_K with cols % 256 == 0, a
 *    q|k|v of such parts whose rows add up), nothing else;
 *  - hone_k_w4_gemm_max_for: the measured thresholds by type (RESULTS-cuda.md,
 *    "Session 53"): the 4-bit types up to HONE_K_W4_GEMM_MAX_DEFAULT tokens,
 *    Q8_0 and Q6_K up to HONE_K_W4_GEMM_MAX_WIDE, parts up to their smallest
 *    part's; hone_k_w4_gemm_set_max (n) one threshold for all, -1 back;
 *  - HONE_W4_GEMM_MAX: the same from the environment (read once, so each case
 *    runs in its own subprocess), a negative value meaning "never fused";
 *  - hone_k_w4_gemm_splits, the split over k: within the scratch and at least 4
 *    k steps a split for any input, and the measured best split wherever session
 *    54's sweep of forced splits on an H100 had a clear winner;
 *  - hone_k_state_bytes: a prefill state holds one f16 buffer of the largest
 *    quantized matrix for the dequantization pass (the lm_head's included), and
 *    with HONE_PREFILL_AHEAD (the pass one matrix ahead on a side stream) a second
 *    one of the largest layer matrix; none for a BF16 model or a decode-only
 *    state; the engine's before-load estimate counts them. */
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "hone-kernels.h"

static HoneKMatrix
mat (int type, int rows, int cols, int group)
{
  HoneKMatrix m = { 0 };

  m.type = type;
  m.rows = rows;
  m.cols = cols;
  m.group = group;
  return m;
}

static void
test_supports (void)
{
  HoneKMatrix m;
  HoneKMatrix kq[3] = { mat (HONE_K_Q4_K, 2048, 4096, 0), mat (HONE_K_Q4_K, 512, 4096, 0),
                        mat (HONE_K_Q6_K, 512, 4096, 0) };
  HoneKMatrix bad[2] = { mat (HONE_K_Q4_K, 2048, 4096, 0), mat (HONE_K_F16, 512, 4096, 0) };

  for (int t = 0; t < 5; t++)
    {
      const int types[] = { HONE_K_Q4_0, HONE_K_Q4_1, HONE_K_Q8_0, HONE_K_Q4_K, HONE_K_Q6_K };
      m = mat (types[t], 4096, 4096, 0);
      g_assert_true (hone_k_w4_gemm_supports (&m));
    }
  m = mat (HONE_K_Q4_0, 64, 96, 0);    /* any multiple of 32 */
  g_assert_true (hone_k_w4_gemm_supports (&m));
  m = mat (HONE_K_Q4_K, 64, 4160, 0);  /* the K-quants need whole 256-blocks */
  g_assert_false (hone_k_w4_gemm_supports (&m));
  m = mat (HONE_K_Q6_K, 64, 4160, 0);
  g_assert_false (hone_k_w4_gemm_supports (&m));
  m = mat (HONE_K_Q4_0, 64, 100, 0);
  g_assert_false (hone_k_w4_gemm_supports (&m));
  for (int g = 0; g <= 128; g += 32)
    {
      m = mat (HONE_K_Q4Z, 64, 4096, g);   /* 0: the default, 32 */
      g_assert_true (hone_k_w4_gemm_supports (&m) == (g != 96));
    }
  m = mat (HONE_K_Q4Z, 64, 4096 + 64, 128);   /* cols not whole groups */
  g_assert_false (hone_k_w4_gemm_supports (&m));
  m = mat (HONE_K_F16, 64, 4096, 0);
  g_assert_false (hone_k_w4_gemm_supports (&m));
  m = mat (HONE_K_BF16, 64, 4096, 0);
  g_assert_false (hone_k_w4_gemm_supports (&m));
  g_assert_false (hone_k_w4_gemm_supports (NULL));

  m = mat (HONE_K_PARTS, 3072, 4096, 0);
  m.n_parts = 3;
  m.parts = kq;
  g_assert_true (hone_k_w4_gemm_supports (&m));
  m.rows = 3000;   /* the parts' rows must add up */
  g_assert_false (hone_k_w4_gemm_supports (&m));
  m.rows = 2560;
  m.n_parts = 2;
  m.parts = bad;   /* an F16 part */
  g_assert_false (hone_k_w4_gemm_supports (&m));
  m.n_parts = 1;   /* parts come in 2..HONE_K_MAX_PARTS */
  m.parts = kq;
  m.rows = 2048;
  g_assert_false (hone_k_w4_gemm_supports (&m));
}

static void
test_thresholds (void)
{
  HoneKMatrix m;
  HoneKMatrix k_m[3] = { mat (HONE_K_Q4_K, 2048, 4096, 0), mat (HONE_K_Q4_K, 512, 4096, 0),
                         mat (HONE_K_Q6_K, 512, 4096, 0) };
  const int four[] = { HONE_K_Q4Z, HONE_K_Q4_0, HONE_K_Q4_1, HONE_K_Q4_K };

  g_assert_null (g_getenv ("HONE_W4_GEMM_MAX"));
  g_assert_cmpint (HONE_K_W4_GEMM_MAX_WIDE, <=, HONE_K_W4_GEMM_MAX_DEFAULT);
  g_assert_cmpint (hone_k_w4_gemm_max (), ==, HONE_K_W4_GEMM_MAX_DEFAULT);
  for (guint i = 0; i < G_N_ELEMENTS (four); i++)
    {
      m = mat (four[i], 4096, 4096, 128);
      g_assert_cmpint (hone_k_w4_gemm_max_for (&m), ==, HONE_K_W4_GEMM_MAX_DEFAULT);
    }
  m = mat (HONE_K_Q8_0, 4096, 4096, 0);
  g_assert_cmpint (hone_k_w4_gemm_max_for (&m), ==, HONE_K_W4_GEMM_MAX_WIDE);
  m = mat (HONE_K_Q6_K, 4096, 4096, 0);
  g_assert_cmpint (hone_k_w4_gemm_max_for (&m), ==, HONE_K_W4_GEMM_MAX_WIDE);

  /* Q4_K_M's q|k|v: Q4_K q, k and a Q6_K v — the smallest part's threshold; all Q4_K, the 4-bit one */
  m = mat (HONE_K_PARTS, 3072, 4096, 0);
  m.n_parts = 3;
  m.parts = k_m;
  g_assert_cmpint (hone_k_w4_gemm_max_for (&m), ==, HONE_K_W4_GEMM_MAX_WIDE);
  m.n_parts = 2;
  m.rows = 2560;
  g_assert_cmpint (hone_k_w4_gemm_max_for (&m), ==, HONE_K_W4_GEMM_MAX_DEFAULT);

  /* one threshold for every type, then back to the defaults */
  hone_k_w4_gemm_set_max (0);
  g_assert_cmpint (hone_k_w4_gemm_max (), ==, 0);
  g_assert_cmpint (hone_k_w4_gemm_max_for (&m), ==, 0);
  m = mat (HONE_K_Q8_0, 4096, 4096, 0);
  g_assert_cmpint (hone_k_w4_gemm_max_for (&m), ==, 0);
  hone_k_w4_gemm_set_max (512);
  g_assert_cmpint (hone_k_w4_gemm_max_for (&m), ==, 512);
  g_assert_cmpint (hone_k_w4_gemm_max (), ==, 512);
  hone_k_w4_gemm_set_max (-1);
  g_assert_cmpint (hone_k_w4_gemm_max_for (&m), ==, HONE_K_W4_GEMM_MAX_WIDE);
  g_assert_cmpint (hone_k_w4_gemm_max (), ==, HONE_K_W4_GEMM_MAX_DEFAULT);
  g_assert_cmpint (hone_k_w4_gemm_max_for (NULL), ==, HONE_K_W4_GEMM_MAX_DEFAULT);
}

/* Any input: a split count the kernel can run — 1 without scratch, the f32 partials within the
 * scratch, at least 4 k steps a split, and no count that a smaller one gives the same k ranges */
static void
test_splits_bounds (void)
{
  GRand *r = g_rand_new_with_seed (54);

  g_assert_cmpint (hone_k_w4_gemm_splits (64, 4096, 112, 64, 2, 132, 0), ==, 1);
  g_assert_cmpint (hone_k_w4_gemm_splits (0, 4096, 112, 64, 2, 132, 1 << 30), ==, 1);
  g_assert_cmpint (hone_k_w4_gemm_splits (64, 4096, 112, 64, 2, 0, 1 << 30), ==, 1);
  g_assert_cmpint (hone_k_w4_gemm_splits (64, 4096, 3, 64, 2, 132, 1 << 30), ==, 1);   /* under 2 × 4 steps */
  for (int i = 0; i < 20000; i++)
    {
      const int n = g_rand_int_range (r, 1, 513), rows = g_rand_int_range (r, 1, 40000);
      const int ksteps = g_rand_int_range (r, 1, 300), tile = 16 << g_rand_int_range (r, 0, 3);
      const int bps = g_rand_int_range (r, 1, 5), sms = g_rand_int_range (r, 1, 200);
      const size_t scratch = g_rand_boolean (r) ? (size_t) g_rand_int_range (r, 0, 1 << 30)
                                                : (size_t) rows * ksteps * 128 * 2;   /* the engine's */
      const int sp = hone_k_w4_gemm_splits (n, rows, ksteps, tile, bps, sms, scratch);
      const int kper = (ksteps + sp - 1) / sp;

      g_assert_cmpint (sp, >=, 1);
      if (sp > 1)
        {
          g_assert_cmpuint ((size_t) sp * n * rows * 4, <=, scratch);
          g_assert_cmpint (ksteps / sp, >=, 4);
          g_assert_cmpint ((ksteps + kper - 1) / kper, ==, sp);
        }
    }
  g_rand_free (r);
}

/* Session 54's sweep (tests/cuda/calls/s54-call3-sweep.txt: hone-kquant-check --bench-gemm on an
 * H100, 132 SMs, each launch forced to 1, 2, 3, 4, 6, 8 or 12 splits): every 8B shape, token
 * count and occupancy where one split beat all others by more than 5 % — the model must pick it.
 * Blocks an SM as the kernel's occupancy gives them: 2 for the 4-bit types' 64-token tiles, 1 for
 * Q6_K and Q8_0 there, 3 (Q8_0: 2) at 16-token tiles. The one such row the model misses: q|k|v
 * 6144 × 4096 at 64 tokens, 4-bit, best 6 splits (Q4_0 25.1 µs), the model's 5 at 27.0 µs. */
static void
test_splits_measured (void)
{
  static const struct { int rows, cols, n, bps, best; } rows[] = {
    { 4096, 4096, 128, 2, 4 },   { 4096, 4096, 192, 2, 4 },   { 28672, 4096, 64, 2, 1 },
    { 28672, 4096, 128, 2, 1 },  { 28672, 4096, 192, 2, 1 },  { 4096, 14336, 64, 2, 8 },
    { 4096, 14336, 128, 2, 4 },  { 28672, 4096, 16, 3, 1 },   { 4096, 14336, 16, 3, 8 },
    { 6144, 4096, 64, 1, 2 },    { 6144, 4096, 128, 1, 1 },   { 4096, 4096, 64, 1, 4 },
    { 4096, 4096, 128, 1, 2 },   { 4096, 4096, 192, 1, 1 },   { 28672, 4096, 64, 1, 1 },
    { 28672, 4096, 128, 1, 1 },  { 28672, 4096, 192, 1, 1 },  { 4096, 14336, 64, 1, 4 },
    { 4096, 14336, 128, 1, 2 },  { 4096, 14336, 192, 1, 4 },  { 28672, 4096, 16, 2, 1 },
    { 4096, 14336, 16, 2, 8 },
  };

  for (guint i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      const int tile = rows[i].n <= 16 ? 16 : rows[i].n <= 32 ? 32 : 64;
      const size_t scratch = (size_t) rows[i].rows * rows[i].cols * 2;
      const int sp = hone_k_w4_gemm_splits (rows[i].n, rows[i].rows, rows[i].cols / 128, tile, rows[i].bps, 132,
                                            scratch);
      if (sp != rows[i].best)
        g_error ("%d x %d, %d tokens, %d blocks an SM: %d splits, the sweep's best %d", rows[i].rows,
                 rows[i].cols, rows[i].n, rows[i].bps, sp, rows[i].best);
    }
}

/* The environment, in a subprocess each (the variable is read once a process) */
static void
env_case (const char *value, int want_4bit, int want_q8)
{
  if (g_test_subprocess ())
    {
      HoneKMatrix q4 = mat (HONE_K_Q4_0, 4096, 4096, 0), q8 = mat (HONE_K_Q8_0, 4096, 4096, 0);

      g_setenv ("HONE_W4_GEMM_MAX", value, TRUE);
      g_assert_cmpint (hone_k_w4_gemm_max_for (&q4), ==, want_4bit);
      g_assert_cmpint (hone_k_w4_gemm_max_for (&q8), ==, want_q8);
      g_assert_cmpint (hone_k_w4_gemm_max (), ==, want_4bit);
      exit (0);
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
}

static void
test_env_set (void)
{
  env_case ("64", 64, 64);
}

static void
test_env_off (void)
{
  env_case ("0", 0, 0);
}

static void
test_env_negative (void)
{
  env_case ("-3", 0, 0);   /* never fused, not "back to the defaults" */
}

static void
test_env_empty (void)
{
  env_case ("", HONE_K_W4_GEMM_MAX_DEFAULT, HONE_K_W4_GEMM_MAX_WIDE);
}

/* An 8B-shaped model of type t (host structs only: hone_k_state_bytes reads shapes) */
static void
model_8b (HoneKModel *m, HoneKLayer *layers, int n_layers, int t)
{
  memset (m, 0, sizeof *m);
  m->cfg.n_layers = n_layers;
  m->cfg.hidden = 4096;
  m->cfg.n_heads = 32;
  m->cfg.n_kv_heads = 8;
  m->cfg.head_dim = 128;
  m->cfg.ffn = 14336;
  m->cfg.vocab = 128256;
  for (int l = 0; l < n_layers; l++)
    {
      memset (&layers[l], 0, sizeof layers[l]);
      layers[l].wqkv = mat (t, 6144, 4096, 128);
      layers[l].wo = mat (t, 4096, 4096, 128);
      layers[l].wgu = mat (t, 28672, 4096, 128);
      layers[l].wdown = mat (t, 4096, 14336, 128);
    }
  m->layers = layers;
  m->embd = mat (HONE_K_BF16, 128256, 4096, 0);
  m->lm_head = m->embd;
}

static void
test_state_bytes (void)
{
  HoneKLayer ql[2], bl[2], hl[2];
  HoneKModel q, b, h;
  const size_t gu16 = (size_t) 28672 * 4096 * 2;   /* the largest layer matrix (gate|up) in f16 */
  const size_t head16 = (size_t) 128256 * 4096 * 2;
  size_t one, two, decode, decode_off, b_off, b_on, h_off, h_on;

  model_8b (&q, ql, 2, HONE_K_Q4_0);
  model_8b (&b, bl, 2, HONE_K_BF16);
  model_8b (&h, hl, 2, HONE_K_Q4_0);
  h.lm_head = mat (HONE_K_Q6_K, 128256, 4096, 0);   /* llama.cpp's Q4_K_M keeps output.weight in Q6_K */
  g_unsetenv ("HONE_PREFILL_AHEAD");
  h_off = hone_k_state_bytes (&h, 2048, 1);
  one = hone_k_state_bytes (&q, 2048, 1);
  decode_off = hone_k_state_bytes (&q, 1, 1);
  b_off = hone_k_state_bytes (&b, 2048, 1);
  g_setenv ("HONE_PREFILL_AHEAD", "1", TRUE);
  two = hone_k_state_bytes (&q, 2048, 1);
  decode = hone_k_state_bytes (&q, 1, 1);
  b_on = hone_k_state_bytes (&b, 2048, 1);
  h_on = hone_k_state_bytes (&h, 2048, 1);
  g_unsetenv ("HONE_PREFILL_AHEAD");
  g_assert_cmpuint (two - one, ==, gu16);       /* the second buffer (a multiple of 256 already) */
  g_assert_cmpuint (one - b_off, ==, gu16);     /* the quantized model's one buffer */
  g_assert_cmpuint (decode, ==, decode_off);    /* a decode-only state has neither */
  g_assert_cmpuint (b_on, ==, b_off);           /* BF16: no dequantization at all */
  g_assert_cmpuint (h_off - b_off, ==, head16); /* a quantized lm_head sizes the one buffer */
  g_assert_cmpuint (h_on - h_off, ==, gu16);    /* but not the second: the pass ahead takes layer matrices */
}

int
main (int argc, char **argv)
{
  g_unsetenv ("HONE_W4_GEMM_MAX");
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cuda-gemm-policy/supports", test_supports);
  g_test_add_func ("/cuda-gemm-policy/thresholds", test_thresholds);
  g_test_add_func ("/cuda-gemm-policy/splits/bounds", test_splits_bounds);
  g_test_add_func ("/cuda-gemm-policy/splits/measured", test_splits_measured);
  g_test_add_func ("/cuda-gemm-policy/env/set", test_env_set);
  g_test_add_func ("/cuda-gemm-policy/env/off", test_env_off);
  g_test_add_func ("/cuda-gemm-policy/env/negative", test_env_negative);
  g_test_add_func ("/cuda-gemm-policy/env/empty", test_env_empty);
  g_test_add_func ("/cuda-gemm-policy/state-bytes", test_state_bytes);
  return g_test_run ();
}
