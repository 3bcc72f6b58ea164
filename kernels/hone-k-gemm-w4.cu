/* hone-k-gemm-w4.cu — the fused quantized-weight GEMM of prefill chunks: 4-bit (AWQ HONE_K_Q4Z,
 * GGUF Q4_0/Q4_1, the K-quants Q4_K/Q6_K), GGUF Q8_0 (session 51; the name stayed from the
 * 4-bit start), and q|k|v parts of those types:
 * Y[n][rows] (+)= X[n][cols]·Wᵀ with W dequantized in registers, never written out.
 *
 * Why: above HONE_K_MAX_DECODE tokens the prefill GEMMs dequantized each matrix
 * to f16 (st->w16) and ran cuBLASLt on it: per weight 0.52 bytes read + 2 written
 * + 2 read again, a whole pass over ~19 GB for an 8B model whatever the prompt's
 * length (AWQ TTFT at 64 tokens 13.4 ms against BF16's 7.3 ms on an H100, session
 * 49). Here the packed weights are read once a token tile and go straight to the
 * tensor cores; up to the measured threshold (hone_k_w4_gemm_max_for) it replaces that
 * pass, above it cuBLASLt's GEMM efficiency wins the pass back.
 *
 * Shape (all from the GPU layout of hone-kernels.h, no repack):
 *  - a block is 4 warps over 128 rows (2 m16 tiles a warp) × 8·NT tokens (NT n8
 *    tiles); grid x = token tiles (fastest: the tiles of one row range run
 *    together and share its weights through L2), y = row ranges, z = k splits;
 *  - a k step is 128 k. Each pipeline stage holds the block's weight tile (128 rows
 *    × 4 chunks of 32 weights, 8 KB), its X tile and the rows' scales and zero
 *    points; W4G_STAGES − 1 stages are in flight while one is computed. Weights and
 *    X come by cp.async; X is read in its natural order (a token's 256 bytes by 16
 *    consecutive threads) and stored [tile][lane][piece], a lane's 16-byte piece p
 *    at p ^ ((lane >> 1) & 3), so that the stores and the B reads are free of bank
 *    conflicts. Scales and zero points (2 + 1 bytes a group, too small for
 *    cp.async) come by plain loads, thread i for the block's row i, two steps
 *    before they are stored into their stage, three before they are used;
 *  - lane (g = lane / 4, t = lane % 4) takes chunk t of its 4 rows g, g + 8, 16 + g,
 *    24 + g from the stage; each 32-bit word i of a chunk gives, by hone-k-w4.cuh's
 *    LOP3 conversion, its weights 8i..8i+7 as 4 f16 pairs (q − z), exact, then × s
 *    (one f16 rounding: the very values hone_k_q4z_dequant writes for cuBLASLt);
 *  - mma.sync m16n8k16 (f16 in, f32 accumulate) takes them as A with the k order
 *    permuted per lane: in step 2i + h, a lane's "k = 2t, 2t+1" are its chunk's
 *    weights 8i + 4h, +1 and "k = 2t + 8, 2t + 9" are 8i + 4h + 2, +3. B follows
 *    the same order, so a lane's B registers for one n8 tile and two steps are 16
 *    consecutive bytes of X (its token g, its chunk t, piece i): one 16-byte load;
 *  - the K-quants (session 51) share Q4_0's nibble layout; their scales come as raw
 *    words (Q4_K's 16-byte super-block record, Q6_K's int8 scales and d) and are
 *    decoded to f16 words of the Q4_1 form (Q4_K: d·sc | −dmin·m) or a scale per
 *    16 values (Q6_K: d·sc) when stored into the stage; Q6_K's 2 high bits a
 *    weight come as a fifth 4 KB of the stage and are OR'ed into the same f16
 *    patterns (w6_word), so its pairs come out as q − 32, exact;
 *  - Q8_0 (session 51): a chunk is 32 bytes, two 16-byte halves a row in the stage
 *    (16 KB of weights a stage), half p of row r at p ^ (r & 1) against bank
 *    conflicts; its words 2i, 2i + 1 hold Q4Z word i's weights in the same order, so
 *    X and B are Q4Z's; int8 → f16 by one XOR and two PRMTs onto 0x64 exponent bytes
 *    (1024 + q + 128, less 1152: exact), × d;
 *  - X is zero-filled past n and past cols (a row's last partial step multiplies
 *    clamped weight loads by 0);
 *  - a split over k writes f32 partials to @scratch and w4g_reduce_kernel sums
 *    them in a fixed order (results do not depend on timing), then applies the
 *    epilogue; without a split the block stores Y itself. The split count is the
 *    one with the least modelled time (hone_k_w4_gemm_splits, fitted in session 54). Stream-K (the
 *    tiles' k steps shared evenly by one wave of blocks, shared tiles summed by a
 *    second kernel) was built and measured in sessions 53-54: 20 % slower on gate|up
 *    at 128 tokens, never faster — a part-empty wave of this kernel runs faster a
 *    block, and the f32 partials cost more than the balance wins; taken out.
 * Measured (tests/bench/RESULTS-cuda.md, "Session 50"): the first version (weights
 * one step ahead in registers, per-lane scale loads) streamed ~1 TB/s of packed
 * weights at 16 tokens; ncu found its warps waiting on the scale loads and X's reads
 * touching twice the sectors they needed, which shaped the stages above. Session 53
 * cut the k step's instructions by a quarter to two fifths (GGUF B operands from one
 * load, fill addresses once a thread: 8-15 % faster at 64-128 tokens); its ncu then
 * found two warps a scheduler with no eligible warp 68 % of the cycles (latency-bound). */
#include "hone-k-w4.cuh"
#include "hone-k-kquant.cuh"

#define W4G_WARPS 4
#define W4G_ROWS (W4G_WARPS * 32)   /* rows a block: 2 m16 tiles a warp */
#define W4G_MIN_STEPS 4             /* k steps of 128 a split at least */
#define W4G_BLOCK_COST 2            /* a block's fixed cost (pipeline fill, stores), in k steps */
#define W4G_ALONE_RATE 0.8          /* one block alone on an SM: its rate against several's */
#define W4G_SUM_COST 1.0            /* summing a split's partials: fixed, in k steps */
#define W4G_SUM_COST_MB 0.2         /* and a MB of partials written and read, in k steps of 64-token tiles */
#ifndef W4G_STAGES
#define W4G_STAGES 4                /* pipeline stages, W4G_STAGES − 1 in flight */
#endif
#ifndef W4G_STAGES8
#define W4G_STAGES8 W4G_STAGES      /* the same for 64-token tiles (NT = 8) */
#endif
#ifndef W4G_MINB8
#define W4G_MINB8 2                 /* blocks an SM ptxas must fit at NT = 8 (registers) */
#endif
/* (W4G_STAGES8 and W4G_MINB8 are measurement knobs, -D at build time: session 53) */
template <int NT>
static __host__ __device__ constexpr int
w4g_stages (void)
{
  return NT == 8 ? W4G_STAGES8 : W4G_STAGES;
}
#define W4G_WTILE (W4G_ROWS * 4)    /* 16-byte units of a stage's 4-bit weight tile (Q8_0: twice) */
#define W4G_SZ16 W4G_ROWS           /* 16-byte units of a stage's scales: [4 groups][row] words */
#define W4G_SZ_AHEAD 3              /* a step's scales are loaded this many steps before use */

struct W4GArgs {
  const uint4 *q;          /* [rows][nchunk] chunks of 32 weights (low nibbles for Q6_K) */
  const void *s;           /* [rows][ng] f16 scales (Q4Z, Q4_0), f16 d | m << 16 words (Q4_1), 16-byte
                            * super-block records (Q4_K, ng = cols / 256), int8 scales [rows][cols / 16] (Q6_K) */
  const uint8_t *z;        /* [rows][ng] zero points (Q4Z) */
  const uint2 *qh;         /* Q6_K: [rows][nchunk] the chunks' 2 high bits, 8 bytes a chunk */
  const uint16_t *d6;      /* Q6_K: [rows][cols / 256] f16 d */
  const __half *x;         /* [n][cols] */
  void *y;                 /* [n][ldy], f32 or f16 */
  float *part;             /* [split][n][rows] f32, or NULL */
  int n, rows, cols, nchunk, ng, cshift, ksteps, kper, y16, acc, ldy;
};

/* A stage in 16-byte units: the weight tile (Q8_0's twice the 4-bit one), Q6_K's high bits
 * (128 rows × 32 bytes), X, the scales */
static __host__ __device__ constexpr int
w4g_wtile (int wt)
{
  return wt == HONE_K_Q8_0 ? 2 * W4G_WTILE : W4G_WTILE;
}

static __host__ __device__ constexpr int
w4g_htile (int wt)
{
  return wt == HONE_K_Q6_K ? W4G_ROWS * 2 : 0;
}

static __host__ __device__ constexpr int
w4g_stage16 (int nt, int wt)
{
  return w4g_wtile (wt) + w4g_htile (wt) + nt * 128 + W4G_SZ16;
}

/* GGUF's 4-bit nibble order (byte b: weight b low, b + 16 high), against Q4Z's and Q8_0's
 * (a 32-bit word holds 8 or 4 consecutive weights) */
static __host__ __device__ constexpr bool
w4g_gguf_nibbles (int wt)
{
  return wt == HONE_K_Q4_0 || wt == HONE_K_Q4_1 || wt == HONE_K_Q4_K || wt == HONE_K_Q6_K;
}

static __device__ __forceinline__ void
w4g_cp16 (uint32_t dst, const void *src, bool valid)
{
  const int n = valid ? 16 : 0;   /* 0: the 16 bytes are zero-filled, nothing read */
  asm volatile ("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(n) : "memory");
}

static __device__ __forceinline__ void
w4g_commit (void)
{
  asm volatile ("cp.async.commit_group;" ::: "memory");
}

template <int N>
static __device__ __forceinline__ void
w4g_wait (void)
{
  asm volatile ("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* A thread's part of every stage fill, worked out once (session 53: recomputed each k step, the
 * fills' index arithmetic and clamps were ~150 of a step's ~940 instructions, ptxas knowing
 * nothing of blockDim): the weight rows its cp.async units read, in 16-byte units of @q (rows
 * past the matrix clamped to the last; X is zero there), Q6_K's high-bit rows in 8-byte units
 * of @qh, and its X piece (token tile row tid / 16 + 8r, piece tid % 16 of a step's 128 k). */
template <int WT>
struct W4GFill {
  static constexpr int NW = WT == HONE_K_Q8_0 ? 8 : 4;
  uint32_t wrow[NW], hrow[2];
  const __half *x;   /* this thread's X piece at k step 0, token row tid / 16 */
  int xrows;         /* token rows tid / 16 + 8r < xrows are inside the chunk */
  int xk;            /* the piece's first k within a step */
  uint32_t xdst;     /* its byte offset in a stage's X tile, r = 0 (+ r · 2 KB) */
};

template <int WT>
static __device__ __forceinline__ void
w4g_fill_init (const W4GArgs &a, W4GFill<WT> &f, int row0, int tok0)
{
  const int tid = (int) threadIdx.x;
#pragma unroll
  for (int r = 0; r < W4GFill<WT>::NW; r++)
    {
      /* Q8_0: unit q = r·128 + tid is row q / 8, half q % 8 (two halves a chunk); else row q / 4, chunk q % 4 */
      const int rl = WT == HONE_K_Q8_0 ? r * 16 + (tid >> 3) : r * 32 + (tid >> 2);
      const int row = min (row0 + rl, a.rows - 1);
      f.wrow[r] = (uint32_t) row * (uint32_t) (WT == HONE_K_Q8_0 ? 2 * a.nchunk : a.nchunk);
    }
#pragma unroll
  for (int r = 0; r < 2; r++)
    f.hrow[r] = WT == HONE_K_Q6_K ? (uint32_t) min (row0 + r * 64 + (tid >> 1), a.rows - 1) * (uint32_t) a.nchunk : 0u;
  const int xr = tid >> 4, c = (tid >> 2) & 3, p = tid & 3;
  f.xk = c * 32 + p * 8;
  f.xrows = a.n - tok0;
  f.x = a.x + ((size_t) (tok0 + xr) * (size_t) a.cols + (size_t) f.xk);
  const int L = (xr & 7) * 4 + c;
  f.xdst = (uint32_t) (L * 4 + (p ^ ((L >> 1) & 3))) * 16;
}

/* The weight tile of k step @ks into @buf: [row][chunk] of the block's 128 rows × 4 chunks
 * (chunks past the row clamped to valid ones; X is zero there), for Q6_K then the chunks'
 * high bits, [row][chunk] 8 bytes each (cols % 256 == 0: whole steps). Q8_0: [row][8 halves
 * of 16 bytes], half p of row r at p ^ (r & 1), so that the two rows a quarter-warp reads at
 * once (g, g + 1) fall in different banks. */
template <int WT>
static __device__ __forceinline__ void
w4g_stage_w (const W4GArgs &a, const W4GFill<WT> &f, uint32_t buf, int ks)
{
  const int tid = (int) threadIdx.x;
  if constexpr (WT == HONE_K_Q8_0)
    {
      const int p = tid & 7, c = min (ks * 4 + (p >> 1), a.nchunk - 1);
#pragma unroll
      for (int r = 0; r < 8; r++)
        {
          const int rl = r * 16 + (tid >> 3);
          w4g_cp16 (buf + (uint32_t) (rl * 8 + (p ^ (rl & 1))) * 16, a.q + (f.wrow[r] + (uint32_t) (2 * c + (p & 1))),
                    true);
        }
      return;
    }
  if (WT == HONE_K_Q6_K)
#pragma unroll
    for (int r = 0; r < 2; r++)
      w4g_cp16 (buf + (uint32_t) (w4g_wtile (WT) + r * 128 + tid) * 16,
                a.qh + (f.hrow[r] + (uint32_t) (ks * 4 + (tid & 1) * 2)), true);
  const int c = min (ks * 4 + (tid & 3), a.nchunk - 1);
#pragma unroll
  for (int r = 0; r < 4; r++)
    w4g_cp16 (buf + (uint32_t) (r * 128 + tid) * 16, a.q + (f.wrow[r] + (uint32_t) c), true);
}

/* Q6_K: the 2 high bits of word @wi's pairs (w4_word's order after the PRMT) moved onto the
 * f16 patterns w4_word builds, so that its pairs come out as 6-bit q − z: a chunk's high-bit
 * word h0 (values 0..15) holds value 4k + b at bits 8b + 2k, 8b + 2k + 1, h1 the same for 16..31;
 * a low-nibble pair wants them at bits 4, 5 (and 20, 21), a high-nibble pair (taken × 1/16) at 8, 9. */
static __device__ __forceinline__ void
w6_word (uint32_t v, uint32_t h0, uint32_t h1, int wi, __half2 zc0, __half2 nzc1, __half2 (&o)[4])
{
  const __half2 sixteenth = as_h2 (0x2C002C00u);
  const uint32_t u0 = h0 >> (2 * wi), u1 = h1 >> (2 * wi);
  const uint32_t e0 = __byte_perm (u0, 0, 0x4140) << 4, e2 = __byte_perm (u0, 0, 0x4342) << 4;
  const uint32_t e1 = __byte_perm (u1, 0, 0x4140) << 8, e3 = __byte_perm (u1, 0, 0x4342) << 8;
  const uint32_t a0 = lop3_and_or (e0, 0x00300030u, lop3_and_or (v, 0x000f000fu, 0x64006400u));
  const uint32_t a1 = lop3_and_or (e1, 0x03000300u, lop3_and_or (v, 0x00f000f0u, 0x64006400u));
  v >>= 8;
  const uint32_t a2 = lop3_and_or (e2, 0x00300030u, lop3_and_or (v, 0x000f000fu, 0x64006400u));
  const uint32_t a3 = lop3_and_or (e3, 0x03000300u, lop3_and_or (v, 0x00f000f0u, 0x64006400u));
  o[0] = __hsub2 (as_h2 (a0), zc0);
  o[1] = __hfma2 (as_h2 (a1), sixteenth, nzc1);
  o[2] = __hsub2 (as_h2 (a2), zc0);
  o[3] = __hfma2 (as_h2 (a3), sixteenth, nzc1);
}

/* Q8_0: word @u's 4 int8 weights as 2 f16 pairs, exact: (1024 + (q + 128)) − 1152 */
static __device__ __forceinline__ void
w8_word (uint32_t u, __half2 &o0, __half2 &o1)
{
  const __half2 k1152 = as_h2 (0x64806480u);
  u ^= 0x80808080u;
  o0 = __hsub2 (as_h2 (__byte_perm (u, 0x64646464u, 0x4140)), k1152);
  o1 = __hsub2 (as_h2 (__byte_perm (u, 0x64646464u, 0x4342)), k1152);
}

/* One k step of a warp: the lane's 4 chunks @w (rows g, g + 8, 16 + g, 24 + g; Q8_0's second
 * halves in w[1]; Q6_K's high bits @hb) dequantized with @sz, times the X tile @xb (w4g_stage_x's layout), into
 * c[m16 tile][n8 tile]. Q4Z words hold weights 8i..8i+7 of a chunk (hone-k-w4.cuh). GGUF
 * bytes (Q4_0, Q4_1, Q4_K, Q6_K's low nibbles) hold weight b in the low nibble and b + 16
 * in the high one; one PRMT (bytes 0, 2, 1, 3) lines word i up so that the same LOP3s give
 * the pairs (4i, 4i+1), (4i+16, 4i+17), (4i+2, 4i+3), (4i+18, 4i+19), and B takes the same
 * elements: halves of X pieces i/2 and 2 + i/2. A scale word @sz is, per type:
 *   Q4Z, Q4_0: s | z << 16, w = s·(q − z);
 *   Q4_1, Q4_K: d | m << 16, w = d·q + m (Q4_K: d·sc and −dmin·m of the 32-block, in f16);
 *   Q6_K: the f16 d·sc of values 0..15 | that of 16..31 << 16, w = d·sc·(q − 32);
 *   Q8_0: d, w = d·q (words 2i and 2i + 1 give weights 8i..8i+7, Q4Z's word i's order). */
template <int NT, int WT>
static __device__ __forceinline__ void
w4g_step (float (&c)[2][NT][4], const uint4 (&w)[2][4], const uint2 (&hb)[4], const uint32_t (&sz)[4],
          const uint4 *xb, int lane)
{
  constexpr bool GGUF = w4g_gguf_nibbles (WT);
  constexpr bool AFFINE = WT == HONE_K_Q4_1 || WT == HONE_K_Q4_K;
  __half2 zc0[4], nzc1[4], s2[4], m2[4];
#pragma unroll
  for (int i = 0; i < 4; i++)
    {
      w4_zero (AFFINE ? 0u : WT == HONE_K_Q6_K ? 32u : sz[i] >> 16, zc0[i], nzc1[i]);
      s2[i] = as_h2 ((sz[i] & 0xffffu) | (sz[i] << 16));
      m2[i] = as_h2 ((sz[i] >> 16) | (sz[i] & 0xffff0000u));
    }
  const int base = lane * 4, sw = (lane >> 1) & 3;
#pragma unroll
  for (int wp = 0; wp < 2; wp++)
    {
      uint32_t A[2][4][4];   /* [word of the pair][row][pair] */
#pragma unroll
      for (int h = 0; h < 2; h++)
#pragma unroll
        for (int i = 0; i < 4; i++)
          {
            const int wi = 2 * wp + h;
            uint32_t word = wi == 0 ? w[0][i].x : wi == 1 ? w[0][i].y : wi == 2 ? w[0][i].z : w[0][i].w;
            if (GGUF)
              word = __byte_perm (word, 0, 0x3120);
            __half2 o[4];
            if (WT == HONE_K_Q8_0)
              {
                const uint4 &v = w[wp][i];   /* words 2wi, 2wi + 1: 16 bytes wp, words 2h, 2h + 1 */
                w8_word (h ? v.z : v.x, o[0], o[1]);
                w8_word (h ? v.w : v.y, o[2], o[3]);
              }
            else if (WT == HONE_K_Q6_K)
              w6_word (word, hb[i].x, hb[i].y, wi, zc0[i], nzc1[i], o);
            else
              w4_word (word, zc0[i], nzc1[i], o);
#pragma unroll
            for (int p = 0; p < 4; p++)
              A[h][i][p] = h2_bits (AFFINE                 ? __hfma2 (o[p], s2[i], m2[i])
                                    : WT == HONE_K_Q6_K ? __hmul2 (o[p], (p & 1) ? m2[i] : s2[i])
                                                        : __hmul2 (o[p], s2[i]));
          }
#pragma unroll
      for (int j = 0; j < NT; j++)
        {
          const uint4 *xj = xb + j * 128 + base;   /* this lane's 4 pieces, swizzled */
          if (GGUF)
            {
              /* word wi = 2wp + h's low-nibble pairs (o[0], o[2]: weights 4wi..4wi+3) meet
               * 32-bit words 2h, 2h + 1 of X piece wp, its high-nibble pairs (o[1], o[3]) the
               * same words of piece 2 + wp: each mma's B is two adjacent registers of one
               * 16-byte load (session 53: pairing lo.x with hi.x cost ~180 register moves a step) */
              const uint4 lo = xj[wp ^ sw], hi = xj[(2 + wp) ^ sw];
#pragma unroll
              for (int h = 0; h < 2; h++)
#pragma unroll
                for (int mi = 0; mi < 2; mi++)
                  {
                    w4_mma (c[mi][j], A[h][2 * mi][0], A[h][2 * mi + 1][0], A[h][2 * mi][2], A[h][2 * mi + 1][2],
                            h ? lo.z : lo.x, h ? lo.w : lo.y);
                    w4_mma (c[mi][j], A[h][2 * mi][1], A[h][2 * mi + 1][1], A[h][2 * mi][3], A[h][2 * mi + 1][3],
                            h ? hi.z : hi.x, h ? hi.w : hi.y);
                  }
              continue;
            }
          uint4 b[2];
          b[0] = xj[(2 * wp) ^ sw];
          b[1] = xj[(2 * wp + 1) ^ sw];
#pragma unroll
          for (int h = 0; h < 2; h++)
#pragma unroll
            for (int mi = 0; mi < 2; mi++)
              {
                w4_mma (c[mi][j], A[h][2 * mi][0], A[h][2 * mi + 1][0], A[h][2 * mi][1], A[h][2 * mi + 1][1],
                         b[h].x, b[h].y);
                w4_mma (c[mi][j], A[h][2 * mi][2], A[h][2 * mi + 1][2], A[h][2 * mi][3], A[h][2 * mi + 1][3],
                         b[h].z, b[h].w);
              }
        }
    }
}

/* The block's results: partials of its split, or Y (+)= them. */
template <int NT>
static __device__ __forceinline__ void
w4g_store (const W4GArgs &a, const float (&c)[2][NT][4], int rowb, int tok0, int g, int t)
{
  /* C fragment: c[e] is row g (e < 2) or g + 8, token 2t + (e & 1) of the n8 tile */
#pragma unroll
  for (int mi = 0; mi < 2; mi++)
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        {
          const int r = rowb + mi * 16 + (e >> 1) * 8 + g, tok = tok0 + 8 * j + 2 * t + (e & 1);
          if (r >= a.rows || tok >= a.n)
            continue;
          const size_t idx = (size_t) tok * a.ldy + r;
          const float v = c[mi][j][e];
          if (a.part)
            a.part[(size_t) blockIdx.z * a.n * a.rows + (size_t) tok * a.rows + r] = v;
          else if (a.y16)
            {
              __half *y = (__half *) a.y + idx;
              *y = __float2half_rn (a.acc ? __half2float (*y) + v : v);
            }
          else
            {
              float *y = (float *) a.y + idx;
              *y = a.acc ? *y + v : v;
            }
        }
}

/* The X tile of k step @ks into @buf: natural order in (a token's 256 bytes by 16 consecutive
 * threads), [tile][lane][swizzled piece] out (w4g_fill_init's xdst; tile r = token rows 8r..8r + 7). */
template <int NT, int WT>
static __device__ __forceinline__ void
w4g_stage_x (const W4GArgs &a, const W4GFill<WT> &f, uint32_t buf, int ks)
{
  const int k = ks * 128 + f.xk;
  const bool kok = k < a.cols;
#pragma unroll
  for (int r = 0; r < NT; r++)
    {
      /* past the chunk's tokens or the row's end the address is not read (size 0: zero-filled) */
      const bool ok = kok && ((int) threadIdx.x >> 4) + 8 * r < f.xrows;
      w4g_cp16 (buf + f.xdst + (uint32_t) r * 2048, f.x + ((size_t) r * 8 * (size_t) a.cols + (size_t) ks * 128), ok);
    }
}

/* The scales / zero points of row @row at k step @ks: groups (4 chunks) >> cshift of them
 * (Q4_0/Q4_1: a group is a 32-weight block, cshift 0); the K-quants' raw words, decoded
 * when stored (w4g_store_sz_row), two steps after the loads were issued: Q4_K the
 * super-block's record in s[0..3], Q6_K the step's 8 int8 scales in s[0..1] and d in z[0]. */
struct W4GSz {
  uint32_t s[4], z[4];
};

template <int WT>
static __device__ __forceinline__ void
w4g_load_sz_row (const W4GArgs &a, uint32_t row, int ks, W4GSz &r)
{
  /* @row: this thread's row times ng (Q6_K: times ksteps for its scales, ng from that) */
  if constexpr (WT == HONE_K_Q4_K)
    {
      const uint4 rec = __ldg ((const uint4 *) a.s + (row + (uint32_t) (ks >> 1)));
      r.s[0] = rec.x; r.s[1] = rec.y; r.s[2] = rec.z; r.s[3] = rec.w;
    }
  else if constexpr (WT == HONE_K_Q6_K)
    {
      const uint2 sc = __ldg ((const uint2 *) a.s + (row + (uint32_t) ks));
      r.s[0] = sc.x; r.s[1] = sc.y;
      r.z[0] = __ldg (a.d6 + (row / 2 + (uint32_t) (ks >> 1)));   /* ksteps = 2 · ng */
    }
  else
#pragma unroll
  for (int gg = 0; gg < 4; gg++)
    if (gg < (4 >> a.cshift))
      {
        const int c = min (ks * 4 + (gg << a.cshift), a.nchunk - 1);
        const uint32_t o = row + (uint32_t) (c >> a.cshift);
        if (WT == HONE_K_Q4_1)
          {
            const uint32_t dm = __ldg ((const uint32_t *) a.s + o);
            r.s[gg] = dm & 0xffffu;
            r.z[gg] = dm >> 16;
          }
        else
          {
            r.s[gg] = __ldg ((const uint16_t *) a.s + o);
            r.z[gg] = WT == HONE_K_Q4_0 ? 8u : WT == HONE_K_Q8_0 ? 0u : __ldg (a.z + o);
          }
      }
}

static __device__ __forceinline__ uint32_t
w4g_f16_bits (float v)
{
  return (uint32_t) __half_as_ushort (__float2half_rn (v));
}

/* into a stage's scale tile, [group][row] words (@dst: this row's word of group 0); @ks the step */
template <int WT>
static __device__ __forceinline__ void
w4g_store_sz_row (const W4GArgs &a, const W4GSz &r, uint32_t *dst, int ks)
{
  if constexpr (WT == HONE_K_Q4_K)
    {
      /* sub-blocks 4h..4h+3 of the record (h = ks & 1; q4k_scale_min's packing, 4 at a time) */
      const float d = __half2float (__ushort_as_half ((unsigned short) (r.s[0] & 0xffffu)));
      const float dmin = __half2float (__ushort_as_half ((unsigned short) (r.s[0] >> 16)));
      const uint32_t sc = (ks & 1) ? (r.s[3] & 0x0f0f0f0fu) | ((r.s[1] >> 2) & 0x30303030u) : r.s[1] & 0x3f3f3f3fu;
      const uint32_t mn = (ks & 1) ? ((r.s[3] >> 4) & 0x0f0f0f0fu) | ((r.s[2] >> 2) & 0x30303030u)
                                   : r.s[2] & 0x3f3f3f3fu;
#pragma unroll
      for (int gg = 0; gg < 4; gg++)
        dst[gg * W4G_ROWS] = w4g_f16_bits (d * (float) ((sc >> (8 * gg)) & 63u))
                             | (w4g_f16_bits (-dmin * (float) ((mn >> (8 * gg)) & 63u)) << 16);
    }
  else if constexpr (WT == HONE_K_Q6_K)
    {
      /* chunk gg's scales are int8 bytes 2gg (values 0..15) and 2gg + 1 (16..31) */
      const float d = __half2float (__ushort_as_half ((unsigned short) r.z[0]));
#pragma unroll
      for (int gg = 0; gg < 4; gg++)
        {
          const uint32_t w = r.s[gg >> 1] >> (16 * (gg & 1));
          dst[gg * W4G_ROWS] = w4g_f16_bits (d * (float) (int8_t) (w & 0xffu))
                               | (w4g_f16_bits (d * (float) (int8_t) ((w >> 8) & 0xffu)) << 16);
        }
    }
  else
#pragma unroll
  for (int gg = 0; gg < 4; gg++)
    if (gg < (4 >> a.cshift))
      dst[gg * W4G_ROWS] = r.s[gg] | (r.z[gg] << 16);
}

template <int NT, int WT>
__global__ void __launch_bounds__ (W4G_WARPS * 32, NT == 8 ? W4G_MINB8 : 3)
w4g_kernel (const W4GArgs a)
{
  extern __shared__ __align__ (16) uint4 w4g_xs[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int tok0 = blockIdx.x * 8 * NT;
  const int row0 = blockIdx.y * W4G_ROWS, rowb = row0 + warp * 32;
  const int ks0 = blockIdx.z * a.kper;
  const int nsteps = min (a.kper, a.ksteps - ks0);
  constexpr int stage16 = w4g_stage16 (NT, WT);   /* a stage in 16-byte units: weights, [high bits,] X, scales */
  constexpr int x16 = w4g_wtile (WT) + w4g_htile (WT), sz16 = x16 + NT * 128;
  const uint32_t sm0 = (uint32_t) __cvta_generic_to_shared (w4g_xs);
  const int gsel = t >> a.cshift;   /* this lane's group within a step */

  int wofs[4], sofs[4];   /* rows g, g + 8, 16 + g, 24 + g: chunk t in a weight tile (Q6_K: its high bits'
                           * 8-byte unit too), group word in a scale tile */
#pragma unroll
  for (int i = 0; i < 4; i++)
    {
      const int rl = warp * 32 + (i >> 1) * 16 + (i & 1) * 8 + g;
      wofs[i] = rl * 4 + t;
      sofs[i] = gsel * W4G_ROWS + rl;
    }
  /* this thread's row for the scale loads */
  const uint32_t my_row = (uint32_t) min (row0 + (int) threadIdx.x, a.rows - 1)
                          * (uint32_t) (WT == HONE_K_Q6_K ? a.ksteps : a.ng);   /* w4g_load_sz_row's @row */
  uint32_t *const sz_base = (uint32_t *) (w4g_xs + sz16) + threadIdx.x;   /* + stage · stage16 · 4 words */
  float c[2][NT][4];
#pragma unroll
  for (int mi = 0; mi < 2; mi++)
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        c[mi][j][e] = 0.f;

  W4GFill<WT> fl;
  w4g_fill_init<WT> (a, fl, row0, tok0);
  constexpr int STAGES = w4g_stages<NT> ();
  /* weights and X of the split's step s into stage buffer s % STAGES, one commit group */
  auto fill = [&] (int s) {
    if (s < nsteps)
      {
        const int b = s % STAGES;
        w4g_stage_w<WT> (a, fl, sm0 + b * stage16 * 16, ks0 + s);
        w4g_stage_x<NT, WT> (a, fl, sm0 + (b * stage16 + x16) * 16, ks0 + s);
      }
    w4g_commit ();
  };
#pragma unroll
  for (int st = 0; st < STAGES - 1; st++)
    fill (st);
  /* scales: step 0 stored now, steps 1 and 2 in the ring (P, Q) */
  W4GSz P, Q;
  if (nsteps > 0)
    {
      w4g_load_sz_row<WT> (a, my_row, ks0, P);
      w4g_store_sz_row<WT> (a, P, sz_base, ks0);
    }
  if (nsteps > 1)
    w4g_load_sz_row<WT> (a, my_row, ks0 + 1, P);
  if (nsteps > 2)
    w4g_load_sz_row<WT> (a, my_row, ks0 + 2, Q);
  /* one k step; R holds step it + 1's scales (loaded two steps ago) and takes step it + 3's */
  auto step = [&] (int it, W4GSz &R) {
    w4g_wait<STAGES - 2> ();
    __syncthreads ();   /* stage it is in; every warp is past step it − 1, whose buffer refills now */
    fill (it + STAGES - 1);
    if (it + 1 < nsteps)
      w4g_store_sz_row<WT> (a, R, sz_base + ((it + 1) % STAGES) * stage16 * 4, ks0 + it + 1);
    if (it + W4G_SZ_AHEAD < nsteps)
      w4g_load_sz_row<WT> (a, my_row, ks0 + it + W4G_SZ_AHEAD, R);
    const uint4 *sb = w4g_xs + (it % STAGES) * stage16;
    const uint32_t *szs = (const uint32_t *) (sb + sz16);
    uint4 w[2][4];
    uint2 hb[4];
    uint32_t sz[4];
#pragma unroll
    for (int i = 0; i < 4; i++)
      {
        if (WT == HONE_K_Q8_0)
          {
            /* row rl's halves 2t, 2t + 1, swizzled by w4g_stage_w (wofs = rl * 4 + t) */
            const int rl = wofs[i] >> 2, base = rl * 8 + 2 * (wofs[i] & 3), sw = rl & 1;
            w[0][i] = sb[base + sw];
            w[1][i] = sb[base + (1 ^ sw)];
          }
        else
          {
            w[0][i] = sb[wofs[i]];
            w[1][i] = make_uint4 (0, 0, 0, 0);
          }
        hb[i] = WT == HONE_K_Q6_K ? ((const uint2 *) (sb + w4g_wtile (WT)))[wofs[i]] : make_uint2 (0, 0);
        sz[i] = szs[sofs[i]];
      }
    w4g_step<NT, WT> (c, w, hb, sz, sb + x16, lane);
  };
  /* two steps an iteration, so that P and Q keep their roles: a register copy between
   * them waits for the load in flight into its source (session 50, call 6's ncu: 12 % of
   * the stall samples on such a move) */
  for (int it = 0; it < nsteps; it += 2)
    {
      step (it, P);
      if (it + 1 < nsteps)
        step (it + 1, Q);
    }
  w4g_wait<0> ();
  w4g_store<NT> (a, c, rowb, tok0, g, t);
}

/* The splits' partials summed in order, then the epilogue: one thread an output. */
__global__ void __launch_bounds__ (256)
w4g_reduce_kernel (const float *part, int splits, size_t count, int rows, int ldy, void *y, int y16, int acc)
{
  const size_t i = (size_t) blockIdx.x * 256 + threadIdx.x;
  if (i >= count)
    return;
  float v = 0.f;
  for (int z = 0; z < splits; z++)
    v += part[(size_t) z * count + i];
  const size_t tok = i / (size_t) rows, o = tok * (size_t) ldy + (i - tok * (size_t) rows);
  if (y16)
    {
      __half *p = (__half *) y + o;
      *p = __float2half_rn (acc ? __half2float (*p) + v : v);
    }
  else
    {
      float *p = (float *) y + o;
      *p = acc ? *p + v : v;
    }
}

/* A non-negative setting from the environment variable @name (negative or not a number: 0),
 * @unset when it is not set or empty */
static int
w4g_env (const char *name, int unset)
{
  const char *e = getenv (name);
  return e && *e ? max (atoi (e), 0) : unset;
}

/* The most splits over k: at least W4G_MIN_STEPS k steps a split, the partials (@part_bytes a
 * split) within @scratch_bytes */
static int
w4g_split_max (int ksteps, size_t part_bytes, size_t scratch_bytes)
{
  if (!scratch_bytes || !part_bytes)
    return 1;
  return (int) max ((size_t) 1, min ((size_t) (ksteps / W4G_MIN_STEPS), scratch_bytes / part_bytes));
}

/* The split over k with the least modelled time (session 54's sweep of forced splits, 8B
 * shapes at 16-192 tokens on four types; tests/bench/RESULTS-cuda.md, tests/cuda/fit-gemm-split.py):
 * an SM's share of the blocks × (steps a block + its fixed cost), one block alone on an SM at
 * W4G_ALONE_RATE of the rate of several (the kernel is throughput-bound there: a part-filled wave
 * is not as slow as a full one, which the former rule, whole waves, assumed), plus the sum of the
 * partials: a fixed cost and their bytes, written and read (a k step's time grows with the
 * tile's tokens). Host code, no GPU: the launcher passes its blocks an SM and the SM count. */
extern "C" int
hone_k_w4_gemm_splits (int n, int rows, int ksteps, int tile_tokens, int blocks_per_sm, int sms, size_t scratch_bytes)
{
  if (n < 1 || rows < 1 || ksteps < 1 || tile_tokens < 1 || sms < 1)
    return 1;
  const long blocks = (long) ((n + tile_tokens - 1) / tile_tokens) * ((rows + W4G_ROWS - 1) / W4G_ROWS);
  const size_t part_bytes = (size_t) n * rows * 4;
  const int smax = w4g_split_max (ksteps, part_bytes, scratch_bytes);
  int splits = 1;
  double best = -1;
  for (int sp = 1; sp <= smax; sp++)
    {
      const int kper = (ksteps + sp - 1) / sp;
      if ((ksteps + kper - 1) / kper != sp)
        continue;   /* the same split as a smaller count */
      const long load = (blocks * sp + sms - 1) / sms;   /* blocks an SM runs */
      const double rate = min ((long) blocks_per_sm, load) <= 1 ? W4G_ALONE_RATE : 1.0;
      double cost = (double) load * (kper + W4G_BLOCK_COST) / rate;
      if (sp > 1)
        cost += W4G_SUM_COST + W4G_SUM_COST_MB * (64.0 / tile_tokens) * (2.0 * sp * part_bytes / 1e6);
      if (best < 0 || cost < best)
        {
          best = cost;
          splits = sp;
        }
    }
  return splits;
}

static int w4g_sm_count = 0;

/* HONE_W4_GEMM_SPLIT=n: every launch split n ways over k (at most w4g_split_max) instead of
 * the cost model's choice — a measurement knob (session 54's sweep); unset or 0: the model */
static int
w4g_forced_split (void)
{
  static int n = -1;
  if (n < 0)
    n = w4g_env ("HONE_W4_GEMM_SPLIT", 0);
  return n;
}

template <int NT, int WT>
static int
w4g_launch (W4GArgs a, void *scratch, size_t scratch_bytes, cudaStream_t stream)
{
  static int bps = 0;
  void (*kern) (W4GArgs) = w4g_kernel<NT, WT>;
  const size_t smem = (size_t) w4g_stages<NT> () * w4g_stage16 (NT, WT) * 16;
  if (!bps)
    {
      HONE_K_CHECK (cudaFuncSetAttribute (kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int) smem));
      HONE_K_CHECK (cudaOccupancyMaxActiveBlocksPerMultiprocessor (&bps, kern, W4G_WARPS * 32, smem));
      if (bps < 1)
        bps = 1;
    }
  const int ttiles = (a.n + 8 * NT - 1) / (8 * NT), rtiles = (a.rows + W4G_ROWS - 1) / W4G_ROWS;
  const size_t part_bytes = (size_t) a.n * a.rows * 4;
  int splits = hone_k_w4_gemm_splits (a.n, a.rows, a.ksteps, 8 * NT, bps, w4g_sm_count, scratch ? scratch_bytes : 0);
  if (w4g_forced_split ())
    splits = max (1, min (w4g_forced_split (), w4g_split_max (a.ksteps, part_bytes, scratch ? scratch_bytes : 0)));
  a.kper = (a.ksteps + splits - 1) / splits;
  splits = (a.ksteps + a.kper - 1) / a.kper;   /* a forced count may need fewer */
  a.part = splits > 1 ? (float *) scratch : NULL;
  const dim3 grid ((unsigned) ttiles, (unsigned) rtiles, (unsigned) splits);
  kern<<<grid, W4G_WARPS * 32, smem, stream>>> (a);
  HONE_K_CHECK (cudaGetLastError ());
  if (splits > 1)
    {
      const size_t count = (size_t) a.n * a.rows;
      w4g_reduce_kernel<<<(unsigned) ((count + 255) / 256), 256, 0, stream>>> (a.part, splits, count, a.rows, a.ldy,
                                                                              a.y, a.y16, a.acc);
      HONE_K_CHECK (cudaGetLastError ());
    }
  return 0;
}

template <int WT>
static int
w4g_launch_n (W4GArgs a, void *scratch, size_t scratch_bytes, cudaStream_t stream)
{
  if (a.n <= 16)
    return w4g_launch<2, WT> (a, scratch, scratch_bytes, stream);
  if (a.n <= 32)
    return w4g_launch<4, WT> (a, scratch, scratch_bytes, stream);
  return w4g_launch<8, WT> (a, scratch, scratch_bytes, stream);
}

/* One matrix in a native layout (not PARTS) */
static int
w4g_supports_one (const HoneKMatrix *w)
{
  if (!w || w->rows < 1 || w->cols < 32 || w->cols % 32 || (size_t) w->rows * (w->cols / 32) > (size_t) INT32_MAX)
    return 0;
  switch (w->type)
    {
    case HONE_K_Q4_0: case HONE_K_Q4_1: case HONE_K_Q8_0: return 1;
    case HONE_K_Q4_K: case HONE_K_Q6_K: return w->cols % 256 == 0;
    case HONE_K_Q4Z:
      {
        const int g = w->group > 0 ? w->group : 32;
        return (g == 32 || g == 64 || g == 128) && w->cols % g == 0;
      }
    default: return 0;
    }
}

extern "C" int
hone_k_w4_gemm_supports (const HoneKMatrix *w)
{
  if (!w || w->type != HONE_K_PARTS)
    return w4g_supports_one (w);
  if (w->n_parts < 2 || w->n_parts > HONE_K_MAX_PARTS || !w->parts)
    return 0;
  int rows = 0;
  for (int i = 0; i < w->n_parts; i++)
    {
      if (!w4g_supports_one (&w->parts[i]) || w->parts[i].cols != w->cols)
        return 0;
      rows += w->parts[i].rows;
    }
  return rows == w->rows;
}

/* y's columns [0, w->rows) of its rows of @ldy elements (+)= x16·Wᵀ */
static int
w4g_run (const HoneKMatrix *w, int n, const void *x16, void *y, int ldy, int y16, int accumulate, void *scratch,
         size_t scratch_bytes, cudaStream_t stream)
{
  const int g = w->type == HONE_K_Q4Z && w->group > 0 ? w->group : 32;   /* GGUF blocks: 32 weights a scale */
  W4GArgs a;
  memset (&a, 0, sizeof a);
  a.q = (const uint4 *) w->q;
  a.s = w->s;
  a.ng = w->type == HONE_K_Q4_K || w->type == HONE_K_Q6_K ? w->cols / 256 : w->cols / g;
  a.z = w->type == HONE_K_Q4Z ? (const uint8_t *) w->s + (size_t) w->rows * a.ng * 2 : NULL;
  if (w->type == HONE_K_Q6_K)
    {
      a.qh = (const uint2 *) ((const uint8_t *) w->q + q6k_qh_offset (w->rows, w->cols));
      a.d6 = (const uint16_t *) ((const uint8_t *) w->s + q6k_d_offset (w->rows, w->cols));
    }
  a.x = (const __half *) x16;
  a.y = y;
  a.ldy = ldy;
  a.n = n;
  a.rows = w->rows;
  a.cols = w->cols;
  a.nchunk = w->cols / 32;
  a.cshift = g == 32 ? 0 : g == 64 ? 1 : 2;
  a.ksteps = (w->cols + 127) / 128;
  a.y16 = y16;
  a.acc = accumulate;
  switch (w->type)
    {
    case HONE_K_Q4_0: return w4g_launch_n<HONE_K_Q4_0> (a, scratch, scratch_bytes, stream);
    case HONE_K_Q4_1: return w4g_launch_n<HONE_K_Q4_1> (a, scratch, scratch_bytes, stream);
    case HONE_K_Q4_K: return w4g_launch_n<HONE_K_Q4_K> (a, scratch, scratch_bytes, stream);
    case HONE_K_Q6_K: return w4g_launch_n<HONE_K_Q6_K> (a, scratch, scratch_bytes, stream);
    case HONE_K_Q8_0: return w4g_launch_n<HONE_K_Q8_0> (a, scratch, scratch_bytes, stream);
    default: return w4g_launch_n<HONE_K_Q4Z> (a, scratch, scratch_bytes, stream);
    }
}

extern "C" int
hone_k_w4_gemm (const HoneKMatrix *w, int n, const void *x16, void *y, int y16, int accumulate, void *scratch,
                size_t scratch_bytes, cudaStream_t stream)
{
  if (!hone_k_w4_gemm_supports (w) || n < 1 || !x16 || !y || ((uintptr_t) x16 & 15)
      || (scratch && ((uintptr_t) scratch & 3)))
    return (int) cudaErrorInvalidValue;
  if (!w4g_sm_count)
    {
      int dev = 0;
      HONE_K_CHECK (cudaGetDevice (&dev));
      HONE_K_CHECK (cudaDeviceGetAttribute (&w4g_sm_count, cudaDevAttrMultiProcessorCount, dev));
    }
  if (w->type != HONE_K_PARTS)
    return w4g_run (w, n, x16, y, w->rows, y16, accumulate, scratch, scratch_bytes, stream);
  /* a q|k|v of parts in different types (Q4_K_M's Q4_K q|k + Q6_K v): one GEMM a part into its
   * columns of y, in order (the scratch is reused: the launches are ordered on @stream) */
  int row0 = 0;
  for (int i = 0; i < w->n_parts; i++)
    {
      void *yp = (char *) y + (size_t) row0 * (y16 ? 2 : 4);
      const int r = w4g_run (&w->parts[i], n, x16, yp, w->rows, y16, accumulate, scratch, scratch_bytes, stream);
      if (r)
        return r;
      row0 += w->parts[i].rows;
    }
  return 0;
}

/* The largest chunk prefill runs through hone_k_w4_gemm; above it, dequantization + cuBLASLt.
 * -1: not read yet; -2: no override (the defaults by type); else HONE_W4_GEMM_MAX / set_max's n. */
static int w4g_max = -1;

extern "C" void
hone_k_w4_gemm_set_max (int n)
{
  w4g_max = n < 0 ? -1 : n;
}

static int
w4g_override (void)
{
  if (w4g_max == -1)
    w4g_max = w4g_env ("HONE_W4_GEMM_MAX", -2);   /* negative or not a number: never fused */
  return w4g_max;
}

extern "C" int
hone_k_w4_gemm_max (void)
{
  const int o = w4g_override ();
  return o >= 0 ? o : HONE_K_W4_GEMM_MAX_DEFAULT;
}

extern "C" int
hone_k_w4_gemm_max_for (const HoneKMatrix *w)
{
  const int o = w4g_override ();
  if (o >= 0 || !w)
    return o >= 0 ? o : HONE_K_W4_GEMM_MAX_DEFAULT;
  if (w->type == HONE_K_PARTS)
    {
      /* one GEMM a part (hone_k_w4_gemm) or one dequantized matrix: the smallest part threshold */
      int m = HONE_K_W4_GEMM_MAX_DEFAULT;
      for (int i = 0; w->parts && i < w->n_parts; i++)
        m = min (m, hone_k_w4_gemm_max_for (&w->parts[i]));
      return m;
    }
  return w->type == HONE_K_Q8_0 || w->type == HONE_K_Q6_K ? HONE_K_W4_GEMM_MAX_WIDE : HONE_K_W4_GEMM_MAX_DEFAULT;
}
