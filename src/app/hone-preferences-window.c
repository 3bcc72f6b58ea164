/* hone-preferences-window.c — see hone-preferences-window.h. */
#include "hone-preferences-window.h"

#include "hone-i18n.h"

struct _HonePreferencesWindow {
  AdwPreferencesWindow parent_instance;
  GSettings *settings;

  GtkWidget *color_scheme_row;
  GtkWidget *show_stats_switch;
  GtkWidget *load_last_switch;
  GtkWidget *system_prompt_row;
  GtkAdjustment *temperature_adjustment;
  GtkAdjustment *top_p_adjustment;
  GtkAdjustment *top_k_adjustment;
  GtkAdjustment *max_tokens_adjustment;
};

G_DEFINE_FINAL_TYPE (HonePreferencesWindow, hone_preferences_window, ADW_TYPE_PREFERENCES_WINDOW)

static const char *schemes[] = { "default", "light", "dark" };

static gboolean
scheme_to_index (GValue *value, GVariant *variant, gpointer data)
{
  const char *s = g_variant_get_string (variant, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (schemes); i++)
    if (g_strcmp0 (s, schemes[i]) == 0)
      {
        g_value_set_uint (value, i);
        return TRUE;
      }
  g_value_set_uint (value, 0);
  return TRUE;
}

static GVariant *
index_to_scheme (const GValue *value, const GVariantType *type, gpointer data)
{
  guint i = g_value_get_uint (value);
  return g_variant_new_string (schemes[i < G_N_ELEMENTS (schemes) ? i : 0]);
}

static void
hone_preferences_window_dispose (GObject *object)
{
  HonePreferencesWindow *self = HONE_PREFERENCES_WINDOW (object);

  g_clear_object (&self->settings);
  G_OBJECT_CLASS (hone_preferences_window_parent_class)->dispose (object);
}

static void
hone_preferences_window_class_init (HonePreferencesWindowClass *klass)
{
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  G_OBJECT_CLASS (klass)->dispose = hone_preferences_window_dispose;
  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hone/Hone/hone-preferences-window.ui");
  gtk_widget_class_bind_template_child (widget_class, HonePreferencesWindow, color_scheme_row);
  gtk_widget_class_bind_template_child (widget_class, HonePreferencesWindow, show_stats_switch);
  gtk_widget_class_bind_template_child (widget_class, HonePreferencesWindow, load_last_switch);
  gtk_widget_class_bind_template_child (widget_class, HonePreferencesWindow, system_prompt_row);
  gtk_widget_class_bind_template_child (widget_class, HonePreferencesWindow, temperature_adjustment);
  gtk_widget_class_bind_template_child (widget_class, HonePreferencesWindow, top_p_adjustment);
  gtk_widget_class_bind_template_child (widget_class, HonePreferencesWindow, top_k_adjustment);
  gtk_widget_class_bind_template_child (widget_class, HonePreferencesWindow, max_tokens_adjustment);
}

static void
hone_preferences_window_init (HonePreferencesWindow *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
}

GtkWidget *
hone_preferences_window_new (GtkWindow *parent, GSettings *settings)
{
  HonePreferencesWindow *self = g_object_new (HONE_TYPE_PREFERENCES_WINDOW,
                                              "transient-for", parent,
                                              "modal", TRUE,
                                              NULL);

  self->settings = g_object_ref (settings);
  g_settings_bind_with_mapping (settings, "color-scheme", self->color_scheme_row, "selected",
                                G_SETTINGS_BIND_DEFAULT, scheme_to_index, index_to_scheme, NULL, NULL);
  g_settings_bind (settings, "show-message-stats", self->show_stats_switch, "active", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "load-last-model", self->load_last_switch, "active", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "system-prompt", self->system_prompt_row, "text", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "temperature", self->temperature_adjustment, "value", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "top-p", self->top_p_adjustment, "value", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "top-k", self->top_k_adjustment, "value", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "max-tokens", self->max_tokens_adjustment, "value", G_SETTINGS_BIND_DEFAULT);
  return GTK_WIDGET (self);
}
