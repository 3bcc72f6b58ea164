/* hone-metrics.c — request and engine metrics: boxed types, JSON, RSS. */
#include "hone-metrics.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

GType
hone_stop_reason_get_type (void)
{
  static gsize type = 0;
  if (g_once_init_enter (&type))
    {
      static const GEnumValue values[] = {
        { HONE_STOP_NONE, "HONE_STOP_NONE", "none" },
        { HONE_STOP_EOG, "HONE_STOP_EOG", "eog" },
        { HONE_STOP_STRING, "HONE_STOP_STRING", "stop-string" },
        { HONE_STOP_MAX_TOKENS, "HONE_STOP_MAX_TOKENS", "max-tokens" },
        { HONE_STOP_CONTEXT_FULL, "HONE_STOP_CONTEXT_FULL", "context-full" },
        { 0, NULL, NULL },
      };
      g_once_init_leave (&type, g_enum_register_static ("HoneStopReason", values));
    }
  return type;
}

const char *
hone_stop_reason_to_string (HoneStopReason reason)
{
  switch (reason)
    {
    case HONE_STOP_EOG: return "eog";
    case HONE_STOP_STRING: return "stop-string";
    case HONE_STOP_MAX_TOKENS: return "max-tokens";
    case HONE_STOP_CONTEXT_FULL: return "context-full";
    case HONE_STOP_NONE:
    default: return "none";
    }
}

GType
hone_engine_state_get_type (void)
{
  static gsize type = 0;
  if (g_once_init_enter (&type))
    {
      static const GEnumValue values[] = {
        { HONE_ENGINE_STATE_EMPTY, "HONE_ENGINE_STATE_EMPTY", "empty" },
        { HONE_ENGINE_STATE_LOADING, "HONE_ENGINE_STATE_LOADING", "loading" },
        { HONE_ENGINE_STATE_READY, "HONE_ENGINE_STATE_READY", "ready" },
        { HONE_ENGINE_STATE_BUSY, "HONE_ENGINE_STATE_BUSY", "busy" },
        { 0, NULL, NULL },
      };
      g_once_init_leave (&type, g_enum_register_static ("HoneEngineState", values));
    }
  return type;
}

G_DEFINE_BOXED_TYPE (HoneRequestMetrics, hone_request_metrics,
                     hone_request_metrics_copy, hone_request_metrics_free)
G_DEFINE_BOXED_TYPE (HoneEngineMetrics, hone_engine_metrics,
                     hone_engine_metrics_copy, hone_engine_metrics_free)

HoneRequestMetrics *
hone_request_metrics_copy (const HoneRequestMetrics *metrics)
{
  return g_memdup2 (metrics, sizeof *metrics);
}

void
hone_request_metrics_free (HoneRequestMetrics *metrics)
{
  g_free (metrics);
}

void
hone_request_metrics_finalize_rates (HoneRequestMetrics *m)
{
  double busy = m->prefill_ms + m->decode_ms;

  m->prefill_tps = m->prefill_ms > 0.0 ? m->prefill_tokens / (m->prefill_ms / 1000.0) : 0.0;
  m->decode_tps = m->decode_ms > 0.0 ? m->decode_tokens / (m->decode_ms / 1000.0) : 0.0;
  m->prefill_share = busy > 0.0 ? m->prefill_ms / busy : 0.0;
}

JsonNode *
hone_request_metrics_to_json (const HoneRequestMetrics *m)
{
  JsonBuilder *b = json_builder_new ();
  JsonNode *node;

#define D(name) json_builder_set_member_name (b, #name); json_builder_add_double_value (b, m->name)
#define I(name) json_builder_set_member_name (b, #name); json_builder_add_int_value (b, m->name)
  json_builder_begin_object (b);
  D (queue_ms);
  D (ttft_ms);
  I (prompt_tokens);
  I (cached_tokens);
  I (prefill_tokens);
  D (prefill_ms);
  D (prefill_tps);
  I (generated_tokens);
  I (decode_tokens);
  D (decode_ms);
  D (decode_tps);
  D (total_ms);
  D (prefill_share);
  I (memory_peak);
  I (memory_steady);
  I (device_sampled_tokens);
  I (decode_ahead_tokens);
  I (dropped_messages);
  json_builder_set_member_name (b, "stop_reason");
  json_builder_add_string_value (b, hone_stop_reason_to_string (m->stop_reason));
  json_builder_end_object (b);
#undef D
#undef I
  node = json_builder_get_root (b);
  g_object_unref (b);
  return node;
}

HoneEngineMetrics *
hone_engine_metrics_copy (const HoneEngineMetrics *metrics)
{
  return g_memdup2 (metrics, sizeof *metrics);
}

void
hone_engine_metrics_free (HoneEngineMetrics *metrics)
{
  g_free (metrics);
}

gint64
hone_metrics_process_rss (void)
{
  /* statm: size resident shared … in pages. A short read of a procfs file is
   * cheap (a few µs), fine for 4 polls a second. */
  FILE *f = fopen ("/proc/self/statm", "r");
  long long size = 0, resident = 0;
  long page = sysconf (_SC_PAGESIZE);

  if (f == NULL)
    return 0;
  if (fscanf (f, "%lld %lld", &size, &resident) != 2)
    resident = 0;
  fclose (f);
  return (gint64) resident * (page > 0 ? page : 4096);
}

gboolean
hone_metrics_reset_peak_rss (void)
{
  FILE *f = fopen ("/proc/self/clear_refs", "w");
  gboolean ok;

  if (f == NULL)
    return FALSE;
  ok = fputs ("5", f) >= 0;
  return fclose (f) == 0 && ok;
}

gint64
hone_metrics_physical_memory (void)
{
  long pages = sysconf (_SC_PHYS_PAGES);
  long page = sysconf (_SC_PAGESIZE);

  if (pages <= 0 || page <= 0)
    return 0;
  return (gint64) pages * page;
}

char *
hone_metrics_cpu_model (void)
{
  g_autofree char *info = NULL;
  char **lines;
  char *name = NULL;

  if (!g_file_get_contents ("/proc/cpuinfo", &info, NULL, NULL))
    return NULL;
  lines = g_strsplit (info, "\n", -1);
  for (int i = 0; lines[i] != NULL && name == NULL; i++)
    if (g_str_has_prefix (lines[i], "model name"))
      {
        const char *colon = strchr (lines[i], ':');
        if (colon != NULL)
          name = g_strstrip (g_strdup (colon + 1));
      }
  g_strfreev (lines);
  return name;
}
