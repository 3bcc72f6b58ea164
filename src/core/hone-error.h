/* hone-error.h — the HONE_ERROR GError domain.
 *
 * Every failure in libhone is reported as one GError in this domain with the
 * most specific code that fits, and a translated message that names what is
 * wrong (the file, the tensor, the key, the offset…). Bad input never aborts.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define HONE_ERROR (hone_error_quark ())

typedef enum {
  HONE_ERROR_FAILED,              /* nothing more specific fits */
  HONE_ERROR_IO,                  /* could not open/read/write/map a file */
  HONE_ERROR_FILE_CORRUPT,        /* structurally invalid: bad magic, truncated, out-of-bounds offset */
  HONE_ERROR_FILE_UNSUPPORTED,    /* valid but a version/feature we do not read */
  HONE_ERROR_INVALID_JSON,        /* JSON that does not parse or has the wrong shape */
  HONE_ERROR_UNSUPPORTED_ARCH,    /* model architecture we cannot run; message names it */
  HONE_ERROR_UNSUPPORTED_TYPE,    /* tensor type we cannot read/run; message names it */
  HONE_ERROR_MISSING_TENSOR,      /* a tensor the architecture needs is absent */
  HONE_ERROR_SHAPE_MISMATCH,      /* a tensor has the wrong shape for the config */
  HONE_ERROR_TOKENIZER,           /* vocab/merges inconsistent or unsupported tokenizer */
  HONE_ERROR_TEMPLATE_SYNTAX,     /* chat template does not parse */
  HONE_ERROR_TEMPLATE_RUNTIME,    /* chat template failed while rendering (incl. raise_exception) */
  HONE_ERROR_TEMPLATE_LIMIT,      /* chat template exceeded a time/memory/recursion bound */
  HONE_ERROR_INVALID_ARGUMENT,    /* caller passed a bad value (sampling params, empty prompt…) */
  HONE_ERROR_CONTEXT_OVERFLOW,    /* request does not fit the context window */
  HONE_ERROR_OUT_OF_MEMORY,       /* host or device allocation failed */
  HONE_ERROR_CANCELLED,           /* the caller cancelled the job */
  HONE_ERROR_NO_MODEL,            /* operation needs a loaded model */
  HONE_ERROR_BACKEND,             /* backend (CUDA, threads) failed at run time */
  HONE_ERROR_NETWORK,             /* a download failed (offline, checksum mismatch) */
} HoneError;

GQuark hone_error_quark (void);

/* Name of a code, e.g. "file-corrupt"; for logs and JSON output. */
const char *hone_error_code_name (int code);

G_END_DECLS
