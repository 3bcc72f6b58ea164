/* hone-metrics.h — what a request cost, and what the engine is doing now.
 *
 * Plain structs (boxed for GValue/closures): the GUI copies them into charts,
 * the CLI prints them, the bench takes medians over them. Times are
 * milliseconds of the monotonic clock; memory is bytes as the backend reports
 * it (process RSS on the CPU backend, device memory on CUDA).
 */
#pragma once

#include <glib.h>
#include <glib-object.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef enum {
  HONE_STOP_NONE,           /* still running / failed */
  HONE_STOP_EOG,            /* the model produced EOS or an end-of-turn token */
  HONE_STOP_STRING,         /* a stop string matched (trimmed from the text) */
  HONE_STOP_MAX_TOKENS,     /* params.max_tokens reached */
  HONE_STOP_CONTEXT_FULL,   /* the sequence reached the context length */
} HoneStopReason;

#define HONE_TYPE_STOP_REASON (hone_stop_reason_get_type ())
GType       hone_stop_reason_get_type (void) G_GNUC_CONST;
/* "eog", "stop-string", "max-tokens", "context-full", "none". */
const char *hone_stop_reason_to_string (HoneStopReason reason);

/* One generate request, from the moment it was posted to the engine queue. */
typedef struct {
  double queue_ms;          /* posted → picked up by the engine thread */
  double ttft_ms;           /* posted → first token sampled (queue + prompt processing + prefill) */
  int prompt_tokens;        /* the whole prompt as tokenized (incl. what the session had cached) */
  int cached_tokens;        /* prompt tokens reused from the session's KV cache */
  int prefill_tokens;       /* prompt tokens computed by this request (= prompt − cached) */
  double prefill_ms;        /* forward passes over the prefill tokens */
  double prefill_tps;       /* prefill_tokens / prefill seconds (0 when nothing was prefilled) */
  int generated_tokens;     /* tokens sampled (incl. a final EOG token) */
  int decode_tokens;        /* single-token forward passes after the prefill */
  double decode_ms;         /* time of those passes + their sampling */
  double decode_tps;        /* decode_tokens / decode seconds */
  double total_ms;          /* posted → finished (end to end) */
  double prefill_share;     /* prefill_ms / (prefill_ms + decode_ms), 0..1 */
  gint64 memory_peak;       /* bytes: highest "used" seen during the request */
  gint64 memory_steady;     /* bytes: "used" at the end of decoding */
  HoneStopReason stop_reason;
  int device_sampled_tokens; /* of generated_tokens, those sampled on the GPU (the rest on the host) */
  int decode_ahead_tokens;  /* of decode_tokens, steps the backend had started before the host read the
                               previous token (decode ahead) */
  int dropped_messages;     /* chat: the oldest messages left out so the conversation fits the context */
} HoneRequestMetrics;

#define HONE_TYPE_REQUEST_METRICS (hone_request_metrics_get_type ())
GType               hone_request_metrics_get_type (void) G_GNUC_CONST;
HoneRequestMetrics *hone_request_metrics_copy (const HoneRequestMetrics *metrics);
void                hone_request_metrics_free (HoneRequestMetrics *metrics);
/* Derived fields (tps, prefill_share) from the raw ones. */
void                hone_request_metrics_finalize_rates (HoneRequestMetrics *metrics);
/* {"queue_ms":…, "ttft_ms":…, "prompt_tokens":…, …, "stop_reason":"eog"} */
JsonNode           *hone_request_metrics_to_json (const HoneRequestMetrics *metrics);

typedef enum {
  HONE_ENGINE_STATE_EMPTY,    /* no model */
  HONE_ENGINE_STATE_LOADING,  /* a load (or unload) is running */
  HONE_ENGINE_STATE_READY,    /* model loaded, idle */
  HONE_ENGINE_STATE_BUSY,     /* model loaded, a request is running */
} HoneEngineState;

#define HONE_TYPE_ENGINE_STATE (hone_engine_state_get_type ())
GType hone_engine_state_get_type (void) G_GNUC_CONST;

/* A snapshot of the engine, cheap to take (a mutex-protected copy; no call
 * into the engine thread): poll it a few times a second. */
typedef struct {
  HoneEngineState state;
  /* memory, as last reported by the backend (RSS or VRAM) */
  gint64 memory_used;
  gint64 memory_total;
  gint64 memory_peak;       /* since load */
  gint64 memory_weights;
  gint64 memory_kv_cache;
  gint64 memory_workspace;
  /* the last finished request */
  double last_ttft_ms;
  double last_prefill_tps;
  double last_decode_tps;
  /* the request (or load) in flight; zeros when idle */
  double load_progress;     /* 0..1 while loading */
  int inflight_prompt_tokens;     /* to prefill */
  int inflight_prefilled_tokens;  /* prefilled so far */
  int inflight_generated_tokens;
  int inflight_max_tokens;        /* 0 = unbounded */
  double inflight_elapsed_ms;
  double inflight_decode_tps;     /* running rate of the current decode */
  int queued_requests;            /* waiting behind the current one */
} HoneEngineMetrics;

#define HONE_TYPE_ENGINE_METRICS (hone_engine_metrics_get_type ())
GType              hone_engine_metrics_get_type (void) G_GNUC_CONST;
HoneEngineMetrics *hone_engine_metrics_copy (const HoneEngineMetrics *metrics);
void               hone_engine_metrics_free (HoneEngineMetrics *metrics);

/* Resident set size of this process in bytes (Linux /proc/self/statm; 0 if unknown). */
gint64 hone_metrics_process_rss (void);
/* Resets this process's peak resident set size (VmHWM, which the CPU backend
 * reports as the memory peak) to its current RSS, so that a buffer already
 * freed (the CPU bandwidth probe's) or a model already unloaded no longer
 * counts in the peaks reported after it (Linux ≥ 4.0: /proc/self/clear_refs
 * "5"). FALSE where it cannot. */
gboolean hone_metrics_reset_peak_rss (void);
/* Total physical memory in bytes (0 if unknown). */
gint64 hone_metrics_physical_memory (void);
/* The CPU's model name (/proc/cpuinfo "model name"; g_free), or NULL if unknown. */
char  *hone_metrics_cpu_model (void);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (HoneRequestMetrics, hone_request_metrics_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HoneEngineMetrics, hone_engine_metrics_free)

G_END_DECLS
