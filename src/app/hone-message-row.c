/* hone-message-row.c — see hone-message-row.h. */
#include "hone-message-row.h"

#include "hone-i18n.h"
#include "hone-markdown.h"

struct _HoneMessageRow {
  AdwBin parent_instance;
  HoneMessage *message;
  gboolean show_stats;
  gboolean can_regenerate;
  GPtrArray *block_widgets;     /* GtkWidget* per Markdown block, in order */
  GArray *block_kinds;          /* HoneMarkdownKind per widget */

  /* template */
  GtkWidget *bubble;
  GtkWidget *role_label;
  GtkWidget *content_box;
  GtkWidget *stats_label;
  GtkWidget *copy_button;
  GtkWidget *edit_button;
  GtkWidget *regenerate_button;
  GtkWidget *spinner;
};

G_DEFINE_FINAL_TYPE (HoneMessageRow, hone_message_row, ADW_TYPE_BIN)

enum { SIGNAL_EDIT, SIGNAL_REGENERATE, N_SIGNALS };
static guint signals[N_SIGNALS];

char *
hone_message_row_format_stats (HoneMessage *message)
{
  double ttft, tps;
  int tokens, prompt;
  g_autofree char *ttft_s = NULL, *tps_s = NULL, *tok_s = NULL;

  hone_message_get_stats (message, &ttft, &tps, &tokens, &prompt);
  /* Translators: time to first token, e.g. "120 ms to first token" */
  ttft_s = g_strdup_printf (_("%.0f ms to first token"), ttft);
  /* Translators: decode speed */
  tps_s = g_strdup_printf (_("%.1f tokens/s"), tps);
  tok_s = g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%d token", "%d tokens", tokens), tokens);
  return g_strjoin (" · ", ttft_s, tps_s, tok_s, NULL);
}

static void
copy_text (GtkWidget *widget, const char *text)
{
  gdk_clipboard_set_text (gtk_widget_get_clipboard (widget), text);
}

static void
on_code_copy (GtkButton *button, gpointer user_data)
{
  const char *code = g_object_get_data (G_OBJECT (button), "code");
  GtkWidget *toast_overlay = gtk_widget_get_ancestor (GTK_WIDGET (button), ADW_TYPE_TOAST_OVERLAY);

  copy_text (GTK_WIDGET (button), code ? code : "");
  if (toast_overlay)
    adw_toast_overlay_add_toast (ADW_TOAST_OVERLAY (toast_overlay), adw_toast_new (_("Code copied")));
}

static GtkWidget *
code_block_new (void)
{
  GtkWidget *frame = gtk_box_new (GTK_ORIENTATION_VERTICAL, 0);
  GtkWidget *header = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  GtkWidget *lang = gtk_label_new (NULL);
  GtkWidget *copy = gtk_button_new_from_icon_name ("edit-copy-symbolic");
  GtkWidget *scroller = gtk_scrolled_window_new ();
  GtkWidget *label = gtk_label_new (NULL);

  gtk_widget_add_css_class (frame, "code-block");
  gtk_widget_add_css_class (frame, "card");
  gtk_widget_add_css_class (header, "code-header");
  gtk_widget_add_css_class (lang, "dim-label");
  gtk_widget_add_css_class (lang, "caption");
  gtk_label_set_xalign (GTK_LABEL (lang), 0);
  gtk_widget_set_hexpand (lang, TRUE);
  gtk_widget_add_css_class (copy, "flat");
  gtk_widget_set_tooltip_text (copy, _("Copy Code"));
  gtk_accessible_update_property (GTK_ACCESSIBLE (copy), GTK_ACCESSIBLE_PROPERTY_LABEL, _("Copy code"), -1);
  g_signal_connect (copy, "clicked", G_CALLBACK (on_code_copy), NULL);
  gtk_box_append (GTK_BOX (header), lang);
  gtk_box_append (GTK_BOX (header), copy);

  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_label_set_yalign (GTK_LABEL (label), 0);
  gtk_label_set_selectable (GTK_LABEL (label), TRUE);
  gtk_widget_add_css_class (label, "monospace");
  gtk_widget_add_css_class (label, "code");
  gtk_accessible_update_property (GTK_ACCESSIBLE (label), GTK_ACCESSIBLE_PROPERTY_LABEL, _("Code"), -1);
  gtk_scrolled_window_set_policy (GTK_SCROLLED_WINDOW (scroller), GTK_POLICY_AUTOMATIC, GTK_POLICY_NEVER);
  gtk_scrolled_window_set_propagate_natural_height (GTK_SCROLLED_WINDOW (scroller), TRUE);
  gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (scroller), label);

  gtk_box_append (GTK_BOX (frame), header);
  gtk_box_append (GTK_BOX (frame), scroller);
  g_object_set_data (G_OBJECT (frame), "lang", lang);
  g_object_set_data (G_OBJECT (frame), "label", label);
  g_object_set_data (G_OBJECT (frame), "copy", copy);
  return frame;
}

static void
code_block_update (GtkWidget *frame, const HoneMarkdownBlock *block)
{
  GtkLabel *lang = g_object_get_data (G_OBJECT (frame), "lang");
  GtkLabel *label = g_object_get_data (G_OBJECT (frame), "label");
  GObject *copy = g_object_get_data (G_OBJECT (frame), "copy");

  gtk_label_set_text (lang, block->language && *block->language ? block->language : _("Code"));
  if (g_strcmp0 (gtk_label_get_text (label), block->text) != 0)
    gtk_label_set_text (label, block->text);
  g_object_set_data_full (copy, "code", g_strdup (block->text), g_free);
}

static GtkWidget *
text_block_new (void)
{
  GtkWidget *label = gtk_label_new (NULL);

  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_label_set_wrap (GTK_LABEL (label), TRUE);
  gtk_label_set_wrap_mode (GTK_LABEL (label), PANGO_WRAP_WORD_CHAR);
  gtk_label_set_selectable (GTK_LABEL (label), TRUE);
  gtk_label_set_use_markup (GTK_LABEL (label), TRUE);
  gtk_widget_add_css_class (label, "message-text");
  return label;
}

static void
update_content (HoneMessageRow *self)
{
  g_autoptr(GPtrArray) blocks = hone_markdown_parse (hone_message_get_content (self->message));
  guint i;

  /* Reuse widgets while the block kinds match, so streaming only updates the
   * last block instead of rebuilding the whole message per token. */
  for (i = 0; i < blocks->len; i++)
    {
      HoneMarkdownBlock *b = g_ptr_array_index (blocks, i);
      GtkWidget *w;

      if (i < self->block_widgets->len && g_array_index (self->block_kinds, int, i) != (int) b->kind)
        {
          while (self->block_widgets->len > i)
            {
              gtk_box_remove (GTK_BOX (self->content_box),
                              g_ptr_array_index (self->block_widgets, self->block_widgets->len - 1));
              g_ptr_array_remove_index (self->block_widgets, self->block_widgets->len - 1);
              g_array_set_size (self->block_kinds, self->block_widgets->len);
            }
        }
      if (i >= self->block_widgets->len)
        {
          int kind = b->kind;
          w = b->kind == HONE_MARKDOWN_CODE ? code_block_new () : text_block_new ();
          gtk_box_append (GTK_BOX (self->content_box), w);
          g_ptr_array_add (self->block_widgets, w);
          g_array_append_val (self->block_kinds, kind);
        }
      w = g_ptr_array_index (self->block_widgets, i);
      if (b->kind == HONE_MARKDOWN_CODE)
        code_block_update (w, b);
      else if (g_strcmp0 (gtk_label_get_label (GTK_LABEL (w)), b->text) != 0)
        gtk_label_set_markup (GTK_LABEL (w), b->text);
    }
  while (self->block_widgets->len > blocks->len)
    {
      gtk_box_remove (GTK_BOX (self->content_box),
                      g_ptr_array_index (self->block_widgets, self->block_widgets->len - 1));
      g_ptr_array_remove_index (self->block_widgets, self->block_widgets->len - 1);
    }
  g_array_set_size (self->block_kinds, self->block_widgets->len);
}

static void
update_state (HoneMessageRow *self)
{
  HoneMessageState state = hone_message_get_state (self->message);
  gboolean assistant = g_strcmp0 (hone_message_get_role (self->message), "assistant") == 0;
  gboolean streaming = state == HONE_MESSAGE_STREAMING;
  g_autoptr(GString) stats = g_string_new (NULL);

  gtk_widget_set_visible (self->spinner, streaming);
  gtk_spinner_set_spinning (GTK_SPINNER (self->spinner), streaming);
  gtk_widget_set_visible (self->edit_button, !assistant && !streaming);
  gtk_widget_set_visible (self->regenerate_button, assistant && !streaming && self->can_regenerate);
  gtk_widget_set_visible (self->copy_button, !streaming);

  if (state == HONE_MESSAGE_STOPPED)
    g_string_append (stats, _("Stopped"));
  else if (state == HONE_MESSAGE_FAILED)
    g_string_append (stats, _("Failed"));
  else if (state == HONE_MESSAGE_DONE && hone_message_get_cut (self->message) == HONE_MESSAGE_CUT_LENGTH)
    g_string_append (stats, _("Cut off at the Maximum Tokens limit"));
  else if (state == HONE_MESSAGE_DONE && hone_message_get_cut (self->message) == HONE_MESSAGE_CUT_CONTEXT)
    g_string_append (stats, _("Cut off: the context is full"));
  if (self->show_stats && assistant && hone_message_get_has_stats (self->message))
    {
      g_autofree char *s = hone_message_row_format_stats (self->message);
      if (stats->len)
        g_string_append (stats, " · ");
      g_string_append (stats, s);
    }
  gtk_label_set_text (GTK_LABEL (self->stats_label), stats->str);
  gtk_widget_set_visible (self->stats_label, stats->len > 0);
}

static void
on_copy_clicked (HoneMessageRow *self)
{
  GtkWidget *toast_overlay = gtk_widget_get_ancestor (GTK_WIDGET (self), ADW_TYPE_TOAST_OVERLAY);

  copy_text (GTK_WIDGET (self), hone_message_get_content (self->message));
  if (toast_overlay)
    adw_toast_overlay_add_toast (ADW_TOAST_OVERLAY (toast_overlay), adw_toast_new (_("Message copied")));
}

static void
on_edit_clicked (HoneMessageRow *self)
{
  g_signal_emit (self, signals[SIGNAL_EDIT], 0);
}

static void
on_regenerate_clicked (HoneMessageRow *self)
{
  g_signal_emit (self, signals[SIGNAL_REGENERATE], 0);
}

static void
hone_message_row_dispose (GObject *object)
{
  HoneMessageRow *self = HONE_MESSAGE_ROW (object);

  if (self->message)
    g_signal_handlers_disconnect_by_data (self->message, self);
  g_clear_object (&self->message);
  G_OBJECT_CLASS (hone_message_row_parent_class)->dispose (object);
}

static void
hone_message_row_finalize (GObject *object)
{
  HoneMessageRow *self = HONE_MESSAGE_ROW (object);

  g_ptr_array_unref (self->block_widgets);
  g_array_unref (self->block_kinds);
  G_OBJECT_CLASS (hone_message_row_parent_class)->finalize (object);
}

static void
hone_message_row_class_init (HoneMessageRowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = hone_message_row_dispose;
  object_class->finalize = hone_message_row_finalize;

  signals[SIGNAL_EDIT] = g_signal_new ("edit", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                       0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  signals[SIGNAL_REGENERATE] = g_signal_new ("regenerate", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                             0, NULL, NULL, NULL, G_TYPE_NONE, 0);

  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hone/Hone/hone-message-row.ui");
  gtk_widget_class_bind_template_child (widget_class, HoneMessageRow, bubble);
  gtk_widget_class_bind_template_child (widget_class, HoneMessageRow, role_label);
  gtk_widget_class_bind_template_child (widget_class, HoneMessageRow, content_box);
  gtk_widget_class_bind_template_child (widget_class, HoneMessageRow, stats_label);
  gtk_widget_class_bind_template_child (widget_class, HoneMessageRow, copy_button);
  gtk_widget_class_bind_template_child (widget_class, HoneMessageRow, edit_button);
  gtk_widget_class_bind_template_child (widget_class, HoneMessageRow, regenerate_button);
  gtk_widget_class_bind_template_child (widget_class, HoneMessageRow, spinner);
  gtk_widget_class_bind_template_callback (widget_class, on_copy_clicked);
  gtk_widget_class_bind_template_callback (widget_class, on_edit_clicked);
  gtk_widget_class_bind_template_callback (widget_class, on_regenerate_clicked);
}

static void
hone_message_row_init (HoneMessageRow *self)
{
  self->block_widgets = g_ptr_array_new ();
  self->block_kinds = g_array_new (FALSE, FALSE, sizeof (int));
  self->show_stats = TRUE;
  gtk_widget_init_template (GTK_WIDGET (self));
}

GtkWidget *
hone_message_row_new (HoneMessage *message)
{
  HoneMessageRow *self = g_object_new (HONE_TYPE_MESSAGE_ROW, NULL);
  const char *role = hone_message_get_role (message);

  self->message = g_object_ref (message);
  if (g_strcmp0 (role, "user") == 0)
    {
      gtk_label_set_text (GTK_LABEL (self->role_label), _("You"));
      gtk_widget_add_css_class (GTK_WIDGET (self), "user");
    }
  else if (g_strcmp0 (role, "system") == 0)
    gtk_label_set_text (GTK_LABEL (self->role_label), _("System"));
  else
    {
      gtk_label_set_text (GTK_LABEL (self->role_label), _("Assistant"));
      gtk_widget_add_css_class (GTK_WIDGET (self), "assistant");
    }
  g_signal_connect_swapped (message, "notify::content", G_CALLBACK (update_content), self);
  g_signal_connect_swapped (message, "notify::state", G_CALLBACK (update_state), self);
  g_signal_connect_swapped (message, "notify::has-stats", G_CALLBACK (update_state), self);
  g_signal_connect_swapped (message, "notify::cut", G_CALLBACK (update_state), self);
  update_content (self);
  update_state (self);
  return GTK_WIDGET (self);
}

HoneMessage *
hone_message_row_get_message (HoneMessageRow *self)
{
  return self->message;
}

void
hone_message_row_set_show_stats (HoneMessageRow *self, gboolean show)
{
  self->show_stats = show;
  update_state (self);
}

void
hone_message_row_set_can_regenerate (HoneMessageRow *self, gboolean can)
{
  self->can_regenerate = can;
  update_state (self);
}
