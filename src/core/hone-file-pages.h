/* hone-file-pages.h — dropping a read-only file mapping's pages from the
 * process's resident memory once their bytes have been copied elsewhere
 * (uploaded to a GPU, repacked). The readers (GGUF, safetensors) check that
 * a range lies in one of their mapped files before calling this: on
 * anonymous memory MADV_DONTNEED would zero it. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The whole pages inside [data, data + nbytes) of a private read-only file
 * mapping leave the resident memory (madvise MADV_DONTNEED); read again they
 * come back, unchanged, from the file. The partial pages at either end stay.
 * A no-op where MADV_DONTNEED does not exist. */
void hone_file_pages_release (const void *data, gsize nbytes);

G_END_DECLS
