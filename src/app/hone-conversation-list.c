/* hone-conversation-list.c — see hone-conversation-list.h. */
#include "hone-conversation-list.h"

#include "hone-i18n.h"

struct _HoneConversationList {
  AdwBin parent_instance;
  HoneConversationStore *store;
  HoneConversation *selected;

  GtkWidget *list_box;
};

G_DEFINE_FINAL_TYPE (HoneConversationList, hone_conversation_list, ADW_TYPE_BIN)

enum { PROP_0, PROP_SELECTED, N_PROPS };
static GParamSpec *props[N_PROPS];
enum { SIGNAL_NEW_REQUESTED, N_SIGNALS };
static guint signals[N_SIGNALS];

static void
toast (HoneConversationList *self, const char *message)
{
  g_autofree char *escaped = g_markup_escape_text (message, -1);  /* toast titles are markup */
  GtkWidget *overlay = gtk_widget_get_ancestor (GTK_WIDGET (self), ADW_TYPE_TOAST_OVERLAY);
  if (overlay)
    adw_toast_overlay_add_toast (ADW_TOAST_OVERLAY (overlay), adw_toast_new (escaped));
  else
    g_warning ("%s", message);
}

static gboolean
updated_to_label (GBinding *binding, const GValue *from, GValue *to, gpointer user_data)
{
  gint64 updated = g_value_get_int64 (from);
  g_autoptr(GDateTime) dt = g_date_time_new_from_unix_local (updated / G_USEC_PER_SEC);
  g_autoptr(GDateTime) now = g_date_time_new_now_local ();

  if (!dt)
    g_value_set_string (to, "");
  else if (g_date_time_get_year (dt) == g_date_time_get_year (now) &&
           g_date_time_get_day_of_year (dt) == g_date_time_get_day_of_year (now))
    g_value_take_string (to, g_date_time_format (dt, "%H:%M"));
  else
    g_value_take_string (to, g_date_time_format (dt, "%x"));
  return TRUE;
}

static GtkWidget *
create_row (gpointer item, gpointer user_data)
{
  HoneConversation *conversation = item;
  GtkWidget *row = gtk_list_box_row_new ();
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 2);
  GtkWidget *title = gtk_label_new (NULL);
  GtkWidget *date = gtk_label_new (NULL);

  gtk_label_set_xalign (GTK_LABEL (title), 0);
  gtk_label_set_ellipsize (GTK_LABEL (title), PANGO_ELLIPSIZE_END);
  gtk_label_set_xalign (GTK_LABEL (date), 0);
  gtk_widget_add_css_class (date, "caption");
  gtk_widget_add_css_class (date, "dim-label");
  g_object_bind_property (conversation, "title", title, "label", G_BINDING_SYNC_CREATE);
  g_object_bind_property_full (conversation, "updated", date, "label", G_BINDING_SYNC_CREATE,
                               updated_to_label, NULL, NULL, NULL);
  gtk_box_append (GTK_BOX (box), title);
  gtk_box_append (GTK_BOX (box), date);
  gtk_list_box_row_set_child (GTK_LIST_BOX_ROW (row), box);
  g_object_set_data_full (G_OBJECT (row), "conversation", g_object_ref (conversation), g_object_unref);
  g_object_bind_property (conversation, "title", row, "tooltip-text", G_BINDING_SYNC_CREATE);
  return row;
}

static void
on_row_selected (HoneConversationList *self, GtkListBoxRow *row)
{
  HoneConversation *c = row ? g_object_get_data (G_OBJECT (row), "conversation") : NULL;

  if (c == self->selected)
    return;
  g_set_object (&self->selected, c);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "conversations.rename", c != NULL);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "conversations.delete", c != NULL);
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_SELECTED]);
}

void
hone_conversation_list_rename (HoneConversationList *self, HoneConversation *conversation,
                               const char *title)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *clean = g_strstrip (g_strdup (title ? title : ""));

  if (!*clean)
    return;
  hone_conversation_set_title (conversation, clean);
  if (hone_conversation_get_n_messages (conversation) > 0 &&
      !hone_conversation_store_save (self->store, conversation, &error))
    toast (self, error->message);
}

void
hone_conversation_list_delete (HoneConversationList *self, HoneConversation *conversation)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneConversation) keep = g_object_ref (conversation);
  GListModel *model = hone_conversation_store_get_model (self->store);
  guint pos = 0;
  gboolean was_selected = conversation == self->selected;

  g_list_store_find (G_LIST_STORE (model), conversation, &pos);
  if (!hone_conversation_store_remove (self->store, conversation, &error))
    toast (self, error->message);
  if (was_selected)
    {
      guint n = g_list_model_get_n_items (model);
      if (n > 0)
        {
          g_autoptr(HoneConversation) next = g_list_model_get_item (model, MIN (pos, n - 1));
          hone_conversation_list_select (self, next);
        }
      else
        on_row_selected (self, NULL);
    }
}

static void
on_rename_response (AdwMessageDialog *dialog, const char *response, HoneConversationList *self)
{
  HoneConversation *c = g_object_get_data (G_OBJECT (dialog), "conversation");
  GtkEditable *entry = g_object_get_data (G_OBJECT (dialog), "entry");

  if (g_strcmp0 (response, "rename") == 0)
    hone_conversation_list_rename (self, c, gtk_editable_get_text (entry));
}

static void
on_rename_entry_activate (GtkEntry *entry, AdwMessageDialog *dialog)
{
  adw_message_dialog_response (dialog, "rename");
  gtk_window_close (GTK_WINDOW (dialog));
}

static void
rename_action (GtkWidget *widget, const char *action_name, GVariant *parameter)
{
  HoneConversationList *self = HONE_CONVERSATION_LIST (widget);
  GtkWidget *dialog, *entry;

  if (!self->selected)
    return;
  dialog = adw_message_dialog_new (GTK_WINDOW (gtk_widget_get_root (widget)), _("Rename Chat"), NULL);
  entry = gtk_entry_new ();
  gtk_editable_set_text (GTK_EDITABLE (entry), hone_conversation_get_title (self->selected));
  gtk_accessible_update_property (GTK_ACCESSIBLE (entry), GTK_ACCESSIBLE_PROPERTY_LABEL, _("Chat name"), -1);
  adw_message_dialog_set_extra_child (ADW_MESSAGE_DIALOG (dialog), entry);
  adw_message_dialog_add_responses (ADW_MESSAGE_DIALOG (dialog),
                                    "cancel", _("_Cancel"), "rename", _("_Rename"), NULL);
  adw_message_dialog_set_response_appearance (ADW_MESSAGE_DIALOG (dialog), "rename", ADW_RESPONSE_SUGGESTED);
  adw_message_dialog_set_default_response (ADW_MESSAGE_DIALOG (dialog), "rename");
  adw_message_dialog_set_close_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
  g_object_set_data_full (G_OBJECT (dialog), "conversation", g_object_ref (self->selected), g_object_unref);
  g_object_set_data (G_OBJECT (dialog), "entry", entry);
  g_signal_connect (entry, "activate", G_CALLBACK (on_rename_entry_activate), dialog);
  g_signal_connect (dialog, "response", G_CALLBACK (on_rename_response), self);
  gtk_window_present (GTK_WINDOW (dialog));
  gtk_widget_grab_focus (entry);
}

static void
on_delete_response (AdwMessageDialog *dialog, const char *response, HoneConversationList *self)
{
  HoneConversation *c = g_object_get_data (G_OBJECT (dialog), "conversation");

  if (g_strcmp0 (response, "delete") == 0)
    hone_conversation_list_delete (self, c);
}

static void
delete_action (GtkWidget *widget, const char *action_name, GVariant *parameter)
{
  HoneConversationList *self = HONE_CONVERSATION_LIST (widget);
  GtkWidget *dialog;

  if (!self->selected)
    return;
  dialog = adw_message_dialog_new (GTK_WINDOW (gtk_widget_get_root (widget)), _("Delete Chat?"), NULL);
  adw_message_dialog_format_body (ADW_MESSAGE_DIALOG (dialog),
                                  _("“%s” and all its messages will be deleted for good."),
                                  hone_conversation_get_title (self->selected));
  adw_message_dialog_add_responses (ADW_MESSAGE_DIALOG (dialog),
                                    "cancel", _("_Cancel"), "delete", _("_Delete"), NULL);
  adw_message_dialog_set_response_appearance (ADW_MESSAGE_DIALOG (dialog), "delete", ADW_RESPONSE_DESTRUCTIVE);
  adw_message_dialog_set_default_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
  adw_message_dialog_set_close_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
  g_object_set_data_full (G_OBJECT (dialog), "conversation", g_object_ref (self->selected), g_object_unref);
  g_signal_connect (dialog, "response", G_CALLBACK (on_delete_response), self);
  gtk_window_present (GTK_WINDOW (dialog));
}

static void
new_action (GtkWidget *widget, const char *action_name, GVariant *parameter)
{
  g_signal_emit (widget, signals[SIGNAL_NEW_REQUESTED], 0);
}

static void
hone_conversation_list_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  HoneConversationList *self = HONE_CONVERSATION_LIST (object);

  switch (prop_id)
    {
    case PROP_SELECTED: g_value_set_object (value, self->selected); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
hone_conversation_list_dispose (GObject *object)
{
  HoneConversationList *self = HONE_CONVERSATION_LIST (object);

  g_clear_object (&self->selected);
  g_clear_object (&self->store);
  G_OBJECT_CLASS (hone_conversation_list_parent_class)->dispose (object);
}

static void
hone_conversation_list_class_init (HoneConversationListClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = hone_conversation_list_dispose;
  object_class->get_property = hone_conversation_list_get_property;
  props[PROP_SELECTED] = g_param_spec_object ("selected", NULL, NULL, HONE_TYPE_CONVERSATION,
                                              G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, props);
  signals[SIGNAL_NEW_REQUESTED] = g_signal_new ("new-requested", G_TYPE_FROM_CLASS (klass),
                                                G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 0);

  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hone/Hone/hone-conversation-list.ui");
  gtk_widget_class_bind_template_child (widget_class, HoneConversationList, list_box);
  gtk_widget_class_bind_template_callback (widget_class, on_row_selected);

  gtk_widget_class_install_action (widget_class, "conversations.new", NULL, new_action);
  gtk_widget_class_install_action (widget_class, "conversations.rename", NULL, rename_action);
  gtk_widget_class_install_action (widget_class, "conversations.delete", NULL, delete_action);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_F2, 0, "conversations.rename", NULL);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_Delete, 0, "conversations.delete", NULL);
}

static void
hone_conversation_list_init (HoneConversationList *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "conversations.rename", FALSE);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "conversations.delete", FALSE);
}

GtkWidget *
hone_conversation_list_new (void)
{
  return g_object_new (HONE_TYPE_CONVERSATION_LIST, NULL);
}

void
hone_conversation_list_set_store (HoneConversationList *self, HoneConversationStore *store)
{
  g_set_object (&self->store, store);
  gtk_list_box_bind_model (GTK_LIST_BOX (self->list_box),
                           store ? hone_conversation_store_get_model (store) : NULL,
                           create_row, self, NULL);
}

HoneConversation *
hone_conversation_list_get_selected (HoneConversationList *self)
{
  return self->selected;
}

void
hone_conversation_list_select (HoneConversationList *self, HoneConversation *conversation)
{
  GListModel *model = hone_conversation_store_get_model (self->store);
  guint pos;

  if (conversation && g_list_store_find (G_LIST_STORE (model), conversation, &pos))
    gtk_list_box_select_row (GTK_LIST_BOX (self->list_box),
                             gtk_list_box_get_row_at_index (GTK_LIST_BOX (self->list_box), pos));
  else
    gtk_list_box_unselect_all (GTK_LIST_BOX (self->list_box));
}
