/* hone-json.c — see hone-json.h. */
#include "hone-json.h"

#include <inttypes.h>
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
