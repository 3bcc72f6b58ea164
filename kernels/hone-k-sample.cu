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
 * With scratch (and a vocabulary ≤ 262,144) the chain runs over many blocks
 * (one block is bound by its own SM: 17 µs for the argmax of a 128,256-float
 * row, ~120 µs for the sampled chain, RESULTS-cuda.md "Decode, session 24"):
 * greedy is the many-block argmax below, sampling chain_tree_kernel;
 * penalties are applied per slice. Without scratch, one block of 1024
 * threads over one logits row (≈ 7 passes over it, from L2): a max/argmax
 * pass, a pass for the softmax sum and the first radix digit, three more
 * radix passes (8 bits each) to find the K-th largest logit, a gather of
 * everything at or above it, a bitonic sort of those (≤ 512), then the cut
 * and the draw over the K best. K = top-k when set
 * (≤ HONE_K_SAMPLE_MAX_K); otherwise the best HONE_K_SAMPLE_MAX_K, which is
 * exact whenever the top-p nucleus or the min-p set ends inside them. When it
 * does not (or more than 512 logits tie at the threshold), out[0] = -1 and
 * the caller samples from the logits on the host instead. The many-block
 * chain instead walks the whole row then (chain_walk_kernel, session 41):
 * −1 only with penalties.
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
template <bool PEN>
__global__ void sample_many_kernel (const float *logits, int vocab, float temperature, uint64_t seed,
                                    const int32_t *step, unsigned long long *scratch, int32_t *out, int32_t *out2,
                                    const int32_t *window, HoneKSampleParams pp);
__global__ void chain_tree_kernel (const float *logits, int vocab, HoneKSampleParams p, const int32_t *window,
                                   unsigned char *scratch, int32_t *out, int probe);
__global__ void chain_walk_kernel (const float *logits, int vocab, HoneKSampleParams p, unsigned char *scratch,
                                   int32_t *out, int stage);
static int walk_launch (const float *logits, int vocab, const HoneKSampleParams &p, void *scratch, int32_t *out,
                        int stage, cudaStream_t stream);

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
  if (scratch && slices && p.temperature > 0.0f)
    {
      /* sampling: chain_tree_kernel, one launch (penalties applied per slice) */
      if (!pen)
        p.n_window = 0;
      static int probe = -1;   /* HONE_CHAIN_TREE_PROBE, measurement only (the id is then wrong): the kernel stops
                                  after the slices' load (1), their sort (2), the groups' merges (3), the last merge (4) */
      if (probe < 0)
        probe = getenv ("HONE_CHAIN_TREE_PROBE") ? atoi (getenv ("HONE_CHAIN_TREE_PROBE")) : 0;
      chain_tree_kernel<<<HONE_K_ARGMAX_BLOCKS, CM_THREADS, 0, stream>>> (logits, vocab, p, window,
                                                                            (unsigned char *) scratch, out, probe);
      /* the walk past the 256 best, where it can be needed: its launches return at once when the tree decided */
      if (!(p.top_k > 0 && p.top_k < vocab) && vocab > HONE_K_SAMPLE_MAX_K && p.n_window == 0 && !p.past_k_on_host
          && probe == 0)
        for (int st = 1; st <= (p.top_p < 1.0f ? 5 : 3); st++)
          {
            const int e = walk_launch (logits, vocab, p, scratch, out, st, stream);
            if (e != 0)
              return e;
          }
      return (int) cudaGetLastError ();
    }
  if (scratch && p.temperature <= 0.0f && (!pen || slices))
    {
      /* greedy: the argmax over many blocks (NaN as −inf, lowest id on ties; penalties applied per slice) */
      if (!pen)
        p.n_window = 0;
      return pen ? hone_k_launch (sample_many_kernel<true>, dim3 (HONE_K_ARGMAX_BLOCKS, 1), dim3 (256), 0, stream,
                                  logits, vocab, 0.0f, (uint64_t) 0, (const int32_t *) NULL,
                                  (unsigned long long *) scratch, out, (int32_t *) NULL, window, p)
                 : sample_rows (logits, 1, vocab, 0.0f, 0, NULL, scratch, out, NULL, stream);
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
    put_id (b, t, out, out2);
}

/* ---- the sampled chain over many blocks, merged by a tree (session 39) -----
 * One launch, no argmax pass before it. HONE_K_ARGMAX_BLOCKS blocks each take
 * a slice of ≤ CM_SLICE values (penalised as in sample_chain_kernel): they
 * sort it best first (keys = value bits over the inverted id, so keys are
 * unique and their order is the host's: larger value first, the lower id on
 * ties), keep its Kp best keys (Kp: K rounded up to a power of two; K = top-k,
 * or the HONE_K_SAMPLE_MAX_K best without it) and its softmax terms relative
 * to its own largest value, (m, Σ exp((v − m) / T)). The row's K best keys are
 * among the slices' Kp best, so nothing else is needed: groups of CT_GROUP
 * slices meet in the block that takes its group's last ticket, which merges
 * their lists (merge_lists: two sorted lists → their Kp best by one max a slot
 * and a bitonic merge, a warp a pair) and their sums (ct_ms_sum); the block
 * that takes the last of the CT_NG groups' tickets merges the groups the same
 * way and draws (warp 0, chain_cut_draw_warp). It replaced an argmax launch
 * and a pass whose last block radix-selected the row's K-th value over every
 * slice's candidates and cut and drew on one thread (47 µs at the CLI's
 * defaults on a 128,256 vocabulary, 140 without top-k, which it left to one
 * block; now 16 and 30: RESULTS-cuda.md, "Session 39"). Because
 * the keys are unique there is no crowd of ties to give up on: out[0] = −1
 * only when the top-p/min-p set reaches past the 256 best (top-k off). */
#define CT_LGROUP 3
#define CT_GROUP (1 << CT_LGROUP)
#define CT_LNG 4
#define CT_NG (1 << CT_LNG)
static_assert (CT_GROUP * CT_NG == HONE_K_ARGMAX_BLOCKS, "the tree's groups");
#define CT_KEYS (CT_NG * HONE_K_SAMPLE_MAX_K)   /* the final merge's keys; ≥ CM_SLICE */
static_assert (CT_KEYS >= CM_SLICE && CT_GROUP * HONE_K_SAMPLE_MAX_K <= CT_KEYS, "the tree's shared keys");

struct WideState {            /* the walk past the K best between its launches (chain_walk_kernel) */
  unsigned int stage;         /* the launch that works next (1 .. 5); 0: none */
  unsigned int ticket;
  float M;                    /* the row's largest value */
  int walk;                   /* 0: top-p's cut, 1: the draw */
  uint32_t prefix;            /* the key's bits chosen so far */
  unsigned int pad;
  double S;                   /* Σ exp((v − M) / T) */
  unsigned long long Wmin;    /* Σ w over the values min-p keeps */
  unsigned long long rem;     /* the target less the sums before the chosen buckets */
  unsigned long long above;   /* the sums before the chosen buckets (this walk) */
};

struct ChainTreeScratch {   /* after the argmax row's slots in the scratch */
  float m[HONE_K_ARGMAX_BLOCKS];       /* each slice's largest value (−inf: none) */
  double s[HONE_K_ARGMAX_BLOCKS];      /* Σ exp((v − m) / T) over the slice */
  float gm[CT_NG];
  double gs[CT_NG];
  unsigned int gticket[CT_NG], ticket, pad[3];
  WideState wide;
  unsigned long long cand[HONE_K_ARGMAX_BLOCKS][HONE_K_SAMPLE_MAX_K];   /* each slice's Kp best, best first */
  unsigned long long gcand[CT_NG][HONE_K_SAMPLE_MAX_K];                 /* each group's */
};
#define CT_OFFSET HONE_K_SAMPLE_SCRATCH_ROW
static_assert (CT_OFFSET + sizeof (ChainTreeScratch) <= HONE_K_SAMPLE_CHAIN_SCRATCH_BYTES && CT_OFFSET % 8 == 0,
               "the tree's scratch");

struct ChainTreeShared {
  unsigned long long keys[CT_KEYS];   /* the slice; then the lists being merged */
  float prob[HONE_K_SAMPLE_MAX_K];
  double dred[CM_THREADS / 32];
  SlicePen pen;
  float m;
  double s;
  bool last, wide;
};

static __device__ __forceinline__ double
warp_sum_f64 (double v)
{
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync (0xffffffffu, v, o);
  return v;
}

/* One warp: lane i < n loads the pair (m[i], s[i]) — a sum of exp((v − m) / T)
 * over a set, relative to its own largest value m (−inf: empty) — from L2. */
static __device__ __forceinline__ void
ct_ms_load (const float *m, const double *s, int n, float &mi, double &si)
{
  const int lane = threadIdx.x & 31;
  mi = lane < n ? __ldcg (m + lane) : -INFINITY;
  si = lane < n ? __ldcg (s + lane) : 0.0;
}

/* The warp's pairs added up: each lane rescales its own to the largest m and
 * a fixed butterfly adds them (lane 0's sum, the same bits every launch). */
static __device__ __forceinline__ void
ct_ms_sum (float mi, double si, float T, float &mo, double &so)
{
  float mx = mi;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    mx = fmaxf (mx, __shfl_xor_sync (0xffffffffu, mx, o));
  const double t = mi > -INFINITY && mx > -INFINITY ? si * exp ((double) (mi - mx) / T) : 0.0;
  mo = mx;
  so = __shfl_sync (0xffffffffu, warp_sum_f64 (t), 0);
}

/* A bitonic merge, descending, of every run of 2^lr keys of buf[0 .. 2^lb)
 * (each run a bitonic sequence): log2 of the run's length stages of
 * compare-exchanges, a barrier after each. Every thread of the block calls it. */
static __device__ void
bitonic_merge_runs (unsigned long long *buf, int lb, int lr)
{
  for (int ls = lr - 1; ls >= 0; ls--)
    {
      for (int i = threadIdx.x; i < (1 << (lb - 1)); i += blockDim.x)
        {
          const int lo = ((i >> ls) << (ls + 1)) | (i & ((1 << ls) - 1)), hi = lo + (1 << ls);
          const unsigned long long x = buf[lo], y = buf[hi];
          if (x < y)
            {
              buf[lo] = y;
              buf[hi] = x;
            }
        }
      __syncthreads ();
    }
}

/* 2^ll sorted (best first) lists of 2^lk keys at buf[j · 2^lk] → their 2^lk
 * best, sorted, at buf[0 .. 2^lk), by the whole block: each level pairs lists
 * a and b as warp_merge2 does, the kept lists moved to the front so that the
 * next level's are contiguous, then a bitonic merge of each (a barrier a
 * stage). For long lists (256) this beats a warp a pair, whose last levels
 * leave most of the block idle (RESULTS-cuda.md, "Session 39"). */
static __device__ void
merge_tree_block (unsigned long long *buf, int ll, int lk)
{
  const int Kp = 1 << lk;
  for (; ll > 0; ll--)
    {
      const int P = 1 << (ll - 1);   /* pairs */
      constexpr int C = CT_KEYS / 2 / CM_THREADS;   /* the most pairs' slots a thread has */
      unsigned long long x[C];
#pragma unroll
      for (int c = 0; c < C; c++)
        {
          const int idx = (int) threadIdx.x + c * CM_THREADS, pr = idx >> lk, i = idx & (Kp - 1);
          if (idx < (P << lk))
            {
              const unsigned long long a = buf[((2 * pr) << lk) + i], b = buf[((2 * pr + 1) << lk) + Kp - 1 - i];
              x[c] = a > b ? a : b;
            }
        }
      __syncthreads ();
#pragma unroll
      for (int c = 0; c < C; c++)
        {
          const int idx = (int) threadIdx.x + c * CM_THREADS;
          if (idx < (P << lk))
            buf[idx] = x[c];
        }
      __syncthreads ();
      bitonic_merge_runs (buf, ll - 1 + lk, lk);
    }
}

/* Pairs of sorted lists of 2^lr keys (2^lb keys in all) → sorted lists of
 * 2^(lr+1): the second of each pair reversed (so the pair is bitonic), then
 * merged. */
static __device__ void
merge_pairs (unsigned long long *buf, int lb, int lr)
{
  const int R = 1 << lr;
  for (int i = threadIdx.x; i < (1 << (lb - 1)) / 2; i += blockDim.x)
    {
      const int pr = i >> (lr - 1), j = i & (R / 2 - 1);
      unsigned long long *b = buf + ((2 * pr + 1) << lr);
      const unsigned long long t = b[j];
      b[j] = b[R - 1 - j];
      b[R - 1 - j] = t;
    }
  __syncthreads ();
  bitonic_merge_runs (buf, lb, lr + 1);
}

/* One step of a bitonic network over a warp's 32·E keys (lane l holds keys
 * E·l .. E·l + E − 1 in v): keys stride apart compare-exchange, the larger
 * first where (e & size) == 0 (a descending run of the network's stage size),
 * last elsewhere (size = 64·E: every run descending). Within a lane it is
 * register moves, across lanes a shuffle. */
template <int E>
static __device__ __forceinline__ void
warp_bitonic_step (unsigned long long (&v)[E], int stride, int size)
{
  const int lane = threadIdx.x & 31;
  if (stride < E)
    {
#pragma unroll
      for (int r = 0; r < E; r++)
        if ((r & stride) == 0)
          {
            const bool desc = ((lane * E + r) & size) == 0;
            const unsigned long long a = v[r], b = v[r | stride];
            if ((a < b) == desc)
              {
                v[r] = b;
                v[r | stride] = a;
              }
          }
    }
  else
    {
#pragma unroll
      for (int r = 0; r < E; r++)
        {
          const int e = lane * E + r;
          const unsigned long long o = __shfl_xor_sync (0xffffffffu, v[r], stride / E);
          const bool keep_max = ((e & stride) == 0) == ((e & size) == 0);
          v[r] = keep_max ? (v[r] > o ? v[r] : o) : (v[r] < o ? v[r] : o);
        }
    }
}

/* Each warp sorts its 32·E keys best first, in registers (lane l holds keys
 * E·l .. E·l + E − 1 in v): a bitonic network — no block barrier. */
template <int E>
static __device__ __forceinline__ void
warp_sort_desc (unsigned long long (&v)[E])
{
#pragma unroll
  for (int size = 2; size <= 32 * E; size <<= 1)
#pragma unroll
    for (int stride = size >> 1; stride > 0; stride >>= 1)
      warp_bitonic_step<E> (v, stride, size);
}

static __device__ __forceinline__ int
warp_min_i (int v)
{
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = min (v, __shfl_xor_sync (0xffffffffu, v, o));
  return v;
}

/* Inclusive prefix sums of lane-local runs: lane l's run r (the sum of its 8
 * terms) → the sum of the runs of lanes < l. */
static __device__ __forceinline__ double
warp_excl_f64 (double r)
{
  const int lane = threadIdx.x & 31;
  double incl = r;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1)
    {
      const double v = __shfl_up_sync (0xffffffffu, incl, o);
      if (lane >= o)
        incl += v;
    }
  return incl - r;
}

/* The chain's cut and draw over the n0 ≤ 256 best (cand sorted best first,
 * prob their probabilities) by one warp, as chain_draw's thread 0 does it:
 * lane l holds candidates 8l .. 8l + 7; the loops become warp sums, prefix
 * sums and first-index reductions. Returns (on every lane) false when the id
 * is in out[0]; true, with out untouched, when the row is truncated to them
 * and the answer lies past them: the top-p / min-p set reaches past them, or
 * (neither set) the draw does — chain_walk_kernel then walks the whole row. */
static __device__ bool
chain_cut_draw_warp (const unsigned long long *cand, const float *prob, int n0, bool topk_on, bool truncated,
                     const HoneKSampleParams &p, int32_t *out)
{
  const int lane = threadIdx.x & 31;
  float pr[8];
#pragma unroll
  for (int j = 0; j < 8; j++)
    pr[j] = lane * 8 + j < n0 ? prob[lane * 8 + j] : 0.0f;
  int n = n0;
  bool cut = false;
  double mass = 1.0;
  if (topk_on)
    {
      double t = 0.0;
#pragma unroll
      for (int j = 0; j < 8; j++)
        t += pr[j];
      mass = warp_sum_f64 (t);
    }
  /* x / mass as x · (1 / mass): one double division a lane, not eight (the
   * division is a subroutine call; the products differ from the quotients by
   * at most an ulp, far inside the draws' 1e-5 comparison edge) */
  if (p.top_p < 1.0f)
    {
      const double inv = 1.0 / mass;
      double c[8], run = 0.0;
#pragma unroll
      for (int j = 0; j < 8; j++)
        {
          run += (double) pr[j] * inv;
          c[j] = run;
        }
      const double ex = warp_excl_f64 (run);
      int first = n0;
#pragma unroll
      for (int j = 7; j >= 0; j--)
        if (lane * 8 + j < n0 && ex + c[j] >= p.top_p)
          first = lane * 8 + j;
      first = warp_min_i (first);
      if (first < n0)
        {
          n = first + 1;
          cut = true;
        }
    }
  if (p.min_p > 0.0f)
    {
      const float floor_p = __shfl_sync (0xffffffffu, pr[0], 0) * p.min_p;
      int bad = n;
#pragma unroll
      for (int j = 7; j >= 0; j--)
        {
          const int i = lane * 8 + j;
          if (i >= 1 && i < n && pr[j] < floor_p)
            bad = i;
        }
      bad = warp_min_i (bad);
      cut = cut || bad < n;
      n = bad;
    }
  const bool whole = truncated && !cut;   /* the draw is over the whole row */
  if (whole && (p.top_p < 1.0f || p.min_p > 0.0f))
    return true;   /* the set reaches past the K best: its mass is the whole row's walk's to find */
  double t = 0.0;
#pragma unroll
  for (int j = 0; j < 8; j++)
    t += lane * 8 + j < n ? (double) pr[j] : 0.0;
  /* over the whole row the probabilities are normalised already (mass 1): the
   * draw lands among the K best, or past them (the walk's) */
  mass = whole ? 1.0 : warp_sum_f64 (t);
  const double inv = 1.0 / mass;
  double c[8], run = 0.0;
#pragma unroll
  for (int j = 0; j < 8; j++)
    {
      run += lane * 8 + j < n ? (double) (float) (pr[j] * inv) : 0.0;
      c[j] = run;
    }
  const double ex = warp_excl_f64 (run);
  int pick = whole ? n : n - 1;
#pragma unroll
  for (int j = 7; j >= 0; j--)
    if (lane * 8 + j < n && p.u < ex + c[j])
      pick = lane * 8 + j;
  pick = warp_min_i (pick);
  if (pick == n)
    return true;
  if (lane == 0)
    out[0] = (int32_t) ~(uint32_t) (cand[pick] & 0xffffffffu);
  return false;
}

/* One warp: the Kp = 2^lk best of two sorted (best first) lists a and b, sorted,
 * into dst (which may be a): slot e keeps max (a[e], b[Kp − 1 − e]) — a
 * bitonic sequence holding exactly the Kp best — and a bitonic merge in
 * registers sorts it (lane l holds slots E·l .. E·l + E − 1; E = Kp / 32, or
 * 1 with lanes past Kp idle). a and b come from L2 when ldcg (other blocks
 * wrote them), else from shared memory. */
template <int E>
static __device__ __forceinline__ void
warp_merge2 (const unsigned long long *a, const unsigned long long *b, unsigned long long *dst, int lk, bool ldcg)
{
  const int lane = threadIdx.x & 31, Kp = 1 << lk;
  unsigned long long v[E];
#pragma unroll
  for (int r = 0; r < E; r++)
    {
      const int e = lane * E + r;
      unsigned long long x = 0, y = 0;
      if (e < Kp)
        {
          x = ldcg ? __ldcg (a + e) : a[e];
          y = ldcg ? __ldcg (b + Kp - 1 - e) : b[Kp - 1 - e];
        }
      v[r] = x > y ? x : y;
    }
#pragma unroll
  for (int stride = 16 * E; stride > 0; stride >>= 1)
    if (stride < Kp)
      warp_bitonic_step<E> (v, stride, 64 * E);   /* one descending run */
  __syncwarp ();   /* every lane has read a before any writes dst */
#pragma unroll
  for (int r = 0; r < E; r++)
    if (lane * E + r < Kp)
      dst[lane * E + r] = v[r];
}

/* 2^ll ≤ 16 sorted lists of Kp = 2^lk keys → their Kp
 * best, sorted, at buf[0 .. Kp). Level 1 reads list j at src + j · src_stride
 * (L2 when ldcg), later levels the shared buf; each pair is one warp's work in
 * registers, so a level costs one block barrier, not 1 + lk. */
template <int E>
static __device__ void
merge_tree_warps (const unsigned long long *src, int src_stride, bool ldcg, unsigned long long *buf, int ll, int lk)
{
  const int warp = threadIdx.x >> 5, nw = blockDim.x >> 5, Kp = 1 << lk;
  for (int t = 0; t < ll; t++)
    {
      const int P = 1 << (ll - 1 - t);   /* pairs at this level: lists 2pr·2^t and (2pr + 1)·2^t */
      for (int pr = warp; pr < P; pr += nw)
        {
          const int ja = (2 * pr) << t, jb = (2 * pr + 1) << t;
          if (t == 0)
            warp_merge2<E> (src + (size_t) ja * src_stride, src + (size_t) jb * src_stride, buf + (size_t) ja * Kp, lk,
                            ldcg);
          else
            warp_merge2<E> (buf + (size_t) ja * Kp, buf + (size_t) jb * Kp, buf + (size_t) ja * Kp, lk, false);
        }
      __syncthreads ();
    }
}

/* 2^ll sorted lists of Kp = 2^lk keys, list j at src + j · src_stride (L2
 * when ldcg; src may be buf with stride Kp) → their Kp best, sorted, at
 * buf[0 .. Kp): a warp a pair up to 64 keys, the whole block per stage for
 * longer lists (measured, "Session 39": at 256 keys the warps' form took the
 * group and final merges from 6.7 / 9.1 µs to 9.4 / 12.0; at 64 from 5.3 /
 * 5.8 to 4.0 / 3.6). */
static __device__ void
merge_lists (const unsigned long long *src, int src_stride, bool ldcg, unsigned long long *buf, int ll, int lk)
{
  switch (lk)
    {
    case 1: case 2: case 3: case 4: case 5: merge_tree_warps<1> (src, src_stride, ldcg, buf, ll, lk); return;
    case 6: merge_tree_warps<2> (src, src_stride, ldcg, buf, ll, lk); return;
    default: break;
    }
  if (src != buf)
    {
      const int Kp = 1 << lk;
      for (int j = threadIdx.x; j < (1 << (ll + lk)); j += blockDim.x)
        {
          const unsigned long long *q = src + (size_t) (j >> lk) * src_stride + (j & (Kp - 1));
          buf[j] = ldcg ? __ldcg (q) : *q;
        }
      __syncthreads ();
    }
  merge_tree_block (buf, ll, lk);
}

/* A slice's keys at keys[0 .. 32·E·8) (zeros past its values) → its Kp =
 * 2^lk best, sorted, at keys[0 .. Kp); returns its warp's part of the
 * slice's Σ exp((v − m) / T), m its largest value (keys[0]) — the keys the
 * warp's lanes still hold in registers, every key of the slice once. Each warp sorts its 32·E keys in registers; the warps' lists, cut to
 * Kp or merged in pairs up to Kp, meet in merge_lists. */
template <int E>
static __device__ double
slice_best (unsigned long long *keys, int lk, float T)
{
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, Kp = 1 << lk, W = 32 * E;
  constexpr int LW = E == 1 ? 5 : E == 2 ? 6 : E == 4 ? 7 : 8;   /* log2 W */
  unsigned long long v[E];
#pragma unroll
  for (int r = 0; r < E; r++)
    v[r] = keys[warp * W + lane * E + r];
  warp_sort_desc<E> (v);
  __syncthreads ();   /* every warp has its keys before any is overwritten */
  if (Kp <= W)
    {
#pragma unroll
      for (int r = 0; r < E; r++)
        if (lane * E + r < Kp)
          keys[warp * Kp + lane * E + r] = v[r];
      __syncthreads ();
      merge_lists (keys, Kp, false, keys, 3, lk);   /* CM_THREADS / 32 = 8 warps' lists */
    }
  else
    {
#pragma unroll
      for (int r = 0; r < E; r++)
        keys[warp * W + lane * E + r] = v[r];
      __syncthreads ();
      int lr = LW;
      for (; lr < lk; lr++)
        merge_pairs (keys, LW + 3, lr);
      merge_lists (keys, Kp, false, keys, LW + 3 - lk, lk);
    }
  const float m = key_float ((uint32_t) (keys[0] >> 32));
  double s = 0.0;
  if (m > -INFINITY)
#pragma unroll
    for (int r = 0; r < E; r++)
      if (v[r] != 0)
        s += (double) expf ((key_float ((uint32_t) (v[r] >> 32)) - m) / T);
  return warp_sum_f64 (s);
}

/* ---- past the K best: a radix walk over the whole row (session 41) ---------
 * When the top-p / min-p set reaches past the 256 best, or without either the
 * draw lands past them (pure temperature over a flat row), the tree's last
 * block leaves the answer to chain_walk_kernel's launches instead of
 * answering −1 (which sent the host the logits: 640 µs a token on an 8B
 * model, RESULTS-cuda.md "Session 40"). Each value weighs w = e · 2^45 in
 * fixed point (e = exp((v − M) / T) ≤ 1 as the host computes it; vocab ≤ 2^18
 * so no sum overflows, and integer sums are the same in any order: a seed
 * gives the same token every run). A walk histograms the weights by the
 * 32-bit value keys' top 11 bits, then the next 11 of the bucket it chose,
 * then the last 10 — each level one launch of HONE_K_ARGMAX_BLOCKS blocks,
 * a slice each, whose warps sum their lanes' weights per bucket (match_any)
 * before one L2 atomic a bucket — and the level's last block goes best first
 * to the bucket where the running sum passes the target. Ties (one value,
 * several ids) go to the lower ids first, the host's order. Top-p: a walk to
 * its cut (the first token where the running sum reaches top_p · W, W the
 * row's sum), whose running sum is the nucleus's mass; min-p: the mass of the
 * values whose p reaches min-p of the best's (a best-first prefix too); then
 * the draw, a walk to u times what is kept. Level 1's histogram (every value)
 * serves both walks: three launches for a pure-temperature draw, five with
 * top-p; each returns at once when the tree decided without them, and each is
 * launched with PDL so that an idle one overlaps the one before it. On an
 * H100, 128,256 logits: 72 µs a pure-temperature call walked, 86 with top-p,
 * 36 with the five launches idle (the tree alone: 30; RESULTS-cuda.md
 * "Session 41"). (One block walking the row itself took 500 µs: its 64-bit
 * shared atomics are compare-and-swap loops, and a flat row's values crowd
 * into a few buckets. Each block summing into its own shared histogram
 * first, flushed with one L2 atomic a nonzero bucket, measured the same
 * 71 µs in session 42: the warps' L2 atomics are not what a level costs.)
 * Penalties (applied to the slices' copies, not to the row) still send −1. */
#define WW_H1 2048                      /* buckets at levels 1 and 2 (11 bits of the key); level 3: 1024 (10) */
#define WW_SCALE 35184372088832.0f      /* 2^45: Σ w ≤ 2^18 · 2^45 */

struct WideHist {   /* over the tree's slice lists once its last block has decided (they are spent by then) */
  unsigned long long h1[WW_H1];   /* level 1, every value: both walks start from it */
  unsigned long long h[WW_H1];    /* level 2, then 3 */
  int minid[WW_H1 / 2];           /* level 3: each bucket's lowest id */
};
static_assert (sizeof (WideHist) <= sizeof (((ChainTreeScratch *) 0)->cand), "the walk's histograms");
#define WIDE_HIST(cs) ((WideHist *) &(cs)->cand[0][0])

struct WideShared {
  unsigned long long hs[WW_H1];   /* the last block's copy of the histogram it chooses in */
  unsigned long long ured[CM_THREADS / 32], ww_above, ww_rem;
  int ww_b, ww_id, wcount[CM_THREADS / 32];
  bool last;
};

/* Adds each lane's weight w (0: nothing) into hist[b]: lanes with the same b
 * first sum theirs (match_any, then three reductions of 15-bit parts — ≤ 32
 * weights of ≤ 2^45, exact), so one atomic a bucket a warp goes to L2; with
 * minid, the bucket's lowest id too. Every lane of the warp calls it. */
template <bool MINID>
static __device__ __forceinline__ void
ww_add (unsigned long long *hist, int *minid, int b, unsigned long long w, int id)
{
  const unsigned int act = __ballot_sync (0xffffffffu, w != 0);
  if (w == 0)
    return;
  const unsigned int peers = __match_any_sync (act, b);
  const unsigned int a0 = __reduce_add_sync (peers, (unsigned int) (w & 0x7fff)),
                     a1 = __reduce_add_sync (peers, (unsigned int) (w >> 15 & 0x7fff)),
                     a2 = __reduce_add_sync (peers, (unsigned int) (w >> 30));
  unsigned int mi = 0;
  if (MINID)
    mi = __reduce_min_sync (peers, (unsigned int) id);
  if ((int) (threadIdx.x & 31) == __ffs (peers) - 1)
    {
      atomicAdd (hist + b, (unsigned long long) a0 + ((unsigned long long) a1 << 15) + ((unsigned long long) a2 << 30));
      if (MINID)
        atomicMin (minid + b, (int) mi);
    }
}

/* The exclusive prefix sum of v over the block's threads in order; *total the
 * whole sum. Two barriers. */
static __device__ unsigned long long
ww_block_excl (unsigned long long v, unsigned long long *red, unsigned long long *total)
{
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned long long incl = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1)
    {
      const unsigned long long x = __shfl_up_sync (0xffffffffu, incl, o);
      if (lane >= o)
        incl += x;
    }
  if (lane == 31)
    red[warp] = incl;
  __syncthreads ();
  unsigned long long before = 0, all = 0;
  for (int w = 0; w < CM_THREADS / 32; w++)
    {
      before += w < warp ? red[w] : 0ull;
      all += red[w];
    }
  *total = all;
  __syncthreads ();
  return before + incl - v;
}

/* Of hist[0 .. nb) (shared) walked from the top bucket down: the bucket where
 * the running sum first passes t (t ≥ the whole sum, by rounding: the last
 * nonzero one) → sh.ww_b, the sum of the buckets above it → sh.ww_above, t
 * less that → sh.ww_rem. Every thread calls it; the whole sum must be > 0. */
static __device__ void
ww_select (const unsigned long long *hist, int nb, unsigned long long t, WideShared &sh)
{
  const int per = nb / CM_THREADS, top = nb - 1 - (int) threadIdx.x * per;   /* buckets top, top − 1, … */
  unsigned long long s = 0, total;
  for (int j = 0; j < per; j++)
    s += hist[top - j];
  const unsigned long long before = ww_block_excl (s, sh.ured, &total);
  t = t < total ? t : total - 1;
  if (before <= t && t < before + s)
    {
      unsigned long long run = before;
      for (int j = 0; j < per; j++)
        {
          const unsigned long long h = hist[top - j];
          if (t < run + h)
            {
              sh.ww_b = top - j;
              sh.ww_above = run;
              sh.ww_rem = t - run;
              break;
            }
          run += h;
        }
    }
  __syncthreads ();
}

/* The j-th (from 0) lowest id whose value's key is key, by one block: warp w
 * counts the matches in its eighth of the row (ballots), the warp where j
 * falls finds it. Only for ties past the lowest id (rare: equal logits). */
static __device__ int
ww_tie (const float *logits, int vocab, uint32_t key, unsigned long long j, WideShared &sh)
{
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = CM_THREADS / 32;
  const int seg = ((vocab + nw - 1) / nw + 31) & ~31, lo = min (vocab, warp * seg), hi = min (vocab, lo + seg);
  int c = 0;
  for (int i0 = lo; i0 < hi; i0 += 32)
    {
      const int i = i0 + lane;
      c += __popc (__ballot_sync (0xffffffffu, i < hi && fkey (logits[i]) == key));
    }
  if (lane == 0)
    sh.wcount[warp] = c;
  __syncthreads ();
  unsigned long long before = 0;
  for (int w = 0; w < warp; w++)
    before += (unsigned long long) sh.wcount[w];
  if (before <= j && j < before + (unsigned long long) c)
    {
      int r = (int) (j - before);
      for (int i0 = lo; i0 < hi; i0 += 32)
        {
          const int i = i0 + lane;
          unsigned int bal = __ballot_sync (0xffffffffu, i < hi && fkey (logits[i]) == key);
          const int pc = __popc (bal);
          if (r < pc)
            {
              for (int q = 0; q < r; q++)
                bal &= bal - 1;
              if (lane == 0)
                sh.ww_id = i0 + __ffs (bal) - 1;
              break;
            }
          r -= pc;
        }
    }
  __syncthreads ();
  return sh.ww_id;
}

/* The draw's target in the walk's running sum: u times the mass kept — the
 * row's or the top-p nucleus's (kept), less where min-p keeps less (Wmin) —
 * and below it. */
static __device__ unsigned long long
ww_draw_target (unsigned long long kept, const HoneKSampleParams &p, WideState *ws)
{
  if (p.min_p > 0.0f)
    {
      const unsigned long long wm = __ldcg (&ws->Wmin);
      kept = wm < kept ? wm : kept;
    }
  const unsigned long long t = (unsigned long long) (p.u * (double) kept);
  return t < kept ? t : kept - 1;
}

/* The tree's last block, deciding to walk: the state the walk's launches
 * read, and its histograms zeroed. Every thread calls it. */
static __device__ void
wide_begin (ChainTreeScratch *cs, float M, double S)
{
  WideHist *wh = WIDE_HIST (cs);
  for (int j = threadIdx.x; j < WW_H1; j += blockDim.x)
    {
      wh->h1[j] = 0;
      wh->h[j] = 0;
      if (j < WW_H1 / 2)
        wh->minid[j] = 0x7fffffff;
    }
  if (threadIdx.x == 0)
    {
      cs->wide.M = M;
      cs->wide.S = S;
      cs->wide.Wmin = 0;
      cs->wide.stage = 1;
    }
}

__global__ void __launch_bounds__ (CM_THREADS, 1)
chain_tree_kernel (const float *logits, int vocab, HoneKSampleParams p, const int32_t *window,
                   unsigned char *scratch, int32_t *out, int probe)
{
  __shared__ ChainTreeShared sh;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nb = (int) gridDim.x, blk = blockIdx.x;
  ChainTreeScratch *cs = (ChainTreeScratch *) (scratch + CT_OFFSET);
  const bool topk_on = p.top_k > 0 && p.top_k < vocab;
  const int K = topk_on ? min (p.top_k, HONE_K_SAMPLE_MAX_K) : min (vocab, HONE_K_SAMPLE_MAX_K);
  const bool truncated = !topk_on && vocab > K;
  int lk = 1;   /* Kp = 2^lk ≥ K */
  while ((1 << lk) < K)
    lk++;
  const int Kp = 1 << lk;

  /* ---- the slice: its Kp best keys, sorted, and its (m, s) */
  const int per = ((vocab + nb - 1) / nb + 3) & ~3;
  const int lo = min (vocab, blk * per), n = min (vocab, lo + per) - lo;
  int lb = 8;   /* ns = 2^lb ≥ n, Kp and CM_THREADS: E = ns / CM_THREADS keys a thread */
  while ((1 << lb) < n || (1 << lb) < Kp)
    lb++;
  for (int j = tid; j < (1 << lb); j += CM_THREADS)
    sh.keys[j] = 0;   /* below every real key (NaN and −inf have keys > 0) */
  if (p.n_window > 0)   /* penalties (the host passes n_window 0 without them) */
    slice_pen_setup (sh.pen, logits + lo, lo, n, window, p);
  __syncthreads ();
  logits_for_each<2> (logits + lo, n, [&] (int i, float v, bool ok) {
    if (!ok)
      return;
    if (p.n_window > 0)
      v = pen_value (sh.pen, i, v);
    sh.keys[i] = ((unsigned long long) fkey (v) << 32) | (uint32_t) ~(uint32_t) (lo + i);
  });
  __syncthreads ();
  if (probe == 1)
    return;
  double s = 0.0;
  switch (lb)
    {
    case 8: s = slice_best<1> (sh.keys, lk, p.temperature); break;
    case 9: s = slice_best<2> (sh.keys, lk, p.temperature); break;
    case 10: s = slice_best<4> (sh.keys, lk, p.temperature); break;
    default: s = slice_best<8> (sh.keys, lk, p.temperature); break;
    }
  const float m = key_float ((uint32_t) (sh.keys[0] >> 32));   /* the slice's largest (NaN: none) */
  if (probe == 2)
    return;
  if (lane == 0)
    sh.dred[warp] = s;
  for (int j = tid; j < Kp; j += CM_THREADS)
    cs->cand[blk][j] = sh.keys[j];
  __syncthreads ();
  if (tid == 0)
    {
      double t = 0.0;
      for (int w = 0; w < CM_THREADS / 32; w++)
        t += sh.dred[w];
      cs->m[blk] = m == m ? m : -INFINITY;
      cs->s[blk] = t;
    }
  __threadfence ();   /* every thread's stores, before the ticket */
  __syncthreads ();
  const int g = blk / CT_GROUP;
  if (tid == 0)
    sh.last = atomicInc (&cs->gticket[g], CT_GROUP - 1) == CT_GROUP - 1;
  __syncthreads ();
  if (!sh.last)
    return;
  __threadfence ();

  /* ---- the last block of a group: its slices' lists and sums merged */
  float mi = -INFINITY;   /* warp 0: the slices' (m, s), loaded now, added up after the merge */
  double si = 0.0;
  if (warp == 0)
    ct_ms_load (cs->m + g * CT_GROUP, cs->s + g * CT_GROUP, CT_GROUP, mi, si);
  merge_lists (&cs->cand[g * CT_GROUP][0], HONE_K_SAMPLE_MAX_K, true, sh.keys, CT_LGROUP, lk);
  if (warp == 0)
    {
      float gm;
      double gs;
      ct_ms_sum (mi, si, p.temperature, gm, gs);
      if (lane == 0)
        {
          cs->gm[g] = gm;
          cs->gs[g] = gs;
        }
    }
  if (probe == 3)
    return;
  for (int j = tid; j < Kp; j += CM_THREADS)
    cs->gcand[g][j] = sh.keys[j];
  __threadfence ();
  __syncthreads ();
  if (tid == 0)
    sh.last = atomicInc (&cs->ticket, CT_NG - 1) == CT_NG - 1;
  __syncthreads ();
  if (!sh.last)
    return;
  __threadfence ();

  /* ---- the last group: the row's Kp best, its softmax sum, the draw */
  if (tid == 0)
    cs->wide.stage = 0;   /* no walk unless this block starts one */
  if (warp == 0)
    ct_ms_load (cs->gm, cs->gs, CT_NG, mi, si);
  merge_lists (&cs->gcand[0][0], HONE_K_SAMPLE_MAX_K, true, sh.keys, CT_LNG, lk);
  if (warp == 0)
    {
      float M;
      double S;
      ct_ms_sum (mi, si, p.temperature, M, S);
      if (lane == 0)
        {
          sh.m = M;
          sh.s = S;
        }
    }
  __syncthreads ();
  const float M = sh.m;
  const double S = sh.s;
  if (probe == 4)
    return;
  if (!isfinite (M))   /* as the one-block chain: the argmax (the best key) */
    {
      if (tid == 0)
        out[0] = (int32_t) ~(uint32_t) (sh.keys[0] & 0xffffffffu);
      return;
    }
  const int n0 = min (K, vocab);
  for (int i = tid; i < n0; i += CM_THREADS)
    {
      const float v = key_float ((uint32_t) (sh.keys[i] >> 32));
      const float e = v == v ? expf ((v - M) / p.temperature) : 0.0f;
      sh.prob[i] = (float) ((double) e / S);
    }
  __syncthreads ();
  if (warp == 0)
    {
      const bool wide = chain_cut_draw_warp (sh.keys, sh.prob, n0, topk_on, truncated, p, out);
      if (lane == 0)
        sh.wide = wide;
    }
  __syncthreads ();
  if (!sh.wide)
    return;
  if (p.n_window > 0 || p.past_k_on_host)
    {
      if (tid == 0)
        out[0] = -1;   /* the host samples from the logits */
      return;
    }
  wide_begin (cs, M, S);   /* chain_walk_kernel's launches find the id */
}

/* One level of the walk (stage 1: level 1; 2 and 4: level 2 of the first and
 * second walk; 3 and 5: level 3), launched after chain_tree_kernel: nothing
 * unless the state says this stage is next. */
__global__ void __launch_bounds__ (CM_THREADS)
chain_walk_kernel (const float *logits, int vocab, HoneKSampleParams p, unsigned char *scratch, int32_t *out,
                   int stage)
{
  __shared__ WideShared sh;
  ChainTreeScratch *cs = (ChainTreeScratch *) (scratch + CT_OFFSET);
  WideState *ws = &cs->wide;
  WideHist *wh = WIDE_HIST (cs);
  pdl_trigger ();   /* the next level may launch now; it waits for this one to finish (PDL, walk_launch) */
  pdl_wait ();
  if (ws->stage != (unsigned int) stage)
    return;
  const int level = stage == 1 ? 1 : stage == 3 || stage == 5 ? 3 : 2;
  const int nb = (int) gridDim.x, tid = threadIdx.x, lane = tid & 31;
  const float M = ws->M, T = p.temperature;
  const uint32_t prefix = ws->prefix;
  const double inv_s = 1.0 / ws->S;
  const float floor_p = p.min_p > 0.0f ? (float) inv_s * p.min_p : 0.0f;   /* the best's p times min-p */
  const int per = ((vocab + nb - 1) / nb + 3) & ~3;
  const int lo = min (vocab, (int) blockIdx.x * per), n = min (vocab, lo + per) - lo;
  unsigned long long kept = 0;
  logits_for_each<1> (logits + lo, n, [&] (int i, float v, bool ok) {
    const uint32_t k = fkey (v);
    const bool in = ok && v == v && (level == 1 || (level == 2 ? k >> 21 == prefix : k >> 10 == prefix));
    const float e = in ? expf ((v - M) / T) : 0.0f;
    const unsigned long long w = __float2ull_rz (e * WW_SCALE);
    if (level == 3)
      ww_add<true> (wh->h, wh->minid, (int) (k & 1023u), w, lo + i);
    else
      ww_add<false> (level == 1 ? wh->h1 : wh->h, NULL, (int) (level == 1 ? k >> 21 : k >> 10 & 2047u), w, 0);
    if (level == 1 && floor_p > 0.0f && w != 0 && (float) ((double) e * inv_s) >= floor_p)
      kept += w;
  });
  if (level == 1 && p.min_p > 0.0f)
    {
#pragma unroll
      for (int o = 16; o > 0; o >>= 1)
        kept += __shfl_xor_sync (0xffffffffu, kept, o);
      if (lane == 0 && kept)
        atomicAdd (&ws->Wmin, kept);
    }
  __threadfence ();
  __syncthreads ();
  if (tid == 0)
    sh.last = atomicInc (&ws->ticket, (unsigned int) nb - 1) == (unsigned int) nb - 1;
  __syncthreads ();
  if (!sh.last)
    return;
  __threadfence ();

  /* ---- the level's last block: the bucket the target falls in */
  const int nbk = level == 3 ? WW_H1 / 2 : WW_H1;
  const unsigned long long *g = level == 1 ? wh->h1 : wh->h;
  for (int j = tid; j < nbk; j += CM_THREADS)
    sh.hs[j] = __ldcg (g + j);
  __syncthreads ();
  unsigned long long t = __ldcg (&ws->rem);
  int walk = ws->walk;
  if (level == 1)
    {
      unsigned long long s = 0, W;
      for (int j = 0; j < WW_H1 / CM_THREADS; j++)
        s += sh.hs[tid * (WW_H1 / CM_THREADS) + j];
      ww_block_excl (s, sh.ured, &W);
      if (p.top_p < 1.0f)
        {
          /* top-p's cut: the first token where the running sum reaches top_p · W, i.e. passes ⌈top_p · W⌉ − 1 */
          const double x = ceil ((double) p.top_p * (double) W);
          t = x >= 1.0 ? (unsigned long long) x - 1 : 0;
          walk = 0;
        }
      else
        {
          t = ww_draw_target (W, p, ws);
          walk = 1;
        }
    }
  ww_select (sh.hs, nbk, t, sh);
  const int b = sh.ww_b;
  const unsigned long long above = (level == 1 ? 0ull : __ldcg (&ws->above)) + sh.ww_above, rem = sh.ww_rem;
  if (level < 3)
    {
      if (level == 2)   /* h serves level 3 next: zeroed (its first 1024) */
        for (int j = tid; j < WW_H1; j += CM_THREADS)
          wh->h[j] = 0;
      if (tid == 0)
        {
          ws->prefix = level == 1 ? (uint32_t) b : prefix << 11 | (uint32_t) b;
          ws->rem = rem;
          ws->above = above;
          ws->walk = walk;
          ws->stage = (unsigned int) stage + 1;
        }
      return;
    }
  /* level 3: every id in the bucket has this value and weight — the (rem / wv)-th lowest */
  const uint32_t key = prefix << 10 | (uint32_t) b;
  const unsigned long long wv = __float2ull_rz (expf ((key_float (key) - M) / T) * WW_SCALE), j = rem / wv;
  if (walk == 1)
    {
      const int id = j == 0 ? __ldcg (wh->minid + b) : ww_tie (logits, vocab, key, j, sh);
      if (tid == 0)
        {
          out[0] = id;
          ws->stage = 0;
        }
      return;
    }
  /* the cut found: what is kept (min-p may keep less), the draw's target, and its level 1 from h1 */
  t = ww_draw_target (above + j * wv + wv, p, ws);
  for (int q = tid; q < WW_H1 / 2; q += CM_THREADS)
    {
      wh->h[q] = 0;
      wh->minid[q] = 0x7fffffff;
      sh.hs[q] = __ldcg (wh->h1 + q);
      sh.hs[q + WW_H1 / 2] = __ldcg (wh->h1 + q + WW_H1 / 2);
    }
  __syncthreads ();
  ww_select (sh.hs, WW_H1, t, sh);
  if (tid == 0)
    {
      ws->prefix = (uint32_t) sh.ww_b;
      ws->rem = sh.ww_rem;
      ws->above = sh.ww_above;
      ws->walk = 1;
      ws->stage = 4;
    }
}

/* One of the walk's launches: with the PDL attribute unless HONE_SAMPLE_WALK_PDL=0 (A/B measurement), so that
 * an idle level's launch overlaps the one before it. */
static int
walk_launch (const float *logits, int vocab, const HoneKSampleParams &p, void *scratch, int32_t *out, int stage,
             cudaStream_t stream)
{
  static int pdl = -1;
  if (pdl < 0)
    pdl = hone_k_pdl_enabled () && !(getenv ("HONE_SAMPLE_WALK_PDL") && atoi (getenv ("HONE_SAMPLE_WALK_PDL")) == 0);
  return hone_k_launch_pdl (pdl != 0, chain_walk_kernel, dim3 (HONE_K_ARGMAX_BLOCKS), dim3 (CM_THREADS), 0, stream,
                            logits, vocab, p, (unsigned char *) scratch, out, stage);
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
