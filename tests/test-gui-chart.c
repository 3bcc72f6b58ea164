/* test-gui-chart.c — HoneChart: ring buffer, extrema, and what it draws.
 *
 * The drawing test renders the real widget (its snapshot, through the
 * window's GSK renderer) into a texture and finds the rows where the series
 * colour appears: the topmost and bottommost must sit where the linear map
 * of the fixed range puts the series' max and min (computed here from the
 * input, not asked from the chart). Runs under Xvfb (suite 'gui').
 */
#include <adwaita.h>
#include <math.h>

#include "hone-chart.h"

static void
test_ring_buffer (void)
{
  const double ys[] = { 5, -3, 12, 7, 40, 2, 9, 11 };
  HoneChart *chart = HONE_CHART (g_object_ref_sink (hone_chart_new (HONE_CHART_LINE)));
  guint s = hone_chart_add_series (chart, "s", 5);
  double mn, mx, expect_min = INFINITY, expect_max = -INFINITY, x, y;

  g_assert_false (hone_chart_get_extrema (chart, s, &mn, &mx));
  for (guint i = 0; i < G_N_ELEMENTS (ys); i++)
    hone_chart_add_point (chart, s, i, ys[i]);
  /* non-finite points are ignored */
  hone_chart_add_point (chart, s, 99, NAN);
  hone_chart_add_point (chart, s, 99, INFINITY);

  g_assert_cmpuint (hone_chart_get_n_points (chart, s), ==, 5);
  for (guint i = G_N_ELEMENTS (ys) - 5; i < G_N_ELEMENTS (ys); i++)
    {
      expect_min = MIN (expect_min, ys[i]);
      expect_max = MAX (expect_max, ys[i]);
    }
  g_assert_true (hone_chart_get_extrema (chart, s, &mn, &mx));
  g_assert_cmpfloat (mn, ==, expect_min);   /* 2: the 40 before it is still in */
  g_assert_cmpfloat (mx, ==, expect_max);
  /* oldest first */
  g_assert_true (hone_chart_get_point (chart, s, 0, &x, &y));
  g_assert_cmpfloat (x, ==, 3);
  g_assert_cmpfloat (y, ==, ys[3]);
  g_assert_true (hone_chart_get_point (chart, s, 4, &x, &y));
  g_assert_cmpfloat (y, ==, ys[7]);
  g_assert_false (hone_chart_get_point (chart, s, 5, NULL, NULL));

  /* auto range covers the data with headroom; a fixed range is kept */
  {
    double lo, hi;
    hone_chart_get_visible_range (chart, &lo, &hi);
    g_assert_cmpfloat (lo, <=, 0);
    g_assert_cmpfloat (hi, >=, expect_max);
    hone_chart_set_range (chart, -10, 100);
    hone_chart_get_visible_range (chart, &lo, &hi);
    g_assert_cmpfloat (lo, ==, -10);
    g_assert_cmpfloat (hi, ==, 100);
  }

  /* peak marker */
  g_assert_false (hone_chart_get_peak (chart, NULL));
  hone_chart_mark_peak (chart, 42, "peak");
  g_assert_true (hone_chart_get_peak (chart, &mx));
  g_assert_cmpfloat (mx, ==, 42);
  hone_chart_mark_peak (chart, 0, NULL);
  g_assert_false (hone_chart_get_peak (chart, NULL));

  hone_chart_clear (chart);
  g_assert_cmpuint (hone_chart_get_n_points (chart, s), ==, 0);
  g_object_unref (chart);
}

static gboolean
wait_cb (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

static void
spin (guint ms)
{
  gboolean done = FALSE;
  g_timeout_add (ms, wait_cb, &done);
  while (!done)
    g_main_context_iteration (NULL, TRUE);
}

typedef struct {
  int width, height, stride;
  guchar *pixels;   /* GDK_MEMORY_DEFAULT: B G R A premultiplied on little endian */
} Image;

static void
render (GtkWidget *widget, Image *img)
{
  GdkPaintable *paintable = gtk_widget_paintable_new (widget);
  GtkSnapshot *snapshot = gtk_snapshot_new ();
  GskRenderNode *node;
  GskRenderer *renderer = gtk_native_get_renderer (gtk_widget_get_native (widget));
  GdkTexture *texture;

  img->width = gtk_widget_get_width (widget);
  img->height = gtk_widget_get_height (widget);
  gdk_paintable_snapshot (paintable, snapshot, img->width, img->height);
  node = gtk_snapshot_free_to_node (snapshot);
  g_assert_nonnull (node);
  texture = gsk_renderer_render_texture (renderer, node,
                                         &GRAPHENE_RECT_INIT (0, 0, img->width, img->height));
  img->stride = img->width * 4;
  img->pixels = g_malloc (img->stride * img->height);
  gdk_texture_download (texture, img->pixels, img->stride);
  if (g_getenv ("HONE_CHART_PNG"))
    gdk_texture_save_to_png (texture, g_getenv ("HONE_CHART_PNG"));
  g_object_unref (texture);
  gsk_render_node_unref (node);
  g_object_unref (paintable);
}

/* Rows (first and last) where a pixel close to @c appears inside the plot area. */
static gboolean
find_rows (const Image *img, const graphene_rect_t *area, const GdkRGBA *c, int *top, int *bottom)
{
  int r = lround (c->red * 255), g = lround (c->green * 255), b = lround (c->blue * 255);

  *top = G_MAXINT;
  *bottom = -1;
  for (int y = 0; y < img->height; y++)
    for (int x = (int) area->origin.x + 2; x < (int) (area->origin.x + area->size.width) - 2; x++)
      {
        const guchar *p = img->pixels + y * img->stride + x * 4;
        /* GDK_MEMORY_DEFAULT is B8G8R8A8_PREMULTIPLIED; the window is opaque
         * where the chart draws, so premultiplication does not matter here. */
        if (abs (p[2] - r) <= 40 && abs (p[1] - g) <= 40 && abs (p[0] - b) <= 40 && p[3] > 200)
          {
            *top = MIN (*top, y);
            *bottom = MAX (*bottom, y);
          }
      }
  return *bottom >= 0;
}

static void
check_drawing (HoneChart *chart, const double *ys, guint n, double lo, double hi)
{
  GtkWidget *widget = GTK_WIDGET (chart);
  double expect_min = INFINITY, expect_max = -INFINITY;
  graphene_rect_t area;
  GdkRGBA color;
  Image img;
  int top, bottom;
  double y_max_px, y_min_px;

  for (guint i = 0; i < n; i++)
    {
      expect_min = MIN (expect_min, ys[i]);
      expect_max = MAX (expect_max, ys[i]);
    }
  render (widget, &img);
  hone_chart_get_plot_area (chart, img.width, img.height, &area);
  hone_chart_get_series_color (chart, 0, &color);
  g_assert_true (find_rows (&img, &area, &color, &top, &bottom));
  /* Independent linear map of the fixed range onto the plot area. */
  y_max_px = area.origin.y + area.size.height * (1 - (expect_max - lo) / (hi - lo));
  y_min_px = area.origin.y + area.size.height * (1 - (expect_min - lo) / (hi - lo));
  g_test_message ("max %.1f → row %d (expected %.1f); min %.1f → row %d (expected %.1f)",
                  expect_max, top, y_max_px, expect_min, bottom, y_min_px);
  g_assert_cmpfloat (fabs (top - y_max_px), <=, 2.5);
  g_assert_cmpfloat (fabs (bottom - y_min_px), <=, 2.5);
  /* and the chart's own mapping agrees */
  g_assert_cmpfloat (fabs (hone_chart_value_to_y (chart, expect_max, img.height) - y_max_px), <, 0.01);
  g_free (img.pixels);
}

static void
test_drawing (void)
{
  /* flat runs at the extremes, so the extreme rows are fully covered pixels */
  const double ys[] = { 50, 80, 80, 80, 35, 20, 20, 20, 60, 55 };
  GtkWidget *window = gtk_window_new ();
  HoneChart *chart = HONE_CHART (hone_chart_new (HONE_CHART_LINE));
  AdwStyleManager *sm = adw_style_manager_get_default ();
  GdkRGBA light, dark;
  guint s = hone_chart_add_series (chart, "test", 64);

  gtk_window_set_default_size (GTK_WINDOW (window), 480, 240);
  gtk_window_set_child (GTK_WINDOW (window), GTK_WIDGET (chart));
  for (guint i = 0; i < G_N_ELEMENTS (ys); i++)
    hone_chart_add_point (chart, s, i, ys[i]);
  hone_chart_set_range (chart, 0, 100);
  g_assert_true (hone_chart_is_paused (chart));   /* not mapped yet */

  adw_style_manager_set_color_scheme (sm, ADW_COLOR_SCHEME_FORCE_LIGHT);
  gtk_window_present (GTK_WINDOW (window));
  while (!gtk_widget_get_mapped (GTK_WIDGET (chart)) || gtk_widget_get_height (GTK_WIDGET (chart)) < 100)
    g_main_context_iteration (NULL, TRUE);
  spin (100);
  g_assert_false (hone_chart_is_paused (chart));
  hone_chart_get_series_color (chart, 0, &light);
  check_drawing (chart, ys, G_N_ELEMENTS (ys), 0, 100);

  /* Dark style: another palette, same geometry. */
  adw_style_manager_set_color_scheme (sm, ADW_COLOR_SCHEME_FORCE_DARK);
  spin (100);
  hone_chart_get_series_color (chart, 0, &dark);
  g_assert_false (gdk_rgba_equal (&light, &dark));
  check_drawing (chart, ys, G_N_ELEMENTS (ys), 0, 100);

  /* Hidden: stops redrawing but keeps buffering. */
  gtk_widget_set_visible (window, FALSE);
  spin (50);
  g_assert_true (hone_chart_is_paused (chart));
  hone_chart_add_point (chart, s, 100, 90);
  g_assert_cmpuint (hone_chart_get_n_points (chart, s), ==, G_N_ELEMENTS (ys) + 1);

  adw_style_manager_set_color_scheme (sm, ADW_COLOR_SCHEME_DEFAULT);
  gtk_window_destroy (GTK_WINDOW (window));
}

static void
test_bars (void)
{
  /* Bars: the tallest bar's top sits at the max. */
  const double ys[] = { 10, 30, 70, 25 };
  GtkWidget *window = gtk_window_new ();
  HoneChart *chart = HONE_CHART (hone_chart_new (HONE_CHART_BARS));
  guint s = hone_chart_add_series (chart, "ttft", 8);
  GdkRGBA color;
  graphene_rect_t area;
  Image img;
  int top, bottom;

  gtk_window_set_default_size (GTK_WINDOW (window), 400, 220);
  gtk_window_set_child (GTK_WINDOW (window), GTK_WIDGET (chart));
  for (guint i = 0; i < G_N_ELEMENTS (ys); i++)
    hone_chart_add_point (chart, s, i, ys[i]);
  hone_chart_set_range (chart, 0, 100);
  gtk_window_present (GTK_WINDOW (window));
  while (!gtk_widget_get_mapped (GTK_WIDGET (chart)) || gtk_widget_get_height (GTK_WIDGET (chart)) < 100)
    g_main_context_iteration (NULL, TRUE);
  spin (100);
  render (GTK_WIDGET (chart), &img);
  hone_chart_get_plot_area (chart, img.width, img.height, &area);
  hone_chart_get_series_color (chart, s, &color);
  g_assert_true (find_rows (&img, &area, &color, &top, &bottom));
  g_assert_cmpfloat (fabs (top - (area.origin.y + area.size.height * (1 - 70 / 100.0))), <=, 1.5);
  g_assert_cmpfloat (fabs (bottom + 1 - (area.origin.y + area.size.height)), <=, 1.5);   /* bars stand on 0 */
  g_free (img.pixels);
  gtk_window_destroy (GTK_WINDOW (window));
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);
  if (!gtk_init_check ())
    {
      g_printerr ("no display: run under xvfb-run\n");
      return 77;
    }
  adw_init ();
  g_test_add_func ("/chart/ring-buffer", test_ring_buffer);
  g_test_add_func ("/chart/drawing", test_drawing);
  g_test_add_func ("/chart/bars", test_bars);
  return g_test_run ();
}
