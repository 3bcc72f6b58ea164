/* hone-cmd-template.c — `hone template`: render a JSON conversation. */
#include "hone-cli.h"
#include "hone-json.h"

#include <stdio.h>

int
hone_cmd_template (int argc, char **argv)
{
  g_autofree char *model = NULL;
  g_autofree char *template_file = NULL;
  gboolean add_gen = FALSE;
  GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_FILENAME, &model, N_("Model whose chat template to use (default: the default model)"), N_("MODEL") },
    { "template", 0, 0, G_OPTION_ARG_FILENAME, &template_file, N_("Use this Jinja template file instead of the model's"), N_("FILE") },
    { "add-generation-prompt", 'g', 0, G_OPTION_ARG_NONE, &add_gen, N_("End with the assistant turn's opening"), NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = hone_cli_context_new (NULL,
      _("Read a conversation on standard input — a JSON array of {\"role\", \"content\"} objects, or an object "
        "with \"messages\" and other template variables — and print the rendered prompt."));
  g_autofree char *source = NULL;
  g_autofree char *input = NULL;
  g_autofree char *bos = NULL;
  g_autofree char *eos = NULL;
  g_autofree char *out = NULL;
  g_autoptr (HoneModel) m = NULL;
  g_autoptr (HoneChatTemplate) tmpl = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (JsonNode) messages = NULL;
  JsonObject *extra = NULL;
  JsonNode *root;
  GError *error = NULL;
  gsize len = 0;

  g_option_context_add_main_entries (ctx, entries, GETTEXT_PACKAGE);
  if (!hone_cli_parse (ctx, &argc, &argv))
    return 1;
  if (argc > 1)
    {
      g_autofree char *msg = g_strdup_printf (_("unexpected argument “%s”"), argv[1]);
      return hone_cli_fail_literal (msg);
    }
  if (template_file == NULL || model != NULL)
    {
      g_autofree char *path = hone_cli_resolve_model (model, &error);
      if (path == NULL)
        return hone_cli_fail (error);
      m = hone_model_open (path, &error);
      if (m == NULL)
        return hone_cli_fail (error);
      if (hone_tokenizer_bos (m->tokenizer) >= 0)
        bos = g_strdup (hone_tokenizer_token_text (m->tokenizer, hone_tokenizer_bos (m->tokenizer)));
      if (hone_tokenizer_eos (m->tokenizer) >= 0)
        eos = g_strdup (hone_tokenizer_token_text (m->tokenizer, hone_tokenizer_eos (m->tokenizer)));
    }
  if (template_file != NULL)
    {
      if (!g_file_get_contents (template_file, &source, NULL, &error))
        {
          GError *e = g_error_new (HONE_ERROR, HONE_ERROR_IO, "%s", error->message);
          g_error_free (error);
          return hone_cli_fail (e);
        }
    }
  else if (m->chat_template != NULL)
    source = g_strdup (m->chat_template);
  else
    return hone_cli_fail_literal (_("the model has no chat template (use --template FILE)"));

  tmpl = hone_chat_template_new (source, -1, &error);
  if (tmpl == NULL)
    return hone_cli_fail (error);

  input = hone_cli_read_stdin (&len, &error);
  if (input == NULL)
    return hone_cli_fail (error);
  if (!hone_json_load (parser, input, len, 64, &error))
    {
      GError *e = g_error_new (HONE_ERROR, HONE_ERROR_INVALID_JSON, _("standard input is not JSON: %s"), error->message);
      g_error_free (error);
      return hone_cli_fail (e);
    }
  root = json_parser_get_root (parser);
  if (root != NULL && JSON_NODE_HOLDS_OBJECT (root)
      && json_object_has_member (json_node_get_object (root), "messages"))
    {
      extra = json_node_get_object (root);
      messages = json_node_copy (json_object_get_member (extra, "messages"));
    }
  else if (root != NULL)
    messages = json_node_copy (root);
  if (messages == NULL || !JSON_NODE_HOLDS_ARRAY (messages))
    return hone_cli_fail_literal (_("expected a JSON array of messages (or an object with \"messages\")"));

  if (extra != NULL)
    {
      /* The other members become template variables; "messages" is passed
       * separately and the template interface ignores it in extra. */
      g_autoptr (JsonObject) vars = json_object_new ();
      g_autoptr (GList) members = json_object_get_members (extra);
      for (GList *l = members; l != NULL; l = l->next)
        if (g_strcmp0 (l->data, "messages") != 0)
          json_object_set_member (vars, l->data, json_node_copy (json_object_get_member (extra, l->data)));
      out = hone_chat_template_render (tmpl, messages, add_gen, bos, eos, vars, &error);
    }
  else
    out = hone_chat_template_render (tmpl, messages, add_gen, bos, eos, NULL, &error);
  if (out == NULL)
    return hone_cli_fail (error);
  fputs (out, stdout);
  return 0;
}
