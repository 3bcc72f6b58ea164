/* hone-dtype.h — tensor element types and quantized block layouts.
 *
 * Type numbers are GGUF's (ggml_type), so a GGUF tensor's u32 type is a
 * HoneDType as is. Blocks run along a row (the innermost dimension, the input
 * features of a weight matrix); a row of n elements of a block type holds
 * n / block_size blocks. Layouts follow llama.cpp's ggml-common.h.
 */
#pragma once

#include <glib.h>
#include <stdint.h>
#include <stddef.h>

G_BEGIN_DECLS

typedef enum {
  HONE_DTYPE_F32  = 0,
  HONE_DTYPE_F16  = 1,
  HONE_DTYPE_Q4_0 = 2,
  HONE_DTYPE_Q4_1 = 3,
  HONE_DTYPE_Q5_0 = 6,
  HONE_DTYPE_Q5_1 = 7,
  HONE_DTYPE_Q8_0 = 8,
  HONE_DTYPE_Q8_1 = 9,
  HONE_DTYPE_Q2_K = 10,
  HONE_DTYPE_Q3_K = 11,
  HONE_DTYPE_Q4_K = 12,
  HONE_DTYPE_Q5_K = 13,
  HONE_DTYPE_Q6_K = 14,
  HONE_DTYPE_Q8_K = 15,
  HONE_DTYPE_I8   = 24,
  HONE_DTYPE_I16  = 25,
  HONE_DTYPE_I32  = 26,
  HONE_DTYPE_I64  = 27,
  HONE_DTYPE_F64  = 28,
  HONE_DTYPE_BF16 = 30,
  HONE_DTYPE_COUNT_ = 40,     /* upper bound of GGUF numbers we know */
  /* Hone-internal, never in a GGUF file (the GGUF reader and writer refuse it):
   * AWQ int4 weights repacked at load (see HoneBlockQ4Z, hone-awq-load.h). */
  HONE_DTYPE_Q4Z  = 100,
} HoneDType;

typedef uint16_t hone_f16;   /* IEEE half, raw bits */
typedef uint16_t hone_bf16;  /* bfloat16, raw bits */

#define HONE_QK4_0 32
#define HONE_QK4_1 32
#define HONE_QK8_0 32
#define HONE_QK_K  256
#define HONE_K_SCALE_SIZE 12

typedef struct { hone_f16 d; uint8_t qs[HONE_QK4_0 / 2]; } HoneBlockQ4_0;            /* 18 B: (q-8)*d */
typedef struct { hone_f16 d; hone_f16 m; uint8_t qs[HONE_QK4_1 / 2]; } HoneBlockQ4_1; /* 20 B: q*d+m */
typedef struct { hone_f16 d; int8_t qs[HONE_QK8_0]; } HoneBlockQ8_0;                  /* 34 B: q*d */
/* 20 B: s·(q − z). 32 consecutive weights of a row with one fp16 scale and a
 * zero point 0..15; an AWQ group of g weights spans g/32 blocks with equal
 * (s, z). Nibble order as Q4_0/Q4_1 (byte j: element j low, j+16 high).
 * pad is always 0: the CPU kernels convert z and pad together as one f16,
 * the subnormal z·HONE_Q4Z_Z_SCALE (exact, and so under MXCSR.DAZ too:
 * vcvtph2ps ignores it), beside s in one conversion. */
typedef struct { hone_f16 s; uint8_t z; uint8_t pad; uint8_t qs[HONE_QK4_1 / 2]; } HoneBlockQ4Z;
#define HONE_Q4Z_Z_SCALE 0x1p-24f   /* the f16 of bits z (< 1024) is z·2⁻²⁴ */
typedef struct {                                                                      /* 144 B */
  hone_f16 d;                             /* super-block scale for the 6-bit scales */
  hone_f16 dmin;                          /* super-block scale for the 6-bit mins */
  uint8_t scales[HONE_K_SCALE_SIZE];      /* 8 scales + 8 mins, 6 bits each, packed */
  uint8_t qs[HONE_QK_K / 2];              /* 4-bit quants */
} HoneBlockQ4_K;
typedef struct {                                                                      /* 210 B */
  uint8_t ql[HONE_QK_K / 2];              /* low 4 bits */
  uint8_t qh[HONE_QK_K / 4];              /* high 2 bits */
  int8_t scales[HONE_QK_K / 16];          /* 8-bit scales of 16-element sub-blocks */
  hone_f16 d;                             /* super-block scale */
} HoneBlockQ6_K;

G_STATIC_ASSERT (sizeof (HoneBlockQ4_0) == 18);
G_STATIC_ASSERT (sizeof (HoneBlockQ4_1) == 20);
G_STATIC_ASSERT (sizeof (HoneBlockQ4Z) == 20);
G_STATIC_ASSERT (sizeof (HoneBlockQ8_0) == 34);
G_STATIC_ASSERT (sizeof (HoneBlockQ4_K) == 144);
G_STATIC_ASSERT (sizeof (HoneBlockQ6_K) == 210);

/* "F32", "Q4_K", "Q4Z", …; "unknown(N)" style names are not returned: NULL for unknown. */
const char *hone_dtype_name (HoneDType type);
/* Parse a name as printed by hone_dtype_name() (case-insensitive); -1 if unknown. */
int         hone_dtype_from_name (const char *name);
/* TRUE for the types libhone can read and dequantize:
 * F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K, Q4Z (and F64/I* for metadata-like tensors). */
gboolean    hone_dtype_is_supported (HoneDType type);
/* TRUE for the type numbers a GGUF file may hold (not Hone-internal ones like Q4Z). */
gboolean    hone_dtype_is_gguf (HoneDType type);
/* Elements per block (1 for plain types), bytes per block; 0 for unknown types. */
int         hone_dtype_block_size (HoneDType type);
size_t      hone_dtype_block_bytes (HoneDType type);
/* Bytes of a row of n elements; 0 if n is not a multiple of the block size or the type is unknown. */
size_t      hone_dtype_row_bytes (HoneDType type, int64_t n);

/* Dequantize n elements (a multiple of the block size) from src to f32. */
void        hone_dequantize_row (HoneDType type, const void *src, float *dst, int64_t n);
/* Quantize n f32 values into type's layout (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K),
 * the way llama.cpp's reference quantizers do (used by writers and test-model generators):
 * quantize_row_*_ref, with make_qkx2_quants (Q4_K) and make_qx_quants (Q6_K) search —
 * byte-identical to libggml's output in tests/test-dtype.c (/dtype/quant/vs-ggml).
 * Returns FALSE for types it cannot produce. */
gboolean    hone_quantize_row (HoneDType type, const float *src, void *dst, int64_t n);

/* Scalar conversions (exact, round-to-nearest-even on the way down). */
float       hone_f16_to_f32 (hone_f16 h);
hone_f16    hone_f32_to_f16 (float f);
static inline float
hone_bf16_to_f32 (hone_bf16 h)
{
  union { uint32_t u; float f; } v = { .u = (uint32_t) h << 16 };
  return v.f;
}
hone_bf16   hone_f32_to_bf16 (float f);

G_END_DECLS
