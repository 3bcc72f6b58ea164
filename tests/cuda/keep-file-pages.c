/* keep-file-pages.c — an LD_PRELOAD shim for measurements: a no-op
 * hone_file_pages_release, so that the same binaries keep a model file's pages
 * resident as they did before the page release existed (an A/B of its memory
 * figures in one device call). libhoneall.so calls it through its PLT, so the
 * preloaded definition wins. Built by tests/cuda/build-carry.sh:
 *   gcc -shared -fPIC -O2 -o CARRY/keep-file-pages.so tests/cuda/keep-file-pages.c */
#include <stddef.h>

void hone_file_pages_release (const void *data, size_t nbytes);

void
hone_file_pages_release (const void *data, size_t nbytes)
{
  (void) data;
  (void) nbytes;
}
