/* hone-cuda-awq.h — AWQ calibration on the GPU (internal; hone_awq_quantize()
 * dispatches here). The same algorithm, options, progress, cancellation and
 * results as the CPU implementation in hone-awq.c. */
#pragma once

#include "hone-awq.h"

G_BEGIN_DECLS

/* TRUE when a CUDA GPU of compute capability ≥ 8.0 is usable; else FALSE and
 * a one-line reason. */
gboolean       hone_cuda_awq_available (GError **error);

HoneAwqResult *hone_cuda_awq_quantize (HoneModel *model, const gint32 *tokens, int n_samples, int seq_len,
                                       const HoneAwqOptions *options,
                                       HoneAwqProgressFunc progress, gpointer progress_data,
                                       GCancellable *cancellable, GError **error);

G_END_DECLS
