/* hone-k-sample.cu — the engine's sampler chain on the device, so that only
 * the chosen token id goes back to the host.
 *
 * It reproduces src/core/hone-sampler.c step by step: penalties over the
 * recent window → temperature 0 ? argmax : (softmax(l/T) over the whole
 * vocabulary → top-k → top-p on the renormalised top-k mass → min-p →
 * renormalise → the first candidate (best first, ties to the lower id) whose
 * cumulative probability exceeds u). u is the uniform draw the host sampler
 * would have used for this step (its seeded PRNG), so a seed gives the same
 * draws on either side and the same token up to float rounding.
 *
 * With scratch (and a vocabulary ≤ 262,144) the chain runs over many blocks:
 * the many-block argmax below, then, when sampling with top-k, chain_many_kernel
 * (one block is bound by its own SM: 17 µs for the argmax of a 128,256-float
 * row, ~120 µs for the sampled chain, RESULTS-cuda.md "Decode, session 24");
 * penalties are applied per slice. Sampling without top-k stays on one block
 * (HONE_SAMPLE_CHAIN_MANY=1 sends it to chain_many_kernel as well). Without scratch, one block of 1024
 * threads over one logits row (≈ 7 passes over it, from L2): a max/argmax
 * pass, a pass for the softmax sum and the first radix digit, three more
 * radix passes (8 bits each) to find the K-th largest logit, a gather of
 * everything at or above it, a bitonic sort of those (≤ 512), then the cut
 * and the draw over the K best. K = top-k when set
 * (≤ HONE_K_SAMPLE_MAX_K); otherwise the best HONE_K_SAMPLE_MAX_K, which is
 * exact whenever the top-p nucleus or the min-p set ends inside them. When it
 * does not (or more than 512 logits tie at the threshold), out[0] = -1 and
 * the caller samples from the logits on the host instead.
 */
#include "hone-k-common.cuh"
#include "hone-k-logits.cuh"
#include <stdlib.h>
#include <string.h>
#include <type_traits>

#define SK_THREADS 1024
#define SK_CAND 512                       /* gathered candidates: K plus ties at the threshold */
#define SK_MAX_VOCAB (1 << 18)            /* penalty bitmap: one bit a token */

/* Float → uint32 whose unsigned order is the float order (NaN as −inf). */
static __device__ __forceinline__ uint32_t
fkey (float v)
{
  if (v != v)
    v = -INFINITY;
  const uint32_t u = __float_as_uint (v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

static __device__ __forceinline__ float
key_float (uint32_t k)
{
  return __uint_as_float ((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

struct SampleShared {
  uint32_t bits[SK_MAX_VOCAB / 32];       /* tokens that have a penalised value */
  int32_t wtok[HONE_K_SAMPLE_MAX_WINDOW]; /* window id at its first occurrence, else -1 */
  float wval[HONE_K_SAMPLE_MAX_WINDOW];   /* its penalised logit */
  unsigned long long cand[SK_CAND];       /* (key << 32) | ~id: descending = best first, lower id on ties */
  float prob[HONE_K_SAMPLE_MAX_K];
  unsigned int hist[256];
  unsigned long long kred[32];
  double dred[32];
  int n_cand;
  uint32_t prefix;
  int rem;
};

/* The logit of token i after the penalties. */
static __device__ __forceinline__ float
value_at (const float *l, int i, const SampleShared &sh, int nw)
{
  if (nw > 0 && ((sh.bits[i >> 5] >> (i & 31)) & 1u))
    for (int j = 0; j < nw; j++)
      if (sh.wtok[j] == i)
        return sh.wval[j];
  return l[i];
}

static __device__ unsigned long long
block_max_u64 (unsigned long long v, SampleShared &sh)
{
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    {
      const unsigned long long k = __shfl_xor_sync (0xffffffffu, v, o);
      v = k > v ? k : v;
    }
  __syncthreads ();
  if (lane == 0)
    sh.kred[warp] = v;
  __syncthreads ();
  v = sh.kred[0];
  for (int i = 1; i < SK_THREADS / 32; i++)
    v = sh.kred[i] > v ? sh.kred[i] : v;
  return v;
}

static __device__ double
block_sum_f64 (double v, SampleShared &sh)
{
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync (0xffffffffu, v, o);
  __syncthreads ();
  if (lane == 0)
    sh.dred[warp] = v;
  __syncthreads ();
  v = 0.0;
  for (int i = 0; i < SK_THREADS / 32; i++)
    v += sh.dred[i];
  return v;
}

/* Thread 0: the bucket of sh.hist that holds the rem-th largest key goes into
 * the prefix; rem becomes its rank inside that bucket. */
static __device__ void
radix_pick (SampleShared &sh, int shift)
{
  if (threadIdx.x == 0)
    {
      int rem = sh.rem;
      for (int b = 255; b >= 0; b--)
        {
          const int c = (int) sh.hist[b];
          if (c >= rem)
            {
              sh.prefix |= (uint32_t) b << shift;
              break;
            }
          rem -= c;
        }
      sh.rem = rem;
    }
}

/* Sort a[0..ns) best first (ns a power of two; empty slots hold 0, the
 * smallest key). Every thread of the block calls it. */
static __device__ void
bitonic_desc (unsigned long long *a, int ns)
{
  for (int size = 2; size <= ns; size <<= 1)
    for (int stride = size >> 1; stride > 0; stride >>= 1)
      {
        for (int i = threadIdx.x; i < ns / 2; i += blockDim.x)
          {
            const int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
            const bool desc = (lo & size) == 0;
            const unsigned long long x = a[lo], y = a[hi];
            if ((x < y) == desc)
              {
                a[lo] = y;
                a[hi] = x;
              }
          }
        __syncthreads ();
      }
}

/* The chain's end over the candidates cand[0..n_cand) (any order, the slots
 * up to the next power of two and to SK_CAND hold 0): sorted best first, the
 * K best's probabilities (sum: the softmax denominator), top-k mass, top-p,
 * min-p, the draw into out[0] (−1: the set reaches past the K best). Every
 * thread of the block calls it; prob holds HONE_K_SAMPLE_MAX_K floats. */
static __device__ void
chain_draw (unsigned long long *cand, int n_cand, float *prob, int K, bool topk_on, bool truncated, float max_l,
            double sum, const HoneKSampleParams &p, int32_t *out)
{
  const int tid = threadIdx.x;
  int ns = 2;
  while (ns < min (n_cand, SK_CAND))
    ns <<= 1;
  bitonic_desc (cand, ns);

  /* ---- probabilities of the K best, as the host computes them */
  const int n0 = min (K, n_cand);
  for (int i = tid; i < n0; i += blockDim.x)
    {
      const float v = key_float ((uint32_t) (cand[i] >> 32));
      const float e = v == v ? expf ((v - max_l) / p.temperature) : 0.0f;
      prob[i] = (float) ((double) e / sum);
    }
  __syncthreads ();
  if (tid != 0)
    return;

  /* ---- the cut and the draw (few candidates: one thread) */
  int n = n0;
  double mass = 1.0, cum = 0.0;
  bool cut = false;
  if (topk_on)
    {
      mass = 0.0;
      for (int i = 0; i < n; i++)
        mass += prob[i];
    }
  if (p.top_p < 1.0f)
    {
      for (int i = 0; i < n; i++)
        {
          cum += prob[i] / mass;
          if (cum >= p.top_p)
            {
              n = i + 1;
              cut = true;
              break;
            }
        }
    }
  if (p.min_p > 0.0f)
    {
      const float floor_p = prob[0] * p.min_p;
      int kept = 1;
      while (kept < n && prob[kept] >= floor_p)
        kept++;
      cut = cut || kept < n;
      n = kept;
    }
  if (truncated && !cut)
    {
      /* the set reaches past the K best: only the host sees all of it */
      out[0] = -1;
      return;
    }
  mass = 0.0;
  for (int i = 0; i < n; i++)
    mass += prob[i];
  cum = 0.0;
  for (int i = 0; i < n; i++)
    {
      cum += (float) (prob[i] / mass);
      if (p.u < cum)
        {
          out[0] = (int32_t) ~(uint32_t) (cand[i] & 0xffffffffu);
          return;
        }
    }
  out[0] = (int32_t) ~(uint32_t) (cand[n - 1] & 0xffffffffu);
}

__global__ void __launch_bounds__ (SK_THREADS)
sample_chain_kernel (const float *logits, int vocab, HoneKSampleParams p, const int32_t *window, int32_t *out)
{
  __shared__ SampleShared sh;
  const int tid = threadIdx.x;
  const bool pen = p.n_window > 0
                   && (p.repeat_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f);
  const int nw = pen ? p.n_window : 0;
  const float *l = logits;

  /* ---- penalties: each distinct window token once, with its count (the
   * window holds ≤ 1024 ids: one a thread) */
  if (nw > 0)
    {
      int32_t t = -1;
      bool keep = false;
      for (int i = tid; i < SK_MAX_VOCAB / 32; i += SK_THREADS)
        sh.bits[i] = 0;
      if (tid < nw)
        sh.wtok[tid] = t = window[tid];
      __syncthreads ();
      if (tid < nw && t >= 0 && t < vocab)
        {
          int count = 0, first = tid;
          for (int k = nw - 1; k >= 0; k--)
            if (sh.wtok[k] == t)
              {
                count++;
                first = k;
              }
          if (first == tid)
            {
              float v = l[t];
              v = v > 0.0f ? v / p.repeat_penalty : v * p.repeat_penalty;
              v -= (float) count * p.frequency_penalty + p.presence_penalty;
              sh.wval[tid] = v;
              atomicOr (&sh.bits[t >> 5], 1u << (t & 31));
              keep = true;
            }
        }
      __syncthreads ();
      if (tid < nw && !keep)
        sh.wtok[tid] = -1;
      __syncthreads ();
    }

  /* ---- pass 1: max and argmax (lowest id on ties) */
  unsigned long long best = 0;
  for (int i = tid; i < vocab; i += SK_THREADS)
    {
      const unsigned long long k = ((unsigned long long) fkey (value_at (l, i, sh, nw)) << 32) | (uint32_t) ~(uint32_t) i;
      best = k > best ? k : best;
    }
  best = block_max_u64 (best, sh);
  const int32_t argmax = (int32_t) ~(uint32_t) (best & 0xffffffffu);
  const float max_l = key_float ((uint32_t) (best >> 32));
  if (p.temperature <= 0.0f || !isfinite (max_l))
    {
      if (tid == 0)
        out[0] = argmax;
      return;
    }

  /* ---- the K to select; whether the candidates stand for the whole vocabulary */
  const bool topk_on = p.top_k > 0 && p.top_k < vocab;
  const int K = topk_on ? min (p.top_k, HONE_K_SAMPLE_MAX_K) : min (vocab, HONE_K_SAMPLE_MAX_K);
  const bool truncated = !topk_on && vocab > K;
  const bool select = K < vocab;

  /* ---- pass 2: softmax sum (as the host: float terms, double sum) and radix digit 3 */
  if (tid < 256)
    sh.hist[tid] = 0;
  if (tid == 0)
    {
      sh.prefix = 0;
      sh.rem = K;
      sh.n_cand = 0;
    }
  __syncthreads ();
  double sum = 0.0;
  for (int i = tid; i < vocab; i += SK_THREADS)
    {
      const float v = value_at (l, i, sh, nw);
      if (v == v)
        sum += (double) expf ((v - max_l) / p.temperature);
      if (select)
        atomicAdd (&sh.hist[fkey (v) >> 24], 1u);
    }
  sum = block_sum_f64 (sum, sh);   /* syncs: the histogram is complete */

  /* ---- radix select of the K-th largest key */
  uint32_t thr = 0;
  if (select)
    {
      radix_pick (sh, 24);
      for (int shift = 16; shift >= 0; shift -= 8)
        {
          __syncthreads ();
          const uint32_t prefix = sh.prefix, hi = ~0u << (shift + 8);
          if (tid < 256)
            sh.hist[tid] = 0;
          __syncthreads ();
          for (int i = tid; i < vocab; i += SK_THREADS)
            {
              const uint32_t k = fkey (value_at (l, i, sh, nw));
              if (((k ^ prefix) & hi) == 0)
                atomicAdd (&sh.hist[(k >> shift) & 255u], 1u);
            }
          __syncthreads ();
          radix_pick (sh, shift);
        }
      __syncthreads ();
      thr = sh.prefix;
      /* everything above the threshold plus every tie at it must fit */
      if ((K - sh.rem) + (int) sh.hist[thr & 255u] > SK_CAND)
        {
          if (tid == 0)
            out[0] = -1;
          return;
        }
    }

  /* ---- gather the keys ≥ threshold, sort them best first */
  for (int i = tid; i < SK_CAND; i += SK_THREADS)
    sh.cand[i] = 0;
  __syncthreads ();
  for (int i = tid; i < vocab; i += SK_THREADS)
    {
      const uint32_t k = fkey (value_at (l, i, sh, nw));
      if (k >= thr)
        {
          const int s = atomicAdd (&sh.n_cand, 1);
          if (s < SK_CAND)
            sh.cand[s] = ((unsigned long long) k << 32) | (uint32_t) ~(uint32_t) i;
        }
    }
  __syncthreads ();
  chain_draw (sh.cand, sh.n_cand, sh.prob, K, topk_on, truncated, max_l, sum, p, out);
}


static int sample_rows (const float *logits, int n_tok, int vocab, float temperature, uint64_t seed,
                        const int32_t *step, void *scratch, int32_t *out, int32_t *out2, cudaStream_t stream);
#define CM_THREADS 256
#define CM_SLICE 2048   /* vocab ≤ HONE_K_ARGMAX_BLOCKS · CM_SLICE */
#define CM_REG 32       /* the last block's candidates a thread holds in registers */
template <bool PEN>
__global__ void sample_many_kernel (const float *logits, int vocab, float temperature, uint64_t seed,
                                    const int32_t *step, unsigned long long *scratch, int32_t *out, int32_t *out2,
                                    const int32_t *window, HoneKSampleParams pp);
__global__ void chain_many_kernel (const float *logits, int vocab, HoneKSampleParams p, const int32_t *window,
                                   unsigned char *scratch, int32_t *out);

extern "C" int
hone_k_sample_chain (const float *logits, int vocab, const HoneKSampleParams *params, const int32_t *window,
                     int32_t *out, void *scratch, cudaStream_t stream)
{
  HoneKSampleParams p = *params;
  if (vocab < 1 || p.top_k < 0 || (p.top_k > HONE_K_SAMPLE_MAX_K && p.top_k < vocab) || p.n_window < 0
      || p.n_window > HONE_K_SAMPLE_MAX_WINDOW || (p.n_window > 0 && (!window || vocab > SK_MAX_VOCAB)))
    return (int) cudaErrorInvalidValue;
  const bool pen = p.n_window > 0
                   && (p.repeat_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f);
  const bool slices = vocab <= HONE_K_ARGMAX_BLOCKS * CM_SLICE;   /* every slice fits a block's bitmap / keys */
  /* Sampling without top-k stays on one block: there the last block of the many-block
   * chain merges 128 × 256 candidates, too many for its registers (405 µs against
   * the one block's 140; with top-k 40, 47 µs against 116: H200, vocab 128,256;
   * RESULTS-cuda.md "Decode, session 28"). */
  static int many_always = -1;   /* HONE_SAMPLE_CHAIN_MANY=1: no top-k over many blocks too (checks, measurement) */
  if (many_always < 0)
    many_always = getenv ("HONE_SAMPLE_CHAIN_MANY") && atoi (getenv ("HONE_SAMPLE_CHAIN_MANY")) == 1;
  const bool topk_on = many_always || (p.top_k > 0 && p.top_k < vocab);
  if (scratch && ((p.temperature <= 0.0f && !pen) || (slices && (p.temperature <= 0.0f || topk_on))))
    {
      /* the argmax over many blocks (NaN as −inf, lowest id on ties; penalties applied per slice); its best key
       * stays in the scratch for the chain */
      if (!pen)
        p.n_window = 0;
      const int r = pen ? hone_k_launch (sample_many_kernel<true>, dim3 (HONE_K_ARGMAX_BLOCKS, 1), dim3 (256), 0,
                                         stream, logits, vocab, 0.0f, (uint64_t) 0, (const int32_t *) NULL,
                                         (unsigned long long *) scratch, out, (int32_t *) NULL, window, p)
                        : sample_rows (logits, 1, vocab, 0.0f, 0, NULL, scratch, out, NULL, stream);
      if (r || p.temperature <= 0.0f)
        return r;
      chain_many_kernel<<<HONE_K_ARGMAX_BLOCKS, CM_THREADS, 0, stream>>> (logits, vocab, p, window,
                                                                            (unsigned char *) scratch, out);
      return (int) cudaGetLastError ();
    }
  sample_chain_kernel<<<1, SK_THREADS, 0, stream>>> (logits, vocab, p, window, out);
  return (int) cudaGetLastError ();
}

/* ---- the forward's sampler (hone_k_sample, hone_k_sample_feed): greedy or
 * Gumbel-max over each of n_tok rows ---------------------------------------- */

static __device__ __forceinline__ uint64_t
mix64 (uint64_t z)
{
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The key of logit v at index i: orderable float bits over the inverted
 * index (the max is the best value, the lowest index on ties), v perturbed
 * by Gumbel noise when temperature > 0 — argmax(v/T + G) is an exact draw
 * from softmax(v/T); NaN counts as −inf. */
static __device__ __forceinline__ unsigned long long
sample_key (float v, int i, float temperature, uint64_t s)
{
  if (v != v)
    v = -INFINITY;
  if (temperature > 0.f)
    {
      const uint64_t h = mix64 (s + (uint64_t) i * 0xd1b54a32d192ed03ull);
      const float u = ((float) (h >> 40) + 0.5f) * (1.0f / 16777216.0f);
      v = v / temperature - logf (-logf (u));
    }
  uint32_t b = __float_as_uint (v);
  b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return ((unsigned long long) b << 32) | (uint32_t) (~(uint32_t) i);
}

static __device__ __forceinline__ uint64_t
row_seed (uint64_t seed, const int32_t *step, int t)
{
  return mix64 (seed ^ mix64 ((uint64_t) (step ? *step : 0) * 0x9e3779b97f4a7c15ull + t));
}

static __device__ __forceinline__ unsigned long long
max_u64 (unsigned long long a, unsigned long long b)
{
  return a > b ? a : b;
}

/* The block's largest key (every thread gets it). */
static __device__ unsigned long long
block_best (unsigned long long b)
{
  __shared__ unsigned long long wbest[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    b = max_u64 (b, __shfl_xor_sync (0xffffffffu, b, o));
  if (lane == 0)
    wbest[warp] = b;
  __syncthreads ();
  b = lane < (int) (blockDim.x >> 5) ? wbest[lane] : 0;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    b = max_u64 (b, __shfl_xor_sync (0xffffffffu, b, o));
  return b;
}

static __device__ __forceinline__ void
put_id (unsigned long long best, int t, int32_t *out, int32_t *out2)
{
  const int32_t id = (int32_t) ~(uint32_t) (best & 0xffffffffu);
  out[t] = id;
  if (out2)
    out2[t] = id;
}

/* One block of 1024 threads a row: without scratch. */
__global__ void __launch_bounds__ (1024)
sample_kernel (const float *logits, int vocab, float temperature, uint64_t seed, const int32_t *step,
               int32_t *out, int32_t *out2)
{
  const int t = blockIdx.x;
  pdl_trigger ();
  pdl_wait ();
  const uint64_t s = row_seed (seed, step, t);
  unsigned long long b = 0;
  logits_for_each<8> (logits + (size_t) t * vocab, vocab, [&] (int i, float v, bool ok) {
    b = ok ? max_u64 (b, sample_key (v, i, temperature, s)) : b;
  });
  b = block_best (b);
  if (threadIdx.x == 0)
    put_id (b, t, out, out2);
}

/* The penalties of the window's tokens that fall in one block's slice
 * [lo, lo + n) (n ≤ CM_SLICE), as sample_chain_kernel applies them: each
 * distinct token once, with its count over the window. A bit a slice index
 * says "penalised"; its value is then looked up in the short list. */
struct SlicePen {
  uint32_t bits[CM_SLICE / 32];
  int16_t id[HONE_K_SAMPLE_MAX_WINDOW];   /* index in the slice */
  float val[HONE_K_SAMPLE_MAX_WINDOW];
  int n;
};

/* Every thread of the block calls it (two barriers). ls = the row + lo. */
static __device__ void
slice_pen_setup (SlicePen &sp, const float *ls, int lo, int n, const int32_t *window, const HoneKSampleParams &p)
{
  for (int j = threadIdx.x; j < CM_SLICE / 32; j += blockDim.x)
    sp.bits[j] = 0;
  if (threadIdx.x == 0)
    sp.n = 0;
  __syncthreads ();
  for (int j = threadIdx.x; j < p.n_window; j += blockDim.x)
    {
      const int32_t t = window[j];
      if (t < lo || t >= lo + n)
        continue;
      int count = 0, first = j;
      for (int k = p.n_window - 1; k >= 0; k--)
        if (window[k] == t)
          {
            count++;
            first = k;
          }
      if (first != j)
        continue;
      float v = ls[t - lo];
      v = v > 0.0f ? v / p.repeat_penalty : v * p.repeat_penalty;
      v -= (float) count * p.frequency_penalty + p.presence_penalty;
      const int s = atomicAdd (&sp.n, 1);
      sp.id[s] = (int16_t) (t - lo);
      sp.val[s] = v;
      atomicOr (&sp.bits[(t - lo) >> 5], 1u << ((t - lo) & 31));
    }
  __syncthreads ();
}

/* The value at slice index i (0 ≤ i < n) after the penalties. */
static __device__ __forceinline__ float
pen_value (const SlicePen &sp, int i, float v)
{
  if ((sp.bits[i >> 5] >> (i & 31)) & 1u)
    for (int s = 0; s < sp.n; s++)
      if (sp.id[s] == i)
        return sp.val[s];
  return v;
}

struct NoPen {};

/* HONE_K_ARGMAX_BLOCKS blocks a row (blockIdx.y), each over a contiguous
 * slice; each writes its best key to the row's scratch and takes a ticket,
 * and the block that takes the last one reduces the slices. The ticket wraps
 * to 0 as it is taken (atomicInc), ready for the next launch. */
template <bool PEN>
__global__ void __launch_bounds__ (256)
sample_many_kernel (const float *logits, int vocab, float temperature, uint64_t seed, const int32_t *step,
                    unsigned long long *scratch, int32_t *out, int32_t *out2, const int32_t *window,
                    HoneKSampleParams pp)
{
  __shared__ bool last;
  __shared__ typename std::conditional<PEN, SlicePen, NoPen>::type sp;
  const int t = blockIdx.y, nb = (int) gridDim.x;
  pdl_trigger ();
  pdl_wait ();
  unsigned long long *part = scratch + (size_t) t * HONE_K_SAMPLE_SCRATCH_ROW / 8;
  unsigned int *ticket = (unsigned int *) (part + HONE_K_ARGMAX_BLOCKS);
  const int per = ((vocab + nb - 1) / nb + 3) & ~3;
  const int lo = min (vocab, (int) blockIdx.x * per), hi = min (vocab, lo + per);
  const uint64_t s = row_seed (seed, step, t);
  if constexpr (PEN)
    slice_pen_setup (sp, logits + (size_t) t * vocab + lo, lo, hi - lo, window, pp);
  unsigned long long b = 0;
  logits_for_each<2> (logits + (size_t) t * vocab + lo, hi - lo, [&] (int i, float v, bool ok) {
    if constexpr (PEN)
      v = ok ? pen_value (sp, i, v) : v;
    b = ok ? max_u64 (b, sample_key (v, lo + i, temperature, s)) : b;
  });
  b = block_best (b);
  if (threadIdx.x == 0)
    {
      part[blockIdx.x] = b;
      __threadfence ();
      last = atomicInc (ticket, (unsigned int) nb - 1) == (unsigned int) nb - 1;
    }
  __syncthreads ();
  if (!last || threadIdx.x >= 32)
    return;
  __threadfence ();
  b = 0;
  for (int i = threadIdx.x; i < nb; i += 32)
    b = max_u64 (b, __ldcg (part + i));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    b = max_u64 (b, __shfl_xor_sync (0xffffffffu, b, o));
  if (threadIdx.x == 0)
    {
      put_id (b, t, out, out2);
      part[HONE_K_ARGMAX_BLOCKS + 1] = b;   /* the row's best key, for chain_many_kernel */
    }
}

/* ---- the chain over many blocks (temperature > 0, no penalties) -----------
 * After sample_many_kernel's argmax of the row (its best key left in the
 * scratch), HONE_K_ARGMAX_BLOCKS blocks each take a slice of ≤ CM_SLICE
 * values (penalised as in sample_chain_kernel when p.n_window > 0): their
 * softmax terms' sum, and their candidates — the slice sorted
 * best first, cut after its K-th value and every tie of it (every value at or
 * above the row's K-th largest is among them). The block taking the last
 * ticket finds the row's K-th largest value over the candidates (radix
 * select), gathers those at or above it and ends as the one-block chain does
 * (chain_draw). The same picks as sample_chain_kernel up to the order of the
 * softmax sum; a slice with more than SK_CAND candidates (a crowd of equal
 * values) sends the draw to the host (−1). */
struct ChainScratch {   /* after the argmax row's slots in the scratch */
  double psum[HONE_K_ARGMAX_BLOCKS];
  int cnt[HONE_K_ARGMAX_BLOCKS];
  unsigned int ticket, pad[3];
  unsigned long long cand[HONE_K_ARGMAX_BLOCKS][SK_CAND];
};

static_assert (HONE_K_SAMPLE_SCRATCH_ROW + sizeof (ChainScratch) <= HONE_K_SAMPLE_CHAIN_SCRATCH_BYTES
               && HONE_K_SAMPLE_SCRATCH_ROW % 8 == 0, "the chain's scratch");

struct ChainManyShared {
  unsigned long long keys[CM_SLICE];   /* the slice; in the last block, the gathered candidates */
  unsigned int hist[CM_THREADS / 32][256];
  float prob[HONE_K_SAMPLE_MAX_K];
  double dred[CM_THREADS / 32];
  int off[HONE_K_ARGMAX_BLOCKS + 1];
  int cnt_l[HONE_K_ARGMAX_BLOCKS];      /* the last block: each slice's candidate count and sum */
  double psum_l[HONE_K_ARGMAX_BLOCKS];
  SlicePen pen;
  int n_cand, cut, rem;
  uint32_t prefix;
  bool last;
};

__global__ void __launch_bounds__ (CM_THREADS)
chain_many_kernel (const float *logits, int vocab, HoneKSampleParams p, const int32_t *window,
                   unsigned char *scratch, int32_t *out)
{
  __shared__ ChainManyShared sh;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nb = (int) gridDim.x, blk = blockIdx.x;
  const unsigned long long best = __ldcg ((const unsigned long long *) scratch + HONE_K_ARGMAX_BLOCKS + 1);
  ChainScratch *cs = (ChainScratch *) (scratch + HONE_K_SAMPLE_SCRATCH_ROW);
  const float max_l = key_float ((uint32_t) (best >> 32));
  if (!isfinite (max_l))   /* as the one-block chain: the argmax */
    {
      if (blk == 0 && tid == 0)
        out[0] = (int32_t) ~(uint32_t) (best & 0xffffffffu);
      return;
    }
  const bool topk_on = p.top_k > 0 && p.top_k < vocab;
  const int K = topk_on ? min (p.top_k, HONE_K_SAMPLE_MAX_K) : min (vocab, HONE_K_SAMPLE_MAX_K);
  const bool truncated = !topk_on && vocab > K;

  /* ---- the slice: keys (value bits over the inverted id) and softmax terms */
  const int per = ((vocab + nb - 1) / nb + 3) & ~3;
  const int lo = min (vocab, blk * per), n = min (vocab, lo + per) - lo;
  for (int j = tid; j < CM_SLICE; j += CM_THREADS)
    sh.keys[j] = 0;
  if (p.n_window > 0)   /* penalties (the host passes n_window 0 without them) */
    slice_pen_setup (sh.pen, logits + lo, lo, n, window, p);
  __syncthreads ();
  double sum = 0.0;
  logits_for_each<2> (logits + lo, n, [&] (int i, float v, bool ok) {
    if (!ok)
      return;
    if (p.n_window > 0)
      v = pen_value (sh.pen, i, v);
    if (v == v)
      sum += (double) expf ((v - max_l) / p.temperature);
    sh.keys[i] = ((unsigned long long) fkey (v) << 32) | (uint32_t) ~(uint32_t) (lo + i);
  });
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    sum += __shfl_xor_sync (0xffffffffu, sum, o);
  if (lane == 0)
    sh.dred[warp] = sum;
  int ns = 2;
  while (ns < n)
    ns <<= 1;
  __syncthreads ();
  bitonic_desc (sh.keys, ns);
  /* the block's K best and every tie of the K-th value: up to the first key below it */
  const int k0 = min (K, n);
  if (tid == 0)
    sh.cut = n;
  __syncthreads ();
  if (k0 > 0)
    {
      const uint32_t thr = (uint32_t) (sh.keys[k0 - 1] >> 32);
      for (int j = k0 + tid; j < n; j += CM_THREADS)
        if ((uint32_t) (sh.keys[j] >> 32) < thr && (uint32_t) (sh.keys[j - 1] >> 32) >= thr)
          sh.cut = j;
    }
  __syncthreads ();
  const int c = k0 > 0 ? sh.cut : 0;
  if (c <= SK_CAND)
    for (int j = tid; j < c; j += CM_THREADS)
      cs->cand[blk][j] = sh.keys[j];
  if (tid == 0)
    {
      double s = 0.0;
      for (int w = 0; w < CM_THREADS / 32; w++)
        s += sh.dred[w];
      cs->psum[blk] = s;
      cs->cnt[blk] = c <= SK_CAND ? c : SK_CAND + 1;
    }
  __threadfence ();   /* every thread's candidate stores, before the ticket */
  __syncthreads ();
  if (tid == 0)
    {
      sh.last = atomicInc (&cs->ticket, (unsigned int) nb - 1) == (unsigned int) nb - 1;
    }
  __syncthreads ();
  if (!sh.last)
    return;
  __threadfence ();

  /* ---- the last block: where each slice's candidates start, and their sum.
   * The counts and sums come from L2 in one parallel load; thread 0 then adds
   * them up in slice order (the same bits as before). Session 27 measured this
   * block at ~100 of the chain's 106 µs (H200), most of it in serial L2 round
   * trips: this loop one slice at a time, and every radix pass reloading each
   * candidate through L2. */
  for (int b = tid; b < nb; b += CM_THREADS)
    {
      sh.cnt_l[b] = __ldcg (&cs->cnt[b]);
      sh.psum_l[b] = __ldcg (&cs->psum[b]);
    }
  __syncthreads ();
  if (tid == 0)
    {
      int o = 0;
      bool crowd = false;
      double s = 0.0;
      for (int b = 0; b < nb; b++)
        {
          const int cb = sh.cnt_l[b];
          crowd = crowd || cb > SK_CAND;
          sh.off[b] = o;
          o += cb > SK_CAND ? 0 : cb;
          s += sh.psum_l[b];
        }
      sh.off[nb] = o;
      sh.dred[0] = s;
      sh.n_cand = crowd ? -1 : 0;
      sh.prefix = 0;
      sh.rem = K;
    }
  __syncthreads ();
  if (sh.n_cand < 0)
    {
      if (tid == 0)
        out[0] = -1;
      return;
    }
  const double total = sh.dred[0];
  const int nu = sh.off[nb];
  /* candidate u of the union: the b with off[b] ≤ u < off[b + 1] */
  auto cand_at = [&] (int u) {
    int a = 0, z = nb;   /* off[a] ≤ u < off[z] */
    while (z - a > 1)
      {
        const int m = (a + z) >> 1;
        if (sh.off[m] <= u)
          a = m;
        else
          z = m;
      }
    return __ldcg (&cs->cand[a][u - sh.off[a]]);
  };

  /* The union's value bits in registers when it fits (top-k ≤ 64 without a
   * crowd of ties: 128 × 64 = CM_REG · CM_THREADS), loaded once, all in flight
   * together; otherwise every pass reads them from L2 again. */
  const bool in_regs = nu <= CM_REG * CM_THREADS;
  uint32_t hv[CM_REG];
  if (in_regs)
#pragma unroll
    for (int i = 0; i < CM_REG; i++)
      {
        const int u = tid + i * CM_THREADS;
        hv[i] = u < nu ? (uint32_t) (cand_at (u) >> 32) : 0u;
      }

  /* ---- the row's K-th largest value over the union: four 8-bit radix passes */
  for (int shift = 24; shift >= 0; shift -= 8)
    {
      for (int j = tid; j < (CM_THREADS / 32) * 256; j += CM_THREADS)
        (&sh.hist[0][0])[j] = 0;
      __syncthreads ();
      const uint32_t prefix = sh.prefix, hi = shift == 24 ? 0u : ~0u << (shift + 8);
      if (in_regs)
        {
#pragma unroll
          for (int i = 0; i < CM_REG; i++)
            if (tid + i * CM_THREADS < nu && ((hv[i] ^ prefix) & hi) == 0)
              atomicAdd (&sh.hist[warp][(hv[i] >> shift) & 255u], 1u);
        }
      else
        for (int u = tid; u < nu; u += CM_THREADS)
          {
            const uint32_t k = (uint32_t) (cand_at (u) >> 32);
            if (((k ^ prefix) & hi) == 0)
              atomicAdd (&sh.hist[warp][(k >> shift) & 255u], 1u);
          }
      __syncthreads ();
      /* the bucket holding the rem-th largest, best bucket first: each lane of
       * warp 0 sums 8 buckets (all warps' counts), a scan over the lanes, and
       * the lane whose range holds rem walks its 8 */
      if (warp == 0)
        {
          const int rem = sh.rem;
          __syncwarp ();   /* every lane has read rem before one lane writes it */
          int c8[8], s8 = 0;
#pragma unroll
          for (int j = 0; j < 8; j++)
            {
              const int b = 255 - (lane * 8 + j);
              int c = 0;
#pragma unroll
              for (int w = 0; w < CM_THREADS / 32; w++)
                c += (int) sh.hist[w][b];
              c8[j] = c;
              s8 += c;
            }
          int incl = s8;   /* buckets above and in this lane's range */
#pragma unroll
          for (int o = 1; o < 32; o <<= 1)
            {
              const int v = __shfl_up_sync (0xffffffffu, incl, o);
              if (lane >= o)
                incl += v;
            }
          const int excl = incl - s8;
          if (excl < rem && rem <= incl)
            {
              int r = rem - excl;
#pragma unroll
              for (int j = 0; j < 8; j++)
                if (r > 0)
                  {
                    if (c8[j] >= r)
                      {
                        sh.prefix = prefix | (uint32_t) (255 - (lane * 8 + j)) << shift;
                        sh.rem = r;
                        r = 0;
                      }
                    else
                      r -= c8[j];
                  }
            }
          else if (lane == 31 && incl < rem)   /* fewer than rem: as the serial walk, no bucket taken */
            sh.rem = rem - incl;
        }
      __syncthreads ();
    }
  const uint32_t thr = sh.prefix;

  /* ---- gather the candidates at or above it, then the one-block chain's end */
  for (int j = tid; j < SK_CAND; j += CM_THREADS)
    sh.keys[j] = 0;
  __syncthreads ();
  auto gather = [&] (unsigned long long k) {
    const int s = atomicAdd (&sh.n_cand, 1);
    if (s < SK_CAND)
      sh.keys[s] = k;
  };
  if (in_regs)
    {
#pragma unroll
      for (int i = 0; i < CM_REG; i++)
        if (tid + i * CM_THREADS < nu && hv[i] >= thr)
          gather (cand_at (tid + i * CM_THREADS));
    }
  else
    for (int u = tid; u < nu; u += CM_THREADS)
      {
        const unsigned long long k = cand_at (u);
        if ((uint32_t) (k >> 32) >= thr)
          gather (k);
      }
  __syncthreads ();
  if (sh.n_cand > SK_CAND)
    {
      if (tid == 0)
        out[0] = -1;
      return;
    }
  chain_draw (sh.keys, sh.n_cand, sh.prob, K, topk_on, truncated, max_l, total, p, out);
}

static int
sample_rows (const float *logits, int n_tok, int vocab, float temperature, uint64_t seed, const int32_t *step,
             void *scratch, int32_t *out, int32_t *out2, cudaStream_t stream)
{
  if (n_tok < 1 || vocab < 1)
    return (int) cudaErrorInvalidValue;
  static int one = -1;   /* HONE_SAMPLE_ONE_BLOCK=1: a block a row even with scratch (measurement only) */
  if (one < 0)
    one = getenv ("HONE_SAMPLE_ONE_BLOCK") && atoi (getenv ("HONE_SAMPLE_ONE_BLOCK")) == 1;
  if (scratch && !one)
    {
      HoneKSampleParams none;
      memset (&none, 0, sizeof none);
      return hone_k_launch (sample_many_kernel<false>, dim3 (HONE_K_ARGMAX_BLOCKS, n_tok), dim3 (256), 0, stream,
                            logits, vocab, temperature, seed, step, (unsigned long long *) scratch, out, out2,
                            (const int32_t *) NULL, none);
    }
  return hone_k_launch (sample_kernel, dim3 (n_tok), dim3 (1024), 0, stream, logits, vocab, temperature, seed, step,
                        out, out2);
}

extern "C" int
hone_k_sample (const float *logits, int n_tok, int vocab, float temperature,
               uint64_t seed, const int32_t *step, int32_t *out, void *scratch, cudaStream_t stream)
{
  return sample_rows (logits, n_tok, vocab, temperature, seed, step, scratch, out, NULL, stream);
}

/* Used by hone_k_forward: sample, feed the ids back as the next step's input. */
extern "C" int
hone_k_sample_feed (const float *logits, int n_tok, int vocab, float temperature, uint64_t seed,
                    const int32_t *step, int32_t *out, int32_t *feed, void *scratch, cudaStream_t stream)
{
  return sample_rows (logits, n_tok, vocab, temperature, seed, step, scratch, out, feed, stream);
}

/* The input of a one-token step started before the host has read the id it
 * runs on: tokens[0] = the id the previous step's sampler wrote (0 when it
 * wrote -1: that step's id then comes from the host and this step's result is
 * dropped by the caller), pos[0] = @pos. */
__global__ void
decode_feed_kernel (const int32_t *id, int32_t *tokens, int32_t *pos_out, int pos)
{
  const int32_t t = *id;
  tokens[0] = t < 0 ? 0 : t;
  pos_out[0] = pos;
}

extern "C" int
hone_k_decode_feed (const int32_t *id, int32_t *tokens, int32_t *pos_out, int pos, cudaStream_t stream)
{
  if (!id || !tokens || !pos_out || pos < 0)
    return (int) cudaErrorInvalidValue;
  decode_feed_kernel<<<1, 1, 0, stream>>> (id, tokens, pos_out, pos);
  return (int) cudaGetLastError ();
}
