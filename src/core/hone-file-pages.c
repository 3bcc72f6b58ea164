/* hone-file-pages.c — see hone-file-pages.h. */
#include "hone-file-pages.h"

#include <unistd.h>
#include <sys/mman.h>

void
hone_file_pages_release (const void *data, gsize nbytes)
{
#ifdef MADV_DONTNEED
  const guintptr page = (guintptr) sysconf (_SC_PAGESIZE);
  const guintptr start = ((guintptr) data + page - 1) / page * page;
  const guintptr end = ((guintptr) data + nbytes) / page * page;
  if (data != NULL && end > start)
    madvise ((void *) start, end - start, MADV_DONTNEED);
#else
  (void) data;
  (void) nbytes;
#endif
}
