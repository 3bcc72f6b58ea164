/* hone-cpu-gemm.c — the blocked f32 GEMM of hone-cpu-gemm.h. */
#if defined(__GNUC__) && !defined(__clang__)
/* The kernels rely on full unrolling of their accumulator arrays. */
#pragma GCC optimize ("O3")
#endif

#include "hone-cpu-gemm.h"

#include <stdatomic.h>
#include <string.h>
#include "hone-cpu-dot.h"
#include "hone-cpu-matmul.h"
#include "hone-tensor.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HONE_HAVE_X86 1
#include <immintrin.h>
#endif

/* Bytes of packed rows a work item keeps: they stay in L2 while every token
 * block of the item runs against them. */
#define CHUNK_BYTES (256 * 1024)
#define MAX_TB 12

typedef struct {
  const float *W, *x;
  float *y;
  int N, K, T;
  int nr, tb;             /* rows a panel, tokens a block */
  int chunk_rows;         /* a multiple of nr */
  int n_chunks, n_tblocks, n_groups;
  float *xtail;           /* the last, partial token block, zero-padded to tb rows (or NULL) */
  float *wp;              /* per thread: chunk_rows × K floats, packed [panel][k][nr] */
  atomic_int next;        /* the next work item: chunk × token group */
  HoneCpuIsa isa;
} GemmJob;

/* Rows r0 … r1 − 1 as panels of nr, [panel][k][nr], rows past r1 as zeros:
 * k outer, so the writes are contiguous and the nr rows read stay in L1. */
static void
pack_rows (const GemmJob *j, int r0, int r1, float *dst)
{
  const int nr = j->nr, K = j->K;
  for (int p = 0; r0 + p * nr < r1; p++)
    {
      float *panel = dst + (size_t) p * K * nr;
      const int n0 = r0 + p * nr, rows = MIN (nr, r1 - n0);
      const float *src = j->W + (size_t) n0 * K;
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
        pack_rows (j, r0, r1, wp);
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
              else
                kernel_avx2 (panel, xt, j->K, j->K, y, j->N, rows, toks);
#else
              (void) panel; (void) xt; (void) y; (void) rows; (void) toks;
#endif
            }
        }
    }
}

void
hone_cpu_gemm_f32 (HoneCpuPool *pool, const float *W, int N, int K, const float *x, int T, float *y)
{
  const HoneCpuIsa isa = hone_cpu_isa ();
  const int nth = hone_cpu_pool_n_threads (pool);
#ifdef HONE_HAVE_X86
  const gboolean blocked = isa != HONE_CPU_ISA_PORTABLE;
#else
  const gboolean blocked = FALSE;
#endif
  GemmJob j = { .W = W, .x = x, .y = y, .N = N, .K = K, .T = T, .isa = isa };

  g_return_if_fail (N > 0 && K > 0 && T > 0);
  if (!blocked)
    {
      /* the tile kernels, in token chunks so x stays in cache */
      HoneTensor t = { .name = "gemm", .type = HONE_DTYPE_F32, .n_dims = 2, .ne = { K, N, 1, 1 },
                       .data = (void *) W, .nbytes = (size_t) N * K * sizeof (float) };
      for (int t0 = 0; t0 < T; t0 += 256)
        {
          HoneCpuMatmulOut o = { &t, y + (size_t) t0 * N };
          hone_cpu_matmul (pool, &o, 1, x + (size_t) t0 * K, NULL, K, MIN (256, T - t0));
        }
      return;
    }
  j.nr = isa == HONE_CPU_ISA_AVX512VNNI ? 32 : 16;
  j.tb = isa == HONE_CPU_ISA_AVX512VNNI ? MAX_TB : 6;
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
  hone_cpu_pool_run (pool, gemm_worker, &j);
  g_free (j.xtail);
  g_aligned_free (j.wp);
}
