/* hone-persist-proto.cu — persistent decode layer kernel (a measured prototype, issue #5;
 * not part of libhone-kernels: built only with its harness, tests/cuda/hone-persist-check.cu).
 *
 * Why: every register-streamed GEMV of a decode step pays a fixed ~3.5 µs
 * (launch, ramp-up of the first loads, tail of the last wave, reduction and
 * epilogue) that no per-kernel change removed (tests/bench/RESULTS-cuda.md,
 * decode sessions 2 and 3). Here one launch runs the phases of a layer
 * between two attentions:
 *
 *   p0  h   += Wo · attn                  (ADD)
 *   p1  act  = SwiGLU (Wgu · RMSNorm (h))  (rows interleaved gate, up)
 *   p2  h   += Wdown · act                 (ADD)
 *   p3  qkv  = Wqkv · RMSNorm' (h)         (STORE; no RoPE / KV write here)
 *
 * separated by grid-wide barriers. Weights never depend on activations, so
 * before a block waits at the barrier that ends phase p, each of its warps
 * issues its first batch of phase p+1 weight loads into registers: DRAM keeps
 * streaming through the barrier and through the next phase's activation
 * staging.
 *
 * Layout of the work: the grid is one wave (SMs × resident blocks). In every
 * phase the rows are split in contiguous balanced ranges over the blocks
 * (pairs for SwiGLU); inside a block a warp owns R = 2 rows and a K slice
 * (KS slices when a block has few rows), lane l streaming 16-byte chunks
 * l, l+32·KS, … with U chunks a row in flight (the register streaming of
 * hone-k-gemv.cu, whose dot functions this file uses). The activation is
 * staged once per block in shared memory: BF16 x·g in f32 (the RMS scale
 * multiplies the row sums at the end, as hone-k-gemv.cu's NORM 2 does);
 * Q4_0 the int8 quantization per 32 of x·g — quantization per 32 is
 * scale-invariant, q(s·v) = q(v) with d scaled by s, so the RMS scale, which
 * needs the whole vector, only multiplies the 32-block scales afterwards.
 * Each block computes Σx² of the hidden vector itself (a few KB from L2).
 *
 * Activations written inside the launch are read with ld.global.cg (L2):
 * L1 is not coherent across SMs.
 *
 * Grid barrier: a generation counter in global memory. Thread 0 of a block
 * reads the generation, fences, arrives with atomicAdd; the last to arrive
 * resets the count and publishes generation + 1 (release); the others spin on
 * an acquire load. __syncthreads around it orders the block's other threads.
 * The count is back to 0 after every barrier, so launches can follow each
 * other on the same two words. (grid_barrier_mono below: one 64-bit counter,
 * 0.97 µs a barrier instead of 1.7–1.95.)
 *
 * Measured (H200, 2026-11-29, RESULTS-cuda.md "Persistent decode layer"):
 * correct, but not faster than the per-GEMV kernels — BF16 119.6 µs a layer
 * vs 118.2, Q4_0 61.0 vs 46.3. The median block streams at the chip's pace;
 * what remains is serial per phase: staging after the barrier, the spread of
 * block ends of a static split, the barrier. The prefetch across the barrier
 * gains ~1 µs a layer (BF16). cp.async staging and the dynamic tail lost.
 */
#include "hone-k-gemv.cuh"
#include "hone-persist-proto.h"

#define PS_THREADS 256
#define PS_WARPS 8
#define PS_R 2               /* rows a warp */
#define PS_RED_MAX 2048      /* row partial sums a block keeps (KS × its rows) */

struct PersistDev {
  const HoneKPersistLayer *layers;
  float *h, *act;
  unsigned *sync;
  int hidden, ffn, qkv_rows, n_layers;
  int smax;                  /* chunks (BF16: 8 values, Q4_0: 32) the staging arrays hold */
  float eps;
  int prefetch;
  int barrier;               /* 0 generation words, 1 monotonic 64-bit counter */
  int mask;                  /* phases run (bit p) */
  unsigned long long *trace;
  int dyn;                   /* gate|up and down: share of row pairs handed out dynamically, /1024 */
};

static __device__ __forceinline__ unsigned long long
global_ns (void)
{
  unsigned long long t;
  asm volatile ("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* One phase as one block sees it. */
struct Phase {
  const int4 *q;
  const void *s;
  int rows, nchunk;
  int r0, r1;                /* this block's rows */
  int ks, ntasks;            /* K slices a row pair, tasks (pair × slice) over the block's warps */
};

static __device__ __forceinline__ void
st_release (unsigned *p, unsigned v)
{
  asm volatile ("st.release.gpu.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}

/* All blocks of the grid (co-resident) meet here; sync[0] = arrivals, sync[1] = generation. */
static __device__ __forceinline__ void
grid_barrier (unsigned *sync)
{
  __syncthreads ();
  if (threadIdx.x == 0)
    {
      const unsigned g = ld_acquire (sync + 1);
      __threadfence ();
      const unsigned arrived = atomicAdd (sync, 1u);
      if (arrived == gridDim.x - 1)
        {
          atomicExch (sync, 0u);
          __threadfence ();
          st_release (sync + 1, g + 1);
        }
      else
        while (ld_acquire (sync + 1) == g)
          ;
    }
  __syncthreads ();
}

static __device__ __forceinline__ unsigned long long
ld_acquire64 (const unsigned long long *p)
{
  unsigned long long v;
  asm volatile ("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

/* The same with one 64-bit arrival counter that only grows: a block's
 * barrier is passed once the counter reaches the next multiple of the grid
 * size after its own arrival. One atomic and one poll on the critical path
 * (no reset, no second word); the counter must only ever see one grid size. */
static __device__ __forceinline__ void
grid_barrier_mono (unsigned long long *ctr)
{
  __syncthreads ();
  if (threadIdx.x == 0)
    {
      const unsigned long long nb = gridDim.x;
      __threadfence ();
      const unsigned long long old = atomicAdd (ctr, 1ull);
      const unsigned long long target = old - old % nb + nb;
      while (ld_acquire64 (ctr) < target)
        ;
    }
  __syncthreads ();
}

static __device__ __forceinline__ void
grid_sync (unsigned *sync, int mode)
{
  if (mode == 1)
    grid_barrier_mono ((unsigned long long *) sync);
  else
    grid_barrier (sync);
}

/* 16-byte asynchronous copy global → shared, past L1 (sm_80+; a plain copy before). */
static __device__ __forceinline__ void
cp_async16 (void *dst, const void *src)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned d = (unsigned) __cvta_generic_to_shared (dst);
  asm volatile ("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(d), "l"(src) : "memory");
#else
  *(float4 *) dst = __ldcg ((const float4 *) src);
#endif
}

static __device__ __forceinline__ void
cp_async_wait_all (void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile ("cp.async.commit_group;\n\tcp.async.wait_all;" ::: "memory");
#endif
}

template <int WT, int U>
static __device__ __forceinline__ Phase
plan (const PersistDev &a, const HoneKPersistLayer &L, int p, int b, int nb)
{
  constexpr int PER = WT == HONE_K_BF16 ? 8 : 32;   /* values a chunk */
  Phase ph;
  int cols, unit = 1;
  switch (p)
    {
    case 0: ph.q = (const int4 *) L.wo_q; ph.s = L.wo_s; ph.rows = a.hidden; cols = a.hidden; break;
    case 1: ph.q = (const int4 *) L.wgu_q; ph.s = L.wgu_s; ph.rows = 2 * a.ffn; cols = a.hidden; unit = 2; break;
    case 2: ph.q = (const int4 *) L.wdown_q; ph.s = L.wdown_s; ph.rows = a.hidden; cols = a.ffn; break;
    default: ph.q = (const int4 *) L.wqkv_q; ph.s = L.wqkv_s; ph.rows = a.qkv_rows; cols = a.hidden; break;
    }
  ph.nchunk = cols / PER;
  const int nu = ph.rows / unit;
  ph.r0 = (int) ((long long) b * nu / nb) * unit;
  ph.r1 = (int) ((long long) (b + 1) * nu / nb) * unit;
  const int n = ph.r1 - ph.r0, G = (n + PS_R - 1) / PS_R;
  /* K slices: the fewest that minimise a warp's serial memory round trips,
   * (tasks a warp) × (batches of U chunks a lane in a task) — the latency
   * chain, not the bytes, bounds a short phase. */
  auto trips = [&] (int k) {
    const int per_lane = (ph.nchunk + 32 * k - 1) / (32 * k);
    return ((G * k + PS_WARPS - 1) / PS_WARPS) * ((per_lane + U - 1) / U);
  };
  int ks = 1, best = trips (1);
  for (int k = 2; k <= PS_WARPS; k *= 2)
    {
      if (k * n > PS_RED_MAX || ph.nchunk < 32 * k)
        break;
      const int t = trips (k);
      if (t < best)
        {
          ks = k;
          best = t;
        }
    }
  ph.ks = ks;
  ph.ntasks = G * ks;
  return ph;
}

/* Staging by cp.async: every thread issues its 16-byte copies of x (and g)
 * at once — one L2 round trip for any size, no registers held (the next
 * phase's weights are in flight in them) — then the block works from
 * shared memory. Layout past the arrays stage() fills: BF16 g [hidden];
 * Q4_0 x f32 [cols] then g [hidden]. */
template <int WT>
static __device__ __forceinline__ float
stage_async (const PersistDev &a, const HoneKPersistLayer &L, int p, int4 *smem)
{
  __shared__ float part[PS_WARPS];
  const float *x = p == 0 ? L.attn : p == 2 ? a.act : a.h;
  const float *g = p == 1 ? L.ffn_norm : p == 3 ? L.attn_norm : NULL;
  const int cols = p == 2 ? a.ffn : a.hidden;
  const int tid = threadIdx.x, n4 = cols / 4;
  float ss = 0.f;
  if (WT == HONE_K_BF16)
    {
      float4 *xa = (float4 *) smem, *xb = xa + a.smax, *gs = xa + 2 * a.smax;
      for (int i = tid; i < n4; i += PS_THREADS)
        cp_async16 ((i & 1) ? xb + (i >> 1) : xa + (i >> 1), (const float4 *) x + i);
      if (g)
        for (int i = tid; i < n4; i += PS_THREADS)
          cp_async16 (gs + i, (const float4 *) g + i);
      cp_async_wait_all ();
      __syncthreads ();
      if (g)
        for (int c = tid; c < cols / 8; c += PS_THREADS)
          {
            float4 v0 = xa[c], v1 = xb[c];
            const float4 g0 = gs[2 * c], g1 = gs[2 * c + 1];
            ss += v0.x * v0.x + v0.y * v0.y + v0.z * v0.z + v0.w * v0.w
                  + v1.x * v1.x + v1.y * v1.y + v1.z * v1.z + v1.w * v1.w;
            v0.x *= g0.x; v0.y *= g0.y; v0.z *= g0.z; v0.w *= g0.w;
            v1.x *= g1.x; v1.y *= g1.y; v1.z *= g1.z; v1.w *= g1.w;
            xa[c] = v0;
            xb[c] = v1;
          }
    }
  else
    {
      int4 *xq = smem;
      float2 *xds = (float2 *) (smem + 2 * a.smax);
      float4 *xf = (float4 *) (smem + 2 * a.smax + (a.smax + 1) / 2);   /* past xds (8 bytes a block) */
      float4 *gs = xf + a.smax * 8;                                     /* past x f32 [smax·32] */
      for (int i = tid; i < n4; i += PS_THREADS)
        cp_async16 (xf + i, (const float4 *) x + i);
      if (g)
        for (int i = tid; i < n4; i += PS_THREADS)
          cp_async16 (gs + i, (const float4 *) g + i);
      cp_async_wait_all ();
      __syncthreads ();
      /* one thread a half block (16 values), pairs of lanes meeting by shuffle */
      const int nh = cols / 16, lane = tid & 31;
      for (int h0 = tid & ~31; h0 < nh; h0 += PS_THREADS)
        {
          const int hh = h0 + lane, j = hh >> 1, half = hh & 1;
          const bool ok = hh < nh;
          float v[16];
#pragma unroll
          for (int i = 0; i < 4; i++)
            {
              /* (64-byte lane stride: 4-way bank conflicts, a few hundred cycles a phase) */
              const float4 t = ok ? xf[4 * hh + i] : make_float4 (0.f, 0.f, 0.f, 0.f);
              float4 gg = make_float4 (1.f, 1.f, 1.f, 1.f);
              if (g && ok)
                gg = gs[4 * hh + i];
              if (g)
                ss += t.x * t.x + t.y * t.y + t.z * t.z + t.w * t.w;
              v[4 * i] = t.x * gg.x; v[4 * i + 1] = t.y * gg.y; v[4 * i + 2] = t.z * gg.z; v[4 * i + 3] = t.w * gg.w;
            }
          float amax = 0.f;
#pragma unroll
          for (int i = 0; i < 16; i++)
            amax = fmaxf (amax, fabsf (v[i]));
          amax = fmaxf (amax, __shfl_xor_sync (0xffffffffu, amax, 1));
          const float d = amax / 127.f;
          uint32_t packed[4];
          int sum = 0;
#pragma unroll
          for (int i = 0; i < 4; i++)
            {
              uint32_t wv = 0;
#pragma unroll
              for (int k = 0; k < 4; k++)
                {
                  const int qi = d > 0.f ? __float2int_rn (v[4 * i + k] / d) : 0;
                  sum += qi;
                  wv |= (uint32_t) (uint8_t) (int8_t) qi << (8 * k);
                }
              packed[i] = wv;
            }
          sum += __shfl_xor_sync (0xffffffffu, sum, 1);
          if (ok)
            {
              xq[half * a.smax + j] = make_int4 ((int) packed[0], (int) packed[1], (int) packed[2], (int) packed[3]);
              if (!half)
                xds[j] = make_float2 (d, d * (float) sum);
            }
        }
    }
  float scale = 1.f;
  if (g)
    {
      ss = warp_sum (ss);
      if ((tid & 31) == 0)
        part[tid >> 5] = ss;
      __syncthreads ();
      ss = 0.f;
#pragma unroll
      for (int i = 0; i < PS_WARPS; i++)
        ss += part[i];
      scale = rsqrtf (ss / (float) cols + a.eps);
      if (WT != HONE_K_BF16)
        {
          float2 *xds = (float2 *) (smem + 2 * a.smax);
          for (int j = tid; j < cols / 32; j += PS_THREADS)
            {
              const float2 t = xds[j];
              xds[j] = make_float2 (t.x * scale, t.y * scale);
            }
          scale = 1.f;
        }
    }
  __syncthreads ();
  return scale;
}

/* Stage phase p's activation of this block in shared memory; returns the
 * scale the row sums take (BF16 normed phases: the RMS scale; else 1). */
template <int WT, int ASYNC>
static __device__ __forceinline__ float
stage (const PersistDev &a, const HoneKPersistLayer &L, int p, int4 *smem)
{
  if (ASYNC)
    return stage_async<WT> (a, L, p, smem);
  __shared__ float part[PS_WARPS];
  const float *x = p == 0 ? L.attn : p == 2 ? a.act : a.h;
  const float *g = p == 1 ? L.ffn_norm : p == 3 ? L.attn_norm : NULL;
  const int cols = p == 2 ? a.ffn : a.hidden;
  const int tid = threadIdx.x;
  float ss = 0.f;
  if (WT == HONE_K_BF16)
    {
      float4 *xa = (float4 *) smem, *xb = xa + a.smax;
      const int nchunk = cols / 8;
#pragma unroll 4
      for (int c = tid; c < nchunk; c += PS_THREADS)
        {
          float4 v0 = __ldcg ((const float4 *) x + 2 * c), v1 = __ldcg ((const float4 *) x + 2 * c + 1);
          if (g)
            {
              ss += v0.x * v0.x + v0.y * v0.y + v0.z * v0.z + v0.w * v0.w
                    + v1.x * v1.x + v1.y * v1.y + v1.z * v1.z + v1.w * v1.w;
              const float4 g0 = __ldg ((const float4 *) g + 2 * c), g1 = __ldg ((const float4 *) g + 2 * c + 1);
              v0.x *= g0.x; v0.y *= g0.y; v0.z *= g0.z; v0.w *= g0.w;
              v1.x *= g1.x; v1.y *= g1.y; v1.z *= g1.z; v1.w *= g1.w;
            }
          xa[c] = v0;
          xb[c] = v1;
        }
    }
  else   /* Q4_0: two lanes quantize one 32-block of x·g (unscaled), 16 values each */
    {
      int4 *xq = smem;   /* half 0 of block j at xq[j], half 1 at xq[smax + j] */
      float2 *xds = (float2 *) (smem + 2 * a.smax);
      const int nh = cols / 16, lane = tid & 31;
      /* warp-uniform trip count: the pair shuffles below need every lane */
      for (int h0 = tid & ~31; h0 < nh; h0 += PS_THREADS)
        {
          const int hh = h0 + lane, j = hh >> 1, half = hh & 1;
          const bool ok = hh < nh;
          float v[16];
#pragma unroll
          for (int i = 0; i < 4; i++)
            {
              const float4 t = ok ? __ldcg ((const float4 *) x + 4 * hh + i) : make_float4 (0.f, 0.f, 0.f, 0.f);
              v[4 * i] = t.x; v[4 * i + 1] = t.y; v[4 * i + 2] = t.z; v[4 * i + 3] = t.w;
            }
          if (g)
            {
#pragma unroll
              for (int i = 0; i < 4; i++)
                {
                  const float4 t = ok ? __ldg ((const float4 *) g + 4 * hh + i) : make_float4 (0.f, 0.f, 0.f, 0.f);
                  ss += v[4 * i] * v[4 * i] + v[4 * i + 1] * v[4 * i + 1] + v[4 * i + 2] * v[4 * i + 2]
                        + v[4 * i + 3] * v[4 * i + 3];
                  v[4 * i] *= t.x; v[4 * i + 1] *= t.y; v[4 * i + 2] *= t.z; v[4 * i + 3] *= t.w;
                }
            }
          float amax = 0.f;
#pragma unroll
          for (int i = 0; i < 16; i++)
            amax = fmaxf (amax, fabsf (v[i]));
          amax = fmaxf (amax, __shfl_xor_sync (0xffffffffu, amax, 1));
          const float d = amax / 127.f;
          uint32_t packed[4];
          int sum = 0;
#pragma unroll
          for (int i = 0; i < 4; i++)
            {
              uint32_t wv = 0;
#pragma unroll
              for (int k = 0; k < 4; k++)
                {
                  const int qi = d > 0.f ? __float2int_rn (v[4 * i + k] / d) : 0;
                  sum += qi;
                  wv |= (uint32_t) (uint8_t) (int8_t) qi << (8 * k);
                }
              packed[i] = wv;
            }
          sum += __shfl_xor_sync (0xffffffffu, sum, 1);
          if (ok)
            {
              xq[half * a.smax + j] = make_int4 ((int) packed[0], (int) packed[1], (int) packed[2], (int) packed[3]);
              if (!half)
                xds[j] = make_float2 (d, d * (float) sum);
            }
        }
    }
  float scale = 1.f;
  if (g)
    {
      ss = warp_sum (ss);
      if ((tid & 31) == 0)
        part[tid >> 5] = ss;
      __syncthreads ();
      ss = 0.f;
#pragma unroll
      for (int i = 0; i < PS_WARPS; i++)
        ss += part[i];
      scale = rsqrtf (ss / (float) cols + a.eps);
      if (WT != HONE_K_BF16)
        {
          float2 *xds = (float2 *) (smem + 2 * a.smax);
          for (int j = tid; j < cols / 32; j += PS_THREADS)
            {
              const float2 t = xds[j];
              xds[j] = make_float2 (t.x * scale, t.y * scale);
            }
          scale = 1.f;
        }
    }
  __syncthreads ();
  return scale;
}

template <int WT, int U, int ASYNC>
__global__ void __launch_bounds__ (PS_THREADS, 2)
persist_kernel (PersistDev a)
{
  extern __shared__ int4 smem[];
  __shared__ float red[PS_RED_MAX];
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
  const int b = blockIdx.x, nb = gridDim.x;

  int4 w[U][PS_R];
  uint32_t sc[U][PS_R];
  float acc[PS_R];

  /* The U chunks of rows rowbase, rowbase+1 from chunk c0 on (K slice stride 32·ks). */
  auto load = [&] (const Phase &ph, int rowbase, int c0) {
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
      for (int r = 0; r < PS_R; r++)
        {
          const int c = c0 + u * 32 * ph.ks, row = rowbase + r;
          if (c < ph.nchunk && row < ph.r1)
            {
              const size_t i = (size_t) row * ph.nchunk + c;
              w[u][r] = ld_stream (ph.q + i);
              sc[u][r] = WT == HONE_K_Q4_0 ? ((const uint16_t *) ph.s)[i] : 0u;
            }
          else
            {
              w[u][r] = make_int4 (0, 0, 0, 0);
              sc[u][r] = 0u;
            }
        }
  };
  /* first batch of task t of phase ph (task = row pair t / ks, K slice t % ks) */
  auto load_task = [&] (const Phase &ph, int t) {
    load (ph, ph.r0 + PS_R * (t / ph.ks), (t % ph.ks) * 32 + lane);
  };
  auto consume = [&] (const Phase &ph, int c0) {
#pragma unroll
    for (int u = 0; u < U; u++)
      {
        const int c = c0 + u * 32 * ph.ks;
        if (c >= ph.nchunk)
          break;
        if (WT == HONE_K_BF16)
          {
            const float4 x0 = ((const float4 *) smem)[c], x1 = ((const float4 *) smem)[a.smax + c];
#pragma unroll
            for (int r = 0; r < PS_R; r++)
              acc[r] = dot_chunk_f<WT> (w[u][r], x0, x1, acc[r]);
          }
        else
          {
            const int4 xa = smem[c], xb = smem[a.smax + c];
            const float2 xd = ((const float2 *) (smem + 2 * a.smax))[c];
#pragma unroll
            for (int r = 0; r < PS_R; r++)
              acc[r] = dot_chunk_q4<WT> (w[u][r], sc[u][r], xa, xb, xd, acc[r]);
          }
      }
  };

  /* Dynamic tail (a.dyn > 0, gate|up and down): the first pairs of such a
   * phase are split statically, contiguous over all warps of the grid; the
   * last dyn/1024 are taken one pair at a time from a counter by whichever
   * warp is free, so blocks on slower SMs do not set the phase's end.
   * Counters: sync[4 + 2p + (instance & 1)]; block 0 zeroes an instance's
   * counter after the barrier that ends it (the same slot is next used two
   * instances later), the last block to exit zeroes them all. */
  auto dyn_split = [&] (const Phase &ph, int &S, int &s0, int &s1) {
    const int P = ph.rows >> 1, NW = nb * PS_WARPS, gw = b * PS_WARPS + wib;
    S = P - (int) ((long long) P * a.dyn / 1024);
    s0 = (int) ((long long) gw * S / NW);
    s1 = (int) ((long long) (gw + 1) * S / NW);
  };
  auto whole = [&] (Phase ph) {   /* a dynamic phase: any pair, K not split */
    ph.ks = 1;
    ph.r0 = 0;
    ph.r1 = ph.rows;
    return ph;
  };
  unsigned parity = 0;   /* bit p: instance parity of phase p in this launch (no array: stays in a register) */
  bool have = false;   /* this warp's first batch of the current phase is already in registers */
  const int first_p = __ffs (a.mask) - 1, last_p = 31 - __clz (a.mask);
  for (int l = 0; l < a.n_layers; l++)
    {
      const HoneKPersistLayer L = a.layers[l];
      for (int p = first_p; p <= last_p; p++)
        {
          if (!((a.mask >> p) & 1))
            continue;
          const Phase ph = plan<WT, U> (a, L, p, b, nb);
          const bool last = p == last_p && l + 1 == a.n_layers;
          /* the next phase's first weights, issued before this phase's reduction and barrier */
          auto prefetch_next = [&] () {
            if (!a.prefetch || last)
              return;
            int pn = p + 1;
            while (pn <= last_p && !((a.mask >> pn) & 1))
              pn++;
            const bool wrap = pn > last_p;
            const HoneKPersistLayer Ln = wrap ? a.layers[l + 1] : L;
            const int pp = wrap ? first_p : pn;
            const Phase nx = plan<WT, U> (a, Ln, pp, b, nb);
            if (a.dyn > 0 && (pp == 1 || pp == 2))
              {
                int S, s0, s1;
                dyn_split (nx, S, s0, s1);
                if (s0 < s1)
                  {
                    load (whole (nx), 2 * s0, lane);
                    have = true;
                  }
              }
            else if (wib < nx.ntasks)
              {
                load_task (nx, wib);
                have = true;
              }
          };
          const bool dynp = a.dyn > 0 && (p == 1 || p == 2);
          unsigned long long *tr = a.trace ? a.trace + ((size_t) b * 4 * a.n_layers + 4 * l + p) * 6 : NULL;
          if (tr && threadIdx.x == 0)
            {
              tr[0] = global_ns ();
              tr[3] = clock64 ();
            }
          const float scale = ph.r1 > ph.r0 || dynp ? stage<WT, ASYNC> (a, L, p, smem) : 1.f;
          if (tr && threadIdx.x == 0)
            {
              tr[1] = global_ns ();
              tr[4] = clock64 ();
            }
          if (dynp)
            {
              const Phase dph = whole (ph);
              const int P = ph.rows >> 1;
              int S, pair, s1;
              dyn_split (ph, S, pair, s1);
              unsigned *work = a.sync + 4 + 2 * p + ((parity >> p) & 1);
              if (pair >= s1)
                {
                  unsigned tk = 0;
                  if (lane == 0)
                    tk = atomicAdd (work, 1u);
                  pair = S + (int) __shfl_sync (0xffffffffu, tk, 0);
                }
              bool fetched = false;
              while (pair < P)
                {
                  const int rowbase = 2 * pair;
                  int c0 = lane;
                  if (!have)
                    load (dph, rowbase, c0);
                  have = false;
                  /* the next pair: the following static one, or a ticket taken now (used at the end) */
                  const bool stat = pair + 1 < s1;
                  unsigned tk = 0;
                  if (!stat && lane == 0)
                    tk = atomicAdd (work, 1u);
                  acc[0] = acc[1] = 0.f;
                  for (;;)
                    {
                      consume (dph, c0);
                      c0 += 32 * U;
                      if (c0 >= dph.nchunk)
                        break;
                      load (dph, rowbase, c0);
                    }
                  const int nxt = stat ? pair + 1 : S + (int) __shfl_sync (0xffffffffu, tk, 0);
                  if (nxt < P)
                    {
                      load (dph, 2 * nxt, lane);
                      have = true;
                    }
                  else
                    {
                      prefetch_next ();
                      fetched = true;
                    }
                  const float v0 = warp_sum (acc[0]), v1 = warp_sum (acc[1]);
                  if (lane == 0)
                    {
                      if (p == 1)
                        a.act[pair] = silu (v0 * scale) * (v1 * scale);
                      else
                        {
                          a.h[rowbase] = __ldcg (a.h + rowbase) + v0;
                          a.h[rowbase + 1] = __ldcg (a.h + rowbase + 1) + v1;
                        }
                    }
                  pair = nxt;
                }
              if (!fetched)
                prefetch_next ();
            }
          else
          for (int t = wib; t < ph.ntasks; t += PS_WARPS)
            {
              const int pair = t / ph.ks, slice = t % ph.ks;
              const int rowbase = ph.r0 + PS_R * pair;
              int c0 = slice * 32 + lane;
              if (!have)
                load (ph, rowbase, c0);
              have = false;
#pragma unroll
              for (int r = 0; r < PS_R; r++)
                acc[r] = 0.f;
              for (;;)
                {
                  consume (ph, c0);
                  c0 += 32 * U * ph.ks;
                  if (c0 >= ph.nchunk)
                    break;
                  load (ph, rowbase, c0);
                }
              if (t + PS_WARPS < ph.ntasks)
                {
                  load_task (ph, t + PS_WARPS);
                  have = true;
                }
              else
                prefetch_next ();
#pragma unroll
              for (int r = 0; r < PS_R; r++)
                {
                  const float v = warp_sum (acc[r]);
                  const int lr = rowbase - ph.r0 + r;
                  if (lane == 0 && rowbase + r < ph.r1)
                    red[slice * (ph.r1 - ph.r0) + lr] = v;
                }
            }
          if (!dynp && wib >= ph.ntasks)
            prefetch_next ();
          if (!dynp)
            __syncthreads ();
          /* epilogue: the K slices of each row summed in order, then stored */
          const int n = dynp ? 0 : ph.r1 - ph.r0;
          if (p == 1)
            for (int i = threadIdx.x; i < (n >> 1); i += PS_THREADS)
              {
                float v0 = 0.f, v1 = 0.f;
                for (int s = 0; s < ph.ks; s++)
                  {
                    v0 += red[s * n + 2 * i];
                    v1 += red[s * n + 2 * i + 1];
                  }
                a.act[(ph.r0 >> 1) + i] = silu (v0 * scale) * (v1 * scale);
              }
          else
            for (int i = threadIdx.x; i < n; i += PS_THREADS)
              {
                float v = 0.f;
                for (int s = 0; s < ph.ks; s++)
                  v += red[s * n + i];
                v *= scale;
                const int row = ph.r0 + i;
                if (p == 3)
                  L.qkv[row] = v;
                else
                  a.h[row] = __ldcg (a.h + row) + v;
              }
          if (tr)
            {
              __syncthreads ();
              if (threadIdx.x == 0)
                {
                  tr[2] = global_ns ();
                  tr[5] = clock64 ();
                }
            }
          if (!last)
            {
              grid_sync (a.sync, a.barrier);
              if (dynp && b == 0 && threadIdx.x == 0)
                atomicExch (a.sync + 4 + 2 * p + ((parity >> p) & 1), 0u);
            }
          parity ^= 1u << p;
        }
    }
  if (a.dyn > 0)
    {
      /* the last block out zeroes the work counters (the final instance's is still set) */
      __syncthreads ();
      if (threadIdx.x == 0)
        {
          __threadfence ();
          if (atomicAdd (a.sync + 2, 1u) == gridDim.x - 1)
            {
              for (int i = 4; i < 12; i++)
                atomicExch (a.sync + i, 0u);
              atomicExch (a.sync + 2, 0u);
            }
        }
    }
}

__global__ void __launch_bounds__ (PS_THREADS)
barrier_bench_kernel (unsigned *sync, int n, int mode)
{
  for (int i = 0; i < n; i++)
    grid_sync (sync, mode);
}

/* ---- host ----------------------------------------------------------------- */

static cudaError_t
launch (const void *k, int grid, size_t smem, int cooperative, cudaStream_t stream, void **args)
{
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  cfg.gridDim = dim3 (grid);
  cfg.blockDim = dim3 (PS_THREADS);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  if (cooperative)
    {
      attr[0].id = cudaLaunchAttributeCooperative;
      attr[0].val.cooperative = 1;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
    }
  return cudaLaunchKernelExC (&cfg, k, args);
}

static int
sm_count (void)
{
  int dev = 0, sms = 0;
  cudaGetDevice (&dev);
  cudaDeviceGetAttribute (&sms, cudaDevAttrMultiProcessorCount, dev);
  return sms > 0 ? sms : 1;
}

extern "C" int
hone_k_decode_persist (const HoneKPersistArgs *a, cudaStream_t stream)
{
  if (!a || !a->layers || !a->h || !a->act || !a->sync || a->n_layers < 1 || a->hidden < 1 || a->ffn < 1
      || a->qkv_rows < 1)
    return (int) cudaErrorInvalidValue;
  const int per = a->type == HONE_K_BF16 ? 8 : a->type == HONE_K_Q4_0 ? 32 : 0;
  /* Q4_0 at 8 chunks a row in flight spills (ptxas: 136–208-byte stack): BF16 only */
  if (!per || a->hidden % 32 || a->ffn % per || (a->unroll != 4 && (a->unroll != 8 || per != 8)) || a->phase_mask < 0 || a->phase_mask > 15
      || (a->barrier != 0 && a->barrier != 1) || (uintptr_t) a->sync % 8)
    return (int) cudaErrorInvalidValue;
  const int big = a->hidden > a->ffn ? a->hidden : a->ffn;
  PersistDev d;
  d.layers = a->layers;
  d.h = a->h;
  d.act = a->act;
  d.sync = a->sync;
  d.hidden = a->hidden;
  d.ffn = a->ffn;
  d.qkv_rows = a->qkv_rows;
  d.n_layers = a->n_layers;
  d.eps = a->eps;
  d.prefetch = a->prefetch;
  d.barrier = a->barrier;
  d.mask = a->phase_mask ? a->phase_mask : 15;
  d.trace = a->trace;
  d.dyn = a->dyn < 0 ? 0 : a->dyn > 1024 ? 1024 : a->dyn;
  const void *k;
  size_t smem;
  const bool as = a->stage_async != 0, u8 = a->unroll == 8;   /* u8: BF16 only (checked above) */
  if (a->type == HONE_K_BF16)
    {
      d.smax = big / 8;
      smem = (size_t) d.smax * 2 * sizeof (int4) + (as ? (size_t) a->hidden * 4 : 0);
      k = as ? (u8 ? (const void *) persist_kernel<HONE_K_BF16, 8, 1> : (const void *) persist_kernel<HONE_K_BF16, 4, 1>)
             : (u8 ? (const void *) persist_kernel<HONE_K_BF16, 8, 0> : (const void *) persist_kernel<HONE_K_BF16, 4, 0>);
    }
  else
    {
      d.smax = big / 32;
      smem = (size_t) d.smax * 2 * sizeof (int4) + (size_t) ((d.smax + 1) / 2) * sizeof (int4);
      if (as)
        smem += (size_t) d.smax * 128 + (size_t) a->hidden * 4;
      k = as ? (const void *) persist_kernel<HONE_K_Q4_0, 4, 1> : (const void *) persist_kernel<HONE_K_Q4_0, 4, 0>;
    }
  /* raise the dynamic shared-memory limit once per kernel (not again inside a graph capture) */
  static struct { const void *k; size_t smem; } raised[8];
  int ri = 0;
  while (ri < 8 && raised[ri].k && raised[ri].k != k)
    ri++;
  if (ri == 8 || raised[ri].k != k || raised[ri].smem < smem)
    {
      HONE_K_CHECK (cudaFuncSetAttribute (k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int) smem));
      if (ri < 8)
        {
          raised[ri].k = k;
          raised[ri].smem = smem;
        }
    }
  int fit = 0;
  HONE_K_CHECK (cudaOccupancyMaxActiveBlocksPerMultiprocessor (&fit, k, PS_THREADS, smem));
  const int sms = sm_count ();
  const int bps = a->blocks_per_sm > 0 ? a->blocks_per_sm : (fit < 2 ? fit : 2);
  const int grid = a->grid > 0 ? a->grid : sms * bps;
  if (bps < 1 || bps > fit || grid > fit * sms)
    return (int) cudaErrorCooperativeLaunchTooLarge;   /* the barrier needs every block resident */
  /* a block's row partial sums fit in shared memory (KS = 1 at worst) */
  const int rows_max = 2 * ((a->ffn + grid - 1) / grid) + 2;
  if (rows_max > PS_RED_MAX || (a->hidden + grid - 1) / grid + 2 > PS_RED_MAX
      || (a->qkv_rows + grid - 1) / grid + 2 > PS_RED_MAX)
    return (int) cudaErrorInvalidValue;
  void *args[] = { &d };
  return (int) launch (k, grid, smem, a->cooperative, stream, args);
}

extern "C" int
hone_k_persist_barrier_bench (int blocks, int n_barriers, unsigned *sync, int cooperative, int mode,
                              cudaStream_t stream)
{
  if (blocks < 1 || n_barriers < 0 || !sync || (mode != 0 && mode != 1) || (uintptr_t) sync % 8)
    return (int) cudaErrorInvalidValue;
  int fit = 0;
  HONE_K_CHECK (cudaOccupancyMaxActiveBlocksPerMultiprocessor (&fit, barrier_bench_kernel, PS_THREADS, 0));
  if (blocks > fit * sm_count ())
    return (int) cudaErrorCooperativeLaunchTooLarge;
  void *args[] = { &sync, &n_barriers, &mode };
  return (int) launch ((const void *) barrier_bench_kernel, blocks, 0, cooperative, stream, args);
}
