/* fuzz-conversation.c — libFuzzer target: the app's saved-conversation
 * reader (src/app/hone-conversation.c and hone-message.c, behind
 * hone_json_load as HoneConversationStore reads them) over arbitrary bytes.
 * It may not crash, leak, read outside the input or warn (GLib criticals and
 * warnings abort: json-glib's own member getters raised criticals on members
 * of the wrong type). A conversation it accepts must survive its own file
 * format: written (hone_conversation_to_json), read again, written again, the
 * two texts are the same. */
#include "hone-conversation.h"
#include "hone-json.h"

#include <stdint.h>

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  g_log_set_always_fatal (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
  return 0;
}

/* @c in its file format, as text */
static char *
file_text (HoneConversation *c)
{
  g_autoptr(JsonNode) node = hone_conversation_to_json (c);
  return json_to_string (node, FALSE);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr(JsonParser) p = json_parser_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneConversation) c = NULL;

  /* the store's limits: a nesting depth of 32 */
  if (!hone_json_load (p, (const char *) data, (gssize) size, 32, &error))
    {
      g_assert (error != NULL);
      return 0;
    }
  c = hone_conversation_new_from_json (json_parser_get_root (p), &error);
  if (!c)
    {
      g_assert (error != NULL);
      return 0;
    }
  g_assert (error == NULL);
  g_assert (g_utf8_validate (hone_conversation_get_title (c), -1, NULL));
  {
    g_autofree char *once = file_text (c);
    g_autoptr(JsonParser) p2 = json_parser_new ();
    g_autoptr(HoneConversation) d = NULL;
    g_autofree char *twice = NULL;

    g_assert (hone_json_load (p2, once, -1, 32, NULL));
    d = hone_conversation_new_from_json (json_parser_get_root (p2), NULL);
    g_assert (d != NULL);
    g_assert (hone_conversation_get_n_messages (d) == hone_conversation_get_n_messages (c));
    twice = file_text (d);
    g_assert (g_strcmp0 (once, twice) == 0);
  }
  return 0;
}
