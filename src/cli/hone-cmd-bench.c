/* hone-cmd-bench.c — `hone bench`: the baseline protocol (see hone-bench.h). */
#include "hone-cli.h"
#include "hone-device-bandwidth.h"

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

/* The read bandwidth of @device ("cpu" or "cuda:N"), measured once and
 * cached, with a line saying where it comes from; 0 (and a line why) when it
 * cannot be had. */
static double
measure_roofline (const char *device, gboolean json)
{
  HoneDeviceBandwidth bw = { 0 };
  GError *error = NULL;
  double gbs = 0.0;

  if (!g_str_has_prefix (device, "cuda:") && !g_str_equal (device, "cpu"))
    return 0.0;
  if (hone_device_read_bandwidth (device, &bw, &error))
    {
      g_autofree char *cache = hone_device_bandwidth_cache_path ();
      gbs = bw.read_gbs;
      /* TRANSLATORS: "roofline: 4520 GB/s read bandwidth of NVIDIA H200, measured 2026-11-29T… (cached in …)" */
      if (bw.cached)
        fprintf (json ? stderr : stdout, _("roofline: %.0f GB/s read bandwidth of %s, measured %s (from %s)\n"),
                 bw.read_gbs, bw.device_name, bw.measured, cache);
      else
        fprintf (json ? stderr : stdout, _("roofline: %.0f GB/s read bandwidth of %s, measured %s (saved to %s)\n"),
                 bw.read_gbs, bw.device_name, bw.measured, cache);
    }
  else
    {
      fprintf (stderr, _("roofline unknown: %s\n"), error->message);
      g_error_free (error);
    }
  hone_device_bandwidth_clear (&bw);
  return gbs;
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
      N_("Memory bandwidth in GB/s: print decode speed as a % of this roofline "
         "(default: the device's read bandwidth, measured once and cached)"), N_("GB/S") },
    { "sample", 0, 0, G_OPTION_ARG_NONE, &bp.sampled,
      N_("Decode with the chat's default sampling (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05; fixed seed) "
         "instead of greedily"), NULL },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, N_("Print JSON"), NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = hone_cli_context_new (NULL,
      _("Run the baseline protocol: a fixed prompt, greedy decoding (--sample: the chat's default sampling), "
        "--runs measured runs after --warmup; median and p10/p90 of TTFT, prefill and decode tok/s, prefill "
        "share and memory."));
  g_autoptr (HoneEngine) engine = NULL;
  g_autoptr (HoneBenchResult) r = NULL;
  g_autoptr (GMainContext) mctx = NULL;
  gboolean progress;
  GError *error = NULL;
  Wait w = { 0 };
  int status = 0;
  gboolean roofline;
  g_autofree char *picked = NULL;

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
  if (!hone_bench_params_validate (&bp, &error))
    {
      status = hone_cli_fail (error);
      goto out;
    }
  /* The roofline is the device's measured read bandwidth, the GPU's or the
   * CPU's: measured before the load, while the memory for it is free, on the
   * device "auto" picks; again after the load if the model went elsewhere (a
   * GPU too small for it). */
  roofline = bp.bandwidth_gbs == 0.0;
  picked = hone_engine_pick_device (mo.device, NULL);
  if (roofline)
    bp.bandwidth_gbs = measure_roofline (picked, json);
  engine = hone_cli_load_engine (&mo, &error);
  if (engine != NULL && roofline && g_strcmp0 (mo.device, picked) != 0)
    bp.bandwidth_gbs = measure_roofline (mo.device, json);
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
