/* fuzz-template.c — libFuzzer target: parse and render arbitrary template text.
 *
 * The conversation is fixed (system/user/assistant with a tool call, unicode
 * and braces in content) and a tools list is passed, so the fuzzer reaches
 * the branches real chat templates take.  Any input must either render or
 * fail with a HONE_ERROR_TEMPLATE_* error — never crash, leak or hang.
 */
#include "hone-chat-template.h"
#include "hone-error.h"

#include <stdint.h>
#include <stdlib.h>

static const char conversation[] =
  "[{\"role\": \"system\", \"content\": \"Be brief.\"},"
  " {\"role\": \"user\", \"content\": \"Grüße {{ x }} {% if %} 🌍\"},"
  " {\"role\": \"assistant\", \"content\": \"<think>hm</think>ok\", \"tool_calls\": ["
  "   {\"id\": \"call12345\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {\"a\": 1.5}}}]},"
  " {\"role\": \"tool\", \"content\": \"42\", \"tool_call_id\": \"call12345\"},"
  " {\"role\": \"user\", \"content\": \"\"}]";

static const char extra_json[] =
  "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\","
  " \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"number\"}}}}}],"
  " \"enable_thinking\": false, \"date_string\": \"26 Jul 2024\"}";

int LLVMFuzzerInitialize (int *argc, char ***argv);

/* A GLib critical or warning (a g_return_if_fail tripping, json-glib asserting
 * on a member of the wrong type) is a finding too: make it a crash libFuzzer sees. */
int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  g_log_set_always_fatal (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static JsonNode *messages;
  static JsonNode *extra;
  GError *error = NULL;
  HoneChatTemplate *tmpl;
  char *out;

  if (!messages) {
    messages = json_from_string (conversation, NULL);
    extra = json_from_string (extra_json, NULL);
    if (!messages || !extra)
      abort ();
  }
  if (size > 64 * 1024)
    return 0;
  tmpl = hone_chat_template_new ((const char *) data, (gssize) size, &error);
  if (!tmpl) {
    if (!error || error->domain != HONE_ERROR ||
        (error->code != HONE_ERROR_TEMPLATE_SYNTAX && error->code != HONE_ERROR_TEMPLATE_LIMIT))
      abort ();
    g_error_free (error);
    return 0;
  }
  hone_chat_template_set_now (tmpl, 1721995200);
  out = hone_chat_template_render (tmpl, messages, TRUE, "<s>", "</s>", json_node_get_object (extra), &error);
  if (out) {
    if (!g_utf8_validate (out, -1, NULL))
      abort ();
    g_free (out);
  } else {
    if (!error || error->domain != HONE_ERROR ||
        (error->code != HONE_ERROR_TEMPLATE_RUNTIME && error->code != HONE_ERROR_TEMPLATE_LIMIT))
      abort ();
    g_error_free (error);
  }
  hone_chat_template_free (tmpl);
  return 0;
}
