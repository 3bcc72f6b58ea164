/* hone-window.c — see hone-window.h. */
#include "hone-window.h"

#include "hone-i18n.h"

struct _HoneWindow {
  AdwApplicationWindow parent_instance;
  GSettings *settings;

  AdwToastOverlay *toast_overlay;
  AdwViewStack *view_stack;
  HoneChatPage *chat_page;
  HoneModelPage *model_page;
  HonePerformancePage *performance_page;
  HoneQuantizePage *quantize_page;
#if !GTK_CHECK_VERSION(4, 10, 0)
  GtkFileChooserNative *chooser;
#endif
};

G_DEFINE_FINAL_TYPE (HoneWindow, hone_window, ADW_TYPE_APPLICATION_WINDOW)

void
hone_window_add_toast (HoneWindow *self, const char *message)
{
  g_autofree char *escaped = g_markup_escape_text (message, -1);  /* toast titles are markup */
  adw_toast_overlay_add_toast (self->toast_overlay, adw_toast_new (escaped));
}

void
hone_window_show_page (HoneWindow *self, const char *name)
{
  adw_view_stack_set_visible_child_name (self->view_stack, name);
}

const char *
hone_window_get_visible_page (HoneWindow *self)
{
  return adw_view_stack_get_visible_child_name (self->view_stack);
}

void
hone_window_open_model (HoneWindow *self, const char *path)
{
  hone_window_show_page (self, "model");
  hone_model_page_open (self->model_page, path);
}

HoneChatPage *
hone_window_get_chat_page (HoneWindow *self)
{
  return self->chat_page;
}

HoneModelPage *
hone_window_get_model_page (HoneWindow *self)
{
  return self->model_page;
}

HonePerformancePage *
hone_window_get_performance_page (HoneWindow *self)
{
  return self->performance_page;
}

HoneQuantizePage *
hone_window_get_quantize_page (HoneWindow *self)
{
  return self->quantize_page;
}

/* ---- open a model: GtkFileDialog on 4.10+, GtkFileChooserNative on 4.8 ---- */

static GListModel *
gguf_filters (void)
{
  GListStore *filters = g_list_store_new (GTK_TYPE_FILE_FILTER);
  GtkFileFilter *gguf = gtk_file_filter_new ();
  GtkFileFilter *all = gtk_file_filter_new ();

  gtk_file_filter_set_name (gguf, _("GGUF Models"));
  gtk_file_filter_add_pattern (gguf, "*.gguf");
  gtk_file_filter_add_pattern (gguf, "*.GGUF");
  gtk_file_filter_set_name (all, _("All Files"));
  gtk_file_filter_add_pattern (all, "*");
  g_list_store_append (filters, gguf);
  g_list_store_append (filters, all);
  g_object_unref (gguf);
  g_object_unref (all);
  return G_LIST_MODEL (filters);
}

static void
open_file (HoneWindow *self, GFile *file)
{
  g_autofree char *path = file ? g_file_get_path (file) : NULL;

  if (path)
    hone_window_open_model (self, path);
  else if (file)
    hone_window_add_toast (self, _("Only local files can be opened"));
}

#if GTK_CHECK_VERSION(4, 10, 0)
static void
on_dialog_done (GObject *source, GAsyncResult *result, gpointer data)
{
  HoneWindow *self = data;
  GtkFileDialog *dialog = GTK_FILE_DIALOG (source);
  g_autoptr(GFile) file = NULL;

  if (g_object_get_data (source, "folder"))
    file = gtk_file_dialog_select_folder_finish (dialog, result, NULL);
  else
    file = gtk_file_dialog_open_finish (dialog, result, NULL);
  open_file (self, file);
  g_object_unref (self);
}

static void
choose (HoneWindow *self, gboolean folder)
{
  g_autoptr(GtkFileDialog) dialog = gtk_file_dialog_new ();
  g_autoptr(GListModel) filters = gguf_filters ();

  gtk_file_dialog_set_title (dialog, folder ? _("Open Model Folder") : _("Open Model"));
  gtk_file_dialog_set_modal (dialog, TRUE);
  if (folder)
    {
      g_object_set_data (G_OBJECT (dialog), "folder", GINT_TO_POINTER (1));
      gtk_file_dialog_select_folder (dialog, GTK_WINDOW (self), NULL, on_dialog_done, g_object_ref (self));
    }
  else
    {
      gtk_file_dialog_set_filters (dialog, filters);
      gtk_file_dialog_open (dialog, GTK_WINDOW (self), NULL, on_dialog_done, g_object_ref (self));
    }
}
#else
static void
on_chooser_response (GtkNativeDialog *chooser, int response, HoneWindow *self)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr(GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (chooser));
      open_file (self, file);
    }
  g_clear_object (&self->chooser);
}

static void
choose (HoneWindow *self, gboolean folder)
{
  if (self->chooser)
    return;
  self->chooser = gtk_file_chooser_native_new (folder ? _("Open Model Folder") : _("Open Model"),
                                               GTK_WINDOW (self),
                                               folder ? GTK_FILE_CHOOSER_ACTION_SELECT_FOLDER
                                                      : GTK_FILE_CHOOSER_ACTION_OPEN,
                                               _("_Open"), _("_Cancel"));
  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (self->chooser), TRUE);
  if (!folder)
    {
      g_autoptr(GListModel) filters = gguf_filters ();
      for (guint i = 0; i < g_list_model_get_n_items (filters); i++)
        {
          g_autoptr(GtkFileFilter) f = g_list_model_get_item (filters, i);
          gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (self->chooser), f);
        }
    }
  g_signal_connect (self->chooser, "response", G_CALLBACK (on_chooser_response), self);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (self->chooser));
}
#endif

static void
open_model_action (GSimpleAction *action, GVariant *param, gpointer data)
{
  choose (HONE_WINDOW (data), FALSE);
}

static void
open_model_folder_action (GSimpleAction *action, GVariant *param, gpointer data)
{
  choose (HONE_WINDOW (data), TRUE);
}

static void
new_chat_action (GSimpleAction *action, GVariant *param, gpointer data)
{
  HoneWindow *self = data;

  hone_window_show_page (self, "chat");
  hone_chat_page_new_conversation (self->chat_page);
}

static void
show_page_action (GSimpleAction *action, GVariant *param, gpointer data)
{
  hone_window_show_page (HONE_WINDOW (data), g_variant_get_string (param, NULL));
}

static const GActionEntry win_actions[] = {
  { "open-model", open_model_action, NULL, NULL, NULL, { 0 } },
  { "open-model-folder", open_model_folder_action, NULL, NULL, NULL, { 0 } },
  { "new-chat", new_chat_action, NULL, NULL, NULL, { 0 } },
  { "show-page", show_page_action, "s", NULL, NULL, { 0 } },
};

/* ---- drag and drop -------------------------------------------------------- */

static gboolean
on_drop (GtkDropTarget *target, const GValue *value, double x, double y, HoneWindow *self)
{
  GSList *files;

  if (!G_VALUE_HOLDS (value, GDK_TYPE_FILE_LIST))
    return FALSE;
  files = g_value_get_boxed (value);
  if (!files)
    return FALSE;
  open_file (self, files->data);
  return TRUE;
}

/* ---- life cycle ----------------------------------------------------------- */

static void
on_request_finished (HoneWindow *self, HoneRequestMetrics *metrics)
{
  hone_performance_page_add_request (self->performance_page, metrics);
}

static gboolean
hone_window_close_request (GtkWindow *window)
{
  HoneWindow *self = HONE_WINDOW (window);
  int width, height;

  /* A running answer is cancelled and what streamed so far is saved. */
  hone_chat_page_shutdown (self->chat_page);
  /* A quantization in progress stops; its export leaves nothing half-written. */
  hone_quantize_page_shutdown (self->quantize_page);
  if (self->settings)
    {
      gtk_window_get_default_size (window, &width, &height);
      g_settings_set_int (self->settings, "window-width", width);
      g_settings_set_int (self->settings, "window-height", height);
      g_settings_set_boolean (self->settings, "window-maximized", gtk_window_is_maximized (window));
    }
  return GTK_WINDOW_CLASS (hone_window_parent_class)->close_request (window);
}

static void
hone_window_dispose (GObject *object)
{
  HoneWindow *self = HONE_WINDOW (object);

#if !GTK_CHECK_VERSION(4, 10, 0)
  if (self->chooser)
    gtk_native_dialog_destroy (GTK_NATIVE_DIALOG (self->chooser));
  g_clear_object (&self->chooser);
#endif
  g_clear_object (&self->settings);
  G_OBJECT_CLASS (hone_window_parent_class)->dispose (object);
}

static void
hone_window_class_init (HoneWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = hone_window_dispose;
  GTK_WINDOW_CLASS (klass)->close_request = hone_window_close_request;

  g_type_ensure (HONE_TYPE_CHAT_PAGE);
  g_type_ensure (HONE_TYPE_MODEL_PAGE);
  g_type_ensure (HONE_TYPE_PERFORMANCE_PAGE);
  g_type_ensure (HONE_TYPE_QUANTIZE_PAGE);
  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hone/Hone/hone-window.ui");
  gtk_widget_class_bind_template_child (widget_class, HoneWindow, toast_overlay);
  gtk_widget_class_bind_template_child (widget_class, HoneWindow, view_stack);
  gtk_widget_class_bind_template_child (widget_class, HoneWindow, chat_page);
  gtk_widget_class_bind_template_child (widget_class, HoneWindow, model_page);
  gtk_widget_class_bind_template_child (widget_class, HoneWindow, performance_page);
  gtk_widget_class_bind_template_child (widget_class, HoneWindow, quantize_page);
}

static void
hone_window_init (HoneWindow *self)
{
  GtkDropTarget *drop;

  gtk_widget_init_template (GTK_WIDGET (self));
  g_action_map_add_action_entries (G_ACTION_MAP (self), win_actions, G_N_ELEMENTS (win_actions), self);

  drop = gtk_drop_target_new (GDK_TYPE_FILE_LIST, GDK_ACTION_COPY);
  g_signal_connect (drop, "drop", G_CALLBACK (on_drop), self);
  gtk_widget_add_controller (GTK_WIDGET (self), GTK_EVENT_CONTROLLER (drop));
  g_signal_connect_swapped (self->chat_page, "request-finished", G_CALLBACK (on_request_finished), self);
}

HoneWindow *
hone_window_new (HoneApplication *application)
{
  HoneWindow *self = g_object_new (HONE_TYPE_WINDOW, "application", application, NULL);
  GSettings *settings = hone_application_get_settings (application);
  HoneEngine *engine = hone_application_get_engine (application);

  self->settings = g_object_ref (settings);
  gtk_window_set_default_size (GTK_WINDOW (self),
                               g_settings_get_int (settings, "window-width"),
                               g_settings_get_int (settings, "window-height"));
  if (g_settings_get_boolean (settings, "window-maximized"))
    gtk_window_maximize (GTK_WINDOW (self));
  hone_chat_page_setup (self->chat_page, engine, hone_application_get_store (application), settings);
  hone_model_page_setup (self->model_page, engine, settings);
  hone_performance_page_set_engine (self->performance_page, engine);
  hone_quantize_page_setup (self->quantize_page, engine, settings);
  return self;
}
