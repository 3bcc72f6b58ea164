/* hone-k-common.cuh — device helpers shared by the kernels (internal). */
#pragma once

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include "hone-kernels.h"
#include "hone-k-trace.cuh"

#define HONE_K_CHECK(expr) do { cudaError_t e_ = (expr); if (e_ != cudaSuccess) return (int) e_; } while (0)

/* Programmatic dependent launch (sm_90): a kernel starts while its
 * predecessor drains, does what does not depend on it (weight loads), then
 * waits here for the predecessor's results. A no-op on older chips. */
static __device__ __forceinline__ void
pdl_wait (void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile ("griddepcontrol.wait;" ::: "memory");
#endif
}

static __device__ __forceinline__ void
pdl_trigger (void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile ("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* Measurement only (HONE_STEP_PROBE, read once; hone-k-forward.cu): a mask of
 * the launches one-token decode steps leave out, so that a benchmark bounds
 * what removing them could gain — the logits are then wrong. 1 ("pack"): the
 * W4A16 input packs; 2 ("attn"): decode attention. 0 (unset): none. */
extern "C" int hone_k_step_probe (void);

/* Read-once weight stream: skip L1 so activations stay there. */
static __device__ __forceinline__ int4
ld_stream (const int4 *p)
{
  int4 v;
  asm volatile ("ld.global.nc.L1::no_allocate.v4.s32 {%0,%1,%2,%3}, [%4];"
                : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

/* A 32-bit load with acquire semantics at GPU scope: a counter other SMs
 * publish to (the writes they made before it are visible after it). */
static __device__ __forceinline__ unsigned
ld_acquire (const unsigned *p)
{
  unsigned v;
  asm volatile ("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

static __device__ __forceinline__ float
warp_sum (float v)
{
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync (0xffffffffu, v, o);
  return v;
}

static __device__ __forceinline__ float
warp_max (float v)
{
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf (v, __shfl_xor_sync (0xffffffffu, v, o));
  return v;
}

static __device__ __forceinline__ float
bf16_lo (uint32_t w)
{
  return __uint_as_float (w << 16);
}

static __device__ __forceinline__ float
bf16_hi (uint32_t w)
{
  return __uint_as_float (w & 0xffff0000u);
}

static __device__ __forceinline__ float
f16_bits_to_f32 (uint16_t h)
{
  return __half2float (__ushort_as_half (h));
}

static __device__ __forceinline__ float
silu (float x)
{
  return x / (1.0f + __expf (-x));
}

/* Quantize 32 consecutive values held one per lane (the lane's value v) into
 * int8 with d = absmax/127; lane 0 stores (d, d·Σq). (Decode attention's
 * combine does the same arithmetic on 8 lanes × 4 values: the same bits.) */
static __device__ __forceinline__ void
quant32_store (float v, int8_t *q, float2 *ds, int lane)
{
  const float amax = warp_max (fabsf (v));
  const float d = amax / 127.f;
  const int qi = d > 0.f ? __float2int_rn (v / d) : 0;
  q[lane] = (int8_t) qi;
  const float sum = warp_sum ((float) qi);
  if (lane == 0)
    *ds = make_float2 (d, d * sum);
}

/* rsqrt(mean(x²) + eps) of one row, summed by a block of 256 threads (VEC:
 * float4 loads; x 16-byte aligned, n % 4 == 0). The loops are unrolled so
 * that a thread's loads are in flight together: one L2 round trip, not one a
 * load (4 / 16 in a row at n = 4096) — each is ~0.5 µs of a decode step's
 * critical path. The order of the sums is the same either way. */
template <bool VEC>
static __device__ __forceinline__ float
row_rms_scale (const float *xr, int n, float eps)
{
  __shared__ float part[8];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float ss = 0.f;
  if (VEC)
#pragma unroll 8
    for (int i = threadIdx.x; i < (n >> 2); i += 256)
      {
        const float4 v = ((const float4 *) xr)[i];
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
      }
  else
#pragma unroll 16
    for (int i = threadIdx.x; i < n; i += 256)
      ss += xr[i] * xr[i];
  ss = warp_sum (ss);
  if (lane == 0)
    part[warp] = ss;
  __syncthreads ();
  ss = 0.f;
#pragma unroll
  for (int i = 0; i < 8; i++)
    ss += part[i];
  return rsqrtf (ss / (float) n + eps);
}

/* Index (in 16-bit slots) of value j of token t of a HoneKActH16 of @cols
 * values a token: the tile order of hone-kernels.h (the slots of a 16-byte
 * piece hold its 8 values' bytes in h16_store's order). The register-streamed
 * GEMV reads the same layout a 16-byte piece at a time (hone-k-gemv.cu). */
static __host__ __device__ __forceinline__ size_t
h16_tile_index (int cols, size_t t, int j)
{
  const int c = j >> 5, jj = j & 31;
  return t * HONE_K_H16_ROW (cols) + ((((size_t) (c >> 5) * 4 + (jj >> 3)) * 32 + (c & 31)) << 3) + (jj & 7);
}

/* HoneKActH16's 16-bit fixed point of value x of a block whose absmax's
 * reciprocal scale is inv (32767/absmax, 0 for zeros): v, clamped. */
static __device__ __forceinline__ int
h16_fixed (float x, float inv)
{
  const int v = __float2int_rn (x * inv);
  return v > 32767 ? 32767 : v < -32767 ? -32767 : v;
}

/* Store v (value j of token t) at its hi and lo bytes (hone-kernels.h). */
static __device__ __forceinline__ void
h16_store (uint16_t *h, int cols, size_t t, int j, int v)
{
  const int k = j & 7;
  uint8_t *piece = (uint8_t *) (h + h16_tile_index (cols, t, j - k));
  const int b = 2 * (k & 3) + (k >> 2);
  piece[b] = (uint8_t) ((unsigned) v >> 8);   /* the high byte, two's complement: v = 256·(int8) hi + lo */
  piece[b + 8] = (uint8_t) (v & 0xff);
}

/* A block's (d, Σv) words. */
static __device__ __forceinline__ void
h16_store_ds (float *ds, int cols, size_t t, int c, float amax, int sum)
{
  float2 *p = (float2 *) ds + t * (size_t) (cols >> 5) + c;
  *p = make_float2 (amax / 32767.f, __int_as_float (sum));
}

/* A warp's 32 values v (lane = i % 32; i = value i of token t's @cols) into
 * HoneKActH16 h / ds: d = absmax/32767, v = rint(x·32767/absmax), Σv
 * (hone_k_pack_h16's pack step). */
static __device__ __forceinline__ void
h16_pack32 (float v, uint16_t *h, float *ds, int cols, size_t t, int i)
{
  const float amax = warp_max (fabsf (v));
  const float inv = amax > 0.f ? 32767.f / amax : 0.f;
  const int q = h16_fixed (v, inv);
  h16_store (h, cols, t, i, q);
  const int sum = (int) warp_sum ((float) q);   /* exact: |Σ| ≤ 32·32767 < 2^24 */
  if ((i & 31) == 0)
    h16_store_ds (ds, cols, t, i >> 5, amax, sum);
}

/* ---- L2 prefetch of the next weights (decode) ----------------------------
 * A decode step streams one matrix after another; between two GEMVs the
 * memory idles while the first drains, the next launches and fills, and
 * during decode attention at short context. Kernels given a HoneKPrefetch
 * pull the first bytes of the next matrix into the 60 MB L2 in that time, so
 * that the next GEMV's first wave would read L2. Up to 4 byte ranges (a
 * matrix's quants and scales, or two matrices), each 16-byte aligned, sizes
 * multiples of 128. Measured slower in every form tried (bulk, per-line,
 * evict_last; 4–48 MB): decode_step leaves it off by default. */
#define HONE_K_PF_RANGES 4
struct HoneKPrefetch {
  const char *p[HONE_K_PF_RANGES];
  unsigned long long n[HONE_K_PF_RANGES];
  int how;   /* 0: bulk prefetch (copy engine), 1: a prefetch.L2 per line, 2: the same marked evict_last */
};

/* Append the first `bytes` (rows-proportional) of matrix w to pf; returns the bytes added. */
size_t hone_k_prefetch_add_matrix (HoneKPrefetch *pf, const HoneKMatrix *w, size_t bytes);

static __device__ __forceinline__ void
prefetch_l2 (const char *p, unsigned bytes, int how)
{
#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 900
  if (how == 0)
    {
      asm volatile ("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(p), "r"(bytes) : "memory");
      return;
    }
#endif
  if (how == 2)
    for (unsigned o = 0; o < bytes; o += 128)
      asm volatile ("prefetch.global.L2::evict_last [%0];" :: "l"(p + o));
  else
    for (unsigned o = 0; o < bytes; o += 128)
      asm volatile ("prefetch.global.L2 [%0];" :: "l"(p + o));
#endif
}

/* Part `part` of `nparts` equal slices of the concatenated ranges, issued by
 * the 32 lanes of one warp (fire and forget: nothing waits for it). */
static __device__ __forceinline__ void
prefetch_slice (const HoneKPrefetch &pf, unsigned part, unsigned nparts, int lane)
{
  unsigned long long total = 0;
#pragma unroll
  for (int r = 0; r < HONE_K_PF_RANGES; r++)
    total += pf.n[r];
  if (!total || !nparts)
    return;
  const unsigned long long per = ((total + nparts - 1) / nparts + 127) & ~127ull;
  const unsigned long long s = (unsigned long long) part * per, e = s + per;
  unsigned long long start = 0;
#pragma unroll
  for (int r = 0; r < HONE_K_PF_RANGES; r++)
    {
      const unsigned long long n = pf.n[r], r0 = start;
      start += n;
      if (e <= r0 || s >= r0 + n)
        continue;
      const unsigned long long lo = s > r0 ? s - r0 : 0;
      const unsigned long long hi = e - r0 < n ? e - r0 : n;
      const unsigned long long piece = ((hi - lo + 31) / 32 + 127) & ~127ull;
      const unsigned long long a = lo + (unsigned long long) lane * piece;
      const unsigned long long b = a + piece < hi ? a + piece : hi;
      if (a < b)
        prefetch_l2 (pf.p[r] + a, (unsigned) (b - a), pf.how);
    }
}

/* The epilogue half of a GEMV's arguments (output, bias, residual, RoPE + KV
 * store), named alike in every GEMV kernel's argument struct (GemvArgs,
 * W4Args), copied from the op. */
template <class A>
static inline void
epi_args_from_op (A &a, const HoneKGemvOp *op)
{
  a.bias = op->bias;
  a.res = op->res;
  a.y = op->y;
  a.epi = op->epilogue;
  a.nq = op->nq;
  a.nkv = op->nkv;
  a.hd = op->hd;
  a.pos = op->pos;
  a.inv_freq = op->inv_freq;
  a.k_pool = (__half *) op->k_pool;
  a.v_pool = (__half *) op->v_pool;
  a.block_table = op->block_table;
}

/* Internal entry points of decode_step (hone-k-forward.cu): the public ones
 * plus the next weights to prefetch and, for attention, its output also
 * quantized to int8 for a quantized o projection (no quantize launch). */
extern "C" int hone_k_gemv_pf (const HoneKGemvOp *op, const HoneKPrefetch *pf, cudaStream_t stream);
extern "C" int hone_k_attn_decode_pf (const float *qkv, int n_tok, int nq, int nkv, int hd, const int32_t *pos,
                                      const void *k_pool, const void *v_pool, const int32_t *block_table,
                                      void *scratch, float *out, HoneKActQ8 *out_q, const HoneKPrefetch *pf,
                                      cudaStream_t stream);
/* The same for a launch that only ever sees contexts of at most @max_ctx keys
 * (0: any — a CUDA graph replays one launch at growing contexts, so the
 * caller states the bound it captured for): one token within
 * hone_k_attn_tiny_ctx () keys takes the tiny kernel (hone-k-attn-tiny.cu),
 * within hone_k_attn_short_ctx () the clustered shape (hone-k-attn-decode.cu).
 * block_table must hold at least ceil(@max_ctx / HONE_K_KV_BLOCK) entries
 * (the tiny kernel reads them before it knows pos). */
extern "C" int hone_k_attn_decode_ctx (const float *qkv, int n_tok, int nq, int nkv, int hd, const int32_t *pos,
                                       const void *k_pool, const void *v_pool, const int32_t *block_table,
                                       void *scratch, float *out, HoneKActQ8 *out_q, const HoneKPrefetch *pf,
                                       int max_ctx, cudaStream_t stream);
/* The same, also writing out_h (when set): the output as HoneKActH16, with
 * hone_k_pack_h16's bits — the register-streamed W4A16 o projection's input. */
extern "C" int hone_k_attn_decode_h16 (const float *qkv, int n_tok, int nq, int nkv, int hd, const int32_t *pos,
                                       const void *k_pool, const void *v_pool, const int32_t *block_table,
                                       void *scratch, float *out, HoneKActQ8 *out_q, HoneKActH16 *out_h,
                                       const HoneKPrefetch *pf, int max_ctx, cudaStream_t stream);
/* Whether a one-token GEMV of w takes the packed input HoneKActH16 (Q4Z on the
 * register-streamed kernel: hone_k_q4z_set_config 13 / HONE_Q4Z_KERNEL=rs). */
extern "C" bool hone_k_q4z_takes_h16 (const HoneKMatrix *w);
/* Decode tuning (also HONE_DECODE_PF, HONE_DECODE_PF_ATTN in MB, HONE_DECODE_FUSE=0/1,
 * HONE_DECODE_PF_HOW): -1 keeps a value. See hone-k-forward.cu. */
extern "C" void hone_k_decode_tune (int pf_gemv_mb, int pf_attn_mb, int fuse_quant, int pf_how);
/* Decode attention: the fewest keys a KV split gets (default 32). */
void hone_k_attn_set_min_chunk (int keys);
/* BF16/F16 GEMVs with a fused RMSNorm: 1 scale at the end (default), 0 the prologue. */
void hone_k_gemv_set_norm_end (int on);
/* Q4_0/Q4_1 dequantization by the block kernel (on, the default) or the element
 * kernel (off; HONE_DEQUANT_Q4_BLOCKS=0 sets it off).
 * Returns the previous setting, for the caller to put back. */
int hone_k_dequant_set_q4_blocks (int on);

/* Host: the current device's multiprocessors (cached once read; 1 while it
 * cannot be read, and then asked again next time). */
static inline int
hone_k_sm_count (void)
{
  static int sms;
  if (!sms)
    {
      int dev = 0, n = 0;
      if (cudaGetDevice (&dev) != cudaSuccess
          || cudaDeviceGetAttribute (&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1)
        return 1;
      sms = n;
    }
  return sms;
}

/* Host: launch with the PDL attribute where the device supports it. */
int hone_k_pdl_enabled (void);
/* hone_k_forward: whether PDL pays for this step's weights (automatic mode),
 * and for which launches (@roles, HONE_K_PDL_* bits below). */
void hone_k_pdl_hint (int on, int roles);
/* Which launches get the PDL attribute when PDL is on (a launch with it may
 * start while the one before it drains): decode GEMVs by their place in the
 * layer, decode attention, everything else. HONE_PDL_ROLES = a comma list of
 * qkv, o, gu, down, head, attn, other (unset: as hone_k_forward hints) — for
 * A/B runs. */
enum {
  HONE_K_PDL_QKV = 1, HONE_K_PDL_O = 2, HONE_K_PDL_GU = 4, HONE_K_PDL_DOWN = 8, HONE_K_PDL_HEAD = 16,
  HONE_K_PDL_ATTN = 32, HONE_K_PDL_OTHER = 64, HONE_K_PDL_ALL = 127
};
/* The step being enqueued is bounded to the tiny attention kernel's tier
 * (hone_k_forward says so before each step): the quantized q|k|v GEMVs then
 * trigger attention right after their PDL wait (hone-k-gemv.cu, trigger_of). */
extern "C" void hone_k_gemv_tiny_tier (int on);
/* The HONE_K_PDL_* bits that environment variable @name lists (role names
 * as HONE_PDL_ROLES': qkv, o, gu, down, head, attn, other), @dflt when unset. */
extern "C" int hone_k_roles_from_env (const char *name, int dflt);
/* hone_k_pdl_enabled () and @role (one HONE_K_PDL_* bit) among the launches
 * that take PDL: HONE_PDL_ROLES when set, else all when PDL is forced, else
 * the roles of hone_k_pdl_hint. */
int hone_k_pdl_for (int role);

/* The L1 / shared-memory carveout a decode kernel asks for (once a kernel,
 * before its first launch). An SM holds blocks of two kernels at once only
 * when both fit one carveout; decode attention takes most of the shared
 * memory, so a GEMV whose carveout the driver picks for its own few bytes
 * can make an SM reconfigure between the two, costing the PDL overlap at
 * that edge. @preferred is the kernel's own choice (hone-k-gemv.cu: the
 * one-token dp4a GEMVs ask for all of it, cudaSharedmemCarveoutMaxShared;
 * -1: none, the driver's). HONE_CARVEOUT (read once, for A/B runs):
 * "driver" sets none anywhere, 0..100 sets that percentage on the launches
 * of HONE_CARVEOUT_ROLES (the role names of HONE_PDL_ROLES; unset: all)
 * instead of the kernels' own choices. @role is one HONE_K_PDL_* bit. */
void hone_k_carveout_apply (const void *kernel, int role, int preferred);

/* A launch with the PDL attribute when @pdl (the caller decides; see
 * hone_k_launch_role for the roles' rule). */
template <typename... KArgs, typename... Args>
static inline int
hone_k_launch_pdl (bool pdl, void (*kernel) (KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                   Args... args)
{
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  if (pdl)
    {
      attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
    }
  cudaError_t e = cudaLaunchKernelEx (&cfg, kernel, ((KArgs) args)...);
  return (int) e;
}

template <typename... KArgs, typename... Args>
static inline int
hone_k_launch_role (int role, void (*kernel) (KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                    Args... args)
{
  hone_k_carveout_apply ((const void *) kernel, role, -1);
  return hone_k_launch_pdl (hone_k_pdl_for (role) != 0, kernel, grid, block, smem, stream, args...);
}

/* A launch of role HONE_K_PDL_OTHER (norms, quantize, embed, sampling, …). */
template <typename... KArgs, typename... Args>
static inline int
hone_k_launch (void (*kernel) (KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
               Args... args)
{
  return hone_k_launch_role (HONE_K_PDL_OTHER, kernel, grid, block, smem, stream, args...);
}
