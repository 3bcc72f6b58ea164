/* hone-chain-bench.cu — what a decode step's launch structure alone costs.
 *
 * A measurement with no model in it: a CUDA graph of plain read kernels with
 * the byte counts and grid sizes of one Llama-3-8B decode step (per layer the
 * q|k|v, o, gate|up and down matrices, then the lm_head), optionally with the
 * step's small dependent kernels between them (attention, RMSNorm, int8
 * quantization: a few blocks reading a few KB from L2 and reducing them), on
 * PDL as decode_step launches them. Every read kernel streams its bytes with
 * 16-byte loads, several in flight a thread, the first ones issued before its
 * griddepcontrol.wait; nothing is dequantized or multiplied.
 *
 * So the step time it prints is the floor the per-launch design sets on the
 * real kernels: if the real Q4_0 step (1.52 ms on an H200) sits near this
 * chain's figure, the launches and their dependencies are what is left and
 * only fewer of them can help; if it sits well above, the kernels' own work is.
 * The persistent rows run the same reads as one cooperative launch with grid
 * barriers between the phases (the design of sessions 4-7), optionally with
 * each block's first loads of the next phase issued before the barrier, and
 * with the norm/quantize work done by every block after it: the floor of that
 * design.
 *
 * The L2-streamer rows (session 38) add one warp on a parallel branch of the
 * graph that keeps bulk L2 prefetches issued a window past the read kernels'
 * frontier (HONE_CHAIN_L2=0 leaves them and the L2 probe out).
 *
 *   hone-chain-bench [--type q4_0|bf16|awq] [--reps N] [--ceiling]
 * (--ceiling: the read rate by block size against hone bench's old probe
 * pattern instead of the chains). Built by tests/cuda/build-carry.sh into
 * CARRY/hone-chain-bench.xz; the session-33 calls (tests/cuda/calls/s33-*)
 * run it.
 * Prints one line per variant: ms a step, GB a step, GB/s, % of the single
 * kernel's read rate over the same bytes. Plain CUDA (headers of kernels/ and
 * tests/cuda/, nothing of libhone linked).
 */
#include <cuda_runtime.h>
#include <algorithm>
#include "hone-check-util.cuh"   /* CK, rng_u64 */
#include "hone-k-common.cuh"     /* ld_stream, ld_acquire, pdl_wait, pdl_trigger */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <algorithm>
#include <vector>


/* One block streams its slice of @p (per_block 16-byte chunks), U loads in
 * flight a thread, the first U before the wait; the XOR of everything goes to
 * sink[blockIdx.x] (so nothing is optimized away). trig: 0 no trigger, 1
 * after the wait, 2 after the main loop. */
template <int U>
__global__ void __launch_bounds__ (256)
read_kernel (const int4 *p, long long n, int per_block, int trig, unsigned *sink, unsigned long long *ctr,
             int ctr_mode)
{
  const long long base = (long long) blockIdx.x * per_block;
  int4 w[U];
  unsigned acc = 0;
  int i = threadIdx.x;
#pragma unroll
  for (int u = 0; u < U; u++)
    {
      const long long c = base + i + u * 256;
      w[u] = (i + u * 256 < per_block && c < n) ? ld_stream (p + c) : make_int4 (0, 0, 0, 0);
    }
  /* the L2 streamer's frontier (l2_stream_kernel): this block's chunks, counted as it starts */
  if (ctr_mode == 1 && threadIdx.x == 0)
    atomicAdd (ctr, (unsigned long long) min ((long long) per_block, n - base));
  pdl_wait ();
  if (trig == 1)
    pdl_trigger ();
  for (;;)
    {
#pragma unroll
      for (int u = 0; u < U; u++)
        acc ^= (unsigned) (w[u].x ^ w[u].y ^ w[u].z ^ w[u].w);
      i += U * 256;
      if (i >= per_block)
        break;
#pragma unroll
      for (int u = 0; u < U; u++)
        {
          const long long c = base + i + u * 256;
          w[u] = (i + u * 256 < per_block && c < n) ? ld_stream (p + c) : make_int4 (0, 0, 0, 0);
        }
    }
  if (trig == 2)
    pdl_trigger ();
  /* ... or as it ends (thread 0's own loop done: the block's loads are all but issued) */
  if (ctr_mode == 2 && threadIdx.x == 0)
    atomicAdd (ctr, (unsigned long long) min ((long long) per_block, n - base));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    acc ^= __shfl_xor_sync (0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0 && acc == 0x9e3779b9u)   /* practically never: keeps the loads */
    sink[blockIdx.x & 4095] = acc;
}

/* ---- an L2 streamer beside the chain -------------------------------------
 * One warp on a parallel branch of the step's graph keeps the memory busy
 * through the chain's launch boundaries: it reads the read kernels' frontier
 * (the 16-byte chunks of the blocks that have started, or ended: ctr) and
 * keeps bulk L2 prefetches (cp.async.bulk.prefetch.L2, `piece` bytes a lane)
 * issued up to `window` bytes past it, over the weights in step order (one
 * buffer here; a table of ranges in an engine). The reads then find the head
 * of each matrix, and whatever the tails and the small kernels leave idle, in
 * L2. It exits once it has issued everything. */
__global__ void __launch_bounds__ (32)
l2_stream_kernel (const char *w, unsigned long long total, const unsigned long long *ctr,
                  unsigned long long window, unsigned piece)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned long long issued = 0;
  while (issued < total)
    {
      unsigned long long f;
      asm volatile ("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(f) : "l"(ctr) : "memory");
      f *= 16;
      if (issued < f)
        issued = f;   /* what the reads have passed is theirs */
      const unsigned long long target = min (total, f + window);
      if (issued >= target)
        {
          __nanosleep (128);
          continue;
        }
      const unsigned long long a = issued + (unsigned long long) threadIdx.x * piece;
      if (a < target)
        {
          const unsigned size = (unsigned) min ((unsigned long long) piece, target - a);
          asm volatile ("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(w + a), "r"(size) : "memory");
        }
      issued = min (target, issued + 32ull * piece);
    }
#endif
}

/* read_kernel with a deeper start: before its wait a block also copies the
 * first @pf_kb KB of its slice into shared memory (every thread's 16-byte
 * cp.async; the loads in registers then start after that prefix), so the SMs
 * that the previous kernel's tail leaves idle fetch more of this kernel's
 * bytes before it may run; after the wait the prefix is consumed from shared
 * memory and the rest streamed as read_kernel does. Dynamic shared memory:
 * pf_kb KB. */
__global__ void __launch_bounds__ (256)
read_pf_kernel (const int4 *p, long long n, int per_block, int pf_kb, int trig, unsigned *sink)
{
  extern __shared__ int4 pre_sm[];
  const long long base = (long long) blockIdx.x * per_block;
  const int npre = min (per_block, pf_kb * 64);   /* 16-byte chunks in the prefix */
  for (int j = threadIdx.x; j < npre; j += 256)
    if (base + j < n)
      {
        const unsigned d = (unsigned) __cvta_generic_to_shared (pre_sm + j);
        asm volatile ("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(d), "l"(p + base + j) : "memory");
      }
  asm volatile ("cp.async.commit_group;" ::: "memory");
  int4 w[4];
  unsigned acc = 0;
  int i = npre + threadIdx.x;
#pragma unroll
  for (int u = 0; u < 4; u++)
    {
      const long long c = base + i + u * 256;
      w[u] = (i + u * 256 < per_block && c < n) ? ld_stream (p + c) : make_int4 (0, 0, 0, 0);
    }
  pdl_wait ();
  if (trig == 1)
    pdl_trigger ();
  asm volatile ("cp.async.wait_group 0;" ::: "memory");
  __syncthreads ();
  for (int j = threadIdx.x; j < npre; j += 256)
    {
      const int4 v = pre_sm[j];
      acc ^= (unsigned) (v.x ^ v.y ^ v.z ^ v.w);
    }
  while (i < per_block)
    {
#pragma unroll
      for (int u = 0; u < 4; u++)
        acc ^= (unsigned) (w[u].x ^ w[u].y ^ w[u].z ^ w[u].w);
      i += 4 * 256;
      if (i >= per_block)
        break;
#pragma unroll
      for (int u = 0; u < 4; u++)
        {
          const long long c = base + i + u * 256;
          w[u] = (i + u * 256 < per_block && c < n) ? ld_stream (p + c) : make_int4 (0, 0, 0, 0);
        }
    }
  if (trig == 2)
    pdl_trigger ();
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    acc ^= __shfl_xor_sync (0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0 && acc == 0x9e3779b9u)
    sink[blockIdx.x & 4095] = acc;
}

/* hone_k_read_stream's pattern (kernels/hone-k-bandwidth.cu, `hone bench`'s
 * roofline probe): a grid-stride loop, 4 loads a thread one grid apart. */
__global__ void __launch_bounds__ (512)
probe_kernel (const int4 *p, size_t n, unsigned *sink)
{
  const size_t stride = (size_t) gridDim.x * blockDim.x;
  size_t i = (size_t) blockIdx.x * blockDim.x + threadIdx.x;
  unsigned acc = 0;
  for (; i + 3 * stride < n; i += 4 * stride)
    {
      const int4 a = ld_stream (p + i), b = ld_stream (p + i + stride);
      const int4 c = ld_stream (p + i + 2 * stride), d = ld_stream (p + i + 3 * stride);
      acc ^= (unsigned) (a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w);
    }
  for (; i < n; i += stride)
    {
      const int4 a = ld_stream (p + i);
      acc ^= (unsigned) (a.x ^ a.y ^ a.z ^ a.w);
    }
  for (int o = 16; o > 0; o >>= 1)
    acc ^= __shfl_xor_sync (0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0 && acc == 0x9e3779b9u)
    *sink = acc;
}

/* The body of a small dependent kernel: block @blk reads @floats of the
 * L2-resident @src in @rounds dependent rounds (each round's address depends
 * on the last one's sum, as attention's max/sum chain does) and reduces them
 * across the block. */
static __device__ float
small_work (const float *src, int floats, int rounds, int blk)
{
  __shared__ float part[8];
  float s = 0.f;
  int off = 0;
  const float *b = src + (size_t) blk * floats;
  const int per_round = floats / rounds;
  for (int r = 0; r < rounds; r++)
    {
      for (int i = threadIdx.x; i < per_round; i += 256)
        s += b[(r * per_round + i + off) % floats];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync (0xffffffffu, s, o);
      if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = s;
      __syncthreads ();
      s = part[0] + part[1] + part[2] + part[3] + part[4] + part[5] + part[6] + part[7];
      off = ((int) s) & 7;
      __syncthreads ();
    }
  return s;
}

/* A small dependent kernel (attention, RMSNorm, quantization): waits, does
 * small_work, writes one word. */
__global__ void __launch_bounds__ (256)
small_kernel (const float *src, int floats_per_block, int rounds, unsigned *sink)
{
  pdl_wait ();
  pdl_trigger ();
  const float s = small_work (src, floats_per_block, rounds, blockIdx.x);
  if (threadIdx.x == 0)
    sink[4096 + (blockIdx.x & 1023)] = __float_as_uint (s);
}

/* ---- attention folded into the q|k|v launch ----------------------------------
 * The q|k|v reads with @extra attention blocks appended to the grid. Every
 * block takes a ticket (one 64-bit counter that only grows: the launch is
 * ticket / grid, the block's place in it ticket % grid), so a block with a
 * later place knows every earlier place has started (no wait on a block that
 * is not running). Places < n_read read their slice, in group-major order
 * (group g = places [g·per_group, (g+1)·per_group): a KV head's rows and its
 * query heads' rows), then count themselves done for their group; place
 * n_read + h is head h's attention: it triggers the next launch, waits until
 * its group (h / heads_per_group) is done this launch, then does the
 * attention's small work. No kernel boundary between q|k|v and attention;
 * the attention of early groups runs while later groups' rows still stream. */
__global__ void __launch_bounds__ (256)
read_attn_kernel (const int4 *p, long long n, int per_block, int n_read, int groups, int heads_per_group,
                  const float *l2buf, unsigned long long *ticket, unsigned *done, unsigned *sink)
{
  __shared__ unsigned long long t_sh;
  if (threadIdx.x == 0)
    t_sh = atomicAdd (ticket, 1ull);
  __syncthreads ();
  const unsigned long long t = t_sh;
  const unsigned long long epoch = t / gridDim.x;
  const int place = (int) (t % gridDim.x);
  const int per_group = n_read / groups;
  if (place < n_read)
    {
      const long long base = (long long) place * per_block;
      int4 w[4];
      unsigned acc = 0;
      int i = threadIdx.x;
#pragma unroll
      for (int u = 0; u < 4; u++)
        {
          const long long c = base + i + u * 256;
          w[u] = (i + u * 256 < per_block && c < n) ? ld_stream (p + c) : make_int4 (0, 0, 0, 0);
        }
      pdl_wait ();
      for (;;)
        {
#pragma unroll
          for (int u = 0; u < 4; u++)
            acc ^= (unsigned) (w[u].x ^ w[u].y ^ w[u].z ^ w[u].w);
          i += 4 * 256;
          if (i >= per_block)
            break;
#pragma unroll
          for (int u = 0; u < 4; u++)
            {
              const long long c = base + i + u * 256;
              w[u] = (i + u * 256 < per_block && c < n) ? ld_stream (p + c) : make_int4 (0, 0, 0, 0);
            }
        }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1)
        acc ^= __shfl_xor_sync (0xffffffffu, acc, o);
      if ((threadIdx.x & 31) == 0 && acc == 0x9e3779b9u)
        sink[place & 4095] = acc;
      __syncthreads ();   /* every warp's rows written (in a real kernel) */
      if (threadIdx.x == 0)
        {
          __threadfence ();
          atomicAdd (done + min (place / per_group, groups - 1), 1u);
        }
      return;
    }
  const int h = place - n_read, g = h / heads_per_group;
  pdl_trigger ();   /* the o projection may launch: these are the grid's last blocks */
  if (threadIdx.x == 0)
    {
      /* this launch's count: every launch adds per_group (the last group: the rest) */
      const unsigned in_g = g == groups - 1 ? (unsigned) (n_read - per_group * (groups - 1)) : (unsigned) per_group;
      const unsigned target = (unsigned) ((epoch + 1) * in_g);
      while ((int) (ld_acquire (done + g) - target) < 0)
        __nanosleep (64);
    }
  __syncthreads ();
  const float sv = small_work (l2buf, 1024, 4, h);
  if (threadIdx.x == 0)
    sink[4096 + (h & 1023)] = __float_as_uint (sv);
}

/* ---- the persistent form: one launch, phases split by grid barriers ------- */

/* A phase of the persistent kernel: read `chunks` 16-byte chunks from
 * `offset` (split evenly over the blocks, a contiguous slice each), or, when
 * chunks == 0, `small_blocks` blocks do small_work (attention). `prologue`:
 * every block first does a norm-like reduction of 16 KB from L2 (the input a
 * persistent GEMV must normalize / quantize itself). */
struct Phase
{
  long long offset, chunks;
  int small_blocks, prologue;
};

/* Every block arrives; all wait until gridDim.x × (n + 1) arrivals. */
static __device__ void
grid_barrier (unsigned *bar, unsigned n)
{
  __syncthreads ();
  if (threadIdx.x == 0)
    {
      __threadfence ();
      atomicAdd (bar, 1u);
      const unsigned target = gridDim.x * (n + 1);
      unsigned v;
      do
        v = ld_acquire (bar);
      while (v < target);
    }
  __syncthreads ();
}

/* prefetch: the first 4 loads of the next read phase are issued before the barrier. */
__global__ void __launch_bounds__ (256)
persist_kernel (const Phase *ph, int n_ph, const int4 *w, const float *l2buf, unsigned *bar, int prefetch,
                unsigned *sink)
{
  unsigned acc = 0;
  int4 pre[4];
  bool have_pre = false;
  for (int p = 0; p < n_ph; p++)
    {
      const Phase f = ph[p];
      if (f.chunks)
        {
          const long long share = (f.chunks + gridDim.x - 1) / gridDim.x;
          const long long b0 = f.offset + (long long) blockIdx.x * share;
          const long long end = min (f.offset + f.chunks, b0 + share);
          long long i = b0 + threadIdx.x;
          int4 v[4];
          if (have_pre)
            {
#pragma unroll
              for (int u = 0; u < 4; u++)
                v[u] = pre[u];
              have_pre = false;
            }
          else
#pragma unroll
            for (int u = 0; u < 4; u++)
              v[u] = i + u * 256 < end ? ld_stream (w + i + u * 256) : make_int4 (0, 0, 0, 0);
          if (f.prologue)
            acc ^= __float_as_uint (small_work (l2buf, 4096, 2, 0));
          for (;;)
            {
#pragma unroll
              for (int u = 0; u < 4; u++)
                acc ^= (unsigned) (v[u].x ^ v[u].y ^ v[u].z ^ v[u].w);
              i += 4 * 256;
              if (i >= end)
                break;
#pragma unroll
              for (int u = 0; u < 4; u++)
                v[u] = i + u * 256 < end ? ld_stream (w + i + u * 256) : make_int4 (0, 0, 0, 0);
            }
        }
      else if ((int) blockIdx.x < f.small_blocks)
        acc ^= __float_as_uint (small_work (l2buf, 1024, 4, blockIdx.x));
      if (p + 1 < n_ph)
        {
          const Phase g = ph[p + 1];
          if (prefetch && g.chunks)
            {
              const long long share = (g.chunks + gridDim.x - 1) / gridDim.x;
              const long long b0 = g.offset + (long long) blockIdx.x * share;
              const long long end = min (g.offset + g.chunks, b0 + share);
              const long long i = b0 + threadIdx.x;
#pragma unroll
              for (int u = 0; u < 4; u++)
                pre[u] = i + u * 256 < end ? ld_stream (w + i + u * 256) : make_int4 (0, 0, 0, 0);
              have_pre = true;
            }
          grid_barrier (bar, (unsigned) p);
        }
    }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    acc ^= __shfl_xor_sync (0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0 && acc == 0x9e3779b9u)
    sink[blockIdx.x & 4095] = acc;
}

struct Node
{
  int kind;            /* 0 read, 1 small, 2 read + attention blocks (read_attn_kernel) */
  long long offset;    /* read: first 16-byte chunk in the weight buffer */
  long long chunks;    /* read: 16-byte chunks */
  int per_block;       /* read: chunks a block */
  int blocks;          /* small: blocks */
  int floats;          /* small: floats a block */
  int rounds;          /* small: dependent rounds */
};

static unsigned long long *fold_ticket;   /* read_attn_kernel's counters (zeroed once) */
static unsigned *fold_done;
static int read_pf_kb;                     /* > 0: read nodes run read_pf_kernel with this prefix */
static unsigned long long *l2_ctr;         /* the L2 streamer's frontier */
static int l2_mode;                        /* read_kernel's ctr_mode: 0 no streamer, 1 started, 2 ended */

static void
launch (const Node &n, const int4 *w, const float *l2buf, unsigned *sink, bool pdl, int trig, cudaStream_t s)
{
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.blockDim = dim3 (256);
  cfg.stream = s;
  cfg.attrs = at;
  cfg.numAttrs = pdl ? 1 : 0;
  if (n.kind == 0)
    {
      cfg.gridDim = dim3 ((unsigned) ((n.chunks + n.per_block - 1) / n.per_block));
      if (read_pf_kb > 0)
        {
          cfg.dynamicSmemBytes = (size_t) read_pf_kb << 10;
          CK (cudaLaunchKernelEx (&cfg, read_pf_kernel, w + n.offset, n.chunks, n.per_block, read_pf_kb, trig, sink));
        }
      else
        CK (cudaLaunchKernelEx (&cfg, read_kernel<4>, w + n.offset, n.chunks, n.per_block, trig, sink, l2_ctr,
                                l2_mode));
    }
  else if (n.kind == 2)
    {
      const int n_read = (int) ((n.chunks + n.per_block - 1) / n.per_block);
      cfg.gridDim = dim3 ((unsigned) (n_read + n.blocks));
      CK (cudaLaunchKernelEx (&cfg, read_attn_kernel, w + n.offset, n.chunks, n.per_block, n_read, 8, n.blocks / 8,
                              l2buf, fold_ticket, fold_done, sink));
    }
  else
    {
      cfg.gridDim = dim3 ((unsigned) n.blocks);
      CK (cudaLaunchKernelEx (&cfg, small_kernel, l2buf, n.floats, n.rounds, sink));
    }
}

/* bytes a weight (scales included), and rows a block of q|k|v, o, gate|up,
 * down and the lm_head: R × 8 / KS of the launch shapes pick_config chooses
 * for one token (kernels/hone-k-gemv.cu) */
struct Type
{
  const char *name;
  double bytes_per_weight;
  int rows_per_block[5];
  double head_bytes_per_weight;   /* the lm_head's (AWQ keeps it in F16) */
};

int
main (int argc, char **argv)
{
  Type types[] = { { "q4_0", 18.0 / 32, { 16, 8, 16, 8, 16 }, 18.0 / 32 },
                   { "awq", 0.5 + 2.5 / 128, { 16, 16, 16, 16, 16 }, 2.0 },
                   { "bf16", 2.0, { 16, 8, 16, 32, 16 }, 2.0 } };
  Type t = types[0];
  int reps = 30;
  bool ceiling = false;
  for (int i = 1; i < argc; i++)
    {
      if (!strcmp (argv[i], "--ceiling"))
        ceiling = true;
      if (!strcmp (argv[i], "--type") && i + 1 < argc)
        {
          i++;
          for (auto &x : types)
            if (!strcmp (argv[i], x.name))
              t = x;
        }
      else if (!strcmp (argv[i], "--reps") && i + 1 < argc)
        reps = atoi (argv[++i]);
    }
  const int L = 32, H = 4096, FF = 14336, Q = 4096, KV = 1024, VOCAB = 128256;
  struct M { int rows, cols; } mats[4] = { { Q + 2 * KV, H }, { H, Q }, { 2 * FF, H }, { H, FF } };
  auto bpw = [&] (int k) { return k == 4 ? t.head_bytes_per_weight : t.bytes_per_weight; };
  auto chunks_of = [&] (M m, int k) { return (long long) ((double) m.rows * m.cols * bpw (k) / 16.0); };
  auto per_block_of = [&] (M m, int k) { return (int) ((double) t.rows_per_block[k] * m.cols * bpw (k) / 16.0); };

  long long total = 0;
  for (int l = 0; l < L; l++)
    for (auto m : mats)
      total += chunks_of (m, 0);
  const M head = { VOCAB, H };
  total += chunks_of (head, 4);
  const double gb = total * 16.0 / 1e9;

  int4 *w;
  float *l2buf;
  unsigned *sink;
  CK (cudaMalloc (&w, (size_t) total * 16));
  CK (cudaMemset (w, 1, (size_t) total * 16));
  CK (cudaMalloc (&l2buf, 4 << 20));
  CK (cudaMemset (l2buf, 0, 4 << 20));
  CK (cudaMalloc (&sink, 8192 * 4));
  cudaStream_t s;
  CK (cudaStreamCreateWithFlags (&s, cudaStreamNonBlocking));
  cudaDeviceProp prop;
  CK (cudaGetDeviceProperties (&prop, 0));
  printf ("device %s, %d SMs; type %s: %.3f GB a step, %d layers\n", prop.name, prop.multiProcessorCount, t.name, gb,
          L);

  /* The nodes of one step. small kernels: attention = 32 blocks x 4 KB in 4
   * dependent rounds (128 keys of one head's K and V, max then sum), norm =
   * 1 block x 16 KB in 2 rounds (Σx², then scale), quantize = 16 blocks x 1 KB. */
  const Node attn = { 1, 0, 0, 0, 32, 1024, 4 }, norm = { 1, 0, 0, 0, 1, 4096, 2 }, quant = { 1, 0, 0, 0, 16, 256, 1 };
  /* 0: reads only; 1: + attention; 2: + attention, norms, quantize (norms only for bf16, whose GEMVs take the
   * norm themselves but whose structure here keeps the launches comparable); fold: attention inside q|k|v's launch */
  auto build = [&] (int smalls, bool fold = false) {
    std::vector<Node> v;
    long long off = 0;
    for (int l = 0; l < L; l++)
      for (int k = 0; k < 4; k++)
        {
          if (smalls >= 2 && (k == 0 || k == 2))
            v.push_back (norm);
          if (smalls >= 2 && k == 3 && strcmp (t.name, "bf16"))
            v.push_back (quant);
          const bool folded = fold && smalls >= 1 && k == 0;
          v.push_back ({ folded ? 2 : 0, off, chunks_of (mats[k], k), per_block_of (mats[k], k), folded ? 32 : 0, 0,
                         0 });
          off += chunks_of (mats[k], k);
          if (smalls >= 1 && k == 0 && !folded)
            v.push_back (attn);
        }
    if (smalls >= 2)
      v.push_back (norm);
    v.push_back ({ 0, off, chunks_of (head, 4), per_block_of (head, 4), 0, 0, 0 });
    return v;
  };

  cudaEvent_t e0, e1;
  CK (cudaEventCreate (&e0));
  CK (cudaEventCreate (&e1));
  /* median ms of @reps replays of @ge, after 3 unmeasured ones */
  /* ms of what @enqueue puts on s, by events around it */
  auto event_ms = [&] (auto &&enqueue) {
    CK (cudaEventRecord (e0, s));
    enqueue ();
    CK (cudaEventRecord (e1, s));
    CK (cudaEventSynchronize (e1));
    float x;
    CK (cudaEventElapsedTime (&x, e0, e1));
    return x;
  };
  auto replay_ms = [&] (cudaGraphExec_t ge) {
    for (int i = 0; i < 3; i++)
      CK (cudaGraphLaunch (ge, s));
    std::vector<float> ms;
    for (int r = 0; r < reps; r++)
      ms.push_back (event_ms ([&] { CK (cudaGraphLaunch (ge, s)); }));
    std::sort (ms.begin (), ms.end ());
    return ms[ms.size () / 2];
  };
  cudaStream_t s2;
  CK (cudaStreamCreateWithFlags (&s2, cudaStreamNonBlocking));
  cudaEvent_t ev_fork, ev_join;
  CK (cudaEventCreateWithFlags (&ev_fork, cudaEventDisableTiming));
  CK (cudaEventCreateWithFlags (&ev_join, cudaEventDisableTiming));
  CK (cudaMalloc (&l2_ctr, 8));
  /* l2_win_kb > 0: the L2 streamer on a branch beside the chain, that many KB
   * past the frontier, frontier mode l2_mode, l2_piece_kb a lane's prefetch */
  int l2_win_kb = 0, l2_piece_kb = 64;
  auto time_graph = [&] (const std::vector<Node> &nodes, bool pdl, int trig) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK (cudaStreamBeginCapture (s, cudaStreamCaptureModeGlobal));
    if (l2_win_kb > 0)
      {
        CK (cudaMemsetAsync (l2_ctr, 0, 8, s));
        CK (cudaEventRecord (ev_fork, s));
        CK (cudaStreamWaitEvent (s2, ev_fork, 0));
        l2_stream_kernel<<<1, 32, 0, s2>>> ((const char *) w, (unsigned long long) total * 16, l2_ctr,
                                            (unsigned long long) l2_win_kb << 10, (unsigned) l2_piece_kb << 10);
        CK (cudaGetLastError ());
        CK (cudaEventRecord (ev_join, s2));
      }
    for (const Node &n : nodes)
      launch (n, w, l2buf, sink, pdl, trig, s);
    if (l2_win_kb > 0)
      CK (cudaStreamWaitEvent (s, ev_join, 0));
    CK (cudaStreamEndCapture (s, &g));
    CK (cudaGraphInstantiate (&ge, g, 0));
    const float ms = replay_ms (ge);
    CK (cudaGraphExecDestroy (ge));
    CK (cudaGraphDestroy (g));
    return ms;
  };

  /* the ceiling: one kernel over all the bytes, 64 KB a block */
  std::vector<Node> one = { { 0, 0, total, 4096, 0, 0, 0 } };
  const float ceil_ms = time_graph (one, false, 0);
  printf ("one read kernel over the step's bytes: %.4f ms, %.0f GB/s\n", ceil_ms, gb / ceil_ms * 1e3);
  if (ceiling)
    {
      /* the read rate by block size, against the probe's pattern, each timed
       * by events around R back-to-back launches (no graph) and by a graph */
      for (int kb : { 4, 16, 64, 256, 1024 })
        {
          std::vector<Node> v = { { 0, 0, total, kb * 64, 0, 0, 0 } };
          const float ms = time_graph (v, false, 0);
          printf ("  contiguous %5d KB a block, 4 loads in flight: %.4f ms, %.0f GB/s\n", kb, ms, gb / ms * 1e3);
        }
      for (int mult : { 2, 4, 8 })
        for (int threads : { 256, 512 })
          {
            const int grid = prop.multiProcessorCount * mult;
            std::vector<float> ms;
            probe_kernel<<<grid, threads, 0, s>>> (w, (size_t) total, sink);
            for (int r = 0; r < reps; r++)
              {
                ms.push_back (event_ms ([&] { probe_kernel<<<grid, threads, 0, s>>> (w, (size_t) total, sink); }));
              }
            std::sort (ms.begin (), ms.end ());
            printf ("  the probe's grid-stride pattern, %d x %d threads: %.4f ms, %.0f GB/s (best %.0f)\n", grid, threads,
                    ms[ms.size () / 2], gb / ms[ms.size () / 2] * 1e3, gb / ms[0] * 1e3);
          }
      return 0;
    }
  CK (cudaFuncSetAttribute (read_pf_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 96 << 10));
  struct V { const char *name; int smalls; bool pdl; int trig; bool fold; int pf_kb = 0; } vars[] = {
    { "reads only (4 a layer + lm_head), PDL, trigger after wait", 0, true, 1, false },
    { "reads only, PDL, trigger after main loop", 0, true, 2, false },
    { "reads only, no PDL", 0, false, 0, false },
    { "reads + attention, PDL after wait", 1, true, 1, false },
    { "reads + attention folded into q|k|v's launch, PDL after wait", 1, true, 1, true },
    { "reads + attention + norms + quantize (the real structure), PDL after wait", 2, true, 1, false },
    { "the real structure with attention folded into q|k|v's launch", 2, true, 1, true },
    { "the real structure, PDL, trigger after main loop", 2, true, 2, false },
    { "the real structure, no PDL", 2, false, 0, false },
    { "reads only, PDL after wait, 16 KB a block into shared memory before the wait", 0, true, 1, false, 16 },
    { "reads only, PDL after wait, 32 KB a block into shared memory before the wait", 0, true, 1, false, 32 },
    { "reads only, PDL after wait, 64 KB a block into shared memory before the wait", 0, true, 1, false, 64 },
    { "the real structure, 16 KB a block into shared memory before the wait", 2, true, 1, false, 16 },
    { "the real structure, 32 KB a block into shared memory before the wait", 2, true, 1, false, 32 },
    { "the real structure, 64 KB a block into shared memory before the wait", 2, true, 1, false, 64 },
  };
  CK (cudaMalloc (&fold_ticket, 8));
  CK (cudaMemset (fold_ticket, 0, 8));
  CK (cudaMalloc (&fold_done, 8 * 4));
  CK (cudaMemset (fold_done, 0, 8 * 4));
  for (const V &v : vars)
    {
      const std::vector<Node> nodes = build (v.smalls, v.fold);
      read_pf_kb = v.pf_kb;
      const float ms = time_graph (nodes, v.pdl, v.trig);
      read_pf_kb = 0;
      printf ("%-78s %3zu launches: %.4f ms, %.0f GB/s, %.1f %% of the one kernel, %.1f tok/s\n", v.name,
              nodes.size (), ms, gb / ms * 1e3, 100.0 * ceil_ms / ms, 1e3 / ms);
    }

  /* Does a bulk L2 prefetch land? One 16 MB range read cold (L2 flushed by
   * reading 256 MB elsewhere), then after l2_stream_kernel prefetched it
   * whole (frontier pinned at 0: the counter zeroed, no reads counting). */
  const bool l2_rows = getenv ("HONE_CHAIN_L2") == NULL || atoi (getenv ("HONE_CHAIN_L2")) != 0;
  if (l2_rows && total * 16 > (320ll << 20))
    {
      const long long rc = (16ll << 20) / 16, fc = (256ll << 20) / 16;
      const std::vector<Node> flush = { { 0, rc, fc, 4096, 0, 0, 0 } }, rd = { { 0, 0, rc, 512, 0, 0, 0 } };
      for (int piece_kb : { 0, 4, 16, 64 })
        {
          std::vector<float> ms;
          for (int r = 0; r < 15; r++)
            {
              time_graph (flush, false, 0);
              if (piece_kb)
                {
                  CK (cudaMemsetAsync (l2_ctr, 0, 8, s));
                  l2_stream_kernel<<<1, 32, 0, s>>> ((const char *) w, (unsigned long long) rc * 16, l2_ctr,
                                                     (unsigned long long) rc * 16, (unsigned) piece_kb << 10);
                  CK (cudaStreamSynchronize (s));
                  usleep (200);   /* let the prefetches land */
                }
              ms.push_back (event_ms ([&] { launch (rd[0], w, l2buf, sink, false, 0, s); }));
            }
          std::sort (ms.begin (), ms.end ());
          char what[64] = "cold";
          if (piece_kb)
            snprintf (what, sizeof what, "after a %d KB-piece prefetch", piece_kb);
          printf ("L2 probe: 16 MB read %s: %.2f us (%.0f GB/s)\n", what, ms[ms.size () / 2] * 1e3,
                  (16 << 20) / (ms[ms.size () / 2] * 1e6));
        }
    }

  /* The L2 streamer beside the chain (l2_stream_kernel): the reads-only chain
   * and the real structure, each without it and then with it by frontier
   * (blocks started / ended) and window. */
  if (l2_rows)
    for (int smalls : { 0, 2 })
      {
        const std::vector<Node> nodes = build (smalls, false);
        const char *what = smalls ? "the real structure" : "reads only";
        struct LV { int mode, win_kb, piece_kb; } lvs[] = {
          { 0, 0, 64 }, { 1, 2048, 16 }, { 1, 4096, 16 }, { 1, 8192, 16 }, { 1, 16384, 16 }, { 1, 2048, 4 },
          { 1, 4096, 4 }, { 1, 8192, 4 }, { 1, 4096, 8 }, { 1, 8192, 8 }, { 1, 16384, 8 }, { 0, 0, 64 },
        };
        for (const LV &lv : lvs)
          {
            l2_mode = lv.mode;
            l2_win_kb = lv.mode ? lv.win_kb : 0;
            l2_piece_kb = lv.piece_kb;
            const float ms = time_graph (nodes, true, 1);
            char name[160];
            if (lv.mode)
              snprintf (name, sizeof name, "%s + L2 streamer, frontier %s, %d MB ahead, %d KB a prefetch", what,
                        lv.mode == 1 ? "started" : "ended", lv.win_kb >> 10, lv.piece_kb);
            else
              snprintf (name, sizeof name, "%s, PDL after wait (no streamer)", what);
            printf ("%-78s %3zu launches: %.4f ms, %.0f GB/s, %.1f %% of the one kernel, %.1f tok/s\n", name,
                    nodes.size (), ms, gb / ms * 1e3, 100.0 * ceil_ms / ms, 1e3 / ms);
          }
        l2_mode = 0;
        l2_win_kb = 0;
      }

  /* The persistent form: the whole step in one cooperative launch, grid
   * barriers between the phases (per layer q|k|v, attention, o, gate|up,
   * down; then the lm_head), the barrier counter zeroed by a memset node. */
  {
    auto phases_of = [&] (bool smalls) {
      std::vector<Phase> v;
      long long off = 0;
      for (int l = 0; l < L; l++)
        for (int k = 0; k < 4; k++)
          {
            v.push_back ({ off, chunks_of (mats[k], k), 0, smalls && (k == 0 || k == 2 || (k == 3 && strcmp (t.name, "bf16"))) });
            off += chunks_of (mats[k], k);
            if (smalls && k == 0)
              v.push_back ({ 0, 0, 32, 0 });
          }
      v.push_back ({ off, chunks_of (head, 4), 0, smalls });
      return v;
    };
    unsigned *bar;
    CK (cudaMalloc (&bar, 64));
    int per_sm = 0;
    CK (cudaOccupancyMaxActiveBlocksPerMultiprocessor (&per_sm, persist_kernel, 256, 0));
    struct PV { const char *name; bool smalls; int prefetch; int per; } pvs[] = {
      { "persistent, reads + barriers, 1 block an SM", false, 0, 1 },
      { "persistent, reads + barriers, 1 block an SM, next loads before the barrier", false, 1, 1 },
      { "persistent, reads + barriers, 2 blocks an SM, next loads before the barrier", false, 1, 2 },
      { "persistent, + attention phase + per-block norm/quantize, 1 block an SM, prefetch", true, 1, 1 },
      { "persistent, + attention phase + per-block norm/quantize, 2 blocks an SM, prefetch", true, 1, 2 },
      { "persistent, + attention phase + per-block norm/quantize, 2 blocks an SM, no prefetch", true, 0, 2 },
    };
    for (const PV &pv : pvs)
      {
        if (pv.per > per_sm)
          continue;
        const std::vector<Phase> ph = phases_of (pv.smalls);
        Phase *dph;
        CK (cudaMalloc (&dph, ph.size () * sizeof (Phase)));
        CK (cudaMemcpy (dph, ph.data (), ph.size () * sizeof (Phase), cudaMemcpyHostToDevice));
        const int n_ph = (int) ph.size ();
        const int pf = pv.prefetch;
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK (cudaStreamBeginCapture (s, cudaStreamCaptureModeGlobal));
        CK (cudaMemsetAsync (bar, 0, 64, s));
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeCooperative;
        at[0].val.cooperative = 1;
        cfg.gridDim = dim3 (prop.multiProcessorCount * pv.per);
        cfg.blockDim = dim3 (256);
        cfg.stream = s;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        CK (cudaLaunchKernelEx (&cfg, persist_kernel, (const Phase *) dph, n_ph, (const int4 *) w,
                                (const float *) l2buf, bar, pf, sink));
        CK (cudaStreamEndCapture (s, &g));
        CK (cudaGraphInstantiate (&ge, g, 0));
        const float m = replay_ms (ge);
        printf ("%-78s %3d phases: %.4f ms, %.0f GB/s, %.1f %% of the one kernel, %.1f tok/s\n", pv.name, n_ph, m,
                gb / m * 1e3, 100.0 * ceil_ms / m, 1e3 / m);
        CK (cudaGraphExecDestroy (ge));
        CK (cudaGraphDestroy (g));
        CK (cudaFree (dph));
      }
  }
  /* the small kernels alone, chained (what they cost on the critical path without reads) */
  {
    std::vector<Node> sm;
    for (int l = 0; l < L; l++)
      {
        sm.push_back (norm);
        sm.push_back (attn);
        sm.push_back (norm);
        if (strcmp (t.name, "bf16"))
          sm.push_back (quant);
      }
    const float ms = time_graph (sm, true, 1);
    printf ("%-78s %3zu launches: %.4f ms (%.2f us each)\n", "small kernels alone, chained on PDL", sm.size (), ms,
            1e3 * ms / sm.size ());
  }
  CK (cudaDeviceSynchronize ());
  return 0;
}
