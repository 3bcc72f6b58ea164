/* hone-cli.c — shared pieces of the `hone` subcommands. */
#include <inttypes.h>
#include "hone-cli.h"
#include "hone-backend.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

GOptionContext *
hone_cli_context_new (const char *parameter_string, const char *summary)
{
  GOptionContext *ctx = g_option_context_new (parameter_string);

  g_option_context_set_translation_domain (ctx, GETTEXT_PACKAGE);
  if (summary != NULL)
    g_option_context_set_summary (ctx, summary);
  return ctx;
}

gboolean
hone_cli_parse (GOptionContext *ctx, int *argc, char ***argv)
{
  GError *error = NULL;

  if (!g_option_context_parse (ctx, argc, argv, &error))
    {
      hone_cli_fail (error);
      return FALSE;
    }
  return TRUE;
}

void
hone_cli_model_options_add (GOptionContext *ctx, HoneCliModelOptions *o, gboolean with_model)
{
  GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_FILENAME, &o->model,
      N_("Model: a GGUF file or a Hugging Face folder (default: the default model)"), N_("MODEL") },
    { "threads", 't', 0, G_OPTION_ARG_INT, &o->threads, N_("CPU threads (0: one per usable CPU)"), N_("N") },
    { "context", 'c', 0, G_OPTION_ARG_INT, &o->context, N_("Context length in tokens"), N_("N") },
    { "device", 0, 0, G_OPTION_ARG_STRING, &o->device,
      N_("Device: auto (default: the first usable GPU, else the CPU), cpu or cuda:N"), N_("DEVICE") },
    { NULL },
  };

  g_option_context_add_main_entries (ctx, with_model ? entries : entries + 1, GETTEXT_PACKAGE);
}

void
hone_cli_model_options_clear (HoneCliModelOptions *o)
{
  g_clear_pointer (&o->model, g_free);
  g_clear_pointer (&o->device, g_free);
  g_clear_pointer (&o->device_note, g_free);
}

void
hone_cli_sampling_add (GOptionContext *ctx, HoneCliSampling *s)
{
  HoneSamplerParams d;
  GOptionGroup *group;
  GOptionEntry entries[] = {
    { "temp", 0, 0, G_OPTION_ARG_DOUBLE, &s->temp, N_("Temperature (0: greedy; default 0.8)"), N_("T") },
    { "top-k", 0, 0, G_OPTION_ARG_INT, &s->top_k, N_("Keep the K most likely tokens (0: off; default 40)"), N_("K") },
    { "top-p", 0, 0, G_OPTION_ARG_DOUBLE, &s->top_p, N_("Nucleus: keep tokens up to this mass (default 0.95)"), N_("P") },
    { "min-p", 0, 0, G_OPTION_ARG_DOUBLE, &s->min_p, N_("Drop tokens below P × the top probability (default 0.05)"), N_("P") },
    { "repeat-penalty", 0, 0, G_OPTION_ARG_DOUBLE, &s->repeat_penalty, N_("Repetition penalty (1: off)"), N_("X") },
    { "presence-penalty", 0, 0, G_OPTION_ARG_DOUBLE, &s->presence_penalty, N_("Presence penalty (0: off)"), N_("X") },
    { "frequency-penalty", 0, 0, G_OPTION_ARG_DOUBLE, &s->frequency_penalty, N_("Frequency penalty (0: off)"), N_("X") },
    { "repeat-last-n", 0, 0, G_OPTION_ARG_INT, &s->repeat_last_n, N_("Tokens the penalties look back over (default 64)"), N_("N") },
    { "seed", 0, 0, G_OPTION_ARG_INT64, &s->seed, N_("Random seed (default: random)"), N_("SEED") },
    { "n-predict", 'n', 0, G_OPTION_ARG_INT, &s->n_predict, N_("Maximum tokens to generate (0: until the end)"), N_("N") },
    { "stop", 0, 0, G_OPTION_ARG_STRING_ARRAY, &s->stop, N_("Stop at this text (repeatable)"), N_("TEXT") },
    { NULL },
  };

  hone_sampler_params_init (&d);
  s->temp = d.temperature;
  s->top_k = d.top_k;
  s->top_p = d.top_p;
  s->min_p = d.min_p;
  s->repeat_penalty = d.repeat_penalty;
  s->presence_penalty = d.presence_penalty;
  s->frequency_penalty = d.frequency_penalty;
  s->repeat_last_n = d.penalty_window;
  s->seed = -1;
  s->n_predict = 0;
  s->stop = NULL;
  group = g_option_group_new ("sampling", _("Sampling options:"), _("Show sampling options"), NULL, NULL);
  g_option_group_set_translation_domain (group, GETTEXT_PACKAGE);
  g_option_group_add_entries (group, entries);
  g_option_context_add_group (ctx, group);
}

void
hone_cli_sampling_clear (HoneCliSampling *s)
{
  g_clear_pointer (&s->stop, g_strfreev);
}

gboolean
hone_cli_sampling_to_params (const HoneCliSampling *s, HoneSamplerParams *p, GError **error)
{
  hone_sampler_params_init (p);
  if (s->seed < -1)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("invalid --seed %" PRId64 ": must be ≥ 0"), s->seed);
      return FALSE;
    }
  p->temperature = (float) s->temp;
  p->top_k = s->top_k;
  p->top_p = (float) s->top_p;
  p->min_p = (float) s->min_p;
  p->repeat_penalty = (float) s->repeat_penalty;
  p->presence_penalty = (float) s->presence_penalty;
  p->frequency_penalty = (float) s->frequency_penalty;
  p->penalty_window = s->repeat_last_n;
  p->seed = s->seed < 0 ? HONE_SAMPLER_SEED_RANDOM : (guint64) s->seed;
  p->max_tokens = s->n_predict;
  hone_sampler_params_set_stop (p, (const char *const *) s->stop);
  return hone_sampler_params_validate (p, error);
}

char *
hone_cli_resolve_model (const char *given, GError **error)
{
  if (given != NULL && *given != '\0')
    return g_strdup (given);
  return hone_default_model_find (error);
}

HoneEngine *
hone_cli_load_engine (HoneCliModelOptions *o, GError **error)
{
  g_autofree char *path = hone_cli_resolve_model (o->model, error);
  g_autoptr (HoneEngine) engine = NULL;

  if (path == NULL)
    return NULL;
  if (o->threads < 0 || o->context < 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("--threads and --context must be ≥ 0"));
      return NULL;
    }
  engine = hone_engine_new ();
  hone_engine_set_n_threads (engine, o->threads);
  hone_engine_set_context_length (engine, o->context);
  hone_engine_set_precise (engine, o->precise);
  hone_engine_set_device (engine, o->device != NULL ? o->device : "auto");
  if (!hone_engine_load_sync (engine, path, NULL, NULL, NULL, error))
    {
      if (g_error_matches (*error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY)
          && o->device != NULL && g_str_has_prefix (o->device, "cuda"))
        {
          /* TRANSLATORS: appended to a GPU out-of-memory error; keep the options untranslated */
          char *message = g_strdup_printf (_("%s (--device auto or cpu runs it on the CPU; a smaller "
                                             "--context needs less)"), (*error)->message);
          g_free ((*error)->message);
          (*error)->message = message;
        }
      return NULL;
    }
  g_clear_pointer (&o->device, g_free);
  g_clear_pointer (&o->device_note, g_free);
  g_object_get (engine, "active-device", &o->device, "device-note", &o->device_note, NULL);
  if (o->device_note != NULL)
    {
      fflush (stdout);
      /* TRANSLATORS: %s says why, e.g. "No NVIDIA driver is installed (no CUDA GPU to use)" */
      fprintf (stderr, _("hone: running on the CPU: %s\n"), o->device_note);
    }
  if (o->threads > hone_cpu_backend_default_threads () && g_strcmp0 (o->device, "cpu") == 0)
    {
      fflush (stdout);
      /* TRANSLATORS: both numbers are counts; "--threads 0" is an option, not to be translated */
      fprintf (stderr, _("hone: %d threads on %d usable CPUs: the threads take turns on the cores, which is "
                         "slower (--threads 0 starts one per usable CPU)\n"),
               o->threads, hone_cpu_backend_default_threads ());
    }
  return g_steal_pointer (&engine);
}

char *
hone_cli_read_stdin (gsize *length, GError **error)
{
  GString *s = g_string_new (NULL);
  char buf[65536];
  size_t n;

  while ((n = fread (buf, 1, sizeof buf, stdin)) > 0)
    g_string_append_len (s, buf, n);
  if (ferror (stdin))
    {
      g_set_error_literal (error, HONE_ERROR, HONE_ERROR_IO, _("cannot read standard input"));
      g_string_free (s, TRUE);
      return NULL;
    }
  if (length != NULL)
    *length = s->len;
  return g_string_free (s, FALSE);
}

int
hone_cli_fail_literal (const char *message)
{
  g_autofree char *one = g_strdup (message);

  g_strdelimit (one, "\r\n", ' ');
  g_strstrip (one);
  fflush (stdout);
  fprintf (stderr, "hone: %s\n", one);
  return 1;
}

void
hone_cli_note_stop (const HoneRequestMetrics *m, int context_length, int max_tokens, gboolean note_max_tokens)
{
  if (m->stop_reason == HONE_STOP_CONTEXT_FULL)
    fprintf (stderr, _("hone: the answer stopped because the context (%d tokens) is full; -c sets a longer one\n"),
             context_length);
  else if (m->stop_reason == HONE_STOP_MAX_TOKENS && note_max_tokens)
    fprintf (stderr, g_dngettext (GETTEXT_PACKAGE, "[answer cut at the -n limit of %d token]\n",
                                  "[answer cut at the -n limit of %d tokens]\n", max_tokens),
             max_tokens);
}

int
hone_cli_fail (GError *error)
{
  int status = hone_cli_fail_literal (error != NULL ? error->message : _("unknown error"));
  g_clear_error (&error);
  return status;
}

char *
hone_cli_json_to_string (JsonNode *node, gboolean pretty)
{
  g_autoptr (JsonGenerator) gen = json_generator_new ();

  json_generator_set_root (gen, node);
  json_generator_set_pretty (gen, pretty);
  return json_generator_to_data (gen, NULL);
}
