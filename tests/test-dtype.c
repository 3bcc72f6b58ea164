/* test-dtype.c — element types, f16/bf16 conversion, (de)quantization.
 *
 * References, all independent of Hone:
 *  - tests/data/gguf/types-v3.{gguf,json,src.bin,expected.bin} and f16-cases.bin,
 *    written by tests/reference/gen_gguf_fixtures.py with the `gguf` package
 *    (0.19.0): its quantizers made the tensors from the stored f32 source, its
 *    dequantizer produced the expected values, its GGML_QUANT_SIZES the sizes;
 *  - the compiler's _Float16 conversions (GCC, libgcc soft-float) for an
 *    exhaustive f16 check where available.
 */
#include "hone-dtype.h"
#include "hone-error.h"
#include "hone-gguf.h"
#include "hone-test-data.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

/* Fixtures of this test live in tests/data/gguf. */
#define data_path(name) hone_test_data_path ("gguf", (name))
#define load_data(name) hone_test_data_load ("gguf", (name))
#define load_json(name, parser_out) hone_test_data_load_json ("gguf", (name), (parser_out))
#define fbits hone_test_fbits

static float
bitsf (uint32_t u)
{
  float f;
  memcpy (&f, &u, 4);
  return f;
}

/* ---- type table ---------------------------------------------------------- */

static void
test_type_table (void)
{
  JsonParser *parser;
  JsonObject *root = load_json ("types-v3.json", &parser);
  JsonObject *sizes = json_object_get_object_member (root, "quant_sizes");
  GList *names = json_object_get_members (sizes);
  int checked = 0;

  for (GList *l = names; l; l = l->next)
    {
      JsonObject *o = json_object_get_object_member (sizes, l->data);
      int type = (int) json_object_get_int_member (o, "type");
      int bs = (int) json_object_get_int_member (o, "block_size");
      int ts = (int) json_object_get_int_member (o, "type_size");
      if (type == HONE_DTYPE_Q8_1)
        continue;  /* gguf-py still lists the old f32 d/s layout (40 B); ggml's is 36 B */
      if (hone_dtype_name (type) == NULL)
        {
          /* A type Hone does not know the layout of (IQ*, TQ*, MXFP4). */
          g_assert_cmpint (hone_dtype_block_size (type), ==, 0);
          g_assert_cmpuint (hone_dtype_row_bytes (type, bs), ==, 0);
          g_assert_false (hone_dtype_is_supported (type));
          continue;
        }
      g_assert_cmpstr (hone_dtype_name (type), ==, l->data);
      g_assert_cmpint (hone_dtype_from_name (l->data), ==, type);
      g_assert_cmpint (hone_dtype_block_size (type), ==, bs);
      g_assert_cmpuint (hone_dtype_block_bytes (type), ==, ts);
      g_assert_cmpuint (hone_dtype_row_bytes (type, 4 * (int64_t) bs), ==, 4 * (size_t) ts);
      if (bs > 1)
        g_assert_cmpuint (hone_dtype_row_bytes (type, bs + 1), ==, 0);
      checked++;
    }
  g_assert_cmpint (checked, >=, 19);
  g_list_free (names);
  g_object_unref (parser);

  g_assert_cmpint (hone_dtype_from_name ("q4_k"), ==, HONE_DTYPE_Q4_K);
  g_assert_cmpint (hone_dtype_from_name ("bf16"), ==, HONE_DTYPE_BF16);
  g_assert_cmpint (hone_dtype_from_name ("Q9_9"), ==, -1);
  g_assert_cmpint (hone_dtype_from_name (NULL), ==, -1);
  g_assert_null (hone_dtype_name (16));
  g_assert_null (hone_dtype_name (1000));
  g_assert_null (hone_dtype_name ((HoneDType) -1));
  g_assert_cmpuint (hone_dtype_row_bytes (HONE_DTYPE_Q4_0, -32), ==, 0);
  g_assert_cmpuint (hone_dtype_row_bytes (HONE_DTYPE_F32, G_MAXINT64), ==, 0);
  g_assert_true (hone_dtype_is_supported (HONE_DTYPE_Q6_K));
  g_assert_false (hone_dtype_is_supported (HONE_DTYPE_Q5_K));
  g_assert_false (hone_dtype_is_supported (HONE_DTYPE_Q2_K));
}

/* ---- f16 / bf16 -------------------------------------------------------- */

static void
test_f16_roundtrip (void)
{
  /* Every non-NaN half survives f16 → f32 → f16, and the f32 is the half's value. */
  for (uint32_t h = 0; h < 0x10000; h++)
    {
      float f = hone_f16_to_f32 ((hone_f16) h);
      uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
      if (e == 0x1f && m != 0)
        {
          g_assert_true (isnan (f));
          g_assert_true (isnan (hone_f16_to_f32 (hone_f32_to_f16 (f))));
          continue;
        }
      g_assert_cmphex (hone_f32_to_f16 (f), ==, h);
      /* value check by the definition of the format */
      {
        double v = e == 0 ? ldexp (m, -24) : e == 0x1f ? INFINITY : ldexp (1024 + m, (int) e - 25);
        if (h & 0x8000)
          v = -v;
        g_assert_true ((double) f == v);
        g_assert_cmpint (signbit (f) != 0, ==, (h & 0x8000) != 0);
      }
    }
}

#ifdef __FLT16_MAX__
/* GCC's _Float16 conversions (libgcc's __truncsfhf2/__extendhfsf2). */
static void
test_f16_vs_compiler (void)
{
  GRand *rand = g_rand_new_with_seed (7);
  for (uint32_t h = 0; h < 0x7c00; h++)
    {
      /* the midpoint between h and h+1, and one f32 ulp either side */
      _Float16 lo, hi;
      uint16_t hl = (uint16_t) h, hh = (uint16_t) (h + 1);
      float mid;
      memcpy (&lo, &hl, 2);
      memcpy (&hi, &hh, 2);
      mid = (float) (((double) lo + (double) hi) / 2);
      for (int d = -1; d <= 1; d++)
        for (int s = 0; s < 2; s++)
          {
            uint32_t b = fbits (mid) + (uint32_t) d;
            float f = bitsf (b | (s ? 0x80000000u : 0));
            _Float16 ref = (_Float16) f;
            uint16_t rb;
            memcpy (&rb, &ref, 2);
            g_assert_cmphex (hone_f32_to_f16 (f), ==, rb);
          }
    }
  for (int i = 0; i < 2000000; i++)
    {
      float f = bitsf (g_rand_int (rand));
      _Float16 ref;
      uint16_t rb;
      if (isnan (f))
        continue;
      ref = (_Float16) f;
      memcpy (&rb, &ref, 2);
      g_assert_cmphex (hone_f32_to_f16 (f), ==, rb);
    }
  for (uint32_t h = 0; h < 0x10000; h++)
    {
      _Float16 x;
      uint16_t hb = (uint16_t) h;
      memcpy (&x, &hb, 2);
      if (isnan ((float) x))
        continue;
      g_assert_cmphex (fbits (hone_f16_to_f32 ((hone_f16) h)), ==, fbits ((float) x));
    }
  g_rand_free (rand);
}
#endif

static void
test_f16_bf16_vs_numpy (void)
{
  GBytes *b = load_data ("f16-cases.bin");
  gsize len;
  const guint8 *p = g_bytes_get_data (b, &len);
  gsize n = len / 8;

  g_assert_cmpuint (len % 8, ==, 0);
  g_assert_cmpuint (n, >, 9000);
  for (gsize i = 0; i < n; i++)
    {
      uint32_t fb;
      uint16_t h, bf;
      float f;
      memcpy (&fb, p + 8 * i, 4);
      memcpy (&h, p + 8 * i + 4, 2);
      memcpy (&bf, p + 8 * i + 6, 2);
      f = bitsf (GUINT32_FROM_LE (fb));
      if (hone_f32_to_f16 (f) != GUINT16_FROM_LE (h))
        g_error ("f16(%a) = %04x, numpy %04x", f, hone_f32_to_f16 (f), GUINT16_FROM_LE (h));
      if (hone_f32_to_bf16 (f) != GUINT16_FROM_LE (bf))
        g_error ("bf16(%a) = %04x, gguf %04x", f, hone_f32_to_bf16 (f), GUINT16_FROM_LE (bf));
      g_assert_cmphex (fbits (hone_bf16_to_f32 (GUINT16_FROM_LE (bf))), ==, (uint32_t) GUINT16_FROM_LE (bf) << 16);
    }
  g_bytes_unref (b);

  /* NaN stays NaN (quiet), sign kept. */
  {
    float qnan = bitsf (0x7fc00001), snan = bitsf (0xff800001);
    g_assert_true (isnan (hone_f16_to_f32 (hone_f32_to_f16 (qnan))));
    g_assert_true (isnan (hone_f16_to_f32 (hone_f32_to_f16 (snan))));
    g_assert_true ((hone_f32_to_f16 (snan) & 0x8000) != 0);
    g_assert_true (isnan (hone_bf16_to_f32 (hone_f32_to_bf16 (qnan))));
    g_assert_true (isnan (hone_bf16_to_f32 (hone_f32_to_bf16 (snan))));
    g_assert_cmphex (hone_f32_to_bf16 (INFINITY), ==, 0x7f80);
    g_assert_cmphex (hone_f32_to_bf16 (-INFINITY), ==, 0xff80);
  }
}

/* ---- (de)quantization against the gguf package ------------------------- */

typedef struct {
  JsonParser *parser;
  JsonObject *root;
  GBytes *file, *src, *expected;
  HoneGguf *gguf;
} Fixture;

static void
fixture_load (Fixture *fx)
{
  GError *error = NULL;
  fx->root = load_json ("types-v3.json", &fx->parser);
  fx->file = load_data ("types-v3.gguf");
  fx->src = load_data ("types-v3.src.bin");
  fx->expected = load_data ("types-v3.expected.bin");
  fx->gguf = hone_gguf_open_bytes (fx->file, &error);
  g_assert_no_error (error);
}

static void
fixture_free (Fixture *fx)
{
  hone_gguf_unref (fx->gguf);
  g_bytes_unref (fx->file);
  g_bytes_unref (fx->src);
  g_bytes_unref (fx->expected);
  g_object_unref (fx->parser);
}

static float *
floats_at (GBytes *b, gint64 offset, gint64 n)
{
  gsize len;
  const guint8 *p = g_bytes_get_data (b, &len);
  float *out = g_new (float, n);
  g_assert_cmpuint ((offset + n) * 4, <=, len);
  for (gint64 i = 0; i < n; i++)
    {
      uint32_t u;
      memcpy (&u, p + 4 * (offset + i), 4);
      out[i] = bitsf (GUINT32_FROM_LE (u));
    }
  return out;
}

static void
test_dequant_vs_gguf_py (void)
{
  Fixture fx;
  JsonArray *tensors;
  int seen[HONE_DTYPE_COUNT_] = { 0 };

  fixture_load (&fx);
  tensors = json_object_get_array_member (fx.root, "tensors");
  for (guint i = 0; i < json_array_get_length (tensors); i++)
    {
      JsonObject *o = json_array_get_object_element (tensors, i);
      const char *name = json_object_get_string_member (o, "name");
      const HoneTensor *t = hone_gguf_find_tensor (fx.gguf, name);
      gint64 n, rows, ne0;
      float *expect, *got;

      g_assert_nonnull (t);
      n = hone_tensor_n_elements (t);
      ne0 = t->ne[0];
      rows = n / ne0;
      expect = floats_at (fx.expected, json_object_get_int_member (o, "expected_offset"), n);
      got = g_new (float, n);
      for (gint64 r = 0; r < rows; r++)
        hone_dequantize_row (t->type, hone_tensor_row (t, r), got + r * ne0, ne0);
      /* Exact: Hone evaluates each element in the package's (and ggml's) order. */
      for (gint64 k = 0; k < n; k++)
        if (fbits (got[k]) != fbits (expect[k]))
          g_error ("%s[%" G_GINT64_FORMAT "]: hone %a, gguf-py %a", name, k, got[k], expect[k]);
      seen[t->type]++;
      g_free (expect);
      g_free (got);
    }
  g_assert_cmpint (seen[HONE_DTYPE_F32], ==, 2);
  for (HoneDType ty = 0; ty < HONE_DTYPE_COUNT_; ty++)
    if (ty != HONE_DTYPE_F32 && hone_dtype_is_supported (ty) && ty != HONE_DTYPE_F64 && ty < HONE_DTYPE_I8)
      g_assert_cmpint (seen[ty], ==, 1);
  g_assert_cmpint (seen[HONE_DTYPE_BF16], ==, 1);
  fixture_free (&fx);
}

static void
test_quant_vs_gguf_py (void)
{
  Fixture fx;
  JsonArray *tensors;
  int compared = 0;

  fixture_load (&fx);
  tensors = json_object_get_array_member (fx.root, "tensors");
  for (guint i = 0; i < json_array_get_length (tensors); i++)
    {
      JsonObject *o = json_array_get_object_element (tensors, i);
      const HoneTensor *t = hone_gguf_find_tensor (fx.gguf, json_object_get_string_member (o, "name"));
      gint64 src_off = json_object_get_int_member (o, "src_offset");
      gint64 n = hone_tensor_n_elements (t);
      float *src;
      guint8 *out;

      if (src_off < 0)
        continue;  /* random K-quant blocks: the package has no quantizer for them */
      src = floats_at (fx.src, src_off, n);
      out = g_malloc (t->nbytes);
      g_assert_true (hone_quantize_row (t->type, src, out, n));
      for (size_t k = 0; k < t->nbytes; k++)
        if (out[k] != ((const guint8 *) t->data)[k])
          g_error ("%s: quantized byte %zu is %02x, gguf-py wrote %02x", t->name, k, out[k],
                   ((const guint8 *) t->data)[k]);
      compared++;
      g_free (src);
      g_free (out);
    }
  g_assert_cmpint (compared, ==, 7);  /* F32 ×2, F16, BF16, Q8_0, Q4_0, Q4_1 */
  fixture_free (&fx);
}

/* Byte-exact against llama.cpp's own quantize_row_*_ref (ggml-quants.bin, made
 * through ctypes from llama-cpp-python's libggml-base.so). This is the check
 * for the K-quant quantizers, which the gguf package does not implement. */
static void
test_quant_vs_ggml (void)
{
  GBytes *b = load_data ("ggml-quants.bin");
  gsize len, off;
  const guint8 *p = g_bytes_get_data (b, &len);
  guint32 hdr[3];
  float *src;
  int types_seen = 0;

  memcpy (hdr, p, 12);
  for (int i = 0; i < 3; i++)
    hdr[i] = GUINT32_FROM_LE (hdr[i]);
  src = floats_at (b, 3, (gint64) hdr[0] * hdr[1]);
  off = 12 + (gsize) hdr[0] * hdr[1] * 4;
  for (guint32 k = 0; k < hdr[2]; k++)
    {
      guint32 type;
      size_t row_bytes;
      guint8 *q;
      memcpy (&type, p + off, 4);
      type = GUINT32_FROM_LE (type);
      off += 4;
      row_bytes = hone_dtype_row_bytes (type, hdr[1]);
      g_assert_cmpuint (row_bytes, >, 0);
      g_assert_cmpuint (off + row_bytes * hdr[0], <=, len);
      q = g_malloc (row_bytes);
      for (guint32 r = 0; r < hdr[0]; r++)
        {
          g_assert_true (hone_quantize_row (type, src + (gsize) r * hdr[1], q, hdr[1]));
          for (size_t i = 0; i < row_bytes; i++)
            if (q[i] != p[off + r * row_bytes + i])
              g_error ("%s row %u byte %zu: hone %02x, llama.cpp %02x", hone_dtype_name (type), r, i, q[i],
                       p[off + r * row_bytes + i]);
        }
      g_free (q);
      off += row_bytes * hdr[0];
      types_seen++;
    }
  g_assert_cmpuint (off, ==, len);
  g_assert_cmpint (types_seen, ==, 5);
  g_free (src);
  g_bytes_unref (b);
}

/* Beyond the byte-exact checks above, what must hold for any correct
 * quantizer on other data: the round-trip error is small, zero rows stay
 * zero, constant rows come back (nearly) constant, values stay finite. */
static double
rel_rmse (HoneDType type, const float *x, int64_t n)
{
  guint8 *q = g_malloc (hone_dtype_row_bytes (type, n));
  float *y = g_new (float, n);
  double se = 0, ss = 0;
  g_assert_true (hone_quantize_row (type, x, q, n));
  hone_dequantize_row (type, q, y, n);
  for (int64_t i = 0; i < n; i++)
    {
      g_assert_true (isfinite (y[i]));
      se += (double) (y[i] - x[i]) * (y[i] - x[i]);
      ss += (double) x[i] * x[i];
    }
  g_free (q);
  g_free (y);
  return ss > 0 ? sqrt (se / ss) : sqrt (se);
}

static void
test_quant_error_bounds (void)
{
  GRand *rand = g_rand_new_with_seed (1234);
  const int64_t n = 4096;
  float *x = g_new (float, n);
  struct { HoneDType t; double max; } cases[] = {
    { HONE_DTYPE_Q4_0, 0.14 }, { HONE_DTYPE_Q4_1, 0.12 }, { HONE_DTYPE_Q8_0, 0.01 },
    { HONE_DTYPE_Q4_K, 0.11 }, { HONE_DTYPE_Q6_K, 0.03 }, { HONE_DTYPE_F16, 0.001 },
    { HONE_DTYPE_BF16, 0.005 }, { HONE_DTYPE_F32, 0.0 },
  };

  /* Gaussian-ish weights (sum of uniforms), a few outliers. */
  for (int64_t i = 0; i < n; i++)
    {
      double s = 0;
      for (int k = 0; k < 4; k++)
        s += g_rand_double_range (rand, -1, 1);
      x[i] = (float) (s * 0.05);
    }
  x[17] = 0.9f;
  x[3000] = -1.1f;
  for (guint c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      double e = rel_rmse (cases[c].t, x, n);
      g_test_message ("%s: relative RMSE %.4f", hone_dtype_name (cases[c].t), e);
      g_assert_cmpfloat (e, <=, cases[c].max);
    }

  /* Degenerate rows: zeros come back as zeros, a constant row exactly or nearly. */
  for (guint c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      memset (x, 0, n * sizeof (float));
      g_assert_cmpfloat (rel_rmse (cases[c].t, x, n), ==, 0.0);
      for (int64_t i = 0; i < n; i++)
        x[i] = 0.25f;
      g_assert_cmpfloat (rel_rmse (cases[c].t, x, n), <=, 0.02);
    }
  g_assert_false (hone_quantize_row (HONE_DTYPE_Q5_K, x, x, 256));
  g_assert_false (hone_quantize_row (HONE_DTYPE_Q4_0, x, x, 33));
  g_free (x);
  g_rand_free (rand);
}

/* Hand-built blocks whose values follow from the ggml-common.h layouts. */
static void
test_known_blocks (void)
{
  guint8 b[210];
  float y[256];

  /* Q4_0: d = 0.5; byte j holds element j (low nibble) and j+16 (high). */
  memset (b, 0, sizeof b);
  b[0] = 0x00; b[1] = 0x38;                 /* f16 0.5 */
  b[2] = 0xf0;                              /* elem 0: 0 → -4; elem 16: 15 → 3.5 */
  b[17] = 0x9a;                             /* elem 15: 10 → 1; elem 31: 9 → 0.5 */
  hone_dequantize_row (HONE_DTYPE_Q4_0, b, y, 32);
  g_assert_cmpfloat (y[0], ==, -4.0f);
  g_assert_cmpfloat (y[16], ==, 3.5f);
  g_assert_cmpfloat (y[15], ==, 1.0f);
  g_assert_cmpfloat (y[31], ==, 0.5f);
  g_assert_cmpfloat (y[1], ==, -4.0f);

  /* Q4_1: d = 2, m = -1 → q·2 − 1. */
  memset (b, 0, sizeof b);
  b[1] = 0x40;                              /* f16 2.0 */
  b[3] = 0xbc;                              /* f16 -1.0 */
  b[4] = 0x31;                              /* elem 0: 1 → 1; elem 16: 3 → 5 */
  hone_dequantize_row (HONE_DTYPE_Q4_1, b, y, 32);
  g_assert_cmpfloat (y[0], ==, 1.0f);
  g_assert_cmpfloat (y[16], ==, 5.0f);
  g_assert_cmpfloat (y[1], ==, -1.0f);

  /* Q6_K: all quants 32 (→ 0) but element 0 = 33 (→ +1) and element 127
   * (second half of ql[63]'s group: l=31, q4 → y[96+31]) = 0 (→ −32). */
  memset (b, 0, sizeof b);
  for (int l = 0; l < 64; l++)
    b[l] = 0x00;                            /* low nibbles 0 */
  for (int l = 0; l < 64; l++)
    b[128 + l] = 0xaa;                      /* high bits 2 everywhere → 32 */
  b[0] = 0x01;                              /* elem 0 low nibble 1 → 33 */
  b[128 + 31] = 0x2a;                       /* elem 96+31: high bits 0 → 0 */
  for (int s = 0; s < 16; s++)
    b[192 + s] = 2;                         /* scales 2 */
  b[208] = 0x00; b[209] = 0x3c;             /* d = 1 */
  hone_dequantize_row (HONE_DTYPE_Q6_K, b, y, 256);
  g_assert_cmpfloat (y[0], ==, 2.0f);
  g_assert_cmpfloat (y[127], ==, -64.0f);
  g_assert_cmpfloat (y[1], ==, 0.0f);
  g_assert_cmpfloat (y[200], ==, 0.0f);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/dtype/type-table", test_type_table);
  g_test_add_func ("/dtype/f16/roundtrip", test_f16_roundtrip);
#ifdef __FLT16_MAX__
  g_test_add_func ("/dtype/f16/vs-compiler", test_f16_vs_compiler);
#endif
  g_test_add_func ("/dtype/f16-bf16/vs-numpy", test_f16_bf16_vs_numpy);
  g_test_add_func ("/dtype/dequant/vs-gguf-py", test_dequant_vs_gguf_py);
  g_test_add_func ("/dtype/quant/vs-gguf-py", test_quant_vs_gguf_py);
  g_test_add_func ("/dtype/quant/vs-ggml", test_quant_vs_ggml);
  g_test_add_func ("/dtype/quant/error-bounds", test_quant_error_bounds);
  g_test_add_func ("/dtype/dequant/known-blocks", test_known_blocks);
  return g_test_run ();
}
