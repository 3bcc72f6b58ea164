/* hone-dtype.c — element types, block layouts, (de)quantization.
 *
 * The block layouts and the reference quantizers follow llama.cpp's
 * ggml-common.h / ggml-quants.c (quantize_row_*_ref, dequantize_row_*), so a
 * tensor Hone writes is the tensor llama.cpp would have written, and the
 * values Hone reads are the values llama.cpp reads. Arithmetic is done in the
 * same order as there (and as in the `gguf` Python package) so results match
 * bit for bit; project C flags are ISO C11, so GCC does not contract a*b+c into
 * an FMA behind our back.
 */
#include "hone-dtype.h"

#include <float.h>
#include <math.h>
#include <string.h>

typedef struct {
  const char *name;
  int block_size;
  size_t block_bytes;
} TypeInfo;

/* Every GGUF type whose storage layout we know (so a file holding it can be
 * opened and its tensors located), supported for dequantization or not. */
static const TypeInfo type_info[HONE_DTYPE_COUNT_] = {
  [HONE_DTYPE_F32]  = { "F32", 1, 4 },
  [HONE_DTYPE_F16]  = { "F16", 1, 2 },
  [HONE_DTYPE_Q4_0] = { "Q4_0", 32, 18 },
  [HONE_DTYPE_Q4_1] = { "Q4_1", 32, 20 },
  [HONE_DTYPE_Q5_0] = { "Q5_0", 32, 22 },
  [HONE_DTYPE_Q5_1] = { "Q5_1", 32, 24 },
  [HONE_DTYPE_Q8_0] = { "Q8_0", 32, 34 },
  [HONE_DTYPE_Q8_1] = { "Q8_1", 32, 36 },
  [HONE_DTYPE_Q2_K] = { "Q2_K", 256, 84 },
  [HONE_DTYPE_Q3_K] = { "Q3_K", 256, 110 },
  [HONE_DTYPE_Q4_K] = { "Q4_K", 256, 144 },
  [HONE_DTYPE_Q5_K] = { "Q5_K", 256, 176 },
  [HONE_DTYPE_Q6_K] = { "Q6_K", 256, 210 },
  [HONE_DTYPE_Q8_K] = { "Q8_K", 256, 292 },
  [HONE_DTYPE_I8]   = { "I8", 1, 1 },
  [HONE_DTYPE_I16]  = { "I16", 1, 2 },
  [HONE_DTYPE_I32]  = { "I32", 1, 4 },
  [HONE_DTYPE_I64]  = { "I64", 1, 8 },
  [HONE_DTYPE_F64]  = { "F64", 1, 8 },
  [HONE_DTYPE_BF16] = { "BF16", 1, 2 },
};

/* Hone-internal types live outside GGUF's numbering. */
static const TypeInfo q4z_info = { "Q4Z", 32, 20 };

static const TypeInfo *
info (HoneDType type)
{
  if (type == HONE_DTYPE_Q4Z)
    return &q4z_info;
  if ((unsigned) type >= HONE_DTYPE_COUNT_ || type_info[type].name == NULL)
    return NULL;
  return &type_info[type];
}

gboolean
hone_dtype_is_gguf (HoneDType type)
{
  return (unsigned) type < HONE_DTYPE_COUNT_ && type_info[type].name != NULL;
}

const char *
hone_dtype_name (HoneDType type)
{
  const TypeInfo *ti = info (type);
  return ti ? ti->name : NULL;
}

int
hone_dtype_from_name (const char *name)
{
  if (name == NULL)
    return -1;
  for (int t = 0; t < HONE_DTYPE_COUNT_; t++)
    if (type_info[t].name != NULL && g_ascii_strcasecmp (type_info[t].name, name) == 0)
      return t;
  if (g_ascii_strcasecmp (q4z_info.name, name) == 0)
    return HONE_DTYPE_Q4Z;
  return -1;
}

gboolean
hone_dtype_is_supported (HoneDType type)
{
  switch (type)
    {
    case HONE_DTYPE_F32: case HONE_DTYPE_F16: case HONE_DTYPE_BF16:
    case HONE_DTYPE_Q8_0: case HONE_DTYPE_Q4_0: case HONE_DTYPE_Q4_1:
    case HONE_DTYPE_Q4_K: case HONE_DTYPE_Q6_K: case HONE_DTYPE_Q4Z:
    case HONE_DTYPE_F64: case HONE_DTYPE_I8: case HONE_DTYPE_I16:
    case HONE_DTYPE_I32: case HONE_DTYPE_I64:
      return TRUE;
    default:
      return FALSE;
    }
}

int
hone_dtype_block_size (HoneDType type)
{
  const TypeInfo *ti = info (type);
  return ti ? ti->block_size : 0;
}

size_t
hone_dtype_block_bytes (HoneDType type)
{
  const TypeInfo *ti = info (type);
  return ti ? ti->block_bytes : 0;
}

size_t
hone_dtype_row_bytes (HoneDType type, int64_t n)
{
  const TypeInfo *ti = info (type);
  if (ti == NULL || n < 0 || n % ti->block_size != 0)
    return 0;
  /* Overflow guard: a row that does not fit size_t is no row at all. */
  if ((uint64_t) (n / ti->block_size) > SIZE_MAX / ti->block_bytes)
    return 0;
  return (size_t) (n / ti->block_size) * ti->block_bytes;
}

/* ---- scalar conversions ------------------------------------------------ */

static inline uint32_t
f32_bits (float f)
{
  uint32_t u;
  memcpy (&u, &f, 4);
  return u;
}

static inline float
bits_f32 (uint32_t u)
{
  float f;
  memcpy (&f, &u, 4);
  return f;
}

float
hone_f16_to_f32 (hone_f16 h)
{
  uint32_t sign = (uint32_t) (h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;

  if (exp == 0x1f)                       /* inf / nan: keep the payload */
    return bits_f32 (sign | 0x7f800000 | (mant << 13));
  if (exp != 0)                          /* normal */
    return bits_f32 (sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0)
    return bits_f32 (sign);
  /* Subnormal: mant · 2^-24, exactly representable as a normal f32. */
  {
    int e = -1;
    do
      {
        mant <<= 1;
        e++;
      }
    while ((mant & 0x400) == 0);
    /* value = 1.m · 2^(-14 - e - 1 + 1) */
    return bits_f32 (sign | ((uint32_t) (112 - e) << 23) | ((mant & 0x3ff) << 13));
  }
}

hone_f16
hone_f32_to_f16 (float f)
{
  uint32_t x = f32_bits (f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t a = x & 0x7fffffff;

  if (a >= 0x7f800000)                   /* inf, or nan made quiet */
    return (hone_f16) (sign | (a > 0x7f800000 ? 0x7e00 | ((a >> 13) & 0x3ff) : 0x7c00));
  if (a >= 0x477ff000)                   /* ≥ 65520 rounds (to even) past 65504 */
    return (hone_f16) (sign | 0x7c00);
  if (a >= 0x38800000)                   /* normal half: ≥ 2^-14 */
    {
      uint32_t h = ((((a >> 23) - 112) << 10) | ((a >> 13) & 0x3ff));
      uint32_t rem = a & 0x1fff;
      if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++;                             /* a carry into the exponent is right */
      return (hone_f16) (sign | h);
    }
  if (a <= 0x33000000)                   /* ≤ 2^-25: the tie at 2^-25 goes to even (0) */
    return (hone_f16) sign;
  {
    /* Subnormal half: count units of 2^-24. */
    uint32_t mant = (a & 0x7fffff) | 0x800000;
    int shift = 126 - (int) (a >> 23);   /* 14 … 24 */
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1)))
      h++;
    return (hone_f16) (sign | h);
  }
}

hone_bf16
hone_f32_to_bf16 (float f)
{
  uint32_t x = f32_bits (f);
  if ((x & 0x7fffffff) > 0x7f800000)     /* nan: keep it nan, make it quiet */
    return (hone_bf16) ((x >> 16) | 0x40);
  return (hone_bf16) ((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

static inline float
f16_load (const void *p)
{
  hone_f16 h;
  memcpy (&h, p, 2);
  return hone_f16_to_f32 (GUINT16_FROM_LE (h));
}

static inline void
f16_store (void *p, float f)
{
  hone_f16 h = GUINT16_TO_LE (hone_f32_to_f16 (f));
  memcpy (p, &h, 2);
}

/* ---- dequantization ---------------------------------------------------- */

static void
get_scale_min_k4 (int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
  if (j < 4)
    {
      *d = q[j] & 63;
      *m = q[j + 4] & 63;
    }
  else
    {
      *d = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
      *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
    }
}

static void
dequant_q4_0 (const uint8_t *src, float *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, src += sizeof (HoneBlockQ4_0), y += 32)
    {
      const float d = f16_load (src);
      const uint8_t *qs = src + 2;
      for (int j = 0; j < 16; j++)
        {
          const int x0 = (qs[j] & 0x0f) - 8;
          const int x1 = (qs[j] >> 4) - 8;
          y[j] = x0 * d;
          y[j + 16] = x1 * d;
        }
    }
}

static void
dequant_q4_1 (const uint8_t *src, float *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, src += sizeof (HoneBlockQ4_1), y += 32)
    {
      const float d = f16_load (src);
      const float m = f16_load (src + 2);
      const uint8_t *qs = src + 4;
      for (int j = 0; j < 16; j++)
        {
          const int x0 = qs[j] & 0x0f;
          const int x1 = qs[j] >> 4;
          y[j] = x0 * d + m;
          y[j + 16] = x1 * d + m;
        }
    }
}

static void
dequant_q4z (const uint8_t *src, float *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, src += sizeof (HoneBlockQ4Z), y += 32)
    {
      /* (q − z) is a small integer, so (q − z)·s is one rounding, as in AutoAWQ's dequant. */
      const float s = f16_load (src);
      const int z = src[2];
      const uint8_t *qs = src + 4;
      for (int j = 0; j < 16; j++)
        {
          y[j] = (float) ((qs[j] & 0x0f) - z) * s;
          y[j + 16] = (float) ((qs[j] >> 4) - z) * s;
        }
    }
}

static void
dequant_q8_0 (const uint8_t *src, float *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, src += sizeof (HoneBlockQ8_0), y += 32)
    {
      const float d = f16_load (src);
      const int8_t *qs = (const int8_t *) (src + 2);
      for (int j = 0; j < 32; j++)
        y[j] = qs[j] * d;
    }
}

static void
dequant_q4_k (const uint8_t *src, float *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, src += sizeof (HoneBlockQ4_K))
    {
      const float d = f16_load (src);
      const float min = f16_load (src + 2);
      const uint8_t *scales = src + 4;
      const uint8_t *q = src + 4 + HONE_K_SCALE_SIZE;
      int is = 0;
      uint8_t sc, m;
      for (int j = 0; j < HONE_QK_K; j += 64)
        {
          float d1, m1, d2, m2;
          get_scale_min_k4 (is + 0, scales, &sc, &m);
          d1 = d * sc;
          m1 = min * m;
          get_scale_min_k4 (is + 1, scales, &sc, &m);
          d2 = d * sc;
          m2 = min * m;
          for (int l = 0; l < 32; l++)
            *y++ = d1 * (q[l] & 0xf) - m1;
          for (int l = 0; l < 32; l++)
            *y++ = d2 * (q[l] >> 4) - m2;
          q += 32;
          is += 2;
        }
    }
}

static void
dequant_q6_k (const uint8_t *src, float *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, src += sizeof (HoneBlockQ6_K))
    {
      const uint8_t *ql = src;
      const uint8_t *qh = src + HONE_QK_K / 2;
      const int8_t *sc = (const int8_t *) (src + HONE_QK_K / 2 + HONE_QK_K / 4);
      const float d = f16_load (src + HONE_QK_K / 2 + HONE_QK_K / 4 + HONE_QK_K / 16);
      for (int n = 0; n < HONE_QK_K; n += 128)
        {
          for (int l = 0; l < 32; l++)
            {
              const int is = l / 16;
              const int q1 = (int) ((ql[l + 0] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
              const int q2 = (int) ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
              const int q3 = (int) ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
              const int q4 = (int) ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
              y[l + 0] = d * sc[is + 0] * q1;
              y[l + 32] = d * sc[is + 2] * q2;
              y[l + 64] = d * sc[is + 4] * q3;
              y[l + 96] = d * sc[is + 6] * q4;
            }
          y += 128;
          ql += 64;
          qh += 32;
          sc += 8;
        }
    }
}

void
hone_dequantize_row (HoneDType type, const void *src, float *dst, int64_t n)
{
  const uint8_t *s = src;
  int bs = hone_dtype_block_size (type);

  g_return_if_fail (hone_dtype_is_supported (type));
  g_return_if_fail (n >= 0 && n % bs == 0);

  switch (type)
    {
    case HONE_DTYPE_F32:
      for (int64_t i = 0; i < n; i++)
        {
          uint32_t u;
          memcpy (&u, s + 4 * i, 4);
          dst[i] = bits_f32 (GUINT32_FROM_LE (u));
        }
      break;
    case HONE_DTYPE_F16:
      for (int64_t i = 0; i < n; i++)
        dst[i] = f16_load (s + 2 * i);
      break;
    case HONE_DTYPE_BF16:
      for (int64_t i = 0; i < n; i++)
        {
          uint16_t h;
          memcpy (&h, s + 2 * i, 2);
          dst[i] = hone_bf16_to_f32 (GUINT16_FROM_LE (h));
        }
      break;
    case HONE_DTYPE_F64:
      for (int64_t i = 0; i < n; i++)
        {
          uint64_t u;
          double v;
          memcpy (&u, s + 8 * i, 8);
          u = GUINT64_FROM_LE (u);
          memcpy (&v, &u, 8);
          dst[i] = (float) v;
        }
      break;
    case HONE_DTYPE_I8:
      for (int64_t i = 0; i < n; i++)
        dst[i] = (float) (int8_t) s[i];
      break;
    case HONE_DTYPE_I16:
      for (int64_t i = 0; i < n; i++)
        {
          uint16_t u;
          memcpy (&u, s + 2 * i, 2);
          dst[i] = (float) (int16_t) GUINT16_FROM_LE (u);
        }
      break;
    case HONE_DTYPE_I32:
      for (int64_t i = 0; i < n; i++)
        {
          uint32_t u;
          memcpy (&u, s + 4 * i, 4);
          dst[i] = (float) (int32_t) GUINT32_FROM_LE (u);
        }
      break;
    case HONE_DTYPE_I64:
      for (int64_t i = 0; i < n; i++)
        {
          uint64_t u;
          memcpy (&u, s + 8 * i, 8);
          dst[i] = (float) (int64_t) GUINT64_FROM_LE (u);
        }
      break;
    case HONE_DTYPE_Q4_0: dequant_q4_0 (s, dst, n / 32); break;
    case HONE_DTYPE_Q4_1: dequant_q4_1 (s, dst, n / 32); break;
    case HONE_DTYPE_Q4Z: dequant_q4z (s, dst, n / 32); break;
    case HONE_DTYPE_Q8_0: dequant_q8_0 (s, dst, n / 32); break;
    case HONE_DTYPE_Q4_K: dequant_q4_k (s, dst, n / HONE_QK_K); break;
    case HONE_DTYPE_Q6_K: dequant_q6_k (s, dst, n / HONE_QK_K); break;
    default:
      break;
    }
}

/* ---- reference quantizers ---------------------------------------------- */

/* llama.cpp's nearest_int: round half to even through the float adder, defined
 * for every input (large or non-finite values give garbage, never UB). */
static inline int
nearest_int (float fval)
{
  float val = fval + 12582912.f;
  int i;
  memcpy (&i, &val, sizeof (int));
  return (i & 0x007fffff) - 0x00400000;
}

#define GROUP_MAX_EPS 1e-15f

static void
quant_q4_0 (const float *x, uint8_t *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, x += 32, y += sizeof (HoneBlockQ4_0))
    {
      float amax = 0.0f, max = 0.0f, d, id;
      for (int j = 0; j < 32; j++)
        if (amax < fabsf (x[j]))
          {
            amax = fabsf (x[j]);
            max = x[j];
          }
      d = max / -8;
      id = d ? 1.0f / d : 0.0f;
      f16_store (y, d);
      for (int j = 0; j < 16; j++)
        {
          const float x0 = x[j] * id;
          const float x1 = x[16 + j] * id;
          const uint8_t xi0 = MIN (15, (int8_t) (x0 + 8.5f));
          const uint8_t xi1 = MIN (15, (int8_t) (x1 + 8.5f));
          y[2 + j] = xi0 | (xi1 << 4);
        }
    }
}

static void
quant_q4_1 (const float *x, uint8_t *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, x += 32, y += sizeof (HoneBlockQ4_1))
    {
      float min = FLT_MAX, max = -FLT_MAX, d, id;
      for (int j = 0; j < 32; j++)
        {
          if (x[j] < min)
            min = x[j];
          if (x[j] > max)
            max = x[j];
        }
      d = (max - min) / ((1 << 4) - 1);
      id = d ? 1.0f / d : 0.0f;
      f16_store (y, d);
      f16_store (y + 2, min);
      for (int j = 0; j < 16; j++)
        {
          const float x0 = (x[j] - min) * id;
          const float x1 = (x[16 + j] - min) * id;
          const uint8_t xi0 = MIN (15, (int8_t) (x0 + 0.5f));
          const uint8_t xi1 = MIN (15, (int8_t) (x1 + 0.5f));
          y[4 + j] = xi0 | (xi1 << 4);
        }
    }
}

static void
quant_q8_0 (const float *x, uint8_t *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, x += 32, y += sizeof (HoneBlockQ8_0))
    {
      float amax = 0.0f, d, id;
      for (int j = 0; j < 32; j++)
        amax = MAX (amax, fabsf (x[j]));
      d = amax / ((1 << 7) - 1);
      id = d ? 1.0f / d : 0.0f;
      f16_store (y, d);
      for (int j = 0; j < 32; j++)
        y[2 + j] = (uint8_t) (int8_t) roundf (x[j] * id);
    }
}

/* llama.cpp make_qkx2_quants: asymmetric n-level quantization of one group,
 * searching scales around max-min for the lowest weighted squared error. */
static float
make_qkx2_quants (int n, int nmax, const float *x, const float *weights, uint8_t *L,
                  float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep)
{
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  float iscale, scale, best_error = 0;

  for (int i = 1; i < n; i++)
    {
      float w = weights[i];
      if (x[i] < min)
        min = x[i];
      if (x[i] > max)
        max = x[i];
      sum_w += w;
      sum_x += w * x[i];
    }
  if (min > 0)
    min = 0;
  if (max == min)
    {
      memset (L, 0, n);
      *the_min = -min;
      return 0.f;
    }
  iscale = nmax / (max - min);
  scale = 1 / iscale;
  for (int i = 0; i < n; i++)
    {
      int l = nearest_int (iscale * (x[i] - min));
      float diff;
      L[i] = MAX (0, MIN (nmax, l));
      diff = scale * L[i] + min - x[i];
      best_error += weights[i] * diff * diff;
    }
  for (int is = 0; is <= nstep; is++)
    {
      float sum_l = 0, sum_l2 = 0, sum_xl = 0, D;
      iscale = (rmin + rdelta * is + nmax) / (max - min);
      for (int i = 0; i < n; i++)
        {
          int l = nearest_int (iscale * (x[i] - min));
          float w = weights[i];
          l = MAX (0, MIN (nmax, l));
          Laux[i] = l;
          sum_l += w * l;
          sum_l2 += w * l * l;
          sum_xl += w * l * x[i];
        }
      D = sum_w * sum_l2 - sum_l * sum_l;
      if (D > 0)
        {
          float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
          float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
          float cur_error = 0;
          if (this_min > 0)
            {
              this_min = 0;
              this_scale = sum_xl / sum_l2;
            }
          for (int i = 0; i < n; i++)
            {
              float diff = this_scale * Laux[i] + this_min - x[i];
              cur_error += weights[i] * diff * diff;
            }
          if (cur_error < best_error)
            {
              memcpy (L, Laux, n);
              best_error = cur_error;
              scale = this_scale;
              min = this_min;
            }
        }
    }
  *the_min = -min;
  return scale;
}

static void
quant_q4_k (const float *x, uint8_t *yb, int64_t nb)
{
  uint8_t L[HONE_QK_K], Laux[32];
  float weights[32], mins[HONE_QK_K / 32], scales[HONE_QK_K / 32];

  for (int64_t i = 0; i < nb; i++, x += HONE_QK_K, yb += sizeof (HoneBlockQ4_K))
    {
      uint8_t *ysc = yb + 4, *q = yb + 4 + HONE_K_SCALE_SIZE;
      float max_scale = 0, max_min = 0, inv_scale, inv_min, dd, dmin;

      for (int j = 0; j < HONE_QK_K / 32; j++)
        {
          float sum_x2 = 0, av_x;
          for (int l = 0; l < 32; l++)
            sum_x2 += x[32 * j + l] * x[32 * j + l];
          av_x = sqrtf (sum_x2 / 32);
          for (int l = 0; l < 32; l++)
            weights[l] = av_x + fabsf (x[32 * j + l]);
          scales[j] = make_qkx2_quants (32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                        -1.f, 0.1f, 20);
          if (scales[j] > max_scale)
            max_scale = scales[j];
          if (mins[j] > max_min)
            max_min = mins[j];
        }
      inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
      inv_min = max_min > 0 ? 63.f / max_min : 0.f;
      memset (ysc, 0, HONE_K_SCALE_SIZE);
      for (int j = 0; j < HONE_QK_K / 32; j++)
        {
          /* As llama.cpp: truncate to a byte first, then clamp. */
          uint8_t ls = (uint8_t) nearest_int (inv_scale * scales[j]);
          uint8_t lm = (uint8_t) nearest_int (inv_min * mins[j]);
          ls = MIN (63, ls);
          lm = MIN (63, lm);
          if (j < 4)
            {
              ysc[j] = ls;
              ysc[j + 4] = lm;
            }
          else
            {
              ysc[j + 4] = (ls & 0xf) | ((lm & 0xf) << 4);
              ysc[j - 4] |= ((ls >> 4) << 6);
              ysc[j - 0] |= ((lm >> 4) << 6);
            }
        }
      f16_store (yb, max_scale / 63.f);
      f16_store (yb + 2, max_min / 63.f);
      dd = f16_load (yb);
      dmin = f16_load (yb + 2);
      for (int j = 0; j < HONE_QK_K / 32; j++)
        {
          uint8_t sc, m;
          float d, dm;
          get_scale_min_k4 (j, ysc, &sc, &m);
          d = dd * sc;
          if (!d)
            continue;
          dm = dmin * m;
          for (int ii = 0; ii < 32; ii++)
            {
              int l = nearest_int ((x[32 * j + ii] + dm) / d);
              L[32 * j + ii] = MAX (0, MIN (15, l));
            }
        }
      for (int j = 0; j < HONE_QK_K; j += 64)
        {
          for (int l = 0; l < 32; l++)
            q[l] = L[j + l] | (L[j + l + 32] << 4);
          q += 32;
        }
    }
}

/* llama.cpp make_qx_quants with rmse_type 1 and no importance weights:
 * symmetric quantization of one group minimising Σ x²·(x − s·l)². */
static float
make_qx_quants (int n, int nmax, const float *x, int8_t *L)
{
  float max = 0, amax = 0, iscale, sumlx = 0, suml2 = 0, scale, best;

  for (int i = 0; i < n; i++)
    {
      float ax = fabsf (x[i]);
      if (ax > amax)
        {
          amax = ax;
          max = x[i];
        }
    }
  if (amax < GROUP_MAX_EPS)
    {
      memset (L, 0, n);
      return 0.f;
    }
  iscale = -nmax / max;
  for (int i = 0; i < n; i++)
    {
      int l = nearest_int (iscale * x[i]);
      float w = x[i] * x[i];
      l = MAX (-nmax, MIN (nmax - 1, l));
      L[i] = l + nmax;
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
  scale = suml2 ? sumlx / suml2 : 0.0f;
  best = scale * sumlx;
  for (int is = -9; is <= 9; is++)
    {
      if (is == 0)
        continue;
      iscale = -(nmax + 0.1f * is) / max;
      sumlx = suml2 = 0;
      for (int i = 0; i < n; i++)
        {
          int l = nearest_int (iscale * x[i]);
          float w = x[i] * x[i];
          l = MAX (-nmax, MIN (nmax - 1, l));
          sumlx += w * x[i] * l;
          suml2 += w * l * l;
        }
      if (suml2 > 0 && sumlx * sumlx > best * suml2)
        {
          for (int i = 0; i < n; i++)
            {
              int l = nearest_int (iscale * x[i]);
              L[i] = nmax + MAX (-nmax, MIN (nmax - 1, l));
            }
          scale = sumlx / suml2;
          best = scale * sumlx;
        }
    }
  return scale;
}

static void
quant_q6_k (const float *x, uint8_t *yb, int64_t nb)
{
  int8_t L[HONE_QK_K];
  float scales[HONE_QK_K / 16];

  for (int64_t i = 0; i < nb; i++, x += HONE_QK_K, yb += sizeof (HoneBlockQ6_K))
    {
      uint8_t *ql = yb, *qh = yb + HONE_QK_K / 2;
      int8_t *ysc = (int8_t *) (yb + HONE_QK_K / 2 + HONE_QK_K / 4);
      uint8_t *yd = yb + HONE_QK_K / 2 + HONE_QK_K / 4 + HONE_QK_K / 16;
      float max_scale = 0, max_abs_scale = 0, iscale, dd;

      for (int ib = 0; ib < HONE_QK_K / 16; ib++)
        {
          const float scale = make_qx_quants (16, 32, x + 16 * ib, L + 16 * ib);
          const float abs_scale = fabsf (scale);
          scales[ib] = scale;
          if (abs_scale > max_abs_scale)
            {
              max_abs_scale = abs_scale;
              max_scale = scale;
            }
        }
      if (max_abs_scale < GROUP_MAX_EPS)
        {
          memset (yb, 0, sizeof (HoneBlockQ6_K));
          continue;
        }
      iscale = -128.f / max_scale;
      f16_store (yd, 1 / iscale);
      for (int ib = 0; ib < HONE_QK_K / 16; ib++)
        ysc[ib] = (int8_t) MIN (127, nearest_int (iscale * scales[ib]));
      dd = f16_load (yd);
      for (int j = 0; j < HONE_QK_K / 16; j++)
        {
          const float d = dd * ysc[j];
          if (!d)
            continue;
          for (int ii = 0; ii < 16; ii++)
            {
              int l = nearest_int (x[16 * j + ii] / d);
              l = MAX (-32, MIN (31, l));
              L[16 * j + ii] = l + 32;
            }
        }
      for (int j = 0; j < HONE_QK_K; j += 128)
        {
          for (int l = 0; l < 32; l++)
            {
              const uint8_t q1 = L[j + l + 0] & 0xf;
              const uint8_t q2 = L[j + l + 32] & 0xf;
              const uint8_t q3 = L[j + l + 64] & 0xf;
              const uint8_t q4 = L[j + l + 96] & 0xf;
              ql[l + 0] = q1 | (q3 << 4);
              ql[l + 32] = q2 | (q4 << 4);
              qh[l] = (L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4)
                      | ((L[j + l + 96] >> 4) << 6);
            }
          ql += 64;
          qh += 32;
        }
    }
}

gboolean
hone_quantize_row (HoneDType type, const float *src, void *dst, int64_t n)
{
  uint8_t *d = dst;
  int bs = hone_dtype_block_size (type);

  if (bs == 0 || n < 0 || n % bs != 0)
    return FALSE;
  switch (type)
    {
    case HONE_DTYPE_F32:
      for (int64_t i = 0; i < n; i++)
        {
          uint32_t u = GUINT32_TO_LE (f32_bits (src[i]));
          memcpy (d + 4 * i, &u, 4);
        }
      return TRUE;
    case HONE_DTYPE_F16:
      for (int64_t i = 0; i < n; i++)
        f16_store (d + 2 * i, src[i]);
      return TRUE;
    case HONE_DTYPE_BF16:
      for (int64_t i = 0; i < n; i++)
        {
          uint16_t h = GUINT16_TO_LE (hone_f32_to_bf16 (src[i]));
          memcpy (d + 2 * i, &h, 2);
        }
      return TRUE;
    case HONE_DTYPE_Q4_0: quant_q4_0 (src, d, n / 32); return TRUE;
    case HONE_DTYPE_Q4_1: quant_q4_1 (src, d, n / 32); return TRUE;
    case HONE_DTYPE_Q8_0: quant_q8_0 (src, d, n / 32); return TRUE;
    case HONE_DTYPE_Q4_K: quant_q4_k (src, d, n / HONE_QK_K); return TRUE;
    case HONE_DTYPE_Q6_K: quant_q6_k (src, d, n / HONE_QK_K); return TRUE;
    default:
      return FALSE;
    }
}
