/* hone-bench.h — the baseline benchmark protocol (CLI `hone bench` and the app).
 *
 * Protocol: a fixed prompt of prompt_tokens tokens (a fixed English text,
 * tokenized, repeated/truncated to the exact length) is run through a fresh
 * session (empty KV cache) and gen_tokens tokens are decoded with EOS
 * ignored: greedily, or (sampled) with the chat's default sampler settings
 * (hone_sampler_params_init: temperature 0.8, top-k 40, top-p 0.95, min-p
 * 0.05) and a fixed seed, so that every run draws the same tokens. @warmup runs are discarded, then @runs runs are measured. Each
 * statistic is reported as median and p10/p90 (linear interpolation between
 * order statistics, as numpy.percentile's default).
 *
 * Roofline: decoding one token reads every weight matrix once plus the KV
 * cache written so far. bytes_per_token = weight bytes per token + mean KV
 * bytes read over the decoded positions; achieved GB/s = bytes_per_token ×
 * decode tok/s; roofline_fraction = achieved / bandwidth (when given).
 */
#pragma once

#include <glib-object.h>
#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "hone-engine.h"

G_BEGIN_DECLS

typedef struct {
  int prompt_tokens;        /* default 512 */
  int gen_tokens;           /* default 128 */
  int runs;                 /* measured runs, default 5 */
  int warmup;               /* discarded runs, default 1 */
  double bandwidth_gbs;     /* memory bandwidth in GB/s (1e9) for the roofline; 0 = none */
  gboolean sampled;         /* FALSE (default): greedy; TRUE: the chat's default sampling, fixed seed */
} HoneBenchParams;

void hone_bench_params_init (HoneBenchParams *params);
/* INVALID_ARGUMENT unless runs ≥ 1, warm-up ≥ 0, prompt and generated tokens
 * ≥ 1 and a finite bandwidth ≥ 0 (checked before a model is loaded for them). */
gboolean hone_bench_params_validate (const HoneBenchParams *params, GError **error);

typedef struct {
  double median;
  double p10;
  double p90;
} HoneBenchStat;

/* Median/p10/p90 of @n values (copied and sorted; n = 0 → zeros). */
void hone_bench_stat_compute (const double *values, gsize n, HoneBenchStat *stat);
/* Percentile q in [0, 100] of sorted values, numpy "linear" method. */
double hone_bench_percentile (const double *sorted, gsize n, double q);

typedef struct {
  HoneBenchParams params;
  char *model_path;
  char *model_name;
  char *device;             /* device id of the run */
  int n_threads;            /* CPU threads the run used (the engine's n-threads or the default); 0 on a GPU */
  int context_length;
  GArray *runs;             /* HoneRequestMetrics of the measured runs */
  HoneBenchStat ttft_ms;
  HoneBenchStat prefill_tps;
  HoneBenchStat decode_tps;
  HoneBenchStat prefill_share;
  HoneBenchStat memory_peak;    /* bytes */
  HoneBenchStat memory_steady;  /* bytes */
  gint64 weight_bytes_per_token;
  gint64 kv_bytes_per_token;    /* mean KV bytes read per decoded token */
  gint64 bytes_per_token;       /* the sum */
  double achieved_gbs;          /* bytes_per_token × median decode tok/s / 1e9 */
  double roofline_fraction;     /* achieved_gbs / params.bandwidth_gbs; 0 when no bandwidth */
} HoneBenchResult;

#define HONE_TYPE_BENCH_RESULT (hone_bench_result_get_type ())
GType            hone_bench_result_get_type (void) G_GNUC_CONST;
HoneBenchResult *hone_bench_result_copy (const HoneBenchResult *result);
void             hone_bench_result_free (HoneBenchResult *result);
JsonNode        *hone_bench_result_to_json (const HoneBenchResult *result);
char            *hone_bench_result_to_text (const HoneBenchResult *result);

/* Run the protocol on @engine's loaded model (NO_MODEL otherwise). @progress
 * gets 0..1 over all runs, on the caller's context. Errors: INVALID_ARGUMENT
 * (runs < 1, warmup < 0, tokens < 1, prompt + gen beyond the context),
 * CANCELLED, BACKEND. */
void             hone_engine_bench_async (HoneEngine *engine, const HoneBenchParams *params,
                                          HoneEngineProgressFunc progress, gpointer progress_data,
                                          GDestroyNotify progress_destroy,
                                          GCancellable *cancellable,
                                          GAsyncReadyCallback callback, gpointer user_data);
HoneBenchResult *hone_engine_bench_finish (HoneEngine *engine, GAsyncResult *result, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (HoneBenchResult, hone_bench_result_free)

G_END_DECLS
