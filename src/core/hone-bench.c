/* hone-bench.c — the baseline benchmark protocol, run through the public
 * session API (so the app and the CLI measure exactly what users get). */
#include "hone-bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hone-backend.h"
#include "hone-dtype.h"
#include "hone-error.h"
#include "hone-i18n.h"

/* The fixed prompt: plain English prose, repeated until the token count is
 * reached. Fixed so runs and machines compare. */
static const char bench_text[] =
  "The history of computing is a story of memory as much as of arithmetic. Early machines "
  "spent most of their time waiting for data to arrive from slow storage, and every "
  "generation of hardware since has tried to bring the numbers closer to the units that "
  "use them. Caches, wider buses and faster links all serve the same purpose: to keep the "
  "arithmetic busy. Language models make this old problem visible again, because producing "
  "one word requires reading every weight of the network once. ";

void
hone_bench_params_init (HoneBenchParams *params)
{
  params->prompt_tokens = 512;
  params->gen_tokens = 128;
  params->runs = 5;
  params->warmup = 1;
  params->bandwidth_gbs = 0.0;
  params->sampled = FALSE;
}

gboolean
hone_bench_params_validate (const HoneBenchParams *params, GError **error)
{
  if (params->runs < 1 || params->warmup < 0 || params->prompt_tokens < 1 || params->gen_tokens < 1
      || params->bandwidth_gbs < 0 || !isfinite (params->bandwidth_gbs))
    {
      g_set_error_literal (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                           _("bench needs runs ≥ 1, warm-up ≥ 0, prompt and generated tokens ≥ 1 "
                             "and a bandwidth ≥ 0"));
      return FALSE;
    }
  return TRUE;
}

/* The seed of sampled bench runs: every run draws the same tokens. */
#define BENCH_SEED 20261204

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

double
hone_bench_percentile (const double *sorted, gsize n, double q)
{
  double pos, frac;
  gsize lo;

  if (n == 0)
    return 0.0;
  pos = (q / 100.0) * (double) (n - 1);
  lo = (gsize) floor (pos);
  if (lo >= n - 1)
    return sorted[n - 1];
  frac = pos - (double) lo;
  return sorted[lo] + (sorted[lo + 1] - sorted[lo]) * frac;
}

void
hone_bench_stat_compute (const double *values, gsize n, HoneBenchStat *stat)
{
  g_autofree double *v = NULL;

  memset (stat, 0, sizeof *stat);
  if (n == 0)
    return;
  v = g_memdup2 (values, n * sizeof (double));
  qsort (v, n, sizeof (double), cmp_double);
  stat->median = hone_bench_percentile (v, n, 50.0);
  stat->p10 = hone_bench_percentile (v, n, 10.0);
  stat->p90 = hone_bench_percentile (v, n, 90.0);
}

G_DEFINE_BOXED_TYPE (HoneBenchResult, hone_bench_result, hone_bench_result_copy, hone_bench_result_free)

HoneBenchResult *
hone_bench_result_copy (const HoneBenchResult *r)
{
  HoneBenchResult *c = g_memdup2 (r, sizeof *r);
  c->model_path = g_strdup (r->model_path);
  c->model_name = g_strdup (r->model_name);
  c->device = g_strdup (r->device);
  c->runs = r->runs != NULL ? g_array_copy (r->runs) : NULL;
  return c;
}

void
hone_bench_result_free (HoneBenchResult *r)
{
  if (r == NULL)
    return;
  g_free (r->model_path);
  g_free (r->model_name);
  g_free (r->device);
  g_clear_pointer (&r->runs, g_array_unref);
  g_free (r);
}

static void
add_stat (JsonBuilder *b, const char *name, const HoneBenchStat *s)
{
  json_builder_set_member_name (b, name);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "median");
  json_builder_add_double_value (b, s->median);
  json_builder_set_member_name (b, "p10");
  json_builder_add_double_value (b, s->p10);
  json_builder_set_member_name (b, "p90");
  json_builder_add_double_value (b, s->p90);
  json_builder_end_object (b);
}

JsonNode *
hone_bench_result_to_json (const HoneBenchResult *r)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();

#define S(k, v) json_builder_set_member_name (b, k); json_builder_add_string_value (b, v)
#define I(k, v) json_builder_set_member_name (b, k); json_builder_add_int_value (b, v)
#define D(k, v) json_builder_set_member_name (b, k); json_builder_add_double_value (b, v)
  json_builder_begin_object (b);
  S ("model", r->model_name);
  S ("model_path", r->model_path);
  S ("device", r->device);
  I ("n_threads", r->n_threads);
  I ("context_length", r->context_length);
  I ("prompt_tokens", r->params.prompt_tokens);
  I ("gen_tokens", r->params.gen_tokens);
  I ("runs", r->params.runs);
  I ("warmup", r->params.warmup);
  S ("sampling", r->params.sampled ? "chat-defaults" : "greedy");
  add_stat (b, "ttft_ms", &r->ttft_ms);
  add_stat (b, "prefill_tps", &r->prefill_tps);
  add_stat (b, "decode_tps", &r->decode_tps);
  add_stat (b, "prefill_share", &r->prefill_share);
  add_stat (b, "memory_peak", &r->memory_peak);
  add_stat (b, "memory_steady", &r->memory_steady);
  I ("weight_bytes_per_token", r->weight_bytes_per_token);
  I ("kv_bytes_per_token", r->kv_bytes_per_token);
  I ("bytes_per_token", r->bytes_per_token);
  D ("achieved_gbs", r->achieved_gbs);
  if (r->params.bandwidth_gbs > 0)
    {
      D ("bandwidth_gbs", r->params.bandwidth_gbs);
      D ("roofline_fraction", r->roofline_fraction);
    }
  json_builder_set_member_name (b, "per_run");
  json_builder_begin_array (b);
  for (guint i = 0; r->runs != NULL && i < r->runs->len; i++)
    json_builder_add_value (b, hone_request_metrics_to_json (&g_array_index (r->runs, HoneRequestMetrics, i)));
  json_builder_end_array (b);
  json_builder_end_object (b);
#undef S
#undef I
#undef D
  return json_builder_get_root (b);
}

char *
hone_bench_result_to_text (const HoneBenchResult *r)
{
  GString *s = g_string_new (NULL);
  g_autofree char *pk = g_format_size ((guint64) r->memory_peak.median);
  g_autofree char *st = g_format_size ((guint64) r->memory_steady.median);

  g_string_append_printf (s, _("model: %s\n"), r->model_name);
  g_string_append_printf (s, _("device: %s, threads: %d, context: %d\n"), r->device,
                          r->n_threads, r->context_length);
  g_string_append_printf (s, _("protocol: %d prompt tokens, %d generated, %d runs after %d warm-up\n"),
                          r->params.prompt_tokens, r->params.gen_tokens, r->params.runs, r->params.warmup);
  if (r->params.sampled)
    {
      HoneSamplerParams sp;
      hone_sampler_params_init (&sp);
      g_string_append_printf (s, _("sampling: temperature %.2g, top-k %d, top-p %.2g, min-p %.2g, fixed seed\n"),
                              sp.temperature, sp.top_k, sp.top_p, sp.min_p);
    }
  else
    g_string_append (s, _("sampling: greedy\n"));
  g_string_append_printf (s, "%-18s %12s %12s %12s\n", "", _("median"), "p10", "p90");
  g_string_append_printf (s, "%-18s %12.1f %12.1f %12.1f\n", _("TTFT (ms)"),
                          r->ttft_ms.median, r->ttft_ms.p10, r->ttft_ms.p90);
  g_string_append_printf (s, "%-18s %12.1f %12.1f %12.1f\n", _("prefill (tok/s)"),
                          r->prefill_tps.median, r->prefill_tps.p10, r->prefill_tps.p90);
  g_string_append_printf (s, "%-18s %12.1f %12.1f %12.1f\n", _("decode (tok/s)"),
                          r->decode_tps.median, r->decode_tps.p10, r->decode_tps.p90);
  g_string_append_printf (s, "%-18s %11.1f%% %11.1f%% %11.1f%%\n", _("prefill share"),
                          100 * r->prefill_share.median, 100 * r->prefill_share.p10, 100 * r->prefill_share.p90);
  g_string_append_printf (s, "%-18s %12.1f %12.1f %12.1f\n", _("peak memory (MB)"),
                          r->memory_peak.median / 1e6, r->memory_peak.p10 / 1e6, r->memory_peak.p90 / 1e6);
  g_string_append_printf (s, "%-18s %12.1f %12.1f %12.1f\n", _("steady memory (MB)"),
                          r->memory_steady.median / 1e6, r->memory_steady.p10 / 1e6, r->memory_steady.p90 / 1e6);
  g_string_append_printf (s, _("memory: peak %s, steady %s (median)\n"), pk, st);
  g_string_append_printf (s, _("bytes per decoded token: %.2f MB (weights %.2f MB + KV %.2f MB)\n"),
                          r->bytes_per_token / 1e6, r->weight_bytes_per_token / 1e6, r->kv_bytes_per_token / 1e6);
  g_string_append_printf (s, _("achieved bandwidth: %.2f GB/s\n"), r->achieved_gbs);
  if (r->params.bandwidth_gbs > 0)
    g_string_append_printf (s, _("roofline: %.1f%% of %.1f GB/s\n"), 100 * r->roofline_fraction,
                            r->params.bandwidth_gbs);
  return g_string_free (s, FALSE);
}

/* ---- the run loop (on the caller's context) ---------------------------------------- */

typedef struct {
  HoneEngine *engine;
  HoneSession *session;
  HoneBenchParams params;
  GArray *prompt;
  GArray *runs;
  int done;               /* runs finished, warm-up included */
  HoneSamplerParams sampling;
  HoneEngineProgressFunc progress;
  gpointer progress_data;
  GDestroyNotify progress_destroy;
} BenchState;

static void
bench_state_free (BenchState *st)
{
  g_clear_object (&st->session);
  g_clear_object (&st->engine);
  g_clear_pointer (&st->prompt, g_array_unref);
  g_clear_pointer (&st->runs, g_array_unref);
  hone_sampler_params_clear (&st->sampling);
  if (st->progress_destroy != NULL)
    st->progress_destroy (st->progress_data);
  g_free (st);
}

static void bench_next (GTask *task);

static void
bench_finish_results (GTask *task)
{
  BenchState *st = g_task_get_task_data (task);
  HoneBenchResult *r = g_new0 (HoneBenchResult, 1);
  HoneModelInfo *info = hone_engine_get_model_info (st->engine);
  guint n = st->runs->len;
  g_autofree double *v = g_new (double, MAX (n, 1));
  double mean_pos;
  int bpe = 2;   /* f16 KV; int8 when the engine runs an int8 cache */

#define STAT(field, expr)                                                     \
  for (guint i = 0; i < n; i++)                                               \
    {                                                                         \
      const HoneRequestMetrics *m = &g_array_index (st->runs, HoneRequestMetrics, i); \
      v[i] = (expr);                                                          \
    }                                                                         \
  hone_bench_stat_compute (v, n, &r->field)

  r->params = st->params;
  STAT (ttft_ms, m->ttft_ms);
  STAT (prefill_tps, m->prefill_tps);
  STAT (decode_tps, m->decode_tps);
  STAT (prefill_share, m->prefill_share);
  STAT (memory_peak, (double) m->memory_peak);
  STAT (memory_steady, (double) m->memory_steady);
#undef STAT

  r->runs = g_steal_pointer (&st->runs);
  r->model_path = g_strdup (hone_engine_get_model_path (st->engine));
  r->model_name = g_strdup (info != NULL ? hone_model_info_get_name (info) : r->model_path);
  g_object_get (st->engine, "active-device", &r->device, NULL);
  /* the threads the CPU ran on: the engine's n-threads, or its default (0 means one per usable CPU) */
  r->n_threads = g_strcmp0 (r->device, "cpu") != 0 ? 0
                 : hone_engine_get_n_threads (st->engine) > 0 ? hone_engine_get_n_threads (st->engine)
                 : hone_cpu_backend_default_threads ();
  r->context_length = hone_engine_get_active_context_length (st->engine);

  if (hone_engine_get_int8_kv (st->engine)
      && (hone_engine_get_capabilities (st->engine) & HONE_ENGINE_CAP_INT8_KV))
    bpe = 1;
  if (info != NULL)
    {
      /* Decode step t (0-based) attends over prompt + t + 1 positions. */
      mean_pos = st->params.prompt_tokens + (st->params.gen_tokens + 1) / 2.0;
      r->weight_bytes_per_token = hone_model_info_get_weight_bytes_per_token (info);
      /* AWQ on a GPU: the CUDA backend repacks Q4Z (20 bytes a 32-weight block
       * on the host) to nibbles + one f16 scale and one zero byte a group,
       * 0.5 + 3/g bytes a weight: count what the device reads. */
      if (hone_model_info_get_awq_group_size (info) > 0 && r->device != NULL
          && g_str_has_prefix (r->device, "cuda"))
        {
          guint n_types = 0;
          const HoneTensorTypeCount *tc = hone_model_info_get_tensor_types (info, &n_types);
          const double g = hone_model_info_get_awq_group_size (info);
          for (guint i = 0; i < n_types; i++)
            if (tc[i].type == HONE_DTYPE_Q4Z)
              r->weight_bytes_per_token -= tc[i].bytes - (gint64) (tc[i].n_elements * (0.5 + 3.0 / g));
        }
      r->kv_bytes_per_token = (gint64) (2.0 * hone_model_info_get_n_layers (info)
                                        * hone_model_info_get_n_kv_heads (info)
                                        * hone_model_info_get_head_dim (info) * bpe * mean_pos);
      r->bytes_per_token = r->weight_bytes_per_token + r->kv_bytes_per_token;
    }
  r->achieved_gbs = r->bytes_per_token * r->decode_tps.median / 1e9;
  if (st->params.bandwidth_gbs > 0)
    r->roofline_fraction = r->achieved_gbs / st->params.bandwidth_gbs;
  g_task_return_pointer (task, r, (GDestroyNotify) hone_bench_result_free);
}

static void
bench_run_done (GObject *source, GAsyncResult *res, gpointer data)
{
  GTask *task = data;
  BenchState *st = g_task_get_task_data (task);
  GError *error = NULL;
  g_autoptr (HoneGenerateResult) gr = hone_session_generate_finish (HONE_SESSION (source), res, &error);
  int total = st->params.warmup + st->params.runs;

  if (gr == NULL)
    {
      g_task_return_error (task, error);
      g_object_unref (task);
      return;
    }
  if (st->done >= st->params.warmup)
    g_array_append_val (st->runs, gr->metrics);
  st->done++;
  if (st->progress != NULL)
    st->progress ((double) st->done / total, st->progress_data);
  if (st->done >= total)
    {
      bench_finish_results (task);
      g_object_unref (task);
      return;
    }
  bench_next (task);
}

static void
bench_next (GTask *task)
{
  BenchState *st = g_task_get_task_data (task);

  /* Every run starts from an empty KV cache: the whole prompt is prefilled. */
  hone_session_reset (st->session);
  hone_session_complete_tokens_async (st->session, (const gint32 *) (void *) st->prompt->data, st->prompt->len,
                                      &st->sampling, NULL, NULL, NULL,
                                      g_task_get_cancellable (task), bench_run_done, task);
}

void
hone_engine_bench_async (HoneEngine *engine, const HoneBenchParams *params,
                         HoneEngineProgressFunc progress, gpointer progress_data,
                         GDestroyNotify progress_destroy,
                         GCancellable *cancellable,
                         GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (engine, cancellable, callback, user_data);
  BenchState *st = g_new0 (BenchState, 1);
  GError *error = NULL;
  g_autoptr (GArray) piece = NULL;
  int ctx;

  g_task_set_source_tag (task, hone_engine_bench_async);
  g_task_set_check_cancellable (task, FALSE);
  st->engine = g_object_ref (engine);
  st->params = *params;
  st->progress = progress;
  st->progress_data = progress_data;
  st->progress_destroy = progress_destroy;
  st->runs = g_array_new (FALSE, FALSE, sizeof (HoneRequestMetrics));
  g_task_set_task_data (task, st, (GDestroyNotify) bench_state_free);

  ctx = hone_engine_get_active_context_length (engine);
  if (hone_engine_get_model_info (engine) == NULL || ctx == 0)
    {
      g_task_return_new_error (task, HONE_ERROR, HONE_ERROR_NO_MODEL, "%s", _("no model is loaded"));
      g_object_unref (task);
      return;
    }
  if (!hone_bench_params_validate (params, &error))
    {
      g_task_return_error (task, error);
      g_object_unref (task);
      return;
    }
  if (params->prompt_tokens + params->gen_tokens > ctx)
    {
      g_task_return_new_error (task, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                               _("%d prompt + %d generated tokens do not fit the context of %d"),
                               params->prompt_tokens, params->gen_tokens, ctx);
      g_object_unref (task);
      return;
    }

  piece = hone_engine_tokenize (engine, bench_text, FALSE, FALSE, &error);
  if (piece == NULL || piece->len == 0)
    {
      if (error == NULL)
        g_set_error_literal (&error, HONE_ERROR, HONE_ERROR_TOKENIZER, _("the bench prompt tokenized to nothing"));
      g_task_return_error (task, error);
      g_object_unref (task);
      return;
    }
  st->prompt = g_array_sized_new (FALSE, FALSE, sizeof (gint32), params->prompt_tokens);
  while ((int) st->prompt->len < params->prompt_tokens)
    g_array_append_vals (st->prompt, piece->data,
                         MIN (piece->len, (guint) (params->prompt_tokens - (int) st->prompt->len)));

  if (params->sampled)
    {
      hone_sampler_params_init (&st->sampling);
      st->sampling.seed = BENCH_SEED;
    }
  else
    hone_sampler_params_init_greedy (&st->sampling);
  st->sampling.max_tokens = params->gen_tokens;
  st->sampling.ignore_eog = TRUE;
  st->session = hone_session_new (engine);
  bench_next (task);
}

HoneBenchResult *
hone_engine_bench_finish (HoneEngine *engine, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, engine), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}
