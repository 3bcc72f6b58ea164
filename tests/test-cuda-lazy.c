/* test-cuda-lazy.c — a CUDA build opens cuBLAS only when it is used
 * (kernels/hone-k-cublas.c), in suite 'unit': it needs the CUDA toolkit's
 * libraries, not a GPU.
 *
 *  - the CPU path (device listing, a CPU backend's load and forward) leaves
 *    libcublas and libcublasLt unmapped (/proc/self/maps);
 *  - hone_k_cublas_open finds both libraries and every entry point Hone
 *    forwards to (each one's name is looked up: a typo fails here, not on the
 *    GPU machine), and maps them;
 *  - with the libraries missing (HONE_CUBLAS_DIR pointing at an empty
 *    folder) it fails with the library's name, and the entry points return
 *    CUBLAS_STATUS_NOT_INITIALIZED instead of crashing.
 * Each case runs in its own subprocess: the libraries, once opened, stay. */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <cublasLt.h>
#include <cublas_v2.h>

#include "hone-backend.h"
#include "hone-engine.h"
#include "hone-kernels.h"
#include "hone-model.h"
#include "hone-test-models.h"

static gboolean
mapped (const char *lib)
{
  g_autofree char *maps = NULL;
  g_autoptr(GError) error = NULL;

  g_assert_true (g_file_get_contents ("/proc/self/maps", &maps, NULL, &error));
  g_assert_no_error (error);
  return strstr (maps, lib) != NULL;
}

static void
cpu_path (void)
{
  if (g_test_subprocess ())
    {
      g_autoptr(GError) error = NULL;
      g_autofree char *dir = g_dir_make_tmp ("hone-lazy-XXXXXX", &error);
      g_autofree char *path = NULL;
      HoneTestModelSpec spec;
      HoneBackendOptions opt = { .n_threads = 1, .max_context = 32 };
      GPtrArray *devices = hone_engine_list_devices ();
      gint32 tokens[4] = { 5, 17, 42, 99 };
      HoneModel *model;
      HoneBackend *be;
      HoneBatch b = { 0 };
      float *logits;
      int seq;

      g_assert_no_error (error);
      g_assert_cmpuint (devices->len, >=, 1);   /* the CPU, and any GPU this machine has */
      g_ptr_array_unref (devices);
      hone_test_model_spec_init (&spec, HONE_ARCH_LLAMA, HONE_DTYPE_Q4_0);
      path = hone_test_model_write_gguf (dir, &spec, &error);
      g_assert_no_error (error);
      model = hone_model_open (path, &error);
      g_assert_no_error (error);
      be = hone_cpu_backend_new (&error);
      g_assert_no_error (error);
      g_assert_true (be->klass->load (be, model, &opt, NULL, NULL, NULL, &error));
      g_assert_no_error (error);
      seq = be->klass->seq_new (be, &error);
      g_assert_no_error (error);
      logits = g_new (float, spec.vocab);
      b.seq = seq;
      b.tokens = tokens;
      b.n_tokens = 4;
      b.logits = logits;
      g_assert_true (hone_backend_forward (be, &b, NULL, &error));
      g_assert_no_error (error);
      g_assert_true (isfinite (logits[0]));
      g_free (logits);
      hone_backend_free (be);
      hone_model_unref (model);
      hone_test_rm_rf (dir);

      g_assert_false (mapped ("libcublasLt.so"));
      g_assert_false (mapped ("libcublas.so"));
      return;
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
}

static void
open_all (void)
{
  if (g_test_subprocess ())
    {
      char why[512] = "";
      const int r = hone_k_cublas_open (why, sizeof why);

      if (r != 0)
        g_error ("cuBLAS did not open: %s", why);
      g_assert_true (mapped ("libcublasLt.so"));
      g_assert_true (mapped ("libcublas.so"));
      /* a second call is the first one's answer */
      g_assert_cmpint (hone_k_cublas_open (NULL, 0), ==, 0);
      return;
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
}

static void
missing (void)
{
  if (g_test_subprocess ())
    {
      g_autoptr(GError) error = NULL;
      g_autofree char *dir = g_dir_make_tmp ("hone-nocublas-XXXXXX", &error);
      char why[512] = "";
      cublasLtHandle_t lt = NULL;
      cublasHandle_t h = NULL;

      g_assert_no_error (error);
      g_setenv ("HONE_CUBLAS_DIR", dir, TRUE);
      g_assert_cmpint (hone_k_cublas_open (why, sizeof why), !=, 0);
      g_assert_nonnull (strstr (why, "libcublasLt.so."));
      g_assert_cmpint (cublasLtCreate (&lt), ==, CUBLAS_STATUS_NOT_INITIALIZED);
      g_assert_cmpint (cublasCreate (&h), ==, CUBLAS_STATUS_NOT_INITIALIZED);
      g_assert_null (lt);
      g_assert_null (h);
      g_assert_false (mapped ("libcublasLt.so"));
      g_rmdir (dir);
      return;
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cuda/lazy/cpu-path", cpu_path);
  g_test_add_func ("/cuda/lazy/open", open_all);
  g_test_add_func ("/cuda/lazy/missing", missing);
  return g_test_run ();
}
