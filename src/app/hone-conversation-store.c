/* hone-conversation-store.c — see hone-conversation-store.h. */
#include "hone-conversation-store.h"

#include <errno.h>
#include <glib/gstdio.h>

#include "hone-error.h"
#include "hone-i18n.h"
#include "hone-json.h"

struct _HoneConversationStore {
  GObject parent_instance;
  char *directory;
  GListStore *list;
};

G_DEFINE_FINAL_TYPE (HoneConversationStore, hone_conversation_store, G_TYPE_OBJECT)

static void
hone_conversation_store_finalize (GObject *object)
{
  HoneConversationStore *self = HONE_CONVERSATION_STORE (object);

  g_free (self->directory);
  g_object_unref (self->list);
  G_OBJECT_CLASS (hone_conversation_store_parent_class)->finalize (object);
}

static void
hone_conversation_store_class_init (HoneConversationStoreClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = hone_conversation_store_finalize;
}

static void
hone_conversation_store_init (HoneConversationStore *self)
{
  self->list = g_list_store_new (HONE_TYPE_CONVERSATION);
}

HoneConversationStore *
hone_conversation_store_new (const char *directory)
{
  HoneConversationStore *self = g_object_new (HONE_TYPE_CONVERSATION_STORE, NULL);

  self->directory = directory ? g_strdup (directory)
                              : g_build_filename (g_get_user_data_dir (), "hone", "conversations", NULL);
  return self;
}

const char *
hone_conversation_store_get_directory (HoneConversationStore *self)
{
  return self->directory;
}

GListModel *
hone_conversation_store_get_model (HoneConversationStore *self)
{
  return G_LIST_MODEL (self->list);
}

static int
compare_updated (gconstpointer a, gconstpointer b, gpointer user_data)
{
  gint64 ua = hone_conversation_get_updated ((HoneConversation *) a);
  gint64 ub = hone_conversation_get_updated ((HoneConversation *) b);
  return ua < ub ? 1 : ua > ub ? -1 : 0;
}

guint
hone_conversation_store_load (HoneConversationStore *self, GPtrArray **failures)
{
  g_autoptr(GDir) dir = NULL;
  g_autoptr(GPtrArray) loaded = g_ptr_array_new_with_free_func (g_object_unref);
  const char *name;

  if (failures)
    *failures = g_ptr_array_new_with_free_func ((GDestroyNotify) g_error_free);
  dir = g_dir_open (self->directory, 0, NULL);
  if (!dir)
    return 0;   /* nothing saved yet */
  while ((name = g_dir_read_name (dir)))
    {
      g_autofree char *path = NULL;
      g_autofree char *contents = NULL;
      g_autoptr(JsonParser) parser = NULL;
      g_autoptr(GError) error = NULL;
      HoneConversation *conversation = NULL;
      gsize length;

      if (!g_str_has_suffix (name, ".json"))
        continue;
      path = g_build_filename (self->directory, name, NULL);
      parser = json_parser_new ();
      if (g_file_get_contents (path, &contents, &length, &error) &&
          hone_json_load (parser, contents, length, 32, &error))
        conversation = hone_conversation_new_from_json (json_parser_get_root (parser), &error);
      if (!conversation)
        {
          if (failures)
            g_ptr_array_add (*failures,
                             g_error_new (HONE_ERROR, HONE_ERROR_INVALID_JSON,
                                          _("Could not read the conversation “%s”: %s"),
                                          name, error ? error->message : _("unknown error")));
          continue;
        }
      if (hone_conversation_store_find (self, hone_conversation_get_id (conversation)))
        {
          g_object_unref (conversation);
          continue;
        }
      g_ptr_array_add (loaded, conversation);
    }
  for (guint i = 0; i < loaded->len; i++)
    g_list_store_insert_sorted (self->list, g_ptr_array_index (loaded, i), compare_updated, NULL);
  return loaded->len;
}

void
hone_conversation_store_add (HoneConversationStore *self, HoneConversation *conversation)
{
  g_list_store_insert (self->list, 0, conversation);
}

static char *
file_for (HoneConversationStore *self, HoneConversation *conversation)
{
  g_autofree char *name = g_strconcat (hone_conversation_get_id (conversation), ".json", NULL);
  return g_build_filename (self->directory, name, NULL);
}

gboolean
hone_conversation_store_save (HoneConversationStore *self, HoneConversation *conversation,
                              GError **error)
{
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autoptr(JsonNode) root = hone_conversation_to_json (conversation);
  g_autofree char *path = file_for (self, conversation);
  g_autofree char *data = NULL;
  g_autoptr(GError) local_error = NULL;
  gsize length;

  if (g_mkdir_with_parents (self->directory, 0700) != 0)
    {
      int saved = errno;
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("Could not create the folder “%s”: %s"),
                   self->directory, g_strerror (saved));
      return FALSE;
    }
  json_generator_set_root (generator, root);
  json_generator_set_pretty (generator, TRUE);
  data = json_generator_to_data (generator, &length);
  /* g_file_set_contents writes to a temporary file, fsyncs and renames:
   * the old file stays intact until the new one is complete. */
  if (!g_file_set_contents (path, data, length, &local_error))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("Could not save the conversation: %s"),
                   local_error->message);
      return FALSE;
    }
  return TRUE;
}

gboolean
hone_conversation_store_remove (HoneConversationStore *self, HoneConversation *conversation,
                                GError **error)
{
  g_autofree char *path = file_for (self, conversation);
  guint pos;

  if (g_list_store_find (self->list, conversation, &pos))
    g_list_store_remove (self->list, pos);
  if (g_unlink (path) != 0 && errno != ENOENT)
    {
      int saved = errno;
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("Could not delete “%s”: %s"),
                   path, g_strerror (saved));
      return FALSE;
    }
  return TRUE;
}

HoneConversation *
hone_conversation_store_find (HoneConversationStore *self, const char *id)
{
  guint n = g_list_model_get_n_items (G_LIST_MODEL (self->list));

  for (guint i = 0; i < n; i++)
    {
      g_autoptr(HoneConversation) c = g_list_model_get_item (G_LIST_MODEL (self->list), i);
      if (g_strcmp0 (hone_conversation_get_id (c), id) == 0)
        return c;   /* the store keeps its ref */
    }
  return NULL;
}
