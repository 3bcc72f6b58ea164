/* hone-cpu-dot.h — quantized dot products: tiles of weight rows × tokens.
 *
 * Weights are read in their stored type. Activations for the integer types
 * (Q8_0, Q4_0, Q4_1, Q4_K, Q6_K) are quantized to 8 bits per block of 32 with
 * one f32 scale (as llama.cpp's Q8_1), so a weight block × activation block is
 * one integer dot product and one float multiply-add; ds = d·Σq carries the
 * term that offsets/mins (Q4_0, Q4_1, Q4_K) need. Float weights (F32, F16,
 * BF16) take f32 activations.
 *
 * A tile kernel computes R weight rows against T tokens at once (R, T ≤ 4,
 * R·T ≤ 8): a weight block is loaded and unpacked once and used T times, which
 * is what makes batched prefill cheaper per token than decode.
 *
 * Instruction sets are chosen at run time (__builtin_cpu_supports); tests can
 * force a lower one with hone_cpu_set_isa() to check every path.
 */
#pragma once

#include <glib.h>
#include <stdint.h>
#include <string.h>
#include "hone-dtype.h"

G_BEGIN_DECLS

#define HONE_CPU_QK 32          /* activation block */
#define HONE_CPU_TILE_R 4
#define HONE_CPU_TILE_T 4

/* Decode (one token) reads every weight once, from memory: the hardware
 * prefetcher alone left a thread waiting on its weight loads (perf: half of
 * the Q4_1 kernel's samples on them, 6.7 GB/s a thread). So each kernel asks,
 * as it reads a weight block, for the bytes this far ahead — a tile's rows are
 * contiguous, so that is the same spot of rows a few tiles on. 32 KiB: the
 * best of 4–64 KiB on a 2-thread EPYC (Zen 5) VM (tests/bench/RESULTS.md).
 * Into L2 (locality 2), not L1: 32 KiB ahead is an L1's whole size on many
 * CPUs (as fast as L1 here). A prefetch never faults, past the end of the
 * weights included. */
#define HONE_CPU_PREFETCH_BYTES 32768

static inline void
hone_cpu_prefetch_ahead (const void *p)
{
  __builtin_prefetch ((const char *) p + HONE_CPU_PREFETCH_BYTES, 0, 2);
}

typedef struct {
  float d;                      /* scale: x ≈ d·q */
  float ds;                     /* d · Σ q (for weight offsets and mins) */
  int8_t qs[HONE_CPU_QK];
} HoneQ8Act;

G_STATIC_ASSERT (sizeof (HoneQ8Act) == 40);

/* An activation row of K elements, as hone_cpu_quantize_act writes it: its
 * K/32 blocks, then the blocks' d and then their ds again as two float arrays
 * (d[K/32], ds[K/32]), in the HoneQ8Act slots after the blocks. The Q4_K tiles
 * load a super-block's 8 scales with one load each there instead of gathering
 * them from 8 blocks 40 bytes apart (session 28: +20 % for that tile alone
 * with the gather taken out). Rows are hone_cpu_act_row_blocks (K) blocks apart. */
static inline int
hone_cpu_act_row_blocks (int K)
{
  const int nb = K / 32;
  return nb + (nb * 2 * (int) sizeof (float) + (int) sizeof (HoneQ8Act) - 1) / (int) sizeof (HoneQ8Act);
}

/* The d[] array of a row's scale copy (ds[] follows at + K/32). */
static inline const float *
hone_cpu_act_scales (const HoneQ8Act *row, int K)
{
  return (const float *) (row + K / 32);
}

typedef enum {
  HONE_CPU_ISA_PORTABLE,        /* plain C, any CPU */
  HONE_CPU_ISA_AVX2,            /* AVX2 + FMA + F16C */
  HONE_CPU_ISA_AVXVNNI,         /* the AVX2 path with VEX vpdpbusd (Alder Lake, Sapphire Rapids, Zen 5) */
  HONE_CPU_ISA_AVX512VNNI,      /* the same, EVEX-encoded with 32 registers (Ice Lake+, Zen 4+) */
  HONE_CPU_ISA_COUNT_,
} HoneCpuIsa;

/* Best ISA this CPU supports; whether it supports a given one (they are not
 * strictly nested: Ice Lake has AVX-512 VNNI but not AVX-VNNI). */
HoneCpuIsa  hone_cpu_isa_detect (void);
gboolean    hone_cpu_isa_supported (HoneCpuIsa isa);
/* The ISA kernels use now (detected, unless forced). */
HoneCpuIsa  hone_cpu_isa (void);
/* Force an ISA (tests, benchmarks); an unsupported one falls back to the best
 * supported one below it. Returns the ISA in use. */
HoneCpuIsa  hone_cpu_set_isa (HoneCpuIsa isa);
const char *hone_cpu_isa_name (HoneCpuIsa isa);
/* The ISA of a name hone_cpu_isa_name gives (any case); HONE_CPU_ISA_COUNT_ if none. */
HoneCpuIsa  hone_cpu_isa_from_name (const char *name);

/* TRUE for weight types whose kernels take HoneQ8Act activations; FALSE for float
 * activations (F32/F16/BF16). */
gboolean    hone_cpu_type_uses_q8 (HoneDType type);
/* TRUE for the weight types the CPU kernels run. */
gboolean    hone_cpu_type_supported (HoneDType type);
/* Alignment K must have for the type: 32 for Q*_0/1, 256 for K-quants, 1 for floats. */
int         hone_cpu_type_k_align (HoneDType type);

/* Quantize a row of n (multiple of 32) floats: y receives the row as above,
 * hone_cpu_act_row_blocks (n) blocks. */
void        hone_cpu_quantize_act (const float *x, HoneQ8Act *y, int64_t n);

/* out[t·out_stride + r] = Σ_k W[r][k] · x[t][k] for r < R, t < T.
 * w: row 0 of the tile; w_stride: bytes between rows.
 * x: token 0's activations (a HoneQ8Act row as above, or floats, as the type needs);
 * x_stride: bytes between tokens. K: elements per row. */
typedef void (*HoneCpuTileFunc) (int K, const void *w, size_t w_stride, int R,
                                 const void *x, size_t x_stride, int T,
                                 float *out, size_t out_stride);

/* Tile kernel for a weight type on an ISA (falls back to portable where the ISA
 * has none); NULL for unsupported types. */
HoneCpuTileFunc hone_cpu_tile_func (HoneDType type, HoneCpuIsa isa);

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K super-block, as
 * llama.cpp's get_scale_min_k4. */
static inline void
hone_cpu_q4k_scale_min (int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
  if (j < 4)
    {
      *d = q[j] & 63;
      *m = q[j + 4] & 63;
    }
  else
    {
      *d = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
      *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* An on/off switch for A/B measurements and tests (panels, attention batches):
 * on unless the environment variable @env is "0", read once into *@state
 * (−1 before); the setter returns the previous state. */
static inline gboolean
hone_cpu_switch_get (int *state, const char *env)
{
  if (*state < 0)
    *state = g_strcmp0 (g_getenv (env), "0") != 0;
  return *state;
}

static inline gboolean
hone_cpu_switch_set (int *state, const char *env, gboolean on)
{
  gboolean was = hone_cpu_switch_get (state, env);

  *state = on != FALSE;
  return was;
}

/* f16 → f32 without hone-dtype's call overhead (exact, incl. subnormals). */
static inline float
hone_cpu_f16_to_f32 (uint16_t h)
{
  uint32_t sign = (uint32_t) (h & 0x8000) << 16;
  uint32_t em = h & 0x7fff;
  uint32_t bits;
  float f;

  if (em >= 0x7c00)                       /* inf / nan */
    bits = sign | 0x7f800000 | ((uint32_t) (em & 0x3ff) << 13);
  else if (em >= 0x0400)                  /* normal */
    bits = sign | ((em << 13) + ((uint32_t) (127 - 15) << 23));
  else                                    /* subnormal or zero: em · 2^-24 */
    {
      f = (float) em * 5.9604644775390625e-8f;
      memcpy (&bits, &f, 4);
      bits |= sign;
    }
  memcpy (&f, &bits, 4);
  return f;
}

G_END_DECLS
