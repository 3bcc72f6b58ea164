/* hone-conversation.h — one chat: title, system prompt, sampling, messages.
 *
 * Messages are a GListStore of HoneMessage so the chat view binds to it
 * directly. Sampling parameters belong to the conversation (the side panel
 * edits them); new conversations take the defaults from GSettings.
 */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "hone-message.h"

G_BEGIN_DECLS

#define HONE_TYPE_CONVERSATION (hone_conversation_get_type ())
G_DECLARE_FINAL_TYPE (HoneConversation, hone_conversation, HONE, CONVERSATION, GObject)

/* Properties: id (construct-only), title, system-prompt, temperature, top-p,
 * top-k, max-tokens, seed (-1 = random), updated (int64, µs since the epoch). */
HoneConversation *hone_conversation_new (void);

const char *hone_conversation_get_id (HoneConversation *self);
const char *hone_conversation_get_title (HoneConversation *self);
void        hone_conversation_set_title (HoneConversation *self, const char *title);
const char *hone_conversation_get_system_prompt (HoneConversation *self);
void        hone_conversation_set_system_prompt (HoneConversation *self, const char *prompt);
gint64      hone_conversation_get_updated (HoneConversation *self);
void        hone_conversation_touch (HoneConversation *self);

/* GListModel of HoneMessage (transfer none). */
GListModel *hone_conversation_get_messages (HoneConversation *self);
guint       hone_conversation_get_n_messages (HoneConversation *self);
HoneMessage *hone_conversation_get_message (HoneConversation *self, guint i);  /* transfer none */
void        hone_conversation_append (HoneConversation *self, HoneMessage *message);
/* Remove message i and everything after it. */
void        hone_conversation_truncate (HoneConversation *self, guint i);

/* The messages as the engine's chat call wants them: system prompt first (if
 * any), then every message up to (not including) @end, or all if @end is -1.
 * Failed messages with no content are skipped. */
JsonNode   *hone_conversation_to_chat_json (HoneConversation *self, int end);

/* File format: {"version":1, "id", "title", "created", "updated", "system_prompt",
 * "sampling": {...}, "messages": [...]} */
JsonNode   *hone_conversation_to_json (HoneConversation *self);
HoneConversation *hone_conversation_new_from_json (JsonNode *node, GError **error);

G_END_DECLS
