/* hone-model-page.c — see hone-model-page.h. */
#include <inttypes.h>
#include "hone-model-page.h"

#include "hone-error.h"
#include "hone-i18n.h"

#define MAX_RECENT 8

struct _HoneModelPage {
  AdwBin parent_instance;

  HoneEngine *engine;
  GSettings *settings;
  HoneModelInfo *info;
  char *pending_path;            /* card being read */
  GCancellable *info_cancellable;
  GCancellable *load_cancellable;
  GPtrArray *devices;            /* HoneDevice*; the chooser lists "Automatic" first, then these */
  guint auto_index;              /* the one of them "auto" picks */
  GPtrArray *card_rows;          /* rows added for the tensor types */
  gboolean updating_device;

  /* template */
  GtkWidget *stack;
  GtkWidget *recent_group;
  GtkWidget *recent_list;
  GtkWidget *recent_group_empty;
  GtkWidget *recent_list_empty;
  GtkWidget *card_group;
  GtkWidget *architecture_row;
  GtkWidget *params_row;
  GtkWidget *layers_row;
  GtkWidget *context_row;
  GtkWidget *tokenizer_row;
  GtkWidget *template_row;
  GtkWidget *file_row;
  GtkWidget *types_row;
  GtkWidget *state_row;
  GtkWidget *load_button;
  GtkWidget *unload_button;
  GtkWidget *cancel_button;
  GtkWidget *progress_bar;
  GtkWidget *device_row;
  GtkAdjustment *context_adjustment;
  GtkAdjustment *budget_adjustment;
  GtkWidget *int8_kv_switch;
  GtkWidget *speculative_switch;
  GtkWidget *pd_split_switch;
  GtkWidget *int8_kv_row;
  GtkWidget *speculative_row;
  GtkWidget *pd_split_row;
  GtkWidget *estimate_weights_row;
  GtkWidget *estimate_kv_row;
  GtkWidget *estimate_workspace_row;
  GtkWidget *estimate_total_row;
};

G_DEFINE_FINAL_TYPE (HoneModelPage, hone_model_page, ADW_TYPE_BIN)

static void
toast (HoneModelPage *self, const char *message)
{
  g_autofree char *escaped = g_markup_escape_text (message, -1);  /* toast titles are markup */
  GtkWidget *overlay = gtk_widget_get_ancestor (GTK_WIDGET (self), ADW_TYPE_TOAST_OVERLAY);
  if (overlay)
    adw_toast_overlay_add_toast (ADW_TOAST_OVERLAY (overlay), adw_toast_new (escaped));
  else
    g_debug ("%s", message);   /* the window is gone */
}

static void
set_subtitle (GtkWidget *row, const char *text)
{
  g_autofree char *escaped = g_markup_escape_text (text ? text : "—", -1);   /* rows use markup */
  adw_action_row_set_subtitle (ADW_ACTION_ROW (row), escaped);
}

static char *
format_count (gint64 n)
{
  if (n >= 1000000000)
    return g_strdup_printf (_("%.2f billion"), n / 1e9);
  if (n >= 1000000)
    return g_strdup_printf (_("%.1f million"), n / 1e6);
  return g_strdup_printf ("%" PRId64, n);
}

/* ---- recent models -------------------------------------------------------- */

static void
on_recent_activated (GtkListBox *box, GtkListBoxRow *row, HoneModelPage *self)
{
  const char *path = g_object_get_data (G_OBJECT (row), "path");
  if (path)
    hone_model_page_open (self, path);
}

static void
fill_recent (HoneModelPage *self, GtkWidget *group, GtkWidget *list)
{
  g_auto(GStrv) recent = g_settings_get_strv (self->settings, "recent-models");
  GtkWidget *child;

  while ((child = gtk_widget_get_first_child (list)))
    gtk_list_box_remove (GTK_LIST_BOX (list), child);
  for (guint i = 0; recent[i]; i++)
    {
      GtkWidget *row = adw_action_row_new ();
      g_autofree char *base = g_path_get_basename (recent[i]);
      g_autofree char *title = g_markup_escape_text (base, -1);
      g_autofree char *subtitle = g_markup_escape_text (recent[i], -1);
      GtkWidget *icon = gtk_image_new_from_icon_name ("go-next-symbolic");

      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), title);
      adw_action_row_set_subtitle (ADW_ACTION_ROW (row), subtitle);
      adw_action_row_set_subtitle_lines (ADW_ACTION_ROW (row), 1);
      gtk_list_box_row_set_activatable (GTK_LIST_BOX_ROW (row), TRUE);
      adw_action_row_add_suffix (ADW_ACTION_ROW (row), icon);
      g_object_set_data_full (G_OBJECT (row), "path", g_strdup (recent[i]), g_free);
      gtk_list_box_append (GTK_LIST_BOX (list), row);
    }
  gtk_widget_set_visible (group, recent[0] != NULL);
}

static void
update_recent (HoneModelPage *self)
{
  fill_recent (self, self->recent_group, self->recent_list);
  fill_recent (self, self->recent_group_empty, self->recent_list_empty);
}

static void
add_recent (HoneModelPage *self, const char *path)
{
  g_auto(GStrv) recent = g_settings_get_strv (self->settings, "recent-models");
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
  g_auto(GStrv) updated = NULL;
  guint n = 1;

  g_strv_builder_add (builder, path);
  for (guint i = 0; recent[i] && n < MAX_RECENT; i++)
    if (g_strcmp0 (recent[i], path) != 0)
      {
        g_strv_builder_add (builder, recent[i]);
        n++;
      }
  updated = g_strv_builder_end (builder);
  g_settings_set_strv (self->settings, "recent-models", (const char *const *) updated);
}

/* ---- card and estimate ---------------------------------------------------- */

/* The device chosen, or for "Automatic" the one it picks now. */
static HoneDevice *
selected_device (HoneModelPage *self)
{
  guint i = adw_combo_row_get_selected (ADW_COMBO_ROW (self->device_row));

  if (self->devices == NULL || i == GTK_INVALID_LIST_POSITION)
    return NULL;
  i = i == 0 ? self->auto_index : i - 1;
  return i < self->devices->len ? g_ptr_array_index (self->devices, i) : NULL;
}

static void
update_estimate (HoneModelPage *self)
{
  HoneMemoryEstimate est = { 0 };
  g_autofree char *w = NULL, *kv = NULL, *ws = NULL, *total = NULL;
  HoneDevice *device = selected_device (self);

  if (!self->info || !self->engine)
    return;
  hone_model_info_estimate_memory (self->info, (int) gtk_adjustment_get_value (self->context_adjustment),
                                   hone_engine_get_int8_kv (self->engine), &est);
  w = g_format_size (est.weights);
  kv = g_format_size (est.kv_cache);
  ws = g_format_size (est.workspace);
  total = g_format_size (est.total);
  set_subtitle (self->estimate_weights_row, w);
  set_subtitle (self->estimate_kv_row, kv);
  set_subtitle (self->estimate_workspace_row, ws);
  if (device && device->memory_total > 0)
    {
      g_autofree char *avail = g_format_size (device->memory_total);
      g_autofree char *s = NULL;
      if (est.total > device->memory_total)
        /* Translators: "12.3 GB — more than the 8.0 GB this device has" */
        s = g_strdup_printf (_("%s — more than the %s this device has"), total, avail);
      else
        /* Translators: "1.2 GB of 64.0 GB" */
        s = g_strdup_printf (_("%s of %s"), total, avail);
      set_subtitle (self->estimate_total_row, s);
      if (est.total > device->memory_total)
        gtk_widget_add_css_class (self->estimate_total_row, "error");
      else
        gtk_widget_remove_css_class (self->estimate_total_row, "error");
    }
  else
    set_subtitle (self->estimate_total_row, total);
}

static void
show_card (HoneModelPage *self)
{
  HoneModelInfo *info = self->info;
  const HoneTensorTypeCount *types;
  guint n_types = 0;
  g_autofree char *params = NULL, *layers = NULL, *ctx = NULL, *size = NULL, *shape = NULL;

  for (guint i = 0; i < self->card_rows->len; i++)
    adw_expander_row_remove (ADW_EXPANDER_ROW (self->types_row), g_ptr_array_index (self->card_rows, i));
  g_ptr_array_set_size (self->card_rows, 0);

  if (!info)
    {
      gtk_stack_set_visible_child_name (GTK_STACK (self->stack), "empty");
      return;
    }
  adw_preferences_group_set_title (ADW_PREFERENCES_GROUP (self->card_group), hone_model_info_get_name (info));
  set_subtitle (self->architecture_row, hone_model_info_get_architecture (info));
  params = format_count (hone_model_info_get_n_params (info));
  set_subtitle (self->params_row, params);
  layers = g_strdup_printf (_("%d layers · hidden %d · %d heads (%d for keys and values) of %d · FFN %d · vocabulary %d"),
                            hone_model_info_get_n_layers (info), hone_model_info_get_hidden_size (info),
                            hone_model_info_get_n_heads (info), hone_model_info_get_n_kv_heads (info),
                            hone_model_info_get_head_dim (info), hone_model_info_get_ffn_size (info),
                            hone_model_info_get_vocab_size (info));
  set_subtitle (self->layers_row, layers);
  ctx = g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%d token", "%d tokens",
                                      hone_model_info_get_context_length (info)),
                         hone_model_info_get_context_length (info));
  set_subtitle (self->context_row, ctx);
  set_subtitle (self->tokenizer_row, hone_model_info_get_tokenizer_kind (info));
  set_subtitle (self->template_row, hone_model_info_get_has_chat_template (info) ? _("Present") : _("None — chat is not available"));
  /* the path in a row, whose subtitle wraps: in the group's header it ran
   * under the Load/Unload buttons */
  size = g_format_size (hone_model_info_get_file_size (info));
  {
    g_autofree char *file = g_strdup_printf ("%s · %s", size, hone_model_info_get_path (info));
    set_subtitle (self->file_row, file);
  }

  types = hone_model_info_get_tensor_types (info, &n_types);
  {
    GString *summary = g_string_new (NULL);
    for (guint i = 0; i < n_types; i++)
      {
        GtkWidget *row = adw_action_row_new ();
        g_autofree char *bytes = g_format_size (types[i].bytes);
        g_autofree char *sub = g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%d tensor, %s", "%d tensors, %s",
                                                             types[i].count), types[i].count, bytes);
        adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), types[i].type_name);
        set_subtitle (row, sub);
        adw_expander_row_add_row (ADW_EXPANDER_ROW (self->types_row), row);
        g_ptr_array_add (self->card_rows, row);
        g_string_append_printf (summary, "%s%s", i ? ", " : "", types[i].type_name);
      }
    adw_expander_row_set_subtitle (ADW_EXPANDER_ROW (self->types_row), summary->str);
    g_string_free (summary, TRUE);
  }

  /* The context cannot exceed what the model was trained for. */
  if (hone_model_info_get_context_length (info) > 0)
    {
      gtk_adjustment_set_upper (self->context_adjustment, hone_model_info_get_context_length (info));
      if (gtk_adjustment_get_value (self->context_adjustment) > hone_model_info_get_context_length (info))
        gtk_adjustment_set_value (self->context_adjustment, hone_model_info_get_context_length (info));
    }
  gtk_stack_set_visible_child_name (GTK_STACK (self->stack), "model");
  update_estimate (self);
}

static void
on_info_ready (GObject *source, GAsyncResult *result, gpointer user_data)
{
  HoneModelPage *self = user_data;
  g_autoptr(GError) error = NULL;
  HoneModelInfo *info = hone_model_info_new_for_path_finish (result, &error);

  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    {
      g_object_unref (self);
      return;
    }
  if (!info)
    {
      g_autofree char *msg = g_strdup_printf (_("Could not read the model: %s"), error->message);
      toast (self, msg);
    }
  else
    {
      g_clear_object (&self->info);
      self->info = info;
      add_recent (self, hone_model_info_get_path (info));
      show_card (self);
      if (g_object_steal_data (G_OBJECT (self), "hone-auto-load"))
        hone_model_page_load (self);
    }
  g_clear_object (&self->info_cancellable);
  g_object_unref (self);
}

void
hone_model_page_open (HoneModelPage *self, const char *path)
{
  g_return_if_fail (HONE_IS_MODEL_PAGE (self));
  if (self->info_cancellable)
    g_cancellable_cancel (self->info_cancellable);
  g_clear_object (&self->info_cancellable);
  self->info_cancellable = g_cancellable_new ();
  hone_model_info_new_for_path_async (path, self->info_cancellable, on_info_ready, g_object_ref (self));
}

HoneModelInfo *
hone_model_page_get_info (HoneModelPage *self)
{
  return self->info;
}

/* ---- load / unload -------------------------------------------------------- */

static void
update_state (HoneModelPage *self)
{
  HoneEngineState state = hone_engine_get_state (self->engine);
  const char *loaded = hone_engine_get_model_path (self->engine);
  gboolean shown_is_loaded = loaded && self->info && g_strcmp0 (loaded, hone_model_info_get_path (self->info)) == 0;
  gboolean loading = self->load_cancellable != NULL || state == HONE_ENGINE_STATE_LOADING;
  g_autofree char *text = NULL;

  switch (state)
    {
    case HONE_ENGINE_STATE_LOADING:
      text = g_strdup (_("Loading…"));
      break;
    case HONE_ENGINE_STATE_READY:
    case HONE_ENGINE_STATE_BUSY:
      {
        g_autofree char *base = g_path_get_basename (loaded ? loaded : "");
        g_autofree char *active = NULL;
        g_object_get (self->engine, "active-device", &active, NULL);
        /* Translators: "model.gguf, on cpu, 4096 tokens of context" */
        text = g_strdup_printf (_("%s, on %s, %d tokens of context"), base, active ? active : "cpu",
                                hone_engine_get_active_context_length (self->engine));
      }
      break;
    case HONE_ENGINE_STATE_EMPTY:
    default:
      text = g_strdup (_("No model loaded"));
    }
  set_subtitle (self->state_row, text);
  gtk_widget_set_visible (self->progress_bar, loading);
  gtk_widget_set_visible (self->cancel_button, loading);
  gtk_widget_set_visible (self->load_button, !loading);
  gtk_widget_set_sensitive (self->load_button, self->info != NULL);
  gtk_button_set_label (GTK_BUTTON (self->load_button), shown_is_loaded ? _("_Reload") : _("_Load"));
  gtk_widget_set_visible (self->unload_button, !loading && loaded != NULL);
}

static void
update_capabilities (HoneModelPage *self)
{
  HoneEngineCaps caps = hone_engine_get_capabilities (self->engine);
  HoneDevice *device = selected_device (self);
  g_autofree char *why = g_strdup_printf (_("Not supported on %s"), device ? device->name : hone_engine_get_device (self->engine));
  struct { GtkWidget *row, *sw; HoneEngineCaps cap; } rows[] = {
    { self->int8_kv_row, self->int8_kv_switch, HONE_ENGINE_CAP_INT8_KV },
    { self->speculative_row, self->speculative_switch, HONE_ENGINE_CAP_SPECULATIVE },
    { self->pd_split_row, self->pd_split_switch, HONE_ENGINE_CAP_PD_SPLIT },
  };

  /* A switch the backend cannot honour is insensitive and says why, rather
   * than a switch that silently does nothing. */
  for (guint i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      gboolean ok = (caps & rows[i].cap) != 0;
      gtk_widget_set_sensitive (rows[i].sw, ok);
      gtk_widget_set_tooltip_text (rows[i].row, ok ? NULL : why);
      gtk_widget_set_tooltip_text (rows[i].sw, ok ? NULL : why);
      gtk_accessible_update_property (GTK_ACCESSIBLE (rows[i].sw), GTK_ACCESSIBLE_PROPERTY_DESCRIPTION,
                                      ok ? "" : why, -1);
    }
}

static void
on_progress (double fraction, gpointer user_data)
{
  HoneModelPage *self = user_data;
  gtk_progress_bar_set_fraction (GTK_PROGRESS_BAR (self->progress_bar), CLAMP (fraction, 0, 1));
}

static void
on_load_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  HoneModelPage *self = user_data;
  g_autoptr(GError) error = NULL;

  g_clear_object (&self->load_cancellable);
  if (!hone_engine_load_finish (HONE_ENGINE (source), result, &error))
    {
      if (g_error_matches (error, HONE_ERROR, HONE_ERROR_CANCELLED) ||
          g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        toast (self, _("Loading cancelled"));
      else if (gtk_widget_get_root (GTK_WIDGET (self)))
        {
          /* Fatal for this load: say so plainly; the app stays as it was. */
          GtkWidget *dialog = adw_message_dialog_new (GTK_WINDOW (gtk_widget_get_root (GTK_WIDGET (self))),
                                                      _("Could Not Load the Model"), error->message);
          adw_message_dialog_add_response (ADW_MESSAGE_DIALOG (dialog), "close", _("_Close"));
          gtk_window_present (GTK_WINDOW (dialog));
        }
    }
  else
    toast (self, _("Model loaded"));
  update_state (self);
  g_object_unref (self);
}

void
hone_model_page_load (HoneModelPage *self)
{
  if (!self->info || self->load_cancellable)
    return;
  self->load_cancellable = g_cancellable_new ();
  gtk_progress_bar_set_fraction (GTK_PROGRESS_BAR (self->progress_bar), 0);
  hone_engine_load_async (self->engine, hone_model_info_get_path (self->info),
                          on_progress, g_object_ref (self), g_object_unref,
                          self->load_cancellable, on_load_done, g_object_ref (self));
  update_state (self);
}

void
hone_model_page_cancel_load (HoneModelPage *self)
{
  if (self->load_cancellable)
    g_cancellable_cancel (self->load_cancellable);
}

static void
on_unload_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  HoneModelPage *self = user_data;
  g_autoptr(GError) error = NULL;

  if (!hone_engine_unload_finish (HONE_ENGINE (source), result, &error))
    toast (self, error->message);
  update_state (self);
  g_object_unref (self);
}

void
hone_model_page_unload (HoneModelPage *self)
{
  hone_engine_unload_async (self->engine, NULL, on_unload_done, g_object_ref (self));
}

static void
load_action (GtkWidget *widget, const char *name, GVariant *param)
{
  hone_model_page_load (HONE_MODEL_PAGE (widget));
}

static void
unload_action (GtkWidget *widget, const char *name, GVariant *param)
{
  hone_model_page_unload (HONE_MODEL_PAGE (widget));
}

static void
cancel_action (GtkWidget *widget, const char *name, GVariant *param)
{
  hone_model_page_cancel_load (HONE_MODEL_PAGE (widget));
}

/* ---- options -------------------------------------------------------------- */

static void
on_device_selected (HoneModelPage *self)
{
  HoneDevice *device = selected_device (self);
  const char *id;

  if (!device || self->updating_device)
    return;
  id = adw_combo_row_get_selected (ADW_COMBO_ROW (self->device_row)) == 0 ? "auto" : device->id;
  hone_engine_set_device (self->engine, id);
  g_settings_set_string (self->settings, "device", id);
  update_capabilities (self);
  update_estimate (self);
}

static gboolean
bytes_to_mib (GBinding *binding, const GValue *from, GValue *to, gpointer data)
{
  g_value_set_double (to, (double) (g_value_get_int64 (from) / (1024 * 1024)));
  return TRUE;
}

static gboolean
mib_to_bytes (GBinding *binding, const GValue *from, GValue *to, gpointer data)
{
  g_value_set_int64 (to, (gint64) g_value_get_double (from) * 1024 * 1024);
  return TRUE;
}

GtkWidget *
hone_model_page_get_option_switch (HoneModelPage *self, const char *option)
{
  if (g_strcmp0 (option, "int8-kv") == 0)
    return self->int8_kv_switch;
  if (g_strcmp0 (option, "speculative") == 0)
    return self->speculative_switch;
  if (g_strcmp0 (option, "pd-split") == 0)
    return self->pd_split_switch;
  return NULL;
}

static void
hone_model_page_dispose (GObject *object)
{
  HoneModelPage *self = HONE_MODEL_PAGE (object);

  if (self->info_cancellable)
    g_cancellable_cancel (self->info_cancellable);
  g_clear_object (&self->info_cancellable);
  if (self->engine)
    g_signal_handlers_disconnect_by_data (self->engine, self);
  if (self->settings)
    g_signal_handlers_disconnect_by_data (self->settings, self);
  g_clear_object (&self->engine);
  g_clear_object (&self->settings);
  g_clear_object (&self->info);
  g_clear_object (&self->load_cancellable);
  g_clear_pointer (&self->devices, g_ptr_array_unref);
  G_OBJECT_CLASS (hone_model_page_parent_class)->dispose (object);
}

static void
hone_model_page_finalize (GObject *object)
{
  HoneModelPage *self = HONE_MODEL_PAGE (object);

  g_ptr_array_unref (self->card_rows);
  g_free (self->pending_path);
  G_OBJECT_CLASS (hone_model_page_parent_class)->finalize (object);
}

static void
hone_model_page_class_init (HoneModelPageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = hone_model_page_dispose;
  object_class->finalize = hone_model_page_finalize;

  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hone/Hone/hone-model-page.ui");
#define CHILD(name) gtk_widget_class_bind_template_child (widget_class, HoneModelPage, name)
  CHILD (stack);
  CHILD (recent_group);
  CHILD (recent_list);
  CHILD (recent_group_empty);
  CHILD (recent_list_empty);
  CHILD (card_group);
  CHILD (architecture_row);
  CHILD (params_row);
  CHILD (layers_row);
  CHILD (context_row);
  CHILD (tokenizer_row);
  CHILD (template_row);
  CHILD (file_row);
  CHILD (types_row);
  CHILD (state_row);
  CHILD (load_button);
  CHILD (unload_button);
  CHILD (cancel_button);
  CHILD (progress_bar);
  CHILD (device_row);
  CHILD (context_adjustment);
  CHILD (budget_adjustment);
  CHILD (int8_kv_switch);
  CHILD (speculative_switch);
  CHILD (pd_split_switch);
  CHILD (int8_kv_row);
  CHILD (speculative_row);
  CHILD (pd_split_row);
  CHILD (estimate_weights_row);
  CHILD (estimate_kv_row);
  CHILD (estimate_workspace_row);
  CHILD (estimate_total_row);
#undef CHILD
  gtk_widget_class_bind_template_callback (widget_class, on_recent_activated);
  gtk_widget_class_bind_template_callback (widget_class, on_device_selected);
  gtk_widget_class_bind_template_callback (widget_class, update_estimate);

  gtk_widget_class_install_action (widget_class, "model.load", NULL, load_action);
  gtk_widget_class_install_action (widget_class, "model.unload", NULL, unload_action);
  gtk_widget_class_install_action (widget_class, "model.cancel", NULL, cancel_action);
}

static void
hone_model_page_init (HoneModelPage *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  self->card_rows = g_ptr_array_new ();
}

GtkWidget *
hone_model_page_new (void)
{
  return g_object_new (HONE_TYPE_MODEL_PAGE, NULL);
}

void
hone_model_page_setup (HoneModelPage *self, HoneEngine *engine, GSettings *settings)
{
  g_autoptr(GtkStringList) names = gtk_string_list_new (NULL);
  g_autofree char *picked = NULL;
  const char *current;
  guint selected = 0;

  g_set_object (&self->engine, engine);
  g_set_object (&self->settings, settings);

  self->devices = hone_engine_list_devices ();
  current = hone_engine_get_device (engine);
  picked = hone_engine_pick_device ("auto", NULL);
  for (guint i = 0; i < self->devices->len; i++)
    if (g_strcmp0 (((HoneDevice *) g_ptr_array_index (self->devices, i))->id, picked) == 0)
      self->auto_index = i;
  {
    /* Translators: the device chooser's first entry, with the device it picks now: "Automatic (NVIDIA H200)" */
    g_autofree char *automatic = g_strdup_printf (_("Automatic (%s)"),
        ((HoneDevice *) g_ptr_array_index (self->devices, self->auto_index))->name);
    gtk_string_list_append (names, automatic);
  }
  for (guint i = 0; i < self->devices->len; i++)
    {
      HoneDevice *d = g_ptr_array_index (self->devices, i);
      gtk_string_list_append (names, d->name);
      if (g_strcmp0 (d->id, current) == 0)
        selected = i + 1;
    }
  self->updating_device = TRUE;
  adw_combo_row_set_model (ADW_COMBO_ROW (self->device_row), G_LIST_MODEL (names));
  adw_combo_row_set_selected (ADW_COMBO_ROW (self->device_row), selected);
  self->updating_device = FALSE;

  g_object_bind_property (engine, "context-length", self->context_adjustment, "value",
                          G_BINDING_SYNC_CREATE | G_BINDING_BIDIRECTIONAL);
  g_object_bind_property_full (engine, "memory-budget", self->budget_adjustment, "value",
                               G_BINDING_SYNC_CREATE | G_BINDING_BIDIRECTIONAL,
                               bytes_to_mib, mib_to_bytes, NULL, NULL);
  g_object_bind_property (engine, "int8-kv", self->int8_kv_switch, "active",
                          G_BINDING_SYNC_CREATE | G_BINDING_BIDIRECTIONAL);
  g_object_bind_property (engine, "speculative", self->speculative_switch, "active",
                          G_BINDING_SYNC_CREATE | G_BINDING_BIDIRECTIONAL);
  g_object_bind_property (engine, "pd-split", self->pd_split_switch, "active",
                          G_BINDING_SYNC_CREATE | G_BINDING_BIDIRECTIONAL);
  g_signal_connect_swapped (engine, "notify::int8-kv", G_CALLBACK (update_estimate), self);
  g_signal_connect_swapped (engine, "notify::state", G_CALLBACK (update_state), self);
  g_signal_connect_swapped (engine, "notify::model-path", G_CALLBACK (update_state), self);
  g_signal_connect_swapped (engine, "notify::capabilities", G_CALLBACK (update_capabilities), self);
  g_signal_connect_swapped (settings, "changed::recent-models", G_CALLBACK (update_recent), self);
  update_recent (self);
  update_capabilities (self);
  update_state (self);
}

GtkWidget *
hone_model_page_get_device_row (HoneModelPage *self)
{
  g_return_val_if_fail (HONE_IS_MODEL_PAGE (self), NULL);
  return self->device_row;
}
