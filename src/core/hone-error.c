/* hone-error.c — the HONE_ERROR GError domain. */
#include "hone-error.h"

G_DEFINE_QUARK (hone-error-quark, hone_error)

const char *
hone_error_code_name (int code)
{
  static const char *const names[] = {
    [HONE_ERROR_FAILED] = "failed",
    [HONE_ERROR_IO] = "io",
    [HONE_ERROR_FILE_CORRUPT] = "file-corrupt",
    [HONE_ERROR_FILE_UNSUPPORTED] = "file-unsupported",
    [HONE_ERROR_INVALID_JSON] = "invalid-json",
    [HONE_ERROR_UNSUPPORTED_ARCH] = "unsupported-arch",
    [HONE_ERROR_UNSUPPORTED_TYPE] = "unsupported-type",
    [HONE_ERROR_MISSING_TENSOR] = "missing-tensor",
    [HONE_ERROR_SHAPE_MISMATCH] = "shape-mismatch",
    [HONE_ERROR_TOKENIZER] = "tokenizer",
    [HONE_ERROR_TEMPLATE_SYNTAX] = "template-syntax",
    [HONE_ERROR_TEMPLATE_RUNTIME] = "template-runtime",
    [HONE_ERROR_TEMPLATE_LIMIT] = "template-limit",
    [HONE_ERROR_INVALID_ARGUMENT] = "invalid-argument",
    [HONE_ERROR_CONTEXT_OVERFLOW] = "context-overflow",
    [HONE_ERROR_OUT_OF_MEMORY] = "out-of-memory",
    [HONE_ERROR_CANCELLED] = "cancelled",
    [HONE_ERROR_NO_MODEL] = "no-model",
    [HONE_ERROR_BACKEND] = "backend",
    [HONE_ERROR_NETWORK] = "network",
  };
  if (code < 0 || code >= (int) G_N_ELEMENTS (names) || names[code] == NULL)
    return "unknown";
  return names[code];
}
