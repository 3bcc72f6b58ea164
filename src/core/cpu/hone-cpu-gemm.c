/* hone-cpu-gemm.c — the blocked f32 GEMM of hone-cpu-gemm.h. */
#if defined(__GNUC__) && !defined(__clang__)
/* The kernels rely on full unrolling of their accumulator arrays. */
#pragma GCC optimize ("O3")
#endif

#include "hone-cpu-gemm.h"

#include <stdatomic.h>
#include <string.h>
#include "hone-cpu-dot.h"
#include "hone-dtype.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HONE_HAVE_X86 1
#include <immintrin.h>
#endif

/* Bytes of packed rows a work item keeps: they stay in L2 while every token
 * block of the item runs against them. */
#define CHUNK_BYTES (256 * 1024)
#define MAX_TB 12

typedef struct {
  const HoneTensor *w;    /* F32, F16 or BF16: N rows of K */
  const float *x;
  float *y;
  int N, K, T;
  int nr, tb;             /* rows a panel, tokens a block */
  int chunk_rows;         /* a multiple of nr */
  int n_chunks, n_tblocks, n_groups;
  float *xtail;           /* the last, partial token block, zero-padded to tb rows (or NULL) */
  size_t row_bytes;
  float *wp;              /* per thread: chunk_rows × K floats, packed [panel][k][nr] */
  float *tmp;             /* per thread: nr × K floats (F16/BF16 rows converted), or NULL */
  atomic_int next;        /* the next work item: chunk × token group */
  HoneCpuIsa isa;
} GemmJob;

#ifdef HONE_HAVE_X86
/* A row of F16 or BF16 weights to f32, 8 at a time (F16C, or BF16's shift). */
static __attribute__((target ("avx2,f16c"))) void
convert_row_x86 (HoneDType type, const guint16 *src, int K, float *dst)
{
  int k = 0;
  if (type == HONE_DTYPE_F16)
    for (; k + 8 <= K; k += 8)
      _mm256_storeu_ps (dst + k, _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) (src + k))));
  else
    for (; k + 8 <= K; k += 8)
      _mm256_storeu_ps (dst + k, _mm256_castsi256_ps (_mm256_slli_epi32 (
                                   _mm256_cvtepu16_epi32 (_mm_loadu_si128 ((const __m128i *) (src + k))), 16)));
  if (k < K)
    hone_dequantize_row (type, src + k, dst + k, K - k);
}
#endif

#ifdef HONE_HAVE_X86
/* 8 rows × 8 columns of @src (rows @ld floats apart) transposed into @dst
 * (rows @ldd apart): the usual unpack / shuffle / lane-permute sequence. */
static inline __attribute__((always_inline, target ("avx2,fma"))) void
transpose8 (const float *src, size_t ld, float *dst, size_t ldd)
{
  __m256 r[8], t[8], u[8];
  for (int i = 0; i < 8; i++)
    r[i] = _mm256_loadu_ps (src + i * ld);
  for (int i = 0; i < 8; i += 2)
    {
      t[i] = _mm256_unpacklo_ps (r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps (r[i], r[i + 1]);
    }
  for (int h = 0; h < 8; h += 4)
    {
      u[h] = _mm256_shuffle_ps (t[h], t[h + 2], 0x44);
      u[h + 1] = _mm256_shuffle_ps (t[h], t[h + 2], 0xee);
      u[h + 2] = _mm256_shuffle_ps (t[h + 1], t[h + 3], 0x44);
      u[h + 3] = _mm256_shuffle_ps (t[h + 1], t[h + 3], 0xee);
    }
  for (int j = 0; j < 4; j++)
    {
      _mm256_storeu_ps (dst + j * ldd, _mm256_permute2f128_ps (u[j], u[j + 4], 0x20));
      _mm256_storeu_ps (dst + (j + 4) * ldd, _mm256_permute2f128_ps (u[j], u[j + 4], 0x31));
    }
}

/* A whole panel [nr rows][K] → [K][nr] (nr a multiple of 8), 8 × 8 at a time. */
static __attribute__((target ("avx2,fma"))) void
transpose_panel_x86 (const float *src, int nr, int K, float *panel)
{
  int k = 0;
  for (; k + 8 <= K; k += 8)
#pragma GCC unroll 4
    for (int i = 0; i < nr; i += 8)
      transpose8 (src + (size_t) i * K + k, (size_t) K, panel + (size_t) k * nr + i, (size_t) nr);
  for (; k < K; k++)
    for (int i = 0; i < nr; i++)
      panel[(size_t) k * nr + i] = src[(size_t) i * K + k];
}
#endif

/* Row n of the weights as f32 in @dst (F16/BF16; an F32 row is read in place). */
static void
convert_row (const GemmJob *j, int n, float *dst)
{
  const void *row = (const guint8 *) j->w->data + (size_t) n * j->row_bytes;
#ifdef HONE_HAVE_X86
  if (j->isa != HONE_CPU_ISA_PORTABLE)
    {
      convert_row_x86 (j->w->type, row, j->K, dst);
      return;
    }
#endif
  hone_dequantize_row (j->w->type, row, dst, j->K);
}

/* Rows r0 … r1 − 1 as f32 panels of nr, [panel][k][nr], rows past r1 as
 * zeros: k outer, so the writes are contiguous and the nr rows read stay in
 * L1. F16/BF16 rows are converted into @tmp (nr × K floats) first. */
static void
pack_rows (const GemmJob *j, int r0, int r1, float *dst, float *tmp)
{
  const int nr = j->nr, K = j->K;
  for (int p = 0; r0 + p * nr < r1; p++)
    {
      float *panel = dst + (size_t) p * K * nr;
      const int n0 = r0 + p * nr, rows = MIN (nr, r1 - n0);
      const float *src = (const float *) j->w->data + (size_t) n0 * K;
      if (j->w->type != HONE_DTYPE_F32)
        {
          for (int i = 0; i < rows; i++)
            convert_row (j, n0 + i, tmp + (size_t) i * K);
          src = tmp;
        }
#ifdef HONE_HAVE_X86
      if (rows == nr && j->isa != HONE_CPU_ISA_PORTABLE)
        {
          transpose_panel_x86 (src, nr, K, panel);
          continue;
        }
#endif
      for (int k = 0; k < K; k++)
        {
          float *out = panel + (size_t) k * nr;
          for (int i = 0; i < rows; i++)
            out[i] = src[(size_t) i * K + k];
          for (int i = rows; i < nr; i++)
            out[i] = 0.0f;
        }
    }
}

/* Any CPU: nr rows × tb tokens in plain C (the compiler vectorizes the rows). */
static void
kernel_portable (const float *wp, int nr, const float *x, size_t ld, int tb, int K, float *y, int N, int rows,
                 int toks)
{
  float acc[8][16];
  g_assert (nr <= 16 && tb <= 8);
  memset (acc, 0, sizeof acc);
  for (int k = 0; k < K; k++)
    {
      const float *wk = wp + (size_t) k * nr;
      for (int t = 0; t < tb; t++)
        {
          const float b = x[(size_t) t * ld + k];
          for (int i = 0; i < nr; i++)
            acc[t][i] += wk[i] * b;
        }
    }
  for (int t = 0; t < toks; t++)
    for (int i = 0; i < rows; i++)
      y[(size_t) t * N + i] = acc[t][i];
}

#ifdef HONE_HAVE_X86

#define PTARGET __attribute__((target ("avx2,fma,avx512f,avx512vl,avx512bw,avx512dq")))
#define ATARGET __attribute__((target ("avx2,fma")))

/* 32 rows × 12 tokens: y[t][0 … rows) = Σ_k wp[k][·]·x[t][k], t < toks; the
 * 12 token rows are @ld floats apart (four bases, each with rows 0, 1, 2 past it). */
static PTARGET void
kernel_avx512 (const float *wp, const float *x, size_t ld, int K, float *y, int N, int rows, int toks)
{
  const __mmask16 m0 = rows >= 16 ? 0xffff : (__mmask16) ((1u << rows) - 1);
  const __mmask16 m1 = rows >= 32 ? 0xffff : rows <= 16 ? 0 : (__mmask16) ((1u << (rows - 16)) - 1);
  const float *xb[4] = { x, x + 3 * ld, x + 6 * ld, x + 9 * ld };
  __m512 a0[MAX_TB], a1[MAX_TB];

#pragma GCC unroll 12
  for (int t = 0; t < MAX_TB; t++)
    a0[t] = a1[t] = _mm512_setzero_ps ();
  for (int k = 0; k < K; k++)
    {
      const __m512 w0 = _mm512_loadu_ps (wp + (size_t) k * 32), w1 = _mm512_loadu_ps (wp + (size_t) k * 32 + 16);
#pragma GCC unroll 12
      for (int t = 0; t < MAX_TB; t++)
        {
          const __m512 b = _mm512_set1_ps (xb[t / 3][(size_t) (t % 3) * ld + k]);
          a0[t] = _mm512_fmadd_ps (w0, b, a0[t]);
          a1[t] = _mm512_fmadd_ps (w1, b, a1[t]);
        }
    }
#pragma GCC unroll 12
  for (int t = 0; t < MAX_TB; t++)
    if (t < toks)
      {
        _mm512_mask_storeu_ps (y + (size_t) t * N, m0, a0[t]);
        _mm512_mask_storeu_ps (y + (size_t) t * N + 16, m1, a1[t]);
      }
}

/* 16 rows × 6 tokens, the same on 256-bit vectors (two bases). */
static ATARGET void
kernel_avx2 (const float *wp, const float *x, size_t ld, int K, float *y, int N, int rows, int toks)
{
  const __m256i lane = _mm256_setr_epi32 (0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i m0 = _mm256_cmpgt_epi32 (_mm256_set1_epi32 (rows), lane);
  const __m256i m1 = _mm256_cmpgt_epi32 (_mm256_set1_epi32 (rows - 8), lane);
  const float *xb[2] = { x, x + 3 * ld };
  __m256 a0[6], a1[6];

#pragma GCC unroll 6
  for (int t = 0; t < 6; t++)
    a0[t] = a1[t] = _mm256_setzero_ps ();
  for (int k = 0; k < K; k++)
    {
      const __m256 w0 = _mm256_loadu_ps (wp + (size_t) k * 16), w1 = _mm256_loadu_ps (wp + (size_t) k * 16 + 8);
#pragma GCC unroll 6
      for (int t = 0; t < 6; t++)
        {
          const __m256 b = _mm256_broadcast_ss (xb[t / 3] + (size_t) (t % 3) * ld + k);
          a0[t] = _mm256_fmadd_ps (w0, b, a0[t]);
          a1[t] = _mm256_fmadd_ps (w1, b, a1[t]);
        }
    }
#pragma GCC unroll 6
  for (int t = 0; t < 6; t++)
    if (t < toks)
      {
        _mm256_maskstore_ps (y + (size_t) t * N, m0, a0[t]);
        _mm256_maskstore_ps (y + (size_t) t * N + 8, m1, a1[t]);
      }
}

#endif

static void
gemm_worker (gpointer data, int ith, int nth)
{
  GemmJob *j = data;
  float *wp = j->wp + (size_t) ith * j->chunk_rows * j->K;
  float *tmp = j->tmp ? j->tmp + (size_t) ith * j->nr * j->K : NULL;
  int packed = -1;   /* the chunk wp holds */
  (void) nth;

  for (;;)
    {
      const int item = atomic_fetch_add_explicit (&j->next, 1, memory_order_relaxed);
      int c, g, r0, r1, b0, b1;

      if (item >= j->n_chunks * j->n_groups)
        break;
      c = item / j->n_groups;
      g = item % j->n_groups;
      r0 = c * j->chunk_rows;
      r1 = MIN (j->N, r0 + j->chunk_rows);
      b0 = (int) ((gint64) g * j->n_tblocks / j->n_groups);
      b1 = (int) ((gint64) (g + 1) * j->n_tblocks / j->n_groups);
      if (packed != c)
        pack_rows (j, r0, r1, wp, tmp);
      packed = c;
      for (int b = b0; b < b1; b++)
        {
          const int t0 = b * j->tb, toks = MIN (j->tb, j->T - t0);
          const float *xt = toks < j->tb ? j->xtail : j->x + (size_t) t0 * j->K;
          for (int p = 0; r0 + p * j->nr < r1; p++)
            {
              const int n0 = r0 + p * j->nr, rows = MIN (j->nr, r1 - n0);
              const float *panel = wp + (size_t) p * j->K * j->nr;
              float *y = j->y + (size_t) t0 * j->N + n0;
#ifdef HONE_HAVE_X86
              if (j->isa == HONE_CPU_ISA_AVX512VNNI)
                kernel_avx512 (panel, xt, j->K, j->K, y, j->N, rows, toks);
              else if (j->isa != HONE_CPU_ISA_PORTABLE)
                kernel_avx2 (panel, xt, j->K, j->K, y, j->N, rows, toks);
              else
#endif
                kernel_portable (panel, j->nr, xt, j->K, j->tb, j->K, y, j->N, rows, toks);
            }
        }
    }
}

gboolean
hone_cpu_gemm_takes (HoneDType type)
{
  return type == HONE_DTYPE_F32 || type == HONE_DTYPE_F16 || type == HONE_DTYPE_BF16;
}

void
hone_cpu_gemm (HoneCpuPool *pool, const HoneTensor *w, const float *x, int T, float *y)
{
  const HoneCpuIsa isa = hone_cpu_isa ();
  const int nth = hone_cpu_pool_n_threads (pool);
  const int N = (int) w->ne[1], K = (int) w->ne[0];
  GemmJob j = { .w = w, .x = x, .y = y, .N = N, .K = K, .T = T, .isa = isa };

  g_return_if_fail (hone_cpu_gemm_takes (w->type) && N > 0 && K > 0 && T > 0);
  j.row_bytes = hone_tensor_row_bytes (w);
  j.nr = isa == HONE_CPU_ISA_AVX512VNNI ? 32 : 16;
  j.tb = isa == HONE_CPU_ISA_AVX512VNNI ? MAX_TB : isa == HONE_CPU_ISA_PORTABLE ? 4 : 6;
  j.chunk_rows = MAX (j.nr, (int) (CHUNK_BYTES / ((gsize) K * sizeof (float))) / j.nr * j.nr);
  j.chunk_rows = MIN (j.chunk_rows, (N + j.nr - 1) / j.nr * j.nr);
  j.n_chunks = (N + j.chunk_rows - 1) / j.chunk_rows;
  j.n_tblocks = (T + j.tb - 1) / j.tb;
  /* enough items for every thread twice over: split the tokens where the rows are few */
  j.n_groups = CLAMP ((2 * nth + j.n_chunks - 1) / j.n_chunks, 1, j.n_tblocks);
  atomic_init (&j.next, 0);
  if (T % j.tb != 0)
    {
      const int t0 = T / j.tb * j.tb;
      j.xtail = g_new0 (float, (gsize) j.tb * K);
      memcpy (j.xtail, x + (size_t) t0 * K, (size_t) (T - t0) * K * sizeof (float));
    }
  j.wp = g_aligned_alloc ((gsize) nth * j.chunk_rows, (gsize) K * sizeof (float), 64);
  if (w->type != HONE_DTYPE_F32)
    j.tmp = g_new (float, (gsize) nth * j.nr * K);
  hone_cpu_pool_run (pool, gemm_worker, &j);
  g_free (j.xtail);
  g_free (j.tmp);
  g_aligned_free (j.wp);
}

void
hone_cpu_gemm_f32 (HoneCpuPool *pool, const float *W, int N, int K, const float *x, int T, float *y)
{
  const HoneTensor t = { .name = "gemm", .type = HONE_DTYPE_F32, .n_dims = 2, .ne = { K, N, 1, 1 },
                         .data = (void *) W, .nbytes = (size_t) N * K * sizeof (float) };
  hone_cpu_gemm (pool, &t, x, T, y);
}
