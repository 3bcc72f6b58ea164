/* hone-gui-screenshots.c — PNGs of each page, light and dark, for the README.
 *
 *   GSK_RENDERER=cairo HONE_SCREENSHOT_BENCH=1 xvfb-run -a -s "-screen 0 1280x900x24" \
 *     build/tests/hone-gui-screenshots data/screenshots
 * (GSETTINGS_SCHEMA_DIR=build/data for an uninstalled build. Under Xvfb GTK's
 * default renderer is OpenGL in software, whose threads take the CPUs from the
 * engine: on a 2-core machine the chat then decodes at half its speed; the cairo
 * renderer does not, so the figures in the shots are the engine's.
 * HONE_SCREENSHOT_BENCH=1 also runs the Performance page's benchmark and shows
 * its table.)
 * (HONE_SCREENSHOT_QUICK=1: no chat, only the settings panel and Performance.)
 *
 * Drives the real app with the default model (HONE_DEFAULT_MODEL or
 * ~/.cache/hone/models/SmolLM2-135M-Instruct.Q4_1.gguf) in a temporary HOME:
 * loads it, asks two questions (temperature 0.3, seed 42), runs the benchmark
 * when asked, and renders the window (its own paintable, through its GSK renderer) into
 * <dir>/{chat,model,performance}-{light,dark}.png.
 */
#include <adwaita.h>
#include <locale.h>

#include "hone-application.h"
#include "hone-i18n.h"
#include "hone-window.h"

static char *out_dir;
static char *model;

static gboolean
timeout_cb (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

#define WAIT_UNTIL(cond, seconds) G_STMT_START {                              \
    gboolean timed_out_ = FALSE;                                             \
    guint id_ = g_timeout_add_seconds ((seconds), timeout_cb, &timed_out_);   \
    while (!(cond) && !timed_out_)                                           \
      g_main_context_iteration (NULL, TRUE);                                 \
    if (timed_out_)                                                          \
      g_error ("timed out waiting for: %s", #cond);                          \
    g_source_remove (id_);                                                   \
  } G_STMT_END

static void
spin (guint ms)
{
  gboolean done = FALSE;
  g_timeout_add (ms, timeout_cb, &done);
  while (!done)
    g_main_context_iteration (NULL, TRUE);
}

static void
shoot (GtkWidget *window, const char *name)
{
  GdkPaintable *paintable = gtk_widget_paintable_new (window);
  GtkSnapshot *snapshot = gtk_snapshot_new ();
  int w = gtk_widget_get_width (window), h = gtk_widget_get_height (window);
  GskRenderNode *node;
  GdkTexture *texture;
  g_autofree char *file = g_strdup_printf ("%s.png", name);
  g_autofree char *path = g_build_filename (out_dir, file, NULL);

  gdk_paintable_snapshot (paintable, snapshot, w, h);
  node = gtk_snapshot_free_to_node (snapshot);
  /* The paintable gives nothing while a redraw is pending (live charts):
   * let a frame happen and try again. */
  for (int tries = 0; !node && tries < 100; tries++)
    {
      g_main_context_iteration (NULL, TRUE);
      snapshot = gtk_snapshot_new ();
      gdk_paintable_snapshot (paintable, snapshot, w, h);
      node = gtk_snapshot_free_to_node (snapshot);
    }
  texture = gsk_renderer_render_texture (gtk_native_get_renderer (GTK_NATIVE (window)), node,
                                         &GRAPHENE_RECT_INIT (0, 0, w, h));
  if (!gdk_texture_save_to_png (texture, path))
    g_error ("could not write %s", path);
  g_print ("wrote %s (%dx%d)\n", path, w, h);
  g_object_unref (texture);
  gsk_render_node_unref (node);
  g_object_unref (paintable);
}

static void
shoot_both (GtkWidget *window, const char *page)
{
  AdwStyleManager *sm = adw_style_manager_get_default ();
  g_autofree char *light = g_strdup_printf ("%s-light", page);
  g_autofree char *dark = g_strdup_printf ("%s-dark", page);

  hone_window_show_page (HONE_WINDOW (window), page);
  adw_style_manager_set_color_scheme (sm, ADW_COLOR_SCHEME_FORCE_LIGHT);
  spin (400);
  shoot (window, light);
  adw_style_manager_set_color_scheme (sm, ADW_COLOR_SCHEME_FORCE_DARK);
  spin (400);
  shoot (window, dark);
  adw_style_manager_set_color_scheme (sm, ADW_COLOR_SCHEME_FORCE_LIGHT);
}

/* The first scrolled window under `w`, depth first (NULL: none). */
static GtkScrolledWindow *
find_scroller (GtkWidget *w)
{
  if (GTK_IS_SCROLLED_WINDOW (w))
    return GTK_SCROLLED_WINDOW (w);
  for (GtkWidget *c = gtk_widget_get_first_child (w); c; c = gtk_widget_get_next_sibling (c))
    {
      GtkScrolledWindow *s = find_scroller (c);
      if (s)
        return s;
    }
  return NULL;
}

/* Scrolls `page` to its end, so that a finished benchmark's table shows. */
static void
scroll_to_end (GtkWidget *page)
{
  GtkScrolledWindow *s = find_scroller (page);
  GtkAdjustment *adj;

  if (!s)
    return;
  spin (300);
  adj = gtk_scrolled_window_get_vadjustment (s);
  gtk_adjustment_set_value (adj, gtk_adjustment_get_upper (adj) - gtk_adjustment_get_page_size (adj));
}

static void
ask (HoneChatPage *chat, const char *text)
{
  g_assert_true (hone_chat_page_send (chat, text));
  WAIT_UNTIL (!hone_chat_page_get_generating (chat), 300);
}

static void
on_activate (HoneApplication *app, gpointer data)
{
  GtkWidget *window = GTK_WIDGET (gtk_application_get_active_window (GTK_APPLICATION (app)));
  HoneEngine *engine = hone_application_get_engine (app);
  HoneChatPage *chat = hone_window_get_chat_page (HONE_WINDOW (window));
  HoneModelPage *model_page = hone_window_get_model_page (HONE_WINDOW (window));
  HonePerformancePage *perf = hone_window_get_performance_page (HONE_WINDOW (window));
  HoneConversation *c;

  gtk_window_set_default_size (GTK_WINDOW (window), 1180, 760);
  WAIT_UNTIL (gtk_widget_get_mapped (window), 10);
  spin (300);

  hone_window_open_model (HONE_WINDOW (window), model);
  WAIT_UNTIL (hone_model_page_get_info (model_page) != NULL, 30);
  hone_model_page_load (model_page);
  WAIT_UNTIL (hone_engine_get_state (engine) == HONE_ENGINE_STATE_READY, 120);
  spin (5500);  /* the "Model loaded" toast times out (5 s) */

  hone_window_show_page (HONE_WINDOW (window), "chat");
  hone_chat_page_new_conversation (chat);
  c = hone_chat_page_get_conversation (chat);
  g_object_set (c, "temperature", 0.3, "seed", (gint64) 42, "max-tokens", 120,
                "system-prompt", "You are a helpful assistant.", NULL);
  if (!g_getenv ("HONE_SCREENSHOT_QUICK"))
    {
      ask (chat, "What is a whetstone? Answer in two sentences.");
      ask (chat, "How do I print hello world in Python?");
    }
  if (g_getenv ("HONE_SCREENSHOT_BENCH"))
    hone_performance_page_run_bench (perf);
  if (g_getenv ("HONE_SCREENSHOT_QUICK"))
    {
      gtk_widget_activate_action (GTK_WIDGET (chat), "chat.toggle-settings", NULL);
      spin (600);
      shoot (window, "chat-settings-light");
      gtk_widget_activate_action (GTK_WIDGET (chat), "chat.toggle-settings", NULL);
    }
  else
    {
      shoot_both (window, "chat");
      /* the side panel: system prompt and sampling */
      gtk_widget_activate_action (GTK_WIDGET (chat), "chat.toggle-settings", NULL);
      spin (600);
      shoot (window, "chat-settings-light");
      gtk_widget_activate_action (GTK_WIDGET (chat), "chat.toggle-settings", NULL);
      shoot_both (window, "model");
    }
  hone_window_show_page (HONE_WINDOW (window), "performance");
  if (g_getenv ("HONE_SCREENSHOT_BENCH"))
    {
      WAIT_UNTIL (!hone_performance_page_get_bench_running (perf), 600);
      scroll_to_end (GTK_WIDGET (perf));
    }
  spin (1500);
  shoot_both (window, "performance");
  gtk_window_close (GTK_WINDOW (window));
}

int
main (int argc, char *argv[])
{
  g_autofree char *home = g_dir_make_tmp ("hone-shots-XXXXXX", NULL);
  g_autofree char *data = g_build_filename (home, "data", NULL);
  HoneApplication *app;
  int status;

  /* Translated shots: LANG=zh_CN.UTF-8 HONE_LOCALEDIR=build/po (the .mo files meson built). */
  setlocale (LC_ALL, "");
  bindtextdomain (GETTEXT_PACKAGE, g_getenv ("HONE_LOCALEDIR") ? g_getenv ("HONE_LOCALEDIR") : HONE_LOCALEDIR);
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);
  out_dir = g_strdup (argc > 1 ? argv[1] : "data/screenshots");
  model = g_strdup (g_getenv ("HONE_DEFAULT_MODEL"));
  if (!model)
    model = g_build_filename (g_get_home_dir (), ".cache", "hone", "models",
                              "SmolLM2-135M-Instruct.Q4_1.gguf", NULL);
  g_mkdir_with_parents (out_dir, 0755);
  g_setenv ("HOME", home, TRUE);
  g_setenv ("XDG_DATA_HOME", data, TRUE);
  g_setenv ("GSETTINGS_BACKEND", "memory", TRUE);

  app = hone_application_new (G_APPLICATION_NON_UNIQUE);
  g_signal_connect_after (app, "activate", G_CALLBACK (on_activate), NULL);
  status = g_application_run (G_APPLICATION (app), 0, NULL);
  g_object_unref (app);
  return status;
}
