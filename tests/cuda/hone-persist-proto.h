/* hone-persist-proto.h — persistent decode layer kernel (prototype, issue #5).
 *
 * One launch runs the phases of a decoder layer between two attentions, for
 * one token: h += Wo·attn; act = SwiGLU(Wgu·RMSNorm(h)); h += Wdown·act;
 * qkv = Wqkv'·RMSNorm'(h) (the next layer's q|k|v, stored plain: no RoPE, no
 * KV write). The phases are separated by grid-wide barriers; before each
 * barrier every warp issues its first weight loads of the next phase, so the
 * memory keeps streaming through the synchronisation. The grid is one wave
 * (SMs × resident blocks), launched cooperatively when asked.
 *
 * Not used by hone_k_forward (a measured prototype, slower than the per-GEMV
 * kernels it would replace: notes in tests/bench/RESULTS-cuda.md, "Persistent
 * decode layer"): tests/cuda/hone-persist-check.cu. Best measured settings:
 * stage_async 0, barrier 1, prefetch 1, unroll 4, 2 blocks a SM, dyn 0.
 */
#ifndef HONE_K_DECODE_PERSIST_H
#define HONE_K_DECODE_PERSIST_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One layer's pieces, in the GPU layouts of hone-kernels.h (all four matrices
 * of one type; *_s NULL for BF16). wqkv/attn_norm are the NEXT layer's (the
 * q|k|v this launch produces feeds the next attention). An array of these
 * lives in device memory. */
typedef struct {
  const void *wo_q, *wo_s;        /* hidden × hidden */
  const void *wgu_q, *wgu_s;      /* 2·ffn × hidden, rows interleaved gate, up */
  const void *wdown_q, *wdown_s;  /* hidden × ffn */
  const void *wqkv_q, *wqkv_s;    /* qkv_rows × hidden */
  const float *attn;              /* f32 [hidden]: the attention output (o's input) */
  const float *ffn_norm;          /* f32 [hidden] */
  const float *attn_norm;         /* f32 [hidden]: RMSNorm weights before wqkv */
  float *qkv;                     /* f32 [qkv_rows] output */
} HoneKPersistLayer;

typedef struct {
  int type;                   /* HONE_K_BF16 or HONE_K_Q4_0 */
  int hidden, ffn, qkv_rows;  /* hidden, ffn multiples of 32 (Q4_0) or 8 (BF16) */
  int n_layers;               /* layers run by this launch, one after another (barrier between) */
  const HoneKPersistLayer *layers;   /* device array [n_layers] */
  float *h;                   /* f32 [hidden], residual stream, updated in place */
  float *act;                 /* f32 [ffn] scratch (SwiGLU output) */
  float eps;
  unsigned *sync;             /* device, 16 unsigned (8-byte aligned), zeroed once; every launch leaves them
                               * consistent: [0..1] barrier, [2] exits, [4..11] dynamic work counters */
  int grid;                   /* blocks; 0: SMs × blocks_per_sm */
  int blocks_per_sm;          /* 0: 2 (or what fits) */
  int prefetch;               /* 1: next phase's first weight loads issued before each barrier */
  int unroll;                 /* 16-byte chunk loads a lane keeps in flight per row: 4 or 8 */
  int cooperative;            /* 1: cudaLaunchAttributeCooperative (co-residency checked by the driver) */
  int stage_async;            /* activation staging: 0 loads through registers, 1 cp.async into shared memory */
  int barrier;                /* 0: count + generation words; 1: one 64-bit arrival counter (monotonic:
                               * every launch on the same sync words must use the same grid) */
  int phase_mask;             /* phases run (bit p: p0 o, p1 gate|up, p2 down, p3 qkv); 0: all (timing aid) */
  unsigned long long *trace;  /* timing aid, NULL: off. Else [grid][4·n_layers][6]: per block and phase,
                               * %globaltimer (ns) at phase start, staged, done (before its barrier),
                               * then clock64 at the same three points */
  int dyn;                    /* gate|up and down: the last dyn/1024 of their row pairs handed out one at a
                               * time from a counter (0: all rows split statically) */
} HoneKPersistArgs;

/* Enqueue one launch; returns a cudaError_t as int. Plain launches check
 * co-residency from the occupancy calculator. */
int hone_k_decode_persist (const HoneKPersistArgs *a, cudaStream_t stream);

/* The grid barrier alone: @blocks blocks (256 threads, co-resident) pass
 * @n_barriers barriers of @mode (HoneKPersistArgs.barrier). */
int hone_k_persist_barrier_bench (int blocks, int n_barriers, unsigned *sync, int cooperative, int mode,
                                  cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
