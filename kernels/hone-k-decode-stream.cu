/* hone-k-decode-stream.cu — a one-token decode step's matrix work as a few
 * persistent launches whose weight stream never waits on an activation.
 *
 * The per-GEMV decode kernels (hone-k-gemv.cu) each pay a fixed cost at
 * their boundaries — the launch, the first loads' latency, the last wave's
 * tail — and the memory idles through decode attention: measured, that is
 * 3.5–6 µs a GEMV and most of attention's ~8 µs a layer, 20–50 % of a step
 * (tests/bench/RESULTS-cuda.md). Here one launch runs a list of GEMVs
 * ("phases": a layer's o, gate|up and down, then the next layer's q|k|v or
 * the lm_head), one block an SM:
 *  - a producer warp takes tasks (TR whole rows of a phase's matrix: a
 *    static share of them, then the rest claimed from the phase's global
 *    counter), phase after phase, and copies their bytes into a ring of
 *    shared-memory slots (bulk copies, or 16-byte cp.async by its 32 lanes:
 *    HONE_STREAM_LOADER). Weights do not depend on activations, so it starts
 *    at launch — while the previous kernel (attention) still runs, under
 *    PDL — and runs on through every phase boundary, bounded only by the ring;
 *  - consumer groups (2 warps each, splitting a task's columns) take the
 *    slots in turn. At a phase's first slot all consumers wait for the
 *    previous phase to be finished on every SM (a global count of done
 *    tasks), stage the phase's input vector into shared memory (RMSNorm'ed;
 *    quantized to int8 per 32 for quantized weights, the arithmetic of
 *    hone_k_rmsnorm / hone_k_quantize), then each group dots its task's rows
 *    against it and runs the epilogue (residual, SwiGLU, RoPE + KV).
 * Claiming balances SMs whose share of the memory bandwidth differs; the
 * ring bridges every wait. A launch site's counters (HONE_K_STREAM_SYNC
 * words) are zeroed again by the last block out.
 *
 * Measured (H200, tests/bench/RESULTS-cuda.md "Decode, sessions 5 and 6"):
 * the first form (one consumer warp a slot, a branch a row) ran the 8B step
 * at 2.1x (BF16) / 2.0x (Q4_0) the per-GEMV kernels' time; this form (groups
 * of two warps, no per-row branch, one publication a block and phase) at
 * 1.05x / 1.25x, so it stays off by default. What is left is outside the
 * phases' streaming (4.4 TB/s in gate|up): the attention kernel between two
 * launches (~17 µs a layer here, 10 µs alone), staging the input in every
 * block (5 µs a layer BF16, 12 µs quantized) and the tails of the phases.
 * Session 7 moved the attention inside the launch (commit edd5675): faster
 * only against the unbounded attention kernel at short contexts, slower
 * than the clustered short-context kernel of bounded graphs and from 4k keys
 * on, and its code slowed these phases 3.5-6 %; taken out again. With no
 * attention at all the step would take 4.112 ms (BF16, 80.9 % of the read
 * ceiling): attention in any form measured costs 13-15 µs a layer here.
 * On a small model (session 42, H100, Qwen3-0.6B) it is slower still:
 * BF16 0.76x, Q4_0 0.69x the per-GEMV step's tok/s — the per-phase wait and
 * input staging stay while the phases' bytes shrink.
 *
 * sm_90 only (bulk copies, mbarriers); hone_k_stream_takes() says whether a
 * list of GEMVs can run here, else decode_step keeps the per-GEMV kernels.
 */
#include "hone-k-gemv.cuh"
#include "hone-k-stage.cuh"
#include "hone-k-stream.h"
#include <stdlib.h>
#include <string.h>

/* The device helpers below serve only the sm_90 body of stream_kernel; the
 * sm_80/86/89 passes compile that body out and would warn that each one is
 * unreferenced. */
#pragma nv_diag_suppress 177

#define ST_CG 4                 /* consumer groups a block: a slot each in turn */
#define ST_WG 2                 /* warps a group: they split a task's columns */
#define ST_NC (ST_CG * ST_WG)   /* consumer warps */
#define ST_THREADS ((ST_NC + 1) * 32)

struct StreamPhase {
  const unsigned char *q, *s;   /* the matrix (GPU layout: hone-kernels.h) */
  int type, rows, cols, nchunk; /* nchunk: 16-byte chunks a row */
  int row_qb, row_sb;           /* bytes a row of q and of s */
  int tr, n_tasks;              /* rows a task (the last may have fewer) */
  const float *x, *g;           /* input [cols], RMSNorm weights or NULL */
  float eps;
  GemvArgs e;                   /* the epilogue's fields (bias, res, y, epi, RoPE + KV) */
};

struct StreamArgs {
  StreamPhase ph[HONE_K_STREAM_MAX_PHASES];
  int n_ph;
  unsigned *sync;               /* [0..3] claims, [4..7] done, [8] exits */
  int slots, slot_bytes;        /* the ring */
  int x_off;                    /* shared-memory offset of the staged input */
  int static_pct;               /* % of a phase's tasks split statically over the blocks, the rest claimed */
  int loader;                   /* HONE_K_STREAM_LOAD_BULK or _CPASYNC */
  int early;                    /* 1: the producer copies from the launch on; 0: after the kernel before finished */
  unsigned long long *trace;    /* NULL, or per block [7][3] (HONE_K_STREAM_TRACE_WORDS): for phases 0..3
                                 * %globaltimer at staged, the block's tasks published, and the producer's last
                                 * copy issued; [4]: the block's start, then the cycles the producer waited for
                                 * free slots and consumer group 0 for full ones (after its first slot); [5]:
                                 * the block's exit; [6]: when phases 1..3 saw their input finished on every SM
                                 * (measurement only) */
  unsigned *watch;              /* NULL, or per block and warp HONE_K_STREAM_WATCH_WORDS words in mapped host
                                 * memory: where the warp is (watch_at), for a stalled launch (debugging only) */
};

/* Where a warp is (the watch's word 0; | W_STUCK once a wait has spun for
 * about a second, with what it saw in word 6). */
enum { W_EMPTY = 1, W_ISSUED, W_MARKED, W_PROD_DONE, W_FULL, W_META, W_DONE_WAIT, W_STAGE_SYNC, W_STAGED,
       W_TASK, W_TASK_DONE, W_MARK_DONE, W_CONS_DONE, W_STUCK = 0x100 };

static __device__ __forceinline__ unsigned long long globaltimer (void);

/* words: where, k, slot, phase, task (or mark), cur, seen (a stuck wait's observed value), target */
static __device__ __forceinline__ void
watch_at (const unsigned *watch0, unsigned where, unsigned k, int slot, int p, int t, int cur, unsigned seen = 0,
          unsigned target = 0)
{
  if (!watch0 || (threadIdx.x & 31))
    return;
  volatile unsigned *w = (volatile unsigned *) watch0
                         + ((size_t) blockIdx.x * (ST_NC + 1) + (threadIdx.x >> 5)) * HONE_K_STREAM_WATCH_WORDS;
  w[1] = k; w[2] = (unsigned) slot; w[3] = (unsigned) p; w[4] = (unsigned) t; w[5] = (unsigned) cur;
  w[6] = seen; w[7] = target;
  w[0] = where;
  if (where & W_STUCK)
    __threadfence_system ();
}

/* stage_bar_wait, but a watched launch records a wait that spins for a second (and goes on waiting) */
static __device__ __forceinline__ void
watched_wait (uint64_t *bar, uint32_t parity, const unsigned *watch, unsigned where, unsigned k, int slot, int cur)
{
  if (!watch)
    {
      stage_bar_wait (bar, parity);
      return;
    }
  const uint32_t b = (uint32_t) __cvta_generic_to_shared (bar);
  const unsigned long long t0 = globaltimer ();
  bool flagged = false;
  for (;;)
    {
      uint32_t ok;
      asm volatile ("{\n\t.reg .pred p;\n\t"
                    "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                    "selp.u32 %0, 1, 0, p;\n}" : "=r"(ok) : "r"(b), "r"(parity) : "memory");
      if (ok)
        return;
      if (!flagged && globaltimer () - t0 > 1000000000ull)
        {
          watch_at (watch, where | W_STUCK, k, slot, -1, -1, cur, parity);
          flagged = true;
        }
    }
}

/* the consumer warps' barrier (named barrier 1; the producer never joins) */
static __device__ __forceinline__ void
consumers_sync (void)
{
  asm volatile ("bar.sync 1, %0;" :: "r"(ST_NC * 32) : "memory");
}

/* the two warps of consumer group g (named barrier 2 + g) */
static __device__ __forceinline__ void
group_sync (int g)
{
  asm volatile ("bar.sync %0, %1;" :: "r"(2 + g), "r"(ST_WG * 32) : "memory");
}

static __device__ __forceinline__ unsigned long long
globaltimer (void)
{
  unsigned long long t;
  asm volatile ("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

static __host__ __device__ __forceinline__ bool
is_f_type (int t)
{
  return t == HONE_K_BF16 || t == HONE_K_F16;
}

/* Sum of the consumer threads' v (every consumer thread gets it). */
static __device__ __forceinline__ float
consumers_sum (float v, float *red)
{
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum (v);
  if (lane == 0)
    red[warp] = v;
  consumers_sync ();
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < ST_NC; i++)
    s += red[i];
  consumers_sync ();   /* red is reused by the next call */
  return s;
}

#define ST_XB 8   /* float4 loads in flight a consumer thread while staging (one batch: 8,192 values) */

/* The 32 values held 4 a lane by 8 consecutive lanes (v: this lane's 4)
 * quantized as quant32_store does (d = absmax/127, q = rn(v/d): the same
 * bits); returns this lane's 4 quants packed, and (d, d·Σq) in *ds. */
static __device__ __forceinline__ uint32_t
quant32_lanes8 (float4 v, float2 *ds)
{
  float amax = fmaxf (fmaxf (fabsf (v.x), fabsf (v.y)), fmaxf (fabsf (v.z), fabsf (v.w)));
#pragma unroll
  for (int o = 1; o < 8; o <<= 1)
    amax = fmaxf (amax, __shfl_xor_sync (0xffffffffu, amax, o));
  const float d = amax / 127.f;
  const int q0 = d > 0.f ? __float2int_rn (v.x / d) : 0, q1 = d > 0.f ? __float2int_rn (v.y / d) : 0;
  const int q2 = d > 0.f ? __float2int_rn (v.z / d) : 0, q3 = d > 0.f ? __float2int_rn (v.w / d) : 0;
  float sum = (float) (q0 + q1 + q2 + q3);
#pragma unroll
  for (int o = 1; o < 8; o <<= 1)
    sum += __shfl_xor_sync (0xffffffffu, sum, o);
  *ds = make_float2 (d, d * sum);
  return (uint32_t) (q0 & 0xff) | ((uint32_t) (q1 & 0xff) << 8) | ((uint32_t) (q2 & 0xff) << 16)
         | ((uint32_t) (q3 & 0xff) << 24);
}

/* Stage phase P's input into shared memory. BF16/F16 weights: x·g as f32,
 * each 8-value chunk split in two float4 halves (xa[c], xb[c]: no bank
 * conflict when lanes read consecutive chunks); the RMS scale returned, for
 * the row sums. Quantized weights: rmsnorm(x)·g (or x) quantized per 32 as
 * hone_k_rmsnorm / hone_k_quantize do — Q4: the two 16-value halves of each
 * block apart (lo[c], hi[c]); Q8_0: in order — and (d, d·Σq) per 32; the
 * scale returned is 1. The input was written by other SMs in this launch
 * (or by the previous kernel): read through L2 (__ldcg), never L1; every
 * thread keeps ST_XB loads in flight (the staging is on the phase's
 * critical path: one L2 round trip a batch). */
static __device__ float
stage_input (const StreamPhase &P, unsigned char *xs, float *red)
{
  constexpr int NT = ST_NC * 32;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int n = P.cols, n4 = n >> 2;
  const float4 *x4 = (const float4 *) P.x, *g4 = (const float4 *) P.g;
  float ss = 0.f;
  if (is_f_type (P.type))
    {
      float4 *xa = (float4 *) xs, *xb = xa + (n >> 3);
      for (int i0 = 0; i0 < n4; i0 += NT * ST_XB)
        {
          float4 v[ST_XB], g[ST_XB];
#pragma unroll
          for (int j = 0; j < ST_XB; j++)
            {
              const int i = i0 + j * NT + tid;
              v[j] = i < n4 ? __ldcg (x4 + i) : make_float4 (0.f, 0.f, 0.f, 0.f);
              g[j] = g4 && i < n4 ? __ldg (g4 + i) : make_float4 (1.f, 1.f, 1.f, 1.f);
            }
#pragma unroll
          for (int j = 0; j < ST_XB; j++)
            {
              const int i = i0 + j * NT + tid;
              float4 w = v[j];
              ss += w.x * w.x + w.y * w.y + w.z * w.z + w.w * w.w;
              w.x *= g[j].x; w.y *= g[j].y; w.z *= g[j].z; w.w *= g[j].w;
              if (i < n4)
                ((i & 1) ? xb : xa)[i >> 1] = w;
            }
        }
      const float tot = consumers_sum (ss, red);   /* also orders the stores above before any read */
      return g4 ? rsqrtf (tot / (float) n + P.eps) : 1.f;
    }
  /* quantized: warp w takes the 128-value spans w, w + ST_NC, …; lane l holds
   * float4 l of a span, so lanes 8k..8k+7 hold one 32-block */
  int8_t *q = (int8_t *) xs;
  float2 *ds = (float2 *) (xs + n);
  const bool q4 = P.type != HONE_K_Q8_0;
  const int spans = (n + 127) >> 7;
  const bool keep = spans <= ST_NC * ST_XB;   /* one batch holds the whole input: normalize from registers */
  float4 v[ST_XB], gv[ST_XB];
  float scale = 1.f;
  auto load = [&] (int it, bool with_g) {
#pragma unroll
    for (int j = 0; j < ST_XB; j++)
      {
        const int i = (warp + ST_NC * (it * ST_XB + j)) * 32 + lane;
        v[j] = i < n4 ? __ldcg (x4 + i) : make_float4 (0.f, 0.f, 0.f, 0.f);
        if (with_g)
          gv[j] = i < n4 ? __ldg (g4 + i) : make_float4 (0.f, 0.f, 0.f, 0.f);
      }
  };
  if (g4)
    {
      for (int it = 0; it * ST_NC * ST_XB < spans; it++)
        {
          load (it, keep);
#pragma unroll
          for (int j = 0; j < ST_XB; j++)
            ss += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
        }
      scale = rsqrtf (consumers_sum (ss, red) / (float) n + P.eps);
    }
  for (int it = 0; it * ST_NC * ST_XB < spans; it++)
    {
      if (!(keep && g4))
        load (it, g4 != NULL);
#pragma unroll
      for (int j = 0; j < ST_XB; j++)
        {
          const int i = (warp + ST_NC * (it * ST_XB + j)) * 32 + lane;
          if ((warp + ST_NC * (it * ST_XB + j)) * 128 >= n)   /* warp-uniform */
            break;
          float4 w = v[j];
          if (g4)
            {
              const float4 g = gv[j];
              w.x = w.x * scale * g.x; w.y = w.y * scale * g.y; w.z = w.z * scale * g.z; w.w = w.w * scale * g.w;
            }
          float2 d;
          const uint32_t packed = quant32_lanes8 (w, &d);
          if (i < n4)
            {
              const int blk = i >> 3, e = 4 * (i & 7);   /* 32-block, first element in it */
              const int off = q4 ? (e < 16 ? 16 * blk + e : (n >> 1) + 16 * blk + e - 16) : 4 * i;
              *(uint32_t *) (q + off) = packed;
              if ((lane & 7) == 0)
                ds[blk] = d;
            }
        }
    }
  consumers_sync ();
  return 1.f;
}

/* y = v (+ bias) (+ the residual, read at the task's start through L2:
 * other SMs wrote it in this launch) for STORE/ADD */
static __device__ __forceinline__ void
stream_store (const GemvArgs &e, int row, float v, float res)
{
  if (e.bias)
    v += e.bias[row];
  if (e.epi == HONE_K_EPI_ADD)
    v += res;
  e.y[row] = v;
}

/* One task: rows row0 .. row0+n-1 (n <= TR) of phase P, weights in slot w
 * (q part, then the scales at TR·row_qb), input staged in xs. The group's
 * two warps take alternate runs of 32 chunks (wi: this warp's index in the
 * group); warp 1 hands its TR sums to warp 0 through xch, which runs the
 * epilogue. All TR rows are computed (rows past n of a short last task read
 * whatever the slot holds and are dropped): no branch between the rows, so
 * their loads and dependency chains interleave. */
template <int WT, int TR>
static __device__ __forceinline__ void
stream_task (const StreamPhase &P, const unsigned char *w, const unsigned char *xs, float scale, int row0, int n,
             int wi, float *xch, int group, uint64_t *slot_free)
{
  const int lane = threadIdx.x & 31;
  const int nchunk = P.nchunk, rqb = P.row_qb, rsb = P.row_sb, cols = P.cols;
  const unsigned char *sp = w + (size_t) TR * rqb;
  const GemvArgs &e = P.e;
  /* the residual of this lane's row, in flight during the dot products */
  const float res = e.epi == HONE_K_EPI_ADD && wi == 0 && lane < n ? __ldcg (e.res + row0 + lane) : 0.f;
  constexpr int UN = TR <= 2 ? 2 : 1;   /* chunks a lane has in flight per row: keep >= 2 dot chains going */
  float acc[UN][TR];
#pragma unroll
  for (int u = 0; u < UN; u++)
#pragma unroll
    for (int r = 0; r < TR; r++)
      acc[u][r] = 0.f;
  for (int c0 = wi * 32 + lane; c0 < nchunk; c0 += 64 * UN)
#pragma unroll
    for (int u = 0; u < UN; u++)
      {
        const int c = c0 + 64 * u;
        if (UN > 1 && c >= nchunk)
          break;
        if (WT == HONE_K_BF16 || WT == HONE_K_F16)
          {
            const float4 x0 = ((const float4 *) xs)[c], x1 = ((const float4 *) xs)[(cols >> 3) + c];
#pragma unroll
            for (int r = 0; r < TR; r++)
              acc[u][r] = dot_chunk_f<WT> (*(const int4 *) (w + r * rqb + 16 * c), x0, x1, acc[u][r]);
          }
        else if (WT == HONE_K_Q8_0)
          {
            const int4 xv = *(const int4 *) (xs + 16 * c);
            const float xd = ((const float2 *) (xs + cols))[c >> 1].x;
#pragma unroll
            for (int r = 0; r < TR; r++)
              acc[u][r] = dot_chunk_q8 (*(const int4 *) (w + r * rqb + 16 * c),
                                        ((const uint16_t *) (sp + r * rsb))[c >> 1], xv, xd, acc[u][r]);
          }
        else
          {
            const int4 xa = ((const int4 *) xs)[c], xb = ((const int4 *) (xs + (cols >> 1)))[c];
            const float2 xd = ((const float2 *) (xs + cols))[c];
#pragma unroll
            for (int r = 0; r < TR; r++)
              {
                const uint32_t sc = WT == HONE_K_Q4_0 ? ((const uint16_t *) (sp + r * rsb))[c]
                                                      : ((const uint32_t *) (sp + r * rsb))[c];
                acc[u][r] = dot_chunk_q4<WT> (*(const int4 *) (w + r * rqb + 16 * c), sc, xa, xb, xd, acc[u][r]);
              }
          }
      }
  /* this thread is done reading the slot: its share of the slot's release
   * (every consumer thread of the group arrives, so that each one's reads
   * are ordered before the next copy by its own release) */
  stage_bar_arrive (slot_free);
  /* lane r: row r's sum (and row r+1's, for pairs) */
  float mine = 0.f, next = 0.f;
#pragma unroll
  for (int r = 0; r < TR; r++)
    {
      float v = acc[0][r];
#pragma unroll
      for (int u = 1; u < UN; u++)
        v += acc[u][r];
      v = warp_sum (v);
      if (lane == r)
        mine = v;
      if (lane + 1 == r)
        next = v;
    }
  /* warp 1 → warp 0 of the group (xch: [TR + 1] floats a group, by the
   * parity of the group's task count; between two uses of one half by warp 1
   * lies the group barrier of the task in between, which warp 0 reaches only
   * after reading that half) */
  if (wi == 1 && lane < TR)
    xch[lane] = mine;
  group_sync (group);
  if (wi != 0)
    return;
  const float other = lane < TR ? xch[lane] : 0.f;
  const float other_next = lane + 1 < TR ? xch[lane + 1] : 0.f;
  mine = (mine + other) * scale;
  next = (next + other_next) * scale;
  if (lane < n)
    {
      const int row = row0 + lane;
      if (e.epi == HONE_K_EPI_SWIGLU || e.epi == HONE_K_EPI_ROPE_KV)
        {
          if (!(lane & 1))
            epi_pair (e, row, 0, mine, next);
        }
      else
        stream_store (e, row, mine, res);
    }
}

/* The rows a task takes (phase_of picks one of these). */
#define ST_TR_LIST(X) X (1) X (2) X (4) X (6) X (8) X (12) X (16)

template <int WT>
static __device__ __forceinline__ void
stream_task_tr (const StreamPhase &P, const unsigned char *w, const unsigned char *xs, float scale, int row0, int n,
                int wi, float *xch, int group, uint64_t *slot_free)
{
  switch (P.tr)
    {
#define ST_CASE(t) case t: stream_task<WT, t> (P, w, xs, scale, row0, n, wi, xch, group, slot_free); break;
      ST_TR_LIST (ST_CASE)
#undef ST_CASE
    default: break;
    }
}

static __device__ __forceinline__ void
stream_task_any (const StreamPhase &P, const unsigned char *w, const unsigned char *xs, float scale, int row0, int n,
                 int wi, float *xch, int group, uint64_t *slot_free)
{
  switch (P.type)
    {
    case HONE_K_BF16: stream_task_tr<HONE_K_BF16> (P, w, xs, scale, row0, n, wi, xch, group, slot_free); break;
    case HONE_K_F16: stream_task_tr<HONE_K_F16> (P, w, xs, scale, row0, n, wi, xch, group, slot_free); break;
    case HONE_K_Q8_0: stream_task_tr<HONE_K_Q8_0> (P, w, xs, scale, row0, n, wi, xch, group, slot_free); break;
    case HONE_K_Q4_0: stream_task_tr<HONE_K_Q4_0> (P, w, xs, scale, row0, n, wi, xch, group, slot_free); break;
    default: stream_task_tr<HONE_K_Q4_1> (P, w, xs, scale, row0, n, wi, xch, group, slot_free); break;
    }
}

/* Slot metadata (int2): (phase, task >= 0), or (phase, -1 - count): the
 * phase's end mark, one a consumer group after the block's last task of the
 * phase, carrying how many tasks of it the block took (no weights in it). A
 * group that meets its end mark has finished its tasks of the phase; the
 * group that meets the block's last one publishes the block's count to the
 * phase's global done counter (one fence a block and phase, not a task). */
static __device__ __forceinline__ int
end_mark (int count)
{
  return -1 - count;
}

__global__ void __launch_bounds__ (ST_THREADS, 1)
stream_kernel (const __grid_constant__ StreamArgs a)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__ (128) unsigned char smem[];
  __shared__ uint64_t full[HONE_K_STREAM_MAX_SLOTS], empty[HONE_K_STREAM_MAX_SLOTS];
  __shared__ int2 meta[HONE_K_STREAM_MAX_SLOTS];
  __shared__ float red[ST_NC];
  __shared__ float xch[ST_CG][2][17];   /* a group's warp 1 → warp 0 row sums, by task parity */
  __shared__ unsigned ends[HONE_K_STREAM_MAX_PHASES];   /* groups through each phase */
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int S = a.slots;
  unsigned *claim = a.sync, *done = a.sync + 4, *exits = a.sync + 8;

  /* a slot is full once its bytes landed: bulk copies count them on the
   * barrier (one arrival: the issuing lane's expect_tx); cp.async copies
   * arrive once per producer lane when that lane's copies landed, plus lane
   * 0's own arrival after it wrote the slot's metadata */
  const bool bulk = a.loader == HONE_K_STREAM_LOAD_BULK;
  const unsigned full_count = bulk ? 1u : 33u;
  if (tid < HONE_K_STREAM_MAX_PHASES)
    ends[tid] = 0;
  if (tid == 0)
    {
      for (int i = 0; i < S; i++)
        {
          const uint32_t f = (uint32_t) __cvta_generic_to_shared (&full[i]);
          const uint32_t e = (uint32_t) __cvta_generic_to_shared (&empty[i]);
          asm volatile ("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(f), "r"(full_count) : "memory");
          asm volatile ("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(e), "r"(ST_WG * 32) : "memory");
        }
      stage_bar_fence_init ();
    }
  __syncthreads ();
  /* the next kernel (attention) may launch now: its blocks wait for this grid anyway */
  pdl_trigger ();
  if (a.trace && tid == 0)
    a.trace[((size_t) blockIdx.x * 7 + 4) * 3] = globaltimer ();

  if (warp == ST_NC)
    {
      /* ---- producer warp: claims (lane 0) and copies, phase after phase ---- */
      const uint64_t pol = stage_policy_evict_first ();
      if (!a.early)
        pdl_wait ();   /* experiment: no copies while the kernel before still runs */
      unsigned k = 0;
      long long waited = 0;   /* trace: cycles spent waiting for a free slot */
      auto take_slot = [&] () -> int {
        const int slot = (int) (k % (unsigned) S);
        const long long c0 = a.trace ? clock64 () : 0;
        watched_wait (&empty[slot], ((k / (unsigned) S) & 1) ^ 1, a.watch, W_EMPTY, k, slot, -1);
        if (a.trace)
          waited += clock64 () - c0;
        return slot;
      };
      /* a slot without weights (an end mark): the 1 or 33 arrivals its barrier expects */
      auto mark_slot = [&] (int p, int what) {
        const int slot = take_slot ();
        if (lane == 0)
          meta[slot] = make_int2 (p, what);
        __syncwarp ();
        if (lane == 0 || !bulk)
          stage_bar_arrive (&full[slot]);
        if (lane == 0 && !bulk)
          stage_bar_arrive (&full[slot]);
        watch_at (a.watch, W_MARKED, k, slot, p, what, -1);
        k++;
      };
      const int G = (int) gridDim.x;
      for (int p = 0; p < a.n_ph; p++)
        {
          const StreamPhase &P = a.ph[p];
          int cnt = 0;
          auto issue = [&] (int t) {
            const int slot = take_slot ();
            const int row0 = t * P.tr, n = min (P.tr, P.rows - row0);
            const unsigned qb = (unsigned) (n * P.row_qb), sb = (unsigned) (n * P.row_sb);
            unsigned char *dst = smem + (size_t) slot * a.slot_bytes;
            const unsigned char *qsrc = P.q + (size_t) row0 * P.row_qb, *ssrc = P.s + (size_t) row0 * P.row_sb;
            unsigned char *sdst = dst + (size_t) P.tr * P.row_qb;
            if (lane == 0)
              meta[slot] = make_int2 (p, t);
            if (bulk)
              {
                if (lane == 0)
                  {
                    stage_bar_expect (&full[slot], qb + sb);
                    stage_copy (dst, qsrc, qb, &full[slot], pol);
                    if (sb)
                      stage_copy (sdst, ssrc, sb, &full[slot], pol);
                  }
              }
            else
              {
                const unsigned nq = qb >> 4, nt = nq + (sb >> 4);
                for (unsigned i = (unsigned) lane; i < nt; i += 32)
                  {
                    const bool isq = i < nq;
                    const unsigned o = (isq ? i : i - nq) << 4;
                    cp_async16 (isq ? dst + o : sdst + o, isq ? qsrc + o : ssrc + o);
                  }
                cp_async_arrive_noinc (&full[slot]);
                __syncwarp ();
                if (lane == 0)
                  stage_bar_arrive (&full[slot]);   /* after meta: the release the consumers acquire */
              }
            watch_at (a.watch, W_ISSUED, k, slot, p, t, cnt);
            k++;
            cnt++;
          };
          /* a static share (static_pct % of the tasks, block b the b-th run),
           * then the rest claimed in shrinking batches (guided), each claim
           * issued one batch ahead so that its round trip is hidden */
          const int q = P.n_tasks * a.static_pct / 100 / G, n_dyn = P.n_tasks - q * G;
          int want = max (1, n_dyn / (2 * G));
          int got = lane == 0 ? (int) atomicAdd (&claim[p], (unsigned) want) : 0;   /* in flight during the static share */
          for (int t = (int) blockIdx.x * q; t < ((int) blockIdx.x + 1) * q; t++)
            issue (t);
          got = __shfl_sync (0xffffffffu, got, 0);
          while (got < n_dyn)
            {
              const int t0 = got, t1 = min (n_dyn, got + want);
              want = max (1, (n_dyn - t1) / (2 * G));
              got = t1 >= n_dyn ? n_dyn : lane == 0 ? (int) atomicAdd (&claim[p], (unsigned) want) : 0;
              for (int t = t0; t < t1; t++)
                issue (q * G + t);
              got = __shfl_sync (0xffffffffu, got, 0);
            }
          for (int j = 0; j < ST_CG; j++)
            mark_slot (p, end_mark (cnt));
          if (a.trace && p < 4 && lane == 0)
            a.trace[((size_t) blockIdx.x * 7 + p) * 3 + 2] = globaltimer ();
        }
      for (int j = 0; j < ST_CG; j++)   /* the launch's end, one a consumer group */
        mark_slot (a.n_ph, end_mark (0));
      watch_at (a.watch, W_PROD_DONE, k, -1, a.n_ph, -1, -1);
      if (a.trace && lane == 0)
        a.trace[((size_t) blockIdx.x * 7 + 4) * 3 + 1] = (unsigned long long) waited;
    }
  else
    {
      /* ---- consumers: group g (warps 2g, 2g + 1) takes slots g, g + ST_CG, … in order ---- */
      unsigned char *xs = smem + a.x_off;
      const int group = warp / ST_WG, wi = warp % ST_WG;
      int cur = -1;
      unsigned tasks = 0;   /* this group's tasks so far: the parity picks xch's half */
      float scale = 1.f;
      long long waited = 0;   /* trace: cycles group 0 spent waiting for a full slot, inputs staged */
      unsigned k = (unsigned) group;
      for (;; k += ST_CG)
        {
          const int slot = (int) (k % (unsigned) S);
          const long long c0 = a.trace ? clock64 () : 0;
          watched_wait (&full[slot], (k / (unsigned) S) & 1, a.watch, W_FULL, k, slot, cur);
          if (a.trace && cur >= 0)
            waited += clock64 () - c0;
          const int2 m = meta[slot];
          watch_at (a.watch, W_META, k, slot, m.x, m.y, cur);
          if (m.x >= a.n_ph)
            break;
          /* a slot is free again once every thread of the group is done with
           * it — a task's weights read (in stream_task), a mark's metadata
           * read (here) — one arrival each on empty[slot] */
          if (m.y < 0)
            stage_bar_arrive (&empty[slot]);
          const StreamPhase &P = a.ph[m.x];
          const int count = m.y >= 0 ? -1 : -1 - m.y;   /* an end mark's count of the block's tasks */
          if (m.x != cur)
            {
              cur = m.x;
              /* every group reaches this for every phase (its task, or its end
               * mark first), and all agree whether the block has tasks of it */
              if (m.y >= 0 || count > 0)
                {
                  /* the input: the previous kernel's output (phase 0) or the
                   * previous phase's, finished on every SM */
                  if (cur == 0)
                    pdl_wait ();
                  else if (warp == 0 && lane == 0)
                    {
                      const unsigned want = (unsigned) a.ph[cur - 1].n_tasks;
                      const unsigned long long t0 = a.watch ? globaltimer () : 0;
                      bool flagged = false;
                      unsigned seen;
                      while ((seen = ld_acquire (&done[cur - 1])) < want)
                        if (a.watch && !flagged && globaltimer () - t0 > 1000000000ull)
                          {
                            watch_at (a.watch, W_DONE_WAIT | W_STUCK, k, slot, m.x, m.y, cur, seen, want);
                            flagged = true;
                          }
                    }
                  if (a.trace && cur > 0 && cur < 4 && tid == 0)
                    a.trace[((size_t) blockIdx.x * 7 + 6) * 3 + cur - 1] = globaltimer ();
                  __syncwarp ();
                  watch_at (a.watch, W_STAGE_SYNC, k, slot, m.x, m.y, cur);
                  consumers_sync ();   /* also: every consumer is done reading the previous input */
                  scale = stage_input (P, xs, red);
                  watch_at (a.watch, W_STAGED, k, slot, m.x, m.y, cur);
                  if (a.trace && cur < 4 && tid == 0)
                    a.trace[((size_t) blockIdx.x * 7 + cur) * 3 + 0] = globaltimer ();
                }
            }
          if (m.y >= 0)
            {
              const int row0 = m.y * P.tr;
              watch_at (a.watch, W_TASK, k, slot, m.x, m.y, cur);
              stream_task_any (P, smem + (size_t) slot * a.slot_bytes, xs, scale, row0, min (P.tr, P.rows - row0), wi,
                               xch[group][tasks & 1], group, &empty[slot]);
              tasks++;
              watch_at (a.watch, W_TASK_DONE, k, slot, m.x, m.y, cur);
            }
          else if (wi == 0)
            {
              /* this group is through its tasks of the phase (their stores by
               * warp 0's lanes, ordered here by the warp barrier); the last
               * group to get here publishes the block's count */
              __syncwarp ();
              if (lane == 0)
                {
                  __threadfence_block ();
                  if (atomicAdd (&ends[cur], 1u) == ST_CG - 1)
                    {
                      __threadfence ();
                      if (count)
                        atomicAdd (&done[cur], (unsigned) count);
                      if (a.trace && cur < 4)
                        a.trace[((size_t) blockIdx.x * 7 + cur) * 3 + 1] = globaltimer ();
                    }
                }
              watch_at (a.watch, W_MARK_DONE, k, slot, m.x, m.y, cur, count);
            }
          else
            watch_at (a.watch, W_MARK_DONE, k, slot, m.x, m.y, cur, count);
        }
      if (a.trace && warp == 0 && lane == 0)
        a.trace[((size_t) blockIdx.x * 7 + 4) * 3 + 2] = (unsigned long long) waited;
      watch_at (a.watch, W_CONS_DONE, k, -1, a.n_ph, -1, cur);
    }
  /* the last block out zeroes the counters for the next launch at this site */
  __syncthreads ();
  if (tid == 0)
    {
      if (a.trace)
        a.trace[((size_t) blockIdx.x * 7 + 5) * 3] = globaltimer ();
      __threadfence ();
      if (atomicAdd (exits, 1u) == gridDim.x - 1)
        {
          for (int i = 0; i < 8; i++)
            a.sync[i] = 0;
          *exits = 0;
          __threadfence ();
        }
    }
#endif
}

/* ---- host ------------------------------------------------------------------ */

static int stream_mode = -2;   /* -2: HONE_DECODE_STREAM not read yet; 1 on, 0 off */
static int smem_kb = -1, slot_kb = -1, static_pct = -1, loader = -1, blocks = 0, early = -1;
static unsigned stream_runs;
static const char *why_declined;   /* why the last selection said no (hone_k_stream_why), or NULL */

/* Record why the streamed path declines a step, and say no. */
static bool
decline (const char *why)
{
  why_declined = why;
  return false;
}

extern "C" void
hone_k_decode_set_stream (int on)
{
  stream_mode = on < 0 ? -2 : (on ? 1 : 0);
}

extern "C" void
hone_k_stream_set_shape (int smem_kb_, int slot_kb_, int static_pct_, int loader_)
{
  smem_kb = smem_kb_;
  slot_kb = slot_kb_;
  static_pct = static_pct_;
  loader = loader_ < 0 ? -1 : loader_ ? HONE_K_STREAM_LOAD_CPASYNC : HONE_K_STREAM_LOAD_BULK;
}

static unsigned *watch_buf;

extern "C" void
hone_k_stream_set_blocks (int n)
{
  blocks = n > 0 ? n : 0;
}

extern "C" void
hone_k_stream_set_early (int on)
{
  early = on < 0 ? -1 : on ? 1 : 0;
}

extern "C" void
hone_k_stream_set_watch (unsigned *watch)
{
  watch_buf = watch;
}

static unsigned long long *trace_buf;
static int trace_site = -1;

extern "C" void
hone_k_stream_set_trace (unsigned long long *trace, int site)
{
  trace_buf = trace;
  trace_site = trace ? site : -1;
}

unsigned long long *
hone_k_stream_trace_for (int site)
{
  if (trace_site < 0 || (site != trace_site && site != trace_site + 1))
    return NULL;
  return trace_buf + (size_t) (site - trace_site) * hone_k_sm_count () * HONE_K_STREAM_TRACE_WORDS;
}

extern "C" unsigned
hone_k_stream_runs (void)
{
  return stream_runs;
}

static int
env_or (const char *name, int dflt)
{
  const char *e = getenv (name);
  return e && *e ? atoi (e) : dflt;
}

bool
hone_k_decode_stream_on (void)
{
  if (stream_mode == -2)
    stream_mode = env_or ("HONE_DECODE_STREAM", 0) ? 1 : 0;
  return stream_mode == 1 && hone_k_stage_supported ();
}

static int
smem_budget (void)
{
  const int kb = smem_kb > 0 ? smem_kb : env_or ("HONE_STREAM_SMEM_KB", 200);
  return (kb < 64 ? 64 : kb > 226 ? 226 : kb) * 1024;
}

static int
slot_target (void)
{
  const int kb = slot_kb > 0 ? slot_kb : env_or ("HONE_STREAM_SLOT_KB", 32);
  return (kb < 4 ? 4 : kb > 96 ? 96 : kb) * 1024;
}

/* The phase of op (one token, f32 input op->x) or false if the kernel cannot take it. */
static bool
phase_of (const HoneKGemvOp *op, int slot_bytes, StreamPhase &P)
{
  const HoneKMatrix *w = op->w;
  memset (&P, 0, sizeof P);
  if (!w || op->n_tok != 1 || !op->x || !op->y || w->rows < 1 || w->cols < 32 || (w->cols & 31)
      || ((uintptr_t) op->x & 15) || (op->norm_g && ((uintptr_t) op->norm_g & 15)))
    return decline ("not a one-token GEMV with a 16-byte-aligned f32 input and a multiple of 32 columns");
  const int nb = w->cols / 32;
  switch (w->type)
    {
    case HONE_K_BF16: case HONE_K_F16: P.row_qb = w->cols * 2; P.row_sb = 0; P.nchunk = w->cols / 8; break;
    case HONE_K_Q8_0: P.row_qb = w->cols; P.row_sb = nb * 2; P.nchunk = w->cols / 16; break;
    case HONE_K_Q4_0: P.row_qb = w->cols / 2; P.row_sb = nb * 2; P.nchunk = nb; break;
    case HONE_K_Q4_1: P.row_qb = w->cols / 2; P.row_sb = nb * 4; P.nchunk = nb; break;
    default: return decline ("weight type not streamed (BF16, F16, Q8_0, Q4_0, Q4_1 are)");
    }
  if (((uintptr_t) w->q & 15) || (P.row_sb && ((uintptr_t) w->s & 15)))
    return decline ("weights not 16-byte aligned");
  const bool pair = op->epilogue == HONE_K_EPI_SWIGLU || op->epilogue == HONE_K_EPI_ROPE_KV;
  if (op->epilogue == HONE_K_EPI_ADD && !op->res)
    return decline ("ADD epilogue without a residual");
  if (op->epilogue == HONE_K_EPI_ROPE_KV
      && (op->hd <= 0 || (op->hd & 1) || w->rows != (op->nq + 2 * op->nkv) * op->hd || !op->pos || !op->inv_freq
          || !op->k_pool || !op->v_pool || !op->block_table))
    return decline ("RoPE + KV epilogue with a shape or pointer it cannot take");
  /* a task's bytes of s must stay 16-byte multiples: rows a task (and the
   * matrix's rows) a multiple of u; pairs an even number */
  int u = 1;
  while (P.row_sb && (u * P.row_sb) % 16)
    u++;
  if (pair && (u & 1))
    u *= 2;
  if (w->rows % u)
    return decline ("rows do not split into 16-byte-aligned tasks");
  /* the most rows of the kernel's list that fit the slot and keep u */
  static const int trs[] = { 16, 12, 8, 6, 4, 2, 1 };
  int tr = 0;
  for (int t : trs)
    if (t % u == 0 && t * (P.row_qb + P.row_sb) <= slot_bytes)
      {
        tr = t;
        break;
      }
  if (tr < 1)
    return decline ("a row (pair) is larger than a ring slot");
  P.q = (const unsigned char *) w->q;
  P.s = (const unsigned char *) w->s;
  P.type = w->type;
  P.rows = w->rows;
  P.cols = w->cols;
  P.tr = tr;
  P.n_tasks = (w->rows + tr - 1) / tr;
  P.x = op->x;
  P.g = op->norm_g;
  P.eps = op->eps;
  epi_args_from_op (P.e, op);
  P.e.rows = w->rows;
  P.e.cols = w->cols;
  P.e.n_tok = 1;
  return true;
}

/* Ring shape for a list: each GEMV's tasks as many rows as fit slot_target()
 * bytes (or one row, or a pair), slots as large as the largest task, as many
 * as fit beside the staged input; false if fewer than ST_CG (a consumer group
 * each, or the ring could stall). */
static bool
plan (const HoneKGemvOp *ops, int n_ops, StreamArgs &a, size_t *smem)
{
  if (n_ops < 1 || n_ops > HONE_K_STREAM_MAX_PHASES)
    return decline ("GEMVs a launch out of range");
  int slot = slot_target ();
  size_t xbytes = 0;
  for (int i = 0; i < n_ops; i++)
    {
      const HoneKMatrix *w = ops[i].w;
      if (!w)
        return decline ("a GEMV without a matrix");
      const bool f = is_f_type (w->type);
      size_t qb = 0, sb = 0;
      hone_k_matrix_bytes (w->type, w->rows, w->cols, &qb, &sb);
      const int row = w->rows > 0 ? (int) ((qb + sb) / (size_t) w->rows) : 0;
      const int min_rows = ops[i].epilogue == HONE_K_EPI_SWIGLU || ops[i].epilogue == HONE_K_EPI_ROPE_KV ? 2 : 1;
      if (min_rows * row > slot)
        slot = (min_rows * row + 127) & ~127;
      const size_t xb = f ? (size_t) w->cols * 4 : (size_t) w->cols + (size_t) w->cols / 32 * 8;
      if (xb > xbytes)
        xbytes = xb;
    }
  memset (&a, 0, sizeof a);
  for (int i = 0; i < n_ops; i++)
    if (!phase_of (&ops[i], slot, a.ph[i]))
      return false;
  a.n_ph = n_ops;
  /* slots as large as the largest task (rounded for alignment) */
  int used = 0;
  for (int i = 0; i < n_ops; i++)
    used = max (used, a.ph[i].tr * (a.ph[i].row_qb + a.ph[i].row_sb));
  slot = (used + 127) & ~127;
  a.slot_bytes = slot;
  const int budget = smem_budget ();
  xbytes = (xbytes + 127) & ~(size_t) 127;
  if (xbytes + (size_t) ST_CG * slot > (size_t) budget)
    return decline ("input and ring do not fit the shared-memory budget");
  int S = (int) ((budget - xbytes) / (size_t) slot);
  if (S > HONE_K_STREAM_MAX_SLOTS)
    S = HONE_K_STREAM_MAX_SLOTS;
  /* a multiple of ST_CG: then group g's slots are always g, g + ST_CG, …, so
   * it waits for a slot's round r only after it consumed round r - 1 itself,
   * which the mbarriers' parity waits need. Otherwise round r - 1 belongs to
   * another group and may still be landing (copies complete out of order:
   * the wait for k can come after k - ST_CG landed but before k - S did); a
   * parity wait for round r then passes at once (the barrier's current phase
   * is r - 1, the other parity) and the group reads a stale slot. The 8B
   * steps crashed or hung that way (2026-12-01, session 6); tiny models, whose
   * weights come from L2, did not. */
  S -= S % ST_CG;
  a.slots = S;
  a.x_off = S * slot;
  *smem = (size_t) a.x_off + xbytes;
  return true;
}

bool
hone_k_stream_takes (const HoneKGemvOp *ops, int n_ops)
{
  StreamArgs a;
  size_t smem;
  if (!hone_k_stage_supported ())
    return decline ("the device has no bulk copies (sm_90 or newer), or its compute capability could not be read");
  if (!plan (ops, n_ops, a, &smem))
    return false;
  why_declined = NULL;
  return true;
}

extern "C" const char *
hone_k_stream_why (void)
{
  return why_declined;
}

void
hone_k_stream_decline (const char *why)
{
  why_declined = why;
}

int
hone_k_stream_gemvs (const HoneKGemvOp *ops, int n_ops, unsigned *sync, unsigned long long *trace,
                     cudaStream_t stream)
{
  StreamArgs a;
  size_t smem;
  if (!sync || !hone_k_stage_supported () || !plan (ops, n_ops, a, &smem))
    return (int) cudaErrorInvalidValue;
  a.sync = sync;
  a.trace = trace;
  a.watch = watch_buf;
  const int sp = static_pct >= 0 ? static_pct : env_or ("HONE_STREAM_STATIC", 75);
  a.static_pct = sp < 0 ? 0 : sp > 95 ? 95 : sp;
  if (loader < 0)
    {
      const char *e = getenv ("HONE_STREAM_LOADER");
      loader = e && strcmp (e, "cpasync") == 0 ? HONE_K_STREAM_LOAD_CPASYNC : HONE_K_STREAM_LOAD_BULK;
    }
  a.loader = loader;
  a.early = early >= 0 ? early : env_or ("HONE_STREAM_EARLY", 1) ? 1 : 0;
  static size_t raised;
  if (smem > raised)
    {
      HONE_K_CHECK (cudaFuncSetAttribute (stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int) smem));
      raised = smem;
    }
  stream_runs++;
  const int G = blocks > 0 && blocks < hone_k_sm_count () ? blocks : hone_k_sm_count ();
  return hone_k_launch (stream_kernel, dim3 (G), dim3 (ST_THREADS), smem, stream, a);
}
