/* hone-kernels.h — the CUDA kernels' plain C ABI (no GLib, no C++ in here).
 *
 * Everything the host side (src/core/cuda, tests/cuda) needs to run a
 * transformer step on the GPU: weight upload/repack, decode GEMVs with fused
 * dequantization, norms, RoPE + paged KV writes, flash-decoding and causal
 * flash attention, sampling, and hone_k_forward(), which enqueues a whole
 * step (decode or prefill) on a stream so that it can be captured as a graph.
 *
 * Conventions.
 *  - Every launcher returns a cudaError_t as int (0 = cudaSuccess) and only
 *    enqueues work on @stream; nothing synchronizes.
 *  - Activations are f32, row-major [n_tokens][features].
 *  - A weight matrix is y = W·x with W stored as rows (output features) of
 *    cols (input features), like GGUF (ne = {cols, rows}).
 *  - GPU weight layouts (made at upload by hone_k_repack from the GGUF bytes):
 *      BF16/F16: as stored, q = [rows][cols] 2-byte values, s unused.
 *      Q8_0: q = int8 [rows][cols] (blocks' quants, contiguous), s = f16 d [rows][cols/32].
 *      Q4_0: q = [rows][cols/2] bytes, each 16-byte group one GGUF block's qs
 *            (byte j: element j low nibble, j+16 high nibble), s = f16 d [rows][cols/32].
 *      Q4_1: q as Q4_0, s = f16 pairs (d, m) [rows][cols/32][2].
 *    Separating scales from quants makes every quant load a 16-byte aligned,
 *    coalesced load, which the 18/20/34-byte GGUF blocks are not.
 *      Q4_K (llama.cpp block_q4_K, 256 values: d, dmin, 6-bit scale/min per 32):
 *            q = [rows][cols/2] bytes, 16 per 32-value sub-block in Q4_0's nibble
 *            order (byte i: value i low nibble, 16+i high); s = [rows][cols/256]
 *            16-byte records {f16 d, f16 dmin, the 12 GGUF scale bytes}; value =
 *            d·sc·q − dmin·m. 4.5 bits a weight, as in the file.
 *      Q6_K (block_q6_K: 16 int8 scales per 256, f16 d, 6-bit q): q = the low
 *            nibbles [rows][cols/2] as Q4_K, then the high 2 bits [rows][cols/4]:
 *            per 32-value block two u32 (values 0..15, 16..31), value 4k+b of a
 *            half at bits 8b+2k, 8b+2k+1; s = int8 scales [rows][cols/16] (one
 *            per 16 consecutive values), then f16 d [rows][cols/256]; value =
 *            d·sc·(q − 32). 6.5625 bits a weight, as in the file.
 *            (Both: cols % 256 == 0; kernels/hone-k-gemv-kquant.cu.)
 *      Q4Z (AWQ int4, W4A16; from the host's HONE_DTYPE_Q4Z blocks, group g =
 *            HoneKMatrix.group, 32/64/128): q = [rows][cols/32] 16-byte chunks of
 *            32 weights, in 32-bit word i weight 8i+2p in nibble p and 8i+2p+1 in
 *            nibble p+4 (p = 0..3: one LOP3 gives an f16 pair of adjacent weights);
 *            s = f16 scale [rows][cols/g], then u8 zero point [rows][cols/g];
 *            w = s·(q − z). 0.5 + 3/g bytes a weight. Its GEMV takes the f32
 *            activation (RMSNorm fused) and runs HFMA2 on f16 (hone-k-gemv-w4.cu).
 *  - Quantized GEMVs use int8 dp4a against the activation quantized per 32
 *    elements (HoneKActQ8: d = absmax/127, and d·Σq kept for the zero-point
 *    terms), the way llama.cpp's MMVQ does: the 4-bit arithmetic is then a
 *    couple of LOP3s and DP4As per 8 weights instead of 8 conversions.
 *  - KV cache: f16, paged in blocks of HONE_K_KV_BLOCK tokens; pool layout per
 *    layer [n_blocks][n_kv_heads][HONE_K_KV_BLOCK][head_dim]; a sequence maps
 *    its logical block i to pool block table[i].
 *  - Q/K rows must be in adjacent-pair RoPE order for hone_k_forward (the
 *    host permutes half-split (HF, qwen) rows at upload: scores are unchanged
 *    because q and k are permuted alike). hone_k_rope_kv() itself takes either.
 */
#ifndef HONE_KERNELS_H
#define HONE_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cuBLAS and cuBLASLt are not linked: kernels/hone-k-cublas.c opens them
 * at their first use (linking cuBLASLt alone adds ~210 MB of resident memory
 * to every process, GPU or not). 0 when both libraries and every entry point
 * Hone calls are there; otherwise nonzero with the reason in why (≤ n bytes,
 * NUL-terminated). Thread-safe; the first call does the work. */
int hone_k_cublas_open (char *why, size_t n);

#define HONE_K_KV_BLOCK 64       /* tokens per KV page */
#define HONE_K_MAX_DECODE 8      /* tokens per step taken by the GEMV path */
#define HONE_K_ATTN_MAX_SPLITS 64
#define HONE_K_STREAM_SYNC 16    /* counter words a streamed decode launch site needs */

/* Numbers are GGUF's ggml_type, like HoneDType. */
typedef enum {
  HONE_K_F32 = 0, HONE_K_F16 = 1, HONE_K_Q4_0 = 2, HONE_K_Q4_1 = 3, HONE_K_Q8_0 = 8,
  HONE_K_Q4_K = 12, HONE_K_Q6_K = 14, HONE_K_BF16 = 30,
  HONE_K_Q4Z = 100,   /* Hone-internal AWQ int4 (HONE_DTYPE_Q4Z), never in GGUF */
  HONE_K_PARTS = 101, /* a fused matrix of row-range parts in their own types (HoneKMatrix.parts) */
} HoneKType;

#define HONE_K_MAX_PARTS 3

typedef struct HoneKMatrix {
  int type;          /* HoneKType of the GPU layout: BF16, F16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K, Q4Z, PARTS */
  int rows, cols;
  void *q;           /* values or packed quants (device) */
  void *s;           /* scales (device), NULL for BF16/F16 */
  int group;         /* Q4Z: weights per scale (32/64/128; 0 means 32); unused otherwise */
  /* HONE_K_PARTS only (q and s unused): a fused matrix whose pieces differ in
   * type — llama.cpp's Q4_K_M stores attn_q/attn_k as Q4_K and attn_v as Q6_K
   * in some layers — kept as n_parts (2..HONE_K_MAX_PARTS) matrices, each in
   * its own native layout, stacked in order: part i holds rows
   * [Σ_{j<i} parts[j].rows, + parts[i].rows); every part has this cols, and
   * the parts' rows sum to rows. Decode runs one GEMV a part
   * (hone_k_gemv_parts), prefill dequantizes part by part
   * (hone_k_parts_dequant); the host array is the caller's. */
  int n_parts;
  const struct HoneKMatrix *parts;
} HoneKMatrix;

/* Bytes the GPU layout of a rows×cols matrix of @type takes (q and s); 0 for a shape the type cannot have. */
size_t hone_k_matrix_bytes (int type, int rows, int cols, size_t *q_bytes, size_t *s_bytes);
/* The same for a Q4Z matrix of @group (other types ignore it); hone_k_matrix_bytes
 * counts Q4Z at group 32, the largest. 0 for a group Q4Z cannot have. */
size_t hone_k_matrix_bytes_g (int type, int rows, int cols, int group, size_t *q_bytes, size_t *s_bytes);
/* The GPU type a GGUF type is uploaded as (itself, F32 → F16); -1 if unsupported. */
int    hone_k_upload_type (int gguf_type);
/* Bytes of one GGUF row of @cols elements of @gguf_type; 0 if unsupported. */
size_t hone_k_gguf_row_bytes (int gguf_type, int cols);

/* Repack @rows GGUF rows (device bytes @src, GGUF layout of @gguf_type) into
 * @dst: source row r goes to destination row dst_row0 + r*dst_row_step (this
 * interleaves gate/up and concatenates q/k/v). dst->type must be
 * hone_k_upload_type(gguf_type). */
int hone_k_repack (int gguf_type, const void *src, int rows, int cols,
                   HoneKMatrix *dst, int dst_row0, int dst_row_step, cudaStream_t stream);
/* Dequantize a GPU matrix to bf16 (or f16 when to_f16) [rows][cols]. */
int hone_k_dequant (const HoneKMatrix *w, void *dst, int to_f16, cudaStream_t stream);
/* The Q4Z parts of hone_k_repack / hone_k_dequant (called by them; the GEMV is reached through hone_k_gemv_ex). */
int hone_k_q4z_repack (const void *src, int rows, int cols, HoneKMatrix *dst, int row0, int step, cudaStream_t stream);
int hone_k_q4z_dequant (const HoneKMatrix *w, void *dst, int to_f16, cudaStream_t stream);
/* Fused quantized-weight GEMM of prefill chunks (kernels/hone-k-gemm-w4.cu): y[n][w->rows] (+)=
 * x16[n][w->cols]·Wᵀ for a Q4Z (AWQ), Q4_0, Q4_1, Q8_0, Q4_K or Q6_K matrix (the K-quants:
 * cols % 256 == 0), or a HONE_K_PARTS one whose parts all are (one GEMM a part into its
 * columns of y), x16 f16 (16-byte aligned), y f32 or (y16) f16, the weights dequantized
 * in registers. @scratch (NULL: none) takes the f32 partials of a split over k when
 * n·rows·4 bytes a split fit in @scratch_bytes. */
int  hone_k_w4_gemm (const HoneKMatrix *w, int n, const void *x16, void *y, int y16, int accumulate,
                     void *scratch, size_t scratch_bytes, cudaStream_t stream);
int  hone_k_w4_gemm_supports (const HoneKMatrix *w);   /* 1 for a type and shape hone_k_w4_gemm takes */
/* Prefill chunks of at most hone_k_w4_gemm_max_for (w) tokens run matrix @w through hone_k_w4_gemm
 * (hone_k_gemm says which types), longer ones dequantize + cuBLASLt (0: never fused). The defaults
 * are measured (tests/bench/RESULTS-cuda.md, "Session 50", "Session 52", "Session 53"): the 4-bit
 * types (Q4Z, Q4_0, Q4_1, Q4_K) up to HONE_K_W4_GEMM_MAX_DEFAULT tokens, Q8_0 and Q6_K (more bytes
 * and work a k step) up to HONE_K_W4_GEMM_MAX_WIDE, a HONE_K_PARTS matrix up to its smallest part's.
 * HONE_W4_GEMM_MAX=n sets one threshold for every type, hone_k_w4_gemm_set_max (n) too (-1: back
 * to the environment/defaults); hone_k_w4_gemm_max () is that one or the 4-bit default. */
#define HONE_K_W4_GEMM_MAX_DEFAULT 192
#define HONE_K_W4_GEMM_MAX_WIDE 128
int  hone_k_w4_gemm_max (void);
int  hone_k_w4_gemm_max_for (const HoneKMatrix *w);
void hone_k_w4_gemm_set_max (int n);
/* How many ways hone_k_w4_gemm splits @n tokens × @rows over its @ksteps k steps of 128, for
 * tiles of @tile_tokens tokens × 128 rows, @blocks_per_sm blocks an SM, @sms SMs and
 * @scratch_bytes of scratch for the f32 partials (0: none, no split): the least modelled time
 * (kernels/hone-k-gemm-w4.cu). Host code, no GPU needed; HONE_W4_GEMM_SPLIT=n overrides it
 * in hone_k_w4_gemm itself (a measurement knob). */
int  hone_k_w4_gemm_splits (int n, int rows, int ksteps, int tile_tokens, int blocks_per_sm, int sms,
                            size_t scratch_bytes);
/* The K-quant (Q4_K, Q6_K) parts of hone_k_repack / hone_k_dequant / hone_k_embed and
 * hone_k_gemv_ex (called by them; kernels/hone-k-gemv-kquant.cu; their short prefill
 * chunks: hone_k_w4_gemm). The GEMV takes
 * op->xq, epilogues STORE/ADD/SWIGLU/ROPE_KV and bias, no norm_g. */
int hone_k_kquant_repack (int gguf_type, const void *src, int rows, int cols, HoneKMatrix *dst, int row0, int step,
                          cudaStream_t stream);
int hone_k_kquant_dequant (const HoneKMatrix *w, void *dst, int to_f16, cudaStream_t stream);
int hone_k_kquant_embed (const HoneKMatrix *w, const int32_t *tokens, int n_tok, float *h, cudaStream_t stream);
/* Tuning hook of the K-quant GEMV: launch shape 0..HONE_K_KQUANT_CONFIGS-1 (-1: automatic). */
#define HONE_K_KQUANT_CONFIGS 8
void hone_k_kquant_set_config (int config);
/* K-quant GEMV at 2..4 tokens: 1 runs the kernel built for at most 4 tokens, 0 the 8-token one
 * (-1: HONE_KQUANT_TIERS=0/1, default 0: not measured yet). */
void hone_k_kquant_set_tiers (int on);
/* Tuning hook of the Q4Z GEMV (0: automatic; the kernels each number picks: hone-k-gemv-w4.cu,
 * above hone_k_q4z_set_config): e.g. 2 variant 2, 9 the tensor-core kernel (zero point in f16),
 * 13 the register-streamed kernel on a packed input (one token, needs op->xh). */
void hone_k_q4z_set_config (int config);
/* Which Q4Z GEMV kernel the last hone_k_gemv_ex call on a Q4Z matrix launched: 1 the first, 2 variant 2,
 * 3 the staged one (its launches may fall back to variant 2: tests and benchmarks say which ran), 4 the
 * tensor-core one, 5 the register-streamed one on op->xh. The
 * staged kernel reads a Q4Z matrix's scale/zero buffer (s) in 16-byte-aligned pieces: s must be 16-byte
 * aligned and readable up to the next 16-byte bound past its hone_k_matrix_bytes_g size. */
int hone_k_q4z_last_kernel (void);
/* GGUF vector (F32/F16/BF16) → f32. */
int hone_k_to_f32 (int gguf_type, const void *src, float *dst, int n, cudaStream_t stream);

/* Quantized activation, [n_tok][cols] int8 + [n_tok][cols/32] (d, d·Σq). */
typedef struct {
  int8_t *q;
  float2 *ds;
} HoneKActQ8;

/* 16-bit activation of the register-streamed W4A16 GEMV (one token): each
 * block of 32 values as 16-bit fixed point, v = rint(x/d) with d = absmax/32767
 * (|v| ≤ 32767; 0 for a block of zeros), split into a signed high byte and an
 * unsigned low byte (v = 256·hi + lo) so that the GEMV multiplies its 4-bit
 * weights in integer dot products (dp4a), exactly, instead of dequantizing
 * them to f16. h is in tile order, HONE_K_H16_ROW (cols) 16-bit slots a token:
 * 16-byte piece p (values 8p..8p+7) of chunk c (values 32c..32c+31) at slot
 * index ((c/32)·4 + p)·32 + c%32 (times 8) — so that the 32 lanes of a warp,
 * each on its own chunk, read one piece of 32 consecutive chunks as 512
 * contiguous bytes. Inside a piece, the byte of value k (0..7) is hi at
 * 2·(k%4) + k/4 and lo 8 bytes further: the order of the Q4Z nibbles that
 * w & 0x0F0F0F0F and (w >> 4) & 0x0F0F0F0F put in a word's bytes. d holds
 * HONE_K_H16_DS (cols) 32-bit words a token: per block (d as f32, Σv as int32).
 * Written by hone_k_pack_h16 (and decode attention for o's input). */
#define HONE_K_H16_ROW(cols) ((((size_t) (cols) + 1023) / 1024) * 1024)
#define HONE_K_H16_DS(cols) (((size_t) (cols) + 31) / 32 * 2)
typedef struct {
  uint16_t *h;
  float *d;
} HoneKActH16;

typedef enum {
  HONE_K_EPI_STORE = 0,    /* y[t][n] = acc (+ bias) */
  HONE_K_EPI_ADD = 1,      /* y[t][n] = res[t][n] + acc (y may be res) */
  HONE_K_EPI_SWIGLU = 2,   /* rows interleaved gate,up: y[t][i] = silu(acc[2i])·acc[2i+1], y has rows/2 columns */
} HoneKEpilogue;

/* Decode GEMV for 1..HONE_K_MAX_DECODE tokens. x: f32 [n_tok][cols] (BF16/F16
 * weights) or xq (quantized weights; the other may be NULL). bias: f32 [rows]
 * or NULL. Output row stride = rows (rows/2 for SWIGLU). */
int hone_k_gemv (const HoneKMatrix *w, const float *x, const HoneKActQ8 *xq, int n_tok,
                 const float *bias, const float *res, float *y, int epilogue, cudaStream_t stream);

/* The general form: a GEMV with the RMSNorm of its input and/or RoPE + KV
 * writes fused in (both for BF16/F16 weights only, the paths where the input
 * is f32). norm_g: f32 [cols]; the input rows are normalized on load (each
 * block recomputes Σx², the rows being a few KB in L2). HONE_K_EPI_ROPE_KV:
 * rows are q|k|v heads in adjacent-pair order; q rows are rotated, scaled by
 * 1/sqrt(hd) and stored to y; k rows are rotated and v rows copied into the
 * f16 pages at positions *pos + t (no y for them). */
enum { HONE_K_EPI_ROPE_KV = 3 };
typedef struct {
  const HoneKMatrix *w;
  const float *x;
  const HoneKActQ8 *xq;
  int n_tok;
  const float *bias, *res;
  float *y;
  int epilogue;
  const float *norm_g;
  float eps;
  /* ROPE_KV */
  int nq, nkv, hd;
  const int32_t *pos;
  const float *inv_freq;
  void *k_pool, *v_pool;
  const int32_t *block_table;
  /* Q4Z, one token: scratch for the packed input of the register-streamed
   * W4A16 kernel (hone_k_q4z_set_config 13, the one-token default), which
   * packs op->x (normalized by norm_g when set) into it with one launch
   * first; NULL: the kernel that stages x in every block (variant 2) */
  HoneKActH16 *xh;
  int xh_ready;   /* xh already holds the packed input (decode attention wrote it): no pack launch */
} HoneKGemvOp;
int hone_k_gemv_ex (const HoneKGemvOp *op, cudaStream_t stream);
/* Q4_K / Q6_K weights (hone_k_gemv_pf dispatches to it). */
int hone_k_kquant_gemv (const HoneKGemvOp *op, cudaStream_t stream);
/* HONE_K_PARTS matrices (kernels/hone-k-gemv-kquant.cu). The GEMV: y[t][row0_i + r] =
 * (part_i · x_t)[r] (+ bias[row0_i + r]), STORE only (RoPE/KV then run apart:
 * hone_k_rope_kv). op->x: the f32 input [n_tok][cols], RMSNorm'ed by op->norm_g
 * (eps op->eps) unless norm_g is NULL; BF16/F16/Q4Z parts take it as it is,
 * the quantized ones read op->xq, which this function fills first (one
 * norm+quantize launch) when any part needs it. One token: each part writes
 * its rows of y directly; 2..HONE_K_MAX_DECODE tokens: each part writes
 * @tmp (f32, n_tok × the largest part's rows) and a copy launch scatters it
 * into y's row stride (rows). */
int hone_k_gemv_parts (const HoneKGemvOp *op, float *tmp, cudaStream_t stream);
/* Dequantize a HONE_K_PARTS matrix to f16 (or bf16) [rows][cols], each part at its row offset. */
int hone_k_parts_dequant (const HoneKMatrix *w, void *dst, int to_f16, cudaStream_t stream);

/* RMSNorm of [n_tok][n] rows: y = x·rsqrt(mean(x²)+eps)·g (g f32). Writes any
 * of y (f32), yq (quantized, n % 32 == 0), y16 (bf16, or f16 when y16_is_f16). */
int hone_k_rmsnorm (const float *x, const float *g, int n_tok, int n, float eps,
                    float *y, HoneKActQ8 *yq, void *y16, int y16_is_f16, cudaStream_t stream);
/* f32 [n_tok][n] (normalized as hone_k_rmsnorm does when g is set) → HoneKActH16 (n % 32 == 0). */
int hone_k_pack_h16 (const float *x, const float *g, int n_tok, int n, float eps, HoneKActH16 *yh,
                     cudaStream_t stream);
/* Quantize / convert f32 [n_tok][n] → HoneKActQ8 and/or 16-bit. */
int hone_k_quantize (const float *x, int n_tok, int n, HoneKActQ8 *yq, void *y16, int y16_is_f16,
                     cudaStream_t stream);
/* y[t][i] = silu(gu[t][2i])·gu[t][2i+1] for i < ffn (prefill after the interleaved gate/up GEMM). */
int hone_k_swiglu (const float *gu, int n_tok, int ffn, float *y, cudaStream_t stream);
/* h[t][:] = dequant(embd row tokens[t]) (embd in the GPU layout). */
int hone_k_embed (const HoneKMatrix *embd, const int32_t *tokens, int n_tok, float *h, cudaStream_t stream);

/* RoPE + KV write for n_tok tokens at positions *pos .. *pos+n_tok-1.
 * qkv: f32 [n_tok][(nq + 2·nkv)·hd] (q heads, then k heads, then v heads),
 * rotated in place (q also scaled by 1/sqrt(hd)); q_norm/k_norm (f32 [hd],
 * qwen3) applied first when non-NULL. inv_freq: f32 [hd/2]. pairing: 0
 * adjacent (2i,2i+1), 1 half (i, i+hd/2). K and V (f16) go to the pages. */
int hone_k_rope_kv (float *qkv, int n_tok, int nq, int nkv, int hd, const int32_t *pos,
                    const float *inv_freq, int pairing, const float *q_norm, const float *k_norm,
                    float eps, void *k_pool, void *v_pool, const int32_t *block_table,
                    cudaStream_t stream);

/* Attention scratch (flash-decoding partials), sized by hone_k_attn_scratch_bytes. */
size_t hone_k_attn_scratch_bytes (int nq, int nkv, int hd, int max_tok);
/* Decode attention of one token over at most this many keys has a faster
 * launch shape (splits combined in distributed shared memory; measured
 * slower from 4k keys up): a one-token step whose HoneKState.ctx_bound is
 * in 1..this value uses it, so a caller replaying a captured step
 * re-captures it when the context passes the bound. 0 = never
 * (HONE_ATTN_SHORT_CTX overrides the default). */
int hone_k_attn_short_ctx (void);
/* The bound a one-token step captured for a context of @keys keys takes
 * (HoneKState.ctx_bound): the tiny kernel's (hone-k-attn-tiny.cu: one block
 * a query head, ≤ 256 keys, HONE_ATTN_TINY) when the context fits it, else
 * hone_k_attn_short_ctx ()'s when it fits that, else 0 (unbounded). A
 * replayed step is captured again when this changes. */
int hone_k_attn_ctx_bound (int keys);
/* The tiny kernel's tier: the most keys (default and at most 256;
 * HONE_ATTN_TINY, 0 = never) for which a bounded one-token step takes it;
 * 0 on a current device below sm_90. */
int hone_k_attn_tiny_ctx (void);
/* Decode attention for 1..HONE_K_MAX_DECODE new tokens (already in the cache):
 * token t attends keys 0..*pos+t. q from qkv (row stride (nq+2nkv)·hd); out
 * f32 [n_tok][nq·hd]. Split over the KV length, combined by the last block. */
int hone_k_attn_decode (const float *qkv, int n_tok, int nq, int nkv, int hd, const int32_t *pos,
                        const void *k_pool, const void *v_pool, const int32_t *block_table,
                        void *scratch, float *out, cudaStream_t stream);
/* Causal flash attention (tensor cores, f16) for n_tok new tokens at *pos
 * (host copy pos_host needed for the grid), keys from the cache. hd 64 or 128. */
int hone_k_attn_prefill (const float *qkv, int n_tok, int nq, int nkv, int hd, int pos_host,
                         const void *k_pool, const void *v_pool, const int32_t *block_table,
                         float *out, cudaStream_t stream);
/* The same with the output as f32 (HONE_K_F32) or straight into a bf16/f16
 * GEMM input (HONE_K_BF16 / HONE_K_F16), [n_tok][nq·hd]. */
int hone_k_attn_prefill_ex (const float *qkv, int n_tok, int nq, int nkv, int hd, int pos_host,
                            const void *k_pool, const void *v_pool, const int32_t *block_table,
                            void *out, int out_type, cudaStream_t stream);

/* Device scratch of the samplers' many-block pass (kernels/hone-k-sample.cu):
 * HONE_K_SAMPLE_SCRATCH_BYTES (rows), 8-byte aligned, zeroed once when
 * allocated (its tickets return to 0 by themselves); a buffer serves one
 * launch at a time. */
#define HONE_K_ARGMAX_BLOCKS 128
#define HONE_K_SAMPLE_SCRATCH_ROW (HONE_K_ARGMAX_BLOCKS * 8 + 16)
#define HONE_K_SAMPLE_SCRATCH_BYTES(rows) ((size_t) (rows) * HONE_K_SAMPLE_SCRATCH_ROW)
/* hone_k_sample_chain's scratch: one argmax row, then the sampled chain's
 * per-slice and per-group sums, tickets and lists of up to 256 keys — where
 * hone_k_sample's rows past the first would be: a buffer that serves the chain
 * must not also serve hone_k_sample over more than one row (the CUDA backend's
 * steps never sample in the forward). */
#define HONE_K_SAMPLE_CHAIN_SCRATCH_BYTES \
  ((size_t) HONE_K_SAMPLE_SCRATCH_ROW + 2048 \
   + (size_t) (HONE_K_ARGMAX_BLOCKS + HONE_K_ARGMAX_BLOCKS / 8) * HONE_K_SAMPLE_MAX_K * 8)

/* Greedy (temperature <= 0) or exact sampling via the Gumbel-max trick
 * (argmax of logits/T + Gumbel noise from a counter-based hash of seed and
 * step): token of each of n_tok rows of logits [n_tok][vocab] into out[t].
 * With scratch (HONE_K_SAMPLE_SCRATCH_BYTES (n_tok)) each row is spread over
 * HONE_K_ARGMAX_BLOCKS blocks; without, one block a row (slower). */
int hone_k_sample (const float *logits, int n_tok, int vocab, float temperature,
                   uint64_t seed, const int32_t *step, int32_t *out, void *scratch, cudaStream_t stream);

/* The engine's whole sampler chain (src/core/hone-sampler.c) on one logits
 * row, in kernels/hone-k-sample.cu: penalties over the window ids (any order,
 * ≤ HONE_K_SAMPLE_MAX_WINDOW; vocab ≤ 2^18 when penalties are on), then
 * temperature 0 ? argmax : top-k (≤ HONE_K_SAMPLE_MAX_K, 0 = off) → top-p →
 * min-p → the candidate where the cumulative probability passes u (the host
 * sampler's uniform draw for this step). out[0] = the token id, or -1 when the
 * answer lies past the HONE_K_SAMPLE_MAX_K best (top-k off: a top-p/min-p set
 * that reaches past them, or without either a draw that lands past them) and
 * the whole row cannot be walked (penalties on, the one-block form below, or
 * past_k_on_host): the caller then samples on the host. With scratch: greedy
 * without penalties (any vocab), and, for vocab ≤ 262,144, greedy with
 * penalties (the argmax of hone_k_sample) or sampling (one launch of
 * HONE_K_ARGMAX_BLOCKS blocks whose sorted slices merge in a tree, penalties
 * applied per slice; without top-k, three or five more launches that walk the
 * whole row when the answer lies past the best and return at once otherwise);
 * otherwise one block. Enqueue only. */
#define HONE_K_SAMPLE_MAX_K 256
#define HONE_K_SAMPLE_MAX_WINDOW 1024
typedef struct {
  float temperature;        /* <= 0: greedy */
  int top_k;                /* 0 = off */
  float top_p, min_p;       /* 1 / 0 = off */
  float repeat_penalty, presence_penalty, frequency_penalty;
  int n_window;             /* ids at window (device) */
  int past_k_on_host;       /* 1: -1 instead of the whole row's walk (A/B measurement, tests) */
  double u;                 /* uniform draw in [0, 1) */
} HoneKSampleParams;
int hone_k_sample_chain (const float *logits, int vocab, const HoneKSampleParams *params, const int32_t *window,
                         int32_t *out, void *scratch /* HONE_K_SAMPLE_CHAIN_SCRATCH_BYTES, or NULL */,
                         cudaStream_t stream);
/* Input of a one-token step enqueued before the host read the id it runs on
 * (the CUDA backend's decode ahead): tokens[0] = *id (0 if it is -1), pos[0] =
 * @pos. One thread; enqueue only. */
int hone_k_decode_feed (const int32_t *id, int32_t *tokens, int32_t *pos, int pos_value, cudaStream_t stream);

/* Read @bytes of @buf (device, 16-byte aligned) once with streaming loads
 * (kernels/hone-k-bandwidth.cu): time it to measure the read bandwidth.
 * @sink: one device word the kernel may write. */
int hone_k_read_stream (const void *buf, size_t bytes, unsigned int *sink, cudaStream_t stream);

/* Kernel timeline trace (measurement only; kernels/hone-k-trace.cuh): in a
 * build with the meson option kernel_trace, the GEMV, attention and
 * norm/quantize/pack kernels of the graph last captured after
 * hone_k_trace_reserve (room for @records blocks) record when each block
 * entered, passed its PDL wait, finished its main loop and exited.
 * hone_k_trace_clear zeroes the records (before the replay to keep),
 * hone_k_trace_dump writes them as CSV to @path. Without the option each
 * returns cudaErrorNotSupported. */
int hone_k_trace_reserve (size_t records);
int hone_k_trace_clear (cudaStream_t stream);
int hone_k_trace_dump (const char *path, cudaStream_t stream);

/* Programmatic dependent launch between kernels (sm_90+): 1 on, 0 off, -1
 * automatic (the default: on for steps of quantized models, where it
 * measured 4 % faster, off for BF16/F16, where it measured 6 % slower).
 * HONE_PDL=0/1 in the environment forces it. */
void hone_k_set_pdl (int on);

/* Tuning hook: force GEMV launch shape 0..HONE_K_GEMV_CONFIGS-1 (-1: automatic);
 * one-token GEMVs of quantized weights (W4A16 too) also take
 * HONE_K_GEMV_CONFIGS..HONE_K_GEMV_CONFIGS_Q1-1. */
#define HONE_K_GEMV_CONFIGS 4
#define HONE_K_GEMV_CONFIGS_Q1 18
/* Launch shape @config's rows a warp, chunk loads in flight a lane and warps a row (-1s if none). */
void hone_k_gemv_config_shape (int config, int *rows, int *loads, int *ksplit);
void hone_k_gemv_set_config (int config);
/* Tuning hook: the automatic launch-shape rule: 3 or 9 (session 2's), 10 (session 9's,
 * the default), -1 HONE_GEMV_PICK or the default. */
void hone_k_gemv_set_pick (int rule);
/* Tuning hook: 1 (default) issues a GEMV's first weight loads before it waits
 * for the previous kernel under PDL, 0 after (HONE_GEMV_EARLY=0 likewise).
 * (HONE_GEMV_EPI_PF=1: BF16/F16 GEMVs also prefetch their epilogue's inputs
 * into L1 after that wait; off by default, measured slower: hone-k-gemv.cuh.) */
void hone_k_gemv_set_early (int on);
/* One-token Q8_0/Q4_0/Q4_1 decode steps: quantization in the GEMV epilogues
 * (no RMSNorm/quantize launches; kernels/hone-k-forward.cu) 1 on, 0 off (the
 * default: measured slower), -1 from HONE_DECODE_EPIQ. */
void hone_k_decode_set_epiq (int on);
/* One-token decode steps on sm_90 run as streamed launches (kernels/
 * hone-k-decode-stream.cu: per layer attention, then one persistent launch
 * for o, gate|up, down and the next q|k|v or the lm_head, whose weight
 * stream runs ahead of every dependency) where the model's matrices allow:
 * 1 on, 0 off (the default: measured 4 % slower for BF16 and 25 % for Q4_0
 * on an H200, see tests/bench/RESULTS-cuda.md "Decode, session 6"), -1
 * re-read HONE_DECODE_STREAM=0/1. */
void hone_k_decode_set_stream (int on);
/* How many streamed launches were enqueued so far (checks: which path ran). */
unsigned hone_k_stream_runs (void);
/* Why the last one-token step that did not run streamed declined (a short
 * English phrase for logs and checks), or NULL when the last one ran streamed. */
const char *hone_k_stream_why (void);
/* Experiments: shared memory a streamed block may take and its ring slot size, in KB,
 * the % of a GEMV's rows split statically over the SMs (the rest claimed on demand),
 * and the loader (0 bulk copies, 1 cp.async) (0, 0, -1, -1: HONE_STREAM_SMEM_KB /
 * HONE_STREAM_SLOT_KB / HONE_STREAM_STATIC / HONE_STREAM_LOADER, default 200 / 32 / 75 / bulk). */
void hone_k_stream_set_shape (int smem_kb, int slot_kb, int static_pct, int loader);
/* Measurement only: the launches at sites @site and @site + 1 (0: layer 0's
 * q|k|v, l + 1: after layer l's attention) enqueued from now on record
 * per-block timestamps into @trace (2 × SMs × HONE_K_STREAM_TRACE_WORDS, site
 * @site first; see hone-k-decode-stream.cu); NULL stops. */
#define HONE_K_STREAM_TRACE_WORDS 21
void hone_k_stream_set_trace (unsigned long long *trace, int site);
/* Experiment: 1 the producer warps copy from the launch on, while the kernel
 * before (attention) still runs (the default); 0 only after it finished; -1
 * HONE_STREAM_EARLY=0/1. */
void hone_k_stream_set_early (int on);
/* Debugging a stalled streamed launch: launches enqueued from now on write
 * each warp's position (HONE_K_STREAM_WATCH_WORDS words a warp, SMs × 9
 * warps, see hone-k-decode-stream.cu) to @watch — a device pointer to mapped
 * host memory, readable by the host while the kernel runs; NULL stops. */
/* Checks: streamed launches run @n blocks (fewer than the SMs: each block
 * goes round its ring many times even for a tiny model); 0: one an SM. */
void hone_k_stream_set_blocks (int n);
#define HONE_K_STREAM_WATCH_WORDS 8
void hone_k_stream_set_watch (unsigned *watch);

/* One-token GEMVs on sm_90 run the staged kernel (weights bulk-copied through
 * shared memory, one wave; kernels/hone-k-gemv-staged.cu) where the shape
 * allows: 1 on, 0 the register-streamed kernel (the default: the staged one
 * measured slower), -1 re-read HONE_GEMV_STAGED=0/1. With it decode_step
 * drops its norm/quantize launches. */
void hone_k_gemv_set_staged (int on);

/* Add n to a device int32 (advance the position at the end of a graph). */
int hone_k_add_i32 (int32_t *p, int n, cudaStream_t stream);

/* ---- whole steps ---------------------------------------------------------- */

typedef struct {
  int n_layers, hidden, n_heads, n_kv_heads, head_dim, ffn, vocab;
  float rms_eps;
  const float *rope_inv_freq;   /* device f32 [head_dim/2], scaling already applied */
} HoneKConfig;

typedef struct {
  const float *attn_norm, *ffn_norm;    /* f32 [hidden] */
  const float *q_norm, *k_norm;         /* f32 [head_dim] or NULL (qwen3) */
  const float *bqkv;                    /* f32 [(nq+2nkv)·hd] or NULL (qwen2) */
  HoneKMatrix wqkv;                     /* q rows, k rows, v rows (adjacent-pair order) */
  HoneKMatrix wo;
  HoneKMatrix wgu;                      /* gate/up rows interleaved */
  HoneKMatrix wdown;
} HoneKLayer;

typedef struct {
  HoneKConfig cfg;
  HoneKLayer *layers;                   /* host array [n_layers] */
  HoneKMatrix embd;                     /* [vocab][hidden] */
  const float *out_norm;
  HoneKMatrix lm_head;                  /* may alias embd */
} HoneKModel;

/* Per-sequence KV: pools per layer (host arrays of device pointers) and the block table. */
typedef struct {
  void **k_pool, **v_pool;
  int32_t *block_table;                 /* device [max_blocks] */
  int max_blocks;
} HoneKKv;

/* Scratch of a step of up to max_tok tokens (device buffers, made by hone_k_state_alloc). */
typedef struct {
  int max_tok;
  int ctx_bound;         /* decode steps run by this state see at most this many keys (0: any);
                          * set before capturing a graph: see hone_k_attn_short_ctx */
  int32_t *tokens;       /* [max_tok] input ids */
  int32_t *pos;          /* scalar: sequence length before the step */
  int32_t *step;         /* scalar: sampling counter */
  int32_t *sampled;      /* [max_tok] sampled ids */
  float *h, *xn, *qkv, *attn, *gu, *logits;
  HoneKActQ8 xq;
  HoneKActH16 xh;        /* one token's packed W4A16 GEMV input */
  void *x16;             /* bf16/f16 activations for GEMMs */
  void *w16;             /* dequantized weight scratch (GEMM path, quantized/mixed models) */
  void *attn_scratch, *sample_scratch;
  void *cublas;          /* GEMM context (cuBLASLt handle + plan cache, cuBLAS handle) */
  void *cublas_ws;
  unsigned *stream_sync; /* streamed decode: HONE_K_STREAM_SYNC words a launch site, zeroed */
  size_t bytes;          /* device bytes held */
} HoneKState;

/* Allocate scratch for max_tok tokens (prefill chunks go up to max_tok).
 * logits_rows: rows of logits kept (max_tok for all_logits, else HONE_K_MAX_DECODE). */
int  hone_k_state_alloc (HoneKState *st, const HoneKModel *m, int max_tok, int logits_rows);
void hone_k_state_free (HoneKState *st);
size_t hone_k_state_bytes (const HoneKModel *m, int max_tok, int logits_rows);

/* Prefill GEMM: y[n][w->rows] (+)= x16[n][w->cols]·Wᵀ through cuBLASLt (an
 * algorithm per shape, cached in @st); x16 bf16 for BF16 weights, else f16
 * (quantized W dequantized to f16 into st->w16 first, except the types
 * hone_k_w4_gemm_supports takes at n <= hone_k_w4_gemm_max_for (w): hone_k_w4_gemm,
 * st->w16 its split scratch); y f32 (y_type
 * HONE_K_F32, accumulate adds into it) or W's 16-bit type. Needs a state
 * allocated for more than HONE_K_MAX_DECODE tokens. */
int hone_k_gemm (HoneKState *st, const HoneKMatrix *w, int n, const void *x16, void *y, int y_type,
                 int accumulate, cudaStream_t stream);

/* Prefill warm-up, right after hone_k_state_alloc (a state for more than
 * HONE_K_MAX_DECODE tokens; others return 0 at once): loads now what the
 * first prefill would load lazily (cuBLASLt plans and kernels for the
 * model's GEMM shapes at n = 16, 32, … max_tok; every prefill kernel via a
 * 9-token prefill whose K/V go to page 0 of kv's pools, which must not be in
 * use; kv->block_table is not used). Synchronizes the stream. Leaves the
 * state as allocated, so later steps give the same results.
 * HONE_PREFILL_WARM=0 makes it a no-op, =2 skips the sizes below max_tok. */
int hone_k_prefill_warm (const HoneKModel *m, const HoneKKv *kv, HoneKState *st, cudaStream_t stream);

/* Per-op timing of prefill steps (measurement only): hone_k_prefill_profile(1)
 * makes every prefill step record an event after each op; _read() waits for
 * the last and sums the intervals per op into ms[HONE_K_PP_OPS] (and forgets
 * them). Profiling removes the PDL overlap between the ops it separates. */
enum {
  HONE_K_PP_EMBED, HONE_K_PP_NORM_ATTN, HONE_K_PP_GEMM_QKV, HONE_K_PP_ROPE_KV, HONE_K_PP_ATTN, HONE_K_PP_GEMM_O,
  HONE_K_PP_NORM_FFN, HONE_K_PP_GEMM_GU, HONE_K_PP_SWIGLU, HONE_K_PP_GEMM_DOWN, HONE_K_PP_HEAD, HONE_K_PP_SAMPLE,
  HONE_K_PP_OPS
};
int hone_k_prefill_profile (int on);
int hone_k_prefill_profile_read (double *ms);
const char *hone_k_prefill_profile_name (int op);

/* Enqueue one step: n_tok tokens from st->tokens at *st->pos. n_tok <=
 * HONE_K_MAX_DECODE runs the GEMV path (graph-capturable, no host reads);
 * larger steps run the GEMM path (pos_host must equal *st->pos). Logits of
 * the last n_logits tokens land in st->logits; when sample is set, their
 * sampled ids land in st->sampled (and st->tokens, to feed the next step).
 * *st->pos advances by n_tok and *st->step by 1 on the device either way. */
int hone_k_forward (const HoneKModel *m, const HoneKKv *kv, HoneKState *st, int n_tok, int pos_host,
                    int n_logits, int sample, float temperature, uint64_t seed, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
