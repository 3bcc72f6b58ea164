/* hone-application.c — see hone-application.h. */
#include "hone-application.h"

#include "hone-i18n.h"
#include "hone-preferences-window.h"
#include "hone-resources.h"
#include "hone-window.h"

#ifndef HONE_APP_ID
#define HONE_APP_ID "io.github.hone.Hone"
#endif
#ifndef HONE_VERSION
#define HONE_VERSION "0.1.0"
#endif

struct _HoneApplication {
  AdwApplication parent_instance;
  HoneEngine *engine;
  HoneConversationStore *store;
  GSettings *settings;
  GPtrArray *load_failures;     /* GError*: conversations that did not load */
  gboolean gpu_listed;          /* this machine lists a CUDA GPU */
  char *device_note_shown;      /* the engine's last device note told to the user */
};

G_DEFINE_FINAL_TYPE (HoneApplication, hone_application, ADW_TYPE_APPLICATION)

static void
apply_color_scheme (HoneApplication *self)
{
  g_autofree char *scheme = g_settings_get_string (self->settings, "color-scheme");
  AdwColorScheme cs = ADW_COLOR_SCHEME_DEFAULT;

  if (g_strcmp0 (scheme, "light") == 0)
    cs = ADW_COLOR_SCHEME_FORCE_LIGHT;
  else if (g_strcmp0 (scheme, "dark") == 0)
    cs = ADW_COLOR_SCHEME_FORCE_DARK;
  adw_style_manager_set_color_scheme (adw_style_manager_get_default (), cs);
}

/* The saved device if it still exists, else "auto": at each load the engine
 * takes the first GPU that can run the kernels and the model, else the CPU
 * (hone_engine_pick_device). */
static void
apply_device (HoneApplication *self)
{
  g_autofree char *wanted = g_settings_get_string (self->settings, "device");
  g_autoptr(GPtrArray) devices = hone_engine_list_devices ();
  const char *device = "auto";

  for (guint i = 0; i < devices->len; i++)
    {
      HoneDevice *d = g_ptr_array_index (devices, i);
      self->gpu_listed = self->gpu_listed || d->kind == HONE_DEVICE_CUDA;
      if (g_strcmp0 (d->id, wanted) == 0)
        device = d->id;
    }
  hone_engine_set_device (self->engine, device);
}

/* "auto" put the loaded model on the CPU: say why in a toast — when this machine
 * lists a GPU (a machine without one is not told at every load), and once for
 * the same reason. */
static void
on_device_note (HoneEngine *engine, GParamSpec *pspec, HoneApplication *self)
{
  g_autofree char *note = NULL;
  GtkWindow *window = gtk_application_get_active_window (GTK_APPLICATION (self));

  g_object_get (engine, "device-note", &note, NULL);
  if (note == NULL || !self->gpu_listed || window == NULL || g_strcmp0 (note, self->device_note_shown) == 0)
    return;
  {
    /* TRANSLATORS: %s says why, e.g. "CUDA device 0 has compute capability 7.5; the kernels need 8.0 or newer" */
    g_autofree char *msg = g_strdup_printf (_("Running on the CPU: %s"), note);
    hone_window_add_toast (HONE_WINDOW (window), msg);
  }
  g_free (self->device_note_shown);
  self->device_note_shown = g_steal_pointer (&note);
}

static gboolean
budget_get (GValue *value, GVariant *variant, gpointer data)
{
  g_value_set_int64 (value, (gint64) g_variant_get_int32 (variant) * 1024 * 1024);
  return TRUE;
}

static GVariant *
budget_set (const GValue *value, const GVariantType *type, gpointer data)
{
  return g_variant_new_int32 ((gint32) MIN (g_value_get_int64 (value) / (1024 * 1024), G_MAXINT32));
}

static void
quit_action (GSimpleAction *action, GVariant *param, gpointer data)
{
  HoneApplication *self = data;
  GList *windows = g_list_copy (gtk_application_get_windows (GTK_APPLICATION (self)));

  /* Close windows first: each one stops its generation and saves. */
  for (GList *l = windows; l; l = l->next)
    gtk_window_close (GTK_WINDOW (l->data));
  g_list_free (windows);
  g_application_quit (G_APPLICATION (self));
}

static void
about_action (GSimpleAction *action, GVariant *param, gpointer data)
{
  HoneApplication *self = data;
  GtkWindow *parent = gtk_application_get_active_window (GTK_APPLICATION (self));
  static const char *developers[] = { "The Hone developers", NULL };

  adw_show_about_window (parent,
                         "application-name", _("Hone"),
                         "application-icon", HONE_APP_ID,
                         "developer-name", _("The Hone developers"),
                         "version", HONE_VERSION,
                         "comments", _("Run language models on your own machine and see where the time and memory go."),
                         "website", "https://github.com/hone/hone",
                         "issue-url", "https://github.com/hone/hone/issues",
                         "license-type", GTK_LICENSE_GPL_3_0,
                         "developers", developers,
                         /* Translators: your names, one per line */
                         "translator-credits", _("translator-credits"),
                         NULL);
}

static void
preferences_action (GSimpleAction *action, GVariant *param, gpointer data)
{
  HoneApplication *self = data;
  GtkWindow *parent = gtk_application_get_active_window (GTK_APPLICATION (self));

  gtk_window_present (GTK_WINDOW (hone_preferences_window_new (parent, self->settings)));
}

static const GActionEntry app_actions[] = {
  { "quit", quit_action, NULL, NULL, NULL, { 0 } },
  { "about", about_action, NULL, NULL, NULL, { 0 } },
  { "preferences", preferences_action, NULL, NULL, NULL, { 0 } },
};

static void
hone_application_startup (GApplication *app)
{
  HoneApplication *self = HONE_APPLICATION (app);
  static const char *quit[] = { "<Control>q", NULL };
  static const char *new_chat[] = { "<Control>n", NULL };
  static const char *open_model[] = { "<Control>o", NULL };
  static const char *close[] = { "<Control>w", NULL };
  static const char *prefs[] = { "<Control>comma", NULL };
  static const char *page_chat[] = { "<Alt>1", NULL };
  static const char *page_model[] = { "<Alt>2", NULL };
  static const char *page_perf[] = { "<Alt>3", NULL };

  G_APPLICATION_CLASS (hone_application_parent_class)->startup (app);

  g_action_map_add_action_entries (G_ACTION_MAP (self), app_actions, G_N_ELEMENTS (app_actions), self);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "app.quit", quit);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "app.preferences", prefs);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "win.new-chat", new_chat);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "win.open-model", open_model);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "window.close", close);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "win.show-page::chat", page_chat);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "win.show-page::model", page_model);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "win.show-page::performance", page_perf);

  self->settings = g_settings_new (HONE_APP_ID);
  g_signal_connect_swapped (self->settings, "changed::color-scheme", G_CALLBACK (apply_color_scheme), self);
  apply_color_scheme (self);

  /* One engine for the app; its options follow the settings both ways. */
  self->engine = hone_engine_new ();
  apply_device (self);
  g_signal_connect (self->engine, "notify::device-note", G_CALLBACK (on_device_note), self);
  g_settings_bind (self->settings, "context-length", self->engine, "context-length", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "kv-int8", self->engine, "int8-kv", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "speculative", self->engine, "speculative", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "prefill-decode-split", self->engine, "pd-split", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind_with_mapping (self->settings, "memory-budget-mib", self->engine, "memory-budget",
                                G_SETTINGS_BIND_DEFAULT, budget_get, budget_set, NULL, NULL);

  self->store = hone_conversation_store_new (NULL);
  hone_conversation_store_load (self->store, &self->load_failures);
}

static HoneWindow *
ensure_window (HoneApplication *self, gboolean *created)
{
  GtkWindow *window = gtk_application_get_active_window (GTK_APPLICATION (self));

  *created = window == NULL;
  if (!window)
    {
      window = GTK_WINDOW (hone_window_new (self));
      /* Conversations that could not be read: say so, once. */
      for (guint i = 0; self->load_failures && i < self->load_failures->len; i++)
        hone_window_add_toast (HONE_WINDOW (window), ((GError *) g_ptr_array_index (self->load_failures, i))->message);
      if (self->load_failures)
        g_ptr_array_set_size (self->load_failures, 0);
    }
  return HONE_WINDOW (window);
}

static void
hone_application_activate (GApplication *app)
{
  HoneApplication *self = HONE_APPLICATION (app);
  gboolean created;
  HoneWindow *window = ensure_window (self, &created);

  if (created && g_settings_get_boolean (self->settings, "load-last-model"))
    {
      g_auto(GStrv) recent = g_settings_get_strv (self->settings, "recent-models");
      if (recent[0] && hone_engine_get_state (self->engine) == HONE_ENGINE_STATE_EMPTY)
        {
          hone_window_open_model (window, recent[0]);
          g_object_set_data (G_OBJECT (hone_window_get_model_page (window)), "hone-auto-load", GINT_TO_POINTER (1));
        }
    }
  gtk_window_present (GTK_WINDOW (window));
}

static void
hone_application_open (GApplication *app, GFile **files, int n_files, const char *hint)
{
  HoneApplication *self = HONE_APPLICATION (app);
  gboolean created;
  HoneWindow *window = ensure_window (self, &created);

  if (n_files > 0)
    {
      g_autofree char *path = g_file_get_path (files[0]);
      if (path)
        hone_window_open_model (window, path);
    }
  gtk_window_present (GTK_WINDOW (window));
}

static void
hone_application_shutdown (GApplication *app)
{
  HoneApplication *self = HONE_APPLICATION (app);

  G_APPLICATION_CLASS (hone_application_parent_class)->shutdown (app);
  /* Dropping the engine cancels what is left and joins its thread. */
  g_clear_object (&self->engine);
}

static void
hone_application_finalize (GObject *object)
{
  HoneApplication *self = HONE_APPLICATION (object);

  g_clear_object (&self->engine);
  g_clear_object (&self->store);
  g_clear_object (&self->settings);
  g_clear_pointer (&self->load_failures, g_ptr_array_unref);
  g_clear_pointer (&self->device_note_shown, g_free);
  G_OBJECT_CLASS (hone_application_parent_class)->finalize (object);
}

static void
hone_application_class_init (HoneApplicationClass *klass)
{
  GApplicationClass *app_class = G_APPLICATION_CLASS (klass);

  G_OBJECT_CLASS (klass)->finalize = hone_application_finalize;
  app_class->startup = hone_application_startup;
  app_class->activate = hone_application_activate;
  app_class->open = hone_application_open;
  app_class->shutdown = hone_application_shutdown;
  /* Make sure the resources (templates, style.css, help overlay) are linked in. */
  (void) hone_get_resource ();
}

static void
hone_application_init (HoneApplication *self)
{
}

HoneApplication *
hone_application_new (GApplicationFlags extra_flags)
{
  return g_object_new (HONE_TYPE_APPLICATION,
                       "application-id", HONE_APP_ID,
                       "flags", G_APPLICATION_HANDLES_OPEN | extra_flags,
                       "resource-base-path", "/io/github/hone/Hone",
                       NULL);
}

HoneEngine *
hone_application_get_engine (HoneApplication *self)
{
  return self->engine;
}

HoneConversationStore *
hone_application_get_store (HoneApplication *self)
{
  return self->store;
}

GSettings *
hone_application_get_settings (HoneApplication *self)
{
  return self->settings;
}
