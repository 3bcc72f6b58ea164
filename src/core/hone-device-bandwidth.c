/* hone-device-bandwidth.c — measure a GPU's read bandwidth once, cache it. */
#include "hone-device-bandwidth.h"

#include <stdlib.h>
#include <string.h>

#include "hone-error.h"
#include "hone-i18n.h"

#ifdef HONE_HAVE_CUDA
#include <cuda_runtime_api.h>
#include "hone-kernels.h"
#endif

#define BW_GROUP_KEY "read-gbs"
#define BW_DATE_KEY "measured"

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
  /* a value no device has is a damaged entry: measure again */
  if (!(gbs > 1.0 && gbs < 1e6) || when == NULL)
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
  return g_key_file_save_to_file (kf, path, error);
}

#ifdef HONE_HAVE_CUDA
/* Best of 10 timed reads of 1 GiB (or a quarter of the free memory), after a
 * warm-up: the best is the device's capability, the rest is noise from
 * clocks ramping up. */
static gboolean
measure_cuda (int dev, double *gbs, GError **error)
{
  size_t free_b = 0, total_b = 0, bytes = (size_t) 1 << 30;
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
  if (device == NULL || !g_str_has_prefix (device, "cuda:"))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("no read-bandwidth measurement for device “%s” (GPUs only)"), device ? device : "");
      return FALSE;
    }
#ifdef HONE_HAVE_CUDA
  {
    char *end = NULL;
    const long dev = strtol (device + 5, &end, 10);
    struct cudaDeviceProp prop;
    int count = 0;
    GError *store_error = NULL;
    g_autoptr (GDateTime) now = NULL;

    if (end == device + 5 || *end != '\0' || dev < 0 || cudaGetDeviceCount (&count) != cudaSuccess || dev >= count
        || cudaGetDeviceProperties (&prop, (int) dev) != cudaSuccess)
      {
        (void) cudaGetLastError ();
        g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT, _("there is no device “%s”"), device);
        return FALSE;
      }
    if (hone_device_bandwidth_lookup (prop.name, bw))
      return TRUE;
    if (!measure_cuda ((int) dev, &bw->read_gbs, error))
      return FALSE;
    now = g_date_time_new_now_utc ();
    bw->device_name = g_strdup (prop.name);
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
#else
  g_set_error (error, HONE_ERROR, HONE_ERROR_BACKEND, _("this build has no CUDA support"));
  return FALSE;
#endif
}
