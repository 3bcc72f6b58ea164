/* hone-awq.h — activation-aware weight quantization (AWQ), int4 with zero point.
 *
 * What the reference implementation (AutoAWQ, "GEMM" version) does, on the CPU:
 * per decoder layer, in order, with the layer's input taken from the
 * unquantized model (f32), four groups are searched:
 *   attn_norm → {q, k, v}   loss on the attention output (after o)
 *   v → o                    only when v and o have equal shapes (not GQA)
 *   ffn_norm → {gate, up}    loss on the MLP output (after down)
 *   up → down
 * x_mean = mean |x| per input channel, w_mean = per-channel mean of |W|
 * normalised by each group's absmax; n_grid ratios r = i/n_grid:
 * s = x_mean^r / (w_mean^(1−r) + 1e-4), clamp ≥ 1e-4, s /= sqrt(max·min); the
 * lowest output MSE of W ← Q(W·s)/s wins. 1/s is folded into the previous
 * norm weight (or previous linear's output rows and bias). Then a clip search
 * (all linears but q and k) on ≤ clip_tokens sampled tokens: per group
 * max = absmax·(1 − i/n_grid), i < n_grid/2, lowest output error. Finally
 * every linear is quantized with the zero-point quantizer.
 *
 * One deliberate difference: a group's scale is rounded to 7 significant
 * bits (and kept ≥ 2^-14). Then z·s is an exact fp16 for every z ≤ 15, so a
 * GGUF Q4_1 block (d = s, m = −z·s) holds exactly the same values as the
 * AutoAWQ checkpoint ((q − z)·s with fp16 s). The lost scale precision
 * (≤ 0.4 % of a step) changes nothing measurable.
 *
 * Weights stay in the model's stored row order (llama GGUF: Q/K permuted);
 * exporters convert.
 */
#pragma once

#include <glib.h>
#include <gio/gio.h>
#include "hone-model.h"

G_BEGIN_DECLS

typedef enum {
  HONE_AWQ_WQ, HONE_AWQ_WK, HONE_AWQ_WV, HONE_AWQ_WO,
  HONE_AWQ_W_GATE, HONE_AWQ_W_UP, HONE_AWQ_W_DOWN,
  HONE_AWQ_N_LINEARS,
} HoneAwqLinearId;

typedef struct {
  int group_size;           /* 32, 64 or 128; must divide every row length */
  int bits;                 /* 4 (the only one) */
  int n_grid;               /* 20 */
  int loss_tokens;          /* tokens (whole samples) the scale search's loss runs over; 0 = all */
  int clip_tokens;          /* ≤ tokens sampled for the clip search (512) */
  int n_threads;            /* 0 = all cores */
  gboolean search_scales;   /* FALSE: no scaling (RTN when clip is off too) */
  gboolean search_clip;
} HoneAwqOptions;

void hone_awq_options_init (HoneAwqOptions *options);

/* One quantized linear: N rows (output features) of K (input features), in
 * groups of g along a row. q: N×K values 0..15, two a byte (value k of row n
 * in byte (n·K + k) / 2, the low nibble for even k: hone_awq_linear_q); z:
 * N×(K/g) zero points 0..15, one a byte; s: N×(K/g) fp16 scales.
 * w = (q − z)·s. A calibrated 8B model's result is ~3.5 GB of q. */
typedef struct {
  int K, N, group_size;
  guint8 *q;
  guint8 *z;
  guint16 *s;
} HoneAwqLinear;

static inline int
hone_awq_linear_q (const HoneAwqLinear *lin, int row, int k)
{
  const size_t i = (size_t) row * lin->K + (size_t) k;
  return (lin->q[i / 2] >> (4 * (i & 1))) & 15;
}

/* Bytes of @lin's q (K is even: a multiple of the group size). */
static inline size_t
hone_awq_linear_q_bytes (const HoneAwqLinear *lin)
{
  return (size_t) lin->N * lin->K / 2;
}

/* Row @row's K values of q, one a byte. */
void     hone_awq_linear_q_row (const HoneAwqLinear *lin, int row, guint8 *values);
/* @n values 0..15 (n even) two a byte, the first in the low nibble. */
void     hone_awq_pack_nibbles (const guint8 *values, size_t n, guint8 *packed);

typedef struct {
  float *attn_norm, *ffn_norm;                 /* [hidden], with 1/s folded in */
  float *bq, *bk, *bv;                         /* qwen2 biases (bv with 1/s when v→o ran), else NULL */
  HoneAwqLinear lin[HONE_AWQ_N_LINEARS];
} HoneAwqLayer;

typedef struct {
  HoneModel *model;          /* the source (ref): config, embeddings, output, tokenizer */
  int group_size;
  HoneAwqLayer *layers;      /* config.n_layers */
  int n_samples, seq_len;    /* calibration that produced it (0 for RTN) */
  double seconds;            /* wall time of the calibration */
  gboolean rtn;              /* no scale and no clip search */
  /* What the scale search saw (calibrated results only, else NULL/0): per layer
   * and scaling group (qkv, v→o, gate-up, down; HONE_AWQ_N_GROUPS) the chosen
   * grid index (−1: not searched) and each candidate's loss (NaN: not searched). */
  int n_grid;
  int *search_choice;        /* n_layers × HONE_AWQ_N_GROUPS */
  double *search_loss;       /* n_layers × HONE_AWQ_N_GROUPS × n_grid */
  gboolean cuda;             /* calibrated on the GPU */
  gsize export_piece;        /* the most bytes an export makes a tensor in at a time (whole rows;
                                0: HONE_TENSOR_FILL_PIECE) */
} HoneAwqResult;

#define HONE_AWQ_N_GROUPS 4

void hone_awq_result_free (HoneAwqResult *result);

/* Progress: layer (0-based) just finished of n_layers, with elapsed seconds
 * and an estimate of what is left. */
typedef void (*HoneAwqProgressFunc) (int layer, int n_layers, double elapsed_s, double eta_s,
                                     gpointer user_data);

/* Check that @model can be quantized with @options (arch, group size divides
 * every row length, bits 4, not already AWQ). */
gboolean hone_awq_check (HoneModel *model, const HoneAwqOptions *options, GError **error);

/* TRUE (and an error naming @path) when @path is an AWQ checkpoint (a HF
 * folder whose config.json has quantization_config.quant_method "awq") or a
 * GGUF written by Hone's AWQ export. */
gboolean hone_awq_path_is_quantized (const char *path, GError **error);

/* Calibrate and quantize. @tokens: n_samples × seq_len token ids (row-major).
 * With search_scales and search_clip FALSE the tokens are not used (RTN; may
 * be NULL with n_samples 0). Deterministic for the same inputs and thread count
 * independent. HONE_ERROR_CANCELLED when @cancellable fires (nothing kept). */
/* TRUE when hone_awq_quantize() would calibrate on the GPU (CUDA built and usable,
 * HONE_AWQ_DEVICE not "cpu"); callers pick their default sample counts by it. */
gboolean hone_awq_gpu_available (void);
HoneAwqResult *hone_awq_quantize (HoneModel *model, const gint32 *tokens, int n_samples, int seq_len,
                                  const HoneAwqOptions *options,
                                  HoneAwqProgressFunc progress, gpointer progress_data,
                                  GCancellable *cancellable, GError **error);

/* The zero-point quantizer on one group of n values, as AutoAWQ's
 * pseudo_quantize_tensor (with the 7-bit scale rounding above). clip > 0
 * clamps to [−clip, clip] first. Writes q[n], returns z and s (fp16). */
void     hone_awq_quantize_group (const float *w, int n, float clip, guint8 *q, guint8 *z, guint16 *s);
/* The scale rounding alone: 7 significant bits, ≥ 2^-14, as fp16 bits. */
guint16  hone_awq_round_scale (float s);

/* Dequantize row r of a linear into K floats: (q − z)·s. */
void     hone_awq_linear_dequantize_row (const HoneAwqLinear *lin, int row, float *out);

/* AutoAWQ GEMM packing: nibble i of word c holds column 8c + order[i],
 * order = {0,2,4,6,1,3,5,7}. pack: n values (multiple of 8) → n/8 words. */
void     hone_awq_pack_row (const guint8 *values, int n, guint32 *words);
void     hone_awq_unpack_row (const guint32 *words, int n, guint8 *values);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (HoneAwqResult, hone_awq_result_free)

G_END_DECLS
