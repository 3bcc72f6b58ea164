/* hone-k-trace.cu — the host side of the kernel timeline trace
 * (hone-k-trace.cuh: measurement only, built with the meson option
 * kernel_trace; without it every entry point says "not supported"). */
#include "hone-kernels.h"
#include "hone-k-trace.cuh"
#include <stdio.h>
#include <stdlib.h>
#include <vector>

#ifdef HONE_K_TRACE

namespace {

struct Launch {
  int tag;
  unsigned base, blocks, info0, info1;
};

HoneKTraceRec *d_buf;
size_t cap, used;
unsigned long long capture_id;   /* the capture the table describes */
std::vector<Launch> table;
bool overflowed;

}  // namespace

extern "C" HoneKTraceRec *
hone_k_trace_slot (int tag, unsigned blocks, unsigned info0, unsigned info1, cudaStream_t stream)
{
  if (!d_buf)
    return NULL;
  cudaStreamCaptureStatus status;
  unsigned long long id = 0;
  if (cudaStreamGetCaptureInfo (stream, &status, &id) != cudaSuccess || status != cudaStreamCaptureStatusActive)
    return NULL;
  if (id != capture_id)
    {
      capture_id = id;
      table.clear ();
      used = 0;
      overflowed = false;
    }
  if (used + blocks > cap)
    {
      overflowed = true;
      return NULL;
    }
  table.push_back ({ tag, (unsigned) used, blocks, info0, info1 });
  HoneKTraceRec *p = d_buf + used;
  used += blocks;
  return p;
}

extern "C" int
hone_k_trace_reserve (size_t records)
{
  if (d_buf)
    cudaFree (d_buf);
  d_buf = NULL;
  cap = used = 0;
  table.clear ();
  capture_id = 0;
  cudaError_t e = cudaMalloc (&d_buf, records * sizeof (HoneKTraceRec));
  if (e != cudaSuccess)
    {
      d_buf = NULL;
      return (int) e;
    }
  cap = records;
  return (int) cudaMemset (d_buf, 0, records * sizeof (HoneKTraceRec));
}

extern "C" int
hone_k_trace_clear (cudaStream_t stream)
{
  if (!d_buf)
    return (int) cudaErrorNotSupported;
  return (int) cudaMemsetAsync (d_buf, 0, used * sizeof (HoneKTraceRec), stream);
}

/* CSV: "L,launch,tag,blocks,info0,info1" for every traced launch of the last
 * captured graph in launch order, then "B,launch,block,sm,t0,…,t6" for every
 * block, times in ns from the earliest entry (-1: mark not reached). */
extern "C" int
hone_k_trace_dump (const char *path, cudaStream_t stream)
{
  if (!d_buf)
    return (int) cudaErrorNotSupported;
  cudaError_t e = cudaStreamSynchronize (stream);
  if (e != cudaSuccess)
    return (int) e;
  std::vector<HoneKTraceRec> h (used);
  e = cudaMemcpy (h.data (), d_buf, used * sizeof (HoneKTraceRec), cudaMemcpyDeviceToHost);
  if (e != cudaSuccess)
    return (int) e;
  FILE *f = fopen (path, "w");
  if (!f)
    return (int) cudaErrorInvalidValue;
  unsigned long long t_min = ~0ull;
  for (const HoneKTraceRec &r : h)
    if (r.t[0] && r.t[0] < t_min)
      t_min = r.t[0];
  fprintf (f, "# hone kernel trace: tags 1 gemv, 2 attention, 3 rmsnorm, 4 quantize, 5 pack_h16%s\n",
           overflowed ? "; BUFFER FULL: later launches missing" : "");
  for (size_t i = 0; i < table.size (); i++)
    fprintf (f, "L,%zu,%d,%u,%u,%u\n", i, table[i].tag, table[i].blocks, table[i].info0, table[i].info1);
  for (size_t i = 0; i < table.size (); i++)
    for (unsigned b = 0; b < table[i].blocks; b++)
      {
        const HoneKTraceRec &r = h[table[i].base + b];
        fprintf (f, "B,%zu,%u,%u", i, b, r.sm);
        for (int k = 0; k < HONE_K_TRACE_MARKS; k++)
          fprintf (f, ",%lld", r.t[k] ? (long long) (r.t[k] - t_min) : -1ll);
        fputc ('\n', f);
      }
  return fclose (f) == 0 ? 0 : (int) cudaErrorUnknown;
}

#else

extern "C" HoneKTraceRec *
hone_k_trace_slot (int, unsigned, unsigned, unsigned, cudaStream_t)
{
  return NULL;
}

extern "C" int
hone_k_trace_reserve (size_t)
{
  return (int) cudaErrorNotSupported;
}

extern "C" int
hone_k_trace_clear (cudaStream_t)
{
  return (int) cudaErrorNotSupported;
}

extern "C" int
hone_k_trace_dump (const char *, cudaStream_t)
{
  return (int) cudaErrorNotSupported;
}

#endif
