/* hone-cpu-threadpool.c — fork/join pool: spin, then sleep. */
#include "hone-cpu-threadpool.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <sched.h>
#include <unistd.h>
#include "hone-error.h"
#include "hone-i18n.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause ()
#else
#define CPU_RELAX() do { } while (0)
#endif

/* Iterations of the spin loop before a worker goes to sleep. A pause is
 * ~40–140 cycles on recent x86, so this is some tens of microseconds: long
 * enough to bridge the gap between two matmuls of one forward pass, short
 * enough not to steal a shared machine's cores when the engine is idle. */
#define SPIN_ITERS 20000

struct _HoneCpuPool {
  int n_threads;
  GThread **threads;
  HoneCpuPoolFunc fn;
  gpointer ctx;
  atomic_uint generation;   /* bumped once per job */
  atomic_int pending;       /* workers still running the current job */
  atomic_bool stop;
  GMutex lock;
  GCond wake;
  int sleepers;             /* guarded by lock */
};

typedef struct {
  HoneCpuPool *pool;
  int ith;
} WorkerArgs;

static gpointer
worker_main (gpointer data)
{
  WorkerArgs *args = data;
  HoneCpuPool *pool = args->pool;
  int ith = args->ith;
  unsigned seen = 0;   /* generation before any job: a worker that starts late must not skip job 1 */

  g_free (args);
  for (;;)
    {
      int spins = 0;
      unsigned gen;

      while ((gen = atomic_load_explicit (&pool->generation, memory_order_acquire)) == seen &&
             !atomic_load (&pool->stop) && spins < SPIN_ITERS)
        {
          CPU_RELAX ();
          spins++;
        }
      if (gen == seen && !atomic_load (&pool->stop))
        {
          g_mutex_lock (&pool->lock);
          pool->sleepers++;
          while ((gen = atomic_load (&pool->generation)) == seen && !atomic_load (&pool->stop))
            g_cond_wait (&pool->wake, &pool->lock);
          pool->sleepers--;
          g_mutex_unlock (&pool->lock);
        }
      if (atomic_load (&pool->stop))
        break;
      seen = gen;
      pool->fn (pool->ctx, ith, pool->n_threads);
      atomic_fetch_sub_explicit (&pool->pending, 1, memory_order_release);
    }
  return NULL;
}

HoneCpuPool *
hone_cpu_pool_new (int n_threads, GError **error)
{
  HoneCpuPool *pool;

  if (n_threads <= 0)
    {
      long n = sysconf (_SC_NPROCESSORS_ONLN);
      n_threads = n > 0 ? (int) n : 1;
    }
  n_threads = MIN (n_threads, HONE_CPU_POOL_MAX_THREADS);

  pool = g_new0 (HoneCpuPool, 1);
  pool->n_threads = n_threads;
  g_mutex_init (&pool->lock);
  g_cond_init (&pool->wake);
  atomic_init (&pool->generation, 0);
  atomic_init (&pool->pending, 0);
  atomic_init (&pool->stop, false);
  pool->threads = g_new0 (GThread *, n_threads);
  for (int i = 1; i < n_threads; i++)
    {
      WorkerArgs *args = g_new (WorkerArgs, 1);
      GError *local = NULL;
      char name[16];

      args->pool = pool;
      args->ith = i;
      g_snprintf (name, sizeof name, "hone-cpu-%d", i);
      pool->threads[i] = g_thread_try_new (name, worker_main, args, &local);
      if (pool->threads[i] == NULL)
        {
          g_free (args);
          g_set_error (error, HONE_ERROR, HONE_ERROR_BACKEND,
                       _("Could not start CPU worker thread %d: %s"), i, local->message);
          g_error_free (local);
          pool->n_threads = i;   /* free only what started */
          hone_cpu_pool_free (pool);
          return NULL;
        }
    }
  return pool;
}

void
hone_cpu_pool_free (HoneCpuPool *pool)
{
  if (pool == NULL)
    return;
  g_mutex_lock (&pool->lock);
  atomic_store (&pool->stop, true);
  g_cond_broadcast (&pool->wake);
  g_mutex_unlock (&pool->lock);
  for (int i = 1; i < pool->n_threads; i++)
    if (pool->threads[i] != NULL)
      g_thread_join (pool->threads[i]);
  g_free (pool->threads);
  g_mutex_clear (&pool->lock);
  g_cond_clear (&pool->wake);
  g_free (pool);
}

int
hone_cpu_pool_n_threads (const HoneCpuPool *pool)
{
  return pool->n_threads;
}

void
hone_cpu_pool_run (HoneCpuPool *pool, HoneCpuPoolFunc fn, gpointer ctx)
{
  int spins = 0;

  if (pool->n_threads == 1)
    {
      fn (ctx, 0, 1);
      return;
    }
  pool->fn = fn;
  pool->ctx = ctx;
  atomic_store_explicit (&pool->pending, pool->n_threads - 1, memory_order_relaxed);
  /* The release store publishes fn/ctx/pending to workers that see the new generation. */
  atomic_fetch_add_explicit (&pool->generation, 1, memory_order_acq_rel);
  g_mutex_lock (&pool->lock);
  if (pool->sleepers > 0)
    g_cond_broadcast (&pool->wake);
  g_mutex_unlock (&pool->lock);

  fn (ctx, 0, pool->n_threads);

  while (atomic_load_explicit (&pool->pending, memory_order_acquire) > 0)
    {
      CPU_RELAX ();
      /* A descheduled worker (shared or oversubscribed machine) needs the core. */
      if (++spins > SPIN_ITERS / 10)
        sched_yield ();
    }
}
