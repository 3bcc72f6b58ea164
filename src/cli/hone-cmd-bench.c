/* hone-cmd-bench.c — `hone bench`: the baseline protocol (see hone-bench.h). */
#include "hone-cli.h"

#include <stdio.h>
#include <unistd.h>

typedef struct {
  GAsyncResult *result;
} Wait;

static void
done (GObject *source, GAsyncResult *res, gpointer data)
{
  ((Wait *) data)->result = g_object_ref (res);
}

static void
show_progress (double fraction, gpointer data)
{
  fprintf (stderr, "\r%s %3.0f%%", _("benchmarking…"), 100 * fraction);
  fflush (stderr);
}

int
hone_cmd_bench (int argc, char **argv)
{
  HoneCliModelOptions mo = { 0 };
  HoneBenchParams bp;
  gboolean json = FALSE;
  GOptionEntry entries[] = {
    { "runs", 'r', 0, G_OPTION_ARG_INT, &bp.runs, N_("Measured runs (default 5)"), N_("N") },
    { "warmup", 'w', 0, G_OPTION_ARG_INT, &bp.warmup, N_("Warm-up runs, not counted (default 1)"), N_("W") },
    { "prompt-tokens", 'p', 0, G_OPTION_ARG_INT, &bp.prompt_tokens, N_("Prompt length in tokens (default 512)"), N_("N") },
    { "gen-tokens", 'n', 0, G_OPTION_ARG_INT, &bp.gen_tokens, N_("Tokens to generate per run (default 128)"), N_("N") },
    { "bandwidth", 'b', 0, G_OPTION_ARG_DOUBLE, &bp.bandwidth_gbs,
      /* xgettext:no-c-format */
      N_("Memory bandwidth in GB/s: print decode speed as a % of this roofline"), N_("GB/S") },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, N_("Print JSON"), NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = hone_cli_context_new (NULL,
      _("Run the baseline protocol: a fixed prompt, greedy decoding, --runs measured runs after --warmup; "
        "median and p10/p90 of TTFT, prefill and decode tok/s, prefill share and memory."));
  g_autoptr (HoneEngine) engine = NULL;
  g_autoptr (HoneBenchResult) r = NULL;
  g_autoptr (GMainContext) mctx = NULL;
  gboolean progress;
  GError *error = NULL;
  Wait w = { 0 };
  int status = 0;

  hone_bench_params_init (&bp);
  g_option_context_add_main_entries (ctx, entries, GETTEXT_PACKAGE);
  hone_cli_model_options_add (ctx, &mo, TRUE);
  if (!hone_cli_parse (ctx, &argc, &argv))
    return 1;
  if (argc > 1)
    {
      g_autofree char *msg = g_strdup_printf (_("unexpected argument “%s”"), argv[1]);
      status = hone_cli_fail_literal (msg);
      goto out;
    }
  engine = hone_cli_load_engine (&mo, &error);
  if (engine == NULL)
    {
      status = hone_cli_fail (error);
      goto out;
    }
  progress = isatty (STDERR_FILENO) && !json;
  mctx = g_main_context_new ();
  g_main_context_push_thread_default (mctx);
  hone_engine_bench_async (engine, &bp, progress ? show_progress : NULL, NULL, NULL, NULL, done, &w);
  while (w.result == NULL)
    g_main_context_iteration (mctx, TRUE);
  r = hone_engine_bench_finish (engine, w.result, &error);
  g_object_unref (w.result);
  while (g_main_context_iteration (mctx, FALSE))
    ;
  g_main_context_pop_thread_default (mctx);
  if (progress)
    fputs ("\r                         \r", stderr);
  if (r == NULL)
    {
      status = hone_cli_fail (error);
      goto out;
    }
  if (json)
    {
      g_autoptr (JsonNode) node = hone_bench_result_to_json (r);
      g_autofree char *text = hone_cli_json_to_string (node, TRUE);
      printf ("%s\n", text);
    }
  else
    {
      g_autofree char *text = hone_bench_result_to_text (r);
      fputs (text, stdout);
    }

out:
  hone_cli_model_options_clear (&mo);
  return status;
}
