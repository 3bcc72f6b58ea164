/* hone-gui-harness.c — drive the real HoneApplication from a GTest program. */
#include "hone-gui-harness.h"

typedef struct {
  HoneGuiSteps steps;
  gpointer data;
  gboolean ran;
} RunContext;

gboolean
hone_gui_timeout_cb (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

void
hone_gui_spin (guint ms)
{
  gboolean done = FALSE;
  g_timeout_add (ms, hone_gui_timeout_cb, &done);
  while (!done)
    g_main_context_iteration (NULL, TRUE);
}

gboolean
hone_gui_shows_label (GtkWidget *root, const char *text)
{
  if (!gtk_widget_get_visible (root))
    return FALSE;
  if (GTK_IS_LABEL (root) && g_str_has_prefix (gtk_label_get_text (GTK_LABEL (root)), text))
    return TRUE;
  for (GtkWidget *c = gtk_widget_get_first_child (root); c; c = gtk_widget_get_next_sibling (c))
    if (hone_gui_shows_label (c, text))
      return TRUE;
  return FALSE;
}

static void
on_activate (HoneApplication *app, RunContext *ctx)
{
  HoneWindow *window = HONE_WINDOW (gtk_application_get_active_window (GTK_APPLICATION (app)));

  g_assert_nonnull (window);
  WAIT_UNTIL (gtk_widget_get_mapped (GTK_WIDGET (window)), 10);
  ctx->steps (app, window, ctx->data);
  ctx->ran = TRUE;
  /* Closing the last window ends g_application_run (then shutdown drops the engine). */
  if (gtk_application_get_active_window (GTK_APPLICATION (app)))
    gtk_window_close (gtk_application_get_active_window (GTK_APPLICATION (app)));
}

void
hone_gui_run_app (HoneGuiSteps steps, gpointer data)
{
  HoneApplication *app = hone_application_new (G_APPLICATION_NON_UNIQUE);
  RunContext ctx = { steps, data, FALSE };
  int status;

  g_signal_connect_after (app, "activate", G_CALLBACK (on_activate), &ctx);
  status = g_application_run (G_APPLICATION (app), 0, NULL);
  g_assert_cmpint (status, ==, 0);
  g_assert_true (ctx.ran);
  g_object_unref (app);
}
