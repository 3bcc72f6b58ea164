/* hone-gui-harness.h — drive the real HoneApplication from a GTest program. */
#pragma once

#include <gtk/gtk.h>
#include "hone-application.h"
#include "hone-window.h"

typedef void (*HoneGuiSteps) (HoneApplication *app, HoneWindow *window, gpointer data);

gboolean hone_gui_timeout_cb (gpointer data);

/* Iterate the main context until @cond holds, failing after @seconds. */
#define WAIT_UNTIL(cond, seconds) G_STMT_START {                                       \
    gboolean timed_out_ = FALSE;                                                      \
    guint id_ = g_timeout_add_seconds ((seconds), hone_gui_timeout_cb, &timed_out_);   \
    while (!(cond) && !timed_out_)                                                    \
      g_main_context_iteration (NULL, TRUE);                                          \
    if (timed_out_)                                                                   \
      g_error ("timed out waiting for: %s", #cond);                                   \
    g_source_remove (id_);                                                            \
  } G_STMT_END

/* Iterate the main context for @ms milliseconds. */
void hone_gui_spin (guint ms);
/* Whether a label under @root whose visible property is set starts with
 * @text (a message row's stats line may go on with the request's figures). */
gboolean hone_gui_shows_label (GtkWidget *root, const char *text);
/* Run a new app instance, call @steps once its window is mapped, then close it. */
void hone_gui_run_app (HoneGuiSteps steps, gpointer data);
