/* hone-conversation-list.h — the sidebar of the Chat page: every saved
 * conversation, newest first, with New, Rename (F2) and Delete (Delete key). */
#pragma once

#include <adwaita.h>

#include "hone-conversation-store.h"

G_BEGIN_DECLS

#define HONE_TYPE_CONVERSATION_LIST (hone_conversation_list_get_type ())
G_DECLARE_FINAL_TYPE (HoneConversationList, hone_conversation_list, HONE, CONVERSATION_LIST, AdwBin)

/* Property "selected" (HoneConversation, may be NULL). Signal "new-requested". */
GtkWidget        *hone_conversation_list_new (void);
void              hone_conversation_list_set_store (HoneConversationList *self, HoneConversationStore *store);
HoneConversation *hone_conversation_list_get_selected (HoneConversationList *self);
void              hone_conversation_list_select (HoneConversationList *self, HoneConversation *conversation);
/* Renames/deletes without asking (the dialogs call these; tests too). */
void              hone_conversation_list_rename (HoneConversationList *self, HoneConversation *conversation,
                                                 const char *title);
void              hone_conversation_list_delete (HoneConversationList *self, HoneConversation *conversation);

G_END_DECLS
