/* hone-chat-template.h — render a model's chat template (a Jinja2 subset).
 *
 * The interpreter is bounded: a hostile template (deep recursion, huge loops,
 * enormous output) stops with HONE_ERROR_TEMPLATE_LIMIT; bad syntax gives
 * HONE_ERROR_TEMPLATE_SYNTAX with line and column; raise_exception() and
 * run-time type errors give HONE_ERROR_TEMPLATE_RUNTIME.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef struct _HoneChatTemplate HoneChatTemplate;

HoneChatTemplate *hone_chat_template_new (const char *source, gssize length, GError **error);
void              hone_chat_template_free (HoneChatTemplate *tmpl);

/* Render with the variables Jinja chat templates expect:
 *   messages               a JSON array of {"role": …, "content": …} (other keys kept)
 *   add_generation_prompt  as given
 *   bos_token, eos_token   strings (may be NULL → "")
 *   extra                  optional JSON object whose members become variables
 *                          (tools, enable_thinking, date_string, …)
 *   tools, documents       none unless @extra sets them (transformers passes both)
 * raise_exception(msg) fails with HONE_ERROR_TEMPLATE_RUNTIME and exactly msg as
 * the error message.
 * Returns the prompt text, or NULL with @error set. */
char *hone_chat_template_render (HoneChatTemplate *tmpl, JsonNode *messages,
                                 gboolean add_generation_prompt,
                                 const char *bos_token, const char *eos_token,
                                 JsonObject *extra, GError **error);

/* Pins the clock strftime_now() reads to @unix_seconds (UTC), for
 * reproducible renders; a negative value returns to the local current time. */
void hone_chat_template_set_now (HoneChatTemplate *tmpl, gint64 unix_seconds);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (HoneChatTemplate, hone_chat_template_free)

G_END_DECLS
