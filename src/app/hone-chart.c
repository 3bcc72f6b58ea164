/* hone-chart.c — see hone-chart.h. */
#include "hone-chart.h"

#include <adwaita.h>
#include <math.h>

#define MARGIN_RIGHT  12.0
#define MARGIN_TOP    10.0
#define MARGIN_BOTTOM 10.0

typedef struct {
  char   *name;
  guint   capacity;
  guint   start;        /* index of the oldest point in the ring */
  guint   len;
  double *xs;
  double *ys;
} Series;

struct _HoneChart {
  GtkWidget      parent_instance;
  HoneChartKind  kind;
  GPtrArray     *series;       /* Series* */
  gboolean       fixed_range;
  double         y_min, y_max;
  double         x_window;
  char          *unit;
  gboolean       has_peak;
  double         peak;
  char          *peak_label;
  gboolean       paused;
  double         margin_left;  /* fits the widest axis label, measured when drawn */
  AdwStyleManager *style_manager;
};

G_DEFINE_FINAL_TYPE (HoneChart, hone_chart, GTK_TYPE_WIDGET)

static void
series_free (gpointer data)
{
  Series *s = data;
  g_free (s->name);
  g_free (s->xs);
  g_free (s->ys);
  g_free (s);
}

static Series *
get_series (HoneChart *self, guint i)
{
  return i < self->series->len ? g_ptr_array_index (self->series, i) : NULL;
}

static inline guint
ring_index (const Series *s, guint i)
{
  return (s->start + i) % s->capacity;
}

/* Index of the first point that falls inside the x window. */
static guint
first_visible (HoneChart *self, const Series *s)
{
  double last_x;
  guint i;

  if (s->len == 0 || self->x_window <= 0 || self->kind != HONE_CHART_LINE)
    return 0;
  last_x = s->xs[ring_index (s, s->len - 1)];
  for (i = 0; i < s->len; i++)
    if (s->xs[ring_index (s, i)] >= last_x - self->x_window)
      return i > 0 ? i - 1 : 0;   /* keep one point before so the line enters from the edge */
  return 0;
}

static void
data_range (HoneChart *self, double *lo, double *hi)
{
  double mn = 0, mx = 0;
  guint si, i;

  if (self->kind == HONE_CHART_STACKED_BARS)
    {
      guint n = 0;
      for (si = 0; si < self->series->len; si++)
        n = MAX (n, get_series (self, si)->len);
      for (i = 0; i < n; i++)
        {
          double sum = 0;
          for (si = 0; si < self->series->len; si++)
            {
              Series *s = get_series (self, si);
              if (i < s->len)
                sum += MAX (0, s->ys[ring_index (s, s->len - 1 - i)]);
            }
          mx = MAX (mx, sum);
        }
    }
  else
    {
      for (si = 0; si < self->series->len; si++)
        {
          Series *s = get_series (self, si);
          for (i = first_visible (self, s); i < s->len; i++)
            {
              double y = s->ys[ring_index (s, i)];
              mn = MIN (mn, y);
              mx = MAX (mx, y);
            }
        }
    }
  if (self->has_peak)
    mx = MAX (mx, self->peak);
  *lo = mn;
  *hi = mx;
}

/* A "nice" upper bound (1, 2, 2.5, 5 × 10^k) above v, for readable axis labels. */
static double
nice_ceiling (double v)
{
  static const double steps[] = { 1, 2, 2.5, 5, 10 };
  double p, m;
  guint i;

  if (v <= 0)
    return 1;
  p = pow (10, floor (log10 (v)));
  m = v / p;
  for (i = 0; i < G_N_ELEMENTS (steps); i++)
    if (m <= steps[i] + 1e-9)
      return steps[i] * p;
  return 10 * p;
}

void
hone_chart_get_visible_range (HoneChart *self, double *y_min, double *y_max)
{
  double lo, hi;

  g_return_if_fail (HONE_IS_CHART (self));
  if (self->fixed_range)
    {
      lo = self->y_min;
      hi = self->y_max;
    }
  else
    {
      data_range (self, &lo, &hi);
      hi = nice_ceiling (hi * 1.05);
      if (lo < 0)
        lo = -nice_ceiling (-lo * 1.05);
      if (hi <= lo)
        hi = lo + 1;
    }
  if (y_min)
    *y_min = lo;
  if (y_max)
    *y_max = hi;
}

void
hone_chart_get_plot_area (HoneChart *self, int width, int height, graphene_rect_t *area)
{
  graphene_rect_init (area, self->margin_left, MARGIN_TOP,
                      MAX (1.0, width - self->margin_left - MARGIN_RIGHT),
                      MAX (1.0, height - MARGIN_TOP - MARGIN_BOTTOM));
}

double
hone_chart_value_to_y (HoneChart *self, double value, int height)
{
  double lo, hi, plot_h;

  hone_chart_get_visible_range (self, &lo, &hi);
  plot_h = MAX (1.0, height - MARGIN_TOP - MARGIN_BOTTOM);
  value = CLAMP (value, lo, hi);
  return MARGIN_TOP + plot_h * (1.0 - (value - lo) / (hi - lo));
}

void
hone_chart_get_series_color (HoneChart *self, guint series, GdkRGBA *color)
{
  /* GNOME palette: blue, green, orange, purple; lighter tints on dark, the
   * darkest shades in high contrast so lines stand out against the view. */
  static const char *light[] = { "#1c71d8", "#26a269", "#e66100", "#813d9c" };
  static const char *dark[]  = { "#78aeed", "#8ff0a4", "#ffa348", "#dc8add" };
  static const char *hc_light[] = { "#0b3c7a", "#0f5a2c", "#8a3400", "#4a1f5c" };
  static const char *hc_dark[]  = { "#a8cbf5", "#b6f5c5", "#ffc98f", "#efc1ed" };
  gboolean is_dark = adw_style_manager_get_dark (self->style_manager);
  gboolean hc = adw_style_manager_get_high_contrast (self->style_manager);
  const char **palette = hc ? (is_dark ? hc_dark : hc_light) : (is_dark ? dark : light);

  gdk_rgba_parse (color, palette[series % 4]);
}

static void
format_value (HoneChart *self, double v, char *buf, gsize size)
{
  const char *unit = self->unit ? self->unit : "";
  double a = fabs (v);

  if (a >= 100 || a == 0 || fabs (v - round (v)) < 1e-9)
    g_snprintf (buf, size, "%.0f %s", v, unit);
  else if (a >= 10)
    g_snprintf (buf, size, "%.1f %s", v, unit);
  else
    g_snprintf (buf, size, "%.2f %s", v, unit);
  g_strchomp (buf);
}

static PangoLayout *
small_layout (HoneChart *self, const char *text)
{
  PangoLayout *layout = gtk_widget_create_pango_layout (GTK_WIDGET (self), text);
  PangoFontDescription *desc = pango_font_description_copy (
      pango_context_get_font_description (pango_layout_get_context (layout)));

  pango_font_description_set_size (desc, pango_font_description_get_size (desc) * 0.8);
  pango_layout_set_font_description (layout, desc);
  pango_font_description_free (desc);
  return layout;
}

static void
draw_text (HoneChart *self, cairo_t *cr, const char *text, double x, double y, gboolean right_align)
{
  PangoLayout *layout = small_layout (self, text);
  int w, h;

  pango_layout_get_pixel_size (layout, &w, &h);
  cairo_move_to (cr, right_align ? x - w : x, y - h / 2.0);
  pango_cairo_show_layout (cr, layout);
  g_object_unref (layout);
}

static void
hone_chart_snapshot (GtkWidget *widget, GtkSnapshot *snapshot)
{
  HoneChart *self = HONE_CHART (widget);
  int width = gtk_widget_get_width (widget);
  int height = gtk_widget_get_height (widget);
  gboolean hc = adw_style_manager_get_high_contrast (self->style_manager);
  graphene_rect_t area;
  GdkRGBA fg;
  double lo, hi;
  cairo_t *cr;
  char label[64];
  guint si, i, t;

  if (width <= 0 || height <= 0)
    return;

  G_GNUC_BEGIN_IGNORE_DEPRECATIONS
  gtk_style_context_get_color (gtk_widget_get_style_context (widget), &fg);
  G_GNUC_END_IGNORE_DEPRECATIONS

  hone_chart_get_visible_range (self, &lo, &hi);
  /* Room on the left for the widest axis label. */
  {
    double widest = 0;
    for (t = 0; t <= 4; t++)
      {
        PangoLayout *layout;
        int w, h;
        format_value (self, lo + (hi - lo) * t / 4.0, label, sizeof label);
        layout = small_layout (self, label);
        pango_layout_get_pixel_size (layout, &w, &h);
        widest = MAX (widest, w);
        g_object_unref (layout);
      }
    self->margin_left = MAX (32.0, ceil (widest) + 10.0);
  }
  hone_chart_get_plot_area (self, width, height, &area);
  cr = gtk_snapshot_append_cairo (snapshot, &GRAPHENE_RECT_INIT (0, 0, width, height));

  /* Grid: four bands with labels on the left. */
  cairo_set_line_width (cr, 1.0);
  for (t = 0; t <= 4; t++)
    {
      double v = lo + (hi - lo) * t / 4.0;
      double y = round (hone_chart_value_to_y (self, v, height)) + 0.5;

      cairo_set_source_rgba (cr, fg.red, fg.green, fg.blue, hc ? 0.45 : 0.12);
      cairo_move_to (cr, area.origin.x, y);
      cairo_line_to (cr, area.origin.x + area.size.width, y);
      cairo_stroke (cr);
      format_value (self, v, label, sizeof label);
      cairo_set_source_rgba (cr, fg.red, fg.green, fg.blue, hc ? 1.0 : 0.7);
      draw_text (self, cr, label, area.origin.x - 6, y, TRUE);
    }

  if (self->kind == HONE_CHART_LINE)
    {
      cairo_save (cr);
      cairo_rectangle (cr, area.origin.x, area.origin.y, area.size.width, area.size.height);
      cairo_clip (cr);
      cairo_set_line_width (cr, hc ? 2.5 : 1.75);
      cairo_set_line_join (cr, CAIRO_LINE_JOIN_ROUND);
      for (si = 0; si < self->series->len; si++)
        {
          Series *s = get_series (self, si);
          double x0, x1;
          GdkRGBA c;

          if (s->len == 0)
            continue;
          x1 = s->xs[ring_index (s, s->len - 1)];
          x0 = self->x_window > 0 ? x1 - self->x_window : s->xs[ring_index (s, 0)];
          if (x1 <= x0)
            x0 = x1 - 1;
          hone_chart_get_series_color (self, si, &c);
          gdk_cairo_set_source_rgba (cr, &c);
          for (i = first_visible (self, s); i < s->len; i++)
            {
              guint k = ring_index (s, i);
              double px = area.origin.x + area.size.width * (s->xs[k] - x0) / (x1 - x0);
              double py = hone_chart_value_to_y (self, s->ys[k], height);
              if (i == first_visible (self, s))
                cairo_move_to (cr, px, py);
              else
                cairo_line_to (cr, px, py);
            }
          if (s->len == 1)
            {
              double py = hone_chart_value_to_y (self, s->ys[ring_index (s, 0)], height);
              cairo_move_to (cr, area.origin.x + area.size.width - 3, py);
              cairo_line_to (cr, area.origin.x + area.size.width, py);
            }
          cairo_stroke (cr);
        }
      cairo_restore (cr);
    }
  else
    {
      /* Bars: one slot per point, newest on the right, as many slots as the
       * longest series' capacity so bars keep their width as data arrives. */
      guint slots = 1, n_series = MAX (1u, self->series->len);
      double slot_w, bar_w;

      for (si = 0; si < self->series->len; si++)
        slots = MAX (slots, MIN (get_series (self, si)->capacity, 32u));
      slot_w = area.size.width / slots;
      bar_w = self->kind == HONE_CHART_BARS ? slot_w * 0.7 / n_series : slot_w * 0.7;
      for (i = 0; i < slots; i++)
        {
          double base = lo > 0 ? lo : 0;
          double sx = area.origin.x + area.size.width - (i + 1) * slot_w + slot_w * 0.15;

          for (si = 0; si < self->series->len; si++)
            {
              Series *s = get_series (self, si);
              double v, y_top, y_bot, bx;
              GdkRGBA c;

              if (i >= s->len)
                continue;
              v = s->ys[ring_index (s, s->len - 1 - i)];
              if (self->kind == HONE_CHART_STACKED_BARS)
                {
                  y_bot = hone_chart_value_to_y (self, base, height);
                  base += MAX (0, v);
                  y_top = hone_chart_value_to_y (self, base, height);
                  bx = sx;
                }
              else
                {
                  y_bot = hone_chart_value_to_y (self, base, height);
                  y_top = hone_chart_value_to_y (self, v, height);
                  bx = sx + si * bar_w;
                }
              hone_chart_get_series_color (self, si, &c);
              gdk_cairo_set_source_rgba (cr, &c);
              cairo_rectangle (cr, bx, MIN (y_top, y_bot), bar_w, fabs (y_bot - y_top));
              cairo_fill (cr);
            }
        }
    }

  if (self->has_peak)
    {
      double y = round (hone_chart_value_to_y (self, self->peak, height)) + 0.5;
      double dash[] = { 4.0, 3.0 };

      cairo_set_source_rgba (cr, fg.red, fg.green, fg.blue, hc ? 1.0 : 0.6);
      cairo_set_dash (cr, dash, 2, 0);
      cairo_set_line_width (cr, 1.0);
      cairo_move_to (cr, area.origin.x, y);
      cairo_line_to (cr, area.origin.x + area.size.width, y);
      cairo_stroke (cr);
      cairo_set_dash (cr, NULL, 0, 0);
      if (self->peak_label)
        draw_text (self, cr, self->peak_label, area.origin.x + area.size.width - 4,
                   MAX (y - 9, area.origin.y + 6), TRUE);
    }

  cairo_destroy (cr);
}

static void
hone_chart_measure (GtkWidget *widget, GtkOrientation orientation, int for_size,
                    int *minimum, int *natural, int *minimum_baseline, int *natural_baseline)
{
  if (orientation == GTK_ORIENTATION_HORIZONTAL)
    {
      *minimum = 160;
      *natural = 420;
    }
  else
    {
      *minimum = 96;
      *natural = 160;
    }
}

static void
update_accessible (HoneChart *self)
{
  GString *desc = g_string_new (NULL);
  guint si;

  for (si = 0; si < self->series->len; si++)
    {
      Series *s = get_series (self, si);
      char v[64];
      if (s->len == 0)
        continue;
      format_value (self, s->ys[ring_index (s, s->len - 1)], v, sizeof v);
      if (desc->len)
        g_string_append (desc, ", ");
      g_string_append_printf (desc, "%s: %s", s->name, v);
    }
  if (self->has_peak)
    {
      char v[64];
      format_value (self, self->peak, v, sizeof v);
      g_string_append_printf (desc, "; %s %s", self->peak_label ? self->peak_label : "", v);
    }
  gtk_accessible_update_property (GTK_ACCESSIBLE (self),
                                  GTK_ACCESSIBLE_PROPERTY_DESCRIPTION, desc->str, -1);
  g_string_free (desc, TRUE);
}

static void
changed (HoneChart *self)
{
  if (self->paused)
    return;
  update_accessible (self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

static void
hone_chart_map (GtkWidget *widget)
{
  HoneChart *self = HONE_CHART (widget);

  GTK_WIDGET_CLASS (hone_chart_parent_class)->map (widget);
  self->paused = FALSE;
  changed (self);
}

static void
hone_chart_unmap (GtkWidget *widget)
{
  HoneChart *self = HONE_CHART (widget);

  self->paused = TRUE;
  GTK_WIDGET_CLASS (hone_chart_parent_class)->unmap (widget);
}

static void
on_style_changed (HoneChart *self)
{
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

static void
hone_chart_dispose (GObject *object)
{
  HoneChart *self = HONE_CHART (object);

  if (self->style_manager)
    g_signal_handlers_disconnect_by_data (self->style_manager, self);
  self->style_manager = NULL;
  G_OBJECT_CLASS (hone_chart_parent_class)->dispose (object);
}

static void
hone_chart_finalize (GObject *object)
{
  HoneChart *self = HONE_CHART (object);

  g_ptr_array_unref (self->series);
  g_free (self->unit);
  g_free (self->peak_label);
  G_OBJECT_CLASS (hone_chart_parent_class)->finalize (object);
}

static void
hone_chart_class_init (HoneChartClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = hone_chart_dispose;
  object_class->finalize = hone_chart_finalize;
  widget_class->snapshot = hone_chart_snapshot;
  widget_class->measure = hone_chart_measure;
  widget_class->map = hone_chart_map;
  widget_class->unmap = hone_chart_unmap;
  gtk_widget_class_set_css_name (widget_class, "chart");
  gtk_widget_class_set_accessible_role (widget_class, GTK_ACCESSIBLE_ROLE_IMG);
}

static void
hone_chart_init (HoneChart *self)
{
  self->series = g_ptr_array_new_with_free_func (series_free);
  self->paused = TRUE;
  self->margin_left = 56.0;
  self->style_manager = adw_style_manager_get_default ();
  g_signal_connect_swapped (self->style_manager, "notify::dark", G_CALLBACK (on_style_changed), self);
  g_signal_connect_swapped (self->style_manager, "notify::high-contrast", G_CALLBACK (on_style_changed), self);
}

GtkWidget *
hone_chart_new (HoneChartKind kind)
{
  HoneChart *self = g_object_new (HONE_TYPE_CHART, NULL);
  self->kind = kind;
  return GTK_WIDGET (self);
}

void
hone_chart_set_kind (HoneChart *self, HoneChartKind kind)
{
  g_return_if_fail (HONE_IS_CHART (self));
  self->kind = kind;
  changed (self);
}

HoneChartKind
hone_chart_get_kind (HoneChart *self)
{
  g_return_val_if_fail (HONE_IS_CHART (self), HONE_CHART_LINE);
  return self->kind;
}

guint
hone_chart_add_series (HoneChart *self, const char *name, guint capacity)
{
  Series *s;

  g_return_val_if_fail (HONE_IS_CHART (self), 0);
  s = g_new0 (Series, 1);
  s->name = g_strdup (name ? name : "");
  s->capacity = MAX (capacity, 1u);
  s->xs = g_new0 (double, s->capacity);
  s->ys = g_new0 (double, s->capacity);
  g_ptr_array_add (self->series, s);
  return self->series->len - 1;
}

guint
hone_chart_get_n_series (HoneChart *self)
{
  g_return_val_if_fail (HONE_IS_CHART (self), 0);
  return self->series->len;
}

void
hone_chart_add_point (HoneChart *self, guint series, double x, double y)
{
  Series *s;
  guint k;

  g_return_if_fail (HONE_IS_CHART (self));
  s = get_series (self, series);
  g_return_if_fail (s != NULL);
  if (!isfinite (x) || !isfinite (y))
    return;
  if (s->len < s->capacity)
    k = ring_index (s, s->len++);
  else
    {
      k = s->start;                       /* overwrite the oldest */
      s->start = (s->start + 1) % s->capacity;
    }
  s->xs[k] = x;
  s->ys[k] = y;
  changed (self);
}

void
hone_chart_clear (HoneChart *self)
{
  guint i;

  g_return_if_fail (HONE_IS_CHART (self));
  for (i = 0; i < self->series->len; i++)
    {
      Series *s = get_series (self, i);
      s->start = s->len = 0;
    }
  self->has_peak = FALSE;
  changed (self);
}

void
hone_chart_set_range (HoneChart *self, double y_min, double y_max)
{
  g_return_if_fail (HONE_IS_CHART (self));
  self->fixed_range = y_min < y_max;
  self->y_min = y_min;
  self->y_max = y_max;
  changed (self);
}

void
hone_chart_set_x_window (HoneChart *self, double width)
{
  g_return_if_fail (HONE_IS_CHART (self));
  self->x_window = MAX (0, width);
  changed (self);
}

void
hone_chart_set_unit (HoneChart *self, const char *unit)
{
  g_return_if_fail (HONE_IS_CHART (self));
  g_free (self->unit);
  self->unit = g_strdup (unit);
  changed (self);
}

void
hone_chart_mark_peak (HoneChart *self, double value, const char *label)
{
  g_return_if_fail (HONE_IS_CHART (self));
  g_free (self->peak_label);
  self->peak_label = g_strdup (label);
  self->has_peak = label != NULL && isfinite (value);
  self->peak = value;
  changed (self);
}

gboolean
hone_chart_get_peak (HoneChart *self, double *value)
{
  g_return_val_if_fail (HONE_IS_CHART (self), FALSE);
  if (self->has_peak && value)
    *value = self->peak;
  return self->has_peak;
}

guint
hone_chart_get_n_points (HoneChart *self, guint series)
{
  Series *s;

  g_return_val_if_fail (HONE_IS_CHART (self), 0);
  s = get_series (self, series);
  return s ? s->len : 0;
}

gboolean
hone_chart_get_extrema (HoneChart *self, guint series, double *min, double *max)
{
  Series *s;
  double mn = INFINITY, mx = -INFINITY;
  guint i;

  g_return_val_if_fail (HONE_IS_CHART (self), FALSE);
  s = get_series (self, series);
  if (!s || s->len == 0)
    return FALSE;
  for (i = 0; i < s->len; i++)
    {
      double y = s->ys[ring_index (s, i)];
      mn = MIN (mn, y);
      mx = MAX (mx, y);
    }
  if (min)
    *min = mn;
  if (max)
    *max = mx;
  return TRUE;
}

gboolean
hone_chart_get_point (HoneChart *self, guint series, guint i, double *x, double *y)
{
  Series *s;

  g_return_val_if_fail (HONE_IS_CHART (self), FALSE);
  s = get_series (self, series);
  if (!s || i >= s->len)
    return FALSE;
  if (x)
    *x = s->xs[ring_index (s, i)];
  if (y)
    *y = s->ys[ring_index (s, i)];
  return TRUE;
}

gboolean
hone_chart_is_paused (HoneChart *self)
{
  g_return_val_if_fail (HONE_IS_CHART (self), TRUE);
  return self->paused;
}
