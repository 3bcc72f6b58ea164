/* hone-cpu-matmul.h — Y = X·Wᵀ over weights in their stored type, on the pool.
 *
 * One call runs one or several matrices that share the same input (q/k/v, or
 * gate/up) as a single parallel job, so a layer costs few thread hand-offs.
 * Rows are handed out in small chunks through an atomic counter (a thread that
 * the OS descheduled on a busy machine does not stall the others). Inside a
 * chunk of a prefill (8+ tokens), the rows are repacked once into a panel
 * (hone-cpu-panel.h) that every token runs against; elsewhere tokens go in
 * tiles of 4, so each weight block is unpacked once per 4 tokens while the
 * chunk's rows stay in L1.
 */
#pragma once

#include "hone-tensor.h"
#include "hone-cpu-dot.h"
#include "hone-cpu-threadpool.h"

G_BEGIN_DECLS

typedef struct {
  const HoneTensor *w;    /* ne = {K, N}: N rows of K */
  float *y;               /* T × N, row stride N floats */
} HoneCpuMatmulOut;

/* x: T × K floats (row stride K); xq: T activation rows of hone_cpu_act_row_blocks (K)
 * blocks (hone_cpu_quantize_act), or NULL when no matrix needs them (see
 * hone_cpu_matmul_needs_q8). All w share K. */
void     hone_cpu_matmul (HoneCpuPool *pool, const HoneCpuMatmulOut *outs, int n_outs,
                          const float *x, const HoneQ8Act *xq, int K, int T);

gboolean hone_cpu_matmul_needs_q8 (const HoneCpuMatmulOut *outs, int n_outs);

/* The precise mode (hone-cpu-precise.h): f32 activations for every weight
 * type; integer-type rows are dequantized chunk by chunk into @scratch, which
 * holds hone_cpu_matmul_precise_scratch (K, n_threads of @pool) floats. */
void     hone_cpu_matmul_precise (HoneCpuPool *pool, const HoneCpuMatmulOut *outs, int n_outs,
                                  const float *x, int K, int T, float *scratch);
gsize    hone_cpu_matmul_precise_scratch (int K_max, int n_threads);

G_END_DECLS
