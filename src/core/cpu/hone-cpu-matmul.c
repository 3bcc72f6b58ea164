/* hone-cpu-matmul.c — parallel tiled matrix × activations. */
#include "hone-cpu-matmul.h"

#include <stdatomic.h>
#include "hone-cpu-gemm.h"
#include "hone-cpu-panel.h"
#include "hone-cpu-precise.h"

#define MAX_OUTS 4

typedef struct {
  const HoneCpuMatmulOut *outs;
  int n_outs;
  int chunk_rows;
  int n_chunks[MAX_OUTS];
  int total_chunks;
  const float *x;
  const HoneQ8Act *xq;
  int K, T;
  HoneCpuTileFunc fn[MAX_OUTS];
  /* precise mode: outs[i] with dequant[i] are unpacked to f32 rows in the
   * thread's slice of scratch (chunk_rows × K floats) and run by fn[i] = F32 */
  gboolean dequant[MAX_OUTS];
  float *scratch;
  /* outs[i] with panel[i] run chunk by chunk (a chunk: hone_cpu_panel_rows)
   * through a panel (hone-cpu-panel.h) in the thread's slice of panels
   * (panel_bytes each) */
  gboolean panel[MAX_OUTS];
  uint8_t *panels;
  gsize panel_bytes;
  uint8_t *xb;          /* activations + 128, T × K, for Q6_K panels */
  HoneCpuIsa isa;
  /* Thread i owns the chunks in range[i] = (lo, hi) (16 bits each) and takes
   * them from the front, in order, so its weight stream is contiguous and its
   * prefetches ahead (hone_cpu_prefetch_ahead) land in rows it reads next. A
   * thread done with its own takes from the others' backs, far from where
   * their owners read (and prefetch), so a descheduled thread does not hold
   * the whole matmul up. */
  _Atomic guint32 range[HONE_CPU_POOL_MAX_THREADS];
} MatmulJob;

#define RANGE(lo, hi) ((guint32) (lo) | ((guint32) (hi) << 16))

/* One chunk from range @r: the front (@back FALSE) or the back; -1 when
 * there is none to take. */
static int
take_from (_Atomic guint32 *r, gboolean back)
{
  guint32 cur = atomic_load_explicit (r, memory_order_relaxed);

  for (;;)
    {
      int lo = cur & 0xffff, hi = cur >> 16;
      /* A thief leaves the owner's next chunk (already prefetched) to it. */
      if (hi - lo < (back ? 2 : 1))
        return -1;
      if (atomic_compare_exchange_weak_explicit (r, &cur, back ? RANGE (lo, hi - 1) : RANGE (lo + 1, hi),
                                                 memory_order_relaxed, memory_order_relaxed))
        return back ? hi - 1 : lo;
    }
}

/* The next chunk for thread @ith: its own, else one taken from another
 * thread's back (starting with the next thread); -1 when none is left. */
static int
take_chunk (MatmulJob *job, int ith, int nth, int *victim)
{
  for (; *victim < ith + nth; (*victim)++)
    {
      int c = take_from (&job->range[*victim % nth], *victim != ith);
      if (c >= 0)
        return c;
    }
  return -1;
}

static void
matmul_worker (gpointer data, int ith, int nth)
{
  MatmulJob *job = data;
  const size_t q8_stride = (size_t) hone_cpu_act_row_blocks (job->K) * sizeof (HoneQ8Act);
  const size_t f_stride = (size_t) job->K * sizeof (float);
  const int rstep = job->T == 1 ? HONE_CPU_TILE_R : 2 * (HONE_CPU_TILE_R / 2);
  int victim = ith;

  for (;;)
    {
      int c = take_chunk (job, ith, nth, &victim);
      int m = 0, r0, r1, N, rbase = 0;
      const HoneTensor *w;
      const uint8_t *wdata;
      size_t w_stride;
      gboolean q8;
      const void *x;
      size_t x_stride;

      if (c < 0)
        break;
      while (c >= job->n_chunks[m])
        c -= job->n_chunks[m++];
      w = job->outs[m].w;
      N = (int) w->ne[1];
      r0 = c * job->chunk_rows;
      r1 = MIN (N, r0 + job->chunk_rows);
      w_stride = hone_tensor_row_bytes (w);
      wdata = w->data;
      q8 = hone_cpu_type_uses_q8 (w->type);
      if (job->dequant[m])
        {
          float *rows = job->scratch + (size_t) ith * job->chunk_rows * job->K;
          hone_cpu_precise_dequant_rows (w->type, wdata + (size_t) r0 * w_stride, w_stride, r1 - r0, job->K, rows);
          /* row r of the chunk is now row r − r0 of the buffer */
          wdata = (const uint8_t *) rows;
          w_stride = f_stride;
          rbase = r0;
          q8 = FALSE;
        }
      if (job->panel[m])
        {
          void *p = job->panels + (gsize) ith * job->panel_bytes;
          hone_cpu_panel_pack (job->isa, w->type, wdata + (size_t) r0 * w_stride, w_stride, r1 - r0, job->K, p);
          hone_cpu_panel_run (job->isa, w->type, p, job->K, r1 - r0, job->xq, q8_stride,
                              hone_cpu_panel_needs_bias (w->type) ? job->xb : NULL, job->T,
                              job->outs[m].y + r0, (size_t) N);
          continue;
        }
      x = q8 ? (const void *) job->xq : (const void *) job->x;
      x_stride = q8 ? q8_stride : f_stride;

      for (int t0 = 0; t0 < job->T; t0 += HONE_CPU_TILE_T)
        {
          int tn = MIN (HONE_CPU_TILE_T, job->T - t0);
          const void *xt = (const uint8_t *) x + (size_t) t0 * x_stride;
          for (int r = r0; r < r1; r += rstep)
            job->fn[m] (job->K, wdata + (size_t) (r - rbase) * w_stride, w_stride, MIN (rstep, r1 - r),
                        xt, x_stride, tn, job->outs[m].y + (size_t) t0 * N + r, (size_t) N);
        }
    }
}

gboolean
hone_cpu_matmul_needs_q8 (const HoneCpuMatmulOut *outs, int n_outs)
{
  for (int i = 0; i < n_outs; i++)
    if (hone_cpu_type_uses_q8 (outs[i].w->type))
      return TRUE;
  return FALSE;
}

static void
matmul_run (HoneCpuPool *pool, const HoneCpuMatmulOut *outs, int n_outs,
            const float *x, const HoneQ8Act *xq, int K, int T, float *scratch)
{
  MatmulJob job = { 0 };
  HoneCpuIsa isa = hone_cpu_isa ();
  int nth = hone_cpu_pool_n_threads (pool);
  gint64 rows = 0;
  gboolean panels = FALSE;

  g_return_if_fail (n_outs >= 1 && n_outs <= MAX_OUTS);
  if (scratch == NULL && T >= HONE_CPU_GEMM_MIN_T)
    {
      /* a prompt's float weights: the blocked GEMM, one output at a time */
      gboolean all = TRUE;
      for (int i = 0; i < n_outs; i++)
        all = all && hone_cpu_gemm_takes (outs[i].w->type);
      if (all)
        {
          for (int i = 0; i < n_outs; i++)
            hone_cpu_gemm (pool, outs[i].w, x, T, outs[i].y);
          return;
        }
    }
  job.outs = outs;
  job.n_outs = n_outs;
  job.x = x;
  job.xq = xq;
  job.K = K;
  job.T = T;
  job.isa = isa;
  for (int i = 0; i < n_outs; i++)
    {
      rows += outs[i].w->ne[1];
      job.dequant[i] = scratch != NULL && hone_cpu_precise_dequantizes (outs[i].w->type);
      job.fn[i] = hone_cpu_tile_func (job.dequant[i] ? HONE_DTYPE_F32 : outs[i].w->type, isa);
      job.panel[i] = scratch == NULL && hone_cpu_panels_enabled () && T >= HONE_CPU_PANEL_MIN_T
                     && hone_cpu_panel_supported (outs[i].w->type, K, isa);
      panels |= job.panel[i];
    }
  job.scratch = scratch;
  /* Enough chunks that threads finish together (≥ 8 per thread, stealing
   * evens out the rest), few enough that the atomic counters cost nothing;
   * multiples of 4 rows keep tiles whole. */
  job.chunk_rows = (int) CLAMP (rows / (8 * nth), 4, T == 1 ? 64 : 16);
  job.chunk_rows = (job.chunk_rows + 3) & ~3;
  if (panels)
    job.chunk_rows = hone_cpu_panel_rows (isa);   /* a chunk fills one panel */
  if (scratch != NULL)
    job.chunk_rows = MIN (job.chunk_rows, HONE_CPU_PRECISE_CHUNK_ROWS);
  /* Chunk numbers are 16-bit (MatmulJob.range): rows the chunks cannot cover
   * in 65,531 of them (+ one partial chunk an output) make the chunks longer —
   * past 1M rows, more than any model's matmul and than the precise scratch. */
  job.chunk_rows = MAX (job.chunk_rows, (int) ((rows + 65530) / 65531 + 3) & ~3);
  if (job.chunk_rows > hone_cpu_panel_rows (isa))
    {
      panels = FALSE;
      memset (job.panel, 0, sizeof job.panel);
    }
  g_return_if_fail (scratch == NULL || job.chunk_rows <= HONE_CPU_PRECISE_CHUNK_ROWS);
  for (int i = 0; i < n_outs; i++)
    {
      job.n_chunks[i] = (int) ((outs[i].w->ne[1] + job.chunk_rows - 1) / job.chunk_rows);
      job.total_chunks += job.n_chunks[i];
    }
  for (int i = 0; i < nth; i++)
    atomic_init (&job.range[i], RANGE ((gint64) job.total_chunks * i / nth, (gint64) job.total_chunks * (i + 1) / nth));
  if (panels)
    {
      job.panel_bytes = hone_cpu_panel_bytes (K);
      job.panels = g_aligned_alloc (nth, job.panel_bytes, 64);
      for (int i = 0; i < n_outs; i++)
        if (job.panel[i] && hone_cpu_panel_needs_bias (outs[i].w->type) && job.xb == NULL)
          {
            job.xb = g_malloc ((gsize) T * K);
            hone_cpu_panel_bias_act (xq, (size_t) hone_cpu_act_row_blocks (K) * sizeof (HoneQ8Act), K, T, job.xb);
          }
    }
  hone_cpu_pool_run (pool, matmul_worker, &job);
  g_aligned_free (job.panels);
  g_free (job.xb);
}

void
hone_cpu_matmul (HoneCpuPool *pool, const HoneCpuMatmulOut *outs, int n_outs,
                 const float *x, const HoneQ8Act *xq, int K, int T)
{
  matmul_run (pool, outs, n_outs, x, xq, K, T, NULL);
}

void
hone_cpu_matmul_precise (HoneCpuPool *pool, const HoneCpuMatmulOut *outs, int n_outs,
                         const float *x, int K, int T, float *scratch)
{
  g_return_if_fail (scratch != NULL);
  matmul_run (pool, outs, n_outs, x, NULL, K, T, scratch);
}

gsize
hone_cpu_matmul_precise_scratch (int K_max, int n_threads)
{
  return (gsize) n_threads * HONE_CPU_PRECISE_CHUNK_ROWS * (gsize) K_max;
}
