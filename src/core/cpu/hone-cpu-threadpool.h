/* hone-cpu-threadpool.h — a small fork/join pool for the CPU backend.
 *
 * One job at a time: hone_cpu_pool_run() hands fn to every thread (the caller
 * is thread 0) and returns when all have finished. Workers spin briefly after
 * a job (a forward pass issues jobs back to back, microseconds apart), then
 * sleep on a condition variable so an idle engine costs no CPU.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _HoneCpuPool HoneCpuPool;

#define HONE_CPU_POOL_MAX_THREADS 256

/* ith in [0, nth): which thread runs this call. */
typedef void (*HoneCpuPoolFunc) (gpointer ctx, int ith, int nth);

/* n_threads <= 0: one per online CPU. NULL + error if threads cannot start. */
HoneCpuPool *hone_cpu_pool_new (int n_threads, GError **error);
void         hone_cpu_pool_free (HoneCpuPool *pool);
int          hone_cpu_pool_n_threads (const HoneCpuPool *pool);
/* Run fn on all threads and wait. Not reentrant (one caller thread). */
void         hone_cpu_pool_run (HoneCpuPool *pool, HoneCpuPoolFunc fn, gpointer ctx);

G_END_DECLS
