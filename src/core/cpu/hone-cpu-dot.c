/* hone-cpu-dot.c — quantized dot-product tiles: portable C and x86 SIMD paths. */
#if defined(__GNUC__) && !defined(__clang__)
/* The tile kernels rely on full unrolling and scalar replacement of their
 * small accumulator arrays; -O3 makes sure of both under debugoptimized builds. */
#pragma GCC optimize ("O3")
#endif

#include "hone-cpu-dot.h"

#include <math.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HONE_HAVE_X86 1
#include <immintrin.h>
#include "hone-cpu-x86-vec.h"
#endif

/* ---------------------------------------------------------------- activations */

static void
quantize_act_portable (const float *x, HoneQ8Act *y, int64_t n)
{
  for (int64_t b = 0; b < n / HONE_CPU_QK; b++)
    {
      const float *xb = x + b * HONE_CPU_QK;
      float amax = 0.0f, d, id;
      int sum = 0;

      for (int j = 0; j < HONE_CPU_QK; j++)
        {
          float a = fabsf (xb[j]);
          amax = a > amax ? a : amax;
        }
      d = amax / 127.0f;
      id = d > 0.0f ? 1.0f / d : 0.0f;
      for (int j = 0; j < HONE_CPU_QK; j++)
        {
          int q = (int) lrintf (xb[j] * id);
          q = CLAMP (q, -127, 127);
          y[b].qs[j] = (int8_t) q;
          sum += q;
        }
      y[b].d = d;
      y[b].ds = d * (float) sum;
    }
}

/* ---------------------------------------------------------------- portable */

static float
dot_q4_0 (int K, const uint8_t *w, const HoneQ8Act *x)
{
  const HoneBlockQ4_0 *b = (const HoneBlockQ4_0 *) w;
  float sum = 0.0f;
  for (int i = 0; i < K / 32; i++)
    {
      int s = 0;
      for (int j = 0; j < 16; j++)
        s += (b[i].qs[j] & 0x0f) * x[i].qs[j] + (b[i].qs[j] >> 4) * x[i].qs[j + 16];
      sum += hone_cpu_f16_to_f32 (b[i].d) * (x[i].d * (float) s - 8.0f * x[i].ds);
    }
  return sum;
}

static float
dot_q4_1 (int K, const uint8_t *w, const HoneQ8Act *x)
{
  const HoneBlockQ4_1 *b = (const HoneBlockQ4_1 *) w;
  float sum = 0.0f;
  for (int i = 0; i < K / 32; i++)
    {
      int s = 0;
      for (int j = 0; j < 16; j++)
        s += (b[i].qs[j] & 0x0f) * x[i].qs[j] + (b[i].qs[j] >> 4) * x[i].qs[j + 16];
      sum += hone_cpu_f16_to_f32 (b[i].d) * x[i].d * (float) s + hone_cpu_f16_to_f32 (b[i].m) * x[i].ds;
    }
  return sum;
}

/* Q4Z (AWQ int4): s·(q − z), i.e. Q4_1 with m = −z·s. */
static float
dot_q4z (int K, const uint8_t *w, const HoneQ8Act *x)
{
  const HoneBlockQ4Z *b = (const HoneBlockQ4Z *) w;
  float sum = 0.0f;
  for (int i = 0; i < K / 32; i++)
    {
      const float s = hone_cpu_f16_to_f32 (b[i].s);
      int acc = 0;
      for (int j = 0; j < 16; j++)
        acc += (b[i].qs[j] & 0x0f) * x[i].qs[j] + (b[i].qs[j] >> 4) * x[i].qs[j + 16];
      sum += s * x[i].d * (float) acc - (float) b[i].z * s * x[i].ds;
    }
  return sum;
}

static float
dot_q8_0 (int K, const uint8_t *w, const HoneQ8Act *x)
{
  const HoneBlockQ8_0 *b = (const HoneBlockQ8_0 *) w;
  float sum = 0.0f;
  for (int i = 0; i < K / 32; i++)
    {
      int s = 0;
      for (int j = 0; j < 32; j++)
        s += b[i].qs[j] * x[i].qs[j];
      sum += hone_cpu_f16_to_f32 (b[i].d) * x[i].d * (float) s;
    }
  return sum;
}

static float
dot_q4_k (int K, const uint8_t *w, const HoneQ8Act *x)
{
  const HoneBlockQ4_K *b = (const HoneBlockQ4_K *) w;
  float sum = 0.0f;
  for (int i = 0; i < K / 256; i++)
    {
      float d = hone_cpu_f16_to_f32 (b[i].d), dmin = hone_cpu_f16_to_f32 (b[i].dmin);
      for (int j = 0; j < 4; j++)
        {
          const uint8_t *q = b[i].qs + 32 * j;
          const HoneQ8Act *a0 = x + 8 * i + 2 * j, *a1 = a0 + 1;
          uint8_t sc0, m0, sc1, m1;
          int s0 = 0, s1 = 0;
          hone_cpu_q4k_scale_min (2 * j, b[i].scales, &sc0, &m0);
          hone_cpu_q4k_scale_min (2 * j + 1, b[i].scales, &sc1, &m1);
          for (int l = 0; l < 32; l++)
            {
              s0 += (q[l] & 0x0f) * a0->qs[l];
              s1 += (q[l] >> 4) * a1->qs[l];
            }
          sum += d * sc0 * a0->d * (float) s0 - dmin * m0 * a0->ds;
          sum += d * sc1 * a1->d * (float) s1 - dmin * m1 * a1->ds;
        }
    }
  return sum;
}

static float
dot_q6_k (int K, const uint8_t *w, const HoneQ8Act *x)
{
  const HoneBlockQ6_K *b = (const HoneBlockQ6_K *) w;
  float sum = 0.0f;
  for (int i = 0; i < K / 256; i++)
    {
      float d = hone_cpu_f16_to_f32 (b[i].d);
      for (int n = 0; n < 2; n++)
        {
          const uint8_t *ql = b[i].ql + 64 * n, *qh = b[i].qh + 32 * n;
          const int8_t *sc = b[i].scales + 8 * n;
          for (int g = 0; g < 4; g++)
            {
              const HoneQ8Act *a = x + 8 * i + 4 * n + g;
              int s[2] = { 0, 0 };
              for (int l = 0; l < 32; l++)
                {
                  int lo = (g & 1) ? ql[l + 32] : ql[l];
                  int q = ((g < 2) ? (lo & 0x0f) : (lo >> 4)) | (((qh[l] >> (2 * g)) & 3) << 4);
                  s[l / 16] += (q - 32) * a->qs[l];
                }
              sum += d * a->d * (float) (sc[2 * g] * s[0] + sc[2 * g + 1] * s[1]);
            }
        }
    }
  return sum;
}

static float
dot_float (int K, const uint8_t *w, const float *x, int kind)
{
  float sum = 0.0f;
  for (int k = 0; k < K; k++)
    {
      float wk;
      if (kind == 0)
        wk = ((const float *) w)[k];
      else if (kind == 1)
        wk = hone_cpu_f16_to_f32 (((const uint16_t *) w)[k]);
      else
        wk = hone_bf16_to_f32 (((const uint16_t *) w)[k]);
      sum += wk * x[k];
    }
  return sum;
}

#define PORTABLE_TILE(NAME, EXPR)                                                           \
  static void                                                                               \
  NAME (int K, const void *w, size_t w_stride, int R, const void *x, size_t x_stride, int T, \
        float *out, size_t out_stride)                                                      \
  {                                                                                         \
    for (int r = 0; r < R; r++)                                                             \
      for (int t = 0; t < T; t++)                                                           \
        {                                                                                   \
          const uint8_t *wr = (const uint8_t *) w + (size_t) r * w_stride;                  \
          const void *xt = (const uint8_t *) x + (size_t) t * x_stride;                     \
          if (t == 0)                                                                       \
            for (size_t o = 0; o < w_stride; o += 64)                                       \
              hone_cpu_prefetch_ahead (wr + o);                                             \
          out[(size_t) t * out_stride + r] = EXPR;                                          \
        }                                                                                   \
  }

PORTABLE_TILE (tile_q4_0_portable, dot_q4_0 (K, wr, xt))
PORTABLE_TILE (tile_q4_1_portable, dot_q4_1 (K, wr, xt))
PORTABLE_TILE (tile_q4z_portable, dot_q4z (K, wr, xt))
PORTABLE_TILE (tile_q8_0_portable, dot_q8_0 (K, wr, xt))
PORTABLE_TILE (tile_q4_k_portable, dot_q4_k (K, wr, xt))
PORTABLE_TILE (tile_q6_k_portable, dot_q6_k (K, wr, xt))
PORTABLE_TILE (tile_f32_portable, dot_float (K, wr, xt, 0))
PORTABLE_TILE (tile_f16_portable, dot_float (K, wr, xt, 1))
PORTABLE_TILE (tile_bf16_portable, dot_float (K, wr, xt, 2))

static HoneCpuTileFunc
tile_func_portable (HoneDType type)
{
  switch (type)
    {
    case HONE_DTYPE_Q4_0: return tile_q4_0_portable;
    case HONE_DTYPE_Q4_1: return tile_q4_1_portable;
    case HONE_DTYPE_Q4Z: return tile_q4z_portable;
    case HONE_DTYPE_Q8_0: return tile_q8_0_portable;
    case HONE_DTYPE_Q4_K: return tile_q4_k_portable;
    case HONE_DTYPE_Q6_K: return tile_q6_k_portable;
    case HONE_DTYPE_F32: return tile_f32_portable;
    case HONE_DTYPE_F16: return tile_f16_portable;
    case HONE_DTYPE_BF16: return tile_bf16_portable;
    default: return NULL;
    }
}

/* ---------------------------------------------------------------- x86 */

#ifdef HONE_HAVE_X86

#define X(name) name##_avx2
#define XTARGET __attribute__((target ("avx2,fma,f16c")))
#define XMADD(u, s) _mm256_madd_epi16 (_mm256_maddubs_epi16 ((u), (s)), _mm256_set1_epi16 (1))
#include "hone-cpu-dot-x86.h"
#include "hone-cpu-dot-q4z-x86.h"
#undef X
#undef XTARGET
#undef XMADD

/* vpdpbusd does u8×s8 → i32 in one instruction (maddubs + madd in two otherwise). */
#define X(name) name##_vnni
#define XTARGET __attribute__((target ("avx2,fma,f16c,avxvnni")))
#define XMADD(u, s) _mm256_dpbusd_avx_epi32 (_mm256_setzero_si256 (), (u), (s))
#include "hone-cpu-dot-x86.h"
#include "hone-cpu-dot-q4z-x86.h"
#undef X
#undef XTARGET
#undef XMADD

/* The same kernels EVEX-encoded: AVX-512VL gives them 32 vector registers, so
 * a 2×4 tile's accumulators, scales and unpacked weights all stay in registers. */
#define X(name) name##_avx512
#define XTARGET __attribute__((target ("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512dq,avx512vnni")))
#define XMADD(u, s) _mm256_dpbusd_epi32 (_mm256_setzero_si256 (), (u), (s))
#define XHAVE512 1
#include "hone-cpu-dot-x86.h"
#include "hone-cpu-dot-q4z-x86.h"
#undef X
#undef XTARGET
#undef XMADD
#undef XHAVE512

#endif

/* ---------------------------------------------------------------- dispatch */

static int forced_isa = -1;

gboolean
hone_cpu_isa_supported (HoneCpuIsa isa)
{
#ifdef HONE_HAVE_X86
  gboolean avx2;

  __builtin_cpu_init ();
  avx2 = __builtin_cpu_supports ("avx2") && __builtin_cpu_supports ("fma") && __builtin_cpu_supports ("f16c");
  switch (isa)
    {
    case HONE_CPU_ISA_PORTABLE:
      return TRUE;
    case HONE_CPU_ISA_AVX2:
      return avx2;
    case HONE_CPU_ISA_AVXVNNI:
#if defined(__clang__) || __GNUC__ >= 11
      return avx2 && __builtin_cpu_supports ("avxvnni");
#else
      return FALSE;
#endif
    case HONE_CPU_ISA_AVX512VNNI:
      return avx2 && __builtin_cpu_supports ("avx512f") && __builtin_cpu_supports ("avx512vl") &&
             __builtin_cpu_supports ("avx512bw") && __builtin_cpu_supports ("avx512dq") &&
             __builtin_cpu_supports ("avx512vnni");
    default:
      return FALSE;
    }
#else
  return isa == HONE_CPU_ISA_PORTABLE;
#endif
}

HoneCpuIsa
hone_cpu_isa_detect (void)
{
  for (int isa = HONE_CPU_ISA_COUNT_ - 1; isa > HONE_CPU_ISA_PORTABLE; isa--)
    if (hone_cpu_isa_supported (isa))
      return isa;
  return HONE_CPU_ISA_PORTABLE;
}

HoneCpuIsa
hone_cpu_isa (void)
{
  static int detected = -1;
  if (forced_isa >= 0)
    return (HoneCpuIsa) forced_isa;
  if (detected < 0)
    {
      /* HONE_CPU_ISA=portable|avx2|avx-vnni|avx512-vnni caps the choice (CI, A/B runs). */
      const char *env = g_getenv ("HONE_CPU_ISA");
      int best = hone_cpu_isa_detect ();
      int i = env != NULL ? (int) hone_cpu_isa_from_name (env) : HONE_CPU_ISA_COUNT_;
      if (i < HONE_CPU_ISA_COUNT_)
        {
          while (i > HONE_CPU_ISA_PORTABLE && !hone_cpu_isa_supported (i))
            i--;
          best = MIN (best, i);
        }
      detected = best;
    }
  return (HoneCpuIsa) detected;
}

HoneCpuIsa
hone_cpu_set_isa (HoneCpuIsa isa)
{
  int i = MIN ((int) isa, HONE_CPU_ISA_COUNT_ - 1);
  while (i > HONE_CPU_ISA_PORTABLE && !hone_cpu_isa_supported (i))
    i--;
  forced_isa = i;
  return (HoneCpuIsa) forced_isa;
}

HoneCpuIsa
hone_cpu_isa_from_name (const char *name)
{
  for (int i = HONE_CPU_ISA_PORTABLE; i < HONE_CPU_ISA_COUNT_; i++)
    if (name != NULL && g_ascii_strcasecmp (name, hone_cpu_isa_name (i)) == 0)
      return (HoneCpuIsa) i;
  return HONE_CPU_ISA_COUNT_;
}

const char *
hone_cpu_isa_name (HoneCpuIsa isa)
{
  switch (isa)
    {
    case HONE_CPU_ISA_PORTABLE: return "portable";
    case HONE_CPU_ISA_AVX2: return "avx2";
    case HONE_CPU_ISA_AVXVNNI: return "avx-vnni";
    case HONE_CPU_ISA_AVX512VNNI: return "avx512-vnni";
    default: return "unknown";
    }
}

void
hone_cpu_quantize_act (const float *x, HoneQ8Act *y, int64_t n)
{
  const int64_t nb = n / HONE_CPU_QK;
  float *scales = (float *) (y + nb);

#ifdef HONE_HAVE_X86
  if (hone_cpu_isa () >= HONE_CPU_ISA_AVX2)
    quantize_act_avx2 (x, y, n);
  else
#endif
    quantize_act_portable (x, y, n);
  for (int64_t b = 0; b < nb; b++)
    {
      scales[b] = y[b].d;
      scales[nb + b] = y[b].ds;
    }
}

gboolean
hone_cpu_type_uses_q8 (HoneDType type)
{
  switch (type)
    {
    case HONE_DTYPE_Q4_0: case HONE_DTYPE_Q4_1: case HONE_DTYPE_Q8_0:
    case HONE_DTYPE_Q4_K: case HONE_DTYPE_Q6_K: case HONE_DTYPE_Q4Z:
      return TRUE;
    default:
      return FALSE;
    }
}

gboolean
hone_cpu_type_supported (HoneDType type)
{
  return tile_func_portable (type) != NULL;
}

int
hone_cpu_type_k_align (HoneDType type)
{
  switch (type)
    {
    case HONE_DTYPE_Q4_K: case HONE_DTYPE_Q6_K: return 256;
    case HONE_DTYPE_Q4_0: case HONE_DTYPE_Q4_1: case HONE_DTYPE_Q8_0: case HONE_DTYPE_Q4Z: return 32;
    default: return 1;
    }
}

HoneCpuTileFunc
hone_cpu_tile_func (HoneDType type, HoneCpuIsa isa)
{
#ifdef HONE_HAVE_X86
  /* Q4Z's kernels live in hone-cpu-dot-q4z-x86.h, outside the shared tables. */
  if (type == HONE_DTYPE_Q4Z && isa == HONE_CPU_ISA_AVX512VNNI)
    return tile_q4z_d_avx512;
  if (type == HONE_DTYPE_Q4Z && isa == HONE_CPU_ISA_AVXVNNI)
    return tile_q4z_d_vnni;
  if (type == HONE_DTYPE_Q4Z && isa == HONE_CPU_ISA_AVX2)
    return tile_q4z_d_avx2;
  if (isa == HONE_CPU_ISA_AVX512VNNI)
    return tile_func_avx512 (type);
  if (isa == HONE_CPU_ISA_AVXVNNI)
    return tile_func_vnni (type);
  if (isa == HONE_CPU_ISA_AVX2)
    return tile_func_avx2 (type);
#endif
  return tile_func_portable (type);
}
