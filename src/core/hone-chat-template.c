/* hone-chat-template.c — the public chat-template API on top of the Jinja2-subset
 * interpreter (hone-jinja-*.c).
 *
 * Renders the way HF transformers does: jinja2's ImmutableSandboxedEnvironment
 * with trim_blocks and lstrip_blocks, the loopcontrols extension, transformers'
 * tojson/raise_exception/strftime_now, and the variables messages,
 * add_generation_prompt, bos_token, eos_token, tools=None, documents=None
 * plus the caller's extra members.
 */
#include <inttypes.h>
#include "hone-chat-template.h"
#include "hone-error.h"
#include "hone-i18n.h"
#include "hone-jinja-private.h"

#include <string.h>

struct _HoneChatTemplate {
  HjNode *root;
  HjRenderOptions opts;
};

HoneChatTemplate *
hone_chat_template_new (const char *source, gssize length, GError **error)
{
  HoneChatTemplate *tmpl;
  GString *norm;
  gsize len, i;
  HjNode *root;
  const char *bad;

  g_return_val_if_fail (source != NULL || length == 0, NULL);
  len = length < 0 ? strlen (source) : (gsize) length;
  if (len > HJ_MAX_STRING) {
    g_set_error (error, HONE_ERROR, HONE_ERROR_TEMPLATE_LIMIT, _("chat template is too large (%" "zu" " bytes)"),
                 len);
    return NULL;
  }
  if (!g_utf8_validate (source, len, &bad)) {
    g_set_error (error, HONE_ERROR, HONE_ERROR_TEMPLATE_SYNTAX, _("chat template is not valid UTF-8 (byte %" "zu" ")"),
                 (gsize) (bad - source));
    return NULL;
  }
  /* jinja2 normalises \r\n and \r to \n and drops one trailing newline
   * (keep_trailing_newline=False) before lexing */
  norm = g_string_sized_new (len);
  for (i = 0; i < len; i++) {
    if (source[i] == '\r') {
      g_string_append_c (norm, '\n');
      if (i + 1 < len && source[i + 1] == '\n')
        i++;
    } else
      g_string_append_c (norm, source[i]);
  }
  if (norm->len > 0 && norm->str[norm->len - 1] == '\n')
    g_string_truncate (norm, norm->len - 1);
  root = hj_parse (norm->str, norm->len, error);
  g_string_free (norm, TRUE);
  if (!root)
    return NULL;
  tmpl = g_new0 (HoneChatTemplate, 1);
  tmpl->root = root;
  return tmpl;
}

void
hone_chat_template_free (HoneChatTemplate *tmpl)
{
  if (!tmpl)
    return;
  hj_node_free (tmpl->root);
  g_free (tmpl);
}

void
hone_chat_template_set_now (HoneChatTemplate *tmpl, gint64 unix_seconds)
{
  g_return_if_fail (tmpl != NULL);
  tmpl->opts.have_now = unix_seconds >= 0;
  tmpl->opts.now = unix_seconds;
}

static gboolean
set_json (HjValue *vars, const char *name, JsonNode *node, GError **error)
{
  HjValue *v = hj_from_json (node, 0);
  if (!v) {
    g_set_error (error, HONE_ERROR, HONE_ERROR_TEMPLATE_LIMIT, _("chat template input '%s' nests too deeply"), name);
    return FALSE;
  }
  hj_dict_set (vars, hj_string_new (name, -1), v);
  return TRUE;
}

char *
hone_chat_template_render (HoneChatTemplate *tmpl, JsonNode *messages, gboolean add_generation_prompt,
                           const char *bos_token, const char *eos_token, JsonObject *extra, GError **error)
{
  HjValue *vars;
  char *out = NULL;

  g_return_val_if_fail (tmpl != NULL, NULL);
  vars = hj_dict_new (FALSE);
  if (messages && !set_json (vars, "messages", messages, error))
    goto done;
  if (!messages)
    hj_dict_set (vars, hj_string_new ("messages", -1), hj_list_new (0, FALSE));
  hj_dict_set (vars, hj_string_new ("add_generation_prompt", -1), hj_bool (add_generation_prompt));
  if (bos_token && !g_utf8_validate (bos_token, -1, NULL))
    bos_token = NULL;
  if (eos_token && !g_utf8_validate (eos_token, -1, NULL))
    eos_token = NULL;
  hj_dict_set (vars, hj_string_new ("bos_token", -1), hj_string_new (bos_token ? bos_token : "", -1));
  hj_dict_set (vars, hj_string_new ("eos_token", -1), hj_string_new (eos_token ? eos_token : "", -1));
  /* transformers always passes these two */
  hj_dict_set (vars, hj_string_new ("tools", -1), hj_none ());
  hj_dict_set (vars, hj_string_new ("documents", -1), hj_none ());
  if (extra) {
    GList *members = json_object_get_members (extra), *l;
    for (l = members; l; l = l->next)
      if (!set_json (vars, l->data, json_object_get_member (extra, l->data), error)) {
        g_list_free (members);
        goto done;
      }
    g_list_free (members);
  }
  out = hj_render (tmpl->root, vars, &tmpl->opts, error);
done:
  hj_unref (vars);
  return out;
}
