/* hone-device-bandwidth.h — a device's measured read bandwidth, the roofline
 * of decode (which only reads weights and KV), for `hone bench` and the app.
 *
 * Measured once per device (a timed streaming read of a buffer far larger
 * than the caches; on the CPU with every core reading) and cached in $XDG_CACHE_HOME/hone/bandwidth.ini, one
 * group per device name, with the date of the measurement. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  char *device_name;      /* e.g. "NVIDIA H200" */
  double read_gbs;        /* GB/s (1e9 bytes) */
  char *measured;         /* when: ISO 8601 UTC date-time */
  gboolean cached;        /* TRUE: read from the cache file, not measured now */
} HoneDeviceBandwidth;

void hone_device_bandwidth_clear (HoneDeviceBandwidth *bw);

/* The cache file ($XDG_CACHE_HOME/hone/bandwidth.ini; owned). */
char    *hone_device_bandwidth_cache_path (void);
/* Look @device_name up in the cache: FALSE when absent or unreadable. */
gboolean hone_device_bandwidth_lookup (const char *device_name, HoneDeviceBandwidth *bw);
/* Record @bw in the cache (creating the file and its folder). */
gboolean hone_device_bandwidth_store (const HoneDeviceBandwidth *bw, GError **error);

/* The read bandwidth of @device ("cpu" or "cuda:N"), from the cache or
 * measured now and then cached: a GPU ≈ 1 s, 4 GiB of device memory (at most a quarter of the free) for the
 * moment; the CPU ≈ 1–2 s, every logical CPU reading its share of a buffer 4×
 * the last-level cache (1–2 GiB, ≤ an eighth of the RAM). Other devices, or
 * "cuda:N" in a build without CUDA: HONE_ERROR_INVALID_ARGUMENT /
 * HONE_ERROR_BACKEND naming why. */
gboolean hone_device_read_bandwidth (const char *device, HoneDeviceBandwidth *bw, GError **error);
/* The CPU's cache key: "CPU <model name>, <n> threads" (not translated). */
char    *hone_device_bandwidth_cpu_name (void);

G_END_DECLS
