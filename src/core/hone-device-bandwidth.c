/* hone-device-bandwidth.c — measure a device's read bandwidth once (a GPU's,
 * or the CPU's with every core reading), cache it. */
#include "hone-device-bandwidth.h"
#include "hone-backend.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hone-error.h"
#include "hone-i18n.h"
#include "hone-metrics.h"

#ifdef HONE_HAVE_CUDA
#include <cuda_runtime_api.h>
#include "hone-kernels.h"
#endif

#define BW_GROUP_KEY "read-gbs"
#define BW_DATE_KEY "measured"
/* Which probe measured an entry: entries of an older probe are measured again.
 * 2 (session 33): the GPU probe reads 4 GiB in contiguous 64 KB slices (the
 * grid-stride read of 1 GiB before it under-read an H200 by ~4 %). */
#define BW_PROBE_KEY "probe"
#define BW_PROBE_VERSION 2

void
hone_device_bandwidth_clear (HoneDeviceBandwidth *bw)
{
  g_clear_pointer (&bw->device_name, g_free);
  g_clear_pointer (&bw->measured, g_free);
  bw->read_gbs = 0.0;
  bw->cached = FALSE;
}

char *
hone_device_bandwidth_cache_path (void)
{
  return g_build_filename (g_get_user_cache_dir (), "hone", "bandwidth.ini", NULL);
}

gboolean
hone_device_bandwidth_lookup (const char *device_name, HoneDeviceBandwidth *bw)
{
  g_autofree char *path = hone_device_bandwidth_cache_path ();
  g_autoptr (GKeyFile) kf = g_key_file_new ();
  g_autofree char *when = NULL;
  double gbs;

  if (device_name == NULL || !g_key_file_load_from_file (kf, path, G_KEY_FILE_NONE, NULL))
    return FALSE;
  gbs = g_key_file_get_double (kf, device_name, BW_GROUP_KEY, NULL);
  when = g_key_file_get_string (kf, device_name, BW_DATE_KEY, NULL);
  /* a value no device has is a damaged entry, an older probe's may be low: measure again */
  if (!(gbs > 1.0 && gbs < 1e6) || when == NULL
      || g_key_file_get_integer (kf, device_name, BW_PROBE_KEY, NULL) < BW_PROBE_VERSION)
    return FALSE;
  memset (bw, 0, sizeof *bw);
  bw->device_name = g_strdup (device_name);
  bw->read_gbs = gbs;
  bw->measured = g_steal_pointer (&when);
  bw->cached = TRUE;
  return TRUE;
}

gboolean
hone_device_bandwidth_store (const HoneDeviceBandwidth *bw, GError **error)
{
  g_autofree char *path = hone_device_bandwidth_cache_path ();
  g_autofree char *dir = g_path_get_dirname (path);
  g_autoptr (GKeyFile) kf = g_key_file_new ();

  if (g_mkdir_with_parents (dir, 0755) != 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("cannot create %s"), dir);
      return FALSE;
    }
  /* keep the other devices' entries */
  (void) g_key_file_load_from_file (kf, path, G_KEY_FILE_KEEP_COMMENTS, NULL);
  g_key_file_set_double (kf, bw->device_name, BW_GROUP_KEY, bw->read_gbs);
  g_key_file_set_string (kf, bw->device_name, BW_DATE_KEY, bw->measured ? bw->measured : "");
  g_key_file_set_integer (kf, bw->device_name, BW_PROBE_KEY, BW_PROBE_VERSION);
  return g_key_file_save_to_file (kf, path, error);
}

/* ---- the CPU ------------------------------------------------------------- */

char *
hone_device_bandwidth_cpu_name (void)
{
  g_autofree char *model = hone_metrics_cpu_model ();

  /* not translated: a cache key, the same in every locale */
  return g_strdup_printf ("CPU %s, %u threads", model != NULL ? model : "unknown", hone_cpu_backend_default_threads ());
}

typedef uint64_t Lane4 __attribute__ ((vector_size (32)));

typedef struct {
  const char *p;
  gsize bytes;     /* whole pages */
  guint64 sum;     /* kept so that the reads are not optimized away */
  gboolean touch;  /* first pass: write the pages (each thread its own, so they land near it) */
} ReadShare;

/* Four independent 32-byte accumulators: as many loads in flight as the
 * core allows, no arithmetic to wait on. An AVX2 build of the same loop is
 * picked at run time where the CPU has it (a 2-core EPYC VM: 31 GB/s SSE2,
 * 38 GB/s AVX2). */
#define READ_LOOP                                                                  \
  {                                                                                \
    const Lane4 *v = (const Lane4 *) p;                                            \
    Lane4 s0 = { 0 }, s1 = { 0 }, s2 = { 0 }, s3 = { 0 };                          \
    for (gsize i = 0; i < n / 32; i += 4)                                          \
      {                                                                            \
        s0 += v[i];                                                                \
        s1 += v[i + 1];                                                            \
        s2 += v[i + 2];                                                            \
        s3 += v[i + 3];                                                            \
      }                                                                            \
    s0 += s1 + s2 + s3;                                                            \
    return s0[0] + s0[1] + s0[2] + s0[3];                                          \
  }

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__ ((target ("avx2"))) static guint64
read_avx2 (const char *p, gsize n)
READ_LOOP
#endif

static guint64
read_plain (const char *p, gsize n)
READ_LOOP

static gpointer
read_share (gpointer data)
{
  ReadShare *r = data;

  if (r->touch)
    memset ((char *) r->p, 1, r->bytes);
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports ("avx2"))
    r->sum += read_avx2 (r->p, r->bytes);
  else
#endif
    r->sum += read_plain (r->p, r->bytes);
  return NULL;
}

/* Every logical CPU reads its share of a buffer 4× the last-level cache
 * (STREAM's rule; at least 1 GiB, at most 2 GiB and an eighth of the RAM);
 * the first pass writes the pages, the median of the next 5 is the figure:
 * a shared machine's passes scatter (one pass of 79 GB/s among 47–50 on the
 * 2-vCPU EPYC VM of 2026-12-04, whose bandwidth later read 75–80 throughout),
 * and the best, right for a GPU's ramping clocks, follows the outlier. */
static gboolean
measure_cpu (double *gbs, GError **error)
{
  const guint nt = (guint) hone_cpu_backend_default_threads ();
  gint64 ram = hone_metrics_physical_memory ();
  gsize bytes = (gsize) 1 << 30;
  g_autofree char *mem = NULL;
  char *buf;
  g_autofree ReadShare *share = g_new0 (ReadShare, nt);
  g_autofree GThread **th = g_new0 (GThread *, nt);
  gint64 dts[5];
  guint64 sum = 0;
  gsize per;
#ifdef _SC_LEVEL3_CACHE_SIZE
  const long l3 = sysconf (_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0)
    bytes = MAX (bytes, (gsize) l3 * 4);
#endif
  bytes = MIN (bytes, (gsize) 2 << 30);
  if (ram > 0)
    bytes = MIN (bytes, (gsize) ram / 8);
  per = bytes / nt / 4096 * 4096;   /* whole pages a thread: 32-byte aligned shares */
  if (per < 4096 || (mem = g_try_malloc (per * nt + 4096)) == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY,
                   _("not enough free memory to measure the read bandwidth"));
      return FALSE;
    }
  buf = mem + (4096 - (uintptr_t) mem % 4096) % 4096;
  for (int pass = 0; pass < 6; pass++)
    {
      const gint64 t0 = g_get_monotonic_time ();
      gint64 dt;
      for (guint t = 0; t < nt; t++)
        {
          share[t].p = buf + (gsize) t * per;
          share[t].bytes = per;
          share[t].touch = pass == 0;
          th[t] = g_thread_new ("hone-bw", read_share, &share[t]);
        }
      for (guint t = 0; t < nt; t++)
        g_thread_join (th[t]);
      dt = g_get_monotonic_time () - t0;
      if (pass > 0)
        dts[pass - 1] = MAX (dt, 1);
    }
  /* the median of 5 */
  for (int i = 1; i < 5; i++)
    for (int j = i; j > 0 && dts[j - 1] > dts[j]; j--)
      {
        const gint64 x = dts[j];
        dts[j] = dts[j - 1];
        dts[j - 1] = x;
      }
  for (guint t = 0; t < nt; t++)
    sum += share[t].sum;
  if (sum == 1)   /* never: the sum only keeps the reads */
    g_debug ("read sum %" G_GUINT64_FORMAT, sum);
  *gbs = (double) per * nt / (dts[2] * 1e-6) / 1e9;
  return TRUE;
}

static gboolean
measured (const char *name, HoneDeviceBandwidth *bw, double gbs)
{
  GError *store_error = NULL;
  g_autoptr (GDateTime) now = g_date_time_new_now_utc ();

  bw->device_name = g_strdup (name);
  bw->read_gbs = gbs;
  bw->measured = g_date_time_format_iso8601 (now);
  bw->cached = FALSE;
  if (!hone_device_bandwidth_store (bw, &store_error))
    {
      /* still usable for this run */
      g_warning ("%s", store_error->message);
      g_error_free (store_error);
    }
  return TRUE;
}

#ifdef HONE_HAVE_CUDA
/* Best of 10 timed reads of 4 GiB (or a quarter of the free memory), after a
 * warm-up: the best is the device's capability, the rest is noise from
 * clocks ramping up. 4 GiB, not less: a read of 1 GiB takes ~0.23 ms on an
 * H200, and its ramp and tail cost ~2.5 % of that. */
static gboolean
measure_cuda (int dev, double *gbs, GError **error)
{
  size_t free_b = 0, total_b = 0, bytes = (size_t) 4 << 30;
  void *buf = NULL;
  unsigned int *sink = NULL;
  cudaEvent_t e0 = NULL, e1 = NULL;
  cudaError_t e;
  float best = 0.0f;

  if ((e = cudaSetDevice (dev)) != cudaSuccess || (e = cudaMemGetInfo (&free_b, &total_b)) != cudaSuccess)
    goto fail;
  bytes = MIN (bytes, free_b / 4) & ~(size_t) 4095;
  if (bytes < ((size_t) 64 << 20))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY,
                   _("not enough free GPU memory to measure the read bandwidth"));
      return FALSE;
    }
  if ((e = cudaMalloc (&buf, bytes)) != cudaSuccess || (e = cudaMalloc ((void **) &sink, 64)) != cudaSuccess
      || (e = cudaMemset (buf, 1, bytes)) != cudaSuccess || (e = cudaEventCreate (&e0)) != cudaSuccess
      || (e = cudaEventCreate (&e1)) != cudaSuccess)
    goto fail;
  for (int i = 0; i < 13; i++)
    {
      float ms = 0.0f;
      if ((e = cudaEventRecord (e0, 0)) != cudaSuccess
          || (e = (cudaError_t) hone_k_read_stream (buf, bytes, sink, 0)) != cudaSuccess
          || (e = cudaEventRecord (e1, 0)) != cudaSuccess || (e = cudaEventSynchronize (e1)) != cudaSuccess
          || (e = cudaEventElapsedTime (&ms, e0, e1)) != cudaSuccess)
        goto fail;
      if (i >= 3 && ms > 0.0f && (best == 0.0f || ms < best))
        best = ms;
    }
  *gbs = (double) bytes / (best * 1e-3) / 1e9;
  cudaEventDestroy (e0);
  cudaEventDestroy (e1);
  cudaFree (buf);
  cudaFree (sink);
  return TRUE;

fail:
  (void) cudaGetLastError ();
  g_set_error (error, HONE_ERROR, e == cudaErrorMemoryAllocation ? HONE_ERROR_OUT_OF_MEMORY : HONE_ERROR_BACKEND,
               _("measuring the read bandwidth failed: %s"), cudaGetErrorString (e));
  if (e0)
    cudaEventDestroy (e0);
  if (e1)
    cudaEventDestroy (e1);
  if (buf)
    cudaFree (buf);
  if (sink)
    cudaFree (sink);
  return FALSE;
}
#endif

gboolean
hone_device_read_bandwidth (const char *device, HoneDeviceBandwidth *bw, GError **error)
{
  memset (bw, 0, sizeof *bw);
  if (g_strcmp0 (device, "cpu") == 0)
    {
      g_autofree char *name = hone_device_bandwidth_cpu_name ();
      double gbs = 0.0;
      gboolean ok;
      if (hone_device_bandwidth_lookup (name, bw))
        return TRUE;
      ok = measure_cpu (&gbs, error);
      /* its buffer (1–2 GiB, freed now) is not a peak of the model's: the
       * CPU backend reports the process's peak RSS */
      hone_metrics_reset_peak_rss ();
      return ok && measured (name, bw, gbs);
    }
  if (device == NULL || !g_str_has_prefix (device, "cuda:"))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("no read-bandwidth measurement for device “%s” (cpu or cuda:N)"), device ? device : "");
      return FALSE;
    }
#ifdef HONE_HAVE_CUDA
  {
    char *end = NULL;
    const long dev = strtol (device + 5, &end, 10);
    struct cudaDeviceProp prop;
    int count = 0;
    double gbs = 0.0;

    if (end == device + 5 || *end != '\0' || dev < 0 || cudaGetDeviceCount (&count) != cudaSuccess || dev >= count
        || cudaGetDeviceProperties (&prop, (int) dev) != cudaSuccess)
      {
        (void) cudaGetLastError ();
        g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT, _("there is no device “%s”"), device);
        return FALSE;
      }
    if (hone_device_bandwidth_lookup (prop.name, bw))
      return TRUE;
    return measure_cuda ((int) dev, &gbs, error) && measured (prop.name, bw, gbs);
  }
#else
  g_set_error (error, HONE_ERROR, HONE_ERROR_BACKEND, _("this build has no CUDA support"));
  return FALSE;
#endif
}
