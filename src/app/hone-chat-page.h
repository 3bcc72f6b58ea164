/* hone-chat-page.h — the Chat page: conversations, streamed answers, stop,
 * regenerate, edit-and-resend, and a side panel (AdwFlap) with the system
 * prompt and the sampling parameters of the current conversation. */
#pragma once

#include <adwaita.h>

#include "hone-conversation-store.h"
#include "hone-engine.h"

G_BEGIN_DECLS

#define HONE_TYPE_CHAT_PAGE (hone_chat_page_get_type ())
G_DECLARE_FINAL_TYPE (HoneChatPage, hone_chat_page, HONE, CHAT_PAGE, AdwBin)

/* Signals:
 *   request-finished (HoneRequestMetrics *metrics): an answer completed.
 * Properties: generating (boolean, read-only). */
GtkWidget        *hone_chat_page_new (void);
void              hone_chat_page_setup (HoneChatPage *self, HoneEngine *engine,
                                        HoneConversationStore *store, GSettings *settings);

void              hone_chat_page_new_conversation (HoneChatPage *self);
HoneConversation *hone_chat_page_get_conversation (HoneChatPage *self);
void              hone_chat_page_select_conversation (HoneChatPage *self, HoneConversation *conversation);

/* Sends @text (NULL: what the input holds) as the user's next message. */
gboolean          hone_chat_page_send (HoneChatPage *self, const char *text);
/* Stops the running answer (keeps what streamed so far). */
void              hone_chat_page_stop (HoneChatPage *self);
gboolean          hone_chat_page_get_generating (HoneChatPage *self);
/* Regenerates the last answer / replaces user message @index and resends. */
gboolean          hone_chat_page_regenerate (HoneChatPage *self);
gboolean          hone_chat_page_edit_and_resend (HoneChatPage *self, guint index, const char *text);
/* Stops any generation and saves the conversation now (window closing). */
void              hone_chat_page_shutdown (HoneChatPage *self);
void              hone_chat_page_focus_input (HoneChatPage *self);
/* The sidebar (HoneConversationList). */
GtkWidget        *hone_chat_page_get_conversation_list (HoneChatPage *self);

G_END_DECLS
