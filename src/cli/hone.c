/* hone.c — the `hone` command: dispatch to one subcommand. */
#include "hone-cli.h"

#include <locale.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  const char *name;
  int (*run) (int argc, char **argv);
  const char *summary;
} Subcommand;

static const Subcommand subcommands[] = {
  { "run", hone_cmd_run, N_("Generate text from a prompt") },
  { "chat", hone_cmd_chat, N_("Chat with a model interactively") },
  { "info", hone_cmd_info, N_("Show a model card and a memory estimate") },
  { "ppl", hone_cmd_ppl, N_("Measure perplexity over a text file") },
  { "tokenize", hone_cmd_tokenize, N_("Text on stdin to token ids (or back with --decode)") },
  { "template", hone_cmd_template, N_("Render a JSON conversation with a chat template") },
  { "bench", hone_cmd_bench, N_("Measure TTFT, prefill and decode speed, memory") },
  { "fetch", hone_cmd_fetch, N_("Download the default model") },
  { "quantize", hone_cmd_quantize, N_("Quantize to int4 with AWQ calibrated on your documents") },
  { "gen-model", hone_cmd_gen_model, N_("Write a random-weight GGUF with a known model's shapes") },
};

static void
usage (FILE *out)
{
  fprintf (out, "%s\n\n%s\n", _("Usage: hone COMMAND [OPTIONS…]"), _("Commands:"));
  for (guint i = 0; i < G_N_ELEMENTS (subcommands); i++)
    fprintf (out, "  %-10s %s\n", subcommands[i].name, _(subcommands[i].summary));
  fprintf (out, "\n%s\n", _("Run “hone COMMAND --help” for the options of a command."));
}

int
main (int argc, char **argv)
{
  setlocale (LC_ALL, "");
  bindtextdomain (GETTEXT_PACKAGE, HONE_LOCALEDIR);
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);
  g_set_prgname ("hone");

  if (argc < 2)
    {
      usage (stderr);
      return 1;
    }
  if (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0 || strcmp (argv[1], "help") == 0)
    {
      usage (stdout);
      return 0;
    }
  for (guint i = 0; i < G_N_ELEMENTS (subcommands); i++)
    if (strcmp (argv[1], subcommands[i].name) == 0)
      {
        /* Subcommand parsers see "hone run" as their program name. */
        g_autofree char *prg = g_strdup_printf ("hone %s", subcommands[i].name);
        g_set_prgname (prg);
        return subcommands[i].run (argc - 1, argv + 1);
      }
  {
    g_autofree char *msg = g_strdup_printf (_("unknown command “%s” (try “hone --help”)"), argv[1]);
    return hone_cli_fail_literal (msg);
  }
}
