/* hone-awq-private.h — what the CPU (hone-awq.c) and CUDA (cuda/hone-cuda-awq.c)
 * implementations of AWQ share, so both search the same candidates. */
#pragma once

#include "hone-awq.h"

G_BEGIN_DECLS

/* The scaling groups, in search order. */
typedef enum { HONE_AWQ_GROUP_QKV, HONE_AWQ_GROUP_VO, HONE_AWQ_GROUP_GATE_UP, HONE_AWQ_GROUP_DOWN } HoneAwqGroupKind;

/* The layer's linear @i (HoneAwqLinearId) as stored in the model. */
const HoneTensor *hone_awq_layer_tensor (const HoneLayerWeights *L, int i);
/* A whole tensor dequantized to f32 (g_free). */
float *hone_awq_dequant_tensor (const HoneTensor *t);

/* Candidate gi of the grid: s[k] = x_mean^r / (w_mean^(1−r) + 1e-4), ≥ 1e-4,
 * divided by sqrt(max·min); non-finite or zero → 1. */
void   hone_awq_grid_scales (const float *x_mean, const float *w_mean, int K, int gi, int n_grid, float *s);

/* HONE_AWQ_DEBUG: print the time since *t0 under @stage, reset *t0. */
void   hone_awq_stage_time (const char *stage, gint64 *t0);
gboolean hone_awq_debug (void);

/* HONE_ERROR_CANCELLED when @cancellable fired. */
gboolean hone_awq_cancelled (GCancellable *cancellable, GError **error);

/* A result shell for @model: layers and search records allocated. */
HoneAwqResult *hone_awq_result_new (HoneModel *model, const HoneAwqOptions *options, gboolean calibrate,
                                    int n_samples, int seq_len);

G_END_DECLS
