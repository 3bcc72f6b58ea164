/* hone-performance-page.h — the Performance page: live charts from engine
 * snapshots (~4×/s): memory used vs total with the peak marked, decode tok/s
 * over time, TTFT per request, prefill vs decode share per request; and a
 * Bench button that runs the engine's benchmark protocol and shows its table
 * with the % of the memory-bandwidth roofline where the bandwidth is known. */
#pragma once

#include <adwaita.h>

#include "hone-bench.h"
#include "hone-chart.h"
#include "hone-engine.h"

G_BEGIN_DECLS

#define HONE_TYPE_PERFORMANCE_PAGE (hone_performance_page_get_type ())
G_DECLARE_FINAL_TYPE (HonePerformancePage, hone_performance_page, HONE, PERFORMANCE_PAGE, AdwBin)

GtkWidget *hone_performance_page_new (void);
void       hone_performance_page_set_engine (HonePerformancePage *self, HoneEngine *engine);
/* A request finished (from the Chat page): adds its TTFT and prefill share. */
void       hone_performance_page_add_request (HonePerformancePage *self, const HoneRequestMetrics *metrics);
/* Takes one snapshot now (the timer calls this ~4×/s while it matters). */
void       hone_performance_page_poll (HonePerformancePage *self);
void       hone_performance_page_run_bench (HonePerformancePage *self);
gboolean   hone_performance_page_get_bench_running (HonePerformancePage *self);
/* The last benchmark shown in the table, or NULL. */
const HoneBenchResult *hone_performance_page_get_last_bench (HonePerformancePage *self);
/* The four charts, for tests: "memory", "decode", "ttft", "share". */
HoneChart *hone_performance_page_get_chart (HonePerformancePage *self, const char *name);
/* Memory bandwidth in GB/s of a device by name, 0 when unknown. */
double     hone_performance_page_bandwidth_for (const char *device_name);

G_END_DECLS
