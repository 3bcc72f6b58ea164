/* hone-cpu-threadpool.h — a small fork/join pool for the CPU backend.
 *
 * One job at a time: hone_cpu_pool_run() splits a job into as many parts as
 * the pool has threads and returns when every part has run. The threads,
 * caller included, claim the parts from a counter, so a part never waits for
 * a thread that is not on a core: where the threads outnumber the free cores
 * (more threads asked for than CPUs, other programs busy) the running ones
 * take the parts of those descheduled (decode on 2 cores with 3 threads: 11
 * tok/s when each thread ran its own part, see tests/bench/RESULTS.md).
 * Workers spin briefly after a job (a forward pass issues jobs back to back,
 * microseconds apart), then sleep on a condition variable so an idle engine
 * costs no CPU.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _HoneCpuPool HoneCpuPool;

#define HONE_CPU_POOL_MAX_THREADS 256

/* ith in [0, nth): which part of the job this call runs; nth = the pool's
 * threads. Each part runs exactly once, by whichever thread claims it, and
 * may run alongside any other (a function must not wait for another part).
 * Per-part scratch indexed by ith is not shared. */
typedef void (*HoneCpuPoolFunc) (gpointer ctx, int ith, int nth);

/* The threads the pool starts by default: the CPUs this process may run on
 * (its affinity mask: taskset, a container's cpuset) and no more than its
 * cgroup's CPU quota (docker --cpus) allows, rounded up. */
int          hone_cpu_pool_default_threads (void);
/* The cgroup CPU quota in whole CPUs (0: none), from the cgroup mount @root
 * and the text of /proc/self/cgroup @self (v2 cpu.max up the tree, v1
 * cpu.cfs_quota_us). For the tests; hone_cpu_pool_default_threads reads the
 * real ones. */
int          hone_cpu_cgroup_limit (const char *root, const char *self);

/* n_threads <= 0: hone_cpu_pool_default_threads(). NULL + error if threads cannot start. */
HoneCpuPool *hone_cpu_pool_new (int n_threads, GError **error);
void         hone_cpu_pool_free (HoneCpuPool *pool);
int          hone_cpu_pool_n_threads (const HoneCpuPool *pool);
/* Run fn on all threads and wait. Not reentrant (one caller thread). */
void         hone_cpu_pool_run (HoneCpuPool *pool, HoneCpuPoolFunc fn, gpointer ctx);

G_END_DECLS
