/* hone-chat-page.c — see hone-chat-page.h.
 *
 * A generation is a Job: it holds refs on the conversation, the answer being
 * streamed and the session, and a weak pointer to the page, so the engine's
 * callbacks stay safe after the window closed (the answer is still saved).
 */
#include "hone-chat-page.h"

#include "hone-conversation-list.h"
#include "hone-error.h"
#include "hone-i18n.h"
#include "hone-message-row.h"

typedef struct {
  HoneChatPage *page;               /* weak */
  HoneConversationStore *store;
  HoneConversation *conversation;
  HoneMessage *message;
  GCancellable *cancellable;
} Job;

struct _HoneChatPage {
  AdwBin parent_instance;

  HoneEngine *engine;
  HoneConversationStore *store;
  GSettings *settings;
  HoneConversation *conversation;
  GHashTable *sessions;             /* conversation id → HoneSession */
  GPtrArray *bindings;              /* GBinding* to the current conversation */
  Job *job;                         /* the generation in flight, or NULL */
  gboolean stick_to_bottom;

  /* template */
  GtkWidget *conversation_list;
  GtkWidget *flap;
  GtkWidget *title_label;
  GtkWidget *content_stack;
  GtkWidget *scroller;
  GtkWidget *message_list;
  GtkWidget *input_view;
  GtkWidget *input_placeholder;
  GtkWidget *send_button;
  GtkWidget *stop_button;
  GtkWidget *system_prompt_view;
  GtkAdjustment *temperature_adjustment;
  GtkAdjustment *top_p_adjustment;
  GtkAdjustment *top_k_adjustment;
  GtkAdjustment *max_tokens_adjustment;
  GtkAdjustment *seed_adjustment;
};

G_DEFINE_FINAL_TYPE (HoneChatPage, hone_chat_page, ADW_TYPE_BIN)

enum { PROP_0, PROP_GENERATING, N_PROPS };
static GParamSpec *props[N_PROPS];
enum { SIGNAL_REQUEST_FINISHED, N_SIGNALS };
static guint signals[N_SIGNALS];

static void
toast (HoneChatPage *self, const char *message)
{
  g_autofree char *escaped = g_markup_escape_text (message, -1);  /* toast titles are markup */
  GtkWidget *overlay = gtk_widget_get_ancestor (GTK_WIDGET (self), ADW_TYPE_TOAST_OVERLAY);
  if (overlay)
    adw_toast_overlay_add_toast (ADW_TOAST_OVERLAY (overlay), adw_toast_new (escaped));
  else
    g_debug ("%s", message);   /* the window is gone */
}

static void
job_free (Job *job)
{
  if (job->page)
    g_object_remove_weak_pointer (G_OBJECT (job->page), (gpointer *) &job->page);
  g_clear_object (&job->store);
  g_clear_object (&job->conversation);
  g_clear_object (&job->message);
  g_clear_object (&job->cancellable);
  g_free (job);
}

static void
save (HoneConversationStore *store, HoneConversation *conversation, HoneChatPage *self)
{
  g_autoptr(GError) error = NULL;

  if (!conversation || hone_conversation_get_n_messages (conversation) == 0)
    return;
  /* Deleted while an answer was streaming: do not bring the file back. */
  if (!hone_conversation_store_find (store, hone_conversation_get_id (conversation)))
    return;
  if (!hone_conversation_store_save (store, conversation, &error) && self)
    toast (self, error->message);
}

static void
update_buttons (HoneChatPage *self)
{
  gboolean generating = self->job != NULL;

  gtk_widget_set_visible (self->send_button, !generating);
  gtk_widget_set_visible (self->stop_button, generating);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "chat.stop", generating);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "chat.send", !generating);
}

static void
update_rows (HoneChatPage *self)
{
  gboolean show_stats = self->settings ? g_settings_get_boolean (self->settings, "show-message-stats") : TRUE;
  GtkWidget *child;
  GtkWidget *last_assistant = NULL;

  for (child = gtk_widget_get_first_child (self->message_list); child; child = gtk_widget_get_next_sibling (child))
    {
      GtkWidget *row = gtk_list_box_row_get_child (GTK_LIST_BOX_ROW (child));
      if (!HONE_IS_MESSAGE_ROW (row))
        continue;
      hone_message_row_set_show_stats (HONE_MESSAGE_ROW (row), show_stats);
      hone_message_row_set_can_regenerate (HONE_MESSAGE_ROW (row), FALSE);
      if (g_strcmp0 (hone_message_get_role (hone_message_row_get_message (HONE_MESSAGE_ROW (row))), "assistant") == 0)
        last_assistant = row;
    }
  /* Only the last answer can be regenerated, and only when it is the last message. */
  if (last_assistant && !gtk_widget_get_next_sibling (gtk_widget_get_parent (last_assistant)))
    hone_message_row_set_can_regenerate (HONE_MESSAGE_ROW (last_assistant), TRUE);
  if (self->conversation)
    gtk_stack_set_visible_child_name (GTK_STACK (self->content_stack),
                                      hone_conversation_get_n_messages (self->conversation) ? "messages" : "empty");
  else
    gtk_stack_set_visible_child_name (GTK_STACK (self->content_stack), "empty");
}

static void
on_row_edit (HoneMessageRow *row, HoneChatPage *self);
static void
on_row_regenerate (HoneMessageRow *row, HoneChatPage *self);

static GtkWidget *
create_message_row (gpointer item, gpointer user_data)
{
  HoneChatPage *self = user_data;
  GtkWidget *row = hone_message_row_new (HONE_MESSAGE (item));
  GtkWidget *list_row = gtk_list_box_row_new ();

  g_signal_connect (row, "edit", G_CALLBACK (on_row_edit), self);
  g_signal_connect (row, "regenerate", G_CALLBACK (on_row_regenerate), self);
  gtk_list_box_row_set_child (GTK_LIST_BOX_ROW (list_row), row);
  gtk_list_box_row_set_activatable (GTK_LIST_BOX_ROW (list_row), FALSE);
  /* Rows are not focus stops themselves; their buttons and text are. */
  gtk_widget_set_focusable (list_row, FALSE);
  return list_row;
}

static void
on_messages_changed (HoneChatPage *self)
{
  /* New rows are created by the list box in the same emission; mark them in an idle. */
  update_rows (self);
}

static void
unbind_conversation (HoneChatPage *self)
{
  for (guint i = 0; i < self->bindings->len; i++)
    g_binding_unbind (g_ptr_array_index (self->bindings, i));
  g_ptr_array_set_size (self->bindings, 0);
  if (self->conversation)
    {
      g_signal_handlers_disconnect_by_data (hone_conversation_get_messages (self->conversation), self);
      g_signal_handlers_disconnect_by_data (self->conversation, self);
    }
}

static void
on_system_prompt_changed (HoneChatPage *self, GParamSpec *pspec, HoneConversation *conversation)
{
  GtkTextBuffer *buffer = gtk_text_view_get_buffer (GTK_TEXT_VIEW (self->system_prompt_view));
  g_autofree char *current = NULL;
  GtkTextIter start, end;

  gtk_text_buffer_get_bounds (buffer, &start, &end);
  current = gtk_text_buffer_get_text (buffer, &start, &end, FALSE);
  if (g_strcmp0 (current, hone_conversation_get_system_prompt (conversation)) != 0)
    gtk_text_buffer_set_text (buffer, hone_conversation_get_system_prompt (conversation), -1);
}

static void
on_system_prompt_edited (HoneChatPage *self, GtkTextBuffer *buffer)
{
  g_autofree char *text = NULL;
  GtkTextIter start, end;

  if (!self->conversation)
    return;
  gtk_text_buffer_get_bounds (buffer, &start, &end);
  text = gtk_text_buffer_get_text (buffer, &start, &end, FALSE);
  hone_conversation_set_system_prompt (self->conversation, text);
}

static void
set_conversation (HoneChatPage *self, HoneConversation *conversation)
{
  GtkTextBuffer *prompt_buffer = gtk_text_view_get_buffer (GTK_TEXT_VIEW (self->system_prompt_view));

  if (self->conversation == conversation)
    return;
  if (self->conversation && self->store)
    save (self->store, self->conversation, self);   /* keep system prompt / sampling edits */
  unbind_conversation (self);
  g_set_object (&self->conversation, conversation);

  if (!conversation)
    {
      gtk_list_box_bind_model (GTK_LIST_BOX (self->message_list), NULL, NULL, NULL, NULL);
      gtk_label_set_text (GTK_LABEL (self->title_label), _("Chat"));
      g_signal_handlers_block_by_func (prompt_buffer, on_system_prompt_edited, self);
      gtk_text_buffer_set_text (prompt_buffer, "", -1);
      g_signal_handlers_unblock_by_func (prompt_buffer, on_system_prompt_edited, self);
      update_rows (self);
      return;
    }

  gtk_list_box_bind_model (GTK_LIST_BOX (self->message_list), hone_conversation_get_messages (conversation),
                           create_message_row, self, NULL);
  g_signal_connect_swapped (hone_conversation_get_messages (conversation), "items-changed",
                            G_CALLBACK (on_messages_changed), self);
  g_ptr_array_add (self->bindings, g_object_bind_property (conversation, "title", self->title_label, "label",
                                                           G_BINDING_SYNC_CREATE));
#define BIND(prop, adj) \
  g_ptr_array_add (self->bindings, g_object_bind_property (conversation, prop, adj, "value", \
                                                           G_BINDING_SYNC_CREATE | G_BINDING_BIDIRECTIONAL))
  BIND ("temperature", self->temperature_adjustment);
  BIND ("top-p", self->top_p_adjustment);
  BIND ("top-k", self->top_k_adjustment);
  BIND ("max-tokens", self->max_tokens_adjustment);
  BIND ("seed", self->seed_adjustment);
#undef BIND
  g_signal_handlers_block_by_func (prompt_buffer, on_system_prompt_edited, self);
  gtk_text_buffer_set_text (prompt_buffer, hone_conversation_get_system_prompt (conversation), -1);
  g_signal_handlers_unblock_by_func (prompt_buffer, on_system_prompt_edited, self);
  g_signal_connect_swapped (conversation, "notify::system-prompt", G_CALLBACK (on_system_prompt_changed), self);
  self->stick_to_bottom = TRUE;
  update_rows (self);
  if (hone_conversation_list_get_selected (HONE_CONVERSATION_LIST (self->conversation_list)) != conversation)
    hone_conversation_list_select (HONE_CONVERSATION_LIST (self->conversation_list), conversation);
}

static void
on_selected_changed (HoneChatPage *self)
{
  HoneConversation *c = hone_conversation_list_get_selected (HONE_CONVERSATION_LIST (self->conversation_list));

  /* Deselection (deleting the last chat) empties the view; keep the old one otherwise. */
  set_conversation (self, c);
}

static HoneSession *
session_for (HoneChatPage *self, HoneConversation *conversation)
{
  HoneSession *session = g_hash_table_lookup (self->sessions, hone_conversation_get_id (conversation));

  if (!session)
    {
      session = hone_session_new (self->engine);
      g_hash_table_insert (self->sessions, g_strdup (hone_conversation_get_id (conversation)), session);
    }
  return session;
}

static void
on_token (const char *piece, gint32 token_id, gpointer user_data)
{
  Job *job = user_data;

  hone_message_append (job->message, piece);
}

static void
finish_job (HoneChatPage *self, Job *job)
{
  if (self && self->job == job)
    {
      self->job = NULL;
      update_buttons (self);
      update_rows (self);
      g_object_notify_by_pspec (G_OBJECT (self), props[PROP_GENERATING]);
    }
}

static void
on_chat_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Job *job = user_data;
  HoneChatPage *self = job->page;
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneGenerateResult) res = hone_session_generate_finish (HONE_SESSION (source), result, &error);

  if (res)
    {
      /* The streamed pieces add up to the text; take the engine's final word. */
      if (g_strcmp0 (hone_message_get_content (job->message), res->text) != 0)
        hone_message_set_content (job->message, res->text);
      hone_message_set_stats (job->message, res->metrics.ttft_ms, res->metrics.decode_tps,
                              res->metrics.generated_tokens, res->metrics.prompt_tokens);
      hone_message_set_cut (job->message, res->metrics.stop_reason == HONE_STOP_MAX_TOKENS ? HONE_MESSAGE_CUT_LENGTH
                                          : res->metrics.stop_reason == HONE_STOP_CONTEXT_FULL
                                              ? HONE_MESSAGE_CUT_CONTEXT
                                              : HONE_MESSAGE_CUT_NONE);
      hone_message_set_state (job->message,
                              g_cancellable_is_cancelled (job->cancellable) ? HONE_MESSAGE_STOPPED
                                                                           : HONE_MESSAGE_DONE);
      /* said once each time more of the conversation falls out of the context */
      if (self && res->metrics.dropped_messages >
                    GPOINTER_TO_INT (g_object_get_data (G_OBJECT (job->conversation), "hone-dropped-messages")))
        {
          g_autofree char *note = g_strdup_printf (
              g_dngettext (GETTEXT_PACKAGE,
                           "The model did not see the earliest %d message: the conversation is longer than its context",
                           "The model did not see the earliest %d messages: the conversation is longer than its context",
                           res->metrics.dropped_messages),
              res->metrics.dropped_messages);
          toast (self, note);
        }
      g_object_set_data (G_OBJECT (job->conversation), "hone-dropped-messages",
                         GINT_TO_POINTER (res->metrics.dropped_messages));
      if (self)
        g_signal_emit (self, signals[SIGNAL_REQUEST_FINISHED], 0, &res->metrics);
    }
  else if (g_error_matches (error, HONE_ERROR, HONE_ERROR_CANCELLED) ||
           g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    {
      hone_message_set_state (job->message, HONE_MESSAGE_STOPPED);
    }
  else
    {
      guint pos;
      hone_message_set_state (job->message, HONE_MESSAGE_FAILED);
      if (!*hone_message_get_content (job->message) &&
          g_list_store_find (G_LIST_STORE (hone_conversation_get_messages (job->conversation)), job->message, &pos))
        g_list_store_remove (G_LIST_STORE (hone_conversation_get_messages (job->conversation)), pos);
      if (self)
        toast (self, error->message);
    }
  hone_conversation_touch (job->conversation);
  save (job->store, job->conversation, self);
  finish_job (self, job);
  job_free (job);
}

static gboolean
engine_has_model (HoneChatPage *self)
{
  HoneEngineState state;

  if (!self->engine)
    return FALSE;
  state = hone_engine_get_state (self->engine);
  return state == HONE_ENGINE_STATE_READY || state == HONE_ENGINE_STATE_BUSY;
}

static void
start_generation (HoneChatPage *self, HoneConversation *conversation)
{
  g_autoptr(JsonNode) messages = hone_conversation_to_chat_json (conversation, -1);
  HoneSamplerParams params;
  double temperature, top_p;
  int top_k, max_tokens;
  gint64 seed;
  Job *job;

  g_object_get (conversation, "temperature", &temperature, "top-p", &top_p, "top-k", &top_k,
                "max-tokens", &max_tokens, "seed", &seed, NULL);
  hone_sampler_params_init (&params);
  params.temperature = temperature;
  params.top_p = top_p;
  params.top_k = top_k;
  params.max_tokens = max_tokens;
  params.seed = seed < 0 ? HONE_SAMPLER_SEED_RANDOM : (guint64) seed;

  job = g_new0 (Job, 1);
  job->page = self;
  g_object_add_weak_pointer (G_OBJECT (self), (gpointer *) &job->page);
  job->store = g_object_ref (self->store);
  job->conversation = g_object_ref (conversation);
  job->message = hone_message_new ("assistant", "");
  job->cancellable = g_cancellable_new ();
  hone_message_set_state (job->message, HONE_MESSAGE_STREAMING);
  self->job = job;
  self->stick_to_bottom = TRUE;
  hone_conversation_append (conversation, job->message);
  update_buttons (self);
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_GENERATING]);

  hone_session_chat_async (session_for (self, conversation), messages, &params,
                           on_token, job, NULL, job->cancellable, on_chat_done, job);
  hone_sampler_params_clear (&params);
}

static gboolean
check_ready (HoneChatPage *self)
{
  if (self->job)
    return FALSE;
  if (!engine_has_model (self))
    {
      GtkWidget *overlay = gtk_widget_get_ancestor (GTK_WIDGET (self), ADW_TYPE_TOAST_OVERLAY);
      AdwToast *t = adw_toast_new (_("No model is loaded"));
      adw_toast_set_button_label (t, _("_Open Model…"));
      adw_toast_set_action_name (t, "win.open-model");
      if (overlay)
        adw_toast_overlay_add_toast (ADW_TOAST_OVERLAY (overlay), t);
      else
        g_object_unref (g_object_ref_sink (t));
      return FALSE;
    }
  return TRUE;
}

static char *
take_input (HoneChatPage *self)
{
  GtkTextBuffer *buffer = gtk_text_view_get_buffer (GTK_TEXT_VIEW (self->input_view));
  GtkTextIter start, end;

  gtk_text_buffer_get_bounds (buffer, &start, &end);
  return gtk_text_buffer_get_text (buffer, &start, &end, FALSE);
}

gboolean
hone_chat_page_send (HoneChatPage *self, const char *text)
{
  g_autofree char *input = text ? g_strdup (text) : take_input (self);
  g_autoptr(HoneMessage) message = NULL;
  HoneConversation *conversation;

  g_strstrip (input);
  if (!*input || !check_ready (self))
    return FALSE;
  if (!self->conversation)
    hone_chat_page_new_conversation (self);
  conversation = self->conversation;
  if (hone_conversation_get_n_messages (conversation) == 0)
    {
      /* Name the chat after the start of its first message. */
      g_autofree char *first_line = g_strndup (input, strcspn (input, "\n"));
      if (g_utf8_strlen (first_line, -1) > 48)
        {
          g_autofree char *cut = g_utf8_substring (first_line, 0, 47);
          g_free (first_line);
          first_line = g_strconcat (cut, "…", NULL);
        }
      hone_conversation_set_title (conversation, first_line);
    }
  message = hone_message_new ("user", input);
  hone_conversation_append (conversation, message);
  if (!text)
    gtk_text_buffer_set_text (gtk_text_view_get_buffer (GTK_TEXT_VIEW (self->input_view)), "", -1);
  hone_conversation_touch (conversation);
  save (self->store, conversation, self);
  start_generation (self, conversation);
  return TRUE;
}

void
hone_chat_page_stop (HoneChatPage *self)
{
  if (self->job)
    g_cancellable_cancel (self->job->cancellable);
}

gboolean
hone_chat_page_get_generating (HoneChatPage *self)
{
  return self->job != NULL;
}

gboolean
hone_chat_page_regenerate (HoneChatPage *self)
{
  HoneConversation *c = self->conversation;
  guint n;

  if (!c || !check_ready (self))
    return FALSE;
  n = hone_conversation_get_n_messages (c);
  if (n == 0 || g_strcmp0 (hone_message_get_role (hone_conversation_get_message (c, n - 1)), "assistant") != 0)
    return FALSE;
  hone_conversation_truncate (c, n - 1);
  start_generation (self, c);
  return TRUE;
}

gboolean
hone_chat_page_edit_and_resend (HoneChatPage *self, guint index, const char *text)
{
  HoneConversation *c = self->conversation;
  g_autoptr(HoneMessage) message = NULL;
  g_autofree char *clean = g_strstrip (g_strdup (text ? text : ""));

  if (!c || !*clean || index >= hone_conversation_get_n_messages (c) || !check_ready (self))
    return FALSE;
  if (g_strcmp0 (hone_message_get_role (hone_conversation_get_message (c, index)), "user") != 0)
    return FALSE;
  hone_conversation_truncate (c, index);
  message = hone_message_new ("user", clean);
  hone_conversation_append (c, message);
  hone_conversation_touch (c);
  save (self->store, c, self);
  start_generation (self, c);
  return TRUE;
}

static void
on_row_regenerate (HoneMessageRow *row, HoneChatPage *self)
{
  hone_chat_page_regenerate (self);
}

static void
on_edit_response (AdwMessageDialog *dialog, const char *response, HoneChatPage *self)
{
  GtkTextView *view = g_object_get_data (G_OBJECT (dialog), "view");
  HoneMessage *message = g_object_get_data (G_OBJECT (dialog), "message");
  GtkTextBuffer *buffer = gtk_text_view_get_buffer (view);
  g_autofree char *text = NULL;
  GtkTextIter start, end;
  guint pos;

  if (g_strcmp0 (response, "send") != 0 || !self->conversation)
    return;
  gtk_text_buffer_get_bounds (buffer, &start, &end);
  text = gtk_text_buffer_get_text (buffer, &start, &end, FALSE);
  if (g_list_store_find (G_LIST_STORE (hone_conversation_get_messages (self->conversation)), message, &pos))
    hone_chat_page_edit_and_resend (self, pos, text);
}

static void
on_row_edit (HoneMessageRow *row, HoneChatPage *self)
{
  HoneMessage *message = hone_message_row_get_message (row);
  GtkWidget *dialog, *scroller, *view;

  if (self->job)
    return;
  dialog = adw_message_dialog_new (GTK_WINDOW (gtk_widget_get_root (GTK_WIDGET (self))),
                                   _("Edit Message"),
                                   _("The answers after this message will be replaced."));
  scroller = gtk_scrolled_window_new ();
  view = gtk_text_view_new ();
  gtk_text_view_set_wrap_mode (GTK_TEXT_VIEW (view), GTK_WRAP_WORD_CHAR);
  gtk_text_buffer_set_text (gtk_text_view_get_buffer (GTK_TEXT_VIEW (view)), hone_message_get_content (message), -1);
  gtk_widget_add_css_class (view, "message-editor");
  gtk_accessible_update_property (GTK_ACCESSIBLE (view), GTK_ACCESSIBLE_PROPERTY_LABEL, _("Message"), -1);
  gtk_scrolled_window_set_min_content_height (GTK_SCROLLED_WINDOW (scroller), 120);
  gtk_scrolled_window_set_min_content_width (GTK_SCROLLED_WINDOW (scroller), 320);
  gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (scroller), view);
  gtk_widget_add_css_class (scroller, "card");
  adw_message_dialog_set_extra_child (ADW_MESSAGE_DIALOG (dialog), scroller);
  adw_message_dialog_add_responses (ADW_MESSAGE_DIALOG (dialog),
                                    "cancel", _("_Cancel"), "send", _("_Send"), NULL);
  adw_message_dialog_set_response_appearance (ADW_MESSAGE_DIALOG (dialog), "send", ADW_RESPONSE_SUGGESTED);
  adw_message_dialog_set_close_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
  g_object_set_data (G_OBJECT (dialog), "view", view);
  g_object_set_data_full (G_OBJECT (dialog), "message", g_object_ref (message), g_object_unref);
  g_signal_connect (dialog, "response", G_CALLBACK (on_edit_response), self);
  gtk_window_present (GTK_WINDOW (dialog));
  gtk_widget_grab_focus (view);
}

void
hone_chat_page_new_conversation (HoneChatPage *self)
{
  g_autoptr(HoneConversation) c = hone_conversation_new ();

  if (self->settings)
    {
      g_autofree char *prompt = g_settings_get_string (self->settings, "system-prompt");
      g_object_set (c,
                    "system-prompt", prompt,
                    "temperature", g_settings_get_double (self->settings, "temperature"),
                    "top-p", MAX (0.01, g_settings_get_double (self->settings, "top-p")),
                    "top-k", g_settings_get_int (self->settings, "top-k"),
                    "max-tokens", g_settings_get_int (self->settings, "max-tokens"),
                    NULL);
    }
  hone_conversation_store_add (self->store, c);
  set_conversation (self, c);
  hone_chat_page_focus_input (self);
}

HoneConversation *
hone_chat_page_get_conversation (HoneChatPage *self)
{
  return self->conversation;
}

void
hone_chat_page_select_conversation (HoneChatPage *self, HoneConversation *conversation)
{
  set_conversation (self, conversation);
}

void
hone_chat_page_shutdown (HoneChatPage *self)
{
  if (self->job)
    {
      /* Cancel, and save what streamed so far now: the engine's reply may
       * only arrive after the window is gone. */
      g_cancellable_cancel (self->job->cancellable);
      hone_message_set_state (self->job->message, HONE_MESSAGE_STOPPED);
      save (self->store, self->job->conversation, self);
    }
  if (self->conversation && self->store)
    save (self->store, self->conversation, self);
}

GtkWidget *
hone_chat_page_get_conversation_list (HoneChatPage *self)
{
  return self->conversation_list;
}

void
hone_chat_page_focus_input (HoneChatPage *self)
{
  gtk_widget_grab_focus (self->input_view);
}

static gboolean
on_input_key (GtkEventControllerKey *controller, guint keyval, guint keycode,
              GdkModifierType state, HoneChatPage *self)
{
  if ((keyval == GDK_KEY_Return || keyval == GDK_KEY_KP_Enter) && !(state & GDK_SHIFT_MASK))
    {
      hone_chat_page_send (self, NULL);
      return TRUE;
    }
  return FALSE;
}

static void
on_vadjustment_changed (HoneChatPage *self, GParamSpec *pspec, GtkAdjustment *adjustment)
{
  /* Content grew (streaming): follow it if the user was at the bottom. */
  if (self->stick_to_bottom)
    gtk_adjustment_set_value (adjustment, gtk_adjustment_get_upper (adjustment) -
                                          gtk_adjustment_get_page_size (adjustment));
}

static void
on_vadjustment_value (HoneChatPage *self, GtkAdjustment *adjustment)
{
  self->stick_to_bottom = gtk_adjustment_get_value (adjustment) >=
                          gtk_adjustment_get_upper (adjustment) - gtk_adjustment_get_page_size (adjustment) - 24;
}

/* GtkTextView has no placeholder on GTK 4.8: a dim label over it. */
static void
on_input_changed (HoneChatPage *self, GtkTextBuffer *buffer)
{
  gtk_widget_set_visible (self->input_placeholder, gtk_text_buffer_get_char_count (buffer) == 0);
}

static void
send_action (GtkWidget *widget, const char *action_name, GVariant *parameter)
{
  hone_chat_page_send (HONE_CHAT_PAGE (widget), NULL);
}

static void
stop_action (GtkWidget *widget, const char *action_name, GVariant *parameter)
{
  hone_chat_page_stop (HONE_CHAT_PAGE (widget));
}

static void
new_action (GtkWidget *widget, const char *action_name, GVariant *parameter)
{
  hone_chat_page_new_conversation (HONE_CHAT_PAGE (widget));
}

static void
toggle_settings_action (GtkWidget *widget, const char *action_name, GVariant *parameter)
{
  HoneChatPage *self = HONE_CHAT_PAGE (widget);

  adw_flap_set_reveal_flap (ADW_FLAP (self->flap), !adw_flap_get_reveal_flap (ADW_FLAP (self->flap)));
}

static void
hone_chat_page_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  HoneChatPage *self = HONE_CHAT_PAGE (object);

  switch (prop_id)
    {
    case PROP_GENERATING: g_value_set_boolean (value, self->job != NULL); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
hone_chat_page_dispose (GObject *object)
{
  HoneChatPage *self = HONE_CHAT_PAGE (object);

  if (self->job)
    {
      g_cancellable_cancel (self->job->cancellable);
      self->job = NULL;   /* the job frees itself when the engine answers */
    }
  unbind_conversation (self);
  g_clear_object (&self->conversation);
  if (self->settings)
    g_signal_handlers_disconnect_by_data (self->settings, self);
  g_clear_object (&self->settings);
  g_clear_object (&self->store);
  g_clear_pointer (&self->sessions, g_hash_table_unref);
  g_clear_object (&self->engine);
  G_OBJECT_CLASS (hone_chat_page_parent_class)->dispose (object);
}

static void
hone_chat_page_finalize (GObject *object)
{
  HoneChatPage *self = HONE_CHAT_PAGE (object);

  g_ptr_array_unref (self->bindings);
  G_OBJECT_CLASS (hone_chat_page_parent_class)->finalize (object);
}

static void
hone_chat_page_class_init (HoneChatPageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = hone_chat_page_dispose;
  object_class->finalize = hone_chat_page_finalize;
  object_class->get_property = hone_chat_page_get_property;
  props[PROP_GENERATING] = g_param_spec_boolean ("generating", NULL, NULL, FALSE,
                                                 G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, props);
  signals[SIGNAL_REQUEST_FINISHED] =
    g_signal_new ("request-finished", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, HONE_TYPE_REQUEST_METRICS | G_SIGNAL_TYPE_STATIC_SCOPE);

  g_type_ensure (HONE_TYPE_CONVERSATION_LIST);
  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hone/Hone/hone-chat-page.ui");
  gtk_widget_class_bind_template_child (widget_class, HoneChatPage, conversation_list);
  gtk_widget_class_bind_template_child (widget_class, HoneChatPage, flap);
  gtk_widget_class_bind_template_child (widget_class, HoneChatPage, title_label);
  gtk_widget_class_bind_template_child (widget_class, HoneChatPage, content_stack);
  gtk_widget_class_bind_template_child (widget_class, HoneChatPage, scroller);
  gtk_widget_class_bind_template_child (widget_class, HoneChatPage, message_list);
  gtk_widget_class_bind_template_child (widget_class, HoneChatPage, input_view);
  gtk_widget_class_bind_template_child (widget_class, HoneChatPage, input_placeholder);
  gtk_widget_class_bind_template_child (widget_class, HoneChatPage, send_button);
  gtk_widget_class_bind_template_child (widget_class, HoneChatPage, stop_button);
  gtk_widget_class_bind_template_child (widget_class, HoneChatPage, system_prompt_view);
  gtk_widget_class_bind_template_child (widget_class, HoneChatPage, temperature_adjustment);
  gtk_widget_class_bind_template_child (widget_class, HoneChatPage, top_p_adjustment);
  gtk_widget_class_bind_template_child (widget_class, HoneChatPage, top_k_adjustment);
  gtk_widget_class_bind_template_child (widget_class, HoneChatPage, max_tokens_adjustment);
  gtk_widget_class_bind_template_child (widget_class, HoneChatPage, seed_adjustment);
  gtk_widget_class_bind_template_callback (widget_class, on_selected_changed);
  gtk_widget_class_bind_template_callback (widget_class, on_input_key);

  gtk_widget_class_install_action (widget_class, "chat.send", NULL, send_action);
  gtk_widget_class_install_action (widget_class, "chat.stop", NULL, stop_action);
  gtk_widget_class_install_action (widget_class, "chat.new", NULL, new_action);
  gtk_widget_class_install_action (widget_class, "chat.toggle-settings", NULL, toggle_settings_action);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_Escape, 0, "chat.stop", NULL);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_F9, 0, "chat.toggle-settings", NULL);
}

static void
hone_chat_page_init (HoneChatPage *self)
{
  GtkAdjustment *vadj;

  gtk_widget_init_template (GTK_WIDGET (self));
  self->sessions = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
  self->bindings = g_ptr_array_new ();
  self->stick_to_bottom = TRUE;
  vadj = gtk_scrolled_window_get_vadjustment (GTK_SCROLLED_WINDOW (self->scroller));
  g_signal_connect_swapped (vadj, "notify::upper", G_CALLBACK (on_vadjustment_changed), self);
  g_signal_connect_swapped (vadj, "value-changed", G_CALLBACK (on_vadjustment_value), self);
  g_signal_connect_swapped (gtk_text_view_get_buffer (GTK_TEXT_VIEW (self->system_prompt_view)), "changed",
                            G_CALLBACK (on_system_prompt_edited), self);
  g_signal_connect_swapped (gtk_text_view_get_buffer (GTK_TEXT_VIEW (self->input_view)), "changed",
                            G_CALLBACK (on_input_changed), self);
  g_signal_connect_swapped (self->conversation_list, "new-requested",
                            G_CALLBACK (hone_chat_page_new_conversation), self);
  update_buttons (self);
}

GtkWidget *
hone_chat_page_new (void)
{
  return g_object_new (HONE_TYPE_CHAT_PAGE, NULL);
}

void
hone_chat_page_setup (HoneChatPage *self, HoneEngine *engine, HoneConversationStore *store,
                      GSettings *settings)
{
  GListModel *model;

  g_set_object (&self->engine, engine);
  g_set_object (&self->store, store);
  g_set_object (&self->settings, settings);
  if (settings)
    g_signal_connect_swapped (settings, "changed::show-message-stats", G_CALLBACK (update_rows), self);
  hone_conversation_list_set_store (HONE_CONVERSATION_LIST (self->conversation_list), store);
  model = hone_conversation_store_get_model (store);
  if (g_list_model_get_n_items (model) > 0)
    {
      g_autoptr(HoneConversation) first = g_list_model_get_item (model, 0);
      set_conversation (self, first);
    }
  update_rows (self);
}
