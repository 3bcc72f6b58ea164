/* hone-k-trace.cuh — a timeline of the kernels of a captured decode step
 * (measurement only; internal).
 *
 * Built only with the meson option kernel_trace (nvcc -DHONE_K_TRACE): then
 * every block of an instrumented kernel (the decode GEMV, decode attention,
 * the RMSNorm / quantize / W4A16 pack kernels) writes, into a record of its
 * own, %globaltimer at entry, after its PDL wait, when its main loop is done
 * and at exit (the last warp's), and its SM. ncu serializes kernels, so it
 * cannot show how consecutive launches overlap under PDL; this can.
 *
 * Without the option every macro below expands to nothing: the kernels,
 * their arguments and their code generation are exactly as before.
 *
 * Records are handed out on the host, at launch, only while the stream is
 * being captured into a graph (hone_k_trace_slot; a new capture starts the
 * table again), so a trace always describes the last captured graph:
 * hone_k_trace_reserve, capture, replay, hone_k_trace_clear, replay once,
 * hone_k_trace_dump (hone-kernels.h). */
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

/* What a traced launch is (the dump's tag column). */
enum { HONE_K_TR_GEMV = 1, HONE_K_TR_ATTN = 2, HONE_K_TR_NORM = 3, HONE_K_TR_QUANT = 4, HONE_K_TR_PACK = 5 };

/* One block: t[0] entry, t[1] PDL wait passed, t[2] main loop done (the last
 * warp's), t[3] exit (the last warp's), t[4..6] marks a kernel places itself
 * (TRACE_MARK; the last warp's); ns of %globaltimer. 0: not reached. */
#define HONE_K_TRACE_MARKS 7
struct HoneKTraceRec {
  unsigned long long t[HONE_K_TRACE_MARKS];
  unsigned sm, pad;
};

/* The records of a launch of `blocks` blocks, or NULL (not capturing, no
 * buffer reserved, buffer full, or not a trace build). info0/info1: what the
 * dump shows of it (a GEMV's rows and columns). */
extern "C" HoneKTraceRec *hone_k_trace_slot (int tag, unsigned blocks, unsigned info0, unsigned info1,
                                             cudaStream_t stream);

#ifdef HONE_K_TRACE

static __device__ __forceinline__ unsigned long long
trace_now (void)
{
  unsigned long long t;
  asm volatile ("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory");   /* memory ops stay on their side of a mark */
  return t;
}

/* A block's record, written as the block passes its marks; the destructor
 * takes the exit time of every warp (each warp's lane 0), whichever return
 * the warp leaves by. */
struct HoneKTraceBlock {
  HoneKTraceRec *r;
  __device__ __forceinline__ explicit HoneKTraceBlock (HoneKTraceRec *base)
  {
    r = base ? base + blockIdx.x + (size_t) gridDim.x * (blockIdx.y + (size_t) gridDim.y * blockIdx.z) : nullptr;
    if (r && threadIdx.x == 0)
      {
        unsigned sm;
        asm volatile ("mov.u32 %0, %%smid;" : "=r"(sm));
        r->t[0] = trace_now ();
        r->sm = sm;
      }
  }
  __device__ __forceinline__ void waited (void)
  {
    if (r && threadIdx.x == 0)
      r->t[1] = trace_now ();
  }
  __device__ __forceinline__ void main_done (void)
  {
    mark (2);
  }
  __device__ __forceinline__ void mark (int k)
  {
    if (r && (threadIdx.x & 31) == 0)
      atomicMax (&r->t[k], trace_now ());
  }
  __device__ __forceinline__ ~HoneKTraceBlock ()
  {
    if (r && (threadIdx.x & 31) == 0)
      atomicMax (&r->t[3], trace_now ());
  }
};

#define HONE_K_TRACE_FIELD HoneKTraceRec *trace;
#define HONE_K_TP , HoneKTraceRec *trace_
#define HONE_K_TA(tag, grid, i0, i1) \
  , hone_k_trace_slot ((tag), (grid).x * (grid).y * (grid).z, (unsigned) (i0), (unsigned) (i1), stream)
#define HONE_K_TRACE_SET(args, tag, grid, i0, i1) \
  ((args).trace = hone_k_trace_slot ((tag), (grid).x * (grid).y * (grid).z, (unsigned) (i0), (unsigned) (i1), stream))
#define TRACE_ENTRY(p) HoneKTraceBlock trace_blk_ (p)
#define TRACE_WAITED() trace_blk_.waited ()
#define TRACE_MAIN() trace_blk_.main_done ()
#define TRACE_MARK(k) trace_blk_.mark (k)

#else

#define HONE_K_TRACE_FIELD
#define HONE_K_TP
#define HONE_K_TA(tag, grid, i0, i1)
#define HONE_K_TRACE_SET(args, tag, grid, i0, i1) ((void) 0)
#define TRACE_ENTRY(p)
#define TRACE_WAITED() ((void) 0)
#define TRACE_MAIN() ((void) 0)
#define TRACE_MARK(k) ((void) 0)

#endif
