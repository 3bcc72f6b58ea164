/* hone-cmd-run.c — `hone run`: one prompt, streamed answer (or JSON). */
#include "hone-cli.h"

#include <stdio.h>

static void
print_piece (const char *piece, gint32 token, gpointer data)
{
  fputs (piece, stdout);
  fflush (stdout);
}

static JsonNode *
ids_to_json (GArray *ids)
{
  JsonArray *a = json_array_sized_new (ids->len);
  JsonNode *n = json_node_new (JSON_NODE_ARRAY);

  for (guint i = 0; i < ids->len; i++)
    json_array_add_int_element (a, g_array_index (ids, gint32, i));
  json_node_take_array (n, a);
  return n;
}

static JsonNode *
result_to_json (const HoneGenerateResult *r, const char *model)
{
  JsonObject *o = json_object_new ();
  JsonNode *n = json_node_new (JSON_NODE_OBJECT);

  json_object_set_string_member (o, "model", model);
  json_object_set_member (o, "prompt_tokens", ids_to_json (r->prompt_tokens));
  json_object_set_member (o, "generated_tokens", ids_to_json (r->generated_tokens));
  json_object_set_string_member (o, "text", r->text);
  json_object_set_string_member (o, "stop_reason", hone_stop_reason_to_string (r->metrics.stop_reason));
  json_object_set_member (o, "metrics", hone_request_metrics_to_json (&r->metrics));
  json_node_take_object (n, o);
  return n;
}

/* A conversation of an optional system message and one user message. */
static JsonNode *
make_messages (const char *system, const char *user)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();

  json_builder_begin_array (b);
  if (system != NULL)
    {
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "role");
      json_builder_add_string_value (b, "system");
      json_builder_set_member_name (b, "content");
      json_builder_add_string_value (b, system);
      json_builder_end_object (b);
    }
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "role");
  json_builder_add_string_value (b, "user");
  json_builder_set_member_name (b, "content");
  json_builder_add_string_value (b, user);
  json_builder_end_object (b);
  json_builder_end_array (b);
  return json_builder_get_root (b);
}

int
hone_cmd_run (int argc, char **argv)
{
  HoneCliModelOptions mo = { 0 };
  HoneCliSampling so = { 0 };
  g_autofree char *prompt = NULL;
  g_autofree char *system = NULL;
  gboolean chat = FALSE, json = FALSE, metrics = FALSE;
  GOptionEntry entries[] = {
    { "prompt", 'p', 0, G_OPTION_ARG_STRING, &prompt, N_("The prompt (“-” reads standard input)"), N_("TEXT") },
    { "chat", 0, 0, G_OPTION_ARG_NONE, &chat, N_("Wrap the prompt in the model's chat template"), NULL },
    { "system", 0, 0, G_OPTION_ARG_STRING, &system, N_("System message (with --chat)"), N_("TEXT") },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, N_("Print prompt ids, generated ids, text and metrics as JSON"), NULL },
    { "metrics", 0, 0, G_OPTION_ARG_NONE, &metrics, N_("Print the request metrics on stderr"), NULL },
    { "precise", 0, 0, G_OPTION_ARG_NONE, &mo.precise,
      N_("CPU: f32 activations in every matrix product (slower; for checking against a float reference)"), NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = hone_cli_context_new (NULL, _("Generate text from a prompt."));
  g_autoptr (HoneEngine) engine = NULL;
  g_autoptr (HoneSession) session = NULL;
  g_autoptr (HoneGenerateResult) result = NULL;
  HoneSamplerParams params = { 0 };
  GError *error = NULL;
  int status = 0;

  g_option_context_add_main_entries (ctx, entries, GETTEXT_PACKAGE);
  hone_cli_model_options_add (ctx, &mo, TRUE);
  hone_cli_sampling_add (ctx, &so);
  if (!hone_cli_parse (ctx, &argc, &argv))
    {
      status = 1;
      goto out;
    }
  if (argc > 1)
    {
      g_autofree char *msg = g_strdup_printf (_("unexpected argument “%s”"), argv[1]);
      status = hone_cli_fail_literal (msg);
      goto out;
    }
  if (prompt == NULL)
    {
      status = hone_cli_fail_literal (_("no prompt: use -p TEXT"));
      goto out;
    }
  if (g_strcmp0 (prompt, "-") == 0)
    {
      g_free (prompt);
      prompt = hone_cli_read_stdin (NULL, &error);
      if (prompt == NULL)
        {
          status = hone_cli_fail (error);
          goto out;
        }
    }
  if (prompt[0] == '\0')
    {
      status = hone_cli_fail_literal (_("the prompt is empty"));
      goto out;
    }
  if (!hone_cli_sampling_to_params (&so, &params, &error))
    {
      status = hone_cli_fail (error);
      goto out;
    }
  engine = hone_cli_load_engine (&mo, &error);
  if (engine == NULL)
    {
      status = hone_cli_fail (error);
      goto out;
    }
  session = hone_session_new (engine);
  if (chat)
    {
      g_autoptr (JsonNode) messages = make_messages (system, prompt);
      result = hone_session_chat_sync (session, messages, &params, json ? NULL : print_piece, NULL, NULL, &error);
    }
  else
    result = hone_session_complete_sync (session, prompt, &params, json ? NULL : print_piece, NULL, NULL, &error);
  if (result == NULL)
    {
      if (!json)
        fputc ('\n', stdout);
      status = hone_cli_fail (error);
      goto out;
    }
  if (json)
    {
      g_autoptr (JsonNode) node = result_to_json (result, hone_engine_get_model_path (engine));
      g_autofree char *text = hone_cli_json_to_string (node, TRUE);
      printf ("%s\n", text);
    }
  else
    fputc ('\n', stdout);
  fflush (stdout);
  if (!json)   /* JSON output carries stop_reason itself */
    hone_cli_note_stop (&result->metrics, hone_engine_get_active_context_length (engine), params.max_tokens, FALSE);
  if (metrics)
    {
      const HoneRequestMetrics *m = &result->metrics;
      fprintf (stderr, _("TTFT %.1f ms, prefill %d tokens at %.1f tok/s, decode %d tokens at %.1f tok/s, "
                         "total %.1f ms, prefill share %.0f%%, memory peak %.1f MB\n"),
               m->ttft_ms, m->prefill_tokens, m->prefill_tps, m->decode_tokens, m->decode_tps,
               m->total_ms, 100 * m->prefill_share, m->memory_peak / 1e6);
    }

out:
  hone_sampler_params_clear (&params);
  hone_cli_model_options_clear (&mo);
  hone_cli_sampling_clear (&so);
  return status;
}
