/* hone-k-gemv-staged.cu — one-token decode GEMV that streams its weights
 * through shared memory, started before the previous kernel has finished.
 *
 * Why: every register-streamed GEMV (hone-k-gemv.cu) pays a fixed 3.5–4 µs
 * (launch, the ramp of bytes in flight, 1.3 waves of short blocks, the tail)
 * whatever its size (tests/bench/RESULTS-cuda.md, "Decode, session 2").
 * Here the grid is one wave (a block per SM), each block owns a contiguous,
 * balanced range of rows, and the block's weights (quants, then scales: two
 * contiguous byte ranges) go through a ring of S shared-memory slots by bulk
 * copies (hone-k-stage.cuh), one mbarrier a slot. A block triggers PDL at
 * entry, issues its first S copies, and only then waits for the previous
 * kernel: up to ~100 KB a SM are in flight while that kernel drains.
 *
 * After the wait the block prepares the activation in shared memory itself:
 * BF16/F16 x·g (the RMSNorm scale multiplies the row sums at the end), or
 * for quantized weights the RMSNorm and the int8 quantization per 32 values
 * (the arithmetic of hone_k_rmsnorm / hone_k_quantize; Σx² is summed in
 * another order, so a normalized input can round differently), or a
 * copy of an int8 activation another kernel wrote (decode attention's o
 * input). With one wave of ~132 blocks that costs ~1 µs a block, hidden
 * behind the ring filling; decode_step then needs no norm/quantize launches.
 *
 * A stage is T whole rows; warp w takes R rows of it and K slice w % KS
 * (T = R·8/KS); the warps' partial sums meet in shared memory, and after the
 * barrier that frees the slot for its refill, T threads finish the rows with
 * the epilogues of hone-k-gemv.cuh (STORE, ADD, SWIGLU, ROPE_KV, bias).
 *
 * A stage's row sums wait in shared memory; the epilogues run once at the
 * end, coalesced, so the loop touches no global memory.
 *
 * One token only (n_tok 2..8 keep the register-streamed kernels); sm_90
 * (bulk copies); columns a multiple of 256 (16-byte aligned rows of quants
 * and of scales). hone_k_gemv_staged_takes() says whether a GEMV qualifies.
 *
 * Status (tests/bench/RESULTS-cuda.md, "Decode, session 3"): correct (every
 * check against f64, memcheck, racecheck) but slower than the register-
 * streamed kernels, so off by default (HONE_GEMV_STAGED=1 or
 * hone_k_gemv_set_staged(1) turns it on). Measured: a block's bulk copies
 * complete one stage per ~0.68 µs whatever the stage's bytes (8 or 16 KB)
 * and the ring's depth (4 or 6 slots), as if one SM's copies were
 * serialized; only 32 KB stages reach the bandwidth (BF16 gate|up 55.9 µs,
 * lm_head 4.42 TB/s). The cp.async loader (every thread's 16-byte copies)
 * is the next thing to measure.
 */
#include "hone-k-gemv.cuh"
#include "hone-k-stage.cuh"
#include <stdlib.h>

#define ST_THREADS 256
#define ST_MAX_SLOTS 8
#define ST_XS_MAX_COLS 8192            /* BF16/F16: x in shared memory up to this many columns */
#define ST_SMEM_MAX (200 * 1024)           /* dynamic shared memory a block may take (sm_90 allows 227 KB with static) */

enum { XM_F32_SMEM = 0, XM_F32_GLOBAL = 1, XM_QUANTIZE = 2, XM_COPY_Q = 3 };

/* How a stage reaches shared memory: one bulk copy (per part: quants,
 * scales), bulk copies of at most 4 KB, or cp.async 16-byte copies issued by
 * every thread (LDGSTS, committed as one group a stage). Only LD_BULK is
 * verified on the device for every type (session 3, call 2); LD_CPASYNC in
 * this plain form has not run (see cp_async16 in hone-k-stage.cuh). */
enum { LD_BULK = 0, LD_BULK_SPLIT = 1, LD_CPASYNC = 2 };
#define ST_SPLIT_BYTES 4096

static __device__ __forceinline__ void
cp_async_commit (void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile ("cp.async.commit_group;" ::: "memory");
#endif
}

/* Wait until at most n (0..7) of this thread's groups are pending. */
static __device__ __forceinline__ void
cp_async_wait (int n)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  switch (n)
    {
    case 0: asm volatile ("cp.async.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile ("cp.async.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile ("cp.async.wait_group 2;" ::: "memory"); break;
    case 3: asm volatile ("cp.async.wait_group 3;" ::: "memory"); break;
    case 4: asm volatile ("cp.async.wait_group 4;" ::: "memory"); break;
    case 5: asm volatile ("cp.async.wait_group 5;" ::: "memory"); break;
    case 6: asm volatile ("cp.async.wait_group 6;" ::: "memory"); break;
    default: asm volatile ("cp.async.wait_group 7;" ::: "memory"); break;
    }
#endif
}

struct StagedArgs {
  GemvArgs a;
  int T, S;            /* rows a stage, slots in the ring */
  int rqb, rsb;        /* bytes of one row's quants / scales (multiples of 16) */
  int slot_bytes;      /* T·rqb + T·rsb */
  int act_off;         /* offset of the activation in dynamic shared memory */
  int units, unit;     /* rows are dealt to blocks in units of 1 (or 2: row pairs) */
  int xmode;           /* XM_* */
  int loader;          /* LD_* */
  int out_off;         /* offset of the block's finished rows (f32) in dynamic shared memory */
};

template <int WT, int KS, int R, bool XG>
__global__ void __launch_bounds__ (ST_THREADS, 3)
gemv_staged_kernel (const StagedArgs sa)
{
  extern __shared__ __align__ (128) unsigned char smem[];
  __shared__ __align__ (8) uint64_t bar[ST_MAX_SLOTS];
  __shared__ float red[2][16];
  __shared__ float part[8];
  __shared__ float nscale;
  constexpr bool F = (WT == HONE_K_BF16 || WT == HONE_K_F16);
  const GemvArgs &a = sa.a;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int T = sa.T, S = sa.S, cols = a.cols, nchunk = a.nchunk;

  /* this block's rows [r0, r1), in stages of T rows */
  const int u0 = (int) ((long long) blockIdx.x * sa.units / gridDim.x);
  const int u1 = (int) ((long long) (blockIdx.x + 1) * sa.units / gridDim.x);
  const int r0 = u0 * sa.unit, r1 = min (a.rows, u1 * sa.unit);
  const int nst = (r1 - r0 + T - 1) / T;

  /* let the next kernel become resident and start its own copies */
  pdl_trigger ();
  const uint64_t pol = stage_policy_evict_first ();
  const int loader = sa.loader;
  /* bulk loaders: thread 0 issues stage k; cp.async: every thread issues its 16-byte pieces */
  auto issue = [&] (int k) {
    const int slot = k % S, row = r0 + k * T, n = min (T, r1 - row);
    unsigned char *dst = smem + (size_t) slot * sa.slot_bytes;
    const uint32_t qb = (uint32_t) (n * sa.rqb), sb = (uint32_t) (n * sa.rsb);
    const char *qsrc = (const char *) a.q + (size_t) row * sa.rqb, *ssrc = (const char *) a.s + (size_t) row * sa.rsb;
    if (loader == LD_CPASYNC)
      {
        for (uint32_t o = tid * 16; o < qb; o += ST_THREADS * 16)
          cp_async16 (dst + o, qsrc + o);
        for (uint32_t o = tid * 16; o < sb; o += ST_THREADS * 16)
          cp_async16 (dst + T * sa.rqb + o, ssrc + o);
        return;
      }
    stage_bar_expect (&bar[slot], qb + sb);
    const uint32_t piece = loader == LD_BULK_SPLIT ? ST_SPLIT_BYTES : qb;
    for (uint32_t o = 0; o < qb; o += piece)
      stage_copy (dst + o, qsrc + o, min (piece, qb - o), &bar[slot], pol);
    if (sb)
      stage_copy (dst + T * sa.rqb, ssrc, sb, &bar[slot], pol);
  };
  if (loader == LD_CPASYNC)
    for (int k = 0; k < S; k++)
      {
        if (k < nst)
          issue (k);
        cp_async_commit ();   /* one group a stage, empty ones included: the counts stay uniform */
      }
  else if (tid == 0)
    {
      for (int i = 0; i < S; i++)
        stage_bar_init (&bar[i]);
      stage_bar_fence_init ();
      for (int k = 0; k < S && k < nst; k++)
        issue (k);
    }
  pdl_wait ();

  /* ---- the activation, in shared memory (the weights stream meanwhile) ----
   * Every thread's loads of a batch are issued before any is used: a serial
   * L2 round trip per value is what made session 2's prologue cost 10+ µs. */
  unsigned char *act = smem + sa.act_off;
  float4 *xA = (float4 *) act, *xB = xA + (cols >> 3);         /* F: chunk c's x = xA[c] | xB[c] */
  int8_t *xq = (int8_t *) act;                                 /* Q8_0: [cols]; Q4: lo[cols/2] | hi[cols/2] */
  float2 *xds = (float2 *) (act + cols);                       /* quantized: (d, d·Σq) per 32 */
  const float4 *x4 = (const float4 *) a.x, *g4 = (const float4 *) a.norm_g;
  const int nf = cols >> 2;                                    /* float4s of x: a multiple of 64 */
  if ((F && !XG) || sa.xmode == XM_QUANTIZE)
    {
      /* Σx² (with a norm) and, for BF16/F16, x·g into shared memory */
      float ss = 0.f;
      if (F || a.norm_g)
        for (int f0 = 0; f0 < nf; f0 += 4 * ST_THREADS)
          {
            float4 v[4], g[4];
#pragma unroll
            for (int j = 0; j < 4; j++)
              {
                const int f = f0 + j * ST_THREADS + tid;
                v[j] = f < nf ? x4[f] : make_float4 (0.f, 0.f, 0.f, 0.f);
                g[j] = f < nf && a.norm_g ? g4[f] : make_float4 (1.f, 1.f, 1.f, 1.f);
              }
#pragma unroll
            for (int j = 0; j < 4; j++)
              {
                const int f = f0 + j * ST_THREADS + tid;
                ss += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
                if (F && f < nf)
                  ((f & 1) ? xB : xA)[f >> 1] = make_float4 (v[j].x * g[j].x, v[j].y * g[j].y, v[j].z * g[j].z,
                                                             v[j].w * g[j].w);
              }
          }
      float scale = 1.f;
      if (a.norm_g)
        {
          ss = warp_sum (ss);
          if (lane == 0)
            part[warp] = ss;
          __syncthreads ();
          ss = 0.f;
#pragma unroll
          for (int i = 0; i < 8; i++)
            ss += part[i];
          scale = rsqrtf (ss / (float) cols + a.eps);
          if (tid == 0)
            nscale = scale;
        }
      if (!F)
        /* quantize: 8 lanes × 4 values a 32-block, quant32_store's arithmetic
         * (d = absmax/127, q = rint(v/d), (d, d·Σq)): the same bits as the
         * norm/quantize launches given the same inputs (the Σq are exact) */
        for (int f0 = 0; f0 < nf; f0 += 4 * ST_THREADS)
          {
            float4 v[4];
#pragma unroll
            for (int j = 0; j < 4; j++)
              {
                const int f = f0 + j * ST_THREADS + tid;
                v[j] = f < nf ? x4[f] : make_float4 (0.f, 0.f, 0.f, 0.f);
              }
#pragma unroll
            for (int j = 0; j < 4; j++)
              {
                const int f = f0 + j * ST_THREADS + tid;
                if (f0 + j * ST_THREADS + (tid & ~31) >= nf)   /* warp-uniform */
                  break;
                float4 u = v[j];
                if (a.norm_g)
                  {
                    const float4 g = g4[f];
                    u = make_float4 (u.x * scale * g.x, u.y * scale * g.y, u.z * scale * g.z, u.w * scale * g.w);
                  }
                float amax = fmaxf (fmaxf (fabsf (u.x), fabsf (u.y)), fmaxf (fabsf (u.z), fabsf (u.w)));
#pragma unroll
                for (int m = 1; m < 8; m <<= 1)
                  amax = fmaxf (amax, __shfl_xor_sync (0xffffffffu, amax, m));
                const float d = amax / 127.f;
                const int q0 = d > 0.f ? __float2int_rn (u.x / d) : 0, q1 = d > 0.f ? __float2int_rn (u.y / d) : 0;
                const int q2 = d > 0.f ? __float2int_rn (u.z / d) : 0, q3 = d > 0.f ? __float2int_rn (u.w / d) : 0;
                float sum = (float) (q0 + q1 + q2 + q3);
#pragma unroll
                for (int m = 1; m < 8; m <<= 1)
                  sum += __shfl_xor_sync (0xffffffffu, sum, m);
                const int b = f >> 3, p = (f & 7) * 4;             /* 32-block, position in it */
                int8_t *dst = WT == HONE_K_Q8_0 ? xq + 4 * f
                              : p < 16 ? xq + b * 16 + p : xq + (cols >> 1) + b * 16 + p - 16;
                *(uint32_t *) dst = (uint32_t) (q0 & 0xff) | ((uint32_t) (q1 & 0xff) << 8)
                                    | ((uint32_t) (q2 & 0xff) << 16) | ((uint32_t) (q3 & 0xff) << 24);
                if ((f & 7) == 0)
                  xds[b] = make_float2 (d, d * sum);
              }
          }
    }
  else if (!F)   /* XM_COPY_Q: another kernel quantized it */
    {
      const int4 *src = (const int4 *) a.xq;
      for (int p0 = 0; p0 < (cols >> 4); p0 += 4 * ST_THREADS)
        {
          int4 v[4];
#pragma unroll
          for (int j = 0; j < 4; j++)
            {
              const int p = p0 + j * ST_THREADS + tid;
              v[j] = p < (cols >> 4) ? src[p] : make_int4 (0, 0, 0, 0);
            }
#pragma unroll
          for (int j = 0; j < 4; j++)
            {
              const int p = p0 + j * ST_THREADS + tid;
              if (p < (cols >> 4))
                *(int4 *) (WT == HONE_K_Q8_0 ? xq + p * 16 : xq + ((p & 1) ? (cols >> 1) : 0) + (p >> 1) * 16) = v[j];
            }
        }
      for (int i = tid; i < (cols >> 5); i += ST_THREADS)
        xds[i] = a.xds[i];
    }
  if (loader == LD_CPASYNC)
    cp_async_wait (S - 1);   /* stage 0 has landed (this thread's part; the barrier makes it everyone's) */
  __syncthreads ();

  /* ---- the stream ---- */
  float *outb = (float *) (smem + sa.out_off);
  const int ks = warp % KS, i0 = (warp / KS) * R;   /* this warp's K slice and first row in a stage */
  for (int k = 0; k < nst; k++)
    {
      const int slot = k % S, row0 = r0 + k * T, n = min (T, r1 - row0);
      if (loader != LD_CPASYNC)
        stage_bar_wait (&bar[slot], (uint32_t) ((k / S) & 1));
      const unsigned char *qs = smem + (size_t) slot * sa.slot_bytes, *ss = qs + T * sa.rqb;
      if (i0 < n)   /* warp-uniform: a short last stage leaves warps idle */
        {
          float acc[R];
#pragma unroll
          for (int r = 0; r < R; r++)
            acc[r] = 0.f;
#pragma unroll 4
          for (int c = ks * 32 + lane; c < nchunk; c += 32 * KS)
            {
              if (F)
                {
                  float4 x0, x1;
                  if (XG)
                    {
                      x0 = ((const float4 *) a.x)[2 * c];
                      x1 = ((const float4 *) a.x)[2 * c + 1];
                    }
                  else
                    {
                      x0 = xA[c];
                      x1 = xB[c];
                    }
#pragma unroll
                  for (int r = 0; r < R; r++)
                    acc[r] = dot_chunk_f<WT> (*(const int4 *) (qs + (size_t) (i0 + r) * sa.rqb + c * 16), x0, x1,
                                              acc[r]);
                }
              else if (WT == HONE_K_Q8_0)
                {
                  const int4 xv = *(const int4 *) (xq + c * 16);
                  const float xd = xds[c >> 1].x;
#pragma unroll
                  for (int r = 0; r < R; r++)
                    {
                      const uint32_t sc = ((const uint16_t *) (ss + (i0 + r) * sa.rsb))[c >> 1];
                      acc[r] = dot_chunk_q8 (*(const int4 *) (qs + (i0 + r) * sa.rqb + c * 16), sc, xv, xd, acc[r]);
                    }
                }
              else
                {
                  const int4 xa = ((const int4 *) xq)[c], xb = ((const int4 *) (xq + (cols >> 1)))[c];
                  const float2 xd = xds[c];
#pragma unroll
                  for (int r = 0; r < R; r++)
                    {
                      const uint32_t sc = WT == HONE_K_Q4_0 ? ((const uint16_t *) (ss + (i0 + r) * sa.rsb))[c]
                                                            : ((const uint32_t *) (ss + (i0 + r) * sa.rsb))[c];
                      acc[r] = dot_chunk_q4<WT> (*(const int4 *) (qs + (i0 + r) * sa.rqb + c * 16), sc, xa, xb, xd,
                                                 acc[r]);
                    }
                }
            }
#pragma unroll
          for (int r = 0; r < R; r++)
            {
              const float v = warp_sum (acc[r]);
              if (lane == 0)
                red[k & 1][(i0 + r) * KS + ks] = v;
            }
        }
      /* every read of this slot is done: refill it (cp.async: first this
       * thread's part of the next stage must have landed, the barrier then
       * makes every part visible) */
      if (loader == LD_CPASYNC)
        cp_async_wait (S - 2);
      __syncthreads ();
      if (loader == LD_CPASYNC)
        {
          if (k + S < nst)
            issue (k + S);
          cp_async_commit ();
        }
      else if (tid == 0 && k + S < nst)
        issue (k + S);
      /* the stage's rows into the block's output buffer (red[k & 1] is
       * rewritten only after the next barrier); no global access in the loop */
      if (tid < n)
        {
          float v = 0.f;
#pragma unroll
          for (int j = 0; j < KS; j++)
            v += red[k & 1][tid * KS + j];
          outb[row0 - r0 + tid] = F && a.norm_g ? v * nscale : v;
        }
    }

  /* the epilogues, once, coalesced */
  __syncthreads ();
  if (a.epi == HONE_K_EPI_SWIGLU || a.epi == HONE_K_EPI_ROPE_KV)
    for (int j = tid; 2 * j < r1 - r0; j += ST_THREADS)
      epi_pair (a, r0 + 2 * j, 0, outb[2 * j], outb[2 * j + 1]);
  else
    for (int j = tid; j < r1 - r0; j += ST_THREADS)
      epi_store (a, r0 + j, 0, outb[j]);
}

/* ---- host side ------------------------------------------------------------- */

/* Off by default: measured slower than the register-streamed kernels (whole
 * step BF16 5.72 ms against 4.46 at its best ring, Q4_0 2.54 against 1.95;
 * tests/bench/RESULTS-cuda.md, "Decode, session 3"). */
static int staged_mode = -1;    /* -1: read HONE_GEMV_STAGED (default off) */
static int loader_mode = -1;    /* -1: read HONE_GEMV_STAGED_LOADER (LD_*, default LD_DEFAULT) */
#define LD_DEFAULT LD_BULK
#define RING_KB_DEFAULT 128     /* the fastest ring measured (32 KB stages for BF16 rows of 4096) */
static int stage_kb = 0;        /* 0: read HONE_GEMV_STAGE_KB (default 96) */
static unsigned staged_runs;

extern "C" void
hone_k_gemv_set_staged (int on)
{
  staged_mode = on < 0 ? -1 : (on ? 1 : 0);
}

void
hone_k_gemv_set_stage_kb (int kb)
{
  stage_kb = kb;
}

void
hone_k_gemv_set_stage_loader (int loader)
{
  loader_mode = loader;
}

unsigned
hone_k_gemv_staged_runs (void)
{
  return staged_runs;
}

static int
ring_bytes (void)
{
  if (stage_kb <= 0)
    {
      const char *e = getenv ("HONE_GEMV_STAGE_KB");
      stage_kb = e && *e ? atoi (e) : RING_KB_DEFAULT;
      if (stage_kb < 16 || stage_kb > 192)
        stage_kb = RING_KB_DEFAULT;
    }
  return stage_kb * 1024;
}

static int
sm_count (void)
{
  static int sms;
  if (!sms)
    {
      int dev = 0, n = 0;
      if (cudaGetDevice (&dev) != cudaSuccess
          || cudaDeviceGetAttribute (&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1)
        return 1;   /* asked again next time */
      sms = n;
    }
  return sms;
}

/* The launch plan of op, or false when the staged kernel does not take it. */
static bool
plan (const HoneKGemvOp *op, StagedArgs *sa, bool *xg)
{
  if (staged_mode < 0)
    {
      const char *e = getenv ("HONE_GEMV_STAGED");
      staged_mode = e && *e ? (e[0] != '0') : 0;
    }
  const HoneKMatrix *w = op->w;
  if (!staged_mode || !hone_k_stage_supported () || op->n_tok != 1 || w->rows < 1 || w->cols < 256
      || (w->cols & 255) || ((uintptr_t) w->q & 15) || ((uintptr_t) w->s & 15))
    return false;
  const int t = w->type, cols = w->cols;
  const bool f = t == HONE_K_BF16 || t == HONE_K_F16;
  if (!f && t != HONE_K_Q8_0 && t != HONE_K_Q4_0 && t != HONE_K_Q4_1)
    return false;
  const bool pair = op->epilogue == HONE_K_EPI_SWIGLU || op->epilogue == HONE_K_EPI_ROPE_KV;
  if (pair && (w->rows & 1))
    return false;
  if (op->epilogue == HONE_K_EPI_ADD && !op->res)
    return false;
  memset (sa, 0, sizeof *sa);
  int act = 0;
  *xg = false;
  if (f)
    {
      if (!op->x)
        return false;
      *xg = cols > ST_XS_MAX_COLS;
      if (*xg && op->norm_g)
        return false;
      sa->xmode = *xg ? XM_F32_GLOBAL : XM_F32_SMEM;
      act = *xg ? 0 : cols * 4;
      sa->rqb = cols * 2;
    }
  else
    {
      if (op->xq && !op->norm_g)
        sa->xmode = XM_COPY_Q;
      else if (op->x)
        sa->xmode = XM_QUANTIZE;
      else
        return false;
      act = cols + cols / 32 * 8;
      sa->rqb = t == HONE_K_Q8_0 ? cols : cols / 2;
      sa->rsb = cols / 32 * (t == HONE_K_Q4_1 ? 4 : 2);
    }
  /* T: the most rows (1..16) whose slot is at most a quarter of the ring */
  const int ring = ring_bytes (), row_bytes = sa->rqb + sa->rsb;
  int T = 16;
  while (T > 1 && T * row_bytes > ring / 4)
    T >>= 1;
  if (pair && T < 2)
    T = 2;
  sa->T = T;
  sa->slot_bytes = T * row_bytes;
  sa->S = ring / sa->slot_bytes;
  if (sa->S > ST_MAX_SLOTS)
    sa->S = ST_MAX_SLOTS;
  if (sa->S < 2)
    return false;
  sa->act_off = sa->S * sa->slot_bytes;
  sa->unit = pair ? 2 : 1;
  sa->units = (w->rows + sa->unit - 1) / sa->unit;
  /* a block's finished rows wait in shared memory for the epilogue */
  const int grid = sa->units < sm_count () ? sa->units : sm_count ();
  const int rows_max = ((sa->units + grid - 1) / grid) * sa->unit;
  sa->out_off = (sa->act_off + act + 15) & ~15;
  if (sa->out_off + rows_max * 4 > ST_SMEM_MAX)
    return false;
  if (loader_mode < 0)
    {
      const char *e = getenv ("HONE_GEMV_STAGED_LOADER");
      loader_mode = e && *e ? atoi (e) : LD_DEFAULT;
      if (loader_mode < 0 || loader_mode > LD_CPASYNC)
        loader_mode = LD_DEFAULT;
    }
  sa->loader = loader_mode;
  return true;
}

bool
hone_k_gemv_staged_takes (const HoneKGemvOp *op)
{
  StagedArgs sa;
  bool xg;
  return plan (op, &sa, &xg);
}

template <int WT, int KS, int R, bool XG>
static int
launch_k (const StagedArgs &sa, int grid, size_t smem, cudaStream_t stream)
{
  /* the opt-in above 48 KB, raised to what this launch needs (static + dynamic must fit 227 KB) */
  static size_t raised;
  if (smem > raised)
    {
      const cudaError_t e = cudaFuncSetAttribute (gemv_staged_kernel<WT, KS, R, XG>,
                                                  cudaFuncAttributeMaxDynamicSharedMemorySize, (int) smem);
      if (e != cudaSuccess)
        return (int) e;
      raised = smem;
    }
  return hone_k_launch (gemv_staged_kernel<WT, KS, R, XG>, dim3 (grid), dim3 (ST_THREADS), smem, stream, sa);
}

template <int WT, bool XG>
static int
launch_t (const StagedArgs &sa, int grid, size_t smem, cudaStream_t stream)
{
  switch (sa.T)
    {
    case 1: return launch_k<WT, 8, 1, XG> (sa, grid, smem, stream);
    case 2: return launch_k<WT, 4, 1, XG> (sa, grid, smem, stream);
    case 4: return launch_k<WT, 2, 1, XG> (sa, grid, smem, stream);
    case 8: return launch_k<WT, 1, 1, XG> (sa, grid, smem, stream);
    default: return launch_k<WT, 1, 2, XG> (sa, grid, smem, stream);
    }
}

int
hone_k_gemv_staged (const HoneKGemvOp *op, cudaStream_t stream)
{
  StagedArgs sa;
  bool xg;
  if (!plan (op, &sa, &xg))
    return (int) cudaErrorInvalidValue;
  const HoneKMatrix *w = op->w;
  GemvArgs &a = sa.a;
  a.q = (const int4 *) w->q;
  a.s = w->s;
  a.rows = w->rows;
  a.cols = w->cols;
  a.nchunk = w->cols / (w->type == HONE_K_BF16 || w->type == HONE_K_F16 ? 8 : w->type == HONE_K_Q8_0 ? 16 : 32);
  a.x = op->x;
  a.xq = op->xq ? op->xq->q : NULL;
  a.xds = op->xq ? op->xq->ds : NULL;
  a.n_tok = 1;
  a.norm_g = op->norm_g;
  a.eps = op->eps;
  epi_args_from_op (a, op);
  const int grid = sa.units < sm_count () ? sa.units : sm_count ();
  staged_runs++;
  const size_t smem = (size_t) sa.out_off + (size_t) ((sa.units + grid - 1) / grid) * sa.unit * 4;
  switch (w->type)
    {
    case HONE_K_BF16: return xg ? launch_t<HONE_K_BF16, true> (sa, grid, smem, stream)
                                : launch_t<HONE_K_BF16, false> (sa, grid, smem, stream);
    case HONE_K_F16: return xg ? launch_t<HONE_K_F16, true> (sa, grid, smem, stream)
                               : launch_t<HONE_K_F16, false> (sa, grid, smem, stream);
    case HONE_K_Q8_0: return launch_t<HONE_K_Q8_0, false> (sa, grid, smem, stream);
    case HONE_K_Q4_0: return launch_t<HONE_K_Q4_0, false> (sa, grid, smem, stream);
    default: return launch_t<HONE_K_Q4_1, false> (sa, grid, smem, stream);
    }
}
