/* hone-conversation-store.h — conversations on disk, one JSON file each.
 *
 * Files live in g_get_user_data_dir()/hone/conversations/<id>.json (or a
 * directory given at construction, for tests). Saves are atomic
 * (g_file_set_contents writes a temporary file and renames it), so a crash
 * never leaves half a file. A file that does not parse is skipped at load and
 * reported; the others still load. The store is a GListModel of
 * HoneConversation, most recently updated first.
 */
#pragma once

#include <gio/gio.h>

#include "hone-conversation.h"

G_BEGIN_DECLS

#define HONE_TYPE_CONVERSATION_STORE (hone_conversation_store_get_type ())
G_DECLARE_FINAL_TYPE (HoneConversationStore, hone_conversation_store, HONE, CONVERSATION_STORE, GObject)

/* @directory NULL = the default location. */
HoneConversationStore *hone_conversation_store_new (const char *directory);
const char *hone_conversation_store_get_directory (HoneConversationStore *self);
GListModel *hone_conversation_store_get_model (HoneConversationStore *self);

/* Reads every *.json in the directory. Returns how many loaded; @failures (may
 * be NULL) gets one GError per skipped file, its message naming the file. */
guint    hone_conversation_store_load (HoneConversationStore *self, GPtrArray **failures);
/* Adds a conversation at the top (does not save it until it has messages). */
void     hone_conversation_store_add (HoneConversationStore *self, HoneConversation *conversation);
gboolean hone_conversation_store_save (HoneConversationStore *self, HoneConversation *conversation,
                                       GError **error);
gboolean hone_conversation_store_remove (HoneConversationStore *self, HoneConversation *conversation,
                                         GError **error);
HoneConversation *hone_conversation_store_find (HoneConversationStore *self, const char *id);

G_END_DECLS
