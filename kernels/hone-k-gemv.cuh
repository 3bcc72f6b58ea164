/* hone-k-gemv.cuh — what the two decode GEMVs share (internal).
 *
 * hone-k-gemv.cu (register-streamed, 1..8 tokens) and hone-k-gemv-staged.cu
 * (one wave, weights bulk-copied into shared memory, one token) compute the
 * same per-chunk dot products and the same epilogues: they live here so that
 * both give the same arithmetic.
 *
 * A chunk is 16 bytes of weights: BF16/F16 8 values; Q8_0 16 quants (half a
 * block); Q4_0/Q4_1 32 quants (one block, low nibbles = elements 0..15, high
 * nibbles = 16..31); Q4Z (W4A16, AWQ) 32 nibbles in hone-k-w4.cuh's order, one
 * f16 scale and one zero point a group, against HoneKActH16's 16-bit input.
 */
#pragma once

#include "hone-k-common.cuh"

struct GemvArgs {
  const int4 *q;
  const void *s;
  int rows, cols, nchunk;
  const float *x;
  const int8_t *xq;
  const float2 *xds;
  int n_tok;
  const float *bias;
  const float *res;
  float *y;
  int epi;
  const float *norm_g;
  float eps;
  int nq, nkv, hd;
  const int32_t *pos;
  const float *inv_freq;
  __half *k_pool, *v_pool;
  const int32_t *block_table;
  int early;          /* issue the first weight loads before waiting on the previous kernel */
  int late_trigger;   /* PDL: let the next kernel launch at entry (0), after the main loop (1), or right after the PDL wait (2) */
  int pf_first;       /* blocks from this one on prefetch a slice of pf after their main loop */
  int role;           /* hone-k-gemv.cu: the GEMV's place in a decode layer (gemv_role), 0 unknown */
  int epi_pf;         /* BF16/F16: prefetch the epilogue's inputs into L1 after the PDL wait (epi_prefetch) */
  HoneKPrefetch pf;
  /* Quantization in the epilogue (hone_k_gemv_epiq; hone-k-gemv.cu only, NULL elsewhere).
   * Consumer: xq holds the int8 quantization of x·g (not normalized) and
   * in_ssq[cols/32] the Σx² of each 32 inputs: the row sums are multiplied
   * by rsqrt(Σ/cols + eps) before the epilogue. Producer: every 32 outputs
   * (after ADD/SWIGLU) are quantized as out·out_g (out_g NULL: 1) into
   * out_q/out_ds, and their Σout² into out_ssq (NULL: not written), by the
   * first block of a thread-block cluster that owns those 32 outputs. */
  const float *in_ssq;
  int8_t *out_q;
  float2 *out_ds;
  float *out_ssq;
  const float *out_g;
  /* Q4Z (hone-k-gemv.cu only): zero points [rows][ng] (u8; s: f16 scales
   * [rows][ng]), chunks a group = 1 << cshift; the input xh (16-bit fixed
   * point, tile order) and xhd [n_tok][cols/32] (d, Σv) (HoneKActH16) */
  const uint8_t *z;
  int ng, cshift;
  const uint16_t *xh;
  const float2 *xhd;
  HONE_K_TRACE_FIELD   /* kernel_trace builds only (hone-k-trace.cuh) */
};

/* Write one rotated (or plain) pair of a q/k/v row pair for token t. */
static __device__ __forceinline__ void
rope_kv_store (const GemvArgs &a, int row, int t, float v0, float v1)
{
  const int hd = a.hd;
  const int head = row / hd, d = row - head * hd;
  const int p = *a.pos + t;
  if (head < a.nq + a.nkv)
    {
      float sn, cs;
      sincosf ((float) p * a.inv_freq[d >> 1], &sn, &cs);
      const float r0 = v0 * cs - v1 * sn, r1 = v0 * sn + v1 * cs;
      if (head < a.nq)
        {
          const float qs = rsqrtf ((float) hd);
          float *qo = a.y + (size_t) t * (a.nq + 2 * a.nkv) * hd + row;
          qo[0] = r0 * qs;
          qo[1] = r1 * qs;
          return;
        }
      v0 = r0;
      v1 = r1;
    }
  const bool is_k = head < a.nq + a.nkv;
  const int kvh = head - a.nq - (is_k ? 0 : a.nkv);
  const int page = a.block_table[p / HONE_K_KV_BLOCK], slot = p % HONE_K_KV_BLOCK;
  __half *dst = (is_k ? a.k_pool : a.v_pool)
                + (((size_t) page * a.nkv + kvh) * HONE_K_KV_BLOCK + slot) * hd;
  *(__half2 *) (dst + d) = __floats2half2_rn (v0, v1);
}

/* s + w·x for one BF16/F16 chunk (8 weights) against x0|x1. */
template <int WT>
static __device__ __forceinline__ float
dot_chunk_f (int4 w, float4 x0, float4 x1, float s)
{
  const uint32_t ww[4] = { (uint32_t) w.x, (uint32_t) w.y, (uint32_t) w.z, (uint32_t) w.w };
  float f[8];
#pragma unroll
  for (int i = 0; i < 4; i++)
    {
      if (WT == HONE_K_BF16)
        {
          f[2 * i] = bf16_lo (ww[i]);
          f[2 * i + 1] = bf16_hi (ww[i]);
        }
      else
        {
          __half2 h = *(const __half2 *) &ww[i];
          float2 ff = __half22float2 (h);
          f[2 * i] = ff.x;
          f[2 * i + 1] = ff.y;
        }
    }
  s = fmaf (f[0], x0.x, s); s = fmaf (f[1], x0.y, s);
  s = fmaf (f[2], x0.z, s); s = fmaf (f[3], x0.w, s);
  s = fmaf (f[4], x1.x, s); s = fmaf (f[5], x1.y, s);
  s = fmaf (f[6], x1.z, s); s = fmaf (f[7], x1.w, s);
  return s;
}

/* acc + one Q8_0 half block (16 quants, scale bits sc) against 16 int8 of x (scale xd). */
static __device__ __forceinline__ float
dot_chunk_q8 (int4 w, uint32_t sc, int4 xv, float xd, float acc)
{
  int d = 0;
  d = __dp4a (w.x, xv.x, d);
  d = __dp4a (w.y, xv.y, d);
  d = __dp4a (w.z, xv.z, d);
  d = __dp4a (w.w, xv.w, d);
  const float wd = f16_bits_to_f32 ((uint16_t) sc);
  return fmaf (wd * xd, (float) d, acc);
}

/* acc + one Q4_0/Q4_1 block (32 quants, scale bits sc: d, or d|m<<16) against
 * x elements 0..15 (xa) and 16..31 (xb), xd = (d, d·Σq) of x's block. */
template <int WT>
static __device__ __forceinline__ float
dot_chunk_q4 (int4 q, uint32_t sc, int4 xa, int4 xb, float2 xd, float acc)
{
  int d = 0;
  d = __dp4a (q.x & 0x0F0F0F0F, xa.x, d);
  d = __dp4a (q.y & 0x0F0F0F0F, xa.y, d);
  d = __dp4a (q.z & 0x0F0F0F0F, xa.z, d);
  d = __dp4a (q.w & 0x0F0F0F0F, xa.w, d);
  d = __dp4a ((q.x >> 4) & 0x0F0F0F0F, xb.x, d);
  d = __dp4a ((q.y >> 4) & 0x0F0F0F0F, xb.y, d);
  d = __dp4a ((q.z >> 4) & 0x0F0F0F0F, xb.z, d);
  d = __dp4a ((q.w >> 4) & 0x0F0F0F0F, xb.w, d);
  const float wd = f16_bits_to_f32 ((uint16_t) (sc & 0xffffu));
  if (WT == HONE_K_Q4_0)
    return acc + wd * fmaf (xd.x, (float) d, -8.f * xd.y);
  const float wm = f16_bits_to_f32 ((uint16_t) (sc >> 16));
  return acc + fmaf (wd * xd.x, (float) d, wm * xd.y);
}

/* dp4a with unsigned a and signed / unsigned b (PTX dp4a.u32.s32 / .u32.u32): W4A16's
 * nibbles against the hi / lo bytes of its input, Q6_K's values 0..63 against int8 (kquant). */
static __device__ __forceinline__ int
dp4a_us (uint32_t a, uint32_t b, int c)
{
  int d;
  asm ("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

static __device__ __forceinline__ unsigned
dp4a_uu (uint32_t a, uint32_t b, unsigned c)
{
  unsigned d;
  asm ("dp4a.u32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

/* acc + one Q4Z chunk (32 weights q, scale bits s, zero point z) against its
 * 32 inputs as HoneKActH16's 16-bit fixed point v (xv[i]: values 8i..8i+7 as
 * hi bytes, hi bytes, lo bytes, lo bytes in the nibble order of q's word i)
 * with xd = (d, Σv bits): s·d·(Σ q·v − z·Σv), the sums exact in integers —
 * 2 LOP3/SHF + 4 dp4a a word, no dequantization to f16. */
static __device__ __forceinline__ float
dot_chunk_w4 (int4 q, uint32_t s, uint32_t z, const uint4 (&xv)[4], float2 xd, float acc)
{
  const uint32_t ww[4] = { (uint32_t) q.x, (uint32_t) q.y, (uint32_t) q.z, (uint32_t) q.w };
  int hi = 0;
  unsigned lo = 0;
#pragma unroll
  for (int i = 0; i < 4; i++)
    {
      const uint32_t wa = ww[i] & 0x0F0F0F0Fu, wb = (ww[i] >> 4) & 0x0F0F0F0Fu;
      hi = dp4a_us (wa, xv[i].x, hi);
      hi = dp4a_us (wb, xv[i].y, hi);
      lo = dp4a_uu (wa, xv[i].z, lo);
      lo = dp4a_uu (wb, xv[i].w, lo);
    }
  /* |Σ q·v|, |z·Σv| ≤ 32·15·32767 < 2^24: exact in int32; the f32 of their difference rounds only past 2^24 (6e-8) */
  const int sum = hi * 256 + (int) lo - (int) z * __float_as_int (xd.y);
  return fmaf (f16_bits_to_f32 ((uint16_t) s) * xd.x, (float) sum, acc);
}

/* The epilogue's global inputs of a warp's rows row0..row0+R-1 (the
 * residual, the bias, RoPE's position and frequencies) into L1 after the PDL
 * wait (GemvArgs.epi_pf, HONE_GEMV_EPI_PF=1; off by default). Session 16
 * measured it slower at run time for every type (the loads it saves are not
 * what the tail waits for), but the BF16/F16 kernels keep the branch: with it
 * ptxas allocates their registers differently (o/down 99 -> 64, gate|up
 * 64 -> 48, no spills) and the BF16 step runs 1.9 % faster with the branch
 * off (tests/bench/RESULTS-cuda.md, "Decode, session 16"); launch bounds
 * forcing the same counts spill and run 2.4 % slower. */
static __device__ __forceinline__ void
prefetch_l1 (const void *p)
{
  asm volatile ("prefetch.global.L1 [%0];" :: "l"(p));
}

template <int R>
static __device__ __forceinline__ void
epi_prefetch (const GemvArgs &a, int row0)
{
  if (row0 >= a.rows)
    return;
  const int last = row0 + R - 1 < a.rows ? row0 + R - 1 : a.rows - 1;
  if (a.epi == HONE_K_EPI_ADD)
    for (int t = 0; t < a.n_tok; t++)
      {
        prefetch_l1 (a.res + (size_t) t * a.rows + row0);
        prefetch_l1 (a.res + (size_t) t * a.rows + last);
      }
  if (a.bias)
    {
      prefetch_l1 (a.bias + row0);
      prefetch_l1 (a.bias + last);
    }
  if (a.epi == HONE_K_EPI_ROPE_KV)
    {
      prefetch_l1 (a.pos);
      prefetch_l1 (a.inv_freq + ((row0 % a.hd) >> 1));
      prefetch_l1 (a.inv_freq + ((last % a.hd) >> 1));
    }
}

/* STORE / ADD epilogue of one finished row sum v (row < rows). */
static __device__ __forceinline__ void
epi_store (const GemvArgs &a, int row, int t, float v)
{
  const size_t i = (size_t) t * a.rows + row;
  if (a.bias)
    v += a.bias[row];
  if (a.epi == HONE_K_EPI_ADD)
    v += a.res[i];
  a.y[i] = v;
}

/* SWIGLU / ROPE_KV epilogue of an interleaved row pair (row even, row + 1 < rows). */
static __device__ __forceinline__ void
epi_pair (const GemvArgs &a, int row, int t, float v0, float v1)
{
  if (a.bias)
    {
      v0 += a.bias[row];
      v1 += a.bias[row + 1];
    }
  if (a.epi == HONE_K_EPI_ROPE_KV)
    rope_kv_store (a, row, t, v0, v1);
  else
    a.y[(size_t) t * (a.rows >> 1) + (row >> 1)] = silu (v0) * v1;
}

/* A warp's finished sums acc[r][t] of rows row0 + r through the epilogue,
 * each (row, token) written by one lane: lane (r·MAXT + t) mod 32. */
template <int R, int MAXT>
static __device__ __forceinline__ void
epi_rows (const GemvArgs &a, int row0, int lane, const float (&acc)[R][MAXT])
{
  if (a.epi == HONE_K_EPI_ROPE_KV || a.epi == HONE_K_EPI_SWIGLU)
    {
#pragma unroll
      for (int r = 0; r < R; r += 2)
#pragma unroll
        for (int t = 0; t < MAXT; t++)
          {
            const int row = row0 + r;
            if (t < a.n_tok && row + 1 < a.rows && lane == ((r * MAXT + t) & 31))
              epi_pair (a, row, t, acc[r][t], acc[r + 1][t]);
          }
    }
  else
    {
#pragma unroll
      for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < MAXT; t++)
          {
            const int row = row0 + r;
            if (t < a.n_tok && row < a.rows && lane == ((r * MAXT + t) & 31))
              epi_store (a, row, t, acc[r][t]);
          }
    }
}

/* ---- quantization in the epilogue (hone-k-gemv.cu) -------------------------
 * One-token decode of Q8_0/Q4_0/Q4_1 layers without the RMSNorm+quantize and
 * quantize launches. Per-32 int8 quantization is scale-invariant (quantizing
 * s·v gives the q of v and s·d), so the producing GEMV (o, down: residual
 * ADD; gate|up: SWIGLU) quantizes its output times the next norm's weights
 * (h·g) plus Σh² per 32 outputs, and the consuming GEMV (qkv, gate|up,
 * lm_head) multiplies its row sums by s = rsqrt(ΣΣh²/n + eps), summed in a
 * fixed order: deterministic. */
struct HoneKEpiQ {
  const float *in_ssq;   /* consumer: Σx² of each 32 inputs (op->xq holds x·g quantized); NULL: a plain input */
  HoneKActQ8 out;        /* producer: quantized output (out.q NULL: none) */
  float *out_ssq;        /* producer: Σout² of each 32 outputs, or NULL */
  const float *out_g;    /* producer: weights the output is multiplied by before quantizing, or NULL */
};
/* Whether hone_k_gemv_epiq() takes op (one token, Q8_0/Q4_0/Q4_1, sm_90; as a
 * producer: ADD/STORE with rows % 32 == 0 or SWIGLU with rows % 64 == 0). */
bool hone_k_gemv_epiq_takes (const HoneKGemvOp *op, bool producer);
int hone_k_gemv_epiq (const HoneKGemvOp *op, const HoneKEpiQ *eq, const HoneKPrefetch *pf, cudaStream_t stream);
/* Producers' launch shape: -1 the GEMV's own (default), else 0..HONE_K_GEMV_CONFIGS-1 (HONE_EPIQ_PCFG). */
void hone_k_gemv_epiq_set_producer_config (int cfg);
/* How many hone_k_gemv_epiq launches were enqueued so far (checks: which path ran). */
unsigned hone_k_gemv_epiq_runs (void);
/* decode_step's use of it: 1 on, 0 off (the default: measured slower), else a mask of the producers
 * that write an int8 output: 2 o, 4 gate|up (SwiGLU), 8 down (1 = 14);
 * -1 reads HONE_DECODE_EPIQ (the same values). */
extern "C" void hone_k_decode_set_epiq (int on);

/* ---- the staged GEMV (hone-k-gemv-staged.cu) ------------------------------- */

/* Whether hone_k_gemv_staged() takes op (sm_90, one token, a shape and types
 * it handles, staged GEMVs switched on). Quantized weights may then come
 * with op->x (f32, normalized by op->norm_g when set) instead of op->xq: the
 * kernel normalizes and quantizes the activation itself. */
bool hone_k_gemv_staged_takes (const HoneKGemvOp *op);
int hone_k_gemv_staged (const HoneKGemvOp *op, cudaStream_t stream);
/* How many staged launches were enqueued so far (checks: did a GEMV take the staged path). */
unsigned hone_k_gemv_staged_runs (void);
/* Shared-memory ring of a staged block in KB (0: default); HONE_GEMV_STAGE_KB. */
void hone_k_gemv_set_stage_kb (int kb);
/* How stages are loaded: 0 one bulk copy a part, 1 bulk copies of <= 4 KB,
 * 2 cp.async 16-byte copies by every thread; -1 the default
 * (HONE_GEMV_STAGED_LOADER). */
void hone_k_gemv_set_stage_loader (int loader);
