/* hone-cmd-chat.c — `hone chat`: an interactive, streaming conversation.
 *
 * One HoneSession holds the whole conversation, so each turn prefills only
 * the new tokens. Standard input is watched from the main loop (lines are
 * queued and handled one at a time, after the previous answer), so the loop
 * also sees SIGINT: Ctrl-C during an answer cancels that answer only; at the
 * prompt it ends the program.
 */
#include "hone-cli.h"

#include <glib-unix.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>

typedef struct {
  GMainLoop *loop;
  HoneEngine *engine;
  HoneSession *session;
  HoneSamplerParams params;
  GString *inbuf;               /* bytes read, not yet split into lines */
  GQueue lines;                 /* complete lines waiting */
  gboolean eof;
  guint watch;
  JsonArray *messages;          /* the conversation, system message first if any */
  char *system;
  GCancellable *answer;         /* non-NULL while an answer streams */
  gboolean interactive;
  int dropped_shown;            /* earlier messages the engine left out at the last answer */
  gboolean show_metrics;
  gboolean quitting;
  int status;
} Chat;

static void read_next (Chat *chat);

static void
add_message (JsonArray *messages, const char *role, const char *content)
{
  JsonObject *o = json_object_new ();
  json_object_set_string_member (o, "role", role);
  json_object_set_string_member (o, "content", content);
  json_array_add_object_element (messages, o);
}

static void
reset_conversation (Chat *chat)
{
  json_array_unref (chat->messages);
  chat->messages = json_array_new ();
  if (chat->system != NULL)
    add_message (chat->messages, "system", chat->system);
  chat->dropped_shown = 0;
  hone_session_reset (chat->session);
}

static void
print_piece (const char *piece, gint32 token, gpointer data)
{
  fputs (piece, stdout);
  fflush (stdout);
}

static void
answer_done (GObject *source, GAsyncResult *res, gpointer data)
{
  Chat *chat = data;
  GError *error = NULL;
  g_autoptr (HoneGenerateResult) r = hone_session_generate_finish (HONE_SESSION (source), res, &error);

  g_clear_object (&chat->answer);
  fputc ('\n', stdout);
  fflush (stdout);
  if (r == NULL)
    {
      /* The user's turn stays unanswered: drop it so a retry is clean. */
      guint n = json_array_get_length (chat->messages);
      if (n > 0)
        json_array_remove_element (chat->messages, n - 1);
      if (g_error_matches (error, HONE_ERROR, HONE_ERROR_CANCELLED))
        {
          if (chat->interactive)
            fprintf (stderr, "%s\n", _("[answer cancelled]"));
          g_error_free (error);
        }
      else
        {
          chat->status = hone_cli_fail (error);
          if (!chat->interactive)
            {
              g_main_loop_quit (chat->loop);
              return;
            }
        }
    }
  else
    {
      add_message (chat->messages, "assistant", r->text);
      hone_cli_note_stop (&r->metrics, hone_engine_get_active_context_length (chat->engine), chat->params.max_tokens,
                          TRUE);
      if (r->metrics.dropped_messages > chat->dropped_shown)   /* once each time more falls out */
        {
          fprintf (stderr, g_dngettext (GETTEXT_PACKAGE,
                                        "[%d earlier message left out to fit the context; /reset starts over]\n",
                                        "[%d earlier messages left out to fit the context; /reset starts over]\n",
                                        r->metrics.dropped_messages),
                   r->metrics.dropped_messages);
        }
      chat->dropped_shown = r->metrics.dropped_messages;
      if (chat->show_metrics)
        fprintf (stderr, _("[%d cached + %d prefilled tokens, TTFT %.0f ms, %.1f tok/s]\n"),
                 r->metrics.cached_tokens, r->metrics.prefill_tokens, r->metrics.ttft_ms, r->metrics.decode_tps);
    }
  if (!chat->quitting)
    read_next (chat);
}

static void
ask (Chat *chat, const char *text)
{
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_ARRAY);

  add_message (chat->messages, "user", text);
  json_node_set_array (node, chat->messages);
  chat->answer = g_cancellable_new ();
  hone_session_chat_async (chat->session, node, &chat->params, print_piece, NULL, NULL,
                           chat->answer, answer_done, chat);
}

static void
handle_line (Chat *chat, char *line)
{
  g_strstrip (line);
  if (line[0] == '\0')
    {
      read_next (chat);
      return;
    }
  if (g_str_equal (line, "/quit") || g_str_equal (line, "/exit"))
    {
      g_main_loop_quit (chat->loop);
      return;
    }
  if (g_str_equal (line, "/reset"))
    {
      reset_conversation (chat);
      if (chat->interactive)
        printf ("%s\n", _("[conversation cleared]"));
      read_next (chat);
      return;
    }
  if (g_str_has_prefix (line, "/system"))
    {
      const char *text = line + 7;
      while (*text == ' ')
        text++;
      g_free (chat->system);
      chat->system = *text != '\0' ? g_strdup (text) : NULL;
      reset_conversation (chat);
      if (chat->interactive)
        printf ("%s\n", chat->system != NULL ? _("[system message set; conversation cleared]")
                                             : _("[system message removed; conversation cleared]"));
      read_next (chat);
      return;
    }
  if (line[0] == '/')
    {
      fprintf (stderr, _("unknown command %s (commands: /reset, /system TEXT, /quit)\n"), line);
      read_next (chat);
      return;
    }
  ask (chat, line);
}

/* Take the next queued line, or wait for one (the stdin watch calls back). */
static gboolean waiting_for_line;

static void
read_next (Chat *chat)
{
  char *line = g_queue_pop_head (&chat->lines);

  if (line != NULL)
    {
      waiting_for_line = FALSE;
      handle_line (chat, line);
      g_free (line);
      return;
    }
  if (chat->eof)
    {
      if (chat->interactive)
        fputc ('\n', stdout);   /* Ctrl-D */
      g_main_loop_quit (chat->loop);
      return;
    }
  if (!waiting_for_line && chat->interactive)
    {
      fputs ("> ", stdout);
      fflush (stdout);
    }
  waiting_for_line = TRUE;
}

static gboolean
stdin_ready (int fd, GIOCondition cond, gpointer data)
{
  Chat *chat = data;
  char buf[4096];
  gssize n = read (fd, buf, sizeof buf);
  char *nl;

  if (n > 0)
    g_string_append_len (chat->inbuf, buf, n);
  else if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return G_SOURCE_CONTINUE;
  while ((nl = memchr (chat->inbuf->str, '\n', chat->inbuf->len)) != NULL)
    {
      g_queue_push_tail (&chat->lines, g_strndup (chat->inbuf->str, nl - chat->inbuf->str));
      g_string_erase (chat->inbuf, 0, nl - chat->inbuf->str + 1);
    }
  if (n <= 0)
    {
      /* End of input: a last line without a newline still counts. */
      if (chat->inbuf->len > 0)
        g_queue_push_tail (&chat->lines, g_strndup (chat->inbuf->str, chat->inbuf->len));
      g_string_truncate (chat->inbuf, 0);
      chat->eof = TRUE;
      chat->watch = 0;
    }
  if (waiting_for_line && chat->answer == NULL)
    read_next (chat);
  return n > 0 ? G_SOURCE_CONTINUE : G_SOURCE_REMOVE;
}

static gboolean
on_sigint (gpointer data)
{
  Chat *chat = data;

  if (chat->answer != NULL)
    g_cancellable_cancel (chat->answer);   /* this answer only */
  else
    {
      fputc ('\n', stdout);
      g_main_loop_quit (chat->loop);
    }
  return G_SOURCE_CONTINUE;
}

int
hone_cmd_chat (int argc, char **argv)
{
  HoneCliModelOptions mo = { 0 };
  HoneCliSampling so = { 0 };
  g_autofree char *system = NULL;
  gboolean metrics = FALSE;
  GOptionEntry entries[] = {
    { "system", 0, 0, G_OPTION_ARG_STRING, &system, N_("System message"), N_("TEXT") },
    { "metrics", 0, 0, G_OPTION_ARG_NONE, &metrics, N_("Print per-turn metrics on stderr"), NULL },
    { "precise", 0, 0, G_OPTION_ARG_NONE, &mo.precise,
      N_("CPU: f32 activations in every matrix product (slower; for checking against a float reference)"), NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = hone_cli_context_new (NULL,
      _("Chat with a model. Commands: /reset, /system TEXT, /quit. Ctrl-C stops an answer."));
  Chat chat = { 0 };
  GError *error = NULL;
  guint sig;

  g_option_context_add_main_entries (ctx, entries, GETTEXT_PACKAGE);
  hone_cli_model_options_add (ctx, &mo, TRUE);
  hone_cli_sampling_add (ctx, &so);
  if (!hone_cli_parse (ctx, &argc, &argv))
    {
      chat.status = 1;
      goto out;
    }
  if (argc > 1)
    {
      g_autofree char *msg = g_strdup_printf (_("unexpected argument “%s”"), argv[1]);
      chat.status = hone_cli_fail_literal (msg);
      goto out;
    }
  if (!hone_cli_sampling_to_params (&so, &chat.params, &error))
    {
      chat.status = hone_cli_fail (error);
      goto out;
    }
  chat.engine = hone_cli_load_engine (&mo, &error);
  if (chat.engine == NULL)
    {
      chat.status = hone_cli_fail (error);
      goto out;
    }
  if (hone_engine_get_model_info (chat.engine) != NULL
      && !hone_model_info_get_has_chat_template (hone_engine_get_model_info (chat.engine)))
    {
      chat.status = hone_cli_fail_literal (_("the model has no chat template; use “hone run” instead"));
      goto out;
    }
  chat.session = hone_session_new (chat.engine);
  chat.system = g_steal_pointer (&system);
  chat.messages = json_array_new ();
  if (chat.system != NULL)
    add_message (chat.messages, "system", chat.system);
  chat.interactive = isatty (STDIN_FILENO);
  chat.show_metrics = metrics;
  chat.loop = g_main_loop_new (NULL, FALSE);
  chat.inbuf = g_string_new (NULL);
  g_queue_init (&chat.lines);
  chat.watch = g_unix_fd_add (STDIN_FILENO, G_IO_IN | G_IO_HUP | G_IO_ERR, stdin_ready, &chat);
  sig = g_unix_signal_add (SIGINT, on_sigint, &chat);

  if (chat.interactive)
    printf ("%s\n", _("Type a message; /reset clears the conversation, /quit ends. Ctrl-C stops an answer."));
  read_next (&chat);
  g_main_loop_run (chat.loop);
  g_source_remove (sig);

  /* An answer still streaming (quit during it): cancel and wait for it. */
  chat.quitting = TRUE;
  if (chat.answer != NULL)
    {
      g_cancellable_cancel (chat.answer);
      while (chat.answer != NULL)
        g_main_context_iteration (NULL, TRUE);
    }

out:
  if (chat.watch != 0)
    g_source_remove (chat.watch);
  g_queue_clear_full (&chat.lines, g_free);
  if (chat.inbuf != NULL)
    g_string_free (chat.inbuf, TRUE);
  g_clear_object (&chat.session);
  g_clear_object (&chat.engine);
  g_clear_pointer (&chat.messages, json_array_unref);
  g_clear_pointer (&chat.loop, g_main_loop_unref);
  g_free (chat.system);
  hone_sampler_params_clear (&chat.params);
  hone_cli_model_options_clear (&mo);
  hone_cli_sampling_clear (&so);
  return chat.status;
}
