/* hone-preferences-window.h — appearance, chat defaults, start-up. */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define HONE_TYPE_PREFERENCES_WINDOW (hone_preferences_window_get_type ())
G_DECLARE_FINAL_TYPE (HonePreferencesWindow, hone_preferences_window, HONE, PREFERENCES_WINDOW,
                      AdwPreferencesWindow)

GtkWidget *hone_preferences_window_new (GtkWindow *parent, GSettings *settings);

G_END_DECLS
