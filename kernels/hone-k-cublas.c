/* hone-k-cublas.c — cuBLAS and cuBLASLt, opened at their first use instead
 * of linked.
 *
 * Linking libcublasLt costs every process that starts ~210 MB of resident
 * memory (the dynamic loader relocates the library's data at startup),
 * whether or not a GPU is ever used: a CUDA build of `hone` running a small
 * model on the CPU measured 222 MB of peak RSS before loading anything. So
 * the few entry points Hone calls are defined here, with the libraries'
 * own names and prototypes (the headers' declarations check them), and each
 * forwards to the real function, looked up once with dlopen/dlsym the first
 * time any of them (or hone_k_cublas_open) is called. Without the libraries
 * every entry point returns CUBLAS_STATUS_NOT_INITIALIZED and
 * hone_k_cublas_open says why.
 *
 * HONE_CUBLAS_DIR, when set, is the only folder searched (tests use it);
 * otherwise the dynamic loader's usual search (LD_LIBRARY_PATH, ld.so.conf).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cublasLt.h>

#include "hone-kernels.h"

#define SONAME_(lib, major) "lib" lib ".so." #major
#define SONAME(lib, major) SONAME_ (lib, major)

static struct {
  __typeof__ (cublasCreate_v2) *cublasCreate_v2;
  __typeof__ (cublasDestroy_v2) *cublasDestroy_v2;
  __typeof__ (cublasSetStream_v2) *cublasSetStream_v2;
  __typeof__ (cublasSetWorkspace_v2) *cublasSetWorkspace_v2;
  __typeof__ (cublasSetMathMode) *cublasSetMathMode;
  __typeof__ (cublasGemmEx) *cublasGemmEx;
  __typeof__ (cublasGemmStridedBatchedEx) *cublasGemmStridedBatchedEx;
  __typeof__ (cublasLtCreate) *cublasLtCreate;
  __typeof__ (cublasLtDestroy) *cublasLtDestroy;
  __typeof__ (cublasLtMatmul) *cublasLtMatmul;
  __typeof__ (cublasLtMatmulAlgoGetHeuristic) *cublasLtMatmulAlgoGetHeuristic;
  __typeof__ (cublasLtMatmulAlgoCheck) *cublasLtMatmulAlgoCheck;
  __typeof__ (cublasLtMatmulDescCreate) *cublasLtMatmulDescCreate;
  __typeof__ (cublasLtMatmulDescDestroy) *cublasLtMatmulDescDestroy;
  __typeof__ (cublasLtMatmulDescSetAttribute) *cublasLtMatmulDescSetAttribute;
  __typeof__ (cublasLtMatmulPreferenceCreate) *cublasLtMatmulPreferenceCreate;
  __typeof__ (cublasLtMatmulPreferenceDestroy) *cublasLtMatmulPreferenceDestroy;
  __typeof__ (cublasLtMatmulPreferenceSetAttribute) *cublasLtMatmulPreferenceSetAttribute;
  __typeof__ (cublasLtMatrixLayoutCreate) *cublasLtMatrixLayoutCreate;
  __typeof__ (cublasLtMatrixLayoutDestroy) *cublasLtMatrixLayoutDestroy;
} real;

/* Which library each entry point comes from (0: cuBLASLt, 1: cuBLAS), in
 * the order of `real`'s fields. */
static const struct {
  int lib;
  const char *name;
} entries[] = {
  { 1, "cublasCreate_v2" },
  { 1, "cublasDestroy_v2" },
  { 1, "cublasSetStream_v2" },
  { 1, "cublasSetWorkspace_v2" },
  { 1, "cublasSetMathMode" },
  { 1, "cublasGemmEx" },
  { 1, "cublasGemmStridedBatchedEx" },
  { 0, "cublasLtCreate" },
  { 0, "cublasLtDestroy" },
  { 0, "cublasLtMatmul" },
  { 0, "cublasLtMatmulAlgoGetHeuristic" },
  { 0, "cublasLtMatmulAlgoCheck" },
  { 0, "cublasLtMatmulDescCreate" },
  { 0, "cublasLtMatmulDescDestroy" },
  { 0, "cublasLtMatmulDescSetAttribute" },
  { 0, "cublasLtMatmulPreferenceCreate" },
  { 0, "cublasLtMatmulPreferenceDestroy" },
  { 0, "cublasLtMatmulPreferenceSetAttribute" },
  { 0, "cublasLtMatrixLayoutCreate" },
  { 0, "cublasLtMatrixLayoutDestroy" },
};

_Static_assert (sizeof real == sizeof entries / sizeof entries[0] * sizeof (void *), "one entry a field");

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int ready;
static char why_not[512];

static void *
open_lib (const char *soname)
{
  const char *dir = getenv ("HONE_CUBLAS_DIR");
  void *h;

  if (dir && *dir)
    {
      char path[4096];
      snprintf (path, sizeof path, "%s/%s", dir, soname);
      h = dlopen (path, RTLD_LAZY | RTLD_LOCAL);
    }
  else
    h = dlopen (soname, RTLD_LAZY | RTLD_LOCAL);
  if (!h)
    {
      const char *e = dlerror ();
      snprintf (why_not, sizeof why_not, "%s", e ? e : soname);
    }
  return h;
}

static void
open_once (void)
{
  void *lib[2] = { NULL, NULL };
  void **slot = (void **) &real;

  if (!(lib[0] = open_lib (SONAME ("cublasLt", CUBLAS_VER_MAJOR)))
      || !(lib[1] = open_lib (SONAME ("cublas", CUBLAS_VER_MAJOR))))
    {
      if (lib[0])
        dlclose (lib[0]);
      return;
    }
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
    if (!(slot[i] = dlsym (lib[entries[i].lib], entries[i].name)))
      {
        snprintf (why_not, sizeof why_not, "%s has no %s",
                  entries[i].lib ? SONAME ("cublas", CUBLAS_VER_MAJOR) : SONAME ("cublasLt", CUBLAS_VER_MAJOR),
                  entries[i].name);
        memset (&real, 0, sizeof real);
        dlclose (lib[1]);
        dlclose (lib[0]);
        return;
      }
  /* the libraries stay open for the life of the process */
  ready = 1;
}

static int
usable (void)
{
  pthread_once (&once, open_once);
  return ready;
}

int
hone_k_cublas_open (char *why, size_t n)
{
  if (usable ())
    return 0;
  if (why && n)
    snprintf (why, n, "%s", why_not[0] ? why_not : "cuBLAS could not be opened");
  return 1;
}

#define FORWARD(name, ...) return usable () ? real.name (__VA_ARGS__) : CUBLAS_STATUS_NOT_INITIALIZED

/* ---- cuBLAS ---- */

cublasStatus_t CUBLASWINAPI
cublasCreate_v2 (cublasHandle_t *handle)
{
  FORWARD (cublasCreate_v2, handle);
}

cublasStatus_t CUBLASWINAPI
cublasDestroy_v2 (cublasHandle_t handle)
{
  FORWARD (cublasDestroy_v2, handle);
}

cublasStatus_t CUBLASWINAPI
cublasSetStream_v2 (cublasHandle_t handle, cudaStream_t streamId)
{
  FORWARD (cublasSetStream_v2, handle, streamId);
}

cublasStatus_t CUBLASWINAPI
cublasSetWorkspace_v2 (cublasHandle_t handle, void *workspace, size_t workspaceSizeInBytes)
{
  FORWARD (cublasSetWorkspace_v2, handle, workspace, workspaceSizeInBytes);
}

cublasStatus_t CUBLASWINAPI
cublasSetMathMode (cublasHandle_t handle, cublasMath_t mode)
{
  FORWARD (cublasSetMathMode, handle, mode);
}

cublasStatus_t CUBLASWINAPI
cublasGemmEx (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
              const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B, cudaDataType Btype,
              int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
              cublasGemmAlgo_t algo)
{
  FORWARD (cublasGemmEx, handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
           computeType, algo);
}

cublasStatus_t CUBLASWINAPI
cublasGemmStridedBatchedEx (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void *alpha, const void *A, cudaDataType Atype, int lda,
                            long long int strideA, const void *B, cudaDataType Btype, int ldb,
                            long long int strideB, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            long long int strideC, int batchCount, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo)
{
  FORWARD (cublasGemmStridedBatchedEx, handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype,
           ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo);
}

/* ---- cuBLASLt ---- */

cublasStatus_t CUBLASWINAPI
cublasLtCreate (cublasLtHandle_t *lightHandle)
{
  FORWARD (cublasLtCreate, lightHandle);
}

cublasStatus_t CUBLASWINAPI
cublasLtDestroy (cublasLtHandle_t lightHandle)
{
  FORWARD (cublasLtDestroy, lightHandle);
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmul (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha, const void *A,
                cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                const void *C, cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceSizeInBytes,
                cudaStream_t stream)
{
  FORWARD (cublasLtMatmul, lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo,
           workspace, workspaceSizeInBytes, stream);
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmulAlgoGetHeuristic (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                                cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int *returnAlgoCount)
{
  FORWARD (cublasLtMatmulAlgoGetHeuristic, lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference,
           requestedAlgoCount, heuristicResultsArray, returnAlgoCount);
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmulAlgoCheck (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                         cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc,
                         cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                         cublasLtMatmulHeuristicResult_t *result)
{
  FORWARD (cublasLtMatmulAlgoCheck, lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, algo, result);
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmulDescCreate (cublasLtMatmulDesc_t *matmulDesc, cublasComputeType_t computeType, cudaDataType_t scaleType)
{
  FORWARD (cublasLtMatmulDescCreate, matmulDesc, computeType, scaleType);
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmulDescDestroy (cublasLtMatmulDesc_t matmulDesc)
{
  FORWARD (cublasLtMatmulDescDestroy, matmulDesc);
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmulDescSetAttribute (cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                const void *buf, size_t sizeInBytes)
{
  FORWARD (cublasLtMatmulDescSetAttribute, matmulDesc, attr, buf, sizeInBytes);
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmulPreferenceCreate (cublasLtMatmulPreference_t *pref)
{
  FORWARD (cublasLtMatmulPreferenceCreate, pref);
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmulPreferenceDestroy (cublasLtMatmulPreference_t pref)
{
  FORWARD (cublasLtMatmulPreferenceDestroy, pref);
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmulPreferenceSetAttribute (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                                      const void *buf, size_t sizeInBytes)
{
  FORWARD (cublasLtMatmulPreferenceSetAttribute, pref, attr, buf, sizeInBytes);
}

cublasStatus_t CUBLASWINAPI
cublasLtMatrixLayoutCreate (cublasLtMatrixLayout_t *matLayout, cudaDataType type, uint64_t rows, uint64_t cols,
                            int64_t ld)
{
  FORWARD (cublasLtMatrixLayoutCreate, matLayout, type, rows, cols, ld);
}

cublasStatus_t CUBLASWINAPI
cublasLtMatrixLayoutDestroy (cublasLtMatrixLayout_t matLayout)
{
  FORWARD (cublasLtMatrixLayoutDestroy, matLayout);
}
