/* hone-cmd-info.c — `hone info MODEL`: the model card, without loading weights. */
#include "hone-cli.h"

#include <stdio.h>

int
hone_cmd_info (int argc, char **argv)
{
  int context = 0;
  gboolean json = FALSE;
  g_autofree char *model = NULL;
  GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_FILENAME, &model, N_("Model (or give it as the argument)"), N_("MODEL") },
    { "context", 'c', 0, G_OPTION_ARG_INT, &context, N_("Context length for the memory estimate (default: the model's)"), N_("N") },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, N_("Print JSON"), NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = hone_cli_context_new (_("[MODEL]"),
      _("Show a model's architecture, tensor types, parameter count, tokenizer, chat template and a memory estimate."));
  g_autoptr (HoneModelInfo) info = NULL;
  g_autofree char *path = NULL;
  GError *error = NULL;

  g_option_context_add_main_entries (ctx, entries, GETTEXT_PACKAGE);
  if (!hone_cli_parse (ctx, &argc, &argv))
    return 1;
  if (argc > 2 || (argc == 2 && model != NULL))
    return hone_cli_fail_literal (_("give one model"));
  if (context < 0)
    return hone_cli_fail_literal (_("--context must be ≥ 0"));
  path = hone_cli_resolve_model (argc == 2 ? argv[1] : model, &error);
  if (path == NULL)
    return hone_cli_fail (error);
  info = hone_model_info_new_for_path (path, &error);
  if (info == NULL)
    return hone_cli_fail (error);
  if (json)
    {
      g_autoptr (JsonNode) node = hone_model_info_to_json (info, context);
      g_autofree char *text = hone_cli_json_to_string (node, TRUE);
      printf ("%s\n", text);
    }
  else
    {
      g_autofree char *text = hone_model_info_to_text (info, context);
      fputs (text, stdout);
    }
  return 0;
}
