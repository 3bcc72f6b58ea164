/* hone-cmd-tokenize.c — `hone tokenize`: text ↔ token ids with a model's tokenizer. */
#include <inttypes.h>
#include "hone-cli.h"
#include "hone-json.h"

#include <stdio.h>

static GArray *
parse_ids (const char *text, gsize len, int vocab, GError **error)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonNode *root;
  JsonArray *a;
  GArray *ids;

  if (!hone_json_load (parser, text, len, 16, error))
    {
      GError *e = *error;
      *error = g_error_new (HONE_ERROR, HONE_ERROR_INVALID_JSON, _("standard input is not JSON: %s"), e->message);
      g_error_free (e);
      return NULL;
    }
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_ARRAY (root))
    {
      g_set_error_literal (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("expected a JSON array of token ids"));
      return NULL;
    }
  a = json_node_get_array (root);
  ids = g_array_sized_new (FALSE, FALSE, sizeof (gint32), json_array_get_length (a));
  for (guint i = 0; i < json_array_get_length (a); i++)
    {
      JsonNode *n = json_array_get_element (a, i);
      gint64 v;
      gint32 id;
      if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_INT64)
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("element %u is not an integer"), i);
          g_array_unref (ids);
          return NULL;
        }
      v = json_node_get_int (n);
      if (v < 0 || v >= vocab)
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                       _("token id %" PRId64 " at position %u is outside the vocabulary (0..%d)"),
                       v, i, vocab - 1);
          g_array_unref (ids);
          return NULL;
        }
      id = (gint32) v;
      g_array_append_val (ids, id);
    }
  return ids;
}

int
hone_cmd_tokenize (int argc, char **argv)
{
  g_autofree char *model = NULL;
  gboolean decode = FALSE, no_special = FALSE;
  GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_FILENAME, &model, N_("Model whose tokenizer to use (default: the default model)"), N_("MODEL") },
    { "decode", 'd', 0, G_OPTION_ARG_NONE, &decode, N_("Read a JSON array of ids and print the text"), NULL },
    { "no-special", 0, 0, G_OPTION_ARG_NONE, &no_special,
      N_("Encoding: add no BOS/EOS and treat special-token text as plain text; decoding: leave special tokens out"), NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = hone_cli_context_new (NULL,
      _("Read text on standard input and print its token ids as a JSON array (or the reverse with --decode)."));
  g_autofree char *path = NULL;
  g_autofree char *input = NULL;
  g_autoptr (HoneModel) m = NULL;
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
  path = hone_cli_resolve_model (model, &error);
  if (path == NULL)
    return hone_cli_fail (error);
  m = hone_model_open (path, &error);
  if (m == NULL)
    return hone_cli_fail (error);
  input = hone_cli_read_stdin (&len, &error);
  if (input == NULL)
    return hone_cli_fail (error);

  if (decode)
    {
      g_autoptr (GArray) ids = parse_ids (input, len, hone_tokenizer_n_vocab (m->tokenizer), &error);
      g_autofree char *text = NULL;
      gsize out_len = 0;
      if (ids == NULL)
        return hone_cli_fail (error);
      text = hone_tokenizer_decode (m->tokenizer, (const gint32 *) (void *) ids->data, ids->len, no_special, &out_len);
      fwrite (text, 1, out_len, stdout);
      return 0;
    }
  else
    {
      g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint32));
      HoneEncodeFlags flags = no_special ? 0 : (HONE_ENCODE_ADD_SPECIAL | HONE_ENCODE_PARSE_SPECIAL);
      GString *out;
      if (!hone_tokenizer_encode (m->tokenizer, input, (gssize) len, flags, ids, &error))
        return hone_cli_fail (error);
      out = g_string_new ("[");
      for (guint i = 0; i < ids->len; i++)
        g_string_append_printf (out, i == 0 ? "%d" : ", %d", g_array_index (ids, gint32, i));
      g_string_append (out, "]\n");
      fputs (out->str, stdout);
      g_string_free (out, TRUE);
      return 0;
    }
}
