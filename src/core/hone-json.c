/* hone-json.c — see hone-json.h. */
#include "hone-json.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>
#include "hone-error.h"
#include "hone-i18n.h"

int
hone_json_nesting_depth (const char *text, gsize length, int limit)
{
  int depth = 0, max_depth = 0;
  gboolean in_string = FALSE;

  for (gsize i = 0; i < length; i++)
    {
      char c = text[i];
      if (in_string)
        {
          if (c == '\\')
            i++;
          else if (c == '"')
            in_string = FALSE;
          continue;
        }
      if (c == '"')
        in_string = TRUE;
      else if (c == '{' || c == '[')
        {
          if (++depth > max_depth)
            max_depth = depth;
          if (max_depth > limit)
            return max_depth;
        }
      else if (c == '}' || c == ']')
        depth--;
    }
  return max_depth;
}

/* The 16-bit value of the 4 hex digits at @p (all of them there), or -1. */
static int
hex4 (const char *p, gsize left)
{
  int v = 0;

  if (left < 4)
    return -1;
  for (int i = 0; i < 4; i++)
    {
      const int d = g_ascii_xdigit_value (p[i]);
      if (d < 0)
        return -1;
      v = v * 16 + d;
    }
  return v;
}

/* The offset of the first escape inside a string that JSON does not have
 * (a lone surrogate counts), or -1 when there is none. */
static gssize
bad_escape (const char *text, gsize length)
{
  gboolean in_string = FALSE;

  for (gsize i = 0; i < length; i++)
    {
      const char c = text[i];
      if (!in_string)
        {
          in_string = c == '"';
          continue;
        }
      if (c == '"')
        {
          in_string = FALSE;
          continue;
        }
      if (c != '\\')
        continue;
      if (i + 1 >= length)
        return (gssize) i;
      switch (text[i + 1])
        {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
          i++;
          break;
        case 'u':
          {
            const int u = hex4 (text + i + 2, length - i - 2);
            if (u < 0 || (u >= 0xdc00 && u <= 0xdfff))
              return (gssize) i;
            if (u >= 0xd800 && u <= 0xdbff)   /* a high surrogate: a low one must follow */
              {
                const int lo = i + 7 < length && text[i + 6] == '\\' && text[i + 7] == 'u'
                                 ? hex4 (text + i + 8, length - i - 8) : -1;
                if (lo < 0xdc00 || lo > 0xdfff)
                  return (gssize) i;
                i += 6;
              }
            i += 5;
            break;
          }
        default:
          return (gssize) i;
        }
    }
  return -1;
}

gboolean
hone_json_load (JsonParser *parser, const char *text, gssize length, int max_depth, GError **error)
{
  gsize len;
  gssize at;

  g_return_val_if_fail (JSON_IS_PARSER (parser) && text != NULL, FALSE);
  len = length < 0 ? strlen (text) : (gsize) length;
  if (!g_utf8_validate (text, (gssize) len, NULL))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("the text is not UTF-8"));
      return FALSE;
    }
  if (hone_json_nesting_depth (text, len, max_depth) > max_depth)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("it nests deeper than %d levels"), max_depth);
      return FALSE;
    }
  if ((at = bad_escape (text, len)) >= 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON,
                   _("a string has an escape JSON does not allow at byte %" PRId64), (gint64) at);
      return FALSE;
    }
  return json_parser_load_from_data (parser, text, (gssize) len, error);
}

/* @o's member @name if it is a value of GType @type (G_TYPE_INVALID: any value), else NULL. */
static JsonNode *
member_value (JsonObject *o, const char *name, GType type)
{
  JsonNode *n = o && name ? json_object_get_member (o, name) : NULL;
  if (!n || !JSON_NODE_HOLDS_VALUE (n))
    return NULL;
  return type == G_TYPE_INVALID || json_node_get_value_type (n) == type ? n : NULL;
}

const char *
hone_json_get_string (JsonObject *o, const char *name, const char *dflt)
{
  JsonNode *n = member_value (o, name, G_TYPE_STRING);
  return n ? json_node_get_string (n) : dflt;
}

gint64
hone_json_get_int (JsonObject *o, const char *name, gint64 dflt)
{
  JsonNode *n = member_value (o, name, G_TYPE_INVALID);
  if (!n)
    return dflt;
  if (json_node_get_value_type (n) == G_TYPE_INT64)
    return json_node_get_int (n);
  if (json_node_get_value_type (n) == G_TYPE_DOUBLE)
    {
      const double v = json_node_get_double (n);
      if (v >= -9007199254740992.0 && v <= 9007199254740992.0 && v == (double) (gint64) v)
        return (gint64) v;
    }
  return dflt;
}

double
hone_json_get_double (JsonObject *o, const char *name, double dflt)
{
  JsonNode *n = member_value (o, name, G_TYPE_INVALID);
  if (n && json_node_get_value_type (n) == G_TYPE_INT64)
    return (double) json_node_get_int (n);
  if (n && json_node_get_value_type (n) == G_TYPE_DOUBLE && isfinite (json_node_get_double (n)))
    return json_node_get_double (n);   /* 1e400 parses to inf, which json-glib would write back as "inf" */
  return dflt;
}

gboolean
hone_json_get_bool (JsonObject *o, const char *name, gboolean dflt)
{
  JsonNode *n = member_value (o, name, G_TYPE_BOOLEAN);
  return n ? json_node_get_boolean (n) : dflt;
}

JsonObject *
hone_json_get_object (JsonObject *o, const char *name)
{
  JsonNode *n = o && name ? json_object_get_member (o, name) : NULL;
  return n && JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
}

JsonArray *
hone_json_get_array (JsonObject *o, const char *name)
{
  JsonNode *n = o && name ? json_object_get_member (o, name) : NULL;
  return n && JSON_NODE_HOLDS_ARRAY (n) ? json_node_get_array (n) : NULL;
}
