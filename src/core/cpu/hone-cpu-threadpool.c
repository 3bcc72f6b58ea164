/* hone-cpu-threadpool.c — fork/join pool: spin, then sleep. */
#include "hone-cpu-threadpool.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <stdbool.h>
#include <sched.h>
#include <unistd.h>
#include "hone-backend.h"
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

/* A spinning thread gives its core away this often: where threads outnumber
 * the free cores, the one holding an unfinished part gets back on a core
 * within microseconds instead of at the end of a spinner's time slice. On an
 * idle machine the yield returns at once. */
#define YIELD_EVERY 256

/* ticket = the job's generation << 32 | the next part to claim. One word, so
 * a thread that wakes late cannot claim a part of a newer job for an older
 * one's function. */
#define TICKET(gen, part) (((guint64) (gen) << 32) | (guint32) (part))

struct _HoneCpuPool {
  int n_threads;
  GThread **threads;
  HoneCpuPoolFunc fn;       /* written before the ticket's release, read after a claim */
  gpointer ctx;
  guint32 gen;              /* the caller's last generation */
  _Atomic guint64 ticket;
  atomic_int done;          /* parts of the current job finished */
  atomic_bool stop;
  GMutex lock;
  GCond wake;
  int sleepers;             /* guarded by lock */
};

static inline void
relax (int *spins)
{
  CPU_RELAX ();
  if (++*spins % YIELD_EVERY == 0)
    sched_yield ();
}

/* Claim and run parts of job @gen until none is left. A successful claim
 * holds the job open (its part is not done), so fn and ctx are still the
 * job's when read after it. */
static void
run_parts (HoneCpuPool *pool, guint32 gen)
{
  const int n = pool->n_threads;
  guint64 t = atomic_load_explicit (&pool->ticket, memory_order_acquire);

  for (;;)
    {
      if ((guint32) (t >> 32) != gen || (int) (guint32) t >= n)
        return;
      if (!atomic_compare_exchange_weak_explicit (&pool->ticket, &t, t + 1, memory_order_acq_rel,
                                                  memory_order_acquire))
        continue;
      pool->fn (pool->ctx, (int) (guint32) t, n);
      atomic_fetch_add_explicit (&pool->done, 1, memory_order_release);
      t = atomic_load_explicit (&pool->ticket, memory_order_acquire);
    }
}

static gpointer
worker_main (gpointer data)
{
  HoneCpuPool *pool = data;
  guint32 seen = 0;   /* generation before any job: a worker that starts late must not skip job 1 */

  for (;;)
    {
      int spins = 0;
      guint32 gen;

      while ((gen = (guint32) (atomic_load_explicit (&pool->ticket, memory_order_acquire) >> 32)) == seen &&
             !atomic_load (&pool->stop) && spins < SPIN_ITERS)
        relax (&spins);
      if (gen == seen && !atomic_load (&pool->stop))
        {
          g_mutex_lock (&pool->lock);
          pool->sleepers++;
          while ((gen = (guint32) (atomic_load (&pool->ticket) >> 32)) == seen && !atomic_load (&pool->stop))
            g_cond_wait (&pool->wake, &pool->lock);
          pool->sleepers--;
          g_mutex_unlock (&pool->lock);
        }
      if (atomic_load (&pool->stop))
        break;
      seen = gen;
      run_parts (pool, gen);
    }
  return NULL;
}

/* The cgroup CPU limit of the process, in whole CPUs rounded up; 0 when there
 * is none. cgroup v2 (cpu.max, this cgroup and its parents) or v1
 * (cpu.cfs_quota_us). @root: where cgroups are mounted, @self: the text of
 * /proc/self/cgroup. Exposed for the tests. */
int
hone_cpu_cgroup_limit (const char *root, const char *self)
{
  g_auto (GStrv) lines = g_strsplit (self != NULL ? self : "", "\n", -1);
  int limit = 0;

  for (int i = 0; lines[i] != NULL; i++)
    {
      const char *line = lines[i];
      gboolean v2 = g_str_has_prefix (line, "0::/");
      const char *colon = strchr (line, ':');
      const char *path = colon != NULL ? strchr (colon + 1, ':') : NULL;

      if (path == NULL)
        continue;
      path++;
      if (!v2)
        {
          g_auto (GStrv) ctrl = g_strsplit_set (colon + 1, ",:", -1);
          if (!g_strv_contains ((const char *const *) ctrl, "cpu"))
            continue;
        }
      /* the cgroup, then each parent up to the root */
      for (g_autofree char *rel = g_strdup (path); ; )
        {
          g_autofree char *file = v2 ? g_build_filename (root, rel, "cpu.max", NULL)
                                     : g_build_filename (root, "cpu", rel, "cpu.cfs_quota_us", NULL);
          g_autofree char *text = NULL;
          char *slash;

          if (g_file_get_contents (file, &text, NULL, NULL))
            {
              gint64 quota = -1, period = 100000;
              if (v2)
                {
                  if (!g_str_has_prefix (text, "max"))
                    {
                      char *end = NULL;
                      quota = g_ascii_strtoll (text, &end, 10);
                      if (end != NULL && *end == ' ')
                        period = g_ascii_strtoll (end + 1, NULL, 10);
                    }
                }
              else
                {
                  g_autofree char *pfile = g_build_filename (root, "cpu", rel, "cpu.cfs_period_us", NULL);
                  g_autofree char *ptext = NULL;
                  quota = g_ascii_strtoll (text, NULL, 10);
                  if (g_file_get_contents (pfile, &ptext, NULL, NULL))
                    period = g_ascii_strtoll (ptext, NULL, 10);
                }
              if (quota > 0 && period > 0)
                {
                  int cpus = (int) MAX (1, (quota + period - 1) / period);
                  limit = limit == 0 ? cpus : MIN (limit, cpus);
                }
            }
          slash = strrchr (rel, '/');
          if (slash == NULL || rel[0] == '\0' || (slash == rel && rel[1] == '\0'))
            break;
          if (slash == rel)
            rel[1] = '\0';   /* "/a" -> "/" */
          else
            *slash = '\0';
        }
    }
  return limit;
}

/* The CPUs in this process's affinity mask (taskset, a container's cpuset);
 * 0 if unknown. GLib's g_get_num_processors counts the online CPUs. */
static int
affinity_cpus (void)
{
#ifdef CPU_COUNT_S
  for (int size = 1024; size <= 65536; size *= 2)
    {
      cpu_set_t *set = CPU_ALLOC (size);
      size_t bytes = CPU_ALLOC_SIZE (size);
      int n = 0;

      if (set == NULL)
        return 0;
      CPU_ZERO_S (bytes, set);
      if (sched_getaffinity (0, bytes, set) == 0)
        n = CPU_COUNT_S (bytes, set);
      else if (errno != EINVAL)   /* EINVAL: the kernel's mask is larger */
        size = 65536;
      CPU_FREE (set);
      if (n > 0 || size == 65536)
        return n;
    }
#endif
  return 0;
}

int
hone_cpu_pool_default_threads (void)
{
  static int cached;   /* 0: not yet known */
  int n = g_atomic_int_get (&cached);

  if (n == 0)
    {
      g_autofree char *self = NULL;
      int limit;

      n = affinity_cpus ();
      if (n <= 0)
        n = (int) MAX (1u, g_get_num_processors ());
      if (g_file_get_contents ("/proc/self/cgroup", &self, NULL, NULL)
          && (limit = hone_cpu_cgroup_limit ("/sys/fs/cgroup", self)) > 0)
        n = MIN (n, limit);
      n = MIN (n, HONE_CPU_POOL_MAX_THREADS);
      g_atomic_int_set (&cached, n);
    }
  return n;
}

/* hone-backend.h's name for it: what the CPU backend starts by default (here
 * so that code using only the count, such as AWQ repacking, links without the
 * whole backend). */
int
hone_cpu_backend_default_threads (void)
{
  return hone_cpu_pool_default_threads ();
}

HoneCpuPool *
hone_cpu_pool_new (int n_threads, GError **error)
{
  HoneCpuPool *pool;

  if (n_threads <= 0)
    n_threads = hone_cpu_pool_default_threads ();
  n_threads = MIN (n_threads, HONE_CPU_POOL_MAX_THREADS);

  pool = g_new0 (HoneCpuPool, 1);
  pool->n_threads = n_threads;
  g_mutex_init (&pool->lock);
  g_cond_init (&pool->wake);
  atomic_init (&pool->ticket, TICKET (0, 0));
  atomic_init (&pool->done, 0);
  atomic_init (&pool->stop, false);
  pool->threads = g_new0 (GThread *, n_threads);
  for (int i = 1; i < n_threads; i++)
    {
      GError *local = NULL;
      char name[16];

      g_snprintf (name, sizeof name, "hone-cpu-%d", i);
      pool->threads[i] = g_thread_try_new (name, worker_main, pool, &local);
      if (pool->threads[i] == NULL)
        {
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
  const int n = pool->n_threads;
  int spins = 0;

  if (n == 1)
    {
      fn (ctx, 0, 1);
      return;
    }
  pool->fn = fn;
  pool->ctx = ctx;
  atomic_store_explicit (&pool->done, 0, memory_order_relaxed);
  /* The release store publishes fn, ctx and done to every thread that claims a part. */
  atomic_store_explicit (&pool->ticket, TICKET (++pool->gen, 0), memory_order_release);
  g_mutex_lock (&pool->lock);
  if (pool->sleepers > 0)
    g_cond_broadcast (&pool->wake);
  g_mutex_unlock (&pool->lock);

  run_parts (pool, pool->gen);
  while (atomic_load_explicit (&pool->done, memory_order_acquire) < n)
    relax (&spins);
}
