/* hone-chart.h — a small live chart: ring-buffered series drawn with cairo.
 *
 * Used by the Performance page (memory, decode tok/s, TTFT, prefill share),
 * reusable anywhere. Series keep the last `capacity` points; the y range is
 * either fixed (hone_chart_set_range) or follows the data. A peak can be marked
 * with a dashed line. Colours follow AdwStyleManager (light, dark, high
 * contrast). While the widget is unmapped it keeps buffering but stops
 * redrawing ("paused"), so hidden pages cost nothing.
 */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

typedef enum {
  HONE_CHART_LINE,          /* one line per series over x */
  HONE_CHART_BARS,          /* one bar per point; series side by side */
  HONE_CHART_STACKED_BARS,  /* one bar per x; series stacked (shares) */
} HoneChartKind;

#define HONE_TYPE_CHART (hone_chart_get_type ())
G_DECLARE_FINAL_TYPE (HoneChart, hone_chart, HONE, CHART, GtkWidget)

GtkWidget *hone_chart_new (HoneChartKind kind);

void       hone_chart_set_kind (HoneChart *self, HoneChartKind kind);
HoneChartKind hone_chart_get_kind (HoneChart *self);

/* Adds a series that keeps its last `capacity` points; returns its index. */
guint      hone_chart_add_series (HoneChart *self, const char *name, guint capacity);
guint      hone_chart_get_n_series (HoneChart *self);
void       hone_chart_add_point (HoneChart *self, guint series, double x, double y);
void       hone_chart_clear (HoneChart *self);

/* Fixed y range; y_min >= y_max goes back to following the data. */
void       hone_chart_set_range (HoneChart *self, double y_min, double y_max);
/* Shows only x in [last_x - width, last_x]; 0 shows everything buffered. */
void       hone_chart_set_x_window (HoneChart *self, double width);
/* Unit printed after axis labels ("GiB", "tok/s", "ms", "%"). */
void       hone_chart_set_unit (HoneChart *self, const char *unit);

/* A dashed horizontal line at `value` labelled `label`; NULL label removes it. */
void       hone_chart_mark_peak (HoneChart *self, double value, const char *label);
gboolean   hone_chart_get_peak (HoneChart *self, double *value);

/* What the chart holds and shows, for tests and accessibility. */
guint      hone_chart_get_n_points (HoneChart *self, guint series);
gboolean   hone_chart_get_extrema (HoneChart *self, guint series, double *min, double *max);
gboolean   hone_chart_get_point (HoneChart *self, guint series, guint i, double *x, double *y);
/* The y range drawn (fixed or derived from the data, with headroom). */
void       hone_chart_get_visible_range (HoneChart *self, double *y_min, double *y_max);
/* Pixel row of `value` inside the plot when the widget is `height` tall. */
double     hone_chart_value_to_y (HoneChart *self, double value, int height);
/* The plot area (inside the axis labels) for a widget of this size. */
void       hone_chart_get_plot_area (HoneChart *self, int width, int height, graphene_rect_t *area);
/* Colour series `i` is drawn in with the current style. */
void       hone_chart_get_series_color (HoneChart *self, guint series, GdkRGBA *color);
gboolean   hone_chart_is_paused (HoneChart *self);

G_END_DECLS
