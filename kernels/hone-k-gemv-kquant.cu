/* hone-k-gemv-kquant.cu — llama.cpp's K-quants (Q4_K, Q6_K) kept native on the
 * GPU: the repack of GGUF super-blocks into the GPU layouts, the decode GEMV
 * (int8 activations, dp4a) and the dequantization to 16-bit used by the
 * prefill GEMMs and the embedding lookup.
 *
 * Layouts (hone-kernels.h has the contract). Both split a row into 32-value
 * blocks matching the activation's int8 blocks (HoneKActQ8), each block's
 * low 4 bits in one 16-byte chunk with Q4_0's nibble order (byte i: value i
 * in the low nibble, value 16+i in the high one), so a lane's chunk is one
 * coalesced 16-byte load and the 4-bit arithmetic is Q4_0's (mask, dp4a).
 * The rest of a super-block — Q4_K's (d, dmin, 12 bytes of 6-bit scales and
 * mins), Q6_K's 2 high bits per value, 16 int8 scales and d — lives in
 * separate arrays, byte for byte as many as in the GGUF block (4.5 and 6.5625
 * bits a weight): VRAM = file size.
 *
 * GEMV (the same shape as hone-k-gemv.cu's, see there): a warp owns R rows,
 * lane l takes 32-value blocks l, l+32, … (so every block a lane sees is
 * sub-block l % 8 of its super-block: the 6-bit scale decode is the same
 * shifts every time), U×R chunk loads in flight before any use, the first
 * batch issued before the PDL wait, the next kernel triggered after the main
 * loop; the epilogues (STORE, ADD, SWIGLU, ROPE_KV, bias) are hone-k-gemv.cuh's.
 *  - Q4_K block of 32: y += xd·(d·sc)·Σq·xq − (dmin·m)·(xd·Σxq): the second
 *    term is HoneKActQ8's d·Σq, as for Q4_1.
 *  - Q6_K: two halves of 16 with their own int8 scale; the 6-bit q is
 *    rebuilt per byte (low nibble | 2 high bits << 4, one LOP3 after a
 *    shift) and dp4a'd unsigned; the −32 offset enters as the dp4a
 *    accumulator's start, −32·Σxq of the half (4 dp4a with 0x20202020).
 * Prefetch hints (HoneKPrefetch) are not taken: decode_step leaves them off.
 */
#include "hone-k-gemv.cuh"   /* GemvArgs and the epilogues, shared with hone-k-gemv.cu */
#include "hone-k-kquant.cuh" /* the layouts' offsets, Q4_K's scale decode */
#include <string.h>
#include <stdlib.h>

/* ---- repack: GGUF super-blocks → GPU layout ------------------------------------ */

/* One thread per 256-value super-block. */
__global__ void
kq_repack_kernel (int t, const uint8_t *src, int rows, int cols, uint8_t *dq, uint8_t *ds, int dst_rows,
                  int row0, int step)
{
  const int nb = cols / 256;
  const size_t b = (size_t) blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= (size_t) rows * nb)
    return;
  const size_t r = b / nb, j = b - r * nb, dr = (size_t) row0 + r * step;
  const size_t sbi = dr * nb + j;   /* destination super-block index */
  uint8_t v[256];
  if (t == HONE_K_Q4_K)
    {
      const uint8_t *blk = src + b * 144;
#pragma unroll 1
      for (int p = 0; p < 4; p++)
        for (int l = 0; l < 32; l++)
          {
            v[64 * p + l] = blk[16 + 32 * p + l] & 15;
            v[64 * p + 32 + l] = blk[16 + 32 * p + l] >> 4;
          }
      for (int i = 0; i < 16; i++)
        ds[sbi * 16 + i] = blk[i];
    }
  else
    {
      const uint8_t *blk = src + b * 210, *ql = blk, *qh = blk + 128;
#pragma unroll 1
      for (int n = 0; n < 2; n++)
        for (int l = 0; l < 32; l++)
          {
            const uint8_t a = ql[64 * n + l], c = ql[64 * n + 32 + l], h = qh[32 * n + l];
            v[128 * n + l] = (a & 15) | ((h & 3) << 4);
            v[128 * n + 32 + l] = (c & 15) | (((h >> 2) & 3) << 4);
            v[128 * n + 64 + l] = (a >> 4) | (((h >> 4) & 3) << 4);
            v[128 * n + 96 + l] = (c >> 4) | (((h >> 6) & 3) << 4);
          }
      /* the high 2 bits: per 32-block two words (values 0..15, 16..31), value 4k+b of a half at bits 8b+2k */
      uint32_t *hw = (uint32_t *) (dq + q6k_qh_offset (dst_rows, cols)) + sbi * 16;
#pragma unroll 1
      for (int s = 0; s < 8; s++)
        for (int half = 0; half < 2; half++)
          {
            uint32_t word = 0;
            for (int k = 0; k < 4; k++)
              for (int bb = 0; bb < 4; bb++)
                word |= (uint32_t) (v[32 * s + 16 * half + 4 * k + bb] >> 4) << (8 * bb + 2 * k);
            hw[2 * s + half] = word;
          }
      for (int i = 0; i < 16; i++)
        ds[sbi * 16 + i] = blk[192 + i];
      uint8_t *d = ds + q6k_d_offset (dst_rows, cols) + sbi * 2;
      d[0] = blk[208];
      d[1] = blk[209];
    }
  uint8_t *o = dq + sbi * 128;
#pragma unroll 1
  for (int s = 0; s < 8; s++)
    for (int i = 0; i < 16; i++)
      o[16 * s + i] = (uint8_t) ((v[32 * s + i] & 15) | ((v[32 * s + 16 + i] & 15) << 4));
}

extern "C" int
hone_k_kquant_repack (int t, const void *src, int rows, int cols, HoneKMatrix *dst, int row0, int step,
                      cudaStream_t stream)
{
  if ((t != HONE_K_Q4_K && t != HONE_K_Q6_K) || dst->type != t || rows < 1 || cols < 256 || cols % 256
      || dst->cols != cols || step < 1 || row0 < 0 || row0 + (size_t) (rows - 1) * step >= (size_t) dst->rows
      || !dst->q || !dst->s)
    return (int) cudaErrorInvalidValue;
  const size_t n = (size_t) rows * (cols / 256);
  kq_repack_kernel<<<(unsigned) ((n + 127) / 128), 128, 0, stream>>> (
      t, (const uint8_t *) src, rows, cols, (uint8_t *) dst->q, (uint8_t *) dst->s, dst->rows, row0, step);
  return (int) cudaGetLastError ();
}

/* ---- single values (dequantization, embedding) ------------------------------------ */

/* Value k of row r, exact in f64 (d·sc·q − dmin·m and d·sc·(q−32) are products of
 * at most 21 significant bits), so a 16-bit result is rounded once. */
static __device__ __forceinline__ double
kq_elem (const HoneKMatrix &w, size_t r, int k)
{
  const int nchunk = w.cols / 32, c = k >> 5, i = k & 31;
  const size_t ci = r * nchunk + c;
  const uint8_t *qb = (const uint8_t *) w.q + ci * 16;
  const int nib = i < 16 ? (qb[i] & 15) : (qb[i - 16] >> 4);
  const size_t sbi = r * (nchunk / 8) + (c >> 3);
  if (w.type == HONE_K_Q4_K)
    {
      const uint32_t *rec = (const uint32_t *) w.s + sbi * 4;
      int sc, m;
      q4k_scale_min (rec[1], rec[2], rec[3], c & 7, sc, m);
      const double d = (double) __half2float (__ushort_as_half ((unsigned short) (rec[0] & 0xffff)));
      const double dmin = (double) __half2float (__ushort_as_half ((unsigned short) (rec[0] >> 16)));
      return d * sc * nib - dmin * m;
    }
  const uint32_t h = ((const uint32_t *) ((const uint8_t *) w.q + q6k_qh_offset (w.rows, w.cols)))[ci * 2 + (i >> 4)];
  const int jj = i & 15;
  const int q = nib | (int) (((h >> (8 * (jj & 3) + 2 * (jj >> 2))) & 3) << 4);
  const int sc = ((const int8_t *) w.s)[ci * 2 + (i >> 4)];
  const uint16_t db = ((const uint16_t *) ((const uint8_t *) w.s + q6k_d_offset (w.rows, w.cols)))[sbi];
  return (double) __half2float (__ushort_as_half (db)) * sc * (q - 32);
}

/* 8 consecutive values a thread, one 16-byte store. The 8 share one 32-value
 * chunk, so its quants come in one 8-byte load and its scales are decoded once
 * (kq_elem's arithmetic, exact in double); per element, as kq_elem, this took
 * ~300 µs for a gate|up (28672 × 4096, ~990 GB/s read + write). */
__global__ void __launch_bounds__ (256)
kq_dequant_kernel (HoneKMatrix w, void *dst, int to_f16)
{
  const size_t i8 = (size_t) blockIdx.x * 256 + threadIdx.x;
  if (i8 >= (size_t) w.rows * w.cols / 8)
    return;
  const size_t ci = i8 >> 2;            /* the chunk: r * (cols / 32) + k / 32 */
  const int i0 = (int) (i8 & 3) * 8;    /* its first value in the chunk */
  const uint2 qv = __ldg ((const uint2 *) ((const uint8_t *) w.q + ci * 16 + (i0 & 15)));
  const int sh = i0 >= 16 ? 4 : 0;
  double v[8];
  if (w.type == HONE_K_Q4_K)
    {
      const uint32_t *rec = (const uint32_t *) w.s + (ci >> 3) * 4;
      int sc, m;
      q4k_scale_min (__ldg (rec + 1), __ldg (rec + 2), __ldg (rec + 3), (int) (ci & 7), sc, m);
      const uint32_t r0 = __ldg (rec);
      const double d = (double) __half2float (__ushort_as_half ((unsigned short) (r0 & 0xffff)));
      const double dmin = (double) __half2float (__ushort_as_half ((unsigned short) (r0 >> 16)));
#pragma unroll
      for (int j = 0; j < 8; j++)
        {
          const int nib = (int) ((((j < 4 ? qv.x : qv.y) >> (8 * (j & 3))) >> sh) & 15);
          v[j] = d * sc * nib - dmin * m;
        }
    }
  else
    {
      const uint32_t h = __ldg ((const uint32_t *) ((const uint8_t *) w.q + q6k_qh_offset (w.rows, w.cols))
                                + ci * 2 + (i0 >> 4));
      const int sc = ((const int8_t *) w.s)[ci * 2 + (i0 >> 4)];
      const uint16_t db = ((const uint16_t *) ((const uint8_t *) w.s + q6k_d_offset (w.rows, w.cols)))[ci >> 3];
      const double d = (double) __half2float (__ushort_as_half (db));
#pragma unroll
      for (int j = 0; j < 8; j++)
        {
          const int nib = (int) ((((j < 4 ? qv.x : qv.y) >> (8 * (j & 3))) >> sh) & 15);
          const int jj = (i0 + j) & 15;
          const int q = nib | (int) (((h >> (8 * (jj & 3) + 2 * (jj >> 2))) & 3) << 4);
          v[j] = d * sc * (q - 32);
        }
    }
  uint16_t o[8];
#pragma unroll
  for (int j = 0; j < 8; j++)
    o[j] = to_f16 ? __half_as_ushort (__double2half (v[j])) : __bfloat16_as_ushort (__double2bfloat16 (v[j]));
  int4 p;
  p.x = (int) (o[0] | ((uint32_t) o[1] << 16));
  p.y = (int) (o[2] | ((uint32_t) o[3] << 16));
  p.z = (int) (o[4] | ((uint32_t) o[5] << 16));
  p.w = (int) (o[6] | ((uint32_t) o[7] << 16));
  ((int4 *) dst)[i8] = p;
}

extern "C" int
hone_k_kquant_dequant (const HoneKMatrix *w, void *dst, int to_f16, cudaStream_t stream)
{
  if ((w->type != HONE_K_Q4_K && w->type != HONE_K_Q6_K) || w->rows < 1 || w->cols < 256 || w->cols % 256
      || ((uintptr_t) dst & 15) || ((uintptr_t) w->q & 7) || ((uintptr_t) w->s & 3))
    return (int) cudaErrorInvalidValue;
  const size_t n = (size_t) w->rows * w->cols / 8;
  kq_dequant_kernel<<<(unsigned) ((n + 255) / 256), 256, 0, stream>>> (*w, dst, to_f16);
  return (int) cudaGetLastError ();
}

__global__ void __launch_bounds__ (256)
kq_embed_kernel (HoneKMatrix w, const int32_t *tokens, float *h)
{
  const int t = blockIdx.y;
  pdl_trigger ();
  pdl_wait ();
  int tok = tokens[t];
  if (tok < 0 || tok >= w.rows)
    tok = 0;   /* the host validates ids; never read out of bounds */
  for (int k = blockIdx.x * 256 + threadIdx.x; k < w.cols; k += gridDim.x * 256)
    h[(size_t) t * w.cols + k] = (float) kq_elem (w, (size_t) tok, k);
}

extern "C" int
hone_k_kquant_embed (const HoneKMatrix *w, const int32_t *tokens, int n_tok, float *h, cudaStream_t stream)
{
  if ((w->type != HONE_K_Q4_K && w->type != HONE_K_Q6_K) || n_tok < 1 || n_tok > 65535 || w->cols % 256)
    return (int) cudaErrorInvalidValue;
  return hone_k_launch (kq_embed_kernel, dim3 ((w->cols + 255) / 256, n_tok), dim3 (256), 0, stream, *w, tokens, h);
}

/* ---- decode GEMV ------------------------------------------------------------------ */

/* hone-k-gemv.cu's arguments (epilogue fields used as there) plus the K-quant arrays. */
struct KqArgs {
  GemvArgs a;               /* q: 16-byte chunks, the low 4 bits of one 32-value block each */
  const int4 *rec;          /* Q4_K: 16-byte record a super-block */
  const int2 *qh;           /* Q6_K: high bits, 8 bytes a 32-value block */
  const uint16_t *sc6;      /* Q6_K: two int8 scales a 32-value block */
  const uint16_t *d6;       /* Q6_K: f16 d a super-block */
};

static __device__ __forceinline__ int2
ld_stream2 (const int2 *p)
{
  int2 v;
  asm volatile ("ld.global.nc.L1::no_allocate.v2.s32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}

/* The high-bit word of a Q6_K half moved so value 4k+b's 2 bits sit at bits 8b+4, 8b+5. */
template <int K>
static __device__ __forceinline__ uint32_t
q6k_hi (uint32_t h)
{
  return (K == 0 ? h << 4 : K == 1 ? h << 2 : K == 2 ? h : h >> 2) & 0x30303030u;
}

/* P: 32-value blocks a lane takes at a time (Q4_K: 2 shares one record load
 * and one scale decode between two blocks — measured slower, a tuning
 * option only; Q6_K: 1). */
template <int WT, int R, int U, int KS, int MAXT, int P>
__global__ void __launch_bounds__ (256)
kq_gemv_kernel (KqArgs ka)
{
  const GemvArgs &a = ka.a;
  const int lane = threadIdx.x & 31;
  const int wib = threadIdx.x >> 5;
  const int ks = wib % KS;
  const int row0 = ((blockIdx.x * (8 / KS)) + wib / KS) * R;
  const int nchunk = a.nchunk, nsb = nchunk >> 3, nunit = nchunk / P;
  /* every unit (P blocks) this lane reads starts at sub-block `sub` of its super-block */
  const int sub = (lane * P) & 7;

  float acc[R][MAXT];
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int t = 0; t < MAXT; t++)
      acc[r][t] = 0.f;

  int4 w[U][R][P];
  int4 sc[U][R];   /* Q4_K: the super-block record; Q6_K: x, y high bits, z scales | d << 16 */

  auto load = [&] (int c0) {
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
      for (int r = 0; r < R; r++)
        {
          const int c = (c0 + u * 32 * KS) * P;   /* first block of the unit */
          const int row = row0 + r;
          if (c < nchunk && row < a.rows)
            {
              const size_t ci = (size_t) row * nchunk + c;
#pragma unroll
              for (int p = 0; p < P; p++)
                w[u][r][p] = ld_stream (a.q + ci + p);
              if (WT == HONE_K_Q4_K)
                sc[u][r] = __ldg (ka.rec + (size_t) row * nsb + (c >> 3));
              else
                {
                  const int2 h = ld_stream2 (ka.qh + ci);
                  sc[u][r] = make_int4 (h.x, h.y,
                                        (int) ((uint32_t) __ldg (ka.sc6 + ci)
                                               | ((uint32_t) __ldg (ka.d6 + (size_t) row * nsb + (c >> 3)) << 16)),
                                        0);
                }
            }
          else
            {
#pragma unroll
              for (int p = 0; p < P; p++)
                w[u][r][p] = make_int4 (0, 0, 0, 0);
              sc[u][r] = make_int4 (0, 0, 0, 0);
            }
        }
  };

  int c0 = ks * 32 + lane;
  load (c0);   /* the weights do not depend on the previous kernel */
  pdl_wait ();

  for (;;)
    {
#pragma unroll
      for (int u = 0; u < U; u++)
        {
          const int c = (c0 + u * 32 * KS) * P;
          if (c >= nchunk)
            break;
#pragma unroll
          for (int r = 0; r < R; r++)
            {
              const int4 q = w[u][r][0];
              if (WT == HONE_K_Q4_K)
                {
                  const int4 rec = sc[u][r];
                  const float2 dm = __half22float2 (*(const __half2 *) &rec.x);
                  float dsc[P], dmm[P];
#pragma unroll
                  for (int p = 0; p < P; p++)
                    {
                      int s6, m6;
                      q4k_scale_min ((uint32_t) rec.y, (uint32_t) rec.z, (uint32_t) rec.w, sub + p, s6, m6);
                      dsc[p] = dm.x * (float) s6;
                      dmm[p] = dm.y * (float) m6;
                    }
#pragma unroll
                  for (int t = 0; t < MAXT; t++)
                    {
                      if (t >= a.n_tok)
                        break;
#pragma unroll
                      for (int p = 0; p < P; p++)
                        {
                          const int4 qq = w[u][r][p];
                          const int4 *xp = (const int4 *) (a.xq + (size_t) t * nchunk * 32 + (size_t) (c + p) * 32);
                          const int4 xa = xp[0], xb = xp[1];
                          const float2 xd = a.xds[(size_t) t * nchunk + c + p];
                          int d = 0;
                          d = __dp4a (qq.x & 0x0F0F0F0F, xa.x, d);
                          d = __dp4a (qq.y & 0x0F0F0F0F, xa.y, d);
                          d = __dp4a (qq.z & 0x0F0F0F0F, xa.z, d);
                          d = __dp4a (qq.w & 0x0F0F0F0F, xa.w, d);
                          d = __dp4a ((qq.x >> 4) & 0x0F0F0F0F, xb.x, d);
                          d = __dp4a ((qq.y >> 4) & 0x0F0F0F0F, xb.y, d);
                          d = __dp4a ((qq.z >> 4) & 0x0F0F0F0F, xb.z, d);
                          d = __dp4a ((qq.w >> 4) & 0x0F0F0F0F, xb.w, d);
                          acc[r][t] = fmaf (dsc[p] * xd.x, (float) d, fmaf (-dmm[p], xd.y, acc[r][t]));
                        }
                    }
                }
              else   /* Q6_K */
                {
                  const uint32_t h0 = (uint32_t) sc[u][r].x, h1 = (uint32_t) sc[u][r].y, sd = (uint32_t) sc[u][r].z;
                  const uint32_t lo0 = ((uint32_t) q.x & 0x0F0F0F0Fu) | q6k_hi<0> (h0);
                  const uint32_t lo1 = ((uint32_t) q.y & 0x0F0F0F0Fu) | q6k_hi<1> (h0);
                  const uint32_t lo2 = ((uint32_t) q.z & 0x0F0F0F0Fu) | q6k_hi<2> (h0);
                  const uint32_t lo3 = ((uint32_t) q.w & 0x0F0F0F0Fu) | q6k_hi<3> (h0);
                  const uint32_t hi0 = (((uint32_t) q.x >> 4) & 0x0F0F0F0Fu) | q6k_hi<0> (h1);
                  const uint32_t hi1 = (((uint32_t) q.y >> 4) & 0x0F0F0F0Fu) | q6k_hi<1> (h1);
                  const uint32_t hi2 = (((uint32_t) q.z >> 4) & 0x0F0F0F0Fu) | q6k_hi<2> (h1);
                  const uint32_t hi3 = (((uint32_t) q.w >> 4) & 0x0F0F0F0Fu) | q6k_hi<3> (h1);
                  const int sa = (int) (int8_t) (sd & 0xff), sb = (int) (int8_t) ((sd >> 8) & 0xff);
                  const float d6 = __half2float (__ushort_as_half ((unsigned short) (sd >> 16)));
#pragma unroll
                  for (int t = 0; t < MAXT; t++)
                    {
                      if (t >= a.n_tok)
                        break;
                      const int4 *xp = (const int4 *) (a.xq + (size_t) t * nchunk * 32 + (size_t) c * 32);
                      const int4 xa = xp[0], xb = xp[1];
                      const float xd = a.xds[(size_t) t * nchunk + c].x;
                      /* −32·Σx of each half starts its accumulator: Σ(q − 32)·x */
                      int na = __dp4a (0x20202020, xa.x, 0);
                      na = __dp4a (0x20202020, xa.y, na);
                      na = __dp4a (0x20202020, xa.z, na);
                      na = __dp4a (0x20202020, xa.w, na);
                      int nb = __dp4a (0x20202020, xb.x, 0);
                      nb = __dp4a (0x20202020, xb.y, nb);
                      nb = __dp4a (0x20202020, xb.z, nb);
                      nb = __dp4a (0x20202020, xb.w, nb);
                      int da = -na, db = -nb;
                      da = dp4a_us (lo0, xa.x, da);
                      da = dp4a_us (lo1, xa.y, da);
                      da = dp4a_us (lo2, xa.z, da);
                      da = dp4a_us (lo3, xa.w, da);
                      db = dp4a_us (hi0, xb.x, db);
                      db = dp4a_us (hi1, xb.y, db);
                      db = dp4a_us (hi2, xb.z, db);
                      db = dp4a_us (hi3, xb.w, db);
                      acc[r][t] = fmaf (d6 * xd, (float) (sa * da + sb * db), acc[r][t]);
                    }
                }
            }
        }
      c0 += 32 * U * KS;
      if (c0 >= nunit)
        break;
      load (c0);
    }
  pdl_trigger ();

#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int t = 0; t < MAXT; t++)
      acc[r][t] = warp_sum (acc[r][t]);
  if (KS > 1)
    {
      /* the K slices of a row group meet in shared memory */
      __shared__ float red[8][R][MAXT];
      if (lane == 0)
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
          for (int t = 0; t < MAXT; t++)
            red[wib][r][t] = acc[r][t];
      __syncthreads ();
      if (ks != 0)
        return;
#pragma unroll
      for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < MAXT; t++)
          {
            float v = 0.f;
#pragma unroll
            for (int k = 0; k < KS; k++)
              v += red[wib + k][r][t];
            acc[r][t] = v;
          }
    }

  /* each (row, token) result is written by one lane */
  epi_rows<R, MAXT> (a, row0, lane, acc);
}

/* 2..4 tokens: optionally the kernel instantiated for at most 4 (half the
 * accumulators and token loops of the 8-token one). Session 4 checked it
 * (every launch shape at 2..4 tokens against f64) but its timing sweep did
 * not come back from the device, so it is off by default: a tuning option
 * until measured. -1: read HONE_KQUANT_TIERS=0/1 (default 0). */
static int kq_tiers = -1;

extern "C" void
hone_k_kquant_set_tiers (int on)
{
  kq_tiers = on;
}

static bool
kq_tiers_on (void)
{
  if (kq_tiers < 0)
    {
      const char *e = getenv ("HONE_KQUANT_TIERS");
      kq_tiers = e && e[0] == '1' ? 1 : 0;
    }
  return kq_tiers != 0;
}

template <int WT, int R, int U, int KS, int P = 1>
static int
kq_launch_t (const KqArgs &a, cudaStream_t stream)
{
  const int groups = (a.a.rows + R - 1) / R;
  const dim3 grid ((groups + (8 / KS) - 1) / (8 / KS)), block (256);
  if (a.a.n_tok == 1)
    return hone_k_launch (kq_gemv_kernel<WT, R, U, KS, 1, P>, grid, block, 0, stream, a);
  if (a.a.n_tok <= 4 && kq_tiers_on ())
    return hone_k_launch (kq_gemv_kernel<WT, R, U, KS, 4, P>, grid, block, 0, stream, a);
  return hone_k_launch (kq_gemv_kernel<WT, R, U, KS, HONE_K_MAX_DECODE, P>, grid, block, 0, stream, a);
}

/* Launch shapes <rows a warp, units (P blocks) in flight a lane, warps
 * splitting a row, P>: 0..3 as hone-k-gemv.cu's table (<4,2,1>, <2,4,2>,
 * <2,2,1>, <2,4,4>), 4 <2,4,1>; 5..7 Q4_K's paired blocks <2,2,1,2>,
 * <2,2,2,2>, <2,2,4,2> (Q6_K: the same bytes in flight unpaired, <2,4,KS>). */
static int kq_forced_config = -1;

extern "C" void
hone_k_kquant_set_config (int config)
{
  kq_forced_config = config;
}

template <int WT>
static int
kq_launch_cfg (int cfg, const KqArgs &a, cudaStream_t stream)
{
  switch (cfg)
    {
    case 0: return kq_launch_t<WT, 4, 2, 1> (a, stream);
    case 1: return kq_launch_t<WT, 2, 4, 2> (a, stream);
    case 2: return kq_launch_t<WT, 2, 2, 1> (a, stream);
    case 3: return kq_launch_t<WT, 2, 4, 4> (a, stream);
    case 4: return kq_launch_t<WT, 2, 4, 1> (a, stream);
    case 5: if constexpr (WT == HONE_K_Q4_K) return kq_launch_t<WT, 2, 2, 1, 2> (a, stream);
            else return kq_launch_t<WT, 2, 4, 1> (a, stream);
    case 6: if constexpr (WT == HONE_K_Q4_K) return kq_launch_t<WT, 2, 2, 2, 2> (a, stream);
            else return kq_launch_t<WT, 2, 4, 2> (a, stream);
    default: if constexpr (WT == HONE_K_Q4_K) return kq_launch_t<WT, 2, 2, 4, 2> (a, stream);
             else return kq_launch_t<WT, 2, 4, 4> (a, stream);
    }
}

template <int WT>
static int
kq_launch (const KqArgs &a, int cols, cudaStream_t stream)
{
  if (kq_forced_config >= 0 && kq_forced_config < HONE_K_KQUANT_CONFIGS)
    return kq_launch_cfg<WT> (kq_forced_config, a, stream);
  /* One token (the sweep in tests/bench/RESULTS-cuda.md, "Q4_K / Q6_K native,
   * session 3"): <2,2,1> everywhere but the long rows of down (14336
   * columns), which Q4_K splits over 2 warps <2,4,2> and Q6_K over 4 <2,4,4>.
   * The paired Q4_K blocks (5..7) measured slower on every matrix. Several
   * tokens: <2,4,2> (not swept). */
  if (a.a.n_tok == 1)
    {
      if (cols >= 8192)
        return kq_launch_cfg<WT> (WT == HONE_K_Q4_K ? 1 : 3, a, stream);
      return kq_launch_cfg<WT> (2, a, stream);
    }
  return kq_launch_cfg<WT> (1, a, stream);
}

extern "C" int
hone_k_kquant_gemv (const HoneKGemvOp *op, cudaStream_t stream)
{
  const HoneKMatrix *w = op->w;
  if ((w->type != HONE_K_Q4_K && w->type != HONE_K_Q6_K) || op->n_tok < 1 || op->n_tok > HONE_K_MAX_DECODE
      || w->rows < 1 || w->cols < 256 || w->cols % 256 || !op->xq || !op->xq->q || !op->xq->ds || !op->y
      || op->norm_g || op->epilogue < HONE_K_EPI_STORE || op->epilogue > HONE_K_EPI_ROPE_KV
      || (op->epilogue == HONE_K_EPI_ADD && !op->res))
    return (int) cudaErrorInvalidValue;
  if ((op->epilogue == HONE_K_EPI_SWIGLU || op->epilogue == HONE_K_EPI_ROPE_KV) && (w->rows & 1))
    return (int) cudaErrorInvalidValue;
  if (op->epilogue == HONE_K_EPI_ROPE_KV
      && (op->hd <= 0 || (op->hd & 1) || w->rows != (op->nq + 2 * op->nkv) * op->hd || !op->pos || !op->inv_freq
          || !op->k_pool || !op->v_pool || !op->block_table))
    return (int) cudaErrorInvalidValue;
  KqArgs ka;
  memset (&ka, 0, sizeof ka);
  GemvArgs &a = ka.a;
  a.q = (const int4 *) w->q;
  a.s = w->s;
  if (w->type == HONE_K_Q4_K)
    ka.rec = (const int4 *) w->s;
  else
    {
      ka.qh = (const int2 *) ((const uint8_t *) w->q + q6k_qh_offset (w->rows, w->cols));
      ka.sc6 = (const uint16_t *) w->s;
      ka.d6 = (const uint16_t *) ((const uint8_t *) w->s + q6k_d_offset (w->rows, w->cols));
    }
  a.rows = w->rows;
  a.cols = w->cols;
  a.nchunk = w->cols / 32;
  a.xq = op->xq->q;
  a.xds = op->xq->ds;
  a.n_tok = op->n_tok;
  epi_args_from_op (a, op);
  return w->type == HONE_K_Q4_K ? kq_launch<HONE_K_Q4_K> (ka, w->cols, stream)
                                : kq_launch<HONE_K_Q6_K> (ka, w->cols, stream);
}

/* ---- fused matrices of parts in different types (HONE_K_PARTS) --------------
 * llama.cpp's Q4_K_M mix stores attn_q/attn_k as Q4_K and attn_v as Q6_K in
 * some layers: their q|k|v is kept as up to 3 native parts instead of one F16
 * matrix (3.6× the bytes of Q4_K). Decode runs one GEMV a part (STORE, bias
 * at the part's offset), so the RoPE/KV epilogue cannot be fused: the caller
 * runs hone_k_rope_kv after, as for qwen3. The per-type GEMVs write rows with
 * their own row stride, so with several tokens a part's output lands in tmp
 * first and a copy kernel puts it at its columns of y. */

static bool
parts_valid (const HoneKMatrix *w)
{
  if (w->type != HONE_K_PARTS || w->n_parts < 1 || w->n_parts > HONE_K_MAX_PARTS || !w->parts)
    return false;
  int rows = 0;
  for (int i = 0; i < w->n_parts; i++)
    {
      const HoneKMatrix *p = &w->parts[i];
      if (p->type == HONE_K_PARTS || p->cols != w->cols || p->rows < 1 || !p->q)
        return false;
      rows += p->rows;
    }
  return rows == w->rows;
}

/* Weights whose GEMV takes the f32 input (RMSNorm fused) rather than HoneKActQ8. */
static bool
part_takes_f32 (const HoneKMatrix *p)
{
  return p->type == HONE_K_BF16 || p->type == HONE_K_F16 || p->type == HONE_K_Q4Z;
}

/* y[t][row0 + r] = tmp[t][r] for t < n_tok, r < prow (row stride of y: ystride). */
__global__ void __launch_bounds__ (256)
parts_scatter_kernel (const float *tmp, int prow, float *y, int ystride, int row0)
{
  const int r = blockIdx.x * 256 + threadIdx.x, t = blockIdx.y;
  pdl_trigger ();
  pdl_wait ();
  if (r < prow)
    y[(size_t) t * ystride + row0 + r] = tmp[(size_t) t * prow + r];
}

extern "C" int
hone_k_gemv_parts (const HoneKGemvOp *op, float *tmp, cudaStream_t stream)
{
  const HoneKMatrix *w = op->w;
  if (!w || !parts_valid (w) || op->n_tok < 1 || op->n_tok > HONE_K_MAX_DECODE || !op->x || !op->y
      || op->epilogue != HONE_K_EPI_STORE || (op->n_tok > 1 && !tmp))
    return (int) cudaErrorInvalidValue;
  bool need_q = false;
  for (int i = 0; i < w->n_parts; i++)
    need_q |= !part_takes_f32 (&w->parts[i]);
  if (need_q)
    {
      if (!op->xq || !op->xq->q || !op->xq->ds || w->cols % 32)
        return (int) cudaErrorInvalidValue;
      /* one norm+quantize for all the quantized parts (they read the same int8 rows); op->xq
       * is const as a GEMV input, its buffers are the caller's scratch */
      HoneKActQ8 xq = *op->xq;
      if (op->norm_g)
        HONE_K_CHECK ((cudaError_t) hone_k_rmsnorm (op->x, op->norm_g, op->n_tok, w->cols, op->eps, NULL, &xq, NULL, 0,
                                                    stream));
      else
        HONE_K_CHECK ((cudaError_t) hone_k_quantize (op->x, op->n_tok, w->cols, &xq, NULL, 0, stream));
    }
  int row0 = 0;
  for (int i = 0; i < w->n_parts; i++)
    {
      const HoneKMatrix *p = &w->parts[i];
      HoneKGemvOp po;
      memset (&po, 0, sizeof po);
      po.w = p;
      po.n_tok = op->n_tok;
      po.bias = op->bias ? op->bias + row0 : NULL;
      po.epilogue = HONE_K_EPI_STORE;
      po.y = op->n_tok == 1 ? op->y + row0 : tmp;
      if (part_takes_f32 (p))
        {
          po.x = op->x;
          po.norm_g = op->norm_g;
          po.eps = op->eps;
          po.xh = op->xh;   /* a Q4Z part's packed-input scratch (parts run one after another) */
        }
      else
        po.xq = op->xq;
      HONE_K_CHECK ((cudaError_t) hone_k_gemv_ex (&po, stream));
      if (op->n_tok > 1)
        HONE_K_CHECK ((cudaError_t) hone_k_launch (parts_scatter_kernel, dim3 ((unsigned) (p->rows + 255) / 256,
                                                                                 (unsigned) op->n_tok),
                                                   dim3 (256), 0, stream, (const float *) tmp, p->rows, op->y,
                                                   w->rows, row0));
      row0 += p->rows;
    }
  return 0;
}

extern "C" int
hone_k_parts_dequant (const HoneKMatrix *w, void *dst, int to_f16, cudaStream_t stream)
{
  if (!parts_valid (w) || !dst)
    return (int) cudaErrorInvalidValue;
  size_t off = 0;
  for (int i = 0; i < w->n_parts; i++)
    {
      const HoneKMatrix *p = &w->parts[i];
      HONE_K_CHECK ((cudaError_t) hone_k_dequant (p, (char *) dst + off * 2, to_f16, stream));
      off += (size_t) p->rows * p->cols;
    }
  return 0;
}
