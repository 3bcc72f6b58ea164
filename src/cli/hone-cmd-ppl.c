/* hone-cmd-ppl.c — `hone ppl [-m MODEL | MODEL] FILE`: strided-window perplexity. */
#include <inttypes.h>
#include "hone-cli.h"

#include <stdio.h>
#include <unistd.h>

static void
show_progress (double fraction, gpointer data)
{
  fprintf (stderr, "\r%3.0f%%", 100 * fraction);
  fflush (stderr);
}

typedef struct {
  GMainContext *ctx;
  GAsyncResult *result;
} Wait;

static void
done (GObject *source, GAsyncResult *res, gpointer data)
{
  Wait *w = data;
  w->result = g_object_ref (res);
}

int
hone_cmd_ppl (int argc, char **argv)
{
  HoneCliModelOptions mo = { 0 };
  int stride = 0;
  gboolean json = FALSE;
  GOptionEntry entries[] = {
    { "stride", 's', 0, G_OPTION_ARG_INT, &stride, N_("Window stride in tokens (default: the context, no overlap)"), N_("S") },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, N_("Print JSON"), NULL },
    { "precise", 0, 0, G_OPTION_ARG_NONE, &mo.precise,
      N_("CPU: f32 activations in every matrix product (slower; for checking against a float reference)"), NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = hone_cli_context_new (_("[MODEL] FILE"),
      _("Perplexity of a text file, scored with strided windows of --context tokens "
        "(each window scores only the tokens the previous one did not). The model is -m MODEL, the first "
        "argument, or the default model."));
  g_autoptr (HoneEngine) engine = NULL;
  g_autofree char *text = NULL;
  g_autoptr (GArray) ids = NULL;
  HonePerplexityResult r = { 0 };
  GError *error = NULL;
  Wait w = { 0 };
  gsize len = 0;
  const char *file = NULL;
  int status = 0;
  gboolean ok;

  g_option_context_add_main_entries (ctx, entries, GETTEXT_PACKAGE);
  hone_cli_model_options_add (ctx, &mo, TRUE);
  if (!hone_cli_parse (ctx, &argc, &argv))
    return 1;
  /* hone ppl MODEL FILE, hone ppl -m MODEL FILE, or hone ppl FILE (the default model) */
  if (argc == 3 && mo.model == NULL)
    {
      mo.model = g_strdup (argv[1]);
      file = argv[2];
    }
  else if (argc == 2)
    file = argv[1];
  else
    {
      status = hone_cli_fail_literal (_("usage: hone ppl [-m MODEL | MODEL] FILE [--context N] [--stride S]"));
      goto out;
    }
  if (stride < 0)
    {
      status = hone_cli_fail_literal (_("--stride must be ≥ 0"));
      goto out;
    }
  if (!g_file_get_contents (file, &text, &len, &error))
    {
      status = hone_cli_fail (g_error_new (HONE_ERROR, HONE_ERROR_IO, "%s", error->message));
      g_clear_error (&error);
      goto out;
    }
  engine = hone_cli_load_engine (&mo, &error);
  if (engine == NULL)
    {
      status = hone_cli_fail (error);
      goto out;
    }
  ids = hone_engine_tokenize (engine, text, TRUE, FALSE, &error);
  if (ids == NULL)
    {
      status = hone_cli_fail (error);
      goto out;
    }
  w.ctx = g_main_context_new ();
  g_main_context_push_thread_default (w.ctx);
  hone_engine_perplexity_async (engine, (const gint32 *) (void *) ids->data, ids->len,
                                hone_engine_get_active_context_length (engine), stride,
                                isatty (STDERR_FILENO) && !json ? show_progress : NULL, NULL, NULL,
                                NULL, done, &w);
  while (w.result == NULL)
    g_main_context_iteration (w.ctx, TRUE);
  ok = hone_engine_perplexity_finish (engine, w.result, &r, &error);
  while (g_main_context_iteration (w.ctx, FALSE))
    ;
  g_main_context_pop_thread_default (w.ctx);
  g_main_context_unref (w.ctx);
  g_object_unref (w.result);
  if (isatty (STDERR_FILENO) && !json)
    fputs ("\r     \r", stderr);
  if (!ok)
    {
      status = hone_cli_fail (error);
      goto out;
    }
  if (json)
    printf ("{\"perplexity\": %.6f, \"tokens_scored\": %" PRId64 ", \"windows\": %d, "
            "\"context\": %d, \"stride\": %d, \"nll_sum\": %.6f, \"elapsed_ms\": %.1f}\n",
            r.perplexity, r.n_scored, r.n_windows, hone_engine_get_active_context_length (engine),
            stride > 0 ? stride : hone_engine_get_active_context_length (engine), r.nll_sum, r.elapsed_ms);
  else
    printf (_("perplexity %.4f over %" PRId64 " tokens scored (%d windows of %d, stride %d, %.1f s)\n"),
            r.perplexity, r.n_scored, r.n_windows, hone_engine_get_active_context_length (engine),
            stride > 0 ? stride : hone_engine_get_active_context_length (engine), r.elapsed_ms / 1000.0);

out:
  hone_cli_model_options_clear (&mo);
  return status;
}
