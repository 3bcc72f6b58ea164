/* hone-engine.h — the engine: one thread that owns the model and the backend.
 *
 * HoneEngine runs one engine thread. That thread owns every backend object
 * (and every GPU allocation); callers on any thread post jobs (load, unload,
 * generate, bench) to its queue, and jobs run one at a time in order. Results,
 * progress and streamed tokens come back on the GMainContext that was the
 * caller's thread-default context when the *_async call was made — the GUI
 * never blocks and never touches engine state.
 *
 * Property notifications (state, model-info, capabilities, load-progress) are
 * emitted on the context the engine was created on (its "owner" context).
 *
 * Options (device, n-threads, context-length, memory-budget, int8-kv,
 * speculative, pd-split, precise) are read when a load starts: change them, then
 * (re)load. Options a backend cannot do (see "capabilities") are ignored.
 *
 * Sessions: a HoneSession is one conversation: a KV sequence on the backend
 * plus the token history it holds. Each request re-renders the full prompt,
 * tokenizes it, keeps the longest common prefix with the cached tokens,
 * truncates the KV cache where they diverge (edit, regenerate) and prefills
 * only the rest. A session survives unload/reload of a model: its cache is
 * then simply empty.
 *
 * Cancellation: cancel the GCancellable of a request at any time; it stops
 * at the next token (or prefill chunk) with HONE_ERROR_CANCELLED. Unloading
 * while a request runs cancels that request (HONE_ERROR_CANCELLED) and every
 * request queued behind the unload. Dropping the last ref of the engine
 * cancels all jobs and joins the thread.
 */
#pragma once

#include <glib-object.h>
#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "hone-metrics.h"
#include "hone-model-info.h"
#include "hone-sampler.h"

G_BEGIN_DECLS

/* ---- devices -------------------------------------------------------------- */

typedef enum {
  HONE_DEVICE_CPU,
  HONE_DEVICE_CUDA,
} HoneDeviceKind;

typedef enum /*< flags >*/ {
  HONE_ENGINE_CAP_NONE          = 0,
  HONE_ENGINE_CAP_INT8_KV       = 1 << 0,   /* same bits as HoneBackendCaps */
  HONE_ENGINE_CAP_SPECULATIVE   = 1 << 1,
  HONE_ENGINE_CAP_PD_SPLIT      = 1 << 2,
  HONE_ENGINE_CAP_GPU_SAMPLING  = 1 << 3,
} HoneEngineCaps;

#define HONE_TYPE_ENGINE_CAPS (hone_engine_caps_get_type ())
GType hone_engine_caps_get_type (void) G_GNUC_CONST;

typedef struct {
  char *id;                 /* "cpu", "cuda:0", …: the value of the "device" property */
  char *name;               /* human: "CPU — 16 threads", "NVIDIA H200" */
  HoneDeviceKind kind;
  int n_cores;              /* CPU: logical cores; CUDA: SMs (0 if unknown) */
  gint64 memory_total;      /* RAM or VRAM bytes (0 if unknown) */
} HoneDevice;

#define HONE_TYPE_DEVICE (hone_device_get_type ())
GType       hone_device_get_type (void) G_GNUC_CONST;
HoneDevice *hone_device_copy (const HoneDevice *device);
void        hone_device_free (HoneDevice *device);

/* Devices usable now, CPU first (always present). Element type HoneDevice*. */
GPtrArray  *hone_engine_list_devices (void);
/* The device to use for @wanted: itself when it names one ("cpu", "cuda:N");
 * for NULL, "" or "auto" the first CUDA GPU that can run Hone's kernels
 * (driver, compute capability ≥ 8.0, cuBLAS), else "cpu" — and then, in a
 * CUDA build, *why (if @why) = the one-line reason no GPU is used (g_free it;
 * NULL otherwise). Opens cuBLAS when it finds a usable GPU. */
char       *hone_engine_pick_device (const char *wanted, char **why);

/* ---- the engine ----------------------------------------------------------- */

#define HONE_TYPE_ENGINE (hone_engine_get_type ())
G_DECLARE_FINAL_TYPE (HoneEngine, hone_engine, HONE, ENGINE, GObject)

#define HONE_TYPE_SESSION (hone_session_get_type ())
G_DECLARE_FINAL_TYPE (HoneSession, hone_session, HONE, SESSION, GObject)

/* Progress 0..1, called on the caller's context. */
typedef void (*HoneEngineProgressFunc) (double fraction, gpointer user_data);

/* Streamed output, called on the caller's context, in order, before the
 * request's GAsyncReadyCallback. @piece is the text that became safe to show
 * with this token (complete UTF-8, stop strings held back and never shown;
 * may be ""); @token_id the sampled token. A final call with token_id -1 may
 * deliver held-back text at the end. */
typedef void (*HoneTokenFunc) (const char *piece, gint32 token_id, gpointer user_data);

/* Properties:
 *   device          string  rw  "cpu" (default), an id from hone_engine_list_devices(), or
 *                               "auto": at each load the first usable GPU
 *                               (hone_engine_pick_device), else — or when the model does
 *                               not fit in that GPU's memory — the CPU
 *   n-threads       int     rw  CPU worker threads, 0 = all cores (default 0)
 *   context-length  int     rw  tokens per session, 0 = min(model's trained length, 4096) (default 0)
 *   memory-budget   int64   rw  bytes the backend may use, 0 = no limit
 *   int8-kv         bool    rw  int8 KV cache (if supported)
 *   speculative     bool    rw  speculative decoding (if supported)
 *   pd-split        bool    rw  prefill/decode split (if supported)
 *   precise         bool    rw  CPU: f32 activations in every matmul (slower checking mode)
 *   state           HoneEngineState  r
 *   model-info      HoneModelInfo    r  NULL when empty
 *   model-path      string  r   path of the loaded model, NULL when empty
 *   capabilities    HoneEngineCaps   r  of the backend of the current device
 *   load-progress   double  r   0..1 during a load
 *   active-context-length int r  context length of the loaded model (0 when empty)
 *   active-device   string  r   device of the loaded model (never "auto")
 *   device-note     string  r   why "auto" put the loaded model on the CPU (no usable
 *                               GPU: the picker's reason; or the GPU's out-of-memory
 *                               error), NULL otherwise and when empty
 */
HoneEngine *hone_engine_new (void);

const char     *hone_engine_get_device (HoneEngine *self);
void            hone_engine_set_device (HoneEngine *self, const char *device);
int             hone_engine_get_n_threads (HoneEngine *self);
void            hone_engine_set_n_threads (HoneEngine *self, int n_threads);
int             hone_engine_get_context_length (HoneEngine *self);
void            hone_engine_set_context_length (HoneEngine *self, int context_length);
gint64          hone_engine_get_memory_budget (HoneEngine *self);
void            hone_engine_set_memory_budget (HoneEngine *self, gint64 bytes);
gboolean        hone_engine_get_int8_kv (HoneEngine *self);
void            hone_engine_set_int8_kv (HoneEngine *self, gboolean int8_kv);
gboolean        hone_engine_get_speculative (HoneEngine *self);
void            hone_engine_set_speculative (HoneEngine *self, gboolean speculative);
gboolean        hone_engine_get_pd_split (HoneEngine *self);
void            hone_engine_set_pd_split (HoneEngine *self, gboolean pd_split);
gboolean        hone_engine_get_precise (HoneEngine *self);
void            hone_engine_set_precise (HoneEngine *self, gboolean precise);

HoneEngineState hone_engine_get_state (HoneEngine *self);
HoneModelInfo  *hone_engine_get_model_info (HoneEngine *self);   /* transfer none, may be NULL */
const char     *hone_engine_get_model_path (HoneEngine *self);
HoneEngineCaps  hone_engine_get_capabilities (HoneEngine *self);
double          hone_engine_get_load_progress (HoneEngine *self);
int             hone_engine_get_active_context_length (HoneEngine *self);

/* Memory a load of @path would need with the engine's current options (or
 * @context_length if > 0), from metadata only. */
gboolean hone_engine_estimate_memory (HoneEngine *self, const char *path, int context_length,
                                      HoneMemoryEstimate *estimate, GError **error);

/* Load a model (replacing the current one; like unload, it cancels the
 * running and queued requests first). @progress (may be NULL) gets
 * 0..1 on the caller's context and reaches 1.0 on success. Errors: IO,
 * FILE_CORRUPT, UNSUPPORTED_ARCH/TYPE, OUT_OF_MEMORY, BACKEND, CANCELLED (the
 * engine is then empty and usable). */
void     hone_engine_load_async (HoneEngine *self, const char *path,
                                 HoneEngineProgressFunc progress, gpointer progress_data,
                                 GDestroyNotify progress_destroy,
                                 GCancellable *cancellable,
                                 GAsyncReadyCallback callback, gpointer user_data);
gboolean hone_engine_load_finish (HoneEngine *self, GAsyncResult *result, GError **error);

/* Unload the model; cancels the running request and the queued ones first. */
void     hone_engine_unload_async (HoneEngine *self, GCancellable *cancellable,
                                   GAsyncReadyCallback callback, gpointer user_data);
gboolean hone_engine_unload_finish (HoneEngine *self, GAsyncResult *result, GError **error);

/* Cheap (no round trip to the engine thread): safe to call 4×/s. */
void     hone_engine_get_metrics_snapshot (HoneEngine *self, HoneEngineMetrics *metrics);

/* Blocking conveniences for the CLI and tests: run the async call and iterate
 * a private main context until it finishes. Not for the GUI thread. */
gboolean hone_engine_load_sync (HoneEngine *self, const char *path,
                                HoneEngineProgressFunc progress, gpointer progress_data,
                                GCancellable *cancellable, GError **error);

/* ---- sessions ------------------------------------------------------------- */

/* What a generate request produced. */
typedef struct {
  char *text;                   /* generated text; stop string trimmed; specials skipped */
  GArray *prompt_tokens;        /* gint32: the whole prompt as tokenized */
  GArray *generated_tokens;     /* gint32: sampled tokens (incl. a final EOG token) */
  HoneRequestMetrics metrics;   /* metrics.stop_reason says why it ended */
} HoneGenerateResult;

#define HONE_TYPE_GENERATE_RESULT (hone_generate_result_get_type ())
GType               hone_generate_result_get_type (void) G_GNUC_CONST;
HoneGenerateResult *hone_generate_result_copy (const HoneGenerateResult *result);
void                hone_generate_result_free (HoneGenerateResult *result);

/* A new, empty conversation on @engine (holds a ref on the engine). */
HoneSession *hone_session_new (HoneEngine *engine);
HoneEngine  *hone_session_get_engine (HoneSession *self);
/* Drop the cached tokens: the KV sequence and the token history are cleared
 * on the engine thread before the next request of this session (until then
 * hone_session_get_tokens() still returns the old ones). */
void         hone_session_reset (HoneSession *self);
/* Copy of the tokens the session's KV cache holds now (gint32; possibly
 * behind a request in flight). */
GArray      *hone_session_get_tokens (HoneSession *self);

/* Chat: @messages is a JSON array of {"role", "content"} objects (the whole
 * conversation so far, ending with the user's turn); it is rendered with the
 * model's chat template and add_generation_prompt. Models without a template:
 * HONE_ERROR_TEMPLATE_RUNTIME ("model has no chat template").
 * A conversation longer than the context keeps going: when the prompt leaves
 * less room for the answer than max_tokens (unset: a quarter of the context;
 * at most half), the oldest turns after the leading system messages are left
 * out — a user message with the replies after it at a time, and an eighth of
 * the context more than needed, so the next turns reuse the cache — and
 * metrics.dropped_messages counts them. The last message always stays; when
 * it alone (with the system messages) does not fit, the request fails with
 * HONE_ERROR_CONTEXT_OVERFLOW. @messages itself is not changed. */
void     hone_session_chat_async (HoneSession *self, JsonNode *messages,
                                  const HoneSamplerParams *params,
                                  HoneTokenFunc token_func, gpointer token_data,
                                  GDestroyNotify token_destroy,
                                  GCancellable *cancellable,
                                  GAsyncReadyCallback callback, gpointer user_data);
/* Raw completion: @prompt is text (special-token text such as "<|im_start|>"
 * is parsed; BOS added when the tokenizer says so). Empty → INVALID_ARGUMENT. */
void     hone_session_complete_async (HoneSession *self, const char *prompt,
                                      const HoneSamplerParams *params,
                                      HoneTokenFunc token_func, gpointer token_data,
                                      GDestroyNotify token_destroy,
                                      GCancellable *cancellable,
                                      GAsyncReadyCallback callback, gpointer user_data);
/* Token ids as the prompt (bench, tests). */
void     hone_session_complete_tokens_async (HoneSession *self, const gint32 *tokens, gsize n_tokens,
                                             const HoneSamplerParams *params,
                                             HoneTokenFunc token_func, gpointer token_data,
                                             GDestroyNotify token_destroy,
                                             GCancellable *cancellable,
                                             GAsyncReadyCallback callback, gpointer user_data);
/* Finish any of the three. Errors: NO_MODEL, INVALID_ARGUMENT (sampling
 * params, empty prompt), CONTEXT_OVERFLOW (prompt longer than the context),
 * TEMPLATE_*, CANCELLED, BACKEND. On error the session keeps what the KV
 * cache validly holds. */
HoneGenerateResult *hone_session_generate_finish (HoneSession *self, GAsyncResult *result, GError **error);

/* ---- blocking conveniences (CLI, tests; iterate a private context) -------- */
HoneGenerateResult *hone_session_chat_sync (HoneSession *self, JsonNode *messages,
                                            const HoneSamplerParams *params,
                                            HoneTokenFunc token_func, gpointer token_data,
                                            GCancellable *cancellable, GError **error);
HoneGenerateResult *hone_session_complete_sync (HoneSession *self, const char *prompt,
                                                const HoneSamplerParams *params,
                                                HoneTokenFunc token_func, gpointer token_data,
                                                GCancellable *cancellable, GError **error);

/* ---- model-level helpers run on the engine thread ------------------------- */

/* Tokenize / render with the loaded model's tokenizer and template (sync:
 * these only read immutable model data and may run on any thread). */
GArray  *hone_engine_tokenize (HoneEngine *self, const char *text, gboolean add_special,
                               gboolean parse_special, GError **error);
char    *hone_engine_detokenize (HoneEngine *self, const gint32 *ids, gsize n, gboolean skip_special,
                                 GError **error);
char    *hone_engine_render_chat (HoneEngine *self, JsonNode *messages, gboolean add_generation_prompt,
                                  GError **error);

/* Scores @tokens with strided windows of @context tokens (stride @stride,
 * HF's perplexity recipe: each window scores only the tokens not scored by
 * the previous one). Runs on the engine thread; @progress gets 0..1. */
typedef struct {
  double perplexity;
  double nll_sum;           /* sum of -log p over scored tokens */
  gint64 n_scored;          /* tokens scored */
  int n_windows;
  double elapsed_ms;
} HonePerplexityResult;

void     hone_engine_perplexity_async (HoneEngine *self, const gint32 *tokens, gsize n_tokens,
                                       int context, int stride,
                                       HoneEngineProgressFunc progress, gpointer progress_data,
                                       GDestroyNotify progress_destroy,
                                       GCancellable *cancellable,
                                       GAsyncReadyCallback callback, gpointer user_data);
gboolean hone_engine_perplexity_finish (HoneEngine *self, GAsyncResult *result,
                                        HonePerplexityResult *out, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (HoneGenerateResult, hone_generate_result_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HoneDevice, hone_device_free)

G_END_DECLS
