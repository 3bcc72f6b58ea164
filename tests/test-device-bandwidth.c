/* test-device-bandwidth.c — the read-bandwidth cache behind `hone bench`'s
 * roofline: entries per device name with their date, kept across stores,
 * damaged entries ignored; the CPU measured once and then read from the
 * cache; devices that cannot be measured are errors. (A GPU's measurement
 * needs a GPU: tests/cuda/run-e2e.sh runs it.) */
#include <glib.h>
#include <glib/gstdio.h>

#include "hone-device-bandwidth.h"
#include "hone-error.h"

static char *tmpdir;

static void
test_cache (void)
{
  GError *error = NULL;
  HoneDeviceBandwidth a = { 0 }, b = { 0 }, got = { 0 };
  g_autofree char *path = hone_device_bandwidth_cache_path ();
  g_autofree char *expect = g_build_filename (tmpdir, "hone", "bandwidth.ini", NULL);

  g_assert_cmpstr (path, ==, expect);
  g_assert_false (hone_device_bandwidth_lookup ("NVIDIA H200", &got));

  a.device_name = g_strdup ("NVIDIA H200");
  a.read_gbs = 4521.5;
  a.measured = g_strdup ("2026-11-29T12:00:00Z");
  b.device_name = g_strdup ("NVIDIA GeForce RTX 4090");
  b.read_gbs = 950.25;
  b.measured = g_strdup ("2026-11-28T08:30:00Z");
  g_assert_true (hone_device_bandwidth_store (&a, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_test (path, G_FILE_TEST_IS_REGULAR));
  g_assert_true (hone_device_bandwidth_store (&b, &error));
  g_assert_no_error (error);

  /* both entries, each with its own value and date */
  g_assert_true (hone_device_bandwidth_lookup ("NVIDIA H200", &got));
  g_assert_cmpstr (got.device_name, ==, "NVIDIA H200");
  g_assert_cmpfloat (got.read_gbs, ==, 4521.5);
  g_assert_cmpstr (got.measured, ==, "2026-11-29T12:00:00Z");
  g_assert_true (got.cached);
  hone_device_bandwidth_clear (&got);
  g_assert_true (hone_device_bandwidth_lookup ("NVIDIA GeForce RTX 4090", &got));
  g_assert_cmpfloat (got.read_gbs, ==, 950.25);
  hone_device_bandwidth_clear (&got);
  g_assert_false (hone_device_bandwidth_lookup ("NVIDIA A100", &got));

  /* a new measurement replaces the old one */
  a.read_gbs = 4400.0;
  g_assert_true (hone_device_bandwidth_store (&a, &error));
  g_assert_true (hone_device_bandwidth_lookup ("NVIDIA H200", &got));
  g_assert_cmpfloat (got.read_gbs, ==, 4400.0);
  hone_device_bandwidth_clear (&got);

  /* a damaged file or entry: measure again rather than trust it */
  g_assert_true (g_file_set_contents (path, "[NVIDIA H200]\nread-gbs=-3\nmeasured=x\n[broken\n", -1, NULL));
  g_assert_false (hone_device_bandwidth_lookup ("NVIDIA H200", &got));
  g_assert_true (g_file_set_contents (path, "[NVIDIA H200]\nread-gbs=4500\n", -1, NULL));
  g_assert_false (hone_device_bandwidth_lookup ("NVIDIA H200", &got));
  /* an entry of the first probe (no version; it under-read H200s by ~4 %), and of this one */
  g_assert_true (g_file_set_contents (path, "[NVIDIA H200]\nread-gbs=4430\nmeasured=2026-11-29T12:00:00Z\n", -1, NULL));
  g_assert_false (hone_device_bandwidth_lookup ("NVIDIA H200", &got));
  g_assert_true (g_file_set_contents (path, "[NVIDIA H200]\nread-gbs=4610\nmeasured=2026-12-05T18:00:00Z\nprobe=2\n",
                                      -1, NULL));
  g_assert_true (hone_device_bandwidth_lookup ("NVIDIA H200", &got));
  g_assert_cmpfloat (got.read_gbs, ==, 4610.0);
  hone_device_bandwidth_clear (&got);

  hone_device_bandwidth_clear (&a);
  hone_device_bandwidth_clear (&b);
  g_remove (path);
}

/* The CPU: measured (a figure a real machine can have; how fast is not
 * asserted), stored under the untranslated key, then read back from the
 * cache unchanged. */
static void
test_cpu (void)
{
  GError *error = NULL;
  HoneDeviceBandwidth bw = { 0 }, again = { 0 };
  g_autofree char *name = hone_device_bandwidth_cpu_name ();
  g_autofree char *path = hone_device_bandwidth_cache_path ();

  g_assert_true (g_str_has_prefix (name, "CPU "));
  g_assert_true (hone_device_read_bandwidth ("cpu", &bw, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (bw.device_name, ==, name);
  g_assert_false (bw.cached);
  g_assert_nonnull (bw.measured);
  g_test_message ("CPU read bandwidth: %.1f GB/s", bw.read_gbs);
  g_assert_cmpfloat (bw.read_gbs, >, 1.0);
  g_assert_cmpfloat (bw.read_gbs, <, 1e6);
  g_assert_true (hone_device_read_bandwidth ("cpu", &again, &error));
  g_assert_no_error (error);
  g_assert_true (again.cached);
  g_assert_cmpfloat (again.read_gbs, ==, bw.read_gbs);
  g_assert_cmpstr (again.measured, ==, bw.measured);
  hone_device_bandwidth_clear (&bw);
  hone_device_bandwidth_clear (&again);
  g_remove (path);
}

static void
test_not_measurable (void)
{
  GError *error = NULL;
  HoneDeviceBandwidth bw;

  g_assert_false (hone_device_read_bandwidth ("gpu0", &bw, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (hone_device_read_bandwidth ("cuda:x", &bw, &error));
  g_assert_nonnull (error);
  g_assert_true (error->domain == HONE_ERROR);
  g_clear_error (&error);
  g_assert_false (hone_device_read_bandwidth ("cuda:999", &bw, &error));
  g_assert_nonnull (error);
  g_clear_error (&error);
}

int
main (int argc, char **argv)
{
  int r;
  g_autofree char *dir = NULL;

  tmpdir = g_dir_make_tmp ("hone-bw-XXXXXX", NULL);
  g_assert_nonnull (tmpdir);
  /* before GLib reads it for the first time */
  g_setenv ("XDG_CACHE_HOME", tmpdir, TRUE);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/device-bandwidth/cache", test_cache);
  g_test_add_func ("/device-bandwidth/cpu", test_cpu);
  g_test_add_func ("/device-bandwidth/not-measurable", test_not_measurable);
  r = g_test_run ();
  dir = g_build_filename (tmpdir, "hone", NULL);
  g_rmdir (dir);
  g_rmdir (tmpdir);
  g_free (tmpdir);
  return r;
}
