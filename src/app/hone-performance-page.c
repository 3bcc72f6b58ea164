/* hone-performance-page.c — see hone-performance-page.h. */
#include "hone-performance-page.h"

#include <math.h>

#include <string.h>
#include "hone-bench.h"
#include "hone-device-bandwidth.h"
#include "hone-error.h"
#include "hone-i18n.h"

#define POLL_MS 250
#define HISTORY 240           /* one minute at 4 samples a second */
#define REQUESTS 24

struct _HonePerformancePage {
  AdwBin parent_instance;

  HoneEngine *engine;
  guint poll_id;
  gint64 t0;                  /* monotonic µs of the first sample */
  gint64 last_peak;
  int n_requests;
  GCancellable *bench_cancellable;
  HoneBenchParams pending;     /* the bench to run once the bandwidth is measured */
  char *bandwidth_error;       /* why the roofline of the last bench is unknown, or NULL */
  guint pulse_id;              /* the progress bar's pulse while measuring */
  HoneBenchResult *last_bench;

  HoneChart *memory_chart;
  HoneChart *decode_chart;
  HoneChart *ttft_chart;
  HoneChart *share_chart;

  /* template */
  GtkWidget *memory_box;
  GtkWidget *decode_box;
  GtkWidget *ttft_box;
  GtkWidget *share_box;
  GtkWidget *memory_value;
  GtkWidget *decode_value;
  GtkWidget *ttft_value;
  GtkWidget *share_value;
  GtkWidget *bench_button;
  GtkWidget *bench_cancel_button;
  GtkWidget *bench_progress;
  GtkWidget *bench_grid;
  GtkWidget *bench_status;
};

G_DEFINE_FINAL_TYPE (HonePerformancePage, hone_performance_page, ADW_TYPE_BIN)

static void
toast (HonePerformancePage *self, const char *message)
{
  g_autofree char *escaped = g_markup_escape_text (message, -1);  /* toast titles are markup */
  GtkWidget *overlay = gtk_widget_get_ancestor (GTK_WIDGET (self), ADW_TYPE_TOAST_OVERLAY);
  if (overlay)
    adw_toast_overlay_add_toast (ADW_TOAST_OVERLAY (overlay), adw_toast_new (escaped));
  else
    g_debug ("%s", message);   /* the window is gone */
}

double
hone_performance_page_bandwidth_for (const char *device_name)
{
  /* The read bandwidth `hone bench` measured on this device (cached by device
   * name; the chooser's GPU names end in " (cuda:N)"), else only bandwidths we
   * measured ourselves (read-only streaming, DESIGN.md). */
  if (device_name != NULL)
    {
      const char *suffix = strstr (device_name, " (cuda:");
      g_autofree char *name = suffix ? g_strndup (device_name, suffix - device_name) : g_strdup (device_name);
      HoneDeviceBandwidth bw = { 0 };
      if (hone_device_bandwidth_lookup (name, &bw))
        {
          double gbs = bw.read_gbs;
          hone_device_bandwidth_clear (&bw);
          return gbs;
        }
    }
  if (device_name && g_strstr_len (device_name, -1, "H200"))
    return 4520.0;
  return 0;
}

static double
seconds_since_start (HonePerformancePage *self)
{
  gint64 now = g_get_monotonic_time ();
  if (self->t0 == 0)
    self->t0 = now;
  return (now - self->t0) / 1e6;
}

void
hone_performance_page_poll (HonePerformancePage *self)
{
  HoneEngineMetrics m = { 0 };
  double t, gib = 1024.0 * 1024.0 * 1024.0;
  g_autofree char *used = NULL, *total = NULL, *text = NULL;

  if (!self->engine)
    return;
  hone_engine_get_metrics_snapshot (self->engine, &m);
  t = seconds_since_start (self);

  hone_chart_add_point (self->memory_chart, 0, t, m.memory_used / gib);
  /* Scale to the total when the model fills a good part of it, else to
   * the data, so a small model is not a flat line on the floor. */
  if (m.memory_total > 0 && MAX (m.memory_peak, m.memory_used) * 3 > m.memory_total)
    hone_chart_set_range (self->memory_chart, 0, m.memory_total / gib);
  else
    hone_chart_set_range (self->memory_chart, 0, 0);
  if (m.memory_peak > 0 && m.memory_peak != self->last_peak)
    {
      g_autofree char *peak = g_format_size (m.memory_peak);
      g_autofree char *label = g_strdup_printf (_("peak %s"), peak);
      hone_chart_mark_peak (self->memory_chart, m.memory_peak / gib, label);
      self->last_peak = m.memory_peak;
    }
  used = g_format_size (m.memory_used);
  total = g_format_size (m.memory_total);
  text = m.memory_total > 0 ? g_strdup_printf (_("%s of %s"), used, total) : g_strdup (used);
  gtk_label_set_text (GTK_LABEL (self->memory_value), text);

  {
    /* Decode speed: the running rate while decoding, 0 when idle, so the
     * line shows the bursts of each answer. */
    double tps = m.state == HONE_ENGINE_STATE_BUSY ? m.inflight_decode_tps : 0;
    g_autofree char *s = NULL;
    hone_chart_add_point (self->decode_chart, 0, t, tps);
    s = g_strdup_printf (_("%.1f tokens/s"), m.state == HONE_ENGINE_STATE_BUSY ? tps : m.last_decode_tps);
    gtk_label_set_text (GTK_LABEL (self->decode_value), s);
  }
}

void
hone_performance_page_add_request (HonePerformancePage *self, const HoneRequestMetrics *metrics)
{
  double x = ++self->n_requests;
  g_autofree char *ttft = g_strdup_printf (_("%.0f ms"), metrics->ttft_ms);
  g_autofree char *share = g_strdup_printf (_("%.0f %% prefill"), 100.0 * metrics->prefill_share);

  hone_chart_add_point (self->ttft_chart, 0, x, metrics->ttft_ms);
  hone_chart_add_point (self->share_chart, 0, x, 100.0 * metrics->prefill_share);
  hone_chart_add_point (self->share_chart, 1, x, 100.0 * (1.0 - metrics->prefill_share));
  gtk_label_set_text (GTK_LABEL (self->ttft_value), ttft);
  gtk_label_set_text (GTK_LABEL (self->share_value), share);
}

static gboolean
poll_cb (gpointer data)
{
  hone_performance_page_poll (data);
  return G_SOURCE_CONTINUE;
}

/* Poll while the page is visible or the engine is working (so the history
 * has the interesting parts), and not at all when idle and hidden. */
static void
update_polling (HonePerformancePage *self)
{
  HoneEngineState state = self->engine ? hone_engine_get_state (self->engine) : HONE_ENGINE_STATE_EMPTY;
  gboolean want = self->engine &&
                  (gtk_widget_get_mapped (GTK_WIDGET (self)) ||
                   state == HONE_ENGINE_STATE_BUSY || state == HONE_ENGINE_STATE_LOADING);

  if (want && !self->poll_id)
    {
      self->poll_id = g_timeout_add (POLL_MS, poll_cb, self);
      hone_performance_page_poll (self);
    }
  else if (!want && self->poll_id)
    g_clear_handle_id (&self->poll_id, g_source_remove);
}

/* ---- bench ---------------------------------------------------------------- */

static void
grid_add (GtkGrid *grid, int col, int row, const char *text, gboolean header)
{
  GtkWidget *label = gtk_label_new (text);

  gtk_label_set_xalign (GTK_LABEL (label), col == 0 ? 0 : 1);
  gtk_label_set_selectable (GTK_LABEL (label), !header);
  if (header)
    gtk_widget_add_css_class (label, "heading");
  else
    gtk_widget_add_css_class (label, "numeric");
  gtk_grid_attach (grid, label, col, row, 1, 1);
}

static void
show_bench (HonePerformancePage *self, const HoneBenchResult *r)
{
  GtkGrid *grid = GTK_GRID (self->bench_grid);
  GtkWidget *child;
  char buf[3][64];
  g_autofree char *mem_peak = g_format_size ((guint64) r->memory_peak.median);
  g_autofree char *mem_steady = g_format_size ((guint64) r->memory_steady.median);
  g_autofree char *status = NULL;
  int row = 1;

  while ((child = gtk_widget_get_first_child (self->bench_grid)))
    gtk_grid_remove (grid, child);
  grid_add (grid, 0, 0, _("Measure"), TRUE);
  grid_add (grid, 1, 0, _("Median"), TRUE);
  grid_add (grid, 2, 0, _("10th percentile"), TRUE);
  grid_add (grid, 3, 0, _("90th percentile"), TRUE);

#define STAT_ROW(title, stat, fmt, scale) \
  g_snprintf (buf[0], 64, fmt, (stat).median * (scale)); \
  g_snprintf (buf[1], 64, fmt, (stat).p10 * (scale)); \
  g_snprintf (buf[2], 64, fmt, (stat).p90 * (scale)); \
  grid_add (grid, 0, row, title, FALSE); \
  grid_add (grid, 1, row, buf[0], FALSE); \
  grid_add (grid, 2, row, buf[1], FALSE); \
  grid_add (grid, 3, row, buf[2], FALSE); \
  row++;

  STAT_ROW (_("Time to first token (ms)"), r->ttft_ms, "%.1f", 1.0);
  STAT_ROW (_("Prefill (tokens/s)"), r->prefill_tps, "%.1f", 1.0);
  STAT_ROW (_("Decode (tokens/s)"), r->decode_tps, "%.1f", 1.0);
  STAT_ROW (_("Prefill share (%)"), r->prefill_share, "%.1f", 100.0);
#undef STAT_ROW
  grid_add (grid, 0, row, _("Memory peak / steady"), FALSE);
  {
    g_autofree char *s = g_strdup_printf ("%s / %s", mem_peak, mem_steady);
    GtkWidget *l = gtk_label_new (s);
    gtk_label_set_xalign (GTK_LABEL (l), 1);
    gtk_widget_add_css_class (l, "numeric");
    gtk_grid_attach (grid, l, 1, row, 3, 1);
  }
  row++;
  grid_add (grid, 0, row, _("Memory traffic per token"), FALSE);
  {
    g_autofree char *bytes = g_format_size (r->bytes_per_token);
    g_autofree char *s = g_strdup_printf (_("%s → %.1f GB/s"), bytes, r->achieved_gbs);
    GtkWidget *l = gtk_label_new (s);
    gtk_label_set_xalign (GTK_LABEL (l), 1);
    gtk_widget_add_css_class (l, "numeric");
    gtk_grid_attach (grid, l, 1, row, 3, 1);
  }
  row++;
  grid_add (grid, 0, row, _("Roofline"), FALSE);
  {
    g_autofree char *s = r->params.bandwidth_gbs > 0
      ? g_strdup_printf (_("%.1f %% of %.0f GB/s"), 100.0 * r->roofline_fraction, r->params.bandwidth_gbs)
      : g_strdup (_("Unknown bandwidth for this device"));
    GtkWidget *l = gtk_label_new (s);
    if (r->params.bandwidth_gbs <= 0 && self->bandwidth_error != NULL)
      gtk_widget_set_tooltip_text (l, self->bandwidth_error);
    gtk_label_set_xalign (GTK_LABEL (l), 1);
    gtk_widget_add_css_class (l, "numeric");
    gtk_grid_attach (grid, l, 1, row, 3, 1);
  }
  status = g_strdup_printf (g_dngettext (GETTEXT_PACKAGE,
                                         "%s on %s: %d prompt tokens, %d generated, %d run",
                                         "%s on %s: %d prompt tokens, %d generated, %d runs", r->params.runs),
                            r->model_name ? r->model_name : "", r->device ? r->device : "",
                            r->params.prompt_tokens, r->params.gen_tokens, r->params.runs);
  gtk_label_set_text (GTK_LABEL (self->bench_status), status);
  gtk_widget_set_visible (self->bench_grid, TRUE);
}

static void
set_benching (HonePerformancePage *self, gboolean running)
{
  gtk_widget_set_visible (self->bench_button, !running);
  gtk_widget_set_visible (self->bench_cancel_button, running);
  gtk_widget_set_visible (self->bench_progress, running);
}

static void
on_bench_progress (double fraction, gpointer data)
{
  HonePerformancePage *self = data;
  gtk_progress_bar_set_fraction (GTK_PROGRESS_BAR (self->bench_progress), CLAMP (fraction, 0, 1));
}

static void
on_bench_done (GObject *source, GAsyncResult *result, gpointer data)
{
  HonePerformancePage *self = data;
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneBenchResult) r = hone_engine_bench_finish (HONE_ENGINE (source), result, &error);

  g_clear_object (&self->bench_cancellable);
  set_benching (self, FALSE);
  if (r)
    {
      show_bench (self, r);
      g_clear_pointer (&self->last_bench, hone_bench_result_free);
      self->last_bench = g_steal_pointer (&r);
    }
  else if (!g_error_matches (error, HONE_ERROR, HONE_ERROR_CANCELLED))
    toast (self, error->message);
  g_object_unref (self);
}

static void
start_bench (HonePerformancePage *self)
{
  gtk_label_set_text (GTK_LABEL (self->bench_status), "");
  gtk_progress_bar_set_fraction (GTK_PROGRESS_BAR (self->bench_progress), 0);
  hone_engine_bench_async (self->engine, &self->pending, on_bench_progress, g_object_ref (self), g_object_unref,
                           self->bench_cancellable, on_bench_done, g_object_ref (self));
}

/* A worker thread: the read bandwidth of the device (task data), measured and
 * cached as `hone bench` does. */
static void
measure_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  HoneDeviceBandwidth bw = { 0 };
  GError *error = NULL;

  if (hone_device_read_bandwidth (data, &bw, &error))
    {
      double *gbs = g_new (double, 1);
      *gbs = bw.read_gbs;
      g_task_return_pointer (task, gbs, g_free);
    }
  else
    g_task_return_error (task, error);
  hone_device_bandwidth_clear (&bw);
}

static gboolean
pulse (gpointer data)
{
  HonePerformancePage *self = data;
  gtk_progress_bar_pulse (GTK_PROGRESS_BAR (self->bench_progress));
  return G_SOURCE_CONTINUE;
}

static void
on_measured (GObject *source, GAsyncResult *result, gpointer data)
{
  HonePerformancePage *self = HONE_PERFORMANCE_PAGE (source);
  g_autoptr(GError) error = NULL;
  g_autofree double *gbs = g_task_propagate_pointer (G_TASK (result), &error);

  g_clear_handle_id (&self->pulse_id, g_source_remove);
  if (self->engine == NULL)
    return;   /* the page went away meanwhile */
  if (self->bench_cancellable == NULL || g_cancellable_is_cancelled (self->bench_cancellable))
    {
      g_clear_object (&self->bench_cancellable);
      gtk_label_set_text (GTK_LABEL (self->bench_status), "");
      set_benching (self, FALSE);
      return;
    }
  if (gbs != NULL)
    self->pending.bandwidth_gbs = *gbs;
  else
    self->bandwidth_error = g_strdup (error->message);   /* shown with the result */
  start_bench (self);
}

void
hone_performance_page_run_bench (HonePerformancePage *self)
{
  HoneBenchParams params;
  g_autoptr(GPtrArray) devices = hone_engine_list_devices ();
  g_autofree char *device = NULL;
  int ctx = hone_engine_get_active_context_length (self->engine);

  if (self->bench_cancellable)
    return;
  if (hone_engine_get_state (self->engine) != HONE_ENGINE_STATE_READY)
    {
      toast (self, hone_engine_get_state (self->engine) == HONE_ENGINE_STATE_BUSY
                     ? _("The engine is busy; try again when the answer is done")
                     : _("Load a model first"));
      return;
    }
  g_object_get (self->engine, "active-device", &device, NULL);
  hone_bench_params_init (&params);
  /* Keep the run inside the loaded context. */
  if (ctx > 0 && params.prompt_tokens + params.gen_tokens > ctx)
    {
      params.gen_tokens = MIN (params.gen_tokens, ctx / 4);
      params.prompt_tokens = ctx - params.gen_tokens;
    }
  for (guint i = 0; i < devices->len; i++)
    {
      HoneDevice *d = g_ptr_array_index (devices, i);
      if (g_strcmp0 (d->id, device) == 0)
        {
          /* the CPU's entry is under its untranslated key */
          g_autofree char *cpu = d->kind == HONE_DEVICE_CPU ? hone_device_bandwidth_cpu_name () : NULL;
          params.bandwidth_gbs = hone_performance_page_bandwidth_for (cpu != NULL ? cpu : d->name);
        }
    }
  self->bench_cancellable = g_cancellable_new ();
  self->pending = params;
  g_clear_pointer (&self->bandwidth_error, g_free);
  set_benching (self, TRUE);
  if (params.bandwidth_gbs <= 0 && (g_str_has_prefix (device, "cuda:") || g_str_equal (device, "cpu")))
    {
      /* Not measured on this device yet: measure it first (a second or two;
       * cached for later benches and for `hone bench`), so that the result
       * says how near the roofline it is. */
      g_autoptr(GTask) task = g_task_new (self, NULL, on_measured, NULL);
      /* TRANSLATORS: %s is a device id, "cpu" or "cuda:0" */
      g_autofree char *status = g_strdup_printf (_("Measuring the memory bandwidth of %s…"), device);

      gtk_label_set_text (GTK_LABEL (self->bench_status), status);
      self->pulse_id = g_timeout_add (100, pulse, self);
      g_task_set_task_data (task, g_strdup (device), g_free);
      g_task_run_in_thread (task, measure_thread);
      return;
    }
  start_bench (self);
}

gboolean
hone_performance_page_get_bench_running (HonePerformancePage *self)
{
  return self->bench_cancellable != NULL;
}

const HoneBenchResult *
hone_performance_page_get_last_bench (HonePerformancePage *self)
{
  return self->last_bench;
}

static void
bench_action (GtkWidget *widget, const char *name, GVariant *param)
{
  hone_performance_page_run_bench (HONE_PERFORMANCE_PAGE (widget));
}

static void
bench_cancel_action (GtkWidget *widget, const char *name, GVariant *param)
{
  HonePerformancePage *self = HONE_PERFORMANCE_PAGE (widget);
  if (self->bench_cancellable)
    g_cancellable_cancel (self->bench_cancellable);
}

/* ---- plumbing ------------------------------------------------------------- */

HoneChart *
hone_performance_page_get_chart (HonePerformancePage *self, const char *name)
{
  if (g_strcmp0 (name, "memory") == 0) return self->memory_chart;
  if (g_strcmp0 (name, "decode") == 0) return self->decode_chart;
  if (g_strcmp0 (name, "ttft") == 0) return self->ttft_chart;
  if (g_strcmp0 (name, "share") == 0) return self->share_chart;
  return NULL;
}

static HoneChart *
add_chart (GtkWidget *box, HoneChartKind kind, const char *accessible_name)
{
  GtkWidget *chart = hone_chart_new (kind);

  gtk_widget_set_vexpand (chart, TRUE);
  gtk_widget_set_size_request (chart, -1, 140);
  gtk_accessible_update_property (GTK_ACCESSIBLE (chart), GTK_ACCESSIBLE_PROPERTY_LABEL, accessible_name, -1);
  gtk_box_append (GTK_BOX (box), chart);
  return HONE_CHART (chart);
}

static void
hone_performance_page_map (GtkWidget *widget)
{
  GTK_WIDGET_CLASS (hone_performance_page_parent_class)->map (widget);
  update_polling (HONE_PERFORMANCE_PAGE (widget));
}

static void
hone_performance_page_unmap (GtkWidget *widget)
{
  GTK_WIDGET_CLASS (hone_performance_page_parent_class)->unmap (widget);
  update_polling (HONE_PERFORMANCE_PAGE (widget));
}

static void
hone_performance_page_dispose (GObject *object)
{
  HonePerformancePage *self = HONE_PERFORMANCE_PAGE (object);

  g_clear_handle_id (&self->poll_id, g_source_remove);
  g_clear_handle_id (&self->pulse_id, g_source_remove);
  g_clear_pointer (&self->bandwidth_error, g_free);
  if (self->bench_cancellable)
    g_cancellable_cancel (self->bench_cancellable);
  g_clear_object (&self->bench_cancellable);
  g_clear_pointer (&self->last_bench, hone_bench_result_free);
  if (self->engine)
    g_signal_handlers_disconnect_by_data (self->engine, self);
  g_clear_object (&self->engine);
  G_OBJECT_CLASS (hone_performance_page_parent_class)->dispose (object);
}

static void
hone_performance_page_class_init (HonePerformancePageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = hone_performance_page_dispose;
  widget_class->map = hone_performance_page_map;
  widget_class->unmap = hone_performance_page_unmap;

  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hone/Hone/hone-performance-page.ui");
#define CHILD(name) gtk_widget_class_bind_template_child (widget_class, HonePerformancePage, name)
  CHILD (memory_box);
  CHILD (decode_box);
  CHILD (ttft_box);
  CHILD (share_box);
  CHILD (memory_value);
  CHILD (decode_value);
  CHILD (ttft_value);
  CHILD (share_value);
  CHILD (bench_button);
  CHILD (bench_cancel_button);
  CHILD (bench_progress);
  CHILD (bench_grid);
  CHILD (bench_status);
#undef CHILD
  gtk_widget_class_install_action (widget_class, "perf.bench", NULL, bench_action);
  gtk_widget_class_install_action (widget_class, "perf.bench-cancel", NULL, bench_cancel_action);
}

static void
hone_performance_page_init (HonePerformancePage *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));

  self->memory_chart = add_chart (self->memory_box, HONE_CHART_LINE, _("Memory used over time"));
  hone_chart_add_series (self->memory_chart, _("Used"), HISTORY);
  hone_chart_set_unit (self->memory_chart, _("GiB"));
  hone_chart_set_x_window (self->memory_chart, HISTORY * POLL_MS / 1000.0);

  self->decode_chart = add_chart (self->decode_box, HONE_CHART_LINE, _("Decode speed over time"));
  hone_chart_add_series (self->decode_chart, _("Decode"), HISTORY);
  hone_chart_set_unit (self->decode_chart, _("tok/s"));
  hone_chart_set_x_window (self->decode_chart, HISTORY * POLL_MS / 1000.0);

  self->ttft_chart = add_chart (self->ttft_box, HONE_CHART_BARS, _("Time to first token per request"));
  hone_chart_add_series (self->ttft_chart, _("Time to first token"), REQUESTS);
  hone_chart_set_unit (self->ttft_chart, _("ms"));

  self->share_chart = add_chart (self->share_box, HONE_CHART_STACKED_BARS, _("Prefill and decode share per request"));
  hone_chart_add_series (self->share_chart, _("Prefill"), REQUESTS);
  hone_chart_add_series (self->share_chart, _("Decode"), REQUESTS);
  hone_chart_set_unit (self->share_chart, "%");
  hone_chart_set_range (self->share_chart, 0, 100);
  set_benching (self, FALSE);
}

GtkWidget *
hone_performance_page_new (void)
{
  return g_object_new (HONE_TYPE_PERFORMANCE_PAGE, NULL);
}

void
hone_performance_page_set_engine (HonePerformancePage *self, HoneEngine *engine)
{
  if (self->engine)
    g_signal_handlers_disconnect_by_data (self->engine, self);
  g_set_object (&self->engine, engine);
  if (engine)
    g_signal_connect_swapped (engine, "notify::state", G_CALLBACK (update_polling), self);
  update_polling (self);
}
